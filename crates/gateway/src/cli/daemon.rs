//! `aai-gateway serve|stop|resume|status`: the long-lived gateway and its controls.

use std::path::Path;
use std::process::ExitCode;

use aai_server::daemon;
use aai_server::daemon::{DEFAULT_LISTEN, http};
use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

/// Serves MCP over Streamable HTTP on `listen` until Ctrl+C, SIGTERM or `/control/shutdown`.
pub async fn serve(home: &Path, dev: bool, listen: Option<&str>) -> anyhow::Result<ExitCode> {
    if let Some(running) = aai_engine::runfiles::running(home) {
        anyhow::bail!(
            "a gateway is already serving at {} (pid {}); one per user serves every client",
            running.info.url,
            running.info.pid
        );
    }
    let cancel = CancellationToken::new();
    let (gateway, _registry, hub) = super::serve::start_gateway(home, dev, &cancel);
    // Clients that cannot ask the user wait in the approval queue, answered from anywhere.
    gateway.set_queue_approvals(true);
    watch_stop_hotkey(&gateway);
    watch_stop_signal(&gateway);
    let listening = http::serve(
        gateway.clone(),
        home,
        listen.unwrap_or(DEFAULT_LISTEN),
        cancel.clone(),
    )
    .await?;
    // Scheduled tasks run from here on (and the runs a killed daemon left resume).
    let _scheduler = aai_schedule::runner::spawn(gateway, hub, cancel.clone());
    // For the person who started it: where it is (the token stays in the 0600 file).
    eprintln!(
        "aai-gateway: serving MCP at {} (token in {})",
        listening.url,
        home.join("run").join("token").display()
    );
    let signals = cancel.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signals.cancel();
    });
    let result = listening.done.await.context("the server task failed")?;
    cancel.cancel();
    result?;
    Ok(ExitCode::SUCCESS)
}

/// SIGUSR1 presses the emergency stop: `aai-gateway stop`'s last way in when neither the
/// stop marker nor the daemon's endpoint can be reached.
#[cfg(unix)]
fn watch_stop_signal(gateway: &std::sync::Arc<aai_engine::pipeline::Gateway>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        return;
    };
    let gateway = gateway.clone();
    tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            gateway.emergency_stop("SIGUSR1 (aai-gateway stop)").await;
        }
    });
}

#[cfg(not(unix))]
fn watch_stop_signal(_: &std::sync::Arc<aai_engine::pipeline::Gateway>) {}

