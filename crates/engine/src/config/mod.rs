//! Gateway configuration: `AAI_HOME` and `AAI_HOME/config.json`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use aai_descriptor::Platform;
use serde::Deserialize;

pub mod hints;
pub mod live;
pub mod policy;
pub mod starter;

/// How apps appear in `tools/list`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Exposure {
    /// `full` up to 30 apps (`AUTO_MOST_APPS`), `compact` beyond.
    #[default]
    Auto,
    /// One `app_<slug>` tool per app plus `aai_exec`.
    Full,
    /// A fixed list: `aai_apps`, `aai_guide`, `aai_exec`, whatever the number of apps.
    Compact,
}

/// The most apps `auto` lists one tool each for: with the gateway's own tools this stays under
/// the 40 tools some clients send the model at most (Cursor), and the first turn small.
pub const AUTO_MOST_APPS: usize = 30;

impl Exposure {
    /// The mode in effect with `apps` apps: `full` or `compact`, never `auto`.
    #[must_use]
    pub fn for_apps(self, apps: usize) -> Self {
        match self {
            Self::Auto if apps <= AUTO_MOST_APPS => Self::Full,
            Self::Auto => Self::Compact,
            chosen => chosen,
        }
    }
}

/// The config file's name in `AAI_HOME`.
pub const CONFIG_FILE: &str = "config.json";

/// The contents of `config.json`; every field is optional.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Extra places to look for descriptors: a directory of `<appId>/aai.json`, a directory
    /// holding `aai.json`, or an `aai.json` file.
    pub paths: Vec<PathBuf>,
    pub exposure: Exposure,
    /// Timeout of a tool call whose descriptor sets none.
    pub timeout_seconds: u64,
    /// Results longer than this many characters are cut, with a note.
    pub max_result_chars: usize,
    /// Requests larger than this many bytes are refused with a JSON-RPC error.
    pub max_request_bytes: usize,
    /// How long the first `tools/list` waits for discovery without progress before answering
    /// with what it has (while files keep loading it waits, 30 s at most).
    pub scan_budget_ms: u64,
    /// How long a call waits for the user to answer a consent request.
    pub consent_timeout_seconds: u64,
    /// In the daemon, how long a call whose client cannot ask waits in the approval queue
    /// before it returns pending (clients time calls out at about 60 s).
    pub approval_wait_seconds: u64,
    /// Approval policy profiles and which client gets which.
    pub policy: crate::config::policy::PolicyConfig,
    /// The descriptor sections served, in order of preference: an app runs the first one it
    /// has. Default: this computer's OS. Add `android` or `ios` to drive a device or a
    /// simulator from the desktop.
    pub platforms: Vec<Platform>,
    /// Where the automation programs are and which device they talk to.
    pub executors: aai_executor::Settings,
    /// Retries of read-only tools that timed out or found their app not running.
    pub retry: Retry,
    /// Web apps: registry, TLS trust, limits.
    pub web: WebConfig,
    /// The built-in local toolsets and their file sandbox.
    pub local: aai_toolset::LocalConfig,
    /// The desktop toolsets: screenshot size, protected apps, OCR language.
    pub desktop: aai_toolset::DesktopConfig,
    /// The browser toolset: which Chromium, headless or not, and its domain policy.
    pub browser: aai_toolset::BrowserConfig,
    /// What the audit log keeps of each call.
    pub audit: AuditConfig,
    /// Scheduled tasks: the agent commands they can hand work to, and the scheduler's limits.
    pub scheduler: SchedulerConfig,
    /// The daemon's MCP sessions over HTTP: when an abandoned one ends.
    pub sessions: SessionsConfig,
    /// The app store: where it is, and whether `aai_apps` lists its apps.
    pub store: crate::config::StoreConfig,
    /// MCP servers behind the gate (descriptors with `platforms.mcp`).
    pub mcp: McpConfig,
    /// Offer agents `local.descriptors`: drafting a descriptor (`aai_describe`) and
    /// installing one, which the user is asked about every time (`aai_install_descriptor`).
    pub describe_tools: bool,
    /// Set when `config.json` could not be used: `<file>:<line>:<column> <problem>`. The
    /// config is then the fail-closed default, and every refused call says why.
    #[serde(skip)]
    #[schemars(skip)]
    pub invalid: Option<String>,
}

/// `mcp` in config.json.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// A tool's risk by `appId:tool` (e.g. `"io.github.memory:delete_entities": "high"`), over
    /// what the server's annotations say (`readOnlyHint` → low, `destructiveHint` → high,
    /// none → medium).
    pub risk: std::collections::HashMap<String, aai_descriptor::Risk>,
}

