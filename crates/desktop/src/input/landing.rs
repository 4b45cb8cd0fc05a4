//! Where a call's input lands, and what that makes it: keys typed into a terminal emulator's
//! window are a shell command, and the gateway's own windows — its dashboard, its consent
//! dialogs — take no input from the agent at all.
//!
//! **A terminal window** is recognised two ways, either one enough:
//! - by name: its `WM_CLASS` class or instance is a known terminal emulator ([`TERMINALS`]:
//!   xterm, st, urxvt, lxterminal, gnome-terminal, konsole, kitty, alacritty, …);
//! - by what it does: its process (as the X server knows it, see `X11::owner_pid`: a window's
//!   `_NET_WM_PID` is set by whoever wants) or one of that process's descendants holds the
//!   master side of a pseudo-terminal open (`/dev/ptmx` among its open files). This finds
//!   terminals renamed with `-class`/`-name`, terminals not on the list, and apps with a
//!   terminal inside (an IDE's panel), where typed text may reach a shell just the same.
//!
//! **The gateway's own windows**: a title that says `aai-gateway` / `AAI Gateway` (the consent
//! dialog's `--title`, the dashboard page's `<title>`, the sign-in page's), or a zenity or
//! kdialog window whose process this gateway started.

use std::collections::HashMap;
use std::path::Path;

use crate::desktop::Window;

/// Terminal emulators by `WM_CLASS` class or instance, lower case.
pub const TERMINALS: &[&str] = &[
    "xterm",
    "uxterm",
    "st",
    "st-256color",
    "stterm",
    "urxvt",
    "rxvt",
    "rxvt-unicode",
    "lxterminal",
    "gnome-terminal",
    "gnome-terminal-server",
    "org.gnome.terminal",
    "org.gnome.console",
    "kgx",
    "org.gnome.ptyxis",
    "ptyxis",
    "konsole",
    "org.kde.konsole",
    "xfce4-terminal",
    "mate-terminal",
    "terminator",
    "tilix",
    "com.gexperts.tilix",
    "alacritty",
    "kitty",
    "wezterm",
    "org.wezfurlong.wezterm",
    "foot",
    "sakura",
    "terminology",
    "qterminal",
    "deepin-terminal",
    "guake",
    "tilda",
    "yakuake",
    "cool-retro-term",
    "eterm",
    "aterm",
    "mlterm",
    "x-terminal-emulator",
    "ghostty",
    "com.mitchellh.ghostty",
    "contour",
    "rio",
    "blackbox",
    "hyper",
    "tabby",
];

/// Interpreter and REPL windows by `WM_CLASS` class or instance, lower case: what is typed
/// there runs as code, so they are judged like terminals.
pub const REPLS: &[&str] = &[
    "idle",
    "idle3",
    "jupyter-qtconsole",
    "ipython",
    "bpython",
    "thonny",
    "spyder",
    "drracket",
    "pgadmin4",
    "sqlitebrowser",
    "dbeaver",
];

/// What a window is to the input tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// A terminal emulator's window: what is typed there runs as a shell command — inside
    /// the sandbox when the terminal itself runs under the gateway's sandbox launcher
    /// (`contained`), else with the user's full rights.
    Terminal {
        window: u32,
        label: String,
        contained: bool,
    },
    /// The gateway's own dashboard or consent dialog: no input reaches it.
    Gate { label: String },
    /// Any other window, or none.
    Elsewhere,
}

/// A window as the agent may see it named: its title and class.
fn label(window: &Window) -> String {
    format!("{:?} ({})", window.title, window.class)
}

/// What `window` is (none: input goes nowhere in particular).
pub fn landing(window: Option<&Window>) -> Landing {
    let Some(window) = window else {
        return Landing::Elsewhere;
    };
    if is_gate(window) {
        return Landing::Gate {
            label: label(window),
        };
    }
    if is_terminal(window) {
        return Landing::Terminal {
            window: window.id,
            label: label(window),
            contained: window.pid.is_some_and(runs_contained),
        };
    }
    Landing::Elsewhere
}

/// Whether `window` is one of the gateway's own: its title names the gateway, or it is a
/// dialog program this gateway process started.
pub fn is_gate(window: &Window) -> bool {
    if aai_executor::atspi::names_the_gateway(&window.title) {
        return true;
    }
    let dialog = ["zenity", "kdialog"]
        .iter()
        .any(|d| window.class.eq_ignore_ascii_case(d) || window.instance.eq_ignore_ascii_case(d));
    dialog && window.pid.and_then(parent_of) == Some(std::process::id())
}

