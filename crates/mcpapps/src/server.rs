//! One MCP server's connection: how to start or reach it (from its descriptor), the running
//! client, and what the gateway was told by it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aai_descriptor::{Descriptor, McpSection};
#[allow(deprecated)] // logging (SEP-2577): servers still send it
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingMessageNotificationParam,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use tokio::io::AsyncBufReadExt as _;

/// How long a server may take to start and answer `initialize`.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How to start or reach a server, as its descriptor says (variables expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Variables whose values are read from the credential store when the server starts
        /// (names only: the values are never part of the spec).
        from_store: Vec<String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        /// The descriptor's `auth`, as a web app's (JSON, compared when the file changes).
        auth: Option<serde_json::Value>,
    },
}

/// Why a server could not be started or reached.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("`{command}` cannot be started ({source}); is it installed and on PATH?")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{0}` is not installed or not on PATH")]
    NotFound(String),
    #[error("it did not answer `initialize` within {} s", START_TIMEOUT.as_secs())]
    Timeout,
    #[error("it did not complete `initialize` ({0})")]
    Initialize(String),
    #[error("`${{{0}}}` in its env is not set in the gateway's environment")]
    Unset(String),
    #[error(
        "{var} is not in the credential store; store it with `aai-gateway auth set {app_id} --env {var}`"
    )]
    NotStored { app_id: String, var: String },
    #[error("its variables cannot be read from the credential store: {0}")]
    Store(#[from] aai_engine::web::credentials::CredentialError),
    #[error("its descriptor has no `platforms.mcp` section")]
    NoSection,
    #[error(
        "it comes from the network (a registry or the app store): a server that runs a command, or one on this computer, is used only from a descriptor in the user's own apps folder"
    )]
    Untrusted,
}

impl Spec {
    /// The spec of `descriptor`'s `mcp` section. `${NAME}` in env values (and the bearer
    /// token's variable) are read from the gateway's environment only for a descriptor the
    /// user keeps (`trusted`): a fetched or store descriptor cannot ask for the user's
    /// variables.
    ///
    /// # Errors
    /// No section, or a variable it names is not set.
    /// A server with no `cwd` runs in `home` (a folder of the gateway's own for it), never in
    /// the gateway's working folder, which can be the agent's project: `npx` and `python -m`
    /// look for the program there first.
    pub fn of(
        descriptor: &Descriptor,
        trusted: bool,
        folder: &std::path::Path,
    ) -> Result<Self, StartError> {
        let section = descriptor
            .platforms
            .mcp
            .as_ref()
            .ok_or(StartError::NoSection)?;
        let fields: &McpSection = &section.fields;
        if section.automation == "http" {
            // A descriptor from the network does not reach into this computer.
            let loopback = fields
                .url
                .as_deref()
                .and_then(|u| url::Url::parse(u).ok())
                .is_some_and(|u| {
                    matches!(
                        u.host_str(),
                        Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
                    )
                });
            if loopback && !trusted {
                return Err(StartError::Untrusted);
            }
            return Ok(Self::Http {
                url: fields.url.clone().unwrap_or_default(),
                auth: fields
                    .auth
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok()),
            });
        }
        if !trusted {
            return Err(StartError::Untrusted);
        }
        let mut env = BTreeMap::new();
        for (name, value) in &fields.env {
            env.insert(name.clone(), expand(value, trusted)?);
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cwd = fields
            .cwd
            .as_deref()
            .map(|c| match (c.strip_prefix("~"), &home) {
                (Some(rest), Some(home)) => home.join(rest.trim_start_matches('/')),
                _ => PathBuf::from(c),
            });
        Ok(Self::Stdio {
            command: fields.command.clone().unwrap_or_default(),
            args: fields.args.clone(),
            env,
            from_store: fields.env_from_store.clone(),
            cwd: Some(cwd.unwrap_or_else(|| folder.to_path_buf())),
        })
    }

