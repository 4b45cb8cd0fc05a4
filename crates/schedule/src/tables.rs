//! The scheduler's state in `data.db`: tasks with their cursor, runs (one row per occurrence,
//! unique by task and occurrence), and each step of a run as it starts and ends.
//!
//! Exactly once rests on two writes: occurrences are claimed in the same transaction that
//! moves the task's cursor past them (a crash before it claims nothing and moves nothing; a
//! crash after it leaves rows the next start runs), and a step's `started` row is durable
//! before the step runs (a crash after it leaves a step known to have been in flight).

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use super::{Task, now_ms};
use aai_engine::workflow::{CheckpointError, Checkpoints, Prior};

/// The scheduler's tables.
pub struct Store {
    conn: Mutex<Connection>,
}

/// A task as stored.
#[derive(Debug, Clone)]
pub struct Stored {
    pub task: Task,
    /// Every occurrence up to here has been claimed or passed over.
    pub cursor_ms: i64,
}

/// An occurrence to claim.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub occurrence: String,
    pub scheduled_ms: i64,
    /// `on_time`, `catch_up` or `missed`.
    pub kind: &'static str,
    /// `pending`, or `skipped` for occurrences passed over.
    pub state: &'static str,
    pub outcome: Option<Value>,
}

/// A run as stored.
#[derive(Debug, Clone)]
pub struct RunRow {
    pub id: i64,
    pub task: String,
    pub occurrence: String,
    pub scheduled_ms: i64,
    pub kind: String,
    pub state: String,
    pub attempt: u32,
    pub not_before_ms: i64,
    pub owner: Option<String>,
    /// The task as it was when the occurrence was claimed.
    pub spec: Task,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub outcome: Option<Value>,
}

/// A step of a run as stored.
#[derive(Debug, Clone)]
pub struct StepRow {
    pub step: usize,
    /// `started` (in flight, or interrupted by a crash), `ok`, `failed`, `skipped`,
    /// `interrupted`.
    pub state: String,
    pub entry: Option<Value>,
    pub audit: Vec<String>,
}

/// What went wrong with the scheduler's tables in `data.db`.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    #[error("the scheduler's tables in data.db: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("the scheduler's tables in data.db: a task does not serialize: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("the scheduler's tables in data.db: the stored task {name:?} does not read: {source}")]
    StoredTask {
        name: String,
        source: serde_json::Error,
    },
}

impl From<TablesError> for aai_descriptor::AaiError {
    fn from(error: TablesError) -> Self {
        Self::new(
            aai_descriptor::ErrorKind::AutomationFailed,
            error.to_string(),
        )
    }
}

fn fail(error: impl Into<TablesError>) -> TablesError {
    error.into()
}

const RUN_COLUMNS: &str = "id, task, occurrence, scheduled_ms, kind, state, attempt, not_before_ms, owner, spec, started_ms, finished_ms, outcome";

fn run_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(RunRow, String)> {
    let spec: String = row.get(9)?;
    let outcome: Option<String> = row.get(12)?;
    Ok((
        RunRow {
            id: row.get(0)?,
            task: row.get(1)?,
            occurrence: row.get(2)?,
            scheduled_ms: row.get(3)?,
            kind: row.get(4)?,
            state: row.get(5)?,
            attempt: row.get(6)?,
            not_before_ms: row.get(7)?,
            owner: row.get(8)?,
            spec: serde_json::from_str(&spec).unwrap_or_else(|_| placeholder()),
            started_ms: row.get(10)?,
            finished_ms: row.get(11)?,
            outcome: outcome.and_then(|o| serde_json::from_str(&o).ok()),
        },
        spec,
    ))
}

