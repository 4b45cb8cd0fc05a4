//! The gate every call passes (DESIGN §8): policy decision, remembered consent, and the audit
//! rows written before the tool runs and after it returns.
//!
//! `data.db` is opened on the first call, not at start-up, so `initialize` never waits on disk.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use aai_audit::{AuditLog, Entry, Grants, now_ms};
use aai_descriptor::{AaiError, ErrorKind, Risk};
use aai_policy::Action;
use serde_json::{Value, json};

/// Opens the store lazily and hands out the audit log and the grants.
pub struct Gate {
    path: PathBuf,
    /// Opened on first use; a failed open is retried on the next call.
    store: Mutex<Option<Arc<(AuditLog, Grants)>>>,
    calls: AtomicU64,
    started_ms: i64,
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
        }
    }

    fn store(&self) -> Result<Arc<(AuditLog, Grants)>, AaiError> {
        blocking(|| self.open_store())
    }

    fn open_store(&self) -> Result<Arc<(AuditLog, Grants)>, AaiError> {
        let mut slot = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = slot.as_ref() {
            return Ok(store.clone());
        }
        if let Some(parent) = self.path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let opened = AuditLog::open_with_grants(&self.path);
        match opened {
            Ok(store) => {
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

    /// Whether `caller` has a remembered grant for the tool.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn granted(&self, caller: &str, app: &str, tool: &str) -> Result<bool, AaiError> {
        let store = self.store()?;
        blocking(|| store.1.allows(caller, app, tool))
            .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))
    }

    /// Remembers that `caller` may run `tool` of `app` (every tool when `None`).
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn grant(&self, caller: &str, app: &str, tool: Option<&str>) -> Result<(), AaiError> {
        let store = self.store()?;
        blocking(|| store.1.grant(caller, app, tool))
            .map_err(|e| AaiError::new(ErrorKind::AutomationFailed, e.to_string()))
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
        let store = self.store()?;
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
        };
        blocking(|| log.append(&entry)).map(|_| ()).map_err(|e| {
            tracing::error!("audit: {e}");
            AaiError::new(ErrorKind::AutomationFailed, e.to_string())
                .with_detail(json!({"audit": "unwritable"}))
        })
    }
}

/// The user's answer to "may this client run this tool?" (`spec/gateway.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Deny,
    /// Allow this operation, and remember it for this client.
    AllowTool,
    /// Allow every operation of this app, and remember it for this client.
    AllowApp,
}

/// What the user is asked about.
#[derive(Debug, Clone)]
pub struct Question {
    pub caller: String,
    pub app_id: String,
    pub app_name: String,
    pub tool: String,
    pub risk: Risk,
    /// The redacted arguments, shortened.
    pub args: String,
}

impl Question {
    pub fn message(&self) -> String {
        format!(
            "Allow {} to run \"{}\" in {} ({})?\nRisk: {}. Arguments: {}",
            self.caller,
            self.tool,
            self.app_name,
            self.app_id,
            risk_name(self.risk),
            self.args
        )
    }
}

/// Why a question has no answer yet.
#[derive(Debug, Clone, PartialEq)]
pub enum Unanswered {
    /// No answer will come: declined, cancelled, timed out, or a refused approval state.
    Denied(String),
    /// Ask through the client's next request (2026-07-28): the `InputRequiredResult` to return.
    Later(Value),
}

/// Asks the user.
pub trait Asker: Send + Sync {
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> aai_executor::BoxFuture<'a, Result<Answer, Unanswered>>;

    /// Sends the user to `url` (an OAuth sign-in page) through the client; true when the
    /// user went. The default: this asker cannot, and the caller falls back to a message.
    fn open_url<'a>(
        &'a self,
        _message: &'a str,
        _url: &'a str,
    ) -> aai_executor::BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
}

/// The `elicitation/create` params that ask `question`: one choice, as `spec/gateway.md` has it.
pub fn consent_form(question: &Question) -> Value {
    json!({
        "mode": "form",
        "message": question.message(),
        "requestedSchema": {
            "type": "object",
            "properties": {"decision": {
                "type": "string",
                "title": "Decision",
                "enum": ["deny", "allow_tool", "allow_app"],
                "enumNames": ["Deny", "Allow this operation", "Allow all operations of this app"]
            }},
            "required": ["decision"]
        }
    })
}

/// Reads an `ElicitResult` (as JSON) into an answer.
pub fn read_elicit_result(result: &Value) -> Result<Answer, Unanswered> {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(
            match result.pointer("/content/decision").and_then(Value::as_str) {
                Some("allow_tool") => Answer::AllowTool,
                Some("allow_app") => Answer::AllowApp,
                _ => Answer::Deny,
            },
        ),
        Some("decline") => Err(Unanswered::Denied("the user declined".to_owned())),
        _ => Err(Unanswered::Denied("the user cancelled".to_owned())),
    }
}
