//! A macOS scripting dictionary (`sdef`) → a `macos`/`applescript` draft: one tool per
//! command, its direct parameter and its required named parameters as the tool's parameters.
//! Every value reaches the script as an `argv` item (the gateway's script rules): text inside
//! a string literal, numbers and booleans bare, files and dates through `POSIX file "…"` and
//! `date "…"` — never spliced into the program.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::{DescribeError, Draft, guess_risk, tool, tool_name};

/// Suites every scriptable app repeats: left out (they are in every app's guide already as
/// AppleScript itself).
const STANDARD_SUITES: &[&str] = &["Standard Suite", "Text Suite", "Type Definitions"];

/// How a parameter of an sdef type reaches the script, and its schema.
fn typed(ty: &str, placeholder: &str) -> (String, Value, Option<String>) {
    match ty {
        "integer" => (placeholder.to_owned(), json!({"type": "integer"}), None),
        "real" | "number" => (placeholder.to_owned(), json!({"type": "number"}), None),
        "boolean" => (placeholder.to_owned(), json!({"type": "boolean"}), None),
        "file" | "alias" => (
            format!("POSIX file \"{placeholder}\""),
            json!({"type": "string", "description": "A POSIX path"}),
            None,
        ),
        "date" => (
            format!("date \"{placeholder}\""),
            json!({"type": "string", "description": "A date as AppleScript reads it"}),
            None,
        ),
        "text" | "string" | "Unicode text" => (
            format!("\"{placeholder}\""),
            json!({"type": "string"}),
            None,
        ),
        other => (
            format!("\"{placeholder}\""),
            json!({"type": "string"}),
            Some(format!(
                "it takes a {other}, passed as text here: write the reference by hand"
            )),
        ),
    }
}

/// The program that prints an app's scripting dictionary on macOS.
pub const SDEF: &str = "/usr/bin/sdef";

/// Where an app named `name` may be (`Mail`, `Mail.app`, or a path to a bundle), in the order
/// looked at; `home` is the user's home folder.
pub fn app_candidates(name: &str, home: &std::path::Path) -> Vec<std::path::PathBuf> {
    let path = std::path::Path::new(name);
    if path.is_absolute() || name.contains('/') {
        return vec![path.to_path_buf()];
    }
    let bundle = if name.ends_with(".app") {
        name.to_owned()
    } else {
        format!("{name}.app")
    };
    vec![
        std::path::Path::new("/Applications").join(&bundle),
        std::path::Path::new("/System/Applications").join(&bundle),
        home.join("Applications").join(&bundle),
    ]
}

/// The argv of [`SDEF`] for a bundle: the path is one argument, never shell text.
pub fn sdef_argv(bundle: &std::path::Path) -> Vec<std::ffi::OsString> {
    vec![bundle.as_os_str().to_owned()]
}

