//! The input toolset (`local.input`): mouse and keyboard through XTEST.
//!
//! Points are in the agent's space. Input is refused while a protected app's window is
//! focused, or when a click would land on one — no grant allows it. A call that is cancelled,
//! times out or fails releases every key and button it pressed.
//!
//! Input is judged by where it lands ([`landing`]): keys going to a terminal emulator's window
//! are judged by the gate as `bash_execute` of the line they type or submit ([`line`]) — the
//! same risk, classifier and grants — and input aimed at the gateway's own dashboard or
//! consent dialog is refused. The judgement is made again when the call runs: a call whose
//! target became a terminal (or whose line changed) since it was judged is refused.

pub mod landing;
pub mod line;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use serde_json::{Map, Value, json};

use crate::desktop::backend::Desktop;
use crate::desktop::blocking;
use crate::desktop::keys;
use crate::desktop::x11::{Held, X11};
use crate::desktop::{DesktopConfig, Space, Window};
use crate::{Call, Setup, Toolset};

pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> =
    LazyLock::new(|| crate::shipped("local.input", include_str!("../toolsets/input.aai.json")));

/// Pointer steps of a smooth move or a drag are this far apart in time.
const STEP: Duration = Duration::from_millis(10);

/// The input toolset.
pub struct Input {
    config: DesktopConfig,
    desktop: Arc<Desktop>,
    typing: Arc<Typing>,
}

impl Input {
    pub fn new(setup: &Setup, display: &crate::Display) -> Self {
        Self {
            config: setup.desktop.clone(),
            desktop: display.clone(),
            typing: Arc::default(),
        }
    }
}

/// What the input tools remember about terminals: each terminal window's pending line, and
/// the judgements the gate was given, to check again when the calls run.
#[derive(Default)]
struct Typing {
    /// By window id. Held while a call that lands on a terminal runs, so its check, its keys
    /// and the line's update are one step.
    lines: Mutex<HashMap<u32, line::Line>>,
    /// The latest judgements, by call (caller, tool, arguments).
    judged: Mutex<VecDeque<(String, Verdict)>>,
}

/// Judgements kept for the run-time check; older ones are dropped (their calls are refused
/// if they ever run, and can be made again).
const KEPT_VERDICTS: usize = 64;

/// Where one call lands and what it does there.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    landing: landing::Landing,
    /// What it does to a terminal's line (for input landing on one).
    effect: Option<line::Effect>,
}

fn call_key(caller: &str, tool: &str, args: &Map<String, Value>) -> String {
    format!("{caller}\u{0}{tool}\u{0}{}", Value::Object(args.clone()))
}

impl Typing {
    /// Where `tool` with `args` lands on this desktop now.
    fn verdict(
        &self,
        x: &X11,
        config: &DesktopConfig,
        tool: &str,
        args: &Map<String, Value>,
        lines: &HashMap<u32, line::Line>,
    ) -> Result<Verdict, AaiError> {
        let space = Space::new(x.desktop(), config.max_edge());
        let at = |kx: &str, ky: &str| -> Result<Option<Window>, AaiError> {
            let (px, py) = space.to_physical(number(args, kx)?, number(args, ky)?);
            Ok(x.window_at(px, py))
        };
        let line_of = |id: u32| lines.get(&id).cloned().unwrap_or_default();
        let verdict = |window: Option<&Window>, effect: &dyn Fn(&line::Line) -> line::Effect| {
            let landing = landing::landing(window);
            let effect = match &landing {
                landing::Landing::Terminal { window, .. } => Some(effect(&line_of(*window))),
                _ => None,
            };
            Verdict { landing, effect }
        };
        Ok(match tool {
            "type_text" => {
                let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                let focused = x.windows().into_iter().find(|w| w.focused);
                verdict(focused.as_ref(), &|l| line::typed(l, text))
            }
            "key_press" | "hotkey" => {
                let syms: Vec<u32> = args
                    .get("keys")
                    .and_then(Value::as_array)
                    .map(|k| {
                        k.iter()
                            .filter_map(Value::as_str)
                            .filter_map(keys::keysym)
                            .collect()
                    })
                    .unwrap_or_default();
                let focused = x.windows().into_iter().find(|w| w.focused);
                verdict(focused.as_ref(), &|l| line::pressed(l, &syms))
            }
            // A right click opens a terminal's menu, whose Paste pastes.
            "right_click" => verdict(at("x", "y")?.as_ref(), &line::pasted),
            // Dropping dragged text into a terminal types it; a drag starting on the gateway's
            // window is refused like a click on it.
            "mouse_drag" => {
                let from = landing::landing(at("from_x", "from_y")?.as_ref());
                if matches!(from, landing::Landing::Gate { .. }) {
                    Verdict {
                        landing: from,
                        effect: None,
                    }
                } else {
                    verdict(at("to_x", "to_y")?.as_ref(), &line::pasted)
                }
            }
            // Clicking or scrolling a terminal types nothing; the gateway's windows are
            // refused all the same.
            "left_click" | "double_click" | "scroll" => {
                let landing = landing::landing(at("x", "y")?.as_ref());
                let landing = match landing {
                    landing::Landing::Terminal { .. } => landing::Landing::Elsewhere,
                    other => other,
                };
                Verdict {
                    landing,
                    effect: None,
                }
            }
            _ => Verdict {
                landing: landing::Landing::Elsewhere,
                effect: None,
            },
        })
    }

