//! The system app: `system_info`, `clipboard_read`/`clipboard_write`, `notification_send`.

use std::sync::{Arc, LazyLock};

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use serde_json::{Map, Value, json};

use crate::{Call, Toolset};

pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> =
    LazyLock::new(|| crate::shipped("local.system", include_str!("../toolsets/system.aai.json")));

/// The system toolset.
pub struct System;

impl Toolset for System {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(run(call.tool, call.args))
    }
}

fn arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, AaiError> {
    args.get(name).and_then(Value::as_str).ok_or_else(|| {
        AaiError::new(ErrorKind::InvalidParams, format!("`{name}` is required"))
            .with_detail(json!({"field": name}))
    })
}

pub async fn run(tool: &str, args: &Map<String, Value>) -> Result<Value, AaiError> {
    match tool {
        "system_info" => Ok(tokio::task::spawn_blocking(system_info)
            .await
            .unwrap_or(Value::Null)),
        "clipboard_read" => clipboard(None).await,
        "clipboard_write" => clipboard(Some(arg(args, "text")?.to_owned())).await,
        "notification_send" => {
            let urgency = args
                .get("urgency")
                .and_then(Value::as_str)
                .unwrap_or("normal");
            aai_executor::notify::notify(arg(args, "title")?, arg(args, "body")?, urgency).await
        }
        other => Err(AaiError::new(
            ErrorKind::ToolNotFound,
            format!("local.system has no tool {other:?}"),
        )),
    }
}

/// OS, architecture, CPUs, memory, displays.
pub fn system_info() -> Value {
    let system = sysinfo::System::new().ok().map(|mut system| {
        system.refresh_memory();
        system
    });
    let os = format!(
        "{} {}",
        sysinfo::System::name().unwrap_or_else(|_| std::env::consts::OS.to_owned()),
        sysinfo::System::os_version().unwrap_or_default()
    );
    json!({
        "os": os.trim(),
        "kernel": sysinfo::System::kernel_version().ok(),
        "arch": std::env::consts::ARCH,
        "cpus": std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        "memory_total": system.as_ref().map(sysinfo::System::total_memory),
        "memory_free": system.as_ref().map(sysinfo::System::available_memory),
        "displays": displays(),
    })
}

/// Screens of the X display (`xrandr --query`), when there is one.
fn displays() -> Vec<Value> {
    if cfg!(target_os = "linux") && std::env::var_os("DISPLAY").is_none() {
        return Vec::new();
    }
    let Ok(out) = std::process::Command::new("xrandr")
        .arg("--query")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains(" connected"))
        .enumerate()
        .filter_map(|(id, line)| {
            let geometry = line.split_whitespace().find(|w| w.contains('x') && w.contains('+'))?;
            let (size, _) = geometry.split_once('+')?;
            let (width, height) = size.split_once('x')?;
            Some(json!({"id": id, "width": width.parse::<u32>().ok()?, "height": height.parse::<u32>().ok()?, "scale": 1}))
        })
        .collect()
}

/// Reads the clipboard (`None`) or writes `text` to it.
async fn clipboard(text: Option<String>) -> Result<Value, AaiError> {
    tokio::task::spawn_blocking(move || {
        let unavailable = |e: arboard::Error| {
            AaiError::new(
                ErrorKind::AutomationNotSupported,
                format!("the clipboard is not available here ({e}); it needs a desktop session (DISPLAY or WAYLAND_DISPLAY on Linux)"),
            )
        };
        // One clipboard for the process: on X11 the text written stays available only while
        // the process that wrote it keeps serving it.
        static BOARD: std::sync::Mutex<Option<arboard::Clipboard>> = std::sync::Mutex::new(None);
        let mut guard = BOARD.lock().map_err(|_| AaiError::new(ErrorKind::AutomationFailed, "the clipboard lock is poisoned"))?;
        if guard.is_none() {
            *guard = Some(arboard::Clipboard::new().map_err(unavailable)?);
        }
        let Some(board) = guard.as_mut() else {
            return Err(AaiError::new(ErrorKind::AutomationNotSupported, "no clipboard"));
        };
        match text {
            Some(text) => {
                board.set_text(text.clone()).map_err(unavailable)?;
                Ok(json!({"written": text.chars().count()}))
            }
            None => match board.get_text() {
                Ok(text) => Ok(json!({"text": text, "formats": ["text/plain"]})),
                Err(arboard::Error::ContentNotAvailable) => Ok(json!({"text": "", "formats": []})),
                Err(e) => Err(unavailable(e)),
            },
        }
    })
    .await
    .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))?
}
