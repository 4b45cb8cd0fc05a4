//! A draft from an application's accessibility tree (`describe a11y`): one tool per menu
//! command, per button of the main window, per open dialog (its labelled fields filled from
//! parameters, then its default button), and read tools for what the window shows (a text's
//! contents, a list's rows). Elements are addressed by paths of roles and names
//! ([`aai_descriptor::ui::UiPath`]), never by coordinates.
//!
//! The tree is given as [`UiNode`]s (`aai-drafts` walks the running application); this module
//! only shapes it.

use std::collections::HashSet;

use aai_descriptor::ui::{Segment, UiPath};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{DescribeError, Draft, guess_risk, tool, tool_name};

/// One element of the tree as the drafter sees it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UiNode {
    pub role: String,
    #[serde(default)]
    pub name: String,
    /// Its action names (`click`, `activate`, …).
    #[serde(default)]
    pub actions: Vec<String>,
    /// Its AT-SPI interfaces (`Text`, `EditableText`, `Value`, `Selection`, …).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Its states (`showing`, `enabled`, `editable`, `is_default`, …).
    #[serde(default)]
    pub states: Vec<String>,
    /// The names of the elements that label it (read for fields only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Where it shows on the screen, x, y, width, height (read for fields and labels only):
    /// how a field is paired with the label beside or above it when nothing else ties them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<[i32; 4]>,
    #[serde(default)]
    pub children: Vec<UiNode>,
}

impl UiNode {
    fn has(&self, interface: &str) -> bool {
        self.interfaces.iter().any(|i| i == interface)
    }

    fn state(&self, state: &str) -> bool {
        self.states.iter().any(|s| s == state)
    }

    fn named(&self) -> Option<&str> {
        Some(self.name.trim()).filter(|n| !n.is_empty())
    }
}

const MENU_ITEMS: &[&str] = &["menu item", "check menu item", "radio menu item"];
const BUTTONS: &[&str] = &["push button", "toggle button"];
const TOP_LEVEL: &[&str] = &["frame", "window"];
const DIALOGS: &[&str] = &["dialog", "file chooser", "alert"];
const LISTS: &[&str] = &["list", "list box", "table", "tree table", "tree"];
/// Controls whose state the main window shows: each gets a read tool, and the ones a person
/// sets (a check box, a slider, a spin button) a tool that sets them.
const CONTROLS: &[&str] = &[
    "check box",
    "radio button",
    "slider",
    "spin button",
    "progress bar",
    "combo box",
];
/// Buttons that dismiss a dialog rather than act: not tools.
const DISMISS: &[&str] = &["close", "cancel", "help", "no"];

/// A menu with more plain items than this is drafted as one tool taking the item.
const CHOICES_AT: usize = 8;

/// Whether a command's label marks it as opening a dialog (`Save As…`).
fn opens_dialog(name: &str) -> bool {
    let name = name.trim_end();
    name.ends_with('…') || name.ends_with("...")
}

/// How symbol-only button labels are spelled in tool names.
fn spelled(label: &str) -> String {
    match label.trim() {
        "<-" | "←" | "⌫" => return "backspace".into(),
        "+/-" | "±" => return "plus_minus".into(),
        _ => {}
    }
    let mut out = Vec::new();
    let mut word = String::new();
    for c in label.chars() {
        let name = match c {
            '+' => "plus",
            '-' | '−' => "minus",
            '*' | '×' => "times",
            '/' | '÷' => "divide",
            '=' => "equals",
            '.' => "point",
            ',' => "comma",
            '%' => "percent",
            '(' => "left paren",
            ')' => "right paren",
            '^' => "power",
            '!' => "factorial",
            '<' => "less",
            '>' => "greater",
            '√' => "sqrt",
            _ => {
                word.push(c);
                continue;
            }
        };
        if !word.trim().is_empty() {
            out.push(std::mem::take(&mut word));
        }
        word.clear();
        out.push(name.to_owned());
    }
    if !word.trim().is_empty() {
        out.push(word);
    }
    out.join(" ")
}

/// A name without the ellipsis that marks a command opening a dialog.
fn bare(name: &str) -> &str {
    name.trim()
        .trim_end_matches('…')
        .trim_end_matches("...")
        .trim()
}

/// A path segment for an element.
fn segment(role: &str, name: Option<&str>, nth: usize) -> String {
    Segment {
        role: role.to_owned(),
        name: name.map(str::to_owned),
        nth,
    }
    .to_string()
}