    /// What the agent may read of it in an error: the program's file name, or the URL's origin
    /// and path (arguments, variables and a query can hold secrets).
    pub fn program(&self) -> String {
        match self {
            Self::Stdio { command, .. } => std::path::Path::new(command)
                .file_name()
                .map_or_else(|| command.clone(), |n| n.to_string_lossy().into_owned()),
            Self::Http { url, .. } => url::Url::parse(url).map_or_else(
                |_| url.clone(),
                |u| format!("{}{}", u.origin().ascii_serialization(), u.path()),
            ),
        }
    }

    /// What the user reads of it: the command line, or the URL.
    pub fn describe(&self) -> String {
        match self {
            Self::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Self::Http { url, .. } => url.clone(),
        }
    }
}

/// `value` with `${NAME}` replaced by the gateway's variable `NAME`, and a leading `~/`
/// by the user's home folder (as the manual's `"MEMORY_FILE_PATH": "~/memory.jsonl"` means).
fn expand(value: &str, trusted: bool) -> Result<String, StartError> {
    let mut out = String::new();
    let mut rest = value;
    if let (Some(tail), Some(home)) = (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        out.push_str(&home.to_string_lossy());
        out.push('/');
        rest = tail;
    }
    while let Some(at) = rest.find("${") {
        let Some(end) = rest[at..].find('}') else {
            break;
        };
        let name = &rest[at + 2..at + end];
        out.push_str(&rest[..at]);
        let found = trusted.then(|| std::env::var(name).ok()).flatten();
        out.push_str(&found.ok_or_else(|| StartError::Unset(name.to_owned()))?);
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables of the gateway a server gets: enough to find programs and its home, no more
/// (no credentials meant for another server or app).
const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "SYSTEMROOT",
    "APPDATA",
    "LOCALAPPDATA",
    "USERPROFILE",
    "NODE_PATH",
    "npm_config_cache",
];

/// The program and arguments that run a server: under the gateway's launcher where the
/// system has a sandbox, with the user's rights everywhere but the gateway's own files (its
/// home is read-only and its secrets — the control credential, tokens, the audit database —
/// unreadable), so a server that reads or writes files for the agent cannot reach the gate's
/// controls; as it is elsewhere.
fn contained(
    command: &str,
    args: &[String],
    named: &[PathBuf],
    programs: &[PathBuf],
    gateway_home: &std::path::Path,
) -> (String, Vec<String>) {
    #[cfg(target_os = "linux")]
    if let Some(launcher) = aai_contain::launcher()
        && aai_contain::support().sandbox.is_some()
    {
        let profile = aai_contain::Profile {
            write: std::iter::once(PathBuf::from("/"))
                .chain(named.iter().cloned())
                .collect(),
            temp: None,
            home: gateway_home.to_path_buf(),
            protect: Vec::new(),
            read: Vec::new(),
            programs: programs
                .iter()
                .map(|p| aai_contain::view::source_tree(p))
                .collect(),
            cgroup: None,
            // The display and the session bus stay in reach, as when a client starts the
            // server; no other session socket does.
            desktop: true,
            no_bus: false,
            deny: std::env::var_os("HOME")
                .map(|home| aai_contain::rules::secret_stores(std::path::Path::new(&home)))
                .unwrap_or_default(),
            // The server's working folder lies in the home (`mcp/servers/<app>`).
            own_temp: None,
            egress: None,
            home_readable: true,
        };
        return profile.command(launcher, command, args);
    }
    let _ = (gateway_home, named, programs);
    (command.to_owned(), args.to_vec())
}

/// The absolute paths among a server's arguments and variables that exist (a file's folder
/// for a file not made yet), `--opt=/path` included.
fn named_paths<'a>(values: impl Iterator<Item = &'a String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for value in values {
        let value = value.split_once('=').map_or(value.as_str(), |(_, v)| v);
        let path = std::path::Path::new(value);
        if !path.is_absolute() {
            continue;
        }
        let found = if path.exists() {
            Some(path.to_path_buf())
        } else {
            path.parent()
                .filter(|p| p.is_dir())
                .map(std::path::Path::to_path_buf)
        };
        if let Some(found) = found
            && !out.contains(&found)
        {
            out.push(found);
        }
    }
    out
}

