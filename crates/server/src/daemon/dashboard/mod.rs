//! The dashboard: one page on the daemon's own origin where the user watches every call as it
//! happens, searches and verifies the audit log, answers the approval queue, revokes grants,
//! turns toolsets on and off, gives clients their policy profile, and presses the emergency
//! stop.
//!
//! Getting in: `aai-gateway dashboard` asks the daemon (with the bearer token) for a one-time
//! login link; opening it trades the code for a session cookie (`HttpOnly`,
//! `SameSite=Strict`). Every change is a `POST` that must carry the session's CSRF token in a
//! header and an `Origin` of this listener. The assets are compiled in, served under a
//! Content-Security-Policy that allows nothing but this origin's own script and style, and the
//! page builds everything it shows as text nodes: what agents send is shown, never run.

pub mod settings;

use std::collections::HashMap;
use std::convert::Infallible;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::control::Control;
pub use super::logins::CSRF_HEADER;
use super::logins::{COOKIE, SESSION_LIFETIME};
use super::reply::{json_response, refuse};
use aai_engine::feed::Event;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS_SOURCE: &str = include_str!("assets/app.js");
/// The page's script, its class of hidden characters made from the sanitizer's own table.
static APP_JS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let class: String = aai_descriptor::visible::HIDDEN
        .iter()
        .map(|(first, last)| {
            format!(
                "\\u{{{:x}}}-\\u{{{:x}}}",
                u32::from(*first),
                u32::from(*last)
            )
        })
        .collect();
    APP_JS_SOURCE.replace("__AAI_HIDDEN__", &class)
});
const APP_CSS: &str = include_str!("assets/app.css");

/// Rows the page starts with, and the most one history page holds.
const RECENT_ROWS: i64 = 50;
const MAX_PAGE: i64 = 500;

/// What the page may load and do: its own script, style and requests, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The dashboard's routes.
pub(crate) fn routes() -> Router<Control> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS.as_str()) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/login", get(login).post(login))
        .route("/api/state", get(state))
        .route("/api/events", get(events))
        .route("/api/audit", get(audit))
        .route("/api/audit/verify", get(verify))
        .route("/api/approvals/answer", post(answer))
        .route("/api/grants/revoke", post(revoke))
        .route("/api/stop", post(stop))
        .route("/api/resume", post(resume))
        .route("/api/toolsets", post(toolset))
        .route("/api/profile", post(profile))
        .route("/api/schedules/enable", post(schedule_enable))
        .route("/api/schedules/run", post(schedule_run))
        .layer(axum::middleware::map_response(protect))
}

/// The headers every dashboard response carries.
async fn protect(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        header::HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
    response
}

fn asset(kind: &'static str, text: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], text).into_response()
}

/// The link that logs a browser in once.
pub(crate) fn login_link(control: &Control) -> String {
    format!("{}/login?code={}", control.base, control.logins.mint())
}

