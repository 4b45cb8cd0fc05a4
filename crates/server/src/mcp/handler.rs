//! The MCP methods the gateway answers (`rmcp::ServerHandler`): initialize, tools, resources,
//! prompts, logging, subscriptions.

use std::sync::Arc;
use std::time::Instant;

use aai_descriptor::{AaiError, ErrorKind};
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InputRequiredResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};

use aai_engine::consent::Asker;
use aai_engine::pipeline::Outcome;
use aai_engine::pipeline::{Caller, find_app};

use super::*;

impl ServerHandler for AaiServer {
    #[allow(deprecated)] // enable_logging: see set_level
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new(
            "aai-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let registry = self.gateway.snapshot().await;
        let tools = listed_for(&registry, || self.tools(&registry));
        registry.listed.raise();
        Ok(ListToolsResult::with_all_items(tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = Instant::now();
        let mut name = request.name.to_string();
        let app = name
            .strip_prefix("app_")
            .or_else(|| name.strip_prefix("app:"))
            .or_else(|| name.rsplit_once(':').map(|(app, _)| app))
            .unwrap_or(&name);
        let registry = self.gateway.snapshot_for(app).await;
        if !names::routes(&name, self.gateway.home(), &registry) {
            tracing::info!(tool = %name, "tools/call of no tool");
            return Err(names::unknown(&name, &registry));
        }
        let mut args = Value::Object(request.arguments.take().unwrap_or_default());
        let (caller, task) = self.caller_of(&context);
        // `aai_exec {"approval_id"}`: the call the user answered in the approval queue, run
        // once as it was asked.
        let resume = match self.resumed(&mut name, &mut args, &caller) {
            Ok(resume) => resume,
            Err(error) => {
                let max = self.gateway.config().max_result_chars;
                return Ok(tool_result(Err(error), max).into());
            }
        };
        // The call as the queue keeps it, copied only when the queue may be asked.
        let queued = (resume.is_some() || self.gateway.queues_approvals())
            .then(|| queued_call(&name, &args));
        let asker = self.asker_for(
            &Asking {
                caller: &caller,
                name: &name,
                args: &args,
                task: task.as_ref().map(|(grant, _)| grant),
                resume: resume.as_ref().map(|(id, _)| id.as_str()),
                claimed: resume.as_ref().and_then(|(_, answer)| *answer),
                queued: queued.as_ref(),
            },
            &request,
            &context,
        );
        let roots = if self.gateway.policy_config().uses_roots() {
            self.client_roots(&context).await
        } else {
            Vec::new()
        };
        let who = Caller {
            name: caller.clone(),
            roots,
            session: Some(self.session_of(&context, &caller)),
            progress: progress_reporter(&context),
            task: task.as_ref().map(|(grant, _)| grant.clone()),
            calls: task.as_ref().map(|(_, calls)| calls.clone()),
        };
        let result = self
            .run_guarded(&who, &name, args, asker.as_deref(), &context.ct)
            .await;
        self.respond(&name, &caller, started, result)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let registry = self.gateway.snapshot().await;
        let resources = registry
            .apps
            .iter()
            .map(|app| {
                let d = app.summary();
                Resource::new(format!("app:{}", d.app_id), d.name.clone())
                    .with_description(d.description.clone())
                    .with_mime_type(AAI_MIME)
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let registry = self.gateway.snapshot().await;
        let Some(id) = request.uri.strip_prefix("app:") else {
            return Err(McpError::resource_not_found(
                format!(
                    "unknown resource {:?}: app resources are named app:<appId>",
                    request.uri
                ),
                None,
            ));
        };
        let app = find_app(&registry, id)
            .map_err(|error| McpError::resource_not_found(error.message, error.detail))?;
        let descriptor = app
            .descriptor()
            .map_err(|error| McpError::resource_not_found(error.message, error.detail))?;
        // An MCP server's tools are what it lists (it starts for it).
        let doc = self
            .gateway
            .listed(app.platform, descriptor)
            .await
            .map_err(|error| McpError::internal_error(error.message, error.detail))?
            .for_platform(app.platform);
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        let contents = ResourceContents::TextResourceContents {
            uri: request.uri.clone(),
            mime_type: Some("application/json".to_owned()),
            text,
            meta: None,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        // Sessions that began with `initialize` get list_changed as plain notifications; the
        // 2026-07-28 lifecycle gets them through `subscriptions/listen` instead.
        if self.notify {
            tokio::spawn(notify_changes(
                context.peer.clone(),
                self.gateway.snapshot_changes(),
                self.subscriptions.clone(),
                self.gateway.executors().mcp().and_then(|m| m.changes()),
            ));
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Any URI may be watched: an app that is not installed yet is announced when it is.
        if let Ok(mut subscribed) = self.subscriptions.lock() {
            subscribed.insert(request.uri);
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Ok(mut subscribed) = self.subscriptions.lock() {
            subscribed.remove(&request.uri);
        }
        Ok(())
    }

    // Logging is deprecated (SEP-2577) but 2025-era clients set a level: the gateway logs to
    // stderr and its log file and sends no log notifications, so any level holds as asked.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn on_roots_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        *self.roots.lock().await = None;
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.gateway.snapshot_changes();
        let mut last = changes.borrow_and_update().clone();
        let mut servers = self.mcp_changes();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                Some(app) = server_change(&mut servers) => {
                    // An MCP server's tools changed: its guide did.
                    let accepted = context.accepted();
                    if accepted.tools_list_changed == Some(true) {
                        let _ = context.sink().notify_tool_list_changed().await;
                    }
                    let uri = format!("app:{app}");
                    if accepted.resource_subscriptions.as_ref().is_some_and(|u| u.contains(&uri)) {
                        let _ = context.sink().notify_resource_updated(uri).await;
                    }
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let current = changes.borrow_and_update().clone();
                    let previous = std::mem::replace(&mut last, current.clone());
                    if previous.same_apps(&current) {
                        continue;
                    }
                    let accepted = context.accepted();
                    if accepted.tools_list_changed == Some(true) {
                        let _ = context.sink().notify_tool_list_changed().await;
                    }
                    if accepted.resources_list_changed == Some(true) {
                        let _ = context.sink().notify_resource_list_changed().await;
                    }
                    if let Some(uris) = &accepted.resource_subscriptions {
                        for uri in updated(&previous, &current, uris) {
                            let _ = context.sink().notify_resource_updated(uri).await;
                        }
                    }
                    tokio::time::sleep(aai_engine::NOTIFY_EVERY).await;
                }
            }
        }
    }
}

/// Turns a long call's reports into `notifications/progress` when the request carries a
/// progress token (values increase by one per report; the message is the latest output).
fn progress_reporter(
    context: &RequestContext<RoleServer>,
) -> Option<aai_engine::pipeline::Progress> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    Some(Arc::new(move |latest: &str| {
        let step = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut note = rmcp::model::ProgressNotificationParam::new(token.clone(), step as f64);
        note.message = Some(if latest.is_empty() {
            "running (no output yet)".to_owned()
        } else {
            latest.to_owned()
        });
        let peer = peer.clone();
        tokio::spawn(async move {
            let _ = peer.notify_progress(note).await;
        });
    }))
}

/// The `tools/list` answer made for the snapshot in force, shared by every session until the
/// next snapshot (the newest one only: a snapshot is replaced, not kept beside others). The
/// snapshot is held weakly, so its memory is not reused while this names it.
static LISTED: std::sync::Mutex<Option<Listed>> = std::sync::Mutex::new(None);

/// A tool list and the snapshot it was made for.
type Listed = (std::sync::Weak<Snapshot>, Arc<Vec<Tool>>);

/// The tool list of `registry`, made by `make` the first time it is asked for.
fn listed_for(registry: &Arc<Snapshot>, make: impl FnOnce() -> Vec<Tool>) -> Arc<Vec<Tool>> {
    let mut slot = LISTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((made_for, tools)) = slot.as_ref()
        && made_for
            .upgrade()
            .is_some_and(|known| Arc::ptr_eq(&known, registry))
    {
        return tools.clone();
    }
    let tools = Arc::new(make());
    *slot = Some((Arc::downgrade(registry), tools.clone()));
    tools
}

/// A call as the approval queue keeps it: app, tool and arguments.
type Queued = (String, String, Value);

/// The call as the approval queue keeps it: `aai_exec`'s app, tool and arguments, or a tool
/// named `app:tool` (a batch: `aai_batch`) with its arguments.
fn queued_call(name: &str, args: &Value) -> Queued {
    if names::own(name) == Some(names::Own::Exec) {
        let text = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        (
            text("app"),
            text("tool"),
            args.get("args").cloned().unwrap_or(Value::Null),
        )
    } else if names::own(name) == Some(names::Own::Batch) {
        // Either spelling (`aai_batch`, `aai:batch`) is kept as the batch it is.
        (
            aai_engine::pipeline::batch::TOOL.to_owned(),
            String::new(),
            args.clone(),
        )
    } else {
        let (app, tool) = name.rsplit_once(':').unwrap_or((name, ""));
        (app.to_owned(), tool.to_owned(), args.clone())
    }
}

/// What decides who asks the user about a call; the asker borrows what lives `'a`, not the
/// call's name and arguments (`'c`), which go on to run.
struct Asking<'a, 'c> {
    caller: &'a str,
    name: &'c str,
    args: &'c Value,
    /// The scheduled task whose agent makes the call.
    task: Option<&'a Arc<aai_engine::pipeline::task::TaskGrant>>,
    /// The approval a resumed call carries.
    resume: Option<&'a str>,
    /// The answer that resume took already.
    claimed: Option<aai_engine::consent::Answer>,
    /// The call as the approval queue would keep it, when the queue may be asked.
    queued: Option<&'a Queued>,
}

impl AaiServer {
    /// The appIds of MCP servers whose tools change from now on.
    pub fn mcp_changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        self.gateway.executors().mcp().and_then(|m| m.changes())
    }

    /// `aai_exec {"approval_id"}` (or `aai_batch`'s): `name` and `args` become the call the
    /// user answered in the approval queue — a batch that waited as a whole runs again with
    /// the answer. The approval's id; INVALID_PARAMS when it is no open approval of `caller`.
    fn resumed(
        &self,
        name: &mut String,
        args: &mut Value,
        caller: &str,
    ) -> Result<Option<(String, Option<aai_engine::consent::Answer>)>, AaiError> {
        let resumable = matches!(names::own(name), Some(names::Own::Exec | names::Own::Batch));
        let Some(id) = resumable
            .then(|| args.get("approval_id").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned)
        else {
            return Ok(None);
        };
        let answer = match self.gateway.approvals().call_of(&id, caller) {
            Ok(call) if call.app == aai_engine::pipeline::batch::TOOL => {
                names::own_name(names::Own::Batch).clone_into(name);
                *args = call.args;
                call.answer
            }
            Ok(call) => {
                *args = json!({"app": call.app, "tool": call.tool, "args": call.args});
                call.answer
            }
            Err(message) => {
                return Err(AaiError::new(ErrorKind::InvalidParams, message.to_string())
                    .with_detail(json!({"field": "approval_id"})));
            }
        };
        Ok(Some((id, answer)))
    }

    /// Who asks the user about this call: a scheduled task's rule; the approval queue for a
    /// resumed call; elicitation when the client can ask (a request up to 2025-11-25, an
    /// InputRequiredResult from 2026-07-28); the approval queue when the config sends
    /// questions there; else the desktop's own dialog; else nobody, and a call that needs
    /// approval is denied with the command that grants it.
    fn asker_for<'a>(
        &'a self,
        asking: &Asking<'a, '_>,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Box<dyn Asker + 'a>> {
        let timeout = self.gateway.config().consent_timeout();
        let stateless = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let can_elicit = context
            .client_capabilities()
            .is_some_and(|caps| caps.elicitation.is_some());
        let caller = asking.caller;
        let resume = asking.resume.map(str::to_owned);
        let queue = || {
            asking.queued.map(|(app, tool, args)| {
                Box::new(aai_engine::consent::queue::QueueAsker {
                    approvals: self.gateway.approvals(),
                    call: aai_engine::consent::queue::Pending {
                        caller,
                        app,
                        tool,
                        args,
                    },
                    resume: resume.clone(),
                    claimed: asking.claimed,
                    wait: self.gateway.config().approval_wait(),
                    stop: self.gateway.stop().calls(),
                }) as Box<dyn Asker + 'a>
            })
        };
        if let Some(grant) = asking.task {
            Some(Box::new(aai_engine::pipeline::task::TaskAsker {
                gateway: &self.gateway,
                task: &grant.task,
                on_approval: grant.on_approval,
            }))
        } else if asking.resume.is_some() {
            queue()
        } else if stateless && can_elicit {
            Some(Box::new(StatelessAsker {
                rounds: ConsentRounds::of_this_process(),
                binding: binding(caller, asking.name, asking.args),
                state: request.request_state.clone(),
                responses: request.input_responses.clone(),
                timeout,
            }))
        } else if let Some(peer) = PeerAsker::for_request(context, timeout) {
            Some(Box::new(peer))
        } else if self.gateway.queues_approvals() {
            queue()
        } else {
            aai_engine::consent::dialog::available().map(|kind| {
                Box::new(aai_engine::consent::dialog::DialogAsker { kind, timeout })
                    as Box<dyn Asker>
            })
        }
    }

    /// Who makes a call: the client's name (`clientInfo.name` from initialize, or the
    /// request's own `_meta` in the 2026-07-28 lifecycle), or — for an agent a scheduled task
    /// started, which presents its run's token — the task, whose layer its calls run under and
    /// which never waits for a person it did not ask for.
    fn caller_of(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> (
        String,
        Option<(
            Arc<aai_engine::pipeline::task::TaskGrant>,
            aai_engine::pipeline::CallIds,
        )>,
    ) {
        let caller = context
            .client_info()
            .map(|info| info.name)
            .filter(|name| name != aai_audit::EVERY_CLIENT)
            .unwrap_or_else(|| "unknown-client".to_owned());
        let task = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get(axum::http::header::AUTHORIZATION))
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .and_then(|token| self.gateway.tasks()?.token(token.trim()));
        match task {
            Some((grant, calls)) => (format!("schedule:{}", grant.task), Some((grant, calls))),
            None => (caller, None),
        }
    }

    /// The session "for this session" grants belong to. A connection with a session of its own
    /// (stdio, an HTTP session up to 2025-11-25) is its session. A 2026-07-28 request over
    /// HTTP has none — each is its own exchange — so its client's connection stands in: the
    /// stdio forwarder names its connection in [`super::CONNECTION_HEADER`]; any other HTTP
    /// client is one session per client name. Such a session ends after
    /// [`super::STATELESS_IDLE`] without a request.
    fn session_of(&self, context: &RequestContext<RoleServer>, caller: &str) -> String {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let stateless = parts.is_some_and(|parts| !parts.headers.contains_key("mcp-session-id"));
        if !stateless {
            return self.session.id.clone();
        }
        let connection = parts
            .and_then(|parts| parts.headers.get(super::CONNECTION_HEADER))
            .and_then(|value| value.to_str().ok())
            .filter(|value| {
                (16..=64).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_hexdigit())
            });
        let id = match connection {
            Some(connection) => format!("connection:{connection}"),
            None => format!("client:{caller}"),
        };
        super::touch_stateless(&self.gateway, &id);
        id
    }

