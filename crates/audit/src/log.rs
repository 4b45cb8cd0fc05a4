//! The audit log table: append, verify, query.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The hash before the first row.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How long a write waits for another connection's lock before it fails.
const BUSY_WAIT: Duration = Duration::from_secs(2);
/// The longest argument text a row holds itself (bytes). Longer text is kept whole in the
/// `audit_args` table under its SHA-256, which the row holds and the chain covers.
pub const ARGS_IN_ROW: usize = 64 * 1024;
/// How much of such a text the row keeps to be read at a glance (characters).
const ARGS_HEAD: usize = 1024;

/// Why the log could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the audit log {path} cannot be opened: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error(
        "the audit log cannot be written ({source}); the call was not run. Free disk space or close what locks {path}"
    )]
    Write {
        path: String,
        source: rusqlite::Error,
    },
    #[error("the audit log cannot be read: {0}")]
    Read(#[from] rusqlite::Error),
}

/// One row: a call's decision (result `started`, `blocked` or `denied`) or its outcome
/// (`success` or `failed`), tied together by `call_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// Identifies one call across its rows.
    pub call_id: String,
    /// The MCP client (`clientInfo.name`), or `cli`.
    pub caller: String,
    pub app: String,
    pub tool: String,
    /// Arguments after redaction, as JSON.
    pub args: String,
    /// The policy's decision (`auto_approve`, `require_approval`, …) plus how consent went.
    pub decision: String,
    pub result: String,
    pub risk: String,
    pub duration_ms: i64,
    pub error: Option<String>,
    /// What came back, summarised, never the content itself: for an image or file result,
    /// its type, size and SHA-256 (`image/png 48213 bytes sha256:…`). Left out of the row's
    /// hash when absent, so rows written before the column existed still verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Set when the arguments were longer than [`ARGS_IN_ROW`]: the SHA-256 of the whole
    /// text, kept in the `audit_args` table ([`AuditLog::whole_args`]); `args` then holds a
    /// JSON summary with its head. Left out of the hash when absent, like `output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_sha256: Option<String>,
}

impl Entry {
    /// The entry as its row stores it, and the whole argument text when it goes to the side
    /// table: arguments longer than [`ARGS_IN_ROW`] become a summary holding their head, size
    /// and SHA-256.
    pub fn stored(&self) -> (std::borrow::Cow<'_, Self>, Option<&str>) {
        if self.args.len() <= ARGS_IN_ROW || self.args_sha256.is_some() {
            return (std::borrow::Cow::Borrowed(self), None);
        }
        let hex = format!("{:x}", Sha256::digest(self.args.as_bytes()));
        let head: String = self.args.chars().take(ARGS_HEAD).collect();
        let summary = serde_json::json!({
            "$whole": format!("sha256:{hex}"),
            "chars": self.args.chars().count(),
            "bytes": self.args.len(),
            "head": head,
            "read": "aai-gateway audit show --full",
        });
        let stored = Self {
            args: summary.to_string(),
            args_sha256: Some(hex),
            ..self.clone()
        };
        (std::borrow::Cow::Owned(stored), Some(&self.args))
    }
}

/// A stored row with its place in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub id: i64,
    #[serde(flatten)]
    pub entry: Entry,
    pub prev_hash: String,
    pub hash: String,
}

/// The first row `verify` found wrong, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit log row {id}: {reason}")]
pub struct BadRow {
    pub id: i64,
    pub reason: String,
}

/// Filters for [`AuditLog::query`]; `None` matches everything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub app: Option<String>,
    pub tool: Option<String>,
    pub since_ms: Option<i64>,
    pub after_id: Option<i64>,
    pub limit: Option<i64>,
    /// Rows whose decision contains this text (e.g. `:allowed_once`).
    pub decision_contains: Option<String>,
    /// Rows with exactly this result (`started`, `success`, …).
    pub result: Option<String>,
}

/// The audit log in `data.db`. Appends are serialized and each is its own transaction in WAL
/// mode, so a killed process never loses a row it reported written.
pub struct AuditLog {
    conn: Arc<Mutex<Connection>>,
    path: String,
}

