//! The scheduler of the daemon: wakes at the next occurrence of any task, claims what is due
//! (with the task's catch-up policy for what was missed), starts runs by the task's overlap
//! policy, and runs each workflow step by step with checkpoints, or hands the instruction to
//! the configured agent command. On start it resumes the runs a killed daemon left.
//!
//! Nothing here waits for a person: a call the task's grants do not cover fails the run, or
//! (when the task says `on_approval: queue`) waits in the dashboard's queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use super::hub::Hub;
use super::tables::{NewRun, RunCheckpoints, RunRow, Store, Stored};
use super::{CLAIM_LIMIT, CatchUp, Overlap, Run, Timing, now_ms};
use aai_engine::pipeline::{CallIds, Caller, Gateway, Pipeline as _, Request, Target, WorkflowRun};

/// The identity of this scheduler in the runs it owns: `<pid>:<start ms>`.
fn owner_id() -> String {
    format!("{}:{}", std::process::id(), now_ms())
}

/// Whether the scheduler that wrote `owner` still runs.
fn owner_alive(owner: &str, me: &str) -> bool {
    if owner == me {
        return true;
    }
    owner
        .split_once(':')
        .and_then(|(pid, _)| pid.parse::<u32>().ok())
        .is_some_and(|pid| pid != std::process::id() && aai_engine::runfiles::alive(pid))
}

/// Starts the scheduler of `gateway`; it ends when `cancel` fires.
pub fn spawn(
    gateway: Arc<Gateway>,
    hub: Arc<Hub>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    hub.active.store(true, std::sync::atomic::Ordering::SeqCst);
    let scheduler = Arc::new(Scheduler {
        owner: owner_id(),
        running: Mutex::new(HashMap::new()),
        gateway,
        hub,
    });
    tokio::spawn(async move { scheduler.serve(cancel).await })
}

/// A task as the loop keeps it: what is stored, its timing, and its next occurrence.
struct Planned {
    stored: Stored,
    timing: Timing,
    next: Option<i64>,
}

struct Scheduler {
    gateway: Arc<Gateway>,
    hub: Arc<Hub>,
    owner: String,
    /// Runs of each task running in this process.
    running: Mutex<HashMap<String, usize>>,
}

/// The longest the loop sleeps without looking at the store (other processes' changes).
const LOOK_EVERY: Duration = Duration::from_millis(500);

impl Scheduler {
    fn hub(&self) -> &Hub {
        &self.hub
    }

