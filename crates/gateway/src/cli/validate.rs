//! `aai-gateway validate`: check aai.json files as discovery would.

use std::process::ExitCode;

use super::output;

/// The files `validate` checks: each file named, and every `aai.json` under each folder named.
fn descriptor_files(inputs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found: Vec<std::path::PathBuf> = ignore::WalkBuilder::new(input)
                .standard_filters(false)
                .follow_links(false)
                .build()
                .flatten()
                .filter(|e| {
                    e.file_type().is_some_and(|t| t.is_file()) && e.file_name() == "aai.json"
                })
                .map(ignore::DirEntry::into_path)
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    files
}

pub fn run(inputs: &[std::path::PathBuf]) -> ExitCode {
    let files = descriptor_files(inputs);
    if files.is_empty() {
        eprintln!(
            "aai-gateway: no aai.json found under {}",
            inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(1);
    }
    let mut ok = true;
    for file in &files {
        let name = file.display().to_string();
        let result = match std::fs::read(file) {
            Ok(bytes) => aai_descriptor::parse(&name, &bytes).map(|_| ()),
            Err(error) => Err(aai_descriptor::LoadError {
                source_name: name.clone(),
                problems: vec![aai_descriptor::Problem::new(
                    "",
                    format!("cannot read: {error}"),
                )],
            }),
        };
        ok &= result.is_ok();
        output::validation(&name, &result);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
