//! The AX executor's fixed JXA program, run for real — under Node, against a fake System
//! Events — through the executor's own call path: the argv it builds, the request on stdin,
//! the program's answer and its mapping to results and AAI codes. osascript and System Events
//! do not run on Linux: the stand-in checks osascript's argv and runs the program as osascript
//! would (`run()`, its result printed); the fake tree answers the same property and action
//! calls System Events does (`uiElements`, `role()`, `name()`, `actions.byName(…).perform()`,
//! `value = …`), as this test writes them. How the real System Events answers is not tested
//! here.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Platform};
use aai_executor::{Executors, Invocation, Settings};
use serde_json::{Value, json};

/// A stand-in for osascript: checks it was given `-l JavaScript -e <program>` and runs the
/// program under Node with the fake System Events, stdin passed through.
const FAKE_OSASCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")
if [ "$#" -ne 4 ] || [ "$1" != -l ] || [ "$2" != JavaScript ] || [ "$3" != -e ]; then
  echo "unexpected argv: $*" >&2; exit 2
fi
exec node "$dir/harness.js" "$dir" "$4"
"#;

/// The fake System Events: `tree.json` in the folder holds the processes and their elements;
/// what the program does to them is written to `log.json`. `delay()` advances a clock that
/// elements with `after` (appear), `until` (disappear) and `enabledAfter` (light up) follow.
const HARNESS: &str = r#"
const fs = require('fs');
const dir = process.argv[2];
const program = process.argv[3];
const input = fs.readFileSync(0, 'utf8');
const world = JSON.parse(fs.readFileSync(dir + '/tree.json', 'utf8'));
const log = [];
let clock = 0;
const byId = {};
(function index(list) { for (const s of list || []) { if (s.id) byId[s.id] = s; index(s.children); } })(
  world.processes.flatMap((p) => p.children || []));
function refused() {
  const e = new Error('System Events got an error: osascript is not allowed assistive access.');
  e.errorNumber = -1719;
  return e;
}
function shown(s) {
  return !s.hidden && (s.after === undefined || clock >= s.after) && (s.until === undefined || clock < s.until);
}
function label(s) { return s.name || s.title || s.description || s.role; }
function collection(list) {
  const c = {};
  list.forEach((item, i) => { c[i] = item; });
  for (const p of ['role', 'name', 'title', 'description', 'roleDescription']) {
    c[p] = () => { if (world.denied) throw refused(); return list.map((item) => item[p]()); };
  }
  return c;
}
function element(s) {
  const e = {
    role: () => s.role,
    name: () => (s.name === undefined ? null : s.name),
    title: () => (s.title === undefined ? null : s.title),
    description: () => (s.description === undefined ? null : s.description),
    roleDescription: () => s.roleDescription || s.role.replace(/^AX/, '').toLowerCase(),
    enabled: () => s.enabled !== false && (s.enabledAfter === undefined || clock >= s.enabledAfter),
    actions: {
      name: () => s.actions || [],
      byName: (n) => ({ perform: () => {
        // As a real app does, a greyed-out element lets a press go by.
        if (!e.enabled()) { log.push(['lost', label(s), n]); return; }
        log.push(['perform', label(s), n]);
        for (const id of (s.shows || [])) byId[id].hidden = false;
      } }),
    },
  };
  Object.defineProperty(e, 'uiElements', { get: () => collection((s.children || []).filter(shown).map(element)) });
  Object.defineProperty(e, 'value', {
    get: () => () => (s.value === undefined ? null : s.value),
    set: (v) => { if (s.readOnly) throw new Error('Can’t set value'); s.value = v; log.push(['set', label(s), v]); },
  });
  Object.defineProperty(e, 'selected', {
    get: () => () => !!s.selected,
    set: (v) => { if (!s.selectable) throw new Error('Can’t set selected'); s.selected = v; log.push(['select', label(s)]); },
  });
  Object.defineProperty(e, 'focused', { get: () => () => !!s.focused, set: (v) => { s.focused = v; } });
  return e;
}
function processFor(p) {
  const e = element({ role: 'AXApplication', name: p.name, children: p.children });
  e.bundleIdentifier = () => (p.bundle === undefined ? null : p.bundle);
  e.windows = { name: () => (p.children || []).filter((c) => c.role === 'AXWindow').map((c) => c.name) };
  return e;
}
const processes = world.processes;
const events = { processes: {
  name: () => processes.map((p) => p.name),
  bundleIdentifier: () => processes.map((p) => (p.bundle === undefined ? null : p.bundle)),
  backgroundOnly: () => processes.map((p) => !!p.background),
  byName: (n) => processFor(processes.find((p) => p.name === n)),
} };
globalThis.Application = (name) => { if (name !== 'System Events') throw new Error('not System Events'); return events; };
globalThis.ObjC = { import: (name) => { if (name !== 'Foundation') throw new Error('import ' + name); }, unwrap: (x) => x };
globalThis.$ = {
  NSFileHandle: { fileHandleWithStandardInput: { readDataToEndOfFile: Buffer.from(input, 'utf8') } },
  NSString: { alloc: { initWithDataEncoding: (data) => data.toString('utf8') } },
  NSUTF8StringEncoding: 4,
};
globalThis.delay = (seconds) => { if (seconds !== 0.05) throw new Error('delay ' + seconds); clock++; };
const run = new Function(program + '\nreturn run;')();
const out = run();
fs.writeFileSync(dir + '/log.json', JSON.stringify(log));
process.stdout.write(String(out) + '\n');
"#;

