//! Workflow files: `AAI_HOME/workflows/<name>.json`, a named list of steps with typed inputs
//! (`schemas/workflow.schema.json`). Each is offered to agents as the tool `workflow_<name>`
//! and runs from the CLI (`aai-gateway workflow run|validate|list`). Every step goes through
//! the gate like a direct call. Values come in as data only: `{"$input": "/pointer"}` into
//! the inputs and `{"$from": "/<step>/result/…"}` into earlier steps' results.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aai_descriptor::{AaiError, ErrorKind};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The folder under `AAI_HOME`.
pub const DIR: &str = "workflows";

/// A workflow file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workflow {
    /// What it does, for the agent choosing it.
    pub description: String,
    /// The JSON Schema of its inputs (an object schema); they are checked before any step.
    #[serde(default = "empty_inputs")]
    pub inputs: Value,
    /// Run in order.
    pub steps: Vec<WorkflowStep>,
}

fn empty_inputs() -> Value {
    json!({"type": "object"})
}

/// One step: a tool call, with what to do when it fails.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowStep {
    pub app: String,
    pub tool: String,
    /// The tool's arguments; `{"$input": "/x"}` and `{"$from": "/0/result/id"}` stand for
    /// values.
    #[serde(default)]
    pub args: Value,
    /// Further attempts after a failure (0–5).
    #[serde(default)]
    pub retry: u8,
    /// Gives up on the step after this many milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Runs only when this holds; skipped otherwise.
    #[serde(default, rename = "if")]
    pub condition: Option<Condition>,
    /// On failure: stop the workflow (the default) or go on with the next step.
    #[serde(default)]
    pub on_error: OnError,
    /// Whether running the step twice does no harm: a scheduled run interrupted by a crash
    /// while this step ran runs it again. Otherwise (and unless the tool is read-only) the
    /// step is reported as interrupted, not repeated.
    #[serde(default)]
    pub idempotent: bool,
}

/// What an earlier attempt of a run left of one step.
#[derive(Debug, Clone, PartialEq)]
pub enum Prior {
    /// Nothing: the step has not started.
    None,
    /// It ended with this entry.
    Finished(Value),
    /// It started and never ended: the process running it died.
    InFlight,
}

/// A checkpoint that could not be kept (the store behind it failed).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CheckpointError(#[source] Box<dyn std::error::Error + Send + Sync>);

impl CheckpointError {
    /// The error of the store that failed.
    pub fn of(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(error))
    }
}

/// Where a run keeps its steps as they start and end (the scheduler's checkpoints in
/// `data.db`), so a run cut short resumes at its first unfinished step.
pub trait Checkpoints: Send + Sync {
    fn prior(&self, index: usize) -> Prior;
    /// Durable before the step runs.
    ///
    /// # Errors
    /// It could not be recorded: the step must not run.
    fn started(&self, index: usize) -> Result<(), CheckpointError>;
    /// # Errors
    /// It could not be recorded.
    fn finished(
        &self,
        index: usize,
        entry: &Value,
        audit: &[String],
    ) -> Result<(), CheckpointError>;
}

/// A test of an earlier result: `{"$from": "/0/result/state", "equals": "open"}`, or
/// `{"$from": …, "exists": true}`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    #[serde(rename = "$from")]
    pub from: String,
    #[serde(default)]
    pub equals: Option<Value>,
    #[serde(default)]
    pub exists: Option<bool>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    #[default]
    Stop,
    Continue,
}

impl Workflow {
    /// The JSON Schema of a workflow file (published as `schemas/workflow.schema.json`).
    pub fn schema() -> Value {
        let mut schema = serde_json::to_value(schemars::schema_for!(Workflow)).unwrap_or_default();
        if let Some(object) = schema.as_object_mut() {
            object.insert(
                "$id".into(),
                json!("https://aai-gateway.dev/schemas/workflow.schema.json"),
            );
        }
        schema
    }

