//! Deletions and overwrites, kept apart from the rest of what is critical: inside the box a
//! command can only change the allowed folders and its own temporary folder, so what such a
//! command would destroy is judged by what would be lost there (`terminal::loss`), not by
//! its shape. Outside the box (no sandbox, `outside_sandbox`) they stay critical.
//!
//! The rules report a loss through [`lost`] (critical unless a [`collect`] is running, which
//! takes it instead) or [`noted`] (a plain deletion, only of interest to a collection).

use std::cell::RefCell;

/// What a command would destroy, as far as its words say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LossKind {
    /// These paths (as written: relative to the working folder, `~`, wildcards, or names
    /// only known when it runs) are deleted or overwritten.
    Paths(Vec<String>),
    /// Files whose content is destroyed in place (`truncate`, `shred`): through a link, the
    /// file it points at.
    Written(Vec<String>),
    /// A file another is moved onto (`mv a b`, `b` replaced when it is a file).
    Overwritten(Vec<String>),
    /// Files moved away (`mv`): judged only beside a deletion in the same script, which may
    /// take them where they were moved (`mv notes.txt target/ && rm -rf target`).
    Moved(Vec<String>),
    /// `find ROOTS … -delete`: what the name patterns match under the roots.
    Found {
        roots: Vec<String>,
        names: Vec<String>,
    },
    /// `git clean`: untracked files (ignored ones only with `-X`, both with `-x`).
    GitClean {
        dir: Option<String>,
        ignored_only: bool,
        paths: Vec<String>,
    },
    /// `git reset --hard`, `git checkout -- .`, `git restore .`: uncommitted changes.
    GitDiscard { dir: Option<String> },
    /// `git branch -D`: the branch's commits, which stay in the reflog.
    GitBranch,
    /// What it deletes is computed when it runs (a program's own deletion, `git stash clear`).
    Unknown,
}

/// One deletion or overwrite found in a command, and why it was noticed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    pub reason: String,
    pub kind: LossKind,
}

thread_local! {
    static FOUND: RefCell<Option<Vec<Loss>>> = const { RefCell::new(None) };
}

/// A deletion the rules find critical on its own: `Some(reason)` (critical) unless a
/// collection runs, which takes it instead.
pub(super) fn lost(reason: impl Into<String>, kind: LossKind) -> Option<String> {
    let reason = reason.into();
    FOUND.with(|found| match found.borrow_mut().as_mut() {
        Some(found) => {
            found.push(Loss { reason, kind });
            None
        }
        None => Some(reason),
    })
}

/// A deletion that is not critical by its shape (`rm notes.txt`): only a collection sees it.
pub(super) fn noted(reason: impl Into<String>, kind: LossKind) {
    FOUND.with(|found| {
        if let Some(found) = found.borrow_mut().as_mut() {
            found.push(Loss {
                reason: reason.into(),
                kind,
            });
        }
    });
}

/// Runs `judge` with deletions collected instead of reported as critical: what else it finds
/// critical, and the deletions.
pub(super) fn collect<T>(judge: impl FnOnce() -> T) -> (T, Vec<Loss>) {
    struct Reset(Option<Vec<Loss>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let outer = self.0.take();
            FOUND.with(|found| *found.borrow_mut() = outer);
        }
    }
    let outer = FOUND.with(|found| found.borrow_mut().replace(Vec::new()));
    let reset = Reset(outer);
    let verdict = judge();
    let losses = FOUND
        .with(|found| found.borrow_mut().take())
        .unwrap_or_default();
    drop(reset);
    (verdict, losses)
}
