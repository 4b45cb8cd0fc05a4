//! `aai-bench desktop`: the desktop toolsets on a real X server (Xvfb 1920×1080, openbox, the
//! AT-SPI bus and the tests' GTK app), driven over stdio like a client would, and the spec's
//! headline claim measured: one task — press the app's OK button and read its status — done
//! through the app's own interface (an aai.json D-Bus tool) and through screenshot + locate +
//! click + OCR, with the time and the tokens each way sends to the model.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aai_test_support::TestBus;
use serde_json::{Value, json};

use crate::{Gateway, ms};

/// Programs that end with the bench.
pub(crate) struct Children(pub(crate) Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in self.0.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn wait(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo")
        .to_path_buf()
}

pub(crate) fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

pub(crate) fn row(what: &str, samples: &[Duration]) {
    println!(
        "| {what} (n={}) | p50 {} · p95 {} |",
        samples.len(),
        ms(percentile(samples, 0.5)),
        ms(percentile(samples, 0.95))
    );
}

/// Text tokens as OpenAI's cl100k counts them; images as Anthropic documents it for Claude
/// (width × height / 750).
pub(crate) struct Tokens {
    pub(crate) bpe: tiktoken_rs::CoreBPE,
}

impl Tokens {
    pub(crate) fn new() -> Self {
        Self {
            bpe: tiktoken_rs::cl100k_base().expect("cl100k"),
        }
    }

    pub(crate) fn text(&self, text: &str) -> usize {
        self.bpe.encode_with_special_tokens(text).len()
    }

    /// The tokens one tool result costs the model: its text blocks and its images.
    pub(crate) fn result(&self, reply: &Value) -> usize {
        let mut total = 0;
        for block in reply["result"]["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => total += self.text(block["text"].as_str().unwrap_or_default()),
                Some("image") => {
                    let meta = &reply["result"]["structuredContent"];
                    let (w, h) = (
                        meta["width"].as_u64().unwrap_or(0),
                        meta["height"].as_u64().unwrap_or(0),
                    );
                    total += (w * h / 750) as usize;
                }
                _ => {}
            }
        }
        total
    }
}

pub(crate) fn exec(gateway: &mut Gateway, app: &str, tool: &str, args: Value) -> Value {
    let reply = gateway.request(
        "tools/call",
        json!({"name": "aai_exec", "arguments": {"app": app, "tool": tool, "args": args}}),
    );
    assert_eq!(
        reply["result"]["isError"],
        json!(false),
        "{app}:{tool}: {reply}"
    );
    reply
}

