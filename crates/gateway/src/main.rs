//! `aai-gateway`: the stdio MCP server (default), plus `--scan`, `validate` and `call`.

mod output;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

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
#[derive(Parser, Debug)]
#[command(name = "aai-gateway", version, about, long_about = None)]
struct Cli {
    /// Run the stdio MCP server (the default when no subcommand is given).
    #[arg(long)]
    mcp: bool,
    /// Also scan development build folders (Xcode DerivedData).
    #[arg(long, global = true)]
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

#[derive(Subcommand, Debug)]
enum Command {
    /// Check aai.json files; exit 1 if any is invalid, listing file, JSON pointer and problem.
    Validate {
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
    /// Run one tool through the same pipeline as MCP calls, and print its result.
    Call {
        app: String,
        tool: String,
        /// The tool's arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _log_guard = init_logging(&cli.log_level);
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("aai-gateway: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr through a lossy background writer: a client that never reads our
/// stderr must not be able to stall the server, so lines are dropped instead.
fn init_logging(filter: &str) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(2_000)
        .finish(std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
    guard
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let home = config::aai_home();
    match cli.command {
        Some(Command::Validate { files }) => Ok(validate(&files)),
        Some(Command::Call { app, tool, args }) => {
            let args: serde_json::Value =
                serde_json::from_str(&args).context("--args is not valid JSON")?;
            runtime()?.block_on(call(&home, cli.dev, &app, &tool, &args))
        }
        None if cli.scan => {
            let (config, problem) = Config::load(&home);
            if let Some(problem) = problem {
                eprintln!("warning: {problem}");
            }
            let options = ScanOptions {
                home: home.clone(),
                paths: config.paths,
                dev: cli.dev,
            };
            output::scan_report(
                &aai_gateway::scan_once(&options, Platform::current()),
                &home,
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

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn validate(files: &[std::path::PathBuf]) -> ExitCode {
    let mut ok = true;
    for file in files {
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

async fn call(
    home: &std::path::Path,
    dev: bool,
    app: &str,
    tool: &str,
    args: &serde_json::Value,
) -> anyhow::Result<ExitCode> {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    let options = ScanOptions {
        home: home.to_path_buf(),
        paths: config.paths.clone(),
        dev,
    };
    let registry = aai_gateway::scan_once(&options, Platform::current());
    let max = config.max_result_chars;
    let gateway = aai_gateway::fixed_gateway(registry, config, Executors::new());
    match gateway.exec(app, tool, args).await {
        Ok(output) => {
            output::call_output(&render(&output, max).text);
            Ok(ExitCode::SUCCESS)
        }
        Err(AaiError { kind, message, .. }) => {
            eprintln!("{} ({}): {message}", kind.type_name(), kind.code());
            Ok(ExitCode::from(1))
        }
    }
}

async fn serve(home: std::path::PathBuf, dev: bool) -> anyhow::Result<()> {
    let (config, problem) = Config::load(&home);
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    let cancel = CancellationToken::new();
    let registry = aai_gateway::live::spawn(home.clone(), dev, Platform::current(), cancel.clone());
    let max_request_bytes = config.max_request_bytes;
    let gateway = Arc::new(Gateway {
        registry: registry.clone(),
        executors: Executors::new(),
        config,
        platform: Platform::current(),
    });
    tracing::info!(home = %home.display(), version = env!("CARGO_PKG_VERSION"), "aai-gateway serving MCP on stdio");
    let running = AaiServer::new(gateway)
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
    notifier.abort();
    cancel.cancel();
    Ok(())
}
