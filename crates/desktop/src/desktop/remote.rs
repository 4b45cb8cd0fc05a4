//! macOS and Windows: one fixed program each — JXA through `osascript`
//! ([`MACOS_PROGRAM`]) and PowerShell through `-EncodedCommand` ([`WINDOWS_PROGRAM`]) — that
//! does every desktop tool. The program text never changes; the call (tool, arguments, the
//! long-edge limit and the protected apps) goes in as JSON on stdin, and the answer comes back
//! as JSON on stdout. `call --dry-run --platform macos|windows` prints exactly what would run.

use std::sync::LazyLock;
use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind, Platform};
use aai_executor::process::{Command, run};
use serde_json::{Map, Value, json};

use super::DesktopConfig;

/// The macOS program (JavaScript for Automation).
pub const MACOS_PROGRAM: &str = include_str!("scripts/macos.js");
/// The Windows program (PowerShell 5.1+, System.Drawing, SendInput, UI Automation).
pub const WINDOWS_PROGRAM: &str = include_str!("scripts/windows.ps1");

static WINDOWS_ENCODED: LazyLock<String> =
    LazyLock::new(|| aai_executor::encoded_command(WINDOWS_PROGRAM));

/// The desktop OS a call is planned for, when it is not Linux.
pub fn os_of(platform: Platform) -> Option<Platform> {
    matches!(platform, Platform::Macos | Platform::Windows).then_some(platform)
}

/// The OS this gateway runs on, when it is driven by a fixed program.
pub fn native() -> Option<Platform> {
    if cfg!(target_os = "macos") {
        Some(Platform::Macos)
    } else if cfg!(windows) {
        Some(Platform::Windows)
    } else {
        None
    }
}

/// The exact command for `tool` with `args` on `os`: program, argv and stdin.
pub fn command(
    os: Platform,
    tool: &str,
    args: &Map<String, Value>,
    config: &DesktopConfig,
) -> Command {
    let stdin = json!({
        "tool": tool,
        "args": args,
        "max_edge": config.max_edge(),
        "protected": config.protected(),
    })
    .to_string();
    match os {
        Platform::Windows => Command::new("powershell.exe")
            .args([
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-EncodedCommand",
            ])
            .arg(WINDOWS_ENCODED.as_str())
            .stdin(stdin),
        _ => Command::new("osascript")
            .args(["-l", "JavaScript", "-e", MACOS_PROGRAM])
            .stdin(stdin),
    }
}

/// Runs `tool` through the OS's program and reads its answer.
///
/// # Errors
/// PERMISSION_DENIED for a protected app, AUTOMATION_FAILED with the program's own message.
pub async fn call(
    os: Platform,
    tool: &str,
    args: &Map<String, Value>,
    config: &DesktopConfig,
    timeout: Duration,
) -> Result<Value, AaiError> {
    let command = command(os, tool, args, config);
    let output = run(&command, timeout, tool).await?;
    let answer: Value = serde_json::from_str(output.stdout.trim()).map_err(|_| {
        aai_toolset::failed(format!(
            "the desktop program answered no JSON (exit {:?}): {}",
            output.code,
            output.stderr.trim()
        ))
    })?;
    answer_of(answer)
}

/// The program's answer as a result or an error.
///
/// # Errors
/// The program's `{"error": …}`.
pub fn answer_of(answer: Value) -> Result<Value, AaiError> {
    match answer.get("error").and_then(Value::as_str) {
        Some(message) => Err(match message.strip_prefix("protected:") {
            Some(app) => AaiError::new(
                ErrorKind::PermissionDenied,
                format!("input to {app:?} is refused: it is a protected app (desktop.protected_apps); no approval can allow it. Ask the user to do this part themselves."),
            )
            .with_detail(json!({"reason": "protected_app", "window": app})),
            None => aai_toolset::failed(message.to_owned()),
        }),
        None => Ok(answer),
    }
}

/// What `call --dry-run` shows for a desktop tool: the fixed program for macOS or Windows, or
/// the X11 backend on Linux.
pub fn plan_for(
    app: &str,
    tool: &str,
    args: &Map<String, Value>,
    config: &DesktopConfig,
    target: Option<Platform>,
) -> Value {
    match target.and_then(os_of).or_else(native) {
        Some(os) => plan(os, tool, args, config),
        None => {
            json!({"builtin": {"app": app, "tool": tool, "args": args}, "backend": "X11 (x11rb: GetImage, XTEST, EWMH; AT-SPI over D-Bus; Tesseract)"})
        }
    }
}

