//! The call pipeline: resolve app and tool → check arguments → execute → shape the result.
//!
//! Every way of calling a tool (MCP `aai_exec`, the spec's aliases, the `call` CLI) goes
//! through [`Gateway::exec`], so they all validate and fail the same way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aai_descriptor::{
    AaiError, Descriptor, ErrorKind, Parameters, Platform, Risk, ToolCommon, guide,
};
use aai_executor::{Executors, Invocation};
use aai_policy::{Action, ToolFacts, derive_risk};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::config::Config;
use crate::consent::Asker;
use crate::gate::{Call, Gate};

/// The key under which a pending 2026-07-28 consent round travels in an error's detail, for
/// the MCP layer to turn into an `InputRequiredResult`.
pub const INPUT_REQUIRED: &str = "input_required";
use crate::catalog::snapshot::{App, Snapshot};

mod args;
pub mod batch;
pub mod builtins;
mod consent;
mod render;
pub mod stop;
pub mod task;
mod web;
mod workflow;

use crate::web::Web;
pub use args::find_app;
use args::{check_args, find_tool};
pub use builtins::Builtins;
pub use render::{Rendered, binary, render};
use web::{authorization_url, explain_tls};

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
    /// The built-in toolsets (they judge their own calls' risk and prefix grants): rebuilt
    /// when their sections of the config change; [`Gateway::toolsets`] is the current one.
    toolsets: Arc<std::sync::RwLock<Arc<aai_local::Toolsets>>>,
    /// The toolsets other crates plugged in ([`Gateway::plug`]).
    plugged: Plugged,
    /// The emergency stop: while it is on, every call is refused.
    stop: Arc<crate::pipeline::stop::EmergencyStop>,
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
        rest.files = Some(aai_local::upload_reader(&setup));
        let executors = executors.with_web(rest, web.auth.clone());
        let toolsets = Arc::new(std::sync::RwLock::new(Arc::new(aai_local::Toolsets::new(
            &setup,
        ))));
        let plugged = Plugged::default();
        // A caller that plugged in its own built-in executor (tests) keeps it.
        let executors = if executors.has_local() {
            executors
        } else {
            executors.with_local(Arc::new(CurrentToolsets(toolsets.clone(), plugged.clone())))
        };
        let rebuilt = toolsets.clone();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let toolset_home = home.to_path_buf();
        live.on_change(Box::new(move |config, reloaded| {
            if !reloaded.toolsets {
                return;
            }
            // The old toolsets end (their terminals and browsers with them) when the last
            // call that holds them finishes; their clean-up needs the runtime.
            let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
            let fresh = Arc::new(aai_local::Toolsets::new(&toolset_setup(
                config,
                &toolset_home,
            )));
            let old = std::mem::replace(
                &mut *rebuilt
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
                fresh,
            );
            drop(old);
            tracing::info!("the built-in toolsets were restarted with the new config");
        }));
        let gate = Gate::new(data_db);
        let approvals = Arc::new(crate::consent::queue::Approvals::new(gate.feed.clone()));
        let stop = Arc::new(crate::pipeline::stop::EmergencyStop::default());
        stop.share_with(home.to_path_buf());
        Arc::new(Self {
            snapshots: registry,
            live,
            home: home.to_path_buf(),
            executors,
            gate,
            web,
            toolsets,
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
    pub fn stop(&self) -> &Arc<crate::pipeline::stop::EmergencyStop> {
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
        current(&self.toolsets, &self.plugged)
    }

    /// Plugs in a toolset another crate provides (the scheduler's `local.schedule`): its calls
    /// go through the gate and reach it through the [`aai_local::Toolset`] trait like those of
    /// the local toolsets. Its app is offered when discovery is given its descriptor
    /// ([`crate::catalog::discovery::ScanOptions::plug`]). A toolset of an app id already plugged in
    /// replaces it.
    pub fn plug(&self, toolset: Arc<dyn aai_local::Toolset>) {
        let mut plugged = self
            .plugged
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let app = toolset.descriptor().app_id.clone();
        let mut sets: Vec<Arc<dyn aai_local::Toolset>> = plugged
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
                    error.message.push_str(&match self.config().exposure {
                        crate::config::Exposure::Compact => {
                            " Call aai_apps to search them.".to_owned()
                        }
                        crate::config::Exposure::Full => {
                            match near.first().and_then(|id| registry.find(id)) {
                                Some(app) => format!(
                                    " Each app's guide is its app_* tool (e.g. {}).",
                                    app.slug
                                ),
                                None => String::new(),
                            }
                        }
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
                let descriptor = found.descriptor()?;
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
    pub fn guide(&self, registry: &Snapshot, app: &str) -> Result<String, AaiError> {
        let app = self.find(registry, app)?;
        let descriptor = app.descriptor()?;
        let tools = descriptor.tools(app.platform).unwrap_or_default();
        Ok(guide::guide(&descriptor, &tools))
    }

    /// Runs `tool` of `app` with `args` for `caller` (the MCP client's name), through the
    /// gate: argument checks, the policy, remembered consent, and audit rows before and after.
    ///
    /// # Errors
    /// `APP_NOT_FOUND`, `TOOL_NOT_FOUND`, `INVALID_PARAMS`, `PERMISSION_DENIED`, an audit
    /// failure, or the executor's error.
    pub async fn exec(
        &self,
        caller: &str,
        app: &str,
        tool: &str,
        args: &Value,
    ) -> Result<Value, AaiError> {
        self.exec_asking(&Caller::named(caller), app, tool, args, None)
            .await
    }

    /// [`Gateway::exec`] for `caller`, asking the user through `asker` when the policy
    /// requires approval and no grant covers the call. Without an asker such a call is denied
    /// with the command that grants it; a decline, a cancel or no answer in time is a denial
    /// the agent is told not to ask again about.
    ///
    /// The steps are the gate's (DESIGN §8), in order: find the tool, check the arguments
    /// against its schema, rate the risk, apply the policy, get consent, run, audit. Every
    /// step that refuses writes the call's audit row before it answers.
    ///
    /// # Errors
    /// See [`Gateway::exec`].
    pub async fn exec_asking(
        &self,
        who: &Caller,
        app: &str,
        tool: &str,
        args: &Value,
        asker: Option<&dyn Asker>,
    ) -> Result<Value, AaiError> {
        let started = Instant::now();
        let registry = self.snapshot_for(app).await;
        // The tool is borrowed from the app found, not copied: this is every call's path.
        let found = self
            .find(&registry, app)
            .and_then(|found| found.descriptor().map(|descriptor| (found, descriptor)));
        let (app, descriptor, spec) = match &found {
            Ok((found, descriptor)) => match find_tool(found, descriptor, tool) {
                Ok(spec) => (found, descriptor, spec),
                Err(error) => return self.unresolved(who, app, tool, args, started, error),
            },
            Err(error) => return self.unresolved(who, app, tool, args, started, error.clone()),
        };
        // Schema check. The arguments are redacted (by the schema's secret fields) and
        // shortened for the audit log once.
        let schema = spec.parameters.as_ref().map(Parameters::schema);
        let redacted = aai_audit::shrink(
            &aai_audit::redact(args, schema.as_ref()),
            self.config().audit.max_arg_chars,
        );
        let mut call = Call {
            id: self.call_id(who),
            caller: &who.name,
            app: app.id(),
            tool: &spec.name,
            args: &redacted,
            risk: derive_risk(spec.risk, spec.read_only, spec.destructive),
        };
        let step = Step {
            call: &call,
            started,
        };
        let args = match check_args(app, spec, schema.as_ref(), args) {
            Ok(args) => args,
            Err(error) => return Err(self.refuse(&step, "none", "failed", error)),
        };
        // What the toolset would refuse whatever the user answered (a path outside the file
        // sandbox) is refused now: nobody is asked to approve a call that cannot run.
        if let Some(error) = self.refusal(who, app, spec, &args) {
            let outcome = if error.kind == ErrorKind::PermissionDenied {
                "denied"
            } else {
                "failed"
            };
            return Err(self.refuse(&step, "none", outcome, error));
        }
        // A built-in call that does what another tool does is judged as that call — text
        // typed into a terminal window is a shell command, and so is an app launch of a
        // shell: the other's risk, classifier, policy, grants and question. It still runs
        // (and is audited) as itself; its toolset checks at run time that the judgement holds.
        let judged = match self.judged_as(who, app, spec, &args).await {
            Ok(judged) => judged,
            Err(error) => return Err(self.refuse(&step, "none", "denied", error)),
        };
        let stand_in = match &judged {
            Some(judged) => match self
                .find(&registry, &judged.app)
                .and_then(|found| found.descriptor().map(|descriptor| (found, descriptor)))
            {
                Ok(found) => Some(found),
                Err(_) => return Err(self.refuse(&step, "none", "denied", judged_off(judged))),
            },
            None => None,
        };
        let (gate_app, gate_spec, gate_args): (&App, &ToolCommon, &Map<String, Value>) =
            match (&judged, &stand_in) {
                (Some(judged), Some((found, descriptor))) => {
                    match find_tool(found, descriptor, &judged.tool) {
                        Ok(spec) => (found, spec, &judged.args),
                        Err(_) => {
                            return Err(self.refuse(&step, "none", "denied", judged_off(judged)));
                        }
                    }
                }
                _ => (app, spec, &args),
            };
        if judged.is_some() {
            call.risk = call.risk.max(derive_risk(
                gate_spec.risk,
                gate_spec.read_only,
                gate_spec.destructive,
            ));
        }
        // Risk: the tool's own, raised by what this call does (a critical shell command).
        let raised = self.raised_risk(gate_app, gate_spec, gate_args);
        call.risk = call.risk.max(raised.unwrap_or(Risk::Low));
        let step = Step {
            call: &call,
            started,
        };
        if let Some(error) = self.stop.refusal() {
            return Err(self.refuse(&step, "emergency_stop", "denied", error));
        }
        // A scheduled task's layer only tightens: a tool it was not granted, or a risk above
        // its limit, is refused before the policy is asked.
        if let Some(error) = who
            .task
            .as_ref()
            .and_then(|task| task.refusal(gate_app.id(), &gate_spec.name, call.risk))
        {
            return Err(self.refuse(&step, "task_grant", "denied", error));
        }
        let (mut action, profile_name) = self.policy(who, gate_app, gate_spec, call.risk, raised);
        // A task's call of a tool it was not granted goes to the user (its layer refused it
        // already unless the task queues such calls).
        if who
            .task
            .as_ref()
            .is_some_and(|task| !task.covers(gate_app.id(), &gate_spec.name))
        {
            action = action.max(Action::RequireApproval);
        }
        // A call its toolset says must be asked every time (a password typed into a page, a
        // paste into a terminal) is put to the user whatever the profile and the grants say;
        // only a block stays.
        let must_ask = match self.must_ask(who, app, spec, &args).await {
            Some(why) => Some(why),
            None => judged.as_ref().and_then(|j| j.ask_every_time.clone()),
        };
        if must_ask.is_some() && action != Action::AlwaysBlock {
            action = Action::RequireApproval;
        }
        let judging = CallContext {
            step: &step,
            who,
            app: gate_app,
            spec: gate_spec,
            args: gate_args,
            asker,
        };
        let verdict = Verdict {
            action,
            profile_name: &profile_name,
            raised,
            must_ask: must_ask.as_deref(),
            judged: judged.as_ref().map(|j| j.why.as_str()),
        };
        let (decision, shown) = self.consent(&judging, &verdict).await?;
        // A call the user was asked about is recorded with exactly what they saw.
        let asked = shown.as_ref().map(|args| Call {
            id: call.id.clone(),
            args,
            ..call
        });
        let step = Step {
            call: asked.as_ref().unwrap_or(&call),
            started,
        };
        let once_binding = match self.confirm_authorization(&who.name, app, asker).await {
            Ok(once) => once,
            Err(error) if waits_for_input(&error) => return Err(error),
            Err(error) => return Err(self.refuse(&step, &decision, "denied", error)),
        };
        // The stop may have been pressed while the user was being asked.
        if let Some(error) = self.stop.refusal() {
            return Err(self.refuse(&step, &decision, "denied", error));
        }
        // The intent row is durable before anything runs: no call happens unrecorded.
        self.gate.record(step.call, &decision, "started", 0, None)?;
        let result = self
            .execute(
                &CallContext {
                    step: &step,
                    who,
                    app,
                    spec,
                    args: &args,
                    asker,
                },
                &decision,
                descriptor,
                must_ask.is_some(),
            )
            .await;
        if let Some((var, origin)) = once_binding {
            // Allowed for this call only.
            self.web.auth.withdraw_env(descriptor, &var, &origin);
        }
        self.audit(&step, &decision, result)
    }

    /// A fresh audit id for a call of `who`, also handed to its collector.
    fn call_id(&self, who: &Caller) -> String {
        let id = self.gate.call_id();
        if let Some(calls) = &who.calls {
            calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(id.clone());
        }
        id
    }

    /// A call whose app or tool does not exist: audited as failed with the arguments as given.
    fn unresolved(
        &self,
        who: &Caller,
        app: &str,
        tool: &str,
        args: &Value,
        started: Instant,
        error: AaiError,
    ) -> Result<Value, AaiError> {
        let args = aai_audit::shrink(
            &aai_audit::redact(args, None),
            self.config().audit.max_arg_chars,
        );
        let call = Call {
            id: self.call_id(who),
            caller: &who.name,
            app,
            tool,
            args: &args,
            risk: Risk::Medium,
        };
        let step = Step {
            call: &call,
            started,
        };
        Err(self.refuse(&step, "none", "failed", error))
    }

    /// Writes the refused call's audit row and returns the error for the agent (or the audit
    /// failure, which then matters more).
    fn refuse(&self, step: &Step<'_>, decision: &str, outcome: &str, error: AaiError) -> AaiError {
        match self
            .gate
            .record(step.call, decision, outcome, step.elapsed(), Some(&error))
        {
            Ok(()) => error,
            Err(audit) => audit,
        }
    }

    /// The risk of this call when above its tool's own: built-in toolsets judge their calls
    /// (the terminal rates a command the classifier finds critical as critical).
    fn raised_risk(&self, app: &App, spec: &ToolCommon, args: &Map<String, Value>) -> Option<Risk> {
        (app.platform == Platform::Local)
            .then(|| self.toolsets().call_risk(app.id(), &spec.name, args))
            .flatten()
    }

    /// The call the gate judges in place of a built-in call, when its toolset names one
    /// ([`aai_local::Toolset::judged_as`]).
    async fn judged_as(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Result<Option<aai_local::Judged>, AaiError> {
        if app.platform != Platform::Local {
            return Ok(None);
        }
        let call = judged_call(who, spec, args);
        self.toolsets().judged_as(app.id(), &call).await
    }

    /// Why a built-in call cannot run whatever the user answers ([`aai_local::Toolset::refusal`]).
    fn refusal(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Option<AaiError> {
        if app.platform != Platform::Local {
            return None;
        }
        let call = judged_call(who, spec, args);
        self.toolsets().refusal(app.id(), &call)
    }

    /// Why a built-in call must be asked every time, judged by its toolset from the app's
    /// state now (the element a browser call would type into).
    async fn must_ask(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Option<String> {
        if app.platform != Platform::Local {
            return None;
        }
        let call = judged_call(who, spec, args);
        self.toolsets().must_ask(app.id(), &call).await
    }

    /// The policy step: what the client's profile says for this tool at this risk, and the
    /// profile's name. An override that lets a tool run does not let a raised call through:
    /// the profile's rule for the raised risk applies at least.
    fn policy(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        risk: Risk,
        raised: Option<Risk>,
    ) -> (Action, String) {
        let (profile_name, profile) = self.policy_config().profile_for(&who.name, &who.roots);
        let policy_name = format!("{}:{}", app.id(), spec.name);
        let mut action = profile.decide(
            &ToolFacts {
                name: &policy_name,
                category: app.id(),
                risk,
            },
            &[],
        );
        if let Some(raised) = raised {
            action = action.max(profile.risk_policies.get(raised));
        }
        (action, profile_name.to_owned())
    }

    /// The execute step: runs the tool (again after a sign-in through the client), with a
    /// `cancelled` row written if the call is dropped before it ends; a TLS failure is
    /// explained from the certificate the server presents.
    async fn execute(
        &self,
        call: &CallContext<'_>,
        decision: &str,
        descriptor: &Descriptor,
        asked: bool,
    ) -> Result<Value, AaiError> {
        let CallContext {
            step,
            who,
            app,
            spec,
            args,
            asker,
        } = *call;
        let timeout = self.config().tool_timeout(app.platform, spec.timeout);
        let invocation = Invocation::new(descriptor, &spec.name, args, timeout)
            .with_roots(&who.roots)
            .with_caller(&who.name, asked)
            .with_progress(who.progress.as_deref());
        // A call dropped before it finishes (the client cancelled it) still gets its outcome row.
        let mut unfinished = Unfinished {
            gate: &self.gate,
            call: step.call,
            decision,
            started: step.started,
            armed: true,
        };
        // The token is taken before the switch is read: a stop pressed in between cancels it.
        let stop = self.stop.calls();
        let stopped = || {
            AaiError::new(
                ErrorKind::PermissionDenied,
                "cancelled by the emergency stop: its processes were killed; nothing runs until the user runs `aai-gateway resume`",
            )
        };
        let mut result = if self.stop.is_stopped() {
            Err(stopped())
        } else {
            tokio::select! {
                // The stop wins when both are ready: a call whose processes the stop killed
                // reports the stop, not what the killing did to it.
                biased;
                () = stop.cancelled() => Err(stopped()),
                result = self.run(app.platform, invocation, spec) => result,
            }
        };
        if let (Err(error), Some(asker)) = (&result, asker)
            && let Some(url) = authorization_url(error)
            && asker.open_url(&error.message, &url).await
            && self
                .web
                .auth
                .wait_for_authorization(app.id(), self.config().consent_timeout())
                .await
        {
            // The user signed in through the client: the call goes on with the new tokens.
            result = self.run(app.platform, invocation, spec).await;
        }
        unfinished.armed = false;
        if let Err(error) = &mut result
            && app.platform == Platform::Web
            && error
                .detail
                .as_ref()
                .is_some_and(|d| d["reason"].as_str().is_some_and(|r| r.starts_with("tls")))
            // The host the request went to (a `web.base_urls` override included).
            && let Some(host) = error.detail.as_ref().and_then(|d| d["host"].as_str())
            && let Some(seen) = crate::web::presented_certificate(&format!("https://{host}/")).await
        {
            explain_tls(error, &seen);
        }
        result
    }

    /// The audit step: the outcome row. A result that cannot be audited is not returned.
    fn audit(
        &self,
        step: &Step<'_>,
        decision: &str,
        result: Result<Value, AaiError>,
    ) -> Result<Value, AaiError> {
        let (outcome, error) = match &result {
            Ok(_) => ("success", None),
            Err(error) => ("failed", Some(error)),
        };
        // An image or file that came back is recorded by type, size and hash, never kept.
        let output = result
            .as_ref()
            .ok()
            .and_then(binary)
            .map(|(mime, bytes, data)| {
                use base64::Engine as _;
                use sha2::Digest as _;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_default();
                format!(
                    "{mime} {bytes} bytes sha256:{:x}",
                    sha2::Sha256::digest(&raw)
                )
            });
        self.gate
            .record_with_output(step.call, decision, outcome, step.elapsed(), error, output)
            .map_err(|mut audit| {
                audit.message = format!(
                    "{}:{} ran ({outcome}), but its result could not be audited: {}",
                    step.call.app, step.call.tool, audit.message
                );
                audit
            })?;
        result
    }
}

/// PERMISSION_DENIED for a call judged as a tool that is not on (the terminal turned off in
/// config.json): it does what that tool does, so it cannot run either.
fn judged_off(judged: &aai_local::Judged) -> AaiError {
    AaiError::new(
        ErrorKind::PermissionDenied,
        format!(
            "{} It is judged as {}:{}, which is not on in this gateway, so it does not run.",
            judged.why, judged.app, judged.tool
        ),
    )
    .with_detail(
        json!({"reason": "judged_as_off", "judged_as": format!("{}:{}", judged.app, judged.tool)}),
    )
}

/// A call between the gate's steps: its audit identity and when it began.
struct Step<'a> {
    call: &'a Call<'a>,
    started: Instant,
}

/// One call on its way through the gate, passed whole: its audit step, who makes it, the app
/// and tool, the arguments as checked, and who can ask the user about it.
#[derive(Clone, Copy)]
struct CallContext<'a> {
    step: &'a Step<'a>,
    who: &'a Caller,
    app: &'a App,
    spec: &'a ToolCommon,
    args: &'a Map<String, Value>,
    asker: Option<&'a dyn Asker>,
}

/// Why the policy said what it said of a call, for the consent step: its action and the
/// profile that gave it, the risk the call raised its tool's to, and why it must be asked or
/// is judged as another call.
#[derive(Clone, Copy)]
struct Verdict<'a> {
    action: Action,
    profile_name: &'a str,
    raised: Option<Risk>,
    must_ask: Option<&'a str>,
    judged: Option<&'a str>,
}

impl Step<'_> {
    fn elapsed(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// An error that is a consent round still open (2026-07-28 `input_required`), not a refusal.
fn waits_for_input(error: &AaiError) -> bool {
    error
        .detail
        .as_ref()
        .is_some_and(|d| d.get(INPUT_REQUIRED).is_some())
}

impl Gateway {
    /// Runs the executor; a read-only tool that timed out or found its app not running is
    /// tried again, up to `retry.attempts` tries, waiting longer each time.
    async fn run(
        &self,
        platform: Platform,
        invocation: Invocation<'_>,
        spec: &ToolCommon,
    ) -> Result<Value, AaiError> {
        let retry = self.config().retry;
        let retryable = spec.read_only == Some(true);
        // Every try together fits in the tool's timeout: a retry gets what is left.
        let deadline = Instant::now() + invocation.timeout;
        let mut attempt = 1;
        loop {
            let mut this_try = invocation;
            this_try.timeout = deadline.saturating_duration_since(Instant::now());
            let result = guarded(self.executors.call(platform, this_try), &this_try).await;
            match result {
                Err(error)
                    if retryable
                        && attempt < retry.attempts
                        && matches!(error.kind, ErrorKind::Timeout | ErrorKind::AppNotRunning)
                        && deadline.saturating_duration_since(Instant::now())
                            > retry.backoff(attempt + 1)
                                + std::time::Duration::from_millis(100) =>
                {
                    attempt += 1;
                    let wait = retry.backoff(attempt);
                    tracing::info!(tool = %invocation.name(), attempt, wait_ms = wait.as_millis() as u64, error = %error, "retrying a read-only call");
                    tokio::time::sleep(wait).await;
                }
                Err(mut error) if attempt > 1 => {
                    error.message = format!("{} (after {attempt} tries)", error.message);
                    if let Some(Value::Object(detail)) = &mut error.detail {
                        detail.insert("attempts".into(), json!(attempt));
                    } else if error.detail.is_none() {
                        error.detail = Some(json!({"attempts": attempt}));
                    }
                    return Err(error);
                }
                other => return other,
            }
        }
    }

    /// What a call would run, without running it or asking anyone (`call --dry-run`): the
    /// arguments are checked as for a real call, then the executor plans.
    ///
    /// # Errors
    /// `APP_NOT_FOUND`, `TOOL_NOT_FOUND`, `INVALID_PARAMS`, `SCRIPT_PARSE_ERROR`,
    /// `AUTOMATION_NOT_SUPPORTED`.
    pub async fn plan(&self, app: &str, tool: &str, args: &Value) -> Result<Value, AaiError> {
        let registry = self.snapshot_for(app).await;
        let app = self.find(&registry, app)?;
        let descriptor = app.descriptor()?;
        let spec = find_tool(&app, &descriptor, tool)?;
        let schema = spec.parameters.as_ref().map(Parameters::schema);
        let args = check_args(&app, spec, schema.as_ref(), args)?;
        let timeout = self.config().tool_timeout(app.platform, spec.timeout);
        // Built-in tools plan for the OS `--platform` names (the first platform in effect).
        let invocation = Invocation::new(&descriptor, &spec.name, &args, timeout)
            .with_target(self.config().platforms.first().copied());
        let mut plan = self.executors.plan(app.platform, invocation)?;
        if let Some(object) = plan.as_object_mut() {
            object.insert("platform".into(), json!(app.platform.key()));
            object.insert(
                "timeout_ms".into(),
                json!(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            );
        }
        Ok(plan)
    }
}

/// Writes a `cancelled` outcome row for a call whose future was dropped while it ran.
struct Unfinished<'a> {
    gate: &'a Gate,
    call: &'a Call<'a>,
    decision: &'a str,
    started: Instant,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.armed {
            let ms = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
            let error = AaiError::new(ErrorKind::AutomationFailed, "the client cancelled the call");
            if let Err(error) =
                self.gate
                    .record(self.call, self.decision, "cancelled", ms, Some(&error))
            {
                tracing::warn!(
                    "the cancelled call's row could not be written: {}",
                    error.message
                );
            }
        }
    }
}

/// Runs an executor's future under a panic boundary: a panic anywhere inside (executor,
/// parser, dependency) fails this call with AUTOMATION_FAILED, and the server goes on.
async fn guarded(
    call: impl std::future::Future<Output = Result<Value, AaiError>>,
    invocation: &Invocation<'_>,
) -> Result<Value, AaiError> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(call).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let what = panic_message(panic.as_ref());
            tracing::error!(tool = %invocation.name(), panic = %what, "a call panicked; it failed and the gateway goes on");
            Err(AaiError::new(
                ErrorKind::AutomationFailed,
                format!(
                    "{} failed inside the gateway ({what}). This is a bug in aai-gateway; the call did not complete, and other calls are unaffected. Please report it with the gateway's log.",
                    invocation.name()
                ),
            )
            .with_detail(json!({"reason": "panic"})))
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

/// What the built-in toolsets are built with, from `config`.
fn toolset_setup(config: &Config, home: &std::path::Path) -> aai_local::Setup {
    let mut setup = aai_local::Setup::new(
        config.local.clone(),
        vec![home.to_path_buf(), config.web.cache_dir()],
    );
    setup.desktop = config.desktop.clone();
    setup.browser = config.browser.clone();
    setup.home = home.to_path_buf();
    setup.extra_ca_certs = config.web.extra_ca_certs.clone();
    setup
}

/// The toolsets other crates plugged in, shared by the gateway and its executor.
type Plugged = Arc<std::sync::RwLock<Arc<[Arc<dyn aai_local::Toolset>]>>>;

/// The built-in toolsets in force now.
fn current(
    local: &std::sync::RwLock<Arc<aai_local::Toolsets>>,
    plugged: &std::sync::RwLock<Arc<[Arc<dyn aai_local::Toolset>]>>,
) -> Builtins {
    let local = local
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let plugged = plugged
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    Builtins::new(local, plugged)
}

/// The executor of `automation: "builtin"`: whichever toolsets are in force when a call
/// starts (a call keeps the ones it started with).
struct CurrentToolsets(Arc<std::sync::RwLock<Arc<aai_local::Toolsets>>>, Plugged);

impl aai_executor::Executor for CurrentToolsets {
    fn call<'a>(
        &'a self,
        invocation: aai_executor::Invocation<'a>,
    ) -> aai_executor::BoxFuture<'a, Result<Value, AaiError>> {
        let toolsets = current(&self.0, &self.1);
        Box::pin(async move {
            let app = invocation.descriptor.app_id.as_str();
            let call = aai_local::Call {
                tool: invocation.tool,
                args: invocation.args,
                roots: invocation.roots,
                progress: invocation.progress,
                caller: invocation.caller,
                approved: invocation.approved,
            };
            match toolsets.run_plugged(app, call, invocation.timeout).await {
                Some(result) => result,
                None => toolsets.local().call(invocation).await,
            }
        })
    }

    fn plan(&self, invocation: aai_executor::Invocation<'_>) -> Result<Value, AaiError> {
        let toolsets = current(&self.0, &self.1);
        match toolsets.plugged(&invocation.descriptor.app_id) {
            Some(set) => Ok(set.plan(invocation.tool, invocation.args, invocation.target)),
            None => toolsets.local().plan(invocation),
        }
    }
}

/// A built-in call as its toolset judges it before it runs: not approved yet, no progress.
fn judged_call<'a>(
    who: &'a Caller,
    spec: &'a ToolCommon,
    args: &'a Map<String, Value>,
) -> aai_local::Call<'a> {
    aai_local::Call {
        tool: &spec.name,
        args,
        roots: &who.roots,
        progress: None,
        caller: &who.name,
        approved: false,
    }
}
