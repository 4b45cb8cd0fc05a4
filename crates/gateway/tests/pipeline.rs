//! The call pipeline without MCP: lookup, argument checks and their errors.

use std::sync::Arc;

use aai_descriptor::{ErrorKind, Platform};
use aai_executor::Executors;
use aai_gateway::config::Config;
use aai_gateway::discovery::Found;
use aai_gateway::registry::Registry;
use aai_test_support::{TEST_SERVICE, full_test_descriptor};
use serde_json::json;

fn gateway(docs: Vec<serde_json::Value>) -> Arc<aai_gateway::pipeline::Gateway> {
    let found: Vec<Found> = docs
        .into_iter()
        .enumerate()
        .map(|(rank, doc)| Found {
            rank,
            path: format!("/apps/{rank}/aai.json").into(),
            outcome: aai_descriptor::parse("t", doc.to_string().as_bytes()).map(Arc::new),
        })
        .collect();
    aai_gateway::fixed_gateway(
        Registry::build(&found, Platform::Linux, true),
        Config::default(),
        Executors::new(),
    )
}

#[tokio::test]
async fn a_schema_that_does_not_compile_is_reported_at_call_time() {
    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"][0]["parameters"]["properties"]["text"]["pattern"] =
        json!("([unclosed");
    let gateway = gateway(vec![doc]);
    let error = gateway
        .exec("org.aai.test", "echo", &json!({"text": "x"}))
        .await
        .expect_err("does not compile");
    assert_eq!(error.kind, ErrorKind::AaiJsonInvalid, "{}", error.message);
    assert!(
        error.message.contains("/apps/0/aai.json"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn arguments_are_checked_before_anything_runs() {
    // No D-Bus session here: a call that passed the checks would fail to connect instead.
    let gateway = gateway(vec![full_test_descriptor("org.aai.test", TEST_SERVICE)]);
    let error = gateway
        .exec("org.aai.test", "add", &json!({"a": 1}))
        .await
        .expect_err("missing b");
    assert_eq!(
        (
            error.kind,
            error.detail.as_ref().map(|d| d["field"].clone())
        ),
        (ErrorKind::InvalidParams, Some(json!("b")))
    );
    let error = gateway
        .exec("org.aai.test", "sum", &json!({"values": [1, "two"]}))
        .await
        .expect_err("bad item");
    assert_eq!(
        error.detail.as_ref().map(|d| d["field"].clone()),
        Some(json!("values.1"))
    );
    let error = gateway
        .exec("org.aai.test", "echo", &json!([1]))
        .await
        .expect_err("not an object");
    assert!(
        error.message.contains("must be an object"),
        "{}",
        error.message
    );
    let error = gateway
        .exec("org.aai.tset", "echo", &json!({}))
        .await
        .expect_err("typo");
    assert_eq!(error.kind, ErrorKind::AppNotFound);
    assert!(
        error.message.contains("org.aai.test"),
        "suggests the real app: {}",
        error.message
    );
}
