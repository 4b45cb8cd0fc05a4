//! The user's running sessions, out of a contained command's reach.
//!
//! Landlock confines what a command may read and write, but not whom it may *talk to*: a
//! socket bound to a path is reached by `connect`, which Landlock (before its Unix-socket
//! rights) does not check. Through such sockets a command could ask a process that runs
//! outside the sandbox to act for it — the X server types into the user's own terminal, the
//! systemd manager starts a unit (`systemd-run --user`), tmux or screen send keys to a
//! session, docker starts a container as root, ssh-agent signs a login to `localhost`. So
//! before it restricts itself, the launcher's second stage moves into a user and mount
//! namespace of its own (both made without privileges) and lays an empty tmpfs over each
//! folder that holds such sockets, and `/dev/null` over each such socket file. Landlock then
//! forbids changing the mounts, so the command cannot lift them; abstract sockets are closed
//! by Landlock's own scope. Where user namespaces are off, nothing is hidden and the launcher
//! says so (`aai-gateway doctor` too).

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
        for part in address.to_string_lossy().split(';') {
            if let Some(path) = part.split(',').find_map(|kv| {
                kv.strip_prefix("unix:path=")
                    .or_else(|| kv.strip_prefix("path="))
            }) {
                paths.push(path.into());
            }
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// Environment variables that point a program at the hidden sessions: removed, so programs
/// fail plainly instead of looking for what is not there.
pub const SESSION_VARS: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "DOCKER_HOST",
];

/// Moves this (single-threaded) process into new user and mount namespaces and covers each
/// of `paths` that exists; how many were covered.
///
/// # Errors
/// The namespaces cannot be made (user namespaces are off) or a mount fails.
#[cfg(target_os = "linux")]
pub fn hide(paths: &[PathBuf]) -> Result<usize, crate::ContainError> {
    use crate::ContainError;
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(ContainError::namespace("make a user and mount namespace"))?;
    // The same ids inside as outside: files keep their owners, the user stays who they are.
    std::fs::write("/proc/self/setgroups", "deny")
        .map_err(ContainError::namespace("write setgroups"))?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
        .map_err(ContainError::namespace("map the user id"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
        .map_err(ContainError::namespace("map the group id"))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(ContainError::namespace("make the mounts private"))?;
    let mut covered = 0;
    for path in paths {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        let result = if meta.is_dir() {
            mount(
                Some("tmpfs"),
                path,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                Some("size=16k,mode=0700"),
            )
        } else if meta.file_type().is_symlink() {
            continue;
        } else {
            mount(
                Some("/dev/null"),
                path,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
        };
        match result {
            Ok(()) => covered += 1,
            Err(e) => {
                return Err(ContainError::namespace(format!("cover {}", path.display()))(e));
            }
        }
    }
    Ok(covered)
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
