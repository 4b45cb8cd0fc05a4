//! Runs `"automation": "atspi"` tools: each step finds its element in the running
//! application's accessibility tree by a path of roles and names
//! ([`aai_descriptor::ui::UiPath`]) and invokes it, sets its text or value, selects it, reads it,
//! or waits for it — all through AT-SPI on the accessibility bus, never by coordinates.
//! Argument values travel only as D-Bus arguments (text, values) and as names to compare.

pub mod bus;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use aai_descriptor::ui::{Segment, UiAction, UiPath, UiStep};
use aai_descriptor::{AaiError, ErrorKind, Platform};
use serde_json::{Map, Value, json};

pub use bus::{A11yBus, Node};

use crate::ui_program::{Bound, bind};
use crate::{BoxFuture, Executor, Invocation};

/// Elements looked at, at most, to find one segment.
const NODE_CAP: usize = 5000;
/// How often `wait` and `gone` look again.
const POLL: Duration = Duration::from_millis(50);

/// Runs accessibility tools.
pub struct AtspiExecutor {
    /// The session bus address; `None` takes it from the environment.
    session_bus: Option<String>,
    bus: tokio::sync::Mutex<Option<A11yBus>>,
    protection: Protection,
}

/// The protected-app patterns (lower case) the accessibility executor refuses to operate: an
/// application whose name or window title contains one (a password manager, a bank) is not
/// driven, whatever a descriptor says. The gateway keeps them to its config as it changes.
/// A click by pointer lands on whatever window is on top where it lands, so the gateway also
/// hands in a look at the screen ([`WindowAt`]), and a click that would land on a protected
/// app's window is refused.
#[derive(Clone, Default)]
pub struct Protection {
    patterns: Arc<RwLock<Vec<String>>>,
    window_at: Arc<RwLock<Option<WindowAt>>>,
}

/// The topmost window at a point of the screen (physical pixels, as the accessibility bus
/// gives extents), `None` where no window is; an error when the screen cannot be looked at.
pub type WindowAt = Arc<dyn Fn(i32, i32) -> Result<Option<OnTop>, String> + Send + Sync>;

/// The window a click at a point would land on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnTop {
    pub title: String,
    /// Its application class (X11 `WM_CLASS`).
    pub class: String,
    /// Whether it is one of the gateway's own (its consent dialog, its dashboard).
    pub gateway: bool,
    /// The process that owns it, as the display server knows it.
    pub pid: Option<u32>,
}

impl Protection {
    /// Puts `patterns` in force.
    pub fn set(&self, patterns: Vec<String>) {
        *self
            .patterns
            .write()
            .unwrap_or_else(PoisonError::into_inner) = patterns
            .into_iter()
            .map(|p| p.to_lowercase())
            .filter(|p| !p.trim().is_empty())
            .collect();
    }

    /// How to tell which window a click at a point would land on.
    pub fn look_with(&self, window_at: WindowAt) {
        *self
            .window_at
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(window_at);
    }

    /// The patterns in force (lower case), for a program that checks the names it finds
    /// itself (the UI Automation and AX executors').
    pub fn patterns(&self) -> Vec<String> {
        self.patterns
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The pattern one of `names` (an application's, its windows') contains, if any.
    pub fn protects<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Option<String> {
        let patterns = self.patterns.read().unwrap_or_else(PoisonError::into_inner);
        names.into_iter().find_map(|name| {
            let name = name.to_lowercase();
            patterns.iter().find(|p| name.contains(p.as_str())).cloned()
        })
    }

    /// Judges a click at `(x, y)` by the window on top there. PERMISSION_DENIED when it
    /// would land on a protected app's window or on one of the gateway's own (its consent
    /// dialog: no tool answers the gateway's questions), or when the screen cannot be looked
    /// at (the click is not made blind); AUTOMATION_FAILED when that window belongs to
    /// another process than `app_pid`'s (another app's window covers the one the tool drives:
    /// the click would reach an app nobody chose).
    ///
    /// # Errors
    /// The refusal, naming the window and why.
    pub fn refuse_point(&self, x: i32, y: i32, app_pid: Option<u32>) -> Result<(), AaiError> {
        let look = self
            .window_at
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let blind = |why: &str| {
            AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "a click by pointer is refused: which window it would land on cannot be told ({why}), and it might be a protected app's or the gateway's own"
                ),
            )
        };
        let Some(look) = look else {
            return Err(blind("this gateway has no look at the screen"));
        };
        let Some(window) = look(x, y).map_err(|why| blind(&why))? else {
            return Ok(());
        };
        if window.gateway {
            return Err(AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "a click at ({x}, {y}) would land on {:?}, the gateway's own window: only the person answers the gateway's questions",
                    window.title
                ),
            )
            .with_detail(json!({"reason": "gateway_window", "window": window.title})));
        }
        match self.protects([window.title.as_str(), window.class.as_str()]) {
            Some(pattern) => Err(AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "a click at ({x}, {y}) would land on {:?}, a protected app (matches {pattern:?} in `desktop.protected_apps`) whose window is on top there; no approval can allow it. Ask the user to move that window or do this part themselves.",
                    window.title
                ),
            )
            .with_detail(json!({"reason": "protected_app", "window": window.title}))),
            None => match (window.pid, app_pid) {
                (Some(on_top), Some(app)) if on_top != app => Err(AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!(
                        "a click at ({x}, {y}) would land on {:?}, another app's window over the one this tool drives: bring the app's window to the front (local.apps) or move the other, then call again",
                        window.title
                    ),
                )
                .with_detail(json!({"reason": "covered", "window": window.title}))),
                _ => Ok(()),
            },
        }
    }
}

