//! The user's running sessions, out of a contained command's reach.
//!
//! Landlock confines what a command may read and write, but not whom it may *talk to*: a
//! socket bound to a path is reached by `connect`, which Landlock does not check. Through such
//! sockets a command could ask a process that runs outside the sandbox to act for it — the X
//! server types into the user's own terminal, the systemd manager starts a unit, tmux or
//! screen send keys to a session, docker starts a container as root, ssh-agent signs a login.
//! [`session_paths`] lists where they listen; the launcher's view ([`crate::view`]) covers each
//! one that no private folder already hides.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where the user's sessions listen, for this environment (`var`) and user id.
pub fn session_paths(var: &dyn Fn(&str) -> Option<OsString>, uid: u32) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = vec![
        "/tmp/.X11-unix".into(),
        "/tmp/.ICE-unix".into(),
        format!("/tmp/tmux-{uid}").into(),
        "/run/screen".into(),
        "/var/run/screen".into(),
        format!("/run/user/{uid}").into(),
        "/run/docker.sock".into(),
        "/var/run/docker.sock".into(),
        "/run/podman".into(),
        "/run/dbus".into(),
        "/var/run/dbus".into(),
        "/run/systemd/private".into(),
    ];
    if let Some(dir) = var("XDG_RUNTIME_DIR") {
        paths.push(dir.into());
    }
    if let Some(dir) = var("TMUX_TMPDIR") {
        paths.push(Path::new(&dir).join(format!("tmux-{uid}")));
    }
    for name in ["SSH_AUTH_SOCK", "GPG_AGENT_INFO"] {
        if let Some(value) = var(name) {
            let path = PathBuf::from(value);
            if path.is_absolute() {
                paths.push(path);
            }
        }
    }
    if let Some(address) = var("DBUS_SESSION_BUS_ADDRESS") {
        paths.extend(bus_paths(&address));
    }
    paths.sort();
    paths.dedup();
    paths
}

/// Environment variables that point a program at the user's session.
pub const SESSION_VARS: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "DOCKER_HOST",
    "SWAYSOCK",
    "I3SOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "KITTY_LISTEN_ON",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
];

/// The variables a desktop profile keeps: the display and the session bus.
pub const DESKTOP_VARS: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// The socket files a D-Bus address names (`unix:path=…`).
pub fn bus_paths(address: &std::ffi::OsStr) -> Vec<PathBuf> {
    address
        .to_string_lossy()
        .split(';')
        .filter_map(|part| {
            part.split(',').find_map(|kv| {
                kv.strip_prefix("unix:path=")
                    .or_else(|| kv.strip_prefix("path="))
            })
        })
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sessions_of_the_environment_are_found() {
        let env = |name: &str| -> Option<OsString> {
            match name {
                "XDG_RUNTIME_DIR" => Some("/run/user/1000".into()),
                "SSH_AUTH_SOCK" => Some("/tmp/ssh-x/agent.1".into()),
                "DBUS_SESSION_BUS_ADDRESS" => {
                    Some("unix:path=/tmp/dbus-bus,guid=1;unix:abstract=/tmp/x".into())
                }
                "TMUX_TMPDIR" => Some("/var/tmux".into()),
                _ => None,
            }
        };
        let paths = session_paths(&env, 1000);
        for want in [
            "/run/user/1000",
            "/tmp/ssh-x/agent.1",
            "/tmp/dbus-bus",
            "/var/tmux/tmux-1000",
            "/tmp/tmux-1000",
            "/tmp/.X11-unix",
            "/var/run/docker.sock",
        ] {
            assert!(paths.contains(&PathBuf::from(want)), "{want}: {paths:?}");
        }
        // A relative value is no path of a socket to cover.
        let relative = |name: &str| (name == "SSH_AUTH_SOCK").then(|| OsString::from("agent"));
        assert!(!session_paths(&relative, 0).contains(&PathBuf::from("agent")));
    }
}
