//! `aai-gateway __cdp-pipe -- PROGRAM ARGS…`: runs a Chromium with its DevTools protocol on a
//! pipe instead of a port.
//!
//! With `--remote-debugging-port` the browser listens on loopback, where any process of the
//! user — a contained command included, since the sandbox does not filter the network — could
//! drive it: open `file://` pages the sandbox hides, turn downloads back on, write anywhere the
//! browser may. With `--remote-debugging-pipe` Chromium reads commands from descriptor 3 and
//! writes replies to descriptor 4, which only the gateway holds. Rust's process API sets only
//! the three standard streams of a child (anything more needs `unsafe` before `exec`), so the
//! gateway hands the pipe ends over as this helper's standard input and output; the helper
//! moves them to 3 and 4, puts `/dev/null` in their place and becomes the browser.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::ExitCode;

/// `argv[1]` of the gateway binary that makes it this helper.
pub const MARKER: &str = "__cdp-pipe";

/// Names the gateway's pid: the browser is killed when the thread that started this helper
/// ends (a parent-death signal, kept across `exec`), and is not started at all when that
/// process is already gone. The gateway starts browsers from a thread that lasts as long as
/// it does, so a SIGKILL of the gateway — which runs no clean-up of its own — ends its
/// browsers too, instead of leaving them holding the profile.
pub const LIFELINE_VAR: &str = "AAI_BROWSER_LIFELINE";

fn fail(message: &str) -> ExitCode {
    eprintln!("aai-gateway (browser pipe): {message}");
    ExitCode::from(126)
}

/// Moves standard input to descriptor 3 and standard output to 4, then runs `args` (after an
/// optional `--`); returns only when it cannot.
pub fn exec(args: &[String]) -> ExitCode {
    let program = match args.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => args,
    };
    let Some((name, rest)) = program.split_first() else {
        return fail("no program to run");
    };
    if let Some(owner) = std::env::var(LIFELINE_VAR)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    {
        if let Err(error) =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        {
            return fail(&format!("cannot tie the browser to the gateway: {error}"));
        }
        // The gateway may have died before the line above: then nothing would end this one.
        if rustix::process::Pid::as_raw(rustix::process::getppid()) != owner {
            return fail("the gateway that started the browser is gone");
        }
    }
    let null = || {
        std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map(OwnedFd::from)
    };
    // Nothing but 0, 1 and 2 is open here: the next two descriptors are 3 and 4.
    let (Ok(mut three), Ok(mut four)) = (null(), null()) else {
        return fail("cannot open /dev/null");
    };
    if three.as_raw_fd() != 3 || four.as_raw_fd() != 4 {
        return fail("descriptors 3 and 4 are taken");
    }
    // dup2 leaves the new descriptors open across exec (close-on-exec cleared).
    if let Err(error) = rustix::io::dup2(std::io::stdin(), &mut three)
        .and_then(|()| rustix::io::dup2(std::io::stdout(), &mut four))
    {
        return fail(&format!(
            "cannot move the pipe to descriptors 3 and 4: {error}"
        ));
    }
    let Ok(quiet) = null() else {
        return fail("cannot open /dev/null");
    };
    if let Err(error) =
        rustix::stdio::dup2_stdin(&quiet).and_then(|()| rustix::stdio::dup2_stdout(&quiet))
    {
        return fail(&format!("cannot quiet the standard streams: {error}"));
    }
    // The browser inherits 3 and 4; this process never closes them.
    std::mem::forget(three);
    std::mem::forget(four);
    let error = std::process::Command::new(name)
        .args(rest)
        .env_remove(LIFELINE_VAR)
        .exec();
    fail(&format!("cannot run {name:?}: {error}"))
}