/// `scheduler` in config.json.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Agent commands a task can hand its instruction to, by name. In `command`, the whole
    /// words `{instruction}`, `{mcp_config}` (a file with this gateway's MCP endpoint and the
    /// run's token), `{mcp_url}` and `{task}` are replaced, e.g.
    /// `["claude", "-p", "{instruction}", "--mcp-config", "{mcp_config}"]`.
    pub agents: std::collections::BTreeMap<String, AgentCommand>,
    /// An occurrence found this many seconds late counts as missed (the task's `catch_up`
    /// decides); a later one runs as usual.
    pub grace_seconds: u64,
    /// Runs at once, across every task.
    pub max_concurrent_runs: usize,
    /// A failed run of a task with `retries` is tried again after this many seconds, then
    /// twice as many, and so on.
    pub retry_seconds: u64,
    /// Offer the `local.schedule` tools to agents (each asks, risk high).
    pub tools: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            agents: std::collections::BTreeMap::new(),
            grace_seconds: 60,
            max_concurrent_runs: 8,
            retry_seconds: 10,
            tools: true,
        }
    }
}

/// An agent command (`scheduler.agents.<name>`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentCommand {
    /// The program and its arguments, run without a shell.
    pub command: Vec<String>,
    /// Killed after this many seconds.
    #[serde(default = "agent_timeout")]
    pub timeout_seconds: u64,
}

fn agent_timeout() -> u64 {
    1800
}

/// `sessions` in config.json: the daemon's MCP sessions over HTTP.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SessionsConfig {
    /// A session with no request for this many seconds and no open stream (its client went
    /// away without closing it) ends.
    pub idle_seconds: u64,
    /// Sessions one client (by its name) may hold; opening one more ends its least recently
    /// used one that is not busy.
    pub per_client: usize,
    /// Sessions of every client together; the same rule ends the least recently used.
    pub total: usize,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_seconds: 1800,
            per_client: 32,
            total: 512,
        }
    }
}

/// `audit` in config.json.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Argument strings longer than this are kept as their size, SHA-256 and first 64
    /// characters, never whole (a file's content does not belong in the log).
    pub max_arg_chars: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            max_arg_chars: 1024,
        }
    }
}

/// Settings of web apps (`web` in config.json).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// An AAI registry (`GET <registry_url>/api/v1/apps`); none by default.
    pub registry_url: Option<String>,
    /// How often the registry is read again while the gateway runs, in seconds (0: only at
    /// start).
    pub registry_refresh_seconds: u64,
    /// PEM files of extra certificate authorities to trust (a company proxy, a test CA).
    pub extra_ca_certs: Vec<PathBuf>,
    /// Allow `http://` to 127.0.0.1/localhost (local development and tests); never elsewhere.
    pub allow_http_loopback: bool,
    /// Responses larger than this are refused.
    pub max_response_bytes: usize,
    /// Where fetched `.well-known/aai.json` files are cached; default the user cache
    /// directory's `aai-gateway`.
    pub cache_dir: Option<PathBuf>,
    /// Open the browser for OAuth authorization (when a desktop session is there).
    pub open_browser: bool,
    /// Your own base URL for a web app, by appId (a staging or local server). Requests and the
    /// credentials that may go with them follow it; a descriptor can never set this.
    pub base_urls: std::collections::BTreeMap<String, String>,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            registry_url: None,
            registry_refresh_seconds: 3600,
            extra_ca_certs: Vec::new(),
            allow_http_loopback: false,
            max_response_bytes: 8 * 1024 * 1024,
            cache_dir: None,
            open_browser: true,
            base_urls: std::collections::BTreeMap::new(),
        }
    }
}

impl WebConfig {
    /// The cache directory: `cache_dir`, else `$XDG_CACHE_HOME/aai-gateway`, else
    /// `~/.cache/aai-gateway` (`%LOCALAPPDATA%\aai-gateway` on Windows).
    pub fn cache_dir(&self) -> PathBuf {
        if let Some(dir) = &self.cache_dir {
            return expand_home(dir);
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .or_else(|| std::env::var_os("LOCALAPPDATA"))
            .filter(|v| !v.is_empty())
            .map_or_else(|| user_home().join(".cache"), PathBuf::from);
        base.join("aai-gateway")
    }
}

/// How read-only calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Retry {
    /// Tries in all, the first included; 1 turns retries off.
    pub attempts: u32,
    /// The wait before the first retry; each later one waits twice as long.
    pub backoff_ms: u64,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 3,
            backoff_ms: 250,
        }
    }
}

