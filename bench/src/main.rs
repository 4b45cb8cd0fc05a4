//! End-to-end measurements of the release gateway, driven over stdio like a client would:
//! start-up to `initialize` at 0/100/1,000/10,000 descriptors, `tools/list` and guide latency
//! at 1,000 apps, the `aai_exec` round trip against a direct zbus call (the gateway's own
//! overhead), and peak RSS at 1,000 apps. Prints a Markdown table on stdout.
#![allow(clippy::print_stdout)]

mod a11y;
mod batch;
mod browser;
mod dashboard;
mod describe;
mod desktop;
mod mcp;
mod scale;
mod schedule;
mod stop;
mod store;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use aai_test_support::{TEST_SERVICE, TestBus, full_test_descriptor};
use serde_json::{Value, json};

/// Where the binaries measured are: next to this one, or `AAI_BENCH_BIN_DIR`.
fn release_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("AAI_BENCH_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("exe");
    exe.parent().expect("dir").to_path_buf()
}

struct Gateway {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Gateway {
    fn spawn(home: &Path, bus: Option<&TestBus>) -> Self {
        Self::spawn_with(home, bus, &[])
    }

    fn spawn_with(home: &Path, bus: Option<&TestBus>, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(release_dir().join("aai-gateway"));
        command
            .envs(env.iter().copied())
            .env("AAI_HOME", home)
            .env("AAI_LOG", "error");
        if let Some(bus) = bus {
            command.env("DBUS_SESSION_BUS_ADDRESS", bus.address());
        }
        Self::from_command(command)
    }

