//! The call pipeline: resolve app and tool → check arguments → execute → shape the result.
//!
//! Every way of calling a tool (MCP `aai_exec`, the spec's aliases, the `call` CLI) goes
//! through [`Gateway::exec`], so they all validate and fail the same way.

use std::sync::Arc;
use std::time::Instant;

use aai_descriptor::{AaiError, ErrorKind, Parameters, Platform, Risk, ToolCommon, guide};
use aai_executor::{Executors, Invocation};
use aai_policy::{Action, ToolFacts, derive_risk};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::config::Config;
use crate::gate::{
    Answer, Asker, Call, Gate, Question, Unanswered, action_name, risk_name, shell_quote,
};
use aai_audit::{Grant, Scope};

/// The key under which a pending 2026-07-28 consent round travels in an error's detail, for
/// the MCP layer to turn into an `InputRequiredResult`.
pub const INPUT_REQUIRED: &str = "input_required";
use crate::registry::{App, Registry};
use crate::web::Web;

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
}

/// A progress sink: takes the latest output of a long call.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("name", &self.name)
            .field("roots", &self.roots)
            .field("session", &self.session)
            .field("progress", &self.progress.is_some())
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
    pub registry: watch::Receiver<Arc<Registry>>,
    pub executors: Executors,
    pub config: Config,
    pub gate: Gate,
    /// Web apps: discovery, registry, credentials.
    pub web: Arc<Web>,
    /// The built-in toolsets (they judge their own calls' risk and prefix grants).
    pub toolsets: Arc<aai_local::Toolsets>,
}

impl Gateway {
    /// A gateway whose web tools use the credential store under `home`. A config whose
    /// `extra_ca_certs` cannot be read is logged and the system's roots are used alone.
    pub fn new(
        registry: watch::Receiver<Arc<Registry>>,
        mut config: Config,
        executors: Executors,
        data_db: std::path::PathBuf,
        home: &std::path::Path,
    ) -> Arc<Self> {
        let web = Web::new(&config, home).unwrap_or_else(|problem| {
            tracing::warn!("{problem}; using the system's certificate authorities only");
            config.web.extra_ca_certs.clear();
            Web::new(&config, home).expect("a web client without extra certificates")
        });
        let web = Arc::new(web);
        let mut setup = aai_local::Setup::new(
            config.local.clone(),
            vec![home.to_path_buf(), config.web.cache_dir()],
        );
        setup.desktop = config.desktop.clone();
        let mut rest = web.rest_settings();
        rest.files = Some(aai_local::upload_reader(&setup));
        let executors = executors.with_web(rest, web.auth.clone());
        let toolsets = Arc::new(aai_local::Toolsets::new(&setup));
        // A caller that plugged in its own built-in executor (tests) keeps it.
        let executors = if executors.has_local() {
            executors
        } else {
            executors.with_local(toolsets.clone())
        };
        Arc::new(Self {
            registry,
            executors,
            config,
            gate: Gate::new(data_db),
            web,
            toolsets,
        })
    }

