//! Descriptor authors' tools catch at load time what executors would refuse at call time: each
//! call-time AAI_JSON_INVALID path has a descriptor here that `validate` (and discovery)
//! already rejects, with the JSON pointer of the problem.

use std::path::Path;

use aai_test_support::cli::Run;
use aai_test_support::{TEST_SERVICE, full_test_descriptor};
use serde_json::{Value, json};

fn web(tools: Value, base_url: &str) -> Value {
    json!({"schema_version": "1.0", "appId": "com.example.web", "name": "Web",
        "platforms": {"web": {"automation": "restapi", "base_url": base_url, "auth": {"type": "none"},
            "tools": tools}}})
}

fn dbus_tool(tool: Value) -> Value {
    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"] = json!([tool]);
    doc
}

/// (name, descriptor, pointer the problem is at, words the message says).
fn cases() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let get = |endpoint: &str| json!([{"name": "t", "description": "d", "endpoint": endpoint}]);
    vec![
        (
            "dbus-signature-syntax",
            dbus_tool(
                json!({"name": "t", "description": "d", "method": "Echo", "signature": "sz"}),
            ),
            "/platforms/linux/tools/0/signature",
            "not a D-Bus signature",
        ),
        (
            "dbus-signature-dict-outside-array",
            dbus_tool(
                json!({"name": "t", "description": "d", "method": "Echo", "signature": "{sv}"}),
            ),
            "/platforms/linux/tools/0/signature",
            "outside an array",
        ),
        (
            "dbus-args-count",
            dbus_tool(
                json!({"name": "t", "description": "d", "method": "Add", "signature": "ii",
                "args": ["${a}"], "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}),
            ),
            "/platforms/linux/tools/0/args",
            "must match one to one",
        ),
        (
            "dbus-args-type",
            dbus_tool(
                json!({"name": "t", "description": "d", "method": "Add", "signature": "is",
                "args": ["${a}", 5], "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}),
            ),
            "/platforms/linux/tools/0/args/0",
            "takes integer",
        ),
        (
            "dbus-fixed-value-type",
            dbus_tool(
                json!({"name": "t", "description": "d", "method": "Add", "signature": "ii",
                "args": [1, "two"]}),
            ),
            "/platforms/linux/tools/0/args/1",
            "not string",
        ),
        (
            "rest-placeholder-in-host",
            web(get("/x"), "https://${tenant}.example.com"),
            "/platforms/web/base_url",
            "placeholder",
        ),
        (
            "rest-placeholder-in-base-path",
            web(get("/x"), "https://api.example.com/${version}"),
            "/platforms/web/base_url",
            "placeholder",
        ),
        (
            "rest-method",
            web(
                json!([{"name": "t", "description": "d", "endpoint": "/x", "method": "GET /"}]),
                "https://api.example.com",
            ),
            "/platforms/web/tools/0/method",
            "is not one of",
        ),
        (
            "rest-plain-http",
            web(get("/x"), "http://api.example.com"),
            "/platforms/web/base_url",
            "must use https",
        ),
        (
            "form-body-not-an-object",
            web(
                json!([{"name": "t", "description": "d", "endpoint": "/x", "method": "POST", "body_type": "form", "body": "${x}",
                "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}]),
                "https://api.example.com",
            ),
            "/platforms/web/tools/0/body",
            "object of fields",
        ),
        (
            "schema-does-not-compile",
            dbus_tool(json!({"name": "t", "description": "d", "method": "Echo",
                "parameters": {"type": "object", "properties": {"text": {"type": "string", "pattern": "([unclosed"}}}})),
            "/platforms/linux/tools/0/parameters",
            "does not compile",
        ),
        (
            "unknown-field",
            dbus_tool(json!({"name": "t", "description": "d", "method": "Echo", "paramters": {}})),
            "/platforms/linux/tools/0",
            "did you mean `parameters`",
        ),
    ]
}

#[test]
fn every_call_time_descriptor_error_is_caught_at_load_time() {
    for (name, doc, pointer, words) in cases() {
        let error = aai_descriptor::parse(name, doc.to_string().as_bytes())
            .expect_err(&format!("{name} was accepted"));
        let found = error
            .problems
            .iter()
            .any(|p| p.pointer == pointer && p.message.contains(words));
        assert!(found, "{name}: expected {pointer} \"{words}\", got {error}");
    }
}

#[test]
fn validate_checks_every_aai_json_under_a_folder_and_reports_every_problem() {
    let dir = tempfile::tempdir().expect("dir");
    for (name, doc, _, _) in cases() {
        let folder = dir.path().join(name);
        std::fs::create_dir_all(&folder).expect("mkdir");
        std::fs::write(folder.join("aai.json"), doc.to_string()).expect("write");
    }
    let good = dir.path().join("nested/deeper/good");
    std::fs::create_dir_all(&good).expect("mkdir");
    std::fs::write(
        good.join("aai.json"),
        full_test_descriptor("org.aai.good", TEST_SERVICE).to_string(),
    )
    .expect("write");
    // One file, two problems: both are reported.
    let two = dir.path().join("two-problems");
    std::fs::create_dir_all(&two).expect("mkdir");
    let mut doc =
        dbus_tool(json!({"name": "t", "description": "d", "method": "Echo", "signature": "sz"}));
    doc["platforms"]["linux"]["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "u", "description": "d", "method": "Add", "signature": "q("}));
    std::fs::write(two.join("aai.json"), doc.to_string()).expect("write");

    let out = Run::new(env!("CARGO_BIN_EXE_aai-gateway"), &dir.path().join("home"))
        .args(["validate", dir.path().to_str().expect("utf8")])
        .output();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for (name, _, pointer, _) in cases() {
        assert!(
            stdout.contains(&format!("{name}{}aai.json", std::path::MAIN_SEPARATOR)),
            "{name} not checked: {stdout}"
        );
        assert!(stdout.contains(pointer), "{pointer}: {stdout}");
    }
    assert!(stdout.contains("good/aai.json: ok"), "{stdout}");
    assert!(
        stdout.contains("/platforms/linux/tools/0/signature")
            && stdout.contains("/platforms/linux/tools/1/signature"),
        "{stdout}"
    );
    let out = Run::new(env!("CARGO_BIN_EXE_aai-gateway"), &dir.path().join("home"))
        .args([
            "validate",
            Path::new(dir.path())
                .join("nothing-here")
                .to_str()
                .expect("utf8"),
        ])
        .output();
    assert_ne!(out.status.code(), Some(0));
}
