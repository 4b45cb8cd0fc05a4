//! What a config mistake should have been: an unknown key is matched against every key the
//! config schema knows, so a key put at the wrong level (`allow_http_loopback` at the top) is
//! answered with its place (`web.allow_http_loopback`) and a misspelt one with its spelling.
//! Also `$comment` notes: accepted at any level, and blanked out before the config is read.

use serde_json::Value;

/// The key people write notes under, at any level of config.json (JSON has no comments; JSON
/// Schema gives this name to notes).
pub const COMMENT: &str = "$comment";

/// An unknown key of a config document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// Its place, as a JSON pointer (`/allow_http_loopback`).
    pub pointer: String,
    pub key: String,
    /// The dotted path of what it should be (`web.allow_http_loopback`), when one is near.
    pub meant: Option<String>,
}

impl Unknown {
    /// `unknown key `k` at the top level; did you mean `web.k`?`
    pub fn describe(&self) -> String {
        let at = match self.pointer.rsplit_once('/') {
            Some(("", _)) | None => "at the top level".to_owned(),
            Some((parent, _)) => format!("in `{}`", dotted(parent)),
        };
        match &self.meant {
            Some(meant) => format!("unknown key `{}` {at}; did you mean `{meant}`?", self.key),
            None => format!("unknown key `{}` {at}", self.key),
        }
    }
}

fn dotted(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

/// Every unknown key of `value` under `schema` (the config schema), each with what it most
/// likely meant: the same key elsewhere in the schema, else the nearest spelling beside it.
pub fn unknown_keys(schema: &Value, value: &Value) -> Vec<Unknown> {
    let mut known = Vec::new();
    paths(schema, schema, &mut Vec::new(), &mut known, 0);
    let mut walk = Walk {
        root: schema,
        known: &known,
        at: Vec::new(),
        found: Vec::new(),
    };
    walk.object(schema, value, 0);
    walk.found
}

/// `node` with its `$ref` followed (`#/$defs/Name`), and its one non-null alternative when it
/// is an `anyOf`/`oneOf` of a type and null (an optional section).
fn resolved<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    let mut node = node;
    for _ in 0..8 {
        if let Some(target) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        {
            node = target;
            continue;
        }
        let alternatives = node
            .get("anyOf")
            .or_else(|| node.get("oneOf"))
            .or_else(|| node.get("allOf"))
            .and_then(Value::as_array);
        if let Some(alternatives) = alternatives {
            let objects: Vec<&Value> = alternatives
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [only] = objects.as_slice() {
                node = only;
                continue;
            }
        }
        break;
    }
    node
}

/// Every key path the schema names (a map's keys as `*`).
fn paths(
    root: &Value,
    node: &Value,
    at: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
    depth: usize,
) {
    if depth > 12 {
        return;
    }
    let node = resolved(root, node);
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (key, child) in properties {
            at.push(key.clone());
            out.push(at.clone());
            paths(root, child, at, out, depth + 1);
            at.pop();
        }
    }
    if let Some(map) = node.get("additionalProperties").filter(|v| v.is_object()) {
        at.push("*".to_owned());
        paths(root, map, at, out, depth + 1);
        at.pop();
    }
}

/// A walk of a config value beside the schema, collecting its unknown keys.
struct Walk<'a> {
    root: &'a Value,
    /// Every key path the schema has.
    known: &'a [Vec<String>],
    /// Where the walk is.
    at: Vec<String>,
    found: Vec<Unknown>,
}

impl Walk<'_> {
    fn object(&mut self, schema: &Value, value: &Value, depth: usize) {
        if depth > 12 {
            return;
        }
        let (root, known) = (self.root, self.known);
        let schema = resolved(root, schema);
        let Some(object) = value.as_object() else {
            return;
        };
        let properties = schema.get("properties").and_then(Value::as_object);
        let map = schema.get("additionalProperties").filter(|v| v.is_object());
        for (key, child) in object {
            if key == COMMENT {
                continue;
            }
            self.at.push(key.clone());
            match (properties.and_then(|p| p.get(key)), map) {
                (Some(child_schema), _) | (None, Some(child_schema)) => {
                    self.object(child_schema, child, depth + 1);
                }
                (None, None) if properties.is_some() => self.found.push(Unknown {
                    pointer: format!("/{}", self.at.join("/")),
                    key: key.clone(),
                    meant: meant(key, &self.at[..self.at.len() - 1], properties, known),
                }),
                (None, None) => {}
            }
            self.at.pop();
        }
    }
}

/// What `key` under `parent` most likely meant: the same key at another place (the nearest
/// to `parent` first), else a sibling spelt nearly the same.
fn meant(
    key: &str,
    parent: &[String],
    siblings: Option<&serde_json::Map<String, Value>>,
    known: &[Vec<String>],
) -> Option<String> {
    let elsewhere = known
        .iter()
        .filter(|path| {
            path.last().is_some_and(|last| last == key) && !path.contains(&"*".to_owned())
        })
        .min_by_key(|path| {
            let shared = path.iter().zip(parent).take_while(|(a, b)| a == b).count();
            (usize::MAX - shared, path.len())
        });
    if let Some(path) = elsewhere {
        return Some(path.join("."));
    }
    let nearest = siblings?
        .keys()
        .map(|sibling| {
            (
                strsim::normalized_damerau_levenshtein(key, sibling),
                sibling,
            )
        })
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let mut path = parent.to_vec();
    path.push(nearest.1.clone());
    Some(path.join("."))
}

