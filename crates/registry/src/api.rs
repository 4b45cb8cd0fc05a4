//! The HTTP API:
//! - `GET /api/v1/apps` — every app, as the gateway's `web.registry_url` reads it;
//! - `GET /api/v1/search?q=&limit=` — ranked, typo-tolerant search;
//! - `GET /api/v1/apps/{appId}` — an app with its versions and publisher key;
//! - `GET /api/v1/apps/{appId}/aai.json[?version=]` — the exact signed bytes, the signature in
//!   `X-AAI-Signature`;
//! - `GET /api/v1/publishers/{name}` — a publisher's namespace and key;
//! - `POST /api/v1/publishers/{name}/rotations` — `{new_key, signature}`: the publisher's old
//!   key hands its apps to a new key (the signature is the old key's, over
//!   `aai_descriptor::statements::key_rotation`);
//! - `GET /api/v1/registry` — the registry's timestamp key (`null` when it signs none).
//!
//! With a timestamp key, every descriptor is served with
//! `X-AAI-Timestamp: <issued> <latest> <signature>` over `aai_descriptor::statements::timestamp`, so a client can tell how old a copy is.
//! - `POST /api/v1/apps` — publish `{publisher, descriptor (the JSON text), signature}`.
//!
//! Every refusal is JSON `{"error": "..."}` with a status that says whose fault it is, and
//! changes nothing.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use sqlx::PgPool;

use crate::db;

/// The largest publish request taken.
pub const MAX_BODY: usize = 1024 * 1024;

#[derive(Clone)]
pub struct Api {
    pub pool: PgPool,
    /// How clients reach this registry, e.g. `https://store.example.org`.
    pub public_url: String,
    /// The secret (base64, from `aai-registry keygen`) that signs the timestamp of every
    /// descriptor served; none: no timestamps.
    pub timestamp_key: Option<String>,
}

pub fn router(api: Api) -> Router {
    Router::new()
        .route("/api/v1/apps", get(list).post(publish))
        .route("/api/v1/search", get(search))
        .route("/api/v1/apps/{app_id}", get(app))
        .route("/api/v1/apps/{app_id}/aai.json", get(descriptor))
        .route("/api/v1/publishers/{name}", get(publisher))
        .route(
            "/api/v1/publishers/{name}/rotations",
            axum::routing::post(rotate),
        )
        .route("/api/v1/registry", get(registry))
        .route("/healthz", get(|| async { "ok" }))
        .layer(axum::middleware::from_fn(refuse_nul))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(api)
}

/// Text PostgreSQL cannot store — a NUL byte — in the path, the query or a JSON body is the
/// caller's mistake: 400 with where it was, before any handler or the database sees it.
async fn refuse_nul(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let decoded = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .collect::<Vec<u8>>()
            .contains(&0)
    };
    let uri = request.uri();
    let place = if decoded(uri.path()) {
        Some("the path")
    } else if uri.query().is_some_and(decoded) {
        Some("the query")
    } else {
        None
    };
    if let Some(place) = place {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("{place} holds a NUL byte, which no app id, version, name or search may hold"),
        );
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {MAX_BODY} bytes"),
        );
    };
    // In JSON a NUL is either a raw byte (invalid there anyway) or the escape `\u0000`.
    let escaped = bytes.windows(6).any(|w| w.eq_ignore_ascii_case(b"\\u0000"));
    if bytes.contains(&0) || escaped {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the body holds a NUL byte (\\u0000), which no publisher, descriptor or signature may hold",
        );
    }
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

fn reply(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    reply(status, &json!({"error": message.into()}))
}

fn failed(error: &sqlx::Error) -> Response {
    // SQLSTATE class 22 ("data exception"): text or a value the database cannot take, which
    // is the request's fault, not the database's.
    if let Some(database) = error.as_database_error()
        && database.code().is_some_and(|code| code.starts_with("22"))
    {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "the request holds a value the registry cannot store: {}",
                database.message()
            ),
        );
    }
    tracing::error!(%error, "database");
    refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        "the registry's database did not answer; retry in a moment",
    )
}

async fn list(State(api): State<Api>) -> Response {
    match db::list(&api.pool).await {
        Ok(apps) => reply(
            StatusCode::OK,
            &json!({"apps": apps.iter().map(|(id, name, version)| json!({
                "appId": id,
                "name": name,
                "version": version,
                "descriptor_url": format!("{}/api/v1/apps/{id}/aai.json", api.public_url),
            })).collect::<Vec<_>>()}),
        ),
        Err(error) => failed(&error),
    }
}

#[derive(Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    limit: Option<i64>,
}

