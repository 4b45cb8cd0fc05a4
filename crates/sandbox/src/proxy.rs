//! The policy proxy: the only way out of the browser. Chromium is started with this proxy
//! for every scheme and for loopback too, so each connection it opens — a navigation, a
//! redirect, a subresource, a WebSocket, a preconnect — arrives here as `CONNECT host:port`
//! or an absolute-form `GET http://host/…`, and a host the policy refuses is answered `403`
//! without any connection, DNS look-up included, being made on its behalf. A host the policy
//! allows is resolved here, and each address is checked before it is connected to: the
//! gateway's own listeners ([`aai_contain::own_listeners`]) are never reached, by any name.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::policy::{DomainPolicy, normalize_host};

/// Largest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client may take to send its request head, and an upstream to accept.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A connection the policy refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Counts refusals since the proxy started (see [`Proxy::mark`]).
    pub seq: u64,
    pub host: String,
    pub port: u16,
    pub rule: String,
}

#[derive(Default)]
struct Log {
    next: u64,
    refusals: Vec<Refusal>,
    /// Every `host:port` connected to, in order, with the refusal count at the time.
    reached: Vec<(u64, String)>,
}

/// A running policy proxy on 127.0.0.1; it stops when dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    stop: CancellationToken,
    granted: Granted,
    /// The proxy is one of the gateway's listeners: a request through it to itself is refused.
    _own: aai_contain::own_listeners::Registered,
}

/// What the proxy connects for: the policy, the `resolve` overrides and the gateway's home
/// (whose `run/serve.json` names the daemon's port).
struct Route {
    policy: Arc<DomainPolicy>,
    resolve: Resolve,
    home: Option<PathBuf>,
    /// `Some`: addresses of this computer or a private network are refused unless the host
    /// (or `host:port`) was named in this list (the egress proxy); `None`: not checked (the
    /// browser, whose policy judges hosts by name).
    internal: Option<Vec<String>>,
    /// Hosts (or `host:port`) the user allowed for the command running now, beyond the
    /// policy: see [`Proxy::grant`].
    granted: Granted,
}

type Granted = Arc<Mutex<Vec<String>>>;

/// Hosts allowed while it lives (see [`Proxy::grant`]).
pub struct Grant {
    granted: Granted,
    hosts: Vec<String>,
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Ok(mut granted) = self.granted.lock() {
            for host in &self.hosts {
                if let Some(at) = granted.iter().position(|h| h == host) {
                    granted.remove(at);
                }
            }
        }
    }
}

impl Route {
    /// Whether the user allowed `host` (a name, its subdomains, or `host:port`) for now.
    fn granted_host(&self, host: &str, port: u16) -> bool {
        let Some(normal) = normalize_host(host) else {
            return false;
        };
        self.granted.lock().is_ok_and(|granted| {
            granted.iter().any(|g| {
                *g == normal
                    || *g == format!("{normal}:{port}")
                    || normal
                        .strip_suffix(g.as_str())
                        .is_some_and(|head| head.ends_with('.'))
            })
        })
    }
}

/// Where the proxy connects for a host and port: the `resolve` override (`"host:port"` →
/// `"ip:port"`, as curl's `--connect-to`), else the name itself.
type Resolve = BTreeMap<String, String>;

impl Proxy {
    /// Starts the proxy for `policy`; `home` is the gateway's home folder, whose daemon it
    /// never connects to.
    ///
    /// # Errors
    /// When no port on 127.0.0.1 can be bound.
    pub async fn start(
        policy: Arc<DomainPolicy>,
        resolve: Resolve,
        home: Option<PathBuf>,
    ) -> std::io::Result<Self> {
        Self::start_with(policy, resolve, home, None).await
    }

