//! The command line: validate, --scan, call, --version, --help.

use std::path::Path;
use std::process::{Command, Output};

use aai_test_support::{TEST_SERVICE, TestBus, full_test_descriptor};

const BIN: &str = env!("CARGO_BIN_EXE_aai-gateway");

fn run(home: &Path, args: &[&str], bus: Option<&TestBus>) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("AAI_HOME", home)
        .env("AAI_LOG", "warn");
    if let Some(bus) = bus {
        command.env("DBUS_SESSION_BUS_ADDRESS", bus.address());
    }
    command.output().expect("run aai-gateway")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn install(home: &Path, app_id: &str, doc: &str) {
    std::fs::create_dir_all(home.join(app_id)).expect("mkdir");
    std::fs::write(home.join(app_id).join("aai.json"), doc).expect("write");
}

#[test]
fn validate_reports_file_pointer_and_problem() {
    let dir = tempfile::tempdir().expect("dir");
    let good = dir.path().join("good.json");
    std::fs::write(
        &good,
        full_test_descriptor("org.aai.test", TEST_SERVICE).to_string(),
    )
    .expect("write");
    let out = run(
        dir.path(),
        &["validate", good.to_str().expect("utf8")],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("good.json: ok"));

    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"][0]["args"] = serde_json::json!(["${missing}"]);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, doc.to_string()).expect("write");
    let out = run(
        dir.path(),
        &[
            "validate",
            good.to_str().expect("utf8"),
            bad.to_str().expect("utf8"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "{}: /platforms/linux/tools/0/args/0: placeholder ${{missing}}",
            bad.display()
        )),
        "{stdout}"
    );
}

#[test]
fn scan_lists_apps_and_skipped_files_with_reasons() {
    let dir = tempfile::tempdir().expect("dir");
    install(
        dir.path(),
        "org.aai.test",
        &full_test_descriptor("org.aai.test", TEST_SERVICE).to_string(),
    );
    install(dir.path(), "broken", "{\"appId\": 5}");
    let mut mac_only = full_test_descriptor("com.example.maconly", TEST_SERVICE);
    mac_only["platforms"] =
        serde_json::json!({"macos": {"automation": "applescript", "tools": []}});
    install(dir.path(), "com.example.maconly", &mac_only.to_string());
    let out = run(dir.path(), &["--scan"], None);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("1 app(s) offered on linux"), "{stdout}");
    assert!(
        stdout.contains("org.aai.test") && stdout.contains("app_org_aai_test"),
        "{stdout}"
    );
    assert!(stdout.contains("2 file(s) skipped"), "{stdout}");
    assert!(
        stdout.contains("broken/aai.json: /appId: 5 is not of type \"string\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("com.example.maconly has no `linux` section"),
        "{stdout}"
    );
}

#[test]
fn call_runs_a_tool_through_the_pipeline() {
    let dir = tempfile::tempdir().expect("dir");
    install(
        dir.path(),
        "org.aai.test",
        &full_test_descriptor("org.aai.test", TEST_SERVICE).to_string(),
    );
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let out = run(
        dir.path(),
        &[
            "call",
            "org.aai.test",
            "add",
            "--args",
            r#"{"a": 2, "b": 3}"#,
        ],
        Some(&bus),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "5");

    let out = run(
        dir.path(),
        &["call", "org.aai.test", "add", "--args", r#"{"a": "x"}"#],
        Some(&bus),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("INVALID_PARAMS (-32005)"),
        "{}",
        text(&out.stderr)
    );

    let out = run(dir.path(), &["call", "org.aai.nope", "add"], Some(&bus));
    assert!(
        text(&out.stderr).contains("APP_NOT_FOUND"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn version_and_help() {
    let dir = tempfile::tempdir().expect("dir");
    let out = run(dir.path(), &["--version"], None);
    assert!(text(&out.stdout).starts_with("aai-gateway "));
    let out = run(dir.path(), &["--help"], None);
    let help = text(&out.stdout);
    for word in [
        "--scan",
        "--dev",
        "--mcp",
        "validate",
        "call",
        "--log-level",
    ] {
        assert!(help.contains(word), "{word} missing from help:\n{help}");
    }
}
