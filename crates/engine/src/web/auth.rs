//! Credentials for web tools: API keys and bearer tokens from an environment variable or the
//! store, and OAuth 2.0 authorization code with PKCE (S256) through a loopback redirect on
//! 127.0.0.1 (RFC 8252), tokens refreshed before they expire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aai_descriptor::{AaiError, Descriptor, ErrorKind, WebAuth, WebSection};
use aai_executor::BoxFuture;
use aai_executor::rest::{Auth, Credential, credential_for, origin_of};
use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::credentials::{Store, Tokens};

/// How long the gateway waits for the browser to come back after sending the user off.
pub const AUTHORIZATION_WAIT: Duration = Duration::from_secs(600);
/// Tokens this close to expiry are refreshed first.
const REFRESH_EARLY: u64 = 60;

/// An authorization under way for one app.
struct Flow {
    url: String,
    started: Instant,
    /// Set when the flow ended badly, for the next call to report.
    failure: Arc<Mutex<Option<String>>>,
    finished: Arc<std::sync::atomic::AtomicBool>,
}

/// The gateway's [`Auth`]: environment, store and OAuth.
pub struct GatewayAuth {
    pub store: Store,
    client: aai_executor::HttpClient,
    flows: Mutex<HashMap<String, Flow>>,
    open_browser: bool,
    /// (appId, variable, origin) bindings the user approved for fetched descriptors.
    env_approved: Mutex<std::collections::HashSet<(String, String, String)>>,
    /// Where each app's credential came from last (for messages; never the secret).
    sources: Mutex<HashMap<String, String>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn field<'a>(auth: &'a WebAuth, name: &str) -> Option<&'a str> {
    auth.fields.get(name).and_then(Value::as_str)
}

/// The scopes an `oauth2` auth asks for, space-separated (empty when none are named).
pub fn scopes(auth: &WebAuth) -> String {
    auth.fields
        .get("scopes")
        .and_then(Value::as_array)
        .map(|s| {
            s.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// 32 random bytes, base64url without padding (43 characters).
fn random_token() -> Result<String, AaiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("no randomness for OAuth: {e}"),
        )
    })?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The S256 code challenge of a PKCE verifier (RFC 7636).
pub fn code_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

impl GatewayAuth {
    pub fn new(store: Store, client: aai_executor::HttpClient, open_browser: bool) -> Self {
        Self {
            store,
            client,
            flows: Mutex::new(HashMap::new()),
            open_browser,
            env_approved: Mutex::default(),
            sources: Mutex::default(),
        }
    }

    /// The environment variable a fetched descriptor asks to send, with the origin it would
    /// go to, when that variable is set: the user must approve this binding first.
    pub fn env_binding(descriptor: &Descriptor, section: &WebSection) -> Option<(String, String)> {
        if !descriptor.fetched {
            return None;
        }
        let var = section.auth.as_ref().and_then(|a| field(a, "env_var"))?;
        std::env::var(var).ok().filter(|v| !v.is_empty())?;
        Some((var.to_owned(), origin_of(&section.base_url)?))
    }

    /// Lets `descriptor` send `var` to `origin` (the user approved that exact binding).
    pub fn approve_env(&self, descriptor: &Descriptor, var: &str, origin: &str) {
        if let Ok(mut approved) = self.env_approved.lock() {
            approved.insert((descriptor.app_id.clone(), var.to_owned(), origin.to_owned()));
        }
    }

    /// Remembers where an app's credential came from, for messages about it.
    fn note_source(&self, app_id: &str, source: String) {
        if let Ok(mut sources) = self.sources.lock() {
            sources.insert(app_id.to_owned(), source);
        }
    }

    /// Where the credential last used for `app_id` came from, and how to fix that source.
    pub fn source_of(&self, app_id: &str) -> Option<(String, String)> {
        let source = self.sources.lock().ok()?.get(app_id).cloned()?;
        let fix = if let Some(var) = source.strip_prefix("the environment variable ") {
            format!("set a valid key in {var} for the gateway")
        } else if source.starts_with("the credential store") {
            format!("store a valid key with `aai-gateway auth set {app_id}`")
        } else {
            format!("sign in again with `aai-gateway auth login {app_id}`")
        };
        Some((source, fix))
    }

