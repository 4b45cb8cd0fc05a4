//! Web apps: `web_discover` (`https://<host>/.well-known/aai.json`, cached with its `.meta`),
//! the AAI registry refreshed in the background, and the credentials web tools use.

pub mod auth;
pub mod credentials;
mod tls;

pub use tls::{Presented, ServerIdentity, host_key, presented_certificate};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Platform};
use aai_executor::rest::{RestSettings, is_loopback};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::snapshot::App;
use crate::config::{Config, WebConfig};

/// A fetched descriptor is cached this long when the server says nothing (24 h).
pub const DEFAULT_TTL: u64 = 86_400;
/// Descriptors larger than this are refused.
const MAX_DESCRIPTOR_BYTES: usize = 1024 * 1024;

/// A file of `web.extra_ca_certs` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("web.extra_ca_certs: {0}")]
pub struct ExtraCaError(crate::config::CaFileError);

/// Why a web registry's list or a descriptor it names could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no registry_url is configured")]
    NoRegistry,
    /// Refused before anything was sent (a scheme the settings do not allow, no HTTP client).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Network(reqwest::Error),
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("larger than {0} bytes")]
    TooLarge(usize),
    #[error("{url}: not an app list: {source}")]
    NotAList {
        url: String,
        source: serde_json::Error,
    },
    /// The descriptor fetched is not a valid web app.
    #[error("{0}")]
    Invalid(String),
}

/// The `.meta` next to a cached descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// RFC 3339, UTC.
    pub fetched_at: String,
    pub ttl_seconds: u64,
    pub source_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
}

/// The answer of `GET <registry_url>/api/v1/apps` (published as
/// `schemas/registry-apps.schema.json`). Fields not named here are ignored, so a registry
/// may say more.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[schemars(title = "AAI registry app list (GET /api/v1/apps)")]
pub struct RegistryList {
    /// Every app the registry offers.
    pub apps: Vec<RegistryApp>,
}

/// One entry of the registry's app list.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct RegistryApp {
    /// The app's appId (reverse-DNS); its descriptor must have the same one.
    #[serde(rename = "appId")]
    pub app_id: String,
    /// A name people know the app by (`web_discover` finds it by this too).
    #[serde(default)]
    pub name: String,
    /// Where the app's `aai.json` is served (https).
    pub descriptor_url: String,
}

/// What a registry refresh did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefreshCounts {
    /// Entries the registry listed.
    pub listed: usize,
    /// Descriptors fetched, valid and kept (written or unchanged).
    pub kept: usize,
    /// Entries skipped: an invalid appId, an unreachable or invalid descriptor, another appId.
    pub skipped: usize,
}

impl RegistryList {
    /// The JSON Schema of the list, as published.
    pub fn schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(RegistryList)).unwrap_or_default()
    }
}

/// What `web_discover` found.
pub struct Discovered {
    pub app: Arc<App>,
    /// Set when the copy is from the cache because the site could not be reached.
    pub stale: Option<String>,
}

/// Web state shared by the gateway.
pub struct Web {
    pub client: aai_executor::HttpClient,
    pub auth: Arc<auth::GatewayAuth>,
    config: WebConfig,
    home: PathBuf,
    /// Apps found by `web_discover`, by appId and by host.
    discovered: RwLock<HashMap<String, Arc<App>>>,
    /// Whether earlier runs' discoveries were read from the cache yet.
    cache_loaded: std::sync::atomic::AtomicBool,
    /// The registry's list, once fetched.
    registry: RwLock<Vec<RegistryApp>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Seconds since the epoch as RFC 3339 UTC (`2026-11-22T10:00:00Z`).
pub fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

fn parse_rfc3339(text: &str) -> Option<u64> {
    humantime::parse_rfc3339(text)
        .ok()?
        .duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// The TTL a response asks for: `max-age`, 0 for `no-store`/`no-cache`, else 24 h.
/// The lifetime the response's `Cache-Control` gives, if it gives one.
fn ttl_given(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let control = headers.get("cache-control").and_then(|v| v.to_str().ok())?;
    Some(ttl_in(control))
}

fn ttl_in(control: &str) -> u64 {
    let mut ttl = DEFAULT_TTL;
    for directive in control.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return 0;
        }
        if let Some(age) = lower.strip_prefix("max-age=") {
            ttl = age.trim_matches('"').parse().unwrap_or(DEFAULT_TTL);
        }
    }
    ttl
}

