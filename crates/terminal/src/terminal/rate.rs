//! How the gate rates a terminal call from what it does. A command that runs in the box —
//! writes only in the allowed folders and its private temporary folder, the network only
//! through the egress proxy, none of the session's sockets — is medium, so the default
//! profile runs it without a question; its deletions are rated by what they would lose
//! ([`super::loss`]); what no box contains (a critical command: privilege, a leak, a force
//! push) stays critical. Outside the box (no sandbox here, `outside_sandbox`, a session made
//! outside it, text typed into a window) commands keep the tool's own risk, and critical
//! ones are critical.
//!
//! Hosts beyond the egress policy are named in `hosts` and asked every time (see
//! [`Terminal::new_hosts`]).

use aai_descriptor::Risk;
use aai_sandbox::Contained as _;
use serde_json::{Map, Value};

use super::{Terminal, arg_str, loss};
use aai_sandbox::profile as contain;
use aai_toolset::Rated;

use crate::{Call, classify};

/// The hosts a call asks to reach (`hosts`), each as the proxy will read it: a name lower-cased
/// without its trailing dot, an address in its one spelling (`2130706433` and `127.1` are
/// `127.0.0.1`), with its port when one was given — so the person is asked about what will be
/// reached, and a grant is kept under that. A name of one label (`com`, which would cover every
/// name under it) or one that cannot be read is left out: it is never asked, granted or reached.
pub(super) fn hosts(args: &Map<String, Value>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for given in args
        .get("hosts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if let Some(key) = host_key(given)
            && !out.contains(&key)
        {
            out.push(key);
        }
    }
    out
}

/// `given` (`host`, `host:port`, `[v6]:port`) as the proxy reads it; see [`hosts`].
fn host_key(given: &str) -> Option<String> {
    let given = given.trim();
    let (host, port) = match given.rsplit_once(':') {
        Some((host, port))
            if !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.starts_with('[')) =>
        {
            (
                host.trim_start_matches('[').trim_end_matches(']'),
                Some(port),
            )
        }
        _ => (given, None),
    };
    let host = aai_sandbox::policy::normalize_host(host)?;
    let address = host.parse::<std::net::IpAddr>().is_ok();
    if !address && host != "localhost" && !host.contains('.') {
        return None;
    }
    Some(port.map_or_else(|| host.clone(), |port| format!("{host}:{port}")))
}

impl Terminal {
    /// Whether what this gateway's terminal starts runs in the whole box here: contained, the
    /// kernel enforcing Landlock, namespaces allowed (the private view and network), and the
    /// network through the proxy.
    pub(super) fn boxed_here(&self) -> bool {
        let config = &self.setup.config;
        config.containment == aai_toolset::Containment::Sandbox
            && !config.terminal_anywhere
            && config.egress.mode == aai_toolset::EgressMode::Proxy
            && *SUPPORTED
    }

    /// The hosts in `hosts` that the egress policy does not let through already.
    pub(super) fn new_hosts(&self, args: &Map<String, Value>) -> Vec<String> {
        let wanted = hosts(args);
        if wanted.is_empty() {
            return wanted;
        }
        let egress = &self.setup.config.egress;
        let allowed = egress.allowed();
        let policy = aai_sandbox::policy::DomainPolicy::keyed("local.egress", &allowed, &[], true);
        wanted
            .into_iter()
            .filter(|h| {
                let host = h.rsplit_once(':').map_or(h.as_str(), |(host, port)| {
                    if port.bytes().all(|b| b.is_ascii_digit()) {
                        host
                    } else {
                        h.as_str()
                    }
                });
                let internal = host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(aai_contain::addresses::is_internal)
                    || host == "localhost";
                if internal {
                    !egress.allow.contains(h)
                } else {
                    policy.check_host(host).is_err()
                }
            })
            .collect()
    }

