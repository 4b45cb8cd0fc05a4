//! Live discovery: the first scan streams into the registry while the server already answers,
//! then file-system events (and a slow poll as a safety net) trigger re-scans. Each changed
//! snapshot is published on a `watch` channel; sessions turn it into `list_changed`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use aai_descriptor::Platform;
use notify::{RecursiveMode, Watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::discovery::{Found, ParseCache, ScanOptions, scan};
use crate::registry::Registry;

/// How often the first scan publishes what it has found so far.
const BATCH_EVERY: Duration = Duration::from_millis(200);
/// Events closer together than this are handled by one re-scan.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// A re-scan happens at least this often, in case file events are missed.
const POLL_EVERY: Duration = Duration::from_secs(10);

/// Starts discovery on its own thread and returns the channel of registry snapshots.
pub fn spawn(
    home: PathBuf,
    dev: bool,
    platforms: Vec<Platform>,
    cancel: CancellationToken,
) -> watch::Receiver<Arc<Registry>> {
    let (tx, rx) = watch::channel(Arc::new(Registry::default()));
    let spawned = std::thread::Builder::new()
        .name("aai-discovery".into())
        .spawn(move || run(&home, dev, &platforms, &cancel, &tx));
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start the discovery thread; no apps will be offered");
    }
    rx
}

fn options(home: &std::path::Path, dev: bool) -> ScanOptions {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    ScanOptions::new(home, &config, dev)
}

fn run(
    home: &std::path::Path,
    dev: bool,
    platforms: &[Platform],
    cancel: &CancellationToken,
    tx: &watch::Sender<Arc<Registry>>,
) {
    if let Err(error) = std::fs::create_dir_all(home) {
        tracing::warn!(home = %home.display(), %error, "cannot create the AAI home directory");
    }
    let cache = ParseCache::default();
    let (events_tx, events) = mpsc::channel::<()>();
    let mut watcher = match notify::recommended_watcher(
        move |event: notify::Result<notify::Event>| {
            if event.is_ok() {
                let _ = events_tx.send(());
            }
        },
    ) {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            tracing::warn!(%error, "file watching is unavailable; re-scanning every {} s", POLL_EVERY.as_secs());
            None
        }
    };
    let mut watched: Vec<PathBuf> = Vec::new();
    let mut first = true;
    while !cancel.is_cancelled() {
        let options = options(home, dev);
        if let Some(watcher) = watcher.as_mut() {
            let mut wanted = vec![home.to_path_buf()];
            wanted.extend(options.paths.iter().cloned());
            for path in &wanted {
                if !watched.contains(path) {
                    match watcher.watch(path, RecursiveMode::Recursive) {
                        Ok(()) => watched.push(path.clone()),
                        Err(error) => {
                            tracing::debug!(path = %path.display(), %error, "not watching")
                        }
                    }
                }
            }
        }
        rescan(&options, &cache, platforms, tx, first);
        first = false;
        // Wait for a change, then let a burst of events settle.
        match events.recv_timeout(POLL_EVERY) {
            Ok(()) => while events.recv_timeout(DEBOUNCE).is_ok() {},
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(POLL_EVERY.min(Duration::from_secs(1)))
            }
        }
    }
}

fn rescan(
    options: &ScanOptions,
    cache: &ParseCache,
    platforms: &[Platform],
    tx: &watch::Sender<Arc<Registry>>,
    streaming: bool,
) {
    let started = std::time::Instant::now();
    let mut found: Vec<Found> = Vec::new();
    scan(options, cache, BATCH_EVERY, |batch, done| {
        found.extend(batch);
        if !streaming && !done {
            return;
        }
        let registry = Registry::build(&found, platforms, done);
        let (changed, known) = {
            let current = tx.borrow();
            let changed = !current.same_apps(&registry)
                || current.complete != registry.complete
                || current.rejected.len() != registry.rejected.len();
            let known: std::collections::HashSet<String> =
                current.rejected.iter().map(ToString::to_string).collect();
            (changed, known)
        };
        if changed {
            if done {
                tracing::info!(
                    apps = registry.apps.len(),
                    rejected = registry.rejected.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "discovery finished"
                );
                // Each newly rejected file once, saying which file and why.
                for rejected in &registry.rejected {
                    let text = rejected.to_string();
                    if known.contains(&text) {
                        continue;
                    }
                    match rejected {
                        crate::registry::Rejected::Invalid(_) => {
                            tracing::warn!("descriptor rejected: {text}");
                        }
                        _ => tracing::info!("descriptor skipped: {text}"),
                    }
                }
            }
            tx.send_replace(Arc::new(registry));
        }
    });
}