impl Retry {
    /// The wait before try number `attempt` (2 for the first retry), capped at 30 s.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u64 << attempt.saturating_sub(2).min(16);
        Duration::from_millis(self.backoff_ms.saturating_mul(factor).min(30_000))
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            paths: Vec::new(),
            exposure: Exposure::Auto,
            timeout_seconds: 30,
            // About 20k tokens: under the 25k-token limit clients put on one result.
            max_result_chars: 80_000,
            scan_budget_ms: 5_000,
            max_request_bytes: 4 * 1024 * 1024,
            consent_timeout_seconds: 120,
            approval_wait_seconds: 45,
            policy: crate::config::policy::PolicyConfig::default(),
            platforms: vec![Platform::current(), Platform::Web],
            executors: aai_executor::Settings::default(),
            retry: Retry::default(),
            web: WebConfig::default(),
            local: aai_toolset::LocalConfig::default(),
            desktop: aai_toolset::DesktopConfig::default(),
            browser: aai_toolset::BrowserConfig::default(),
            audit: AuditConfig::default(),
            scheduler: SchedulerConfig::default(),
            sessions: SessionsConfig::default(),
            store: crate::config::StoreConfig::default(),
            mcp: McpConfig::default(),
            describe_tools: true,
            invalid: None,
        }
    }
}

impl Config {
    /// Defaults, except that the policy asks for every call: used when `config.json` exists
    /// but cannot be used, so a broken file never loosens what the user set.
    pub fn fail_closed() -> Self {
        Self {
            policy: crate::config::policy::PolicyConfig::fail_closed(),
            ..Self::default()
        }
    }

    pub fn approval_wait(&self) -> Duration {
        Duration::from_secs(self.approval_wait_seconds)
    }

    pub fn consent_timeout(&self) -> Duration {
        Duration::from_secs(self.consent_timeout_seconds.max(1))
    }