    /// Git as the loss judgement runs it: in the box of this caller's commands (a repository
    /// the agent wrote may name code git runs), its network a port that never answers, for at
    /// most [`loss::LOOK_FOR`].
    fn boxed_git(
        &self,
        roots: &[String],
    ) -> impl Fn(&std::path::Path, &[String], std::time::Duration) -> Option<Vec<u8>> + use<> {
        let profile = self.setup.containment(roots).ok().flatten();
        // Held for the judgement: connections from the box reach it and wait unanswered.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").ok();
        let git = which_git();
        move |dir: &std::path::Path, args: &[String], limit: std::time::Duration| {
            let mut profile = profile.clone()?;
            profile.egress = Some(silent.as_ref()?.local_addr().ok()?.port());
            let (program, argv) =
                aai_sandbox::profile::wrap(&profile, git.as_deref()?, &loss::git_args(dir, args))
                    .ok()?;
            let mut command = std::process::Command::new(program);
            command.args(argv).current_dir(dir);
            loss::run_for(command, limit)
        }
    }

    /// The call's rating ([`crate::Toolset::rate`]).
    pub(super) fn rate_call(&self, call: &Call<'_>, boxed: bool) -> Option<Rated> {
        match call.tool {
            "bash_session" => {
                let creates = arg_str(call.args, "action") == Some("create");
                let contained = boxed && !contain::asks_outside(call.args) && self.boxed_here();
                (!creates || contained).then_some(Rated {
                    risk: if creates { Risk::Medium } else { Risk::Low },
                    why: None,
                    each_time: false,
                })
            }
            "bash_execute" => {
                let command = arg_str(call.args, "command")?;
                let id = arg_str(call.args, "session_id").unwrap_or("default");
                let contained = boxed
                    && !contain::asks_outside(call.args)
                    && self.sessions.outside(call.caller, id).is_none()
                    && self.boxed_here();
                if !contained {
                    if let Some(why) = classify::classify(command) {
                        return Some(Rated::critical(why));
                    }
                    // Where it runs with the display (a terminal window the agent types into),
                    // a program that types or moves windows does what local.input does: asked
                    // each time, whatever the terminal's grants.
                    return classify::drives_display(command).map(|program| Rated {
                        risk: Risk::High,
                        why: Some(format!(
                            "it runs {program}, which types, clicks or changes other windows on your display: judged like local.input, asked every time"
                        )),
                        each_time: true,
                    });
                }
                let classified = classify::classify_losses(command);
                if let Some(why) = classified.critical {
                    return Some(Rated::critical(why));
                }
                let place = self.place(call.roots, None);
                let allowed = place
                    .sandbox
                    .as_ref()
                    .map(|s| s.allowed().to_vec())
                    .unwrap_or_default();
                let cwd = arg_str(call.args, "working_dir")
                    .map(std::path::PathBuf::from)
                    .or_else(|| self.sessions.cwd(call.caller, id))
                    .or(place.start);
                // Without a folder to start from, nothing it deletes can be told.
                let cwd = cwd.unwrap_or_else(|| std::path::PathBuf::from("/"));
                let verdict = if classified.losses.is_empty() {
                    None
                } else {
                    let git = self.boxed_git(call.roots);
                    loss::judge(
                        &classified,
                        &loss::Scene {
                            cwd: &cwd,
                            allowed: &allowed,
                            home: &aai_toolset::user_home(),
                            git: &git,
                            looks: std::cell::Cell::new(loss::MOST_LOOKS),
                            until: std::time::Instant::now() + loss::LOOK_FOR,
                        },
                    )
                };
                Some(match verdict {
                    Some(lost) if lost.risk > Risk::Medium => Rated {
                        risk: lost.risk,
                        why: lost.why.map(|why| format!("it would lose work: {why}")),
                        each_time: true,
                    },
                    // Nothing it deletes is lost, or git brings it back.
                    _ => Rated {
                        risk: Risk::Medium,
                        why: None,
                        each_time: false,
                    },
                })
            }
            _ => None,
        }
    }
}

/// Where git is, as the box is told to run it.
fn which_git() -> Option<String> {
    #[cfg(target_os = "linux")]
    return aai_executor::process::locate(&aai_executor::process::Command::new("git"));
    #[cfg(not(target_os = "linux"))]
    Some("git".to_owned())
}

