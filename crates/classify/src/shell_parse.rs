//! The shell syntax the classifier needs: simple commands, pipelines, redirections,
//! here-documents and here-strings, substitutions, variables assigned earlier in the script,
//! word splitting of unquoted expansions by `IFS`, and brace expansion — so that a command
//! name built from pieces (`r''m`, `$a$b`, `IFS=,; $cmd`, `{rm,-rf,/}`) is seen as bash sees it.

use std::collections::HashMap;

use super::{UNKNOWN, base, is_assignment, is_downloader};

/// Marks where an unquoted expansion's value holds an `IFS` character: the word is split there.
const SPLIT: char = '\u{E002}';
/// Mark unquoted braces and commas, which brace expansion reads (quoted ones stay text).
const BRACE_OPEN: char = '\u{E003}';
const BRACE_COMMA: char = '\u{E004}';
const BRACE_CLOSE: char = '\u{E005}';
/// Brace expansion stops growing a word's expansions here: enough to see any command name.
const MOST_EXPANSIONS: usize = 64;
/// Substitutions nested deeper than this are not parsed: the parse's recursion stays bounded
/// whatever the agent sends.
const MOST_NESTING: usize = 16;

/// One simple command.
#[derive(Debug, Default)]
pub(super) struct Command {
    pub(super) words: Vec<String>,
    /// Fed by the previous command through a pipe.
    pub(super) piped: bool,
    pub(super) redirects: Vec<(String, String)>,
    /// Here-document bodies, in the order of their `<<` operators.
    pub(super) heredocs: Vec<String>,
    /// Delimiters of here-documents whose bodies start on the next line.
    heredoc_delimiters: Vec<String>,
    /// A `$(…)`/`<(…)` in its words runs a downloader.
    pub(super) substituted_downloads: bool,
}

#[derive(Debug, Default)]
pub(super) struct Parsed {
    pub(super) commands: Vec<Command>,
    /// Scripts inside `$(…)`, backticks and `<(…)`/`>(…)`.
    pub(super) nested: Vec<String>,
    pub(super) fork_bomb: Option<String>,
    /// Substitutions nest deeper than `MOST_NESTING`: not parsed further (nor judged).
    pub(super) too_deep: bool,
}

/// Splits `script` into simple commands, removing quotes and escapes and expanding the
/// variables assigned in it.
pub(super) fn parse(script: &str, vars: &mut HashMap<String, String>) -> Parsed {
    parse_nested(script, vars, 0)
}

