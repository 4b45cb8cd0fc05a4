//! The verdict on one simple command: its words (after wrappers such as `sudo`, `env` and
//! `timeout` are taken off) against what is known to delete, overwrite, leak or fetch.

use super::*;

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
        "rm" => {
            if flags(&['r', 'R'], &["--recursive"]) {
                return Some("recursive deletion (rm -r)".into());
            }
            if let Some(what) = targets.iter().find_map(|t| dangerous_deletion(t)) {
                return Some(format!("{what} (rm)"));
            }
        }
        "unlink" if dangerous_target() => {
            let what = targets.iter().find_map(|t| dangerous_deletion(t));
            return what.map(|what| format!("{what} (unlink)"));
        }
        "rmdir" if flags(&['p'], &["--parents"]) => {
            return Some("recursive deletion (rmdir -p)".into());
        }
        "truncate" if shrinks(args) && dangerous_target() => {
            return Some(
                "truncating a protected file, a wildcard or names given at run time (truncate)"
                    .into(),
            );
        }
        "mv" if targets.len() >= 2 => {
            let (sources, destination) = targets.split_at(targets.len() - 1);
            if destination[0].as_str() == "/dev/null" {
                return Some("deletion by moving into /dev/null (mv)".into());
            }
            if sources.iter().any(|s| deletes_dangerously(s)) {
                return Some("moving away a protected path or a wildcard (mv)".into());
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
            return Some("mass deletion (rsync --delete)".into());
        }
        "tar" if has("--remove-files") => {
            return Some("deleting the archived files (tar --remove-files)".into());
        }
        "zip" if flags(&['m'], &["--move"]) => {
            return Some("deleting the archived files (zip -m)".into());
        }
        "7z" | "7za" | "7zr" if has("-sdel") => {
            return Some("deleting the archived files (7z -sdel)".into());
        }
        "find" | "fd" => {
            if name == "find" && has("-delete") {
                return Some("mass deletion (find -delete)".into());
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
        "shred" | "wipe" | "srm" | "wipefs" | "mkswap" | "fdisk" | "sfdisk" | "cfdisk"
        | "parted" | "sgdisk" | "gdisk" | "mke2fs" | "blkdiscard" => {
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
    while let Some(arg) = args.get(at)
        && arg.starts_with('-')
    {
        let takes_value = matches!(
            arg.as_str(),
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
        );
        at += 1 + usize::from(takes_value);
    }
    let subcommand = args.get(at)?.as_str();
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
            return Some("mass deletion of untracked files (git clean -f)".into());
        }
        "stash" if rest.first().is_some_and(|a| a == "clear") => {
            return Some("discarding all stashed work (git stash clear)".into());
        }
        "branch" if short('D') || (short('d') && (short('f') || has("--force"))) => {
            return Some("deleting an unmerged branch (git branch -D)".into());
        }
        "reset" if has("--hard") => {
            return Some("discarding uncommitted work (git reset --hard)".into());
        }
        "checkout" if short('f') || has("--force") || everything() => {
            return Some("discarding uncommitted changes (git checkout -f / .)".into());
        }
        "restore"
            if (!has("--staged") && !short('S') || has("--worktree") || short('W'))
                && everything() =>
        {
            return Some("discarding uncommitted changes (git restore .)".into());
        }
        _ => {}
    }
    None
}

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
