//! Runs `"automation": "uia"` tools (the `windows` section): the same steps as Linux's
//! `atspi`, through Windows UI Automation.
//!
//! Every call runs the same PowerShell program, [`UIA_PROGRAM`] (System.Windows.Automation),
//! passed with `-EncodedCommand`; the app, the protected-app patterns and the steps bound to
//! the call's arguments travel as JSON on stdin ([`crate::ui_program`]). The program finds the
//! app's top-level windows (by process name, else by window title), each path segment among
//! the descendants of the one before, breadth first, and answers one JSON line.

use std::sync::{Arc, LazyLock};

use aai_descriptor::{AaiError, ErrorKind, Platform};
use serde_json::{Value, json};

use crate::atspi::Protection;
use crate::process::{self, Command};
use crate::ui_program::{self, Bound, Wording};
use crate::{BoxFuture, Executor, Invocation, Settings, describe, encoded_command, section_tool};

/// The PowerShell program that runs every UI Automation tool, as written (with comments).
pub const UIA_PROGRAM: &str = include_str!("uia/uia.ps1");

/// [`UIA_PROGRAM`] as it runs: without its comment lines and indentation, so that encoded
/// it stays well inside Windows' 32,767-character command line.
pub static UIA_RUN: LazyLock<String> = LazyLock::new(|| compact(UIA_PROGRAM));

/// [`UIA_RUN`] as `-EncodedCommand` takes it, encoded once.
static ENCODED_PROGRAM: LazyLock<String> = LazyLock::new(|| encoded_command(&UIA_RUN));

/// A PowerShell program without blank lines, comment lines and indentation (the program has
/// no here-strings or block comments, whose lines this would change).
fn compact(program: &str) -> String {
    program
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs UI Automation tools.
pub struct UiaExecutor {
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
    not_running: "(no top-level window of a process by that name, nor one with that title)",
    denied,
};

/// E_ACCESSDENIED and UIA's own refusal: the app runs elevated and the gateway does not.
fn denied(code: Option<i64>, message: &str) -> Option<String> {
    let refused =
        matches!(code, Some(-2_147_024_891)) || message.to_lowercase().contains("access is denied");
    refused.then(|| {
        "Windows refused UI Automation access to the app: it probably runs as administrator and the gateway does not. Run both as the same user at the same level, then call again.".to_owned()
    })
}

impl UiaExecutor {
    pub fn new(settings: Arc<Settings>, protection: Protection) -> Self {
        Self {
            settings,
            protection,
        }
    }

    fn planned<'a>(&self, invocation: &Invocation<'a>) -> Result<Planned<'a>, AaiError> {
        let (section, tool) = section_tool(
            invocation.descriptor.platforms.windows.as_ref(),
            invocation,
            Platform::Windows,
        )?;
        let (app, steps, stdin) = ui_program::prepare(
            invocation,
            "windows",
            section.fields.app.as_deref(),
            tool.fields.steps.as_deref(),
            tool.common.parameters.as_ref(),
            &self.protection,
        )?;
        let command = Command::new(&self.settings.powershell)
            .args([
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-EncodedCommand",
            ])
            .arg(ENCODED_PROGRAM.as_str())
            .stdin(stdin);
        Ok(Planned {
            command,
            app,
            steps,
        })
    }
}

