//! Telling clients what changed: `list_changed` when apps come and go, `resources/updated`
//! for the app resources a client subscribed to.

use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;

use aai_engine::catalog::snapshot::Snapshot;

/// The resource URIs one client subscribed to.
pub type Subscriptions = Arc<Mutex<std::collections::BTreeSet<String>>>;

/// Of the subscribed `uris`, the app resources (`app:<appId>`) whose guide differs between
/// two snapshots: changed, added or removed.
pub(super) fn updated<'u>(
    last: &Snapshot,
    current: &Snapshot,
    uris: impl IntoIterator<Item = &'u String>,
) -> Vec<String> {
    uris.into_iter()
        .filter(|uri| {
            let Some(id) = uri.strip_prefix("app:") else {
                return false;
            };
            match (last.find(id), current.find(id)) {
                (Some(a), Some(b)) => !Arc::ptr_eq(&a.entry, &b.entry),
                (None, None) => false,
                _ => true,
            }
        })
        .cloned()
        .collect()
}

/// Sends `list_changed` for tools and resources to `peer` whenever the apps in `registry`
/// change, and `resources/updated` for each subscribed app resource that changed, until the
/// peer goes away. Bursts (a big first scan, a folder copied in) are coalesced: the watch
/// channel keeps only the newest snapshot, so one notification covers what changed meanwhile.
/// The appId of the next MCP server whose tools change; never, without servers.
pub(super) async fn server_change(
    servers: &mut Option<tokio::sync::broadcast::Receiver<String>>,
) -> Option<String> {
    match servers.as_mut() {
        Some(servers) => servers.recv().await.ok(),
        None => std::future::pending().await,
    }
}

pub async fn notify_changes(
    peer: rmcp::Peer<RoleServer>,
    mut changes: tokio::sync::watch::Receiver<Arc<aai_engine::catalog::snapshot::Snapshot>>,
    subscriptions: Subscriptions,
    mut servers: Option<tokio::sync::broadcast::Receiver<String>>,
) {
    let mut last = changes.borrow_and_update().clone();
    loop {
        // An MCP server's tools changed: its guide (the resource `app:<appId>`) did, and so
        // did the flat tool list of exposures that list apps' tools.
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            Some(app) = server_change(&mut servers) => {
                if peer.peer_info().is_none() {
                    continue;
                }
                let uri = format!("app:{app}");
                let subscribed = subscriptions.lock().map(|s| s.contains(&uri)).unwrap_or(false);
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
                if subscribed {
                    let _ = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                        .await;
                }
                continue;
            }
        }
        let current = changes.borrow_and_update().clone();
        if current.same_apps(&last) || peer.peer_info().is_none() {
            last = current;
            continue;
        }
        let subscribed = subscriptions
            .lock()
            .map(|s| updated(&last, &current, s.iter()))
            .unwrap_or_default();
        last = current;
        let tools = peer.notify_tool_list_changed().await;
        let resources = peer.notify_resource_list_changed().await;
        if tools.is_err() || resources.is_err() {
            break;
        }
        for uri in subscribed {
            let _ = peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await;
        }
        tokio::time::sleep(aai_engine::NOTIFY_EVERY).await;
    }
}
