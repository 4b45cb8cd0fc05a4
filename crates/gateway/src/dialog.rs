//! Asking the user with the desktop's own dialog, for clients that cannot elicit:
//! zenity or kdialog on Linux, osascript on macOS, PowerShell on Windows.
//!
//! The question travels as an argument (or on stdin for PowerShell), never inside program
//! text. The dialog is bounded by the consent timeout; its process is killed after that.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::gate::{Answer, Asker, Question, Unanswered};

const ALLOW_TOOL: &str = "Allow this operation";
const ALLOW_APP: &str = "Allow all operations of this app";
const DENY: &str = "Deny";
const TITLE: &str = "AAI Gateway";

/// The dialog programs this module knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Zenity,
    Kdialog,
    Osascript,
    PowerShell,
}

/// What to run: program, arguments and standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub program: String,
    pub args: Vec<String>,
    pub stdin: Option<String>,
}

/// The AppleScript run by `osascript`: the message arrives as `item 1 of argv`.
pub const APPLESCRIPT: &str = r#"on run argv
  set answer to button returned of (display dialog (item 1 of argv) with title "AAI Gateway" buttons {"Deny", "Allow this operation", "Allow all operations of this app"} default button "Deny" cancel button "Deny" with icon caution)
  return answer
end run"#;

/// The PowerShell program: the message arrives on stdin.
pub const POWERSHELL: &str = r#"Add-Type -AssemblyName System.Windows.Forms
$message = [Console]::In.ReadToEnd()
$choice = [System.Windows.Forms.MessageBox]::Show($message + "`n`nYes: allow this operation. No: allow all operations of this app. Cancel: deny.", "AAI Gateway", "YesNoCancel", "Warning")
Write-Output $choice"#;

impl Kind {
    /// The plan that asks `message`.
    pub fn plan(self, message: &str) -> Plan {
        let own = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        match self {
            Self::Zenity => Plan {
                program: "zenity".into(),
                args: vec![
                    "--question".into(),
                    format!("--title={TITLE}"),
                    format!(
                        "--text={}",
                        message
                            .replace('&', "&amp;")
                            .replace('<', "&lt;")
                            .replace('>', "&gt;")
                    ),
                    format!("--ok-label={ALLOW_TOOL}"),
                    format!("--cancel-label={DENY}"),
                    format!("--extra-button={ALLOW_APP}"),
                    "--no-markup".into(),
                ],
                stdin: None,
            },
            Self::Kdialog => Plan {
                program: "kdialog".into(),
                args: [
                    own(&["--title", TITLE, "--warningyesnocancel"]),
                    vec![message.to_owned()],
                    own(&[
                        "--yes-label",
                        ALLOW_TOOL,
                        "--no-label",
                        ALLOW_APP,
                        "--cancel-label",
                        DENY,
                    ]),
                ]
                .concat(),
                stdin: None,
            },
            Self::Osascript => Plan {
                program: "osascript".into(),
                args: vec!["-e".into(), APPLESCRIPT.into(), message.to_owned()],
                stdin: None,
            },
            Self::PowerShell => Plan {
                program: "powershell.exe".into(),
                args: own(&["-NoProfile", "-NonInteractive", "-Command", POWERSHELL]),
                stdin: Some(message.to_owned()),
            },
        }
    }