    /// Runs a call. Whatever panics outside an executor (a guide, a parser) fails this call
    /// alone, and a cancel from the client (`notifications/cancelled`) drops the call: its
    /// command is stopped and its audit row says `cancelled`.
    async fn run_guarded(
        &self,
        who: &Caller,
        name: &str,
        args: Value,
        asker: Option<&dyn Asker>,
        cancelled: &tokio_util::sync::CancellationToken,
    ) -> Outcome {
        use futures::FutureExt;
        let call = std::panic::AssertUnwindSafe(self.dispatch_asking(who, name, args, asker))
            .catch_unwind();
        let outcome = tokio::select! {
            outcome = call => outcome,
            () = cancelled.cancelled() => {
                tracing::info!(tool = %name, caller = %who.name, "call cancelled by the client");
                Ok(Outcome::Refused(AaiError::new(ErrorKind::AutomationFailed, "the client cancelled the call")))
            }
        };
        outcome.unwrap_or_else(|panic| {
            let what = aai_engine::pipeline::panic_message(panic.as_ref());
            tracing::error!(tool = %name, panic = %what, "a call panicked; it failed and the gateway goes on");
            Outcome::Refused(AaiError::new(
                ErrorKind::AutomationFailed,
                format!("{name} failed inside the gateway ({what}); other calls are unaffected. Please report it with the gateway's log."),
            ))
        })
    }

