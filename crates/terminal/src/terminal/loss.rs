//! What a deletion or overwrite in the box would lose, looked up on disk before it runs.
//!
//! Inside the box a command can change only the allowed folders (and its private temporary
//! folder), so its deletions are rated by what they would take from there:
//! - nothing there, a link, what lies outside the allowed folders (the box cannot change it),
//!   files git ignores and known build outputs (`target/`, `node_modules/`, caches) → low;
//! - tracked files without uncommitted changes, a branch (its commits stay in the reflog)
//!   → medium: git brings them back;
//! - untracked files git does not ignore, uncommitted changes, a repository's `.git`, an
//!   allowed folder itself, or what cannot be told before it runs (names computed at run
//!   time, a relative name after a `cd`, a name an earlier command may make) → high, asked
//!   with what would be lost: counts, sizes and a few names.
//!
//! Git is asked through [`Scene::git`]: the terminal runs it in the same box as the command
//! (a repository the agent wrote can name filters, a file-system monitor or hooks that run
//! code when git looks at it), with no network and a time limit; hooks, the file-system
//! monitor, submodules and optional locks are off in any case. A look that fails or runs
//! over is taken as "cannot tell" — high.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use aai_descriptor::Risk;

use aai_classify::{Classified, FANOUT, LossKind, UNKNOWN};

/// Folder and file names that hold what a build or a tool makes again.
const REBUILT: &[&str] = &[
    "target",
    "node_modules",
    "dist",
    "build",
    "out",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    ".cache",
    ".gradle",
    ".next",
    ".nuxt",
    ".parcel-cache",
    ".turbo",
    "coverage",
    "htmlcov",
    ".coverage",
    "_build",
    "cmake-build-debug",
    "cmake-build-release",
    ".eggs",
    ".DS_Store",
];

/// File name patterns of build outputs (`find -name …`, `rm *.pyc`).
const REBUILT_FILES: &[&str] = &[
    "*.pyc",
    "*.pyo",
    "*.o",
    "*.obj",
    "*.class",
    "*.a",
    "*.so",
    "*.d",
    "*.rlib",
    "*.rmeta",
    "*.egg-info",
    "*.log",
    "*.tmp",
    "__pycache__",
    ".DS_Store",
];

/// Entries walked at most when counting what a folder holds.
const WALK_LIMIT: usize = 20_000;

/// Runs git with these arguments (after `git`) in a folder; what it printed, or `None` when
/// it failed, ran over its time or could not start.
pub type Git<'a> = &'a dyn Fn(&Path, &[String], std::time::Duration) -> Option<Vec<u8>>;

/// Where the command runs and what it may change.
pub struct Scene<'a> {
    /// The folder relative names start from (the session's, or `working_dir`).
    pub cwd: &'a Path,
    /// The folders the box may write (resolved).
    pub allowed: &'a [PathBuf],
    /// The user's home (`~`).
    pub home: &'a Path,
    /// How git is run (see the module's text).
    pub git: Git<'a>,
    /// Looks at git left: each one starts a process, so a command naming many paths is judged
    /// "cannot tell" past them.
    pub looks: std::cell::Cell<usize>,
    /// When the judgement's time is up: later looks are "cannot tell".
    pub until: std::time::Instant,
}

/// Looks at git one judgement may take.
pub const MOST_LOOKS: usize = 8;

/// How long all the looks of one judgement may take.
pub const LOOK_FOR: std::time::Duration = std::time::Duration::from_secs(3);

/// The arguments before every git look: nothing of the repository's that runs code or
/// writes, besides what only the box may run.
pub fn git_args(dir: &Path, args: &[String]) -> Vec<String> {
    let mut all: Vec<String> = [
        "--no-optional-locks",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.untrackedCache=false",
        "-c",
        "diff.external=",
        "-c",
        "protocol.allow=never",
        "-C",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    all.push(dir.display().to_string());
    all.extend(args.iter().cloned());
    all
}

/// The environment git looks run with: no prompt, no pager, no repository named by the
/// gateway's own environment.
pub const GIT_ENV: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_PAGER", "cat"),
    ("GIT_OPTIONAL_LOCKS", "0"),
];