/// Ctrl+Shift+Esc presses the emergency stop, where an X display lets the gateway grab it.
fn watch_stop_hotkey(gateway: &std::sync::Arc<aai_engine::pipeline::Gateway>) {
    if !gateway.config().desktop.stop_hotkey || std::env::var_os("DISPLAY").is_none() {
        return;
    }
    let handle = tokio::runtime::Handle::current();
    let stopping = gateway.clone();
    let watched = aai_desktop::desktop::hotkey::watch(None, move || {
        let gateway = stopping.clone();
        handle.spawn(async move {
            gateway.emergency_stop("Ctrl+Shift+Esc").await;
        });
    });
    match watched {
        Ok(_) => tracing::info!("Ctrl+Shift+Esc is the emergency stop"),
        Err(error) => tracing::warn!(
            "{}; the emergency stop is `aai-gateway stop` and the dashboard",
            error.message
        ),
    }
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

/// Which control a command sends.
pub enum Control {
    Stop,
    Resume,
    Status,
    Approvals,
    /// One waiting approval, whole.
    ShowApproval {
        id: String,
    },
    Answer {
        id: String,
        answer: String,
    },
    /// A one-time dashboard login link, opened in the browser unless `open` is false.
    Dashboard {
        open: bool,
    },
}

/// Sends a control request to the running daemon and prints its answer.
pub async fn control(home: &Path, what: Control) -> anyhow::Result<ExitCode> {
    match what {
        Control::Stop => return stop(home).await,
        Control::Resume => return resume(home).await,
        _ => {}
    }
    let Some(running) = aai_engine::runfiles::running(home) else {
        if matches!(what, Control::Status) && super::output::json() {
            super::output::value(&serde_json::json!({
                "running": false,
                "stopped": aai_engine::control::marker(home).is_some(),
            }));
            return Ok(ExitCode::from(1));
        }
        if matches!(what, Control::Status) && aai_engine::control::marker(home).is_some() {
            super::output::line(
                "no gateway daemon is running; EMERGENCY STOP ON for every gateway of this user (`aai-gateway resume` lifts it)",
            );
            return Ok(ExitCode::SUCCESS);
        }
        anyhow::bail!(
            "no gateway daemon is running for {} (start one with `aai-gateway serve`); gateways that MCP clients started on stdio without a daemon stop when their client closes them",
            home.display()
        );
    };
    let base = running.info.url.trim_end_matches("/mcp").to_owned();
    let client = daemon::forward::loopback_client()?;
    // The status takes the MCP token; everything else here answers for the person and takes
    // the control credential (checked before the command ran).
    let credential = match what {
        // The person's own credential where it can be read (its own rate bucket), else the
        // MCP token.
        Control::Status => {
            aai_engine::control::credential(home).unwrap_or_else(|_| running.token.clone())
        }
        _ => aai_engine::control::credential(home)?,
    };
    let request = match &what {
        Control::Stop | Control::Resume => unreachable!("handled above"),
        Control::Status => client.get(format!("{base}/control/status")),
        Control::Approvals | Control::ShowApproval { .. } => {
            client.get(format!("{base}/control/approvals"))
        }
        Control::Dashboard { .. } => client.post(format!("{base}/control/login")),
        Control::Answer { id, answer } => client
            .post(format!("{base}/control/approvals/answer"))
            .json(&serde_json::json!({"id": id, "answer": answer})),
    };
    let body = answer(request, &credential, &base).await?;
    if super::output::json() && !matches!(what, Control::Dashboard { .. }) {
        let data = match &what {
            Control::Status => {
                let mut status = body.clone();
                status["running"] = serde_json::json!(true);
                status["url"] = serde_json::json!(running.info.url);
                status["pid"] = serde_json::json!(running.info.pid);
                status
            }
            Control::ShowApproval { id } => body["pending"]
                .as_array()
                .and_then(|pending| pending.iter().find(|a| a["id"] == id.as_str()))
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("no approval {id} is waiting"))?,
            _ => body,
        };
        super::output::value(&data);
        return Ok(ExitCode::SUCCESS);
    }
    let text = match what {
        Control::Stop | Control::Resume => unreachable!("handled above"),
        Control::Approvals => super::output::approvals(body["pending"].as_array()),
        Control::ShowApproval { id } => super::output::approval(body["pending"].as_array(), &id)?,
        Control::Answer { .. } => format!(
            "answered {} with {}; the agent resumes the call with its id",
            body["answered"].as_str().unwrap_or_default(),
            body["answer"].as_str().unwrap_or_default()
        ),
        Control::Dashboard { open } => {
            let url = body["url"].as_str().unwrap_or_default();
            // Once opened, the link is not printed: a one-time code on the screen could be
            // read by an agent's screenshot before the browser has used it. Nor is it handed to
            // the browser as an argument (every process can read another's arguments): the
            // browser opens a private page that posts the code.
            if open
                && let Some(page) = login_page(home, url)
                && open_in_browser(&format!("file://{}", page.display()))
            {
                "opened the dashboard in your browser (a one-time login, used by the browser)"
                    .to_owned()
            } else {
                format!("open the dashboard: {url}\n(a one-time login link, valid for 2 minutes)")
            }
        }
        Control::Status => format!(
            "serving at {} (pid {}, version {}; {} MCP sessions open){}{}",
            running.info.url,
            running.info.pid,
            body["version"].as_str().unwrap_or("?"),
            body["sessions"].as_u64().unwrap_or(0),
            if body["stopped"] == true {
                "; EMERGENCY STOP ON (`aai-gateway resume` lifts it)"
            } else {
                ""
            },
            body["config_problem"]
                .as_str()
                .map(|problem| format!(
                    "\nconfig.json is invalid, so the last good config stays in force: {problem} (`aai-gateway config check`)"
                ))
                .unwrap_or_default()
        ),
    };
    super::output::line(&text);
    Ok(ExitCode::SUCCESS)
}

