//! The daemon's HTTP front: MCP Streamable HTTP at `/mcp` (rmcp's server transport, both
//! protocol eras) and the control endpoints, on loopback only.
//!
//! Every request passes one guard before anything else reads it: the `Host` must name this
//! listener (DNS rebinding), an `Origin`, when a browser sends one, must be this origin, and
//! the credential must fit the path (compared in constant time): the MCP bearer token opens
//! `/mcp` only; the control credential ([`aai_engine::control`]) the control endpoints that answer,
//! resume or log in; stopping and the status are open to every local caller (stopping is
//! always safe). Only then is the caller's own token bucket charged, so an unauthenticated
//! flood costs nobody else's rate. Bodies are bounded by `max_request_bytes`; session ids are
//! rmcp's random UUIDs.
//!
//! Connections are served by hand (not `axum::serve`) so that a connection that has not sent
//! a complete request head within [`HEAD_TIMEOUT`] is closed, answers to unauthenticated
//! requests close their connection, and the number of open connections stays below the
//! descriptor limit (raised at start) with a reserve for everything else.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::control::Control;
use super::dashboard;
use super::logins::Logins;
use super::reply::{json_response, refuse};
use super::sessions::Sessions;
use crate::mcp::AaiServer;
use aai_contain::own_files::{new_token, same_secret};
use aai_engine::pipeline::Gateway;
use aai_engine::runfiles::{RuntimeFiles, ServeInfo};

/// Requests per second a client may send on average, and the burst it may send at once.
const RATE_PER_SECOND: f64 = 200.0;
const RATE_BURST: f64 = 400.0;

/// How long a connection may take to send a complete request head (and how long it may sit
/// idle between requests) before it is closed.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest request head (request line and headers) read.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Descriptors kept free of connections, for the database, logs, child processes and pipes.
const FD_RESERVE: u64 = 256;
/// Open connections at most, however high the descriptor limit.
const MAX_CONNECTIONS: u64 = 4096;

/// Who a request comes from, as far as its credential says: each has its own token bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Principal {
    /// The MCP bearer token (agents' clients, the stdio forwarder).
    Mcp,
    /// A scheduled task's run token.
    Task,
    /// The control credential (the person's command line).
    Control,
    /// A logged-in dashboard session.
    Dashboard,
    /// No credential: the status, the login page (stopping takes no bucket at all).
    Open,
}

const PRINCIPALS: usize = 5;

impl Principal {
    fn index(self) -> usize {
        self as usize
    }
}

