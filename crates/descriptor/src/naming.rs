//! MCP tool names for apps: `app_<slug>`, valid for every client.
//!
//! Claude Desktop/Code reject a whole server whose tool list has one name outside
//! `^[a-zA-Z0-9_-]{1,64}$`, so app ids are mapped into that alphabet. Long or colliding slugs
//! get a short hash of the app id, so every app keeps a unique, stable name.

use std::collections::{HashMap, HashSet};

/// Longest tool name MCP clients accept.
pub const MAX_TOOL_NAME: usize = 64;

const PREFIX: &str = "app_";

/// Whether `name` is a tool name every MCP client accepts.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The plain slug of an app id: `app_` + the id with every other character turned into `_`.
fn base_slug(app_id: &str) -> String {
    let mut slug = String::with_capacity(PREFIX.len() + app_id.len());
    slug.push_str(PREFIX);
    slug.extend(app_id.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            c
        } else {
            '_'
        }
    }));
    slug
}

/// FNV-1a, 64 bit: a stable hash that does not change between releases or platforms.
fn stable_hash(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

fn hashed_slug(app_id: &str, base: &str, salt: u32) -> String {
    let key = if salt == 0 {
        app_id.to_owned()
    } else {
        format!("{app_id}#{salt}")
    };
    let suffix = format!("_{:08x}", stable_hash(&key) as u32);
    let mut keep = MAX_TOOL_NAME - suffix.len();
    keep = keep.min(base.len());
    // `base` is ASCII, so any byte index is a char boundary.
    format!("{}{suffix}", &base[..keep])
}

/// Assigns each app id its tool name. The result is parallel to `app_ids`, every name is
/// valid and unique, and an app's name depends only on the ids that share its plain slug.
pub fn assign_slugs(app_ids: &[&str]) -> Vec<String> {
    let bases: Vec<String> = app_ids.iter().map(|id| base_slug(id)).collect();
    let mut counts: HashMap<&str, usize> = HashMap::with_capacity(bases.len());
    for base in &bases {
        *counts.entry(base.as_str()).or_default() += 1;
    }
    let plain = |base: &str| counts.get(base) == Some(&1) && base.len() <= MAX_TOOL_NAME;
    // Plain slugs that are unique and short enough are theirs, so a hashed name never takes
    // one (nor another hashed name).
    let mut hashed: HashSet<String> = HashSet::new();
    app_ids
        .iter()
        .zip(&bases)
        .map(|(id, base)| {
            if plain(base) {
                return base.clone();
            }
            let mut salt = 0;
            loop {
                let candidate = hashed_slug(id, base, salt);
                if !plain(&candidate) && hashed.insert(candidate.clone()) {
                    return candidate;
                }
                salt += 1;
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn plain_ids_keep_readable_names() {
        assert_eq!(
            assign_slugs(&["com.apple.mail", "org.mpris.MediaPlayer2.mpv"]),
            vec!["app_com_apple_mail", "app_org_mpris_MediaPlayer2_mpv"]
        );
    }

    #[test]
    fn a_thousand_long_odd_and_colliding_ids_get_unique_valid_names() {
        let mut ids = Vec::new();
        for i in 0..250 {
            // Collide after `.` → `_`.
            ids.push(format!("com.example.app{i}"));
            ids.push(format!("com.example_app{i}"));
            // Longer than 64 characters, sharing a long prefix.
            ids.push(format!(
                "org.{}.very.long.vendor.name.product{i}",
                "x".repeat(60)
            ));
            // Odd characters and non-ASCII.
            ids.push(format!("net.ünïcode:{i}/weird name+{i}"));
        }
        assert_eq!(ids.len(), 1000);
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let names = assign_slugs(&refs);
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), 1000, "names must be unique");
        for name in &names {
            assert!(is_valid_tool_name(name), "invalid tool name {name:?}");
            assert!(name.starts_with("app_"));
        }
        // Stable: the same input gives the same names.
        assert_eq!(assign_slugs(&refs), names);
    }

    #[test]
    fn validity_matches_client_rule() {
        assert!(is_valid_tool_name("aai_exec"));
        assert!(!is_valid_tool_name("app:com.apple.mail"));
        assert!(!is_valid_tool_name(&"a".repeat(65)));
        assert!(!is_valid_tool_name(""));
    }
}
