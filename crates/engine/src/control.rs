//! The controls of the gate belong to the person, never to the agent.
//!
//! Two credentials, two reaches: the MCP bearer token (`run/token`) opens `/mcp` and nothing
//! else; the **control credential** (`run/control`) answers approvals, resumes after a stop,
//! logs into the dashboard and lets the command line change grants, schedules, credentials
//! and installed apps. It lives only in a 0600 file under `AAI_HOME/run`, which no agent tool
//! can read: the file tools refuse `AAI_HOME`, and commands and apps the agent starts run
//! contained (their sandbox makes `AAI_HOME/run` unreadable). It is never put in an
//! environment, an argument list, a log line or an audit row.
//!
//! Stopping is open to everyone (it is always safe): besides the daemon's HTTP endpoint, the
//! **stop marker** `run/stopped` is a path that needs no network and no credential. Every
//! gateway of the user — the daemon and every in-process server — looks at it before each
//! call and watches it, so a stop reaches them all even when the daemon's listener is flooded
//! or hung. Only the person's own processes can create or remove it (contained processes see
//! `AAI_HOME` read-only).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The control credential's file under `home`.
pub fn credential_path(home: &Path) -> PathBuf {
    home.join("run").join("control")
}

/// The stop marker's file under `home`.
pub fn stop_marker(home: &Path) -> PathBuf {
    home.join("run").join("stopped")
}

/// How often gateways look at the stop marker.
pub const MARKER_EVERY: Duration = Duration::from_millis(100);

/// Why a command that changes the gate cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The credential file exists (or its folder does) but cannot be read or made: the
    /// command runs contained, or as another user.
    #[error(
        "this command changes the gateway's gate (approvals, grants, schedules, credentials, installed apps or the stop), which only you may do: it needs the control credential in {path}, and this process cannot read it ({source}). Commands an agent starts cannot read it by design; run the command yourself, in your own terminal"
    )]
    Unreadable {
        path: String,
        source: std::io::Error,
    },
}

/// The control credential of `home`, made (256 random bits, 0600) when there is none yet.
///
/// # Errors
/// The file cannot be read or made; the message says why and what to do.
pub fn credential(home: &Path) -> Result<String, ControlError> {
    let path = credential_path(home);
    let unreadable = |source| ControlError::Unreadable {
        path: path.display().to_string(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) if text.trim().len() >= 32 => return Ok(text.trim().to_owned()),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(unreadable(error)),
    }
    crate::private::create_dir(&home.join("run")).map_err(unreadable)?;
    let token = crate::private::new_token();
    crate::private::write_private(&path, token.as_bytes()).map_err(unreadable)?;
    Ok(token)
}

/// What the stop marker says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Marker {
    /// Who pressed the stop.
    pub by: String,
    /// When, in seconds since the epoch.
    pub at: u64,
}

/// Writes the stop marker (the stop is on for every gateway of this home).
///
/// # Errors
/// The marker cannot be written.
pub fn write_marker(home: &Path, by: &str) -> std::io::Result<()> {
    crate::private::create_dir(&home.join("run"))?;
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let marker = Marker {
        by: by.to_owned(),
        at,
    };
    let json = serde_json::to_vec(&marker).map_err(std::io::Error::other)?;
    match crate::private::write_private(&stop_marker(home), &json) {
        Ok(()) => Ok(()),
        // A full disk still has room for an empty file (an inode, no data block), and an
        // empty marker means "stopped" like any other: the stop never waits on free space.
        Err(error) => {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(false);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            options.open(stop_marker(home)).map(drop).map_err(|_| error)
        }
    }
}

/// Removes the stop marker; whether there was one.
pub fn clear_marker(home: &Path) -> bool {
    std::fs::remove_file(stop_marker(home)).is_ok()
}

/// The stop marker, when the stop is on. A marker that cannot be parsed still means "stopped"
/// (whoever could write it could have written a valid one).
pub fn marker(home: &Path) -> Option<Marker> {
    let bytes = match std::fs::read(stop_marker(home)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => {
            return Some(Marker {
                by: "the stop marker".into(),
                at: 0,
            });
        }
    };
    Some(serde_json::from_slice(&bytes).unwrap_or(Marker {
        by: "the stop marker".into(),
        at: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_is_made_once_private_and_then_read() {
        let home = tempfile::tempdir().expect("home");
        let first = credential(home.path()).expect("made");
        assert_eq!(first.len(), 64);
        assert_eq!(credential(home.path()).expect("read"), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(credential_path(home.path()))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn an_unreadable_credential_is_refused_with_what_to_do() {
        let home = tempfile::tempdir().expect("home");
        credential(home.path()).expect("made");
        // A folder where the file should be cannot be read as a file, whoever runs this.
        let other = tempfile::tempdir().expect("other");
        std::fs::create_dir_all(credential_path(other.path())).expect("dir");
        let error = credential(other.path()).expect_err("refused");
        let text = error.to_string();
        assert!(text.contains("run the command yourself"), "{text}");
        assert!(text.contains("control credential"), "{text}");
    }

    #[test]
    fn the_marker_round_trips_and_a_garbled_one_still_stops() {
        let home = tempfile::tempdir().expect("home");
        assert!(marker(home.path()).is_none());
        write_marker(home.path(), "aai-gateway stop").expect("write");
        assert_eq!(
            marker(home.path()).map(|m| m.by),
            Some("aai-gateway stop".into())
        );
        std::fs::write(stop_marker(home.path()), b"\0garbage").expect("garble");
        assert!(marker(home.path()).is_some());
        assert!(clear_marker(home.path()));
        assert!(marker(home.path()).is_none());
        assert!(!clear_marker(home.path()));
    }
}