/// A row's columns, in the order [`read_row`] reads them.
const SELECT_ROWS: &str = "SELECT id, ts_ms, call_id, caller, app, tool, args, decision, result, risk, duration_ms, error, prev_hash, hash, output, args_sha256
             FROM audit_log";

/// The current time in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// RFC 3339 UTC with milliseconds, for people and exports.
pub fn format_ts(ts_ms: i64) -> String {
    let time = SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ts_ms).unwrap_or(0));
    humantime::format_rfc3339_millis(time).to_string()
}

/// Opens `data.db` in WAL mode with a short busy timeout and a small page cache.
pub(crate) fn connect(path: &Path) -> Result<(Connection, String), AuditError> {
    let name = path.display().to_string();
    let fail = |source| AuditError::Open {
        path: name.clone(),
        source,
    };
    #[cfg(unix)]
    {
        // Created private to the user; SQLite gives its -wal and -shm files the same mode.
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path);
    }
    let conn = Connection::open(path).map_err(fail)?;
    conn.busy_timeout(BUSY_WAIT).map_err(fail)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(fail)?;
    // A small page cache (64 KiB): an append touches the right edge of the table and of its
    // index, grants are few, and the gateway's memory budget is shared with every app.
    conn.pragma_update(None, "cache_size", -64).map_err(fail)?;
    Ok((conn, name))
}

fn row_hash(prev_hash: &str, entry: &Entry) -> String {
    // Field order is fixed by the struct, so the same row always hashes the same.
    let body = serde_json::to_string(entry).unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(body.as_bytes());
    format!("{:x}", hasher.finalize())
}

impl AuditLog {
    /// The log and the grants of one `data.db`, sharing one connection.
    ///
    /// # Errors
    /// [`AuditError::Open`].
    pub fn open_with_grants(path: &Path) -> Result<(Self, crate::Grants), AuditError> {
        let log = Self::open(path)?;
        let grants = crate::Grants::on_connection(log.conn.clone(), log.path.clone())?;
        Ok((log, grants))
    }

