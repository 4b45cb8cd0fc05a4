//! The user's desktop notification, as the gateway sends it (an approval waiting, the
//! emergency stop) and as `local.system`'s `notification_send` does.

use aai_descriptor::{AaiError, ErrorKind};
use serde_json::{Value, json};

/// A desktop notification: freedesktop Notifications over D-Bus on Linux, the platform's own
/// elsewhere. Title and body are shown through [`visible`](aai_descriptor::visible): an agent's
/// or a client's text carries no control or bidi character onto the screen.
pub async fn notify(title: &str, body: &str, urgency: &str) -> Result<Value, AaiError> {
    let title = &*aai_descriptor::visible::visible(title);
    let body = &*aai_descriptor::visible::visible_lines(body);
    #[cfg(target_os = "linux")]
    {
        let level: u8 = match urgency {
            "low" => 0,
            "critical" => 2,
            _ => 1,
        };
        let failed = |e: zbus::Error| {
            AaiError::new(
                ErrorKind::AppNotRunning,
                format!(
                    "no notification service answered on the session bus ({e}); a desktop session with a notification daemon is needed"
                ),
            )
        };
        let connection = zbus::Connection::session().await.map_err(failed)?;
        let mut hints: std::collections::HashMap<&str, zbus::zvariant::Value<'_>> =
            std::collections::HashMap::new();
        hints.insert("urgency", zbus::zvariant::Value::U8(level));
        let reply = connection
            .call_method(
                Some("org.freedesktop.Notifications"),
                "/org/freedesktop/Notifications",
                Some("org.freedesktop.Notifications"),
                "Notify",
                &(
                    "aai-gateway",
                    0u32,
                    "",
                    title,
                    body,
                    Vec::<&str>::new(),
                    hints,
                    -1i32,
                ),
            )
            .await
            .map_err(failed)?;
        let id: u32 = reply.body().deserialize().map_err(failed)?;
        Ok(json!({"sent": true, "id": id}))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = urgency;
        let (program, argv, stdin): (&str, Vec<String>, Option<String>) = if cfg!(
            target_os = "macos"
        ) {
            (
                "osascript",
                vec!["-".into(), body.to_owned(), title.to_owned()],
                Some("on run argv\ndisplay notification (item 1 of argv) with title (item 2 of argv)\nend run\n".into()),
            )
        } else {
            (
                "powershell.exe",
                vec![
                    "-NoProfile".into(),
                    "-NonInteractive".into(),
                    "-Command".into(),
                    WINDOWS_NOTIFY.into(),
                ],
                Some(json!({"title": title, "body": body}).to_string()),
            )
        };
        let mut command = crate::process::Command::new(program).args(argv);
        if let Some(stdin) = stdin {
            command = command.stdin(stdin);
        }
        let output = crate::process::run(
            &command,
            std::time::Duration::from_secs(10),
            "notification_send",
        )
        .await?;
        if output.success() {
            Ok(json!({"sent": true}))
        } else {
            Err(AaiError::new(
                ErrorKind::AutomationFailed,
                format!("the notification failed: {}", output.stderr.trim()),
            ))
        }
    }
}

/// Windows: a balloon tip; title and body arrive as JSON on stdin.
#[cfg(not(target_os = "linux"))]
const WINDOWS_NOTIFY: &str = "$r = [Console]::In.ReadToEnd() | ConvertFrom-Json; Add-Type -AssemblyName System.Windows.Forms; $n = New-Object System.Windows.Forms.NotifyIcon; $n.Icon = [System.Drawing.SystemIcons]::Information; $n.Visible = $true; $n.ShowBalloonTip(5000, $r.title, $r.body, 'Info'); Start-Sleep -Seconds 6; $n.Dispose()";
