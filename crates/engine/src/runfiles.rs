//! The running daemon's files, the way Jupyter's runtime files work: `AAI_HOME/run/serve.json`
//! (`{"url", "pid"}`) and `AAI_HOME/run/token` (the bearer token), both 0600 and removed on a
//! clean exit, so the stdio forwarder, `aai-gateway stop`, the app store and the scheduler
//! find the daemon.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The contents of `run/serve.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServeInfo {
    /// The MCP endpoint, e.g. `http://127.0.0.1:7377/mcp`.
    pub url: String,
    pub pid: u32,
}

/// A running daemon as its runtime files describe it.
#[derive(Debug, Clone)]
pub struct Running {
    pub info: ServeInfo,
    pub token: String,
}

fn run_dir(home: &Path) -> PathBuf {
    home.join("run")
}

/// The runtime files of this daemon; removed when dropped (a clean exit).
pub struct RuntimeFiles {
    dir: PathBuf,
}

impl RuntimeFiles {
    /// Writes `serve.json` and `token` (0600) under `home/run/` (0700).
    ///
    /// # Errors
    /// The folder or a file cannot be written.
    pub fn write(home: &Path, info: &ServeInfo, token: &str) -> std::io::Result<Self> {
        let dir = run_dir(home);
        crate::private::create_dir(&dir)?;
        crate::private::write_private(&dir.join("token"), token.as_bytes())?;
        let json = serde_json::to_vec(info).map_err(std::io::Error::other)?;
        crate::private::write_private(&dir.join("serve.json"), &json)?;
        Ok(Self { dir })
    }
}

impl Drop for RuntimeFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join("serve.json"));
        let _ = std::fs::remove_file(self.dir.join("token"));
    }
}

/// The daemon the runtime files under `home` describe, when its process is alive and is a
/// gateway daemon. Files a crashed daemon left behind are ignored (and the next `serve`
/// replaces them).
pub fn running(home: &Path) -> Option<Running> {
    recorded(home).filter(|running| is_daemon(running.info.pid))
}

/// What the runtime files under `home` say, whether or not their daemon lives.
pub fn recorded(home: &Path) -> Option<Running> {
    let dir = run_dir(home);
    let info: ServeInfo =
        serde_json::from_slice(&std::fs::read(dir.join("serve.json")).ok()?).ok()?;
    let token = std::fs::read_to_string(dir.join("token"))
        .ok()?
        .trim()
        .to_owned();
    // (A live pid is not enough for `running`: a crashed daemon's pid may since belong to
    // another program, and whoever holds its old port must not be sent a credential.)
    if token.is_empty() {
        return None;
    }
    Some(Running { info, token })
}

#[cfg(unix)]
pub fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // Signal 0 checks that the process exists (and is ours) without touching it.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

#[cfg(not(unix))]
pub fn alive(_pid: u32) -> bool {
    true
}

/// Whether `pid` is a live gateway daemon (`aai-gateway … serve`), not merely a live process:
/// runtime files a crashed daemon left may name a pid the system has since given to another
/// program. Where the command line cannot be read, a live process counts.
pub fn is_daemon(pid: u32) -> bool {
    if !alive(pid) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return true;
        };
        let mut args = cmdline.split(|b| *b == 0);
        let program = args.next().unwrap_or_default();
        let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
        name.starts_with(b"aai-gateway") && args.any(|a| a == b"serve")
    }
    #[cfg(not(target_os = "linux"))]
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_files_are_private_and_go_on_drop() {
        let home = tempfile::tempdir().expect("home");
        let info = ServeInfo {
            url: "http://127.0.0.1:1/mcp".into(),
            pid: std::process::id(),
        };
        let token = crate::private::new_token();
        assert_eq!(token.len(), 64);
        let files = RuntimeFiles::write(home.path(), &info, &token).expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            for (name, mode) in [
                ("run", 0o700),
                ("run/serve.json", 0o600),
                ("run/token", 0o600),
            ] {
                let meta = std::fs::metadata(home.path().join(name)).expect("meta");
                assert_eq!(meta.permissions().mode() & 0o777, mode, "{name}");
            }
        }
        let found = recorded(home.path()).expect("recorded");
        assert_eq!(found.info, info);
        assert_eq!(found.token, token);
        // This test's own process is alive but is no gateway daemon.
        assert!(running(home.path()).is_none());
        drop(files);
        assert!(recorded(home.path()).is_none());
        assert!(!home.path().join("run/token").exists());
    }

    #[test]
    fn files_of_a_dead_daemon_are_ignored() {
        let home = tempfile::tempdir().expect("home");
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        child.wait().expect("wait");
        let info = ServeInfo {
            url: "http://127.0.0.1:1/mcp".into(),
            pid,
        };
        let files =
            RuntimeFiles::write(home.path(), &info, &crate::private::new_token()).expect("write");
        assert!(running(home.path()).is_none());
        drop(files);
    }
}
