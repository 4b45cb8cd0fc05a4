//! MCP servers behind the gateway (`aai-bench mcp`): the tokens an agent reads on its first
//! turn with four real servers listed directly vs through the gateway, the guide's tokens per
//! tool, and a call's added latency (warm, and the first call with the server's start).
//! Needs the servers `scripts/test.sh` installs into `target/mcp-servers`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Gateway, median, ms};

fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("mcp-servers")
}

/// (appId, name, command, args) of the four servers.
fn servers(files: &Path) -> Vec<(&'static str, &'static str, String, Vec<String>)> {
    let dir = servers_dir();
    let npm = dir.join("node_modules").join("@modelcontextprotocol");
    let script = |p: &str| {
        npm.join(p)
            .join("dist")
            .join("index.js")
            .display()
            .to_string()
    };
    vec![
        (
            "io.github.everything",
            "Everything",
            "node".into(),
            vec![script("server-everything"), "stdio".into()],
        ),
        (
            "io.github.filesystem",
            "Filesystem",
            "node".into(),
            vec![script("server-filesystem"), files.display().to_string()],
        ),
        (
            "io.github.memory",
            "Memory",
            "node".into(),
            vec![script("server-memory")],
        ),
        (
            "io.github.time",
            "Time",
            dir.join("venv/bin/mcp-server-time").display().to_string(),
            vec![],
        ),
    ]
}

fn tokens(bpe: &tiktoken_rs::CoreBPE, text: &str) -> usize {
    bpe.encode_with_special_tokens(text).len()
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub fn run() {
    assert!(
        servers_dir().join("node_modules").is_dir(),
        "run scripts/test.sh first: it installs the MCP servers into target/mcp-servers"
    );
    let bpe = tiktoken_rs::o200k_base().expect("o200k");
    let files = tempfile::tempdir().expect("files");
    std::fs::write(files.path().join("note.txt"), "hello\n").expect("note");
    let home = tempfile::tempdir().expect("home");
    let memory_file = home.path().join("memory.jsonl");
    let list = servers(files.path());

    println!("| measurement | result |");
    println!("|---|---|");
    // Listed directly: each server's tools/list, as a client puts it in the model's context.
    let mut direct_tokens = 0;
    let mut tool_counts = Vec::new();
    for (_, name, command, args) in &list {
        let mut cmd = Command::new(command);
        cmd.args(args).env("MEMORY_FILE_PATH", &memory_file);
        let mut server = Gateway::from_command(cmd);
        server.initialize();
        let tools = server.request("tools/list", json!({}))["result"]["tools"].clone();
        let n = tools.as_array().map_or(0, Vec::len);
        let t = tokens(&bpe, &tools.to_string());
        println!("| {name}: tools/list listed directly | {n} tools, {t} tokens |");
        direct_tokens += t;
        tool_counts.push(n);
    }

    for (app, name, command, args) in &list {
        let dir = home.path().join(app);
        std::fs::create_dir_all(&dir).expect("dir");
        let doc = json!({"schema_version": "1.0", "appId": app, "name": name,
            "description": format!("The {name} MCP server."),
            "platforms": {"mcp": {"automation": "stdio", "command": command, "args": args,
                "env": {"MEMORY_FILE_PATH": memory_file.display().to_string()}}}});
        std::fs::write(dir.join("aai.json"), doc.to_string()).expect("descriptor");
    }
    let mut gateway = Gateway::spawn(home.path(), None);
    gateway.initialize();
    let listed = gateway.request("tools/list", json!({}))["result"]["tools"].clone();
    let ours = tokens(&bpe, &listed.to_string());
    println!(
        "| first turn, the four servers listed directly vs through aai-gateway | {direct_tokens} vs {ours} tokens ({:.1}× fewer) |",
        direct_tokens as f64 / ours as f64
    );
    for ((app, name, _, _), n) in list.iter().zip(&tool_counts) {
        let guide = text_of(&gateway.request(
            "tools/call",
            json!({"name": "aai_guide", "arguments": {"app": app}}),
        ));
        let t = tokens(&bpe, &guide);
        println!(
            "| {name}: guide through aai-gateway | {t} tokens, {:.0} per tool ({n} tools) |",
            t as f64 / (*n).max(1) as f64
        );
    }

    // A warm call: everything's echo, directly and through the gateway (started above).
    let echo = json!({"name": "echo", "arguments": {"message": "hi"}});
    let through = json!({"name": "aai_exec", "arguments": {"app": "io.github.everything", "tool": "echo", "args": {"message": "hi"}}});
    let (_, _, command, args) = &list[0];
    let mut cmd = Command::new(command);
    cmd.args(args);
    let mut direct = Gateway::from_command(cmd);
    direct.initialize();
    let time = |server: &mut Gateway, call: &Value| {
        for _ in 0..20 {
            server.request("tools/call", call.clone());
        }
        let mut samples = Vec::new();
        for _ in 0..200 {
            let started = Instant::now();
            let reply = server.request("tools/call", call.clone());
            samples.push(started.elapsed());
            assert!(text_of(&reply).contains("hi"), "{reply}");
        }
        median(samples)
    };
    let plain = time(&mut direct, &echo);
    let gated = time(&mut gateway, &through);
    println!(
        "| warm tools/call, everything's echo (median of 200) | direct {}, through aai-gateway {} (+{}) |",
        us(plain),
        us(gated),
        us(gated.saturating_sub(plain))
    );

    // The first call of a session: the gateway starts, then the server on first use.
    let mut first = Vec::new();
    let mut direct_first = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let mut cmd = Command::new(command);
        cmd.args(args);
        let mut server = Gateway::from_command(cmd);
        server.initialize();
        server.request("tools/call", echo.clone());
        direct_first.push(started.elapsed());
        let started = Instant::now();
        let mut gateway = Gateway::spawn(home.path(), None);
        gateway.initialize();
        let reply = gateway.request("tools/call", through.clone());
        first.push(started.elapsed());
        assert!(text_of(&reply).contains("hi"), "{reply}");
    }
    println!(
        "| first call from a cold start (median of 7) | direct (server start + call) {}, through aai-gateway (gateway + server start + call) {} |",
        ms(median(direct_first)),
        ms(median(first))
    );
}

fn us(d: Duration) -> String {
    format!("{} µs", d.as_micros())
}
