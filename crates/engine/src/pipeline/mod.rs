//! The call pipeline: resolve app and tool → check arguments → execute → shape the result.
//!
//! Every way of calling a tool (MCP `aai_exec`, the spec's aliases, a batch, a workflow, the
//! `call` CLI, a scheduled run) goes through [`Pipeline::call`], so they all validate and fail
//! the same way, and each comes to an [`Outcome`]: done, waiting for the person's answer, or
//! refused.

use std::sync::Arc;
use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind, guide};
use aai_executor::Executors;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::config::Config;
use crate::gate::{Call, Gate};

use crate::catalog::snapshot::{App, Snapshot};

mod args;
pub mod batch;
pub mod builtins;
mod call;
mod consent;
mod outcome;
mod render;
pub mod stop;
mod switch;
pub mod task;
mod web;
mod workflow;

use crate::web::Web;
pub use args::find_app;
use args::find_tool;
pub use builtins::Builtins;
use builtins::{CurrentToolsets, LocalKit, Plugged, current, toolset_setup};
pub use outcome::{Outcome, Pipeline, Request, Target, WorkflowRun};
pub use render::{Rendered, binary, render};

/// Who is calling: the client's reported name, its roots (they can pick its policy profile)
/// and its session, which session grants belong to.
#[derive(Clone, Default)]
pub struct Caller {
    pub name: String,
    pub roots: Vec<String>,
    /// `None`: no session (the `call` CLI); "for this session" grants are not offered.
    pub session: Option<String>,
    /// Where a long call reports progress (the client gave a progress token).
    pub progress: Option<Progress>,
    /// A scheduled task's policy layer: only its granted tools, up to its risk, and never
    /// a wait for a person unless the task says so.
    pub task: Option<Arc<task::TaskGrant>>,
    /// Where the audit ids of this caller's calls are collected (a scheduled run's history).
    pub calls: Option<CallIds>,
}

/// The audit ids of calls, as they are made.
pub type CallIds = Arc<std::sync::Mutex<Vec<String>>>;

/// A progress sink: takes the latest output of a long call.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("name", &self.name)
            .field("roots", &self.roots)
            .field("session", &self.session)
            .field("progress", &self.progress.is_some())
            .field("task", &self.task.as_ref().map(|t| &t.task))
            .finish()
    }
}

impl Caller {
    /// A caller with no roots and no session.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..Self::default()
        }
    }
}

/// Shared state of one gateway process.
pub struct Gateway {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    executors: Executors,
    /// The config in force and its policy, read again when `config.json` changes (see
    /// [`crate::config::live`]); [`Gateway::config`] is the current one.
    live: Arc<crate::config::live::LiveConfig>,
    /// `AAI_HOME`.
    home: std::path::PathBuf,
    gate: Gate,
    /// Web apps: discovery, registry, credentials.
    web: Arc<Web>,
    /// The kit of built-in toolsets the binary plugged in ([`Gateway::plug_kit`]) and the
    /// toolsets it built (they judge their own calls' risk and prefix grants), rebuilt when
    /// their sections of the config change.
    local: Arc<LocalKit>,
    /// The scheduler the binary plugged in ([`Gateway::plug_tasks`]).
    tasks: std::sync::RwLock<Option<Arc<dyn task::Tasks>>>,
    /// The toolsets other crates plugged in ([`Gateway::plug`]).
    plugged: Plugged,
    /// The emergency stop: while it is on, every call is refused.
    stop: Arc<switch::EmergencyStop>,
    /// Approvals waiting for the user (the daemon's queue).
    approvals: Arc<crate::consent::queue::Approvals>,
    /// Whether calls whose client cannot ask wait in the queue (the daemon) rather than in
    /// a desktop dialog.
    queue_approvals: std::sync::atomic::AtomicBool,
    /// Held by a batch step that drives the screen, mouse or keyboard: one at a time.
    desktop: tokio::sync::Mutex<()>,
    /// The app store's apps as last read (install hints, `aai_apps`): in memory.
    store_index: crate::appstore::Index,
}

