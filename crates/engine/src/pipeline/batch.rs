//! `aai_batch`: several calls in one request. Every step is checked before any runs (the app,
//! the tool, its arguments, the policy); the steps that need the user's approval are put to
//! the user in one question; then each step runs through the same gate as a direct call (its
//! own policy decision and audit rows), so a batch reaches nothing a direct call could not.
//!
//! Steps run in order, or, with `parallel`, at once up to [`PARALLEL`] at a time — except that
//! a step waits for the steps its arguments come from, and steps that drive the screen, the
//! mouse or the keyboard take one desktop lock. A step uses an earlier step's result through a
//! JSON Pointer into the results (`{"$from": "/0/result/id"}`): a value, never text spliced
//! into a template.

use crate::workflow::references;
use std::collections::BTreeSet;
use std::sync::Arc;

use aai_descriptor::visible::visible;
use aai_descriptor::{AaiError, ErrorKind, Parameters, Risk};
use aai_policy::{Action, derive_risk};
use futures::future::join_all;
use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, Semaphore};

use super::args::{check_args, find_tool};
use super::outcome::Halt;
use super::{Caller, Gateway};
use crate::consent::{Answer, Asker, Question, Unanswered};
use crate::gate::risk_name;

/// The tool a batch is, as its question and the approval queue name it (the MCP surface
/// lists it under this name).
pub const TOOL: &str = "aai_batch";
/// The most steps one batch may hold.
pub const MAX_STEPS: usize = 100;
/// How many steps of a parallel batch run at once.
pub const PARALLEL: usize = 8;

/// One step as given.
#[derive(Debug, Clone)]
struct Step {
    app: String,
    tool: String,
    args: Value,
    /// The earlier steps whose results its arguments use.
    needs: BTreeSet<usize>,
}

/// What the gate will do with a step, found without running it or asking anyone.
enum Gatecheck {
    Runs,
    /// Needs the user's approval: the app's id and the question's arguments, as the step's
    /// own ask would show them (so the batch answer covers that exact call and nothing else).
    Asks {
        app: String,
        shown: String,
    },
    /// Its arguments come from earlier steps: it is checked, and asked about, when it runs.
    Later,
}

/// A `$from`, `$input` or `$run` pointer that finds nothing.
#[derive(Debug, thiserror::Error)]
#[error("\"{marker}\": {pointer:?} finds nothing in {what}")]
pub struct FillError {
    marker: String,
    pointer: String,
    what: String,
}

/// `value` with every `{"$from": pointer}` replaced by what the pointer finds in `results`.
pub fn resolve(value: &Value, results: &Value) -> Result<Value, FillError> {
    fill(value, "$from", results, "the earlier results")
}

/// `value` with every one-key object `{marker: pointer}` replaced by what the JSON Pointer
/// finds in `source` (named `what` in the error): whole values, never text.
pub fn fill(value: &Value, marker: &str, source: &Value, what: &str) -> Result<Value, FillError> {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key(marker) => {
            let pointer = map[marker].as_str().unwrap_or_default();
            source.pointer(pointer).cloned().ok_or_else(|| FillError {
                marker: marker.to_owned(),
                pointer: pointer.to_owned(),
                what: what.to_owned(),
            })
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| fill(v, marker, source, what).map(|v| (k.clone(), v)))
            .collect::<Result<Map<_, _>, _>>()
            .map(Value::Object),
        Value::Array(items) => items
            .iter()
            .map(|v| fill(v, marker, source, what))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// A step's report: `head` (its number, app and tool) with `rest`'s fields.
pub fn merge(mut head: Value, rest: Value) -> Value {
    if let (Some(head), Value::Object(rest)) = (head.as_object_mut(), rest) {
        head.extend(rest);
    }
    head
}

/// The report of a step that failed with `error`.
pub fn failure(error: &AaiError) -> Value {
    json!({"status": "failed", "error": {"type": error.kind.type_name(), "code": error.kind.code(), "message": error.message}})
}

/// Reads the batch's steps.
fn parse(args: &Value) -> Result<(Vec<Step>, bool), AaiError> {
    let invalid = |message: String| {
        AaiError::new(ErrorKind::InvalidParams, message).with_detail(json!({"field": "steps"}))
    };
    let steps = args.get("steps").and_then(Value::as_array).ok_or_else(|| {
        invalid("aai_batch needs \"steps\": [{\"app\", \"tool\", \"args\"}, …]".into())
    })?;
    if steps.is_empty() || steps.len() > MAX_STEPS {
        return Err(invalid(format!(
            "a batch holds 1 to {MAX_STEPS} steps; this one has {}",
            steps.len()
        )));
    }
    let parallel = args
        .get("parallel")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let steps = steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let text = |key: &str| {
                step.get(key)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(format!("step {index} needs \"{key}\"")))
            };
            let args = step.get("args").cloned().unwrap_or(Value::Null);
            let mut needs = BTreeSet::new();
            references(&args, index, &mut needs)
                .map_err(|problem| invalid(format!("step {index}: {problem}")))?;
            Ok(Step {
                app: text("app")?,
                tool: text("tool")?,
                args,
                needs,
            })
        })
        .collect::<Result<Vec<_>, AaiError>>()?;
    Ok((steps, parallel))
}

