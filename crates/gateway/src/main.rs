//! `aai-gateway`: the stdio MCP server (default), plus `--scan`, `validate` and `call`.

mod output;

use std::io::IsTerminal;
use std::process::ExitCode;

use aai_descriptor::{AaiError, Platform};
use aai_executor::Executors;
use aai_gateway::config::{self, Config};
use aai_gateway::discovery::ScanOptions;
use aai_gateway::pipeline::{Gateway, render};
use aai_gateway::server::AaiServer;
use anyhow::Context;
use clap::{Parser, Subcommand};
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

/// One MCP server for using your applications through their own automation interfaces.
///
/// Without a subcommand it serves MCP on stdio (how MCP clients start it). Files live under
/// AAI_HOME (default ~/.aai): descriptors in <appId>/aai.json, config.json, data.db (audit log
/// and approvals) and, in server mode, logs/aai-gateway.log (rotated at 10 MB, 3 kept).
#[derive(Parser, Debug)]
#[command(name = "aai-gateway", version, about, long_about)]
struct Cli {
    /// Run the stdio MCP server (the default when no subcommand is given).
    #[arg(long)]
    mcp: bool,
    /// Also scan development build folders (Xcode DerivedData) when serving or with --scan.
    #[arg(long)]
    dev: bool,
    /// List the discovered apps and every skipped descriptor with the reason, then exit.
    #[arg(long)]
    scan: bool,
    /// Log filter for stderr (e.g. `debug`, `aai_gateway=trace`); also `AAI_LOG`.
    #[arg(long, global = true, env = "AAI_LOG", default_value = "info")]
    log_level: String,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The gateway's SQLite file under `AAI_HOME`: audit log and consent grants.
const DATA_DB: &str = "data.db";

#[derive(Subcommand, Debug)]
enum Command {
    /// Remembered approvals: which client may run which app's tools without asking.
    Consent {
        #[command(subcommand)]
        action: ConsentAction,
    },
    /// The audit log of every call.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Credentials of web apps: API keys, tokens, OAuth authorizations.
    Auth {
        #[command(subcommand)]
        action: AuthAction,
    },
    /// Check aai.json files; exit 1 if any is invalid, listing file, JSON pointer and problem.
    Validate {
        /// aai.json files, or folders whose aai.json files (at any depth) are all checked.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
    /// Run one tool through the same pipeline as MCP calls, and print its result.
    Call {
        /// The app's appId (or its name or alias).
        app: String,
        /// The tool's name, from the app's guide.
        tool: String,
        /// The tool's arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Print what would run (program, argv, stdin, env) as JSON instead of running it.
        #[arg(long)]
        dry_run: bool,
        /// Plan from this platform's section (with --dry-run), e.g. check a macOS tool on Linux.
        #[arg(long, value_parser = parse_platform, requires = "dry_run")]
        platform: Option<Platform>,
        /// Also find apps in development build folders (Xcode DerivedData).
        #[arg(long)]
        dev: bool,
    },
    /// Fetch, validate and print the descriptor a site serves at `.well-known/aai.json` (for
    /// its author), or forget a discovered app.
    Discover {
        /// A URL, a domain, or a registry name (with --forget also an appId).
        target: String,
        /// Fetch anew, bypassing the cache.
        #[arg(long)]
        refresh: bool,
        /// Forget the discovered app (its cached descriptor) instead.
        #[arg(long, conflicts_with = "refresh")]
        forget: bool,
    },
    /// The gateway's config.json: check it, or print its JSON Schema.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) on stdout: `aai-gateway man > aai-gateway.1`.
    Man,
}

/// A `--platform` value: a key of `platforms` in aai.json.
fn parse_platform(text: &str) -> Result<Platform, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        let keys: Vec<&str> = Platform::ALL.iter().map(|p| p.key()).collect();
        format!("expected one of {}", keys.join(", "))
    })
}

