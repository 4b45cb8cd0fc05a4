//! The stdio transport with a guard in front of rmcp.
//!
//! rmcp drops lines it cannot parse without answering. A client that sent them would wait
//! forever, so every line is checked here first: invalid JSON gets `-32700`, a message that is
//! not JSON-RPC gets `-32600`, a request whose params do not fit its method gets `-32602`, and
//! an oversized request gets `-32600` naming the limit. Only well-formed messages reach rmcp.
//! One writer task owns stdout, so error frames and rmcp's frames never interleave.
//!
//! `tools/list` of an initialized session is answered here from a [`ToolList`]: a body built
//! once per registry snapshot and copied out as it is, instead of building, cloning and
//! serializing every tool per request (at 10,000 apps that is 1.6 MB per answer).

use std::sync::Arc;

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;

/// Lines longer than this are discarded unread past this point.
const HARD_LINE_LIMIT: usize = 64 * 1024 * 1024;
const PIPE_BYTES: usize = 256 * 1024;

/// The `result` of `tools/list` (`{"tools":[…]}`) as JSON, for the current snapshot.
pub trait ToolList: Send + Sync + 'static {
    fn body(&self) -> futures::future::BoxFuture<'_, Arc<Vec<u8>>>;
}

/// The process's standard input, read by the runtime's own event loop when it is a pipe or a
/// socket (as MCP clients start servers); anything else (a file, a terminal) is read through
/// tokio's stdin, which hands every read to a blocking thread.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd as _;
        let reader: Option<Box<dyn AsyncRead + Unpin + Send>> =
            match polled(std::io::stdin().as_fd()) {
                Some(Polled::Pipe(file)) => tokio::net::unix::pipe::Receiver::from_file(file)
                    .ok()
                    .map(|r| Box::new(r) as _),
                Some(Polled::Socket(socket)) => Some(Box::new(socket)),
                None => None,
            };
        if let Some(reader) = reader {
            return reader;
        }
    }
    Box::new(tokio::io::stdin())
}

/// The process's standard output, written like [`stdin`] is read: by the event loop when it is
/// a pipe or a socket, else through tokio's stdout (which copies each write for a blocking
/// thread: the whole tool list at 10,000 apps).
pub fn stdout() -> Box<dyn AsyncWrite + Unpin + Send> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd as _;
        let writer: Option<Box<dyn AsyncWrite + Unpin + Send>> =
            match polled(std::io::stdout().as_fd()) {
                Some(Polled::Pipe(file)) => tokio::net::unix::pipe::Sender::from_file(file)
                    .ok()
                    .map(|w| Box::new(w) as _),
                Some(Polled::Socket(socket)) => Some(Box::new(socket)),
                None => None,
            };
        if let Some(writer) = writer {
            return writer;
        }
    }
    Box::new(tokio::io::stdout())
}

#[cfg(unix)]
enum Polled {
    Pipe(std::fs::File),
    Socket(tokio::net::UnixStream),
}

/// A copy of `fd` for the runtime's event loop, if it is a pipe or a socket. The copy shares
/// the open file with `fd`, which becomes non-blocking (children never inherit our stdin:
/// the process runner gives them their own).
#[cfg(unix)]
fn polled(fd: std::os::fd::BorrowedFd<'_>) -> Option<Polled> {
    use std::os::unix::fs::FileTypeExt as _;
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    let kind = file.metadata().ok()?.file_type();
    if kind.is_fifo() {
        return Some(Polled::Pipe(file));
    }
    if !kind.is_socket() {
        return None;
    }
    let socket = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
    socket.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(socket)
        .ok()
        .map(Polled::Socket)
}

/// Wraps `input`/`output` (stdin/stdout) and returns the pair to hand to rmcp; `tools/list`
/// is answered from `tool_list` when there is one.
pub fn guarded<R, W>(
    input: R,
    output: W,
    max_request_bytes: usize,
    tool_list: Option<Arc<dyn ToolList>>,
) -> (DuplexStream, DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_in, feed) = tokio::io::duplex(PIPE_BYTES);
    let (drain, rmcp_out) = tokio::io::duplex(PIPE_BYTES);
    let (frames_tx, frames_rx) = mpsc::channel::<Frame>(256);
    let pending = Pending::default();
    tokio::spawn(write_frames(output, frames_rx));
    tokio::spawn(forward_rmcp(drain, frames_tx.clone(), pending.clone()));
    tokio::spawn(read_input(
        input,
        feed,
        Output {
            frames: frames_tx,
            pending,
            tool_list,
        },
        max_request_bytes,
    ));
    (rmcp_in, rmcp_out)
}