    async fn serve(self: Arc<Self>, cancel: CancellationToken) {
        let store = loop {
            match self.hub().store() {
                Ok(store) => break store,
                Err(error) => {
                    tracing::warn!("the scheduler waits for its store: {}", error.message);
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                        () = cancel.cancelled() => return,
                    }
                }
            }
        };
        self.recover(&store);
        let mut tasks: HashMap<String, Planned> = HashMap::new();
        let mut version = i64::MIN;
        let grace = i64::try_from(self.gateway.config().scheduler.grace_seconds)
            .unwrap_or(i64::MAX / 2)
            .saturating_mul(1000);
        tracing::info!(owner = %self.owner, "scheduler started");
        loop {
            if cancel.is_cancelled() {
                break;
            }
            let stopped = self.gateway.stop().is_stopped();
            let seen = store.version();
            if seen != version
                || self
                    .hub()
                    .dirty
                    .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                if version != i64::MIN && seen != version {
                    // Another process (the CLI) changed data.db: the dashboard shows it.
                    self.gateway
                        .gate()
                        .feed
                        .send(aai_engine::feed::Event::Schedules);
                }
                version = seen;
                tasks = load(&store, tasks);
            }
            let now = now_ms();
            let mut wake = now + i64::try_from(LOOK_EVERY.as_millis()).unwrap_or(500);
            // While the emergency stop is on nothing is claimed: the cursor stays, and what
            // falls due meanwhile is caught up (by the task's policy) after `resume`.
            if !stopped {
                for planned in tasks.values_mut() {
                    if !planned.stored.task.enabled {
                        continue;
                    }
                    if planned.next.is_some_and(|next| next <= now) {
                        self.claim(&store, planned, now, grace);
                    }
                    if let Some(next) = planned.next {
                        wake = wake.min(next);
                    }
                }
                if let Some(soonest) = self.dispatch(&store, now) {
                    wake = wake.min(soonest);
                }
            }
            let sleep = Duration::from_millis(u64::try_from(wake - now_ms()).unwrap_or(0));
            tokio::select! {
                () = tokio::time::sleep(sleep) => {}
                () = self.hub().nudge.notified() => {}
                () = cancel.cancelled() => break,
            }
        }
        self.hub()
            .active
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Claims what is due of `planned` at `now`, and moves its next occurrence on.
    fn claim(&self, store: &Store, planned: &mut Planned, now: i64, grace: i64) {
        let task = &planned.stored.task;
        let seen = planned.stored.cursor_ms;
        let timing = &planned.timing;
        let edge = now - grace;
        let mut runs = Vec::new();
        let mut to = now;
        if seen < edge {
            match task.catch_up {
                CatchUp::All => {
                    let missed = timing.between(seen, edge, CLAIM_LIMIT);
                    if missed.len() == CLAIM_LIMIT {
                        // The rest are claimed by the next pass.
                        to = *missed.last().unwrap_or(&edge);
                    }
                    runs.extend(missed.into_iter().map(|ms| occurrence(ms, "catch_up")));
                }
                CatchUp::Once | CatchUp::Skip => {
                    if let (Some(first), Some(last)) =
                        (timing.next_after(seen), timing.last_at_or_before(edge))
                        && first <= last
                    {
                        let run_last = task.catch_up == CatchUp::Once;
                        let passed_until = if run_last {
                            timing.last_before(last).filter(|p| *p >= first)
                        } else {
                            Some(last)
                        };
                        if let Some(until) = passed_until {
                            runs.push(NewRun {
                                occurrence: format!("missed-{first}"),
                                scheduled_ms: first,
                                kind: "missed",
                                state: "skipped",
                                outcome: Some(json!({
                                    "reason": format!("missed while the gateway was not running or was stopped; catch_up is {:?}", task.catch_up).to_lowercase(),
                                    "from": timing.show(first),
                                    "until": timing.show(until),
                                })),
                            });
                        }
                        if run_last {
                            runs.push(occurrence(last, "catch_up"));
                        }
                    }
                }
            }
        }
        if to == now {
            let from = seen.max(edge);
            runs.extend(
                timing
                    .between(from, now, CLAIM_LIMIT)
                    .into_iter()
                    .map(|ms| occurrence(ms, "on_time")),
            );
        }
        match store.claim(task, seen, to, &runs, now) {
            Ok(ids) => {
                planned.stored.cursor_ms = to;
                if !ids.is_empty() {
                    tracing::debug!(task = %task.name, runs = ids.len(), "claimed");
                }
            }
            Err(problem) => tracing::warn!(task = %task.name, "cannot claim: {problem}"),
        }
        planned.next = timing.next_after(planned.stored.cursor_ms);
        // Another claimer moved the cursor: the next load reads where it is.
        self.hub()
            .dirty
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Starts the pending runs the overlap policies and the concurrency limit allow; the
    /// soonest time a waiting run may start.
    fn dispatch(self: &Arc<Self>, store: &Arc<Store>, now: i64) -> Option<i64> {
        let pending = match store.pending() {
            Ok(pending) => pending,
            Err(problem) => {
                tracing::warn!("cannot read the runs: {problem}");
                return None;
            }
        };
        let limit = self.gateway.config().scheduler.max_concurrent_runs.max(1);
        let mut soonest = None;
        for run in pending {
            if run.not_before_ms > now {
                soonest =
                    Some(soonest.map_or(run.not_before_ms, |s: i64| s.min(run.not_before_ms)));
                continue;
            }
            let (busy, total) = {
                let running = self
                    .running
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                (
                    running.get(&run.task).copied().unwrap_or(0),
                    running.values().sum::<usize>(),
                )
            };
            if busy > 0 {
                match run.spec.overlap {
                    Overlap::Allow => {}
                    Overlap::Skip if run.kind == "on_time" => {
                        let _ = store.finish(
                            run.id,
                            "skipped",
                            &json!({"reason": "overlap is skip and the task's previous run was still running"}),
                            now,
                        );
                        continue;
                    }
                    // Queued; catch-up and manual runs always wait their turn.
                    Overlap::Skip | Overlap::Queue => continue,
                }
            }
            if total >= limit {
                break;
            }
            match store.start(run.id, &self.owner, now) {
                Ok(true) => {
                    self.gateway
                        .gate()
                        .feed
                        .send(aai_engine::feed::Event::Schedules);
                    self.launch(store.clone(), run);
                }
                Ok(false) => {}
                Err(problem) => tracing::warn!("cannot start a run: {problem}"),
            }
        }
        soonest
    }

    /// Resumes the runs a scheduler that is gone left running.
    fn recover(self: &Arc<Self>, store: &Arc<Store>) {
        let Ok(running) = store.running() else {
            return;
        };
        for run in running {
            let owner = run.owner.clone();
            if owner
                .as_deref()
                .is_some_and(|o| owner_alive(o, &self.owner))
            {
                continue;
            }
            if store
                .adopt(run.id, owner.as_deref(), &self.owner)
                .unwrap_or(false)
            {
                tracing::info!(task = %run.task, run = run.id, "resuming a run a stopped gateway left");
                self.launch(store.clone(), run);
            }
        }
    }

    fn launch(self: &Arc<Self>, store: Arc<Store>, run: RunRow) {
        *self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(run.task.clone())
            .or_default() += 1;
        let this = self.clone();
        tokio::spawn(async move {
            let task = run.task.clone();
            let id = run.id;
            let result = execute(&this.gateway, &this.hub, &store, &run).await;
            settle(&this.gateway, &store, &run, result);
            if let Some(count) = this
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_mut(&task)
            {
                *count = count.saturating_sub(1);
            }
            tracing::info!(%task, run = id, "run ended");
            this.gateway
                .gate()
                .feed
                .send(aai_engine::feed::Event::Schedules);
            this.hub().nudge.notify_one();
        });
    }
}

