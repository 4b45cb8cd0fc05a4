//! What came back from a REST call: the body read within its cap, binary or text, parsed
//! for the agent; and, when nothing came back, why, in words that name the cause.

use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use serde_json::{Value, json};

use super::scrub;
use crate::json_text;

pub(super) async fn read_capped(
    mut response: reqwest::Response,
    max: usize,
    what: &str,
) -> Result<Vec<u8>, AaiError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        AaiError::new(
            ErrorKind::ApiRequestFailed,
            format!("{what}: the response broke off: {e}"),
        )
    })? {
        if body.len() + chunk.len() > max {
            return Err(AaiError::new(
                ErrorKind::ApiRequestFailed,
                format!("{what}: the response is larger than {max} bytes; ask for less (a smaller page or limit)"),
            )
            .with_detail(json!({"max_response_bytes": max})));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The key of a binary result: `{"aai_binary": {"mime", "bytes", "base64"}}`; the gateway
/// turns it into MCP image or embedded-resource content.
pub const BINARY_KEY: &str = "aai_binary";

/// Whether a response body is binary: its declared type is not text-like, or it has no type
/// and is not UTF-8.
pub(super) fn is_binary(content_type: &str, body: &[u8]) -> bool {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if mime.is_empty() {
        return std::str::from_utf8(body).is_err();
    }
    let texty = mime.starts_with("text/")
        || mime.contains("json")
        || mime.contains("xml")
        || mime.contains("javascript")
        || mime.contains("yaml")
        || mime == "application/x-www-form-urlencoded"
        || mime == "application/graphql";
    !texty
}

/// `Retry-After` as a wait: seconds, or an HTTP date.
pub(super) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

/// Why a request got no answer, in words that name the cause: the name does not resolve,
/// nothing listens, no answer in time, or which TLS check failed.
pub(super) fn transport_error(
    error: &reqwest::Error,
    what: &str,
    timeout: Duration,
    secrets: &[&str],
) -> AaiError {
    if error.is_timeout() {
        return AaiError::new(
            ErrorKind::Timeout,
            format!("{what}: no answer within {} ms", timeout.as_millis()),
        )
        .with_detail(json!({"reason": "timeout"}));
    }
    if error.is_redirect() {
        // The innermost cause says why (another origin, too many): reqwest's own text does not.
        let mut why = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            why = inner.to_string();
            source = inner.source();
        }
        return AaiError::new(
            ErrorKind::ApiRequestFailed,
            format!("{what}: {}", scrub(&why, secrets)),
        )
        .with_detail(json!({"reason": "redirect_refused"}));
    }
    let host = error
        .url()
        .and_then(|u| {
            // `host()` keeps an IPv6 address in brackets, so `host:port` stays a URL authority.
            u.host().map(|h| match u.port() {
                Some(port) => format!("{h}:{port}"),
                None => h.to_string(),
            })
        })
        .unwrap_or_else(|| "the server".to_owned());
    let (reason, cause) = match cause_of(error) {
        Cause::Dns => (
            "dns",
            format!(
                "the name {host} does not resolve (DNS); check the host in base_url and the network"
            ),
        ),
        Cause::Refused => (
            "refused",
            format!(
                "{host} refused the connection: nothing listens there; is the service running and the port right?"
            ),
        ),
        Cause::TlsUnknownIssuer => (
            "tls_unknown_issuer",
            format!(
                "{host}'s TLS certificate is issued by a certificate authority the gateway does not trust; if it is yours (a company proxy, a local CA), add its PEM file to `web.extra_ca_certs` in config.json"
            ),
        ),
        Cause::TlsExpired => (
            "tls_expired",
            format!(
                "{host}'s TLS certificate has expired (or is not valid yet); the site must renew it"
            ),
        ),
        Cause::TlsName => (
            "tls_name_mismatch",
            format!("{host}'s TLS certificate is for another name; check the host in base_url"),
        ),
        Cause::Tls(text) => (
            "tls",
            format!("the TLS handshake with {host} failed: {text}"),
        ),
        Cause::Other => (
            "network",
            format!("the request failed before an answer came: {}", error),
        ),
    };
    // reqwest errors can carry the URL, and a query credential with it.
    let cause = scrub(&cause, secrets);
    AaiError::new(ErrorKind::ApiRequestFailed, format!("{what}: {cause}"))
        .with_detail(json!({"reason": reason, "host": host}))
}

/// What a failed connection came down to.
enum Cause {
    Dns,
    Refused,
    TlsUnknownIssuer,
    TlsExpired,
    TlsName,
    Tls(String),
    Other,
}

fn cause_of(error: &reqwest::Error) -> Cause {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut text = String::new();
    while let Some(current) = source {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return match tls {
                rustls::Error::InvalidCertificate(cert) => match cert {
                    rustls::CertificateError::UnknownIssuer
                    | rustls::CertificateError::BadSignature => Cause::TlsUnknownIssuer,
                    rustls::CertificateError::Expired
                    | rustls::CertificateError::ExpiredContext { .. }
                    | rustls::CertificateError::NotValidYet
                    | rustls::CertificateError::NotValidYetContext { .. } => Cause::TlsExpired,
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. } => Cause::TlsName,
                    other => Cause::Tls(format!("{other:?}")),
                },
                other => Cause::Tls(other.to_string()),
            };
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return Cause::Refused;
        }
        text.push_str(&current.to_string().to_ascii_lowercase());
        text.push(' ');
        source = current.source();
    }
    if text.contains("dns error")
        || text.contains("failed to lookup address")
        || text.contains("name or service not known")
    {
        Cause::Dns
    } else if text.contains("connection refused") {
        Cause::Refused
    } else if text.contains("invalid peer certificate") || text.contains("unknownissuer") {
        Cause::TlsUnknownIssuer
    } else {
        Cause::Other
    }
}

pub(super) fn parse_output(
    text: &str,
    parser: Option<&str>,
    content_type: &str,
    what: &str,
) -> Result<Value, AaiError> {
    match parser {
        Some("text") => Ok(Value::String(text.to_owned())),
        Some("json") => serde_json::from_str(text).map_err(|e| {
            AaiError::new(
                ErrorKind::ApiRequestFailed,
                format!("{what}: the response is not JSON ({e}), but the tool's output_parser is \"json\""),
            )
        }),
        _ if text.trim().is_empty() => Ok(json!({"ok": true})),
        _ if content_type.contains("json") => {
            Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())))
        }
        _ => Ok(json_text(text).unwrap_or_else(|| Value::String(text.to_owned()))),
    }
}