impl Web {
    /// Web state from the config; `home` holds the credential store and registry copies.
    ///
    /// # Errors
    /// An `extra_ca_certs` file cannot be read.
    pub fn new(config: &Config, home: &Path) -> Result<Self, ExtraCaError> {
        let mut pems = Vec::new();
        for path in &config.web.extra_ca_certs {
            pems.push(crate::config::read_ca_file(path).map_err(ExtraCaError)?);
        }
        let client = aai_executor::HttpClient::new(pems);
        let auth = Arc::new(auth::GatewayAuth::new(
            credentials::Store::new(home),
            client.clone(),
            config.web.open_browser,
        ));
        Ok(Self {
            client,
            auth,
            config: config.web.clone(),
            home: home.to_path_buf(),
            discovered: RwLock::new(HashMap::new()),
            cache_loaded: std::sync::atomic::AtomicBool::new(false),
            registry: RwLock::new(Vec::new()),
        })
    }

    /// Settings for the REST executor.
    pub fn rest_settings(&self) -> RestSettings {
        RestSettings {
            client: self.client.clone(),
            max_response_bytes: self.config.max_response_bytes,
            allow_http_loopback: self.config.allow_http_loopback,
            base_urls: self
                .config
                .base_urls
                .iter()
                .map(|(app, url)| (app.clone(), url.clone()))
                .collect(),
            files: None,
        }
    }

    /// An app found earlier by `web_discover`, by appId or host.
    pub fn discovered(&self, name: &str) -> Option<Arc<App>> {
        self.load_cached();
        let key = host_key(name)
            .or_else(|| host_key(&format!("https://{name}/")))
            .unwrap_or_else(|| name.to_owned());
        let found = self.discovered.read().ok()?;
        found.get(name).or_else(|| found.get(&key)).cloned()
    }

    /// Where `web_discover` looks for `input` (a URL, a domain, or a registry name).
    ///
    /// # Errors
    /// APP_NOT_FOUND when `input` is none of these.
    pub async fn source_url(&self, input: &str) -> Result<String, AaiError> {
        let input = input.trim();
        if let Ok(url) = reqwest::Url::parse(input)
            && matches!(url.scheme(), "http" | "https")
            && let Some(host) = url.host_str()
        {
            let port = url.port().map_or_else(String::new, |p| format!(":{p}"));
            let scheme =
                if url.scheme() == "http" && is_loopback(host) && self.config.allow_http_loopback {
                    "http"
                } else {
                    "https"
                };
            return Ok(format!("{scheme}://{host}{port}/.well-known/aai.json"));
        }
        let domain_like = !input.is_empty()
            && (input.contains('.') || input.starts_with("localhost"))
            && input
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
        if domain_like {
            return Ok(format!("https://{input}/.well-known/aai.json"));
        }
        if let Some(app) = self.registry_entry(input).await {
            return Ok(app.descriptor_url);
        }
        Err(AaiError::new(
            ErrorKind::AppNotFound,
            format!(
                "{input:?} is not a URL or a domain{}; pass the web app's address, e.g. \"notion.com\"",
                if self.config.registry_url.is_some() {
                    ", and the registry lists no app by that name"
                } else {
                    " and no registry is configured (`web.registry_url`)"
                }
            ),
        ))
    }

    async fn registry_entry(&self, name: &str) -> Option<RegistryApp> {
        let find = |apps: &[RegistryApp]| {
            apps.iter()
                .find(|a| a.name.eq_ignore_ascii_case(name) || a.app_id.eq_ignore_ascii_case(name))
                .cloned()
        };
        if let Some(found) = self.registry.read().ok().and_then(|r| find(&r)) {
            return Some(found);
        }
        let apps = self.fetch_registry().await.ok()?;
        find(&apps)
    }

