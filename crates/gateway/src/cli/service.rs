//! `aai-gateway service install|uninstall|status`: keep the daemon running for this user.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use aai_server::daemon::service::Manager;
use anyhow::Context as _;

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Write the per-user unit (systemd user unit, launchd LaunchAgent or Task Scheduler task)
    /// and start it; no admin rights needed.
    Install {
        /// Print the unit instead of writing it.
        #[arg(long)]
        print: bool,
        /// With --print: the unit for this service manager instead of this machine's.
        #[arg(long, value_parser = ["systemd", "launchd", "task-scheduler"], requires = "print")]
        manager: Option<String>,
    },
    /// Stop the service and remove its unit.
    Uninstall,
    /// Whether the unit is installed and running.
    Status,
}

fn user_home() -> anyhow::Result<PathBuf> {
    std::env::var_os(if cfg!(windows) { "USERPROFILE" } else { "HOME" })
        .map(PathBuf::from)
        .context("the home folder is unknown (HOME is not set)")
}

/// Runs a service manager's command; its failure is reported, not fatal (the unit is
/// written either way and the message says how to start it by hand).
fn manage(program: &str, args: &[&str]) -> Result<String, String> {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        Ok(out) => Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("`{program}` cannot run here: {e}")),
    }
}

pub fn run(aai_home: &Path, action: Action) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot tell where this program is")?;
    match action {
        Action::Install {
            print: true,
            manager,
        } => {
            let manager = match manager.as_deref() {
                Some("systemd") => Manager::Systemd,
                Some("launchd") => Manager::Launchd,
                Some("task-scheduler") => Manager::TaskScheduler,
                _ => Manager::native(),
            };
            super::output::line(manager.unit(&exe, aai_home).trim_end());
            Ok(ExitCode::SUCCESS)
        }
        Action::Install { .. } => install(&exe, aai_home),
        Action::Uninstall => uninstall(aai_home),
        Action::Status => status(aai_home),
    }
}

fn install(exe: &Path, aai_home: &Path) -> anyhow::Result<ExitCode> {
    let manager = Manager::native();
    let path = manager.unit_path(&user_home()?, aai_home);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, manager.unit(exe, aai_home))
        .with_context(|| format!("cannot write {}", path.display()))?;
    let path_text = path.to_string_lossy().into_owned();
    let started = match manager {
        Manager::Systemd => manage("systemctl", &["--user", "daemon-reload"]).and_then(|_| {
            manage(
                "systemctl",
                &["--user", "enable", "--now", "aai-gateway.service"],
            )
        }),
        Manager::Launchd => {
            let uid = manage("id", &["-u"]).unwrap_or_default();
            manage(
                "launchctl",
                &["bootstrap", &format!("gui/{uid}"), &path_text],
            )
        }
        Manager::TaskScheduler => manage(
            "schtasks",
            &["/Create", "/TN", "aai-gateway", "/XML", &path_text, "/F"],
        )
        .and_then(|_| manage("schtasks", &["/Run", "/TN", "aai-gateway"])),
    };
    match started {
        Ok(_) => {
            super::output::line(&format!(
                "installed {} and started it; `aai-gateway status` shows where it serves",
                path.display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(problem) => {
            eprintln!(
                "aai-gateway: wrote {}, but could not start it: {problem}. Start the gateway with `aai-gateway serve`, or load the unit once the service manager is available.",
                path.display()
            );
            Ok(ExitCode::from(1))
        }
    }
}

fn uninstall(aai_home: &Path) -> anyhow::Result<ExitCode> {
    let manager = Manager::native();
    let path = manager.unit_path(&user_home()?, aai_home);
    let stopped = match manager {
        Manager::Systemd => manage(
            "systemctl",
            &["--user", "disable", "--now", "aai-gateway.service"],
        ),
        Manager::Launchd => {
            let uid = manage("id", &["-u"]).unwrap_or_default();
            manage(
                "launchctl",
                &["bootout", &format!("gui/{uid}/org.aai.gateway")],
            )
        }
        Manager::TaskScheduler => manage("schtasks", &["/Delete", "/TN", "aai-gateway", "/F"]),
    };
    if let Err(problem) = &stopped {
        eprintln!("aai-gateway: {problem}");
    }
    match std::fs::remove_file(&path) {
        Ok(()) => super::output::line(&format!("removed {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            super::output::line(&format!(
                "not installed ({} does not exist)",
                path.display()
            ));
        }
        Err(e) => anyhow::bail!("cannot remove {}: {e}", path.display()),
    }
    if manager == Manager::Systemd {
        let _ = manage("systemctl", &["--user", "daemon-reload"]);
    }
    Ok(ExitCode::SUCCESS)
}

fn status(aai_home: &Path) -> anyhow::Result<ExitCode> {
    let manager = Manager::native();
    let path = manager.unit_path(&user_home()?, aai_home);
    let installed = path.exists();
    let running = aai_engine::runfiles::running(aai_home);
    super::output::line(&format!(
        "unit: {} ({})\ndaemon: {}",
        path.display(),
        if installed {
            "installed"
        } else {
            "not installed"
        },
        running.map_or_else(
            || "not running".to_owned(),
            |r| format!("serving at {} (pid {})", r.info.url, r.info.pid)
        )
    ));
    Ok(if installed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
