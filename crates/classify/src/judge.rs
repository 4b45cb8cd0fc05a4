//! The verdict on one simple command: its words (after wrappers such as `sudo`, `env` and
//! `timeout` are taken off) against what is known to delete, overwrite, leak or fetch.

use super::losses::{LossKind, lost, noted};
use super::*;

/// Returns the reason from the enclosing rule when `$found` is one.
macro_rules! critical {
    ($found:expr) => {
        if let Some(reason) = $found {
            return Some(reason);
        }
    };
}

/// The rules, on one command's words.
pub(super) fn judge(
    words: &[String],
    vars: &mut HashMap<String, String>,
    depth: usize,
) -> Option<String> {
    let name = base(words.first()?);
    let args = &words[1..];
    let flags = |short: &[char], long: &[&str]| {
        args.iter().any(|a| {
            long.contains(&a.as_str())
                || (a.starts_with('-')
                    && !a.starts_with("--")
                    && a[1..].chars().any(|c| short.contains(&c)))
        })
    };
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let targets = operands(args);
    let dangerous_target = || targets.iter().any(|t| deletes_dangerously(t));
    match name.as_str() {
        "sudo" | "su" | "doas" | "pkexec" | "run0" | "runas" => {
            return Some(format!("privilege escalation ({name})"));
        }
        "rm" | "unlink" => {
            let why = if name == "rm" && flags(&['r', 'R'], &["--recursive"]) {
                Some("recursive deletion (rm -r)".to_owned())
            } else {
                targets
                    .iter()
                    .find_map(|t| dangerous_deletion(t))
                    .map(|what| format!("{what} ({name})"))
            };
            let paths = LossKind::Paths(owned(&targets));
            match why {
                Some(why) => critical!(lost(why, paths)),
                None => noted(format!("deletion ({name})"), paths),
            }
        }
        "rmdir" if flags(&['p'], &["--parents"]) => {
            critical!(lost(
                "recursive deletion (rmdir -p)",
                LossKind::Paths(owned(&targets)),
            ));
        }
        "truncate"
            if shrinks(args)
                || args
                    .iter()
                    .any(|a| a.starts_with("-s") || a.starts_with("--size")) =>
        {
            let paths = LossKind::Written(owned(&targets));
            if dangerous_target() {
                critical!(lost(
                    "truncating a protected file, a wildcard or names given at run time (truncate)",
                    paths,
                ));
            } else {
                noted("truncation (truncate)", paths);
            }
        }
        "mv" if targets.len() >= 2 => {
            let (sources, destination) = targets.split_at(targets.len() - 1);
            if destination[0].as_str() == "/dev/null" {
                critical!(lost(
                    "deletion by moving into /dev/null (mv)",
                    LossKind::Paths(owned(sources)),
                ));
            } else if sources.iter().any(|s| deletes_dangerously(s)) {
                critical!(lost(
                    "moving away a protected path or a wildcard (mv)",
                    LossKind::Paths(owned(sources)),
                ));
            }
            noted("moving files (mv)", LossKind::Moved(owned(sources)));
            // A file moved onto another replaces it (into a folder, it lands inside).
            if targets.len() == 2 && !flags(&['n', 'b'], &["--no-clobber", "--backup"]) {
                noted(
                    "a file moved over another (mv)",
                    LossKind::Overwritten(vec![destination[0].clone()]),
                );
            }
        }
        "cp" | "install" | "ln" => {
            let target_dir = args
                .iter()
                .position(|a| a == "-t" || a == "--target-directory")
                .and_then(|at| args.get(at + 1));
            let valued = [
                "-t", "-S", "-m", "-o", "-g", "--suffix", "--mode", "--owner", "--group",
            ];
            let operands: Vec<&String> = args
                .iter()
                .enumerate()
                .filter(|(at, a)| {
                    let option_value = *at > 0 && valued.contains(&args[at - 1].as_str());
                    !a.starts_with('-') && !option_value
                })
                .map(|(_, a)| a)
                .collect();
            let destination = target_dir.or(if operands.len() >= 2 {
                operands.last().copied()
            } else {
                None
            });
            if destination.is_some_and(|d| is_protected(d)) {
                return Some(format!("overwriting a system or credential file ({name})"));
            }
        }
        "tee" if targets.iter().any(|t| is_protected(t)) => {
            return Some("overwriting a system or credential file (tee)".into());
        }
        "sed"
            if args.iter().any(|a| {
                a.starts_with("--in-place")
                    || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains('i'))
            }) && targets.iter().any(|t| is_protected(t)) =>
        {
            return Some("editing a system or credential file in place (sed -i)".into());
        }
        "rsync"
            if args.iter().any(|a| {
                a.starts_with("--delete")
                    || a == "--del"
                    || a == "--remove-source-files"
                    || a == "--remove-sent-files"
            }) =>
        {
            // What goes is in the destination (or, removing sources, in the sources); a
            // remote destination is not in the box at all.
            let remote = targets.iter().any(|t| t.contains(':'));
            let kind = match targets.split_last() {
                _ if remote => LossKind::Unknown,
                Some((destination, sources)) if args.iter().any(|a| a.starts_with("--del")) => {
                    let _ = sources;
                    LossKind::Paths(vec![(*destination).clone()])
                }
                _ => LossKind::Paths(owned(&targets)),
            };
            critical!(lost("mass deletion (rsync --delete)", kind));
        }
        "tar" if has("--remove-files") => {
            critical!(lost(
                "deleting the archived files (tar --remove-files)",
                LossKind::Paths(owned(&targets)),
            ));
        }
        "zip" if flags(&['m'], &["--move"]) => {
            critical!(lost(
                "deleting the archived files (zip -m)",
                LossKind::Paths(owned(&targets)),
            ));
        }
        "7z" | "7za" | "7zr" if has("-sdel") => {
            critical!(lost(
                "deleting the archived files (7z -sdel)",
                LossKind::Paths(owned(&targets)),
            ));
        }
        "find" | "fd" => {
            if name == "find" && has("-delete") {
                critical!(lost("mass deletion (find -delete)", found(args)));
            }
            if let Some(reason) = find_exec(&name, args, vars, depth) {
                return Some(reason);
            }
        }
        "chmod" | "chown" | "chgrp"
            if flags(&['R'], &["--recursive"])
                && args
                    .iter()
                    .any(|a| !a.starts_with('-') && is_root_target(a)) =>
        {
            return Some(format!(
                "a recursive permission or ownership change of a system or home root ({name} -R)"
            ));
        }
        "nc" | "ncat" | "netcat" if flags(&['e', 'c'], &["--exec", "--sh-exec", "--lua-exec"]) => {
            return Some(format!(
                "a shell served over the network ({name} -e, a reverse shell)"
            ));
        }
        "socat"
            if args.iter().any(|a| {
                let lower = a.to_ascii_lowercase();
                lower.contains("exec:") || lower.contains("system:")
            }) =>
        {
            return Some("a program served over the network (socat exec:, a reverse shell)".into());
        }
        "python" | "python3" | "perl" | "ruby" | "php" | "node"
            if args.iter().any(|a| {
                let code = a.to_ascii_lowercase();
                (code.contains("socket")
                    || code.contains("fsockopen")
                    || code.contains("net.socket"))
                    && [
                        "subprocess",
                        "pty",
                        "dup2",
                        "exec",
                        "spawn",
                        "/bin/sh",
                        "/bin/bash",
                        "popen",
                        "system(",
                    ]
                    .iter()
                    .any(|k| code.contains(k))
            }) =>
        {
            return Some(format!(
                "a network shell in a {name} one-liner (a reverse shell)"
            ));
        }
        "shred" | "wipe" | "srm" => {
            critical!(lost(
                format!("file destruction ({name})"),
                LossKind::Written(owned(&targets)),
            ));
        }
        "wipefs" | "mkswap" | "fdisk" | "sfdisk" | "cfdisk" | "parted" | "sgdisk" | "gdisk"
        | "mke2fs" | "blkdiscard" => {
            return Some(format!("disk, filesystem or file destruction ({name})"));
        }
        n if n.starts_with("mkfs") => return Some(format!("filesystem destruction ({name})")),
        "dd" => {
            for target in args.iter().filter_map(|a| a.strip_prefix("of=")) {
                if target.starts_with("/dev/") && target != "/dev/null" {
                    return Some("writing raw data to a device (dd of=/dev/…)".into());
                }
                if is_protected(target) {
                    return Some("overwriting a system or credential file (dd of=…)".into());
                }
            }
        }
        "git" => {
            if let Some(reason) = git(args) {
                return Some(reason);
            }
        }
        "alias" => {
            // An alias is code the shell runs when its name is typed.
            for value in args
                .iter()
                .filter_map(|a| a.split_once('=').map(|(_, v)| v))
            {
                if let Some(reason) = classify_depth(value, vars, depth + 1) {
                    return Some(reason);
                }
            }
        }
        _ => {}
    }
    // Scripts handed to a shell or eval are parsed in turn.
    let script_flag =
        |a: &String| a == "-c" || (a.starts_with('-') && !a.starts_with("--") && a.ends_with('c'));
    if is_shell(&name)
        && let Some(at) = args.iter().position(script_flag)
        && let Some(script) = args.get(at + 1)
        && let Some(reason) = classify_depth(script, vars, depth + 1)
    {
        return Some(reason);
    }
    if name == "eval" {
        let script = args.join(" ");
        if let Some(reason) = classify_depth(&script, vars, depth + 1) {
            return Some(reason);
        }
    }
    None
}

