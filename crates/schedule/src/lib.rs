//! Scheduled tasks (`spec/desktop-control.zh.md` §6.3, §6.4): a cron expression in a time
//! zone, what to run (a workflow, or an agent command the user configured), the tools the
//! task may use and how risky they may be, and what to do with missed and overlapping runs.
//!
//! Tasks, runs and each finished step live in `data.db` ([`tables`]); the daemon's
//! [`runner`] claims every occurrence in one transaction with the task's cursor, so a crash
//! at any point neither repeats nor loses one, and a run resumes at its first unfinished step.

mod agent;
mod hub;
mod report;
pub mod runner;
pub mod tables;
pub mod tools;

pub use hub::Hub;
pub use tools::{APP_ID, ScheduleTools, Scheduling};

/// Plugs the scheduler into `gateway`: its `local.schedule` toolset, and the [`Tasks`] the
/// gateway's surfaces reach it through. Returns the hub the two share with the scheduler loop
/// ([`runner::spawn`]). The binary does this once per gateway (`aai-compose`).
pub fn plug(gateway: &Arc<Gateway>) -> Arc<Hub> {
    let hub = Arc::new(Hub::new(gateway.gate().data_db().to_path_buf()));
    gateway.plug(Arc::new(ScheduleTools {
        gateway: Arc::downgrade(gateway),
        hub: hub.clone(),
    }));
    gateway.plug_tasks(hub.clone());
    hub
}

impl Tasks for Hub {
    fn app(&self) -> &'static str {
        APP_ID
    }

    fn token(&self, token: &str) -> Option<(Arc<TaskGrant>, aai_engine::pipeline::CallIds)> {
        Hub::token(self, token)
    }

    fn report(&self) -> serde_json::Value {
        let store = match self.store() {
            Ok(store) => store,
            Err(error) => return serde_json::json!({"error": error.message}),
        };
        let runs = store.history(None, 15).unwrap_or_default();
        serde_json::json!({
            "tasks": tools::list(&store).unwrap_or_default(),
            "runs": runs.iter().map(|run| {
                let described = tools::describe_run(&store, run);
                serde_json::json!({
                    "run_id": run.id, "task": run.task, "kind": run.kind, "state": run.state,
                    "scheduled": described["scheduled"], "finished": described["finished"],
                    "error": described["error"]["message"].as_str().or_else(|| described["error"].as_str()),
                    "steps": described["steps"].as_array().map_or(0, Vec::len),
                })
            }).collect::<Vec<_>>(),
        })
    }

    fn change<'a>(
        &'a self,
        gateway: &'a Gateway,
        tool: &'a str,
        args: &'a serde_json::Map<String, serde_json::Value>,
    ) -> aai_executor::BoxFuture<'a, Result<serde_json::Value, aai_descriptor::AaiError>> {
        Box::pin(async move {
            Scheduling { gateway, hub: self }
                .schedule_tool(tool, args)
                .await
        })
    }

    fn serve_at(&self, url: &str) {
        *self
            .url
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(url.to_owned());
    }
}

/// The app `local.schedule` for discovery: offered while `scheduler.tools` is on.
pub fn app() -> aai_engine::catalog::discovery::PluggedApp {
    aai_engine::catalog::discovery::PluggedApp::new(tools::DESCRIPTOR.clone(), |config| {
        config.scheduler.tools
    })
}

use std::sync::Arc;

