//! `aai-bench store`: the app store at 10,000 published apps on a real PostgreSQL with two
//! `aai-registry` server processes: publish throughput (8 publishers at once), search latency
//! (one client), search under 50 concurrent clients spread over both servers, and the
//! gateway's install-hint lookup in its local index.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::release_dir;

const APPS: usize = 10_000;

const WORDS: &[&str] = &[
    "mail", "calendar", "music", "invoice", "photo", "notes", "tasks", "chat", "video", "maps",
    "weather", "bank", "budget", "travel", "recipe", "fitness", "code", "deploy", "ticket", "crm",
    "contacts", "drive", "backup", "scanner", "printer", "reader", "podcast", "radio", "news",
    "stocks",
];

fn request(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
    tcp.set_nodelay(true).ok();
    write!(
        tcp,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut reply = String::new();
    let _ = tcp.read_to_string(&mut reply);
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

struct Server(std::process::Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(url: &str) -> Server {
    let mut child = Command::new(release_dir().join("aai-registry"))
        .args([
            "serve",
            "--database-url",
            url,
            "--listen",
            "127.0.0.1:0",
            "--max-connections",
            "16",
        ])
        .env("AAI_REGISTRY_LOG", "error")
        .stderr(Stdio::piped())
        .spawn()
        .expect("aai-registry serve");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server says where it serves")
            .expect("line");
        if let Some(addr) = line.strip_prefix("aai-registry: serving on http://") {
            break addr.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Server(child, addr)
}

/// The query shapes measured one by one.
const SHAPES: [&str; 7] = [
    "exact word (`mail`)",
    "typo, a dropped letter (`mil`)",
    "two words (`mail calendar`)",
    "app number + word (`app37 mail`)",
    "2 letters (`ma`)",
    "long, 200 characters of words",
    "an app id (`org.bench.app123`)",
];

/// The `i`th query of shape `shape` (an index into [`SHAPES`]).
fn shaped(shape: usize, i: usize) -> String {
    let a = WORDS[i % WORDS.len()];
    let b = WORDS[(i * 7 + 3) % WORDS.len()];
    match shape {
        0 => a.to_owned(),
        1 => format!("{}{}", &a[..1], &a[2..]),
        2 => format!("{a} {b}"),
        3 => format!("app{} {a}", i % 100),
        4 => a[..2].to_owned(),
        5 => {
            let mut q = String::new();
            let mut n = i;
            while q.len() < 200 {
                q.push_str(WORDS[n % WORDS.len()]);
                q.push(' ');
                n = (n * 7 + 3) % WORDS.len();
            }
            q[..200].trim().to_owned()
        }
        _ => format!("org.bench.app{}", (i * 37) % APPS),
    }
}

fn search_words(i: usize) -> String {
    let a = WORDS[i % WORDS.len()];
    let b = WORDS[(i * 7 + 3) % WORDS.len()];
    match i % 4 {
        0 => a.to_owned(),
        1 => format!("{a} {b}"),
        // A dropped letter.
        2 => format!("{}{}", &a[..1], &a[2..]),
        _ => format!("app{} {a}", i % 100),
    }
}

pub fn run() {
    let pg = aai_test_support::postgres::postgres();
    let url = pg.database();
    let a = serve(&url);
    let b = serve(&url);
    let (secret, public) = aai_registry::keys::generate();
    let added = Command::new(release_dir().join("aai-registry"))
        .args([
            "publisher",
            "add",
            "bench",
            "--namespace",
            "org.bench",
            "--key",
            &public,
            "--verify",
            "none",
            "--database-url",
            &url,
        ])
        .output()
        .expect("publisher add");
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );

    // Publish 10,000 apps, 8 at a time, alternating servers.
    let started = Instant::now();
    std::thread::scope(|scope| {
        for worker in 0..8 {
            let (secret, a, b) = (&secret, &a.1, &b.1);
            scope.spawn(move || {
                for i in (worker..APPS).step_by(8) {
                    let (w1, w2) = (WORDS[i % WORDS.len()], WORDS[(i / WORDS.len()) % WORDS.len()]);
                    let text = json!({
                        "schema_version": "1.0", "appId": format!("org.bench.app{i}"),
                        "name": format!("App{i} {w1}"), "version": "1.0.0", "aliases": [format!("{w1} {w2}")],
                        "description": format!("Manage your {w1} and {w2} from one place, number {i}"),
                        "platforms": {"web": {"automation": "restapi", "base_url": "https://api.example.com", "auth": {"type": "none"},
                            "tools": [{"name": format!("list_{w1}"), "description": "List", "endpoint": "/list"},
                                      {"name": format!("send_{w2}"), "description": "Send", "endpoint": "/send", "method": "POST"}]}}
                    })
                    .to_string();
                    let signature = aai_registry::keys::sign(secret, text.as_bytes()).expect("sign");
                    let body = json!({"publisher": "bench", "descriptor": text, "signature": signature}).to_string();
                    let addr = if i % 2 == 0 { a } else { b };
                    let (status, reply) = request(addr, "POST", "/api/v1/apps", &body);
                    assert_eq!(status, 201, "{reply}");
                }
            });
        }
    });
    let publishing = started.elapsed();

    // Warm up, then one client.
    for i in 0..50 {
        request(
            &a.1,
            "GET",
            &format!("/api/v1/search?q={}", search_words(i).replace(' ', "+")),
            "",
        );
    }
    let mut single = Vec::new();
    for i in 0..300 {
        let path = format!("/api/v1/search?q={}", search_words(i).replace(' ', "+"));
        let t = Instant::now();
        let (status, body) = request(&a.1, "GET", &path, "");
        single.push(t.elapsed());
        assert_eq!(status, 200, "{body}");
    }
    // Each query shape alone, 200 searches each (enough for every pooled connection to pass
    // PostgreSQL's switch to a generic plan after five executions of a statement).
    let mut by_shape = Vec::new();
    for (shape, name) in SHAPES.iter().enumerate() {
        let mut samples = Vec::new();
        for i in 0..200 {
            let path = format!("/api/v1/search?q={}", shaped(shape, i).replace(' ', "+"));
            let t = Instant::now();
            let (status, body) = request(&a.1, "GET", &path, "");
            samples.push(t.elapsed());
            assert_eq!(status, 200, "{body}");
        }
        by_shape.push((
            name,
            percentile(&mut samples, 0.5),
            percentile(&mut samples, 0.95),
        ));
    }

    // 50 clients at once, 40 searches each, over both servers.
    let began = Instant::now();
    let mut concurrent: Vec<Duration> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..50)
            .map(|client| {
                let (a, b) = (&a.1, &b.1);
                scope.spawn(move || {
                    (0..40)
                        .map(|n| {
                            let i = client * 40 + n;
                            let path =
                                format!("/api/v1/search?q={}", search_words(i).replace(' ', "+"));
                            let addr = if i % 2 == 0 { a } else { b };
                            let t = Instant::now();
                            let (status, _) = request(addr, "GET", &path, "");
                            assert_eq!(status, 200);
                            t.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client"))
            .collect()
    });
    let wall = began.elapsed();

    // The gateway's install hint: a lookup in its local index of 10,000 apps.
    let index_dir = tempfile::tempdir().expect("home");
    std::fs::create_dir_all(index_dir.path().join("store")).expect("dir");
    let (_, listed) = request(&a.1, "GET", "/api/v1/apps", "");
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("list");
    std::fs::write(
        index_dir.path().join("store/index.json"),
        listed["apps"].to_string(),
    )
    .expect("index");
    let index = aai_engine::appstore::Index::load(index_dir.path());
    let mut lookups = Vec::new();
    for i in 0..1000 {
        let name = if i % 2 == 0 {
            format!("org.bench.app{}", (i * 37) % APPS)
        } else {
            "org.nowhere.missing".to_owned()
        };
        let t = Instant::now();
        let found = index.find(&name);
        lookups.push(t.elapsed());
        assert_eq!(found.is_some(), i % 2 == 0);
    }

    let total = concurrent.len();
    println!("| measurement ({APPS} apps, PostgreSQL 15, 2 aai-registry processes) | result |");
    println!("|---|---|");
    println!(
        "| publish {APPS} signed descriptors, 8 publishers at once | {:.1} s ({:.0} apps/s) |",
        publishing.as_secs_f64(),
        APPS as f64 / publishing.as_secs_f64()
    );
    println!(
        "| search, one client: p50 / p95 / p99 | {} / {} / {} |",
        ms(percentile(&mut single, 0.5)),
        ms(percentile(&mut single, 0.95)),
        ms(percentile(&mut single, 0.99))
    );
    for (name, p50, p95) in by_shape {
        println!(
            "| search, one client, {name}: p50 / p95 | {} / {} |",
            ms(p50),
            ms(p95)
        );
    }
    println!(
        "| search, 50 concurrent clients over both servers: p50 / p95 / p99 ({total} searches, {:.0}/s) | {} / {} / {} |",
        total as f64 / wall.as_secs_f64(),
        ms(percentile(&mut concurrent, 0.5)),
        ms(percentile(&mut concurrent, 0.95)),
        ms(percentile(&mut concurrent, 0.99))
    );
    println!(
        "| install-hint lookup in the gateway's index of {APPS}: p50 / p99 | {:.3} ms / {:.3} ms |",
        percentile(&mut lookups, 0.5).as_secs_f64() * 1000.0,
        percentile(&mut lookups, 0.99).as_secs_f64() * 1000.0
    );
}
