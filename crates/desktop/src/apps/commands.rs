//! `app_launch` starts applications, not commands. A launch whose program is a shell, an
//! interpreter, a wrapper that runs other programs or a command-line tool (no desktop entry
//! with a window), or whose arguments can make an application run code, is judged by the gate
//! as `bash_execute` of that command line: the same classifier, risk and grants.
//!
//! - **Programs that run code**: shells, interpreters and wrappers ([`RUNS_CODE`]), by the
//!   name of the file that runs (`/usr/bin/env`, `python3.11` and `busybox` included).
//! - **Command-line tools**: a program that no desktop entry starts in a window — an
//!   application's entry (`Type=Application`, not `Terminal=true`) whose `Exec` program is the
//!   same file — is a command (`rm`, `/usr/bin/rm`, a script anywhere).
//! - **Arguments that run code**: any option (`--renderer-cmd-prefix=…`, `--eval`, `-e`) and
//!   any argument that is neither a plain path nor an http(s) or file URL (`macro:///…`,
//!   `+cmd`); a terminal emulator given any argument at all runs it (`xterm -e …`, `st rm …`),
//!   and is judged as the command it runs when a `-e`/`-x`/`--`/`--command` names one.
//!
//! Launching `xterm` or `gedit notes.txt` plainly stays what it was.

use std::path::{Path, PathBuf};

/// Programs that run the code or the programs they are given.
pub const RUNS_CODE: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "ash",
    "busybox",
    "env",
    "exec",
    "xargs",
    "sudo",
    "su",
    "doas",
    "pkexec",
    "runuser",
    "setsid",
    "nohup",
    "nice",
    "ionice",
    "timeout",
    "time",
    "stdbuf",
    "chroot",
    "unshare",
    "nsenter",
    "flock",
    "watch",
    "script",
    "expect",
    "systemd-run",
    "dbus-launch",
    "xdg-open",
    "gio",
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "perl",
    "ruby",
    "irb",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "Rscript",
    "R",
    "julia",
    "awk",
    "gawk",
    "mawk",
    "sed",
    "find",
    "make",
    "osascript",
    "pwsh",
    "powershell",
    "java",
    "jshell",
    "gdb",
    "lldb",
    "strace",
    "ltrace",
    "valgrind",
    "ssh",
    "socat",
    "nc",
    "ncat",
    "tmux",
    "screen",
];

/// What a launch is, when it is a command rather than an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsCommand {
    /// The shell text it is judged as.
    pub command: String,
    /// Why, for the user's question.
    pub why: String,
}

/// The program's name as the judgement sees it: the file name, without a version suffix
/// (`python3.11` → `python3`).
fn program_name(program: &str) -> String {
    let base = Path::new(program)
        .file_name()
        .map_or_else(|| program.to_owned(), |b| b.to_string_lossy().into_owned());
    let trimmed = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if trimmed.len() < base.len() && RUNS_CODE.contains(&trimmed) {
        trimmed.to_owned()
    } else {
        base
    }
}

/// `argv` as shell text: words that need quoting in single quotes.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./=:,+@%-".contains(c));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The file a program name runs: a path as is, a bare name found on PATH; symlinks resolved.
fn located(program: &str) -> Option<PathBuf> {
    let path = if program.contains('/') {
        PathBuf::from(program)
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.join(program))
            .find(|p| p.is_file())?
    };
    std::fs::canonicalize(path).ok()
}

/// One desktop entry's facts for the judgement.
struct Entry {
    program: String,
    terminal: bool,
    terminal_emulator: bool,
    application: bool,
}

fn read_entry(path: &Path) -> Option<Entry> {
    let fields = super::entry_fields(path)?;
    let field = |key: &str| fields.get(key).map(|v| v.trim());
    let exec = fields.get("Exec");
    let terminal = field("Terminal") == Some("true");
    let emulator =
        field("Categories").is_some_and(|c| c.split(';').any(|c| c == "TerminalEmulator"));
    let application = field("Type").is_none_or(|t| t == "Application");
    let program = super::exec_argv(exec?).into_iter().next()?;
    Some(Entry {
        program,
        terminal,
        terminal_emulator: emulator,
        application,
    })
}

