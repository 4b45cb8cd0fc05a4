//! `aai-bench a11y`: apps that publish nothing, made tools from their accessibility trees
//! (issue 39). On a desktop of its own (Xvfb 1280×800, openbox, the AT-SPI bus): how long
//! `describe a11y` takes for each of the suite's three apps and how many tokens each draft's
//! guide costs; then one task — clear galculator, add 7 and 8, read the sum — done 20 times
//! through the drafted tools and 20 times through the screen (screenshot, then for each key
//! element_locate and left_click, then OCR of the screen), with time, the tokens the agent
//! reads and how many runs read 15.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aai_test_support::TestBus;
use serde_json::{Value, json};

use crate::desktop::{Tokens, exec, percentile, spawn_on, start_desktop};
use crate::{Gateway, ms, release_dir};

const RUNS: usize = 20;

/// `describe a11y APP` with the bench's desktop; the draft, once the app's window is there.
fn describe(display: &str, bus: &TestBus, home: &Path, app: &str) -> (Value, Duration) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let started = Instant::now();
        let out = Command::new(release_dir().join("aai-gateway"))
            .args(["describe", "a11y", app])
            .env("DISPLAY", display)
            .env("DBUS_SESSION_BUS_ADDRESS", bus.address())
            .env("AAI_HOME", home)
            .output()
            .expect("describe");
        let took = started.elapsed();
        if out.status.success() {
            return (serde_json::from_slice(&out.stdout).expect("draft"), took);
        }
        assert!(
            Instant::now() < until,
            "no draft of {app}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn install(home: &Path, draft: &Value) {
    let folder = home.join(draft["appId"].as_str().expect("appId"));
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::write(folder.join("aai.json"), draft.to_string()).expect("write");
}

/// The text of a tool result's first text block.
fn text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .trim_matches('"')
        .to_owned()
}

