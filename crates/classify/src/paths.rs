//! Which paths a command must not destroy or overwrite: system folders, the home folder's
//! credentials and shell start-up files, the gateway's own home, disks; and which deletion
//! targets are "mass" (wildcards, roots, names only known when it runs).

use super::{FANOUT, UNKNOWN};

/// Paths that hold credentials: SSH and GPG keys, cloud and registry credentials, netrc,
/// keychains, password stores.
pub(super) fn is_credential_path(word: &str) -> bool {
    const PATTERNS: [&str; 16] = [
        ".ssh/",
        "/.ssh",
        "id_rsa",
        "id_ed25519",
        "id_ecdsa",
        "id_dsa",
        ".aws/",
        ".gnupg",
        ".netrc",
        ".git-credentials",
        ".config/gcloud",
        ".kube/config",
        ".docker/config.json",
        "keychain",
        ".password-store",
        "/etc/shadow",
    ];
    let lower = word.to_ascii_lowercase();
    let pub_key = lower.ends_with(".pub")
        || lower.ends_with("known_hosts")
        || lower.ends_with("/config") && lower.contains(".ssh");
    !pub_key && PATTERNS.iter().any(|p| lower.contains(p)) || lower == "~/.ssh" || lower == "~/.aws"
}

/// System or home roots, where a recursive permission change breaks or opens the machine.
pub(super) fn is_root_target(word: &str) -> bool {
    let trimmed = word.trim_end_matches("/*").trim_end_matches('/');
    let home = word.contains(UNKNOWN) && word.contains("HOME");
    home || matches!(
        trimmed,
        "" | "~"
            | "/etc"
            | "/usr"
            | "/bin"
            | "/sbin"
            | "/lib"
            | "/lib64"
            | "/var"
            | "/boot"
            | "/opt"
            | "/home"
            | "/root"
            | "/System"
            | "/Library"
            | "/Users"
            | "/private"
            | "/dev"
            | "/proc"
            | "/sys"
            | "/Applications"
            | "/srv"
            | "/snap"
    ) || (trimmed.starts_with("/home/") || trimmed.starts_with("/Users/"))
        && trimmed.matches('/').count() == 2
}

pub(super) fn is_block_device(path: &str) -> bool {
    [
        "/dev/sd",
        "/dev/hd",
        "/dev/vd",
        "/dev/xvd",
        "/dev/nvme",
        "/dev/mmcblk",
        "/dev/disk",
        "/dev/dm-",
        "/dev/md",
        "/dev/loop",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// In the home folder: credentials, shell start-up files (code every new shell runs),
/// history, autostart entries, and the gateway's own home.
const HOME_PROTECTED: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".config/gcloud",
    ".local/share/keyrings",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".pam_environment",
    ".xprofile",
    ".xinitrc",
    ".bash_history",
    ".zsh_history",
    ".config/fish",
    ".config/autostart",
    ".config/systemd",
    ".aai",
];

/// Outside the home folder, everything under these belongs to the system.
const SYSTEM: &[&str] = &[
    "/etc",
    "/boot",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/srv",
    "/var",
    "/System",
    "/Library",
    "/private",
    "/Applications",
    "/snap",
    "/proc",
    "/sys",
    "/dev",
    "/home",
    "/Users",
];

/// Under a system folder but scratch or a stream, not something kept.
const SCRATCH: &[&str] = &[
    "/var/tmp",
    "/dev/null",
    "/dev/zero",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/fd",
    "/dev/shm",
    "/dev/pts",
    "/proc/self/fd",
    "/private/tmp",
    // macOS's per-user temporary folders (`$TMPDIR`).
    "/var/folders",
    "/private/var/folders",
];

fn under(path: &str, root: &str) -> bool {
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `path` without `//`, `/./` and a trailing `/`.
fn clean(path: &str) -> String {
    let mut cleaned = path.replace("/./", "/");
    while cleaned.contains("//") {
        cleaned = cleaned.replace("//", "/");
    }
    if cleaned.len() > 1 {
        cleaned = cleaned.trim_end_matches('/').to_owned();
        if cleaned.ends_with("/.") {
            cleaned.truncate(cleaned.len() - 2);
        }
    }
    cleaned
}

/// The part of `path` below the home folder (`""` for the home folder itself), when it is in
/// one: `~/…`, `$HOME/…`, `/home/NAME/…`, `/Users/NAME/…`, `/root/…`.
fn home_relative(path: &str) -> Option<String> {
    let home_var_dollar = format!("{UNKNOWN}$HOME");
    let home_var_braces = format!("{UNKNOWN}${{HOME}}");
    for prefix in [
        "~",
        home_var_dollar.as_str(),
        home_var_braces.as_str(),
        "/root",
    ] {
        if let Some(rest) = path.strip_prefix(prefix)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Some(rest.trim_start_matches('/').to_owned());
        }
    }
    for root in ["/home/", "/Users/"] {
        if let Some(rest) = path.strip_prefix(root) {
            return Some(rest.split_once('/').map_or("", |(_, r)| r).to_owned());
        }
    }
    None
}

/// A path whose deletion or overwriting breaks the machine, a login or the gate: the root, a
/// system folder, the home folder itself, or a protected file in it.
pub(super) fn is_protected(path: &str) -> bool {
    let path = clean(path);
    if let Some(rest) = home_relative(&path) {
        return rest.is_empty() || HOME_PROTECTED.iter().any(|p| under(&rest, p));
    }
    path == "/"
        || (SYSTEM.iter().any(|root| under(&path, root))
            && !SCRATCH.iter().any(|scratch| under(&path, scratch)))
}

/// A protected path outside the home folder (where even appending changes the system).
pub(super) fn is_system(path: &str) -> bool {
    is_protected(path) && home_relative(&clean(path)).is_none()
}

/// A deletion target that makes a deletion critical: names given at run time (by `xargs`,
/// `find -exec` or a program), a wildcard, a root (`/`, `~`, `.`, `..`), or a protected path.
pub(super) fn deletes_dangerously(target: &str) -> bool {
    target.contains(FANOUT)
        || target.contains(['*', '?'])
        || matches!(
            clean(target).as_str(),
            "/" | "~" | "." | ".." | "~/" | "./" | "../"
        )
        || is_protected(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths_are_system_folders_and_home_secrets() {
        for path in [
            "/etc/passwd",
            "/usr/bin/python3",
            "~/.bashrc",
            "~/.ssh/id_rsa",
            "/home/alice/.ssh",
            "/root/.profile",
            "/var/lib/dpkg/status",
            "~",
            "/",
            "/etc/",
            "~/.aai/config.json",
        ] {
            assert!(is_protected(path), "{path}");
        }
        for path in [
            "notes.txt",
            "/tmp/x",
            "/var/tmp/build",
            "/dev/null",
            "/dev/stderr",
            "~/project/file",
            "/home/alice/src/a.rs",
            "./.bashrc",
            "/private/var/folders/xy/T/build.log",
        ] {
            assert!(!is_protected(path), "{path}");
        }
        assert!(is_system("/etc/hosts") && !is_system("~/.bashrc"));
    }
}