impl AtspiExecutor {
    pub fn new(session_bus: Option<String>) -> Self {
        Self {
            session_bus,
            bus: tokio::sync::Mutex::new(None),
            protection: Protection::default(),
        }
    }

    /// The protected-app patterns this executor honours.
    pub fn protection(&self) -> Protection {
        self.protection.clone()
    }

    /// The accessibility bus, connected once and again after it failed.
    async fn bus(&self) -> Result<A11yBus, AaiError> {
        let mut held = self.bus.lock().await;
        if let Some(bus) = held.as_ref() {
            return Ok(bus.clone());
        }
        let bus = A11yBus::connect(self.session_bus.as_deref()).await?;
        *held = Some(bus.clone());
        Ok(bus)
    }

    async fn forget(&self) {
        *self.bus.lock().await = None;
    }
}

/// The application a call drives and its steps bound to the call's arguments (as data, by
/// the same binding the UI Automation and AX executors use).
fn prepared<'a>(invocation: &Invocation<'a>) -> Result<(&'a str, Vec<Bound<'a>>), AaiError> {
    let (section, tool) = crate::section_tool(
        invocation.descriptor.platforms.linux.as_ref(),
        invocation,
        Platform::Linux,
    )?;
    let steps = tool.fields.steps.as_deref().ok_or_else(|| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("{} has no steps", invocation.name()),
        )
    })?;
    let schema = tool
        .common
        .parameters
        .as_ref()
        .map(aai_descriptor::Parameters::schema);
    let bound = bind(invocation, schema.as_ref(), steps)?;
    let app = section
        .fields
        .app
        .as_deref()
        .unwrap_or(&invocation.descriptor.name);
    Ok((app, bound))
}

impl Executor for AtspiExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let (app, bound) = prepared(&invocation)?;
            let run = async {
                let bus = self.bus().await?;
                let result = run_steps(&bus, app, &bound, &self.protection).await;
                if let Err(error) = &result
                    && error.kind == ErrorKind::AutomationNotSupported
                {
                    self.forget().await;
                }
                result
            };
            tokio::time::timeout(invocation.timeout, run)
                .await
                .unwrap_or_else(|_| {
                    Err(AaiError::new(
                        ErrorKind::Timeout,
                        format!(
                            "{} did not finish within {} ms",
                            invocation.name(),
                            invocation.timeout.as_millis()
                        ),
                    ))
                })
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let (app, bound) = prepared(&invocation)?;
        let steps: Vec<Value> = bound
            .iter()
            .map(|b| {
                let mut step = json!({"action": b.step.action.key(), "path": b.path.to_string()});
                if let Some(text) = &b.text {
                    step["text"] = json!(text);
                }
                if let Some(value) = &b.value {
                    step["value"] = value.clone();
                }
                if let Some(name) = &b.step.use_action {
                    step["use"] = json!(name);
                }
                step
            })
            .collect();
        Ok(json!({"atspi": {"app": app, "steps": steps}}))
    }
}