/// Drafts a descriptor for the application `app` (its accessible name) from its tree.
///
/// # Errors
/// The tree has no window, or nothing in it can be a tool.
pub fn draft(app: &str, app_id: &str, tree: &UiNode) -> Result<Draft, DescribeError> {
    let windows: Vec<&UiNode> = tree
        .children
        .iter()
        // A window the app hid (a dialog closed but kept) is not there: the executor skips it too.
        .filter(|w| TOP_LEVEL.contains(&w.role.as_str()) && w.state("showing"))
        .collect();
    let dialogs_open = tree
        .children
        .iter()
        .any(|w| DIALOGS.contains(&w.role.as_str()) && w.state("showing"));
    // An app that is one dialog (a form, a prompt) has no main window: its dialog's tools alone.
    let none = UiNode::default();
    let main = match windows.first() {
        Some(main) => *main,
        None if dialogs_open => &none,
        None => {
            return Err(DescribeError::Nothing(format!(
                "{app} shows no window in its accessibility tree (is it started, with its window open?)"
            )));
        }
    };
    let mut taken = HashSet::new();
    let mut tools = Vec::new();
    let mut notes = Vec::new();

    // Menu commands, wherever the menu bar is (found through the menus, not the window).
    let mut menus = Vec::new();
    menu_commands(main, &mut Vec::new(), &mut menus);
    // A menu of many plain choices (file types, color schemes) is one tool taking the choice.
    let mut by_menu: Vec<(&Vec<String>, Vec<&UiNode>)> = Vec::new();
    for (chain, item) in &menus {
        match by_menu.iter_mut().find(|(c, _)| *c == chain) {
            Some((_, items)) => items.push(item),
            None => by_menu.push((chain, vec![item])),
        }
    }
    for (chain, items) in by_menu {
        let menu_path: Vec<String> = chain
            .iter()
            .map(|m| segment("menu", Some(m.trim()), 1))
            .collect();
        let menu_words: Vec<&str> = chain.iter().map(|m| bare(m)).collect();
        let choices = items.len() > CHOICES_AT && items.iter().all(|i| !opens_dialog(&i.name));
        if choices {
            let names: Vec<&str> = items.iter().map(|i| i.name.trim()).collect();
            let role = if items.iter().all(|i| i.role == items[0].role) {
                items[0].role.as_str()
            } else {
                "*"
            };
            let name = tool_name(&format!("choose {}", menu_words.join(" ")), &mut taken);
            let mut path = menu_path.clone();
            path.push(segment(role, Some("${item}"), 1));
            tools.push(tool(
                &name,
                None,
                &format!("Chooses `item` in the menu {}.", menu_words.join(" → ")),
                Some(json!({"type": "object", "properties": {"item": {"type": "string", "enum": names}}, "required": ["item"]})),
                ("medium", false, false),
                steps(vec![json!({"action": "invoke", "path": path.join("/")})]),
            ));
            continue;
        }
        for item in items {
            let label = bare(&item.name);
            let words: Vec<&str> = menu_words.iter().copied().chain([label]).collect();
            let name = tool_name(&words.join(" "), &mut taken);
            let mut path = menu_path.clone();
            path.push(segment(&item.role, Some(item.name.trim()), 1));
            let what = match item.role.as_str() {
                "check menu item" => "Turns on or off",
                "radio menu item" => "Chooses",
                _ if opens_dialog(&item.name) => "Opens the dialog of",
                _ => "Runs",
            };
            let risk = guess_risk(label, None);
            let risk = if risk.1 {
                ("medium", false, false)
            } else {
                risk
            };
            // A command that opens a dialog is clicked, not called: its dialog would run
            // inside the accessibility call and the app would answer nothing until it closed.
            let invoke = if opens_dialog(&item.name) {
                json!({"action": "invoke", "path": path.join("/"), "use": aai_descriptor::ui::UiStep::POINTER})
            } else {
                json!({"action": "invoke", "path": path.join("/")})
            };
            tools.push(tool(
                &name,
                None,
                &format!("{what} the menu command {}.", words.join(" → ")),
                None,
                risk,
                steps(vec![invoke]),
            ));
        }
    }

    // Buttons of the main window (outside its menus), and what it shows.
    let mut shown_texts = 0usize;
    walk(main, &mut |node| {
        if node.role == "text" && node.has("Text") && node.state("showing") {
            shown_texts += 1;
        }
    });
    let mut texts = 0usize;
    let mut lists = 0usize;
    walk(main, &mut |node| {
        let role = node.role.as_str();
        if BUTTONS.contains(&role) && !node.actions.is_empty() {
            let Some(label) = node.named() else {
                return;
            };
            let words = spelled(bare(label));
            let name = tool_name(&format!("press {words}"), &mut taken);
            let (risk, _, destructive) = guess_risk(&words, None);
            let risk = if risk == "low" { "medium" } else { risk };
            tools.push(tool(
                &name,
                None,
                &format!("Presses the {label:?} button of the main window."),
                None,
                (risk, false, destructive),
                steps(vec![json!({"action": "invoke", "path": path_in(tree, main, node, Some(node.name.trim()))})]),
            ));
        } else if role == "text" && node.has("Text") && node.state("showing") {
            texts += 1;
            let path = path_in(tree, main, node, None);
            let label = match node.named() {
                Some(own) => own.to_owned(),
                None if shown_texts == 1 => "text".to_owned(),
                None => format!("text {texts}"),
            };
            let name = tool_name(&format!("read {label}"), &mut taken);
            tools.push(tool(
                &name,
                None,
                &format!("Reads the text shown in the main window's {label} (its whole contents)."),
                None,
                ("low", true, false),
                steps(vec![json!({"action": "read_text", "path": path})]),
            ));
            if node.has("EditableText") && node.state("editable") {
                let name = tool_name(&format!("set {label}"), &mut taken);
                tools.push(tool(
                    &name,
                    None,
                    &format!("Replaces the whole text of the main window's {label} with `text`."),
                    Some(json!({"type": "object", "properties": {"text": {"type": "string", "description": "The new text, whole."}}, "required": ["text"]})),
                    ("medium", false, false),
                    steps(vec![json!({"action": "set_text", "path": path, "text": "${text}"})]),
                ));
            }
        } else if CONTROLS.contains(&role) && node.state("showing") {
            let Some(own) = node.named() else {
                return;
            };
            let label = bare(own.trim_end_matches(':')).replace('_', "");
            let path = path_in(tree, main, node, Some(node.name.trim()));
            let name = tool_name(&format!("read {label} state"), &mut taken);
            tools.push(tool(
                &name,
                None,
                &format!("Reads the state of the main window's {role} {label:?}: its states (checked, enabled, …) and its value."),
                None,
                ("low", true, false),
                steps(vec![json!({"action": "read_state", "path": path})]),
            ));
            let set = match role {
                "check box" => Some((
                    json!({"on": {"type": "boolean", "description": "On (true) or off (false)."}}),
                    json!({"action": "check", "path": path, "value": "${on}"}),
                    "on",
                    format!("Turns the main window's check box {label:?} on or off as `on` says."),
                )),
                "slider" | "spin button" if node.has("Value") => Some((
                    json!({"value": {"type": "number"}}),
                    json!({"action": "set_value", "path": path, "value": "${value}"}),
                    "value",
                    format!("Sets the main window's {role} {label:?} to `value`."),
                )),
                _ => None,
            };
            if let Some((properties, step, param, what)) = set {
                let name = tool_name(&format!("set {label}"), &mut taken);
                tools.push(tool(
                    &name,
                    None,
                    &what,
                    Some(json!({"type": "object", "properties": properties, "required": [param]})),
                    ("medium", false, false),
                    steps(vec![step]),
                ));
            }
        } else if LISTS.contains(&role) && node.state("showing") {
            lists += 1;
            let label = node
                .named()
                .map_or_else(|| format!("{role} {lists}"), str::to_owned);
            let name = tool_name(&format!("read {label} rows"), &mut taken);
            tools.push(tool(
                &name,
                None,
                &format!("Reads the rows of the main window's {label}."),
                None,
                ("low", true, false),
                steps(vec![
                    json!({"action": "read_rows", "path": path_in(tree, main, node, node.named())}),
                ]),
            ));
        }
    });

    // Dialogs open now: one tool each that fills its labelled fields and confirms it.
    // A window without a menu bar whose fields a button confirms (a form app's one window)
    // is filled like a dialog too.
    let form = |w: &UiNode| {
        let mut menus = false;
        let mut fields = false;
        visit_in_order(w, &mut |n| {
            menus |= n.role == "menu bar";
            fields |= n.role == "text" && n.has("EditableText") && n.state("showing");
        });
        !menus && fields
    };
    for dialog in tree.children.iter().filter(|w| {
        w.state("showing")
            && (DIALOGS.contains(&w.role.as_str())
                || (TOP_LEVEL.contains(&w.role.as_str()) && form(w)))
    }) {
        let made = dialog_tools(dialog, &mut taken);
        if made.is_empty() {
            notes.push(format!(
                "the open dialog {:?} has no button showing: no tool",
                dialog.name
            ));
        }
        tools.extend(made);
    }
    // An element whose name holds `${` would read as a placeholder in a path (taking an
    // argument's text, or naming one no tool declares): its tools are left out.
    let before = tools.len();
    tools.retain(|tool| !names_a_placeholder(tool));
    if tools.len() < before {
        notes.push(format!(
            "{} tools left out: an element they act on has `${{` in its name, which a path would read as an argument",
            before - tools.len()
        ));
    }
    if tools.is_empty() {
        return Err(DescribeError::Nothing(format!(
            "{app}'s tree has no menu command, button, text or list to make a tool of"
        )));
    }
    notes.push(format!(
        "{} tools from {app}'s accessibility tree; a dialog becomes a tool when it is open while drafting — open it and draft again to add it",
        tools.len()
    ));
    let mut section = Map::new();
    section.insert("automation".into(), json!("atspi"));
    section.insert("app".into(), json!(app));
    section.insert("tools".into(), Value::Array(tools));
    let todo = vec![
        "Drafted from the running application's accessibility tree: check that each tool does what its name says, and name the read tools after what they show.".to_owned(),
    ];
    Ok(Draft {
        descriptor: crate::descriptor(
            app_id,
            app,
            &format!("{app}, driven through its accessibility tree (menus, buttons, fields)."),
            "linux",
            section,
            todo,
        ),
        notes,
    })
}

