//! The X11 backend, in pure Rust (`x11rb`): screen capture with `GetImage`, monitors from
//! RandR, input through XTEST, windows through EWMH (`_NET_CLIENT_LIST`, `_NET_ACTIVE_WINDOW`,
//! `_NET_WM_STATE`, …), which every common window manager speaks.
//!
//! Characters the keyboard map lacks (accents on a US layout, CJK, emoji) are typed by
//! giving a spare keycode (one no key produces) that character's keysym, then pressing it.
//! The spare keycodes are used in turn and a character keeps its keycode while it can, so a
//! client reading the map a little late still sees the right character.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aai_descriptor::AaiError;
use image::RgbImage;
use x11rb::connection::Connection;
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::res::ConnectionExt as _;
use x11rb::protocol::xproto::{
    AtomEnum, ClientMessageEvent, ConfigureWindowAux, ConnectionExt as _, EventMask, ImageFormat,
    MapState,
};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

use super::{Monitor, Rect, Window};

fn x11<E: std::fmt::Display>(error: E) -> AaiError {
    aai_toolset::failed(format!("X11: {error}"))
}

x11rb::atom_manager! {
    Atoms: AtomsCookie {
        _NET_CLIENT_LIST,
        _NET_CLIENT_LIST_STACKING,
        _NET_ACTIVE_WINDOW,
        _NET_WM_NAME,
        _NET_WM_PID,
        _NET_WM_STATE,
        _NET_WM_STATE_HIDDEN,
        _NET_WM_STATE_MAXIMIZED_VERT,
        _NET_WM_STATE_MAXIMIZED_HORZ,
        _NET_CLOSE_WINDOW,
        _NET_MOVERESIZE_WINDOW,
        _NET_SUPPORTING_WM_CHECK,
        _NET_FRAME_EXTENTS,
        WM_CHANGE_STATE,
        UTF8_STRING,
    }
}

/// The keyboard map as the server has it, and which spare keycodes hold which character.
struct Keymap {
    min: u8,
    per: u8,
    syms: Vec<u32>,
    /// Keycodes with no keysym at start: free for characters the map lacks.
    spare: Vec<u8>,
    /// keysym → spare keycode it was given; `order` is least recently given first.
    given: HashMap<u32, u8>,
    order: Vec<u8>,
}

impl Keymap {
    /// The keycode and whether Shift is needed, for a keysym the map has.
    fn find(&self, sym: u32) -> Option<(u8, bool)> {
        let per = usize::from(self.per);
        for (index, chunk) in self.syms.chunks(per).enumerate() {
            let keycode = self.min.saturating_add(index as u8);
            if chunk.first() == Some(&sym) {
                return Some((keycode, false));
            }
            if chunk.get(1) == Some(&sym) {
                return Some((keycode, true));
            }
        }
        None
    }
}

/// A connection to one X display.
pub struct X11 {
    conn: RustConnection,
    root: u32,
    width: u16,
    height: u16,
    atoms: Atoms,
    keymap: Mutex<Option<Keymap>>,
    /// The server has the X-Resource extension (1.2+): a window's process is the one the
    /// server knows by its connection, not what the window's `_NET_WM_PID` claims.
    xres: bool,
}

/// Buttons and keys pressed by one call: every one is released when this is dropped, so a
/// cancelled, failed or timed-out call never leaves a key or button down.
pub struct Held<'a> {
    x: &'a X11,
    keys: Vec<u8>,
    buttons: Vec<u8>,
}

