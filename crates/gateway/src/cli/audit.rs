//! `aai-gateway audit`: the audit log.

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use super::output;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Check the hash chain; exit 1 naming the first edited, missing, inserted or moved row.
    Verify,
    /// The newest rows; with -f keep printing new ones.
    Tail {
        /// How many rows.
        #[arg(short = 'n', default_value = "20")]
        count: i64,
        /// Keep printing new rows as they come.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Rows filtered by app, tool and age (`--since 2h`, `--since 2026-11-22T10:00:00Z`).
    /// Arguments the user approved are kept whole; `--full` prints those too long for their
    /// row from where they are kept beside it.
    Show {
        /// Only this row (its number, as `tail` prints it).
        #[arg(long)]
        id: Option<i64>,
        /// Print long arguments whole instead of their head and hash.
        #[arg(long)]
        full: bool,
        /// Only this appId.
        #[arg(long)]
        app: Option<String>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only rows newer than this age or time.
        #[arg(long)]
        since: Option<String>,
    },
    /// Every row as JSON lines or CSV on stdout.
    Export {
        /// jsonl or csv.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: output::ExportFormat,
    },
}

/// `2h`, `30m`, `1d` ago, or an RFC 3339 time, as milliseconds since the epoch.
fn parse_since(text: &str) -> anyhow::Result<i64> {
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        let ms = time
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        return Ok(i64::try_from(ms).unwrap_or(i64::MAX));
    }
    let ago = humantime::parse_duration(text).with_context(|| {
        format!("--since {text:?}: give an age like 2h or a time like 2026-11-22T10:00:00Z")
    })?;
    Ok(aai_audit::now_ms() - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX))
}

pub fn run(db: &std::path::Path, action: Action) -> anyhow::Result<ExitCode> {
    let log = aai_audit::AuditLog::open(db)?;
    match action {
        Action::Verify => match log.verify() {
            Ok(rows) => {
                output::line(&format!("ok: {rows} rows, chain intact"));
                Ok(ExitCode::SUCCESS)
            }
            Err(bad) => {
                output::line(&format!("TAMPERED: {bad}"));
                Ok(ExitCode::from(1))
            }
        },
        Action::Tail { count, follow } => {
            let rows = log.tail(count)?;
            let mut last = rows.last().map_or(0, |r| r.id);
            output::rows(&rows, None);
            // `-f` follows until interrupted, like `tail -f`.
            if follow {
                loop {
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    let new = log.query(&aai_audit::Filter {
                        after_id: Some(last),
                        ..Default::default()
                    })?;
                    last = new.last().map_or(last, |r| r.id);
                    output::rows(&new, None);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Show {
            id,
            full,
            app,
            tool,
            since,
        } => {
            let since_ms = since.as_deref().map(parse_since).transpose()?;
            let mut rows = log.query(&aai_audit::Filter {
                app,
                tool,
                since_ms,
                after_id: id.map(|id| id - 1),
                limit: id.map(|_| 1),
                ..Default::default()
            })?;
            rows.retain(|row| id.is_none_or(|id| row.id == id));
            if let Some(id) = id {
                anyhow::ensure!(
                    !rows.is_empty(),
                    "the audit log has no row {id} that matches"
                );
            }
            let whole = |row: &aai_audit::Row| {
                log.whole_args(row)
                    .unwrap_or_else(|error| format!("(cannot be read: {error})"))
            };
            output::rows(
                &rows,
                full.then_some(&whole as &dyn Fn(&aai_audit::Row) -> String),
            );
            Ok(ExitCode::SUCCESS)
        }
        Action::Export { format } => {
            output::export(&log.query(&aai_audit::Filter::default())?, format);
            Ok(ExitCode::SUCCESS)
        }
    }
}
