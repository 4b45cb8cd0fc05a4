//! The launcher's three stages (`aai-gateway __contain …`).
//!
//! The first stage enters the call's cgroup, becomes a child subreaper and starts the second
//! stage (the same binary with `--stage2`). The second stage moves into user and mount
//! namespaces of its own and stops itself once, so that the first stage — still in the
//! user's own namespace, where it may — writes its id maps; it then makes the process's view
//! ([`crate::view`]), enforces the Landlock rules on itself (domain 1), becomes a subreaper
//! and starts the third stage (`--stage3`), which restricts itself once more with nothing but
//! Landlock's signal scope (domain 2, nested in 1) and `exec`s the command.
//!
//! So the command and everything it starts live in domain 2, and the second stage alone in
//! domain 1: nothing contained can signal it (or the first stage), while it may signal every
//! one of them. On SIGTERM it sends SIGKILL to every process it may signal (`kill(-1)`), which
//! with the signal scope is exactly the command's tree, wherever it moved — a new session, a
//! cleared environment, a loop that forks and exits: the kernel walks every process at once,
//! with no fork in between, so none slips past. It then exits, and the first stage, seeing it
//! gone, sweeps what is left (freezing, then killing) and exits. Where the kernel has no
//! signal scope (Landlock ABI < 6) the second stage never uses `kill(-1)` and the first
//! stage's sweep does all the work.
//!
//! Both outer stages forward SIGINT and SIGHUP inwards, reap, and exit with the command's
//! status once the command and every orphan they adopted are gone.

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::{Profile, Stage};

/// How long a stage keeps killing its tree after a SIGTERM.
pub(crate) const KILL_WITHIN: Duration = Duration::from_secs(5);

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
        Ok((_, Stage::Third, program)) => third(&program),
        Ok((profile, Stage::Probe, _)) => probe(&profile),
        Err(problem) => refuse(&format!("bad launcher arguments: {problem}")),
    }
}

