//! The gateway's face for calls: a [`Request`] goes in through [`Pipeline::call`], an
//! [`Outcome`] comes out. A question the person is being asked through the client is an
//! outcome of its own ([`Outcome::NeedsInput`]), never an error: inside the call path it
//! travels as [`Halt::NeedsInput`], which no step can mistake for a failure to report.

use aai_descriptor::{AaiError, ErrorKind};
use aai_executor::BoxFuture;
use serde_json::Value;

use super::{Caller, Gateway};
use crate::consent::Asker;

/// What a call through the gate came to.
#[derive(Debug)]
pub enum Outcome {
    /// It ran: its result.
    Done(Value),
    /// The person is being asked through the client (MCP 2026-07-28): the
    /// `InputRequiredResult` to answer with. The client asks and calls again with the answer;
    /// nothing ran.
    NeedsInput(Value),
    /// It did not run (the gate refused it, the person declined, the arguments are wrong) or
    /// it ran and failed: the AAI error for the agent. Its audit row is written.
    Refused(AaiError),
}

impl Outcome {
    /// The outcome for a caller that cannot continue a question between calls (the CLI, a
    /// test, a benchmark): a question still open is a refusal saying so.
    ///
    /// # Errors
    /// The refusal, or `PERMISSION_DENIED` for an open question.
    pub fn into_result(self) -> Result<Value, AaiError> {
        match self {
            Self::Done(value) => Ok(value),
            Self::Refused(error) => Err(error),
            Self::NeedsInput(_) => Err(open_question()),
        }
    }
}

impl From<Result<Value, Halt>> for Outcome {
    fn from(result: Result<Value, Halt>) -> Self {
        match result {
            Ok(value) => Self::Done(value),
            Err(Halt::Refused(error)) => Self::Refused(error),
            Err(Halt::NeedsInput(input_required)) => Self::NeedsInput(input_required),
        }
    }
}

impl From<Result<Value, AaiError>> for Outcome {
    fn from(result: Result<Value, AaiError>) -> Self {
        match result {
            Ok(value) => Self::Done(value),
            Err(error) => Self::Refused(error),
        }
    }
}

/// Why the call path stopped before a result: refused (or failed), or waiting for the
/// person's answer through the client. `?` turns an [`AaiError`] into a refusal.
#[derive(Debug)]
pub(crate) enum Halt {
    Refused(AaiError),
    NeedsInput(Value),
}

impl From<AaiError> for Halt {
    fn from(error: AaiError) -> Self {
        Self::Refused(error)
    }
}

impl Halt {
    /// The refusal, for a place that reports every outcome in a result of its own (a batch's
    /// or a workflow's step): a question still open there is a step that cannot be asked.
    pub(crate) fn into_error(self) -> AaiError {
        match self {
            Self::Refused(error) => error,
            Self::NeedsInput(_) => open_question(),
        }
    }
}

/// PERMISSION_DENIED for a question that can only be answered by calling again, where calling
/// again is not how the call goes on.
fn open_question() -> AaiError {
    AaiError::new(
        ErrorKind::PermissionDenied,
        "this call needs the user's approval, and this client asks only by being called again, which cannot resume it here. Ask the user to grant the tool (`aai-gateway consent grant APP TOOL`), or make the call on its own with aai_exec to be asked.",
    )
    .with_detail(serde_json::json!({"reason": "approval_between_calls"}))
}

/// What is called.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// One tool of one app.
    Tool { app: &'a str, tool: &'a str },
    /// `aai_batch`: its arguments are the steps.
    Batch,
    /// A saved workflow: its arguments are the inputs.
    Workflow {
        name: &'a str,
        /// A scheduled run's context and checkpoints (see
        /// [`crate::workflow::Checkpoints`]); `None` for a call.
        run: Option<WorkflowRun<'a>>,
    },
}

/// What a scheduled run adds to a workflow: what `{"$run": …}` pointers read, and where every
/// step is recorded as it starts and ends.
#[derive(Clone, Copy)]
pub struct WorkflowRun<'a> {
    pub context: &'a Value,
    pub checkpoints: &'a dyn crate::workflow::Checkpoints,
}

/// One call to put through the gate.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub who: &'a Caller,
    pub target: Target<'a>,
    pub args: &'a Value,
    /// Who asks the person when the policy says so; `None`: such a call is refused with the
    /// command that grants it.
    pub asker: Option<&'a dyn Asker>,
}

impl<'a> Request<'a> {
    /// A call of `app`'s `tool`.
    pub fn tool(who: &'a Caller, app: &'a str, tool: &'a str, args: &'a Value) -> Self {
        Self {
            who,
            target: Target::Tool { app, tool },
            args,
            asker: None,
        }
    }

    /// A batch.
    pub fn batch(who: &'a Caller, args: &'a Value) -> Self {
        Self {
            who,
            target: Target::Batch,
            args,
            asker: None,
        }
    }

    /// Workflow `name` with `inputs`.
    pub fn workflow(who: &'a Caller, name: &'a str, inputs: &'a Value) -> Self {
        Self {
            who,
            target: Target::Workflow { name, run: None },
            args: inputs,
            asker: None,
        }
    }

    /// The same request, asking through `asker`.
    #[must_use]
    pub fn asking(self, asker: Option<&'a dyn Asker>) -> Self {
        Self { asker, ..self }
    }
}

/// The gateway as its callers see it: a request in, an outcome out, and a dry run.
pub trait Pipeline: Send + Sync {
    /// Puts `request` through the gate: the arguments checked, the policy, consent, the run,
    /// the audit rows before and after.
    fn call<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Outcome>;

    /// What a tool call would run, without running it or asking anyone.
    ///
    /// # Errors
    /// `APP_NOT_FOUND`, `TOOL_NOT_FOUND`, `INVALID_PARAMS`, `SCRIPT_PARSE_ERROR`,
    /// `AUTOMATION_NOT_SUPPORTED`.
    fn plan<'a>(
        &'a self,
        app: &'a str,
        tool: &'a str,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<Value, AaiError>>;
}

impl Pipeline for Gateway {
    fn call<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let Request {
                who,
                target,
                args,
                asker,
            } = request;
            let result = match target {
                Target::Tool { app, tool } => self.call_tool(who, app, tool, args, asker).await,
                Target::Batch => self.batch(who, args, asker).await,
                Target::Workflow { name, run } => {
                    self.run_workflow(who, name, args, asker, run).await
                }
            };
            Outcome::from(result)
        })
    }

    fn plan<'a>(
        &'a self,
        app: &'a str,
        tool: &'a str,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(self.plan_call(app, tool, args))
    }
}