/// Where `read_input` answers.
struct Output {
    frames: mpsc::Sender<Frame>,
    pending: Pending,
    tool_list: Option<Arc<dyn ToolList>>,
}

/// One message for the client.
enum Frame {
    /// A whole line.
    Line(Vec<u8>),
    /// `{"jsonrpc":"2.0","id":<id>,"result":<body>}` and a newline, written around a shared
    /// body rather than copied into a new line (a `tools/list` body at 10,000 apps is 1.6 MB).
    Result { id: String, body: Arc<Vec<u8>> },
    /// Nothing to write: answered once every frame sent before it has been written.
    Written(tokio::sync::oneshot::Sender<()>),
}

impl From<Vec<u8>> for Frame {
    fn from(line: Vec<u8>) -> Self {
        Self::Line(line)
    }
}

impl Frame {
    async fn write<W: AsyncWrite + Unpin>(&self, output: &mut W) -> std::io::Result<()> {
        match self {
            Self::Line(line) => output.write_all(line).await?,
            Self::Result { id, body } => {
                let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":");
                output.write_all(head.as_bytes()).await?;
                output.write_all(body).await?;
                output.write_all(b"}\n").await?;
            }
            Self::Written(_) => {}
        }
        output.flush().await
    }
}

/// Ids of the client's requests that have not been answered yet: a second request with one
/// of them would get two answers under one id, so it is refused.
#[derive(Clone, Default)]
struct Pending(
    Arc<(
        std::sync::Mutex<std::collections::HashSet<String>>,
        tokio::sync::Notify,
    )>,
);

impl Pending {
    /// Takes `id`; false when a request with it is still unanswered.
    fn take(&self, id: &Value) -> bool {
        self.0
            .0
            .lock()
            .map_or(true, |mut ids| ids.insert(id.to_string()))
    }

    /// The client cancelled the request `id`: no answer will come, its id is free again.
    fn release(&self, id: &Value) {
        self.forget(&id.to_string());
    }

    /// A response left for the client: its id is free again.
    fn answered(&self, frame: &[u8]) {
        if let Some(id) = response_id(frame) {
            self.forget(&id);
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut ids) = self.0.0.lock() {
            ids.remove(id);
            if ids.is_empty() {
                self.0.1.notify_waiters();
            }
        }
    }

    /// Waits until every request has been answered or cancelled, at most `limit`.
    async fn drained(&self, limit: std::time::Duration) {
        let give_up = tokio::time::Instant::now() + limit;
        loop {
            let emptied = self.0.1.notified();
            tokio::pin!(emptied);
            emptied.as_mut().enable();
            if self.0.0.lock().map_or(true, |ids| ids.is_empty()) {
                return;
            }
            if tokio::time::timeout_at(give_up, emptied).await.is_err() {
                return;
            }
        }
    }
}

/// The id of a response frame, read from its first bytes (rmcp writes `{"jsonrpc":"2.0",
/// "id":…,` before the result, so a large result is not scanned); `None` for requests and
/// notifications.
fn response_id(frame: &[u8]) -> Option<String> {
    let head = &frame[..frame.len().min(256)];
    let text = std::str::from_utf8(head)
        .ok()
        .or_else(|| std::str::from_utf8(&head[..head.len().saturating_sub(3)]).ok())?;
    let at = text.find("\"id\":")? + 5;
    let rest = &text[at..];
    let end = if let Some(quoted) = rest.strip_prefix('"') {
        quoted.find('"').map(|i| i + 2)?
    } else {
        rest.find([',', '}'])?
    };
    let after = &rest[end..];
    let is_response = after.starts_with(",\"result\"") || after.starts_with(",\"error\"");
    is_response.then(|| rest[..end].to_owned())
}

async fn write_frames<W: AsyncWrite + Unpin>(mut output: W, mut frames: mpsc::Receiver<Frame>) {
    while let Some(frame) = frames.recv().await {
        if frame.write(&mut output).await.is_err() {
            return;
        }
        if let Frame::Written(done) = frame {
            let _ = done.send(());
        }
    }
}

