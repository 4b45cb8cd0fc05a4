//! The call path: a tool call through the gate — its arguments checked, what its toolset
//! would refuse, the call judged as what it does, the policy, consent, the run, and the
//! audit rows before and after.

use std::time::Instant;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Parameters, Platform, Risk, ToolCommon};
use aai_executor::Invocation;
use aai_policy::{Action, ToolFacts, derive_risk};
use serde_json::{Map, Value, json};

use super::args::{check_args, find_tool};
use super::builtins::{judged_off, judged_target};
use super::outcome::{Halt, Pipeline, Request};
use super::render::binary;
use super::web::{authorization_url, explain_tls};
use super::{Caller, Gateway, panic_message};
use crate::catalog::snapshot::App;
use crate::consent::Asker;
use crate::gate::{Call, Gate};

impl Gateway {
    /// Runs `tool` of `app` with `args` for `caller` (the MCP client's name), through the
    /// gate with nobody to ask ([`Pipeline::call`] of a [`Request::tool`]): argument checks,
    /// the policy, remembered consent, and audit rows before and after.
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
        let who = Caller::named(caller);
        self.call(Request::tool(&who, app, tool, args))
            .await
            .into_result()
    }

    /// A tool call for `who`, asking the user through `asker` when the policy requires
    /// approval and no grant covers the call. Without an asker such a call is denied with the
    /// command that grants it; a decline, a cancel or no answer in time is a denial the agent
    /// is told not to ask again about.
    ///
    /// The steps are the gate's (DESIGN §8), in order: find the tool, check the arguments
    /// against its schema, rate the risk, apply the policy, get consent, run, audit. Every
    /// step that refuses writes the call's audit row before it answers.
    pub(super) async fn call_tool(
        &self,
        who: &Caller,
        app: &str,
        tool: &str,
        args: &Value,
        asker: Option<&dyn Asker>,
    ) -> Result<Value, Halt> {
        let started = Instant::now();
        let registry = self.snapshot_for(app).await;
        // The tool is borrowed from the app found, not copied: this is every call's path.
        // An MCP server's tools are what it lists now (started for it on first use).
        let found = match self.find(&registry, app) {
            Ok(found) => self
                .descriptor_of(&found)
                .await
                .map(|descriptor| (found, descriptor)),
            Err(error) => Err(error),
        };
        let (app, descriptor, spec) = match &found {
            Ok((found, descriptor)) => match find_tool(found, descriptor, tool) {
                Ok(spec) => (found, descriptor, spec),
                Err(error) => {
                    return Err(self.unresolved(who, app, tool, args, started, error).into());
                }
            },
            Err(error) => {
                return Err(self
                    .unresolved(who, app, tool, args, started, error.clone())
                    .into());
            }
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
        let args = self.checked(&step, who, app, spec, schema.as_ref(), args)?;
        // A built-in call that does what another tool does is judged as that call — text
        // typed into a terminal window is a shell command, and so is an app launch of a
        // shell: the other's risk, classifier, policy, grants and question. It still runs
        // (and is audited) as itself; its toolset checks at run time that the judgement holds.
        let judged = match self.judged_as(who, app, spec, &args).await {
            Ok(judged) => judged,
            Err(error) => return Err(self.refuse(&step, "none", "denied", error).into()),
        };
        let stand_in = match &judged {
            Some(judged) => match self
                .find(&registry, &judged.app)
                .and_then(|found| found.descriptor().map(|descriptor| (found, descriptor)))
            {
                Ok(found) => Some(found),
                Err(_) => {
                    return Err(self
                        .refuse(&step, "none", "denied", judged_off(judged))
                        .into());
                }
            },
            None => None,
        };
        let (gate_app, gate_spec, gate_args) =
            match judged_target(judged.as_ref(), stand_in.as_ref(), (app, spec, &args)) {
                Ok(target) => target,
                Err(error) => return Err(self.refuse(&step, "none", "denied", error).into()),
            };
        let rated = self.raise_risk(
            &mut call,
            who,
            judged.as_ref(),
            gate_app,
            gate_spec,
            gate_args,
        );
        let raised = rated.as_ref().filter(|r| r.each_time).map(|r| r.risk);
        let step = Step {
            call: &call,
            started,
        };
        if let Some(error) = self.stop.refusal() {
            return Err(self.refuse(&step, "emergency_stop", "denied", error).into());
        }
        let original = CallContext {
            step: &step,
            who,
            app,
            spec,
            args: &args,
            asker,
        };
        let judging = CallContext {
            app: gate_app,
            spec: gate_spec,
            args: gate_args,
            ..original
        };
        let why = rated.and_then(|r| r.why);
        self.decide_and_run(
            &original,
            &judging,
            (judged.as_ref(), raised, why.as_deref()),
            descriptor,
        )
        .await
    }

    /// The arguments as the tool's schema takes them, or the refusal (audited) of a call that
    /// is malformed or that its toolset would refuse whatever the user answered (a path
    /// outside the file sandbox): nobody is asked to approve a call that cannot run.
    fn checked(
        &self,
        step: &Step<'_>,
        who: &Caller,
        app: &App,
        spec: &ToolCommon,
        schema: Option<&Value>,
        args: &Value,
    ) -> Result<Map<String, Value>, AaiError> {
        let args = match check_args(app, spec, schema, args) {
            Ok(args) => args,
            Err(error) => return Err(self.refuse(step, "none", "failed", error)),
        };
        if let Some(error) = self.refusal(who, app, spec, &args) {
            let outcome = if error.kind == ErrorKind::PermissionDenied {
                "denied"
            } else {
                "failed"
            };
            return Err(self.refuse(step, "none", outcome, error));
        }
        Ok(args)
    }

    /// Sets the call's risk to what it does: at least the risk of the call it is judged as,
    /// and what its toolset finds in it ([`aai_toolset::Toolset::rate`]: a command that stays
    /// in the box is medium, one that would lose work high, a critical one critical), which
    /// takes the place of the tool's own risk. The toolset's rating, when it gave one.
    fn raise_risk(
        &self,
        call: &mut Call<'_>,
        who: &Caller,
        judged: Option<&aai_toolset::Judged>,
        app: &App,
        spec: &ToolCommon,
        args: &Map<String, Value>,
    ) -> Option<aai_toolset::Rated> {
        let own = call.risk;
        let stand_in = derive_risk(spec.risk, spec.read_only, spec.destructive);
        if judged.is_some() {
            call.risk = call.risk.max(stand_in);
        }
        let boxed = judged.is_none_or(|j| j.boxed);
        let rated = self.rated(who, app, spec, args, boxed);
        if let Some(rated) = &rated {
            // A call judged as another keeps at least its own tool's risk.
            call.risk = if judged.is_some() {
                own.max(rated.risk)
            } else {
                rated.risk
            };
        }
        rated
    }

    /// The gate's decision for a resolved call — the policy's verdict, then consent — and the
    /// run when allowed. `judging` is the call the gate judges (the stand-in of a judged call,
    /// else `original`); `original` is what runs and is audited.
    async fn decide_and_run(
        &self,
        original: &CallContext<'_>,
        judging: &CallContext<'_>,
        (judged, raised, rated): (Option<&aai_toolset::Judged>, Option<Risk>, Option<&str>),
        descriptor: &Descriptor,
    ) -> Result<Value, Halt> {
        let Ruled {
            action,
            profile_name,
            must_ask,
            binding,
            bound,
        } = self.verdict(judging, original, judged, raised).await?;
        let verdict = Verdict {
            action,
            profile_name: &profile_name,
            raised,
            must_ask: must_ask.as_deref(),
            judged: judged.map(|j| j.why.as_str()),
            rated,
            binding: binding.as_ref(),
        };
        let (decision, shown) = self.consent(judging, &verdict).await?;
        // A call the user was asked about is recorded with exactly what they saw.
        let call = original.step.call;
        let asked = shown.as_ref().map(|args| Call {
            id: call.id.clone(),
            args,
            ..*call
        });
        let step = Step {
            call: asked.as_ref().unwrap_or(call),
            started: original.step.started,
        };
        self.run_consented(
            &CallContext {
                step: &step,
                ..*original
            },
            &decision,
            descriptor,
            must_ask.is_some() || bound,
        )
        .await
    }

    /// The policy's word on a call as the gate judges it (`judging`), tightened by a
    /// scheduled task's layer and by a toolset that says the call (`original`) must be asked
    /// every time: the action, the profile that gave it, and why it must be asked.
    async fn verdict(
        &self,
        judging: &CallContext<'_>,
        original: &CallContext<'_>,
        judged: Option<&aai_toolset::Judged>,
        raised: Option<Risk>,
    ) -> Result<Ruled, AaiError> {
        let CallContext {
            step,
            who,
            app,
            spec,
            ..
        } = *judging;
        let risk = step.call.risk;
        // A scheduled task's layer only tightens: a tool it was not granted, or a risk above
        // its limit, is refused before the policy is asked.
        if let Some(error) = who
            .task
            .as_ref()
            .and_then(|task| task.refusal(app.id(), &spec.name, risk))
        {
            return Err(self.refuse(step, "task_grant", "denied", error));
        }
        let (mut action, profile_name) = self.policy(who, app, spec, risk, raised);
        // A task's call of a tool it was not granted goes to the user (its layer refused it
        // already unless the task queues such calls).
        if who
            .task
            .as_ref()
            .is_some_and(|task| !task.covers(app.id(), &spec.name))
        {
            action = action.max(Action::RequireApproval);
        }
        // A call its toolset says must be asked every time (a password typed into a page, a
        // paste into a terminal) is put to the user whatever the profile and the grants say;
        // only a block stays.
        let (mut must_ask, mut binding) = match self
            .must_ask(who, original.app, original.spec, original.args)
            .await
        {
            Some(why) => (
                Some(why),
                self.binding(who, original.app, original.spec, original.args),
            ),
            None => (judged.and_then(|j| j.ask_every_time.clone()), None),
        };
        // What the person allowed for this session or always (a command's new hosts) is not
        // asked again: the call goes on as the policy says, as approved.
        let mut bound = binding.is_some();
        for key in binding.iter().flat_map(|b| &b.keys) {
            let held = self.gate.held(
                &who.name,
                aai_toolset::Binding::APP,
                key,
                who.session.as_deref(),
            )?;
            if !held.whole {
                bound = false;
                break;
            }
        }
        if bound {
            must_ask = None;
            binding = None;
        }
        if must_ask.is_some() && action != Action::AlwaysBlock {
            action = Action::RequireApproval;
        }
        Ok(Ruled {
            action,
            profile_name,
            must_ask,
            binding,
            bound,
        })
    }

    /// After consent: the sign-in a web app may need, the stop checked again (it may have
    /// been pressed while the user was asked), the intent row, the run and its outcome row.
    async fn run_consented(
        &self,
        call: &CallContext<'_>,
        decision: &str,
        descriptor: &Descriptor,
        must_ask: bool,
    ) -> Result<Value, Halt> {
        let CallContext {
            step,
            who,
            app,
            asker,
            ..
        } = *call;
        let once_binding = match self.confirm_authorization(&who.name, app, asker).await {
            Ok(once) => once,
            Err(Halt::NeedsInput(input_required)) => return Err(Halt::NeedsInput(input_required)),
            Err(Halt::Refused(error)) => {
                return Err(self.refuse(step, decision, "denied", error).into());
            }
        };
        if let Some(error) = self.stop.refusal() {
            return Err(self.refuse(step, decision, "denied", error).into());
        }
        // The intent row is durable before anything runs: no call happens unrecorded.
        self.gate.record(step.call, decision, "started", 0, None)?;
        let result = self.execute(call, decision, descriptor, must_ask).await;
        if let Some((var, origin)) = once_binding {
            // Allowed for this call only.
            self.web.auth.withdraw_env(descriptor, &var, &origin);
        }
        Ok(self.audit(step, decision, result)?)
    }

    /// A fresh audit id for a call of `who`, also handed to its collector.
    pub(super) fn call_id(&self, who: &Caller) -> String {
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
    pub(super) fn unresolved(
        &self,
        who: &Caller,
        app: &str,
        tool: &str,
        args: &Value,
        started: Instant,
        error: AaiError,
    ) -> AaiError {
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
        self.refuse(&step, "none", "failed", error)
    }

    /// Writes the refused call's audit row and returns the error for the agent (or the audit
    /// failure, which then matters more).
    pub(super) fn refuse(
        &self,
        step: &Step<'_>,
        decision: &str,
        outcome: &str,
        error: AaiError,
    ) -> AaiError {
        match self
            .gate
            .record(step.call, decision, outcome, step.elapsed(), Some(&error))
        {
            Ok(()) => error,
            Err(audit) => audit,
        }
    }

    /// The policy step: what the client's profile says for this tool at this risk, and the
    /// profile's name. An override that lets a tool run does not let a raised call through:
    /// the profile's rule for the raised risk applies at least.
    pub(super) fn policy(
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
    pub(super) async fn execute(
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
            .with_progress(who.progress.as_deref())
            .with_elicit(asker.and_then(Asker::elicitor));
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
    pub(super) fn audit(
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
pub(super) struct Step<'a> {
    pub(super) call: &'a Call<'a>,
    pub(super) started: Instant,
}

/// One call on its way through the gate, passed whole: its audit step, who makes it, the app
/// and tool, the arguments as checked, and who can ask the user about it.
#[derive(Clone, Copy)]
pub(super) struct CallContext<'a> {
    pub(super) step: &'a Step<'a>,
    pub(super) who: &'a Caller,
    pub(super) app: &'a App,
    pub(super) spec: &'a ToolCommon,
    pub(super) args: &'a Map<String, Value>,
    pub(super) asker: Option<&'a dyn Asker>,
}

/// Why the policy said what it said of a call, for the consent step: its action and the
/// profile that gave it, the risk the call raised its tool's to, and why it must be asked or
/// is judged as another call.
#[derive(Clone, Copy)]
pub(super) struct Verdict<'a> {
    pub(super) action: Action,
    pub(super) profile_name: &'a str,
    pub(super) raised: Option<Risk>,
    pub(super) must_ask: Option<&'a str>,
    pub(super) judged: Option<&'a str>,
    /// What its toolset found in it (what a command would lose).
    pub(super) rated: Option<&'a str>,
    /// What the call asks to be allowed beyond itself, offered for the session or always.
    pub(super) binding: Option<&'a aai_toolset::Binding>,
}

/// The policy step's outcome ([`Gateway::verdict`]): the action and the profile that gave it,
/// why the call must be asked, what it asks to be allowed beyond itself, and whether the
/// person allowed that already (the call runs as approved).
struct Ruled {
    action: Action,
    profile_name: String,
    must_ask: Option<String>,
    binding: Option<aai_toolset::Binding>,
    bound: bool,
}

impl Step<'_> {
    fn elapsed(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

impl Gateway {
    /// Runs the executor; a read-only tool that timed out or found its app not running is
    /// tried again, up to `retry.attempts` tries, waiting longer each time.
    pub(super) async fn run(
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
    pub(super) async fn plan_call(
        &self,
        app: &str,
        tool: &str,
        args: &Value,
    ) -> Result<Value, AaiError> {
        let registry = self.snapshot_for(app).await;
        let app = self.find(&registry, app)?;
        let descriptor = self.descriptor_of(&app).await?;
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
