//! `aai-bench dashboard`: how long a call takes to reach the dashboard's live log. A daemon, a
//! dashboard session logged in with a one-time link, its server-sent event stream open, and a
//! stdio gateway (forwarding to the daemon, as a client's would) making calls; the clock runs
//! from a call's request (and from its answer) to the event carrying its `success` row.

use std::io::{BufRead as _, BufReader, Write as _};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Gateway;
use crate::stop::{Daemon, request};

const ROUNDS: usize = 50;

/// Logs in with a one-time link; the session cookie.
fn log_in(daemon: &Daemon) -> String {
    let link: serde_json::Value =
        serde_json::from_str(&daemon.control("/control/login")).expect("login link");
    let path = link["url"]
        .as_str()
        .expect("url")
        .split_once(&daemon.addr)
        .expect("our address")
        .1
        .to_owned();
    let reply = request(&daemon.addr, &format!("GET {path} HTTP/1.1"), "");
    reply
        .lines()
        .find_map(|line| line.strip_prefix("set-cookie: "))
        .and_then(|cookie| cookie.split(';').next())
        .expect("a session cookie")
        .to_owned()
}

/// Opens the event stream; each `success` row's arguments arrive on the channel with the time
/// they were read.
fn listen(daemon: &Daemon, cookie: &str) -> mpsc::Receiver<(String, Instant)> {
    let mut tcp = std::net::TcpStream::connect(&daemon.addr).expect("connect");
    write!(
        tcp,
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n",
        daemon.addr
    )
    .expect("write");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(tcp).lines() {
            let Ok(line) = line else { break };
            let at = Instant::now();
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let Ok(event) = serde_json::from_str::<serde_json::Value>(data) else {
                continue;
            };
            if event["kind"] == "row" && event["row"]["result"] == "success" {
                let args = event["row"]["args"].as_str().unwrap_or_default().to_owned();
                if tx.send((args, at)).is_err() {
                    break;
                }
            }
        }
    });
    rx
}

pub fn run() {
    let daemon = Daemon::start();
    let cookie = log_in(&daemon);
    let rows = listen(&daemon, &cookie);
    let mut client = Gateway::spawn(daemon.home.path(), None);
    client.initialize();
    let (mut from_request, mut from_answer) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS + 5 {
        let marker = format!("live-{round}");
        let started = Instant::now();
        let reply = client.request(
            "tools/call",
            json!({"name": "aai_exec", "arguments": {"app": "local.terminal", "tool": "bash_execute", "args": {"command": format!("echo {marker}")}}}),
        );
        let answered = Instant::now();
        assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        let shown = loop {
            let (args, at) = rows
                .recv_timeout(Duration::from_secs(10))
                .expect("the row on the live feed");
            if args.contains(&marker) {
                break at;
            }
        };
        if round >= 5 {
            // The first rounds warm up the terminal session.
            from_request.push(shown.duration_since(started));
            from_answer.push(
                shown
                    .checked_duration_since(answered)
                    .map_or(-(answered.duration_since(shown).as_secs_f64()), |d| {
                        d.as_secs_f64()
                    }),
            );
        }
    }
    from_request.sort();
    from_answer.sort_by(f64::total_cmp);
    let at = |q: f64| ((ROUNDS - 1) as f64 * q).round() as usize;
    println!(
        "| call → its row on the dashboard's live feed, n={ROUNDS} | from the request: p50 {:.1} ms · p99 {:.1} ms; from the call's answer: p50 {:+.1} ms · p99 {:+.1} ms |",
        from_request[at(0.5)].as_secs_f64() * 1000.0,
        from_request[at(0.99)].as_secs_f64() * 1000.0,
        from_answer[at(0.5)] * 1000.0,
        from_answer[at(0.99)] * 1000.0,
    );
}
