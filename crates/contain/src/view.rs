//! A contained process's own view of the file system, made by the launcher's second stage
//! before it restricts itself with Landlock.
//!
//! The stage moves into a user and a mount namespace of its own (no privilege needed) and
//! changes what it sees, not what is on disk:
//!
//! - private, empty `/tmp`, `/var/tmp`, `/dev/shm`, the temporary folder the gateway uses and
//!   the user's runtime folder (`XDG_RUNTIME_DIR`): what the user's session keeps there — a
//!   bus, an ssh-agent, tmux, a program's command socket, the user's own files — is not there;
//! - the gateway's home is an empty read-only folder (or, for an MCP server, itself read-only
//!   with its secrets emptied); the gateway's other folders read-only;
//! - every path of the deny list (the user's secret stores) an empty read-only folder or file;
//! - the user's other session sockets outside those folders covered (the system bus, screen,
//!   docker, systemd's private socket);
//! - inside the allowed folders, the files that make something run later without the agent
//!   (`.git/hooks`, `.git/config`, `.mcp.json`, `.vscode/`, `.envrc`, shell rc files, …)
//!   read-only ([`RUN_LATER`]);
//! - what must stay in sight although it lies in a private folder — an allowed folder under
//!   `/tmp`, a file named readable, and for a desktop profile the display's socket, the X
//!   authority file and the session bus — is bound back at its own path.
//!
//! Landlock, enforced right after, forbids a restricted process every change of mounts, so
//! nothing contained can lift one. The ids are mapped by the launcher's first stage (root
//! keeps every id, an ordinary user only itself). Where user namespaces are off, nothing of
//! this applies and the launcher falls back to Landlock's own rules; `aai-gateway doctor`
//! says which holds.

use std::ffi::OsString;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};

use crate::ContainError;
use crate::Profile;
use crate::rules::resolve;
use crate::sessions::{DESKTOP_VARS, SESSION_VARS};

pub use crate::later::RUN_LATER;

/// What the command's environment must say about the view.
#[derive(Debug, Default)]
pub struct Entered {
    /// Set in the command's environment.
    pub set: Vec<(&'static str, OsString)>,
    /// Removed from it.
    pub remove: Vec<&'static str>,
}

/// A path seen before the view is made, held open so that it can be bound back.
struct Keep {
    path: PathBuf,
    fd: OwnedFd,
    dir: bool,
    /// Inside a folder the view hides (a file named readable under the gateway's home).
    in_hidden: bool,
    /// A program's tree: bound back read-only.
    program: bool,
}

/// `path` with the folders on its way resolved, but not its last link.
fn resolve_folders(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolve(parent).join(name),
        _ => resolve(path),
    }
}

impl Keep {
    /// `path` held open, when it exists.
    fn open(path: PathBuf, in_hidden: bool, program: bool) -> Option<Self> {
        let (fd, dir) = crate::linux::open(&path)?;
        Some(Self {
            path,
            fd,
            dir,
            in_hidden,
            program,
        })
    }
}

/// The temporary folders every view makes private, whatever the profile.
const PRIVATE: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// What must stay in view for `program` (a file a process is run from) to run: the folder
/// directly in a private temporary folder that holds it (a checkout or a virtualenv under
/// `/tmp`, with the packages it loads beside the program), else `program` itself (it is in
/// view where it lies). The folders on the way are resolved, not the program itself: a
/// virtualenv's `bin/python` is a link out of it, but is run by its own path.
pub fn source_tree(program: &Path) -> PathBuf {
    let program = resolve_folders(program);
    let temp = resolve(&std::env::temp_dir());
    // The deepest private folder first: with `TMPDIR=/tmp/user/1000` a program there brings
    // its own folder, not all of `/tmp/user`.
    let mut private: Vec<PathBuf> = PRIVATE
        .iter()
        .map(PathBuf::from)
        .chain(std::iter::once(temp))
        .collect();
    private.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for dir in private {
        if let Ok(rest) = program.strip_prefix(&dir)
            && let Some(first) = rest.components().next()
            && rest.components().nth(1).is_some()
        {
            return dir.join(first);
        }
    }
    program
}