/// What `call --dry-run` shows for a desktop tool on `os`.
pub fn plan(os: Platform, tool: &str, args: &Map<String, Value>, config: &DesktopConfig) -> Value {
    let command = command(os, tool, args, config);
    json!({
        "program": command.program,
        "argv": command.argv,
        "stdin": command.stdin,
        "backend": if os == Platform::Windows { "PowerShell: System.Drawing, SendInput, UI Automation" } else { "JXA: CGWindowList, CGEvent, System Events (AX)" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    /// Whatever the agent sends, the program text is the same fixed text and the values travel
    /// only on stdin, as JSON.
    #[test]
    fn values_never_become_program_text() {
        let config = DesktopConfig::default();
        let hostile =
            "\"); doShellScript(\"rm -rf ~\"); (\"' ; Remove-Item -Recurse C:\\ ; $(whoami) `n";
        for os in [Platform::Macos, Platform::Windows] {
            let plain = command(os, "type_text", &args(json!({"text": "hello"})), &config);
            let evil = command(os, "type_text", &args(json!({"text": hostile})), &config);
            assert_eq!(plain.program, evil.program);
            assert_eq!(
                plain.argv, evil.argv,
                "{os:?}: the argv must not depend on the values"
            );
            let stdin: Value =
                serde_json::from_str(evil.stdin.as_deref().unwrap_or("")).expect("json");
            assert_eq!(stdin["args"]["text"], hostile);
            assert_eq!(stdin["tool"], "type_text");
            assert_eq!(stdin["max_edge"], 1568);
            assert!(
                stdin["protected"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p == "keepassxc"))
            );
        }
        let mac = command(Platform::Macos, "screenshot", &Map::new(), &config);
        assert_eq!(mac.program, "osascript");
        assert_eq!(mac.argv[..3], ["-l", "JavaScript", "-e"]);
        assert_eq!(mac.argv[3], MACOS_PROGRAM);
        let win = command(Platform::Windows, "screenshot", &Map::new(), &config);
        assert_eq!(win.program, "powershell.exe");
        assert_eq!(win.argv[4], "-EncodedCommand");
        assert_eq!(win.argv[5], aai_executor::encoded_command(WINDOWS_PROGRAM));
    }

    /// Every desktop tool has its branch in both programs, and the programs read their input
    /// from stdin only.
    #[test]
    fn both_programs_cover_every_desktop_tool() {
        for descriptor in [
            &*crate::screen::DESCRIPTOR,
            &*crate::input::DESCRIPTOR,
            &*crate::apps::DESCRIPTOR,
        ] {
            for tool in crate::tool_names(descriptor) {
                assert!(
                    MACOS_PROGRAM.contains(&format!("case \"{tool}\"")),
                    "macOS program lacks {tool}"
                );
                assert!(
                    WINDOWS_PROGRAM.contains(&format!("'{tool}'")),
                    "Windows program lacks {tool}"
                );
            }
        }
        assert!(MACOS_PROGRAM.contains("fileHandleWithStandardInput"));
        assert!(
            !MACOS_PROGRAM.contains("doShellScript"),
            "no shell from the macOS program"
        );
        assert!(WINDOWS_PROGRAM.contains("[Console]::In.ReadToEnd()"));
        assert!(
            !WINDOWS_PROGRAM.contains("Invoke-Expression"),
            "no eval in the Windows program"
        );
    }

    /// The JXA program is JavaScript: Node.js (which the test script installs) parses it.
    #[test]
    fn the_macos_program_parses_as_javascript() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("macos.js");
        std::fs::write(&file, MACOS_PROGRAM).expect("write");
        let out = std::process::Command::new("node")
            .arg("--check")
            .arg(&file)
            .output()
            .expect("node is installed by scripts/test.sh");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn answers_become_results_or_errors() {
        assert_eq!(answer_of(json!({"ok": 1})).ok(), Some(json!({"ok": 1})));
        let protected = answer_of(json!({"error": "protected:1Password"})).expect_err("refused");
        assert_eq!(protected.kind, ErrorKind::PermissionDenied);
        let failed = answer_of(json!({"error": "no window matches \"x\""})).expect_err("failed");
        assert_eq!(failed.kind, ErrorKind::AutomationFailed);
    }
}
