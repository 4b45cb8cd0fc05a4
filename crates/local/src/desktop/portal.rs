//! Wayland: screenshots through the XDG desktop portal (`org.freedesktop.portal.Screenshot`),
//! which the session's compositor answers — and may ask the user about. The picture the portal
//! saves is read and deleted at once: screenshots are never kept.
//!
//! Input on Wayland needs the RemoteDesktop portal's session handshake, which is not driven yet:
//! those tools say so (AUTOMATION_NOT_SUPPORTED).

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

/// Takes a screenshot through the portal on `session_bus` (the gateway's own when `None`) and
/// returns the PNG bytes; the file the portal wrote is deleted.
///
/// # Errors
/// AUTOMATION_NOT_SUPPORTED when no portal answers, PERMISSION_DENIED when the user declines,
/// AUTOMATION_FAILED otherwise.
pub async fn screenshot(session_bus: Option<&str>) -> Result<Vec<u8>, AaiError> {
    let conn = match session_bus {
        Some(address) => match zbus::connection::Builder::address(address) {
            Ok(builder) => builder.build().await,
            Err(e) => Err(e),
        },
        None => zbus::Connection::session().await,
    }
    .map_err(unavailable)?;
    let unique = conn
        .unique_name()
        .map(|n| n.to_string())
        .ok_or_else(|| unavailable("no bus name"))?;
    let mut nonce = [0u8; 8];
    let _ = getrandom::fill(&mut nonce);
    let token = format!(
        "aai{}",
        nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let path = request_path(&unique, &token);
    // Listen before asking, so the answer cannot be missed.
    let request = zbus::Proxy::new(
        &conn,
        PORTAL,
        path.as_str(),
        "org.freedesktop.portal.Request",
    )
    .await
    .map_err(unavailable)?;
    let mut responses = request
        .receive_signal("Response")
        .await
        .map_err(unavailable)?;
    let mut options: HashMap<&str, Value<'_>> = HashMap::new();
    options.insert("handle_token", Value::from(token.as_str()));
    options.insert("interactive", Value::from(false));
    let reply = conn
        .call_method(
            Some(PORTAL),
            PORTAL_PATH,
            Some("org.freedesktop.portal.Screenshot"),
            "Screenshot",
            &("", options),
        )
        .await
        .map_err(unavailable)?;
    let _handle: OwnedObjectPath = reply.body().deserialize().map_err(unavailable)?;
    let message = tokio::time::timeout(WAIT, responses.next())
        .await
        .map_err(|_| {
            AaiError::new(
                ErrorKind::Timeout,
                format!(
                    "the screenshot portal did not answer within {} s",
                    WAIT.as_secs()
                ),
            )
        })?
        .ok_or_else(|| crate::failed("the screenshot portal closed the request"))?;
    let (code, results): (u32, HashMap<String, OwnedValue>) = message
        .body()
        .deserialize()
        .map_err(|e| crate::failed(format!("the screenshot portal's answer is unreadable: {e}")))?;
    match code {
        0 => {}
        1 => {
            return Err(AaiError::new(
                ErrorKind::PermissionDenied,
                "the user declined the screenshot in the desktop's own dialog",
            ));
        }
        _ => {
            return Err(crate::failed(
                "the screenshot portal could not take the screenshot",
            ));
        }
    }
    let uri = results
        .get("uri")
        .and_then(|v| String::try_from(v.clone()).ok())
        .ok_or_else(|| crate::failed("the screenshot portal named no file"))?;
    let file = url::Url::parse(&uri)
        .ok()
        .filter(|u| u.scheme() == "file")
        .and_then(|u| u.to_file_path().ok())
        .ok_or_else(|| crate::failed(format!("the screenshot portal named {uri:?}, not a file")))?;
    let bytes = std::fs::read(&file)
        .map_err(|e| crate::failed(format!("cannot read the portal's screenshot: {e}")))?;
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
