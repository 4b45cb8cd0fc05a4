//! The terminal app: persistent bash sessions on a PTY (`bash_execute`, `bash_session`).
//!
//! Each session is one interactive bash (job control on, no readline, no prompt, no echo).
//! A command runs as `{ command; } </dev/null 2>stderr-file`, followed by a `printf` of a
//! marker carrying `$?`: the working directory and environment persist because the command
//! runs in the session's own shell; stdout comes from the PTY, stderr from its file. A command
//! that overruns gets Ctrl-C (its job only), then SIGKILL for its process group, and the
//! session stays usable; a shell that stops answering is replaced.
//!
//! A command runs in a task of its own that holds the session: a cancelled call (the client's
//! `notifications/cancelled`) interrupts it at once and the session is ready again within a
//! second. A shell that ends (`exit 3`, `exec …`, killed, `bash_session kill`) is reported
//! with its real status and the session is closed: the next call on that id is told so, or,
//! for the default session, is run in a new one that says its state was reset.

pub mod grants;
pub mod loss;
mod rate;
mod session;
mod tool;

use rate::hosts;

use std::collections::HashMap;
use std::io::{Read as _, Write};
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use aai_sandbox::Contained as _;
use portable_pty::{ChildKiller, CommandBuilder, MasterPty, PtySize, native_pty_system};
use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> = LazyLock::new(|| {
    crate::shipped(
        "local.terminal",
        include_str!("../../toolsets/terminal.aai.json"),
    )
});

/// The terminal toolset: its sessions, and where they may start.
pub struct Terminal {
    setup: crate::Setup,
    sessions: Sessions,
}

impl Terminal {
    pub fn new(setup: &crate::Setup) -> Self {
        Self {
            setup: setup.clone(),
            sessions: Sessions::default(),
        }
    }

    /// Where sessions start: the first allowed folder that exists (see
    /// [`Terminal::make_start`]), and `working_dir` only inside the allowed folders; with
    /// `terminal_anywhere`, the user's home and any folder. New shells run contained unless
    /// the call was approved to run `outside` the sandbox.
    fn place(&self, roots: &[String], outside: Option<String>) -> Place {
        let contain = outside
            .is_none()
            .then(|| (self.setup.clone(), roots.to_vec()));
        if self.setup.config.terminal_anywhere {
            return Place {
                start: Some(aai_toolset::user_home()),
                sandbox: None,
                contain,
                outside,
            };
        }
        let sandbox = self.setup.sandbox(roots);
        Place {
            start: sandbox.allowed().iter().find(|d| d.is_dir()).cloned(),
            sandbox: Some(sandbox),
            contain,
            outside,
        }
    }

    /// Makes the first configured allowed folder when none of them exists (a fresh home whose
    /// `~/Projects` was never made): a shell starts in a folder the user allowed, never in a
    /// temporary one whose files vanish. Nothing is made for a client whose roots narrowed
    /// the folders (a root is the client's folder, not ours to make).
    fn make_start(&self, roots: &[String]) {
        if self.setup.config.terminal_anywhere || !roots.is_empty() {
            return;
        }
        let sandbox = self.setup.sandbox(roots);
        if sandbox.allowed().iter().any(|d| d.is_dir()) {
            return;
        }
        let Some(first) = self.setup.config.sandbox.allowed_directories.first() else {
            return;
        };
        let folder = aai_toolset::expand_home(first);
        match std::fs::create_dir_all(&folder) {
            Ok(()) => tracing::info!(
                folder = %folder.display(),
                "made the first allowed folder (local.sandbox.allowed_directories) for the terminal to start in"
            ),
            Err(error) => tracing::warn!(
                folder = %folder.display(),
                %error,
                "cannot make the first allowed folder for the terminal"
            ),
        }
    }

