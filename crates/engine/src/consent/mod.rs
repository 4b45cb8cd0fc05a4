//! Consent: the question put to the user before a call the policy does not let through on
//! its own — its wording and choices ([`Question`], [`Answer`]) — who can ask it ([`Asker`]:
//! a desktop dialog in [`dialog`], the daemon's queue in [`queue`]; the MCP client's own
//! form is the server's), and what an unanswered question means ([`Unanswered`]).

pub mod dialog;
pub mod queue;

use aai_descriptor::Risk;
use aai_descriptor::visible::{visible, visible_lines};
use serde_json::{Value, json};

use crate::gate::{LONG_ARGS, risk_name};

/// The user's answer to "may this client run this tool?", narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Deny,
    /// This exact call only; nothing is remembered.
    AllowOnce,
    /// This tool, until the client disconnects.
    AllowSession,
    /// Commands starting with the question's offered prefix, until revoked (terminal).
    AlwaysPrefix,
    /// This tool, until revoked.
    AlwaysTool,
    /// Every tool of this app, until revoked.
    AlwaysApp,
}

impl Answer {
    /// The value that stands for this answer in an elicitation form.
    pub fn key(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::AllowOnce => "allow_once",
            Self::AllowSession => "allow_session",
            Self::AlwaysPrefix => "always_prefix",
            Self::AlwaysTool => "always_tool",
            Self::AlwaysApp => "always_app",
        }
    }

    /// How the audit log names a call allowed by this answer.
    pub fn decision(self) -> &'static str {
        match self {
            Self::Deny => "denied",
            Self::AllowOnce => "allowed_once",
            Self::AllowSession => "allowed_session",
            Self::AlwaysPrefix => "allowed_always_prefix",
            Self::AlwaysTool => "allowed_always_tool",
            Self::AlwaysApp => "allowed_always_app",
        }
    }
}

/// What the user is asked about.
#[derive(Debug, Clone)]
pub struct Question {
    /// The client's reported name (`clientInfo.name`).
    pub caller: String,
    pub app_id: String,
    pub app_name: String,
    pub tool: String,
    pub risk: Risk,
    /// The redacted arguments, whole: a question never cuts what would run.
    pub args: String,
    /// "Always allow commands starting with …" is offered for these words (terminal).
    pub prefix: Option<String>,
    /// Only *Deny* and *Allow once* are offered (a critical command: no grant may cover it).
    pub once_only: bool,
    /// *Allow this tool for this session* is offered (the caller has a session).
    pub session: bool,
    /// A question about a binding rather than a tool (a sign-in domain, a credential sent to
    /// a host): only *Deny*, *Allow once* and this label for [`Answer::AlwaysTool`].
    pub always_label: Option<String>,
    /// With [`Question::always_label`]: the label of [`Answer::AllowSession`] for the binding,
    /// offered when the caller has a session.
    pub session_label: Option<String>,
    /// Why this call is asked every time (a password typed into a page).
    pub why: Option<String>,
    /// A question about this many steps of a batch (`args` lists them): *Deny all*,
    /// *Approve all* ([`Answer::AllowOnce`] for each) or *Ask me step by step*
    /// ([`Answer::AlwaysTool`], which grants nothing here).
    pub batch: Option<usize>,
}

impl Question {
    /// A question with every standard choice offered.
    pub fn new(
        caller: &str,
        app_id: &str,
        app_name: &str,
        tool: &str,
        risk: Risk,
        args: String,
    ) -> Self {
        Self {
            caller: caller.to_owned(),
            app_id: app_id.to_owned(),
            app_name: app_name.to_owned(),
            tool: tool.to_owned(),
            risk,
            args,
            prefix: None,
            once_only: false,
            session: true,
            always_label: None,
            session_label: None,
            why: None,
            batch: None,
        }
    }