/// Whether this machine can make the whole box: Landlock enforced and namespaces allowed.
static SUPPORTED: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
    aai_contain::support().sandbox.is_some() && aai_contain::view::namespaces_allowed()
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Toolset as _;

    fn terminal(allowed: &std::path::Path, extra: Value) -> Terminal {
        let mut config = serde_json::json!({"sandbox": {"allowed_directories": [allowed]}});
        if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
            config.extend(extra);
        }
        let config: aai_toolset::LocalConfig = serde_json::from_value(config).expect("config");
        Terminal::new(&crate::Setup::new(config, Vec::new()))
    }

    fn call<'a>(args: &'a Map<String, Value>) -> Call<'a> {
        Call {
            tool: "bash_execute",
            args,
            roots: &[],
            progress: None,
            caller: "agent",
            approved: false,
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    #[test]
    fn commands_in_the_box_are_medium_and_outside_it_keep_todays_rules() {
        let dir = tempfile::tempdir().expect("dir");
        let t = terminal(dir.path(), serde_json::json!({}));
        if !t.boxed_here() {
            eprintln!("no box on this machine: {}", aai_contain::support().detail);
            return;
        }
        let echo = args(serde_json::json!({"command": "echo hi"}));
        let rated = t.rate(&call(&echo), true).expect("rated");
        assert_eq!((rated.risk, rated.each_time), (Risk::Medium, false));
        // The same command typed into a window: not in the box, the tool's own risk.
        assert_eq!(t.rate(&call(&echo), false), None);
        // Outside the box a deletion is critical; in it, judged by what it loses.
        std::fs::write(dir.path().join("only-copy"), "x").expect("file");
        let rm = args(
            serde_json::json!({"command": format!("rm -rf {}/only-copy", dir.path().display())}),
        );
        assert_eq!(
            t.rate(&call(&rm), false).map(|r| r.risk),
            Some(Risk::Critical)
        );
        let inside = t.rate(&call(&rm), true).expect("rated");
        assert_eq!((inside.risk, inside.each_time), (Risk::High, true));
        assert!(inside.why.is_some_and(|w| w.contains("only-copy")));
        // With the network open, nothing is contained.
        let open = terminal(dir.path(), serde_json::json!({"egress": {"mode": "open"}}));
        assert_eq!(open.rate(&call(&echo), true), None);
        let outside =
            args(serde_json::json!({"command": "echo hi", "outside_sandbox": true, "reason": "x"}));
        assert_eq!(t.rate(&call(&outside), true), None);
    }

    #[test]
    fn typing_into_a_window_that_has_the_display_is_judged_like_input() {
        let dir = tempfile::tempdir().expect("dir");
        let t = terminal(dir.path(), serde_json::json!({}));
        for command in [
            "xdotool type 'rm -rf ~'",
            "sleep 1; xdotool key ctrl+alt+t",
            "bash -c 'ydotool type hi'",
            "xprop -id 0x1 -f _NET_WM_PID 32c -set _NET_WM_PID 1",
            "echo x | xclip -selection clipboard",
            "env DISPLAY=:0 wmctrl -a Terminal",
        ] {
            let typed = args(serde_json::json!({"command": command}));
            let rated = t.rate(&call(&typed), false).expect(command);
            assert_eq!(
                (rated.risk, rated.each_time),
                (Risk::High, true),
                "{command}"
            );
        }
        for command in ["xprop -root _NET_ACTIVE_WINDOW", "echo xdotool", "ls"] {
            let typed = args(serde_json::json!({"command": command}));
            assert_eq!(t.rate(&call(&typed), false), None, "{command}");
        }
    }

    #[test]
    fn hosts_beyond_the_policy_are_new() {
        let dir = tempfile::tempdir().expect("dir");
        let t = terminal(
            dir.path(),
            serde_json::json!({"egress": {"allow": ["example.com", "127.0.0.1:8080"]}}),
        );
        let wanted = args(serde_json::json!({"command": "true", "hosts": [
            "crates.io", "api.example.com", "127.0.0.1:8080", "127.0.0.1:9090", "evil.test", "localhost:80"]}));
        assert_eq!(
            t.new_hosts(&wanted),
            ["127.0.0.1:9090", "evil.test", "localhost:80"]
        );
    }

    #[test]
    fn hosts_are_asked_about_as_the_proxy_reads_them() {
        let keys = hosts(&args(serde_json::json!({"command": "true", "hosts": [
            "Example.ORG.", "2130706433:9222", "127.1:6379", "0x7f.1:2375", "[::1]:8080",
            "com", "localhost:3000", "bad host", "example.org"]})));
        assert_eq!(
            keys,
            [
                "example.org",
                "127.0.0.1:9222",
                "127.0.0.1:6379",
                "127.0.0.1:2375",
                "::1:8080",
                "localhost:3000",
            ]
        );
    }
}
