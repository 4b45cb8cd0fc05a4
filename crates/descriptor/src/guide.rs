//! What the agent reads: a one-line listing per app and an app's compact guide.
//!
//! Context is the product. A listing entry stays under 40 tokens and a guide under 60 tokens
//! per tool (o200k), so the texts here are terse and cut long descriptions at word boundaries.

use std::fmt::Write;

use serde_json::{Map, Value};

use crate::model::{Descriptor, Parameters, ToolCommon};

/// Longest app description shown in a listing, in characters.
const LISTING_DESCRIPTION_CHARS: usize = 48;
/// Longest tool description shown in a guide.
const TOOL_DESCRIPTION_CHARS: usize = 64;
/// Longest parameter description shown in a guide.
const PARAM_DESCRIPTION_CHARS: usize = 28;

/// Shortens `text` to at most `max` characters, at a word boundary when there is one, with `…`.
pub fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(space) if space > cut.len() / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!(
        "{}…",
        cut.trim_end_matches(|c: char| c.is_whitespace() || c == ',' || c == '.')
    )
}

/// The description of an app's entry in a tool or app list, e.g.
/// `Mail: Apple's native email client (aka email). Call for guide.`, kept within
/// `max_tokens` (estimated): the alias goes first, then the description shrinks.
pub fn listing_description(descriptor: &Descriptor, max_tokens: usize) -> String {
    let name = shorten(&descriptor.name, 40);
    let alias = descriptor.aliases.first().map(|a| shorten(a, 16));
    let mut chars = LISTING_DESCRIPTION_CHARS;
    let mut with_alias = alias.is_some();
    loop {
        let mut text = name.clone();
        let description = shorten(&descriptor.description, chars);
        if !description.is_empty() {
            text.push_str(": ");
            text.push_str(&description);
        }
        if let (true, Some(alias)) = (with_alias, alias.as_ref()) {
            let _ = write!(text, " (aka {alias})");
        }
        if !text.ends_with('…') {
            text.push('.');
        }
        text.push_str(" Call for guide.");
        if estimate_tokens(&text) <= max_tokens || chars == 0 {
            return text;
        }
        if with_alias {
            with_alias = false;
        } else {
            chars = chars.saturating_sub(6);
        }
    }
}

/// The compact guide of an app's tools for a model: what the app does, each tool with its
/// parameters, and one example `aai_exec` call.
pub fn guide(descriptor: &Descriptor, tools: &[&ToolCommon]) -> String {
    let mut out = String::with_capacity(128 + tools.len() * 160);
    let _ = write!(out, "{} ({})", descriptor.name.trim(), descriptor.app_id);
    let description = shorten(&descriptor.description, 200);
    if !description.is_empty() {
        let _ = write!(out, ": {description}");
    }
    out.push('\n');
    if tools.is_empty() {
        out.push_str("This app has no tools on this platform.\n");
        return out;
    }
    out.push_str("Run with aai_exec {app, tool, args}. `?` = optional.\nTools:\n");
    for tool in tools {
        write_tool(&mut out, tool);
    }
    let first = tools[0];
    let example = serde_json::json!({
        "app": descriptor.app_id,
        "tool": first.name,
        "args": example_args(first.parameters.as_ref().map(Parameters::schema).as_ref()),
    });
    let _ = writeln!(out, "Example: aai_exec {example}");
    out
}

/// Estimated o200k tokens of one guide line; most tools stay under this.
const TOOL_LINE_TOKENS: usize = 52;

/// A cheap estimate of BPE tokens: a token per 6 letters or digits of a word,
/// one per punctuation mark and one per non-ASCII character.
pub fn estimate_tokens(text: &str) -> usize {
    let mut tokens = 0;
    let mut word: usize = 0;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word += 1;
            continue;
        }
        tokens += word.div_ceil(6);
        word = 0;
        if !c.is_ascii_whitespace() {
            tokens += 1;
        }
    }
    tokens + word.div_ceil(6)
}

fn write_tool(out: &mut String, tool: &ToolCommon) {
    let mut signature = format!("- {}(", tool.name);
    let mut described = Vec::new();
    if let Some(params) = tool.parameters.as_ref().map(Parameters::schema) {
        let required = required_names(&params);
        for (index, (name, schema)) in properties(&params).iter().enumerate() {
            if index > 0 {
                signature.push_str(", ");
            }
            signature.push_str(name);
            if !required.contains(&name.as_str()) {
                signature.push('?');
            }
            let _ = write!(signature, ": {}", type_text(schema));
            if let Some(default) = schema.get("default") {
                let _ = write!(signature, "={default}");
            }
            if let Some(text) = schema.get("description").and_then(Value::as_str) {
                let text = shorten(text, PARAM_DESCRIPTION_CHARS);
                if !text.is_empty() && !same_words(&text, name) {
                    described.push(format!("{name}: {text}"));
                }
            }
        }
    }
    signature.push(')');
    let mut marks = Vec::new();
    if tool.read_only == Some(true) {
        marks.push("read-only");
    }
    if tool.destructive == Some(true) {
        marks.push("destructive");
    }
    if !marks.is_empty() {
        let _ = write!(signature, " [{}]", marks.join(", "));
    }
    // Parameter notes go first when the line is too long, then the tool description shrinks.
    let mut description_chars = TOOL_DESCRIPTION_CHARS;
    loop {
        let mut line = format!(
            "{signature} {}",
            shorten(&tool.description, description_chars)
        );
        if !described.is_empty() {
            let _ = write!(line, " | {}", described.join("; "));
        }
        if estimate_tokens(&line) <= TOOL_LINE_TOKENS || description_chars <= 24 {
            out.push_str(&line);
            out.push('\n');
            return;
        }
        if described.pop().is_none() {
            description_chars -= 8;
        }
    }
}

