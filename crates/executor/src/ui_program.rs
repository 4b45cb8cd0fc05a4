//! What the UI Automation (`uia`) and AX (`ax`) executors share: each runs one fixed program
//! that reads a request on stdin — the app, the protected-app patterns and the tool's steps
//! bound to the call's arguments, as JSON — and answers one JSON line. This module builds the
//! request and reads the answer, worded as the `atspi` executor words the same failures.
//!
//! The request: `{"app", "protected": [patterns], "steps": [{"action", "path", "segments":
//! [{"role", "name", "nth"}], "text"?, "value"?, "use"?, "timeout_ms"?, "as"?}]}`. A path
//! travels as segments already read, so no program parses path syntax, and an argument that
//! fills a name stays one name.
//!
//! The answer: `{"ok":true,"result":{<as>: <read>, …}}`, or `{"ok":false,"error":{"kind",
//! "step", …}}` with kind `not_found` (`at`: the segment not found, `near`: what is there,
//! `item`: a `select` step's item), `timeout` (`gone`, and `at`/`near` of the last look),
//! `app_not_running` (`running`), `protected` (`pattern`) or `failed` (`message`, `code`).

use aai_descriptor::ui::{Segment, UiAction, UiPath, UiStep};
use aai_descriptor::{AaiError, ErrorKind, template};
use serde_json::{Value, json};

use crate::Invocation;
use crate::atspi::Protection;

/// Elements named, at most, in a "not found" error.
const SEEN_AT_MOST: usize = 20;

/// One step with its path, text and value bound to the call's arguments (as data).
#[derive(Debug)]
pub(crate) struct Bound<'s> {
    pub(crate) step: &'s UiStep,
    pub(crate) path: UiPath,
    pub(crate) text: Option<String>,
    pub(crate) value: Option<Value>,
}

/// The tool's steps with their placeholders bound to the call's arguments: a name or a text
/// takes an argument's text, a `set_value` a number.
///
/// # Errors
/// INVALID_PARAMS for a missing argument or a `set_value` that is not a number;
/// AUTOMATION_FAILED for a path that does not read.
pub(crate) fn bind<'s>(
    invocation: &Invocation<'_>,
    schema: Option<&Value>,
    steps: &'s [UiStep],
) -> Result<Vec<Bound<'s>>, AaiError> {
    let lookup = |name: &str| invocation.value(schema, name);
    steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let path = UiPath::parse(&step.path).map_err(|problem| {
                AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!("{}: {problem}", invocation.name()),
                )
            })?;
            let path = path
                .fill(&lookup)
                .map_err(|name| invocation.missing(&name))?;
            let text = match &step.text {
                Some(text) => Some(
                    template::fill_text(text, &lookup).map_err(|n| invocation.missing(n))?,
                ),
                None => None,
            };
            let value = match &step.value {
                // A check box whose argument is not given is left as it is.
                Some(value) if step.action == UiAction::Check => {
                    match template::bind(value, &lookup) {
                        Ok(bound) => Some(boolean(&bound).ok_or_else(|| {
                            AaiError::new(
                                ErrorKind::InvalidParams,
                                format!(
                                    "{}: step {index} (check {path}): the value {bound} is not true or false",
                                    invocation.name()
                                ),
                            )
                        })?),
                        Err(_) => None,
                    }
                }
                Some(value) => {
                    let bound =
                        template::bind(value, &lookup).map_err(|n| invocation.missing(n))?;
                    Some(if step.action == UiAction::SetValue {
                        number(&bound).ok_or_else(|| {
                            AaiError::new(
                                ErrorKind::InvalidParams,
                                format!(
                                    "{}: step {index} ({} {path}): the value {bound} is not a number",
                                    invocation.name(),
                                    step.action.key()
                                ),
                            )
                        })?
                    } else {
                        bound
                    })
                }
                None => None,
            };
            Ok(Bound {
                step,
                path,
                text,
                value,
            })
        })
        .collect()
}

