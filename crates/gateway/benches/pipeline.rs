//! In-process costs of the gateway's hot paths (criterion).

use std::hint::black_box;
use std::sync::Arc;

use aai_descriptor::Platform;
use aai_engine::catalog::discovery::Found;
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Config;
use aai_executor::Executors;
use aai_server::mcp::AaiServer;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

fn descriptor(i: usize, tools: usize) -> Value {
    let tools: Vec<Value> = (0..tools)
        .map(|t| {
            json!({
                "name": format!("tool_{t}"), "description": "Create a reminder in a list with an optional due date",
                "method": "Create",
                "parameters": {"type": "object", "properties": {
                    "title": {"type": "string", "description": "Title"},
                    "due": {"type": "string", "description": "Due date, ISO 8601"},
                    "priority": {"type": "integer", "enum": [0, 1, 5, 9]}}, "required": ["title"]}
            })
        })
        .collect();
    json!({"schema_version": "1.0", "appId": format!("org.example.app{i}"), "name": format!("App {i}"),
        "description": "An application with a D-Bus interface for agents",
        "platforms": {"linux": {"automation": "dbus", "service": "org.example.App", "object": "/org/example/App",
            "interface": "org.example.App", "tools": tools}}})
}

fn found(count: usize) -> Vec<Found> {
    (0..count)
        .map(|i| {
            let text = descriptor(i, 3).to_string();
            let outcome = aai_descriptor::parse("bench", text.as_bytes())
                .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d)));
            Found {
                rank: i,
                source: aai_engine::catalog::discovery::Source::UserWritten,
                path: format!("/apps/{i}/aai.json").into(),
                outcome,
            }
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let one = descriptor(1, 10).to_string();
    c.bench_function("parse+validate descriptor (10 tools)", |b| {
        b.iter(|| aai_descriptor::parse("bench", black_box(one.as_bytes())).expect("valid"))
    });

    let apps = found(1000);
    c.bench_function("registry build (1000 apps)", |b| {
        b.iter(|| Snapshot::build(black_box(&apps), &[Platform::Linux], true))
    });

    let registry = Snapshot::build(&apps, &[Platform::Linux], true);
    let server = AaiServer::new(aai_compose::kit_gateway(
        Snapshot::default(),
        Config::default(),
        Executors::new(),
        std::env::temp_dir().join("aai-bench-unused.db"),
    ));
    c.bench_function("tools/list body (1000 apps)", |b| {
        b.iter(|| serde_json::to_string(&server.tools(black_box(&registry))).expect("json"))
    });

    let big =
        aai_descriptor::parse("bench", descriptor(0, 20).to_string().as_bytes()).expect("valid");
    let tools = big.tools(Platform::Linux).expect("tools");
    c.bench_function("guide (20 tools)", |b| {
        b.iter(|| aai_descriptor::guide::guide(black_box(&big), &tools))
    });

    c.bench_function("registry lookup + arg validation", |b| {
        let app = registry.find("app_org_example_app500").expect("app");
        let descriptor = app.descriptor().expect("held");
        let tool = descriptor.tool(Platform::Linux, "tool_1").expect("tool");
        let args = json!({"title": "Buy milk", "priority": 5});
        b.iter(|| {
            let validator = app
                .validator(&tool.name, tool.parameters.as_ref())
                .expect("compiles")
                .expect("validator");
            black_box(validator.is_valid(black_box(&args)))
        })
    });
}

