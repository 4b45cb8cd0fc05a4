//! What discovery keeps of each descriptor, and the descriptor itself when it is used.
//!
//! An offered app is held as a [`Summary`]: what listings, searches and hints need. The whole
//! descriptor (its tools, schemas and scripts) is read again on demand, when a guide is shown
//! or a call is made, and only the few used last stay in memory. Summaries persist in
//! `AAI_HOME/cache/descriptors.json`, keyed by path, size, modification time and the
//! gateway's version, so a gateway started again offers every app without parsing a file that
//! has not changed. That cache is checked whole (format, version, home, checksum) and ignored
//! when anything is off. A descriptor loaded on demand is read again from its file: one whose
//! stamp still matches the one it passed every check with skips only the schema pass (the
//! compiled schema is not kept for it); a changed one is validated whole.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aai_descriptor::{AaiError, Descriptor, ErrorKind, Platform, guide, naming};
use serde::{Deserialize, Serialize};

/// Descriptors larger than this are rejected unread.
pub const MAX_DESCRIPTOR_BYTES: u64 = 4 * 1024 * 1024;

/// Bumped whenever [`Summary`] or the file layout changes.
pub(crate) const FORMAT: u32 = 2;
/// Descriptors used last, kept parsed.
const RECENT: usize = 8;

/// Size, modification time and inode of a file: when all are unchanged, it is not parsed
/// again (the inode catches editors that save by replacing the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub len: u64,
    /// Nanoseconds since 1970 (an `i64` lasts until 2262); `None` where the file system keeps
    /// no time (never matches).
    pub modified_ns: Option<i64>,
    #[serde(default)]
    pub inode: u64,
}

impl Stamp {
    pub fn of(metadata: &std::fs::Metadata) -> Self {
        Self {
            len: metadata.len(),
            modified_ns: metadata
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
            #[cfg(unix)]
            inode: std::os::unix::fs::MetadataExt::ino(metadata),
            #[cfg(not(unix))]
            inode: 0,
        }
    }

    /// Whether a file with this stamp is known to be unchanged since `other` was taken.
    pub fn same(&self, other: &Self) -> bool {
        self.modified_ns.is_some() && self == other
    }
}

/// What the gateway keeps of a valid descriptor between uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub app_id: String,
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub description: String,
    /// The first sentence of the description, made at load time for listings.
    pub short: String,
    /// The sections it has, in the descriptor's order.
    pub platforms: Vec<Platform>,
}

impl Summary {
    pub fn of(descriptor: &Descriptor) -> Self {
        const ALL: [Platform; 8] = [
            Platform::Macos,
            Platform::Windows,
            Platform::Linux,
            Platform::Android,
            Platform::Ios,
            Platform::Web,
            Platform::Local,
            Platform::Mcp,
        ];
        Self {
            app_id: descriptor.app_id.clone(),
            name: descriptor.name.clone(),
            aliases: descriptor.aliases.clone(),
            description: descriptor.description.clone(),
            short: guide::short_description(&descriptor.description),
            platforms: ALL
                .into_iter()
                .filter(|&p| descriptor.tools(p).is_some())
                .collect(),
        }
    }

    pub fn has(&self, platform: Platform) -> bool {
        self.platforms.contains(&platform)
    }
}

/// A valid descriptor as discovery found it.
#[derive(Debug)]
pub struct Entry {
    /// Unique in this process: what the compiled validators of its tools are kept under.
    id: u64,
    pub summary: Summary,
    /// Came from the network (a registry copy under `AAI_HOME/web`, `web_discover`).
    pub fetched: bool,
    source: Source,
    /// Its listing line and the token budget it was made for (see `registry::listing`).
    pub listing: std::sync::OnceLock<(usize, Arc<str>)>,
}

#[derive(Debug)]
enum Source {
    /// Kept whole: built-in apps, apps fetched from the web, tests.
    Held(Arc<Descriptor>),
    /// Read from its file when used.
    File { path: PathBuf, stamp: Stamp },
}

impl Entry {
    /// Unique in this process: the same entry object (an unchanged file's parse result is
    /// handed out again) has the same id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// An entry that keeps its descriptor in memory.
    pub fn held(descriptor: Arc<Descriptor>) -> Arc<Self> {
        Arc::new(Self {
            id: next_id(),
            summary: Summary::of(&descriptor),
            fetched: descriptor.fetched,
            source: Source::Held(descriptor),
            listing: std::sync::OnceLock::new(),
        })
    }

