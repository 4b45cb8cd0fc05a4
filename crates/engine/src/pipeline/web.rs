//! The web sign-in steps of the gate: before a fetched app's credential is sent, and before
//! a first OAuth sign-in with a domain, the user confirms; and TLS failures explained.

use aai_descriptor::{AaiError, ErrorKind, Risk};
use serde_json::{Value, json};

use super::Gateway;
use super::outcome::Halt;
use crate::catalog::snapshot::App;
use crate::consent::{Answer, Asker, Question, Unanswered};
use crate::gate::shell_quote;
use aai_audit::Grant;

impl Gateway {
    /// Before a web app's first OAuth authorization with a domain, the user confirms the
    /// domain, its TLS certificate's issuer and validity, the app and the scopes. The answer is
    /// remembered for the client as a grant on `oauth:<host>`.
    pub(super) async fn confirm_authorization(
        &self,
        caller: &str,
        app: &App,
        asker: Option<&dyn Asker>,
    ) -> Result<Option<(String, String)>, Halt> {
        let once = self.confirm_env_binding(caller, app, asker).await?;
        let descriptor = app.descriptor()?;
        let Some(auth) = descriptor
            .credentialed(app.platform)
            .and_then(|section| section.auth)
            .filter(|auth| auth.kind == "oauth2")
        else {
            return Ok(once);
        };
        let stored = self.web.auth.store.get(app.id()).unwrap_or_default();
        if stored.oauth.is_some() {
            return Ok(once);
        }
        let auth_url = auth
            .fields
            .get("auth_url")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let host = crate::web::host_key(auth_url).unwrap_or_else(|| auth_url.to_owned());
        let subject = format!("oauth:{host}");
        if self.gate.granted(caller, &subject, "authorize")? {
            return Ok(once);
        }
        let identity = self.web.server_identity(auth_url).await.map_err(|reason| {
            AaiError::new(
                ErrorKind::AuthConfigInvalid,
                format!(
                    "{}: cannot check who runs its sign-in page before authorizing: {reason}",
                    app.id()
                ),
            )
        })?;
        let scopes = Some(crate::web::auth::scopes(&auth))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "none named".into());
        let mut question = Question::new(
            caller,
            &subject,
            app.name(),
            "authorize",
            Risk::High,
            format!(
                "sign in to {} at {} (TLS certificate issued by {}, valid from {} until {}), scopes: {scopes}",
                app.name(),
                identity.host,
                identity.issuer,
                identity.not_before,
                identity.not_after
            ),
        );
        // A binding, not a tool: confirmed for this sign-in, or for good.
        question.always_label = Some(format!(
            "Always trust {} for signing in to {}",
            identity.host,
            app.name()
        ));
        let answer = match asker {
            Some(asker) => asker.ask(&question).await,
            None => Err(Unanswered::CannotAsk(String::new())),
        };
        match answer {
            Ok(Answer::Deny)
            | Err(
                Unanswered::Declined(_)
                | Unanswered::CannotAsk(_)
                | Unanswered::Refused(_)
                | Unanswered::Queued(_),
            ) => {
                let command = format!(
                    "aai-gateway consent grant {} authorize --client {}",
                    shell_quote(&subject),
                    shell_quote(caller)
                );
                Err(Halt::Refused(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "Signing in to {} at {} needs the user's confirmation first ({}). Ask the user to check it and run `{command}`, then call again.",
                        app.name(), identity.host, question.args
                    ),
                )
                .with_detail(json!({"reason": "domain_confirmation", "host": identity.host, "issuer": identity.issuer, "not_after": identity.not_after, "command": command}))))
            }
            Ok(Answer::AlwaysTool) => {
                let via = asker.map_or("cli", |a| a.via());
                self.gate
                    .remember(&Grant::always(caller, &subject, Some("authorize"), via))?;
                Ok(once)
            }
            Ok(_) => Ok(once),
            // The client asks and calls again with the answer.
            Err(Unanswered::Later(input_required)) => Err(Halt::NeedsInput(input_required)),
        }
    }

    /// A descriptor fetched from the network that names an environment variable gets its value
    /// only after the user approved that exact binding (the app, the variable and the origin
    /// it goes to) once; the approval is remembered for the client as a grant on
    /// `env:<VAR>` for that origin.
    /// Returns the binding when it was allowed for this call only, to withdraw afterwards.
    async fn confirm_env_binding(
        &self,
        caller: &str,
        app: &App,
        asker: Option<&dyn Asker>,
    ) -> Result<Option<(String, String)>, Halt> {
        let descriptor = app.descriptor()?;
        let Some(section) = descriptor.credentialed(app.platform) else {
            return Ok(None);
        };
        let Some((var, origin)) = crate::web::auth::GatewayAuth::env_binding(&descriptor, &section)
        else {
            return Ok(None);
        };
        let subject = format!("env:{var}");
        let binding = format!("{}@{origin}", app.id());
        // A binding the user made at the app's store install holds for every client.
        if !self.gate.granted(caller, &subject, &binding)?
            && !self
                .gate
                .granted(aai_audit::EVERY_CLIENT, &subject, &binding)?
        {
            let mut question = Question::new(
                caller,
                &subject,
                app.name(),
                "send",
                Risk::High,
                format!(
                    "{} ({}), fetched from the network, asks to send the value of the environment variable {var} to {origin}",
                    app.name(),
                    app.id()
                ),
            );
            question.always_label = Some(format!("Always allow sending {var} to {origin}"));
            let answer = match asker {
                Some(asker) => asker.ask(&question).await,
                None => Err(Unanswered::CannotAsk(String::new())),
            };
            match answer {
                Ok(Answer::AllowOnce) => {
                    self.web.auth.approve_env(&descriptor, &var, &origin);
                    return Ok(Some((var, origin)));
                }
                Ok(Answer::AlwaysTool) => {
                    let via = asker.map_or("cli", |a| a.via());
                    self.gate
                        .remember(&Grant::always(caller, &subject, Some(&binding), via))?;
                }
                Err(Unanswered::Later(input_required)) => {
                    return Err(Halt::NeedsInput(input_required));
                }
                _ => {
                    let command = format!(
                        "aai-gateway consent grant {} {} --client {}",
                        shell_quote(&subject),
                        shell_quote(&binding),
                        shell_quote(caller)
                    );
                    return Err(Halt::Refused(AaiError::new(
                        ErrorKind::PermissionDenied,
                        format!(
                            "{} was fetched from the network and wants the environment variable {var} sent to {origin}; the user did not approve it, so nothing was sent. Only the user can allow this binding (`{command}`).",
                            app.id()
                        ),
                    )
                    .with_detail(json!({"reason": "credential_binding", "env_var": var, "origin": origin}))));
                }
            }
        }
        self.web.auth.approve_env(&descriptor, &var, &origin);
        Ok(None)
    }
}

