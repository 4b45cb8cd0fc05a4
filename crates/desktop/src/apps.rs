//! The apps toolset (`local.apps`): `app_launch`, `app_switch`, `app_list`, `app_close`,
//! `window_manage`. Programs start from their desktop entry (or a path, or a name on PATH)
//! as argv — never through a shell; windows are handled through the window manager (EWMH).
//! A launch that is a command rather than an application is judged by the gate as one
//! ([`commands`]).

pub mod commands;

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use aai_sandbox::Contained as _;
use serde_json::{Map, Value, json};

use crate::desktop::backend::Desktop;
use crate::desktop::blocking;
use crate::desktop::x11::X11;
use crate::desktop::{DesktopConfig, Rect, Space, Window};
use crate::{Call, Setup, Toolset};

pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> =
    LazyLock::new(|| crate::shipped("local.apps", include_str!("../toolsets/apps.aai.json")));

/// The apps toolset.
pub struct Apps {
    config: DesktopConfig,
    desktop: Arc<Desktop>,
    setup: Setup,
}

impl Apps {
    pub fn new(setup: &Setup, display: &crate::Display) -> Self {
        Self {
            config: setup.desktop.clone(),
            desktop: display.clone(),
            setup: setup.clone(),
        }
    }
}

impl Toolset for Apps {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn drives_desktop(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        let (desktop, config, args, tool) = (
            self.desktop.clone(),
            self.config.clone(),
            call.args.clone(),
            call.tool.to_owned(),
        );
        // What an app is launched under: the sandbox, unless the user approved this very
        // launch outside it.
        let contain = if tool == "app_launch" {
            if aai_sandbox::profile::asks_outside(&args) {
                aai_sandbox::profile::check_outside(&args, call.approved).map(|()| None)
            } else {
                // A desktop program keeps the display and the session bus (see
                // `aai_contain::Profile::desktop`); a command-line one runs in exactly the
                // terminal's box.
                let argv = launch_argv(&args).unwrap_or_default();
                let desktop = commands::windowed(&argv);
                // A terminal emulator's shell would have the bus too: it gets the display only.
                let no_bus = commands::terminal_emulator(&argv);
                self.setup.containment(call.roots).map(|profile| {
                    profile.map(|p| aai_contain::Profile {
                        desktop,
                        no_bus,
                        ..p
                    })
                })
            }
        } else {
            Ok(None)
        };
        if let Some(os) = crate::desktop::remote::native() {
            return Box::pin(async move {
                crate::desktop::remote::call(os, &tool, &args, &config, Duration::from_secs(60))
                    .await
            });
        }
        let setup = self.setup.clone();
        Box::pin(async move {
            // A command-line launch gets the terminal's network too: a proxy of its own, which
            // lives as long as the program (a desktop program keeps the network as it is).
            let (contain, egress) = match contain {
                Ok(Some(mut profile)) if !profile.desktop => {
                    match aai_sandbox::egress::proxy(&setup.config.egress, &setup.home).await {
                        Ok(proxy) => {
                            profile.egress = proxy.as_ref().map(|p| p.addr.port());
                            (Ok(Some(profile)), proxy)
                        }
                        Err(error) => (Err(error), None),
                    }
                }
                other => (other, None),
            };
            blocking(move || {
                let x = desktop.x11()?;
                let space = Space::new(x.desktop(), config.max_edge());
                match tool.as_str() {
                    "app_list" => Ok(list(&x, &space, &args)),
                    "app_launch" => launch(&x, &space, &args, desktop.display(), contain?, egress),
                    "app_switch" => switch(&x, &space, &args),
                    "app_close" => close(&x, &args),
                    "window_manage" => manage(&x, &space, &args),
                    other => Err(crate::unknown(&DESCRIPTOR.app_id, other)),
                }
            })
            .await
        })
    }

    fn plan(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        target: Option<aai_descriptor::Platform>,
    ) -> Value {
        crate::desktop::remote::plan_for(&DESCRIPTOR.app_id, tool, args, &self.config, target)
    }