    /// `bash_execute` with `outside_sandbox`: in a shell of its own, started uncontained for
    /// this command and ended after it (its background jobs with it).
    async fn execute_outside(&self, call: &crate::Call<'_>) -> Result<Value, AaiError> {
        aai_sandbox::profile::check_outside(call.args, call.approved)?;
        let reason = arg_str(call.args, aai_sandbox::profile::REASON)
            .unwrap_or_default()
            .to_owned();
        self.make_start(call.roots);
        let place = self.place(call.roots, Some(reason));
        let n = self
            .sessions
            .next
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // A name no client can give (a control character): the session is this call's alone.
        let id = format!("\u{1}outside-{n}");
        let key = scoped(call.caller, &id);
        self.sessions.create("bash", key.clone(), &place).await?;
        let mut args = call.args.clone();
        args.insert("session_id".into(), json!(id));
        let result = self
            .sessions
            .execute(call.caller, &args, &place, call.progress)
            .await;
        self.sessions.remove(&key);
        if let Ok(mut ended) = self.sessions.ended.lock() {
            ended.remove(&key);
        }
        result.map(|mut value| {
            value["session_id"] = Value::Null;
            value["outside_sandbox"] = json!(true);
            value
        })
    }
}

/// Characters of output returned at most; the middle of longer output is cut.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Bytes kept while a command runs (the rest is counted, not stored).
const MAX_BUFFER: usize = 16 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// How long an interrupted command gets to stop before its group is killed.
const GRACE: Duration = Duration::from_secs(2);
/// After a cancel: how long Ctrl-C gets, then SIGKILL (both within a second in all).
const CANCEL_GRACE: Duration = Duration::from_millis(300);
/// How often a running command reports its latest output.
const PROGRESS_EVERY: Duration = Duration::from_millis(1500);

/// How a wait for the marker ended.
enum Read {
    Marker(i32),
    Deadline,
    /// The shell's terminal closed: the shell is gone.
    Closed,
    Cancelled,
}

struct Session {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    output: mpsc::UnboundedReceiver<Vec<u8>>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    stderr_file: PathBuf,
    _dir: tempfile::TempDir,
    shell: String,
    /// The shell's own pid (with a sandbox launcher in between, not the child's).
    shell_pid: Option<u32>,
    contained: bool,
    created: Instant,
    /// Set by `bash_session kill`, so the run it ends can say so.
    killed: Arc<std::sync::atomic::AtomicBool>,
    /// The session's cgroup, where the system allows one: the emergency stop kills all of it.
    #[cfg(target_os = "linux")]
    group: Option<aai_executor::cgroup::CallGroup>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Jobs the user left running in the background outlive the session, as they would
        // in any terminal; the emergency stop still finds them in the group.
        #[cfg(target_os = "linux")]
        if let Some(group) = self.group.take() {
            group.release();
        }
    }
}

/// A session in the table: the session (locked while a command runs) and what can end it
/// while it is locked.
struct Entry {
    session: Arc<Mutex<Session>>,
    killer: std::sync::Mutex<Box<dyn ChildKiller + Send + Sync>>,
    /// The process the terminal started: the shell, or the sandbox launcher that runs it.
    shell_pid: Option<u32>,
    /// Whether `shell_pid` is the sandbox launcher (ended with SIGTERM, which ends its tree).
    contained: bool,
    /// The shell itself (inside the box): its working folder is the session's.
    bash_pid: Option<u32>,
    /// Why the session runs outside the sandbox, when it does.
    outside: Option<String>,
    killed: Arc<std::sync::atomic::AtomicBool>,
    /// The session's egress proxy: its only way to the network (`local.egress`).
    egress: Option<Arc<aai_sandbox::proxy::Proxy>>,
    /// The run-later files of its allowed folders as they were when the box started (a
    /// contained session): those its commands make are set aside after each command.
    later: Option<aai_contain::later::Watch>,
}

/// Sweeps a session's run-later files when the command's call ends, by [`SweepOnDrop::now`] or,
/// for a call dropped before it ended, when it is dropped.
struct SweepOnDrop(Option<Arc<Entry>>);

impl SweepOnDrop {
    fn now(&mut self) -> Vec<aai_contain::later::SetAside> {
        self.0
            .take()
            .and_then(|entry| entry.later.as_ref().map(aai_contain::later::Watch::sweep))
            .unwrap_or_default()
    }
}