/// The operands as owned words.
fn owned(targets: &[&String]) -> Vec<String> {
    targets.iter().map(|t| (*t).clone()).collect()
}

/// `find`'s deletion: the start points (after its leading `-H`, `-L`, `-P`, `-D …`, `-O…`
/// options) before its first expression, and its name patterns — only when every test comes
/// before `-delete` (`find . -delete -name x` deletes everything it walks).
fn found(args: &[String]) -> LossKind {
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        match arg.as_str() {
            "-H" | "-L" | "-P" => at += 1,
            "-D" => at += 2,
            o if o.starts_with("-O") => at += 1,
            _ => break,
        }
    }
    let roots: Vec<String> = args[at.min(args.len())..]
        .iter()
        .take_while(|a| !a.starts_with('-') && !matches!(a.as_str(), "(" | "!" | ")" | ","))
        .cloned()
        .collect();
    let delete_at = args
        .iter()
        .position(|a| a == "-delete")
        .unwrap_or(args.len());
    let tests_after = args[delete_at..].iter().any(|a| {
        a.starts_with('-') && a != "-delete" || matches!(a.as_str(), "," | "(" | ")" | "!")
    });
    let names = args
        .windows(2)
        .filter(|w| matches!(w[0].as_str(), "-name" | "-iname"))
        .map(|w| w[1].clone())
        .collect();
    // A path or regex test, or a negation, matches what the names alone do not say.
    let narrowed_otherwise = tests_after
        || args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-path"
                    | "-ipath"
                    | "-wholename"
                    | "-regex"
                    | "-iregex"
                    | "!"
                    | "-not"
                    | "-o"
                    | "-or"
                    | ","
            )
        });
    LossKind::Found {
        roots: if roots.is_empty() {
            vec![".".to_owned()]
        } else {
            roots
        },
        names: if narrowed_otherwise {
            Vec::new()
        } else {
            names
        },
    }
}

