//! `aai-gateway describe`: a draft `aai.json` from what an app already publishes — a D-Bus
//! service's introspection, an OpenAPI document, a macOS scripting dictionary, a COM type
//! library. The draft goes to stdout (or `--out`), what was left out or guessed to stderr; it
//! passes `validate` as it is and is not installed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use super::{output, runtime};

#[derive(Subcommand, Debug)]
pub enum Source {
    /// A D-Bus service (started if it is activatable): one tool per method, get/set tools
    /// per property. `--list` shows the names on the bus instead.
    Dbus {
        /// The bus name, e.g. org.freedesktop.Notifications.
        #[arg(required_unless_present = "list")]
        name: Option<String>,
        /// The system bus instead of the session bus.
        #[arg(long)]
        system: bool,
        /// Start at this object path instead of `/`.
        #[arg(long)]
        path: Option<String>,
        /// Only this interface (a standard one too, e.g. org.freedesktop.DBus.Peer).
        #[arg(long)]
        interface: Option<String>,
        /// List the names on the bus and what a draft of each would hold.
        #[arg(long)]
        list: bool,
    },
    /// An OpenAPI 3.0/3.1 or Swagger 2.0 document (JSON), from a file or an https URL.
    Openapi {
        source: String,
        /// Only operations with this tag (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Only operations whose id, path or summary contains this (repeatable).
        #[arg(long = "include")]
        include: Vec<String>,
        /// At most this many tools; the rest are listed by tag.
        #[arg(long, default_value_t = 60)]
        max_tools: usize,
    },
    /// A macOS scripting dictionary (`sdef /Applications/Mail.app > Mail.sdef`).
    Sdef {
        file: PathBuf,
        /// The application's name as AppleScript addresses it (default: the dictionary's title).
        #[arg(long)]
        app: Option<String>,
    },
    /// A macOS app by name or bundle path: its dictionary is read with `sdef` (macOS only).
    App {
        /// `Mail`, `Mail.app` or a path to the bundle.
        name: String,
    },
    /// A running application's accessibility tree (Linux, AT-SPI): one tool per menu command,
    /// per button of its window, per open dialog, and read tools for its texts and lists.
    A11y {
        /// The application's accessible name (e.g. galculator) or its process id.
        app: String,
        /// The draft's appId (default: a11y.<name>).
        #[arg(long)]
        app_id: Option<String>,
        /// Print the tree as the drafter reads it (JSON) instead of a draft.
        #[arg(long)]
        tree: bool,
    },
    /// A COM server's type library (Windows): a fixed PowerShell program reads it.
    Com {
        /// The ProgID, e.g. Outlook.Application.
        progid: String,
        /// Read the program's JSON from this file instead of running PowerShell.
        #[arg(long)]
        from: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub source: Source,
    /// Write the draft here instead of stdout.
    #[arg(long, global = true)]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let draft = match args.source {
        Source::Dbus {
            name,
            system,
            path,
            interface,
            list,
        } => {
            let executor = aai_executor::DbusExecutor::default();
            if list {
                let names = runtime()?
                    .block_on(aai_drafts::dbus_names(&executor, system))
                    .map_err(|e| anyhow::anyhow!("{}", e.message))?;
                if output::json() {
                    output::value(&serde_json::json!({"names": names}));
                } else {
                    for n in names {
                        let name = n["name"].as_str().unwrap_or_default();
                        output::line(&match (n["running"].as_bool(), n["tools"].as_u64()) {
                            (Some(true), Some(t)) if t > 0 => format!("{name}: {t} tools"),
                            (Some(true), _) => format!(
                                "{name}: nothing to call ({})",
                                n["why"].as_str().unwrap_or("")
                            ),
                            _ => format!("{name}: activatable, not running (describe starts it)"),
                        });
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            let source = aai_drafts::DbusSource {
                name: name.unwrap_or_default(),
                system,
                path,
                interface,
            };
            runtime()?
                .block_on(aai_drafts::dbus(&executor, &source))
                .map_err(|e| anyhow::anyhow!("{}", e.message))?
        }
        Source::A11y { app, app_id, tree } => {
            let session_bus = std::env::var("DBUS_SESSION_BUS_ADDRESS").ok();
            let home = aai_engine::config::aai_home();
            let (config, _) = aai_engine::config::Config::load(&home);
            if tree {
                let (_, tree) = runtime()?
                    .block_on(aai_drafts::a11y_tree(
                        session_bus.as_deref(),
                        &app,
                        &config.desktop.protected(),
                    ))
                    .map_err(|e| anyhow::anyhow!("{}", e.message))?;
                output::value(&serde_json::to_value(&tree)?);
                return Ok(ExitCode::SUCCESS);
            }
            runtime()?
                .block_on(aai_drafts::a11y(
                    session_bus.as_deref(),
                    &app,
                    app_id.as_deref(),
                    &config.desktop.protected(),
                ))
                .map_err(|e| anyhow::anyhow!("{}", e.message))?
        }
        Source::Openapi {
            source,
            tags,
            include,
            max_tools,
        } => {
            let remote = source.starts_with("https://") || source.starts_with("http://");
            let text = if remote {
                runtime()?.block_on(fetch(&source))?
            } else {
                std::fs::read_to_string(&source).with_context(|| format!("cannot read {source}"))?
            };
            let options = aai_describe::openapi::Options {
                tags,
                include,
                max_tools,
                source_url: remote.then_some(source),
            };
            aai_drafts::openapi(&text, &options).map_err(|e| anyhow::anyhow!("{}", e.message))?
        }
        Source::Sdef { file, app } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            aai_describe::sdef::draft(&text, app.as_deref())?
        }
        Source::App { name } => {
            let (bundle, text) = run_sdef(&name)?;
            aai_describe::sdef::draft(&text, Some(&aai_describe::sdef::app_name(&bundle)))?
        }
        Source::Com { progid, from } => {
            let text = match from {
                Some(file) => std::fs::read_to_string(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?,
                None => run_powershell(&progid)?,
            };
            aai_describe::com::draft(&progid, &text)?
        }
    };
    for note in &draft.notes {
        eprintln!("note: {note}");
    }
    let text = serde_json::to_string_pretty(&draft.descriptor)? + "\n";
    match args.out {
        Some(path) => {
            std::fs::write(&path, &text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "wrote a draft with {} tools to {}; review its `todo` notes, then `aai-gateway validate {}`",
                draft.tools().len(),
                path.display(),
                path.display()
            );
        }
        None => output::line(text.trim_end()),
    }
    Ok(ExitCode::SUCCESS)
}

/// An OpenAPI document from the network (at most 64 MiB, 60 s; any address: the user's own command).
async fn fetch(url: &str) -> anyhow::Result<String> {
    let client = aai_executor::client_builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()?;
    aai_drafts::document(&client, url)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.message))
}

/// Finds the app `name` and prints its scripting dictionary with `sdef` (macOS only).
fn run_sdef(name: &str) -> anyhow::Result<(PathBuf, String)> {
    anyhow::ensure!(
        cfg!(target_os = "macos"),
        "reading an app's dictionary needs macOS (`sdef`); elsewhere give the dictionary file with `aai-gateway describe sdef FILE`"
    );
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let candidates = aai_describe::sdef::app_candidates(name, &home);
    let bundle = candidates
        .iter()
        .find(|c| c.exists())
        .with_context(|| {
            format!(
                "no app {name:?} at {}",
                candidates
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?
        .clone();
    let out = std::process::Command::new(aai_describe::sdef::SDEF)
        .args(aai_describe::sdef::sdef_argv(&bundle))
        .output()
        .context("cannot run sdef")?;
    anyhow::ensure!(
        out.status.success(),
        "{} has no scripting dictionary ({})",
        bundle.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok((bundle, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// Runs the fixed type-library reader (Windows only); the ProgID goes on its stdin, never
/// into the program's text.
fn run_powershell(progid: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        aai_describe::com::is_progid(progid),
        "{progid:?} is not a ProgID (like Outlook.Application)"
    );
    anyhow::ensure!(
        cfg!(windows),
        "reading a COM type library needs Windows; on another system give the reader's JSON with --from (run `aai-gateway describe com {progid}` on Windows)"
    );
    use std::io::Write as _;
    let mut child = std::process::Command::new("powershell.exe")
        .args(aai_describe::com::powershell_argv())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot start powershell.exe")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(aai_describe::com::stdin(progid).as_bytes())?;
    }
    let out = child.wait_with_output().context("powershell.exe")?;
    anyhow::ensure!(
        out.status.success(),
        "the type library of {progid} could not be read: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
