//! Which paths a contained process may read and write: the plan the launcher hands to Landlock.
//!
//! Landlock only grants, beneath a path; it cannot carve a hole out of a granted tree. So where
//! a granted folder holds something that must stay out (the gateway's home inside an allowed
//! folder or inside `/tmp`, its secrets under `/`), the folder itself is not granted: each of
//! its entries is, except the one leading to the excluded path, and so on down to it
//! ([`cover`]). The price: nothing new can be made directly in such a folder, and what others
//! make there later is not covered (both fail closed). Symbolic links among the entries are
//! skipped: a link is followed to its target, whose own place decides.

use std::path::{Component, Path, PathBuf};

/// What the gateway keeps under its home that no contained process may read.
pub const SECRETS: &[&str] = &[
    "run",
    "tokens",
    "browser",
    "data.db",
    "data.db-wal",
    "data.db-shm",
];

/// The user's secret stores, kept out of every contained process's view and refused to the
/// file tools ([`crate::Profile::deny`]); `local.denied_paths` in config.json adds to them.
pub const SECRET_STORES: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.config/hub",
    "~/.netrc",
    "~/.git-credentials",
    "~/.docker/config.json",
    "~/.kube",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.pki",
    "~/.mozilla",
    "~/.config/chromium",
    "~/.config/google-chrome",
    "~/.config/BraveSoftware",
    "~/.config/microsoft-edge",
    "~/.config/vivaldi",
    "~/snap/chromium",
    "~/snap/firefox",
];

/// [`SECRET_STORES`] under the user's home `home` (the `~` of each).
pub fn secret_stores(home: &Path) -> Vec<PathBuf> {
    SECRET_STORES
        .iter()
        .map(|p| {
            p.strip_prefix("~/")
                .map_or_else(|| PathBuf::from(p), |rest| home.join(rest))
        })
        .collect()
}

/// Files with this extension under the home are secrets too (keys of the local CA, …).
pub const SECRET_EXTENSION: &str = "key";

/// Devices a command needs to write (and `ioctl`): its terminal, the bit buckets, shared memory.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// How deep the home is searched for `*.key` files.
const KEY_DEPTH: usize = 4;

/// One entry of a folder, as [`cover`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// A regular file, a device, a socket or a pipe: granted on its own.
    File,
    Symlink,
}

/// What the launcher grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Read and execute beneath each (listing folders is allowed everywhere).
    pub read: Vec<PathBuf>,
    /// Every file operation beneath each (but making devices).
    pub write: Vec<PathBuf>,
    /// Written and `ioctl`ed: the devices of [`DEVICES`] that exist.
    pub devices: Vec<PathBuf>,
    /// A desktop program: abstract Unix sockets made outside may be reached (see
    /// [`crate::Profile::desktop`]).
    pub desktop: bool,
}

/// The entries of a folder, links not followed; nothing when it cannot be read.
pub fn list(dir: &Path) -> Vec<Entry> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let kind = entry.file_type().ok()?;
            let kind = if kind.is_symlink() {
                Kind::Symlink
            } else if kind.is_dir() {
                Kind::Dir
            } else {
                Kind::File
            };
            Some(Entry {
                path: entry.path(),
                kind,
            })
        })
        .collect()
}

/// `path` resolved (links followed) when it exists, else [`normalize`]d.
pub fn resolve(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path))
}

/// `path` with `.` and `..` removed lexically (never above the root).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The paths to grant so that everything beneath `root` is covered except `excluded` (and
/// what lies beneath them). `list` gives a folder's entries.
pub fn cover(
    root: &Path,
    excluded: &[PathBuf],
    list: &dyn Fn(&Path) -> Vec<Entry>,
) -> Vec<PathBuf> {
    if excluded.iter().any(|e| root.starts_with(e)) {
        return Vec::new();
    }
    let inside: Vec<PathBuf> = excluded
        .iter()
        .filter(|e| e.starts_with(root))
        .cloned()
        .collect();
    if inside.is_empty() {
        return vec![root.to_path_buf()];
    }
    let mut out = Vec::new();
    for entry in list(root) {
        match entry.kind {
            Kind::Symlink => {}
            Kind::File => {
                if !inside.contains(&entry.path) {
                    out.push(entry.path);
                }
            }
            Kind::Dir => out.extend(cover(&entry.path, &inside, list)),
        }
    }
    out
}

