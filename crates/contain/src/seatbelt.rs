//! macOS: the Seatbelt program (`sandbox-exec -p PROFILE -D NAME=path … -- PROGRAM ARGS…`).
//!
//! The profile text is fixed: it names its folders only as parameters (`(param "WRITE_0")`),
//! and every path travels as a `-D` argument of its own, so no path is ever parsed as profile
//! text. Only how many parameters it refers to varies. Built and tested on every system; run
//! on macOS.

use std::path::PathBuf;

use crate::Profile;
use crate::rules::{SECRET_EXTENSION, SECRETS, resolve};

/// Where macOS keeps the program.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

const HEAD: &str = r#"(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow mach-lookup)
(allow ipc-posix-shm)
(allow ipc-posix-sem)
(allow pseudo-tty)
(allow network*)
(allow file-read*)
(allow file-ioctl (literal "/dev/tty") (literal "/dev/ptmx") (regex #"^/dev/ttys[0-9]+$"))
"#;

/// A parameter list: `NAME_0`, `NAME_1`, … with their paths.
fn numbered(name: &str, paths: &[PathBuf]) -> Vec<(String, PathBuf)> {
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("{name}_{i}"), p.clone()))
        .collect()
}

fn refs(params: &[(String, PathBuf)], form: &str) -> String {
    params
        .iter()
        .map(|(name, _)| format!(" ({form} (param \"{name}\"))"))
        .collect()
}

/// The profile text and its parameters for `profile`.
pub fn profile(profile: &Profile) -> (String, Vec<(String, PathBuf)>) {
    let home = resolve(&profile.home);
    let mut write: Vec<PathBuf> = profile.write.iter().map(|p| resolve(p)).collect();
    write.extend(profile.temp.iter().map(|p| resolve(p)));
    let protect: Vec<PathBuf> = profile.protect.iter().map(|p| resolve(p)).collect();
    let secrets: Vec<PathBuf> = SECRETS.iter().map(|s| home.join(s)).collect();
    let read: Vec<PathBuf> = profile.read.iter().map(|p| resolve(p)).collect();
    let write = numbered("WRITE", &write);
    let protect = numbered("PROTECT", &protect);
    let secrets = numbered("SECRET", &secrets);
    let read = numbered("READ", &read);
    let mut text = HEAD.to_owned();
    text.push_str(&format!(
        "(allow file-write* (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/tty\") (literal \"/dev/ptmx\") (regex #\"^/dev/ttys[0-9]+$\"){})\n",
        refs(&write, "subpath")
    ));
    // Later rules win: the home and the other protected folders are never written, whatever
    // allowed folder holds them; the secrets are never read.
    text.push_str(&format!(
        "(deny file-write* (subpath (param \"AAI_HOME\")){})\n",
        refs(&protect, "subpath")
    ));
    text.push_str(&format!(
        "(deny file-read*{} (require-all (subpath (param \"AAI_HOME\")) (regex #\"\\.{SECRET_EXTENSION}$\")))\n",
        refs(&secrets, "subpath")
    ));
    if !read.is_empty() {
        text.push_str(&format!("(allow file-read*{})\n", refs(&read, "literal")));
    }
    let mut params = vec![("AAI_HOME".to_owned(), home)];
    params.extend(write);
    params.extend(protect);
    params.extend(secrets);
    params.extend(read);
    (text, params)
}

/// The program and arguments that run `program args…` under the profile.
pub fn command(profile_: &Profile, program: &str, args: &[String]) -> (String, Vec<String>) {
    let (text, params) = profile(profile_);
    let mut argv = vec!["-p".to_owned(), text];
    for (name, path) in params {
        argv.push("-D".to_owned());
        argv.push(format!("{name}={}", path.to_string_lossy()));
    }
    argv.push("--".to_owned());
    argv.push(program.to_owned());
    argv.extend(args.iter().cloned());
    (SANDBOX_EXEC.to_owned(), argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_travel_as_parameters_never_as_profile_text() {
        let evil = "/Users/me/a\") (allow file-write* (subpath \"/x";
        let profile_ = Profile {
            write: vec![evil.into(), "/Users/me/Projects".into()],
            temp: Some("/private/tmp".into()),
            home: "/Users/me/.aai".into(),
            protect: vec!["/Users/me/Library/Caches/aai-gateway".into()],
            read: vec!["/Users/me/.aai/run/task-1.mcp.json".into()],
            programs: Vec::new(),
            cgroup: None,
            desktop: false,
            no_bus: false,
            deny: Vec::new(),
            own_temp: None,
            egress: None,
            home_readable: false,
        };
        let (program, argv) = command(&profile_, "/bin/zsh", &["-c".into(), "rm -rf ~".into()]);
        assert_eq!(program, SANDBOX_EXEC);
        assert_eq!(argv[0], "-p");
        let text = &argv[1];
        assert!(!text.contains("/Users"), "no path in the profile: {text}");
        assert!(!text.contains("/private"), "{text}");
        // Every parameter the text names is defined, each as one argument.
        let defined: Vec<&str> = argv
            .iter()
            .skip(2)
            .take_while(|a| *a != "--")
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|pair| {
                assert_eq!(pair[0], "-D");
                pair[1].split_once('=').expect("NAME=path").0
            })
            .collect();
        for name in text.split("(param \"").skip(1) {
            let name = name.split('"').next().expect("a name");
            assert!(defined.contains(&name), "{name} is defined");
        }
        assert!(argv.contains(&format!("WRITE_0={evil}")));
        let tail: Vec<&str> = argv
            .iter()
            .skip_while(|a| *a != "--")
            .map(String::as_str)
            .collect();
        assert_eq!(tail, ["--", "/bin/zsh", "-c", "rm -rf ~"]);
    }

    #[test]
    fn the_profile_denies_by_default_keeps_the_home_read_only_and_hides_its_secrets() {
        let (text, params) = profile(&Profile {
            write: vec!["/Users/me/.aai".into(), "/Users/me/Projects".into()],
            home: "/Users/me/.aai".into(),
            ..Profile::default()
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "(deny default)");
        let allow_write = lines
            .iter()
            .position(|l| l.starts_with("(allow file-write*"))
            .expect("writes allowed somewhere");
        let deny_home = lines
            .iter()
            .position(|l| l.starts_with("(deny file-write* (subpath (param \"AAI_HOME\"))"))
            .expect("home denied");
        assert!(deny_home > allow_write, "the denial comes later and wins");
        assert!(text.contains("(regex #\"\\.key$\")"));
        for secret in SECRETS {
            let path = PathBuf::from("/Users/me/.aai").join(secret);
            assert!(
                params
                    .iter()
                    .any(|(n, p)| n.starts_with("SECRET_") && *p == path)
            );
        }
    }
}