    /// An entry whose descriptor is read from `path` when used; `listing` is its listing line
    /// and the budget it was made for, when known (from the cache).
    pub fn file(
        path: PathBuf,
        stamp: Stamp,
        fetched: bool,
        summary: Summary,
        listing: Option<(usize, Arc<str>)>,
    ) -> Arc<Self> {
        let listing = listing.unwrap_or_else(|| default_listing(&summary));
        Arc::new(Self {
            id: next_id(),
            summary,
            fetched,
            source: Source::File { path, stamp },
            listing: std::sync::OnceLock::from(listing),
        })
    }

    /// Its listing line and the budget it was made for, if made.
    pub fn listing_made(&self) -> Option<(usize, &str)> {
        self.listing.get().map(|(budget, text)| (*budget, &**text))
    }

    /// The file and stamp the entry was made from (`None` for a held descriptor).
    pub fn file_stamp(&self) -> Option<(&Path, Stamp)> {
        match &self.source {
            Source::File { path, stamp } => Some((path, *stamp)),
            Source::Held(_) => None,
        }
    }

    /// The whole descriptor: the one held, one of the few used last, or its file read and
    /// validated again.
    ///
    /// # Errors
    /// The file was removed, or changed since it was listed and is no longer a valid
    /// descriptor of this app (the next scan updates the list).
    pub fn descriptor(&self) -> Result<Arc<Descriptor>, AaiError> {
        let (path, stamp) = match &self.source {
            Source::Held(descriptor) => return Ok(descriptor.clone()),
            Source::File { path, stamp } => (path, *stamp),
        };
        if let Some(found) = recent_get(path, stamp) {
            return Ok(found);
        }
        let changed = |why: String| {
            AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!(
                    "the descriptor of {} ({}) {why}. Fix or restore the file; the app list is updated on the next scan.",
                    self.summary.app_id,
                    path.display()
                ),
            )
            .with_detail(serde_json::json!({"appId": self.summary.app_id, "path": path}))
        };
        let metadata =
            std::fs::metadata(path).map_err(|e| changed(format!("cannot be read now: {e}")))?;
        if !metadata.is_file() || metadata.len() > MAX_DESCRIPTOR_BYTES {
            return Err(changed(
                "is no longer a regular file within the size limit".into(),
            ));
        }
        let unreadable = |e: std::io::Error| changed(format!("cannot be read now: {e}"));
        let mut file = std::fs::File::open(path).map_err(unreadable)?;
        let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
        std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut file, MAX_DESCRIPTOR_BYTES + 1),
            &mut bytes,
        )
        .map_err(unreadable)?;
        // The stamp of what was read, from the open file after reading: a file replaced or
        // written meanwhile never passes for the one that was checked.
        let now = Stamp::of(&file.metadata().map_err(unreadable)?);
        // A file unchanged since it passed every check is read without the schema pass (see
        // `aai_descriptor::parse_known`); a changed one is checked whole.
        let parse = if now.same(&stamp) {
            aai_descriptor::parse_known
        } else {
            aai_descriptor::parse
        };
        let mut descriptor = parse(&path.display().to_string(), &bytes)
            .map_err(|e| changed(format!("changed and is no longer valid: {e}")))?;
        if descriptor.app_id != self.summary.app_id {
            return Err(changed(format!(
                "now describes another app, {}",
                descriptor.app_id
            )));
        }
        descriptor.fetched = self.fetched;
        let descriptor = Arc::new(descriptor);
        // Only what matches the listed file is kept; a newer file is read each time until
        // the scan lists it.
        if now.same(&stamp) {
            recent_put(path, stamp, descriptor.clone());
        }
        Ok(descriptor)
    }
}

fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Compiled argument validators of the tools used last, newest at the back.
static VALIDATORS: Mutex<VecDeque<(u64, String, Arc<jsonschema::Validator>)>> =
    Mutex::new(VecDeque::new());
/// How many compiled validators are kept (a compiled schema can weigh tens of kilobytes).
const KEPT_VALIDATORS: usize = 32;

/// The compiled validator of `entry`'s tool `tool`, built on first use and kept while it is
/// among the [`KEPT_VALIDATORS`] used last.
///
/// # Errors
/// The compiler's message when the schema passed meta-validation but does not compile.
pub fn validator(
    entry: &Entry,
    tool: &str,
    parameters: &aai_descriptor::Parameters,
) -> Result<Arc<jsonschema::Validator>, jsonschema::ValidationError<'static>> {
    if let Ok(mut kept) = VALIDATORS.lock()
        && let Some(at) = kept
            .iter()
            .position(|(id, t, _)| *id == entry.id && t == tool)
        && let Some(hit) = kept.remove(at)
    {
        let validator = hit.2.clone();
        kept.push_back(hit);
        return Ok(validator);
    }
    let validator = Arc::new(jsonschema::validator_for(&parameters.schema())?);
    if let Ok(mut kept) = VALIDATORS.lock() {
        if kept.len() >= KEPT_VALIDATORS {
            kept.pop_front();
        }
        kept.push_back((entry.id, tool.to_owned(), validator.clone()));
    }
    Ok(validator)
}