/// Whether one of `tool`'s paths has `${` in a name taken from the tree: only the row a
/// dialog's list step selects (`…/table cell[${files}]`, its last segment) is an argument.
fn names_a_placeholder(tool: &Value) -> bool {
    let steps = tool["steps"].as_array().map_or(&[][..], Vec::as_slice);
    steps.iter().any(|step| {
        let Some(Ok(path)) = step["path"].as_str().map(UiPath::parse) else {
            return false;
        };
        let last = path.segments.len().saturating_sub(1);
        path.segments.iter().enumerate().any(|(at, segment)| {
            let Some(name) = segment.name.as_deref().filter(|n| n.contains("${")) else {
                return false;
            };
            let declared = name
                .strip_prefix("${")
                .and_then(|n| n.strip_suffix('}'))
                .is_some_and(|param| tool["parameters"]["properties"].get(param).is_some());
            !(step["action"] == "select" && at == last && declared)
        })
    })
}

fn steps(steps: Vec<Value>) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("steps".into(), Value::Array(steps));
    fields
}

/// Every element below `node`, depth first, menus left out.
fn walk<'n>(node: &'n UiNode, visit: &mut dyn FnMut(&'n UiNode)) {
    for child in &node.children {
        if matches!(child.role.as_str(), "menu bar" | "menu" | "popup menu") {
            continue;
        }
        visit(child);
        walk(child, visit);
    }
}

/// Menu items with an action, with the names of the menus they are in.
fn menu_commands<'n>(
    node: &'n UiNode,
    chain: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, &'n UiNode)>,
) {
    for child in &node.children {
        match child.role.as_str() {
            "menu" => {
                let Some(name) = child.named() else {
                    continue;
                };
                chain.push(name.trim().to_owned());
                menu_commands(child, chain, out);
                chain.pop();
            }
            role if MENU_ITEMS.contains(&role) => {
                if child.named().is_some() && !child.actions.is_empty() && !chain.is_empty() {
                    out.push((chain.clone(), child));
                }
            }
            _ => menu_commands(child, chain, out),
        }
    }
}

