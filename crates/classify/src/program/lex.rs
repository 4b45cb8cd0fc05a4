//! The lexer of the program classifier: a script of a known language as tokens — words,
//! strings (with what they interpolate), punctuation — enough to find calls and their
//! arguments, not a parser.

use super::*;

/// Splits code into string literals, names, operands and punctuation.
pub(super) fn lex(lang: Lang, code: &str) -> Vec<Tok> {
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

pub(super) fn is_string_prefix(word: &str) -> bool {
    word.len() <= 2
        && word
            .chars()
            .all(|c| matches!(c.to_ascii_lowercase(), 'r' | 'b' | 'f' | 'u'))
}

/// Pushes `[ "a" , "b" ]` for a word list (`qw(a b)`, `%w[a b]`).
pub(super) fn words_list(tokens: &mut Vec<Tok>, text: &str) {
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
pub(super) fn percent_literal(c: &[char], at: usize) -> Option<(Option<char>, usize)> {
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
pub(super) fn perl_quote_delimiter(c: &[char], at: usize) -> Option<usize> {
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

pub(super) fn closing(open: char) -> char {
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
pub(super) fn delimited(c: &[char], from: usize, open: char, close: char) -> (String, usize) {
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
pub(super) struct Interp {
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
    pub(super) fn with_template(self, js: bool) -> Interp {
        Interp {
            dollar: self.dollar || js,
            ..self
        }
    }
}

/// A string literal from `from` to its closing `quote`: its pieces and the index after it.
pub(super) fn string(
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
