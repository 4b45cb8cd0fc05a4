//! What the registry's integration tests share: a registry server on a fresh database of the
//! shared PostgreSQL, publishers with their own key pairs, plain HTTP calls, and the built
//! `aai-gateway` on the command line.

// Each test file is its own crate and uses only some of these; the others would be dead code
// there.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// A registry served on 127.0.0.1 for as long as the test's runtime runs.
pub struct Registry {
    pub base: String,
    pub pool: sqlx::PgPool,
    /// The secret it signs timestamps with, if it has one.
    pub timestamp_key: Option<String>,
    _task: tokio::task::JoinHandle<()>,
}

/// A registry on a fresh database of the shared PostgreSQL, signing timestamps with
/// `timestamp_key` (a secret from `keys::generate`) if given.
pub async fn registry(timestamp_key: Option<String>) -> Registry {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pool = aai_registry::db::connect(&aai_test_support::postgres::postgres().database(), 8)
        .await
        .expect("connect");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let app = aai_registry::api::router(aai_registry::api::Api {
        pool: pool.clone(),
        public_url: base.clone(),
        timestamp_key: timestamp_key.clone(),
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Registry {
        base,
        pool,
        timestamp_key,
        _task: task,
    }
}

/// A publisher registered with a fresh key pair.
pub struct Publisher {
    pub name: String,
    pub secret: String,
    pub key: String,
}

impl Publisher {
    /// Registers (or re-keys) `name` as the owner of `namespace`.
    pub async fn add(pool: &sqlx::PgPool, name: &str, namespace: &str) -> Self {
        let (secret, key) = aai_registry::keys::generate();
        aai_registry::db::add_publisher(
            pool,
            &aai_registry::db::Publisher {
                name: name.into(),
                namespace: namespace.into(),
                public_key: key.clone(),
            },
        )
        .await
        .expect("publisher");
        Self {
            name: name.into(),
            secret,
            key,
        }
    }

    /// Signs `text` and publishes it: the status and the JSON body.
    pub async fn publish(&self, base: &str, text: &str) -> (u16, Value) {
        let signature = aai_registry::keys::sign(&self.secret, text.as_bytes()).expect("sign");
        post(
            base,
            &json!({"publisher": self.name, "descriptor": text, "signature": signature})
                .to_string(),
        )
        .await
    }

    /// [`Publisher::publish`] that must succeed.
    pub async fn publish_ok(&self, base: &str, text: &str) {
        let (status, body) = self.publish(base, text).await;
        assert!((200..300).contains(&status), "{status}: {body}");
    }
}

/// POSTs `body` as a publish request: the status and the JSON body (null if not JSON).
pub async fn post(base: &str, body: &str) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .post(format!("{base}/api/v1/apps"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("post");
    answer(response).await
}

/// GETs `path`: the status and the JSON body (null if not JSON).
pub async fn get(base: &str, path: &str) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    answer(reqwest::get(format!("{base}{path}")).await.expect("get")).await
}

async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap_or_default();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The built `aai-gateway` (another package's binary, so not in `CARGO_BIN_EXE_*`).
pub fn gateway_binary() -> PathBuf {
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

/// `aai-gateway` with its home at `home`, logging errors only.
pub fn gateway(home: &Path) -> Command {
    let mut command = Command::new(gateway_binary());
    command.env("AAI_HOME", home).env("AAI_LOG", "error");
    command
}

/// Runs `aai-gateway ARGS` with no terminal and `env` added to its environment:
/// (success, stdout, stderr).
pub fn cli(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = gateway(home)
        .args(args)
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

/// A gateway on stdio, spoken to line by line.
pub struct GatewayOnStdio {
    child: std::process::Child,
    input: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    next: u64,
    /// Notifications that arrived while waiting for answers.
    pub seen: Vec<String>,
}

impl GatewayOnStdio {
    /// Starts `aai-gateway` with its home at `home`, past the MCP handshake.
    pub fn start(home: &Path) -> Self {
        let mut child = gateway(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
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

    pub fn send(&mut self, message: &serde_json::Value) {
        use std::io::Write as _;
        writeln!(self.input, "{message}").expect("write");
    }

    /// Sends a request and returns its answer; notifications seen meanwhile are kept.
    pub fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("an answer within 30 s");
            if message["id"] == id {
                return message;
            }
            if let Some(method) = message["method"].as_str() {
                self.seen.push(method.to_owned());
            }
        }
    }

    /// What `aai_apps {query}` answers.
    pub fn apps(&mut self, query: &str) -> String {
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
    pub fn notified(&mut self, method: &str) -> bool {
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

impl Drop for GatewayOnStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