/// What the guard checks requests against.
struct Guard {
    token: String,
    /// The control credential (`run/control`).
    control: String,
    /// `Host` values that name this listener.
    hosts: Vec<String>,
    /// `Origin` values of this listener (the dashboard's own pages).
    origins: Vec<String>,
    /// The largest request body taken (`max_request_bytes`); rmcp also counts while reading.
    max_body: usize,
    buckets: [Mutex<Bucket>; PRINCIPALS],
    /// The dashboard's sessions (its pages and API take a session cookie, not the token).
    logins: Arc<Logins>,
    gateway: Arc<Gateway>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * RATE_PER_SECOND;
        self.tokens = (self.tokens + refill).min(RATE_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A running daemon's listener: where it is, and how to stop it.
pub struct Listening {
    pub url: String,
    pub done: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Binds `listen` (loopback only), writes the runtime files under `home` and serves until
/// `cancel` fires; the runtime files are removed when serving ends.
///
/// # Errors
/// The address is not loopback, cannot be bound, or the runtime files cannot be written.
pub async fn serve(
    gateway: Arc<Gateway>,
    home: &Path,
    listen: &str,
    cancel: CancellationToken,
) -> anyhow::Result<Listening> {
    let addr: SocketAddr = listen
        .parse()
        .with_context(|| format!("--listen {listen:?} is not an address like 127.0.0.1:7377"))?;
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "--listen {addr}: the gateway serves on loopback only (127.0.0.1 or [::1]); it runs your apps and must not be reachable from the network"
    );
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr} (is another gateway running? `aai-gateway status`; or pick a port with --listen 127.0.0.1:PORT, 0 for any)")
    })?;
    let addr = listener.local_addr()?;
    // The agent's tools (its browser) never connect to the gateway's own listener.
    let own = aai_contain::own_listeners::register(addr);
    let port = addr.port();
    let token = new_token();
    let control_credential = aai_engine::control::credential(home)
        .with_context(|| "cannot make the control credential".to_owned())?;
    let host = if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    let url = format!("http://{host}:{port}/mcp");
    let files = RuntimeFiles::write(
        home,
        &ServeInfo {
            url: url.clone(),
            pid: std::process::id(),
        },
        &token,
    )
    .with_context(|| {
        format!(
            "cannot write the runtime files under {}",
            home.join("run").display()
        )
    })?;
    let hosts = vec![
        format!("{host}:{port}"),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    let origins = vec![
        format!("http://{host}:{port}"),
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
    ];
    let max_request_bytes = gateway.config().max_request_bytes;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(max_request_bytes)
        .with_cancellation_token(cancel.child_token());
    let factory_gateway = gateway.clone();
    let limits_gateway = gateway.clone();
    let sessions = Arc::new(Sessions::new(Arc::new(move || {
        limits_gateway.config().sessions.clone()
    })));
    tokio::spawn(super::sessions::reap(
        sessions.clone(),
        cancel.child_token(),
    ));
    let mcp = StreamableHttpService::new(
        move || Ok(AaiServer::new(factory_gateway.clone()).with_change_notifications()),
        sessions.clone(),
        config,
    );
    let logins = Arc::new(Logins::default());
    let guard = Arc::new(Guard {
        token,
        control: control_credential,
        hosts,
        origins: origins.clone(),
        max_body: max_request_bytes,
        buckets: std::array::from_fn(|_| {
            Mutex::new(Bucket {
                tokens: RATE_BURST,
                at: Instant::now(),
            })
        }),
        logins: logins.clone(),
        gateway: gateway.clone(),
    });
    let control = Control {
        gateway: gateway.clone(),
        cancel: cancel.clone(),
        logins,
        base: format!("http://{host}:{port}"),
        stopping: Arc::default(),
        sessions,
    };
    let mcp =
        Router::new()
            .route_service("/mcp", mcp)
            .route_layer(axum::middleware::from_fn_with_state(
                super::ids::InFlight::default(),
                super::ids::one_answer_per_id,
            ));
    let app = Router::new()
        .merge(mcp)
        .route("/control/stop", axum::routing::post(stop))
        .route("/control/resume", axum::routing::post(resume))
        .route("/control/status", axum::routing::get(status))
        .route("/control/shutdown", axum::routing::post(shutdown))
        .route("/control/approvals", axum::routing::get(approvals))
        .route("/control/approvals/answer", axum::routing::post(answer))
        .route("/control/login", axum::routing::post(login))
        .merge(dashboard::routes())
        .with_state(control)
        .layer(axum::middleware::from_fn_with_state(guard, check));
    if let Some(tasks) = gateway.tasks() {
        tasks.serve_at(&url);
    }
    tracing::info!(%url, "aai-gateway serving MCP over Streamable HTTP");
    let done = tokio::spawn(async move {
        let (_files, _own) = (files, own);
        accept(listener, app, cancel).await;
        Ok(())
    });
    Ok(Listening { url, done })
}

/// Raises this process's open-file limit to its hard limit; the connections it may hold.
fn connection_budget() -> u64 {
    #[cfg(unix)]
    {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let raised = if hard > soft && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            };
            return raised.saturating_sub(FD_RESERVE).clamp(16, MAX_CONNECTIONS);
        }
    }
    1024 - FD_RESERVE
}