    /// The question as every asker shows it, arguments whole. Every text a client or a
    /// descriptor chose (names, arguments, reasons) is shown through [`visible`]: no control
    /// or bidi character of theirs reaches the person's screen as itself.
    pub fn message(&self) -> String {
        self.message_with(&self.args, true)
    }

    /// [`Question::message`] with the arguments left for the reader to print after it
    /// (`approvals show` prints them once, as pretty JSON).
    pub fn heading(&self) -> String {
        self.message_with("(below)", false)
    }

    /// The argument text's size, as the question states it.
    pub fn args_size(&self) -> String {
        let chars = self.args.chars().count();
        if chars == self.args.len() {
            format!("{chars} characters")
        } else {
            format!("{chars} characters, {} bytes", self.args.len())
        }
    }

    /// [`Question::message`] for a window that holds at most `max` characters of arguments:
    /// longer ones are shown by their head and tail around a line saying how much is not
    /// shown, and then `true` says the question must not be allowed from that window
    /// ([`Question::choices_unseen`]).
    pub fn message_within(&self, max: usize) -> (String, bool) {
        let chars = self.args.chars().count();
        if chars <= max {
            return (self.message(), false);
        }
        let head: String = self.args.chars().take(max * 3 / 5).collect();
        let tail: String = self.args.chars().skip(chars - max * 2 / 5).collect();
        let hidden = chars - head.chars().count() - tail.chars().count();
        let shown = format!(
            "{head}\n[{hidden} characters not shown — this window cannot hold them, so it offers only Deny. A client served by the daemon (`aai-gateway serve`) is asked in its queue instead: read it whole on the dashboard or with `aai-gateway approvals show ID`]\n{tail}"
        );
        (self.message_with(&shown, false), true)
    }

    fn message_with(&self, args: &str, whole: bool) -> String {
        let caller = visible(&self.caller);
        if let Some(count) = self.batch {
            return format!(
                "Allow {caller} to run {count} step(s) of {} that need your approval?\nClient: {caller} (the name it reported).\n{}",
                visible(&self.app_name),
                visible_lines(args)
            );
        }
        let size = if !whole {
            format!(" ({})", self.args_size())
        } else if self.args.chars().count() > LONG_ARGS {
            format!(" ({}, shown whole)", self.args_size())
        } else {
            String::new()
        };
        // Why it is asked comes before the arguments: an install's summary (app, tools,
        // risks, reach) is read before the descriptor's JSON, a deletion's loss before the
        // command.
        let mut text = format!(
            "Allow {caller} to run \"{}\" in {} ({})?\nClient: {caller} (the name it reported).\nRisk: {}.",
            visible(&self.tool),
            visible(&self.app_name),
            visible(&self.app_id),
            risk_name(self.risk),
        );
        if let Some(why) = &self.why {
            text.push_str("\nAsked because ");
            text.push_str(&visible(why));
            text.push('.');
        }
        text.push_str(&format!("\nArguments{size}: {}", visible_lines(args)));
        text
    }

    /// What a window that could not show the whole arguments offers: *Deny* only.
    pub fn choices_unseen(&self) -> Vec<(Answer, String)> {
        vec![(Answer::Deny, "Deny".to_owned())]
    }

    /// The choices offered, in order, each with its label as every asker shows it.
    pub fn choices(&self) -> Vec<(Answer, String)> {
        if let Some(count) = self.batch {
            return vec![
                (Answer::Deny, "Deny all".to_owned()),
                (Answer::AllowOnce, format!("Approve all {count}")),
                (Answer::AlwaysTool, "Ask me step by step".to_owned()),
            ];
        }
        let mut choices = vec![
            (Answer::Deny, "Deny".to_owned()),
            (Answer::AllowOnce, "Allow once".to_owned()),
        ];
        if self.once_only {
            return choices;
        }
        if let Some(label) = &self.always_label {
            if let Some(session) = self.session_label.as_ref().filter(|_| self.session) {
                choices.push((Answer::AllowSession, visible(session).into_owned()));
            }
            choices.push((Answer::AlwaysTool, visible(label).into_owned()));
            return choices;
        }
        if self.session {
            choices.push((
                Answer::AllowSession,
                "Allow this tool for this session".to_owned(),
            ));
        }
        if let Some(prefix) = &self.prefix {
            choices.push((
                Answer::AlwaysPrefix,
                format!("Always allow commands starting with `{}`", visible(prefix)),
            ));
        }
        choices.push((Answer::AlwaysTool, "Always allow this tool".to_owned()));
        choices.push((Answer::AlwaysApp, "Always allow this app".to_owned()));
        choices
    }

