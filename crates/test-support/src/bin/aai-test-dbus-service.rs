//! A D-Bus service for tests: `aai-test-dbus-service [BUS_NAME]` (default `org.aai.Test`).
//! Writes `ready` on stdout once it owns its name: the one line the tests wait for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zbus::fdo;
use zbus::zvariant::{OwnedValue, Value};

struct Test {
    calls: AtomicU32,
    /// What the Notifications interface received last, as JSON.
    last_notification: Arc<Mutex<String>>,
}

#[zbus::interface(name = "org.aai.Test")]
impl Test {
    fn echo(&self, text: String) -> String {
        self.calls.fetch_add(1, Ordering::Relaxed);
        text
    }

    fn add(&self, a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }

    fn sum(&self, values: Vec<i32>) -> i64 {
        values.iter().map(|v| i64::from(*v)).sum()
    }

    /// Returns the dict it was given plus `count`, the number of entries.
    fn describe(&self, info: HashMap<String, OwnedValue>) -> HashMap<String, OwnedValue> {
        let count = u32::try_from(info.len()).unwrap_or(u32::MAX);
        let mut out = info;
        out.insert("count".into(), OwnedValue::from(count));
        out
    }

    /// Swaps a (string, int) pair.
    fn swap(&self, pair: (String, i32)) -> (i32, String) {
        (pair.1, pair.0)
    }

    fn json(&self) -> String {
        r#"{"ok":true,"items":[1,2]}"#.to_owned()
    }

    fn not_json(&self) -> String {
        "plain text".to_owned()
    }

    fn big(&self, bytes: u32) -> String {
        "x".repeat(bytes as usize)
    }

    async fn slow(&self, millis: u32) -> String {
        tokio::time::sleep(Duration::from_millis(u64::from(millis))).await;
        format!("slept {millis} ms")
    }

    fn fail(&self) -> fdo::Result<String> {
        Err(fdo::Error::Failed(
            "the test service failed on purpose".into(),
        ))
    }

    fn deny(&self) -> fdo::Result<String> {
        Err(fdo::Error::AccessDenied("callers may not use Deny".into()))
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    fn variant(&self, value: Value<'_>) -> String {
        value.value_signature().to_string()
    }

    fn last_notification(&self) -> String {
        self.last_notification
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }
}

/// The desktop notifications interface, recording what it receives, so the shipped
/// `org.freedesktop.Notifications` descriptor is checked against the real signature.
struct Notifications {
    next_id: AtomicU32,
    last: Arc<Mutex<String>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Notifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        app_name: String,
        replaces_id: u32,
        app_icon: String,
        summary: String,
        body: String,
        actions: Vec<String>,
        hints: HashMap<String, OwnedValue>,
        expire_timeout: i32,
    ) -> u32 {
        let urgency = hints.get("urgency").and_then(|v| u8::try_from(v).ok());
        let record = format!(
            r#"{{"app_name":{app_name:?},"replaces_id":{replaces_id},"app_icon":{app_icon:?},"summary":{summary:?},"body":{body:?},"actions":{},"urgency":{},"expire_timeout":{expire_timeout}}}"#,
            actions.len(),
            urgency.map_or("null".to_owned(), |u| u.to_string())
        );
        if let Ok(mut last) = self.last.lock() {
            *last = record;
        }
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn close_notification(&self, _id: u32) {}

    fn get_capabilities(&self) -> Vec<String> {
        vec!["body".into()]
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        ("aai-test".into(), "aai".into(), "1.0".into(), "1.2".into())
    }
}

/// The MPRIS root and player interfaces, enough to drive the shipped player descriptors.
struct MprisRoot;

#[zbus::interface(name = "org.mpris.MediaPlayer2")]
impl MprisRoot {
    fn raise(&self) {}
    fn quit(&self) {}
    #[zbus(property)]
    fn identity(&self) -> String {
        "aai test player".into()
    }
}

struct MprisPlayer {
    playing: bool,
    volume: f64,
    position: i64,
}

#[zbus::interface(name = "org.mpris.MediaPlayer2.Player")]
impl MprisPlayer {
    fn play_pause(&mut self) {
        self.playing = !self.playing;
    }
    fn play(&mut self) {
        self.playing = true;
    }
    fn pause(&mut self) {
        self.playing = false;
    }
    fn stop(&mut self) {
        self.playing = false;
    }
    fn next(&self) {}
    fn previous(&self) {}
    fn seek(&mut self, offset: i64) {
        self.position += offset;
    }
    fn open_uri(&mut self, _uri: String) {
        self.playing = true;
    }
    #[zbus(property)]
    fn playback_status(&self) -> String {
        if self.playing { "Playing" } else { "Paused" }.into()
    }
    #[zbus(property)]
    fn metadata(&self) -> HashMap<String, OwnedValue> {
        let mut map = HashMap::new();
        map.insert(
            "xesam:title".to_owned(),
            OwnedValue::from(zbus::zvariant::Str::from("Test Song")),
        );
        map.insert("mpris:length".to_owned(), OwnedValue::from(180_000_000_i64));
        map
    }
    #[zbus(property)]
    fn volume(&self) -> f64 {
        self.volume
    }
    #[zbus(property)]
    fn set_volume(&mut self, volume: f64) {
        self.volume = volume;
    }
    #[zbus(property)]
    fn position(&self) -> i64 {
        self.position
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> zbus::Result<()> {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "org.aai.Test".to_owned());
    let last = Arc::new(Mutex::new(String::new()));
    let connection = zbus::connection::Builder::session()?
        .name(name.as_str())?
        .serve_at(
            "/org/aai/Test",
            Test {
                calls: AtomicU32::new(0),
                last_notification: last.clone(),
            },
        )?
        .serve_at(
            "/org/freedesktop/Notifications",
            Notifications {
                next_id: AtomicU32::new(0),
                last,
            },
        )?
        .serve_at("/org/mpris/MediaPlayer2", MprisRoot)?
        .serve_at(
            "/org/mpris/MediaPlayer2",
            MprisPlayer {
                playing: false,
                volume: 1.0,
                position: 0,
            },
        )?
        .build()
        .await?;
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }
    // Exit once the bus is gone (or after a lifetime cap), so activated copies never outlive
    // a test's bus.
    let cap = std::env::var("AAI_TEST_SERVICE_MAX_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(cap);
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ping = connection.call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetId",
            &(),
        );
        if !matches!(
            tokio::time::timeout(Duration::from_secs(1), ping).await,
            Ok(Ok(_))
        ) {
            break;
        }
    }
    Ok(())
}
