//! The command line: one file per subcommand (as cargo and uv lay theirs out). Without a
//! subcommand the gateway serves MCP on stdio.

mod audit;
mod auth;
mod call;
mod config;
mod consent;
mod daemon;
mod describe;
mod discover;
mod docs;
mod doctor;
mod import;
mod init;
mod logfile;
mod logging;
pub mod output;
mod scan;
mod schedule;
mod serve;
mod service;
mod store;
mod validate;
mod workflow;

use std::process::ExitCode;

use aai_descriptor::Platform;
use anyhow::Context;
use clap::{Parser, Subcommand};

/// One MCP server for using your applications through their own automation interfaces.
///
/// Without a subcommand it serves MCP on stdio (how MCP clients start it). Files live under
/// AAI_HOME (default ~/.aai): descriptors in <appId>/aai.json, config.json, data.db (audit log
/// and approvals) and, in server mode, logs/aai-gateway.log (rotated at 10 MB, 3 kept).
#[derive(Parser, Debug)]
#[command(name = "aai-gateway", version, about, long_about)]
pub struct Cli {
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
    /// Print the data as JSON instead of text (every command that prints data).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The gateway's SQLite file under `AAI_HOME`: audit log and consent grants.
pub const DATA_DB: &str = "data.db";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Set up this home for a first run: a starter config.json (with notes), the folder
    /// agents may work in, and the line to add to Claude Code, Codex, Claude Desktop and
    /// Cursor. An existing config.json is left as it is.
    Init {
        /// The folder agents may work in (files, terminal); asked at a terminal, else
        /// ~/Projects.
        #[arg(long, value_name = "DIR")]
        folder: Option<String>,
    },
    /// Remembered approvals: which client may run which app's tools without asking.
    Consent {
        #[command(subcommand)]
        action: consent::Action,
    },
    /// The audit log of every call.
    Audit {
        #[command(subcommand)]
        action: audit::Action,
    },
    /// Credentials of web apps: API keys, tokens, OAuth authorizations.
    Auth {
        #[command(subcommand)]
        action: auth::Action,
    },
    /// Bring in the MCP servers your clients already start (Claude Desktop, Claude Code,
    /// Cursor, VS Code, Windsurf, Codex): a descriptor each, so they run behind the gate.
    Import(import::Args),
    /// Draft an aai.json from what an app already publishes: a D-Bus service, an OpenAPI
    /// document, a macOS scripting dictionary, a COM type library.
    Describe(describe::Args),
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
        /// The tool's name, from the app's guide; without one, the guide is printed.
        tool: Option<String>,
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
        action: config::Action,
    },
    /// For each built-in tool (screen, input, apps, files, terminal, system): what serves it on
    /// this machine, or why nothing can and what would fix it.
    Doctor,
    /// Run the gateway for every client of this user: MCP over Streamable HTTP on loopback
    /// (bearer token in AAI_HOME/run/token, address in AAI_HOME/run/serve.json). Stdio
    /// gateways that clients start then forward to it.
    Serve {
        /// Where to listen (loopback only); port 0 picks a free one.
        #[arg(long, value_name = "127.0.0.1:PORT")]
        listen: Option<String>,
        /// Also scan development build folders (Xcode DerivedData).
        #[arg(long)]
        dev: bool,
    },
    /// Keep the daemon running for this user: a systemd user unit, launchd LaunchAgent or
    /// Task Scheduler task that starts `aai-gateway serve` and restarts it after a crash.
    Service {
        #[command(subcommand)]
        action: service::Action,
    },
    /// Emergency stop: cancel every running call, kill its processes, release held keys and
    /// refuse every call until `aai-gateway resume`.
    Stop,
    /// Lift the emergency stop.
    Resume,
    /// Calls waiting for your approval in the daemon (from clients that cannot ask you).
    Approvals {
        #[command(subcommand)]
        action: Option<ApprovalAction>,
    },
    /// Whether a gateway daemon runs, where, and whether its emergency stop is on.
    Status,
    /// The app store (config `store.url`): search, info, install, update, uninstall, list.
    Store {
        #[command(subcommand)]
        action: store::Action,
    },
    /// Scheduled tasks the daemon runs: add, list, remove, enable, disable, run-now, history.
    Schedule {
        #[command(subcommand)]
        action: schedule::Action,
    },
    /// Workflow files (AAI_HOME/workflows/<name>.json): list, check, run.
    Workflow {
        #[command(subcommand)]
        action: workflow::Action,
    },
    /// Open the daemon's dashboard (live calls, audit history, approvals, grants, toolsets,
    /// client profiles, emergency stop) with a one-time login link.
    Dashboard {
        /// Print the link instead of opening the browser.
        #[arg(long)]
        no_open: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) on stdout: `aai-gateway man > aai-gateway.1`.
    Man,
}