/// Quotes, backticks, subexpressions, injections for AppleScript, PowerShell and the ObjC
/// bridge, line terminators and NUL.
const HOSTILE: &str = "\"'`$(rm -rf ~)\"; do shell script \"rm -rf ~\"'); Remove-Item C:\\ -Recurse #\n\r\0 ${x} \"); $.system(\"id\") ü\u{2028}";

/// TextEdit as the fake System Events shows it: a window with a text area, a font pop-up
/// whose menu shows when pressed, a checkbox, a table, and a second process.
fn world() -> Value {
    json!({"processes": [
        {"name": "Finder", "bundle": "com.apple.finder", "children": []},
        {"name": "cfprefsd", "background": true},
        {"name": "TextEdit", "bundle": "com.apple.TextEdit", "children": [
            {"role": "AXWindow", "name": "Untitled", "children": [
                {"role": "AXScrollArea", "children": [
                    {"role": "AXTextArea", "description": "text", "value": "old"}]},
                {"role": "AXPopUpButton", "title": "Font", "actions": ["AXPress", "AXShowMenu"], "shows": ["fonts"], "children": [
                    {"role": "AXMenu", "id": "fonts", "hidden": true, "children": [
                        {"role": "AXMenuItem", "title": "Helvetica", "actions": ["AXPress"]},
                        {"role": "AXMenuItem", "title": "Menlo", "actions": ["AXPress"]}]}]},
                {"role": "AXCheckBox", "title": "Wrap", "value": 1, "actions": ["AXPress"]},
                {"role": "AXButton", "title": "Save", "actions": ["AXPress"]},
                {"role": "AXButton", "title": "Save", "actions": ["AXPress", "AXShowMenu"]},
                {"role": "AXTable", "description": "files", "children": [
                    {"role": "AXColumn"},
                    {"role": "AXRow", "selectable": true, "children": [
                        {"role": "AXCell", "children": [{"role": "AXStaticText", "value": "a.txt"}]},
                        {"role": "AXCell", "children": [{"role": "AXStaticText", "value": "2 KB"}]}]},
                    {"role": "AXRow", "selectable": true, "children": [
                        {"role": "AXCell", "children": [{"role": "AXStaticText", "value": "b.txt"}]},
                        {"role": "AXCell", "children": [{"role": "AXStaticText", "value": "9 KB"}]}]}]},
                {"role": "AXSheet", "title": "Saving", "until": 2},
                {"role": "AXSheet", "title": "Saved", "after": 3}]},
            {"role": "AXMenuBar", "children": [
                {"role": "AXMenuBarItem", "title": "File"}]}]}
    ]})
}

