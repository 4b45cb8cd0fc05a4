//! Finding and loading descriptors: `AAI_HOME/<appId>/aai.json`, configured paths, macOS app
//! bundles, and Xcode build folders with `--dev`.
//!
//! Loading is parallel and streams results, so a huge or slow scan path never holds up the
//! server; unreadable, oversized or non-regular files become rejections, never crashes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime};

use aai_descriptor::{Descriptor, LoadError, Problem};

/// Descriptors larger than this are rejected unread.
pub const MAX_DESCRIPTOR_BYTES: u64 = 4 * 1024 * 1024;

/// A loaded descriptor, shared between scans while its file is unchanged, or why not.
pub type Outcome = Result<Arc<Descriptor>, LoadError>;

/// Where to look.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    pub home: PathBuf,
    pub paths: Vec<PathBuf>,
    pub dev: bool,
    /// The gateway's built-in apps, offered ahead of every file.
    pub builtins: Vec<Found>,
}

impl ScanOptions {
    /// What to scan under `home` with `config`: its `paths` and its built-in apps.
    pub fn new(home: &Path, config: &crate::config::Config, dev: bool) -> Self {
        Self {
            home: home.to_path_buf(),
            paths: config.paths.clone(),
            dev,
            builtins: builtins(config),
        }
    }
}

/// The built-in toolsets `config` turns on, as discovery results ahead of every file.
fn builtins(config: &crate::config::Config) -> Vec<Found> {
    let mut descriptors = aai_local::descriptors(&config.local);
    if config.scheduler.tools {
        descriptors.push(crate::schedule::tools::DESCRIPTOR.clone());
    }
    descriptors
        .into_iter()
        .map(|descriptor| Found {
            rank: 0,
            path: PathBuf::from(format!("built in: {}", descriptor.app_id)),
            outcome: Ok(descriptor),
        })
        .collect()
}

/// The outcome of loading one candidate file.
#[derive(Debug, Clone)]
pub struct Found {
    /// Position in the candidate list: lower wins when two files share an appId.
    pub rank: usize,
    pub path: PathBuf,
    pub outcome: Outcome,
}

/// Candidate files in priority order: the home first, then configured paths, then bundles.
pub fn candidates(options: &ScanOptions) -> Vec<PathBuf> {
    let mut files = Vec::new();
    children_with(&options.home, &mut files);
    // Copies from the web registry come after what the user installed.
    children_with(&options.home.join("web"), &mut files);
    for path in &options.paths {
        if path.is_dir() {
            let direct = path.join("aai.json");
            if direct.exists() {
                files.push(direct);
            }
            children_with(path, &mut files);
        } else {
            files.push(path.clone());
        }
    }
    if cfg!(target_os = "macos") {
        let home = crate::config::user_home();
        for root in [PathBuf::from("/Applications"), home.join("Applications")] {
            bundle_candidates(&root, &mut files);
        }
    }
    if options.dev {
        let derived = crate::config::user_home().join("Library/Developer/Xcode/DerivedData");
        for project in sorted_entries(&derived) {
            for config in sorted_entries(&project.join("Build/Products")) {
                bundle_candidates(&config, &mut files);
            }
        }
    }
    files
}

/// `<dir>/*/aai.json`, sorted.
fn children_with(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in sorted_entries(dir) {
        let file = entry.join("aai.json");
        if file.exists() {
            out.push(file);
        }
    }
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

/// Size and modification time: when both are unchanged, the file is not parsed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

/// Parse results of earlier scans, keyed by path.
#[derive(Default)]
pub struct ParseCache {
    entries: Mutex<HashMap<PathBuf, (Stamp, Outcome)>>,
}

fn reject(path: &Path, message: String) -> Outcome {
    Err(LoadError {
        source_name: path.display().to_string(),
        problems: vec![Problem::new("", message)],
    })
}

/// Loads one candidate. Only regular files are opened, so a FIFO or device can't block us.
/// `fetched`: the file is a copy from the network (a registry copy under `AAI_HOME/web`).
pub fn load(path: &Path, fetched: bool, cache: &ParseCache) -> Outcome {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) => return reject(path, format!("cannot read: {error}")),
    };
    if !metadata.is_file() {
        return reject(path, "not a regular file".to_owned());
    }
    if metadata.len() > MAX_DESCRIPTOR_BYTES {
        return reject(
            path,
            format!(
                "{} bytes is larger than the {MAX_DESCRIPTOR_BYTES}-byte limit for a descriptor",
                metadata.len()
            ),
        );
    }
    let stamp = Stamp {
        len: metadata.len(),
        modified: metadata.modified().ok(),
    };
    if let Some((seen, outcome)) = cache.entries.lock().ok().and_then(|c| c.get(path).cloned())
        && seen == stamp
    {
        return outcome;
    }
    let outcome = match std::fs::read(path) {
        Ok(bytes) => aai_descriptor::parse(&path.display().to_string(), &bytes).map(|mut d| {
            d.fetched = fetched;
            Arc::new(d)
        }),
        Err(error) => reject(path, format!("cannot read: {error}")),
    };
    if let Ok(mut entries) = cache.entries.lock() {
        entries.insert(path.to_path_buf(), (stamp, outcome.clone()));
    }
    outcome
}

/// Loads every candidate on all cores. Results are handed to `on_batch` at most every
/// `batch_every`, and once more at the end (with `done = true`).
pub fn scan(
    options: &ScanOptions,
    cache: &ParseCache,
    batch_every: Duration,
    mut on_batch: impl FnMut(Vec<Found>, bool),
) {
    let files = candidates(options);
    let fetched_root = options.home.join("web");
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    let (tx, rx) = mpsc::channel::<Found>();
    std::thread::scope(|scope| {
        let chunk = files.len().div_ceil(workers).max(1);
        for (index, part) in files.chunks(chunk).enumerate() {
            let tx = tx.clone();
            let fetched_root = &fetched_root;
            scope.spawn(move || {
                for (offset, path) in part.iter().enumerate() {
                    let found = Found {
                        rank: index * chunk + offset,
                        path: path.clone(),
                        outcome: load(path, path.starts_with(fetched_root), cache),
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
            builtins: Vec::new(),
            home: home.clone(),
            paths: vec![extra.clone()],
            dev: false,
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
