//! The MCP surface: `tools/list`, `tools/call`, `resources/*` and change notifications.
//!
//! Tools come from descriptors at run time, so the handler is written by hand over the
//! registry. Names follow DESIGN §5: `app_<slug>` per app, `aai_exec`, and in compact mode
//! `aai_apps` / `aai_guide`; the spec's `app:<id>`, `aai:exec` and `<appId>:<tool>` are
//! accepted as aliases, and both modes accept every call of the other.

use std::sync::Arc;

use aai_descriptor::{AaiError, ErrorKind};
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ListToolsResult, ProtocolVersion, ResourceContents,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Exposure;
use aai_engine::consent::Asker;
use aai_engine::pipeline::{Caller, Gateway, Outcome, Pipeline as _, Request, render};

mod askers;
mod changes;
mod handler;
mod names;

pub use askers::ConsentRounds;
use askers::{PeerAsker, StatelessAsker, binding};
pub use changes::{Subscriptions, notify_changes};
use changes::{server_change, updated};
use names::Own;

/// The MIME type of an app resource in `resources/list`.
const AAI_MIME: &str = "application/aai+json";

const INSTRUCTIONS: &str = "aai-gateway runs the user's desktop apps through their automation interfaces. \
Each app_* tool returns that app's guide (its tools and parameters); then call aai_exec {app, tool, args}. \
With many apps, aai_apps searches them and aai_guide returns a guide. For a web service that is not listed, \
web_discover {url} fetches its guide.";

/// The header the stdio forwarder names its client's connection in (a random id), so the
/// daemon can keep "for this session" grants of a 2026-07-28 client, whose requests have no
/// session, for that connection.
pub const CONNECTION_HEADER: &str = "aai-client-connection";

/// How long a session that stands in for a 2026-07-28 client's connection lasts without a
/// request: its "for this session" grants end then.
pub const STATELESS_IDLE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// The stand-in sessions of 2026-07-28 clients, and when each last made a request.
static STATELESS: std::sync::Mutex<Vec<(String, std::time::Instant)>> =
    std::sync::Mutex::new(Vec::new());

/// Notes a request of stand-in session `id`, and ends the stand-in sessions idle for longer
/// than [`STATELESS_IDLE`] (their grants go).
fn touch_stateless(gateway: &Gateway, id: &str) {
    let now = std::time::Instant::now();
    let mut ended = Vec::new();
    {
        let mut sessions = STATELESS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions.retain(|(session, seen)| {
            let idle = now.duration_since(*seen) > STATELESS_IDLE;
            if idle {
                ended.push(session.clone());
            }
            !idle && session != id
        });
        sessions.push((id.to_owned(), now));
    }
    for session in ended {
        gateway.gate().end_session(&session);
    }
}

/// One client connection. When the last handle on it goes — the stdio client left, or the
/// daemon's HTTP session was closed or timed out — its "for this session" grants end.
struct Session {
    id: String,
    gateway: Arc<Gateway>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.gateway.gate().end_session(&self.id);
    }
}

/// The MCP server: a handle on the shared [`Gateway`].
#[derive(Clone)]
pub struct AaiServer {
    gateway: Arc<Gateway>,
    /// The client's roots, asked once and forgotten on `roots/list_changed`.
    roots: Arc<tokio::sync::Mutex<Option<Vec<String>>>>,
    /// This connection: "for this session" grants belong to it and end with it.
    session: Arc<Session>,
    /// Resources the client subscribed to (`resources/subscribe`): it hears when they change.
    subscriptions: Subscriptions,
    /// Send `list_changed` from this handler once the client is initialized (the daemon's
    /// sessions; the stdio server runs its own notifier).
    notify: bool,
}

/// An app's `tools/list` entry: what rmcp writes for a `Tool` with only these fields.
#[derive(serde::Serialize)]
struct AppEntry<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(rename = "inputSchema")]
    input_schema: &'a JsonObject,
}

