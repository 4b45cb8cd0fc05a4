//! The command line: validate, --scan, call, --version, --help.

use std::path::Path;
use std::process::{Command, Output};

use aai_test_support::{TEST_SERVICE, TestBus, full_test_descriptor};

const BIN: &str = env!("CARGO_BIN_EXE_aai-gateway");

fn run(home: &Path, args: &[&str], bus: Option<&TestBus>) -> Output {
    let run = aai_test_support::cli::Run::new(BIN, home).args(args);
    match bus {
        Some(bus) => run.bus(bus),
        None => run,
    }
    .output()
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
    assert!(
        stdout.contains("10 app(s) offered on linux, web")
            && stdout.contains("(built in: local.files)"),
        "{stdout}"
    );
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
        stdout.contains("com.example.maconly has no `linux` or `web` section"),
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

#[test]
fn consent_and_audit_commands() {
    let dir = tempfile::tempdir().expect("dir");
    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"][1]["risk"] = serde_json::json!("high");
    install(dir.path(), "org.aai.test", &doc.to_string());
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let add = [
        "call",
        "org.aai.test",
        "add",
        "--args",
        r#"{"a": 2, "b": 3}"#,
    ];

    // High risk needs approval under the default profile; the error says how to grant it.
    let out = run(dir.path(), &add, Some(&bus));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("PERMISSION_DENIED")
            && stderr.contains("aai-gateway consent grant org.aai.test add --client cli"),
        "{stderr}"
    );

    let out = run(
        dir.path(),
        &["consent", "grant", "org.aai.test", "add", "--client", "cli"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(dir.path(), &["consent", "list"], None);
    assert!(
        text(&out.stdout).contains("cli") && text(&out.stdout).contains("org.aai.test:add"),
        "{}",
        text(&out.stdout)
    );
    let out = run(dir.path(), &add, Some(&bus));
    assert_eq!(text(&out.stdout).trim(), "5", "{}", text(&out.stderr));

    let out = run(
        dir.path(),
        &["consent", "revoke", "org.aai.test", "--client", "cli"],
        None,
    );
    assert!(text(&out.stdout).contains("revoked 1 grant(s)"));
    assert_eq!(run(dir.path(), &add, Some(&bus)).status.code(), Some(1));

    let out = run(
        dir.path(),
        &["audit", "show", "--tool", "add", "--since", "1h"],
        None,
    );
    let shown = text(&out.stdout);
    assert_eq!(shown.lines().count(), 4, "{shown}");
    assert!(
        shown.contains("require_approval denied")
            && shown.contains("require_approval:granted success"),
        "{shown}"
    );
    let out = run(dir.path(), &["audit", "tail", "-n", "1"], None);
    assert_eq!(text(&out.stdout).lines().count(), 1);
    let out = run(dir.path(), &["audit", "export", "--format", "jsonl"], None);
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("jsonl"))
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["caller"], "cli");
    let out = run(dir.path(), &["audit", "export", "--format", "csv"], None);
    assert!(text(&out.stdout).starts_with("id,time,call_id,caller,app,tool,args,"));
    let out = run(dir.path(), &["audit", "verify"], None);
    assert!(
        out.status.success() && text(&out.stdout).contains("ok: 4 rows"),
        "{}",
        text(&out.stdout)
    );

    // Tampering is found and named.
    let db = rusqlite_free_edit(&dir.path().join("data.db"));
    assert!(db);
    let out = run(dir.path(), &["audit", "verify"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("row 2"), "{}", text(&out.stdout));
}

/// Edits row 2 behind the gateway's back, with the sqlite3 module of the system Python.
fn rusqlite_free_edit(path: &Path) -> bool {
    Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE audit_log SET result='success' WHERE id=2\"); c.commit()"])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// The gateway's own files are private: created 0700/0600, looser ones tightened at start
/// with a log line; a big argument is kept in the audit log as size, hash and prefix.
#[cfg(unix)]
#[test]
fn the_gateways_files_are_private_and_the_log_keeps_no_file_contents() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    let allowed = dir.path().join("work");
    std::fs::create_dir_all(&allowed).expect("work");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(
        home.join("config.json"),
        serde_json::json!({"local": {"sandbox": {"allowed_directories": [allowed]}},
            "policy": {"default_profile": "a", "profiles": {"a": {"preset": "full_auto"}}}})
        .to_string(),
    )
    .expect("config");
    let content = "secret-looking file body ".repeat(4000);
    let target = allowed.join("out.txt");
    let args = serde_json::json!({"path": target, "content": content}).to_string();
    let mut command = Command::new(BIN);
    let out = command
        .args(["call", "local.files", "file_write", "--args", &args])
        .env("AAI_HOME", &home)
        .env("AAI_LOG", "info")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("made private to the user"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(mode(&home), 0o700);
    for name in ["data.db", "data.db-wal", "data.db-shm"] {
        let path = home.join(name);
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{name}");
        }
    }
    assert_eq!(mode(&home.join("data.db")), 0o600);
    assert_eq!(std::fs::read_to_string(&target).expect("written"), content);
    let export = text(&run(&home, &["audit", "export"], None).stdout);
    assert!(export.contains("file_write"), "{export}");
    assert!(
        !export.contains(&content[..500]) && export.contains("100000 chars"),
        "{}",
        &export[..export.len().min(2000)]
    );
    assert!(text(&run(&home, &["audit", "verify"], None).stdout).contains("chain intact"));
}

