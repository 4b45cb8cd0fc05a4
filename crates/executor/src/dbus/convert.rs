//! JSON ↔ D-Bus values, guided by the method's signature.
//!
//! Arguments arrive as JSON; D-Bus needs typed values. The signature (from the descriptor or
//! introspection) decides every type, so `5` becomes a `y`, `i` or `d` as the method wants.
//! Variants have no signature to follow: their type is inferred, or given explicitly as
//! `{"$signature": "y", "value": 5}`.

use serde_json::{Map, Number, Value as Json};
use zbus::zvariant::{Array, Dict, ObjectPath, Signature, StructureBuilder, Value};

/// Why a JSON value cannot become the D-Bus value asked for; `at` names the argument (and
/// the element or member inside it).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConvertError {
    #[error("{at}: expected {expected} for D-Bus type `{signature}`, got {got}")]
    Mismatch {
        at: String,
        expected: &'static str,
        signature: String,
        /// The value given, as JSON text.
        got: String,
    },
    #[error("{at}: {n} is out of range for D-Bus type `{signature}` ({min}..={max})")]
    Range {
        at: String,
        n: i128,
        signature: String,
        min: i128,
        max: i128,
    },
    #[error("{at}: {text:?} is not a D-Bus signature: {reason}")]
    Signature {
        at: String,
        text: String,
        /// Not a `std::error::Error`, so not a source.
        reason: zbus::zvariant::signature::Error,
    },
    #[error("{at}: {text:?} is not a D-Bus object path: {source}")]
    ObjectPath {
        at: String,
        text: String,
        source: zbus::zvariant::Error,
    },
    #[error("{at}: {source}")]
    Build {
        at: String,
        source: zbus::zvariant::Error,
    },
    #[error("{at}: the D-Bus struct `{signature}` has {count} fields, got an array of {got}")]
    Arity {
        at: String,
        signature: String,
        count: usize,
        got: usize,
    },
    #[error("{at}: the D-Bus type `{signature}` cannot be passed from JSON")]
    Unsupported { at: String, signature: String },
    #[error("{at}: the key {name:?} is not a number, as D-Bus type `{signature}` needs")]
    KeyNotNumber {
        at: String,
        name: String,
        signature: String,
    },
    #[error("{at}: null cannot be sent over D-Bus")]
    Null { at: String },
}

/// Converts `json` into a D-Bus value of type `signature`. `at` names the argument in errors.
pub(crate) fn to_dbus(
    json: &Json,
    signature: &Signature,
    at: &str,
) -> Result<Value<'static>, ConvertError> {
    let mismatch = || ConvertError::Mismatch {
        at: at.to_owned(),
        expected: describe(signature),
        signature: signature.to_string(),
        got: json.to_string(),
    };
    let build = |source| ConvertError::Build {
        at: at.to_owned(),
        source,
    };
    let int = |min: i128, max: i128| -> Result<i128, ConvertError> {
        let n = json
            .as_i64()
            .map(i128::from)
            .or_else(|| json.as_u64().map(i128::from))
            .ok_or_else(mismatch)?;
        if n < min || n > max {
            return Err(ConvertError::Range {
                at: at.to_owned(),
                n,
                signature: signature.to_string(),
                min,
                max,
            });
        }
        Ok(n)
    };
    // The range checks above make these narrowing conversions lossless.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let value = match signature {
        Signature::U8 => Value::U8(int(0, 255)? as u8),
        Signature::Bool => Value::Bool(json.as_bool().ok_or_else(mismatch)?),
        Signature::I16 => Value::I16(int(i16::MIN.into(), i16::MAX.into())? as i16),
        Signature::U16 => Value::U16(int(0, u16::MAX.into())? as u16),
        Signature::I32 => Value::I32(int(i32::MIN.into(), i32::MAX.into())? as i32),
        Signature::U32 => Value::U32(int(0, u32::MAX.into())? as u32),
        Signature::I64 => Value::I64(int(i64::MIN.into(), i64::MAX.into())? as i64),
        Signature::U64 => Value::U64(int(0, u64::MAX.into())? as u64),
        Signature::F64 => Value::F64(json.as_f64().ok_or_else(mismatch)?),
        Signature::Str => Value::from(json.as_str().ok_or_else(mismatch)?.to_owned()),
        Signature::Signature => {
            let text = json.as_str().ok_or_else(mismatch)?;
            let parsed: Signature = text.parse().map_err(|reason| ConvertError::Signature {
                at: at.to_owned(),
                text: text.to_owned(),
                reason,
            })?;
            Value::Signature(parsed)
        }
        Signature::ObjectPath => {
            let text = json.as_str().ok_or_else(mismatch)?;
            let path = ObjectPath::try_from(text.to_owned()).map_err(|source| {
                ConvertError::ObjectPath {
                    at: at.to_owned(),
                    text: text.to_owned(),
                    source,
                }
            })?;
            Value::ObjectPath(path)
        }
        Signature::Variant => Value::Value(Box::new(infer(json, at)?)),
        Signature::Array(child) => {
            let items = json.as_array().ok_or_else(mismatch)?;
            let mut array = Array::new(child);
            for (index, item) in items.iter().enumerate() {
                let element = to_dbus(item, child, &format!("{at}[{index}]"))?;
                array
                    .append(element)
                    .map_err(|source| ConvertError::Build {
                        at: format!("{at}[{index}]"),
                        source,
                    })?;
            }
            Value::Array(array)
        }
        Signature::Dict { key, value } => {
            let map = json.as_object().ok_or_else(mismatch)?;
            let mut dict = Dict::new(key, value);
            for (name, item) in map {
                let key_value = dict_key(name, key, at)?;
                let item_value = to_dbus(item, value, &format!("{at}.{name}"))?;
                dict.append(key_value, item_value)
                    .map_err(|source| ConvertError::Build {
                        at: format!("{at}.{name}"),
                        source,
                    })?;
            }
            Value::Dict(dict)
        }
        Signature::Structure(fields) => {
            let items = json.as_array().ok_or_else(mismatch)?;
            let count = fields.iter().count();
            if items.len() != count {
                return Err(ConvertError::Arity {
                    at: at.to_owned(),
                    signature: signature.to_string(),
                    count,
                    got: items.len(),
                });
            }
            let mut builder = StructureBuilder::new();
            for (index, (item, field)) in items.iter().zip(fields.iter()).enumerate() {
                builder = builder.append_field(to_dbus(item, field, &format!("{at}[{index}]"))?);
            }
            Value::Structure(builder.build().map_err(build)?)
        }
        other => {
            return Err(ConvertError::Unsupported {
                at: at.to_owned(),
                signature: other.to_string(),
            });
        }
    };
    Ok(value)
}

