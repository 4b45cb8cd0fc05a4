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

/// Binds a template to arguments, as data: a string that is exactly `"${name}"` (at any
/// depth of arrays and objects) becomes that argument's JSON value, type and all; a string
/// with placeholders among other text becomes a string with each argument's text in place
/// (strings as they are, other values as JSON). Nothing else changes.
///
/// # Errors
/// The name of a placeholder `lookup` has no value for.
pub fn bind<'t>(
    template: &'t Value,
    lookup: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value, &'t str> {
    match template {
        Value::String(text) => {
            if let Some(name) = whole_placeholder(text) {
                return lookup(name).ok_or(name);
            }
            fill_text(text, lookup).map(Value::String)
        }
        Value::Array(items) => items
            .iter()
            .map(|item| bind(item, lookup))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        Value::Object(map) => map
            .iter()
            .map(|(key, item)| Ok((key.clone(), bind(item, lookup)?)))
            .collect::<Result<serde_json::Map<_, _>, _>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

/// `text` with each `${name}` replaced by the argument's text (see [`bind`]).
///
/// # Errors
/// The name of a placeholder `lookup` has no value for.
pub fn fill_text<'t>(
    text: &'t str,
    lookup: &dyn Fn(&str) -> Option<Value>,
) -> Result<String, &'t str> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        out.push_str(&rest[..start]);
        out.push_str(&as_text(&lookup(name).ok_or(name)?));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// An argument as text: a string as it is, anything else as JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Escapes one JSON pointer segment (RFC 6901).
pub fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn bind_keeps_types_and_fills_text_as_data() {
        let args = json!({"n": 3, "s": "${x}\"'", "b": true});
        let lookup = |name: &str| args.get(name).cloned();
        let template =
            json!({"whole": "${n}", "text": "n=${n}, s=${s}", "list": ["${b}", 1], "fixed": 2});
        assert_eq!(
            bind(&template, &lookup).expect("bound"),
            json!({"whole": 3, "text": "n=3, s=${x}\"'", "list": [true, 1], "fixed": 2})
        );
        assert_eq!(bind(&json!(["${missing}"]), &lookup), Err("missing"));
    }

    #[test]
    fn pointers_locate_strings() {
        let value = json!({"extras": {"a/b": "${x}"}, "args": ["${y}", 1]});
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