    pub fn default_timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.max(1))
    }

    /// How long a tool of `platform` may run: its `timeout` (milliseconds on Android, as the
    /// spec says; seconds elsewhere), else the platform's default (Android 5 s, iOS 10 s) or
    /// the configured one.
    pub fn tool_timeout(&self, platform: Platform, timeout: Option<u64>) -> Duration {
        match (platform, timeout) {
            (Platform::Android, Some(ms)) => Duration::from_millis(ms.max(1)),
            (Platform::Android, None) => Duration::from_millis(5_000),
            (_, Some(seconds)) => Duration::from_secs(seconds.max(1)),
            (Platform::Ios, None) => Duration::from_secs(10),
            (_, None) => self.default_timeout(),
        }
    }

    pub fn scan_budget(&self) -> Duration {
        Duration::from_millis(self.scan_budget_ms)
    }

    /// Reads `config.json` under `home`. A missing file is the default config; a broken one
    /// is reported and the defaults are used with a fail-closed policy, so a typo never stops
    /// the gateway and never loosens what the user set. The problem is kept in
    /// [`Config::invalid`] as `<file>:<line>:<column> <problem>`.
    pub fn load(home: &Path) -> (Self, Option<String>) {
        let path = home.join(CONFIG_FILE);
        let problem = match std::fs::read(&path) {
            Ok(bytes) => match Self::parse(&path, &bytes) {
                Ok(config) => return (config, None),
                Err(problem) => problem.to_string(),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return (Self::default(), None);
            }
            Err(error) => format!("{}:1:1 cannot read: {error}", path.display()),
        };
        let config = Self {
            invalid: Some(problem.clone()),
            ..Self::fail_closed()
        };
        (
            config,
            Some(format!(
                "the config is invalid: {problem}; every call asks for approval until it is fixed (`aai-gateway config check`)"
            )),
        )
    }

    /// Parses the bytes of `path`.
    ///
    /// # Errors
    /// Where and what: shown as `<file>:<line>:<column> <problem>`.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self, ParseError> {
        Self::parse_at(bytes).map_err(|(line, column, problem)| ParseError {
            file: path.to_owned(),
            line,
            column,
            problem,
        })
    }

    /// [`Config::parse`], its error as line, column and problem. `$comment` notes are blanked
    /// out first (in place, so every position stays true); an unknown key is answered with
    /// what it most likely meant rather than with every key there is.
    fn parse_at(bytes: &[u8]) -> Result<Self, (usize, usize, String)> {
        // A syntax mistake (a trailing comma, a missing quote) is the problem, reported as
        // itself: nothing after it in the file can be judged.
        if let Err(error) = serde_json::from_slice::<serde_json::Value>(bytes) {
            let text = error.to_string();
            let message = text
                .rsplit_once(" at line ")
                .map_or(text.as_str(), |(message, _)| message)
                .to_owned();
            return Err((error.line().max(1), error.column().max(1), message));
        }
        let blanked;
        let bytes = if bytes
            .windows(hints::COMMENT.len())
            .any(|w| w == hints::COMMENT.as_bytes())
        {
            blanked = hints::blank_comments(bytes);
            &blanked[..]
        } else {
            bytes
        };
        match serde_json::from_slice::<Self>(bytes) {
            Ok(mut config) => {
                for entry in config
                    .paths
                    .iter_mut()
                    .chain(config.web.extra_ca_certs.iter_mut())
                {
                    *entry = expand_home(entry);
                }
                Ok(config)
            }
            Err(error) => {
                let text = error.to_string();
                let mut message = text
                    .rsplit_once(" at line ")
                    .map_or(text.as_str(), |(message, _)| message)
                    .to_owned();
                if let Some(named) = message
                    .strip_prefix("unknown field `")
                    .and_then(|rest| rest.split('`').next())
                    && let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes)
                    && let Some(unknown) = hints::unknown_keys(&Self::schema(), &value)
                        .into_iter()
                        .find(|u| u.key == named)
                {
                    message = unknown.describe();
                }
                Err((error.line().max(1), error.column().max(1), message))
            }
        }
    }

    /// The JSON Schema of `config.json` (published as `schemas/config.schema.json`).
    pub fn schema() -> serde_json::Value {
        let mut schema = serde_json::to_value(schemars::schema_for!(Config)).unwrap_or_default();
        if let Some(object) = schema.as_object_mut() {
            object.insert(
                "$id".into(),
                serde_json::json!("https://aai-gateway.dev/schemas/config.schema.json"),
            );
            object.insert("title".into(), serde_json::json!("aai-gateway config.json"));
        }
        hints::allow_comments(&mut schema);
        schema
    }

    /// Every problem of a `config.json`: its JSON syntax, then each place the schema refuses
    /// (by JSON pointer), then what the gateway itself cannot use (by line and column).
    pub fn check(path: &Path, bytes: &[u8]) -> Vec<String> {
        let value: serde_json::Value = match serde_json::from_slice(bytes) {
            Ok(value) => value,
            Err(error) => {
                return vec![format!(
                    "{}:{}:{} {}",
                    path.display(),
                    error.line().max(1),
                    error.column().max(1),
                    error
                        .to_string()
                        .rsplit_once(" at line ")
                        .map_or(error.to_string(), |(m, _)| m.to_owned())
                )];
            }
        };
        let mut problems = Vec::new();
        let schema = Self::schema();
        let parsed = Self::parse_at(bytes);
        // Each unknown key once, with what it most likely meant (and its line when it is the
        // one the gateway stopped at), in place of the schema's "additional properties".
        let unknown = hints::unknown_keys(&schema, &value);
        for key in &unknown {
            let described = key.describe();
            let place = match &parsed {
                Err((line, column, message)) if *message == described => {
                    format!(":{line}:{column}")
                }
                _ => String::new(),
            };
            problems.push(format!(
                "{}{place}: at {}: {described}",
                path.display(),
                key.pointer
            ));
        }
        if let Ok(validator) = jsonschema::validator_for(&schema) {
            for error in validator.iter_errors(&value) {
                if !unknown.is_empty()
                    && matches!(
                        error.kind(),
                        jsonschema::error::ValidationErrorKind::AdditionalProperties { .. }
                    )
                {
                    continue;
                }
                let pointer = error.instance_path().to_string();
                problems.push(format!(
                    "{}: at {}: {error}",
                    path.display(),
                    if pointer.is_empty() { "/" } else { &pointer }
                ));
            }
        }
        match parsed.map_err(|(line, column, message)| {
            (
                format!("{}:{line}:{column} {message}", path.display()),
                message,
            )
        }) {
            Err((_, message)) if unknown.iter().any(|u| u.describe() == message) => {}
            Err((problem, _)) => problems.push(problem),
            Ok(config) => {
                for file in &config.web.extra_ca_certs {
                    if let Err(problem) = crate::config::read_ca_file(file) {
                        problems.push(format!("{}: web.extra_ca_certs: {problem}", path.display()));
                    }
                }
            }
        }
        problems
    }
}