impl Executor for UiaExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let planned = self.planned(&invocation)?;
            let what = invocation.name();
            let output = process::run(&planned.command, invocation.timeout, &what).await?;
            let reply = ui_program::answer_line(&output.stdout).ok_or_else(|| {
                AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!(
                        "{what}: PowerShell did not answer (exit code {:?}): {}",
                        output.code,
                        aai_descriptor::guide::shorten(&output.stderr, 500)
                    ),
                )
                .with_detail(json!({"stdout": aai_descriptor::guide::shorten(&output.stdout, 2000), "stderr": aai_descriptor::guide::shorten(&output.stderr, 2000)}))
            })?;
            ui_program::outcome(&reply, planned.app, &planned.steps, &WORDING)
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let planned = self.planned(&invocation)?;
        let mut plan = describe(&[planned.command]);
        // The encoded program, readable, for authors checking what runs.
        plan["script"] = json!(UIA_RUN.as_str());
        plan["uia"] = json!({"app": planned.app, "steps": ui_program::plan_steps(&planned.steps)});
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use base64::Engine;

    use super::*;

    /// Quotes of every kind, backticks, subexpressions, an AppleScript and a PowerShell
    /// injection, line terminators and NUL.
    const HOSTILE: &str = "\"'`$(rm -rf ~)\"; do shell script \"rm -rf ~\"'); Remove-Item C:\\ -Recurse #\n\r\0 ${x} `n ü\u{2028}";

    /// Fragments of [`HOSTILE`] that must never reach the program text or argv.
    const FRAGMENTS: [&str; 5] = ["rm -rf", "Remove-Item", "do shell script", "$(rm", "${x}"];

    fn notepad() -> aai_descriptor::Descriptor {
        let doc = json!({"schema_version": "1.0", "appId": "win.notepad", "name": "Notepad",
            "platforms": {"windows": {"automation": "uia", "app": "notepad", "tools": [
                {"name": "write", "description": "Replace the document's text.",
                 "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "file": {"type": "string"}},
                                "required": ["text"]},
                 "steps": [
                    {"action": "set_text", "path": "window/document", "text": "${text}"},
                    {"action": "invoke", "path": "menu item[File]/menu item[Recent]/menu item[${file}]", "use": "expand"},
                    {"action": "read_text", "path": "window/document"}]}]}}});
        aai_descriptor::parse("t", doc.to_string().as_bytes()).expect("valid")
    }

    fn executor(powershell: &str) -> UiaExecutor {
        let settings = Settings {
            powershell: powershell.into(),
            ..Settings::default()
        };
        UiaExecutor::new(Arc::new(settings), Protection::default())
    }

    fn plan(executor: &UiaExecutor, args: &Value) -> Result<Value, AaiError> {
        let d = notepad();
        let args = args.as_object().cloned().expect("object");
        executor.plan(Invocation::new(&d, "write", &args, Duration::from_secs(5)))
    }

    fn decoded(encoded: &str) -> String {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        let units: Vec<u16> = bytes
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16(&units).expect("utf16")
    }

    #[test]
    fn the_argv_is_fixed_and_carries_the_encoded_program() {
        let plan = plan(
            &executor("powershell.exe"),
            &json!({"text": "hi", "file": "a.txt"}),
        )
        .expect("plan");
        assert_eq!(plan["program"], "powershell.exe");
        let argv: Vec<String> = serde_json::from_value(plan["argv"].clone()).expect("argv");
        assert_eq!(
            argv[..5],
            [
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-EncodedCommand"
            ]
        );
        assert_eq!(argv.len(), 6);
        assert_eq!(decoded(&argv[5]), *UIA_RUN);
        assert_eq!(plan["script"], json!(UIA_RUN.as_str()));
        // Windows takes at most 32,767 characters in a command line, program path included.
        let line = r"C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe".len()
            + argv.iter().map(|a| a.len() + 3).sum::<usize>();
        assert!(line < 32_000, "the command line is {line} characters");
    }

    #[test]
    fn the_program_runs_as_written_less_comments_and_indentation() {
        assert_eq!(
            compact("# note\n  $a = 1\n\n\t# more\n    if ($a) { 'x # y' }\n"),
            "$a = 1\nif ($a) { 'x # y' }"
        );
        let code: Vec<&str> = UIA_PROGRAM
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        assert_eq!(UIA_RUN.lines().collect::<Vec<_>>(), code);
        assert!(
            !UIA_PROGRAM.contains("<#"),
            "a block comment would not be compacted"
        );
        assert!(
            !UIA_PROGRAM.contains("@\"") && !UIA_PROGRAM.contains("@'"),
            "a here-string would be changed by compacting"
        );
    }

    #[test]
    fn stdin_holds_the_bound_steps() {
        let plan = plan(
            &executor("powershell"),
            &json!({"text": "hello", "file": "a.txt"}),
        )
        .expect("plan");
        let stdin: Value =
            serde_json::from_str(plan["stdin"].as_str().expect("stdin")).expect("json");
        assert_eq!(
            stdin,
            json!({"app": "notepad", "protected": ["aai gateway", "aai-gateway"], "steps": [
                {"action": "set_text", "path": "window/document", "text": "hello", "segments": [
                    {"role": "window", "name": null, "nth": 1}, {"role": "document", "name": null, "nth": 1}]},
                {"action": "invoke", "path": "menu item[File]/menu item[Recent]/menu item[a.txt]", "use": "expand", "segments": [
                    {"role": "menu item", "name": "File", "nth": 1}, {"role": "menu item", "name": "Recent", "nth": 1},
                    {"role": "menu item", "name": "a.txt", "nth": 1}]},
                {"action": "read_text", "path": "window/document", "as": "read_text", "segments": [
                    {"role": "window", "name": null, "nth": 1}, {"role": "document", "name": null, "nth": 1}]}
            ]})
        );
        assert_eq!(plan["uia"]["app"], "notepad");
        assert_eq!(plan["uia"]["steps"], stdin["steps"]);
    }

    /// A hostile value reaches stdin's JSON exactly and nowhere else; the program and argv are
    /// the same whatever the values.
    #[test]
    fn values_travel_only_in_stdin() {
        let executor = executor("powershell");
        let fixed = plan(&executor, &json!({"text": "a", "file": "b"})).expect("plan");
        let plan = plan(&executor, &json!({"text": HOSTILE, "file": HOSTILE})).expect("plan");
        assert_eq!(plan["program"], fixed["program"]);
        assert_eq!(plan["argv"], fixed["argv"]);
        assert_eq!(plan["script"], fixed["script"]);
        let stdin_text = plan["stdin"].as_str().expect("stdin");
        assert!(!stdin_text.contains('\0'), "NUL travels escaped in JSON");
        let stdin: Value = serde_json::from_str(stdin_text).expect("json");
        assert_eq!(
            stdin["steps"][0]["text"].as_str().expect("text").as_bytes(),
            HOSTILE.as_bytes()
        );
        assert_eq!(
            stdin["steps"][1]["segments"][2]["name"]
                .as_str()
                .expect("name"),
            HOSTILE
        );
        assert_eq!(
            stdin["steps"][1]["segments"]
                .as_array()
                .expect("segments")
                .len(),
            3
        );
        let argv: Vec<String> = serde_json::from_value(plan["argv"].clone()).expect("argv");
        for text in argv
            .iter()
            .map(String::as_str)
            .chain([UIA_RUN.as_str(), decoded(&argv[5]).as_str()])
        {
            for fragment in FRAGMENTS {
                assert!(
                    !text.contains(fragment),
                    "{fragment:?} reached the program or argv"
                );
            }
        }
    }

    #[test]
    fn the_program_reads_its_input_only_from_stdin_and_evaluates_none() {
        for forbidden in [
            "Invoke-Expression",
            "iex ",
            "eval(",
            "doShellScript",
            "ScriptBlock",
            "Invoke-Command",
            "$args",
            "Start-Process",
        ] {
            assert!(
                !UIA_PROGRAM
                    .to_lowercase()
                    .contains(&forbidden.to_lowercase()),
                "{forbidden}"
            );
        }
        assert_eq!(
            UIA_PROGRAM
                .matches("[Console]::OpenStandardInput()")
                .count(),
            1
        );
        assert!(
            UIA_PROGRAM.contains("Add-Type -AssemblyName UIAutomationClient, UIAutomationTypes")
        );
    }

    #[test]
    fn a_protected_app_is_refused_without_running() {
        let dir = tempfile::tempdir().expect("dir");
        let marker = dir.path().join("ran");
        let fake = crate::ui_program::fake::program(
            dir.path(),
            "powershell",
            &format!("touch '{}'\n", marker.display()),
        );
        let executor = executor(&fake.display().to_string());
        executor.protection.set(vec!["NOTE".into()]);
        let d = notepad();
        let args = json!({"text": "x", "file": "f"})
            .as_object()
            .cloned()
            .expect("object");
        let invocation = Invocation::new(&d, "write", &args, Duration::from_secs(5));
        let error =
            crate::ui_program::fake::block_on(executor.call(invocation)).expect_err("refused");
        assert_eq!(error.kind, ErrorKind::PermissionDenied);
        assert!(
            error.message.contains("notepad is a protected app"),
            "{}",
            error.message
        );
        assert!(!marker.exists(), "PowerShell ran");
        // The dry run refuses as the call would.
        assert_eq!(
            plan(&executor, &json!({"text": "x", "file": "f"}))
                .expect_err("refused")
                .kind,
            ErrorKind::PermissionDenied
        );
        // The patterns reach the program too, which checks the windows it finds; so do the
        // gateway's own windows' titles (its consent dialog: only the person answers it).
        executor.protection.set(vec!["KeePass".into()]);
        let plan = plan(&executor, &json!({"text": "x", "file": "f"})).expect("plan");
        let stdin: Value =
            serde_json::from_str(plan["stdin"].as_str().expect("stdin")).expect("json");
        assert_eq!(
            stdin["protected"],
            json!(["keepass", "aai gateway", "aai-gateway"])
        );
    }

    /// Through a real exec of a stand-in for PowerShell (a shell script: PowerShell does not
    /// run here) that saves its stdin and prints a canned answer.
    #[cfg(unix)]
    #[test]
    fn a_call_reads_the_programs_answer() {
        let dir = tempfile::tempdir().expect("dir");
        let fake = crate::ui_program::fake::program(
            dir.path(),
            "powershell",
            &format!("cat > '{0}/stdin'\ncat '{0}/reply'\n", dir.path().display()),
        );
        let executor = executor(&fake.display().to_string());
        let d = notepad();
        let args = json!({"text": HOSTILE, "file": "f"})
            .as_object()
            .cloned()
            .expect("object");
        let call = |reply: &str| {
            std::fs::write(dir.path().join("reply"), reply).expect("reply");
            crate::ui_program::fake::block_on(executor.call(Invocation::new(
                &d,
                "write",
                &args,
                Duration::from_secs(10),
            )))
        };
        assert_eq!(
            call("{\"ok\":true,\"result\":{\"read_text\":\"hello\"}}\n").expect("ok"),
            json!("hello")
        );
        let stdin: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("stdin")).expect("stdin"),
        )
        .expect("json");
        assert_eq!(stdin["steps"][0]["text"], HOSTILE);
        let error = call("{\"ok\":false,\"error\":{\"kind\":\"not_found\",\"step\":1,\"at\":2,\"near\":[{\"role\":\"MenuItem\",\"name\":\"g\"}]}}")
            .expect_err("not found");
        assert_eq!(error.kind, ErrorKind::AutomationFailed);
        assert_eq!(
            error.message,
            "step 1 (invoke menu item[File]/menu item[Recent]/menu item[f]): no menu item[f] under menu item[File]/menu item[Recent]; there: MenuItem[g]"
        );
        let error = call("Add-Type : Cannot find UIAutomationClient").expect_err("no answer");
        assert_eq!(error.kind, ErrorKind::AutomationFailed);
        assert!(
            error.message.contains("PowerShell did not answer"),
            "{}",
            error.message
        );
    }

    #[test]
    fn access_refusals_read_as_permission_denied() {
        assert!(denied(Some(-2_147_024_891), "x").is_some());
        assert!(denied(None, "Access is denied.").is_some());
        assert!(denied(Some(-2_146_233_083), "Element not available").is_none());
    }
}