    /// The answer a label or key stands for, if this question offered it.
    pub fn answer_for(&self, label_or_key: &str) -> Option<Answer> {
        let text = label_or_key.trim();
        self.choices()
            .into_iter()
            .find(|(answer, label)| label == text || answer.key() == text)
            .map(|(answer, _)| answer)
    }
}

/// Why a question has no answer yet.
#[derive(Debug, Clone, PartialEq)]
pub enum Unanswered {
    /// The user was asked and said no: declined, cancelled, chose *Deny* or let it time out.
    Declined(String),
    /// The user could not be asked (no way to ask, or the client failed to).
    CannotAsk(String),
    /// The answer that came back cannot be trusted (an altered, foreign or replayed state).
    Refused(String),
    /// Ask through the client's next request (2026-07-28): the `InputRequiredResult` to return.
    Later(Value),
    /// Waiting in the daemon's approval queue under this id: the call returns pending and is
    /// resumed with `aai_exec {"approval_id"}` once the user answered.
    Queued(String),
}

/// Asks the user.
pub trait Asker: Send + Sync {
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> aai_executor::BoxFuture<'a, Result<Answer, Unanswered>>;

    /// How this asker reaches the user, as `consent list` shows it.
    fn via(&self) -> &'static str {
        "elicitation"
    }

    /// Sends the user to `url` (an OAuth sign-in page) through the client; true when the
    /// user went. The default: this asker cannot, and the caller falls back to a message.
    fn open_url<'a>(
        &'a self,
        _message: &'a str,
        _url: &'a str,
    ) -> aai_executor::BoxFuture<'a, bool> {
        Box::pin(async { false })
    }

    /// Asks the user a question a tool puts during its call (an MCP server's elicitation),
    /// when this asker can put a form to the user; `None` otherwise (the tool is told no).
    fn elicitor(&self) -> Option<&dyn aai_executor::Elicit> {
        None
    }
}

/// The `elicitation/create` params that ask `question`: one choice among those offered.
pub fn consent_form(question: &Question) -> Value {
    let choices = question.choices();
    json!({
        "mode": "form",
        "message": question.message(),
        "requestedSchema": {
            "type": "object",
            "properties": {"decision": {
                "type": "string",
                "title": "Decision",
                "enum": choices.iter().map(|(answer, _)| answer.key()).collect::<Vec<_>>(),
                "enumNames": choices.iter().map(|(_, label)| label.as_str()).collect::<Vec<_>>()
            }},
            "required": ["decision"]
        }
    })
}

/// Reads an `ElicitResult` (as JSON) into an answer to `question`; an answer it did not
/// offer is a denial.
pub fn read_elicit_result(question: &Question, result: &Value) -> Result<Answer, Unanswered> {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let chosen = result
                .pointer("/content/decision")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match question.answer_for(chosen) {
                Some(Answer::Deny) => Err(Unanswered::Declined("the user chose Deny".to_owned())),
                Some(answer) => Ok(answer),
                None => Err(Unanswered::Refused(format!(
                    "the client answered {chosen:?}, which was not offered"
                ))),
            }
        }
        Some("decline") => Err(Unanswered::Declined(
            "the user said no in the client".to_owned(),
        )),
        _ => Err(Unanswered::Declined("the user cancelled".to_owned())),
    }
}