/// The longest a request waits for the first scan, however steadily it progresses (clients
/// give up on a request after about a minute).
pub const FIRST_SCAN_AT_MOST: Duration = Duration::from_secs(30);

impl Gateway {
    /// A gateway whose web tools use the credential store under `home`. A config whose
    /// `extra_ca_certs` cannot be read is logged and the system's roots are used alone.
    pub fn new(
        registry: watch::Receiver<Arc<Snapshot>>,
        config: Config,
        executors: Executors,
        data_db: std::path::PathBuf,
        home: &std::path::Path,
    ) -> Arc<Self> {
        Self::new_live(
            registry,
            Arc::new(crate::config::live::LiveConfig::fixed(config)),
            executors,
            data_db,
            home,
        )
    }

    /// A gateway whose config is `live`: when it changes, the toolsets are rebuilt with it.
    pub fn new_live(
        registry: watch::Receiver<Arc<Snapshot>>,
        live: Arc<crate::config::live::LiveConfig>,
        executors: Executors,
        data_db: std::path::PathBuf,
        home: &std::path::Path,
    ) -> Arc<Self> {
        let mut config = (*live.get()).clone();
        let web = Web::new(&config, home).unwrap_or_else(|problem| {
            tracing::warn!("{problem}; using the system's certificate authorities only");
            config.web.extra_ca_certs.clear();
            Web::new(&config, home).expect("a web client without extra certificates")
        });
        let web = Arc::new(web);
        let setup = toolset_setup(&config, home);
        let mut rest = web.rest_settings();
        rest.files = Some(aai_sandbox::upload_reader(&setup));
        if let Some(mcp) = executors.mcp().cloned() {
            mcp.set_auth(web.auth.clone());
            // The user's risks for server tools follow config.json as it changes.
            mcp.set_risks(config.mcp.risk.clone());
            live.on_change(Box::new(move |config, _| {
                mcp.set_risks(config.mcp.risk.clone());
            }));
        }
        // Protected apps are not operated through their accessibility tree either.
        let protection = executors.protection();
        protection.set(config.desktop.protected());
        live.on_change(Box::new(move |config, _| {
            protection.set(config.desktop.protected());
        }));
        let executors = executors.with_web(rest, web.auth.clone());
        let local = Arc::new(LocalKit::new(&setup, home));
        let plugged = Plugged::default();
        // A caller that plugged in its own built-in executor (tests) keeps it.
        let executors = if executors.has_local() {
            executors
        } else {
            executors.with_local(Arc::new(CurrentToolsets(local.clone(), plugged.clone())))
        };
        let rebuilt = local.clone();
        live.on_change(Box::new(move |config, reloaded| {
            if reloaded.toolsets && rebuilt.rebuild(config) {
                tracing::info!("the built-in toolsets were restarted with the new config");
            }
        }));
        let gate = Gate::new(data_db);
        let approvals = Arc::new(crate::consent::queue::Approvals::new(gate.feed.clone()));
        let stop = Arc::new(switch::EmergencyStop::default());
        stop.share_with(home.to_path_buf());
        Arc::new(Self {
            snapshots: registry,
            live,
            home: home.to_path_buf(),
            executors,
            gate,
            web,
            local,
            tasks: std::sync::RwLock::default(),
            plugged,
            stop,
            approvals,
            queue_approvals: std::sync::atomic::AtomicBool::new(false),
            desktop: tokio::sync::Mutex::new(()),
            store_index: crate::appstore::Index::load(home),
        })
    }

    /// The config in force.
    pub fn config(&self) -> Arc<Config> {
        self.live.get()
    }

    /// The config as it is kept up to date ([`crate::config::live`]): its problem, its
    /// generation, and what reacts to a change.
    pub fn live(&self) -> &Arc<crate::config::live::LiveConfig> {
        &self.live
    }