    /// Opens (creating if needed) the log in the SQLite file at `path`.
    ///
    /// # Errors
    /// [`AuditError::Open`] when the file cannot be opened or set up.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let (conn, name) = connect(path)?;
        let fail = |source| AuditError::Open {
            path: name.clone(),
            source,
        };
        // NORMAL in WAL mode: a committed row survives the process being killed; only power
        // loss can take the last transactions, and it keeps appends fast.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(fail)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS audit_log (
                id INTEGER PRIMARY KEY,
                ts_ms INTEGER NOT NULL, call_id TEXT NOT NULL, caller TEXT NOT NULL,
                app TEXT NOT NULL, tool TEXT NOT NULL, args TEXT NOT NULL,
                decision TEXT NOT NULL, result TEXT NOT NULL, risk TEXT NOT NULL,
                duration_ms INTEGER NOT NULL, error TEXT,
                prev_hash TEXT NOT NULL, hash TEXT NOT NULL, output TEXT);
             CREATE INDEX IF NOT EXISTS audit_app_tool ON audit_log(app, tool);
             CREATE TABLE IF NOT EXISTS audit_head (
                one INTEGER PRIMARY KEY CHECK (one = 1), last_id INTEGER NOT NULL, last_hash TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS audit_args (sha256 TEXT PRIMARY KEY, text TEXT NOT NULL);",
        )
        .map_err(fail)?;
        // Logs from before the `output` and `args_sha256` columns gain them in place.
        for column in ["output", "args_sha256"] {
            let present: bool = conn
                .query_row(
                    "SELECT COUNT(*) FROM pragma_table_info('audit_log') WHERE name = ?1",
                    [column],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(fail)?
                > 0;
            if !present {
                conn.execute_batch(&format!("ALTER TABLE audit_log ADD COLUMN {column} TEXT"))
                    .map_err(fail)?;
            }
        }
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path: name,
        })
    }

    /// The connection; a panic elsewhere while it was held does not make it unusable.
    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends one row and returns its id. The row is durable when this returns.
    ///
    /// # Errors
    /// [`AuditError::Write`] (disk full, database locked, …): the caller must not proceed as
    /// if the row existed.
    pub fn append(&self, entry: &Entry) -> Result<i64, AuditError> {
        self.write_row(&mut self.lock(), entry)
    }

    /// [`AuditLog::append`] without waiting: `Ok(None)`, nothing written, when another
    /// connection holds the database's write lock at this moment (the caller appends again
    /// where it may wait), so the common case never needs a thread that may block.
    ///
    /// # Errors
    /// As [`AuditLog::append`].
    pub fn try_append(&self, entry: &Entry) -> Result<Option<i64>, AuditError> {
        let mut conn = self.lock();
        conn.busy_timeout(Duration::ZERO)
            .map_err(|source| AuditError::Write {
                path: self.path.clone(),
                source,
            })?;
        let written = self.write_row(&mut conn, entry);
        let _ = conn.busy_timeout(BUSY_WAIT);
        match written {
            Err(AuditError::Write {
                source: rusqlite::Error::SqliteFailure(error, _),
                ..
            }) if error.code == rusqlite::ErrorCode::DatabaseBusy => Ok(None),
            other => other.map(Some),
        }
    }

    fn write_row(&self, conn: &mut Connection, entry: &Entry) -> Result<i64, AuditError> {
        let fail = |source| AuditError::Write {
            path: self.path.clone(),
            source,
        };
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        let head: Option<(i64, String)> = tx
            .query_row(
                "SELECT last_id, last_hash FROM audit_head WHERE one = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(fail)?;
        let (last_id, prev_hash) = head.unwrap_or((0, GENESIS.to_owned()));
        let id = last_id + 1;
        let (entry, whole) = entry.stored();
        if let (Some(text), Some(sha256)) = (whole, entry.args_sha256.as_deref()) {
            // The same text approved twice is kept once.
            tx.execute(
                "INSERT OR IGNORE INTO audit_args (sha256, text) VALUES (?1, ?2)",
                params![sha256, text],
            )
            .map_err(fail)?;
        }
        let hash = row_hash(&prev_hash, &entry);
        tx.execute(
            "INSERT INTO audit_log (id, ts_ms, call_id, caller, app, tool, args, decision, result, risk, duration_ms, error, prev_hash, hash, output, args_sha256)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            params![
                id, entry.ts_ms, entry.call_id, entry.caller, entry.app, entry.tool, entry.args, entry.decision,
                entry.result, entry.risk, entry.duration_ms, entry.error, prev_hash, hash, entry.output,
                entry.args_sha256
            ],
        )
        .map_err(fail)?;
        tx.execute(
            "INSERT INTO audit_head (one, last_id, last_hash) VALUES (1, ?1, ?2)
             ON CONFLICT(one) DO UPDATE SET last_id = excluded.last_id, last_hash = excluded.last_hash",
            params![id, hash],
        )
        .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(id)
    }

    /// Rows matching `filter`, oldest first.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn query(&self, filter: &Filter) -> Result<Vec<Row>, AuditError> {
        let conn = self.lock();
        let mut statement = conn.prepare(&format!(
            "{SELECT_ROWS}
             WHERE (?1 IS NULL OR app = ?1) AND (?2 IS NULL OR tool = ?2) AND (?3 IS NULL OR ts_ms >= ?3) AND (?4 IS NULL OR id > ?4)
               AND (?6 IS NULL OR instr(decision, ?6) > 0) AND (?7 IS NULL OR result = ?7)
             ORDER BY id LIMIT ?5"
        ))?;
        let rows = statement.query_map(
            params![
                filter.app,
                filter.tool,
                filter.since_ms,
                filter.after_id,
                filter.limit.unwrap_or(-1),
                filter.decision_contains,
                filter.result
            ],
            read_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Rows whose caller, app, tool, decision, result, error or arguments contain `text`
    /// (any row when `None`), newest first, older than `before_id` when given; at most `limit`.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn search(
        &self,
        text: Option<&str>,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Row>, AuditError> {
        let conn = self.lock();
        let mut statement = conn.prepare(&format!(
            "{SELECT_ROWS}
             WHERE (?1 IS NULL OR instr(lower(caller || ' ' || app || ' ' || tool || ' ' || decision || ' ' || result || ' ' || COALESCE(error, '') || ' ' || args), lower(?1)) > 0)
               AND (?2 IS NULL OR id < ?2)
             ORDER BY id DESC LIMIT ?3"
        ))?;
        let rows = statement.query_map(params![text, before_id, limit], read_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The whole argument text of `row`: its own `args`, or the text the side table keeps
    /// under its hash.
    ///
    /// # Errors
    /// [`AuditError::Read`]; a missing side text is reported as the row's own summary
    /// (`verify` names it).
    pub fn whole_args(&self, row: &Row) -> Result<String, AuditError> {
        match &row.entry.args_sha256 {
            Some(sha256) => Ok(self
                .side_text(sha256)?
                .unwrap_or_else(|| row.entry.args.clone())),
            None => Ok(row.entry.args.clone()),
        }
    }

    fn side_text(&self, sha256: &str) -> Result<Option<String>, AuditError> {
        Ok(self
            .lock()
            .query_row(
                "SELECT text FROM audit_args WHERE sha256 = ?1",
                [sha256],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Every caller that has a row, by name.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn callers(&self) -> Result<Vec<String>, AuditError> {
        let conn = self.lock();
        let mut statement =
            conn.prepare("SELECT DISTINCT caller FROM audit_log ORDER BY caller")?;
        let rows = statement.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The newest `count` rows, oldest first.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn tail(&self, count: i64) -> Result<Vec<Row>, AuditError> {
        let last = {
            let conn = self.lock();
            conn.query_row("SELECT COALESCE(MAX(id), 0) FROM audit_log", [], |r| {
                r.get::<_, i64>(0)
            })?
        };
        self.query(&Filter {
            after_id: Some((last - count).max(0)),
            ..Filter::default()
        })
    }

    /// Walks the whole chain. Returns the number of rows, or the first row that was edited,
    /// inserted, deleted or moved.
    ///
    /// # Errors
    /// [`BadRow`] naming the first bad row (or [`AuditError::Read`] as a `BadRow` with id 0).
    pub fn verify(&self) -> Result<i64, BadRow> {
        let rows = self.query(&Filter::default()).map_err(|e| BadRow {
            id: 0,
            reason: e.to_string(),
        })?;
        let mut prev_hash = GENESIS.to_owned();
        let mut expected_id = 1;
        for row in &rows {
            if row.id != expected_id {
                let reason = if row.id > expected_id {
                    format!("rows {expected_id}..{} are missing", row.id - 1)
                } else {
                    "is out of order".to_owned()
                };
                return Err(BadRow { id: row.id, reason });
            }
            if row.prev_hash != prev_hash {
                return Err(BadRow { id: row.id, reason: "does not follow the row before it (rows were removed, inserted or reordered)".into() });
            }
            if row_hash(&prev_hash, &row.entry) != row.hash {
                return Err(BadRow {
                    id: row.id,
                    reason: "was edited: its contents do not match its hash".into(),
                });
            }
            if let Some(sha256) = &row.entry.args_sha256 {
                let reason = match self.side_text(sha256) {
                    Ok(Some(text))
                        if format!("{:x}", Sha256::digest(text.as_bytes())) == *sha256 =>
                    {
                        None
                    }
                    Ok(Some(_)) => Some("its whole arguments in audit_args were edited".to_owned()),
                    Ok(None) => Some("its whole arguments are missing from audit_args".to_owned()),
                    Err(error) => Some(error.to_string()),
                };
                if let Some(reason) = reason {
                    return Err(BadRow { id: row.id, reason });
                }
            }
            prev_hash.clone_from(&row.hash);
            expected_id += 1;
        }
        let conn = self.lock();
        let head: Option<(i64, String)> = conn
            .query_row(
                "SELECT last_id, last_hash FROM audit_head WHERE one = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| BadRow {
                id: 0,
                reason: e.to_string(),
            })?;
        let count = expected_id - 1;
        match head {
            Some((last_id, last_hash)) if last_id != count || last_hash != prev_hash => {
                Err(BadRow {
                    id: count + 1,
                    reason: format!(
                        "the log ends at row {count} but row {last_id} was written: rows at the end were removed"
                    ),
                })
            }
            None if count > 0 => Err(BadRow {
                id: 1,
                reason: "the chain head is missing".into(),
            }),
            _ => Ok(count),
        }
    }
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        entry: Entry {
            ts_ms: r.get(1)?,
            call_id: r.get(2)?,
            caller: r.get(3)?,
            app: r.get(4)?,
            tool: r.get(5)?,
            args: r.get(6)?,
            decision: r.get(7)?,
            result: r.get(8)?,
            risk: r.get(9)?,
            duration_ms: r.get(10)?,
            error: r.get(11)?,
            output: r.get(14)?,
            args_sha256: r.get(15)?,
        },
        prev_hash: r.get(12)?,
        hash: r.get(13)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_append_gives_way_to_another_writer_and_writes_otherwise() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("data.db");
        let log = AuditLog::open(&path).expect("log");
        assert_eq!(log.try_append(&entry(1)).expect("append"), Some(1));
        let other = Connection::open(&path).expect("other");
        other.execute_batch("BEGIN IMMEDIATE").expect("lock");
        let started = std::time::Instant::now();
        assert_eq!(
            log.try_append(&entry(2)).expect("busy is not an error"),
            None
        );
        assert!(
            started.elapsed() < BUSY_WAIT,
            "it did not wait for the lock"
        );
        other.execute_batch("COMMIT").expect("unlock");
        // Nothing was half-written, and the connection waits again as before.
        assert_eq!(log.try_append(&entry(2)).expect("append"), Some(2));
        assert_eq!(log.append(&entry(3)).expect("append"), 3);
        assert_eq!(log.verify().expect("verify"), 3);
    }

    fn entry(i: i64) -> Entry {
        Entry {
            ts_ms: 1_700_000_000_000 + i,
            call_id: format!("c{i}"),
            caller: "claude-code".into(),
            app: "org.example.mail".into(),
            tool: if i % 2 == 0 {
                "send".into()
            } else {
                "search".into()
            },
            args: format!(r#"{{"n":{i}}}"#),
            decision: "auto_approve".into(),
            result: "success".into(),
            risk: "medium".into(),
            duration_ms: 3,
            error: None,
            output: None,
            args_sha256: None,
        }
    }

    fn log_with(rows: i64) -> (tempfile::TempDir, AuditLog) {
        let dir = tempfile::tempdir().expect("dir");
        let log = AuditLog::open(&dir.path().join("data.db")).expect("open");
        for i in 1..=rows {
            assert_eq!(log.append(&entry(i)).expect("append"), i);
        }
        (dir, log)
    }

    fn raw(dir: &tempfile::TempDir) -> Connection {
        Connection::open(dir.path().join("data.db")).expect("raw")
    }

    #[test]
    fn search_finds_text_anywhere_newest_first_and_pages() {
        let (_dir, log) = log_with(10);
        let mut odd = entry(11);
        odd.caller = "Cursor".into();
        odd.args = r#"{"to":"Bob@Example.org"}"#.into();
        log.append(&odd).expect("append");
        let ids = |rows: Vec<Row>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(
            ids(log.search(Some("bob@example"), None, 50).expect("search")),
            [11]
        );
        assert_eq!(
            ids(log.search(Some("CURSOR"), None, 50).expect("search")),
            [11]
        );
        assert_eq!(
            ids(log.search(Some("send"), None, 3).expect("search")),
            [10, 8, 6]
        );
        assert_eq!(
            ids(log.search(Some("send"), Some(6), 2).expect("page")),
            [4, 2]
        );
        assert_eq!(ids(log.search(None, None, 2).expect("all")), [11, 10]);
        // Text is data: SQL's own wildcards and quotes match only themselves.
        assert!(
            log.search(Some("%' OR 1=1 --"), None, 50)
                .expect("search")
                .is_empty()
        );
        assert_eq!(log.callers().expect("callers"), ["Cursor", "claude-code"]);
    }

    #[test]
    fn an_untouched_chain_verifies_and_survives_reopening() {
        let (dir, log) = log_with(10);
        assert_eq!(log.verify(), Ok(10));
        drop(log);
        let log = AuditLog::open(&dir.path().join("data.db")).expect("reopen");
        assert_eq!(log.append(&entry(11)).expect("append"), 11);
        assert_eq!(log.verify(), Ok(11));
    }

    #[test]
    fn edits_are_found() {
        let (dir, log) = log_with(10);
        raw(&dir)
            .execute("UPDATE audit_log SET args = '{\"n\":0}' WHERE id = 4", [])
            .expect("edit");
        let bad = log.verify().expect_err("edited");
        assert_eq!(bad.id, 4);
        assert!(bad.reason.contains("edited"), "{bad}");
    }

    #[test]
    fn deletions_are_found() {
        let (dir, log) = log_with(10);
        raw(&dir)
            .execute("DELETE FROM audit_log WHERE id = 5", [])
            .expect("delete");
        assert_eq!(log.verify().expect_err("deleted").id, 6);
        let (dir, log) = log_with(10);
        raw(&dir)
            .execute("DELETE FROM audit_log WHERE id >= 9", [])
            .expect("truncate");
        let bad = log.verify().expect_err("truncated");
        assert_eq!(bad.id, 9);
        assert!(bad.reason.contains("removed"), "{bad}");
    }

    #[test]
    fn insertions_and_reordering_are_found() {
        let (dir, log) = log_with(10);
        let conn = raw(&dir);
        conn.execute("UPDATE audit_log SET id = id + 100 WHERE id >= 6", [])
            .expect("shift");
        conn.execute("UPDATE audit_log SET id = id - 99 WHERE id >= 100", [])
            .expect("shift back");
        conn.execute(
            "INSERT INTO audit_log SELECT 6, ts_ms, 'forged', caller, app, tool, args, decision, result, risk, duration_ms, error, prev_hash, hash, output, args_sha256 FROM audit_log WHERE id = 5",
            [],
        )
        .expect("insert");
        assert_eq!(log.verify().expect_err("inserted").id, 6);

        let (dir, log) = log_with(10);
        let conn = raw(&dir);
        conn.execute("UPDATE audit_log SET id = -3 WHERE id = 3", [])
            .expect("swap");
        conn.execute("UPDATE audit_log SET id = 3 WHERE id = 4", [])
            .expect("swap");
        conn.execute("UPDATE audit_log SET id = 4 WHERE id = -3", [])
            .expect("swap");
        assert_eq!(log.verify().expect_err("reordered").id, 3);
    }

    #[test]
    fn queries_filter_and_tail() {
        let (_dir, log) = log_with(10);
        let sends = log
            .query(&Filter {
                tool: Some("send".into()),
                ..Filter::default()
            })
            .expect("query");
        assert_eq!(
            sends.iter().map(|r| r.id).collect::<Vec<_>>(),
            vec![2, 4, 6, 8, 10]
        );
        let since = log
            .query(&Filter {
                since_ms: Some(1_700_000_000_008),
                ..Filter::default()
            })
            .expect("query");
        assert_eq!(since.len(), 3);
        assert_eq!(
            log.tail(2)
                .expect("tail")
                .iter()
                .map(|r| r.id)
                .collect::<Vec<_>>(),
            vec![9, 10]
        );
        assert_eq!(format_ts(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn a_locked_database_fails_appends_clearly() {
        let (dir, log) = log_with(1);
        let conn = raw(&dir);
        conn.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        let error = log.append(&entry(2)).expect_err("locked");
        assert!(error.to_string().contains("cannot be written"), "{error}");
        conn.execute_batch("ROLLBACK").expect("unlock");
        assert_eq!(log.append(&entry(2)).expect("append after unlock"), 2);
        assert_eq!(log.verify(), Ok(2));
    }

    /// Arguments past the row's cap are kept whole beside the chain: the row holds their
    /// head, size and hash, `whole_args` gives the text back, and an edited or removed side
    /// text breaks `verify` at that row.
    #[test]
    fn long_arguments_are_kept_whole_beside_the_chain() {
        let (dir, log) = log_with(2);
        let command = "echo ".to_owned() + &"a".repeat(ARGS_IN_ROW) + "; touch /tmp/HIDDEN-TAIL";
        let mut long = entry(3);
        long.args = serde_json::json!({"command": command}).to_string();
        assert_eq!(log.append(&long).expect("append"), 3);
        assert_eq!(log.append(&long).expect("the same text again"), 4);
        assert_eq!(log.verify(), Ok(4));
        let rows = log.query(&Filter::default()).expect("rows");
        let row = &rows[2];
        assert!(row.entry.args.len() < 8 * 1024, "the row holds a summary");
        assert!(!row.entry.args.contains("HIDDEN-TAIL"));
        let summary: serde_json::Value = serde_json::from_str(&row.entry.args).expect("json");
        let sha256 = row.entry.args_sha256.clone().expect("hash");
        assert_eq!(summary["$whole"], format!("sha256:{sha256}"));
        assert_eq!(summary["bytes"], long.args.len());
        assert_eq!(log.whole_args(row).expect("whole"), long.args);
        assert_eq!(log.whole_args(&rows[0]).expect("short"), rows[0].entry.args);
        let conn = raw(&dir);
        let one: i64 = conn
            .query_row("SELECT COUNT(*) FROM audit_args", [], |r| r.get(0))
            .expect("count");
        assert_eq!(one, 1, "kept once");
        conn.execute(
            "UPDATE audit_args SET text = replace(text, 'HIDDEN-TAIL', 'harmless')",
            [],
        )
        .expect("edit");
        let bad = log.verify().expect_err("edited side text");
        assert_eq!(bad.id, 3);
        assert!(bad.reason.contains("edited"), "{bad}");
        conn.execute("DELETE FROM audit_args", []).expect("delete");
        let bad = log.verify().expect_err("removed side text");
        assert_eq!(bad.id, 3);
        assert!(bad.reason.contains("missing"), "{bad}");
        // The hash in the row is covered by the chain like every other field.
        conn.execute("UPDATE audit_log SET args_sha256 = NULL WHERE id = 3", [])
            .expect("edit");
        assert_eq!(log.verify().expect_err("row edited").id, 3);
    }

    /// A log written before the `output` column existed opens, gains the column, and its
    /// rows still verify; an output, once written, is covered by the chain.
    #[test]
    fn output_summaries_join_the_chain_without_breaking_old_rows() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("data.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(
                "CREATE TABLE audit_log (id INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, call_id TEXT NOT NULL,
                    caller TEXT NOT NULL, app TEXT NOT NULL, tool TEXT NOT NULL, args TEXT NOT NULL,
                    decision TEXT NOT NULL, result TEXT NOT NULL, risk TEXT NOT NULL, duration_ms INTEGER NOT NULL,
                    error TEXT, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
                 CREATE TABLE audit_head (one INTEGER PRIMARY KEY CHECK (one = 1), last_id INTEGER NOT NULL, last_hash TEXT NOT NULL);",
            )
            .expect("old schema");
            let old = entry(1);
            let hash = row_hash(GENESIS, &old);
            conn.execute(
                "INSERT INTO audit_log VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![old.ts_ms, old.call_id, old.caller, old.app, old.tool, old.args, old.decision,
                        old.result, old.risk, old.duration_ms, old.error, GENESIS, hash],
            )
            .expect("old row");
            conn.execute("INSERT INTO audit_head VALUES (1, 1, ?1)", params![hash])
                .expect("head");
        }
        let log = AuditLog::open(&path).expect("reopen");
        assert_eq!(log.verify(), Ok(1));
        let mut shot = entry(2);
        shot.output = Some("image/png 1200 bytes sha256:ab".into());
        log.append(&shot).expect("append");
        assert_eq!(log.verify(), Ok(2));
        let rows = log.query(&Filter::default()).expect("rows");
        assert_eq!(
            rows[1].entry.output.as_deref(),
            Some("image/png 1200 bytes sha256:ab")
        );
        let conn = Connection::open(&path).expect("open");
        conn.execute(
            "UPDATE audit_log SET output = 'image/png 1 bytes' WHERE id = 2",
            [],
        )
        .expect("edit");
        assert_eq!(log.verify().expect_err("edited").id, 2);
    }
}