/// Accepts connections until `cancel` fires, each served on its own task within the budget;
/// then lets the open ones finish their requests (at most a few seconds).
///
/// When every slot is taken, the oldest connection that has not yet sent a request head makes
/// room for the new one: a flood of silent connections cannot keep a client out (its own
/// connection speaks at once), and nothing that is being answered is cut.
async fn accept(listener: tokio::net::TcpListener, app: Router, cancel: CancellationToken) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let budget = connection_budget();
    tracing::debug!(budget, "connections the daemon holds at most");
    let slots = Arc::new(tokio::sync::Semaphore::new(
        usize::try_from(budget).unwrap_or(1024),
    ));
    let silent = Arc::new(Silent::default());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        // A request head larger than this is refused (hyper's default of ~400 KB let each
        // of many connections hold that much before its head was complete).
        .max_buf_size(MAX_HEAD_BYTES);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = cancel.cancelled() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(error) => {
                // Out of descriptors (or another passing error): back off a moment instead of
                // spinning; connections that time out free theirs.
                tracing::debug!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) if silent.evict_oldest() => {
                // The evicted connection's task drops it and gives its slot back.
                match tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned()).await {
                    Ok(Ok(slot)) => slot,
                    _ => continue,
                }
            }
            // Full of connections that are being answered: closed at once rather than left
            // waiting in the backlog.
            Err(_) => continue,
        };
        // Small frames (an SSE event, a JSON-RPC answer) go out at once: without TCP_NODELAY,
        // Nagle's algorithm and the peer's delayed ACK hold each one back ~40 ms.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let this = silent.enter();
        let service = Spoken {
            inner: hyper_util::service::TowerToHyperService::new(app.clone()),
            connection: this.clone(),
        };
        let connection = builder.serve_connection(TokioIo::new(tcp), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => {
                    if let Err(error) = ended {
                        tracing::trace!(%error, "connection ended");
                    }
                }
                () = this.evicted.cancelled() => tracing::trace!("silent connection evicted"),
            }
            this.ended.store(true, std::sync::atomic::Ordering::Relaxed);
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(HEAD_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("connections still open at shutdown were dropped");
    }
}

/// How long a new connection waits for the slot of the connection it evicted.
const EVICTION_WAIT: Duration = Duration::from_millis(200);

/// One accepted connection, as the eviction sees it.
#[derive(Default)]
struct Connection {
    /// It has sent a request head: it is a client, not a silent holder of a slot.
    spoken: std::sync::atomic::AtomicBool,
    /// Its task has ended.
    ended: std::sync::atomic::AtomicBool,
    evicted: CancellationToken,
}

/// The connections that may have sent nothing yet, oldest first.
#[derive(Default)]
struct Silent(Mutex<std::collections::VecDeque<Arc<Connection>>>);

impl Silent {
    fn enter(&self) -> Arc<Connection> {
        use std::sync::atomic::Ordering::Relaxed;
        let connection = Arc::new(Connection::default());
        let mut queue = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if queue.len() >= queue.capacity().max(64) {
            queue.retain(|c| !c.spoken.load(Relaxed) && !c.ended.load(Relaxed));
        }
        queue.push_back(connection.clone());
        connection
    }

    /// Closes the oldest connection that has sent no request head; false when there is none.
    fn evict_oldest(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let mut queue = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(connection) = queue.pop_front() {
            if !connection.spoken.load(Relaxed) && !connection.ended.load(Relaxed) {
                connection.evicted.cancel();
                return true;
            }
        }
        false
    }
}

/// The connection's service, marking it as spoken at its first request head.
#[derive(Clone)]
struct Spoken<S> {
    inner: S,
    connection: Arc<Connection>,
}

impl<S, B> hyper::service::Service<hyper::Request<B>> for Spoken<S>
where
    S: hyper::service::Service<hyper::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, request: hyper::Request<B>) -> Self::Future {
        self.connection
            .spoken
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner.call(request)
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let (principal, refusal) = judge(
        &guard,
        request.method(),
        request.uri().path(),
        request.uri().query(),
        request.headers(),
    );
    match refusal {
        None => {
            // The body is read whole here, within the same time a head gets: a request whose
            // body trickles (or never comes) cannot hold its connection, token or not.
            let request = match whole_body(request, guard.max_body).await {
                Ok(request) => request,
                Err(mut refusal) => {
                    refusal
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                    return refusal;
                }
            };
            let mut response = next.run(request).await;
            if principal == Principal::Open {
                // Unauthenticated callers do not keep connections open between requests.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
        Some(mut refusal) => {
            // The body was never read: the connection cannot carry another request, so the
            // client is told to open a new one instead of finding this one closed under it.
            refusal
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            refusal
        }
    }
}

/// `request` with its body read whole (at most `max` bytes, within [`HEAD_TIMEOUT`]).
async fn whole_body(request: Request, max: usize) -> Result<Request, Response> {
    use axum::body::HttpBody as _;
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return Ok(Request::from_parts(parts, body));
    }
    match tokio::time::timeout(HEAD_TIMEOUT, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Err(_)) => Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the request body is larger than max_request_bytes ({max} bytes) or broken"),
        )),
        Err(_) => Err(refuse(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )),
    }
}