/// The signals the outer stages take with `sigwait` (blocked, so no handler runs and no
/// `unsafe` is needed); the command gets an empty mask.
fn waited() -> SigSet {
    [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGQUIT,
        Signal::SIGINT,
        Signal::SIGHUP,
    ]
    .into_iter()
    .collect()
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
    let signals = waited();
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
    profile.own_temp.clone_from(&private_temp);
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
    second.env(FIRST_STAGE_VAR, std::process::id().to_string());
    let child = match second.spawn() {
        Ok(child) => child,
        Err(error) => {
            remove(private_temp.as_ref());
            return refuse(&format!("cannot start the sandbox's second stage: {error}"));
        }
    };
    let child = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let mut ended = map_ids_of(child);
    if ended.is_none()
        && let Some(port) = profile.egress
        && in_own_user_namespace(child)
    {
        ended = connect_egress(child, port);
    }
    let outcome = supervise(child, ended, &signals, &mut |ended| {
        // The second stage ends its whole domain at once; what it cannot reach (no signal
        // scope on this kernel, or it is gone) is swept after.
        if ended.is_none() {
            let _ = nix::sys::signal::kill(child, Signal::SIGTERM);
            let until = std::time::Instant::now() + INNER_STOP;
            while crate::procs::alive(child.as_raw().unsigned_abs())
                && std::time::Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    remove(private_temp.as_ref());
    finish(outcome)
}

/// The outer stages' wait: reaps until `child` and every orphan adopted are gone, forwards
/// SIGINT and SIGHUP to `child`, and on SIGTERM or SIGQUIT runs `stop` (given how `child`
/// ended, if it did) then kills the whole tree. How the command ended.
fn supervise(
    child: Pid,
    mut ended: Option<Ended>,
    signals: &SigSet,
    stop: &mut dyn FnMut(Option<Ended>),
) -> Ended {
    loop {
        match reap(child, &mut ended) {
            Reaped::AllGone => return ended.unwrap_or(Ended::Code(i32::from(CANNOT_RUN))),
            Reaped::SomeLeft => {}
        }
        match signals.wait() {
            Ok(Signal::SIGTERM | Signal::SIGQUIT) => {
                stop(ended);
                crate::procs::kill_tree(KILL_WITHIN, &mut || {
                    let _ = reap(child, &mut ended);
                });
                return Ended::Signal(Signal::SIGTERM);
            }
            Ok(signal @ (Signal::SIGINT | Signal::SIGHUP)) if ended.is_none() => {
                let _ = nix::sys::signal::kill(child, signal);
            }
            _ => {}
        }
    }
}

/// How long the first stage gives the second to end its domain before sweeping: the second
/// stage's own bound and a second more. It is never cut short by the clock of a busy machine —
/// a second stage frozen or killed half-way would leave the domain it was about to end.
pub(crate) const INNER_STOP: Duration = KILL_WITHIN.saturating_add(Duration::from_secs(1));

// Whoever waits for a launcher waits for both of its stages' bounds.
const _: () = assert!(
    crate::procs::LAUNCHER_ENDS_WITHIN.as_millis()
        > INNER_STOP.as_millis() + KILL_WITHIN.as_millis()
);

/// Whether `child` is in a user namespace other than this process's.
fn in_own_user_namespace(child: Pid) -> bool {
    let own = std::fs::read_link("/proc/self/ns/user").ok();
    let theirs = std::fs::read_link(format!("/proc/{child}/ns/user")).ok();
    theirs.is_some() && theirs != own
}

/// Waits for the second stage to stop; how it ended when it did instead.
fn stopped(child: Pid) -> Option<Ended> {
    loop {
        match waitpid(child, Some(WaitPidFlag::WUNTRACED)) {
            Ok(WaitStatus::Stopped(..)) => return None,
            Ok(WaitStatus::Exited(_, code)) => return Some(Ended::Code(code)),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Some(Ended::Signal(signal)),
            Err(Errno::EINTR) | Ok(_) => {}
            Err(_) => return Some(Ended::Code(i32::from(CANNOT_RUN))),
        }
    }
}

/// The second stage's second stop: it listens on the proxy's port inside its own network.
/// The listening socket is taken from it and every connection to it forwarded to the
/// gateway's proxy out here; then it goes on. Where the socket cannot be taken it is killed
/// (nothing runs with a network it was not meant to have, or none that works).
fn connect_egress(child: Pid, port: u16) -> Option<Ended> {
    if let Some(ended) = stopped(child) {
        return Some(ended);
    }
    let Some(listener) = crate::egress::take(child.as_raw().unsigned_abs()) else {
        eprintln!(
            "aai-gateway (sandbox): cannot take the sandbox's proxy socket; the command was not run"
        );
        let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
        return None;
    };
    crate::egress::forward(listener, port);
    let _ = nix::sys::signal::kill(child, Signal::SIGCONT);
    None
}

/// Waits for the second stage's one stop (it stops itself right after trying to make its
/// namespaces), writes its id maps when it is in a user namespace of its own, and lets it go
/// on. The maps are written from here because only a process in the parent namespace may map
/// more than its own id: root maps every id to itself (files keep their owners and groups),
/// an ordinary user only itself. How the second stage ended, when it did before stopping.
fn map_ids_of(child: Pid) -> Option<Ended> {
    if let Some(ended) = stopped(child) {
        return Some(ended);
    }
    if in_own_user_namespace(child) {
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        let (uids, gids) = if uid == 0 {
            ("0 0 4294967295".to_owned(), "0 0 4294967295".to_owned())
        } else {
            let _ = std::fs::write(format!("/proc/{child}/setgroups"), "deny");
            (format!("{uid} {uid} 1"), format!("{gid} {gid} 1"))
        };
        // A failure leaves the maps empty: the second stage sees that and refuses.
        let _ = std::fs::write(format!("/proc/{child}/uid_map"), uids);
        let _ = std::fs::write(format!("/proc/{child}/gid_map"), gids);
    }
    let _ = nix::sys::signal::kill(child, Signal::SIGCONT);
    None
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
    // Whoever ends the first stage — a SIGKILL included — ends the command's domain with it:
    // the kernel sends this stage SIGTERM, which it takes like the first stage's own.
    if let Err(problem) = follow_first_stage() {
        return refuse(&problem);
    }
    // The first stage, known before the user namespace (from which its program cannot be
    // read) and Landlock: the signal scope is proved below by this very process being out of
    // its reach.
    let parent = nix::unistd::getppid();
    let parent_is_launcher = std::fs::read_link("/proc/self/exe")
        .is_ok_and(|exe| crate::procs::is_launcher(parent.as_raw().unsigned_abs(), &exe));
    // Before Landlock (which then forbids changing mounts): the command's own view. Where
    // user namespaces are off nothing is hidden by it and Landlock's rules carve the secrets
    // out instead; `doctor` says so. Any other failure refuses the command.
    let entered = match crate::view::enter(profile, &|name| std::env::var_os(name)) {
        Ok(entered) => Some(entered),
        Err(problem) if crate::view::unavailable(&problem) => None,
        Err(problem) => return refuse(&format!("{problem}; the command was not run")),
    };
    // A network of its own, whose only way out is the proxy the first stage forwards to.
    let egress = match (profile.egress, &entered) {
        (Some(port), Some(_)) => match private_network(port) {
            Ok(()) => Some(port),
            Err(problem) => return refuse(&format!("{problem}; the command was not run")),
        },
        _ => None,
    };
    // Set again after the view: a change of credentials would have cleared it.
    if let Err(problem) = follow_first_stage() {
        return refuse(&problem);
    }
    let plan = profile.plan(&crate::rules::list, entered.is_some());
    let enforced = match crate::linux::enforce(&plan) {
        Ok(enforced) if enforced.ruleset == "none" => {
            return refuse(
                "this kernel enforces no Landlock rules; the command was not run (set local.containment to \"none\" in config.json to run commands uncontained)",
            );
        }
        Ok(enforced) => enforced,
        Err(problem) => return refuse(&format!("{problem}; the command was not run")),
    };
    if let Err(error) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        return refuse(&format!("cannot become a subreaper: {error}"));
    }
    let mut third = std::process::Command::new("/proc/self/exe");
    third
        .env_remove(FIRST_STAGE_VAR)
        .arg(crate::MARKER)
        .arg("--stage3")
        .arg("--home")
        .arg(&profile.home)
        .arg("--")
        .args(program);
    match &entered {
        Some(entered) => {
            for var in &entered.remove {
                third.env_remove(var);
            }
            for (var, value) in &entered.set {
                third.env(var, value);
            }
        }
        None if !profile.desktop => {
            for var in crate::sessions::SESSION_VARS {
                third.env_remove(var);
            }
        }
        None => {}
    }
    if let Some(port) = egress {
        for var in crate::egress::PROXY_VARS {
            third.env(var, crate::egress::proxy_url(port));
        }
        for var in crate::egress::BYPASS_VARS {
            third.env_remove(var);
        }
    }
    let child = match third.spawn() {
        Ok(child) => child,
        Err(error) => return refuse(&format!("cannot start the sandbox's third stage: {error}")),
    };
    let child = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    // `kill(-1)` reaches only the command's domain where the signal scope holds: proved by
    // the first stage being out of reach.
    let scoped = enforced.abi >= 6
        && parent_is_launcher
        && nix::unistd::getppid() == parent
        && nix::sys::signal::kill(parent, None::<Signal>) == Err(Errno::EPERM);
    let signals = waited();
    let outcome = supervise(child, None, &signals, &mut |_| {
        if scoped {
            kill_domain();
        }
    });
    finish(outcome)
}

/// The variable by which the first stage tells the second its pid.
const FIRST_STAGE_VAR: &str = "AAI_CONTAIN_FIRST_STAGE";

/// Makes the kernel send this (second) stage SIGTERM when the first stage ends, and checks
/// that the first stage — the pid it handed down — is still its parent.
fn follow_first_stage() -> Result<(), String> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
        .map_err(|error| format!("cannot follow the sandbox's first stage: {error}"))?;
    let first = std::env::var(FIRST_STAGE_VAR)
        .ok()
        .and_then(|pid| pid.parse::<i32>().ok());
    if first != Some(nix::unistd::getppid().as_raw()) {
        return Err("the sandbox's first stage has ended; the command was not run".to_owned());
    }
    Ok(())
}

/// Moves this process into a network namespace of its own, brings up its loopback, listens
/// on the proxy's port there and stops until the first stage has taken the socket.
fn private_network(port: u16) -> Result<(), crate::ContainError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(crate::ContainError::namespace("make a network namespace"))?;
    crate::egress::loopback_up()?;
    let listener = crate::egress::listen(port)?;
    let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    drop(listener);
    Ok(())
}