/// Where this environment's session sockets are (see [`crate::sessions`]), and the desktop
/// sockets a desktop profile keeps.
fn desktop_paths(var: &dyn Fn(&str) -> Option<OsString>, bus: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(display) = var("DISPLAY") {
        let display = display.to_string_lossy().into_owned();
        // `:0`, `:0.0` or `unix:0`: the socket is /tmp/.X11-unix/X0.
        if let Some(number) = display
            .strip_prefix("unix")
            .unwrap_or(&display)
            .strip_prefix(':')
            .and_then(|n| n.split('.').next())
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            out.push(PathBuf::from(format!("/tmp/.X11-unix/X{number}")));
        }
    }
    if let Some(file) = var("XAUTHORITY") {
        out.push(file.into());
    }
    if let (Some(runtime), Some(wayland)) = (var("XDG_RUNTIME_DIR"), var("WAYLAND_DISPLAY")) {
        out.push(Path::new(&runtime).join(wayland));
    }
    if bus && let Some(address) = var("DBUS_SESSION_BUS_ADDRESS") {
        out.extend(crate::sessions::bus_paths(&address));
    }
    out.retain(|p| p.is_absolute());
    out
}

fn within(path: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| path.starts_with(d))
}

/// Mount flags of `path`'s mount that a bind made read-only in a user namespace must keep
/// (the kernel refuses to drop them).
fn locked_flags(path: &Path) -> MsFlags {
    use rustix::fs::StatVfsMountFlags as F;
    let Ok(stat) = rustix::fs::statvfs(path) else {
        return MsFlags::empty();
    };
    let mut flags = MsFlags::empty();
    for (from, to) in [
        (F::NOSUID, MsFlags::MS_NOSUID),
        (F::NODEV, MsFlags::MS_NODEV),
        (F::NOEXEC, MsFlags::MS_NOEXEC),
        (F::NOATIME, MsFlags::MS_NOATIME),
        (F::NODIRATIME, MsFlags::MS_NODIRATIME),
        (F::RELATIME, MsFlags::MS_RELATIME),
    ] {
        if stat.f_flag.contains(from) {
            flags |= to;
        }
    }
    flags
}

fn step(what: String) -> impl FnOnce(nix::errno::Errno) -> ContainError {
    ContainError::namespace(what)
}

fn tmpfs(path: &Path, mode: &str) -> Result<(), ContainError> {
    mount(
        Some("tmpfs"),
        path,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("mode={mode}").as_str()),
    )
    .map_err(step(format!("make a private folder at {}", path.display())))
}

fn read_only(path: &Path) -> Result<(), ContainError> {
    mount(
        None::<&str>,
        path,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | locked_flags(path),
        None::<&str>,
    )
    .map_err(step(format!("make {} read-only", path.display())))
}

fn bind(source: &Path, target: &Path) -> Result<(), ContainError> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(step(format!("show {} in the sandbox", target.display())))
}