fn query(uri: &Uri) -> HashMap<String, String> {
    url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// Trades a one-time code — in the query, or in a form posted by the login page
/// `aai-gateway dashboard` writes (so the code is in no URL and no process's arguments) — for
/// a session: the cookie, and the session's key in the redirect's fragment (never sent to a
/// server, read once by the page).
async fn login(State(control): State<Control>, uri: Uri, body: axum::body::Body) -> Response {
    let form = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let code = url::form_urlencoded::parse(&form)
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .or_else(|| query(&uri).remove("code"))
        .unwrap_or_default();
    let Some((session, key)) = control.logins.redeem(&code) else {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "This login link was used already or has expired. Run `aai-gateway dashboard` for a new one.\n",
        )
            .into_response();
    };
    let cookie = format!(
        "{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        SESSION_LIFETIME.as_secs()
    );
    let location = format!("/#k={key}");
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Everything the page shows when it loads.
async fn state(State(control): State<Control>) -> Response {
    let gateway = &control.gateway;
    let grants = gateway.gate().grants().map_err(|e| e.message);
    let (recent, mut clients) = match gateway.gate().log() {
        Ok(store) => (
            store.0.search(None, None, RECENT_ROWS).unwrap_or_default(),
            store.0.callers().unwrap_or_default(),
        ),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let policy = gateway.policy_config();
    clients.extend(policy.rules.iter().filter_map(|r| r.client.clone()));
    clients.sort_by_key(|c| c.to_lowercase());
    clients.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    clients.retain(|c| c != "aai-gateway stop" && !c.starts_with("dashboard"));
    let clients: Vec<Value> = clients
        .iter()
        .map(|c| json!({"name": c, "profile": policy.profile_for(c, &[]).0}))
        .collect();
    json_response(&json!({
        "stopped": gateway.stop().is_stopped(),
        "pending": gateway.approvals().list(),
        "grants": grants.unwrap_or_default(),
        "recent": recent,
        "clients": clients,
        "default_profile": policy.default_profile,
        "profiles": settings::profiles(gateway),
        "toolsets": settings::toolsets(gateway),
        "mcp_servers": gateway.executors().mcp().map(|m| m.states()).unwrap_or_else(|| json!([])),
        "config_problem": gateway.live().problem(),
        "schedules": schedules(gateway),
    }))
}

/// The scheduled tasks and their latest runs, or why they cannot be read.
fn schedules(gateway: &aai_engine::pipeline::Gateway) -> Value {
    gateway.tasks().map_or_else(
        || json!({"error": "this gateway runs no scheduler"}),
        |tasks| tasks.report(),
    )
}

/// Turns a scheduled task on or off (`{"name", "on"}`).
async fn schedule_enable(State(control): State<Control>, body: Body) -> Response {
    let request = match body_json(body).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    let (Some(name), Some(on)) = (
        text(&request, "name"),
        request.get("on").and_then(Value::as_bool),
    ) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "send {\"name\": \"task\", \"on\": true|false}",
        );
    };
    let tool = if on {
        "schedule_enable"
    } else {
        "schedule_disable"
    };
    schedule_change(&control, tool, name).await
}

/// Runs a scheduled task now (`{"name"}`).
async fn schedule_run(State(control): State<Control>, body: Body) -> Response {
    let request = match body_json(body).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    let Some(name) = text(&request, "name") else {
        return refuse(StatusCode::BAD_REQUEST, "send {\"name\": \"task\"}");
    };
    schedule_change(&control, "schedule_run_now", name).await
}

/// A change the person at the dashboard makes: their own, so not asked again; audited.
async fn schedule_change(control: &Control, tool: &str, name: &str) -> Response {
    let args = serde_json::Map::from_iter([("name".to_owned(), json!(name))]);
    let Some(tasks) = control.gateway.tasks() else {
        return refuse(StatusCode::NOT_FOUND, "this gateway runs no scheduler");
    };
    let result = tasks.change(&control.gateway, tool, &args).await;
    let audit_args = json!({"name": name});
    let call = aai_engine::gate::Call {
        id: control.gateway.gate().call_id(),
        caller: "dashboard",
        app: tasks.app(),
        tool,
        args: &audit_args,
        risk: aai_descriptor::Risk::High,
    };
    let outcome = if result.is_ok() { "success" } else { "failed" };
    if let Err(error) =
        control
            .gateway
            .gate()
            .record(&call, "user", outcome, 0, result.as_ref().err())
    {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, &error.message);
    }
    match result {
        Ok(done) => {
            control.gateway.gate().feed.send(Event::Schedules);
            json_response(&done)
        }
        Err(error) => refuse(StatusCode::UNPROCESSABLE_ENTITY, &error.message),
    }
}

