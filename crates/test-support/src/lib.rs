//! Test fixtures shared by the workspace: a private `dbus-daemon --session` with D-Bus
//! activation, the test D-Bus service, and descriptor builders.
//!
//! Every wait here is bounded; a missing system part fails the test with a message that
//! says what to install.
#![allow(clippy::missing_panics_doc)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

pub mod cli;
pub mod http;
pub mod postgres;
pub mod xvfb;

/// The bus name of the test service in [`TestBus::spawn_service`].
pub const TEST_SERVICE: &str = "org.aai.Test";
/// A name only D-Bus activation can start.
pub const ACTIVATABLE_SERVICE: &str = "org.aai.Activatable";
/// A name the bus policy forbids sending to.
pub const FORBIDDEN_SERVICE: &str = "org.aai.Forbidden";

/// The test D-Bus service binary, built on first use if `cargo test` has not built it yet.
pub fn service_binary() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("current exe");
        // Test binaries live in target/<profile>/deps, bins (and this harness) in target/<profile>.
        let exe_dir = exe.parent().expect("exe dir").to_path_buf();
        let profile_dir = if exe_dir.ends_with("deps") {
            exe_dir.parent().expect("target dir").to_path_buf()
        } else {
            exe_dir
        };
        let candidate = profile_dir.join("aai-test-dbus-service");
        if !candidate.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args([
                    "build",
                    "-q",
                    "-p",
                    "aai-test-support",
                    "--bin",
                    "aai-test-dbus-service",
                ])
                .status()
                .expect("run cargo build for the test service");
            assert!(status.success(), "building aai-test-dbus-service failed");
        }
        assert!(candidate.exists(), "missing {}", candidate.display());
        candidate
    })
    .clone()
}

/// A private session bus that lives as long as this value.
pub struct TestBus {
    daemon: Child,
    services: Vec<Child>,
    address: String,
    _dir: tempfile::TempDir,
}

impl TestBus {
    /// Starts `dbus-daemon` with activation of [`ACTIVATABLE_SERVICE`] and a policy that
    /// denies [`FORBIDDEN_SERVICE`].
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let services = dir.path().join("services");
        std::fs::create_dir_all(&services).expect("services dir");
        std::fs::write(
            services.join(format!("{ACTIVATABLE_SERVICE}.service")),
            format!(
                "[D-BUS Service]\nName={ACTIVATABLE_SERVICE}\nExec={} {ACTIVATABLE_SERVICE}\n",
                service_binary().display()
            ),
        )
        .expect("service file");
        let config = dir.path().join("session.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <servicedir>{}</servicedir>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <deny send_destination="{FORBIDDEN_SERVICE}"/>
  </policy>
</busconfig>
"#,
                dir.path().join("bus").display(),
                services.display()
            ),
        )
        .expect("bus config");
        let mut daemon = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            // Activated services inherit this; a test's own stderr would keep its pipe open.
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start dbus-daemon ({e}); install it with `apt-get install -y dbus-daemon`"));
        let stdout = daemon.stdout.take().expect("stdout");
        let address = read_line_within(stdout, Duration::from_secs(10))
            .expect("dbus-daemon printed no address within 10 s");
        Self {
            daemon,
            services: Vec::new(),
            address: address.trim().to_owned(),
            _dir: dir,
        }
    }

    /// The bus address, for `DBUS_SESSION_BUS_ADDRESS`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Starts the test service under `name` and waits (at most 10 s) until it owns it.
    pub fn spawn_service(&mut self, name: &str) {
        let mut child = Command::new(service_binary())
            .arg(name)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the test D-Bus service");
        let stdout = child.stdout.take().expect("stdout");
        let line = read_line_within(stdout, Duration::from_secs(10));
        self.services.push(child);
        assert_eq!(
            line.as_deref().map(str::trim),
            Some("ready"),
            "test service {name} did not start"
        );
    }
}

impl Drop for TestBus {
    fn drop(&mut self) {
        for child in &mut self.services {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// Reads one line from `reader` on a helper thread, giving up after `limit`.
fn read_line_within(
    reader: impl std::io::Read + Send + 'static,
    limit: Duration,
) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let mut reader = BufReader::new(reader);
        let ok = reader.read_line(&mut line).is_ok_and(|n| n > 0);
        let _ = tx.send(ok.then_some(line));
        // Keep draining so the child never blocks on a full pipe.
        let mut sink = String::new();
        while reader.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    rx.recv_timeout(limit).ok().flatten()
}

/// The descriptor of the test service (`fixtures/test-service.aai.json`), shared with the
/// Python end-to-end tests.
pub const TEST_DESCRIPTOR: &str = include_str!("../fixtures/test-service.aai.json");

/// The test service's descriptor as `app_id`, pointed at bus name `service`.
pub fn full_test_descriptor(app_id: &str, service: &str) -> Value {
    let mut doc: Value = serde_json::from_str(TEST_DESCRIPTOR).expect("fixture is JSON");
    doc["appId"] = json!(app_id);
    doc["platforms"]["linux"]["service"] = json!(service);
    doc
}
