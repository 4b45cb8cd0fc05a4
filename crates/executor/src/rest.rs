//! The REST executor (the `web` section, `automation: "restapi"`).
//!
//! The request comes from the descriptor: `base_url` + `endpoint` (placeholders in the path are
//! percent-encoded as one segment each), `query_params`, `body` (a placeholder that is a whole
//! JSON string keeps the argument's type; inside longer text it is inserted as text),
//! `default_headers` + the tool's `headers`, and `method`. Credentials come from an [`Auth`]
//! the gateway provides, and never appear in results or errors.

use std::sync::Arc;
use std::time::Duration;

use aai_descriptor::url::UrlTemplate;
use aai_descriptor::{AaiError, ErrorKind, Parameters, Platform, WebSection, WebTool, template};
use serde_json::{Map, Value, json};

use crate::{BoxFuture, Executor, Invocation, section_tool};

mod credential;
mod response;

pub use credential::{Auth, Credential, NoCredentials, credential_for, origin_of};

pub use response::BINARY_KEY;
use response::{is_binary, parse_output, read_capped, retry_after, transport_error};

/// Settings of the REST executor.
#[derive(Clone)]
pub struct RestSettings {
    pub client: crate::HttpClient,
    /// Responses larger than this are refused.
    pub max_response_bytes: usize,
    /// Whether `http://` is allowed for loopback hosts (tests, local development).
    pub allow_http_loopback: bool,
    /// The user's base URL per appId (staging, local servers); never from a descriptor.
    pub base_urls: std::collections::HashMap<String, String>,
    /// Reads a file for a multipart upload, inside the folders the user allowed (given the
    /// client's roots): its bytes and file name. None: uploads are refused.
    pub files: Option<FileReader>,
}

/// Reads a file for an upload: `(path, roots)` → `(bytes, file name)`.
pub type FileReader =
    Arc<dyn Fn(&str, &[String]) -> Result<(Vec<u8>, String), AaiError> + Send + Sync>;

pub struct RestExecutor {
    settings: RestSettings,
    auth: Arc<dyn Auth>,
}

/// A request, planned.
#[derive(Clone)]
struct Planned {
    method: reqwest::Method,
    url: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Option<Value>,
    body_type: BodyType,
    parser: Option<String>,
    response_headers: Vec<String>,
    max_pages: Option<u32>,
    /// JSON Pointer to each page's items.
    items: Option<String>,
}

/// How a request body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyType {
    Json,
    Form,
    Multipart,
    Text,
}

impl RestExecutor {
    pub fn new(settings: RestSettings, auth: Arc<dyn Auth>) -> Self {
        Self { settings, auth }
    }

