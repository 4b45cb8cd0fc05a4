//! Mouse and keyboard on Wayland, through the RemoteDesktop portal session.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aai_descriptor::AaiError;
use serde_json::{Map, Value, json};

use super::{cancelled, invalid, number};
use crate::desktop::backend::Desktop;
use crate::desktop::portal::Session;
use crate::desktop::{DesktopConfig, Rect, Space, keys};

/// What one call holds down; released on drop (a cancelled call included).
struct Held {
    session: Arc<Session>,
    buttons: Vec<u8>,
    keys: Vec<u32>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let (session, buttons, keys) = (
            self.session.clone(),
            std::mem::take(&mut self.buttons),
            std::mem::take(&mut self.keys),
        );
        if buttons.is_empty() && keys.is_empty() {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                for key in keys.into_iter().rev() {
                    let _ = session.keysym(key, false).await;
                }
                for button in buttons.into_iter().rev() {
                    let _ = session.button(button, false).await;
                }
            });
        }
    }
}

impl Held {
    async fn key(&mut self, sym: u32, down: bool) -> Result<(), AaiError> {
        self.session.keysym(sym, down).await?;
        if down {
            self.keys.push(sym);
        } else {
            self.keys.retain(|k| *k != sym);
        }
        Ok(())
    }

    async fn button(&mut self, button: u8, down: bool) -> Result<(), AaiError> {
        self.session.button(button, down).await?;
        if down {
            self.buttons.push(button);
        } else {
            self.buttons.retain(|b| *b != button);
        }
        Ok(())
    }
}

fn keysyms(args: &Map<String, Value>, name: &str) -> Result<Vec<u32>, AaiError> {
    args.get(name)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|k| {
                    k.as_str()
                        .and_then(keys::keysym)
                        .ok_or_else(|| invalid(format!("unknown key {k}")))
                })
                .collect()
        })
        .unwrap_or_else(|| Ok(Vec::new()))
}

pub async fn run(
    desktop: &Desktop,
    config: &DesktopConfig,
    tool: &str,
    args: &Map<String, Value>,
    stop: &AtomicBool,
) -> Result<Value, AaiError> {
    if !config.wayland_input {
        return Err(crate::desktop::not_supported(
            "mouse and keyboard on Wayland go through the RemoteDesktop portal, but Wayland does not tell the gateway which window is focused, so protected apps cannot be checked; the user can allow it with \"desktop\": {\"wayland_input\": true} in config.json (or run the gateway with DISPLAY set, on XWayland)",
        ));
    }
    let session = desktop.portal_session().await?;
    let union = session.streams.iter().fold(None::<Rect>, |all, s| {
        let r = Rect::new(s.x, s.y, s.width.max(1) as u32, s.height.max(1) as u32);
        Some(match all {
            None => r,
            Some(a) => {
                let x0 = a.x.min(r.x);
                let y0 = a.y.min(r.y);
                let x1 = (a.x + a.width as i32).max(r.x + r.width as i32);
                let y1 = (a.y + a.height as i32).max(r.y + r.height as i32);
                Rect::new(x0, y0, (x1 - x0) as u32, (y1 - y0) as u32)
            }
        })
    });
    let space = Space::new(union.unwrap_or_default(), config.max_edge());
    let point = |x: &str, y: &str| -> Result<(i32, i32), AaiError> {
        Ok(space.to_physical(number(args, x)?, number(args, y)?))
    };
    let mut held = Held {
        session: session.clone(),
        buttons: Vec::new(),
        keys: Vec::new(),
    };
    let position = |p: (i32, i32)| {
        let (x, y) = space.to_agent(p.0, p.1);
        json!({"x": x, "y": y})
    };
    match tool {
        "mouse_move" => {
            let at = point("x", "y")?;
            session.move_to(at.0, at.1).await?;
            Ok(json!({"success": true, "position": position(at)}))
        }
        "left_click" | "right_click" | "double_click" => {
            let at = point("x", "y")?;
            let modifiers = keysyms(args, "modifiers")?;
            session.move_to(at.0, at.1).await?;
            for m in &modifiers {
                held.key(*m, true).await?;
            }
            let button = if tool == "right_click" { 3 } else { 1 };
            for n in 0..(if tool == "double_click" { 2 } else { 1 }) {
                if n > 0 {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
                held.button(button, true).await?;
                held.button(button, false).await?;
            }
            for m in modifiers.iter().rev() {
                held.key(*m, false).await?;
            }
            Ok(json!({"success": true, "position": position(at)}))
        }
        "mouse_drag" => {
            let (from, to) = (point("from_x", "from_y")?, point("to_x", "to_y")?);
            let ms = args
                .get("duration_ms")
                .and_then(Value::as_u64)
                .unwrap_or(500);
            let steps = (ms / 10).max(1) as i32;
            session.move_to(from.0, from.1).await?;
            held.button(1, true).await?;
            for step in 1..=steps {
                if stop.load(Ordering::SeqCst) {
                    return Err(cancelled());
                }
                let x = from.0 + (to.0 - from.0) * step / steps;
                let y = from.1 + (to.1 - from.1) * step / steps;
                session.move_to(x, y).await?;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            held.button(1, false).await?;
            Ok(json!({"success": true, "position": position(to)}))
        }
        "scroll" => {
            let at = point("x", "y")?;
            let amount = args.get("amount").and_then(Value::as_i64).unwrap_or(3) as i32;
            let (axis, steps) = match args.get("direction").and_then(Value::as_str) {
                Some("up") => (0, -amount),
                Some("down") => (0, amount),
                Some("left") => (1, -amount),
                Some("right") => (1, amount),
                other => {
                    return Err(invalid(format!(
                        "direction {other:?}: up, down, left or right"
                    )));
                }
            };
            session.move_to(at.0, at.1).await?;
            session.scroll(axis, steps).await?;
            Ok(json!({"success": true, "position": position(at), "steps": amount}))
        }
        "type_text" => {
            let text = args
                .get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("`text` is required"))?;
            let delay =
                Duration::from_millis(args.get("delay_ms").and_then(Value::as_u64).unwrap_or(10));
            let mut typed = 0;
            for c in text.chars().filter(|c| *c != '\r') {
                if stop.load(Ordering::SeqCst) {
                    return Err(cancelled());
                }
                let sym = keys::char_keysym(c);
                held.key(sym, true).await?;
                held.key(sym, false).await?;
                typed += 1;
                tokio::time::sleep(delay).await;
            }
            Ok(json!({"success": true, "typed": typed}))
        }
        "key_press" | "hotkey" => {
            let syms = keysyms(args, "keys")?;
            if syms.is_empty() {
                return Err(invalid("`keys` needs at least one key"));
            }
            for s in &syms {
                held.key(*s, true).await?;
            }
            for s in syms.iter().rev() {
                held.key(*s, false).await?;
            }
            Ok(json!({"success": true, "keys": args.get("keys")}))
        }
        other => Err(crate::unknown("local.input", other)),
    }
}
