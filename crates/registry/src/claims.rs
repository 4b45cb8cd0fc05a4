//! Namespace claims, verified as the official MCP Registry verifies domains: the namespace
//! `com.acme.labs` is the domain `labs.acme.com`, and whoever controls that domain vouches for
//! the publisher's key with the record `v=AAIv1; k=ed25519; p=<base64 public key>`, served
//! either as the HTTPS file `https://labs.acme.com/.well-known/aai-registry-auth` or as a DNS
//! TXT record on `labs.acme.com`.
//!
//! Both checks can be pointed at local servers ([`Check::well_known_base`],
//! [`Check::dns_server`]) so tests run them against a real HTTP server and a real DNS server.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Where the file lives under the domain.
pub const WELL_KNOWN_PATH: &str = "/.well-known/aai-registry-auth";

/// The largest well-known file read; a record is under 100 bytes.
const MAX_FILE: usize = 64 * 1024;

type Source = Box<dyn std::error::Error + Send + Sync>;

/// Why a namespace claim is not proven.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(transparent)]
    Key(#[from] crate::keys::KeyError),
    #[error("{0:?} is not a reverse-DNS namespace like com.example")]
    Namespace(String),
    #[error("{place} holds no \"v=AAIv1; k=ed25519; p=…\" record")]
    NoRecord { place: String },
    #[error("{place} vouches for another key, not this publisher's: {others}")]
    OtherKey { place: String, others: String },
    #[error("cannot make an HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("{url} cannot be read: {source}")]
    Unreadable { url: String, source: reqwest::Error },
    #[error("{url} answered {status}, not 200 with the record (redirects are not followed)")]
    Status {
        url: String,
        status: reqwest::StatusCode,
    },
    #[error("{url} broke off: {source}")]
    BrokeOff { url: String, source: reqwest::Error },
    #[error("{url} is larger than {MAX_FILE} bytes")]
    TooLarge { url: String },
    #[error("cannot read the system's DNS configuration: {0}")]
    DnsConfig(Source),
    #[error("cannot make a DNS resolver: {0}")]
    Resolver(Source),
    #[error("{domain} has no TXT record")]
    NoTxt { domain: String },
    #[error("the TXT records of {domain} cannot be read: {source}")]
    Txt { domain: String, source: Source },
}

/// How a claim is proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The file under the domain's `.well-known`, over HTTPS.
    Http,
    /// A TXT record on the domain.
    Dns,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Dns => "dns",
        }
    }
}

/// How to reach the domain's proof.
#[derive(Debug, Clone)]
pub struct Check {
    /// Send the well-known request to this base URL (e.g. `http://127.0.0.1:8080`) instead of
    /// `https://<domain>`; the `Host` header and the path still name the domain. For tests
    /// and for operators behind a split-horizon proxy.
    pub well_known_base: Option<String>,
    /// Ask this nameserver (UDP, then TCP) instead of the system's resolvers.
    pub dns_server: Option<SocketAddr>,
    /// For each request (and each DNS attempt).
    pub timeout: Duration,
}

