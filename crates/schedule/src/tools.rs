//! `local.schedule`: the scheduler's tools for agents (each risk high, through the gate like
//! every call), and what `aai-gateway schedule` prints, from the same functions.

use std::sync::{Arc, LazyLock};

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use aai_toolset::{Call, Toolset};
use serde_json::{Map, Value, json};

use super::tables::Store;
use super::{Run, Task, now_ms};
use aai_engine::pipeline::Gateway;

use super::hub::Hub;
pub use super::report::describe_run;

/// The toolset's appId.
pub const APP_ID: &str = "local.schedule";

/// The toolset's descriptor.
pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> =
    LazyLock::new(|| aai_toolset::shipped(APP_ID, include_str!("../toolsets/schedule.aai.json")));

fn store_error(problem: super::tables::TablesError) -> AaiError {
    problem.into()
}

fn name_of(args: &Map<String, Value>) -> Result<&str, AaiError> {
    args.get("name").and_then(Value::as_str).ok_or_else(|| {
        AaiError::new(
            ErrorKind::InvalidParams,
            "\"name\": the task's name is required",
        )
    })
}

fn task_arg(args: &Map<String, Value>) -> Result<Task, AaiError> {
    serde_json::from_value(args.get("task").cloned().unwrap_or_default()).map_err(|e| {
        AaiError::new(ErrorKind::InvalidParams, format!("\"task\": {e}"))
            .with_detail(json!({"field": "task"}))
    })
}

fn unknown(name: &str) -> AaiError {
    AaiError::new(
        ErrorKind::InvalidParams,
        format!("no scheduled task {name:?} (schedule_list shows them)"),
    )
    .with_detail(json!({"field": "name"}))
}

/// The scheduler's tools over one gateway and its hub.
#[derive(Clone, Copy)]
pub struct Scheduling<'a> {
    pub gateway: &'a Gateway,
    pub hub: &'a Hub,
}