impl Held<'_> {
    pub fn key(&mut self, keycode: u8, down: bool) -> Result<(), AaiError> {
        self.x.fake(if down { 2 } else { 3 }, keycode, 0, 0)?;
        if down {
            self.keys.push(keycode);
        } else {
            self.keys.retain(|k| *k != keycode);
        }
        Ok(())
    }

    pub fn button(&mut self, button: u8, down: bool) -> Result<(), AaiError> {
        self.x.fake(if down { 4 } else { 5 }, button, 0, 0)?;
        if down {
            self.buttons.push(button);
        } else {
            self.buttons.retain(|b| *b != button);
        }
        Ok(())
    }

    /// Presses and releases the key that types `sym` (with Shift when the map needs it).
    pub fn tap_keysym(&mut self, sym: u32) -> Result<(), AaiError> {
        let (keycode, shift) = self.x.keycode(sym)?;
        let shift_code = if shift {
            Some(self.x.keycode(0xffe1)?.0)
        } else {
            None
        };
        if let Some(code) = shift_code {
            self.key(code, true)?;
        }
        self.key(keycode, true)?;
        self.key(keycode, false)?;
        if let Some(code) = shift_code {
            self.key(code, false)?;
        }
        self.x.flush()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for keycode in std::mem::take(&mut self.keys).into_iter().rev() {
            let _ = self.x.fake(3, keycode, 0, 0);
        }
        for button in std::mem::take(&mut self.buttons).into_iter().rev() {
            let _ = self.x.fake(5, button, 0, 0);
        }
        let _ = self.x.conn.sync();
    }
}

impl X11 {
    /// Connects to `display`, or `$DISPLAY`.
    ///
    /// # Errors
    /// No display, or one that does not answer.
    pub fn connect(display: Option<&str>) -> Result<Self, AaiError> {
        let (conn, screen) = x11rb::connect(display).map_err(|e| {
            super::not_supported(&format!(
                "cannot reach the X display {:?}: {e}",
                display
                    .map(str::to_owned)
                    .unwrap_or_else(|| std::env::var("DISPLAY").unwrap_or_default())
            ))
        })?;
        let setup = conn.setup();
        let root = setup.roots.get(screen).ok_or_else(|| x11("no screen"))?;
        let (root_id, width, height) = (root.root, root.width_in_pixels, root.height_in_pixels);
        let atoms = Atoms::new(&conn).map_err(x11)?.reply().map_err(x11)?;
        let xres = conn
            .res_query_version(1, 2)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some_and(|v| (v.server_major, v.server_minor) >= (1, 2));
        Ok(Self {
            conn,
            root: root_id,
            width,
            height,
            atoms,
            keymap: Mutex::new(None),
            xres,
        })
    }

    /// The whole desktop (the root window), physical pixels.
    pub fn desktop(&self) -> Rect {
        Rect::new(0, 0, u32::from(self.width), u32::from(self.height))
    }

    /// The monitors (RandR 1.5), or the root as one when RandR has none.
    pub fn monitors(&self) -> Vec<Monitor> {
        let listed = self
            .conn
            .randr_get_monitors(self.root, false)
            .ok()
            .and_then(|c| c.reply().ok())
            .map(|reply| reply.monitors)
            .unwrap_or_default();
        // Every monitor, virtual ones (`xrandr --setmonitor … none`) included, that has a size.
        let mut monitors: Vec<Monitor> = listed
            .iter()
            .filter(|m| m.width > 0 && m.height > 0)
            .map(|m| Monitor {
                name: self
                    .conn
                    .get_atom_name(m.name)
                    .ok()
                    .and_then(|c| c.reply().ok())
                    .map(|r| String::from_utf8_lossy(&r.name).into_owned())
                    .unwrap_or_default(),
                bounds: Rect::new(
                    i32::from(m.x),
                    i32::from(m.y),
                    u32::from(m.width),
                    u32::from(m.height),
                ),
                primary: m.primary,
            })
            .collect();
        if monitors.is_empty() {
            monitors.push(Monitor {
                name: "screen".into(),
                bounds: self.desktop(),
                primary: true,
            });
        }
        // A monitor that is just the whole screen beside real ones (Xvfb's output, say) is not
        // a display of its own.
        if monitors.len() > 1 {
            let whole = self.desktop();
            monitors.retain(|m| m.bounds != whole);
        }
        monitors.sort_by_key(|m| (!m.primary, m.bounds.x, m.bounds.y));
        monitors
    }

