//! Programs handed to an interpreter (`python3 -c`, `perl -e`, `node -e`, `awk '…'`, a
//! here-document into `ruby`…): where the code comes from, and what it calls. The code is
//! not run or fully parsed: it is split into string literals, names and punctuation, and the
//! calls that reach outside the program are judged like the shell's own commands — a shell
//! command (`os.system`, `system`, backticks, `child_process`, `| getline`) is classified as
//! a script, a deletion (`shutil.rmtree`, `unlink`, `fs.rmSync`) by its targets, a write by its
//! path, and code run by `eval`/`exec` in turn. Text a program computes at run time is marked
//! as such (`FANOUT`): a command name or deletion target built from it is critical.

use std::collections::HashMap;

use super::{FANOUT, classify_depth, deletes_dangerously, is_protected, reads_stdin_as_code};

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

/// Where an interpreter's program comes from.
#[derive(Debug, Default)]
pub(super) struct Sources {
    /// Code given on the command line (`-c`, `-e`, awk's first operand).
    pub(super) inline: Vec<String>,
    /// The program is read from standard input: no code, script file or module was named.
    pub(super) reads_stdin: bool,
    /// Files the program edits in place (`perl -i`, `ruby -i`).
    pub(super) in_place: Vec<String>,
}

/// Reads an interpreter's command line: its inline code, whether it reads its program from
/// standard input, and the files it edits in place.
pub(super) fn sources(lang: Lang, words: &[String]) -> Sources {
    let mut found = Sources::default();
    let args = words.get(1..).unwrap_or_default();
    let program = words.first().map(String::as_str).unwrap_or_default();
    let mut named_program = false; // a script file, a module, or inline code
    let mut in_place = false;
    let mut i = 0;
    // `deno eval CODE`, `bun eval CODE`
    if lang == Lang::Js && matches!(program, "deno" | "bun") {
        match args.first().map(String::as_str) {
            Some("eval" | "-e") => {
                found
                    .inline
                    .extend(args[1..].iter().find(|a| !a.starts_with('-')).cloned());
                return found;
            }
            Some(_) => return found, // `deno run x.ts`, `bun run build`: a file
            None => {}
        }
    }
    while i < args.len() {
        let arg = args[i].as_str();
        let next = args.get(i + 1).cloned();
        i += 1;
        if arg == "--" {
            if lang == Lang::Awk && !named_program {
                found.inline.extend(next);
                named_program = true;
            } else if let Some(file) = next {
                found.reads_stdin = file == "-";
                named_program = true;
            }
            break;
        }
        if arg == "-" {
            found.reads_stdin = !named_program;
            named_program = true;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (key, value) = long
                .split_once('=')
                .map_or((long, None), |(k, v)| (k, Some(v)));
            let code = matches!(
                (lang, key),
                (Lang::Js, "eval" | "print") | (Lang::Awk, "source")
            );
            let takes_value = matches!(
                (lang, key),
                (
                    Lang::Js,
                    "require" | "import" | "input-type" | "loader" | "conditions"
                ) | (Lang::Awk, "file" | "field-separator" | "assign")
            );
            if code || takes_value {
                let value = value.map(str::to_owned).or_else(|| {
                    i += 1;
                    next.clone()
                });
                if code {
                    found.inline.extend(value);
                    named_program = true;
                } else if key == "file" {
                    named_program = true;
                    found.reads_stdin = value.is_some_and(|f| f == "-" || f == "/dev/stdin");
                }
            }
            continue;
        }
        let Some(cluster) = arg.strip_prefix('-') else {
            // The first operand is the program (awk) or a script file; later ones are the
            // program's own arguments, or the files `-i` edits.
            if !named_program {
                named_program = true;
                if lang == Lang::Awk {
                    found.inline.push(arg.to_owned());
                }
            } else if in_place {
                found.in_place.push(arg.to_owned());
            }
            if !in_place {
                break;
            }
            continue;
        };
        let flags: Vec<char> = cluster.chars().collect();
        for (at, &flag) in flags.iter().enumerate() {
            let rest: String = flags[at + 1..].iter().collect();
            let mut value = || {
                if rest.is_empty() {
                    i += 1;
                    next.clone()
                } else {
                    Some(rest.clone())
                }
            };
            match (lang, flag) {
                (Lang::Python, 'c')
                | (Lang::Perl | Lang::Ruby | Lang::Lua | Lang::R, 'e')
                | (Lang::Perl, 'E')
                | (Lang::Js, 'e' | 'p')
                | (Lang::Php, 'r' | 'B' | 'R' | 'E')
                | (Lang::Awk, 'e') => {
                    found.inline.extend(value());
                    named_program = true;
                    if lang == Lang::Python {
                        // Everything after `-c CODE` is the program's own argv.
                        return found;
                    }
                    break;
                }
                (Lang::Python, 'm') | (Lang::Php, 'f') => {
                    named_program = true;
                    if lang == Lang::Python {
                        return found;
                    }
                    value();
                    break;
                }
                (Lang::Awk, 'f') => {
                    named_program = true;
                    found.reads_stdin = value().is_some_and(|f| f == "-" || f == "/dev/stdin");
                    break;
                }
                (Lang::Perl | Lang::Ruby, 'i') => {
                    in_place = true;
                    if rest.starts_with('.') {
                        break; // the backup suffix
                    }
                }
                (Lang::Python, 'W' | 'X' | 'Q')
                | (Lang::Ruby, 'r' | 'I' | 'C' | 'E')
                | (Lang::Js, 'r' | 'C')
                | (Lang::Php, 'd' | 'c')
                | (Lang::Awk, 'F' | 'v')
                | (Lang::Lua, 'l') => {
                    value();
                    break;
                }
                // Perl's valued switches take their value attached (`-MFile::Path`, `-0777`).
                (Lang::Perl, 'M' | 'm' | 'I' | 'x' | 'C' | 'd' | 'D' | 'F' | 'V') => {
                    break;
                }
                _ => {}
            }
        }
    }
    if !named_program {
        found.reads_stdin = true;
    }
    found
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
            if recursive || option_recursive {
                return Some(format!("recursive deletion ({name} in {lang_name})"));
            }
            let targets: Vec<String> = texts().map(|p| raw(&p)).collect();
            // A receiver's method (`path.unlink()`) deletes a path computed at run time.
            if targets.is_empty() || targets.iter().any(|t| deletes_dangerously(t)) {
                return Some(format!(
                    "deletion of a computed, wildcard or protected path ({name} in \
                     {lang_name})"
                ));
            }
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

/// Splits code into string literals, names, operands and punctuation.
fn lex(lang: Lang, code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut tokens: Vec<Tok> = Vec::new();
    let mut i = 0;
    let hash_comments = matches!(
        lang,
        Lang::Python | Lang::Perl | Lang::Ruby | Lang::Php | Lang::Awk | Lang::R
    );
    let newline_ends = matches!(
        lang,
        Lang::Python | Lang::Ruby | Lang::Awk | Lang::Lua | Lang::R
    );
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        let operand_expected = match tokens.last() {
            None => true,
            Some(Tok::Punct(p)) => !matches!(p, ')' | ']' | '}'),
            Some(Tok::Word(w)) => matches!(
                w.as_str(),
                "if" | "unless"
                    | "and"
                    | "or"
                    | "not"
                    | "return"
                    | "split"
                    | "grep"
                    | "when"
                    | "while"
                    | "until"
            ),
            _ => false,
        };
        if ch == '\n' && newline_ends {
            tokens.push(Tok::Punct(';'));
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if (ch == '#' && hash_comments)
            || (ch == '/' && next == Some('/') && matches!(lang, Lang::Js | Lang::Php))
            || (ch == '-' && next == Some('-') && lang == Lang::Lua)
        {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') && matches!(lang, Lang::Js | Lang::Php) {
            i += 2;
            while i + 1 < c.len() && !(c[i] == '*' && c[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if ch == '\'' || ch == '"' {
            let interpolate = ch == '"' && matches!(lang, Lang::Perl | Lang::Ruby | Lang::Php);
            let python_f = lang == Lang::Python
                && matches!(tokens.last(), Some(Tok::Word(w)) if is_string_prefix(w) && w.to_ascii_lowercase().contains('f'));
            let raw_string = lang == Lang::Python
                && matches!(tokens.last(), Some(Tok::Word(w)) if is_string_prefix(w) && w.to_ascii_lowercase().contains('r'));
            if lang == Lang::Python
                && matches!(tokens.last(), Some(Tok::Word(w)) if is_string_prefix(w))
            {
                tokens.pop();
            }
            let triple = lang == Lang::Python && next == Some(ch) && c.get(i + 2) == Some(&ch);
            let (p, end) = string(
                &c,
                if triple { i + 3 } else { i + 1 },
                ch,
                triple,
                Interp {
                    dollar: interpolate && lang != Lang::Ruby,
                    hash_brace: interpolate && lang == Lang::Ruby,
                    brace: python_f,
                    escapes: !raw_string,
                },
            );
            tokens.push(Tok::Str(p));
            i = end;
        } else if ch == '`' {
            let js = lang == Lang::Js;
            let (p, end) = string(
                &c,
                i + 1,
                '`',
                false,
                Interp {
                    dollar: matches!(lang, Lang::Perl | Lang::Php),
                    hash_brace: lang == Lang::Ruby,
                    brace: false,
                    escapes: true,
                }
                .with_template(js),
            );
            tokens.push(match lang {
                Lang::Js => Tok::Str(p),
                Lang::Perl | Lang::Ruby | Lang::Php => Tok::Shell(p),
                _ => Tok::Operand,
            });
            i = end;
        } else if ch == '/'
            && operand_expected
            && matches!(lang, Lang::Perl | Lang::Ruby | Lang::Js | Lang::Awk)
        {
            // A regular expression literal.
            i = delimited(&c, i + 1, '/', '/').1;
            tokens.push(Tok::Operand);
        } else if ch == '[' && lang == Lang::Lua && matches!(next, Some('[' | '=')) {
            let level = c[i + 1..].iter().take_while(|&&x| x == '=').count();
            let start = i + 2 + level;
            let close: String = std::iter::once(']')
                .chain(std::iter::repeat_n('=', level))
                .chain(std::iter::once(']'))
                .collect();
            let rest: String = c[start.min(c.len())..].iter().collect();
            let end = rest.find(&close).map_or(rest.len(), |p| p);
            tokens.push(Tok::Str(vec![Piece::Text(rest[..end].to_owned())]));
            i = start + rest[..end].chars().count() + close.chars().count();
        } else if ch == '%'
            && lang == Lang::Ruby
            && operand_expected
            && percent_literal(&c, i).is_some()
        {
            let Some((letter, open)) = percent_literal(&c, i) else {
                break;
            };
            let close = closing(c[open]);
            let (text, end) = delimited(&c, open + 1, c[open], close);
            let p = vec![Piece::Text(text)];
            match letter {
                Some('x') => tokens.push(Tok::Shell(p)),
                Some('w' | 'W' | 'i' | 'I') => words_list(&mut tokens, &raw(&p)),
                Some('r') => tokens.push(Tok::Operand),
                _ => tokens.push(Tok::Str(p)),
            }
            i = end;
        } else if ch.is_alphanumeric()
            || ch == '_'
            || ch == '$'
            || (ch == '@' && matches!(lang, Lang::Perl | Lang::Ruby))
        {
            let start = i;
            i += 1;
            while i < c.len()
                && (c[i].is_alphanumeric() || c[i] == '_' || (c[i] == '$' && lang == Lang::Js))
            {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            if word.chars().all(|x| x.is_ascii_digit()) {
                tokens.push(Tok::Operand);
                continue;
            }
            // Perl's quote-like operators: q{} qq{} qw{} qx{}, and m//, s///, tr///, y///.
            if lang == Lang::Perl
                && matches!(
                    word.as_str(),
                    "q" | "qq" | "qw" | "qx" | "qr" | "m" | "s" | "tr" | "y"
                )
                && let Some(open) = perl_quote_delimiter(&c, i)
            {
                let close = closing(c[open]);
                let (text, mut end) = delimited(&c, open + 1, c[open], close);
                if matches!(word.as_str(), "s" | "tr" | "y") {
                    // The replacement part.
                    let second = if close == c[open] {
                        end.saturating_sub(1)
                    } else {
                        perl_quote_delimiter(&c, end).unwrap_or(end)
                    };
                    end = delimited(
                        &c,
                        second + 1,
                        c[second.min(c.len() - 1)],
                        closing(c[second.min(c.len() - 1)]),
                    )
                    .1;
                }
                let p = vec![Piece::Text(text)];
                match word.as_str() {
                    "q" | "qq" => tokens.push(Tok::Str(p)),
                    "qx" => tokens.push(Tok::Shell(p)),
                    "qw" => words_list(&mut tokens, &raw(&p)),
                    _ => tokens.push(Tok::Operand),
                }
                i = end;
                continue;
            }
            tokens.push(Tok::Word(word));
        } else {
            tokens.push(Tok::Punct(ch));
            i += 1;
        }
    }
    tokens
}

fn is_string_prefix(word: &str) -> bool {
    word.len() <= 2
        && word
            .chars()
            .all(|c| matches!(c.to_ascii_lowercase(), 'r' | 'b' | 'f' | 'u'))
}

/// Pushes `[ "a" , "b" ]` for a word list (`qw(a b)`, `%w[a b]`).
fn words_list(tokens: &mut Vec<Tok>, text: &str) {
    tokens.push(Tok::Punct('['));
    for (n, word) in text.split_whitespace().enumerate() {
        if n > 0 {
            tokens.push(Tok::Punct(','));
        }
        tokens.push(Tok::Str(vec![Piece::Text(word.to_owned())]));
    }
    tokens.push(Tok::Punct(']'));
}

/// Ruby's `%x(…)`, `%w[…]`, `%q{…}`, `%(…)`: the letter and the opening delimiter's index.
fn percent_literal(c: &[char], at: usize) -> Option<(Option<char>, usize)> {
    let is_open = |x: char| matches!(x, '(' | '[' | '{' | '<' | '|' | '!');
    match c.get(at + 1) {
        Some(&x) if is_open(x) => Some((None, at + 1)),
        Some(&l) if "qQwWiIxr".contains(l) && c.get(at + 2).is_some_and(|&x| is_open(x)) => {
            Some((Some(l), at + 2))
        }
        _ => None,
    }
}

/// The index of a Perl quote-like operator's opening delimiter after `at`, if one follows.
fn perl_quote_delimiter(c: &[char], at: usize) -> Option<usize> {
    let mut i = at;
    while c.get(i).is_some_and(|x| *x == ' ') {
        i += 1;
    }
    let d = *c.get(i)?;
    let excluded = d.is_alphanumeric()
        || d.is_whitespace()
        || matches!(d, '=' | ',' | ';' | ')' | ']' | '}' | '>' | '_')
        || (d == '-' && c.get(i + 1) == Some(&'>'));
    let usable = !excluded;
    // `s {…}` with a space is still an operator, but `x = 1` after `y` is not: keep to
    // delimiters right after the word or after spaces before brackets.
    (usable && (i == at || matches!(d, '{' | '(' | '[' | '<'))).then_some(i)
}

fn closing(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        '{' => '}',
        '<' => '>',
        other => other,
    }
}

/// The text up to the `close` matching an already-read `open` (nesting when they differ),
/// and the index after it.
fn delimited(c: &[char], from: usize, open: char, close: char) -> (String, usize) {
    let mut depth = 1usize;
    let mut text = String::new();
    let mut i = from;
    while i < c.len() {
        let x = c[i];
        if x == '\\' && i + 1 < c.len() {
            text.push(c[i + 1]);
            i += 2;
            continue;
        }
        if x == close {
            depth -= 1;
            if depth == 0 {
                return (text, i + 1);
            }
        } else if x == open && open != close {
            depth += 1;
        }
        text.push(x);
        i += 1;
    }
    (text, c.len())
}

#[derive(Clone, Copy)]
struct Interp {
    /// `$name`, `${…}`, `@name` (Perl, PHP).
    dollar: bool,
    /// `#{…}` (Ruby).
    hash_brace: bool,
    /// `{…}` (Python f-strings).
    brace: bool,
    escapes: bool,
}

impl Interp {
    /// JavaScript templates: `${…}`.
    fn with_template(self, js: bool) -> Interp {
        Interp {
            dollar: self.dollar || js,
            ..self
        }
    }
}

/// A string literal from `from` to its closing `quote`: its pieces and the index after it.
fn string(
    c: &[char],
    from: usize,
    quote: char,
    triple: bool,
    interp: Interp,
) -> (Vec<Piece>, usize) {
    let mut out: Vec<Piece> = Vec::new();
    let mut text = String::new();
    let mut i = from;
    let flush = |text: &mut String, out: &mut Vec<Piece>, computed: bool| {
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(text)));
        }
        if computed && out.last() != Some(&Piece::Computed) {
            out.push(Piece::Computed);
        }
    };
    while i < c.len() {
        let x = c[i];
        let at_close = x == quote
            && (!triple || (c.get(i + 1) == Some(&quote) && c.get(i + 2) == Some(&quote)));
        if at_close {
            flush(&mut text, &mut out, false);
            return (out, i + if triple { 3 } else { 1 });
        }
        if x == '\\' && i + 1 < c.len() {
            let e = c[i + 1];
            if !interp.escapes {
                text.push('\\');
                text.push(e);
                i += 2;
                continue;
            }
            match e {
                'n' => text.push('\n'),
                't' => text.push('\t'),
                'x' => {
                    let hex: String = c[i + 2..]
                        .iter()
                        .take(2)
                        .take_while(|h| h.is_ascii_hexdigit())
                        .collect();
                    if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        text.push(ch);
                        i += hex.len();
                    }
                }
                d if d.is_digit(8) => {
                    let oct: String = c[i + 1..]
                        .iter()
                        .take(3)
                        .take_while(|h| h.is_digit(8))
                        .collect();
                    if let Some(ch) = u32::from_str_radix(&oct, 8).ok().and_then(char::from_u32) {
                        text.push(ch);
                        i += oct.len() - 1;
                    }
                }
                other => text.push(other),
            }
            i += 2;
            continue;
        }
        let next = c.get(i + 1).copied();
        let opens = (interp.hash_brace && x == '#' && next == Some('{'))
            || (interp.dollar && x == '$' && next == Some('{'));
        if opens {
            flush(&mut text, &mut out, true);
            i = delimited(c, i + 2, '{', '}').1;
            continue;
        }
        if interp.brace && x == '{' {
            if next == Some('{') {
                text.push('{');
                i += 2;
                continue;
            }
            flush(&mut text, &mut out, true);
            i = delimited(c, i + 1, '{', '}').1;
            continue;
        }
        if interp.brace && x == '}' && next == Some('}') {
            text.push('}');
            i += 2;
            continue;
        }
        if interp.dollar
            && quote != '`'
            && (x == '$' || x == '@')
            && next.is_some_and(|n| n.is_alphabetic() || n == '_')
        {
            flush(&mut text, &mut out, true);
            i += 1;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            continue;
        }
        if interp.dollar
            && quote == '`'
            && x == '$'
            && next.is_some_and(|n| n.is_alphabetic() || n == '_')
        {
            // Perl and PHP backticks interpolate variables too.
            flush(&mut text, &mut out, true);
            i += 1;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            continue;
        }
        text.push(x);
        i += 1;
    }
    flush(&mut text, &mut out, false);
    (out, c.len())
}

#[cfg(test)]
mod tests {
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
