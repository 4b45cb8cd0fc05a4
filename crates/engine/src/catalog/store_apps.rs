//! Where the app store's apps live under `AAI_HOME`, and which of them the user chose over
//! another source of the same appId: what discovery needs of the store, without the store.

use std::path::{Path, PathBuf};

/// The file beside an installed descriptor that says it came from the store.
pub const MARK: &str = ".store.json";

pub(crate) fn store_dir(home: &Path) -> PathBuf {
    home.join("store")
}

/// Where store apps are installed, `AAI_HOME/store/apps/<appId>/`: every descriptor under it
/// is a copy from the network, never one the user wrote ([`crate::catalog::discovery::FetchedRoots`]).
pub fn apps_dir(home: &Path) -> PathBuf {
    store_dir(home).join("apps")
}

/// The file listing the store apps the user chose over another source of the same appId.
pub fn preferred_file(home: &Path) -> PathBuf {
    store_dir(home).join("preferred.json")
}

/// The store apps the user chose over another source (`store install --prefer-store`).
pub fn preferred(home: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read(preferred_file(home))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}