fn gate(c: &mut Criterion) {
    use aai_engine::gate::{Call, Gate};
    use aai_policy::{Preset, Risk, ToolFacts};
    let dir = tempfile::tempdir().expect("dir");
    let gate = Gate::new(dir.path().join("data.db"));
    let profile = Preset::Development.profile();
    let args = json!({"to": "ann@example.com", "subject": "Hello", "password": "x"});
    c.bench_function(
        "gate: policy + grant lookup + 2 audit appends (disk, WAL)",
        |b| {
            b.iter(|| {
                let redacted = aai_audit::redact(black_box(&args), None);
                let facts = ToolFacts {
                    name: "org.example.mail:send",
                    category: "org.example.mail",
                    risk: Risk::High,
                };
                let action = profile.decide(&facts, &[]);
                let granted = gate
                    .granted("claude-code", "org.example.mail", "send")
                    .expect("read");
                let call = Call {
                    id: gate.call_id(),
                    caller: "claude-code",
                    app: "org.example.mail",
                    tool: "send",
                    args: &redacted,
                    risk: Risk::High,
                };
                gate.record(&call, "require_approval:granted", "started", 0, None)
                    .expect("append");
                gate.record(&call, "require_approval:granted", "success", 1, None)
                    .expect("append");
                black_box((action, granted))
            })
        },
    );
}

/// A web tool through the whole gateway (lookup, argument check, policy, two audit appends,
/// request building, response parsing) against the same request made directly with reqwest,
/// both to one loopback server over kept-alive connections.
fn rest(c: &mut Criterion) {
    use aai_test_support::http::{Response, TestServer};
    let server =
        TestServer::http(|_| Response::json(200, &json!({"ok": true, "items": [1, 2, 3]})));
    let doc = json!({"schema_version": "1.0", "appId": "org.example.api", "name": "API",
        "platforms": {"web": {"automation": "restapi", "base_url": format!("{}/v1", server.url()),
            "auth": {"type": "none"},
            "tools": [{"name": "get_item", "description": "Get an item", "endpoint": "/items/${id}",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}]}}});
    let found = vec![Found {
        rank: 0,
        source: aai_engine::catalog::discovery::Source::UserWritten,
        path: "/bench/aai.json".into(),
        outcome: aai_descriptor::parse("bench", doc.to_string().as_bytes())
            .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d))),
    }];
    let dir = tempfile::tempdir().expect("dir");
    let config: Config = serde_json::from_value(json!({
        "web": {"allow_http_loopback": true},
        "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}}
    }))
    .expect("config");
    let gateway = aai_compose::kit_gateway(
        Snapshot::build(&found, &[Platform::Web], true),
        config,
        Executors::new(),
        dir.path().join("data.db"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let args = json!({"id": "42"});
    c.bench_function("web tool through the gateway (gate + audit + REST)", |b| {
        b.iter(|| {
            runtime
                .block_on(gateway.exec("bench", "org.example.api", "get_item", &args))
                .expect("call")
        })
    });
    let client = aai_executor::http_client(&[]).expect("client");
    let url = format!("{}/v1/items/42", server.url());
    c.bench_function("the same request, direct reqwest", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let response = client.get(&url).send().await.expect("send");
                let body: Value =
                    serde_json::from_slice(&response.bytes().await.expect("body")).expect("json");
                body
            })
        })
    });
}

