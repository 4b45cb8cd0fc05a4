//! Web apps against real HTTPS servers on 127.0.0.1 with a generated test CA: discovery and
//! its cache, the registry, the REST executor, API keys and OAuth 2.0 with PKCE.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aai_descriptor::{ErrorKind, Platform};
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Config;
use aai_engine::pipeline::{Gateway, Pipeline as _};
use aai_executor::Executors;
use aai_server::mcp::AaiServer;
use aai_test_support::http::{Request, Response, TestCa, TestServer};
use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

/// The secrets the servers hand out; no log, audit row, result or error may contain them.
const API_KEY: &str = "sk-test-4f9d2a7c1e";
const ACCESS_1: &str = "at-first-8c1f0b";
const ACCESS_2: &str = "at-second-3e9d7a";
const REFRESH: &str = "rt-refresh-5b2c4d";

fn descriptor(base: &str, auth: Value) -> Value {
    json!({
        "schema_version": "1.0", "appId": "com.example.tasks", "name": "Tasks",
        "description": "A task tracker with a REST API",
        "platforms": {"web": {
            "automation": "restapi", "base_url": format!("{base}/api"), "auth": auth,
            "default_headers": {"X-Client": "aai", "X-Trace": "default"},
            "tools": [
                {"name": "get_task", "description": "Get a task", "readOnly": true, "endpoint": "/tasks/${id}",
                 "parameters": {"type": "object", "properties": {"id": {"type": "string"}, "fields": {"type": "string"}}, "required": ["id"]},
                 "query_params": {"fields": "${fields}"}, "headers": {"X-Trace": "tool"}},
                {"name": "create_task", "description": "Create a task", "method": "POST", "endpoint": "/tasks",
                 "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "count": {"type": "integer"}, "tags": {"type": "array"}, "note": {"type": "string"}}, "required": ["title", "count"]},
                 "body": {"title": "Task: ${title}", "count": "${count}", "tags": "${tags}", "note": "${note}", "source": "aai"}},
                {"name": "fail", "description": "Fails", "endpoint": "/fail"},
                {"name": "slow", "description": "Answers late", "endpoint": "/slow", "timeout": 1},
                {"name": "plain", "description": "Text", "endpoint": "/me", "output_parser": "text"},
                {"name": "big", "description": "A big answer", "endpoint": "/big"},
                {"name": "me", "description": "Who am I", "endpoint": "/me", "readOnly": true},
                {"name": "limited", "description": "Rate-limited once", "endpoint": "/limited", "readOnly": true},
                {"name": "search", "description": "Search by tags", "endpoint": "/search",
                 "parameters": {"type": "object", "properties": {"tag": {"type": "array", "items": {"type": "string"}}, "q": {"type": "string"}}},
                 "query_params": {"tag": "${tag}", "q": "${q}"}},
                {"name": "busy", "description": "Unavailable", "endpoint": "/busy", "readOnly": true},
                {"name": "items", "description": "Paged items", "endpoint": "/items", "readOnly": true,
                 "response_headers": ["X-RateLimit-Remaining"], "paginate": {"max_pages": 2}},
                {"name": "form", "description": "A form post", "method": "POST", "endpoint": "/echo-body", "body_type": "form",
                 "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array"}, "note": {"type": "string"}}, "required": ["name"]},
                 "body": {"name": "${name}", "tags": "${tags}", "note": "Note: ${note}"}},
                {"name": "wrapped", "description": "Pages with their items under data", "endpoint": "/wrapped", "readOnly": true,
                 "paginate": {"items": "/data"}},
                {"name": "tagged_comma", "description": "Tags, comma-joined", "endpoint": "/tagged", "query_style": "comma",
                 "parameters": {"type": "object", "properties": {"tag": {"type": "array"}}}, "query_params": {"tag": "${tag}"}},
                {"name": "tagged_brackets", "description": "Tags, with brackets", "endpoint": "/tagged", "query_style": "brackets",
                 "parameters": {"type": "object", "properties": {"tag": {"type": "array"}}}, "query_params": {"tag": "${tag}"}},
                {"name": "upload", "description": "Upload a document", "method": "POST", "endpoint": "/upload", "body_type": "multipart",
                 "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "path": {"type": "string"}}, "required": ["title", "path"]},
                 "body": {"title": "${title}", "doc": {"file": "${path}", "content_type": "text/plain"}}},
                {"name": "raw", "description": "A CSV upload", "method": "POST", "endpoint": "/echo-body", "body_type": "text",
                 "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "opt": {"type": "string"}}, "required": ["text"]},
                 "body": "${text}", "headers": {"Content-Type": "text/csv", "X-Opt": "v=${opt}"}},
                {"name": "slow_read", "description": "Answers late", "endpoint": "/slow-read", "readOnly": true, "timeout": 1}
            ]
        }}
    })
}

/// The test web app: descriptor, REST API, OAuth authorization server and registry.
struct App {
    ca: TestCa,
    server: TestServer,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    base: Mutex<String>,
    auth: Mutex<Value>,
    max_age: AtomicUsize,
    /// Access tokens the API accepts.
    valid: Mutex<Vec<String>>,
    /// PKCE challenges by code.
    codes: Mutex<HashMap<String, String>>,
    refresh_works: AtomicBool,
    /// Requests to /api/limited so far.
    limited: AtomicUsize,
}

impl State {
    fn handle(&self, request: &Request) -> Response {
        let base = self.base.lock().expect("base").clone();
        let path = request.path().to_owned();
        let query: HashMap<String, String> = url::form_urlencoded::parse(
            request
                .uri
                .split_once('?')
                .map_or("", |(_, q)| q)
                .as_bytes(),
        )
        .into_owned()
        .collect();
        match (request.method.as_str(), path.as_str()) {
            ("GET", "/.well-known/aai.json") => {
                if request.header("if-none-match") == Some("\"v1\"") {
                    return Response::new(304, "").header("etag", "\"v1\"");
                }
                let doc = descriptor(&base, self.auth.lock().expect("auth").clone());
                Response::json(200, &doc).header("etag", "\"v1\"").header(
                    "cache-control",
                    &format!("max-age={}", self.max_age.load(Ordering::SeqCst)),
                )
            }
            ("GET", "/registry/api/v1/apps") => Response::json(
                200,
                &json!({"apps": [{"appId": "com.example.tasks", "name": "Tasks", "descriptor_url": format!("{base}/.well-known/aai.json")}]}),
            ),
            ("GET", "/oauth/authorize") => {
                let code = format!("code-{}", self.codes.lock().expect("codes").len());
                assert_eq!(
                    query.get("code_challenge_method").map(String::as_str),
                    Some("S256")
                );
                assert_eq!(query.get("response_type").map(String::as_str), Some("code"));
                self.codes
                    .lock()
                    .expect("codes")
                    .insert(code.clone(), query["code_challenge"].clone());
                let mut location = url::Url::parse(&query["redirect_uri"]).expect("redirect_uri");
                location
                    .query_pairs_mut()
                    .append_pair("code", &code)
                    .append_pair("state", &query["state"]);
                Response::new(302, "").header("location", location.as_str())
            }
            ("POST", "/oauth/token") => {
                let form: HashMap<String, String> = url::form_urlencoded::parse(&request.body)
                    .into_owned()
                    .collect();
                match form.get("grant_type").map(String::as_str) {
                    Some("authorization_code") => {
                        let challenge = self
                            .codes
                            .lock()
                            .expect("codes")
                            .remove(form.get("code").map_or("", String::as_str));
                        let verifier = form.get("code_verifier").cloned().unwrap_or_default();
                        let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                            .encode(sha2::Sha256::digest(verifier.as_bytes()));
                        if challenge.as_deref() != Some(computed.as_str()) {
                            return Response::json(400, &json!({"error": "invalid_grant"}));
                        }
                        self.valid.lock().expect("valid").push(ACCESS_1.into());
                        Response::json(
                            200,
                            &json!({"access_token": ACCESS_1, "token_type": "Bearer", "expires_in": 3600, "refresh_token": REFRESH, "scope": "tasks:read"}),
                        )
                    }
                    Some("refresh_token")
                        if self.refresh_works.load(Ordering::SeqCst)
                            && form.get("refresh_token").map(String::as_str) == Some(REFRESH) =>
                    {
                        self.valid.lock().expect("valid").push(ACCESS_2.into());
                        Response::json(
                            200,
                            &json!({"access_token": ACCESS_2, "token_type": "Bearer", "expires_in": 3600}),
                        )
                    }
                    _ => Response::json(400, &json!({"error": "invalid_grant"})),
                }
            }
            ("GET", "/api/limited") => {
                // Rate-limited once, then served.
                if self.limited.fetch_add(1, Ordering::SeqCst) == 0 {
                    Response::json(429, &json!({"error": "slow down"})).header("retry-after", "1")
                } else {
                    Response::json(200, &json!({"served": true}))
                }
            }
            ("GET", "/api/items") => {
                let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
                let mut response = Response::json(
                    200,
                    &json!([format!("item{page}a"), format!("item{page}b")]),
                )
                .header("x-ratelimit-remaining", &format!("{}", 100 - page));
                if page < 3 {
                    response = response.header(
                        "link",
                        &format!("<{base}/api/items?page={}>; rel=\"next\"", page + 1),
                    );
                }
                response
            }
            ("GET", "/api/wrapped") => {
                let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
                let mut response = Response::json(
                    200,
                    &json!({"data": [page * 10, page * 10 + 1], "page": page}),
                );
                if page < 2 {
                    response = response.header(
                        "link",
                        &format!("<{base}/api/wrapped?page={}>; rel=\"next\"", page + 1),
                    );
                }
                response
            }
            ("GET", "/api/tagged") => Response::json(200, &json!({"raw": request.uri})),
            ("POST", "/api/upload") => Response::json(
                200,
                &json!({"content_type": request.header("content-type"), "body": request.body_text()}),
            ),
            ("POST", "/api/echo-body") => Response::json(
                200,
                &json!({"content_type": request.header("content-type"), "body": request.body_text(), "x_opt": request.header("x-opt")}),
            ),
            ("GET", "/api/busy") => {
                Response::json(503, &json!({"error": "maintenance"})).header("retry-after", "120")
            }
            ("GET", "/api/slow-read") => {
                std::thread::sleep(std::time::Duration::from_millis(3000));
                Response::json(200, &json!({}))
            }
            (_, p) if p.starts_with("/api/") => self.api(request, &p[4..], &query),
            _ => Response::new(404, "not found"),
        }
    }

