//! Programs handed to an interpreter (`python3 -c`, `perl -e`, `node -e`, `awk '…'`, a
//! here-document into `ruby`…): where the code comes from, and what it calls. The code is
//! not run or fully parsed: it is split into string literals, names and punctuation, and the
//! calls that reach outside the program are judged like the shell's own commands — a shell
//! command (`os.system`, `system`, backticks, `child_process`, `| getline`) is classified as
//! a script, a deletion (`shutil.rmtree`, `unlink`, `fs.rmSync`) by its targets, a write by its
//! path, and code run by `eval`/`exec` in turn. Text a program computes at run time is marked
//! as such (`FANOUT`): a command name or deletion target built from it is critical.

use std::collections::HashMap;

use super::losses::{LossKind, lost, noted};
use super::{FANOUT, classify_depth, deletes_dangerously, is_protected, reads_stdin_as_code};

mod lex;
mod sources;

use lex::lex;
pub(super) use sources::sources;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lang {
    Python,
    Perl,
    Ruby,
    Js,
    Php,
    Awk,
    Lua,
    R,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Python => "Python code",
            Lang::Perl => "Perl code",
            Lang::Ruby => "Ruby code",
            Lang::Js => "JavaScript code",
            Lang::Php => "PHP code",
            Lang::Awk => "an awk program",
            Lang::Lua => "Lua code",
            Lang::R => "R code",
        }
    }
}

/// The language a program name runs, versions included (`python3.12`, `perl5.36`, `lua5.4`).
pub(super) fn language(name: &str) -> Option<Lang> {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    Some(match stem {
        "python" | "pypy" => Lang::Python,
        "perl" => Lang::Perl,
        "ruby" | "jruby" => Lang::Ruby,
        "node" | "nodejs" | "deno" | "bun" => Lang::Js,
        "php" => Lang::Php,
        "awk" | "gawk" | "mawk" | "nawk" => Lang::Awk,
        "lua" | "luajit" => Lang::Lua,
        "Rscript" | "R" => Lang::R,
        _ => return None,
    })
}

/// Why the program `code` in `lang` is critical, or `None`.
pub(super) fn judge_program(lang: Lang, code: &str, depth: usize) -> Option<String> {
    if depth > 8 {
        return Some("too deeply nested to judge".into());
    }
    let tokens = lex(lang, code);
    // Modules whose functions have common names (`run`, `exec`, `rm`): looked up once.
    let known: Vec<&str> = ["subprocess", "child_process", "fs"]
        .into_iter()
        .filter(|m| code.contains(m))
        .collect();
    let mentions = |module: &str| known.contains(&module);
    for (at, token) in tokens.iter().enumerate() {
        let reason = match token {
            Tok::Shell(pieces) => shell_call(
                lang,
                "a command in backticks",
                &[Arg::Text(pieces.clone())],
                depth,
            ),
            Tok::Word(word) => {
                let Some(kind) = sink(lang, word, qualifier(&tokens, at), &mentions) else {
                    continue;
                };
                let Some(args) = call_args(lang, &tokens, at + 1, kind) else {
                    continue;
                };
                judge_call(lang, word, kind, &args, depth)
            }
            Tok::Punct('|')
                if lang == Lang::Awk && (at == 0 || tokens[at - 1] != Tok::Punct('|')) =>
            {
                awk_pipe(&tokens, at, depth)
            }
            Tok::Str(pieces) => by_name(lang, &tokens, at, pieces),
            _ => None,
        };
        if reason.is_some() {
            return reason;
        }
    }
    None
}

/// A piece of a string the program builds: text, or something computed when it runs.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Computed,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A string literal.
    Str(Vec<Piece>),
    /// A command in backticks, `qx{}` or `%x()`: run by a shell.
    Shell(Vec<Piece>),
    Word(String),
    Punct(char),
    /// A number or a regular expression: an operand nothing here reads.
    Operand,
}

/// What a called name does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Runs a shell command or a program.
    Shell,
    /// Runs more code of the same language.
    Eval,
    Delete {
        recursive: bool,
    },
    /// Writes the file named by its first argument (when the mode argument, if any, writes).
    Write {
        mode: Option<usize>,
    },
    /// Perl's `open`: a file or, with `|`, a command.
    PerlOpen,
}