/// The built-in local tools through the whole gateway (gate and audit included), and the
/// sandbox check alone.
fn local(c: &mut Criterion) {
    aai_contain::set_launcher(env!("CARGO_BIN_EXE_aai-gateway"));
    let dir = tempfile::tempdir().expect("dir");
    let allowed = dir.path().join("work");
    std::fs::create_dir_all(allowed.join("src/deep")).expect("dirs");
    let big = allowed.join("src/deep/big.txt");
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    std::fs::write(&big, line.repeat(1024 * 1024 / line.len() + 1)).expect("1 MB file");
    let config: Config = serde_json::from_value(json!({
        "local": {"sandbox": {"allowed_directories": [allowed]}},
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development", "risk_policies": {"high": "auto_approve"}}}}
    }))
    .expect("config");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let options = aai_engine::catalog::discovery::ScanOptions::new(&home, &config, false)
        .plug(&config, &aai_compose::kit_apps());
    let registry = aai_engine::scan_once(&options, &[Platform::Linux]);
    let sandbox =
        aai_sandbox::Sandbox::new(&config.local.sandbox, &[], std::slice::from_ref(&home));
    let gateway =
        aai_compose::kit_gateway(registry, config, Executors::new(), home.join("data.db"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let exec = |app: &str, tool: &str, args: &Value| {
        runtime
            .block_on(gateway.exec("bench", app, tool, args))
            .expect("call")
    };
    exec(
        "local.terminal",
        "bash_execute",
        &json!({"command": "true"}),
    );
    c.bench_function(
        "bash_execute `true` in a warm session (gateway, gate, audit)",
        |b| {
            b.iter(|| {
                exec(
                    "local.terminal",
                    "bash_execute",
                    &json!({"command": "true"}),
                )
            })
        },
    );
    let read = json!({"path": big, "limit": 100_000});
    c.bench_function("file_read of 1 MB (gateway, gate, audit)", |b| {
        b.iter(|| exec("local.files", "file_read", &read))
    });
    let path = big.display().to_string();
    c.bench_function("sandbox check of a file 3 folders deep", |b| {
        b.iter(|| sandbox.check_read(black_box(&path)).expect("inside"))
    });
}

/// What the sandbox launcher adds: a terminal session started (and its first `true` run)
/// contained and not, and the launcher around `true` alone. Commands after the first run in
/// the session's shell, so the launcher costs nothing per command.
fn containment(c: &mut Criterion) {
    aai_contain::set_launcher(env!("CARGO_BIN_EXE_aai-gateway"));
    let dir = tempfile::tempdir().expect("dir");
    let allowed = dir.path().join("work");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&allowed).expect("allowed");
    std::fs::create_dir_all(&home).expect("home");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("containment");
    group.sample_size(20);
    for mode in ["sandbox", "none"] {
        let config: Config = serde_json::from_value(json!({
            "local": {"sandbox": {"allowed_directories": [allowed]}, "containment": mode},
            "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development", "risk_policies": {"high": "auto_approve"}}}}
        }))
        .expect("config");
        let options = aai_engine::catalog::discovery::ScanOptions::new(&home, &config, false)
            .plug(&config, &aai_compose::kit_apps());
        let registry = aai_engine::scan_once(&options, &[Platform::Linux]);
        let gateway = aai_compose::kit_gateway(
            registry,
            config,
            Executors::new(),
            home.join(format!("{mode}.db")),
        );
        let exec = |tool: &str, args: Value| {
            runtime
                .block_on(gateway.exec("bench", "local.terminal", tool, &args))
                .expect("call")
        };
        exec("bash_execute", json!({"command": "true"}));
        group.bench_function(
            format!("bash_execute `true` in a warm session (containment {mode})"),
            |b| b.iter(|| exec("bash_execute", json!({"command": "true"}))),
        );
        group.bench_function(
            format!("new session + bash_execute `true` (containment {mode})"),
            |b| {
                b.iter(|| {
                    exec(
                        "bash_session",
                        json!({"action": "create", "session_id": "b"}),
                    );
                    exec(
                        "bash_execute",
                        json!({"command": "true", "session_id": "b"}),
                    );
                    exec("bash_session", json!({"action": "kill", "session_id": "b"}));
                })
            },
        );
    }
    let launcher = env!("CARGO_BIN_EXE_aai-gateway");
    let home_arg = home.display().to_string();
    let allowed_arg = allowed.display().to_string();
    group.bench_function("`true` directly", |b| {
        b.iter(|| {
            std::process::Command::new("/bin/true")
                .status()
                .expect("true")
        })
    });
    group.bench_function("`true` under the launcher", |b| {
        b.iter(|| {
            std::process::Command::new(launcher)
                .args(["__contain", "--home", &home_arg, "--write", &allowed_arg])
                .args(["--temp", "/tmp", "--", "/bin/true"])
                .status()
                .expect("launcher")
        })
    });
    group.finish();
}

criterion_group!(pipeline, benches, gate, rest, local, containment);
criterion_main!(pipeline);
