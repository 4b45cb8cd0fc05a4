//! Why the launcher refused: its arguments, or a step of containing the command that failed.
//! The launcher prints the text and does not run the command.

use std::path::PathBuf;

/// What went wrong, naming the step.
#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    #[error("{0} needs a value")]
    NoValue(String),
    #[error("unknown option {0:?}")]
    UnknownOption(String),
    #[error("--home is required")]
    NoHome,
    #[error("no program after --")]
    NoProgram,
    /// A step of moving into the user and mount namespaces that hide the session sockets.
    #[error("cannot {step} ({source})")]
    Namespace {
        step: String,
        source: std::io::Error,
    },
    /// A step of making and enforcing the Landlock ruleset.
    #[cfg(target_os = "linux")]
    #[error("cannot {step}: {source}")]
    Landlock {
        step: String,
        source: landlock::RulesetError,
    },
    #[error("no random bytes for a temporary folder: {0}")]
    Random(getrandom::Error),
    #[error("cannot make {}: {source}", path.display())]
    TempFolder {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ContainError {
    /// For `map_err`: the namespace step `step` failed.
    pub(crate) fn namespace<E: Into<std::io::Error>>(
        step: impl Into<String>,
    ) -> impl FnOnce(E) -> Self {
        let step = step.into();
        move |e| Self::Namespace {
            step,
            source: e.into(),
        }
    }

    /// For `map_err`: the Landlock step `step` failed.
    #[cfg(target_os = "linux")]
    pub(crate) fn landlock(step: impl Into<String>) -> impl FnOnce(landlock::RulesetError) -> Self {
        let step = step.into();
        move |source| Self::Landlock { step, source }
    }
}
