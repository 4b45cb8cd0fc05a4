//! The built-in local toolsets (`spec/desktop-control.zh.md` §3): apps `local.files`,
//! `local.terminal` and `local.system`, offered through the same MCP surface as every app
//! (a guide each, run with `aai_exec`) and through the same gate and audit log.

pub mod beneath;
pub mod classify;
pub mod files;
pub mod sandbox;
pub mod system;
pub mod terminal;

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Risk};
use aai_executor::{BoxFuture, Executor, Invocation};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::Config;
use crate::discovery::Found;

pub const FILES: &str = "local.files";
pub const TERMINAL: &str = "local.terminal";
pub const SYSTEM: &str = "local.system";

/// `local` in config.json: which built-in apps are on, and the file sandbox.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LocalConfig {
    pub terminal: bool,
    /// Terminal sessions may start in, and `cd` by `working_dir` to, any folder (by default
    /// only inside `sandbox.allowed_directories`). Either way the commands themselves run
    /// with the user's rights: the file sandbox does not confine a shell.
    pub terminal_anywhere: bool,
    pub files: bool,
    pub system: bool,
    pub sandbox: sandbox::SandboxConfig,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            terminal: true,
            terminal_anywhere: false,
            files: true,
            system: true,
            sandbox: sandbox::SandboxConfig::default(),
        }
    }
}

fn tool(
    name: &str,
    description: &str,
    risk: &str,
    read_only: bool,
    properties: Value,
    required: &[&str],
) -> Value {
    // Built-in tools name every argument they take: anything else is a mistake to report.
    json!({"name": name, "description": description, "risk": risk, "readOnly": read_only,
           "parameters": {"type": "object", "properties": properties, "required": required,
                          "additionalProperties": false}})
}