    fn planned<'a>(
        &self,
        invocation: &Invocation<'a>,
    ) -> Result<(Planned, std::borrow::Cow<'a, WebSection>), AaiError> {
        let (section, tool) = section_tool(
            invocation.descriptor.platforms.web.as_ref(),
            invocation,
            Platform::Web,
        )?;
        // The user's override of the base URL applies to the request and to which credential
        // may go with it (a key bound to production is not sent to staging).
        // (Copied only when the user set an override: this is every web call's path.)
        let effective = match self.settings.base_urls.get(&invocation.descriptor.app_id) {
            Some(base) => std::borrow::Cow::Owned(WebSection {
                base_url: base.clone(),
                ..section.fields.clone()
            }),
            None => std::borrow::Cow::Borrowed(&section.fields),
        };
        let web: &WebSection = &effective;
        let fields: &WebTool = &tool.fields;
        let schema = tool.common.parameters.as_ref().map(Parameters::schema);
        let lookup = |name: &str| invocation.value(schema.as_ref(), name);
        let base = web.base_url.trim_end_matches('/');
        let scheme = base.split(':').next().unwrap_or_default();
        self.check_scheme(invocation, base, scheme)?;
        let endpoint = if fields.endpoint.starts_with('/') {
            fields.endpoint.clone()
        } else {
            format!("/{}", fields.endpoint)
        };
        let template = UrlTemplate::parse(&format!("{base}{endpoint}"), scheme).map_err(|m| {
            AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!("{}: {m}", invocation.name()),
            )
        })?;
        let url = template.fill(&lookup).map_err(|e| invocation.unfilled(e))?;
        // The credential goes with this request: it must go to base_url's origin and no
        // other, whatever the endpoint text says (`@evil.example/x` would change the host).
        if origin_of(&url).is_none() || origin_of(&url) != origin_of(base) {
            return Err(AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!(
                    "{}: the endpoint leads away from base_url {base}; a tool's requests must stay on that origin",
                    invocation.name()
                ),
            ));
        }
        let mut query = Vec::new();
        for (key, value) in fields.query_params.iter().flat_map(Map::iter) {
            match bind_optional(value, &lookup).map_err(|n| invocation.missing(n))? {
                // An array repeats the key (`tag=x&tag=y`), or as the tool declares.
                Some(Value::Array(items)) => match fields.query_style.as_deref() {
                    Some("comma") => {
                        let joined: Vec<String> = items.iter().map(template::as_text).collect();
                        query.push((key.clone(), joined.join(",")));
                    }
                    Some("brackets") => {
                        for item in items {
                            query.push((format!("{key}[]"), template::as_text(&item)));
                        }
                    }
                    _ => {
                        for item in items {
                            query.push((key.clone(), template::as_text(&item)));
                        }
                    }
                },
                Some(value) => query.push((key.clone(), template::as_text(&value))),
                None => {}
            }
        }
        let mut headers = Vec::new();
        let default_headers = web.default_headers.iter().flat_map(Map::iter);
        for (key, value) in default_headers.chain(fields.headers.iter().flat_map(Map::iter)) {
            let text = match value {
                // A header built from an optional argument that was left out is not sent.
                Value::String(text) => match template::fill_text(text, &lookup) {
                    Ok(text) => text,
                    Err(_) => continue,
                },
                other => template::as_text(other),
            };
            if text.contains(['\r', '\n', '\0']) {
                return Err(AaiError::new(
                    ErrorKind::InvalidParams,
                    format!(
                        "{}: header {key} would contain a line break; remove it from the value",
                        invocation.name()
                    ),
                ));
            }
            headers.retain(|(k, _): &(String, String)| !k.eq_ignore_ascii_case(key));
            headers.push((key.clone(), text));
        }
        let method = fields.method.as_deref().unwrap_or("GET");
        let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| {
            AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!("{}: unknown method {method}", invocation.name()),
            )
        })?;
        let body = match &fields.body {
            Some(template) => {
                bind_optional(template, &lookup).map_err(|n| invocation.missing(n))?
            }
            None => None,
        };
        Ok((
            Planned {
                method,
                url,
                query,
                headers,
                body,
                body_type: match fields.body_type.as_deref() {
                    Some("form") => BodyType::Form,
                    Some("multipart") => BodyType::Multipart,
                    Some("text") => BodyType::Text,
                    _ => BodyType::Json,
                },
                parser: fields.output_parser.clone(),
                response_headers: fields.response_headers.clone().unwrap_or_default(),
                max_pages: fields
                    .paginate
                    .as_ref()
                    .map(|p| p.max_pages.unwrap_or(5).clamp(1, 100)),
                items: fields.paginate.as_ref().and_then(|p| p.items.clone()),
            },
            effective,
        ))
    }

    fn check_scheme(
        &self,
        invocation: &Invocation<'_>,
        base: &str,
        scheme: &str,
    ) -> Result<(), AaiError> {
        if scheme == "https" {
            return Ok(());
        }
        let loopback = reqwest::Url::parse(base)
            .ok()
            .and_then(|u| u.host_str().map(is_loopback))
            .unwrap_or(false);
        if scheme == "http" && loopback && self.settings.allow_http_loopback {
            return Ok(());
        }
        Err(AaiError::new(
            ErrorKind::AaiJsonInvalid,
            format!(
                "{}: base_url {base} is not https; plain http is allowed only for 127.0.0.1/localhost with `\"web\": {{\"allow_http_loopback\": true}}` in config.json",
                invocation.name()
            ),
        ))
    }

    /// Follows `Link: rel="next"` from the first page, on the same origin, up to `max_pages`
    /// in all and within the call's time; arrays are joined, other pages listed.
    #[allow(clippy::too_many_arguments)]
    async fn more_pages(
        &self,
        client: &reqwest::Client,
        planned: &Planned,
        credential: Option<&Credential>,
        first: Value,
        headers: &reqwest::header::HeaderMap,
        max_pages: u32,
        deadline: tokio::time::Instant,
        what: &str,
    ) -> Result<Value, AaiError> {
        let secrets: Vec<&str> = credential.iter().map(|c| c.secret()).collect();
        let mut pages = vec![first];
        let mut next = next_link(headers);
        while let Some(url) = next.take() {
            // A next link elsewhere would take the credential with it: not followed.
            if pages.len() as u32 >= max_pages || origin_of(&url) != origin_of(&planned.url) {
                next = Some(url);
                break;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                next = Some(url);
                break;
            }
            let page = Planned {
                method: reqwest::Method::GET,
                url,
                query: Vec::new(),
                body: None,
                ..planned.clone()
            };
            let response = self
                .send(client, &page, credential, left, None)
                .await
                .map_err(|e| transport_error(&e, what, left, &secrets))?;
            if !response.status().is_success() {
                return Err(AaiError::new(
                    ErrorKind::ApiRequestFailed,
                    format!(
                        "{what}: page {} answered HTTP {}",
                        pages.len() + 1,
                        response.status().as_u16()
                    ),
                ));
            }
            next = next_link(response.headers());
            let content_type = content_type_of(&response);
            let body = read_capped(response, self.settings.max_response_bytes, what).await?;
            let text = scrub(&String::from_utf8_lossy(&body), &secrets);
            pages.push(parse_output(
                &text,
                planned.parser.as_deref(),
                &content_type,
                what,
            )?);
        }
        let count = pages.len();
        let array_of = |page: &Value| match &planned.items {
            Some(pointer) => page.pointer(pointer).and_then(Value::as_array).cloned(),
            None => page.as_array().cloned(),
        };
        let items: Vec<Value> = if pages.iter().all(|p| array_of(p).is_some()) {
            pages
                .iter()
                .flat_map(|p| array_of(p).unwrap_or_default())
                .collect()
        } else {
            pages
        };
        Ok(json!({"items": items, "pages": count, "more": next.is_some()}))
    }

    /// A multipart body: each field as text; a field `{"file": path}` (optionally with
    /// `content_type`) as that file, read through the gateway's file sandbox.
    fn multipart(
        &self,
        body: &Value,
        roots: &[String],
        what: &str,
    ) -> Result<reqwest::multipart::Form, AaiError> {
        let mut form = reqwest::multipart::Form::new();
        let Value::Object(fields) = body else {
            return Err(AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!("{what}: a multipart body must be an object of fields"),
            ));
        };
        for (name, value) in fields {
            let file = value
                .as_object()
                .and_then(|o| o.get("file"))
                .and_then(Value::as_str);
            if let Some(path) = file {
                let reader = self.settings.files.as_ref().ok_or_else(|| {
                    AaiError::new(
                        ErrorKind::AutomationNotSupported,
                        format!("{what}: file uploads are not available here"),
                    )
                })?;
                let (bytes, file_name) = reader(path, roots)?;
                let mut part = reqwest::multipart::Part::bytes(bytes).file_name(file_name);
                if let Some(kind) = value.get("content_type").and_then(Value::as_str) {
                    part = part.mime_str(kind).map_err(|_| {
                        AaiError::new(
                            ErrorKind::AaiJsonInvalid,
                            format!("{what}: {kind:?} is not a MIME type"),
                        )
                    })?;
                }
                form = form.part(name.clone(), part);
            } else {
                form = form.text(name.clone(), template::as_text(value));
            }
        }
        Ok(form)
    }

    async fn send(
        &self,
        client: &reqwest::Client,
        planned: &Planned,
        credential: Option<&Credential>,
        timeout: Duration,
        form: Option<reqwest::multipart::Form>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut request = client
            .request(planned.method.clone(), &planned.url)
            .timeout(timeout)
            .header("accept", "application/json, text/plain;q=0.9, */*;q=0.5");
        let mut query = planned.query.clone();
        for (name, value) in &planned.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        match credential {
            Some(Credential::Header { name, value }) => {
                request = request.header(name.as_str(), value.as_str());
            }
            Some(Credential::Query { name, value }) => query.push((name.clone(), value.clone())),
            None => {}
        }
        if !query.is_empty() {
            request = request.query(&query);
        }
        if let Some(body) = &planned.body {
            let typed = planned
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
            if let Some(form) = form {
                // reqwest sets the multipart content type with its boundary.
                return request.multipart(form).send().await;
            }
            let (content_type, bytes) = match planned.body_type {
                BodyType::Json | BodyType::Multipart => ("application/json", body.to_string()),
                BodyType::Form => ("application/x-www-form-urlencoded", form_body(body)),
                BodyType::Text => (
                    "text/plain; charset=utf-8",
                    body.as_str()
                        .map_or_else(|| template::as_text(body), str::to_owned),
                ),
            };
            if !typed {
                request = request.header("content-type", content_type);
            }
            request = request.body(bytes);
        }
        request.send().await
    }
}

