//! Asking the user with the desktop's own dialog, for clients that cannot elicit:
//! zenity or kdialog on Linux, osascript on macOS, PowerShell on Windows.
//!
//! The question travels as an argument (or on stdin for PowerShell), never inside program
//! text. The dialog is bounded by the consent timeout; its process is killed after that.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::consent::{Answer, Asker, Question, Unanswered};

const TITLE: &str = "AAI Gateway";
/// The most argument text (characters) a dialog shows; a longer call is shown by its head
/// and tail and can only be denied there, never allowed unseen.
pub const DIALOG_ARGS_MAX: usize = 800;

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

/// The AppleScript run by `osascript`: the message is `item 1 of argv`, the choices follow.
pub const APPLESCRIPT: &str = r#"on run argv
  set choices to items 2 thru -1 of argv
  set picked to choose from list choices with title "AAI Gateway" with prompt (item 1 of argv) default items {item 1 of choices} OK button name "Confirm" cancel button name "Deny"
  if picked is false then return "Deny"
  return item 1 of picked
end run"#;

/// The PowerShell program: the message and the choices arrive on stdin as JSON; one button
/// per choice, the label of the one pressed is written out.
pub const POWERSHELL: &str = r#"Add-Type -AssemblyName System.Windows.Forms
$q = [Console]::In.ReadToEnd() | ConvertFrom-Json
$form = New-Object System.Windows.Forms.Form
$form.Text = "AAI Gateway"; $form.AutoSize = $true; $form.TopMost = $true
$panel = New-Object System.Windows.Forms.FlowLayoutPanel
$panel.FlowDirection = "TopDown"; $panel.AutoSize = $true
$label = New-Object System.Windows.Forms.Label
$label.Text = $q.message; $label.AutoSize = $true; $label.MaximumSize = New-Object System.Drawing.Size(600, 0)
$panel.Controls.Add($label)
$script:picked = "Deny"
foreach ($choice in $q.choices) {
  $button = New-Object System.Windows.Forms.Button
  $button.Text = $choice; $button.AutoSize = $true
  $button.Add_Click({ param($sender, $e) $script:picked = $sender.Text; $form.Close() })
  $panel.Controls.Add($button)
}
$form.Controls.Add($panel)
[void]$form.ShowDialog()
Write-Output $script:picked"#;

impl Kind {
    fn program(self) -> &'static str {
        match self {
            Self::Zenity => "zenity",
            Self::Kdialog => "kdialog",
            Self::Osascript => "osascript",
            Self::PowerShell => "powershell.exe",
        }
    }

    /// The plan that asks `question`, offering exactly its choices.
    pub fn plan(self, question: &Question) -> Plan {
        let (message, choices) = offered(question);
        let labels: Vec<String> = choices.iter().map(|(_, label)| label.clone()).collect();
        match self {
            Self::Zenity => {
                let mut args = vec![
                    "--list".into(),
                    format!("--title={TITLE}"),
                    // zenity reads Pango markup in --text: escape it.
                    format!(
                        "--text={}",
                        message
                            .replace('&', "&amp;")
                            .replace('<', "&lt;")
                            .replace('>', "&gt;")
                    ),
                    "--column=Decision".into(),
                    "--hide-header".into(),
                    "--ok-label=Confirm".into(),
                    "--cancel-label=Deny".into(),
                ];
                args.extend(labels);
                Plan {
                    program: "zenity".into(),
                    args,
                    stdin: None,
                }
            }
            Self::Kdialog => {
                let mut args = vec![
                    "--title".into(),
                    TITLE.into(),
                    "--radiolist".into(),
                    message,
                ];
                for (i, (answer, label)) in choices.iter().enumerate() {
                    args.push(answer.key().to_owned());
                    args.push(label.clone());
                    args.push(if i == 0 { "on" } else { "off" }.to_owned());
                }
                Plan {
                    program: "kdialog".into(),
                    args,
                    stdin: None,
                }
            }
            Self::Osascript => {
                let mut args = vec!["-e".into(), APPLESCRIPT.into(), message];
                args.extend(labels);
                Plan {
                    program: "osascript".into(),
                    args,
                    stdin: None,
                }
            }
            Self::PowerShell => Plan {
                program: "powershell.exe".into(),
                args: ["-NoProfile", "-NonInteractive", "-Command", POWERSHELL]
                    .map(str::to_owned)
                    .to_vec(),
                stdin: Some(serde_json::json!({"message": message, "choices": labels}).to_string()),
            },
        }
    }

    /// Reads the answer from the dialog's exit code and output: the label (or kdialog's tag)
    /// of a choice the question offered; anything else, or a cancelled dialog, is *Deny*.
    pub fn answer(self, question: &Question, code: Option<i32>, stdout: &str) -> Answer {
        let picked = stdout.trim();
        if code != Some(0) {
            return Answer::Deny;
        }
        offered(question)
            .1
            .into_iter()
            .find(|(answer, label)| label == picked || answer.key() == picked)
            .map_or(Answer::Deny, |(answer, _)| answer)
    }
}

