//! `aai-bench schedule`: how punctually the daemon's scheduler wakes with 1,000 tasks. Each
//! task runs a one-step workflow (a REST call to a loopback API that answers in 20 ms) every
//! 20 seconds at its own second, so about 50 runs fall due every second. Lateness is read
//! from `data.db`: when each occurrence was claimed and when its run started, against when
//! it was due.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::release_dir;
use crate::stop::wait_for;

const TASKS: usize = 1_000;
const WATCH: Duration = Duration::from_secs(25);

fn percentile(sorted: &[i64], p: f64) -> i64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

pub fn run() {
    let base = crate::batch::api();
    let home = crate::batch::home(&base);
    let gateway = release_dir().join("aai-gateway");
    std::fs::write(
        home.path().join("config.json"),
        json!({"web": {"allow_http_loopback": true, "open_browser": false},
               "scheduler": {"max_concurrent_runs": 64}})
        .to_string(),
    )
    .expect("config");
    std::fs::create_dir_all(home.path().join("workflows")).expect("workflows");
    std::fs::write(
        home.path().join("workflows/ping.json"),
        json!({"description": "one REST call", "steps": [
            {"app": "org.example.api", "tool": "get_item", "args": {"id": {"$run": "/task"}}}]})
        .to_string(),
    )
    .expect("workflow");
    let added = Instant::now();
    for i in 0..TASKS {
        let s = i % 20;
        let cron = format!("{s},{},{} * * * * *", s + 20, s + 40);
        let out = Command::new(&gateway)
            .args([
                "schedule",
                "add",
                &format!("t{i}"),
                "--cron",
                &cron,
                "--time-zone",
                "UTC",
            ])
            .args([
                "--workflow",
                "ping",
                "--grant",
                "org.example.api:get_item",
                "--overlap",
                "allow",
            ])
            .env("AAI_HOME", home.path())
            .env("AAI_LOG", "error")
            .stdout(Stdio::null())
            .output()
            .expect("schedule add");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let adding = added.elapsed();
    let mut daemon = Command::new(&gateway)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("AAI_HOME", home.path())
        .env("AAI_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let info = home.path().join("run/serve.json");
    wait_for("serve.json", || info.exists());
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
        + 2_000;
    std::thread::sleep(WATCH);
    let _ = daemon.kill();
    let _ = daemon.wait();
    let db = rusqlite::Connection::open(home.path().join("data.db")).expect("data.db");
    let rows: Vec<(i64, i64, Option<i64>, String)> = db
        .prepare("SELECT scheduled_ms, claimed_ms, started_ms, state FROM schedule_runs WHERE kind = 'on_time' AND scheduled_ms >= ?1")
        .expect("query")
        .query_map([since], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("rows")
        .map(|r| r.expect("row"))
        .collect();
    let mut woke: Vec<i64> = rows
        .iter()
        .map(|(due, claimed, _, _)| claimed - due)
        .collect();
    let mut started: Vec<i64> = rows
        .iter()
        .filter_map(|(due, _, started, _)| started.map(|s| s - due))
        .collect();
    woke.sort_unstable();
    started.sort_unstable();
    let succeeded = rows.iter().filter(|r| r.3 == "succeeded").count();
    println!("| measurement ({TASKS} tasks, ~50 runs due every second) | result |");
    println!("|---|---|");
    println!(
        "| adding {TASKS} tasks with `schedule add` (one process each) | {:.1} s ({:.1} ms each) |",
        adding.as_secs_f64(),
        adding.as_secs_f64() * 1000.0 / TASKS as f64
    );
    println!(
        "| occurrences due in {} s / runs succeeded | {} / {succeeded} |",
        WATCH.as_secs() - 2,
        rows.len()
    );
    for (what, samples) in [("claimed (wake-up)", &woke), ("run started", &started)] {
        assert!(!samples.is_empty(), "no runs were due");
        println!(
            "| lateness, {what}: p50 / p99 / max | {} / {} / {} ms |",
            percentile(samples, 0.5),
            percentile(samples, 0.99),
            samples[samples.len() - 1]
        );
    }
}