/// Records how a run ended, or sends it back for another attempt.
fn settle(gateway: &Gateway, store: &Store, run: &RunRow, result: Result<Value, AaiError>) {
    let now = now_ms();
    let (state, outcome) = ended(&result);
    let state = if gateway.stop().is_stopped() && state != "succeeded" {
        "cancelled"
    } else {
        state
    };
    let retryable = state == "failed" && !final_failure(&result);
    if retryable && run.attempt <= u32::from(run.spec.retries) {
        // retry_seconds, then twice that, and so on, at most an hour.
        let base = i64::try_from(
            gateway
                .config()
                .scheduler
                .retry_seconds
                .saturating_mul(1000),
        )
        .unwrap_or(3_600_000);
        let wait = base
            .saturating_mul(1 << run.attempt.saturating_sub(1).min(10))
            .min(3_600_000);
        tracing::info!(task = %run.task, run = run.id, attempt = run.attempt, wait_ms = wait, "the run failed; it will be tried again");
        if let Err(problem) = store.retry(run.id, now + wait, &outcome) {
            tracing::warn!("cannot record the retry: {problem}");
        }
        return;
    }
    if let Err(problem) = store.finish(run.id, state, &outcome, now) {
        tracing::warn!(run = run.id, "cannot record the end of a run: {problem}");
    }
}

/// A pending occurrence at `ms`.
fn occurrence(ms: i64, kind: &'static str) -> NewRun {
    NewRun {
        occurrence: ms.to_string(),
        scheduled_ms: ms,
        kind,
        state: "pending",
        outcome: None,
    }
}

/// The tasks of the store, keeping the timing of those whose spec did not change.
fn load(store: &Store, mut old: HashMap<String, Planned>) -> HashMap<String, Planned> {
    let Ok(stored) = store.tasks() else {
        return old;
    };
    let mut tasks = HashMap::with_capacity(stored.len());
    for stored in stored {
        let name = stored.task.name.clone();
        let timing = match old.remove(&name) {
            Some(planned)
                if planned.stored.task.cron == stored.task.cron
                    && planned.stored.task.time_zone == stored.task.time_zone =>
            {
                planned.timing
            }
            _ => match stored.task.compile() {
                Ok(timing) => timing,
                Err(problem) => {
                    tracing::warn!(task = %name, "a stored task is not valid: {problem}");
                    continue;
                }
            },
        };
        let next = timing.next_after(stored.cursor_ms);
        tasks.insert(
            name,
            Planned {
                stored,
                timing,
                next,
            },
        );
    }
    tasks
}

