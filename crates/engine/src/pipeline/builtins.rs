//! The built-in toolsets a call can reach, behind one by-app-id face: those of the kit the
//! binary plugged in ([`aai_toolset::Kit`]: the local ones, rebuilt when their part of the
//! config changes) and the ones plugged in one by one through the same [`Toolset`] trait (the
//! scheduler's `local.schedule`). The engine names none of them.

use std::sync::Arc;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Platform, ToolCommon};
use aai_toolset::{Call, Judged, Setup, Toolset, Toolsets};
use serde_json::{Map, Value, json};

use super::Caller;
use super::args::find_tool;
use crate::catalog::snapshot::App;
use crate::config::Config;

/// The toolsets in force for one call.
#[derive(Clone)]
pub struct Builtins {
    local: Arc<Toolsets>,
    plugged: Arc<[Arc<dyn Toolset>]>,
}

impl Builtins {
    pub(crate) fn new(local: Arc<Toolsets>, plugged: Arc<[Arc<dyn Toolset>]>) -> Self {
        Self { local, plugged }
    }

    /// What the kit's toolsets were built with (the file sandbox and containment profile of
    /// what another toolset starts for the agent come from it).
    pub fn setup(&self) -> &Setup {
        self.local.setup()
    }

    /// The plugged-in toolset of `app`, if one is.
    pub fn plugged(&self, app: &str) -> Option<&Arc<dyn Toolset>> {
        self.plugged
            .iter()
            .find(|set| set.descriptor().app_id == app)
    }

    /// Every plugged-in toolset.
    pub fn every_plugged(&self) -> &[Arc<dyn Toolset>] {
        &self.plugged
    }

    /// The toolset of `app`: one plugged in, else a local one.
    pub fn get(&self, app: &str) -> Option<&dyn Toolset> {
        match self.plugged(app) {
            Some(set) => Some(set.as_ref()),
            None => self.local.get(app),
        }
    }

    /// See [`Toolset::rate`].
    pub fn rate(
        &self,
        app: &str,
        call: &aai_toolset::Call<'_>,
        boxed: bool,
    ) -> Option<aai_toolset::Rated> {
        self.get(app)?.rate(call, boxed)
    }

    /// See [`Toolset::prefix_covers`].
    pub fn prefix_covers(
        &self,
        app: &str,
        tool: &str,
        args: &Map<String, Value>,
        prefixes: &[String],
    ) -> bool {
        self.get(app)
            .is_some_and(|set| set.prefix_covers(tool, args, prefixes))
    }

