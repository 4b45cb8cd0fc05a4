//! Draft descriptors from what apps already publish about themselves.
//!
//! Every interface the gateway executes describes itself: a D-Bus service answers
//! `Introspect`, a web API publishes an OpenAPI document, a scriptable macOS app ships a
//! scripting dictionary, a COM server has a type library. Each module here turns one of
//! those into a draft `aai.json` that passes `validate` as it is, and marks what it guessed —
//! a risk per tool from its name and method, a `todo` where a description was missing — so a
//! person reviews it quickly. Nothing here does I/O: the caller reads the bus, the file or the
//! URL and hands the text over.

pub mod a11y;
pub mod com;
pub mod dbus;
pub mod openapi;
mod refs;
pub mod sdef;
mod secrets;

use serde_json::{Map, Value, json};

/// A draft descriptor and what the person reviewing it should know (what was left out, what
/// could not be converted).
#[derive(Debug, Clone)]
pub struct Draft {
    pub descriptor: Value,
    pub notes: Vec<String>,
}

impl Draft {
    /// The tools of the draft's one platform section.
    pub fn tools(&self) -> &[Value] {
        self.descriptor["platforms"]
            .as_object()
            .and_then(|p| p.values().next())
            .and_then(|s| s["tools"].as_array())
            .map_or(&[], Vec::as_slice)
    }
}

/// Why no draft could be made.
#[derive(Debug, thiserror::Error)]
pub enum DescribeError {
    #[error("not a {what}: {why}")]
    Unreadable { what: &'static str, why: String },
    #[error("{0}")]
    Nothing(String),
}

/// An XML document (an introspection, a dictionary): a DTD is read (sdef files name theirs),
/// but one that declares entities is refused — a few declared entities can expand a small
/// file into gigabytes, and no format here uses them.
pub(crate) fn xml<'a>(
    text: &'a str,
    what: &'static str,
) -> Result<roxmltree::Document<'a>, DescribeError> {
    if text.contains("<!ENTITY") {
        return Err(DescribeError::Unreadable {
            what,
            why: "it declares XML entities, which drafts do not expand".into(),
        });
    }
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    roxmltree::Document::parse_with_options(text, options).map_err(|e| DescribeError::Unreadable {
        what,
        why: e.to_string(),
    })
}

/// What a draft says of every risk: a guess from the name.
const RISK_TODO: &str = "Risks are guessed from each tool's name and method (get/list/read → low; set/create/update → medium; send/delete/remove/kill/quit/close → high): check each before installing.";

/// The risk of a tool guessed from the first word of its name (and an HTTP method when there
/// is one): `(risk, read_only, destructive)`.
pub fn guess_risk(name: &str, http_method: Option<&str>) -> (&'static str, bool, bool) {
    let words = words(name);
    let first = words.first().map_or("", String::as_str);
    let any = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    const DESTROY: &[&str] = &[
        "delete",
        "remove",
        "drop",
        "kill",
        "destroy",
        "erase",
        "purge",
        "wipe",
        "terminate",
        "uninstall",
        "format",
        "truncate",
        "reset",
        "poweroff",
        "reboot",
        "shutdown",
        "halt",
        "revoke",
        "unlink",
        "trash",
    ];
    const OUTWARD: &[&str] = &[
        "send", "post", "publish", "share", "pay", "transfer", "purchase", "buy", "execute",
        "exec", "run", "invite", "email", "forward", "reply", "merge", "deploy", "grant",
        "restart", "shut", "logout", "eject", "empty", "quit", "exit", "close", "discard",
        "revert",
    ];
    const READ: &[&str] = &[
        "get",
        "list",
        "read",
        "find",
        "search",
        "query",
        "show",
        "fetch",
        "is",
        "has",
        "can",
        "count",
        "describe",
        "status",
        "lookup",
        "check",
        "view",
        "inspect",
        "introspect",
        "ping",
        "version",
        "info",
        "peek",
        "watch",
        "download",
        "export",
    ];
    if DESTROY.contains(&first) || (http_method == Some("DELETE")) || any(&["delete", "remove"]) {
        return ("high", false, true);
    }
    if OUTWARD.contains(&first) {
        return ("high", false, false);
    }
    match http_method {
        Some("GET" | "HEAD" | "OPTIONS") => ("low", true, false),
        Some(_) => ("medium", false, false),
        None if READ.contains(&first) => ("low", true, false),
        None => ("medium", false, false),
    }
}