/// `parse` of a script found `nesting` substitutions deep.
#[allow(unused_assignments)] // the macros reset state the last word does not read again
fn parse_nested(script: &str, vars: &mut HashMap<String, String>, nesting: usize) -> Parsed {
    let chars: Vec<char> = script.chars().collect();
    let mut parsed = Parsed::default();
    let mut command = Command::default();
    let mut word = String::new();
    let mut in_word = false;
    let mut pending_redirect: Option<String> = None;
    // Commands before this one have had their here-documents read.
    let mut heredocs_read = 0;
    let mut i = 0;
    macro_rules! end_word {
        () => {
            if in_word {
                let text = std::mem::take(&mut word);
                if let Some(op) = pending_redirect.take() {
                    let text = literal(&text);
                    if op == "<<" || op == "<<-" {
                        command.heredoc_delimiters.push(text.clone());
                    }
                    command.redirects.push((op, text));
                } else if command.words.iter().all(|w| is_assignment(w))
                    && is_assignment(&literal(&text))
                {
                    // Assignments are neither split nor brace-expanded.
                    command.words.push(literal(&text));
                } else {
                    command.words.extend(expand(&text));
                }
                in_word = false;
            }
        };
    }
    macro_rules! end_command {
        ($piped:expr) => {
            end_word!();
            let done = std::mem::take(&mut command);
            if done.words.iter().all(|w| is_assignment(w)) {
                for w in &done.words {
                    if let Some((k, v)) = w.split_once('=') {
                        vars.insert(k.to_owned(), v.to_owned());
                    }
                }
            }
            if !done.words.is_empty() || !done.redirects.is_empty() || !done.heredocs.is_empty() {
                parsed.commands.push(done);
            }
            command.piped = $piped;
        };
    }
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => {
                end_word!();
                i += 1;
            }
            '\n' => {
                end_command!(false);
                i += 1;
                // Here-documents start on the next line, in the order of their operators.
                let waiting: Vec<(usize, String)> = parsed.commands[heredocs_read..]
                    .iter_mut()
                    .enumerate()
                    .flat_map(|(at, c)| {
                        std::mem::take(&mut c.heredoc_delimiters)
                            .into_iter()
                            .map(move |d| (heredocs_read + at, d))
                    })
                    .collect();
                heredocs_read = parsed.commands.len();
                for (owner, delimiter) in waiting {
                    let mut body = String::new();
                    while i < chars.len() {
                        let end = chars[i..]
                            .iter()
                            .position(|&c| c == '\n')
                            .map_or(chars.len(), |p| i + p);
                        let line: String = chars[i..end].iter().collect();
                        i = (end + 1).min(chars.len().max(end + 1));
                        if line.trim() == delimiter {
                            break;
                        }
                        body.push_str(&line);
                        body.push('\n');
                    }
                    parsed.commands[owner].heredocs.push(body);
                }
            }
            '#' if !in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ';' | '&' | '|' | '(' | ')' => {
                let next = chars.get(i + 1).copied();
                if c == '&' && next == Some('>') {
                    end_word!();
                    pending_redirect = Some("&>".into());
                    i += 2;
                    continue;
                }
                let piped = c == '|' && next != Some('|');
                if c == '(' && chars.get(i + 1) == Some(&')') && in_word {
                    // `name()`: a function definition.
                    let name = word.clone();
                    i += 2;
                    let body_start = chars[i..].iter().position(|&c| c == '{').map(|p| i + p + 1);
                    if let Some(start) = body_start {
                        let end = matching(&chars, start - 1, '{', '}').unwrap_or(chars.len());
                        let body: String = chars[start..end.min(chars.len())].iter().collect();
                        let calls = body.matches(name.as_str()).count();
                        if calls >= 2 || (calls >= 1 && body.contains('&')) {
                            parsed.fork_bomb =
                                Some("a fork bomb (a function that starts itself)".into());
                        }
                        parsed.nested.push(body);
                        i = (end + 1).min(chars.len());
                    }
                    word.clear();
                    in_word = false;
                    continue;
                }
                end_command!(piped);
                i += if next == Some(c) || (c == '|' && next == Some('&')) {
                    2
                } else {
                    1
                };
            }
            '{' | '}'
                if !in_word
                    && chars
                        .get(i + 1)
                        .is_none_or(|n| n.is_whitespace() || *n == ';') =>
            {
                end_command!(false);
                i += 1;
            }
            '>' | '<' => {
                let next = chars.get(i + 1).copied();
                if next == Some('(') {
                    // Process substitution.
                    let end = matching(&chars, i + 1, '(', ')').unwrap_or(chars.len());
                    let body: String = chars[i + 2..end.min(chars.len())].iter().collect();
                    note_nested(&mut command, &mut parsed, body, nesting);
                    in_word = true;
                    word.push_str("/dev/fd/63");
                    i = end + 1;
                    continue;
                }
                // A file descriptor number before it belongs to the operator.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word!();
                let mut op = c.to_string();
                i += 1;
                while i < chars.len() && matches!(chars[i], '>' | '<' | '&' | '|' | '-') {
                    op.push(chars[i]);
                    i += 1;
                }
                pending_redirect = Some(op);
            }
            '\\' => {
                in_word = true;
                if let Some(&next) = chars.get(i + 1)
                    && next != '\n'
                {
                    word.push(next);
                }
                i += 2;
            }
            '\'' => {
                in_word = true;
                let end = chars[i + 1..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map_or(chars.len(), |p| i + 1 + p);
                word.extend(&chars[i + 1..end.min(chars.len())]);
                i = end + 1;
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    match chars[i] {
                        '\\' if matches!(chars.get(i + 1), Some('$' | '`' | '"' | '\\' | '\n')) => {
                            word.push(chars[i + 1]);
                            i += 2;
                        }
                        '$' | '`' => {
                            i = dollar(
                                &chars,
                                i,
                                &mut word,
                                &mut command,
                                &mut parsed,
                                vars,
                                (true, nesting),
                            );
                        }
                        other => {
                            word.push(other);
                            i += 1;
                        }
                    }
                }
                i += 1;
            }
            '$' | '`' => {
                in_word = true;
                i = dollar(
                    &chars,
                    i,
                    &mut word,
                    &mut command,
                    &mut parsed,
                    vars,
                    (false, nesting),
                );
            }
            other => {
                in_word = true;
                word.push(match other {
                    '{' => BRACE_OPEN,
                    ',' => BRACE_COMMA,
                    '}' => BRACE_CLOSE,
                    other => other,
                });
                i += 1;
            }
        }
    }
    end_word!();
    let last = std::mem::take(&mut command);
    if !last.words.is_empty() || !last.redirects.is_empty() {
        parsed.commands.push(last);
    }
    parsed
}

