//! The page as a model reads it: Chromium's accessibility tree (the browser's own, which a
//! page's scripts cannot rewrite) as compact lines — one per meaningful node, indented by
//! depth, refs only on what can be acted on, table rows on one line, wrappers dropped.

use std::collections::HashMap;

use serde_json::Value;

/// Roles that only group others: their children are shown in their place.
const TRANSPARENT: &[&str] = &[
    "generic",
    "none",
    "presentation",
    "GenericContainer",
    "LineBreak",
    "InlineTextBox",
    "ListMarker",
    "group",
    "Section",
    "section",
    "LayoutTable",
    "LayoutTableRow",
    "LayoutTableCell",
    "rowgroup",
    "Canvas",
    "Abbr",
    "emphasis",
    "strong",
    "time",
    "mark",
    "code",
    "superscript",
    "subscript",
    "DescriptionListDetail",
    "DescriptionListTerm",
    "Ruby",
    "blockquote",
    "figure",
    "paragraph",
];

/// Containers whose structure matters: never folded into one line of text.
const STRUCTURED: &[&str] = &[
    "table",
    "grid",
    "treegrid",
    "rowgroup",
    "list",
    "listbox",
    "tree",
    "menu",
    "menubar",
    "tablist",
    "DescriptionList",
];

/// Roles an agent acts on: these carry a ref.
const ACTIONABLE: &[&str] = &[
    "link",
    "button",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "treeitem",
    "MenuListPopup",
    "DisclosureTriangle",
    "PopUpButton",
];

/// Shorter spellings of common roles.
fn role_word(role: &str) -> &str {
    match role {
        "StaticText" => "",
        "textbox" => "textbox",
        "listitem" => "-",
        "columnheader" | "rowheader" | "cell" | "gridcell" => "cell",
        "image" | "img" => "img",
        "DisclosureTriangle" => "summary",
        "MenuListPopup" => "menu",
        "PopUpButton" => "button",
        "RootWebArea" => "page",
        other => other,
    }
}

struct Node<'a> {
    raw: &'a Value,
    children: Vec<&'a str>,
}

fn text_of(v: &Value) -> &str {
    v["value"].as_str().unwrap_or_default()
}

fn property<'a>(raw: &'a Value, name: &str) -> Option<&'a Value> {
    raw["properties"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
        .map(|p| &p["value"]["value"])
}

/// Renders a full AX tree (`Accessibility.getFullAXTree`'s `nodes`) as lines.
pub fn render(nodes: &[Value]) -> Vec<String> {
    let mut by_id: HashMap<&str, Node<'_>> = HashMap::new();
    for raw in nodes {
        let Some(id) = raw["nodeId"].as_str() else {
            continue;
        };
        let children = raw["childIds"]
            .as_array()
            .map(|c| c.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        by_id.insert(id, Node { raw, children });
    }
    let mut lines = Vec::new();
    if let Some(root) = nodes.first().and_then(|n| n["nodeId"].as_str()) {
        walk(&by_id, root, 0, &mut lines);
    }
    lines
}

/// All the text under a node, joined (for names of rows, and to tell when children only
/// repeat the name).
fn flat_text(by_id: &HashMap<&str, Node<'_>>, id: &str, out: &mut String, depth: usize) {
    let Some(node) = by_id.get(id) else { return };
    if depth > 64 {
        return;
    }
    let role = text_of(&node.raw["role"]);
    if role == "StaticText" {
        let t = text_of(&node.raw["name"]);
        if !t.trim().is_empty() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            out.push_str(t.trim());
        }
        return;
    }
    for child in &node.children {
        flat_text(by_id, child, out, depth + 1);
    }
}

/// Text runs longer than this are not folded into their container's one line.
const FOLD_CHARS: usize = 400;

