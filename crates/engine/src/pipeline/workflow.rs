//! Running a workflow: its inputs checked against its schema, then each step through the
//! gate in order, with checkpoints for a scheduled run to resume from.

use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use serde_json::{Value, json};

use super::batch::{failure, fill, merge};
use super::outcome::{Halt, WorkflowRun};
use super::{Caller, Gateway};
use crate::consent::Asker;
use crate::workflow::{OnError, Prior, WorkflowStep, find};

/// `value` with every `{"$input": pointer}` replaced by what it finds in `inputs`.
fn with_inputs(value: &Value, inputs: &Value) -> Result<Value, super::batch::FillError> {
    fill(value, "$input", inputs, "the inputs")
}

impl Gateway {
    /// Runs workflow `name` with `inputs` for `who`: the inputs are checked against the
    /// workflow's schema, then each step runs through the gate in order. It halts on an
    /// unknown or invalid workflow, or inputs its schema refuses; a failed step is reported in
    /// the result.
    ///
    /// A scheduled run (`run`) brings what `{"$run": …}` pointers read (task, occurrence, run
    /// id), and every step is recorded in its checkpoints as it starts and ends; steps an
    /// earlier attempt finished are not run again.
    pub(super) async fn run_workflow(
        &self,
        who: &Caller,
        name: &str,
        inputs: &Value,
        asker: Option<&dyn Asker>,
        run: Option<WorkflowRun<'_>>,
    ) -> Result<Value, Halt> {
        let context = run.map_or(&Value::Null, |run| run.context);
        let checkpoints = run.map(|run| run.checkpoints);
        let workflow = find(&self.home, name)?;
        let inputs = if inputs.is_null() {
            json!({})
        } else {
            inputs.clone()
        };
        if let Ok(validator) = jsonschema::validator_for(&workflow.inputs) {
            let problems: Vec<String> = validator
                .iter_errors(&inputs)
                .map(|e| format!("{} {e}", e.instance_path()))
                .collect();
            if !problems.is_empty() {
                return Err(Halt::Refused(
                    AaiError::new(
                        ErrorKind::InvalidParams,
                        format!(
                            "workflow {name}: the inputs do not fit its schema: {}",
                            problems.join("; ")
                        ),
                    )
                    .with_detail(json!({"problems": problems})),
                ));
            }
        }
        let mut results: Vec<Value> = Vec::with_capacity(workflow.steps.len());
        let mut stopped = false;
        let record = |index: usize, entry: &Value, audit: &[String]| {
            if let Some(checkpoints) = checkpoints
                && let Err(problem) = checkpoints.finished(index, entry, audit)
            {
                tracing::warn!(step = index, "a finished step was not recorded: {problem}");
            }
        };
        for (index, step) in workflow.steps.iter().enumerate() {
            let head = json!({"step": index, "app": step.app, "tool": step.tool});
            match checkpoints.map_or(Prior::None, |c| c.prior(index)) {
                Prior::Finished(entry) => {
                    if entry["status"] != "ok" && entry["status"] != "skipped" {
                        stopped = step.on_error == OnError::Stop;
                    }
                    results.push(entry);
                    continue;
                }
                Prior::InFlight
                    if !(step.idempotent || self.read_only(&step.app, &step.tool).await) =>
                {
                    let entry = merge(
                        head,
                        json!({"status": "interrupted", "error": {"type": "INTERRUPTED", "message": format!(
                            "step {index} ({}:{}) was running when the gateway stopped (a crash or a kill); it is not marked idempotent, so it was not run again. Check whether it took effect.",
                            step.app, step.tool
                        )}}),
                    );
                    record(index, &entry, &[]);
                    stopped = step.on_error == OnError::Stop;
                    results.push(entry);
                    continue;
                }
                Prior::InFlight | Prior::None => {}
            }
            if stopped {
                let entry = merge(
                    head,
                    json!({"status": "skipped", "reason": "an earlier step failed"}),
                );
                record(index, &entry, &[]);
                results.push(entry);
                continue;
            }
            let so_far = Value::Array(results.clone());
            if let Some(condition) = &step.condition {
                let found = so_far.pointer(&condition.from);
                let holds = match (&condition.equals, condition.exists) {
                    (Some(expected), _) => found == Some(expected),
                    (None, Some(exists)) => found.is_some() == exists,
                    (None, None) => found.is_some_and(|v| !v.is_null() && v != &json!(false)),
                };
                if !holds {
                    let entry = merge(
                        head,
                        json!({"status": "skipped", "reason": "its \"if\" did not hold"}),
                    );
                    record(index, &entry, &[]);
                    results.push(entry);
                    continue;
                }
            }
            let args = with_inputs(&step.args, &inputs)
                .and_then(|args| {
                    if context.is_null() {
                        Ok(args)
                    } else {
                        fill(&args, "$run", context, "the run")
                    }
                })
                .and_then(|args| crate::pipeline::batch::resolve(&args, &so_far));
            if let Some(calls) = &who.calls {
                calls
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clear();
            }
            let outcome = match args {
                Err(problem) => Err(AaiError::new(ErrorKind::InvalidParams, problem.to_string())),
                Ok(args) => match checkpoints.map_or(Ok(()), |c| c.started(index)) {
                    // Earlier steps ran: a question put between calls cannot resume it here.
                    Ok(()) => self
                        .attempt(who, step, &args, asker)
                        .await
                        .map_err(Halt::into_error),
                    Err(problem) => {
                        // Unrecorded, the step could run twice after a crash: it does not run.
                        Err(AaiError::new(
                            ErrorKind::AutomationFailed,
                            format!("the step was not run: {problem}"),
                        ))
                    }
                },
            };
            let audit: Vec<String> = who
                .calls
                .as_ref()
                .map(|calls| {
                    std::mem::take(
                        &mut *calls
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    )
                })
                .unwrap_or_default();
            let entry = match outcome {
                Ok(result) => merge(head, json!({"status": "ok", "result": result})),
                Err(error) => {
                    stopped = step.on_error == OnError::Stop;
                    merge(head, failure(&error))
                }
            };
            record(index, &entry, &audit);
            results.push(entry);
        }
        let failed = results
            .iter()
            .filter(|r| r["status"] == "failed" || r["status"] == "interrupted")
            .count();
        Ok(json!({"workflow": name, "steps": results, "failed": failed}))
    }