    /// Takes back a binding allowed for one call.
    pub fn withdraw_env(&self, descriptor: &Descriptor, var: &str, origin: &str) {
        if let Ok(mut approved) = self.env_approved.lock() {
            approved.remove(&(descriptor.app_id.clone(), var.to_owned(), origin.to_owned()));
        }
    }

    fn env_allowed(&self, descriptor: &Descriptor, var: &str, origin: &str) -> bool {
        !descriptor.fetched
            || self.env_approved.lock().is_ok_and(|approved| {
                approved.contains(&(descriptor.app_id.clone(), var.to_owned(), origin.to_owned()))
            })
    }

    fn store_error(app_id: &str, message: impl std::fmt::Display) -> AaiError {
        AaiError::new(
            ErrorKind::AuthConfigInvalid,
            format!("{app_id}: the credential store: {message}"),
        )
    }

    /// The secret of an `api_key`/`bearer` app: its environment variable, else the store.
    /// Either goes only where the user meant it to: a variable to a descriptor from this
    /// machine or to the origin the user approved for a fetched one; a stored secret to the
    /// origin it was set up for.
    fn static_secret(
        &self,
        descriptor: &Descriptor,
        section: &WebSection,
        auth: &WebAuth,
    ) -> Result<String, AaiError> {
        let var = field(auth, "env_var");
        let origin = origin_of(&section.base_url).unwrap_or_default();
        if let Some(var) = var
            && self.env_allowed(descriptor, var, &origin)
            && let Some(secret) = std::env::var(var).ok().filter(|s| !s.is_empty())
        {
            self.note_source(
                &descriptor.app_id,
                format!("the environment variable {var}"),
            );
            return Ok(secret);
        }
        let app_id = &descriptor.app_id;
        let stored = self
            .store
            .get(app_id)
            .map_err(|m| Self::store_error(app_id, m))?;
        if stored.secret.is_some() {
            bound_here(descriptor, stored.origin.as_deref(), &origin, "stored key")?;
            self.note_source(
                &descriptor.app_id,
                format!(
                    "the credential store (`aai-gateway auth set {}`)",
                    descriptor.app_id
                ),
            );
        }
        stored.secret.ok_or_else(|| {
            let from_env = var.map_or_else(String::new, |v| format!("set the environment variable {v} for the gateway, or "));
            AaiError::new(
                ErrorKind::AuthConfigInvalid,
                format!("{app_id} needs an {} and none is set: {from_env}run `aai-gateway auth set {app_id}` to store one.", if auth.kind == "api_key" { "API key" } else { "access token" }),
            )
            .with_detail(json!({"env_var": var, "command": format!("aai-gateway auth set {app_id}")}))
        })
    }

    /// An OAuth access token: stored and fresh, refreshed, or an authorization to start.
    async fn oauth_token(
        &self,
        descriptor: &Descriptor,
        section: &WebSection,
        auth: &WebAuth,
    ) -> Result<String, AaiError> {
        let app_id = &descriptor.app_id;
        let stored = self
            .store
            .get(app_id)
            .map_err(|m| Self::store_error(app_id, m))?;
        if let Some(tokens) = stored.oauth {
            self.note_source(app_id, "the OAuth sign-in".to_owned());
            let api = origin_of(&section.base_url).unwrap_or_default();
            bound_here(
                descriptor,
                tokens.api_origin.as_deref(),
                &api,
                "OAuth access token",
            )?;
            let fresh = tokens
                .expires_at
                .is_none_or(|at| at > now() + REFRESH_EARLY);
            if fresh {
                return Ok(tokens.access_token);
            }
            if tokens.refresh_token.is_some() {
                return self.refresh_tokens(descriptor, auth, &tokens).await;
            }
        }
        Err(self.begin(descriptor, section, auth).await)
    }