/// What a dialog shows and offers: the whole question when its arguments fit, else their
/// head and tail with *Deny* alone.
fn offered(question: &Question) -> (String, Vec<(Answer, String)>) {
    match question.message_within(DIALOG_ARGS_MAX) {
        (message, false) => (message, question.choices()),
        (message, true) => (message, question.choices_unseen()),
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
        .find(|kind| on_path(kind.program()))
}

/// Asks with a desktop dialog.
pub struct DialogAsker {
    pub kind: Kind,
    pub timeout: Duration,
}

impl Asker for DialogAsker {
    fn via(&self) -> &'static str {
        "dialog"
    }

    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> aai_executor::BoxFuture<'a, Result<Answer, Unanswered>> {
        Box::pin(async move { self.run(question).await })
    }
}

impl DialogAsker {
    async fn run(&self, question: &Question) -> Result<Answer, Unanswered> {
        let plan = self.kind.plan(question);
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
            .map_err(|e| {
                Unanswered::CannotAsk(format!("cannot show a dialog with {}: {e}", plan.program))
            })?;
        if let (Some(text), Some(mut stdin)) = (plan.stdin.as_ref(), child.stdin.take()) {
            let _ = stdin.write_all(text.as_bytes()).await;
        }
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            // A call the dialog could not show whole was only ever offered *Deny*: the agent
            // is told why, and where it could be allowed.
            Ok(Ok(_)) if question.message_within(DIALOG_ARGS_MAX).1 => {
                Err(Unanswered::Declined(format!(
                    "its arguments ({}) are too long to show whole in a dialog, so the dialog could only deny it; a client of the daemon (`aai-gateway serve`) is asked in the approval queue, where the user reads it whole",
                    question.args_size()
                )))
            }
            Ok(Ok(output)) => Ok(self.kind.answer(
                question,
                output.status.code(),
                &String::from_utf8_lossy(&output.stdout),
            )),
            Ok(Err(error)) => Err(Unanswered::CannotAsk(format!("the dialog failed: {error}"))),
            Err(_) => Err(Unanswered::Declined(format!(
                "no answer within {} s",
                self.timeout.as_secs()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aai_descriptor::Risk;

    fn question(prefix: Option<&str>) -> Question {
        let mut question = Question::new(
            "claude",
            "org.example.mail",
            "Mail",
            "send",
            Risk::High,
            r#"{"subject":"\" & (do shell script \"rm -rf ~\") & \""}"#.to_owned(),
        );
        question.prefix = prefix.map(str::to_owned);
        question
    }

    #[test]
    fn the_question_is_an_argument_never_program_text() {
        let q = question(None);
        let message = q.message();
        let plan = Kind::Osascript.plan(&q);
        assert_eq!(
            plan.args[..3],
            ["-e".to_owned(), APPLESCRIPT.to_owned(), message.clone()]
        );
        assert!(!APPLESCRIPT.contains("rm -rf"));
        let plan = Kind::PowerShell.plan(&q);
        let stdin: serde_json::Value =
            serde_json::from_str(plan.stdin.as_deref().unwrap_or_default()).expect("json");
        assert_eq!(stdin["message"], message.as_str());
        assert!(plan.args.iter().all(|a| !a.contains("rm -rf")));
        let plan = Kind::Kdialog.plan(&q);
        assert_eq!(plan.args[3], message);
        let mut q = question(None);
        q.args = "a <b> & c".into();
        let plan = Kind::Zenity.plan(&q);
        assert!(plan.args.iter().any(|a| a.ends_with("a &lt;b&gt; &amp; c")));
    }

    #[test]
    fn every_dialog_offers_the_same_choices_in_order() {
        let q = question(Some("git status"));
        let labels = [
            "Deny",
            "Allow once",
            "Allow this tool for this session",
            "Always allow commands starting with `git status`",
            "Always allow this tool",
            "Always allow this app",
        ];
        let zenity = Kind::Zenity.plan(&q);
        assert_eq!(zenity.args[zenity.args.len() - 6..], labels);
        let osascript = Kind::Osascript.plan(&q);
        assert_eq!(osascript.args[3..], labels);
        let kdialog = Kind::Kdialog.plan(&q);
        let kd_labels: Vec<&str> = kdialog.args[4..].chunks(3).map(|c| c[1].as_str()).collect();
        assert_eq!(kd_labels, labels);
        let ps = Kind::PowerShell.plan(&q);
        let stdin: serde_json::Value =
            serde_json::from_str(ps.stdin.as_deref().unwrap_or_default()).expect("json");
        assert_eq!(stdin["choices"], serde_json::json!(labels));
    }

    /// A call too long for a dialog is shown by its head and its tail — never cut where the
    /// rest would run unseen — and the dialog offers only *Deny*.
    #[test]
    fn a_call_too_long_for_a_dialog_shows_its_tail_and_cannot_be_allowed_there() {
        let mut q = question(Some("bash"));
        q.args = format!(
            r#"{{"command":"echo {}; touch /tmp/HIDDEN-TAIL"}}"#,
            "a".repeat(1280)
        );
        for kind in [
            Kind::Zenity,
            Kind::Kdialog,
            Kind::Osascript,
            Kind::PowerShell,
        ] {
            let plan = kind.plan(&q);
            let all = format!(
                "{:?}{}",
                plan.args,
                plan.stdin.as_deref().unwrap_or_default()
            );
            assert!(all.contains("HIDDEN-TAIL"), "{kind:?}: the tail is shown");
            assert!(all.contains("characters not shown"), "{kind:?}");
            assert!(
                all.contains(&format!("({} characters)", q.args.chars().count())),
                "{kind:?}: the size is stated"
            );
            assert!(
                !all.contains("Allow once"),
                "{kind:?}: nothing but Deny offered"
            );
            assert_eq!(kind.answer(&q, Some(0), "Allow once"), Answer::Deny);
            assert_eq!(kind.answer(&q, Some(0), "allow_once"), Answer::Deny);
        }
        q.args = r#"{"command":"ls"}"#.into();
        assert_eq!(
            Kind::Zenity.answer(&q, Some(0), "Allow once"),
            Answer::AllowOnce
        );
    }

    /// Escapes and bidi controls a client or a descriptor put in its names never reach the
    /// dialog as themselves.
    #[test]
    fn hostile_names_reach_dialogs_as_visible_escapes() {
        let mut q = Question::new(
            "evil\u{1b}]52;c;aGk=\u{7}\u{202e}",
            "org.example\u{200b}.mail",
            "Mail\u{1b}[2K\rRisk: low",
            "send\u{2066}",
            Risk::High,
            r#"{"to":"\u{202e}moc.elpmaxe"}"#.to_owned(),
        );
        q.why = Some("a\u{7}b".into());
        for kind in [
            Kind::Zenity,
            Kind::Kdialog,
            Kind::Osascript,
            Kind::PowerShell,
        ] {
            let plan = kind.plan(&q);
            let all = format!(
                "{}{}",
                plan.args.join(" "),
                plan.stdin.as_deref().unwrap_or_default()
            );
            for c in ['\u{1b}', '\u{7}', '\u{202e}', '\u{200b}', '\r', '\u{2066}'] {
                assert!(!all.contains(c), "{kind:?} carries {c:?}");
            }
            assert!(
                all.contains(r"\u202e") && all.contains(r"\u001b"),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn exit_codes_and_output_map_to_answers() {
        let q = question(None);
        assert_eq!(
            Kind::Zenity.answer(&q, Some(0), "Allow once\n"),
            Answer::AllowOnce
        );
        assert_eq!(
            Kind::Zenity.answer(&q, Some(0), "Always allow this app"),
            Answer::AlwaysApp
        );
        assert_eq!(Kind::Zenity.answer(&q, Some(1), "Allow once"), Answer::Deny);
        assert_eq!(Kind::Zenity.answer(&q, None, ""), Answer::Deny);
        assert_eq!(
            Kind::Kdialog.answer(&q, Some(0), "allow_session\n"),
            Answer::AllowSession
        );
        assert_eq!(Kind::Kdialog.answer(&q, Some(1), ""), Answer::Deny);
        assert_eq!(
            Kind::Osascript.answer(&q, Some(0), "Always allow this tool\n"),
            Answer::AlwaysTool
        );
        assert_eq!(Kind::Osascript.answer(&q, Some(0), "Deny"), Answer::Deny);
        assert_eq!(
            Kind::PowerShell.answer(&q, Some(0), "Allow once\r\n"),
            Answer::AllowOnce
        );
        // A choice that was not offered is a denial.
        assert_eq!(
            Kind::Zenity.answer(&q, Some(0), "Always allow commands starting with `rm`"),
            Answer::Deny
        );
        let mut critical = question(None);
        critical.once_only = true;
        assert_eq!(
            Kind::Zenity.answer(&critical, Some(0), "Always allow this app"),
            Answer::Deny
        );
    }
}
