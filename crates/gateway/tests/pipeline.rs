//! The call pipeline without MCP: lookup, argument checks, the policy gate, consent and the
//! audit rows each call leaves.

use std::sync::Arc;

use aai_audit::{AuditLog, Filter, Grants};
use aai_descriptor::{ErrorKind, Platform};
use aai_engine::catalog::discovery::Found;
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Config;
use aai_engine::pipeline::Gateway;
use aai_executor::Executors;
use aai_test_support::{TEST_SERVICE, TestBus, full_test_descriptor};
use serde_json::{Value, json};

mod common;

use common::TestGateway as Setup;

/// A gateway offering `docs` on Linux.
fn setup(docs: Vec<Value>, config: Config, executors: Executors) -> Setup {
    let dir = tempfile::tempdir().expect("dir");
    Setup::offering(dir, &docs, &[Platform::Linux], config, executors)
}

fn policy(json: Value) -> Config {
    Config {
        policy: serde_json::from_value(json).expect("policy"),
        ..Config::default()
    }
}

#[tokio::test]
async fn a_schema_that_does_not_compile_is_refused_at_load_time() {
    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"][0]["parameters"]["properties"]["text"]["pattern"] =
        json!("([unclosed");
    let setup = setup(vec![doc], Config::default(), Executors::new());
    let registry = setup.gateway.snapshot().await;
    let rejected: Vec<String> = registry.rejected.iter().map(ToString::to_string).collect();
    assert!(
        rejected
            .iter()
            .any(|r| r.contains("/platforms/linux/tools/0/parameters")
                && r.contains("does not compile")),
        "{rejected:?}"
    );
    let error = setup
        .gateway
        .exec("test", "org.aai.test", "echo", &json!({"text": "x"}))
        .await
        .expect_err("not offered");
    assert_eq!(error.kind, ErrorKind::AppNotFound, "{}", error.message);
}

#[tokio::test]
async fn arguments_are_checked_before_anything_runs() {
    // No D-Bus session here: a call that passed the checks would fail to connect instead.
    let setup = setup(
        vec![full_test_descriptor("org.aai.test", TEST_SERVICE)],
        Config::default(),
        Executors::new(),
    );
    let gateway = &setup.gateway;
    let error = gateway
        .exec("test", "org.aai.test", "add", &json!({"a": 1}))
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
        .exec(
            "test",
            "org.aai.test",
            "sum",
            &json!({"values": [1, "two"]}),
        )
        .await
        .expect_err("bad item");
    assert_eq!(
        error.detail.as_ref().map(|d| d["field"].clone()),
        Some(json!("values.1"))
    );
    let error = gateway
        .exec("test", "org.aai.test", "echo", &json!([1]))
        .await
        .expect_err("not an object");
    assert!(
        error.message.contains("must be an object"),
        "{}",
        error.message
    );
    let error = gateway
        .exec("test", "org.aai.tset", "echo", &json!({}))
        .await
        .expect_err("typo");
    assert_eq!(error.kind, ErrorKind::AppNotFound);
    // Failed calls are audited too.
    assert_eq!(setup.results().len(), 4);
    assert!(
        setup
            .results()
            .iter()
            .all(|(_, _, result)| result == "failed")
    );
}

