//! What the binary plugs into the engine: the apps and toolsets of other crates (the
//! scheduler's `local.schedule`). Every gateway and every scan the command line makes goes
//! through here, so each offers and runs the same built-in apps.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aai_engine::catalog::discovery::{PluggedApp, ScanOptions};
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Config;
use aai_engine::pipeline::Gateway;
use aai_executor::Executors;

/// The apps of the toolsets plugged into every gateway.
pub fn plugged_apps() -> Vec<PluggedApp> {
    vec![aai_schedule::app(), aai_drafts::tools::app()]
}

/// What to scan under `home` with `config`, the plugged apps included.
pub fn scan_options(home: &Path, config: &Config, dev: bool) -> ScanOptions {
    ScanOptions::new(home, config, dev).plug(config, &plugged_apps())
}

/// The executors of a gateway under `home`: the platforms' own, and the MCP servers of
/// `platforms.mcp` descriptors (their pins under `home`; the gateway hands them the user's
/// risks from the config).
pub fn executors(config: &Config, home: &Path) -> Executors {
    Executors::with_settings(config.executors.clone(), None)
        .with_mcp(aai_mcpapps::Servers::new(home))
}

/// Plugs the toolsets into `gateway`.
pub fn plug(gateway: &Arc<Gateway>) {
    aai_schedule::plug(gateway);
    aai_drafts::tools::plug(gateway);
}

/// A gateway over a fixed registry (see [`aai_engine::fixed_gateway`]), the toolsets plugged.
pub fn fixed_gateway(
    registry: Snapshot,
    config: Config,
    executors: Executors,
    data_db: PathBuf,
) -> Arc<Gateway> {
    let gateway = aai_engine::fixed_gateway(registry, config, executors, data_db);
    plug(&gateway);
    gateway
}