/// The live feed: every event as one server-sent event, until the daemon stops.
async fn events(State(control): State<Control>) -> Response {
    let receiver = control.gateway.gate().feed.subscribe();
    let stream = futures::stream::unfold(
        (receiver, control.cancel.clone()),
        |(mut receiver, cancel)| async move {
            let data = tokio::select! {
                () = cancel.cancelled() => return None,
                got = receiver.recv() => match got {
                    Ok(event) => serde_json::to_string(&event).unwrap_or_default(),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        json!({"kind": "lagged"}).to_string()
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                },
            };
            Some((
                Ok::<_, Infallible>(SseEvent::default().data(data)),
                (receiver, cancel),
            ))
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Audit history: `q` (text anywhere in a row), `before` (an id, for older pages), `limit`.
async fn audit(State(control): State<Control>, uri: Uri) -> Response {
    let query = query(&uri);
    let text = query.get("q").map(|q| q.trim()).filter(|q| !q.is_empty());
    let before = query.get("before").and_then(|b| b.parse().ok());
    let limit = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(100)
        .clamp(1, MAX_PAGE);
    let found = control
        .gateway
        .gate()
        .log()
        .map_err(|e| e.message)
        .and_then(|store| {
            store
                .0
                .search(text, before, limit)
                .map_err(|e| e.to_string())
        });
    match found {
        Ok(rows) => json_response(&json!({"rows": rows})),
        Err(message) => refuse(StatusCode::SERVICE_UNAVAILABLE, &message),
    }
}

async fn verify(State(control): State<Control>) -> Response {
    let store = match control.gateway.gate().log() {
        Ok(store) => store,
        Err(error) => return refuse(StatusCode::SERVICE_UNAVAILABLE, &error.message),
    };
    let checked = tokio::task::spawn_blocking(move || store.0.verify()).await;
    match checked {
        Ok(Ok(rows)) => json_response(&json!({"ok": true, "rows": rows})),
        Ok(Err(bad)) => json_response(&json!({"ok": false, "id": bad.id, "reason": bad.reason})),
        Err(error) => refuse(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    }
}

/// A change's JSON body, or the refusal to send.
async fn body_json(body: Body) -> Result<Value, Response> {
    let bytes = axum::body::to_bytes(body, 16 * 1024)
        .await
        .map_err(|_| refuse(StatusCode::PAYLOAD_TOO_LARGE, "the request is too large"))?;
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        refuse(
            StatusCode::BAD_REQUEST,
            &format!("the body is not JSON: {e}"),
        )
    })
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

async fn answer(State(control): State<Control>, body: Body) -> Response {
    let request = match body_json(body).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    let (Some(id), Some(key)) = (text(&request, "id"), text(&request, "answer")) else {
        return refuse(StatusCode::BAD_REQUEST, "send {\"id\", \"answer\"}");
    };
    match control.gateway.approvals().answer(id, key) {
        Ok(()) => json_response(&json!({"answered": id, "answer": key})),
        Err(error) => refuse(StatusCode::CONFLICT, &error.to_string()),
    }
}

async fn revoke(State(control): State<Control>, body: Body) -> Response {
    let request = match body_json(body).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    let (Some(client), Some(app)) = (text(&request, "client"), text(&request, "app")) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "send the grant's {\"client\", \"app\", \"tool\", \"prefix\", \"session\"}",
        );
    };
    let owned = |key: &str| {
        text(&request, key)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let mut grant = aai_audit::Grant::always(client, app, None, "dashboard");
    grant.tool = owned("tool");
    grant.prefix = owned("prefix");
    grant.session = owned("session");
    match control.gateway.gate().revoke(&grant) {
        Ok(true) => {
            tracing::info!(%client, %app, tool = ?grant.tool, "grant revoked in the dashboard");
            json_response(&json!({"revoked": true}))
        }
        Ok(false) => refuse(StatusCode::NOT_FOUND, "no such grant (revoked already?)"),
        Err(error) => refuse(StatusCode::SERVICE_UNAVAILABLE, &error.message),
    }
}

async fn stop(State(control): State<Control>) -> Response {
    json_response(&control.gateway.emergency_stop("dashboard").await)
}

async fn resume(State(control): State<Control>) -> Response {
    json_response(&json!({"resumed": control.gateway.resume("dashboard")}))
}

async fn toolset(State(control): State<Control>, body: Body) -> Response {
    let request = match body_json(body).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    let (Some(app), Some(on)) = (
        text(&request, "app"),
        request.get("on").and_then(Value::as_bool),
    ) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "send {\"app\": \"local.files\", \"on\": true|false}",
        );
    };
    settled(&control, settings::set_toolset(&control.gateway, app, on))
}

async fn profile(State(control): State<Control>, body: Body) -> Response {
    let request = match body_json(body).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
    let (Some(client), Some(profile)) = (text(&request, "client"), text(&request, "profile"))
    else {
        return refuse(StatusCode::BAD_REQUEST, "send {\"client\", \"profile\"}");
    };
    settled(
        &control,
        settings::set_profile(&control.gateway, client, profile),
    )
}