pub fn run() {
    let (display, bus, mut children) = start_desktop(
        "1280x800x24",
        &["galculator", "mousepad", "yad", "tesseract"],
    );
    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        home.path().join("config.json"),
        json!({"policy": {"default_profile": "p", "profiles": {"p": {"preset": "full_auto"}}}})
            .to_string(),
    )
    .expect("config");
    let tokens = Tokens::new();

    println!(
        "| accessibility drafts (Xvfb 1280×800, the binaries in {}) | result |",
        release_dir().display()
    );
    println!("|---|---|");
    // Each app's draft: how long `describe a11y` takes (median of 5) and its guide's tokens.
    let apps: [(&str, &[&str]); 3] = [
        ("galculator", &[]),
        ("mousepad", &[]),
        (
            "yad",
            &[
                "--form",
                "--title=New contact",
                "--field=First name",
                "--field=Last name",
                "--field=Email",
            ],
        ),
    ];
    for (app, args) in apps {
        let mut process = spawn_on(&display, &bus, app, args);
        let (draft, _) = describe(&display, &bus, home.path(), app);
        let times: Vec<Duration> = (0..5)
            .map(|_| describe(&display, &bus, home.path(), app).1)
            .collect();
        install(home.path(), &draft);
        let mut gateway = Gateway::spawn_with(home.path(), Some(&bus), &[("DISPLAY", &display)]);
        gateway.initialize();
        let id = draft["appId"]
            .as_str()
            .unwrap_or_default()
            .replace('.', "_");
        let guide = gateway.request(
            "tools/call",
            json!({"name": format!("app_{id}"), "arguments": {}}),
        );
        let count = draft["platforms"]["linux"]["tools"]
            .as_array()
            .map_or(0, Vec::len);
        println!(
            "| `describe a11y {app}`: {count} tools, median of 5 | {} · guide {} tokens |",
            ms(percentile(&times, 0.5)),
            tokens.result(&guide)
        );
        if app == "galculator" {
            children.0.push(process);
        } else {
            let _ = process.kill();
            let _ = process.wait();
        }
    }

    let mut gateway = Gateway::spawn_with(home.path(), Some(&bus), &[("DISPLAY", &display)]);
    gateway.initialize();
    gateway.request("tools/list", json!({}));
    // Through the drafted tools: the guide once per run, five keys, one read.
    let (mut drafted_ms, mut drafted_tokens, mut drafted_ok) = (Vec::new(), Vec::new(), 0);
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut read = tokens.result(&gateway.request(
            "tools/call",
            json!({"name": "app_a11y_galculator", "arguments": {}}),
        ));
        for key in [
            "press_ac",
            "press_7",
            "press_plus",
            "press_8",
            "press_equals",
        ] {
            read += tokens.result(&exec(&mut gateway, "a11y.galculator", key, json!({})));
        }
        // A key's effect lands on the app's own loop: read until it shows, a few times at most.
        let mut shown = String::new();
        for _ in 0..10 {
            let reply = exec(&mut gateway, "a11y.galculator", "read_text", json!({}));
            read += tokens.result(&reply);
            shown = text(&reply);
            if shown == "15" {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        drafted_ms.push(started.elapsed());
        drafted_tokens.push(read);
        drafted_ok += usize::from(shown == "15");
    }
    // Through the screen: the two guides, a screenshot to see the app, then per key a locate
    // and a click, then OCR of the screen (where the window is placed is the window manager's
    // choice: a fixed region read only its menu bar).
    let (mut screen_ms, mut screen_tokens, mut screen_ok) = (Vec::new(), Vec::new(), 0);
    // Why the first failed run failed: a key not found, or what OCR read instead.
    let mut why: Option<String> = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut read: usize = ["app_local_screen", "app_local_input"]
            .iter()
            .map(|g| {
                tokens.result(&gateway.request("tools/call", json!({"name": g, "arguments": {}})))
            })
            .sum();
        read += tokens.result(&exec(&mut gateway, "local.screen", "screenshot", json!({})));
        let mut clicked = true;
        for key in ["AC button", "7 button", "+ button", "8 button", "= button"] {
            let found = exec(
                &mut gateway,
                "local.screen",
                "element_locate",
                json!({"description": key}),
            );
            read += tokens.result(&found);
            let center = found["result"]["structuredContent"]["elements"][0]["center"].clone();
            if center.is_null() {
                clicked = false;
                why.get_or_insert_with(|| format!("element_locate found no {key:?}"));
                break;
            }
            read += tokens.result(&exec(&mut gateway, "local.input", "left_click", center));
        }
        // As the drafted way reads again until the sum shows, so does this one (a few times).
        let mut seen = false;
        let mut last_read = Vec::new();
        for _ in 0..3 {
            let ocr = exec(&mut gateway, "local.screen", "screen_ocr", json!({}));
            read += tokens.result(&ocr);
            seen = ocr["result"]["structuredContent"]["blocks"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|b| b["text"].as_str().is_some_and(|t| t.trim() == "15"));
            if seen {
                break;
            }
            last_read = ocr["result"]["structuredContent"]["blocks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["text"].as_str().map(str::to_owned))
                .collect();
        }
        if clicked && !seen {
            why.get_or_insert_with(|| format!("OCR read {last_read:?}"));
        }
        screen_ms.push(started.elapsed());
        screen_tokens.push(read);
        screen_ok += usize::from(clicked && seen);
    }
    let median_tokens = |mut t: Vec<usize>| {
        t.sort_unstable();
        t[t.len() / 2]
    };
    println!(
        "| task \"AC, 7 + 8 =, read the sum\" through the drafted tools (guide + 5 presses + read), {RUNS} runs | p50 {} · p95 {} · {} tokens · {drafted_ok}/{RUNS} read 15 |",
        ms(percentile(&drafted_ms, 0.5)),
        ms(percentile(&drafted_ms, 0.95)),
        median_tokens(drafted_tokens.clone())
    );
    println!(
        "| the same through the screen (2 guides + screenshot + 5 × element_locate and left_click + OCR), {RUNS} runs | p50 {} · p95 {} · {} tokens · {screen_ok}/{RUNS} read 15 |",
        ms(percentile(&screen_ms, 0.5)),
        ms(percentile(&screen_ms, 0.95)),
        median_tokens(screen_tokens.clone())
    );
    if let Some(why) = why {
        println!("| the screen path's first failed run | {why} |");
    }
    drop(gateway);
    drop(children);
}