/// A word's text with the parser's marks turned back into what was typed.
fn literal(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            SPLIT => ' ',
            BRACE_OPEN => '{',
            BRACE_COMMA => ',',
            BRACE_CLOSE => '}',
            c => c,
        })
        .collect()
}

/// The words one typed word becomes: brace expansion, then splitting where an unquoted
/// expansion's value held an `IFS` character (empty fields from splitting vanish).
fn expand(text: &str) -> Vec<String> {
    let mut braced = Vec::new();
    brace_expand(text, &mut braced);
    let mut words = Vec::new();
    for word in braced {
        if word.contains(SPLIT) {
            words.extend(word.split(SPLIT).filter(|w| !w.is_empty()).map(literal));
        } else {
            words.push(literal(&word));
        }
    }
    words
}

/// Expands the first unquoted `{a,b}` group of `word` into `out`, then each result in turn.
fn brace_expand(word: &str, out: &mut Vec<String>) {
    let chars: Vec<char> = word.chars().collect();
    if out.len() < MOST_EXPANSIONS {
        for open in (0..chars.len()).filter(|&at| chars[at] == BRACE_OPEN) {
            let mut depth = 0usize;
            let mut bounds = vec![open];
            let mut close = None;
            for (at, &c) in chars.iter().enumerate().skip(open) {
                match c {
                    BRACE_OPEN => depth += 1,
                    BRACE_COMMA if depth == 1 => bounds.push(at),
                    BRACE_CLOSE => {
                        depth -= 1;
                        if depth == 0 {
                            close = Some(at);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(close) = close else { continue };
            if bounds.len() == 1 {
                continue; // `{}` or `{x}`: no alternatives, bash keeps it as text
            }
            bounds.push(close);
            for pair in bounds.windows(2) {
                let mut one: String = chars[..open].iter().collect();
                one.extend(&chars[pair[0] + 1..pair[1]]);
                one.extend(&chars[close + 1..]);
                brace_expand(&one, out);
            }
            return;
        }
    }
    out.push(word.to_owned());
}

fn note_nested(command: &mut Command, parsed: &mut Parsed, body: String, nesting: usize) {
    if nesting >= MOST_NESTING {
        parsed.too_deep = true;
        return;
    }
    let inner = parse_nested(&body, &mut HashMap::new(), nesting + 1);
    parsed.too_deep |= inner.too_deep;
    if inner
        .commands
        .iter()
        .any(|c| c.words.first().is_some_and(|w| is_downloader(&base(w))))
    {
        command.substituted_downloads = true;
    }
    parsed.nested.push(body);
}

/// Reads a `$…` or backtick expansion at `i` into `word`; returns the index after it.
fn dollar(
    chars: &[char],
    i: usize,
    word: &mut String,
    command: &mut Command,
    parsed: &mut Parsed,
    vars: &HashMap<String, String>,
    (quoted, nesting): (bool, usize),
) -> usize {
    // Outside double quotes a variable's value is split at its `IFS` characters.
    let ifs = vars.get("IFS").map_or(" \t\n", String::as_str);
    let push_value = |word: &mut String, value: &str| {
        word.extend(
            value
                .chars()
                .map(|c| if !quoted && ifs.contains(c) { SPLIT } else { c }),
        );
    };
    if chars[i] == '`' {
        let end = chars[i + 1..]
            .iter()
            .position(|&c| c == '`')
            .map_or(chars.len(), |p| i + 1 + p);
        let body: String = chars[i + 1..end.min(chars.len())].iter().collect();
        note_nested(command, parsed, body, nesting);
        word.push(UNKNOWN);
        word.push_str("$(…)");
        return end + 1;
    }
    match chars.get(i + 1) {
        Some('(') => {
            let end = matching(chars, i + 1, '(', ')').unwrap_or(chars.len());
            let body: String = chars[i + 2..end.min(chars.len())].iter().collect();
            note_nested(command, parsed, body, nesting);
            word.push(UNKNOWN);
            word.push_str("$(…)");
            end + 1
        }
        Some('\'') => {
            // ANSI-C quoting: $'…' with backslash escapes.
            let mut j = i + 2;
            while j < chars.len() && chars[j] != '\'' {
                if chars[j] == '\\' && j + 1 < chars.len() {
                    let (decoded, used) = ansi_escape(&chars[j + 1..]);
                    word.push(decoded);
                    j += 1 + used;
                } else {
                    word.push(chars[j]);
                    j += 1;
                }
            }
            j + 1
        }
        Some('{') => {
            let end = matching(chars, i + 1, '{', '}').unwrap_or(chars.len());
            let inner: String = chars[i + 2..end.min(chars.len())].iter().collect();
            let name = inner
                .split([':', '-', '=', '+', '#', '%', '/', '^', ',', '@', '[', '!'])
                .next()
                .unwrap_or_default();
            match vars.get(name) {
                // A parameter operator can turn any value into any other: unknown.
                Some(value) if inner == name => push_value(word, value),
                _ => {
                    word.push(UNKNOWN);
                    word.push_str(&format!("${{{inner}}}"));
                }
            }
            end + 1
        }
        Some(c) if c.is_ascii_alphabetic() || *c == '_' => {
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let name: String = chars[i + 1..j].iter().collect();
            match vars.get(&name) {
                Some(value) => push_value(word, value),
                None => {
                    word.push(UNKNOWN);
                    word.push('$');
                    word.push_str(&name);
                }
            }
            j
        }
        Some(c) if "@*#?$!-0123456789".contains(*c) => {
            // Positional and special parameters: known only when it runs.
            word.push(UNKNOWN);
            word.push('$');
            word.push(*c);
            i + 2
        }
        _ => {
            word.push('$');
            i + 1
        }
    }
}

fn ansi_escape(rest: &[char]) -> (char, usize) {
    match rest.first() {
        Some('n') => ('\n', 1),
        Some('t') => ('\t', 1),
        Some('r') => ('\r', 1),
        Some('e' | 'E') => ('\u{1b}', 1),
        Some(&c @ ('x' | 'u' | 'U')) => {
            let most = match c {
                'x' => 2,
                'u' => 4,
                _ => 8,
            };
            let hex: String = rest[1..]
                .iter()
                .take(most)
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            let value = u32::from_str_radix(&hex, 16)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('?');
            (value, 1 + hex.len())
        }
        Some(c) if c.is_digit(8) => {
            let oct: String = rest.iter().take(3).take_while(|c| c.is_digit(8)).collect();
            let value = u32::from_str_radix(&oct, 8)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('?');
            (value, oct.len())
        }
        Some(&c) => (c, 1),
        None => ('\\', 0),
    }
}

/// The index of the bracket closing the one at `open_at`, skipping quotes.
fn matching(chars: &[char], open_at: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open_at;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some('"') if c == '\\' => i += 1,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '\\' => i += 1,
            None if c == open => depth += 1,
            None if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            None => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(script: &str) -> Vec<Vec<String>> {
        parse(script, &mut HashMap::new())
            .commands
            .into_iter()
            .map(|c| c.words)
            .collect()
    }

    #[test]
    fn braces_expand_only_when_unquoted_and_with_a_comma() {
        assert_eq!(words("{rm,-rf,/}"), [["rm", "-rf", "/"]]);
        assert_eq!(words("r{m,} x"), [["rm", "r", "x"]]);
        assert_eq!(words("mkdir -p a/{b,c}"), [["mkdir", "-p", "a/b", "a/c"]]);
        assert_eq!(
            words("echo '{a,b}' \"{c,d}\""),
            [["echo", "{a,b}", "{c,d}"]]
        );
        assert_eq!(
            words("find . -exec gzip {} ;"),
            [["find", ".", "-exec", "gzip", "{}"]]
        );
        assert_eq!(words("cut -d, -f1"), [["cut", "-d,", "-f1"]]);
        assert_eq!(
            words("x={a,b}; echo $x"),
            [vec!["x={a,b}"], vec!["echo", "{a,b}"]]
        );
    }

    #[test]
    fn unquoted_expansions_split_on_ifs() {
        assert_eq!(words("c='rm -rf /'; $c")[1], ["rm", "-rf", "/"]);
        assert_eq!(words("c='rm -rf /'; \"$c\"")[1], ["rm -rf /"]);
        assert_eq!(words("IFS=,; c=rm,-rf,/; $c")[2], ["rm", "-rf", "/"]);
        assert_eq!(
            words("IFS=,; c=rm,-rf,/; echo \"$c\"")[2],
            ["echo", "rm,-rf,/"]
        );
    }

    #[test]
    fn here_documents_belong_to_the_command_that_reads_them() {
        let parsed = parse(
            "cat <<EOF | sh\nrm -rf x\nEOF\necho done",
            &mut HashMap::new(),
        );
        let heredocs: Vec<&Vec<String>> = parsed.commands.iter().map(|c| &c.heredocs).collect();
        assert_eq!(heredocs, [&vec!["rm -rf x\n".to_owned()], &vec![], &vec![]]);
        // A here-string is not a here-document: the next line is a command.
        let parsed = parse("bash <<< 'echo hi'\nrm -rf y", &mut HashMap::new());
        assert_eq!(parsed.commands[1].words, ["rm", "-rf", "y"]);
    }
}
