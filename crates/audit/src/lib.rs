//! The audit log: one SQLite table of every call — allowed, denied, blocked, failed — with
//! secrets redacted and each row chained to the one before by SHA-256, so an edited, deleted,
//! inserted or reordered row is found by [`AuditLog::verify`].
//!
//! This crate does not decide what to log; the gateway's call pipeline does.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let log = aai_audit::AuditLog::open(&dir.path().join("data.db")).unwrap();
//! let args = aai_audit::redact(&serde_json::json!({"to": "ann@example.com", "password": "x"}), None);
//! assert_eq!(args["password"], "[redacted]");
//! ```

mod grants;
mod log;
mod redact;

pub use grants::{EVERY_CLIENT, Grant, Grants, Held, Scope};
pub use log::{ARGS_IN_ROW, AuditError, AuditLog, BadRow, Entry, Filter, Row, format_ts, now_ms};
pub use redact::{REDACTED, redact, shrink};