/// Says which TLS check failed, from the certificate the server presented (verifiers report
/// some failures as an unknown issuer), naming the issuer the user would have to trust.
pub(super) fn explain_tls(error: &mut AaiError, seen: &crate::web::Presented) {
    let host = error
        .detail
        .as_ref()
        .and_then(|d| d["host"].as_str())
        .unwrap_or("the server")
        .to_owned();
    let what = error
        .message
        .split(": ")
        .next()
        .unwrap_or_default()
        .to_owned();
    let (reason, cause) = if seen.expired {
        (
            "tls_expired",
            format!(
                "{host}'s TLS certificate has expired (or is not valid yet); the site must renew it"
            ),
        )
    } else if !seen.names_host {
        (
            "tls_name_mismatch",
            format!("{host}'s TLS certificate is for another name; check the host in base_url"),
        )
    } else {
        (
            "tls_unknown_issuer",
            format!(
                "{host}'s TLS certificate is issued by \"{}\", a certificate authority the gateway does not trust; if it is yours (a company proxy, a local CA), add its PEM file to `web.extra_ca_certs` in config.json",
                seen.issuer
            ),
        )
    };
    error.message = format!("{what}: {cause}");
    if let Some(Value::Object(detail)) = &mut error.detail {
        detail.insert("reason".into(), json!(reason));
        detail.insert("issuer".into(), json!(seen.issuer));
    }
}

/// The sign-in page an AUTH_REQUIRED error sends the user to.
pub(super) fn authorization_url(error: &AaiError) -> Option<String> {
    (error.kind == ErrorKind::AuthRequired)
        .then(|| {
            error
                .detail
                .as_ref()?
                .get("authorization_url")?
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}