/// The gateway's home: `AAI_HOME`, else `~/.aai`.
pub fn aai_home() -> PathBuf {
    if let Some(home) = std::env::var_os("AAI_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    user_home().join(".aai")
}

pub use aai_toolset::{expand_home, user_home};

/// `store` in config.json.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// The app store (an `aai-registry`), e.g. `https://store.example.org`; none by default.
    pub url: Option<String>,
    /// How often the local index of the store's apps is read again, in seconds.
    pub index_refresh_seconds: u64,
    /// `aai_apps {query}` also lists matching store apps, marked as not installed.
    pub in_apps: bool,
    /// The store's timestamp key (base64 ed25519); without it, the key the store gives at the
    /// first contact is kept in `AAI_HOME/store/registries.json` and required from then on.
    pub timestamp_key: Option<String>,
    /// The oldest timestamp accepted on a descriptor from the store, in seconds: how long a
    /// mirror may hold back an update unnoticed.
    pub max_age_seconds: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: None,
            index_refresh_seconds: 3600,
            in_apps: false,
            timestamp_key: None,
            max_age_seconds: 86_400,
        }
    }
}

/// Where and why `config.json` does not parse.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}:{line}:{column} {problem}", file.display())]
pub struct ParseError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    /// The problem, with what an unknown key most likely meant.
    pub problem: String,
}

/// Why a file of certificate authorities cannot be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} holds no certificate (expected PEM blocks `-----BEGIN CERTIFICATE-----`)",
        .0.display()
    )]
    Empty(PathBuf),
    #[error("{} is not a PEM certificate file: {source}", path.display())]
    NotPem {
        path: PathBuf,
        source: reqwest::Error,
    },
}

/// A PEM file of certificate authorities.
///
/// # Errors
/// It cannot be read or holds no certificate.
pub fn read_ca_file(path: &Path) -> Result<Vec<u8>, CaFileError> {
    let bytes = std::fs::read(path).map_err(|source| CaFileError::Unreadable {
        path: path.to_owned(),
        source,
    })?;
    match reqwest::Certificate::from_pem_bundle(&bytes) {
        Ok(certs) if !certs.is_empty() => Ok(bytes),
        Ok(_) => Err(CaFileError::Empty(path.to_owned())),
        Err(source) => Err(CaFileError::NotPem {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_broken_configs_fall_back_to_defaults() {
        let dir = tempfile::tempdir().expect("dir");
        let (config, problem) = Config::load(dir.path());
        assert!(problem.is_none());
        assert_eq!(config.exposure, Exposure::Auto);
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"exposure": "compactt"}"#,
        )
        .expect("write");
        let (config, problem) = Config::load(dir.path());
        assert_eq!(config.exposure, Exposure::Auto);
        assert!(problem.is_some_and(|p| p.contains("config.json") && p.contains("compactt")));
    }

    #[test]
    fn reads_every_field() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"paths": ["/opt/aai"], "exposure": "compact", "timeout_seconds": 5, "max_result_chars": 100, "scan_budget_ms": 10}"#,
        )
        .expect("write");
        let (config, problem) = Config::load(dir.path());
        assert!(problem.is_none(), "{problem:?}");
        assert_eq!(config.paths, vec![PathBuf::from("/opt/aai")]);
        assert_eq!(config.exposure, Exposure::Compact);
        assert_eq!(config.default_timeout(), Duration::from_secs(5));
        assert_eq!(config.max_result_chars, 100);
    }

    #[test]
    fn platforms_executors_and_retries_are_configurable() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"platforms": ["linux", "android"], "executors": {"adb": "/opt/adb", "android_serial": "emulator-5554"}, "retry": {"attempts": 4, "backoff_ms": 10}}"#,
        )
        .expect("write");
        let (config, problem) = Config::load(dir.path());
        assert!(problem.is_none(), "{problem:?}");
        assert_eq!(config.platforms, [Platform::Linux, Platform::Android]);
        assert_eq!(config.executors.adb, "/opt/adb");
        assert_eq!(
            config.executors.android_serial.as_deref(),
            Some("emulator-5554")
        );
        assert_eq!(config.executors.osascript, "osascript");
        assert_eq!(config.retry.attempts, 4);
        assert_eq!(config.retry.backoff(2), Duration::from_millis(10));
        assert_eq!(config.retry.backoff(4), Duration::from_millis(40));
        assert_eq!(
            config.tool_timeout(Platform::Android, Some(1500)),
            Duration::from_millis(1500)
        );
        assert_eq!(
            config.tool_timeout(Platform::Android, None),
            Duration::from_millis(5000)
        );
        assert_eq!(
            config.tool_timeout(Platform::Ios, None),
            Duration::from_secs(10)
        );
        assert_eq!(
            config.tool_timeout(Platform::Macos, Some(7)),
            Duration::from_secs(7)
        );
        assert_eq!(
            config.tool_timeout(Platform::Macos, None),
            Duration::from_secs(30)
        );
    }
}
