//! What the agent starts stays contained (issue 26), with real processes: destructive
//! commands of many shapes against canary folders outside the allowed ones, the gateway's home
//! and secrets, escapes from the process tree and the cgroup, and work outside the sandbox
//! that the user is asked about every time.
//!
//! The canaries live under Cargo's target folder, not `/tmp`: the temporary folder is one a
//! contained command may write by design.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aai_descriptor::AaiError;
use aai_engine::config::Config;
use aai_engine::consent::{Answer, Asker, Question, Unanswered};
use aai_engine::pipeline::Caller;
use serde_json::{Value, json};

/// The emergency stop kills every descendant of this process: the tests of this binary run
/// one at a time so one's stop cannot end another's shell.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SECRET: &str = "s3cr3t-token-value";

mod common;

use common::CallAsking as _;
use common::TestGateway as Setup;

/// `project` and `allowed` are allowed; the gateway's home lies inside `allowed` (so the
/// home wins over the allowed folders), `outside` holds the canaries.
fn setup(policy: Value) -> Setup {
    aai_contain::set_launcher(env!("CARGO_BIN_EXE_aai-gateway"));
    let base = tempfile::Builder::new()
        .prefix("containment-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("base");
    let root = base.path();
    let home = root.join("allowed/aai-home");
    for dir in [
        "project/empty",
        "allowed/work",
        "outside",
        "allowed/aai-home/run",
    ] {
        std::fs::create_dir_all(root.join(dir)).expect("dir");
    }
    std::fs::create_dir_all(home.join("tokens")).expect("tokens");
    std::fs::write(home.join("config.json"), "{\"original\": true}").expect("config");
    std::fs::write(home.join("run/token"), SECRET).expect("token");
    std::fs::write(home.join("tokens/app.json"), SECRET).expect("tokens");
    std::fs::write(home.join("ca.key"), SECRET).expect("key");
    let config: Config = serde_json::from_value(json!({
        "policy": policy,
        "local": {"sandbox": {"allowed_directories": [root.join("project"), root.join("allowed")]},
                  "writable_caches": []},
        "web": {"cache_dir": root.join("web-cache")}
    }))
    .expect("config");
    Setup::scanning(base, &home, config)
}

/// Every call runs unasked: only containment stands between a command and the disk.
fn unguarded() -> Setup {
    setup(
        json!({"default_profile": "p", "profiles": {"p": {"preset": "full_auto",
        "risk_policies": {"high": "auto_approve", "critical": "auto_approve"}}}}),
    )
}

/// What the containment tests do with their gateway.
trait Contained {
    async fn bash(&self, command: &str) -> Result<Value, AaiError>;
    fn canary(&self, name: &str) -> String;
    fn assert_canary(&self, name: &str, how: &str);
}

/// Whether `path` lies in the system's temporary folder, which the box replaces with its own
/// (so a contained command does not see it at all).
fn hidden_by_the_private_temp(path: &str) -> bool {
    let temp = std::env::temp_dir();
    let temp = temp.canonicalize().unwrap_or(temp);
    std::path::Path::new(path).starts_with(&temp)
        || ["/tmp", "/var/tmp", "/dev/shm"]
            .iter()
            .any(|t| std::path::Path::new(path).starts_with(t))
}

impl Contained for Setup {
    async fn bash(&self, command: &str) -> Result<Value, AaiError> {
        self.call_as(
            "agent",
            "local.terminal",
            "bash_execute",
            json!({"command": command, "timeout_ms": 20_000}),
        )
        .await
    }

    /// A canary folder outside the allowed ones: a file and one deeper down.
    fn canary(&self, name: &str) -> String {
        let dir = self.path(&format!("outside/{name}"));
        std::fs::create_dir_all(dir.join("sub")).expect("canary");
        std::fs::write(dir.join("file.txt"), format!("keep {name}\n")).expect("canary");
        std::fs::write(dir.join("sub/deep.txt"), "keep\n").expect("canary");
        dir.display().to_string()
    }

    fn assert_canary(&self, name: &str, how: &str) {
        let dir = self.path(&format!("outside/{name}"));
        let file = dir.join("file.txt");
        let meta = std::fs::symlink_metadata(&file);
        assert!(
            meta.as_ref().is_ok_and(std::fs::Metadata::is_file),
            "{how}: {} is gone or replaced ({meta:?})",
            file.display()
        );
        assert_eq!(
            std::fs::read_to_string(&file).ok().as_deref(),
            Some(format!("keep {name}\n").as_str()),
            "{how}: {} was changed",
            file.display()
        );
        assert!(
            dir.join("sub/deep.txt").is_file(),
            "{how}: deep.txt is gone"
        );
    }
}

fn alive(pid: u32) -> bool {
    aai_contain::procs::alive(pid)
}

/// Waits (bounded) for a pid written to `file` by a command.
async fn read_pid(file: &Path) -> u32 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < until, "no pid in {}", file.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn gone_within(pid: u32, within: Duration) -> bool {
    let until = Instant::now() + within;
    while alive(pid) {
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destructive_commands_of_every_shape_leave_every_canary_outside_the_allowed_folders() {
    let _serial = SERIAL.lock().await;
    let s = unguarded();
    let project = s.p("project");
    let home = s.p("allowed/aai-home");
    let cases: Vec<(&str, String)> = vec![
        (
            "python",
            format!(
                "python3 -c 'import shutil; shutil.rmtree(\"{}\")'",
                s.canary("python")
            ),
        ),
        (
            "perl",
            format!(
                "perl -e 'unlink \"{}/file.txt\" or die \"unlink: $!\"'",
                s.canary("perl")
            ),
        ),
        ("find", format!("find {} -delete", s.canary("find"))),
        (
            "xargs",
            format!("find {} -type f | xargs rm -f", s.canary("xargs")),
        ),
        (
            "rsync",
            format!("rsync -a --delete {project}/empty/ {}/", s.canary("rsync")),
        ),
        ("truncate", format!(": > {}/file.txt", s.canary("truncate"))),
        (
            "truncate-s",
            format!("truncate -s 0 {}/file.txt", s.canary("truncate-s")),
        ),
        (
            "sed",
            format!("sed -i 's/keep/gone/' {}/file.txt", s.canary("sed")),
        ),
        (
            "tar",
            format!(
                "tar --remove-files -cf {project}/loot.tar {}",
                s.canary("tar")
            ),
        ),
        (
            "mv",
            format!("mv {}/file.txt {project}/moved.txt", s.canary("mv")),
        ),
        (
            "ln",
            format!("ln -sf /etc/hostname {}/file.txt", s.canary("ln")),
        ),
        (
            "cp",
            format!("cp /etc/hostname {}/file.txt", s.canary("cp")),
        ),
        (
            "dd",
            format!(
                "dd if=/dev/zero of={}/file.txt bs=1 count=1 conv=notrunc",
                s.canary("dd")
            ),
        ),
        ("rm", format!("rm -rf {}", s.canary("rm"))),
        // A command name built at run time, which no pattern list sees.
        (
            "split",
            format!("c=r; c=${{c}}m; $c -r -f {}", s.canary("split")),
        ),
        (
            "eval",
            format!("eval \"$(printf '%s' 'rm -rf' ' {}')\"", s.canary("eval")),
        ),
        (
            "node",
            format!(
                "node -e 'require(\"fs\").rmSync(\"{}\", {{recursive: true, force: true}})'",
                s.canary("node")
            ),
        ),
    ];
    for (name, command) in &cases {
        let out = s
            .bash(command)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Under the system's temporary folder (a checkout in /tmp) the canary is not even in
        // the box's view, whose /tmp is its own: there a command finds nothing to delete and
        // may succeed. Elsewhere it is refused. Either way the canary survives (below).
        if !hidden_by_the_private_temp(&s.canary(name)) {
            assert_ne!(out["exit_code"], 0, "{name}: `{command}` succeeded: {out}");
        }
    }
    for (name, _) in &cases {
        s.assert_canary(name, name);
    }

    let mode = |s: &Setup, p: &str| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(s.path(p)).map_or(0, |m| m.permissions().mode() & 0o7777)
    };
    let modes = (
        mode(&s, "allowed/aai-home"),
        mode(&s, "allowed/aai-home/run"),
    );
    // The gateway's home: not in the command's view at all (an empty read-only folder),
    // whatever the allowed folders say; judged by what is on disk afterwards.
    for command in [
        format!("echo '{{\"policy\": \"auto\"}}' > {home}/config.json"),
        format!("echo x >> {home}/config.json"),
        format!("rm -f {home}/config.json"),
        format!("mv {home}/config.json {home}/old.json"),
        format!("touch {home}/new.json"),
        format!("mkdir {home}/extra"),
        format!("chmod 000 {home}; chmod 500 {home}/run"),
    ] {
        s.bash(&command).await.expect("ran");
    }
    assert_eq!(
        std::fs::read_to_string(s.path("allowed/aai-home/config.json"))
            .ok()
            .as_deref(),
        Some("{\"original\": true}")
    );
    assert!(!s.path("allowed/aai-home/new.json").exists());
    assert!(!s.path("allowed/aai-home/extra").exists());
    for secret in ["run/token", "tokens/app.json", "ca.key", "data.db"] {
        let out = s.bash(&format!("cat {home}/{secret}")).await.expect("ran");
        assert_ne!(out["exit_code"], 0, "{secret}: {out}");
        assert!(
            !out.to_string().contains(SECRET),
            "{secret} was read: {out}"
        );
    }
    // Not through the gateway's own process either: its open files (the database), its
    // folders. (Its environment is the command's own anyway: a shell inherits it.)
    let me = std::process::id();
    for command in [
        format!("ls -l /proc/{me}/fd/"),
        format!("cat /proc/{me}/cwd/config.json"),
        format!("readlink /proc/{me}/root"),
    ] {
        let out = s.bash(&command).await.expect("ran");
        assert_ne!(out["exit_code"], 0, "`{command}`: {out}");
    }
    // The system stays readable; the home's config is not there.
    let out = s
        .bash(&format!(
            "cat /etc/hostname >/dev/null && echo system; ls -A {home} | wc -l; cat {home}/config.json"
        ))
        .await
        .expect("ran");
    assert_eq!(out["stdout"], "system\n0", "{out}");
    assert_eq!(
        (
            mode(&s, "allowed/aai-home"),
            mode(&s, "allowed/aai-home/run")
        ),
        modes,
        "chmod reached the home or its run folder"
    );

    // Benign work inside the allowed folders works: new files, folders, renames, a temp file.
    let out = s
        .bash(&format!(
            "set -e; echo benign > {project}/benign.txt; mkdir -p {project}/a/b; mv {project}/benign.txt {project}/a/b/; \
             echo deep > {}/note.txt; t=$(mktemp); echo tmp > \"$t\"; cat \"$t\"; rm \"$t\"",
            s.p("allowed/work")
        ))
        .await
        .expect("ran");
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(out["stdout"], "tmp");
    assert_eq!(
        std::fs::read_to_string(s.path("project/a/b/benign.txt"))
            .ok()
            .as_deref(),
        Some("benign\n")
    );
    assert!(s.path("allowed/work/note.txt").is_file());
}

/// Nothing inside can signal the launcher that holds its tree, or move out of its cgroup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_kill_its_launcher_or_leave_its_cgroup() {
    let _serial = SERIAL.lock().await;
    let s = unguarded();
    let out = s.bash("kill -KILL $PPID").await.expect("ran");
    assert_ne!(out["exit_code"], 0, "{out}");
    assert!(
        out["stderr"]
            .as_str()
            .is_some_and(|e| e.contains("not permitted")),
        "{out}"
    );
    let escape = "cg=$(sed -n 's/^0:://p' /proc/self/cgroup); \
        mnt=$(awk '$9 == \"cgroup2\" {print $5; exit}' /proc/self/mountinfo); \
        echo $$ > \"$mnt$(dirname \"$cg\")/cgroup.procs\"; echo \"status $?\"; sed -n 's/^0:://p' /proc/self/cgroup";
    let before = s
        .bash("sed -n 's/^0:://p' /proc/self/cgroup")
        .await
        .expect("ran");
    let out = s.bash(escape).await.expect("ran");
    let stdout = out["stdout"].as_str().unwrap_or_default();
    assert!(!stdout.contains("status 0"), "the write succeeded: {out}");
    assert_eq!(
        stdout.lines().last(),
        before["stdout"].as_str(),
        "the shell is where it was: {out}"
    );
    if aai_executor::cgroup::available() {
        assert!(stdout.contains("aai-call-"), "in its call's group: {out}");
    }
}

/// A `setsid env -i` double fork leaves the process group, the session, the environment tag
/// and (re-parented) the gateway's tree — but not the launcher, a subreaper: the emergency
/// stop kills it, with or without cgroups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_forked_escapee_dies_with_the_stop() {
    let _serial = SERIAL.lock().await;
    let s = unguarded();
    let pidfile = s.path("project/escapee");
    let out = s
        .bash(&format!(
            "setsid env -i /bin/sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > {}' </dev/null >/dev/null 2>&1 &",
            pidfile.display()
        ))
        .await
        .expect("ran");
    assert_eq!(out["exit_code"], 0, "{out}");
    let pid = read_pid(&pidfile).await;
    assert!(alive(pid));
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&environ).contains(aai_executor::process::TAG_VAR),
        "the escapee dropped the gateway's tag"
    );
    let stopped = s.gateway.emergency_stop("test").await;
    assert!(
        gone_within(pid, Duration::from_secs(5)).await,
        "the escapee outlived the stop: {stopped}"
    );

    // Without a cgroup: the launcher alone holds the escapee, and the stop's process-tree
    // pass kills it (the launcher last).
    let pidfile = s.path("project/escapee-2");
    let mut launcher = std::process::Command::new(env!("CARGO_BIN_EXE_aai-gateway"))
        .args([
            "__contain",
            "--home",
            &s.p("allowed/aai-home"),
            "--write",
            &s.p("project"),
            "--",
            "/bin/sh",
            "-c",
            &format!(
                "setsid env -i /bin/sh -c 'sleep 1000 & echo $! > {}' & sleep 1000",
                pidfile.display()
            ),
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("launcher");
    let escapee = read_pid(&pidfile).await;
    // Re-parented to the launcher's second stage (the subreaper nearest to it), a child of
    // the launcher.
    let parent = aai_contain::procs::stat(escapee).map(|(_, ppid)| ppid);
    let grandparent = parent.and_then(|p| aai_contain::procs::stat(p).map(|(_, ppid)| ppid));
    assert_eq!(
        grandparent,
        Some(launcher.id()),
        "re-parented to the launcher"
    );
    assert!(
        parent.is_some_and(|p| aai_contain::procs::is_launcher(
            p,
            Path::new(env!("CARGO_BIN_EXE_aai-gateway"))
        )),
        "{parent:?}"
    );
    let killed = tokio::task::spawn_blocking(aai_engine::pipeline::stop::kill_everything)
        .await
        .expect("stop");
    assert!(killed >= 2, "{killed}");
    assert!(
        gone_within(escapee, Duration::from_secs(5)).await,
        "escapee alive"
    );
    let _ = launcher.wait();
}

/// Answers every question with one answer and keeps the questions.
struct Answering {
    answer: Answer,
    asked: std::sync::Mutex<Vec<Question>>,
}

impl Asker for Answering {
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> aai_executor::BoxFuture<'a, Result<Answer, Unanswered>> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(question.clone());
        }
        let answer = self.answer;
        Box::pin(async move { Ok(answer) })
    }
}

