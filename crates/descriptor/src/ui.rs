//! Accessibility-tree automation (`"automation": "atspi"` on Linux): a tool is a list of
//! [`UiStep`]s, each doing one thing to one element named by a [`UiPath`] of roles and names —
//! never by coordinates.
//!
//! A path is `role[name]` segments joined by `/`: `menu[File]/menu item[Save As…]`,
//! `dialog[Find and Replace]/text[Search for]`, `text#2`. Each segment is looked for among the
//! descendants of the element the segment before it found (the first among the application's),
//! breadth first in the tree's order, so the unnamed panels and fillers between two named
//! elements are not spelled out. `[name]` matches the element's accessible name exactly (`[]`:
//! no name); without it any name does. `#n` takes the n-th match (from 1) where names repeat.
//! In a name, `\]` is `]` and `\\` is `\`. `${param}` in a name takes an argument's text after
//! the path is read, so a value can never change the path's shape.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One step of an accessibility tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiStep {
    /// What to do.
    pub action: UiAction,
    /// The element, as a [`UiPath`].
    pub path: String,
    /// `set_text`: the text (`${param}` takes an argument's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `set_value`: the number (`"${param}"` takes an argument).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// `invoke`: which of the element's actions (`click`, `activate`, `press`); the first
    /// when absent. [`UiStep::POINTER`] clicks it where it shows instead.
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_action: Option<String>,
    /// `wait` and `gone`: how long at most, in milliseconds (default [`UiStep::WAIT_MS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// A read's key in the tool's result; a tool with one read returns its value alone.
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl UiStep {
    /// How long `wait` and `gone` wait when the step does not say.
    pub const WAIT_MS: u64 = 5000;

    /// The `use` of an `invoke` that clicks the element where it shows (opening the menus
    /// it is in first) rather than calling its action: a command that opens a modal dialog
    /// runs the dialog inside the accessibility handler that called the action, and the
    /// application answers nothing more until the dialog closes.
    pub const POINTER: &'static str = "pointer";

    /// Whether the step reads rather than changes anything.
    pub fn reads(&self) -> bool {
        matches!(
            self.action,
            UiAction::ReadText | UiAction::ReadState | UiAction::ReadRows
        )
    }
}

/// What a step does to its element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UiAction {
    /// Do one of its actions (a button's click, a menu item's activation).
    Invoke,
    /// Replace its text (an entry, a document).
    SetText,
    /// Set its value (a slider, a spin button).
    SetValue,
    /// Select it among its parent's children (a list row, a tab, a combo box's item).
    Select,
    /// Turn it on or off (a check box, a toggle button) as `value` says; left as it is when
    /// `value`'s argument is not given.
    Check,
    /// Read its text (its name when it has no text).
    ReadText,
    /// Read its states (`checked`, `enabled`, `selected`, …) and value.
    ReadState,
    /// Read the names or texts of its children (a list's rows, a table's cells).
    ReadRows,
    /// Wait until it is there.
    Wait,
    /// Wait until it is gone.
    Gone,
}

impl UiAction {
    /// The step's name as descriptors spell it.
    pub fn key(self) -> &'static str {
        match self {
            Self::Invoke => "invoke",
            Self::SetText => "set_text",
            Self::SetValue => "set_value",
            Self::Select => "select",
            Self::Check => "check",
            Self::ReadText => "read_text",
            Self::ReadState => "read_state",
            Self::ReadRows => "read_rows",
            Self::Wait => "wait",
            Self::Gone => "gone",
        }
    }
}

/// An element's address: segments from the application down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiPath {
    pub segments: Vec<Segment>,
}

/// One segment of a [`UiPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The role as AT-SPI names it (`push button`, `menu item`, `text`); `*` is any.
    pub role: String,
    /// The accessible name it must have; `None`: any.
    pub name: Option<String>,
    /// Which match, from 1, where several have this role and name.
    pub nth: usize,
}

impl Segment {
    /// Whether an element with this role and name matches.
    pub fn matches(&self, role: &str, name: &str) -> bool {
        (self.role == "*" || self.role.eq_ignore_ascii_case(role.trim()))
            && self.name.as_deref().is_none_or(|want| want == name.trim())
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.role)?;
        if let Some(name) = &self.name {
            write!(f, "[{}]", name.replace('\\', "\\\\").replace(']', "\\]"))?;
        }
        if self.nth > 1 {
            write!(f, "#{}", self.nth)?;
        }
        Ok(())
    }
}

impl std::fmt::Display for UiPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, segment) in self.segments.iter().enumerate() {
            if index > 0 {
                f.write_str("/")?;
            }
            write!(f, "{segment}")?;
        }
        Ok(())
    }
}

