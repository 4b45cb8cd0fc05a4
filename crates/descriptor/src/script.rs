//! Planning AppleScript and JXA calls so that argument values can never become code.
//!
//! The spec fills `${param}` into script text. Here the script handed to `osascript` is fixed
//! per tool: it is wrapped in `on run argv` / `function run(argv)`, and every placeholder is
//! rewritten into a reference to its `argv` item. Inside a string literal the literal is split
//! and joined with the reference (`"Hi ${name}!"` → `"Hi " & (item 1 of argv) & "!"`); outside a
//! literal only number and boolean parameters may appear, converted from their argv text. This
//! module is pure: it builds program text and argv, and never runs anything; load-time checks
//! use it to reject a script before any call.

use serde_json::Value;

/// Which language the script is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    AppleScript,
    Jxa,
}

/// The JSON type of a parameter, as far as rewriting cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    Text,
    Integer,
    Number,
    Boolean,
}

/// A script with its placeholders turned into argv references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The program text: the same for every argument value.
    pub program: String,
    /// Parameter names in argv order.
    pub argv_names: Vec<String>,
}

/// Why a script cannot be planned; `placeholder` names the offending `${…}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    pub placeholder: String,
    pub message: String,
}

impl std::error::Error for ScriptError {}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${{{}}}: {}", self.placeholder, self.message)
    }
}

impl Plan {
    /// The argv values for `args`, in order: strings as they are, numbers and booleans as
    /// their JSON text, anything else as JSON.
    pub fn argv(&self, args: &serde_json::Map<String, Value>) -> Vec<String> {
        self.argv_names
            .iter()
            .map(|name| match args.get(name) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            })
            .collect()
    }
}

impl Language {
    /// The language of a macOS section's `automation` (`applescript` or `jxa`).
    pub fn of_automation(automation: &str) -> Option<Self> {
        match automation {
            "applescript" => Some(Self::AppleScript),
            "jxa" => Some(Self::Jxa),
            _ => None,
        }
    }
}

/// The kind of parameter `name` in a tool's `parameters` schema (`None`: not declared).
/// Anything but a plain `integer`, `number` or `boolean` type counts as text.
pub fn param_kind(schema: Option<&Value>, name: &str) -> Option<ParamKind> {
    let property = schema?.get("properties")?.get(name)?;
    Some(match property.get("type").and_then(Value::as_str) {
        Some("integer") => ParamKind::Integer,
        Some("number") => ParamKind::Number,
        Some("boolean") => ParamKind::Boolean,
        _ => ParamKind::Text,
    })
}

/// How the script's result comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// As osascript prints it.
    Plain,
    /// JXA only: the result of the script is returned as JSON text (`result as record`).
    Json,
}

