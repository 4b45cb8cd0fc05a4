//! Live discovery: the first scan streams into the registry while the server already answers,
//! then file-system events (and a slow poll as a safety net) trigger re-scans. Each changed
//! snapshot is published on a `watch` channel; sessions turn it into `list_changed`.
//!
//! The home folder also holds the gateway's own busy files (the log, the audit database), so
//! only events that can change what is offered start a re-scan, and a burst settles for at
//! most [`SETTLE_AT_MOST`]: a steady trickle of writes can never hold discovery back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use aai_descriptor::Platform;
use notify::event::{CreateKind, ModifyKind, RemoveKind};
use notify::{Event, EventKind, RecursiveMode, Watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::catalog::discovery::{Found, ParseCache, ScanOptions, scan};
use crate::catalog::snapshot::Snapshot;
use crate::config::live::LiveConfig;

/// How often the first scan publishes what it has found so far.
const BATCH_EVERY: Duration = Duration::from_millis(400);
/// Events closer together than this are handled by one re-scan.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// A burst of events delays its re-scan by at most this much.
const SETTLE_AT_MOST: Duration = Duration::from_millis(500);
/// After the first scan, discovery's own work waits this long at most for the first
/// `tools/list` to go out.
const FIRST_LIST_AT_MOST: Duration = Duration::from_millis(500);
/// A re-scan happens at least this often, in case file events are missed.
const POLL_EVERY: Duration = Duration::from_secs(10);

/// Starts discovery on its own thread and returns the channel of registry snapshots.
///
/// Each pass reads `config.json` again through `config` first: a new valid config is in force
/// before the snapshot that announces it is published. `plugged` are the apps of toolsets
/// other crates plug in, offered as built-in apps where the config says so.
pub fn spawn(
    home: PathBuf,
    dev: bool,
    plugged: Vec<crate::catalog::discovery::PluggedApp>,
    config: Arc<LiveConfig>,
    cancel: CancellationToken,
) -> watch::Receiver<Arc<Snapshot>> {
    let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
    let spawned = std::thread::Builder::new()
        .name("aai-discovery".into())
        .spawn(move || run(&home, dev, &plugged, &config, &cancel, &tx));
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start the discovery thread; no apps will be offered");
    }
    rx
}

fn run(
    home: &Path,
    dev: bool,
    plugged: &[crate::catalog::discovery::PluggedApp],
    live: &LiveConfig,
    cancel: &CancellationToken,
    tx: &watch::Sender<Arc<Snapshot>>,
) {
    if let Err(error) = std::fs::create_dir_all(home) {
        tracing::warn!(home = %home.display(), %error, "cannot create the AAI home directory");
    }
    let cache = Arc::new(ParseCache::on_disk(home));
    // The descriptor cache is the longest part of a warm start's first scan and needs nothing
    // else: its reading starts now, and the scan waits for it where it needs it.
    let seeding = {
        let cache = cache.clone();
        let fetched = crate::catalog::discovery::FetchedRoots::of(home);
        std::thread::Builder::new()
            .name("aai-cache".into())
            .spawn(move || cache.seed(&fetched))
    };
    if let Err(error) = seeding {
        tracing::debug!(%error, "the descriptor cache is read by the scan itself");
    }
    let (events_tx, events) = mpsc::channel::<Event>();
    // Made when the first watches are added, after the first scan.
    let mut events_tx = Some(events_tx);
    let mut watcher: Option<notify::RecommendedWatcher> = None;
    let mut watched: Vec<PathBuf> = Vec::new();
    let mut first = true;
    let mut last = None;
    while !cancel.is_cancelled() {
        live.reload();
        let config = live.get();
        let options = ScanOptions::new(home, &config, dev).plug(&config, plugged);
        let generation = live.generation();
        rescan(
            &options,
            &cache,
            (&config.platforms, generation),
            tx,
            first,
            &mut last,
        );
        if first {
            // What follows (watches that walk every folder, then one more scan) would compete
            // for the cores with the first `tools/list` a client is waiting for: it goes
            // first, unless no client asks for it soon.
            let current = tx.borrow().clone();
            current.listed.wait(FIRST_LIST_AT_MOST);
        }
        first = false;
        // Watches are added after the scan (a recursive watch walks every folder: at 10,000
        // apps that is longer than the scan itself), then the folders are looked at once
        // more, so nothing that changed in between is missed.
        let mut added = false;
        if let Some(events_tx) = events_tx.take() {
            watcher = match notify::recommended_watcher(move |event: notify::Result<Event>| {
                if let Ok(event) = event {
                    let _ = events_tx.send(event);
                }
            }) {
                Ok(watcher) => Some(watcher),
                Err(error) => {
                    tracing::warn!(%error, "file watching is unavailable; re-scanning every {} s", POLL_EVERY.as_secs());
                    None
                }
            };
        }
        if let Some(watcher) = watcher.as_mut() {
            let mut wanted = vec![home.to_path_buf()];
            wanted.extend(options.paths.iter().cloned());
            for path in &wanted {
                if !watched.contains(path) {
                    match watcher.watch(path, RecursiveMode::Recursive) {
                        Ok(()) => {
                            watched.push(path.clone());
                            added = true;
                        }
                        Err(error) => {
                            tracing::debug!(path = %path.display(), %error, "not watching")
                        }
                    }
                }
            }
        }
        if added {
            continue;
        }
        let relevant = Relevant::new(home, &options, &cache);
        wait_for_change(&events, &relevant);
    }
}

