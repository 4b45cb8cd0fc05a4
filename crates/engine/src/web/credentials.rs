//! Where API keys and OAuth tokens live: the OS keychain on macOS and Windows (`keyring`),
//! else `AAI_HOME/tokens/<appId>.json` with mode 0600 in a 0700 directory.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What is stored for one app.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stored {
    /// An API key or bearer token set with `auth set`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<Tokens>,
    /// The origin (`scheme://host:port`) the secret was set up for: it is sent nowhere else.
    /// `None`: stored by an earlier version; only a descriptor from this machine gets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Variables the app's MCP server is started with (its descriptor names them in
    /// `env_from_store`), by name: they go to that server's process and nowhere else.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .field("oauth", &self.oauth.as_ref().map(|_| "[redacted]"))
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// OAuth tokens.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tokens {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; `None`: the server gave no lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The API origin the user signed in for: the access token is sent nowhere else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_origin: Option<String>,
    /// The token endpoint's origin at sign-in: the refresh token is sent nowhere else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_origin: Option<String>,
}

/// The credential store.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    keychain: bool,
}

const KEYCHAIN_SERVICE: &str = "aai-gateway";

impl Store {
    /// The store under `home`; the OS keychain is used where this build has one.
    pub fn new(home: &Path) -> Self {
        Self {
            dir: home.join("tokens"),
            keychain: cfg!(any(target_os = "macos", windows))
                && std::env::var_os("AAI_NO_KEYCHAIN").is_none(),
        }
    }

    /// Where it keeps secrets, for `auth status`.
    pub fn describe(&self) -> String {
        if self.keychain {
            "the OS keychain".into()
        } else {
            format!("{} (files readable only by you)", self.dir.display())
        }
    }

    fn file(&self, app_id: &str) -> PathBuf {
        self.dir.join(format!("{app_id}.json"))
    }

    /// What is stored for `app_id` (empty when nothing is).
    ///
    /// # Errors
    /// A message when the store cannot be read.
    pub fn get(&self, app_id: &str) -> Result<Stored, CredentialError> {
        let text = if self.keychain {
            keychain::get(app_id)?
        } else {
            match std::fs::read_to_string(self.file(app_id)) {
                Ok(text) => Some(text),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(source) => {
                    return Err(CredentialError::Read {
                        path: self.file(app_id),
                        source,
                    });
                }
            }
        };
        match text {
            Some(text) => {
                serde_json::from_str(&text).map_err(|source| CredentialError::Unreadable {
                    app_id: app_id.to_owned(),
                    source,
                })
            }
            None => Ok(Stored::default()),
        }
    }

    /// Replaces what is stored for `app_id`.
    ///
    /// # Errors
    /// A message when the store cannot be written.
    pub fn put(&self, app_id: &str, stored: &Stored) -> Result<(), CredentialError> {
        let text = serde_json::to_string(stored).map_err(CredentialError::Serialize)?;
        if self.keychain {
            return keychain::put(app_id, &text);
        }
        create_private_dir(&self.dir)?;
        let path = self.file(app_id);
        let temp = self.dir.join(format!(".{app_id}.json.tmp"));
        write_private(&temp, text.as_bytes())?;
        std::fs::rename(&temp, &path).map_err(|source| CredentialError::Write { path, source })
    }

    /// Forgets everything stored for `app_id`.
    ///
    /// # Errors
    /// A message when the store cannot be written.
    pub fn remove(&self, app_id: &str) -> Result<bool, CredentialError> {
        if self.keychain {
            return keychain::remove(app_id);
        }
        match std::fs::remove_file(self.file(app_id)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(CredentialError::Write {
                path: self.file(app_id),
                source,
            }),
        }
    }

    /// The apps with something stored (file store only; the keychain cannot be listed).
    pub fn apps(&self) -> Vec<String> {
        let mut apps: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".json")
                    .filter(|n| !n.starts_with('.'))
                    .map(str::to_owned)
            })
            .collect();
        apps.sort();
        apps
    }
}

/// Why stored credentials could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the stored credentials of {app_id} are unreadable: {source}")]
    Unreadable {
        app_id: String,
        source: serde_json::Error,
    },
    #[error("the credentials do not serialize: {0}")]
    Serialize(serde_json::Error),
    #[error("the OS keychain: {0}")]
    Keychain(String),
}

fn create_private_dir(dir: &Path) -> Result<(), CredentialError> {
    std::fs::create_dir_all(dir).map_err(|source| CredentialError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| CredentialError::Write {
                path: dir.to_path_buf(),
                source,
            },
        )?;
    }
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CredentialError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = |source| CredentialError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut file = options.open(path).map_err(written)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(written)
}

#[cfg(any(target_os = "macos", windows))]
mod keychain {
    use super::{CredentialError, KEYCHAIN_SERVICE};

    fn entry(app_id: &str) -> Result<keyring::Entry, CredentialError> {
        keyring::Entry::new(KEYCHAIN_SERVICE, app_id)
            .map_err(|e| CredentialError::Keychain(e.to_string()))
    }

    pub fn get(app_id: &str) -> Result<Option<String>, CredentialError> {
        match entry(app_id)?.get_password() {
            Ok(text) => Ok(Some(text)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(error) => Err(CredentialError::Keychain(error.to_string())),
        }
    }

    pub fn put(app_id: &str, text: &str) -> Result<(), CredentialError> {
        entry(app_id)?
            .set_password(text)
            .map_err(|e| CredentialError::Keychain(e.to_string()))
    }

    pub fn remove(app_id: &str) -> Result<bool, CredentialError> {
        match entry(app_id)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(error) => Err(CredentialError::Keychain(error.to_string())),
        }
    }
}

#[cfg(not(any(target_os = "macos", windows)))]
mod keychain {
    //! No keychain in this build: the file store is used (`Store::keychain` is false).
    use super::CredentialError;

    pub fn get(_app_id: &str) -> Result<Option<String>, CredentialError> {
        Ok(None)
    }

    pub fn put(_app_id: &str, _text: &str) -> Result<(), CredentialError> {
        Err(CredentialError::Keychain(format!(
            "none in this build ({})",
            super::KEYCHAIN_SERVICE
        )))
    }

    pub fn remove(_app_id: &str) -> Result<bool, CredentialError> {
        Ok(false)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_private_and_round_trip() {
        let dir = tempfile::tempdir().expect("dir");
        let store = Store::new(dir.path());
        assert_eq!(store.get("com.example").expect("empty"), Stored::default());
        let stored = Stored {
            secret: Some("sk-test-123456".into()),
            oauth: None,
            origin: Some("https://api.example.com:443".into()),
            env: [("GITHUB_TOKEN".to_owned(), "ghp_test".to_owned())].into(),
        };
        store.put("com.example", &stored).expect("put");
        assert_eq!(store.get("com.example").expect("get"), stored);
        let mode = std::fs::metadata(dir.path().join("tokens/com.example.json"))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(dir.path().join("tokens"))
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(store.apps(), ["com.example"]);
        assert!(!format!("{stored:?}").contains("sk-test"));
        assert!(!format!("{stored:?}").contains("ghp_test"));
        assert!(format!("{stored:?}").contains("GITHUB_TOKEN"));
        assert!(store.remove("com.example").expect("remove"));
        assert_eq!(store.get("com.example").expect("gone"), Stored::default());
    }
}
