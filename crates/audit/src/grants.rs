//! Remembered consent: which client may run which app's tools without asking again.
//! Kept in the same `data.db` as the audit log.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::log::{AuditError, now_ms};

const GRANTS_TABLE: &str = "CREATE TABLE IF NOT EXISTS consent_grants (
    client TEXT NOT NULL, app TEXT NOT NULL, tool TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL, PRIMARY KEY (client, app, tool));";

/// One remembered "allow".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// The MCP client (`clientInfo.name`) the grant is for.
    pub client: String,
    pub app: String,
    /// `None`: every tool of the app.
    pub tool: Option<String>,
    pub created_ms: i64,
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
        conn.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .execute_batch(GRANTS_TABLE)
            .map_err(|source| AuditError::Open {
                path: path.clone(),
                source,
            })?;
        Ok(Self { conn, path })
    }

    /// Whether `client` may run `tool` of `app`: a grant for the tool or for the whole app.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn allows(&self, client: &str, app: &str, tool: &str) -> Result<bool, AuditError> {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found: Option<i64> = conn
            .query_row(
                "SELECT 1 FROM consent_grants WHERE client = ?1 AND app = ?2 AND (tool = '' OR tool = ?3) LIMIT 1",
                params![client, app, tool],
                |r| r.get(0),
            )
            .optional()?;
        Ok(found.is_some())
    }

    /// Remembers that `client` may run `tool` of `app` (every tool when `None`).
    ///
    /// # Errors
    /// [`AuditError::Write`].
    pub fn grant(&self, client: &str, app: &str, tool: Option<&str>) -> Result<(), AuditError> {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        conn.execute(
            "INSERT OR REPLACE INTO consent_grants (client, app, tool, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![client, app, tool.unwrap_or(""), now_ms()],
        )
        .map_err(|source| AuditError::Write { path: self.path.clone(), source })?;
        Ok(())
    }

    /// Forgets grants; returns how many. `tool: None` removes the app-wide grant and every
    /// tool grant of that app for that client.
    ///
    /// # Errors
    /// [`AuditError::Write`].
    pub fn revoke(&self, client: &str, app: &str, tool: Option<&str>) -> Result<usize, AuditError> {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let removed = match tool {
            Some(tool) => conn.execute(
                "DELETE FROM consent_grants WHERE client = ?1 AND app = ?2 AND tool = ?3",
                params![client, app, tool],
            ),
            None => conn.execute(
                "DELETE FROM consent_grants WHERE client = ?1 AND app = ?2",
                params![client, app],
            ),
        }
        .map_err(|source| AuditError::Write {
            path: self.path.clone(),
            source,
        })?;
        Ok(removed)
    }

    /// Every grant, by client, app and tool.
    ///
    /// # Errors
    /// [`AuditError::Read`].
    pub fn list(&self) -> Result<Vec<Grant>, AuditError> {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut statement = conn.prepare(
            "SELECT client, app, tool, created_ms FROM consent_grants ORDER BY client, app, tool",
        )?;
        let rows = statement.query_map([], |r| {
            let tool: String = r.get(2)?;
            Ok(Grant {
                client: r.get(0)?,
                app: r.get(1)?,
                tool: (!tool.is_empty()).then_some(tool),
                created_ms: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_per_client_and_per_tool_or_app() {
        let dir = tempfile::tempdir().expect("dir");
        let grants = Grants::open(&dir.path().join("data.db")).expect("open");
        grants
            .grant("claude-code", "org.example.mail", Some("send"))
            .expect("grant");
        assert!(
            grants
                .allows("claude-code", "org.example.mail", "send")
                .expect("read")
        );
        assert!(
            !grants
                .allows("claude-code", "org.example.mail", "delete")
                .expect("read")
        );
        assert!(
            !grants
                .allows("cursor", "org.example.mail", "send")
                .expect("read"),
            "another client"
        );
        grants
            .grant("cursor", "org.example.mail", None)
            .expect("grant all");
        assert!(
            grants
                .allows("cursor", "org.example.mail", "delete")
                .expect("read")
        );
        assert_eq!(grants.list().expect("list").len(), 2);
        assert_eq!(
            grants
                .revoke("cursor", "org.example.mail", None)
                .expect("revoke"),
            1
        );
        assert!(
            !grants
                .allows("cursor", "org.example.mail", "delete")
                .expect("read")
        );
        // Survives reopening.
        drop(grants);
        let grants = Grants::open(&dir.path().join("data.db")).expect("reopen");
        assert!(
            grants
                .allows("claude-code", "org.example.mail", "send")
                .expect("read")
        );
    }
}