/// The desktop entries whose program is the file `program` runs.
fn entries_for(program: &Path) -> Vec<Entry> {
    super::application_dirs()
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "desktop"))
        .filter_map(|p| read_entry(&p))
        .filter(|entry| located(&entry.program).is_some_and(|p| p == program))
        .collect()
}

/// Options after which a terminal emulator's arguments are the command it runs.
const RUN_MARKERS: &[&str] = &["-e", "-x", "--", "--command", "--execute"];

/// The command a terminal emulator's arguments make it run, when a marker names one: one
/// argument is shell text (terminals hand it to a shell), several are argv.
fn terminal_command(args: &[String]) -> Option<String> {
    for (i, arg) in args.iter().enumerate() {
        if let Some(inline) = arg
            .strip_prefix("--command=")
            .or_else(|| arg.strip_prefix("--execute="))
        {
            return Some(inline.to_owned());
        }
        if RUN_MARKERS.contains(&arg.as_str()) {
            let rest = &args[i + 1..];
            return match rest {
                [] => None,
                [one] => Some(one.clone()),
                many => Some(shell_join(many)),
            };
        }
    }
    None
}

/// Whether an argument is plain data for an application: a path or an http(s)/file URL.
fn plain_argument(arg: &str) -> bool {
    if arg.starts_with(['-', '+']) {
        return false;
    }
    match arg.split_once(':') {
        None => true,
        Some((scheme, _)) => {
            matches!(
                scheme.to_ascii_lowercase().as_str(),
                "http" | "https" | "file"
            ) || Path::new(arg).exists()
        }
    }
}

/// What the launch of `argv` (the program and every argument) is judged as, when it is a
/// command rather than an application.
/// Whether `argv` starts a desktop program (a desktop entry starts its file in a window, and
/// it is no shell or interpreter): it gets the display and the session bus in its box. Every
/// other launch runs in exactly the terminal's box.
pub fn windowed(argv: &[String]) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    let Some(file) = located(program) else {
        return false;
    };
    let runs_code = RUNS_CODE.contains(&program_name(program).as_str())
        || RUNS_CODE.contains(&program_name(&file.to_string_lossy()).as_str());
    !runs_code
        && entries_for(&file)
            .iter()
            .any(|e| e.application && !e.terminal)
}

/// Whether `argv` starts a terminal emulator: a desktop program whose window runs a shell, so
/// it gets the display but not the session bus.
pub fn terminal_emulator(argv: &[String]) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    crate::input::landing::TERMINALS.contains(&program_name(program).to_lowercase().as_str())
        || located(program)
            .is_some_and(|file| entries_for(&file).iter().any(|e| e.terminal_emulator))
}

