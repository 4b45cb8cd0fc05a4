//! The TLS certificate a web app's server presents: shown to the user before an
//! authorization, and read to explain a failed connection (nothing is trusted or sent).

use std::time::Duration;

use aai_executor::rest::is_loopback;

use super::Web;

/// What the user is shown about a server before authorizing with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdentity {
    pub host: String,
    pub issuer: String,
    pub not_before: String,
    pub not_after: String,
}

/// Why a server's certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{url}: {source}")]
    Url {
        url: String,
        source: url::ParseError,
    },
    #[error("{0} is not https, so it has no certificate to show")]
    NotHttps(String),
    #[error(transparent)]
    Https(#[from] aai_executor::HttpsSetupError),
    #[error("{host}: {source}")]
    Unreachable {
        host: String,
        source: reqwest::Error,
    },
    #[error("{0} presented no certificate")]
    NoCertificate(String),
    #[error("{host}: unreadable certificate: {reason}")]
    Unreadable { host: String, reason: String },
}

impl Web {
    /// The TLS certificate `url`'s server presents: who issued it and how long it is valid.
    ///
    /// # Errors
    /// Why it could not be had (no TLS, unreachable, unreadable certificate).
    pub async fn server_identity(&self, url: &str) -> Result<ServerIdentity, IdentityError> {
        let parsed = reqwest::Url::parse(url).map_err(|source| IdentityError::Url {
            url: url.to_owned(),
            source,
        })?;
        let host = parsed.host_str().unwrap_or_default().to_owned();
        let host = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        };
        if parsed.scheme() != "https" {
            let local = parsed.scheme() == "http"
                && self.config.allow_http_loopback
                && parsed.host_str().is_some_and(is_loopback);
            if local {
                return Ok(ServerIdentity {
                    host,
                    issuer:
                        "no one: plain http on this computer, allowed by web.allow_http_loopback"
                            .into(),
                    not_before: "-".into(),
                    not_after: "-".into(),
                });
            }
            return Err(IdentityError::NotHttps(url.to_owned()));
        }
        let response = self
            .client
            .get()?
            .head(parsed.clone())
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .map_err(|e| IdentityError::Unreachable {
                host: host.clone(),
                source: e.without_url(),
            })?;
        let der = response
            .extensions()
            .get::<reqwest::tls::TlsInfo>()
            .and_then(reqwest::tls::TlsInfo::peer_certificate)
            .ok_or_else(|| IdentityError::NoCertificate(host.clone()))?
            .to_vec();
        let (_, certificate) =
            x509_parser::parse_x509_certificate(&der).map_err(|e| IdentityError::Unreadable {
                host: host.clone(),
                reason: e.to_string(),
            })?;
        let validity = certificate.validity();
        Ok(ServerIdentity {
            host,
            issuer: certificate.issuer().to_string(),
            not_before: validity.not_before.to_string(),
            not_after: validity.not_after.to_string(),
        })
    }
}

/// The cache folder name of a URL's host (`host` or `host_port`).
pub fn host_key(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .replace(':', "_");
    Some(match parsed.port() {
        Some(port) => format!("{host}_{port}"),
        None => host,
    })
}

/// What a TLS server's certificate says, read during a handshake that is then refused
/// (nothing is trusted or sent): only for explaining a failed connection.
#[derive(Debug, Clone)]
pub struct Presented {
    pub issuer: String,
    /// Outside its validity period now.
    pub expired: bool,
    /// Whether it names the host the request went to.
    pub names_host: bool,
}

/// The certificate a TLS server presents at `url`; see [`Presented`].
pub async fn presented_certificate(url: &str) -> Option<Presented> {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    #[derive(Debug)]
    struct Record(
        std::sync::Mutex<Option<Vec<u8>>>,
        Vec<rustls::SignatureScheme>,
    );
    impl ServerCertVerifier for Record {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            if let Ok(mut seen) = self.0.lock() {
                *seen = Some(end_entity.to_vec());
            }
            // Never trusted: the handshake ends here.
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            ))
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Err(rustls::Error::General("not verified".into()))
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Err(rustls::Error::General("not verified".into()))
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.1.clone()
        }
    }

    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = parsed.port_or_known_default()?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let schemes = provider
        .signature_verification_algorithms
        .supported_schemes();
    let record = std::sync::Arc::new(Record(std::sync::Mutex::new(None), schemes));
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(record.clone())
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let name = ServerName::try_from(host.clone()).ok()?;
    let attempt = async {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .ok()?;
        let _ = connector.connect(name, stream).await;
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()??;
    let der = record.0.lock().ok()?.clone()?;
    let (_, certificate) = x509_parser::parse_x509_certificate(&der).ok()?;
    let names: Vec<String> = certificate
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                    x509_parser::extensions::GeneralName::IPAddress(ip) => match ip.len() {
                        4 => Some(std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]).to_string()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let names_host = names.iter().any(|n| {
        n.eq_ignore_ascii_case(&host)
            || n.strip_prefix("*.").is_some_and(|rest| {
                host.split_once('.')
                    .is_some_and(|(_, tail)| tail.eq_ignore_ascii_case(rest))
            })
    });
    Some(Presented {
        issuer: certificate.issuer().to_string(),
        expired: !certificate.validity().is_valid(),
        names_host,
    })
}