use aai_descriptor::Risk;
use aai_engine::pipeline::Gateway;
pub use aai_engine::pipeline::task::{OnApproval, TaskGrant, Tasks};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A scheduled task, as `schedule add` and the `schedule_add` tool take it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Letters, digits, `-` and `_`.
    pub name: String,
    /// 5 fields (minute hour day month weekday) or 6 (seconds first), e.g. `0 9 * * 1-5`.
    pub cron: String,
    /// An IANA time zone (`Europe/Paris`); default: this computer's. Times in a DST gap run
    /// at the first valid time after it; a fixed time in a repeated hour runs once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// What runs.
    pub run: Run,
    /// The tools the task may call: `app:tool`, `app:*`, or a tool name of any app. Calls to
    /// these need no one at the keyboard (they were approved when the task was added); every
    /// other call fails the run. The policy's blocks still hold.
    #[serde(default)]
    pub granted_tools: Vec<String>,
    /// Calls riskier than this fail the run, granted or not.
    #[serde(default = "default_risk")]
    #[schemars(with = "RiskName")]
    pub max_risk_level: Risk,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Further attempts of a failed run (0–5), each resuming at the step that failed.
    #[serde(default)]
    pub retries: u8,
    /// Occurrences missed while the gateway was not running (or stopped): `skip` them, run
    /// the latest `once`, or run `all` in order.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// An occurrence due while the last run still runs: `skip` it, `queue` it, or `allow`
    /// both at once.
    #[serde(default)]
    pub overlap: Overlap,
    /// A call of a tool not granted (or one that must be approved every time): `fail` the
    /// run (the default), or `queue` it for the user on the dashboard and wait.
    #[serde(default)]
    pub on_approval: OnApproval,
    /// For an agent run: whether it may be started again after a crash interrupted it.
    #[serde(default)]
    pub idempotent: bool,
}

/// A risk level, as tasks name it.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum RiskName {
    Low,
    Medium,
    High,
    Critical,
}

fn default_risk() -> Risk {
    Risk::Medium
}

fn yes() -> bool {
    true
}

/// What a task runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Run {
    /// A workflow of `AAI_HOME/workflows`, with its inputs.
    Workflow {
        name: String,
        #[serde(default)]
        inputs: Value,
    },
    /// An agent command from `scheduler.agents` in config.json, given the instruction and
    /// an MCP config that points at this gateway.
    Agent { name: String, instruction: String },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    Skip,
    #[default]
    Once,
    All,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    #[default]
    Skip,
    Queue,
    Allow,
}

/// The most occurrences one pass of the scheduler claims for a task (`catch_up: all` after
/// a long absence of a task that runs every second): the rest are claimed by the next pass.
pub const CLAIM_LIMIT: usize = 1000;

impl Task {
    /// The JSON Schema of a task.
    pub fn schema() -> Value {
        serde_json::to_value(schemars::schema_for!(Task)).unwrap_or_default()
    }

    /// Checks the task: its name, cron, time zone and limits. What it runs is checked by
    /// [`runner`] against the workflows and agents there are.
    ///
    /// # Errors
    /// What is wrong, naming the field.
    pub fn compile(&self) -> Result<Timing, TaskError> {
        if !valid_name(&self.name) {
            return Err(TaskError::Name(self.name.clone()));
        }
        if self.retries > 5 {
            return Err(TaskError::Retries);
        }
        for pattern in &self.granted_tools {
            if pattern.trim().is_empty() || pattern == "*" || pattern.contains(char::is_whitespace)
            {
                return Err(TaskError::Grant(pattern.clone()));
            }
        }
        Timing::new(&self.cron, self.time_zone.as_deref())
    }

    /// The policy layer its calls run under.
    pub fn grant(&self) -> Arc<TaskGrant> {
        Arc::new(TaskGrant {
            task: self.name.clone(),
            tools: self.granted_tools.clone(),
            max_risk: self.max_risk_level,
            on_approval: self.on_approval,
        })
    }
}

/// What is wrong with a task, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("\"name\": {0:?} must be 1–64 letters, digits, '-' or '_'")]
    Name(String),
    #[error("\"retries\" is at most 5")]
    Retries,
    #[error(
        "\"granted_tools\": {0:?} is not `app:tool`, `app:*` or a tool name (a task is never granted everything)"
    )]
    Grant(String),
    #[error(
        "\"cron\": {cron:?} has {fields} field(s); write 5 (minute hour day month weekday) or 6 (seconds first)"
    )]
    Fields { cron: String, fields: usize },
    #[error("\"cron\": {cron:?}: {source}")]
    Cron {
        cron: String,
        source: croner::errors::CronError,
    },
    #[error("\"time_zone\": {zone:?} is not a known IANA time zone ({source})")]
    Zone { zone: String, source: jiff::Error },
}