/// The name before `.`, `::` or `->` in front of token `at`: `Some("")` when it is a call's
/// or an index's result (`require("fs").rmSync`).
fn qualifier(tokens: &[Tok], at: usize) -> Option<&str> {
    let before = |back: usize| at.checked_sub(back).and_then(|k| tokens.get(k));
    let receiver = match (before(2), before(1)) {
        (_, Some(Tok::Punct('.'))) => before(2),
        (Some(Tok::Punct(':')), Some(Tok::Punct(':'))) => before(3),
        (Some(Tok::Punct('-')), Some(Tok::Punct('>'))) => before(3),
        _ => return None,
    };
    match receiver {
        Some(Tok::Word(name)) => Some(name.as_str()),
        _ => Some(""),
    }
}

/// Whether `name` called with `qualifier` reaches outside the program, and how.
fn sink(
    lang: Lang,
    name: &str,
    qualifier: Option<&str>,
    mentions: &dyn Fn(&str) -> bool,
) -> Option<Kind> {
    let q = qualifier;
    let q_in = |names: &[&str]| q.is_some_and(|q| names.contains(&q));
    let delete = Some(Kind::Delete { recursive: false });
    let recursive = Some(Kind::Delete { recursive: true });
    match lang {
        Lang::Python => match name {
            "system" | "popen" if q.is_none() || q_in(&["os", ""]) => Some(Kind::Shell),
            "check_call" | "check_output" | "Popen" | "getoutput" | "getstatusoutput" => {
                Some(Kind::Shell)
            }
            "run" | "call" if mentions("subprocess") && !q_in(&["asyncio", "trio", "anyio"]) => {
                Some(Kind::Shell)
            }
            n if (n.starts_with("exec")
                || n.starts_with("spawn")
                || n.starts_with("posix_spawn"))
                && n.len() > 4
                && q_in(&["os", "pty"]) =>
            {
                Some(Kind::Shell)
            }
            "exec" | "eval" | "compile" if q.is_none() || q_in(&["builtins"]) => Some(Kind::Eval),
            "rmtree" => recursive,
            "remove" | "removedirs" | "truncate" if q_in(&["os"]) => delete,
            "unlink" | "rmdir" if q.is_some() => delete,
            "open" if q.is_none() || q_in(&["io", "builtins", "codecs"]) => {
                Some(Kind::Write { mode: Some(1) })
            }
            _ => None,
        },
        Lang::Perl => match name {
            "system" | "exec" | "readpipe" => Some(Kind::Shell),
            "eval" => Some(Kind::Eval),
            "rmtree" | "remove_tree" => recursive,
            "unlink" | "rmdir" | "truncate" => delete,
            "open" | "sysopen" => Some(Kind::PerlOpen),
            _ => None,
        },
        Lang::Ruby => match name {
            "system" | "exec" | "spawn" | "popen" | "popen2" | "popen2e" | "popen3"
            | "capture2" | "capture2e" | "capture3" | "pipeline" => Some(Kind::Shell),
            "eval" | "instance_eval" | "class_eval" | "module_eval" => Some(Kind::Eval),
            "rm_rf" | "rm_r" | "remove_dir" | "remove_entry" | "remove_entry_secure" | "rmtree" => {
                recursive
            }
            "delete" | "unlink" if q_in(&["File", "Dir", "FileUtils", "Pathname"]) => delete,
            "rm" | "rm_f" | "remove" | "remove_file" | "rmdir" if q_in(&["FileUtils", "Dir"]) => {
                delete
            }
            "truncate" if q_in(&["File"]) => delete,
            "write" | "binwrite" if q_in(&["File", "IO"]) => Some(Kind::Write { mode: None }),
            "open" if q_in(&["File"]) => Some(Kind::Write { mode: Some(1) }),
            _ => None,
        },
        Lang::Js => {
            let fs = || mentions("fs") || q_in(&["Deno"]);
            match name {
                "execSync" | "execFileSync" | "spawnSync" => Some(Kind::Shell),
                "exec" | "execFile" | "spawn" if mentions("child_process") => Some(Kind::Shell),
                "spawn" | "$" if q_in(&["Bun"]) => Some(Kind::Shell),
                "Command" | "run" if q_in(&["Deno"]) => Some(Kind::Shell),
                "eval" | "Function" | "runInThisContext" | "runInNewContext" | "runInContext" => {
                    Some(Kind::Eval)
                }
                "rimraf" | "rimrafSync" | "removeSync" | "emptyDir" | "emptyDirSync" => recursive,
                "rm" | "rmSync" | "rmdir" | "rmdirSync" | "unlink" | "unlinkSync" | "remove"
                    if q.is_some() && fs() =>
                {
                    delete
                }
                "writeFileSync" | "writeFile" | "appendFileSync" | "appendFile"
                | "writeTextFile" | "writeTextFileSync"
                    if q.is_some() =>
                {
                    Some(Kind::Write { mode: None })
                }
                _ => None,
            }
        }
        Lang::Php => match name {
            "system" | "exec" | "shell_exec" | "passthru" | "popen" | "proc_open"
            | "pcntl_exec" => Some(Kind::Shell),
            "eval" | "assert" | "create_function" => Some(Kind::Eval),
            "unlink" | "rmdir" => delete,
            "file_put_contents" => Some(Kind::Write { mode: None }),
            "fopen" => Some(Kind::Write { mode: Some(1) }),
            _ => None,
        },
        Lang::Awk => (name == "system").then_some(Kind::Shell),
        Lang::Lua => match name {
            "execute" | "popen" if q_in(&["os", "io"]) => Some(Kind::Shell),
            "remove" if q_in(&["os"]) => delete,
            "open" if q_in(&["io"]) => Some(Kind::Write { mode: Some(1) }),
            _ => None,
        },
        Lang::R => match name {
            "system" | "system2" | "shell" => Some(Kind::Shell),
            "unlink" => delete,
            "remove" if q_in(&["file"]) => delete,
            _ => None,
        },
    }
}

