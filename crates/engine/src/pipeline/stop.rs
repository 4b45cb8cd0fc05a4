//! The emergency stop (`spec/desktop-control.zh.md` §7.6): one switch that refuses new calls
//! until the user resumes, cancels every running call, kills every process the gateway
//! started for a call — including ones that left its process group or session — writes an
//! audit row and tells the user.
//!
//! Where the system allows, every call runs in a cgroup of its own
//! ([`aai_executor::cgroup`]), and the stop kills those first. Processes are also found two
//! ways: every process started for a call carries [`aai_executor::process::TAG_VAR`] with this
//! gateway's tag in its environment (inherited by everything it starts), and every descendant
//! of the gateway by parent links. What the agent starts runs under the sandbox launcher
//! ([`aai_contain`]): the stop asks each launcher first, and its second stage ends the
//! command's Landlock domain at once (nothing of it can slip past, however it forks); then
//! every process left is frozen (SIGSTOP) and killed, pass after pass until none is found.

use std::time::{Duration, Instant};

use aai_policy::Risk;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::gate::Call;
use crate::pipeline::Gateway;

/// How long the stop keeps looking for processes to kill.
const KILL_BUDGET: Duration = Duration::from_millis(900);
/// How long the stop gives the launchers to end their commands before it sweeps: their own
/// bound, never less — a launcher swept half-way (frozen, killed) would leave behind the
/// domain it was about to end. Milliseconds when the machine is idle.
const LAUNCHERS_WITHIN: Duration = aai_contain::procs::LAUNCHER_ENDS_WITHIN;

pub use super::switch::EmergencyStop;

/// Keeps this gateway's stop in step with the home's stop marker until `cancel` fires: a
/// marker that appears stops every call here (and kills their processes); one that this
/// watch saw and that is then removed (by `aai-gateway resume`) lifts the stop here. A stop
/// whose marker could not be written (a full disk) is never lifted by the watch: only a
/// removal it saw counts.
pub fn watch_marker(gateway: std::sync::Arc<Gateway>, cancel: CancellationToken) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(crate::control::MARKER_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = false;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                () = cancel.cancelled() => return,
            }
            let Some(present) = gateway.stop.marker_present() else {
                return;
            };
            if present && !gateway.stop.flag() {
                let by = gateway
                    .stop
                    .marked()
                    .map_or_else(|| "the stop marker".to_owned(), |m| m.by);
                let report = gateway.emergency_stop(&by).await;
                acknowledge(&gateway.home, &report);
            } else if !present && seen && gateway.stop.flag() {
                gateway.resume("the stop marker was removed (aai-gateway resume)");
            }
            seen = present;
        }
    });
}

/// Leaves what a stop seen through the marker did where `aai-gateway stop` looks for it.
fn acknowledge(home: &std::path::Path, report: &Value) {
    let mut report = report.clone();
    report["pid"] = json!(std::process::id());
    if let Ok(bytes) = serde_json::to_vec(&report) {
        let path = home
            .join("run")
            .join(format!("stopped.{}", std::process::id()));
        if let Err(error) = crate::private::write_private(&path, &bytes) {
            tracing::debug!(%error, "the stop's report could not be left for `aai-gateway stop`");
        }
    }
}

impl Gateway {
    /// Presses the emergency stop: refuses new calls, cancels running ones, kills their
    /// processes, writes the audit row and notifies the user. Returns what it did.
    pub async fn emergency_stop(&self, by: &str) -> Value {
        let started = Instant::now();
        let newly = self.stop.trip(by);
        let toolsets = self.toolsets();
        self.gate
            .feed
            .send(crate::feed::Event::Stop { stopped: true });
        // What runs for the agent now: the report counts what of it the stop ended, whichever
        // step ended it (a terminal session's own end comes first).
        let running = census();
        // Toolsets end what they keep running (terminal sessions, browsers), then every
        // process left — escapees included — is killed.
        let _ = tokio::time::timeout(Duration::from_millis(300), toolsets.emergency_stop()).await;
        let swept = tokio::task::spawn_blocking(kill_everything)
            .await
            .unwrap_or_default();
        let killed = swept.max(ended_of(&running));
        // The MCP servers were among the processes killed: the next use starts them again.
        if let Some(mcp) = self.executors.mcp() {
            mcp.stopped();
        }
        // What the killed processes left behind (keys held down) is undone after them.
        let undone = toolsets.after_kill().await;
        let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let args = json!({"by": by, "killed": killed, "took_ms": took_ms});
        let call = Call {
            id: self.gate.call_id(),
            caller: by,
            app: "aai-gateway",
            tool: "emergency_stop",
            args: &args,
            risk: Risk::Critical,
        };
        if let Err(error) = self.gate.record(&call, "stop", "stopped", 0, None) {
            tracing::error!(
                "the emergency stop's audit row could not be written: {}",
                error.message
            );
        }
        tracing::warn!(%by, killed, took_ms, "EMERGENCY STOP: calls refused until `aai-gateway resume`");
        tokio::spawn(async {
            let _ = aai_executor::notify::notify(
                "aai-gateway stopped",
                "Emergency stop: every agent call was cancelled and none will run until you run `aai-gateway resume`.",
                "critical",
            )
            .await;
        });
        let mut report = json!({
            "stopped": true,
            "already": !newly,
            "killed": killed,
            "took_ms": took_ms,
        });
        if let Some(report) = report.as_object_mut() {
            report.extend(
                undone
                    .into_iter()
                    .chain(toolsets.stop_notes())
                    .map(|(key, value)| (key.to_owned(), value)),
            );
        }
        report
    }

