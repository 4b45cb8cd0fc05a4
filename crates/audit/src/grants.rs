//! Remembered consent: which client may run which app's tools without asking again, and how
//! the user said so. Kept in the same `data.db` as the audit log.
//!
//! A grant is `always` (until revoked) or `session` (until the client that got it
//! disconnects; rows carry the session's id and are removed when it ends, or at the next
//! start when the process that held it is gone). "Allow once" is never stored: it is the
//! audit row of that one call. A grant may carry a command `prefix` (the terminal's
//! "always allow commands starting with `git status`"); the gateway decides what a prefix
//! covers.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::log::{AuditError, now_ms};

const GRANTS_TABLE: &str = "CREATE TABLE IF NOT EXISTS grants (
    client TEXT NOT NULL, app TEXT NOT NULL, tool TEXT NOT NULL DEFAULT '',
    prefix TEXT NOT NULL DEFAULT '', scope TEXT NOT NULL, session TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL, via TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (client, app, tool, prefix, session));";

/// Grants of the first versions (always, per tool or app) move into `grants` once.
const MIGRATE_V1: &str = "INSERT OR IGNORE INTO grants (client, app, tool, scope, created_ms, via)
    SELECT client, app, tool, 'always', created_ms, 'an earlier version' FROM consent_grants;
    DROP TABLE consent_grants;";

/// How long a grant lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Until the client's session ends.
    Session,
    /// Until revoked.
    Always,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Always => "always",
        }
    }

    fn parse(text: &str) -> Self {
        if text == "session" {
            Self::Session
        } else {
            Self::Always
        }
    }
}

/// The client of grants the user made for every client at once (a credential bound to a store
/// app at its install). No MCP client is called this: the server renames one that says so.
pub const EVERY_CLIENT: &str = "*";

/// One remembered "allow".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// The MCP client (its reported `clientInfo.name`) the grant is for.
    pub client: String,
    pub app: String,
    /// `None`: every tool of the app.
    pub tool: Option<String>,
    /// Only commands starting with these words (terminal tools).
    pub prefix: Option<String>,
    pub scope: Scope,
    /// The session a `session` grant belongs to.
    pub session: Option<String>,
    pub created_ms: i64,
    /// How it was given: `elicitation`, `dialog`, `terminal`, `cli`.
    pub via: String,
}

impl Grant {
    /// An `always` grant of a whole tool (or app, `tool: None`), given on the command line.
    pub fn always(client: &str, app: &str, tool: Option<&str>, via: &str) -> Self {
        Self {
            client: client.to_owned(),
            app: app.to_owned(),
            tool: tool.map(str::to_owned),
            prefix: None,
            scope: Scope::Always,
            session: None,
            created_ms: now_ms(),
            via: via.to_owned(),
        }
    }
}

/// What a client holds for one tool: a whole-tool grant, or only command prefixes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// A grant covers every call of the tool.
    pub whole: bool,
    /// Command prefixes granted for the tool.
    pub prefixes: Vec<String>,
}

/// The grants table.
pub struct Grants {
    conn: Arc<Mutex<Connection>>,
    path: String,
}

