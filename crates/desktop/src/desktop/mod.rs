//! What the screen, input and apps toolsets share: the one coordinate space the agent sees,
//! the protected apps, and the desktop backend (X11 today; see [`backend`]).
//!
//! **One space.** The whole desktop (every monitor) is scaled so its long edge is at most
//! `desktop.max_edge` pixels (1568 by default, never above 2000). Every coordinate the agent
//! sends or receives — screenshot pixels (offset by the image's `origin`), click points, OCR
//! boxes, element bounds, window bounds — is in that space; the gateway alone converts to
//! physical pixels.

pub mod backend;
pub mod hotkey;
pub mod keys;
pub mod portal;
pub mod remote;
pub mod x11;

use serde_json::{Value, json};

use aai_descriptor::{AaiError, ErrorKind};

pub use aai_toolset::{DEFAULT_MAX_EDGE, DEFAULT_PROTECTED, DesktopConfig, MAX_EDGE_LIMIT};

/// A rectangle in physical pixels, or in the agent's space (the type says which by use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

impl Rect {
    pub fn new(x: i32, y: i32, width: u32, height: u32) -> Self {
        Self {
            x,
            y,
            width,
            height,
        }
    }

    /// The part of `self` inside `other`, if any.
    pub fn intersect(&self, other: &Rect) -> Option<Rect> {
        let x0 = self.x.max(other.x);
        let y0 = self.y.max(other.y);
        let x1 = (self.x + self.width as i32).min(other.x + other.width as i32);
        let y1 = (self.y + self.height as i32).min(other.y + other.height as i32);
        (x1 > x0 && y1 > y0).then(|| Rect::new(x0, y0, (x1 - x0) as u32, (y1 - y0) as u32))
    }

    pub fn contains(&self, x: i32, y: i32) -> bool {
        x >= self.x
            && y >= self.y
            && x < self.x + self.width as i32
            && y < self.y + self.height as i32
    }

    pub fn to_json(self) -> Value {
        json!({"x": self.x, "y": self.y, "width": self.width, "height": self.height})
    }
}

/// The mapping between physical pixels and the agent's space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Space {
    /// The whole desktop, physical pixels.
    pub desktop: Rect,
    /// Agent units per physical pixel (≤ 1).
    pub scale: f64,
}

impl Space {
    /// The space for a desktop of this size with this long-edge limit.
    pub fn new(desktop: Rect, max_edge: u32) -> Self {
        let long = desktop.width.max(desktop.height).max(1);
        let scale = (f64::from(max_edge) / f64::from(long)).min(1.0);
        Self { desktop, scale }
    }

    /// A physical point as the agent sees it.
    pub fn to_agent(&self, x: i32, y: i32) -> (i32, i32) {
        (
            (f64::from(x - self.desktop.x) * self.scale).round() as i32,
            (f64::from(y - self.desktop.y) * self.scale).round() as i32,
        )
    }

    /// An agent point in physical pixels, clamped to the desktop.
    pub fn to_physical(&self, x: f64, y: f64) -> (i32, i32) {
        let px = (x / self.scale).round() as i64 + i64::from(self.desktop.x);
        let py = (y / self.scale).round() as i64 + i64::from(self.desktop.y);
        let max_x = i64::from(self.desktop.x) + i64::from(self.desktop.width) - 1;
        let max_y = i64::from(self.desktop.y) + i64::from(self.desktop.height) - 1;
        (
            px.clamp(i64::from(self.desktop.x), max_x) as i32,
            py.clamp(i64::from(self.desktop.y), max_y) as i32,
        )
    }

    /// A physical rectangle in the agent's space.
    pub fn rect_to_agent(&self, r: Rect) -> Rect {
        let (x, y) = self.to_agent(r.x, r.y);
        Rect::new(
            x,
            y,
            (f64::from(r.width) * self.scale).round().max(1.0) as u32,
            (f64::from(r.height) * self.scale).round().max(1.0) as u32,
        )
    }

