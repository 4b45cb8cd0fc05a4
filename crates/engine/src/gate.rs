//! The gate every call passes (DESIGN §8): policy decision, remembered consent, and the audit
//! rows written before the tool runs and after it returns.
//!
//! `data.db` is opened on the first call, not at start-up, so `initialize` never waits on disk.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use aai_audit::{AuditLog, Entry, Grant, Grants, Held, now_ms};
use aai_descriptor::{AaiError, ErrorKind, Risk};
use aai_policy::Action;
use serde_json::{Value, json};

use crate::feed::Event;

/// Arguments longer than this (characters) are announced with their size.
pub(crate) const LONG_ARGS: usize = 200;

/// Opens the store lazily and hands out the audit log and the grants.
pub struct Gate {
    path: PathBuf,
    /// Opened on first use; a failed open is retried on the next call.
    store: Mutex<Option<Arc<(AuditLog, Grants)>>>,
    calls: AtomicU64,
    started_ms: i64,
    /// Rows and grant changes, as they happen.
    pub feed: crate::feed::Feed,
}

/// A new session id: `<pid>:<start ms>:<n>`, so a later process can tell whether the
/// process that owned a session still runs.
pub fn new_session_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}:{}:{}",
        std::process::id(),
        now_ms(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether the process that owns `session` still runs (this one's always do until ended).
fn session_alive(session: &str) -> bool {
    let Some(pid) = session
        .split(':')
        .next()
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = i32::try_from(pid) else {
            return false;
        };
        // Signal 0 checks existence; EPERM means it exists under another user.
        matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Ok(()) | Err(nix::errno::Errno::EPERM)
        )
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// One call as the gate records it.
pub struct Call<'a> {
    pub id: String,
    pub caller: &'a str,
    pub app: &'a str,
    pub tool: &'a str,
    /// Arguments after redaction.
    pub args: &'a Value,
    pub risk: Risk,
}

pub fn risk_name(risk: Risk) -> &'static str {
    match risk {
        Risk::Low => "low",
        Risk::Medium => "medium",
        Risk::High => "high",
        Risk::Critical => "critical",
    }
}

pub fn action_name(action: Action) -> &'static str {
    match action {
        Action::AutoApprove => "auto_approve",
        Action::NotifyOnly => "notify_only",
        Action::RequireApproval => "require_approval",
        Action::AlwaysBlock => "always_block",
    }
}

/// Runs SQLite work that may wait (up to the busy timeout on a locked database) without
/// stalling the other tasks of a multi-threaded runtime's worker.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// Quotes a word for a POSIX shell, so a printed command can be pasted as is.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-:/@".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