#[derive(Subcommand, Debug)]
pub enum ApprovalAction {
    /// The calls waiting (the default), each question whole.
    List,
    /// One waiting call whole: its question and every argument, with their size.
    Show { id: String },
    /// Answer one: deny, allow_once, allow_session, always_tool, always_app (as it offers).
    Answer { id: String, answer: String },
    /// Allow it once.
    Approve { id: String },
    /// Deny it.
    Deny { id: String },
}

/// A `--platform` value: a key of `platforms` in aai.json.
fn parse_platform(text: &str) -> Result<Platform, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        let keys: Vec<&str> = Platform::ALL.iter().map(|p| p.key()).collect();
        format!("expected one of {}", keys.join(", "))
    })
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    output::set_json(cli.json);
    let serving =
        (cli.command.is_none() && !cli.scan) || matches!(cli.command, Some(Command::Serve { .. }));
    // A command run at a terminal prints what it says and, unless asked for more, only
    // warnings and errors besides: no library's or the scan's progress lines.
    let level = if !serving && cli.log_level == "info" && std::env::var_os("AAI_LOG").is_none() {
        "warn"
    } else {
        cli.log_level.as_str()
    };
    let _log_guards = logging::init(level, serving.then(aai_engine::config::aai_home).as_deref());
    let outcome = run(cli);
    output::finish();
    match outcome {
        Ok(code) => code,
        Err(error) => {
            // Printed once, for the person at the keyboard (not also as a log line).
            // The chain can quote a client's or a descriptor's text: shown, never obeyed.
            let error = format!("{error:#}");
            eprintln!(
                "aai-gateway: error: {}",
                aai_descriptor::visible::visible_lines(&error)
            );
            ExitCode::from(2)
        }
    }
}