impl Default for Check {
    fn default() -> Self {
        Self {
            well_known_base: None,
            dns_server: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// The domain a namespace stands for: its labels reversed, lower case.
pub fn domain(namespace: &str) -> String {
    namespace
        .split('.')
        .rev()
        .collect::<Vec<_>>()
        .join(".")
        .to_ascii_lowercase()
}

/// The record that vouches for `public_key`.
pub fn record(public_key: &str) -> String {
    format!("v=AAIv1; k=ed25519; p={}", public_key.trim())
}

/// What one line of the file, or one TXT record, says of a key.
#[derive(Debug, PartialEq, Eq)]
enum Record<'a> {
    /// `v=AAIv1`, `k=ed25519` and `p=` a key with the same 32 bytes, in any order, separated
    /// by `;`.
    Vouches,
    /// Not a record of ours.
    Unrelated,
    /// A well-formed record for another key (its `p=`), so the refusal can say so.
    OtherKey(&'a str),
}

fn vouches<'a>(text: &'a str, public_key: &[u8; 32]) -> Record<'a> {
    let mut fields = text.split(';').filter_map(|field| {
        let (name, value) = field.split_once('=')?;
        Some((name.trim().to_ascii_lowercase(), value.trim()))
    });
    let (mut v, mut k, mut p) = (None, None, None);
    for (name, value) in fields.by_ref() {
        match name.as_str() {
            "v" => v = Some(value),
            "k" => k = Some(value),
            "p" => p = Some(value),
            _ => {}
        }
    }
    if v != Some("AAIv1") || !k.is_some_and(|k| k.eq_ignore_ascii_case("ed25519")) {
        return Record::Unrelated;
    }
    let Some(p) = p else {
        return Record::Unrelated;
    };
    match STANDARD.decode(p) {
        Ok(bytes) if bytes == public_key => Record::Vouches,
        _ => Record::OtherKey(p),
    }
}

/// Finds a record for `public_key` among `records`; `Err` says what was there instead.
fn find(records: &[String], public_key: &[u8; 32], place: &str) -> Result<(), ClaimError> {
    let mut others = Vec::new();
    for record in records {
        match vouches(record, public_key) {
            Record::Vouches => return Ok(()),
            Record::Unrelated => {}
            Record::OtherKey(p) => others.push(format!("a record for another key (p={p})")),
        }
    }
    let place = place.to_owned();
    if others.is_empty() {
        Err(ClaimError::NoRecord { place })
    } else {
        Err(ClaimError::OtherKey {
            place,
            others: others.join(", "),
        })
    }
}

/// Verifies that the domain of `namespace` vouches for `public_key` (base64) by `method`.
/// `Ok` says where the proof was found.
///
/// # Errors
/// Why the claim is not proven: the key or namespace is malformed, the file or record is
/// missing or unreachable, or it names another key.
pub async fn verify(
    namespace: &str,
    public_key: &str,
    method: Method,
    check: &Check,
) -> Result<String, ClaimError> {
    let key = crate::keys::public(public_key)?.to_bytes();
    if !aai_descriptor::is_valid_app_id(&format!("{namespace}.x")) {
        return Err(ClaimError::Namespace(namespace.to_owned()));
    }
    let domain = domain(namespace);
    match method {
        Method::Http => {
            let (url, records) = well_known(&domain, check).await?;
            find(&records, &key, &url)?;
            Ok(url)
        }
        Method::Dns => {
            let records = txt(&domain, check).await?;
            let place = format!("the TXT records of {domain}");
            find(&records, &key, &place)?;
            Ok(place)
        }
    }
}

/// The lines of the domain's well-known file, and the URL it was read from.
async fn well_known(domain: &str, check: &Check) -> Result<(String, Vec<String>), ClaimError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = match &check.well_known_base {
        Some(base) => format!("{}{WELL_KNOWN_PATH}", base.trim_end_matches('/')),
        None => format!("https://{domain}{WELL_KNOWN_PATH}"),
    };
    let named = format!("https://{domain}{WELL_KNOWN_PATH}");
    let client = reqwest::Client::builder()
        // The proof must come from the domain itself: a redirect could hand the answer to
        // any other host.
        .redirect(reqwest::redirect::Policy::none())
        .timeout(check.timeout)
        .user_agent(concat!("aai-registry/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(ClaimError::Client)?;
    let mut request = client.get(&url);
    if check.well_known_base.is_some() {
        request = request.header(reqwest::header::HOST, domain);
    }
    let mut response = request
        .send()
        .await
        .map_err(|source| ClaimError::Unreadable {
            url: named.clone(),
            source,
        })?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        return Err(ClaimError::Status { url: named, status });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|source| ClaimError::BrokeOff {
            url: named.clone(),
            source,
        })?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_FILE {
            return Err(ClaimError::TooLarge { url: named });
        }
    }
    let text = String::from_utf8_lossy(&body);
    Ok((named, text.lines().map(str::to_owned).collect()))
}

