//! The app store client (`store.url` in config.json): search, details, and installs that are
//! verified before anything is written — the registry's bytes must carry the publisher's
//! ed25519 signature, the publisher's key must be the one this computer saw the first time
//! (kept in `AAI_HOME/store/publishers.json`), and the descriptor must pass the same checks as
//! `aai-gateway validate`.
//!
//! Installed apps live in `AAI_HOME/store/apps/<appId>/` (its `aai.json` and a `.store.json`
//! mark); discovery loads them as fetched from the network and ranks them after the user's
//! own apps, unless the user chose one over another source of its appId.
//!
//! A local index of the store's apps (`AAI_HOME/store/index.json`), refreshed in the
//! background, gives APP_NOT_FOUND its install hint from memory, with no network on the call.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::catalog::store_apps::{MARK, apps_dir, preferred, preferred_file, store_dir};
use crate::config::StoreConfig;

/// What is kept of an app installed from the store, next to its `aai.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Installed {
    pub app_id: String,
    pub version: String,
    pub publisher: String,
    /// The publisher's key the descriptor was verified with (absent in marks written before
    /// it was recorded: then the key pinned for the publisher's name stands in).
    #[serde(default)]
    pub key: String,
    pub sha256: String,
    pub store: String,
}

/// The folder an earlier version installed `app_id` in, `AAI_HOME/<appId>/`, when it still
/// holds a store mark.
fn legacy_dir(home: &Path, app_id: &str) -> Option<PathBuf> {
    let dir = home.join(app_id);
    dir.join(MARK).is_file().then_some(dir)
}

/// The folder of the installed store app `app_id`: its new place, or the one an earlier
/// version used while it has not been moved. `None` for a text that is not an appId (it is
/// joined to paths).
fn installed_dir(home: &Path, app_id: &str) -> Option<PathBuf> {
    if !aai_descriptor::is_valid_app_id(app_id) {
        return None;
    }
    let dir = apps_dir(home).join(app_id);
    if dir.join(MARK).is_file() {
        return Some(dir);
    }
    legacy_dir(home, app_id)
}

/// The descriptor of the installed store app `app_id`, where it is now.
pub fn descriptor_path(home: &Path, app_id: &str) -> PathBuf {
    installed_dir(home, app_id)
        .unwrap_or_else(|| apps_dir(home).join(app_id))
        .join("aai.json")
}

/// Records (or, with `prefer` false, forgets) that the user chose the store's `app_id` over
/// its other sources; discovery ranks it first from its next scan.
///
/// # Errors
/// The file cannot be written.
pub fn set_preferred(home: &Path, app_id: &str, prefer: bool) -> Result<(), String> {
    let mut chosen = preferred(home);
    let changed = if prefer {
        chosen.insert(app_id.to_owned())
    } else {
        chosen.remove(app_id)
    };
    if !changed {
        return Ok(());
    }
    crate::private::create_dir(&store_dir(home)).map_err(|e| e.to_string())?;
    let file = preferred_file(home);
    crate::private::write_private(
        &file,
        &serde_json::to_vec_pretty(&chosen).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// Another source offering `app_id` on this machine, and the file it comes from: the one
/// that would win over a store app of that id (a user-written descriptor, a configured
/// folder or file, a web registry copy, a built-in app, an app bundle). One discovery scan.
pub fn offered_elsewhere(
    home: &Path,
    config: &crate::config::Config,
    app_id: &str,
) -> Option<(crate::catalog::discovery::Source, PathBuf)> {
    let options = crate::catalog::discovery::ScanOptions::new(home, config, false);
    let mut found = Vec::new();
    crate::catalog::discovery::scan(
        &options,
        &crate::catalog::discovery::ParseCache::on_disk(home),
        std::time::Duration::from_secs(3600),
        |batch, _| found.extend(batch),
    );
    found
        .into_iter()
        .filter(|f| !f.source.is_store())
        .filter(|f| {
            f.outcome
                .as_ref()
                .is_ok_and(|entry| entry.summary.app_id == app_id)
        })
        .min_by_key(|f| (f.source.precedence(), f.rank))
        .map(|f| (f.source, f.path))
}

/// Moves a store app an earlier version installed in `AAI_HOME/<appId>/` to its place under
/// [`apps_dir`]. Nothing to move is no error.
///
/// # Errors
/// It cannot be moved (the new place is taken, or the disk refuses).
fn move_legacy(home: &Path, app_id: &str) -> Result<(), String> {
    let Some(old) = legacy_dir(home, app_id) else {
        return Ok(());
    };
    let new = apps_dir(home).join(app_id);
    if new.exists() {
        return Err(format!(
            "{} is already there; {} stays (still treated as a store app)",
            new.display(),
            old.display()
        ));
    }
    crate::private::create_dir(&apps_dir(home)).map_err(|e| e.to_string())?;
    std::fs::rename(&old, &new)
        .map_err(|e| format!("cannot move {} to {}: {e}", old.display(), new.display()))
}

/// The file that says the one-time move of store apps out of the home folder was made.
fn moved_file(home: &Path) -> PathBuf {
    store_dir(home).join("moved")
}

/// Moves the store apps earlier versions installed in `AAI_HOME/<appId>/` to
/// `AAI_HOME/store/apps/<appId>/`, once: afterwards one look at a file says it was done, so
/// a home of 10,000 apps is not listed at every start. An app that cannot be moved stays
/// where it is and still loads as a store app (its mark says so); it is moved when it is
/// next updated. Returns how many were moved.
pub fn migrate(home: &Path) -> usize {
    let done = moved_file(home);
    if done.exists() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(home) else {
        return 0;
    };
    let mut moved = 0;
    for entry in entries.filter_map(Result::ok) {
        // Only real folders whose name is an appId: the store never made links.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !aai_descriptor::is_valid_app_id(&name) || legacy_dir(home, &name).is_none() {
            continue;
        }
        match move_legacy(home, &name) {
            Ok(()) => moved += 1,
            Err(problem) => tracing::warn!("store app {name} not moved: {problem}"),
        }
    }
    let written = crate::private::create_dir(&store_dir(home))
        .and_then(|()| crate::private::write_private(&done, b"store apps live in store/apps\n"));
    if let Err(error) = written {
        tracing::debug!(file = %done.display(), %error, "the move of store apps is tried again next time");
    }
    moved
}

/// Removes the store app `app_id` (and the user's preference for it).
///
/// # Errors
/// It was not installed from the store, or cannot be removed.
pub fn uninstall(home: &Path, app_id: &str) -> Result<Installed, String> {
    let dir = installed_dir(home, app_id).ok_or_else(|| {
        format!("{app_id} was not installed from the store (`aai-gateway store list`)")
    })?;
    let mark = installed(home, app_id)
        .ok_or_else(|| format!("{} does not read", dir.join(MARK).display()))?;
    std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
    set_preferred(home, app_id, false)?;
    Ok(mark)
}

/// An entry of the local index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listed {
    #[serde(rename = "appId")]
    pub app_id: String,
    #[serde(default)]
    pub name: String,
}

