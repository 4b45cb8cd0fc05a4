//! Credentials in the variables of imported servers: which values are secrets, and moving them
//! to the credential store (bound to the server's appId and the variable's name), so that the
//! descriptor, which the agent's shell can read, names the variable and never holds its value
//! (`platforms.mcp.env_from_store`). Descriptors an earlier import wrote with the values inline
//! are moved the same way, once at start and at every `import`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aai_engine::web::credentials::Store;
use anyhow::Context as _;
use serde_json::{Value, json};

/// Parts of a variable's name that say it holds a credential (anywhere in the name).
const SECRET_NAMES: &[&str] = &[
    "TOKEN",
    "SECRET",
    "KEY",
    "PASSWORD",
    "PASSWD",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// Words of a variable's name that say it holds a credential when they stand alone: `PAT`
/// (a personal access token) is also the start of `PATH`.
const SECRET_WORDS: &[&str] = &["PAT"];

/// How the credentials of well-known services begin.
const SECRET_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "AKIA",
    "ASIA",
    "glpat-",
    "npm_",
    "hf_",
    "pypi-",
    "AIza",
    // A JSON Web Token: `{"` in base64url.
    "eyJ",
];

/// Whether the variable `name` holds a credential: the user named it (`--secret`), its name
/// says so, or its value looks like one. A value that only refers to the gateway's own
/// variables (`${NAME}`) holds nothing secret itself, and an empty one nothing at all.
pub fn is_credential(name: &str, value: &str, named: &[String]) -> bool {
    if value.is_empty() || value.contains("${") {
        return false;
    }
    named.iter().any(|n| n == name) || name_says_secret(name) || value_looks_secret(value)
}

fn name_says_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.iter().any(|part| upper.contains(part))
        || words(name)
            .iter()
            .any(|w| SECRET_WORDS.contains(&w.to_ascii_uppercase().as_str()))
}

/// The words of a name: split at anything but a letter or digit, and before an upper-case
/// letter that follows a lower-case one (`githubPat` → `github`, `Pat`).
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut last_lower = false;
    for c in name.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && last_lower);
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c);
        }
        last_lower = c.is_ascii_lowercase();
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn value_looks_secret(value: &str) -> bool {
    if value.chars().any(char::is_whitespace) {
        return false;
    }
    let known = SECRET_PREFIXES
        .iter()
        .any(|prefix| value.starts_with(prefix) && value.len() >= prefix.len() + 8);
    known || random_looking(value)
}

/// A long string of token characters, letters and digits mixed, as random as a key: not a
/// path, a URL, a host name or a sentence.
fn random_looking(value: &str) -> bool {
    let token_chars = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-+=".contains(c));
    let letters = value.chars().any(|c| c.is_ascii_alphabetic());
    let digits = value.chars().any(|c| c.is_ascii_digit());
    value.len() >= 24 && token_chars && letters && digits && entropy(value) >= 3.0
}

/// Shannon entropy of `text`'s characters, in bits per character.
fn entropy(text: &str) -> f64 {
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    for c in text.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let total = text.chars().count() as f64;
    counts
        .values()
        .map(|&n| {
            let p = n as f64 / total;
            -p * p.log2()
        })
        .sum()
}

/// The variables of `env` that hold credentials ([`is_credential`]): they go to the store.
pub fn credentials(env: &BTreeMap<String, String>, named: &[String]) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(name, value)| is_credential(name, value, named))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Makes the variables of `app_id`'s server in the store exactly `env` (a descriptor written
/// anew names these and no others); its web key and OAuth tokens are kept.
pub fn replace(home: &Path, app_id: &str, env: BTreeMap<String, String>) -> anyhow::Result<()> {
    let store = Store::new(home);
    let mut stored = store
        .get(app_id)
        .with_context(|| format!("{app_id}: the credential store"))?;
    if stored.env == env {
        return Ok(());
    }
    stored.env = env;
    store
        .put(app_id, &stored)
        .with_context(|| format!("{app_id}: the credential store"))
}

/// One descriptor whose credentials were moved to the store, or could not be.
pub struct Moved {
    pub app_id: String,
    pub vars: Vec<String>,
    pub problem: Option<String>,
}

