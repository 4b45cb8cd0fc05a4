//! Runs `aai.json` tools through each platform's automation interface.
//!
//! One [`Executor`] per automation kind; [`Executors`] picks the one a descriptor's section
//! asks for. Argument values are always passed as data (typed D-Bus arguments here), never
//! spliced into program text. Every call is bounded by its timeout.
//!
//! This crate does not validate arguments against the tool's schema, ask for consent or
//! write the audit log: the gateway's call pipeline does that before calling in.
//!
//! ```no_run
//! # async fn demo(descriptor: &aai_descriptor::Descriptor) {
//! use std::time::Duration;
//! let executors = aai_executor::Executors::new();
//! let args = serde_json::Map::new();
//! let invocation = aai_executor::Invocation::new(descriptor, "ping", &args, Duration::from_secs(5));
//! let result = executors.call(aai_descriptor::Platform::Linux, invocation).await;
//! # }
//! ```

mod adb;
pub mod atspi;
mod ax;
#[cfg(target_os = "linux")]
pub mod cgroup;
mod com;
mod dbus;
pub mod notify;
mod osascript;
pub mod process;
pub mod rest;
mod tag;
mod ui_program;
mod uia;
mod urlscheme;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Platform, Section, Tool};
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub use adb::{AdbExecutor, shell_quote};
pub use ax::{AX_PROGRAM, AxExecutor};
pub use com::{COM_PROGRAM, ComExecutor, encoded_command};
pub use dbus::DbusExecutor;
pub use osascript::OsascriptExecutor;
pub use uia::{UIA_PROGRAM, UIA_RUN, UiaExecutor};
pub use urlscheme::UrlSchemeExecutor;

/// The timeout of a call when neither the tool nor the config sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A boxed future, so executors can be used as trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One tool call, with arguments already checked against the tool's schema.
#[derive(Clone, Copy)]
pub struct Invocation<'a> {
    pub descriptor: &'a Descriptor,
    pub tool: &'a str,
    pub args: &'a Map<String, Value>,
    /// How long the whole call may take.
    pub timeout: Duration,
    /// The client's MCP roots (file URIs), for tools that act on files.
    pub roots: &'a [String],
    /// Where a long-running tool reports what it is doing (the latest output lines); the
    /// gateway turns each report into an MCP progress notification.
    pub progress: Option<&'a (dyn Fn(&str) + Send + Sync)>,
    /// The OS the call is planned for when it is not this one (`call --dry-run --platform`).
    pub target: Option<Platform>,
    /// The client's reported name.
    pub caller: &'a str,
    /// The user approved this very call when asked.
    pub approved: bool,
    /// Who can ask the user a question a tool puts during the call (an MCP server's
    /// elicitation), when anyone can.
    pub elicit: Option<&'a dyn Elicit>,
}

/// What the user answered to a tool's question.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// The form's content.
    Accepted(Value),
    Declined,
    Cancelled,
}

/// Asks the user a question a tool puts during a call: `message` and a form of
/// `requested_schema` (the MCP elicitation form).
pub trait Elicit: Send + Sync {
    fn elicit<'a>(
        &'a self,
        message: &'a str,
        requested_schema: &'a Value,
    ) -> BoxFuture<'a, Elicited>;
}

impl std::fmt::Debug for Invocation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invocation")
            .field("app", &self.descriptor.app_id)
            .field("tool", &self.tool)
            .field("args", &self.args)
            .field("timeout", &self.timeout)
            .field("roots", &self.roots)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl<'a> Invocation<'a> {
    pub fn new(
        descriptor: &'a Descriptor,
        tool: &'a str,
        args: &'a Map<String, Value>,
        timeout: Duration,
    ) -> Self {
        Self {
            descriptor,
            tool,
            args,
            timeout,
            roots: &[],
            progress: None,
            target: None,
            caller: "",
            approved: false,
            elicit: None,
        }
    }

    /// This invocation asking the user a tool's questions through `elicit`.
    #[must_use]
    pub fn with_elicit(mut self, elicit: Option<&'a dyn Elicit>) -> Self {
        self.elicit = elicit;
        self
    }

    /// This invocation for the client `caller`, approved by the user just now or not.
    #[must_use]
    pub fn with_caller(mut self, caller: &'a str, approved: bool) -> Self {
        self.caller = caller;
        self.approved = approved;
        self
    }

    /// This invocation planned for `target` (built-in tools pick that OS's backend).
    #[must_use]
    pub fn with_target(mut self, target: Option<Platform>) -> Self {
        self.target = target;
        self
    }

    /// This invocation for a client with these roots.
    #[must_use]
    pub fn with_roots(mut self, roots: &'a [String]) -> Self {
        self.roots = roots;
        self
    }

    /// This invocation reporting progress to `progress`.
    #[must_use]
    pub fn with_progress(mut self, progress: Option<&'a (dyn Fn(&str) + Send + Sync)>) -> Self {
        self.progress = progress;
        self
    }
}

