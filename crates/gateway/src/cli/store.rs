//! `aai-gateway store`: search the app store, and install, update and uninstall its apps.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;

use aai_gateway::config::Config;
use aai_gateway::store::{self, Store};
use clap::Subcommand;

use super::output;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Search the store (ranked; typos are forgiven).
    Search { query: Vec<String> },
    /// An app's details: publisher, platforms, tools, versions.
    Info { app_id: String },
    /// Install an app: its signature is checked, what it can do is shown, and you are asked.
    Install {
        app_id: String,
        /// A version other than the latest.
        #[arg(long)]
        version: Option<String>,
        /// Do not ask (scripts).
        #[arg(long)]
        yes: bool,
        /// Install it even when another source (your own descriptor, a configured folder, the
        /// web registry, a built-in app, an app bundle) offers the same appId, and let the
        /// store's app win over it.
        #[arg(long)]
        prefer_store: bool,
    },
    /// Update apps installed from the store (all, or the ones named), showing what changes.
    Update {
        app_ids: Vec<String>,
        #[arg(long)]
        yes: bool,
    },
    /// Remove an app installed from the store.
    Uninstall { app_id: String },
    /// The apps installed from the store.
    List,
    /// Read the store's app list into the local index now (the daemon does it in the
    /// background): APP_NOT_FOUND then says when the store has the app.
    Refresh,
}