    /// The pixels of `rect` (physical, inside the desktop) as RGB.
    ///
    /// # Errors
    /// The server refused, or its pixel format is not 24/32-bit true colour.
    pub fn capture(&self, rect: Rect) -> Result<RgbImage, AaiError> {
        let rect = rect
            .intersect(&self.desktop())
            .ok_or_else(|| aai_toolset::failed("the area is outside the screen"))?;
        let reply = self
            .conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                self.root,
                rect.x as i16,
                rect.y as i16,
                rect.width as u16,
                rect.height as u16,
                !0,
            )
            .map_err(x11)?
            .reply()
            .map_err(x11)?;
        let bits = self
            .conn
            .setup()
            .pixmap_formats
            .iter()
            .find(|f| f.depth == reply.depth)
            .map_or(0, |f| f.bits_per_pixel);
        if bits != 32 || reply.depth < 24 {
            return Err(super::not_supported(&format!(
                "screen capture needs a 24- or 32-bit true-colour display; this one is {}-bit at {bits} bits per pixel",
                reply.depth
            )));
        }
        let lsb =
            self.conn.setup().image_byte_order == x11rb::protocol::xproto::ImageOrder::LSB_FIRST;
        let mut rgb = Vec::with_capacity(rect.width as usize * rect.height as usize * 3);
        for px in reply.data.chunks_exact(4) {
            if lsb {
                rgb.extend_from_slice(&[px[2], px[1], px[0]]);
            } else {
                rgb.extend_from_slice(&[px[1], px[2], px[3]]);
            }
        }
        RgbImage::from_raw(rect.width, rect.height, rgb)
            .ok_or_else(|| aai_toolset::failed("the screen image has an unexpected size"))
    }

    fn property(&self, window: u32, atom: u32, kind: impl Into<u32>) -> Option<Vec<u8>> {
        let reply = self
            .conn
            .get_property(false, window, atom, kind, 0, 1 << 16)
            .ok()?
            .reply()
            .ok()?;
        (reply.format != 0).then_some(reply.value)
    }

    fn property32(&self, window: u32, atom: u32, kind: impl Into<u32>) -> Vec<u32> {
        self.property(window, atom, kind)
            .map(|bytes| {
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The focused top-level window (`_NET_ACTIVE_WINDOW`), if the window manager says.
    pub fn active(&self) -> Option<u32> {
        self.property32(self.root, self.atoms._NET_ACTIVE_WINDOW, AtomEnum::WINDOW)
            .first()
            .copied()
            .filter(|w| *w != 0)
    }

    /// The top-level windows, in stacking order of the window manager's list.
    pub fn windows(&self) -> Vec<Window> {
        let mut ids = self.property32(self.root, self.atoms._NET_CLIENT_LIST, AtomEnum::WINDOW);
        if ids.is_empty() && !self.has_window_manager() {
            // No EWMH window manager: the mapped children of the root that name a class.
            ids = self
                .conn
                .query_tree(self.root)
                .ok()
                .and_then(|c| c.reply().ok())
                .map(|t| t.children)
                .unwrap_or_default()
                .into_iter()
                .filter(|w| {
                    self.conn
                        .get_window_attributes(*w)
                        .ok()
                        .and_then(|c| c.reply().ok())
                        .is_some_and(|a| a.map_state == MapState::VIEWABLE)
                        && self
                            .property(*w, AtomEnum::WM_CLASS.into(), AtomEnum::STRING)
                            .is_some()
                })
                .collect();
        }
        let active = self.active();
        ids.into_iter()
            .filter_map(|id| self.window(id, active))
            .collect()
    }

    /// The process of the client that made window `id`: as the X server knows it (the
    /// X-Resource extension: the peer of the client's local connection), which no client can
    /// set; `_NET_WM_PID`, which any client can set on any window, only on a server without
    /// the extension. `None` for a client the server cannot name (over TCP).
    pub fn owner_pid(&self, id: u32) -> Option<u32> {
        use x11rb::protocol::res::{ClientIdMask, ClientIdSpec};
        if !self.xres {
            return self
                .property32(id, self.atoms._NET_WM_PID, AtomEnum::CARDINAL)
                .first()
                .copied();
        }
        let spec = ClientIdSpec {
            client: id,
            mask: ClientIdMask::LOCAL_CLIENT_PID,
        };
        let reply = self.conn.res_query_client_ids(&[spec]).ok()?.reply().ok()?;
        reply
            .ids
            .iter()
            .find(|v| v.spec.mask.contains(ClientIdMask::LOCAL_CLIENT_PID))
            .and_then(|v| v.value.first().copied())
    }

    fn window(&self, id: u32, active: Option<u32>) -> Option<Window> {
        let geometry = self.conn.get_geometry(id).ok()?.reply().ok()?;
        let at = self
            .conn
            .translate_coordinates(id, self.root, 0, 0)
            .ok()?
            .reply()
            .ok()?;
        let title = self
            .property(id, self.atoms._NET_WM_NAME, self.atoms.UTF8_STRING)
            .or_else(|| self.property(id, AtomEnum::WM_NAME.into(), AtomEnum::ANY))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let class = self
            .property(id, AtomEnum::WM_CLASS.into(), AtomEnum::STRING)
            .unwrap_or_default();
        let mut parts = class
            .split(|b| *b == 0)
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let instance = parts.next().unwrap_or_default();
        let class = parts.next().unwrap_or_default();
        let pid = self.owner_pid(id);
        let state = self.property32(id, self.atoms._NET_WM_STATE, AtomEnum::ATOM);
        let bounds = Rect::new(
            i32::from(at.dst_x),
            i32::from(at.dst_y),
            u32::from(geometry.width),
            u32::from(geometry.height),
        );
        // The window manager's decorations: left, right, top, bottom.
        let frame = match self
            .property32(id, self.atoms._NET_FRAME_EXTENTS, AtomEnum::CARDINAL)
            .as_slice()
        {
            &[left, right, top, bottom] => {
                let side = |v: u32| i32::try_from(v.min(4096)).unwrap_or(0);
                Rect::new(
                    bounds.x - side(left),
                    bounds.y - side(top),
                    bounds.width + left.min(4096) + right.min(4096),
                    bounds.height + top.min(4096) + bottom.min(4096),
                )
            }
            _ => bounds,
        };
        Some(Window {
            id,
            title,
            class,
            instance,
            pid,
            bounds,
            frame,
            focused: active == Some(id),
            minimized: state.contains(&self.atoms._NET_WM_STATE_HIDDEN),
        })
    }

    /// The visible top-level window whose frame (client area and decorations) holds the
    /// physical point `(x, y)`: the
    /// topmost by the window manager's stacking order (`_NET_CLIENT_LIST_STACKING`), else the
    /// last such in the client list.
    pub fn window_at(&self, x: i32, y: i32) -> Option<Window> {
        let stacking = self.property32(
            self.root,
            self.atoms._NET_CLIENT_LIST_STACKING,
            AtomEnum::WINDOW,
        );
        let windows = self.windows();
        let rank = |w: &Window| stacking.iter().position(|id| *id == w.id);
        windows
            .into_iter()
            .enumerate()
            .filter(|(_, w)| !w.minimized && w.frame.contains(x, y))
            .max_by_key(|(listed, w)| (rank(w), *listed))
            .map(|(_, w)| w)
    }

    /// What a click at the physical point `(x, y)` would land on, as the server stacks its
    /// windows: a popup the window manager does not manage (a menu, a tooltip: an
    /// override-redirect window) is itself, with the process that owns it; a managed window
    /// is the client the window manager framed ([`X11::window_at`]).
    pub fn on_top_at(&self, x: i32, y: i32) -> Option<Window> {
        let tree = self.conn.query_tree(self.root).ok()?.reply().ok()?;
        for &child in tree.children.iter().rev() {
            let Some(attributes) = self
                .conn
                .get_window_attributes(child)
                .ok()
                .and_then(|c| c.reply().ok())
            else {
                continue;
            };
            if attributes.map_state != MapState::VIEWABLE {
                continue;
            }
            let Some(geometry) = self
                .conn
                .get_geometry(child)
                .ok()
                .and_then(|c| c.reply().ok())
            else {
                continue;
            };
            let border = u32::from(geometry.border_width) * 2;
            let place = Rect::new(
                i32::from(geometry.x),
                i32::from(geometry.y),
                u32::from(geometry.width) + border,
                u32::from(geometry.height) + border,
            );
            if !place.contains(x, y) {
                continue;
            }
            return if attributes.override_redirect {
                self.window(child, None)
            } else {
                self.window_at(x, y)
            };
        }
        None
    }

    /// Whether an EWMH window manager runs (windows can be listed, focused, moved by it).
    pub fn has_window_manager(&self) -> bool {
        !self
            .property32(
                self.root,
                self.atoms._NET_SUPPORTING_WM_CHECK,
                AtomEnum::WINDOW,
            )
            .is_empty()
    }

    /// The pointer's position (physical) and which buttons are down (bit 8 = button 1).
    pub fn pointer(&self) -> Result<(i32, i32, u16), AaiError> {
        let reply = self
            .conn
            .query_pointer(self.root)
            .map_err(x11)?
            .reply()
            .map_err(x11)?;
        Ok((
            i32::from(reply.root_x),
            i32::from(reply.root_y),
            u16::from(reply.mask),
        ))
    }

    /// The keycodes held down right now.
    pub fn keys_down(&self) -> Result<Vec<u8>, AaiError> {
        let keys = self
            .conn
            .query_keymap()
            .map_err(x11)?
            .reply()
            .map_err(x11)?
            .keys;
        Ok((0..=255u8)
            .filter(|k| keys[usize::from(*k / 8)] & (1 << (k % 8)) != 0)
            .collect())
    }

    /// Releases every key and mouse button held down now, whoever pressed it (the emergency
    /// stop); returns how many were released.
    pub fn release_all(&self) -> Result<usize, AaiError> {
        let keys = self.keys_down()?;
        let (_, _, mask) = self.pointer()?;
        for keycode in &keys {
            self.fake(3, *keycode, 0, 0)?;
        }
        // Button1Mask is bit 8, Button5Mask bit 12.
        let buttons: Vec<u8> = (1..=5u8).filter(|b| mask & (1 << (7 + b)) != 0).collect();
        for button in &buttons {
            self.fake(5, *button, 0, 0)?;
        }
        self.sync()?;
        Ok(keys.len() + buttons.len())
    }

    fn fake(&self, kind: u8, detail: u8, x: i16, y: i16) -> Result<(), AaiError> {
        self.conn
            .xtest_fake_input(kind, detail, 0, self.root, x, y, 0)
            .map_err(x11)?;
        Ok(())
    }

    /// Moves the pointer to a physical point.
    pub fn move_to(&self, x: i32, y: i32) -> Result<(), AaiError> {
        self.fake(6, 0, x as i16, y as i16)?;
        self.flush()
    }

    /// Starts tracking what one call presses.
    pub fn hold(&self) -> Held<'_> {
        Held {
            x: self,
            keys: Vec::new(),
            buttons: Vec::new(),
        }
    }

    pub fn flush(&self) -> Result<(), AaiError> {
        self.conn.flush().map_err(x11)
    }

    /// Waits until the server has handled everything sent so far.
    pub fn sync(&self) -> Result<(), AaiError> {
        self.conn.sync().map_err(x11)
    }

    fn load_keymap(&self) -> Result<Keymap, AaiError> {
        let setup = self.conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let reply = self
            .conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(x11)?
            .reply()
            .map_err(x11)?;
        let per = reply.keysyms_per_keycode.max(1);
        let spare = reply
            .keysyms
            .chunks(usize::from(per))
            .enumerate()
            .filter(|(_, syms)| syms.iter().all(|s| *s == 0))
            .map(|(i, _)| min.saturating_add(i as u8))
            .collect();
        Ok(Keymap {
            min,
            per,
            syms: reply.keysyms,
            spare,
            given: HashMap::new(),
            order: Vec::new(),
        })
    }

    /// The keycode for `sym` (and whether it needs Shift); a keysym the map lacks is given a
    /// spare keycode.
    fn keycode(&self, sym: u32) -> Result<(u8, bool), AaiError> {
        let mut guard = self
            .keymap
            .lock()
            .map_err(|_| aai_toolset::failed("the keyboard map is unavailable"))?;
        if guard.is_none() {
            *guard = Some(self.load_keymap()?);
        }
        let Some(map) = guard.as_mut() else {
            return Err(aai_toolset::failed("the keyboard map is unavailable"));
        };
        if let Some(found) = map.find(sym) {
            return Ok(found);
        }
        if let Some(keycode) = map.given.get(&sym).copied() {
            map.order.retain(|k| *k != keycode);
            map.order.push(keycode);
            return Ok((keycode, false));
        }
        // The next spare keycode: one never given, else the least recently given.
        let keycode = match map.spare.iter().find(|k| !map.order.contains(k)) {
            Some(k) => *k,
            None => {
                if map.order.is_empty() {
                    return Err(super::not_supported(
                        "the keyboard map has no spare keycode to type this character with",
                    ));
                }
                map.order.remove(0)
            }
        };
        map.given.retain(|_, k| *k != keycode);
        let syms = vec![sym; usize::from(map.per)];
        self.conn
            .change_keyboard_mapping(1, keycode, map.per, &syms)
            .map_err(x11)?;
        self.conn.sync().map_err(x11)?;
        // Let clients read the new map before the key arrives.
        std::thread::sleep(Duration::from_millis(5));
        map.given.insert(sym, keycode);
        map.order.push(keycode);
        Ok((keycode, false))
    }

    /// The keycode that types `sym` (a spare one is given when the map lacks it).
    pub fn keycode_of(&self, sym: u32) -> Result<u8, AaiError> {
        Ok(self.keycode(sym)?.0)
    }

    fn client_message(&self, window: u32, kind: u32, data: [u32; 5]) -> Result<(), AaiError> {
        let event = ClientMessageEvent::new(32, window, kind, data);
        self.conn
            .send_event(
                false,
                self.root,
                EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
                event,
            )
            .map_err(x11)?;
        self.sync()
    }

    /// Asks the window manager to focus and raise `window`, and waits (≤ 2 s) until it has.
    pub fn activate(&self, window: u32) -> Result<bool, AaiError> {
        self.client_message(window, self.atoms._NET_ACTIVE_WINDOW, [2, 0, 0, 0, 0])?;
        let _ = self.conn.map_window(window);
        let _ = self.conn.configure_window(
            window,
            &ConfigureWindowAux::new().stack_mode(x11rb::protocol::xproto::StackMode::ABOVE),
        );
        self.sync()?;
        // Focused, and shown again if it was minimized.
        Ok(self.wait(|x| {
            x.active() == Some(window) && x.window(window, None).is_some_and(|w| !w.minimized)
        }))
    }

    /// Asks the window manager to close `window` (the app may ask to save first).
    pub fn close(&self, window: u32) -> Result<(), AaiError> {
        self.client_message(window, self.atoms._NET_CLOSE_WINDOW, [0, 2, 0, 0, 0])
    }

    /// Minimizes (iconifies) `window`.
    pub fn minimize(&self, window: u32) -> Result<bool, AaiError> {
        self.client_message(window, self.atoms.WM_CHANGE_STATE, [3, 0, 0, 0, 0])?;
        Ok(self.wait(|x| x.window(window, None).is_some_and(|w| w.minimized)))
    }

    /// Maximizes `window`, or takes its maximized state away, and waits (≤ 2 s) until the
    /// window manager has.
    pub fn maximize(&self, window: u32, on: bool) -> Result<bool, AaiError> {
        let atoms = &self.atoms;
        let (vert, horz) = (
            atoms._NET_WM_STATE_MAXIMIZED_VERT,
            atoms._NET_WM_STATE_MAXIMIZED_HORZ,
        );
        self.client_message(
            window,
            atoms._NET_WM_STATE,
            [u32::from(on), vert, horz, 2, 0],
        )?;
        Ok(self.wait(|x| {
            let state = x.property32(window, x.atoms._NET_WM_STATE, AtomEnum::ATOM);
            (state.contains(&vert) && state.contains(&horz)) == on
        }))
    }

    /// Moves and resizes `window`'s client area to `rect` (physical), through the window
    /// manager, and waits (≤ 2 s) until it is there.
    pub fn move_resize(&self, window: u32, rect: Rect) -> Result<bool, AaiError> {
        // Static gravity: x and y are where the client area goes; x, y, w and h given.
        let flags = 10 | (0b1111 << 8) | (2 << 12);
        self.client_message(
            window,
            self.atoms._NET_MOVERESIZE_WINDOW,
            [flags, rect.x as u32, rect.y as u32, rect.width, rect.height],
        )?;
        Ok(self.wait(|x| {
            x.window(window, None).is_some_and(|w| {
                (w.bounds.x - rect.x).abs() <= 2
                    && (w.bounds.y - rect.y).abs() <= 2
                    && w.bounds.width.abs_diff(rect.width) <= 2
                    && w.bounds.height.abs_diff(rect.height) <= 2
            })
        }))
    }

    /// Polls `done` every 10 ms for up to 2 s.
    fn wait(&self, done: impl Fn(&Self) -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            if done(self) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