/// The tools that fill an open dialog and press one of its buttons: a parameter per labelled
/// text field, one tool per button that acts (the default first; close, cancel and help are
/// not tools).
fn dialog_tools(dialog: &UiNode, taken: &mut HashSet<String>) -> Vec<Value> {
    let title = dialog.named().unwrap_or("dialog");
    let dialog_path = segment(&dialog.role, dialog.named(), 1);
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut buttons: Vec<&UiNode> = Vec::new();
    let mut dismiss: Option<&UiNode> = None;
    let mut checks: Vec<(String, String, String)> = Vec::new();
    let mut lists: Vec<&UiNode> = Vec::new();
    let mut label: Option<String> = None;
    let mut params = HashSet::new();
    let plain = |l: &str| bare(l.trim_end_matches(':')).replace('_', "");
    let mut placed: Vec<(&UiNode, [i32; 4])> = Vec::new();
    visit_in_order(dialog, &mut |node| {
        if node.role == "label"
            && node.state("showing")
            && node.named().is_some()
            && let Some(bounds) = node.bounds
        {
            placed.push((node, bounds));
        }
    });
    visit_in_order(dialog, &mut |node| match node.role.as_str() {
        // What is not on the screen (a hidden pane's fields and buttons) is not the dialog's.
        _ if !node.state("showing") => {}
        "label" => label = node.named().map(plain),
        "text" if node.has("EditableText") => {
            // Its own name, else the label the toolkit ties it to, else the label beside or
            // above it on the screen, else the label before it in the tree.
            let name = node
                .named()
                .map(str::to_owned)
                .or_else(|| node.labels.first().map(|l| plain(l)))
                .or_else(|| {
                    let beside = label_by_place(node.bounds?, &placed)?;
                    label = None;
                    Some(plain(&beside.name))
                })
                .or_else(|| label.take());
            if let Some(name) = name {
                let param = tool_name(&name, &mut params);
                let own = node.named();
                let path = format!(
                    "{dialog_path}/{}",
                    segment("text", own, nth(dialog, node, "text", own))
                );
                fields.push((param, path));
            }
        }
        "check box" if node.named().is_some() => {
            let name = plain(node.name.trim());
            let param = tool_name(&name, &mut params);
            let own = node.named();
            let path = format!(
                "{dialog_path}/{}",
                segment("check box", own, nth(dialog, node, "check box", own))
            );
            checks.push((param, name, path));
        }
        "table" | "tree table" | "tree" | "list" | "list box" if node.named().is_some() => {
            lists.push(node);
        }
        role if BUTTONS.contains(&role) && node.named().is_some() => {
            let dismisses = node
                .named()
                .is_some_and(|n| DISMISS.contains(&plain(n).to_lowercase().as_str()));
            if !dismisses {
                buttons.push(node);
            } else if dismiss.is_none() {
                dismiss = Some(node);
            }
        }
        _ => {}
    });
    // Where the dialog has a default button, its actions are the buttons beside it (a file
    // chooser's path bar and folder buttons are not the dialog's actions).
    if let Some(default) = buttons.iter().find(|b| b.state("is_default")) {
        let area = parent_of(dialog, default);
        buttons.retain(|b| {
            parent_of(dialog, b).is_some_and(|p| area.is_some_and(|a| std::ptr::eq(p, a)))
        });
        if dismiss.is_some_and(|d| {
            !parent_of(dialog, d).is_some_and(|p| area.is_some_and(|a| std::ptr::eq(p, a)))
        }) {
            dismiss = None;
        }
    }
    // The default button first: it is what Enter would press.
    buttons.sort_by_key(|b| !b.state("is_default"));
    let one = buttons.len() == 1;
    let mut properties = Map::new();
    let mut filled = vec![json!({"action": "wait", "path": dialog_path})];
    for (param, path) in &fields {
        properties.insert(param.clone(), json!({"type": "string"}));
        filled.push(json!({"action": "set_text", "path": path, "text": format!("${{{param}}}")}));
    }
    // A dialog whose one input is a named list (a file chooser's Open: its files) takes the
    // row to select, by the text of one of its cells.
    let mut rows: Option<(String, String)> = None;
    if let ([list], true) = (lists.as_slice(), fields.is_empty()) {
        let name = plain(list.name.trim());
        let param = tool_name(&name, &mut params);
        let own = list.named();
        let item = if list.role.starts_with("list") {
            "list item"
        } else {
            "table cell"
        };
        let path = format!(
            "{dialog_path}/{}/{item}[${{{param}}}]",
            segment(&list.role, own, nth(dialog, list, &list.role, own))
        );
        properties.insert(
            param.clone(),
            json!({"type": "string", "description": format!("the row of {name:?} to select, by the text of one of its cells")}),
        );
        filled.push(json!({"action": "select", "path": path}));
        rows = Some((param, path));
    }
    for (param, name, path) in &checks {
        properties.insert(
            param.clone(),
            json!({"type": "boolean", "description": format!("{name:?} on or off; left as it is when not given")}),
        );
        filled.push(json!({"action": "check", "path": path, "value": format!("${{{param}}}")}));
    }
    let required: Vec<&String> = fields.iter().chain(&rows).map(|(p, _)| p).collect();
    let params_list = fields
        .iter()
        .chain(&rows)
        .map(|(p, _)| p.as_str())
        .chain(checks.iter().map(|(p, _, _)| p.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let button_path = |button: &UiNode| {
        let named = Some(button.name.trim());
        format!(
            "{dialog_path}/{}",
            segment(
                &button.role,
                named,
                nth(dialog, button, &button.role, named)
            )
        )
    };
    let mut made: Vec<Value> = buttons
        .iter()
        .map(|button| {
            let label = bare(&button.name).replace('_', "");
            let mut steps_out = filled.clone();
            // Clicked, as a person would: what the press sets off (saving, then maybe a
            // question whether to replace the file) runs on the app's own loop, not inside the
            // accessibility call, where a modal question would stop the app answering.
            steps_out.push(json!({"action": "invoke", "path": button_path(button), "use": aai_descriptor::ui::UiStep::POINTER}));
            let name = if one {
                tool_name(&format!("{} dialog", bare(title)), taken)
            } else {
                tool_name(&format!("{} dialog {label}", bare(title)), taken)
            };
            let risk = guess_risk(&label, None);
            let what = if properties.is_empty() {
                format!("Presses {label:?} in the open {title:?} dialog.")
            } else if let (Some((param, _)), true) = (&rows, fields.is_empty() && checks.is_empty()) {
                format!("Selects the row `{param}` names in the open {title:?} dialog's list and presses {label:?}.")
            } else {
                format!("Fills the open {title:?} dialog's fields ({params_list}) and presses {label:?}.")
            };
            let parameters = (!properties.is_empty()).then(|| {
                json!({"type": "object", "properties": properties, "required": required})
            });
            tool(
                &name,
                None,
                &format!("{what} The dialog must be open: open it with its command first."),
                parameters,
                (if risk.0 == "low" { "medium" } else { risk.0 }, false, risk.2),
                steps(steps_out),
            )
        })
        .collect();
    // Its Close or Cancel: how the agent leaves the dialog without acting.
    if let Some(button) = dismiss {
        let label = plain(&button.name);
        made.push(tool(
            &tool_name(&format!("{} dialog close", bare(title)), taken),
            None,
            &format!("Closes the open {title:?} dialog without acting (presses {label:?})."),
            None,
            ("low", false, false),
            steps(vec![
                json!({"action": "invoke", "path": button_path(button)}),
                json!({"action": "gone", "path": dialog_path}),
            ]),
        ));
    }
    made
}

/// The `#n` that finds `target` among `root`'s descendants matching `role` and `name`, in the
/// order the executor looks (breadth first, in the tree's order).
fn nth(root: &UiNode, target: &UiNode, role: &str, name: Option<&str>) -> usize {
    let mut queue: std::collections::VecDeque<&UiNode> = root.children.iter().collect();
    let mut count = 0;
    while let Some(node) = queue.pop_front() {
        // Unnamed, only what shows counts (as the executor counts).
        let counts = match name {
            Some(n) => n == node.name.trim(),
            None => node.state("showing"),
        };
        if node.role == role && counts {
            count += 1;
            if std::ptr::eq(node, target) {
                return count;
            }
        }
        queue.extend(node.children.iter());
    }
    count.max(1)
}

/// The path from the application to `target` inside `window` (`frame/push button[OK]`).
fn path_in(tree: &UiNode, window: &UiNode, target: &UiNode, name: Option<&str>) -> String {
    // Among the windows showing, as the executor counts them.
    let place = tree
        .children
        .iter()
        .filter(|w| w.role == window.role && w.state("showing"))
        .position(|w| std::ptr::eq(w, window))
        .map_or(1, |p| p + 1);
    let top = segment(&window.role, None, place);
    let own = segment(&target.role, name, nth(window, target, &target.role, name));
    format!("{top}/{own}")
}

/// The label on the same row to the left of a field at `field` (the nearest), else the one
/// just above it; as screen readers pair a field with its label when nothing else ties them.
fn label_by_place<'n>(field: [i32; 4], labels: &[(&'n UiNode, [i32; 4])]) -> Option<&'n UiNode> {
    let [x, y, width, height] = field;
    let left = labels
        .iter()
        .filter(|(_, [lx, ly, lw, lh])| {
            let middle = ly + lh / 2;
            middle >= y && middle <= y + height && lx + lw <= x + 4
        })
        .max_by_key(|(_, [lx, _, lw, _])| lx + lw);
    let above = || {
        labels
            .iter()
            .filter(|(_, [lx, ly, lw, lh])| ly + lh <= y + 4 && *lx < x + width && lx + lw > x)
            .max_by_key(|(_, [_, ly, _, lh])| ly + lh)
    };
    left.or_else(above).map(|(node, _)| *node)
}

