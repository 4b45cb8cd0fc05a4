//! What a web call authenticates with: a credential and where it goes (a header, a query
//! parameter, basic auth), and the origin it belongs to.

use super::*;

/// A credential to put on a request.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    Header { name: String, value: String },
    Query { name: String, value: String },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Header { name, .. } => write!(f, "Header({name}: [redacted])"),
            Self::Query { name, .. } => write!(f, "Query({name}=[redacted])"),
        }
    }
}

impl Credential {
    /// The secret part, to scrub from anything shown.
    pub fn secret(&self) -> &str {
        match self {
            Self::Header { value, .. } | Self::Query { value, .. } => value,
        }
    }
}

/// Where web calls get their credentials.
pub trait Auth: Send + Sync {
    /// The credential for a call of `descriptor`'s web tools (`None`: the API takes none).
    ///
    /// # Errors
    /// AUTH_CONFIG_INVALID (nothing configured), AUTH_REQUIRED (the user must authorize).
    fn credential<'a>(
        &'a self,
        descriptor: &'a aai_descriptor::Descriptor,
        section: &'a WebSection,
    ) -> BoxFuture<'a, Result<Option<Credential>, AaiError>>;

    /// A new credential after the API answered 401 (an OAuth refresh); `None` when there is
    /// no way to get one.
    ///
    /// # Errors
    /// As [`Auth::credential`].
    fn refresh<'a>(
        &'a self,
        descriptor: &'a aai_descriptor::Descriptor,
        section: &'a WebSection,
    ) -> BoxFuture<'a, Result<Option<Credential>, AaiError>>;

    /// Whether `descriptor` has what a call needs without the user signing in first (an
    /// OAuth app's tokens); listing a server's tools must not send the user to a sign-in page.
    fn signed_in(&self, _descriptor: &aai_descriptor::Descriptor, _section: &WebSection) -> bool {
        true
    }

    /// Where the credential last given for `descriptor` came from, and how to fix that
    /// source (for error messages; never the secret).
    fn source(&self, _descriptor: &aai_descriptor::Descriptor) -> Option<(String, String)> {
        None
    }
}

/// No credential store: apps whose API needs no credentials work; the gateway plugs in its
/// own [`Auth`] for the rest.
pub struct NoCredentials;

impl Auth for NoCredentials {
    fn credential<'a>(
        &'a self,
        descriptor: &'a aai_descriptor::Descriptor,
        section: &'a WebSection,
    ) -> BoxFuture<'a, Result<Option<Credential>, AaiError>> {
        Box::pin(async move {
            match &section.auth {
                Some(auth) if auth.kind != "none" => Err(AaiError::new(
                    ErrorKind::AuthConfigInvalid,
                    format!(
                        "{} needs credentials, which this executor has no store for",
                        descriptor.app_id
                    ),
                )),
                _ => Ok(None),
            }
        })
    }

    fn refresh<'a>(
        &'a self,
        _descriptor: &'a aai_descriptor::Descriptor,
        _section: &'a WebSection,
    ) -> BoxFuture<'a, Result<Option<Credential>, AaiError>> {
        Box::pin(async { Ok(None) })
    }
}

/// How a secret is put on requests for `auth`: `api_key` by `key_placement`/`key_name`
/// (default header `X-API-Key`), `bearer` and `oauth2` as `Authorization: <prefix> <token>`
/// (`token_placement: query` puts it in `key_name`, default `access_token`).
pub fn credential_for(auth: &aai_descriptor::WebAuth, secret: String) -> Credential {
    let field = |name: &str| auth.fields.get(name).and_then(Value::as_str);
    match auth.kind.as_str() {
        "api_key" => {
            let name = field("key_name").unwrap_or("X-API-Key").to_owned();
            if field("key_placement") == Some("query") {
                Credential::Query {
                    name,
                    value: secret,
                }
            } else {
                Credential::Header {
                    name,
                    value: secret,
                }
            }
        }
        _ => {
            if field("token_placement") == Some("query") {
                let name = field("key_name").unwrap_or("access_token").to_owned();
                Credential::Query {
                    name,
                    value: secret,
                }
            } else {
                let prefix = field("token_prefix").unwrap_or("Bearer");
                let value = if prefix.is_empty() {
                    secret
                } else {
                    format!("{prefix} {secret}")
                };
                Credential::Header {
                    name: "Authorization".into(),
                    value,
                }
            }
        }
    }
}

/// `scheme://host:port` of a URL (the port made explicit), or `None` when it does not parse.
pub fn origin_of(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let port = parsed.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", parsed.scheme()))
}