/// A desktop of the bench's own: Xvfb at `size` on a free display, openbox, a session bus
/// with the AT-SPI bus. What is started ends with the returned children.
pub(crate) fn start_desktop(size: &str, needs: &[&str]) -> (String, TestBus, Children) {
    for tool in ["Xvfb", "openbox"].iter().chain(needs) {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            "{tool} is missing: run scripts/test.sh first, which installs it"
        );
    }
    let number = (400..500)
        .find(|n| !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists())
        .expect("a free display");
    let display = format!(":{number}");
    let bus = TestBus::start();
    let mut children = Children(Vec::new());
    children.0.push(
        Command::new("Xvfb")
            .args([
                &display,
                "-screen",
                "0",
                size,
                "-nolisten",
                "tcp",
                "-noreset",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb"),
    );
    wait("Xvfb starts", || {
        Path::new(&format!("/tmp/.X11-unix/X{number}")).exists()
    });
    children.0.push(spawn_on(&display, &bus, "openbox", &[]));
    children.0.push(spawn_on(
        &display,
        &bus,
        "/usr/libexec/at-spi-bus-launcher",
        &["--launch-immediately"],
    ));
    std::thread::sleep(Duration::from_millis(500));
    (display, bus, children)
}

/// `program` on the bench's desktop, its output dropped.
pub(crate) fn spawn_on(display: &str, bus: &TestBus, program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .env("DISPLAY", display)
        .env("DBUS_SESSION_BUS_ADDRESS", bus.address())
        .env_remove("NO_AT_BRIDGE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

pub fn run() {
    let (display, bus, mut children) =
        start_desktop("1920x1080x24", &["tesseract", "/usr/bin/python3"]);
    let spawn = |program: &str, args: &[&str]| spawn_on(&display, &bus, program, args);
    let app = repo().join("tests/desktop/gtk_app.py");
    children.0.push(spawn(
        "/usr/bin/python3",
        &[app.to_str().unwrap_or_default(), "AAI Test App"],
    ));
    std::thread::sleep(Duration::from_millis(1500));

    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        home.path().join("config.json"),
        json!({"policy": {"default_profile": "p", "profiles": {"p": {"preset": "full_auto"}}}})
            .to_string(),
    )
    .expect("config");
    let folder = home.path().join("org.aai.testapp");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::copy(
        repo().join("tests/desktop/org.aai.testapp.aai.json"),
        folder.join("aai.json"),
    )
    .expect("descriptor");
    let mut gateway = Gateway::spawn_with(home.path(), Some(&bus), &[("DISPLAY", &display)]);
    gateway.initialize();
    gateway.request("tools/list", json!({}));

    println!(
        "| desktop measurement (Xvfb 1920×1080, release build, through MCP with gate and audit) | result |"
    );
    println!("|---|---|");
    let timed = |gateway: &mut Gateway, n: usize, app: &str, tool: &str, args: Value| {
        (0..n)
            .map(|_| {
                let started = Instant::now();
                exec(gateway, app, tool, args.clone());
                started.elapsed()
            })
            .collect::<Vec<_>>()
    };
    let shots = timed(
        &mut gateway,
        40,
        "local.screen",
        "screenshot",
        json!({"format": "jpeg"}),
    );
    row(
        "screenshot 1920×1080 → 1568×882 JPEG q80, whole call",
        &shots,
    );
    let png = timed(
        &mut gateway,
        20,
        "local.screen",
        "screenshot",
        json!({"format": "png"}),
    );
    row("screenshot 1920×1080 → 1568×882 PNG, whole call", &png);
    let clicks = timed(
        &mut gateway,
        100,
        "local.input",
        "left_click",
        json!({"x": 1400, "y": 700}),
    );
    row("left_click round trip (XTEST, synced)", &clicks);
    let list = timed(
        &mut gateway,
        50,
        "local.apps",
        "app_list",
        json!({"include_windows": true}),
    );
    row("app_list with windows", &list);
    let locate = timed(
        &mut gateway,
        30,
        "local.screen",
        "element_locate",
        json!({"description": "OK button"}),
    );
    row("element_locate \"OK button\" through AT-SPI", &locate);
    let ocr = timed(
        &mut gateway,
        10,
        "local.screen",
        "screen_ocr",
        json!({"region": {"x": 0, "y": 0, "width": 800, "height": 600}}),
    );
    row("screen_ocr of an 800×600 region (Tesseract)", &ocr);

    // The same task both ways.
    let tokens = Tokens::new();
    let mut native_ms = Vec::new();
    let mut native_tokens = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let guide = gateway.request(
            "tools/call",
            json!({"name": "app_org_aai_testapp", "arguments": {}}),
        );
        let press = exec(&mut gateway, "org.aai.testapp", "press", json!({}));
        let status = exec(&mut gateway, "org.aai.testapp", "status", json!({}));
        native_ms.push(started.elapsed());
        assert!(status.to_string().contains("Status: clicked"), "{status}");
        native_tokens = tokens.result(&guide) + tokens.result(&press) + tokens.result(&status);
    }
    let mut vision_ms = Vec::new();
    let mut vision_tokens = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let guides: usize = ["app_local_screen", "app_local_input"]
            .iter()
            .map(|g| {
                tokens.result(&gateway.request("tools/call", json!({"name": g, "arguments": {}})))
            })
            .sum();
        let look = exec(&mut gateway, "local.screen", "screenshot", json!({}));
        let found = exec(
            &mut gateway,
            "local.screen",
            "element_locate",
            json!({"description": "OK button"}),
        );
        let center = found["result"]["structuredContent"]["elements"][0]["center"].clone();
        let click = exec(&mut gateway, "local.input", "left_click", center);
        let after = exec(
            &mut gateway,
            "local.screen",
            "screenshot",
            json!({"settle_ms": 1000}),
        );
        let read = exec(
            &mut gateway,
            "local.screen",
            "screen_ocr",
            json!({"region": {"x": 0, "y": 0, "width": 700, "height": 400}}),
        );
        vision_ms.push(started.elapsed());
        assert!(read.to_string().contains("Status: clicked"), "{read}");
        vision_tokens = guides
            + [&look, &found, &click, &after, &read]
                .iter()
                .map(|r| tokens.result(r))
                .sum::<usize>();
    }
    let (native, vision) = (percentile(&native_ms, 0.5), percentile(&vision_ms, 0.5));
    println!(
        "| task \"press OK, read the status\" through the app's aai.json D-Bus tools (guide + 2 calls, median of 5) | {} · {native_tokens} tokens |",
        ms(native)
    );
    println!(
        "| the same task through screenshot → element_locate → left_click → settled screenshot → OCR (+ 2 guides, median of 5) | {} · {vision_tokens} tokens |",
        ms(vision)
    );
    println!(
        "| native interface vs computer use | {:.0}× faster · {:.0}× fewer tokens |",
        vision.as_secs_f64() / native.as_secs_f64().max(1e-9),
        vision_tokens as f64 / native_tokens.max(1) as f64
    );
    drop(children);
}
