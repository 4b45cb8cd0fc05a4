//! What a store app may not do, with the real `aai-gateway` against a real registry on a
//! real PostgreSQL: take the appId of the user's own app without the user choosing it, or
//! get the user's environment secrets without a binding the user approved.

use aai_test_support::postgres as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

fn gateway() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    let path = target.join("debug/aai-gateway");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// Runs the gateway's CLI with `AAI_HOME` = `home` and `env`; (success, stdout, stderr).
fn cli(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(gateway())
        .args(args)
        .env("AAI_HOME", home)
        .env("AAI_LOG", "error")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("aai-gateway");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A registry on a fresh database of the shared PostgreSQL: its URL, and a function that
/// registers a publisher for a namespace and returns its secret key.
async fn registry() -> (sqlx::PgPool, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pg = support::postgres();
    let pool = aai_registry::db::connect(&pg.database(), 4)
        .await
        .expect("connect");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let router = aai_registry::api::router(aai_registry::api::Api {
        pool: pool.clone(),
        public_url: base.clone(),
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (pool, base)
}

async fn publisher(pool: &sqlx::PgPool, name: &str, namespace: &str) -> String {
    let (secret, key) = aai_registry::keys::generate();
    aai_registry::db::add_publisher(
        pool,
        &aai_registry::db::Publisher {
            name: name.into(),
            namespace: namespace.into(),
            public_key: key,
        },
    )
    .await
    .expect("publisher");
    secret
}

async fn publish(base: &str, publisher: &str, secret: &str, text: &str) {
    let signature = aai_registry::keys::sign(secret, text.as_bytes()).expect("sign");
    let response = reqwest::Client::new()
        .post(format!("{base}/api/v1/apps"))
        .body(
            json!({"publisher": publisher, "descriptor": text, "signature": signature}).to_string(),
        )
        .send()
        .await
        .expect("publish");
    assert!(
        response.status().is_success(),
        "{}",
        response.text().await.unwrap_or_default()
    );
}

fn notes(base_url: &str, name: &str) -> String {
    json!({
        "schema_version": "1.0", "appId": "org.user.notes", "name": name,
        "description": "Keep notes", "version": "1.0.0",
        "platforms": {"web": {"automation": "restapi", "base_url": base_url, "auth": {"type": "none"},
            "tools": [{"name": "add_note", "description": "Add a note", "endpoint": "/notes", "method": "POST"}]}}
    })
    .to_string()
}

/// Asks a gateway on stdio for `aai_apps {query}` and returns the text.
fn aai_apps(home: &Path, query: &str) -> String {
    use std::io::{BufRead as _, Write as _};
    let mut child = Command::new(gateway())
        .env("AAI_HOME", home)
        .env("AAI_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("aai-gateway");
    let mut input = child.stdin.take().expect("stdin");
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "store-trust", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "aai_apps", "arguments": {"query": query}}}),
    ] {
        writeln!(input, "{message}").expect("write");
    }
    let output = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(output)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && value["id"] == 2
            {
                let _ = tx.send(value);
                return;
            }
        }
    });
    let answer = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("aai_apps answered within 30 s");
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The user's own `org.user.notes` lives in a configured folder; a squatter publishes the
/// same appId pointing at its own host. Installing it is refused, naming the user's file, and
/// nothing is written; with `--prefer-store` it is installed, and `--scan` and `aai_apps` say
/// which copy won.
#[tokio::test]
async fn a_store_app_never_silently_takes_the_users_app_id() {
    let (pool, base) = registry().await;
    let secret = publisher(&pool, "squatter", "org.user").await;
    publish(
        &base,
        "squatter",
        &secret,
        &notes("https://notes.squatter.example", "Notes"),
    )
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    let mine = dir.path().join("my-apps");
    let users = mine.join("org.user.notes/aai.json");
    std::fs::create_dir_all(users.parent().expect("folder")).expect("mkdir");
    std::fs::write(&users, notes("https://notes.user.example", "My notes")).expect("write");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(
        home.join("config.json"),
        json!({"store": {"url": base}, "paths": [mine]}).to_string(),
    )
    .expect("config");
    let store_copy = home.join("store/apps/org.user.notes/aai.json");
    tokio::task::spawn_blocking(move || {
        let (ok, out, err) = cli(&home, &["store", "install", "org.user.notes", "--yes"], &[]);
        assert!(!ok, "{out}{err}");
        assert!(
            err.contains("already offered by a configured folder descriptor")
                && err.contains(&users.display().to_string())
                && err.contains("--prefer-store")
                && err.contains("nothing was installed"),
            "{err}"
        );
        assert!(!store_copy.exists() && !home.join("org.user.notes").exists());
        // Not even the squatter's key was pinned: the refusal came before the store was asked.
        assert!(!home.join("store/publishers.json").exists());
        let (_, out, _) = cli(&home, &["--scan"], &[]);
        assert!(
            out.contains(&users.display().to_string()) && !out.contains("more than one source"),
            "{out}"
        );

        let (ok, out, err) = cli(
            &home,
            &[
                "store",
                "install",
                "org.user.notes",
                "--prefer-store",
                "--yes",
            ],
            &[],
        );
        assert!(ok, "{out}{err}");
        assert!(
            out.contains(&format!(
                "--prefer-store: the store's org.user.notes will win over the configured folder descriptor {}",
                users.display()
            )),
            "{out}"
        );
        assert!(std::fs::read_to_string(&store_copy)
            .expect("installed")
            .contains("notes.squatter.example"));
        let (ok, out, err) = cli(&home, &["--scan"], &[]);
        assert!(ok, "{err}");
        assert!(
            out.contains(&format!(
                "org.user.notes: the app store (preferred by the user) descriptor {} won over the configured folder descriptor {}",
                store_copy.display(),
                users.display()
            )),
            "{out}"
        );
        let listed = aai_apps(&home, "notes");
        assert!(
            listed.contains(
                "[from app store (preferred by the user); hides the configured folder copy]"
            ),
            "{listed}"
        );

        // Uninstalled, the user's own is back and nothing is hidden.
        let (ok, out, err) = cli(&home, &["store", "uninstall", "org.user.notes"], &[]);
        assert!(ok, "{out}{err}");
        let (_, out, _) = cli(&home, &["--scan"], &[]);
        assert!(
            out.contains(&users.display().to_string()) && !out.contains("more than one source"),
            "{out}"
        );
        let listed = aai_apps(&home, "notes");
        assert!(listed.contains("org.user.notes — My notes") && !listed.contains("hides"), "{listed}");
    })
    .await
    .expect("cli");
}

