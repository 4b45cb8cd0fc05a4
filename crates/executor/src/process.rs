//! Running an automation program (osascript, PowerShell, adb, xcrun) as a bounded child.
//!
//! Each child runs in its own process group. When the call times out, or its future is
//! dropped because the client went away, the whole group is killed: a script that started
//! helpers cannot leave them behind. Output is read concurrently and capped, so a chatty
//! or hung program never blocks the gateway.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// At most this much of stdout or stderr is kept.
pub const MAX_OUTPUT: usize = 16 * 1024 * 1024;

/// Exactly what runs: the boundary between the gateway and the platform's automation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command {
    pub program: String,
    pub argv: Vec<String>,
    /// Bytes written to the program's stdin (as UTF-8 text); `None`: stdin is empty.
    pub stdin: Option<String>,
    /// Variables set on top of the gateway's environment.
    pub env: BTreeMap<String, String>,
}

impl Command {
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            argv: Vec::new(),
            stdin: None,
            env: BTreeMap::new(),
        }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.argv.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.argv.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn stdin(mut self, text: impl Into<String>) -> Self {
        self.stdin = Some(text.into());
        self
    }
}

/// What a finished program left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Kills the child's process group when dropped, unless disarmed: covers timeouts, errors
/// and futures dropped mid-call alike.
struct GroupGuard {
    pid: Option<u32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            kill_group(pid);
        }
    }
}