fn walk(by_id: &HashMap<&str, Node<'_>>, id: &str, depth: usize, lines: &mut Vec<String>) {
    let Some(node) = by_id.get(id) else { return };
    if depth > 200 {
        return;
    }
    let raw = node.raw;
    let role = text_of(&raw["role"]);
    let name = text_of(&raw["name"]).trim();
    let ignored = raw["ignored"].as_bool().unwrap_or(false);
    if ignored || role == "RootWebArea" {
        return descend(by_id, &node.children, depth, lines, name);
    }
    let indent = " ".repeat(depth);
    if role == "StaticText" {
        if !name.is_empty() {
            lines.push(format!("{indent}\"{}\"", quote_inner(name)));
        }
        return;
    }
    if TRANSPARENT.contains(&role) && (role != "group" || name.is_empty()) {
        // A wrapper of plain text (a paragraph, a div of words) is one line.
        if !STRUCTURED.contains(&role) && !has_actionable(by_id, id, 0) {
            let mut text = String::new();
            flat_text(by_id, id, &mut text, 0);
            if text.chars().count() <= FOLD_CHARS {
                if !text.is_empty() {
                    lines.push(format!("{indent}\"{}\"", quote_inner(&text)));
                }
                return;
            }
        }
        return descend(by_id, &node.children, depth, lines, name);
    }
    // A drop-down's options are one line: `select` takes an option by its label.
    if role == "MenuListPopup" {
        let options: Vec<String> = node
            .children
            .iter()
            .filter_map(|c| by_id.get(c))
            .map(|c| quote_inner(text_of(&c.raw["name"]).trim()))
            .filter(|n| !n.is_empty())
            .collect();
        if !options.is_empty() {
            lines.push(format!("{indent}options: {}", options.join(" | ")));
        }
        return;
    }
    if role == "row" {
        let mut cells = Vec::new();
        for child in &node.children {
            let mut t = String::new();
            flat_text(by_id, child, &mut t, 0);
            let child_role = by_id
                .get(child)
                .map(|c| text_of(&c.raw["role"]))
                .unwrap_or_default();
            if matches!(
                child_role,
                "cell" | "gridcell" | "columnheader" | "rowheader"
            ) {
                cells.push(t);
            }
        }
        // A row of plain cells is one line; one with controls in it is shown in full.
        if !cells.is_empty() && !has_actionable(by_id, id, 0) {
            lines.push(format!("{indent}| {} |", cells.join(" | ")));
            return;
        }
    }
    let mut line = indent;
    let word = match role {
        "heading" => format!(
            "h{}",
            property(raw, "level").and_then(Value::as_u64).unwrap_or(2)
        ),
        other => role_word(other).to_owned(),
    };
    line.push_str(&word);
    if !name.is_empty() {
        if !word.is_empty() {
            line.push(' ');
        }
        line.push('"');
        line.push_str(&quote_inner(&shorten(name, 300)));
        line.push('"');
    }
    let value = text_of(&raw["value"]).trim();
    if !value.is_empty() && value != name {
        line.push_str(" =");
        line.push_str(&shorten(value, 200));
    }
    for (prop, shown) in [
        ("checked", "checked"),
        ("pressed", "pressed"),
        ("selected", "selected"),
        ("expanded", "expanded"),
        ("disabled", "disabled"),
        ("required", "required"),
    ] {
        match property(raw, prop) {
            Some(Value::Bool(true)) => {
                line.push(' ');
                line.push_str(shown);
            }
            Some(Value::String(s)) if s == "true" || s == "mixed" => {
                line.push(' ');
                line.push_str(if s == "mixed" { "mixed" } else { shown });
            }
            _ => {}
        }
    }
    if is_actionable(raw)
        && let Some(node_id) = raw["backendDOMNodeId"].as_i64()
    {
        line.push_str(&format!(" [e{node_id}]"));
    }
    let actionable_inside = has_actionable(by_id, id, 0);
    let mut text = String::new();
    for child in &node.children {
        flat_text(by_id, child, &mut text, 0);
    }
    let text = text.trim();
    // Children that only spell out the name are not repeated; a short run of plain text
    // joins its element's line.
    if !actionable_inside && !STRUCTURED.contains(&role) {
        if text.is_empty() || text == name {
            lines.push(line);
            return;
        }
        if text.chars().count() <= FOLD_CHARS {
            line.push_str(if name.is_empty() { " \"" } else { ": \"" });
            line.push_str(&quote_inner(text));
            line.push('"');
            lines.push(line);
            return;
        }
    }
    lines.push(line);
    descend(by_id, &node.children, depth + 1, lines, name);
}

