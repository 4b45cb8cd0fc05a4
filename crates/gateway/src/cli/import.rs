//! `aai-gateway import`: the MCP servers the user's clients already start (Claude Desktop,
//! Claude Code, Cursor, VS Code, Windsurf, Codex), each written as a descriptor in the
//! gateway's home, so they run behind its gate. With `--rewrite`, each client's config then
//! starts only the gateway (a backup is kept, and the way back printed). A server's
//! credentials go to the gateway's credential store, never into its descriptor ([`secrets`]).

pub(super) mod secrets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::output;

/// One server entry of a client's config.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub client: &'static str,
    pub file: PathBuf,
    pub name: String,
    pub entry: Entry,
}

/// How a client starts or reaches a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        /// The bearer token the client sends (`Authorization: Bearer …`), if it names one.
        token: Option<String>,
    },
}

/// The shape of a client's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `{"mcpServers": {name: {command, args, env} | {url | serverUrl, headers}}}`.
    McpServers,
    /// Claude Code's `~/.claude.json`: `mcpServers` at the top and under each project.
    ClaudeCode,
    /// VS Code's `{"servers": {name: {type, command, args, env} | {type, url, headers}}}`.
    VsCode,
    /// Codex's `config.toml`: `[mcp_servers.<name>]` tables.
    CodexToml,
}

/// Where each client keeps its servers under `home` (the user's home), and with `project`
/// a project's own files (`.mcp.json`, `.cursor/mcp.json`, `.vscode/mcp.json`): those are
/// read only when asked, since anyone who can write in the project (a cloned repository, the
/// agent's file tools) writes them.
fn places(home: &Path, project: Option<&Path>) -> Vec<(&'static str, PathBuf, Format)> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".config"));
    let mac = home.join("Library").join("Application Support");
    let appdata = std::env::var_os("APPDATA").map(PathBuf::from);
    let codex = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"));
    let mut places = vec![
        (
            "claude-desktop",
            config.join("Claude/claude_desktop_config.json"),
            Format::McpServers,
        ),
        (
            "claude-desktop",
            mac.join("Claude/claude_desktop_config.json"),
            Format::McpServers,
        ),
        ("claude-code", home.join(".claude.json"), Format::ClaudeCode),
        ("cursor", home.join(".cursor/mcp.json"), Format::McpServers),
        ("vscode", config.join("Code/User/mcp.json"), Format::VsCode),
        ("vscode", mac.join("Code/User/mcp.json"), Format::VsCode),
        (
            "windsurf",
            home.join(".codeium/windsurf/mcp_config.json"),
            Format::McpServers,
        ),
        ("codex", codex.join("config.toml"), Format::CodexToml),
    ];
    if let Some(cwd) = project {
        places.push(("claude-code", cwd.join(".mcp.json"), Format::McpServers));
        places.push(("cursor", cwd.join(".cursor/mcp.json"), Format::McpServers));
        places.push(("vscode", cwd.join(".vscode/mcp.json"), Format::VsCode));
    }
    if let Some(appdata) = appdata {
        places.push((
            "claude-desktop",
            appdata.join("Claude/claude_desktop_config.json"),
            Format::McpServers,
        ));
        places.push(("vscode", appdata.join("Code/User/mcp.json"), Format::VsCode));
    }
    places
}

/// Every server entry in the clients' files that exist.
pub fn find(home: &Path, project: Option<&Path>) -> (Vec<Found>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let mut seen_files = Vec::new();
    for (client, file, format) in places(home, project) {
        if !file.is_file() || seen_files.contains(&file) {
            continue;
        }
        seen_files.push(file.clone());
        match read(client, &file, format) {
            Ok(entries) => found.extend(entries),
            Err(problem) => problems.push(format!("{}: {problem}", file.display())),
        }
    }
    (found, problems)
}