/// The name AppleScript addresses a bundle by: its file name without `.app`.
pub fn app_name(bundle: &std::path::Path) -> String {
    bundle
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A parameter element as the tool takes it: its name, how the script says it, its schema
/// (with the dictionary's description), and what a script cannot build from it.
fn parameter(
    node: roxmltree::Node<'_, '_>,
    label: &str,
    used: &mut HashSet<String>,
) -> (String, String, Value, Option<String>) {
    let (ty, list) = type_of(node);
    let param = tool_name(label, used);
    let (said, mut schema, hard) = typed(if list { "text" } else { &ty }, &format!("${{{param}}}"));
    if let Some(d) = node.attribute("description") {
        schema["description"] = json!(crate::clean(d));
    }
    (param, said, schema, hard)
}

/// The type of a parameter element: its `type` attribute or its first `<type>` child.
fn type_of(node: roxmltree::Node<'_, '_>) -> (String, bool) {
    if let Some(ty) = node.attribute("type") {
        return (ty.to_owned(), false);
    }
    node.children()
        .find(|c| c.has_tag_name("type"))
        .map_or(("any".to_owned(), false), |t| {
            (
                t.attribute("type").unwrap_or("any").to_owned(),
                t.attribute("list") == Some("yes"),
            )
        })
}

/// A draft from a scripting dictionary; `app` is the name AppleScript addresses (default: the
/// dictionary's title without " Terminology").
///
/// # Errors
/// The text is not an sdef, or it has no command to offer.
pub fn draft(xml: &str, app: Option<&str>) -> Result<Draft, DescribeError> {
    let doc = crate::xml(xml, "scripting dictionary")?;
    let root = doc.root_element();
    if !root.has_tag_name("dictionary") {
        return Err(DescribeError::Unreadable {
            what: "scripting dictionary",
            why: "its root is not <dictionary>".into(),
        });
    }
    let title = root.attribute("title").unwrap_or_default();
    let app = app
        .map(str::to_owned)
        .unwrap_or_else(|| title.trim_end_matches(" Terminology").trim().to_owned());
    if app.is_empty() || app.contains(['"', '\\']) {
        return Err(DescribeError::Nothing(
            "name the application with --app (the dictionary has no usable title)".into(),
        ));
    }
    let mut taken = HashSet::new();
    let mut tools = Vec::new();
    let mut notes = Vec::new();
    for suite in root.children().filter(|n| n.has_tag_name("suite")) {
        let suite_name = suite.attribute("name").unwrap_or_default();
        if STANDARD_SUITES.contains(&suite_name) {
            notes.push(format!("the {suite_name} is left out (every app has it)"));
            continue;
        }
        for command in suite.children().filter(|n| n.has_tag_name("command")) {
            let Some(name) = command.attribute("name") else {
                continue;
            };
            if command.attribute("hidden") == Some("yes") {
                continue;
            }
            if name.contains(['"', '\\', '\n']) {
                notes.push(format!("{name:?}: left out (not a name a script can say)"));
                continue;
            }
            tools.push(command_tool(&app, name, command, &mut taken, &mut notes));
        }
    }
    if tools.is_empty() {
        return Err(DescribeError::Nothing(format!(
            "{app}: the dictionary has no command outside the standard suites"
        )));
    }
    let mut section = Map::new();
    section.insert("automation".into(), json!("applescript"));
    section.insert("tools".into(), Value::Array(tools));
    let id_word: String = app.chars().filter(char::is_ascii_alphanumeric).collect();
    Ok(Draft {
        descriptor: crate::descriptor(
            &crate::app_id_from(&format!("local.macos.{id_word}"), "local.macos.app"),
            &app,
            &format!("{app} on macOS, through its scripting dictionary."),
            "macos",
            section,
            vec![format!(
                "Drafted from the scripting dictionary of {app}: set `appId` to the app's bundle id (e.g. com.apple.mail)."
            )],
        ),
        notes,
    })
}

/// Optional value parameters a command's script branches on at most (each doubles it).
const MOST_BRANCHED: usize = 3;

/// The lines that say `words` with each optional value of `branches` only when it was given
/// (its text is not empty), indented `depth` levels.
fn said_when_given(
    words: &[String],
    branches: &[(String, String)],
    returns: bool,
    depth: usize,
    out: &mut Vec<String>,
) {
    let pad = "  ".repeat(depth);
    let Some(((param, said), rest)) = branches.split_first() else {
        let call = words.join(" ");
        out.push(if returns {
            format!("{pad}return {call}")
        } else {
            format!("{pad}{call}")
        });
        return;
    };
    out.push(format!("{pad}if \"${{{param}}}\" is \"\" then"));
    said_when_given(words, rest, returns, depth + 1, out);
    out.push(format!("{pad}else"));
    let mut with = words.to_vec();
    with.push(said.clone());
    said_when_given(&with, rest, returns, depth + 1, out);
    out.push(format!("{pad}end if"));
}

fn command_tool(
    app: &str,
    name: &str,
    command: roxmltree::Node<'_, '_>,
    taken: &mut HashSet<String>,
    notes: &mut Vec<String>,
) -> Value {
    let mut used = HashSet::new();
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut words = vec![name.to_owned()];
    let mut todo = Vec::new();
    if let Some(direct) = command
        .children()
        .find(|c| c.has_tag_name("direct-parameter"))
    {
        let (ty, _) = type_of(direct);
        let optional = direct.attribute("optional") == Some("yes");
        if !optional
            || matches!(
                ty.as_str(),
                "text" | "file" | "integer" | "real" | "boolean"
            )
        {
            let (param, said, schema, hard) = parameter(direct, "target", &mut used);
            if let Some(hard) = hard {
                todo.push(format!("the direct parameter: {hard}"));
            }
            if optional {
                todo.push(
                    "the direct parameter is optional in the dictionary but always sent here"
                        .into(),
                );
            }
            words.push(said);
            properties.insert(param.clone(), schema);
            required.push(json!(param));
        }
    }
    let mut optional_names = Vec::new();
    // Optional parameters the tool offers as optional properties: flags always sent (false
    // unless given), values said only when given (a branch of the script each).
    let mut flags = Vec::new();
    let mut branches: Vec<(String, String)> = Vec::new();
    for parameter_node in command.children().filter(|c| c.has_tag_name("parameter")) {
        let Some(label) = parameter_node.attribute("name") else {
            continue;
        };
        if label.contains(['"', '\\', '\n']) {
            continue;
        }
        if parameter_node.attribute("optional") == Some("yes") {
            let (ty, list) = type_of(parameter_node);
            let numeric = !list && matches!(ty.as_str(), "integer" | "real" | "number");
            if numeric || (ty != "boolean" && branches.len() >= MOST_BRANCHED) {
                optional_names.push(label.to_owned());
                continue;
            }
            let (param, said, mut schema, hard) = parameter(parameter_node, label, &mut used);
            if let Some(hard) = hard {
                todo.push(format!("{label}: {hard}"));
            }
            if ty == "boolean" && !list {
                schema["default"] = json!(false);
                flags.push(format!("{label} {said}"));
            } else {
                schema["default"] = json!("");
                branches.push((param.clone(), format!("{label} {said}")));
            }
            properties.insert(param, schema);
            continue;
        }
        let (param, said, schema, hard) = parameter(parameter_node, label, &mut used);
        if let Some(hard) = hard {
            todo.push(format!("{label}: {hard}"));
        }
        words.push(format!("{label} {said}"));
        properties.insert(param.clone(), schema);
        required.push(json!(param));
    }
    if !optional_names.is_empty() {
        todo.push(format!(
            "optional parameters left out: {}",
            optional_names.join(", ")
        ));
    }
    let returns = command.children().any(|c| c.has_tag_name("result"));
    words.extend(flags);
    let mut body = Vec::new();
    said_when_given(&words, &branches, returns, 1, &mut body);
    let script = format!("tell application \"{app}\"\n{}\nend tell", body.join("\n"));
    let mut fields = Map::new();
    fields.insert("script".into(), json!(script));
    let parameters = (!properties.is_empty())
        .then(|| json!({"type": "object", "properties": properties, "required": required}));
    let tool_name = tool_name(name, taken);
    let mut made = tool(
        &tool_name,
        command.attribute("description"),
        &format!("Runs the {app} command \"{name}\""),
        parameters,
        guess_risk(name, None),
        fields,
    );
    if !todo.is_empty() {
        let note = made["todo"]
            .as_str()
            .map(|t| format!("{t}; "))
            .unwrap_or_default();
        made["todo"] = json!(format!("{note}{}", todo.join("; ")));
        notes.push(format!("{tool_name}: {}", todo.join("; ")));
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Mail-like dictionary, written from Apple's sdef(5) format.
    const MAIL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE dictionary SYSTEM "file://localhost/System/Library/DTDs/sdef.dtd">
<dictionary title="Mail Terminology">
  <suite name="Standard Suite" code="????"><command name="open" code="aevtodoc"><direct-parameter type="file"/></command></suite>
  <suite name="Mail" code="emal" description="Classes and commands for Mail">
    <command name="check for new mail" code="emalchck" description="Triggers a check for email.">
      <parameter name="for" code="acna" type="account" optional="yes" description="Specify the account"/>
    </command>
    <command name="mailto" code="emalmlto" description="Opens a mailto URL.">
      <direct-parameter type="text" description="The mailto URL"/>
    </command>
    <command name="import Mail mailbox" code="emalimbx">
      <parameter name="at" code="mbpt" type="file" description="the mailbox or folder of mailboxes to import"/>
    </command>
    <command name="delete account" code="emaldela"><direct-parameter type="account"/><result type="boolean"/></command>
    <command name="secret" code="emalsecr" hidden="yes"/>
  </suite>
</dictionary>"#;

    #[test]
    fn commands_become_scripts_whose_values_are_never_code() {
        let draft = draft(MAIL, None).expect("draft");
        crate::assert_validates(&draft);
        let tools = draft.tools();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "check_for_new_mail",
                "mailto",
                "import_mail_mailbox",
                "delete_account"
            ]
        );
        assert_eq!(
            tools[1]["script"],
            "tell application \"Mail\"\n  mailto \"${target}\"\nend tell"
        );
        assert_eq!(
            tools[2]["script"],
            "tell application \"Mail\"\n  import Mail mailbox at POSIX file \"${at}\"\nend tell"
        );
        assert_eq!(tools[3]["risk"], "high");
        assert!(
            tools[3]["script"]
                .as_str()
                .unwrap()
                .contains("return delete account \"${target}\"")
        );
        assert!(
            tools[3]["todo"]
                .as_str()
                .unwrap()
                .contains("takes a account")
        );
        // An optional parameter is an optional property, said only when given.
        assert_eq!(
            tools[0]["script"],
            "tell application \"Mail\"\n  if \"${for}\" is \"\" then\n    check for new mail\n  else\n    check for new mail for \"${for}\"\n  end if\nend tell"
        );
        assert_eq!(tools[0]["parameters"]["properties"]["for"]["default"], "");
        assert!(
            tools[0]["parameters"]["required"]
                .as_array()
                .is_none_or(|r| r.is_empty())
        );
        // The planner the executor uses turns every placeholder into an argv item.
        for tool in tools {
            let plan = aai_descriptor::script::plan(
                aai_descriptor::script::Language::AppleScript,
                tool["script"].as_str().unwrap(),
                aai_descriptor::script::Output::Plain,
                |_| Some(aai_descriptor::script::ParamKind::Text),
            );
            let plan = plan.expect("plans");
            assert!(!plan.program.contains("${"), "{}", plan.program);
        }
    }

    /// A Finder-like dictionary: commands on specifiers, optional flags, a list result.
    const FINDER: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE dictionary SYSTEM "file://localhost/System/Library/DTDs/sdef.dtd">
<dictionary title="Finder Terminology">
  <suite name="Finder Basics" code="fndr" description="Commonly-used Finder commands and object classes">
    <command name="empty" code="fndremty" description="Empty the trash">
      <direct-parameter type="specifier" optional="yes" description="Empty what?"/>
      <parameter name="security" code="sec?" type="boolean" optional="yes" description="use secure empty trash"/>
    </command>
    <command name="eject" code="fndrejct" description="Eject the specified disk(s)">
      <direct-parameter type="specifier" optional="yes" description="the disk(s) to eject"/>
    </command>
    <command name="reveal" code="miscmvis" description="Bring the specified object(s) into view">
      <direct-parameter type="specifier" description="the object to be made visible"/>
    </command>
    <command name="copy" code="miscclon" hidden="yes"/>
  </suite>
  <suite name="Legacy suite" code="fleg">
    <command name="restart" code="fndrrest" description="Restart the computer"/>
    <command name="shut down" code="fndrshut" description="Shut Down the computer"/>
  </suite>
</dictionary>"#;

    #[test]
    fn a_finder_like_dictionary_marks_what_a_script_cannot_build_and_the_dangerous_commands() {
        let draft = draft(FINDER, None).expect("draft");
        crate::assert_validates(&draft);
        let tools = draft.tools();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["empty", "eject", "reveal", "restart", "shut_down"]);
        // An optional specifier is left out rather than sent as text; a required one is text
        // with a todo; optional flags are listed.
        assert_eq!(
            tools[0]["script"],
            "tell application \"Finder\"\n  empty security ${security}\nend tell"
        );
        assert_eq!(
            tools[0]["parameters"]["properties"]["security"],
            json!({"type": "boolean", "default": false, "description": "use secure empty trash"})
        );
        assert!(
            tools[2]["todo"]
                .as_str()
                .unwrap()
                .contains("takes a specifier")
        );
        assert_eq!(
            tools[4]["script"],
            "tell application \"Finder\"\n  shut down\nend tell"
        );
        for dangerous in [0, 1, 3, 4] {
            assert_eq!(
                tools[dangerous]["risk"], "high",
                "{}",
                tools[dangerous]["name"]
            );
        }
        assert_eq!(tools[2]["risk"], "medium");
        assert!(
            draft.descriptor["todo"][1]
                .as_str()
                .unwrap()
                .contains("Finder")
        );
    }

    #[test]
    fn an_app_is_found_by_name_and_handed_to_sdef_as_one_argument() {
        let home = std::path::Path::new("/Users/ada");
        assert_eq!(
            app_candidates("Mail", home),
            [
                std::path::PathBuf::from("/Applications/Mail.app"),
                "/System/Applications/Mail.app".into(),
                "/Users/ada/Applications/Mail.app".into()
            ]
        );
        assert_eq!(
            app_candidates("/Apps/My Tool.app", home),
            [std::path::PathBuf::from("/Apps/My Tool.app")]
        );
        let odd = std::path::Path::new("/Applications/a\"; rm -rf ~; \".app");
        assert_eq!(sdef_argv(odd), [odd.as_os_str().to_owned()]);
        assert_eq!(
            app_name(std::path::Path::new("/Applications/Microsoft Word.app")),
            "Microsoft Word"
        );
    }

    #[test]
    fn not_a_dictionary_says_so() {
        assert!(draft("<plist/>", Some("X")).is_err());
        let entities = r#"<!DOCTYPE dictionary [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><dictionary title="&b;"/>"#;
        assert!(
            draft(entities, None)
                .unwrap_err()
                .to_string()
                .contains("entities")
        );
        assert!(draft("not xml", Some("X")).is_err());
    }
}
