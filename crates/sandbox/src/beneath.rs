//! Opening files beneath an allowed folder without following a link anywhere on the way.
//!
//! A path checked by the sandbox can change before it is used: a folder on it swapped for a
//! symlink would send a write outside. So on Unix every folder is opened from the allowed root
//! down, one component at a time, with `O_NOFOLLOW`; the file is then created, opened or
//! renamed relative to that folder handle (`openat`/`renameat`). A swap makes the open fail
//! instead of leading elsewhere. A read opens without blocking and refuses anything that is not
//! a regular file (a FIFO, a socket or a device would hang or never end).

use std::fs::File;
use std::path::Path;

use aai_descriptor::{AaiError, ErrorKind};

fn changed(input: &str, error: &std::io::Error) -> AaiError {
    AaiError::new(
        ErrorKind::PermissionDenied,
        format!(
            "{input:?} changed while it was being opened (a link or another file appeared on its path: {error}); nothing was read or written"
        ),
    )
}

fn not_regular(input: &str, what: &str) -> AaiError {
    AaiError::new(
        ErrorKind::InvalidParams,
        format!(
            "{input:?} is {what}, not a regular file; only regular files can be read or written"
        ),
    )
}

/// A random suffix for a temporary file, unique per write.
fn unique() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(unix)]
mod imp {
    use super::*;
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use std::io::Write;
    use std::os::fd::OwnedFd;
    use std::path::Component;

    const DIR: OFlags = OFlags::DIRECTORY
        .union(OFlags::RDONLY)
        .union(OFlags::CLOEXEC)
        .union(OFlags::NOFOLLOW);

    /// `dir` (resolved, inside `root`), opened from `root` down with no link followed.
    fn open_dir(root: &Path, dir: &Path) -> std::io::Result<OwnedFd> {
        let rest = dir.strip_prefix(root).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "outside its allowed folder",
            )
        })?;
        let mut fd = rustix::fs::open(root, DIR, Mode::empty())?;
        for component in rest.components() {
            match component {
                Component::Normal(name) => fd = rustix::fs::openat(&fd, name, DIR, Mode::empty())?,
                Component::CurDir => {}
                _ => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "an unexpected path component",
                    ));
                }
            }
        }
        Ok(fd)
    }

    fn split(path: &Path) -> std::io::Result<(&Path, &std::ffi::OsStr)> {
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => Ok((parent, name)),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "names no file",
            )),
        }
    }

    fn kind(file_type: FileType) -> Option<&'static str> {
        match file_type {
            FileType::RegularFile => None,
            FileType::Directory => Some("a folder"),
            FileType::Fifo => Some("a FIFO (named pipe)"),
            FileType::Socket => Some("a socket"),
            FileType::CharacterDevice | FileType::BlockDevice => Some("a device"),
            FileType::Symlink => Some("a symbolic link"),
            FileType::Unknown => Some("of an unknown kind"),
        }
    }

    pub fn open_read(root: &Path, path: &Path, input: &str) -> Result<File, AaiError> {
        let (parent, name) = split(path).map_err(|e| changed(input, &e))?;
        let dir = open_dir(root, parent).map_err(|e| changed(input, &e))?;
        // Said by type first (a socket cannot even be opened); checked again on the handle.
        if let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            && let Some(what) = kind(FileType::from_raw_mode(stat.st_mode))
        {
            return Err(not_regular(input, what));
        }
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP => not_regular(input, "a symbolic link"),
            other => changed(input, &other.into()),
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| changed(input, &e.into()))?;
        if let Some(what) = kind(FileType::from_raw_mode(stat.st_mode)) {
            return Err(not_regular(input, what));
        }
        if stat.st_nlink > 1 {
            return Err(AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "{input:?} has more than one hard link; a hard link can lead out of the sandbox, so such files are refused"
                ),
            ));
        }
        // Regular files never block; reads go on normally.
        let _ = rustix::fs::fcntl_setfl(&fd, OFlags::empty());
        Ok(File::from(fd))
    }

    pub fn replace(root: &Path, path: &Path, input: &str, bytes: &[u8]) -> Result<(), AaiError> {
        let io = |e: std::io::Error| {
            AaiError::new(ErrorKind::AutomationFailed, format!("{input:?}: {e}"))
        };
        let (parent, name) = split(path).map_err(|e| changed(input, &e))?;
        let dir = open_dir(root, parent).map_err(|e| changed(input, &e))?;
        // Keep the mode of the file being replaced; a new one gets 0644 less the umask.
        let mode = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                if let Some(what) = kind(FileType::from_raw_mode(stat.st_mode)) {
                    return Err(not_regular(input, what));
                }
                Mode::from_raw_mode(stat.st_mode & 0o7777)
            }
            Err(_) => Mode::from_raw_mode(0o644),
        };
        let mut temp = std::ffi::OsString::from(".");
        temp.push(name);
        temp.push(format!(".aai-{}.tmp", unique()));
        let fd = rustix::fs::openat(
            &dir,
            &temp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            mode,
        )
        .map_err(|e| changed(input, &e.into()))?;
        let mut file = File::from(fd);
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(io)
            .and_then(|()| {
                rustix::fs::fchmod(&file, mode).map_err(|e| io(e.into()))?;
                rustix::fs::renameat(&dir, &temp, &dir, name).map_err(|e| io(e.into()))
            });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
        }
        written
    }
}

#[cfg(not(unix))]
mod imp {
    use super::*;
    use std::io::Write;

    pub fn open_read(_root: &Path, path: &Path, input: &str) -> Result<File, AaiError> {
        let file = File::open(path).map_err(|e| changed(input, &e))?;
        let meta = file.metadata().map_err(|e| changed(input, &e))?;
        if !meta.is_file() {
            return Err(not_regular(input, "not a file"));
        }
        Ok(file)
    }

    pub fn replace(_root: &Path, path: &Path, input: &str, bytes: &[u8]) -> Result<(), AaiError> {
        let parent = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = parent.join(format!(".{name}.aai-{}.tmp", unique()));
        let result = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
            .and_then(|()| std::fs::rename(&temp, path));
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result.map_err(|e| AaiError::new(ErrorKind::AutomationFailed, format!("{input:?}: {e}")))
    }
}

/// Opens the file at `path` (resolved, inside `root`) for reading: a regular file with one
/// link, reached with no link followed.
///
/// # Errors
/// PERMISSION_DENIED when the path changed on the way or the file has other hard links;
/// INVALID_PARAMS when it is not a regular file.
pub fn open_read(root: &Path, path: &Path, input: &str) -> Result<File, AaiError> {
    imp::open_read(root, path, input)
}

/// Replaces (or creates) the file at `path` (resolved, inside `root`) with `bytes`: a new file
/// with a unique name in the same folder handle, synced, renamed over it.
///
/// # Errors
/// PERMISSION_DENIED when the path changed on the way; AUTOMATION_FAILED for I/O errors.
pub fn replace(root: &Path, path: &Path, input: &str, bytes: &[u8]) -> Result<(), AaiError> {
    imp::replace(root, path, input, bytes)
}