/// The application named `app` (its accessible name, any case, or its process id) and its
/// name, or APP_NOT_RUNNING naming the applications there are.
pub async fn application(bus: &A11yBus, app: &str) -> Result<(Node, String), AaiError> {
    let apps = bus.applications().await?;
    let pid = app.parse::<u32>().ok();
    if let Some((node, name, _)) = apps
        .iter()
        .find(|(_, name, id)| name.eq_ignore_ascii_case(app) || (pid.is_some() && *id == pid))
    {
        return Ok((node.clone(), name.clone()));
    }
    let names: Vec<&str> = apps
        .iter()
        .map(|(_, name, _)| name.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    Err(AaiError::new(
        ErrorKind::AppNotRunning,
        format!(
            "{app} is not running (or does not publish its accessibility tree): start it, then call again. Running with a tree: {}{}",
            if names.is_empty() { "none".to_owned() } else { names.join(", ") },
            silent(apps.len() - names.len())
        ),
    )
    .with_detail(json!({"app": app, "running": names})))
}

/// What to say of applications that did not tell their name (busy, or stuck in a dialog).
fn silent(count: usize) -> String {
    match count {
        0 => String::new(),
        n => format!(
            " ({n} more did not answer within a few seconds: busy, or stuck in a dialog — finish or close it)"
        ),
    }
}

async fn run_steps(
    bus: &A11yBus,
    app: &str,
    steps: &[Bound<'_>],
    protection: &Protection,
) -> Result<Value, AaiError> {
    let (root, _) = application(bus, app).await?;
    // Its process: whose windows a click by pointer may land on.
    let app_pid = bus.pid(&root.dest).await;
    refuse_protected(bus, app, &root, app_pid, protection).await?;
    let mut reads = Map::new();
    let mut last = None;
    for (index, bound) in steps.iter().enumerate() {
        let fail = |message: String| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!(
                    "step {index} ({} {}): {message}",
                    bound.step.action.key(),
                    bound.path
                ),
            )
            .with_detail(json!({"step": index, "path": bound.path.to_string()}))
        };
        match bound.step.action {
            UiAction::Wait | UiAction::Gone => {
                let gone = bound.step.action == UiAction::Gone;
                let within =
                    Duration::from_millis(bound.step.timeout_ms.unwrap_or(UiStep::WAIT_MS));
                let until = Instant::now() + within;
                // Where it was at the last look: it has appeared once it shows and has stopped
                // moving (a window the window manager is still placing, a dialog still being
                // set up on the app's loop, which then resets fields filled too early).
                let mut last_place = None;
                loop {
                    // A dialog is a top-level element of its application: look from it anew.
                    // One in the tree but not on the screen (a dialog hidden, not destroyed)
                    // is not there.
                    let found = match find(bus, &root, &bound.path).await {
                        Ok(node) if !bus.states(&node).await.contains(&"showing") => {
                            Err(AaiError::new(
                                ErrorKind::AutomationFailed,
                                format!("{} is in the tree but not showing", bound.path),
                            ))
                        }
                        found => found,
                    };
                    let settled = match (&found, gone) {
                        (Ok(node), false) => {
                            let place = bus.extents(node).await.ok();
                            let still = place.is_some() && place == last_place;
                            last_place = place;
                            // Nothing to compare on an element with no place: it is there.
                            still || last_place.is_none() || Instant::now() >= until
                        }
                        _ => false,
                    };
                    match (found, gone) {
                        (Ok(_), false) if settled => break,
                        (Err(_), true) => break,
                        (Err(error), false) if Instant::now() >= until => {
                            return Err(fail(format!(
                                "did not appear within {} ms: {}",
                                within.as_millis(),
                                error.message
                            )));
                        }
                        (Ok(_), true) if Instant::now() >= until => {
                            return Err(fail(format!(
                                "was still there after {} ms",
                                within.as_millis()
                            )));
                        }
                        _ => tokio::time::sleep(POLL).await,
                    }
                }
                continue;
            }
            _ => {}
        }
        let node = find(bus, &root, &bound.path)
            .await
            .map_err(|e| fail(e.message))?;
        // A check box whose argument was not given is left as it is: nothing to wait for.
        let left_alone = bound.step.action == UiAction::Check && bound.value.is_none();
        if !bound.step.reads() && !left_alone {
            enabled(bus, &node).await.map_err(fail)?;
        }
        let read = match bound.step.action {
            UiAction::Invoke if bound.step.use_action.as_deref() == Some(UiStep::POINTER) => {
                pointer(bus, &node, app_pid, protection, &fail).await?;
                None
            }
            UiAction::Invoke => {
                let actions = bus.actions(&node).await;
                let index = match &bound.step.use_action {
                    Some(wanted) => actions
                        .iter()
                        .position(|a| a.eq_ignore_ascii_case(wanted))
                        .ok_or_else(|| {
                            fail(format!("it has no action {wanted:?}; it has {actions:?}"))
                        })?,
                    None if actions.is_empty() => {
                        return Err(fail("it has no action to invoke".to_owned()));
                    }
                    None => 0,
                };
                match bus.do_action(&node, index).await {
                    Ok(true) => None,
                    Ok(false) => return Err(fail(format!("it refused {:?}", actions[index]))),
                    Err(e) => return Err(fail(format!("{:?} failed: {e}", actions[index]))),
                }
            }
            UiAction::SetText => {
                let text = bound.text.as_deref().unwrap_or_default();
                match bus.set_text(&node, text).await {
                    Ok(true) => None,
                    Ok(false) => {
                        return Err(fail("its text cannot be changed (read-only?)".to_owned()));
                    }
                    Err(e) => return Err(fail(format!("it has no editable text: {e}"))),
                }
            }
            UiAction::SetValue => {
                // Bound as a number before anything ran.
                let value = bound
                    .value
                    .as_ref()
                    .and_then(Value::as_f64)
                    .ok_or_else(|| {
                        AaiError::new(
                            ErrorKind::InvalidParams,
                            format!("step {index}: the value is not a number"),
                        )
                    })?;
                bus.set_value(&node, value)
                    .await
                    .map_err(|e| fail(format!("its value cannot be set: {e}")))?;
                None
            }
            UiAction::Select => {
                let wanted = bound.path.segments.last().and_then(|s| s.name.as_deref());
                if !select(bus, &node, wanted).await.map_err(fail)? {
                    // A combo box's item or a tab without a selection parent: its own action.
                    let actions = bus.actions(&node).await;
                    if actions.is_empty() || !bus.do_action(&node, 0).await.unwrap_or(false) {
                        return Err(fail("it cannot be selected".to_owned()));
                    }
                }
                None
            }
            UiAction::Check => {
                // Bound as true or false before anything ran; absent, the box is left alone.
                if let Some(wanted) = bound.value.as_ref().and_then(Value::as_bool) {
                    check(bus, &node, wanted).await.map_err(fail)?;
                }
                None
            }
            UiAction::ReadText => Some(match bus.text(&node).await {
                Some(text) => json!(text),
                None => json!(bus.name(&node).await),
            }),
            UiAction::ReadState => {
                let mut state = json!({
                    "role": bus.role(&node).await,
                    "name": bus.name(&node).await,
                    "states": bus.states(&node).await,
                });
                if let Some(value) = bus.value(&node).await {
                    state["value"] = value["value"].clone();
                }
                Some(state)
            }
            UiAction::ReadRows => {
                let mut rows = Vec::new();
                for child in bus.children(&node).await.unwrap_or_default() {
                    rows.push(row(bus, &child).await);
                }
                Some(Value::Array(rows))
            }
            UiAction::Wait | UiAction::Gone => None,
        };
        if let Some(value) = read {
            let key = bound
                .step
                .key
                .clone()
                .unwrap_or_else(|| bound.step.action.key().to_owned());
            last = Some(value.clone());
            reads.insert(key, value);
        }
    }
    Ok(match (reads.len(), last) {
        (0, _) => json!({"ok": true}),
        (1, Some(value)) if steps.iter().all(|b| b.step.key.is_none()) => value,
        _ => Value::Object(reads),
    })
}

