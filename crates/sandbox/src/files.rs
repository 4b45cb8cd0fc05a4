//! The file sandbox (`spec/desktop-control.zh.md` §7.3): allowed directories, denied patterns,
//! a size limit, and the gateway's own files outside every sandbox.
//!
//! A path is checked lexically first (so nothing outside is even looked at), then resolved
//! with every symlink followed (for a new file, its parent) and checked again; a file opened
//! afterwards is checked once more through what the OS says it opened.

use std::io::Read;
use std::path::{Path, PathBuf};

use aai_contain::rules::{normalize, resolve};

use aai_descriptor::{AaiError, ErrorKind};
use aai_toolset::SandboxConfig;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::json;

/// Longest path accepted, in bytes, and longest component.
const MAX_PATH: usize = 4096;
const MAX_COMPONENT: usize = 255;

/// The secret stores of `config`: the built-in ones and the configured ones, `~` expanded
/// and resolved.
pub fn secret_paths(config: &SandboxConfig) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = aai_contain::rules::SECRET_STORES
        .iter()
        .map(PathBuf::from)
        .chain(config.denied_paths.iter().cloned())
        .map(|p| resolve(&aai_toolset::expand_home(&p)))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A checked sandbox, ready to judge paths.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Allowed directories, resolved.
    allowed: Vec<PathBuf>,
    denied: GlobSet,
    /// The secret stores (built in and configured), resolved.
    secrets: Vec<PathBuf>,
    /// The gateway's own places: never inside any sandbox.
    protected: Vec<PathBuf>,
    pub max_file_size: u64,
}

fn denied(message: String) -> AaiError {
    AaiError::new(ErrorKind::PermissionDenied, message)
}

/// Whether `path` is `dir` or inside it, component by component (`/a/bc` is not in `/a/b`).
fn within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

impl Sandbox {
    /// The sandbox of `config`, narrowed to the client's `roots` (file URIs) when it sent
    /// any; `protected` are the gateway's own directories.
    pub fn new(config: &SandboxConfig, roots: &[String], protected: &[PathBuf]) -> Self {
        let configured: Vec<PathBuf> = config
            .allowed_directories
            .iter()
            .map(|d| resolve(&aai_toolset::expand_home(d)))
            .collect();
        let roots: Vec<PathBuf> = roots
            .iter()
            .filter_map(|uri| uri.strip_prefix("file://"))
            .map(|p| resolve(Path::new(&percent_decode(p))))
            .collect();
        let allowed = if roots.is_empty() {
            configured
        } else {
            // Roots narrow the sandbox, never widen it.
            let mut narrowed = Vec::new();
            for root in &roots {
                for dir in &configured {
                    if within(root, dir) {
                        narrowed.push(root.clone());
                    } else if within(dir, root) {
                        narrowed.push(dir.clone());
                    }
                }
            }
            narrowed
        };
        let mut builder = GlobSetBuilder::new();
        for pattern in &config.denied_patterns {
            let expanded = aai_toolset::expand_home(Path::new(pattern))
                .to_string_lossy()
                .into_owned();
            match Glob::new(&expanded) {
                Ok(glob) => {
                    builder.add(glob);
                }
                Err(error) => tracing::warn!(pattern, %error, "denied pattern ignored"),
            }
        }
        Self {
            allowed,
            denied: builder.build().unwrap_or_else(|_| GlobSet::empty()),
            secrets: secret_paths(config),
            protected: protected.iter().map(|p| resolve(p)).collect(),
            max_file_size: config.max_file_size,
        }
    }

    /// The secret stores no tool may touch and no contained process sees (resolved).
    pub fn secrets(&self) -> &[PathBuf] {
        &self.secrets
    }

