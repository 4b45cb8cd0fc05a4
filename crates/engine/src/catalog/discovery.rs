//! Finding and loading descriptors: `AAI_HOME/<appId>/aai.json`, configured paths, copies from
//! the web registry (`AAI_HOME/web`) and the app store (`AAI_HOME/store/apps`), macOS app
//! bundles, and Xcode build folders with `--dev`.
//!
//! When two sources offer one appId, [`Source`] decides which wins: what the user wrote or
//! configured comes before anything fetched, unless the user chose a store app over it.
//!
//! Loading is parallel and streams results, so a huge or slow scan path never holds up the
//! server; unreadable, oversized or non-regular files become rejections, never crashes.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use aai_descriptor::{LoadError, Problem};

use crate::catalog::cache::{DiskCache, Entry, MAX_DESCRIPTOR_BYTES, Stamp, Summary};

/// A valid descriptor's entry, shared between scans while its file is unchanged, or why
/// the file is not one.
pub type Outcome = Result<Arc<Entry>, LoadError>;

/// Where to look.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    pub home: PathBuf,
    pub paths: Vec<PathBuf>,
    pub dev: bool,
    /// The gateway's built-in apps, offered ahead of every file.
    pub builtins: Vec<Found>,
}

/// Whether a config offers a plugged-in app.
pub type Offered = Arc<dyn Fn(&crate::config::Config) -> bool + Send + Sync>;

/// The app of a toolset another crate plugs in (the local kit, the scheduler, the drafts; see
/// `compose.rs` in the binary): its descriptor, and whether a config offers it.
#[derive(Clone)]
pub struct PluggedApp {
    pub descriptor: Arc<aai_descriptor::Descriptor>,
    pub offered: Offered,
}

impl PluggedApp {
    /// `descriptor`, offered where `offered` says so.
    pub fn new(
        descriptor: Arc<aai_descriptor::Descriptor>,
        offered: impl Fn(&crate::config::Config) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            descriptor,
            offered: Arc::new(offered),
        }
    }
}

impl ScanOptions {
    /// What to scan under `home` with `config`: its `paths`, and no built-in app yet
    /// ([`ScanOptions::plug`] adds them).
    pub fn new(home: &Path, config: &crate::config::Config, dev: bool) -> Self {
        Self {
            home: home.to_path_buf(),
            paths: config.paths.clone(),
            dev,
            builtins: Vec::new(),
        }
    }

    /// These options with `apps` offered as built-in apps where `config` says so, after those
    /// already plugged.
    #[must_use]
    pub fn plug(mut self, config: &crate::config::Config, apps: &[PluggedApp]) -> Self {
        self.builtins.extend(builtins(
            apps.iter()
                .filter(|app| (app.offered)(config))
                .map(|app| app.descriptor.clone())
                .collect(),
        ));
        self
    }
}

/// Built-in apps as discovery results, ahead of every file.
fn builtins(descriptors: Vec<Arc<aai_descriptor::Descriptor>>) -> Vec<Found> {
    descriptors
        .into_iter()
        .map(|descriptor| Found {
            rank: 0,
            source: Source::BuiltIn,
            path: PathBuf::from(format!("built in: {}", descriptor.app_id)),
            outcome: Ok(Entry::held(descriptor)),
        })
        .collect()
}

/// Where a descriptor was found. When two sources offer one appId, the one with the lower
/// [`Source::precedence`] wins (then the earlier file): the user's choice of a store app, the
/// gateway's built-in apps, what the user wrote in `AAI_HOME`, configured paths, copies from
/// the web registry, app bundles, and last the app store — so nothing fetched replaces the
/// user's own app unless the user said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A store app the user chose over another source (`store install --prefer-store`).
    PreferredStore,
    BuiltIn,
    /// `AAI_HOME/<appId>/aai.json`, put there by the user.
    UserWritten,
    /// A configured folder of `paths` (its `aai.json` or one in a subfolder).
    ConfiguredFolder,
    /// A configured file of `paths`.
    ConfiguredFile,
    /// A copy from the web registry (`AAI_HOME/web`).
    WebRegistry,
    /// Installed by an agent with the user's approval (`AAI_HOME/agent/<appId>/aai.json`):
    /// loads as fetched, and never takes the place of an app from another source.
    AgentInstalled,
    /// Found by `web_discover` (held in memory, never in a snapshot's ranking).
    Discovered,
    /// A macOS app bundle (or an Xcode build with `--dev`).
    Bundle,
    /// An app installed from the app store (`AAI_HOME/store/apps`, or a folder of `AAI_HOME`
    /// with a store mark that an earlier version wrote).
    Store,
}

impl Source {
    /// Lower wins an appId offered twice.
    pub fn precedence(self) -> u8 {
        match self {
            Self::PreferredStore => 0,
            Self::BuiltIn => 1,
            Self::UserWritten => 2,
            Self::ConfiguredFolder | Self::ConfiguredFile => 3,
            Self::WebRegistry | Self::Discovered | Self::AgentInstalled => 4,
            Self::Bundle => 5,
            Self::Store => 6,
        }
    }

    /// The source in words, for `--scan`, `aai_apps` and refusals.
    pub fn words(self) -> &'static str {
        match self {
            Self::PreferredStore => "app store (preferred by the user)",
            Self::BuiltIn => "built-in",
            Self::UserWritten => "user-written",
            Self::ConfiguredFolder => "configured folder",
            Self::ConfiguredFile => "configured file",
            Self::WebRegistry => "web registry",
            Self::AgentInstalled => "installed by an agent (approved by the user)",
            Self::Discovered => "web (discovered)",
            Self::Bundle => "app bundle",
            Self::Store => "app store",
        }
    }

    /// An app installed from the app store.
    pub fn is_store(self) -> bool {
        matches!(self, Self::Store | Self::PreferredStore)
    }
}