/// An argument of a call.
#[derive(Clone, Debug)]
enum Arg {
    /// A value: text the program builds.
    Text(Vec<Piece>),
    /// A list literal: one argv word per element.
    List(Vec<Vec<Piece>>),
    /// Options (`{recursive: true}`, `recursive = TRUE`, `shell=True`), with list literals
    /// found in them (`{args: [...]}`, `{cmd: [...]}`).
    Options {
        recursive: bool,
        lists: Vec<Vec<Vec<Piece>>>,
    },
}

/// The arguments of the call whose name ends before `start`; `None` when it is not a call.
fn call_args(lang: Lang, tokens: &[Tok], start: usize, kind: Kind) -> Option<Vec<Arg>> {
    let (from, to) = match tokens.get(start) {
        Some(Tok::Punct('(')) => (start + 1, close_of(tokens, start)?),
        // A tagged template (zx and Bun's `$`): the template is the command.
        Some(Tok::Str(_)) if lang == Lang::Js && kind == Kind::Shell => (start, start + 1),
        // Perl and Ruby call without parentheses: up to the end of the statement.
        Some(Tok::Punct('{')) if kind == Kind::Eval => return None, // a block, not a string
        Some(Tok::Word(w)) if kind == Kind::Eval && w == "do" => return None,
        Some(Tok::Str(_) | Tok::Word(_) | Tok::Shell(_) | Tok::Punct('[' | '*' | '<'))
            if matches!(lang, Lang::Perl | Lang::Ruby) =>
        {
            let mut depth = 0usize;
            let mut end = start;
            while let Some(token) = tokens.get(end) {
                match token {
                    Tok::Punct('(' | '[' | '{') => depth += 1,
                    Tok::Punct(')' | ']' | '}') if depth == 0 => break,
                    Tok::Punct(')' | ']' | '}') => depth -= 1,
                    Tok::Punct(';') if depth == 0 => break,
                    Tok::Word(w)
                        if depth == 0
                            && matches!(
                                w.as_str(),
                                "if" | "unless" | "or" | "and" | "while" | "until" | "for"
                            ) =>
                    {
                        break;
                    }
                    _ => {}
                }
                end += 1;
            }
            (start, end)
        }
        _ => return None,
    };
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut current: Vec<Tok> = Vec::new();
    for token in &tokens[from..to.min(tokens.len())] {
        match token {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => depth = depth.saturating_sub(1),
            Tok::Punct(',') if depth == 0 => {
                args.push(arg(std::mem::take(&mut current)));
                continue;
            }
            _ => {}
        }
        current.push(token.clone());
    }
    if !current.is_empty() {
        args.push(arg(current));
    }
    Some(args)
}