/// The answer to a settings change; watchers are told.
fn settled(control: &Control, result: Result<(), settings::SettingsError>) -> Response {
    match result {
        Ok(()) => {
            control.gateway.gate().feed.send(Event::Settings);
            json_response(&json!({"saved": true}))
        }
        Err(problem) => refuse(StatusCode::UNPROCESSABLE_ENTITY, &problem.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::logins::Logins;
    use axum::http::HeaderMap;

    /// The page hides exactly what the CLI hides: its class is the sanitizer's table.
    #[test]
    fn the_page_script_hides_the_sanitizers_characters() {
        assert!(!APP_JS.contains("__AAI_HIDDEN__"));
        for range in [
            r"\u{202a}-\u{202e}",
            r"\u{0}-\u{1f}",
            r"\u{e0000}-\u{e007f}",
        ] {
            assert!(APP_JS.contains(range), "{range}");
        }
        assert_eq!(
            APP_JS.matches(r"-\u{").count(),
            aai_descriptor::visible::HIDDEN.len()
        );
    }

    #[test]
    fn a_code_logs_in_once_and_the_session_needs_its_token_to_change_things() {
        let logins = Logins::default();
        let code = logins.mint();
        let (session, csrf) = logins.redeem(&code).expect("first use");
        assert!(logins.redeem(&code).is_none(), "a code works once");
        assert!(logins.redeem("made-up").is_none());
        let ours = vec!["http://127.0.0.1:9".to_owned()];
        let headers = |pairs: &[(&str, &str)]| {
            let mut map = HeaderMap::new();
            for (k, v) in pairs {
                map.append(
                    header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                    HeaderValue::from_str(v).expect("value"),
                );
            }
            map
        };
        let cookie = format!("theme=dark; {COOKIE}={session}");
        let post = axum::http::Method::POST;
        let get = axum::http::Method::GET;
        let status = |method: &axum::http::Method, h: &HeaderMap| {
            logins
                .refusal(method, "/api/stop", None, h, &ours)
                .map(|r| r.status().as_u16())
        };
        assert_eq!(status(&get, &headers(&[])), Some(401));
        assert_eq!(
            status(&get, &headers(&[("cookie", &format!("{COOKIE}=x"))])),
            Some(401)
        );
        // The cookie alone reads nothing (it reaches every port of the host); the key does.
        assert_eq!(status(&get, &headers(&[("cookie", &cookie)])), Some(403));
        assert_eq!(
            status(&get, &headers(&[("cookie", &cookie), (CSRF_HEADER, &csrf)])),
            None
        );
        let streamed = |query: &str| {
            logins
                .refusal(
                    &get,
                    "/api/events",
                    Some(query),
                    &headers(&[("cookie", &cookie)]),
                    &ours,
                )
                .map(|r| r.status().as_u16())
        };
        assert_eq!(streamed(&format!("k={csrf}")), None);
        assert_eq!(streamed("k=0"), Some(403));
        assert_eq!(
            logins
                .refusal(&get, "/", None, &headers(&[("cookie", &cookie)]), &ours)
                .map(|r| r.status().as_u16()),
            None,
            "the page itself holds nothing"
        );
        assert_eq!(
            status(&post, &headers(&[("cookie", &cookie)])),
            Some(403),
            "no origin"
        );
        let good = [
            ("cookie", cookie.as_str()),
            ("origin", "http://127.0.0.1:9"),
            (CSRF_HEADER, csrf.as_str()),
        ];
        assert_eq!(status(&post, &headers(&good)), None);
        let mut foreign = good;
        foreign[1].1 = "http://127.0.0.1:8";
        assert_eq!(status(&post, &headers(&foreign)), Some(403));
        let mut forged = good;
        forged[2].1 = "0";
        assert_eq!(status(&post, &headers(&forged)), Some(403));
        assert_eq!(
            logins
                .refusal(&get, "/login", None, &headers(&[]), &ours)
                .map(|r| r.status()),
            None
        );
    }
}