/// Sends a control `request` with `credential` and returns the daemon's answer; a refusal
/// becomes the error it names.
async fn answer(
    request: reqwest::RequestBuilder,
    credential: &str,
    base: &str,
) -> anyhow::Result<serde_json::Value> {
    let response = request
        .bearer_auth(credential)
        .timeout(http::CONTROL_TIMEOUT)
        .send()
        .await
        .with_context(|| format!("the gateway at {base} did not answer"))?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    anyhow::ensure!(
        status.is_success(),
        "{}",
        body["error"]
            .as_str()
            .map_or_else(|| format!("the gateway refused: {status}"), str::to_owned)
    );
    Ok(body)
}

/// Writes the page that logs the browser in by posting `link`'s code to the dashboard, as a
/// 0600 file under `AAI_HOME/run` (which contained processes cannot read); pages left from
/// earlier logins are removed (their codes are used or expired).
fn login_page(home: &Path, link: &str) -> Option<std::path::PathBuf> {
    let (action, code) = link.split_once("?code=")?;
    let safe = |text: &str| {
        text.chars()
            .all(|c| c.is_ascii_alphanumeric() || ":/.[]-_".contains(c))
    };
    if !safe(action) || !safe(code) {
        return None;
    }
    let run = home.join("run");
    for entry in std::fs::read_dir(&run).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("login-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let page = run.join(format!(
        "login-{}.html",
        &aai_engine::private::new_token()[..16]
    ));
    let html = format!(
        "<!doctype html><meta charset=utf-8><title>aai-gateway dashboard</title>\
         <body onload=\"document.forms[0].submit()\"><form method=post action=\"{action}\">\
         <input type=hidden name=code value=\"{code}\"><noscript><button>Open the dashboard</button></noscript></form>"
    );
    aai_engine::private::write_private(&page, html.as_bytes()).ok()?;
    Some(page)
}

/// Writes the stop marker; where the run folder was made unwritable (its mode changed), its
/// mode is set back to 0700 and the marker written again.
fn write_marker(home: &Path) -> std::io::Result<()> {
    match aai_engine::control::write_marker(home, "aai-gateway stop") {
        Ok(()) => Ok(()),
        Err(first) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                let run = home.join("run");
                if std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).is_ok()
                    && aai_engine::control::write_marker(home, "aai-gateway stop").is_ok()
                {
                    tracing::warn!(run = %run.display(), "the run folder's mode had been changed; set back to 0700");
                    return Ok(());
                }
            }
            Err(first)
        }
    }
}