/// `outside_sandbox` is asked every time, shown as such, never remembered, and full_auto does
/// not let it through; approved, it really runs outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_outside_the_sandbox_is_asked_every_time_and_never_granted() {
    let _serial = SERIAL.lock().await;
    let s = unguarded();
    let target = s.path("outside/made-outside.txt");
    let args = json!({"command": format!("echo out > {}", target.display()),
        "outside_sandbox": true, "reason": "write the release notes outside the project"});
    let caller = Caller {
        session: Some("s".into()),
        ..Caller::named("agent")
    };
    // No one to ask: refused although the profile auto-approves everything.
    let refused = s
        .gateway
        .exec_asking(&caller, "local.terminal", "bash_execute", &args, None)
        .await
        .expect_err("not asked, not run");
    assert!(!target.exists(), "{}", refused.message);

    // The user answers "always allow this app": it runs once, and nothing is remembered.
    let asker = Answering {
        answer: Answer::AlwaysApp,
        asked: std::sync::Mutex::default(),
    };
    let out = s
        .gateway
        .exec_asking(
            &caller,
            "local.terminal",
            "bash_execute",
            &args,
            Some(&asker),
        )
        .await
        .expect("approved");
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(out["outside_sandbox"], true);
    assert!(target.is_file(), "it ran outside the sandbox");
    let question = asker.asked.lock().expect("asked")[0].clone();
    assert!(question.once_only, "only Deny and Allow once are offered");
    let why = question.why.clone().unwrap_or_default();
    assert!(
        why.contains("OUTSIDE the sandbox") && why.contains("release notes"),
        "{why}"
    );
    assert!(
        question.message().contains("OUTSIDE the sandbox"),
        "shown to the user"
    );
    let grants = aai_audit::Grants::open(&s.path("allowed/aai-home/data.db")).expect("grants");
    assert!(
        !grants
            .allows("agent", "local.terminal", "bash_execute")
            .expect("grants"),
        "the \"always\" answer was not remembered"
    );
    let again = s
        .gateway
        .exec_asking(&caller, "local.terminal", "bash_execute", &args, None)
        .await;
    assert!(again.is_err(), "no grant covers it: {again:?}");

    // A session made outside the sandbox asks for each of its commands.
    let create = json!({"action": "create", "session_id": "wide",
        "outside_sandbox": true, "reason": "system maintenance"});
    s.gateway
        .exec_asking(
            &caller,
            "local.terminal",
            "bash_session",
            &create,
            Some(&asker),
        )
        .await
        .expect("created");
    let in_it = s
        .gateway
        .exec_asking(
            &caller,
            "local.terminal",
            "bash_execute",
            &json!({"command": "true", "session_id": "wide"}),
            None,
        )
        .await;
    assert!(in_it.is_err(), "a command in it is asked: {in_it:?}");
    // The sandboxed default session is not asked (the profile auto-approves).
    let plain = s.bash("true").await.expect("unasked");
    assert_eq!(plain["exit_code"], 0);
}