/// Appends `item` to the JSON list `body` is open on (after a comma unless it is the first).
fn push_item(body: &mut Vec<u8>, item: &impl serde::Serialize) -> serde_json::Result<()> {
    if body.last() != Some(&b'[') {
        body.push(b',');
    }
    serde_json::to_writer(body, item)
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

impl AaiServer {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self {
            session: Arc::new(Session {
                id: aai_engine::gate::new_session_id(),
                gateway: gateway.clone(),
            }),
            gateway,
            roots: Arc::default(),
            notify: false,
            subscriptions: Subscriptions::default(),
        }
    }

    /// A server that sends `list_changed` to its client itself (see [`notify_changes`]).
    pub fn with_change_notifications(mut self) -> Self {
        self.notify = true;
        self
    }

    /// The resources this connection's client subscribed to.
    pub fn subscriptions(&self) -> Subscriptions {
        self.subscriptions.clone()
    }

    /// This connection's session id.
    pub fn session(&self) -> &str {
        &self.session.id
    }

    /// The client disconnected: its session grants end.
    pub fn end_session(&self) {
        self.gateway.gate().end_session(&self.session.id);
    }

    /// The `tools/list` result of the current snapshot as JSON, made once per snapshot and
    /// shared by every session (the stdio transport copies it out as it is). Each app's entry
    /// is written straight from the registry: at 10,000 apps a list of every entry built first
    /// held megabytes only to be serialized and dropped.
    pub async fn tool_list_body(&self) -> Arc<Vec<u8>> {
        let registry = self.gateway.snapshot().await;
        let body = registry
            .tool_list_body
            .get_or_init(|| Arc::new(self.tool_list_json(&registry)))
            .clone();
        registry.listed.raise();
        body
    }

    /// rmcp's `tools/list` result of [`Self::tools`], with the tools written as they are
    /// made: the result's other fields come from rmcp serializing it with no tools.
    fn tool_list_json(&self, registry: &Snapshot) -> Vec<u8> {
        let everything = || {
            serde_json::to_vec(&ListToolsResult::with_all_items(self.tools(registry)))
                .unwrap_or_else(|_| b"{\"tools\":[]}".to_vec())
        };
        let Ok(frame) = serde_json::to_vec(&ListToolsResult::with_all_items(Vec::new())) else {
            return everything();
        };
        let marker: &[u8] = b"\"tools\":[]";
        let Some(at) = frame.windows(marker.len()).position(|w| w == marker) else {
            return everything();
        };
        let (before, after) = frame.split_at(at + marker.len() - 1);
        let estimate = registry
            .apps
            .iter()
            .map(|app| app.slug.len() + app.listing.len() + 64)
            .sum::<usize>()
            + 4096;
        let mut body = Vec::with_capacity(estimate);
        body.extend_from_slice(before);
        let (head, tail) = self.fixed_tools(registry);
        let empty = schema(json!({"type": "object"}));
        // Each app's entry written from what the registry holds (no `Tool` made for it).
        let written = head
            .iter()
            .try_for_each(|tool| push_item(&mut body, tool))
            .and_then(|()| {
                self.listed_apps(registry).iter().try_for_each(|app| {
                    let entry = AppEntry {
                        name: &app.slug,
                        description: &app.listing,
                        input_schema: &empty,
                    };
                    push_item(&mut body, &entry)
                })
            })
            .and_then(|()| tail.iter().try_for_each(|tool| push_item(&mut body, tool)));
        if written.is_err() {
            return everything();
        }
        body.extend_from_slice(after);
        body.shrink_to_fit();
        body
    }

    /// The tool list for the configured exposure mode.
    pub fn tools(&self, registry: &Snapshot) -> Vec<Tool> {
        self.all_tools(registry).collect()
    }

    /// The tools of [`Self::tools`], each made when it is taken: the fixed ones before the
    /// apps, one `app_<slug>` per app in the full exposure mode (none in the compact one),
    /// the fixed ones after.
    fn all_tools<'a>(&self, registry: &'a Snapshot) -> impl Iterator<Item = Tool> + 'a {
        let empty = schema(json!({"type": "object"}));
        let (head, tail) = self.fixed_tools(registry);
        head.into_iter()
            .chain(self.listed_apps(registry).iter().map(move |app| {
                Tool::new(app.slug.clone(), app.listing.to_string(), empty.clone())
            }))
            .chain(tail)
    }

    /// The apps with a tool of their own in the configured exposure mode.
    fn listed_apps<'a>(
        &self,
        registry: &'a Snapshot,
    ) -> &'a [Arc<aai_engine::catalog::snapshot::App>] {
        if self.compact(registry) {
            &[]
        } else {
            &registry.apps
        }
    }

    /// Whether apps are listed by `aai_apps` rather than a tool each, with `registry`'s apps.
    fn compact(&self, registry: &Snapshot) -> bool {
        self.gateway.config().exposure.for_apps(registry.apps.len()) == Exposure::Compact
    }

    /// The tools listed before the apps' and after them.
    fn fixed_tools(&self, registry: &Snapshot) -> (Vec<Tool>, Vec<Tool>) {
        let mut head = Vec::new();
        if self.compact(registry) {
            head.push(Tool::new(
                names::own_name(Own::Apps),
                "List the user's apps, or search them by words in names, aliases and descriptions.",
                schema(json!({"type": "object", "properties": {"query": {"type": "string", "description": "Words to search for; omit to list all"}}})),
            ));
            head.push(Tool::new(
                names::own_name(Own::Guide),
                "Get an app's guide: its tools, their parameters and an example call.",
                schema(json!({"type": "object", "properties": {"app": {"type": "string", "description": "App id from aai_apps"}}, "required": ["app"]})),
            ));
        }
        let mut tools = Vec::new();
        tools.push(Tool::new(
            names::own_name(Own::Discover),
            "Get the guide of a web app not in the list, from its URL, domain or name.",
            schema(json!({
                "type": "object",
                "properties": {"url": {"type": "string", "description": "Web app URL, domain or name"},
                               "refresh": {"type": "boolean", "description": "Fetch anew, bypassing the cache"}},
                "required": ["url"]
            })),
        ));
        // The user's workflows, each a tool with its inputs as the schema.
        // (Invalid ones are not offered; discovery logged why.)
        for found in &registry.workflows {
            if let Ok(workflow) = &found.loaded {
                tools.push(Tool::new(
                    format!("workflow_{}", found.name),
                    format!("Workflow: {}", workflow.description),
                    schema(workflow.inputs.clone()),
                ));
            }
        }
        tools.push(Tool::new(
            names::own_name(Own::Batch),
            "Run several app tools in one request. All steps are checked first; steps needing approval are asked about together. A step may use an earlier step's result: {\"$from\": \"/0/result/id\"} (a JSON Pointer into the results).",
            schema(json!({
                "type": "object",
                "properties": {
                    "steps": {"type": "array", "minItems": 1, "maxItems": aai_engine::pipeline::batch::MAX_STEPS, "items": {
                        "type": "object",
                        "properties": {
                            "app": {"type": "string"},
                            "tool": {"type": "string"},
                            "args": {"type": "object"}
                        },
                        "required": ["app", "tool"]
                    }},
                    "parallel": {"type": "boolean", "description": "Run independent steps at once (steps that use the screen, mouse or keyboard still run one at a time)"},
                    "approval_id": {"type": "string", "description": "Only to resume a batch that returned pending approval, once the user answered"}
                },
            })),
        ));
        tools.push(Tool::new(
            names::own_name(Own::Exec),
            "Run an app's tool. Read the app's guide first.",
            schema(json!({
                "type": "object",
                "properties": {
                    "app": {"type": "string", "description": "App id"},
                    "tool": {"type": "string", "description": "Tool name from the guide"},
                    "args": {"type": "object", "description": "The tool's arguments"},
                    "approval_id": {"type": "string", "description": "Only to resume a call that returned pending approval, once the user answered: its id (app, tool and args are taken from it)"}
                }
            })),
        ));
        (head, tools)
    }

    /// The client's roots as URIs: asked with `roots/list` (protocol ≤ 2025-11-25, when the
    /// client declared roots) and cached until the client says they changed. Roots are
    /// deprecated upstream (SEP-2577), but the clients of those protocol versions send them.
    #[allow(deprecated)]
    async fn client_roots(&self, context: &RequestContext<RoleServer>) -> Vec<String> {
        let mut cached = self.roots.lock().await;
        if let Some(roots) = cached.as_ref() {
            return roots.clone();
        }
        let legacy = context
            .protocol_version()
            .is_none_or(|v| v < ProtocolVersion::V_2026_07_28);
        let declared = context
            .client_capabilities()
            .is_some_and(|caps| caps.roots.is_some());
        if !legacy || !declared {
            return Vec::new();
        }
        let asked =
            tokio::time::timeout(std::time::Duration::from_secs(5), context.peer.list_roots())
                .await;
        let roots: Vec<String> = match asked {
            Ok(Ok(result)) => result.roots.into_iter().map(|root| root.uri).collect(),
            _ => {
                tracing::warn!(
                    "the client did not list its roots; policy rules by root do not apply"
                );
                return Vec::new();
            }
        };
        *cached = Some(roots.clone());
        roots
    }

    /// Routes one `tools/call` from `caller` (the client's name) to a guide, a search or an
    /// execution.
    pub async fn dispatch(&self, caller: &str, name: &str, args: Value) -> Result<Value, AaiError> {
        let caller = Caller {
            session: Some(self.session.id.clone()),
            ..Caller::named(caller)
        };
        self.dispatch_asking(&caller, name, args, None)
            .await
            .into_result()
    }

    /// [`AaiServer::dispatch`], asking the user through `asker` when a call needs approval.
    pub async fn dispatch_asking(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
        asker: Option<&dyn Asker>,
    ) -> Outcome {
        let gateway = &self.gateway;
        let request = match names::own(name) {
            Some(Own::Exec) => {
                let (app, tool) = match (required_str(&args, "app"), required_str(&args, "tool")) {
                    (Ok(app), Ok(tool)) => (app, tool),
                    (Err(error), _) | (_, Err(error)) => return Outcome::Refused(error),
                };
                let tool_args = args.get("args").unwrap_or(&Value::Null);
                Request::tool(caller, app, tool, tool_args)
            }
            Some(Own::Batch) => Request::batch(caller, &args),
            None if name.starts_with("workflow_") => {
                Request::workflow(caller, name.trim_start_matches("workflow_"), &args)
            }
            None if !(name.starts_with("app_") || name.starts_with("app:")) => {
                match name.rsplit_once(':') {
                    Some((app, tool)) => Request::tool(caller, app, tool, &args),
                    None => {
                        return Outcome::Refused(AaiError::new(
                            ErrorKind::ToolNotFound,
                            format!(
                                "No tool {name:?} on this server. Call app_<app> (or aai_guide) for an app's guide, then aai_exec."
                            ),
                        ));
                    }
                }
            }
            _ => return Outcome::from(self.answer(name, &args).await),
        };
        gateway.call(request.asking(asker)).await
    }

    /// The gateway's own tools that read rather than call: discovery, the app list, guides.
    async fn answer(&self, name: &str, args: &Value) -> Result<Value, AaiError> {
        let gateway = &self.gateway;
        match names::own(name) {
            Some(Own::Discover) => {
                let refresh = args
                    .get("refresh")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let found = gateway
                    .discover(required_str(args, "url")?, refresh)
                    .await?;
                Ok(aai_engine::web::discovered_guide(&found))
            }
            Some(Own::Apps) => {
                let registry = gateway.snapshot().await;
                let query = args.get("query").and_then(Value::as_str).unwrap_or("");
                let mut listed = app_list(&registry, query);
                if gateway.config().store.in_apps {
                    let offered: Vec<String> = gateway
                        .store_index()
                        .matching(query, 5)
                        .into_iter()
                        .filter(|found| registry.find(&found.app_id).is_none())
                        .map(|found| format!("- {} — {} (not installed; the user can run `aai-gateway store install {}`)", found.app_id, found.name, found.app_id))
                        .collect();
                    if !offered.is_empty() {
                        listed.push_str("\nIn the app store, not installed:\n");
                        listed.push_str(&offered.join("\n"));
                    }
                }
                Ok(Value::String(listed))
            }
            Some(Own::Guide) => {
                let registry = gateway.snapshot().await;
                gateway
                    .guide(&registry, required_str(args, "app")?)
                    .await
                    .map(Value::String)
            }
            // `app_<id>`: the app's guide.
            _ => {
                let registry = gateway.snapshot().await;
                gateway.guide(&registry, name).await.map(Value::String)
            }
        }
    }
}