    fn remember(&self, key: String, verdict: Verdict) {
        let mut judged = self
            .judged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        judged.retain(|(k, _)| *k != key);
        judged.push_back((key, verdict));
        while judged.len() > KEPT_VERDICTS {
            judged.pop_front();
        }
    }

    /// Takes the judgement the gate was given for this call.
    fn take(&self, key: &str) -> Option<Verdict> {
        let mut judged = self
            .judged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = judged.iter().position(|(k, _)| k == key)?;
        judged.remove(at).map(|(_, v)| v)
    }
}

/// The refusal of input aimed at the gateway's own window.
fn gate_refusal(label: &str) -> AaiError {
    AaiError::new(
        ErrorKind::PermissionDenied,
        format!(
            "input to {label} is refused: it is the gateway's own window (its dashboard or a consent dialog), which only the user may answer; no approval can allow it."
        ),
    )
    .with_detail(json!({"reason": "gateway_window", "window": label}))
}

/// What the gate is told about input landing on a terminal.
fn judged_for(label: &str, effect: &line::Effect, contained: bool) -> crate::Judged {
    let mut judged = crate::Judged::shell(
        effect.command.clone(),
        format!(
            "This input goes to the terminal window {label}, where it runs as a shell command: it is judged as bash_execute of the text shown."
        ),
    );
    judged.ask_every_time = effect.unknown.map(str::to_owned).or_else(|| {
        // A terminal the gateway did not start contained (the user's own) runs what is typed
        // with the user's full rights, outside the sandbox — the gate's own command line
        // included: like `outside_sandbox`, that is asked every time and no grant covers it.
        (!contained).then(|| OUTSIDE.to_owned())
    });
    judged
}

/// Why input to an uncontained terminal is asked every time.
const OUTSIDE: &str = "this terminal window was not started inside the sandbox, so what is typed there runs with your full rights (it could even answer the gateway's own approvals); typing into it is asked every time";

