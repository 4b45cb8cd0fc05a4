//! What is plugged into the engine, in one place: the local kit (`aai-local`: files,
//! terminal, system, screen, input, apps, browser), the scheduler's `local.schedule`, the
//! drafts' `local.descriptors`, and the MCP servers' executor. Every gateway and every scan the
//! command line, the daemon and the dashboard use goes through here, so each offers and runs
//! the same built-in apps.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aai_engine::catalog::discovery::{PluggedApp, ScanOptions};
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Config;
use aai_engine::pipeline::Gateway;
use aai_executor::Executors;

/// The apps of the local kit, each offered where `local` in the config turns it on.
pub fn kit_apps() -> Vec<PluggedApp> {
    aai_local::apps()
        .map(|(descriptor, enabled)| {
            PluggedApp::new(descriptor, move |config: &Config| enabled(&config.local))
        })
        .collect()
}

/// The apps of the toolsets plugged into every gateway: the local kit's first.
pub fn plugged_apps() -> Vec<PluggedApp> {
    let mut apps = kit_apps();
    apps.extend([aai_schedule::app(), aai_drafts::tools::app()]);
    apps
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

/// Plugs the toolsets and the scheduler into `gateway`; returns the scheduler's hub, which its
/// loop shares (`aai_schedule::runner::spawn`, in the daemon).
pub fn plug(gateway: &Arc<Gateway>) -> Arc<aai_schedule::Hub> {
    gateway.plug_kit(Arc::new(aai_local::Local));
    // A drafted tool's click by pointer is refused where a protected app's window is on top.
    gateway
        .executors()
        .protection()
        .look_with(aai_local::window_at());
    aai_drafts::tools::plug(gateway);
    aai_schedule::plug(gateway)
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

/// A gateway over a fixed registry with the local kit plugged in and nothing else (tests and
/// benches that measure the local toolsets alone).
pub fn kit_gateway(
    registry: Snapshot,
    config: Config,
    executors: Executors,
    data_db: PathBuf,
) -> Arc<Gateway> {
    let gateway = aai_engine::fixed_gateway(registry, config, executors, data_db);
    gateway.plug_kit(Arc::new(aai_local::Local));
    gateway
        .executors()
        .protection()
        .look_with(aai_local::window_at());
    gateway
}