pub fn as_command(argv: &[String]) -> Option<AsCommand> {
    let (program, args) = argv.split_first()?;
    let name = program_name(program);
    let whole = shell_join(argv);
    let command = |why: String| {
        Some(AsCommand {
            command: whole.clone(),
            why,
        })
    };
    // The file's own name counts too: a link named `editor` to `/bin/sh` is a shell.
    let file = located(program);
    let file_name = file.as_deref().map(|f| program_name(&f.to_string_lossy()));
    if RUNS_CODE.contains(&name.as_str())
        || file_name.as_deref().is_some_and(|n| RUNS_CODE.contains(&n))
    {
        return command(format!(
            "{name} runs the commands or code it is given: launching it is judged as the shell command `{whole}`."
        ));
    }
    let Some(file) = file else {
        return command(format!(
            "{program} is not an installed application: launching it is judged as the shell command `{whole}`."
        ));
    };
    let entries = entries_for(&file);
    let windowed = entries.iter().any(|e| e.application && !e.terminal);
    if !windowed {
        return command(format!(
            "{name} is a command-line program (no desktop entry starts it in a window): launching it is judged as the shell command `{whole}`."
        ));
    }
    let emulator = entries.iter().any(|e| e.terminal_emulator)
        || crate::input::landing::TERMINALS.contains(&name.to_lowercase().as_str());
    if emulator && !args.is_empty() {
        let ran = terminal_command(args).unwrap_or_else(|| whole.clone());
        return Some(AsCommand {
            why: format!(
                "{name} is a terminal emulator, and its arguments make it run a command: launching it is judged as the shell command `{ran}`."
            ),
            command: ran,
        });
    }
    if let Some(arg) = args.iter().find(|a| !plain_argument(a)) {
        return command(format!(
            "the argument {arg:?} can make {name} run code: launching it is judged as the shell command `{whole}`."
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn shells_interpreters_and_tools_are_commands() {
        for (words, judged) in [
            (&["sh", "-c", "rm -rf /tmp/x"][..], "sh -c 'rm -rf /tmp/x'"),
            (&["rm", "-rf", "/tmp/x"], "rm -rf /tmp/x"),
            (&["/usr/bin/rm", "-rf", "/tmp/x"], "/usr/bin/rm -rf /tmp/x"),
            (&["env", "rm", "-rf", "/tmp/x"], "env rm -rf /tmp/x"),
            (&["python3", "-c", "import os"], "python3 -c 'import os'"),
            (&["/usr/bin/python3.11", "x.py"], "/usr/bin/python3.11 x.py"),
            (&["/tmp/nowhere/tool"], "/tmp/nowhere/tool"),
        ] {
            let found = as_command(&argv(words)).unwrap_or_else(|| panic!("{words:?}"));
            assert_eq!(found.command, judged, "{words:?}");
        }
    }

    /// Installed applications (xterm, st and chromium, which scripts/test.sh installs with
    /// their desktop entries) start plainly; arguments that make them run code are commands.
    #[test]
    fn applications_stay_applications_unless_told_to_run_code() {
        for words in [
            &["xterm"][..],
            &["st"],
            &["/usr/bin/xterm"],
            &["chromium", "https://example.com/"],
        ] {
            assert_eq!(as_command(&argv(words)), None, "{words:?}");
        }
        for (words, judged) in [
            (&["xterm", "-e", "rm -rf /tmp/x"][..], "rm -rf /tmp/x"),
            (&["st", "-e", "rm", "-rf", "/tmp/x"], "rm -rf /tmp/x"),
            (&["st", "rm", "-rf", "/tmp/x"], "st rm -rf /tmp/x"),
            (
                &["chromium", "--renderer-cmd-prefix=touch /tmp/x"],
                "chromium '--renderer-cmd-prefix=touch /tmp/x'",
            ),
        ] {
            let found = as_command(&argv(words)).unwrap_or_else(|| panic!("{words:?}"));
            assert_eq!(found.command, judged, "{words:?}");
        }
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(
            shell_join(&argv(&["a b", "it's", "", "--x=1"])),
            r"'a b' 'it'\''s' '' --x=1"
        );
    }

    #[test]
    fn terminal_arguments_name_the_command_they_run() {
        assert_eq!(
            terminal_command(&argv(&["-e", "rm -rf /tmp/x"])).as_deref(),
            Some("rm -rf /tmp/x")
        );
        assert_eq!(
            terminal_command(&argv(&["-title", "t", "-e", "rm", "-rf", "/tmp/x"])).as_deref(),
            Some("rm -rf /tmp/x")
        );
        assert_eq!(
            terminal_command(&argv(&["--command=rm -rf /tmp/x"])).as_deref(),
            Some("rm -rf /tmp/x")
        );
        assert_eq!(terminal_command(&argv(&["-title", "t"])), None);
    }

    #[test]
    fn plain_arguments() {
        for arg in [
            "notes.txt",
            "/tmp/a b.txt",
            "https://example.com/x",
            "file:///tmp/x",
        ] {
            assert!(plain_argument(arg), "{arg}");
        }
        for arg in [
            "--renderer-cmd-prefix=sh",
            "-e",
            "+:!rm",
            "macro:///x",
            "javascript:1",
        ] {
            assert!(!plain_argument(arg), "{arg}");
        }
    }
}
