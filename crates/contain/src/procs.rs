//! Processes by their parent links (`/proc`): a launcher's tree, and telling a launcher from
//! what it runs, so that whoever ends a tree kills the leaves before the subreaper that
//! collects them.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// A process's state letter and parent, from `/proc/<pid>/stat`.
pub fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces or parentheses itself.
    let rest = text.get(text.rfind(')')? + 2..)?;
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Whether `pid` is running (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// Every live process's parent.
pub fn parents() -> HashMap<u32, u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let (state, ppid) = stat(pid)?;
            (state != 'Z' && state != 'X').then_some((pid, ppid))
        })
        .collect()
}

/// Whether `pid` descends from `ancestor` in `parents`.
pub fn descends(mut pid: u32, ancestor: u32, parents: &HashMap<u32, u32>) -> bool {
    for _ in 0..4096 {
        match parents.get(&pid) {
            Some(&parent) if parent == ancestor => return true,
            Some(&parent) if parent > 1 && parent != pid => pid = parent,
            _ => return false,
        }
    }
    false
}

/// The live descendants of `root`.
pub fn descendants(root: u32) -> Vec<u32> {
    let parents = parents();
    let mut found: Vec<u32> = parents
        .keys()
        .copied()
        .filter(|pid| descends(*pid, root, &parents))
        .collect();
    found.sort_unstable();
    found
}

/// Whether `pid` is a containment launcher run from `launcher` (its program, and
/// [`crate::MARKER`] as its first argument). A contained process that names itself so is not
/// one: its program is not the launcher.
pub fn is_launcher(pid: u32, launcher: &Path) -> bool {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let same = exe.is_some_and(|exe| {
        exe == launcher
            || std::fs::canonicalize(launcher).is_ok_and(|l| l == exe)
            // A binary replaced on disk while it runs is shown with this suffix.
            || exe.to_string_lossy().strip_suffix(" (deleted)") == Some(&*launcher.to_string_lossy())
    });
    same && std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|line| line.split(|b| *b == 0).nth(1) == Some(crate::MARKER.as_bytes()))
}

/// How long a launcher asked to end (SIGTERM) may take at most: its first stage waits
/// for the second to end the command's domain, then sweeps what is left. Whoever asks waits
/// this long before touching the launcher itself — freezing or killing one half-way would
/// leave behind the very processes it was ending. An ordinary stop takes milliseconds.
pub const LAUNCHER_ENDS_WITHIN: Duration = Duration::from_secs(12);

/// Asks the launcher `pid` to end its whole tree (SIGTERM) and waits for it to be gone, at most
/// [`LAUNCHER_ENDS_WITHIN`]; false when it was still there.
pub fn terminate(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    let target = nix::unistd::Pid::from_raw(raw);
    if nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM).is_err() {
        return !alive(pid);
    }
    let until = Instant::now() + LAUNCHER_ENDS_WITHIN;
    while alive(pid) {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Kills every descendant of this process (`reap` collects the dead between passes); how many
/// were killed. See [`freeze_and_kill`].
pub(crate) fn kill_tree(within: Duration, reap: &mut dyn FnMut()) -> usize {
    let me = std::process::id();
    freeze_and_kill(
        &mut || {
            reap();
            descendants(me)
        },
        within,
    )
}

/// Ends every process `find` lists, so that none can slip away: first each is stopped
/// (SIGSTOP), pass after pass, until a pass finds every one of them stopped and none new — a
/// stopped process cannot fork, so a loop that forks and exits is caught between two passes
/// instead of racing them — then all are killed (SIGKILL), pass after pass until `find` lists
/// none or `within` has passed. How many were killed.
pub fn freeze_and_kill(find: &mut dyn FnMut() -> Vec<u32>, within: Duration) -> usize {
    let until = Instant::now() + within;
    // Half the time at most goes to freezing: a process stuck in the kernel never shows as
    // stopped, and is killed with the rest.
    let freeze_until = Instant::now() + within / 2;
    let mut killed = std::collections::HashSet::new();
    loop {
        let found = find();
        let mut moving = false;
        for pid in &found {
            if !matches!(stat(*pid), Some(('T' | 't' | 'Z' | 'X', _)) | None) {
                moving = true;
                signal(*pid, nix::sys::signal::Signal::SIGSTOP);
            }
        }
        if !moving || Instant::now() >= freeze_until {
            break;
        }
        std::thread::yield_now();
    }
    loop {
        let victims = find();
        if victims.is_empty() || Instant::now() >= until {
            break;
        }
        for pid in victims {
            if kill(pid) {
                killed.insert(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    killed.len()
}

/// Sends `pid` SIGUSR1: a gateway daemon's emergency stop.
///
/// # Errors
/// The signal could not be sent (no such process, another user's).
pub fn send_stop(pid: u32) -> std::io::Result<()> {
    let raw = i32::try_from(pid).map_err(std::io::Error::other)?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(raw),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .map_err(std::io::Error::from)
}

/// The signal that asks a launcher to end its whole tree.
pub const TERMINATE: nix::sys::signal::Signal = nix::sys::signal::Signal::SIGTERM;

/// Sends `signal` to `pid` (nothing when it is gone).
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), signal);
    }
}

/// Sends SIGKILL to `pid`; false when `pid` is no process id.
pub fn kill(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(raw),
        nix::sys::signal::Signal::SIGKILL,
    );
    true
}
