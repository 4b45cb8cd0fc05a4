//! `aai-gateway init`: a fresh home made ready — the starter config, the folder agents work
//! in, and the line each MCP client needs.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;

use aai_engine::config::starter;

use super::output;

/// The folder to name: `--folder`, else the answer at a terminal, else the default.
fn folder(given: Option<&str>) -> anyhow::Result<String> {
    if let Some(folder) = given {
        return Ok(folder.to_owned());
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(starter::DEFAULT_FOLDER.to_owned());
    }
    eprint!(
        "Which folder may agents work in (read and write files, run commands)? [{}] ",
        starter::DEFAULT_FOLDER
    );
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let answer = answer.trim();
    Ok(if answer.is_empty() {
        starter::DEFAULT_FOLDER.to_owned()
    } else {
        answer.to_owned()
    })
}

/// The home to name in client lines: only one that is not the default.
fn named_home(home: &std::path::Path) -> Option<std::path::PathBuf> {
    let default = aai_engine::config::user_home().join(".aai");
    (home != default).then(|| std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf()))
}

pub fn run(home: &std::path::Path, given: Option<&str>) -> anyhow::Result<ExitCode> {
    let config = home.join(aai_engine::config::CONFIG_FILE);
    // Nothing to ask when the config is there: its folder stands.
    let folder = if config.exists() {
        starter::DEFAULT_FOLDER.to_owned()
    } else {
        folder(given)?
    };
    let done = starter::ensure(home, &folder).map_err(anyhow::Error::msg)?;
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| "aai-gateway".into());
    let lines = starter::client_lines(&binary, named_home(home).as_deref());
    if output::json() {
        output::value(&serde_json::json!({
            "config": done.config,
            "written": done.written,
            "folder": done.folder,
            "made_folder": done.made_folder,
            "clients": lines.iter().map(|(client, place, line)| serde_json::json!({"client": client, "where": place, "line": line})).collect::<Vec<_>>(),
        }));
        return Ok(ExitCode::SUCCESS);
    }
    output::line(&if done.written {
        format!(
            "wrote {} (notes in \"$comment\" keys; `aai-gateway config check` checks it)",
            done.config.display()
        )
    } else {
        format!("{} exists; left as it is", done.config.display())
    });
    output::line(&format!(
        "agents may work in {}{}",
        done.folder.display(),
        if done.made_folder { " (made now)" } else { "" }
    ));
    output::line("Add the gateway to your MCP client:");
    for (client, place, line) in &lines {
        output::line(&format!("  {client} ({place}):\n    {line}"));
    }
    Ok(ExitCode::SUCCESS)
}

/// The first `serve` in a home without a config: the starter config and its folder, said in
/// the log (nobody is asked: a service has no terminal).
pub fn first_serve(home: &std::path::Path) {
    if home.join(aai_engine::config::CONFIG_FILE).exists() {
        return;
    }
    match starter::ensure(home, starter::DEFAULT_FOLDER) {
        Ok(done) => tracing::info!(
            config = %done.config.display(),
            folder = %done.folder.display(),
            "first run: wrote a starter config; agents may work in its folder. `aai-gateway init` prints the line to add to each MCP client"
        ),
        Err(problem) => tracing::warn!("first run: no starter config: {problem}"),
    }
}
