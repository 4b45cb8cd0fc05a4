//! Context is the product: token budgets of what the agent reads (o200k tokenizer).

use std::sync::Arc;

use aai_descriptor::Platform;
use aai_engine::catalog::discovery::Found;
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Config;
use aai_executor::Executors;
use aai_server::mcp::AaiServer;
use serde_json::json;

fn tokens(text: &str) -> usize {
    static BPE: std::sync::LazyLock<tiktoken_rs::CoreBPE> =
        std::sync::LazyLock::new(|| tiktoken_rs::o200k_base().expect("o200k"));
    BPE.encode_with_special_tokens(text).len()
}

/// Realistic descriptors: reverse-DNS ids, names, one-sentence descriptions, some aliases.
fn apps(count: usize) -> Vec<Found> {
    let vendors = [
        "com.apple",
        "com.microsoft",
        "org.gnome",
        "org.kde",
        "com.spotify",
        "org.mozilla",
        "com.slack",
        "io.github.someone",
    ];
    let products = [
        "Mail",
        "Calendar",
        "Reminders",
        "Music Player",
        "Notes",
        "Photos",
        "Terminal",
        "Text Editor",
        "Maps",
        "Weather",
    ];
    (0..count)
        .map(|i| {
            let product = products[i % products.len()];
            let app_id = format!("{}.{}{}", vendors[i % vendors.len()], product.to_lowercase().replace(' ', "-"), i);
            let doc = json!({
                "schema_version": "1.0", "appId": app_id, "name": product,
                "description": format!("{product} for the desktop: create, search and organise your items, sync them across devices and share them with others"),
                "aliases": if i % 2 == 0 { json!(["todo", "待办"]) } else { json!([]) },
                "platforms": {"linux": {"automation": "dbus", "service": "org.example.App", "object": "/org/example/App",
                    "interface": "org.example.App", "tools": [{"name": "ping", "description": "Ping", "method": "Ping"}]}}
            });
            let outcome = aai_descriptor::parse(&app_id, doc.to_string().as_bytes())
                .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d)));
            Found { rank: i, source: aai_engine::catalog::discovery::Source::UserWritten, path: format!("/apps/{app_id}/aai.json").into(), outcome }
        })
        .collect()
}

/// A server that only lists the tools of a registry it is given.
fn lister() -> AaiServer {
    AaiServer::new(aai_compose::kit_gateway(
        Snapshot::default(),
        Config::default(),
        Executors::new(),
        std::env::temp_dir().join("aai-unused-data.db"),
    ))
}

#[test]
fn an_app_entry_in_tools_list_costs_at_most_32_tokens() {
    let registry = Snapshot::build(&apps(50), &[Platform::Linux], true);
    assert_eq!(registry.apps.len(), 50);
    let server = lister();
    let tools = server.tools(&registry);
    let mut worst = 0;
    let mut total = 0;
    let mut longest = String::new();
    for tool in tools.iter().filter(|t| t.name.starts_with("app_")) {
        let entry = serde_json::to_string(tool).expect("json");
        let used = tokens(&entry);
        worst = worst.max(used);
        total += used;
        assert!(used <= 32, "{used} tokens: {entry}");
        // Whole words of the description's first sentence, never a cut word; the app's name
        // is not said twice when the description begins with it.
        let description = tool.description.as_deref().unwrap_or_default();
        let shown = description
            .split(" (aka")
            .next()
            .unwrap_or_default()
            .trim_end_matches(['.', '…']);
        let full = [
            "Mail", "Calendar", "Reminders", "Music Player", "Notes", "Photos", "Terminal",
            "Text Editor", "Maps", "Weather",
        ]
        .iter()
        .map(|product| {
            format!(
                "{product} for the desktop: create, search and organise your items, sync them across devices and share them with others"
            )
        })
        .find(|full| full.starts_with(shown))
        .unwrap_or_else(|| panic!("not the description's first words: {entry}"));
        let next = full[shown.len()..].chars().next();
        assert!(
            next.is_none_or(|c| !c.is_alphanumeric()),
            "a word was cut: {entry}"
        );
        if worst == used {
            longest = entry;
        }
    }
    eprintln!("longest: {longest}");
    eprintln!(
        "50 app entries: {total} tokens in all, {worst} at most, {:.1} on average",
        total as f64 / 50.0
    );
}

/// The stdio transport's `tools/list` body, written one entry at a time, is exactly rmcp's
/// serialization of the same tools, in both exposure modes.
#[tokio::test]
async fn the_streamed_tool_list_is_the_tool_list() {
    for exposure in [
        aai_engine::config::Exposure::Auto,
        aai_engine::config::Exposure::Full,
        aai_engine::config::Exposure::Compact,
    ] {
        let registry = Snapshot::build(&apps(40), &[Platform::Linux], true);
        let config = Config {
            exposure,
            ..Config::default()
        };
        let dir = tempfile::tempdir().expect("dir");
        let gateway = aai_compose::kit_gateway(
            registry,
            config,
            Executors::new(),
            dir.path().join("data.db"),
        );
        let server = AaiServer::new(gateway.clone());
        let body = server.tool_list_body().await;
        let registry = gateway.snapshot().await;
        let expected = serde_json::to_vec(&rmcp::model::ListToolsResult::with_all_items(
            server.tools(&registry),
        ))
        .expect("json");
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&expected)
        );
        let listed: serde_json::Value = serde_json::from_slice(&body).expect("valid JSON");
        let count = listed["tools"].as_array().map_or(0, Vec::len);
        // `auto` lists 40 apps as `compact` does: more than a tool each would fit.
        match exposure {
            aai_engine::config::Exposure::Full => assert!(count > 40, "{count}"),
            _ => assert!(count < 10, "{exposure:?}: {count}"),
        }
    }
}