#[tokio::test]
async fn policy_consent_and_audit_rows() {
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let config = policy(json!({
        "default_profile": "mine",
        "profiles": {"mine": {"preset": "development", "tool_overrides": {"org.aai.test:deny": "always_block", "org.aai.test:add": "require_approval"}}}
    }));
    // `token` is declared (and so accepted) only to show that its value is redacted.
    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"][0]["parameters"]["properties"]["token"] =
        json!({"type": "string"});
    let setup = setup(
        vec![doc],
        config,
        Executors::with_session_bus(bus.address()),
    );
    let gateway = &setup.gateway;

    assert_eq!(
        gateway
            .exec(
                "claude-code",
                "org.aai.test",
                "echo",
                &json!({"text": "hi", "token": "Bearer abc"})
            )
            .await,
        Ok(json!("hi"))
    );

    let blocked = gateway
        .exec("claude-code", "org.aai.test", "deny", &json!({}))
        .await
        .expect_err("blocked");
    assert_eq!(blocked.kind, ErrorKind::PermissionDenied);
    assert!(
        blocked.message.contains("no approval can allow it"),
        "{}",
        blocked.message
    );

    let denied = gateway
        .exec(
            "claude-code",
            "org.aai.test",
            "add",
            &json!({"a": 1, "b": 2}),
        )
        .await
        .expect_err("needs approval");
    assert_eq!(denied.kind, ErrorKind::PermissionDenied);
    assert!(
        denied
            .message
            .contains("aai-gateway consent grant org.aai.test add --client claude-code"),
        "{}",
        denied.message
    );

    // A grant for one client does not help another; a grant for the app covers its tools.
    let grants = Grants::open(&setup.dir.path().join("data.db")).expect("grants");
    grants
        .grant(&aai_audit::Grant::always(
            "claude-code",
            "org.aai.test",
            Some("add"),
            "test",
        ))
        .expect("grant");
    assert_eq!(
        gateway
            .exec(
                "claude-code",
                "org.aai.test",
                "add",
                &json!({"a": 1, "b": 2})
            )
            .await,
        Ok(json!(3))
    );
    assert!(
        gateway
            .exec("cursor", "org.aai.test", "add", &json!({"a": 1, "b": 2}))
            .await
            .is_err()
    );
    grants
        .grant(&aai_audit::Grant::always(
            "cursor",
            "org.aai.test",
            None,
            "test",
        ))
        .expect("grant app");
    assert_eq!(
        gateway
            .exec("cursor", "org.aai.test", "add", &json!({"a": 2, "b": 2}))
            .await,
        Ok(json!(4))
    );
    // Consent never lifts a block.
    grants
        .grant(&aai_audit::Grant::always(
            "claude-code",
            "org.aai.test",
            Some("deny"),
            "test",
        ))
        .expect("grant blocked");
    assert!(
        gateway
            .exec("claude-code", "org.aai.test", "deny", &json!({}))
            .await
            .is_err()
    );

    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        setup.results(),
        vec![
            s("echo", "auto_approve", "started"),
            s("echo", "auto_approve", "success"),
            s("deny", "always_block", "blocked"),
            s("add", "require_approval", "denied"),
            s("add", "require_approval:granted", "started"),
            s("add", "require_approval:granted", "success"),
            s("add", "require_approval", "denied"),
            s("add", "require_approval:granted", "started"),
            s("add", "require_approval:granted", "success"),
            s("deny", "always_block", "blocked"),
        ]
    );
    let log = setup.audit();
    let first = &log.query(&Filter::default()).expect("rows")[0];
    assert_eq!(
        (first.entry.caller.as_str(), first.entry.args.as_str()),
        ("claude-code", r#"{"text":"hi","token":"[redacted]"}"#)
    );
    assert_eq!(log.verify(), Ok(10));
}

#[tokio::test]
async fn a_broken_store_fails_calls_clearly_and_runs_nothing() {
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let setup = setup(
        vec![full_test_descriptor("org.aai.test", TEST_SERVICE)],
        Config::default(),
        Executors::with_session_bus(bus.address()),
    );
    // Hold an exclusive lock: every append times out.
    let holder = rusqlite_lock(&setup.dir.path().join("data.db"));
    let error = setup
        .gateway
        .exec("test", "org.aai.test", "echo", &json!({"text": "x"}))
        .await
        .expect_err("locked");
    assert!(
        error.message.contains("locked") && error.message.contains("not run"),
        "{}",
        error.message
    );
    // Nothing ran: the test service counted no Echo.
    drop(holder);
    assert_eq!(
        setup
            .gateway
            .exec("test", "org.aai.test", "calls", &json!({}))
            .await,
        Ok(json!(0))
    );
    // Once the store opened, a lock makes the append itself fail, and the call is not run.
    let holder = rusqlite_lock(&setup.dir.path().join("data.db"));
    let error = setup
        .gateway
        .exec("test", "org.aai.test", "echo", &json!({"text": "x"}))
        .await
        .expect_err("locked");
    assert!(
        error.message.contains("audit log cannot be written") && error.message.contains("not run"),
        "{}",
        error.message
    );
    drop(holder);
    assert_eq!(
        setup
            .gateway
            .exec("test", "org.aai.test", "calls", &json!({}))
            .await,
        Ok(json!(0))
    );
    assert_eq!(
        setup
            .gateway
            .exec("test", "org.aai.test", "echo", &json!({"text": "y"}))
            .await,
        Ok(json!("y"))
    );
    assert_eq!(setup.audit().verify().map(|rows| rows > 0), Ok(true));
}

