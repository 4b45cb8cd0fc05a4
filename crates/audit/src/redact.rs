//! Redaction: secrets never reach the audit log.

use serde_json::{Map, Value};

/// What replaces a redacted value.
pub const REDACTED: &str = "[redacted]";

/// Argument names that hold secrets, whatever the schema says (compared without case,
/// `-` and `_`).
const SECRET_NAMES: [&str; 12] = [
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "auth",
    "cookie",
    "clientsecret",
];

fn is_secret_name(name: &str) -> bool {
    let simple: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_NAMES
        .iter()
        .any(|secret| simple == *secret || simple.ends_with(secret))
}

/// Whether a string looks like a credential: a bearer/basic header value, a JWT, or a long
/// unbroken run of key characters with a known prefix.
fn looks_like_secret(text: &str) -> bool {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    if lower.starts_with("bearer ") || lower.starts_with("basic ") || lower.starts_with("token ") {
        return true;
    }
    let parts: Vec<&str> = trimmed.split('.').collect();
    if parts.len() == 3 && trimmed.starts_with("eyJ") && parts.iter().all(|p| p.len() >= 4) {
        return true;
    }
    const PREFIXES: [&str; 9] = [
        "sk-",
        "sk_live_",
        "pk_live_",
        "ghp_",
        "gho_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "AKIA",
    ];
    let keyish = trimmed.len() >= 20 && !trimmed.contains(char::is_whitespace);
    keyish && PREFIXES.iter().any(|p| trimmed.starts_with(p))
}

/// How many characters of a long value the log keeps.
const KEPT_PREFIX: usize = 64;

/// A copy of `value` whose strings longer than `max_chars` are replaced by their first
/// characters, their size and their SHA-256, at any depth: the log can prove what was sent
/// without holding it.
pub fn shrink(value: &Value, max_chars: usize) -> Value {
    match value {
        Value::String(text) if text.chars().count() > max_chars => {
            use sha2::Digest;
            let prefix: String = text.chars().take(KEPT_PREFIX.min(max_chars)).collect();
            let digest = sha2::Sha256::digest(text.as_bytes());
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            Value::String(format!(
                "{prefix}… [{} chars, {} bytes, sha256:{hex}]",
                text.chars().count(),
                text.len()
            ))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| shrink(v, max_chars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), shrink(v, max_chars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A copy of `args` fit for the log. Removed: values of parameters the schema marks
/// `writeOnly` or `"sensitive": true`, values of secret-looking names, and strings that look
/// like tokens or keys, at any depth.
pub fn redact(args: &Value, schema: Option<&Value>) -> Value {
    match args {
        Value::Object(map) => {
            let properties = schema.and_then(|s| s.get("properties"));
            let mut out = Map::with_capacity(map.len());
            for (name, value) in map {
                let field_schema = properties.and_then(|p| p.get(name));
                let marked = field_schema.is_some_and(|s| {
                    s.get("writeOnly") == Some(&Value::Bool(true))
                        || s.get("sensitive") == Some(&Value::Bool(true))
                });
                let cleaned = if marked || is_secret_name(name) {
                    Value::String(REDACTED.to_owned())
                } else {
                    redact(value, field_schema)
                };
                out.insert(name.clone(), cleaned);
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            Value::Array(items.iter().map(|item| redact(item, item_schema)).collect())
        }
        Value::String(text) if looks_like_secret(text) => Value::String(REDACTED.to_owned()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_kept_as_size_hash_and_prefix() {
        let big = "x".repeat(5000) + "tail";
        let shrunk = shrink(
            &serde_json::json!({"path": "/a", "content": big, "list": [big]}),
            100,
        );
        let content = shrunk["content"].as_str().expect("text");
        assert!(content.starts_with(&"x".repeat(64)), "{content}");
        assert!(
            content.contains("[5004 chars, 5004 bytes, sha256:"),
            "{content}"
        );
        assert!(!content.contains("tail"));
        assert_eq!(shrunk["list"][0], shrunk["content"]);
        assert_eq!(shrunk["path"], "/a");
        let other = shrink(&serde_json::json!("x".repeat(5000) + "tall"), 100);
        assert_ne!(
            other, shrunk["content"],
            "different content, different hash"
        );
    }
    use serde_json::json;

    #[test]
    fn schema_marks_names_and_shapes_are_redacted() {
        let schema = json!({"type": "object", "properties": {
            "pin": {"type": "string", "writeOnly": true},
            "note": {"type": "string", "sensitive": true},
            "nested": {"type": "object", "properties": {"code": {"type": "string", "sensitive": true}}}
        }});
        let args = json!({
            "pin": "1234", "note": "private", "nested": {"code": "x", "keep": "y"},
            "password": "hunter2", "api_key": "k", "X-Auth-Token": "t", "client_secret": "s",
            "header": "Bearer abc.def", "jwt": "eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl",
            "gh": "ghp_0123456789abcdefghijABCDEFGHIJ", "list": ["sk-0123456789abcdefghijkl", "fine"],
            "subject": "Hello", "count": 3
        });
        let out = redact(&args, Some(&schema));
        for field in [
            "pin",
            "note",
            "password",
            "api_key",
            "X-Auth-Token",
            "client_secret",
            "header",
            "jwt",
            "gh",
        ] {
            assert_eq!(out[field], json!(REDACTED), "{field}");
        }
        assert_eq!(out["nested"], json!({"code": REDACTED, "keep": "y"}));
        assert_eq!(out["list"], json!([REDACTED, "fine"]));
        assert_eq!(
            (out["subject"].clone(), out["count"].clone()),
            (json!("Hello"), json!(3))
        );
    }

    #[test]
    fn ordinary_words_are_kept() {
        let args = json!({"author": "Ann", "authority": "x", "title": "A secret plan", "tokenizer": "bpe"});
        assert_eq!(redact(&args, None), args);
    }
}