/// The same (device, inode) at `path` as the held `fd`.
fn same(path: &Path, fd: &OwnedFd) -> bool {
    let (Ok(a), Ok(b)) = (rustix::fs::stat(path), rustix::fs::fstat(fd)) else {
        return false;
    };
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// Binds a held path back at its own place, making its mount point inside the private
/// folder that now covers it; a program's tree read-only. Where the path still shows what
/// was held, nothing is done unless `always`.
fn restore(keep: &Keep, always: bool) -> Result<(), ContainError> {
    if same(&keep.path, &keep.fd) && !always {
        return Ok(());
    }
    let make = |e: std::io::Error| ContainError::Namespace {
        step: format!("make a place for {} in the sandbox", keep.path.display()),
        source: e,
    };
    if let Some(parent) = keep.path.parent() {
        std::fs::create_dir_all(parent).map_err(make)?;
    }
    if keep.dir {
        std::fs::create_dir_all(&keep.path).map_err(make)?;
    } else if std::fs::symlink_metadata(&keep.path).is_err() {
        std::fs::File::create(&keep.path).map_err(make)?;
    }
    let source = PathBuf::from(format!(
        "/proc/self/fd/{}",
        rustix::fd::AsRawFd::as_raw_fd(&keep.fd.as_fd())
    ));
    bind(&source, &keep.path)?;
    if keep.program {
        read_only(&keep.path)?;
    }
    Ok(())
}

/// Covers an existing file with an empty read-only one (`empty`, on a private tmpfs).
fn cover_file(path: &Path, empty: &Path) -> Result<(), ContainError> {
    mount(
        Some(empty),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(step(format!("hide {}", path.display())))?;
    read_only(path)
}

/// An empty folder or file, read-only, over `path` when it exists (links are left: what they
/// point at is judged where it lies).
fn hide(path: &Path, empty: &Path) -> Result<bool, ContainError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(false);
    };
    if meta.is_dir() {
        tmpfs(path, "0755")?;
        read_only(path)?;
    } else if meta.file_type().is_symlink() {
        return Ok(false);
    } else {
        cover_file(path, empty)?;
    }
    Ok(true)
}

pub use crate::later::run_later;

/// Moves this (single-threaded) process into user and mount namespaces of its own, with
/// the same ids inside as outside.
///
/// The launcher's first stage writes the maps (see `launcher::map_ids_of`): this process
/// stops itself once, made or not, and finds them written when it goes on.
fn unshare_as_self() -> Result<(), ContainError> {
    use nix::sched::{CloneFlags, unshare};
    let made = unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS);
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    made.map_err(ContainError::namespace("make a user and mount namespace"))?;
    let mapped = std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|m| !m.trim().is_empty())
        && std::fs::read_to_string("/proc/self/gid_map").is_ok_and(|m| !m.trim().is_empty());
    if !mapped {
        return Err(ContainError::Namespace {
            step: "map the user and group ids".to_owned(),
            source: std::io::Error::other("the launcher's first stage did not write them"),
        });
    }
    Ok(())
}

pub use crate::linux::namespaces_allowed;

/// Whether the namespaces could not be made because this system does not allow them (user
/// namespaces off, a container's filter): the launcher then falls back to Landlock's rules
/// alone. Running out of them (ENOSPC: a box can use up the user's namespace limit to force
/// the next one out of its view) and any later failure refuse the command.
pub fn unavailable(error: &ContainError) -> bool {
    use nix::errno::Errno;
    matches!(error, ContainError::Namespace { step, source }
        if step == "make a user and mount namespace"
            && [Errno::EPERM, Errno::EINVAL, Errno::ENOSYS]
                .iter()
                .any(|e| source.raw_os_error() == Some(*e as i32)))
}

