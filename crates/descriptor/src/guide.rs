//! What the agent reads: a one-line listing per app and an app's compact guide.
//!
//! Context is the product. A listing entry stays under 40 tokens and a guide under 60 tokens
//! per tool (o200k), so the texts here are terse and cut long descriptions at word boundaries.

use std::fmt::Write;

use serde_json::{Map, Value};

use crate::model::{Descriptor, Parameters, ToolCommon};

/// Longest app description shown in a listing, in characters.
const LISTING_DESCRIPTION_CHARS: usize = 80;
/// The fewest characters of a description an app's listing keeps (whole words).
const MIN_DESCRIPTION_CHARS: usize = 28;
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

/// The short description of an app, made once when its descriptor is loaded: the first
/// sentence of its description (without its closing period), or all of it when it is one.
/// A sentence ends at `.`, `!` or `?` followed by a space and then anything but a lower-case
/// letter (so "e.g. mail" goes on), or at `。`, `！`, `？`.
pub fn short_description(description: &str) -> String {
    let text = description.trim();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = match c {
            '。' | '！' | '？' => Some(at),
            '.' | '!' | '?' => match chars.peek() {
                None => Some(at),
                Some(&(_, next)) if next.is_whitespace() => {
                    let after = text[at + c.len_utf8()..].trim_start().chars().next();
                    after.is_none_or(|a| !a.is_lowercase()).then_some(at)
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(end) = end {
            let sentence = text[..end].trim_end();
            if sentence.chars().any(char::is_alphanumeric) {
                return sentence.to_owned();
            }
        }
    }
    text.to_owned()
}

/// Whether a cut between `before` and `after` falls between words: at white space, or
/// between two characters of a script written without spaces (CJK, kana, hangul).
fn word_boundary(before: char, after: char) -> bool {
    fn unspaced(c: char) -> bool {
        matches!(c as u32, 0x2E80..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF00..=0xFFEF | 0x20000..=0x2FFFF)
    }
    before.is_whitespace() || after.is_whitespace() || unspaced(before) || unspaced(after)
}

/// `text` cut to the whole words that fit in `max` characters, ending with `…` when cut;
/// empty when not even its first word fits. A word is never cut.
pub fn whole_words(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let room = max.saturating_sub(1);
    let chars: Vec<char> = text.chars().collect();
    // The longest prefix of at most `room` characters that ends at a word boundary.
    let cut = (1..=room.min(chars.len() - 1))
        .rev()
        .find(|&n| word_boundary(chars[n - 1], chars[n]));
    let Some(cut) = cut else {
        return String::new();
    };
    let kept: String = chars[..cut].iter().collect();
    let kept = kept.trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, ',' | '.' | ';' | ':' | '-' | '(' | '，' | '、')
    });
    if kept.is_empty() {
        return String::new();
    }
    format!("{kept}…")
}