/// Names of tasks, workflows and agents.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// When a task runs: its cron in its time zone.
#[derive(Debug, Clone)]
pub struct Timing {
    cron: croner::Cron,
    zone: jiff::tz::TimeZone,
}

impl Timing {
    /// # Errors
    /// A cron that is not 5 or 6 fields or does not parse, or an unknown time zone.
    pub fn new(cron: &str, zone: Option<&str>) -> Result<Self, TaskError> {
        let fields = cron.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(TaskError::Fields {
                cron: cron.to_owned(),
                fields,
            });
        }
        let parsed = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(cron)
            .map_err(|source| TaskError::Cron {
                cron: cron.to_owned(),
                source,
            })?;
        let zone = match zone {
            None => jiff::tz::TimeZone::system(),
            Some(name) => jiff::tz::TimeZone::get(name).map_err(|source| TaskError::Zone {
                zone: name.to_owned(),
                source,
            })?,
        };
        Ok(Self { cron: parsed, zone })
    }

    /// The first occurrence strictly after `after_ms` (Unix milliseconds).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let start = jiff::Timestamp::from_millisecond(after_ms)
            .ok()?
            .to_zoned(self.zone.clone());
        self.cron
            .find_next_occurrence(&start, false)
            .ok()
            .map(|z| z.timestamp().as_millisecond())
    }

    /// The last occurrence at or before `ms`.
    pub fn last_at_or_before(&self, ms: i64) -> Option<i64> {
        self.previous(ms, true)
    }

    /// The last occurrence strictly before `ms`.
    pub fn last_before(&self, ms: i64) -> Option<i64> {
        self.previous(ms, false)
    }

    fn previous(&self, ms: i64, inclusive: bool) -> Option<i64> {
        let start = jiff::Timestamp::from_millisecond(ms)
            .ok()?
            .to_zoned(self.zone.clone());
        self.cron
            .find_previous_occurrence(&start, inclusive)
            .ok()
            .map(|z| z.timestamp().as_millisecond())
    }

    /// The occurrences in `(after_ms, until_ms]`, at most `limit`.
    pub fn between(&self, after_ms: i64, until_ms: i64, limit: usize) -> Vec<i64> {
        let mut found = Vec::new();
        let mut at = after_ms;
        while found.len() < limit {
            match self.next_after(at) {
                Some(next) if next <= until_ms => {
                    found.push(next);
                    at = next;
                }
                _ => break,
            }
        }
        found
    }

    /// `ms` as local time in the task's zone, RFC 3339 with the zone's offset.
    pub fn show(&self, ms: i64) -> String {
        show_in(&self.zone, ms)
    }
}

/// `ms` in `zone`, e.g. `2026-11-25T09:00:00+01:00`.
pub fn show_in(zone: &jiff::tz::TimeZone, ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(
        |_| ms.to_string(),
        |t| {
            t.to_zoned(zone.clone())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        },
    )
}