/// Makes the view of `profile` for this process (see the module's text).
///
/// # Errors
/// A step that failed; [`unavailable`] tells whether nothing was changed.
pub fn enter(
    profile: &Profile,
    var: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Entered, ContainError> {
    let uid = nix::unistd::getuid().as_raw();
    let home = resolve(&profile.home);
    let deny: Vec<PathBuf> = profile.deny.iter().map(|p| resolve(p)).collect();
    let protect: Vec<PathBuf> = profile.protect.iter().map(|p| resolve(p)).collect();
    let mut hidden = deny.clone();
    hidden.push(home.clone());
    hidden.extend(protect.iter().cloned());

    let runtime = var("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")));
    let mut private: Vec<PathBuf> = PRIVATE.iter().map(PathBuf::from).collect();
    if let Some(temp) = &profile.temp {
        private.push(resolve(temp));
    }
    private.push(resolve(&runtime));
    private.push(PathBuf::from(format!("/run/user/{uid}")));
    private.sort();
    private.dedup();
    // A private folder inside another is covered with it; one inside a hidden one stays hidden.
    let private: Vec<PathBuf> = private
        .iter()
        .filter(|p| !private.iter().any(|q| q != *p && p.starts_with(q)))
        .filter(|p| !within(p, &hidden) && std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .cloned()
        .collect();

    unshare_as_self()?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(ContainError::namespace("make the mounts private"))?;

    // What must stay in sight, opened before anything is covered (in the new namespace: a
    // bind's source must be one of its mounts).
    let mut wanted: Vec<(PathBuf, bool)> = profile
        .write
        .iter()
        .map(|p| (resolve(p), false))
        .chain(profile.read.iter().map(|p| (resolve(p), true)))
        .collect();
    if profile.desktop {
        wanted.extend(
            desktop_paths(var, !profile.no_bus)
                .into_iter()
                .map(|p| (resolve(&p), false)),
        );
    }
    let mut keeps = Vec::new();
    if profile.home_readable
        && let Some((fd, true)) = crate::linux::open(&home)
    {
        keeps.push(Keep {
            path: home.clone(),
            fd,
            dir: true,
            in_hidden: false,
            program: false,
        });
    }
    // The gateway's own program (this launcher) is in every view, read-only, as where it is
    // installed: a command that runs it meets the gate's own refusal, not a missing file.
    let programs = profile
        .programs
        .iter()
        .map(|p| resolve_folders(p))
        .chain(std::env::current_exe().ok().map(|p| resolve(&p)));
    for path in programs {
        if within(&path, &hidden) || keeps.iter().any(|k: &Keep| k.path == path) {
            continue;
        }
        keeps.extend(Keep::open(path, false, true));
    }
    for (path, named_readable) in wanted {
        let in_hidden = within(&path, &hidden);
        // Nothing under a hidden folder comes back but a file named readable.
        if in_hidden && !named_readable {
            continue;
        }
        keeps.extend(Keep::open(path, in_hidden, false));
    }

    for dir in &private {
        let mode = if dir.starts_with("/run/user") || *dir == resolve(&runtime) {
            "0700"
        } else {
            "1777"
        };
        tmpfs(dir, mode)?;
    }
    // An empty file to lay over the files that are hidden (unlinked at the end; the binds keep
    // it).
    let empty = PathBuf::from("/tmp/.aai-empty");
    if Path::new("/tmp").is_dir() {
        std::fs::write(&empty, b"").map_err(|e| ContainError::Namespace {
            step: "make an empty file".to_owned(),
            source: e,
        })?;
    }
    // Outer folders first, so that a folder inside one is bound on top of it.
    keeps.sort_by_key(|k| k.path.components().count());
    let trees: Vec<PathBuf> = keeps
        .iter()
        .filter(|k| k.program)
        .map(|k| k.path.clone())
        .collect();
    for keep in keeps.iter().filter(|k| !k.in_hidden) {
        // A folder inside a program's tree gets a mount of its own, writable or not as it
        // was, even where the tree's bind already shows it.
        let inside = !keep.program && trees.iter().any(|t| keep.path.starts_with(t));
        restore(keep, inside)?;
    }

    // The session's other sockets, where no private folder already covers them.
    let desktop = if profile.desktop {
        desktop_paths(var, !profile.no_bus)
    } else {
        Vec::new()
    };
    let sessions = crate::sessions::session_paths(var, uid);
    for path in sessions
        .iter()
        .filter(|p| !within(p, &private) && !desktop.contains(p))
    {
        hide(path, &empty)?;
    }
    // The gateway's home: an empty folder, or (an MCP server) itself with its secrets emptied.
    let mut home_covered = false;
    if profile.home_readable {
        if std::fs::symlink_metadata(&home).is_ok_and(|m| m.is_dir()) {
            // A mount of its own (bound back above when a private folder covered it, or seen
            // through an allowed folder bound back), made read-only.
            bind(&home, &home)?;
            read_only(&home)?;
            for secret in crate::rules::secrets(&home, &crate::rules::list) {
                hide(&secret, &empty)?;
            }
        }
    } else if std::fs::symlink_metadata(&home).is_ok_and(|m| m.is_dir())
        || private.iter().any(|p| home.starts_with(p))
    {
        // An empty, read-only folder, also where a private folder already hid it: nothing can
        // make a home of its own there (a fresh control credential, a data.db) and believe it
        // acted on the gate; a file named readable in it is bound into it below.
        std::fs::create_dir_all(&home).map_err(|source| ContainError::Namespace {
            step: format!("make a place for {} in the sandbox", home.display()),
            source,
        })?;
        tmpfs(&home, "0755")?;
        home_covered = true;
    }
    for dir in &protect {
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            bind(dir, dir)?;
            read_only(dir)?;
        }
    }
    for path in &deny {
        hide(path, &empty)?;
    }
    for root in &profile.write {
        let root = resolve(root);
        if within(&root, &hidden) {
            continue;
        }
        for path in run_later(&root) {
            if within(&path, &hidden) {
                continue;
            }
            bind(&path, &path)?;
            read_only(&path)?;
        }
    }
    // Files named readable inside the hidden home, then the home made read-only.
    for keep in keeps.iter().filter(|k| k.in_hidden) {
        restore(keep, false)?;
    }
    if home_covered {
        read_only(&home)?;
    }
    let _ = std::fs::remove_file(&empty);
    drop(keeps);

    // Nothing contained can lift a mount made here: Landlock forbids every change of mounts
    // to a restricted process.

    let mut entered = Entered::default();
    entered.set.push(("TMPDIR", "/tmp".into()));
    if private.iter().any(|p| *p == resolve(&runtime)) {
        entered
            .set
            .push(("XDG_RUNTIME_DIR", runtime.into_os_string()));
    }
    entered.remove = SESSION_VARS
        .iter()
        .copied()
        .filter(|v| {
            let kept = profile.desktop
                && DESKTOP_VARS.contains(v)
                && !(profile.no_bus && *v == "DBUS_SESSION_BUS_ADDRESS");
            !kept
        })
        .collect();
    Ok(entered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_desktop_keeps_the_displays_socket_its_authority_and_the_bus() {
        let env = |name: &str| -> Option<OsString> {
            match name {
                "DISPLAY" => Some(":7.0".into()),
                "XAUTHORITY" => Some("/run/user/1000/gdm/Xauthority".into()),
                "XDG_RUNTIME_DIR" => Some("/run/user/1000".into()),
                "WAYLAND_DISPLAY" => Some("wayland-0".into()),
                "DBUS_SESSION_BUS_ADDRESS" => Some("unix:path=/run/user/1000/bus".into()),
                _ => None,
            }
        };
        let got = desktop_paths(&env, true);
        assert!(!desktop_paths(&env, false).contains(&PathBuf::from("/run/user/1000/bus")));
        for want in [
            "/tmp/.X11-unix/X7",
            "/run/user/1000/gdm/Xauthority",
            "/run/user/1000/wayland-0",
            "/run/user/1000/bus",
        ] {
            assert!(got.contains(&PathBuf::from(want)), "{want}: {got:?}");
        }
        // A display on another host has no socket here.
        let remote = |name: &str| (name == "DISPLAY").then(|| OsString::from("host:0"));
        assert!(desktop_paths(&remote, true).is_empty());
    }

    #[test]
    fn the_run_later_files_of_a_folder_and_its_projects_are_found() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        for d in [
            "repo/.git/hooks",
            "repo/.vscode",
            "repo/src",
            "deep/a/.git/hooks",
        ] {
            std::fs::create_dir_all(root.join(d)).expect("dir");
        }
        std::fs::write(root.join("repo/.git/config"), "").expect("config");
        std::fs::write(root.join(".envrc"), "").expect("envrc");
        std::fs::write(root.join("repo/main.rs"), "").expect("file");
        let mut found = run_later(root);
        found.sort();
        let want: Vec<PathBuf> = [
            ".envrc",
            "repo/.git/config",
            "repo/.git/hooks",
            "repo/.vscode",
        ]
        .iter()
        .map(|p| root.join(p))
        .collect();
        assert_eq!(found, want, "two levels deep at most");
    }
}
