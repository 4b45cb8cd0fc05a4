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
use aai_local::desktop::backend::Desktop;
use aai_local::{LocalConfig, Setup, Toolsets};
use aai_test_support::TestBus;
use serde_json::{Map, Value, json};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value as ZValue};

struct FakePortal {
    dir: PathBuf,
    /// 0: success, 1: the user declined.
    answer: u32,
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
    setup.display = Arc::new(Desktop::on_wayland(bus.address()));
    Toolsets::new(&setup)
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
