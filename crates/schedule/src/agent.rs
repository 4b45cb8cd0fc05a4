//! A scheduled task's hand-off to an agent command (`scheduler.agents` in config.json): the
//! agent gets an MCP config pointing at the daemon with a bearer token minted for the run, so
//! its calls run under the task's layer; the hand-off is one checkpointed step.

use std::path::PathBuf;
use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use aai_sandbox::Contained as _;
use serde_json::{Value, json};

use super::hub::Hub;
use super::tables::RunCheckpoints;
use super::tables::RunRow;
use aai_engine::pipeline::{CallIds, Gateway};
use aai_engine::workflow::{Checkpoints as _, Prior};

/// Hands the instruction to the configured agent command, with an MCP config whose bearer
/// token makes every call it makes run under the task's layer. It is one step: a run
/// interrupted while the agent worked is not started again unless the task is idempotent.
pub(super) async fn run(
    gateway: &Gateway,
    hub: &Hub,
    run: &RunRow,
    checkpoints: &RunCheckpoints<'_>,
    name: &str,
    instruction: &str,
    calls: CallIds,
) -> Result<Value, AaiError> {
    let head = json!({"step": 0, "agent": name});
    match checkpoints.prior(0) {
        Prior::Finished(entry) => {
            return Ok(
                json!({"agent": name, "steps": [entry], "failed": usize::from(entry["status"] != "ok")}),
            );
        }
        Prior::InFlight if !run.spec.idempotent => {
            let entry = aai_engine::pipeline::batch::merge(
                head,
                json!({"status": "interrupted", "error": {"type": "INTERRUPTED", "message": "the agent was working when the gateway stopped (a crash or a kill); the task is not marked idempotent, so it was not started again. Check what it did."}}),
            );
            let _ = checkpoints.finished(0, &entry, &[]);
            return Ok(json!({"agent": name, "steps": [entry], "failed": 1}));
        }
        Prior::InFlight | Prior::None => {}
    }
    let config = gateway.config();
    let Some(command) = config.scheduler.agents.get(name) else {
        return Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!(
                "no agent {name:?} in config.json's scheduler.agents (there: {})",
                config
                    .scheduler
                    .agents
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    };
    let url = hub
        .url
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
        .ok_or_else(|| {
            AaiError::new(
                ErrorKind::AppNotRunning,
                "an agent task runs in the daemon (`aai-gateway serve`), which its agent connects to; start it",
            )
        })?;
    let token = aai_engine::private::new_token();
    let file = gateway
        .home()
        .join("run")
        .join(format!("task-{}.mcp.json", run.id));
    let config = json!({"mcpServers": {"aai-gateway": {
        "type": "http", "url": url, "headers": {"Authorization": format!("Bearer {token}")}
    }}});
    aai_engine::private::write_private(&file, config.to_string().as_bytes()).map_err(|e| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("cannot write {}: {e}", file.display()),
        )
    })?;
    let _remove = Remove(file.clone());
    let argv: Vec<String> = command
        .command
        .iter()
        .map(|word| match word.as_str() {
            "{instruction}" => instruction.to_owned(),
            "{mcp_config}" => file.display().to_string(),
            "{mcp_url}" => url.clone(),
            "{task}" => run.spec.name.clone(),
            other => other.to_owned(),
        })
        .collect();
    let Some((program, args)) = argv.split_first() else {
        return Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!("scheduler.agents.{name}.command is empty"),
        ));
    };
    // The agent runs contained like a terminal command: it may read its MCP config (under
    // the home's run/, otherwise unreadable) and nothing else of the gateway's.
    let (program, args) = match gateway.toolsets().setup().containment(&[])? {
        Some(mut profile) => {
            profile.read.push(file.clone());
            // The files its configured command names (a script, a config) stay in its view,
            // even under the temporary folder, which is private to it otherwise.
            let named: Vec<std::path::PathBuf> = std::iter::once(program)
                .chain(args)
                .map(std::path::PathBuf::from)
                .filter(|p| p.is_absolute() && p.is_file())
                .collect();
            // What it is run from (a virtualenv's interpreter, a script with its packages)
            // stays in view read-only with what lies beside it, as for an MCP server.
            #[cfg(target_os = "linux")]
            profile
                .programs
                .extend(named.iter().map(|p| aai_contain::view::source_tree(p)));
            profile.read.extend(named);
            aai_sandbox::profile::wrap(&profile, program, args)?
        }
        None => (program.clone(), args.to_vec()),
    };
    let mut process = aai_executor::process::Command::new(program).args(args);
    for (key, value) in [
        ("AAI_MCP_URL", url.clone()),
        ("AAI_MCP_TOKEN", token.clone()),
        ("AAI_MCP_CONFIG", file.display().to_string()),
        ("AAI_TASK", run.spec.name.clone()),
    ] {
        process.env.insert(key.to_owned(), value);
    }
    checkpoints.started(0).map_err(|problem| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("the agent was not started: {problem}"),
        )
    })?;
    let grant = run.spec.grant();
    hub.tokens
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(token.clone(), (grant, calls.clone()));
    let outcome = aai_executor::process::run(
        &process,
        Duration::from_secs(command.timeout_seconds.max(1)),
        &format!("agent {name}"),
    )
    .await;
    hub.tokens
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&token);
    let audit = std::mem::take(
        &mut *calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let entry = match outcome {
        Ok(output) => aai_engine::pipeline::batch::merge(
            head,
            json!({
                "status": if output.success() { "ok" } else { "failed" },
                "exit_code": output.code,
                "output": tail(&output.stdout),
                "errors": tail(&output.stderr),
            }),
        ),
        Err(error) => {
            aai_engine::pipeline::batch::merge(head, aai_engine::pipeline::batch::failure(&error))
        }
    };
    let _ = checkpoints.finished(0, &entry, &audit);
    let failed = usize::from(entry["status"] != "ok");
    Ok(json!({"agent": name, "steps": [entry], "failed": failed}))
}

/// The last 8 KiB of an agent's output.
fn tail(text: &str) -> String {
    const KEEP: usize = 8 * 1024;
    if text.len() <= KEEP {
        return text.to_owned();
    }
    let mut start = text.len() - KEEP;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// Removes a file when dropped.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