/// Opens `data.db` (creating the tables through the audit crate) and takes its write lock.
fn rusqlite_lock(path: &std::path::Path) -> LockHolder {
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
        ])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("read");
    assert_eq!(line.trim(), "locked");
    LockHolder(child)
}

struct LockHolder(std::process::Child);

impl Drop for LockHolder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn blocks_hold_whatever_name_the_call_uses() {
    let config = policy(
        json!({"profiles": {"p": {"tool_overrides": {"org.aai.test:echo": "always_block"}}}, "default_profile": "p"}),
    );
    let setup = setup(
        vec![full_test_descriptor("org.aai.test", TEST_SERVICE)],
        config,
        Executors::new(),
    );
    let grants = Grants::open(&setup.dir.path().join("data.db")).expect("grants");
    grants
        .grant(&aai_audit::Grant::always(
            "agent",
            "org.aai.test",
            None,
            "test",
        ))
        .expect("grant");
    let server = aai_server::mcp::AaiServer::new(setup.gateway.clone());
    let calls = [
        (
            "aai_exec",
            json!({"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}}),
        ),
        (
            "aai:exec",
            json!({"app": "app:org.aai.test", "tool": "echo", "args": {"text": "x"}}),
        ),
        (
            "aai_exec",
            json!({"app": "app_org_aai_test", "tool": "echo", "args": {"text": "x"}}),
        ),
        ("org.aai.test:echo", json!({"text": "x"})),
    ];
    for (name, args) in calls {
        let error = server
            .dispatch("agent", name, args)
            .await
            .expect_err("blocked");
        assert_eq!(
            error.kind,
            ErrorKind::PermissionDenied,
            "{name}: {}",
            error.message
        );
        assert_eq!(
            error.detail.as_ref().map(|d| d["reason"].clone()),
            Some(json!("blocked")),
            "{name}"
        );
    }
}

/// Panics in the tool it runs, for the panic boundary test.
struct Panicking;

impl aai_executor::Executor for Panicking {
    fn call<'a>(
        &'a self,
        invocation: aai_executor::Invocation<'a>,
    ) -> aai_executor::BoxFuture<'a, Result<Value, aai_descriptor::AaiError>> {
        Box::pin(async move {
            assert!(invocation.tool != "boom", "deliberate test panic");
            Ok(json!("fine"))
        })
    }

    fn plan(
        &self,
        _invocation: aai_executor::Invocation<'_>,
    ) -> Result<Value, aai_descriptor::AaiError> {
        Ok(json!({}))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_call_fails_alone_with_an_audit_row_and_the_server_keeps_serving() {
    let doc = json!({"schema_version": "1.0", "appId": "org.aai.panics", "name": "Panics",
    "platforms": {"local": {"automation": "builtin", "tools": [
        {"name": "boom", "description": "Panics", "parameters": {"type": "object"}},
        {"name": "fine", "description": "Works", "parameters": {"type": "object"}}
    ]}}});
    let found = vec![Found {
        rank: 0,
        source: aai_engine::catalog::discovery::Source::UserWritten,
        path: "/apps/panics/aai.json".into(),
        outcome: aai_descriptor::parse("t", doc.to_string().as_bytes())
            .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d))),
    }];
    let dir = tempfile::tempdir().expect("dir");
    let registry = Snapshot::build(&found, &[Platform::Local], true);
    let gateway = aai_compose::kit_gateway(
        registry,
        policy(json!({"default_profile": "a", "profiles": {"a": {"preset": "full_auto"}}})),
        Executors::new().with_local(Arc::new(Panicking)),
        dir.path().join("data.db"),
    );
    let server = aai_server::mcp::AaiServer::new(gateway);
    let call = |tool: &str| {
        server.dispatch(
            "tester",
            "aai_exec",
            json!({"app": "org.aai.panics", "tool": tool}),
        )
    };
    let error = call("boom").await.expect_err("panicked");
    assert_eq!(error.kind, ErrorKind::AutomationFailed, "{}", error.message);
    assert!(
        error.message.contains("deliberate test panic"),
        "{}",
        error.message
    );
    for _ in 0..10 {
        assert_eq!(call("fine").await, Ok(json!("fine")));
    }
    let log = AuditLog::open(&dir.path().join("data.db")).expect("log");
    let rows = log.query(&Filter::default()).expect("rows");
    let boom: Vec<&str> = rows
        .iter()
        .filter(|r| r.entry.tool == "boom")
        .map(|r| r.entry.result.as_str())
        .collect();
    assert_eq!(boom, ["started", "failed"]);
    assert_eq!(
        rows.iter().filter(|r| r.entry.result == "success").count(),
        10
    );
    assert_eq!(log.verify(), Ok(22));
}