    fn api(&self, request: &Request, path: &str, query: &HashMap<String, String>) -> Response {
        let authorization = request
            .header("authorization")
            .unwrap_or_default()
            .to_owned();
        let key = request.header("x-api-key").unwrap_or_default().to_owned();
        let bearer_ok = self
            .valid
            .lock()
            .expect("valid")
            .iter()
            .any(|t| authorization == format!("Bearer {t}"));
        let authorized = key == API_KEY || bearer_ok;
        if !authorized {
            return Response::json(401, &json!({"error": "unauthorized"}));
        }
        match path {
            "/fail" => Response::new(
                500,
                format!("internal error; you sent {authorization}{key}"),
            ),
            "/big" => Response::new(200, vec![b'x'; 4096]),
            "/slow" => {
                std::thread::sleep(std::time::Duration::from_millis(2500));
                Response::json(200, &json!({}))
            }
            "/me" => Response::json(200, &json!({"user": "ada"})),
            "/tasks" => {
                let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                Response::json(201, &json!({"created": body}))
            }
            _ => Response::json(
                200,
                &json!({
                    "path": path, "raw": request.uri, "query": query,
                    "x_client": request.header("x-client"), "x_trace": request.header("x-trace"),
                }),
            ),
        }
    }
}

impl App {
    fn start(auth: Value) -> Self {
        let ca = TestCa::new();
        let state = Arc::new(State::default());
        *state.auth.lock().expect("auth") = auth;
        state.max_age.store(3600, Ordering::SeqCst);
        state.refresh_works.store(true, Ordering::SeqCst);
        let handler_state = state.clone();
        let server = TestServer::https(&ca, move |request| handler_state.handle(request));
        *state.base.lock().expect("base") = server.url();
        // The auth template may point at this server: `__BASE__` is its URL.
        let auth = state
            .auth
            .lock()
            .expect("auth")
            .to_string()
            .replace("__BASE__", &server.url());
        *state.auth.lock().expect("auth") = serde_json::from_str(&auth).expect("auth");
        Self { ca, server, state }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.server.addr.port())
    }

    fn seen(&self, path: &str) -> Vec<Request> {
        self.server
            .seen()
            .into_iter()
            .filter(|r| r.path() == path)
            .collect()
    }
}

struct Setup {
    gateway: Arc<Gateway>,
    server: AaiServer,
    dir: tempfile::TempDir,
}

fn gateway(app: &App, dir: tempfile::TempDir, extra: Value) -> Setup {
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &app.ca.pem).expect("ca");
    let mut config = json!({
        "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}},
        "web": {"extra_ca_certs": [ca], "cache_dir": dir.path().join("cache"), "open_browser": false,
                "registry_url": format!("{}/registry", app.server.url())},
    });
    if let (Some(web), Some(more)) = (config["web"].as_object_mut(), extra.as_object()) {
        web.extend(more.clone());
    }
    let config: Config = serde_json::from_value(config).expect("config");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let gateway = aai_compose::kit_gateway(
        Snapshot::build(&[], &[Platform::Web], true),
        config,
        Executors::new(),
        home.join("data.db"),
    );
    Setup {
        server: AaiServer::new(gateway.clone()),
        gateway,
        dir,
    }
}

impl Setup {
    async fn exec(&self, tool: &str, args: Value) -> Result<Value, aai_descriptor::AaiError> {
        self.gateway
            .exec("test", "com.example.tasks", tool, &args)
            .await
    }

    /// `web_discover` of the test app.
    async fn discover(&self, app: &App) {
        self.server
            .dispatch("test", "web_discover", json!({"url": app.host()}))
            .await
            .expect("discovered");
    }

