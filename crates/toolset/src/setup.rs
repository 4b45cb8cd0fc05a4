//! What a kit of built-in toolsets is built with ([`Setup`]), how the engine builds and holds
//! one ([`Kit`], [`Toolsets`]), and the time limit every built-in call runs within.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::Invocation;
use serde_json::Value;

use crate::config::{BrowserConfig, DesktopConfig, LocalConfig};
use crate::{Call, Check, Toolset};

/// What every toolset is given: its settings, and the gateway's own files (outside every
/// sandbox: the home folder with its database and credentials, the web cache).
#[derive(Debug, Clone)]
pub struct Setup {
    pub config: LocalConfig,
    pub protected: Vec<PathBuf>,
    pub desktop: DesktopConfig,
    /// The browser's settings (`browser` in config.json).
    pub browser: BrowserConfig,
    /// The gateway's home folder (`AAI_HOME`): browser profiles live under it.
    pub home: PathBuf,
    /// Certificate authorities the user trusts beyond the system's (`web.extra_ca_certs`).
    pub extra_ca_certs: Vec<PathBuf>,
    /// The desktop the desktop toolsets drive and the browser shows its window on.
    pub seat: Seat,
}

/// Which desktop the desktop toolsets drive: by default the gateway's own (`DISPLAY`,
/// `DBUS_SESSION_BUS_ADDRESS`); tests and a second seat name another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seat {
    /// The X display (`None`: the gateway's own).
    pub display: Option<String>,
    /// The session bus the accessibility bus and the portals are found on (`None`: the
    /// gateway's own).
    pub session_bus: Option<String>,
    /// A Wayland session without X, its portals on `session_bus`.
    pub wayland: bool,
}

impl Setup {
    /// A setup with default desktop and browser settings; the first protected folder is the
    /// gateway's home.
    pub fn new(config: LocalConfig, protected: Vec<PathBuf>) -> Self {
        let home = protected
            .first()
            .cloned()
            .unwrap_or_else(|| std::env::temp_dir().join("aai-gateway"));
        Self {
            config,
            protected,
            browser: BrowserConfig::default(),
            home,
            extra_ca_certs: Vec::new(),
            desktop: DesktopConfig::default(),
            seat: Seat::default(),
        }
    }
}

/// A kit of built-in toolsets, as the binary plugs it into the engine (`aai-local`): which
/// apps a config turns on, and the toolsets themselves, built anew whenever their settings
/// change.
pub trait Kit: Send + Sync {
    /// Every descriptor of the kit, on or off, in the order they are listed.
    fn all(&self) -> Vec<Arc<Descriptor>>;

    /// The descriptors of the toolsets `config` turns on: the same `Arc`s every time, so a
    /// rescan that finds nothing new is seen as unchanged.
    fn descriptors(&self, config: &LocalConfig) -> Vec<Arc<Descriptor>>;

    /// Every toolset of the kit, built with `setup` (whether one is offered is discovery's
    /// business, so a config change never leaves an offered app without its runner).
    fn build(&self, setup: &Setup) -> Vec<Box<dyn Toolset>>;
}

/// The toolsets of one kit, built with one setup.
pub struct Toolsets {
    sets: Vec<Box<dyn Toolset>>,
    setup: Setup,
}

impl Toolsets {
    /// `kit`'s toolsets, built with `setup`.
    pub fn new(kit: &dyn Kit, setup: &Setup) -> Self {
        Self {
            sets: kit.build(setup),
            setup: setup.clone(),
        }
    }

    /// No toolsets at all (a gateway no kit was plugged into).
    pub fn none(setup: &Setup) -> Self {
        Self {
            sets: Vec::new(),
            setup: setup.clone(),
        }
    }

    /// What the toolsets were built with (the containment profile of other processes the
    /// gateway starts for the agent, such as scheduled agents, comes from it).
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// The toolset of `app`, if it is one of these.
    pub fn get(&self, app: &str) -> Option<&dyn Toolset> {
        self.sets
            .iter()
            .find(|set| set.descriptor().app_id == app)
            .map(AsRef::as_ref)
    }

    /// Every toolset.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Toolset> {
        self.sets.iter().map(AsRef::as_ref)
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

impl aai_executor::Executor for Toolsets {
    fn call<'a>(
        &'a self,
        invocation: Invocation<'a>,
    ) -> aai_executor::BoxFuture<'a, Result<Value, AaiError>> {
        run_found(self.get(&invocation.descriptor.app_id), invocation)
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        plan_found(self.get(&invocation.descriptor.app_id), &invocation)
    }
}

/// Runs `invocation` on `set`, the toolset found for its app (see [`run_limited`]).
///
/// # Errors
/// TOOL_NOT_FOUND when no toolset was found; else as [`run_limited`].
pub fn run_found<'a>(
    set: Option<&'a dyn Toolset>,
    invocation: Invocation<'a>,
) -> aai_executor::BoxFuture<'a, Result<Value, AaiError>> {
    Box::pin(async move {
        match set {
            Some(set) => run_limited(set, invocation).await,
            None => Err(crate::unknown(
                &invocation.descriptor.app_id,
                invocation.tool,
            )),
        }
    })
}

/// What `invocation` would run on `set`, the toolset found for its app (`call --dry-run`).
///
/// # Errors
/// TOOL_NOT_FOUND when no toolset was found.
pub fn plan_found(
    set: Option<&dyn Toolset>,
    invocation: &Invocation<'_>,
) -> Result<Value, AaiError> {
    let set = set.ok_or_else(|| crate::unknown(&invocation.descriptor.app_id, invocation.tool))?;
    Ok(set.plan(invocation.tool, invocation.args, invocation.target))
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
