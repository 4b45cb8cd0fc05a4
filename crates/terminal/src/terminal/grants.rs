//! "Always allow commands starting with …" grants for the terminal's calls.

use serde_json::{Map, Value};

use crate::classify;

/// Whether command-prefix grants cover this call: every simple command of a plain
/// `bash_execute` script starts with the words of one of `prefixes`. A script with parts the
/// grants do not cover (`git status; rm x`, `git log | sh`, `$(…)`) is not covered.
pub fn prefix_covers(tool: &str, args: &Map<String, Value>, prefixes: &[String]) -> bool {
    if tool != "bash_execute" {
        return false;
    }
    let Some(command) = args.get("command").and_then(Value::as_str) else {
        return false;
    };
    if classify::classify(command).is_some() {
        return false;
    }
    let Some(commands) = classify::plain_commands(command) else {
        return false;
    };
    commands.iter().all(|words| {
        prefixes.iter().any(|prefix| {
            let wanted: Vec<&str> = prefix.split_whitespace().collect();
            !wanted.is_empty()
                && words.len() >= wanted.len()
                && words.iter().zip(&wanted).all(|(word, want)| word == want)
        })
    })
}

/// Programs whose first argument names what they do (`git status`, `cargo test`): a grant
/// for them is offered on two words.
const WITH_SUBCOMMANDS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "docker",
    "podman",
    "kubectl",
    "go",
    "pip",
    "pip3",
    "uv",
    "apt",
    "apt-get",
    "brew",
    "systemctl",
    "gh",
    "make",
    "dotnet",
    "rustup",
    "poetry",
];

/// Programs that run whatever they are given: a prefix grant for them would cover anything.
const RUNS_ANYTHING: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "fish", "eval", "exec", "env", "command", "builtin",
    "xargs", "sudo", "su", "doas", "nohup", "nice", "time", "timeout", "watch", "source", ".",
    "python", "python3", "perl", "ruby", "node", "php", "find", "awk", "sed", "ssh",
];

/// The prefix "always allow commands starting with …" offers for this call, if any: the
/// first word (two for programs with subcommands) of a plain script whose every command
/// starts with them.
pub fn offered_prefix(tool: &str, args: &Map<String, Value>) -> Option<String> {
    if tool != "bash_execute" {
        return None;
    }
    let command = args.get("command").and_then(Value::as_str)?;
    let commands = classify::plain_commands(command)?;
    let first = commands.first()?;
    let name = first.first()?;
    if RUNS_ANYTHING.contains(&name.as_str()) || name.contains('/') {
        return None;
    }
    let two = WITH_SUBCOMMANDS.contains(&name.as_str())
        && first.get(1).is_some_and(|w| !w.starts_with('-'));
    let prefix = if two {
        format!("{name} {}", first[1])
    } else {
        name.clone()
    };
    prefix_covers(tool, args, std::slice::from_ref(&prefix)).then_some(prefix)
}