    fn meta(&self, app: &App) -> Value {
        let path = self
            .dir
            .path()
            .join("cache")
            .join(app.host().replace(':', "_"))
            .join("aai.json.meta");
        serde_json::from_slice(&std::fs::read(path).expect("meta")).expect("json")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_caches_revalidates_and_falls_back_when_offline() {
    let app = App::start(json!({"type": "api_key", "env_var": "AAI_TEST_UNSET_KEY"}));
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    let guide = setup
        .server
        .dispatch("test", "web_discover", json!({"url": app.host()}))
        .await
        .expect("discovered");
    let guide = guide.as_str().expect("text").to_owned();
    assert!(
        guide.contains("Tasks (com.example.tasks)") && guide.contains("get_task(id: string"),
        "{guide}"
    );
    let meta = setup.meta(&app);
    assert_eq!(meta["ttl_seconds"], 3600);
    assert_eq!(meta["etag"], "\"v1\"");
    assert_eq!(
        meta["source_url"],
        format!("https://{}/.well-known/aai.json", app.host())
    );
    assert!(
        meta["fetched_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    // Fresh: served from the cache; the alias and a full URL find the same app.
    setup
        .server
        .dispatch(
            "test",
            "web:discover",
            json!({"url": format!("{}/some/page", app.server.url())}),
        )
        .await
        .expect("cached");
    assert_eq!(app.seen("/.well-known/aai.json").len(), 1);

    // Expired: revalidated with the ETag (304), and the TTL renewed.
    let mut meta = setup.meta(&app);
    meta["fetched_at"] = json!("2000-01-01T00:00:00Z");
    let meta_path = setup
        .dir
        .path()
        .join("cache")
        .join(app.host().replace(':', "_"))
        .join("aai.json.meta");
    std::fs::write(&meta_path, meta.to_string()).expect("age the cache");
    setup
        .server
        .dispatch("test", "web_discover", json!({"url": app.host()}))
        .await
        .expect("revalidated");
    let fetches = app.seen("/.well-known/aai.json");
    assert_eq!(fetches.len(), 2);
    assert_eq!(fetches[1].header("if-none-match"), Some("\"v1\""));
    assert_ne!(setup.meta(&app)["fetched_at"], "2000-01-01T00:00:00Z");

    // Offline with a stale copy: the copy, with a note.
    let host = app.host();
    std::fs::write(&meta_path, meta.to_string()).expect("age the cache");
    drop(app);
    let guide = setup
        .server
        .dispatch("test", "web_discover", json!({"url": host}))
        .await
        .expect("stale copy");
    assert!(
        guide
            .as_str()
            .is_some_and(|g| g.starts_with("Note: ") && g.contains("may be out of date")),
        "{guide}"
    );

    // Offline with nothing cached: APP_NOT_FOUND with the reason.
    let other = gateway(
        &App::start(json!({"type": "none"})),
        tempfile::tempdir().expect("dir"),
        json!({}),
    );
    let error = other
        .server
        .dispatch("test", "web_discover", json!({"url": host}))
        .await
        .expect_err("nothing there");
    assert_eq!(error.kind, ErrorKind::AppNotFound);
    assert!(error.message.contains(&host), "{}", error.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_only_for_loopback_when_allowed() {
    let server = TestServer::http(|_| Response::json(200, &json!({})));
    let app = App::start(json!({"type": "none"}));
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    // Not allowed: an http URL is fetched over https, which this plain server cannot speak.
    let error = setup
        .server
        .dispatch("test", "web_discover", json!({"url": server.url()}))
        .await
        .expect_err("no http");
    assert_eq!(error.kind, ErrorKind::AppNotFound);
    assert!(server.seen().is_empty());
    let allowed = gateway(
        &app,
        tempfile::tempdir().expect("dir"),
        json!({"allow_http_loopback": true}),
    );
    let error = allowed
        .server
        .dispatch("test", "web_discover", json!({"url": server.url()}))
        .await
        .expect_err("not a descriptor");
    assert_eq!(error.kind, ErrorKind::AaiJsonInvalid, "{}", error.message);
    assert_eq!(server.seen().len(), 1, "fetched over http");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_calls_build_requests_from_the_descriptor() {
    let _logs = logs();
    let app = App::start(
        json!({"type": "api_key", "key_placement": "header", "key_name": "X-API-Key", "env_var": "AAI_TEST_TASKS_KEY_UNSET"}),
    );
    let setup = gateway(
        &app,
        tempfile::tempdir().expect("dir"),
        json!({"max_response_bytes": 1024}),
    );
    setup.discover(&app).await;

    // No key anywhere: AUTH_CONFIG_INVALID naming the variable and the command.
    let error = setup
        .exec("get_task", json!({"id": "1"}))
        .await
        .expect_err("no key");
    assert_eq!(error.kind, ErrorKind::AuthConfigInvalid);
    assert!(
        error.message.contains("AAI_TEST_TASKS_KEY_UNSET")
            && error
                .message
                .contains("aai-gateway auth set com.example.tasks"),
        "{}",
        error.message
    );

    let store = aai_engine::web::credentials::Store::new(&setup.dir.path().join("home"));
    store
        .put(
            "com.example.tasks",
            &aai_engine::web::credentials::Stored {
                secret: Some(API_KEY.into()),
                oauth: None,
                // Bound to the test app's origin, as `auth set` binds it.
                origin: Some(format!("https://{}", app.host())),
                ..Default::default()
            },
        )
        .expect("store");
    let result = setup
        .exec("get_task", json!({"id": "a/b c?d#e", "fields": "x&y=z"}))
        .await
        .expect("get");
    assert_eq!(
        result["raw"],
        "/api/tasks/a%2Fb%20c%3Fd%23e?fields=x%26y%3Dz"
    );
    assert_eq!(result["query"], json!({"fields": "x&y=z"}));
    assert_eq!(result["x_client"], "aai");
    assert_eq!(
        result["x_trace"], "tool",
        "tool headers override default_headers"
    );
    // An optional query parameter left out is left out.
    let result = setup
        .exec("get_task", json!({"id": "7"}))
        .await
        .expect("get");
    assert_eq!(result["raw"], "/api/tasks/7");

    let created = setup
        .exec(
            "create_task",
            json!({"title": "Ship \"it\"", "count": 3, "tags": ["a", "b"]}),
        )
        .await
        .expect("post");
    assert_eq!(
        created,
        json!({"created": {"title": "Task: Ship \"it\"", "count": 3, "tags": ["a", "b"], "source": "aai"}})
    );

    let error = setup.exec("fail", json!({})).await.expect_err("500");
    assert_eq!(error.kind, ErrorKind::ApiRequestFailed);
    assert_eq!(
        error.detail.as_ref().and_then(|d| d.get("status")),
        Some(&json!(500))
    );
    assert!(
        error.message.contains("internal error") && !error.message.contains(API_KEY),
        "{}",
        error.message
    );

    let error = setup.exec("big", json!({})).await.expect_err("too big");
    assert_eq!(error.kind, ErrorKind::ApiRequestFailed);
    assert!(error.message.contains("larger than 1024 bytes"));

    assert_eq!(
        setup.exec("plain", json!({})).await.expect("text"),
        json!("{\"user\":\"ada\"}")
    );
    let error = setup.exec("slow", json!({})).await.expect_err("late");
    assert_eq!(error.kind, ErrorKind::Timeout, "{}", error.message);

    // The key from the store went in the header the descriptor names.
    assert_eq!(
        app.seen("/api/tasks/7")[0].header("x-api-key"),
        Some(API_KEY)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_copies_are_offered_like_installed_apps() {
    let app = App::start(json!({"type": "none"}));
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    assert_eq!(
        setup
            .gateway
            .web()
            .refresh_registry()
            .await
            .expect("refreshed"),
        aai_engine::web::RefreshCounts {
            listed: 1,
            kept: 1,
            skipped: 0
        }
    );
    let home = setup.dir.path().join("home");
    assert!(home.join("web/com.example.tasks/aai.json").exists());
    let options = aai_engine::catalog::discovery::ScanOptions {
        home: home.clone(),
        ..aai_engine::catalog::discovery::ScanOptions::default()
    };
    let registry = aai_engine::scan_once(&options, &[Platform::Linux, Platform::Web]);
    assert_eq!(registry.apps.len(), 1);
    assert_eq!(registry.apps[0].id(), "com.example.tasks");
    assert_eq!(registry.apps[0].platform, Platform::Web);
    // A registry name also works for web_discover.
    let guide = setup
        .server
        .dispatch("test", "web_discover", json!({"url": "Tasks"}))
        .await
        .expect("by name");
    assert!(
        guide
            .as_str()
            .is_some_and(|g| g.contains("com.example.tasks"))
    );
}

/// Everything the gateway logs in this test binary, at debug level.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: std::sync::OnceLock<Arc<Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_ansi(false)
            .with_writer(move || LogWriter(sink.clone()))
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        buffer
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Answers every question with "allow" and keeps what it was asked.
#[derive(Default)]
struct ConfirmingAsker {
    asked: Mutex<Vec<String>>,
}

impl aai_engine::consent::Asker for ConfirmingAsker {
    fn ask<'a>(
        &'a self,
        question: &'a aai_engine::consent::Question,
    ) -> aai_executor::BoxFuture<
        'a,
        Result<aai_engine::consent::Answer, aai_engine::consent::Unanswered>,
    > {
        self.asked.lock().expect("asked").push(question.message());
        Box::pin(async { Ok(aai_engine::consent::Answer::AlwaysTool) })
    }
}

/// Plays the user's browser: opens the authorization URL and follows the redirect back to
/// the gateway's loopback listener.
async fn authorize_in_browser(app: &App, url: &str) {
    let ca = reqwest::Certificate::from_pem(app.ca.pem.as_bytes()).expect("ca");
    let browser = reqwest::Client::builder()
        .tls_certs_merge([ca])
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("browser");
    let redirect = browser.get(url).send().await.expect("authorize");
    assert_eq!(redirect.status(), 302);
    let location = redirect.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();
    assert!(location.starts_with("http://127.0.0.1:"), "{location}");
    let back = browser
        .get(&location)
        .send()
        .await
        .expect("redirect to the gateway");
    assert_eq!(
        back.status(),
        200,
        "{}",
        back.text().await.unwrap_or_default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_with_pkce_refresh_and_expiry() {
    let logs = logs();
    let app = App::start(json!({"type": "oauth2", "client_id": "aai-test-client",
        "auth_url": "__BASE__/oauth/authorize", "token_url": "__BASE__/oauth/token", "scopes": ["tasks:read"]}));
    let base = app.server.url();
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;

    // First the user confirms the sign-in domain and its certificate.
    let error = setup
        .exec("me", json!({}))
        .await
        .expect_err("needs confirmation");
    assert_eq!(error.kind, ErrorKind::PermissionDenied, "{}", error.message);
    assert!(
        error.message.contains(&app.host())
            && error.message.contains("aai-gateway Test CA")
            && error.message.contains("tasks:read"),
        "{}",
        error.message
    );
    let asker = ConfirmingAsker::default();
    let who = aai_engine::pipeline::Caller::named("test");
    let args = json!({});
    let request = aai_engine::pipeline::Request::tool(&who, "com.example.tasks", "me", &args)
        .asking(Some(&asker));
    let error = setup
        .gateway
        .call(request)
        .await
        .into_result()
        .expect_err("needs authorization");
    assert_eq!(error.kind, ErrorKind::AuthRequired, "{}", error.message);
    let asked = asker.asked.lock().expect("asked").clone();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains("certificate issued by") && asked[0].contains("valid from"),
        "{}",
        asked[0]
    );
    let url = error
        .detail
        .as_ref()
        .and_then(|d| d["authorization_url"].as_str())
        .expect("url")
        .to_owned();
    assert!(
        error.message.contains(&url) && url.starts_with(&format!("{base}/oauth/authorize?")),
        "{}",
        error.message
    );
    // Asked again before the user finished: the same authorization.
    let again = setup
        .exec("me", json!({}))
        .await
        .expect_err("still waiting");
    assert_eq!(
        again
            .detail
            .as_ref()
            .and_then(|d| d["authorization_url"].as_str()),
        Some(url.as_str())
    );

    authorize_in_browser(&app, &url).await;
    assert_eq!(
        setup.exec("me", json!({})).await.expect("authorized"),
        json!({"user": "ada"})
    );
    assert_eq!(
        app.seen("/api/me")
            .last()
            .and_then(|r| r.header("authorization").map(str::to_owned)),
        Some(format!("Bearer {ACCESS_1}"))
    );
    let token_form = app.seen("/oauth/token")[0].body_text();
    assert!(
        token_form.contains("code_verifier=")
            && token_form.contains("grant_type=authorization_code")
    );

    // A wrong verifier is rejected by the authorization server.
    let code = format!("code-{}", app.state.codes.lock().expect("codes").len());
    app.state
        .codes
        .lock()
        .expect("codes")
        .insert(code.clone(), "some-challenge".into());
    let ca = reqwest::Certificate::from_pem(app.ca.pem.as_bytes()).expect("ca");
    let client = reqwest::Client::builder()
        .tls_certs_merge([ca])
        .build()
        .expect("client");
    let wrong = client
        .post(format!("{base}/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=authorization_code&code={code}&code_verifier=wrong"
        ))
        .send()
        .await
        .expect("token");
    assert_eq!(wrong.status(), 400);

    // The API stops taking the first token: one refresh, then the call goes through.
    app.state.valid.lock().expect("valid").clear();
    assert_eq!(
        setup.exec("me", json!({})).await.expect("refreshed"),
        json!({"user": "ada"})
    );
    assert_eq!(
        app.seen("/api/me")
            .last()
            .and_then(|r| r.header("authorization").map(str::to_owned)),
        Some(format!("Bearer {ACCESS_2}"))
    );

    // Neither token works and refreshing fails: AUTH_EXPIRED.
    app.state.valid.lock().expect("valid").clear();
    app.state.refresh_works.store(false, Ordering::SeqCst);
    let error = setup.exec("me", json!({})).await.expect_err("expired");
    assert_eq!(error.kind, ErrorKind::AuthExpired, "{}", error.message);

    // No secret anywhere the agent or the log can see (the log did record the flow).
    let logged = String::from_utf8_lossy(&logs.lock().expect("logs")).into_owned();
    assert!(
        logged.contains("OAuth authorization complete"),
        "the log capture works"
    );
    for secret in [ACCESS_1, ACCESS_2, REFRESH, API_KEY] {
        assert!(!logged.contains(secret), "{secret} in the log");
    }
    let audit = aai_audit::AuditLog::open(&setup.dir.path().join("home/data.db")).expect("log");
    let rows = format!(
        "{:?}",
        audit.query(&aai_audit::Filter::default()).expect("rows")
    );
    for secret in [ACCESS_1, ACCESS_2, REFRESH] {
        assert!(!rows.contains(secret), "{secret} in the audit log");
        assert!(!error.message.contains(secret) && !format!("{:?}", error.detail).contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_about_to_expire_are_refreshed_before_the_call() {
    let app = App::start(
        json!({"type": "oauth2", "client_id": "c", "auth_url": "__BASE__/oauth/authorize", "token_url": "__BASE__/oauth/token"}),
    );
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;
    let store = aai_engine::web::credentials::Store::new(&setup.dir.path().join("home"));
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs()
        + 10;
    store
        .put(
            "com.example.tasks",
            &aai_engine::web::credentials::Stored {
                secret: None,
                oauth: Some(aai_engine::web::credentials::Tokens {
                    access_token: ACCESS_1.into(),
                    refresh_token: Some(REFRESH.into()),
                    expires_at: Some(soon),
                    scope: None,
                    // Bound to the origins the user signed in for, as sign-in binds them.
                    api_origin: Some(format!("https://{}", app.host())),
                    token_origin: Some(format!("https://{}", app.host())),
                }),
                origin: None,
                ..Default::default()
            },
        )
        .expect("store");
    assert_eq!(
        setup.exec("me", json!({})).await.expect("called"),
        json!({"user": "ada"})
    );
    assert_eq!(
        app.seen("/oauth/token").len(),
        1,
        "refreshed before the call"
    );
    assert_eq!(
        app.seen("/api/me")[0]
            .header("authorization")
            .map(str::to_owned),
        Some(format!("Bearer {ACCESS_2}"))
    );
    let stored = store.get("com.example.tasks").expect("stored");
    assert_eq!(
        stored.oauth.map(|t| t.access_token),
        Some(ACCESS_2.to_owned())
    );
}

/// The command line: an API key from the environment, `auth set` from stdin, `auth status`
/// without the secret, `auth logout`.
#[test]
fn auth_commands_and_keys_from_the_environment() {
    let app = App::start(
        json!({"type": "api_key", "key_name": "X-API-Key", "env_var": "AAI_TEST_TASKS_KEY"}),
    );
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("com.example.tasks")).expect("mkdir");
    let doc = descriptor(
        &app.server.url(),
        app.state.auth.lock().expect("auth").clone(),
    );
    std::fs::write(home.join("com.example.tasks/aai.json"), doc.to_string()).expect("install");
    std::fs::write(dir.path().join("ca.pem"), &app.ca.pem).expect("ca");
    std::fs::write(
        home.join("config.json"),
        json!({"web": {"extra_ca_certs": [dir.path().join("ca.pem")], "open_browser": false},
               "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}}}).to_string(),
    )
    .expect("config");
    let run = |args: &[&str], env: Option<&str>, stdin: Option<&str>| {
        let run = aai_test_support::cli::Run::new(env!("CARGO_BIN_EXE_aai-gateway"), &home)
            .args(args)
            .env_remove("AAI_TEST_TASKS_KEY");
        let run = match env {
            Some(key) => run.env("AAI_TEST_TASKS_KEY", key),
            None => run,
        };
        match stdin {
            Some(text) => run.stdin(text),
            None => run,
        }
        .text()
    };
    let get_task = |id: &str, key: Option<&str>| {
        let args = json!({"id": id}).to_string();
        run(
            &["call", "com.example.tasks", "get_task", "--args", &args],
            key,
            None,
        )
    };
    let (code, _, stderr) = get_task("1", None);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("AUTH_CONFIG_INVALID") && stderr.contains("AAI_TEST_TASKS_KEY"),
        "{stderr}"
    );
    // A wrong key is a rejected credential, not an expired one, and the message names
    // where the key came from.
    let (code, _, stderr) = get_task("0", Some("sk-wrong-0000"));
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("AUTH_REQUIRED")
            && stderr.contains("rejected the key from the environment variable AAI_TEST_TASKS_KEY")
            && !stderr.contains("no longer")
            && !stderr.contains("sk-wrong-0000"),
        "{stderr}"
    );
    let (code, stdout, stderr) = get_task("1", Some(API_KEY));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("\"/tasks/1\"") && !stdout.contains(API_KEY),
        "{stdout}"
    );
    assert_eq!(
        app.seen("/api/tasks/1")[0].header("x-api-key"),
        Some(API_KEY)
    );

    let (code, stdout, _) = run(
        &["auth", "set", "com.example.tasks"],
        None,
        Some(&format!("{API_KEY}\n")),
    );
    assert_eq!(code, Some(0));
    assert!(!stdout.contains(API_KEY));
    let (_, stdout, _) = run(&["auth", "status"], None, None);
    assert!(
        stdout.contains("com.example.tasks")
            && stdout.contains("stored key (sent only to https://127.0.0.1:")
            && stdout.contains("environment variable AAI_TEST_TASKS_KEY not set")
            && !stdout.contains(API_KEY),
        "{stdout}"
    );
    let (code, _, stderr) = get_task("2", None);
    assert_eq!(code, Some(0), "{stderr}");
    let (_, stdout, _) = run(&["auth", "logout", "com.example.tasks"], None, None);
    assert!(stdout.contains("forgot"), "{stdout}");
    let (code, _, _) = get_task("3", None);
    assert_eq!(code, Some(1));
    // Nothing secret in the audit log of these calls either.
    let (_, export, _) = run(&["audit", "export"], None, None);
    assert!(export.contains("get_task") && !export.contains(API_KEY));
}

/// Runs the gateway CLI with `AAI_HOME=home`, these environment variables and stdin.
fn cli(
    home: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> (Option<i32>, String, String) {
    let mut run =
        aai_test_support::cli::Run::new(env!("CARGO_BIN_EXE_aai-gateway"), home).args(args);
    for (key, value) in env {
        run = run.env(key, value);
    }
    match stdin {
        Some(text) => run.stdin(text),
        None => run,
    }
    .text()
}

/// A home whose gateway trusts both test servers' CAs and runs every tool unasked.
fn two_server_home(dir: &std::path::Path, apps: &[&App]) -> std::path::PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let cas: Vec<std::path::PathBuf> = apps
        .iter()
        .enumerate()
        .map(|(i, app)| {
            let path = dir.join(format!("ca{i}.pem"));
            std::fs::write(&path, &app.ca.pem).expect("ca");
            path
        })
        .collect();
    std::fs::write(
        home.join("config.json"),
        json!({"web": {"extra_ca_certs": cas, "open_browser": false},
               "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}}})
        .to_string(),
    )
    .expect("config");
    home
}

fn install(home: &std::path::Path, dir: &str, doc: &Value) {
    let path = home.join(dir);
    std::fs::create_dir_all(&path).expect("mkdir");
    std::fs::write(path.join("aai.json"), doc.to_string()).expect("write");
}

/// Every request the server saw, as text, to search for a secret.
fn everything_seen(app: &App) -> String {
    app.server
        .seen()
        .iter()
        .map(|r| {
            format!(
                "{} {:?} {}",
                r.uri,
                r.headers,
                String::from_utf8_lossy(&r.body)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A descriptor from the network (a registry copy) never receives an environment variable
/// it names until the user approves that exact binding (variable, app, origin).
#[test]
fn a_fetched_descriptor_gets_no_environment_variable_unasked() {
    const SECRET: &str = "ghp-user-token-77aa";
    let foreign = App::start(json!({"type": "bearer", "env_var": "AAI_TEST_FOREIGN_TOKEN"}));
    let dir = tempfile::tempdir().expect("dir");
    let home = two_server_home(dir.path(), &[&foreign]);
    let mut doc = descriptor(
        &foreign.server.url(),
        foreign.state.auth.lock().expect("auth").clone(),
    );
    doc["appId"] = json!("com.example.foreign");
    install(&home, "web/com.example.foreign", &doc);
    let env = [("AAI_TEST_FOREIGN_TOKEN", SECRET)];
    let (code, _, stderr) = cli(&home, &["call", "com.example.foreign", "me"], &env, None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("PERMISSION_DENIED")
            && stderr.contains("AAI_TEST_FOREIGN_TOKEN")
            && stderr.contains(&foreign.host()),
        "{stderr}"
    );
    assert!(foreign.server.seen().is_empty(), "a request was sent");

    // A binding for another origin or variable does not count.
    let origin = format!("https://{}", foreign.host());
    let other = "com.example.foreign@https://127.0.0.1:1";
    let (code, _, stderr) = cli(
        &home,
        &[
            "consent",
            "grant",
            "env:AAI_TEST_FOREIGN_TOKEN",
            other,
            "--client",
            "cli",
        ],
        &[],
        None,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let (code, _, _) = cli(&home, &["call", "com.example.foreign", "me"], &env, None);
    assert_eq!(code, Some(1));
    assert!(!everything_seen(&foreign).contains(SECRET));

    // The user approves the exact binding: the variable goes to that origin.
    let binding = format!("com.example.foreign@{origin}");
    let (code, _, stderr) = cli(
        &home,
        &[
            "consent",
            "grant",
            "env:AAI_TEST_FOREIGN_TOKEN",
            &binding,
            "--client",
            "cli",
        ],
        &[],
        None,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let _ = cli(&home, &["call", "com.example.foreign", "me"], &env, None);
    assert!(
        foreign
            .seen("/api/me")
            .iter()
            .any(|r| r.header("authorization") == Some(&format!("Bearer {SECRET}"))),
        "{}",
        everything_seen(&foreign)
    );
}

/// A stored key is bound to the origin it was set up for: a descriptor that claims the same
/// appId but sends calls elsewhere does not get it.
#[test]
fn a_stored_key_goes_only_to_the_origin_it_was_set_up_for() {
    let auth = json!({"type": "api_key", "key_name": "X-API-Key"});
    let real = App::start(auth.clone());
    let foreign = App::start(auth.clone());
    let dir = tempfile::tempdir().expect("dir");
    let home = two_server_home(dir.path(), &[&real, &foreign]);
    install(
        &home,
        "com.example.tasks",
        &descriptor(&real.server.url(), auth.clone()),
    );
    let (code, stdout, stderr) = cli(
        &home,
        &["auth", "set", "com.example.tasks"],
        &[],
        Some(&format!("{API_KEY}\n")),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!("sent only to https://{}", real.host())),
        "{stdout}"
    );
    let args = json!({"id": "1"}).to_string();
    let (code, _, stderr) = cli(
        &home,
        &["call", "com.example.tasks", "get_task", "--args", &args],
        &[],
        None,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        real.seen("/api/tasks/1")[0].header("x-api-key"),
        Some(API_KEY)
    );

    // The installed app goes; a registry copy with the same appId points elsewhere.
    std::fs::remove_dir_all(home.join("com.example.tasks")).expect("uninstall");
    install(
        &home,
        "web/com.example.tasks",
        &descriptor(&foreign.server.url(), auth),
    );
    let (code, _, stderr) = cli(
        &home,
        &["call", "com.example.tasks", "get_task", "--args", &args],
        &[],
        None,
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("AUTH_CONFIG_INVALID") && stderr.contains(&real.host()),
        "{stderr}"
    );
    assert!(
        foreign.server.seen().is_empty(),
        "{}",
        everything_seen(&foreign)
    );

    // An unknown app cannot get a secret without naming where it may go.
    let (code, _, stderr) = cli(
        &home,
        &["auth", "set", "com.example.nothere"],
        &[],
        Some("k\n"),
    );
    assert_ne!(code, Some(0));
    assert!(stderr.contains("--origin"), "{stderr}");
}

/// OAuth tokens go only to the API and token endpoint the user signed in for, and a
/// descriptor found by `web_discover` cannot take the appId of an installed app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_tokens_stay_with_their_origins_and_discovery_cannot_take_an_installed_appid() {
    let foreign = App::start(json!({"type": "oauth2", "client_id": "c",
        "auth_url": "__BASE__/oauth/authorize", "token_url": "__BASE__/oauth/token"}));
    let setup = gateway(&foreign, tempfile::tempdir().expect("dir"), json!({}));
    let home = setup.dir.path().join("home");
    let store = aai_engine::web::credentials::Store::new(&home);
    let tokens = |expires_at: u64| aai_engine::web::credentials::Tokens {
        access_token: ACCESS_1.into(),
        refresh_token: Some(REFRESH.into()),
        expires_at: Some(expires_at),
        scope: None,
        api_origin: Some("https://api.real.example:443".into()),
        token_origin: Some("https://login.real.example:443".into()),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    for expires_at in [now + 3600, now + 5] {
        store
            .put(
                "com.example.tasks",
                &aai_engine::web::credentials::Stored {
                    oauth: Some(tokens(expires_at)),
                    ..Default::default()
                },
            )
            .expect("store");
        setup.discover(&foreign).await;
        let error = setup.exec("me", json!({})).await.expect_err("not sent");
        assert_eq!(
            error.kind,
            ErrorKind::AuthConfigInvalid,
            "{}",
            error.message
        );
        assert!(error.message.contains("real.example"), "{}", error.message);
    }
    let seen = everything_seen(&foreign);
    assert!(
        !seen.contains(ACCESS_1) && !seen.contains(REFRESH),
        "{seen}"
    );

    // An installed app with that appId: the discovered copy is refused.
    let installed = json!({"schema_version": "1.0", "appId": "com.example.tasks", "name": "Tasks",
        "platforms": {"web": {"automation": "restapi", "base_url": "https://api.real.example", "tools": []}}});
    let found = vec![aai_engine::catalog::discovery::Found {
        rank: 0,
        source: aai_engine::catalog::discovery::Source::UserWritten,
        path: "/home/u/.aai/com.example.tasks/aai.json".into(),
        outcome: aai_descriptor::parse("t", installed.to_string().as_bytes())
            .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d))),
    }];
    let config: Config = serde_json::from_value(json!({
        "web": {"extra_ca_certs": [setup.dir.path().join("ca.pem")], "cache_dir": setup.dir.path().join("cache2"), "open_browser": false}
    }))
    .expect("config");
    let gateway = aai_compose::kit_gateway(
        Snapshot::build(&found, &[Platform::Web], true),
        config,
        Executors::new(),
        home.join("data.db"),
    );
    let Err(error) = gateway.discover(&foreign.host(), false).await else {
        panic!("a colliding appId was accepted");
    };
    assert_eq!(error.kind, ErrorKind::AaiJsonInvalid, "{}", error.message);
    assert!(error.message.contains("installed"), "{}", error.message);
    assert!(gateway.web().discovered(&foreign.host()).is_none());
}

/// A value that fills a whole path segment cannot be `.` or `..`: normalisation would send
/// the call (and its credential) to another endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_in_path_values_are_refused_before_any_request() {
    let app = App::start(json!({"type": "none"}));
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;
    let before = app.server.seen().len();
    for id in ["..", "."] {
        let error = setup
            .exec("get_task", json!({"id": id}))
            .await
            .expect_err("dot segment");
        assert_eq!(error.kind, ErrorKind::InvalidParams, "{}", error.message);
        assert!(error.message.contains("`id`"), "{}", error.message);
    }
    assert_eq!(app.server.seen().len(), before, "a request was sent");
    // Dots inside a value, or an encoded-looking value, are sent as data.
    let result = setup.exec("get_task", json!({"id": "%2e%2e"})).await;
    assert!(
        app.server
            .seen()
            .iter()
            .any(|r| r.uri.contains("/tasks/%252e%252e")),
        "{result:?}"
    );
}

/// The same through `web_discover`: a discovered descriptor that names an environment
/// variable the gateway has (here PATH, which every test process has) gets nothing unasked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovered_descriptor_gets_no_environment_variable_unasked() {
    let foreign = App::start(json!({"type": "bearer", "env_var": "PATH"}));
    let setup = gateway(&foreign, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&foreign).await;
    let error = setup.exec("me", json!({})).await.expect_err("not approved");
    assert_eq!(error.kind, ErrorKind::PermissionDenied, "{}", error.message);
    assert!(
        error.message.contains("PATH") && error.message.contains(&foreign.host()),
        "{}",
        error.message
    );
    let path = std::env::var("PATH").expect("PATH");
    let seen = everything_seen(&foreign);
    assert!(
        !seen.contains(&path),
        "the variable reached the foreign server"
    );
    assert!(foreign.seen("/api/me").is_empty());
}

/// `auth login` signs in from a terminal: it prints the page, listens for the redirect until
/// the browser comes back, and stores the tokens; a refresh the server calls `invalid_grant`
/// removes the dead tokens and says to sign in again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_login_from_the_terminal_and_dead_tokens() {
    use tokio::io::AsyncBufReadExt;
    let app = App::start(json!({"type": "oauth2", "client_id": "aai-test-client",
        "auth_url": "__BASE__/oauth/authorize", "token_url": "__BASE__/oauth/token", "scopes": ["tasks:read"]}));
    let dir = tempfile::tempdir().expect("dir");
    let home = two_server_home(dir.path(), &[&app]);
    let auth = app.state.auth.lock().expect("auth").clone();
    install(
        &home,
        "com.example.tasks",
        &descriptor(&app.server.url(), auth),
    );

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_aai-gateway"))
        .args(["auth", "login", "com.example.tasks"])
        .env("AAI_HOME", &home)
        .env("AAI_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("login");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let url = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
        .await
        .expect("a URL in time")
        .expect("read")
        .expect("a line");
    assert!(
        url.starts_with(&format!("{}/oauth/authorize?", app.server.url())),
        "{url}"
    );
    authorize_in_browser(&app, &url).await;
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
        .await
        .expect("login ended")
        .expect("status");
    assert!(status.success());
    let (_, stdout, _) = cli(&home, &["auth", "status"], &[], None);
    assert!(
        stdout.contains("OAuth authorized") && !stdout.contains(ACCESS_1),
        "{stdout}"
    );
    let (code, out, stderr) = cli(&home, &["call", "com.example.tasks", "me"], &[], None);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(out.contains("ada"), "{out}");

    // The tokens age out and the server no longer honours the refresh token.
    app.state.refresh_works.store(false, Ordering::SeqCst);
    let store = aai_engine::web::credentials::Store::new(&home);
    let mut stored = store.get("com.example.tasks").expect("stored");
    if let Some(tokens) = stored.oauth.as_mut() {
        tokens.expires_at = Some(1);
    }
    store.put("com.example.tasks", &stored).expect("put");
    let (code, _, stderr) = cli(&home, &["call", "com.example.tasks", "me"], &[], None);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("AUTH_EXPIRED") && stderr.contains("auth login com.example.tasks"),
        "{stderr}"
    );
    let (_, stdout, _) = cli(&home, &["auth", "status"], &[], None);
    assert!(
        !stdout.contains("refreshable") && !stdout.contains("OAuth authorized"),
        "{stdout}"
    );

    // `auth set` refuses apps that do not exist; `auth login` refuses non-OAuth apps.
    let (code, _, stderr) = cli(
        &home,
        &[
            "auth",
            "set",
            "com.example.nothere",
            "--origin",
            "https://x.example",
        ],
        &[],
        Some("k\n"),
    );
    assert_ne!(code, Some(0));
    assert!(stderr.contains("No app"), "{stderr}");
}

/// Connection failures name their cause: DNS, refused, and which TLS check failed (an unknown
/// issuer is named, with the setting that trusts it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_failures_name_their_cause() {
    let trusted = App::start(json!({"type": "none"}));
    let setup = gateway(&trusted, tempfile::tempdir().expect("dir"), json!({}));
    let ok = |_: &aai_test_support::http::Request| Response::json(200, &json!({}));
    let stranger = TestServer::https(&TestCa::new(), ok);
    let expired_ca = TestCa::issuing(&["127.0.0.1", "localhost"], true);
    let expired = TestServer::https(&expired_ca, ok);
    let misnamed_ca = TestCa::issuing(&["other.example"], false);
    let misnamed = TestServer::https(&misnamed_ca, ok);
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    // The gateway trusts the first CA only; the expired and misnamed ones' CAs are trusted too
    // (so only the check under test fails).
    let extra = [&expired_ca, &misnamed_ca]
        .iter()
        .enumerate()
        .map(|(i, ca)| {
            let path = setup.dir.path().join(format!("extra{i}.pem"));
            std::fs::write(&path, &ca.pem).expect("pem");
            path
        })
        .chain(std::iter::once(setup.dir.path().join("ca.pem")))
        .collect::<Vec<_>>();
    let config: Config = serde_json::from_value(json!({
        "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}},
        "web": {"extra_ca_certs": extra, "cache_dir": setup.dir.path().join("cache2"), "open_browser": false}
    }))
    .expect("config");
    let app = |id: &str, base: String| {
        let doc = json!({"schema_version": "1.0", "appId": id, "name": id,
            "platforms": {"web": {"automation": "restapi", "base_url": base, "auth": {"type": "none"},
                "tools": [{"name": "get", "description": "d", "endpoint": "/x"}]}}});
        aai_engine::catalog::discovery::Found {
            rank: 0,
            source: aai_engine::catalog::discovery::Source::UserWritten,
            path: format!("/apps/{id}/aai.json").into(),
            outcome: aai_descriptor::parse(id, doc.to_string().as_bytes())
                .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d))),
        }
    };
    let found = vec![
        app("com.example.dns", "https://no-such-host.invalid".into()),
        app("com.example.refused", format!("https://127.0.0.1:{closed}")),
        app("com.example.stranger", stranger.url()),
        app("com.example.expired", expired.url()),
        app("com.example.misnamed", misnamed.url()),
    ];
    let gateway = aai_compose::kit_gateway(
        Snapshot::build(&found, &[Platform::Web], true),
        config,
        Executors::new(),
        setup.dir.path().join("home/data.db"),
    );
    for (id, reason, words) in [
        ("com.example.dns", "dns", "does not resolve"),
        ("com.example.refused", "refused", "refused the connection"),
        (
            "com.example.stranger",
            "tls_unknown_issuer",
            "issued by \"CN=aai-gateway Test CA\"",
        ),
        ("com.example.expired", "tls_expired", "expired"),
        (
            "com.example.misnamed",
            "tls_name_mismatch",
            "for another name",
        ),
    ] {
        let error = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            gateway.exec("t", id, "get", &json!({})),
        )
        .await
        .expect("answered in time")
        .expect_err(id);
        assert_eq!(
            error.kind,
            ErrorKind::ApiRequestFailed,
            "{id}: {}",
            error.message
        );
        assert_eq!(
            error.detail.as_ref().map(|d| d["reason"].clone()),
            Some(json!(reason)),
            "{id}: {}",
            error.message
        );
        assert!(error.message.contains(words), "{id}: {}", error.message);
    }
    let error = gateway
        .exec("t", "com.example.stranger", "get", &json!({}))
        .await
        .expect_err("stranger");
    assert!(
        error.message.contains("web.extra_ca_certs"),
        "{}",
        error.message
    );
}

/// 429 and 503 with `Retry-After`: one retry when the wait is short and fits the call's time,
/// else the wait is reported; a slow read-only call takes its timeout once, not per retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_time_budgets() {
    let app = App::start(json!({"type": "none"}));
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;
    assert_eq!(
        setup
            .exec("limited", json!({}))
            .await
            .expect("served after one wait"),
        json!({"served": true})
    );
    assert_eq!(app.seen("/api/limited").len(), 2);
    let error = setup.exec("busy", json!({})).await.expect_err("busy");
    assert_eq!(error.kind, ErrorKind::ApiRequestFailed);
    assert!(
        error.message.contains("wait 120 s") && error.message.contains("503"),
        "{}",
        error.message
    );
    assert_eq!(
        app.seen("/api/busy").len(),
        1,
        "a long wait is reported, not slept"
    );
    // Read-only tools are retried on TIMEOUT, but only within the tool's own time: a call
    // that used its whole second is not tried again (it used to take 3 × its timeout).
    let error = setup.exec("slow_read", json!({})).await.expect_err("slow");
    assert_eq!(error.kind, ErrorKind::Timeout, "{}", error.message);
    assert!(
        !error.message.contains("tries"),
        "retried past its time: {}",
        error.message
    );
    assert!(
        error
            .detail
            .as_ref()
            .is_none_or(|d| d.get("attempts").is_none()),
        "{:?}",
        error.detail
    );
}

/// Arrays in query parameters repeat the key; `web.base_urls` sends an app's calls to the
/// user's own server, and a key bound to the descriptor's origin does not follow them there;
/// APP_NOT_FOUND names tools of this exposure mode and web_discover for web addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_arrays_base_url_overrides_and_not_found_hints() {
    let app = App::start(json!({"type": "api_key", "key_name": "X-API-Key"}));
    let staging = App::start(json!({"type": "none"}));
    let dir = tempfile::tempdir().expect("dir");
    let home = two_server_home(dir.path(), &[&app, &staging]);
    let auth = app.state.auth.lock().expect("auth").clone();
    install(
        &home,
        "com.example.tasks",
        &descriptor(&app.server.url(), auth),
    );
    let (code, _, stderr) = cli(
        &home,
        &["auth", "set", "com.example.tasks"],
        &[],
        Some(&format!("{API_KEY}\n")),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let args = json!({"tag": ["a b", "c&d"], "q": "x"}).to_string();
    let (code, _, stderr) = cli(
        &home,
        &["call", "com.example.tasks", "search", "--args", &args],
        &[],
        None,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let seen = app.seen("/api/search");
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].uri.ends_with("?tag=a+b&tag=c%26d&q=x")
            || seen[0].uri.ends_with("?tag=a%20b&tag=c%26d&q=x"),
        "{}",
        seen[0].uri
    );

    // The user's override: calls go to staging; the production key does not go with them.
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("config.json")).expect("config"))
            .expect("json");
    config["web"]["base_urls"] =
        json!({"com.example.tasks": format!("{}/api", staging.server.url())});
    std::fs::write(home.join("config.json"), config.to_string()).expect("config");
    let (code, _, stderr) = cli(
        &home,
        &["call", "com.example.tasks", "search", "--args", &args],
        &[],
        None,
    );
    assert_eq!(code, Some(1));
    assert!(stderr.contains("AUTH_CONFIG_INVALID"), "{stderr}");
    assert!(staging.server.seen().is_empty() && !everything_seen(&staging).contains(API_KEY));
    let (code, _, stderr) = cli(
        &home,
        &[
            "auth",
            "set",
            "com.example.tasks",
            "--origin",
            &staging.server.url(),
        ],
        &[],
        Some("staging-key\n"),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let _ = cli(
        &home,
        &["call", "com.example.tasks", "search", "--args", &args],
        &[],
        None,
    );
    let seen = staging.seen("/api/search");
    assert_eq!(seen.len(), 1, "{}", everything_seen(&staging));
    assert_eq!(seen[0].header("x-api-key"), Some("staging-key"));

    // Not found: the hints fit the tool list the client has.
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;
    let error = setup
        .gateway
        .exec("t", "github.com", "x", &json!({}))
        .await
        .expect_err("unknown");
    assert!(error.message.contains("web_discover"), "{}", error.message);
    assert!(
        !error.message.contains("aai_apps"),
        "full mode has no aai_apps: {}",
        error.message
    );
    let error = setup
        .gateway
        .exec("t", "org.example.nothing", "x", &json!({}))
        .await
        .expect_err("unknown");
    assert!(!error.message.contains("web_discover"), "{}", error.message);
}

/// Discovered apps are remembered across restarts until forgotten; `refresh` bypasses the
/// cache; a 304 keeps the lifetime the server gave; `discover` shows an author the descriptor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovered_apps_persist_refresh_and_can_be_forgotten() {
    let app = App::start(json!({"type": "none"}));
    app.state.max_age.store(600, Ordering::SeqCst);
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;
    assert_eq!(app.seen("/.well-known/aai.json").len(), 1);
    setup
        .server
        .dispatch(
            "test",
            "web_discover",
            json!({"url": app.host(), "refresh": true}),
        )
        .await
        .expect("refreshed");
    assert_eq!(
        app.seen("/.well-known/aai.json").len(),
        2,
        "refresh asks the site anew"
    );
    // Expired: revalidated; the 304 (no Cache-Control of its own) keeps the 600 s given before.
    let mut meta = setup.meta(&app);
    meta["fetched_at"] = json!("2000-01-01T00:00:00Z");
    let meta_path = setup
        .dir
        .path()
        .join("cache")
        .join(app.host().replace(':', "_"))
        .join("aai.json.meta");
    std::fs::write(&meta_path, meta.to_string()).expect("meta");
    setup.discover(&app).await;
    assert_eq!(setup.meta(&app)["ttl_seconds"], 600);

    // A new process with the same home: the app is known without web_discover.
    let restart = || {
        let config: Config = serde_json::from_value(json!({
            "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}},
            "web": {"extra_ca_certs": [setup.dir.path().join("ca.pem")],
                    "cache_dir": setup.dir.path().join("cache"), "open_browser": false}
        }))
        .expect("config");
        aai_compose::kit_gateway(
            Snapshot::build(&[], &[Platform::Web], true),
            config,
            Executors::new(),
            setup.dir.path().join("home/data.db"),
        )
    };
    let error = restart()
        .exec("t", "com.example.tasks", "me", &json!({}))
        .await
        .expect_err("reaches the API");
    assert_ne!(error.kind, ErrorKind::AppNotFound, "{}", error.message);

    // The CLI: an author sees the served descriptor; forgetting removes it for good.
    let home = setup.dir.path().join("home");
    std::fs::write(
        home.join("config.json"),
        json!({"web": {"extra_ca_certs": [setup.dir.path().join("ca.pem")], "cache_dir": setup.dir.path().join("cache")}}).to_string(),
    )
    .expect("config");
    let (code, stdout, stderr) = cli(&home, &["discover", &app.host()], &[], None);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("valid") && stdout.contains("\"appId\": \"com.example.tasks\""),
        "{stdout}{stderr}"
    );
    let (code, stdout, stderr) = cli(
        &home,
        &["discover", "--forget", "com.example.tasks"],
        &[],
        None,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("forgot com.example.tasks"), "{stdout}");
    let error = restart()
        .exec("t", "com.example.tasks", "me", &json!({}))
        .await
        .expect_err("forgotten");
    assert_eq!(error.kind, ErrorKind::AppNotFound, "{}", error.message);
}

/// Paged APIs, chosen response headers, form and raw bodies, optional arguments inside text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_headers_forms_and_raw_bodies() {
    let app = App::start(json!({"type": "none"}));
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;
    let items = setup.exec("items", json!({})).await.expect("items");
    assert_eq!(
        items["body"]["items"],
        json!(["item1a", "item1b", "item2a", "item2b"]),
        "{items}"
    );
    assert_eq!(
        (
            items["body"]["pages"].clone(),
            items["body"]["more"].clone()
        ),
        (json!(2), json!(true))
    );
    assert_eq!(items["headers"]["x-ratelimit-remaining"], "99");