    /// Exchanges the refresh token for new tokens and stores them.
    async fn refresh_tokens(
        &self,
        descriptor: &Descriptor,
        auth: &WebAuth,
        tokens: &Tokens,
    ) -> Result<String, AaiError> {
        let app_id = &descriptor.app_id;
        let token_url = field(auth, "token_url").unwrap_or_default();
        bound_here(
            descriptor,
            tokens.token_origin.as_deref(),
            &origin_of(token_url).unwrap_or_default(),
            "OAuth refresh token",
        )?;
        let refresh = tokens.refresh_token.clone().unwrap_or_default();
        let mut form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh.clone()),
        ];
        if let Some(client_id) = field(auth, "client_id") {
            form.push(("client_id", client_id.to_owned()));
        }
        let client = self
            .client
            .get()
            .map_err(|m| Self::store_error(app_id, m))?;
        match token_request(client, auth, &form).await {
            Ok(mut fresh) => {
                if fresh.refresh_token.is_none() {
                    fresh.refresh_token = Some(refresh);
                }
                fresh.api_origin.clone_from(&tokens.api_origin);
                fresh.token_origin.clone_from(&tokens.token_origin);
                let access = fresh.access_token.clone();
                let mut stored = self.store.get(app_id).unwrap_or_default();
                stored.oauth = Some(fresh);
                self.store
                    .put(app_id, &stored)
                    .map_err(|m| Self::store_error(app_id, m))?;
                tracing::info!(app = %app_id, "OAuth tokens refreshed");
                Ok(access)
            }
            Err(reason) => {
                tracing::info!(app = %app_id, %reason, "OAuth refresh failed; authorization needed again");
                // A refresh token the server calls invalid is dead: forget the tokens, so
                // nothing (not `auth status` either) treats them as usable.
                let dead = reason.is_invalid_grant();
                if dead {
                    let mut stored = self.store.get(app_id).unwrap_or_default();
                    stored.oauth = None;
                    let _ = self.store.put(app_id, &stored);
                }
                Err(AaiError::new(
                    ErrorKind::AuthExpired,
                    format!(
                        "{app_id}: the OAuth sign-in (from the credential store) expired and could not be renewed ({reason}){}. Sign in again with `aai-gateway auth login {app_id}` (or call again to be sent to the sign-in page).",
                        if dead { "; the dead tokens were removed" } else { "" }
                    ),
                )
                .with_detail(json!({"source": "oauth", "command": format!("aai-gateway auth login {app_id}"), "tokens_removed": dead})))
            }
        }
    }

    /// Starts (or reports) an authorization: AUTH_REQUIRED carrying the URL to open; the
    /// gateway listens for the redirect meanwhile.
    async fn begin(
        &self,
        descriptor: &Descriptor,
        section: &WebSection,
        auth: &WebAuth,
    ) -> AaiError {
        let app_id = descriptor.app_id.clone();
        if let Ok(flows) = self.flows.lock()
            && let Some(flow) = flows.get(&app_id)
            && !flow.finished.load(std::sync::atomic::Ordering::SeqCst)
            && flow.started.elapsed() < AUTHORIZATION_WAIT
        {
            return auth_required(&descriptor.name, &app_id, &flow.url, None);
        }
        let failure = self
            .flows
            .lock()
            .ok()
            .and_then(|mut flows| flows.remove(&app_id))
            .and_then(|flow| flow.failure.lock().ok().and_then(|f| f.clone()));
        match self.start_flow(descriptor, section, auth).await {
            Ok(url) => auth_required(&descriptor.name, &app_id, &url, failure.as_deref()),
            Err(error) => error,
        }
    }

    async fn start_flow(
        &self,
        descriptor: &Descriptor,
        section: &WebSection,
        auth: &WebAuth,
    ) -> Result<String, AaiError> {
        let app_id = descriptor.app_id.clone();
        let config_error = |what: &str| {
            AaiError::new(
                ErrorKind::AuthConfigInvalid,
                format!("{app_id}: auth of type oauth2 needs `{what}` in its descriptor"),
            )
        };
        let auth_url = field(auth, "auth_url").ok_or_else(|| config_error("auth_url"))?;
        field(auth, "token_url").ok_or_else(|| config_error("token_url"))?;
        let client_id = field(auth, "client_id").ok_or_else(|| config_error("client_id"))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| {
                AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!("cannot listen on 127.0.0.1 for the OAuth redirect: {e}"),
                )
            })?;
        let bound = listener.local_addr().ok();
        let port = bound.map(|a| a.port()).unwrap_or_default();
        // The agent's browser must not deliver a sign-in it started itself.
        let own = bound.map(aai_contain::own_listeners::register);
        let redirect_uri = format!("http://127.0.0.1:{port}/callback");
        let verifier = random_token()?;
        let state = random_token()?;
        let scopes = scopes(auth);
        let mut url =
            reqwest::Url::parse(auth_url).map_err(|_| config_error("a valid auth_url"))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("state", &state)
            .append_pair("code_challenge", &code_challenge(&verifier))
            .append_pair("code_challenge_method", "S256");
        if !scopes.is_empty() {
            url.query_pairs_mut().append_pair("scope", &scopes);
        }
        let url = url.to_string();
        let failure = Arc::new(Mutex::new(None));
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let exchange = Exchange {
            client: self.client.clone(),
            store: self.store.clone(),
            auth: auth.clone(),
            app_id: app_id.clone(),
            redirect_uri,
            verifier,
            state,
            client_id: client_id.to_owned(),
            api_origin: origin_of(&section.base_url),
            token_origin: field(auth, "token_url").and_then(origin_of),
        };
        let (fail, done) = (failure.clone(), finished.clone());
        tokio::spawn(async move {
            let _own = own;
            let outcome = tokio::time::timeout(AUTHORIZATION_WAIT, exchange.wait(listener)).await;
            let reason = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(reason)) => Some(reason.to_string()),
                Err(_) => Some("nobody completed the authorization within 10 minutes".into()),
            };
            if let Some(reason) = reason {
                tracing::info!(app = %exchange.app_id, %reason, "OAuth authorization did not complete");
                if let Ok(mut f) = fail.lock() {
                    *f = Some(reason);
                }
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        if let Ok(mut flows) = self.flows.lock() {
            flows.insert(
                app_id.clone(),
                Flow {
                    url: url.clone(),
                    started: Instant::now(),
                    failure,
                    finished,
                },
            );
        }
        if self.open_browser {
            open_browser(&url);
        }
        tracing::info!(app = %app_id, "OAuth authorization started; waiting for the redirect on 127.0.0.1:{port}");
        Ok(url)
    }

    /// Waits (at most `limit`) for the authorization of `app_id` under way to finish; true
    /// when tokens arrived.
    pub async fn wait_for_authorization(&self, app_id: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.store.get(app_id).is_ok_and(|s| s.oauth.is_some()) {
                return true;
            }
            let finished = self.flows.lock().map_or(true, |flows| {
                flows
                    .get(app_id)
                    .is_none_or(|f| f.finished.load(std::sync::atomic::Ordering::SeqCst))
            });
            if finished || Instant::now() >= deadline {
                return self.store.get(app_id).is_ok_and(|s| s.oauth.is_some());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Forgets a pending authorization (after `auth logout`).
    pub fn forget(&self, app_id: &str) {
        if let Ok(mut flows) = self.flows.lock() {
            flows.remove(app_id);
        }
    }
}

fn auth_required(name: &str, app_id: &str, url: &str, failure: Option<&str>) -> AaiError {
    let before = failure.map_or_else(String::new, |f| format!("The last attempt failed ({f}). "));
    AaiError::new(
        ErrorKind::AuthRequired,
        format!(
            "{before}{name} needs the user's authorization. Ask the user to open {url} and approve access; the gateway waits for the browser to come back for 10 minutes. Then call again."
        ),
    )
    .with_detail(json!({"authorization_url": url, "app": app_id}))
}

/// Opens `url` in the user's browser when there is a desktop to show it on.
fn open_browser(url: &str) {
    let (program, args): (&str, Vec<&str>) = if cfg!(target_os = "macos") {
        ("open", vec![url])
    } else if cfg!(windows) {
        ("rundll32", vec!["url.dll,FileProtocolHandler", url])
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        ("xdg-open", vec![url])
    } else {
        return;
    };
    let spawned = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(error) = spawned {
        tracing::debug!(%error, program, "cannot open a browser");
    }
}

/// The redirect side of one authorization.
struct Exchange {
    client: aai_executor::HttpClient,
    store: Store,
    auth: WebAuth,
    app_id: String,
    redirect_uri: String,
    verifier: String,
    state: String,
    client_id: String,
    /// Where the tokens may go: the API and the token endpoint the user signed in for.
    api_origin: Option<String>,
    token_origin: Option<String>,
}

impl Exchange {
    /// Serves the loopback redirect until a request with our `state` arrives, then exchanges
    /// its code for tokens.
    async fn wait(&self, listener: tokio::net::TcpListener) -> Result<(), ExchangeError> {
        loop {
            let (mut stream, _) = listener.accept().await.map_err(ExchangeError::Accept)?;
            let Ok(Some(target)) =
                tokio::time::timeout(Duration::from_secs(10), request_target(&mut stream)).await
            else {
                continue;
            };
            let query = target.split_once('?').map_or("", |(_, q)| q);
            let params: HashMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect();
            if params.get("state") != Some(&self.state) {
                reply(
                    &mut stream,
                    400,
                    "This is not the authorization aai-gateway is waiting for.",
                )
                .await;
                continue;
            }
            if let Some(error) = params.get("error") {
                reply(
                    &mut stream,
                    200,
                    "Authorization was declined. You can close this window.",
                )
                .await;
                return Err(ExchangeError::Declined(error.clone()));
            }
            let Some(code) = params.get("code") else {
                reply(&mut stream, 400, "The redirect carries no code.").await;
                continue;
            };
            let form = vec![
                ("grant_type", "authorization_code".to_owned()),
                ("code", code.clone()),
                ("redirect_uri", self.redirect_uri.clone()),
                ("client_id", self.client_id.clone()),
                ("code_verifier", self.verifier.clone()),
            ];
            let client = self.client.get()?;
            return match token_request(client, &self.auth, &form).await {
                Ok(mut tokens) => {
                    tokens.api_origin.clone_from(&self.api_origin);
                    tokens.token_origin.clone_from(&self.token_origin);
                    let mut stored = self.store.get(&self.app_id).unwrap_or_default();
                    stored.oauth = Some(tokens);
                    let saved = self.store.put(&self.app_id, &stored);
                    match saved {
                        Ok(()) => {
                            reply(&mut stream, 200, "aai-gateway is authorized. You can close this window and return to your agent.").await;
                            tracing::info!(app = %self.app_id, "OAuth authorization complete");
                            Ok(())
                        }
                        Err(error) => {
                            reply(
                                &mut stream,
                                500,
                                "The tokens could not be stored; see the gateway's log.",
                            )
                            .await;
                            Err(ExchangeError::Store(error))
                        }
                    }
                }
                Err(reason) => {
                    reply(
                        &mut stream,
                        502,
                        "The token exchange failed; see the gateway's log.",
                    )
                    .await;
                    Err(ExchangeError::Token(reason))
                }
            };
        }
    }
}

/// Why an authorization did not complete; the user reads it with `auth status`.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    #[error("{0}")]
    Accept(std::io::Error),
    #[error("the authorization server answered `{0}`")]
    Declined(String),
    #[error(transparent)]
    Https(#[from] aai_executor::HttpsSetupError),
    #[error(transparent)]
    Token(TokenError),
    #[error(transparent)]
    Store(super::credentials::CredentialError),
}

/// The request target of an HTTP/1 request (`/callback?code=…`), read from at most 8 KiB;
/// `None` when the connection broke or did not carry a GET.
async fn request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buffer.len() > 8192 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buffer);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Some(target.to_owned()),
        _ => None,
    }
}