/// The lowercase words of a name in any case style (`GetServerInformation`, `list_repos`,
/// `repos/list-for-user`).
pub fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous = None;
            continue;
        }
        let boundary =
            c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit());
        if boundary && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
        previous = Some(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A valid tool name (letters, digits, `_` and `-`, at most 64) in snake case, unique among
/// `taken` (a `_2`, `_3`… is added).
pub fn tool_name(raw: &str, taken: &mut std::collections::HashSet<String>) -> String {
    let mut base: String = words(raw)
        .join("_")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if base.is_empty() {
        base = "tool".into();
    }
    base.truncate(60);
    let base = base.trim_end_matches('_').to_owned();
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) || !aai_descriptor::naming::is_valid_tool_name(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}

/// A tool entry: name, description (a `todo` when there was none), risk and hints guessed,
/// parameters when it takes any, then the platform's own fields.
pub(crate) fn tool(
    name: &str,
    description: Option<&str>,
    fallback: &str,
    parameters: Option<Value>,
    risk: (&'static str, bool, bool),
    fields: Map<String, Value>,
) -> Value {
    let given = description.map(clean).filter(|d| !d.is_empty());
    let mut tool = Map::new();
    tool.insert("name".into(), json!(name));
    tool.insert(
        "description".into(),
        json!(given.clone().unwrap_or_else(|| fallback.to_owned())),
    );
    if given.is_none() {
        tool.insert(
            "todo".into(),
            json!("no description was published: say what this tool does"),
        );
    }
    if let Some(parameters) = parameters {
        tool.insert("parameters".into(), parameters);
    }
    let (risk, read_only, destructive) = risk;
    tool.insert("risk".into(), json!(risk));
    if read_only {
        tool.insert("readOnly".into(), json!(true));
    }
    if destructive {
        tool.insert("destructive".into(), json!(true));
    }
    tool.extend(fields);
    Value::Object(tool)
}

/// Text from a document made fit for a description: one line, no markup runs of spaces, at
/// most 300 characters (cut at a word).
pub(crate) fn clean(text: &str) -> String {
    let one_line = aai_descriptor::visible::visible(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if one_line.chars().count() <= 300 {
        return one_line;
    }
    let cut: String = one_line.chars().take(300).collect();
    match cut.rfind(' ') {
        Some(at) => format!("{}…", &cut[..at]),
        None => format!("{cut}…"),
    }
}

/// The whole descriptor around one platform section.
pub(crate) fn descriptor(
    app_id: &str,
    name: &str,
    description: &str,
    platform: &str,
    section: Map<String, Value>,
    mut todo: Vec<String>,
) -> Value {
    todo.insert(0, RISK_TODO.to_owned());
    let description = Some(clean(description))
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("{name} (drafted from its published interface)"));
    json!({
        "schema_version": "1.0",
        "appId": app_id,
        "name": name,
        "description": description,
        "version": "0.1.0",
        "todo": todo,
        "platforms": {platform: Value::Object(section)},
    })
}

/// A reverse-DNS appId from a host name (`api.github.com` → `com.github.api`) or a dotted
/// name kept as it is when it already is one; `fallback` when nothing fits.
pub fn app_id_from(name: &str, fallback: &str) -> String {
    let cleaned: Vec<String> = name
        .split('.')
        .map(|part| {
            part.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect::<String>()
                .trim_matches('-')
                .to_owned()
        })
        .filter(|p| !p.is_empty())
        .collect();
    let candidate = cleaned.join(".");
    if aai_descriptor::is_valid_app_id(&candidate) {
        return candidate;
    }
    let fallback = fallback.to_ascii_lowercase();
    if aai_descriptor::is_valid_app_id(&fallback) {
        fallback
    } else {
        "local.drafted.app".to_owned()
    }
}

/// Asserts that a draft passes `validate` as it is (the converters' tests).
pub(crate) fn first_sentence(text: &str) -> String {
    let text = clean(text);
    match text.find(". ") {
        Some(at) if at < 240 => text[..=at].to_owned(),
        _ => text,
    }
}

#[cfg(test)]
pub(crate) fn assert_validates(draft: &Draft) {
    if let Err(error) = aai_descriptor::parse("draft", draft.descriptor.to_string().as_bytes()) {
        panic!("the draft does not validate: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risks_are_guessed_from_the_first_word_and_the_method() {
        assert_eq!(
            guess_risk("GetServerInformation", None),
            ("low", true, false)
        );
        assert_eq!(guess_risk("list_repos", None), ("low", true, false));
        assert_eq!(guess_risk("SetVolume", None), ("medium", false, false));
        assert_eq!(
            guess_risk("create_issue", Some("POST")),
            ("medium", false, false)
        );
        assert_eq!(guess_risk("SendMessage", None), ("high", false, false));
        assert_eq!(guess_risk("DeleteItem", None), ("high", false, true));
        assert_eq!(guess_risk("KillUnit", None), ("high", false, true));
        assert_eq!(
            guess_risk("repos_remove_collaborator", Some("DELETE")),
            ("high", false, true)
        );
        assert_eq!(guess_risk("anything", Some("GET")), ("low", true, false));
        assert_eq!(guess_risk("Frobnicate", None), ("medium", false, false));
    }

    #[test]
    fn names_become_unique_valid_tool_names() {
        let mut taken = std::collections::HashSet::new();
        assert_eq!(
            tool_name("GetServerInformation", &mut taken),
            "get_server_information"
        );
        assert_eq!(
            tool_name("repos/list-for-user", &mut taken),
            "repos_list_for_user"
        );
        assert_eq!(
            tool_name("get_server_information", &mut taken),
            "get_server_information_2"
        );
        assert_eq!(tool_name("!!!", &mut taken), "tool");
        let long = "a".repeat(100);
        assert!(aai_descriptor::naming::is_valid_tool_name(&tool_name(
            &long, &mut taken
        )));
    }

    #[test]
    fn app_ids_come_from_names_or_fall_back() {
        assert_eq!(
            app_id_from("org.freedesktop.Notifications", "x.y"),
            "org.freedesktop.Notifications"
        );
        assert_eq!(
            app_id_from("not an id", "com.example.api"),
            "com.example.api"
        );
    }
}