/// The values of `names` kept for `app_id` in the credential store under `gateway_home`.
///
/// # Errors
/// The store cannot be read, or one of the variables is not in it.
fn stored_env(
    gateway_home: &std::path::Path,
    app_id: &str,
    names: &[String],
) -> Result<BTreeMap<String, String>, StartError> {
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let mut stored = aai_engine::web::credentials::Store::new(gateway_home).get(app_id)?;
    names
        .iter()
        .map(|name| {
            let value = stored
                .env
                .remove(name)
                .ok_or_else(|| StartError::NotStored {
                    app_id: app_id.to_owned(),
                    var: name.clone(),
                })?;
            Ok((name.clone(), value))
        })
        .collect()
}

/// Whether `command` names a program that exists (a path, or a name found on `PATH`).
fn found(command: &str) -> Option<PathBuf> {
    let path = std::path::Path::new(command);
    if path.components().count() > 1 {
        return path.is_file().then(|| path.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|dirs| {
        std::env::split_paths(&dirs)
            .map(|dir| dir.join(command))
            .find(|p| p.is_file())
    })
}

/// What the client side hears from a server.
pub struct Handler {
    pub app_id: String,
    /// Set when the server says its tool list changed: the next use lists again.
    pub stale: Arc<AtomicBool>,
    /// Where the gateway's clients hear of it (the appId).
    pub changes: tokio::sync::broadcast::Sender<String>,
    /// Progress of the calls under way, by their progress token.
    pub progress: rmcp::handler::client::progress::ProgressDispatcher,
    /// The calls under way that can take the server's questions (the latest last).
    pub asks: Asks,
}

/// A server's question during a call: its message, the form's schema, and where the user's
/// answer goes.
pub type Ask = (
    String,
    serde_json::Value,
    tokio::sync::oneshot::Sender<aai_executor::Elicited>,
);

/// Where a server's questions go: the calls under way.
pub type Asks = Arc<std::sync::Mutex<Vec<tokio::sync::mpsc::Sender<Ask>>>>;

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            {
                // The questions a server asks during a call go to the call's own asker.
                let mut capabilities = ClientCapabilities::default();
                capabilities.elicitation = Some(rmcp::model::ElicitationCapability::default());
                capabilities
            },
            Implementation::new("aai-gateway", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Already stale: the clients were told and nobody has listed since. A server that
        // repeats itself is heard once until its tools are read again.
        if self.stale.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::info!(app = %self.app_id, "the MCP server's tools changed");
        let _ = self.changes.send(self.app_id.clone());
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitResult, ElicitationAction};
        let value = serde_json::to_value(&request).unwrap_or_default();
        let message = value["message"].as_str().unwrap_or_default().to_owned();
        let schema = value.get("requestedSchema").cloned();
        // A form only (a URL the server wants opened is declined), asked of the caller of
        // the call under way; with no call under way there is nobody to ask.
        let call = self
            .asks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .last()
            .cloned();
        let (Some(schema), Some(call)) = (schema, call) else {
            tracing::info!(app = %self.app_id, "a question of the MCP server was declined: no call under way can ask the user");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        if call.send((message, schema, reply)).await.is_err() {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        Ok(match answer.await {
            Ok(aai_executor::Elicited::Accepted(content)) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content)
            }
            Ok(aai_executor::Elicited::Declined) => ElicitResult::new(ElicitationAction::Decline),
            _ => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::info!(app = %self.app_id, level = ?params.level, "{}", params.data);
    }
}

/// A started (or reached) server.
pub struct Connection {
    pub client: RunningService<RoleClient, Handler>,
    pub pid: Option<u32>,
}

/// Starts or reaches the server of `spec`.
///
/// # Errors
/// It cannot be started, or it does not complete `initialize` in time.
pub async fn connect(
    spec: &Spec,
    handler: Handler,
    credential: Option<aai_executor::rest::Credential>,
    gateway_home: &std::path::Path,
) -> Result<Connection, StartError> {
    let app_id = handler.app_id.clone();
    match spec {
        Spec::Stdio {
            command,
            args,
            env,
            from_store,
            cwd,
        } => {
            let Some(program) = found(command) else {
                return Err(StartError::NotFound(command.clone()));
            };
            let stored = stored_env(gateway_home, &app_id, from_store)?;
            // The folders and files the user's own config names (a filesystem server's root,
            // a memory file's folder) stay in the server's view, even under the temporary
            // folder, which is private to it otherwise.
            let named = named_paths(args.iter().chain(env.values()));
            // What it is run from (the program, a script it is given) stays in view
            // read-only with what lies beside it, also in a checkout under `/tmp`.
            let programs: Vec<PathBuf> = std::iter::once(program)
                .chain(named_paths(args.iter()).into_iter().filter(|p| p.is_file()))
                .collect();
            let (program, argv) = contained(command, args, &named, &programs, gateway_home);
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(&argv).env_clear();
            for name in PASSED {
                if let Some(value) = std::env::var_os(name) {
                    cmd.env(name, value);
                }
            }
            // The stored values go to this child alone: never into the gateway's own
            // environment, the spec, a log line or the status.
            cmd.envs(env)
                .envs(stored)
                .env(
                    aai_executor::process::TAG_VAR,
                    aai_executor::process::process_tag(),
                )
                .kill_on_drop(true);
            if let Some(cwd) = cwd {
                // The gateway's own folder for the server is made when first needed.
                if !cwd.exists() {
                    let _ = std::fs::create_dir_all(cwd);
                }
                cmd.current_dir(cwd);
            }
            #[cfg(unix)]
            cmd.process_group(0);
            let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| StartError::Spawn {
                    command: command.clone(),
                    source,
                })?;
            let pid = transport.id();
            if let Some(stderr) = stderr {
                let app = app_id.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::info!(target: "aai_mcpapps::stderr", app = %app, "{line}");
                    }
                });
            }
            let client = tokio::time::timeout(START_TIMEOUT, handler.serve(transport))
                .await
                .map_err(|_| StartError::Timeout)?
                .map_err(|e| StartError::Initialize(e.to_string()))?;
            tracing::info!(app = %app_id, ?pid, "MCP server started");
            Ok(Connection { client, pid })
        }
        Spec::Http { url, .. } => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut uri = url.clone();
            let mut headers = std::collections::HashMap::new();
            let mut bearer = None;
            match credential {
                Some(aai_executor::rest::Credential::Header { name, value }) => {
                    match value.strip_prefix("Bearer ") {
                        Some(token) if name.eq_ignore_ascii_case("authorization") => {
                            bearer = Some(token.to_owned());
                        }
                        _ => {
                            if let (Ok(name), Ok(value)) = (
                                http::HeaderName::try_from(name.as_str()),
                                http::HeaderValue::try_from(value.as_str()),
                            ) {
                                headers.insert(name, value);
                            }
                        }
                    }
                }
                Some(aai_executor::rest::Credential::Query { name, value }) => {
                    if let Ok(mut parsed) = url::Url::parse(&uri) {
                        parsed.query_pairs_mut().append_pair(&name, &value);
                        uri = parsed.to_string();
                    }
                }
                None => {}
            }
            let sent_uri = uri.clone();
            let mut config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    uri,
                )
                .custom_headers(headers);
            if let Some(token) = bearer {
                config = config.auth_header(token);
            }
            let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
            // A key sent in the query must not come back in an error's text (the HTTP
            // client's errors name the URL they failed on).
            let secret_url = (sent_uri != *url).then_some(sent_uri);
            let client = tokio::time::timeout(START_TIMEOUT, handler.serve(transport))
                .await
                .map_err(|_| StartError::Timeout)?
                .map_err(|e| {
                    let mut text = e.to_string();
                    if let Some(secret_url) = &secret_url {
                        text = text.replace(secret_url.as_str(), url);
                    }
                    StartError::Initialize(text)
                })?;
            tracing::info!(app = %app_id, %url, "MCP server reached");
            Ok(Connection { client, pid: None })
        }
    }
}