    /// An app of the snapshot, else one found by `web_discover`. Not found: the hint names
    /// only tools this client's tool list has, and `web_discover` for URLs and domains.
    fn find(&self, registry: &Registry, name: &str) -> Result<Arc<App>, AaiError> {
        match find_app(registry, name) {
            Ok(app) => Ok(app.clone()),
            Err(mut error) => match self.web.discovered(name) {
                Some(app) => Ok(app),
                None => {
                    let near = registry.suggestions(name, 1);
                    error.message.push_str(&match self.config.exposure {
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

    /// The current snapshot; while the first scan runs, waits for it at most the scan budget.
    pub async fn registry(&self) -> Arc<Registry> {
        let mut rx = self.registry.clone();
        let wait = rx.wait_for(|registry| registry.complete);
        match tokio::time::timeout(self.config.scan_budget(), wait).await {
            Ok(Ok(registry)) => registry.clone(),
            _ => self.registry.borrow().clone(),
        }
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
        let registry = self.registry().await;
        let id = found.app.id();
        if let Some(installed) = registry.find(id).filter(|a| !a.descriptor.fetched) {
            self.web.forget_cached(id);
            self.web.forget_discovered(id);
            return Err(AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!(
                    "{input} describes itself as {id}, the appId of an app installed on this machine ({}); it was refused so it cannot pass for that app or reach its credentials.",
                    installed.source.display()
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
        let registry = self.registry().await;
        let found = self.find(&registry, app)?;
        let tool = tool
            .map(|tool| find_tool(&found, tool).map(|spec| spec.name.clone()))
            .transpose()?;
        Ok((found.id().to_owned(), tool))
    }

    /// The guide of an app, by appId, `app_<slug>` or `app:<appId>`.
    ///
    /// # Errors
    /// `APP_NOT_FOUND` with suggestions.
    pub fn guide(&self, registry: &Registry, app: &str) -> Result<String, AaiError> {
        let app = self.find(registry, app)?;
        let tools = app.descriptor.tools(app.platform).unwrap_or_default();
        Ok(guide::guide(&app.descriptor, &tools))
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
        let registry = self.registry().await;
        // The tool is borrowed from the app found, not copied: this is every call's path.
        let found = self.find(&registry, app);
        let (app, spec) = match &found {
            Ok(found) => match find_tool(found, tool) {
                Ok(spec) => (found, spec),
                Err(error) => return self.unresolved(who, app, tool, args, started, error),
            },
            Err(error) => return self.unresolved(who, app, tool, args, started, error.clone()),
        };
        // Schema check. The arguments are redacted (by the schema's secret fields) and
        // shortened for the audit log once.
        let schema = spec.parameters.as_ref().map(Parameters::schema);
        let redacted = aai_audit::shrink(
            &aai_audit::redact(args, schema.as_ref()),
            self.config.audit.max_arg_chars,
        );
        let mut call = Call {
            id: self.gate.call_id(),
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
        // Risk: the tool's own, raised by what this call does (a critical shell command).
        let raised = self.raised_risk(app, spec, &args);
        call.risk = call.risk.max(raised.unwrap_or(Risk::Low));
        let step = Step {
            call: &call,
            started,
        };
        let (action, profile_name) = self.policy(who, app, spec, call.risk, raised);
        let decision = self
            .consent(
                &step,
                who,
                app,
                spec,
                &args,
                action,
                &profile_name,
                raised,
                asker,
            )
            .await?;
        let once_binding = match self.confirm_authorization(&who.name, app, asker).await {
            Ok(once) => once,
            Err(error) if waits_for_input(&error) => return Err(error),
            Err(error) => return Err(self.refuse(&step, &decision, "denied", error)),
        };
        // The intent row is durable before anything runs: no call happens unrecorded.
        self.gate.record(&call, &decision, "started", 0, None)?;
        let result = self
            .execute(&step, &decision, who, app, spec, &args, asker)
            .await;
        if let Some((var, origin)) = once_binding {
            // Allowed for this call only.
            self.web.auth.withdraw_env(&app.descriptor, &var, &origin);
        }
        self.audit(&step, &decision, result)
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
            self.config.audit.max_arg_chars,
        );
        let call = Call {
            id: self.gate.call_id(),
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
            .then(|| self.toolsets.call_risk(app.id(), &spec.name, args))
            .flatten()
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
        let (profile_name, profile) = self.config.policy.profile_for(&who.name, &who.roots);
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

    /// The consent step: a blocked call is refused; one that needs approval runs on a
    /// remembered grant or the user's answer. Returns the decision the audit rows carry.
    #[allow(clippy::too_many_arguments)]
    async fn consent(
        &self,
        step: &Step<'_>,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
        action: Action,
        profile_name: &str,
        raised: Option<Risk>,
        asker: Option<&dyn Asker>,
    ) -> Result<String, AaiError> {
        let caller = who.name.as_str();
        let risk = step.call.risk;
        let mut decision = action_name(action).to_owned();
        match action {
            Action::AlwaysBlock => {
                let error = match &self.config.invalid {
                    Some(problem) => config_invalid(app.id(), &spec.name, problem),
                    None => AaiError::new(
                        ErrorKind::PermissionDenied,
                        format!(
                            "{}:{} is blocked by the policy profile {profile_name:?} (risk {}); no approval can allow it. The user can change `policy` in the gateway's config.json.",
                            app.id(),
                            spec.name,
                            risk_name(risk)
                        ),
                    )
                    .with_detail(json!({"reason": "blocked", "profile": profile_name, "risk": risk_name(risk)})),
                };
                Err(self.refuse(step, &decision, "blocked", error))
            }
            Action::AutoApprove | Action::NotifyOnly => Ok(decision),
            Action::RequireApproval => {
                let critical = raised.is_some();
                // No grant covers a call whose risk was raised: it is asked each time.
                let held = if critical {
                    aai_audit::Held::default()
                } else {
                    self.gate
                        .held(caller, app.id(), &spec.name, who.session.as_deref())?
                };
                let prefixed = !held.prefixes.is_empty()
                    && self
                        .toolsets
                        .prefix_covers(app.id(), &spec.name, args, &held.prefixes);
                if held.whole || prefixed {
                    decision.push_str(if prefixed {
                        ":granted_prefix"
                    } else {
                        ":granted"
                    });
                    return Ok(decision);
                }
                let mut question = Question::new(
                    caller,
                    app.id(),
                    &app.descriptor.name,
                    &spec.name,
                    risk,
                    guide::shorten(&step.call.args.to_string(), 200),
                );
                question.once_only = critical;
                question.session = who.session.is_some();
                question.prefix = self.toolsets.offered_prefix(app.id(), &spec.name, args);
                let answer = match asker {
                    Some(asker) => asker.ask(&question).await,
                    None => Err(Unanswered::CannotAsk(String::new())),
                };
                let answer = match answer {
                    Ok(Answer::Deny) => Err(Unanswered::Declined("the user chose Deny".to_owned())),
                    other => other,
                };
                match answer {
                    Ok(answer) => {
                        let via = asker.map_or("cli", |a| a.via());
                        let scoped =
                            |scope: Scope, tool: Option<&str>, prefix: Option<&str>| Grant {
                                scope,
                                session: (scope == Scope::Session)
                                    .then(|| who.session.clone())
                                    .flatten(),
                                prefix: prefix.map(str::to_owned),
                                ..Grant::always(caller, app.id(), tool, via)
                            };
                        let grant = match answer {
                            Answer::AllowSession => {
                                Some(scoped(Scope::Session, Some(&spec.name), None))
                            }
                            Answer::AlwaysTool => {
                                Some(scoped(Scope::Always, Some(&spec.name), None))
                            }
                            Answer::AlwaysApp => Some(scoped(Scope::Always, None, None)),
                            Answer::AlwaysPrefix => question
                                .prefix
                                .as_deref()
                                .map(|p| scoped(Scope::Always, Some(&spec.name), Some(p))),
                            Answer::AllowOnce | Answer::Deny => None,
                        };
                        if let Some(grant) = grant {
                            self.gate.remember(&grant)?;
                        }
                        decision.push(':');
                        decision.push_str(answer.decision());
                        Ok(decision)
                    }
                    // Not a decision yet: the client asks the user and calls again.
                    Err(Unanswered::Later(input_required)) => Err(AaiError::new(
                        ErrorKind::PermissionDenied,
                        "waiting for the user's approval",
                    )
                    .with_detail(json!({ INPUT_REQUIRED: input_required }))),
                    Err(unanswered) => {
                        let error = match &self.config.invalid {
                            Some(problem) => config_invalid(app.id(), &spec.name, problem),
                            None => not_approved(
                                caller,
                                app.id(),
                                &spec.name,
                                risk,
                                profile_name,
                                &unanswered,
                            ),
                        };
                        Err(self.refuse(step, &decision, "denied", error))
                    }
                }
            }
        }
    }

    /// The execute step: runs the tool (again after a sign-in through the client), with a
    /// `cancelled` row written if the call is dropped before it ends; a TLS failure is
    /// explained from the certificate the server presents.
    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        step: &Step<'_>,
        decision: &str,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
        asker: Option<&dyn Asker>,
    ) -> Result<Value, AaiError> {
        let timeout = self.config.tool_timeout(app.platform, spec.timeout);
        let invocation = Invocation::new(&app.descriptor, &spec.name, args, timeout)
            .with_roots(&who.roots)
            .with_progress(who.progress.as_deref());
        // A call dropped before it finishes (the client cancelled it) still gets its outcome row.
        let mut unfinished = Unfinished {
            gate: &self.gate,
            call: step.call,
            decision,
            started: step.started,
            armed: true,
        };
        let mut result = self.run(app.platform, invocation, spec).await;
        if let (Err(error), Some(asker)) = (&result, asker)
            && let Some(url) = authorization_url(error)
            && asker.open_url(&error.message, &url).await
            && self
                .web
                .auth
                .wait_for_authorization(app.id(), self.config.consent_timeout())
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

/// A call between the gate's steps: its audit identity and when it began.
struct Step<'a> {
    call: &'a Call<'a>,
    started: Instant,
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
    /// Before a web app's first OAuth authorization with a domain, the user confirms the
    /// domain, its TLS certificate's issuer and validity, the app and the scopes. The answer is
    /// remembered for the client as a grant on `oauth:<host>`.
    async fn confirm_authorization(
        &self,
        caller: &str,
        app: &App,
        asker: Option<&dyn Asker>,
    ) -> Result<Option<(String, String)>, AaiError> {
        let once = self.confirm_env_binding(caller, app, asker).await?;
        let Some(auth) = app
            .descriptor
            .platforms
            .web
            .as_ref()
            .filter(|_| app.platform == Platform::Web)
            .and_then(|section| section.fields.auth.as_ref())
            .filter(|auth| auth.kind == "oauth2")
        else {
            return Ok(once);
        };
        let stored = self.web.auth.store.get(app.id()).unwrap_or_default();
        if stored.oauth.is_some() {
            return Ok(once);
        }
        let auth_url = auth
            .fields
            .get("auth_url")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let host = crate::web::host_key(auth_url).unwrap_or_else(|| auth_url.to_owned());
        let subject = format!("oauth:{host}");
        if self.gate.granted(caller, &subject, "authorize")? {
            return Ok(once);
        }
        let identity = self.web.server_identity(auth_url).await.map_err(|reason| {
            AaiError::new(
                ErrorKind::AuthConfigInvalid,
                format!(
                    "{}: cannot check who runs its sign-in page before authorizing: {reason}",
                    app.id()
                ),
            )
        })?;
        let scopes = Some(crate::web::auth::scopes(auth))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "none named".into());
        let mut question = Question::new(
            caller,
            &subject,
            &app.descriptor.name,
            "authorize",
            Risk::High,
            format!(
                "sign in to {} at {} (TLS certificate issued by {}, valid from {} until {}), scopes: {scopes}",
                app.descriptor.name,
                identity.host,
                identity.issuer,
                identity.not_before,
                identity.not_after
            ),
        );
        // A binding, not a tool: confirmed for this sign-in, or for good.
        question.always_label = Some(format!(
            "Always trust {} for signing in to {}",
            identity.host, app.descriptor.name
        ));
        let answer = match asker {
            Some(asker) => asker.ask(&question).await,
            None => Err(Unanswered::CannotAsk(String::new())),
        };
        match answer {
            Ok(Answer::Deny)
            | Err(Unanswered::Declined(_) | Unanswered::CannotAsk(_) | Unanswered::Refused(_)) => {
                let command = format!(
                    "aai-gateway consent grant {} authorize --client {}",
                    shell_quote(&subject),
                    shell_quote(caller)
                );
                Err(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "Signing in to {} at {} needs the user's confirmation first ({}). Ask the user to check it and run `{command}`, then call again.",
                        app.descriptor.name, identity.host, question.args
                    ),
                )
                .with_detail(json!({"reason": "domain_confirmation", "host": identity.host, "issuer": identity.issuer, "not_after": identity.not_after, "command": command})))
            }
            Ok(Answer::AlwaysTool) => {
                let via = asker.map_or("cli", |a| a.via());
                self.gate
                    .remember(&Grant::always(caller, &subject, Some("authorize"), via))?;
                Ok(once)
            }
            Ok(_) => Ok(once),
            Err(Unanswered::Later(input_required)) => Err(AaiError::new(
                ErrorKind::PermissionDenied,
                "waiting for the user to confirm the sign-in domain",
            )
            .with_detail(json!({ INPUT_REQUIRED: input_required }))),
        }
    }

    /// A descriptor fetched from the network that names an environment variable gets its value
    /// only after the user approved that exact binding (the app, the variable and the origin
    /// it goes to) once; the approval is remembered for the client as a grant on
    /// `env:<VAR>` for that origin.
    /// Returns the binding when it was allowed for this call only, to withdraw afterwards.
    async fn confirm_env_binding(
        &self,
        caller: &str,
        app: &App,
        asker: Option<&dyn Asker>,
    ) -> Result<Option<(String, String)>, AaiError> {
        let Some(section) = app
            .descriptor
            .platforms
            .web
            .as_ref()
            .filter(|_| app.platform == Platform::Web)
        else {
            return Ok(None);
        };
        let Some((var, origin)) =
            crate::web::auth::GatewayAuth::env_binding(&app.descriptor, &section.fields)
        else {
            return Ok(None);
        };
        let subject = format!("env:{var}");
        let binding = format!("{}@{origin}", app.id());
        if !self.gate.granted(caller, &subject, &binding)? {
            let mut question = Question::new(
                caller,
                &subject,
                &app.descriptor.name,
                "send",
                Risk::High,
                format!(
                    "{} ({}), fetched from the network, asks to send the value of the environment variable {var} to {origin}",
                    app.descriptor.name,
                    app.id()
                ),
            );
            question.always_label = Some(format!("Always allow sending {var} to {origin}"));
            let answer = match asker {
                Some(asker) => asker.ask(&question).await,
                None => Err(Unanswered::CannotAsk(String::new())),
            };
            match answer {
                Ok(Answer::AllowOnce) => {
                    self.web.auth.approve_env(&app.descriptor, &var, &origin);
                    return Ok(Some((var, origin)));
                }
                Ok(Answer::AlwaysTool) => {
                    let via = asker.map_or("cli", |a| a.via());
                    self.gate
                        .remember(&Grant::always(caller, &subject, Some(&binding), via))?;
                }
                Err(Unanswered::Later(input_required)) => {
                    return Err(AaiError::new(
                        ErrorKind::PermissionDenied,
                        "waiting for the user to approve sending a credential",
                    )
                    .with_detail(json!({ INPUT_REQUIRED: input_required })));
                }
                _ => {
                    let command = format!(
                        "aai-gateway consent grant {} {} --client {}",
                        shell_quote(&subject),
                        shell_quote(&binding),
                        shell_quote(caller)
                    );
                    return Err(AaiError::new(
                        ErrorKind::PermissionDenied,
                        format!(
                            "{} was fetched from the network and wants the environment variable {var} sent to {origin}; the user did not approve it, so nothing was sent. Only the user can allow this binding (`{command}`).",
                            app.id()
                        ),
                    )
                    .with_detail(json!({"reason": "credential_binding", "env_var": var, "origin": origin})));
                }
            }
        }
        self.web.auth.approve_env(&app.descriptor, &var, &origin);
        Ok(None)
    }

    /// Runs the executor; a read-only tool that timed out or found its app not running is
    /// tried again, up to `retry.attempts` tries, waiting longer each time.
    async fn run(
        &self,
        platform: Platform,
        invocation: Invocation<'_>,
        spec: &ToolCommon,
    ) -> Result<Value, AaiError> {
        let retry = self.config.retry;
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
        let registry = self.registry().await;
        let app = self.find(&registry, app)?;
        let spec = find_tool(&app, tool)?;
        let schema = spec.parameters.as_ref().map(Parameters::schema);
        let args = check_args(&app, spec, schema.as_ref(), args)?;
        let timeout = self.config.tool_timeout(app.platform, spec.timeout);
        // Built-in tools plan for the OS `--platform` names (the first platform in effect).
        let invocation = Invocation::new(&app.descriptor, &spec.name, &args, timeout)
            .with_target(self.config.platforms.first().copied());
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

/// Says which TLS check failed, from the certificate the server presented (verifiers report
/// some failures as an unknown issuer), naming the issuer the user would have to trust.
fn explain_tls(error: &mut AaiError, seen: &crate::web::Presented) {
    let host = error
        .detail
        .as_ref()
        .and_then(|d| d["host"].as_str())
        .unwrap_or("the server")
        .to_owned();
    let what = error
        .message
        .split(": ")
        .next()
        .unwrap_or_default()
        .to_owned();
    let (reason, cause) = if seen.expired {
        (
            "tls_expired",
            format!(
                "{host}'s TLS certificate has expired (or is not valid yet); the site must renew it"
            ),
        )
    } else if !seen.names_host {
        (
            "tls_name_mismatch",
            format!("{host}'s TLS certificate is for another name; check the host in base_url"),
        )
    } else {
        (
            "tls_unknown_issuer",
            format!(
                "{host}'s TLS certificate is issued by \"{}\", a certificate authority the gateway does not trust; if it is yours (a company proxy, a local CA), add its PEM file to `web.extra_ca_certs` in config.json",
                seen.issuer
            ),
        )
    };
    error.message = format!("{what}: {cause}");
    if let Some(Value::Object(detail)) = &mut error.detail {
        detail.insert("reason".into(), json!(reason));
        detail.insert("issuer".into(), json!(seen.issuer));
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

/// The sign-in page an AUTH_REQUIRED error sends the user to.
fn authorization_url(error: &AaiError) -> Option<String> {
    (error.kind == ErrorKind::AuthRequired)
        .then(|| {
            error
                .detail
                .as_ref()?
                .get("authorization_url")?
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}

/// PERMISSION_DENIED for a call refused while `config.json` is invalid: the fix is the file,
/// not a grant.
fn config_invalid(app: &str, tool: &str, problem: &str) -> AaiError {
    AaiError::new(
        ErrorKind::PermissionDenied,
        format!(
            "{app}:{tool} was not run: the config is invalid: {problem}. Until the file is fixed the gateway runs with every call needing the user's approval; fix it (check with `aai-gateway config check`), then call again."
        ),
    )
    .with_detail(json!({"reason": "config_invalid", "problem": problem}))
}

/// PERMISSION_DENIED for a call the user did not approve. When the user was asked and said
/// no, the agent is told so and not to ask again; only when nobody could be asked does it get
/// the commands that grant the tool.
fn not_approved(
    caller: &str,
    app: &str,
    tool: &str,
    risk: Risk,
    profile: &str,
    unanswered: &Unanswered,
) -> AaiError {
    let risk = risk_name(risk);
    match unanswered {
        Unanswered::Declined(reason) => AaiError::new(
            ErrorKind::PermissionDenied,
            format!(
                "The user declined {app}:{tool} ({reason}); it was not run. Do not ask again for this call or retry it: go on without it, or ask the user what to do instead."
            ),
        )
        .with_detail(json!({"reason": "user_declined", "profile": profile, "risk": risk})),
        Unanswered::Refused(reason) => AaiError::new(
            ErrorKind::PermissionDenied,
            format!("{app}:{tool} was not run: {reason}."),
        )
        .with_detail(json!({"reason": "approval_refused", "profile": profile, "risk": risk})),
        Unanswered::CannotAsk(reason) => {
            let client = shell_quote(caller);
            let this_tool = format!(
                "aai-gateway consent grant {} {} --client {client}",
                shell_quote(app),
                shell_quote(tool)
            );
            let whole_app = format!(
                "aai-gateway consent grant {} --client {client}",
                shell_quote(app)
            );
            AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "{app}:{tool} needs the user's approval (risk {risk}, policy profile {profile:?}) and the user could not be asked{}. Ask the user to run `{this_tool}` (or `{whole_app}` for every tool of the app), then call again.",
                    if reason.is_empty() { String::new() } else { format!(" ({reason})") }
                ),
            )
            .with_detail(json!({"reason": "approval_required", "command": this_tool, "command_all_tools": whole_app, "profile": profile, "risk": risk}))
        }
        Unanswered::Later(_) => AaiError::new(
            ErrorKind::PermissionDenied,
            "waiting for the user's approval",
        ),
    }
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

/// Looks an app up, or says which apps exist.
pub fn find_app<'r>(registry: &'r Registry, name: &str) -> Result<&'r Arc<App>, AaiError> {
    registry.find(name).ok_or_else(|| {
        let near = registry.suggestions(name, 8);
        let hint = if registry.apps.is_empty() {
            "No apps are installed: put descriptors in ~/.aai/<appId>/aai.json (or AAI_HOME)."
                .to_owned()
        } else {
            format!("Installed apps include: {}.", near.join(", "))
        };
        AaiError::new(ErrorKind::AppNotFound, format!("No app {name:?}. {hint}"))
            .with_detail(json!({"app": name, "suggestions": near}))
    })
}

fn find_tool<'a>(app: &'a App, tool: &str) -> Result<&'a ToolCommon, AaiError> {
    let platform = app.platform;
    app.descriptor.tool(platform, tool).ok_or_else(|| {
        let names: Vec<&str> = app
            .descriptor
            .tools(platform)
            .unwrap_or_default()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let near = crate::registry::nearest(tool, names.iter().copied(), 1);
        let hint = near
            .first()
            .map(|n| format!(" Did you mean {n:?}?"))
            .unwrap_or_default();
        AaiError::new(
            ErrorKind::ToolNotFound,
            format!(
                "{} has no tool {tool:?}.{hint} Its tools: {}. Call {} for the guide.",
                app.id(),
                names.join(", "),
                app.slug
            ),
        )
        .with_detail(json!({"app": app.id(), "tool": tool, "tools": names}))
    })
}

/// Checks `args` against the tool's `parameters`; INVALID_PARAMS names each failing field.
fn check_args(
    app: &App,
    tool: &ToolCommon,
    schema: Option<&Value>,
    args: &Value,
) -> Result<Map<String, Value>, AaiError> {
    let args = match args {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        other => {
            return Err(AaiError::new(
                ErrorKind::InvalidParams,
                format!(
                    "args of {}.{} must be an object of named arguments, got {}",
                    app.id(),
                    tool.name,
                    kind_of(other)
                ),
            )
            .with_detail(json!({"field": "args"})));
        }
    };
    let validator = app
        .validator(&tool.name, tool.parameters.as_ref())
        .map_err(|error| {
            AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!(
                    "the `parameters` schema of {}.{} does not compile: {error}; fix it in {}",
                    app.id(),
                    tool.name,
                    app.source.display()
                ),
            )
        })?;
    // Arguments the schema does not name are a mistake to report, not to drop, unless the
    // schema says it takes more (`additionalProperties`, `patternProperties`).
    if let Some(schema) = schema
        && let Some(properties) = schema.get("properties").and_then(Value::as_object)
        && schema.get("additionalProperties").is_none()
        && schema.get("patternProperties").is_none()
    {
        let unknown: Vec<&String> = args
            .keys()
            .filter(|k| !properties.contains_key(*k))
            .collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = properties.keys().map(String::as_str).collect();
            let listed: Vec<String> = unknown
                .iter()
                .map(
                    |u| match crate::registry::nearest(u, names.iter().copied(), 1).first() {
                        Some(near) if strsim::jaro_winkler(u, near) >= 0.8 => {
                            format!("`{u}` (did you mean `{near}`?)")
                        }
                        _ => format!("`{u}`"),
                    },
                )
                .collect();
            return Err(AaiError::new(
                ErrorKind::InvalidParams,
                format!(
                    "{}.{} takes no argument {}; its arguments are {}. Call {} for its parameters.",
                    app.id(),
                    tool.name,
                    listed.join(", "),
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    },
                    app.slug
                ),
            )
            .with_detail(
                json!({"field": unknown[0], "unknown": unknown, "reason": "unknown_argument"}),
            ));
        }
    }
    let Some(validator) = validator else {
        return Ok(args);
    };
    let instance = Value::Object(args);
    let errors: Vec<(String, String)> = validator
        .iter_errors(&instance)
        .take(10)
        .map(|error| {
            let mut field = error
                .instance_path()
                .as_str()
                .trim_start_matches('/')
                .replace('/', ".");
            if let jsonschema::error::ValidationErrorKind::Required { property } = error.kind() {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_owned);
                field = if field.is_empty() {
                    name
                } else {
                    format!("{field}.{name}")
                };
            }
            // A failing value is quoted in the message; keep a 10 MB string out of it.
            (field, guide::shorten(&error.to_string(), 300))
        })
        .collect();
    let Value::Object(args) = instance else {
        return Ok(Map::new());
    };
    if errors.is_empty() {
        return Ok(args);
    }
    let listed: Vec<String> = errors.iter().map(|(f, m)| format!("`{f}`: {m}")).collect();
    Err(AaiError::new(
        ErrorKind::InvalidParams,
        format!(
            "Invalid arguments for {}.{}: {}. Call {} for its parameters.",
            app.id(),
            tool.name,
            listed.join("; "),
            app.slug
        ),
    )
    .with_detail(json!({
        "field": errors[0].0,
        "errors": errors.iter().map(|(f, m)| json!({"field": f, "message": m})).collect::<Vec<_>>(),
    })))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A tool's output as the agent receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub text: String,
    /// The JSON output when it is an object and was not cut.
    pub structured: Option<Value>,
    pub cut: bool,
}

/// A binary result (an image, a PDF): its MIME type, size and base64 bytes.
pub fn binary(output: &Value) -> Option<(&str, u64, &str)> {
    let binary = output.get(aai_executor::rest::BINARY_KEY)?;
    Some((
        binary.get("mime")?.as_str()?,
        binary.get("bytes")?.as_u64()?,
        binary.get("base64")?.as_str()?,
    ))
}

/// Renders output as text, cutting it at `max_chars` with a note that says how much was cut.
/// A binary result is described in words (its bytes travel as their own content).
pub fn render(output: &Value, max_chars: usize) -> Rendered {
    if let Some((mime, bytes, _)) = binary(output) {
        // What came with the bytes (a screenshot's size, scale and origin) travels as
        // structured content and in the text; the bytes travel as their own content block.
        let meta: Map<String, Value> = output
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| *k != aai_executor::rest::BINARY_KEY)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut text = format!("binary content: {mime}, {bytes} bytes");
        if !meta.is_empty() {
            text.push('\n');
            text.push_str(&Value::Object(meta.clone()).to_string());
        }
        return Rendered {
            text,
            structured: (!meta.is_empty()).then_some(Value::Object(meta)),
            cut: false,
        };
    }
    let text = match output {
        Value::String(text) => text.clone(),
        Value::Null => "done (no output)".to_owned(),
        other => other.to_string(),
    };
    let total = text.chars().count();
    if total <= max_chars {
        let structured = output.is_object().then(|| output.clone());
        return Rendered {
            text,
            structured,
            cut: false,
        };
    }
    let kept: String = text.chars().take(max_chars).collect();
    let note = format!(
        "\n[aai-gateway: output cut to {max_chars} of {total} characters ({} not shown). Ask for less: narrow the query or use the tool's limit/filter arguments.]",
        total - max_chars
    );
    Rendered {
        text: kept + &note,
        structured: None,
        cut: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_outputs_pass_whole() {
        let out = render(&json!({"a": 1}), 100);
        assert_eq!(out.text, r#"{"a":1}"#);
        assert_eq!(out.structured, Some(json!({"a": 1})));
        assert_eq!(render(&json!("plain"), 100).text, "plain");
    }

    #[test]
    fn big_outputs_are_cut_with_a_note() {
        let out = render(&json!("é".repeat(1000)), 100);
        assert!(out.cut);
        assert!(out.text.starts_with(&"é".repeat(100)));
        assert!(
            out.text
                .contains("cut to 100 of 1000 characters (900 not shown)"),
            "{}",
            out.text
        );
        assert_eq!(out.structured, None);
    }
}