/// What a file-system event must touch to be worth a re-scan.
struct Relevant<'a> {
    config: PathBuf,
    /// Workflow files are offered as tools.
    workflows: PathBuf,
    /// Configured paths (a configured file may have any name).
    paths: Vec<PathBuf>,
    /// Every descriptor file the last scan loaded (not a second list of 10,000 paths).
    seen: &'a ParseCache,
    /// The gateway's own cache folder.
    cache: PathBuf,
    /// The store apps the user prefers over other sources: a change reorders them.
    preferred: PathBuf,
}

impl<'a> Relevant<'a> {
    fn new(home: &Path, options: &ScanOptions, seen: &'a ParseCache) -> Self {
        Self {
            config: home.join(crate::config::CONFIG_FILE),
            workflows: home.join(crate::workflow::DIR),
            paths: options.paths.clone(),
            seen,
            cache: home.join("cache"),
            preferred: crate::catalog::store_apps::preferred_file(home),
        }
    }

    /// A descriptor or the config changed, a folder appeared or went away (an app folder moved
    /// in, or one that held a known descriptor moved out). Writes to the gateway's log, its
    /// database or temporary files are not.
    fn matters(&self, event: &Event) -> bool {
        if matches!(event.kind, EventKind::Access(_)) {
            return false;
        }
        let structural = matches!(
            event.kind,
            EventKind::Create(CreateKind::Folder | CreateKind::Any | CreateKind::Other)
                | EventKind::Remove(RemoveKind::Folder | RemoveKind::Any | RemoveKind::Other)
                | EventKind::Modify(ModifyKind::Name(_))
                | EventKind::Any
                | EventKind::Other
        );
        event.paths.iter().any(|path| {
            if path.starts_with(&self.cache) {
                return false;
            }
            path.file_name().is_some_and(|name| name == "aai.json")
                || *path == self.config
                || *path == self.preferred
                || path.parent() == Some(self.workflows.as_path())
                || self.paths.iter().any(|p| p == path)
                || (structural && (path.is_dir() || self.seen.holds_under(path)))
        })
    }
}

/// Blocks until a relevant change has settled, or until the poll interval has passed.
fn wait_for_change(events: &Receiver<Event>, relevant: &Relevant) {
    let poll_at = Instant::now() + POLL_EVERY;
    loop {
        let left = poll_at.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(event) if relevant.matters(&event) => break,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => return,
            Err(RecvTimeoutError::Disconnected) => {
                // No watcher: poll, but at least once a second.
                std::thread::sleep(left.min(Duration::from_secs(1)));
                return;
            }
        }
    }
    // Let the burst settle: until DEBOUNCE passes quietly, never beyond SETTLE_AT_MOST.
    let give_up = Instant::now() + SETTLE_AT_MOST;
    let mut quiet_at = Instant::now() + DEBOUNCE;
    loop {
        let left = quiet_at
            .min(give_up)
            .saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(event) if relevant.matters(&event) => quiet_at = Instant::now() + DEBOUNCE,
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// What a scan found, as one number: the same files in the same places with the same parse
/// results (an unchanged file's entry is handed out again, so its id stays) give the same
/// number, in any order.
fn fingerprint(found: &[Found]) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    found.iter().fold(found.len() as u64, |sum, item| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        item.rank.hash(&mut hasher);
        item.source.hash(&mut hasher);
        item.path.as_os_str().as_encoded_bytes().hash(&mut hasher);
        match &item.outcome {
            Ok(entry) => entry.id().hash(&mut hasher),
            Err(error) => error.to_string().hash(&mut hasher),
        }
        sum.wrapping_add(hasher.finish())
    })
}