fn files_descriptor() -> Value {
    json!({"schema_version": "1.0", "appId": FILES, "name": "Files",
    "description": "Read, write, edit, search and watch files in the folders the user allowed.",
    "aliases": ["filesystem", "file system"],
    "platforms": {"local": {"automation": "builtin", "tools": [
        tool("file_read", "Read a text file, by lines (binary files are reported, not shown).", "medium", true,
            json!({"path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1, "description": "First line, from 1"},
                   "limit": {"type": "integer", "minimum": 1, "description": "Most lines (default 2000)"}}), &["path"]),
        tool("file_write", "Create or replace a file with the content (atomic).", "high", false,
            json!({"path": {"type": "string"}, "content": {"type": "string"}}), &["path", "content"]),
        tool("file_edit", "Replace the one exact occurrence of old_string with new_string.", "high", false,
            json!({"path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}}), &["path", "old_string", "new_string"]),
        tool("file_search", "Find files by name glob, or lines by content regex.", "low", true,
            json!({"directory": {"type": "string"}, "pattern": {"type": "string"},
                   "type": {"type": "string", "enum": ["name", "content"], "default": "name"},
                   "max_results": {"type": "integer", "minimum": 1, "default": 50}}), &["directory", "pattern"]),
        tool("file_watch", "Wait for changes under a path and return them (create, modify, delete).", "low", true,
            json!({"path": {"type": "string"}, "events": {"type": "array", "items": {"type": "string", "enum": ["create", "modify", "delete"]}},
                   "recursive": {"type": "boolean", "default": true},
                   "wait_ms": {"type": "integer", "minimum": 0, "default": 10000, "description": "How long to wait for a first change"}}), &["path"])
    ]}}})
}

fn terminal_descriptor() -> Value {
    json!({"schema_version": "1.0", "appId": TERMINAL, "name": "Terminal",
    "description": "Run shell commands in persistent bash sessions (working directory and environment persist).",
    "aliases": ["shell", "bash", "command line"],
    "platforms": {"local": {"automation": "builtin", "tools": [
        tool("bash_execute", "Run a command in a bash session; returns output and exit code.", "high", false,
            json!({"command": {"type": "string"}, "session_id": {"type": "string", "description": "Default: the default session"},
                   "timeout_ms": {"type": "integer", "minimum": 1, "default": 120_000, "description": "Milliseconds"},
                   "working_dir": {"type": "string", "description": "A folder inside the allowed folders"}}), &["command"]),
        tool("bash_session", "Create, list or kill bash sessions.", "high", false,
            json!({"action": {"type": "string", "enum": ["create", "list", "kill"]}, "session_id": {"type": "string"},
                   "shell": {"type": "string", "default": "bash"}}), &["action"])
    ]}}})
}

fn system_descriptor() -> Value {
    json!({"schema_version": "1.0", "appId": SYSTEM, "name": "System",
    "description": "This computer: system information, clipboard, desktop notifications.",
    "aliases": ["clipboard", "notifications", "system info"],
    "platforms": {"local": {"automation": "builtin", "tools": [
        tool("system_info", "OS, architecture, CPUs, memory and displays.", "low", true, json!({}), &[]),
        tool("clipboard_read", "The clipboard's text.", "medium", true, json!({}), &[]),
        tool("clipboard_write", "Put text on the clipboard.", "medium", false, json!({"text": {"type": "string"}}), &["text"]),
        tool("notification_send", "Show a desktop notification.", "low", false,
            json!({"title": {"type": "string"}, "body": {"type": "string"},
                   "urgency": {"type": "string", "enum": ["low", "normal", "critical"], "default": "normal"}}), &["title", "body"])
    ]}}})
}

/// The built-in apps, parsed once: the same `Arc`s every scan, so a rescan that finds
/// nothing new is seen as unchanged (no list_changed).
static BUILTINS: LazyLock<[Found; 3]> = LazyLock::new(|| {
    [
        files_descriptor(),
        terminal_descriptor(),
        system_descriptor(),
    ]
    .map(|doc| {
        let id = doc["appId"].as_str().unwrap_or_default().to_owned();
        Found {
            rank: 0,
            path: PathBuf::from(format!("built in: {id}")),
            outcome: aai_descriptor::parse(&id, doc.to_string().as_bytes()).map(Arc::new),
        }
    })
});

/// The built-in apps `config` turns on, as discovery results ahead of every file.
pub fn builtins(config: &Config) -> Vec<Found> {
    let local = &config.local;
    [local.files, local.terminal, local.system]
        .into_iter()
        .zip(BUILTINS.iter())
        .filter(|(on, _)| *on)
        .map(|(_, found)| found.clone())
        .collect()
}

/// The risk of one call of a built-in tool when it is above the tool's own: a shell command
/// the classifier finds critical.
pub fn call_risk(app: &str, tool: &str, args: &Value) -> Option<Risk> {
    if app != TERMINAL || tool != "bash_execute" {
        return None;
    }
    let command = args.get("command").and_then(Value::as_str)?;
    classify::classify(command).map(|_| Risk::Critical)
}

/// Whether command-prefix grants cover this call: every simple command of a plain
/// `bash_execute` script starts with the words of one of `prefixes`. A script with parts the
/// grants do not cover (`git status; rm x`, `git log | sh`, `$(…)`) is not covered.
pub fn prefix_covers(
    app: &str,
    tool: &str,
    args: &serde_json::Map<String, Value>,
    prefixes: &[String],
) -> bool {
    if app != TERMINAL || tool != "bash_execute" {
        return false;
    }
    let Some(command) = args.get("command").and_then(Value::as_str) else {
        return false;
    };
    if classify::classify(command).is_some() {
        return false;
    }
    let Some(commands) = classify::plain_commands(command) else {
        return false;
    };
    commands.iter().all(|words| {
        prefixes.iter().any(|prefix| {
            let wanted: Vec<&str> = prefix.split_whitespace().collect();
            !wanted.is_empty()
                && words.len() >= wanted.len()
                && words.iter().zip(&wanted).all(|(word, want)| word == want)
        })
    })
}

/// Programs whose first argument names what they do (`git status`, `cargo test`): a grant
/// for them is offered on two words.
const WITH_SUBCOMMANDS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "docker",
    "podman",
    "kubectl",
    "go",
    "pip",
    "pip3",
    "uv",
    "apt",
    "apt-get",
    "brew",
    "systemctl",
    "gh",
    "make",
    "dotnet",
    "rustup",
    "poetry",
];

/// Programs that run whatever they are given: a prefix grant for them would cover anything.
const RUNS_ANYTHING: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "fish", "eval", "exec", "env", "command", "builtin",
    "xargs", "sudo", "su", "doas", "nohup", "nice", "time", "timeout", "watch", "source", ".",
    "python", "python3", "perl", "ruby", "node", "php", "find", "awk", "sed", "ssh",
];

/// The prefix "always allow commands starting with …" offers for this call, if any: the
/// first word (two for programs with subcommands) of a plain script whose every command
/// starts with them.
pub fn offered_prefix(
    app: &str,
    tool: &str,
    args: &serde_json::Map<String, Value>,
) -> Option<String> {
    if app != TERMINAL || tool != "bash_execute" {
        return None;
    }
    let command = args.get("command").and_then(Value::as_str)?;
    let commands = classify::plain_commands(command)?;
    let first = commands.first()?;
    let name = first.first()?;
    if RUNS_ANYTHING.contains(&name.as_str()) || name.contains('/') {
        return None;
    }
    let two = WITH_SUBCOMMANDS.contains(&name.as_str())
        && first.get(1).is_some_and(|w| !w.starts_with('-'));
    let prefix = if two {
        format!("{name} {}", first[1])
    } else {
        name.clone()
    };
    prefix_covers(app, tool, args, std::slice::from_ref(&prefix)).then_some(prefix)
}

/// Reads files for web uploads (multipart bodies) exactly as `file_read` would: inside the
/// allowed folders (narrowed by the client's roots), never the gateway's own files, within the
/// size limit, race-free.
pub fn upload_reader(config: &Config, home: &std::path::Path) -> aai_executor::rest::FileReader {
    let sandbox_config = config.local.sandbox.clone();
    let protected = vec![home.to_path_buf(), config.web.cache_dir()];
    Arc::new(move |path: &str, roots: &[String]| {
        let sandbox = sandbox::Sandbox::new(&sandbox_config, roots, &protected);
        let (resolved, bytes) = files::read_checked(&sandbox, path)?;
        let name = resolved
            .file_name()
            .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
        Ok((bytes, name))
    })
}

/// Runs the built-in tools.
pub struct LocalExecutor {
    config: LocalConfig,
    /// The gateway's own files: outside every sandbox.
    protected: Vec<PathBuf>,
    terminal: terminal::Sessions,
}

impl LocalExecutor {
    pub fn new(config: &Config, home: &std::path::Path) -> Self {
        Self {
            config: config.local.clone(),
            protected: vec![home.to_path_buf(), config.web.cache_dir()],
            terminal: terminal::Sessions::default(),
        }
    }

    fn sandbox(&self, roots: &[String]) -> sandbox::Sandbox {
        sandbox::Sandbox::new(&self.config.sandbox, roots, &self.protected)
    }

    /// Where terminal sessions start: the first allowed folder that exists (a private
    /// temporary folder when none does), and `working_dir` only inside the allowed folders;
    /// with `terminal_anywhere`, the user's home and any folder.
    fn place(&self, roots: &[String]) -> terminal::Place {
        if self.config.terminal_anywhere {
            return terminal::Place {
                start: Some(crate::config::user_home()),
                sandbox: None,
            };
        }
        let sandbox = self.sandbox(roots);
        terminal::Place {
            start: sandbox.allowed().iter().find(|d| d.is_dir()).cloned(),
            sandbox: Some(sandbox),
        }
    }

    async fn run(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let app = invocation.descriptor.app_id.as_str();
        let args = invocation.args.clone();
        match (app, invocation.tool) {
            (FILES, "file_watch") => files::watch(&self.sandbox(invocation.roots), &args).await,
            (FILES, tool) => {
                let sandbox = self.sandbox(invocation.roots);
                let tool = tool.to_owned();
                tokio::task::spawn_blocking(move || match tool.as_str() {
                    "file_read" => files::read(&sandbox, &args),
                    "file_write" => files::write(&sandbox, &args),
                    "file_edit" => files::edit(&sandbox, &args),
                    "file_search" => files::search(&sandbox, &args),
                    other => Err(unknown(FILES, other)),
                })
                .await
                .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))?
            }
            (TERMINAL, "bash_execute") => {
                let place = self.place(invocation.roots);
                self.terminal
                    .execute(&args, &place, invocation.progress)
                    .await
            }
            (TERMINAL, "bash_session") => {
                let place = self.place(invocation.roots);
                self.terminal.manage(&args, &place).await
            }
            (SYSTEM, tool) => system::run(tool, &args).await,
            (app, tool) => Err(unknown(app, tool)),
        }
    }
}

