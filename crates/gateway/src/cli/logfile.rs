//! The server's log file: `AAI_HOME/logs/aai-gateway.log`, private to the user, rotated when
//! it would pass a size cap (`.1`, `.2` kept; the oldest dropped), so it never fills a disk.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The cap of one file.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Files kept besides the current one.
const KEPT: usize = 2;

/// A writer that rotates its file at [`MAX_BYTES`].
pub struct SizeRotating {
    path: PathBuf,
    file: File,
    written: u64,
    max: u64,
}

fn open_private(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

impl SizeRotating {
    /// Opens (appending) `dir/name`, creating `dir` private to the user.
    ///
    /// # Errors
    /// The folder or the file cannot be created.
    pub fn open(dir: &Path, name: &str) -> std::io::Result<Self> {
        Self::with_cap(dir, name, MAX_BYTES)
    }

    /// [`SizeRotating::open`] with another cap (tests).
    ///
    /// # Errors
    /// As [`SizeRotating::open`].
    pub fn with_cap(dir: &Path, name: &str, max: u64) -> std::io::Result<Self> {
        aai_engine::private::create_dir(dir)?;
        let path = dir.join(name);
        let file = open_private(&path)?;
        let written = file.metadata().map_or(0, |m| m.len());
        Ok(Self {
            path,
            file,
            written,
            max,
        })
    }

    fn numbered(&self, n: usize) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        for n in (1..KEPT).rev() {
            let _ = std::fs::rename(self.numbered(n), self.numbered(n + 1));
        }
        std::fs::rename(&self.path, self.numbered(1))?;
        self.file = open_private(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

impl Write for SizeRotating {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written > 0 && self.written + buf.len() as u64 > self.max {
            self.rotate()?;
        }
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_rotate_at_the_cap_and_old_ones_are_dropped() {
        let dir = tempfile::tempdir().expect("dir");
        let logs = dir.path().join("logs");
        let mut log = SizeRotating::with_cap(&logs, "g.log", 100).expect("open");
        for i in 0..50 {
            writeln!(log, "line {i:03} of the log, padded").expect("write");
        }
        let mut names: Vec<String> = std::fs::read_dir(&logs)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["g.log", "g.log.1", "g.log.2"]);
        for name in &names {
            let len = std::fs::metadata(logs.join(name)).expect("meta").len();
            assert!(len <= 100, "{name}: {len}");
        }
        let newest = std::fs::read_to_string(logs.join("g.log")).expect("read");
        assert!(newest.contains("line 049"), "{newest}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(logs.join("g.log"))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