    /// `web_discover`: the descriptor at `input`'s `.well-known/aai.json`, from the cache while
    /// fresh, revalidated with its ETag after, the cached copy when the site cannot be reached.
    ///
    /// # Errors
    /// APP_NOT_FOUND (nothing there and nothing cached, with the reason), AAI_JSON_INVALID.
    pub async fn discover(&self, input: &str) -> Result<Discovered, AaiError> {
        self.discover_with(input, false).await
    }

    /// [`Web::discover`]; with `refresh`, the cache is bypassed and the site asked anew.
    ///
    /// # Errors
    /// As [`Web::discover`].
    pub async fn discover_with(&self, input: &str, refresh: bool) -> Result<Discovered, AaiError> {
        let source = self.source_url(input).await?;
        self.check_scheme(&source)?;
        let dir = self
            .config
            .cache_dir()
            .join(host_key(&source).unwrap_or_else(|| "unknown".into()));
        let cached = read_cache(&dir);
        let cached = if refresh { None } else { cached };
        if let Some((bytes, meta)) = &cached
            && meta.source_url == source
            && parse_rfc3339(&meta.fetched_at).is_some_and(|at| now() < at + meta.ttl_seconds)
        {
            let descriptor = parse_web(&source, bytes)?;
            return Ok(self.remember(descriptor, &source, None));
        }
        let client = self
            .client
            .get()
            .map_err(|m| AaiError::new(ErrorKind::AppNotFound, format!("{source}: {m}")))?;
        let mut request = client.get(&source).timeout(Duration::from_secs(20));
        if let Some((
            _,
            Meta {
                etag: Some(etag), ..
            },
        )) = &cached
        {
            request = request.header("if-none-match", etag);
        }
        let stale = |reason: String| -> Result<Discovered, AaiError> {
            match &cached {
                Some((bytes, meta)) => {
                    let descriptor = parse_web(&source, bytes)?;
                    let note = format!(
                        "{source} could not be reached ({reason}); this is the copy fetched at {}, which may be out of date.",
                        meta.fetched_at
                    );
                    Ok(self.remember(descriptor, &source, Some(note)))
                }
                None => Err(AaiError::new(
                    ErrorKind::AppNotFound,
                    format!("No web app descriptor at {source}: {reason}."),
                )
                .with_detail(json!({"source_url": source}))),
            }
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => return stale(error.without_url().to_string()),
        };
        let status = response.status();
        let given_ttl = ttl_given(response.headers());
        let ttl = given_ttl.unwrap_or(DEFAULT_TTL);
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if status == reqwest::StatusCode::NOT_MODIFIED
            && let Some((bytes, meta)) = &cached
        {
            let descriptor = parse_web(&source, bytes)?;
            // A 304 without its own lifetime keeps the one the server gave last.
            let meta = Meta {
                fetched_at: rfc3339(now()),
                ttl_seconds: given_ttl.unwrap_or(meta.ttl_seconds),
                etag: etag.or_else(|| meta.etag.clone()),
                source_url: source.clone(),
            };
            write_cache(&dir, None, &meta);
            return Ok(self.remember(descriptor, &source, None));
        }
        if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
            return Err(AaiError::new(
                ErrorKind::AppNotFound,
                format!(
                    "{source} answered HTTP {}: the site publishes no AAI descriptor.",
                    status.as_u16()
                ),
            )
            .with_detail(json!({"source_url": source, "status": status.as_u16()})));
        }
        if !status.is_success() {
            return stale(format!("HTTP {}", status.as_u16()));
        }
        let bytes = match read_limited(response, MAX_DESCRIPTOR_BYTES).await {
            Ok(bytes) => bytes,
            Err(reason) => return stale(reason.to_string()),
        };
        let descriptor = parse_web(&source, &bytes)?;
        let meta = Meta {
            fetched_at: rfc3339(now()),
            ttl_seconds: ttl,
            source_url: source.clone(),
            etag,
        };
        write_cache(&dir, Some(&bytes), &meta);
        Ok(self.remember(descriptor, &source, None))
    }

    fn check_scheme(&self, url: &str) -> Result<(), AaiError> {
        let parsed = reqwest::Url::parse(url).ok();
        let ok = parsed.as_ref().is_some_and(|u| {
            u.scheme() == "https"
                || (u.scheme() == "http"
                    && self.config.allow_http_loopback
                    && u.host_str().is_some_and(is_loopback))
        });
        if ok {
            Ok(())
        } else {
            Err(AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "{url}: only https is used for web apps (plain http only for 127.0.0.1/localhost with `web.allow_http_loopback`)"
                ),
            ))
        }
    }

    fn remember(&self, descriptor: Descriptor, source: &str, stale: Option<String>) -> Discovered {
        let app = Arc::new(App::standalone(
            Arc::new(descriptor),
            Platform::Web,
            PathBuf::from(source),
        ));
        if let Ok(mut found) = self.discovered.write() {
            found.insert(app.id().to_owned(), app.clone());
            if let Some(host) = host_key(source) {
                found.insert(host, app.clone());
            }
        }
        self.note_discovered(source, true);
        Discovered { app, stale }
    }

    /// `AAI_HOME/web-discovered.json`: the sources this user discovered, so they are found
    /// again after a restart (the cache itself is shared by every AAI_HOME of the user).
    fn discovered_list(&self) -> PathBuf {
        self.home.join("web-discovered.json")
    }

    fn discovered_sources(&self) -> Vec<String> {
        std::fs::read(self.discovered_list())
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Adds (or removes) `source` in the list of discovered sources.
    fn note_discovered(&self, source: &str, keep: bool) {
        let mut sources = self.discovered_sources();
        let present = sources.iter().any(|s| s == source);
        if keep == present {
            return;
        }
        if keep {
            sources.push(source.to_owned());
        } else {
            sources.retain(|s| s != source);
        }
        let _ = crate::private::create_dir(&self.home);
        if let Ok(text) = serde_json::to_vec_pretty(&sources) {
            write_atomic(&self.home, "web-discovered.json", &text);
        }
    }

    /// Apps this user found by `web_discover` in earlier runs, from the cache (once per
    /// process): they stay findable across restarts until forgotten.
    fn load_cached(&self) {
        if self
            .cache_loaded
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        for source in self.discovered_sources() {
            let dir = self
                .config
                .cache_dir()
                .join(host_key(&source).unwrap_or_else(|| "unknown".into()));
            let Some((bytes, meta)) = read_cache(&dir) else {
                continue;
            };
            match parse_web(&meta.source_url, &bytes) {
                Ok(descriptor) => {
                    let fresh = self
                        .discovered
                        .read()
                        .is_ok_and(|found| !found.contains_key(&descriptor.app_id));
                    if fresh && let Ok(mut found) = self.discovered.write() {
                        let app = Arc::new(App::standalone(
                            Arc::new(descriptor),
                            Platform::Web,
                            PathBuf::from(&meta.source_url),
                        ));
                        found.insert(app.id().to_owned(), app.clone());
                        if let Some(host) = host_key(&meta.source_url) {
                            found.insert(host, app);
                        }
                    }
                }
                Err(error) => tracing::info!("remembered web app skipped: {}", error.message),
            }
        }
    }

    /// Forgets a discovered app for good: it leaves this user's list, the cache and this
    /// run's memory. `name` is an appId, a URL or a domain. Returns the appIds forgotten.
    pub fn forget_cached(&self, name: &str) -> Vec<String> {
        self.load_cached();
        let key = host_key(name).or_else(|| host_key(&format!("https://{name}/")));
        let mut forgotten = Vec::new();
        for source in self.discovered_sources() {
            let host = host_key(&source).unwrap_or_else(|| "unknown".into());
            let dir = self.config.cache_dir().join(&host);
            let app_id = read_cache(&dir)
                .and_then(|(bytes, meta)| parse_web(&meta.source_url, &bytes).ok())
                .map(|d| d.app_id);
            if app_id.as_deref() == Some(name) || key.as_deref() == Some(host.as_str()) {
                let _ = std::fs::remove_dir_all(&dir);
                self.note_discovered(&source, false);
                if let Some(app_id) = app_id {
                    self.forget_discovered(&app_id);
                    forgotten.push(app_id);
                }
            }
        }
        forgotten
    }

    /// Forgets a discovered app (by appId and by every host it was found under).
    pub fn forget_discovered(&self, app_id: &str) {
        if let Ok(mut found) = self.discovered.write() {
            found.retain(|_, app| app.id() != app_id);
        }
    }

    /// Fetches the registry's list (`GET <registry_url>/api/v1/apps`).
    ///
    /// # Errors
    /// Why the list could not be had.
    pub async fn fetch_registry(&self) -> Result<Vec<RegistryApp>, FetchError> {
        let base = self
            .config
            .registry_url
            .as_deref()
            .ok_or(FetchError::NoRegistry)?;
        let url = format!("{}/api/v1/apps", base.trim_end_matches('/'));
        let bytes = self.get_bytes(&url, 8 * MAX_DESCRIPTOR_BYTES).await?;
        let list: RegistryList = serde_json::from_slice(&bytes)
            .map_err(|source| FetchError::NotAList { url, source })?;
        if let Ok(mut registry) = self.registry.write() {
            registry.clone_from(&list.apps);
        }
        Ok(list.apps)
    }

    /// Refreshes `AAI_HOME/web/<appId>/aai.json` from the registry: new and changed
    /// descriptors are written (discovery picks them up and tells clients), ones the registry
    /// dropped are removed. Returns how many apps the registry lists.
    ///
    /// # Errors
    /// Why the registry could not be read; a single bad descriptor is logged and skipped.
    pub async fn refresh_registry(&self) -> Result<RefreshCounts, FetchError> {
        let apps = self.fetch_registry().await?;
        let root = self.home.join("web");
        let mut keep = Vec::new();
        let mut counts = RefreshCounts {
            listed: apps.len(),
            ..RefreshCounts::default()
        };
        for entry in &apps {
            if !aai_descriptor::is_valid_app_id(&entry.app_id) {
                tracing::warn!(app = %entry.app_id, "registry entry with an invalid appId skipped");
                counts.skipped += 1;
                continue;
            }
            // A copy from last time stays while the registry still lists the app, even when
            // its descriptor cannot be fetched right now.
            keep.push(entry.app_id.clone());
            match self.fetch_descriptor(&entry.descriptor_url).await {
                Ok((bytes, descriptor)) if descriptor.app_id == entry.app_id => {
                    let dir = root.join(&entry.app_id);
                    let path = dir.join("aai.json");
                    if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
                        write_atomic(&dir, "aai.json", &bytes);
                    }
                    counts.kept += 1;
                }
                Ok((_, descriptor)) => {
                    counts.skipped += 1;
                    tracing::warn!(app = %entry.app_id, found = %descriptor.app_id, "registry descriptor has another appId; skipped")
                }
                Err(error) => {
                    counts.skipped += 1;
                    tracing::warn!(app = %entry.app_id, %error, "registry descriptor skipped")
                }
            }
        }
        for old in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let name = old.file_name().to_string_lossy().into_owned();
            if !keep.contains(&name) {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
        Ok(counts)
    }

    /// A successful GET of `url` (https, or loopback http when allowed), at most `max` bytes.
    async fn get_bytes(&self, url: &str, max: usize) -> Result<Vec<u8>, FetchError> {
        self.check_scheme(url)
            .map_err(|e| FetchError::Refused(e.message))?;
        let response = self
            .client
            .get()
            .map_err(|e| FetchError::Refused(e.to_string()))?
            .get(url)
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .map_err(|e| FetchError::Network(e.without_url()))?;
        if !response.status().is_success() {
            return Err(FetchError::Status {
                url: url.to_owned(),
                status: response.status().as_u16(),
            });
        }
        read_limited(response, max).await
    }

    async fn fetch_descriptor(&self, url: &str) -> Result<(Vec<u8>, Descriptor), FetchError> {
        let bytes = self.get_bytes(url, MAX_DESCRIPTOR_BYTES).await?;
        let descriptor = parse_web(url, &bytes).map_err(|e| FetchError::Invalid(e.message))?;
        Ok((bytes, descriptor))
    }
}