/// A response's `Content-Type`, or empty.
fn content_type_of(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// An object of fields as `application/x-www-form-urlencoded`; arrays repeat the key.
fn form_body(body: &Value) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    if let Value::Object(fields) = body {
        for (key, value) in fields {
            match value {
                Value::Array(items) => {
                    for item in items {
                        form.append_pair(key, &template::as_text(item));
                    }
                }
                other => {
                    form.append_pair(key, &template::as_text(other));
                }
            }
        }
    }
    form.finish()
}

/// The `rel="next"` target of a `Link` header.
fn next_link(headers: &reqwest::header::HeaderMap) -> Option<String> {
    headers.get_all("link").iter().find_map(|value| {
        let text = value.to_str().ok()?;
        text.split(',').find_map(|part| {
            let (target, params) = part.split_once(';')?;
            let next = params.split(';').any(|p| {
                matches!(
                    p.trim().to_ascii_lowercase().as_str(),
                    "rel=\"next\"" | "rel=next"
                )
            });
            next.then(|| {
                target
                    .trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_owned()
            })
        })
    })
}

/// `template` bound to the arguments; an object member whose value is a whole placeholder of
/// an argument that was left out is dropped (optional parameters), as is a whole value, and
/// so is a member whose text uses an argument that was left out.
fn bind_optional<'t>(
    template: &'t Value,
    lookup: &dyn Fn(&str) -> Option<Value>,
) -> Result<Option<Value>, &'t str> {
    if let Some(name) = template.as_str().and_then(template::whole_placeholder) {
        return Ok(lookup(name));
    }
    match template {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                // Text that uses an optional argument left out drops with it (the schema has
                // already made sure the required ones are there).
                if let Ok(Some(bound)) = bind_optional(value, lookup) {
                    out.insert(key.clone(), bound);
                }
            }
            Ok(Some(Value::Object(out)))
        }
        other => template::bind(other, lookup).map(Some),
    }
}

pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `text` with every secret replaced, for anything shown to the agent or logged.
pub fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(secret, "[redacted]");
    }
    out
}

impl Executor for RestExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let (planned, section) = self.planned(&invocation)?;
            let section = &section;
            let what = invocation.name();
            let descriptor = invocation.descriptor;
            let client =
                self.settings.client.get().map_err(|m| {
                    AaiError::new(ErrorKind::ApiRequestFailed, format!("{what}: {m}"))
                })?;
            // The whole call, every request in it included, fits in the tool's timeout.
            let deadline = tokio::time::Instant::now() + invocation.timeout;
            let mut credential = self.auth.credential(descriptor, section).await?;
            let mut refreshed = false;
            let mut waited = false;
            loop {
                let secrets: Vec<&str> = credential.iter().map(Credential::secret).collect();
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    return Err(AaiError::new(
                        ErrorKind::Timeout,
                        format!(
                            "{what}: no answer within {} ms",
                            invocation.timeout.as_millis()
                        ),
                    ));
                }
                let form = match (&planned.body, planned.body_type) {
                    (Some(body), BodyType::Multipart) => {
                        Some(self.multipart(body, invocation.roots, &what)?)
                    }
                    _ => None,
                };
                let response = self
                    .send(client, &planned, credential.as_ref(), left, form)
                    .await
                    .map_err(|e| transport_error(&e, &what, invocation.timeout, &secrets))?;
                let status = response.status();
                if matches!(status.as_u16(), 429 | 503) {
                    let wait = retry_after(response.headers());
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    // Retried once, when the wait is short and fits in the call's time.
                    if !waited
                        && let Some(wait) = wait
                        && wait <= Duration::from_secs(10)
                        && wait + Duration::from_millis(100) < left
                    {
                        waited = true;
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    let busy = if status.as_u16() == 429 {
                        "rate-limited the call (HTTP 429)"
                    } else {
                        "is unavailable (HTTP 503)"
                    };
                    let advice = match wait {
                        Some(wait) => format!(
                            "it asks to wait {} s before trying again",
                            wait.as_secs_f64().ceil() as u64
                        ),
                        None => "it gave no time to wait; try again later".to_owned(),
                    };
                    return Err(AaiError::new(
                        ErrorKind::ApiRequestFailed,
                        format!("{what}: the API {busy}; {advice}"),
                    )
                    .with_detail(json!({"status": status.as_u16(), "retry_after_seconds": wait.map(|w| w.as_secs_f64().ceil() as u64), "retried": waited})));
                }
                // A static key (api_key, bearer) the API turns away is wrong or revoked, not
                // expired: nothing refreshes it, the user must give another. An OAuth token
                // that fails again after a refresh has expired.
                let oauth = section.auth.as_ref().is_some_and(|a| a.kind == "oauth2");
                let rejected = status == reqwest::StatusCode::UNAUTHORIZED
                    || (status == reqwest::StatusCode::FORBIDDEN && !oauth);
                if rejected && credential.is_some() {
                    if oauth
                        && !refreshed
                        && let Some(fresh) = self.auth.refresh(descriptor, section).await?
                    {
                        credential = Some(fresh);
                        refreshed = true;
                        continue;
                    }
                    let (source, fix) = self.auth.source(descriptor).unwrap_or_else(|| {
                        ("the gateway's credentials".to_owned(), format!("set a new key with `aai-gateway auth set {}` or sign in with `aai-gateway auth login {}`", descriptor.app_id, descriptor.app_id))
                    });
                    let code = status.as_u16();
                    if oauth {
                        return Err(AaiError::new(
                            ErrorKind::AuthExpired,
                            format!("{what}: the API no longer accepts the sign-in from {source} (HTTP {code}); {fix}, then call again."),
                        ).with_detail(json!({"status": code, "source": source, "reason": "credential_expired"})));
                    }
                    return Err(AaiError::new(
                        ErrorKind::AuthRequired,
                        format!("{what}: the API rejected the key from {source} (HTTP {code}): it is wrong, revoked, or not allowed this call; {fix}, then call again."),
                    ).with_detail(json!({"status": code, "source": source, "reason": "credential_rejected"})));
                }
                let content_type = content_type_of(&response);
                let response_headers = response.headers().clone();
                let body = read_capped(response, self.settings.max_response_bytes, &what).await?;
                if status.is_success() && is_binary(&content_type, &body) {
                    // Images, PDFs, archives: passed on as bytes with their type, never as text.
                    use base64::Engine;
                    let mime = content_type
                        .split(';')
                        .next()
                        .map(str::trim)
                        .filter(|m| !m.is_empty())
                        .unwrap_or("application/octet-stream");
                    return Ok(json!({BINARY_KEY: {
                        "mime": mime,
                        "bytes": body.len(),
                        "base64": base64::engine::general_purpose::STANDARD.encode(&body),
                    }}));
                }
                let text = String::from_utf8_lossy(&body);
                if !status.is_success() {
                    let excerpt = scrub(&aai_descriptor::guide::shorten(&text, 1000), &secrets);
                    return Err(AaiError::new(
                        ErrorKind::ApiRequestFailed,
                        format!(
                            "{what}: the API answered HTTP {}{}",
                            status.as_u16(),
                            if excerpt.is_empty() {
                                String::new()
                            } else {
                                format!(": {excerpt}")
                            }
                        ),
                    )
                    .with_detail(json!({"status": status.as_u16(), "body": excerpt})));
                }
                let text = scrub(&text, &secrets);
                let mut value =
                    parse_output(&text, planned.parser.as_deref(), &content_type, &what)?;
                if let Some(max_pages) = planned.max_pages {
                    value = self
                        .more_pages(
                            client,
                            &planned,
                            credential.as_ref(),
                            value,
                            &response_headers,
                            max_pages,
                            deadline,
                            &what,
                        )
                        .await?;
                }
                if !planned.response_headers.is_empty() {
                    let picked: Map<String, Value> = planned
                        .response_headers
                        .iter()
                        .filter_map(|name| {
                            let value = response_headers.get(name.as_str())?.to_str().ok()?;
                            Some((
                                name.to_ascii_lowercase(),
                                Value::String(scrub(value, &secrets)),
                            ))
                        })
                        .collect();
                    value = json!({"body": value, "headers": picked});
                }
                return Ok(value);
            }
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let (planned, _) = self.planned(&invocation)?;
        Ok(json!({
            "http": {
                "method": planned.method.as_str(),
                "url": planned.url,
                "query": planned.query,
                "headers": planned.headers,
                "body": planned.body,
            }
        }))
    }
}