/// Rewrites `script` for `language`. `kind_of` gives each parameter's kind (`None`: not a
/// parameter).
///
/// # Errors
/// A placeholder that names no parameter, or a text parameter outside a string literal.
pub fn plan(
    language: Language,
    script: &str,
    output: Output,
    kind_of: impl Fn(&str) -> Option<ParamKind>,
) -> Result<Plan, ScriptError> {
    let mut names: Vec<String> = Vec::new();
    let mut body = String::with_capacity(script.len() + 64);
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    // The open string literal's quote, if inside one.
    let mut quote: Option<char> = None;
    // Where the open literal starts in `body`, and whether a placeholder split it: a split
    // literal is closed in parentheses, so `'${to}'.split(',')` still splits the whole text.
    let mut literal_start = 0;
    let mut split = false;
    while i < chars.len() {
        let c = chars[i];
        // Comments are copied as they are (a placeholder in a comment does nothing).
        if quote.is_none() {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let line_comment = match language {
                Language::AppleScript => rest == "--" || c == '#',
                Language::Jxa => rest == "//",
            };
            if line_comment {
                while i < chars.len() && chars[i] != '\n' {
                    body.push(chars[i]);
                    i += 1;
                }
                continue;
            }
            let (open, close) = match language {
                Language::AppleScript => ("(*", "*)"),
                Language::Jxa => ("/*", "*/"),
            };
            if rest == open {
                let start = i;
                i += 2;
                while i + 1 < chars.len()
                    && !(chars[i] == close.chars().next().unwrap_or(' ')
                        && chars[i + 1] == close.chars().nth(1).unwrap_or(' '))
                {
                    i += 1;
                }
                i = (i + 2).min(chars.len());
                body.extend(&chars[start..i]);
                continue;
            }
        }
        if c == '\\' && quote.is_some() && i + 1 < chars.len() {
            body.push(c);
            body.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if c == '$'
            && chars.get(i + 1) == Some(&'{')
            && let Some(end) = chars[i + 2..].iter().position(|&ch| ch == '}')
        {
            let name: String = chars[i + 2..i + 2 + end].iter().collect();
            let kind = kind_of(&name).ok_or_else(|| ScriptError {
                placeholder: name.clone(),
                message: "names no parameter of this tool".into(),
            })?;
            let index = match names.iter().position(|n| *n == name) {
                Some(index) => index,
                None => {
                    names.push(name.clone());
                    names.len() - 1
                }
            };
            body.push_str(&reference(language, quote, kind, index, &name)?);
            split |= quote.is_some_and(|q| q != '`');
            i += 3 + end;
            continue;
        }
        body.push(c);
        i += 1;
        match quote {
            Some(open) if c == open => {
                quote = None;
                if split {
                    body.insert(literal_start, '(');
                    body.push(')');
                }
            }
            None if c == '"' || (language == Language::Jxa && (c == '\'' || c == '`')) => {
                quote = Some(c);
                literal_start = body.len() - c.len_utf8();
                split = false;
            }
            _ => {}
        }
    }
    let program = match (language, output) {
        (Language::AppleScript, _) => format!("on run argv\n{body}\nend run\n"),
        (Language::Jxa, Output::Plain) => format!("function run(argv) {{\n{body}\n}}\n"),
        (Language::Jxa, Output::Json) => format!(
            "function run(argv) {{\nconst result = (() => {{\n{body}\n}})();\nreturn JSON.stringify(result === undefined ? null : result);\n}}\n"
        ),
    };
    Ok(Plan {
        program,
        argv_names: names,
    })
}

/// The text that replaces one placeholder.
fn reference(
    language: Language,
    quote: Option<char>,
    kind: ParamKind,
    index: usize,
    name: &str,
) -> Result<String, ScriptError> {
    let item = match language {
        Language::AppleScript => format!("(item {} of argv)", index + 1),
        Language::Jxa => format!("argv[{index}]"),
    };
    Ok(match (language, quote) {
        // Inside a literal: close it, join the argv item, reopen it.
        (Language::AppleScript, Some(q)) => format!("{q} & {item} & {q}"),
        (Language::Jxa, Some('`')) => format!("${{{item}}}"),
        (Language::Jxa, Some(q)) => format!("{q} + {item} + {q}"),
        // Outside a literal: only numbers and booleans, converted from their text.
        (_, None) => match (language, kind) {
            (Language::AppleScript, ParamKind::Integer) => format!("({item} as integer)"),
            (Language::AppleScript, ParamKind::Number) => format!("({item} as real)"),
            (Language::AppleScript, ParamKind::Boolean) => format!("({item} is \"true\")"),
            (Language::Jxa, ParamKind::Integer | ParamKind::Number) => format!("Number({item})"),
            (Language::Jxa, ParamKind::Boolean) => format!("({item} === \"true\")"),
            (_, ParamKind::Text) => {
                return Err(ScriptError {
                    placeholder: name.to_owned(),
                    message:
                        "a text parameter may only appear inside a string literal; put it in quotes"
                            .into(),
                });
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn kinds(name: &str) -> Option<ParamKind> {
        match name {
            "subject" | "body" | "to" => Some(ParamKind::Text),
            "count" => Some(ParamKind::Integer),
            "flag" => Some(ParamKind::Boolean),
            _ => None,
        }
    }

    const MAIL: &str = "tell application \"Mail\"\n  set m to make new outgoing message with properties {subject:\"${subject}\", content:\"Body: ${body}!\"}\n  -- send to ${to} later\nend tell\nrepeat ${count} times\nend repeat";

    #[test]
    fn applescript_placeholders_become_argv_items() {
        let plan = plan(Language::AppleScript, MAIL, Output::Plain, kinds).expect("plan");
        assert_eq!(plan.argv_names, vec!["subject", "body", "count"]);
        assert!(plan.program.starts_with("on run argv\n"));
        assert!(
            plan.program.contains(
                r#"{subject:("" & (item 1 of argv) & ""), content:("Body: " & (item 2 of argv) & "!")}"#
            ),
            "{}",
            plan.program
        );
        assert!(
            plan.program.contains("-- send to ${to} later"),
            "comments stay as they are"
        );
        assert!(
            plan.program
                .contains("repeat ((item 3 of argv) as integer) times")
        );
        let args =
            json!({"subject": "\" & (do shell script \"rm -rf ~\") & \"", "body": "b", "count": 3});
        let argv = plan.argv(args.as_object().expect("object"));
        assert_eq!(argv[0], "\" & (do shell script \"rm -rf ~\") & \"");
        assert_eq!(argv[2], "3");
    }

    #[test]
    fn jxa_uses_argv_in_each_kind_of_literal() {
        let script = "const a = 'x${subject}y'; const b = \"${body}\"; const c = `t ${to} u`; const n = ${count}; // ${subject}";
        let plan = plan(Language::Jxa, script, Output::Plain, kinds).expect("plan");
        assert!(plan.program.starts_with("function run(argv) {\n"));
        assert!(
            plan.program.contains("('x' + argv[0] + 'y')"),
            "{}",
            plan.program
        );
        assert!(plan.program.contains("(\"\" + argv[1] + \"\")"));
        assert!(plan.program.contains("`t ${argv[2]} u`"));
        assert!(plan.program.contains("const n = Number(argv[3])"));
        assert!(plan.program.ends_with("// ${subject}\n}\n"));
    }

    #[test]
    fn text_outside_literals_and_unknown_names_are_rejected() {
        let error = plan(
            Language::AppleScript,
            "set x to ${subject}",
            Output::Plain,
            kinds,
        )
        .expect_err("bare text");
        assert_eq!(error.placeholder, "subject");
        assert!(error.message.contains("inside a string literal"));
        let error = plan(Language::Jxa, "'${nope}'", Output::Plain, kinds).expect_err("unknown");
        assert_eq!(
            error.to_string(),
            "${nope}: names no parameter of this tool"
        );
    }

    proptest! {
        /// The program never depends on the values, and the values reach argv unchanged.
        #[test]
        fn values_never_change_the_program(subject in "\\PC*", body in prop::collection::vec(prop_oneof![
            Just('"'), Just('\''), Just('`'), Just('\\'), Just('$'), Just('{'), Just('}'), Just('\n'), Just('\r'),
            Just('\u{2028}'), Just('\u{2029}'), Just('\0'), any::<char>()], 0..64)) {
            let body: String = body.into_iter().collect();
            let jxa = "const m = Mail.OutgoingMessage({subject: '${subject}', content: `Body: ${body}!`}); repeat(${count});";
            for (language, script) in [(Language::AppleScript, MAIL), (Language::Jxa, jxa)] {
                let plan = plan(language, script, Output::Plain, kinds).expect("plan");
                let args = json!({"subject": subject, "body": body, "count": 2});
                let argv = plan.argv(args.as_object().expect("object"));
                // The program was planned before any value existed; the values travel only in argv.
                prop_assert_eq!(&argv[0], &subject);
                prop_assert_eq!(&argv[1], &body);
                prop_assert_eq!(&argv[2], "2");
                let code = plan.program.replace("-- send to ${to} later", "");
                prop_assert!(!code.contains("${") || language == Language::Jxa && code.contains("${argv["), "a placeholder survived in {}", plan.program);
            }
        }
    }

    /// Runs a JXA program under Node with a `run(argv)` driver; argv travels as JSON on stdin
    /// (a 1 MB value would not fit in one command-line argument).
    fn run_under_node(program: &str, argv: &[String]) -> Value {
        use std::io::Write;
        let driver = format!(
            "{program}\nlet input = '';\nprocess.stdin.setEncoding('utf8');\nprocess.stdin.on('data', d => input += d);\nprocess.stdin.on('end', () => process.stdout.write(run(JSON.parse(input))));\n"
        );
        let mut child = std::process::Command::new("node")
            .arg("-e")
            .arg(&driver)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("node is needed for this test: apt-get install -y nodejs");
        let input = serde_json::to_vec(argv).expect("json");
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let out = child.wait_with_output().expect("node ran");
        writer.join().expect("writer").expect("stdin written");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json output")
    }

    const ECHO: &str =
        "return {s: '${subject}', t: `${body}`, d: \"${to}\", n: ${count} + 1, b: ${flag}};";

    fn check_under_node(plan: &Plan, value: &str) {
        let args = json!({"subject": value, "body": value, "to": value, "count": 41, "flag": true});
        let argv = plan.argv(args.as_object().expect("object"));
        assert_eq!(
            run_under_node(&plan.program, &argv),
            json!({"s": value, "t": value, "d": value, "n": 42, "b": true}),
            "{:?}",
            value.chars().take(80).collect::<String>()
        );
    }

    /// The generated JXA program, run by Node, returns every value exactly: quotes,
    /// backslashes, `$`, backticks, every line terminator, NUL and a 1 MB string included.
    #[test]
    fn jxa_programs_return_the_values_unchanged_under_node() {
        let plan = plan(Language::Jxa, ECHO, Output::Json, kinds).expect("plan");
        let nasty = [
            "plain",
            "' + require('child_process').execSync('id') + '",
            "` + process.exit(3) + `",
            "${process.exit(4)}",
            "\" ); process.exit(5); (\"",
            "back\\slash \\' \\\" \\`",
            "lines\nCR\rLS\u{2028}PS\u{2029}NUL\0end",
            "\u{1F600} ünïcödé",
        ];
        for value in nasty {
            check_under_node(&plan, value);
        }
        // A filled literal is still one expression: member access applies to all of it.
        let split = super::plan(Language::Jxa, "return {s: '${subject}'.split(',').length, t: \"x${body}\".length, d: '', n: 0, b: true};", Output::Json, kinds).expect("plan");
        let argv = split.argv(
            json!({"subject": "a,b,c", "body": "yz"})
                .as_object()
                .expect("object"),
        );
        assert_eq!(
            run_under_node(&split.program, &argv),
            json!({"s": 3, "t": 3, "d": "", "n": 0, "b": true})
        );
        let big: String = "'`\"\\$\u{2028}\0ü".chars().cycle().take(1 << 20).collect();
        check_under_node(&plan, &big);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Arbitrary Unicode reaches the JXA program unchanged.
        #[test]
        fn arbitrary_values_reach_jxa_unchanged(value in prop::collection::vec(prop_oneof![
            Just('"'), Just('\''), Just('`'), Just('\\'), Just('$'), Just('{'), Just('}'), Just('\n'), Just('\r'),
            Just('\u{2028}'), Just('\u{2029}'), Just('\u{85}'), Just('\0'), any::<char>()], 0..200)) {
            let plan = plan(Language::Jxa, ECHO, Output::Json, kinds).expect("plan");
            let value: String = value.into_iter().collect();
            check_under_node(&plan, &value);
        }
    }
}
