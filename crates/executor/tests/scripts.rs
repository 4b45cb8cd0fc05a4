//! The script executors at the boundary we own: the program text, argv and stdin handed to
//! osascript, PowerShell, adb and xcrun, and how their exit codes, output and hangs map to
//! AAI results. osascript, PowerShell, adb and simctl do not run on Linux, so each is
//! replaced by a small program that records what it was given; JXA scripts really run, under
//! Node, and Android command lines really go through `sh`, as a device's shell would parse them.

#![cfg(unix)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aai_descriptor::{Descriptor, ErrorKind, Platform};
use aai_executor::{COM_PROGRAM, Executors, Invocation, Settings};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Hostile characters: quotes, backslashes, `$`, backticks, every line terminator, NUL.
fn hostile() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just('"'),
            Just('\''),
            Just('`'),
            Just('\\'),
            Just('$'),
            Just('('),
            Just(';'),
            Just('&'),
            Just('|'),
            Just('#'),
            Just('%'),
            Just('='),
            Just('?'),
            Just('/'),
            Just('+'),
            Just(' '),
            Just('\n'),
            Just('\r'),
            Just('\u{85}'),
            Just('\u{2028}'),
            Just('\u{2029}'),
            any::<char>(),
        ],
        0..120,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

fn descriptor(platforms: Value) -> Descriptor {
    let doc = json!({"schema_version": "1.0", "appId": "org.example.mail", "name": "Mail", "platforms": platforms});
    aai_descriptor::parse("test", doc.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

fn mail_params() -> Value {
    json!({"type": "object", "properties": {
        "to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"},
        "count": {"type": "integer"}, "urgent": {"type": "boolean"}, "score": {"type": "number"}
    }})
}

fn args(value: &Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

fn run_sync<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// Writes an executable script.
fn program(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write program");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// NUL-separated words a fake recorded.
fn words(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8(bytes).expect("utf8");
    let mut words: Vec<String> = text.split('\0').map(str::to_owned).collect();
    words.pop();
    words
}

/// A stand-in for osascript: records stdin and argv; runs JavaScript under Node the way
/// osascript runs JXA (`run(argv)`, result printed); for AppleScript prints `out` / fails
/// with `err` from its folder, after sleeping `sleep` seconds when that file exists.
const FAKE_OSASCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")
lang=AppleScript
while [ $# -gt 0 ]; do
  case "$1" in
    -l) lang=$2; shift 2;;
    -s) shift 2;;
    -) shift; break;;
    *) echo "unexpected option $1" >&2; exit 2;;
  esac
done
cat > "$dir/stdin"
: > "$dir/argv"
for a; do printf '%s\0' "$a" >> "$dir/argv"; done
count=$(cat "$dir/count" 2>/dev/null || echo 0); echo $((count + 1)) > "$dir/count"
if [ "$lang" = JavaScript ]; then
  exec node -e 'const fs = require("fs"); const program = fs.readFileSync(process.argv[1], "utf8");
const run = new Function(program + "\nreturn run;")(); process.stdout.write(String(run(process.argv.slice(2))) + "\n");' "$dir/stdin" "$@"
fi
[ -f "$dir/sleep" ] && sleep "$(cat "$dir/sleep")"
if [ -f "$dir/err" ]; then cat "$dir/err" >&2; exit 1; fi
[ -f "$dir/out" ] && cat "$dir/out"
exit 0
"#;

struct Fake {
    dir: tempfile::TempDir,
    executors: Executors,
}