/// The folders whose descriptors are copies from the network — the web registry's and the
/// app store's — and so never the user's own: they load as `fetched` (no environment variable
/// or stored key without a binding the user approved), decided by where the file is, one path
/// prefix test per file and no look at the disk.
#[derive(Debug, Clone)]
pub struct FetchedRoots(Vec<PathBuf>);

impl FetchedRoots {
    pub fn of(home: &Path) -> Self {
        Self(vec![
            home.join("web"),
            home.join("agent"),
            crate::catalog::store_apps::apps_dir(home),
        ])
    }

    pub fn holds(&self, path: &Path) -> bool {
        self.0.iter().any(|root| path.starts_with(root))
    }
}

/// The outcome of loading one candidate file.
#[derive(Debug, Clone)]
pub struct Found {
    /// Position in the candidate list: among files of one [`Source::precedence`], lower
    /// wins when two share an appId.
    pub rank: usize,
    pub source: Source,
    pub path: PathBuf,
    pub outcome: Outcome,
}

/// Candidate files in the order they are listed (precedence is [`Source`]'s): the store's
/// apps, the home, the web registry's copies, configured paths, then bundles.
pub fn candidates(options: &ScanOptions) -> Vec<PathBuf> {
    guesses(options)
        .into_iter()
        .filter(|guess| guess.required || guess.path.exists())
        .map(|guess| guess.path)
        .collect()
}

/// A file that may hold a descriptor.
struct Guess {
    path: PathBuf,
    /// Reported as missing when it does not exist (a configured file, a bundle's); other
    /// guesses are skipped then.
    required: bool,
    source: Source,
}

/// [`candidates`] before the files in folders are looked for. The scan's workers check that
/// each exists as they load, so a home of 10,000 folders is not stat'ed twice, one by one.
fn guesses(options: &ScanOptions) -> Vec<Guess> {
    let optional = |source: Source| {
        move |path| Guess {
            path,
            required: false,
            source,
        }
    };
    let mut guessed = Vec::new();
    // Store apps are listed before the home's folders so that, among store copies of one
    // appId, the one in its place wins over one an earlier version left in the home.
    let store = crate::catalog::store_apps::apps_dir(&options.home);
    // One small file read per scan, not a mark per app.
    let preferred = crate::catalog::store_apps::preferred(&options.home);
    children_with(&store, &mut guessed);
    let mut files: Vec<Guess> = Vec::with_capacity(guessed.len());
    files.extend(guessed.drain(..).map(|path| {
        let chosen = path
            .parent()
            .and_then(Path::file_name)
            .and_then(OsStr::to_str)
            .is_some_and(|app_id| preferred.contains(app_id));
        optional(if chosen {
            Source::PreferredStore
        } else {
            Source::Store
        })(path)
    }));
    children_with(&options.home, &mut guessed);
    files.extend(guessed.drain(..).map(optional(Source::UserWritten)));
    children_with(&options.home.join("web"), &mut guessed);
    files.extend(guessed.drain(..).map(optional(Source::WebRegistry)));
    children_with(&options.home.join("agent"), &mut guessed);
    files.extend(guessed.drain(..).map(optional(Source::AgentInstalled)));
    for path in &options.paths {
        if path.is_dir() {
            files.push(optional(Source::ConfiguredFolder)(path.join("aai.json")));
            children_with(path, &mut guessed);
            files.extend(guessed.drain(..).map(optional(Source::ConfiguredFolder)));
        } else {
            files.push(Guess {
                path: path.clone(),
                required: true,
                source: Source::ConfiguredFile,
            });
        }
    }
    let mut bundles = Vec::new();
    if cfg!(target_os = "macos") {
        let home = crate::config::user_home();
        for root in [PathBuf::from("/Applications"), home.join("Applications")] {
            bundle_candidates(&root, &mut bundles);
        }
    }
    if options.dev {
        let derived = crate::config::user_home().join("Library/Developer/Xcode/DerivedData");
        for project in sorted_entries(&derived) {
            for config in sorted_entries(&project.join("Build/Products")) {
                bundle_candidates(&config, &mut bundles);
            }
        }
    }
    files.extend(bundles.into_iter().map(|path| Guess {
        path,
        required: true,
        source: Source::Bundle,
    }));
    files
}

/// `<dir>/*/aai.json` for every folder (or link) in `dir`, sorted; whether each exists is
/// left to the loader.
fn children_with(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    // Sorted by name before the paths are made: for names under one folder that is the
    // order of the paths, and comparing bytes is cheaper than comparing path components.
    let mut names: Vec<OsString> = read
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink()))
        .map(|e| e.file_name())
        .collect();
    names.sort_unstable();
    out.extend(names.iter().map(|name| dir.join(name).join("aai.json")));
}

/// `<root>/*.app/Contents/Resources/aai.json` (the spec's `find -maxdepth 4`).
pub fn bundle_candidates(root: &Path, out: &mut Vec<PathBuf>) {
    for bundle in sorted_entries(root) {
        let file = bundle.join("Contents/Resources/aai.json");
        if file.exists() {
            out.push(file);
        }
    }
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    entries
}