/// Sets the flag when the call's future is dropped (cancelled, timed out): the blocking work
/// sees it between steps, stops, and releases what it holds.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Toolset for Input {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn drives_desktop(&self) -> bool {
        true
    }

    /// Releases every key and button held down on the desktop (the emergency stop, once the
    /// processes that might press them again are gone); how many. Nothing is done when input
    /// was never used.
    fn after_kill(&self) -> BoxFuture<'_, Option<(&'static str, Value)>> {
        Box::pin(async {
            let released = match self.desktop.connected() {
                Some(x) => tokio::task::spawn_blocking(move || x.release_all().unwrap_or(0))
                    .await
                    .unwrap_or(0),
                None => 0,
            };
            Some(("input_released", Value::from(released)))
        })
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        let stop = Arc::new(AtomicBool::new(false));
        let guard = StopOnDrop(stop.clone());
        let (desktop, config, args, tool) = (
            self.desktop.clone(),
            self.config.clone(),
            call.args.clone(),
            call.tool.to_owned(),
        );
        Box::pin(async move {
            let _guard = guard;
            if let Some(os) = crate::desktop::remote::native() {
                return crate::desktop::remote::call(
                    os,
                    &tool,
                    &args,
                    &config,
                    Duration::from_secs(60),
                )
                .await;
            }
            if desktop.wayland_only() {
                return wayland::run(&desktop, &config, &tool, &args, &stop).await;
            }
            let typing = self.typing.clone();
            let key = call_key(call.caller, call.tool, call.args);
            blocking(move || {
                let x = desktop.x11()?;
                let protected = x
                    .windows()
                    .into_iter()
                    .filter(|w| !w.minimized)
                    .filter_map(|w| config.protects(&w.title, &w.class).map(|pattern| (w, pattern)))
                    .collect();
                let work = Work {
                    x: &x,
                    space: Space::new(x.desktop(), config.max_edge()),
                    protected,
                    stop: &stop,
                };
                // Protected apps refuse first, whatever the judgement.
                work.refuse_protected(None)?;
                // The judgement is made again now: the target may have changed since the gate
                // judged the call (a window that took the focus, a line typed into meanwhile).
                let mut lines = typing
                    .lines
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let now = typing.verdict(&x, &config, &tool, &args, &lines)?;
                let judged = typing.take(&key);
                match &now.landing {
                    landing::Landing::Gate { label } => return Err(gate_refusal(label)),
                    landing::Landing::Terminal { label, .. } if judged.as_ref() != Some(&now) => {
                        return Err(AaiError::new(
                            ErrorKind::PermissionDenied,
                            format!(
                                "this input now goes to the terminal window {label}, which is not where it went when the call was judged (or that terminal's line changed since): it was not typed. Call it again to have it judged as a shell command."
                            ),
                        )
                        .with_detail(json!({"reason": "target_changed", "window": label})));
                    }
                    _ => {}
                }
                let result = work.run(&tool, &args);
                if let (landing::Landing::Terminal { window, .. }, Some(effect)) =
                    (&now.landing, &now.effect)
                {
                    // A call cut short leaves a line the gateway cannot know.
                    let after = match &result {
                        Ok(_) => effect.after.clone(),
                        Err(_) => line::Line {
                            unknown: true,
                            ..effect.after.clone()
                        },
                    };
                    let open: Vec<u32> = x.windows().iter().map(|w| w.id).collect();
                    lines.retain(|id, _| open.contains(id));
                    lines.insert(*window, after);
                }
                result
            })
            .await
        })
    }

    fn judged_as<'a>(
        &'a self,
        call: &'a Call<'a>,
    ) -> BoxFuture<'a, Result<Option<crate::Judged>, AaiError>> {
        let (desktop, config, typing) = (
            self.desktop.clone(),
            self.config.clone(),
            self.typing.clone(),
        );
        let (tool, args, key) = (
            call.tool.to_owned(),
            call.args.clone(),
            call_key(call.caller, call.tool, call.args),
        );
        Box::pin(async move {
            // Other systems' desktops do not say what a window runs; Wayland input is off
            // unless the user turns it on knowing no window can be checked.
            if crate::desktop::remote::native().is_some() || desktop.wayland_only() {
                return Ok(None);
            }
            blocking(move || {
                let Ok(x) = desktop.x11() else {
                    // No desktop: the call fails when it runs.
                    return Ok(None);
                };
                let verdict = {
                    let lines = typing
                        .lines
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    typing.verdict(&x, &config, &tool, &args, &lines)?
                };
                let judged = match (&verdict.landing, &verdict.effect) {
                    (landing::Landing::Gate { label }, _) => return Err(gate_refusal(label)),
                    (
                        landing::Landing::Terminal {
                            label, contained, ..
                        },
                        Some(effect),
                    ) => Some(judged_for(label, effect, *contained)),
                    _ => None,
                };
                typing.remember(key, verdict);
                Ok(judged)
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
            let status = blocking(move || Ok(desktop.describe()))
                .await
                .unwrap_or_else(Err);
            crate::tool_names(&DESCRIPTOR)
                .iter()
                .map(|tool| match &status {
                    Ok(d) => aai_toolset::Check::ok(tool, format!("XTEST on {d}")),
                    Err(why) => aai_toolset::Check::failed(tool, why.message.clone()),
                })
                .collect()
        })
    }

    fn waits_ms(&self, tool: &str, args: &Map<String, Value>) -> u64 {
        let number = |k: &str| args.get(k).and_then(Value::as_u64).unwrap_or(0);
        match tool {
            "mouse_move" | "mouse_drag" => number("duration_ms"),
            "type_text" => {
                let chars = args
                    .get("text")
                    .and_then(Value::as_str)
                    .map_or(0, |t| t.chars().count() as u64);
                chars * (number("delay_ms").max(10) + 10)
            }
            _ => 0,
        }
    }
}

fn invalid(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::InvalidParams, message)
}

fn number(args: &Map<String, Value>, name: &str) -> Result<f64, AaiError> {
    args.get(name)
        .and_then(Value::as_f64)
        .ok_or_else(|| invalid(format!("`{name}` is required")))
}