/// The index of the token closing the bracket at `open`.
fn close_of(tokens: &[Tok], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (at, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

fn arg(tokens: Vec<Tok>) -> Arg {
    let is = |at: usize, c: char| tokens.get(at) == Some(&Tok::Punct(c));
    let keyword = matches!(tokens.first(), Some(Tok::Word(_)))
        && ((is(1, '=') && !is(2, '=')) || (is(1, ':') && !is(2, ':')));
    if is(0, '{') || keyword {
        let truthy = |t: &Tok| matches!(t, Tok::Word(w) if matches!(w.as_str(), "true" | "True" | "TRUE" | "T"));
        let recursive = tokens.iter().enumerate().any(|(at, t)| {
            let named = match t {
                Tok::Word(w) => w == "recursive",
                Tok::Str(p) => p == &[Piece::Text("recursive".into())],
                _ => false,
            };
            named && tokens[at + 1..].iter().take(3).any(truthy)
        });
        let mut lists = Vec::new();
        let mut at = 0;
        while at < tokens.len() {
            if is(at, '[')
                && let Some(end) = close_of(&tokens, at)
            {
                lists.push(list_items(&tokens[at + 1..end]));
                at = end;
            }
            at += 1;
        }
        return Arg::Options { recursive, lists };
    }
    if is(0, '[') && close_of(&tokens, 0) == Some(tokens.len() - 1) {
        return Arg::List(list_items(&tokens[1..tokens.len() - 1]));
    }
    Arg::Text(pieces(&tokens))
}

fn list_items(tokens: &[Tok]) -> Vec<Vec<Piece>> {
    tokens
        .split(|t| *t == Tok::Punct(','))
        .filter(|item| !item.is_empty())
        .map(pieces)
        .collect()
}

/// The text an expression builds: literals joined (`"r" + "m"`), everything else computed.
fn pieces(tokens: &[Tok]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        match &tokens[at] {
            Tok::Str(p) => out.extend(p.iter().cloned()),
            // Concatenation and formatting operators join text.
            Tok::Punct('+' | '.' | '%' | '~') => {}
            // Methods that keep a literal's words (`"git status".split()`).
            Tok::Word(w)
                if at > 0
                    && tokens[at - 1] == Tok::Punct('.')
                    && matches!(
                        w.as_str(),
                        "split"
                            | "strip"
                            | "trim"
                            | "toString"
                            | "to_s"
                            | "chomp"
                            | "encode"
                            | "decode"
                    ) =>
            {
                if tokens.get(at + 1) == Some(&Tok::Punct('(')) {
                    at = close_of(tokens, at + 1).unwrap_or(at);
                }
            }
            _ => {
                if out.last() != Some(&Piece::Computed) {
                    out.push(Piece::Computed);
                }
            }
        }
        at += 1;
    }
    out
}

/// Shell text for pieces: text as written, computed parts as a run-time word.
fn raw(pieces: &[Piece]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.clone(),
            Piece::Computed => FANOUT.to_string(),
        })
        .collect()
}

/// One shell word holding exactly the pieces (an argv element).
fn quoted(pieces: &[Piece]) -> String {
    format!("'{}'", raw(pieces).replace('\'', "'\\''"))
}