/// The descriptors used last, newest at the back.
static RECENT_LOADED: Mutex<VecDeque<(PathBuf, Stamp, Arc<Descriptor>)>> =
    Mutex::new(VecDeque::new());

fn recent_get(path: &Path, stamp: Stamp) -> Option<Arc<Descriptor>> {
    let mut recent = RECENT_LOADED.lock().ok()?;
    let at = recent
        .iter()
        .position(|(p, s, _)| p == path && *s == stamp)?;
    let hit = recent.remove(at)?;
    let descriptor = hit.2.clone();
    recent.push_back(hit);
    Some(descriptor)
}

/// Drops the parsed copy of `path`, if one is kept.
pub fn forget_recent(path: &Path) {
    if let Ok(mut recent) = RECENT_LOADED.lock() {
        recent.retain(|(p, _, _)| p != path);
    }
}

fn recent_put(path: &Path, stamp: Stamp, descriptor: Arc<Descriptor>) {
    if let Ok(mut recent) = RECENT_LOADED.lock() {
        recent.retain(|(p, _, _)| p != path);
        if recent.len() >= RECENT {
            recent.pop_front();
        }
        recent.push_back((path.to_path_buf(), stamp, descriptor));
    }
}

/// The cache file's first line.
/// Why the cache file is not used (it is then rebuilt).
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error("{0}")]
    Unreadable(std::io::Error),
    #[error("no header line")]
    NoHeader,
    #[error("bad header: {0}")]
    BadHeader(serde_json::Error),
    #[error("format {0} is not {FORMAT}")]
    Format(u32),
    #[error("written by gateway {0}")]
    Gateway(String),
    #[error("written for another home, {0}")]
    Home(String),
    #[error("checksum mismatch")]
    Checksum,
    #[error("bad body: {0}")]
    BadBody(serde_json::Error),
    #[error("entry count mismatch")]
    Count,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Header {
    format: u32,
    gateway: String,
    home: String,
    entries: usize,
    /// CRC-32 of everything after the first line.
    crc32: u32,
}

/// One valid descriptor in the cache file.
#[derive(Serialize, Deserialize)]
pub struct Row {
    pub path: PathBuf,
    pub stamp: Stamp,
    pub summary: Summary,
    /// Its listing line and the token budget it was made for.
    #[serde(default)]
    pub listing: Option<(usize, String)>,
    /// A copy from the network found outside the fetched folders (a store app an earlier
    /// version installed in `AAI_HOME/<appId>`): the mark only ever adds restrictions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fetched: bool,
}

/// Reads the cache's list of rows handing each to a function as it is read (at 10,000 apps
/// a list of every row alongside the file's bytes was ~8 MB at start-up).
struct EachRow<'f>(&'f mut dyn FnMut(Row));

impl<'de> serde::de::DeserializeSeed<'de> for EachRow<'_> {
    type Value = usize;

    fn deserialize<D: serde::Deserializer<'de>>(self, parser: D) -> Result<usize, D::Error> {
        parser.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for EachRow<'_> {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of cache rows")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut rows: A) -> Result<usize, A::Error> {
        let mut count = 0;
        while let Some(row) = rows.next_element::<Row>()? {
            (self.0)(row);
            count += 1;
        }
        Ok(count)
    }
}

/// The summaries of valid descriptors, as a file under `AAI_HOME/cache`.
#[derive(Debug, Clone)]
pub struct DiskCache {
    file: PathBuf,
    home: String,
}

