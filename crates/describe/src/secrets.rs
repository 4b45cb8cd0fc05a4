//! Credentials a published document may carry as samples: which names hold one, and taking
//! their defaults and examples out of a draft's schemas.

use serde_json::{Value, json};

/// Words in a name that make its value a credential.
const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "auth",
    "cookie",
    "session",
    "signature",
    "pin",
];

/// Whether a parameter or property named `name` holds a credential: a name made of words
/// like token, key, secret or password (`api_key`, `X-Auth-Token`, `clientSecret`).
pub(crate) fn credential_name(name: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase()
            && !word.is_empty()
            && !word.ends_with(|p: char| p.is_ascii_uppercase())
        {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        } else if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
    }
    words.push(word);
    words.iter().any(|w| {
        CREDENTIAL_WORDS.contains(&w.as_str())
            || w.ends_with("token")
            || w.ends_with("password")
            || w == "apikey"
    })
}

/// Takes out of `schema` (a parameter or property named `name`, and every property below
/// it) each default and example that may be a credential: under a credential's name, in a
/// `writeOnly` field, or with the format `password`. A draft never carries a secret the
/// document's author left as a sample.
pub(crate) fn scrub(schema: &mut Value, name: &str) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let secret = credential_name(name)
        || object.get("writeOnly") == Some(&json!(true))
        || object.get("format") == Some(&json!("password"));
    if secret {
        for key in ["default", "example", "examples", "const", "enum"] {
            if key != "enum"
                || object
                    .get("enum")
                    .is_some_and(|e| e.as_array().is_some_and(|a| a.len() == 1))
            {
                object.remove(key);
            }
        }
    }
    if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
        for (key, property) in properties.iter_mut() {
            scrub(property, key);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = object.get_mut(key) {
            scrub(inner, "");
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = object.get_mut(key).and_then(Value::as_array_mut) {
            for inner in list {
                scrub(inner, name);
            }
        }
    }
}
