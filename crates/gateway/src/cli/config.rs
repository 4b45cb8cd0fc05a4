//! `aai-gateway config`: check config.json, print the schemas.

use std::process::ExitCode;

use aai_engine::config::Config;
use anyhow::Context;
use clap::Subcommand;

use super::output;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Check AAI_HOME/config.json (or FILE): every problem with its place; exit 1 if any.
    Check {
        /// Another file to check instead.
        file: Option<std::path::PathBuf>,
    },
    /// Print the JSON Schema of config.json.
    Schema,
    /// Print the JSON Schema of a registry's app list (`GET /api/v1/apps`).
    RegistrySchema,
}

pub fn run(home: &std::path::Path, action: Action) -> anyhow::Result<ExitCode> {
    match action {
        Action::Schema => {
            output::line(&serde_json::to_string_pretty(&Config::schema())?);
            Ok(ExitCode::SUCCESS)
        }
        Action::RegistrySchema => {
            output::line(&serde_json::to_string_pretty(
                &aai_engine::web::RegistryList::schema(),
            )?);
            Ok(ExitCode::SUCCESS)
        }
        Action::Check { file } => {
            let path = file.unwrap_or_else(|| home.join("config.json"));
            let bytes =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let problems = Config::check(&path, &bytes);
            if output::json() {
                output::value(
                    &serde_json::json!({"file": path, "valid": problems.is_empty(), "problems": problems}),
                );
                return Ok(if problems.is_empty() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                });
            }
            if problems.is_empty() {
                output::line(&format!("{}: ok", path.display()));
                Ok(ExitCode::SUCCESS)
            } else {
                for problem in &problems {
                    output::line(&format!("the config is invalid: {problem}"));
                }
                Ok(ExitCode::from(1))
            }
        }
    }
}