/// `bytes` (valid JSON) with every `"$comment"` member blanked out with spaces, newlines kept:
/// what is left reads as before, each remaining character at its line and column, so an
/// error in the rest is still reported where it is.
pub fn blank_comments(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    // For each open container: `None` an array, `Some(waiting for a key)` an object.
    let mut stack: Vec<Option<bool>> = Vec::new();
    let mut i = 0;
    while i < out.len() {
        match out[i] {
            b'{' => stack.push(Some(true)),
            b'[' => stack.push(None),
            b'}' | b']' => {
                stack.pop();
            }
            b':' => {
                if let Some(Some(key)) = stack.last_mut() {
                    *key = false;
                }
            }
            b',' => {
                if let Some(Some(key)) = stack.last_mut() {
                    *key = true;
                }
            }
            b'"' => {
                let end = string_end(&out, i);
                let is_key = matches!(stack.last(), Some(Some(true)));
                if is_key && out.get(i + 1..end.saturating_sub(1)) == Some(COMMENT.as_bytes()) {
                    i = blank_member(&mut out, i, end);
                } else {
                    i = end;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The index after the string that starts at `start` (a `"`).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The index after the value that starts at `start`.
fn value_end(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i = string_end(bytes, i);
                if depth == 0 {
                    return i;
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b',' if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// Blanks the member whose key spans `key_start..key_end`, with the comma that separates it
/// from the next member (or from the one before, when it is the last); the index to go on at.
fn blank_member(bytes: &mut [u8], key_start: usize, key_end: usize) -> usize {
    let colon = skip_space(bytes, key_end);
    let value = skip_space(bytes, colon + 1);
    let end = value_end(bytes, value);
    let after = skip_space(bytes, end);
    let stop = if bytes.get(after) == Some(&b',') {
        after + 1
    } else {
        // The last member: the comma before it goes instead.
        let mut back = key_start;
        while back > 0 && bytes[back - 1].is_ascii_whitespace() {
            back -= 1;
        }
        if back > 0 && bytes[back - 1] == b',' {
            bytes[back - 1] = b' ';
        }
        end
    };
    for byte in &mut bytes[key_start..stop] {
        if *byte != b'\n' && *byte != b'\r' {
            *byte = b' ';
        }
    }
    stop
}

/// `schema` with a `$comment` note allowed in every object it describes.
pub fn allow_comments(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let is_object = map.get("type").and_then(Value::as_str) == Some("object")
                || map.contains_key("properties");
            for child in map.values_mut() {
                allow_comments(child);
            }
            if is_object {
                let patterns = map
                    .entry("patternProperties")
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Some(patterns) = patterns.as_object_mut() {
                    patterns.insert(
                        "^\\$comment$".to_owned(),
                        serde_json::json!({"type": "string", "description": "A note for people; the gateway ignores it."}),
                    );
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(allow_comments),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn comments_are_blanked_in_place() {
        let text = "{\n  \"$comment\": \"a note, with {braces} and \\\"quotes\\\"\",\n  \"a\": [1, {\"$comment\": [\"x\"]}],\n  \"b\": {\"c\": 1, \"$comment\": \"last\"},\n  \"$comment\": \"end\"\n}";
        let blanked = blank_comments(text.as_bytes());
        let value: Value = serde_json::from_slice(&blanked).expect("still JSON");
        assert_eq!(value, json!({"a": [1, {}], "b": {"c": 1}}));
        assert_eq!(blanked.len(), text.len());
        // Lines stay where they were.
        assert_eq!(
            String::from_utf8_lossy(&blanked).lines().count(),
            text.lines().count()
        );
        // A string value "$comment" in an array is no key and stays.
        let kept = blank_comments(br#"{"a": ["$comment", "x"], "$comment": "y"}"#);
        let value: Value = serde_json::from_slice(&kept).expect("JSON");
        assert_eq!(value, json!({"a": ["$comment", "x"]}));
    }

    #[test]
    fn a_key_at_the_wrong_level_is_answered_with_its_place() {
        let schema = crate::config::Config::schema();
        let found = unknown_keys(
            &schema,
            &json!({"allow_http_loopback": true, "web": {"allow_http_loopbak": true}, "local": {"sandbox": {"alowed_directories": []}}, "$comment": "x"}),
        );
        let described: Vec<String> = found.iter().map(Unknown::describe).collect();
        assert!(
            described.contains(&"unknown key `allow_http_loopback` at the top level; did you mean `web.allow_http_loopback`?".to_owned()),
            "{described:?}"
        );
        assert!(
            described.contains(&"unknown key `allow_http_loopbak` in `web`; did you mean `web.allow_http_loopback`?".to_owned()),
            "{described:?}"
        );
        assert!(
            described.contains(&"unknown key `alowed_directories` in `local.sandbox`; did you mean `local.sandbox.allowed_directories`?".to_owned()),
            "{described:?}"
        );
        assert_eq!(found.len(), 3);
        assert!(
            unknown_keys(&schema, &json!({"zzzz": 1}))[0]
                .meant
                .is_none()
        );
    }
}