    /// Any stdio MCP server started by `command` (the gateway, or a peer to compare with).
    fn from_command(mut command: Command) -> Self {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command
            .spawn()
            .expect("start the MCP server (build with --release first)");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("write");
        stdin.flush().expect("flush");
        loop {
            let mut reply = String::new();
            let read = self.stdout.read_line(&mut reply).expect("read");
            assert!(read > 0, "gateway closed stdout");
            let frame: Value = serde_json::from_str(&reply).expect("frame");
            if frame.get("id") == Some(&json!(id)) {
                return frame;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let reply = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("write");
        reply
    }

    fn memory(&self) -> scale::Memory {
        scale::memory_tree(self.child.id())
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn home_with(count: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    for i in 0..count {
        let app_id = format!("org.example.bench{i}");
        let mut doc = full_test_descriptor(&app_id, TEST_SERVICE);
        doc["name"] = json!(format!("Bench app {i}"));
        let folder = dir.path().join(&app_id);
        std::fs::create_dir_all(&folder).expect("mkdir");
        std::fs::write(folder.join("aai.json"), doc.to_string()).expect("write");
    }
    let folder = dir.path().join("org.aai.test");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::write(
        folder.join("aai.json"),
        full_test_descriptor("org.aai.test", TEST_SERVICE).to_string(),
    )
    .expect("write");
    // A tool per app whatever the count: the listing these benchmarks measure.
    std::fs::write(dir.path().join("config.json"), r#"{"exposure": "full"}"#).expect("config");
    dir
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "compare") {
        scale::compare(&args[1..]);
        return;
    }
    if args.first().is_some_and(|a| a == "scale") {
        scale::run();
        return;
    }
    if std::env::args().any(|a| a == "a11y") {
        a11y::run();
        return;
    }
    if std::env::args().any(|a| a == "desktop") {
        desktop::run();
        return;
    }
    if std::env::args().any(|a| a == "batch") {
        batch::run();
        return;
    }
    if std::env::args().any(|a| a == "dashboard") {
        dashboard::run();
        return;
    }
    if std::env::args().any(|a| a == "schedule") {
        schedule::run();
        return;
    }
    if std::env::args().any(|a| a == "store") {
        store::run();
        return;
    }
    if std::env::args().any(|a| a == "stop") {
        stop::run();
        return;
    }
    if std::env::args().any(|a| a == "describe") {
        describe::run();
        return;
    }
    if std::env::args().any(|a| a == "mcp") {
        mcp::run();
        return;
    }
    if std::env::args().any(|a| a == "browser") {
        browser::run();
        return;
    }
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    println!("| measurement | result |");
    println!("|---|---|");

    for count in [0usize, 100, 1_000, 10_000] {
        let home = home_with(count);
        let mut startup = Vec::new();
        let mut listed = Vec::new();
        for _ in 0..7 {
            let started = Instant::now();
            let mut gateway = Gateway::spawn(home.path(), Some(&bus));
            gateway.initialize();
            startup.push(started.elapsed());
            let tools = gateway.request("tools/list", json!({}));
            listed.push(started.elapsed());
            let n = tools["result"]["tools"].as_array().map_or(0, Vec::len);
            assert!(n >= 2, "tools/list returned {n} tools");
        }
        println!(
            "| spawn → initialize response, {count} descriptors (median of 7) | {} |",
            ms(median(startup))
        );
        println!(
            "| spawn → first tools/list, {count} descriptors (median of 7) | {} |",
            ms(median(listed))
        );
    }

    let home = home_with(1_000);
    let mut gateway = Gateway::spawn(home.path(), Some(&bus));
    gateway.initialize();
    let first = gateway.request("tools/list", json!({}));
    // The 1,000 apps, besides the test service, the built-in apps and the gateway's own tools.
    let benched = first["result"]["tools"].as_array().map_or(0, |tools| {
        tools
            .iter()
            .filter(|t| {
                t["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("app_org_example_bench"))
            })
            .count()
    });
    assert_eq!(benched, 1_000, "{first}");
    let list: Vec<Duration> = (0..50)
        .map(|_| {
            let started = Instant::now();
            gateway.request("tools/list", json!({}));
            started.elapsed()
        })
        .collect();
    println!(
        "| tools/list at 1,000 apps (median of 50) | {} |",
        ms(median(list))
    );
    let guide: Vec<Duration> = (0..500)
        .map(|i| {
            let started = Instant::now();
            let reply = gateway.request(
                "tools/call",
                json!({"name": format!("app_org_example_bench{}", i % 1000), "arguments": {}}),
            );
            assert_eq!(reply["result"]["isError"], json!(false));
            started.elapsed()
        })
        .collect();
    println!(
        "| app guide at 1,000 apps (median of 500) | {} |",
        ms(median(guide))
    );

    let exec: Vec<Duration> = (0..2_000)
        .map(|_| {
            let started = Instant::now();
            let reply = gateway.request(
                "tools/call",
                json!({"name": "aai_exec", "arguments": {"app": "org.aai.test", "tool": "echo", "args": {"text": "hello"}}}),
            );
            assert_eq!(reply["result"]["content"][0]["text"], json!("hello"));
            started.elapsed()
        })
        .collect();
    let exec = median(exec);
    let direct = direct_zbus(bus.address(), 2_000);
    println!(
        "| aai_exec round trip to the test D-Bus service (median of 2,000) | {} |",
        ms(exec)
    );
    println!(
        "| direct zbus call of the same method (median of 2,000) | {} |",
        ms(direct)
    );
    println!(
        "| gateway overhead per call (difference of medians) | {} |",
        ms(exec.saturating_sub(direct))
    );
    let memory = gateway.memory();
    println!(
        "| peak RSS at 1,000 apps after the above | {:.1} MiB |",
        memory.peak_kib as f64 / 1024.0
    );
    println!(
        "| private (anonymous) memory at 1,000 apps after the above | {:.1} MiB |",
        memory.private_kib as f64 / 1024.0
    );
    sustained(&mut gateway, 5_000);
}

/// Writes `count` audited calls at once and reads every answer: calls per second, sustained.
fn sustained(gateway: &mut Gateway, count: u64) {
    let first_id = gateway.next_id;
    gateway.next_id += count;
    let mut burst = String::new();
    for i in 0..count {
        let request = json!({"jsonrpc": "2.0", "id": first_id + i, "method": "tools/call",
            "params": {"name": "aai_exec", "arguments": {"app": "org.aai.test", "tool": "echo", "args": {"text": format!("b{i}")}}}});
        burst.push_str(&request.to_string());
        burst.push('\n');
    }
    let started = Instant::now();
    let mut stdin = gateway.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        stdin.write_all(burst.as_bytes()).expect("write burst");
        stdin.flush().expect("flush");
        stdin
    });
    let mut answered = 0;
    while answered < count {
        let mut reply = String::new();
        assert!(
            gateway.stdout.read_line(&mut reply).expect("read") > 0,
            "gateway closed stdout"
        );
        let frame: Value = serde_json::from_str(&reply).expect("frame");
        if frame
            .get("id")
            .and_then(Value::as_u64)
            .is_some_and(|id| id >= first_id)
        {
            assert_eq!(frame["result"]["isError"], json!(false), "{frame}");
            answered += 1;
        }
    }
    let elapsed = started.elapsed();
    gateway.stdin = Some(writer.join().expect("writer"));
    println!(
        "| sustained audited aai_exec calls, {count} pipelined (2 audit rows each) | {:.0} calls/s |",
        count as f64 / elapsed.as_secs_f64()
    );
}

fn direct_zbus(address: &str, count: usize) -> Duration {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let connection = zbus::connection::Builder::address(address)
            .expect("address")
            .build()
            .await
            .expect("connect");
        let mut samples = Vec::with_capacity(count);
        for _ in 0..count {
            let started = Instant::now();
            let reply = connection
                .call_method(
                    Some(TEST_SERVICE),
                    "/org/aai/Test",
                    Some("org.aai.Test"),
                    "Echo",
                    &("hello",),
                )
                .await
                .expect("Echo");
            let text: String = reply.body().deserialize().expect("string");
            assert_eq!(text, "hello");
            samples.push(started.elapsed());
        }
        median(samples)
    })
}
