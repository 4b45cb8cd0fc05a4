//! The emergency stop's global hotkey on X11: Ctrl+Shift+Esc grabbed on the root window of a
//! connection of its own, so the user can stop every agent without finding a window first.
//! Where another program holds the combination (a desktop's task manager), the grab fails and
//! the stop stays on the dashboard and `aai-gateway stop`.

use x11rb::connection::Connection as _;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{ConnectionExt as _, GrabMode, ModMask};

use aai_descriptor::AaiError;

/// Escape's keysym.
const ESCAPE: u32 = 0xff1b;

/// Grabs Ctrl+Shift+Esc on `display` (the gateway's own when `None`) and calls `pressed` on
/// a thread of its own each time it is pressed, until the display goes away.
///
/// # Errors
/// No display, or the combination is taken by another program.
pub fn watch(
    display: Option<&str>,
    pressed: impl Fn() + Send + 'static,
) -> Result<std::thread::JoinHandle<()>, AaiError> {
    let failed = |e: &dyn std::fmt::Display| aai_toolset::failed(format!("the stop hotkey: {e}"));
    let (conn, screen) = x11rb::connect(display).map_err(|e| failed(&e))?;
    let root = conn.setup().roots[screen].root;
    let (min, max) = (conn.setup().min_keycode, conn.setup().max_keycode);
    let map = conn
        .get_keyboard_mapping(min, max - min + 1)
        .map_err(|e| failed(&e))?
        .reply()
        .map_err(|e| failed(&e))?;
    let per = usize::from(map.keysyms_per_keycode.max(1));
    let keycode = map
        .keysyms
        .chunks(per)
        .position(|syms| syms.contains(&ESCAPE))
        .and_then(|i| u8::try_from(i).ok())
        .map(|i| min + i)
        .ok_or_else(|| failed(&"the keyboard map has no Escape key"))?;
    let base = ModMask::CONTROL | ModMask::SHIFT;
    // Caps Lock (LOCK) and Num Lock (M2) must not stop the combination from working.
    for extra in [
        ModMask::from(0u16),
        ModMask::LOCK,
        ModMask::M2,
        ModMask::LOCK | ModMask::M2,
    ] {
        conn.grab_key(
            false,
            root,
            base | extra,
            keycode,
            GrabMode::ASYNC,
            GrabMode::ASYNC,
        )
        .map_err(|e| failed(&e))?
        .check()
        .map_err(|e| {
            failed(&format!(
                "Ctrl+Shift+Esc is taken by another program ({e:?})"
            ))
        })?;
    }
    conn.flush().map_err(|e| failed(&e))?;
    Ok(std::thread::spawn(move || {
        while let Ok(event) = conn.wait_for_event() {
            if let Event::KeyPress(key) = event
                && key.detail == keycode
            {
                pressed();
            }
        }
    }))
}