    /// The answer to a call: the question in the client's own form when the user is being
    /// asked through it (2026-07-28), else the result, logged.
    fn respond(
        &self,
        name: &str,
        caller: &str,
        started: Instant,
        outcome: Outcome,
    ) -> Result<CallToolResponse, McpError> {
        let result = match outcome {
            Outcome::NeedsInput(pending) => {
                let input_required: InputRequiredResult =
                    serde_json::from_value(pending).map_err(|e| {
                        McpError::internal_error(
                            format!("cannot build the consent request: {e}"),
                            None,
                        )
                    })?;
                tracing::info!(tool = %name, %caller, "asking the user through the client (input required)");
                return Ok(CallToolResponse::InputRequired(input_required));
            }
            Outcome::Done(value) => Ok(value),
            Outcome::Refused(error) => Err(error),
        };
        match &result {
            Ok(_) => {
                tracing::info!(tool = %name, %caller, ms = started.elapsed().as_millis() as u64, "call ok")
            }
            Err(error) => {
                tracing::info!(tool = %name, %caller, code = error.kind.code(), "call failed: {}", error.message)
            }
        }
        Ok(tool_result(result, self.gateway.config().max_result_chars).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch is queued as the batch it is under either spelling, so resuming it by its
    /// approval id runs the same steps; a call by `<appId>:<tool>` is queued as that call.
    #[test]
    fn a_queued_call_is_the_same_under_every_spelling() {
        let batch = json!({"steps": [{"app": "a.b", "tool": "t"}]});
        let plain = queued_call("aai_batch", &batch);
        assert_eq!(plain, queued_call("aai:batch", &batch));
        assert_eq!(plain.0, aai_engine::pipeline::batch::TOOL);
        let exec = json!({"app": "a.b", "tool": "t", "args": {"x": 1}});
        assert_eq!(
            queued_call("aai:exec", &exec),
            ("a.b".to_owned(), "t".to_owned(), json!({"x": 1}))
        );
        assert_eq!(
            queued_call("aai_exec", &exec),
            queued_call("aai:exec", &exec)
        );
        assert_eq!(
            queued_call("a.b:t", &json!({"x": 1})),
            ("a.b".to_owned(), "t".to_owned(), json!({"x": 1}))
        );
    }
}