    let form = setup
        .exec("form", json!({"name": "a b&c", "tags": ["x", "y"]}))
        .await
        .expect("form");
    assert_eq!(form["content_type"], "application/x-www-form-urlencoded");
    assert_eq!(
        form["body"], "name=a+b%26c&tags=x&tags=y",
        "the optional note drops: {form}"
    );

    let raw = setup
        .exec("raw", json!({"text": "a,b\n1,2\n"}))
        .await
        .expect("raw");
    assert_eq!(
        (raw["content_type"].clone(), raw["body"].clone()),
        (json!("text/csv"), json!("a,b\n1,2\n"))
    );
    assert_eq!(
        raw["x_opt"],
        Value::Null,
        "a header from a missing optional argument is not sent"
    );
    let raw = setup
        .exec("raw", json!({"text": "x", "opt": "1"}))
        .await
        .expect("raw");
    assert_eq!(raw["x_opt"], "v=1");
}

/// The registry's list format is published and current, and a refresh counts what it kept
/// and skipped truthfully.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_list_is_published_and_counted_truthfully() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let published: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("schemas/registry-apps.schema.json")).expect("schema"),
    )
    .expect("json");
    assert_eq!(
        published,
        aai_engine::web::RegistryList::schema(),
        "regenerate with `aai-gateway config registry-schema > schemas/registry-apps.schema.json`"
    );
    let app = App::start(json!({"type": "none"}));
    let base = app.server.url();
    let listing = json!({"apps": [
        {"appId": "com.example.tasks", "name": "Tasks", "descriptor_url": format!("{base}/.well-known/aai.json")},
        {"appId": "not an id", "descriptor_url": format!("{base}/.well-known/aai.json")},
        {"appId": "com.example.gone", "descriptor_url": format!("{base}/nothing-here.json")},
        {"appId": "com.example.other", "descriptor_url": format!("{base}/.well-known/aai.json")}
    ]});
    let validator = jsonschema::validator_for(&published).expect("compiles");
    assert!(validator.is_valid(&listing));
    assert!(!validator.is_valid(&json!({"apps": [{"name": "no id"}]})));
    let served = listing.clone();
    let registry = TestServer::https(&app.ca, move |_| Response::json(200, &served));
    let setup = gateway(
        &app,
        tempfile::tempdir().expect("dir"),
        json!({"registry_url": registry.url()}),
    );
    let counts = setup
        .gateway
        .web()
        .refresh_registry()
        .await
        .expect("refreshed");
    assert_eq!(
        counts,
        aai_engine::web::RefreshCounts {
            listed: 4,
            kept: 1,
            skipped: 3
        }
    );
}