    /// Lifts the emergency stop; false when it was not on.
    pub fn resume(&self, by: &str) -> bool {
        let was = self.stop.clear();
        if was {
            self.gate
                .feed
                .send(crate::feed::Event::Stop { stopped: false });
            let args = json!({"by": by});
            let call = Call {
                id: self.gate.call_id(),
                caller: by,
                app: "aai-gateway",
                tool: "resume",
                args: &args,
                risk: Risk::Low,
            };
            if let Err(error) = self.gate.record(&call, "resume", "resumed", 0, None) {
                tracing::error!(
                    "the resume's audit row could not be written: {}",
                    error.message
                );
            }
            tracing::warn!(%by, "emergency stop lifted");
            self.toolsets().resumed();
        }
        was
    }
}

/// The processes the stop is about: every descendant of the gateway and every process started
/// for a call.
#[cfg(target_os = "linux")]
fn census() -> Vec<u32> {
    let tag = format!(
        "{}={}",
        aai_executor::process::TAG_VAR,
        aai_executor::process::process_tag()
    );
    victims(std::process::id(), tag.as_bytes())
}

#[cfg(not(target_os = "linux"))]
fn census() -> Vec<u32> {
    Vec::new()
}

/// How many of `running` are gone (or only a zombie left).
fn ended_of(running: &[u32]) -> usize {
    #[cfg(target_os = "linux")]
    return running
        .iter()
        .filter(|pid| !aai_contain::procs::alive(**pid))
        .count();
    #[cfg(not(target_os = "linux"))]
    running.len()
}

/// Kills every process started for a call and every descendant of the gateway, pass after
/// pass until a pass finds none or the budget is spent; returns how many were killed.
#[cfg(target_os = "linux")]
pub fn kill_everything() -> usize {
    let tag = format!(
        "{}={}",
        aai_executor::process::TAG_VAR,
        aai_executor::process::process_tag()
    );
    let me = std::process::id();
    // The calls' cgroups first: nothing in them can hide (cleared environment, reparented).
    let in_groups = aai_executor::cgroup::kill_all();
    // Then the launchers: each ends its command's whole Landlock domain at once (see
    // `aai_contain`'s launcher), which no loop of forks can outrun.
    let mut ended = 0;
    if let Some(launcher) = aai_contain::launcher() {
        let launchers: Vec<u32> = victims(me, tag.as_bytes())
            .into_iter()
            .filter(|pid| aai_contain::procs::is_launcher(*pid, launcher))
            .collect();
        for pid in &launchers {
            aai_contain::procs::signal(*pid, aai_contain::procs::TERMINATE);
        }
        let until = Instant::now() + LAUNCHERS_WITHIN;
        while launchers.iter().any(|p| aai_contain::procs::alive(*p)) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        ended = launchers.len();
    }
    // Then every descendant and every tagged process left, frozen before any is killed: a
    // launcher killed before its orphans leaves them stopped, by pid in the list, for the
    // same pass.
    let killed =
        aai_contain::procs::freeze_and_kill(&mut || victims(me, tag.as_bytes()), KILL_BUDGET);
    (killed + ended).max(in_groups)
}

#[cfg(not(target_os = "linux"))]
pub fn kill_everything() -> usize {
    0
}

/// Processes that are alive (not zombies) and either carry the tag or descend from `me`.
#[cfg(target_os = "linux")]
fn victims(me: u32, tag: &[u8]) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parents = std::collections::HashMap::new();
    let mut tagged = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Some((state, ppid)) = aai_contain::procs::stat(pid) else {
            continue;
        };
        if state == 'Z' || state == 'X' {
            continue;
        }
        parents.insert(pid, ppid);
        if let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ"))
            && environ.split(|b| *b == 0).any(|var| var == tag)
        {
            tagged.push(pid);
        }
    }
    let mut found: Vec<u32> = parents
        .keys()
        .copied()
        .filter(|pid| aai_contain::procs::descends(*pid, me, &parents))
        .collect();
    found.extend(tagged);
    found.sort_unstable();
    found.dedup();
    found
}
