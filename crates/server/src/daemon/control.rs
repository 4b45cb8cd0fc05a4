//! What the control endpoints and the dashboard share.

use std::sync::Arc;

use aai_engine::pipeline::Gateway;
use tokio_util::sync::CancellationToken;

use super::logins::Logins;
use super::sessions::Sessions;

/// What the control endpoints and the dashboard work with.
#[derive(Clone)]
pub(crate) struct Control {
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) cancel: CancellationToken,
    pub(crate) logins: Arc<Logins>,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// Held while a stop runs.
    pub(crate) stopping: Arc<tokio::sync::Mutex<()>>,
    /// The MCP sessions over HTTP.
    pub(crate) sessions: Arc<Sessions>,
}