/// A dict key from a JSON object key: keys are strings in JSON, so numbers are parsed.
fn dict_key(name: &str, signature: &Signature, at: &str) -> Result<Value<'static>, ConvertError> {
    let json = match signature {
        Signature::Str | Signature::ObjectPath | Signature::Signature => {
            Json::String(name.to_owned())
        }
        Signature::Bool => Json::Bool(name == "true"),
        _ => name
            .parse::<Number>()
            .map(Json::Number)
            .map_err(|_| ConvertError::KeyNotNumber {
                at: at.to_owned(),
                name: name.to_owned(),
                signature: signature.to_string(),
            })?,
    };
    to_dbus(&json, signature, &format!("{at}.{name}"))
}

/// The D-Bus value for a JSON value with no signature to follow (inside a variant).
fn infer(json: &Json, at: &str) -> Result<Value<'static>, ConvertError> {
    if let Some(object) = json.as_object()
        && let (Some(Json::String(signature)), Some(inner)) =
            (object.get("$signature"), object.get("value"))
    {
        let parsed: Signature = signature
            .parse()
            .map_err(|reason| ConvertError::Signature {
                at: at.to_owned(),
                text: signature.clone(),
                reason,
            })?;
        return to_dbus(inner, &parsed, at);
    }
    let signature = match json {
        Json::Null => return Err(ConvertError::Null { at: at.to_owned() }),
        Json::Bool(_) => Signature::Bool,
        Json::Number(n) if n.is_f64() => Signature::F64,
        Json::Number(n) => match n.as_i64() {
            Some(v) if i32::try_from(v).is_ok() => Signature::I32,
            Some(_) => Signature::I64,
            None => Signature::U64,
        },
        Json::String(_) => Signature::Str,
        Json::Array(items) if !items.is_empty() && items.iter().all(Json::is_string) => {
            Signature::array(Signature::Str)
        }
        Json::Array(_) => Signature::array(Signature::Variant),
        Json::Object(_) => Signature::dict(Signature::Str, Signature::Variant),
    };
    to_dbus(json, &signature, at)
}

fn describe(signature: &Signature) -> &'static str {
    match signature {
        Signature::Bool => "a boolean",
        Signature::F64 => "a number",
        Signature::Str | Signature::Signature | Signature::ObjectPath => "a string",
        Signature::Array(_) | Signature::Structure(_) => "an array",
        Signature::Dict { .. } => "an object",
        Signature::Variant => "a value",
        _ => "an integer",
    }
}

