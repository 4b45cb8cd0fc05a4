//! `aai-gateway schedule`: scheduled tasks, which the daemon runs.

use std::process::ExitCode;

use aai_engine::config::Config;
use aai_schedule::Task;
use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{DATA_DB, output, report};

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Add a task, or replace the task of that name. Give it as a JSON file (`--file`, see
    /// `schedule schema`) or with the options below.
    Add(Box<AddArgs>),
    /// The tasks, with their next and last runs.
    List,
    /// Remove a task (its history stays).
    Remove { name: String },
    /// Turn a task on.
    Enable { name: String },
    /// Turn a task off.
    Disable { name: String },
    /// Run a task now: the daemon runs it when it runs, else it runs here.
    RunNow {
        name: String,
        /// With a daemon: wait for the run to end and print it.
        #[arg(long)]
        wait: bool,
    },
    /// The latest runs (of one task), each step with its result and audit ids.
    History {
        name: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Print the JSON Schema of a task.
    Schema,
}

/// `schedule add`.
#[derive(Args, Debug)]
pub struct AddArgs {
    /// The task's name (letters, digits, - and _).
    name: Option<String>,
    /// A task as JSON (a file, or - for stdin).
    #[arg(long, conflicts_with_all = ["cron", "workflow", "agent"])]
    file: Option<String>,
    /// 5 fields (minute hour day month weekday) or 6 (seconds first), e.g. "0 9 * * 1-5".
    #[arg(long)]
    cron: Option<String>,
    /// An IANA time zone; default this computer's.
    #[arg(long)]
    time_zone: Option<String>,
    /// Run this workflow of AAI_HOME/workflows.
    #[arg(long, conflicts_with = "agent")]
    workflow: Option<String>,
    /// The workflow's inputs as a JSON object.
    #[arg(long, default_value = "{}")]
    inputs: String,
    /// Hand the instruction to this agent of config.json's scheduler.agents.
    #[arg(long, requires = "instruction")]
    agent: Option<String>,
    #[arg(long)]
    instruction: Option<String>,
    /// A tool the task may call unattended: app:tool, app:* or a tool name (repeat it).
    #[arg(long = "grant")]
    grants: Vec<String>,
    /// low, medium, high or critical.
    #[arg(long, default_value = "medium")]
    max_risk: String,
    /// skip, once or all.
    #[arg(long, default_value = "once")]
    catch_up: String,
    /// skip, queue or allow.
    #[arg(long, default_value = "skip")]
    overlap: String,
    /// fail, or queue (wait for the user on the dashboard).
    #[arg(long, default_value = "fail")]
    on_approval: String,
    #[arg(long, default_value_t = 0)]
    retries: u8,
    /// Added turned off.
    #[arg(long)]
    disabled: bool,
    /// An agent run cut short by a crash may start again.
    #[arg(long)]
    idempotent: bool,
}

/// The task the options of `add` describe.
fn task_of(args: AddArgs) -> anyhow::Result<Value> {
    let AddArgs {
        name,
        file,
        cron,
        time_zone,
        workflow,
        inputs,
        agent,
        instruction,
        grants,
        max_risk,
        catch_up,
        overlap,
        on_approval,
        retries,
        disabled,
        idempotent,
    } = args;
    if let Some(file) = file {
        let text = if file == "-" {
            std::io::read_to_string(std::io::stdin()).context("cannot read the task from stdin")?
        } else {
            std::fs::read_to_string(&file).with_context(|| format!("cannot read {file}"))?
        };
        let mut task: Value =
            serde_json::from_str(&text).with_context(|| format!("{file} is not JSON"))?;
        if let (Some(name), Some(object)) = (name, task.as_object_mut()) {
            object.insert("name".into(), json!(name));
        }
        return Ok(task);
    }
    let name = name.context("name the task: `schedule add NAME --cron ... --workflow ...`")?;
    let cron = cron.context("--cron is required (or --file)")?;
    let run = match (workflow, agent) {
        (Some(workflow), None) => {
            let inputs: Value =
                serde_json::from_str(&inputs).context("--inputs is not valid JSON")?;
            json!({"workflow": {"name": workflow, "inputs": inputs}})
        }
        (None, Some(agent)) => json!({"agent": {"name": agent, "instruction": instruction}}),
        _ => anyhow::bail!("say what runs: --workflow NAME or --agent NAME --instruction TEXT"),
    };
    Ok(json!({
        "name": name, "cron": cron, "time_zone": time_zone, "run": run,
        "granted_tools": grants, "max_risk_level": max_risk, "catch_up": catch_up,
        "overlap": overlap, "on_approval": on_approval, "retries": retries,
        "enabled": !disabled, "idempotent": idempotent,
    }))
}

pub async fn run(home: &std::path::Path, action: Action) -> anyhow::Result<ExitCode> {
    if matches!(action, Action::Schema) {
        output::line(&serde_json::to_string_pretty(&Task::schema())?);
        return Ok(ExitCode::SUCCESS);
    }
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    let options = aai_compose::scan_options(home, &config, false);
    let registry = aai_engine::scan_once(&options, &config.platforms);
    let executors = aai_compose::executors(&config, home);
    let gateway = aai_compose::fixed_gateway(registry, config, executors, home.join(DATA_DB));
    let daemon = aai_engine::runfiles::running(home).is_some();
    let (tool, args) = match action {
        Action::Add(args) => {
            let mut task = task_of(*args)?;
            if let Some(object) = task.as_object_mut() {
                object.retain(|_, v| !v.is_null());
            }
            ("schedule_add", json!({ "task": task }))
        }
        Action::List => ("schedule_list", json!({})),
        Action::Remove { name } => ("schedule_remove", json!({ "name": name })),
        Action::Enable { name } => ("schedule_enable", json!({ "name": name })),
        Action::Disable { name } => ("schedule_disable", json!({ "name": name })),
        Action::History { name, limit } => (
            "schedule_history",
            json!({"name": name, "limit": limit.clamp(1, 200)}),
        ),
        Action::RunNow { name, wait } if daemon => {
            return queue_run(&gateway, &name, wait).await;
        }
        Action::RunNow { name, .. } => ("schedule_run_now", json!({ "name": name })),
        Action::Schema => unreachable!("answered above"),
    };
    let args = args.as_object().cloned().unwrap_or_default();
    let tasks = gateway
        .tasks()
        .context("the scheduler is plugged into every gateway")?;
    match tasks.change(&gateway, tool, &args).await {
        Ok(report) => {
            output::report(&report);
            let failed = report["state"]
                .as_str()
                .is_some_and(|s| !matches!(s, "succeeded" | "pending" | "running"));
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Err(error) => {
            report(&error);
            Ok(ExitCode::from(1))
        }
    }
}

/// `run-now` while a daemon runs: the run is queued in data.db, where the daemon's scheduler
/// sees it within half a second; with `wait`, its end is awaited and printed.
async fn queue_run(
    gateway: &aai_engine::pipeline::Gateway,
    name: &str,
    wait: bool,
) -> anyhow::Result<ExitCode> {
    // The daemon's scheduler runs the queued run; this process only writes it to data.db.
    let hub = aai_schedule::Hub::new(gateway.gate().data_db().to_path_buf());
    let store = hub.store().map_err(|e| anyhow::anyhow!(e.message))?;
    let stored = store
        .get(name)
        .map_err(|e| anyhow::anyhow!(e))?
        .with_context(|| format!("no scheduled task {name:?} (`aai-gateway schedule list`)"))?;
    aai_schedule::Scheduling { gateway, hub: &hub }
        .check_task(&stored.task)
        .map_err(|e| anyhow::anyhow!(e.message))?;
    let id = store
        .run_now(&stored.task, aai_schedule::now_ms())
        .map_err(|e| anyhow::anyhow!(e))?;
    if !wait {
        output::line(&format!(
            "run {id} of {name} queued; the daemon starts it now (`aai-gateway schedule history {name}`)"
        ));
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        let run = store.run(id).map_err(|e| anyhow::anyhow!(e))?;
        if let Some(run) = run.filter(|r| !matches!(r.state.as_str(), "pending" | "running")) {
            output::report(&aai_schedule::tools::describe_run(&store, &run));
            return Ok(if run.state == "succeeded" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