/// Runs `command` (its output read whole) for at most `limit`; `None` when it failed or ran
/// over (it is ended then).
pub fn run_for(mut command: Command, limit: std::time::Duration) -> Option<Vec<u8>> {
    use std::io::Read as _;
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
    ] {
        command.env_remove(var);
    }
    for (var, value) in GIT_ENV {
        command.env(var, value);
    }
    let mut child = command.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let read = stdout.read_to_end(&mut out).map(|_| out);
        let _ = tx.send(read);
    });
    let deadline = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                return rx
                    .recv_timeout(left.max(std::time::Duration::from_millis(100)))
                    .ok()?
                    .ok();
            }
            Ok(Some(_)) => return None,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            _ => {
                #[cfg(target_os = "linux")]
                aai_contain::procs::terminate(child.id());
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Git run here, directly (tests, and where the caller has made sure the repository is not
/// the agent's to configure).
pub fn direct_git(dir: &Path, args: &[String], limit: std::time::Duration) -> Option<Vec<u8>> {
    let mut command = Command::new("git");
    command.args(git_args(dir, args));
    run_for(command, limit)
}

/// The verdict on what a command would lose: its risk and, from medium up, what and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub risk: Risk,
    pub why: Option<String>,
}

/// Rates the deletions of `classified` in `scene`; `None` when it deletes nothing.
pub fn judge(classified: &Classified, scene: &Scene<'_>) -> Option<Verdict> {
    if classified.losses.is_empty() {
        return None;
    }
    let mut worst = Risk::Low;
    let mut said: Vec<String> = Vec::new();
    let deletes = classified
        .losses
        .iter()
        .any(|l| !matches!(l.kind, LossKind::Moved(_) | LossKind::Overwritten(_)));
    for loss in &classified.losses {
        if matches!(loss.kind, LossKind::Moved(_)) && !deletes {
            continue;
        }
        let (risk, what) = rate(&loss.kind, classified, scene);
        if risk > Risk::Low {
            said.push(format!("{}: {what}", loss.reason));
        }
        worst = worst.max(risk);
    }
    said.dedup();
    Some(Verdict {
        risk: worst,
        why: (!said.is_empty()).then(|| said.join("; ")),
    })
}

fn rate(kind: &LossKind, classified: &Classified, scene: &Scene<'_>) -> (Risk, String) {
    match kind {
        LossKind::Unknown => (
            Risk::High,
            "what it deletes is only known when it runs".to_owned(),
        ),
        LossKind::GitBranch => (
            Risk::Medium,
            "the branch's commits stay in the reflog (`git reflog`) for a while".to_owned(),
        ),
        // A folder moved onto is moved into: nothing in it is replaced.
        LossKind::Overwritten(paths) if paths.iter().all(|p| resolve(p, scene).is_dir()) => {
            (Risk::Low, "moved into a folder".to_owned())
        }
        // Nothing is replaced where nothing is (what an earlier command made there is new).
        LossKind::Overwritten(paths)
            if paths
                .iter()
                .all(|p| std::fs::symlink_metadata(resolve(p, scene)).is_err()) =>
        {
            (Risk::Low, "moved to a new name".to_owned())
        }
        LossKind::Paths(paths) | LossKind::Moved(paths) | LossKind::Overwritten(paths) => {
            worst(paths.iter().map(|p| path(p, false, classified, scene)))
        }
        // Content destroyed in place goes through a link to the file it names.
        LossKind::Written(paths) => worst(paths.iter().map(|p| path(p, true, classified, scene))),
        LossKind::Found { roots, names } => {
            if !names.is_empty() && names.iter().all(|n| REBUILT_FILES.contains(&n.as_str())) {
                return (Risk::Low, format!("build outputs ({})", names.join(", ")));
            }
            worst(roots.iter().map(|r| path(r, false, classified, scene)))
        }
        LossKind::GitClean {
            dir,
            ignored_only,
            paths,
        } => {
            if *ignored_only {
                return (Risk::Low, "only files git ignores".to_owned());
            }
            let Some(dir) = git_dir(dir.as_deref(), classified, scene) else {
                return uncertain_dir();
            };
            let mut paths = paths.clone();
            if paths.is_empty() {
                paths.push(".".to_owned());
            }
            let files = git_status(scene, &dir, &paths, true);
            match files {
                None => (Risk::High, "not a git repository here".to_owned()),
                Some(status) => {
                    let untracked: Vec<&Entry> = status.iter().filter(|e| e.code == "??").collect();
                    if untracked.is_empty() {
                        (
                            Risk::Low,
                            "no untracked files git does not ignore".to_owned(),
                        )
                    } else {
                        (Risk::High, describe("untracked files", &untracked, &dir))
                    }
                }
            }
        }
        LossKind::GitDiscard { dir } => {
            let Some(dir) = git_dir(dir.as_deref(), classified, scene) else {
                return uncertain_dir();
            };
            match git_status(scene, &dir, &[".".to_owned()], false) {
                None => (Risk::High, "not a git repository here".to_owned()),
                Some(status) => {
                    let changed: Vec<&Entry> = status.iter().filter(|e| e.code != "??").collect();
                    if changed.is_empty() {
                        (Risk::Low, "no uncommitted changes".to_owned())
                    } else {
                        (
                            Risk::High,
                            describe("uncommitted changes in", &changed, &dir),
                        )
                    }
                }
            }
        }
    }
}

fn uncertain_dir() -> (Risk, String) {
    (
        Risk::High,
        "the folder it works in is only known when it runs".to_owned(),
    )
}

fn worst(rated: impl Iterator<Item = (Risk, String)>) -> (Risk, String) {
    let mut all: Vec<(Risk, String)> = rated.collect();
    all.sort_by_key(|r| std::cmp::Reverse(r.0));
    let top = all.first().map_or(Risk::Low, |r| r.0);
    let said: Vec<String> = all
        .into_iter()
        .filter(|(risk, _)| *risk == top)
        .map(|(_, what)| what)
        .collect();
    (top, said.join("; "))
}

/// The folder git runs in: `-C dir` from the working folder, or the working folder.
fn git_dir(dir: Option<&str>, classified: &Classified, scene: &Scene<'_>) -> Option<PathBuf> {
    if classified.moves && dir.is_none_or(|d| !Path::new(d).is_absolute()) {
        return None;
    }
    match dir {
        Some(d) if d.contains([UNKNOWN, FANOUT]) => None,
        Some(d) => Some(resolve(d, scene)),
        None => Some(scene.cwd.to_path_buf()),
    }
}

/// `word` as a path: `~` expanded, relative to the working folder.
fn resolve(word: &str, scene: &Scene<'_>) -> PathBuf {
    let expanded = if word == "~" {
        scene.home.to_path_buf()
    } else if let Some(rest) = word.strip_prefix("~/") {
        scene.home.join(rest)
    } else {
        PathBuf::from(word)
    };
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        scene.cwd.join(expanded)
    };
    lexical(&joined)
}

