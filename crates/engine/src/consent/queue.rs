//! The approval queue of the daemon: where a call that needs the user's approval waits when
//! its client cannot ask (no elicitation). The user answers with `aai-gateway approvals` (or
//! the dashboard). A call still unanswered after `approval_wait_seconds` returns a pending
//! result with the approval's id; the agent resumes it with `aai_exec {"approval_id": …}`
//! once the user answered. An answer is used once: nothing runs twice.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::watch;

use aai_descriptor::visible::visible;

use crate::consent::{Answer, Asker, Question, Unanswered};
use crate::feed::{Event, Feed};

/// How long pending approvals are kept.
const KEEP: Duration = Duration::from_secs(24 * 3600);

struct Entry {
    caller: String,
    app: String,
    tool: String,
    /// The call's arguments, as given (kept in memory only, to resume the call).
    args: Value,
    /// What the user sees.
    shown: Value,
    answer: watch::Sender<Option<Answer>>,
    created: SystemTime,
    /// The resumed call took the answer.
    used: bool,
}

/// The pending approvals.
#[derive(Default)]
pub struct Approvals {
    entries: Mutex<HashMap<String, Entry>>,
    /// Told when an approval is opened or answered.
    feed: Feed,
}

/// A call that waits for the user, as the queue keeps it.
pub struct Pending<'a> {
    pub caller: &'a str,
    pub app: &'a str,
    pub tool: &'a str,
    pub args: &'a Value,
}

/// The call an approval was opened for, to resume it.
pub struct Resumed {
    pub app: String,
    pub tool: String,
    pub args: Value,
    /// The user's answer when there is one: the approval is then used by this resume alone
    /// (a second resume at the same moment is refused, whatever the answer was — a grant it
    /// left included).
    pub answer: Option<Answer>,
}

fn new_id() -> String {
    let mut bytes = [0u8; 12];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("ap-{hex}")
}

/// Why an approval cannot be answered or used.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("the queue is unavailable")]
    Unavailable,
    #[error("no approval {0:?} is waiting (`aai-gateway approvals` lists them)")]
    NotWaiting(String),
    #[error("approval {0} was already answered")]
    AlreadyAnswered(String),
    #[error("{key:?} is not an answer to {id}; choose one of {}", offered.join(", "))]
    NotOffered {
        id: String,
        key: String,
        offered: Vec<String>,
    },
    #[error("no approval {0:?} for this client")]
    NotYours(String),
    #[error("approval {0} was already used; the call ran once and will not run again")]
    Used(String),
    #[error("approval {0} was denied by the user; the call did not run and will not")]
    Denied(String),
}

impl Approvals {
    pub fn new(feed: Feed) -> Self {
        Self {
            feed,
            ..Self::default()
        }
    }