    /// [`Proxy::start`], refusing addresses of this computer and of private networks unless
    /// the host (or `host:port`) is in `internal` (`Some`).
    ///
    /// # Errors
    /// When no port on 127.0.0.1 can be bound.
    pub async fn start_with(
        policy: Arc<DomainPolicy>,
        resolve: Resolve,
        home: Option<PathBuf>,
        internal: Option<Vec<String>>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let own = aai_contain::own_listeners::register(addr);
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = CancellationToken::new();
        let granted = Granted::default();
        let route = Arc::new(Route {
            policy,
            resolve,
            home,
            internal,
            granted: granted.clone(),
        });
        let (task_log, task_stop) = (log.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = task_stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((client, _)) = accepted else { continue };
                let (route, log, stop) = (route.clone(), task_log.clone(), task_stop.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = serve(client, &route, &log) => {}
                    }
                });
            }
        });
        Ok(Self {
            addr,
            log,
            stop,
            granted,
            _own: own,
        })
    }

    /// Lets `hosts` through besides the policy until the grant is dropped: a name (with its
    /// subdomains) or, for an address of this computer or a private network, `host:port`.
    /// The gateway's own ports stay out of reach.
    pub fn grant(&self, hosts: &[String]) -> Grant {
        let hosts: Vec<String> = hosts
            .iter()
            .filter_map(|h| {
                let (host, port) = match h.rsplit_once(':') {
                    Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
                        (host, Some(port))
                    }
                    _ => (h.as_str(), None),
                };
                let host = normalize_host(host)?;
                Some(port.map_or_else(|| host.clone(), |port| format!("{host}:{port}")))
            })
            .collect();
        if let Ok(mut granted) = self.granted.lock() {
            granted.extend(hosts.iter().cloned());
        }
        Grant {
            granted: self.granted.clone(),
            hosts,
        }
    }

    /// The count of refusals so far: [`Proxy::refused_since`] with it gives the later ones.
    pub fn mark(&self) -> u64 {
        self.log.lock().map_or(0, |log| log.next)
    }

    /// Every `host:port` connected to since `mark`, each once, in order.
    pub fn reached_since(&self, mark: u64) -> Vec<String> {
        self.log.lock().map_or_else(
            |_| Vec::new(),
            |log| {
                let mut out: Vec<String> = Vec::new();
                for (_, host) in log.reached.iter().filter(|(seq, _)| *seq >= mark) {
                    if !out.contains(host) {
                        out.push(host.clone());
                    }
                }
                out
            },
        )
    }

    /// The refusals from `mark` on.
    pub fn refused_since(&self, mark: u64) -> Vec<Refusal> {
        self.log.lock().map_or_else(
            |_| Vec::new(),
            |log| {
                log.refusals
                    .iter()
                    .filter(|r| r.seq >= mark)
                    .cloned()
                    .collect()
            },
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The request line and head of one proxy request.
struct Head {
    method: String,
    target: String,
    version: String,
    /// Header lines as sent, without the request line.
    headers: Vec<String>,
    /// Bytes read past the head (the start of a body or of TLS).
    rest: Vec<u8>,
}

async fn read_head(client: &mut TcpStream) -> Option<Head> {
    let mut buf = Vec::with_capacity(2048);
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(HEAD_TIMEOUT, client.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let text = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target, version) = (first.next()?, first.next()?, first.next()?);
    Some(Head {
        method: method.to_owned(),
        target: target.to_owned(),
        version: version.to_owned(),
        headers: lines.map(str::to_owned).collect(),
        rest: buf[end + 4..].to_vec(),
    })
}

/// Writes a refusal to the log the tools read.
fn note_refusal(log: &Mutex<Log>, host: &str, port: u16, rule: &str) {
    if let Ok(mut log) = log.lock() {
        let seq = log.next;
        log.next += 1;
        log.refusals.push(Refusal {
            seq,
            host: host.to_owned(),
            port,
            rule: rule.to_owned(),
        });
    }
    tracing::info!(host = %host, port, rule = %rule, "proxy connection refused");
}

async fn serve(mut client: TcpStream, route: &Route, log: &Mutex<Log>) {
    let Some(head) = read_head(&mut client).await else {
        return;
    };
    // CONNECT host:port, or an absolute-form request for plain HTTP.
    let (host, port, origin_form) = if head.method.eq_ignore_ascii_case("CONNECT") {
        let Some((host, port)) = split_authority(&head.target, 443) else {
            return answer(&mut client, 400, "bad CONNECT target").await;
        };
        (host, port, None)
    } else {
        let Ok(url) = url::Url::parse(&head.target) else {
            return answer(&mut client, 400, "this is a proxy: absolute URLs only").await;
        };
        if !matches!(url.scheme(), "http" | "ws") {
            return answer(&mut client, 400, "only http through the proxy").await;
        }
        let Some(host) = url.host_str() else {
            return answer(&mut client, 400, "no host").await;
        };
        let mut path = url.path().to_owned();
        if let Some(query) = url.query() {
            path.push('?');
            path.push_str(query);
        }
        (
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            url.port_or_known_default().unwrap_or(80),
            Some(path),
        )
    };
    if let Err(blocked) = route.policy.check_host(&host)
        && !route.granted_host(&host, port)
    {
        note_refusal(log, &blocked.target, port, &blocked.rule);
        return answer(&mut client, 403, &blocked.message()).await;
    }
    let mut upstream = match connect(&host, port, route).await {
        Ok(upstream) => upstream,
        Err(Unreached::Own(rule)) => {
            let normal = normalize_host(&host).unwrap_or_else(|| host.clone());
            note_refusal(log, &normal, port, &rule);
            let message = format!("{host}:{port} is blocked: {rule}.");
            return answer(&mut client, 403, &message).await;
        }
        Err(Unreached::Failed) => {
            return answer(&mut client, 502, "the host could not be reached").await;
        }
    };
    if let Ok(mut log) = log.lock() {
        let seq = log.next;
        log.next += 1;
        let normal = normalize_host(&host).unwrap_or_else(|| host.clone());
        log.reached.push((seq, format!("{normal}:{port}")));
    }
    let sent = match origin_form {
        None => client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_ok(),
        Some(path) => {
            let upgrade = head
                .headers
                .iter()
                .any(|h| h.to_ascii_lowercase().starts_with("upgrade:"));
            let mut out = format!("{} {path} {}\r\n", head.method, head.version);
            for line in &head.headers {
                let lower = line.to_ascii_lowercase();
                if lower.starts_with("proxy-") || (!upgrade && lower.starts_with("connection:")) {
                    continue;
                }
                out.push_str(line);
                out.push_str("\r\n");
            }
            // One request per upstream connection: a second request on a kept-alive client
            // connection could name another host.
            if !upgrade {
                out.push_str("Connection: close\r\n");
            }
            out.push_str("\r\n");
            upstream.write_all(out.as_bytes()).await.is_ok()
        }
    };
    if !sent || upstream.write_all(&head.rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// `host:port` (IPv6 in brackets), `default` when no port is given.
fn split_authority(authority: &str, default: u16) -> Option<(String, u16)> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, port.parse().ok()?),
        _ => (authority, default),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// Why the proxy made no connection.
enum Unreached {
    /// Every address the name resolves to is one of the gateway's own listeners.
    Own(String),
    /// The name did not resolve, or no address answered.
    Failed,
}

/// Connects to `host:port` (or where `resolve` sends it): the name is resolved once and each
/// address checked before it is connected to, so what is checked is what is reached — a name
/// that resolves to this host (or re-resolves to it later) never reaches the gateway itself.
async fn connect(host: &str, port: u16, route: &Route) -> Result<TcpStream, Unreached> {
    let normal = normalize_host(host).ok_or(Unreached::Failed)?;
    let target = route
        .resolve
        .get(&format!("{normal}:{port}"))
        .cloned()
        .unwrap_or_else(|| {
            if normal.contains(':') {
                format!("[{normal}]:{port}")
            } else {
                format!("{normal}:{port}")
            }
        });
    let addrs: Vec<SocketAddr> =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host(target))
            .await
            .map_err(|_| Unreached::Failed)?
            .map_err(|_| Unreached::Failed)?
            .collect();
    let mut refused = None;
    // A grant lifts the block on this computer's and private addresses only for what the
    // user saw named as such: an address, or localhost, with its port.
    let literal = normal.parse::<std::net::IpAddr>().is_ok() || normal == "localhost";
    let named =
        route.internal.as_ref().is_none_or(|named| {
            named.contains(&normal) || named.contains(&format!("{normal}:{port}"))
        }) || (literal
            && route
                .granted
                .lock()
                .is_ok_and(|granted| granted.contains(&format!("{normal}:{port}"))));
    for addr in addrs {
        if let Some(rule) = aai_contain::own_listeners::refusal(addr, route.home.as_deref()) {
            refused = Some(rule);
            continue;
        }
        // This computer's own addresses, its public ones included, are as private as
        // loopback: a name pointed at them reaches whatever listens on every address.
        if !named
            && (aai_contain::addresses::is_internal(addr.ip())
                || aai_contain::own_listeners::is_this_host(addr.ip()))
        {
            refused = Some(format!(
                "{} is an address of this computer or of a private network; name {normal}:{port} in local.egress.allow to reach it",
                addr.ip()
            ));
            continue;
        }
        if let Ok(Ok(stream)) =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await
        {
            return Ok(stream);
        }
    }
    Err(refused.map_or(Unreached::Failed, Unreached::Own))
}

async fn answer(client: &mut TcpStream, status: u16, message: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        _ => "Bad Gateway",
    };
    let body = format!("{message}\n");
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = client.write_all(head.as_bytes()).await;
    let _ = client.write_all(body.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("a.test:443", 1),
            Some(("a.test".into(), 443))
        );
        assert_eq!(split_authority("[::1]:8443", 1), Some(("::1".into(), 8443)));
        assert_eq!(split_authority("[::1]", 7), Some(("::1".into(), 7)));
        assert_eq!(split_authority("a.test", 7), Some(("a.test".into(), 7)));
        assert_eq!(split_authority("a.test:x", 7), None);
    }

    /// A refused host gets a 403 naming the rule and no connection; an allowed one is
    /// tunnelled to the address `resolve` gives.
    #[tokio::test]
    async fn refuses_before_connecting() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let up = upstream.local_addr().expect("addr");
        let policy = Arc::new(DomainPolicy::new(&[], &["denied.test".into()], false));
        let resolve = BTreeMap::from([
            ("allowed.test:443".to_owned(), up.to_string()),
            ("denied.test:443".to_owned(), up.to_string()),
        ]);
        let proxy = Proxy::start(policy, resolve, None).await.expect("proxy");
        let addr = proxy.addr;
        let ask = |target: &'static str| async move {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            c.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
                .await
                .expect("write");
            let mut got = vec![0u8; 512];
            let n = c.read(&mut got).await.expect("read");
            String::from_utf8_lossy(&got[..n]).into_owned()
        };
        let mark = proxy.mark();
        let refused = ask("DENIED.test.:443").await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        assert!(refused.contains("browser.deny"), "{refused}");
        let accepted = tokio::time::timeout(Duration::from_millis(200), upstream.accept()).await;
        assert!(accepted.is_err(), "a refused host must see no connection");
        let seen = proxy.refused_since(mark);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].host, "denied.test");
        let ok = ask("allowed.test:443").await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        upstream
            .accept()
            .await
            .expect("the allowed host is reached");
    }

    /// The gateway's own listener is refused by every name of this host — loopback spellings,
    /// the unspecified address, a name that resolves to it — even when the allow list names
    /// them all, and sees no connection; another loopback server is reached.
    #[tokio::test]
    async fn the_gateways_own_listeners_are_refused_by_every_name() {
        let own = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let own_addr = own.local_addr().expect("addr");
        let _registered = aai_contain::own_listeners::register(own_addr);
        let other = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let other_addr = other.local_addr().expect("addr");
        let allow: Vec<String> = [
            "127.0.0.1",
            "127.0.0.2",
            "localhost",
            "0.0.0.0",
            "ours.test",
            "[::1]",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let policy = Arc::new(DomainPolicy::new(&allow, &[], false));
        let port = own_addr.port();
        let resolve = BTreeMap::from([(format!("ours.test:{port}"), own_addr.to_string())]);
        let proxy = Proxy::start(policy, resolve, None).await.expect("proxy");
        let addr = proxy.addr;
        let ask = |request: String| async move {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            c.write_all(request.as_bytes()).await.expect("write");
            let mut got = vec![0u8; 512];
            let n = c.read(&mut got).await.expect("read");
            String::from_utf8_lossy(&got[..n]).into_owned()
        };
        for host in [
            "127.0.0.1",
            "127.0.0.2",
            "localhost",
            "0.0.0.0",
            "ours.test",
            "[::1]",
        ] {
            let connect = ask(format!(
                "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
            ))
            .await;
            assert!(
                connect.starts_with("HTTP/1.1 403"),
                "CONNECT {host}: {connect}"
            );
            assert!(connect.contains("own listener"), "{connect}");
            let get = ask(format!(
                "GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
            ))
            .await;
            assert!(get.starts_with("HTTP/1.1 403"), "GET {host}: {get}");
        }
        // The proxy itself is one of the gateway's listeners.
        let me = ask(format!(
            "CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n",
            addr.port()
        ))
        .await;
        assert!(me.starts_with("HTTP/1.1 403"), "{me}");
        let accepted = tokio::time::timeout(Duration::from_millis(200), own.accept()).await;
        assert!(
            accepted.is_err(),
            "the gateway's listener must see no connection"
        );
        let ok = ask(format!(
            "CONNECT localhost:{} HTTP/1.1\r\n\r\n",
            other_addr.port()
        ))
        .await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        other
            .accept()
            .await
            .expect("another loopback server is reached");
    }
}