/// The description of an app's entry in a tool or app list, e.g.
/// `Mail: Apple's native email client (aka email).` (the server's instructions say an app's
/// entry returns its guide), kept within
/// `max_tokens` (estimated). `short` is the app's [`short_description`]. Aliases are
/// dropped first (the last first), then the description loses whole words from its end.
pub fn listing_description(
    name: &str,
    aliases: &[String],
    short: &str,
    max_tokens: usize,
) -> String {
    const MOST_ALIASES: usize = 3;
    let name = match whole_words(name, 40) {
        whole if whole.is_empty() => shorten(name, 40),
        whole => whole,
    };
    let aliases: Vec<String> = aliases
        .iter()
        .take(MOST_ALIASES)
        .map(|a| whole_words(a, 16))
        .filter(|a| !a.is_empty())
        .collect();
    let mut alias_count = aliases.len();
    let mut chars = short.chars().count().min(LISTING_DESCRIPTION_CHARS);
    // The first words of a description carry what the app is for: they stay even when a long
    // name or appId leaves little of the budget.
    let floor = chars.min(MIN_DESCRIPTION_CHARS);
    // A description that begins with the app's name says it already (`Slack: Slack for
    // teams` costs tokens and says nothing more).
    let names_itself = short
        .get(..name.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(&name))
        && short[name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric());
    loop {
        let description = whole_words(short, chars);
        let mut text = if names_itself && !description.is_empty() {
            String::new()
        } else {
            name.clone()
        };
        if !description.is_empty() {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&description);
        }
        if alias_count > 0 {
            let _ = write!(text, " (aka {})", aliases[..alias_count].join(", "));
        }
        if !text.ends_with('…') && !text.ends_with('.') {
            text.push('.');
        }
        if estimate_tokens(&text) <= max_tokens || (chars <= floor && alias_count == 0) {
            return text;
        }
        if alias_count > 0 {
            alias_count -= 1;
        } else {
            chars = chars.saturating_sub(6).max(floor);
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
        let short = short_description(&descriptor.description);
        let text = listing_description(&descriptor.name, &descriptor.aliases, &short, 40);
        assert!(text.starts_with("Reminders: Keeps to-dos"), "{text}");
        assert!(text.ends_with("(aka todo, 待办)."), "{text}");
        // A description that begins with the name does not say it twice.
        let text = listing_description("Slack", &[], "Slack for teams: channels and calls", 40);
        assert_eq!(text, "Slack for teams: channels and calls.");
        let text = listing_description("Slack", &[], "Slackware package manager", 40);
        assert!(text.starts_with("Slack: Slackware"), "{text}");
    }

    #[test]
    fn the_short_description_is_the_first_sentence() {
        let cases = [
            (
                "Apple's mail client. Sends and reads mail.",
                "Apple's mail client",
            ),
            (
                "Plays media, e.g. music and films. Also streams.",
                "Plays media, e.g. music and films",
            ),
            (
                "Version 2.0 of the player! Fast.",
                "Version 2.0 of the player",
            ),
            ("Is it here? Yes.", "Is it here"),
            (
                "One sentence without a period",
                "One sentence without a period",
            ),
            ("Ends with a period.", "Ends with a period"),
            ("邮件客户端。收发邮件。", "邮件客户端"),
            ("...", "..."),
            ("", ""),
        ];
        for (description, short) in cases {
            assert_eq!(short_description(description), short, "{description:?}");
        }
    }

    #[test]
    fn whole_words_never_cuts_a_word() {
        assert_eq!(whole_words("short", 10), "short");
        assert_eq!(whole_words("one two three four five", 12), "one two…");
        assert_eq!(whole_words("one, two three", 8), "one…");
        assert_eq!(whole_words("Supercalifragilistic words", 10), "");
        assert_eq!(whole_words("待办待办待办待办", 4), "待办待…");
        assert_eq!(whole_words("Sync 待办事项 everywhere", 9), "Sync 待办事…");
    }

    /// Whatever the description, a listing entry holds whole words of it and fits its budget.
    #[test]
    fn listing_entries_keep_whole_words_within_budget() {
        let descriptions = [
            "Keeps to-dos and reminders in lists, with due dates, priorities and notes synced across devices and shared with family members. It also does much more.",
            "Antidisestablishmentarianism-compatible hyperconfigurable orchestration platform for enterprise-grade microservice deployments",
            "https://example.com/a/very/long/url/that/is/one/word/for/the/listing/and/then/some/more",
            "跨设备同步的待办事项与提醒事项，支持截止日期、优先级和备注，并可与家人共享。它还能做更多。",
            "Short.",
        ];
        for description in descriptions {
            let short = short_description(description);
            for budget in [12, 20, 27, 40] {
                let text = listing_description(
                    "Reminders",
                    &["todo".into(), "tasks".into()],
                    &short,
                    budget,
                );
                let shown = text.strip_prefix("Reminders").expect("the name first");
                let shown = shown.split(" (aka").next().unwrap_or_default();
                let shown = shown.strip_prefix(": ").unwrap_or(shown);
                let shown = shown.trim_end_matches(['.', '…']);
                // Every word shown is a whole word of the description.
                for word in shown.split_whitespace() {
                    let word = word.trim_end_matches('…');
                    assert!(
                        description
                            .split_whitespace()
                            .any(|w| w.trim_end_matches([',', '.'])
                                == word.trim_end_matches([',', '.']))
                            || !description.contains(' '),
                        "{word:?} is not a whole word of {description:?} (budget {budget}): {text}"
                    );
                }
                assert!(description.starts_with(shown) || shown.is_empty(), "{text}");
                // Within the budget, unless only the description's first words are left,
                // which stay whatever it costs.
                if budget >= 20 && shown.chars().count() > MIN_DESCRIPTION_CHARS {
                    assert!(estimate_tokens(&text) <= budget, "{budget}: {text}");
                }
            }
        }
    }
}