/// Walks children in order, joining neighbouring text runs into one line.
fn descend(
    by_id: &HashMap<&str, Node<'_>>,
    children: &[&str],
    depth: usize,
    lines: &mut Vec<String>,
    parent: &str,
) {
    // A label or legend that only repeats the name of a control beside it (or inside it)
    // is left out.
    let mut named: Vec<&str> = children
        .iter()
        .filter_map(|c| by_id.get(c))
        .filter(|c| {
            !matches!(
                text_of(&c.raw["role"]),
                "LabelText" | "Legend" | "StaticText"
            )
        })
        .flat_map(|c| {
            let mut names = vec![text_of(&c.raw["name"]).trim()];
            names.extend(
                c.children
                    .iter()
                    .filter_map(|g| by_id.get(g))
                    .map(|g| text_of(&g.raw["name"]).trim()),
            );
            names
        })
        .filter(|n| !n.is_empty())
        .collect();
    named.push(parent);
    let mut run = String::new();
    let flush = |run: &mut String, lines: &mut Vec<String>| {
        if !run.is_empty() {
            lines.push(format!("{}\"{}\"", " ".repeat(depth), quote_inner(run)));
            run.clear();
        }
    };
    for child in children {
        let Some(node) = by_id.get(child) else {
            continue;
        };
        if text_of(&node.raw["role"]) == "StaticText" {
            let t = text_of(&node.raw["name"]).trim();
            if !t.is_empty() {
                if !run.is_empty() {
                    run.push(' ');
                }
                run.push_str(t);
            }
            continue;
        }
        if matches!(text_of(&node.raw["role"]), "LabelText" | "Legend")
            && !has_actionable(by_id, child, 0)
        {
            let mut label = String::new();
            flat_text(by_id, child, &mut label, 0);
            if label.trim().is_empty() || named.contains(&label.trim()) {
                continue;
            }
        }
        flush(&mut run, lines);
        walk(by_id, child, depth, lines);
    }
    flush(&mut run, lines);
}

fn is_actionable(raw: &Value) -> bool {
    let role = text_of(&raw["role"]);
    ACTIONABLE.contains(&role)
        || (matches!(property(raw, "focusable"), Some(Value::Bool(true)))
            && !matches!(role, "RootWebArea" | "Iframe" | "IframePresentational"))
}

fn has_actionable(by_id: &HashMap<&str, Node<'_>>, id: &str, depth: usize) -> bool {
    let Some(node) = by_id.get(id) else {
        return false;
    };
    if depth > 64 {
        return false;
    }
    node.children.iter().any(|c| {
        by_id.get(c).is_some_and(|n| is_actionable(n.raw)) || has_actionable(by_id, c, depth + 1)
    })
}

fn quote_inner(text: &str) -> String {
    text.replace('\n', " ").replace('"', "'")
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    let at = cut.rfind(' ').filter(|&a| a > max / 2).unwrap_or(cut.len());
    format!("{}…", &cut[..at])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(id: &str, role: &str, name: &str, children: &[&str], backend: i64) -> Value {
        json!({"nodeId": id, "ignored": false, "role": {"value": role}, "name": {"value": name},
               "childIds": children, "backendDOMNodeId": backend})
    }

    #[test]
    fn compact_lines() {
        let nodes = vec![
            node("1", "RootWebArea", "Shop", &["2", "3", "6"], 1),
            node("2", "heading", "Welcome", &["20"], 2),
            node("20", "StaticText", "Welcome", &[], 20),
            node("3", "generic", "", &["4", "5"], 3),
            node("4", "link", "Home", &["40"], 4),
            node("40", "StaticText", "Home", &[], 40),
            node("5", "textbox", "Email", &[], 5),
            node("6", "table", "", &["7"], 6),
            node("7", "row", "", &["8", "9"], 7),
            node("8", "cell", "", &["80"], 8),
            node("80", "StaticText", "a", &[], 80),
            node("9", "cell", "", &["90"], 9),
            node("90", "StaticText", "b", &[], 90),
        ];
        let lines = render(&nodes);
        assert_eq!(
            lines,
            vec![
                "h2 \"Welcome\"",
                "link \"Home\" [e4]",
                "textbox \"Email\" [e5]",
                "table",
                " | a | b |"
            ]
        );
    }
}