/// A schema `default` fills an argument mapped by introspection (no `args` template), as it
/// does for `args`; unknown argument names are reported, not dropped; apps are found by alias.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_unknown_arguments_and_aliases() {
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let mut doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    doc["platforms"]["linux"]["tools"][1]["parameters"] = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 5}},
        "required": ["a"]
    });
    let setup = setup(
        vec![doc],
        policy(json!({"default_profile": "a", "profiles": {"a": {"preset": "full_auto"}}})),
        Executors::with_session_bus(bus.address()),
    );
    let gateway = &setup.gateway;
    assert_eq!(
        gateway
            .exec("t", "org.aai.test", "add", &json!({"a": 1}))
            .await,
        Ok(json!(6))
    );
    let error = gateway
        .exec("t", "org.aai.test", "add", &json!({"a": 1, "c": 2}))
        .await
        .expect_err("unknown argument");
    assert_eq!(error.kind, ErrorKind::InvalidParams);
    assert!(error.message.contains("`c`"), "{}", error.message);
    let error = gateway
        .exec("t", "org.aai.test", "echo", &json!({"txet": "x"}))
        .await
        .expect_err("typo");
    assert!(
        error.message.contains("did you mean `text`"),
        "{}",
        error.message
    );
    // The fixture's alias is "tester" and its name "Test Service".
    let registry = gateway.snapshot().await;
    for name in ["tester", "Test Service", "app_tester"] {
        let guide = gateway.guide(&registry, name).await.expect(name);
        assert!(guide.contains("org.aai.test"), "{name}: {guide}");
    }
    assert_eq!(
        gateway
            .exec("t", "tester", "echo", &json!({"text": "by alias"}))
            .await,
        Ok(json!("by alias"))
    );
}

/// A call during the first scan, to an app the scan has not reached yet, waits for the complete
/// snapshot instead of failing with APP_NOT_FOUND (a scheduled run resumed at start on a busy
/// machine did). The progress budget is 0 here, so only that wait can find the app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_during_the_first_scan_waits_for_an_app_not_found_yet() {
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let doc = full_test_descriptor("org.aai.test", TEST_SERVICE);
    let found = vec![Found {
        rank: 0,
        source: aai_engine::catalog::discovery::Source::UserWritten,
        path: "/apps/0/aai.json".into(),
        outcome: aai_descriptor::parse("t", doc.to_string().as_bytes())
            .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d))),
    }];
    let (tx, rx) =
        tokio::sync::watch::channel(Arc::new(Snapshot::build(&[], &[Platform::Linux], false)));
    let mut config =
        policy(json!({"default_profile": "a", "profiles": {"a": {"preset": "full_auto"}}}));
    config.scan_budget_ms = 0;
    let dir = tempfile::tempdir().expect("dir");
    let gateway = Gateway::new(
        rx,
        config,
        Executors::with_session_bus(bus.address()),
        dir.path().join("data.db"),
        dir.path(),
    );
    let call = tokio::spawn({
        let gateway = gateway.clone();
        async move {
            gateway
                .exec("t", "org.aai.test", "echo", &json!({"text": "found"}))
                .await
        }
    });
    // The call holds a receiver of its own while it waits for the complete snapshot.
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while tx.receiver_count() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the call waits for the scan");
    tx.send(Arc::new(Snapshot::build(&found, &[Platform::Linux], true)))
        .expect("send");
    let answer = call.await.expect("call");
    assert!(
        answer
            .as_ref()
            .is_ok_and(|v| v.to_string().contains("found")),
        "{answer:?}"
    );
}

/// Asks through the client's next request (MCP 2026-07-28): every question is left open.
struct AsksBetweenCalls;

impl aai_engine::consent::Asker for AsksBetweenCalls {
    fn ask<'a>(
        &'a self,
        question: &'a aai_engine::consent::Question,
    ) -> aai_executor::BoxFuture<
        'a,
        Result<aai_engine::consent::Answer, aai_engine::consent::Unanswered>,
    > {
        let pending = json!({"resultType": "input_required", "asked": question.tool});
        Box::pin(async move { Err(aai_engine::consent::Unanswered::Later(pending)) })
    }
}