/// What a path needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// The MCP token (or a scheduled run's).
    Mcp,
    /// The control credential.
    Control,
    /// Nothing: stopping (no bucket either).
    Stop,
    /// Nothing, or any credential (it then counts in that caller's bucket): the status.
    Status,
    /// A dashboard session (the dashboard checks it).
    Dashboard,
}

fn needs(path: &str) -> Needs {
    match path {
        "/control/stop" => Needs::Stop,
        "/control/status" => Needs::Status,
        _ if path == "/mcp" || path.starts_with("/mcp/") => Needs::Mcp,
        _ if path.starts_with("/control/") => Needs::Control,
        _ => Needs::Dashboard,
    }
}

/// The guard's checks, in order: who the caller is, and the refusal to send, if any. Nothing
/// shared (a token bucket) is charged before the credential is checked.
fn judge(
    guard: &Guard,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> (Principal, Option<Response>) {
    let host = header_str(headers, header::HOST).unwrap_or_default();
    if !guard.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return (
            Principal::Open,
            Some(refuse(
                StatusCode::FORBIDDEN,
                "this gateway answers only requests addressed to its own loopback address (Host header)",
            )),
        );
    }
    // The login page `aai-gateway dashboard` writes is a local file (`Origin: null`) posting
    // its one-time code; the code is the credential there, whoever's page sends it.
    let login = path == "/login";
    if let Some(origin) = header_str(headers, header::ORIGIN)
        && !login
        && !guard.origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    {
        return (
            Principal::Open,
            Some(refuse(
                StatusCode::FORBIDDEN,
                "requests from other web pages are refused (Origin header)",
            )),
        );
    }
    let presented = header_str(headers, header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .trim();
    let is_mcp = same_secret(presented.as_bytes(), guard.token.as_bytes());
    let is_control = same_secret(presented.as_bytes(), guard.control.as_bytes());
    let principal = match needs(path) {
        Needs::Stop => return (Principal::Open, None),
        Needs::Status if is_control => Principal::Control,
        Needs::Status if is_mcp => Principal::Mcp,
        Needs::Status => Principal::Open,
        Needs::Mcp if is_mcp => Principal::Mcp,
        // An agent a scheduled task started may reach MCP (nothing else) with its run's token
        // while the run lasts.
        Needs::Mcp
            if !presented.is_empty()
                && guard
                    .gateway
                    .tasks()
                    .is_some_and(|tasks| tasks.token(presented).is_some()) =>
        {
            Principal::Task
        }
        Needs::Mcp => {
            return (
                Principal::Open,
                Some(refuse(
                    StatusCode::UNAUTHORIZED,
                    "a bearer token is required: it is in AAI_HOME/run/token (run MCP clients through `aai-gateway`, which forwards to this daemon with it)",
                )),
            );
        }
        Needs::Control if is_control => Principal::Control,
        Needs::Control => {
            return (
                Principal::Open,
                Some(refuse(
                    StatusCode::UNAUTHORIZED,
                    "this control answers approvals, resumes or logs in, which only the person may do: it takes the control credential (AAI_HOME/run/control), not the MCP token; run `aai-gateway` on the command line yourself",
                )),
            );
        }
        // A login is a single-use code's check, cheap and unguessable: like the stop it takes
        // no bucket, so a flood cannot keep the person out of their dashboard.
        Needs::Dashboard if path == "/login" => return (Principal::Open, None),
        Needs::Dashboard => {
            if let Some(refusal) =
                guard
                    .logins
                    .refusal(method, path, query, headers, &guard.origins)
            {
                return (Principal::Open, Some(refusal));
            }
            Principal::Dashboard
        }
    };
    let allowed = guard.buckets[principal.index()]
        .lock()
        .map(|mut b| b.take())
        .unwrap_or(true);
    if !allowed {
        let mut response = refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests: slow down and retry in a second",
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return (principal, Some(response));
    }
    let declared =
        header_str(headers, header::CONTENT_LENGTH).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > guard.max_body) {
        return (
            principal,
            Some(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the request is larger than max_request_bytes ({} bytes)",
                    guard.max_body
                ),
            )),
        );
    }
    (principal, None)
}