/// Multipart uploads send files only from the folders the user allowed, as `file_read` would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_uploads_read_files_through_the_sandbox() {
    let app = App::start(json!({"type": "none"}));
    let dir = tempfile::tempdir().expect("dir");
    let allowed = dir.path().join("work");
    std::fs::create_dir_all(&allowed).expect("work");
    std::fs::write(allowed.join("report.txt"), "quarterly numbers\n").expect("file");
    std::fs::write(dir.path().join("secret.txt"), "outside the sandbox").expect("secret");
    std::fs::write(dir.path().join("ca.pem"), &app.ca.pem).expect("ca");
    let config: Config = serde_json::from_value(json!({
        "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}},
        "local": {"sandbox": {"allowed_directories": [allowed]}},
        "web": {"extra_ca_certs": [dir.path().join("ca.pem")], "cache_dir": dir.path().join("cache"), "open_browser": false}
    }))
    .expect("config");
    std::fs::create_dir_all(dir.path().join("home")).expect("home");
    let gateway = aai_compose::kit_gateway(
        Snapshot::build(&[], &[Platform::Web], true),
        config,
        Executors::new(),
        dir.path().join("home/data.db"),
    );
    gateway
        .discover(&app.host(), false)
        .await
        .expect("discovered");
    let sent = gateway
        .exec(
            "t",
            "com.example.tasks",
            "upload",
            &json!({"title": "Q3", "path": allowed.join("report.txt")}),
        )
        .await
        .expect("uploaded");
    let content_type = sent["content_type"].as_str().expect("type");
    let body = sent["body"].as_str().expect("body");
    assert!(
        content_type.starts_with("multipart/form-data; boundary="),
        "{content_type}"
    );
    assert!(
        body.contains("name=\"title\"") && body.contains("Q3"),
        "{body}"
    );
    assert!(
        body.contains("filename=\"report.txt\"")
            && body.contains("text/plain")
            && body.contains("quarterly numbers"),
        "{body}"
    );
    let before = app.seen("/api/upload").len();
    let error = gateway
        .exec(
            "t",
            "com.example.tasks",
            "upload",
            &json!({"title": "x", "path": dir.path().join("secret.txt")}),
        )
        .await
        .expect_err("outside");
    assert_eq!(error.kind, ErrorKind::PermissionDenied, "{}", error.message);
    assert_eq!(app.seen("/api/upload").len(), before, "nothing was sent");
}

