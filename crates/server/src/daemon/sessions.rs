//! The daemon's MCP sessions over HTTP, with an end for the abandoned ones.
//!
//! A client that opens sessions and never closes them (it crashed, or it opens one per task)
//! would otherwise hold a server, its channels and its grants for each until the daemon
//! stops. rmcp's own idle timeout cuts every session that sends no request for a while, the
//! one a client keeps open to hear notifications included; here a session ends only when it
//! is *abandoned*: no request for `sessions.idle_seconds` and no stream open (a client that
//! is still there holds its notification stream, and a request in flight holds its answer's).
//! Each client name, and every client together, also has a cap: opening one more session ends
//! the least recently used one that is not busy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt as _};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};

use aai_engine::config::SessionsConfig;

/// What is known of one session.
struct Entry {
    /// The client's name from its `initialize` (none before it).
    client: Option<String>,
    /// When it last received a request or opened a stream.
    used: Instant,
    /// Its open streams: the notification stream and the answers being written.
    open: Arc<AtomicUsize>,
}

/// rmcp's local session manager, with the bookkeeping that ends abandoned sessions.
pub struct Sessions {
    inner: LocalSessionManager,
    book: Mutex<HashMap<SessionId, Entry>>,
    /// The limits in force (the config's, replaced when it is reloaded).
    limits: Arc<dyn Fn() -> SessionsConfig + Send + Sync>,
}

/// Counts a stream as open while it lives.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Sessions {
    /// Sessions whose limits `limits` reads when it needs them.
    pub fn new(limits: Arc<dyn Fn() -> SessionsConfig + Send + Sync>) -> Self {
        let mut inner = LocalSessionManager::default();
        // Idle sessions are ended here, where an open stream counts as use.
        inner.session_config.keep_alive = None;
        Self {
            inner,
            book: Mutex::new(HashMap::new()),
            limits,
        }
    }

    /// Sessions open now.
    pub fn count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Entry>> {
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks `id` used now; the counter of its open streams.
    fn touch(&self, id: &SessionId) -> Option<Arc<AtomicUsize>> {
        let mut book = self.lock();
        let entry = book.get_mut(id)?;
        entry.used = Instant::now();
        Some(entry.open.clone())
    }

    /// Ends the sessions that were abandoned (idle and no stream open) and, over a cap, the
    /// least recently used ones that are not busy; `keep` is never chosen.
    pub async fn sweep(&self, keep: Option<&SessionId>) -> usize {
        let limits = (self.limits)();
        let idle = Duration::from_secs(limits.idle_seconds.max(1));
        let doomed = {
            let book = self.lock();
            choose(&book, keep, idle, &limits, Instant::now())
        };
        for id in &doomed {
            tracing::info!(session = %id, "ending an abandoned MCP session");
            let _ = self.close_session(id).await;
        }
        doomed.len()
    }
}

/// The sessions to end: idle ones with nothing open, then, per client and overall, the least
/// recently used idle-now ones beyond the cap.
fn choose(
    book: &HashMap<SessionId, Entry>,
    keep: Option<&SessionId>,
    idle: Duration,
    limits: &SessionsConfig,
    now: Instant,
) -> Vec<SessionId> {
    let free =
        |id: &SessionId, entry: &Entry| Some(id) != keep && entry.open.load(Ordering::SeqCst) == 0;
    let mut doomed: Vec<SessionId> = book
        .iter()
        .filter(|(id, entry)| free(id, entry) && now.duration_since(entry.used) >= idle)
        .map(|(id, _)| id.clone())
        .collect();
    let over = |members: Vec<(&SessionId, &Entry)>, cap: usize, doomed: &mut Vec<SessionId>| {
        let alive: Vec<_> = members
            .into_iter()
            .filter(|(id, _)| !doomed.contains(id))
            .collect();
        let Some(excess) = alive.len().checked_sub(cap.max(1)).filter(|n| *n > 0) else {
            return;
        };
        let mut candidates: Vec<_> = alive
            .into_iter()
            .filter(|(id, entry)| free(id, entry))
            .collect();
        candidates.sort_by_key(|(_, entry)| entry.used);
        doomed.extend(
            candidates
                .into_iter()
                .take(excess)
                .map(|(id, _)| id.clone()),
        );
    };
    let mut clients: HashMap<&str, Vec<(&SessionId, &Entry)>> = HashMap::new();
    for (id, entry) in book {
        if let Some(client) = &entry.client {
            clients.entry(client).or_default().push((id, entry));
        }
    }
    for members in clients.into_values() {
        over(members, limits.per_client, &mut doomed);
    }
    over(book.iter().collect(), limits.total, &mut doomed);
    doomed
}