    /// See [`Toolset::offered_prefix`].
    pub fn offered_prefix(
        &self,
        app: &str,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Option<String> {
        self.get(app)?.offered_prefix(tool, args)
    }

    /// See [`Toolset::refusal`].
    pub fn refusal(&self, app: &str, call: &Call<'_>) -> Option<AaiError> {
        self.get(app)?.refusal(call)
    }

    /// See [`Toolset::binding`].
    pub fn binding(&self, app: &str, call: &Call<'_>) -> Option<aai_toolset::Binding> {
        self.get(app)?.binding(call)
    }

    /// See [`Toolset::must_ask`].
    pub async fn must_ask(&self, app: &str, call: &Call<'_>) -> Option<String> {
        self.get(app)?.must_ask(call).await
    }

    /// See [`Toolset::judged_as`].
    ///
    /// # Errors
    /// The toolset refuses the call whatever the gate would say.
    pub async fn judged_as(&self, app: &str, call: &Call<'_>) -> Result<Option<Judged>, AaiError> {
        match self.get(app) {
            Some(set) => set.judged_as(call).await,
            None => Ok(None),
        }
    }

    /// Every toolset: those plugged in one by one, then the kit's.
    fn every(&self) -> impl Iterator<Item = &dyn Toolset> {
        self.plugged
            .iter()
            .map(AsRef::as_ref)
            .chain(self.local.iter())
    }

    /// Tells every toolset the emergency stop was pressed.
    pub async fn emergency_stop(&self) {
        for set in self.every() {
            set.emergency_stop().await;
        }
    }

    /// What every toolset undid once the emergency stop killed every process, for its report.
    pub async fn after_kill(&self) -> Vec<(&'static str, Value)> {
        let mut notes = Vec::new();
        for set in self.every() {
            notes.extend(set.after_kill().await);
        }
        notes
    }

    /// What the toolsets add to the emergency stop's report.
    pub fn stop_notes(&self) -> Vec<(&'static str, Value)> {
        self.every().filter_map(Toolset::stop_note).collect()
    }

    /// Tells every toolset the emergency stop was lifted.
    pub fn resumed(&self) {
        for set in self.every() {
            set.resumed();
        }
    }
}

/// What the built-in toolsets are built with, from `config`.
pub(super) fn toolset_setup(config: &Config, home: &std::path::Path) -> Setup {
    let mut setup = Setup::new(
        config.local.clone(),
        vec![home.to_path_buf(), config.web.cache_dir()],
    );
    setup.desktop = config.desktop.clone();
    setup.browser = config.browser.clone();
    setup.home = home.to_path_buf();
    setup.extra_ca_certs = config.web.extra_ca_certs.clone();
    setup
}

/// The kit of built-in toolsets plugged in and the toolsets it built, shared by the gateway
/// and its executor: built when the kit is plugged in, and again when their sections of the
/// config change.
pub(super) struct LocalKit {
    kit: std::sync::RwLock<Option<Arc<dyn aai_toolset::Kit>>>,
    built: std::sync::RwLock<Arc<Toolsets>>,
    home: std::path::PathBuf,
    runtime: Option<tokio::runtime::Handle>,
}

impl LocalKit {
    /// No kit yet, so no toolsets.
    pub(super) fn new(setup: &Setup, home: &std::path::Path) -> Self {
        Self {
            kit: std::sync::RwLock::default(),
            built: std::sync::RwLock::new(Arc::new(Toolsets::none(setup))),
            home: home.to_path_buf(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// The kit plugged in, if one is.
    pub(super) fn kit(&self) -> Option<Arc<dyn aai_toolset::Kit>> {
        self.kit
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The toolsets built now.
    fn built(&self) -> Arc<Toolsets> {
        self.built
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Plugs in `kit` and builds its toolsets with `config`.
    pub(super) fn plug(&self, kit: Arc<dyn aai_toolset::Kit>, config: &Config) {
        *self
            .kit
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(kit);
        self.rebuild(config);
    }

    /// Builds the kit's toolsets anew with `config`, in place of the old ones; false when no
    /// kit is plugged in.
    pub(super) fn rebuild(&self, config: &Config) -> bool {
        let Some(kit) = self.kit() else {
            return false;
        };
        // The old toolsets end (their terminals and browsers with them) when the last call
        // that holds them finishes; their clean-up needs the runtime.
        let _entered = self.runtime.as_ref().map(tokio::runtime::Handle::enter);
        let fresh = Arc::new(Toolsets::new(
            kit.as_ref(),
            &toolset_setup(config, &self.home),
        ));
        let old = std::mem::replace(
            &mut *self
                .built
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            fresh,
        );
        drop(old);
        true
    }
}

/// The toolsets other crates plugged in, shared by the gateway and its executor.
pub(super) type Plugged = Arc<std::sync::RwLock<Arc<[Arc<dyn aai_toolset::Toolset>]>>>;

/// The built-in toolsets in force now.
pub(super) fn current(
    local: &LocalKit,
    plugged: &std::sync::RwLock<Arc<[Arc<dyn aai_toolset::Toolset>]>>,
) -> Builtins {
    let local = local.built();
    let plugged = plugged
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    Builtins::new(local, plugged)
}

/// The executor of `automation: "builtin"`: whichever toolsets are in force when a call
/// starts (a call keeps the ones it started with).
pub(super) struct CurrentToolsets(pub(super) Arc<LocalKit>, pub(super) Plugged);

impl aai_executor::Executor for CurrentToolsets {
    fn call<'a>(
        &'a self,
        invocation: aai_executor::Invocation<'a>,
    ) -> aai_executor::BoxFuture<'a, Result<Value, AaiError>> {
        let toolsets = current(&self.0, &self.1);
        Box::pin(async move {
            let set = toolsets.get(&invocation.descriptor.app_id);
            aai_toolset::run_found(set, invocation).await
        })
    }

    fn plan(&self, invocation: aai_executor::Invocation<'_>) -> Result<Value, AaiError> {
        let toolsets = current(&self.0, &self.1);
        aai_toolset::plan_found(toolsets.get(&invocation.descriptor.app_id), &invocation)
    }
}

/// A built-in call as its toolset judges it before it runs: not approved yet, no progress.
pub(super) fn judged_call<'a>(
    who: &'a Caller,
    spec: &'a ToolCommon,
    args: &'a Map<String, Value>,
) -> aai_toolset::Call<'a> {
    aai_toolset::Call {
        tool: &spec.name,
        args,
        roots: &who.roots,
        progress: None,
        caller: &who.name,
        approved: false,
    }
}

/// What a built-in call's toolset says of it before it runs: its risk, the call it is judged
/// as, a refusal, why it must be asked, what it asks to be allowed beyond itself. Every other
/// platform's call gets `None` from each.
impl super::Gateway {
    /// The toolsets and the call as they judge it, for a built-in app's call only (an app of
    /// another platform is never looked up by its id among the toolsets).
    fn builtin<'a>(
        &self,
        who: &'a Caller,
        app: &App,
        spec: &'a ToolCommon,
        args: &'a Map<String, Value>,
    ) -> Option<(Builtins, Call<'a>)> {
        (app.platform == Platform::Local).then(|| (self.toolsets(), judged_call(who, spec, args)))
    }