/// Selects `node` among its parent's children, or the table row it is a cell of (a cell may
/// sit inside a cell, as a file list's name beside its icon does). False when nothing takes a
/// selection (a combo box's item, a tab: their own action selects them); an error when the
/// table would not select the row.
async fn select(bus: &A11yBus, node: &Node, wanted: Option<&str>) -> Result<bool, String> {
    // Up to the table the cell is in: its row is selected through the table.
    let mut child = node.clone();
    for _ in 0..3 {
        let Some((parent, place)) = bus.parent(&child).await else {
            break;
        };
        if bus.interfaces(&parent).await.iter().any(|i| i == "Table") {
            let row = table_row(bus, &parent, place, wanted).await?;
            return match bus.select_row(&parent, row).await {
                Ok(true) => Ok(true),
                Ok(false) => Err(format!("its table did not make row {row} the selection")),
                Err(e) => Err(format!("its table refused to select row {row}: {e}")),
            };
        }
        child = parent;
    }
    Ok(match bus.parent(node).await {
        Some((parent, place)) => bus.select_child(&parent, place).await.unwrap_or(false),
        None => false,
    })
}

/// The row of `table` a step means: the row of its child number `place` when that is in the
/// first column, which names a row (a file list's file name). Found in another column (a
/// file named like another file's type or date, looked for breadth first), the row is the
/// one whose first column reads `wanted`.
async fn table_row(
    bus: &A11yBus,
    table: &Node,
    place: i32,
    wanted: Option<&str>,
) -> Result<i32, String> {
    let (row, column) = bus
        .table_place(table, place)
        .await
        .map_err(|e| format!("its table does not say where it is: {e}"))?;
    let Some(wanted) = wanted.filter(|_| column != 0) else {
        return if row >= 0 {
            Ok(row)
        } else {
            Err("its table does not say which row it is in".to_owned())
        };
    };
    let rows = bus.table_rows(table).await;
    for candidate in 0..rows.min(i32::try_from(NODE_CAP).unwrap_or(i32::MAX)) {
        let Ok(cell) = bus.table_cell(table, candidate, 0).await else {
            continue;
        };
        let mut names = vec![bus.name(&cell).await];
        for inner in bus.children(&cell).await.unwrap_or_default() {
            names.push(bus.name(&inner).await);
        }
        if names.iter().any(|n| n.trim() == wanted) {
            return Ok(candidate);
        }
    }
    Err(format!(
        "no row of its table reads {wanted:?} in its first column (it is in column {column})"
    ))
}