    /// Reads the answer from the dialog's exit code and output.
    pub fn answer(self, code: Option<i32>, stdout: &str) -> Answer {
        let out = stdout.trim();
        match self {
            // zenity: OK → 0; Cancel → 1; an extra button → 1 with its label on stdout.
            Self::Zenity => match (code, out) {
                (Some(0), _) => Answer::AllowTool,
                (Some(1), ALLOW_APP) => Answer::AllowApp,
                _ => Answer::Deny,
            },
            // kdialog: yes → 0, no → 1, cancel → 2.
            Self::Kdialog => match code {
                Some(0) => Answer::AllowTool,
                Some(1) => Answer::AllowApp,
                _ => Answer::Deny,
            },
            Self::Osascript => match out {
                ALLOW_TOOL => Answer::AllowTool,
                ALLOW_APP => Answer::AllowApp,
                _ => Answer::Deny,
            },
            Self::PowerShell => match out {
                "Yes" => Answer::AllowTool,
                "No" => Answer::AllowApp,
                _ => Answer::Deny,
            },
        }
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The dialog to use here, if the session has a desktop and a dialog program.
pub fn available() -> Option<Kind> {
    if cfg!(target_os = "macos") {
        return Some(Kind::Osascript);
    }
    if cfg!(windows) {
        return Some(Kind::PowerShell);
    }
    let desktop =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if !desktop {
        return None;
    }
    [Kind::Zenity, Kind::Kdialog]
        .into_iter()
        .find(|kind| on_path(&kind.plan("").program))
}

/// Asks with a desktop dialog.
pub struct DialogAsker {
    pub kind: Kind,
    pub timeout: Duration,
}

impl Asker for DialogAsker {
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> aai_executor::BoxFuture<'a, Result<Answer, Unanswered>> {
        Box::pin(async move { self.run(question).await.map_err(Unanswered::Denied) })
    }
}

impl DialogAsker {
    async fn run(&self, question: &Question) -> Result<Answer, String> {
        let plan = self.kind.plan(&question.message());
        let mut child = tokio::process::Command::new(&plan.program)
            .args(&plan.args)
            .stdin(if plan.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot show a dialog with {}: {e}", plan.program))?;
        if let (Some(text), Some(mut stdin)) = (plan.stdin.as_ref(), child.stdin.take()) {
            let _ = stdin.write_all(text.as_bytes()).await;
        }
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(Ok(output)) => Ok(self.kind.answer(
                output.status.code(),
                &String::from_utf8_lossy(&output.stdout),
            )),
            Ok(Err(error)) => Err(format!("the dialog failed: {error}")),
            Err(_) => Err(format!("no answer within {} s", self.timeout.as_secs())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &str = "Allow claude to run \"send\" in Mail?\nArguments: {\"subject\":\"\\\" & (do shell script \\\"rm -rf ~\\\") & \\\"\"}";

    #[test]
    fn the_question_is_an_argument_never_program_text() {
        let plan = Kind::Osascript.plan(MESSAGE);
        assert_eq!(
            plan.args,
            vec!["-e".to_owned(), APPLESCRIPT.to_owned(), MESSAGE.to_owned()]
        );
        assert!(!APPLESCRIPT.contains("rm -rf"));
        let plan = Kind::PowerShell.plan(MESSAGE);
        assert_eq!(plan.stdin.as_deref(), Some(MESSAGE));
        assert!(plan.args.iter().all(|a| !a.contains("rm -rf")));
        let plan = Kind::Kdialog.plan(MESSAGE);
        assert_eq!(plan.args[3], MESSAGE);
        let plan = Kind::Zenity.plan("a <b> & c");
        assert!(plan.args.contains(&"--text=a &lt;b&gt; &amp; c".to_owned()));
    }

    #[test]
    fn exit_codes_and_output_map_to_answers() {
        assert_eq!(Kind::Zenity.answer(Some(0), ""), Answer::AllowTool);
        assert_eq!(Kind::Zenity.answer(Some(1), ALLOW_APP), Answer::AllowApp);
        assert_eq!(Kind::Zenity.answer(Some(1), ""), Answer::Deny);
        assert_eq!(Kind::Zenity.answer(None, ""), Answer::Deny);
        assert_eq!(Kind::Kdialog.answer(Some(1), ""), Answer::AllowApp);
        assert_eq!(Kind::Kdialog.answer(Some(2), ""), Answer::Deny);
        assert_eq!(
            Kind::Osascript.answer(Some(0), "Allow this operation\n"),
            Answer::AllowTool
        );
        assert_eq!(Kind::Osascript.answer(Some(1), ""), Answer::Deny);
        assert_eq!(Kind::PowerShell.answer(Some(0), "No\r\n"), Answer::AllowApp);
        assert_eq!(Kind::PowerShell.answer(Some(0), "Cancel"), Answer::Deny);
    }
}
