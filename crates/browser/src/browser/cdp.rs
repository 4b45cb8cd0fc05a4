//! A thin Chrome DevTools Protocol client: one WebSocket, commands matched to replies by id,
//! events fanned out to subscribers. Sessions are flat (`Target.attachToTarget` with
//! `flatten`), so one socket carries every tab.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use super::error::{BrowserError, CdpError};

/// How long one command may wait for its reply.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// An event the browser sent.
#[derive(Debug, Clone)]
pub struct Event {
    pub session: Option<String>,
    pub method: String,
    pub params: Value,
}

/// The waiters for replies; an error reply carries the browser's message.
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, BrowserMessage>>>>>;

/// The message of a DevTools error reply.
struct BrowserMessage(String);

/// A connection to a browser's DevTools endpoint.
pub struct Cdp {
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    events: broadcast::Sender<Event>,
    next: AtomicU64,
    closed: tokio_util::sync::CancellationToken,
}

impl Cdp {
    /// Connects to `ws_url` (`ws://127.0.0.1:port/devtools/browser/…`).
    ///
    /// # Errors
    /// When the WebSocket cannot be opened.
    pub async fn connect(ws_url: &str) -> Result<Self, BrowserError> {
        let mut config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default();
        config.max_message_size = Some(256 << 20);
        config.max_frame_size = Some(256 << 20);
        let (socket, _) = tokio_tungstenite::connect_async_with_config(ws_url, Some(config), false)
            .await
            .map_err(|source| BrowserError::WebSocket {
                url: ws_url.to_owned(),
                source,
            })?;
        let (mut sink, mut stream) = socket.split();
        let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
        let pending: Pending = Arc::default();
        let (events, _) = broadcast::channel(4096);
        let closed = tokio_util::sync::CancellationToken::new();
        tokio::spawn({
            let closed = closed.clone();
            async move {
                loop {
                    tokio::select! {
                        () = closed.cancelled() => break,
                        message = outgoing.recv() => match message {
                            Some(message) => if sink.send(message).await.is_err() { break },
                            None => break,
                        },
                    }
                }
                let _ = sink.close().await;
            }
        });
        tokio::spawn({
            let (pending, events, closed) = (pending.clone(), events.clone(), closed.clone());
            async move {
                loop {
                    let message = tokio::select! {
                        () = closed.cancelled() => break,
                        message = stream.next() => message,
                    };
                    let text = match message {
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(Message::Binary(bytes))) => match String::from_utf8(bytes.to_vec())
                        {
                            Ok(text) => text.into(),
                            Err(_) => continue,
                        },
                        Some(Ok(_)) => continue,
                        _ => break,
                    };
                    dispatch(&text, &pending, &events);
                }
                closed.cancel();
                // Every command still waiting learns the browser went away.
                if let Ok(mut pending) = pending.lock() {
                    pending.clear();
                }
            }
        });
        Ok(Self {
            out,
            pending,
            events,
            next: AtomicU64::new(1),
            closed,
        })
    }

    /// Speaks to a browser started with `--remote-debugging-pipe`: commands go to `commands`
    /// (its descriptor 3), replies and events come from `replies` (its descriptor 4), each
    /// message ended by a NUL byte. No port is open that another process could reach.
    pub fn over_pipe<W, R>(commands: W, replies: R) -> Self
    where
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
    {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
        let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
        let pending: Pending = Arc::default();
        let (events, _) = broadcast::channel(4096);
        let closed = tokio_util::sync::CancellationToken::new();
        tokio::spawn({
            let closed = closed.clone();
            let mut commands = commands;
            async move {
                loop {
                    let message = tokio::select! {
                        () = closed.cancelled() => break,
                        message = outgoing.recv() => message,
                    };
                    let Some(Message::Text(text)) = message else {
                        break;
                    };
                    let mut bytes = text.as_bytes().to_vec();
                    bytes.push(0);
                    if commands.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                let _ = commands.shutdown().await;
            }
        });
        tokio::spawn({
            let (pending, events, closed) = (pending.clone(), events.clone(), closed.clone());
            async move {
                let mut replies = tokio::io::BufReader::with_capacity(1 << 20, replies);
                let mut message = Vec::new();
                loop {
                    message.clear();
                    let read = tokio::select! {
                        () = closed.cancelled() => break,
                        read = replies.read_until(0, &mut message) => read,
                    };
                    match read {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    if message.last() == Some(&0) {
                        message.pop();
                    }
                    if let Ok(text) = std::str::from_utf8(&message) {
                        dispatch(text, &pending, &events);
                    }
                }
                closed.cancel();
                if let Ok(mut pending) = pending.lock() {
                    pending.clear();
                }
            }
        });
        Self {
            out,
            pending,
            events,
            next: AtomicU64::new(1),
            closed,
        }
    }

    /// Whether the connection is gone (the browser exited or closed the socket).
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Sends `method` with `params` to the browser (`session` `None`) or a tab's session and
    /// waits for the reply.
    ///
    /// # Errors
    /// The browser's error message, or why no reply came.
    pub async fn send(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, CdpError> {
        self.send_within(session, method, params, COMMAND_TIMEOUT)
            .await
    }

    /// [`Cdp::send`] waiting at most `limit` for the reply.
    ///
    /// # Errors
    /// As [`Cdp::send`].
    pub async fn send_within(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, CdpError> {
        if self.is_closed() {
            return Err(CdpError::Gone);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (reply, replied) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, reply);
        }
        if self
            .out
            .send(Message::Text(message.to_string().into()))
            .is_err()
        {
            return Err(CdpError::Gone);
        }
        match tokio::time::timeout(limit, replied).await {
            Ok(Ok(reply)) => reply.map_err(|BrowserMessage(message)| CdpError::Refused {
                method: method.to_owned(),
                message,
            }),
            Ok(Err(_)) => Err(CdpError::Gone),
            Err(_) => {
                if let Ok(mut pending) = self.pending.lock() {
                    pending.remove(&id);
                }
                Err(CdpError::Timeout {
                    method: method.to_owned(),
                    ms: limit.as_millis(),
                })
            }
        }
    }

    /// Closes the connection.
    pub fn close(&self) {
        self.closed.cancel();
    }
}

impl Drop for Cdp {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

/// Hands one message of the browser to whoever waits for it: a reply to its command's
/// waiter, an event to the subscribers.
fn dispatch(text: &str, pending: &Pending, events: &broadcast::Sender<Event>) {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    if let Some(id) = value.get("id").and_then(Value::as_u64) {
        let waiter = pending.lock().ok().and_then(|mut p| p.remove(&id));
        if let Some(waiter) = waiter {
            let reply = match value.get("error") {
                Some(error) => Err(BrowserMessage(
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("DevTools error")
                        .to_owned(),
                )),
                None => Ok(value.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = waiter.send(reply);
        }
    } else if let Some(method) = value.get("method").and_then(Value::as_str) {
        let _ = events.send(Event {
            session: value
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            method: method.to_owned(),
            params: value.get("params").cloned().unwrap_or(Value::Null),
        });
    }
}
