//! The Android executor (the `android` section, `automation: "intent"`), through `adb`.
//!
//! `adb shell` joins what it is given into one line and the device's shell parses that line
//! again, so every word of the remote command is quoted for a POSIX shell here: the action,
//! the package, each extra's key and value. Extras are typed from the tool's parameters
//! (`--es`, `--ei`, `--el`, `--ef`, `--ez`).

use std::sync::Arc;

use aai_descriptor::{AaiError, ErrorKind, Parameters, Platform, template};
use serde_json::{Map, Value, json};

use crate::process::{self, Command, Output};
use crate::{
    BoxFuture, Executor, Invocation, Settings, describe, json_text, reject_nul, section_tool,
};

/// `value` quoted for a POSIX shell (Android's `sh` included): as it is when it holds only
/// characters no shell treats specially, else in single quotes with each `'` written `'\''`.
pub fn shell_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b));
    if plain {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

pub struct AdbExecutor {
    settings: Arc<Settings>,
}

struct Planned {
    commands: Vec<Command>,
    broadcast: bool,
    content_query: bool,
}

impl AdbExecutor {
    pub fn new(settings: Arc<Settings>) -> Self {
        Self { settings }
    }

    /// `adb [-s serial] shell <line>`, the line built from already quoted words.
    fn shell(&self, words: &[String]) -> Command {
        let line: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
        let mut command = Command::new(&self.settings.adb);
        if let Some(serial) = &self.settings.android_serial {
            command = command.args(["-s", serial.as_str()]);
        }
        command.arg("shell").arg(line.join(" "))
    }

    fn planned(&self, invocation: &Invocation<'_>) -> Result<Planned, AaiError> {
        let (section, tool) = section_tool(
            invocation.descriptor.platforms.android.as_ref(),
            invocation,
            Platform::Android,
        )?;
        let fields = &tool.fields;
        let schema = tool.common.parameters.as_ref().map(Parameters::schema);
        let sub = match fields.intent.as_deref() {
            Some("broadcast") => "broadcast",
            Some("service") => "startservice",
            _ => "start",
        };
        let mut words: Vec<String> =
            vec!["am".into(), sub.into(), "-a".into(), fields.action.clone()];
        match &fields.component {
            Some(component) => words.extend(["-n".into(), component.clone()]),
            None => words.extend(["-p".into(), section.fields.package.clone()]),
        }
        for (key, template) in fields.extras.iter().flat_map(Map::iter) {
            let Some((flag, text)) = extra(invocation, schema.as_ref(), key, template)? else {
                continue;
            };
            reject_nul(invocation, key, &text)?;
            words.extend([flag.to_owned(), key.clone(), text]);
        }
        let mut commands = vec![self.shell(&words)];
        let content_query = fields.result_type.as_deref() == Some("content_provider");
        if content_query && let Some(uri) = &fields.result_uri {
            commands.push(self.shell(&[
                "content".into(),
                "query".into(),
                "--uri".into(),
                uri.clone(),
            ]));
        }
        Ok(Planned {
            commands,
            broadcast: sub == "broadcast",
            content_query,
        })
    }
}

/// The `am` flag and value text of one extra; `None` when it takes an optional argument that
/// was not given.
fn extra(
    invocation: &Invocation<'_>,
    schema: Option<&Value>,
    key: &str,
    template: &Value,
) -> Result<Option<(&'static str, String)>, AaiError> {
    let lookup = |name: &str| invocation.value(schema, name);
    let (declared, value) = match template.as_str().and_then(template::whole_placeholder) {
        Some(name) => {
            let Some(value) = lookup(name) else {
                return Ok(None);
            };
            let declared = schema
                .and_then(|s| s.get("properties")?.get(name))
                .cloned()
                .unwrap_or(Value::Null);
            (declared, value)
        }
        None => {
            let value =
                template::bind(template, &lookup).map_err(|name| invocation.missing(name))?;
            (Value::Null, value)
        }
    };
    let kind = declared.get("type").and_then(Value::as_str);
    let int64 = declared.get("format").and_then(Value::as_str) == Some("int64");
    let flag = match (kind, &value) {
        (Some("boolean"), _) | (None, Value::Bool(_)) => "--ez",
        (Some("integer"), _) if int64 => "--el",
        (Some("integer"), _) | (None, Value::Number(_)) if value.is_i64() || value.is_u64() => {
            if value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()) {
                "--ei"
            } else if kind.is_none() {
                "--el"
            } else {
                return Err(AaiError::new(
                    ErrorKind::InvalidParams,
                    format!(
                        "{}: extra `{key}` is {value}, which does not fit a 32-bit int; the descriptor can declare the parameter with \"format\": \"int64\"",
                        invocation.name()
                    ),
                ));
            }
        }
        (Some("number"), _) | (None, Value::Number(_)) => "--ef",
        _ => "--es",
    };
    Ok(Some((flag, template::as_text(&value))))
}