    fn doctor(&self) -> BoxFuture<'_, Vec<aai_toolset::Check>> {
        let desktop = self.desktop.clone();
        Box::pin(async move {
            let (status, wm) = blocking(move || Ok((desktop.describe(), desktop.window_manager())))
                .await
                .unwrap_or_else(|e| (Err(e.clone()), Err(e)));
            let entries = application_dirs()
                .iter()
                .filter_map(|d| std::fs::read_dir(d).ok())
                .flatten()
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "desktop"))
                .count();
            crate::tool_names(&DESCRIPTOR)
                .iter()
                .map(|tool| match (&status, &wm, tool.as_str()) {
                    (Err(why), _, _) => aai_toolset::Check::failed(tool, why.message.clone()),
                    (Ok(d), _, "app_launch") => aai_toolset::Check::ok(
                        tool,
                        format!("{entries} desktop entries, PATH; windows awaited on {d}"),
                    ),
                    (Ok(d), Ok(()), _) => {
                        aai_toolset::Check::ok(tool, format!("EWMH window manager on {d}"))
                    }
                    (Ok(_), Err(why), _) => aai_toolset::Check::failed(tool, why.message.clone()),
                })
                .collect()
        })
    }

    fn judged_as<'a>(
        &'a self,
        call: &'a Call<'a>,
    ) -> BoxFuture<'a, Result<Option<crate::Judged>, AaiError>> {
        Box::pin(async move {
            if call.tool != "app_launch" {
                return Ok(None);
            }
            let Ok(argv) = launch_argv(call.args) else {
                // Not startable: the call fails when it runs, and nothing starts.
                return Ok(None);
            };
            // A command-line program runs in exactly the terminal's box; a desktop program
            // (a terminal emulator told to run a command) keeps the display.
            let boxed = !commands::windowed(&argv);
            Ok(commands::as_command(&argv).map(|c| crate::Judged {
                boxed,
                ..crate::Judged::shell(c.command, c.why)
            }))
        })
    }

    fn must_ask<'a>(&'a self, call: &'a Call<'a>) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            (call.tool == "app_launch" && aai_sandbox::profile::asks_outside(call.args))
                .then(|| aai_sandbox::profile::outside_question(call.args))
        })
    }

    fn waits_ms(&self, tool: &str, args: &Map<String, Value>) -> u64 {
        match tool {
            "app_launch" => args.get("wait_ms").and_then(Value::as_u64).unwrap_or(5000),
            "app_close" => 6000,
            _ => 0,
        }
    }
}

fn invalid(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::InvalidParams, message)
}

fn text<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, AaiError> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| invalid(format!("`{name}` is required")))
}

/// An app's name as the agent sees it: the window's class (`XTerm`), else its instance.
fn app_name(window: &Window) -> String {
    if window.class.is_empty() {
        window.instance.clone()
    } else {
        window.class.clone()
    }
}

fn window_json(window: &Window, space: &Space) -> Value {
    json!({
        "title": window.title,
        "bounds": space.rect_to_agent(window.bounds).to_json(),
        "focused": window.focused,
        "minimized": window.minimized,
    })
}

/// The window whose title best matches `title` (exact, then starting with, then containing,
/// case-insensitive).
///
/// # Errors
/// WINDOW_NOT_FOUND-style INVALID_PARAMS naming the windows there are.
pub fn find_window(x: &X11, title: &str) -> Result<Window, AaiError> {
    let windows = x.windows();
    let wanted = title.to_lowercase();
    let rank = |w: &Window| {
        let t = w.title.to_lowercase();
        if t == wanted {
            Some(0)
        } else if t.starts_with(&wanted) {
            Some(1)
        } else if t.contains(&wanted) {
            Some(2)
        } else {
            None
        }
    };
    windows
        .iter()
        .filter_map(|w| rank(w).map(|r| (r, w)))
        .min_by_key(|(r, _)| *r)
        .map(|(_, w)| w.clone())
        .ok_or_else(|| not_found("window", title, &windows))
}

fn not_found(what: &str, name: &str, windows: &[Window]) -> AaiError {
    let mut titles: Vec<String> = windows
        .iter()
        .map(|w| format!("{:?} ({})", w.title, app_name(w)))
        .collect();
    titles.truncate(15);
    AaiError::new(
        ErrorKind::InvalidParams,
        format!(
            "no {what} matches {name:?}; the windows open are: {}. Call app_list to see them all.",
            if titles.is_empty() {
                "none".to_owned()
            } else {
                titles.join(", ")
            }
        ),
    )
}