fn read(client: &'static str, file: &Path, format: Format) -> Result<Vec<Found>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read it ({e})"))?;
    let servers: Vec<(String, Value)> = match format {
        Format::CodexToml => {
            let table: toml::Table =
                toml::from_str(&text).map_err(|e| format!("not TOML ({e})"))?;
            let servers = table
                .get("mcp_servers")
                .and_then(|v| serde_json::to_value(v).ok())
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            servers.into_iter().collect()
        }
        _ => {
            let doc: Value = serde_json::from_str(&strip_comments(&text))
                .map_err(|e| format!("not JSON ({e})"))?;
            let key = if format == Format::VsCode {
                "servers"
            } else {
                "mcpServers"
            };
            let mut servers: Vec<(String, Value)> = doc
                .get(key)
                .and_then(Value::as_object)
                .map(|m| m.clone().into_iter().collect())
                .unwrap_or_default();
            if format == Format::ClaudeCode
                && let Some(projects) = doc.get("projects").and_then(Value::as_object)
            {
                for (folder, project) in projects {
                    if let Some(more) = project.get("mcpServers").and_then(Value::as_object) {
                        // A project's server runs in its project, as Claude Code runs it.
                        servers.extend(more.iter().map(|(name, entry)| {
                            let mut entry = entry.clone();
                            if entry.get("cwd").is_none()
                                && let Some(object) = entry.as_object_mut()
                            {
                                object.insert("cwd".into(), Value::String(folder.clone()));
                            }
                            (name.clone(), entry)
                        }));
                    }
                }
            }
            servers
        }
    };
    Ok(servers
        .into_iter()
        .filter_map(|(name, value)| {
            Some(Found {
                client,
                file: file.to_path_buf(),
                entry: entry(&value)?,
                name,
            })
        })
        .collect())
}

/// VS Code's files allow `//` and `/* */` comments; JSON does not.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for next in chars.by_ref() {
                    if last == '*' && next == '/' {
                        break;
                    }
                    last = next;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// A server entry in any client's shape (VS Code's `${env:VAR}` becomes our `${VAR}`).
fn entry(value: &Value) -> Option<Entry> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let strings = |key: &str| -> Vec<String> {
        value
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(vscode_vars))
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(url) = text("url")
        .or_else(|| text("serverUrl"))
        .or_else(|| text("httpUrl"))
    {
        let header = value
            .get("headers")
            .and_then(Value::as_object)
            .and_then(|h| {
                h.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                    .and_then(|(_, v)| v.as_str())
            })
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(vscode_vars);
        return Some(Entry::Http { url, token: header });
    }
    let command = text("command")?;
    let env = value
        .get("env")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), vscode_vars(v.as_str()?))))
                .collect()
        })
        .unwrap_or_default();
    Some(Entry::Stdio {
        command,
        args: strings("args"),
        env,
        cwd: text("cwd"),
    })
}

fn vscode_vars(text: &str) -> String {
    text.replace("${env:", "${")
}

/// Whether an entry starts this gateway (importing it would make a loop).
fn is_gateway(entry: &Entry) -> bool {
    matches!(entry, Entry::Stdio { command, .. }
        if Path::new(command).file_stem().is_some_and(|s| s == "aai-gateway"))
}

/// An appId for a server named `name`: `mcp.<name>` in the characters an appId allows.
pub fn app_id(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-');
    format!("mcp.{}", if slug.is_empty() { "server" } else { slug })
}

/// The descriptor of one server; the variables of its `env` named in `from_store` are
/// named in `env_from_store` instead, without their values.
pub fn descriptor(found: &Found, app: &str, from_store: &[String]) -> Value {
    let section = match &found.entry {
        Entry::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut s = json!({"automation": "stdio", "command": command});
            if !args.is_empty() {
                s["args"] = json!(args);
            }
            let kept: BTreeMap<&String, &String> = env
                .iter()
                .filter(|(name, _)| !from_store.contains(name))
                .collect();
            if !kept.is_empty() {
                s["env"] = json!(kept);
            }
            if !from_store.is_empty() {
                s["env_from_store"] = json!(from_store);
            }
            if let Some(cwd) = cwd {
                s["cwd"] = json!(cwd);
            }
            s
        }
        Entry::Http { url, token } => {
            let mut s = json!({"automation": "http", "url": url});
            if token.is_some() {
                s["auth"] = json!({"type": "bearer", "env_var": token_var(app)});
            }
            s
        }
    };
    json!({
        "schema_version": "1.0",
        "appId": app,
        "name": found.name,
        "description": format!("The MCP server \"{}\" (imported from {}).", found.name, found.client),
        "platforms": {"mcp": section},
    })
}

