//! A call of a server's tool: the executor and tool source faces of [`Servers`], the call
//! itself with its progress, questions and cancellation, and its result as the gateway's.

use super::*;

impl Executor for Servers {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let descriptor = invocation.descriptor;
            let what = format!("{}:{}", descriptor.app_id, invocation.tool);
            if invocation.tool == SIGN_IN && signs_in(descriptor) {
                return self.sign_in(descriptor).await;
            }
            let (server, listed) = self.listed(descriptor).await?;
            let refused = listed
                .changed
                .get(invocation.tool)
                .filter(|c| c.pinned.is_some());
            // Approved meanwhile (`consent approve` in another process): read again next time.
            let approved = refused.is_some_and(|c| {
                self.pins
                    .check(&descriptor.app_id, &[(c.tool.clone(), c.now.clone())])
                    .is_ok_and(|still| still.is_empty())
            });
            if approved {
                server.stale.store(true, Ordering::SeqCst);
            }
            if let Some(change) = refused.filter(|_| !approved) {
                return Err(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "{what}: the server changed this tool's definition since it was pinned, so it is refused until the user approves the new one with `aai-gateway consent approve {} {}`:\n{}",
                        descriptor.app_id,
                        invocation.tool,
                        change.diff()
                    ),
                )
                .with_detail(json!({"reason": "mcp_tool_changed", "tool": invocation.tool})));
            }
            let (peer, progress) = {
                let state = server.state.lock().await;
                match state.conn.as_ref() {
                    Some(conn) => (
                        conn.client.peer().clone(),
                        conn.client.service().progress.clone(),
                    ),
                    None => {
                        return Err(cannot_start(
                            &server.app_id,
                            Some(&server.spec),
                            &"it stopped",
                        ));
                    }
                }
            };
            server.touch();
            let _under_way = InFlight::new(&server.in_flight);
            if listed.reaches.iter().any(|r| r == invocation.tool) {
                let reached = tokio::time::timeout(
                    invocation.timeout,
                    reach(&peer, invocation.tool, invocation.args),
                )
                .await
                .map_err(|_| {
                    AaiError::new(
                        ErrorKind::Timeout,
                        format!(
                            "{what}: no answer within {} s",
                            invocation.timeout.as_secs()
                        ),
                    )
                })?;
                return reached.unwrap_or(Ok(Value::Null)).map_err(|e| {
                    AaiError::new(
                        ErrorKind::AutomationFailed,
                        format!("{what}: the MCP server failed the request: {e}"),
                    )
                });
            }
            let params = CallToolRequestParams::new(invocation.tool.to_owned())
                .with_arguments(invocation.args.clone());
            let (ask, mut asked) = tokio::sync::mpsc::channel(1);
            server
                .asks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(ask.clone());
            let result = tokio::time::timeout(
                invocation.timeout,
                call_tool(&peer, &progress, params, &invocation, &mut asked),
            )
            .await;
            server
                .asks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|a| !a.same_channel(&ask));
            server.touch();
            match result {
                Ok(Ok(rmcp::model::ServerResult::CallToolResult(result))) => output(&what, &result),
                Ok(Ok(_)) => Err(AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!(
                        "{what}: the MCP server answered tools/call with something else than a tool result"
                    ),
                )),
                Ok(Err(
                    rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_),
                )) => {
                    // It exited (crashed, was killed): started again on the next call, and a
                    // read-only tool is tried again at once like any app that was not running.
                    let mut state = server.state.lock().await;
                    state.conn = None;
                    state.listed = None;
                    server.set_status(|s| {
                        s.state = "stopped";
                        s.pid = None;
                    });
                    Err(AaiError::new(
                        ErrorKind::AppNotRunning,
                        format!(
                            "{what}: the MCP server exited during the call; it is started again on the next one"
                        ),
                    ))
                }
                Ok(Err(e)) => Err(AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!("{what}: the MCP server failed the call: {e}"),
                )),
                Err(_) => Err(AaiError::new(
                    ErrorKind::Timeout,
                    format!(
                        "{what}: no answer within {} s (the call was cancelled at the server)",
                        invocation.timeout.as_secs()
                    ),
                )),
            }
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let spec = Spec::of(
            invocation.descriptor,
            !invocation.descriptor.fetched,
            &self.folder(&invocation.descriptor.app_id),
        )
        .map_err(|e| cannot_start(&invocation.descriptor.app_id, None, &e))?;
        Ok(json!({
            "server": spec.describe(),
            "method": "tools/call",
            "params": {"name": invocation.tool, "arguments": invocation.args},
        }))
    }
}