/// A reader that goes away (`audit show | head -1`) ends the command quietly with status 0.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().expect("dir");
    let log = aai_audit::AuditLog::open(&dir.path().join("data.db")).expect("log");
    for i in 0..3000 {
        log.append(&aai_audit::Entry {
            ts_ms: 1,
            call_id: format!("c{i}"),
            caller: "t".into(),
            app: "org.example.app".into(),
            tool: "tool".into(),
            args: "{}".into(),
            decision: "auto_approve".into(),
            result: "success".into(),
            risk: "low".into(),
            duration_ms: 1,
            error: None,
            output: None,
            args_sha256: None,
        })
        .expect("append");
    }
    drop(log);
    for args in [
        &["audit", "show"][..],
        &["audit", "export"],
        &["completions", "bash"],
    ] {
        let mut child = Command::new(BIN)
            .args(args)
            .env("AAI_HOME", dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("line");
        // The reader is gone now.
        let out = child.wait_with_output().expect("wait");
        assert!(!first.is_empty());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            !text(&out.stderr).contains("panicked"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn completions_and_the_manual_page_are_generated() {
    let dir = tempfile::tempdir().expect("dir");
    for (shell, marker) in [
        ("bash", "_aai-gateway()"),
        ("zsh", "#compdef aai-gateway"),
        ("fish", "complete -c aai-gateway"),
    ] {
        let out = run(dir.path(), &["completions", shell], None);
        assert!(out.status.success());
        let script = text(&out.stdout);
        assert!(
            script.contains(marker) || script.contains("_aai__gateway()"),
            "{shell}: {}",
            &script[..200.min(script.len())]
        );
        assert!(script.contains("consent"), "{shell}");
    }
    let out = run(dir.path(), &["man"], None);
    assert!(out.status.success());
    let page = text(&out.stdout);
    assert!(
        page.contains(".TH aai-gateway 1") && page.contains("logs/aai\\-gateway.log"),
        "{}",
        &page[..400.min(page.len())]
    );
    // --dev belongs to serving and `call`, not to every subcommand.
    let out = run(dir.path(), &["consent", "list", "--dev"], None);
    assert!(!out.status.success());
    let out = run(dir.path(), &["call", "--help"], None);
    assert!(text(&out.stdout).contains("--dev"));
    assert!(
        text(&out.stdout).contains("The tool's name"),
        "positional help"
    );
}

/// Errors print once, worded for the person at the keyboard.
#[test]
fn cli_errors_print_once_for_a_person() {
    let dir = tempfile::tempdir().expect("dir");
    let out = run(dir.path(), &["call", "org.example.nothere", "x"], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("APP_NOT_FOUND").count(), 1, "{stderr}");
    assert!(
        !stderr.contains("aai_apps") && stderr.contains("--scan"),
        "{stderr}"
    );
    let out = run(
        dir.path(),
        &["audit", "show", "--since", "yesterday-ish"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
}

/// A broken config fails closed, and every refused call (and `config check`) names the file,
/// line, column and problem instead of suggesting grants.
#[test]
fn an_invalid_config_is_named_by_every_refused_call_and_by_config_check() {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path();
    std::fs::write(
        home.join("config.json"),
        "{\n  \"timeout_seconds\": 30,\n  \"policy\": {\"defualt_profile\": \"full_auto\"}\n}\n",
    )
    .expect("config");
    let out = run(home, &["call", "local.system", "system_info"], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let expected = format!(
        "the config is invalid: {}:3:",
        home.join("config.json").display()
    );
    assert!(
        stderr.contains(&expected) && stderr.contains("defualt_profile"),
        "{stderr}"
    );
    assert!(!stderr.contains("consent grant"), "{stderr}");

    let out = run(home, &["config", "check"], None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains(&expected), "{stdout}");
    assert!(
        stdout.contains("at /policy"),
        "the schema's view too: {stdout}"
    );

    std::fs::write(home.join("config.json"), "{\"timeout_seconds\": 30,}").expect("config");
    let out = run(home, &["config", "check"], None);
    assert!(
        text(&out.stdout).contains("config.json:1:"),
        "{}",
        text(&out.stdout)
    );

    // A note and a trailing comma: the comma is the mistake, wherever it is reported.
    std::fs::write(
        home.join("config.json"),
        "{\n  \"$comment\": \"my notes\",\n  \"timeout_seconds\": 30,\n}\n",
    )
    .expect("config");
    for args in [
        &["call", "local.system", "system_info"][..],
        &["config", "check"],
    ] {
        let out = run(home, args, None);
        let said = text(&out.stdout) + &text(&out.stderr);
        assert!(
            said.contains("config.json:4:1 trailing comma") && !said.contains("$comment"),
            "{args:?}: {said}"
        );
    }

    std::fs::write(home.join("config.json"), "{\"timeout_seconds\": 5}").expect("config");
    let out = run(home, &["config", "check"], None);
    assert!(out.status.success(), "{}", text(&out.stdout));
}

/// `schemas/config.schema.json` is the schema generated from the config types, and the
/// README's example config passes it.
#[test]
fn the_published_config_schema_is_current_and_accepts_the_readme_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("schemas/config.schema.json")).expect("schema file"),
    )
    .expect("json");
    assert_eq!(
        published,
        aai_engine::config::Config::schema(),
        "regenerate with `aai-gateway config schema > schemas/config.schema.json`"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).expect("readme");
    let section = readme
        .split("## Configuration")
        .nth(1)
        .expect("configuration section");
    let example = section
        .split("```json")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("example");
    let example: serde_json::Value = serde_json::from_str(example).expect("example is JSON");
    let validator = jsonschema::validator_for(&published).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&example)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let mut bad = example.clone();
    bad["policy"]["defualt_profile"] = serde_json::json!("x");
    assert!(!validator.is_valid(&bad));
}

/// Paths in config expand `~`; an `extra_ca_certs` file that holds no certificate is an error
/// naming the file.
#[test]
fn ca_files_in_config_expand_home_and_must_hold_certificates() {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("aai");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(dir.path().join("empty.pem"), "not a certificate\n").expect("pem");
    std::fs::write(
        home.join("config.json"),
        r#"{"web": {"extra_ca_certs": ["~/empty.pem"]}}"#,
    )
    .expect("config");
    let out = Command::new(BIN)
        .args(["config", "check"])
        .env("AAI_HOME", &home)
        .env("HOME", dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let expanded = dir.path().join("empty.pem").display().to_string();
    assert!(
        stdout.contains(&expanded) && stdout.contains("holds no certificate"),
        "{stdout}"
    );
}

/// `call --dry-run --platform macos|windows` shows the fixed desktop program that would run,
/// with every value only on stdin; on Linux the X11 backend is named.
#[test]
fn desktop_tools_dry_run_for_each_platform() {
    let dir = tempfile::tempdir().expect("dir");
    let text_arg = r#"{"text": "\"); doShellScript(\"id\"); ('; Remove-Item C:\\ ; $(id)"}"#;
    for (platform, program) in [("macos", "osascript"), ("windows", "powershell.exe")] {
        let out = run(
            dir.path(),
            &[
                "call",
                "local.input",
                "type_text",
                "--args",
                text_arg,
                "--dry-run",
                "--platform",
                platform,
            ],
            None,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(plan["program"], program);
        let argv = plan["argv"].to_string();
        assert!(
            !argv.contains("doShellScript(\\\"id"),
            "values never in argv: {argv}"
        );
        let stdin: serde_json::Value =
            serde_json::from_str(plan["stdin"].as_str().expect("stdin")).expect("stdin json");
        assert_eq!(stdin["tool"], "type_text");
        assert!(
            stdin["args"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("doShellScript"))
        );
    }
    let out = run(
        dir.path(),
        &["call", "local.screen", "screenshot", "--dry-run"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("X11"), "{}", text(&out.stdout));
}

/// `schemas/workflow.schema.json` is the schema generated from the workflow types, and it
/// accepts a workflow that uses every part and refuses one with a field it does not know.
#[test]
fn the_published_workflow_schema_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("schemas/workflow.schema.json")).expect("schema file"),
    )
    .expect("json");
    assert_eq!(
        published,
        aai_engine::workflow::Workflow::schema(),
        "regenerate with `aai-gateway workflow schema > schemas/workflow.schema.json`"
    );
    let validator = jsonschema::validator_for(&published).expect("a valid schema");
    let full = serde_json::json!({
        "description": "Mail the report",
        "inputs": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        "steps": [
            {"app": "local.files", "tool": "file_read", "args": {"path": "/tmp/r.txt"}, "retry": 2, "timeout_ms": 5000},
            {"app": "com.apple.mail", "tool": "send", "args": {"to": {"$input": "/to"}, "body": {"$from": "/0/result/content"}},
             "if": {"$from": "/0/status", "equals": "ok"}, "on_error": "continue"}
        ]
    });
    assert!(
        validator.is_valid(&full),
        "{:?}",
        validator
            .iter_errors(&full)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    let unknown = serde_json::json!({"description": "d", "steps": [{"app": "a", "tool": "t", "shell": "rm -rf ~"}]});
    assert!(!validator.is_valid(&unknown));
}

/// MCP clients start servers with pipes (Python, Rust) or socket pairs (Node's libuv); a
/// person may also feed a file. Each is read and written whole, in order.
#[test]
fn the_server_speaks_over_pipes_sockets_and_files() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    use std::process::Stdio;
    let dir = tempfile::tempdir().expect("dir");
    // Enough apps that the tool list is larger than a pipe's or a socket's buffer (a tool
    // each: `full`, not `auto`'s compact list past 30 apps).
    std::fs::write(dir.path().join("config.json"), r#"{"exposure": "full"}"#).expect("config");
    for i in 0..400 {
        let id = format!("org.example.app{i}");
        let doc = full_test_descriptor(&id, TEST_SERVICE).to_string();
        install(dir.path(), &id, &doc);
    }
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let script = format!(
        "{init}\n{}\n{}\n{}\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
    );
    let answers_of = |out: &str| -> Vec<serde_json::Value> {
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON frame per line"))
            .filter(|f| f.get("id").is_some())
            .collect()
    };
    let check = |out: &str, how: &str| {
        let answers = answers_of(out);
        let mut ids: Vec<_> = answers.iter().filter_map(|f| f["id"].as_u64()).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3], "{how}");
        let list = answers.iter().find(|f| f["id"] == 2).expect("tools/list");
        let tools = list["result"]["tools"].as_array().expect("tools");
        assert!(tools.len() > 400, "{how}: {} tools", tools.len());
    };
    let gateway = |stdin: Stdio, stdout: Stdio| {
        Command::new(BIN)
            .env("AAI_HOME", dir.path())
            .env("AAI_LOG", "warn")
            .stdin(stdin)
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn")
    };
    let read_three = |reader: &mut dyn BufRead| {
        let mut out = String::new();
        while answers_of(&out).len() < 3 {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).expect("read") > 0, "closed");
            out.push_str(&line);
        }
        out
    };

    // Pipes.
    let mut child = gateway(Stdio::piped(), Stdio::piped());
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    check(&read_three(&mut reader), "pipes");
    drop(child.stdin.take());
    assert!(child.wait().expect("wait").success());

    // One socket pair for each of stdin and stdout, as libuv makes them.
    let (input, input_peer) = UnixStream::pair().expect("pair");
    let (output, output_peer) = UnixStream::pair().expect("pair");
    let mut child = gateway(
        Stdio::from(std::os::fd::OwnedFd::from(input_peer)),
        Stdio::from(std::os::fd::OwnedFd::from(output_peer)),
    );
    (&input).write_all(script.as_bytes()).expect("write");
    let mut reader = BufReader::new(&output);
    check(&read_three(&mut reader), "sockets");
    input.shutdown(std::net::Shutdown::Write).expect("close");
    assert!(child.wait().expect("wait").success());

    // A file in, a file out (tokio's own stdio): read to its end, every request answered
    // (the tool list waits for the first scan), then the server ends.
    let requests = dir.path().join("requests.jsonl");
    let answers = dir.path().join("answers.jsonl");
    std::fs::write(&requests, &script).expect("write");
    let mut child = gateway(
        Stdio::from(std::fs::File::open(&requests).expect("open")),
        Stdio::from(std::fs::File::create(&answers).expect("create")),
    );
    assert!(child.wait().expect("wait").success());
    check(
        &std::fs::read_to_string(&answers).expect("answers"),
        "files",
    );
}

