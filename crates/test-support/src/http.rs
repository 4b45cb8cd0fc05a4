//! Real HTTP(S) servers on 127.0.0.1 for web tests: a generated test CA, a server certificate
//! for `127.0.0.1`/`localhost` signed by it, and a server that answers with a handler and
//! records every request. Each server runs on its own thread and runtime, so sync tests, async
//! tests and tests of the built binary can all use it; it stops when dropped.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
};

/// A certificate authority made for one test run.
pub struct TestCa {
    /// The CA certificate, PEM: what a client must trust.
    pub pem: String,
    server: Arc<rustls::ServerConfig>,
}

impl TestCa {
    pub fn new() -> Self {
        Self::issuing(&["127.0.0.1", "localhost"], false)
    }

    /// A CA whose server certificate is for `names`, and expired (2000–2001) when `expired`:
    /// for tests of how TLS failures are reported.
    pub fn issuing(names: &[&str], expired: bool) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca_key = KeyPair::generate().expect("ca key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let mut name = DistinguishedName::new();
        // Each kind of test CA has a name of its own (two trusted CAs with one name confuse
        // path building).
        let suffix = match (names.first(), expired) {
            (Some(&"127.0.0.1"), false) => String::new(),
            (first, expired) => format!(
                " for {}{}",
                first.unwrap_or(&"nothing"),
                if expired { ", expired" } else { "" }
            ),
        };
        name.push(DnType::CommonName, format!("aai-gateway Test CA{suffix}"));
        ca.distinguished_name = name;
        let ca_cert = ca.self_signed(&ca_key).expect("ca cert");
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().expect("server key");
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .expect("leaf params");
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let leaf = params.signed_by(&key, &issuer).expect("leaf cert");
        let server = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("server config");
        Self {
            pem: ca_cert.pem(),
            server: Arc::new(server),
        }
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.uri.split('?').next().unwrap_or_default()
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A response to send.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self::new(status, value.to_string()).header("content-type", "application/json")
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// A server on 127.0.0.1 that answers with `handler` and records requests.
pub struct TestServer {
    pub addr: SocketAddr,
    tls: bool,
    pub requests: Arc<Mutex<Vec<Request>>>,
    /// TCP connections accepted so far that sent something (a refused host must see none). A
    /// connection closed before its first byte is not counted: on a machine running other test
    /// suites, their processes may probe a port this server took over from one of theirs,
    /// while a browser or proxy that reaches a host always speaks first (a TLS hello, a request).
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// HTTPS with a certificate from `ca`.
    pub fn https(
        ca: &TestCa,
        handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> Self {
        Self::start(
            Some(tokio_rustls::TlsAcceptor::from(ca.server.clone())),
            Arc::new(handler),
        )
    }

    /// Plain HTTP.
    pub fn http(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Self {
        Self::start(None, Arc::new(handler))
    }

    fn start(tls: Option<tokio_rustls::TlsAcceptor>, handler: Handler) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = connections.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let seen = requests.clone();
        let is_tls = tls.is_some();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let accept = async {
                    loop {
                        let Ok((tcp, _)) = listener.accept().await else {
                            continue;
                        };
                        let counted = counted.clone();
                        let handler = handler.clone();
                        let seen = seen.clone();
                        let tls = tls.clone();
                        tokio::spawn(async move {
                            let mut first = [0u8; 1];
                            if !matches!(tcp.peek(&mut first).await, Ok(n) if n > 0) {
                                return;
                            }
                            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let service = hyper::service::service_fn(move |request| {
                                let handler = handler.clone();
                                let seen = seen.clone();
                                async move {
                                    Ok::<_, Infallible>(answer(request, &handler, &seen).await)
                                }
                            });
                            let http = hyper::server::conn::http1::Builder::new();
                            match tls {
                                Some(acceptor) => {
                                    if let Ok(stream) = acceptor.accept(tcp).await {
                                        let io = hyper_util::rt::TokioIo::new(stream);
                                        let _ = http.serve_connection(io, service).await;
                                    }
                                }
                                None => {
                                    let io = hyper_util::rt::TokioIo::new(tcp);
                                    let _ = http.serve_connection(io, service).await;
                                }
                            }
                        });
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        Self {
            addr,
            tls: is_tls,
            requests,
            connections,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `https://127.0.0.1:<port>` (or `http://…`).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.addr.port())
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Request> {
        self.requests.lock().expect("requests").clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn answer(
    request: hyper::Request<hyper::body::Incoming>,
    handler: &Handler,
    seen: &Mutex<Vec<Request>>,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let request = Request {
        method: parts.method.to_string(),
        uri: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), ToString::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let response = handler(&request);
    if let Ok(mut seen) = seen.lock() {
        seen.push(request);
    }
    let mut builder = hyper::Response::builder().status(response.status);
    for (name, value) in &response.headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::from(response.body)))
        .unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
}