impl ToolSource for Servers {
    fn filled<'a>(
        &'a self,
        descriptor: &'a Arc<Descriptor>,
    ) -> BoxFuture<'a, Result<Arc<Descriptor>, AaiError>> {
        Box::pin(async move {
            let (_, listed) = self.listed(descriptor).await?;
            Ok(listed.descriptor.clone())
        })
    }

    fn stopped(&self) {
        self.stop_all();
    }

    fn set_risks(&self, risks: HashMap<String, Risk>) {
        let changed = *self
            .overrides
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            != risks;
        *self
            .overrides
            .write()
            .unwrap_or_else(PoisonError::into_inner) = risks;
        if changed {
            // Every server's tools are rated again on their next use.
            for server in self
                .servers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .values()
            {
                server.stale.store(true, Ordering::SeqCst);
            }
        }
    }

    fn set_auth(&self, auth: Arc<dyn aai_executor::rest::Auth>) {
        *self.auth.write().unwrap_or_else(PoisonError::into_inner) = Some(auth);
    }

    fn states(&self) -> Value {
        serde_json::to_value(self.statuses()).unwrap_or_default()
    }

    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        Some(self.changes.subscribe())
    }
}

/// Sends `tools/call` and waits for its answer, passing the server's progress on to
/// `report`. Dropped before the answer (a timeout, the client's cancel, the emergency
/// stop), it tells the server with `notifications/cancelled`.
pub(crate) async fn call_tool(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    progress: &rmcp::handler::client::progress::ProgressDispatcher,
    params: CallToolRequestParams,
    invocation: &Invocation<'_>,
    asked: &mut tokio::sync::mpsc::Receiver<server::Ask>,
) -> Result<rmcp::model::ServerResult, rmcp::ServiceError> {
    let report = invocation.progress;
    use futures::StreamExt as _;
    let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::Request::new(params));
    let handle = peer
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await?;
    let mut reports = progress.subscribe(handle.progress_token.clone()).await;
    let mut cancel = CancelOnDrop {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    let response = handle.await_response();
    tokio::pin!(response);
    let mut questions = 0;
    loop {
        tokio::select! {
            answer = &mut response => {
                cancel.id = None;
                return answer;
            }
            Some((message, schema, reply)) = asked.recv() => {
                // Marked as the server's: the user knows who asks.
                let message = format!(
                    "[asked by the MCP server {}] {}",
                    aai_descriptor::visible::visible(&invocation.descriptor.name),
                    visible(&message)
                );
                questions += 1;
                let answer = match invocation.elicit {
                    Some(elicit) if questions <= MOST_QUESTIONS => elicit.elicit(&message, &schema).await,
                    _ => aai_executor::Elicited::Declined,
                };
                let _ = reply.send(answer);
            }
            Some(step) = reports.next() => {
                if let Some(report) = report {
                    let text = match (&step.message, step.total) {
                        (Some(message), _) => message.clone(),
                        (None, Some(total)) => format!("{} of {total}", step.progress),
                        (None, None) => format!("{}", step.progress),
                    };
                    report(&text);
                }
            }
        }
    }
}

/// Counts a call as under way while it lives.
pub(crate) struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The most questions one call may put to the user; more are declined.
pub(crate) const MOST_QUESTIONS: usize = 3;

/// Tells the server a request was dropped before its answer.
pub(crate) struct CancelOnDrop {
    peer: rmcp::Peer<rmcp::RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let peer = self.peer.clone();
            runtime.spawn(async move {
                let reason = "the gateway's caller cancelled the call, or it timed out".to_owned();
                let _ = peer
                    .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                        Some(id),
                        Some(reason),
                    ))
                    .await;
            });
        }
    }
}

/// A server's result as the gateway's output: its structured content when it gives one, an
/// image or audio as binary content, else its text. `isError` is AUTOMATION_FAILED with the
/// server's words.
pub(crate) fn output(what: &str, result: &rmcp::model::CallToolResult) -> Result<Value, AaiError> {
    let mut texts = Vec::new();
    let mut binary = None;
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => texts.push(t.text.clone()),
            ContentBlock::Image(i) if binary.is_none() => {
                binary = Some((i.mime_type.clone(), i.data.clone()));
            }
            ContentBlock::Audio(a) if binary.is_none() => {
                binary = Some((a.mime_type.clone(), a.data.clone()));
            }
            ContentBlock::Resource(r) => {
                texts.push(serde_json::to_string(&r.resource).unwrap_or_default())
            }
            ContentBlock::ResourceLink(l) => texts.push(format!("resource: {}", l.uri)),
            _ => {}
        }
    }
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        return Err(AaiError::new(
            ErrorKind::AutomationFailed,
            format!("{what}: the MCP server says: {text}"),
        ));
    }
    if let Some((mime, data)) = binary {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.as_bytes())
            .map_or(0, |b| b.len() as u64);
        let mut out = Map::new();
        out.insert(
            aai_executor::rest::BINARY_KEY.to_owned(),
            json!({"mime": mime, "bytes": bytes, "base64": data}),
        );
        if !text.is_empty() {
            out.insert("text".into(), Value::String(text));
        }
        return Ok(Value::Object(out));
    }
    if let Some(structured) = result.structured_content.clone().filter(Value::is_object) {
        return Ok(structured);
    }
    Ok(Value::String(text))
}
