//! Who asks the user for consent, by what the client can do: a client with elicitation is
//! asked through it (with progress while the user decides), a 2026-07-28 client through
//! `input_required` rounds with sealed state.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ProtocolVersion, RequestStateCodec, SealOptions};
use rmcp::service::{Peer, RequestContext, ServiceError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use aai_engine::consent::{Answer, Asker, Question, Unanswered, consent_form, read_elicit_result};

/// Asks the user through MCP elicitation (a server-to-client request, protocol ≤ 2025-11-25).
pub(super) struct PeerAsker {
    peer: Peer<RoleServer>,
    timeout: std::time::Duration,
    /// The request's progress token: while the user decides, progress notifications keep
    /// the client from timing out the call (clients commonly give up after 60 s).
    progress: Option<rmcp::model::ProgressToken>,
    /// Whether the client takes URL-mode elicitation (2025-11-25).
    url: bool,
}

/// How often a waiting call reports progress.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

impl PeerAsker {
    /// An asker when the client declared form elicitation and the session can send requests.
    pub(super) fn for_request(
        context: &RequestContext<RoleServer>,
        timeout: std::time::Duration,
    ) -> Option<Self> {
        let legacy = context
            .protocol_version()
            .is_none_or(|v| v < ProtocolVersion::V_2026_07_28);
        let form = context
            .peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Form);
        let url = context
            .peer
            .supported_elicitation_modes()
            .contains(&rmcp::service::ElicitationMode::Url);
        (legacy && form).then(|| Self {
            peer: context.peer.clone(),
            timeout,
            progress: context.meta.get_progress_token(),
            url,
        })
    }
}

impl Asker for PeerAsker {
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> aai_executor::BoxFuture<'a, Result<Answer, Unanswered>> {
        Box::pin(async move {
            let params: ElicitRequestParams = serde_json::from_value(consent_form(question))
                .map_err(|e| {
                    Unanswered::CannotAsk(format!("cannot build the consent request: {e}"))
                })?;
            let secs = self.timeout.as_secs();
            let ask = self
                .peer
                .create_elicitation_with_timeout(params, Some(self.timeout));
            let ticker = async {
                let Some(token) = self.progress.clone() else {
                    return std::future::pending().await;
                };
                let mut waited = 0u64;
                loop {
                    tokio::time::sleep(PROGRESS_EVERY).await;
                    waited += PROGRESS_EVERY.as_secs();
                    let mut note =
                        rmcp::model::ProgressNotificationParam::new(token.clone(), waited as f64);
                    note.message = Some(format!(
                        "waiting for the user to approve ({waited} s of {secs} s)"
                    ));
                    let _ = self.peer.notify_progress(note).await;
                }
            };
            let answer = tokio::select! {
                answer = ask => answer,
                never = ticker => never,
            };
            match answer {
                Ok(result) => {
                    read_elicit_result(question, &serde_json::to_value(&result).unwrap_or_default())
                }
                Err(ServiceError::Timeout { .. }) => {
                    Err(Unanswered::Declined(format!("no answer within {secs} s")))
                }
                Err(error) => Err(Unanswered::CannotAsk(format!(
                    "the client could not ask the user: {error}"
                ))),
            }
        })
    }

    fn elicitor(&self) -> Option<&dyn aai_executor::Elicit> {
        Some(self)
    }

    fn open_url<'a>(&'a self, message: &'a str, url: &'a str) -> aai_executor::BoxFuture<'a, bool> {
        Box::pin(async move {
            if !self.url {
                return false;
            }
            let params = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: message.to_owned(),
                url: url.to_owned(),
                elicitation_id: format!("aai-{:x}", Sha256::digest(url.as_bytes())),
            };
            let answer = self
                .peer
                .create_elicitation_with_timeout(params, Some(self.timeout))
                .await;
            match answer {
                Ok(result) => serde_json::to_value(&result)
                    .ok()
                    .and_then(|v| {
                        v.get("action")
                            .and_then(Value::as_str)
                            .map(|a| a == "accept")
                    })
                    .unwrap_or(false),
                Err(error) => {
                    tracing::info!(%error, "the client did not open the sign-in page");
                    false
                }
            }
        })
    }
}

/// What a sealed 2026-07-28 consent round carries: which call it belongs to, and a one-time
/// nonce so the same state cannot be answered twice.
#[derive(serde::Serialize, serde::Deserialize)]
struct SealedConsent {
    binding: String,
    nonce: String,
}

/// Keys and spent nonces for 2026-07-28 consent rounds.
pub struct ConsentRounds {
    codec: RequestStateCodec,
    /// Spent nonces and when they expire.
    spent: Mutex<HashMap<String, Instant>>,
}

