//! The terminal app: persistent bash sessions on a PTY (`bash_execute`, `bash_session`).
//!
//! Each session is one interactive bash (job control on, no readline, no prompt, no echo).
//! A command runs as `{ command; } </dev/null 2>stderr-file`, followed by a `printf` of a
//! marker carrying `$?`: the working directory and environment persist because the command
//! runs in the session's own shell; stdout comes from the PTY, stderr from its file. A command
//! that overruns gets Ctrl-C (its job only), then SIGKILL for its process group, and the
//! session stays usable; a shell that stops answering is replaced.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aai_descriptor::{AaiError, ErrorKind};
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, mpsc};

/// Characters of output returned at most; the middle of longer output is cut.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Bytes kept while a command runs (the rest is counted, not stored).
const MAX_BUFFER: usize = 16 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// How long an interrupted command gets to stop before its group is killed.
const GRACE: Duration = Duration::from_secs(2);

struct Session {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    output: mpsc::UnboundedReceiver<Vec<u8>>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    stderr_file: PathBuf,
    _dir: tempfile::TempDir,
    shell: String,
    created: Instant,
}

/// The sessions of one gateway.
#[derive(Default)]
pub struct Sessions {
    sessions: std::sync::Mutex<HashMap<String, Arc<Mutex<Session>>>>,
    next: std::sync::atomic::AtomicU64,
}

fn failed(message: String) -> AaiError {
    AaiError::new(ErrorKind::AutomationFailed, message)
}

