//! A scheduled task's policy layer over the calls it makes: only its granted tools, up to
//! its risk, and never a wait for a person unless the task says so. The scheduler makes one
//! for each run; the pipeline applies it to every call the run makes.

use aai_descriptor::Risk;
use aai_descriptor::{AaiError, ErrorKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What a task's call that needs a person does: fail the run, or wait in the dashboard's
/// queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnApproval {
    #[default]
    Fail,
    Queue,
}

/// The policy layer of a task's calls: it only tightens what the policy allows.
#[derive(Debug, Clone)]
pub struct TaskGrant {
    pub task: String,
    pub tools: Vec<String>,
    pub max_risk: Risk,
    pub on_approval: OnApproval,
}

impl TaskGrant {
    /// Whether `app:tool` is among the granted tools.
    pub fn covers(&self, app: &str, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|pattern| match pattern.split_once(':') {
                Some((a, "*")) => a == app,
                Some((a, t)) => a == app && t == tool,
                None => pattern == tool,
            })
    }

    /// The refusal of a call this task may not make: a risk above the task's limit, or a tool
    /// not granted when nobody is to be asked (`on_approval: fail`).
    pub fn refusal(&self, app: &str, tool: &str, risk: Risk) -> Option<AaiError> {
        let name = &self.task;
        if risk > self.max_risk {
            return Some(
                AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "{app}:{tool} was not run: its risk ({}) is above the scheduled task {name:?}'s max_risk_level ({}). Raise it with `aai-gateway schedule add` (the same name replaces the task) if the task should do this.",
                        crate::gate::risk_name(risk),
                        crate::gate::risk_name(self.max_risk)
                    ),
                )
                .with_detail(json!({"reason": "task_max_risk", "task": name})),
            );
        }
        if !self.covers(app, tool) && self.on_approval == OnApproval::Fail {
            return Some(
                AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "{app}:{tool} was not run: the scheduled task {name:?} runs unattended and its granted_tools do not include it. Add \"{app}:{tool}\" to the task's granted_tools (`aai-gateway schedule add` with the same name) if it should."
                    ),
                )
                .with_detail(json!({"reason": "task_not_granted", "task": name, "grant": format!("{app}:{tool}")})),
            );
        }
        None
    }
}
