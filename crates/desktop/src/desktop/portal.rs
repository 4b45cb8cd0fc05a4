//! Wayland: screenshots through the XDG desktop portal (`org.freedesktop.portal.Screenshot`),
//! which the session's compositor answers — and may ask the user about. The picture the portal
//! saves is read and deleted at once: screenshots are never kept.
//!
//! Input goes through the RemoteDesktop portal: one session per gateway (created, devices and
//! monitors selected, started — the desktop asks the user once), then pointer and keyboard
//! events on it; pointer positions are absolute, on the monitor streams the ScreenCast half of
//! the session names.

use std::collections::HashMap;
use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use futures_util::StreamExt as _;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

const PORTAL: &str = "org.freedesktop.portal.Desktop";
const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";

/// How long the portal (and the user, if it asks) may take.
const WAIT: Duration = Duration::from_secs(60);

fn unavailable(why: impl std::fmt::Display) -> AaiError {
    super::not_supported(&format!(
        "this Wayland session offers no screenshot portal (org.freedesktop.portal.Screenshot: {why}); install xdg-desktop-portal with your desktop's backend, or start the gateway with DISPLAY set to use XWayland"
    ))
}

/// The request object the portal will answer on (the portal's documented scheme).
fn request_path(unique_name: &str, token: &str) -> String {
    let sender = unique_name.trim_start_matches(':').replace('.', "_");
    format!("{PORTAL_PATH}/request/{sender}/{token}")
}

async fn connect(session_bus: Option<&str>) -> Result<zbus::Connection, AaiError> {
    match session_bus {
        Some(address) => match zbus::connection::Builder::address(address) {
            Ok(builder) => builder.build().await,
            Err(e) => Err(e),
        },
        None => zbus::Connection::session().await,
    }
    .map_err(unavailable)
}

fn token() -> String {
    let mut nonce = [0u8; 8];
    let _ = getrandom::fill(&mut nonce);
    format!(
        "aai{}",
        nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// A request's options: its handle token and `extra`.
fn options(
    token: String,
    extra: Vec<(&'static str, Value<'static>)>,
) -> HashMap<&'static str, Value<'static>> {
    let mut options: HashMap<&'static str, Value<'static>> = extra.into_iter().collect();
    options.insert("handle_token", Value::from(token));
    options
}

/// Calls `method` of the portal interface `iface` with `body`.
async fn ask<B>(
    conn: zbus::Connection,
    iface: &'static str,
    method: &'static str,
    body: B,
) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(Some(PORTAL), PORTAL_PATH, Some(iface), method, &body)
        .await
}

/// One portal request: `ask` is called with a fresh handle token and makes the call; the
/// answer arrives as the request object's `Response` signal (listened for before asking).
async fn request<F, Fut>(
    conn: &zbus::Connection,
    ask: F,
) -> Result<HashMap<String, OwnedValue>, AaiError>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = zbus::Result<zbus::Message>>,
{
    let unique = conn
        .unique_name()
        .map(|n| n.to_string())
        .ok_or_else(|| unavailable("no bus name"))?;
    let token = token();
    let path = request_path(&unique, &token);
    let proxy = zbus::Proxy::new(
        conn,
        PORTAL,
        path.as_str(),
        "org.freedesktop.portal.Request",
    )
    .await
    .map_err(unavailable)?;
    let mut responses = proxy
        .receive_signal("Response")
        .await
        .map_err(unavailable)?;
    ask(token).await.map_err(unavailable)?;
    let message = tokio::time::timeout(WAIT, responses.next())
        .await
        .map_err(|_| {
            AaiError::new(
                ErrorKind::Timeout,
                format!(
                    "the desktop portal did not answer within {} s",
                    WAIT.as_secs()
                ),
            )
        })?
        .ok_or_else(|| aai_toolset::failed("the desktop portal closed the request"))?;
    let (code, results): (u32, HashMap<String, OwnedValue>) =
        message.body().deserialize().map_err(|e| {
            aai_toolset::failed(format!("the desktop portal's answer is unreadable: {e}"))
        })?;
    match code {
        0 => Ok(results),
        1 => Err(AaiError::new(
            ErrorKind::PermissionDenied,
            "the user declined in the desktop's own dialog",
        )),
        _ => Err(aai_toolset::failed("the desktop portal could not do it")),
    }
}

/// A monitor of a remote-desktop session: its stream and where it sits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stream {
    pub node: u32,
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
}