/// The first turn an agent reads with 50 apps of 20 tools each: the gateway's listing (both
/// exposures) against the same tools listed flat, as 50 MCP servers would list them.
#[test]
fn fifty_apps_of_twenty_tools_cost_a_small_part_of_a_flat_listing() {
    let registry = Snapshot::build(&apps(50), &[Platform::Linux], true);
    let verbs = [
        (
            "create",
            "Create a new item in the given list with a title and an optional due date",
        ),
        (
            "search",
            "Search the items by words in their titles and notes, newest first",
        ),
        (
            "delete",
            "Delete an item by its id; it goes to the trash for thirty days",
        ),
        (
            "update",
            "Change the title, notes or due date of an item by its id",
        ),
    ];
    let mut flat = Vec::new();
    for app in &registry.apps {
        for i in 0..20 {
            let (verb, what) = verbs[i % verbs.len()];
            flat.push(json!({
                "name": format!("{verb}_item_{i}"),
                "description": format!("{what} ({}).", app.name()),
                "inputSchema": {"type": "object", "properties": {
                    "id": {"type": "string", "description": "The item's id"},
                    "title": {"type": "string", "description": "The item's title"}},
                    "required": ["id"]},
            }));
        }
    }
    let flat_tokens = tokens(&serde_json::to_string(&flat).expect("json"));
    for exposure in [
        aai_engine::config::Exposure::Auto,
        aai_engine::config::Exposure::Full,
        aai_engine::config::Exposure::Compact,
    ] {
        let gateway = aai_compose::kit_gateway(
            Snapshot::default(),
            Config {
                exposure,
                ..Config::default()
            },
            Executors::new(),
            std::env::temp_dir().join("aai-unused-data.db"),
        );
        let listed = AaiServer::new(gateway).tools(&registry);
        let ours = tokens(&serde_json::to_string(&listed).expect("json"));
        let share = ours as f64 * 100.0 / flat_tokens as f64;
        eprintln!(
            "{exposure:?}: {ours} tokens for {} tools listed, {flat_tokens} listed flat ({share:.1}%)",
            listed.len()
        );
        // The default (`auto`, compact beyond 30 apps) and `compact` at most 2%; a tool per
        // app costs its entries (30 tokens each at most, see above) on top.
        let most = match exposure {
            aai_engine::config::Exposure::Full => 2.8,
            _ => 2.0,
        };
        assert!(share <= most, "{exposure:?}: {share:.1}% of a flat listing");
    }
}

/// The built-in apps' own entries (the ones every user sees) keep the budget the manual
/// states (`docs/manual/agent.md`), and the manual's count of built-in apps is theirs.
#[test]
fn the_built_in_entries_keep_the_stated_budget_and_count() {
    let descriptors = aai_local::all_descriptors();
    let found: Vec<Found> = descriptors
        .iter()
        .enumerate()
        .map(|(rank, d)| Found {
            rank,
            source: aai_engine::catalog::discovery::Source::BuiltIn,
            path: format!("built in: {}", d.app_id).into(),
            outcome: Ok(aai_engine::catalog::cache::Entry::held(d.clone())),
        })
        .collect();
    let registry = Snapshot::build(&found, &[Platform::Linux], true);
    let server = lister();
    let entries: Vec<usize> = server
        .tools(&registry)
        .iter()
        .filter(|t| t.name.starts_with("app_"))
        .map(|t| tokens(&serde_json::to_string(t).expect("json")))
        .collect();
    let worst = entries.iter().copied().max().unwrap_or(0);
    // Every built-in app, the scheduler's and the drafts' included: as `--scan` lists them.
    let home = tempfile::tempdir().expect("home");
    let scan = aai_test_support::cli::Run::new(env!("CARGO_BIN_EXE_aai-gateway"), home.path())
        .args(["--json", "--scan"])
        .output();
    let scan: serde_json::Value = serde_json::from_slice(&scan.stdout).expect("json");
    let count = scan["apps"]
        .as_array()
        .expect("apps")
        .iter()
        .filter(|a| {
            a["source"]
                .as_str()
                .is_some_and(|s| s.starts_with("built in:"))
        })
        .count();
    eprintln!("{count} built-in apps; their entries {worst} tokens at most");
    assert!(worst <= 32, "{entries:?}");
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let manual = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/manual/tools.md"),
    )
    .expect("tools.md");
    assert!(
        manual.contains(&format!("The {} built-in apps", words[count])),
        "tools.md does not say {} built-in apps",
        words[count]
    );
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .expect("README");
    assert!(readme.contains(&format!("{} built-in apps", words[count])));
}