/// Scans once and publishes what changed. `last` is the [`fingerprint`] of the scan the
/// current complete snapshot was built from: a scan that finds the same builds nothing (at
/// 10,000 apps a second registry, built only to be compared and dropped, cost ~14 MB).
fn rescan(
    options: &ScanOptions,
    cache: &ParseCache,
    (platforms, generation): (&[Platform], u64),
    tx: &watch::Sender<Arc<Snapshot>>,
    streaming: bool,
    last: &mut Option<u64>,
) {
    let started = Instant::now();
    let parsed_before = cache.parsed();
    let mut found: Vec<Found> = Vec::new();
    // Read once per scan; every snapshot this scan publishes carries them.
    let workflows = crate::workflow::scan(&options.home);
    scan(options, cache, BATCH_EVERY, |batch, done| {
        let heartbeat = batch.is_empty() && !done;
        found.extend(batch);
        if !streaming && !done {
            return;
        }
        if heartbeat {
            // The scan goes on (see `scan`): a first `tools/list` waiting for it waits on.
            // Sessions compare apps before they announce a change, so this announces nothing.
            let current = tx.borrow().clone();
            tx.send_replace(current);
            return;
        }
        let scanned = done.then(|| fingerprint(&found));
        let current_is_it = || {
            let current = tx.borrow();
            current.complete
                && current.workflows == workflows
                && current.config_generation == generation
        };
        if scanned.is_some() && scanned == *last && current_is_it() {
            return;
        }
        let mut registry = Snapshot::build(&found, platforms, done);
        registry.workflows.clone_from(&workflows);
        registry.config_generation = generation;
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
                    parsed = cache.parsed() - parsed_before,
                    ms = started.elapsed().as_millis() as u64,
                    "discovery finished"
                );
                for workflow in &registry.workflows {
                    if let Err(problem) = &workflow.loaded {
                        tracing::warn!("workflow {} is not offered: {problem}", workflow.name);
                    }
                }
                // Each newly rejected file once, saying which file and why.
                for rejected in &registry.rejected {
                    let text = rejected.to_string();
                    if known.contains(&text) {
                        continue;
                    }
                    match rejected {
                        crate::catalog::snapshot::Rejected::Invalid(_) => {
                            tracing::warn!("descriptor rejected: {text}");
                        }
                        _ => tracing::info!("descriptor skipped: {text}"),
                    }
                }
            }
            tx.send_replace(Arc::new(registry));
        }
        if scanned.is_some() {
            *last = scanned;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, path: &Path) -> Event {
        Event::new(kind).add_path(path.to_path_buf())
    }

    #[test]
    fn a_scan_that_finds_the_same_has_the_same_fingerprint() {
        let descriptor = |id: &str| {
            let doc = serde_json::json!({"schema_version": "1.0", "appId": id, "name": id,
                "description": "An app.", "platforms": {"linux": {"automation": "dbus",
                "service": "org.example.App", "object": "/org/example/App",
                "interface": "org.example.App", "tools": []}}});
            Arc::new(aai_descriptor::parse(id, doc.to_string().as_bytes()).expect("valid"))
        };
        let a = crate::catalog::cache::Entry::held(descriptor("org.example.a"));
        let b = crate::catalog::cache::Entry::held(descriptor("org.example.b"));
        let found = |rank: usize, name: &str, entry: &Arc<crate::catalog::cache::Entry>| Found {
            rank,
            source: crate::catalog::discovery::Source::UserWritten,
            path: PathBuf::from(format!("/home/{name}/aai.json")),
            outcome: Ok(entry.clone()),
        };
        let first = fingerprint(&[found(0, "a", &a), found(1, "b", &b)]);
        // Workers hand results over in any order.
        assert_eq!(first, fingerprint(&[found(1, "b", &b), found(0, "a", &a)]));
        // A file parsed again (it changed) is a new entry.
        let b_again = crate::catalog::cache::Entry::held(descriptor("org.example.b"));
        assert_ne!(
            first,
            fingerprint(&[found(0, "a", &a), found(1, "b", &b_again)])
        );
        // A file gone, moved, or ranked differently.
        assert_ne!(first, fingerprint(&[found(0, "a", &a)]));
        assert_ne!(first, fingerprint(&[found(0, "a", &a), found(1, "c", &b)]));
        assert_ne!(first, fingerprint(&[found(1, "a", &a), found(0, "b", &b)]));
        // A rejected file counts by its problem.
        let broken = |message: &str| Found {
            rank: 1,
            source: crate::catalog::discovery::Source::UserWritten,
            path: PathBuf::from("/home/b/aai.json"),
            outcome: Err(aai_descriptor::LoadError {
                source_name: "/home/b/aai.json".into(),
                problems: vec![aai_descriptor::Problem::new("", message.to_owned())],
            }),
        };
        let rejected = fingerprint(&[found(0, "a", &a), broken("not JSON")]);
        assert_ne!(first, rejected);
        assert_ne!(
            rejected,
            fingerprint(&[found(0, "a", &a), broken("no appId")])
        );
    }

    #[test]
    fn only_events_that_can_change_the_offer_matter() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path();
        let app = home.join("org.example.app");
        std::fs::create_dir_all(&app).expect("mkdir");
        let extra = home.join("elsewhere/tool.descriptor");
        // The last scan loaded two files; one folder has moved away since.
        let cache = ParseCache::default();
        for folder in [&app, &home.join("gone.app")] {
            std::fs::create_dir_all(folder).expect("mkdir");
            std::fs::write(folder.join("aai.json"), "{}").expect("write");
            let _ = crate::catalog::discovery::load(&folder.join("aai.json"), false, &cache);
        }
        std::fs::remove_dir_all(home.join("gone.app")).expect("move away");
        let relevant = Relevant::new(
            home,
            &ScanOptions {
                home: home.to_path_buf(),
                paths: vec![extra.clone()],
                ..ScanOptions::default()
            },
            &cache,
        );
        let data = EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any));
        let renamed = EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::From));
        let matters = [
            event(data, &app.join("aai.json")),
            event(
                EventKind::Create(CreateKind::File),
                &home.join("new/aai.json"),
            ),
            event(data, &home.join("config.json")),
            event(data, &home.join("workflows/report.json")),
            event(data, &extra),
            // The user chose a store app over another source: the ranking changes.
            event(renamed, &crate::catalog::store_apps::preferred_file(home)),
            event(EventKind::Create(CreateKind::Folder), &app),
            // A folder that held a known descriptor was moved away (it no longer exists).
            event(renamed, &home.join("gone.app")),
            event(
                EventKind::Remove(RemoveKind::Folder),
                &home.join("gone.app"),
            ),
        ];
        for event in &matters {
            assert!(relevant.matters(event), "{event:?}");
        }
        let noise = [
            event(data, &home.join("logs/aai-gateway.log")),
            event(renamed, &home.join("logs/aai-gateway.log")),
            event(
                EventKind::Create(CreateKind::File),
                &home.join("data.db-wal"),
            ),
            event(data, &home.join("web/x/.aai.json.tmp")),
            event(data, &home.join("store/index.json")),
            event(
                EventKind::Remove(RemoveKind::File),
                &home.join("data.db-journal"),
            ),
            event(
                EventKind::Access(notify::event::AccessKind::Any),
                &app.join("aai.json"),
            ),
            // A folder's attributes changing is not a folder appearing.
            event(
                EventKind::Modify(ModifyKind::Metadata(notify::event::MetadataKind::Any)),
                &app,
            ),
        ];
        for event in &noise {
            assert!(!relevant.matters(event), "{event:?}");
        }
    }

    const APP: &str = r#"{"schema_version":"1.0","appId":"org.example.late","name":"Late",
        "description":"Arrives while the log is busy","platforms":{"linux":{"automation":"dbus",
        "service":"org.example.Late","object":"/","interface":"org.example.Late",
        "tools":[{"name":"go","description":"Go","method":"Go"}]}}}"#;

    /// A log written every few milliseconds in the home folder must not hold back the
    /// re-scan that a new descriptor needs (it once did, until the 10 s poll never came).
    #[test]
    fn a_busy_log_never_holds_back_a_new_app() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().to_path_buf();
        let cancel = CancellationToken::new();
        let config = Arc::new(LiveConfig::load(&home));
        let mut registry = spawn(home.clone(), false, Vec::new(), config, cancel.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let has = |registry: &Snapshot, id: &str| registry.apps.iter().any(|a| a.id() == id);
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), async {
                while !registry.borrow_and_update().complete {
                    registry.changed().await.expect("discovery runs");
                }
            })
            .await
            .expect("first scan");
        });
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (home, stop) = (home.clone(), stop.clone());
            std::thread::spawn(move || {
                use std::io::Write;
                std::fs::create_dir_all(home.join("logs")).expect("logs");
                let mut log = std::fs::File::create(home.join("logs/gateway.log")).expect("log");
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = writeln!(log, "a debug line");
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        let app = home.join("org.example.late");
        std::fs::create_dir_all(&app).expect("mkdir");
        std::fs::write(app.join("aai.json"), APP).expect("write");
        // Well inside the 10 s poll: only the file event can bring the app this soon.
        let arrived = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), async {
                while !has(&registry.borrow_and_update(), "org.example.late") {
                    registry.changed().await.expect("discovery runs");
                }
            })
            .await
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().expect("writer");
        cancel.cancel();
        assert!(
            arrived.is_ok(),
            "the new app was not offered while the log was busy"
        );
    }
}
