//! A cgroup per call (Linux cgroup v2), where this process may make child groups of its own
//! cgroup: as root, or under a systemd unit with `Delegate=yes` (the user unit
//! `aai-gateway service install` writes has it). A process cannot leave its cgroup by
//! `setsid`, a double fork or a cleared environment, so killing the group ends everything the
//! call started. Where groups cannot be made, nothing changes: the process tag and the process
//! tree still find what a call started (see the emergency stop).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::tag::process_tag;

/// Call groups are named `aai-call-<gateway tag>-<n>`.
const PREFIX: &str = "aai-call-";
/// How long dropping a group waits for its killed processes to go before removing it.
const REMOVE_WITHIN: Duration = Duration::from_millis(500);

/// The folder call groups are made in (this process's own cgroup), when they can be.
fn base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(detect).as_deref()
}

/// Whether calls run in cgroups of their own on this machine.
pub fn available() -> bool {
    base().is_some()
}

fn detect() -> Option<PathBuf> {
    if std::env::var_os("AAI_NO_CGROUPS").is_some() {
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own
        .lines()
        .find_map(|line| line.strip_prefix("0::"))?
        .trim();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })?;
    let dir = mount.join(own.trim_start_matches('/'));
    // Moving a process needs write access to the procs file of the groups it moves between.
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .ok()?;
    let probe = dir.join(format!("{PREFIX}{}-probe", process_tag()));
    std::fs::create_dir(&probe).ok()?;
    let _ = std::fs::remove_dir(&probe);
    tracing::debug!(dir = %dir.display(), "calls run in cgroups of their own");
    Some(dir)
}

/// One call's cgroup. Dropping it kills what is still in it and removes it.
#[derive(Debug)]
pub struct CallGroup {
    dir: PathBuf,
}

/// `$0` is the group's `cgroup.procs`; `$@` the program and its arguments.
const ENTER_AND_EXEC: &str = r#"echo 0 > "$0" 2>/dev/null; exec "$@""#;

impl CallGroup {
    /// A new, empty group; `None` where groups cannot be made.
    pub fn new() -> Option<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = base()?;
        if n % 64 == 63 {
            sweep(base);
        }
        let dir = base.join(format!("{PREFIX}{}-{n}", process_tag()));
        std::fs::create_dir(&dir).ok()?;
        Some(Self { dir })
    }

    /// The program and arguments that run `program argv…` inside the group: a POSIX shell
    /// writes itself into the group's `cgroup.procs` and then becomes the program (`exec`),
    /// so nothing the program starts is ever outside. The path and every argument are
    /// positional parameters of the shell, never script text. Should the write fail, the
    /// program runs anyway, outside the group.
    pub fn wrap(&self, program: &str, argv: &[String]) -> (String, Vec<String>) {
        let mut args = vec![
            "-c".to_owned(),
            ENTER_AND_EXEC.to_owned(),
            self.dir.join("cgroup.procs").to_string_lossy().into_owned(),
            program.to_owned(),
        ];
        args.extend(argv.iter().cloned());
        ("/bin/sh".to_owned(), args)
    }

    /// The group's `cgroup.procs`: a process that writes `0` to it enters the group (the
    /// containment launcher does, before it restricts itself).
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Moves an already started process into the group.
    pub fn adopt(&self, pid: u32) -> bool {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).is_ok()
    }

    /// The processes in the group now.
    pub fn pids(&self) -> Vec<u32> {
        pids(&self.dir)
    }

    /// Kills everything in the group; how many processes were in it.
    pub fn kill(&self) -> usize {
        kill(&self.dir)
    }

    /// Lets what runs in the group go on after its owner is done (a terminal session's
    /// background jobs): the group is removed now if empty, else once a later call finds it
    /// empty; the emergency stop still kills what is in it.
    pub fn release(self) {
        let _ = std::fs::remove_dir(&self.dir);
        std::mem::forget(self);
    }
}

/// Removes this gateway's groups that nothing runs in any more.
fn sweep(base: &Path) {
    let mine = format!("{PREFIX}{}-", process_tag());
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_name().to_string_lossy().starts_with(&mine) {
                // Fails, harmlessly, for a group that still holds processes.
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
}

impl Drop for CallGroup {
    fn drop(&mut self) {
        kill(&self.dir);
        let until = Instant::now() + REMOVE_WITHIN;
        // A group can be removed once its killed processes are gone.
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn pids(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Kills every process of the group at `dir`: at once with `cgroup.kill` (Linux 5.14), else
/// one by one until it is empty. Returns how many there were.
fn kill(dir: &Path) -> usize {
    let found = pids(dir);
    if found.is_empty() {
        return 0;
    }
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return found.len();
    }
    let mut killed = std::collections::HashSet::new();
    let until = Instant::now() + REMOVE_WITHIN;
    loop {
        let left = pids(dir);
        if left.is_empty() || Instant::now() >= until {
            break;
        }
        for pid in left {
            if let Ok(raw) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(raw),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            killed.insert(pid);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    killed.len()
}

/// Kills the processes of every call group of this gateway (the emergency stop); how many.
pub fn kill_all() -> usize {
    let Some(base) = base() else {
        return 0;
    };
    let mine = format!("{PREFIX}{}-", process_tag());
    std::fs::read_dir(base)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_name().to_string_lossy().starts_with(&mine))
                .map(|entry| kill(&entry.path()))
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `setsid` double fork with a cleared environment: neither the process group, nor the
    /// session, nor the gateway's tag, nor the process tree leads to it — only its cgroup.
    #[test]
    fn an_escapee_that_hides_every_other_way_dies_with_its_group() {
        if !available() {
            eprintln!("cgroups cannot be made here (not root, no delegation): nothing to test");
            return;
        }
        let dir = tempfile::tempdir().expect("dir");
        let pidfile = dir.path().join("escapee");
        let group = CallGroup::new().expect("a group");
        let script = format!(
            "setsid env -i /bin/sh -c 'sleep 300 & echo $! > {}' &",
            pidfile.display()
        );
        let (program, args) = group.wrap("/bin/sh", &["-c".to_owned(), script]);
        let status = std::process::Command::new(program)
            .args(args)
            .status()
            .expect("sh");
        assert!(status.success());
        let started = Instant::now();
        while !pidfile.exists()
            || std::fs::read_to_string(&pidfile)
                .expect("pid")
                .trim()
                .is_empty()
        {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the escapee never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .expect("pid")
            .trim()
            .parse()
            .expect("a pid");
        assert!(group.pids().contains(&pid), "the escapee is in the group");
        let alive = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .and_then(|s| s.split_whitespace().next())
                    != Some("Z")
            })
        };
        assert!(alive(pid));
        let path = group.dir.clone();
        drop(group);
        let started = Instant::now();
        while alive(pid) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the escapee outlived its group"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!path.exists(), "the group is removed");
    }
}