    /// `AAI_HOME`.
    pub fn home(&self) -> &std::path::Path {
        &self.home
    }

    /// The audit log and the grants.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Web apps: discovery, the web registries, credentials.
    pub fn web(&self) -> &Arc<Web> {
        &self.web
    }

    /// The emergency stop's state.
    pub fn stop(&self) -> &Arc<switch::EmergencyStop> {
        &self.stop
    }

    /// Approvals waiting for the user in the daemon's queue.
    pub fn approvals(&self) -> &Arc<crate::consent::queue::Approvals> {
        &self.approvals
    }

    /// The executors calls run on.
    pub fn executors(&self) -> &Executors {
        &self.executors
    }

    /// Every new snapshot of offered apps, as discovery publishes it.
    pub fn snapshot_changes(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }

    /// Calls whose client cannot ask wait in the daemon's queue (`true`) rather than in a
    /// desktop dialog.
    pub fn set_queue_approvals(&self, queue: bool) {
        self.queue_approvals
            .store(queue, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether calls whose client cannot ask wait in the daemon's queue.
    pub fn queues_approvals(&self) -> bool {
        self.queue_approvals
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The app store's apps as last read (install hints, `aai_apps`).
    pub fn store_index(&self) -> &crate::appstore::Index {
        &self.store_index
    }

    /// Held while a call drives the screen, mouse or keyboard: one at a time.
    pub fn desktop(&self) -> &tokio::sync::Mutex<()> {
        &self.desktop
    }

    /// The built-in toolsets in force.
    pub fn toolsets(&self) -> Builtins {
        current(&self.local, &self.plugged)
    }

    /// Plugs in the kit of built-in toolsets (the local ones): its toolsets are built now with
    /// the config in force, and again whenever their sections of the config change. Its apps
    /// are offered when discovery is given its descriptors ([`crate::catalog::discovery::ScanOptions::plug`]).
    pub fn plug_kit(&self, kit: Arc<dyn aai_toolset::Kit>) {
        self.local.plug(kit, &self.config());
    }

    /// The kit of built-in toolsets plugged in, if one is (its descriptors, on and off).
    pub fn kit(&self) -> Option<Arc<dyn aai_toolset::Kit>> {
        self.local.kit()
    }

    /// Plugs in the scheduler: the surfaces reach its run tokens and tasks through it.
    pub fn plug_tasks(&self, tasks: Arc<dyn task::Tasks>) {
        *self
            .tasks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tasks);
    }

    /// The scheduler plugged in, if one is.
    pub fn tasks(&self) -> Option<Arc<dyn task::Tasks>> {
        self.tasks
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Plugs in a toolset another crate provides (the scheduler's `local.schedule`): its calls
    /// go through the gate and reach it through the [`aai_toolset::Toolset`] trait like those of
    /// the local toolsets. Its app is offered when discovery is given its descriptor
    /// ([`crate::catalog::discovery::ScanOptions::plug`]). A toolset of an app id already plugged in
    /// replaces it.
    pub fn plug(&self, toolset: Arc<dyn aai_toolset::Toolset>) {
        let mut plugged = self
            .plugged
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let app = toolset.descriptor().app_id.clone();
        let mut sets: Vec<Arc<dyn aai_toolset::Toolset>> = plugged
            .iter()
            .filter(|set| set.descriptor().app_id != app)
            .cloned()
            .collect();
        sets.push(toolset);
        *plugged = sets.into();
    }

    /// An app of the snapshot, else one found by `web_discover`. Not found: the hint names
    /// only tools this client's tool list has, and `web_discover` for URLs and domains.
    fn find(&self, registry: &Snapshot, name: &str) -> Result<Arc<App>, AaiError> {
        match find_app(registry, name) {
            Ok(app) => Ok(app.clone()),
            Err(mut error) => match self.web.discovered(name) {
                Some(app) => Ok(app),
                None => {
                    let near = registry.suggestions(name, 1);
                    let exposure = self.config().exposure.for_apps(registry.apps.len());
                    error.message.push_str(&match exposure {
                        crate::config::Exposure::Compact => {
                            " Call aai_apps to search them.".to_owned()
                        }
                        _ => match near.first().and_then(|id| registry.find(id)) {
                            Some(app) => {
                                format!(" Each app's guide is its app_* tool (e.g. {}).", app.slug)
                            }
                            None => String::new(),
                        },
                    });
                    if let Some(listed) = self.store_index.find(name) {
                        error.message.push_str(&crate::appstore::hint(&listed));
                        let store = json!({"appId": listed.app_id, "install": format!("aai-gateway store install {}", listed.app_id)});
                        match error.detail.as_mut().and_then(Value::as_object_mut) {
                            Some(detail) => {
                                detail.insert("store".into(), store);
                            }
                            None => error.detail = Some(json!({ "store": store })),
                        }
                    }
                    if looks_like_web_address(name) {
                        error.message.push_str(&format!(
                            " For a web service, call web_discover {{\"url\": \"{name}\"}} first."
                        ));
                    }
                    Err(error)
                }
            },
        }
    }

    /// The policy in force.
    pub fn policy_config(&self) -> Arc<crate::config::policy::PolicyConfig> {
        self.live.policy()
    }

    /// The current snapshot. While the first scan runs it waits for it to finish, as long
    /// as it keeps making progress (a new partial snapshot at least every scan budget) and
    /// at most [`FIRST_SCAN_AT_MOST`]: the first `tools/list` of a client lists every app
    /// however many there are, and a stalled folder cannot hold it beyond the budget.
    pub async fn snapshot(&self) -> Arc<Snapshot> {
        let mut rx = self.snapshots.clone();
        let give_up = tokio::time::Instant::now() + FIRST_SCAN_AT_MOST;
        loop {
            let current = rx.borrow_and_update().clone();
            if current.complete {
                return current;
            }
            let until = (tokio::time::Instant::now() + self.config().scan_budget()).min(give_up);
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return self.snapshots.borrow().clone(),
            }
        }
    }

    /// The snapshot to look `app` up in: [`Self::registry`], unless the first scan has not
    /// finished and `app` is not among what it found so far — then the complete snapshot
    /// ([`FIRST_SCAN_AT_MOST`] at most). A call must not fail with APP_NOT_FOUND only because
    /// a busy machine went slowly between two steps of the scan (a scheduled run resumed at
    /// start, a client's first call).
    pub async fn snapshot_for(&self, app: &str) -> Arc<Snapshot> {
        let registry = self.snapshot().await;
        if registry.complete || find_app(&registry, app).is_ok() {
            return registry;
        }
        let mut rx = self.snapshots.clone();
        let complete = async {
            while !rx.borrow_and_update().complete {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(FIRST_SCAN_AT_MOST, complete).await;
        self.snapshots.borrow().clone()
    }

    /// `web_discover`: fetches a web app's descriptor; one whose appId is that of an app
    /// installed on this machine is refused (it could otherwise pass for that app).
    ///
    /// # Errors
    /// As [`crate::web::Web::discover`], or AAI_JSON_INVALID for a colliding appId.
    pub async fn discover(
        &self,
        input: &str,
        refresh: bool,
    ) -> Result<crate::web::Discovered, AaiError> {
        let found = self.web.discover_with(input, refresh).await?;
        let registry = self.snapshot().await;
        let id = found.app.id();
        // Store apps are fetched too, but installed: a discovered copy cannot pass for them.
        if let Some(installed) = registry
            .find(id)
            .filter(|a| !a.fetched() || a.source.is_store())
        {
            self.web.forget_cached(id);
            self.web.forget_discovered(id);
            return Err(AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!(
                    "{input} describes itself as {id}, the appId of an app installed on this machine ({}); it was refused so it cannot pass for that app or reach its credentials.",
                    installed.source().display()
                ),
            )
            .with_detail(json!({"reason": "app_id_collision", "app": id})));
        }
        Ok(found)
    }

    /// The appId and tool name a user means (`consent grant|revoke`): the app must exist
    /// (installed, from the registry or discovered) and so must the tool when one is named.
    /// `oauth:<host>` with `authorize` is the sign-in confirmation of a domain.
    ///
    /// # Errors
    /// `APP_NOT_FOUND` or `TOOL_NOT_FOUND` naming the nearest names.
    pub async fn resolve(
        &self,
        app: &str,
        tool: Option<&str>,
    ) -> Result<(String, Option<String>), AaiError> {
        if app.starts_with("oauth:") && tool.is_none_or(|t| t == "authorize") {
            return Ok((app.to_owned(), Some("authorize".to_owned())));
        }
        // `env:<VAR>` `<appId>@<origin>`: sending a variable to a fetched app's origin.
        if app.starts_with("env:")
            && let Some(binding) = tool.filter(|t| t.contains('@'))
        {
            return Ok((app.to_owned(), Some(binding.to_owned())));
        }
        let registry = self.snapshot_for(app).await;
        let found = self.find(&registry, app)?;
        let tool = match tool {
            Some(tool) => {
                let descriptor = self.descriptor_of(&found).await?;
                Some(find_tool(&found, &descriptor, tool)?.name.clone())
            }
            None => None,
        };
        Ok((found.id().to_owned(), tool))
    }

    /// The guide of an app, by appId, `app_<slug>` or `app:<appId>`.
    ///
    /// # Errors
    /// `APP_NOT_FOUND` with suggestions.
    pub async fn guide(&self, registry: &Snapshot, app: &str) -> Result<String, AaiError> {
        let app = self.find(registry, app)?;
        let descriptor = self.descriptor_of(&app).await?;
        let tools = descriptor.tools(app.platform).unwrap_or_default();
        Ok(guide::guide(&descriptor, &tools))
    }

    /// The descriptor of `app` with the tools it has now (see [`Gateway::listed`]): what every
    /// step that resolves a tool by name reads.
    ///
    /// # Errors
    /// The descriptor cannot be read, or an MCP server cannot be started.
    pub async fn descriptor_of(
        &self,
        app: &crate::catalog::snapshot::App,
    ) -> Result<Arc<aai_descriptor::Descriptor>, AaiError> {
        self.listed(app.platform, app.descriptor()?).await
    }

    /// `descriptor` with the tools it has now: an MCP server's as the server lists them
    /// (started for it when it is not running), any other's as written.
    ///
    /// # Errors
    /// The MCP server cannot be started or does not list its tools.
    pub async fn listed(
        &self,
        platform: aai_descriptor::Platform,
        descriptor: Arc<aai_descriptor::Descriptor>,
    ) -> Result<Arc<aai_descriptor::Descriptor>, AaiError> {
        match (platform, self.executors.mcp()) {
            (aai_descriptor::Platform::Mcp, Some(servers)) => {
                // While the emergency stop is on, no server starts again.
                if let Some(error) = self.stop.refusal() {
                    return Err(error);
                }
                servers.filled(&descriptor).await
            }
            _ => Ok(descriptor),
        }
    }
}

/// The text of a panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// A URL, or a domain rather than an appId (`github.com`, `api.example.com/v1`): something
/// `web_discover` may find.
fn looks_like_web_address(name: &str) -> bool {
    if name.contains("://") || name.starts_with("www.") {
        return true;
    }
    let host = name.split('/').next().unwrap_or_default();
    let tld = host.rsplit('.').next().unwrap_or_default();
    host.contains('.')
        && !host.contains(' ')
        && (2..=6).contains(&tld.len())
        && tld.chars().all(|c| c.is_ascii_lowercase())
        && !aai_descriptor::is_valid_app_id(name)
        || (host.contains('.') && name.contains('/'))
        || ["com", "org", "net", "io", "dev", "app", "ai"].contains(&tld)
            && host.matches('.').count() <= 2
            && !host.chars().any(char::is_uppercase)
}
