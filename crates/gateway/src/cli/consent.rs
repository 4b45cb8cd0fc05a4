//! `aai-gateway consent`: remembered approvals.

use std::process::ExitCode;

use aai_engine::config::Config;
use clap::Subcommand;

use super::{DATA_DB, output, runtime};

#[derive(Subcommand, Debug)]
pub enum Action {
    /// List every grant, and the pinned tool definitions of MCP servers.
    List,
    /// Approve the changed definition of an MCP server's tool (every changed tool of the
    /// server without one): the server is started, the change shown, the new one pinned.
    Approve {
        /// The server's appId.
        app: String,
        /// One tool; without it, every tool whose definition changed.
        tool: Option<String>,
        /// Approve without asking (the change is printed first all the same).
        #[arg(long)]
        yes: bool,
    },
    /// Allow a client to run a tool (or every tool of the app) without asking again.
    Grant {
        /// The app's appId.
        app: String,
        /// One tool of the app; without it, every tool.
        tool: Option<String>,
        /// The MCP client's name, as it reports itself (e.g. claude-code, cursor).
        #[arg(long)]
        client: String,
    },
    /// Take a grant back (without a tool: every grant of the app for that client).
    Revoke {
        /// The app's appId.
        app: String,
        /// One tool of the app; without it, every grant of the app.
        tool: Option<String>,
        /// The MCP client's name, as `consent list` shows it.
        #[arg(long)]
        client: String,
    },
}

pub fn run(home: &std::path::Path, dev: bool, action: Action) -> anyhow::Result<ExitCode> {
    let db = home.join(DATA_DB);
    let grants = aai_audit::Grants::open(&db)?;
    match action {
        Action::List => {
            let once = aai_audit::AuditLog::open(&db)?.query(&aai_audit::Filter {
                decision_contains: Some(":allowed_once".into()),
                result: Some("started".into()),
                ..Default::default()
            })?;
            let pins = aai_mcpapps::Pins::new(home).all()?;
            output::grants(&grants.list()?, &once, &pins);
        }
        Action::Approve { app, tool, yes } => {
            let approved = runtime()?.block_on(approve(home, dev, &app, tool.as_deref(), yes))?;
            if approved.is_empty() {
                output::line(&format!("{app}: no tool changed since it was pinned"));
            }
            for tool in approved {
                output::line(&format!("approved {app}:{tool}, now pinned as it is"));
            }
        }
        Action::Grant { app, tool, client } => {
            let (app, tool) = runtime()?.block_on(resolve(home, dev, &app, tool.as_deref()))?;
            grants.grant(&aai_audit::Grant::always(
                &client,
                &app,
                tool.as_deref(),
                "cli",
            ))?;
            output::line(&format!(
                "granted: {client} may always run {app}:{} without asking",
                tool.as_deref().unwrap_or("*")
            ));
        }
        Action::Revoke { app, tool, client } => {
            let held = grants.list()?.into_iter().any(|g| {
                g.client == client
                    && g.app == app
                    && tool.as_ref().is_none_or(|t| g.tool.as_ref() == Some(t))
            });
            if !held {
                // Not a grant this client holds: say whether the name itself is wrong.
                runtime()?.block_on(resolve(home, dev, &app, tool.as_deref()))?;
            }
            let removed = grants.revoke(&client, &app, tool.as_deref())?;
            output::line(&format!("revoked {removed} grant(s)"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Pins the current definitions of `app`'s changed tools (or of `tool`); each with its diff.
async fn approve(
    home: &std::path::Path,
    dev: bool,
    app: &str,
    tool: Option<&str>,
    yes: bool,
) -> anyhow::Result<Vec<String>> {
    let (config, _) = Config::load(home);
    let options = aai_compose::scan_options(home, &config, dev);
    let registry = aai_engine::scan_once(&options, &config.platforms);
    let found = aai_engine::pipeline::find_app(&registry, app)
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    let descriptor = found
        .descriptor()
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    if !aai_mcpapps::is_server(&descriptor) {
        anyhow::bail!("{app} is not an MCP server (its descriptor has no `platforms.mcp`)");
    }
    let servers = aai_mcpapps::Servers::new(home);
    let changed = servers
        .changed(&descriptor)
        .await
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    let shown: Vec<&aai_mcpapps::Changed> = changed
        .iter()
        .filter(|c| tool.is_none_or(|t| t == c.tool))
        .collect();
    if shown.is_empty() {
        return Ok(Vec::new());
    }
    // What is approved is read first (each hidden character shown as an escape).
    for change in &shown {
        output::line(&format!("{app}:{}\n{}", change.tool, change.diff()));
    }
    if !yes {
        use std::io::IsTerminal as _;
        if !std::io::stdin().is_terminal() {
            anyhow::bail!("read the change above, then approve it at a terminal, or add --yes");
        }
        eprint!("Pin these definitions? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            anyhow::bail!("nothing was approved");
        }
    }
    let approved = servers
        .approve(&descriptor, tool)
        .await
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    Ok(approved)
}

/// The app and tool a `consent` command names, checked against the apps discovered.
async fn resolve(
    home: &std::path::Path,
    dev: bool,
    app: &str,
    tool: Option<&str>,
) -> anyhow::Result<(String, Option<String>)> {
    let (config, _) = Config::load(home);
    let options = aai_compose::scan_options(home, &config, dev);
    let registry = aai_engine::scan_once(&options, &config.platforms);
    let executors = aai_compose::executors(&config, home);
    let gateway = aai_compose::fixed_gateway(registry, config, executors, home.join(DATA_DB));
    gateway
        .resolve(app, tool)
        .await
        .map_err(|error| anyhow::anyhow!("{}", error.message))
}
