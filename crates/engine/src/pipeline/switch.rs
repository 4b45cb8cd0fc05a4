//! The emergency stop's switch ([`EmergencyStop`]): stopped or not, shared with every gateway
//! of the home through its stop marker, and the token every running call watches. What the
//! stop does when pressed is [`super::stop`]'s.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use aai_descriptor::{AaiError, ErrorKind};
use tokio_util::sync::CancellationToken;

/// The switch: stopped or not, and the token every running call watches.
///
/// Besides its own flag it honours the home's stop marker ([`crate::control::stop_marker`]),
/// which every gateway of the user shares: a stop pressed anywhere — the daemon, another
/// in-process server, `aai-gateway stop` with no daemon at all — refuses calls here too.
#[derive(Debug, Default)]
pub struct EmergencyStop {
    stopped: AtomicBool,
    calls: Mutex<CancellationToken>,
    by: Mutex<Option<String>>,
    /// The home whose stop marker this stop shares.
    home: std::sync::OnceLock<std::path::PathBuf>,
}

impl EmergencyStop {
    /// Shares the stop with every gateway of `home` (its stop marker).
    pub fn share_with(&self, home: std::path::PathBuf) {
        let _ = self.home.set(home);
    }

    /// Whether the stop is on: here, or for the whole home.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst) || self.marked().is_some()
    }

    /// The home's stop marker, when it is there.
    pub(super) fn marked(&self) -> Option<crate::control::Marker> {
        crate::control::marker(self.home.get()?)
    }

    /// The refusal a call gets while the stop is on.
    pub fn refusal(&self) -> Option<AaiError> {
        self.is_stopped().then(|| {
            let by = self
                .by
                .lock()
                .ok()
                .and_then(|b| b.clone())
                .or_else(|| self.marked().map(|m| m.by))
                .unwrap_or_else(|| "the user".into());
            AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "the emergency stop is on (pressed by {by}): nothing runs until the user runs `aai-gateway resume`; do not retry until then"
                ),
            )
        })
    }

    /// The token a call that starts now watches: cancelled when the stop is pressed.
    pub fn calls(&self) -> CancellationToken {
        self.calls
            .lock()
            .map(|t| t.clone())
            .unwrap_or_else(|_| CancellationToken::new())
    }

    /// Turns the stop on and cancels every running call; false when it was already on.
    pub fn trip(&self, by: &str) -> bool {
        if let Ok(mut who) = self.by.lock() {
            *who = Some(by.to_owned());
        }
        let was = self.stopped.swap(true, Ordering::SeqCst);
        if let Ok(mut token) = self.calls.lock() {
            token.cancel();
            *token = CancellationToken::new();
        }
        if let Some(home) = self.home.get()
            && crate::control::marker(home).is_none()
            && let Err(error) = crate::control::write_marker(home, by)
        {
            tracing::error!(%error, "the stop marker could not be written; other gateways of this home may not see the stop (this one stays stopped until `aai-gateway resume`)");
        }
        !was
    }

    /// Turns the stop off, here and for the whole home; false when it was not on.
    pub fn clear(&self) -> bool {
        let was = self.stopped.swap(false, Ordering::SeqCst);
        let marked = self
            .home
            .get()
            .is_some_and(|home| crate::control::clear_marker(home));
        was || marked
    }

    /// Whether the home's marker is there now (`None`: this gateway shares no marker).
    pub(super) fn marker_present(&self) -> Option<bool> {
        self.home.get()?;
        Some(self.marked().is_some())
    }

    pub(super) fn flag(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}
