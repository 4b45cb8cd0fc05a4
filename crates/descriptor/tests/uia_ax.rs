//! Accessibility sections on Windows (`"automation": "uia"`) and macOS (`"automation": "ax"`):
//! the same steps as Linux's `atspi`, what validates and what is refused, with the pointer and
//! reason a descriptor's author needs. The script kinds beside them still need their scripts.

use aai_descriptor::ui::UiAction;
use serde_json::{Value, json};

fn doc(platform: &str, section: Value) -> Vec<u8> {
    json!({"schema_version": "1.0", "appId": "a11y.editor", "name": "Editor",
           "platforms": {platform: section}})
    .to_string()
    .into_bytes()
}

fn problems(bytes: &[u8]) -> String {
    match aai_descriptor::parse("t", bytes) {
        Ok(_) => panic!("validated: {}", String::from_utf8_lossy(bytes)),
        Err(error) => error.to_string(),
    }
}

fn save_as() -> Value {
    json!([
        {"name": "save_as", "description": "Save under a new name.",
         "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
         "steps": [
            {"action": "invoke", "path": "menu item[File]/menu item[Save As…]"},
            {"action": "wait", "path": "window[Save As]", "timeout_ms": 3000},
            {"action": "set_text", "path": "window[Save As]/edit[File name:]", "text": "${name}"},
            {"action": "invoke", "path": "window[Save As]/button[Save]", "use": "invoke"},
            {"action": "gone", "path": "window[Save As]"}]},
        {"name": "font", "description": "Pick a font.",
         "parameters": {"type": "object", "properties": {"font": {"type": "string"}}, "required": ["font"]},
         "steps": [{"action": "select", "path": "combo box[Font]", "text": "${font}"}]},
        {"name": "read_document", "description": "The document's text.", "readOnly": true,
         "steps": [{"action": "read_text", "path": "document", "as": "text"}]}
    ])
}

#[test]
fn a_uia_section_validates_and_reads_back() {
    let bytes = doc(
        "windows",
        json!({"automation": "uia", "app": "notepad", "tools": save_as()}),
    );
    let descriptor = aai_descriptor::parse("t", &bytes).expect("validates");
    let windows = descriptor.platforms.windows.as_ref().expect("windows");
    assert_eq!(windows.automation, "uia");
    assert_eq!(windows.fields.app.as_deref(), Some("notepad"));
    assert!(windows.tools[0].fields.script.is_empty());
    let steps = windows.tools[0].fields.steps.as_deref().expect("steps");
    assert_eq!(steps.len(), 5);
    assert_eq!(steps[2].action, UiAction::SetText);
    assert_eq!(steps[3].use_action.as_deref(), Some("invoke"));
    assert_eq!(
        windows.tools[1].fields.steps.as_deref().expect("select")[0]
            .text
            .as_deref(),
        Some("${font}")
    );
    assert!(windows.tools[2].fields.steps.as_deref().expect("read")[0].reads());
    // Written back, a uia tool has no empty `script`.
    let back = serde_json::to_value(&descriptor).expect("serializes");
    assert!(back.pointer("/platforms/windows/tools/0/script").is_none());
    assert_eq!(
        aai_descriptor::parse("again", back.to_string().as_bytes())
            .expect("reads back")
            .platforms
            .windows
            .expect("windows")
            .tools
            .len(),
        3
    );
}

#[test]
fn an_ax_section_validates_and_reads_back() {
    let bytes = doc(
        "macos",
        json!({"automation": "ax", "app": "com.apple.TextEdit", "tools": save_as()}),
    );
    let descriptor = aai_descriptor::parse("t", &bytes).expect("validates");
    let macos = descriptor.platforms.macos.as_ref().expect("macos");
    assert_eq!(macos.automation, "ax");
    assert_eq!(macos.fields.app.as_deref(), Some("com.apple.TextEdit"));
    assert!(macos.tools[0].fields.script.is_empty());
    assert_eq!(
        macos.tools[0].fields.steps.as_deref().expect("steps")[1].timeout_ms,
        Some(3000)
    );
    let back = serde_json::to_value(&descriptor).expect("serializes");
    assert!(back.pointer("/platforms/macos/tools/0/script").is_none());
    aai_descriptor::parse("again", back.to_string().as_bytes()).expect("reads back");
}