impl DiskCache {
    pub fn new(home: &Path) -> Self {
        Self {
            file: home.join("cache").join("descriptors.json"),
            home: home.display().to_string(),
        }
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// What the cache holds, one row at a time (no list of them all): `each` gets every row
    /// in turn with the number of rows the header promises. `None` when the file is missing,
    /// unreadable, corrupt or foreign (another format, gateway version or home), with a log
    /// line saying why; it may come after some rows were handed out, so the caller keeps them
    /// only on `Some`.
    pub fn read_each(&self, mut each: impl FnMut(Row, usize)) -> Option<()> {
        match self.try_read(&mut each) {
            Ok(()) => Some(()),
            Err(why) => {
                if self.file.exists() {
                    tracing::info!(file = %self.file.display(), "descriptor cache not used ({why}); every descriptor is read again");
                }
                None
            }
        }
    }

    fn try_read(&self, each: &mut dyn FnMut(Row, usize)) -> Result<(), Unusable> {
        let bytes = std::fs::read(&self.file).map_err(Unusable::Unreadable)?;
        let split = bytes
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(Unusable::NoHeader)?;
        let header: Header =
            serde_json::from_slice(&bytes[..split]).map_err(Unusable::BadHeader)?;
        let body = &bytes[split + 1..];
        if header.format != FORMAT {
            return Err(Unusable::Format(header.format));
        }
        if header.gateway != env!("CARGO_PKG_VERSION") {
            return Err(Unusable::Gateway(header.gateway));
        }
        if header.home != self.home {
            return Err(Unusable::Home(header.home));
        }
        if crc32fast::hash(body) != header.crc32 {
            return Err(Unusable::Checksum);
        }
        let promised = header.entries;
        let mut parser = serde_json::Deserializer::from_slice(body);
        let mut each = |row| each(row, promised);
        let count = serde::de::DeserializeSeed::deserialize(EachRow(&mut each), &mut parser)
            .and_then(|count| parser.end().map(|()| count))
            .map_err(Unusable::BadBody)?;
        if count != header.entries {
            return Err(Unusable::Count);
        }
        Ok(())
    }

    /// Replaces the cache with `rows`, atomically (a reader sees the old file or the new).
    ///
    /// # Errors
    /// The cache folder or file cannot be written.
    pub fn write<'a>(
        &self,
        rows: impl Iterator<Item = (&'a Path, Stamp, &'a Entry)>,
    ) -> std::io::Result<()> {
        #[derive(Serialize)]
        struct RowRef<'a> {
            path: &'a Path,
            stamp: Stamp,
            summary: &'a Summary,
            listing: Option<(usize, &'a str)>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            fetched: bool,
        }
        let rows: Vec<RowRef<'_>> = rows
            .map(|(path, stamp, entry)| RowRef {
                path,
                stamp,
                summary: &entry.summary,
                listing: entry.listing_made(),
                fetched: entry.fetched,
            })
            .collect();
        let body = serde_json::to_vec(&rows).map_err(std::io::Error::other)?;
        let header = Header {
            format: FORMAT,
            gateway: env!("CARGO_PKG_VERSION").to_owned(),
            home: self.home.clone(),
            entries: rows.len(),
            crc32: crc32fast::hash(&body),
        };
        let dir = self.file.parent().unwrap_or(Path::new("."));
        crate::private::create_dir(dir)?;
        remove_stale_temporaries(dir);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let temporary = dir.join(format!(".descriptors.{}.{nanos}.tmp", std::process::id()));
        let result = (|| {
            let mut file = private_file(&temporary)?;
            serde_json::to_writer(&mut file, &header).map_err(std::io::Error::other)?;
            file.write_all(b"\n")?;
            file.write_all(&body)?;
            // No fsync: a file torn by a crash fails its checksum and is rebuilt.
            std::fs::rename(&temporary, &self.file)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        result
    }
}

/// Removes temporary files that a gateway killed while writing left behind (a minute old:
/// another gateway may be writing one now).
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 60);
        if name.starts_with(".descriptors.") && name.ends_with(".tmp") && stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}
pub(crate) fn listing_text(summary: &Summary, budget: usize) -> Arc<str> {
    Arc::from(guide::listing_description(
        &summary.name,
        &summary.aliases,
        &summary.short,
        budget,
    ))
}

/// The listing of an app with `summary` under the tool name it gets when no other app
/// competes for it: made once when the descriptor is read, kept in the descriptor cache.
pub(crate) fn default_listing(summary: &Summary) -> (usize, Arc<str>) {
    let slug = naming::assign_slugs(&[summary.app_id.as_str()]).remove(0);
    let budget = listing_budget(&slug);
    (budget, listing_text(summary, budget))
}

/// Estimated tokens left for an app's description so its whole `tools/list` entry,
/// `{"name":"<slug>","description":"…","inputSchema":{"type":"object"}}`, stays under 40.
pub(crate) fn listing_budget(slug: &str) -> usize {
    const ENTRY_OVERHEAD: usize = 13;
    (33usize)
        .saturating_sub(ENTRY_OVERHEAD + guide::estimate_tokens(slug))
        .max(8)
}
