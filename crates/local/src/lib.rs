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

/// The command classifier (`aai-classify`), as the terminal and the input judge use it.
pub use aai_classify as classify;
pub use aai_toolset::{
    Binding, Call, Check, Judged, Rated, Toolset, failed, shipped, tool_names, unknown,
};

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::{BoxFuture, Executor, Invocation};
use serde::Deserialize;
use serde_json::Value;

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

/// A toolset's entry in the table of built-ins.
struct Entry {
    descriptor: &'static LazyLock<Arc<Descriptor>>,
    enabled: fn(&LocalConfig) -> bool,
    build: fn(&Setup) -> Box<dyn Toolset>,
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