/// `..` and `.` taken out without following links.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn path(word: &str, follow: bool, classified: &Classified, scene: &Scene<'_>) -> (Risk, String) {
    if word.contains([UNKNOWN, FANOUT]) {
        return (
            Risk::High,
            "names only known when it runs (a variable, xargs, find -exec, a program)".to_owned(),
        );
    }
    let relative = !word.starts_with('/') && !word.starts_with('~');
    if relative && classified.moves {
        return (
            Risk::High,
            format!("{word:?} is relative to a folder only known when it runs (after a cd)"),
        );
    }
    if word.contains(['*', '?', '[']) {
        return glob(word, follow, classified, scene);
    }
    let full = resolve(word, scene);
    one(&full, word, follow, classified, scene)
}

/// A path with a wildcard in its last part: each match (a wildcard further up is not judged).
fn glob(word: &str, follow: bool, classified: &Classified, scene: &Scene<'_>) -> (Risk, String) {
    let full = resolve(word, scene);
    let (Some(parent), Some(pattern)) = (full.parent(), full.file_name()) else {
        return (Risk::High, format!("{word:?} matches what cannot be told"));
    };
    let pattern = pattern.to_string_lossy().into_owned();
    if parent.to_string_lossy().contains(['*', '?', '[']) {
        return (Risk::High, format!("{word:?} matches what cannot be told"));
    }
    if REBUILT_FILES.contains(&pattern.as_str()) {
        return (Risk::Low, format!("build outputs ({pattern})"));
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return (Risk::Low, format!("{word:?} matches nothing"));
    };
    let matched: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                // Like the shell: a leading dot is matched only by a pattern that has one.
                (pattern.starts_with('.') || !n.starts_with('.')) && wildcard(&pattern, &n)
            })
        })
        .take(1000)
        .collect();
    // `dir/*/` names what each match points at, links included.
    let slash = if word.ends_with('/') { "/" } else { "" };
    worst(matched.iter().map(|p| {
        one(
            p,
            &format!("{}{slash}", p.to_string_lossy()),
            follow,
            classified,
            scene,
        )
    }))
}

