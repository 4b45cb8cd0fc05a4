//! `aai-gateway completions` and `aai-gateway man`.

use std::process::ExitCode;

use anyhow::Context;

use super::{Cli, output};

/// A completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut command = <Cli as clap::CommandFactory>::command();
    output::generated(|out| {
        clap_complete::generate(shell, &mut command, "aai-gateway", out);
    });
    Ok(ExitCode::SUCCESS)
}

/// The manual page (roff) on stdout.
pub fn man() -> anyhow::Result<ExitCode> {
    let command = <Cli as clap::CommandFactory>::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .context("cannot render the manual page")?;
    output::generated(|out| {
        let _ = out.write_all(&page);
    });
    Ok(ExitCode::SUCCESS)
}