/// y/N on the terminal; without one, only `--yes` says yes.
fn confirm(question: &str, yes: bool) -> anyhow::Result<bool> {
    if yes {
        return Ok(true);
    }
    anyhow::ensure!(
        std::io::stdin().is_terminal(),
        "nobody to ask (no terminal): run again with --yes to accept"
    );
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

fn show(fetched: &store::Fetched) {
    let d = &fetched.descriptor;
    output::line(&format!(
        "{} {} — {} (publisher {}, sha256 {})",
        d.app_id,
        fetched.version,
        d.name,
        fetched.publisher,
        &fetched.sha256[..16]
    ));
    output::line(&format!("  {}", d.description));
    for (platform, tool, risk) in store::summary(d) {
        output::line(&format!("  {platform:8} {tool} (risk {risk})"));
    }
}

pub async fn run(home: &std::path::Path, action: Action) -> anyhow::Result<ExitCode> {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    if let Action::List = action {
        let installed = store::all_installed(home);
        if installed.is_empty() {
            output::line("no app installed from the store");
        }
        for app in installed {
            output::line(&format!(
                "{} {} (publisher {}, from {})",
                app.app_id, app.version, app.publisher, app.store
            ));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Action::Uninstall { app_id } = &action {
        let mark = store::uninstall(home, app_id).map_err(anyhow::Error::msg)?;
        output::line(&format!("removed {} {}", mark.app_id, mark.version));
        return Ok(ExitCode::SUCCESS);
    }
    let client = Store::new(&config.store, &store::ca_pems(&config)).map_err(anyhow::Error::msg)?;
    match action {
        Action::Search { query } => {
            let query = query.join(" ");
            anyhow::ensure!(!query.trim().is_empty(), "say what to search for");
            let found = client.search(&query).await.map_err(anyhow::Error::msg)?;
            if found.is_empty() {
                output::line(&format!("nothing in the store matches {query:?}"));
            }
            for app in found {
                let id = app["appId"].as_str().unwrap_or_default();
                let mark = if store::installed(home, id).is_some() {
                    "  [installed]"
                } else {
                    ""
                };
                output::line(&format!(
                    "{id} {} — {}{mark}\n    {} · {}",
                    app["version"].as_str().unwrap_or_default(),
                    app["name"].as_str().unwrap_or_default(),
                    app["description"].as_str().unwrap_or_default(),
                    app["platforms"]
                        .as_array()
                        .map(|p| p
                            .iter()
                            .filter_map(|v| v.as_str())
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default(),
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Refresh => {
            let index = store::Index::default();
            let count = client
                .refresh(home, &index)
                .await
                .map_err(anyhow::Error::msg)?;
            output::line(&format!("{count} app(s) in the store's index"));
            Ok(ExitCode::SUCCESS)
        }
        Action::Info { app_id } => {
            let info = client.info(&app_id).await.map_err(anyhow::Error::msg)?;
            output::line(&serde_json::to_string_pretty(&info)?);
            Ok(ExitCode::SUCCESS)
        }
        Action::Install {
            app_id,
            version,
            yes,
            prefer_store,
        } => {
            if let Some(mark) = store::installed(home, &app_id) {
                anyhow::ensure!(
                    version.is_some(),
                    "{app_id} {} is installed; `aai-gateway store update {app_id}` brings the latest",
                    mark.version
                );
            }
            let elsewhere = store::offered_elsewhere(home, &config, &app_id);
            if let Some((source, path)) = &elsewhere {
                anyhow::ensure!(
                    prefer_store,
                    "{app_id} is already offered by a {} descriptor, {}; the store's app would be hidden by it or hide it, so nothing was installed. `--prefer-store` installs the store's app and lets it win over that one.",
                    source.words(),
                    path.display()
                );
            }
            let fetched = client
                .fetch(home, &app_id, version.as_deref())
                .await
                .map_err(anyhow::Error::msg)?;
            output::line("signature verified against the publisher's key");
            show(&fetched);
            let question = match &elsewhere {
                Some((source, path)) => format!(
                    "Install {app_id} {} and prefer it over the {} descriptor {}?",
                    fetched.version,
                    source.words(),
                    path.display()
                ),
                None => format!("Install {app_id} {}?", fetched.version),
            };
            if let Some((source, path)) = &elsewhere {
                output::line(&format!(
                    "--prefer-store: the store's {app_id} will win over the {} descriptor {}",
                    source.words(),
                    path.display()
                ));
            }
            if !confirm(&question, yes)? {
                output::line("not installed");
                return Ok(ExitCode::from(1));
            }
            if elsewhere.is_some() {
                store::set_preferred(home, &app_id, true).map_err(anyhow::Error::msg)?;
            }
            let path = store::write(home, &client.url, &fetched).map_err(anyhow::Error::msg)?;
            output::line(&format!(
                "installed {}: a running gateway offers it now",
                path.display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Action::Update { app_ids, yes } => {
            let installed: Vec<store::Installed> = store::all_installed(home)
                .into_iter()
                .filter(|a| app_ids.is_empty() || app_ids.contains(&a.app_id))
                .collect();
            for wanted in &app_ids {
                anyhow::ensure!(
                    installed.iter().any(|a| &a.app_id == wanted),
                    "{wanted} was not installed from the store"
                );
            }
            let mut updated = 0;
            for app in installed {
                let fetched = client
                    .fetch(home, &app.app_id, None)
                    .await
                    .map_err(anyhow::Error::msg)?;
                if fetched.sha256 == app.sha256 {
                    output::line(&format!("{} {} is the latest", app.app_id, app.version));
                    continue;
                }
                let old = std::fs::read(store::descriptor_path(home, &app.app_id))
                    .ok()
                    .and_then(|bytes| aai_descriptor::parse(&app.app_id, &bytes).ok());
                output::line(&format!(
                    "{}: {} → {}",
                    app.app_id, app.version, fetched.version
                ));
                match old {
                    Some(old) => {
                        let changes = store::diff(&old, &fetched.descriptor);
                        if changes.is_empty() {
                            output::line("  the tools and their risks stay the same");
                        }
                        for change in changes {
                            output::line(&format!("  {change}"));
                        }
                    }
                    None => show(&fetched),
                }
                if confirm(&format!("Update {}?", app.app_id), yes)? {
                    store::write(home, &client.url, &fetched).map_err(anyhow::Error::msg)?;
                    updated += 1;
                }
            }
            output::line(&format!("{updated} updated"));
            Ok(ExitCode::SUCCESS)
        }
        Action::List | Action::Uninstall { .. } => unreachable!("answered above"),
    }
}