    /// The allowed directories (resolved).
    pub fn allowed(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// The allowed directory a resolved path is in (the deepest, when they nest).
    pub fn root_of(&self, path: &Path) -> Option<&Path> {
        self.allowed
            .iter()
            .filter(|dir| within(path, dir))
            .max_by_key(|dir| dir.components().count())
            .map(PathBuf::as_path)
    }

    /// The absolute, lexically normalized form of what the agent passed.
    fn lexical(&self, input: &str) -> Result<PathBuf, AaiError> {
        if input.contains('\0') {
            return Err(denied("the path contains a NUL byte".into()));
        }
        if input.len() > MAX_PATH {
            return Err(denied(format!("the path is longer than {MAX_PATH} bytes")));
        }
        let path = aai_toolset::expand_home(Path::new(input));
        if path
            .components()
            .any(|c| c.as_os_str().len() > MAX_COMPONENT)
        {
            return Err(denied(format!(
                "a path component is longer than {MAX_COMPONENT} bytes"
            )));
        }
        let absolute = if path.is_absolute() {
            path
        } else {
            let base = self.allowed.first().ok_or_else(|| {
                denied(
                    "no directory is allowed for file tools (local.sandbox.allowed_directories)"
                        .into(),
                )
            })?;
            base.join(path)
        };
        Ok(normalize(&absolute))
    }

    /// Whether a resolved path may be touched at all.
    fn admit(&self, path: &Path, input: &str) -> Result<(), AaiError> {
        let outside = || {
            let dirs: Vec<String> = self
                .allowed
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            denied(format!(
                "{input:?} is outside the directories the file tools may use ({}); the user can add one under local.sandbox.allowed_directories in config.json",
                if dirs.is_empty() { "none".to_owned() } else { dirs.join(", ") }
            ))
            .with_detail(json!({"path": input, "allowed": dirs}))
        };
        if self.protected.iter().any(|p| within(path, p)) {
            return Err(denied(format!(
                "{input:?} is one of aai-gateway's own files (policy, audit log, credentials), which no tool may touch"
            )));
        }
        if !self.allowed.iter().any(|dir| within(path, dir)) {
            return Err(outside());
        }
        if self.secrets.iter().any(|s| within(path, s)) {
            return Err(denied(format!(
                "{input:?} is in one of your secret stores (keys, credentials, browser profiles), which no agent tool may read or write; the list is in local.sandbox.denied_paths and aai_contain's SECRET_STORES"
            )));
        }
        if self.denied.is_match(path) {
            return Err(denied(format!(
                "{input:?} matches a denied pattern (local.sandbox.denied_patterns)"
            )));
        }
        Ok(())
    }

    /// A path to read (or list): it must exist, and every symlink in it must stay inside.
    ///
    /// # Errors
    /// PERMISSION_DENIED for anything outside; INVALID_PARAMS when it does not exist.
    pub fn check_read(&self, input: &str) -> Result<PathBuf, AaiError> {
        let lexical = self.lexical(input)?;
        self.admit(&lexical, input)?;
        let resolved = match std::fs::canonicalize(&lexical) {
            Ok(resolved) => resolved,
            Err(error) => {
                // Missing: still say "outside" when its folder leads out (a symlinked folder).
                if let Some(parent) = lexical.parent().and_then(|p| std::fs::canonicalize(p).ok()) {
                    self.admit(&parent, input)?;
                }
                return Err(
                    AaiError::new(ErrorKind::InvalidParams, format!("{input:?}: {error}"))
                        .with_detail(json!({"path": input})),
                );
            }
        };
        self.admit(&resolved, input)?;
        refuse_hard_links(&resolved, input)?;
        Ok(resolved)
    }

    /// A path to write: an existing file is checked as for reading; a new one through its
    /// parent directory, which must exist inside.
    ///
    /// # Errors
    /// PERMISSION_DENIED for anything outside; INVALID_PARAMS when the parent is missing.
    pub fn check_write(&self, input: &str) -> Result<PathBuf, AaiError> {
        let lexical = self.lexical(input)?;
        self.admit(&lexical, input)?;
        if std::fs::symlink_metadata(&lexical).is_ok() {
            return self.check_read(input);
        }
        let name = lexical
            .file_name()
            .ok_or_else(|| denied(format!("{input:?} names no file")))?
            .to_owned();
        let parent = lexical.parent().unwrap_or(Path::new("/"));
        let parent = std::fs::canonicalize(parent).map_err(|error| {
            AaiError::new(
                ErrorKind::InvalidParams,
                format!("{input:?}: its folder does not exist ({error}); create it first"),
            )
        })?;
        let resolved = parent.join(name);
        self.admit(&resolved, input)?;
        Ok(resolved)
    }

    /// After opening `path`: the file the OS opened is still inside (a swap between the
    /// check and the open is caught here).
    ///
    /// # Errors
    /// PERMISSION_DENIED when it is not.
    pub fn recheck_open(
        &self,
        file: &std::fs::File,
        path: &Path,
        input: &str,
    ) -> Result<(), AaiError> {
        let opened = opened_path(file).unwrap_or_else(|| path.to_path_buf());
        self.admit(&opened, input)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = file.metadata().map_err(|e| {
                AaiError::new(ErrorKind::AutomationFailed, format!("{input:?}: {e}"))
            })?;
            if meta.is_file() && meta.nlink() > 1 {
                return Err(hard_link(input));
            }
        }
        Ok(())
    }
}

