//! Text from clients and descriptors made safe to show a person: every character that a
//! terminal would obey (ESC, BEL, CR, C1 controls — a rewritten line, a clipboard write) or
//! that hides or reorders text on screen (bidi controls, zero-width and other invisible format
//! characters, Unicode tag characters) is replaced by a visible escape such as `\u202e`, so
//! the person sees that something is there without it acting.
//!
//! The escapes are JSON's (`\u001b`, `\r`, a surrogate pair past U+FFFF): inside a JSON string
//! they mean exactly the character they replace, so JSON printed through this stays valid and
//! says the same thing, while a terminal shows plain ASCII.
//!
//! Applied where text is rendered (CLI lines, dialogs, notifications, elicitation messages),
//! never where it is stored: the audit log and the calls keep exactly what was sent.
//!
//! ```
//! use aai_descriptor::visible::{visible, visible_lines};
//! assert_eq!(visible("ok\u{1b}]52;c;aGk=\u{7}"), "ok\\u001b]52;c;aGk=\\u0007");
//! assert_eq!(visible("txt.\u{202e}exe"), "txt.\\u202eexe");
//! assert_eq!(visible_lines("one\ntwo\r"), "one\ntwo\\r");
//! ```

use std::borrow::Cow;
use std::fmt::Write as _;

/// Every character that must not reach a person's screen as itself, as inclusive ranges.
/// The dashboard's script is served with a character class made from this same table.
pub const HIDDEN: &[(char, char)] = &[
    // C0, DEL, C1: what terminals execute.
    ('\u{0}', '\u{1f}'),
    ('\u{7f}', '\u{9f}'),
    // Invisible or joining marks that hide text between visible letters.
    ('\u{ad}', '\u{ad}'),
    ('\u{34f}', '\u{34f}'),
    ('\u{115f}', '\u{1160}'),
    ('\u{17b4}', '\u{17b5}'),
    ('\u{180b}', '\u{180f}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{ffa0}', '\u{ffa0}'),
    // Unicode format characters (category Cf), bidi controls among them.
    ('\u{600}', '\u{605}'),
    ('\u{61c}', '\u{61c}'),
    ('\u{6dd}', '\u{6dd}'),
    ('\u{70f}', '\u{70f}'),
    ('\u{890}', '\u{891}'),
    ('\u{8e2}', '\u{8e2}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{202a}', '\u{202e}'),
    ('\u{2060}', '\u{206f}'),
    ('\u{feff}', '\u{feff}'),
    ('\u{fff9}', '\u{fffb}'),
    ('\u{110bd}', '\u{110bd}'),
    ('\u{110cd}', '\u{110cd}'),
    ('\u{13430}', '\u{1343f}'),
    ('\u{1bca0}', '\u{1bca3}'),
    ('\u{1d173}', '\u{1d17a}'),
    // Line and paragraph separators: a new line the reader did not expect.
    ('\u{2028}', '\u{2029}'),
    // Tag characters and variation selectors: invisible text riding on visible text.
    ('\u{e0000}', '\u{e007f}'),
    ('\u{e0100}', '\u{e01ef}'),
    // Noncharacters: no glyph, and some renderers drop them silently.
    ('\u{fffe}', '\u{ffff}'),
];

/// Whether `c` must not reach a person's screen as itself.
pub fn is_hidden(c: char) -> bool {
    if (' '..='~').contains(&c) {
        return false;
    }
    HIDDEN
        .iter()
        .any(|(first, last)| (*first..=*last).contains(&c))
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_hidden(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_hidden(c) || keep(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    Cow::Owned(out)
}

/// `text` as one line a person can read: every hidden character, new lines and tabs too,
/// shown as an escape. For names, ids, labels and table cells.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

/// `text` as lines a person can read: like [`visible`], but new lines and tabs are kept, for
/// a text meant to span lines (a question, a notification body). A carriage return is still
/// escaped: it would let the rest of a line overwrite what came before.
pub fn visible_lines(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_escaped_and_plain_text_is_borrowed() {
        let hostile =
            "evil\u{1b}[2K\rRisk: low\u{7}\u{1b}]52;c;cm0gLXJmIH4=\u{1b}\\\u{9b}31m\u{7f}";
        let shown = visible(hostile);
        assert!(
            !shown.contains(['\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{7f}']),
            "{shown}"
        );
        assert_eq!(
            shown,
            r"evil\u001b[2K\rRisk: low\u0007\u001b]52;c;cm0gLXJmIH4=\u001b\\u009b31m\u007f"
        );
        assert!(matches!(visible("plain 文字 ✓ é"), Cow::Borrowed(_)));
        assert_eq!(visible("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(visible_lines("a\nb\tc\r\n"), "a\nb\tc\\r\n");
    }

    #[test]
    fn bidi_and_invisible_characters_are_shown() {
        for c in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{61c}', '\u{200b}', '\u{200c}',
            '\u{200d}', '\u{2060}', '\u{feff}', '\u{2028}',
        ] {
            let text = format!("a{c}b");
            let shown = visible_lines(&text);
            assert_eq!(shown, format!("a\\u{:04x}b", u32::from(c)), "{c:?}");
        }
        assert_eq!(visible("a\u{e0041}b"), r"a\udb40\udc41b");
    }

    /// JSON printed through the sanitizer is still JSON, and means the same.
    #[test]
    fn json_stays_json_and_means_the_same() {
        let value = serde_json::json!({"name": "x\u{202e}y\u{1b}z\u{e0041}\u{9b}", "n": [1, 2]});
        for text in [
            value.to_string(),
            serde_json::to_string_pretty(&value).unwrap_or_default(),
        ] {
            let shown = visible_lines(&text);
            assert!(shown.is_ascii(), "{shown}");
            let back: serde_json::Value = serde_json::from_str(&shown).expect("still JSON");
            assert_eq!(back, value);
        }
    }

    #[test]
    fn the_escape_is_plain_ascii_so_showing_twice_changes_nothing() {
        let once = visible("\u{1b}\u{202e}x\u{e0020}").into_owned();
        assert_eq!(once, r"\u001b\u202ex\udb40\udc20");
        assert!(once.is_ascii());
        assert_eq!(visible(&once), once);
    }
}