/// Answers *Allow once* to the question of the one call the user approved in the batch
/// question, and hands any other question (arguments that differ from what was shown) to the
/// client's own asker.
struct Approved<'a> {
    app: String,
    tool: String,
    args: String,
    fallback: Option<&'a dyn Asker>,
}

impl Asker for Approved<'_> {
    fn ask<'b>(
        &'b self,
        question: &'b Question,
    ) -> aai_executor::BoxFuture<'b, Result<Answer, Unanswered>> {
        Box::pin(async move {
            if question.app_id == self.app
                && question.tool == self.tool
                && question.args == self.args
            {
                return Ok(Answer::AllowOnce);
            }
            match self.fallback {
                Some(asker) => asker.ask(question).await,
                None => Err(Unanswered::CannotAsk(String::new())),
            }
        })
    }

    fn via(&self) -> &'static str {
        "batch approval"
    }
}

/// What every step of one batch shares: who runs it, whether the user approved it whole,
/// who can ask about a step, and the results so far.
#[derive(Clone, Copy)]
struct BatchRun<'a> {
    who: &'a Caller,
    approved: bool,
    asker: Option<&'a dyn Asker>,
    results: &'a Mutex<Vec<Value>>,
}

impl Gateway {
    /// Runs a batch for `who` (see the module's documentation); the answer lists every
    /// step's outcome by its number. It halts, before any step ran, on `INVALID_PARAMS` or
    /// `PERMISSION_DENIED` naming the step, on the user's denial of the batch, or to ask
    /// about the batch through the client.
    pub(super) async fn batch(
        &self,
        who: &Caller,
        args: &Value,
        asker: Option<&dyn Asker>,
    ) -> Result<Value, Halt> {
        let (steps, parallel) = parse(args)?;
        let mut checks = Vec::with_capacity(steps.len());
        for (index, step) in steps.iter().enumerate() {
            let check = self.gatecheck(who, step).await.map_err(|mut error| {
                error.message = format!(
                    "step {index} ({}:{}): {}; no step ran",
                    step.app, step.tool, error.message
                );
                error.detail = Some(json!({"step": index, "cause": error.detail}));
                error
            })?;
            checks.push(check);
        }
        let asked: Vec<(usize, &String)> = checks
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c {
                Gatecheck::Asks { shown, .. } => Some((i, shown)),
                _ => None,
            })
            .collect();
        let approved = if asked.is_empty() || asker.is_none() {
            false
        } else {
            self.ask_batch(who, &steps, &asked, asker).await?
        };
        let results = Arc::new(Mutex::new(vec![Value::Null; steps.len()]));
        let limit = Semaphore::new(if parallel { PARALLEL } else { 1 });
        let done: Vec<tokio::sync::watch::Sender<bool>> = (0..steps.len())
            .map(|_| tokio::sync::watch::channel(false).0)
            .collect();
        let runs = steps.iter().enumerate().map(|(index, step)| {
            let results = results.clone();
            let limit = &limit;
            let done = &done;
            let checks = &checks;
            async move {
                // Sequential: each step waits for the one before; parallel: for its sources.
                let waits: Vec<usize> = if parallel {
                    step.needs.iter().copied().collect()
                } else {
                    index.checked_sub(1).into_iter().collect()
                };
                for before in &waits {
                    let _ = done[*before].subscribe().wait_for(|d| *d).await;
                }
                let _permit = limit.acquire().await;
                let run = BatchRun {
                    who,
                    approved,
                    asker,
                    results: &results,
                };
                let outcome = self
                    .run_step(&run, index, step, &checks[index], &waits)
                    .await;
                results.lock().await[index] = outcome;
                done[index].send_replace(true);
            }
        });
        join_all(runs).await;
        let results = results.lock().await.clone();
        let count = |status: &str| results.iter().filter(|r| r["status"] == status).count();
        Ok(json!({
            "steps": results,
            "ok": count("ok"),
            "failed": count("failed"),
            "skipped": count("skipped"),
        }))
    }

    /// One step: skipped when a step it waited for (the one before, in order; the ones it
    /// takes values from) or a step it uses did not succeed, else run through the gate with
    /// its `$from` values filled in.
    async fn run_step(
        &self,
        run: &BatchRun<'_>,
        index: usize,
        step: &Step,
        check: &Gatecheck,
        waited: &[usize],
    ) -> Value {
        let BatchRun {
            who,
            approved,
            asker,
            results,
        } = *run;
        let head = json!({"step": index, "app": step.app, "tool": step.tool});
        let so_far = Value::Array(results.lock().await.clone());
        if let Some(source) = waited
            .iter()
            .chain(&step.needs)
            .find(|i| so_far[**i]["status"] != "ok")
        {
            return merge(
                head,
                json!({"status": "skipped", "reason": format!("step {source} did not succeed")}),
            );
        }
        let args = match resolve(&step.args, &so_far) {
            Ok(args) => args,
            Err(problem) => {
                return merge(
                    head,
                    json!({"status": "failed", "error": {"type": "INVALID_PARAMS", "message": problem.to_string()}}),
                );
            }
        };
        let drives = self
            .toolsets()
            .get(&step.app)
            .is_some_and(aai_toolset::Toolset::drives_desktop);
        let _desktop = if drives {
            Some(self.desktop.lock().await)
        } else {
            None
        };
        let approval = match check {
            Gatecheck::Asks { app, shown } if approved => Some(Approved {
                app: app.clone(),
                tool: step.tool.clone(),
                args: shown.clone(),
                fallback: asker,
            }),
            _ => None,
        };
        let asking: Option<&dyn Asker> = match &approval {
            Some(approved) => Some(approved),
            None => asker,
        };
        match self
            .call_tool(who, &step.app, &step.tool, &args, asking)
            .await
        {
            Ok(result) => merge(head, json!({"status": "ok", "result": result})),
            // Steps before it ran: a question put between calls cannot resume the batch here.
            Err(halt) => merge(head, failure(&halt.into_error())),
        }
    }

    /// What the gate will do with `step`, without running or asking.
    async fn gatecheck(&self, who: &Caller, step: &Step) -> Result<Gatecheck, AaiError> {
        let registry = self.snapshot_for(&step.app).await;
        let app = self.find(&registry, &step.app)?;
        let descriptor = self.descriptor_of(&app).await?;
        let spec = find_tool(&app, &descriptor, &step.tool)?;
        if !step.needs.is_empty() {
            if !step.args.is_object() {
                return Err(AaiError::new(
                    ErrorKind::InvalidParams,
                    "\"args\" must be an object",
                ));
            }
            return Ok(Gatecheck::Later);
        }
        let schema = spec.parameters.as_ref().map(Parameters::schema);
        let args = check_args(&app, spec, schema.as_ref(), &step.args)?;
        // A step the sandbox would refuse fails the batch before the user is asked.
        if let Some(error) = self.refusal(who, &app, spec, &args) {
            return Err(error);
        }
        let rated = self.rated(who, &app, spec, &args, true);
        let risk = rated.as_ref().map_or_else(
            || derive_risk(spec.risk, spec.read_only, spec.destructive),
            |r| r.risk,
        );
        let raised = rated.as_ref().filter(|r| r.each_time).map(|r| r.risk);
        let rated_why = rated.as_ref().and_then(|r| r.why.clone());
        let (mut action, profile) = self.policy(who, &app, spec, risk, raised);
        let must_ask = self.must_ask(who, &app, spec, &args).await;
        if must_ask.is_some() && action != Action::AlwaysBlock {
            action = Action::RequireApproval;
        }
        match action {
            Action::AlwaysBlock => Err(AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "blocked by the {profile} policy profile for {} risk",
                    risk_name(risk)
                ),
            )),
            Action::AutoApprove | Action::NotifyOnly => Ok(Gatecheck::Runs),
            Action::RequireApproval => {
                let critical = raised.is_some() || must_ask.is_some();
                if !critical {
                    let held =
                        self.gate
                            .held(&who.name, app.id(), &spec.name, who.session.as_deref())?;
                    let prefixed = !held.prefixes.is_empty()
                        && self.toolsets().prefix_covers(
                            app.id(),
                            &spec.name,
                            &args,
                            &held.prefixes,
                        );
                    if held.whole || prefixed {
                        return Ok(Gatecheck::Runs);
                    }
                }
                // Exactly the text the step's own question will carry: whole, with why it
                // must be asked (an install's summary of what the app would reach).
                let args = super::consent::question_args(spec, &args).to_string();
                // What the step's own question says of why, the loss it would cause included.
                let why: Vec<&str> = [must_ask.as_deref(), rated_why.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect();
                Ok(Gatecheck::Asks {
                    app: app.id().to_owned(),
                    shown: if why.is_empty() {
                        args
                    } else {
                        format!("{args} — {}", why.join(" "))
                    },
                })
            }
        }
    }

    /// Puts every step that needs approval to the user in one question: approve them all,
    /// deny them all (nothing runs), or answer step by step as each runs.
    async fn ask_batch(
        &self,
        who: &Caller,
        steps: &[Step],
        asked: &[(usize, &String)],
        asker: Option<&dyn Asker>,
    ) -> Result<bool, Halt> {
        let Some(asker) = asker else {
            return Ok(false);
        };
        let list: Vec<String> = asked
            .iter()
            // One line per step: names and arguments shown so that none can start a line.
            .map(|(i, shown)| {
                format!(
                    "{i}. {}:{} {}",
                    visible(&steps[*i].app),
                    visible(&steps[*i].tool),
                    visible(shown)
                )
            })
            .collect();
        let mut question = Question::new(
            &who.name,
            "aai-gateway",
            &format!("a batch of {} steps", steps.len()),
            TOOL,
            Risk::High,
            list.join("\n"),
        );
        question.batch = Some(asked.len());
        question.session = false;
        match asker.ask(&question).await {
            Ok(Answer::AllowOnce) => Ok(true),
            Ok(Answer::AlwaysTool) => Ok(false), // "step by step"
            Ok(_) | Err(Unanswered::Declined(_)) => Err(Halt::Refused(AaiError::new(
                ErrorKind::PermissionDenied,
                "the user denied the batch; no step ran. Do not retry it unchanged.",
            )
            .with_detail(json!({"reason": "declined", "steps": asked.iter().map(|(i, _)| i).collect::<Vec<_>>()})))),
            // Waiting in the daemon's queue: the batch returns pending and is resumed by id.
            Err(Unanswered::Queued(id)) => Err(Halt::Refused(AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "the batch is waiting for the user's approval (id {id}); no step ran. The user answers on the dashboard or with `aai-gateway approvals`; once they have, call aai_batch with {{\"approval_id\": \"{id}\"}} to run it — it runs once."
                ),
            )
            .with_detail(json!({"reason": "pending_approval", "approval_id": id})))),
            // No step ran: the client asks and calls again with the answer.
            Err(Unanswered::Later(input_required)) => Err(Halt::NeedsInput(input_required)),
            Err(other) => {
                tracing::info!(?other, "the batch question could not be put; each step asks for itself");
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_points_only_backwards_and_resolves_to_values() {
        let mut needs = BTreeSet::new();
        let args = json!({"id": {"$from": "/0/result/id"}, "list": [{"$from": "/1/result"}], "text": "/0/result"});
        references(&args, 2, &mut needs).expect("backwards");
        assert_eq!(needs, BTreeSet::from([0, 1]));
        for (pointer, problem) in [
            ("/2/result", "does not run before"),
            ("/x", "earlier step's number"),
            ("0/result", "earlier step's number"),
        ] {
            let error =
                references(&json!({"$from": pointer}), 2, &mut BTreeSet::new()).expect_err(pointer);
            assert!(error.to_string().contains(problem), "{pointer}: {error}");
        }
        let results = json!([{"result": {"id": "a\"; rm -rf ~"}}, {"result": [1, 2]}]);
        let resolved = resolve(&args, &results).expect("resolves");
        // The value arrives as data, whatever it holds; text that looks like a pointer stays text.
        assert_eq!(
            resolved,
            json!({"id": "a\"; rm -rf ~", "list": [[1, 2]], "text": "/0/result"})
        );
        assert!(resolve(&json!({"$from": "/0/result/missing"}), &results).is_err());
    }

    #[test]
    fn batches_are_read_with_clear_errors() {
        for (args, problem) in [
            (json!({}), "needs \"steps\""),
            (json!({"steps": []}), "1 to 100"),
            (json!({"steps": [{"tool": "t"}]}), "step 0 needs \"app\""),
            (
                json!({"steps": [{"app": "a", "tool": "t", "args": {"x": {"$from": "/0"}}}]}),
                "step 0",
            ),
        ] {
            let error = parse(&args).expect_err(problem);
            assert!(
                error.message.contains(problem),
                "{problem}: {}",
                error.message
            );
        }
        let (steps, parallel) = parse(&json!({"parallel": true, "steps": [
            {"app": "a", "tool": "t"}, {"app": "a", "tool": "u", "args": {"v": {"$from": "/0/result"}}}]}))
        .expect("valid");
        assert!(parallel);
        assert_eq!(steps[1].needs, BTreeSet::from([0]));
    }
}
