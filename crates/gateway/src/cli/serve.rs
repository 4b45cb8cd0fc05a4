//! `aai-gateway` (no subcommand): the stdio MCP server.

use aai_engine::config::Config;
use aai_engine::pipeline::Gateway;
use aai_server::mcp::AaiServer;
use anyhow::Context;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use super::DATA_DB;

/// A gateway with live discovery under `home`, and the web registry refreshed in the
/// background when one is configured; `cancel` ends discovery. With it, the scheduler's hub
/// (the daemon runs the scheduler's loop on it).
pub(super) fn start_gateway(
    home: &std::path::Path,
    dev: bool,
    cancel: &CancellationToken,
) -> (
    std::sync::Arc<Gateway>,
    tokio::sync::watch::Receiver<std::sync::Arc<aai_engine::catalog::snapshot::Snapshot>>,
    std::sync::Arc<aai_schedule::Hub>,
) {
    if let Err(error) = aai_engine::private::create_dir(home) {
        tracing::warn!(home = %home.display(), "cannot create the gateway's folder: {error}");
    }
    // Read again whenever the file changes (discovery wakes on it).
    let config = std::sync::Arc::new(aai_engine::config::live::LiveConfig::load(home));
    let registry = aai_engine::catalog::watch::spawn(
        home.to_path_buf(),
        dev,
        aai_compose::plugged_apps(),
        config.clone(),
        cancel.clone(),
    );
    let executors = aai_compose::executors(&config.get(), home);
    let gateway = Gateway::new_live(
        registry.clone(),
        config,
        executors,
        home.join(DATA_DB),
        home,
    );
    let hub = aai_compose::plug(&gateway);
    // A stop pressed anywhere for this user (the marker) stops this gateway too.
    aai_engine::pipeline::stop::watch_marker(gateway.clone(), cancel.clone());
    if gateway.config().store.url.is_some() {
        // The app store's index for install hints, read in the background.
        let refreshing = gateway.clone();
        tokio::spawn(async move {
            let every = refreshing.config().store.index_refresh_seconds.max(60);
            loop {
                let store = aai_engine::appstore::Store::new(
                    &refreshing.config().store,
                    &aai_engine::appstore::ca_pems(&refreshing.config()),
                );
                match store {
                    Ok(store) => match store
                        .refresh(refreshing.home(), refreshing.store_index())
                        .await
                    {
                        Ok(count) => tracing::info!(count, "app store index refreshed"),
                        Err(problem) => tracing::warn!("app store index not refreshed: {problem}"),
                    },
                    Err(problem) => tracing::warn!("{problem}"),
                }
                tokio::time::sleep(std::time::Duration::from_secs(every)).await;
            }
        });
    }
    if gateway.config().web.registry_url.is_some() {
        // Start-up never waits on the network: discovery picks the copies up when they land.
        let web = gateway.web().clone();
        let every = gateway.config().web.registry_refresh_seconds;
        tokio::spawn(async move {
            loop {
                match web.refresh_registry().await {
                    Ok(counts) => tracing::info!(
                        listed = counts.listed,
                        kept = counts.kept,
                        skipped = counts.skipped,
                        "web registry refreshed"
                    ),
                    Err(error) => {
                        tracing::warn!(%error, "web registry not refreshed; using the copies from last time")
                    }
                }
                if every == 0 {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_secs(every)).await;
            }
        });
    }
    (gateway, registry, hub)
}

/// The daemon this stdio client should be forwarded to: the one whose runtime files name a
/// live process. A daemon that is alive but slow (busy, or flooded) is waited for — serving
/// the client here instead would walk around the daemon's gate and its stop — with a log line
/// saying why every few seconds; only a daemon whose process is gone is passed over.
async fn daemon_to_forward_to(
    home: &std::path::Path,
) -> Option<(reqwest::Client, aai_engine::runfiles::Running)> {
    let running = aai_engine::runfiles::running(home)?;
    let client = aai_server::daemon::forward::loopback_client().ok()?;
    let started = std::time::Instant::now();
    let mut said: Option<std::time::Instant> = None;
    loop {
        if aai_server::daemon::forward::answers(&client, &running).await {
            return Some((client, running));
        }
        if !aai_engine::runfiles::is_daemon(running.info.pid) {
            tracing::warn!(url = %running.info.url, pid = running.info.pid, "the gateway daemon recorded for this user is gone (its process exited or is another program); serving this client here");
            return None;
        }
        if said.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(5)) {
            tracing::warn!(
                url = %running.info.url,
                pid = running.info.pid,
                waited_s = started.elapsed().as_secs(),
                "the gateway daemon is alive but does not answer yet; waiting for it (this client is never served around the daemon's gate). `aai-gateway status` shows it; `aai-gateway stop` works regardless"
            );
            said = Some(std::time::Instant::now());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

pub async fn run(home: std::path::PathBuf, dev: bool) -> anyhow::Result<()> {
    if let Some((client, running)) = daemon_to_forward_to(&home).await {
        tracing::info!(url = %running.info.url, "a gateway daemon runs: forwarding this client to it");
        let (config, _) = Config::load(&home);
        let (input, output) = aai_server::transport::guarded(
            aai_server::transport::stdin(),
            aai_server::transport::stdout(),
            config.max_request_bytes,
            None,
        );
        aai_server::daemon::forward::forward(client, &running, input, output).await;
        return Ok(());
    }
    let cancel = CancellationToken::new();
    let (gateway, registry, _hub) = start_gateway(&home, dev, &cancel);
    let max_request_bytes = gateway.config().max_request_bytes;
    tracing::info!(home = %home.display(), version = env!("CARGO_PKG_VERSION"), "aai-gateway serving MCP on stdio");
    let server = AaiServer::new(gateway);
    let running = server
        .clone()
        .serve(aai_server::transport::guarded(
            aai_server::transport::stdin(),
            aai_server::transport::stdout(),
            max_request_bytes,
            Some(std::sync::Arc::new(aai_server::mcp::ToolListBody(
                server.clone(),
            ))),
        ))
        .await
        .context("the MCP session did not start")?;
    // Sessions that began with `initialize` get list_changed as plain notifications; the
    // 2026-07-28 lifecycle gets them through `subscriptions/listen` instead.
    let notifier = tokio::spawn(aai_server::mcp::notify_changes(
        running.peer().clone(),
        registry,
        server.subscriptions(),
        server.mcp_changes(),
    ));
    let reason = running.waiting().await;
    tracing::info!(?reason, "client disconnected");
    server.end_session();
    notifier.abort();
    cancel.cancel();
    Ok(())
}