async fn reply(stream: &mut tokio::net::TcpStream, status: u16, text: &str) {
    let body =
        format!("<!doctype html><meta charset=utf-8><title>aai-gateway</title><p>{text}</p>");
    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        if status == 200 { "OK" } else { "Error" },
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Why a token endpoint request failed (never a secret).
#[derive(Debug, thiserror::Error)]
enum TokenError {
    #[error("no token_url")]
    NoTokenUrl,
    #[error("the token endpoint cannot be reached: {0}")]
    Unreachable(reqwest::Error),
    #[error("the token endpoint answered HTTP {status} ({code})")]
    Answered { status: u16, code: String },
    #[error("the token endpoint's answer has no access_token")]
    NoAccessToken,
}

impl TokenError {
    /// The server calls the grant (a refresh token) invalid: it is dead.
    fn is_invalid_grant(&self) -> bool {
        matches!(self, Self::Answered { code, .. } if code == "invalid_grant")
    }
}

/// A token endpoint request (RFC 6749 §4.1.3, §6).
async fn token_request(
    client: &reqwest::Client,
    auth: &WebAuth,
    form: &[(&str, String)],
) -> Result<Tokens, TokenError> {
    let token_url = field(auth, "token_url").ok_or(TokenError::NoTokenUrl)?;
    let body: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let response = client
        .post(token_url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .timeout(Duration::from_secs(30))
        .body(body)
        .send()
        .await
        .map_err(|e| TokenError::Unreachable(e.without_url()))?;
    let status = response.status();
    let bytes = response.bytes().await.unwrap_or_default();
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        let code = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no error code");
        return Err(TokenError::Answered {
            status: status.as_u16(),
            code: code.to_owned(),
        });
    }
    let access_token = value
        .get("access_token")
        .and_then(Value::as_str)
        .ok_or(TokenError::NoAccessToken)?
        .to_owned();
    Ok(Tokens {
        access_token,
        refresh_token: value
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_owned),
        expires_at: value
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| now() + s),
        scope: value
            .get("scope")
            .and_then(Value::as_str)
            .map(str::to_owned),
        api_origin: None,
        token_origin: None,
    })
}

