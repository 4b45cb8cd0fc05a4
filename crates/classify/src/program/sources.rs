//! Where an interpreter's program comes from: code on its command line, a file, or its
//! standard input.

use super::*;

/// Where an interpreter's program comes from.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    /// Code given on the command line (`-c`, `-e`, awk's first operand).
    pub(crate) inline: Vec<String>,
    /// The program is read from standard input: no code, script file or module was named.
    pub(crate) reads_stdin: bool,
    /// Files the program edits in place (`perl -i`, `ruby -i`).
    pub(crate) in_place: Vec<String>,
}

/// Reads an interpreter's command line: its inline code, whether it reads its program from
/// standard input, and the files it edits in place.
pub(crate) fn sources(lang: Lang, words: &[String]) -> Sources {
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