impl Gate {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            store: Mutex::new(None),
            calls: AtomicU64::new(0),
            started_ms: now_ms(),
            feed: crate::feed::Feed::default(),
        }
    }

    /// The database of the audit log and the grants (`data.db`), which the scheduler's tables
    /// share.
    pub fn data_db(&self) -> &std::path::Path {
        &self.path
    }

    /// The store, opened on first use where the call runs: once per process, a few
    /// milliseconds (it waits only if another process holds the write lock as it clears ended
    /// sessions' grants). Moving a runtime worker's place for it would start a thread that
    /// then runs every later call with a heap of its own.
    fn open_store(&self) -> Result<Arc<(AuditLog, Grants)>, AaiError> {
        let mut slot = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = slot.as_ref() {
            return Ok(store.clone());
        }
        if let Some(parent) = self.path.parent() {
            let _ = crate::private::create_dir(parent);
        }
        let opened = AuditLog::open_with_grants(&self.path);
        match opened {
            Ok(store) => {
                // Session grants of processes that are gone (crashed, killed) end now.
                match store.1.end_sessions_unless(session_alive) {
                    Ok(0) => {}
                    Ok(n) => tracing::info!("forgot {n} session grant(s) of ended sessions"),
                    Err(error) => tracing::warn!("cannot clear ended sessions' grants: {error}"),
                }
                let store = Arc::new(store);
                *slot = Some(store.clone());
                Ok(store)
            }
            Err(error) => Err(AaiError::new(
                ErrorKind::AutomationFailed,
                format!(
                    "the gateway's data store is unavailable ({error}); the call was not run. Free disk space or close what locks it, then retry"
                ),
            )),
        }
    }

    /// A fresh id for a call's audit rows.
    pub fn call_id(&self) -> String {
        format!(
            "{}-{}",
            self.started_ms,
            self.calls.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// What `caller` holds for the tool: `always` grants and those of its `session`.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn held(
        &self,
        caller: &str,
        app: &str,
        tool: &str,
        session: Option<&str>,
    ) -> Result<Held, AaiError> {
        let store = self.open_store()?;
        // A read: in WAL mode it does not wait for writers, so it runs where the call runs.
        store
            .1
            .held(caller, app, tool, session)
            .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))
    }

    /// Whether `caller` may run every call of the tool without asking (`always` grants).
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn granted(&self, caller: &str, app: &str, tool: &str) -> Result<bool, AaiError> {
        Ok(self.held(caller, app, tool, None)?.whole)
    }

    /// Remembers `grant`.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn remember(&self, grant: &Grant) -> Result<(), AaiError> {
        let store = self.open_store()?;
        blocking(|| store.1.grant(grant))
            .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))?;
        self.feed.send(Event::Grants);
        Ok(())
    }

    /// Every grant, by client, app and tool.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn grants(&self) -> Result<Vec<Grant>, AaiError> {
        let store = self.open_store()?;
        blocking(|| store.1.list())
            .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))
    }

    /// Forgets every grant on `app_id` (and its variable bindings); how many.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn forget_app(&self, app_id: &str) -> Result<usize, AaiError> {
        let store = self.open_store()?;
        let removed = blocking(|| store.1.forget_app(app_id))
            .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))?;
        self.feed.send(Event::Grants);
        Ok(removed)
    }

    /// Forgets exactly `grant`; whether it was there.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn revoke(&self, grant: &Grant) -> Result<bool, AaiError> {
        let store = self.open_store()?;
        let removed = blocking(|| store.1.revoke_one(grant))
            .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))?;
        self.feed.send(Event::Grants);
        Ok(removed)
    }

    /// The audit log, to search and verify (opened if it was not).
    ///
    /// # Errors
    /// The store cannot be opened.
    pub fn log(&self) -> Result<Arc<(AuditLog, Grants)>, AaiError> {
        self.open_store()
    }

    /// Forgets the grants of a session that ended (its client disconnected).
    pub fn end_session(&self, session: &str) {
        let Some(store) = self
            .store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return; // never opened: this session cannot have granted anything
        };
        match blocking(|| store.1.end_session(session)) {
            Ok(0) => {}
            Ok(_) => self.feed.send(Event::Grants),
            Err(error) => {
                tracing::warn!("cannot forget the grants of session {session}: {error}");
            }
        }
    }

    /// Appends one audit row for `call`.
    ///
    /// # Errors
    /// The row could not be written (disk full, database locked): the caller must stop.
    pub fn record(
        &self,
        call: &Call<'_>,
        decision: &str,
        result: &str,
        duration_ms: i64,
        error: Option<&AaiError>,
    ) -> Result<(), AaiError> {
        self.record_with_output(call, decision, result, duration_ms, error, None)
    }

    /// [`Gate::record`] with a summary of what came back (type, size and hash of an image or
    /// file result; never its content).
    ///
    /// # Errors
    /// As [`Gate::record`].
    pub fn record_with_output(
        &self,
        call: &Call<'_>,
        decision: &str,
        result: &str,
        duration_ms: i64,
        error: Option<&AaiError>,
        output: Option<String>,
    ) -> Result<(), AaiError> {
        let store = self.open_store()?;
        let log = &store.0;
        let entry = Entry {
            ts_ms: now_ms(),
            call_id: call.id.clone(),
            caller: call.caller.to_owned(),
            app: call.app.to_owned(),
            tool: call.tool.to_owned(),
            args: call.args.to_string(),
            decision: decision.to_owned(),
            result: result.to_owned(),
            risk: risk_name(call.risk).to_owned(),
            duration_ms,
            error: error
                .map(|e| format!("{} ({}): {}", e.kind.type_name(), e.kind.code(), e.message)),
            output,
            args_sha256: None,
        };
        // Written where the call runs; only when another process holds the write lock does
        // the append move to a thread that may wait for it (every move of a runtime worker's
        // place starts or wakes a thread, and each thread that allocates grows the heap).
        let id = match log.try_append(&entry) {
            Ok(Some(id)) => Ok(id),
            Ok(None) => blocking(|| log.append(&entry)),
            Err(error) => Err(error),
        }
        .map_err(|e| {
            tracing::error!("audit: {e}");
            AaiError::new(ErrorKind::AutomationFailed, e.to_string())
                .with_detail(json!({"audit": "unwritable"}))
        })?;
        // Every call writes rows: the live copy is made only while someone watches.
        if self.feed.watched() {
            let mut row = serde_json::to_value(entry.stored().0).unwrap_or_default();
            row["id"] = json!(id);
            self.feed.send(Event::Row { row });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consent::*;

    fn long_question() -> (Question, String) {
        let command = format!("echo {}; touch /tmp/HIDDEN-TAIL", "a".repeat(1270));
        let args = json!({ "command": command }).to_string();
        let question = Question::new(
            "claude",
            "local.terminal",
            "Terminal",
            "bash_execute",
            Risk::High,
            args.clone(),
        );
        (question, args)
    }

    #[test]
    fn a_question_shows_long_arguments_whole_with_their_size() {
        let (question, args) = long_question();
        let message = question.message();
        assert!(message.contains(&args), "{message}");
        assert!(message.contains(&format!("({} characters, shown whole)", args.len())));
        let heading = question.heading();
        assert!(heading.ends_with(&format!("Arguments ({} characters): (below)", args.len())));
        assert!(!heading.contains("HIDDEN-TAIL"));
        let short = Question::new("c", "a.b", "A", "t", Risk::Low, "{\"x\":1}".into());
        assert!(short.message().ends_with("Arguments: {\"x\":1}"));
        let mut wide = short.clone();
        wide.args = "é".repeat(300);
        assert!(
            wide.message()
                .contains("(300 characters, 600 bytes, shown whole)")
        );
    }

    #[test]
    fn a_window_too_small_shows_head_and_tail_and_says_what_it_left_out() {
        let (question, args) = long_question();
        let (message, cut) = question.message_within(800);
        assert!(cut);
        assert!(message.contains("HIDDEN-TAIL") && message.contains("{\"command\":\"echo aaa"));
        let hidden = args.chars().count() - 480 - 320;
        assert!(
            message.contains(&format!("[{hidden} characters not shown")),
            "{message}"
        );
        assert!(message.contains(&format!("({} characters)", args.len())));
        assert_eq!(
            question.message_within(usize::MAX),
            (question.message(), false)
        );
        assert_eq!(
            question.choices_unseen(),
            [(Answer::Deny, "Deny".to_owned())]
        );
    }

    #[test]
    fn hostile_names_arguments_and_labels_are_shown_as_escapes() {
        let hostile = "x\u{1b}]52;c;aGk=\u{7}\u{1b}[2K\rRisk: low\u{202e}\n";
        let mut question = Question::new(
            hostile,
            hostile,
            hostile,
            hostile,
            Risk::Critical,
            json!({ "text": hostile }).to_string(),
        );
        question.why = Some(hostile.into());
        question.prefix = Some(hostile.into());
        let message = question.message();
        let labels: String = question.choices().into_iter().map(|(_, l)| l).collect();
        for text in [message.as_str(), labels.as_str()] {
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\r', '\u{202e}']),
                "{text:?}"
            );
        }
        assert!(message.contains(r"x\u001b]52;c;aGk=\u0007\u001b[2K\rRisk: low\u202e\n"));
        // Only the question's own line breaks remain (its question, client, risk, why and
        // arguments lines): none of the client's.
        assert_eq!(message.lines().count(), 5, "{message}");
        let form = consent_form(&question);
        assert_eq!(form["message"], message.as_str());
        assert!(question.answer_for(&question.choices()[3].1).is_some());
    }
}