fn nonce() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Session {
    fn start(shell: &str) -> Result<Self, AaiError> {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 50,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| failed(format!("cannot open a terminal: {e}")))?;
        let mut command = CommandBuilder::new(shell);
        if shell.ends_with("bash") {
            command.args(["--noprofile", "--norc", "--noediting", "-i"]);
        } else {
            command.arg("-i");
        }
        command.env("PS1", "");
        command.env("PS2", "");
        command.env("TERM", "dumb");
        command.env("HISTFILE", "/dev/null");
        command.cwd(crate::config::user_home());
        let child = pty.slave.spawn_command(command).map_err(|e| {
            AaiError::new(
                ErrorKind::AutomationNotSupported,
                format!("cannot start `{shell}`: {e}; install it or pass another `shell`"),
            )
        })?;
        drop(pty.slave);
        let mut reader = pty
            .master
            .try_clone_reader()
            .map_err(|e| failed(format!("cannot read the terminal: {e}")))?;
        let writer = pty
            .master
            .take_writer()
            .map_err(|e| failed(format!("cannot write to the terminal: {e}")))?;
        let (tx, output) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("aai-pty-reader".into())
            .spawn(move || {
                let mut buffer = [0u8; 16 * 1024];
                loop {
                    match reader.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if tx.send(buffer[..n].to_vec()).is_err() {
                                break;
                            }
                        }
                    }
                }
            })
            .map_err(|e| failed(format!("cannot start the terminal reader: {e}")))?;
        let dir = tempfile::tempdir()
            .map_err(|e| failed(format!("cannot make a session folder: {e}")))?;
        let mut session = Self {
            master: pty.master,
            writer,
            output,
            child,
            stderr_file: dir.path().join("stderr"),
            _dir: dir,
            shell: shell.to_owned(),
            created: Instant::now(),
        };
        session.send("stty -echo 2>/dev/null; PROMPT_COMMAND=''; set +o history 2>/dev/null\n")?;
        Ok(session)
    }

    /// Waits until the shell has run its setup (echo off), dropping what it printed so far.
    async fn ready(&mut self) -> Result<(), AaiError> {
        let nonce = nonce();
        self.send(&format!("printf '\\n__AAI_DONE_%s_%s__\\n' {nonce} 0\n"))?;
        let mut out = Output::default();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        match self
            .read_until(&format!("__AAI_DONE_{nonce}_"), deadline, &mut out)
            .await
        {
            Some(_) => Ok(()),
            None => Err(failed(format!(
                "`{}` did not start answering within 10 s",
                self.shell
            ))),
        }
    }

    fn send(&mut self, text: &str) -> Result<(), AaiError> {
        self.writer
            .write_all(text.as_bytes())
            .and_then(|()| self.writer.flush())
            .map_err(|e| failed(format!("the shell stopped taking input: {e}")))
    }

    /// Reads until `marker` and a status appear; `None` when `deadline` passes first.
    async fn read_until(
        &mut self,
        marker: &str,
        deadline: tokio::time::Instant,
        out: &mut Output,
    ) -> Option<i32> {
        loop {
            if let Some(code) = out.take_marker(marker) {
                return Some(code);
            }
            match tokio::time::timeout_at(deadline, self.output.recv()).await {
                Ok(Some(bytes)) => out.push(&bytes),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// Runs one command.
    async fn run(
        &mut self,
        command: &str,
        working_dir: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, AaiError> {
        // Discard what earlier commands left behind (a late line of an interrupted job).
        while self.output.try_recv().is_ok() {}
        let nonce = nonce();
        let marker = format!("__AAI_DONE_{nonce}_");
        let cd = working_dir.map_or_else(String::new, |dir| {
            format!("cd -- {} && ", aai_executor::shell_quote(dir))
        });
        let stderr = aai_executor::shell_quote(&self.stderr_file.to_string_lossy());
        // The marker is assembled by printf, so an echo of this line can never look like it.
        let status_line = format!("printf '\\n__AAI_DONE_%s_%s__\\n' {nonce} \"$?\"\n");
        self.send(&format!(
            "{{ {cd}{command}\n}} </dev/null 2>{stderr}\n{status_line}"
        ))?;
        let started = Instant::now();
        let mut out = Output::default();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut code = self.read_until(&marker, deadline, &mut out).await;
        let mut timed_out = false;
        if code.is_none() {
            timed_out = true;
            // Ctrl-C stops the foreground job; the tty drops queued input, so ask again.
            self.send("\u{3}")?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.send(&status_line)?;
            code = self
                .read_until(&marker, tokio::time::Instant::now() + GRACE, &mut out)
                .await;
            if code.is_none() {
                self.kill_foreground();
                self.send(&status_line)?;
                code = self
                    .read_until(&marker, tokio::time::Instant::now() + GRACE, &mut out)
                    .await;
            }
            if code.is_none() {
                return Err(failed(format!(
                    "the command ran over {} ms and the shell no longer answers; the session was closed, start a new one",
                    timeout.as_millis()
                )));
            }
        }
        let stderr = std::fs::read(&self.stderr_file).unwrap_or_default();
        let mut stdout = out.text();
        if timed_out {
            stdout.push_str(&format!(
                "\n[TIMEOUT: stopped after {} ms; the session is still usable]",
                timeout.as_millis()
            ));
        }
        Ok(json!({
            "stdout": cap(&stdout),
            "stderr": cap(&String::from_utf8_lossy(&stderr)),
            "exit_code": code,
            "timed_out": timed_out,
            "duration_ms": started.elapsed().as_millis() as u64,
        }))
    }

    /// SIGKILL to the terminal's foreground process group, unless that is the shell itself.
    fn kill_foreground(&self) {
        #[cfg(unix)]
        {
            let shell = self.child.process_id();
            if let Some(group) = self.master.process_group_leader()
                && Some(group as u32) != shell
                && group > 0
            {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(group),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Output collected while a command runs.
#[derive(Default)]
struct Output {
    bytes: Vec<u8>,
    dropped: usize,
}

impl Output {
    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_BUFFER.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.dropped += bytes.len().saturating_sub(room);
    }

    /// Removes `\n<marker><status>__` and what follows; returns the status.
    fn take_marker(&mut self, marker: &str) -> Option<i32> {
        let text = String::from_utf8_lossy(&self.bytes).into_owned();
        let at = text.find(marker)?;
        let rest = &text[at + marker.len()..];
        let end = rest.find("__")?;
        let code = rest[..end].trim().parse().unwrap_or(-1);
        let mut before = text[..at].to_owned();
        // The newline the marker line added.
        if before.ends_with("\r\n") {
            before.truncate(before.len() - 2);
        } else if before.ends_with('\n') {
            before.pop();
        }
        self.bytes = before.into_bytes();
        Some(code)
    }

    fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).replace("\r\n", "\n");
        // Like `$(…)`: trailing newlines are not part of the answer.
        text.truncate(text.trim_end_matches('\n').len());
        if self.dropped > 0 {
            text.push_str(&format!(
                "\n[{} more bytes of output were not kept]",
                self.dropped
            ));
        }
        text
    }
}

/// `text` cut to [`MAX_OUTPUT_CHARS`], keeping its start and end, with a notice.
fn cap(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_OUTPUT_CHARS {
        return text.to_owned();
    }
    let half = MAX_OUTPUT_CHARS / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(count - half).collect();
    format!(
        "{head}\n[... output truncated: {} characters omitted ...]\n{tail}",
        count - 2 * half
    )
}

fn arg_str<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

impl Sessions {
    fn get(&self, id: &str) -> Option<Arc<Mutex<Session>>> {
        self.sessions.lock().ok()?.get(id).cloned()
    }

    async fn create(&self, shell: &str, id: Option<String>) -> Result<String, AaiError> {
        let id = id.unwrap_or_else(|| {
            format!(
                "s{}",
                self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
            )
        });
        let mut session = Session::start(shell)?;
        session.ready().await?;
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(id.clone(), Arc::new(Mutex::new(session)));
        }
        Ok(id)
    }

    fn remove(&self, id: &str) -> bool {
        let removed = self.sessions.lock().ok().and_then(|mut s| s.remove(id));
        if let Some(session) = removed {
            if let Ok(mut session) = session.try_lock() {
                let _ = session.child.kill();
            }
            true
        } else {
            false
        }
    }

    /// `bash_execute`.
    ///
    /// # Errors
    /// INVALID_PARAMS (no command, an unknown session, a bad working_dir), AUTOMATION_FAILED.
    pub async fn execute(&self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let command = arg_str(args, "command").ok_or_else(|| {
            AaiError::new(ErrorKind::InvalidParams, "`command` is required")
                .with_detail(json!({"field": "command"}))
        })?;
        let id = arg_str(args, "session_id").unwrap_or("default").to_owned();
        if let Some(dir) = arg_str(args, "working_dir")
            && !std::path::Path::new(dir).is_dir()
        {
            return Err(AaiError::new(
                ErrorKind::InvalidParams,
                format!("working_dir {dir:?} is not a directory"),
            ));
        }
        let timeout = Duration::from_millis(
            args.get("timeout")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .max(1),
        );
        let session = match self.get(&id) {
            Some(session) => session,
            None if id == "default" => {
                self.create("bash", Some(id.clone())).await?;
                self.get(&id)
                    .ok_or_else(|| failed("the default session could not start".into()))?
            }
            None => {
                return Err(AaiError::new(
                    ErrorKind::InvalidParams,
                    format!(
                        "no session {id:?}; create one with bash_session {{\"action\": \"create\"}} or leave session_id out"
                    ),
                ));
            }
        };
        let mut guard = session.lock().await;
        let result = guard
            .run(command, arg_str(args, "working_dir"), timeout)
            .await;
        drop(guard);
        match result {
            Ok(mut value) => {
                value["session_id"] = json!(id);
                Ok(value)
            }
            Err(error) => {
                self.remove(&id);
                Err(error)
            }
        }
    }

    /// `bash_session`: create, list, kill.
    ///
    /// # Errors
    /// INVALID_PARAMS for an unknown action or session.
    pub async fn manage(&self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        match arg_str(args, "action") {
            Some("create") => {
                let shell = arg_str(args, "shell").unwrap_or("bash");
                let id = self
                    .create(shell, arg_str(args, "session_id").map(str::to_owned))
                    .await?;
                Ok(json!({"session_id": id, "shell": shell}))
            }
            Some("list") => {
                let sessions: Vec<(String, Arc<Mutex<Session>>)> = self
                    .sessions
                    .lock()
                    .map(|s| s.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default();
                let mut list = Vec::new();
                for (id, session) in sessions {
                    let (shell, age, busy) = match session.try_lock() {
                        Ok(s) => (s.shell.clone(), s.created.elapsed().as_secs(), false),
                        Err(_) => (String::new(), 0, true),
                    };
                    list.push(
                        json!({"session_id": id, "shell": shell, "age_seconds": age, "busy": busy}),
                    );
                }
                list.sort_by(|a, b| a["session_id"].as_str().cmp(&b["session_id"].as_str()));
                Ok(json!({"sessions": list}))
            }
            Some("kill") => {
                let id = arg_str(args, "session_id").ok_or_else(|| {
                    AaiError::new(
                        ErrorKind::InvalidParams,
                        "`session_id` is required to kill a session",
                    )
                })?;
                if self.remove(id) {
                    Ok(json!({"killed": id}))
                } else {
                    Err(AaiError::new(
                        ErrorKind::InvalidParams,
                        format!("no session {id:?}"),
                    ))
                }
            }
            other => Err(AaiError::new(
                ErrorKind::InvalidParams,
                format!("`action` must be create, list or kill, not {other:?}"),
            )),
        }
    }
}

impl Drop for Sessions {
    fn drop(&mut self) {
        if let Ok(sessions) = self.sessions.get_mut() {
            for session in sessions.values() {
                if let Ok(mut session) = session.try_lock() {
                    let _ = session.child.kill();
                }
            }
        }
    }
}
