//! A tool's output as the agent receives it: text cut to a budget with a note, structured
//! content for objects, binary results (images, files) beside their metadata.

use serde_json::{Map, Value};

/// A tool's output as the agent receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub text: String,
    /// The JSON output when it is an object and was not cut.
    pub structured: Option<Value>,
    pub cut: bool,
}

/// A binary result (an image, a PDF): its MIME type, size and base64 bytes.
pub fn binary(output: &Value) -> Option<(&str, u64, &str)> {
    let binary = output.get(aai_executor::rest::BINARY_KEY)?;
    Some((
        binary.get("mime")?.as_str()?,
        binary.get("bytes")?.as_u64()?,
        binary.get("base64")?.as_str()?,
    ))
}

/// Renders output as text, cutting it at `max_chars` with a note that says how much was cut.
/// A binary result is described in words (its bytes travel as their own content).
pub fn render(output: &Value, max_chars: usize) -> Rendered {
    if let Some((mime, bytes, _)) = binary(output) {
        // What came with the bytes (a screenshot's size, scale and origin) travels as
        // structured content and in the text; the bytes travel as their own content block.
        let meta: Map<String, Value> = output
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| *k != aai_executor::rest::BINARY_KEY)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut text = format!("binary content: {mime}, {bytes} bytes");
        if !meta.is_empty() {
            text.push('\n');
            text.push_str(&Value::Object(meta.clone()).to_string());
        }
        return Rendered {
            text,
            structured: (!meta.is_empty()).then_some(Value::Object(meta)),
            cut: false,
        };
    }
    let text = match output {
        Value::String(text) => text.clone(),
        Value::Null => "done (no output)".to_owned(),
        other => other.to_string(),
    };
    let total = text.chars().count();
    if total <= max_chars {
        let structured = output.is_object().then(|| output.clone());
        return Rendered {
            text,
            structured,
            cut: false,
        };
    }
    let kept: String = text.chars().take(max_chars).collect();
    let note = format!(
        "\n[aai-gateway: output cut to {max_chars} of {total} characters ({} not shown). Ask for less: narrow the query or use the tool's limit/filter arguments.]",
        total - max_chars
    );
    Rendered {
        text: kept + &note,
        structured: None,
        cut: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_outputs_pass_whole() {
        let out = render(&json!({"a": 1}), 100);
        assert_eq!(out.text, r#"{"a":1}"#);
        assert_eq!(out.structured, Some(json!({"a": 1})));
        assert_eq!(render(&json!("plain"), 100).text, "plain");
    }

    #[test]
    fn big_outputs_are_cut_with_a_note() {
        let out = render(&json!("é".repeat(1000)), 100);
        assert!(out.cut);
        assert!(out.text.starts_with(&"é".repeat(100)));
        assert!(
            out.text
                .contains("cut to 100 of 1000 characters (900 not shown)"),
            "{}",
            out.text
        );
        assert_eq!(out.structured, None);
    }
}