/// A started RemoteDesktop session: where pointer and keyboard events go.
pub struct Session {
    conn: zbus::Connection,
    handle: OwnedObjectPath,
    pub streams: Vec<Stream>,
}

const REMOTE: &str = "org.freedesktop.portal.RemoteDesktop";

fn path_of(value: Option<&OwnedValue>) -> Option<OwnedObjectPath> {
    let value = value?.clone();
    String::try_from(value.clone())
        .ok()
        .and_then(|s| OwnedObjectPath::try_from(s).ok())
        .or_else(|| OwnedObjectPath::try_from(value).ok())
}

impl Session {
    /// Creates and starts a session with keyboard and pointer on every monitor.
    ///
    /// # Errors
    /// No portal, or the user declined.
    pub async fn start(session_bus: Option<&str>) -> Result<Self, AaiError> {
        let conn = connect(session_bus).await?;
        let created = request(&conn, |token| {
            let session_token = format!("{token}s");
            ask(
                conn.clone(),
                REMOTE,
                "CreateSession",
                (options(
                    token,
                    vec![("session_handle_token", Value::from(session_token))],
                ),),
            )
        })
        .await
        .map_err(with_input_hint)?;
        let handle = path_of(created.get("session_handle"))
            .ok_or_else(|| aai_toolset::failed("the RemoteDesktop portal named no session"))?;
        // Keyboard (1) and pointer (2).
        request(&conn, |token| {
            let devices = options(token, vec![("types", Value::from(3u32))]);
            ask(
                conn.clone(),
                REMOTE,
                "SelectDevices",
                (handle.clone(), devices),
            )
        })
        .await?;
        // Monitors (1), all of them.
        request(&conn, |token| {
            let sources = options(
                token,
                vec![
                    ("types", Value::from(1u32)),
                    ("multiple", Value::from(true)),
                ],
            );
            ask(
                conn.clone(),
                "org.freedesktop.portal.ScreenCast",
                "SelectSources",
                (handle.clone(), sources),
            )
        })
        .await?;
        let started = request(&conn, |token| {
            let start = options(token, Vec::new());
            ask(conn.clone(), REMOTE, "Start", (handle.clone(), "", start))
        })
        .await?;
        let listed: Vec<(u32, HashMap<String, OwnedValue>)> = started
            .get("streams")
            .cloned()
            .and_then(|v| Vec::try_from(v).ok())
            .unwrap_or_default();
        let pair = |props: &HashMap<String, OwnedValue>, key: &str| {
            props
                .get(key)
                .cloned()
                .and_then(|v| <(i32, i32)>::try_from(v).ok())
        };
        let streams = listed
            .iter()
            .map(|(node, props)| {
                let (x, y) = pair(props, "position").unwrap_or((0, 0));
                let (width, height) = pair(props, "size").unwrap_or((0, 0));
                Stream {
                    node: *node,
                    x,
                    y,
                    width,
                    height,
                }
            })
            .collect::<Vec<_>>();
        if streams.is_empty() {
            return Err(aai_toolset::failed(
                "the RemoteDesktop portal started without a monitor to point at",
            ));
        }
        Ok(Self {
            conn,
            handle,
            streams,
        })
    }