/// How long an element may stay greyed out before a step acting on it fails.
const ENABLED_WITHIN: Duration = Duration::from_secs(3);

/// Waits until `node` takes input, as a person waits for a button to light up: an app greys
/// out what it is not ready for, and catches up on its own loop (a file dialog's Save turns
/// sensitive only once the app has seen the name set into its field; pressed before, the press
/// is lost and the step would report a success that never happened).
async fn enabled(bus: &A11yBus, node: &Node) -> Result<(), String> {
    let until = Instant::now() + ENABLED_WITHIN;
    loop {
        let states = bus.states(node).await;
        if states.contains(&"enabled") || states.contains(&"sensitive") {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "it stayed disabled (greyed out) for {} ms; its states: {}",
                ENABLED_WITHIN.as_millis(),
                if states.is_empty() {
                    "none (it did not answer: gone, or the app is busy)".to_owned()
                } else {
                    states.join(", ")
                }
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Turns a check box or toggle on or off by its action, unless it already is.
async fn check(bus: &A11yBus, node: &Node, on: bool) -> Result<(), String> {
    let checked = |node: Node| async move {
        let states = bus.states(&node).await;
        states.contains(&"checked") || states.contains(&"pressed")
    };
    if checked(node.clone()).await == on {
        return Ok(());
    }
    if bus.actions(node).await.is_empty() {
        return Err("it has no action to turn it on or off".to_owned());
    }
    match bus.do_action(node, 0).await {
        Ok(true) => {}
        Ok(false) => return Err("it refused to change".to_owned()),
        Err(e) => return Err(format!("it cannot be changed: {e}")),
    }
    // The toggle lands on the application's own loop.
    let until = Instant::now() + MENU_OPENS_WITHIN;
    while checked(node.clone()).await != on {
        if Instant::now() >= until {
            return Err(format!(
                "it is still {} after its action (its states: {})",
                if on { "off" } else { "on" },
                bus.states(node).await.join(", ")
            ));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// How long a menu opened by the pointer may take to show its items.
const MENU_OPENS_WITHIN: Duration = Duration::from_secs(2);

/// Clicks `node` with the pointer; one inside a closed menu is reached by opening its menus
/// first, outermost first, each click awaited until the next element shows. Each click is
/// refused when a protected app's window is on top where it would land.
async fn pointer(
    bus: &A11yBus,
    node: &Node,
    app_pid: Option<u32>,
    protection: &Protection,
    fail: &(dyn Fn(String) -> AaiError + Sync),
) -> Result<(), AaiError> {
    let showing = |node: Node| async move { bus.states(&node).await.contains(&"showing") };
    let click = |node: Node, what: &'static str| async move {
        let (x, y) = bus
            .center(&node)
            .await
            .map_err(|e| fail(format!("{what} cannot be clicked: {e}")))?;
        protection.refuse_point(x, y, app_pid)?;
        bus.click_at(x, y)
            .await
            .map_err(|e| fail(format!("{what} cannot be clicked: {e}")))
    };
    // The element and its ancestors up to the first one showing.
    let mut chain = vec![node.clone()];
    while !showing(chain[chain.len() - 1].clone()).await {
        if chain.len() > 8 {
            return Err(fail(
                "it is not on the screen, nor inside a menu that is".to_owned(),
            ));
        }
        let Some((parent, _)) = bus.parent(&chain[chain.len() - 1]).await else {
            return Err(fail("it is not on the screen".to_owned()));
        };
        chain.push(parent);
    }
    chain.reverse();
    for pair in chain.windows(2) {
        let (outer, inner) = (&pair[0], &pair[1]);
        if bus.role(outer).await == "menu" && !showing(inner.clone()).await {
            click(outer.clone(), "its menu").await?;
        }
        let until = Instant::now() + MENU_OPENS_WITHIN;
        while !showing(inner.clone()).await {
            if Instant::now() >= until {
                return Err(fail(format!(
                    "it did not show within {} ms of opening its menu",
                    MENU_OPENS_WITHIN.as_millis()
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }
    click(node.clone(), "it").await
}

/// PERMISSION_DENIED when the application (process `pid`) or one of its windows is protected,
/// or is one of the gateway's own.
///
/// # Errors
/// The refusal, naming the pattern.
pub async fn refuse_protected(
    bus: &A11yBus,
    app: &str,
    root: &Node,
    pid: Option<u32>,
    protection: &Protection,
) -> Result<(), AaiError> {
    let mut names = vec![bus.name(root).await];
    let windows = bus.children(root).await.unwrap_or_default();
    // An app that tells neither its name nor its windows (busy, stuck in a dialog) cannot be
    // told apart from a protected one: not read until it answers.
    if names[0].trim().is_empty() && windows.is_empty() && !protection.patterns().is_empty() {
        return Err(AaiError::new(
            ErrorKind::AutomationFailed,
            format!(
                "{app} does not tell its name on the accessibility bus (busy, or a dialog of its own holds it), so whether it is a protected app cannot be told: call again once it answers"
            ),
        ));
    }
    for window in windows {
        names.push(bus.name(&window).await);
    }
    // The gateway's own questions (its consent dialog, its dashboard) are answered by the
    // person, never by a tool: no path from a tool to the Allow button.
    if is_the_gateways(&names, pid) {
        return Err(AaiError::new(
            ErrorKind::PermissionDenied,
            format!(
                "{app} is the gateway's own window (its consent dialog or dashboard): only the person answers it, no tool operates or reads it"
            ),
        )
        .with_detail(json!({"reason": "gateway_window"})));
    }
    match protection.protects(names.iter().map(String::as_str)) {
        Some(pattern) => Err(AaiError::new(
            ErrorKind::PermissionDenied,
            format!(
                "{app} is a protected app (it matches {pattern:?} in `desktop.protected_apps`): the gateway does not read or operate it. Only the user can change that list in config.json."
            ),
        )
        .with_detail(json!({"reason": "protected_app", "pattern": pattern}))),
        None => Ok(()),
    }
}

/// Whether an application with these names (its own, its windows') and process is one of the
/// gateway's: a title naming the gateway (`AAI Gateway`, `aai-gateway`), or a dialog program
/// (zenity, kdialog) this gateway process started — as `local.input` tells its windows.
pub fn is_the_gateways(names: &[String], pid: Option<u32>) -> bool {
    let dialog = names.first().is_some_and(|n| {
        ["zenity", "kdialog"]
            .iter()
            .any(|d| n.eq_ignore_ascii_case(d))
    });
    names.iter().any(|n| names_the_gateway(n)) || (dialog && started_by_this_gateway(pid))
}

/// Whether a title names the gateway (`AAI Gateway`, `aai-gateway`, `aai_gateway`), as its
/// consent dialog, dashboard and sign-in page are titled.
pub fn names_the_gateway(title: &str) -> bool {
    let words: String = title
        .to_lowercase()
        .chars()
        .map(|c| if c == '-' || c == '_' { ' ' } else { c })
        .collect();
    words
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .contains("aai gateway")
}

#[cfg(target_os = "linux")]
fn started_by_this_gateway(pid: Option<u32>) -> bool {
    pid.and_then(aai_contain::procs::stat)
        .is_some_and(|(_, parent)| parent == std::process::id())
}

#[cfg(not(target_os = "linux"))]
fn started_by_this_gateway(_: Option<u32>) -> bool {
    false
}

/// A row of a list or table: its text, or its cells' texts.
async fn row(bus: &A11yBus, node: &Node) -> Value {
    let cells = bus.children(node).await.unwrap_or_default();
    if cells.is_empty() {
        return json!(match bus.text(node).await {
            Some(text) if !text.is_empty() => text,
            _ => bus.name(node).await,
        });
    }
    let mut texts = Vec::with_capacity(cells.len());
    for cell in &cells {
        texts.push(match bus.text(cell).await {
            Some(text) if !text.is_empty() => text,
            _ => bus.name(cell).await,
        });
    }
    json!(texts)
}

/// The element `path` names under `root`, or AUTOMATION_FAILED saying which segment was not
/// found and what is there instead.
pub async fn find(bus: &A11yBus, root: &Node, path: &UiPath) -> Result<Node, AaiError> {
    let mut at = root.clone();
    let mut walked = String::new();
    for segment in &path.segments {
        match descendant(bus, &at, segment, at == *root).await {
            Ok(node) => at = node,
            Err(seen) => {
                let under = if walked.is_empty() {
                    "in the application".to_owned()
                } else {
                    format!("under {walked}")
                };
                return Err(AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!(
                        "no {segment} {under}; there: {}",
                        if seen.is_empty() {
                            "nothing with a name".to_owned()
                        } else {
                            seen.join(", ")
                        }
                    ),
                )
                .with_detail(json!({"missing": segment.to_string(), "there": seen})));
            }
        }
        if !walked.is_empty() {
            walked.push('/');
        }
        walked.push_str(&segment.to_string());
    }
    Ok(at)
}

/// The `segment.nth` descendant of `from` matching `segment`, breadth first; or what was
/// seen instead, nearest first: elements of the same role whose name is closest to the one
/// wanted (equal but for case, then sharing words or letters), then other named ones — at most
/// [`SEEN_AT_MOST`].
async fn descendant(
    bus: &A11yBus,
    from: &Node,
    segment: &Segment,
    from_app: bool,
) -> Result<Node, Vec<String>> {
    let mut queue = std::collections::VecDeque::from([from.clone()]);
    let mut count = 0;
    let mut looked = 0;
    let mut seen: Vec<(usize, String)> = Vec::new();
    while let Some(node) = queue.pop_front() {
        let Ok(children) = bus.children(&node).await else {
            continue;
        };
        // An application's windows that are not showing (a dialog closed but kept, to be
        // shown again) are not there: neither they nor what is in them is counted or found.
        let top = from_app && node == *from;
        for child in children {
            looked += 1;
            if looked > NODE_CAP {
                break;
            }
            if top && !bus.states(&child).await.contains(&"showing") {
                continue;
            }
            let role = bus.role(&child).await;
            let name = bus.name(&child).await;
            // A segment without a name (`text#3`) counts only what shows: hidden panes hold
            // fields of their own, made and dropped as the app goes, which would shift the
            // count. A named one counts everything (a closed menu's items do not show).
            if segment.matches(&role, &name)
                && (segment.name.is_some() || bus.states(&child).await.contains(&"showing"))
            {
                count += 1;
                if count == segment.nth {
                    return Ok(child);
                }
            }
            let same_role = segment.role == "*" || role.eq_ignore_ascii_case(&segment.role);
            if same_role || !name.trim().is_empty() {
                let shown = Segment {
                    role: role.clone(),
                    name: Some(name.trim().to_owned()),
                    nth: 1,
                }
                .to_string();
                let rank =
                    nearness(segment.name.as_deref(), &name) + if same_role { 0 } else { 10 };
                seen.push((rank, shown));
            }
            queue.push_back(child);
        }
    }
    // Stable: elements equally near keep the tree's order.
    seen.sort_by_key(|(rank, _)| *rank);
    let mut shown: Vec<String> = Vec::new();
    for (_, text) in seen {
        if !shown.contains(&text) {
            shown.push(text);
        }
        if shown.len() == SEEN_AT_MOST {
            break;
        }
    }
    Err(shown)
}

/// Elements named, at most, in a "not found" error.
const SEEN_AT_MOST: usize = 20;

/// How near a name is to the one wanted (0 nearest … 3 unrelated): how every accessibility
/// executor ranks what it saw in place of a missing element.
pub(crate) fn nearness(wanted: Option<&str>, name: &str) -> usize {
    let Some(wanted) = wanted.map(str::trim).filter(|w| !w.is_empty()) else {
        return 3;
    };
    let (wanted, name) = (wanted.to_lowercase(), name.trim().to_lowercase());
    if wanted == name {
        0
    } else if name.contains(&wanted) || wanted.contains(&name) && !name.is_empty() {
        1
    } else if wanted
        .split_whitespace()
        .any(|w| name.split_whitespace().any(|n| n == w))
    {
        2
    } else {
        3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A click by pointer is judged by the window on top where it lands: refused on a
    /// protected app's (by title or class), and blind when the screen cannot be looked at;
    /// with nothing protected, nothing is looked at.
    #[test]
    fn a_click_is_refused_where_a_protected_window_is_on_top() {
        let protection = Protection::default();
        let blind = protection
            .refuse_point(5, 5, None)
            .expect_err("no look at the screen");
        assert_eq!(blind.kind, ErrorKind::PermissionDenied);
        let on_top = |title: &str, class: &str, gateway: bool| {
            Ok(Some(OnTop {
                title: title.into(),
                class: class.into(),
                gateway,
                pid: Some(if title.contains("Mousepad") { 41 } else { 42 }),
            }))
        };
        protection.look_with(Arc::new(move |x, _| match x {
            0..100 => on_top("db.kdbx - KeePassXC", "keepassxc", false),
            100..200 => on_top("notes", "KeePass", false),
            200..300 => on_top("Untitled - Mousepad", "Mousepad", false),
            300..400 => Ok(None),
            400..500 => on_top("Allow this call?", "Zenity", true),
            _ => Err("the display did not answer".into()),
        }));
        assert!(
            protection.refuse_point(50, 7, None).is_ok(),
            "nothing protected"
        );
        let gate = protection
            .refuse_point(450, 7, None)
            .expect_err("the consent dialog");
        assert!(
            gate.message.contains("the gateway's own window"),
            "{}",
            gate.message
        );
        protection.set(vec!["KeePass".into()]);
        let refused = protection.refuse_point(50, 7, None).expect_err("by title");
        assert_eq!(refused.kind, ErrorKind::PermissionDenied);
        assert!(
            refused
                .message
                .starts_with("a click at (50, 7) would land on \"db.kdbx - KeePassXC\""),
            "{}",
            refused.message
        );
        assert!(protection.refuse_point(150, 7, None).is_err(), "by class");
        assert!(protection.refuse_point(250, 7, None).is_ok(), "another app");
        // The app the tool drives is on top, or another one is.
        assert!(protection.refuse_point(250, 7, Some(41)).is_ok(), "its own");
        let covered = protection
            .refuse_point(250, 7, Some(7))
            .expect_err("another app's window");
        assert_eq!(covered.kind, ErrorKind::AutomationFailed);
        assert!(
            covered.message.contains("another app's window"),
            "{}",
            covered.message
        );
        assert!(
            protection.refuse_point(350, 7, None).is_ok(),
            "no window there"
        );
        let unknown = protection
            .refuse_point(550, 7, None)
            .expect_err("cannot tell");
        assert!(
            unknown.message.contains("the display did not answer"),
            "{}",
            unknown.message
        );
    }

    /// The gateway's own windows by title, and a dialog program only when this process
    /// started it.
    #[test]
    fn the_gateways_own_windows_are_told_apart() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert!(is_the_gateways(
            &names(&["zenity", "AAI Gateway: allow?"]),
            None
        ));
        assert!(is_the_gateways(
            &names(&["chromium", "aai-gateway dashboard"]),
            None
        ));
        assert!(!is_the_gateways(&names(&["zenity", "Pick a file"]), None));
        assert!(!is_the_gateways(&names(&["mousepad", "Untitled"]), None));
        // A zenity this process started (a child of the test process).
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        assert!(is_the_gateways(
            &names(&["Zenity", "Question"]),
            Some(child.id())
        ));
        assert!(!is_the_gateways(
            &names(&["mousepad", "Question"]),
            Some(child.id())
        ));
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The dry run shows each step with its path and text bound to the arguments, as data: a
    /// value full of path syntax stays one name, and the text is the value itself.
    #[test]
    fn the_plan_binds_arguments_as_data() {
        let doc = json!({"schema_version": "1.0", "appId": "a11y.editor", "name": "Editor",
            "platforms": {"linux": {"automation": "atspi", "app": "mousepad", "tools": [
                {"name": "open_row", "description": "d",
                 "parameters": {"type": "object", "properties": {"row": {"type": "string"}, "text": {"type": "string"}},
                                "required": ["row", "text"]},
                 "steps": [{"action": "invoke", "path": "list[Files]/list item[${row}]", "use": "activate"},
                           {"action": "set_text", "path": "frame/text", "text": "${text}"}]}]}}});
        let descriptor = aai_descriptor::parse("t", doc.to_string().as_bytes()).expect("valid");
        let args = json!({"row": "a]/push button[Delete]#2", "text": "$(rm -rf ~) ${x}"});
        let args = args.as_object().expect("object");
        let invocation = Invocation::new(&descriptor, "open_row", args, Duration::from_secs(5));
        let plan = AtspiExecutor::new(None).plan(invocation).expect("plan");
        assert_eq!(plan["atspi"]["app"], "mousepad");
        let steps = &plan["atspi"]["steps"];
        assert_eq!(
            steps[0],
            json!({"action": "invoke", "path": r"list[Files]/list item[a\]/push button[Delete\]#2]", "use": "activate"})
        );
        let path = UiPath::parse(steps[0]["path"].as_str().expect("path")).expect("reads back");
        assert_eq!(path.segments.len(), 2, "the value stayed one name");
        assert_eq!(steps[1]["text"], "$(rm -rf ~) ${x}");
    }
}
