//! Key names the agent uses (`["ctrl", "shift", "t"]`) and characters, as X keysyms.

/// The keysym of a named key, case-insensitive: modifiers, editing and navigation keys,
/// function keys, and any single character.
pub fn keysym(name: &str) -> Option<u32> {
    let lower = name.to_lowercase();
    let sym = match lower.as_str() {
        "ctrl" | "control" | "ctrl_l" => 0xffe3,
        "ctrl_r" => 0xffe4,
        "shift" | "shift_l" => 0xffe1,
        "shift_r" => 0xffe2,
        "alt" | "option" | "alt_l" => 0xffe9,
        "alt_r" | "altgr" => 0xffea,
        "cmd" | "command" | "super" | "win" | "windows" | "meta" | "super_l" => 0xffeb,
        "enter" | "return" => 0xff0d,
        "tab" => 0xff09,
        "esc" | "escape" => 0xff1b,
        "backspace" => 0xff08,
        "delete" | "del" => 0xffff,
        "insert" => 0xff63,
        "space" => 0x20,
        "up" => 0xff52,
        "down" => 0xff54,
        "left" => 0xff51,
        "right" => 0xff53,
        "home" => 0xff50,
        "end" => 0xff57,
        "pageup" | "page_up" => 0xff55,
        "pagedown" | "page_down" => 0xff56,
        "capslock" => 0xffe5,
        "printscreen" | "print" => 0xff61,
        "menu" => 0xff67,
        _ => {
            if let Some(n) = lower.strip_prefix('f').and_then(|n| n.parse::<u32>().ok())
                && (1..=24).contains(&n)
            {
                return Some(0xffbe + n - 1);
            }
            let mut chars = name.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return None;
            };
            return Some(char_keysym(c));
        }
    };
    Some(sym)
}

/// Whether a keysym is a modifier (held while the others are pressed).
pub fn is_modifier(sym: u32) -> bool {
    (0xffe1..=0xffee).contains(&sym)
}

/// The keysym that types `c`: Latin-1 directly, control characters as their keys, anything
/// else as a Unicode keysym.
pub fn char_keysym(c: char) -> u32 {
    match c {
        '\n' | '\r' => 0xff0d,
        '\t' => 0xff09,
        '\u{8}' => 0xff08,
        ' '..='~' | '\u{a0}'..='\u{ff}' => c as u32,
        _ => 0x0100_0000 | c as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_characters() {
        assert_eq!(keysym("Ctrl"), Some(0xffe3));
        assert_eq!(keysym("cmd"), Some(0xffeb));
        assert_eq!(keysym("F5"), Some(0xffc2));
        assert_eq!(keysym("a"), Some(u32::from(b'a')));
        assert_eq!(keysym("é"), Some(0xe9));
        assert_eq!(keysym("中"), Some(0x0100_4e2d));
        assert_eq!(keysym("😀"), Some(0x0101_f600));
        assert_eq!(keysym("nope"), None);
        assert!(is_modifier(0xffe1) && !is_modifier(0x61));
    }
}