#[derive(Subcommand, Debug)]
enum ConsentAction {
    /// List every grant.
    List,
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

#[derive(Subcommand, Debug)]
enum ConfigAction {
    /// Check AAI_HOME/config.json (or FILE): every problem with its place; exit 1 if any.
    Check {
        /// Another file to check instead.
        file: Option<std::path::PathBuf>,
    },
    /// Print the JSON Schema of config.json.
    Schema,
    /// Print the JSON Schema of a registry's app list (`GET /api/v1/apps`).
    RegistrySchema,
}

#[derive(Subcommand, Debug)]
enum AuthAction {
    /// Store an API key or access token for a web app (read without echo, or from stdin). It is
    /// bound to the app's API origin and sent nowhere else.
    Set {
        /// The web app's appId (installed, or a registry copy).
        app: String,
        /// Bind to this origin (https://host[:port]) instead of the installed app's base_url.
        #[arg(long)]
        origin: Option<String>,
    },
    /// Sign in to a web app that uses OAuth: prints the page to open, waits for the browser.
    Login {
        /// The web app's appId.
        app: String,
    },
    /// Which web apps have credentials, and where from (never the secrets).
    Status,
    /// Forget a web app's stored key or OAuth tokens.
    Logout {
        /// The web app's appId.
        app: String,
    },
}

#[derive(Subcommand, Debug)]
enum AuditAction {
    /// Check the hash chain; exit 1 naming the first edited, missing, inserted or moved row.
    Verify,
    /// The newest rows; with -f keep printing new ones.
    Tail {
        /// How many rows.
        #[arg(short = 'n', default_value = "20")]
        count: i64,
        /// Keep printing new rows as they come.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Rows filtered by app, tool and age (`--since 2h`, `--since 2026-11-22T10:00:00Z`).
    Show {
        /// Only this appId.
        #[arg(long)]
        app: Option<String>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only rows newer than this age or time.
        #[arg(long)]
        since: Option<String>,
    },
    /// Every row as JSON lines or CSV on stdout.
    Export {
        /// jsonl or csv.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: output::ExportFormat,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let serving = cli.command.is_none() && !cli.scan;
    let _log_guards = init_logging(&cli.log_level, serving.then(config::aai_home).as_deref());
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            // Printed once, for the person at the keyboard (not also as a log line).
            eprintln!("aai-gateway: error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr through a lossy background writer: a client that never reads our
/// stderr must not be able to stall the server, so lines are dropped instead. In server mode
/// they also go to `AAI_HOME/logs/aai-gateway.log`, rotated at 10 MB (3 files kept). No
/// colours: the subscriber is built without them, and escape codes do not belong in files.
fn init_logging(
    filter: &str,
    log_home: Option<&std::path::Path>,
) -> Vec<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(2_000)
        .finish(std::io::stderr());
    let mut guards = vec![guard];
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false)
        .with_target(false);
    let file = log_home.and_then(|home| {
        let file = aai_gateway::logfile::SizeRotating::open(&home.join("logs"), "aai-gateway.log")
            .map_err(|error| eprintln!("aai-gateway: no log file: {error}"))
            .ok()?;
        // A small queue: the default (128,000 lines) allocates megabytes at start-up.
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(true)
            .buffered_lines_limit(2_000)
            .finish(file);
        guards.push(guard);
        Some(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(false)
                .with_target(false)
                .boxed(),
        )
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(file)
        .init();
    guards
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let home = config::aai_home();
    aai_gateway::private::tighten_and_log(&home);
    match cli.command {
        Some(Command::Validate { files }) => Ok(validate(&files)),
        Some(Command::Auth { action }) => auth(&home, false, action),
        Some(Command::Consent { action }) => consent(&home, false, action),
        Some(Command::Discover {
            target,
            refresh,
            forget,
        }) => {
            let (config, _) = Config::load(&home);
            let web = aai_gateway::web::Web::new(&config, &home).map_err(anyhow::Error::msg)?;
            if forget {
                let forgotten = web.forget_cached(&target);
                anyhow::ensure!(
                    !forgotten.is_empty(),
                    "no discovered app {target:?} is remembered"
                );
                output::line(&format!("forgot {}", forgotten.join(", ")));
                return Ok(ExitCode::SUCCESS);
            }
            let found = runtime()?
                .block_on(web.discover_with(&target, refresh))
                .map_err(|error| {
                    anyhow::anyhow!(
                        "{} ({})",
                        for_person(&error.message),
                        error.kind.type_name()
                    )
                })?;
            if let Some(note) = &found.stale {
                eprintln!("note: {note}");
            }
            eprintln!(
                "{} ({}): valid, {} tool(s); from {}",
                found.app.descriptor.name,
                found.app.id(),
                found
                    .app
                    .descriptor
                    .tools(Platform::Web)
                    .map_or(0, |t| t.len()),
                found.app.source.display()
            );
            output::line(&serde_json::to_string_pretty(&found.app.descriptor)?);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Config { action }) => match action {
            ConfigAction::Schema => {
                output::line(&serde_json::to_string_pretty(&Config::schema())?);
                Ok(ExitCode::SUCCESS)
            }
            ConfigAction::RegistrySchema => {
                output::line(&serde_json::to_string_pretty(
                    &aai_gateway::web::RegistryList::schema(),
                )?);
                Ok(ExitCode::SUCCESS)
            }
            ConfigAction::Check { file } => {
                let path = file.unwrap_or_else(|| home.join("config.json"));
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let problems = Config::check(&path, &bytes);
                if problems.is_empty() {
                    output::line(&format!("{}: ok", path.display()));
                    Ok(ExitCode::SUCCESS)
                } else {
                    for problem in &problems {
                        output::line(&format!("the config is invalid: {problem}"));
                    }
                    Ok(ExitCode::from(1))
                }
            }
        },
        Some(Command::Completions { shell }) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            output::generated(|out| {
                clap_complete::generate(shell, &mut command, "aai-gateway", out);
            });
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Man) => {
            let command = <Cli as clap::CommandFactory>::command();
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .context("cannot render the manual page")?;
            output::generated(|out| {
                let _ = out.write_all(&page);
            });
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Audit { action }) => audit(&home.join(DATA_DB), action),
        Some(Command::Call {
            app,
            tool,
            args,
            dry_run,
            platform,
            dev,
        }) => {
            let args: serde_json::Value =
                serde_json::from_str(&args).context("--args is not valid JSON")?;
            let request = CallRequest {
                app: &app,
                tool: &tool,
                args: &args,
                dry_run,
                platform,
            };
            runtime()?.block_on(call(&home, dev, request))
        }
        None if cli.scan => {
            let (config, problem) = Config::load(&home);
            if let Some(problem) = problem {
                eprintln!("warning: {problem}");
            }
            let options = ScanOptions::new(&home, &config, cli.dev);
            output::scan_report(
                &aai_gateway::scan_once(&options, &config.platforms),
                &home,
                &config.platforms,
            );
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let _ = cli.mcp;
            runtime()?.block_on(serve(home, cli.dev))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn auth(home: &std::path::Path, dev: bool, action: AuthAction) -> anyhow::Result<ExitCode> {
    let store = aai_gateway::web::store::Store::new(home);
    match action {
        AuthAction::Set { app, origin } => {
            anyhow::ensure!(
                aai_descriptor::is_valid_app_id(&app),
                "{app:?} is not an appId (reverse-DNS, e.g. com.github.api)"
            );
            // The app must exist (installed or a registry copy); --origin only rebinds it.
            let installed = web_origin(home, dev, &app)?;
            let origin = match origin {
                Some(url) => aai_executor::rest::origin_of(&url).with_context(|| {
                    format!("--origin {url:?} is not a URL like https://api.example.com")
                })?,
                None => installed,
            };
            let secret = if std::io::stdin().is_terminal() {
                rpassword::prompt_password(format!("Secret for {app} (not shown): "))
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
            let mut stored = store.get(&app).map_err(anyhow::Error::msg)?;
            stored.secret = Some(secret);
            stored.origin = Some(origin.clone());
            store.put(&app, &stored).map_err(anyhow::Error::msg)?;
            output::line(&format!(
                "stored the secret of {app} in {}; it is sent only to {origin}",
                store.describe()
            ));
        }
        AuthAction::Login { app } => return runtime()?.block_on(login(home, dev, &app)),
        AuthAction::Status => {
            output::line(&format!("credentials are kept in {}", store.describe()));
            // Every web app that needs a credential, and where each one would come from.
            let (_, registry) = web_apps(home, dev);
            let mut apps: std::collections::BTreeMap<String, Option<String>> =
                store.apps().into_iter().map(|app| (app, None)).collect();
            for app in &registry.apps {
                let var = app
                    .descriptor
                    .platforms
                    .web
                    .as_ref()
                    .and_then(|w| w.fields.auth.as_ref())
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
            for (app, var) in apps {
                let stored = store.get(&app).map_err(anyhow::Error::msg)?;
                output::line(&output::auth_status(&app, &stored, var.as_deref()));
            }
        }
        AuthAction::Logout { app } => {
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

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The files `validate` checks: each file named, and every `aai.json` under each folder named.
fn descriptor_files(inputs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found: Vec<std::path::PathBuf> = ignore::WalkBuilder::new(input)
                .standard_filters(false)
                .follow_links(false)
                .build()
                .flatten()
                .filter(|e| {
                    e.file_type().is_some_and(|t| t.is_file()) && e.file_name() == "aai.json"
                })
                .map(ignore::DirEntry::into_path)
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    files
}

fn validate(inputs: &[std::path::PathBuf]) -> ExitCode {
    let files = descriptor_files(inputs);
    if files.is_empty() {
        eprintln!(
            "aai-gateway: no aai.json found under {}",
            inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(1);
    }
    let mut ok = true;
    for file in &files {
        let name = file.display().to_string();
        let result = match std::fs::read(file) {
            Ok(bytes) => aai_descriptor::parse(&name, &bytes).map(|_| ()),
            Err(error) => Err(aai_descriptor::LoadError {
                source_name: name.clone(),
                problems: vec![aai_descriptor::Problem::new(
                    "",
                    format!("cannot read: {error}"),
                )],
            }),
        };
        ok &= result.is_ok();
        output::validation(&name, &result);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// What `call` was asked to do.
struct CallRequest<'a> {
    app: &'a str,
    tool: &'a str,
    args: &'a serde_json::Value,
    dry_run: bool,
    platform: Option<Platform>,
}

async fn call(
    home: &std::path::Path,
    dev: bool,
    request: CallRequest<'_>,
) -> anyhow::Result<ExitCode> {
    let (mut config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    if let Some(platform) = request.platform {
        config.platforms = vec![platform];
    }
    let options = ScanOptions::new(home, &config, dev);
    let registry = aai_gateway::scan_once(&options, &config.platforms);
    let max = config.max_result_chars;
    let executors = Executors::with_settings(config.executors.clone(), None);
    let gateway = aai_gateway::fixed_gateway(registry, config, executors, home.join(DATA_DB));
    let result = if request.dry_run {
        gateway.plan(request.app, request.tool, request.args).await
    } else {
        // At a terminal, a call that needs approval asks the person at the keyboard.
        let asker = (std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
            .then_some(output::TerminalAsker);
        gateway
            .exec_asking(
                &aai_gateway::pipeline::Caller::named("cli"),
                request.app,
                request.tool,
                request.args,
                asker.as_ref().map(|a| a as &dyn aai_gateway::gate::Asker),
            )
            .await
    };
    match result {
        Ok(plan) if request.dry_run => {
            output::plan(&plan);
            Ok(ExitCode::SUCCESS)
        }
        Ok(output) => {
            output::call_output(&render(&output, max).text);
            Ok(ExitCode::SUCCESS)
        }
        Err(AaiError { kind, message, .. }) => {
            eprintln!(
                "{} ({}): {}",
                kind.type_name(),
                kind.code(),
                for_person(&message)
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// An error message written for an agent, reworded for the person at the keyboard: the
/// gateway's MCP tools are not theirs to call, and they are the user the agent would ask.
fn for_person(message: &str) -> String {
    let mut text = message
        .replace(
            " Call aai_apps to search.",
            " `aai-gateway --scan` lists them.",
        )
        .replace("Ask the user to run", "Run")
        .replace("ask the user what to do instead", "try something else");
    if let Some(start) = text.find(" Each app's guide is its app_* tool") {
        let end = text[start..]
            .find(").")
            .map_or(text.len(), |i| start + i + 2);
        text.replace_range(start..end, " `aai-gateway --scan` lists them.");
    }
    for marker in [" Call app_", " Call aai_guide"] {
        while let Some(start) = text.find(marker) {
            let end = text[start + 1..]
                .find(". ")
                .map_or(text.len(), |i| start + 1 + i + 1);
            text.replace_range(start..end, "");
        }
    }
    text
}

async fn serve(home: std::path::PathBuf, dev: bool) -> anyhow::Result<()> {
    if let Err(error) = aai_gateway::private::create_dir(&home) {
        tracing::warn!(home = %home.display(), "cannot create the gateway's folder: {error}");
    }
    let (config, problem) = Config::load(&home);
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    let cancel = CancellationToken::new();
    let registry =
        aai_gateway::live::spawn(home.clone(), dev, config.platforms.clone(), cancel.clone());
    let max_request_bytes = config.max_request_bytes;
    let executors = Executors::with_settings(config.executors.clone(), None);
    let gateway = Gateway::new(
        registry.clone(),
        config,
        executors,
        home.join(DATA_DB),
        &home,
    );
    if gateway.config.web.registry_url.is_some() {
        // Start-up never waits on the network: discovery picks the copies up when they land.
        let web = gateway.web.clone();
        let every = gateway.config.web.registry_refresh_seconds;
        tokio::spawn(async move {
            loop {
                match web.refresh_registry().await {
                    Ok(counts) => tracing::info!(
                        listed = counts.listed,
                        kept = counts.kept,
                        skipped = counts.skipped,
                        "web registry refreshed"
                    ),
                    Err(error) => {
                        tracing::warn!(%error, "web registry not refreshed; using the copies from last time")
                    }
                }
                if every == 0 {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_secs(every)).await;
            }
        });
    }
    tracing::info!(home = %home.display(), version = env!("CARGO_PKG_VERSION"), "aai-gateway serving MCP on stdio");
    let server = AaiServer::new(gateway);
    let running = server
        .clone()
        .serve(aai_gateway::transport::guarded(
            tokio::io::stdin(),
            tokio::io::stdout(),
            max_request_bytes,
        ))
        .await
        .context("the MCP session did not start")?;
    // Sessions that began with `initialize` get list_changed as plain notifications; the
    // 2026-07-28 lifecycle gets them through `subscriptions/listen` instead.
    let peer = running.peer().clone();
    let mut changes = registry;
    let mut last = changes.borrow_and_update().clone();
    let notifier = tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let current = changes.borrow_and_update().clone();
            if current.same_apps(&last) || peer.peer_info().is_none() {
                last = current;
                continue;
            }
            last = current;
            let tools = peer.notify_tool_list_changed().await;
            let resources = peer.notify_resource_list_changed().await;
            if tools.is_err() || resources.is_err() {
                break;
            }
            // Coalesce bursts (a big first scan, a folder copied in): the watch channel keeps
            // only the newest snapshot, so one notification covers what changed meanwhile.
            tokio::time::sleep(aai_gateway::NOTIFY_EVERY).await;
        }
    });
    let reason = running.waiting().await;
    tracing::info!(?reason, "client disconnected");
    server.end_session();
    notifier.abort();
    cancel.cancel();
    Ok(())
}

fn consent(home: &std::path::Path, dev: bool, action: ConsentAction) -> anyhow::Result<ExitCode> {
    let db = home.join(DATA_DB);
    let grants = aai_audit::Grants::open(&db)?;
    match action {
        ConsentAction::List => {
            let once = aai_audit::AuditLog::open(&db)?.query(&aai_audit::Filter {
                decision_contains: Some(":allowed_once".into()),
                result: Some("started".into()),
                ..Default::default()
            })?;
            output::grants(&grants.list()?, &once);
        }
        ConsentAction::Grant { app, tool, client } => {
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
        ConsentAction::Revoke { app, tool, client } => {
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

/// The config and the web apps installed (or copied from a registry) under `home`, for the
/// `auth` commands; a config problem is said once on stderr.
fn web_apps(home: &std::path::Path, dev: bool) -> (Config, aai_gateway::registry::Registry) {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    let options = ScanOptions::new(home, &config, dev);
    let registry = aai_gateway::scan_once(&options, &[Platform::Web]);
    (config, registry)
}

/// The API origin of the installed web app `app`, which a stored secret is bound to.
fn web_origin(home: &std::path::Path, dev: bool, app: &str) -> anyhow::Result<String> {
    let (_, registry) = web_apps(home, dev);
    let found = aai_gateway::pipeline::find_app(&registry, app).map_err(|error| {
        anyhow::anyhow!(
            "{}; or bind the secret with --origin https://host",
            error.message
        )
    })?;
    let base = found
        .descriptor
        .platforms
        .web
        .as_ref()
        .map(|web| web.fields.base_url.clone())
        .with_context(|| format!("{app} is not a web app"))?;
    aai_executor::rest::origin_of(&base)
        .with_context(|| format!("{app}: base_url {base:?} is not a URL"))
}

/// `auth login`: the OAuth sign-in of a web app from a terminal. The page to open is printed
/// on stdout (and opened in a browser when there is a desktop); the gateway listens for the
/// redirect on 127.0.0.1 until the browser comes back, then stores the tokens.
async fn login(home: &std::path::Path, dev: bool, app: &str) -> anyhow::Result<ExitCode> {
    use aai_executor::rest::Auth;
    let (config, registry) = web_apps(home, dev);
    let found = aai_gateway::pipeline::find_app(&registry, app)
        .map_err(|error| anyhow::anyhow!("{}", for_person(&error.message)))?;
    let descriptor = &found.descriptor;
    let section = descriptor
        .platforms
        .web
        .as_ref()
        .with_context(|| format!("{app} is not a web app"))?;
    let kind = section
        .fields
        .auth
        .as_ref()
        .map_or("none", |a| a.kind.as_str());
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
    let web = aai_gateway::web::Web::new(&config, home).map_err(anyhow::Error::msg)?;
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
    let error = match web.auth.credential(descriptor, &section.fields).await {
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
        aai_gateway::web::auth::AUTHORIZATION_WAIT.as_secs() / 60
    );
    if web
        .auth
        .wait_for_authorization(
            &descriptor.app_id,
            aai_gateway::web::auth::AUTHORIZATION_WAIT,
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
            .credential(descriptor, &section.fields)
            .await
            .err()
            .map_or_else(
                || "no tokens arrived".to_owned(),
                |e| for_person(&e.message),
            );
        anyhow::bail!("the sign-in did not complete: {why}")
    }
}

/// The app and tool a `consent` command names, checked against the apps discovered.
async fn resolve(
    home: &std::path::Path,
    dev: bool,
    app: &str,
    tool: Option<&str>,
) -> anyhow::Result<(String, Option<String>)> {
    let (config, _) = Config::load(home);
    let options = ScanOptions::new(home, &config, dev);
    let registry = aai_gateway::scan_once(&options, &config.platforms);
    let executors = Executors::with_settings(config.executors.clone(), None);
    let gateway = aai_gateway::fixed_gateway(registry, config, executors, home.join(DATA_DB));
    gateway
        .resolve(app, tool)
        .await
        .map_err(|error| anyhow::anyhow!("{}", error.message))
}

/// `2h`, `30m`, `1d` ago, or an RFC 3339 time, as milliseconds since the epoch.
fn parse_since(text: &str) -> anyhow::Result<i64> {
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        let ms = time
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        return Ok(i64::try_from(ms).unwrap_or(i64::MAX));
    }
    let ago = humantime::parse_duration(text).with_context(|| {
        format!("--since {text:?}: give an age like 2h or a time like 2026-11-22T10:00:00Z")
    })?;
    Ok(aai_audit::now_ms() - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX))
}

fn audit(db: &std::path::Path, action: AuditAction) -> anyhow::Result<ExitCode> {
    let log = aai_audit::AuditLog::open(db)?;
    match action {
        AuditAction::Verify => match log.verify() {
            Ok(rows) => {
                output::line(&format!("ok: {rows} rows, chain intact"));
                Ok(ExitCode::SUCCESS)
            }
            Err(bad) => {
                output::line(&format!("TAMPERED: {bad}"));
                Ok(ExitCode::from(1))
            }
        },
        AuditAction::Tail { count, follow } => {
            let rows = log.tail(count)?;
            let mut last = rows.last().map_or(0, |r| r.id);
            output::rows(&rows);
            // `-f` follows until interrupted, like `tail -f`.
            if follow {
                loop {
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    let new = log.query(&aai_audit::Filter {
                        after_id: Some(last),
                        ..Default::default()
                    })?;
                    last = new.last().map_or(last, |r| r.id);
                    output::rows(&new);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditAction::Show { app, tool, since } => {
            let since_ms = since.as_deref().map(parse_since).transpose()?;
            output::rows(&log.query(&aai_audit::Filter {
                app,
                tool,
                since_ms,
                ..Default::default()
            })?);
            Ok(ExitCode::SUCCESS)
        }
        AuditAction::Export { format } => {
            output::export(&log.query(&aai_audit::Filter::default())?, format);
            Ok(ExitCode::SUCCESS)
        }
    }
}
