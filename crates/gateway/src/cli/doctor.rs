//! `aai-gateway doctor`: for each built-in tool, what serves it on this machine, or why
//! nothing can and what would fix it.

use std::process::ExitCode;

use aai_engine::config::Config;
use aai_sandbox::Contained as _;
use aai_toolset::Kit as _;

use super::{output, runtime};

/// Prints the checks (as JSON with `json`).
pub fn run(home: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    let mut setup = aai_toolset::Setup::new(
        config.local.clone(),
        vec![home.to_path_buf(), config.web.cache_dir()],
    );
    setup.desktop = config.desktop.clone();
    let toolsets = aai_local::toolsets(&setup);
    let mut report = runtime()?.block_on(toolsets.doctor());
    report.push((
        "aai-gateway".to_owned(),
        vec![process_isolation(), containment(&setup)],
    ));
    let servers = runtime()?.block_on(mcp_servers(home, &config));
    let mcp_apps: Vec<String> = servers.iter().map(|(app, _)| app.clone()).collect();
    report.extend(servers);
    let enabled: Vec<String> = aai_local::Local
        .descriptors(&config.local)
        .iter()
        .map(|d| d.app_id.clone())
        .collect();
    if json {
        let value: Vec<serde_json::Value> = report
            .iter()
            .map(|(app, checks)| {
                let on = enabled.contains(app) || app == "aai-gateway" || mcp_apps.contains(app);
                serde_json::json!({"app": app, "enabled": on, "tools": checks})
            })
            .collect();
        output::line(&serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (app, checks) in &report {
        let state = if enabled.contains(app) || app == "aai-gateway" || mcp_apps.contains(app) {
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

/// How the processes a call starts are kept track of, for timeouts and the emergency stop.
/// Each MCP server's check: started now, its tools listed and compared with their pins.
async fn mcp_servers(
    home: &std::path::Path,
    config: &Config,
) -> Vec<(String, Vec<aai_toolset::Check>)> {
    let options = aai_compose::scan_options(home, config, false);
    let registry = aai_engine::scan_once(&options, &config.platforms);
    let servers = aai_mcpapps::Servers::new(home);
    let mut report = Vec::new();
    for app in &registry.apps {
        let Ok(descriptor) = app.descriptor() else {
            continue;
        };
        if !aai_mcpapps::is_server(&descriptor) {
            continue;
        }
        let check = match servers.changed(&descriptor).await {
            Ok(changed) => {
                let status = servers
                    .statuses()
                    .into_iter()
                    .find(|s| s.app == app.id())
                    .unwrap_or_default();
                if changed.is_empty() {
                    aai_toolset::Check::ok(
                        "mcp_server",
                        format!("{}: {} tool(s), all as pinned", status.server, status.tools),
                    )
                } else {
                    let names: Vec<&str> = changed.iter().map(|c| c.tool.as_str()).collect();
                    aai_toolset::Check::failed(
                        "mcp_server",
                        format!(
                            "{}: {} tool(s); changed since pinned (refused until `aai-gateway consent approve {}`): {}",
                            status.server,
                            status.tools,
                            app.id(),
                            names.join(", ")
                        ),
                    )
                }
            }
            Err(error) => aai_toolset::Check::failed("mcp_server", error.message),
        };
        report.push((app.id().to_owned(), vec![check]));
    }
    servers.stop_all();
    report
}

fn process_isolation() -> aai_toolset::Check {
    #[cfg(target_os = "linux")]
    if aai_executor::cgroup::available() {
        return aai_toolset::Check::ok("process_isolation", "a cgroup per call (cgroup v2)");
    }
    aai_toolset::Check::failed(
        "process_isolation",
        "no cgroup per call here (cgroup v2 with a delegated subtree is needed: run the daemon with `aai-gateway service install`, whose unit sets Delegate=yes); calls' processes are tracked by an inherited tag and the process tree instead, which a process that clears its environment and double-forks escapes",
    )
}

/// Which sandbox what the agent starts runs under, and what a launcher really enforced here
/// (it restricts a throwaway process with the current config's rules and reports).
fn containment(setup: &aai_toolset::Setup) -> aai_toolset::Check {
    let mut check = aai_sandbox::profile::doctor(&setup.config);
    #[cfg(target_os = "linux")]
    if let (Some(backend), Ok(Some(profile)), Some(launcher)) = (
        check.backend.as_mut(),
        setup.containment(&[]),
        aai_contain::launcher(),
    ) {
        let (program, args) = profile.probe_command(launcher);
        let probed = std::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .and_then(|out| serde_json::from_slice::<serde_json::Value>(&out.stdout).ok());
        match probed {
            Some(p) if p["ruleset"] != "none" => backend.push_str(&format!(
                ". Probed with this config: Landlock ABI {}, {} ({} path rules), no_new_privs {}",
                p["abi"],
                if p["ruleset"] == "full" {
                    "fully enforced"
                } else {
                    "partially enforced (an older kernel: see above)"
                },
                p["rules"],
                p["no_new_privs"]
            )),
            other => {
                let why = other
                    .and_then(|p| p["error"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "the launcher did not report".to_owned());
                check.problem = Some(format!("the sandbox could not be enforced here: {why}"));
                check.backend = None;
            }
        }
    }
    check
}