/// A question the person is asked through the client is an outcome of its own wherever it
/// arises: a call or a batch asked before anything ran comes back as `NeedsInput` with the
/// client's request and writes nothing; where steps already ran (a workflow's step, a batch
/// step that waited for another), the step is reported failed with what to do, and the steps
/// before it stand. A caller that cannot continue a question gets a refusal, not a pending
/// error to misread.
#[tokio::test]
async fn a_question_put_between_calls_is_an_outcome_not_an_error() {
    use aai_engine::pipeline::{Caller, Outcome, Pipeline as _, Request};
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let config = policy(json!({
        "default_profile": "mine",
        "profiles": {"mine": {"preset": "development", "tool_overrides": {"org.aai.test:add": "require_approval"}}}
    }));
    let setup = setup(
        vec![full_test_descriptor("org.aai.test", TEST_SERVICE)],
        config,
        Executors::with_session_bus(bus.address()),
    );
    let gateway = &setup.gateway;
    let who = Caller::named("client-2026");
    let asker = AsksBetweenCalls;
    let add = json!({"a": 1, "b": 2});

    let call = Request::tool(&who, "org.aai.test", "add", &add).asking(Some(&asker));
    match gateway.call(call).await {
        Outcome::NeedsInput(pending) => assert_eq!(pending["asked"], "add", "{pending}"),
        other => panic!("a call asked through the client needs input: {other:?}"),
    }
    assert!(
        setup.results().is_empty(),
        "nothing ran: {:?}",
        setup.results()
    );
    let refused = gateway.call(call).await.into_result().expect_err("open");
    assert_eq!(refused.kind, ErrorKind::PermissionDenied);
    assert_eq!(
        refused.detail.as_ref().map(|d| d["reason"].clone()),
        Some(json!("approval_between_calls"))
    );

    // The batch's one question goes to the client before any step runs.
    let batch = json!({"steps": [
        {"app": "org.aai.test", "tool": "echo", "args": {"text": "first"}},
        {"app": "org.aai.test", "tool": "add", "args": {"a": 2, "b": 2}},
    ]});
    match gateway
        .call(Request::batch(&who, &batch).asking(Some(&asker)))
        .await
    {
        Outcome::NeedsInput(pending) => assert_eq!(pending["asked"], "aai_batch", "{pending}"),
        other => panic!("the batch question needs input: {other:?}"),
    }
    assert!(
        setup.results().is_empty(),
        "no step ran: {:?}",
        setup.results()
    );

    // A step that could not be asked up front (its arguments come from the step before) is
    // asked when it runs, after the first step ran: it fails, the first stands.
    let chained = json!({"steps": [
        {"app": "org.aai.test", "tool": "sum", "args": {"values": [1, 2]}},
        {"app": "org.aai.test", "tool": "add", "args": {"a": {"$from": "/0/result"}, "b": 1}},
    ]});
    let report = match gateway
        .call(Request::batch(&who, &chained).asking(Some(&asker)))
        .await
    {
        Outcome::Done(report) => report,
        other => panic!("a batch reports its steps: {other:?}"),
    };
    assert_eq!(report["steps"][0]["result"], 3, "{report}");
    assert_eq!(report["steps"][1]["status"], "failed", "{report}");
    assert_eq!(
        report["steps"][1]["error"]["type"], "PERMISSION_DENIED",
        "{report}"
    );

    // A workflow's step is asked as it runs, after the steps before it.
    let workflows = setup.dir.path().join("workflows");
    std::fs::create_dir_all(&workflows).expect("workflows");
    std::fs::write(
        workflows.join("two.json"),
        json!({"description": "echo, then add", "steps": [
            {"app": "org.aai.test", "tool": "echo", "args": {"text": "first"}},
            {"app": "org.aai.test", "tool": "add", "args": {"a": 1, "b": 1}},
            {"app": "org.aai.test", "tool": "echo", "args": {"text": "third"}, "on_error": "continue"},
        ]})
        .to_string(),
    )
    .expect("workflow");
    let inputs = json!({});
    let report = match gateway
        .call(Request::workflow(&who, "two", &inputs).asking(Some(&asker)))
        .await
    {
        Outcome::Done(report) => report,
        other => panic!("a workflow reports its steps: {other:?}"),
    };
    let statuses: Vec<&str> = report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["status"].as_str())
        .collect();
    assert_eq!(statuses, ["ok", "failed", "skipped"], "{report}");
    assert_eq!(report["steps"][0]["result"], "first");
    let message = report["steps"][1]["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        message.contains("asks only by being called again"),
        "{message}"
    );
}