/// Pages whose items sit under a pointer are joined; array query values follow the declared
/// style.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_items_under_a_pointer_and_query_styles() {
    let app = App::start(json!({"type": "none"}));
    let setup = gateway(&app, tempfile::tempdir().expect("dir"), json!({}));
    setup.discover(&app).await;
    let wrapped = setup.exec("wrapped", json!({})).await.expect("pages");
    assert_eq!(wrapped["items"], json!([10, 11, 20, 21]), "{wrapped}");
    assert_eq!(
        (wrapped["pages"].clone(), wrapped["more"].clone()),
        (json!(2), json!(false))
    );
    let comma = setup
        .exec("tagged_comma", json!({"tag": ["a", "b c"]}))
        .await
        .expect("comma");
    assert!(
        comma["raw"]
            .as_str()
            .is_some_and(|u| u.ends_with("?tag=a%2Cb+c") || u.ends_with("?tag=a%2Cb%20c")),
        "{comma}"
    );
    let brackets = setup
        .exec("tagged_brackets", json!({"tag": ["a", "b"]}))
        .await
        .expect("brackets");
    assert!(
        brackets["raw"]
            .as_str()
            .is_some_and(|u| u.ends_with("?tag%5B%5D=a&tag%5B%5D=b")),
        "{brackets}"
    );
}
