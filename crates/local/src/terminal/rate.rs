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
use serde_json::{Map, Value};

use super::{Terminal, arg_str, loss};
use crate::{Call, Rated, classify, contain};

/// The hosts a call asks to reach (`hosts`), as given.
pub(super) fn hosts(args: &Map<String, Value>) -> Vec<String> {
    args.get("hosts")
        .and_then(Value::as_array)
        .map(|hosts| {
            hosts
                .iter()
                .filter_map(Value::as_str)
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

impl Terminal {
    /// Whether what this gateway's terminal starts runs in the whole box here: contained, the
    /// kernel enforcing Landlock, namespaces allowed (the private view and network), and the
    /// network through the proxy.
    pub(super) fn boxed_here(&self) -> bool {
        let config = &self.setup.config;
        config.containment == contain::Containment::Sandbox
            && !config.terminal_anywhere
            && config.egress.mode == crate::egress::EgressMode::Proxy
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
        let policy =
            crate::browser::policy::DomainPolicy::keyed("local.egress", &allowed, &[], true);
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
                    .is_ok_and(crate::addresses::is_internal)
                    || host == "localhost";
                if internal {
                    !egress.allow.contains(h)
                } else {
                    policy.check_host(host).is_err()
                }
            })
            .collect()
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
                    return classify::classify(command).map(Rated::critical);
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
                let verdict = loss::judge(
                    &classified,
                    &loss::Scene {
                        cwd: &cwd,
                        allowed: &allowed,
                        home: &crate::user_home(),
                    },
                );
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

/// Whether this machine can make the whole box: Landlock enforced and namespaces allowed.
static SUPPORTED: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
    aai_contain::support().sandbox.is_some() && aai_contain::view::namespaces_allowed()
});
