//! `aai-bench browser`: `local.browser` side by side with Playwright MCP (`@playwright/mcp`
//! from npm, driving the same Debian Chromium) on three real-world-shaped local pages — a long
//! article, a data table, a form: navigate + snapshot latency, and the snapshot's size in
//! o200k tokens (what the model pays for each look at the page).

use std::process::Command;
use std::time::{Duration, Instant};

use aai_test_support::http::{Response, TestServer};
use serde_json::{Value, json};

use crate::desktop::{percentile, repo, row};
use crate::{Gateway, ms};

const ROUNDS: usize = 15;

fn html(title: &str, body: &str) -> Response {
    Response::new(
        200,
        format!("<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title></head><body>{body}</body></html>"),
    )
    .header("content-type", "text/html; charset=utf-8")
}

fn nav(links: usize, prefix: &str) -> String {
    (0..links)
        .map(|i| format!("<li><a href=\"/{prefix}/{i}\">{prefix} section {i}</a></li>"))
        .collect()
}

/// A news article: site navigation, 40 paragraphs with inline links, a sidebar, a footer.
fn article() -> Response {
    let words = "The committee met on Tuesday to weigh the proposal, which would extend the rail line past the river and add four stations over the next decade, a plan that supporters call overdue and critics call unaffordable.";
    let paragraphs: String = (0..40)
        .map(|i| format!("<p>{words} In paragraph {i}, residents <a href=\"/story/{i}\">quoted here</a> raised questions about noise, cost and timing. {words}</p>"))
        .collect();
    html(
        "City weighs rail extension",
        &format!(
            "<header><a href=\"/\">Daily Planet</a><nav><ul>{}</ul></nav><form role=search><input type=search aria-label=Search><button>Search</button></form></header>
             <main><article><h1>City weighs rail extension past the river</h1><p>By A. Reporter · 24 November 2026</p>{paragraphs}</article>
             <aside><h2>Most read</h2><ul>{}</ul></aside></main><footer><ul>{}</ul><p>© 2026 Daily Planet</p></footer>",
            nav(10, "news"),
            nav(15, "popular"),
            nav(10, "about")
        ),
    )
}

/// A data table: 100 rows of 6 columns with sorting buttons, filters and pagination.
fn table() -> Response {
    let rows: String = (0..100)
        .map(|i| format!("<tr><td>ORD-{:05}</td><td>Customer {i}</td><td>2026-11-{:02}</td><td>{}</td><td>${}.{:02}</td><td><a href=\"/order/{i}\">View</a></td></tr>", 10_000 + i, i % 28 + 1, ["Paid", "Shipped", "Refunded", "Pending"][i % 4], 20 + i * 7 % 400, i % 100))
        .collect();
    html(
        "Orders",
        &format!(
            "<h1>Orders</h1><label>Filter <input id=q placeholder=\"Search orders\"></label><select aria-label=Status><option>All</option><option>Paid</option><option>Shipped</option></select>
             <table><thead><tr><th><button>Order</button></th><th><button>Customer</button></th><th><button>Date</button></th><th>Status</th><th>Total</th><th>Actions</th></tr></thead><tbody>{rows}</tbody></table>
             <nav aria-label=Pagination>{}</nav>",
            (1..=10).map(|i| format!("<a href=\"/orders?page={i}\">{i}</a> ")).collect::<String>()
        ),
    )
}