impl Invocation<'_> {
    /// `app:tool`, for messages.
    pub fn name(&self) -> String {
        format!("{}:{}", self.descriptor.app_id, self.tool)
    }

    /// The argument `name`, else its schema `default`.
    pub fn value(&self, schema: Option<&Value>, name: &str) -> Option<Value> {
        self.args
            .get(name)
            .filter(|v| !v.is_null())
            .or_else(|| schema?.get("properties")?.get(name)?.get("default"))
            .cloned()
    }

    /// INVALID_PARAMS for a placeholder with no argument and no default.
    /// INVALID_PARAMS for a URL template that could not be filled: a missing argument, or one
    /// whose value would turn a path segment into `.`/`..`.
    pub fn unfilled(&self, error: aai_descriptor::url::FillError<'_>) -> AaiError {
        match error {
            aai_descriptor::url::FillError::Missing(name) => self.missing(name),
            aai_descriptor::url::FillError::DotSegment(name) => AaiError::new(
                ErrorKind::InvalidParams,
                format!(
                    "{}: argument `{name}` fills a whole URL path segment and may not be `.` or `..` (that would send the call to another path); pass the real value",
                    self.name()
                ),
            )
            .with_detail(json!({"field": name, "reason": "dot_segment"})),
        }
    }

    pub fn missing(&self, name: &str) -> AaiError {
        AaiError::new(
            ErrorKind::InvalidParams,
            format!("{} needs argument `{name}`; pass it in args", self.name()),
        )
        .with_detail(json!({"field": name}))
    }
}

/// Runs tools of one automation kind.
pub trait Executor: Send + Sync {
    /// Runs the tool and returns its parsed output as JSON.
    ///
    /// # Errors
    /// An [`AaiError`] with the kind that fits: `APP_NOT_RUNNING`, `TIMEOUT`,
    /// `PERMISSION_DENIED`, `AUTOMATION_FAILED`, …
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>>;

    /// What `call` would run, as JSON, without running anything (`call --dry-run`): for
    /// programs `{program, argv, stdin, env}` (plus `then` for follow-up commands).
    ///
    /// # Errors
    /// As `call` would fail before running anything (bad arguments, a bad script).
    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError>;
}

/// How iOS URLs are opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IosOpener {
    /// `xcrun simctl openurl <device> <url>`.
    #[default]
    Simctl,
    /// `open <url>` (iOS apps running on a Mac).
    Open,
}

/// Where the automation programs are and which device they talk to: `executors` in
/// `config.json`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub osascript: String,
    pub powershell: String,
    pub adb: String,
    pub xcrun: String,
    pub open: String,
    pub pbpaste: String,
    /// `adb -s <serial>`; unset lets adb pick the only device.
    pub android_serial: Option<String>,
    /// The simulator for `simctl`: a UDID, a name, or `booted`.
    pub ios_device: String,
    pub ios_opener: IosOpener,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            osascript: "osascript".into(),
            powershell: if cfg!(windows) {
                "powershell.exe".into()
            } else {
                "powershell".into()
            },
            adb: "adb".into(),
            xcrun: "xcrun".into(),
            open: "open".into(),
            pbpaste: "pbpaste".into(),
            android_serial: None,
            ios_device: "booted".into(),
            ios_opener: IosOpener::Simctl,
        }
    }
}