/// Whether a description only repeats the parameter's name ("title" → "Title").
fn same_words(description: &str, name: &str) -> bool {
    let simplify = |s: &str| {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    simplify(description) == simplify(name)
}

fn properties(params: &Value) -> Vec<(String, Value)> {
    params
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

fn required_names(params: &Value) -> Vec<&str> {
    params
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A short type for a parameter schema: `string`, `int`, `"a"|"b"`, `[string]`, `object`.
fn type_text(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("|");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    let base = base_type_text(schema);
    let (min, max) = (schema.get("minimum"), schema.get("maximum"));
    match (min, max) {
        (Some(min), Some(max)) => format!("{base} {min}..{max}"),
        (Some(min), None) => format!("{base} ≥{min}"),
        (None, Some(max)) => format!("{base} ≤{max}"),
        (None, None) => base,
    }
}

fn base_type_text(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(kind)) => match kind.as_str() {
            "integer" => "int".to_owned(),
            "boolean" => "bool".to_owned(),
            "array" => match schema.get("items") {
                Some(items) => format!("[{}]", type_text(items)),
                None => "array".to_owned(),
            },
            other => other.to_owned(),
        },
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => "any".to_owned(),
    }
}

/// Example arguments: the required parameters with a plausible value each.
fn example_args(params: Option<&Value>) -> Value {
    let mut args = Map::new();
    let Some(params) = params else {
        return Value::Object(args);
    };
    let required = required_names(params);
    for (name, schema) in properties(params) {
        if !required.contains(&name.as_str()) {
            continue;
        }
        args.insert(name.clone(), example_value(&name, &schema));
    }
    Value::Object(args)
}

fn example_value(name: &str, schema: &Value) -> Value {
    if let Some(value) = schema.get("default").or_else(|| schema.get("const")) {
        return value.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|v| v.first())
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer") => Value::from(1),
        Some("number") => Value::from(1.5),
        Some("boolean") => Value::Bool(true),
        Some("array") => Value::Array(Vec::new()),
        Some("object") => Value::Object(Map::new()),
        _ => Value::String(format!("<{name}>")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;
    use serde_json::json;

    fn descriptor_with_tools(count: usize) -> Descriptor {
        let tools: Vec<Value> = (0..count)
            .map(|i| {
                json!({
                    "name": format!("do_thing_{i}"),
                    "description": "Create a new reminder in the given list with an optional due date and priority",
                    "method": "DoThing",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string", "description": "Title of the reminder"},
                            "list": {"type": "string", "description": "Name of the list to add it to"},
                            "due": {"type": "string", "description": "Due date, ISO 8601"},
                            "priority": {"type": "integer", "enum": [0, 1, 5, 9], "default": 0}
                        },
                        "required": ["title"]
                    }
                })
            })
            .collect();
        let doc = json!({
            "schema_version": "1.0", "appId": "com.example.reminders", "name": "Reminders",
            "description": "Keeps to-dos and reminders in lists, with due dates, priorities and notes synced across devices",
            "aliases": ["todo", "待办"],
            "platforms": {"linux": {"automation": "dbus", "service": "com.example.Reminders",
                "object": "/com/example/Reminders", "interface": "com.example.Reminders", "tools": tools}}
        });
        parse("t", doc.to_string().as_bytes()).expect("valid")
    }

    fn tokens(text: &str) -> usize {
        static BPE: std::sync::LazyLock<tiktoken_rs::CoreBPE> =
            std::sync::LazyLock::new(|| tiktoken_rs::o200k_base().expect("o200k"));
        BPE.encode_with_special_tokens(text).len()
    }

    #[test]
    fn guide_of_twenty_tools_fits_sixty_tokens_per_tool() {
        let descriptor = descriptor_with_tools(20);
        let tools = descriptor.tools(crate::Platform::Linux).expect("tools");
        let text = guide(&descriptor, &tools);
        let used = tokens(&text);
        assert!(
            used <= 20 * 60,
            "guide of 20 tools used {used} tokens:\n{text}"
        );
        assert!(
            text.contains(
                "- do_thing_0(title: string, list?: string, due?: string, priority?: 0|1|5|9=0)"
            ),
            "{text}"
        );
        assert!(text.contains(r#"Example: aai_exec {"app":"com.example.reminders","tool":"do_thing_0","args":{"title":"<title>"}}"#), "{text}");
    }

    #[test]
    fn shorten_cuts_at_words() {
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("one two three four five", 12), "one two…");
        assert_eq!(shorten("待办待办待办待办", 4), "待办待…");
    }

    #[test]
    fn listing_mentions_name_description_and_alias() {
        let descriptor = descriptor_with_tools(1);
        let text = listing_description(&descriptor, 40);
        assert!(text.starts_with("Reminders: Keeps to-dos"), "{text}");
        assert!(text.ends_with("(aka todo). Call for guide."), "{text}");
    }
}