/// What makes deleting `target` critical, in words.
pub(super) fn dangerous_deletion(target: &str) -> Option<&'static str> {
    if !deletes_dangerously(target) {
        None
    } else if target.contains(FANOUT) {
        Some("deletion of names given at run time (by xargs, find -exec or a program)")
    } else if is_protected(target) {
        Some("deleting a system or credential file or a root")
    } else {
        Some("mass deletion (a wildcard or a root)")
    }
}

/// Whether `truncate`'s size makes files smaller: `-s 0`, `--size=0K`, `-s -10`, `-s <5M`.
pub(super) fn shrinks(args: &[String]) -> bool {
    let size = args.iter().enumerate().find_map(|(at, a)| {
        if a == "-s" || a == "--size" {
            args.get(at + 1).cloned()
        } else {
            a.strip_prefix("--size=")
                .or_else(|| a.strip_prefix("-s"))
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        }
    });
    size.is_some_and(|s| {
        s.starts_with(['-', '<', '/', '%'])
            || s.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<u64>()
                .is_ok_and(|n| n == 0)
    })
}

/// `find -exec`/`-execdir`/`-ok`/`-okdir` and `fd -x`/`-X` run a command on every name found:
/// it is judged with the names as a `FANOUT` word.
pub(super) fn find_exec(
    name: &str,
    args: &[String],
    vars: &mut HashMap<String, String>,
    depth: usize,
) -> Option<String> {
    let starts = |a: &String| {
        if name == "fd" {
            matches!(a.as_str(), "-x" | "-X" | "--exec" | "--exec-batch")
        } else {
            matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
        }
    };
    let mut at = 0;
    while let Some(found) = args[at..].iter().position(starts) {
        let start = at + found + 1;
        let end = args[start..]
            .iter()
            .position(|a| a == ";" || a == "+")
            .map_or(args.len(), |p| start + p);
        let mut inner: Vec<String> = args[start..end]
            .iter()
            .map(|a| a.replace("{}", &FANOUT.to_string()))
            .collect();
        if name == "fd" && !inner.iter().any(|w| w.contains(FANOUT)) {
            inner.push(FANOUT.to_string());
        }
        let inner = unwrap(&inner);
        if inner.first().is_some_and(|w| unknown(w)) {
            return Some(format!(
                "a command known only when it runs, run by {name} -exec"
            ));
        }
        if let Some(reason) = judge(&inner, vars, depth + 1) {
            return Some(format!("{reason}, run by {name} on every file found"));
        }
        at = end.min(args.len());
        if at >= args.len() {
            break;
        }
        at += 1;
    }
    None
}

