//! The line a terminal window holds, as far as the agent's input made it: what was typed
//! there since the last Return, so that a Return is judged as the whole command it submits
//! and text typed in pieces is judged as the command the pieces make.
//!
//! Keys whose effect on the line the gateway cannot follow — arrows, Home, Tab completion,
//! history search, control characters, a paste — make the line unknown: a Return that submits
//! an unknown line, and every paste, are asked every time.

use crate::desktop::keys;

/// A terminal window's pending line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    /// What the agent typed since the last submission (the part the gateway knows).
    pub text: String,
    /// Keys changed the line in ways the gateway cannot follow.
    pub unknown: bool,
}

/// What one input call does to a terminal's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The text the call is judged as (`bash_execute` of it): the lines it submits and the
    /// line it leaves pending, split where a key the gateway cannot follow was pressed.
    pub command: String,
    /// Why what it runs cannot be known, when it submits an unknown line or pastes.
    pub unknown: Option<&'static str>,
    /// The line afterwards.
    pub after: Line,
}

const EDITED: &str = "the line in that terminal was changed with keys the gateway cannot follow (arrows, Tab completion, history, control characters), so what Return runs there is not known";
const PASTED: &str = "it pastes into a terminal window, which runs whatever the clipboard or selection holds; the gateway cannot judge that text";

/// Keysyms of the keys this module tells apart.
const RETURN: u32 = 0xff0d;
const KP_ENTER: u32 = 0xff8d;
const BACKSPACE: u32 = 0xff08;
const INSERT: u32 = 0xff63;
const SHIFT: [u32; 2] = [0xffe1, 0xffe2];
const CTRL: [u32; 2] = [0xffe3, 0xffe4];

impl Effect {
    fn start(line: &Line) -> Self {
        Self {
            command: line.text.clone(),
            unknown: None,
            after: line.clone(),
        }
    }

    fn push(&mut self, c: char) {
        self.command.push(c);
        self.after.text.push(c);
    }

    fn submit(&mut self) {
        if self.after.unknown {
            self.unknown = Some(EDITED);
        }
        self.command.push('\n');
        self.after = Line::default();
    }

    fn backspace(&mut self) {
        if self.after.text.pop().is_some() {
            self.command.pop();
        }
    }

    /// A key the gateway cannot follow: the line becomes unknown, and the classifier sees
    /// what came before it and what comes after as separate commands.
    fn lose_track(&mut self) {
        self.after.unknown = true;
        if !self.command.ends_with('\n') && !self.command.is_empty() {
            self.command.push('\n');
        }
    }

    fn paste(&mut self) {
        self.unknown = Some(PASTED);
        self.lose_track();
    }
}

/// Text typed into the terminal (`type_text`).
pub fn typed(line: &Line, text: &str) -> Effect {
    let mut effect = Effect::start(line);
    for c in text.chars() {
        match c {
            // type_text skips carriage returns.
            '\r' => {}
            '\n' => effect.submit(),
            '\u{8}' | '\u{7f}' => effect.backspace(),
            c if c.is_control() => effect.lose_track(),
            c => effect.push(c),
        }
    }
    effect
}

/// Keys pressed together (`key_press`, `hotkey`), as keysyms.
pub fn pressed(line: &Line, syms: &[u32]) -> Effect {
    let mut effect = Effect::start(line);
    let shift = syms.iter().any(|s| SHIFT.contains(s));
    let ctrl = syms.iter().any(|s| CTRL.contains(s));
    let other_modifier = syms
        .iter()
        .any(|s| keys::is_modifier(*s) && !SHIFT.contains(s) && !CTRL.contains(s));
    let plain: Vec<u32> = syms
        .iter()
        .copied()
        .filter(|s| !keys::is_modifier(*s))
        .collect();
    let [key] = plain[..] else {
        // Modifiers alone change nothing; a chord of several keys is not followed.
        if !plain.is_empty() {
            effect.lose_track();
            if plain.iter().any(|k| *k == RETURN || *k == KP_ENTER) {
                effect.unknown = Some(EDITED);
            }
        }
        return effect;
    };
    let letter = char::from_u32(key).filter(char::is_ascii_alphabetic);
    let lower = letter.map(|c| c.to_ascii_lowercase());
    match (ctrl, shift, other_modifier) {
        (false, _, false) if key == RETURN || key == KP_ENTER => effect.submit(),
        (true, false, false) if matches!(lower, Some('m' | 'j')) => effect.submit(),
        // The paste keys of terminals (Ctrl+Shift+V, Shift+Insert) and of shells (Ctrl+Y).
        (true, true, false) if lower == Some('v') => effect.paste(),
        (_, true, false) if key == INSERT => effect.paste(),
        (true, false, false) if matches!(lower, Some('v' | 'y')) => effect.paste(),
        // Ctrl+C drops the line.
        (true, false, false) if lower == Some('c') => effect.after = Line::default(),
        (false, false, false) if key == BACKSPACE => effect.backspace(),
        (false, shift, false) => match typed_char(key, shift) {
            Some(c) => effect.push(c),
            None => effect.lose_track(),
        },
        _ => effect.lose_track(),
    }
    effect
}