impl Drop for SweepOnDrop {
    fn drop(&mut self) {
        let _ = self.now();
    }
}

/// What a command made that runs later, where it went, and why (the command's result).
fn set_aside_note(set_aside: &[aai_contain::later::SetAside]) -> Value {
    let files: Vec<Value> = set_aside
        .iter()
        .map(|s| json!({"path": s.path, "moved_to": s.moved_to}))
        .collect();
    json!({
        "files": files,
        "why": "files that make something run later without the agent (git hooks, .envrc, editor and agent settings, shell start-up files) are made by the person: each was renamed as shown and does not run; ask the user to look at it and rename it back if they want it",
    })
}

/// The sessions of one gateway.
#[derive(Default)]
pub struct Sessions {
    sessions: std::sync::Mutex<HashMap<String, Arc<Entry>>>,
    /// Sessions whose shell ended, and how, for the next call on their id.
    ended: std::sync::Mutex<HashMap<String, String>>,
    next: std::sync::atomic::AtomicU64,
}

/// Where terminal sessions start and which `working_dir`s they accept.
#[derive(Clone)]
pub struct Place {
    /// A new session's directory; `None`: no allowed folder exists, and no shell starts.
    pub start: Option<PathBuf>,
    /// Checks a `working_dir`; `None`: any directory.
    pub sandbox: Option<aai_sandbox::files::Sandbox>,
    /// What a new shell's profile is made from (worked out only when one starts, so a command
    /// in a running session costs nothing more); `None`: uncontained.
    pub contain: Option<(crate::Setup, Vec<String>)>,
    /// Why a new shell runs outside the sandbox (the user approved it).
    pub outside: Option<String>,
}

fn failed(message: String) -> AaiError {
    AaiError::new(ErrorKind::AutomationFailed, message)
}

/// No allowed folder exists for a shell to start in (`narrowed`: the client's roots left
/// none of `folders`).
fn no_folder(folders: &[PathBuf], narrowed: bool) -> AaiError {
    let folders: Vec<String> = folders.iter().map(|d| d.display().to_string()).collect();
    let message = if !narrowed {
        format!(
            "no allowed folder exists for the terminal to start in (local.sandbox.allowed_directories: {}); ask the user to make one, or to run `aai-gateway init`",
            if folders.is_empty() {
                "none".to_owned()
            } else {
                folders.join(", ")
            }
        )
    } else {
        format!(
            "no allowed folder is left for this client (its roots lie outside local.sandbox.allowed_directories: {}), so the terminal has nowhere to start; ask the user to open a folder inside one",
            if folders.is_empty() {
                "none".to_owned()
            } else {
                folders.join(", ")
            }
        )
    };
    AaiError::new(ErrorKind::PermissionDenied, message)
        .with_detail(json!({"reason": "no_allowed_folder", "allowed_directories": folders}))
}

