//! The gateway's own files belong to the user alone: `AAI_HOME` and its folders are 0700,
//! `data.db` (with its `-wal` and `-shm`), logs and token files 0600. New ones are created
//! so; older, looser ones are tightened at start. Shared by every crate that writes into
//! `AAI_HOME` (the engine, the MCP servers' pins, the daemon).

use std::path::{Path, PathBuf};

/// A file or folder that could not be read, made, written, moved or removed: `cannot
/// <action> <path>: <why>`.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct FileError {
    pub action: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl FileError {
    /// For `map_err`: the error of `action` on `path`.
    pub fn at(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self {
            action,
            path,
            source,
        }
    }
}

/// Creates `dir` (and its parents) private to the user when it is missing.
///
/// # Errors
/// The folder cannot be created.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// A new 256-bit bearer token, hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to `path` through a private temporary file renamed into place, so a reader
/// never sees half a file and the file is never readable by others, not even for a moment.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Byte-wise comparison whose time does not depend on where the first difference is.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Tightens what exists of the gateway's files under `home`; returns the paths changed.
pub fn tighten(home: &Path) -> Vec<std::path::PathBuf> {
    let mut changed = Vec::new();
    #[cfg(unix)]
    {
        let mut set = |path: &Path, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            // Never follow a link: only the gateway's own files are changed.
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                return;
            };
            if meta.file_type().is_symlink() || meta.permissions().mode() & 0o777 & !mode == 0 {
                return;
            }
            if std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).is_ok() {
                changed.push(path.to_path_buf());
            }
        };
        set(home, 0o700);
        for name in ["data.db", "data.db-wal", "data.db-shm"] {
            set(&home.join(name), 0o600);
        }
        for dir in ["tokens", "logs", "run"] {
            let dir = home.join(dir);
            set(&dir, 0o700);
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                set(&entry.path(), 0o600);
            }
        }
    }
    #[cfg(not(unix))]
    let _ = home;
    changed
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
    }

    #[test]
    fn loose_files_are_tightened_and_links_left_alone() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().join("home");
        create_dir(&home.join("tokens")).expect("create");
        assert_eq!(mode(&home), 0o700);
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        for name in ["data.db", "data.db-wal", "tokens/a.json"] {
            std::fs::write(home.join(name), "x").expect("write");
            std::fs::set_permissions(home.join(name), std::fs::Permissions::from_mode(0o644))
                .expect("chmod");
        }
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "x").expect("write");
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::os::unix::fs::symlink(&outside, home.join("data.db-shm")).expect("link");
        let changed = tighten(&home);
        assert_eq!(changed.len(), 4, "{changed:?}");
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&home.join("data.db")), 0o600);
        assert_eq!(mode(&home.join("tokens/a.json")), 0o600);
        assert_eq!(
            mode(&outside),
            0o644,
            "a link's target is not the gateway's"
        );
        assert!(tighten(&home).is_empty(), "nothing left to change");
    }
}

#[cfg(test)]
mod secrets {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abcd", b"abcd"));
        assert!(!same_secret(b"abcd", b"abce"));
        assert!(!same_secret(b"abcd", b"abc"));
        assert!(!same_secret(b"", b"a"));
    }
}
