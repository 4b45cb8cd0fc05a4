//! The built-in local toolsets (`spec/desktop-control.zh.md` §3): `local.files`,
//! `local.terminal`, `local.system` and the rest, each an app like any other — a real
//! `aai.json` shipped in this crate (`toolsets/`), checked by the same schema and rules, offered
//! through the same MCP surface and run through the same gate and audit log.
//!
//! A toolset implements [`Toolset`]; [`Toolsets`] holds the ones the config turns on and runs
//! their calls. The gateway registers them and knows none of their insides.

pub mod a11y;
pub mod addresses;
pub mod apps;
pub mod beneath;
pub mod browser;
pub mod classify;
pub mod contain;
pub mod desktop;
pub mod egress;
pub mod files;
pub mod input;
pub mod ocr;
pub mod own_listeners;
pub mod sandbox;
pub mod screen;
pub mod system;
pub mod terminal;

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Risk};
use aai_executor::{BoxFuture, Executor, Invocation};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// `local` in config.json: which built-in apps are on, and each one's settings.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LocalConfig {
    pub terminal: bool,
    /// Terminal sessions may start in, and `cd` by `working_dir` to, any folder (by default
    /// only inside `sandbox.allowed_directories`). What the commands may write is decided by
    /// `containment` either way.
    pub terminal_anywhere: bool,
    /// How terminal commands, launched apps and scheduled agents are contained: `"sandbox"`
    /// (Landlock on Linux, Seatbelt on macOS: writes only in the allowed folders, the
    /// temporary folder and `writable_caches`; the gateway's home read-only and its secrets
    /// unreadable; refused where no sandbox can apply) or `"none"` (the user's full rights).
    pub containment: contain::Containment,
    /// Folders contained processes may also write (build and package caches).
    pub writable_caches: Vec<PathBuf>,
    /// Where contained processes may connect (`mode`: `"proxy"` or `"open"`; `allow`).
    pub egress: egress::EgressConfig,
    pub files: bool,
    pub system: bool,
    /// Screenshots, OCR and finding UI elements (`local.screen`).
    pub screen: bool,
    /// Mouse and keyboard (`local.input`).
    pub input: bool,
    /// Launching, switching and closing apps, managing windows (`local.apps`).
    pub apps: bool,
    /// A Chromium of the client's own behind the domain policy (`local.browser`).
    pub browser: bool,
    pub sandbox: sandbox::SandboxConfig,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            terminal: true,
            terminal_anywhere: false,
            containment: contain::Containment::default(),
            writable_caches: contain::default_caches(),
            egress: egress::EgressConfig::default(),
            files: true,
            system: true,
            screen: true,
            input: true,
            apps: true,
            browser: true,
            sandbox: sandbox::SandboxConfig::default(),
        }
    }
}

/// What every toolset is given: its config, the gateway's own files (outside every
/// sandbox: the home folder with its database and credentials, the web cache), the desktop
/// settings and the one desktop connection the desktop toolsets share.
#[derive(Clone)]
pub struct Setup {
    pub config: LocalConfig,
    pub protected: Vec<PathBuf>,
    pub desktop: desktop::DesktopConfig,
    pub display: Arc<desktop::backend::Desktop>,
    /// The browser's settings (`browser` in config.json).
    pub browser: browser::BrowserConfig,
    /// The gateway's home folder (`AAI_HOME`): browser profiles live under it.
    pub home: PathBuf,
    /// Certificate authorities the user trusts beyond the system's (`web.extra_ca_certs`).
    pub extra_ca_certs: Vec<PathBuf>,
}

impl Setup {
    /// A setup with default desktop settings.
    pub fn new(config: LocalConfig, protected: Vec<PathBuf>) -> Self {
        let home = protected
            .first()
            .cloned()
            .unwrap_or_else(|| std::env::temp_dir().join("aai-gateway"));
        Self {
            config,
            protected,
            browser: browser::BrowserConfig::default(),
            home,
            extra_ca_certs: Vec::new(),
            desktop: desktop::DesktopConfig::default(),
            display: Arc::default(),
        }
    }
}