/// What an entry runs or reaches, for the user to read before trusting it.
fn runs(entry: &Entry) -> String {
    match entry {
        Entry::Stdio {
            command, args, cwd, ..
        } => {
            let line = std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            match cwd {
                Some(cwd) => format!("{line} (in {cwd})"),
                None => line,
            }
        }
        Entry::Http { url, .. } => url.clone(),
    }
}

/// The variable that holds an imported http server's bearer token.
fn token_var(app: &str) -> String {
    format!(
        "AAI_TOKEN_{}",
        app.trim_start_matches("mcp.")
            .to_ascii_uppercase()
            .replace(['-', '.'], "_")
    )
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Also rewrite each client's config to start only aai-gateway (a backup is kept beside
    /// it, and the command that undoes it printed).
    #[arg(long)]
    pub rewrite: bool,
    /// Show what would be imported, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Replace descriptors an earlier import wrote.
    #[arg(long)]
    pub force: bool,
    /// Also read this folder's project files (`.mcp.json`, `.cursor/mcp.json`,
    /// `.vscode/mcp.json`); look at the commands it prints before you use them.
    #[arg(long)]
    pub project: bool,
    /// Also keep this variable of a server's `env` in the credential store (credentials —
    /// by their name or their value — always are); repeatable.
    #[arg(long = "secret", value_name = "VAR")]
    pub secrets: Vec<String>,
}