impl Moved {
    /// The line for the user: the app and the variables, never their values.
    pub fn note(&self) -> String {
        match &self.problem {
            None => format!(
                "aai-gateway: {}: moved {} from its aai.json to the credential store",
                self.app_id,
                self.vars.join(", ")
            ),
            Some(problem) => format!(
                "aai-gateway: {}: {} stay in its aai.json: {problem}",
                self.app_id,
                self.vars.join(", ")
            ),
        }
    }
}

/// Moves the credentials (by [`is_credential`], and the variables `named`) that an earlier
/// import wrote into `home/mcp.*/aai.json` to the store: each file is rewritten through a
/// temporary file renamed over it, with its mode kept. A file that is a link is left alone.
pub fn migrate(home: &Path, named: &[String]) -> Vec<Moved> {
    let mut done = Vec::new();
    let mut folders: Vec<PathBuf> = std::fs::read_dir(home)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("mcp."))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    folders.sort();
    for folder in folders {
        let path = folder.join("aai.json");
        let Some((app_id, mut doc, moved)) = inline_credentials(&path, named) else {
            continue;
        };
        let vars: Vec<String> = moved.keys().cloned().collect();
        let problem = move_out(home, &path, &app_id, &mut doc, moved)
            .err()
            .map(|e| format!("{e:#}"));
        done.push(Moved {
            app_id,
            vars,
            problem,
        });
    }
    done
}

/// The appId, document and credentials of an imported descriptor at `path` that holds any
/// in its server's `env`.
fn inline_credentials(
    path: &Path,
    named: &[String],
) -> Option<(String, Value, BTreeMap<String, String>)> {
    // Only a file of the gateway's own: a link may point at the user's dotfiles.
    if !std::fs::symlink_metadata(path).ok()?.file_type().is_file() {
        return None;
    }
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let app_id = doc.get("appId")?.as_str()?.to_owned();
    let env = doc.pointer("/platforms/mcp/env")?.as_object()?;
    let moved: BTreeMap<String, String> = env
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .filter(|(k, v)| is_credential(k, v, named))
        .collect();
    (!moved.is_empty() && aai_descriptor::is_valid_app_id(&app_id)).then_some((app_id, doc, moved))
}

/// Puts `moved` in the store for `app_id`, then rewrites `doc` at `path` naming them in
/// `env_from_store` instead: the store first, so a value is never in neither place.
fn move_out(
    home: &Path,
    path: &Path,
    app_id: &str,
    doc: &mut Value,
    moved: BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let names: Vec<String> = moved.keys().cloned().collect();
    let store = Store::new(home);
    let mut stored = store.get(app_id)?;
    stored.env.extend(moved);
    store.put(app_id, &stored)?;
    let Some(mcp) = doc
        .pointer_mut("/platforms/mcp")
        .and_then(Value::as_object_mut)
    else {
        anyhow::bail!("it has no `platforms.mcp` section");
    };
    if let Some(env) = mcp.get_mut("env").and_then(Value::as_object_mut) {
        env.retain(|k, _| !names.contains(k));
        if env.is_empty() {
            mcp.remove("env");
        }
    }
    let mut from_store: Vec<String> = mcp
        .get("env_from_store")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for name in names {
        if !from_store.contains(&name) {
            from_store.push(name);
        }
    }
    mcp.insert("env_from_store".into(), json!(from_store));
    replace_file(path, &(serde_json::to_string_pretty(doc)? + "\n"))
}

/// Writes `text` over `path` through a temporary file beside it, renamed into place, with the
/// mode `path` had.
fn replace_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let permissions = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .permissions();
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    temp.as_file().set_permissions(permissions)?;
    std::io::Write::write_all(&mut temp, text.as_bytes())?;
    temp.as_file().sync_all()?;
    temp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