/// Whether `name` matches the shell pattern `pattern` (`*`, `?`; a `[…]` class matches any one
/// character, which only widens what is judged).
fn wildcard(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some('['), Some(_)) => match p.iter().position(|c| *c == ']') {
                Some(end) => go(&p[end + 1..], &n[1..]),
                None => false,
            },
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

/// What deleting the one path `full` (written `word`) would lose.
fn one(
    full: &Path,
    word: &str,
    follow: bool,
    classified: &Classified,
    scene: &Scene<'_>,
) -> (Risk, String) {
    let Ok(meta) = std::fs::symlink_metadata(full) else {
        return if classified.commands > 1 {
            (
                Risk::High,
                format!("{word:?} does not exist yet: the commands before it may make it"),
            )
        } else {
            (Risk::Low, format!("{word:?} does not exist"))
        };
    };
    if meta.file_type().is_symlink() && !word.ends_with('/') && !follow {
        return (
            Risk::Low,
            format!("{word:?} is a link (only the link goes)"),
        );
    }
    let Ok(real) = full.canonicalize() else {
        return (Risk::High, format!("{word:?} cannot be resolved"));
    };
    if let Some(folder) = scene
        .allowed
        .iter()
        .find(|a| a.starts_with(&real) || real == **a)
    {
        return (
            Risk::High,
            format!(
                "{word:?} is the allowed folder {} itself or holds it",
                folder.display()
            ),
        );
    }
    let Some(root) = scene.allowed.iter().find(|a| real.starts_with(a)) else {
        return (
            Risk::Low,
            format!("{word:?} is outside the allowed folders: the sandbox cannot change it"),
        );
    };
    let inside = real.strip_prefix(root).unwrap_or(&real);
    if inside.components().any(|c| c.as_os_str() == ".git") {
        return (
            Risk::High,
            format!("{word:?} is (in) a repository's .git: its history"),
        );
    }
    if meta.is_dir() && holds_git(&real) {
        return (
            Risk::High,
            format!("{word:?} holds a repository's .git: its history"),
        );
    }
    let rebuilt = inside
        .components()
        .any(|c| REBUILT.contains(&c.as_os_str().to_string_lossy().as_ref()));
    let parent = if meta.is_dir() {
        real.clone()
    } else {
        real.parent()
            .map_or_else(|| real.clone(), Path::to_path_buf)
    };
    if !in_repository(&parent) {
        let (files, bytes, names) = count(&real);
        return if rebuilt {
            (Risk::Low, format!("{word:?} is a build output"))
        } else if files == 0 && meta.is_dir() {
            (Risk::Low, format!("{word:?} is an empty folder"))
        } else {
            (
                Risk::High,
                format!(
                    "{files} file(s), {} not in a git repository, which nothing brings back: {}",
                    size(bytes),
                    names.join(", ")
                ),
            )
        };
    }
    let Some(status) = git_status(scene, &parent, &[real.to_string_lossy().into_owned()], true)
    else {
        return (
            Risk::High,
            format!("{word:?}: git could not tell what it holds in time"),
        );
    };
    let lost: Vec<&Entry> = status.iter().filter(|e| e.code != "!!").collect();
    let changed = lost.iter().any(|e| e.code != "??");
    if rebuilt && !changed {
        // A build output's new files are made again; tracked files in it are not lost
        // unless changed (then they are judged as any changed file).
        return (Risk::Low, format!("{word:?} is a build output"));
    }
    if lost.is_empty() {
        if status.is_empty() && !tracked(scene, &parent, &real) {
            (
                Risk::Low,
                format!("{word:?} holds nothing git does not ignore"),
            )
        } else if status.is_empty() {
            (
                Risk::Medium,
                format!("{word:?} is tracked and unchanged: git can bring it back"),
            )
        } else {
            (Risk::Low, format!("{word:?} holds only files git ignores"))
        }
    } else {
        (Risk::High, describe("", &lost, &parent))
    }
}