/// A first run in a fresh home: `init` writes a starter config with notes (which the gateway
/// and its schema accept), makes the folder it names, and prints the line for each client;
/// a second `init` leaves the config alone. The first `serve` writes the starter too.
#[test]
fn init_and_the_first_serve_set_up_a_fresh_home() {
    let dir = tempfile::tempdir().expect("dir");
    let user = dir.path().join("user");
    std::fs::create_dir_all(&user).expect("user");
    let home = user.join(".aai");
    let init = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("HOME", &user)
            .env("AAI_HOME", &home)
            .env("AAI_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run init")
    };
    let out = init(&["init"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let config = std::fs::read_to_string(home.join("config.json")).expect("written");
    assert!(
        config.contains("\"$comment\"") && config.contains("~/Projects"),
        "{config}"
    );
    assert!(user.join("Projects").is_dir(), "the allowed folder is made");
    // The default home is not named; the binary is, for each client.
    for expected in [
        "claude mcp add aai-gateway -- ",
        "codex mcp add aai-gateway -- ",
        "\"mcpServers\" in claude_desktop_config.json",
        "\"aai-gateway\": {\"command\":",
        "~/.cursor/mcp.json",
    ] {
        assert!(stdout.contains(expected), "{expected}: {stdout}");
    }
    assert!(!stdout.contains("AAI_HOME"), "{stdout}");
    let check = run(&home, &["config", "check"], None);
    assert!(check.status.success(), "{}", text(&check.stdout));

    // Again: the config is left as it is (a change the user made survives).
    std::fs::write(home.join("config.json"), "{\"exposure\": \"compact\"}").expect("edit");
    let out = init(&["init", "--json", "--folder", "/elsewhere"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
    assert_eq!(report["written"], false, "{report}");
    assert_eq!(
        std::fs::read_to_string(home.join("config.json")).expect("kept"),
        "{\"exposure\": \"compact\"}"
    );
    assert_eq!(report["clients"].as_array().map(Vec::len), Some(4));

    // The first `serve` of a home with no config writes the starter and makes its folder.
    let fresh = dir.path().join("fresh");
    let mut serve = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("HOME", &user)
        .env("AAI_HOME", &fresh)
        .env("AAI_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve");
    let stderr = serve.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("starter config") || line.contains("listening") {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("serve says it wrote the starter");
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(line.contains("starter config"), "{line}");
    let written = std::fs::read_to_string(fresh.join("config.json")).expect("starter");
    assert!(written.contains("allowed_directories"), "{written}");
}

/// `call APP` without a tool prints the app's guide; `--json` prints data as JSON and text
/// is the default.
#[test]
fn call_without_a_tool_prints_the_guide_and_json_is_on_request() {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path();
    let out = run(home, &["call", "local.system"], None);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("system_info()") && stdout.contains("aai-gateway call local.system"),
        "{stdout}"
    );
    let out = run(home, &["call", "local.system", "--json"], None);
    let guide: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        guide["guide"]
            .as_str()
            .is_some_and(|g| g.contains("system_info"))
    );
    let out = run(home, &["call", "nope.app"], None);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(said.contains("APP_NOT_FOUND"));
    // The command line names commands, never an agent's MCP tool.
    assert!(said.contains("`aai-gateway discover nope.app`"), "{said}");
    for tool in [
        "web_discover",
        "aai_exec",
        "aai_guide",
        "aai_apps",
        "aai_batch",
        "app_",
    ] {
        assert!(!said.contains(tool), "{tool}: {said}");
    }
    // Reports (a schedule's) are text too unless asked for as JSON.
    let out = run(home, &["schedule", "list"], None);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("tasks: none")
            && serde_json::from_str::<serde_json::Value>(&stdout).is_err(),
        "{stdout}"
    );
    let out = run(home, &["schedule", "list", "--json"], None);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(listed["tasks"], serde_json::json!([]));
}

/// Mistakes name their fix: `validate` says what the app store and a call would refuse of a
/// valid descriptor, and `config check` answers a key at the wrong level with its place.
#[test]
fn validate_and_config_check_name_what_would_be_refused_and_the_fix() {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let file = dir.path().join("aai.json");
    let descriptor = serde_json::json!({"schema_version": "1.0", "appId": "dev.local.tasks",
        "name": "Tasks", "description": "A local tasks API.", "version": "2",
        "platforms": {"web": {"automation": "restapi", "base_url": "http://127.0.0.1:8080",
            "tools": [{"name": "list_tasks", "description": "List tasks.", "endpoint": "/tasks",
                "method": "GET", "parameters": {"type": "object", "properties": {}}}]}}});
    std::fs::write(&file, descriptor.to_string()).expect("write");
    let path = file.display().to_string();
    let out = run(&home, &["validate", &path], None);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "valid, with notes: {stdout}");
    assert!(
        stdout
            .contains("the app store would refuse it: \"version\" \"2\" is not a semantic version"),
        "{stdout}"
    );
    assert!(
        stdout.contains("a call would refuse it: base_url http://127.0.0.1:8080 is plain http")
            && stdout.contains("allow_http_loopback\": true"),
        "{stdout}"
    );

    // The key put at the top level instead of under `web`: named, with its place.
    std::fs::write(
        home.join("config.json"),
        "{\n  \"allow_http_loopback\": true\n}\n",
    )
    .expect("config");
    let out = run(&home, &["config", "check"], None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("config.json:2:")
            && stdout.contains("did you mean `web.allow_http_loopback`?"),
        "{stdout}"
    );
    // Once it is where it belongs, both the config and the descriptor's call are fine.
    std::fs::write(
        home.join("config.json"),
        "{\"$comment\": \"local development\", \"web\": {\"allow_http_loopback\": true}}",
    )
    .expect("config");
    assert!(run(&home, &["config", "check"], None).status.success());
    let out = run(&home, &["validate", &path, "--json"], None);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["valid"], true);
    assert_eq!(
        report["refused"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
}

/// The README counts the built-in apps `--scan` lists, and its API-key web app example is a
/// descriptor `validate` passes with nothing the store or a call would refuse.
#[test]
fn the_readme_counts_the_built_in_apps_and_its_api_key_example_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("readme");
    let counted = readme
        .split("the gateway carries ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("the README counts the built-in apps");
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let counted = words
        .iter()
        .position(|w| *w == counted)
        .expect("a number word");
    let dir = tempfile::tempdir().expect("dir");
    let out = run(dir.path(), &["--scan", "--json"], None);
    let scan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--scan --json");
    let built_in: Vec<&str> = scan["apps"]
        .as_array()
        .expect("apps")
        .iter()
        .filter(|a| {
            a["source"]
                .as_str()
                .is_some_and(|s| s.starts_with("built in"))
        })
        .filter_map(|a| a["appId"].as_str())
        .collect();
    assert_eq!(counted, built_in.len(), "README vs --scan: {built_in:?}");
    for app in &built_in {
        assert!(
            readme.contains(&format!("`{app}`")),
            "{app} is not named in the README"
        );
    }

    let example = readme
        .split("An API-key web app")
        .nth(1)
        .and_then(|s| s.split("```json").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the API-key example");
    let file = dir.path().join("aai.json");
    std::fs::write(&file, example).expect("write");
    let out = run(
        dir.path(),
        &["validate", &file.display().to_string(), "--json"],
        None,
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["valid"], true, "{report}");
    assert_eq!(report["refused"], serde_json::json!([]), "{report}");
}

/// A stdio MCP server with one read-only tool that says which of its variables it got.
#[cfg(unix)]
const ECHO_ENV_SERVER: &str = r#"
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "echo-env", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "show_env", "description": "Says which variables it got.",
                             "inputSchema": {"type": "object", "properties": {}},
                             "annotations": {"readOnlyHint": True}}]}
    elif method == "tools/call":
        got = {k: os.environ.get(k) for k in ["GITHUB_PERSONAL_ACCESS_TOKEN", "DEBUG"]}
        result = {"content": [{"type": "text", "text": json.dumps(got, sort_keys=True)}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

#[cfg(unix)]
#[test]
fn import_keeps_credentials_in_the_store_and_moves_those_written_inline() {
    use std::os::unix::fs::PermissionsExt as _;
    const TOKEN: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    const SLACK: &str = "xoxb-2468-1357-AbCdEfGhIjKl";
    // Not under /tmp: a contained server has a /tmp of its own.
    let dir = tempfile::Builder::new()
        .prefix("import-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("dir");
    let home = dir.path().join("aai");
    let user = dir.path().join("user");
    let script = dir.path().join("echo_env.py");
    std::fs::write(&script, ECHO_ENV_SERVER).expect("script");
    let config = user.join(".config/Claude/claude_desktop_config.json");
    std::fs::create_dir_all(config.parent().expect("parent")).expect("mkdir");
    let servers = serde_json::json!({"mcpServers": {
        "github": {"command": "python3", "args": [script],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": TOKEN, "DEBUG": "1"}},
        "notes": {"command": "notes-server", "env": {"MY_VAR": "plain words", "NOTES_DIR": "/srv/notes"}}}});
    std::fs::write(&config, servers.to_string()).expect("config");
    let gateway = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("AAI_HOME", &home)
            .env("HOME", &user)
            .env("AAI_LOG", "warn")
            .env("AAI_NO_KEYCHAIN", "1")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CODEX_HOME")
            .env_remove("APPDATA")
            .output()
            .expect("run aai-gateway")
    };
    let json_at = |path: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
    };
    let mode = |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;

    let out = gateway(&["import", "--secret", "MY_VAR"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("GITHUB_PERSONAL_ACCESS_TOKEN kept in the credential store"),
        "{}",
        text(&out.stdout)
    );
    assert!(!text(&out.stdout).contains(TOKEN) && !text(&out.stderr).contains(TOKEN));
    // The descriptors name the variables; their values are in the store alone.
    let github = home.join("mcp.github/aai.json");
    let written = std::fs::read_to_string(&github).expect("read");
    assert!(
        !written.contains(TOKEN) && !written.contains("16C7e42F"),
        "{written}"
    );
    let section = &json_at(&github)["platforms"]["mcp"];
    assert_eq!(section["env"], serde_json::json!({"DEBUG": "1"}));
    assert_eq!(
        section["env_from_store"],
        serde_json::json!(["GITHUB_PERSONAL_ACCESS_TOKEN"])
    );
    let notes = home.join("mcp.notes/aai.json");
    assert!(
        !std::fs::read_to_string(&notes)
            .expect("read")
            .contains("plain words")
    );
    let section = &json_at(&notes)["platforms"]["mcp"];
    assert_eq!(
        section["env"],
        serde_json::json!({"NOTES_DIR": "/srv/notes"})
    );
    assert_eq!(section["env_from_store"], serde_json::json!(["MY_VAR"]));
    let stored = home.join("tokens/mcp.github.json");
    assert_eq!(mode(&stored), 0o600);
    assert_eq!(
        json_at(&stored)["env"],
        serde_json::json!({"GITHUB_PERSONAL_ACCESS_TOKEN": TOKEN})
    );
    assert_eq!(
        json_at(&home.join("tokens/mcp.notes.json"))["env"],
        serde_json::json!({"MY_VAR": "plain words"})
    );
    let out = gateway(&[
        "validate",
        github.to_str().expect("utf8"),
        notes.to_str().expect("utf8"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = gateway(&["auth", "status"]);
    let status = text(&out.stdout);
    assert!(
        status.contains("GITHUB_PERSONAL_ACCESS_TOKEN (stored)") && !status.contains(TOKEN),
        "{status}"
    );

    // The server is started with the variable set, as the client started it.
    let out = gateway(&["call", "mcp.github", "show_env"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        format!(r#"{{"DEBUG": "1", "GITHUB_PERSONAL_ACCESS_TOKEN": "{TOKEN}"}}"#)
    );

    // A descriptor an earlier import wrote with the value inline is moved by the next one,
    // its mode kept, and the user told which variable moved (never its value).
    let legacy = home.join("mcp.slack/aai.json");
    std::fs::create_dir_all(legacy.parent().expect("parent")).expect("mkdir");
    let old = serde_json::json!({"schema_version": "1.0", "appId": "mcp.slack", "name": "slack",
        "description": "The MCP server \"slack\" (imported from claude-desktop).",
        "platforms": {"mcp": {"automation": "stdio", "command": "slack-server",
            "env": {"SLACK_BOT_TOKEN": SLACK, "SLACK_TEAM": "T01"}}}});
    std::fs::write(&legacy, serde_json::to_string_pretty(&old).expect("json")).expect("write");
    std::fs::set_permissions(&legacy, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let out = gateway(&["import"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "aai-gateway: mcp.slack: moved SLACK_BOT_TOKEN from its aai.json to the credential store"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains(SLACK) && !text(&out.stdout).contains(SLACK));
    let migrated = std::fs::read_to_string(&legacy).expect("read");
    assert!(!migrated.contains(SLACK), "{migrated}");
    let section = &json_at(&legacy)["platforms"]["mcp"];
    assert_eq!(section["env"], serde_json::json!({"SLACK_TEAM": "T01"}));
    assert_eq!(
        section["env_from_store"],
        serde_json::json!(["SLACK_BOT_TOKEN"])
    );
    assert_eq!(mode(&legacy), 0o640);
    assert_eq!(
        json_at(&home.join("tokens/mcp.slack.json"))["env"],
        serde_json::json!({"SLACK_BOT_TOKEN": SLACK})
    );
    let out = gateway(&["validate", legacy.to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    // Moved once: the next import has nothing to say.
    let out = gateway(&["import"]);
    assert!(
        !text(&out.stderr).contains("moved"),
        "{}",
        text(&out.stderr)
    );
    // A home an earlier version imported into is moved at the first start, once.
    let mark = home.join("mcp/env-moved");
    std::fs::remove_file(&mark).expect("the mark of the first start");
    let jira = home.join("mcp.jira/aai.json");
    std::fs::create_dir_all(jira.parent().expect("parent")).expect("mkdir");
    let mut old = old;
    old["appId"] = serde_json::json!("mcp.jira");
    old["platforms"]["mcp"]["env"] = serde_json::json!({"JIRA_API_TOKEN": "hunter2"});
    std::fs::write(&jira, old.to_string()).expect("write");
    let out = gateway(&["auth", "status"]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("mcp.jira: moved JIRA_API_TOKEN") && !stderr.contains("hunter2"),
        "{stderr}"
    );
    assert!(
        !std::fs::read_to_string(&jira)
            .expect("read")
            .contains("hunter2")
    );
    assert!(mark.is_file());

    // With nothing in the store the server is not started, and the error says what to run.
    let out = gateway(&["auth", "logout", "mcp.github"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = gateway(&["call", "mcp.github", "show_env"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("GITHUB_PERSONAL_ACCESS_TOKEN is not in the credential store")
            && text(&out.stderr)
                .contains("aai-gateway auth set mcp.github --env GITHUB_PERSONAL_ACCESS_TOKEN"),
        "{}",
        text(&out.stderr)
    );
}

/// The subcommands `--help` lists under `path` (leaves: those without subcommands of their own).
fn leaves(home: &Path, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let help = text(&run(home, &args, None).stdout);
    let commands: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    if commands.is_empty() {
        out.push(path.clone());
    }
    for command in commands {
        path.push(command);
        leaves(home, path, out);
        path.pop();
    }
}

/// Every command `--help` lists is either run with `--json` here — and then prints one JSON
/// document (or, failing, nothing) on stdout — or named as one that prints no data. A new
/// command must be put in one of the two lists.
#[test]
fn every_command_honours_json() {
    let dir = tempfile::tempdir().expect("home");
    let home = dir.path();
    std::fs::write(home.join("config.json"), "{}").expect("config");
    let workflow = home.join("workflows");
    std::fs::create_dir_all(&workflow).expect("workflows");
    std::fs::write(
        workflow.join("hello.json"),
        r#"{"name": "hello", "description": "d", "steps": [{"id": "a", "app": "local.system", "tool": "system_info", "args": {}}]}"#,
    )
    .expect("workflow");
    let descriptor = home.join("app.json");
    std::fs::write(
        &descriptor,
        full_test_descriptor("org.aai.json", TEST_SERVICE).to_string(),
    )
    .expect("descriptor");
    let descriptor = descriptor.display().to_string();
    // What each command that prints data is run with here.
    let runs: &[(&str, &[&str])] = &[
        ("consent list", &[]),
        (
            "consent grant",
            &["local.system", "system_info", "--client", "c"],
        ),
        ("consent revoke", &["local.system", "--client", "c"]),
        ("consent approve", &["org.none"]),
        ("audit verify", &[]),
        ("audit tail", &[]),
        ("audit show", &[]),
        ("audit export", &[]),
        ("auth status", &[]),
        ("auth logout", &["org.none"]),
        ("import", &["--dry-run"]),
        ("validate", &[descriptor.as_str()]),
        ("call", &["local.system", "system_info"]),
        ("config check", &[]),
        ("config schema", &[]),
        ("config registry-schema", &[]),
        ("doctor", &[]),
        ("status", &[]),
        ("approvals list", &[]),
        ("store list", &[]),
        ("schedule list", &[]),
        ("schedule history", &[]),
        ("schedule schema", &[]),
        ("workflow list", &[]),
        ("workflow validate", &["hello"]),
        ("workflow schema", &[]),
        ("service status", &[]),
        ("init", &["--print"]),
    ];
    // Commands that print no data of their own (they serve, open, generate files, change
    // the system, need the network or a person) or need a daemon or an app to print any.
    let others = [
        "init",
        "auth set",
        "auth login",
        "describe dbus",
        "describe openapi",
        "describe sdef",
        "describe app",
        "describe com",
        "describe a11y",
        "discover",
        "serve",
        "service install",
        "service uninstall",
        "stop",
        "resume",
        "approvals show",
        "approvals answer",
        "approvals approve",
        "approvals deny",
        "store search",
        "store info",
        "store install",
        "store update",
        "store uninstall",
        "store refresh",
        "schedule add",
        "schedule remove",
        "schedule enable",
        "schedule disable",
        "schedule run-now",
        "workflow run",
        "dashboard",
        "completions",
        "man",
    ];
    let mut found = Vec::new();
    leaves(home, &mut Vec::new(), &mut found);
    assert!(found.len() > 40, "{found:?}");
    for leaf in found {
        let name = leaf.join(" ");
        let Some((_, args)) = runs.iter().find(|(n, _)| *n == name) else {
            assert!(
                others.contains(&name.as_str()),
                "`{name}` is new: run it with --json in this test, or name it as printing no data"
            );
            continue;
        };
        let mut argv = vec!["--json"];
        argv.extend(leaf.iter().map(String::as_str));
        argv.extend(args.iter());
        let out = run(home, &argv, None);
        let stdout = text(&out.stdout);
        // One JSON document, or JSON Lines where the output is a stream of records (the
        // audit log's rows: none at all in a fresh home).
        let lines = name.starts_with("audit ") && name != "audit verify";
        if out.status.success() && !(lines && stdout.is_empty()) || !stdout.trim().is_empty() {
            let parsed = if lines {
                stdout
                    .lines()
                    .try_for_each(|l| serde_json::from_str::<serde_json::Value>(l).map(|_| ()))
            } else {
                serde_json::from_str::<serde_json::Value>(&stdout).map(|_| ())
            };
            assert!(
                parsed.is_ok(),
                "`{}` printed no JSON (status {:?}):\n{stdout}\n{}",
                argv.join(" "),
                out.status,
                text(&out.stderr)
            );
        }
    }
}