fn required_str<'a>(args: &'a Value, field: &str) -> Result<&'a str, AaiError> {
    args.get(field).and_then(Value::as_str).ok_or_else(|| {
        AaiError::new(
            ErrorKind::InvalidParams,
            format!("`{field}` is required and must be a string"),
        )
        .with_detail(json!({"field": field}))
    })
}

/// The text of `aai_apps`: one line per matching app.
fn app_list(registry: &Snapshot, query: &str) -> String {
    let apps = registry.search(query);
    if apps.is_empty() {
        let all: Vec<&str> = registry.apps.iter().take(30).map(|a| a.id()).collect();
        return format!("No app matches {query:?}. Apps: {}", all.join(", "));
    }
    let mut out = String::new();
    for app in apps {
        out.push_str(app.id());
        out.push_str(" — ");
        out.push_str(
            app.listing
                .trim_end_matches(" Call for guide.")
                .trim_end_matches('.'),
        );
        // Only when two sources offer the app: which one is used, which one it hides.
        if let Some(hidden) = app.hides {
            out.push_str(&format!(
                " [from {}; hides the {} copy]",
                app.source.words(),
                hidden.words()
            ));
        }
        out.push('\n');
    }
    out.push_str("Call aai_guide {app} for an app's tools.");
    out
}