impl Scheduling<'_> {
    /// Checks `task` against what this gateway has: its cron and zone, and the workflow or
    /// agent it runs.
    ///
    /// # Errors
    /// INVALID_PARAMS naming the problem.
    pub fn check_task(&self, task: &Task) -> Result<super::Timing, AaiError> {
        let invalid = |problem: String| AaiError::new(ErrorKind::InvalidParams, problem);
        let timing = task
            .compile()
            .map_err(|problem| invalid(problem.to_string()))?;
        match &task.run {
            Run::Workflow { name, .. } => {
                aai_engine::workflow::find(self.gateway.home(), name)
                    .map_err(|error| invalid(format!("\"run\": {}", error.message)))?;
            }
            Run::Agent { name, instruction } => {
                let config = self.gateway.config();
                if !config.scheduler.agents.contains_key(name) {
                    let known: Vec<&String> = config.scheduler.agents.keys().collect();
                    return Err(invalid(format!(
                        "\"run\": no agent {name:?} in config.json's scheduler.agents ({}); add one such as {{\"claude\": {{\"command\": [\"claude\", \"-p\", \"{{instruction}}\", \"--mcp-config\", \"{{mcp_config}}\"]}}}}",
                        if known.is_empty() {
                            "there are none".to_owned()
                        } else {
                            format!("there: {known:?}")
                        }
                    )));
                }
                if instruction.trim().is_empty() {
                    return Err(invalid("\"run\": the agent's instruction is empty".into()));
                }
            }
        }
        Ok(timing)
    }

    /// What can be checked of a `local.schedule` call before the user is asked about it: the
    /// task it adds, or that the task it names exists.
    ///
    /// # Errors
    /// INVALID_PARAMS naming the problem.
    pub fn schedule_precheck(&self, tool: &str, args: &Map<String, Value>) -> Result<(), AaiError> {
        match tool {
            "schedule_add" => {
                self.check_task(&task_arg(args)?)?;
            }
            "schedule_remove" | "schedule_enable" | "schedule_disable" | "schedule_run_now" => {
                let name = name_of(args)?;
                let store = self.hub.store()?;
                if store.get(name).map_err(store_error)?.is_none() {
                    return Err(unknown(name));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Runs a `local.schedule` tool.
    ///
    /// # Errors
    /// Bad arguments, an unknown task, or a store that cannot be used.
    pub async fn schedule_tool(
        &self,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, AaiError> {
        let done = self.schedule_tool_inner(tool, args).await;
        if done.is_ok() && tool != "schedule_list" && tool != "schedule_history" {
            self.gateway
                .gate()
                .feed
                .send(aai_engine::feed::Event::Schedules);
        }
        done
    }

    async fn schedule_tool_inner(
        &self,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, AaiError> {
        let hub = &self.hub;
        let store = hub.store()?;
        let now = now_ms();
        match tool {
            "schedule_add" => {
                let task = task_arg(args)?;
                let timing = self.check_task(&task)?;
                let replaced = store.put(&task, now).map_err(store_error)?;
                hub.changed();
                let (running, scheduler) = self.scheduler_state();
                Ok(json!({
                    "task": task.name,
                    "replaced": replaced,
                    "enabled": task.enabled,
                    "next_runs": timing.between(now, i64::MAX, 3).into_iter().map(|ms| timing.show(ms)).collect::<Vec<_>>(),
                    "scheduler": scheduler,
                    "will_run": running && task.enabled,
                }))
            }
            "schedule_list" => {
                let (running, scheduler) = self.scheduler_state();
                Ok(
                    json!({"tasks": list(&store)?, "scheduler": scheduler, "scheduler_running": running}),
                )
            }
            "schedule_remove" => {
                let name = name_of(args)?;
                if !store.remove(name, now).map_err(store_error)? {
                    return Err(unknown(name));
                }
                hub.changed();
                Ok(json!({"removed": name}))
            }
            "schedule_enable" | "schedule_disable" => {
                let name = name_of(args)?;
                let enabled = tool == "schedule_enable";
                if !store.set_enabled(name, enabled, now).map_err(store_error)? {
                    return Err(unknown(name));
                }
                hub.changed();
                Ok(json!({"task": name, "enabled": enabled}))
            }
            "schedule_run_now" => {
                let name = name_of(args)?;
                let stored = store
                    .get(name)
                    .map_err(store_error)?
                    .ok_or_else(|| unknown(name))?;
                self.check_task(&stored.task)?;
                let id = store.run_now(&stored.task, now).map_err(store_error)?;
                if hub.active.load(std::sync::atomic::Ordering::SeqCst) {
                    hub.changed();
                    Ok(
                        json!({"run_id": id, "state": "pending", "note": "the scheduler starts it now; schedule_history shows how it went"}),
                    )
                } else {
                    super::runner::run_here_boxed(self.gateway, self.hub, id).await
                }
            }
            "schedule_history" => {
                let limit = args
                    .get("limit")
                    .and_then(Value::as_u64)
                    .map_or(20, |n| usize::try_from(n).unwrap_or(200).clamp(1, 200));
                let name = args.get("name").and_then(Value::as_str);
                if let Some(name) = name
                    && store.get(name).map_err(store_error)?.is_none()
                    && store
                        .history(Some(name), 1)
                        .map_err(store_error)?
                        .is_empty()
                {
                    return Err(unknown(name));
                }
                let runs = store.history(name, limit).map_err(store_error)?;
                Ok(
                    json!({"runs": runs.iter().map(|run| describe_run(&store, run)).collect::<Vec<_>>()}),
                )
            }
            other => Err(AaiError::new(
                ErrorKind::ToolNotFound,
                format!("{APP_ID} has no tool {other:?}"),
            )),
        }
    }

    /// Whether a scheduler runs — in this process, or in the daemon of this home (the command
    /// line's `schedule add` runs in a process of its own, while the daemon's scheduler runs
    /// the task) — and whether the emergency stop holds it.
    fn scheduler_state(&self) -> (bool, String) {
        if self.gateway.stop().is_stopped() {
            return (
                false,
                "paused by the emergency stop (`aai-gateway resume` lifts it)".to_owned(),
            );
        }
        if self.hub.active.load(std::sync::atomic::Ordering::SeqCst) {
            return (true, "running".to_owned());
        }
        match aai_engine::runfiles::running(self.gateway.home()) {
            Some(daemon) => (
                true,
                format!(
                    "running in the gateway daemon (pid {}, {}): it runs tasks when they are due",
                    daemon.info.pid, daemon.info.url
                ),
            ),
            None => (
                false,
                "not running: no gateway daemon runs for this user; tasks run while the daemon (`aai-gateway serve`) runs"
                    .to_owned(),
            ),
        }
    }
}

/// Why an agent's `schedule_add`, `schedule_enable` or `schedule_run_now` is asked every
/// time, whatever the profile (`full_auto` included) and whatever is remembered: each makes a
/// task's standing permission run with no one asked — as the CLI's versions need the control
/// credential — so the question spells out what runs.
pub fn must_ask(tool: &str, args: &Map<String, Value>) -> Option<String> {
    let name = || {
        args.get("name")
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)")
            .to_owned()
    };
    match tool {
        "schedule_add" => {}
        "schedule_enable" => {
            return Some(format!(
                "it enables the task {:?}: from then on it runs on its schedule with the tools it was granted, no one asked",
                name()
            ));
        }
        "schedule_run_now" => {
            return Some(format!(
                "it runs the task {:?} now, with the tools it was granted and no one asked",
                name()
            ));
        }
        _ => return None,
    }
    let task = task_arg(args).ok()?;
    let what = match &task.run {
        Run::Workflow { name, .. } => format!("workflow {name}"),
        Run::Agent { name, .. } => format!("agent {name}"),
    };
    Some(format!(
        "the task {:?} would run {what} on \"{}\"{} with no one asked for: {} (up to {} risk)",
        task.name,
        task.cron,
        task.time_zone
            .as_deref()
            .map_or(String::new(), |zone| format!(" ({zone})")),
        if task.granted_tools.is_empty() {
            "nothing".to_owned()
        } else {
            task.granted_tools.join(", ")
        },
        aai_engine::gate::risk_name(task.max_risk_level)
    ))
}

/// Every task with its next occurrence and its last run.
///
/// # Errors
/// The store cannot be read.
pub fn list(store: &Store) -> Result<Vec<Value>, AaiError> {
    let now = now_ms();
    let tasks = store.tasks().map_err(store_error)?;
    Ok(tasks
        .into_iter()
        .map(|stored| {
            let task = &stored.task;
            let next = task
                .compile()
                .ok()
                .filter(|_| task.enabled)
                .and_then(|timing| timing.next_after(now.max(stored.cursor_ms)).map(|ms| timing.show(ms)));
            let last = store
                .history(Some(&task.name), 1)
                .ok()
                .and_then(|runs| runs.into_iter().next())
                .map(|run| json!({"run_id": run.id, "scheduled": super::show_local(run.scheduled_ms), "state": run.state}));
            json!({
                "name": task.name,
                "cron": task.cron,
                "time_zone": task.time_zone,
                "enabled": task.enabled,
                "runs": match &task.run {
                    Run::Workflow { name, .. } => format!("workflow {name}"),
                    Run::Agent { name, .. } => format!("agent {name}"),
                },
                "granted_tools": task.granted_tools,
                "max_risk_level": task.max_risk_level,
                "catch_up": task.catch_up,
                "overlap": task.overlap,
                "on_approval": task.on_approval,
                "retries": task.retries,
                "next_run": next,
                "last_run": last,
            })
        })
        .collect())
}

/// `local.schedule` as a toolset the gateway runs through the [`Toolset`] trait.
pub struct ScheduleTools {
    pub(crate) gateway: std::sync::Weak<Gateway>,
    pub(crate) hub: Arc<Hub>,
}

impl ScheduleTools {
    fn gone() -> AaiError {
        AaiError::new(
            ErrorKind::AppNotRunning,
            "the gateway this scheduler belonged to has ended",
        )
    }
}

impl Toolset for ScheduleTools {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let gateway = self.gateway.upgrade().ok_or_else(Self::gone)?;
            Scheduling {
                gateway: &gateway,
                hub: &self.hub,
            }
            .schedule_tool(call.tool, call.args)
            .await
        })
    }

    /// A scheduled task is checked before anyone is asked to approve it.
    fn refusal(&self, call: &Call<'_>) -> Option<AaiError> {
        let gateway = self.gateway.upgrade()?;
        Scheduling {
            gateway: &gateway,
            hub: &self.hub,
        }
        .schedule_precheck(call.tool, call.args)
        .err()
    }

    fn must_ask<'a>(&'a self, call: &'a Call<'a>) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move { must_ask(call.tool, call.args) })
    }

    fn stop_note(&self) -> Option<(&'static str, Value)> {
        let active = self.hub.active.load(std::sync::atomic::Ordering::SeqCst);
        Some((
            "scheduler",
            Value::from(if active {
                "paused until resume"
            } else {
                "not running"
            }),
        ))
    }

    /// The scheduler claims what fell due meanwhile, by each task's catch_up.
    fn resumed(&self) {
        self.hub.nudge.notify_one();
    }
}
