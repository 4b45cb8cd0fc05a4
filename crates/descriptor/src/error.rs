//! Stable AAI error codes and the errors of loading a descriptor.

use std::fmt;

use serde_json::{Value, json};

/// The AAI error kinds: spec §2.7 plus the web codes. Codes and type names are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    AutomationFailed,
    AppNotFound,
    ToolNotFound,
    PermissionDenied,
    InvalidParams,
    AutomationNotSupported,
    AaiJsonInvalid,
    Timeout,
    AppNotRunning,
    ScriptParseError,
    AuthRequired,
    AuthExpired,
    ApiRequestFailed,
    AuthConfigInvalid,
}

impl ErrorKind {
    /// The JSON-RPC style error code.
    pub fn code(self) -> i32 {
        match self {
            Self::AutomationFailed => -32001,
            Self::AppNotFound => -32002,
            Self::ToolNotFound => -32003,
            Self::PermissionDenied => -32004,
            Self::InvalidParams => -32005,
            Self::AutomationNotSupported => -32006,
            Self::AaiJsonInvalid => -32007,
            Self::Timeout => -32008,
            Self::AppNotRunning => -32009,
            Self::ScriptParseError => -32010,
            Self::AuthRequired => -32011,
            Self::AuthExpired => -32012,
            Self::ApiRequestFailed => -32013,
            Self::AuthConfigInvalid => -32014,
        }
    }

    /// The stable type name, e.g. `APP_NOT_FOUND`.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::AutomationFailed => "AUTOMATION_FAILED",
            Self::AppNotFound => "APP_NOT_FOUND",
            Self::ToolNotFound => "TOOL_NOT_FOUND",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::InvalidParams => "INVALID_PARAMS",
            Self::AutomationNotSupported => "AUTOMATION_NOT_SUPPORTED",
            Self::AaiJsonInvalid => "AAI_JSON_INVALID",
            Self::Timeout => "TIMEOUT",
            Self::AppNotRunning => "APP_NOT_RUNNING",
            Self::ScriptParseError => "SCRIPT_PARSE_ERROR",
            Self::AuthRequired => "AUTH_REQUIRED",
            Self::AuthExpired => "AUTH_EXPIRED",
            Self::ApiRequestFailed => "API_REQUEST_FAILED",
            Self::AuthConfigInvalid => "AUTH_CONFIG_INVALID",
        }
    }
}

/// A failure to report to the agent: a stable kind, a message that says what to do next,
/// and optional structured detail.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} ({}): {message}", kind.type_name(), kind.code())]
pub struct AaiError {
    pub kind: ErrorKind,
    pub message: String,
    pub detail: Option<Value>,
}

impl AaiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: Value) -> Self {
        self.detail = Some(detail);
        self
    }

    /// The `{code, type, message, detail}` object carried in a tool result.
    pub fn to_json(&self) -> Value {
        json!({
            "code": self.kind.code(),
            "type": self.kind.type_name(),
            "message": self.message,
            "detail": self.detail,
        })
    }
}

/// One thing wrong with a descriptor, located by a JSON pointer into the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// JSON pointer (RFC 6901); empty for the whole document.
    pub pointer: String,
    pub message: String,
    /// `AAI_JSON_INVALID`, or `SCRIPT_PARSE_ERROR` for a script that cannot be run safely.
    pub kind: ErrorKind,
}

impl Problem {
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
            kind: ErrorKind::AaiJsonInvalid,
        }
    }

    /// A problem with a tool's script (SCRIPT_PARSE_ERROR).
    pub fn script(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::ScriptParseError,
            ..Self::new(pointer, message)
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "(document)"
        } else {
            &self.pointer
        };
        if self.kind == ErrorKind::AaiJsonInvalid {
            write!(f, "{pointer}: {}", self.message)
        } else {
            write!(f, "{pointer}: {}: {}", self.kind.type_name(), self.message)
        }
    }
}

/// A descriptor that was rejected, with every problem found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct LoadError {
    /// Where the descriptor came from (a file path or a URL).
    pub source_name: String,
    pub problems: Vec<Problem>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for problem in &self.problems {
            if !first {
                writeln!(f)?;
            }
            first = false;
            write!(f, "{}: {problem}", self.source_name)?;
        }
        Ok(())
    }
}
