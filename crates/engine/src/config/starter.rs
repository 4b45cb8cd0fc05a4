//! The starter `config.json` of a fresh home (`aai-gateway init`, and the first `serve`):
//! the folder agents may work in, and a `$comment` note on each section saying what it does
//! and where the rest is. JSON has no comments; the loader ignores `$comment` keys at any
//! level (see [`super::hints`]), so the notes live in the file people edit.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::private::FileError;

/// Where agents work when nobody says otherwise (the first of the default allowed folders).
pub const DEFAULT_FOLDER: &str = "~/Projects";

/// The starter config naming `folder` (as the user wrote it: `~` stays `~`).
pub fn text(folder: &str) -> String {
    let config = json!({
        "$comment": "aai-gateway's config. Every key is optional and has a default: `aai-gateway config schema` lists them all, `aai-gateway config check` checks this file. Keys named $comment are notes; the gateway ignores them.",
        "local": {
            "$comment": "The built-in toolsets (files, terminal, system, screen, input, apps, browser); turn one off with e.g. \"terminal\": false. Files and the terminal work only inside allowed_directories, and the terminal starts in the first one. Commands run contained: they write only in these folders and the temporary folder.",
            "sandbox": {
                "allowed_directories": [folder]
            }
        },
        "policy": {
            "$comment": "Which calls run without asking. Without a profile the development profile applies: low- and medium-risk calls run (terminal commands that stay in the sandbox are medium), high-risk ones and deleting work ask you (in the client, a dialog, or the daemon's approval queue), critical ones are blocked. See docs/manual/approval.md."
        },
        "web": {
            "$comment": "Web apps. Set allow_http_loopback to true to call a web app served on http://127.0.0.1 or localhost (local development); https is required everywhere else. Keys for web apps come from the environment variable their descriptor names, or `aai-gateway auth set APP`.",
            "allow_http_loopback": false
        },
        "exposure": "full"
    });
    let mut text = serde_json::to_string_pretty(&config).unwrap_or_default();
    text.push('\n');
    text
}

/// What [`ensure`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starter {
    pub config: PathBuf,
    /// False: a config.json was there already and was left as it is.
    pub written: bool,
    /// The allowed folder named, expanded.
    pub folder: PathBuf,
    /// False: it existed already.
    pub made_folder: bool,
}

/// Writes the starter config into `home` unless a `config.json` is there (it is never
/// replaced), and makes the folder it names.
///
/// # Errors
/// The home, the file or the folder cannot be made.
pub fn ensure(home: &Path, folder: &str) -> Result<Starter, FileError> {
    let config = home.join(super::CONFIG_FILE);
    std::fs::create_dir_all(home).map_err(FileError::at("make", home))?;
    let written = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&config)
    {
        Ok(mut file) => {
            use std::io::Write;
            file.write_all(text(folder).as_bytes())
                .map_err(FileError::at("write", &config))?;
            true
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(error) => return Err(FileError::at("write", &config)(error)),
    };
    // An existing config names its own folder: that one is made, not the one asked for.
    let named = if written {
        folder.to_owned()
    } else {
        let (existing, _) = super::Config::load(home);
        existing
            .local
            .sandbox
            .allowed_directories
            .first()
            .map_or_else(|| folder.to_owned(), |d| d.display().to_string())
    };
    let expanded = super::expand_home(Path::new(&named));
    let made_folder = !expanded.is_dir();
    if made_folder {
        std::fs::create_dir_all(&expanded).map_err(FileError::at("make", &expanded))?;
    }
    Ok(Starter {
        config,
        written,
        folder: expanded,
        made_folder,
    })
}

/// The line to add to each MCP client that starts `binary` (with `AAI_HOME` when the home is
/// not the default one): `(client, where it goes, line)`.
pub fn client_lines(
    binary: &Path,
    home: Option<&Path>,
) -> Vec<(&'static str, &'static str, String)> {
    let bin = binary.display().to_string();
    let quoted = shell_word(&bin);
    let entry = match home {
        Some(home) => json!({"command": bin, "env": {"AAI_HOME": home.display().to_string()}}),
        None => json!({"command": bin}),
    };
    let entry = format!("\"aai-gateway\": {entry}");
    let (claude_env, codex_env) = match home {
        Some(home) => {
            let value = shell_word(&format!("AAI_HOME={}", home.display()));
            (format!(" -e {value}"), format!(" --env {value}"))
        }
        None => (String::new(), String::new()),
    };
    vec![
        (
            "Claude Code",
            "run",
            format!("claude mcp add aai-gateway{claude_env} -- {quoted}"),
        ),
        (
            "Codex",
            "run",
            format!("codex mcp add aai-gateway{codex_env} -- {quoted}"),
        ),
        (
            "Claude Desktop",
            "add to \"mcpServers\" in claude_desktop_config.json",
            entry.clone(),
        ),
        (
            "Cursor",
            "add to \"mcpServers\" in ~/.cursor/mcp.json",
            entry,
        ),
    ]
}

/// `word` quoted for a POSIX shell when it needs to be.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:+@,".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_is_a_config_the_gateway_and_its_schema_accept() {
        let text = text("~/Work here");
        let path = Path::new("config.json");
        assert_eq!(
            super::super::Config::check(path, text.as_bytes()),
            Vec::<String>::new()
        );
        let config = super::super::Config::parse(path, text.as_bytes()).expect("parses");
        assert_eq!(
            config.local.sandbox.allowed_directories,
            [PathBuf::from("~/Work here")]
        );
        assert!(text.contains("\"$comment\""));
    }

    #[test]
    fn client_lines_quote_paths_and_carry_the_home() {
        let lines = client_lines(
            Path::new("/opt/my tools/aai-gateway"),
            Some(Path::new("/h")),
        );
        assert_eq!(
            lines[0].2,
            "claude mcp add aai-gateway -e AAI_HOME=/h -- '/opt/my tools/aai-gateway'"
        );
        assert_eq!(
            lines[2].2,
            r#""aai-gateway": {"command":"/opt/my tools/aai-gateway","env":{"AAI_HOME":"/h"}}"#
        );
        let plain = client_lines(Path::new("/usr/bin/aai-gateway"), None);
        assert_eq!(
            plain[1].2,
            "codex mcp add aai-gateway -- /usr/bin/aai-gateway"
        );
    }
}