/// [`migrate`] once per home, at start, by the user's own processes (a contained one cannot
/// read the control credential, nor write the store): afterwards a mark says it was done.
/// `import` moves what it finds every time it runs.
pub fn migrate_once(home: &Path) {
    let mark = home.join("mcp").join("env-moved");
    if mark.exists() || std::fs::read(aai_engine::control::credential_path(home)).is_err() {
        return;
    }
    let moved = migrate(home, &[]);
    for one in &moved {
        eprintln!("{}", one.note());
    }
    if moved.iter().all(|m| m.problem.is_none()) {
        let written = aai_engine::private::create_dir(&home.join("mcp")).and_then(|()| {
            aai_engine::private::write_private(
                &mark,
                b"credentials of imported MCP servers live in the credential store\n",
            )
        });
        if let Err(error) = written {
            tracing::debug!(file = %mark.display(), %error, "the move of imported credentials is tried again next time");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_told_by_name_value_or_the_users_word() {
        let none: &[String] = &[];
        for (name, value) in [
            ("GITHUB_PERSONAL_ACCESS_TOKEN", "x"),
            ("OPENAI_API_KEY", "abc"),
            ("apiKey", "abc"),
            ("DB_PASSWORD", "hunter2"),
            ("GITLAB_PAT", "abc"),
            ("githubPat", "abc"),
            ("SESSION_COOKIE", "abc"),
            ("ANYTHING", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            ("ANYTHING", "xoxb-1234-5678-abcdefgh"),
            ("ANYTHING", "AKIAIOSFODNN7EXAMPLE"),
            ("ANYTHING", "sk-proj-abcdefgh12345678"),
            ("ANYTHING", "f3a9c1e07b6d4e2a9c8b7d6e5f4a3b2c"),
        ] {
            assert!(is_credential(name, value, none), "{name}={value}");
        }
        for (name, value) in [
            ("DEBUG", "1"),
            ("MEMORY_FILE_PATH", "/home/u/memory.jsonl"),
            ("PATH", "/usr/bin:/bin"),
            ("TZ", "Europe/Paris"),
            ("LOG_LEVEL", "debug"),
            ("GITHUB_TOKEN", "${GITHUB_TOKEN}"),
            ("API_KEY", ""),
            ("URL", "https://api.example.com/v1/abcdef0123456789abcdef"),
            ("GREETING", "hello there general kenobi 12345"),
            ("SERVICE", "org.freedesktop.portal.Desktop1"),
            ("ANYTHING", "sk-1"),
        ] {
            assert!(!is_credential(name, value, none), "{name}={value}");
        }
        assert!(is_credential("MY_VAR", "plain", &["MY_VAR".to_owned()]));
        assert!(!is_credential("MY_VAR", "plain", &["OTHER".to_owned()]));
    }

    // Where the store is the OS keychain, a test would write the user's own.
    #[cfg(not(any(target_os = "macos", windows)))]
    #[test]
    fn an_inline_credential_is_moved_and_the_file_keeps_its_mode() {
        let home = tempfile::tempdir().expect("dir");
        let folder = home.path().join("mcp.github");
        std::fs::create_dir_all(&folder).expect("mkdir");
        let path = folder.join("aai.json");
        let doc = json!({"schema_version": "1.0", "appId": "mcp.github", "name": "github",
            "description": "d", "platforms": {"mcp": {"automation": "stdio", "command": "npx",
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_inline0123456789abcdef", "DEBUG": "1"}}}});
        std::fs::write(&path, doc.to_string()).expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        }
        let moved = migrate(home.path(), &[]);
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].vars, ["GITHUB_PERSONAL_ACCESS_TOKEN"]);
        assert!(moved[0].problem.is_none(), "{}", moved[0].note());
        assert!(!moved[0].note().contains("ghp_"));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains("ghp_inline"), "{text}");
        let after: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(after["platforms"]["mcp"]["env"], json!({"DEBUG": "1"}));
        assert_eq!(
            after["platforms"]["mcp"]["env_from_store"],
            json!(["GITHUB_PERSONAL_ACCESS_TOKEN"])
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o640);
        }
        let stored = Store::new(home.path()).get("mcp.github").expect("store");
        assert_eq!(
            stored.env["GITHUB_PERSONAL_ACCESS_TOKEN"],
            "ghp_inline0123456789abcdef"
        );
        // Done once: nothing is left to move.
        assert!(migrate(home.path(), &[]).is_empty());
    }
}