/// Git commands that destroy work or history: force pushes and remote deletions, `clean -f`,
/// `reset --hard`, and checking out or restoring over uncommitted changes.
pub(super) fn git(args: &[String]) -> Option<String> {
    // Global options come before the subcommand; some take a value.
    let mut at = 0;
    let mut dir: Option<String> = None;
    // A setting that can make any subcommand do something else (an alias, `clean` without
    // `-f`, a push refspec): what such a command destroys cannot be told from its words.
    let mut reconfigured = false;
    while let Some(arg) = args.get(at)
        && arg.starts_with('-')
    {
        let takes_value = matches!(
            arg.as_str(),
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
        );
        if matches!(arg.as_str(), "-C" | "--git-dir" | "--work-tree")
            || arg.starts_with("--git-dir=")
            || arg.starts_with("--work-tree=")
        {
            // Where it works: `-C` is followed; another repository spelling is not judged.
            dir = match (arg.as_str(), dir, args.get(at + 1)) {
                ("-C", None, Some(value)) => Some(value.clone()),
                _ => Some(super::UNKNOWN.to_string()),
            };
        }
        let setting = match arg.as_str() {
            "-c" => args.get(at + 1).map(String::as_str),
            "--config-env" | "--exec-path" => Some("?"),
            other => other
                .strip_prefix("--config-env=")
                .or_else(|| other.strip_prefix("--exec-path="))
                .map(|_| "?"),
        };
        if let Some(setting) = setting
            && !HARMLESS_SETTINGS
                .iter()
                .any(|prefix| setting.to_ascii_lowercase().starts_with(prefix))
        {
            reconfigured = true;
        }
        at += 1 + usize::from(takes_value);
    }
    let subcommand = args.get(at)?.as_str();
    if reconfigured {
        noted(
            "git with a setting that can change what it does (-c)",
            LossKind::Unknown,
        );
    }
    let rest = &args[at + 1..];
    let has = |flag: &str| rest.iter().any(|a| a == flag);
    let short = |c: char| {
        rest.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(c))
    };
    let everything = || {
        rest.iter()
            .any(|a| matches!(a.as_str(), "." | "./" | ":/" | "*" | ":/*"))
    };
    match subcommand {
        "push" => {
            let forced = rest.iter().any(|a| {
                matches!(
                    a.as_str(),
                    "--force" | "--force-with-lease" | "--force-if-includes" | "--mirror"
                ) || a.starts_with("--force-with-lease=")
                    || (a.starts_with('-') && !a.starts_with("--") && a.contains('f'))
                    || (a.starts_with('+') && a.len() > 1)
            });
            if forced {
                return Some("a force push (git push --force)".into());
            }
            if has("--delete")
                || short('d')
                || rest.iter().any(|a| a.starts_with(':') && a.len() > 1)
            {
                return Some("deleting a remote branch (git push --delete)".into());
            }
        }
        "clean" if (short('f') || has("--force")) && !(short('n') || has("--dry-run")) => {
            let paths = rest
                .iter()
                .filter(|a| !a.starts_with('-'))
                .cloned()
                .collect();
            return lost(
                "mass deletion of untracked files (git clean -f)",
                LossKind::GitClean {
                    dir,
                    ignored_only: short('X'),
                    paths,
                },
            );
        }
        "stash" if rest.first().is_some_and(|a| a == "clear") => {
            return lost(
                "discarding all stashed work (git stash clear)",
                LossKind::Unknown,
            );
        }
        "branch" if short('D') || (short('d') && (short('f') || has("--force"))) => {
            return lost(
                "deleting an unmerged branch (git branch -D)",
                LossKind::GitBranch,
            );
        }
        "reset" if has("--hard") => {
            return lost(
                "discarding uncommitted work (git reset --hard)",
                LossKind::GitDiscard { dir },
            );
        }
        "checkout" if short('f') || has("--force") || everything() => {
            return lost(
                "discarding uncommitted changes (git checkout -f / .)",
                LossKind::GitDiscard { dir },
            );
        }
        "restore"
            if (!has("--staged") && !short('S') || has("--worktree") || short('W'))
                && everything() =>
        {
            return lost(
                "discarding uncommitted changes (git restore .)",
                LossKind::GitDiscard { dir },
            );
        }
        "stash" if rest.first().is_some_and(|a| a == "drop") => {
            noted("dropping stashed work (git stash drop)", LossKind::Unknown);
        }
        "checkout" if has("--") && rest.iter().skip_while(|a| *a != "--").nth(1).is_some() => {
            noted(
                "discarding uncommitted changes of the paths named (git checkout -- PATH)",
                LossKind::GitDiscard { dir },
            );
        }
        "restore"
            if (!has("--staged") && !short('S') || has("--worktree") || short('W'))
                && rest.iter().any(|a| !a.starts_with('-')) =>
        {
            noted(
                "discarding uncommitted changes of the paths named (git restore PATH)",
                LossKind::GitDiscard { dir },
            );
        }
        "switch" if short('f') || has("--force") || has("--discard-changes") => {
            noted(
                "discarding uncommitted changes (git switch --discard-changes)",
                LossKind::GitDiscard { dir },
            );
        }
        "rm" if short('f') || has("--force") => {
            noted(
                "removing files with uncommitted changes (git rm -f)",
                LossKind::GitDiscard { dir },
            );
        }
        "reflog" if rest.first().is_some_and(|a| a == "expire" || a == "delete") => {
            noted("dropping the reflog (git reflog expire)", LossKind::Unknown);
        }
        "gc" | "prune" | "repack"
            if subcommand == "prune" || rest.iter().any(|a| a.starts_with("--prune")) =>
        {
            noted(
                "pruning unreachable commits (git gc --prune)",
                LossKind::Unknown,
            );
        }
        "worktree" if rest.first().is_some_and(|a| a == "remove") => {
            noted(
                "removing a worktree (git worktree remove)",
                LossKind::Unknown,
            );
        }
        // Plumbing that rewrites the index, the work tree or history, and names git does not
        // know (an alias, whose text is in a config this command may have changed).
        other if !KNOWN_GIT.contains(&other) => {
            noted(
                format!("git {other}: what it changes cannot be told from its words"),
                LossKind::Unknown,
            );
        }
        _ => {}
    }
    None
}