async fn search(
    State(api): State<Api>,
    query: Result<Query<SearchQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return refuse(StatusCode::BAD_REQUEST, "search with ?q=words&limit=1..100");
    };
    let q = query.q.trim();
    if q.is_empty() || q.len() > 200 {
        return refuse(
            StatusCode::BAD_REQUEST,
            "?q= takes 1 to 200 characters of search words",
        );
    }
    let limit = query.limit.unwrap_or(20).clamp(1, 100);
    match db::search(&api.pool, q, limit).await {
        Ok(results) => reply(StatusCode::OK, &json!({"query": q, "results": results})),
        Err(error) => failed(&error),
    }
}

async fn app(State(api): State<Api>, Path(app_id): Path<String>) -> Response {
    match db::app(&api.pool, &app_id).await {
        Ok(Some(app)) => reply(StatusCode::OK, &app),
        Ok(None) => refuse(
            StatusCode::NOT_FOUND,
            format!("no app {app_id:?} in this registry"),
        ),
        Err(error) => failed(&error),
    }
}

#[derive(Deserialize)]
struct VersionQuery {
    version: Option<String>,
}

async fn descriptor(
    State(api): State<Api>,
    Path(app_id): Path<String>,
    query: Result<Query<VersionQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return refuse(StatusCode::BAD_REQUEST, "?version= takes a version");
    };
    match db::descriptor(&api.pool, &app_id, query.version.as_deref()).await {
        Ok(Some(served)) => {
            let stamp = api.timestamp_key.as_deref().and_then(|secret| {
                let issued = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let sha256 = format!("{:x}", Sha256::digest(served.text.as_bytes()));
                let statement = aai_descriptor::statements::timestamp(
                    &app_id,
                    &served.version,
                    &sha256,
                    &served.latest,
                    issued,
                );
                crate::keys::sign(secret, &statement)
                    .ok()
                    .map(|signature| format!("{issued} {} {signature}", served.latest))
            });
            let mut response = (StatusCode::OK, served.text).into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            for (name, value) in [
                ("x-aai-signature", Some(served.signature)),
                ("x-aai-version", Some(served.version)),
                ("x-aai-latest", Some(served.latest)),
                ("x-aai-timestamp", stamp),
            ] {
                if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                    headers.insert(name, value);
                }
            }
            response
        }
        Ok(None) => refuse(
            StatusCode::NOT_FOUND,
            format!("no such app or version: {app_id}"),
        ),
        Err(error) => failed(&error),
    }
}

async fn registry(State(api): State<Api>) -> Response {
    let key = api
        .timestamp_key
        .as_deref()
        .and_then(|secret| crate::keys::public_of(secret).ok());
    reply(StatusCode::OK, &json!({"timestamp_key": key}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RotateRequest {
    /// The publisher's next public key (base64).
    new_key: String,
    /// The current key's signature over the rotation statement.
    signature: String,
}

async fn rotate(State(api): State<Api>, Path(name): Path<String>, body: Bytes) -> Response {
    let request: RotateRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("a rotation is {{\"new_key\", \"signature\"}}: {e}"),
            );
        }
    };
    if let Err(problem) = crate::keys::public(&request.new_key) {
        return refuse(StatusCode::BAD_REQUEST, format!("new_key: {problem}"));
    }
    let publisher = match db::publisher(&api.pool, &name).await {
        Ok(Some(publisher)) => publisher,
        Ok(None) => return refuse(StatusCode::NOT_FOUND, format!("no publisher {name:?}")),
        Err(error) => return failed(&error),
    };
    let statement =
        aai_descriptor::statements::key_rotation(&name, &publisher.public_key, &request.new_key);
    if crate::keys::verify(&publisher.public_key, &statement, &request.signature).is_err() {
        return refuse(
            StatusCode::FORBIDDEN,
            format!("the rotation is not signed by {name}'s current key; nothing changed"),
        );
    }
    match db::rotate_key(
        &api.pool,
        &name,
        &publisher.public_key,
        &request.new_key,
        &request.signature,
    )
    .await
    {
        Ok(db::Rotated::Done) => reply(
            StatusCode::CREATED,
            &json!({"publisher": name, "public_key": request.new_key}),
        ),
        Ok(db::Rotated::Stale) => refuse(
            StatusCode::CONFLICT,
            format!("{name}'s key changed meanwhile; sign the rotation with its current key"),
        ),
        Ok(db::Rotated::Reused) => refuse(
            StatusCode::CONFLICT,
            format!("that key was {name}'s before: a rotation goes to a key never used"),
        ),
        Err(error) => failed(&error),
    }
}