/// A checkout form: contact, address, a country list, shipping choices, payment, consent.
fn form() -> Response {
    let countries: String = [
        "Argentina",
        "Australia",
        "Austria",
        "Belgium",
        "Brazil",
        "Canada",
        "Chile",
        "China",
        "Denmark",
        "Finland",
        "France",
        "Germany",
        "Greece",
        "India",
        "Ireland",
        "Italy",
        "Japan",
        "Mexico",
        "Netherlands",
        "New Zealand",
        "Norway",
        "Poland",
        "Portugal",
        "Spain",
        "Sweden",
        "Switzerland",
        "United Kingdom",
        "United States",
    ]
    .iter()
    .map(|c| format!("<option>{c}</option>"))
    .collect();
    let field = |label: &str, name: &str, kind: &str| {
        format!(
            "<div class=row><label for={name}>{label}</label><input id={name} name={name} type={kind} required><small>Required</small></div>"
        )
    };
    html(
        "Checkout",
        &format!(
            "<h1>Checkout</h1><form><fieldset><legend>Contact</legend>{}{}{}</fieldset>
             <fieldset><legend>Shipping address</legend>{}{}{}{}<div class=row><label for=country>Country</label><select id=country>{countries}</select></div></fieldset>
             <fieldset><legend>Delivery</legend><label><input type=radio name=ship checked> Standard (3–5 days)</label><label><input type=radio name=ship> Express (1–2 days)</label><label><input type=radio name=ship> Pick up in store</label></fieldset>
             <fieldset><legend>Payment</legend>{}{}{}</fieldset>
             <label><input type=checkbox> Save my details</label><label><input type=checkbox required> I accept the terms</label>
             <textarea aria-label=\"Order notes\"></textarea><button type=submit>Place order</button></form>",
            field("First name", "first", "text"),
            field("Last name", "last", "text"),
            field("Email", "email", "email"),
            field("Street", "street", "text"),
            field("City", "city", "text"),
            field("Postcode", "zip", "text"),
            field("Phone", "phone", "tel"),
            field("Card number", "cc", "text"),
            field("Expiry", "exp", "text"),
            field("CVC", "cvc", "text"),
        ),
    )
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn call(server: &mut Gateway, name: &str, arguments: Value) -> Value {
    let reply = server.request("tools/call", json!({"name": name, "arguments": arguments}));
    assert!(
        reply["result"]["isError"] != json!(true) && reply.get("error").is_none(),
        "{name}: {reply}"
    );
    reply
}

/// Playwright MCP from npm, installed once under `target/bench-node`.
fn playwright() -> Command {
    let dir = repo().join("target/bench-node");
    let cli = dir.join("node_modules/@playwright/mcp/cli.js");
    if !cli.exists() {
        std::fs::create_dir_all(&dir).expect("dir");
        let status = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "@playwright/mcp@0.0.83",
            ])
            .current_dir(&dir)
            .status()
            .expect("npm");
        assert!(status.success(), "npm install @playwright/mcp");
    }
    let mut command = Command::new("node");
    // Playwright MCP writes its logs and snapshots under its working directory.
    command.current_dir(&dir);
    command.arg(cli).args([
        "--headless",
        "--isolated",
        "--no-sandbox",
        "--executable-path",
        "/usr/bin/chromium",
    ]);
    command
}

pub fn run() {
    let server = TestServer::http(|request| match request.path() {
        "/article" => article(),
        "/table" => table(),
        "/form" => form(),
        _ => Response::new(404, "no"),
    });
    let bpe = tiktoken_rs::o200k_base().expect("o200k");
    let tokens = |t: &str| bpe.encode_with_special_tokens(t).len();
    let home = tempfile::tempdir().expect("home");
    let mut ours = Gateway::spawn(home.path(), None);
    ours.initialize();
    let mut theirs = Gateway::from_command(playwright());
    theirs.initialize();
    println!(
        "| page | aai-gateway navigate | aai-gateway navigate+snapshot | Playwright MCP navigate (returns a snapshot) | Playwright MCP navigate+snapshot | snapshot tokens (o200k): aai-gateway / Playwright MCP |"
    );
    println!("|---|---|---|---|---|---|");
    for page in ["article", "table", "form"] {
        let url = format!("{}/{page}", server.url());
        let exec =
            |tool: &str, args: Value| json!({"app": "local.browser", "tool": tool, "args": args});
        // Warm both browsers on this page first.
        call(
            &mut ours,
            "aai_exec",
            exec("browser_navigate", json!({"url": url})),
        );
        call(&mut theirs, "browser_navigate", json!({"url": url}));
        let (mut a_nav, mut a, mut p_nav, mut p_both) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut our_snap, mut their_snap) = (String::new(), String::new());
        // Rotated order: neither server always runs first.
        for round in 0..ROUNDS {
            for turn in 0..2 {
                if (round + turn) % 2 == 0 {
                    let started = Instant::now();
                    call(
                        &mut ours,
                        "aai_exec",
                        exec("browser_navigate", json!({"url": url})),
                    );
                    a_nav.push(started.elapsed());
                    let snap = call(&mut ours, "aai_exec", exec("browser_snapshot", json!({})));
                    a.push(started.elapsed());
                    our_snap = text_of(&snap);
                } else {
                    let started = Instant::now();
                    call(&mut theirs, "browser_navigate", json!({"url": url}));
                    p_nav.push(started.elapsed());
                    let snap = call(&mut theirs, "browser_snapshot", json!({}));
                    p_both.push(started.elapsed());
                    their_snap = text_of(&snap);
                }
            }
        }
        let stat = |s: &[Duration]| {
            format!(
                "p50 {} · p95 {}",
                ms(percentile(s, 0.5)),
                ms(percentile(s, 0.95))
            )
        };
        println!(
            "| {page} | {} | {} | {} | {} | {} / {} |",
            stat(&a_nav),
            stat(&a),
            stat(&p_nav),
            stat(&p_both),
            tokens(&our_snap),
            tokens(&their_snap)
        );
        if std::env::var_os("AAI_BENCH_SHOW").is_some() {
            eprintln!("--- aai-gateway {page}\n{our_snap}\n--- playwright {page}\n{their_snap}");
        }
    }
    let _ = row;
}
