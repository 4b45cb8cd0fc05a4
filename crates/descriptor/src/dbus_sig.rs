//! D-Bus type signatures, checked without a bus: their syntax (the D-Bus specification's
//! grammar) and whether a JSON value or a parameter's schema type can fill each type.

/// One complete type of a signature, as text (`s`, `a{sv}`, `(ii)`).
pub type CompleteType = String;

const BASIC: &[u8] = b"ybnqiuxtdhsog";

/// Where and why a text is not a D-Bus signature (positions count characters from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("longer than 255 characters")]
    TooLong,
    #[error("nested too deeply")]
    TooDeep,
    #[error("a type is missing at character {0}")]
    Missing(usize),
    #[error("a dict entry at character {0} needs a basic key type")]
    DictKey(usize),
    #[error("the dict entry at character {0} is not closed with `}}` after one key and one value")]
    DictUnclosed(usize),
    #[error("an empty struct `()` at character {0}")]
    EmptyStruct(usize),
    #[error("the struct at character {0} is not closed")]
    StructUnclosed(usize),
    #[error("a dict entry at character {0} outside an array (use `a{{…}}`)")]
    DictOutsideArray(usize),
    #[error("`{code}` at character {at} is not a D-Bus type code")]
    UnknownCode { code: char, at: usize },
}

/// Splits a signature into its complete types.
///
/// # Errors
/// Where and why the text is not a D-Bus signature.
pub fn split(text: &str) -> Result<Vec<CompleteType>, SignatureError> {
    if text.len() > 255 {
        return Err(SignatureError::TooLong);
    }
    let bytes = text.as_bytes();
    let mut types = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let end = complete(bytes, at, 0)?;
        types.push(text[at..end].to_owned());
        at = end;
    }
    Ok(types)
}

/// The end of the complete type starting at `at`.
fn complete(bytes: &[u8], at: usize, depth: usize) -> Result<usize, SignatureError> {
    if depth > 64 {
        return Err(SignatureError::TooDeep);
    }
    let Some(&code) = bytes.get(at) else {
        return Err(SignatureError::Missing(at + 1));
    };
    match code {
        c if BASIC.contains(&c) || c == b'v' => Ok(at + 1),
        b'a' => {
            if bytes.get(at + 1) == Some(&b'{') {
                let key = at + 2;
                match bytes.get(key) {
                    Some(k) if BASIC.contains(k) => {}
                    _ => {
                        return Err(SignatureError::DictKey(at + 2));
                    }
                }
                let value_end = complete(bytes, key + 1, depth + 1)?;
                if bytes.get(value_end) != Some(&b'}') {
                    return Err(SignatureError::DictUnclosed(at + 2));
                }
                Ok(value_end + 1)
            } else {
                complete(bytes, at + 1, depth + 1)
            }
        }
        b'(' => {
            let mut next = at + 1;
            if bytes.get(next) == Some(&b')') {
                return Err(SignatureError::EmptyStruct(at + 1));
            }
            while bytes.get(next) != Some(&b')') {
                if next >= bytes.len() {
                    return Err(SignatureError::StructUnclosed(at + 1));
                }
                next = complete(bytes, next, depth + 1)?;
            }
            Ok(next + 1)
        }
        b'{' => Err(SignatureError::DictOutsideArray(at + 1)),
        other => Err(SignatureError::UnknownCode {
            code: other as char,
            at: at + 1,
        }),
    }
}

/// The JSON types that can fill a D-Bus type.
pub fn json_types(ty: &str) -> &'static [&'static str] {
    match ty.as_bytes().first() {
        Some(b's' | b'o' | b'g') => &["string"],
        Some(b'y' | b'n' | b'q' | b'i' | b'u' | b'x' | b't' | b'h') => &["integer"],
        Some(b'd') => &["number", "integer"],
        Some(b'b') => &["boolean"],
        Some(b'a') if ty.as_bytes().get(1) == Some(&b'{') => &["object"],
        Some(b'a' | b'(') => &["array"],
        _ => &["string", "integer", "number", "boolean", "array", "object"],
    }
}

/// The JSON type name of a value.
pub fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_split_into_complete_types() {
        assert_eq!(
            split("sa{sv}(ii)as").expect("valid"),
            ["s", "a{sv}", "(ii)", "as"]
        );
        assert_eq!(split("").expect("empty"), Vec::<String>::new());
        assert_eq!(split("aa(sa{sv})").expect("nested"), ["aa(sa{sv})"]);
        for bad in ["z", "a", "(", "()", "(s", "{sv}", "a{vs}", "a{sss}", "a{s"] {
            assert!(split(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_types_fit_dbus_types() {
        assert_eq!(json_types("s"), ["string"]);
        assert_eq!(json_types("a{sv}"), ["object"]);
        assert_eq!(json_types("ai"), ["array"]);
        assert!(json_types("d").contains(&"integer"));
        assert_eq!(json_type(&serde_json::json!(1.5)), "number");
    }
}