/// One file's last parse result, in two words: a valid entry carries its file's path and
/// stamp itself, an invalid file's stamp and problems are boxed (at 10,000 apps the table
/// has 16,384 places).
enum Cached {
    Valid(Arc<Entry>),
    Invalid(Box<(Stamp, LoadError)>),
}

impl Cached {
    /// The stamp of the file this result was read from (`None` for an entry held in memory,
    /// which is then never taken as unchanged).
    fn stamp(&self) -> Option<Stamp> {
        match self {
            Self::Valid(entry) => entry.file_stamp().map(|(_, stamp)| stamp),
            Self::Invalid(invalid) => Some(invalid.0),
        }
    }

    fn outcome(&self) -> Outcome {
        match self {
            Self::Valid(entry) => Ok(entry.clone()),
            Self::Invalid(invalid) => Err(invalid.1.clone()),
        }
    }
}

/// Parse results of earlier scans, keyed by path; seeded from the descriptor cache on disk.
#[derive(Default)]
pub struct ParseCache {
    /// By path (as bytes: hashing a `Path` walks its components, ten times slower).
    entries: Mutex<HashMap<Box<OsStr>, Cached>>,
    /// The cache file, when this process keeps one.
    disk: Option<DiskCache>,
    /// Whether the disk holds what `entries` holds (no file parsed, none gone since).
    saved: AtomicBool,
    /// Run once; a second caller waits until the first has read the file.
    seeded: std::sync::OnceLock<()>,
    /// Files parsed so far (the rest came from this cache).
    parsed: std::sync::atomic::AtomicUsize,
}

impl ParseCache {
    /// A cache kept in `home`'s descriptor cache file across runs (none for an empty path).
    pub fn on_disk(home: &Path) -> Self {
        Self {
            disk: (!home.as_os_str().is_empty()).then(|| DiskCache::new(home)),
            ..Self::default()
        }
    }

    /// Whether the last scan loaded a file at or under `path` (a folder that moved away
    /// may have held a descriptor).
    pub fn holds_under(&self, path: &Path) -> bool {
        self.entries
            .lock()
            .is_ok_and(|entries| entries.keys().any(|file| Path::new(file).starts_with(path)))
    }

    /// How many files were parsed (not taken from the cache) since this cache was made.
    pub fn parsed(&self) -> usize {
        self.parsed.load(Ordering::SeqCst)
    }

    /// Reads the disk cache once, before the first scan. Entries under `fetched` are marked
    /// as fetched from the network by where they are; a cache row can add the mark (a store
    /// app an earlier version put in a folder of `AAI_HOME`, seen when it was parsed) but
    /// never take it away.
    pub(crate) fn seed(&self, fetched: &FetchedRoots) {
        let Some(disk) = &self.disk else { return };
        self.seeded.get_or_init(|| self.seed_from(disk, fetched));
    }

    /// Whether the disk cache has been read into this one (or there is none to read).
    fn seeded(&self) -> bool {
        self.disk.is_none() || self.seeded.get().is_some()
    }

    fn seed_from(&self, disk: &DiskCache, fetched_roots: &FetchedRoots) {
        // Each row becomes its entry as it is read; they are kept only if the whole file was
        // good.
        let mut seeded: HashMap<Box<OsStr>, Cached> = HashMap::new();
        let read = disk.read_each(|row, promised| {
            if seeded.is_empty() {
                seeded.reserve(promised);
            }
            let fetched = row.fetched || fetched_roots.holds(&row.path);
            let listing = row.listing.map(|(budget, text)| (budget, Arc::from(text)));
            let key: Box<OsStr> = row.path.as_os_str().into();
            let entry = Entry::file(row.path, row.stamp, fetched, row.summary, listing);
            seeded.insert(key, Cached::Valid(entry));
        });
        if read.is_none() {
            return;
        }
        if let Ok(mut entries) = self.entries.lock() {
            if entries.is_empty() {
                *entries = seeded;
            } else {
                for (key, cached) in seeded {
                    entries.entry(key).or_insert(cached);
                }
            }
        }
        self.saved.store(true, Ordering::SeqCst);
    }