/// The secrets under `home` (resolved): [`SECRETS`] by name, and `*.key` files found within
/// [`KEY_DEPTH`] levels outside them.
pub fn secrets(home: &Path, list: &dyn Fn(&Path) -> Vec<Entry>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = SECRETS.iter().map(|name| home.join(name)).collect();
    let mut folders = vec![(home.to_path_buf(), 0)];
    while let Some((dir, depth)) = folders.pop() {
        for entry in list(&dir) {
            if found.contains(&entry.path) {
                continue;
            }
            match entry.kind {
                Kind::Dir if depth + 1 < KEY_DEPTH => folders.push((entry.path, depth + 1)),
                Kind::File | Kind::Symlink
                    if entry
                        .path
                        .extension()
                        .is_some_and(|x| x == SECRET_EXTENSION) =>
                {
                    found.push(entry.path);
                }
                _ => {}
            }
        }
    }
    found
}

impl crate::Profile {
    /// The gateway's folders that stay read-only, resolved.
    pub fn protected(&self) -> Vec<PathBuf> {
        std::iter::once(&self.home)
            .chain(&self.protect)
            .map(|p| resolve(p))
            .collect()
    }

    /// Whether the temporary folder holds a protected folder, so that commands get a private
    /// temporary folder of their own instead of writing to it directly.
    pub fn needs_private_temp(&self) -> bool {
        let protected = self.protected();
        self.temp
            .as_ref()
            .is_some_and(|t| protected.iter().any(|p| p.starts_with(resolve(t))))
    }

