//! The desktop toolsets on a real X server: one Xvfb per test binary with a 3840×1080 screen
//! split into two monitors (RandR 1.5), and a real EWMH window manager (openbox). Tests that
//! drive the pointer, keyboard or focus take one lock, as an agent's desktop calls would.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_desktop::desktop::x11::X11;
use aai_executor::{Executor, Invocation};
use aai_toolset::{LocalConfig, Setup, Toolsets};
use serde_json::{Map, Value, json};

struct Desk {
    display: String,
    _children: Vec<Child>,
    /// The connection that defined the two monitors: the server drops a client's monitors
    /// when it disconnects, so it stays open.
    _monitors: x11rb::rust_connection::RustConnection,
}

static DESK: OnceLock<Desk> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

fn wait(what: &str, seconds: u64, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < until, "{what} within {seconds} s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `program` so that it ends when this test process does (a watchdog shell), even
/// though the shared desktop is never dropped.
fn watched(display: &str, program: &[&str]) -> Child {
    let me = std::process::id();
    let quoted: Vec<String> = program.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "{} & child=$!; while kill -0 {me} 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 0.3; done; kill $child 2>/dev/null",
        quoted.join(" ")
    );
    Command::new("sh")
        .args(["-c", &script])
        .env("DISPLAY", display)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program:?}: {e}"))
}

fn desk() -> &'static Desk {
    DESK.get_or_init(|| {
        for tool in ["Xvfb", "openbox", "xterm"] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success()),
                "{tool} is missing: run scripts/test.sh, which installs xvfb openbox xterm"
            );
        }
        let number = (300..600)
            .map(|n| n + std::process::id() % 200)
            .find(|n| {
                !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
                    && !Path::new(&format!("/tmp/.X{n}-lock")).exists()
            })
            .expect("a free display number");
        let display = format!(":{number}");
        let xvfb = watched(
            &display,
            &[
                "Xvfb",
                &display,
                "-screen",
                "0",
                "3840x1080x24",
                "-nolisten",
                "tcp",
                // No reset when the readiness probe below disconnects: a client connecting
                // during a reset is dropped mid-handshake.
                "-noreset",
            ],
        );
        wait("Xvfb starts", 10, || {
            Path::new(&format!("/tmp/.X11-unix/X{number}")).exists()
        });
        wait("Xvfb answers", 10, || X11::connect(Some(&display)).is_ok());
        let monitors = split_in_two(&display);
        let wm = watched(&display, &["openbox"]);
        let x = X11::connect(Some(&display)).expect("connect");
        wait("openbox manages the screen", 10, || x.has_window_manager());
        Desk {
            display,
            _children: vec![xvfb, wm],
            _monitors: monitors,
        }
    })
}

