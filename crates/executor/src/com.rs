//! The COM executor (the `windows` section, `automation: "com"`).
//!
//! Every call runs the same PowerShell program, [`COM_PROGRAM`], passed with
//! `-EncodedCommand`. The tool's action list, with its placeholders bound to the arguments as
//! typed JSON values, travels on stdin; the program walks it with late-bound `InvokeMember`
//! calls. Names (ProgIDs, methods, properties, variables) come only from the descriptor.

use std::sync::{Arc, LazyLock};

use aai_descriptor::{AaiError, ErrorKind, Parameters, Platform, template};
use base64::Engine;
use serde_json::{Map, Value, json};

use crate::process::{self, Command};
use crate::{BoxFuture, Executor, Invocation, Settings, describe, json_text, section_tool};

/// The PowerShell program that runs every COM action list.
pub const COM_PROGRAM: &str = include_str!("com/com.ps1");

/// [`COM_PROGRAM`] as `-EncodedCommand` takes it, encoded once.
static ENCODED_PROGRAM: LazyLock<String> = LazyLock::new(|| encoded_command(COM_PROGRAM));

pub struct ComExecutor {
    settings: Arc<Settings>,
}

impl ComExecutor {
    pub fn new(settings: Arc<Settings>) -> Self {
        Self { settings }
    }

    fn planned(&self, invocation: &Invocation<'_>) -> Result<(Command, Option<String>), AaiError> {
        let (section, tool) = section_tool(
            invocation.descriptor.platforms.windows.as_ref(),
            invocation,
            Platform::Windows,
        )?;
        let schema = tool.common.parameters.as_ref().map(Parameters::schema);
        let lookup = |name: &str| invocation.value(schema.as_ref(), name);
        let mut steps = Vec::with_capacity(tool.fields.script.len());
        for step in &tool.fields.script {
            let mut out = Map::new();
            out.insert("action".into(), json!(step.action));
            for (key, field) in [
                ("var", &step.var),
                ("object", &step.object),
                ("method", &step.method),
                ("property", &step.property),
            ] {
                if let Some(text) = field {
                    out.insert(key.into(), json!(text));
                }
            }
            if step.action == "create" {
                let progid = step.progid.as_ref().or(section.fields.progid.as_ref());
                out.insert("progid".into(), json!(progid));
            }
            if let Some(value) = &step.value {
                let bound = template::bind(value, &lookup).map_err(|n| invocation.missing(n))?;
                out.insert("value".into(), bound);
            }
            if let Some(args) = &step.args {
                let bound = template::bind(&Value::Array(args.clone()), &lookup)
                    .map_err(|n| invocation.missing(n))?;
                out.insert("args".into(), bound);
            }
            steps.push(Value::Object(out));
        }
        let stdin = json!({ "steps": steps }).to_string();
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
        Ok((command, tool.fields.output_parser.clone()))
    }
}

/// PowerShell's `-EncodedCommand` form: base64 of the UTF-16LE text.
pub fn encoded_command(program: &str) -> String {
    let bytes: Vec<u8> = program.encode_utf16().flat_map(u16::to_le_bytes).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl Executor for ComExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let (command, parser) = self.planned(&invocation)?;
            let what = invocation.name();
            let output = process::run(&command, invocation.timeout, &what).await?;
            let reply: Value = serde_json::from_str(output.stdout.trim()).map_err(|_| {
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
            if reply.get("ok") != Some(&Value::Bool(true)) {
                return Err(map_error(&reply, &invocation, &what));
            }
            let result = reply.get("result").cloned().unwrap_or(Value::Null);
            parse_output(result, parser.as_deref(), &what)
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let mut plan = describe(&[self.planned(&invocation)?.0]);
        // The encoded program, readable, for authors checking what runs.
        plan["script"] = json!(COM_PROGRAM);
        Ok(plan)
    }
}

/// `last_result` (the default): the last step's value, JSON text parsed; `json` insists on
/// JSON text; `string` gives text.
fn parse_output(result: Value, parser: Option<&str>, what: &str) -> Result<Value, AaiError> {
    match (parser, result) {
        (Some("json"), Value::String(text)) => serde_json::from_str(&text).map_err(|e| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("{what}: the last result is not JSON ({e}), but the tool's output_parser is \"json\""),
            )
            .with_detail(json!({"output": aai_descriptor::guide::shorten(&text, 2000)}))
        }),
        (Some("string"), Value::String(text)) => Ok(Value::String(text)),
        (Some("string"), other) => Ok(Value::String(template::as_text(&other))),
        (_, Value::String(text)) => Ok(json_text(&text).unwrap_or(Value::String(text))),
        (_, other) => Ok(other),
    }
}

/// COM HRESULTs to AAI codes.
fn map_error(reply: &Value, invocation: &Invocation<'_>, what: &str) -> AaiError {
    let hresult = reply.get("hresult").and_then(Value::as_str).unwrap_or("");
    let message = reply.get("message").and_then(Value::as_str).unwrap_or("");
    let step = reply.get("step").and_then(Value::as_u64);
    let app = &invocation.descriptor.name;
    let code = u32::from_str_radix(hresult.trim_start_matches("0x"), 16).unwrap_or(0);
    let (kind, advice) = match code {
        // REGDB_E_CLASSNOTREG, CO_E_CLASSSTRING: no such ProgID here.
        0x8004_0154 | 0x8004_01F3 => (
            ErrorKind::AppNotFound,
            format!(
                "{app} is not installed (its COM class is not registered); install it and call again."
            ),
        ),
        // CO_E_SERVER_EXEC_FAILURE, RPC_S_SERVER_UNAVAILABLE, RPC_S_CALL_FAILED,
        // RPC_E_DISCONNECTED, MK_E_UNAVAILABLE.
        0x8008_0005 | 0x8007_06BA | 0x8007_06BE | 0x8001_0108 | 0x8004_01E3 => (
            ErrorKind::AppNotRunning,
            format!(
                "{app} is not running or could not be started; open it (and close any dialog it shows), then call again."
            ),
        ),
        // E_ACCESSDENIED, RPC_E_ACCESS_DENIED, CO_E_RUNAS_LOGON_FAILURE-like refusals.
        0x8007_0005 | 0x8001_011B => (
            ErrorKind::PermissionDenied,
            format!(
                "Windows refused access to {app}'s automation; run the gateway as the same user as {app} (not elevated when {app} is not), and allow programmatic access in {app}'s Trust Center if it asks."
            ),
        ),
        // RPC_E_SERVERCALL_RETRYLATER: the app is busy, usually with a modal dialog.
        0x8001_010A => (
            ErrorKind::AutomationFailed,
            format!("{app} is busy (a dialog may be open); close it and call again."),
        ),
        _ => (
            ErrorKind::AutomationFailed,
            "The action list failed; see the message.".into(),
        ),
    };
    AaiError::new(
        kind,
        format!(
            "{what}: {advice} (step {}, HRESULT {hresult}: {})",
            step.unwrap_or(0),
            message.trim()
        ),
    )
    .with_detail(json!({"hresult": hresult, "step": step, "message": message}))
}