async fn forward_rmcp(drain: DuplexStream, frames: mpsc::Sender<Frame>, pending: Pending) {
    let mut lines = BufReader::new(drain);
    loop {
        let mut line = Vec::new();
        match lines.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                pending.answered(&line);
                if frames.send(line.into()).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn read_input<R: AsyncRead + Unpin>(
    input: R,
    mut feed: DuplexStream,
    output: Output,
    max_request_bytes: usize,
) {
    let Output {
        frames,
        pending,
        tool_list,
    } = output;
    let mut reader = BufReader::new(input);
    let mut session = Session::default();
    let mut input_ended = false;
    loop {
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(HARD_LINE_LIMIT as u64)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => {
                input_ended = true;
                break;
            }
            Ok(_) => {}
        }
        if line.len() >= HARD_LINE_LIMIT && !line.ends_with(b"\n") {
            // Skip the rest of a line too long to hold.
            let mut rest = Vec::new();
            while reader
                .read_until(b'\n', &mut rest)
                .await
                .is_ok_and(|n| n > 0)
            {
                if rest.ends_with(b"\n") {
                    break;
                }
                rest.clear();
            }
            let error = error_frame(
                Value::Null,
                -32600,
                format!("Invalid Request: message longer than {HARD_LINE_LIMIT} bytes"),
            );
            let _ = frames.send(error.into()).await;
            continue;
        }
        match check(&line, max_request_bytes, &mut session) {
            Check::Forward(route)
                if route
                    .request_id
                    .as_ref()
                    .is_some_and(|id| !pending.take(id)) =>
            {
                let id = route.request_id.unwrap_or_default();
                // The answer carries the request's id, as JSON-RPC asks of every answer whose
                // id could be read (the message says it is not the first request's answer).
                let error = error_frame(
                    id.clone(),
                    -32600,
                    format!(
                        "Invalid Request: the id {id} belongs to a request that has not been answered yet; use a new id for each request"
                    ),
                );
                if frames.send(error.into()).await.is_err() {
                    break;
                }
            }
            Check::Forward(Route {
                request_id: Some(id),
                plain_tool_list: true,
                ..
            }) if tool_list.is_some() => {
                // Answered from the snapshot's body; a task, so a first scan still running
                // holds up only this answer.
                let (frames, pending) = (frames.clone(), pending.clone());
                let tool_list = tool_list.clone();
                tokio::spawn(async move {
                    let Some(tool_list) = tool_list else { return };
                    let body = tool_list.body().await;
                    let text = id.to_string();
                    let _ = frames.send(Frame::Result { id: text, body }).await;
                    pending.release(&id);
                });
            }
            Check::Forward(route) => {
                if let Some(id) = &route.cancels {
                    pending.release(id);
                }
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if feed.write_all(&line).await.is_err() {
                    break;
                }
            }
            Check::Ignore => {}
            Check::Reply(frame) => {
                if frames.send(frame.into()).await.is_err() {
                    break;
                }
            }
        }
    }
    // The client closed its input (a person feeding a file, a client shutting down): what it
    // asked for is answered and written out before the session ends, within a bound.
    if input_ended {
        pending.drained(ANSWER_AT_EOF_WITHIN).await;
        let (written, all_written) = tokio::sync::oneshot::channel();
        if frames.send(Frame::Written(written)).await.is_ok() {
            let _ = tokio::time::timeout(ANSWER_AT_EOF_WITHIN, all_written).await;
        }
    }
    let _ = feed.shutdown().await;
}

/// How long requests still running when the input ends may take to be answered.
const ANSWER_AT_EOF_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// What the guard has seen of the lifecycle so far.
#[derive(Default)]
struct Session {
    /// An `initialize` request went through: legacy requests need no per-request metadata.
    initialized: bool,
}

/// The per-request protocol version key of the 2026-07-28 lifecycle.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

enum Check {
    Forward(Route),
    Ignore,
    Reply(Vec<u8>),
}

/// What the guard keeps of a message it forwards, read from the one parse of it.
#[derive(Debug, Default)]
struct Route {
    /// The id of a request (a message with a method and an id).
    request_id: Option<Value>,
    /// The request a `notifications/cancelled` gives up on.
    cancels: Option<Value>,
    /// A `tools/list` of a session begun with `initialize`, with no cursor or metadata: the
    /// whole list is the answer.
    plain_tool_list: bool,
}

impl Route {
    fn of(value: &Value, session: &Session) -> Self {
        let method = value.get("method").and_then(Value::as_str);
        let params = value.get("params").and_then(Value::as_object);
        Self {
            request_id: method.and(value.get("id")).cloned(),
            cancels: (method == Some("notifications/cancelled"))
                .then(|| value.pointer("/params/requestId").cloned())
                .flatten(),
            plain_tool_list: method == Some("tools/list")
                && session.initialized
                && params.is_none_or(|p| !p.contains_key("cursor") && !p.contains_key("_meta")),
        }
    }
}

fn check(line: &[u8], max_request_bytes: usize, session: &mut Session) -> Check {
    let text = line.trim_ascii();
    if text.is_empty() {
        return Check::Ignore;
    }
    let value: Value = match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(error) => {
            return Check::Reply(error_frame(
                Value::Null,
                -32700,
                format!("Parse error: {error}"),
            ));
        }
    };
    if let Some(key) = duplicate_key(text) {
        // Read two ways (first or last value wins) it could mean two things: refuse it.
        return Check::Reply(error_frame(
            Value::Null,
            -32600,
            format!("Invalid Request: the key {key:?} appears twice in one object"),
        ));
    }
    let id = value.get("id").cloned();
    if let Some(bad) = id.as_ref().filter(|id| !valid_id(id)) {
        // Never echoed: an id must be a string or an integer.
        let kind = match bad {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a fraction or a number beyond 64-bit integers",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
            Value::String(_) => "a string",
        };
        return Check::Reply(error_frame(
            Value::Null,
            -32600,
            format!("Invalid Request: the id is {kind}; use a string or an integer"),
        ));
    }
    if text.len() > max_request_bytes {
        return match id {
            Some(id) => Check::Reply(error_frame(
                id,
                -32600,
                format!(
                    "Invalid Request: the message is {} bytes, over the gateway's {max_request_bytes}-byte limit; pass large content by reference (a file path or URL) instead",
                    text.len()
                ),
            )),
            None => Check::Ignore,
        };
    }
    if value.is_array() {
        return Check::Reply(error_frame(
            Value::Null,
            -32600,
            "Invalid Request: JSON-RPC batches are not supported by MCP".to_owned(),
        ));
    }
    if !value.is_object() {
        return Check::Reply(error_frame(
            Value::Null,
            -32600,
            "Invalid Request: expected a JSON-RPC object".to_owned(),
        ));
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Ok(_) => match (id, bad_params(&value)) {
            (Some(id), Some(problem)) => Check::Reply(error_frame(
                id,
                -32602,
                format!("Invalid params: {problem}"),
            )),
            _ => before_initialize(&value, session)
                .unwrap_or_else(|| Check::Forward(Route::of(&value, session))),
        },
        Err(error) => {
            let Some(id) = id else {
                // A malformed notification or response: JSON-RPC never answers those.
                return Check::Ignore;
            };
            let method = value.get("method").and_then(Value::as_str);
            let (code, kind) = match method {
                _ if value.get("jsonrpc") != Some(&json!("2.0")) => (-32600, "Invalid Request"),
                Some(method) if KNOWN_METHODS.contains(&method) => (-32602, "Invalid params"),
                Some(_) => (-32601, "Method not found"),
                None => (-32600, "Invalid Request"),
            };
            Check::Reply(error_frame(id, code, format!("{kind}: {error}")))
        }
    }
}