    async fn notify<B>(&self, method: &str, body: &B) -> Result<(), AaiError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        self.conn
            .call_method(Some(PORTAL), PORTAL_PATH, Some(REMOTE), method, body)
            .await
            .map(|_| ())
            .map_err(|e| {
                aai_toolset::failed(format!("the RemoteDesktop portal refused {method}: {e}"))
            })
    }

    fn empty() -> HashMap<&'static str, Value<'static>> {
        HashMap::new()
    }

    /// Moves the pointer to a desktop point (physical), on the monitor that holds it.
    ///
    /// # Errors
    /// The point is on no monitor, or the portal refused.
    pub async fn move_to(&self, x: i32, y: i32) -> Result<(), AaiError> {
        let stream = self
            .streams
            .iter()
            .find(|s| x >= s.x && y >= s.y && x < s.x + s.width && y < s.y + s.height)
            .or(self.streams.first())
            .copied()
            .ok_or_else(|| aai_toolset::failed("no monitor"))?;
        self.notify(
            "NotifyPointerMotionAbsolute",
            &(
                &self.handle,
                Self::empty(),
                stream.node,
                f64::from(x - stream.x),
                f64::from(y - stream.y),
            ),
        )
        .await
    }

    /// Presses (`down`) or releases a button (1 left, 2 middle, 3 right, as X numbers them).
    ///
    /// # Errors
    /// The portal refused.
    pub async fn button(&self, button: u8, down: bool) -> Result<(), AaiError> {
        // Linux input codes: BTN_LEFT, BTN_RIGHT, BTN_MIDDLE.
        let code: i32 = match button {
            3 => 0x111,
            2 => 0x112,
            _ => 0x110,
        };
        self.notify(
            "NotifyPointerButton",
            &(&self.handle, Self::empty(), code, u32::from(down)),
        )
        .await
    }

    /// Scrolls by whole steps on an axis (0 vertical, 1 horizontal).
    ///
    /// # Errors
    /// The portal refused.
    pub async fn scroll(&self, axis: u32, steps: i32) -> Result<(), AaiError> {
        self.notify(
            "NotifyPointerAxisDiscrete",
            &(&self.handle, Self::empty(), axis, steps),
        )
        .await
    }

    /// Presses or releases the key for a keysym.
    ///
    /// # Errors
    /// The portal refused.
    pub async fn keysym(&self, sym: u32, down: bool) -> Result<(), AaiError> {
        self.notify(
            "NotifyKeyboardKeysym",
            &(&self.handle, Self::empty(), sym as i32, u32::from(down)),
        )
        .await
    }
}

fn with_input_hint(mut error: AaiError) -> AaiError {
    if error.kind == ErrorKind::AutomationNotSupported {
        error.message = error.message.replace(
            "offers no screenshot portal (org.freedesktop.portal.Screenshot",
            "offers no input portal (org.freedesktop.portal.RemoteDesktop",
        );
    }
    error
}

/// Takes a screenshot through the portal on `session_bus` (the gateway's own when `None`) and
/// returns the PNG bytes; the file the portal wrote is deleted.
///
/// # Errors
/// AUTOMATION_NOT_SUPPORTED when no portal answers, PERMISSION_DENIED when the user declines,
/// AUTOMATION_FAILED otherwise.
pub async fn screenshot(session_bus: Option<&str>) -> Result<Vec<u8>, AaiError> {
    let conn = connect(session_bus).await?;
    let results = request(&conn, |token| {
        let shot = options(token, vec![("interactive", Value::from(false))]);
        ask(
            conn.clone(),
            "org.freedesktop.portal.Screenshot",
            "Screenshot",
            ("", shot),
        )
    })
    .await
    .map_err(|e| match e.kind {
        ErrorKind::PermissionDenied => AaiError::new(
            ErrorKind::PermissionDenied,
            "the user declined the screenshot in the desktop's own dialog",
        ),
        _ => e,
    })?;
    let uri = results
        .get("uri")
        .and_then(|v| String::try_from(v.clone()).ok())
        .ok_or_else(|| aai_toolset::failed("the screenshot portal named no file"))?;
    let file = url::Url::parse(&uri)
        .ok()
        .filter(|u| u.scheme() == "file")
        .and_then(|u| u.to_file_path().ok())
        .ok_or_else(|| {
            aai_toolset::failed(format!("the screenshot portal named {uri:?}, not a file"))
        })?;
    let bytes = std::fs::read(&file)
        .map_err(|e| aai_toolset::failed(format!("cannot read the portal's screenshot: {e}")))?;
    // Never kept: the portal saved it for us alone.
    let _ = std::fs::remove_file(&file);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_follow_the_portal_scheme() {
        assert_eq!(
            request_path(":1.42", "aai0f"),
            "/org/freedesktop/portal/desktop/request/1_42/aai0f"
        );
    }
}
