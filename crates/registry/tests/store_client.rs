//! `aai-gateway store` against a real registry on a real PostgreSQL: search, a verified
//! install, an update with its permission diff, a publisher key that changed (refused), the
//! install hint of APP_NOT_FOUND, and uninstall.

use aai_test_support::postgres as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio as Pipe};

use serde_json::json;

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

fn cli(home: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(gateway())
        .args(args)
        .env("AAI_HOME", home)
        .env("AAI_LOG", "error")
        .stdin(Pipe::null())
        .output()
        .expect("aai-gateway");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn app(version: &str, tools: &[(&str, &str)]) -> String {
    json!({
        "schema_version": "1.0", "appId": "com.acme.tasks", "name": "Acme Tasks", "description": "Keep track of tasks",
        "version": version, "aliases": ["todo"],
        "platforms": {"web": {"automation": "restapi", "base_url": "https://tasks.acme.example", "auth": {"type": "none"},
            "tools": tools.iter().map(|(t, risk)| json!({"name": t, "description": t, "endpoint": format!("/{t}"), "risk": risk})).collect::<Vec<_>>()}}
    })
    .to_string()
}

/// A registry on a fresh database of the shared PostgreSQL, with the publisher acme
/// (com.acme.*): its pool, its URL, and acme's secret key.
async fn registry() -> (sqlx::PgPool, String, String) {
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
        timestamp_key: None,
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let (secret, key) = aai_registry::keys::generate();
    let acme = aai_registry::db::Publisher {
        name: "acme".into(),
        namespace: "com.acme".into(),
        public_key: key,
    };
    aai_registry::db::add_publisher(&pool, &acme)
        .await
        .expect("publisher");
    (pool, base, secret)
}

#[tokio::test]
async fn install_update_and_uninstall_from_the_store() {
    let (pool, base, secret) = registry().await;
    let publish = |text: String, secret: String| {
        let base = base.clone();
        async move {
            let signature = aai_registry::keys::sign(&secret, text.as_bytes()).expect("sign");
            let response = reqwest::Client::new()
                .post(format!("{base}/api/v1/apps"))
                .body(
                    json!({"publisher": "acme", "descriptor": text, "signature": signature})
                        .to_string(),
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
    };
    let v1 = app("1.0.0", &[("list_tasks", "low"), ("add_task", "medium")]);
    publish(v1.clone(), secret.clone()).await;

    let home = tempfile::tempdir().expect("home");
    let home = home.path();
    std::fs::write(
        home.join("config.json"),
        json!({"store": {"url": base}}).to_string(),
    )
    .expect("config");
    tokio::task::spawn_blocking({
        let home = home.to_path_buf();
        let v1 = v1.clone();
        move || {
            let (ok, out, err) = cli(&home, &["store", "search", "taks"]);
            assert!(
                ok && out.contains("com.acme.tasks 1.0.0 — Acme Tasks"),
                "{out}{err}"
            );
            // Nobody at a terminal and no --yes: nothing is written.
            let (ok, _, err) = cli(&home, &["store", "install", "com.acme.tasks"]);
            assert!(!ok && err.contains("--yes"), "{err}");
            assert!(!home.join("store/apps/com.acme.tasks").exists());
            // The install hint before it is installed.
            let (ok, out, _) = cli(&home, &["store", "refresh"]);
            assert!(ok && out.contains("1 app(s)"), "{out}");
            let (ok, _, err) = cli(&home, &["call", "com.acme.tasks", "list_tasks"]);
            assert!(
                !ok && err.contains("aai-gateway store install com.acme.tasks"),
                "{err}"
            );
            let (ok, out, err) = cli(&home, &["store", "install", "com.acme.tasks", "--yes"]);
            assert!(ok, "{out}{err}");
            assert!(
                out.contains("signature verified") && out.contains("add_task (risk medium)"),
                "{out}"
            );
            assert_eq!(
                std::fs::read_to_string(home.join("store/apps/com.acme.tasks/aai.json"))
                    .expect("installed"),
                v1
            );
            let (ok, out, _) = cli(&home, &["--scan"]);
            assert!(ok && out.contains("com.acme.tasks"), "{out}");
        }
    })
    .await
    .expect("cli");

    // A new version: the update shows what changes.
    publish(
        app(
            "1.1.0",
            &[
                ("list_tasks", "low"),
                ("add_task", "high"),
                ("delete_task", "high"),
            ],
        ),
        secret.clone(),
    )
    .await;
    tokio::task::spawn_blocking({
        let home = home.to_path_buf();
        move || {
            let (ok, out, err) = cli(&home, &["store", "update", "--yes"]);
            assert!(ok, "{out}{err}");
            assert!(
                out.contains("1.0.0 → 1.1.0")
                    && out.contains("+ web delete_task (risk high)")
                    && out.contains("~ web add_task: risk medium → high"),
                "{out}"
            );
            let (_, out, _) = cli(&home, &["store", "list"]);
            assert!(out.contains("com.acme.tasks 1.1.0"), "{out}");
        }
    })
    .await
    .expect("cli");

    // The registry now hands out another key for acme: the pinned one wins, nothing changes.
    let (other_secret, other_key) = aai_registry::keys::generate();
    aai_registry::db::add_publisher(
        &pool,
        &aai_registry::db::Publisher {
            name: "acme".into(),
            namespace: "com.acme".into(),
            public_key: other_key,
        },
    )
    .await
    .expect("re-key");
    publish(
        app("2.0.0", &[("wipe_everything", "critical")]),
        other_secret,
    )
    .await;
    tokio::task::spawn_blocking({
        let home = home.to_path_buf();
        move || {
            let (ok, _, err) = cli(&home, &["store", "update", "--yes"]);
            assert!(!ok && err.contains("another key"), "{err}");
            assert!(
                std::fs::read_to_string(home.join("store/apps/com.acme.tasks/aai.json"))
                    .expect("kept")
                    .contains("1.1.0")
            );
            let (ok, out, err) = cli(&home, &["store", "uninstall", "com.acme.tasks"]);
            assert!(
                ok && out.contains("removed com.acme.tasks 1.1.0"),
                "{out}{err}"
            );
            assert!(!home.join("store/apps/com.acme.tasks").exists());
            let (ok, _, err) = cli(&home, &["store", "uninstall", "com.acme.tasks"]);
            assert!(!ok && err.contains("not installed from the store"), "{err}");
        }
    })
    .await
    .expect("cli");
}

/// A gateway on stdio, spoken to line by line.
struct Stdio {
    child: std::process::Child,
    input: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    next: u64,
    /// Notifications that arrived while waiting for answers.
    seen: Vec<String>,
}

impl Stdio {
    fn start(home: &Path) -> Self {
        let mut child = Command::new(gateway())
            .env("AAI_HOME", home)
            .env("AAI_LOG", "error")
            .stdin(Pipe::piped())
            .stdout(Pipe::piped())
            .stderr(Pipe::null())
            .spawn()
            .expect("aai-gateway");
        let input = child.stdin.take().expect("stdin");
        let output = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(output)
                .lines()
                .map_while(Result::ok)
            {
                if let Ok(value) = serde_json::from_str(&line)
                    && tx.send(value).is_err()
                {
                    return;
                }
            }
        });
        let mut this = Self {
            child,
            input,
            lines,
            next: 0,
            seen: Vec::new(),
        };
        this.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "store-test", "version": "1"}}));
        this.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        this
    }

    fn send(&mut self, message: &serde_json::Value) {
        use std::io::Write as _;
        writeln!(self.input, "{message}").expect("write");
    }

    /// Sends a request and returns its answer; notifications seen meanwhile are kept.
    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("an answer within 20 s");
            if message["id"] == id {
                return message;
            }
            if let Some(method) = message["method"].as_str() {
                self.seen.push(method.to_owned());
            }
        }
    }

    fn apps(&mut self, query: &str) -> String {
        let answer = self.request(
            "tools/call",
            json!({"name": "aai_apps", "arguments": {"query": query}}),
        );
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits for a notification `method`.
    fn notified(&mut self, method: &str) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(message) if message["method"] == method => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_running_gateway_lists_store_apps_and_offers_an_install_at_once() {
    let (_pool, base, secret) = registry().await;
    let text = app("1.0.0", &[("list_tasks", "low")]);
    let signature = aai_registry::keys::sign(&secret, text.as_bytes()).expect("sign");
    let response = reqwest::Client::new()
        .post(format!("{base}/api/v1/apps"))
        .body(json!({"publisher": "acme", "descriptor": text, "signature": signature}).to_string())
        .send()
        .await
        .expect("publish");
    assert!(response.status().is_success());
    let home = tempfile::tempdir().expect("home");
    let home = home.path().to_path_buf();
    std::fs::write(
        home.join("config.json"),
        json!({"store": {"url": base, "in_apps": true}}).to_string(),
    )
    .expect("config");
    tokio::task::spawn_blocking(move || {
        let mut gateway = Stdio::start(&home);
        // The index is read in the background after start: the store's app appears as not
        // installed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut listed = gateway.apps("tasks");
        while !listed.contains("com.acme.tasks — Acme Tasks (not installed") {
            assert!(
                std::time::Instant::now() < deadline,
                "the store's app was never listed: {listed}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
            listed = gateway.apps("tasks");
        }
        gateway.seen.clear();
        let (ok, out, err) = cli(&home, &["store", "install", "com.acme.tasks", "--yes"]);
        assert!(ok, "{out}{err}");
        // Offered as installed, and the client was told the list changed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut listed = gateway.apps("tasks");
        while listed.contains("(not installed") || !listed.contains("com.acme.tasks") {
            assert!(
                std::time::Instant::now() < deadline,
                "the installed app was not offered: {listed}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
            listed = gateway.apps("tasks");
        }
        assert!(
            gateway
                .seen
                .iter()
                .any(|m| m == "notifications/tools/list_changed")
                || gateway.notified("notifications/tools/list_changed"),
            "no list_changed after the install"
        );
    })
    .await
    .expect("gateway");
}
