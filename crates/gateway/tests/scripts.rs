//! Script tools through the whole pipeline: retries of read-only tools, a hung executor that
//! does not hold up other calls, and `call --dry-run` from the command line.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use aai_descriptor::{ErrorKind, Platform};
use aai_engine::config::{Config, Retry};
use aai_executor::{Executors, Settings};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_aai-gateway");

/// osascript stand-in: counts its runs; fails with "not running" while `failures` (a number
/// in its folder) is above the count; sleeps when the script mentions `hang`.
const FAKE_OSASCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")
program=$(cat)
count=$(( $(cat "$dir/count" 2>/dev/null || echo 0) + 1 )); echo $count > "$dir/count"
case "$program" in *hang*) sleep 30;; esac
if [ "$count" -le "$(cat "$dir/failures" 2>/dev/null || echo 0)" ]; then
  echo "execution error: Mail got an error: Application isn’t running. (-600)" >&2; exit 1
fi
echo '{"ok":true}'
"#;

fn mail() -> Value {
    let tool = |name: &str, script: &str, read_only: bool| {
        json!({"name": name, "description": name, "script": script, "readOnly": read_only,
               "output_parser": "result as text"})
    };
    json!({"schema_version": "1.0", "appId": "com.apple.mail", "name": "Mail", "platforms": {
        "macos": {"automation": "applescript", "tools": [
            tool("list", "return \"list\"", true),
            tool("send", "return \"send\"", false),
            json!({"name": "stuck", "description": "stuck", "script": "return \"hang\"", "timeout": 4})
        ]}
    }})
}

mod common;

use common::TestGateway;

/// A gateway offering the Mail app on macOS through a fake `osascript` in its folder that
/// fails as often as `fail_first` says; `attempts` tries of a read-only tool.
fn setup(attempts: u32) -> TestGateway {
    let dir = tempfile::tempdir().expect("dir");
    let fake = dir.path().join("osascript");
    std::fs::write(&fake, FAKE_OSASCRIPT).expect("write");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = Config {
        policy: serde_json::from_value(
            json!({"default_profile": "p", "profiles": {"p": {"preset": "development"}}}),
        )
        .expect("policy"),
        retry: Retry {
            attempts,
            backoff_ms: 10,
        },
        timeout_seconds: 1,
        ..Config::default()
    };
    let executors = Executors::with_settings(
        Settings {
            osascript: fake.display().to_string(),
            ..Settings::default()
        },
        None,
    );
    let setup = TestGateway::offering(
        dir,
        &[mail()],
        &[Platform::Linux, Platform::Macos],
        config,
        executors,
    );
    assert_eq!(
        setup.gateway.snapshot_changes().borrow().apps[0].platform,
        Platform::Macos
    );
    setup
}

/// What a test does to the fake `osascript`.
trait FakeOsascript {
    fn fail_first(&self, n: u32);
    fn runs(&self) -> u32;
}

impl FakeOsascript for TestGateway {
    fn fail_first(&self, n: u32) {
        std::fs::write(self.dir.path().join("failures"), n.to_string()).expect("failures");
        let _ = std::fs::remove_file(self.dir.path().join("count"));
    }

    fn runs(&self) -> u32 {
        std::fs::read_to_string(self.dir.path().join("count"))
            .map_or(0, |c| c.trim().parse().expect("count"))
    }
}

#[tokio::test]
async fn read_only_tools_are_retried_on_app_not_running() {
    let setup = setup(3);
    setup.fail_first(2);
    let result = setup
        .gateway
        .exec("test", "com.apple.mail", "list", &json!({}))
        .await
        .expect("succeeds on the third try");
    assert_eq!(result, json!({"ok": true}));
    assert_eq!(setup.runs(), 3);

    setup.fail_first(5);
    let error = setup
        .gateway
        .exec("test", "com.apple.mail", "list", &json!({}))
        .await
        .expect_err("gives up");
    assert_eq!(error.kind, ErrorKind::AppNotRunning);
    assert_eq!(setup.runs(), 3);
    assert_eq!(
        error.detail.as_ref().and_then(|d| d.get("attempts")),
        Some(&json!(3))
    );
}