    /// After a scan of `seen`: forgets files no longer found and, when anything changed,
    /// writes the valid entries to disk (a failure to write is logged; the cache is only
    /// a speed-up).
    fn settle(&self, seen: &HashSet<&std::ffi::OsStr>) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let before = entries.len();
        entries.retain(|path, _| seen.contains(&**path));
        if entries.len() != before {
            self.saved.store(false, Ordering::SeqCst);
        }
        let Some(disk) = &self.disk else { return };
        if self.saved.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut rows: Vec<(&Path, Stamp, &Entry)> = entries
            .iter()
            .filter_map(|(path, cached)| {
                let Cached::Valid(entry) = cached else {
                    return None;
                };
                // Only files: built-in apps and fetched copies held in memory are not cached.
                let (_, stamp) = entry.file_stamp()?;
                Some((Path::new(path), stamp, &**entry))
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        if let Err(error) = disk.write(rows.into_iter()) {
            tracing::debug!(file = %disk.file().display(), "descriptor cache not written: {error}");
            self.saved.store(false, Ordering::SeqCst);
        }
    }
}

fn reject(path: &Path, message: String) -> Outcome {
    Err(LoadError {
        source_name: path.display().to_string(),
        problems: vec![Problem::new("", message)],
    })
}

/// What the loader needs to know of a file before it reads it (kept instead of the whole
/// `Metadata`: a scan holds one per candidate between its two passes).
#[derive(Clone, Copy)]
struct Probe {
    regular: bool,
    stamp: Stamp,
}

impl Probe {
    fn of(path: &Path) -> std::io::Result<Self> {
        std::fs::metadata(path).map(|metadata| Self {
            regular: metadata.is_file(),
            stamp: Stamp::of(&metadata),
        })
    }
}

/// Loads one candidate. Only regular files are opened, so a FIFO or device can't block us.
/// `fetched`: the file is a copy from the network (under one of the [`FetchedRoots`]).
pub fn load(path: &Path, fetched: bool, cache: &ParseCache) -> Outcome {
    load_with(path, Probe::of(path), fetched, false, cache)
}

/// [`load`] with the file looked at already. `marked_fetched`: when the file is parsed, a
/// store mark beside it makes it fetched too (a store app an earlier version installed in a
/// folder of `AAI_HOME`, until it is moved): one more look at the disk only when the file is
/// read anyway.
fn load_with(
    path: &Path,
    probe: std::io::Result<Probe>,
    fetched: bool,
    marked_fetched: bool,
    cache: &ParseCache,
) -> Outcome {
    let Probe { regular, stamp } = match probe {
        Ok(probe) => probe,
        Err(error) => return reject(path, format!("cannot read: {error}")),
    };
    if !regular {
        return reject(path, "not a regular file".to_owned());
    }
    if stamp.len > MAX_DESCRIPTOR_BYTES {
        return reject(
            path,
            format!(
                "{} bytes is larger than the {MAX_DESCRIPTOR_BYTES}-byte limit for a descriptor",
                stamp.len
            ),
        );
    }
    if let Some(outcome) = cache.entries.lock().ok().and_then(|c| {
        c.get(path.as_os_str())
            .filter(|cached| cached.stamp().is_some_and(|seen| seen.same(&stamp)))
            .map(Cached::outcome)
    }) {
        return outcome;
    }
    // Parsed (and so validated) once; what is kept is its summary, not the descriptor.
    cache.parsed.fetch_add(1, Ordering::SeqCst);
    let fetched = fetched
        || (marked_fetched
            && path
                .with_file_name(crate::catalog::store_apps::MARK)
                .symlink_metadata()
                .is_ok());
    let outcome = match std::fs::read(path) {
        Ok(bytes) => aai_descriptor::parse(&path.display().to_string(), &bytes)
            .map(|d| Entry::file(path.to_path_buf(), stamp, fetched, Summary::of(&d), None)),
        Err(error) => reject(path, format!("cannot read: {error}")),
    };
    if outcome.is_ok() {
        cache.saved.store(false, Ordering::SeqCst);
    }
    if let Ok(mut entries) = cache.entries.lock() {
        let cached = match &outcome {
            Ok(entry) => Cached::Valid(entry.clone()),
            Err(error) => Cached::Invalid(Box::new((stamp, error.clone()))),
        };
        entries.insert(path.as_os_str().into(), cached);
    }
    outcome
}

/// Looks at every candidate on `workers` threads, in order.
fn probe_all(files: &[Guess], workers: usize) -> Vec<std::io::Result<Probe>> {
    let chunk = files.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let parts: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|guess| Probe::of(&guess.path))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // One result per file whatever happens, so results stay beside their files.
        parts
            .into_iter()
            .zip(files.chunks(chunk))
            .flat_map(|(part, files)| {
                part.join().unwrap_or_else(|_| {
                    files
                        .iter()
                        .map(|_| Err(std::io::Error::other("the look at this file failed")))
                        .collect()
                })
            })
            .collect()
    })
}

