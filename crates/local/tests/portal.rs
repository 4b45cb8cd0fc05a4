//! Wayland without X: screenshots through the XDG Screenshot portal, on a private session bus
//! (a real dbus-daemon) where this test plays the portal at its documented D-Bus boundary —
//! `Screenshot(parent, options)` answered by a `Response` signal on the request object — and
//! writes the picture a compositor would. The gateway must read it, delete it, and scale it into
//! the agent's space; a declined request is PERMISSION_DENIED; input says what is missing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aai_descriptor::ErrorKind;
use aai_executor::{Executor, Invocation};
use aai_test_support::TestBus;
use aai_toolset::{LocalConfig, Setup, Toolsets};
use serde_json::{Map, Value, json};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value as ZValue};

struct FakePortal {
    dir: PathBuf,
    /// 0: success, 1: the user declined.
    answer: u32,
}

/// Answers a portal request: the `Response` signal on the request object the caller named by
/// its token, shortly after the call returns.
fn respond(
    conn: &zbus::Connection,
    header: &zbus::message::Header<'_>,
    options: &HashMap<String, OwnedValue>,
    results: Vec<(&'static str, OwnedValue)>,
) -> OwnedObjectPath {
    let sender = header.sender().map(ToString::to_string).unwrap_or_default();
    let token = options
        .get("handle_token")
        .and_then(|v| String::try_from(v.clone()).ok())
        .unwrap_or_default();
    let path = format!(
        "/org/freedesktop/portal/desktop/request/{}/{token}",
        sender.trim_start_matches(':').replace('.', "_")
    );
    let (conn, signal_path) = (conn.clone(), path.clone());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let results: HashMap<&str, OwnedValue> = results.into_iter().collect();
        conn.emit_signal(
            Some(sender.as_str()),
            signal_path.as_str(),
            "org.freedesktop.portal.Request",
            "Response",
            &(0u32, results),
        )
        .await
        .expect("emit Response");
    });
    OwnedObjectPath::try_from(path).expect("path")
}

/// The input half of the portal: what it was asked, in order.
#[derive(Default)]
struct FakeRemote {
    calls: Arc<std::sync::Mutex<Vec<String>>>,
}

const SESSION: &str = "/org/freedesktop/portal/desktop/session/1/aai";

#[zbus::interface(name = "org.freedesktop.portal.RemoteDesktop")]
impl FakeRemote {
    async fn create_session(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        self.calls
            .lock()
            .expect("calls")
            .push("CreateSession".into());
        let handle = OwnedValue::try_from(ZValue::from(SESSION)).expect("value");
        respond(conn, &header, &options, vec![("session_handle", handle)])
    }

    async fn select_devices(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        session: OwnedObjectPath,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let types = options
            .get("types")
            .and_then(|v| u32::try_from(v.clone()).ok());
        self.calls
            .lock()
            .expect("calls")
            .push(format!("SelectDevices {} {types:?}", session.as_str()));
        respond(conn, &header, &options, Vec::new())
    }

    async fn start(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _session: OwnedObjectPath,
        _parent: &str,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        self.calls.lock().expect("calls").push("Start".into());
        let monitor = |x: i32| {
            let mut props: HashMap<&str, ZValue<'static>> = HashMap::new();
            props.insert("position", ZValue::from((x, 0i32)));
            props.insert("size", ZValue::from((1920i32, 1080i32)));
            props
        };
        let streams = ZValue::from(vec![(41u32, monitor(0)), (42u32, monitor(1920))]);
        let streams = OwnedValue::try_from(streams).expect("streams");
        let devices = OwnedValue::from(3u32);
        respond(
            conn,
            &header,
            &options,
            vec![("devices", devices), ("streams", streams)],
        )
    }