impl Fake {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let osascript = program(dir.path(), "osascript", FAKE_OSASCRIPT);
        let settings = Settings {
            osascript: osascript.display().to_string(),
            ..Settings::default()
        };
        Self {
            executors: Executors::with_settings(settings, None),
            dir,
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn call(
        &self,
        d: &Descriptor,
        platform: Platform,
        tool: &str,
        a: &Value,
    ) -> Result<Value, aai_descriptor::AaiError> {
        let a = args(a);
        run_sync(self.executors.call(
            platform,
            Invocation::new(d, tool, &a, Duration::from_secs(20)),
        ))
    }
}

fn jxa_mail() -> Descriptor {
    descriptor(json!({"macos": {"automation": "jxa", "tools": [{
        "name": "echo", "description": "Echo the values back",
        "parameters": mail_params(),
        "script": "return {to: \"${to}\", subject: '${subject}', body: `${body}`, next: ${count} + 1, urgent: ${urgent}};",
        "output_parser": "result as record"
    }]}}))
}

#[test]
fn jxa_runs_with_values_only_in_argv() {
    let fake = Fake::new();
    let d = jxa_mail();
    let nasty = "\" + (function(){throw 'pwned'})() + \" ' ${x} ` \\ \n\r\u{2028}\u{2029} ü";
    let result = fake
        .call(
            &d,
            Platform::Macos,
            "echo",
            &json!({"to": nasty, "subject": nasty, "body": nasty, "count": 41, "urgent": false}),
        )
        .expect("runs");
    assert_eq!(
        result,
        json!({"to": nasty, "subject": nasty, "body": nasty, "next": 42, "urgent": false})
    );
    let program = std::fs::read_to_string(fake.file("stdin")).expect("stdin");
    assert!(
        !program.contains("pwned"),
        "a value reached the program text"
    );
    assert_eq!(
        words(&fake.file("argv")),
        [nasty, nasty, nasty, "41", "false"]
    );
}

fn applescript_mail(parser: &str) -> Descriptor {
    descriptor(json!({"macos": {"automation": "applescript", "tools": [{
        "name": "send", "description": "Send",
        "parameters": mail_params(),
        "script": "tell application \"Mail\"\n  set m to make new outgoing message with properties {subject:\"${subject}\", content:\"${body}\"}\nend tell\nreturn \"{\\\"sent\\\":true}\"",
        "output_parser": parser
    }]}}))
}

#[test]
fn applescript_program_is_fixed_and_values_follow_the_dash() {
    let fake = Fake::new();
    let d = applescript_mail("result as text");
    std::fs::write(fake.file("out"), "{\"sent\":true}\n").expect("out");
    let mut programs = Vec::new();
    for subject in ["Hello", "\" & (do shell script \"id\") & \"", "-e", "--"] {
        let result = fake
            .call(
                &d,
                Platform::Macos,
                "send",
                &json!({"subject": subject, "body": "b"}),
            )
            .expect("runs");
        assert_eq!(result, json!({"sent": true}), "JSON text is detected");
        programs.push(std::fs::read_to_string(fake.file("stdin")).expect("stdin"));
        assert_eq!(words(&fake.file("argv")), [subject, "b"]);
    }
    assert!(
        programs.windows(2).all(|w| w[0] == w[1]),
        "the program changed with the values"
    );
    assert!(programs[0].starts_with("on run argv\n"));
    assert!(programs[0].contains(
        "{subject:(\"\" & (item 1 of argv) & \"\"), content:(\"\" & (item 2 of argv) & \"\")}"
    ));
    // The dry run shows exactly that command.
    let a = args(&json!({"subject": "Hi", "body": "b"}));
    let plan = fake
        .executors
        .plan(
            Platform::Macos,
            Invocation::new(&d, "send", &a, Duration::from_secs(1)),
        )
        .expect("plan");
    assert_eq!(plan["argv"], json!(["-l", "AppleScript", "-", "Hi", "b"]));
    assert_eq!(plan["stdin"], json!(programs[0]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Through a real exec: osascript gets the same program for every value, and argv holds
    /// the values exactly (NUL, which argv cannot carry, is refused).
    #[test]
    fn applescript_values_reach_argv_unchanged(subject in hostile(), body in hostile()) {
        let fake = Fake::new();
        std::fs::write(fake.file("out"), "ok\n").expect("out");
        let d = applescript_mail("result as text");
        let result = fake.call(&d, Platform::Macos, "send", &json!({"subject": subject, "body": body}));
        if subject.contains('\0') || body.contains('\0') {
            prop_assert_eq!(result.expect_err("NUL").kind, ErrorKind::InvalidParams);
        } else {
            prop_assert_eq!(result.expect("runs"), json!("ok"));
            let reference = fake.executors.plan(Platform::Macos, Invocation::new(&d, "send", &args(&json!({"subject": "", "body": ""})), Duration::from_secs(1))).expect("plan");
            prop_assert_eq!(json!(std::fs::read_to_string(fake.file("stdin")).expect("stdin")), reference["stdin"].clone());
            prop_assert_eq!(words(&fake.file("argv")), vec![subject, body]);
        }
    }
}

#[test]
fn applescript_records_become_json() {
    let fake = Fake::new();
    let d = applescript_mail("result as record");
    std::fs::write(
        fake.file("out"),
        "{name:\"Inbox\", |unread count|:3, flags:{true, false}}\n",
    )
    .expect("out");
    let result = fake
        .call(
            &d,
            Platform::Macos,
            "send",
            &json!({"subject": "s", "body": "b"}),
        )
        .expect("runs");
    assert_eq!(
        result,
        json!({"name": "Inbox", "unread count": 3, "flags": [true, false]})
    );
}

#[test]
fn osascript_failures_come_back_as_aai_codes() {
    let fake = Fake::new();
    let d = applescript_mail("result as text");
    let cases = [
        (
            "28:55: execution error: Not authorized to send Apple events to Mail. (-1743)",
            ErrorKind::PermissionDenied,
        ),
        (
            "execution error: Mail got an error: Application isn’t running. (-600)",
            ErrorKind::AppNotRunning,
        ),
        (
            "0:3: syntax error: Expected expression but found end of script. (-2741)",
            ErrorKind::ScriptParseError,
        ),
    ];
    for (stderr, kind) in cases {
        std::fs::write(fake.file("err"), stderr).expect("err");
        let error = fake
            .call(
                &d,
                Platform::Macos,
                "send",
                &json!({"subject": "s", "body": "b"}),
            )
            .expect_err("fails");
        assert_eq!(error.kind, kind, "{stderr}");
    }
}

#[test]
fn nul_in_a_value_is_refused_before_anything_runs() {
    let fake = Fake::new();
    let d = applescript_mail("result as text");
    let error = fake
        .call(
            &d,
            Platform::Macos,
            "send",
            &json!({"subject": "a\0b", "body": "b"}),
        )
        .expect_err("nul");
    assert_eq!(error.kind, ErrorKind::InvalidParams);
    assert!(error.message.contains("`subject`"));
    assert!(!fake.file("stdin").exists(), "osascript ran");
}

#[test]
fn a_missing_program_is_automation_not_supported() {
    let executors = Executors::with_settings(
        Settings {
            osascript: "/nonexistent/osascript".into(),
            adb: "/nonexistent/adb".into(),
            ..Settings::default()
        },
        None,
    );
    let d = applescript_mail("result as text");
    let a = args(&json!({"subject": "s", "body": "b"}));
    let error = run_sync(executors.call(
        Platform::Macos,
        Invocation::new(&d, "send", &a, Duration::from_secs(5)),
    ))
    .expect_err("missing");
    assert_eq!(error.kind, ErrorKind::AutomationNotSupported);
    assert!(
        error.message.contains("/nonexistent/osascript"),
        "{}",
        error.message
    );
    let d = android_mail();
    let a = args(&json!({"to": "x", "subject": "s", "body": "b"}));
    let error = run_sync(executors.call(
        Platform::Android,
        Invocation::new(&d, "send", &a, Duration::from_secs(5)),
    ))
    .expect_err("missing");
    assert_eq!(error.kind, ErrorKind::AutomationNotSupported);
}

#[test]
fn a_hung_script_times_out() {
    let fake = Fake::new();
    std::fs::write(fake.file("sleep"), "30").expect("sleep");
    let d = applescript_mail("result as text");
    let a = args(&json!({"subject": "s", "body": "b"}));
    let error = run_sync(fake.executors.call(
        Platform::Macos,
        Invocation::new(&d, "send", &a, Duration::from_millis(300)),
    ))
    .expect_err("times out");
    assert_eq!(error.kind, ErrorKind::Timeout);
}

// ---------------------------------------------------------------------------------------
// Android

fn android_mail() -> Descriptor {
    descriptor(
        json!({"android": {"automation": "intent", "package": "com.example.mail", "tools": [{
            "name": "send", "description": "Send",
            "parameters": mail_params(),
            "action": "com.example.MAIL_SEND",
            "extras": {"to": "${to}", "subject": "${subject}", "body": "Body: ${body}", "count": "${count}",
                       "urgent": "${urgent}", "score": "${score}", "source": "aai"},
            "result_type": "content_provider",
            "result_uri": "content://com.example.mail/results"
        }]}}),
    )
}

/// What `am` receives when the device's shell parses the line adb sends: the line goes
/// through `sh` on stdin with `am` defined to print its arguments NUL-separated.
fn device_shell_words(line: &str) -> Vec<String> {
    let script = format!("am() {{ printf '%s\\0' \"$@\"; }}\n{line}\n");
    let mut child = std::process::Command::new("sh")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(script.as_bytes()));
    let out = child.wait_with_output().expect("sh ran");
    writer.join().expect("writer").expect("written");
    let text = String::from_utf8(out.stdout).expect("utf8");
    let mut words: Vec<String> = text.split('\0').map(str::to_owned).collect();
    words.pop();
    words
}

fn try_android_plan(executors: &Executors, a: &Value) -> Result<Value, aai_descriptor::AaiError> {
    let d = android_mail();
    let a = args(a);
    executors.plan(
        Platform::Android,
        Invocation::new(&d, "send", &a, Duration::from_secs(5)),
    )
}

fn android_plan(executors: &Executors, a: &Value) -> Value {
    try_android_plan(executors, a).expect("plan")
}

fn expected_am_words(to: &str, subject: &str, body: &str) -> Vec<String> {
    [
        "start",
        "-a",
        "com.example.MAIL_SEND",
        "-p",
        "com.example.mail",
        "--es",
        "to",
        to,
        "--es",
        "subject",
        subject,
        "--es",
        "body",
        &format!("Body: {body}"),
        "--ei",
        "count",
        "7",
        "--ez",
        "urgent",
        "true",
        "--ef",
        "score",
        "0.5",
        "--es",
        "source",
        "aai",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

#[test]
fn android_command_lines_survive_the_device_shell() {
    let executors = Executors::with_settings(
        Settings {
            android_serial: Some("emulator-5554".into()),
            ..Settings::default()
        },
        None,
    );
    let nasty = "'; reboot; echo '$(id)` \"\\ \n\r\u{2028}";
    let plan = android_plan(
        &executors,
        &json!({"to": nasty, "subject": "-e", "body": "x", "count": 7, "urgent": true, "score": 0.5}),
    );
    let argv: Vec<String> = serde_json::from_value(plan["argv"].clone()).expect("argv");
    assert_eq!(argv[..3], ["-s", "emulator-5554", "shell"]);
    assert_eq!(argv.len(), 4, "one remote line: {argv:?}");
    assert_eq!(
        device_shell_words(&argv[3]),
        expected_am_words(nasty, "-e", "x")
    );
    let then = &plan["then"][0]["argv"];
    assert_eq!(
        then,
        &json!([
            "-s",
            "emulator-5554",
            "shell",
            "content query --uri content://com.example.mail/results"
        ])
    );
}

#[test]
fn android_values_of_a_megabyte_survive_the_device_shell() {
    let executors = Executors::new();
    let big: String = "'\"$`\\\n ü".chars().cycle().take(1 << 20).collect();
    let plan = android_plan(
        &executors,
        &json!({"to": big, "subject": "s", "body": "b", "count": 7, "urgent": true, "score": 0.5}),
    );
    let line = plan["argv"][1].as_str().expect("line");
    assert_eq!(device_shell_words(line), expected_am_words(&big, "s", "b"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn android_values_reach_am_unchanged(to in hostile(), subject in hostile(), body in hostile()) {
        let executors = Executors::new();
        let planned = try_android_plan(&executors, &json!({"to": to, "subject": subject, "body": body, "count": 7, "urgent": true, "score": 0.5}));
        if [&to, &subject, &body].iter().any(|v| v.contains('\0')) {
            // No shell command line can carry NUL: it is refused before anything runs.
            prop_assert_eq!(planned.expect_err("NUL").kind, ErrorKind::InvalidParams);
        } else {
            let plan = planned.expect("plan");
            let line = plan["argv"][1].as_str().expect("line");
            prop_assert_eq!(device_shell_words(line), expected_am_words(&to, &subject, &body));
        }
    }
}

/// A stand-in for adb: runs the remote line through `sh -c` with fake `am` and `content`
/// commands, as the device would; `adb_err` in its folder makes it fail like adb does.
const FAKE_ADB: &str = r#"#!/bin/sh
dir=$(dirname "$0")
if [ -f "$dir/adb_err" ]; then cat "$dir/adb_err" >&2; exit 1; fi
while [ $# -gt 0 ]; do
  case "$1" in
    -s) echo "$2" > "$dir/serial"; shift 2;;
    shell) shift; break;;
    *) exit 2;;
  esac
done
mkdir -p "$dir/bin"
cat > "$dir/bin/am" <<'EOF'
#!/bin/sh
: > "$FAKE_DIR/am"; for a; do printf '%s\0' "$a" >> "$FAKE_DIR/am"; done
echo "Starting: Intent { act=$3 }"
EOF
cat > "$dir/bin/content" <<'EOF'
#!/bin/sh
echo "Row: 0 _id=1, status=sent, to=$(cat "$FAKE_DIR/am" | tr '\0' '\n' | sed -n 8p)"
EOF
chmod +x "$dir/bin/am" "$dir/bin/content"
FAKE_DIR=$dir PATH="$dir/bin:$PATH" exec sh -c "$1"
"#;

#[test]
fn adb_runs_the_intent_then_reads_the_content_provider() {
    let dir = tempfile::tempdir().expect("dir");
    let adb = program(dir.path(), "adb", FAKE_ADB);
    let executors = Executors::with_settings(
        Settings {
            adb: adb.display().to_string(),
            ..Settings::default()
        },
        None,
    );
    let d = android_mail();
    let a = args(
        &json!({"to": "bob's $(id)", "subject": "s", "body": "b", "count": 7, "urgent": true, "score": 0.5}),
    );
    let result = run_sync(executors.call(
        Platform::Android,
        Invocation::new(&d, "send", &a, Duration::from_secs(10)),
    ))
    .expect("runs");
    assert_eq!(
        result,
        json!([{"_id": "1", "status": "sent", "to": "bob's $(id)"}])
    );
    assert_eq!(
        words(&dir.path().join("am")),
        expected_am_words("bob's $(id)", "s", "b")
    );
    std::fs::write(
        dir.path().join("adb_err"),
        "adb: error: no devices/emulators found\n",
    )
    .expect("err");
    let error = run_sync(executors.call(
        Platform::Android,
        Invocation::new(&d, "send", &a, Duration::from_secs(10)),
    ))
    .expect_err("no device");
    assert_eq!(error.kind, ErrorKind::AppNotRunning);
    assert!(error.message.contains("adb devices"), "{}", error.message);
}

// ---------------------------------------------------------------------------------------
// iOS

fn ios_mail() -> Descriptor {
    descriptor(
        json!({"ios": {"automation": "url_scheme", "scheme": "mailapp", "tools": [{
            "name": "send", "description": "Send", "parameters": mail_params(),
            "url_template": "mailapp://send/${subject}?to=${to}&body=${body}#${body}"
        }]}}),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Parsed back, the URL has the template's scheme, host, path and query keys, and each
    /// value decodes to exactly what was passed.
    #[test]
    fn url_values_never_change_the_structure(to in hostile(), subject in hostile(), body in hostile()) {
        let executors = Executors::new();
        let d = ios_mail();
        let a = args(&json!({"to": to, "subject": subject, "body": body}));
        let plan = executors.plan(Platform::Ios, Invocation::new(&d, "send", &a, Duration::from_secs(1))).expect("plan");
        let argv = plan["argv"].as_array().expect("argv");
        prop_assert_eq!(&argv[..3], &[json!("simctl"), json!("openurl"), json!("booted")][..]);
        let url = url::Url::parse(plan["argv"][3].as_str().expect("url")).expect("a valid URL");
        prop_assert_eq!(url.scheme(), "mailapp");
        prop_assert_eq!(url.host_str(), Some("send"));
        let segments: Vec<&str> = url.path_segments().expect("path").collect();
        prop_assert_eq!(segments.len(), 1);
        let decoded = percent_decode(segments[0]);
        prop_assert_eq!(&decoded, &subject);
        let pairs: Vec<(String, String)> = url.query().unwrap_or("").split('&').map(|pair| {
            let (k, v) = pair.split_once('=').expect("key=value");
            (percent_decode(k), percent_decode(v))
        }).collect();
        prop_assert_eq!(pairs, vec![("to".to_owned(), to.clone()), ("body".to_owned(), body.clone())]);
        prop_assert_eq!(percent_decode(url.fragment().unwrap_or("")), body);
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("hex");
            out.push(u8::from_str_radix(hex, 16).expect("hex"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("utf8")
}

#[test]
fn a_one_megabyte_value_fills_a_url_unchanged() {
    let big: String = "&=#?/%+ ü\u{2028}".chars().cycle().take(1 << 20).collect();
    let d = ios_mail();
    let a = args(&json!({"to": big, "subject": "s", "body": "b"}));
    let plan = Executors::new()
        .plan(
            Platform::Ios,
            Invocation::new(&d, "send", &a, Duration::from_secs(1)),
        )
        .expect("plan");
    let url = url::Url::parse(plan["argv"][3].as_str().expect("url")).expect("url");
    let to = url
        .query_pairs()
        .find(|(k, _)| k == "to")
        .map(|(_, v)| v.into_owned());
    assert_eq!(to.as_deref(), Some(big.as_str()));
}

// ---------------------------------------------------------------------------------------
// COM

fn outlook() -> Descriptor {
    descriptor(
        json!({"windows": {"automation": "com", "progid": "Outlook.Application", "tools": [{
            "name": "send", "description": "Send", "parameters": mail_params(),
            "script": [
                {"action": "create", "var": "app"},
                {"action": "call", "var": "mail", "object": "app", "method": "CreateItem", "args": [0]},
                {"action": "set", "object": "mail", "property": "To", "value": "${to}"},
                {"action": "set", "object": "mail", "property": "Subject", "value": "Re: ${subject}"},
                {"action": "set", "object": "mail", "property": "Importance", "value": "${count}"},
                {"action": "call", "object": "mail", "method": "Send"},
                {"action": "return", "value": "{\"success\":true}"}
            ],
            "output_parser": "last_result"
        }]}}),
    )
}

fn com_plan(a: &Value) -> Value {
    let d = outlook();
    let a = args(a);
    Executors::new()
        .plan(
            Platform::Windows,
            Invocation::new(&d, "send", &a, Duration::from_secs(1)),
        )
        .expect("plan")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The PowerShell program and its argv never change; the values arrive typed in the
    /// JSON on stdin, exactly.
    #[test]
    fn com_values_travel_only_as_json(to in hostile(), subject in hostile(), count in any::<i32>()) {
        let plan = com_plan(&json!({"to": to, "subject": subject, "count": count}));
        let fixed = com_plan(&json!({"to": "a", "subject": "b", "count": 1}));
        prop_assert_eq!(&plan["program"], &fixed["program"]);
        prop_assert_eq!(&plan["argv"], &fixed["argv"]);
        let stdin: Value = serde_json::from_str(plan["stdin"].as_str().expect("stdin")).expect("json");
        prop_assert_eq!(&stdin["steps"][2]["value"], &json!(to));
        prop_assert_eq!(&stdin["steps"][3]["value"], &json!(format!("Re: {subject}")));
        prop_assert_eq!(&stdin["steps"][4]["value"], &json!(count));
    }
}

#[test]
fn a_one_megabyte_value_reaches_com_unchanged() {
    let big: String = "\"'`$\\\n\0\u{2028}ü"
        .chars()
        .cycle()
        .take(1 << 20)
        .collect();
    let plan = com_plan(&json!({"to": big, "subject": "s", "count": 1}));
    let stdin: Value = serde_json::from_str(plan["stdin"].as_str().expect("stdin")).expect("json");
    assert_eq!(stdin["steps"][2]["value"], json!(big));
}

#[test]
fn com_program_is_the_encoded_fixed_script() {
    let plan = com_plan(&json!({"to": "a", "subject": "b", "count": 1}));
    let argv: Vec<String> = serde_json::from_value(plan["argv"].clone()).expect("argv");
    assert_eq!(
        argv[..5],
        [
            "-NoProfile",
            "-NonInteractive",
            "-ExecutionPolicy",
            "Bypass",
            "-EncodedCommand"
        ]
    );
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &argv[5])
        .expect("base64");
    let units: Vec<u16> = bytes
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(String::from_utf16(&units).expect("utf16"), COM_PROGRAM);
    let stdin: Value = serde_json::from_str(plan["stdin"].as_str().expect("stdin")).expect("json");
    assert_eq!(
        stdin["steps"][0],
        json!({"action": "create", "var": "app", "progid": "Outlook.Application"})
    );
    assert_eq!(stdin["steps"][1]["args"], json!([0]));
}

/// A stand-in for PowerShell: saves stdin and answers with the reply in `reply`.
const FAKE_POWERSHELL: &str = r#"#!/bin/sh
dir=$(dirname "$0")
cat > "$dir/stdin"
cat "$dir/reply"
[ -f "$dir/fail" ] && exit 1
exit 0
"#;

#[test]
fn com_replies_and_hresults_map_to_results_and_codes() {
    let dir = tempfile::tempdir().expect("dir");
    let powershell = program(dir.path(), "powershell", FAKE_POWERSHELL);
    let executors = Executors::with_settings(
        Settings {
            powershell: powershell.display().to_string(),
            ..Settings::default()
        },
        None,
    );
    let d = outlook();
    let a = args(&json!({"to": "a", "subject": "b", "count": 1}));
    let call = |reply: &str| {
        std::fs::write(dir.path().join("reply"), reply).expect("reply");
        run_sync(executors.call(
            Platform::Windows,
            Invocation::new(&d, "send", &a, Duration::from_secs(10)),
        ))
    };
    assert_eq!(
        call(r#"{"ok":true,"result":"{\"success\":true}"}"#).expect("ok"),
        json!({"success": true})
    );
    std::fs::write(dir.path().join("fail"), "").expect("fail");
    for (hresult, kind) in [
        ("0x80040154", ErrorKind::AppNotFound),
        ("0x80080005", ErrorKind::AppNotRunning),
        ("0x800706BA", ErrorKind::AppNotRunning),
        ("0x80070005", ErrorKind::PermissionDenied),
        ("0x80020006", ErrorKind::AutomationFailed),
    ] {
        let error = call(&format!(
            r#"{{"ok":false,"step":0,"hresult":"{hresult}","message":"boom"}}"#
        ))
        .expect_err("fails");
        assert_eq!(error.kind, kind, "{hresult}");
        assert!(error.message.contains(hresult));
    }
    let stdin: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("stdin")).expect("stdin"))
            .expect("json");
    assert_eq!(stdin["steps"][2]["value"], json!("a"));
}