/// The emergency stop, from the command line. Every way that can land is tried, and the
/// output says which did: the stop marker (every gateway of this user sees it within
/// [`aai_engine::control::MARKER_EVERY`], whatever state the daemon's listener is in), the
/// daemon's stop endpoint, and a signal to the daemon (SIGUSR1). It fails only when none
/// landed, naming each failure.
async fn stop(home: &Path) -> anyhow::Result<ExitCode> {
    let since = std::time::SystemTime::now();
    let already = aai_engine::control::marker(home).is_some();
    let marker = if already { Ok(()) } else { write_marker(home) };
    let mut landed: Vec<&str> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    match &marker {
        Ok(()) => landed.push("the stop marker"),
        Err(error) => failed.push(format!(
            "the stop marker {} could not be written ({error})",
            aai_engine::control::stop_marker(home).display()
        )),
    }
    let Some(running) = aai_engine::runfiles::running(home) else {
        if marker.is_err() {
            anyhow::bail!(
                "the emergency stop did not land: {}; and no daemon runs. Check the folder's owner and mode, then run `aai-gateway stop` again",
                failed.join("; ")
            );
        }
        super::output::line(
            "emergency stop on (by the stop marker): every gateway of this user refuses calls until `aai-gateway resume` (no daemon runs; gateways that clients started stop within 0.1 s)",
        );
        return Ok(ExitCode::SUCCESS);
    };
    let report = home
        .join("run")
        .join(format!("stopped.{}", running.info.pid));
    let fresh = || -> Option<serde_json::Value> {
        let modified = std::fs::metadata(&report).ok()?.modified().ok()?;
        if modified < since {
            return None;
        }
        serde_json::from_slice(&std::fs::read(&report).ok()?).ok()
    };
    let mut body = None;
    if !already && marker.is_ok() {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while std::time::Instant::now() < until {
            if let Some(found) = fresh() {
                body = Some(found);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    if body.is_none() {
        // Already on, or the daemon did not confirm through the marker: ask it directly.
        let base = running.info.url.trim_end_matches("/mcp").to_owned();
        let client = daemon::forward::loopback_client()?;
        let answered = client
            .post(format!("{base}/control/stop"))
            .json(&serde_json::json!({"by": "aai-gateway stop"}))
            .timeout(std::time::Duration::from_secs(2))
            .send()
            .await;
        match answered {
            Ok(response) if response.status().is_success() => {
                landed.push("the daemon's stop endpoint");
                body = response.json().await.ok();
            }
            Ok(response) => failed.push(format!(
                "the daemon's stop endpoint answered {}",
                response.status()
            )),
            Err(error) => failed.push(format!("the daemon's stop endpoint: {error}")),
        }
    }
    if body.is_none() && marker.is_err() {
        match signal_stop(running.info.pid) {
            Ok(()) => landed.push("SIGUSR1 to the daemon"),
            Err(error) => failed.push(format!(
                "SIGUSR1 to the daemon (pid {}): {error}",
                running.info.pid
            )),
        }
    }
    if landed.is_empty() {
        anyhow::bail!("the emergency stop did not land: {}", failed.join("; "));
    }
    let how = landed.join(" and ");
    let text = match body {
        Some(body) => format!(
            "emergency stop on (by {how}): {} process(es) killed, {} key(s)/button(s) released in {} ms; nothing runs until `aai-gateway resume`",
            body["killed"], body["input_released"], body["took_ms"]
        ),
        None => format!(
            "emergency stop on (by {how}; every gateway refuses calls as soon as it looks); the daemon (pid {}) did not confirm what it killed",
            running.info.pid
        ),
    };
    super::output::line(&text);
    for problem in &failed {
        eprintln!("aai-gateway: also tried: {problem}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Sends the daemon SIGUSR1, its emergency stop.
#[cfg(target_os = "linux")]
fn signal_stop(pid: u32) -> std::io::Result<()> {
    aai_contain::procs::send_stop(pid)
}

#[cfg(not(target_os = "linux"))]
fn signal_stop(_: u32) -> std::io::Result<()> {
    Err(std::io::Error::other("not sent on this system"))
}

/// Lifts the emergency stop everywhere: the marker goes, and the daemon is told at once.
async fn resume(home: &Path) -> anyhow::Result<ExitCode> {
    let credential = aai_engine::control::credential(home)?;
    let mut resumed = aai_engine::control::clear_marker(home);
    for entry in std::fs::read_dir(home.join("run"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if entry.file_name().to_string_lossy().starts_with("stopped.") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    if let Some(running) = aai_engine::runfiles::running(home) {
        let base = running.info.url.trim_end_matches("/mcp").to_owned();
        let client = daemon::forward::loopback_client()?;
        let body = answer(
            client.post(format!("{base}/control/resume")),
            &credential,
            &base,
        )
        .await?;
        resumed |= body["resumed"] == true;
    }
    super::output::line(if resumed {
        "emergency stop lifted: calls run again"
    } else {
        "the emergency stop was not on"
    });
    Ok(ExitCode::SUCCESS)
}

/// Opens `url` with the desktop's browser; false when it could not be (no desktop session, no
/// opener, or the opener said it failed), so the caller prints the link instead of claiming a
/// browser opened. The URL is one argument of the opener, never shell text.
fn open_in_browser(url: &str) -> bool {
    let (program, args): (&str, &[&str]) = if cfg!(target_os = "macos") {
        ("open", &[])
    } else if cfg!(windows) {
        ("rundll32", &["url.dll,FileProtocolHandler"])
    } else {
        // xdg-open without a desktop session falls back to text browsers in this very
        // terminal, or fails after a while: neither opens the dashboard.
        if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
            return false;
        }
        ("xdg-open", &[])
    };
    let Ok(mut opener) = std::process::Command::new(program)
        .args(args)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return false;
    };
    // Openers hand the URL to the browser and exit, with a status that says whether that
    // worked; one still running after a few seconds has started a browser that stays.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match opener.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}