    fn notify_pointer_motion_absolute(
        &self,
        _session: OwnedObjectPath,
        _options: HashMap<String, OwnedValue>,
        stream: u32,
        x: f64,
        y: f64,
    ) {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("motion {stream} {x:.0} {y:.0}"));
    }

    fn notify_pointer_button(
        &self,
        _session: OwnedObjectPath,
        _options: HashMap<String, OwnedValue>,
        button: i32,
        state: u32,
    ) {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("button {button:#x} {state}"));
    }

    fn notify_keyboard_keysym(
        &self,
        _session: OwnedObjectPath,
        _options: HashMap<String, OwnedValue>,
        keysym: i32,
        state: u32,
    ) {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("key {keysym:#x} {state}"));
    }

    fn notify_pointer_axis_discrete(
        &self,
        _session: OwnedObjectPath,
        _options: HashMap<String, OwnedValue>,
        axis: u32,
        steps: i32,
    ) {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("axis {axis} {steps}"));
    }
}

struct FakeScreenCast;

#[zbus::interface(name = "org.freedesktop.portal.ScreenCast")]
impl FakeScreenCast {
    async fn select_sources(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _session: OwnedObjectPath,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        respond(conn, &header, &options, Vec::new())
    }
}

#[zbus::interface(name = "org.freedesktop.portal.Screenshot")]
impl FakePortal {
    async fn screenshot(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _parent: &str,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let sender = header.sender().map(ToString::to_string).unwrap_or_default();
        let token = options
            .get("handle_token")
            .and_then(|v| String::try_from(v.clone()).ok())
            .unwrap_or_default();
        assert_eq!(
            options
                .get("interactive")
                .and_then(|v| bool::try_from(v.clone()).ok()),
            Some(false)
        );
        let path = format!(
            "/org/freedesktop/portal/desktop/request/{}/{token}",
            sender.trim_start_matches(':').replace('.', "_")
        );
        let file = self.dir.join("Screenshot.png");
        image::RgbImage::from_fn(3200, 1800, |x, _| {
            if x < 1600 {
                image::Rgb([255, 255, 255])
            } else {
                image::Rgb([0, 0, 200])
            }
        })
        .save(&file)
        .expect("write the picture");
        let uri = url::Url::from_file_path(&file).expect("uri").to_string();
        let answer = self.answer;
        let (conn, signal_path) = (conn.clone(), path.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut results: HashMap<&str, ZValue<'_>> = HashMap::new();
            if answer == 0 {
                results.insert("uri", ZValue::from(uri.as_str()));
            }
            conn.emit_signal(
                Some(sender.as_str()),
                signal_path.as_str(),
                "org.freedesktop.portal.Request",
                "Response",
                &(answer, results),
            )
            .await
            .expect("emit Response");
        });
        OwnedObjectPath::try_from(path).expect("path")
    }
}

async fn portal(bus: &TestBus, dir: PathBuf, answer: u32) -> zbus::Connection {
    zbus::connection::Builder::address(bus.address())
        .expect("address")
        .name("org.freedesktop.portal.Desktop")
        .expect("name")
        .serve_at(
            "/org/freedesktop/portal/desktop",
            FakePortal { dir, answer },
        )
        .expect("serve")
        .build()
        .await
        .expect("the fake portal connects")
}

fn toolsets(bus: &TestBus) -> Toolsets {
    let mut setup = Setup::new(LocalConfig::default(), Vec::new());
    setup.seat = aai_toolset::Seat {
        session_bus: Some(bus.address().to_owned()),
        wayland: true,
        ..aai_toolset::Seat::default()
    };
    aai_local::toolsets(&setup)
}