/// A task whose stored spec no longer reads (a newer gateway wrote it).
fn placeholder() -> Task {
    Task {
        name: String::new(),
        cron: String::new(),
        time_zone: None,
        run: super::Run::Workflow {
            name: String::new(),
            inputs: Value::Null,
        },
        granted_tools: Vec::new(),
        max_risk_level: aai_descriptor::Risk::Low,
        enabled: false,
        retries: 0,
        catch_up: super::CatchUp::Skip,
        overlap: super::Overlap::Skip,
        on_approval: super::OnApproval::Fail,
        idempotent: false,
    }
}

impl Store {
    /// Opens the tables in the SQLite file at `path` (creating them).
    ///
    /// # Errors
    /// The file cannot be opened or set up.
    pub fn open(path: &Path) -> Result<Self, TablesError> {
        if let Some(parent) = path.parent() {
            let _ = aai_engine::private::create_dir(parent);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path);
        }
        let conn = Connection::open(path).map_err(fail)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(fail)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(fail)?;
        // In WAL mode NORMAL keeps every committed transaction across a killed process.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(fail)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS schedule_tasks (
                name TEXT PRIMARY KEY,
                spec TEXT NOT NULL,
                cursor_ms INTEGER NOT NULL,
                created_ms INTEGER NOT NULL,
                updated_ms INTEGER NOT NULL
            );
            CREATE TABLE IF NOT EXISTS schedule_runs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                task TEXT NOT NULL,
                occurrence TEXT NOT NULL,
                scheduled_ms INTEGER NOT NULL,
                kind TEXT NOT NULL,
                state TEXT NOT NULL,
                attempt INTEGER NOT NULL DEFAULT 1,
                not_before_ms INTEGER NOT NULL,
                owner TEXT,
                spec TEXT NOT NULL,
                claimed_ms INTEGER NOT NULL,
                started_ms INTEGER,
                finished_ms INTEGER,
                outcome TEXT,
                UNIQUE (task, occurrence)
            );
            CREATE INDEX IF NOT EXISTS schedule_runs_open ON schedule_runs (state) WHERE state IN ('pending', 'running');
            CREATE TABLE IF NOT EXISTS schedule_meta (one INTEGER PRIMARY KEY CHECK (one = 1), version INTEGER NOT NULL);
            INSERT OR IGNORE INTO schedule_meta (one, version) VALUES (1, 0);
            CREATE TABLE IF NOT EXISTS schedule_steps (
                run INTEGER NOT NULL,
                step INTEGER NOT NULL,
                state TEXT NOT NULL,
                entry TEXT,
                audit TEXT,
                started_ms INTEGER NOT NULL,
                finished_ms INTEGER,
                PRIMARY KEY (run, step)
            );",
        )
        .map_err(fail)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Moves on with every change of a task and every run asked for (by any process).
    pub fn version(&self) -> i64 {
        self.conn()
            .query_row("SELECT version FROM schedule_meta", [], |r| r.get(0))
            .unwrap_or(0)
    }

    /// Adds `task`, or replaces the task of that name (its history and cursor stay; a task
    /// enabled again starts from `now`). Returns whether one was replaced.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn put(&self, task: &Task, now: i64) -> Result<bool, TablesError> {
        let spec = serde_json::to_string(task).map_err(fail)?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        let old: Option<String> = tx
            .query_row(
                "SELECT spec FROM schedule_tasks WHERE name = ?1",
                [&task.name],
                |r| r.get(0),
            )
            .optional()
            .map_err(fail)?;
        match &old {
            None => {
                tx.execute(
                    "INSERT INTO schedule_tasks (name, spec, cursor_ms, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?3, ?3)",
                    params![task.name, spec, now],
                )
                .map_err(fail)?;
            }
            Some(old) => {
                let was_enabled = serde_json::from_str::<Task>(old).is_ok_and(|t| t.enabled);
                let restart = task.enabled && !was_enabled;
                tx.execute(
                    "UPDATE schedule_tasks SET spec = ?2, updated_ms = ?3, cursor_ms = CASE WHEN ?4 THEN ?3 ELSE cursor_ms END WHERE name = ?1",
                    params![task.name, spec, now, restart],
                )
                .map_err(fail)?;
            }
        }
        tx.execute("UPDATE schedule_meta SET version = version + 1", [])
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(old.is_some())
    }

    /// Removes the task; its runs not started yet are cancelled, its history stays.
    /// Whether there was one.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn remove(&self, name: &str, now: i64) -> Result<bool, TablesError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        let removed = tx
            .execute("DELETE FROM schedule_tasks WHERE name = ?1", [name])
            .map_err(fail)?;
        tx.execute(
            "UPDATE schedule_runs SET state = 'cancelled', finished_ms = ?2, outcome = ?3 WHERE task = ?1 AND state = 'pending'",
            params![name, now, json!({"reason": "the task was removed"}).to_string()],
        )
        .map_err(fail)?;
        tx.execute("UPDATE schedule_meta SET version = version + 1", [])
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(removed > 0)
    }

    /// Turns the task on or off; one turned on starts from `now` (what fell due while it
    /// was off is not owed). Whether there is such a task.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn set_enabled(&self, name: &str, enabled: bool, now: i64) -> Result<bool, TablesError> {
        let Some(mut stored) = self.get(name)? else {
            return Ok(false);
        };
        stored.task.enabled = enabled;
        self.put(&stored.task, now)?;
        Ok(true)
    }

    /// The task `name`.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn get(&self, name: &str) -> Result<Option<Stored>, TablesError> {
        let conn = self.conn();
        let row: Option<(String, i64)> = conn
            .query_row(
                "SELECT spec, cursor_ms FROM schedule_tasks WHERE name = ?1",
                [name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(fail)?;
        row.map(|(spec, cursor_ms)| {
            serde_json::from_str(&spec)
                .map(|task| Stored { task, cursor_ms })
                .map_err(|source| TablesError::StoredTask {
                    name: name.to_owned(),
                    source,
                })
        })
        .transpose()
    }

    /// Every task, by name. A row that no longer reads is skipped with a warning.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn tasks(&self) -> Result<Vec<Stored>, TablesError> {
        let conn = self.conn();
        let mut statement = conn
            .prepare_cached("SELECT name, spec, cursor_ms FROM schedule_tasks ORDER BY name")
            .map_err(fail)?;
        let rows = statement
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(fail)?;
        let mut tasks = Vec::new();
        for row in rows {
            let (name, spec, cursor_ms) = row.map_err(fail)?;
            match serde_json::from_str::<Task>(&spec) {
                Ok(task) => tasks.push(Stored { task, cursor_ms }),
                Err(error) => tracing::warn!(task = %name, "a stored task does not read: {error}"),
            }
        }
        Ok(tasks)
    }

    /// Claims `runs` of `task` and moves its cursor from `seen` to `to`, in one transaction.
    /// Nothing is claimed when the cursor is no longer `seen` (another claimer was first).
    /// Returns the ids of the runs to start.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn claim(
        &self,
        task: &Task,
        seen: i64,
        to: i64,
        runs: &[NewRun],
        now: i64,
    ) -> Result<Vec<i64>, TablesError> {
        let spec = serde_json::to_string(task).map_err(fail)?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        let moved = tx
            .execute(
                "UPDATE schedule_tasks SET cursor_ms = ?3 WHERE name = ?1 AND cursor_ms = ?2",
                params![task.name, seen, to],
            )
            .map_err(fail)?;
        if moved == 0 {
            return Ok(Vec::new());
        }
        let mut ids = Vec::new();
        for run in runs {
            let inserted = tx
                .execute(
                    "INSERT OR IGNORE INTO schedule_runs (task, occurrence, scheduled_ms, kind, state, not_before_ms, spec, claimed_ms, finished_ms, outcome)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?3, ?6, ?7, CASE WHEN ?5 = 'pending' THEN NULL ELSE ?7 END, ?8)",
                    params![
                        task.name,
                        run.occurrence,
                        run.scheduled_ms,
                        run.kind,
                        run.state,
                        spec,
                        now,
                        run.outcome.as_ref().map(Value::to_string)
                    ],
                )
                .map_err(fail)?;
            if inserted > 0 && run.state == "pending" {
                ids.push(tx.last_insert_rowid());
            }
        }
        tx.commit().map_err(fail)?;
        Ok(ids)
    }

    /// A run of `task` now, outside its schedule (`schedule run-now`).
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn run_now(&self, task: &Task, now: i64) -> Result<i64, TablesError> {
        let spec = serde_json::to_string(task).map_err(fail)?;
        let conn = self.conn();
        let mut nonce = [0u8; 6];
        let _ = getrandom::fill(&mut nonce);
        let occurrence = format!(
            "manual-{now}-{}",
            nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let mut conn = conn;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.execute(
            "INSERT INTO schedule_runs (task, occurrence, scheduled_ms, kind, state, not_before_ms, spec, claimed_ms)
             VALUES (?1, ?2, ?3, 'manual', 'pending', ?3, ?4, ?3)",
            params![task.name, occurrence, now, spec],
        )
        .map_err(fail)?;
        let id = tx.last_insert_rowid();
        tx.execute("UPDATE schedule_meta SET version = version + 1", [])
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(id)
    }

    fn runs_where(
        &self,
        clause: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<RunRow>, TablesError> {
        let conn = self.conn();
        let mut statement = conn
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM schedule_runs WHERE {clause}"
            ))
            .map_err(fail)?;
        let rows = statement.query_map(args, run_row).map_err(fail)?;
        rows.map(|r| r.map(|(row, _)| row).map_err(fail)).collect()
    }

    /// Runs waiting to start, oldest occurrence first.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn pending(&self) -> Result<Vec<RunRow>, TablesError> {
        self.runs_where("state = 'pending' ORDER BY scheduled_ms, id", &[])
    }

    /// Runs marked running.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn running(&self) -> Result<Vec<RunRow>, TablesError> {
        self.runs_where("state = 'running' ORDER BY id", &[])
    }

    /// The run `id`.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn run(&self, id: i64) -> Result<Option<RunRow>, TablesError> {
        Ok(self.runs_where("id = ?1", &[&id])?.into_iter().next())
    }

    /// Marks a pending run running for `owner`; false when it was not pending any more.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn start(&self, id: i64, owner: &str, now: i64) -> Result<bool, TablesError> {
        let changed = self
            .conn()
            .execute(
                "UPDATE schedule_runs SET state = 'running', owner = ?2, started_ms = COALESCE(started_ms, ?3) WHERE id = ?1 AND state = 'pending'",
                params![id, owner, now],
            )
            .map_err(fail)?;
        Ok(changed == 1)
    }

    /// Takes over a running run whose owner `from` is gone; false when someone else did.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn adopt(&self, id: i64, from: Option<&str>, owner: &str) -> Result<bool, TablesError> {
        let changed = self
            .conn()
            .execute(
                "UPDATE schedule_runs SET owner = ?3 WHERE id = ?1 AND state = 'running' AND owner IS ?2",
                params![id, from, owner],
            )
            .map_err(fail)?;
        Ok(changed == 1)
    }

    /// Ends a run with `state` and its outcome.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn finish(
        &self,
        id: i64,
        state: &str,
        outcome: &Value,
        now: i64,
    ) -> Result<(), TablesError> {
        self.conn()
            .execute(
                "UPDATE schedule_runs SET state = ?2, outcome = ?3, finished_ms = ?4 WHERE id = ?1",
                params![id, state, outcome.to_string(), now],
            )
            .map_err(fail)?;
        Ok(())
    }

    /// Sends a failed run back to wait until `not_before`, as its next attempt: the steps
    /// that failed are forgotten (they run again), the finished ones are kept.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn retry(&self, id: i64, not_before: i64, outcome: &Value) -> Result<(), TablesError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.execute(
            "DELETE FROM schedule_steps WHERE run = ?1 AND state = 'failed'",
            [id],
        )
        .map_err(fail)?;
        tx.execute(
            "UPDATE schedule_runs SET state = 'pending', attempt = attempt + 1, not_before_ms = ?2, owner = NULL, outcome = ?3 WHERE id = ?1",
            params![id, not_before, outcome.to_string()],
        )
        .map_err(fail)?;
        tx.commit().map_err(fail)
    }

    /// The steps of run `id` recorded so far.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn steps(&self, id: i64) -> Result<Vec<StepRow>, TablesError> {
        let conn = self.conn();
        let mut statement = conn
            .prepare_cached(
                "SELECT step, state, entry, audit FROM schedule_steps WHERE run = ?1 ORDER BY step",
            )
            .map_err(fail)?;
        let rows = statement
            .query_map([id], |r| {
                let entry: Option<String> = r.get(2)?;
                let audit: Option<String> = r.get(3)?;
                Ok(StepRow {
                    step: r.get::<_, i64>(0)?.try_into().unwrap_or(usize::MAX),
                    state: r.get(1)?,
                    entry: entry.and_then(|e| serde_json::from_str(&e).ok()),
                    audit: audit
                        .and_then(|a| serde_json::from_str(&a).ok())
                        .unwrap_or_default(),
                })
            })
            .map_err(fail)?;
        rows.map(|r| r.map_err(fail)).collect()
    }

    /// Records that step `step` of run `id` is about to run (durable before it runs).
    ///
    /// # Errors
    /// The store cannot be written: the step must then not run.
    pub fn step_started(&self, id: i64, step: usize, now: i64) -> Result<(), TablesError> {
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO schedule_steps (run, step, state, started_ms) VALUES (?1, ?2, 'started', ?3)",
                params![id, i64::try_from(step).unwrap_or(i64::MAX), now],
            )
            .map_err(fail)?;
        Ok(())
    }

    /// Records how step `step` of run `id` ended.
    ///
    /// # Errors
    /// The store cannot be written.
    pub fn step_finished(
        &self,
        id: i64,
        step: usize,
        state: &str,
        entry: &Value,
        audit: &[String],
        now: i64,
    ) -> Result<(), TablesError> {
        self.conn()
            .execute(
                "INSERT INTO schedule_steps (run, step, state, entry, audit, started_ms, finished_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
                 ON CONFLICT (run, step) DO UPDATE SET state = excluded.state, entry = excluded.entry, audit = excluded.audit, finished_ms = excluded.finished_ms",
                params![
                    id,
                    i64::try_from(step).unwrap_or(i64::MAX),
                    state,
                    entry.to_string(),
                    json!(audit).to_string(),
                    now
                ],
            )
            .map_err(fail)?;
        Ok(())
    }

    /// The latest `limit` runs (of `task`, or of every task), newest first.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn history(&self, task: Option<&str>, limit: usize) -> Result<Vec<RunRow>, TablesError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        match task {
            Some(task) => self.runs_where(
                "task = ?1 ORDER BY scheduled_ms DESC, id DESC LIMIT ?2",
                &[&task, &limit],
            ),
            None => self.runs_where("1 ORDER BY scheduled_ms DESC, id DESC LIMIT ?1", &[&limit]),
        }
    }
}

