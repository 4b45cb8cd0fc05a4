//! Accessibility sections (`"automation": "atspi"`): what validates and what is refused, with
//! the pointer and reason a descriptor's author needs.

use aai_descriptor::ui::UiAction;
use serde_json::{Value, json};

fn doc(section: Value) -> Vec<u8> {
    json!({"schema_version": "1.0", "appId": "a11y.editor", "name": "Editor",
           "platforms": {"linux": section}})
    .to_string()
    .into_bytes()
}

fn section(tools: Value) -> Value {
    json!({"automation": "atspi", "app": "editor", "tools": tools})
}

fn problems(bytes: &[u8]) -> String {
    match aai_descriptor::parse("t", bytes) {
        Ok(_) => panic!("validated"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn an_accessibility_section_validates_and_reads_back() {
    let bytes = doc(section(json!([
        {"name": "save_as", "description": "Save under a new name.",
         "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
         "steps": [
            {"action": "invoke", "path": "menu[File]/menu item[Save As…]"},
            {"action": "wait", "path": "dialog[Save As]", "timeout_ms": 3000},
            {"action": "set_text", "path": "dialog[Save As]/text[Name]", "text": "${name}"},
            {"action": "invoke", "path": "dialog[Save As]/push button[Save]", "use": "click"},
            {"action": "gone", "path": "dialog[Save As]"}]},
        {"name": "read_document", "description": "The document's text.", "readOnly": true,
         "steps": [{"action": "read_text", "path": "frame/text", "as": "text"}]}
    ])));
    let descriptor = aai_descriptor::parse("t", &bytes).expect("validates");
    let linux = descriptor.platforms.linux.as_ref().expect("linux");
    assert_eq!(linux.automation, "atspi");
    assert_eq!(linux.fields.app.as_deref(), Some("editor"));
    let steps = linux.tools[0].fields.steps.as_deref().expect("steps");
    assert_eq!(steps.len(), 5);
    assert_eq!(steps[2].action, UiAction::SetText);
    assert_eq!(steps[3].use_action.as_deref(), Some("click"));
    assert!(linux.tools[1].fields.steps.as_deref().expect("read")[0].reads());
}

#[test]
fn what_an_accessibility_section_refuses() {
    for (tools_or_section, says) in [
        // A path that does not read, with the pointer to it.
        (
            section(
                json!([{"name": "t", "description": "d", "steps": [{"action": "invoke", "path": "button[OK"}]}]),
            ),
            "/platforms/linux/tools/0/steps/0/path",
        ),
        // set_text without its text.
        (
            section(
                json!([{"name": "t", "description": "d", "steps": [{"action": "set_text", "path": "text"}]}]),
            ),
            "needs `text`",
        ),
        // A placeholder that names no parameter.
        (
            section(
                json!([{"name": "t", "description": "d", "steps": [{"action": "set_text", "path": "text", "text": "${missing}"}]}]),
            ),
            "missing",
        ),
        (
            section(
                json!([{"name": "t", "description": "d", "steps": [{"action": "invoke", "path": "list item[${row}]"}]}]),
            ),
            "row",
        ),
        // An unknown step.
        (
            section(
                json!([{"name": "t", "description": "d", "steps": [{"action": "click", "path": "x"}]}]),
            ),
            "steps/0/action",
        ),
        // A D-Bus method in an atspi section, and steps in a dbus one.
        (
            section(json!([{"name": "t", "description": "d", "method": "Quit"}])),
            "tools/0",
        ),
        (
            json!({"automation": "dbus", "service": "org.x.Y", "object": "/", "interface": "org.x.Y",
                "tools": [{"name": "t", "description": "d", "steps": [{"action": "invoke", "path": "x"}]}]}),
            "tools/0",
        ),
        // An atspi section names its app, and no D-Bus service.
        (
            json!({"automation": "atspi", "tools": [{"name": "t", "description": "d", "steps": [{"action": "invoke", "path": "x"}]}]}),
            "app",
        ),
        (
            json!({"automation": "atspi", "app": "x", "service": "org.x.Y",
                "tools": [{"name": "t", "description": "d", "steps": [{"action": "invoke", "path": "x"}]}]}),
            "service",
        ),
        // A dbus section still needs its service.
        (
            json!({"automation": "dbus", "tools": [{"name": "t", "description": "d", "method": "M"}]}),
            "service",
        ),
    ] {
        let text = problems(&doc(tools_or_section.clone()));
        assert!(text.contains(says), "{tools_or_section}: {text}");
    }
}
