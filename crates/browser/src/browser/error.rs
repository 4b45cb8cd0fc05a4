//! Why the browser could not be started or driven; each text says what to do.

use std::path::PathBuf;

/// A DevTools command that did not get its answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CdpError {
    #[error("the browser is gone")]
    Gone,
    /// The browser answered with an error.
    #[error("{method}: {message}")]
    Refused { method: String, message: String },
    #[error("{method}: no answer from the browser within {ms} ms")]
    Timeout { method: String, ms: u128 },
}

/// Why a browser did not start, or a tab could not be opened, found or closed.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    #[error(transparent)]
    Cdp(#[from] CdpError),
    #[error("cannot open the DevTools WebSocket {url}: {source}")]
    WebSocket {
        url: String,
        source: tokio_tungstenite::tungstenite::Error,
    },
    #[error("cannot turn the browser's downloads off: {0}")]
    Downloads(CdpError),
    #[error("the browser gave no session for the tab")]
    NoSession,
    #[error("no such tab")]
    NoTab,
    #[error("cannot {action} {}: {source}", path.display())]
    File {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("every browser profile of {client:?} under {} is in use", root.display())]
    ProfilesInUse { client: String, root: PathBuf },
    #[error(
        "the browser profile {} is held by a Chromium (pid {pid}) no gateway runs any more; end it (`kill {pid}`) and call again",
        profile.display()
    )]
    HeldProfile { profile: PathBuf, pid: u32 },
    #[error(
        "cannot run certutil to trust web.extra_ca_certs in the browser ({0}); install it (Debian/Ubuntu: `apt-get install libnss3-tools`)"
    )]
    NoCertutil(std::io::Error),
    /// certutil's own words (its stderr).
    #[error("certutil failed: {0}")]
    Certutil(String),
    #[error("no stderr from the browser")]
    NoStderr,
    /// The last lines the browser wrote.
    #[error("the browser exited while starting: {0}")]
    ExitedStarting(String),
    #[error("the browser did not start within 30 s")]
    StartTimeout,
    #[error("browser.attach {endpoint:?} is not a URL: {source}")]
    AttachUrl {
        endpoint: String,
        source: url::ParseError,
    },
    #[error("browser.attach has no host")]
    AttachHost,
    #[error(
        "cannot reach the browser at {endpoint} ({source}); start Chrome with --remote-debugging-port"
    )]
    Unreachable {
        endpoint: String,
        source: std::io::Error,
    },
    #[error("{0} did not answer")]
    NoAnswer(String),
    #[error("{0}/json/version is not a DevTools endpoint")]
    NotDevTools(String),
    #[error("{0}/json/version names no webSocketDebuggerUrl")]
    NoDebuggerUrl(String),
}

impl BrowserError {
    /// For `map_err`: `action` on `path` failed.
    pub(super) fn file(
        action: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::File {
            action,
            path,
            source,
        }
    }
}