/// An HTTP client for web tools and discovery: rustls with the ring provider, the system's
/// roots plus `extra_ca_pems` (PEM files' contents), the certificate of each server kept for
/// inspection.
///
/// # Errors
/// A PEM cannot be read as a certificate, or the TLS setup fails.
/// A client builder with the process's TLS provider installed and the gateway's user agent,
/// for a one-off request with settings of its own.
pub fn client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().user_agent(concat!("aai-gateway/", env!("CARGO_PKG_VERSION")))
}

pub fn http_client(extra_ca_pems: &[Vec<u8>]) -> Result<reqwest::Client, ClientError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut certs = Vec::new();
    for pem in extra_ca_pems {
        certs.extend(reqwest::Certificate::from_pem_bundle(pem).map_err(ClientError::Certificate)?);
    }
    reqwest::Client::builder()
        .user_agent(concat!("aai-gateway/", env!("CARGO_PKG_VERSION")))
        .tls_certs_merge(certs)
        .tls_info(true)
        .redirect(same_origin_redirects())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(ClientError::Build)
}

/// Why an HTTP client cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// An extra CA file is not PEM certificates.
    #[error("{0}")]
    Certificate(reqwest::Error),
    #[error("{0}")]
    Build(reqwest::Error),
}

/// A lazily built client that could not be made: the setting to fix.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot set up HTTPS (web.extra_ca_certs): {0}")]
pub struct HttpsSetupError(Arc<ClientError>);

/// Redirects are followed within the origin of the first request only (5 at most). A request
/// can carry a credential in a header of the descriptor's choosing (`X-API-Key`), which
/// reqwest does not strip on a redirect the way it strips `Authorization`: followed to another
/// host — or from https to http — it would hand the key to a host nobody bound it to.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(reqwest::Url::origin);
        if first.as_ref() != Some(&attempt.url().origin()) {
            let to = attempt.url().origin().ascii_serialization();
            return attempt.error(format!(
                "the server redirected to another origin ({to}); a redirect is followed only within the origin asked, so nothing was sent there"
            ));
        }
        if attempt.previous().len() > 5 {
            return attempt.error("more than 5 redirects");
        }
        attempt.follow()
    })
}

/// An HTTP client built on first use: building one loads the system's certificate roots,
/// which start-up should not wait for.
#[derive(Clone)]
pub struct HttpClient(Arc<LazyClient>);

struct LazyClient {
    extra_ca_pems: Vec<Vec<u8>>,
    client: std::sync::OnceLock<Result<reqwest::Client, HttpsSetupError>>,
}

impl HttpClient {
    /// A client that will trust the system's roots plus `extra_ca_pems`.
    pub fn new(extra_ca_pems: Vec<Vec<u8>>) -> Self {
        Self(Arc::new(LazyClient {
            extra_ca_pems,
            client: std::sync::OnceLock::new(),
        }))
    }