/// Where no sandbox can apply, the terminal refuses and says how to run uncontained; only an
/// explicit `"containment": "none"` runs it. `doctor` says which applies and why.
#[test]
fn without_a_sandbox_the_terminal_refuses_unless_the_config_says_none() {
    let _serial = SERIAL.blocking_lock();
    let base = tempfile::Builder::new()
        .prefix("no-sandbox-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("base");
    let home = base.path().join("home");
    let work = base.path().join("work");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&work).expect("work");
    let write_config = |containment: Option<&str>| {
        let mut local = json!({"sandbox": {"allowed_directories": [work]}});
        if let Some(mode) = containment {
            local["containment"] = json!(mode);
        }
        let config = json!({"local": local, "policy": {"default_profile": "p", "profiles":
            {"p": {"preset": "development", "risk_policies": {"high": "auto_approve"}}}}});
        std::fs::write(home.join("config.json"), config.to_string()).expect("config");
    };
    let run = |args: &[&str], no_landlock: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aai-gateway"));
        command
            .args(args)
            .env("AAI_HOME", &home)
            .env("AAI_LOG", "warn")
            .stdin(std::process::Stdio::null());
        if no_landlock {
            command.env("AAI_NO_LANDLOCK", "1");
        }
        let out = command.output().expect("aai-gateway");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let call = [
        "call",
        "local.terminal",
        "bash_execute",
        "--args",
        r#"{"command": "echo ran"}"#,
    ];
    let containment = |json_text: &str| -> Value {
        let report: Value = serde_json::from_str(json_text).expect("doctor json");
        report
            .as_array()
            .and_then(|apps| apps.iter().find(|a| a["app"] == "aai-gateway"))
            .and_then(|a| a["tools"].as_array())
            .and_then(|t| t.iter().find(|c| c["tool"] == "containment"))
            .cloned()
            .expect("a containment line")
    };

    write_config(None);
    let (ok, text) = run(&call, true);
    assert!(!ok, "ran uncontained: {text}");
    assert!(
        text.contains("\"containment\": \"none\"") && !text.contains("ran\\n"),
        "{text}"
    );
    let (_, doctor) = run(&["doctor", "--json"], true);
    let line = containment(&doctor);
    assert!(
        line["problem"]
            .as_str()
            .is_some_and(|p| p.contains("refuse")),
        "{line}"
    );

    // Here, with Landlock: the doctor names the ABI and what a probe launcher enforced.
    let (_, doctor) = run(&["doctor", "--json"], false);
    let line = containment(&doctor);
    let backend = line["backend"].as_str().unwrap_or_default();
    assert!(
        backend.starts_with("Landlock ABI") && backend.contains("fully enforced"),
        "{line}"
    );
    let (ok, text) = run(&call, false);
    assert!(ok && text.contains("ran"), "{text}");

    write_config(Some("none"));
    let (ok, text) = run(&call, true);
    assert!(ok && text.contains("ran"), "{text}");
    let (_, doctor) = run(&["doctor", "--json"], true);
    assert!(
        containment(&doctor)["backend"]
            .as_str()
            .is_some_and(|b| b.starts_with("off"))
    );
}

