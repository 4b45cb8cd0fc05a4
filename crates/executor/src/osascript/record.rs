//! AppleScript values as `osascript -s s` prints them, turned into JSON.
//!
//! Records become objects (`{name:"Inbox", |unread count|:3}`), lists become arrays, strings,
//! numbers, booleans and `missing value` map to their JSON kin. Anything else (object
//! specifiers such as `message id 5 of mailbox "INBOX"`, dates, class constants) is kept as
//! its source text, so no output is lost.

use serde_json::{Map, Number, Value};

/// Where AppleScript's text stops making sense (positions count characters from 0).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("unexpected text at character {0}")]
    Trailing(usize),
    #[error("a value is missing at the end")]
    MissingValue,
    #[error("expected `,` or `}}` at character {0}")]
    Separator(usize),
    #[error("a record mixes keys and plain items")]
    Mixed,
    #[error("a string ends in `\\`")]
    Escape,
    #[error("a string is not closed")]
    Unclosed,
}

/// Parses one AppleScript value.
///
/// # Errors
/// Where the text stops making sense, for the error's detail.
pub fn parse(text: &str) -> Result<Value, RecordError> {
    let mut parser = Parser {
        chars: text.trim().chars().collect(),
        at: 0,
    };
    let value = parser.value()?;
    parser.skip_space();
    if parser.at < parser.chars.len() {
        return Err(RecordError::Trailing(parser.at));
    }
    Ok(value)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Result<Value, RecordError> {
        self.skip_space();
        match self.peek() {
            Some('{') => self.braces(),
            Some('"') => self.string().map(Value::String),
            Some(_) => Ok(self.bare()),
            None => Err(RecordError::MissingValue),
        }
    }

    /// `{…}`: a record when its first item has a `key:`, else a list.
    fn braces(&mut self) -> Result<Value, RecordError> {
        self.at += 1;
        self.skip_space();
        if self.peek() == Some('}') {
            self.at += 1;
            return Ok(Value::Array(Vec::new()));
        }
        let mut list = Vec::new();
        let mut record = Map::new();
        loop {
            self.skip_space();
            match self.key() {
                Some(key) => {
                    let value = self.value()?;
                    record.insert(key, value);
                }
                None => list.push(self.value()?),
            }
            self.skip_space();
            match self.peek() {
                Some(',') => self.at += 1,
                Some('}') => {
                    self.at += 1;
                    break;
                }
                _ => return Err(RecordError::Separator(self.at)),
            }
        }
        if !record.is_empty() && !list.is_empty() {
            return Err(RecordError::Mixed);
        }
        Ok(if record.is_empty() {
            Value::Array(list)
        } else {
            Value::Object(record)
        })
    }

    /// A record key followed by `:`, consumed; `None` (and nothing consumed) otherwise.
    fn key(&mut self) -> Option<String> {
        let start = self.at;
        let key = if self.peek() == Some('|') {
            let end = self.chars[start + 1..].iter().position(|&c| c == '|')?;
            self.at = start + 2 + end;
            self.chars[start + 1..start + 1 + end].iter().collect()
        } else {
            while self
                .peek()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ' ')
            {
                self.at += 1;
            }
            self.chars[start..self.at]
                .iter()
                .collect::<String>()
                .trim()
                .to_owned()
        };
        if !key.is_empty() && self.peek() == Some(':') {
            self.at += 1;
            Some(key)
        } else {
            self.at = start;
            None
        }
    }

    fn string(&mut self) -> Result<String, RecordError> {
        self.at += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let escaped = self.peek().ok_or(RecordError::Escape)?;
                    self.at += 1;
                    out.push(match escaped {
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        other => other,
                    });
                }
                other => out.push(other),
            }
        }
        Err(RecordError::Unclosed)
    }

    /// A number, `true`, `false`, `missing value`, or anything else as its source text up to
    /// the next `,` or `}` outside quotes and braces.
    fn bare(&mut self) -> Value {
        let start = self.at;
        let mut depth = 0usize;
        let mut quoted = false;
        while let Some(c) = self.peek() {
            match c {
                '"' => quoted = !quoted,
                '\\' if quoted => self.at += 1,
                '{' if !quoted => depth += 1,
                '}' if !quoted && depth == 0 => break,
                '}' if !quoted => depth -= 1,
                ',' if !quoted && depth == 0 => break,
                _ => {}
            }
            self.at += 1;
        }
        let text: String = self.chars[start..self.at.min(self.chars.len())]
            .iter()
            .collect();
        let text = text.trim();
        match text {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "missing value" | "null" => Value::Null,
            _ => number(text).unwrap_or_else(|| Value::String(text.to_owned())),
        }
    }
}

fn number(text: &str) -> Option<Value> {
    if let Ok(int) = text.parse::<i64>() {
        return Some(Value::Number(int.into()));
    }
    // AppleScript writes reals as `1.5` or `1.0E+20`.
    let real: f64 = text.replace("E+", "e").replace('E', "e").parse().ok()?;
    Number::from_f64(real).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_lists_and_scalars() {
        let text = r#"{name:"In \"box\"", |unread count|:3, ratio:1.5, big:1.0E+20, flag:true, none:missing value, tags:{"a", "b\\c"}, nested:{x:-2}, empty:{}}"#;
        assert_eq!(
            parse(text).expect("parsed"),
            json!({"name": "In \"box\"", "unread count": 3, "ratio": 1.5, "big": 1e20, "flag": true,
                   "none": null, "tags": ["a", "b\\c"], "nested": {"x": -2}, "empty": []})
        );
    }

    #[test]
    fn references_and_dates_keep_their_text() {
        let text = r#"{msg:message id 5 of mailbox "IN, BOX" of account "Work" of application "Mail", sent:date "Sunday, 22 November 2026 at 10:00:00", kind:mailbox}"#;
        assert_eq!(
            parse(text).expect("parsed"),
            json!({"msg": "message id 5 of mailbox \"IN, BOX\" of account \"Work\" of application \"Mail\"",
                   "sent": "date \"Sunday, 22 November 2026 at 10:00:00\"", "kind": "mailbox"})
        );
        assert_eq!(parse("\"plain\"").expect("string"), json!("plain"));
        assert_eq!(parse("{1, 2, 3}").expect("list"), json!([1, 2, 3]));
    }

    #[test]
    fn broken_text_is_an_error() {
        assert!(parse("{a:1").is_err());
        assert!(parse("\"open").is_err());
    }
}
