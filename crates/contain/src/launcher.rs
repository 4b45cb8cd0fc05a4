//! The launcher's two stages (`aai-gateway __contain …`).
//!
//! The first stage enters the call's cgroup, becomes a child subreaper and starts the second
//! stage (the same binary with `--stage2`), which enforces the Landlock rules on itself and
//! `exec`s the command. The first stage stays outside the Landlock domain, so with the signal
//! scope nothing contained can kill it; every orphan of the command is re-parented to it. It
//! forwards SIGINT and SIGHUP to the command, reaps, exits with the command's status once the
//! command and every orphan it adopted are gone, and on SIGTERM (or SIGQUIT) kills its whole
//! tree, pass after pass, and exits.

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::{Profile, Stage};

/// How long the first stage keeps killing its tree after a SIGTERM.
const KILL_WITHIN: Duration = Duration::from_secs(5);

/// Exit codes of a launcher that could not run the command (as shells use them).
const CANNOT_RUN: u8 = 126;
const NOT_FOUND: u8 = 127;

fn refuse(message: &str) -> ExitCode {
    eprintln!("aai-gateway (sandbox): {message}");
    ExitCode::from(CANNOT_RUN)
}

pub(crate) fn main(args: &[String]) -> ExitCode {
    match Profile::parse(args) {
        Ok((profile, Stage::First, program)) => first(profile, &program),
        Ok((profile, Stage::Second, program)) => second(&profile, &program),
        Ok((profile, Stage::Probe, _)) => probe(&profile),
        Err(problem) => refuse(&format!("bad launcher arguments: {problem}")),
    }
}

/// How the command ended.
#[derive(Debug, Clone, Copy)]
enum Ended {
    Code(i32),
    Signal(Signal),
}

fn first(mut profile: Profile, program: &[String]) -> ExitCode {
    if let Some(procs) = profile.cgroup.take() {
        // Where the group cannot be entered the command runs anyway: the subreaper below
        // still holds everything it starts.
        let _ = std::fs::write(procs, "0");
    }
    if let Err(error) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        return refuse(&format!("cannot become a subreaper: {error}"));
    }
    let signals: SigSet = [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGQUIT,
        Signal::SIGINT,
        Signal::SIGHUP,
    ]
    .into_iter()
    .collect();
    // Blocked and taken with sigwait: no handler runs, so no `unsafe`. The second stage
    // inherits the mask and clears it before it becomes the command.
    if let Err(error) = signals.thread_block() {
        return refuse(&format!("cannot block signals: {error}"));
    }
    let private_temp = if profile.needs_private_temp() {
        match make_private_temp(&profile) {
            Ok(dir) => Some(dir),
            Err(problem) => return refuse(&problem.to_string()),
        }
    } else {
        None
    };
    if let Some(dir) = &private_temp {
        profile.write.push(dir.clone());
    }
    let mut second = std::process::Command::new("/proc/self/exe");
    second
        .arg(crate::MARKER)
        .arg("--stage2")
        .args(profile.options())
        .arg("--")
        .args(program);
    if let Some(dir) = &private_temp {
        second.env("TMPDIR", dir);
    }
    let child = match second.spawn() {
        Ok(child) => child,
        Err(error) => {
            remove(private_temp.as_ref());
            return refuse(&format!("cannot start the sandbox's second stage: {error}"));
        }
    };
    let child = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let mut ended = None;
    let outcome = loop {
        match reap(child, &mut ended) {
            Reaped::AllGone => break ended.unwrap_or(Ended::Code(i32::from(CANNOT_RUN))),
            Reaped::SomeLeft => {}
        }
        match signals.wait() {
            Ok(Signal::SIGTERM | Signal::SIGQUIT) => {
                crate::procs::kill_tree(KILL_WITHIN, &mut || {
                    let _ = reap(child, &mut ended);
                });
                break Ended::Signal(Signal::SIGTERM);
            }
            Ok(signal @ (Signal::SIGINT | Signal::SIGHUP)) if ended.is_none() => {
                let _ = nix::sys::signal::kill(child, signal);
            }
            _ => {}
        }
    };
    remove(private_temp.as_ref());
    finish(outcome)
}

enum Reaped {
    AllGone,
    SomeLeft,
}

