//! The built-in toolsets that drive the user's desktop, each an app like any other (a real
//! `aai.json` in `toolsets/`): `local.screen` (screenshots, OCR, finding elements),
//! `local.input` (mouse and keyboard, judged by where they land) and `local.apps` (launching,
//! switching and closing apps, windows). They share one desktop connection ([`Display`]) and
//! the backends in [`desktop`]: X11, the Wayland portals, and the programs macOS and Windows
//! run.

pub mod a11y;
pub mod apps;
pub mod desktop;
pub mod input;
pub mod ocr;
pub mod screen;

use std::sync::Arc;

pub(crate) use aai_toolset::{Call, Judged, Setup, Toolset, shipped, tool_names, unknown};

/// The one desktop connection the desktop toolsets of a kit share.
pub type Display = Arc<desktop::backend::Desktop>;

/// The desktop toolsets, in the order they are listed, sharing one connection.
pub fn toolsets(setup: &Setup) -> [Box<dyn Toolset>; 3] {
    let display = Display::new(desktop::backend::Desktop::of(&setup.seat));
    [
        Box::new(screen::Screen::new(setup, &display)),
        Box::new(input::Input::new(setup, &display)),
        Box::new(apps::Apps::new(setup, &display)),
    ]
}

/// What is on top at a point of the gateway's own desktop, for the accessibility executor's
/// clicks by pointer: a click that would land on a protected app's window is refused there
/// (see [`aai_executor::atspi::Protection::refuse_point`]), as `local.input` refuses its own.
pub fn window_at() -> aai_executor::atspi::WindowAt {
    let desktop = desktop::backend::Desktop::of(&aai_toolset::Seat::default());
    Arc::new(move |x, y| {
        let x11 = desktop.x11().map_err(|e| e.message)?;
        Ok(x11.on_top_at(x, y).map(|w| aai_executor::atspi::OnTop {
            gateway: input::landing::is_gate(&w),
            title: w.title,
            class: w.class,
            pid: w.pid,
        }))
    })
}