impl Executor for AdbExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let planned = self.planned(&invocation)?;
            let what = invocation.name();
            let package = invocation
                .descriptor
                .platforms
                .android
                .as_ref()
                .map_or("", |s| s.fields.package.as_str());
            let deadline = tokio::time::Instant::now() + invocation.timeout;
            let sent = process::run(&planned.commands[0], invocation.timeout, &what).await?;
            check(&sent, package, &what)?;
            if planned.broadcast {
                return Ok(broadcast_result(&sent.stdout));
            }
            if let (true, Some(query)) = (planned.content_query, planned.commands.get(1)) {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let rows = process::run(query, left, &what).await?;
                check(&rows, package, &what)?;
                return Ok(Value::Array(content_rows(&rows.stdout)));
            }
            Ok(json!({"sent": true, "output": sent.stdout.trim()}))
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        Ok(describe(&self.planned(&invocation)?.commands))
    }
}

/// Maps adb's and the device's failures. `am` often exits 0 and reports errors in its output.
fn check(output: &Output, package: &str, what: &str) -> Result<(), AaiError> {
    let all = format!("{}\n{}", output.stdout, output.stderr);
    let lower = all.to_lowercase();
    let detail =
        json!({"output": aai_descriptor::guide::shorten(&all, 2000), "exit_code": output.code});
    let fail =
        |kind, message: String| Err(AaiError::new(kind, message).with_detail(detail.clone()));
    if lower.contains("no devices/emulators found")
        || lower.contains("device offline")
        || (lower.contains("device '") && lower.contains("not found"))
    {
        return fail(
            ErrorKind::AppNotRunning,
            format!(
                "{what}: no Android device is reachable through adb. Connect the device with USB debugging on (or start an emulator), check `adb devices`, then call again."
            ),
        );
    }
    if lower.contains("more than one device") {
        return fail(
            ErrorKind::AppNotRunning,
            format!(
                "{what}: more than one Android device is connected; set `executors.android_serial` in config.json to the serial `adb devices` shows."
            ),
        );
    }
    if lower.contains("unauthorized") {
        return fail(
            ErrorKind::PermissionDenied,
            format!(
                "{what}: the device has not authorized this computer; accept the \"Allow USB debugging\" prompt on the device and call again."
            ),
        );
    }
    if lower.contains("securityexception")
        || lower.contains("permission denial")
        || lower.contains("not exported")
    {
        return fail(
            ErrorKind::PermissionDenied,
            format!(
                "{what}: Android refused the intent (permission denial); the app does not accept it from the shell, or needs a permission granted on the device."
            ),
        );
    }
    if lower.contains("unable to resolve intent")
        || lower.contains("does not exist")
        || lower.contains("unknown package")
        || lower.contains("no activity found")
        || lower.contains("unknown authority")
        || lower.contains("could not find provider")
    {
        return fail(
            ErrorKind::AppNotFound,
            format!(
                "{what}: no component of {package} takes this intent; is the app installed on the device (`adb shell pm list packages {package}`)?"
            ),
        );
    }
    if !output.success() || lower.contains("error:") || lower.contains("exception") {
        return fail(
            ErrorKind::AutomationFailed,
            format!(
                "{what}: the intent failed: {}",
                aai_descriptor::guide::shorten(all.trim(), 500)
            ),
        );
    }
    Ok(())
}