fn textedit(steps: &Value, app: &str) -> Descriptor {
    let doc = json!({"schema_version": "1.0", "appId": "mac.textedit", "name": "TextEdit",
        "platforms": {"macos": {"automation": "ax", "app": app, "tools": [
            {"name": "t", "description": "d",
             "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "font": {"type": "string"}, "file": {"type": "string"}, "wrap": {"type": "boolean"}}},
             "steps": steps}]}}});
    aai_descriptor::parse("t", doc.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

struct Fake {
    dir: tempfile::TempDir,
    executors: Executors,
}

impl Fake {
    fn new(world: &Value) -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let write =
            |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect(name);
        write("osascript", FAKE_OSASCRIPT);
        write("harness.js", HARNESS);
        write("tree.json", &world.to_string());
        let osascript = dir.path().join("osascript");
        std::fs::set_permissions(&osascript, std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let settings = Settings {
            osascript: osascript.display().to_string(),
            ..Settings::default()
        };
        Self {
            executors: Executors::with_settings(settings, None),
            dir,
        }
    }

    fn call(&self, d: &Descriptor, args: &Value) -> Result<Value, AaiError> {
        let args = args.as_object().cloned().unwrap_or_default();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(self.executors.call(
                Platform::Macos,
                Invocation::new(d, "t", &args, Duration::from_secs(30)),
            ))
    }

    fn log(&self) -> Value {
        read_json(&self.dir.path().join("log.json"))
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("json")
}

#[test]
fn steps_drive_the_tree_and_reads_come_back_keyed() {
    let fake = Fake::new(&world());
    let d = textedit(
        &json!([
            {"action": "set_text", "path": "window/scroll area/text area", "text": "${text}"},
            {"action": "select", "path": "window/pop up button[Font]", "text": "${font}"},
            {"action": "invoke", "path": "window/button[Save]#2", "use": "ShowMenu"},
            {"action": "select", "path": "window/table[files]", "text": "${file}"},
            {"action": "wait", "path": "window/sheet[Saved]"},
            {"action": "gone", "path": "window/sheet[Saving]"},
            {"action": "read_text", "path": "window/AXTextArea", "as": "text"},
            {"action": "read_state", "path": "window/checkbox[Wrap]", "as": "wrap"},
            {"action": "read_rows", "path": "window/table", "as": "rows"}
        ]),
        "com.apple.textedit",
    );
    let result = fake
        .call(
            &d,
            &json!({"text": HOSTILE, "font": "Menlo", "file": "b.txt"}),
        )
        .expect("runs");
    assert_eq!(
        result["text"], HOSTILE,
        "the value reached the element exactly"
    );
    assert_eq!(
        result["rows"],
        json!([["a.txt", "2 KB"], ["b.txt", "9 KB"]])
    );
    assert_eq!(result["wrap"]["role"], "AXCheckBox");
    assert_eq!(result["wrap"]["name"], "Wrap");
    assert_eq!(result["wrap"]["enabled"], true);
    assert_eq!(result["wrap"]["states"], json!(["enabled", "checked"]));
    assert_eq!(
        fake.log(),
        json!([
            ["set", "text", HOSTILE],
            ["perform", "Font", "AXPress"],
            ["perform", "Menlo", "AXPress"],
            ["perform", "Save", "AXShowMenu"],
            ["select", "AXRow"]
        ])
    );
}

#[test]
fn one_read_without_a_key_is_the_result() {
    let fake = Fake::new(&world());
    let d = textedit(
        &json!([{"action": "read_text", "path": "text area"}]),
        "TextEdit",
    );
    assert_eq!(fake.call(&d, &json!({})).expect("runs"), json!("old"));
    let d = textedit(
        &json!([{"action": "invoke", "path": "button[Save]"}]),
        "TextEdit",
    );
    assert_eq!(
        fake.call(&d, &json!({})).expect("runs"),
        json!({"ok": true})
    );
}

#[test]
fn an_element_not_found_names_the_path_and_what_is_there() {
    let fake = Fake::new(&world());
    let d = textedit(
        &json!([{"action": "invoke", "path": "window[Untitled]/button[${text}]"}]),
        "TextEdit",
    );
    let error = fake
        .call(&d, &json!({"text": "save"}))
        .expect_err("not found");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert!(
        error.message.starts_with(
            "step 0 (invoke window[Untitled]/button[save]): no button[save] under window[Untitled]; there: Button[Save], "
        ),
        "{}",
        error.message
    );
    // A hostile name is compared, never run: nothing is found and nothing happens.
    let error = fake
        .call(&d, &json!({"text": HOSTILE}))
        .expect_err("not found");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert_eq!(fake.log(), json!([]));
    // An item a select step names, inside its element.
    let d = textedit(
        &json!([{"action": "select", "path": "pop up button[Font]", "text": "${font}"}]),
        "TextEdit",
    );
    let error = fake
        .call(&d, &json!({"font": "Comic Sans"}))
        .expect_err("no item");
    assert!(
        error.message.starts_with("step 0 (select pop up button[Font]): no *[Comic Sans] under pop up button[Font]; there: "),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("MenuItem[Menlo]"),
        "{}",
        error.message
    );
}

#[test]
fn waits_time_out_with_what_was_there() {
    let fake = Fake::new(&world());
    let d = textedit(
        &json!([{"action": "wait", "path": "sheet[Export]", "timeout_ms": 1}]),
        "TextEdit",
    );
    let error = fake.call(&d, &json!({})).expect_err("times out");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert!(
        error.message.starts_with("step 0 (wait sheet[Export]): did not appear within 1 ms: no sheet[Export] in the application; there: Sheet[Saving]"),
        "{}",
        error.message
    );
    let d = textedit(
        &json!([{"action": "gone", "path": "window[Untitled]", "timeout_ms": 1}]),
        "TextEdit",
    );
    let error = fake.call(&d, &json!({})).expect_err("times out");
    assert_eq!(
        error.message,
        "step 0 (gone window[Untitled]): was still there after 1 ms"
    );
}

#[test]
fn an_app_not_running_lists_the_apps_that_are() {
    let fake = Fake::new(&world());
    let d = textedit(&json!([{"action": "invoke", "path": "button"}]), "Pages");
    let error = fake.call(&d, &json!({})).expect_err("not running");
    assert_eq!(error.kind, ErrorKind::AppNotRunning);
    assert_eq!(
        error.message,
        "Pages is not running (no process by that name or bundle id): start it, then call again. Running: Finder, TextEdit"
    );
}

#[test]
fn a_protected_window_is_refused_by_the_program() {
    let mut world = world();
    world["processes"][2]["children"][0]["name"] = json!("Bank statement");
    let fake = Fake::new(&world);
    // The shared patterns the gateway sets reach this executor.
    fake.executors.protection().set(vec!["bank".into()]);
    let d = textedit(
        &json!([{"action": "invoke", "path": "button[Save]"}]),
        "TextEdit",
    );
    let error = fake.call(&d, &json!({})).expect_err("protected");
    assert_eq!(error.kind, ErrorKind::PermissionDenied);
    assert!(
        error
            .message
            .contains("\"bank\" in `desktop.protected_apps`"),
        "{}",
        error.message
    );
    assert_eq!(fake.log(), json!([]), "nothing was done");
}

#[test]
fn no_accessibility_permission_is_permission_denied() {
    let mut world = world();
    world["denied"] = json!(true);
    let fake = Fake::new(&world);
    let d = textedit(
        &json!([{"action": "invoke", "path": "button[Save]"}]),
        "TextEdit",
    );
    let error = fake.call(&d, &json!({})).expect_err("denied");
    assert_eq!(error.kind, ErrorKind::PermissionDenied);
    assert!(
        error.message.contains("Privacy & Security › Accessibility"),
        "{}",
        error.message
    );
}

#[test]
fn a_step_that_fails_says_why() {
    let mut world = world();
    world["processes"][2]["children"][0]["children"][0]["children"][0]["readOnly"] = json!(true);
    let fake = Fake::new(&world);
    let d = textedit(
        &json!([{"action": "set_text", "path": "text area", "text": "x"},
                {"action": "invoke", "path": "checkbox", "use": "AXRaise"}]),
        "TextEdit",
    );
    let error = fake.call(&d, &json!({})).expect_err("read-only");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert!(
        error
            .message
            .starts_with("step 0 (set_text text area): its text cannot be changed (read-only?)"),
        "{}",
        error.message
    );
    let d = textedit(
        &json!([{"action": "invoke", "path": "checkbox", "use": "AXRaise"}]),
        "TextEdit",
    );
    let error = fake.call(&d, &json!({})).expect_err("no such action");
    assert_eq!(
        error.message,
        "step 0 (invoke checkbox): it has no action AXRaise; it has AXPress"
    );
}

#[test]
fn a_step_that_acts_waits_for_its_element_to_light_up() {
    // Save greyed out for the first four looks (the app still taking in the name set before
    // it): pressed once it lights up, not before, and not lost.
    let mut world = world();
    world["processes"][2]["children"][0]["children"][3]["enabledAfter"] = json!(4);
    let fake = Fake::new(&world);
    let d = textedit(
        &json!([{"action": "set_text", "path": "window/scroll area/text area", "text": "x"},
                {"action": "invoke", "path": "window/button[Save]"},
                {"action": "read_state", "path": "window/button[Save]", "as": "save"}]),
        "TextEdit",
    );
    let result = fake.call(&d, &json!({})).expect("runs");
    assert_eq!(result["save"]["states"], json!(["enabled"]), "{result}");
    assert_eq!(
        fake.log(),
        json!([["set", "text", "x"], ["perform", "Save", "AXPress"]])
    );

    // Greyed out for good: the step fails saying so, and nothing is pressed.
    world["processes"][2]["children"][0]["children"][3]["enabled"] = json!(false);
    let fake = Fake::new(&world);
    let error = fake
        .call(
            &textedit(
                &json!([{"action": "invoke", "path": "window/button[Save]"}]),
                "TextEdit",
            ),
            &json!({}),
        )
        .expect_err("stays grey");
    assert_eq!(error.kind, ErrorKind::AutomationFailed);
    assert_eq!(
        error.message,
        "step 0 (invoke window/button[Save]): it stayed disabled (greyed out) through 60 looks 50 ms apart"
    );
    assert_eq!(fake.log(), json!([]));

    // A greyed-out check box whose argument was not given is left alone, with no wait.
    world["processes"][2]["children"][0]["children"][2]["enabled"] = json!(false);
    let fake = Fake::new(&world);
    let result = fake
        .call(
            &textedit(
                &json!([{"action": "check", "path": "window/checkbox[Wrap]", "value": "${wrap}"},
                        {"action": "read_state", "path": "window/checkbox[Wrap]", "as": "wrap"}]),
                "TextEdit",
            ),
            &json!({}),
        )
        .expect("left alone");
    assert_eq!(result["wrap"]["states"], json!(["checked"]), "{result}");
}