fn nonce() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn arg_str<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// SIGKILL to every process of the terminal session that `shell_pid` leads (its jobs run in
/// process groups of their own, so killing the shell alone would leave them running).
fn kill_session_tree(shell_pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(leader) = shell_pid {
        let Ok(mut system) = sysinfo::System::new() else {
            return;
        };
        system.refresh_processes(sysinfo::ProcessesToUpdate::All, true);
        for (pid, process) in system.processes() {
            if process.session_id().map(|s| s.as_u32()) == Some(leader)
                && pid.as_u32() != leader
                && let Ok(pid) = i32::try_from(pid.as_u32())
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = shell_pid;
}

/// Ends a sandbox launcher's tree (SIGTERM: it kills everything under it, leaves first, then
/// exits); nothing for a shell started directly.
fn end_tree(pid: Option<u32>, contained: bool) {
    #[cfg(target_os = "linux")]
    if let (Some(pid), true) = (pid, contained) {
        // Waited for to the end: a launcher killed half-way leaves what it was ending.
        aai_contain::procs::terminate(pid);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (pid, contained);
}

/// A session's key: the client's name and the session id it uses.
fn scoped(caller: &str, id: &str) -> String {
    format!("{caller}\u{0}{id}")
}

/// The session id of `key` when it belongs to `caller`.
fn unscoped<'k>(caller: &str, key: &'k str) -> Option<&'k str> {
    key.strip_prefix(caller)?.strip_prefix('\u{0}')
}

impl Sessions {
    /// Ends every session (the emergency stop): their processes are killed, and the next
    /// call on each id is told why.
    pub fn end_all(&self, note: &str) -> usize {
        let keys: Vec<String> = self
            .sessions
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        let mut ended = 0;
        for key in keys {
            if self.remove(&key) {
                ended += 1;
                if let Ok(mut notes) = self.ended.lock() {
                    notes.insert(key, note.to_owned());
                }
            }
        }
        ended
    }

    fn get(&self, id: &str) -> Option<Arc<Entry>> {
        self.sessions.lock().ok()?.get(id).cloned()
    }

    /// Why `caller`'s session `id` runs outside the sandbox, when it does.
    /// The working folder of session `id` now, when it runs.
    pub fn cwd(&self, caller: &str, id: &str) -> Option<PathBuf> {
        let entry = self.get(&scoped(caller, id))?;
        std::fs::read_link(format!("/proc/{}/cwd", entry.bash_pid?)).ok()
    }

    pub fn outside(&self, caller: &str, id: &str) -> Option<String> {
        self.get(&scoped(caller, id))?.outside.clone()
    }

    /// Starts a session under `id` (a [`scoped`] key).
    async fn create(&self, shell: &str, id: String, place: &Place) -> Result<(), AaiError> {
        let mut contain = match &place.contain {
            Some((setup, roots)) => setup.containment(roots)?,
            None => None,
        };
        // A contained shell's network: a proxy of its own, unless the config says "open".
        let egress = match (&place.contain, &mut contain) {
            (Some((setup, _)), Some(profile)) => {
                let proxy = aai_sandbox::egress::proxy(&setup.config.egress, &setup.home).await?;
                profile.egress = proxy.as_ref().map(|p| p.addr.port());
                proxy
            }
            _ => None,
        };
        let Some(start) = &place.start else {
            let allowed = place.sandbox.as_ref().map_or(&[][..], |s| s.allowed());
            return Err(no_folder(allowed, allowed.is_empty()));
        };
        let later = contain
            .as_ref()
            .filter(|_| place.outside.is_none())
            .map(|profile| aai_contain::later::Watch::new(profile.write.clone()));
        let mut session = Session::start(shell, start, contain.as_ref())?;
        if let Err(error) = session.ready().await {
            end_tree(session.child.process_id(), session.contained);
            return Err(error);
        }
        let entry = Arc::new(Entry {
            killer: std::sync::Mutex::new(session.child.clone_killer()),
            shell_pid: session.child.process_id(),
            bash_pid: session.shell_pid,
            contained: session.contained,
            outside: place.outside.clone(),
            killed: session.killed.clone(),
            session: Arc::new(Mutex::new(session)),
            egress,
            later,
        });
        if let Ok(mut ended) = self.ended.lock() {
            ended.remove(&id);
        }
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(id, entry);
        }
        Ok(())
    }

    /// Ends a session, even while a command runs in it: its processes are killed and the
    /// running call reports that the session was killed.
    fn remove(&self, id: &str) -> bool {
        let removed = self.sessions.lock().ok().and_then(|mut s| s.remove(id));
        let Some(entry) = removed else {
            return false;
        };
        entry
            .killed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // The shell first, so it cannot report its job's death as the command's status: a
        // sandbox launcher ends its whole tree (orphans it adopted included) on SIGTERM.
        end_tree(entry.shell_pid, entry.contained);
        if let Ok(mut killer) = entry.killer.lock() {
            let _ = killer.kill();
        }
        kill_session_tree(entry.shell_pid);
        true
    }

    /// Forgets a session whose shell ended, remembering how for the next call on its id.
    fn forget_ended(&self, id: &str, entry: &Arc<Entry>, note: &str) {
        if let Ok(mut sessions) = self.sessions.lock()
            && sessions.get(id).is_some_and(|e| Arc::ptr_eq(e, entry))
        {
            sessions.remove(id);
        }
        kill_session_tree(entry.shell_pid);
        if let Ok(mut ended) = self.ended.lock() {
            ended.insert(id.to_owned(), note.to_owned());
        }
    }

    /// `bash_execute`.
    ///
    /// # Errors
    /// INVALID_PARAMS (no command, an unknown or ended session, a working_dir outside the
    /// allowed folders), AUTOMATION_FAILED (also for a cancelled call).
    pub async fn execute(
        &self,
        caller: &str,
        args: &Map<String, Value>,
        place: &Place,
        progress: Option<&(dyn Fn(&str) + Send + Sync)>,
    ) -> Result<Value, AaiError> {
        let command = arg_str(args, "command").ok_or_else(|| {
            AaiError::new(ErrorKind::InvalidParams, "`command` is required")
                .with_detail(json!({"field": "command"}))
        })?;
        let id = arg_str(args, "session_id").unwrap_or("default").to_owned();
        // Sessions belong to the client that made them: one gateway may serve many.
        let key = scoped(caller, &id);
        let working_dir = match arg_str(args, "working_dir") {
            Some(dir) => Some(checked_dir(dir, place)?),
            None => None,
        };
        let timeout = Duration::from_millis(
            args.get("timeout_ms")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .max(1),
        );
        let mut announced = None;
        let entry = match self.get(&key) {
            Some(entry) => entry,
            None => {
                let ended = self.ended.lock().ok().and_then(|e| e.get(&key).cloned());
                if id != "default" {
                    return Err(AaiError::new(
                        ErrorKind::InvalidParams,
                        match &ended {
                            Some(note) => format!(
                                "session {id:?} has ended ({note}). Create it again with bash_session {{\"action\": \"create\", \"session_id\": {id:?}}}, or leave session_id out to use the default session"
                            ),
                            None => format!(
                                "no session {id:?}; create one with bash_session {{\"action\": \"create\"}} or leave session_id out"
                            ),
                        },
                    )
                    .with_detail(json!({"field": "session_id", "ended": ended.is_some()})));
                }
                announced = ended;
                self.create("bash", key.clone(), place).await?;
                self.get(&key)
                    .ok_or_else(|| failed("the default session could not start".into()))?
            }
        };
        // The command runs in a task that holds the session: dropping this call (a cancel)
        // fires the token and the task stops the command and frees the session.
        // A call dropped before it ends (the client cancelled it) still sweeps.
        let mut sweep = SweepOnDrop(Some(entry.clone()));
        let token = CancellationToken::new();
        let _cancel_on_drop = token.clone().drop_guard();
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel::<String>();
        let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
        let session = entry.session.clone();
        let mark = entry.egress.as_ref().map(|p| p.mark());
        // Hosts the user allowed for this command (asked just now), until it ends.
        let _granted = match (&entry.egress, hosts(args)) {
            (Some(proxy), hosts) if !hosts.is_empty() => Some(proxy.grant(&hosts)),
            _ => None,
        };
        let command = command.to_owned();
        let report = progress.is_some().then_some(progress_tx);
        tokio::spawn(async move {
            let mut session = session.lock_owned().await;
            let result = session
                .run(
                    &command,
                    working_dir.as_deref(),
                    timeout,
                    &token,
                    report.as_ref(),
                )
                .await;
            let _ = done_tx.send(result);
        });
        let result = loop {
            tokio::select! {
                done = &mut done_rx => break done.unwrap_or_else(|_| Err(failed("the terminal task stopped".into()))),
                Some(line) = progress_rx.recv() => {
                    if let Some(progress) = progress {
                        progress(&line);
                    }
                }
            }
        };
        // What the command made that would run later without the agent is set aside.
        let set_aside = sweep.now();
        match result {
            Ok(mut value) => {
                if !set_aside.is_empty() {
                    value["set_aside"] = set_aside_note(&set_aside);
                }
                // What the command reached through the proxy, and what it was refused.
                if let (Some(proxy), Some(mark)) = (&entry.egress, mark) {
                    let network = aai_sandbox::egress::report(proxy, mark);
                    let quiet = network["reached"].as_array().is_some_and(Vec::is_empty)
                        && network["refused"].as_array().is_some_and(Vec::is_empty);
                    if !quiet {
                        value["network"] = network;
                    }
                }
                if value["session_ended"] == json!(true) {
                    let note = value["note"]
                        .as_str()
                        .unwrap_or("the shell ended")
                        .to_owned();
                    self.forget_ended(&key, &entry, &note);
                    value["note"] = json!(format!(
                        "{note} The next command on session {id:?} {}.",
                        if id == "default" {
                            "starts a new default session (fresh working directory and environment)"
                        } else {
                            "is refused until it is created again"
                        }
                    ));
                }
                if let Some(previous) = announced {
                    value["new_session"] = json!(true);
                    value["previous_session"] = json!(format!(
                        "The previous default session had ended ({previous}); this command ran in a new one, so the working directory and environment were reset."
                    ));
                }
                value["session_id"] = json!(id);
                Ok(value)
            }
            Err(error)
                if error
                    .detail
                    .as_ref()
                    .is_some_and(|d| d["reason"] == "cancelled") =>
            {
                Err(error)
            }
            Err(error) => {
                self.remove(&key);
                Err(error)
            }
        }
    }

    /// `bash_session`: create, list, kill.
    ///
    /// # Errors
    /// INVALID_PARAMS for an unknown action or session.
    pub async fn manage(
        &self,
        caller: &str,
        args: &Map<String, Value>,
        place: &Place,
    ) -> Result<Value, AaiError> {
        match arg_str(args, "action") {
            Some("create") => {
                let shell = arg_str(args, "shell").unwrap_or("bash");
                let id = arg_str(args, "session_id").map_or_else(
                    || {
                        format!(
                            "s{}",
                            self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
                        )
                    },
                    str::to_owned,
                );
                self.create(shell, scoped(caller, &id), place).await?;
                Ok(json!({"session_id": id, "shell": shell,
                    "working_dir": place.start.as_ref().map(|p| p.display().to_string()),
                    "outside_sandbox": place.outside.is_some()}))
            }
            Some("list") => {
                let sessions: Vec<(String, Arc<Entry>)> = self
                    .sessions
                    .lock()
                    .map(|s| {
                        s.iter()
                            .filter_map(|(k, v)| Some((unscoped(caller, k)?.to_owned(), v.clone())))
                            // A one-off shell outside the sandbox is no session of the client's.
                            .filter(|(id, _)| !id.starts_with('\u{1}'))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut list = Vec::new();
                for (id, entry) in sessions {
                    let (shell, age, busy) = match entry.session.try_lock() {
                        Ok(s) => (s.shell.clone(), s.created.elapsed().as_secs(), false),
                        Err(_) => (String::new(), 0, true),
                    };
                    list.push(json!({"session_id": id, "shell": shell, "age_seconds": age,
                        "busy": busy, "outside_sandbox": entry.outside.is_some()}));
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
                let key = scoped(caller, id);
                if self.remove(&key) {
                    if let Ok(mut ended) = self.ended.lock() {
                        ended.insert(key, "it was killed with bash_session kill".into());
                    }
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

/// A `working_dir` the command may start in: an existing folder inside the allowed folders
/// (after resolving links), unless the config lets the terminal start anywhere.
fn checked_dir(dir: &str, place: &Place) -> Result<String, AaiError> {
    let resolved = match &place.sandbox {
        Some(sandbox) => sandbox.check_read(dir)?,
        None => PathBuf::from(dir),
    };
    if !resolved.is_dir() {
        return Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!("working_dir {dir:?} is not a directory"),
        )
        .with_detail(json!({"field": "working_dir"})));
    }
    Ok(resolved.display().to_string())
}

impl Drop for Sessions {
    fn drop(&mut self) {
        if let Ok(sessions) = self.sessions.get_mut() {
            for entry in sessions.values() {
                end_tree(entry.shell_pid, entry.contained);
                kill_session_tree(entry.shell_pid);
                if let Ok(mut killer) = entry.killer.lock() {
                    let _ = killer.kill();
                }
            }
        }
    }
}