/// Kills every process this one may signal — under the signal scope, every process of the
/// command's domain — until none is left.
fn kill_domain() {
    for _ in 0..1000 {
        match nix::sys::signal::kill(Pid::from_raw(-1), Signal::SIGKILL) {
            Ok(()) => std::thread::yield_now(),
            Err(_) => break,
        }
    }
}

/// The command itself: a Landlock domain of its own nested in the second stage's (so nothing
/// it starts can signal the second stage), an empty signal mask, then `exec`.
fn third(program: &[String]) -> ExitCode {
    if let Err(problem) = crate::linux::scope_signals() {
        return refuse(&format!("{problem}; the command was not run"));
    }
    // Root inside the box keeps its capabilities over the box's own namespaces; without
    // CAP_SYS_ADMIN it cannot change the view's mounts' flags (`mount_setattr` has no Landlock
    // hook) nor clone a tree from under a cover (`open_tree`). Dropped from the bounding set,
    // it is gone after `exec`. Nothing to drop where the system never gave it.
    match rustix::thread::remove_capability_from_bounding_set(
        rustix::thread::CapabilitySet::SYS_ADMIN,
    ) {
        // EPERM: no CAP_SETPCAP, so no capability at all (an ordinary user after exec).
        Ok(()) | Err(rustix::io::Errno::INVAL | rustix::io::Errno::PERM) => {}
        Err(error) => {
            return refuse(&format!(
                "cannot drop CAP_SYS_ADMIN ({error}); the command was not run"
            ));
        }
    }
    let Some((name, args)) = program.split_first() else {
        return refuse("no program to run");
    };
    // The outer stages block the signals they wait for; the command must not inherit that
    // (an interactive bash would pass the mask on to every job, and Ctrl-C would do nothing).
    if let Err(error) = SigSet::all().thread_unblock() {
        return refuse(&format!("cannot unblock signals: {error}"));
    }
    let error = std::process::Command::new(name).args(args).exec();
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
    let plan = profile.plan(&crate::rules::list, false);
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
