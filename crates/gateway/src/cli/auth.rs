//! `aai-gateway auth`: credentials of web apps and of MCP servers reached at a URL.

use std::io::IsTerminal;
use std::process::ExitCode;

use aai_descriptor::Platform;
use aai_engine::config::Config;
use anyhow::Context;
use clap::Subcommand;

use super::{for_person, output, runtime};

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Store an API key or access token for a web app or an MCP server at a URL (read without echo, or from stdin). It is
    /// bound to the app's API origin and sent nowhere else. With --env, a variable of an MCP server the gateway starts.
    Set {
        /// The appId (installed, or a registry copy).
        app: String,
        /// Bind to this origin (https://host[:port]) instead of the installed app's base_url.
        #[arg(long, conflicts_with = "env")]
        origin: Option<String>,
        /// Store the value of this variable of the app's MCP server instead (one its descriptor
        /// names in `env_from_store`): only that server's process gets it.
        #[arg(long, value_name = "VAR")]
        env: Option<String>,
    },
    /// Sign in to a web app or MCP server that uses OAuth: prints the page to open, waits for the browser.
    Login {
        /// The appId.
        app: String,
    },
    /// Which apps have credentials, and where from (never the secrets).
    Status,
    /// Forget an app's stored key or OAuth tokens.
    Logout {
        /// The appId.
        app: String,
    },
}