/// Whether `window` is a terminal emulator's (see the module's notes).
pub fn is_terminal(window: &Window) -> bool {
    let named = [&window.class, &window.instance].iter().any(|n| {
        let n = n.to_lowercase();
        TERMINALS.contains(&n.as_str()) || REPLS.contains(&n.as_str()) || n.starts_with("idle-")
    });
    // IDLE's shell window, whatever its class: "IDLE Shell 3.11.2", "Python 3.11.2 Shell".
    let title = window.title.to_lowercase();
    let repl_title = title.starts_with("idle shell")
        || (title.starts_with("python ") && title.ends_with(" shell"));
    named || repl_title || window.pid.is_some_and(holds_a_terminal)
}

/// Whether `pid` runs under the gateway's sandbox launcher: one of its ancestors is an
/// `… __contain …` process. A process cannot choose its ancestors, so a terminal the user
/// opened never passes for a contained one.
fn runs_contained(pid: u32) -> bool {
    let mut at = pid;
    for _ in 0..64 {
        let launcher = std::fs::read(format!("/proc/{at}/cmdline")).is_ok_and(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .nth(1)
                .is_some_and(|arg| arg == aai_contain::MARKER.as_bytes())
        });
        if launcher {
            return true;
        }
        match parent_of(at) {
            Some(parent) if parent > 1 => at = parent,
            _ => return false,
        }
    }
    false
}

/// A process's parent, from `/proc/PID/stat`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the fields after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// At most this many processes of a window's tree are looked at.
const MAX_TREE: usize = 512;

/// Whether `pid` or a descendant has a pseudo-terminal's master side open.
fn holds_a_terminal(pid: u32) -> bool {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(parent) = parent_of(child) {
                children.entry(parent).or_default().push(child);
            }
        }
    }
    let mut queue = vec![pid];
    let mut seen = 0;
    while let Some(next) = queue.pop() {
        seen += 1;
        if seen > MAX_TREE {
            break;
        }
        if opens_ptmx(next) {
            return true;
        }
        if let Some(kids) = children.get(&next) {
            queue.extend(kids);
        }
    }
    false
}

/// Whether the process has `/dev/ptmx` (the pseudo-terminal multiplexer) open.
fn opens_ptmx(pid: u32) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            target == Path::new("/dev/ptmx") || target == Path::new("/dev/pts/ptmx")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desktop::Rect;

    fn window(title: &str, class: &str, pid: Option<u32>) -> Window {
        Window {
            id: 7,
            title: title.into(),
            class: class.into(),
            instance: class.to_lowercase(),
            pid,
            bounds: Rect::default(),
            frame: Rect::default(),
            focused: true,
            minimized: false,
        }
    }

    #[test]
    fn the_gateways_windows_by_title() {
        for title in [
            "AAI Gateway",
            "aai-gateway - Chromium",
            "aai-gateway",
            "Approve? — AAI  gateway",
        ] {
            assert!(is_gate(&window(title, "Whatever", None)), "{title}");
        }
        for title in ["Gateway settings", "aai notes", "README.md"] {
            assert!(!is_gate(&window(title, "Gedit", None)), "{title}");
        }
    }

    #[test]
    fn terminals_by_class_and_by_the_pty_they_hold() {
        assert!(is_terminal(&window("bash", "XTerm", None)));
        assert!(is_terminal(&window("x", "st-256color", None)));
        assert!(!is_terminal(&window("notes", "Gedit", None)));
        // Interpreter and REPL windows are judged like terminals.
        assert!(is_terminal(&window("IDLE Shell 3.11.2", "Toplevel", None)));
        assert!(is_terminal(&window("Python 3.11.2 Shell", "Tk", None)));
        assert!(is_terminal(&window("untitled", "Idle", None)));
        assert!(is_terminal(&window("Jupyter", "jupyter-qtconsole", None)));
        // A process with no pseudo-terminal is no terminal whatever its name; one that opens
        // /dev/ptmx is, whatever its name.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        assert!(!is_terminal(&window(
            "renamed",
            "Notes",
            Some(sleeper.id())
        )));
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let _ptmx = std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/ptmx")
            .expect("open /dev/ptmx");
        let me = std::process::id();
        assert!(is_terminal(&window("renamed", "Notes", Some(me))));
    }
}