    /// The risk of this call as its built-in toolset judges it ([`aai_toolset::Toolset::rate`]).
    pub(super) fn rated(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
        boxed: bool,
    ) -> Option<aai_toolset::Rated> {
        let (sets, call) = self.builtin(who, app, spec, args)?;
        sets.rate(app.id(), &call, boxed)
    }

    /// The call the gate judges in place of a built-in call, when its toolset names one
    /// ([`aai_toolset::Toolset::judged_as`]).
    pub(super) async fn judged_as(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Result<Option<aai_toolset::Judged>, AaiError> {
        match self.builtin(who, app, spec, args) {
            Some((sets, call)) => sets.judged_as(app.id(), &call).await,
            None => Ok(None),
        }
    }

    /// Why a built-in call cannot run whatever the user answers ([`aai_toolset::Toolset::refusal`]).
    pub(super) fn refusal(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Option<AaiError> {
        let (sets, call) = self.builtin(who, app, spec, args)?;
        sets.refusal(app.id(), &call)
    }

    /// What a built-in call asks to be allowed beyond itself ([`aai_toolset::Toolset::binding`]).
    pub(super) fn binding(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Option<aai_toolset::Binding> {
        let (sets, call) = self.builtin(who, app, spec, args)?;
        sets.binding(app.id(), &call)
    }

    /// Why a built-in call must be asked every time, judged by its toolset from the app's
    /// state now (the element a browser call would type into).
    pub(super) async fn must_ask(
        &self,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Option<String> {
        let (sets, call) = self.builtin(who, app, spec, args)?;
        sets.must_ask(app.id(), &call).await
    }
}

/// The app, tool and arguments the gate judges: those of the call a built-in call is judged
/// as (`stand_in` is its app), else the call's own (`own`).
pub(super) fn judged_target<'a>(
    judged: Option<&'a aai_toolset::Judged>,
    stand_in: Option<&'a (std::sync::Arc<App>, std::sync::Arc<Descriptor>)>,
    own: (&'a App, &'a ToolCommon, &'a Map<String, Value>),
) -> Result<(&'a App, &'a ToolCommon, &'a Map<String, Value>), AaiError> {
    match (judged, stand_in) {
        (Some(judged), Some((found, descriptor))) => find_tool(found, descriptor, &judged.tool)
            .map(|spec| (&**found, spec, &judged.args))
            .map_err(|_| judged_off(judged)),
        _ => Ok(own),
    }
}

/// PERMISSION_DENIED for a call judged as a tool that is not on (the terminal turned off in
/// config.json): it does what that tool does, so it cannot run either.
pub(super) fn judged_off(judged: &aai_toolset::Judged) -> AaiError {
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
