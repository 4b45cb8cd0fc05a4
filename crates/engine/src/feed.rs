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

/// The channel is made by the first watcher: its backlog is ~0.5 MB, which a gateway nobody
/// watches (every stdio one) need not hold.
#[derive(Debug, Clone, Default)]
pub struct Feed {
    sender: std::sync::Arc<std::sync::OnceLock<broadcast::Sender<Event>>>,
}

impl Feed {
    pub fn send(&self, event: Event) {
        // No watcher: nothing to do.
        if let Some(sender) = self.sender.get() {
            let _ = sender.send(event);
        }
    }

    /// Whether anyone watches (so an event costly to build can be skipped).
    pub fn watched(&self) -> bool {
        self.sender
            .get()
            .is_some_and(|sender| sender.receiver_count() > 0)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender
            .get_or_init(|| broadcast::channel(BACKLOG).0)
            .subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watcher_of_any_clone_gets_what_is_sent_after_it_came() {
        let feed = Feed::default();
        let other = feed.clone();
        assert!(!feed.watched());
        feed.send(Event::Grants); // nobody watches: dropped
        let mut watcher = other.subscribe();
        assert!(feed.watched() && other.watched());
        feed.send(Event::Stop { stopped: true });
        match watcher.try_recv() {
            Ok(Event::Stop { stopped: true }) => {}
            other => panic!("expected the stop event, got {other:?}"),
        }
        assert!(
            watcher.try_recv().is_err(),
            "the event sent before it watched is not kept"
        );
        drop(watcher);
        assert!(!feed.watched());
    }
}
