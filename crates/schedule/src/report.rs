//! A run as history shows it.

use serde_json::{Value, json};

use super::tables::{RunRow, Store};

/// A run for history: when, how it ended, and each step with its result and audit ids.
pub fn describe_run(store: &Store, run: &RunRow) -> Value {
    let steps: Vec<Value> = store
        .steps(run.id)
        .unwrap_or_default()
        .into_iter()
        .map(|step| {
            let mut entry = step.entry.unwrap_or_else(|| json!({"step": step.step}));
            if let Some(object) = entry.as_object_mut() {
                object.insert("state".into(), json!(step.state));
                object.insert("audit_ids".into(), json!(step.audit));
            }
            entry
        })
        .collect();
    // Why it did not succeed: the run's own error, else its first step that failed.
    let error = run
        .outcome
        .as_ref()
        .and_then(|o| o.get("error").or_else(|| o.get("reason")))
        .or_else(|| {
            steps
                .iter()
                .find(|s| s["status"] == "failed" || s["status"] == "interrupted")
                .and_then(|s| s.get("error"))
        })
        .cloned();
    json!({
        "run_id": run.id,
        "task": run.task,
        "occurrence": run.occurrence,
        "scheduled": super::show_local(run.scheduled_ms),
        "kind": run.kind,
        "state": run.state,
        "attempt": run.attempt,
        "started": run.started_ms.map(super::show_local),
        "finished": run.finished_ms.map(super::show_local),
        "steps": steps,
        "error": error,
        "outcome": run.outcome.as_ref().filter(|o| o.get("steps").is_none()),
    })
}