fn judge_call(lang: Lang, name: &str, kind: Kind, args: &[Arg], depth: usize) -> Option<String> {
    let lang_name = lang.name();
    let texts = || {
        args.iter().flat_map(|a| match a {
            Arg::Text(p) => vec![p.clone()],
            Arg::List(items) => items.clone(),
            Arg::Options { .. } => Vec::new(),
        })
    };
    match kind {
        Kind::Shell => shell_call(lang, name, args, depth),
        Kind::Eval => {
            let first = args.iter().find_map(|a| match a {
                Arg::Text(p) => Some(p),
                _ => None,
            })?;
            if first.contains(&Piece::Computed) {
                return Some(format!(
                    "code built at run time, run by {name} in {lang_name}"
                ));
            }
            judge_program(lang, &raw(first), depth + 1)
        }
        Kind::Delete { recursive } => {
            let option_recursive = args.iter().any(|a| {
                matches!(
                    a,
                    Arg::Options {
                        recursive: true,
                        ..
                    }
                )
            });
            let targets: Vec<String> = texts().map(|p| raw(&p)).collect();
            // A path computed at run time is a name only known when it runs.
            let kind = || {
                if targets.is_empty()
                    || targets.iter().any(|t| t.contains([super::UNKNOWN, FANOUT]))
                {
                    LossKind::Unknown
                } else {
                    LossKind::Paths(targets.clone())
                }
            };
            if recursive || option_recursive {
                return lost(
                    format!("recursive deletion ({name} in {lang_name})"),
                    kind(),
                );
            }
            // A receiver's method (`path.unlink()`) deletes a path computed at run time.
            if targets.is_empty() || targets.iter().any(|t| deletes_dangerously(t)) {
                return lost(
                    format!(
                        "deletion of a computed, wildcard or protected path ({name} in \
                         {lang_name})"
                    ),
                    kind(),
                );
            }
            noted(format!("deletion ({name} in {lang_name})"), kind());
            None
        }
        Kind::Write { mode } => {
            let positional: Vec<Vec<Piece>> = texts().collect();
            let path = positional.first()?;
            if let Some(mode_at) = mode {
                let writes = positional.get(mode_at).is_some_and(|m| {
                    m.contains(&Piece::Computed) || raw(m).contains(['w', 'a', 'x', '+'])
                });
                if !writes {
                    return None;
                }
            }
            is_protected(&raw(path))
                .then(|| format!("writing a system or credential file ({name} in {lang_name})"))
        }
        Kind::PerlOpen => {
            let positional: Vec<Vec<Piece>> = texts().collect();
            let text = |at: usize| positional.get(at).map(|p| raw(p)).unwrap_or_default();
            if let Some(at) = (0..positional.len()).find(|&at| text(at) == "-|" || text(at) == "|-")
            {
                let rest: Vec<Arg> = positional[at + 1..]
                    .iter()
                    .map(|p| Arg::Text(p.clone()))
                    .collect();
                return shell_call(lang, name, &rest, depth);
            }
            let spec = text(1);
            let trimmed = spec.trim();
            if trimmed.starts_with('|') || trimmed.ends_with('|') {
                let command = trimmed.trim_matches('|').to_owned();
                return shell_call(lang, name, &[Arg::Text(vec![Piece::Text(command)])], depth);
            }
            let path = if positional.len() >= 3 {
                spec.starts_with(['>', '+']).then(|| text(2))
            } else {
                spec.strip_prefix(['>', '+'])
                    .map(|p| p.trim_start_matches(['>', '<']).trim().to_owned())
            };
            path.filter(|p| is_protected(p))
                .map(|_| format!("writing a system or credential file ({name} in {lang_name})"))
        }
    }
}

/// A command a program runs: the first argument as a shell command line, later ones and
/// list elements as argv words.
fn shell_call(lang: Lang, name: &str, args: &[Arg], depth: usize) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    // Python's `os.spawn*(mode, path, …)` starts with a mode, not the program.
    let skip = usize::from(lang == Lang::Python && name.starts_with("spawn") && name.len() > 5);
    for arg in args.iter().skip(skip) {
        match arg {
            Arg::Text(p) if words.is_empty() => words.push(raw(p)),
            Arg::Text(p) => words.push(quoted(p)),
            Arg::List(items) => words.extend(items.iter().map(|p| quoted(p))),
            Arg::Options { lists, .. } => {
                words.extend(lists.iter().flatten().map(|p| quoted(p)));
            }
        }
    }
    let script = words.join(" ");
    if script.trim().is_empty() {
        return None;
    }
    if let Some(reason) = classify_depth(&script, &mut HashMap::new(), depth + 1) {
        return Some(format!("{reason}, run by {name} in {}", lang.name()));
    }
    reads_stdin_as_code(&script).then(|| {
        format!(
            "the output of {} run as code ({name} into a shell)",
            lang.name()
        )
    })
}

/// awk's `"cmd" | getline` and `print … | "cmd"`: the command beside the pipe runs.
fn awk_pipe(tokens: &[Tok], at: usize, depth: usize) -> Option<String> {
    let boundary = |t: &Tok| matches!(t, Tok::Punct(';' | '{' | '}' | '(' | ')'));
    match tokens.get(at + 1) {
        Some(Tok::Punct('|')) => None,
        Some(Tok::Word(w)) if w == "getline" => {
            let from = tokens[..at].iter().rposition(boundary).map_or(0, |b| b + 1);
            let command = pieces(&tokens[from..at]);
            shell_call(Lang::Awk, "getline", &[Arg::Text(command)], depth)
        }
        _ => {
            let start = if tokens.get(at + 1) == Some(&Tok::Punct('&')) {
                at + 2
            } else {
                at + 1
            };
            let end = tokens[start..]
                .iter()
                .position(boundary)
                .map_or(tokens.len(), |p| start + p);
            let command = pieces(&tokens[start..end]);
            shell_call(Lang::Awk, "print |", &[Arg::Text(command)], depth)
        }
    }
}

