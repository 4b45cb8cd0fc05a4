//! A D-Bus service for tests: `aai-test-dbus-service [BUS_NAME]` (default `org.aai.Test`).
//! Prints `ready` on stdout once it owns its name.
#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use zbus::fdo;
use zbus::zvariant::{OwnedValue, Value};

struct Test {
    calls: AtomicU32,
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
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> zbus::Result<()> {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "org.aai.Test".to_owned());
    let connection = zbus::connection::Builder::session()?
        .name(name.as_str())?
        .serve_at(
            "/org/aai/Test",
            Test {
                calls: AtomicU32::new(0),
            },
        )?
        .build()
        .await?;
    println!("ready");
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
