//! The gateway's engine: what decides and runs a call, with no protocol in it — the config,
//! discovery and the snapshot of apps it offers, web apps and their credentials, the gate
//! (policy, consent, audit), the call pipeline, workflows, the emergency stop and the app
//! store's client. The MCP surface (`aai-server`) and the command line (`aai-gateway`) sit on
//! top; this crate knows neither. It does not parse arguments, install a log subscriber or
//! print.

pub mod appstore;
pub mod catalog;
pub mod config;
pub mod consent;
pub mod control;

pub mod feed;
pub mod gate;
pub mod pipeline;
pub mod private;
pub mod runfiles;
pub mod web;
pub mod workflow;

use std::sync::Arc;
use std::time::Duration;

use aai_descriptor::Platform;
use aai_executor::Executors;

use crate::catalog::discovery::{ParseCache, ScanOptions};
use crate::catalog::snapshot::Snapshot;

/// At most one `list_changed` per session in this interval; bursts of changes are coalesced.
pub const NOTIFY_EVERY: Duration = Duration::from_millis(250);

/// Scans once, synchronously, and returns the complete registry (for the CLI and benchmarks),
/// with the descriptor cache of the home scanned.
pub fn scan_once(options: &ScanOptions, platforms: &[Platform]) -> Snapshot {
    let mut found = Vec::new();
    crate::catalog::discovery::scan(
        options,
        &ParseCache::on_disk(&options.home),
        Duration::from_secs(3600),
        |batch, _| {
            found.extend(batch);
        },
    );
    Snapshot::build(&found, platforms, true)
}

/// A gateway over a fixed registry, with no discovery thread (for the CLI, tests and
/// benchmarks). `data_db` is where its audit log and grants live.
pub fn fixed_gateway(
    registry: Snapshot,
    config: config::Config,
    executors: Executors,
    data_db: std::path::PathBuf,
) -> Arc<pipeline::Gateway> {
    let (_tx, rx) = tokio::sync::watch::channel(Arc::new(registry));
    let home = data_db.parent().map_or_else(
        || std::path::PathBuf::from("."),
        std::path::Path::to_path_buf,
    );
    pipeline::Gateway::new(rx, config, executors, data_db, &home)
}
