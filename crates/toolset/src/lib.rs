//! The contract between the gateway and its built-in toolsets: what a toolset is given for a
//! call ([`Call`]), what it can say of a call before it runs ([`Rated`], [`Judged`],
//! [`Binding`], a refusal, a question), how it runs one, and what `doctor` hears of it
//! ([`Check`]); the settings toolsets read ([`config`]) and what they are built with
//! ([`Setup`], [`Kit`]). The engine runs toolsets through [`Toolset`] alone; the local
//! toolsets, the scheduler and the drafts implement it. Small on purpose: no toolset's insides
//! are here.

pub mod config;
mod setup;

pub use config::*;
pub use setup::{
    Kit, Seat, Setup, Toolsets, expand_home, plan_found, run_found, run_limited, user_home,
};

use std::sync::Arc;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Risk};
use aai_executor::BoxFuture;
use serde_json::{Map, Value, json};

/// The app id of the terminal, which a call can be judged as ([`Judged::shell`]).
pub const TERMINAL: &str = "local.terminal";

/// One call of a built-in tool, its arguments already checked against the tool's schema.
pub struct Call<'a> {
    pub tool: &'a str,
    pub args: &'a Map<String, Value>,
    /// The client's MCP roots (file URIs).
    pub roots: &'a [String],
    /// Where a long call reports its latest output.
    pub progress: Option<&'a (dyn Fn(&str) + Send + Sync)>,
    /// The client's reported name (each client gets its own browser).
    pub caller: &'a str,
    /// The user approved this very call when asked (a call [`Toolset::must_ask`] named).
    pub approved: bool,
}

/// The call the gate judges in place of a built-in call that does what another tool does:
/// text typed into a terminal window is a shell command, and so is an app launch of a shell.
/// The gate rates, decides, asks and remembers grants as for this call; the original still
/// runs, and is audited as itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub app: String,
    pub tool: String,
    pub args: Map<String, Value>,
    /// Why the call is judged so, for the user's question.
    pub why: String,
    /// Why it must be asked every time, when what it would run cannot be known (a paste
    /// into a terminal, a line edited with keys the gateway cannot follow).
    pub ask_every_time: Option<String>,
    /// It runs in the box of the call it is judged as (a command-line program launched as an
    /// app runs in the terminal's box; text typed into a window does not).
    pub boxed: bool,
}

impl Judged {
    /// The call as `bash_execute` of `command`.
    pub fn shell(command: impl Into<String>, why: impl Into<String>) -> Self {
        let mut args = Map::new();
        args.insert("command".into(), Value::String(command.into()));
        Self {
            app: TERMINAL.to_owned(),
            tool: "bash_execute".into(),
            args,
            why: why.into(),
            ask_every_time: None,
            boxed: false,
        }
    }
}

/// A call's risk as its toolset judges it from what it does ([`Toolset::rate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rated {
    pub risk: Risk,
    /// What the question says of it (what would be lost).
    pub why: Option<String>,
    /// No grant covers it: it is asked each time, Allow once or Deny (a critical command,
    /// one that would lose work).
    pub each_time: bool,
}

impl Rated {
    /// A critical call: never covered by a grant.
    pub fn critical(why: impl Into<String>) -> Self {
        Self {
            risk: Risk::Critical,
            why: Some(why.into()),
            each_time: true,
        }
    }
}

/// What a call asks the person to allow that outlives the call: the hosts a command would
/// reach beyond the egress policy ([`Toolset::binding`]). Its keys are remembered as grants
/// of their own (on [`Binding::APP`]), for the session or always; a call whose keys are all
/// granted is not asked again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// What is allowed, one grant each (a host name, or `address:port`).
    pub keys: Vec<String>,
}

impl Binding {
    /// The app the grants of a binding are kept under (no toolset has this id).
    pub const APP: &'static str = "local.egress";

    /// The keys as a person reads them.
    pub fn named(&self) -> String {
        self.keys.join(", ")
    }
}

/// A built-in app: its descriptor, and how it runs a call.
pub trait Toolset: Send + Sync + std::any::Any {
    /// The descriptor, parsed once from the toolset's `aai.json`.
    fn descriptor(&self) -> &Arc<Descriptor>;

    /// Runs one call.
    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>>;

    /// The risk of this call judged from what it does, in place of the tool's own: a command
    /// that stays in the box is medium, one whose deletions lose work high, a critical one
    /// critical. `boxed`: the call runs in this toolset's box (false for a call it stands in
    /// for that runs elsewhere: text typed into a terminal window).
    fn rate(&self, _call: &Call<'_>, _boxed: bool) -> Option<Rated> {
        None
    }

    /// What this call would be refused for whatever the user answered (a path outside the
    /// file sandbox, a `working_dir` that is not an allowed folder): the gate asks this before
    /// anyone is asked to approve the call, so nobody approves a call that cannot run. The
    /// run checks again (the files may have changed in between).
    fn refusal(&self, _call: &Call<'_>) -> Option<AaiError> {
        None
    }

