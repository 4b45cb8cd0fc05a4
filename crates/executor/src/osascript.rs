//! The AppleScript / JXA executor (the `macos` section).
//!
//! The tool's script is planned once per call by [`aai_descriptor::script`]: its text is fixed,
//! wrapped in `on run argv` / `function run(argv)`, and handed to `osascript` on stdin
//! (`osascript -l <language> - <values…>`). The values follow the `-` as argv, so no value is
//! ever read as an option or as code.

mod record;

use std::sync::Arc;

use aai_descriptor::script::{self, Language};
use aai_descriptor::{AaiError, ErrorKind, Parameters, Platform, script_output};
use serde_json::{Map, Value, json};

use crate::process::{self, Command, Output};
use crate::{
    BoxFuture, Executor, Invocation, Settings, describe, json_text, reject_nul, section_tool,
};

pub struct OsascriptExecutor {
    settings: Arc<Settings>,
}

/// A planned call: the command and how to read its output.
struct Planned {
    command: Command,
    language: Language,
    parser: Option<String>,
}

impl OsascriptExecutor {
    pub fn new(settings: Arc<Settings>) -> Self {
        Self { settings }
    }

    fn planned(&self, invocation: &Invocation<'_>) -> Result<Planned, AaiError> {
        let (section, tool) = section_tool(
            invocation.descriptor.platforms.macos.as_ref(),
            invocation,
            Platform::Macos,
        )?;
        let language = Language::of_automation(&section.automation).ok_or_else(|| {
            AaiError::new(
                ErrorKind::AutomationNotSupported,
                format!("unknown macOS automation {:?}", section.automation),
            )
        })?;
        let schema = tool.common.parameters.as_ref().map(Parameters::schema);
        let parser = tool.fields.output_parser.clone();
        let output = script_output(language, parser.as_deref());
        let plan = script::plan(language, &tool.fields.script, output, |name| {
            script::param_kind(schema.as_ref(), name)
        })
        .map_err(|error| {
            AaiError::new(
                ErrorKind::ScriptParseError,
                format!("{}: {error}", invocation.name()),
            )
            .with_detail(json!({"placeholder": error.placeholder}))
        })?;
        let mut values = Map::new();
        for name in &plan.argv_names {
            let value = invocation
                .value(schema.as_ref(), name)
                .ok_or_else(|| invocation.missing(name))?;
            if let Value::String(text) = &value {
                reject_nul(invocation, name, text)?;
            }
            values.insert(name.clone(), value);
        }
        let mut command = Command::new(&self.settings.osascript).args([
            "-l",
            match language {
                Language::AppleScript => "AppleScript",
                Language::Jxa => "JavaScript",
            },
        ]);
        if language == Language::AppleScript && parser.as_deref() == Some("result as record") {
            // Recompilable source form: strings come back quoted, so records can be parsed.
            command = command.args(["-s", "s"]);
        }
        let command = command
            .arg("-")
            .args(plan.argv(&values))
            .stdin(plan.program);
        Ok(Planned {
            command,
            language,
            parser,
        })
    }
}

impl Executor for OsascriptExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let planned = self.planned(&invocation)?;
            let what = invocation.name();
            let output = process::run(&planned.command, invocation.timeout, &what).await?;
            if !output.success() {
                return Err(map_error(
                    &output,
                    invocation.descriptor.name.as_str(),
                    &what,
                ));
            }
            parse_output(
                &output.stdout,
                planned.parser.as_deref(),
                planned.language,
                &what,
            )
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        Ok(describe(&[self.planned(&invocation)?.command]))
    }
}

/// The tool result from what the script printed.
fn parse_output(
    stdout: &str,
    parser: Option<&str>,
    language: Language,
    what: &str,
) -> Result<Value, AaiError> {
    let text = stdout.strip_suffix('\n').unwrap_or(stdout);
    let unreadable = |reason: String| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("{what}: the script's result cannot be read as its output_parser {parser:?} says ({reason}); fix the script or the output_parser"),
        )
        .with_detail(json!({"output": aai_descriptor::guide::shorten(text, 2000)}))
    };
    match parser {
        Some("result as record") if language == Language::AppleScript => {
            record::parse(text).map_err(|e| unreadable(e.to_string()))
        }
        Some("result as record" | "json") => {
            serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))
        }
        Some("string") => Ok(Value::String(text.to_owned())),
        _ => Ok(json_text(text).unwrap_or_else(|| Value::String(text.to_owned()))),
    }
}

/// The error number osascript prints at the end of its message, e.g. `(-1743)`.
fn error_number(stderr: &str) -> Option<i64> {
    let line = stderr.trim_end();
    let open = line.rfind('(')?;
    line[open + 1..].strip_suffix(')')?.parse().ok()
}