/// A request that neither follows `initialize` nor carries 2026-07-28 metadata gets an error
/// that says both ways to start a session (rmcp's own answer only lists missing `_meta` keys).
fn before_initialize(value: &Value, session: &mut Session) -> Option<Check> {
    let method = value.get("method").and_then(Value::as_str)?;
    let id = value.get("id")?;
    match method {
        "initialize" if session.initialized => Some(Check::Reply(error_frame(
            id.clone(),
            -32600,
            "Invalid Request: this session is already initialized; the client's identity and capabilities cannot change mid-session. Start a new session (a new connection) instead".to_owned(),
        ))),
        "initialize" => {
            session.initialized = true;
            None
        }
        "server/discover" | "ping" => None,
        _ if session.initialized => None,
        _ if value
            .pointer(&format!(
                "/params/_meta/{}",
                PROTOCOL_VERSION_META.replace('/', "~1")
            ))
            .is_some() =>
        {
            None
        }
        _ => Some(Check::Reply(error_frame(
            id.clone(),
            -32600,
            format!(
                "Invalid Request: {method} before initialize. Send `initialize` first (protocol 2025-06-18 or 2025-11-25), or give each request `_meta` with `{PROTOCOL_VERSION_META}` and the client's info and capabilities (2026-07-28)"
            ),
        ))),
    }
}