/// The client's name in an `initialize` request.
fn client_name(message: &ClientJsonRpcMessage) -> Option<String> {
    let value = serde_json::to_value(message).ok()?;
    value
        .pointer("/params/clientInfo/name")
        .and_then(serde_json::Value::as_str)
        .map(|name| name.chars().take(200).collect())
}

/// `stream`, counted as open on `count` while it lives.
fn counted<S>(
    stream: S,
    count: Arc<AtomicUsize>,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static
where
    S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
{
    let open = Open::new(&count);
    stream.map(move |message| {
        let _held = &open;
        message
    })
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        self.lock().insert(
            id.clone(),
            Entry {
                client: None,
                used: Instant::now(),
                open: Arc::default(),
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        if let Some(entry) = self.lock().get_mut(id) {
            entry.client = client_name(&message);
            entry.used = Instant::now();
        }
        let answer = self.inner.initialize_session(id, message).await?;
        // The new session counts against its client's cap: the oldest unused one makes room.
        self.sweep(Some(id)).await;
        Ok(answer)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.lock().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let count = self.touch(id);
        let stream = self.inner.create_stream(id, message).await?;
        Ok(counted(stream, count.unwrap_or_default()))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let count = self.touch(id);
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(counted(stream, count.unwrap_or_default()))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let count = self.touch(id);
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(counted(stream, count.unwrap_or_default()))
    }
}

/// Ends abandoned sessions every little while until `cancel` fires.
pub async fn reap(sessions: Arc<Sessions>, cancel: tokio_util::sync::CancellationToken) {
    loop {
        let every = Duration::from_secs(((sessions.limits)().idle_seconds / 4).clamp(1, 60));
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        sessions.sweep(None).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(client: &str, ago: u64, open: usize, now: Instant) -> Entry {
        Entry {
            client: Some(client.to_owned()),
            used: now - Duration::from_secs(ago),
            open: Arc::new(AtomicUsize::new(open)),
        }
    }

    #[test]
    fn idle_sessions_with_nothing_open_end_and_caps_end_the_least_recently_used() {
        let now = Instant::now() + Duration::from_secs(1000);
        let limits = SessionsConfig {
            idle_seconds: 100,
            per_client: 2,
            total: 4,
        };
        let mut book = HashMap::new();
        let id = |s: &str| -> SessionId { s.into() };
        // Idle for long, but its notification stream is open: the client is there.
        book.insert(id("listening"), entry("a", 500, 1, now));
        book.insert(id("abandoned"), entry("b", 500, 0, now));
        book.insert(id("a1"), entry("a", 30, 0, now));
        book.insert(id("a2"), entry("a", 20, 0, now));
        book.insert(id("a3"), entry("a", 10, 0, now));
        let mut doomed = choose(
            &book,
            Some(&id("a3")),
            Duration::from_secs(100),
            &limits,
            now,
        );
        doomed.sort();
        // "a" holds four: the two least recently used that are free go (never the busy one).
        assert_eq!(doomed, vec![id("a1"), id("a2"), id("abandoned")]);
        // Every session busy: none is cut, whatever the cap.
        let busy: HashMap<_, _> = (0..6)
            .map(|n| (id(&format!("s{n}")), entry("c", 0, 1, now)))
            .collect();
        assert!(choose(&busy, None, Duration::from_secs(100), &limits, now).is_empty());
        // The total cap across clients.
        let many: HashMap<_, _> = (0..6)
            .map(|n| (id(&format!("t{n}")), entry(&format!("c{n}"), n, 0, now)))
            .collect();
        let mut doomed = choose(&many, None, Duration::from_secs(100), &limits, now);
        doomed.sort();
        assert_eq!(doomed, vec![id("t4"), id("t5")]);
    }
}
