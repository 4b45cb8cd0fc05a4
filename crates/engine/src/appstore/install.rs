//! The store's apps on disk: where each is installed, its mark, the user's preference of a
//! store app over another source, installing, moving earlier installs, uninstalling.

use super::*;

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
pub(super) fn legacy_dir(home: &Path, app_id: &str) -> Option<PathBuf> {
    let dir = home.join(app_id);
    dir.join(MARK).is_file().then_some(dir)
}

/// The folder of the installed store app `app_id`: its new place, or the one an earlier
/// version used while it has not been moved. `None` for a text that is not an appId (it is
/// joined to paths).
pub(super) fn installed_dir(home: &Path, app_id: &str) -> Option<PathBuf> {
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
pub fn set_preferred(home: &Path, app_id: &str, prefer: bool) -> Result<(), StoreError> {
    let mut chosen = preferred(home);
    let changed = if prefer {
        chosen.insert(app_id.to_owned())
    } else {
        chosen.remove(app_id)
    };
    if !changed {
        return Ok(());
    }
    crate::private::create_dir(&store_dir(home))
        .map_err(StoreError::file("create", &store_dir(home)))?;
    let file = preferred_file(home);
    crate::private::write_private(
        &file,
        &serde_json::to_vec_pretty(&chosen).unwrap_or_default(),
    )
    .map_err(StoreError::file("write", &file))
}

/// Another source offering `app_id` on this machine, and the file it comes from: the one
/// that would win over a store app of that id (a user-written descriptor, a configured
/// folder or file, a web registry copy, a built-in app, an app bundle). One discovery scan,
/// with the apps plugged into the gateway (`plugged`: the built-in ones) offered as it offers
/// them.
pub fn offered_elsewhere(
    home: &Path,
    config: &crate::config::Config,
    plugged: &[crate::catalog::discovery::PluggedApp],
    app_id: &str,
) -> Option<(crate::catalog::discovery::Source, PathBuf)> {
    let options =
        crate::catalog::discovery::ScanOptions::new(home, config, false).plug(config, plugged);
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
pub(super) fn move_legacy(home: &Path, app_id: &str) -> Result<(), StoreError> {
    let Some(old) = legacy_dir(home, app_id) else {
        return Ok(());
    };
    let new = apps_dir(home).join(app_id);
    if new.exists() {
        return Err(format!(
            "{} is already there; {} stays (still treated as a store app)",
            new.display(),
            old.display()
        )
        .into());
    }
    crate::private::create_dir(&apps_dir(home))
        .map_err(StoreError::file("create", &apps_dir(home)))?;
    std::fs::rename(&old, &new).map_err(StoreError::file("move", &old))
}

/// The file that says the one-time move of store apps out of the home folder was made.
pub(super) fn moved_file(home: &Path) -> PathBuf {
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
pub fn uninstall(home: &Path, app_id: &str) -> Result<Installed, StoreError> {
    let dir = installed_dir(home, app_id).ok_or_else(|| {
        format!("{app_id} was not installed from the store (`aai-gateway store list`)")
    })?;
    let mark = installed(home, app_id)
        .ok_or_else(|| format!("{} does not read", dir.join(MARK).display()))?;
    std::fs::remove_dir_all(&dir).map_err(StoreError::file("remove", &dir))?;
    set_preferred(home, app_id, false)?;
    Ok(mark)
}

/// Writes a verified descriptor as `AAI_HOME/store/apps/<appId>/aai.json` with its store
/// mark (moving a copy an earlier version installed in `AAI_HOME/<appId>` there first), and
/// pins the publisher's key. The running gateway's discovery picks it up.
///
/// # Errors
/// The files cannot be written.
pub fn write(home: &Path, store: &str, fetched: &Fetched) -> Result<PathBuf, StoreError> {
    let app_id = &fetched.descriptor.app_id;
    if let Err(problem) = move_legacy(home, app_id) {
        tracing::warn!("store app {app_id} not moved: {problem}");
    }
    let dir = apps_dir(home).join(app_id);
    crate::private::create_dir(&dir).map_err(StoreError::file("create", &dir))?;
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
    .map_err(StoreError::file("write", &dir.join(MARK)))?;
    let path = dir.join("aai.json");
    crate::private::write_private(&path, fetched.text.as_bytes())
        .map_err(StoreError::file("write", &path))?;
    let mut pinned = pinned_keys(home);
    pinned.insert(fetched.publisher.clone(), fetched.key.clone());
    let dir = store_dir(home);
    crate::private::create_dir(&dir).map_err(StoreError::file("create", &dir))?;
    crate::private::write_private(
        &dir.join("publishers.json"),
        &serde_json::to_vec_pretty(&pinned).unwrap_or_default(),
    )
    .map_err(StoreError::file("write", &dir.join("publishers.json")))?;
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
    .map_err(StoreError::file("write", &dir.join("app-publishers.json")))?;
    Ok(path)
}

/// The publisher (name, key) each app id was last installed from, kept after uninstall.
pub(super) fn app_publishers(home: &Path) -> BTreeMap<String, (String, String)> {
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
