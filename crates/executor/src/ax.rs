//! Runs `"automation": "ax"` tools (the `macos` section): the same steps as Linux's `atspi`,
//! through the macOS accessibility API as System Events exposes it.
//!
//! Every call runs the same JXA program, [`AX_PROGRAM`], as `osascript -l JavaScript -e
//! <program>`; the app, the protected-app patterns and the steps bound to the call's arguments
//! travel as JSON on stdin ([`crate::ui_program`]), read through the Objective-C bridge. The
//! program finds the process whose name or bundle id is the app, each path segment among the
//! `uiElements` below the one before, breadth first, and answers one JSON line.

use std::sync::Arc;

use aai_descriptor::{AaiError, ErrorKind, Platform};
use serde_json::{Value, json};

use crate::atspi::Protection;
use crate::process::{self, Command};
use crate::ui_program::{self, Bound, Wording};
use crate::{BoxFuture, Executor, Invocation, Settings, describe, section_tool};

/// The JXA program that runs every AX tool.
pub const AX_PROGRAM: &str = include_str!("ax/ax.js");

/// Runs AX tools.
pub struct AxExecutor {
    settings: Arc<Settings>,
    protection: Protection,
}

/// A planned call: what runs, and the steps to read its answer by.
struct Planned<'a> {
    command: Command,
    app: &'a str,
    steps: Vec<Bound<'a>>,
}

const WORDING: Wording = Wording {
    not_running: "(no process by that name or bundle id)",
    denied,
};

/// macOS refusing UI scripting (no Accessibility permission: -1719, -25211) or Apple events
/// to System Events (-1743, -1744).
fn denied(code: Option<i64>, message: &str) -> Option<String> {
    let lower = message.to_lowercase();
    if matches!(code, Some(-1719 | -25211)) || lower.contains("assistive access") {
        Some("macOS did not allow UI scripting. Open System Settings › Privacy & Security › Accessibility, turn on the program running aai-gateway (your terminal or agent app), then call again.".to_owned())
    } else if matches!(code, Some(-1743 | -1744))
        || lower.contains("not authorized to send apple events")
    {
        Some("macOS did not allow controlling System Events. Open System Settings › Privacy & Security › Automation, find the program running aai-gateway and turn on System Events, then call again.".to_owned())
    } else {
        None
    }
}

impl AxExecutor {
    pub fn new(settings: Arc<Settings>, protection: Protection) -> Self {
        Self {
            settings,
            protection,
        }
    }

    fn planned<'a>(&self, invocation: &Invocation<'a>) -> Result<Planned<'a>, AaiError> {
        let (section, tool) = section_tool(
            invocation.descriptor.platforms.macos.as_ref(),
            invocation,
            Platform::Macos,
        )?;
        let (app, steps, stdin) = ui_program::prepare(
            invocation,
            "macos",
            section.fields.app.as_deref(),
            tool.fields.steps.as_deref(),
            tool.common.parameters.as_ref(),
            &self.protection,
        )?;
        let command = Command::new(&self.settings.osascript)
            .args(["-l", "JavaScript", "-e", AX_PROGRAM])
            .stdin(stdin);
        Ok(Planned {
            command,
            app,
            steps,
        })
    }
}