    /// The client, built now if it was not yet.
    ///
    /// # Errors
    /// Why it cannot be built (an unreadable `extra_ca_certs` PEM).
    pub fn get(&self) -> Result<&reqwest::Client, HttpsSetupError> {
        self.0
            .client
            .get_or_init(|| {
                http_client(&self.0.extra_ca_pems).map_err(|e| HttpsSetupError(Arc::new(e)))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The executors this build carries.
pub struct Executors {
    dbus: DbusExecutor,
    atspi: atspi::AtspiExecutor,
    osascript: OsascriptExecutor,
    com: ComExecutor,
    uia: UiaExecutor,
    ax: AxExecutor,
    adb: AdbExecutor,
    urlscheme: UrlSchemeExecutor,
    rest: rest::RestExecutor,
    /// The gateway's built-in toolsets, when it plugs them in.
    local: Option<Arc<dyn Executor>>,
    /// MCP servers behind the gate (`platforms.mcp`), when plugged in.
    mcp: Option<Arc<dyn ToolSource>>,
}

/// An executor whose tools are not written in the descriptor but listed by what it drives
/// (an MCP server's `tools/list`).
pub trait ToolSource: Executor {
    /// `descriptor` with its section's tools as the server lists them now (started or
    /// reached for it when it is not).
    ///
    /// # Errors
    /// The server cannot be started or reached, or does not answer.
    fn filled<'a>(
        &'a self,
        descriptor: &'a Arc<Descriptor>,
    ) -> BoxFuture<'a, Result<Arc<Descriptor>, AaiError>>;

    /// Tells it the emergency stop was pressed: whatever it started is gone.
    fn stopped(&self) {}

    /// Where credentials come from (the web apps' own: environment variables bound to an
    /// origin, the credential store, OAuth).
    fn set_auth(&self, _auth: Arc<dyn rest::Auth>) {}

    /// The user's risk for tools, `appId:tool` → risk (config `mcp.risk`), now and after
    /// every change of the config.
    fn set_risks(&self, _risks: std::collections::HashMap<String, aai_descriptor::Risk>) {}

    /// The state of each server used so far, as JSON, for the dashboard.
    fn states(&self) -> Value {
        Value::Array(Vec::new())
    }

    /// The appIds whose tools changed (a server's `list_changed`), from now on.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }
}

impl Default for Executors {
    fn default() -> Self {
        Self::with_settings(Settings::default(), None)
    }
}

impl Executors {
    pub fn new() -> Self {
        Self::default()
    }

    /// The D-Bus executor (its connections serve introspection too).
    pub fn dbus(&self) -> &DbusExecutor {
        &self.dbus
    }

    /// Executors whose D-Bus session bus is at `address` instead of the environment's.
    pub fn with_session_bus(address: impl Into<String>) -> Self {
        Self::with_settings(Settings::default(), Some(address.into()))
    }

    /// Executors using `settings`, and the session bus at `session_bus` when given.
    pub fn with_settings(settings: Settings, session_bus: Option<String>) -> Self {
        let settings = Arc::new(settings);
        let atspi = atspi::AtspiExecutor::new(session_bus.clone());
        // One set of protected-app patterns for every executor that drives an app's UI.
        let protection = atspi.protection();
        Self {
            atspi,
            dbus: session_bus
                .map_or_else(DbusExecutor::default, DbusExecutor::with_session_address),
            osascript: OsascriptExecutor::new(settings.clone()),
            com: ComExecutor::new(settings.clone()),
            uia: UiaExecutor::new(settings.clone(), protection.clone()),
            ax: AxExecutor::new(settings.clone(), protection),
            adb: AdbExecutor::new(settings.clone()),
            urlscheme: UrlSchemeExecutor::new(settings),
            rest: rest::RestExecutor::new(
                rest::RestSettings {
                    client: HttpClient::new(Vec::new()),
                    max_response_bytes: 8 * 1024 * 1024,
                    allow_http_loopback: false,
                    base_urls: std::collections::HashMap::new(),
                    files: None,
                },
                Arc::new(rest::NoCredentials),
            ),
            local: None,
            mcp: None,
        }
    }

    /// The protected-app patterns the accessibility executors (`atspi`, `uia`, `ax`) honour,
    /// one set shared by all (the gateway sets them from `desktop.protected_apps`).
    pub fn protection(&self) -> atspi::Protection {
        self.atspi.protection()
    }

    /// Whether an executor for the built-in toolsets is plugged in.
    pub fn has_local(&self) -> bool {
        self.local.is_some()
    }

    /// These executors with `local` running the built-in toolsets (`automation: "builtin"`).
    #[must_use]
    pub fn with_local(mut self, local: Arc<dyn Executor>) -> Self {
        self.local = Some(local);
        self
    }

    /// These executors with `mcp` running MCP servers' tools (`platforms.mcp`).
    #[must_use]
    pub fn with_mcp(mut self, mcp: Arc<dyn ToolSource>) -> Self {
        self.mcp = Some(mcp);
        self
    }

    /// The MCP servers' source of tools, when plugged in.
    pub fn mcp(&self) -> Option<&Arc<dyn ToolSource>> {
        self.mcp.as_ref()
    }

    /// These executors with web tools using `settings` and credentials from `auth`.
    #[must_use]
    pub fn with_web(mut self, settings: rest::RestSettings, auth: Arc<dyn rest::Auth>) -> Self {
        self.rest = rest::RestExecutor::new(settings, auth);
        self
    }

    /// The executor for `platform`'s section of `descriptor`.
    ///
    /// # Errors
    /// `AUTOMATION_NOT_SUPPORTED` when the section's automation kind has no executor here.
    pub fn for_section(
        &self,
        descriptor: &Descriptor,
        platform: Platform,
    ) -> Result<&dyn Executor, AaiError> {
        let automation = descriptor.automation(platform).unwrap_or("none");
        match (platform, automation) {
            (Platform::Linux, "dbus") => Ok(&self.dbus),
            (Platform::Linux, "atspi") => Ok(&self.atspi),
            (Platform::Macos, "applescript" | "jxa") => Ok(&self.osascript),
            (Platform::Windows, "com") => Ok(&self.com),
            (Platform::Windows, "uia") => Ok(&self.uia),
            (Platform::Macos, "ax") => Ok(&self.ax),
            (Platform::Android, "intent") => Ok(&self.adb),
            (Platform::Ios, "url_scheme") => Ok(&self.urlscheme),
            (Platform::Web, "restapi") => Ok(&self.rest),
            (Platform::Mcp, "stdio" | "http") if self.mcp.is_some() => {
                Ok(self.mcp.as_deref().expect("checked above") as &dyn Executor)
            }
            (Platform::Local, "builtin") if self.local.is_some() => {
                Ok(self.local.as_deref().unwrap_or(&self.rest))
            }
            _ => Err(AaiError::new(
                ErrorKind::AutomationNotSupported,
                format!(
                    "{} uses `{automation}` automation on {}, which this build of aai-gateway cannot run",
                    descriptor.app_id,
                    platform.key()
                ),
            )),
        }
    }

    /// Runs a tool of `platform`'s section.
    ///
    /// # Errors
    /// See [`Executor::call`] and [`Executors::for_section`].
    pub async fn call(
        &self,
        platform: Platform,
        invocation: Invocation<'_>,
    ) -> Result<Value, AaiError> {
        self.for_section(invocation.descriptor, platform)?
            .call(invocation)
            .await
    }

    /// What a tool of `platform`'s section would run (see [`Executor::plan`]).
    ///
    /// # Errors
    /// See [`Executor::plan`] and [`Executors::for_section`].
    pub fn plan(&self, platform: Platform, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        self.for_section(invocation.descriptor, platform)?
            .plan(invocation)
    }
}

/// The section of `platform` and its tool named by `invocation`.
fn section_tool<'a, S, T>(
    section: Option<&'a Section<S, T>>,
    invocation: &Invocation<'_>,
    platform: Platform,
) -> Result<(&'a Section<S, T>, &'a Tool<T>), AaiError> {
    let section = section.ok_or_else(|| {
        AaiError::new(
            ErrorKind::AutomationNotSupported,
            format!(
                "{} has no {} section",
                invocation.descriptor.app_id,
                platform.key()
            ),
        )
    })?;
    let tool = section
        .tools
        .iter()
        .find(|t| t.common.name == invocation.tool)
        .ok_or_else(|| {
            AaiError::new(
                ErrorKind::ToolNotFound,
                format!(
                    "{} has no {} tool {:?}",
                    invocation.descriptor.app_id,
                    platform.key(),
                    invocation.tool
                ),
            )
        })?;
    Ok((section, tool))
}

/// `commands` as the dry run shows them: the first at the top, the rest under `then`.
fn describe(commands: &[process::Command]) -> Value {
    let mut first = commands
        .first()
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    if commands.len() > 1
        && let Some(object) = first.as_object_mut()
    {
        object.insert(
            "then".into(),
            serde_json::to_value(&commands[1..]).unwrap_or(Value::Null),
        );
    }
    first
}

/// Text that is a JSON object or array, parsed; scripts often return JSON as text.
pub(crate) fn json_text(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    let looks = (trimmed.starts_with('{') && trimmed.ends_with('}'))
        || (trimmed.starts_with('[') && trimmed.ends_with(']'));
    looks.then(|| serde_json::from_str(trimmed).ok()).flatten()
}

/// INVALID_PARAMS when a value holds NUL, which no program argument can carry.
fn reject_nul(invocation: &Invocation<'_>, name: &str, value: &str) -> Result<(), AaiError> {
    if value.contains('\0') {
        return Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!(
                "{}: argument `{name}` contains a NUL character, which cannot be passed to the app; remove it",
                invocation.name()
            ),
        )
        .with_detail(json!({"field": name})));
    }
    Ok(())
}