#[tokio::test]
async fn tools_that_change_things_are_never_retried() {
    let setup = setup(3);
    setup.fail_first(1);
    let error = setup
        .gateway
        .exec("test", "com.apple.mail", "send", &json!({}))
        .await
        .expect_err("not retried");
    assert_eq!(error.kind, ErrorKind::AppNotRunning);
    assert_eq!(setup.runs(), 1);
}

#[tokio::test]
async fn retries_can_be_turned_off() {
    let setup = setup(1);
    setup.fail_first(1);
    let error = setup
        .gateway
        .exec("test", "com.apple.mail", "list", &json!({}))
        .await
        .expect_err("not retried");
    assert_eq!(error.kind, ErrorKind::AppNotRunning);
    assert_eq!(setup.runs(), 1);
}

/// While one call hangs in its executor, other calls are answered; the hung one ends with
/// TIMEOUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_executor_does_not_hold_up_other_calls() {
    let setup = setup(1);
    let gateway = setup.gateway.clone();
    let stuck = tokio::spawn(async move {
        gateway
            .exec("test", "com.apple.mail", "stuck", &json!({}))
            .await
    });
    // Let the stuck call start its program.
    for _ in 0..200 {
        if setup.runs() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..3 {
        let quick = setup
            .gateway
            .exec("test", "com.apple.mail", "send", &json!({}))
            .await;
        assert_eq!(quick.expect("answered"), json!({"ok": true}));
        assert!(!stuck.is_finished(), "the stuck call ended early");
    }
    let error = tokio::time::timeout(Duration::from_secs(20), stuck)
        .await
        .expect("bounded")
        .expect("joined")
        .expect_err("times out");
    assert_eq!(error.kind, ErrorKind::Timeout);
}

fn install(home: &Path, file: &Path) {
    let doc: Value = serde_json::from_slice(&std::fs::read(file).expect("read")).expect("json");
    let id = doc["appId"].as_str().expect("appId");
    std::fs::create_dir_all(home.join(id)).expect("mkdir");
    std::fs::copy(file, home.join(id).join("aai.json")).expect("copy");
}

fn dry_run(home: &Path, args: &[&str]) -> std::process::Output {
    aai_test_support::cli::Run::new(BIN, home)
        .args(["call"])
        .args(args)
        .args(["--dry-run"])
        .output()
}

/// An author on Linux checks a macOS tool: the exact osascript command, and nothing runs.
#[test]
fn dry_run_prints_what_would_run_for_another_platform() {
    let home = tempfile::tempdir().expect("home");
    let doc = json!({"schema_version": "1.0", "appId": "com.example.notes", "name": "Notes", "platforms": {
        "macos": {"automation": "applescript", "tools": [{"name": "add", "description": "Add a note",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
            "script": "tell application \"Notes\" to make new note with properties {name:\"${title}\"}"}]}
    }});
    let file = home.path().join("notes.json");
    std::fs::write(&file, doc.to_string()).expect("write");
    install(home.path(), &file);
    let title = "\" & (do shell script \"touch /tmp/pwned\") & \"";
    let args = json!({"title": title}).to_string();
    let out = dry_run(
        home.path(),
        &[
            "com.example.notes",
            "add",
            "--args",
            &args,
            "--platform",
            "macos",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(plan["program"], "osascript");
    assert_eq!(plan["argv"], json!(["-l", "AppleScript", "-", title]));
    assert_eq!(
        plan["stdin"],
        "on run argv\ntell application \"Notes\" to make new note with properties {name:(\"\" & (item 1 of argv) & \"\")}\nend run\n"
    );
    assert_eq!(plan["env"], json!({}));
    assert_eq!(plan["platform"], "macos");

    // Arguments are checked as for a real call.
    let out = dry_run(
        home.path(),
        &["com.example.notes", "add", "--platform", "macos"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("INVALID_PARAMS"));
    // Without --platform the app has no section for Linux.
    let out = dry_run(home.path(), &["com.example.notes", "add", "--args", &args]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("APP_NOT_FOUND"));
}
