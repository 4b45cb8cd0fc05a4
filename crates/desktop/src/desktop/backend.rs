//! Which backend drives this desktop, and why none does when none can.
//!
//! Linux on X11 (or XWayland with `DISPLAY` set) is driven through [`super::x11`]. A Wayland
//! session without X, macOS and Windows are refused with AUTOMATION_NOT_SUPPORTED naming the
//! missing piece, so the agent can fall back to an app's own interface.

use std::sync::{Arc, Mutex};

use aai_descriptor::AaiError;

use super::x11::X11;

/// The desktop connection of one gateway: made on first use, made again after a failure.
/// By default the display and session bus are the gateway's own (`DISPLAY`,
/// `DBUS_SESSION_BUS_ADDRESS`); [`Desktop::on`] names others (tests, a second seat).
#[derive(Default)]
pub struct Desktop {
    x11: Mutex<Option<Arc<X11>>>,
    /// The RemoteDesktop portal session on Wayland, started on first input.
    portal: tokio::sync::Mutex<Option<Arc<super::portal::Session>>>,
    display: Option<String>,
    session_bus: Option<String>,
    /// A Wayland session without X (set by [`Desktop::on_wayland`]; else read from the
    /// environment).
    wayland: bool,
}

const WAYLAND_INPUT: &str = "this is a Wayland session without XWayland: mouse, keyboard, windows and element bounds need the XDG desktop portals' RemoteDesktop session, which this version does not drive yet (screenshots work through the Screenshot portal)";

/// Why this machine's desktop cannot be driven, if it cannot.
pub fn unsupported_reason() -> Option<String> {
    if super::remote::native().is_some() {
        // macOS and Windows are driven by their fixed programs, not X11.
        return Some("this OS is driven by its own desktop program, not X11".into());
    }
    let display = std::env::var_os("DISPLAY").filter(|d| !d.is_empty());
    let wayland = std::env::var_os("WAYLAND_DISPLAY").filter(|d| !d.is_empty());
    match (display, wayland) {
        (Some(_), _) => None,
        (None, Some(_)) => Some("this is a Wayland session without XWayland (DISPLAY is not set): screenshots go through the XDG Screenshot portal, but mouse, keyboard, windows and element bounds need the XDG desktop portals' RemoteDesktop session, which this version does not drive yet. Start the gateway with DISPLAY set to use XWayland".into()),
        (None, None) => Some("no graphical session: neither DISPLAY nor WAYLAND_DISPLAY is set for the gateway".into()),
    }
}

impl Desktop {
    /// The desktop of `seat`.
    pub fn of(seat: &aai_toolset::Seat) -> Self {
        Self {
            x11: Mutex::default(),
            portal: tokio::sync::Mutex::default(),
            display: seat.display.clone(),
            session_bus: seat.session_bus.clone(),
            wayland: seat.wayland,
        }
    }

    /// A desktop on this X display and session bus instead of the gateway's own.
    pub fn on(display: &str, session_bus: Option<&str>) -> Self {
        Self {
            x11: Mutex::default(),
            portal: tokio::sync::Mutex::default(),
            display: Some(display.to_owned()),
            session_bus: session_bus.map(str::to_owned),
            wayland: false,
        }
    }

    /// A Wayland session without X whose portals are on `session_bus`.
    pub fn on_wayland(session_bus: &str) -> Self {
        Self {
            x11: Mutex::default(),
            portal: tokio::sync::Mutex::default(),
            display: None,
            session_bus: Some(session_bus.to_owned()),
            wayland: true,
        }
    }

    /// Whether this is a Wayland session without X: screenshots go through the portal.
    pub fn wayland_only(&self) -> bool {
        if self.wayland {
            return true;
        }
        self.display.is_none()
            && super::remote::native().is_none()
            && std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty())
            && std::env::var_os("WAYLAND_DISPLAY").is_some_and(|d| !d.is_empty())
    }

    /// The X display apps started from here should use (`None`: the gateway's own).
    pub fn display(&self) -> Option<&str> {
        self.display.as_deref()
    }

    /// The session bus to find the accessibility bus on (`None`: the gateway's own).
    pub fn session_bus(&self) -> Option<&str> {
        self.session_bus.as_deref()
    }

    /// The RemoteDesktop portal session (Wayland), started on first use — the desktop asks the
    /// user once — and kept for the gateway's life.
    ///
    /// # Errors
    /// No portal, or the user declined.
    pub async fn portal_session(&self) -> Result<Arc<super::portal::Session>, AaiError> {
        let mut guard = self.portal.lock().await;
        if let Some(session) = guard.as_ref() {
            return Ok(session.clone());
        }
        let session = Arc::new(super::portal::Session::start(self.session_bus()).await?);
        *guard = Some(session.clone());
        Ok(session)
    }

    /// The X connection if one is open (nothing was ever sent when none is).
    pub fn connected(&self) -> Option<Arc<X11>> {
        self.x11.lock().ok().and_then(|guard| guard.clone())
    }

    /// The X connection, connecting when needed.
    ///
    /// # Errors
    /// AUTOMATION_NOT_SUPPORTED naming what is missing, or why the display did not answer.
    pub fn x11(&self) -> Result<Arc<X11>, AaiError> {
        if self.wayland {
            return Err(super::not_supported(WAYLAND_INPUT));
        }
        if self.display.is_none()
            && let Some(reason) = unsupported_reason()
        {
            return Err(super::not_supported(&reason));
        }
        let mut guard = self
            .x11
            .lock()
            .map_err(|_| aai_toolset::failed("the desktop connection is unavailable"))?;
        if let Some(x) = guard.as_ref() {
            // A connection the server closed is replaced.
            if x.sync().is_ok() {
                return Ok(x.clone());
            }
        }
        let x = Arc::new(X11::connect(self.display.as_deref())?);
        *guard = Some(x.clone());
        Ok(x)
    }
}

impl Desktop {
    /// What drives this desktop (`X11 :0, window manager Openbox`), or why nothing can.
    pub fn describe(&self) -> Result<String, AaiError> {
        match super::remote::native() {
            Some(aai_descriptor::Platform::Macos) => {
                return Ok("JXA program through osascript (CGEvent, CGWindowList, System Events; needs the Accessibility and Screen Recording permissions)".into());
            }
            Some(_) => {
                return Ok("PowerShell program (System.Drawing, SendInput, UI Automation)".into());
            }
            None => {}
        }
        let x = self.x11()?;
        let display = self
            .display
            .clone()
            .or_else(|| std::env::var("DISPLAY").ok())
            .unwrap_or_default();
        Ok(format!(
            "X11 {display} ({}x{}, {} display(s))",
            x.desktop().width,
            x.desktop().height,
            x.monitors().len()
        ))
    }

    /// Whether an EWMH window manager runs, for the tools that need one.
    pub fn window_manager(&self) -> Result<(), AaiError> {
        if super::remote::native().is_some() {
            return Ok(());
        }
        let x = self.x11()?;
        if x.has_window_manager() {
            Ok(())
        } else {
            Err(AaiError::new(
                aai_descriptor::ErrorKind::AutomationNotSupported,
                "no EWMH window manager is running on this display: focusing, minimizing, moving and closing windows need one (openbox, xfwm4, mutter, kwin, …)",
            ))
        }
    }
}