/// Whether `dir` lies in a git work tree (a `.git` in it or above it).
fn in_repository(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

/// Whether a folder holds a `.git` below it (a repository of its own).
fn holds_git(dir: &Path) -> bool {
    walkdir::WalkDir::new(dir)
        .max_depth(6)
        .into_iter()
        .take(WALK_LIMIT)
        .flatten()
        .any(|e| e.depth() > 0 && e.file_name() == ".git")
}

/// Files, bytes and the first few names under `path`.
fn count(path: &Path) -> (usize, u64, Vec<String>) {
    let mut files = 0;
    let mut bytes = 0;
    let mut names = Vec::new();
    for entry in walkdir::WalkDir::new(path)
        .into_iter()
        .take(WALK_LIMIT)
        .flatten()
    {
        if entry.file_type().is_file() {
            files += 1;
            bytes += entry.metadata().map_or(0, |m| m.len());
            if names.len() < 5 {
                names.push(entry.path().display().to_string());
            }
        }
    }
    (files, bytes, names)
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

/// One line of `git status --porcelain`.
struct Entry {
    code: String,
    path: String,
}

/// What would be lost, in words: counts, sizes and a few names.
fn describe(what: &str, entries: &[&Entry], dir: &Path) -> String {
    let untracked = entries.iter().filter(|e| e.code == "??").count();
    let changed = entries.len() - untracked;
    let bytes: u64 = entries
        .iter()
        .filter_map(|e| std::fs::metadata(dir.join(&e.path)).ok())
        .map(|m| m.len())
        .sum();
    let mut names: Vec<&str> = entries.iter().take(5).map(|e| e.path.as_str()).collect();
    if entries.len() > 5 {
        names.push("…");
    }
    let mut parts = Vec::new();
    if untracked > 0 {
        parts.push(format!("{untracked} untracked file(s)"));
    }
    if changed > 0 {
        parts.push(format!("{changed} file(s) with uncommitted changes"));
    }
    let lead = if what.is_empty() {
        String::new()
    } else {
        format!("{what} ")
    };
    format!(
        "{lead}{} ({}) that git cannot bring back: {}",
        parts.join(" and "),
        size(bytes),
        names.join(", ")
    )
}

/// `git status` of `paths` in `dir` (untracked files one by one, ignored ones too when
/// `ignored`); `None` outside a repository, when git cannot tell, or past [`MOST_LOOKS`].
fn git_status(
    scene: &Scene<'_>,
    dir: &Path,
    paths: &[String],
    ignored: bool,
) -> Option<Vec<Entry>> {
    let mut args: Vec<String> = [
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=all",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if ignored {
        args.push("--ignored=matching".to_owned());
    }
    args.push("--".to_owned());
    args.extend(paths.iter().cloned());
    let stdout = look(scene, dir, &args)?;
    let text = String::from_utf8_lossy(&stdout);
    let mut entries = Vec::new();
    let mut parts = text.split('\0');
    while let Some(line) = parts.next() {
        if line.len() < 4 {
            continue;
        }
        let (code, path) = (line[..2].to_owned(), line[3..].to_owned());
        // A rename's line is followed by its origin.
        if code.starts_with('R') || code.starts_with('C') {
            parts.next();
        }
        entries.push(Entry { code, path });
    }
    Some(entries)
}

/// One look at git, counted against [`MOST_LOOKS`].
fn look(scene: &Scene<'_>, dir: &Path, args: &[String]) -> Option<Vec<u8>> {
    let left = scene.looks.get();
    let time = scene
        .until
        .saturating_duration_since(std::time::Instant::now());
    if left == 0 || time.is_zero() {
        return None;
    }
    scene.looks.set(left - 1);
    (scene.git)(dir, args, time)
}

/// Whether git tracks anything at or under `path` (unknown counts as tracked).
fn tracked(scene: &Scene<'_>, dir: &Path, path: &Path) -> bool {
    let args = vec![
        "ls-files".to_owned(),
        "-z".to_owned(),
        "--".to_owned(),
        path.display().to_string(),
    ];
    look(scene, dir, &args).is_none_or(|out| !out.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aai_classify::classify_losses;

    /// A project under an allowed folder: `src/main.rs` tracked and clean, `src/lib.rs`
    /// tracked and changed, `notes.txt` untracked, `target/` ignored, a branch `topic`.
    fn project() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical").join("proj");
        std::fs::create_dir_all(root.join("src")).expect("src");
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .current_dir(&root)
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "init.defaultBranch=main",
                ])
                .args(args)
                .output()
                .expect("git");
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q"]);
        std::fs::write(root.join(".gitignore"), "target/\n*.pyc\n").expect("ignore");
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").expect("main");
        std::fs::write(root.join("src/lib.rs"), "pub fn a() {}\n").expect("lib");
        git(&["add", "."]);
        git(&["commit", "-qm", "first"]);
        git(&["branch", "topic"]);
        std::fs::write(root.join("src/lib.rs"), "pub fn b() {}\n").expect("change");
        std::fs::write(root.join("notes.txt"), "my notes\n").expect("notes");
        std::fs::create_dir_all(root.join("target/debug")).expect("target");
        std::fs::write(root.join("target/debug/app"), "binary").expect("app");
        std::fs::write(root.join("src/x.pyc"), "c").expect("pyc");
        (dir, root)
    }

    fn rated(root: &Path, command: &str) -> Verdict {
        let allowed = vec![root.to_path_buf()];
        judge(
            &classify_losses(command),
            &Scene {
                cwd: root,
                allowed: &allowed,
                home: Path::new("/nonexistent-home"),
                git: &direct_git,
                looks: std::cell::Cell::new(MOST_LOOKS),
                until: std::time::Instant::now() + LOOK_FOR,
            },
        )
        .unwrap_or_else(|| panic!("{command}: no deletion found"))
    }

    #[test]
    fn deletions_are_rated_by_what_they_lose() {
        let (_dir, root) = project();
        for (command, risk) in [
            ("rm -rf target/", Risk::Low),
            ("rm -rf target", Risk::Low),
            ("rm -rf node_modules dist", Risk::Low),
            ("find . -name '*.pyc' -delete", Risk::Low),
            ("rm src/x.pyc", Risk::Low),
            ("git clean -fdX", Risk::Low),
            ("git clean -fdxq -- target", Risk::Low),
            ("rm src/main.rs", Risk::Medium),
            ("git branch -D topic", Risk::Medium),
            ("rm notes.txt", Risk::High),
            ("rm -f src/lib.rs", Risk::High),
            ("rm -rf src", Risk::High),
            ("rm -rf .git", Risk::High),
            ("rm -rf .", Risk::High),
            ("rm -rf ./*", Risk::High),
            ("rm -rf *.txt", Risk::High),
            ("git clean -fd", Risk::High),
            ("git reset --hard", Risk::High),
            ("git checkout -- .", Risk::High),
            ("find . -name '*.rs' -delete", Risk::High),
            ("find . -name '*.pyc' -exec rm {} +", Risk::High),
            ("cd src && rm -rf lib.rs", Risk::High),
            ("rm -rf \"$DIR\"", Risk::High),
            ("mv notes.txt target/ && rm -rf target", Risk::High),
            ("mv src/main.rs notes.txt", Risk::High),
            ("rsync -a --delete /tmp/empty/ src/", Risk::High),
            (
                "python3 -c 'import shutil; shutil.rmtree(\"src\")'",
                Risk::High,
            ),
            // Git's other ways to lose work, and git told to do something else.
            ("git -c 'alias.x=!rm -rf .git' x", Risk::High),
            ("git -c clean.requireForce=false clean -dx", Risk::High),
            ("git rm -rf .", Risk::High),
            ("git checkout -- src", Risk::High),
            ("git restore src/lib.rs", Risk::High),
            ("git switch -f topic", Risk::High),
            ("git stash drop", Risk::High),
            ("git update-index --assume-unchanged src/lib.rs", Risk::High),
            ("git reflog expire --expire=now --all", Risk::High),
            ("GIT_DIR=../other/.git git reset --hard", Risk::High),
            ("git --git-dir=../other/.git reset --hard", Risk::High),
            // find: a test after -delete does not narrow it; start points after -P do count.
            ("find . -delete -name '*.o'", Risk::High),
            ("find . -name '*.pyc' , -delete", Risk::High),
            ("find -P . -name '*.pyc' -delete", Risk::Low),
            // env -C runs elsewhere: relative names cannot be told.
            ("env -C src rm -f lib.rs", Risk::High),
        ] {
            let verdict = rated(&root, command);
            assert_eq!(verdict.risk, risk, "{command}: {verdict:?}");
            if risk == Risk::High {
                assert!(verdict.why.is_some(), "{command}: a high rating says why");
            }
        }
        // The question names what would be lost.
        let why = rated(&root, "git clean -fd").why.expect("why");
        assert!(
            why.contains("notes.txt") && why.contains("1 untracked"),
            "{why}"
        );
        let why = rated(&root, "git reset --hard").why.expect("why");
        assert!(why.contains("src/lib.rs"), "{why}");
        // A rename to a new name, or into a folder, replaces nothing.
        assert_eq!(rated(&root, "mv src/main.rs src/app.rs").risk, Risk::Low);
        assert_eq!(rated(&root, "mv notes.txt src").risk, Risk::Low);
    }

    #[test]
    fn what_lies_outside_the_allowed_folders_is_out_of_the_box_reach() {
        let (_dir, root) = project();
        let other = tempfile::tempdir().expect("other");
        let outside = other.path().join("keep.txt");
        std::fs::write(&outside, "x").expect("keep");
        let verdict = rated(&root, &format!("rm -rf {}", outside.display()));
        assert_eq!(verdict.risk, Risk::Low, "{verdict:?}");
        // A link inside to a folder outside: only the link goes, or (with a slash) the
        // folder it names, which the box cannot reach.
        std::os::unix::fs::symlink(other.path(), root.join("link")).expect("link");
        assert_eq!(rated(&root, "rm -rf link").risk, Risk::Low);
        // A link to the project's own sources is judged as the sources.
        std::os::unix::fs::symlink(root.join("src"), root.join("target/src-link")).expect("link");
        assert_eq!(rated(&root, "rm -rf target/src-link/").risk, Risk::High);
        // …by a wildcard ending in a slash too, and by what destroys content through a link.
        assert_eq!(rated(&root, "rm -rf target/*/").risk, Risk::High);
        std::os::unix::fs::symlink(root.join("notes.txt"), root.join("target/n")).expect("link");
        assert_eq!(rated(&root, "truncate -s 0 target/n").risk, Risk::High);
        assert_eq!(rated(&root, "shred target/n").risk, Risk::High);
    }

    #[test]
    fn clean_work_is_low_once_nothing_would_be_lost() {
        let (_dir, root) = project();
        std::fs::remove_file(root.join("notes.txt")).expect("rm");
        assert_eq!(rated(&root, "git clean -fd").risk, Risk::Low);
        Command::new("git")
            .current_dir(&root)
            .args(["checkout", "-q", "--", "src/lib.rs"])
            .status()
            .expect("git");
        assert_eq!(rated(&root, "git reset --hard").risk, Risk::Low);
    }

    #[test]
    fn outside_git_every_file_is_the_only_copy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join("docs")).expect("docs");
        std::fs::write(root.join("docs/a.md"), "a").expect("a");
        let verdict = rated(&root, "rm -r docs");
        assert_eq!(verdict.risk, Risk::High);
        assert!(verdict.why.expect("why").contains("a.md"));
        std::fs::create_dir_all(root.join("build/obj")).expect("build");
        assert_eq!(rated(&root, "rm -rf build").risk, Risk::Low);
    }
}
