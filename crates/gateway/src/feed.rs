//! What happens, for whoever watches live (the dashboard): every audit row as it is written,
//! and a word when the approval queue, the grants, the emergency stop or the settings change.
//! Nobody watching costs one failed send.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// How many events a slow watcher may fall behind before it misses some (it is told, and
/// reloads what it shows).
const BACKLOG: usize = 1024;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// An audit row, as stored (with its id).
    Row { row: Value },
    /// An approval was opened or answered.
    Approvals,
    /// A grant was given or taken away.
    Grants,
    /// The emergency stop was pressed or lifted.
    Stop { stopped: bool },
    /// Toolsets or client profiles changed.
    Settings,
    /// A scheduled task changed, or one of its runs started or ended.
    Schedules,
}

#[derive(Debug, Clone)]
pub struct Feed {
    sender: broadcast::Sender<Event>,
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
        }
    }
}

impl Feed {
    pub fn send(&self, event: Event) {
        // No watcher: nothing to do.
        let _ = self.sender.send(event);
    }

    /// Whether anyone watches (so an event costly to build can be skipped).
    pub fn watched(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}
