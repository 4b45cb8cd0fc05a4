//! Keeps what the agent starts contained: terminal commands, launched apps and scheduled agent
//! hand-offs run under a sandbox that the gateway applies without `unsafe`.
//!
//! On Linux the gateway's own binary re-executes itself as a small launcher
//! (`aai-gateway __contain … -- PROGRAM ARGS…`, see [`Profile::command`]). Its first stage
//! enters the call's cgroup, becomes a child subreaper (every orphan of the command, even after
//! `setsid` and a cleared environment, is re-parented to it) and starts a second stage that
//! restricts itself with Landlock ([`rules`]) and `exec`s the program. The first stage stays
//! outside the Landlock domain, so with the signal scope nothing inside can kill it; it forwards
//! signals, reaps, and on SIGTERM kills its whole tree.
//!
//! What this crate does not do: decide *whether* a call runs contained (the toolsets and the
//! gate do, see `outside_sandbox`), or restrict the network (left alone by design).
//!
//! ```
//! use aai_contain::Profile;
//! let profile = Profile {
//!     write: vec!["/home/me/Projects".into()],
//!     home: "/home/me/.aai".into(),
//!     ..Profile::default()
//! };
//! let (program, argv) = profile.command("/usr/bin/aai-gateway".as_ref(), "bash", &["-i".into()]);
//! assert_eq!(program, "/usr/bin/aai-gateway");
//! assert_eq!(argv[0], "__contain");
//! assert_eq!(aai_contain::Profile::parse(&argv[1..]).unwrap().0, profile);
//! ```

pub mod addresses;
mod error;
pub mod later;
pub mod rules;
pub mod seatbelt;
pub mod windows;

#[cfg(target_os = "linux")]
pub mod cdp_pipe;
#[cfg(target_os = "linux")]
pub mod egress;
#[cfg(target_os = "linux")]
mod launcher;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "linux")]
pub mod own_files;
pub mod own_listeners;
pub mod procs;
pub mod sessions;
#[cfg(target_os = "linux")]
pub mod view;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use error::ContainError;

/// `argv[1]` of the gateway binary that makes it the launcher (handled first thing in `main`).
pub const MARKER: &str = "__contain";

/// What a contained process may touch, beyond reading the system.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Folders written beneath (the file sandbox's allowed folders, declared caches).
    pub write: Vec<PathBuf>,
    /// The temporary folder: written beneath; when it holds a protected folder the command
    /// gets a private one inside it instead (`TMPDIR`).
    pub temp: Option<PathBuf>,
    /// The gateway's home (`AAI_HOME`): read-only whatever else says, its secrets unreadable.
    pub home: PathBuf,
    /// Other folders of the gateway's that stay read-only (the web discovery cache).
    pub protect: Vec<PathBuf>,
    /// Files readable although they lie among the secrets (a scheduled agent's MCP config).
    pub read: Vec<PathBuf>,
    /// What the process is run from (an MCP server's package, with what it loads beside it):
    /// seen read-only at its own place, also where a private folder covers it (a checkout
    /// under `/tmp`). The gateway's own program is always in view this way. See
    /// [`view::source_tree`].
    pub programs: Vec<PathBuf>,
    /// The call's cgroup (`cgroup.procs`), entered before anything else.
    pub cgroup: Option<PathBuf>,
    /// A desktop program: the display (its socket, abstract ones included: libxcb tries the
    /// display's abstract socket first and gives up when that is refused instead of falling
    /// back to the socket file) and the session bus stay in view; no other session socket
    /// ([`sessions`]: tmux, ssh-agent, docker, the system bus) does. Launched GUI apps and MCP
    /// servers; terminal commands and scheduled agents get no session socket at all.
    pub desktop: bool,
    /// A desktop program that keeps the display but not the session bus (a terminal
    /// emulator: its shell would have the bus too).
    pub no_bus: bool,
    /// Paths no contained process may see, read or write (the user's secret stores,
    /// [`rules::SECRET_STORES`] and the config's additions): empty and read-only in its view.
    pub deny: Vec<PathBuf>,
    /// The launcher's own temporary folder inside `temp` (set by its first stage where `temp`
    /// holds a protected folder): written beneath when the process has no view of its own,
    /// left out of the view otherwise (it has a private `/tmp`).
    pub own_temp: Option<PathBuf>,
    /// The port of the gateway's egress proxy on 127.0.0.1: the process gets a network of
    /// its own whose only way out is that proxy ([`egress`]); `None` leaves the network as
    /// it is.
    pub egress: Option<u16>,
    /// The gateway's home is seen read-only with its secrets emptied (an MCP server reads its
    /// working folder there) instead of as an empty folder.
    pub home_readable: bool,
}

