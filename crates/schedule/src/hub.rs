//! What the gateway shares with its scheduler ([`Hub`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use aai_descriptor::{AaiError, ErrorKind};
use aai_engine::pipeline::CallIds;
use tokio::sync::Notify;

use super::TaskGrant;
use super::tables::Store;

/// What the gateway shares with its scheduler: the store, a nudge, and the tokens of agent
/// runs in flight (each names the task whose layer its calls run under).
pub struct Hub {
    path: PathBuf,
    store: Mutex<Option<Arc<Store>>>,
    /// Wakes the scheduler: a task changed, a run was asked for, a run ended.
    pub nudge: Notify,
    /// Tasks were changed by this process (other processes are seen by the store's version).
    pub dirty: std::sync::atomic::AtomicBool,
    pub(super) tokens: Mutex<HashMap<String, (Arc<TaskGrant>, CallIds)>>,
    /// The daemon's MCP endpoint, which agent runs are pointed at.
    pub url: Mutex<Option<String>>,
    /// Whether a scheduler runs in this process.
    pub active: std::sync::atomic::AtomicBool,
}

impl Hub {
    pub fn new(data_db: PathBuf) -> Self {
        Self {
            path: data_db,
            store: Mutex::new(None),
            nudge: Notify::new(),
            dirty: std::sync::atomic::AtomicBool::new(true),
            tokens: Mutex::new(HashMap::new()),
            url: Mutex::new(None),
            active: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The store, opened on first use.
    ///
    /// # Errors
    /// `data.db` cannot be opened.
    pub fn store(&self) -> Result<Arc<Store>, AaiError> {
        let mut slot = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(store) = slot.as_ref() {
            return Ok(store.clone());
        }
        let store = Arc::new(Store::open(&self.path).map_err(|problem| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("{problem}; free disk space or close what locks it, then retry"),
            )
        })?);
        *slot = Some(store.clone());
        Ok(store)
    }

    /// Tells the scheduler that tasks or runs changed.
    pub fn changed(&self) {
        self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
        self.nudge.notify_one();
    }

    /// The task layer and call collector of an agent run's bearer token.
    pub fn token(&self, token: &str) -> Option<(Arc<TaskGrant>, CallIds)> {
        let tokens = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tokens
            .iter()
            .find(|(known, _)| aai_engine::private::same_secret(known.as_bytes(), token.as_bytes()))
            .map(|(_, found)| found.clone())
    }
}