/// The local index, in memory.
#[derive(Default)]
pub struct Index {
    apps: RwLock<Vec<Listed>>,
}

impl Index {
    /// The index saved under `home` (empty when there is none or it does not read).
    pub fn load(home: &Path) -> Self {
        let apps = std::fs::read(store_dir(home).join("index.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Vec<Listed>>(&bytes).ok())
            .unwrap_or_default();
        Self {
            apps: RwLock::new(apps),
        }
    }

    fn replace(&self, apps: Vec<Listed>) {
        *self
            .apps
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = apps;
    }

    /// The store's app a person means by `name` (appId or name, any case).
    pub fn find(&self, name: &str) -> Option<Listed> {
        let apps = self
            .apps
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        apps.iter()
            .find(|a| a.app_id.eq_ignore_ascii_case(name) || a.name.eq_ignore_ascii_case(name))
            .cloned()
    }

    /// The store's apps whose appId or name contains every word of `query`.
    pub fn matching(&self, query: &str, limit: usize) -> Vec<Listed> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let apps = self
            .apps
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        apps.iter()
            .filter(|a| {
                let text = format!("{} {}", a.app_id, a.name).to_lowercase();
                !words.is_empty() && words.iter().all(|w| text.contains(w.as_str()))
            })
            .take(limit)
            .cloned()
            .collect()
    }
}

/// The extra certificate authorities of `web.extra_ca_certs` (a company proxy, a test CA);
/// files that cannot be read are left out (the gateway warns about them at start).
pub fn ca_pems(config: &crate::config::Config) -> Vec<Vec<u8>> {
    config
        .web
        .extra_ca_certs
        .iter()
        .filter_map(|path| crate::config::read_ca_file(path).ok())
        .collect()
}

/// The store client.
pub struct Store {
    pub url: String,
    client: reqwest::Client,
    timestamp_key: Option<String>,
    max_age_seconds: u64,
}

fn failed(what: &str, error: impl std::fmt::Display) -> String {
    format!("the app store did not answer {what}: {error}")
}

impl Store {
    /// # Errors
    /// No `store.url` is configured, or the HTTP client cannot be built.
    pub fn new(config: &StoreConfig, extra_ca_pems: &[Vec<u8>]) -> Result<Self, String> {
        let url = config.url.clone().ok_or(
            "no app store is configured: set \"store\": {\"url\": \"https://…\"} in config.json",
        )?;
        // Over plain HTTP anyone on the path could answer for the store (its timestamp key at
        // the first contact included); only this computer's own loopback is exempt.
        let parsed = url::Url::parse(&url).map_err(|e| format!("store.url {url:?}: {e}"))?;
        let loopback = matches!(
            parsed.host(),
            Some(url::Host::Ipv4(ip)) if ip.is_loopback()
        ) || matches!(parsed.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
            || parsed.host_str() == Some("localhost");
        if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
            return Err(format!(
                "store.url {url:?} is not https: the app store is reached over https only (plain http only on 127.0.0.1/localhost)"
            ));
        }
        Ok(Self {
            url: url.trim_end_matches('/').to_owned(),
            client: aai_executor::http_client(extra_ca_pems)?,
            timestamp_key: config.timestamp_key.clone(),
            max_age_seconds: config.max_age_seconds,
        })
    }