/// How the launcher was asked to run: the first stage, the second (restrict and exec), or a
/// probe that restricts itself and reports what was enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    First,
    Second,
    Third,
    Probe,
}

impl Profile {
    /// The program and arguments that run `program args…` contained by `launcher` (the
    /// gateway binary). Every path and argument is an argument of its own, never text that is
    /// parsed again.
    pub fn command(
        &self,
        launcher: &Path,
        program: &str,
        args: &[String],
    ) -> (String, Vec<String>) {
        let mut argv = vec![MARKER.to_owned()];
        argv.extend(self.options());
        argv.push("--".to_owned());
        argv.push(program.to_owned());
        argv.extend(args.iter().cloned());
        (launcher.to_string_lossy().into_owned(), argv)
    }

    /// The program and arguments of a launcher that enforces this profile on itself and
    /// prints what was enforced as one JSON line (`ruleset`: full, partial or none; `abi`;
    /// `rules`), instead of running a command.
    pub fn probe_command(&self, launcher: &Path) -> (String, Vec<String>) {
        let mut argv = vec![MARKER.to_owned(), "--probe".to_owned()];
        argv.extend(self.options());
        (launcher.to_string_lossy().into_owned(), argv)
    }

    /// The options that carry this profile.
    pub(crate) fn options(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |flag: &str, path: &Path| {
            out.push(flag.to_owned());
            out.push(path.to_string_lossy().into_owned());
        };
        if let Some(procs) = &self.cgroup {
            push("--cgroup", procs);
        }
        if let Some(temp) = &self.temp {
            push("--temp", temp);
        }
        push("--home", &self.home);
        for dir in &self.write {
            push("--write", dir);
        }
        for dir in &self.protect {
            push("--protect", dir);
        }
        for file in &self.read {
            push("--read", file);
        }
        for path in &self.programs {
            push("--program", path);
        }
        for path in &self.deny {
            push("--deny", path);
        }
        if let Some(dir) = &self.own_temp {
            push("--own-temp", dir);
        }
        if let Some(port) = self.egress {
            out.push("--egress".to_owned());
            out.push(port.to_string());
        }
        if self.desktop {
            out.push("--desktop".to_owned());
        }
        if self.no_bus {
            out.push("--no-bus".to_owned());
        }
        if self.home_readable {
            out.push("--home-readable".to_owned());
        }
        out
    }

    /// The profile, stage and program (with its arguments) of the launcher's arguments after
    /// [`MARKER`].
    ///
    /// # Errors
    /// A message naming the option that is unknown or lacks its value, or the missing program.
    pub fn parse(args: &[String]) -> Result<(Self, Stage, Vec<String>), ContainError> {
        let mut profile = Self::default();
        let mut stage = Stage::First;
        let mut home = None;
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut value = |name: &str| {
                rest.next()
                    .map(PathBuf::from)
                    .ok_or_else(|| ContainError::NoValue(name.to_owned()))
            };
            match arg.as_str() {
                "--" => break,
                "--stage2" => stage = Stage::Second,
                "--stage3" => stage = Stage::Third,
                "--probe" => stage = Stage::Probe,
                "--desktop" => profile.desktop = true,
                "--no-bus" => profile.no_bus = true,
                "--home-readable" => profile.home_readable = true,
                "--deny" => profile.deny.push(value(arg)?),
                "--own-temp" => profile.own_temp = Some(value(arg)?),
                "--egress" => {
                    let port = value(arg)?;
                    profile.egress =
                        Some(port.to_str().and_then(|p| p.parse().ok()).ok_or_else(|| {
                            ContainError::NoValue("--egress (a port)".to_owned())
                        })?);
                }
                "--cgroup" => profile.cgroup = Some(value(arg)?),
                "--temp" => profile.temp = Some(value(arg)?),
                "--home" => home = Some(value(arg)?),
                "--write" => profile.write.push(value(arg)?),
                "--protect" => profile.protect.push(value(arg)?),
                "--read" => profile.read.push(value(arg)?),
                "--program" => profile.programs.push(value(arg)?),
                other => return Err(ContainError::UnknownOption(other.to_owned())),
            }
        }
        profile.home = home.ok_or(ContainError::NoHome)?;
        let program: Vec<String> = rest.cloned().collect();
        if program.is_empty() && stage != Stage::Probe {
            return Err(ContainError::NoProgram);
        }
        Ok((profile, stage, program))
    }
}