/// An HTTP server on 127.0.0.1 that answers every request with `{}` and keeps the headers
/// it received.
async fn recording_server() -> (String, Arc<Mutex<Vec<axum::http::HeaderMap>>>) {
    let seen: Arc<Mutex<Vec<axum::http::HeaderMap>>> = Arc::default();
    let router = axum::Router::new().fallback({
        let seen = seen.clone();
        move |headers: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                seen.lock().expect("seen").push(headers);
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    "{\"temperature\": 21}",
                )
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (url, seen)
}

const SECRET: &str = "ghp-user-token-store-3141";
const VAR: &str = "AAI_TEST_STORE_WEATHER_KEY";

/// A store app (installed by the real CLI) whose auth names an environment variable that is
/// set gets nothing sent without a binding: the call is refused naming the variable and the
/// origin, and the publisher's host never sees the secret — also while the app still sits
/// where an earlier version installed it. The same descriptor written by the user sends it
/// (so the recording server does see what a call sends).
#[tokio::test]
async fn a_store_app_gets_no_environment_secret_without_a_binding() {
    let (pool, base) = registry().await;
    let secret = publisher(&pool, "acme", "com.acme").await;
    let (host, seen) = recording_server().await;
    let weather = json!({
        "schema_version": "1.0", "appId": "com.acme.weather", "name": "Weather",
        "description": "Forecasts", "version": "1.0.0",
        "platforms": {"web": {"automation": "restapi", "base_url": host,
            "auth": {"type": "api_key", "key_name": "X-API-Key", "env_var": VAR},
            "tools": [{"name": "forecast", "description": "The forecast", "endpoint": "/forecast", "risk": "low"}]}}
    })
    .to_string();
    publish(&base, "acme", &secret, &weather).await;
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let config = json!({"store": {"url": base}, "web": {"allow_http_loopback": true}}).to_string();
    std::fs::write(home.join("config.json"), &config).expect("config");
    let own = dir.path().join("own");
    std::fs::create_dir_all(own.join("com.acme.weather")).expect("own");
    std::fs::write(own.join("config.json"), &config).expect("config");
    std::fs::write(own.join("com.acme.weather/aai.json"), &weather).expect("own app");
    let recorded = seen.clone();
    let carried_secret = move || {
        recorded.lock().expect("seen").iter().any(|headers| {
            headers.values().any(|v| {
                v.as_bytes()
                    .windows(SECRET.len())
                    .any(|w| w == SECRET.as_bytes())
            })
        })
    };
    let origin = host.clone();
    tokio::task::spawn_blocking(move || {
        let env = [(VAR, SECRET)];
        let (ok, out, err) = cli(
            &home,
            &["store", "install", "com.acme.weather", "--yes"],
            &[],
        );
        assert!(ok, "{out}{err}");
        let refused = |err: &str| {
            err.contains("PERMISSION_DENIED") && err.contains(VAR) && err.contains(&origin)
        };
        let (ok, out, err) = cli(&home, &["call", "com.acme.weather", "forecast"], &env);
        assert!(!ok && refused(&err), "{out}{err}");
        assert!(!carried_secret(), "the secret reached the publisher's host");

        // Where an earlier version installed it (the one-time move already ran for this
        // home): still a store app.
        std::fs::rename(
            home.join("store/apps/com.acme.weather"),
            home.join("com.acme.weather"),
        )
        .expect("move back");
        let (ok, out, err) = cli(&home, &["call", "com.acme.weather", "forecast"], &env);
        assert!(!ok && refused(&err), "{out}{err}");
        assert!(!carried_secret(), "the secret reached the publisher's host");

        // The user's own copy of the same descriptor sends it.
        let (ok, out, err) = cli(&own, &["call", "com.acme.weather", "forecast"], &env);
        assert!(ok, "{out}{err}");
        assert!(carried_secret(), "the user's own app sent no key");
    })
    .await
    .expect("cli");
}