pub fn run(aai_home: &Path, args: &Args) -> anyhow::Result<ExitCode> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("HOME is not set"))?;
    let cwd = std::env::current_dir()?;
    let (found, problems) = find(&home, args.project.then_some(cwd.as_path()));
    for problem in &problems {
        eprintln!("aai-gateway: skipped {problem}");
    }
    // Descriptors an earlier import wrote with credentials inline.
    if !args.dry_run {
        for moved in secrets::migrate(aai_home, &args.secrets) {
            eprintln!("{}", moved.note());
        }
    }
    // One descriptor per server name; a second entry of another shape gets its own id.
    let mut chosen: BTreeMap<String, &Found> = BTreeMap::new();
    let mut rows = Vec::new();
    for item in &found {
        if is_gateway(&item.entry) {
            rows.push(json!({"client": item.client, "file": item.file, "server": item.name, "result": "skipped: it is aai-gateway"}));
            continue;
        }
        let base = app_id(&item.name);
        let mut app = base.clone();
        let mut n = 2;
        let same = loop {
            match chosen.get(&app) {
                Some(other) if other.entry == item.entry => break true,
                Some(_) => {
                    app = format!("{base}-{n}");
                    n += 1;
                }
                None => break false,
            }
        };
        if same {
            rows.push(json!({"client": item.client, "file": item.file, "server": item.name, "app": app, "result": "same as above"}));
            continue;
        }
        chosen.insert(app.clone(), item);
        let path = aai_home.join(&app).join("aai.json");
        let stored = match &item.entry {
            Entry::Stdio { env, .. } => secrets::credentials(env, &args.secrets),
            Entry::Http { .. } => BTreeMap::new(),
        };
        let mut from_store: Vec<String> = stored.keys().cloned().collect();
        let doc = descriptor(item, &app, &from_store);
        let same_as_written = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|written| written == doc);
        let result = if args.dry_run {
            "would write".to_owned()
        } else if same_as_written {
            // An earlier import wrote exactly this: it runs behind the gateway already.
            "imported already".to_owned()
        } else if path.exists() && !args.force {
            from_store.clear();
            "kept: a descriptor is there (--force replaces it)".to_owned()
        } else {
            // The store first: a descriptor never names a variable the store lacks.
            secrets::replace(aai_home, &app, stored)?;
            write_descriptor(&path, &doc)?;
            "written".to_owned()
        };
        let mut row = json!({"client": item.client, "file": item.file, "server": item.name, "app": app,
            "runs": runs(&item.entry), "descriptor": path, "result": result,
            "env_from_store": from_store});
        if let Entry::Http { token: Some(_), .. } = &item.entry {
            row["note"] = json!(format!(
                "its bearer token is not copied: set {} in the gateway's environment",
                token_var(&app)
            ));
        }
        if !from_store.is_empty() {
            row["note"] = json!(format!(
                "{} {} in the credential store, not in its descriptor",
                from_store.join(", "),
                if args.dry_run {
                    "would be kept"
                } else {
                    "kept"
                }
            ));
        }
        rows.push(row);
    }
    let mut undo = Vec::new();
    if args.rewrite && !args.dry_run {
        let exe = std::env::current_exe()?;
        let mut files: Vec<(&'static str, PathBuf)> =
            found.iter().map(|f| (f.client, f.file.clone())).collect();
        files.dedup();
        // A file one of whose servers was not imported (a descriptor was there already) keeps
        // its servers: rewritten, the client would lose that one.
        files.retain(|(_, file)| {
            rows.iter()
                .filter(|r| r["file"] == json!(file))
                .all(|r| !r["result"].as_str().unwrap_or_default().starts_with("kept"))
        });
        for (client, file) in files {
            // A file that starts only aai-gateway was rewritten before: backing it up again
            // would make the printed undo restore the rewritten file. Its undo is the first
            // backup, which holds the original.
            let rewritten = found
                .iter()
                .filter(|f| f.file == file)
                .all(|f| is_gateway(&f.entry));
            let backup = if rewritten {
                match first_backup(&file) {
                    Some(backup) => backup,
                    None => continue,
                }
            } else {
                rewrite(&file, client, &exe)?
            };
            undo.push(json!({"client": client, "file": file, "backup": backup,
                "already": rewritten,
                "undo": format!("mv {} {}", shell_word(&backup), shell_word(&file))}));
        }
    }
    if output::json() {
        output::value(&json!({"servers": rows, "rewritten": undo, "skipped": problems}));
    } else {
        if rows.is_empty() {
            output::line(
                "no MCP servers found in the configs of Claude Desktop, Claude Code, Cursor, VS Code, Windsurf or Codex",
            );
        }
        // Each server, then what it runs: read them before you trust them.
        for row in &rows {
            let app = row["app"]
                .as_str()
                .map(|a| format!(" → {a}"))
                .unwrap_or_default();
            output::line(&format!(
                "{} ({}): {}{app}  {}{}",
                row["server"].as_str().unwrap_or_default(),
                row["client"].as_str().unwrap_or_default(),
                row["file"].as_str().unwrap_or_default(),
                row["result"].as_str().unwrap_or_default(),
                row["note"]
                    .as_str()
                    .map(|n| format!("; {n}"))
                    .unwrap_or_default(),
            ));
            if let Some(runs) = row["runs"].as_str() {
                output::line(&format!(
                    "  runs: {}",
                    aai_descriptor::visible::visible(runs)
                ));
            }
        }
        for done in &undo {
            output::line(&format!(
                "{} {} to start aai-gateway only; to undo: {}",
                if done["already"] == true {
                    "already rewrote"
                } else {
                    "rewrote"
                },
                done["file"].as_str().unwrap_or_default(),
                done["undo"].as_str().unwrap_or_default()
            ));
        }
        if args.dry_run && !rows.is_empty() {
            output::line(
                "Nothing was written (--dry-run): run it without --dry-run to import them.",
            );
        } else if !rows.is_empty() && !args.rewrite {
            output::line(
                "Each server now runs behind the gateway (`aai-gateway --scan` lists them). `--rewrite` makes each client start only aai-gateway.",
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_descriptor(path: &Path, doc: &Value) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    aai_engine::private::create_dir(dir)?;
    let text = serde_json::to_string_pretty(doc)? + "\n";
    aai_engine::private::write_private(path, text.as_bytes())?;
    Ok(())
}

fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+~".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// Replaces the servers of `file` with one `aai-gateway` entry (`exe`), keeping everything
/// else; the original is kept as `<file>.aai-backup-<seconds>`, whose path is returned.
/// The oldest backup an earlier `--rewrite` left beside `file` (it holds the original).
fn first_backup(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    let prefix = format!("{}.aai-backup-", file.file_name()?.to_string_lossy());
    let mut backups: Vec<(u128, u32, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix(&prefix)?;
            let (stamp, n) = rest.split_once('-').unwrap_or((rest, "1"));
            Some((stamp.parse().ok()?, n.parse().ok()?, entry.path()))
        })
        .collect();
    backups.sort();
    backups.into_iter().next().map(|(_, _, path)| path)
}

fn rewrite(file: &Path, client: &str, exe: &Path) -> anyhow::Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // A name no backup has yet: two runs in one second keep both.
    let backup = (1u32..)
        .map(|n| {
            let mut name = file.as_os_str().to_owned();
            if n == 1 {
                name.push(format!(".aai-backup-{stamp}"));
            } else {
                name.push(format!(".aai-backup-{stamp}-{n}"));
            }
            PathBuf::from(name)
        })
        .find(|candidate| std::fs::symlink_metadata(candidate).is_err())
        .unwrap_or_else(|| file.with_extension("aai-backup"));
    if std::fs::symlink_metadata(file)?.file_type().is_symlink() {
        anyhow::bail!(
            "{} is a link; rewrite the file it points to by hand",
            file.display()
        );
    }
    let text = std::fs::read_to_string(file)?;
    let permissions = std::fs::metadata(file)?.permissions();
    // Never through a link someone left at the backup's name: a new file, or nothing.
    {
        use std::io::Write as _;
        let mut copy = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&backup)?;
        copy.write_all(text.as_bytes())?;
        copy.set_permissions(permissions.clone())?;
    }
    let exe = exe.display().to_string();
    let new = if file.extension().is_some_and(|e| e == "toml") {
        let mut table: toml::Table = toml::from_str(&text)?;
        let mut servers = toml::Table::new();
        let mut gateway = toml::Table::new();
        gateway.insert("command".into(), toml::Value::String(exe));
        servers.insert("aai-gateway".into(), toml::Value::Table(gateway));
        table.insert("mcp_servers".into(), toml::Value::Table(servers));
        toml::to_string(&table)?
    } else {
        let mut doc: Map<String, Value> = serde_json::from_str(&strip_comments(&text))?;
        let (key, entry) = if client == "vscode" {
            ("servers", json!({"type": "stdio", "command": exe}))
        } else {
            ("mcpServers", json!({"command": exe}))
        };
        doc.insert(key.into(), json!({"aai-gateway": entry}));
        if client == "claude-code"
            && let Some(projects) = doc.get_mut("projects").and_then(Value::as_object_mut)
        {
            for project in projects.values_mut() {
                if let Some(project) = project.as_object_mut()
                    && project.contains_key("mcpServers")
                {
                    project.insert("mcpServers".into(), json!({}));
                }
            }
        }
        serde_json::to_string_pretty(&doc)? + "\n"
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut temp, new.as_bytes())?;
    temp.as_file().set_permissions(permissions)?;
    temp.persist(file).map_err(|e| e.error)?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_stripped_outside_strings_only() {
        let text = "{\n // a note\n \"a\": \"http://x//y\", /* b */ \"c\": 1\n}";
        let doc: Value = serde_json::from_str(&strip_comments(text)).expect("json");
        assert_eq!(doc, json!({"a": "http://x//y", "c": 1}));
    }

    #[test]
    fn app_ids_are_valid() {
        for name in ["github", "My Server!", "", "fs.local"] {
            assert!(aai_descriptor::is_valid_app_id(&app_id(name)), "{name}");
        }
    }
}