    /// Why this call must be put to the user every time, whatever the policy and the
    /// remembered grants say (a password typed into a page), looking at the app's state now.
    fn must_ask<'a>(&'a self, _call: &'a Call<'a>) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }

    /// What this call asks to be allowed beyond itself, when that is the only reason
    /// [`Toolset::must_ask`] names (a command's new hosts): the gate offers to remember it for
    /// the session or always, and runs the call unasked (as approved) once every key is
    /// granted.
    fn binding(&self, _call: &Call<'_>) -> Option<Binding> {
        None
    }

    /// The call the gate judges in this one's place, looking at what it does where it lands
    /// now (see [`Judged`]); an error refuses the call outright (input aimed at the gateway's
    /// own dashboard). A toolset that judges so checks again when it runs that the judgement
    /// still holds.
    fn judged_as<'a>(
        &'a self,
        _call: &'a Call<'a>,
    ) -> BoxFuture<'a, Result<Option<Judged>, AaiError>> {
        Box::pin(async { Ok(None) })
    }

    /// Whether this toolset drives the user's screen, mouse or keyboard: a batch runs its steps
    /// one at a time, never beside another such step (two would fight over the pointer).
    fn drives_desktop(&self) -> bool {
        false
    }

    /// How long this call waits on purpose, in milliseconds (a command's `timeout_ms`, a
    /// watch's `wait_ms`): its time limit is at least this plus time to stop and report.
    fn waits_ms(&self, _tool: &str, _args: &Map<String, Value>) -> u64 {
        0
    }

    /// Whether remembered "commands starting with …" grants cover this call.
    fn prefix_covers(&self, _tool: &str, _args: &Map<String, Value>, _prefixes: &[String]) -> bool {
        false
    }

    /// The prefix an "always allow commands starting with …" answer would grant.
    fn offered_prefix(&self, _tool: &str, _args: &Map<String, Value>) -> Option<String> {
        None
    }

    /// What a call would run, without running it (`call --dry-run`); `target` is the OS it is
    /// planned for when that is not this one.
    fn plan(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        _target: Option<aai_descriptor::Platform>,
    ) -> Value {
        json!({"builtin": {"app": self.descriptor().app_id, "tool": tool, "args": args}})
    }

    /// Which backend serves each tool on this machine, or why none can (`aai-gateway doctor`).
    fn doctor(&self) -> BoxFuture<'_, Vec<Check>> {
        let checks = tool_names(self.descriptor())
            .into_iter()
            .map(|tool| Check::ok(&tool, "built in"))
            .collect();
        Box::pin(async move { checks })
    }

    /// The emergency stop was pressed: end what this toolset keeps running (terminal
    /// sessions, browsers). Their processes are killed by the gateway as well.
    fn emergency_stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// What the emergency stop's report says of this toolset, as a key and a value (the
    /// scheduler: whether its runs are paused), if anything.
    fn stop_note(&self) -> Option<(&'static str, Value)> {
        None
    }

    /// Once the emergency stop killed every process: undo what they left behind (keys and
    /// buttons held down), and what the report says of it, as a key and a value.
    fn after_kill(&self) -> BoxFuture<'_, Option<(&'static str, Value)>> {
        Box::pin(async { None })
    }

    /// The emergency stop was lifted.
    fn resumed(&self) {}
}

/// One line of `aai-gateway doctor`: a tool, and what serves it or why nothing can.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    pub tool: String,
    /// What serves the tool here (`X11 :0 (XTEST)`, `tesseract 5.3 (eng)`).
    pub backend: Option<String>,
    /// Why it cannot run here, and what would fix it.
    pub problem: Option<String>,
}

impl Check {
    pub fn ok(tool: &str, backend: impl Into<String>) -> Self {
        Self {
            tool: tool.to_owned(),
            backend: Some(backend.into()),
            problem: None,
        }
    }

    pub fn failed(tool: &str, problem: impl Into<String>) -> Self {
        Self {
            tool: tool.to_owned(),
            backend: None,
            problem: Some(problem.into()),
        }
    }
}

/// The tool names of a built-in descriptor.
pub fn tool_names(descriptor: &Descriptor) -> Vec<String> {
    descriptor
        .tools(aai_descriptor::Platform::Local)
        .unwrap_or_default()
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

/// Reads a shipped descriptor. Debug builds (every test) validate it in full, so a broken
/// one is a build bug; release builds only deserialize it, which spares every start the
/// compilation of the descriptor schema (most of a warm start's time).
pub fn shipped(name: &str, text: &str) -> Arc<Descriptor> {
    let read = if cfg!(debug_assertions) {
        aai_descriptor::parse(name, text.as_bytes()).map_err(|e| e.to_string())
    } else {
        serde_json::from_str(text).map_err(|e| e.to_string())
    };
    match read {
        Ok(descriptor) => Arc::new(descriptor),
        Err(error) => panic!("the shipped descriptor {name} is invalid: {error}"),
    }
}

/// A tool the toolset does not have.
pub fn unknown(app: &str, tool: &str) -> AaiError {
    AaiError::new(
        ErrorKind::ToolNotFound,
        format!("{app} has no built-in tool {tool:?}"),
    )
}

/// An error running a built-in tool.
pub fn failed(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::AutomationFailed, message)
}