fn unknown(app: &str, tool: &str) -> AaiError {
    AaiError::new(
        ErrorKind::ToolNotFound,
        format!("{app} has no built-in tool {tool:?}"),
    )
}

/// How long a built-in call may take: the gateway's tool timeout, or longer when the tool
/// itself waits longer on purpose (a command's `timeout_ms`, a watch's `wait_ms`), plus time to
/// stop and report.
fn limit(invocation: &Invocation<'_>) -> std::time::Duration {
    let asked = ["timeout_ms", "wait_ms"]
        .iter()
        .filter_map(|name| invocation.args.get(*name).and_then(Value::as_u64))
        .max()
        .unwrap_or(match invocation.tool {
            "bash_execute" => 120_000,
            "file_watch" => 10_000,
            _ => 0,
        });
    invocation
        .timeout
        .max(std::time::Duration::from_millis(asked) + std::time::Duration::from_secs(10))
}

impl Executor for LocalExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let limit = limit(&invocation);
            match tokio::time::timeout(limit, self.run(invocation)).await {
                Ok(result) => result,
                Err(_) => Err(AaiError::new(
                    ErrorKind::Timeout,
                    format!(
                        "{} did not finish within {} ms and was stopped",
                        invocation.name(),
                        limit.as_millis()
                    ),
                )),
            }
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        Ok(
            json!({"builtin": {"app": invocation.descriptor.app_id, "tool": invocation.tool, "args": invocation.args}}),
        )
    }
}

/// The built-in descriptors, for tests and documentation.
pub fn descriptors() -> Vec<Descriptor> {
    [
        files_descriptor(),
        terminal_descriptor(),
        system_descriptor(),
    ]
    .iter()
    .filter_map(|doc| aai_descriptor::parse("builtin", doc.to_string().as_bytes()).ok())
    .collect()
}