/// The windows of the app `name` (class or instance, else part of a title).
fn app_windows(x: &X11, name: &str) -> Vec<Window> {
    let wanted = name.to_lowercase();
    let windows = x.windows();
    let by_app: Vec<Window> = windows
        .iter()
        .filter(|w| {
            w.class.to_lowercase() == wanted
                || w.instance.to_lowercase() == wanted
                || w.class.to_lowercase().contains(&wanted)
        })
        .cloned()
        .collect();
    if !by_app.is_empty() {
        return by_app;
    }
    windows
        .into_iter()
        .filter(|w| w.title.to_lowercase().contains(&wanted))
        .collect()
}

fn list(x: &X11, space: &Space, args: &Map<String, Value>) -> Value {
    let with_windows = args
        .get("include_windows")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // One entry per process (or per class when the window names no process).
    let mut apps: Vec<(String, Option<u32>, Vec<Window>)> = Vec::new();
    for window in x.windows() {
        let name = app_name(&window);
        match apps
            .iter_mut()
            .find(|(n, pid, _)| *pid == window.pid && (window.pid.is_some() || *n == name))
        {
            Some((_, _, windows)) => windows.push(window),
            None => apps.push((name, window.pid, vec![window])),
        }
    }
    json!({
        "apps": apps.iter().map(|(name, pid, windows)| {
            let mut app = json!({
                "name": name,
                "pid": pid,
                "focused": windows.iter().any(|w| w.focused),
                "window_count": windows.len(),
            });
            if with_windows {
                app["windows"] = windows.iter().map(|w| window_json(w, space)).collect();
            }
            app
        }).collect::<Vec<_>>(),
        "window_manager": x.has_window_manager(),
    })
}

/// Where desktop entries live: `$XDG_DATA_HOME/applications`, then each of `$XDG_DATA_DIRS`.
fn application_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| aai_toolset::user_home().join(".local/share"));
    let dirs = std::env::var("XDG_DATA_DIRS")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/usr/local/share:/usr/share".into());
    std::iter::once(home)
        .chain(dirs.split(':').map(PathBuf::from))
        .map(|d| d.join("applications"))
        .collect()
}

/// The keys of a desktop entry's `[Desktop Entry]` group, each with its first value.
pub(crate) fn entry_fields(path: &Path) -> Option<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut in_main = false;
    let mut fields = std::collections::HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_main = line == "[Desktop Entry]";
        } else if in_main && let Some((key, value)) = line.split_once('=') {
            fields
                .entry(key.trim().to_owned())
                .or_insert_with(|| value.to_owned());
        }
    }
    Some(fields)
}

/// A desktop entry's `Name` and `Exec`.
fn read_entry(path: &Path) -> Option<(String, String)> {
    let mut fields = entry_fields(path)?;
    Some((fields.remove("Name")?, fields.remove("Exec")?))
}

/// An `Exec` value as argv (the desktop entry spec's quoting), without field codes.
pub fn exec_argv(exec: &str) -> Vec<String> {
    let mut argv = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut started = false;
    let mut chars = exec.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            '\\' if quoted => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            ' ' | '\t' if !quoted => {
                if started || !current.is_empty() {
                    argv.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            // Field codes (%f %u %i %c %k …) stand for what a launcher passes: dropped.
            '%' => {
                if chars.next() == Some('%') {
                    current.push('%');
                }
            }
            _ => current.push(c),
        }
    }
    if started || !current.is_empty() {
        argv.push(current);
    }
    argv.retain(|a| !a.is_empty());
    argv
}

/// The argv that starts the app `name`: a path, a desktop entry (by its Name or file name),
/// or a program on PATH.
pub fn resolve_program(name: &str) -> Result<Vec<String>, AaiError> {
    if name.contains('/') {
        let path = Path::new(name);
        return if path.is_file() {
            Ok(vec![name.to_owned()])
        } else {
            Err(invalid(format!("{name:?} is not a file")))
        };
    }
    let wanted = name.to_lowercase();
    for dir in application_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            if path.extension().is_none_or(|e| e != "desktop") {
                continue;
            }
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let Some((entry_name, exec)) = read_entry(&path) else {
                continue;
            };
            if entry_name.to_lowercase() == wanted || stem == wanted {
                let argv = exec_argv(&exec);
                if !argv.is_empty() {
                    return Ok(argv);
                }
            }
        }
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    match on_path {
        Some(path) => Ok(vec![path.to_string_lossy().into_owned()]),
        None => Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!(
                "no application {name:?}: no desktop entry has that name and no program on PATH does"
            ),
        )),
    }
}

