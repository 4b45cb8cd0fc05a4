//! A client's browser profile: its folder, private to the user, claimed by one browser at a
//! time, and a lock a dead browser left recovered.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::error::BrowserError;

/// Takes the client's profile folder (0700), or the next free one when another gateway of the
/// same client holds it, so two processes never share one profile.
pub(super) fn claim_profile(
    home: &Path,
    client: &str,
) -> Result<(PathBuf, std::fs::File), BrowserError> {
    let root = home.join("browser");
    make_private(&root)?;
    let slug = profile_slug(client);
    for n in 1..=16 {
        let name = if n == 1 {
            slug.clone()
        } else {
            format!("{slug}.{n}")
        };
        let dir = root.join(name);
        make_private(&dir)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".aai-lock"))
            .map_err(BrowserError::file("open the profile lock in", &dir))?;
        #[cfg(unix)]
        let taken =
            rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err();
        #[cfg(not(unix))]
        let taken = false;
        if !taken {
            return Ok((dir, lock));
        }
    }
    Err(BrowserError::ProfilesInUse {
        client: client.to_owned(),
        root,
    })
}

/// A folder name for a client name: letters, digits, `-` and `_`, never empty.
pub fn profile_slug(client: &str) -> String {
    let slug: String = client
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if slug.trim_matches('_').is_empty() {
        "client".into()
    } else {
        slug
    }
}

pub(super) fn make_private(dir: &Path) -> Result<(), BrowserError> {
    std::fs::create_dir_all(dir).map_err(BrowserError::file("create", dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(BrowserError::file("make private", dir))?;
    }
    Ok(())
}

/// Turns network prediction off in the profile's preferences (kept across launches), and
/// drops the previous run's endpoint file.
pub(super) fn prepare_profile(profile: &Path) -> Result<(), BrowserError> {
    recover_stale_lock(profile)?;
    let default = profile.join("Default");
    std::fs::create_dir_all(&default).map_err(BrowserError::file("create", &default))?;
    let path = default.join("Preferences");
    let mut prefs: Value = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    prefs["net"] = json!({"network_prediction_options": 2});
    std::fs::write(&path, prefs.to_string()).map_err(BrowserError::file("write", &path))?;
    let _ = std::fs::remove_file(profile.join("DevToolsActivePort"));
    Ok(())
}

/// Removes the lock Chromium left in `profile` when the browser that held it is gone (a
/// gateway killed before its browser was tied to it, a power cut): with it, a new browser
/// exits at once with Chromium's raw "SingletonLock: File exists". The lock (a symlink to
/// `host-pid`) is kept while that process lives and runs on this profile — the caller holds
/// the profile's own lock, so it is no browser of a running gateway, and the error says which
/// process to end.
pub(super) fn recover_stale_lock(profile: &Path) -> Result<(), BrowserError> {
    let lock = profile.join("SingletonLock");
    let Ok(target) = std::fs::read_link(&lock) else {
        return Ok(());
    };
    let target = target.to_string_lossy().into_owned();
    let (host, pid) = target
        .rsplit_once('-')
        .map(|(host, pid)| (host.to_owned(), pid.parse::<u32>().ok()))
        .unwrap_or_default();
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    if !here.is_empty() && host != here {
        // Another computer's browser (a shared home): Chromium itself says so.
        return Ok(());
    }
    if let Some(pid) = pid
        && runs_on_profile(pid, profile)
    {
        return Err(BrowserError::HeldProfile {
            profile: profile.to_owned(),
            pid,
        });
    }
    tracing::info!(profile = %profile.display(), %target, "removing the lock of a browser that is gone");
    for name in ["SingletonLock", "SingletonSocket", "SingletonCookie"] {
        let _ = std::fs::remove_file(profile.join(name));
    }
    Ok(())
}

/// Whether process `pid` lives and is a browser on `profile` (a pid the system gave to
/// another program since does not hold the profile).
pub(super) fn runs_on_profile(pid: u32, profile: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let wanted = format!("--user-data-dir={}", profile.display());
    cmdline
        .split(|b| *b == 0)
        .any(|arg| arg == wanted.as_bytes())
}