    async fn get(&self, path: &str) -> Result<reqwest::Response, String> {
        let response = self
            .client
            .get(format!("{}{path}", self.url))
            .timeout(std::time::Duration::from_secs(20))
            .send()
            .await
            .map_err(|e| failed(path, e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body: Value = response.json().await.unwrap_or_default();
        Err(format!(
            "the app store answered {status}: {}",
            body["error"].as_str().unwrap_or("no reason given")
        ))
    }

    async fn json(&self, path: &str) -> Result<Value, String> {
        self.get(path)
            .await?
            .json()
            .await
            .map_err(|e| failed(path, e))
    }

    /// Ranked search.
    ///
    /// # Errors
    /// The store cannot be reached or refuses.
    pub async fn search(&self, query: &str) -> Result<Vec<Value>, String> {
        let mut url =
            url::Url::parse(&format!("{}/api/v1/search", self.url)).map_err(|e| e.to_string())?;
        url.query_pairs_mut().append_pair("q", query);
        let path = format!("/api/v1/search?{}", url.query().unwrap_or_default());
        Ok(self.json(&path).await?["results"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// An app's details, with its publisher's key.
    ///
    /// # Errors
    /// The store cannot be reached, or has no such app.
    pub async fn info(&self, app_id: &str) -> Result<Value, String> {
        self.json(&format!("/api/v1/apps/{}", encode(app_id))).await
    }

    /// Every app the store lists.
    ///
    /// # Errors
    /// The store cannot be reached.
    pub async fn list(&self) -> Result<Vec<Listed>, String> {
        let listed = self.json("/api/v1/apps").await?;
        serde_json::from_value(listed["apps"].clone()).map_err(|e| failed("the app list", e))
    }

    /// Fetches `app_id` (`version`, else the latest) and checks it: the publisher is the one
    /// this computer knows for the app (or for its name) with the key it trusted, or one that
    /// key handed over to by a signed rotation; the signature; the store's timestamp (when it
    /// signs them) is fresh and names these bytes; the gateway's own descriptor checks; the
    /// appId.
    ///
    /// # Errors
    /// What failed, in words a person can act on.
    pub async fn fetch(
        &self,
        home: &Path,
        app_id: &str,
        version: Option<&str>,
        trust: Trust<'_>,
    ) -> Result<Fetched, String> {
        let info = self.info(app_id).await?;
        let publisher = info["publisher"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = info["publisher"]["public_key"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let identity = self.identity(home, app_id, &publisher, &key, &info, trust)?;
        let path = match version {
            Some(v) => format!(
                "/api/v1/apps/{}/aai.json?version={}",
                encode(app_id),
                encode(v)
            ),
            None => format!("/api/v1/apps/{}/aai.json", encode(app_id)),
        };
        let response = self.get(&path).await?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let signature = header("x-aai-signature");
        let stamp = header("x-aai-timestamp");
        let text = response.text().await.map_err(|e| failed(&path, e))?;
        verify(&key, text.as_bytes(), &signature)
            .map_err(|problem| format!("{app_id}: {problem}; nothing was installed"))?;
        let descriptor = aai_descriptor::parse(&format!("{}{path}", self.url), text.as_bytes())
            .map_err(|e| format!("the store's descriptor is invalid:\n{e}"))?;
        if descriptor.app_id != app_id {
            return Err(format!(
                "the store served {} for {app_id}; nothing was installed",
                descriptor.app_id
            ));
        }
        let version_text = descriptor.version.clone().unwrap_or_default();
        semver::Version::parse(&version_text).map_err(|_| {
            format!(
                "the store's {app_id} has version {version_text:?}, which is not a semantic version (like 1.2.0): versions could not be ordered, so nothing was installed"
            )
        })?;
        let sha256 = format!("{:x}", Sha256::digest(text.as_bytes()));
        let stamp = self
            .check_stamp(home, app_id, &version_text, &sha256, &stamp)
            .await?;
        if version.is_none()
            && let Some(stamp) = &stamp
            && stamp.latest != version_text
        {
            return Err(format!(
                "the store served {app_id} {version_text} as the latest while its signed timestamp says the latest is {}; nothing was installed",
                stamp.latest
            ));
        }
        Ok(Fetched {
            sha256,
            version: version_text,
            descriptor,
            text,
            publisher,
            key,
            identity,
            stamp,
        })
    }

    /// Whether `publisher` with `key` may speak for `app_id` here: the publisher recorded at
    /// its install (else the one pinned for that name) with its key, or a key that one handed
    /// its apps to through rotations signed by each previous key.
    fn identity(
        &self,
        home: &Path,
        app_id: &str,
        publisher: &str,
        key: &str,
        info: &Value,
        trust: Trust<'_>,
    ) -> Result<Identity, String> {
        let pinned = pinned_keys(home);
        let known = match trust.installed {
            Some(mark) => {
                let key = if mark.key.is_empty() {
                    pinned.get(&mark.publisher).cloned().unwrap_or_default()
                } else {
                    mark.key.clone()
                };
                Some((mark.publisher.clone(), key))
            }
            None => app_publishers(home).remove(app_id).or_else(|| {
                pinned
                    .get(publisher)
                    .map(|key| (publisher.to_owned(), key.clone()))
            }),
        };
        let Some((known_name, known_key)) = known else {
            return Ok(Identity::FirstSeen);
        };
        let change = if known_name != publisher {
            format!(
                "the store now names {publisher:?} as the publisher of {app_id}; it was {known_name:?} when you installed it"
            )
        } else if known_key == key {
            return Ok(Identity::Same);
        } else if rotation_reaches(publisher, &known_key, key, &info["publisher"]["rotations"]) {
            return Ok(Identity::Rotated(format!(
                "publisher {publisher:?} moved to a new key, and the key this computer trusted signed the move"
            )));
        } else {
            format!(
                "the store now gives publisher {publisher:?} another key than the one this computer trusted, and no rotation signed by the trusted key leads to it"
            )
        };
        if trust.accept_publisher_change {
            return Ok(Identity::Changed(change));
        }
        Err(format!(
            "{change}. Nothing was installed: a registry or mirror that swaps publishers could hand you anyone's app. If you know the publisher really changed, run again with --accept-publisher-change ({} keeps what this computer trusts).",
            store_dir(home).join("publishers.json").display()
        ))
    }

    /// The store's signed timestamp on a descriptor, checked: the key is the one configured
    /// or kept from the first contact, the statement names these bytes, and it is younger
    /// than `store.max_age_seconds`. `None` when the store signs no timestamps and never did.
    async fn check_stamp(
        &self,
        home: &Path,
        app_id: &str,
        version: &str,
        sha256: &str,
        header: &str,
    ) -> Result<Option<Stamp>, String> {
        let Some((key, first_seen)) = self.timestamp_key(home).await? else {
            return Ok(None);
        };
        // `<issued> <latest> <signature>`: the latest version is part of the signed text, so
        // it is read from the header and checked with the rest.
        let refused = || {
            format!(
                "the store sent {app_id} {version} without a valid timestamp, though it signs them (a mirror or proxy may be replaying old copies); nothing was installed"
            )
        };
        let mut parts = header.splitn(3, ' ');
        let (Some(issued), Some(latest), Some(signature)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(refused());
        };
        let issued: u64 = issued.parse().map_err(|_| refused())?;
        let statement =
            aai_descriptor::statements::timestamp(app_id, version, sha256, latest, issued);
        verify(&key, &statement, signature).map_err(|_| refused())?;
        let latest = latest.to_owned();
        let age = now().saturating_sub(issued);
        if age > self.max_age_seconds {
            return Err(format!(
                "the store's copy of {app_id} was stamped {} ago, longer than the {} accepted (store.max_age_seconds): a mirror or proxy may be holding back updates. Nothing was installed; try again later or from the store itself.",
                span(age),
                span(self.max_age_seconds)
            ));
        }
        Ok(Some(Stamp {
            issued,
            latest,
            first_seen: first_seen.then_some(key),
        }))
    }

    /// The store's timestamp key: configured, else kept from the first contact, else asked
    /// now (and kept when the store has one).
    async fn timestamp_key(&self, home: &Path) -> Result<Option<(String, bool)>, String> {
        if let Some(key) = &self.timestamp_key {
            return Ok(Some((key.clone(), false)));
        }
        let path = store_dir(home).join("registries.json");
        let mut kept: BTreeMap<String, String> = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        if let Some(key) = kept.get(&self.url) {
            return Ok(Some((key.clone(), false)));
        }
        let answer = self.json("/api/v1/registry").await?;
        let Some(key) = answer["timestamp_key"].as_str().map(str::to_owned) else {
            return Ok(None);
        };
        kept.insert(self.url.clone(), key.clone());
        crate::private::create_dir(&store_dir(home)).map_err(|e| e.to_string())?;
        crate::private::write_private(&path, &serde_json::to_vec_pretty(&kept).unwrap_or_default())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(Some((key, true)))
    }

    /// Reads the store's list into `index` and saves it under `home`.
    ///
    /// # Errors
    /// The store cannot be reached; the old index stays.
    pub async fn refresh(&self, home: &Path, index: &Index) -> Result<usize, String> {
        let apps = self.list().await?;
        let count = apps.len();
        let dir = store_dir(home);
        crate::private::create_dir(&dir).map_err(|e| e.to_string())?;
        crate::private::write_private(
            &dir.join("index.json"),
            &serde_json::to_vec(&apps).unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
        index.replace(apps);
        Ok(count)
    }
}

/// A verified descriptor from the store.
pub struct Fetched {
    pub descriptor: aai_descriptor::Descriptor,
    pub text: String,
    pub version: String,
    pub sha256: String,
    pub publisher: String,
    pub key: String,
    pub identity: Identity,
    /// The store's timestamp, when it signs them.
    pub stamp: Option<Stamp>,
}

/// What the user allowed beyond the store's own checks, for one fetch.
#[derive(Clone, Copy, Default)]
pub struct Trust<'a> {
    /// The app as installed now (its publisher and key are the ones expected).
    pub installed: Option<&'a Installed>,
    /// `--accept-publisher-change`: another publisher or an unrotated key is shown, not refused.
    pub accept_publisher_change: bool,
}

/// How the publisher compares with the one this computer knows.
pub enum Identity {
    /// Never seen: trusted from now on.
    FirstSeen,
    Same,
    /// A new key that the trusted key handed over to.
    Rotated(String),
    /// Another publisher or key, accepted only because the user said so.
    Changed(String),
}

/// A checked timestamp of the store.
pub struct Stamp {
    /// Unix seconds.
    pub issued: u64,
    /// The store's timestamp key when this contact pinned it (shown, so a user who set
    /// `store.timestamp_key` out of band can compare).
    pub first_seen: Option<String>,
    /// The app's latest version at that time.
    pub latest: String,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A duration in the largest whole unit that fits: `3 d`, `5 h`, `40 min`, `12 s`.
fn span(seconds: u64) -> String {
    match seconds {
        s if s >= 86_400 => format!("{} d", s / 86_400),
        s if s >= 3_600 => format!("{} h", s / 3_600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// Whether `rotations` (the store's list, oldest first) lead from `from` to `to`, each step
/// signed by the key it leaves.
fn rotation_reaches(publisher: &str, from: &str, to: &str, rotations: &Value) -> bool {
    let steps = rotations.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut current = from.to_owned();
    // Each step is taken at most once, so a list that loops ends.
    for _ in 0..steps.len() {
        let Some(step) = steps
            .iter()
            .find(|r| r["old_key"].as_str() == Some(current.as_str()))
        else {
            return false;
        };
        let (Some(next), Some(signature)) = (step["new_key"].as_str(), step["signature"].as_str())
        else {
            return false;
        };
        let statement = aai_descriptor::statements::key_rotation(publisher, &current, next);
        if verify(&current, &statement, signature).is_err() {
            return false;
        }
        if next == to {
            return true;
        }
        current = next.to_owned();
    }
    false
}

/// Whether `candidate` may replace `installed`: only a higher version, unless the user allowed
/// going back (`--allow-downgrade`). `Ok(true)` when it is a downgrade the user allowed.
///
/// # Errors
/// The version is not higher, with what to do.
pub fn version_forward(
    installed: &Installed,
    candidate: &str,
    allow_downgrade: bool,
) -> Result<bool, String> {
    let parse = |v: &str| semver::Version::parse(v).ok();
    let (Some(have), Some(new)) = (parse(&installed.version), parse(candidate)) else {
        return Err(format!(
            "{} {} cannot be ordered against {candidate}: not semantic versions; nothing was changed",
            installed.app_id, installed.version
        ));
    };
    if new > have {
        return Ok(false);
    }
    if allow_downgrade {
        return Ok(true);
    }
    Err(format!(
        "the store offers {} {candidate}, which is not newer than the installed {}: a store or mirror serving an older version could bring back what a later one fixed, so nothing was changed. To go back on purpose, use --allow-downgrade.",
        installed.app_id, installed.version
    ))
}

fn encode(part: &str) -> String {
    url::form_urlencoded::byte_serialize(part.as_bytes()).collect()
}

/// Whether `signature` (base64) is `key`'s ed25519 signature of `message`.
///
/// # Errors
/// Why not.
pub fn verify(key: &str, message: &[u8], signature: &str) -> Result<(), String> {
    let engine = base64::engine::general_purpose::STANDARD;
    let key: [u8; 32] = engine
        .decode(key.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("the publisher's key is not an ed25519 key")?;
    let key = ed25519_dalek::VerifyingKey::from_bytes(&key)
        .map_err(|_| "the publisher's key is not an ed25519 key".to_owned())?;
    let signature: [u8; 64] = engine
        .decode(signature.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("the store sent no valid signature")?;
    key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(&signature))
        .map_err(|_| {
            "the signature does not match the descriptor and its publisher's key".to_owned()
        })
}

/// Publisher keys this computer trusts, by publisher.
pub fn pinned_keys(home: &Path) -> BTreeMap<String, String> {
    std::fs::read(store_dir(home).join("publishers.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// What the user is shown before an install: platforms, tools and their risk.
pub fn summary(descriptor: &aai_descriptor::Descriptor) -> Vec<(String, String, String)> {
    let mut tools = Vec::new();
    for platform in aai_descriptor::Platform::ALL {
        for tool in descriptor.tools(platform).unwrap_or_default() {
            let risk = aai_policy::derive_risk(tool.risk, tool.read_only, tool.destructive);
            tools.push((
                platform.key().to_owned(),
                tool.name.clone(),
                crate::gate::risk_name(risk).to_owned(),
            ));
        }
    }
    tools
}

/// A credential a descriptor asks for, and where it would go.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Credential {
    /// The value of an environment variable of the gateway, sent to `origin`.
    Env { var: String, origin: String },
    /// A key or token the user stores with `aai-gateway auth set`, sent to `origin`.
    Stored { origin: String },
    /// An OAuth sign-in at `at`, tokens from `token`, for `scopes`, then sent to `origin`.
    OAuth {
        at: String,
        token: String,
        scopes: String,
        origin: String,
    },
}

impl Credential {
    /// One line for the install and update questions.
    pub fn describe(&self, app_id: &str) -> String {
        match self {
            Self::Env { var, origin } => {
                format!("the environment variable {var}, sent to {origin}")
            }
            Self::Stored { origin } => {
                format!("a key you store with `aai-gateway auth set {app_id}`, sent to {origin}")
            }
            Self::OAuth {
                at,
                token,
                scopes,
                origin,
            } => format!(
                "an OAuth sign-in at {at} (tokens from {token}) for scopes [{scopes}], sent to {origin}"
            ),
        }
    }
}

/// What a descriptor may touch beyond the local apps: every credential it asks for and every
/// origin it talks to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reach {
    pub credentials: std::collections::BTreeSet<Credential>,
    pub origins: std::collections::BTreeSet<String>,
}

/// [`Reach`] of a descriptor (its web section; desktop sections talk to local apps only).
pub fn reach(descriptor: &aai_descriptor::Descriptor) -> Reach {
    let mut reach = Reach::default();
    let Some(web) = &descriptor.platforms.web else {
        return reach;
    };
    let section = &web.fields;
    let origin = aai_executor::rest::origin_of(&section.base_url)
        .unwrap_or_else(|| section.base_url.clone());
    reach.origins.insert(origin.clone());
    let Some(auth) = &section.auth else {
        return reach;
    };
    let text = |name: &str| auth.fields.get(name).and_then(Value::as_str);
    match auth.kind.as_str() {
        "none" => {}
        "oauth2" => {
            let at = text("auth_url").unwrap_or_default();
            let token = text("token_url").unwrap_or_default();
            let at_origin = aai_executor::rest::origin_of(at).unwrap_or_else(|| at.to_owned());
            let token_origin =
                aai_executor::rest::origin_of(token).unwrap_or_else(|| token.to_owned());
            reach.origins.insert(at_origin.clone());
            reach.origins.insert(token_origin.clone());
            reach.credentials.insert(Credential::OAuth {
                at: at_origin,
                token: token_origin,
                scopes: crate::web::auth::scopes(auth),
                origin,
            });
        }
        _ => {
            if let Some(var) = text("env_var") {
                reach.credentials.insert(Credential::Env {
                    var: var.to_owned(),
                    origin: origin.clone(),
                });
            }
            reach.credentials.insert(Credential::Stored { origin });
        }
    }
    reach
}

/// What changes in what an app may touch: credentials and origins added or dropped.
pub fn reach_diff(old: &Reach, new: &Reach, app_id: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for origin in new.origins.difference(&old.origins) {
        lines.push(format!("+ talks to {origin}"));
    }
    for origin in old.origins.difference(&new.origins) {
        lines.push(format!("- no longer talks to {origin}"));
    }
    for credential in new.credentials.difference(&old.credentials) {
        lines.push(format!("+ credential: {}", credential.describe(app_id)));
    }
    for credential in old.credentials.difference(&new.credentials) {
        lines.push(format!("- credential: {}", credential.describe(app_id)));
    }
    lines
}

/// What changes between an installed descriptor and a new one: tools added, removed, and
/// risk changes, as lines.
pub fn diff(old: &aai_descriptor::Descriptor, new: &aai_descriptor::Descriptor) -> Vec<String> {
    let before: BTreeMap<(String, String), String> = summary(old)
        .into_iter()
        .map(|(p, t, r)| ((p, t), r))
        .collect();
    let after: BTreeMap<(String, String), String> = summary(new)
        .into_iter()
        .map(|(p, t, r)| ((p, t), r))
        .collect();
    let mut lines = Vec::new();
    for ((platform, tool), risk) in &after {
        match before.get(&(platform.clone(), tool.clone())) {
            None => lines.push(format!("+ {platform} {tool} (risk {risk})")),
            Some(old) if old != risk => {
                lines.push(format!("~ {platform} {tool}: risk {old} → {risk}"));
            }
            Some(_) => {}
        }
    }
    for (platform, tool) in before.keys() {
        if !after.contains_key(&(platform.clone(), tool.clone())) {
            lines.push(format!("- {platform} {tool}"));
        }
    }
    lines
}

/// Writes a verified descriptor as `AAI_HOME/store/apps/<appId>/aai.json` with its store
/// mark (moving a copy an earlier version installed in `AAI_HOME/<appId>` there first), and
/// pins the publisher's key. The running gateway's discovery picks it up.
///
/// # Errors
/// The files cannot be written.
pub fn write(home: &Path, store: &str, fetched: &Fetched) -> Result<PathBuf, String> {
    let app_id = &fetched.descriptor.app_id;
    if let Err(problem) = move_legacy(home, app_id) {
        tracing::warn!("store app {app_id} not moved: {problem}");
    }
    let dir = apps_dir(home).join(app_id);
    crate::private::create_dir(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mark = Installed {
        app_id: fetched.descriptor.app_id.clone(),
        version: fetched.version.clone(),
        publisher: fetched.publisher.clone(),
        key: fetched.key.clone(),
        sha256: fetched.sha256.clone(),
        store: store.to_owned(),
    };
    crate::private::write_private(
        &dir.join(MARK),
        &serde_json::to_vec_pretty(&mark).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot write {}: {e}", dir.join(MARK).display()))?;
    let path = dir.join("aai.json");
    crate::private::write_private(&path, fetched.text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let mut pinned = pinned_keys(home);
    pinned.insert(fetched.publisher.clone(), fetched.key.clone());
    let dir = store_dir(home);
    crate::private::create_dir(&dir).map_err(|e| e.to_string())?;
    crate::private::write_private(
        &dir.join("publishers.json"),
        &serde_json::to_vec_pretty(&pinned).unwrap_or_default(),
    )
    .map_err(|e| e.to_string())?;
    // Which publisher an app id belongs to outlives the app: a reinstall after an uninstall
    // is checked against it, so a registry cannot hand the id to a new publisher meanwhile.
    let mut owners = app_publishers(home);
    owners.insert(
        fetched.descriptor.app_id.clone(),
        (fetched.publisher.clone(), fetched.key.clone()),
    );
    crate::private::write_private(
        &dir.join("app-publishers.json"),
        &serde_json::to_vec_pretty(&owners).unwrap_or_default(),
    )
    .map_err(|e| e.to_string())?;
    Ok(path)
}

/// The publisher (name, key) each app id was last installed from, kept after uninstall.
fn app_publishers(home: &Path) -> BTreeMap<String, (String, String)> {
    std::fs::read(store_dir(home).join("app-publishers.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// The store mark of an installed app, when it came from the store.
pub fn installed(home: &Path, app_id: &str) -> Option<Installed> {
    let dir = installed_dir(home, app_id)?;
    serde_json::from_slice(&std::fs::read(dir.join(MARK)).ok()?).ok()
}

/// Every app installed from the store (also those an earlier version installed in the home
/// folder, until they are moved).
pub fn all_installed(home: &Path) -> Vec<Installed> {
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut ids = names(&apps_dir(home));
    // Until the one-time move ran (or where it could not move a folder), the home's own
    // folders may hold store apps too.
    ids.extend(
        names(home)
            .into_iter()
            .filter(|name| legacy_dir(home, name).is_some()),
    );
    ids.sort_unstable();
    ids.dedup();
    ids.iter().filter_map(|id| installed(home, id)).collect()
}

/// The hint APP_NOT_FOUND carries when the store knows the app.
pub fn hint(found: &Listed) -> String {
    format!(
        " It is in the app store as {} ({}): the user can install it with `aai-gateway store install {}`.",
        found.app_id, found.name, found.app_id
    )
}

/// A store entry for `aai_apps`, marked as not installed.
pub fn not_installed(found: &Listed) -> Value {
    json!({"appId": found.app_id, "name": found.name, "installed": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(id: &str) -> String {
        json!({"schema_version": "1.0", "appId": id, "name": "Notes", "description": "Notes.",
            "platforms": {"web": {"automation": "restapi", "base_url": "https://notes.example",
                "auth": {"type": "none"}, "tools": []}}})
        .to_string()
    }

    fn with_auth(auth: Value) -> aai_descriptor::Descriptor {
        let text = json!({"schema_version": "1.0", "appId": "com.example.x", "name": "X", "description": "X.",
            "platforms": {"web": {"automation": "restapi", "base_url": "https://api.example.com/v1",
                "auth": auth, "tools": []}}})
        .to_string();
        aai_descriptor::parse("x", text.as_bytes()).expect("valid")
    }

    #[test]
    fn every_credential_kind_and_origin_is_named() {
        let api = "https://api.example.com:443".to_owned();
        let none = reach(&with_auth(json!({"type": "none"})));
        assert_eq!(none.origins.iter().collect::<Vec<_>>(), [&api]);
        assert!(none.credentials.is_empty());

        let key = reach(&with_auth(
            json!({"type": "api_key", "key_name": "X-Key", "env_var": "X_KEY"}),
        ));
        assert!(key.credentials.contains(&Credential::Env {
            var: "X_KEY".into(),
            origin: api.clone()
        }));
        assert!(key.credentials.contains(&Credential::Stored {
            origin: api.clone()
        }));

        let oauth = reach(&with_auth(json!({"type": "oauth2",
            "auth_url": "https://login.example.org/authorize", "token_url": "https://tokens.example.net/token",
            "client_id": "c", "scopes": ["repo", "user"]})));
        assert_eq!(oauth.origins.len(), 3, "{:?}", oauth.origins);
        let lines: Vec<String> = oauth
            .credentials
            .iter()
            .map(|c| c.describe("com.example.x"))
            .collect();
        assert_eq!(
            lines,
            [
                "an OAuth sign-in at https://login.example.org:443 (tokens from https://tokens.example.net:443) for scopes [repo user], sent to https://api.example.com:443"
            ]
        );
        // Moving to another host and asking for a variable shows in an update's diff.
        let diff = reach_diff(&none, &key, "com.example.x");
        assert!(
            diff.iter()
                .any(|l| l.contains("+ credential: the environment variable X_KEY")),
            "{diff:?}"
        );
        assert!(reach_diff(&key, &key, "com.example.x").is_empty());
    }

    /// An app as an earlier version installed it: `AAI_HOME/<appId>/` with its mark.
    fn legacy_install(home: &Path, id: &str, version: &str) {
        let dir = home.join(id);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("aai.json"), notes(id)).expect("write");
        let mark = Installed {
            app_id: id.into(),
            version: version.into(),
            publisher: "acme".into(),
            key: String::new(),
            sha256: "00".into(),
            store: "https://store.example".into(),
        };
        std::fs::write(dir.join(MARK), serde_json::to_vec(&mark).expect("json")).expect("mark");
    }

    #[test]
    fn earlier_installs_move_once_and_stay_store_apps_until_moved() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path();
        legacy_install(home, "com.acme.a", "1.0.0");
        legacy_install(home, "com.acme.b", "2.0.0");
        // The user's own folder, without a mark, stays.
        std::fs::create_dir_all(home.join("org.user.mine")).expect("mkdir");
        std::fs::write(home.join("org.user.mine/aai.json"), notes("org.user.mine")).expect("w");

        assert_eq!(migrate(home), 2);
        assert!(!home.join("com.acme.a").exists());
        assert!(apps_dir(home).join("com.acme.a/aai.json").is_file());
        assert!(home.join("org.user.mine/aai.json").is_file());
        let listed: Vec<String> = all_installed(home).into_iter().map(|a| a.app_id).collect();
        assert_eq!(listed, ["com.acme.a", "com.acme.b"]);
        assert_eq!(
            descriptor_path(home, "com.acme.b"),
            apps_dir(home).join("com.acme.b/aai.json")
        );

        // Done once: a folder an older version writes afterwards is not looked for at start,
        // but is still an installed store app, found, updated in place and removed.
        legacy_install(home, "com.acme.c", "3.0.0");
        assert_eq!(migrate(home), 0);
        assert!(home.join("com.acme.c").exists());
        assert_eq!(
            installed(home, "com.acme.c").map(|a| a.version),
            Some("3.0.0".into())
        );
        assert_eq!(all_installed(home).len(), 3);
        assert_eq!(
            descriptor_path(home, "com.acme.c"),
            home.join("com.acme.c/aai.json")
        );
        let removed = uninstall(home, "com.acme.c").expect("removed");
        assert_eq!(removed.version, "3.0.0");
        assert!(!home.join("com.acme.c").exists());

        set_preferred(home, "com.acme.a", true).expect("prefer");
        assert!(preferred(home).contains("com.acme.a"));
        uninstall(home, "com.acme.a").expect("removed");
        assert!(!apps_dir(home).join("com.acme.a").exists());
        assert!(
            preferred(home).is_empty(),
            "the preference goes with the app"
        );
        // Not a store app, or not an appId at all: refused, nothing removed.
        for refused in ["org.user.mine", "../org.user.mine", "com.acme.a"] {
            let error = uninstall(home, refused).expect_err(refused);
            assert!(error.contains("not installed from the store"), "{error}");
        }
        assert!(home.join("org.user.mine/aai.json").is_file());
    }

    #[test]
    fn another_source_of_the_app_id_is_named_and_the_store_itself_is_not() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().join("home");
        let id = "org.user.notes";
        let mut config = crate::config::Config::default();
        assert_eq!(offered_elsewhere(&home, &config, id), None);
        // Installed from the store already (a reinstall of another version): not elsewhere.
        let store = apps_dir(&home).join(id);
        std::fs::create_dir_all(&store).expect("mkdir");
        std::fs::write(store.join("aai.json"), notes(id)).expect("write");
        assert_eq!(offered_elsewhere(&home, &config, id), None);
        config.paths = vec![dir.path().join("mine")];
        for (source, dir) in [
            (
                crate::catalog::discovery::Source::WebRegistry,
                home.join("web").join(id),
            ),
            (
                crate::catalog::discovery::Source::ConfiguredFolder,
                dir.path().join("mine").join(id),
            ),
            (
                crate::catalog::discovery::Source::UserWritten,
                home.join(id),
            ),
        ] {
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("aai.json"), notes(id)).expect("write");
            assert_eq!(
                offered_elsewhere(&home, &config, id),
                Some((source, dir.join("aai.json"))),
                "{source:?}"
            );
        }
        // A built-in app's id.
        let builtin = crate::catalog::discovery::ScanOptions::new(&home, &config, false)
            .builtins
            .first()
            .and_then(|f| f.outcome.as_ref().ok().map(|e| e.summary.app_id.clone()))
            .expect("a built-in app");
        assert_eq!(
            offered_elsewhere(&home, &config, &builtin).map(|(s, _)| s),
            Some(crate::catalog::discovery::Source::BuiltIn)
        );
    }
}