/// Whether `command` changes the gate (who may run what, with which credentials, whether the
/// stop is on): such commands answer for the person and need the control credential, which
/// nothing an agent starts can read ([`aai_engine::control`]).
fn changes_gate(command: &Command) -> bool {
    match command {
        Command::Consent { action } => !matches!(action, consent::Action::List),
        Command::Auth { action } => !matches!(action, auth::Action::Status),
        Command::Schedule { action } => matches!(
            action,
            schedule::Action::Add(_)
                | schedule::Action::Enable { .. }
                | schedule::Action::RunNow { .. }
        ),
        Command::Store { action } => matches!(
            action,
            store::Action::Install { .. }
                | store::Action::Update { .. }
                | store::Action::Uninstall { .. }
        ),
        Command::Service { action } => !matches!(action, service::Action::Status),
        // The starter config names the folder agents may write in.
        Command::Approvals { .. }
        | Command::Resume
        | Command::Dashboard { .. }
        | Command::Init { .. }
        // Writes descriptors whose commands the gateway starts.
        | Command::Import(_) => true,
        _ => false,
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let home = aai_engine::config::aai_home();
    aai_engine::private::tighten_and_log(&home);
    // Once per home: store apps earlier versions put among the user's own folders move to
    // `store/apps`, where they are never taken for the user's descriptors (a store app not
    // moved yet still loads as one, by its mark); credentials an earlier `import` wrote into
    // a server's descriptor move to the credential store (until then the server gets them
    // from its descriptor, as before). Serving, this runs beside the start-up, so a client's
    // `initialize` is answered before a fresh home's folders are walked.
    let housekeeping = {
        let home = home.clone();
        move || {
            aai_engine::appstore::migrate(&home);
            import::secrets::migrate_once(&home);
        }
    };
    let serving =
        (cli.command.is_none() && !cli.scan) || matches!(cli.command, Some(Command::Serve { .. }));
    if serving {
        if let Err(error) = std::thread::Builder::new()
            .name("aai-housekeeping".into())
            .spawn(housekeeping.clone())
        {
            tracing::debug!(%error, "housekeeping runs inline");
            housekeeping();
        }
    } else {
        housekeeping();
    }
    if let Some(command) = &cli.command
        && changes_gate(command)
    {
        aai_engine::control::credential(&home)?;
    }
    // A gateway started from inside an agent's sandbox would take its consent from the agent
    // (its elicitation, its terminal) and could not keep an audit log: it does not serve.
    let serves = match &cli.command {
        None => !cli.scan,
        Some(Command::Serve { .. } | Command::Call { .. }) => true,
        Some(Command::Workflow { action }) => matches!(action, workflow::Action::Run { .. }),
        _ => false,
    };
    if serves && let Err(error) = aai_engine::control::credential(&home) {
        anyhow::bail!(
            "aai-gateway does not serve or run calls from inside an agent's sandbox: {error}"
        );
    }
    match cli.command {
        Some(Command::Validate { files }) => Ok(validate::run(&home, &files)),
        Some(Command::Import(args)) => import::run(&home, &args),
        Some(Command::Describe(args)) => describe::run(args),
        Some(Command::Auth { action }) => auth::run(&home, false, action),
        Some(Command::Consent { action }) => consent::run(&home, false, action),
        Some(Command::Discover {
            target,
            refresh,
            forget,
        }) => discover::run(&home, &target, refresh, forget),
        Some(Command::Config { action }) => config::run(&home, action),
        Some(Command::Doctor) => doctor::run(&home, cli.json),
        Some(Command::Init { folder }) => init::run(&home, folder.as_deref()),
        Some(Command::Completions { shell }) => docs::completions(shell),
        Some(Command::Man) => docs::man(),
        Some(Command::Serve { listen, dev }) => {
            // A first run: the daemon starts with a starter config and its allowed folder.
            init::first_serve(&home);
            runtime()?.block_on(daemon::serve(&home, dev, listen.as_deref()))
        }
        Some(Command::Service { action }) => service::run(&home, action),
        Some(Command::Stop) => runtime()?.block_on(daemon::control(&home, daemon::Control::Stop)),
        Some(Command::Approvals { action }) => {
            let what = match action {
                None | Some(ApprovalAction::List) => daemon::Control::Approvals,
                Some(ApprovalAction::Show { id }) => daemon::Control::ShowApproval { id },
                Some(ApprovalAction::Answer { id, answer }) => {
                    daemon::Control::Answer { id, answer }
                }
                Some(ApprovalAction::Approve { id }) => daemon::Control::Answer {
                    id,
                    answer: "allow_once".into(),
                },
                Some(ApprovalAction::Deny { id }) => daemon::Control::Answer {
                    id,
                    answer: "deny".into(),
                },
            };
            runtime()?.block_on(daemon::control(&home, what))
        }
        Some(Command::Resume) => {
            runtime()?.block_on(daemon::control(&home, daemon::Control::Resume))
        }
        Some(Command::Workflow { action }) => runtime()?.block_on(workflow::run(&home, action)),
        Some(Command::Schedule { action }) => runtime()?.block_on(schedule::run(&home, action)),
        Some(Command::Store { action }) => runtime()?.block_on(store::run(&home, action)),
        Some(Command::Dashboard { no_open }) => runtime()?.block_on(daemon::control(
            &home,
            daemon::Control::Dashboard { open: !no_open },
        )),
        Some(Command::Status) => {
            runtime()?.block_on(daemon::control(&home, daemon::Control::Status))
        }
        Some(Command::Audit { action }) => audit::run(&home.join(DATA_DB), action),
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
            let request = call::Request {
                app: &app,
                tool: tool.as_deref(),
                args: &args,
                dry_run,
                platform,
            };
            runtime()?.block_on(call::run(&home, dev, request))
        }
        None if cli.scan => scan::run(&home, cli.dev),
        None => {
            let _ = cli.mcp;
            serve_runtime()?.block_on(serve::run(home, cli.dev))?;
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

/// The stdio server's runtime: one worker. It serves one client, whose requests wait on
/// apps, files and the network, not on the processor (blocking work goes to the blocking
/// pool); a second worker only spread each call's memory over a second malloc arena.
fn serve_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// An error message written for an agent, reworded for the person at the keyboard: the
/// gateway's MCP tools are not theirs to call, and they are the user the agent would ask.
/// A gateway error on stderr for a person: `TYPE (code): message`.
fn report(error: &aai_descriptor::AaiError) {
    eprintln!(
        "{} ({}): {}",
        error.kind.type_name(),
        error.kind.code(),
        for_person(&error.message)
    );
}

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
    // `call web_discover {"url": "X"}` is `aai-gateway discover X` at a terminal.
    while let Some(start) = text.find("call web_discover {\"url\": \"") {
        let from = start + "call web_discover {\"url\": \"".len();
        let Some(len) = text[from..].find("\"}") else {
            break;
        };
        let url = text[from..from + len].to_owned();
        text.replace_range(
            start..from + len + 2,
            &format!("run `aai-gateway discover {url}`"),
        );
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
