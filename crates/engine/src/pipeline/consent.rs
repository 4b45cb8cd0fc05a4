//! The consent step of the gate: a blocked call is refused, one that needs approval runs on a
//! remembered grant or the user's answer (elicitation, a dialog, the queue), and a refusal
//! tells the agent what to do.

use aai_descriptor::{AaiError, ErrorKind, Risk, ToolCommon};
use aai_policy::Action;
use serde_json::{Map, Value, json};

use aai_audit::{Grant, Scope};

use super::Gateway;
use super::call::{CallContext, Step, Verdict};
use super::outcome::Halt;
use crate::consent::{Answer, Question, Unanswered};
use crate::gate::{action_name, risk_name, shell_quote};

impl Gateway {
    /// The consent step: a blocked call is refused; one that needs approval runs on a
    /// remembered grant or the user's answer. Returns the decision the audit rows carry and,
    /// when the user was asked, the arguments the question showed (redacted, whole): the
    /// call's later rows keep them so the log shows what was approved.
    pub(super) async fn consent(
        &self,
        call: &CallContext<'_>,
        verdict: &Verdict<'_>,
    ) -> Result<(String, Option<Value>), Halt> {
        let CallContext {
            step,
            who,
            app,
            spec,
            args,
            asker,
        } = *call;
        let Verdict {
            action,
            profile_name,
            raised,
            must_ask,
            judged,
            rated,
            binding,
        } = *verdict;
        let caller = who.name.as_str();
        let risk = step.call.risk;
        let mut decision = action_name(action).to_owned();
        match action {
            Action::AlwaysBlock => {
                let error = match &self.config().invalid {
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
                Err(self.refuse(step, &decision, "blocked", error).into())
            }
            Action::AutoApprove | Action::NotifyOnly => Ok((decision, None)),
            Action::RequireApproval => {
                let critical = raised.is_some() || must_ask.is_some();
                // A task's granted tools were approved when the user added the task: they run
                // unattended (the layer refused every other call already). A call that must be
                // asked every time is still asked.
                if !critical
                    && who
                        .task
                        .as_ref()
                        .is_some_and(|task| task.covers(app.id(), &spec.name))
                {
                    decision.push_str(":task_grant");
                    return Ok((decision, None));
                }
                // No grant covers a call whose risk was raised, or that must be asked each
                // time: it is asked each time.
                let held = if critical {
                    aai_audit::Held::default()
                } else {
                    self.gate
                        .held(caller, app.id(), &spec.name, who.session.as_deref())?
                };
                let prefixed = !held.prefixes.is_empty()
                    && self
                        .toolsets()
                        .prefix_covers(app.id(), &spec.name, args, &held.prefixes);
                if held.whole || prefixed {
                    decision.push_str(if prefixed {
                        ":granted_prefix"
                    } else {
                        ":granted"
                    });
                    return Ok((decision, None));
                }
                let shown = question_args(spec, args);
                let asked = super::Call {
                    id: step.call.id.clone(),
                    args: &shown,
                    ..*step.call
                };
                let step = &Step {
                    call: &asked,
                    started: step.started,
                };
                let mut question = Question::new(
                    caller,
                    app.id(),
                    app.name(),
                    &spec.name,
                    risk,
                    shown.to_string(),
                );
                // A binding (a command's new hosts) can be allowed for the session or always:
                // those answers are remembered for its keys, never for the tool.
                question.once_only = if binding.is_some() {
                    raised.is_some()
                } else {
                    critical
                };
                if let Some(binding) = binding.filter(|_| !question.once_only) {
                    question.always_label =
                        Some(format!("Always allow reaching {}", binding.named()));
                    question.session_label = Some(format!(
                        "Allow reaching {} for this session",
                        binding.named()
                    ));
                }
                // A config that cannot be read asks about everything: the question says so.
                let broken = self.config().invalid.as_ref().map(|problem| {
                    format!(
                        "config.json is invalid ({problem}), so every call is asked until it is fixed (`aai-gateway config check`)"
                    )
                });
                let said: Vec<&str> = [judged, must_ask, rated, broken.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect();
                question.why = (!said.is_empty()).then(|| said.join(" "));
                question.session = who.session.is_some();
                question.prefix = self.toolsets().offered_prefix(app.id(), &spec.name, args);
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
                        let grant_on =
                            |app_id: &str,
                             scope: Scope,
                             tool: Option<&str>,
                             prefix: Option<&str>| Grant {
                                scope,
                                session: (scope == Scope::Session)
                                    .then(|| who.session.clone())
                                    .flatten(),
                                prefix: prefix.map(str::to_owned),
                                ..Grant::always(caller, app_id, tool, via)
                            };
                        let scoped = |scope: Scope, tool: Option<&str>, prefix: Option<&str>| {
                            grant_on(app.id(), scope, tool, prefix)
                        };
                        let bind = |scope: Scope| -> Result<(), AaiError> {
                            for key in binding.map(|b| b.keys.as_slice()).unwrap_or_default() {
                                self.gate.remember(&grant_on(
                                    aai_toolset::Binding::APP,
                                    scope,
                                    Some(key),
                                    None,
                                ))?;
                            }
                            Ok(())
                        };
                        // A call asked every time is never remembered, whatever was answered;
                        // a binding is remembered for its keys alone.
                        let grant = match answer {
                            _ if question.once_only => None,
                            Answer::AllowSession if binding.is_some() => {
                                bind(Scope::Session)?;
                                None
                            }
                            Answer::AlwaysTool if binding.is_some() => {
                                bind(Scope::Always)?;
                                None
                            }
                            _ if binding.is_some() => None,
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
                        Ok((decision, Some(shown)))
                    }
                    // Not answered yet: the call returns pending, resumed by its id.
                    Err(Unanswered::Queued(id)) => {
                        let error = AaiError::new(
                            ErrorKind::PermissionDenied,
                            format!(
                                "{}:{} is waiting for the user's approval (id {id}). The user answers on the dashboard or with `aai-gateway approvals`; once they have, call aai_exec with {{\"approval_id\": \"{id}\"}} to run it — it runs once. Do not repeat the call meanwhile.",
                                app.id(),
                                spec.name
                            ),
                        )
                        .with_detail(json!({"reason": "pending_approval", "approval_id": id}));
                        Err(self.refuse(step, &decision, "pending", error).into())
                    }
                    // Not a decision yet: the client asks the user and calls again.
                    Err(Unanswered::Later(input_required)) => Err(Halt::NeedsInput(input_required)),
                    Err(Unanswered::CannotAsk(reason)) if who.task.is_some() => {
                        let task = who.task.as_ref().map_or("", |t| t.task.as_str());
                        let error = AaiError::new(
                            ErrorKind::PermissionDenied,
                            format!(
                                "{}:{} was not run: it needs the user's approval ({}) and {reason}.",
                                app.id(),
                                spec.name,
                                must_ask.unwrap_or("every call of it is asked")
                            ),
                        )
                        .with_detail(json!({"reason": "task_unattended", "task": task}));
                        Err(self.refuse(step, &decision, "denied", error).into())
                    }
                    Err(unanswered) => {
                        let error = match &self.config().invalid {
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
                        Err(self.refuse(step, &decision, "denied", error).into())
                    }
                }
            }
        }
    }
}

/// The arguments a question shows: redacted by the tool's schema, never shortened — the
/// person sees every character that would run.
pub(super) fn question_args(spec: &ToolCommon, args: &Map<String, Value>) -> Value {
    let schema = spec
        .parameters
        .as_ref()
        .map(aai_descriptor::Parameters::schema);
    aai_audit::redact(&Value::Object(args.clone()), schema.as_ref())
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
/// the commands that grant the tool. A [`Unanswered::Declined`] reason is a whole clause
/// ("the user chose Deny", "no answer within 120 s"), said once.
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
                "{app}:{tool} was declined and not run ({reason}). Do not ask again for this call or retry it: go on without it, or ask the user what to do instead."
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
        Unanswered::Later(_) | Unanswered::Queued(_) => AaiError::new(
            ErrorKind::PermissionDenied,
            "waiting for the user's approval",
        ),
    }
}
