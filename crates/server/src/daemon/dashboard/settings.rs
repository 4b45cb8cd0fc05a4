//! The settings the dashboard changes, kept where the user keeps them: `config.json`. An edit
//! reads the file as JSON (so keys it does not touch stay as they were), changes one value,
//! checks that the result is still a valid config, and replaces the file atomically. The
//! policy takes effect at once; toolsets when discovery sees the file change (it re-scans on
//! every change of `config.json` and sends `list_changed`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use aai_contain::own_files::FileError;
use aai_engine::config::{CONFIG_FILE, Config, ParseError};
use aai_engine::pipeline::Gateway;

/// Why a setting was not changed; the dashboard shows it as it is.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{0:?} is not a built-in toolset")]
    NotAToolset(String),
    #[error("name the client")]
    NoClient,
    #[error("{profile:?} is not a profile; choose one of {choices}")]
    NotAProfile { profile: String, choices: String },
    #[error(
        "{} is not valid JSON ({source}); fix it first (`aai-gateway config check`)",
        path.display()
    )]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("config.json is invalid ({0}); fix it first (`aai-gateway config check`)")]
    Invalid(ParseError),
    /// The change itself would make the config invalid.
    #[error(transparent)]
    Refused(ParseError),
    #[error(transparent)]
    File(#[from] FileError),
}

/// The built-in toolsets of the gateway's kit, each with whether the config in force turns
/// it on.
pub fn toolsets(gateway: &Gateway) -> Vec<Value> {
    let Some(kit) = gateway.kit() else {
        return Vec::new();
    };
    let on = kit.descriptors(&gateway.config().local);
    kit.all()
        .iter()
        .map(|d| {
            json!({
                "app": d.app_id,
                "name": d.name,
                "on": on.iter().any(|o| o.app_id == d.app_id),
            })
        })
        .collect()
}

/// The profiles a client may be given: the presets and the config's own.
pub fn profiles(gateway: &Gateway) -> Vec<String> {
    let mut names: Vec<String> = ["full_auto", "development", "strict", "observe"]
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    names.extend(gateway.policy_config().profiles.keys().cloned());
    names
}

/// Turns built-in toolset `app` (`local.files`, …) on or off.
///
/// # Errors
/// An unknown toolset, or a config that cannot be read, is invalid, or cannot be written.
pub fn set_toolset(gateway: &Gateway, app: &str, on: bool) -> Result<(), SettingsError> {
    let key = gateway
        .kit()
        .map(|kit| kit.all())
        .unwrap_or_default()
        .iter()
        .find(|d| d.app_id == app)
        .and_then(|d| d.app_id.strip_prefix("local.").map(str::to_owned))
        .ok_or_else(|| SettingsError::NotAToolset(app.to_owned()))?;
    edit(gateway.home(), |config| {
        object(config, "local").insert(key, json!(on));
    })?;
    Ok(())
}

/// Gives `client` the policy profile `profile`: the first rule of `policy.rules` names the
/// client alone (rules naming only this client are replaced).
///
/// # Errors
/// An unknown profile, or a config that cannot be read, is invalid, or cannot be written.
pub fn set_profile(gateway: &Gateway, client: &str, profile: &str) -> Result<(), SettingsError> {
    if client.trim().is_empty() {
        return Err(SettingsError::NoClient);
    }
    let choices = profiles(gateway);
    if !choices.iter().any(|p| p == profile) {
        return Err(SettingsError::NotAProfile {
            profile: profile.to_owned(),
            choices: choices.join(", "),
        });
    }
    let config = edit(gateway.home(), |config| {
        give_profile(config, client, profile)
    })?;
    gateway.live().set_policy(config.policy);
    Ok(())
}

/// Puts a rule giving `client` `profile` first in `policy.rules`, replacing the rules that
/// name only this client (rules with a root stay: they are about where the client works).
fn give_profile(config: &mut Map<String, Value>, client: &str, profile: &str) {
    let policy = object(config, "policy");
    let rules = policy.entry("rules").or_insert_with(|| json!([]));
    if !rules.is_array() {
        *rules = json!([]);
    }
    if let Some(rules) = rules.as_array_mut() {
        rules.retain(|rule| {
            let only_this_client = rule.get("root").is_none()
                && rule["client"]
                    .as_str()
                    .is_some_and(|c| c.eq_ignore_ascii_case(client));
            !only_this_client
        });
        rules.insert(0, json!({"client": client, "profile": profile}));
    }
}