/// Open to every local caller: stopping is always safe. One stop runs at a time; callers that
/// come while it runs are told it is on (a flood of stops costs one kill pass, not many).
async fn stop(State(control): State<Control>, body: Body) -> Response {
    let bytes = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let reason: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let by: String = reason["by"]
        .as_str()
        .unwrap_or("aai-gateway stop")
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    let Ok(_only) = control.stopping.try_lock() else {
        control.gateway.stop().trip(&by);
        return json_response(
            &json!({"stopped": true, "already": true, "killed": 0, "input_released": 0, "took_ms": 0}),
        );
    };
    let report = control.gateway.emergency_stop(&by).await;
    json_response(&report)
}

async fn resume(State(control): State<Control>) -> Response {
    let resumed = control.gateway.resume("aai-gateway resume");
    json_response(&json!({"resumed": resumed}))
}

async fn status(State(control): State<Control>) -> Response {
    json_response(&json!({
        "stopped": control.gateway.stop().is_stopped(),
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
        "sessions": control.sessions.count(),
        "config_problem": control.gateway.live().problem(),
    }))
}

async fn approvals(State(control): State<Control>) -> Response {
    json_response(&json!({"pending": control.gateway.approvals().list()}))
}

async fn answer(State(control): State<Control>, body: Body) -> Response {
    let bytes = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let request: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let (Some(id), Some(key)) = (request["id"].as_str(), request["answer"].as_str()) else {
        return refuse(StatusCode::BAD_REQUEST, "send {\"id\", \"answer\"}");
    };
    match control.gateway.approvals().answer(id, key) {
        Ok(()) => json_response(&json!({"answered": id, "answer": key})),
        Err(error) => refuse(StatusCode::CONFLICT, &error.to_string()),
    }
}

/// A one-time dashboard login link (`aai-gateway dashboard`).
async fn login(State(control): State<Control>) -> Response {
    json_response(&json!({"url": dashboard::login_link(&control)}))
}

async fn shutdown(State(control): State<Control>) -> Response {
    control.cancel.cancel();
    (StatusCode::ACCEPTED, "shutting down").into_response()
}

/// How long `aai-gateway stop` waits for the daemon's answer.
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_needs_its_own_credential() {
        for (path, want) in [
            ("/mcp", Needs::Mcp),
            ("/mcp/anything", Needs::Mcp),
            ("/control/stop", Needs::Stop),
            ("/control/status", Needs::Status),
            ("/control/approvals", Needs::Control),
            ("/control/approvals/answer", Needs::Control),
            ("/control/login", Needs::Control),
            ("/control/resume", Needs::Control),
            ("/control/shutdown", Needs::Control),
            ("/control/stop/../resume", Needs::Control),
            ("/control/", Needs::Control),
            ("/", Needs::Dashboard),
            ("/api/approvals/answer", Needs::Dashboard),
            ("/mcpx", Needs::Dashboard),
        ] {
            assert_eq!(needs(path), want, "{path}");
        }
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let mut bucket = Bucket {
            tokens: RATE_BURST,
            at: Instant::now(),
        };
        let burst = (0..10_000).take_while(|_| bucket.take()).count();
        // The burst, plus what refilled while it was taken.
        assert!((400..=420).contains(&burst), "{burst}");
        assert!(!bucket.take());
        bucket.at -= Duration::from_millis(100);
        let refilled = (0..10_000).take_while(|_| bucket.take()).count();
        assert!((19..=25).contains(&refilled), "{refilled}");
    }
}