/// `git -c` settings that change nothing a command deletes: who commits, colours, the
/// pager, advice, the default branch of a new repository, signing.
const HARMLESS_SETTINGS: &[&str] = &[
    "user.",
    "color.",
    "core.pager",
    "advice.",
    "init.defaultbranch",
    "commit.gpgsign",
    "tag.gpgsign",
    "gpg.",
    "log.",
    "format.",
    "diff.",
    "pager.",
    "column.",
    "safe.directory",
    "core.quotepath",
];

/// Git's subcommands whose destructive forms are judged above (or that destroy nothing of
/// the work tree's): any other name is plumbing or an alias.
const KNOWN_GIT: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "checkout",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "commit",
    "config",
    "count-objects",
    "describe",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fetch",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "help",
    "init",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "merge",
    "merge-base",
    "mv",
    "name-rev",
    "notes",
    "pull",
    "push",
    "range-diff",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-ref",
    "stash",
    "status",
    "submodule",
    "switch",
    "tag",
    "var",
    "verify-commit",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "--version",
    "--help",
];

pub(super) fn is_sql_client(name: &str) -> bool {
    matches!(
        name,
        "psql"
            | "mysql"
            | "mariadb"
            | "sqlite3"
            | "sqlcmd"
            | "clickhouse-client"
            | "duckdb"
            | "cockroach"
            | "pgcli"
            | "mycli"
            | "litecli"
            | "usql"
    )
}

/// `DROP TABLE`/`DATABASE`/`SCHEMA` or `TRUNCATE` in SQL text.
pub(super) fn sql(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).find_map(|w| match (w[0], w[1]) {
        ("drop", "table" | "database" | "schema") => {
            Some("dropping a table or database (DROP)".to_owned())
        }
        ("truncate", _) => Some("truncating a table (TRUNCATE)".to_owned()),
        _ => None,
    })
}