/// A click that may paste (a right click opens a terminal's menu, with Paste in it; a drag
/// drops text).
pub fn pasted(line: &Line) -> Effect {
    let mut effect = Effect::start(line);
    effect.paste();
    effect
}

/// The character a printable key types, with Shift only for letters (what Shift does to
/// other keys depends on the keyboard layout).
fn typed_char(sym: u32, shift: bool) -> Option<char> {
    let c = match sym {
        0x20..=0x7e | 0xa0..=0xff => char::from_u32(sym)?,
        0x0100_0000..=0x0110_ffff => char::from_u32(sym - 0x0100_0000)?,
        _ => return None,
    };
    if c.is_control() {
        return None;
    }
    match (shift, c.is_ascii_alphabetic()) {
        (false, _) => Some(c),
        (true, true) => Some(c.to_ascii_uppercase()),
        (true, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syms(names: &[&str]) -> Vec<u32> {
        names
            .iter()
            .map(|n| keys::keysym(n).expect("a key"))
            .collect()
    }

    #[test]
    fn text_typed_in_pieces_is_judged_as_the_line_it_makes() {
        let first = typed(&Line::default(), "rm -r");
        assert_eq!(first.command, "rm -r");
        assert_eq!(first.after.text, "rm -r");
        let second = typed(&first.after, "f /x\n");
        assert_eq!(second.command, "rm -rf /x\n");
        assert_eq!(second.after, Line::default());
        assert_eq!(second.unknown, None);
        // A Return alone submits the whole pending line.
        let pending = typed(&Line::default(), "rm -rf /x").after;
        let enter = pressed(&pending, &syms(&["enter"]));
        assert_eq!(enter.command, "rm -rf /x\n");
        assert_eq!(enter.unknown, None);
        // Backspace edits what is known.
        let fixed = typed(&Line::default(), "lss\u{8} -l\n");
        assert_eq!(fixed.command, "ls -l\n");
        let key = pressed(&typed(&Line::default(), "lsx").after, &syms(&["backspace"]));
        assert_eq!(key.after.text, "ls");
        // Keys typed one by one, Shift included.
        let mut line = Line::default();
        for k in [&["r"][..], &["shift", "m"], &["space"]] {
            line = pressed(&line, &syms(k)).after;
        }
        assert_eq!(line.text, "rM ");
    }

    #[test]
    fn lines_the_gateway_cannot_follow_are_asked_when_submitted() {
        // History, completion, cursor keys: the Return after them runs an unknown line.
        for keys in [
            &["up"][..],
            &["tab"],
            &["home"],
            &["ctrl", "r"],
            &["alt", "b"],
        ] {
            let edited = pressed(
                &typed(&Line::default(), "echo rm -rf /x").after,
                &syms(keys),
            );
            assert!(edited.after.unknown, "{keys:?}");
            assert_eq!(edited.unknown, None, "{keys:?}: nothing is submitted yet");
            let enter = pressed(&edited.after, &syms(&["enter"]));
            assert!(enter.unknown.is_some(), "{keys:?}");
            assert_eq!(enter.after, Line::default());
        }
        // Control characters inside typed text (Ctrl+U kills the line: `echo ` is gone).
        let killed = typed(&Line::default(), "echo \u{15}rm -rf /x\n");
        assert!(killed.unknown.is_some());
        assert_eq!(killed.command, "echo \nrm -rf /x\n");
        // A submitted line resets what is known.
        let after = pressed(&killed.after, &syms(&["enter"]));
        assert_eq!(after.unknown, None);
        // Ctrl+C drops the line.
        let dropped = pressed(
            &typed(&Line::default(), "rm -rf /x").after,
            &syms(&["ctrl", "c"]),
        );
        assert_eq!(dropped.after, Line::default());
        // Ctrl+M and Ctrl+J are Return.
        let ctrl_m = pressed(
            &typed(&Line::default(), "rm -rf /x").after,
            &syms(&["ctrl", "m"]),
        );
        assert_eq!(ctrl_m.command, "rm -rf /x\n");
    }

    #[test]
    fn pastes_are_always_unknown() {
        for keys in [
            &["ctrl", "shift", "v"][..],
            &["shift", "insert"],
            &["ctrl", "y"],
            &["ctrl", "v"],
        ] {
            let paste = pressed(&Line::default(), &syms(keys));
            assert!(paste.unknown.is_some(), "{keys:?}");
            assert!(paste.after.unknown, "{keys:?}");
        }
        assert!(pasted(&Line::default()).unknown.is_some());
    }
}
