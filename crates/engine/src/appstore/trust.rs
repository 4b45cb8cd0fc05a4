//! Whether a fetched app is the one the user trusts: the publisher and its key (and the
//! rotations the registry keeps), versions that only go forward, the store's timestamps.

use super::*;

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

pub(super) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A duration in the largest whole unit that fits: `3 d`, `5 h`, `40 min`, `12 s`.
pub(super) fn span(seconds: u64) -> String {
    match seconds {
        s if s >= 86_400 => format!("{} d", s / 86_400),
        s if s >= 3_600 => format!("{} h", s / 3_600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// Whether `rotations` (the store's list, oldest first) lead from `from` to `to`, each step
/// signed by the key it leaves.
pub(super) fn rotation_reaches(publisher: &str, from: &str, to: &str, rotations: &Value) -> bool {
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
) -> Result<bool, StoreError> {
    let parse = |v: &str| semver::Version::parse(v).ok();
    let (Some(have), Some(new)) = (parse(&installed.version), parse(candidate)) else {
        return Err(format!(
            "{} {} cannot be ordered against {candidate}: not semantic versions; nothing was changed",
            installed.app_id, installed.version
        ).into());
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
    ).into())
}

pub(super) fn encode(part: &str) -> String {
    url::form_urlencoded::byte_serialize(part.as_bytes()).collect()
}

/// Whether `signature` (base64) is `key`'s ed25519 signature of `message`.
///
/// # Errors
/// Why not.
pub fn verify(key: &str, message: &[u8], signature: &str) -> Result<(), StoreError> {
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
            StoreError::Refused(
                "the signature does not match the descriptor and its publisher's key".to_owned(),
            )
        })
}

/// Publisher keys this computer trusts, by publisher.
pub fn pinned_keys(home: &Path) -> BTreeMap<String, String> {
    std::fs::read(store_dir(home).join("publishers.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}