impl ConsentRounds {
    /// The key of this process, made at first use: the daemon builds a server per HTTP
    /// session — per request in the stateless era — and an answer must open in whichever one
    /// the retry reaches. States do not survive a restart, on purpose.
    pub fn of_this_process() -> &'static Self {
        static ROUNDS: std::sync::OnceLock<ConsentRounds> = std::sync::OnceLock::new();
        ROUNDS.get_or_init(Self::new)
    }

    /// Rounds sealed with a fresh random key: states do not survive a restart, on purpose.
    pub fn new() -> Self {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            // No OS randomness: fall back to a key nobody outside this process can know.
            let fallback = format!(
                "{:?}{:?}{}",
                Instant::now(),
                std::time::SystemTime::now(),
                std::process::id()
            );
            key.copy_from_slice(&Sha256::digest(fallback.as_bytes()));
        }
        Self {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            spent: Mutex::new(HashMap::new()),
        }
    }

    /// Marks a nonce spent; false when it already was (a replay).
    fn spend(&self, nonce: &str, ttl: std::time::Duration) -> bool {
        let mut spent = self
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        spent.retain(|_, expiry| *expiry > now);
        spent.insert(nonce.to_owned(), now + ttl * 2).is_none()
    }
}

impl Default for ConsentRounds {
    fn default() -> Self {
        Self::new()
    }
}

/// Asks a 2026-07-28 client: the first request gets an `InputRequiredResult` with the consent
/// elicitation and a sealed `request_state`; the retry brings the answer and that state back.
pub(super) struct StatelessAsker<'a> {
    pub(super) rounds: &'a ConsentRounds,
    /// Binds the state to the caller, the tool and its exact arguments.
    pub(super) binding: String,
    pub(super) state: Option<String>,
    pub(super) responses: Option<rmcp::model::InputResponses>,
    pub(super) timeout: std::time::Duration,
}

impl StatelessAsker<'_> {
    fn answer(&self, question: &Question, state: &str) -> Result<Answer, Unanswered> {
        let sealed: SealedConsent = self.rounds.codec.open_json(state).map_err(|e| {
            Unanswered::Refused(format!(
                "the approval state was altered or has expired ({e}); call again to be asked anew"
            ))
        })?;
        if sealed.binding != self.binding {
            return Err(Unanswered::Refused(
                "the approval state belongs to another call".to_owned(),
            ));
        }
        if !self.rounds.spend(&sealed.nonce, self.timeout) {
            return Err(Unanswered::Refused(
                "the approval state was already used; call again to be asked anew".to_owned(),
            ));
        }
        let response = self
            .responses
            .as_ref()
            .and_then(|r| r.get(CONSENT_KEY))
            .ok_or_else(|| {
                Unanswered::Refused("the retry carries no answer to the consent request".to_owned())
            })?;
        read_elicit_result(question, response)
    }
}

/// The key of the consent request in `inputRequests` / `inputResponses`.
const CONSENT_KEY: &str = "consent";

impl Asker for StatelessAsker<'_> {
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> aai_executor::BoxFuture<'a, Result<Answer, Unanswered>> {
        Box::pin(async move {
            if let Some(state) = &self.state {
                return self.answer(question, state);
            }
            let mut nonce = [0u8; 16];
            let _ = getrandom::fill(&mut nonce);
            let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
            let sealed = SealedConsent {
                binding: self.binding.clone(),
                nonce,
            };
            let state = self
                .rounds
                .codec
                .seal_json_with(&sealed, &SealOptions::new().ttl(self.timeout))
                .map_err(|e| {
                    Unanswered::CannotAsk(format!("cannot seal the approval state: {e}"))
                })?;
            let request = json!({"method": "elicitation/create", "params": consent_form(question)});
            let input_required = json!({
                "resultType": "input_required",
                "inputRequests": {CONSENT_KEY: request},
                "requestState": state,
            });
            Err(Unanswered::Later(input_required))
        })
    }
}

/// What binds a consent round to one call: caller, tool name and exact arguments.
pub(super) fn binding(caller: &str, name: &str, args: &Value) -> String {
    let digest = Sha256::digest(format!("{caller}\n{name}\n{args}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A tool's own question (an MCP server's elicitation), put to the user as the client's form.
impl aai_executor::Elicit for PeerAsker {
    fn elicit<'a>(
        &'a self,
        message: &'a str,
        requested_schema: &'a Value,
    ) -> aai_executor::BoxFuture<'a, aai_executor::Elicited> {
        Box::pin(async move {
            let form = serde_json::json!({
                "mode": "form",
                "message": message,
                "requestedSchema": requested_schema,
            });
            let Ok(params) = serde_json::from_value::<ElicitRequestParams>(form) else {
                return aai_executor::Elicited::Cancelled;
            };
            let answer = self
                .peer
                .create_elicitation_with_timeout(params, Some(self.timeout))
                .await;
            let answer = answer.ok().and_then(|r| serde_json::to_value(&r).ok());
            match answer
                .as_ref()
                .and_then(|a| a.get("action"))
                .and_then(Value::as_str)
            {
                Some("accept") => aai_executor::Elicited::Accepted(
                    answer
                        .as_ref()
                        .and_then(|a| a.get("content"))
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({})),
                ),
                Some("decline") => aai_executor::Elicited::Declined,
                _ => aai_executor::Elicited::Cancelled,
            }
        })
    }
}
