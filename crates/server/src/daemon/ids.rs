//! One answer per request id in a Streamable HTTP session.
//!
//! rmcp's session routes each answer by the request's JSON-RPC id to the HTTP response that
//! carried it: a second request with the id of one still running takes the route over, so both
//! answers go to the second response and the first POST waits for ever. The stdio guard
//! (`transport.rs`) refuses such a request; here it is refused the same way before rmcp sees
//! it: HTTP 400 with a JSON-RPC error under that id (as JSON-RPC asks; a client may read it as the
//! first request's answer, so the message says it is not). The id is free again when the first request's response body ends
//! or is dropped. Requests without a session (the 2026-07-28 era) are each their own exchange
//! and cannot collide.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt as _;
use serde_json::{Value, json};

/// The `(session, id)` pairs of requests whose response has not ended.
#[derive(Clone, Default)]
pub(crate) struct InFlight(Arc<Mutex<HashSet<(String, String)>>>);

/// Frees its pair when dropped: with the response body, at its end or when the client left.
struct Release {
    in_flight: InFlight,
    key: (String, String),
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Ok(mut pairs) = self.in_flight.0.lock() {
            pairs.remove(&self.key);
        }
    }
}

/// The JSON-RPC fields read here; everything else of the message is skipped.
#[derive(serde::Deserialize)]
struct Head {
    method: Option<serde::de::IgnoredAny>,
    id: Option<Value>,
}

/// Axum middleware for `/mcp`: refuses a request whose id is in flight in its session.
pub(crate) async fn one_answer_per_id(
    State(in_flight): State<InFlight>,
    request: Request,
    next: Next,
) -> Response {
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(session) = session.filter(|_| request.method() == Method::POST) else {
        return next.run(request).await;
    };
    // The guard in front read the body whole; this takes it back out of memory.
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return next.run(Request::from_parts(parts, Body::empty())).await;
    };
    let id = serde_json::from_slice::<Head>(&bytes)
        .ok()
        .filter(|head| head.method.is_some())
        .and_then(|head| head.id);
    let request = Request::from_parts(parts, Body::from(bytes));
    let Some(id) = id else {
        return next.run(request).await;
    };
    let key = (session, id.to_string());
    let taken = in_flight
        .0
        .lock()
        .map_or(true, |mut pairs| pairs.insert(key.clone()));
    if !taken {
        return refused(&id);
    }
    let release = Release {
        in_flight: in_flight.clone(),
        key,
    };
    let (parts, body) = next.run(request).await.into_parts();
    let stream = futures::stream::unfold(
        (body.into_data_stream(), release),
        |(mut stream, release)| async move {
            stream.next().await.map(|chunk| (chunk, (stream, release)))
        },
    );
    Response::from_parts(parts, Body::from_stream(stream))
}

fn refused(id: &Value) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32600,
            "message": format!("Invalid Request: the id {id} belongs to a request of this session that has not been answered yet; use a new id for each request"),
        },
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