/// Whether a credential bound to `bound` (`None`: stored before bindings existed) may go to
/// `origin` for `descriptor`; AUTH_CONFIG_INVALID naming both when not.
fn bound_here(
    descriptor: &Descriptor,
    bound: Option<&str>,
    origin: &str,
    what: &str,
) -> Result<(), AaiError> {
    let app_id = &descriptor.app_id;
    match bound {
        Some(bound) if bound == origin => Ok(()),
        None if !descriptor.fetched => Ok(()),
        _ => Err(AaiError::new(
            ErrorKind::AuthConfigInvalid,
            format!(
                "{app_id}: the {what} was set up for {} and this descriptor would send it to {origin}; it was not sent. If {origin} is right, run `aai-gateway auth logout {app_id}` and set it up again for it.",
                bound.unwrap_or("an app installed on this machine")
            ),
        )
        .with_detail(json!({"reason": "credential_bound_elsewhere", "bound_to": bound, "origin": origin}))),
    }
}

impl Auth for GatewayAuth {
    fn source(&self, descriptor: &Descriptor) -> Option<(String, String)> {
        self.source_of(&descriptor.app_id)
    }

    fn signed_in(&self, descriptor: &Descriptor, section: &WebSection) -> bool {
        section.auth.as_ref().is_none_or(|a| a.kind != "oauth2")
            || self
                .store
                .get(&descriptor.app_id)
                .is_ok_and(|s| s.oauth.is_some())
    }

