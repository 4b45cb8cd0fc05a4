//! The D-Bus executor against a private dbus-daemon and the test service.

use std::time::Duration;

use aai_descriptor::{Descriptor, ErrorKind, Platform};
use aai_executor::{Executors, Invocation};
use aai_test_support::{
    ACTIVATABLE_SERVICE, FORBIDDEN_SERVICE, TEST_SERVICE, TestBus, full_test_descriptor,
};
use serde_json::{Value, json};

fn descriptor(service: &str) -> Descriptor {
    let doc = full_test_descriptor("org.aai.test", service);
    aai_descriptor::parse("test", doc.to_string().as_bytes()).expect("valid descriptor")
}

async fn call(
    executors: &Executors,
    descriptor: &Descriptor,
    tool: &str,
    args: Value,
) -> Result<Value, aai_descriptor::AaiError> {
    let args = args.as_object().cloned().unwrap_or_default();
    let invocation = Invocation::new(descriptor, tool, &args, Duration::from_secs(5));
    executors.call(Platform::Linux, invocation).await
}

fn running() -> (TestBus, Executors, Descriptor) {
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let executors = Executors::with_session_bus(bus.address());
    (bus, executors, descriptor(TEST_SERVICE))
}

#[tokio::test]
async fn basic_types_by_introspected_names() {
    let (_bus, executors, d) = running();
    assert_eq!(
        call(&executors, &d, "echo", json!({"text": "héllo \" & $(rm)"})).await,
        Ok(json!("héllo \" & $(rm)"))
    );
    assert_eq!(
        call(&executors, &d, "add", json!({"b": 2, "a": 40})).await,
        Ok(json!(42))
    );
    assert_eq!(
        call(
            &executors,
            &d,
            "sum",
            json!({"values": [1, 2, 3, 2147483647]})
        )
        .await,
        Ok(json!(2147483653_i64))
    );
}

#[tokio::test]
async fn containers_dicts_structs_and_variants() {
    let (_bus, executors, d) = running();
    let out = call(
        &executors,
        &d,
        "describe",
        json!({"info": {"name": "x", "n": 3, "tags": ["a", "b"], "nested": {"k": true}}}),
    )
    .await;
    assert_eq!(
        out,
        Ok(json!({"name": "x", "n": 3, "tags": ["a", "b"], "nested": {"k": true}, "count": 4}))
    );
    assert_eq!(
        call(&executors, &d, "swap", json!({"pair": ["seven", 7]})).await,
        Ok(json!([7, "seven"]))
    );
    assert_eq!(
        call(
            &executors,
            &d,
            "variant",
            json!({"value": {"$signature": "y", "value": 3}})
        )
        .await,
        Ok(json!("y"))
    );
    assert_eq!(
        call(&executors, &d, "variant", json!({"value": ["a"]})).await,
        Ok(json!("as"))
    );
}

#[tokio::test]
async fn fixed_args_and_explicit_signature() {
    let (_bus, executors, d) = running();
    assert_eq!(
        call(&executors, &d, "fixed_add", json!({"x": 2})).await,
        Ok(json!(42))
    );
}

#[tokio::test]
async fn output_parsers() {
    let (_bus, executors, d) = running();
    assert_eq!(
        call(&executors, &d, "json", json!({})).await,
        Ok(json!({"ok": true, "items": [1, 2]}))
    );
    let error = call(&executors, &d, "not_json", json!({}))
        .await
        .expect_err("not JSON");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert!(error.message.contains("not JSON"), "{}", error.message);
}