async fn publisher(State(api): State<Api>, Path(name): Path<String>) -> Response {
    match db::publisher(&api.pool, &name).await {
        Ok(Some(p)) => reply(
            StatusCode::OK,
            &json!({"name": p.name, "namespace": p.namespace, "public_key": p.public_key}),
        ),
        Ok(None) => refuse(StatusCode::NOT_FOUND, format!("no publisher {name:?}")),
        Err(error) => failed(&error),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishRequest {
    publisher: String,
    /// The descriptor's JSON text, exactly as signed.
    descriptor: String,
    /// base64 ed25519 signature of `descriptor`'s bytes.
    signature: String,
}

async fn publish(State(api): State<Api>, body: Bytes) -> Response {
    let request: PublishRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "the body is not a publish request ({error}); send {{\"publisher\", \"descriptor\" (the aai.json text), \"signature\" (base64 ed25519 of its bytes)}}"
                ),
            );
        }
    };
    let publisher = match db::publisher(&api.pool, &request.publisher).await {
        Ok(Some(publisher)) => publisher,
        Ok(None) => {
            return refuse(
                StatusCode::FORBIDDEN,
                format!(
                    "no publisher {:?}: the registry's operator adds publishers with `aai-registry publisher add`",
                    request.publisher
                ),
            );
        }
        Err(error) => return failed(&error),
    };
    if let Err(problem) = crate::keys::verify(
        &publisher.public_key,
        request.descriptor.as_bytes(),
        &request.signature,
    ) {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "{problem}; sign the descriptor's exact bytes with the publisher's key (`aai-registry publish`)"
            ),
        );
    }
    // The same checks as `aai-gateway validate`, with the same pointer-precise messages.
    let descriptor = match aai_descriptor::parse("aai.json", request.descriptor.as_bytes()) {
        Ok(descriptor) => descriptor,
        Err(error) => {
            return reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                &json!({"error": format!("the descriptor is invalid: {error}"), "problems": problems(&error)}),
            );
        }
    };
    let Some(version) = descriptor.version.clone().filter(|v| !v.trim().is_empty()) else {
        return refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "a published descriptor needs \"version\" (each version is kept; publish a new one to update)",
        );
    };
    let sha256 = format!("{:x}", Sha256::digest(request.descriptor.as_bytes()));
    let new = db::NewVersion {
        publisher: &publisher.name,
        descriptor: &descriptor,
        version: &version,
        text: &request.descriptor,
        signature: &request.signature,
        sha256: &sha256,
    };
    match db::publish(&api.pool, &new).await {
        Ok(db::Published::New) => reply(
            StatusCode::CREATED,
            &json!({"appId": descriptor.app_id, "version": version, "sha256": sha256}),
        ),
        Ok(db::Published::Same) => reply(
            StatusCode::OK,
            &json!({"appId": descriptor.app_id, "version": version, "sha256": sha256, "unchanged": true}),
        ),
        Ok(db::Published::Conflict) => refuse(
            StatusCode::CONFLICT,
            format!(
                "{} {version} is published already with other content; give the new one another \"version\"",
                descriptor.app_id
            ),
        ),
        Ok(db::Published::InvalidVersion(reason)) => {
            refuse(StatusCode::BAD_REQUEST, reason.to_string())
        }
        Ok(db::Published::OutsideNamespace(owner)) => {
            let whose = match owner {
                Some((owner, namespace)) => {
                    format!("; {namespace}.* belongs to publisher {owner}")
                }
                None => "; no publisher owns a namespace above it".to_owned(),
            };
            refuse(
                StatusCode::FORBIDDEN,
                format!(
                    "{} is outside the namespace of publisher {} ({}.*){whose}",
                    descriptor.app_id, publisher.name, publisher.namespace
                ),
            )
        }
        Ok(db::Published::NotPublisher(owner)) => refuse(
            StatusCode::FORBIDDEN,
            format!(
                "{} belongs to publisher {owner}; only the publisher that first published an app publishes its versions",
                descriptor.app_id
            ),
        ),
        Ok(db::Published::SamePrecedence(existing)) => refuse(
            StatusCode::CONFLICT,
            format!(
                "{} {version} differs from the published {existing} only in build metadata, which semver does not order; give it another version",
                descriptor.app_id
            ),
        ),
        Err(error) => failed(&error),
    }
}

/// The problems of an invalid descriptor as `{pointer, message, type}`.
fn problems(error: &aai_descriptor::LoadError) -> Value {
    error
        .problems
        .iter()
        .map(|p| json!({"pointer": p.pointer, "message": p.message, "type": p.kind.type_name()}))
        .collect()
}
