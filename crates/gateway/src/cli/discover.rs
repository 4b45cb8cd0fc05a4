//! `aai-gateway discover`: what a site serves at `.well-known/aai.json`, for its author.

use std::process::ExitCode;

use aai_descriptor::Platform;
use aai_engine::config::Config;

use super::{for_person, output, runtime};

/// Fetches, validates and prints `target`'s descriptor, or forgets a discovered app.
pub fn run(
    home: &std::path::Path,
    target: &str,
    refresh: bool,
    forget: bool,
) -> anyhow::Result<ExitCode> {
    let (config, _) = Config::load(home);
    let web = aai_engine::web::Web::new(&config, home).map_err(anyhow::Error::msg)?;
    if forget {
        let forgotten = web.forget_cached(target);
        anyhow::ensure!(
            !forgotten.is_empty(),
            "no discovered app {target:?} is remembered"
        );
        output::line(&format!("forgot {}", forgotten.join(", ")));
        return Ok(ExitCode::SUCCESS);
    }
    let found = runtime()?
        .block_on(web.discover_with(target, refresh))
        .map_err(|error| {
            anyhow::anyhow!(
                "{} ({})",
                for_person(&error.message),
                error.kind.type_name()
            )
        })?;
    if let Some(note) = &found.stale {
        eprintln!("note: {note}");
    }
    let descriptor = found
        .app
        .descriptor()
        .map_err(|error| anyhow::anyhow!("{}", error.message))?;
    eprintln!(
        "{} ({}): valid, {} tool(s); from {}",
        found.app.name(),
        found.app.id(),
        descriptor.tools(Platform::Web).map_or(0, |t| t.len()),
        found.app.source().display()
    );
    output::line(&serde_json::to_string_pretty(&*descriptor)?);
    Ok(ExitCode::SUCCESS)
}