/// The element `target` is a child of, inside `root`.
fn parent_of<'n>(root: &'n UiNode, target: &UiNode) -> Option<&'n UiNode> {
    if root.children.iter().any(|c| std::ptr::eq(c, target)) {
        return Some(root);
    }
    root.children.iter().find_map(|c| parent_of(c, target))
}

/// Every element of `node`'s subtree in document order.
fn visit_in_order<'n>(node: &'n UiNode, visit: &mut dyn FnMut(&'n UiNode)) {
    for child in &node.children {
        visit(child);
        visit_in_order(child, visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aai_descriptor::ui::UiPath;

    /// galculator's tree as `describe a11y galculator --tree` read it (Debian's 2.1.4, basic mode).
    const GALCULATOR: &str = include_str!("../tests/fixtures/galculator.a11y.json");

    /// Finds `path` in `tree` by the executor's rules: each segment among the descendants of
    /// the element before, breadth first, the n-th match.
    fn resolve<'t>(tree: &'t UiNode, path: &str) -> Option<&'t UiNode> {
        let path = UiPath::parse(path).expect("the drafted path reads");
        let mut at = tree;
        for segment in &path.segments {
            let mut queue: std::collections::VecDeque<&UiNode> = at.children.iter().collect();
            let mut count = 0;
            let mut found = None;
            while let Some(node) = queue.pop_front() {
                let top = std::ptr::eq(at, tree);
                let shows = node.state("showing");
                if segment.matches(&node.role, &node.name)
                    && (segment.name.is_some() || shows)
                    && (!top || shows)
                {
                    count += 1;
                    if count == segment.nth {
                        found = Some(node);
                        break;
                    }
                }
                queue.extend(node.children.iter());
            }
            at = found?;
        }
        Some(at)
    }

    fn tool<'d>(draft: &'d Draft, name: &str) -> &'d Value {
        draft
            .tools()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
    }

    #[test]
    fn a_real_calculator_becomes_tools_whose_paths_find_their_elements() {
        let tree: UiNode = serde_json::from_str(GALCULATOR).expect("fixture");
        let draft = draft("galculator", "a11y.galculator", &tree).expect("draft");
        crate::assert_validates(&draft);
        for name in [
            "press_7",
            "press_plus",
            "press_8",
            "press_equals",
            "read_text",
        ] {
            tool(&draft, name);
        }
        assert_eq!(tool(&draft, "file_quit")["risk"], "high");
        assert_eq!(tool(&draft, "read_text")["readOnly"], true);
        assert_eq!(
            tool(&draft, "press_plus")["steps"][0]["path"],
            "frame/toggle button[+]"
        );
        // Every step of every tool finds an element that can do what the step does.
        for tool in draft.tools() {
            for step in tool["steps"].as_array().expect("steps") {
                let path = step["path"].as_str().expect("path");
                let node = resolve(&tree, path)
                    .unwrap_or_else(|| panic!("{}: {path} finds nothing", tool["name"]));
                match step["action"].as_str() {
                    Some("invoke") => assert!(!node.actions.is_empty(), "{path}: no action"),
                    Some("read_text") => assert!(node.has("Text"), "{path}: no text"),
                    _ => {}
                }
            }
        }
        // The display read is the text the window shows, not the hidden formula entry.
        let shown = resolve(
            &tree,
            tool(&draft, "read_text")["steps"][0]["path"]
                .as_str()
                .unwrap(),
        )
        .expect("display");
        assert!(shown.state("showing"));
        let names = tool_names(&draft);
        let unique: HashSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "tool names are unique");
    }

    /// The draft's tool names, in order.
    fn tool_names(draft: &Draft) -> Vec<&str> {
        draft
            .tools()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect()
    }

    /// The draft of an app whose one window is `window`, checked to validate.
    fn drafted_window(window: UiNode) -> Draft {
        let tree = node("application", "app", vec![window]);
        let draft = draft("app", "a11y.app", &tree).expect("draft");
        crate::assert_validates(&draft);
        draft
    }

    /// A dialog's row of buttons: Cancel, and `confirm` as the default.
    fn action_area(confirm: &str) -> UiNode {
        node(
            "filler",
            "",
            vec![
                with(node("push button", "Cancel", vec![]), &["click"], &[], &[]),
                with(
                    node("push button", confirm, vec![]),
                    &["click"],
                    &[],
                    &["is_default"],
                ),
            ],
        )
    }

    fn node(role: &str, name: &str, children: Vec<UiNode>) -> UiNode {
        UiNode {
            role: role.into(),
            name: name.into(),
            states: vec!["showing".into()],
            children,
            ..UiNode::default()
        }
    }

    fn with(mut node: UiNode, actions: &[&str], interfaces: &[&str], states: &[&str]) -> UiNode {
        node.actions = actions.iter().map(|s| (*s).to_owned()).collect();
        node.interfaces = interfaces.iter().map(|s| (*s).to_owned()).collect();
        node.states.extend(states.iter().map(|s| (*s).to_owned()));
        node
    }

    #[test]
    fn an_open_dialog_becomes_a_tool_that_fills_its_labelled_fields_and_confirms_it() {
        let field = |label: &str| {
            vec![
                node("label", label, vec![]),
                with(
                    node("text", "", vec![]),
                    &[],
                    &["Text", "EditableText"],
                    &["editable"],
                ),
            ]
        };
        let mut rows = field("Search for:");
        rows.extend(field("Replace _with:"));
        rows.push(with(
            node("check box", "Match _case", vec![]),
            &["click"],
            &[],
            &[],
        ));
        rows.push(with(
            node("push button", "_Close", vec![]),
            &["click"],
            &[],
            &[],
        ));
        rows.push(with(
            node("push button", "_Find", vec![]),
            &["click"],
            &[],
            &["is_default"],
        ));
        rows.push(with(
            node("push button", "Replace _All", vec![]),
            &["click"],
            &[],
            &[],
        ));
        let dialog = node("dialog", "Find and Replace", vec![node("filler", "", rows)]);
        let window = node(
            "frame",
            "notes.txt - Editor",
            vec![
                node(
                    "menu bar",
                    "",
                    vec![node(
                        "menu",
                        "Search",
                        vec![with(
                            node("menu item", "Find and Replace…", vec![]),
                            &["click"],
                            &[],
                            &[],
                        )],
                    )],
                ),
                with(node("push button", "Save", vec![]), &["click"], &[], &[]),
                with(node("push button", "Save", vec![]), &["click"], &[], &[]),
            ],
        );
        let tree = node("application", "editor", vec![window, dialog]);
        let draft = draft("editor", "a11y.editor", &tree).expect("draft");
        crate::assert_validates(&draft);
        let open = tool(&draft, "search_find_and_replace");
        assert!(
            open["description"]
                .as_str()
                .unwrap()
                .contains("Opens the dialog")
        );
        // Clicked where it shows: its dialog must not run inside the accessibility call.
        assert_eq!(open["steps"][0]["use"], "pointer");
        // One tool per button that acts, the default first; Close is not a tool.
        let dialog_tools: Vec<&str> = draft
            .tools()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| n.contains("dialog"))
            .collect();
        assert_eq!(
            dialog_tools,
            [
                "find_and_replace_dialog_find",
                "find_and_replace_dialog_replace_all",
                "find_and_replace_dialog_close"
            ]
        );
        let fill = tool(&draft, "find_and_replace_dialog_replace_all");
        assert_eq!(
            fill["parameters"]["required"],
            json!(["search_for", "replace_with"])
        );
        // A check box is a boolean, not required: left as it is when not given.
        assert_eq!(
            fill["parameters"]["properties"]["match_case"]["type"],
            "boolean"
        );
        assert!(
            fill["steps"]
                .as_array()
                .expect("steps")
                .contains(&json!({"action": "check", "path": "dialog[Find and Replace]/check box[Match _case]", "value": "${match_case}"}))
        );
        let close = tool(&draft, "find_and_replace_dialog_close");
        assert_eq!(
            close["steps"],
            json!([
                {"action": "invoke", "path": "dialog[Find and Replace]/push button[_Close]"},
                {"action": "gone", "path": "dialog[Find and Replace]"}
            ])
        );
        let steps = fill["steps"].as_array().expect("steps");
        assert_eq!(
            steps[0],
            json!({"action": "wait", "path": "dialog[Find and Replace]"})
        );
        assert_eq!(
            steps[1],
            json!({"action": "set_text", "path": "dialog[Find and Replace]/text", "text": "${search_for}"})
        );
        assert_eq!(steps[2]["path"], "dialog[Find and Replace]/text#2");
        assert_eq!(steps[3]["action"], "check");
        assert_eq!(
            steps[4],
            json!({"action": "invoke", "path": "dialog[Find and Replace]/push button[Replace _All]", "use": "pointer"})
        );
        // Two buttons of one name: the second is addressed by its place.
        assert_eq!(
            tool(&draft, "press_save")["steps"][0]["path"],
            "frame/push button[Save]"
        );
        assert_eq!(
            tool(&draft, "press_save_2")["steps"][0]["path"],
            "frame/push button[Save]#2"
        );
        for tool in draft.tools() {
            for step in tool["steps"].as_array().expect("steps") {
                let path = step["path"].as_str().expect("path");
                assert!(resolve(&tree, path).is_some(), "{path} finds nothing");
            }
        }
    }

    /// A file chooser as GTK shows it: the name field comes before its label and is known by
    /// the toolkit's `labelled-by` relation; hidden panes' fields and buttons are not the
    /// dialog's.
    #[test]
    fn a_field_is_known_by_its_label_wherever_the_label_sits_and_hidden_parts_are_not_tools() {
        let mut name = with(
            node("text", "", vec![]),
            &[],
            &["Text", "EditableText"],
            &["editable"],
        );
        name.labels = vec!["Name:".into()];
        let mut hidden_field = with(
            node("text", "", vec![]),
            &[],
            &["Text", "EditableText"],
            &["editable"],
        );
        hidden_field.states.clear();
        let mut hidden_button = with(node("push button", "Create", vec![]), &["click"], &[], &[]);
        hidden_button.states.clear();
        let dialog = node(
            "file chooser",
            "Save As",
            vec![
                name,
                node("label", "Name:", vec![]),
                node("label", "Folder Name", vec![]),
                hidden_field,
                hidden_button,
                // The path bar: buttons, but not the dialog's actions.
                with(node("toggle button", "tmp", vec![]), &["click"], &[], &[]),
                // Its list of files: not an input where the dialog has a field.
                node("table", "Files", vec![node("table cell", "a.txt", vec![])]),
                action_area("Save"),
            ],
        );
        let window = node(
            "frame",
            "Editor",
            vec![with(
                node("push button", "Open", vec![]),
                &["click"],
                &[],
                &[],
            )],
        );
        let tree = node("application", "editor", vec![window, dialog]);
        let draft = draft("editor", "a11y.editor", &tree).expect("draft");
        crate::assert_validates(&draft);
        let dialog_tools: Vec<&str> = draft
            .tools()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| n.starts_with("save_as"))
            .collect();
        assert_eq!(dialog_tools, ["save_as_dialog", "save_as_dialog_close"]);
        let save = tool(&draft, "save_as_dialog");
        assert_eq!(save["parameters"]["required"], json!(["name"]));
        let steps = save["steps"].as_array().expect("steps");
        assert_eq!(
            steps[1],
            json!({"action": "set_text", "path": "file chooser[Save As]/text", "text": "${name}"})
        );
        assert_eq!(
            steps[2],
            json!({"action": "invoke", "path": "file chooser[Save As]/push button[Save]", "use": "pointer"})
        );
        assert_eq!(steps.len(), 3);
    }

    /// What the main window's controls show is read, and the ones a person sets are set: a
    /// check box by a boolean, a spin button by a number; a control without a name is not a
    /// tool (nothing to call it by).
    #[test]
    fn the_main_windows_controls_are_read_and_set() {
        let window = node(
            "frame",
            "Player",
            vec![
                node("menu bar", "", vec![]),
                with(node("check box", "Shuffle", vec![]), &["click"], &[], &[]),
                with(node("spin button", "Volume:", vec![]), &[], &["Value"], &[]),
                node("progress bar", "Position", vec![]),
                with(node("check box", "", vec![]), &["click"], &[], &[]),
            ],
        );
        let draft = drafted_window(window);
        let names = tool_names(&draft);
        assert_eq!(
            names,
            [
                "read_shuffle_state",
                "set_shuffle",
                "read_volume_state",
                "set_volume",
                "read_position_state"
            ]
        );
        let read = tool(&draft, "read_shuffle_state");
        assert_eq!(read["readOnly"], true);
        assert_eq!(
            read["steps"],
            json!([{"action": "read_state", "path": "frame/check box[Shuffle]"}])
        );
        assert_eq!(
            tool(&draft, "set_shuffle")["steps"],
            json!([{"action": "check", "path": "frame/check box[Shuffle]", "value": "${on}"}])
        );
        let volume = tool(&draft, "set_volume");
        assert_eq!(volume["parameters"]["required"], json!(["value"]));
        assert_eq!(
            volume["steps"],
            json!([{"action": "set_value", "path": "frame/spin button[Volume:]", "value": "${value}"}])
        );
    }

    /// An element whose name holds `${` would read as an argument in a path: its tools are
    /// left out (and said so), the rest of the draft stands and validates.
    #[test]
    fn names_that_read_as_arguments_are_not_made_paths() {
        let window = node(
            "frame",
            "Editor",
            vec![
                node("menu bar", "", vec![]),
                with(
                    node("push button", "Save ${name}", vec![]),
                    &["click"],
                    &[],
                    &[],
                ),
                with(node("push button", "${text}", vec![]), &["click"], &[], &[]),
                with(node("push button", "Open", vec![]), &["click"], &[], &[]),
            ],
        );
        let draft = drafted_window(window);
        let names = tool_names(&draft);
        assert_eq!(names, ["press_open"]);
        assert!(
            draft
                .notes
                .iter()
                .any(|n| n.starts_with("2 tools left out")),
            "{:?}",
            draft.notes
        );
    }

    /// A file chooser's Open: no field, one named list — the row to pick is the parameter,
    /// selected before Open is pressed; an unnamed list (the places beside it) is not one.
    #[test]
    fn a_dialog_whose_one_input_is_a_list_takes_the_row_to_select() {
        let dialog = node(
            "file chooser",
            "Open File",
            vec![
                node("list", "", vec![node("list item", "Home", vec![])]),
                node(
                    "table",
                    "Files",
                    vec![node(
                        "table cell",
                        "",
                        vec![node("table cell", "notes.txt", vec![])],
                    )],
                ),
                action_area("Open"),
            ],
        );
        let window = node("frame", "Editor", vec![node("menu bar", "", vec![])]);
        let tree = node("application", "editor", vec![window, dialog]);
        let draft = draft("editor", "a11y.editor", &tree).expect("draft");
        crate::assert_validates(&draft);
        let open = tool(&draft, "open_file_dialog");
        assert_eq!(open["parameters"]["required"], json!(["files"]));
        assert_eq!(
            open["steps"],
            json!([
                {"action": "wait", "path": "file chooser[Open File]"},
                {"action": "select", "path": "file chooser[Open File]/table[Files]/table cell[${files}]"},
                {"action": "invoke", "path": "file chooser[Open File]/push button[Open]", "use": "pointer"}
            ])
        );
    }

    /// zenity's form: an app that is one dialog, its fields listed before their labels in
    /// reverse, tied to them by nothing but the screen — each field takes the label on its row.
    #[test]
    fn a_form_pairs_each_field_with_the_label_beside_it() {
        let placed = |mut node: UiNode, bounds: [i32; 4]| {
            node.bounds = Some(bounds);
            node
        };
        let field = |y: i32| {
            placed(
                with(
                    node("text", "", vec![]),
                    &[],
                    &["Text", "EditableText"],
                    &["editable"],
                ),
                [120, y, 200, 24],
            )
        };
        let grid = node(
            "filler",
            "",
            vec![
                field(80),
                placed(node("label", "Email", vec![]), [10, 84, 60, 16]),
                field(50),
                placed(node("label", "Last name", vec![]), [10, 54, 90, 16]),
                field(20),
                placed(node("label", "First name", vec![]), [10, 24, 90, 16]),
            ],
        );
        let buttons = node(
            "filler",
            "",
            vec![
                with(node("push button", "Cancel", vec![]), &["click"], &[], &[]),
                with(
                    node("push button", "OK", vec![]),
                    &["click"],
                    &[],
                    &["is_default"],
                ),
            ],
        );
        let dialog = node(
            "dialog",
            "New contact",
            vec![
                grid,
                placed(node("label", "Who is it?", vec![]), [10, 0, 200, 16]),
                buttons,
            ],
        );
        let tree = node("application", "zenity", vec![dialog]);
        let draft = draft("zenity", "a11y.zenity", &tree).expect("draft");
        crate::assert_validates(&draft);
        let names = tool_names(&draft);
        assert_eq!(names, ["new_contact_dialog", "new_contact_dialog_close"]);
        let fill = tool(&draft, "new_contact_dialog");
        assert_eq!(
            fill["parameters"]["required"],
            json!(["email", "last_name", "first_name"])
        );
        let steps = fill["steps"].as_array().expect("steps");
        assert_eq!(steps[1]["text"], "${email}");
        assert_eq!(steps[1]["path"], "dialog[New contact]/text");
        assert_eq!(steps[3]["text"], "${first_name}");
        assert_eq!(steps[3]["path"], "dialog[New contact]/text#3");
    }

    #[test]
    fn a_tree_without_a_window_says_so() {
        let error = draft("ghost", "a11y.ghost", &node("application", "ghost", vec![]))
            .expect_err("no window");
        assert!(error.to_string().contains("no window"), "{error}");
    }

    #[test]
    fn symbols_are_spelled_in_tool_names() {
        for (label, words) in [
            ("+", "plus"),
            ("<-", "backspace"),
            ("+/-", "plus_minus"),
            ("M+", "M plus"),
            ("(", "left paren"),
            ("1/x", "1 divide x"),
        ] {
            assert_eq!(spelled(label), words, "{label}");
        }
    }
}
