//! `aai-gateway validate`: check aai.json files as discovery would.

use std::process::ExitCode;

use aai_engine::config::Config;

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

/// What a valid descriptor would still be refused for: by the app store (a missing or
/// non-semantic `version`; the gateway orders store versions), and by a call under this home's
/// config (a plain-http base URL). Each line names the file and the fix.
fn refusals(name: &str, descriptor: &aai_descriptor::Descriptor, config: &Config) -> Vec<String> {
    let mut notes = Vec::new();
    match descriptor.version.as_deref().filter(|v| !v.trim().is_empty()) {
        None => notes.push(format!(
            "{name}: the app store would refuse it: no \"version\" (a published descriptor needs a semantic version, like \"1.0.0\")"
        )),
        Some(version) if semver::Version::parse(version).is_err() => notes.push(format!(
            "{name}: the app store would refuse it: \"version\" {version:?} is not a semantic version (like \"1.2.0\"), so installed copies could not be updated in order"
        )),
        Some(_) => {}
    }
    if let Some(web) = &descriptor.platforms.web {
        let base = &web.fields.base_url;
        if let Ok(url) = url::Url::parse(base)
            && url.scheme() == "http"
        {
            let loopback = url.host_str().is_some_and(aai_executor::rest::is_loopback);
            if !loopback {
                notes.push(format!(
                    "{name}: a call would refuse it: base_url {base} is plain http; web apps use https (plain http only for 127.0.0.1/localhost, with `web.allow_http_loopback`)"
                ));
            } else if !config.web.allow_http_loopback {
                notes.push(format!(
                    "{name}: a call would refuse it: base_url {base} is plain http; set `\"web\": {{\"allow_http_loopback\": true}}` in config.json to call a local server"
                ));
            }
        }
    }
    notes
}

pub fn run(home: &std::path::Path, inputs: &[std::path::PathBuf]) -> ExitCode {
    let (config, _) = Config::load(home);
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
        let mut notes = Vec::new();
        let result = match std::fs::read(file) {
            Ok(bytes) => aai_descriptor::parse(&name, &bytes).map(|descriptor| {
                notes = refusals(&name, &descriptor, &config);
            }),
            Err(error) => Err(aai_descriptor::LoadError {
                source_name: name.clone(),
                problems: vec![aai_descriptor::Problem::new(
                    "",
                    format!("cannot read: {error}"),
                )],
            }),
        };
        ok &= result.is_ok();
        output::validation(&name, &result, &notes);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
