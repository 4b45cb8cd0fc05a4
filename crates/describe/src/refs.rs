//! An OpenAPI document's `$ref`s resolved into the schemas a draft carries, within a depth
//! and a node budget.

use serde_json::{Map, Value, json};

use crate::first_sentence;

/// How deep a schema is written out; below, an object or array is left open.
pub(crate) const MOST_DEPTH: usize = 6;

pub(crate) struct Resolver<'a> {
    pub(crate) doc: &'a Value,
    /// Schema nodes one operation may still write: references fanning out (each level
    /// pointing at several others) cannot grow a small document into a huge draft.
    pub(crate) budget: std::cell::Cell<usize>,
}

/// Schema nodes written for one operation at most.
pub(crate) const MOST_NODES: usize = 5_000;

impl Resolver<'_> {
    /// Whether `name` in `place` is where one of the document's API key schemes sends its key.
    pub(crate) fn is_key_param(&self, name: &str, place: &str) -> bool {
        let schemes = if self.doc.get("swagger").is_some() {
            &self.doc["securityDefinitions"]
        } else {
            &self.doc["components"]["securitySchemes"]
        };
        schemes
            .as_object()
            .into_iter()
            .flatten()
            .any(|(_, scheme)| {
                let scheme = self.follow(scheme);
                scheme["type"] == "apiKey"
                    && scheme["in"] == place
                    && scheme["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(name))
            })
    }

    /// `value` with its local `$ref`s replaced by what they point at, cut below
    /// [`MOST_DEPTH`] and at a reference to itself, and made a schema the gateway compiles.
    pub(crate) fn schema(&self, value: &Value, depth: usize, seen: &mut Vec<String>) -> Value {
        let Some(object) = value.as_object() else {
            // A schema is an object or a boolean; a document's `null` here means "anything".
            return if value.is_boolean() {
                value.clone()
            } else {
                json!({})
            };
        };
        if self.budget.get() == 0 {
            return json!({"type": "object"});
        }
        self.budget.set(self.budget.get() - 1);
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            if seen.iter().any(|s| s == reference) || depth > MOST_DEPTH {
                return json!({"type": "object"});
            }
            let Some(target) = reference
                .strip_prefix('#')
                .and_then(|p| self.doc.pointer(p))
            else {
                return json!({});
            };
            seen.push(reference.to_owned());
            let out = self.schema(target, depth, seen);
            seen.pop();
            return out;
        }
        if depth > MOST_DEPTH {
            return match object.get("type") {
                Some(t) => json!({"type": t}),
                None => json!({}),
            };
        }
        let mut out = Map::new();
        for (key, value) in object {
            if key.starts_with("x-")
                || matches!(
                    key.as_str(),
                    "example" | "examples" | "xml" | "externalDocs" | "discriminator" | "nullable"
                )
            {
                continue;
            }
            let value = match key.as_str() {
                "properties" | "patternProperties" | "$defs" | "definitions" => Value::Object(
                    value
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), self.schema(v, depth + 1, seen)))
                        .collect(),
                ),
                "items" | "additionalProperties" | "not" | "contains" | "propertyNames"
                    if value.is_object() =>
                {
                    self.schema(value, depth + 1, seen)
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => Value::Array(
                    value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|v| self.schema(v, depth + 1, seen))
                        .collect(),
                ),
                "required" if !value.is_array() => continue,
                // A keyword set to null (`"uniqueItems": null`) means it is not set.
                _ if value.is_null() && !matches!(key.as_str(), "default" | "const") => continue,
                "enum" if value.as_array().is_some_and(Vec::is_empty) => continue,
                "type" if value == "file" => json!("string"),
                "description" => json!(value.as_str().map(first_sentence).unwrap_or_default()),
                _ => value.clone(),
            };
            out.insert(key.clone(), value);
        }
        // OpenAPI 3.0's boolean `exclusiveMinimum`/`exclusiveMaximum` and `nullable`.
        for (exclusive, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            if let Some(flag) = out.get(exclusive).and_then(Value::as_bool) {
                out.remove(exclusive);
                if flag && let Some(limit) = out.remove(bound) {
                    out.insert(exclusive.into(), limit);
                }
            }
        }
        if object.get("nullable") == Some(&json!(true))
            && let Some(Value::String(ty)) = out.get("type").cloned()
        {
            out.insert("type".into(), json!([ty, "null"]));
        }
        Value::Object(out)
    }

    pub(crate) fn follow<'v>(&'v self, value: &'v Value) -> &'v Value {
        let mut value = value;
        for _ in 0..8 {
            match value["$ref"]
                .as_str()
                .and_then(|r| r.strip_prefix('#'))
                .and_then(|p| self.doc.pointer(p))
            {
                Some(target) => value = target,
                None => break,
            }
        }
        value
    }
}