/// `ms` in this computer's time zone.
pub fn show_local(ms: i64) -> String {
    show_in(&jiff::tz::TimeZone::system(), ms)
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ms(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>()
            .expect("timestamp")
            .as_millisecond()
    }

    #[test]
    fn five_and_six_fields_in_a_time_zone() {
        let daily = Timing::new("0 9 * * 1-5", Some("Europe/Paris")).expect("parses");
        // Wednesday 2026-11-25 08:00 UTC is 09:00 in Paris (UTC+1).
        let next = daily.next_after(ms("2026-11-25T07:00:00Z")).expect("next");
        assert_eq!(next, ms("2026-11-25T08:00:00Z"));
        assert_eq!(daily.show(next), "2026-11-25T09:00:00+01:00");
        // Friday → Monday.
        let friday = ms("2026-11-27T08:00:00Z");
        assert_eq!(daily.next_after(friday), Some(ms("2026-11-30T08:00:00Z")));
        let seconds = Timing::new("*/10 * * * * *", Some("UTC")).expect("six fields");
        assert_eq!(
            seconds.between(ms("2026-01-01T00:00:00Z"), ms("2026-01-01T00:01:00Z"), 100),
            (1..=6)
                .map(|i| ms("2026-01-01T00:00:00Z") + i * 10_000)
                .collect::<Vec<_>>()
        );
        assert_eq!(
            seconds
                .between(ms("2026-01-01T00:00:00Z"), ms("2026-01-02T00:00:00Z"), 7)
                .len(),
            7
        );
        for (cron, zone, problem) in [
            ("* * * *", None, "4 field(s)"),
            ("0 0 0 * * * 2026", None, "7 field(s)"),
            ("61 * * * *", None, "\"cron\""),
            ("0 9 * * *", Some("Mars/Olympus"), "time zone"),
        ] {
            let error = Timing::new(cron, zone).expect_err(cron);
            assert!(error.to_string().contains(problem), "{cron}: {error}");
        }
    }

    #[test]
    fn dst_gaps_run_after_and_repeated_hours_run_once() {
        // Europe/Paris springs forward 2026-03-29 02:00 → 03:00 and falls back 2026-10-25
        // 03:00 → 02:00.
        let fixed = Timing::new("30 2 * * *", Some("Europe/Paris")).expect("parses");
        let spring = fixed
            .between(ms("2026-03-28T12:00:00Z"), ms("2026-03-30T12:00:00Z"), 10)
            .into_iter()
            .map(|m| fixed.show(m))
            .collect::<Vec<_>>();
        assert_eq!(
            spring,
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
            "02:30 does not exist on the 29th: it runs once, just after the gap"
        );
        let autumn = fixed.between(ms("2026-10-24T12:00:00Z"), ms("2026-10-25T12:00:00Z"), 10);
        assert_eq!(
            autumn.len(),
            1,
            "02:30 happens twice on the 25th; it runs once"
        );
        let every_15 = Timing::new("*/15 2 * * *", Some("Europe/Paris")).expect("parses");
        let repeated = every_15.between(ms("2026-10-24T12:00:00Z"), ms("2026-10-25T12:00:00Z"), 20);
        assert_eq!(
            repeated.len(),
            8,
            "an interval job runs in both passes of 02:xx"
        );
        assert!(repeated.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_grant_only_names_what_it_names() {
        let task: Task = serde_json::from_value(json!({
            "name": "report", "cron": "0 9 * * *",
            "run": {"workflow": {"name": "daily"}},
            "granted_tools": ["org.mail:send", "local.files:*", "notification_send"],
            "max_risk_level": "medium"
        }))
        .expect("task");
        task.compile().expect("valid");
        let grant = task.grant();
        assert!(grant.refusal("org.mail", "send", Risk::Medium).is_none());
        assert!(
            grant
                .refusal("local.files", "file_read", Risk::Low)
                .is_none()
        );
        assert!(
            grant
                .refusal("local.system", "notification_send", Risk::Low)
                .is_none()
        );
        let other = grant
            .refusal("org.mail", "delete", Risk::Low)
            .expect("not granted");
        assert!(other.message.contains("granted_tools"), "{}", other.message);
        let risky = grant
            .refusal("org.mail", "send", Risk::High)
            .expect("too risky");
        assert!(
            risky.message.contains("max_risk_level"),
            "{}",
            risky.message
        );
        for bad in [json!(["*"]), json!([""]), json!(["a b"])] {
            let mut t = task.clone();
            t.granted_tools = serde_json::from_value(bad.clone()).expect("list");
            assert!(t.compile().is_err(), "{bad}");
        }
        let mut t = task;
        t.name = "../x".into();
        assert!(t.compile().expect_err("name").to_string().contains("name"));
    }
}