    /// Reads and checks the workflow at `path`: its shape, its inputs schema, and every
    /// `$input`/`$from` (from only points back, at a step that exists).
    ///
    /// # Errors
    /// `<file>: <problem>`, naming the step.
    pub fn load(path: &Path) -> Result<Self, WorkflowError> {
        let at = || path.to_path_buf();
        let bytes =
            std::fs::read(path).map_err(|source| WorkflowError::Read { path: at(), source })?;
        let workflow: Self = serde_json::from_slice(&bytes)
            .map_err(|source| WorkflowError::Parse { path: at(), source })?;
        jsonschema::validator_for(&workflow.inputs).map_err(|e| WorkflowError::Inputs {
            path: at(),
            reason: e.to_string(),
        })?;
        if workflow.steps.is_empty() {
            return Err(WorkflowError::NoSteps { path: at() });
        }
        for (index, step) in workflow.steps.iter().enumerate() {
            if step.retry > 5 {
                return Err(WorkflowError::Retry { path: at(), index });
            }
            let mut needs = std::collections::BTreeSet::new();
            references(&step.args, index, &mut needs).map_err(|source| {
                WorkflowError::Reference {
                    path: at(),
                    index,
                    source,
                }
            })?;
            if let Some(condition) = &step.condition {
                references(&json!({"$from": condition.from}), index, &mut needs).map_err(
                    |source| WorkflowError::Condition {
                        path: at(),
                        index,
                        source,
                    },
                )?;
            }
        }
        Ok(workflow)
    }
}

/// A workflow's name from its file name; only letters, digits, `-` and `_`.
pub fn name_of(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    (path.extension().is_some_and(|e| e == "json")
        && !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    .then(|| stem.to_owned())
}

/// A workflow file as found: its name, its file, and the workflow or its problem.
#[derive(Debug, Clone)]
pub struct Found {
    pub name: String,
    pub path: PathBuf,
    pub loaded: Result<Arc<Workflow>, Arc<WorkflowError>>,
    /// Size and modification time: a snapshot differs when a file changed.
    stamp: (u64, Option<std::time::SystemTime>),
}

impl PartialEq for Found {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.stamp == other.stamp
    }
}