/// Kills a child when dropped (a test's X server and window manager).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An app the agent launches runs in the sandbox too: an xterm whose shell tries to delete a
/// canary outside the allowed folders (it survives) and writes inside them (that works); its
/// window is found under the launcher.
#[test]
fn a_launched_app_and_what_it_runs_are_contained() {
    let _serial = SERIAL.blocking_lock();
    for tool in ["Xvfb", "openbox", "xterm"] {
        assert!(
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            "{tool} is missing: run scripts/test.sh, which installs xvfb openbox xterm"
        );
    }
    let xvfb = aai_test_support::xvfb::Xvfb::start("1280x800x24");
    let display = xvfb.display.clone();
    let until = Instant::now() + Duration::from_secs(10);
    let _wm = Reaped(
        std::process::Command::new("openbox")
            .env("DISPLAY", &display)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("openbox"),
    );
    let x = aai_desktop::desktop::x11::X11::connect(Some(&display)).expect("x");
    while !x.has_window_manager() {
        assert!(Instant::now() < until, "openbox did not start");
        std::thread::sleep(Duration::from_millis(20));
    }

    aai_contain::set_launcher(env!("CARGO_BIN_EXE_aai-gateway"));
    let base = tempfile::Builder::new()
        .prefix("app-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("base");
    let allowed = base.path().join("allowed");
    let home = base.path().join("home");
    let canary = base.path().join("outside/file.txt");
    for dir in [&allowed, &home, &base.path().join("outside")] {
        std::fs::create_dir_all(dir).expect("dir");
    }
    std::fs::write(&canary, "keep").expect("canary");
    let mut config = aai_toolset::LocalConfig::default();
    config.sandbox.allowed_directories = vec![allowed.clone()];
    config.writable_caches = Vec::new();
    let mut setup = aai_toolset::Setup::new(config, vec![home.clone()]);
    setup.home = home;
    setup.seat.display = Some(display.clone());
    let toolsets = aai_local::toolsets(&setup);
    let descriptor = aai_local::all_descriptors()
        .into_iter()
        .find(|d| d.app_id == "local.apps")
        .expect("apps");
    let status = allowed.join("status");
    let script = format!(
        "rm -f {}; echo $? > {}; exec sleep 60",
        canary.display(),
        status.display()
    );
    let args = json!({"name": "xterm", "args": ["-title", "Contained Term", "-e", "sh", "-c", script], "wait_ms": 10_000});
    let args = args.as_object().cloned().expect("object");
    let invocation =
        aai_executor::Invocation::new(&descriptor, "app_launch", &args, Duration::from_secs(30))
            .with_caller("agent", false);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let launched = runtime
        .block_on(aai_executor::Executor::call(&toolsets, invocation))
        .expect("launched");
    assert_eq!(launched["sandboxed"], true, "{launched}");
    assert_eq!(launched["window"]["title"], "Contained Term", "{launched}");
    let until = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&status).map_or(true, |s| s.trim().is_empty()) {
        assert!(
            Instant::now() < until,
            "the xterm's shell never wrote its status"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if !hidden_by_the_private_temp(&canary.display().to_string()) {
        assert_ne!(
            std::fs::read_to_string(&status).expect("status").trim(),
            "0"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&canary).ok().as_deref(),
        Some("keep")
    );
    // The launcher is the app's parent; ending it ends the app.
    let app = u32::try_from(launched["pid"].as_u64().expect("pid")).expect("pid");
    let launcher = aai_contain::procs::stat(app)
        .map(|(_, parent)| parent)
        .expect("parent");
    assert!(aai_contain::procs::terminate(launcher));
    assert!(!alive(app));
}

/// The user's running sessions are out of a contained command's reach: a socket where tmux
/// keeps its servers is not there for it (the folder is covered), while the same socket
/// answers the gateway outside; the variables that point at sessions are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_reach_the_users_session_sockets() {
    let _serial = SERIAL.lock().await;
    let s = unguarded();
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| {
        use std::os::unix::fs::MetadataExt as _;
        m.uid()
    });
    let dir = PathBuf::from(format!("/tmp/tmux-{uid}"));
    let made = !dir.exists();
    std::fs::create_dir_all(&dir).expect("tmux folder");
    let socket = dir.join(format!("aai-contain-test-{}", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    assert!(
        std::os::unix::net::UnixStream::connect(&socket).is_ok(),
        "the socket answers outside the sandbox"
    );
    let probe = format!(
        "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"CONNECTED\")' {} 2>&1; \
         ls -A {} | wc -l; env | cut -d= -f1 | sort",
        socket.display(),
        dir.display()
    );
    let out = s.bash(&probe).await.expect("ran");
    drop(listener);
    let _ = std::fs::remove_file(&socket);
    if made {
        let _ = std::fs::remove_dir(&dir);
    }
    let stdout = out["stdout"].as_str().unwrap_or_default();
    assert!(
        !stdout.contains("CONNECTED"),
        "reached the session socket: {out}"
    );
    let names: Vec<&str> = stdout.lines().collect();
    for var in aai_contain::sessions::SESSION_VARS {
        assert!(!names.contains(var), "{var} is still set: {out}");
    }
    let ok = s.bash("echo still-works").await.expect("ran");
    assert!(
        ok["stdout"]
            .as_str()
            .is_some_and(|o| o.contains("still-works")),
        "{ok}"
    );
}