pub fn run(home: &std::path::Path, dev: bool, action: Action) -> anyhow::Result<ExitCode> {
    let store = aai_engine::web::credentials::Store::new(home);
    match action {
        Action::Set { app, origin, env } => {
            anyhow::ensure!(
                aai_descriptor::is_valid_app_id(&app),
                "{app:?} is not an appId (reverse-DNS, e.g. com.github.api)"
            );
            if let Some(var) = env {
                let named = store_vars(home, dev, &app)?;
                anyhow::ensure!(
                    named.contains(&var),
                    "{app} does not take {var} from the credential store (its descriptor's `platforms.mcp.env_from_store` names {})",
                    if named.is_empty() {
                        "none".to_owned()
                    } else {
                        named.join(", ")
                    }
                );
                let secret = read_secret(&format!("{var} for {app}"))?;
                let mut stored = store.get(&app).map_err(anyhow::Error::msg)?;
                stored.env.insert(var.clone(), secret);
                store.put(&app, &stored).map_err(anyhow::Error::msg)?;
                output::line(&format!(
                    "stored {var} of {app} in {}; only its MCP server gets it",
                    store.describe()
                ));
                return Ok(ExitCode::SUCCESS);
            }
            // The app must exist (installed or a registry copy); --origin only rebinds it.
            let installed = web_origin(home, dev, &app)?;
            let origin = match origin {
                Some(url) => aai_executor::rest::origin_of(&url).with_context(|| {
                    format!("--origin {url:?} is not a URL like https://api.example.com")
                })?,
                None => installed,
            };
            let secret = read_secret(&format!("Secret for {app}"))?;
            let mut stored = store.get(&app).map_err(anyhow::Error::msg)?;
            stored.secret = Some(secret);
            stored.origin = Some(origin.clone());
            store.put(&app, &stored).map_err(anyhow::Error::msg)?;
            output::line(&format!(
                "stored the secret of {app} in {}; it is sent only to {origin}",
                store.describe()
            ));
        }
        Action::Login { app } => return runtime()?.block_on(login(home, dev, &app)),
        Action::Status => {
            if !output::json() {
                output::line(&format!("credentials are kept in {}", store.describe()));
            }
            // Every web app that needs a credential, and where each one would come from.
            let (_, registry) = web_apps(home, dev);
            let mut apps: std::collections::BTreeMap<String, Option<String>> =
                store.apps().into_iter().map(|app| (app, None)).collect();
            let mut from_store: std::collections::BTreeMap<String, Vec<String>> =
                std::collections::BTreeMap::new();
            for app in &registry.apps {
                let Ok(descriptor) = app.descriptor() else {
                    continue;
                };
                if let Some(mcp) = &descriptor.platforms.mcp
                    && !mcp.fields.env_from_store.is_empty()
                {
                    apps.entry(app.id().to_owned()).or_insert(None);
                    from_store.insert(app.id().to_owned(), mcp.fields.env_from_store.clone());
                }
                let var = descriptor
                    .credentialed(app.platform)
                    .and_then(|w| w.auth)
                    .filter(|a| a.kind != "none")
                    .map(|a| {
                        a.fields
                            .get("env_var")
                            .and_then(serde_json::Value::as_str)
                            .map(str::to_owned)
                    });
                if let Some(var) = var {
                    apps.insert(app.id().to_owned(), var);
                }
            }
            let mut listed = Vec::new();
            for (app, var) in apps {
                let stored = store.get(&app).map_err(anyhow::Error::msg)?;
                let named = from_store.get(&app).map_or(&[][..], Vec::as_slice);
                let status = output::auth_status(&app, &stored, var.as_deref(), named);
                if output::json() {
                    // The same words as the text, never the secrets.
                    let words = status.trim_start().trim_start_matches(app.as_str()).trim();
                    listed.push(serde_json::json!({"app": app, "env_var": var,
                        "env_from_store": named, "status": words}));
                } else {
                    output::line(&status);
                }
            }
            if output::json() {
                output::value(&serde_json::json!({"store": store.describe(), "apps": listed}));
            }
        }
        Action::Logout { app } => {
            let removed = store.remove(&app).map_err(anyhow::Error::msg)?;
            output::line(&if removed {
                format!("forgot the credentials of {app}")
            } else {
                format!("nothing was stored for {app}")
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The config and the apps reached over HTTP (web apps, MCP servers at a URL) installed (or
/// copied from a registry) under `home`, for the `auth` commands; a config problem is said
/// once on stderr.
fn web_apps(
    home: &std::path::Path,
    dev: bool,
) -> (Config, aai_engine::catalog::snapshot::Snapshot) {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    let options = aai_compose::scan_options(home, &config, dev);
    let registry = aai_engine::scan_once(&options, &[Platform::Web, Platform::Mcp]);
    (config, registry)
}

/// A secret typed at the terminal without echo (asked as `what`), else the first line of stdin.
fn read_secret(what: &str) -> anyhow::Result<String> {
    let secret = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("{what} (not shown): "))
            .context("cannot read the secret")?
    } else {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the secret from stdin")?;
        line
    };
    let secret = secret.trim().to_owned();
    anyhow::ensure!(!secret.is_empty(), "no secret given; nothing stored");
    Ok(secret)
}

/// The variables the installed MCP server `app` takes from the credential store.
fn store_vars(home: &std::path::Path, dev: bool, app: &str) -> anyhow::Result<Vec<String>> {
    let (_, registry) = web_apps(home, dev);
    let found = aai_engine::pipeline::find_app(&registry, app)
        .map_err(|error| anyhow::anyhow!("{}", for_person(&error.message)))?;
    let descriptor = found
        .descriptor()
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    Ok(descriptor
        .platforms
        .mcp
        .as_ref()
        .map(|mcp| mcp.fields.env_from_store.clone())
        .unwrap_or_default())
}

/// The API origin of the installed web app `app`, which a stored secret is bound to.
fn web_origin(home: &std::path::Path, dev: bool, app: &str) -> anyhow::Result<String> {
    let (_, registry) = web_apps(home, dev);
    let found = aai_engine::pipeline::find_app(&registry, app).map_err(|error| {
        anyhow::anyhow!(
            "{}; or bind the secret with --origin https://host",
            error.message
        )
    })?;
    let base = found
        .descriptor()
        .map_err(|error| anyhow::anyhow!("{}", error.message))?
        .credentialed(found.platform)
        .map(|web| web.base_url)
        .with_context(|| format!("{app} is not a web app or an MCP server at a URL"))?;
    aai_executor::rest::origin_of(&base)
        .with_context(|| format!("{app}: base_url {base:?} is not a URL"))
}

/// `auth login`: the OAuth sign-in of a web app from a terminal. The page to open is printed
/// on stdout (and opened in a browser when there is a desktop); the gateway listens for the
/// redirect on 127.0.0.1 until the browser comes back, then stores the tokens.
async fn login(home: &std::path::Path, dev: bool, app: &str) -> anyhow::Result<ExitCode> {
    use aai_executor::rest::Auth;
    let (config, registry) = web_apps(home, dev);
    let found = aai_engine::pipeline::find_app(&registry, app)
        .map_err(|error| anyhow::anyhow!("{}", for_person(&error.message)))?;
    let descriptor = found
        .descriptor()
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    let section = descriptor
        .credentialed(found.platform)
        .with_context(|| format!("{app} is not a web app or an MCP server at a URL"))?;
    let kind = section.auth.as_ref().map_or("none", |a| a.kind.as_str());
    anyhow::ensure!(
        kind == "oauth2",
        "{} signs in with {kind}, not OAuth: {}",
        descriptor.app_id,
        if kind == "none" {
            "it needs no credentials".to_owned()
        } else {
            format!(
                "store its key with `aai-gateway auth set {}`",
                descriptor.app_id
            )
        }
    );
    let web = aai_engine::web::Web::new(&config, home).map_err(anyhow::Error::msg)?;
    // An explicit sign-in replaces what was stored.
    let mut stored = web
        .auth
        .store
        .get(&descriptor.app_id)
        .map_err(anyhow::Error::msg)?;
    if stored.oauth.take().is_some() {
        web.auth
            .store
            .put(&descriptor.app_id, &stored)
            .map_err(anyhow::Error::msg)?;
    }
    let error = match web.auth.credential(&descriptor, &section).await {
        Ok(_) => anyhow::bail!("{} did not ask for a sign-in", descriptor.app_id),
        Err(error) => error,
    };
    let Some(url) = error
        .detail
        .as_ref()
        .and_then(|d| d.get("authorization_url"))
        .and_then(serde_json::Value::as_str)
    else {
        anyhow::bail!("{}", for_person(&error.message));
    };
    eprintln!(
        "Sign in to {} by opening this page (it is opened for you when there is a desktop):",
        descriptor.name
    );
    output::line(url);
    eprintln!(
        "Waiting for the browser to come back (up to {} minutes)…",
        aai_engine::web::auth::AUTHORIZATION_WAIT.as_secs() / 60
    );
    if web
        .auth
        .wait_for_authorization(
            &descriptor.app_id,
            aai_engine::web::auth::AUTHORIZATION_WAIT,
        )
        .await
    {
        eprintln!(
            "Signed in: {} is authorized; the tokens are in {}.",
            descriptor.app_id,
            web.auth.store.describe()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        let why = web
            .auth
            .credential(&descriptor, &section)
            .await
            .err()
            .map_or_else(
                || "no tokens arrived".to_owned(),
                |e| for_person(&e.message),
            );
        anyhow::bail!("the sign-in did not complete: {why}")
    }
}
