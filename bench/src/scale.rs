//! `aai-bench scale`: the figures an agent feels on every turn, at 1,000 and 10,000 apps —
//! spawn → complete first `tools/list` on a cold and a warm descriptor cache, `tools/list`
//! on the wire, and peak RSS after the list, 100 guides and 1,000 calls.
//!
//! `aai-bench compare [--apps N] -- COMMAND [ARG…]`: the same figures side by side with another
//! stdio MCP server started by COMMAND over the same apps (`{home}` in an argument becomes
//! the apps' folder, which is also in `AAI_HOME`), the two started in rotated order, medians
//! of each. Prints a Markdown table with the ratios.

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aai_test_support::{TEST_SERVICE, TestBus};
use serde_json::{Value, json};

use crate::{Gateway, home_with, median, release_dir};

/// Runs of each start-up measurement.
const STARTS: usize = 9;
/// `tools/list` requests timed in one session.
const LISTS: usize = 200;

/// One server to measure: how to start it over the apps in `home`.
struct Contender {
    label: String,
    program: String,
    args: Vec<String>,
}

impl Contender {
    fn ours() -> Self {
        Self {
            label: "aai-gateway".into(),
            program: release_dir().join("aai-gateway").display().to_string(),
            args: Vec::new(),
        }
    }

    fn start(&self, home: &Path, bus: &TestBus) -> Gateway {
        let mut command = Command::new(&self.program);
        let home_text = home.display().to_string();
        command
            .args(self.args.iter().map(|a| a.replace("{home}", &home_text)))
            .env("AAI_HOME", home)
            .env("AAI_LOG", "error")
            .env("DBUS_SESSION_BUS_ADDRESS", bus.address());
        Gateway::from_command(command)
    }
}

/// A request's answer as the raw line, matched by id without parsing the whole frame: what
/// a client waits for, not what it costs to decode.
fn raw_request(gateway: &mut Gateway, method: &str, params: &Value) -> String {
    let id = gateway.next_id;
    gateway.next_id += 1;
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let stdin = gateway.stdin.as_mut().expect("stdin");
    writeln!(stdin, "{line}").expect("write");
    stdin.flush().expect("flush");
    let needle = format!("\"id\":{id}");
    loop {
        let mut reply = String::new();
        let read = gateway.stdout.read_line(&mut reply).expect("read");
        assert!(read > 0, "the server closed stdout");
        let head = &reply[..reply.len().min(200)];
        let tail = &reply[reply.len().saturating_sub(200)..];
        let matches = |part: &str| {
            part.match_indices(&needle)
                .any(|(at, _)| !part[at + needle.len()..].starts_with(|c: char| c.is_ascii_digit()))
        };
        if (matches(head) || matches(tail)) && !reply.contains("\"method\":") {
            return reply;
        }
    }
}