/// Loads every candidate on all cores. `on_batch` gets an empty batch once the cache is read
/// and the folders are listed (the scan is under way), then results at most every
/// `batch_every`, and once more at the end (with `done = true`).
pub fn scan(
    options: &ScanOptions,
    cache: &ParseCache,
    batch_every: Duration,
    mut on_batch: impl FnMut(Vec<Found>, bool),
) {
    let fetched_roots = FetchedRoots::of(&options.home);
    // Compiled once if this scan parses anything, and dropped when it ends.
    let _schema = aai_descriptor::KeepSchema::new();
    // Asked once per process: it reads the cgroup's limits.
    static WORKERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let workers = *WORKERS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .min(8)
    });
    // First pass: the disk cache is read while the folders are listed and every candidate is
    // looked at (neither needs the other); a warm start is mostly these two.
    // (Only the first scan reads it; live discovery starts that read before any scan.)
    let (files, probes) = std::thread::scope(|scope| {
        let seeding = (!cache.seeded()).then(|| scope.spawn(|| cache.seed(&fetched_roots)));
        let files = guesses(options);
        let probes = probe_all(&files, workers);
        if let Some(seeding) = seeding {
            let _ = seeding.join();
        }
        (files, probes)
    });
    // The cache is read and the folders listed (long at 10,000 apps on a loaded machine): a
    // sign of progress for whoever waits for the first snapshot.
    on_batch(Vec::new(), false);
    // Second pass: what the cache does not know is parsed, on every core.
    let (tx, rx) = mpsc::channel::<Found>();
    std::thread::scope(|scope| {
        let candidates: Vec<(usize, &Guess, std::io::Result<Probe>)> = files
            .iter()
            .zip(probes)
            .enumerate()
            .filter(|(_, (guess, probe))| guess.required || probe.is_ok())
            .map(|(rank, (guess, probe))| (rank, guess, probe))
            .collect();
        let chunk = candidates.len().div_ceil(workers).max(1);
        let mut candidates = candidates.into_iter();
        loop {
            let part: Vec<_> = candidates.by_ref().take(chunk).collect();
            if part.is_empty() {
                break;
            }
            let tx = tx.clone();
            let fetched_roots = &fetched_roots;
            scope.spawn(move || {
                for (rank, guess, probe) in part {
                    let path = &guess.path;
                    let in_home = guess.source == Source::UserWritten;
                    let outcome = load_with(path, probe, fetched_roots.holds(path), in_home, cache);
                    // A store app an earlier version installed in the home ranks as one.
                    let source = match &outcome {
                        Ok(entry) if in_home && entry.fetched => Source::Store,
                        _ => guess.source,
                    };
                    let found = Found {
                        rank,
                        source,
                        path: path.clone(),
                        outcome,
                    };
                    if tx.send(found).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        let mut batch = options.builtins.clone();
        let mut last = Instant::now();
        while let Ok(found) = rx.recv() {
            batch.push(found);
            if last.elapsed() >= batch_every {
                on_batch(std::mem::take(&mut batch), false);
                last = Instant::now();
            }
        }
        // Written before the complete snapshot goes out, so a client that saw the whole
        // list leaves a cache behind however soon it quits. Nothing is written when nothing
        // changed, so a warm start never waits for it.
        cache.settle(&files.iter().map(|guess| guess.path.as_os_str()).collect());
        on_batch(batch, true);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_home_paths_and_bundles_in_order() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().join("home");
        for app in ["b.app", "a.app"] {
            std::fs::create_dir_all(home.join(app)).expect("mkdir");
            std::fs::write(home.join(app).join("aai.json"), "{}").expect("write");
        }
        std::fs::create_dir_all(home.join("empty")).expect("mkdir");
        let extra = dir.path().join("extra.json");
        std::fs::write(&extra, "{}").expect("write");
        let bundles = dir.path().join("Applications");
        std::fs::create_dir_all(bundles.join("Mail.app/Contents/Resources")).expect("mkdir");
        std::fs::write(bundles.join("Mail.app/Contents/Resources/aai.json"), "{}").expect("write");

        let files = candidates(&ScanOptions {
            home: home.clone(),
            paths: vec![extra.clone()],
            ..ScanOptions::default()
        });
        assert_eq!(
            files,
            vec![
                home.join("a.app/aai.json"),
                home.join("b.app/aai.json"),
                extra
            ]
        );
        let mut found = Vec::new();
        bundle_candidates(&bundles, &mut found);
        assert_eq!(
            found,
            vec![bundles.join("Mail.app/Contents/Resources/aai.json")]
        );
    }

    #[cfg(unix)]
    #[test]
    fn fifos_and_huge_files_are_rejected_without_reading() {
        let dir = tempfile::tempdir().expect("dir");
        let fifo = dir.path().join("aai.json");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        let cache = ParseCache::default();
        let outcome = load(&fifo, false, &cache);
        let error = outcome.as_ref().expect_err("fifo");
        assert!(error.to_string().contains("not a regular file"), "{error}");

        let big = dir.path().join("big.json");
        let file = std::fs::File::create(&big).expect("create");
        file.set_len(MAX_DESCRIPTOR_BYTES + 1).expect("grow");
        let outcome = load(&big, false, &cache);
        assert!(
            outcome
                .as_ref()
                .expect_err("big")
                .to_string()
                .contains("limit")
        );
    }
}

#[cfg(test)]
mod cache_tests {
    use super::*;

    /// What a start of the gateway with `home` as AAI_HOME scans.
    fn home_options(home: &Path) -> ScanOptions {
        ScanOptions {
            home: home.to_path_buf(),
            ..ScanOptions::default()
        }
    }

    fn app(id: &str, name: &str) -> String {
        format!(
            r#"{{"schema_version":"1.0","appId":"{id}","name":"{name}","description":"Does things. And more.","aliases":["thing"],
            "platforms":{{"linux":{{"automation":"dbus","service":"org.example.A","object":"/","interface":"org.example.A",
            "tools":[{{"name":"go","description":"Go","method":"Go"}}]}}}}}}"#
        )
    }

    fn home_with(count: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("dir");
        for i in 0..count {
            let folder = dir.path().join(format!("org.example.app{i}"));
            std::fs::create_dir_all(&folder).expect("mkdir");
            std::fs::write(
                folder.join("aai.json"),
                app(&format!("org.example.app{i}"), &format!("App {i}")),
            )
            .expect("write");
        }
        dir
    }

    /// Scans `home` with a fresh process-like cache; returns the names offered and how many
    /// files were parsed.
    fn start(home: &Path) -> (Vec<String>, usize) {
        let cache = ParseCache::on_disk(home);
        let options = home_options(home);
        let mut found = Vec::new();
        scan(&options, &cache, Duration::from_secs(60), |batch, _| {
            found.extend(batch)
        });
        let registry = crate::catalog::snapshot::Snapshot::build(
            &found,
            &[aai_descriptor::Platform::Linux],
            true,
        );
        let names = registry.apps.iter().map(|a| a.name().to_owned()).collect();
        (names, cache.parsed())
    }

    #[test]
    fn a_scan_says_it_started_before_it_reads_any_file_and_ends_with_everything() {
        let home = home_with(3);
        let options = home_options(home.path());
        let mut calls = Vec::new();
        scan(
            &options,
            &ParseCache::default(),
            Duration::ZERO,
            |batch, done| {
                calls.push((batch.len(), done));
            },
        );
        assert_eq!(calls.first(), Some(&(0, false)), "{calls:?}");
        assert_eq!(calls.last().map(|c| c.1), Some(true), "{calls:?}");
        assert_eq!(calls.iter().map(|c| c.0).sum::<usize>(), 3, "{calls:?}");
    }

    fn names(count: usize) -> Vec<String> {
        let mut names: Vec<String> = (0..count).map(|i| format!("App {i}")).collect();
        names.sort_by_key(|n| format!("org.example.app{}", &n[4..]));
        names
    }

    #[test]
    fn a_second_start_reads_no_unchanged_file_and_rereads_what_changed() {
        let home = home_with(30);
        let (first, parsed) = start(home.path());
        assert_eq!((first.len(), parsed), (30, 30));
        let cache_file = home.path().join("cache/descriptors.json");
        assert!(cache_file.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&cache_file)
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (second, parsed) = start(home.path());
        assert_eq!(second, first);
        assert_eq!(parsed, 0, "every summary came from the cache");

        // One file changes, one goes, one comes: only the new and the changed are read.
        let changed = home.path().join("org.example.app3/aai.json");
        std::fs::write(&changed, app("org.example.app3", "Renamed three")).expect("write");
        std::fs::remove_dir_all(home.path().join("org.example.app4")).expect("rm");
        let new = home.path().join("org.example.new");
        std::fs::create_dir_all(&new).expect("mkdir");
        std::fs::write(new.join("aai.json"), app("org.example.new", "Newcomer")).expect("write");
        let (third, parsed) = start(home.path());
        assert_eq!(parsed, 2);
        assert_eq!(third.len(), 30);
        assert!(
            third.contains(&"Renamed three".to_owned()) && third.contains(&"Newcomer".to_owned())
        );
        assert!(!third.contains(&"App 3".to_owned()) && !third.contains(&"App 4".to_owned()));
        let (_, parsed) = start(home.path());
        assert_eq!(parsed, 0);
    }

    #[test]
    fn a_scan_started_while_the_cache_is_being_read_waits_for_it() {
        let home = home_with(200);
        let (first, _) = start(home.path());
        for _ in 0..20 {
            let cache = Arc::new(ParseCache::on_disk(home.path()));
            // Discovery starts reading the cache early, on a thread of its own; the scan
            // starts at once and must not parse what that read is about to provide.
            let reader = {
                let cache = cache.clone();
                let roots = FetchedRoots::of(home.path());
                std::thread::spawn(move || cache.seed(&roots))
            };
            let mut found = Vec::new();
            scan(
                &home_options(home.path()),
                &cache,
                Duration::from_secs(60),
                |batch, _| found.extend(batch),
            );
            reader.join().expect("read");
            assert_eq!(cache.parsed(), 0, "a file was parsed that the cache held");
            let registry = crate::catalog::snapshot::Snapshot::build(
                &found,
                &[aai_descriptor::Platform::Linux],
                true,
            );
            let names: Vec<String> = registry.apps.iter().map(|a| a.name().to_owned()).collect();
            assert_eq!(names, first);
        }
    }

    #[test]
    fn a_corrupt_or_foreign_cache_is_ignored_and_rebuilt() {
        let home = home_with(12);
        let expected = names(12);
        let cache_file = home.path().join("cache/descriptors.json");
        let (listed, _) = start(home.path());
        assert_eq!(listed, expected);
        let good = std::fs::read(&cache_file).expect("cache");
        let header_end = good.iter().position(|&b| b == b'\n').expect("header");

        let mut flipped = good.clone();
        let at = flipped.len() - 40;
        flipped[at] ^= 0x20; // one bit of one summary
        let mut truncated = good.clone();
        truncated.truncate(good.len() / 2);
        let text = String::from_utf8(good.clone()).expect("utf-8");
        let other_version = text.replacen(
            &format!("\"gateway\":\"{}\"", env!("CARGO_PKG_VERSION")),
            "\"gateway\":\"0.0.1-other\"",
            1,
        );
        let other_format = text.replacen(
            &format!("\"format\":{}", crate::catalog::cache::FORMAT),
            "\"format\":99",
            1,
        );
        assert_ne!(other_format, text);
        // The body is intact (its checksum matches), but the header promises one row more:
        // every row read before the count is checked is dropped with the rest.
        let miscounted = text.replacen("\"entries\":12", "\"entries\":13", 1);
        assert_ne!(miscounted, text);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("a flipped bit", flipped),
            ("a truncated file", truncated),
            ("another gateway version", other_version.into_bytes()),
            ("another format", other_format.into_bytes()),
            ("a miscounted list", miscounted.into_bytes()),
            ("no header", good[header_end + 1..].to_vec()),
            ("garbage", b"\x00\x01not json\n{]".to_vec()),
            ("empty", Vec::new()),
        ];
        for (what, bytes) in cases {
            std::fs::write(&cache_file, &bytes).expect("write");
            let (listed, parsed) = start(home.path());
            assert_eq!(listed, expected, "{what}");
            assert_eq!(parsed, 12, "{what}: the cache was used");
            // Rebuilt: the next start uses it again.
            let (_, parsed) = start(home.path());
            assert_eq!(parsed, 0, "{what}: the cache was not rebuilt");
        }

        // A cache copied from another home (same files there) is foreign.
        let other = home_with(12);
        std::fs::create_dir_all(other.path().join("cache")).expect("mkdir");
        std::fs::copy(&cache_file, other.path().join("cache/descriptors.json")).expect("copy");
        let (listed, parsed) = start(other.path());
        assert_eq!((listed, parsed), (expected, 12));
    }

    /// A cache whose checksum was recomputed around a summary that lies about its app: the
    /// listing shows the lie, but nothing runs from it — the descriptor used is read and
    /// validated from its file, and one that names another app is refused.
    #[test]
    fn a_lying_cache_entry_never_runs() {
        let home = home_with(2);
        start(home.path());
        let cache = crate::catalog::cache::DiskCache::new(home.path());
        let mut rows = Vec::new();
        cache.read_each(|row, _| rows.push(row)).expect("cache");
        let entries: Vec<(PathBuf, Stamp, Arc<Entry>)> = rows
            .into_iter()
            .map(|mut row| {
                row.summary.app_id = format!("{}.impostor", row.summary.app_id);
                let entry = Entry::file(row.path.clone(), row.stamp, false, row.summary, None);
                (row.path, row.stamp, entry)
            })
            .collect();
        cache
            .write(entries.iter().map(|(p, s, e)| (p.as_path(), *s, &**e)))
            .expect("write");
        let parse_cache = ParseCache::on_disk(home.path());
        let options = home_options(home.path());
        let mut found = Vec::new();
        scan(
            &options,
            &parse_cache,
            Duration::from_secs(60),
            |batch, _| found.extend(batch),
        );
        let registry = crate::catalog::snapshot::Snapshot::build(
            &found,
            &[aai_descriptor::Platform::Linux],
            true,
        );
        let app = registry
            .find("org.example.app0.impostor")
            .expect("listed from the cache");
        let error = app.descriptor().expect_err("refused");
        assert!(
            error
                .message
                .contains("now describes another app, org.example.app0"),
            "{}",
            error.message
        );
    }

    /// The whole descriptor is read on demand and only a few stay parsed.
    #[test]
    fn descriptors_are_loaded_on_demand_and_follow_their_file() {
        let home = home_with(1);
        start(home.path());
        let parse_cache = ParseCache::on_disk(home.path());
        let options = home_options(home.path());
        let mut found = Vec::new();
        scan(
            &options,
            &parse_cache,
            Duration::from_secs(60),
            |batch, _| found.extend(batch),
        );
        let registry = crate::catalog::snapshot::Snapshot::build(
            &found,
            &[aai_descriptor::Platform::Linux],
            true,
        );
        let app = registry.find("org.example.app0").expect("app");
        let one = app.descriptor().expect("loads");
        assert_eq!(one.app_id, "org.example.app0");
        assert!(
            Arc::ptr_eq(&one, &app.descriptor().expect("again")),
            "kept while recent"
        );
        // The file changes before the next scan: the copy kept is the version listed, and
        // stays in use until the scan lists the new one.
        let file = home.path().join("org.example.app0/aai.json");
        std::fs::write(&file, "{\"schema_version\": \"1.0\"}").expect("write");
        assert!(app.descriptor().is_ok());
        // Not kept (or gone from memory) and broken on disk: refused, saying why.
        crate::catalog::cache::forget_recent(&file);
        let error = app.descriptor().expect_err("invalid now");
        assert!(
            error.message.contains("no longer valid"),
            "{}",
            error.message
        );
        std::fs::remove_file(&file).expect("rm");
        crate::catalog::cache::forget_recent(&file);
        let error = app.descriptor().expect_err("gone");
        assert!(
            error.message.contains("cannot be read now"),
            "{}",
            error.message
        );
    }
}

#[cfg(test)]
mod source_tests {
    use super::*;

    fn web_app(id: &str, name: &str) -> String {
        serde_json::json!({"schema_version": "1.0", "appId": id, "name": name,
            "description": "Keeps notes.",
            "platforms": {"web": {"automation": "restapi", "base_url": "https://notes.example",
                "auth": {"type": "api_key", "env_var": "NOTES_KEY"},
                "tools": [{"name": "add", "description": "Add", "endpoint": "/add"}]}}})
        .to_string()
    }

    fn put(dir: &Path, id: &str, name: &str) -> PathBuf {
        std::fs::create_dir_all(dir).expect("mkdir");
        let file = dir.join("aai.json");
        std::fs::write(&file, web_app(id, name)).expect("write");
        file
    }

    /// A home with one descriptor of each kind that lives in it: the user's own, a store app
    /// in its place, a web registry copy, and a store app an earlier version left in the home.
    struct Home {
        _dir: tempfile::TempDir,
        home: PathBuf,
        user: PathBuf,
        store: PathBuf,
        web: PathBuf,
        legacy: PathBuf,
    }

    fn home() -> Home {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().to_path_buf();
        let user = put(&home.join("org.user.mine"), "org.user.mine", "Mine");
        let store = put(
            &crate::catalog::store_apps::apps_dir(&home).join("com.shop.notes"),
            "com.shop.notes",
            "Shop notes",
        );
        std::fs::write(store.with_file_name(crate::catalog::store_apps::MARK), "{}").expect("mark");
        let web = put(
            &home.join("web/com.web.notes"),
            "com.web.notes",
            "Web notes",
        );
        let legacy = put(&home.join("com.old.notes"), "com.old.notes", "Old notes");
        std::fs::write(
            legacy.with_file_name(crate::catalog::store_apps::MARK),
            "{}",
        )
        .expect("mark");
        Home {
            _dir: dir,
            home,
            user,
            store,
            web,
            legacy,
        }
    }

    /// One start of a gateway: what it found, and how many files it parsed.
    fn start(home: &Path) -> (Vec<Found>, usize) {
        let cache = ParseCache::on_disk(home);
        let options = ScanOptions {
            home: home.to_path_buf(),
            ..ScanOptions::default()
        };
        let mut found = Vec::new();
        scan(&options, &cache, Duration::from_secs(60), |batch, _| {
            found.extend(batch)
        });
        (found, cache.parsed())
    }

    fn fetched_and_source(found: &[Found], path: &Path) -> (bool, Source) {
        let item = found
            .iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("{} not found", path.display()));
        let entry = item.outcome.as_ref().expect("valid");
        (entry.fetched, item.source)
    }

    /// Store apps (in their place or where an earlier version put them) and web registry
    /// copies load as fetched, the user's own descriptor does not — when parsed, and when a
    /// later start takes them from the descriptor cache without reading any file.
    #[test]
    fn store_and_web_copies_are_fetched_when_parsed_and_when_seeded_from_the_cache() {
        let h = home();
        let expected = [
            (&h.user, (false, Source::UserWritten)),
            (&h.store, (true, Source::Store)),
            (&h.web, (true, Source::WebRegistry)),
            (&h.legacy, (true, Source::Store)),
        ];
        let (found, parsed) = start(&h.home);
        assert_eq!(parsed, 4);
        for (path, want) in &expected {
            assert_eq!(
                fetched_and_source(&found, path),
                *want,
                "{}",
                path.display()
            );
        }
        let (found, parsed) = start(&h.home);
        assert_eq!(
            parsed, 0,
            "the second start read every entry from the cache"
        );
        for (path, want) in &expected {
            assert_eq!(
                fetched_and_source(&found, path),
                *want,
                "{} (from the cache)",
                path.display()
            );
        }
    }

    /// The cache cannot make a store app the user's own: a row that says nothing of it being
    /// fetched is still fetched by where the file is.
    #[test]
    fn a_cache_row_cannot_unmark_a_store_app() {
        let h = home();
        start(&h.home);
        let disk = crate::catalog::cache::DiskCache::new(&h.home);
        let mut rows = Vec::new();
        disk.read_each(|row, _| rows.push(row)).expect("cache");
        let entries: Vec<(PathBuf, Stamp, Arc<Entry>)> = rows
            .into_iter()
            .map(|row| {
                let entry = Entry::file(row.path.clone(), row.stamp, false, row.summary, None);
                (row.path, row.stamp, entry)
            })
            .collect();
        disk.write(entries.iter().map(|(p, s, e)| (p.as_path(), *s, &**e)))
            .expect("write");
        let (found, parsed) = start(&h.home);
        assert_eq!(parsed, 0);
        assert_eq!(fetched_and_source(&found, &h.store), (true, Source::Store));
        assert_eq!(
            fetched_and_source(&found, &h.web),
            (true, Source::WebRegistry)
        );
    }

    fn winner(found: &[Found], id: &str) -> (PathBuf, Option<Source>) {
        let registry = crate::catalog::snapshot::Snapshot::build(
            found,
            &[aai_descriptor::Platform::Web],
            true,
        );
        let app = registry.find(id).expect("offered");
        (app.source().to_path_buf(), app.hides)
    }

    /// A store app of the user's appId comes after the user's descriptor and configured
    /// paths, unless the user chose it; a copy in the store's place wins over one an earlier
    /// version left in the home.
    #[test]
    fn the_users_own_app_wins_unless_the_user_prefers_the_store() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().join("home");
        let id = "org.user.notes";
        let store = put(
            &crate::catalog::store_apps::apps_dir(&home).join(id),
            id,
            "Squatter",
        );
        let configured = put(&dir.path().join("mine").join(id), id, "My notes");
        let options = ScanOptions {
            home: home.clone(),
            paths: vec![dir.path().join("mine")],
            ..ScanOptions::default()
        };
        let scan_now = || {
            let mut found = Vec::new();
            scan(
                &options,
                &ParseCache::default(),
                Duration::from_secs(60),
                |batch, _| found.extend(batch),
            );
            found
        };
        assert_eq!(
            winner(&scan_now(), id),
            (configured.clone(), Some(Source::Store))
        );
        // Written in the home by the user: it wins too.
        let user = put(&home.join(id), id, "Home notes");
        assert_eq!(
            winner(&scan_now(), id),
            (user.clone(), Some(Source::ConfiguredFolder))
        );
        crate::appstore::set_preferred(&home, id, true).expect("prefer");
        assert_eq!(
            winner(&scan_now(), id),
            (store.clone(), Some(Source::UserWritten))
        );
        crate::appstore::set_preferred(&home, id, false).expect("forget");
        assert_eq!(winner(&scan_now(), id).0, user);
        // An earlier version's store copy in the home ranks as a store app, after the copy
        // in the store's place.
        std::fs::remove_file(&user).expect("rm");
        std::fs::write(user.with_file_name(crate::catalog::store_apps::MARK), "{}").expect("mark");
        std::fs::write(&user, web_app(id, "Old store copy")).expect("write");
        std::fs::remove_dir_all(dir.path().join("mine")).expect("rm");
        let found = scan_now();
        assert_eq!(winner(&found, id), (store, Some(Source::Store)));
        assert_eq!(fetched_and_source(&found, &user), (true, Source::Store));
    }
}
