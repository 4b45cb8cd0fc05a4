//! A COM server's type library → a `windows`/`com` draft. On Windows a fixed PowerShell
//! program creates the object for the ProgID it reads on stdin (never part of the program's
//! text) and prints its methods and properties, as the type library gives them to
//! `Get-Member`, as JSON; [`draft`] turns that JSON into tools that call each method or read
//! each property through the COM executor's steps.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::{DescribeError, Draft, guess_risk, tool, tool_name};

/// The program PowerShell runs: the same text for every ProgID.
pub const PROGRAM: &str = r"$ErrorActionPreference = 'Stop'
$progid = [Console]::In.ReadLine()
$object = New-Object -ComObject $progid
$members = $object | Get-Member -MemberType Method, Property | ForEach-Object {
  [pscustomobject]@{ name = $_.Name; kind = [string]$_.MemberType; definition = [string]$_.Definition }
}
ConvertTo-Json -InputObject @($members) -Depth 3 -Compress
";

/// The argv of `powershell.exe`; the ProgID goes on stdin ([`stdin`]).
pub fn powershell_argv() -> Vec<String> {
    [
        "-NoProfile",
        "-NonInteractive",
        "-ExecutionPolicy",
        "Bypass",
        "-Command",
        PROGRAM,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// What PowerShell reads on stdin.
pub fn stdin(progid: &str) -> String {
    format!("{progid}\n")
}

/// Whether `progid` is a ProgID (`Outlook.Application`, `Excel.Application.16`).
pub fn is_progid(progid: &str) -> bool {
    !progid.is_empty()
        && progid.len() <= 128
        && progid
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// The JSON schema of a COM type name as `Get-Member` shows it.
fn schema_of(ty: &str) -> Value {
    match ty.trim_end_matches('&').to_ascii_lowercase().as_str() {
        "string" | "bstr" => json!({"type": "string"}),
        "int" | "short" | "long" | "byte" | "uint" | "int16" | "int32" | "int64" => {
            json!({"type": "integer"})
        }
        "double" | "float" | "single" | "decimal" | "currency" => json!({"type": "number"}),
        "bool" | "boolean" => json!({"type": "boolean"}),
        _ => json!({}),
    }
}

/// `RetType Name (Type1 a, Type2 b)` → the parameters `(type, name)`.
fn signature(definition: &str) -> Option<Vec<(String, String)>> {
    // A method with overloads lists them separated by ", " after each `)`: the first is used.
    let open = definition.find('(')?;
    let close = definition[open..].find(')')? + open;
    let inner = definition[open + 1..close].trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|p| {
            let p = p.trim();
            let (ty, name) = p.rsplit_once(' ')?;
            Some((ty.trim().to_owned(), name.trim().to_owned()))
        })
        .collect()
}

/// A draft from the program's JSON.
///
/// # Errors
/// `progid` is not a ProgID, or the JSON is not the program's.
pub fn draft(progid: &str, json_text: &str) -> Result<Draft, DescribeError> {
    if !is_progid(progid) {
        return Err(DescribeError::Nothing(format!(
            "{progid:?} is not a ProgID (like Outlook.Application)"
        )));
    }
    let members: Vec<Value> = match serde_json::from_str::<Value>(json_text.trim()) {
        Ok(Value::Array(all)) => all,
        Ok(one @ Value::Object(_)) => vec![one],
        _ => {
            return Err(DescribeError::Unreadable {
                what: "type library listing",
                why: "not the reader's JSON array".into(),
            });
        }
    };
    let mut taken = HashSet::new();
    let mut tools = Vec::new();
    let mut notes = Vec::new();
    for member in &members {
        let (Some(name), Some(kind), Some(definition)) = (
            member["name"].as_str(),
            member["kind"].as_str(),
            member["definition"].as_str(),
        ) else {
            continue;
        };
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.starts_with(|c: char| c.is_ascii_digit())
        {
            continue;
        }
        if kind == "Property" {
            let mut fields = Map::new();
            fields.insert(
                "script".into(),
                json!([
                    {"action": "create", "var": "app"},
                    {"action": "get", "var": "value", "object": "app", "property": name},
                ]),
            );
            fields.insert("output_parser".into(), json!("last_result"));
            tools.push(tool(
                &tool_name(&format!("get_{name}"), &mut taken),
                None,
                &format!("Reads {progid}.{name} ({definition})"),
                None,
                ("low", true, false),
                fields,
            ));
            continue;
        }
        let Some(params) = signature(definition) else {
            notes.push(format!("{name}: left out (cannot read {definition:?})"));
            continue;
        };
        let mut used = HashSet::new();
        let mut properties = Map::new();
        let mut args = Vec::new();
        for (ty, raw) in &params {
            let param = tool_name(raw, &mut used);
            properties.insert(param.clone(), schema_of(ty));
            args.push(json!(format!("${{{param}}}")));
        }
        let required: Vec<Value> = properties.keys().map(|k| json!(k)).collect();
        let mut fields = Map::new();
        fields.insert(
            "script".into(),
            json!([
                {"action": "create", "var": "app"},
                {"action": "call", "var": "result", "object": "app", "method": name, "args": args},
            ]),
        );
        fields.insert("output_parser".into(), json!("last_result"));
        let parameters = (!properties.is_empty())
            .then(|| json!({"type": "object", "properties": properties, "required": required}));
        tools.push(tool(
            &tool_name(name, &mut taken),
            None,
            &format!("Calls {progid}.{definition}"),
            parameters,
            guess_risk(name, None),
            fields,
        ));
    }
    if tools.is_empty() {
        return Err(DescribeError::Nothing(format!(
            "{progid}: the type library lists no method or property"
        )));
    }
    let mut section = Map::new();
    section.insert("automation".into(), json!("com"));
    section.insert("progid".into(), json!(progid));
    section.insert("tools".into(), Value::Array(tools));
    let reversed: Vec<&str> = progid.split('.').rev().collect();
    Ok(Draft {
        descriptor: crate::descriptor(
            &crate::app_id_from(
                &format!("local.com.{}", reversed.join(".")),
                "local.com.app",
            ),
            progid.split('.').next().unwrap_or(progid),
            &format!("{progid} through COM automation."),
            "windows",
            section,
            vec![format!(
                "Drafted from the type library of {progid}: set `appId` and the description; methods that take COM objects need steps written by hand."
            )],
        ),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_fixed_and_the_progid_travels_on_stdin() {
        let argv = powershell_argv();
        assert_eq!(argv.last().map(String::as_str), Some(PROGRAM));
        assert!(!argv.iter().any(|a| a.contains("Outlook")));
        assert_eq!(stdin("Outlook.Application"), "Outlook.Application\n");
        assert!(
            is_progid("Excel.Application.16") && !is_progid("x; rm -rf /") && !is_progid("a..b")
        );
        assert!(draft("Bad'Id", "[]").is_err());
    }

    #[test]
    fn methods_and_properties_become_steps() {
        let listing = r#"[{"name":"CreateItem","kind":"Method","definition":"IDispatch CreateItem (OlItemType ItemType)"},
            {"name":"Quit","kind":"Method","definition":"void Quit ()"},
            {"name":"GetNamespace","kind":"Method","definition":"_NameSpace GetNamespace (string Type)"},
            {"name":"Version","kind":"Property","definition":"string Version () {get}"}]"#;
        let draft = draft("Outlook.Application", listing).expect("draft");
        crate::assert_validates(&draft);
        let names: Vec<&str> = draft
            .tools()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["create_item", "quit", "get_namespace", "get_version"]
        );
        assert_eq!(draft.tools()[2]["script"][1]["args"], json!(["${type}"]));
        assert_eq!(
            draft.tools()[2]["parameters"]["properties"]["type"],
            json!({"type": "string"})
        );
        assert_eq!(draft.tools()[3]["risk"], "low");
        assert_eq!(
            draft.descriptor["platforms"]["windows"]["progid"],
            "Outlook.Application"
        );
    }
}