impl Grants {
    /// Opens (creating if needed) the grants in the SQLite file at `path`.
    ///
    /// # Errors
    /// [`AuditError::Open`].
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let (conn, name) = crate::log::connect(path)?;
        Self::on_connection(Arc::new(Mutex::new(conn)), name)
    }

    /// Grants on a connection the audit log already opened (same file).
    pub(crate) fn on_connection(
        conn: Arc<Mutex<Connection>>,
        path: String,
    ) -> Result<Self, AuditError> {
        {
            let mut conn = conn
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let fail = |source| AuditError::Open {
                path: path.clone(),
                source,
            };
            conn.execute_batch(GRANTS_TABLE).map_err(fail)?;
            let old: Option<i64> = conn
                .query_row(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'consent_grants'",
                    [],
                    |r| r.get(0),
                )
                .optional()
                .map_err(fail)?;
            if old.is_some() {
                let tx = conn.transaction().map_err(fail)?;
                tx.execute_batch(MIGRATE_V1).map_err(fail)?;
                tx.commit().map_err(fail)?;
            }
        }
        Ok(Self { conn, path })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_error(&self) -> impl Fn(rusqlite::Error) -> AuditError + '_ {
        |source| AuditError::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// What `client` holds for `tool` of `app`: `always` grants and those of `session`.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn held(
        &self,
        client: &str,
        app: &str,
        tool: &str,
        session: Option<&str>,
    ) -> Result<Held, AuditError> {
        let conn = self.lock();
        let mut statement = conn.prepare_cached(
            "SELECT prefix FROM grants WHERE client = ?1 AND app = ?2 AND (tool = '' OR tool = ?3)
             AND (scope = 'always' OR (scope = 'session' AND session = ?4))",
        )?;
        let rows = statement.query_map(params![client, app, tool, session.unwrap_or("")], |r| {
            r.get::<_, String>(0)
        })?;
        let mut held = Held::default();
        for prefix in rows {
            let prefix = prefix?;
            if prefix.is_empty() {
                held.whole = true;
            } else {
                held.prefixes.push(prefix);
            }
        }
        Ok(held)
    }

    /// Whether `client` may run every call of `tool` of `app` (`always` grants only).
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn allows(&self, client: &str, app: &str, tool: &str) -> Result<bool, AuditError> {
        Ok(self.held(client, app, tool, None)?.whole)
    }

    /// Remembers `grant`, replacing an equal one.
    ///
    /// # Errors
    /// [`AuditError::Write`].
    pub fn grant(&self, grant: &Grant) -> Result<(), AuditError> {
        self.lock()
            .execute(
                "INSERT OR REPLACE INTO grants (client, app, tool, prefix, scope, session, created_ms, via)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    grant.client,
                    grant.app,
                    grant.tool.as_deref().unwrap_or(""),
                    grant.prefix.as_deref().unwrap_or(""),
                    grant.scope.as_str(),
                    grant.session.as_deref().unwrap_or(""),
                    grant.created_ms,
                    grant.via
                ],
            )
            .map_err(self.write_error())?;
        Ok(())
    }

    /// Forgets grants; returns how many. `tool: None` removes every grant of that app for
    /// that client (app-wide, per tool, prefixes, sessions).
    ///
    /// # Errors
    /// [`AuditError::Write`].
    pub fn revoke(&self, client: &str, app: &str, tool: Option<&str>) -> Result<usize, AuditError> {
        let conn = self.lock();
        match tool {
            Some(tool) => conn.execute(
                "DELETE FROM grants WHERE client = ?1 AND app = ?2 AND tool = ?3",
                params![client, app, tool],
            ),
            None => conn.execute(
                "DELETE FROM grants WHERE client = ?1 AND app = ?2",
                params![client, app],
            ),
        }
        .map_err(self.write_error())
    }

    /// Forgets everything granted for `app_id`, for every client: its tools and the
    /// credentials bound to it (`env:<VAR>` grants for `<app_id>@<origin>`). For an app that
    /// is removed, so a later app of the same id inherits nothing.
    ///
    /// # Errors
    /// [`AuditError::Write`].
    pub fn forget_app(&self, app_id: &str) -> Result<usize, AuditError> {
        self.lock()
            .execute(
                "DELETE FROM grants WHERE app = ?1
                 OR (substr(app, 1, 4) = 'env:' AND substr(tool, 1, length(?1) + 1) = ?1 || '@')",
                params![app_id],
            )
            .map_err(self.write_error())
    }

    /// Forgets exactly `grant` (its client, app, tool, prefix and session); whether it was there.
    ///
    /// # Errors
    /// [`AuditError::Write`].
    pub fn revoke_one(&self, grant: &Grant) -> Result<bool, AuditError> {
        self.lock()
            .execute(
                "DELETE FROM grants WHERE client = ?1 AND app = ?2 AND tool = ?3 AND prefix = ?4 AND session = ?5",
                params![
                    grant.client,
                    grant.app,
                    grant.tool.as_deref().unwrap_or(""),
                    grant.prefix.as_deref().unwrap_or(""),
                    grant.session.as_deref().unwrap_or("")
                ],
            )
            .map(|n| n > 0)
            .map_err(self.write_error())
    }

    /// Forgets the grants of a session that ended.
    ///
    /// # Errors
    /// [`AuditError::Write`].
    pub fn end_session(&self, session: &str) -> Result<usize, AuditError> {
        self.lock()
            .execute(
                "DELETE FROM grants WHERE scope = 'session' AND session = ?1",
                params![session],
            )
            .map_err(self.write_error())
    }

    /// Forgets the session grants whose session `alive` says is gone (a process that
    /// crashed could not end its sessions).
    ///
    /// # Errors
    /// [`AuditError::Read`] or [`AuditError::Write`].
    pub fn end_sessions_unless(&self, alive: impl Fn(&str) -> bool) -> Result<usize, AuditError> {
        let sessions: Vec<String> = {
            let conn = self.lock();
            let mut statement =
                conn.prepare("SELECT DISTINCT session FROM grants WHERE scope = 'session'")?;
            statement
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?
        };
        let mut removed = 0;
        for session in sessions.iter().filter(|s| !alive(s)) {
            removed += self.end_session(session)?;
        }
        Ok(removed)
    }

    /// Every grant, by client, app and tool.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn list(&self) -> Result<Vec<Grant>, AuditError> {
        let conn = self.lock();
        let mut statement = conn.prepare(
            "SELECT client, app, tool, prefix, scope, session, created_ms, via FROM grants
             ORDER BY client, app, tool, prefix",
        )?;
        let some = |text: String| (!text.is_empty()).then_some(text);
        let rows = statement.query_map([], |r| {
            Ok(Grant {
                client: r.get(0)?,
                app: r.get(1)?,
                tool: some(r.get(2)?),
                prefix: some(r.get(3)?),
                scope: Scope::parse(&r.get::<_, String>(4)?),
                session: some(r.get(5)?),
                created_ms: r.get(6)?,
                via: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(client: &str, app: &str, tool: &str, session: &str) -> Grant {
        Grant {
            scope: Scope::Session,
            session: Some(session.to_owned()),
            ..Grant::always(client, app, Some(tool), "elicitation")
        }
    }

    #[test]
    fn grants_are_per_client_and_per_tool_or_app() {
        let dir = tempfile::tempdir().expect("dir");
        let grants = Grants::open(&dir.path().join("data.db")).expect("open");
        let mail = "org.example.mail";
        grants
            .grant(&Grant::always("claude-code", mail, Some("send"), "cli"))
            .expect("grant");
        assert!(grants.allows("claude-code", mail, "send").expect("read"));
        assert!(!grants.allows("claude-code", mail, "delete").expect("read"));
        assert!(
            !grants.allows("cursor", mail, "send").expect("read"),
            "another client"
        );
        grants
            .grant(&Grant::always("cursor", mail, None, "cli"))
            .expect("grant all");
        assert!(grants.allows("cursor", mail, "delete").expect("read"));
        assert_eq!(grants.list().expect("list").len(), 2);
        assert_eq!(grants.revoke("cursor", mail, None).expect("revoke"), 1);
        assert!(!grants.allows("cursor", mail, "delete").expect("read"));
        // Survives reopening.
        drop(grants);
        let grants = Grants::open(&dir.path().join("data.db")).expect("reopen");
        assert!(grants.allows("claude-code", mail, "send").expect("read"));
    }

    #[test]
    fn one_grant_is_revoked_exactly() {
        let dir = tempfile::tempdir().expect("dir");
        let grants = Grants::open(&dir.path().join("data.db")).expect("open");
        let whole = Grant::always("c", "local.terminal", Some("bash_execute"), "cli");
        let prefix = Grant {
            prefix: Some("git status".into()),
            ..whole.clone()
        };
        let other_session = session("c", "local.terminal", "bash_execute", "1:0");
        for grant in [&whole, &prefix, &other_session] {
            grants.grant(grant).expect("grant");
        }
        assert!(grants.revoke_one(&prefix).expect("revoke"));
        assert!(!grants.revoke_one(&prefix).expect("gone already"));
        let left = grants.list().expect("list");
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.contains(&whole) && left.contains(&other_session));
    }

    #[test]
    fn session_grants_hold_only_in_their_session_and_end_with_it() {
        let dir = tempfile::tempdir().expect("dir");
        let grants = Grants::open(&dir.path().join("data.db")).expect("open");
        grants
            .grant(&session("c", "app", "run", "1:0"))
            .expect("grant");
        assert!(
            grants
                .held("c", "app", "run", Some("1:0"))
                .expect("read")
                .whole
        );
        assert!(
            !grants
                .held("c", "app", "run", Some("1:1"))
                .expect("read")
                .whole
        );
        assert!(!grants.allows("c", "app", "run").expect("read"));
        grants
            .grant(&session("c", "app", "run", "2:0"))
            .expect("grant");
        assert_eq!(grants.end_session("1:0").expect("end"), 1);
        assert!(
            !grants
                .held("c", "app", "run", Some("1:0"))
                .expect("read")
                .whole
        );
        assert_eq!(
            grants
                .end_sessions_unless(|s| s.starts_with("1:"))
                .expect("purge"),
            1
        );
        assert!(grants.list().expect("list").is_empty());
    }

    #[test]
    fn prefix_grants_are_not_whole_tool_grants() {
        let dir = tempfile::tempdir().expect("dir");
        let grants = Grants::open(&dir.path().join("data.db")).expect("open");
        grants
            .grant(&Grant {
                prefix: Some("git status".into()),
                ..Grant::always("c", "local.terminal", Some("bash_execute"), "elicitation")
            })
            .expect("grant");
        let held = grants
            .held("c", "local.terminal", "bash_execute", None)
            .expect("read");
        assert!(!held.whole);
        assert_eq!(held.prefixes, vec!["git status".to_owned()]);
        let listed = grants.list().expect("list");
        assert_eq!(listed[0].prefix.as_deref(), Some("git status"));
        assert_eq!(listed[0].scope, Scope::Always);
    }

    #[test]
    fn grants_of_the_first_versions_are_kept_as_always() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("data.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(
                "CREATE TABLE consent_grants (client TEXT NOT NULL, app TEXT NOT NULL, tool TEXT NOT NULL DEFAULT '',
                 created_ms INTEGER NOT NULL, PRIMARY KEY (client, app, tool));
                 INSERT INTO consent_grants VALUES ('c', 'a', 't', 5);",
            )
            .expect("old table");
        }
        let grants = Grants::open(&path).expect("migrate");
        let listed = grants.list().expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (
                listed[0].scope,
                listed[0].created_ms,
                listed[0].tool.as_deref()
            ),
            (Scope::Always, 5, Some("t"))
        );
        drop(grants);
        assert_eq!(
            Grants::open(&path)
                .expect("reopen")
                .list()
                .expect("list")
                .len(),
            1
        );
    }
}