#[tokio::test]
async fn error_mapping() {
    let (_bus, executors, d) = running();
    let error = call(&executors, &d, "fail", json!({}))
        .await
        .expect_err("fails");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert!(
        error.message.contains("org.freedesktop.DBus.Error.Failed")
            && error.message.contains("on purpose"),
        "{}",
        error.message
    );
    assert_eq!(
        error.detail.as_ref().and_then(|d| d.get("dbus_error")),
        Some(&json!("org.freedesktop.DBus.Error.Failed"))
    );

    let error = call(&executors, &d, "deny", json!({}))
        .await
        .expect_err("denied");
    assert_eq!(error.kind, ErrorKind::PermissionDenied, "{}", error.message);

    let error = call(&executors, &d, "echo", json!({"text": 5}))
        .await
        .expect_err("wrong type");
    assert_eq!(error.kind, ErrorKind::InvalidParams);
    assert!(
        error.message.contains("expected a string"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn timeouts() {
    let (_bus, executors, d) = running();
    let args = json!({"millis": 3000});
    let args = args.as_object().cloned().unwrap_or_default();
    let invocation = Invocation::new(&d, "slow", &args, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let error = executors
        .call(Platform::Linux, invocation)
        .await
        .expect_err("times out");
    assert_eq!(error.kind, ErrorKind::Timeout);
    assert!(started.elapsed() < Duration::from_secs(2));
    // The connection is still good afterwards.
    assert_eq!(
        call(&executors, &d, "echo", json!({"text": "after"})).await,
        Ok(json!("after"))
    );
}

#[tokio::test]
async fn not_running_activation_and_policy() {
    let mut bus = TestBus::start();
    bus.spawn_service(FORBIDDEN_SERVICE);
    let executors = Executors::with_session_bus(bus.address());

    let error = call(
        &executors,
        &descriptor("org.aai.Nobody"),
        "echo",
        json!({"text": "x"}),
    )
    .await
    .expect_err("absent");
    assert_eq!(error.kind, ErrorKind::AppNotRunning, "{}", error.message);

    // Not running, but the bus knows how to start it.
    assert_eq!(
        call(
            &executors,
            &descriptor(ACTIVATABLE_SERVICE),
            "echo",
            json!({"text": "woke"})
        )
        .await,
        Ok(json!("woke"))
    );

    let error = call(
        &executors,
        &descriptor(FORBIDDEN_SERVICE),
        "echo",
        json!({"text": "x"}),
    )
    .await
    .expect_err("policy");
    assert_eq!(error.kind, ErrorKind::PermissionDenied, "{}", error.message);
}

#[tokio::test]
async fn the_bus_itself_as_a_third_party_service() {
    let bus = TestBus::start();
    let executors = Executors::with_session_bus(bus.address());
    let doc = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/apps/org.freedesktop.DBus/aai.json"
    ))
    .expect("shipped descriptor");
    let d = aai_descriptor::parse("org.freedesktop.DBus", &doc).expect("valid");
    let names = call(&executors, &d, "list_names", json!({}))
        .await
        .expect("ListNames");
    assert!(
        names
            .as_array()
            .is_some_and(|n| n.contains(&json!("org.freedesktop.DBus"))),
        "{names}"
    );
    assert_eq!(
        call(
            &executors,
            &d,
            "name_has_owner",
            json!({"name": "org.aai.Nobody"})
        )
        .await,
        Ok(json!(false))
    );
    let activatable = call(&executors, &d, "list_activatable_names", json!({}))
        .await
        .expect("activatable");
    assert!(
        activatable
            .as_array()
            .is_some_and(|n| n.contains(&json!(ACTIVATABLE_SERVICE))),
        "{activatable}"
    );
}

fn shipped(app_id: &str) -> Descriptor {
    let path = format!(
        "{}/../../examples/apps/{app_id}/aai.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).expect("shipped descriptor");
    aai_descriptor::parse(&path, &bytes).expect("valid")
}

#[tokio::test]
async fn shipped_notifications_descriptor_matches_the_spec_signature() {
    let mut bus = TestBus::start();
    bus.spawn_service("org.freedesktop.Notifications");
    let executors = Executors::with_session_bus(bus.address());
    let d = shipped("org.freedesktop.Notifications");
    let id = call(
        &executors,
        &d,
        "notify",
        json!({"summary": "Build done", "body": "All green", "urgency": 2}),
    )
    .await
    .expect("Notify");
    assert_eq!(id, json!(1));
    // Defaults fill the optional arguments.
    assert_eq!(
        call(&executors, &d, "notify", json!({"summary": "Second"})).await,
        Ok(json!(2))
    );
    let info = call(&executors, &d, "server_info", json!({}))
        .await
        .expect("info");
    assert_eq!(info, json!(["aai-test", "aai", "1.0", "1.2"]));

    // Read back what the service received, through the test descriptor on the same name.
    let test = descriptor("org.freedesktop.Notifications");
    let mut last_tool = test.clone();
    if let Some(linux) = last_tool.platforms.linux.as_mut() {
        let mut tool = linux.tools[0].clone();
        tool.common.name = "last".into();
        tool.common.parameters = None;
        tool.fields.method = "LastNotification".into();
        linux.tools.push(tool);
    }
    let last = call(&executors, &last_tool, "last", json!({}))
        .await
        .expect("last");
    let last: Value = serde_json::from_str(last.as_str().expect("string")).expect("json");
    assert_eq!(
        last,
        json!({"app_name": "aai-gateway", "replaces_id": 0, "app_icon": "", "summary": "Second", "body": "", "actions": 0, "urgency": 1, "expire_timeout": -1})
    );
}

#[tokio::test]
async fn shipped_mpris_descriptor_drives_a_player() {
    let mut bus = TestBus::start();
    bus.spawn_service("org.mpris.MediaPlayer2.vlc");
    let executors = Executors::with_session_bus(bus.address());
    let d = shipped("org.mpris.MediaPlayer2.vlc");
    assert_eq!(
        call(&executors, &d, "status", json!({})).await,
        Ok(json!("Paused"))
    );
    assert_eq!(
        call(&executors, &d, "play_pause", json!({})).await,
        Ok(Value::Null)
    );
    assert_eq!(
        call(&executors, &d, "status", json!({})).await,
        Ok(json!("Playing"))
    );
    assert_eq!(
        call(&executors, &d, "set_volume", json!({"volume": 0.25})).await,
        Ok(Value::Null)
    );
    assert_eq!(
        call(&executors, &d, "set_volume", json!({"volume": 1})).await,
        Ok(Value::Null)
    );
    assert_eq!(
        call(&executors, &d, "seek", json!({"offset_us": -5_000_000})).await,
        Ok(Value::Null)
    );
    let meta = call(&executors, &d, "now_playing", json!({}))
        .await
        .expect("metadata");
    assert_eq!(
        meta,
        json!({"xesam:title": "Test Song", "mpris:length": 180_000_000_i64})
    );
    assert_eq!(
        call(&executors, &d, "raise", json!({})).await,
        Ok(Value::Null)
    );
}

#[tokio::test]
async fn introspection_names_what_exists_when_the_descriptor_is_wrong() {
    let (_bus, executors, _) = running();
    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"][0]["method"] = json!("Ech");
    doc["platforms"]["linux"]["tools"][1]["interface"] = json!("org.aai.Tset");
    let d = aai_descriptor::parse("test", doc.to_string().as_bytes()).expect("valid");
    let error = call(&executors, &d, "echo", json!({"text": "x"}))
        .await
        .expect_err("no such method");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert!(
        error
            .message
            .contains("has no method org.aai.Test.Ech; it has: ")
            && error.message.contains("Echo"),
        "{}",
        error.message
    );
    let error = call(&executors, &d, "add", json!({"a": 1, "b": 2}))
        .await
        .expect_err("no such interface");
    assert!(
        error
            .message
            .contains("has no interface org.aai.Tset; it has: ")
            && error.message.contains("org.aai.Test"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn more_calls_in_flight_than_the_bus_allows_pending_all_succeed() {
    let (_bus, executors, d) = running();
    let calls = (0..400).map(|i| {
        let (executors, d) = (&executors, &d);
        async move { call(executors, d, "echo", json!({"text": format!("n{i}")})).await }
    });
    let results = futures::future::join_all(calls).await;
    assert!(
        results.iter().all(Result::is_ok),
        "{:?}",
        results.iter().find(|r| r.is_err())
    );
}