/// A run's end state and what history keeps of it.
fn ended(result: &Result<Value, AaiError>) -> (&'static str, Value) {
    match result {
        Err(error) => (
            "failed",
            json!({"error": {"type": error.kind.type_name(), "message": error.message}}),
        ),
        Ok(value) => {
            let interrupted = value["steps"]
                .as_array()
                .is_some_and(|steps| steps.iter().any(|s| s["status"] == "interrupted"));
            let state = if interrupted {
                "interrupted"
            } else if value["failed"].as_u64().unwrap_or(0) > 0 {
                "failed"
            } else {
                "succeeded"
            };
            (state, value.clone())
        }
    }
}

/// A failure another attempt cannot mend: a refusal, bad arguments, an unknown workflow.
fn final_failure(result: &Result<Value, AaiError>) -> bool {
    let hopeless = |kind: &str| {
        matches!(
            kind,
            "PERMISSION_DENIED" | "INVALID_PARAMS" | "TOOL_NOT_FOUND" | "APP_NOT_FOUND"
        )
    };
    match result {
        Err(error) => hopeless(error.kind.type_name()),
        Ok(value) => value["steps"].as_array().is_some_and(|steps| {
            steps.iter().any(|s| {
                s["status"] == "failed" && s["error"]["type"].as_str().is_some_and(hopeless)
            })
        }),
    }
}

/// Runs (or resumes) `run`.
async fn execute(
    gateway: &Gateway,
    hub: &Hub,
    store: &Store,
    run: &RunRow,
) -> Result<Value, AaiError> {
    let task = &run.spec;
    let calls = CallIds::default();
    let who = Caller {
        task: Some(task.grant()),
        calls: Some(calls.clone()),
        ..Caller::named(&format!("schedule:{}", task.name))
    };
    let checkpoints = RunCheckpoints {
        store,
        run: run.id,
        prior: store.steps(run.id).map_err(AaiError::from)?,
    };
    let asker = aai_engine::pipeline::task::TaskAsker {
        gateway,
        task: &task.name,
        on_approval: task.on_approval,
    };
    let context = json!({
        "task": task.name,
        "occurrence": run.occurrence,
        "scheduled": super::show_local(run.scheduled_ms),
        "scheduled_ms": run.scheduled_ms,
        "run_id": run.id,
        "attempt": run.attempt,
    });
    match &task.run {
        Run::Workflow { name, inputs } => {
            let request = Request {
                target: Target::Workflow {
                    name,
                    run: Some(WorkflowRun {
                        context: &context,
                        checkpoints: &checkpoints,
                    }),
                },
                ..Request::workflow(&who, name, inputs).asking(Some(&asker))
            };
            // The task's asker queues or refuses: it never leaves a question open.
            gateway.call(request).await.into_result()
        }
        Run::Agent { name, instruction } => {
            super::agent::run(gateway, hub, run, &checkpoints, name, instruction, calls).await
        }
    }
}

/// [`run_here`] as a boxed future: a run's steps are calls themselves, and a call can ask for
/// a run (`schedule_run_now`), so the cycle goes through a box.
pub fn run_here_boxed<'a>(
    gateway: &'a Gateway,
    hub: &'a Hub,
    id: i64,
) -> aai_executor::BoxFuture<'a, Result<Value, AaiError>> {
    Box::pin(run_here(gateway, hub, id))
}

/// Runs `id` in this process now (the CLI's `run-now` when no daemon runs), to its end.
///
/// # Errors
/// The run is unknown or not pending.
pub async fn run_here(gateway: &Gateway, hub: &Hub, id: i64) -> Result<Value, AaiError> {
    let store = hub.store()?;
    let owner = owner_id();
    let started = store.start(id, &owner, now_ms()).map_err(AaiError::from)?;
    let run = store
        .run(id)
        .map_err(AaiError::from)?
        .filter(|_| started)
        .ok_or_else(|| {
            AaiError::new(
                ErrorKind::InvalidParams,
                format!("run {id} is not waiting to start"),
            )
        })?;
    let result = execute(gateway, hub, &store, &run).await;
    settle(gateway, &store, &run, result);
    let run = store.run(id).map_err(AaiError::from)?;
    Ok(run.map_or(Value::Null, |run| super::report::describe_run(&store, &run)))
}