fn parse_web(source: &str, bytes: &[u8]) -> Result<Descriptor, AaiError> {
    let mut descriptor = aai_descriptor::parse(source, bytes).map_err(|error| {
        AaiError::new(
            ErrorKind::AaiJsonInvalid,
            format!("The descriptor at {source} is invalid:\n{error}"),
        )
    })?;
    if descriptor.platforms.web.is_none() {
        return Err(AaiError::new(
            ErrorKind::AaiJsonInvalid,
            format!(
                "The descriptor at {source} has no `web` section, so it cannot be used as a web app."
            ),
        ));
    }
    descriptor.fetched = true;
    Ok(descriptor)
}

async fn read_limited(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, FetchError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| FetchError::Network(e.without_url()))?
    {
        if body.len() + chunk.len() > max {
            return Err(FetchError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn read_cache(dir: &Path) -> Option<(Vec<u8>, Meta)> {
    let bytes = std::fs::read(dir.join("aai.json")).ok()?;
    let meta = serde_json::from_slice(&std::fs::read(dir.join("aai.json.meta")).ok()?).ok()?;
    Some((bytes, meta))
}

fn write_cache(dir: &Path, bytes: Option<&[u8]>, meta: &Meta) {
    if let Some(bytes) = bytes {
        write_atomic(dir, "aai.json", bytes);
    }
    let meta = serde_json::to_vec_pretty(meta).unwrap_or_default();
    write_atomic(dir, "aai.json.meta", &meta);
}

/// Writes `dir/name` through a temporary file and a rename; a failure is logged (a cache or a
/// registry copy is never worth failing a call for).
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) {
    let result = std::fs::create_dir_all(dir).and_then(|()| {
        let temp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&temp, bytes)?;
        std::fs::rename(&temp, dir.join(name))
    });
    if let Err(error) = result {
        tracing::warn!(dir = %dir.display(), %error, "cannot write {name}");
    }
}

/// The guide `web_discover` returns.
pub fn discovered_guide(found: &Discovered) -> Value {
    let descriptor = match found.app.descriptor() {
        Ok(descriptor) => descriptor,
        Err(error) => return Value::String(error.message),
    };
    let tools = descriptor.tools(Platform::Web).unwrap_or_default();
    let mut text = aai_descriptor::guide::guide(&descriptor, &tools);
    if let Some(note) = &found.stale {
        text = format!("Note: {note}\n{text}");
    }
    Value::String(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_follows_cache_control() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(ttl_given(&headers).unwrap_or(DEFAULT_TTL), DEFAULT_TTL);
        headers.insert(
            "cache-control",
            "public, max-age=120".parse().expect("header"),
        );
        assert_eq!(ttl_given(&headers), Some(120));
        headers.insert("cache-control", "no-store".parse().expect("header"));
        assert_eq!(ttl_given(&headers), Some(0));
    }

    #[test]
    fn cache_folders_are_named_by_host() {
        assert_eq!(
            host_key("https://notion.com/.well-known/aai.json").as_deref(),
            Some("notion.com")
        );
        assert_eq!(
            host_key("https://127.0.0.1:8443/x").as_deref(),
            Some("127.0.0.1_8443")
        );
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(parse_rfc3339("1970-01-01T00:01:00Z"), Some(60));
    }
}