fn cancelled() -> AaiError {
    aai_toolset::failed("the call was cancelled; every key and button it pressed was released")
}

struct Work<'a> {
    x: &'a X11,
    space: Space,
    /// The protected apps' visible windows, with the pattern each matches.
    protected: Vec<(Window, String)>,
    stop: &'a AtomicBool,
}

impl Work<'_> {
    fn run(&self, tool: &str, args: &Map<String, Value>) -> Result<Value, AaiError> {
        self.refuse_protected(None)?;
        let mut held = self.x.hold();
        let result = match tool {
            "mouse_move" => self.mouse_move(args),
            "left_click" => self.click(&mut held, args, 1, 1),
            "right_click" => self.click(&mut held, args, 3, 1),
            "double_click" => self.click(&mut held, args, 1, 2),
            "mouse_drag" => self.drag(&mut held, args),
            "scroll" => self.scroll(&mut held, args),
            "type_text" => self.type_text(&mut held, args),
            "key_press" | "hotkey" => self.keys(&mut held, args),
            other => Err(crate::unknown(&DESCRIPTOR.app_id, other)),
        };
        drop(held);
        result
    }

    /// Refuses input while a protected app is focused, or aimed at one of its windows (the
    /// windows are looked at once per call, in `run`).
    fn refuse_protected(&self, at: Option<(i32, i32)>) -> Result<(), AaiError> {
        for (window, pattern) in &self.protected {
            // Its title bar and borders are its too: a click there closes or moves it.
            let aimed = at.is_some_and(|(px, py)| window.frame.contains(px, py));
            if window.focused || aimed {
                return Err(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "input to {:?} is refused: it is a protected app (matches {pattern:?} in desktop.protected_apps); no approval can allow it. Ask the user to do this part themselves.",
                        window.title
                    ),
                )
                .with_detail(json!({"reason": "protected_app", "window": window.title})));
            }
        }
        Ok(())
    }

    fn point(&self, args: &Map<String, Value>, x: &str, y: &str) -> Result<(i32, i32), AaiError> {
        Ok(self.space.to_physical(number(args, x)?, number(args, y)?))
    }

    fn position(&self) -> Result<Value, AaiError> {
        let (px, py, _) = self.x.pointer()?;
        let (ax, ay) = self.space.to_agent(px, py);
        Ok(json!({"x": ax, "y": ay}))
    }

    /// Moves the pointer to `to` in steps over `duration` (at once when zero).
    fn glide(&self, to: (i32, i32), duration: Duration) -> Result<(), AaiError> {
        let (fx, fy, _) = self.x.pointer()?;
        let steps = (duration.as_millis() / STEP.as_millis()).max(1) as i32;
        let started = Instant::now();
        for step in 1..=steps {
            if self.stop.load(Ordering::SeqCst) {
                return Err(cancelled());
            }
            // Ease in and out: slow at both ends, like a hand.
            let t = f64::from(step) / f64::from(steps);
            let e = t * t * (3.0 - 2.0 * t);
            let px = fx + (f64::from(to.0 - fx) * e).round() as i32;
            let py = fy + (f64::from(to.1 - fy) * e).round() as i32;
            self.x.move_to(px, py)?;
            if step < steps {
                let due = STEP * step as u32;
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
        self.x.sync()
    }

    fn mouse_move(&self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let to = self.point(args, "x", "y")?;
        let smooth = args.get("smooth").and_then(Value::as_bool).unwrap_or(true);
        let ms = args
            .get("duration_ms")
            .and_then(Value::as_u64)
            .unwrap_or(100);
        self.glide(to, Duration::from_millis(if smooth { ms } else { 0 }))?;
        Ok(json!({"success": true, "position": self.position()?}))
    }

    fn modifiers(&self, args: &Map<String, Value>) -> Result<Vec<u32>, AaiError> {
        args.get("modifiers")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|m| {
                        m.as_str()
                            .and_then(keys::keysym)
                            .filter(|s| keys::is_modifier(*s))
                            .ok_or_else(|| {
                                invalid(format!("{m} is not a modifier (shift, ctrl, alt, cmd)"))
                            })
                    })
                    .collect()
            })
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    fn click(
        &self,
        held: &mut Held<'_>,
        args: &Map<String, Value>,
        button: u8,
        times: u8,
    ) -> Result<Value, AaiError> {
        let at = self.point(args, "x", "y")?;
        self.refuse_protected(Some(at))?;
        let modifiers = self.modifiers(args)?;
        self.x.move_to(at.0, at.1)?;
        let codes = modifiers
            .iter()
            .map(|sym| self.keycode(*sym))
            .collect::<Result<Vec<_>, _>>()?;
        for code in &codes {
            held.key(*code, true)?;
        }
        for n in 0..times {
            if n > 0 {
                std::thread::sleep(Duration::from_millis(40));
            }
            held.button(button, true)?;
            held.button(button, false)?;
        }
        for code in codes.iter().rev() {
            held.key(*code, false)?;
        }
        self.x.sync()?;
        Ok(json!({"success": true, "position": self.position()?}))
    }

    fn keycode(&self, sym: u32) -> Result<u8, AaiError> {
        // Through a throwaway hold: only the keycode lookup is wanted here.
        self.x.keycode_of(sym)
    }

    fn drag(&self, held: &mut Held<'_>, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let from = self.point(args, "from_x", "from_y")?;
        let to = self.point(args, "to_x", "to_y")?;
        self.refuse_protected(Some(from))?;
        self.refuse_protected(Some(to))?;
        let ms = args
            .get("duration_ms")
            .and_then(Value::as_u64)
            .unwrap_or(500);
        self.x.move_to(from.0, from.1)?;
        held.button(1, true)?;
        self.x.sync()?;
        self.glide(to, Duration::from_millis(ms))?;
        held.button(1, false)?;
        self.x.sync()?;
        Ok(json!({"success": true, "position": self.position()?}))
    }

    fn scroll(&self, held: &mut Held<'_>, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let at = self.point(args, "x", "y")?;
        self.refuse_protected(Some(at))?;
        let button = match args.get("direction").and_then(Value::as_str) {
            Some("up") => 4,
            Some("down") => 5,
            Some("left") => 6,
            Some("right") => 7,
            other => {
                return Err(invalid(format!(
                    "direction {other:?}: up, down, left or right"
                )));
            }
        };
        let amount = args
            .get("amount")
            .and_then(Value::as_u64)
            .unwrap_or(3)
            .min(100);
        self.x.move_to(at.0, at.1)?;
        for _ in 0..amount {
            if self.stop.load(Ordering::SeqCst) {
                return Err(cancelled());
            }
            held.button(button, true)?;
            held.button(button, false)?;
            self.x.flush()?;
            std::thread::sleep(Duration::from_millis(5));
        }
        self.x.sync()?;
        Ok(json!({"success": true, "position": self.position()?, "steps": amount}))
    }

    fn type_text(&self, held: &mut Held<'_>, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("`text` is required"))?;
        let delay =
            Duration::from_millis(args.get("delay_ms").and_then(Value::as_u64).unwrap_or(10));
        // The text was judged for the window focused when the call began: if another window
        // takes the focus while it is typed, the rest is not typed into that one.
        let target = self.x.active();
        let mut typed = 0usize;
        for c in text.chars() {
            if self.stop.load(Ordering::SeqCst) {
                return Err(cancelled());
            }
            if self.x.active() != target {
                return Err(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "another window took the focus while the text was typed; {typed} characters were typed, the rest was not. Look at the screen and call again."
                    ),
                )
                .with_detail(json!({"reason": "focus_moved", "typed": typed})));
            }
            if c == '\r' {
                continue;
            }
            held.tap_keysym(keys::char_keysym(c))?;
            typed += 1;
            self.x.sync()?;
            std::thread::sleep(delay);
        }
        Ok(json!({"success": true, "typed": typed}))
    }

    fn keys(&self, held: &mut Held<'_>, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let names: Vec<&str> = args
            .get("keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if names.is_empty() {
            return Err(invalid(
                "`keys` needs at least one key, e.g. [\"ctrl\", \"s\"]",
            ));
        }
        let syms = names
            .iter()
            .map(|name| {
                keys::keysym(name).ok_or_else(|| {
                    invalid(format!(
                        "unknown key {name:?}: use names like ctrl, shift, alt, cmd, enter, tab, esc, backspace, delete, up, f5, or one character"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let codes = syms
            .iter()
            .map(|s| self.keycode(*s))
            .collect::<Result<Vec<_>, _>>()?;
        for code in &codes {
            held.key(*code, true)?;
        }
        for code in codes.iter().rev() {
            held.key(*code, false)?;
        }
        self.x.sync()?;
        Ok(json!({"success": true, "keys": names}))
    }
}

/// Mouse and keyboard on Wayland, through the RemoteDesktop portal session.
mod wayland;