/// true or false, or a string spelling one, as a JSON boolean.
fn boolean(value: &Value) -> Option<Value> {
    match value {
        Value::Bool(_) => Some(value.clone()),
        Value::String(text) if text == "true" || text == "false" => Some(json!(text == "true")),
        _ => None,
    }
}

/// A number, or a string holding one, as a JSON number.
fn number(value: &Value) -> Option<Value> {
    match value {
        Value::Number(_) => Some(value.clone()),
        Value::String(text) => {
            let parsed: f64 = text.trim().parse().ok()?;
            serde_json::Number::from_f64(parsed).map(Value::Number)
        }
        _ => None,
    }
}

/// A call's app and steps bound to its arguments, refused before anything runs when the app
/// is protected, with the request the program reads on stdin. `section` names the
/// descriptor's section (`windows`, `macos`) in the error for a missing `app`.
pub(crate) fn prepare<'a>(
    invocation: &Invocation<'a>,
    section: &str,
    app: Option<&'a str>,
    steps: Option<&'a [UiStep]>,
    parameters: Option<&aai_descriptor::Parameters>,
    protection: &Protection,
) -> Result<(&'a str, Vec<Bound<'a>>, String), AaiError> {
    let app = app.filter(|app| !app.trim().is_empty()).ok_or_else(|| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!(
                "{}: the {section} section names no `app` to drive",
                invocation.name()
            ),
        )
    })?;
    let steps = steps.ok_or_else(|| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("{} has no steps", invocation.name()),
        )
    })?;
    refuse_protected(protection, &[app, &invocation.descriptor.name])?;
    let schema = parameters.map(aai_descriptor::Parameters::schema);
    let steps = bind(invocation, schema.as_ref(), steps)?;
    // The program refuses what it finds named so: the protected apps, and the gateway's own
    // windows (its consent dialog is titled "AAI Gateway"), which only the person answers.
    let mut refused = protection.patterns();
    refused.extend(GATEWAY_TITLES.iter().map(|t| (*t).to_owned()));
    let stdin = request(app, &refused, &steps).to_string();
    Ok((app, steps, stdin))
}

/// What the gateway's own windows' titles hold (lower case), refused like protected apps.
const GATEWAY_TITLES: &[&str] = &["aai gateway", "aai-gateway"];

/// PERMISSION_DENIED when `names` (the app as the descriptor names it) match a protected
/// pattern: refused before anything runs. The program checks the names it finds (the
/// process's, its windows') against the same patterns.
pub(crate) fn refuse_protected(protection: &Protection, names: &[&str]) -> Result<(), AaiError> {
    match protection.protects(names.iter().copied()) {
        Some(pattern) => Err(protected(names.first().copied().unwrap_or(""), &pattern)),
        None => Ok(()),
    }
}

/// The refusal of a protected app, as the atspi executor words it.
fn protected(app: &str, pattern: &str) -> AaiError {
    AaiError::new(
        ErrorKind::PermissionDenied,
        format!(
            "{app} is a protected app (it matches {pattern:?} in `desktop.protected_apps`): the gateway does not read or operate it. Only the user can change that list in config.json."
        ),
    )
    .with_detail(json!({"reason": "protected_app", "pattern": pattern}))
}

