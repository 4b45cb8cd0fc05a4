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

mod install;
mod reach;
mod trust;

pub use install::*;
pub use reach::*;
pub use trust::*;

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

/// Why the app store's client failed or refused; its text is what the user reads.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached, or its answer could not be read.
    #[error("the app store did not answer {what}: {source}")]
    Unanswered {
        what: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store answered with an error.
    #[error("the app store answered {status}: {reason}")]
    Answered {
        status: reqwest::StatusCode,
        reason: String,
    },
    /// A file of the store's apps could not be written, moved or removed.
    #[error(transparent)]
    File(#[from] crate::private::FileError),
    /// What is not accepted: no store configured, a descriptor that is invalid, unsigned,
    /// older or from another publisher; worded for the user.
    #[error("{0}")]
    Refused(String),
    /// No HTTPS client could be made (an unusable `web.extra_ca_certs` file).
    #[error(transparent)]
    Client(#[from] aai_executor::ClientError),
}

impl From<String> for StoreError {
    fn from(message: String) -> Self {
        Self::Refused(message)
    }
}

impl From<&str> for StoreError {
    fn from(message: &str) -> Self {
        Self::Refused(message.to_owned())
    }
}

impl StoreError {
    /// A file the store writes, moves or removes.
    pub(crate) fn file(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let file = crate::private::FileError::at(action, path);
        move |source| Self::File(file(source))
    }
}

fn failed(what: &str, error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Unanswered {
        what: what.to_owned(),
        source: Box::new(error),
    }
}

impl Store {
    /// # Errors
    /// No `store.url` is configured, or the HTTP client cannot be built.
    pub fn new(config: &StoreConfig, extra_ca_pems: &[Vec<u8>]) -> Result<Self, StoreError> {
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
            ).into());
        }
        Ok(Self {
            url: url.trim_end_matches('/').to_owned(),
            client: aai_executor::http_client(extra_ca_pems)?,
            timestamp_key: config.timestamp_key.clone(),
            max_age_seconds: config.max_age_seconds,
        })
    }

    async fn get(&self, path: &str) -> Result<reqwest::Response, StoreError> {
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
        Err(StoreError::Answered {
            status,
            reason: body["error"]
                .as_str()
                .unwrap_or("no reason given")
                .to_owned(),
        })
    }

    async fn json(&self, path: &str) -> Result<Value, StoreError> {
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
    pub async fn search(&self, query: &str) -> Result<Vec<Value>, StoreError> {
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
    pub async fn info(&self, app_id: &str) -> Result<Value, StoreError> {
        self.json(&format!("/api/v1/apps/{}", encode(app_id))).await
    }

    /// Every app the store lists.
    ///
    /// # Errors
    /// The store cannot be reached.
    pub async fn list(&self) -> Result<Vec<Listed>, StoreError> {
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
    ) -> Result<Fetched, StoreError> {
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
            )
            .into());
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
            ).into());
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
    ) -> Result<Identity, StoreError> {
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
        ).into())
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
    ) -> Result<Option<Stamp>, StoreError> {
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
            return Err(refused().into());
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
            ).into());
        }
        Ok(Some(Stamp {
            issued,
            latest,
            first_seen: first_seen.then_some(key),
        }))
    }

    /// The store's timestamp key: configured, else kept from the first contact, else asked
    /// now (and kept when the store has one).
    async fn timestamp_key(&self, home: &Path) -> Result<Option<(String, bool)>, StoreError> {
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
        crate::private::create_dir(&store_dir(home))
            .map_err(StoreError::file("create", &store_dir(home)))?;
        crate::private::write_private(&path, &serde_json::to_vec_pretty(&kept).unwrap_or_default())
            .map_err(StoreError::file("write", &path))?;
        Ok(Some((key, true)))
    }

    /// Reads the store's list into `index` and saves it under `home`.
    ///
    /// # Errors
    /// The store cannot be reached; the old index stays.
    pub async fn refresh(&self, home: &Path, index: &Index) -> Result<usize, StoreError> {
        let apps = self.list().await?;
        let count = apps.len();
        let dir = store_dir(home);
        crate::private::create_dir(&dir).map_err(StoreError::file("create", &dir))?;
        crate::private::write_private(
            &dir.join("index.json"),
            &serde_json::to_vec(&apps).unwrap_or_default(),
        )
        .map_err(StoreError::file("write", &dir.join("index.json")))?;
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
            assert!(
                error.to_string().contains("not installed from the store"),
                "{error}"
            );
        }
        assert!(home.join("org.user.mine/aai.json").is_file());
    }

    #[test]
    fn another_source_of_the_app_id_is_named_and_the_store_itself_is_not() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().join("home");
        let id = "org.user.notes";
        let mut config = crate::config::Config::default();
        assert_eq!(offered_elsewhere(&home, &config, &[], id), None);
        // Installed from the store already (a reinstall of another version): not elsewhere.
        let store = apps_dir(&home).join(id);
        std::fs::create_dir_all(&store).expect("mkdir");
        std::fs::write(store.join("aai.json"), notes(id)).expect("write");
        assert_eq!(offered_elsewhere(&home, &config, &[], id), None);
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
                offered_elsewhere(&home, &config, &[], id),
                Some((source, dir.join("aai.json"))),
                "{source:?}"
            );
        }
        // A built-in app's id: offered by a toolset plugged into the gateway.
        let builtin = "org.user.builtin";
        let descriptor =
            aai_descriptor::parse("built in", notes(builtin).as_bytes()).expect("a descriptor");
        let plugged = [crate::catalog::discovery::PluggedApp::new(
            std::sync::Arc::new(descriptor),
            |_| true,
        )];
        assert_eq!(offered_elsewhere(&home, &config, &[], builtin), None);
        assert_eq!(
            offered_elsewhere(&home, &config, &plugged, builtin).map(|(s, _)| s),
            Some(crate::catalog::discovery::Source::BuiltIn)
        );
    }
}