/// The requests MCP defines (clients to servers): malformed params of these are -32602.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
];

/// Why the params of a known request do not fit its method (rmcp may take a request it
/// cannot read as a custom one, which would end as -32601 instead of -32602).
fn bad_params(value: &Value) -> Option<String> {
    use rmcp::model as m;
    fn fits<T: serde::de::DeserializeOwned>(params: &Value) -> Option<String> {
        T::deserialize(params).err().map(|e| e.to_string())
    }
    let method = value.get("method")?.as_str()?;
    let params = value.get("params").cloned();
    let required = |params: Option<Value>| params.unwrap_or(Value::Null);
    let optional = |params: Option<Value>| params.unwrap_or_else(|| json!({}));
    match method {
        "initialize" => fits::<m::InitializeRequestParams>(&required(params)),
        "tools/call" => fits::<m::CallToolRequestParams>(&required(params)),
        "resources/read" => fits::<m::ReadResourceRequestParams>(&required(params)),
        "resources/subscribe" => fits::<m::SubscribeRequestParams>(&required(params)),
        "resources/unsubscribe" => fits::<m::UnsubscribeRequestParams>(&required(params)),
        "prompts/get" => fits::<m::GetPromptRequestParams>(&required(params)),
        "completion/complete" => fits::<m::CompleteRequestParams>(&required(params)),

        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            fits::<m::PaginatedRequestParams>(&optional(params))
        }
        _ => None,
    }
}

/// A JSON-RPC id MCP accepts: a string or a (64-bit signed) integer.
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64()
}

/// The first key that appears twice in one object of `text` (already known to be JSON).
fn duplicate_key(text: &[u8]) -> Option<String> {
    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};

    struct Walk;
    impl<'de> serde::de::DeserializeSeed<'de> for Walk {
        type Value = Option<String>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(Walk)
        }
    }
    impl<'de> Visitor<'de> for Walk {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen = std::collections::HashSet::new();
            let mut found = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let inner = map.next_value_seed(Walk)?;
                if found.is_none() {
                    found = if seen.insert(key.to_string()) {
                        inner
                    } else {
                        Some(key.to_string())
                    };
                }
            }
            Ok(found)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(inner) = seq.next_element_seed(Walk)? {
                found = found.or(inner);
            }
            Ok(found)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    serde::de::DeserializeSeed::deserialize(Walk, &mut de)
        .ok()
        .flatten()
}