fn tool_names(list: &str) -> Vec<String> {
    let frame: Value = serde_json::from_str(list).expect("tools/list frame");
    frame["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Memory of `pid` and its descendants (a server started through a wrapper), in KiB: the peak
/// resident set (`VmHWM`) and the private, anonymous memory resident now (`RssAnon`: heap,
/// stacks, allocations — what the process alone holds, unlike file pages of the binary that the
/// kernel shares and can drop).
#[derive(Default, Clone, Copy)]
pub struct Memory {
    pub peak_kib: u64,
    pub private_kib: u64,
}

pub fn memory_tree(pid: u32) -> Memory {
    let mut total = Memory::default();
    let mut wanted = vec![pid];
    while let Some(pid) = wanted.pop() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        total.peak_kib += field("VmHWM:");
        total.private_kib += field("RssAnon:");
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        wanted.extend(
            children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    total
}

/// What one contender measured at one app count.
#[derive(Default)]
struct Figures {
    cold_list: Option<Duration>,
    cold_listed: usize,
    listed: usize,
    list_wire: Duration,
    ping_wire: Duration,
    after_list: Memory,
    after_use: Option<Memory>,
}

/// Spawn → complete first `tools/list`; returns the time and the number of tools.
fn first_list(contender: &Contender, home: &Path, bus: &TestBus) -> (Duration, usize) {
    let (_, listed, tools) = first_answers(contender, home, bus);
    (listed, tools)
}

/// Spawn → `initialize` answered, spawn → complete first `tools/list`, and its tool count.
fn first_answers(contender: &Contender, home: &Path, bus: &TestBus) -> (Duration, Duration, usize) {
    let started = Instant::now();
    let mut gateway = contender.start(home, bus);
    gateway.initialize();
    let initialized = started.elapsed();
    let list = raw_request(&mut gateway, "tools/list", &json!({}));
    let elapsed = started.elapsed();
    (initialized, elapsed, tool_names(&list).len())
}

/// Every figure of `contender` over `home` (warm runs interleave with `rival`'s, if any).
fn measure(contender: &Contender, home: &Path, bus: &TestBus, use_it: bool) -> Figures {
    let mut figures = Figures::default();
    // Cold: no cache of ours (another server keeps none of ours to lose).
    let _ = std::fs::remove_dir_all(home.join("cache"));
    let (cold, listed) = first_list(contender, home, bus);
    figures.cold_list = Some(cold);
    figures.cold_listed = listed;
    let mut gateway = contender.start(home, bus);
    gateway.initialize();
    let list = raw_request(&mut gateway, "tools/list", &json!({}));
    let names = tool_names(&list);
    figures.listed = names.len();
    figures.after_list = memory_tree(gateway.child.id());
    let wire = |gateway: &mut Gateway, method: &str| {
        let samples: Vec<Duration> = (0..LISTS)
            .map(|_| {
                let started = Instant::now();
                raw_request(gateway, method, &json!({}));
                started.elapsed()
            })
            .collect();
        median(samples)
    };
    figures.list_wire = wire(&mut gateway, "tools/list");
    figures.ping_wire = wire(&mut gateway, "ping");
    if use_it {
        let apps: Vec<&String> = names
            .iter()
            .filter(|n| n.starts_with("app_org_example"))
            .collect();
        for i in 0..100 {
            let reply = gateway.request(
                "tools/call",
                json!({"name": apps[(i * 37) % apps.len()], "arguments": {}}),
            );
            assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        }
        for i in 0..1_000 {
            let app = format!("org.example.bench{}", (i * 7) % apps.len());
            let reply = gateway.request(
                "tools/call",
                json!({"name": "aai_exec", "arguments": {"app": app, "tool": "echo", "args": {"text": "hello"}}}),
            );
            assert_eq!(
                reply["result"]["content"][0]["text"],
                json!("hello"),
                "{reply}"
            );
        }
        figures.after_use = Some(memory_tree(gateway.child.id()));
    }
    figures
}

/// Warm starts in rotated order: per contender, (spawn → initialize, spawn → tools/list).
fn warm_runs(
    contenders: &[&Contender],
    home: &Path,
    bus: &TestBus,
) -> Vec<(Vec<Duration>, Vec<Duration>)> {
    let mut runs = vec![(Vec::new(), Vec::new()); contenders.len()];
    // Each contender once so that its caches are warm, then rotated rounds.
    for contender in contenders {
        first_list(contender, home, bus);
    }
    for round in 0..STARTS {
        for offset in 0..contenders.len() {
            let index = (round + offset) % contenders.len();
            let (initialized, listed, _) = first_answers(contenders[index], home, bus);
            runs[index].0.push(initialized);
            runs[index].1.push(listed);
        }
    }
    runs
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn both(memory: Memory) -> String {
    format!("{} / {}", mib(memory.peak_kib), mib(memory.private_kib))
}

/// `aai-bench scale`.
pub fn run() {
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let ours = Contender::ours();
    println!(
        "| apps | cold spawn → complete tools/list (tools) | warm spawn → complete tools/list (median of {STARTS}) | tools/list wire p50 | ping wire p50 | peak RSS / private after list | peak RSS / private after list, 100 guides, 1,000 calls |"
    );
    println!("|---|---|---|---|---|---|---|");
    for count in [1_000usize, 10_000] {
        let home = home_with(count);
        let figures = measure(&ours, home.path(), &bus, true);
        let warm = median(warm_runs(&[&ours], home.path(), &bus).remove(0).1);
        println!(
            "| {count} | {} ({}) | {} | {} | {} | {} | {} |",
            ms(figures.cold_list.unwrap_or_default()),
            figures.cold_listed,
            ms(warm),
            ms(figures.list_wire),
            ms(figures.ping_wire),
            both(figures.after_list),
            both(figures.after_use.unwrap_or_default()),
        );
    }
}

/// Writes the same apps (id, name, description) in the descriptor format of the TypeScript
/// gateway (`schemaVersion` 2.0, one skill each) under `{home}/peer-apps`, for a peer started
/// with `AAI_GATEWAY_APPS_DIR={home}/peer-apps`.
fn write_peer_apps(home: &Path) {
    let root = home.join("peer-apps");
    let skill = home.join("peer-skill");
    std::fs::create_dir_all(&skill).expect("mkdir");
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: bench\ndescription: A bench skill.\n---\nEchoes text.\n",
    )
    .expect("write");
    for entry in std::fs::read_dir(home).expect("read home").flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("aai.json")) else {
            continue;
        };
        let ours: Value = serde_json::from_str(&text).expect("our descriptor");
        let app_id = entry.file_name().to_string_lossy().into_owned();
        let peer = json!({
            "schemaVersion": "2.0",
            "version": "1.0.0",
            "app": {"name": {"default": ours["name"]}},
            "access": {"protocol": "skill", "config": {"path": skill}},
            "exposure": {"summary": ours["description"]},
        });
        let folder = root.join(&app_id);
        std::fs::create_dir_all(&folder).expect("mkdir");
        std::fs::write(folder.join("aai.json"), peer.to_string()).expect("write");
    }
}

/// `aai-bench compare [--apps N] [--peer-apps] -- COMMAND [ARG…]`.
pub fn compare(args: &[String]) {
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let (options, command) = (&args[..split], args.get(split + 1..).unwrap_or_default());
    let Some((program, rest)) = command.split_first() else {
        eprintln!(
            "usage: aai-bench compare [--apps N] [--peer-apps] -- COMMAND [ARG...]  ({{home}} in an argument is the apps' folder; --peer-apps also writes them for the TypeScript gateway under {{home}}/peer-apps)"
        );
        std::process::exit(2);
    };
    let count: usize = options
        .iter()
        .position(|o| o == "--apps")
        .and_then(|at| options.get(at + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000);
    let rival = Contender {
        label: format!("`{}`", command.join(" ")),
        program: program.clone(),
        args: rest.to_vec(),
    };
    let ours = Contender::ours();
    let mut bus = TestBus::start();
    bus.spawn_service(TEST_SERVICE);
    let home = home_with(count);
    if options.iter().any(|o| o == "--peer-apps") {
        write_peer_apps(home.path());
    }
    let a = measure(&ours, home.path(), &bus, false);
    let b = measure(&rival, home.path(), &bus, false);
    let warm = warm_runs(&[&ours, &rival], home.path(), &bus);
    let (init_a, warm_a) = (median(warm[0].0.clone()), median(warm[0].1.clone()));
    let (init_b, warm_b) = (median(warm[1].0.clone()), median(warm[1].1.clone()));
    let ratio = |x: f64, y: f64| {
        if x > 0.0 {
            format!("{:.1}×", y / x)
        } else {
            "–".into()
        }
    };
    let timed = |what: &str, x: Duration, y: Duration| {
        (
            what.to_owned(),
            ms(x),
            ms(y),
            ratio(x.as_secs_f64(), y.as_secs_f64()),
        )
    };
    println!("{count} apps; A = aai-gateway, B = {}", rival.label);
    println!("| measurement | A | B | B / A |");
    println!("|---|---|---|---|");
    let rows = [
        (
            "tools listed (first list, cold / later)".to_owned(),
            format!("{} / {}", a.cold_listed, a.listed),
            format!("{} / {}", b.cold_listed, b.listed),
            String::new(),
        ),
        timed(
            "spawn → initialize answered (median of rotated runs)",
            init_a,
            init_b,
        ),
        timed(
            "spawn → complete tools/list, cold (one run)",
            a.cold_list.unwrap_or_default(),
            b.cold_list.unwrap_or_default(),
        ),
        timed(
            "spawn → complete tools/list, warm (median of rotated runs)",
            warm_a,
            warm_b,
        ),
        timed(
            &format!("tools/list on the wire (median of {LISTS})"),
            a.list_wire,
            b.list_wire,
        ),
        timed(
            &format!("ping on the wire (median of {LISTS})"),
            a.ping_wire,
            b.ping_wire,
        ),
        (
            "peak RSS after the list".to_owned(),
            mib(a.after_list.peak_kib),
            mib(b.after_list.peak_kib),
            ratio(a.after_list.peak_kib as f64, b.after_list.peak_kib as f64),
        ),
        (
            "private (anonymous) memory after the list".to_owned(),
            mib(a.after_list.private_kib),
            mib(b.after_list.private_kib),
            ratio(
                a.after_list.private_kib as f64,
                b.after_list.private_kib as f64,
            ),
        ),
    ];
    for (what, x, y, r) in rows {
        println!("| {what} | {x} | {y} | {r} |");
    }
}