fn hard_link(input: &str) -> AaiError {
    denied(format!(
        "{input:?} has more than one hard link; a hard link can lead out of the sandbox, so such files are refused"
    ))
}

fn refuse_hard_links(path: &Path, input: &str) -> Result<(), AaiError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.is_file()
            && meta.nlink() > 1
        {
            return Err(hard_link(input));
        }
    }
    let _ = (path, input);
    Ok(())
}

/// What the OS says an open file is (Linux: `/proc/self/fd`).
fn opened_path(file: &std::fs::File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        return std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok();
    }
    #[allow(unreachable_code)]
    {
        let _ = file;
        None
    }
}

fn percent_decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map_or_else(|| text.to_owned(), |(_, v)| v.into_owned())
}

/// A file operation on `input` that failed.
pub fn io_error(input: &str, error: &std::io::Error) -> AaiError {
    AaiError::new(ErrorKind::AutomationFailed, format!("{input:?}: {error}"))
}

/// A file over the size limit.
pub fn too_big(input: &str, size: u64, max: u64) -> AaiError {
    AaiError::new(
        ErrorKind::InvalidParams,
        format!(
            "{input:?} is {size} bytes, over the {max}-byte limit (local.sandbox.max_file_size)"
        ),
    )
}

/// Reads a checked file whole, within the size limit, through a handle opened beneath its
/// allowed folder (no link followed, no FIFO or device).
pub fn read_checked(
    sandbox: &Sandbox,
    input: &str,
) -> Result<(std::path::PathBuf, Vec<u8>), AaiError> {
    let path = sandbox.check_read(input)?;
    let root = sandbox.root_of(&path).ok_or_else(|| outside(input))?;
    let mut file = crate::beneath::open_read(root, &path, input)?;
    sandbox.recheck_open(&file, &path, input)?;
    let meta = file.metadata().map_err(|e| io_error(input, &e))?;
    if meta.len() > sandbox.max_file_size {
        return Err(too_big(input, meta.len(), sandbox.max_file_size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    Read::by_ref(&mut file)
        .take(sandbox.max_file_size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(input, &e))?;
    Ok((path, bytes))
}

/// A path outside the allowed folders.
pub fn outside(input: &str) -> AaiError {
    AaiError::new(
        ErrorKind::PermissionDenied,
        format!("{input:?} is outside the directories the file tools may use"),
    )
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn config(allowed: &Path) -> SandboxConfig {
        SandboxConfig {
            allowed_directories: vec![allowed.to_path_buf()],
            ..SandboxConfig::default()
        }
    }

    /// The client's roots narrow the sandbox and never widen it.
    #[test]
    fn roots_narrow_the_allowed_directories() {
        let dir = tempfile::tempdir().expect("dir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        let allowed = base.join("a");
        std::fs::create_dir_all(allowed.join("proj")).expect("dirs");
        std::fs::create_dir_all(base.join("elsewhere")).expect("dirs");
        let uri = |p: &Path| format!("file://{}", p.display());
        let inside = Sandbox::new(&config(&allowed), &[uri(&allowed.join("proj"))], &[]);
        assert_eq!(inside.allowed(), [allowed.join("proj")]);
        let wide = Sandbox::new(&config(&allowed), &["file:///".into()], &[]);
        assert_eq!(wide.allowed(), std::slice::from_ref(&allowed));
        let apart = Sandbox::new(&config(&allowed), &[uri(&base.join("elsewhere"))], &[]);
        assert!(apart.allowed().is_empty());
        std::fs::write(allowed.join("x.txt"), "x").expect("file");
        assert_eq!(
            apart
                .check_read(&allowed.join("x.txt").display().to_string())
                .map_err(|e| e.kind),
            Err(ErrorKind::PermissionDenied)
        );
        let none = Sandbox::new(&config(&allowed), &[], &[]);
        assert!(
            none.check_read(&allowed.join("x.txt").display().to_string())
                .is_ok()
        );
    }
}