/// Checkpoints of a run in the store.
pub(super) struct RunCheckpoints<'a> {
    pub(super) store: &'a Store,
    pub(super) run: i64,
    pub(super) prior: Vec<StepRow>,
}

impl Checkpoints for RunCheckpoints<'_> {
    fn prior(&self, index: usize) -> Prior {
        match self.prior.iter().find(|s| s.step == index) {
            None => Prior::None,
            Some(row) if row.state == "started" => Prior::InFlight,
            Some(row) => row.entry.clone().map_or(Prior::InFlight, Prior::Finished),
        }
    }

    fn started(&self, index: usize) -> Result<(), CheckpointError> {
        self.store
            .step_started(self.run, index, now_ms())
            .map_err(CheckpointError::of)
    }

    fn finished(
        &self,
        index: usize,
        entry: &Value,
        audit: &[String],
    ) -> Result<(), CheckpointError> {
        let state = entry["status"].as_str().unwrap_or("failed");
        self.store
            .step_finished(self.run, index, state, entry, audit, now_ms())
            .map_err(CheckpointError::of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str) -> Task {
        serde_json::from_value(
            json!({"name": name, "cron": "* * * * * *", "run": {"workflow": {"name": "w"}}}),
        )
        .expect("task")
    }

    fn on_time(ms: i64) -> NewRun {
        NewRun {
            occurrence: ms.to_string(),
            scheduled_ms: ms,
            kind: "on_time",
            state: "pending",
            outcome: None,
        }
    }

    #[test]
    fn an_occurrence_is_claimed_once_even_by_two_claimers() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("data.db");
        let (a, b) = (
            Store::open(&path).expect("a"),
            Store::open(&path).expect("b"),
        );
        let t = task("t");
        assert!(!a.put(&t, 1000).expect("put"));
        let seen = a.get("t").expect("get").expect("there").cursor_ms;
        assert_eq!(seen, 1000);
        let first = a
            .claim(&t, seen, 2000, &[on_time(2000)], 2000)
            .expect("claim");
        assert_eq!(first.len(), 1);
        // The second claimer read the cursor before the first moved it: it claims nothing.
        assert!(
            b.claim(&t, seen, 2000, &[on_time(2000)], 2000)
                .expect("claim")
                .is_empty()
        );
        // Even with the right cursor, an occurrence already claimed is not claimed again.
        assert!(
            b.claim(&t, 2000, 2000, &[on_time(2000)], 2000)
                .expect("claim")
                .is_empty()
        );
        assert_eq!(a.pending().expect("pending").len(), 1);
        assert!(a.start(first[0], "me", 2001).expect("start"));
        assert!(
            !b.start(first[0], "other", 2001).expect("start"),
            "started once"
        );
        a.step_started(first[0], 0, 2002).expect("started");
        a.step_finished(
            first[0],
            0,
            "ok",
            &json!({"status": "ok"}),
            &["c-1".into()],
            2003,
        )
        .expect("finished");
        a.step_started(first[0], 1, 2004).expect("started");
        let steps = b.steps(first[0]).expect("steps");
        assert_eq!(
            steps.iter().map(|s| s.state.as_str()).collect::<Vec<_>>(),
            ["ok", "started"]
        );
        assert_eq!(steps[0].audit, ["c-1"]);
        assert!(b.adopt(first[0], Some("me"), "new").expect("adopt"));
        assert!(!a.adopt(first[0], Some("me"), "again").expect("adopt"));
    }

    #[test]
    fn enabling_again_starts_from_now_and_removal_cancels_what_waits() {
        let dir = tempfile::tempdir().expect("dir");
        let store = Store::open(&dir.path().join("data.db")).expect("open");
        let t = task("t");
        store.put(&t, 1000).expect("put");
        assert!(store.set_enabled("t", false, 5000).expect("off"));
        assert_eq!(store.get("t").expect("get").expect("t").cursor_ms, 1000);
        assert!(store.set_enabled("t", true, 9000).expect("on"));
        assert_eq!(store.get("t").expect("get").expect("t").cursor_ms, 9000);
        assert!(!store.set_enabled("nope", true, 9000).expect("none"));
        let id = store.run_now(&t, 9500).expect("run now");
        assert!(store.remove("t", 9600).expect("remove"));
        let run = store.run(id).expect("run").expect("kept");
        assert_eq!(run.state, "cancelled");
        assert_eq!(store.history(Some("t"), 10).expect("history").len(), 1);
    }
}