/// Converts a D-Bus value to JSON: numbers stay numbers, dicts become objects, structs and
/// arrays become arrays, variants are unwrapped.
pub(crate) fn to_json(value: &Value<'_>) -> Json {
    match value {
        Value::U8(v) => Json::from(*v),
        Value::Bool(v) => Json::Bool(*v),
        Value::I16(v) => Json::from(*v),
        Value::U16(v) => Json::from(*v),
        Value::I32(v) => Json::from(*v),
        Value::U32(v) => Json::from(*v),
        Value::I64(v) => Json::from(*v),
        Value::U64(v) => Json::from(*v),
        Value::F64(v) => Number::from_f64(*v).map_or(Json::Null, Json::Number),
        Value::Str(v) => Json::String(v.as_str().to_owned()),
        Value::Signature(v) => Json::String(v.to_string()),
        Value::ObjectPath(v) => Json::String(v.as_str().to_owned()),
        Value::Value(inner) => to_json(inner),
        Value::Array(array) => Json::Array(array.inner().iter().map(to_json).collect()),
        Value::Dict(dict) => {
            let mut map = Map::new();
            for (key, item) in dict.iter() {
                let key = match to_json(key) {
                    Json::String(text) => text,
                    other => other.to_string(),
                };
                map.insert(key, to_json(item));
            }
            Json::Object(map)
        }
        Value::Structure(structure) => {
            Json::Array(structure.fields().iter().map(to_json).collect())
        }
        #[allow(unreachable_patterns)]
        _ => Json::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sig(text: &str) -> Signature {
        text.parse().expect("signature")
    }

    fn round_trip(json: Json, signature: &str) -> Json {
        let value = to_dbus(&json, &sig(signature), "arg").expect("converts");
        to_json(&value)
    }

    #[test]
    fn basic_types_round_trip() {
        assert_eq!(round_trip(json!(7), "y"), json!(7));
        assert_eq!(round_trip(json!(-7), "n"), json!(-7));
        assert_eq!(round_trip(json!(70000), "u"), json!(70000));
        assert_eq!(round_trip(json!(-1), "x"), json!(-1));
        assert_eq!(round_trip(json!(u64::MAX), "t"), json!(u64::MAX));
        assert_eq!(round_trip(json!(1.5), "d"), json!(1.5));
        assert_eq!(round_trip(json!(true), "b"), json!(true));
        assert_eq!(round_trip(json!("hi"), "s"), json!("hi"));
        assert_eq!(round_trip(json!("/a/b"), "o"), json!("/a/b"));
        assert_eq!(round_trip(json!("a{sv}"), "g"), json!("a{sv}"));
    }

    #[test]
    fn containers_round_trip() {
        assert_eq!(round_trip(json!([1, 2, 3]), "ai"), json!([1, 2, 3]));
        assert_eq!(
            round_trip(json!({"a": 1, "b": 2}), "a{su}"),
            json!({"a": 1, "b": 2})
        );
        assert_eq!(round_trip(json!({"1": "x"}), "a{is}"), json!({"1": "x"}));
        assert_eq!(
            round_trip(json!(["x", 5, [true]]), "(siab)"),
            json!(["x", 5, [true]])
        );
        assert_eq!(
            round_trip(
                json!({"s": "v", "n": 3, "l": ["a"], "d": {"k": 1.5}}),
                "a{sv}"
            ),
            json!({"s": "v", "n": 3, "l": ["a"], "d": {"k": 1.5}})
        );
        assert_eq!(
            round_trip(json!([[1, "a"], [2, "b"]]), "a(is)"),
            json!([[1, "a"], [2, "b"]])
        );
    }

    #[test]
    fn explicit_variant_types() {
        let value = to_dbus(
            &json!({"urgency": {"$signature": "y", "value": 2}}),
            &sig("a{sv}"),
            "hints",
        )
        .expect("converts");
        let Value::Dict(dict) = &value else {
            panic!("dict")
        };
        let (_, inner) = dict.iter().next().expect("entry");
        assert!(matches!(inner, Value::Value(v) if matches!(**v, Value::U8(2))));
    }

    #[test]
    fn mismatches_name_the_argument() {
        let error = to_dbus(&json!("x"), &sig("i"), "count")
            .expect_err("mismatch")
            .to_string();
        assert!(error.starts_with("count: expected an integer"), "{error}");
        let error = to_dbus(&json!(300), &sig("y"), "level")
            .expect_err("range")
            .to_string();
        assert!(error.contains("out of range"), "{error}");
        let error = to_dbus(&json!([1, "x"]), &sig("ai"), "list")
            .expect_err("element")
            .to_string();
        assert!(error.starts_with("list[1]:"), "{error}");
        let error = to_dbus(&json!([1]), &sig("(ii)"), "pair")
            .expect_err("arity")
            .to_string();
        assert!(error.contains("2 fields"), "{error}");
        assert!(to_dbus(&json!(null), &sig("v"), "v").is_err());
    }
}