/// The TXT records on `domain`, each one's strings joined (long records are split into
/// strings of 255 bytes).
async fn txt(domain: &str, check: &Check) -> Result<Vec<String>, ClaimError> {
    use hickory_resolver::config::{
        ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts,
    };
    use hickory_resolver::net::runtime::TokioRuntimeProvider;
    use hickory_resolver::proto::rr::RData;

    let mut builder = match check.dns_server {
        Some(server) => {
            let connections = [ConnectionConfig::udp(), ConnectionConfig::tcp()]
                .into_iter()
                .map(|mut connection| {
                    connection.port = server.port();
                    connection
                })
                .collect();
            let config = ResolverConfig::from_name_servers(vec![NameServerConfig::new(
                server.ip(),
                true,
                connections,
            )]);
            hickory_resolver::Resolver::builder_with_config(config, TokioRuntimeProvider::default())
        }
        None => hickory_resolver::Resolver::builder_tokio()
            .map_err(|e| ClaimError::DnsConfig(e.into()))?,
    };
    let mut options = ResolverOpts::default();
    options.timeout = check.timeout;
    options.attempts = 2;
    // Each claim is checked afresh.
    options.cache_size = 0;
    *builder.options_mut() = options;
    let resolver = builder
        .build()
        .map_err(|e| ClaimError::Resolver(e.into()))?;
    // Fully qualified: no search domain is ever appended.
    let lookup = match resolver.txt_lookup(format!("{domain}.")).await {
        Ok(lookup) => lookup,
        Err(e) if e.is_no_records_found() || e.is_nx_domain() => {
            return Err(ClaimError::NoTxt {
                domain: domain.to_owned(),
            });
        }
        Err(e) => {
            return Err(ClaimError::Txt {
                domain: domain.to_owned(),
                source: e.into(),
            });
        }
    };
    Ok(lookup
        .answers()
        .iter()
        .filter_map(|record| match &record.data {
            RData::TXT(txt) => Some(
                txt.txt_data
                    .iter()
                    .map(|part| String::from_utf8_lossy(part))
                    .collect::<String>(),
            ),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_its_domain_reversed() {
        assert_eq!(domain("com.acme.labs"), "labs.acme.com");
        assert_eq!(domain("Org.Example"), "example.org");
    }

    #[test]
    fn a_record_vouches_only_for_its_own_key() {
        let (_, key) = crate::keys::generate();
        let (_, other) = crate::keys::generate();
        let bytes = crate::keys::public(&key).expect("key").to_bytes();
        assert_eq!(vouches(&record(&key), &bytes), Record::Vouches);
        assert_eq!(
            vouches(&format!("k=ed25519;p={key} ; v=AAIv1"), &bytes),
            Record::Vouches
        );
        assert!(matches!(
            vouches(&record(&other), &bytes),
            Record::OtherKey(_)
        ));
        assert_eq!(
            vouches(&format!("v=AAIv2; k=ed25519; p={key}"), &bytes),
            Record::Unrelated
        );
        assert_eq!(
            vouches(&format!("v=AAIv1; k=rsa; p={key}"), &bytes),
            Record::Unrelated
        );
        assert_eq!(
            vouches("google-site-verification=abc", &bytes),
            Record::Unrelated
        );
        let found = find(&[record(&other), record(&key)], &bytes, "x");
        assert!(found.is_ok(), "{found:?}");
        let refused = find(&[record(&other)], &bytes, "x")
            .expect_err("other key")
            .to_string();
        assert!(refused.contains("another key"), "{refused}");
        let refused = find(&[], &bytes, "x").expect_err("none").to_string();
        assert!(refused.contains("no \"v=AAIv1"), "{refused}");
    }
}
