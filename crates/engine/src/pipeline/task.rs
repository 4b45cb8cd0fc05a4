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

/// The scheduler as the gateway's surfaces reach it (the MCP handler, the daemon, the
/// dashboard, the command line), plugged in by the binary ([`super::Gateway::plug_tasks`]):
/// the tokens of its agent runs, and what the dashboard shows and changes.
pub trait Tasks: Send + Sync {
    /// The app id of the scheduler's tools, under which the dashboard's changes are audited.
    fn app(&self) -> &'static str;

    /// The grant and call ids of the agent run whose token this is, while the run lasts.
    fn token(&self, token: &str) -> Option<(std::sync::Arc<TaskGrant>, super::CallIds)>;

    /// The tasks and their latest runs, as the dashboard shows them (or why they cannot be
    /// read).
    fn report(&self) -> serde_json::Value;

    /// Runs one of the scheduler's tools for the person at the dashboard or the command line:
    /// their own change, not put to them again.
    ///
    /// # Errors
    /// The tool's error.
    fn change<'a>(
        &'a self,
        gateway: &'a super::Gateway,
        tool: &'a str,
        args: &'a serde_json::Map<String, serde_json::Value>,
    ) -> aai_executor::BoxFuture<'a, Result<serde_json::Value, AaiError>>;

    /// The daemon serves MCP at `url`: agent runs are pointed there.
    fn serve_at(&self, url: &str);
}

/// Who asks for a task's call that needs a person: nobody (the run fails), or the
/// dashboard's queue when the task says so.
pub struct TaskAsker<'a> {
    pub gateway: &'a super::Gateway,
    pub task: &'a str,
    pub on_approval: OnApproval,
}

impl crate::consent::Asker for TaskAsker<'_> {
    fn ask<'b>(
        &'b self,
        question: &'b crate::consent::Question,
    ) -> aai_executor::BoxFuture<'b, Result<crate::consent::Answer, crate::consent::Unanswered>>
    {
        Box::pin(async move {
            if self.on_approval == OnApproval::Fail {
                return Err(crate::consent::Unanswered::CannotAsk(format!(
                    "the scheduled task {:?} runs unattended; set its on_approval to \"queue\" to wait for the user on the dashboard",
                    self.task
                )));
            }
            let args = serde_json::Value::String(question.args.clone());
            let queue = crate::consent::queue::QueueAsker {
                approvals: self.gateway.approvals(),
                call: crate::consent::queue::Pending {
                    caller: &question.caller,
                    app: &question.app_id,
                    tool: &question.tool,
                    args: &args,
                },
                resume: None,
                claimed: None,
                wait: std::time::Duration::from_secs(24 * 3600),
                stop: self.gateway.stop().calls(),
            };
            crate::consent::Asker::ask(&queue, question).await
        })
    }

    fn via(&self) -> &'static str {
        "approval queue"
    }
}