#[cfg(unix)]
fn kill_group(pid: u32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Ok(pid) = i32::try_from(pid) {
        // ESRCH (the group is gone already) is the common, harmless case.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(windows)]
fn kill_group(pid: u32) {
    // taskkill /T ends the process and every process it started.
    let _ = std::process::Command::new("taskkill")
        .args(["/F", "/T", "/PID", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

pub use crate::tag::{TAG_VAR, process_tag};

/// Runs `command` for at most `timeout`. `what` names the call in messages
/// (e.g. `com.apple.mail:send_email`).
///
/// # Errors
/// `AUTOMATION_NOT_SUPPORTED` when the program does not exist, `INVALID_PARAMS` when the
/// arguments cannot be passed (too large, NUL), `TIMEOUT`, or `AUTOMATION_FAILED` when the
/// program cannot be started.
pub async fn run(command: &Command, timeout: Duration, what: &str) -> Result<Output, AaiError> {
    // Where the system allows, the call gets a cgroup of its own: what it leaves running —
    // even after `setsid`, a double fork and a cleared environment — ends with the call
    // (the group is killed when it is dropped, with this function's other guards).
    #[cfg(target_os = "linux")]
    let group = crate::cgroup::CallGroup::new();
    #[cfg(target_os = "linux")]
    let (program, argv) = match group.as_ref().and_then(|g| Some((g, locate(command)?))) {
        Some((group, found)) => group.wrap(&found, &command.argv),
        None => (command.program.clone(), command.argv.clone()),
    };
    #[cfg(not(target_os = "linux"))]
    let (program, argv) = (&command.program, &command.argv);
    let mut child = tokio::process::Command::new(program);
    child
        .args(argv)
        .envs(&command.env)
        .env(TAG_VAR, process_tag())
        .stdin(if command.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    child.process_group(0);
    let mut child = child
        .spawn()
        .map_err(|error| spawn_error(&error, command, what))?;
    let mut guard = GroupGuard { pid: child.id() };
    let stdin = child.stdin.take();
    let input = command.stdin.clone();
    let feed = async move {
        if let (Some(mut stdin), Some(input)) = (stdin, input) {
            // A program that exits without reading its input is not an error here.
            let _ = stdin.write_all(input.as_bytes()).await;
            let _ = stdin.shutdown().await;
        }
    };
    let stdout = read_capped(child.stdout.take());
    let stderr = read_capped(child.stderr.take());
    let work = async {
        let ((), stdout, stderr, status) = tokio::join!(feed, stdout, stderr, child.wait());
        (stdout, stderr, status)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok((stdout, stderr, status)) => {
            let status = status.map_err(|error| {
                AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!("{what}: waiting for `{}` failed: {error}", command.program),
                )
            })?;
            // Anything the program left running in its group ends with the call.
            drop(guard);
            Ok(Output {
                code: status.code(),
                stdout,
                stderr,
            })
        }
        Err(_) => {
            if let Some(pid) = guard.pid.take() {
                kill_group(pid);
            }
            let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
            Err(AaiError::new(
                ErrorKind::Timeout,
                format!(
                    "{what} did not finish within {} ms; `{}` and everything it started were stopped. If the app is busy (a dialog open, a large mailbox), try again or raise the tool's `timeout`.",
                    timeout.as_millis(),
                    command.program
                ),
            )
            .with_detail(json!({"timeout_ms": u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX), "program": command.program})))
        }
    }
}

async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>) -> String {
    let Some(reader) = reader else {
        return String::new();
    };
    let mut bytes = Vec::new();
    let mut limited = reader.take(MAX_OUTPUT as u64);
    let _ = limited.read_to_end(&mut bytes).await;
    // Drain the rest so the program never blocks on a full pipe.
    let mut rest = limited.into_inner();
    let _ = tokio::io::copy(&mut rest, &mut tokio::io::sink()).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The file `command.program` names, found on its `PATH` as the OS would find it; `None` when
/// there is none (the spawn then reports it as usual).
#[cfg(target_os = "linux")]
pub fn locate(command: &Command) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let runnable = |path: &std::path::Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.program.contains('/') {
        return runnable(std::path::Path::new(&command.program)).then(|| command.program.clone());
    }
    let path = command
        .env
        .get("PATH")
        .map(std::ffi::OsString::from)
        .or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(&command.program))
        .find(|candidate| runnable(candidate))
        .map(|found| found.to_string_lossy().into_owned())
}

fn spawn_error(error: &std::io::Error, command: &Command, what: &str) -> AaiError {
    if error.kind() == std::io::ErrorKind::NotFound {
        return AaiError::new(
            ErrorKind::AutomationNotSupported,
            format!(
                "{what} needs `{}`, which is not installed or not on PATH here. {}",
                command.program,
                install_hint(&command.program)
            ),
        )
        .with_detail(json!({"program": command.program}));
    }
    // E2BIG on Unix: the arguments exceed what the OS passes to a program.
    if error.raw_os_error() == Some(7) || error.kind() == std::io::ErrorKind::InvalidInput {
        return AaiError::new(
            ErrorKind::InvalidParams,
            format!(
                "{what}: the arguments cannot be passed to `{}` ({error}); shorten the values",
                command.program
            ),
        );
    }
    AaiError::new(
        ErrorKind::AutomationFailed,
        format!("{what}: cannot start `{}`: {error}", command.program),
    )
}

/// Where a missing automation program comes from.
fn install_hint(program: &str) -> &'static str {
    let name = std::path::Path::new(program)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(program);
    match name {
        "osascript" => {
            "AppleScript and JXA tools run only on macOS; on another system, check them with `aai-gateway call … --dry-run --platform macos`."
        }
        "powershell" | "pwsh" => {
            "COM tools run only on Windows, through Windows PowerShell; elsewhere check them with `--dry-run --platform windows`."
        }
        "adb" => {
            "Install the Android platform tools (Debian: apt-get install adb) or set `executors.adb` in config.json to its path."
        }
        "xcrun" | "open" => {
            "iOS URL-scheme tools need Xcode's `xcrun simctl` (or `open`) on macOS; elsewhere check them with `--dry-run --platform ios`."
        }
        _ => "Install it or set its path under `executors` in config.json.",
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        Command::new("sh").arg("-c").arg(script)
    }

    /// Waits (at most 2 s) for the process whose pid is in `pidfile` to end.
    async fn assert_gone(pidfile: &std::path::Path) {
        let pid = std::fs::read_to_string(pidfile).expect("pid written");
        let stat = format!("/proc/{}/stat", pid.trim());
        for _ in 0..100 {
            let state = std::fs::read_to_string(&stat).unwrap_or_default();
            // Gone, or a zombie waiting for init to reap it.
            if state.is_empty() || state.split_whitespace().nth(2) == Some("Z") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("process {} outlived its call", pid.trim());
    }

    #[tokio::test]
    async fn passes_argv_stdin_and_env() {
        let mut command = sh("printf '%s|' \"$0\" \"$1\" \"$GREETING\"; cat")
            .arg("a b")
            .arg("$(id)")
            .stdin("from stdin ü");
        command.env.insert("GREETING".into(), "hi".into());
        let output = run(&command, Duration::from_secs(10), "t")
            .await
            .expect("ran");
        assert!(output.success());
        assert_eq!(output.stdout, "a b|$(id)|hi|from stdin ü");
    }

    #[tokio::test]
    async fn a_missing_program_is_automation_not_supported() {
        let error = run(
            &Command::new("osascript-not-here"),
            Duration::from_secs(5),
            "t",
        )
        .await
        .expect_err("missing");
        assert_eq!(error.kind, ErrorKind::AutomationNotSupported);
        assert!(error.message.contains("osascript-not-here"));
    }

    /// A timed-out program is killed with everything it started, and the caller is answered
    /// right away.
    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().expect("dir");
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > '{}'; sleep 300", pidfile.display());
        let started = std::time::Instant::now();
        let error = run(&sh(&script), Duration::from_millis(300), "t")
            .await
            .expect_err("times out");
        assert_eq!(error.kind, ErrorKind::Timeout);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_gone(&pidfile).await;
    }

    #[tokio::test]
    async fn helpers_left_behind_by_a_finished_program_are_stopped() {
        let dir = tempfile::tempdir().expect("dir");
        let pidfile = dir.path().join("pid");
        // The helper closes its copies of the pipes, so the call returns when sh exits.
        let script = format!(
            "sleep 300 >/dev/null 2>&1 & echo $! > '{}'; echo done",
            pidfile.display()
        );
        let output = run(&sh(&script), Duration::from_secs(10), "t")
            .await
            .expect("ran");
        assert_eq!(output.stdout, "done\n");
        assert_gone(&pidfile).await;
    }

    /// With cgroups, even a helper that left the process group and session and cleared its
    /// environment (so neither the group kill nor the emergency stop's tag finds it) ends
    /// with the call, whether the call finished or timed out.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn with_cgroups_an_escaped_helper_ends_with_its_call() {
        if !crate::cgroup::available() {
            eprintln!("cgroups cannot be made here (not root, no delegation): nothing to test");
            return;
        }
        for (wait, ends) in [(10_000, "finished"), (800, "timed out")] {
            let dir = tempfile::tempdir().expect("dir");
            let pidfile = dir.path().join("pid");
            let script = format!(
                "setsid env -i /bin/sh -c 'sleep 300 >/dev/null 2>&1 & echo $! > {}' </dev/null >/dev/null 2>&1 & sleep {}",
                pidfile.display(),
                if wait > 1000 { "0.5" } else { "300" }
            );
            let result = run(&sh(&script), Duration::from_millis(wait), "t").await;
            assert_eq!(result.is_ok(), ends == "finished", "{ends}: {result:?}");
            assert_gone(&pidfile).await;
        }
    }
}