/// Reaps every child that has ended, noting the command's status.
fn reap(command: Pid, ended: &mut Option<Ended>) -> Reaped {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => *ended = Some(Ended::Code(code)),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == command => {
                *ended = Some(Ended::Signal(signal));
            }
            Ok(WaitStatus::StillAlive) => return Reaped::SomeLeft,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return Reaped::AllGone,
        }
    }
}

/// Ends this process as the command ended: the same code, or the same signal.
fn finish(ended: Ended) -> ExitCode {
    match ended {
        Ended::Code(code) => ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)),
        Ended::Signal(signal) => {
            // Signals whose default is to end the process without a core dump are raised
            // again, so the caller sees the same signal; the others become 128 + n.
            if matches!(
                signal,
                Signal::SIGHUP
                    | Signal::SIGINT
                    | Signal::SIGKILL
                    | Signal::SIGPIPE
                    | Signal::SIGALRM
                    | Signal::SIGTERM
                    | Signal::SIGUSR1
                    | Signal::SIGUSR2
            ) {
                let _ = SigSet::all().thread_unblock();
                let _ = nix::sys::signal::raise(signal);
            }
            ExitCode::from(128u8.saturating_add(u8::try_from(signal as i32).unwrap_or(0)))
        }
    }
}

/// A folder of the command's own inside the temporary folder (which holds a protected one).
fn make_private_temp(profile: &Profile) -> Result<PathBuf, crate::ContainError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let temp = profile.temp.clone().unwrap_or_else(std::env::temp_dir);
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).map_err(crate::ContainError::Random)?;
    let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let dir = temp.join(format!("aai-sandbox-{}-{name}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|source| crate::ContainError::TempFolder {
            path: dir.clone(),
            source,
        })?;
    Ok(dir)
}

fn remove(dir: Option<&PathBuf>) {
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn second(profile: &Profile, program: &[String]) -> ExitCode {
    // Before Landlock (which then forbids changing mounts): the user's session sockets out of
    // sight. Where user namespaces are off nothing is hidden; `doctor` says so.
    let hidden = !profile.abstract_sockets;
    if hidden {
        let paths = crate::sessions::session_paths(
            &|name| std::env::var_os(name),
            nix::unistd::getuid().as_raw(),
        );
        // A failure leaves them in view; the command still runs under Landlock.
        let _ = crate::sessions::hide(&paths);
    }
    let plan = profile.plan(&crate::rules::list);
    match crate::linux::enforce(&plan) {
        Ok(enforced) if enforced.ruleset == "none" => {
            return refuse(
                "this kernel enforces no Landlock rules; the command was not run (set local.containment to \"none\" in config.json to run commands uncontained)",
            );
        }
        Ok(_) => {}
        Err(problem) => return refuse(&format!("{problem}; the command was not run")),
    }
    let Some((name, args)) = program.split_first() else {
        return refuse("no program to run");
    };
    // The first stage blocks the signals it waits for; the command must not inherit that
    // (an interactive bash would pass the mask on to every job, and Ctrl-C would do nothing).
    if let Err(error) = SigSet::all().thread_unblock() {
        return refuse(&format!("cannot unblock signals: {error}"));
    }
    let mut command = std::process::Command::new(name);
    command.args(args);
    if hidden {
        for var in crate::sessions::SESSION_VARS {
            command.env_remove(var);
        }
    }
    let error = command.exec();
    eprintln!("aai-gateway (sandbox): cannot run {name:?}: {error}");
    ExitCode::from(if error.kind() == std::io::ErrorKind::NotFound {
        NOT_FOUND
    } else {
        CANNOT_RUN
    })
}

/// Enforces the profile on this (throwaway) process and prints what was enforced, as one
/// JSON line.
fn probe(profile: &Profile) -> ExitCode {
    use std::io::Write as _;
    let plan = profile.plan(&crate::rules::list);
    let line = match crate::linux::enforce(&plan) {
        Ok(e) => format!(
            "{{\"ruleset\":\"{}\",\"abi\":{},\"no_new_privs\":{},\"rules\":{}}}",
            e.ruleset, e.abi, e.no_new_privs, e.rules
        ),
        Err(problem) => format!(
            "{{\"ruleset\":\"none\",\"error\":\"{}\"}}",
            problem.to_string().replace(['"', '\\'], "'")
        ),
    };
    match writeln!(std::io::stdout().lock(), "{line}") {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(CANNOT_RUN),
    }
}