/// The object at `key` of `config`, made one if it is missing or not an object.
fn object<'a>(config: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = config
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("made an object above")
}

/// Applies `change` to `config.json` under `home` and returns the config it now holds.
fn edit(
    home: &Path,
    change: impl FnOnce(&mut Map<String, Value>),
) -> Result<Config, SettingsError> {
    let path = home.join(CONFIG_FILE);
    let mut config: Map<String, Value> = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| SettingsError::NotJson {
            path: path.clone(),
            source,
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(e) => return Err(FileError::at("read", &path)(e).into()),
    };
    Config::parse(&path, &serde_json::to_vec(&config).unwrap_or_default())
        .map_err(SettingsError::Invalid)?;
    change(&mut config);
    let text = serde_json::to_string_pretty(&config).unwrap_or_default() + "\n";
    let parsed = Config::parse(&path, text.as_bytes()).map_err(SettingsError::Refused)?;
    let dir = path.parent().unwrap_or(home);
    aai_contain::own_files::create_dir(dir).map_err(FileError::at("create", dir))?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(FileError::at("write in", dir))?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(FileError::at("write", &path))?;
    file.persist(&path)
        .map_err(|e| FileError::at("replace", &path)(e.error))?;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edited(before: &str, change: impl FnOnce(&mut Map<String, Value>)) -> (Value, Config) {
        let home = tempfile::tempdir().expect("home");
        if !before.is_empty() {
            std::fs::write(home.path().join(CONFIG_FILE), before).expect("write");
        }
        let config = edit(home.path(), change).expect("edit");
        let text = std::fs::read_to_string(home.path().join(CONFIG_FILE)).expect("read");
        (serde_json::from_str(&text).expect("json"), config)
    }

    #[test]
    fn edits_keep_what_they_do_not_touch() {
        let (file, config) = edited(
            r#"{"timeout_seconds": 7, "local": {"terminal": false}}"#,
            |c| {
                object(c, "local").insert("files".into(), json!(false));
            },
        );
        assert_eq!(file["timeout_seconds"], 7);
        assert_eq!(file["local"], json!({"terminal": false, "files": false}));
        assert!(!config.local.files && !config.local.terminal && config.local.screen);
        let (file, _) = edited("", |c| {
            object(c, "local").insert("browser".into(), json!(false));
        });
        assert_eq!(file, json!({"local": {"browser": false}}));
    }

    #[test]
    fn a_client_gets_one_rule_first_and_roots_stay() {
        let before = r#"{"policy": {"default_profile": "strict", "rules": [
            {"client": "other", "profile": "observe"},
            {"client": "Cursor", "profile": "observe"},
            {"client": "cursor", "root": "/work", "profile": "full_auto"}]}}"#;
        let (file, config) = edited(before, |c| give_profile(c, "cursor", "full_auto"));
        assert_eq!(
            file["policy"]["rules"],
            json!([
                {"client": "cursor", "profile": "full_auto"},
                {"client": "other", "profile": "observe"},
                {"client": "cursor", "root": "/work", "profile": "full_auto"}
            ])
        );
        assert_eq!(file["policy"]["default_profile"], "strict");
        assert_eq!(config.policy.profile_for("CURSOR", &[]).0, "full_auto");
        assert_eq!(config.policy.profile_for("other", &[]).0, "observe");
        let (file, _) = edited("", |c| give_profile(c, "cli", "strict"));
        assert_eq!(
            file,
            json!({"policy": {"rules": [{"client": "cli", "profile": "strict"}]}})
        );
    }

    #[test]
    fn an_invalid_config_is_not_edited() {
        let home = tempfile::tempdir().expect("home");
        let path = home.path().join(CONFIG_FILE);
        for broken in [r#"{"timeout_seconds": "#, r#"{"no_such_key": 1}"#] {
            std::fs::write(&path, broken).expect("write");
            let error = edit(home.path(), |_| {}).expect_err("invalid").to_string();
            assert!(error.contains("fix it first"), "{error}");
            assert_eq!(std::fs::read_to_string(&path).expect("read"), broken);
        }
        // An edit that would make it invalid is refused and leaves the file alone.
        std::fs::write(&path, "{}").expect("write");
        let error = edit(home.path(), |c| {
            c.insert("local".into(), json!({"files": "yes"}));
        })
        .expect_err("bad value")
        .to_string();
        assert!(error.contains("config.json"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "{}");
    }
}