/// A dangerous function named in a string and handed to a caller (`array_map("unlink", …)`,
/// `getattr(os, "system")`).
fn by_name(lang: Lang, tokens: &[Tok], at: usize, pieces: &[Piece]) -> Option<String> {
    let [Piece::Text(name)] = pieces else {
        return None;
    };
    let dangerous = sink(lang, name, None, &|_| true)
        .or_else(|| sink(lang, name, Some("os"), &|_| true))
        .is_some_and(|k| !matches!(k, Kind::Write { .. }));
    if !dangerous {
        return None;
    }
    let callers = [
        "array_map",
        "array_walk",
        "call_user_func",
        "call_user_func_array",
        "getattr",
        "send",
        "public_send",
        "__send__",
        "method",
    ];
    let inside = tokens[..at].iter().rposition(|t| *t == Tok::Punct('('))?;
    let caller = match inside.checked_sub(1).map(|k| &tokens[k]) {
        Some(Tok::Word(w)) => w.as_str(),
        _ => return None,
    };
    callers
        .contains(&caller)
        .then(|| format!("{name} called by name in {}", lang.name()))
}

#[cfg(test)]
mod tests {
    use super::sources::Sources;
    use super::*;

    fn sources_of(line: &str) -> Sources {
        let words: Vec<String> = line.split(' ').map(str::to_owned).collect();
        let lang = language(&words[0]).unwrap_or(Lang::Python);
        sources(lang, &words)
    }

    #[test]
    fn interpreters_say_where_their_program_comes_from() {
        let s = sources_of("python3 -m json.tool");
        assert!(s.inline.is_empty() && !s.reads_stdin);
        let s = sources_of("python3 -Ic CODE arg");
        assert!(s.inline == ["CODE"] && !s.reads_stdin);
        assert!(sources_of("python3").reads_stdin && sources_of("python3 -").reads_stdin);
        assert!(!sources_of("python3 script.py -").reads_stdin);
        let s = sources_of("perl -pi -e CODE a b");
        assert!(s.inline == ["CODE"] && s.in_place == ["a", "b"]);
        let s = sources_of("perl -ne CODE log");
        assert!(s.inline == ["CODE"] && s.in_place.is_empty());
        let s = sources_of("awk -F: PROG /etc/passwd");
        assert!(s.inline == ["PROG"] && !s.reads_stdin);
        assert!(sources_of("awk -f - data").reads_stdin);
        let s = sources_of("node --eval CODE");
        assert!(s.inline == ["CODE"] && !s.reads_stdin);
        assert!(sources_of("node").reads_stdin && !sources_of("node build.js").reads_stdin);
        assert_eq!(sources_of("deno eval CODE").inline, ["CODE"]);
        assert_eq!(sources_of("php -r CODE").inline, ["CODE"]);
        assert_eq!(sources_of("ruby -rfileutils -e CODE").inline, ["CODE"]);
    }

    #[test]
    fn literals_join_and_computed_parts_are_marked() {
        let text = |lang, code| match lex(lang, code).as_slice() {
            [Tok::Word(_), Tok::Punct('('), rest @ .., Tok::Punct(')')] => raw(&pieces(rest)),
            other => panic!("{other:?}"),
        };
        assert_eq!(text(Lang::Python, r#"f("r" + 'm -rf /')"#), "rm -rf /");
        assert_eq!(text(Lang::Python, r#"f('\x72m')"#), "rm");
        assert_eq!(
            text(Lang::Python, r#"f(f"rm -rf {p}")"#),
            format!("rm -rf {FANOUT}")
        );
        assert_eq!(text(Lang::Ruby, r#"f("rm #{x}")"#), format!("rm {FANOUT}"));
        assert_eq!(text(Lang::Perl, r#"f("rm $x")"#), format!("rm {FANOUT}"));
        assert_eq!(text(Lang::Perl, r#"f('rm $x')"#), "rm $x");
        assert_eq!(text(Lang::Js, "f(`rm ${x}`)"), format!("rm {FANOUT}"));
        assert_eq!(text(Lang::Awk, r#"f("rm " $0)"#), format!("rm {FANOUT}"));
        assert_eq!(text(Lang::Python, r#"f(cmd)"#), FANOUT.to_string());
    }
}