fn error_frame(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut frame =
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            .to_string()
            .into_bytes();
    frame.push(b'\n');
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_tools_list_of_an_initialized_session_takes_the_fast_path() {
        let route = |line: &str, initialized: bool| {
            let mut session = Session { initialized };
            match check(line.as_bytes(), 1 << 20, &mut session) {
                Check::Forward(route) => route.plain_tool_list,
                _ => false,
            }
        };
        assert!(route(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            true
        ));
        assert!(route(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}"#,
            true
        ));
        // A page asked for, per-request metadata, another method, no session: rmcp answers.
        assert!(!route(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"x"}}"#,
            true
        ));
        assert!(!route(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            false
        ));
        assert!(!route(
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/list"}"#,
            true
        ));
        assert!(!route(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            true
        ));
    }

    struct Fixed;
    impl ToolList for Fixed {
        fn body(&self) -> futures::future::BoxFuture<'_, Arc<Vec<u8>>> {
            Box::pin(async {
                Arc::new(br#"{"tools":[{"name":"x","inputSchema":{"type":"object"}}]}"#.to_vec())
            })
        }
    }

    /// The fast answer is a well-formed response under the request's id, and the id is free
    /// for reuse once it is answered.
    #[tokio::test]
    async fn tools_list_is_answered_from_the_body_under_its_id() {
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_out) = tokio::io::duplex(1 << 16);
        let (_rmcp_in, _rmcp_out) = guarded(server_in, server_out, 1 << 20, Some(Arc::new(Fixed)));
        let mut lines = BufReader::new(client_out).lines();
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n")
            .await
            .expect("write");
        for id in ["\"a\"", "\"a\"", "7"] {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}\n");
            client.write_all(line.as_bytes()).await.expect("write");
            let frame = tokio::time::timeout(std::time::Duration::from_secs(5), lines.next_line())
                .await
                .expect("answered")
                .expect("read")
                .expect("line");
            let frame: Value = serde_json::from_str(&frame).expect("JSON");
            assert_eq!(frame["jsonrpc"], "2.0");
            assert_eq!(frame["id"].to_string(), id);
            assert_eq!(frame["result"]["tools"][0]["name"], "x");
        }
    }

    fn reply(line: &str) -> Option<Value> {
        let mut session = Session { initialized: true };
        match check(line.as_bytes(), 1024, &mut session) {
            Check::Reply(frame) => Some(serde_json::from_slice(&frame).expect("frame is JSON")),
            Check::Forward(_) => None,
            Check::Ignore => Some(Value::Null),
        }
    }

    #[test]
    fn classifies_lines() {
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            None
        );
        assert_eq!(reply("not json").expect("reply")["error"]["code"], -32700);
        assert_eq!(reply("[1]").expect("reply")["error"]["code"], -32600);
        assert_eq!(reply("42").expect("reply")["error"]["code"], -32600);
        let bad =
            reply(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":"x"}"#).expect("reply");
        assert_eq!(
            (bad["id"].clone(), bad["error"]["code"].clone()),
            (json!(9), json!(-32602))
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","method":"notifications/bogus","params":5}"#),
            Some(Value::Null)
        );
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{{"name":"x","arguments":{{"a":"{}"}}}}}}"#,
            "x".repeat(2000)
        );
        let error = reply(&big).expect("reply");
        assert_eq!(error["id"], "b");
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("1024-byte limit"))
        );
    }

    #[test]
    fn ids_duplicates_and_unknown_methods_follow_the_spec() {
        for id in ["{}", "[1]", "1.5", "true", "null", "18446744073709551615"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            let error = reply(&line).expect("reply");
            assert_eq!(error["error"]["code"], -32600, "{id}");
            assert_eq!(error["id"], Value::Null, "{id}: never echoed");
        }
        for id in [r#""a""#, "7", "-3", "9223372036854775807"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            assert_eq!(reply(&line), None, "{id}");
        }
        let twice =
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#;
        let error = reply(twice).expect("reply");
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (Value::Null, json!(-32600))
        );
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("\"name\""))
        );
        let nested = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[{"k":1,"k":2}]}}}"#;
        assert_eq!(reply(nested).expect("reply")["error"]["code"], -32600);
        let same_key_elsewhere = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"name":1}}}"#;
        assert_eq!(reply(same_key_elsewhere), None);
        let bad_params = r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":5}}"#;
        assert_eq!(reply(bad_params).expect("reply")["error"]["code"], -32602);
    }

    #[test]
    fn a_second_initialize_is_refused() {
        let mut session = Session::default();
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        assert!(matches!(
            check(init.as_bytes(), 1024, &mut session),
            Check::Forward(_)
        ));
        let again = init
            .replace("\"id\":1", "\"id\":2")
            .replace("\"t\"", "\"other\"");
        let Check::Reply(frame) = check(again.as_bytes(), 1024, &mut session) else {
            panic!("a second initialize went through");
        };
        let frame: Value = serde_json::from_slice(&frame).expect("json");
        assert_eq!(
            (frame["id"].clone(), frame["error"]["code"].clone()),
            (json!(2), json!(-32600))
        );
    }

    #[test]
    fn requests_before_initialize_are_told_how_to_start() {
        let mut session = Session::default();
        let early = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let Check::Reply(frame) = check(early.as_bytes(), 1024, &mut session) else {
            panic!("expected an error reply");
        };
        let frame: Value = serde_json::from_slice(&frame).expect("json");
        let message = frame["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Send `initialize` first"), "{frame}");
        let stateless = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(matches!(
            check(stateless.as_bytes(), 1024, &mut session),
            Check::Forward(_)
        ));
        let init = r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        assert!(matches!(
            check(init.as_bytes(), 1024, &mut session),
            Check::Forward(_)
        ));
        assert!(matches!(
            check(early.as_bytes(), 1024, &mut session),
            Check::Forward(_)
        ));
    }
}
