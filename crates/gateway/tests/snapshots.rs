//! Snapshots of what an agent reads: guides, the compact tool list and error texts. A change
//! to any of them shows up in review as a diff of the `.snap` files.

use std::sync::Arc;

use aai_descriptor::Platform;
use aai_engine::catalog::discovery::Found;
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::{Config, Exposure};
use aai_executor::Executors;
use aai_server::mcp::AaiServer;
use serde_json::json;

fn example(app_id: &str) -> serde_json::Value {
    let path = format!(
        "{}/../../examples/apps/{app_id}/aai.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("example")).expect("json")
}

fn server(exposure: Exposure) -> (AaiServer, Arc<Snapshot>, tempfile::TempDir) {
    let docs = [
        example("org.freedesktop.Notifications"),
        example("org.mpris.MediaPlayer2.vlc"),
    ];
    let found: Vec<Found> = docs
        .iter()
        .enumerate()
        .map(|(rank, doc)| Found {
            rank,
            source: aai_engine::catalog::discovery::Source::UserWritten,
            path: format!(
                "/home/user/.aai/{}/aai.json",
                doc["appId"].as_str().unwrap_or_default()
            )
            .into(),
            outcome: aai_descriptor::parse("t", doc.to_string().as_bytes())
                .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d))),
        })
        .collect();
    let registry = Snapshot::build(&found, &[Platform::Linux], true);
    let config = Config {
        exposure,
        ..Config::default()
    };
    let dir = tempfile::tempdir().expect("dir");
    let gateway = aai_compose::kit_gateway(
        Snapshot::build(&found, &[Platform::Linux], true),
        config,
        Executors::new(),
        dir.path().join("data.db"),
    );
    (AaiServer::new(gateway), Arc::new(registry), dir)
}

async fn text(server: &AaiServer, name: &str, args: serde_json::Value) -> String {
    match server.dispatch("snapshot-client", name, args).await {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(error) => format!(
            "{} ({}): {}\ndetail: {}",
            error.kind.type_name(),
            error.kind.code(),
            error.message,
            error.detail.unwrap_or_default()
        ),
    }
}

#[tokio::test]
async fn guides() {
    let (server, _, _dir) = server(Exposure::Full);
    insta::assert_snapshot!(
        "guide_notifications",
        text(&server, "app_org_freedesktop_Notifications", json!({})).await
    );
    insta::assert_snapshot!(
        "guide_vlc",
        text(
            &server,
            "aai_guide",
            json!({"app": "org.mpris.MediaPlayer2.vlc"})
        )
        .await
    );
}

#[tokio::test]
async fn tool_lists() {
    for (name, exposure) in [
        ("tools_full", Exposure::Full),
        ("tools_compact", Exposure::Compact),
    ] {
        let (server, registry, _dir) = server(exposure);
        let tools = serde_json::to_string_pretty(&server.tools(&registry)).expect("json");
        insta::assert_snapshot!(name, tools);
    }
}

#[tokio::test]
async fn error_texts() {
    let (server, _, _dir) = server(Exposure::Full);
    let cases = [
        (
            "aai_exec",
            json!({"app": "org.example.nothere", "tool": "x"}),
        ),
        (
            "aai_exec",
            json!({"app": "org.mpris.MediaPlayer2.vlc", "tool": "volume_up"}),
        ),
        (
            "aai_exec",
            json!({"app": "org.mpris.MediaPlayer2.vlc", "tool": "set_volume", "args": {"volume": 3}}),
        ),
        (
            "aai_exec",
            json!({"app": "org.freedesktop.Notifications", "tool": "notify", "args": {"body": 5}}),
        ),
        ("aai_exec", json!({"tool": "notify"})),
        ("no_such_tool", json!({})),
    ];
    let mut out = String::new();
    for (name, args) in cases {
        let shown = args.to_string();
        out.push_str(&format!(
            "{name} {shown}\n{}\n\n",
            text(&server, name, args).await
        ));
    }
    insta::assert_snapshot!("errors", out);
}