impl Executor for AxExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let planned = self.planned(&invocation)?;
            let what = invocation.name();
            let output = process::run(&planned.command, invocation.timeout, &what).await?;
            let Some(reply) = ui_program::answer_line(&output.stdout) else {
                let stderr = output.stderr.trim();
                let code = stderr
                    .rfind('(')
                    .and_then(|open| stderr[open + 1..].strip_suffix(')'))
                    .and_then(|n| n.parse::<i64>().ok());
                if let Some(advice) = denied(code, stderr) {
                    return Err(
                        AaiError::new(ErrorKind::PermissionDenied, advice).with_detail(
                            json!({"stderr": aai_descriptor::guide::shorten(stderr, 2000)}),
                        ),
                    );
                }
                return Err(AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!(
                        "{what}: osascript did not answer (exit code {:?}): {}",
                        output.code,
                        aai_descriptor::guide::shorten(stderr, 500)
                    ),
                )
                .with_detail(json!({"stdout": aai_descriptor::guide::shorten(&output.stdout, 2000), "stderr": aai_descriptor::guide::shorten(stderr, 2000)})));
            };
            ui_program::outcome(&reply, planned.app, &planned.steps, &WORDING)
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let planned = self.planned(&invocation)?;
        let mut plan = describe(&[planned.command]);
        // The program (also the argument after `-e`), readable, for authors checking what runs.
        plan["script"] = json!(AX_PROGRAM);
        plan["ax"] = json!({"app": planned.app, "steps": ui_program::plan_steps(&planned.steps)});
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Quotes of every kind, backticks, subexpressions, an AppleScript and a PowerShell
    /// injection, a JavaScript one, line terminators and NUL.
    const HOSTILE: &str = "\"'`$(rm -rf ~)\"; do shell script \"rm -rf ~\"'); Remove-Item C:\\ -Recurse #\n\r\0 ${x} \"); ObjC.import('stdlib'); $.system(\"id\") ü\u{2028}";

    /// Fragments of [`HOSTILE`] that must never reach the program text or argv.
    const FRAGMENTS: [&str; 6] = [
        "rm -rf",
        "Remove-Item",
        "do shell script",
        "$(rm",
        "${x}",
        "$.system",
    ];

    fn textedit() -> aai_descriptor::Descriptor {
        let doc = json!({"schema_version": "1.0", "appId": "mac.textedit", "name": "TextEdit",
            "platforms": {"macos": {"automation": "ax", "app": "com.apple.TextEdit", "tools": [
                {"name": "write", "description": "Replace the document's text.",
                 "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "font": {"type": "string"}},
                                "required": ["text", "font"]},
                 "steps": [
                    {"action": "set_text", "path": "window/scroll area/text area", "text": "${text}"},
                    {"action": "select", "path": "window/pop up button[Font]", "text": "${font}"},
                    {"action": "invoke", "path": "window/button[${font}]", "use": "AXShowMenu"},
                    {"action": "wait", "path": "sheet[Save]", "timeout_ms": 2000},
                    {"action": "read_state", "path": "window/checkbox[Wrap]", "as": "wrap"}]}]}}});
        aai_descriptor::parse("t", doc.to_string().as_bytes()).expect("valid")
    }

    fn executor(osascript: &str) -> AxExecutor {
        let settings = Settings {
            osascript: osascript.into(),
            ..Settings::default()
        };
        AxExecutor::new(Arc::new(settings), Protection::default())
    }

    fn plan(executor: &AxExecutor, args: &Value) -> Result<Value, AaiError> {
        let d = textedit();
        let args = args.as_object().cloned().expect("object");
        executor.plan(Invocation::new(&d, "write", &args, Duration::from_secs(5)))
    }

    #[test]
    fn the_argv_is_fixed_and_is_the_program() {
        let plan = plan(
            &executor("/usr/bin/osascript"),
            &json!({"text": "hi", "font": "Menlo"}),
        )
        .expect("plan");
        assert_eq!(plan["program"], "/usr/bin/osascript");
        assert_eq!(plan["argv"], json!(["-l", "JavaScript", "-e", AX_PROGRAM]));
        assert_eq!(plan["script"], json!(AX_PROGRAM));
    }

    #[test]
    fn stdin_holds_the_bound_steps() {
        let plan = plan(
            &executor("osascript"),
            &json!({"text": "hello", "font": "Menlo"}),
        )
        .expect("plan");
        let stdin: Value =
            serde_json::from_str(plan["stdin"].as_str().expect("stdin")).expect("json");
        assert_eq!(
            stdin,
            json!({"app": "com.apple.TextEdit", "protected": ["aai gateway", "aai-gateway"], "steps": [
                {"action": "set_text", "path": "window/scroll area/text area", "text": "hello", "segments": [
                    {"role": "window", "name": null, "nth": 1}, {"role": "scroll area", "name": null, "nth": 1},
                    {"role": "text area", "name": null, "nth": 1}]},
                {"action": "select", "path": "window/pop up button[Font]", "text": "Menlo", "segments": [
                    {"role": "window", "name": null, "nth": 1}, {"role": "pop up button", "name": "Font", "nth": 1}]},
                {"action": "invoke", "path": "window/button[Menlo]", "use": "AXShowMenu", "segments": [
                    {"role": "window", "name": null, "nth": 1}, {"role": "button", "name": "Menlo", "nth": 1}]},
                {"action": "wait", "path": "sheet[Save]", "timeout_ms": 2000, "segments": [
                    {"role": "sheet", "name": "Save", "nth": 1}]},
                {"action": "read_state", "path": "window/checkbox[Wrap]", "as": "wrap", "segments": [
                    {"role": "window", "name": null, "nth": 1}, {"role": "checkbox", "name": "Wrap", "nth": 1}]}
            ]})
        );
        assert_eq!(plan["ax"]["app"], "com.apple.TextEdit");
        assert_eq!(plan["ax"]["steps"], stdin["steps"]);
    }

    /// A hostile value reaches stdin's JSON exactly and nowhere else; the program and argv are
    /// the same whatever the values.
    #[test]
    fn values_travel_only_in_stdin() {
        let executor = executor("osascript");
        let fixed = plan(&executor, &json!({"text": "a", "font": "b"})).expect("plan");
        let plan = plan(&executor, &json!({"text": HOSTILE, "font": HOSTILE})).expect("plan");
        assert_eq!(plan["program"], fixed["program"]);
        assert_eq!(plan["argv"], fixed["argv"]);
        let stdin_text = plan["stdin"].as_str().expect("stdin");
        assert!(!stdin_text.contains('\0'), "NUL travels escaped in JSON");
        let stdin: Value = serde_json::from_str(stdin_text).expect("json");
        assert_eq!(
            stdin["steps"][0]["text"].as_str().expect("text").as_bytes(),
            HOSTILE.as_bytes()
        );
        assert_eq!(stdin["steps"][1]["text"], HOSTILE);
        assert_eq!(stdin["steps"][2]["segments"][1]["name"], HOSTILE);
        assert_eq!(
            stdin["steps"][2]["segments"]
                .as_array()
                .expect("segments")
                .len(),
            2
        );
        for text in plan["argv"]
            .as_array()
            .expect("argv")
            .iter()
            .filter_map(Value::as_str)
        {
            for fragment in FRAGMENTS {
                assert!(!text.contains(fragment), "{fragment:?} reached argv");
            }
        }
        for fragment in FRAGMENTS {
            assert!(
                !AX_PROGRAM.contains(fragment),
                "{fragment:?} is in the program"
            );
        }
    }

    #[test]
    fn the_program_reads_its_input_only_from_stdin_and_evaluates_none() {
        for forbidden in [
            "Invoke-Expression",
            "iex ",
            "eval(",
            "doShellScript",
            "Function(",
            "argv",
            "$.system",
            "ObjC.import('stdlib')",
        ] {
            assert!(!AX_PROGRAM.contains(forbidden), "{forbidden}");
        }
        assert_eq!(AX_PROGRAM.matches("fileHandleWithStandardInput").count(), 1);
        assert!(AX_PROGRAM.contains("ObjC.import('Foundation')"));
        assert!(AX_PROGRAM.contains("Application('System Events')"));
    }

    /// The program compiles as JavaScript (Node's parser; osascript's JavaScriptCore is not
    /// here). Node is on every machine this project builds on.
    #[test]
    fn the_program_is_valid_javascript() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("ax.js");
        std::fs::write(&file, AX_PROGRAM).expect("write");
        let output = std::process::Command::new("node")
            .arg("--check")
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("node is needed to check ax.js: {e}"));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    #[test]
    fn a_protected_app_is_refused_without_running() {
        let dir = tempfile::tempdir().expect("dir");
        let marker = dir.path().join("ran");
        let fake = crate::ui_program::fake::program(
            dir.path(),
            "osascript",
            &format!("touch '{}'\n", marker.display()),
        );
        let executor = executor(&fake.display().to_string());
        // The descriptor's name, as well as its app, is checked.
        executor.protection.set(vec!["textedit".into()]);
        let d = textedit();
        let args = json!({"text": "x", "font": "f"})
            .as_object()
            .cloned()
            .expect("object");
        let invocation = Invocation::new(&d, "write", &args, Duration::from_secs(5));
        let error =
            crate::ui_program::fake::block_on(executor.call(invocation)).expect_err("refused");
        assert_eq!(error.kind, ErrorKind::PermissionDenied);
        assert_eq!(
            error.detail.as_ref().expect("detail")["reason"],
            "protected_app"
        );
        assert!(!marker.exists(), "osascript ran");
        assert_eq!(
            plan(&executor, &json!({"text": "x", "font": "f"}))
                .expect_err("refused")
                .kind,
            ErrorKind::PermissionDenied
        );
    }

    #[test]
    fn ui_scripting_refusals_read_as_permission_denied() {
        let accessibility = denied(
            Some(-1719),
            "System Events got an error: osascript is not allowed assistive access.",
        )
        .expect("denied");
        assert!(accessibility.contains("Privacy & Security › Accessibility"));
        assert!(
            denied(Some(-25211), "")
                .expect("denied")
                .contains("Accessibility")
        );
        assert!(
            denied(Some(-1743), "")
                .expect("denied")
                .contains("Automation")
        );
        assert!(denied(Some(-1728), "Can’t get UI element 1.").is_none());
    }
}