/// The workflows under `home`, by name, each loaded or with its problem.
pub fn scan(home: &Path) -> Vec<Found> {
    let mut found: Vec<Found> = std::fs::read_dir(home.join(DIR))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| {
                    let path = entry.path();
                    let name = name_of(&path)?;
                    let meta = entry.metadata().ok()?;
                    Some(Found {
                        loaded: Workflow::load(&path).map(Arc::new).map_err(Arc::new),
                        stamp: (meta.len(), meta.modified().ok()),
                        name,
                        path,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// The workflow `name` under `home`.
///
/// # Errors
/// `TOOL_NOT_FOUND` when there is none, `INVALID_PARAMS` when it does not load.
pub fn find(home: &Path, name: &str) -> Result<Workflow, AaiError> {
    let path = home.join(DIR).join(format!("{name}.json"));
    if name_of(&path).as_deref() != Some(name) || !path.exists() {
        return Err(AaiError::new(
            ErrorKind::ToolNotFound,
            format!(
                "no workflow {name:?} (files are {}/<name>.json)",
                home.join(DIR).display()
            ),
        ));
    }
    Workflow::load(&path)
        .map_err(|problem| AaiError::new(ErrorKind::InvalidParams, problem.to_string()))
}

/// The `$from` pointers in `value` (a batch's or a workflow's step), checked: each must point into an earlier step's result.
pub fn references(
    value: &Value,
    index: usize,
    needs: &mut BTreeSet<usize>,
) -> Result<(), ReferenceError> {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key("$from") => {
            let pointer = map["$from"].as_str().ok_or(ReferenceError::NotAPointer)?;
            let first = pointer
                .strip_prefix('/')
                .and_then(|rest| rest.split('/').next())
                .and_then(|step| step.parse::<usize>().ok())
                .ok_or_else(|| ReferenceError::NoStep(pointer.to_owned()))?;
            if first >= index {
                return Err(ReferenceError::Forward {
                    pointer: pointer.to_owned(),
                    step: first,
                    index,
                });
            }
            needs.insert(first);
            Ok(())
        }
        Value::Object(map) => map.values().try_for_each(|v| references(v, index, needs)),
        Value::Array(items) => items.iter().try_for_each(|v| references(v, index, needs)),
        _ => Ok(()),
    }
}

/// A `$from` that does not point back at an earlier step.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("\"$from\" must be a JSON Pointer string like \"/0/result/id\"")]
    NotAPointer,
    #[error("\"$from\": {0:?} must start with an earlier step's number, like \"/0/result\"")]
    NoStep(String),
    #[error("\"$from\": {pointer:?} points at step {step}, which does not run before step {index}")]
    Forward {
        pointer: String,
        step: usize,
        index: usize,
    },
}

/// Why a workflow file is not one, naming the file and the step.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: \"inputs\" is not a valid JSON Schema: {reason}", path.display())]
    Inputs { path: PathBuf, reason: String },
    #[error("{}: a workflow needs at least one step", path.display())]
    NoSteps { path: PathBuf },
    #[error("{}: step {index}: \"retry\" is at most 5", path.display())]
    Retry { path: PathBuf, index: usize },
    #[error("{}: step {index}: {source}", path.display())]
    Reference {
        path: PathBuf,
        index: usize,
        source: ReferenceError,
    },
    #[error("{}: step {index}: \"if\": {source}", path.display())]
    Condition {
        path: PathBuf,
        index: usize,
        source: ReferenceError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn workflows_are_checked_when_loaded() {
        let dir = tempfile::tempdir().expect("dir");
        let good = write(
            dir.path(),
            "good",
            r#"{"description": "d", "inputs": {"type": "object", "properties": {"to": {"type": "string"}}},
            "steps": [{"app": "a", "tool": "t", "args": {"to": {"$input": "/to"}}},
                      {"app": "a", "tool": "u", "args": {"id": {"$from": "/0/result/id"}}, "if": {"$from": "/0/status", "equals": "ok"}, "on_error": "continue", "retry": 2}]}"#,
        );
        let workflow = Workflow::load(&good).expect("loads");
        assert_eq!(workflow.steps[1].on_error, OnError::Continue);
        for (text, problem) in [
            (r#"{"description": "d", "steps": []}"#, "at least one step"),
            (
                r#"{"description": "d", "steps": [{"app": "a", "tool": "t", "args": {"x": {"$from": "/0/result"}}}]}"#,
                "step 0",
            ),
            (
                r#"{"description": "d", "steps": [{"app": "a", "tool": "t", "if": {"$from": "/1/status", "equals": 1}}]}"#,
                "\"if\"",
            ),
            (
                r#"{"description": "d", "steps": [{"app": "a", "tool": "t", "retry": 9}]}"#,
                "at most 5",
            ),
            (
                r#"{"description": "d", "inputs": {"type": 7}, "steps": [{"app": "a", "tool": "t"}]}"#,
                "not a valid JSON Schema",
            ),
            (
                r#"{"description": "d", "steps": [{"app": "a", "tool": "t", "shell": "rm"}]}"#,
                "unknown field",
            ),
        ] {
            let path = write(dir.path(), "bad", text);
            let error = Workflow::load(&path).expect_err(problem);
            assert!(error.to_string().contains(problem), "{problem}: {error}");
        }
        assert_eq!(
            name_of(Path::new("/x/send-report_2.json")).as_deref(),
            Some("send-report_2")
        );
        for bad in ["/x/a b.json", "/x/a.txt", "/x/.json", "/x/a.b.json"] {
            assert_eq!(name_of(Path::new(bad)), None, "{bad}");
        }
        // A name never leaves the workflows folder.
        std::fs::create_dir_all(dir.path().join(DIR)).expect("dir");
        write(
            dir.path(),
            "outside",
            r#"{"description": "d", "steps": [{"app": "a", "tool": "t"}]}"#,
        );
        for name in ["../outside", "..", "a/b", ""] {
            assert_eq!(
                find(dir.path(), name).expect_err(name).kind,
                ErrorKind::ToolNotFound,
                "{name}"
            );
        }
    }
}
