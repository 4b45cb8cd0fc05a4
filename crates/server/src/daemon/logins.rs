//! The dashboard's logins: one-time codes, the sessions they become, and the check every
//! dashboard request passes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

use super::reply::refuse;

/// The name of the session cookie.
pub(crate) const COOKIE: &str = "aai_dashboard";
/// The header a change carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-aai-csrf";
/// How long a login link works (once).
pub(crate) const CODE_LIFETIME: Duration = Duration::from_secs(2 * 60);
/// How long a dashboard session lasts.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Login codes waiting to be used and the sessions they became.
#[derive(Default)]
pub struct Logins {
    codes: Mutex<HashMap<String, Instant>>,
    sessions: Mutex<HashMap<String, Session>>,
}

struct Session {
    csrf: String,
    until: Instant,
}

impl Logins {
    /// A new one-time login code.
    pub fn mint(&self) -> String {
        let code = aai_contain::own_files::new_token();
        let now = Instant::now();
        let mut codes = self.codes.lock().unwrap_or_else(|e| e.into_inner());
        codes.retain(|_, until| *until > now);
        codes.insert(code.clone(), now + CODE_LIFETIME);
        code
    }

    /// Trades a code (once) for a new session: its id and CSRF token.
    pub(crate) fn redeem(&self, code: &str) -> Option<(String, String)> {
        let until = self
            .codes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(code)?;
        if until <= Instant::now() {
            return None;
        }
        let (id, csrf) = (
            aai_contain::own_files::new_token(),
            aai_contain::own_files::new_token(),
        );
        let now = Instant::now();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.until > now);
        sessions.insert(
            id.clone(),
            Session {
                csrf: csrf.clone(),
                until: now + SESSION_LIFETIME,
            },
        );
        Some((id, csrf))
    }

    /// The CSRF token of the live session the request's cookie names.
    fn csrf(&self, headers: &HeaderMap) -> Option<String> {
        let id = cookie(headers, COOKIE)?;
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .iter()
            .find(|(known, s)| {
                aai_contain::own_files::same_secret(known.as_bytes(), id.as_bytes())
                    && s.until > Instant::now()
            })
            .map(|(_, s)| s.csrf.clone())
    }

    /// Whether a dashboard request may go on: `None` when it may, else the refusal. Pages
    /// need the session cookie; every `/api/` request (reads too) also its session's key —
    /// the `X-AAI-CSRF` header, or `k` in the query for the event stream, which cannot send
    /// headers — and changes (`POST`) this listener's `Origin`.
    ///
    /// The cookie alone opens nothing of value: browsers send a `127.0.0.1` cookie to every
    /// port of that host, so a listener the agent runs on another port could be handed it.
    /// The key reaches the page only in the login redirect's fragment, and the page keeps it
    /// in `sessionStorage`, which browsers keep per origin (port included).
    pub fn refusal(
        &self,
        method: &axum::http::Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        origins: &[String],
    ) -> Option<Response> {
        if path == "/login" {
            return None;
        }
        let Some(csrf) = self.csrf(headers) else {
            return Some(refuse(
                StatusCode::UNAUTHORIZED,
                "not logged in: run `aai-gateway dashboard`, which opens this page with a one-time login",
            ));
        };
        let reads = method == axum::http::Method::GET || method == axum::http::Method::HEAD;
        if reads && !path.starts_with("/api/") {
            return None;
        }
        if !reads {
            let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
            if !origin.is_some_and(|o| origins.iter().any(|ours| ours.eq_ignore_ascii_case(o))) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    "changes are taken only from the dashboard's own page (Origin header)",
                ));
            }
        }
        let in_query = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .find(|(k, _)| k == "k")
            .map(|(_, v)| v.into_owned());
        let presented = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .or(in_query)
            .unwrap_or_default();
        if !aai_contain::own_files::same_secret(presented.as_bytes(), csrf.as_bytes()) {
            return Some(refuse(
                StatusCode::FORBIDDEN,
                "the request lacks this session's key; open the dashboard again with `aai-gateway dashboard`",
            ));
        }
        None
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}
