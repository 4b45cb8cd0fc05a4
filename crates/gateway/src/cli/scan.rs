//! `aai-gateway --scan`: the apps discovery finds, and every skipped descriptor with why.

use std::process::ExitCode;

use aai_engine::config::Config;

use super::output;

/// Scans once and prints the report.
pub fn run(home: &std::path::Path, dev: bool) -> anyhow::Result<ExitCode> {
    let (config, problem) = Config::load(home);
    if let Some(problem) = problem {
        eprintln!("warning: {problem}");
    }
    let options = aai_compose::scan_options(home, &config, dev);
    output::scan_report(
        &aai_engine::scan_once(&options, &config.platforms),
        home,
        &config.platforms,
    );
    Ok(ExitCode::SUCCESS)
}