/// Maps an osascript failure to the AAI code that says what to do.
fn map_error(output: &Output, app_name: &str, what: &str) -> AaiError {
    let stderr = output.stderr.trim();
    let number = error_number(stderr);
    let lower = stderr.to_lowercase();
    let detail = json!({"stderr": aai_descriptor::guide::shorten(stderr, 2000), "error_number": number, "exit_code": output.code});
    let (kind, message) = if matches!(number, Some(-1743 | -1744))
        || lower.contains("not authorized to send apple events")
        || lower.contains("not allowed assistive access")
    {
        (
            ErrorKind::PermissionDenied,
            format!(
                "{what}: macOS did not allow controlling {app_name}. Open System Settings › Privacy & Security › Automation, find the program running aai-gateway (your terminal or agent app) and turn on {app_name}; then call again. On first use macOS asks once; if it was declined, `tccutil reset AppleEvents` asks again."
            ),
        )
    } else if lower.contains("syntax error")
        || lower.contains("syntaxerror")
        || matches!(number, Some(-2740 | -2741 | -2753..=-2750))
    {
        (
            ErrorKind::ScriptParseError,
            format!(
                "{what}: osascript could not compile the tool's script: {stderr}. The descriptor's script needs fixing."
            ),
        )
    } else if matches!(number, Some(-600 | -609 | -903))
        || lower.contains("isn’t running")
        || lower.contains("isn't running")
    {
        (
            ErrorKind::AppNotRunning,
            format!(
                "{what}: {app_name} is not running and could not be started ({stderr}). Open {app_name} and call again."
            ),
        )
    } else if matches!(number, Some(-10814 | -10660 | -2700 | -1728 | -43))
        && (lower.contains("application")
            || lower.contains("can’t find")
            || lower.contains("can't find"))
        && (lower.contains("can’t get application")
            || lower.contains("can't get application")
            || lower.contains("can’t be found")
            || lower.contains("can't be found")
            || lower.contains("find application")
            || number == Some(-10814))
    {
        (
            ErrorKind::AppNotFound,
            format!(
                "{what}: {app_name} is not installed on this Mac ({stderr}). Install it, or check the application name in the tool's script."
            ),
        )
    } else if number == Some(-1712) {
        (
            ErrorKind::Timeout,
            format!(
                "{what}: {app_name} did not answer the Apple event in time (-1712); it may be busy or showing a dialog. Try again."
            ),
        )
    } else {
        (
            ErrorKind::AutomationFailed,
            format!(
                "{what}: the script failed: {}",
                if stderr.is_empty() {
                    "osascript exited with no message"
                } else {
                    stderr
                }
            ),
        )
    };
    AaiError::new(kind, message).with_detail(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(stderr: &str) -> AaiError {
        let output = Output {
            code: Some(1),
            stdout: String::new(),
            stderr: format!("{stderr}\n"),
        };
        map_error(&output, "Mail", "com.apple.mail:send")
    }

    #[test]
    fn osascript_failures_map_to_aai_codes() {
        let cases = [
            (
                "58:102: execution error: Not authorized to send Apple events to Mail. (-1743)",
                ErrorKind::PermissionDenied,
            ),
            (
                "execution error: Mail got an error: Not authorized (-1744)",
                ErrorKind::PermissionDenied,
            ),
            (
                "0:12: syntax error: Expected end of line but found identifier. (-2741)",
                ErrorKind::ScriptParseError,
            ),
            (
                "execution error: Error: SyntaxError: Unexpected token ')' (-2700)",
                ErrorKind::ScriptParseError,
            ),
            (
                "10:20: execution error: Can’t get application \"Mial\". (-1728)",
                ErrorKind::AppNotFound,
            ),
            (
                "execution error: Error: Application can't be found. (-2700)",
                ErrorKind::AppNotFound,
            ),
            (
                "execution error: Mail got an error: Application isn’t running. (-600)",
                ErrorKind::AppNotRunning,
            ),
            (
                "execution error: Mail got an error: Connection is invalid. (-609)",
                ErrorKind::AppNotRunning,
            ),
            (
                "execution error: Mail got an error: AppleEvent timed out. (-1712)",
                ErrorKind::Timeout,
            ),
            (
                "execution error: Can’t get mailbox \"Nope\". (-1728)",
                ErrorKind::AutomationFailed,
            ),
        ];
        for (stderr, kind) in cases {
            assert_eq!(failed(stderr).kind, kind, "{stderr}");
        }
        let denied =
            failed("execution error: Not authorized to send Apple events to Mail. (-1743)");
        assert!(denied.message.contains("Privacy & Security › Automation"));
        assert_eq!(
            denied.detail.as_ref().and_then(|d| d.get("error_number")),
            Some(&json!(-1743))
        );
    }

    #[test]
    fn outputs_are_parsed_as_their_parser_says() {
        let text = |out: &str, parser: Option<&str>, language| {
            parse_output(out, parser, language, "t").expect("parsed")
        };
        assert_eq!(
            text("hello\n", Some("result as text"), Language::AppleScript),
            json!("hello")
        );
        assert_eq!(
            text(
                "{\"success\":true}\n",
                Some("result as text"),
                Language::AppleScript
            ),
            json!({"success": true}),
            "JSON text is detected"
        );
        assert_eq!(
            text("{\"a\":1}\n", Some("string"), Language::AppleScript),
            json!("{\"a\":1}")
        );
        assert_eq!(
            text(
                "{name:\"Inbox\", unread:2}\n",
                Some("result as record"),
                Language::AppleScript
            ),
            json!({"name": "Inbox", "unread": 2})
        );
        assert_eq!(
            text("{\"n\":1}\n", Some("result as record"), Language::Jxa),
            json!({"n": 1})
        );
        let error =
            parse_output("not json", Some("json"), Language::Jxa, "t").expect_err("bad json");
        assert_eq!(error.kind, ErrorKind::AutomationFailed);
    }
}