    /// Whether `app:tool` is read-only (safe to run again).
    async fn read_only(&self, app: &str, tool: &str) -> bool {
        let registry = self.snapshot().await;
        let Ok(app) = crate::pipeline::find_app(&registry, app) else {
            return false;
        };
        let Ok(descriptor) = self.descriptor_of(app).await else {
            return false;
        };
        descriptor
            .tools(app.platform)
            .and_then(|tools| tools.into_iter().find(|t| t.name == tool))
            .is_some_and(|t| t.read_only == Some(true))
    }

    /// One step with its retries and timeout. A refusal (policy, the user) is not retried.
    async fn attempt(
        &self,
        who: &Caller,
        step: &WorkflowStep,
        args: &Value,
        asker: Option<&dyn Asker>,
    ) -> Result<Value, Halt> {
        let mut tries = 0;
        loop {
            let call = self.call_tool(who, &step.app, &step.tool, args, asker);
            let outcome = match step.timeout_ms {
                Some(ms) => tokio::time::timeout(Duration::from_millis(ms), call)
                    .await
                    .unwrap_or_else(|_| {
                        Err(Halt::Refused(AaiError::new(
                            ErrorKind::Timeout,
                            format!("the step did not finish within {ms} ms (its \"timeout_ms\")"),
                        )))
                    }),
                None => call.await,
            };
            match outcome {
                Err(Halt::Refused(error))
                    if tries < step.retry
                        && !matches!(
                            error.kind,
                            ErrorKind::PermissionDenied | ErrorKind::InvalidParams
                        ) =>
                {
                    tries += 1;
                    tracing::info!(tool = %step.tool, tries, "retrying a workflow step: {}", error.message);
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_fill_in_as_values() {
        let inputs = json!({"to": "bob; rm -rf ~", "n": 3});
        let args =
            json!({"to": {"$input": "/to"}, "list": [{"$input": "/n"}], "literal": "$input"});
        assert_eq!(
            with_inputs(&args, &inputs).expect("fills"),
            json!({"to": "bob; rm -rf ~", "list": [3], "literal": "$input"})
        );
        assert!(with_inputs(&json!({"$input": "/missing"}), &inputs).is_err());
    }
}