static LAUNCHER: OnceLock<PathBuf> = OnceLock::new();

/// Names the program that understands [`MARKER`] (the gateway binary; its `main` sets it,
/// integration tests set the binary Cargo built). The first call wins.
pub fn set_launcher(path: impl Into<PathBuf>) {
    let _ = LAUNCHER.set(path.into());
}

/// The launcher program, once set.
pub fn launcher() -> Option<&'static Path> {
    LAUNCHER.get().map(PathBuf::as_path)
}

/// Runs the launcher when `args` (the process's arguments) ask for it, and returns its exit
/// code; `None` for every other command line. Call it first in `main`, before any thread or
/// runtime starts.
pub fn main_if_launcher(args: &[std::ffi::OsString]) -> Option<std::process::ExitCode> {
    #[cfg(target_os = "linux")]
    if args.get(1).is_some_and(|a| a == cdp_pipe::MARKER) {
        let args: Vec<String> = args[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return Some(cdp_pipe::exec(&args));
    }
    if args.get(1).is_none_or(|a| a != MARKER) {
        return None;
    }
    let args: Vec<String> = args[2..]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    #[cfg(target_os = "linux")]
    return Some(launcher::main(&args));
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("aai-gateway: the containment launcher runs on Linux only");
        Some(std::process::ExitCode::from(126))
    }
}

/// Which sandbox applies on this machine, for `aai-gateway doctor` and for refusing to run
/// uncontained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The sandbox, e.g. `Landlock ABI 7`; `None` when none can apply here.
    pub sandbox: Option<String>,
    /// What it enforces, or why none can.
    pub detail: String,
}

/// What this machine's kernel can enforce (no process is restricted to find out).
pub fn support() -> Support {
    #[cfg(target_os = "linux")]
    return linux::support();
    #[cfg(target_os = "macos")]
    return Support {
        sandbox: None,
        detail: "the Seatbelt profile is built (aai_contain::seatbelt) but not yet applied by the launcher on macOS".to_owned(),
    };
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    Support {
        sandbox: None,
        detail: "no sandbox is applied on this system yet (a restricted token is planned on Windows, see aai_contain::windows)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Profile {
        Profile {
            write: vec!["/w/a b".into(), "/w/$(id)".into()],
            temp: Some("/tmp".into()),
            home: "/h/.aai".into(),
            protect: vec!["/h/.cache/aai-gateway".into()],
            read: vec!["/h/.aai/run/task-1.mcp.json".into()],
            programs: vec!["/tmp/checkout".into()],
            cgroup: Some("/sys/fs/cgroup/x/cgroup.procs".into()),
            desktop: true,
            no_bus: true,
            deny: vec!["/h/.ssh".into()],
            own_temp: Some("/tmp/aai-sandbox-1".into()),
            egress: Some(3128),
            home_readable: true,
        }
    }

    #[test]
    fn the_command_round_trips_through_the_launchers_parser() {
        let profile = full();
        let args = vec![
            "-c".to_owned(),
            "echo \"$HOME\"; rm -rf /".to_owned(),
            "--".to_owned(),
        ];
        let (program, argv) = profile.command(Path::new("/bin/gw"), "sh", &args);
        assert_eq!(program, "/bin/gw");
        assert_eq!(argv[0], MARKER);
        let (parsed, stage, rest) = Profile::parse(&argv[1..]).expect("parses");
        assert_eq!(parsed, profile);
        assert_eq!(stage, Stage::First);
        // The program's own `--` and arguments are passed through untouched.
        assert_eq!(rest, ["sh", "-c", "echo \"$HOME\"; rm -rf /", "--"]);
    }

    #[test]
    fn a_command_line_the_launcher_cannot_read_is_refused() {
        let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert!(
            Profile::parse(&s(&["--home", "/h", "--"])).is_err(),
            "no program"
        );
        assert!(
            Profile::parse(&s(&["--write", "/w", "--", "true"])).is_err(),
            "no home"
        );
        assert!(
            Profile::parse(&s(&["--home"])).is_err(),
            "a flag without value"
        );
        assert!(Profile::parse(&s(&["--bogus", "--home", "/h", "--", "true"])).is_err());
        let (_, stage, _) = Profile::parse(&s(&["--probe", "--home", "/h"])).expect("probe");
        assert_eq!(stage, Stage::Probe);
    }

    #[test]
    fn only_the_marker_makes_a_launcher() {
        let os = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert!(main_if_launcher(&os(&["aai-gateway"])).is_none());
        assert!(main_if_launcher(&os(&["aai-gateway", "serve", "__contain"])).is_none());
    }
}