/// The argv an `app_launch` call starts: the program `name` resolves to, and `args`.
fn launch_argv(args: &Map<String, Value>) -> Result<Vec<String>, AaiError> {
    let name = text(args, "name")?;
    let extra: Vec<String> = args
        .get("args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut argv = resolve_program(name)?;
    argv.extend(extra);
    Ok(argv)
}

fn launch(
    x: &X11,
    space: &Space,
    args: &Map<String, Value>,
    display: Option<&str>,
    contain: Option<aai_contain::Profile>,
    egress: Option<Arc<aai_sandbox::proxy::Proxy>>,
) -> Result<Value, AaiError> {
    let name = text(args, "name")?;
    let argv = launch_argv(args)?;
    let before: Vec<u32> = x.windows().iter().map(|w| w.id).collect();
    // A group of its own, as a terminal session gets: the emergency stop ends it whole.
    #[cfg(target_os = "linux")]
    let group = aai_executor::cgroup::CallGroup::new();
    let (program, program_args) = match &contain {
        Some(profile) => {
            #[allow(unused_mut)]
            let mut profile = profile.clone();
            #[cfg(target_os = "linux")]
            {
                profile.cgroup = group.as_ref().map(aai_executor::cgroup::CallGroup::procs);
            }
            aai_sandbox::profile::wrap(&profile, &argv[0], &argv[1..])?
        }
        #[cfg(target_os = "linux")]
        None => match &group {
            Some(group) => group.wrap(&argv[0], &argv[1..]),
            None => (argv[0].clone(), argv[1..].to_vec()),
        },
        #[cfg(not(target_os = "linux"))]
        None => (argv[0].clone(), argv[1..].to_vec()),
    };
    let mut command = std::process::Command::new(&program);
    command
        .args(&program_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(display) = display {
        command.env("DISPLAY", display);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: the app outlives a cancelled call and the gateway's signals.
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|e| aai_toolset::failed(format!("cannot start {:?}: {e}", argv[0])))?;
    let pid = child.id();
    // Reap it when it exits, so it never lingers as a zombie; its group goes once empty.
    std::thread::spawn(move || {
        let _ = child.wait();
        drop(egress);
        #[cfg(target_os = "linux")]
        if let Some(group) = group {
            group.release();
        }
    });
    let wait = Duration::from_millis(args.get("wait_ms").and_then(Value::as_u64).unwrap_or(5000));
    let until = Instant::now() + wait;
    let window = loop {
        // A contained app runs under the sandbox launcher: its window is one of the
        // launcher's descendants'.
        let mut ours = vec![pid];
        #[cfg(target_os = "linux")]
        if contain.is_some() {
            ours.extend(aai_contain::procs::descendants(pid));
        }
        let found = x.windows().into_iter().find(|w| {
            w.pid.is_some_and(|p| ours.contains(&p)) || (!before.contains(&w.id) && w.pid.is_none())
        });
        if found.is_some() || Instant::now() >= until {
            break found;
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    // The app's own pid (its window's), not the launcher's, so app_list names the same one.
    let app_pid = window.as_ref().and_then(|w| w.pid).unwrap_or(pid);
    Ok(json!({
        "launched": name,
        "argv": argv,
        "pid": app_pid,
        "sandboxed": contain.is_some(),
        "window": window.map(|w| window_json(&w, space)),
    }))
}

fn switch(x: &X11, space: &Space, args: &Map<String, Value>) -> Result<Value, AaiError> {
    let name = text(args, "name")?;
    let windows = app_windows(x, name);
    let window = windows
        .iter()
        .find(|w| !w.minimized)
        .or(windows.first())
        .cloned()
        .ok_or_else(|| not_found("app", name, &x.windows()))?;
    let focused = x.activate(window.id)?;
    Ok(
        json!({"switched": app_name(&window), "window": window_json(&window, space), "focused": focused}),
    )
}

fn close(x: &X11, args: &Map<String, Value>) -> Result<Value, AaiError> {
    let name = text(args, "name")?;
    let force = args.get("force").and_then(Value::as_bool).unwrap_or(false);
    let windows = app_windows(x, name);
    if windows.is_empty() {
        return Err(not_found("app", name, &x.windows()));
    }
    for window in &windows {
        x.close(window.id)?;
    }
    let ids: Vec<u32> = windows.iter().map(|w| w.id).collect();
    let gone = |x: &X11| !x.windows().iter().any(|w| ids.contains(&w.id));
    let until = Instant::now() + Duration::from_secs(3);
    while !gone(x) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(25));
    }
    let mut forced = Vec::new();
    if !gone(x) && force {
        let mut pids: Vec<u32> = windows.iter().filter_map(|w| w.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            end_process(pid);
            forced.push(pid);
        }
        let until = Instant::now() + Duration::from_secs(2);
        while !gone(x) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    let closed = gone(x);
    let mut out =
        json!({"app": name, "closed": closed, "windows": ids.len(), "forced_pids": forced});
    if !closed {
        out["note"] = json!(if force {
            "some windows are still open"
        } else {
            "the app did not close (it may be asking to save); call again with force: true to end it"
        });
    }
    Ok(out)
}

/// SIGTERM, then SIGKILL if it is still there a second later.
#[cfg(unix)]
fn end_process(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    let pid = Pid::from_raw(raw);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        if kill(pid, None).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = kill(pid, Signal::SIGKILL);
}

#[cfg(not(unix))]
fn end_process(_pid: u32) {}

fn manage(x: &X11, space: &Space, args: &Map<String, Value>) -> Result<Value, AaiError> {
    let title = text(args, "window_title")?;
    let action = text(args, "action")?;
    let window = find_window(x, title)?;
    let bounds = args.get("bounds").and_then(Value::as_object);
    let number = |key: &str| bounds.and_then(|b| b.get(key)).and_then(Value::as_f64);
    let current = space.rect_to_agent(window.bounds);
    let done = match action {
        "maximize" => x.maximize(window.id, true)?,
        "minimize" => x.minimize(window.id)?,
        "restore" => x.maximize(window.id, false)? & x.activate(window.id)?,
        "focus" => x.activate(window.id)?,
        "move" | "resize" => {
            let (x0, y0, w, h) = if action == "move" {
                let (Some(nx), Some(ny)) = (number("x"), number("y")) else {
                    return Err(invalid("move needs bounds.x and bounds.y"));
                };
                (nx, ny, f64::from(current.width), f64::from(current.height))
            } else {
                let (Some(nw), Some(nh)) = (number("width"), number("height")) else {
                    return Err(invalid("resize needs bounds.width and bounds.height"));
                };
                (
                    number("x").unwrap_or(f64::from(current.x)),
                    number("y").unwrap_or(f64::from(current.y)),
                    nw,
                    nh,
                )
            };
            let (px, py) = space.to_physical(x0, y0);
            let target = Rect::new(
                px,
                py,
                (w / space.scale).round().max(1.0) as u32,
                (h / space.scale).round().max(1.0) as u32,
            );
            x.move_resize(window.id, target)?
        }
        other => return Err(invalid(format!("unknown action {other:?}"))),
    };
    let after = x
        .windows()
        .into_iter()
        .find(|w| w.id == window.id)
        .map(|w| window_json(&w, space));
    Ok(json!({"window": window.title, "action": action, "done": done, "now": after}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_lines_become_argv_without_field_codes() {
        assert_eq!(exec_argv("xterm -e top"), ["xterm", "-e", "top"]);
        assert_eq!(exec_argv("gedit %U"), ["gedit"]);
        assert_eq!(
            exec_argv(r#""/opt/My App/run" --name "a \"b\"" %f"#),
            ["/opt/My App/run", "--name", r#"a "b""#]
        );
        assert_eq!(exec_argv("printf 100%%"), ["printf", "100%"]);
        // A shell line stays words: nothing is interpreted.
        assert_eq!(exec_argv("sh -c 'a;b'"), ["sh", "-c", "'a;b'"]);
    }
}
