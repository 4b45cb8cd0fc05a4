//! The stdio forwarder: when a daemon runs, the `aai-gateway` an MCP client starts on stdio
//! passes every message to it and back, so every client shares one gate, one approval queue
//! and one emergency stop. Messages are relayed as they are — the client's `initialize`
//! included — so the daemon sees the client's own name and capabilities, and requests the
//! daemon makes of the client (elicitation, roots) reach it.

use rmcp::RoleClient;
use rmcp::RoleServer;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, Transport};

use aai_engine::runfiles::Running;

/// An HTTP client for the daemon on loopback: no proxy (a user's `HTTP_PROXY` must not see
/// the token), no TLS needed.
///
/// # Errors
/// The client cannot be built.
pub fn loopback_client() -> anyhow::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .user_agent(concat!("aai-gateway/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| anyhow::anyhow!("cannot make an HTTP client: {e}"))
}

/// Whether the daemon answers its status endpoint within a second: a daemon that hangs or
/// left stale runtime files is not forwarded to.
pub async fn answers(client: &reqwest::Client, running: &Running) -> bool {
    let status = format!(
        "{}/control/status",
        running.info.url.trim_end_matches("/mcp")
    );
    client
        .get(status)
        .bearer_auth(&running.token)
        .timeout(std::time::Duration::from_secs(1))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

/// Relays the MCP session on `input`/`output` (stdio, behind the transport guard) to the
/// daemon until either side ends.
///
pub async fn forward<R, W>(client: reqwest::Client, running: &Running, input: R, output: W)
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // This client's connection, named for the daemon: a 2026-07-28 client's requests carry
    // no session, and its "for this session" grants belong to this connection.
    let connection = aai_contain::own_files::new_token();
    let mut headers = std::collections::HashMap::new();
    if let (Ok(name), Ok(value)) = (
        reqwest::header::HeaderName::from_bytes(crate::mcp::CONNECTION_HEADER.as_bytes()),
        reqwest::header::HeaderValue::from_str(&connection),
    ) {
        headers.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(running.info.url.clone())
        .auth_header(running.token.clone())
        .custom_headers(headers);
    let mut daemon = StreamableHttpClientTransport::with_client(client, config);
    let mut client = IntoTransport::<RoleServer, _, _>::into_transport((input, output));
    loop {
        tokio::select! {
            from_client = Transport::<RoleServer>::receive(&mut client) => {
                let Some(message) = from_client else { break };
                let id = match &message {
                    rmcp::model::JsonRpcMessage::Request(request) => Some(request.id.clone()),
                    _ => None,
                };
                if let Err(error) = Transport::<RoleClient>::send(&mut daemon, message).await {
                    tracing::warn!(%error, "the daemon did not take a message");
                    // A request the daemon did not take is answered here: the client never
                    // waits for a reply that cannot come.
                    if let Some(id) = id {
                        let reply = rmcp::model::ServerJsonRpcMessage::error(
                            rmcp::model::ErrorData::internal_error(
                                format!("the gateway daemon at {} did not take the request ({error}); is it still running? `aai-gateway status`", running.info.url),
                                None,
                            ),
                            Some(id),
                        );
                        if Transport::<RoleServer>::send(&mut client, reply).await.is_err() {
                            break;
                        }
                    }
                }
            }
            from_daemon = Transport::<RoleClient>::receive(&mut daemon) => {
                let Some(message) = from_daemon else {
                    tracing::warn!("the daemon closed the session");
                    break;
                };
                if let Err(error) = Transport::<RoleServer>::send(&mut client, message).await {
                    tracing::info!(%error, "the client went away");
                    break;
                }
            }
        }
    }
    let _ = Transport::<RoleClient>::close(&mut daemon).await;
}
