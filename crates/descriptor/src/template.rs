//! `${param}` placeholders in descriptor templates.
//!
//! Executors never splice argument values into program text; this module only finds the
//! placeholders so they can be checked at load time and bound to arguments as data.

use serde_json::Value;

/// The names of all `${name}` placeholders in `text`, in order of appearance.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                names.push(&after[..end]);
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    names
}

/// The parameter name when `text` is exactly one placeholder, `"${name}"`.
pub fn whole_placeholder(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("${")?.strip_suffix('}')?;
    (!inner.contains('}') && !inner.contains("${")).then_some(inner)
}

/// Every placeholder in a JSON value, with the JSON pointer of the string that holds it.
pub fn placeholders_in_value<'a>(
    value: &'a Value,
    pointer: &str,
    out: &mut Vec<(String, &'a str)>,
) {
    match value {
        Value::String(text) => {
            for name in placeholders(text) {
                out.push((pointer.to_owned(), name));
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                placeholders_in_value(item, &format!("{pointer}/{index}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                placeholders_in_value(item, &format!("{pointer}/{}", escape_pointer(key)), out);
            }
        }
        _ => {}
    }
}

/// Escapes one JSON pointer segment (RFC 6901).
pub fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_placeholders_in_order() {
        assert_eq!(
            placeholders("to=${to}&s=${subject}${x}"),
            vec!["to", "subject", "x"]
        );
        assert_eq!(placeholders("no placeholders $ {x} ${"), Vec::<&str>::new());
    }

    #[test]
    fn whole_placeholder_only_matches_single() {
        assert_eq!(whole_placeholder("${a}"), Some("a"));
        assert_eq!(whole_placeholder("x${a}"), None);
        assert_eq!(whole_placeholder("${a}${b}"), None);
    }

    #[test]
    fn pointers_locate_strings() {
        let value = serde_json::json!({"extras": {"a/b": "${x}"}, "args": ["${y}", 1]});
        let mut out = Vec::new();
        placeholders_in_value(&value, "", &mut out);
        assert_eq!(
            out,
            vec![
                ("/extras/a~1b".to_owned(), "x"),
                ("/args/0".to_owned(), "y")
            ]
        );
    }
}