    fn credential<'a>(
        &'a self,
        descriptor: &'a Descriptor,
        section: &'a WebSection,
    ) -> BoxFuture<'a, Result<Option<Credential>, AaiError>> {
        Box::pin(async move {
            let Some(auth) = &section.auth else {
                return Ok(None);
            };
            let secret = match auth.kind.as_str() {
                "none" => return Ok(None),
                "oauth2" => self.oauth_token(descriptor, section, auth).await?,
                _ => self.static_secret(descriptor, section, auth)?,
            };
            Ok(Some(credential_for(auth, secret)))
        })
    }

    fn refresh<'a>(
        &'a self,
        descriptor: &'a Descriptor,
        section: &'a WebSection,
    ) -> BoxFuture<'a, Result<Option<Credential>, AaiError>> {
        Box::pin(async move {
            let Some(auth) = section.auth.as_ref().filter(|a| a.kind == "oauth2") else {
                return Ok(None);
            };
            let stored = self.store.get(&descriptor.app_id).unwrap_or_default();
            let Some(tokens) = stored.oauth.filter(|t| t.refresh_token.is_some()) else {
                return Ok(None);
            };
            match self.refresh_tokens(descriptor, auth, &tokens).await {
                Ok(access) => Ok(Some(credential_for(auth, access))),
                Err(_) => Ok(None),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_matches_rfc_7636() {
        // RFC 7636 appendix B.
        assert_eq!(
            code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }
}