#[test]
fn what_uia_and_ax_sections_refuse() {
    let tool = |steps: Value| json!([{"name": "t", "description": "d", "steps": steps}]);
    let invoke = json!([{"action": "invoke", "path": "button[OK]"}]);
    for (platform, kind) in [("windows", "uia"), ("macos", "ax")] {
        let section = |tools: Value| json!({"automation": kind, "app": "editor", "tools": tools});
        for (bad, says) in [
            // No app.
            (
                json!({"automation": kind, "tools": tool(invoke.clone())}),
                "app".to_owned(),
            ),
            // No steps, empty steps.
            (
                section(json!([{"name": "t", "description": "d"}])),
                "steps".to_owned(),
            ),
            (section(tool(json!([]))), "steps".to_owned()),
            // A path that does not read, with the pointer to it.
            (
                section(tool(json!([{"action": "invoke", "path": "button[OK"}]))),
                format!("/platforms/{platform}/tools/0/steps/0/path"),
            ),
            (
                section(tool(json!([{"action": "invoke", "path": "a//b"}]))),
                "no role".to_owned(),
            ),
            // set_text without its text, set_value without its value.
            (
                section(tool(json!([{"action": "set_text", "path": "edit"}]))),
                "needs `text`".to_owned(),
            ),
            (
                section(tool(json!([{"action": "set_value", "path": "slider"}]))),
                "needs `value`".to_owned(),
            ),
            // A placeholder that names no parameter.
            (
                section(tool(
                    json!([{"action": "invoke", "path": "list item[${row}]"}]),
                )),
                "row".to_owned(),
            ),
            // An unknown step.
            (
                section(tool(json!([{"action": "click", "path": "x"}]))),
                "steps/0/action".to_owned(),
            ),
            // A script in an accessibility tool.
            (
                section(
                    json!([{"name": "t", "description": "d", "steps": invoke.clone(), "script": "x"}]),
                ),
                "script".to_owned(),
            ),
        ] {
            let text = problems(&doc(platform, bad.clone()));
            assert!(text.contains(&says), "{platform} {bad}: {text}");
        }
    }
    // A uia section takes no ProgID.
    let text = problems(&doc(
        "windows",
        json!({"automation": "uia", "app": "notepad", "progid": "X.Y", "tools": tool(invoke.clone())}),
    ));
    assert!(text.contains("progid"), "{text}");
}

#[test]
fn script_sections_still_need_their_scripts_and_take_no_steps() {
    let invoke = json!([{"action": "invoke", "path": "button[OK]"}]);
    for (platform, kind) in [
        ("windows", "com"),
        ("macos", "applescript"),
        ("macos", "jxa"),
    ] {
        // A tool without its script.
        let text = problems(&doc(
            platform,
            json!({"automation": kind, "tools": [{"name": "t", "description": "d"}]}),
        ));
        assert!(text.contains("script"), "{kind}: {text}");
        // Steps in a script section.
        let script = if kind == "com" {
            json!([{"action": "create", "progid": "X.Y"}])
        } else {
            json!("return 1")
        };
        let text = problems(&doc(
            platform,
            json!({"automation": kind, "tools": [{"name": "t", "description": "d", "script": script, "steps": invoke}]}),
        ));
        assert!(text.contains("steps"), "{kind}: {text}");
        // An app in a script section.
        let text = problems(&doc(
            platform,
            json!({"automation": kind, "app": "x", "tools": [{"name": "t", "description": "d", "script": script}]}),
        ));
        assert!(text.contains("app"), "{kind}: {text}");
    }
}

/// Without the schema (`parse_known`, for bytes validated before), the checks that keep a call
/// from running without its app or steps still hold.
#[test]
fn without_the_schema_an_accessibility_section_still_needs_app_and_steps() {
    for (platform, kind) in [("windows", "uia"), ("macos", "ax")] {
        let bytes = doc(
            platform,
            json!({"automation": kind, "tools": [{"name": "t", "description": "d"}]}),
        );
        let error = aai_descriptor::parse_known("t", &bytes)
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains(&format!("/platforms/{platform}/app")),
            "{error}"
        );
        assert!(error.contains("non-empty list of `steps`"), "{error}");
    }
}