impl Setup {
    /// The file sandbox for a client with these MCP roots.
    pub fn sandbox(&self, roots: &[String]) -> sandbox::Sandbox {
        sandbox::Sandbox::new(&self.config.sandbox, roots, &self.protected)
    }
}

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
            app: terminal::DESCRIPTOR.app_id.clone(),
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

/// A toolset's entry in the table of built-ins.
struct Entry {
    descriptor: &'static LazyLock<Arc<Descriptor>>,
    enabled: fn(&LocalConfig) -> bool,
    build: fn(&Setup) -> Box<dyn Toolset>,
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

/// Every built-in toolset, in the order they are listed.
const TABLE: &[Entry] = &[
    Entry {
        descriptor: &files::DESCRIPTOR,
        enabled: |c| c.files,
        build: |setup| Box::new(files::Files::new(setup)),
    },
    Entry {
        descriptor: &terminal::DESCRIPTOR,
        enabled: |c| c.terminal,
        build: |setup| Box::new(terminal::Terminal::new(setup)),
    },
    Entry {
        descriptor: &system::DESCRIPTOR,
        enabled: |c| c.system,
        build: |_| Box::new(system::System),
    },
    Entry {
        descriptor: &screen::DESCRIPTOR,
        enabled: |c| c.screen,
        build: |setup| Box::new(screen::Screen::new(setup)),
    },
    Entry {
        descriptor: &input::DESCRIPTOR,
        enabled: |c| c.input,
        build: |setup| Box::new(input::Input::new(setup)),
    },
    Entry {
        descriptor: &apps::DESCRIPTOR,
        enabled: |c| c.apps,
        build: |setup| Box::new(apps::Apps::new(setup)),
    },
    Entry {
        descriptor: &browser::DESCRIPTOR,
        enabled: |c| c.browser,
        build: |setup| Box::new(browser::Browser::new(setup)),
    },
];

/// The descriptors of the toolsets `config` turns on: the same `Arc`s every time, so a
/// rescan that finds nothing new is seen as unchanged (no list_changed).
pub fn descriptors(config: &LocalConfig) -> Vec<Arc<Descriptor>> {
    TABLE
        .iter()
        .filter(|entry| (entry.enabled)(config))
        .map(|entry| Arc::clone(entry.descriptor))
        .collect()
}

/// Every built-in descriptor, on or off (tests, documentation).
pub fn all_descriptors() -> Vec<Arc<Descriptor>> {
    TABLE
        .iter()
        .map(|entry| Arc::clone(entry.descriptor))
        .collect()
}

/// The toolsets of one gateway; runs their calls.
pub struct Toolsets {
    sets: Vec<Box<dyn Toolset>>,
    display: Arc<desktop::backend::Desktop>,
    setup: Setup,
}

impl Toolsets {
    /// Every toolset, built with `setup` (whether one is offered is discovery's business, so
    /// a config change never leaves an offered app without its runner).
    pub fn new(setup: &Setup) -> Self {
        Self {
            sets: TABLE.iter().map(|entry| (entry.build)(setup)).collect(),
            display: setup.display.clone(),
            setup: setup.clone(),
        }
    }

    /// What the toolsets were built with (the containment profile of other processes the
    /// gateway starts for the agent, such as scheduled agents, comes from it).
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// Tells every toolset the emergency stop was pressed (see [`Toolset::emergency_stop`]).
    pub async fn emergency_stop(&self) {
        for set in &self.sets {
            set.emergency_stop().await;
        }
    }

    /// Releases every key and button held down on the desktop the input tools drive (the
    /// emergency stop); how many were released. Nothing is done when input was never used.
    pub async fn release_input(&self) -> usize {
        let Some(x) = self.display.connected() else {
            return 0;
        };
        tokio::task::spawn_blocking(move || x.release_all().unwrap_or(0))
            .await
            .unwrap_or(0)
    }