    /// What to grant, listing folders with `list` ([`list`] for the real file system).
    ///
    /// `viewed`: the process has its own view ([`crate::view`]), which already hides the
    /// gateway's home, its secrets and the deny list, keeps them read-only and makes the
    /// temporary folders private; Landlock then grants reading everywhere and writing beneath
    /// the allowed folders and the private temporary ones, with no folder carved up (so a
    /// process may make new files directly in a granted folder, the home included). Without a
    /// view, those paths are carved out of the grants instead.
    pub fn plan(&self, list: &dyn Fn(&Path) -> Vec<Entry>, viewed: bool) -> Plan {
        let home = resolve(&self.home);
        let protected = if viewed { Vec::new() } else { self.protected() };
        let mut hidden = if viewed {
            Vec::new()
        } else {
            let mut hidden = secrets(&home, list);
            hidden.extend(self.deny.iter().map(|p| resolve(p)));
            hidden
        };
        // Extra readable files are granted by rules of their own: a folder holding one stays
        // excluded, and only the file itself is added.
        let extra: Vec<PathBuf> = self.read.iter().map(|p| resolve(p)).collect();
        hidden.retain(|h| !extra.contains(h));
        let mut read = cover(Path::new("/"), &hidden, list);
        // Paths that do not exist are skipped when the rules are made.
        read.extend(extra);
        let mut write = Vec::new();
        let private_temp: Vec<PathBuf> = if viewed {
            vec![PathBuf::from("/tmp"), PathBuf::from("/var/tmp")]
        } else {
            self.own_temp.iter().cloned().collect()
        };
        for root in self.write.iter().chain(&self.temp).chain(&private_temp) {
            write.extend(cover(&resolve(root), &protected, list));
        }
        write.sort();
        write.dedup();
        let devices = DEVICES
            .iter()
            .map(|d| resolve(Path::new(d)))
            .filter(|d| d.exists() && !protected.iter().any(|p| d.starts_with(p)))
            .collect();
        Plan {
            read,
            write,
            devices,
            desktop: self.desktop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;

    /// A made-up file system: every path listed is a folder unless it ends in a file name
    /// with a dot, or starts with `@` (a link).
    fn tree(paths: &[&str]) -> impl Fn(&Path) -> Vec<Entry> {
        let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
        move |dir: &Path| {
            paths
                .iter()
                .filter(|p| p.parent() == Some(dir))
                .map(|p| {
                    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                    let name = name.unwrap_or_default();
                    let kind = if name.starts_with('@') {
                        Kind::Symlink
                    } else if name.contains('.') && !name.starts_with('.') {
                        Kind::File
                    } else {
                        Kind::Dir
                    };
                    Entry {
                        path: p.clone(),
                        kind,
                    }
                })
                .collect()
        }
    }

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_folder_without_exclusions_is_granted_whole() {
        let fs = tree(&["/p", "/p/a"]);
        assert_eq!(cover(Path::new("/p"), &paths(&["/q"]), &fs), paths(&["/p"]));
        // `/pq` is not inside `/p`.
        assert_eq!(
            cover(Path::new("/p"), &paths(&["/pq/x"]), &fs),
            paths(&["/p"])
        );
    }

    #[test]
    fn an_excluded_path_is_left_out_by_granting_its_siblings_down_the_way() {
        let fs = tree(&[
            "/tmp",
            "/tmp/other",
            "/tmp/x",
            "/tmp/x/allowed",
            "/tmp/x/allowed/home",
            "/tmp/x/allowed/home/config.json",
            "/tmp/x/allowed/project",
            "/tmp/x/allowed/notes.txt",
            "/tmp/x/allowed/@link-to-home",
            "/tmp/x/outside",
        ]);
        let mut got = cover(
            Path::new("/tmp/x/allowed"),
            &paths(&["/tmp/x/allowed/home"]),
            &fs,
        );
        got.sort();
        assert_eq!(
            got,
            paths(&["/tmp/x/allowed/notes.txt", "/tmp/x/allowed/project"]),
            "siblings only; the link is not followed"
        );
        let mut got = cover(Path::new("/tmp"), &paths(&["/tmp/x/allowed/home"]), &fs);
        got.sort();
        assert_eq!(
            got,
            paths(&[
                "/tmp/other",
                "/tmp/x/allowed/notes.txt",
                "/tmp/x/allowed/project",
                "/tmp/x/outside",
            ])
        );
    }

    #[test]
    fn a_root_inside_an_excluded_path_is_dropped() {
        let fs = tree(&["/h", "/h/.aai", "/h/.aai/work"]);
        assert!(cover(Path::new("/h/.aai/work"), &paths(&["/h/.aai"]), &fs).is_empty());
        assert!(cover(Path::new("/h/.aai"), &paths(&["/h/.aai"]), &fs).is_empty());
    }

    #[test]
    fn the_secrets_are_the_named_ones_and_every_key_file() {
        let fs = tree(&[
            "/h",
            "/h/run",
            "/h/run/token.txt",
            "/h/config.json",
            "/h/ca.key",
            "/h/ca.pem",
            "/h/app",
            "/h/app/deep",
            "/h/app/deep/signing.key",
        ]);
        let mut found = secrets(Path::new("/h"), &fs);
        found.sort();
        let mut want = paths(&["/h/app/deep/signing.key", "/h/ca.key"]);
        want.extend(SECRETS.iter().map(|s| Path::new("/h").join(s)));
        want.sort();
        assert_eq!(found, want);
    }

    #[test]
    fn the_plan_keeps_the_home_read_only_and_its_secrets_unreadable() {
        let fs = tree(&[
            "/etc",
            "/usr",
            "/w",
            "/w/allowed",
            "/w/allowed/src",
            "/w/allowed/home",
            "/w/allowed/home/config.json",
            "/w/allowed/home/logs",
            "/w/allowed/home/run",
            "/w/allowed/home/run/task-1.mcp.json",
            "/w/allowed/home/run/token.txt",
            "/w/allowed/home/tokens",
            "/w/allowed/home/data.db",
        ]);
        let profile = Profile {
            write: paths(&["/w/allowed", "/w/allowed/home/logs"]),
            home: "/w/allowed/home".into(),
            read: paths(&["/w/allowed/home/run/task-1.mcp.json"]),
            ..Profile::default()
        };
        let plan = profile.plan(&fs, false);
        // Nothing under the home is writable, even a folder named as allowed.
        assert_eq!(plan.write, paths(&["/w/allowed/src"]));
        let mut read = plan.read.clone();
        read.sort();
        // The secrets never; the one file named readable, by a rule of its own.
        assert_eq!(
            read,
            paths(&[
                "/etc",
                "/usr",
                "/w/allowed/home/config.json",
                "/w/allowed/home/logs",
                "/w/allowed/home/run/task-1.mcp.json",
                "/w/allowed/src",
            ])
        );
    }

    #[test]
    fn a_temporary_folder_holding_the_home_needs_a_private_one() {
        let temp = tempfile::tempdir().expect("dir");
        let home = temp.path().join("home");
        let profile = Profile {
            temp: Some(temp.path().to_path_buf()),
            home: home.clone(),
            ..Profile::default()
        };
        assert!(profile.needs_private_temp());
        let elsewhere = Profile {
            temp: Some(temp.path().join("t")),
            home,
            ..Profile::default()
        };
        assert!(!elsewhere.needs_private_temp());
    }
}
