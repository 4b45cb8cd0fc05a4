//! `aai-bench batch`: 100 REST calls as one parallel `aai_batch` against 100 separate
//! `aai_exec` calls, over stdio against the release binary. The API is a loopback HTTP server
//! that answers each request after 20 ms, as a real API's round trip would.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Gateway;

const STEPS: usize = 100;
const ROUNDS: usize = 5;
const API_LATENCY: Duration = Duration::from_millis(20);

/// A loopback API: every request is answered `{"ok": true}` after [`API_LATENCY`], each
/// connection on a thread of its own.
pub(crate) fn api() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut stream = stream;
                loop {
                    let mut line = String::new();
                    let mut length = 0usize;
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        if header == "\r\n" {
                            break;
                        }
                        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:")
                        {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
                        return;
                    }
                    std::thread::sleep(API_LATENCY);
                    let reply = r#"{"ok":true}"#;
                    // One write: a response in pieces would wait on Nagle and delayed ACKs.
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{reply}",
                        reply.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

pub(crate) fn home(base: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("home");
    let app = home.path().join("org.example.api");
    std::fs::create_dir_all(&app).expect("dir");
    std::fs::write(
        app.join("aai.json"),
        json!({
            "schema_version": "1.0", "appId": "org.example.api", "name": "Example API",
            "description": "A loopback API for the batch benchmark",
            "platforms": {"web": {"automation": "restapi", "base_url": base, "auth": {"type": "none"},
                "tools": [{"name": "get_item", "description": "Get an item", "readOnly": true, "endpoint": "/items/${id}",
                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}]}}
        })
        .to_string(),
    )
    .expect("descriptor");
    std::fs::write(
        home.path().join("config.json"),
        json!({"web": {"allow_http_loopback": true, "open_browser": false}}).to_string(),
    )
    .expect("config");
    home
}

fn step(i: usize) -> serde_json::Value {
    json!({"app": "org.example.api", "tool": "get_item", "args": {"id": i.to_string()}})
}

pub fn run() {
    let base = api();
    let home = home(&base);
    let mut client = Gateway::spawn(home.path(), None);
    client.initialize();
    let (mut batched, mut one_by_one) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let reply = client.request(
            "tools/call",
            json!({"name": "aai_batch", "arguments": {"parallel": true, "steps": (0..STEPS).map(step).collect::<Vec<_>>()}}),
        );
        batched.push(started.elapsed());
        assert_eq!(
            reply["result"]["structuredContent"]["ok"],
            json!(STEPS),
            "{reply}"
        );
        let started = Instant::now();
        for i in 0..STEPS {
            let reply = client.request(
                "tools/call",
                json!({"name": "aai_exec", "arguments": step(i)}),
            );
            assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        }
        one_by_one.push(started.elapsed());
    }
    batched.sort();
    one_by_one.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| {STEPS} REST calls (API answers in {} ms), median of {ROUNDS} | one parallel aai_batch: {:.0} ms · {STEPS} aai_exec calls in turn: {:.0} ms |",
        API_LATENCY.as_millis(),
        ms(batched[ROUNDS / 2]),
        ms(one_by_one[ROUNDS / 2]),
    );
}