/// `Broadcast completed: result=0, data="…"` as `{result_code, data}`.
fn broadcast_result(stdout: &str) -> Value {
    let Some(line) = stdout
        .lines()
        .find(|l| l.starts_with("Broadcast completed:"))
    else {
        return json!({"sent": true, "output": stdout.trim()});
    };
    let code = line
        .split("result=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse::<i64>().ok());
    let data = line
        .split_once("data=\"")
        .and_then(|(_, rest)| rest.rsplit_once('"'))
        .map(|(data, _)| json_text(data).unwrap_or_else(|| Value::String(data.to_owned())));
    json!({"result_code": code, "data": data})
}

/// The rows `content query` prints (`Row: 0 _id=1, title=Hi, there`) as objects of text;
/// `NULL` becomes null. A value running over several lines is joined back.
fn content_rows(stdout: &str) -> Vec<Value> {
    let mut lines: Vec<String> = Vec::new();
    for line in stdout.lines() {
        if line.starts_with("Row: ") || lines.is_empty() {
            lines.push(line.to_owned());
        } else if let Some(last) = lines.last_mut() {
            last.push('\n');
            last.push_str(line);
        }
    }
    lines
        .iter()
        .filter_map(|line| line.strip_prefix("Row: "))
        .map(|row| {
            let fields = row.split_once(' ').map_or("", |(_, rest)| rest);
            let mut object = Map::new();
            for pair in split_fields(fields) {
                if let Some((key, value)) = pair.split_once('=') {
                    let value = if value == "NULL" {
                        Value::Null
                    } else {
                        Value::String(value.to_owned())
                    };
                    object.insert(key.to_owned(), value);
                }
            }
            Value::Object(object)
        })
        .collect()
}

/// Splits `a=1, b=x, y, c=2` at each `, ` that starts a new `key=`.
fn split_fields(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(offset) = text[search..].find(", ") {
        let at = search + offset;
        let next = &text[at + 2..];
        let key_len = next.find('=').filter(|&n| {
            n > 0
                && next[..n]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        if key_len.is_some() {
            parts.push(&text[start..at]);
            start = at + 2;
        }
        search = at + 2;
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_posix() {
        assert_eq!(shell_quote("com.example.SEND"), "com.example.SEND");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's $(id)"), r"'it'\''s $(id)'");
    }

    #[test]
    fn content_rows_become_objects() {
        let out = "Row: 0 _id=1, title=Hi, there, body=line one\nline two, flag=NULL\nRow: 1 _id=2, title=x=y, body=, flag=1\n";
        assert_eq!(
            Value::Array(content_rows(out)),
            json!([
                {"_id": "1", "title": "Hi, there", "body": "line one\nline two", "flag": null},
                {"_id": "2", "title": "x=y", "body": "", "flag": "1"}
            ])
        );
        assert_eq!(content_rows("No result found.\n"), Vec::<Value>::new());
    }

    #[test]
    fn broadcast_results_are_read() {
        assert_eq!(
            broadcast_result(
                "Broadcasting: Intent { act=x }\nBroadcast completed: result=-1, data=\"{\"n\":2}\"\n"
            ),
            json!({"result_code": -1, "data": {"n": 2}})
        );
    }

    #[test]
    fn adb_failures_map_to_aai_codes() {
        let out = |stdout: &str, stderr: &str, code| Output {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        };
        let kind = |o: Output| check(&o, "com.example.mail", "t").expect_err("fails").kind;
        assert_eq!(
            kind(out("", "adb: error: no devices/emulators found\n", 1)),
            ErrorKind::AppNotRunning
        );
        assert_eq!(
            kind(out("", "adb: error: device 'emulator-5556' not found\n", 1)),
            ErrorKind::AppNotRunning
        );
        assert_eq!(
            kind(out("", "error: more than one device/emulator\n", 1)),
            ErrorKind::AppNotRunning
        );
        assert_eq!(
            kind(out("", "adb: device unauthorized.\n", 1)),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            kind(out(
                "Starting: Intent { act=x }\nError: Activity not started, unable to resolve Intent { act=x pkg=y }\n",
                "",
                0
            )),
            ErrorKind::AppNotFound
        );
        assert_eq!(
            kind(out(
                "java.lang.SecurityException: Permission Denial: starting Intent\n",
                "",
                0
            )),
            ErrorKind::PermissionDenied
        );
        assert!(check(&out("Starting: Intent { act=x pkg=y }\n", "", 0), "p", "t").is_ok());
    }
}
