//! The config in force, read again when `config.json` changes.
//!
//! Discovery already wakes on every change of `config.json`; before it scans it calls
//! [`LiveConfig::reload`]. A valid file takes effect at once: the config is swapped, the
//! toolsets are rebuilt when their sections changed (through the hook the gateway installs),
//! and the next registry snapshot carries a new [`LiveConfig::generation`], so every session
//! sends `list_changed`. An invalid file changes nothing: the last good config stays, and the
//! problem is logged once and shown by `aai-gateway status` and the dashboard until the file is
//! fixed. (Only the very first reading, with no good config yet, falls back to the fail-closed
//! defaults, as [`Config::load`] always did.)

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use serde_json::Value;

use crate::config::policy::PolicyConfig;
use crate::config::{CONFIG_FILE, Config};

/// Sections whose change rebuilds the built-in toolsets (their sessions — terminals, the
/// browser — end, and start again with the new settings on the next call).
const TOOLSET_SECTIONS: &[&str] = &["local", "desktop", "browser"];

/// Settings read once at start: a change is logged as waiting for a restart.
const RESTART_SECTIONS: &[&str] = &[
    "web",
    "executors",
    "platforms",
    "max_request_bytes",
    "paths",
];

/// What a reload found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// A new config is in force.
    pub changed: bool,
    /// Its toolset sections differ from the last config's.
    pub toolsets: bool,
}

type Hook = Box<dyn Fn(&Arc<Config>, &Reloaded) + Send + Sync>;

/// The config in force and the state of `config.json`.
pub struct LiveConfig {
    file: Option<PathBuf>,
    current: RwLock<Arc<Config>>,
    /// The policy in force: the config's, or what the dashboard set since.
    policy: RwLock<Arc<PolicyConfig>>,
    reading: Mutex<Reading>,
    generation: AtomicU64,
    on_change: OnceLock<Hook>,
}

#[derive(Default)]
struct Reading {
    /// The bytes last read (a file read again unchanged is not parsed again).
    bytes: Option<Vec<u8>>,
    /// The last good file as JSON, to see which sections changed.
    good: Value,
    /// Why the file on disk is not the config in force.
    problem: Option<String>,
}

impl LiveConfig {
    /// A config that never changes (the command line's one-shot gateways, tests).
    pub fn fixed(config: Config) -> Self {
        Self::new(None, config, Reading::default())
    }

    /// Reads `config.json` under `home` (see [`Config::load`]) and reloads it from there.
    pub fn load(home: &Path) -> Self {
        let file = home.join(CONFIG_FILE);
        let bytes = read(&file);
        let (config, problem) = Config::load(home);
        if let Some(problem) = &problem {
            tracing::warn!("{problem}");
        }
        let good = if problem.is_none() {
            json_of(&bytes)
        } else {
            Value::Null
        };
        Self::new(
            Some(file),
            config.clone(),
            Reading {
                bytes: Some(bytes),
                good,
                problem: config.invalid.clone(),
            },
        )
    }

    fn new(file: Option<PathBuf>, config: Config, reading: Reading) -> Self {
        Self {
            file,
            policy: RwLock::new(Arc::new(config.policy.clone())),
            current: RwLock::new(Arc::new(config)),
            reading: Mutex::new(reading),
            generation: AtomicU64::new(0),
            on_change: OnceLock::new(),
        }
    }

    /// The config in force.
    pub fn get(&self) -> Arc<Config> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<PolicyConfig> {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts `policy` in force (the dashboard, which also wrote it to the file).
    pub fn set_policy(&self, policy: PolicyConfig) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    /// Why `config.json` is not in force, when it is not.
    pub fn problem(&self) -> Option<String> {
        self.lock().problem.clone()
    }

    /// Raised each time a new config takes effect.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Runs `hook` after each new config took effect, before clients hear of it (once: the
    /// gateway installs it).
    pub fn on_change(&self, hook: Hook) {
        let _ = self.on_change.set(hook);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reading> {
        self.reading.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads `config.json` again; a valid file that differs from the last takes effect.
    pub fn reload(&self) -> Reloaded {
        let Some(file) = &self.file else {
            return Reloaded::default();
        };
        let bytes = read(file);
        let mut reading = self.lock();
        if reading.bytes.as_deref() == Some(bytes.as_slice()) {
            return Reloaded::default();
        }
        reading.bytes = Some(bytes.clone());
        let parsed = if bytes.is_empty() && !file.exists() {
            Ok(Config::default())
        } else {
            Config::parse(file, &bytes)
        };
        let config = match parsed {
            Ok(config) => config,
            Err(problem) => {
                tracing::warn!(
                    "config.json is invalid: {problem}; the last good config stays in force until it is fixed (`aai-gateway config check`)"
                );
                reading.problem = Some(problem.to_string());
                return Reloaded::default();
            }
        };
        let value = json_of(&bytes);
        let differs = |key: &str| value.get(key) != reading.good.get(key);
        let reloaded = Reloaded {
            changed: true,
            toolsets: TOOLSET_SECTIONS.iter().any(|key| differs(key))
                || value.pointer("/web/extra_ca_certs")
                    != reading.good.pointer("/web/extra_ca_certs"),
        };
        let later: Vec<&str> = RESTART_SECTIONS
            .iter()
            .copied()
            .filter(|key| differs(key))
            .collect();
        reading.good = value;
        reading.problem = None;
        drop(reading);
        let config = Arc::new(config);
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) =
            Arc::new(config.policy.clone());
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = config.clone();
        if let Some(hook) = self.on_change.get() {
            hook(&config, &reloaded);
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
        tracing::info!(
            toolsets = reloaded.toolsets,
            "config.json changed: the new config is in force"
        );
        if !later.is_empty() {
            tracing::warn!(
                "config.json changed {}, which the gateway reads when it starts: restart it for that",
                later.join(", ")
            );
        }
        reloaded
    }
}

fn read(file: &Path) -> Vec<u8> {
    std::fs::read(file).unwrap_or_default()
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_change_takes_effect_and_an_invalid_one_keeps_the_last_good() {
        let home = tempfile::tempdir().expect("home");
        let file = home.path().join(CONFIG_FILE);
        std::fs::write(&file, r#"{"exposure": "compact"}"#).expect("write");
        let live = LiveConfig::load(home.path());
        assert_eq!(live.get().exposure, crate::config::Exposure::Compact);
        assert_eq!(live.reload(), Reloaded::default(), "unchanged");
        std::fs::write(
            &file,
            r#"{"exposure": "full", "browser": {"headless": true}}"#,
        )
        .expect("write");
        assert_eq!(
            live.reload(),
            Reloaded {
                changed: true,
                toolsets: true
            }
        );
        assert_eq!(live.get().exposure, crate::config::Exposure::Full);
        assert_eq!(live.generation(), 1);
        std::fs::write(&file, r#"{"exposure": "compact", "nonsense": 1}"#).expect("write");
        assert!(!live.reload().changed);
        assert_eq!(live.get().exposure, crate::config::Exposure::Full);
        assert!(live.problem().is_some_and(|p| p.contains("nonsense")));
        assert_eq!(live.generation(), 1);
        std::fs::write(
            &file,
            r#"{"exposure": "compact", "browser": {"headless": true}}"#,
        )
        .expect("write");
        assert_eq!(
            live.reload(),
            Reloaded {
                changed: true,
                toolsets: false
            }
        );
        assert!(live.problem().is_none());
        assert_eq!(live.get().exposure, crate::config::Exposure::Compact);
    }
}