/// Splits the 3840×1080 screen into two 1920×1080 monitors (RandR 1.5 `SetMonitor`, what
/// `xrandr --setmonitor` sends), on a connection kept open.
fn split_in_two(display: &str) -> x11rb::rust_connection::RustConnection {
    use x11rb::connection::Connection as _;
    use x11rb::protocol::randr::{ConnectionExt as _, MonitorInfo};
    use x11rb::protocol::xproto::ConnectionExt as _;
    // A fresh server can refuse a connection or two while it finishes starting.
    let mut tries = 0;
    let (conn, screen) = loop {
        match x11rb::connect(Some(display)) {
            Ok(connected) => break connected,
            Err(error) if tries < 50 => {
                tries += 1;
                eprintln!("connect to {display}: {error}; again");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(error) => panic!("cannot connect to {display}: {error}"),
        }
    };
    let root = conn.setup().roots[screen].root;
    for (name, x) in [("left", 0), ("right", 1920)] {
        let atom = conn
            .intern_atom(false, name.as_bytes())
            .expect("intern")
            .reply()
            .expect("atom")
            .atom;
        let monitor = MonitorInfo {
            name: atom,
            primary: x == 0,
            automatic: false,
            x,
            y: 0,
            width: 1920,
            height: 1080,
            width_in_millimeters: 508,
            height_in_millimeters: 286,
            outputs: Vec::new(),
        };
        conn.randr_set_monitor(root, monitor)
            .expect("set monitor")
            .check()
            .expect("the server takes the monitor");
    }
    conn
}

fn lock() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn toolsets(desk: &Desk) -> Toolsets {
    // Launched apps run uncontained here: the sandbox launcher is the gateway binary, and the
    // gateway's containment tests launch apps under it.
    let config = LocalConfig {
        containment: aai_toolset::Containment::None,
        ..LocalConfig::default()
    };
    let mut setup = Setup::new(config, Vec::new());
    setup.seat.display = Some(desk.display.clone());
    aai_local::toolsets(&setup)
}

fn descriptor(app: &str) -> Arc<Descriptor> {
    aai_local::all_descriptors()
        .into_iter()
        .find(|d| d.app_id == app)
        .expect("a built-in app")
}

async fn call(sets: &Toolsets, app: &str, tool: &str, args: Value) -> Result<Value, AaiError> {
    let descriptor = descriptor(app);
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    sets.call(Invocation::new(
        &descriptor,
        tool,
        &args,
        Duration::from_secs(20),
    ))
    .await
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The image of a screenshot result, decoded.
fn image_of(out: &Value) -> image::DynamicImage {
    use base64::Engine as _;
    let data = out["aai_binary"]["base64"].as_str().expect("image bytes");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    image::load_from_memory(&bytes).expect("an image")
}

/// Starts an xterm (white background, given title) and waits for its window.
fn xterm(desk: &Desk, title: &str, geometry: &str) -> Child {
    let child = Command::new("xterm")
        .args([
            "-bg",
            "white",
            "-fg",
            "black",
            "-title",
            title,
            "-geometry",
            geometry,
        ])
        .env("DISPLAY", &desk.display)
        // A shell without start-up files: the machine's ~/.bashrc may run slow or locking
        // tools (pyenv's rehash lock outlives a terminal closed while it starts).
        .env("SHELL", "/bin/sh")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("xterm");
    let x = X11::connect(Some(&desk.display)).expect("connect");
    wait(&format!("the {title:?} window"), 10, || {
        x.windows().iter().any(|w| w.title == title)
    });
    child
}

#[test]
fn screenshots_share_one_scaled_space_across_two_monitors() {
    let desk = desk();
    let sets = toolsets(desk);
    let rt = runtime();
    let full = rt
        .block_on(call(
            &sets,
            "local.screen",
            "screenshot",
            json!({"format": "png"}),
        ))
        .expect("screenshot");
    // 3840 wide → long edge 1568: one scale for everything.
    assert_eq!(
        (full["width"].as_u64(), full["height"].as_u64()),
        (Some(1568), Some(441))
    );
    let scale = full["scale"].as_f64().expect("scale");
    assert!((scale - 1568.0 / 3840.0).abs() < 1e-9);
    assert_eq!(full["aai_binary"]["mime"], "image/png");
    let image = image_of(&full);
    assert_eq!((image.width(), image.height()), (1568, 441));

    // The second monitor: its own image, placed in the same space.
    let right = rt
        .block_on(call(
            &sets,
            "local.screen",
            "screenshot",
            json!({"mode": "display", "display": 1, "format": "jpeg", "quality": 60}),
        ))
        .expect("display 1");
    assert_eq!(right["origin"], json!({"x": 784, "y": 0}));
    assert_eq!(right["width"], 784);
    assert!(
        right["display"]
            .as_str()
            .is_some_and(|d| d.contains("right")),
        "{}",
        right["display"]
    );
    assert_eq!(image_of(&right).width(), 784);
    let error = rt
        .block_on(call(
            &sets,
            "local.screen",
            "screenshot",
            json!({"mode": "display", "display": 2}),
        ))
        .expect_err("no third display");
    assert!(
        error.message.contains("0: left") && error.message.contains("1: right"),
        "{}",
        error.message
    );

    // A region is given and answered in the agent's space.
    let region = rt
        .block_on(call(&sets, "local.screen", "screenshot", json!({"mode": "region", "region": {"x": 800, "y": 10, "width": 200, "height": 100}, "format": "webp"})))
        .expect("region");
    assert_eq!(region["origin"], json!({"x": 800, "y": 10}));
    let (w, h) = (
        region["width"].as_u64().unwrap_or(0),
        region["height"].as_u64().unwrap_or(0),
    );
    assert!(w.abs_diff(200) <= 1 && h.abs_diff(100) <= 1, "{w}x{h}");
    assert_eq!(region["aai_binary"]["mime"], "image/webp");

    // A larger long edge is honoured up to 2000, never above.
    let mut setup = Setup::new(LocalConfig::default(), Vec::new());
    setup.seat.display = Some(desk.display.clone());
    setup.desktop.max_edge = 5000;
    let big = rt
        .block_on(call(
            &aai_local::toolsets(&setup),
            "local.screen",
            "screenshot",
            json!({}),
        ))
        .expect("screenshot");
    assert_eq!(big["width"], 2000);
    assert_eq!(big["aai_binary"]["mime"], "image/jpeg");
}

#[test]
fn clicks_and_points_use_the_screenshot_space() {
    let desk = desk();
    let _one = lock();
    let sets = toolsets(desk);
    let rt = runtime();
    let x = X11::connect(Some(&desk.display)).expect("connect");
    // A point on the right monitor, in agent units.
    let out = rt
        .block_on(call(
            &sets,
            "local.input",
            "mouse_move",
            json!({"x": 1176, "y": 220, "smooth": false}),
        ))
        .expect("move");
    assert_eq!(out["position"], json!({"x": 1176, "y": 220}));
    let (px, py, _) = x.pointer().expect("pointer");
    assert!(
        (px - 2880).abs() <= 3 && (py - 539).abs() <= 3,
        "physical {px},{py}"
    );
    // Points beyond the screen are clamped to it.
    let out = rt
        .block_on(call(
            &sets,
            "local.input",
            "left_click",
            json!({"x": 99999, "y": -50}),
        ))
        .expect("click");
    assert_eq!(out["position"], json!({"x": 1568, "y": 0}));
}

#[test]
fn a_cancelled_drag_releases_the_button_and_keys() {
    let desk = desk();
    let _one = lock();
    let x = X11::connect(Some(&desk.display)).expect("connect");
    let rt = runtime();
    let sets = Arc::new(toolsets(desk));
    let task = {
        let sets = sets.clone();
        rt.spawn(async move {
            call(&sets, "local.input", "mouse_drag", json!({"from_x": 100, "from_y": 300, "to_x": 900, "to_y": 300, "duration_ms": 5000})).await
        })
    };
    // The button goes down while the drag runs …
    wait("the drag presses button 1", 5, || {
        x.pointer().is_ok_and(|(_, _, mask)| mask & (1 << 8) != 0)
    });
    // … and comes up as soon as the call is dropped (a client's cancel, a timeout).
    task.abort();
    wait("the button is released after the cancel", 2, || {
        x.pointer().is_ok_and(|(_, _, mask)| mask & (1 << 8) == 0)
    });
    let (px, _, _) = x.pointer().expect("pointer");
    assert!(
        px < 2200,
        "the drag stopped where it was cancelled, at x={px}"
    );

    // The same for typing cut short: no key stays down.
    let descriptor = descriptor("local.input");
    let args = json!({"text": "abcdefghijklmnopqrstuvwxyz".repeat(4), "delay_ms": 200});
    let args = args.as_object().cloned().unwrap_or_default();
    let short = rt.block_on(async {
        let typing = sets.call(Invocation::new(
            &descriptor,
            "type_text",
            &args,
            Duration::from_secs(60),
        ));
        tokio::time::timeout(Duration::from_millis(400), typing).await
    });
    assert!(short.is_err(), "the typing was cut short");
    std::thread::sleep(Duration::from_millis(100));
    let down = x.keys_down().expect("keymap");
    assert!(down.is_empty(), "keys still down: {down:?}");
}

#[test]
fn protected_apps_are_blacked_out_and_refuse_input() {
    let desk = desk();
    let _one = lock();
    let sets = toolsets(desk);
    let rt = runtime();
    let mut vault = xterm(desk, "KeePassXC - Passwords.kdbx", "40x10+2000+100");
    let mut notes = xterm(desk, "Plain notes", "40x10+2700+100");
    let shot = |title: &str| {
        rt.block_on(call(
            &sets,
            "local.screen",
            "screenshot",
            json!({"mode": "window", "window_title": title, "format": "png"}),
        ))
        .expect("window screenshot")
    };
    let dark = |out: &Value| {
        let image = image_of(out).to_rgb8();
        let black = image.pixels().filter(|p| p.0 == [0, 0, 0]).count();
        black as f64 / image.pixels().count() as f64
    };
    // The protected window's pixels never leave; a plain window of the same kind shows.
    assert!(dark(&shot("KeePassXC")) > 0.99, "the vault is blacked out");
    assert!(
        dark(&shot("Plain notes")) < 0.5,
        "an ordinary window is visible"
    );
    // Input to it is refused.
    let switched = rt
        .block_on(call(
            &sets,
            "local.apps",
            "app_switch",
            json!({"name": "KeePassXC"}),
        ))
        .expect("switch");
    assert_eq!(switched["focused"], true);
    for (tool, args) in [
        ("type_text", json!({"text": "hunter2"})),
        ("key_press", json!({"keys": ["ctrl", "a"]})),
        ("left_click", json!({"x": 1000, "y": 100})),
    ] {
        let error = rt
            .block_on(call(&sets, "local.input", tool, args))
            .expect_err("refused");
        assert_eq!(
            error.kind,
            ErrorKind::PermissionDenied,
            "{tool}: {}",
            error.message
        );
        assert!(error.message.contains("protected"), "{}", error.message);
    }
    // Clicking onto it from elsewhere is refused too.
    rt.block_on(call(
        &sets,
        "local.apps",
        "app_switch",
        json!({"name": "Plain notes"}),
    ))
    .expect("switch");
    let space_x = (2100.0 * 1568.0 / 3840.0) as i64;
    let error = rt
        .block_on(call(
            &sets,
            "local.input",
            "left_click",
            json!({"x": space_x, "y": 60}),
        ))
        .expect_err("a click on the vault");
    assert_eq!(error.kind, ErrorKind::PermissionDenied);
    for child in [&mut vault, &mut notes] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn windows_are_launched_listed_moved_resized_minimized_and_closed() {
    let desk = desk();
    let _one = lock();
    let sets = toolsets(desk);
    let rt = runtime();
    let launched = rt
        .block_on(call(&sets, "local.apps", "app_launch", json!({"name": "xterm", "args": ["-title", "Managed Term", "-geometry", "40x10+50+50"]})))
        .expect("launch");
    assert!(launched["pid"].as_u64().is_some());
    assert_eq!(launched["window"]["title"], "Managed Term");
    // A shell never sees the arguments: metacharacters are just a title.
    let list = rt
        .block_on(call(
            &sets,
            "local.apps",
            "app_list",
            json!({"include_windows": true}),
        ))
        .expect("list");
    let app = list["apps"]
        .as_array()
        .and_then(|apps| {
            apps.iter().find(|a| {
                a["windows"]
                    .as_array()
                    .is_some_and(|w| w.iter().any(|w| w["title"] == "Managed Term"))
            })
        })
        .cloned()
        .expect("the xterm is listed");
    assert_eq!(app["name"], "XTerm");
    assert_eq!(app["pid"], launched["pid"]);

    let manage = |action: &str, bounds: Value| {
        rt.block_on(call(
            &sets,
            "local.apps",
            "window_manage",
            json!({"window_title": "Managed Term", "action": action, "bounds": bounds}),
        ))
        .expect(action)
    };
    let moved = manage("move", json!({"x": 400, "y": 200}));
    assert_eq!(moved["done"], true, "{moved}");
    let at = &moved["now"]["bounds"];
    assert!(
        at["x"].as_i64().is_some_and(|x| (x - 400).abs() <= 2),
        "{at}"
    );
    assert!(
        at["y"].as_i64().is_some_and(|y| (y - 200).abs() <= 2),
        "{at}"
    );
    let resized = manage("resize", json!({"width": 300, "height": 150}));
    let size = &resized["now"]["bounds"];
    // xterm sizes itself in whole character cells.
    assert!(
        size["width"]
            .as_i64()
            .is_some_and(|w| (w - 300).abs() <= 12),
        "{size}"
    );
    assert!(
        size["height"]
            .as_i64()
            .is_some_and(|h| (h - 150).abs() <= 12),
        "{size}"
    );
    let minimized = manage("minimize", json!({}));
    assert_eq!(minimized["now"]["minimized"], true, "{minimized}");
    let restored = manage("restore", json!({}));
    assert_eq!(restored["now"]["minimized"], false, "{restored}");
    let maximized = manage("maximize", json!({}));
    assert!(
        maximized["now"]["bounds"]["width"]
            .as_i64()
            .is_some_and(|w| w > 500),
        "{maximized}"
    );

    let closed = rt
        .block_on(call(
            &sets,
            "local.apps",
            "app_close",
            json!({"name": "Managed Term"}),
        ))
        .expect("close");
    assert_eq!(closed["closed"], true, "{closed}");
    let error = rt
        .block_on(call(
            &sets,
            "local.apps",
            "window_manage",
            json!({"window_title": "Managed Term", "action": "focus"}),
        ))
        .expect_err("gone");
    assert!(
        error.message.contains("no window matches"),
        "{}",
        error.message
    );
    let error = rt
        .block_on(call(
            &sets,
            "local.apps",
            "app_launch",
            json!({"name": "no-such-program-here"}),
        ))
        .expect_err("unknown");
    assert_eq!(error.kind, ErrorKind::InvalidParams);
}

/// `browser.headless: false`: Chromium opens a real window on the gateway's display, the
/// page's title on it, and the browser still answers over the DevTools Protocol.
#[test]
fn a_headed_browser_opens_a_window_on_the_display() {
    use aai_test_support::http::{Response, TestServer};
    let desk = desk();
    // A new window takes the focus other tests rely on.
    let _serial = lock();
    let server = TestServer::http(|_| {
        Response::new(
            200,
            "<html><head><title>Headed AAI page</title></head><body><h1>Headed</h1></body></html>",
        )
        .header("content-type", "text/html")
    });
    let home = tempfile::tempdir().expect("home");
    let mut setup = Setup::new(LocalConfig::default(), vec![home.path().to_path_buf()]);
    setup.seat.display = Some(desk.display.clone());
    setup.browser.headless = false;
    let sets = aai_local::toolsets(&setup);
    let rt = runtime();
    rt.block_on(call(
        &sets,
        "local.browser",
        "browser_navigate",
        json!({"url": format!("{}/", server.url())}),
    ))
    .expect("navigate");
    let x = X11::connect(Some(&desk.display)).expect("connect");
    wait("the browser's window", 20, || {
        x.windows()
            .iter()
            .any(|w| w.title.contains("Headed AAI page"))
    });
    rt.block_on(call(&sets, "local.browser", "browser_close", json!({})))
        .expect("close");
    wait("the window to go", 20, || {
        !x.windows()
            .iter()
            .any(|w| w.title.contains("Headed AAI page"))
    });
}

/// The emergency stop's hotkey: Ctrl+Shift+Esc reaches the watcher whichever window has the
/// focus; Esc alone or with one modifier does not.
#[test]
fn ctrl_shift_esc_reaches_the_stop_watcher() {
    let desk = desk();
    let _serial = lock();
    let presses = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = presses.clone();
    let _watcher = aai_desktop::desktop::hotkey::watch(Some(&desk.display), move || {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    })
    .expect("grab Ctrl+Shift+Esc");
    let mut editor = xterm(desk, "hotkey focus", "40x5+10+10");
    let x = X11::connect(Some(&desk.display)).expect("connect");
    let code = |sym| x.keycode_of(sym).expect("keycode");
    let (esc, ctrl, shift) = (code(0xff1b), code(0xffe3), code(0xffe1));
    let chord = |mods: &[u8]| {
        let mut held = x.hold();
        for m in mods {
            held.key(*m, true).expect("down");
        }
        held.key(esc, true).expect("esc down");
        held.key(esc, false).expect("esc up");
        drop(held);
        x.sync().expect("sync");
    };
    chord(&[]);
    chord(&[ctrl]);
    chord(&[shift]);
    chord(&[ctrl, shift]);
    wait("the hotkey press", 5, || {
        presses.load(std::sync::atomic::Ordering::SeqCst) >= 1
    });
    // The other three chords went to the focused window, not to the watcher.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(presses.load(std::sync::atomic::Ordering::SeqCst), 1);
    let _ = editor.kill();
    let _ = editor.wait();
}

/// Starts `argv` on the shared display and waits for a window titled `title`.
fn program_window(desk: &Desk, argv: &[&str], title: &str) -> Child {
    let child = Command::new(argv[0])
        .args(&argv[1..])
        .env("DISPLAY", &desk.display)
        // A shell without start-up files: the machine's ~/.bashrc may run slow or locking
        // tools (pyenv's rehash lock outlives a terminal closed while it starts).
        .env("SHELL", "/bin/sh")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {argv:?}: {e} (scripts/test.sh installs it)"));
    let x = X11::connect(Some(&desk.display)).expect("connect");
    wait(&format!("the {title:?} window"), 10, || {
        x.windows().iter().any(|w| w.title == title)
    });
    child
}

/// What the gate is told about an input call now.
fn judged(
    rt: &tokio::runtime::Runtime,
    sets: &Toolsets,
    tool: &str,
    args: Value,
) -> Result<Option<aai_toolset::Judged>, AaiError> {
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    rt.block_on(async {
        let call = aai_toolset::Call {
            tool,
            args: &args,
            roots: &[],
            progress: None,
            caller: "",
            approved: false,
        };
        sets.get("local.input")
            .expect("the input toolset")
            .judged_as(&call)
            .await
    })
}

fn focus(rt: &tokio::runtime::Runtime, sets: &Toolsets, title: &str) {
    let switched = rt
        .block_on(call(
            sets,
            "local.apps",
            "window_manage",
            json!({"window_title": title, "action": "focus"}),
        ))
        .unwrap_or_else(|e| panic!("focus {title}: {e:?}"));
    assert_eq!(switched["now"]["focused"], true, "{switched}");
}

/// Keys going to a terminal window — xterm and st, by their class, and an xterm renamed with
/// `-class` by the pseudo-terminal its process holds — are judged as `bash_execute` of the line
/// they type or submit, pieces and Return included; a window that is no terminal is not; the
/// judgement is made again when the call runs (a terminal that took the focus since is refused,
/// nothing typed); the gateway's own windows take no input at all.
#[test]
fn input_to_terminals_is_judged_as_shell_commands_and_the_gateways_windows_refuse_it() {
    let desk = desk();
    let _one = lock();
    let sets = toolsets(desk);
    let rt = runtime();
    let dir = tempfile::tempdir().expect("dir");
    let marker = dir.path().join("typed");
    let mut children = vec![
        program_window(
            desk,
            &["xterm", "-title", "Term X", "-geometry", "60x10+100+600"],
            "Term X",
        ),
        program_window(
            desk,
            &["st", "-t", "Term St", "-g", "60x10+700+600"],
            "Term St",
        ),
        program_window(
            desk,
            &[
                "xterm",
                "-class",
                "Notes",
                "-name",
                "notes",
                "-title",
                "Renamed Term",
                "-geometry",
                "60x10+1300+600",
            ],
            "Renamed Term",
        ),
        xterm(desk, "AAI Gateway", "40x5+100+100"),
    ];
    for title in ["Term X", "Term St", "Renamed Term"] {
        focus(&rt, &sets, title);
        // Typed in pieces: each judged as the line it makes, the Return as the whole line.
        let first = judged(&rt, &sets, "type_text", json!({"text": "touch "}))
            .expect("judged")
            .unwrap_or_else(|| panic!("{title}: typing into a terminal is judged"));
        assert_eq!(
            (first.app.as_str(), first.tool.as_str()),
            ("local.terminal", "bash_execute")
        );
        assert_eq!(first.args["command"], "touch ", "{title}");
        rt.block_on(call(
            &sets,
            "local.input",
            "type_text",
            json!({"text": "touch "}),
        ))
        .expect("typed");
        let path = marker.display().to_string();
        let second = judged(&rt, &sets, "type_text", json!({"text": path}))
            .expect("judged")
            .expect("a terminal");
        assert_eq!(second.args["command"], format!("touch {path}"), "{title}");
        rt.block_on(call(
            &sets,
            "local.input",
            "type_text",
            json!({"text": path}),
        ))
        .expect("typed");
        let enter = judged(&rt, &sets, "key_press", json!({"keys": ["enter"]}))
            .expect("judged")
            .expect("a terminal");
        assert_eq!(enter.args["command"], format!("touch {path}\n"), "{title}");
        // These terminals were started outside the gateway's sandbox (as the user's own
        // would be): what Return runs there has the user's rights, so it is asked every time.
        assert!(
            enter
                .ask_every_time
                .as_deref()
                .is_some_and(|why| why.contains("not started inside the sandbox")),
            "{title}: {:?}",
            enter.ask_every_time
        );
        rt.block_on(call(
            &sets,
            "local.input",
            "key_press",
            json!({"keys": ["enter"]}),
        ))
        .expect("pressed");
        wait(&format!("the command typed into {title} runs"), 30, || {
            marker.exists()
        });
        std::fs::remove_file(&marker).expect("remove");
        // A paste is asked every time.
        let paste = judged(
            &rt,
            &sets,
            "key_press",
            json!({"keys": ["shift", "insert"]}),
        )
        .expect("judged")
        .expect("a terminal");
        assert!(paste.ask_every_time.is_some(), "{title}");
    }
    // A window that is no terminal is not judged so; judged there, a call whose target became a
    // terminal before it ran is refused and types nothing.
    children.push(program_window(
        desk,
        &[
            "xmessage",
            "-title",
            "Plain window",
            "-geometry",
            "+1900+100",
            "plain",
        ],
        "Plain window",
    ));
    focus(&rt, &sets, "Plain window");
    let path = marker.display().to_string();
    let sneaky = json!({"text": format!("touch {path}\n")});
    assert_eq!(
        judged(&rt, &sets, "type_text", sneaky.clone()).expect("judged"),
        None
    );
    focus(&rt, &sets, "Term X");
    let refused = rt
        .block_on(call(&sets, "local.input", "type_text", sneaky))
        .expect_err("the target changed to a terminal");
    assert_eq!(refused.kind, ErrorKind::PermissionDenied);
    assert!(
        refused.message.contains("not where it went"),
        "{}",
        refused.message
    );
    // Commands run in order: once a later one has run, the refused one never will.
    let later = dir.path().join("later");
    let fine = json!({"text": format!("touch {}\n", later.display())});
    assert!(
        judged(&rt, &sets, "type_text", fine.clone())
            .expect("judged")
            .is_some()
    );
    rt.block_on(call(&sets, "local.input", "type_text", fine))
        .expect("typed");
    wait("the later command runs", 30, || later.exists());
    assert!(!marker.exists(), "the refused text was typed");
    // The gateway's own windows (a consent dialog's title) take no input.
    focus(&rt, &sets, "AAI Gateway");
    let refused =
        judged(&rt, &sets, "type_text", json!({"text": "x"})).expect_err("the gateway's window");
    assert_eq!(refused.kind, ErrorKind::PermissionDenied);
    assert!(
        refused.message.contains("gateway's own window"),
        "{}",
        refused.message
    );
    let refused = rt
        .block_on(call(
            &sets,
            "local.input",
            "left_click",
            json!({"x": 60, "y": 50}),
        ))
        .expect_err("a click on the gateway's window");
    assert!(
        refused.message.contains("gateway's own window"),
        "{}",
        refused.message
    );
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A window's process is the one the X server knows (X-Resource), not what `_NET_WM_PID`
/// says: another client (`xprop -set`, as a launched program could run) rewrites an xterm's
/// `_NET_WM_PID` to its own pid, and the xterm is still named by its real process — the
/// typed-text judge cannot be told that the user's terminal is some other process.
#[test]
fn a_windows_process_is_what_the_server_knows_not_what_the_window_says() {
    let _lock = lock();
    let desk = desk();
    let mut term = xterm(desk, "Pid Judge", "60x10+40+40");
    let x = X11::connect(Some(&desk.display)).expect("connect");
    let window = x
        .windows()
        .into_iter()
        .find(|w| w.title == "Pid Judge")
        .expect("window");
    assert_eq!(window.pid, Some(term.id()), "the xterm's own process");
    let forged = Command::new("xprop")
        .args([
            "-id",
            &window.id.to_string(),
            "-f",
            "_NET_WM_PID",
            "32c",
            "-set",
            "_NET_WM_PID",
            "1",
        ])
        .env("DISPLAY", &desk.display)
        .status()
        .expect("xprop");
    assert!(forged.success());
    let claimed = Command::new("xprop")
        .args(["-id", &window.id.to_string(), "_NET_WM_PID"])
        .env("DISPLAY", &desk.display)
        .output()
        .expect("xprop");
    assert!(
        String::from_utf8_lossy(&claimed.stdout).contains("= 1"),
        "{claimed:?}"
    );
    let again = x
        .windows()
        .into_iter()
        .find(|w| w.id == window.id)
        .expect("window");
    assert_eq!(
        again.pid,
        Some(term.id()),
        "the forged property is not believed"
    );
    let _ = term.kill();
    let _ = term.wait();
}

/// A window's title bar and borders are its own: the window at a point there is that window
/// (a click on a protected app's title bar closes or moves it), and just outside them it is
/// not.
#[test]
fn a_windows_frame_is_where_its_decorations_are() {
    let desk = desk();
    // A new window takes the focus: not while another test types or clicks.
    let _one = lock();
    let mut child = xterm(desk, "Frame Probe", "30x4+2600+820");
    let x = X11::connect(Some(&desk.display)).expect("connect");
    let framed = || {
        x.windows()
            .into_iter()
            .find(|w| w.title == "Frame Probe" && w.frame != w.bounds)
    };
    wait("openbox has framed the window", 10, || framed().is_some());
    let window = framed().expect("framed");
    let (bounds, frame) = (window.bounds, window.frame);
    assert!(
        frame.y < bounds.y && frame.x <= bounds.x,
        "a title bar above: {frame:?} around {bounds:?}"
    );
    let (mid_x, bar_y) = (bounds.x + 20, (frame.y + bounds.y) / 2);
    assert_eq!(
        x.window_at(mid_x, bar_y).map(|w| w.title).as_deref(),
        Some("Frame Probe"),
        "the title bar at ({mid_x}, {bar_y})"
    );
    assert_ne!(
        x.window_at(mid_x, frame.y - 2).map(|w| w.title).as_deref(),
        Some("Frame Probe"),
        "above the frame"
    );
    let _ = child.kill();
    let _ = child.wait();
}