fn tool_result(result: Result<Value, AaiError>, max_chars: usize) -> CallToolResult {
    match result {
        Ok(output) => {
            let rendered = render(&output, max_chars);
            let mut blocks = vec![ContentBlock::text(rendered.text)];
            if let Some((mime, _, data)) = aai_engine::pipeline::binary(&output) {
                // Images as image content; anything else as an embedded resource, typed.
                blocks.push(if mime.starts_with("image/") {
                    ContentBlock::image(data, mime)
                } else {
                    ContentBlock::resource(
                        ResourceContents::blob(data, "aai://result").with_mime_type(mime),
                    )
                });
            }
            let mut result = CallToolResult::success(blocks);
            result.structured_content = rendered.structured;
            result
        }
        Err(error) => {
            let text = format!(
                "{} ({}): {}",
                error.kind.type_name(),
                error.kind.code(),
                error.message
            );
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content = Some(error.to_json());
            result
        }
    }
}

/// The stdio transport's `tools/list` answers, from the server's snapshot body.
pub struct ToolListBody(pub AaiServer);

impl crate::transport::ToolList for ToolListBody {
    fn body(&self) -> futures::future::BoxFuture<'_, Arc<Vec<u8>>> {
        Box::pin(self.0.tool_list_body())
    }
}
