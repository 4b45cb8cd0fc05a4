//! `aai-bench stop`: the emergency stop with 100 running children, one of them a `setsid`
//! escapee and one double-forked: time from the trigger (`POST /control/stop`, what the
//! dashboard button and `aai-gateway stop` send) until every one of them is dead.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{Gateway, release_dir};

const ROUNDS: usize = 30;

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

pub fn wait_for(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A daemon (`aai-gateway serve`) on a free port in a home of its own, killed when dropped.
pub struct Daemon {
    pub home: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub token: String,
    _process: Killed,
}

impl Daemon {
    /// Starts one whose policy lets high-risk calls run without asking.
    pub fn start() -> Self {
        let home = tempfile::tempdir().expect("home");
        std::fs::write(
            home.path().join("config.json"),
            json!({"policy": {"default_profile": "p", "profiles": {"p": {"preset": "development", "risk_policies": {"high": "auto_approve"}}}}}).to_string(),
        )
        .expect("config");
        let logging = std::env::var_os("AAI_BENCH_LOG").is_some();
        let process = Command::new(release_dir().join("aai-gateway"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("AAI_HOME", home.path())
            .env("AAI_LOG", if logging { "debug" } else { "error" })
            .stdout(Stdio::null())
            .stderr(if logging {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("serve");
        // Killed however the bench ends.
        let process = Killed(process);
        let info = home.path().join("run/serve.json");
        wait_for("serve.json", || info.exists());
        let served: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&info).expect("read")).expect("json");
        let addr = served["url"]
            .as_str()
            .expect("url")
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let token = std::fs::read_to_string(home.path().join("run/token")).expect("token");
        Self {
            home,
            addr,
            token,
            _process: process,
        }
    }

    /// `POST path` with the bearer token; the reply's body.
    pub fn control(&self, path: &str) -> String {
        let reply = request(
            &self.addr,
            &format!(
                "POST {path} HTTP/1.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json",
                self.token
            ),
            r#"{"by":"aai-bench"}"#,
        );
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        reply
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default()
    }
}

/// One HTTP/1.1 request (`head` is the request line and headers, without Host) and its reply.
pub fn request(addr: &str, head: &str, body: &str) -> String {
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
    let (line, rest) = head.split_once("\r\n").unwrap_or((head, ""));
    let rest = if rest.is_empty() {
        String::new()
    } else {
        format!("{rest}\r\n")
    };
    write!(
        tcp,
        "{line}\r\nHost: {addr}\r\n{rest}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut reply = String::new();
    let _ = tcp.read_to_string(&mut reply);
    reply
}

pub fn run() {
    let daemon = Daemon::start();
    let home = &daemon.home;
    let mut samples = Vec::new();
    for round in 0..ROUNDS {
        let pids = home.path().join(format!("pids-{round}"));
        let command = format!(
            "for i in $(seq 98); do sleep 300 & echo $! >> {p}; done; \
             setsid sh -c 'echo $$ >> {p}; exec sleep 300' & \
             ( sh -c 'echo $$ >> {p}; exec sleep 300' & ) ; sleep 300",
            p = pids.display()
        );
        // A stdio gateway started like a client's: it forwards to the daemon.
        let home_path: &Path = home.path();
        let mut client = Gateway::spawn(home_path, None);
        client.initialize();
        let call = std::thread::spawn(move || {
            let reply = client.request(
                "tools/call",
                json!({"name": "aai_exec", "arguments": {"app": "local.terminal", "tool": "bash_execute", "args": {"command": command, "timeout_ms": 120000}}}),
            );
            drop(client);
            reply
        });
        let count = |p: &Path| {
            std::fs::read_to_string(p)
                .map(|s| s.lines().count())
                .unwrap_or(0)
        };
        wait_for("100 children", || call.is_finished() || count(&pids) == 100);
        if call.is_finished() {
            panic!("the call ended early: {}", call.join().expect("call"));
        }
        let children: Vec<u32> = std::fs::read_to_string(&pids)
            .expect("pids")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        wait_for("every child running", || children.iter().all(|p| alive(*p)));
        let started = Instant::now();
        daemon.control("/control/stop");
        wait_for("every child dead", || !children.iter().any(|p| alive(*p)));
        samples.push(started.elapsed());
        let reply = call.join().expect("call");
        assert_eq!(reply["result"]["isError"], json!(true), "{reply}");
        daemon.control("/control/resume");
    }
    drop(daemon);
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!(
        "| emergency stop → 100 children dead (one setsid, one double fork), n={ROUNDS} | p50 {:.1} ms · p99 {:.1} ms · max {:.1} ms |",
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        samples[samples.len() - 1].as_secs_f64() * 1000.0
    );
}