impl UiPath {
    /// Reads a path.
    ///
    /// # Errors
    /// What is wrong with it, and where.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut segments = Vec::new();
        let mut chars = text.chars().peekable();
        loop {
            let mut role = String::new();
            while let Some(&c) = chars.peek() {
                if matches!(c, '[' | '/' | '#') {
                    break;
                }
                role.push(c);
                chars.next();
            }
            let role = role.trim().to_owned();
            if role.is_empty() {
                return Err(format!(
                    "segment {} of {text:?} has no role (write e.g. `push button[OK]`)",
                    segments.len() + 1
                ));
            }
            if role
                .chars()
                .any(|c| c == ']' || c == '\\' || c.is_control())
            {
                return Err(format!("{role:?} in {text:?} is not a role"));
            }
            let mut name = None;
            if chars.peek() == Some(&'[') {
                chars.next();
                let mut value = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some(escaped @ (']' | '\\')) => value.push(escaped),
                            _ => {
                                return Err(format!(
                                    "in {text:?}, `\\` in a name escapes only `]` or `\\`"
                                ));
                            }
                        },
                        ']' => {
                            closed = true;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                if !closed {
                    return Err(format!("a name in {text:?} has no closing `]`"));
                }
                name = Some(value);
            }
            let mut nth = 1;
            if chars.peek() == Some(&'#') {
                chars.next();
                let mut digits = String::new();
                while let Some(&c) = chars.peek() {
                    if !c.is_ascii_digit() {
                        break;
                    }
                    digits.push(c);
                    chars.next();
                }
                nth = digits
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("`#` in {text:?} takes a number from 1"))?;
            }
            segments.push(Segment { role, name, nth });
            // Spaces may stand between a segment and the `/` after it.
            while chars.peek() == Some(&' ') {
                chars.next();
            }
            match chars.next() {
                None => break,
                Some('/') => {}
                Some(other) => {
                    return Err(format!(
                        "unexpected {other:?} in {text:?} after {}",
                        segments.last().map(ToString::to_string).unwrap_or_default()
                    ));
                }
            }
        }
        Ok(Self { segments })
    }

    /// The path with each `${param}` in its names replaced by the argument's text.
    ///
    /// # Errors
    /// The name of a placeholder `lookup` has no value for.
    pub fn fill(&self, lookup: &dyn Fn(&str) -> Option<Value>) -> Result<Self, String> {
        let segments = self
            .segments
            .iter()
            .map(|segment| {
                let name = match &segment.name {
                    Some(name) => {
                        let filled = crate::template::fill_text(name, lookup)
                            .map_err(|missing| missing.to_owned())?;
                        // An argument that fills a name with nothing would name every unnamed
                        // element instead: it is taken as not given.
                        if filled.trim().is_empty() && name.contains("${") {
                            let start = name.find("${").map_or(0, |i| i + 2);
                            let end = name[start..].find('}').map_or(name.len(), |e| start + e);
                            return Err(name[start..end].to_owned());
                        }
                        Some(filled)
                    }
                    None => None,
                };
                Ok(Segment {
                    name,
                    ..segment.clone()
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { segments })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_read_and_print_back() {
        for text in [
            "menu[File]/menu item[Save As…]",
            "push button[7]",
            "text#2",
            "dialog[Find and Replace]/text[Search for]",
            "label[]",
            "*[OK]",
            r"push button[a\]b\\c]#3",
        ] {
            let path = UiPath::parse(text).expect(text);
            assert_eq!(path.to_string(), text);
        }
        let path = UiPath::parse("frame[galculator] / toggle button[+]").expect("spaces");
        assert_eq!(path.segments.len(), 2);
        assert_eq!(path.segments[1].name.as_deref(), Some("+"));
        assert_eq!(UiPath::parse("text#2").expect("nth").segments[0].nth, 2);
    }

    #[test]
    fn bad_paths_say_what_is_wrong() {
        for (text, says) in [
            ("", "no role"),
            ("[OK]", "no role"),
            ("button[OK", "closing"),
            ("button#0", "number from 1"),
            ("button#x", "number from 1"),
            (r"button[a\b]", "escapes only"),
            ("button[OK]x", "unexpected"),
            ("a//b", "no role"),
        ] {
            let error = UiPath::parse(text).expect_err(text);
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn an_argument_fills_a_name_and_never_changes_the_shape() {
        let path = UiPath::parse("list[Files]/list item[${file}]").expect("parse");
        let args = json!({"file": "a]/b#2/push button[Delete]"});
        let filled = path.fill(&|name| args.get(name).cloned()).expect("filled");
        assert_eq!(filled.segments.len(), 2);
        assert_eq!(
            filled.segments[1].name.as_deref(),
            Some("a]/b#2/push button[Delete]")
        );
        assert_eq!(filled.segments[1].nth, 1);
        assert!(path.fill(&|_| None).is_err());
        // Nothing, or only spaces, would name every unnamed element: not given.
        for empty in ["", "  "] {
            let args = json!({"file": empty});
            assert_eq!(
                path.fill(&|name| args.get(name).cloned()),
                Err("file".to_owned())
            );
        }
        // A name that is empty as written stays the unnamed element it asks for.
        let unnamed = UiPath::parse("list[Files]/list item[]").expect("parse");
        assert!(unnamed.fill(&|_| None).is_ok());
    }

    #[test]
    fn segments_match_role_and_exact_name() {
        let seg = &UiPath::parse("push button[OK]").expect("p").segments[0];
        assert!(seg.matches("push button", "OK"));
        assert!(seg.matches("Push Button", " OK "));
        assert!(!seg.matches("push button", "ok"));
        assert!(!seg.matches("toggle button", "OK"));
        let any = &UiPath::parse("text").expect("p").segments[0];
        assert!(any.matches("text", "whatever"));
        let unnamed = &UiPath::parse("text[]").expect("p").segments[0];
        assert!(unnamed.matches("text", ""));
        assert!(!unnamed.matches("text", "x"));
    }

    #[test]
    fn steps_read_from_json() {
        let step: UiStep = serde_json::from_value(
            json!({"action": "set_text", "path": "text[Name]", "text": "${name}"}),
        )
        .expect("step");
        assert_eq!(step.action, UiAction::SetText);
        assert!(!step.reads());
        assert!(serde_json::from_value::<UiStep>(json!({"action": "click", "path": "x"})).is_err());
        assert!(
            serde_json::from_value::<UiStep>(json!({"action": "invoke", "path": "x", "x": 1}))
                .is_err()
        );
    }
}