    /// The toolset of `app`, if it is one of these.
    pub fn get(&self, app: &str) -> Option<&dyn Toolset> {
        self.sets
            .iter()
            .find(|set| set.descriptor().app_id == app)
            .map(AsRef::as_ref)
    }

    /// The browser toolset (tests look at whether a client's browser runs).
    pub fn browser(&self) -> Option<&browser::Browser> {
        let set: &dyn std::any::Any = self.get("local.browser")?;
        set.downcast_ref::<browser::Browser>()
    }

    /// Every toolset's checks, by app id (`aai-gateway doctor`).
    pub async fn doctor(&self) -> Vec<(String, Vec<Check>)> {
        let mut out = Vec::new();
        for set in &self.sets {
            out.push((set.descriptor().app_id.clone(), set.doctor().await));
        }
        out
    }
}

/// How long a built-in call may take: the gateway's tool timeout, or longer when the tool
/// itself waits longer on purpose, plus time to stop and report.
fn limit(set: &dyn Toolset, invocation: &Invocation<'_>) -> Duration {
    let waits = set.waits_ms(invocation.tool, invocation.args);
    invocation
        .timeout
        .max(Duration::from_millis(waits) + Duration::from_secs(10))
}

/// Runs `invocation` on `set` within its time limit (see [`limit`]).
///
/// # Errors
/// The toolset's error, or TIMEOUT when the call ran past its limit and was stopped.
pub async fn run_limited(set: &dyn Toolset, invocation: Invocation<'_>) -> Result<Value, AaiError> {
    let limit = limit(set, &invocation);
    let call = Call {
        tool: invocation.tool,
        args: invocation.args,
        roots: invocation.roots,
        progress: invocation.progress,
        caller: invocation.caller,
        approved: invocation.approved,
    };
    match tokio::time::timeout(limit, set.run(call)).await {
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
}

impl Executor for Toolsets {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let app = invocation.descriptor.app_id.as_str();
            let Some(set) = self.get(app) else {
                return Err(unknown(app, invocation.tool));
            };
            run_limited(set, invocation).await
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let app = invocation.descriptor.app_id.as_str();
        let set = self.get(app).ok_or_else(|| unknown(app, invocation.tool))?;
        Ok(set.plan(invocation.tool, invocation.args, invocation.target))
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

/// Reads files for web uploads (multipart bodies) exactly as `file_read` would: inside the
/// allowed folders (narrowed by the client's roots), never the gateway's own files, within the
/// size limit, race-free.
pub fn upload_reader(setup: &Setup) -> aai_executor::rest::FileReader {
    let setup = setup.clone();
    Arc::new(move |path: &str, roots: &[String]| {
        let (resolved, bytes) = files::read_checked(&setup.sandbox(roots), path)?;
        let name = resolved
            .file_name()
            .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
        Ok((bytes, name))
    })
}

/// The user's home folder (`HOME`, or `USERPROFILE` on Windows).
pub fn user_home() -> PathBuf {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// `~/x` as the user's home joined with `x`; other paths unchanged.
pub fn expand_home(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => user_home().join(rest),
        Err(_) => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped descriptors pass every check an app's file does, and name the tools the
    /// toolsets run.
    #[test]
    fn shipped_descriptors_are_valid_apps() {
        for descriptor in all_descriptors() {
            assert!(
                descriptor.app_id.starts_with("local."),
                "{}",
                descriptor.app_id
            );
            let tools = descriptor
                .tools(aai_descriptor::Platform::Local)
                .expect("local tools");
            assert!(!tools.is_empty());
        }
        let setup = Setup::new(LocalConfig::default(), Vec::new());
        let sets = Toolsets::new(&setup);
        for descriptor in all_descriptors() {
            assert!(sets.get(&descriptor.app_id).is_some());
        }
    }
}
