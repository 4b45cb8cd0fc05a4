//! The gateway's own files belong to the user alone: `AAI_HOME` and its folders are 0700,
//! `data.db` (with its `-wal` and `-shm`), logs and token files 0600. New ones are created
//! so; older, looser ones are tightened at start, with a log line saying which. The helpers
//! are `aai_contain::own_files`; the log line is the engine's.

use std::path::Path;

pub use aai_contain::own_files::{
    FileError, create_dir, new_token, same_secret, tighten, write_private,
};

/// [`tighten`], logging each change.
pub fn tighten_and_log(home: &Path) {
    for path in tighten(home) {
        tracing::info!(path = %path.display(), "made private to the user (it was readable by others)");
    }
}