/// The program's stdin: the app, the patterns it must refuse, and the bound steps.
pub(crate) fn request(app: &str, protected: &[String], steps: &[Bound<'_>]) -> Value {
    let steps: Vec<Value> = steps.iter().map(step_request).collect();
    json!({"app": app, "protected": protected, "steps": steps})
}

fn step_request(bound: &Bound<'_>) -> Value {
    let step = bound.step;
    let segments: Vec<Value> = bound
        .path
        .segments
        .iter()
        .map(|s| json!({"role": s.role, "name": s.name, "nth": s.nth}))
        .collect();
    let mut out =
        json!({"action": step.action.key(), "path": bound.path.to_string(), "segments": segments});
    // A `select` step's item is its text (or, written as a value, that value's text).
    let text = match (&bound.text, step.action, &bound.value) {
        (Some(text), _, _) => Some(text.clone()),
        (None, UiAction::Select, Some(value)) => Some(template::as_text(value)),
        _ => None,
    };
    if let Some(text) = text {
        out["text"] = json!(text);
    }
    if let Some(value) = bound
        .value
        .as_ref()
        .filter(|_| step.action != UiAction::Select)
    {
        out["value"] = value.clone();
    }
    if let Some(name) = &step.use_action {
        out["use"] = json!(name);
    }
    if matches!(step.action, UiAction::Wait | UiAction::Gone) {
        out["timeout_ms"] = json!(step.timeout_ms.unwrap_or(UiStep::WAIT_MS));
    }
    if step.reads() {
        out["as"] = json!(step.key.as_deref().unwrap_or(step.action.key()));
    }
    out
}

/// The dry run's view of the steps, as the atspi executor shows them.
pub(crate) fn plan_steps(steps: &[Bound<'_>]) -> Value {
    Value::Array(steps.iter().map(step_request).collect())
}

/// The JSON answer in a program's output: its last non-empty line.
pub(crate) fn answer_line(stdout: &str) -> Option<Value> {
    let line = stdout.lines().rev().find(|line| !line.trim().is_empty())?;
    serde_json::from_str::<Value>(line.trim())
        .ok()
        .filter(Value::is_object)
}

/// How one program's failures read where they differ.
pub(crate) struct Wording {
    /// Where an app is looked for, after "{app} is not running": `(no process …)`.
    pub(crate) not_running: &'static str,
    /// What the OS refusing UI control means and what to do, when a failure's code or message
    /// says it refused; `None`: an ordinary failure.
    pub(crate) denied: fn(Option<i64>, &str) -> Option<String>,
}

/// The tool's result from the program's answer, or the AaiError it reports.
///
/// # Errors
/// As the answer says: AUTOMATION_FAILED (an element not found, naming the path and what is
/// there instead; a wait that ran out; a step that failed), APP_NOT_RUNNING, PERMISSION_DENIED.
pub(crate) fn outcome(
    reply: &Value,
    app: &str,
    steps: &[Bound<'_>],
    wording: &Wording,
) -> Result<Value, AaiError> {
    if reply.get("ok") == Some(&Value::Bool(true)) {
        return Ok(collapse(reply.get("result"), steps));
    }
    let error = reply.get("error").unwrap_or(&Value::Null);
    let text = |key: &str| error.get(key).and_then(Value::as_str).unwrap_or("");
    let step = error
        .get("step")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| Some((i, steps.get(i)?)));
    let fail = |message: String| match step {
        Some((index, bound)) => AaiError::new(
            ErrorKind::AutomationFailed,
            format!(
                "step {index} ({} {}): {message}",
                bound.step.action.key(),
                bound.path
            ),
        )
        .with_detail(json!({"step": index, "path": bound.path.to_string()})),
        None => AaiError::new(ErrorKind::AutomationFailed, message),
    };
    match text("kind") {
        "not_found" => {
            let bound = step.map(|(_, bound)| bound);
            let (message, missing, there) = not_found(error, bound);
            let mut failure = fail(message);
            if let Some(Value::Object(detail)) = failure.detail.as_mut() {
                detail.insert("missing".into(), json!(missing));
                detail.insert("there".into(), json!(there));
            }
            Err(failure)
        }
        "timeout" => {
            let within = error
                .get("timeout_ms")
                .and_then(Value::as_u64)
                .or_else(|| step.and_then(|(_, b)| b.step.timeout_ms))
                .unwrap_or(UiStep::WAIT_MS);
            if error.get("gone") == Some(&Value::Bool(true)) {
                return Err(fail(format!("was still there after {within} ms")));
            }
            let mut message = format!("did not appear within {within} ms");
            if error.get("at").is_some() {
                let (why, _, _) = not_found(error, step.map(|(_, bound)| bound));
                message = format!("{message}: {why}");
            }
            Err(fail(message))
        }
        "app_not_running" => {
            let running: Vec<&str> = error
                .get("running")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Err(AaiError::new(
                ErrorKind::AppNotRunning,
                format!(
                    "{app} is not running {}: start it, then call again. Running: {}",
                    wording.not_running,
                    if running.is_empty() {
                        "none".to_owned()
                    } else {
                        running.join(", ")
                    }
                ),
            )
            .with_detail(json!({"app": app, "running": running})))
        }
        "protected" => Err(protected(app, text("pattern"))),
        _ => {
            let message = match text("message").trim() {
                "" => "the program failed without saying why",
                message => message,
            };
            let code = error.get("code").and_then(Value::as_i64);
            if let Some(advice) = (wording.denied)(code, message) {
                return Err(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!("{advice} ({message})"),
                )
                .with_detail(json!({"code": code, "message": message})));
            }
            Err(fail(message.to_owned()))
        }
    }
}

/// What a `not_found` (or a wait's last look) says: the message, the segment missing and
/// what is there instead, nearest first.
fn not_found(error: &Value, bound: Option<&Bound<'_>>) -> (String, String, Vec<String>) {
    let at = error
        .get("at")
        .and_then(Value::as_u64)
        .and_then(|at| usize::try_from(at).ok())
        .unwrap_or(0);
    let segments = bound.map(|b| b.path.segments.as_slice()).unwrap_or(&[]);
    // A `select` step's item is looked for inside the element its path found.
    let item = error.get("item") == Some(&Value::Bool(true));
    let (segment, walked) = match bound {
        Some(bound) if item => (
            Segment {
                role: "*".into(),
                name: bound
                    .text
                    .clone()
                    .or_else(|| bound.value.as_ref().map(template::as_text)),
                nth: 1,
            },
            bound.path.to_string(),
        ),
        _ => (
            segments.get(at).cloned().unwrap_or(Segment {
                role: "*".into(),
                name: None,
                nth: 1,
            }),
            UiPath {
                segments: segments[..at.min(segments.len())].to_vec(),
            }
            .to_string(),
        ),
    };
    let under = if walked.is_empty() {
        "in the application".to_owned()
    } else {
        format!("under {walked}")
    };
    let there = near(error.get("near"), segment.name.as_deref());
    let message = format!(
        "no {segment} {under}; there: {}",
        if there.is_empty() {
            "nothing with a name".to_owned()
        } else {
            there.join(", ")
        }
    );
    (message, segment.to_string(), there)
}

/// The elements the program saw where one was not found (`{"role", "name"}` or plain
/// names), nearest to the name wanted first, each once, at most [`SEEN_AT_MOST`].
fn near(seen: Option<&Value>, wanted: Option<&str>) -> Vec<String> {
    let mut ranked: Vec<(usize, String)> = seen
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter_map(|entry| {
            let (role, name) = match entry {
                Value::String(name) => (None, name.trim()),
                Value::Object(_) => (
                    entry.get("role").and_then(Value::as_str),
                    entry
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .trim(),
                ),
                _ => return None,
            };
            let shown = match role {
                Some(role) if !role.trim().is_empty() => Segment {
                    role: role.trim().to_owned(),
                    name: Some(name.to_owned()),
                    nth: 1,
                }
                .to_string(),
                _ => name.to_owned(),
            };
            Some((crate::atspi::nearness(wanted, name), shown))
        })
        .collect();
    // Stable: elements equally near keep the order the program saw them in.
    ranked.sort_by_key(|(rank, _)| *rank);
    let mut shown: Vec<String> = Vec::new();
    for (_, text) in ranked {
        if !text.is_empty() && !shown.contains(&text) {
            shown.push(text);
        }
        if shown.len() == SEEN_AT_MOST {
            break;
        }
    }
    shown
}

/// The tool's result from the reads, keyed by each read's `as`: `{"ok": true}` when nothing
/// was read, the value alone when one step read and named no key.
fn collapse(result: Option<&Value>, steps: &[Bound<'_>]) -> Value {
    match result {
        Some(Value::Object(reads)) => match reads.len() {
            0 => json!({"ok": true}),
            1 if steps.iter().all(|b| b.step.key.is_none()) => {
                reads.values().next().cloned().unwrap_or(Value::Null)
            }
            _ => Value::Object(reads.clone()),
        },
        None | Some(Value::Null) => json!({"ok": true}),
        Some(other) => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn descriptor() -> aai_descriptor::Descriptor {
        let doc = json!({"schema_version": "1.0", "appId": "ui.editor", "name": "Editor",
            "platforms": {"windows": {"automation": "uia", "app": "notepad", "tools": [
                {"name": "save", "description": "d",
                 "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "size": {"type": "string"}}},
                 "steps": [
                    {"action": "invoke", "path": "menu item[File]/menu item[Save As…]"},
                    {"action": "wait", "path": "window[Save As]"},
                    {"action": "set_text", "path": "window[Save As]/edit[File name:]", "text": "${name}"},
                    {"action": "set_value", "path": "slider[Size]", "value": "${size}"},
                    {"action": "select", "path": "combo box[Encoding]", "text": "UTF-8"},
                    {"action": "gone", "path": "window[Save As]", "timeout_ms": 700},
                    {"action": "read_text", "path": "document", "as": "text"},
                    {"action": "read_state", "path": "button[Save]"}]},
                {"name": "read", "description": "d",
                 "steps": [{"action": "read_text", "path": "document"}]}]}}});
        aai_descriptor::parse("t", doc.to_string().as_bytes()).expect("valid")
    }

    fn steps<'d>(
        descriptor: &'d aai_descriptor::Descriptor,
        tool: &str,
        args: &serde_json::Map<String, Value>,
    ) -> Result<Vec<Bound<'d>>, AaiError> {
        let section = descriptor.platforms.windows.as_ref().expect("windows");
        let tool = section
            .tools
            .iter()
            .find(|t| t.common.name == tool)
            .expect("tool");
        let invocation =
            Invocation::new(descriptor, &tool.common.name, args, Duration::from_secs(1));
        let schema = tool
            .common
            .parameters
            .as_ref()
            .map(aai_descriptor::Parameters::schema);
        bind(
            &invocation,
            schema.as_ref(),
            tool.fields.steps.as_deref().expect("steps"),
        )
    }

    fn args(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    const WORDING: Wording = Wording {
        not_running: "(nowhere)",
        denied: |code, _| (code == Some(5)).then(|| "refused: allow it".to_owned()),
    };

    /// The request carries each step with its path read into segments, its text, a number for
    /// `set_value`, a wait's timeout (the default when the step gives none) and each read's key.
    #[test]
    fn the_request_holds_the_bound_steps() {
        let d = descriptor();
        let a = args(json!({"name": "a]/button[Delete]#2", "size": " 12.5 "}));
        let bound = steps(&d, "save", &a).expect("bound");
        let request = request("notepad", &["1password".to_owned()], &bound);
        assert_eq!(
            request,
            json!({"app": "notepad", "protected": ["1password"], "steps": [
                {"action": "invoke", "path": "menu item[File]/menu item[Save As…]", "segments": [
                    {"role": "menu item", "name": "File", "nth": 1},
                    {"role": "menu item", "name": "Save As…", "nth": 1}]},
                {"action": "wait", "path": "window[Save As]", "segments": [
                    {"role": "window", "name": "Save As", "nth": 1}], "timeout_ms": 5000},
                {"action": "set_text", "path": "window[Save As]/edit[File name:]", "segments": [
                    {"role": "window", "name": "Save As", "nth": 1},
                    {"role": "edit", "name": "File name:", "nth": 1}], "text": "a]/button[Delete]#2"},
                {"action": "set_value", "path": "slider[Size]", "segments": [
                    {"role": "slider", "name": "Size", "nth": 1}], "value": 12.5},
                {"action": "select", "path": "combo box[Encoding]", "segments": [
                    {"role": "combo box", "name": "Encoding", "nth": 1}], "text": "UTF-8"},
                {"action": "gone", "path": "window[Save As]", "segments": [
                    {"role": "window", "name": "Save As", "nth": 1}], "timeout_ms": 700},
                {"action": "read_text", "path": "document", "segments": [
                    {"role": "document", "name": null, "nth": 1}], "as": "text"},
                {"action": "read_state", "path": "button[Save]", "segments": [
                    {"role": "button", "name": "Save", "nth": 1}], "as": "read_state"}
            ]})
        );
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_runs() {
        let d = descriptor();
        let error = steps(&d, "save", &args(json!({"size": 1}))).expect_err("no name");
        assert_eq!(error.kind, ErrorKind::InvalidParams);
        assert!(error.message.contains("`name`"), "{}", error.message);
        let error =
            steps(&d, "save", &args(json!({"name": "n", "size": "big"}))).expect_err("no number");
        assert_eq!(error.kind, ErrorKind::InvalidParams);
        assert!(error.message.contains("not a number"), "{}", error.message);
    }

    #[test]
    fn results_are_keyed_by_each_reads_key() {
        let d = descriptor();
        let a = args(json!({"name": "n", "size": 3}));
        let save = steps(&d, "save", &a).expect("bound");
        let reply =
            json!({"ok": true, "result": {"text": "hello", "read_state": {"enabled": true}}});
        assert_eq!(
            outcome(&reply, "notepad", &save, &WORDING).expect("ok"),
            json!({"text": "hello", "read_state": {"enabled": true}})
        );
        // One read without a key: its value alone; nothing read: `{"ok": true}`.
        let read = steps(&d, "read", &a).expect("bound");
        let reply = json!({"ok": true, "result": {"read_text": "hello"}});
        assert_eq!(
            outcome(&reply, "notepad", &read, &WORDING).expect("ok"),
            json!("hello")
        );
        let reply = json!({"ok": true, "result": {}});
        assert_eq!(
            outcome(&reply, "notepad", &save, &WORDING).expect("ok"),
            json!({"ok": true})
        );
    }

    #[test]
    fn not_found_names_the_path_and_what_is_there_nearest_first() {
        let d = descriptor();
        let a = args(json!({"name": "n", "size": 3}));
        let save = steps(&d, "save", &a).expect("bound");
        let reply = json!({"ok": false, "error": {"kind": "not_found", "step": 0,
            "path": "menu item[File]/menu item[Save As…]", "at": 1,
            "near": [{"role": "MenuItem", "name": "Open…"}, {"role": "MenuItem", "name": "Save"},
                     {"role": "MenuItem", "name": "Save as…"}, "Exit", {"role": "MenuItem", "name": "Save"}]}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(error.kind, ErrorKind::AutomationFailed);
        assert_eq!(
            error.message,
            "step 0 (invoke menu item[File]/menu item[Save As…]): no menu item[Save As…] under menu item[File]; there: MenuItem[Save as…], MenuItem[Save], MenuItem[Open…], Exit"
        );
        let detail = error.detail.expect("detail");
        assert_eq!(detail["missing"], "menu item[Save As…]");
        assert_eq!(detail["step"], 0);
        assert_eq!(detail["there"][0], "MenuItem[Save as…]");
        // The first segment is looked for in the application; nothing named there.
        let reply =
            json!({"ok": false, "error": {"kind": "not_found", "step": 6, "at": 0, "near": []}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(
            error.message,
            "step 6 (read_text document): no document in the application; there: nothing with a name"
        );
        // A select step's item, inside the element its path found.
        let reply = json!({"ok": false, "error": {"kind": "not_found", "step": 4, "item": true,
            "near": [{"role": "ListItem", "name": "ANSI"}]}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(
            error.message,
            "step 4 (select combo box[Encoding]): no *[UTF-8] under combo box[Encoding]; there: ListItem[ANSI]"
        );
    }

    #[test]
    fn waits_that_run_out_say_how_long_and_what_was_there() {
        let d = descriptor();
        let a = args(json!({"name": "n", "size": 3}));
        let save = steps(&d, "save", &a).expect("bound");
        let reply = json!({"ok": false, "error": {"kind": "timeout", "step": 1, "gone": false,
            "timeout_ms": 5000, "at": 0, "near": [{"role": "Window", "name": "Untitled - Notepad"}]}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(error.kind, ErrorKind::AutomationFailed);
        assert_eq!(
            error.message,
            "step 1 (wait window[Save As]): did not appear within 5000 ms: no window[Save As] in the application; there: Window[Untitled - Notepad]"
        );
        let reply = json!({"ok": false, "error": {"kind": "timeout", "step": 5, "gone": true, "timeout_ms": 700}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(
            error.message,
            "step 5 (gone window[Save As]): was still there after 700 ms"
        );
    }

    #[test]
    fn the_app_not_running_protected_and_refused_map_to_their_kinds() {
        let d = descriptor();
        let a = args(json!({"name": "n", "size": 3}));
        let save = steps(&d, "save", &a).expect("bound");
        let reply = json!({"ok": false, "error": {"kind": "app_not_running", "step": 0, "running": ["explorer", "code"]}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(error.kind, ErrorKind::AppNotRunning);
        assert_eq!(
            error.message,
            "notepad is not running (nowhere): start it, then call again. Running: explorer, code"
        );
        let reply = json!({"ok": false, "error": {"kind": "protected", "pattern": "keepass"}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(error.kind, ErrorKind::PermissionDenied);
        assert!(
            error
                .message
                .contains("\"keepass\" in `desktop.protected_apps`")
        );
        let reply = json!({"ok": false, "error": {"kind": "failed", "step": 2, "message": "its text cannot be changed (read-only)"}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(error.kind, ErrorKind::AutomationFailed);
        assert_eq!(
            error.message,
            "step 2 (set_text window[Save As]/edit[File name:]): its text cannot be changed (read-only)"
        );
        let reply = json!({"ok": false, "error": {"kind": "failed", "step": 0, "message": "no", "code": 5}});
        let error = outcome(&reply, "notepad", &save, &WORDING).expect_err("fails");
        assert_eq!(error.kind, ErrorKind::PermissionDenied);
        assert_eq!(error.message, "refused: allow it (no)");
    }

    #[test]
    fn the_answer_is_the_last_json_line() {
        assert_eq!(
            answer_line("WARNING: x\n{\"ok\":true,\"result\":{}}\n\n"),
            Some(json!({"ok": true, "result": {}}))
        );
        assert_eq!(answer_line("not json"), None);
        assert_eq!(answer_line("[1]"), None);
    }

    #[test]
    fn a_protected_app_is_refused_by_its_name() {
        let protection = Protection::default();
        protection.set(vec!["KeePass".into()]);
        let error =
            refuse_protected(&protection, &["KeePassXC", "Passwords"]).expect_err("refused");
        assert_eq!(error.kind, ErrorKind::PermissionDenied);
        assert!(error.message.starts_with("KeePassXC is a protected app"));
        assert!(refuse_protected(&protection, &["notepad", "Editor"]).is_ok());
    }
}

/// What the UIA and AX executors' tests share: a stand-in program, and a runtime to call with.
#[cfg(test)]
pub(crate) mod fake {
    use std::path::{Path, PathBuf};

    /// An executable shell script at `dir/name` running `body`.
    pub(crate) fn program(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("fake");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        path
    }

    /// Runs `future` to its end on a runtime of its own.
    pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(future)
    }
}
