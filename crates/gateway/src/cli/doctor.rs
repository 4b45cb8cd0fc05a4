//! `aai-gateway doctor`: for each built-in tool, what serves it on this machine, or why
//! nothing can and what would fix it.

use std::process::ExitCode;

use aai_gateway::config::Config;

use super::{output, runtime};

/// Prints the checks (as JSON with `json`).
pub fn run(home: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    let mut setup = aai_local::Setup::new(
        config.local.clone(),
        vec![home.to_path_buf(), config.web.cache_dir()],
    );
    setup.desktop = config.desktop.clone();
    let toolsets = aai_local::Toolsets::new(&setup);
    let report = runtime()?.block_on(toolsets.doctor());
    let enabled: Vec<String> = aai_local::descriptors(&config.local)
        .iter()
        .map(|d| d.app_id.clone())
        .collect();
    if json {
        let value: Vec<serde_json::Value> = report
            .iter()
            .map(|(app, checks)| {
                serde_json::json!({"app": app, "enabled": enabled.contains(app), "tools": checks})
            })
            .collect();
        output::line(&serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (app, checks) in &report {
        let state = if enabled.contains(app) {
            ""
        } else {
            " (turned off in config.json: local)"
        };
        output::line(&format!("{app}{state}"));
        for check in checks {
            let line = match (&check.backend, &check.problem) {
                (Some(backend), _) => format!("  {:<18} ok   {backend}", check.tool),
                (None, Some(problem)) => format!("  {:<18} no   {problem}", check.tool),
                (None, None) => format!("  {:<18} ?", check.tool),
            };
            output::line(&line);
        }
    }
    Ok(ExitCode::SUCCESS)
}
