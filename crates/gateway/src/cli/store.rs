//! `aai-gateway store`: search the app store, and install, update and uninstall its apps.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;

use aai_engine::appstore;
use aai_engine::appstore::Store;
use aai_engine::config::Config;
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
        /// Do not ask (scripts). Never grants a credential: see --grant-credential.
        #[arg(long)]
        yes: bool,
        /// Install it even when another source (your own descriptor, a configured folder, the
        /// web registry, a built-in app, an app bundle) offers the same appId, and let the
        /// store's app win over it.
        #[arg(long)]
        prefer_store: bool,
        #[command(flatten)]
        choices: Choices,
    },
    /// Update apps installed from the store (all, or the ones named), showing what changes.
    Update {
        app_ids: Vec<String>,
        /// Do not ask (scripts). Never grants a credential: see --grant-credential.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        choices: Choices,
    },
    /// Remove an app installed from the store.
    Uninstall { app_id: String },
    /// The apps installed from the store.
    List,
    /// Read the store's app list into the local index now (the daemon does it in the
    /// background): APP_NOT_FOUND then says when the store has the app.
    Refresh,
}

/// What the user allows beyond "install it": each is its own explicit choice.
#[derive(clap::Args, Debug, Default)]
pub struct Choices {
    /// Let the app have the value of this environment variable, sent to the origin its
    /// descriptor names (shown before the install); repeat for several.
    #[arg(long = "grant-credential", value_name = "VAR")]
    grant_credential: Vec<String>,
    /// Accept a version lower than or equal to the installed one.
    #[arg(long)]
    allow_downgrade: bool,
    /// Accept another publisher, or a publisher key the trusted key did not hand over to.
    #[arg(long)]
    accept_publisher_change: bool,
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

/// `store info` as text: what the app is, who publishes it, its tools and versions.
fn info_text(info: &serde_json::Value, installed: Option<&appstore::Installed>) {
    let words = |key: &str| {
        info[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_owned();
    output::line(&format!(
        "{} {} — {}{}",
        text(&info["appId"]),
        text(&info["latest"]),
        text(&info["name"]),
        installed.map_or_else(String::new, |m| format!("  [installed {}]", m.version))
    ));
    output::line(&format!("  {}", text(&info["description"])));
    output::line(&format!("  platforms: {}", words("platforms")));
    output::line(&format!("  tools: {}", words("tools")));
    let publisher = &info["publisher"];
    output::line(&format!(
        "  publisher: {} (key {})",
        text(&publisher["name"]),
        text(&publisher["public_key"])
    ));
    if let Some(versions) = info["versions"].as_array() {
        output::line("  versions:");
        for version in versions {
            output::line(&format!(
                "    {}  published {}  sha256 {}",
                text(&version["version"]),
                text(&version["published_at"]),
                text(&version["sha256"])
            ));
        }
    }
}

fn show(fetched: &appstore::Fetched) {
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
    for (platform, tool, risk) in appstore::summary(d) {
        output::line(&format!("  {platform:8} {tool} (risk {risk})"));
    }
    let reach = appstore::reach(d);
    for origin in &reach.origins {
        output::line(&format!("  talks to {origin}"));
    }
    for credential in &reach.credentials {
        output::line(&format!("  credential: {}", credential.describe(&d.app_id)));
    }
    identity(fetched);
}

/// What the store's publisher and timestamp checks found, when there is something to say.
fn identity(fetched: &appstore::Fetched) {
    match &fetched.identity {
        appstore::Identity::FirstSeen => output::line(&format!(
            "  publisher {} is new to this computer: its key is trusted from now on",
            fetched.publisher
        )),
        appstore::Identity::Same => {}
        appstore::Identity::Rotated(what) => output::line(&format!("  {what}")),
        appstore::Identity::Changed(what) => {
            output::line(&format!(
                "  PUBLISHER CHANGE (--accept-publisher-change): {what}"
            ));
        }
    }
    match &fetched.stamp {
        None => output::line(
            "  this store signs no timestamps: a mirror could hold back updates unnoticed",
        ),
        Some(appstore::Stamp {
            first_seen: Some(key),
            ..
        }) => output::line(&format!(
            "  the store's timestamp key {key} is trusted from now on (first contact; set store.timestamp_key to pin it yourself)"
        )),
        Some(_) => {}
    }
}

/// The environment variables `fetched` asks for, with the origin each would go to.
fn asked_variables(fetched: &appstore::Fetched) -> Vec<(String, String)> {
    appstore::reach(&fetched.descriptor)
        .credentials
        .into_iter()
        .filter_map(|c| match c {
            appstore::Credential::Env { var, origin } => Some((var, origin)),
            _ => None,
        })
        .collect()
}

/// Refuses, before anything is written, a `--grant-credential` for a variable the app does
/// not ask for.
fn check_grants(fetched: &appstore::Fetched, choices: &Choices) -> anyhow::Result<()> {
    let app_id = &fetched.descriptor.app_id;
    let asked = asked_variables(fetched);
    for var in &choices.grant_credential {
        anyhow::ensure!(
            asked.iter().any(|(v, _)| v == var),
            "--grant-credential {var}: {app_id} does not ask for the environment variable {var}{}; nothing was installed or granted",
            if asked.is_empty() {
                String::new()
            } else {
                format!(
                    " (it asks for {})",
                    asked
                        .iter()
                        .map(|(v, _)| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    Ok(())
}

/// Binds the environment variables the user allows to the app, for every client; the rest
/// stay unbound (the app's first use of one asks). `--yes` binds nothing.
fn bind_credentials(
    home: &std::path::Path,
    fetched: &appstore::Fetched,
    choices: &Choices,
    yes: bool,
) -> anyhow::Result<()> {
    let app_id = &fetched.descriptor.app_id;
    let asked = asked_variables(fetched);
    if asked.is_empty() {
        return Ok(());
    }
    let grants = aai_audit::Grants::open(&home.join(super::DATA_DB))?;
    for (var, origin) in asked {
        let host = url::Url::parse(&origin)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| origin.clone());
        let allowed = if choices.grant_credential.contains(&var) {
            true
        } else if !yes && std::io::stdin().is_terminal() {
            eprint!(
                "Send the value of your environment variable {var} to {origin} whenever {app_id} needs it? Type {var}@{host} to allow; anything else refuses: "
            );
            std::io::stderr().flush()?;
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer)?;
            answer.trim() == format!("{var}@{host}")
        } else {
            false
        };
        if allowed {
            grants.grant(&aai_audit::Grant::always(
                aai_audit::EVERY_CLIENT,
                &format!("env:{var}"),
                Some(&format!("{app_id}@{origin}")),
                "store",
            ))?;
            output::line(&format!(
                "  {var} may be sent to {origin} (`aai-gateway consent list` shows it; uninstalling {app_id} takes it back)"
            ));
        } else {
            output::line(&format!(
                "  {var} is not granted: {app_id}'s first use of it asks you (or install with --grant-credential {var})"
            ));
        }
    }
    Ok(())
}

pub async fn run(home: &std::path::Path, action: Action) -> anyhow::Result<ExitCode> {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    if let Action::List = action {
        let installed = appstore::all_installed(home);
        if output::json() {
            output::value(&serde_json::json!(installed.iter().map(|app| serde_json::json!({
                "appId": app.app_id, "version": app.version, "publisher": app.publisher, "store": app.store,
            })).collect::<Vec<_>>()));
            return Ok(ExitCode::SUCCESS);
        }
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
        anyhow::ensure!(
            appstore::installed(home, app_id).is_some(),
            "{app_id} was not installed from the store (`aai-gateway store list`)"
        );
        // Grants first: an app whose removal fails keeps its files without its bindings, never
        // the other way round (bindings left for a later app of the same id).
        let forgotten = aai_audit::Grants::open(&home.join(super::DATA_DB))?.forget_app(app_id)?;
        let mark = appstore::uninstall(home, app_id).map_err(anyhow::Error::msg)?;
        output::line(&format!(
            "removed {} {} and {forgotten} grant(s) made for it",
            mark.app_id, mark.version
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let client =
        Store::new(&config.store, &appstore::ca_pems(&config)).map_err(anyhow::Error::msg)?;
    match action {
        Action::Search { query } => {
            let query = query.join(" ");
            anyhow::ensure!(!query.trim().is_empty(), "say what to search for");
            let found = client.search(&query).await.map_err(anyhow::Error::msg)?;
            if output::json() {
                output::value(&serde_json::Value::Array(found));
                return Ok(ExitCode::SUCCESS);
            }
            if found.is_empty() {
                output::line(&format!("nothing in the store matches {query:?}"));
            }
            for app in found {
                let id = app["appId"].as_str().unwrap_or_default();
                let mark = if appstore::installed(home, id).is_some() {
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
            let index = appstore::Index::default();
            let count = client
                .refresh(home, &index)
                .await
                .map_err(anyhow::Error::msg)?;
            output::line(&format!("{count} app(s) in the store's index"));
            Ok(ExitCode::SUCCESS)
        }
        Action::Info { app_id } => {
            let info = client.info(&app_id).await.map_err(anyhow::Error::msg)?;
            if output::json() {
                output::value(&info);
            } else {
                info_text(&info, appstore::installed(home, &app_id).as_ref());
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Install {
            app_id,
            version,
            yes,
            choices,
            prefer_store,
        } => {
            let installed = appstore::installed(home, &app_id);
            if let Some(mark) = &installed {
                anyhow::ensure!(
                    version.is_some(),
                    "{app_id} {} is installed; `aai-gateway store update {app_id}` brings the latest",
                    mark.version
                );
            }
            let elsewhere =
                appstore::offered_elsewhere(home, &config, &aai_compose::plugged_apps(), &app_id);
            if let Some((source, path)) = &elsewhere {
                anyhow::ensure!(
                    prefer_store,
                    "{app_id} is already offered by a {} descriptor, {}; the store's app would be hidden by it or hide it, so nothing was installed. `--prefer-store` installs the store's app and lets it win over that one.",
                    source.words(),
                    path.display()
                );
            }
            let fetched = client
                .fetch(
                    home,
                    &app_id,
                    version.as_deref(),
                    appstore::Trust {
                        installed: installed.as_ref(),
                        accept_publisher_change: choices.accept_publisher_change,
                    },
                )
                .await
                .map_err(anyhow::Error::msg)?;
            let downgrade = match &installed {
                Some(mark) => {
                    appstore::version_forward(mark, &fetched.version, choices.allow_downgrade)
                        .map_err(anyhow::Error::msg)?
                }
                None => false,
            };
            check_grants(&fetched, &choices)?;
            output::line("signature verified against the publisher's key");
            show(&fetched);
            if downgrade {
                output::line(&format!(
                    "  DOWNGRADE (--allow-downgrade): {} → {}",
                    installed.as_ref().map_or("", |m| m.version.as_str()),
                    fetched.version
                ));
            }
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
                appstore::set_preferred(home, &app_id, true).map_err(anyhow::Error::msg)?;
            }
            let path = appstore::write(home, &client.url, &fetched).map_err(anyhow::Error::msg)?;
            bind_credentials(home, &fetched, &choices, yes)?;
            output::line(&format!(
                "installed {}: a running gateway offers it now",
                path.display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Action::Update {
            app_ids,
            yes,
            choices,
        } => {
            // A variable is granted to the app the user names, never to whichever app of a
            // bulk update happens to ask for it.
            anyhow::ensure!(
                choices.grant_credential.is_empty() || app_ids.len() == 1,
                "--grant-credential binds a variable to one app: name it (`aai-gateway store update APP --grant-credential VAR`); nothing was updated"
            );
            let installed: Vec<appstore::Installed> = appstore::all_installed(home)
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
            let mut refused = 0;
            for app in installed {
                let checked = async {
                    let fetched = client
                        .fetch(
                            home,
                            &app.app_id,
                            None,
                            appstore::Trust {
                                installed: Some(&app),
                                accept_publisher_change: choices.accept_publisher_change,
                            },
                        )
                        .await?;
                    if fetched.sha256 == app.sha256 {
                        return Ok(None);
                    }
                    let downgrade =
                        appstore::version_forward(&app, &fetched.version, choices.allow_downgrade)?;
                    Ok::<_, appstore::StoreError>(Some((fetched, downgrade)))
                }
                .await;
                let (fetched, downgrade) = match checked {
                    Ok(Some(found)) => found,
                    Ok(None) => {
                        output::line(&format!("{} {} is the latest", app.app_id, app.version));
                        continue;
                    }
                    Err(problem) => {
                        // One app's refusal does not stop the others' updates.
                        eprintln!("{}: {problem}", app.app_id);
                        refused += 1;
                        continue;
                    }
                };
                let old = std::fs::read(appstore::descriptor_path(home, &app.app_id))
                    .ok()
                    .and_then(|bytes| aai_descriptor::parse(&app.app_id, &bytes).ok());
                output::line(&format!(
                    "{}: {} → {}{}",
                    app.app_id,
                    app.version,
                    fetched.version,
                    if downgrade {
                        "  DOWNGRADE (--allow-downgrade)"
                    } else {
                        ""
                    }
                ));
                match old {
                    Some(old) => {
                        let mut changes = appstore::diff(&old, &fetched.descriptor);
                        changes.extend(appstore::reach_diff(
                            &appstore::reach(&old),
                            &appstore::reach(&fetched.descriptor),
                            &app.app_id,
                        ));
                        if changes.is_empty() {
                            output::line(
                                "  the tools, their risks, the credentials and the origins stay the same",
                            );
                        }
                        for change in changes {
                            output::line(&format!("  {change}"));
                        }
                        identity(&fetched);
                    }
                    None => show(&fetched),
                }
                check_grants(&fetched, &choices)?;
                if confirm(&format!("Update {}?", app.app_id), yes)? {
                    appstore::write(home, &client.url, &fetched).map_err(anyhow::Error::msg)?;
                    bind_credentials(home, &fetched, &choices, yes)?;
                    updated += 1;
                }
            }
            output::line(&format!("{updated} updated"));
            anyhow::ensure!(refused == 0, "{refused} app(s) refused: see above");
            Ok(ExitCode::SUCCESS)
        }
        Action::List | Action::Uninstall { .. } => unreachable!("answered above"),
    }
}