async fn call(
    sets: &Toolsets,
    app: &str,
    tool: &str,
    args: Value,
) -> Result<Value, aai_descriptor::AaiError> {
    let descriptor = aai_local::all_descriptors()
        .into_iter()
        .find(|d| d.app_id == app)
        .expect("built in");
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    sets.call(Invocation::new(
        &descriptor,
        tool,
        &args,
        Duration::from_secs(20),
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wayland_screenshots_come_from_the_portal_and_are_not_kept() {
    let bus = TestBus::start();
    let dir = tempfile::tempdir().expect("dir");
    let _portal = portal(&bus, dir.path().to_path_buf(), 0).await;
    let sets = toolsets(&bus);
    let shot = call(
        &sets,
        "local.screen",
        "screenshot",
        json!({"format": "png"}),
    )
    .await
    .expect("screenshot through the portal");
    // 3200×1800 (a HiDPI screen) into the one agent space.
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(1568), Some(882))
    );
    assert_eq!(shot["aai_binary"]["mime"], "image/png");
    assert!(
        !dir.path().join("Screenshot.png").exists(),
        "the portal's file is deleted once read"
    );
    // Input cannot go through X here: the missing piece is named.
    let error = call(
        &sets,
        "local.input",
        "left_click",
        json!({"x": 10, "y": 10}),
    )
    .await
    .expect_err("no input on Wayland yet");
    assert_eq!(error.kind, ErrorKind::AutomationNotSupported);
    assert!(error.message.contains("RemoteDesktop"), "{}", error.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_portal_request_is_a_denial_and_no_portal_is_named() {
    let bus = TestBus::start();
    let dir = tempfile::tempdir().expect("dir");
    let sets = toolsets(&bus);
    // No portal on the bus: the message says what to install.
    let error = call(&sets, "local.screen", "screenshot", json!({}))
        .await
        .expect_err("no portal");
    assert_eq!(error.kind, ErrorKind::AutomationNotSupported);
    assert!(
        error.message.contains("xdg-desktop-portal"),
        "{}",
        error.message
    );
    let _portal = portal(&bus, dir.path().to_path_buf(), 1).await;
    let error = call(&sets, "local.screen", "screenshot", json!({}))
        .await
        .expect_err("declined");
    assert_eq!(error.kind, ErrorKind::PermissionDenied, "{}", error.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wayland_input_goes_through_one_remote_desktop_session_when_the_user_allows_it() {
    let bus = TestBus::start();
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let _portal = zbus::connection::Builder::address(bus.address())
        .expect("address")
        .name("org.freedesktop.portal.Desktop")
        .expect("name")
        .serve_at(
            "/org/freedesktop/portal/desktop",
            FakeRemote {
                calls: calls.clone(),
            },
        )
        .expect("serve")
        .serve_at("/org/freedesktop/portal/desktop", FakeScreenCast)
        .expect("serve")
        .build()
        .await
        .expect("the fake portal connects");
    let mut setup = Setup::new(LocalConfig::default(), Vec::new());
    setup.seat = aai_toolset::Seat {
        session_bus: Some(bus.address().to_owned()),
        wayland: true,
        ..aai_toolset::Seat::default()
    };
    setup.desktop.wayland_input = true;
    let sets = aai_local::toolsets(&setup);
    // Two 1920×1080 monitors side by side: agent (784, 100) is the right one's left edge.
    let out = call(
        &sets,
        "local.input",
        "left_click",
        json!({"x": 784, "y": 100}),
    )
    .await
    .expect("click");
    assert_eq!(out["position"], json!({"x": 784, "y": 100}));
    call(
        &sets,
        "local.input",
        "type_text",
        json!({"text": "é😀", "delay_ms": 0}),
    )
    .await
    .expect("type");
    call(
        &sets,
        "local.input",
        "scroll",
        json!({"x": 10, "y": 10, "direction": "down", "amount": 2}),
    )
    .await
    .expect("scroll");
    let calls = calls.lock().expect("calls").clone();
    assert_eq!(
        calls,
        [
            "CreateSession",
            &format!("SelectDevices {SESSION} Some(3)"),
            "Start",
            "motion 42 0 245",
            "button 0x110 1",
            "button 0x110 0",
            "key 0xe9 1",
            "key 0xe9 0",
            "key 0x101f600 1",
            "key 0x101f600 0",
            "motion 41 24 24",
            "axis 0 2",
        ]
    );
}
