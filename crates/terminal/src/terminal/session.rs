//! One shell session of the terminal: running a command in it, reading its output as it
//! comes, and ending it with everything it started.

use super::*;

/// The environment of a terminal nobody watches: pagers print, editors and password prompts
/// return at once (`git commit` without `-m` stops with "empty message"), no colour.
pub(super) const NON_INTERACTIVE: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", "cat"),
    ("SYSTEMD_COLORS", "0"),
    ("LESS", "-FRX"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_EDITOR", "true"),
    ("EDITOR", "true"),
    ("VISUAL", "true"),
    ("GCM_INTERACTIVE", "never"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("PIP_NO_INPUT", "1"),
    ("NO_COLOR", "1"),
    ("CLICOLOR", "0"),
    ("CARGO_TERM_COLOR", "never"),
    ("CARGO_TERM_PROGRESS_WHEN", "never"),
];

impl Session {
    pub(super) fn start(
        shell: &str,
        cwd: &std::path::Path,
        contain: Option<&aai_contain::Profile>,
    ) -> Result<Self, AaiError> {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 50,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| failed(format!("cannot open a terminal: {e}")))?;
        let args: Vec<String> = if shell.ends_with("bash") {
            ["--noprofile", "--norc", "--noediting", "-i"]
                .map(str::to_owned)
                .to_vec()
        } else {
            vec!["-i".to_owned()]
        };
        #[cfg(target_os = "linux")]
        let group = aai_executor::cgroup::CallGroup::new();
        #[cfg(target_os = "linux")]
        let located = aai_executor::process::locate(&aai_executor::process::Command::new(shell));
        #[cfg(not(target_os = "linux"))]
        let located: Option<String> = None;
        // The session's own folder (the commands' stderr goes there): made first, so that a
        // contained shell, whose temporary folder is private, still sees it.
        let dir = tempfile::tempdir()
            .map_err(|e| failed(format!("cannot make a session folder: {e}")))?;
        let (program, args) = match contain {
            Some(profile) => {
                #[allow(unused_mut)]
                let mut profile = profile.clone();
                profile.write.push(dir.path().to_path_buf());
                // The launcher enters the session's group before it restricts itself.
                #[cfg(target_os = "linux")]
                {
                    profile.cgroup = group.as_ref().map(aai_executor::cgroup::CallGroup::procs);
                }
                aai_sandbox::profile::wrap(&profile, located.as_deref().unwrap_or(shell), &args)?
            }
            #[cfg(target_os = "linux")]
            None => match (&group, &located) {
                (Some(group), Some(found)) => group.wrap(found, &args),
                _ => (shell.to_owned(), args),
            },
            #[cfg(not(target_os = "linux"))]
            None => (shell.to_owned(), args),
        };
        let mut command = CommandBuilder::new(program);
        command.args(args);
        command.env("PS1", "");
        command.env("PS2", "");
        command.env("TERM", "dumb");
        command.env("HISTFILE", "/dev/null");
        // Nobody sees this terminal: nothing may wait on a pager, an editor or a prompt, and
        // output comes without colour codes unless a command asks for them.
        for (name, value) in NON_INTERACTIVE {
            command.env(name, value);
        }
        command.env(
            aai_executor::process::TAG_VAR,
            aai_executor::process::process_tag(),
        );
        command.cwd(cwd);
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
        let mut session = Self {
            master: pty.master,
            writer,
            output,
            child,
            stderr_file: dir.path().join("stderr"),
            _dir: dir,
            shell: shell.to_owned(),
            shell_pid: None,
            contained: contain.is_some(),
            created: Instant::now(),
            killed: Arc::default(),
            #[cfg(target_os = "linux")]
            group,
        };
        session.send("stty -echo 2>/dev/null; PROMPT_COMMAND=''; set +o history 2>/dev/null\n")?;
        Ok(session)
    }

    /// Waits until the shell has run its setup (echo off), dropping what it printed so far,
    /// and learns the shell's own pid.
    pub(super) async fn ready(&mut self) -> Result<(), AaiError> {
        let nonce = nonce();
        self.send(&format!(
            "printf '\\n__AAI_DONE_%s_%s__\\n' {nonce} \"$$\"\n"
        ))?;
        let mut out = Output::default();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        match self
            .read_until(&format!("__AAI_DONE_{nonce}_"), deadline, &mut out, None)
            .await
        {
            Read::Marker(pid) => {
                self.shell_pid = u32::try_from(pid).ok().filter(|p| *p > 0);
                Ok(())
            }
            _ => Err(failed(format!(
                "`{}` did not start answering within 10 s",
                self.shell
            ))),
        }
    }

    pub(super) fn send(&mut self, text: &str) -> Result<(), AaiError> {
        self.writer
            .write_all(text.as_bytes())
            .and_then(|()| self.writer.flush())
            .map_err(|e| failed(format!("the shell stopped taking input: {e}")))
    }

    /// Reads until `marker` and a status appear, the deadline passes, the shell's terminal
    /// closes or `cancel` fires.
    pub(super) async fn read_until(
        &mut self,
        marker: &str,
        deadline: tokio::time::Instant,
        out: &mut Output,
        cancel: Option<&CancellationToken>,
    ) -> Read {
        loop {
            if let Some(code) = out.take_marker(marker) {
                return Read::Marker(code);
            }
            let cancelled = async {
                match cancel {
                    Some(token) => token.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                received = tokio::time::timeout_at(deadline, self.output.recv()) => match received {
                    Ok(Some(bytes)) => out.push(&bytes),
                    Ok(None) => return Read::Closed,
                    Err(_) => return Read::Deadline,
                },
                () = cancelled => return Read::Cancelled,
            }
        }
    }

    /// The shell ended: its status, waited for briefly (the terminal closes just before).
    pub(super) async fn ended(&mut self, stdout: String, started: Instant) -> Value {
        let mut status = None;
        for _ in 0..50 {
            if let Ok(Some(done)) = self.child.try_wait() {
                status = Some(done);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let killed = self.killed.load(std::sync::atomic::Ordering::SeqCst);
        let code = status.as_ref().map(portable_pty::ExitStatus::exit_code);
        let signal = status.as_ref().and_then(|s| s.signal().map(str::to_owned));
        let how = if killed {
            "it was killed with bash_session kill".to_owned()
        } else {
            match (&signal, code) {
                (Some(signal), _) => format!("the shell was ended by a signal ({signal})"),
                (None, Some(code)) => format!("the shell exited with status {code}"),
                (None, None) => "the shell exited".to_owned(),
            }
        };
        let stderr = read_stderr(&self.stderr_file);
        json!({
            "stdout": cap(&stdout),
            "stderr": cap(&String::from_utf8_lossy(&stderr)),
            "exit_code": code,
            "signal": signal,
            "timed_out": false,
            "session_ended": true,
            "note": format!("The session ended: {how}. Its working directory and environment are gone."),
            "duration_ms": started.elapsed().as_millis() as u64,
        })
    }

    /// Latest lines of what a running command printed, for a progress report.
    pub(super) fn tail(out: &Output) -> String {
        let text = String::from_utf8_lossy(&out.bytes).replace("\r\n", "\n");
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        let tail: Vec<&str> = lines.into_iter().rev().collect();
        let joined = tail.join("\n");
        let count = joined.chars().count();
        if count > 500 {
            joined.chars().skip(count - 500).collect()
        } else {
            joined
        }
    }

    /// Runs one command. `cancel` interrupts it (Ctrl-C, then SIGKILL to its process group)
    /// and leaves the session ready for the next; `progress` gets the latest output lines.
    pub(super) async fn run(
        &mut self,
        command: &str,
        working_dir: Option<&str>,
        timeout: Duration,
        cancel: &CancellationToken,
        progress: Option<&mpsc::UnboundedSender<String>>,
    ) -> Result<Value, AaiError> {
        // Discard what earlier commands left behind (a late line of an interrupted job).
        while self.output.try_recv().is_ok() {}
        // A fresh stderr file for each command: whatever an earlier one left in its place (a
        // link, a FIFO) is removed, never followed.
        let _ = std::fs::remove_file(&self.stderr_file);
        let _ = std::fs::File::create_new(&self.stderr_file);
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
        let mut read = loop {
            let step = match progress {
                Some(_) => (tokio::time::Instant::now() + PROGRESS_EVERY).min(deadline),
                None => deadline,
            };
            match self.read_until(&marker, step, &mut out, Some(cancel)).await {
                Read::Deadline if tokio::time::Instant::now() < deadline => {
                    if let Some(progress) = progress {
                        let _ = progress.send(Self::tail(&out));
                    }
                }
                other => break other,
            }
        };
        let mut timed_out = false;
        if matches!(read, Read::Cancelled) {
            // The client gave up on this call: stop the command now, keep the session.
            self.send("\u{3}")?;
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.send(&status_line)?;
            let soon = tokio::time::Instant::now() + CANCEL_GRACE;
            read = self.read_until(&marker, soon, &mut out, None).await;
            if matches!(read, Read::Deadline) {
                self.kill_foreground();
                self.send(&status_line)?;
                let soon = tokio::time::Instant::now() + CANCEL_GRACE;
                read = self.read_until(&marker, soon, &mut out, None).await;
            }
            return match read {
                Read::Marker(_) => Err(AaiError::new(
                    ErrorKind::AutomationFailed,
                    "the call was cancelled; the command was stopped and the session is ready",
                )
                .with_detail(json!({"reason": "cancelled"}))),
                Read::Closed => Ok(self.ended(out.text(), started).await),
                _ => Err(failed(
                    "the call was cancelled and the shell no longer answers; the session was closed".into(),
                )),
            };
        }
        if matches!(read, Read::Deadline) {
            timed_out = true;
            // Ctrl-C stops the foreground job; the tty drops queued input, so ask again.
            self.send("\u{3}")?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.send(&status_line)?;
            read = self
                .read_until(&marker, tokio::time::Instant::now() + GRACE, &mut out, None)
                .await;
            if matches!(read, Read::Deadline) {
                self.kill_foreground();
                self.send(&status_line)?;
                read = self
                    .read_until(&marker, tokio::time::Instant::now() + GRACE, &mut out, None)
                    .await;
            }
        }
        if self.killed.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(self.ended(out.text(), started).await);
        }
        let code = match read {
            Read::Marker(code) => code,
            Read::Closed => return Ok(self.ended(out.text(), started).await),
            Read::Deadline | Read::Cancelled => {
                return Err(failed(format!(
                    "the command ran over {} ms and the shell no longer answers; the session was closed, start a new one",
                    timeout.as_millis()
                )));
            }
        };
        let stderr = read_stderr(&self.stderr_file);
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
    pub(super) fn kill_foreground(&self) {
        #[cfg(unix)]
        {
            let shell = self.shell_pid.or_else(|| self.child.process_id());
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
pub(super) struct Output {
    bytes: Vec<u8>,
    dropped: usize,
}

impl Output {
    pub(super) fn push(&mut self, bytes: &[u8]) {
        let room = MAX_BUFFER.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.dropped += bytes.len().saturating_sub(room);
    }

    /// Removes `\n<marker><status>__` and what follows; returns the status.
    pub(super) fn take_marker(&mut self, marker: &str) -> Option<i32> {
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

    pub(super) fn text(&self) -> String {
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
pub(super) fn cap(text: &str) -> String {
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

/// Most bytes of a command's stderr read back.
const MAX_STDERR: u64 = 4 * 1024 * 1024;

/// The stderr file a command wrote, read as what it must be: a regular file, opened without
/// following a link (the shell may have replaced it with a link to a secret, a FIFO that
/// never ends or `/dev/zero`), at most [`MAX_STDERR`] bytes.
fn read_stderr(path: &std::path::Path) -> Vec<u8> {
    use std::io::Read as _;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(
            (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK)
                .bits()
                .cast_signed(),
        );
    }
    let Ok(file) = options.open(path) else {
        return Vec::new();
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let _ = file.take(MAX_STDERR).read_to_end(&mut out);
    out
}