    /// An agent rectangle in physical pixels, clipped to the desktop.
    pub fn rect_to_physical(&self, r: Rect) -> Option<Rect> {
        let x = f64::from(r.x) / self.scale + f64::from(self.desktop.x);
        let y = f64::from(r.y) / self.scale + f64::from(self.desktop.y);
        let physical = Rect::new(
            x.round() as i32,
            y.round() as i32,
            (f64::from(r.width) / self.scale).round() as u32,
            (f64::from(r.height) / self.scale).round() as u32,
        );
        physical.intersect(&self.desktop)
    }

    /// The agent's space as JSON: its size and scale.
    pub fn describe(&self) -> Value {
        json!({
            "width": (f64::from(self.desktop.width) * self.scale).round() as u32,
            "height": (f64::from(self.desktop.height) * self.scale).round() as u32,
            "scale": self.scale,
        })
    }
}

/// A monitor: its name and bounds (physical).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitor {
    pub name: String,
    pub bounds: Rect,
    pub primary: bool,
}

/// A top-level window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub id: u32,
    pub title: String,
    /// The application class (X11 `WM_CLASS`'s class part), e.g. `XTerm`.
    pub class: String,
    /// The instance name (`WM_CLASS`'s first part), e.g. `xterm`.
    pub instance: String,
    pub pid: Option<u32>,
    /// Physical pixels, the client area.
    pub bounds: Rect,
    /// Physical pixels, the window with the decorations the window manager draws around it
    /// (title bar, borders): where a click lands on this window.
    pub frame: Rect,
    pub focused: bool,
    pub minimized: bool,
}

/// The agent's argument for a rectangle: `{x, y, width, height}`.
pub fn rect_arg(value: Option<&Value>, name: &str) -> Result<Option<Rect>, AaiError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let number = |key: &str| value.get(key).and_then(Value::as_f64);
    match (number("x"), number("y"), number("width"), number("height")) {
        (Some(x), Some(y), Some(w), Some(h)) if w >= 1.0 && h >= 1.0 => Ok(Some(Rect::new(
            x.round() as i32,
            y.round() as i32,
            w.round() as u32,
            h.round() as u32,
        ))),
        _ => Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!("`{name}` needs x, y, width and height (width and height at least 1)"),
        )),
    }
}

/// The error for a desktop this backend cannot drive, naming what is missing.
pub fn not_supported(what: &str) -> AaiError {
    AaiError::new(ErrorKind::AutomationNotSupported, what.to_owned())
}

/// Runs blocking desktop work off the async threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, aai_descriptor::AaiError> + Send + 'static,
) -> Result<T, aai_descriptor::AaiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| aai_toolset::failed(format!("the desktop task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_edge_is_scaled_and_points_round_trip() {
        let space = Space::new(Rect::new(0, 0, 3840, 1080), 1568);
        assert!((space.scale - 1568.0 / 3840.0).abs() < 1e-9);
        assert_eq!(space.describe()["width"], 1568);
        assert_eq!(space.describe()["height"], 441);
        // A point on the second monitor survives the trip within one physical pixel.
        let (ax, ay) = space.to_agent(2880, 540);
        let (px, py) = space.to_physical(f64::from(ax), f64::from(ay));
        assert!((px - 2880).abs() <= 3 && (py - 540).abs() <= 3, "{px},{py}");
        // Outside the desktop is clamped, never beyond it.
        assert_eq!(space.to_physical(99_999.0, -5.0), (3839, 0));
        // A small desktop is not enlarged.
        assert_eq!(Space::new(Rect::new(0, 0, 800, 600), 1568).scale, 1.0);
    }

    #[test]
    fn protected_apps_match_titles_and_classes_and_config_adds() {
        let config = DesktopConfig {
            protected_apps: vec!["Secret Notes".into()],
            ..DesktopConfig::default()
        };
        assert!(config.protects("Vault - KeePassXC", "KeePassXC").is_some());
        assert!(config.protects("x", "Bitwarden").is_some());
        assert!(config.protects("my secret notes", "Gedit").is_some());
        assert!(config.protects("README.md", "Gedit").is_none());
        let none = DesktopConfig {
            no_default_protected_apps: true,
            ..DesktopConfig::default()
        };
        assert!(none.protects("KeePassXC", "KeePassXC").is_none());
        assert_eq!(
            DesktopConfig {
                max_edge: 9000,
                ..DesktopConfig::default()
            }
            .max_edge(),
            MAX_EDGE_LIMIT
        );
    }
}