    /// Opens an approval for `question` about `call`; returns its id and where the answer lands.
    pub fn open(
        &self,
        question: &Question,
        call: &Pending<'_>,
    ) -> (String, watch::Receiver<Option<Answer>>) {
        let id = new_id();
        let (answer, receiver) = watch::channel(None);
        let choices: Vec<Value> = question
            .choices()
            .into_iter()
            .map(|(answer, label)| json!({"answer": answer.key(), "label": label}))
            .collect();
        // The question whole: the arguments are never cut, and their size is given so a
        // long one is seen to be long.
        let shown = json!({
            "id": id,
            "client": question.caller,
            "app": call.app,
            "tool": call.tool,
            "message": question.message(),
            "heading": question.heading(),
            "args": question.args,
            "args_chars": question.args.chars().count(),
            "args_bytes": question.args.len(),
            "choices": choices,
        });
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|_, e| e.created.elapsed().map_or(true, |age| age < KEEP));
            entries.insert(
                id.clone(),
                Entry {
                    caller: call.caller.to_owned(),
                    app: call.app.to_owned(),
                    tool: call.tool.to_owned(),
                    args: call.args.clone(),
                    shown,
                    answer,
                    created: SystemTime::now(),
                    used: false,
                },
            );
        }
        self.feed.send(Event::Approvals);
        (id, receiver)
    }

    /// The approvals waiting for an answer, oldest first.
    pub fn list(&self) -> Vec<Value> {
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        let mut list: Vec<(&SystemTime, Value)> = entries
            .values()
            .filter(|e| e.answer.borrow().is_none())
            .map(|e| (&e.created, e.shown.clone()))
            .collect();
        list.sort_by_key(|(created, _)| **created);
        list.into_iter().map(|(_, shown)| shown).collect()
    }

    /// Records the user's answer (`deny`, `allow_once`, … as the choices name them).
    ///
    /// # Errors
    /// No such approval, already answered, or an answer it does not offer.
    pub fn answer(&self, id: &str, key: &str) -> Result<(), QueueError> {
        let mut entries = self.entries.lock().map_err(|_| QueueError::Unavailable)?;
        let entry = entries
            .get_mut(id)
            .ok_or_else(|| QueueError::NotWaiting(id.to_owned()))?;
        if entry.answer.borrow().is_some() {
            return Err(QueueError::AlreadyAnswered(id.to_owned()));
        }
        let offered = entry.shown["choices"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["answer"] == key));
        let answer = ALL
            .iter()
            .copied()
            .find(|a| a.key() == key)
            .filter(|_| offered)
            .ok_or_else(|| QueueError::NotOffered {
                id: id.to_owned(),
                key: key.to_owned(),
                offered: entry.shown["choices"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .filter_map(|c| c["answer"].as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            })?;
        entry.answer.send_replace(Some(answer));
        drop(entries);
        self.feed.send(Event::Approvals);
        Ok(())
    }

    /// The call approval `id` was opened for, when `caller` opened it and its answer was not
    /// used yet.
    ///
    /// # Errors
    /// Unknown, foreign or used approvals.
    pub fn call_of(&self, id: &str, caller: &str) -> Result<Resumed, QueueError> {
        let mut entries = self.entries.lock().map_err(|_| QueueError::Unavailable)?;
        let entry = entries
            .get_mut(id)
            .filter(|e| e.caller == caller)
            .ok_or_else(|| QueueError::NotYours(id.to_owned()))?;
        let answer = *entry.answer.borrow();
        if entry.used {
            return Err(if answer == Some(Answer::Deny) {
                QueueError::Denied(id.to_owned())
            } else {
                QueueError::Used(id.to_owned())
            });
        }
        // Answered: this resume takes it, under the same lock that checked it.
        entry.used = answer.is_some();
        Ok(Resumed {
            app: entry.app.clone(),
            tool: entry.tool.clone(),
            args: entry.args.clone(),
            answer,
        })
    }

    fn receiver(&self, id: &str) -> Option<watch::Receiver<Option<Answer>>> {
        self.entries
            .lock()
            .ok()?
            .get(id)
            .map(|e| e.answer.subscribe())
    }

    /// Takes the answer of `id` for the one call it allows.
    fn take(&self, id: &str) -> Result<Answer, Unanswered> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| Unanswered::CannotAsk("the approval queue is unavailable".into()))?;
        let entry = entries
            .get_mut(id)
            .ok_or_else(|| Unanswered::Refused(format!("approval {id} is unknown")))?;
        if entry.used {
            return Err(Unanswered::Refused(
                if *entry.answer.borrow() == Some(Answer::Deny) {
                    format!(
                        "approval {id} was denied by the user; the call did not run and will not"
                    )
                } else {
                    format!(
                        "approval {id} was already used; the call ran once and will not run again"
                    )
                },
            ));
        }
        let answer = (*entry.answer.borrow()).ok_or_else(|| Unanswered::Queued(id.to_owned()))?;
        entry.used = true;
        Ok(answer)
    }
}

const ALL: [Answer; 6] = [
    Answer::Deny,
    Answer::AllowOnce,
    Answer::AllowSession,
    Answer::AlwaysPrefix,
    Answer::AlwaysTool,
    Answer::AlwaysApp,
];

/// Asks through the queue: opens an approval (or resumes one) and waits for the answer up
/// to `wait`; after that the call returns pending with the approval's id.
pub struct QueueAsker<'a> {
    pub approvals: &'a Approvals,
    pub call: Pending<'a>,
    /// The approval a resumed call carries.
    pub resume: Option<String>,
    /// The answer the resume took already ([`Approvals::call_of`]).
    pub claimed: Option<Answer>,
    pub wait: Duration,
    /// The emergency stop's token: a call waiting here when the stop is pressed stops waiting.
    pub stop: tokio_util::sync::CancellationToken,
}

impl Asker for QueueAsker<'_> {
    fn ask<'b>(
        &'b self,
        question: &'b Question,
    ) -> aai_executor::BoxFuture<'b, Result<Answer, Unanswered>> {
        Box::pin(async move {
            if let Some(answer) = self.claimed {
                return Ok(answer);
            }
            let (id, mut receiver) = match &self.resume {
                Some(id) => {
                    let receiver = self
                        .approvals
                        .receiver(id)
                        .ok_or_else(|| Unanswered::Refused(format!("approval {id} is unknown")))?;
                    (id.clone(), receiver)
                }
                None => {
                    let (id, receiver) = self.approvals.open(question, &self.call);
                    tracing::info!(approval = %id, app = %self.call.app, tool = %self.call.tool, client = %self.call.caller, "waiting for the user's approval");
                    // No login link or code: a notification is readable by the agent's own
                    // screen and notification tools, and a link would let it answer itself.
                    let note = format!(
                        "{} asks to run {}:{}. Answer in the dashboard (`aai-gateway dashboard`) or with `aai-gateway approvals` (id {id}).",
                        visible(self.call.caller),
                        visible(self.call.app),
                        visible(self.call.tool)
                    );
                    tokio::spawn(async move {
                        let _ =
                            aai_executor::notify::notify("Approval needed", &note, "normal").await;
                    });
                    (id, receiver)
                }
            };
            tokio::select! {
                _ = tokio::time::timeout(self.wait, receiver.wait_for(Option::is_some)) => {}
                () = self.stop.cancelled() => {
                    return Err(Unanswered::Refused(
                        "the emergency stop was pressed while it waited for approval".into(),
                    ));
                }
            }
            self.approvals.take(&id)
        })
    }

    fn via(&self) -> &'static str {
        "approval queue"
    }
}
