//! The one harness of the gateway's integration tests: a gateway in a temporary folder, over
//! the descriptors a test gives or over what a scan of a home finds, and its audit log.
//! Each test file adds only what is its own (a canary folder, a fake `osascript`).

#![allow(dead_code)] // each test binary uses a part

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aai_audit::{AuditLog, Filter};
use aai_descriptor::{AaiError, Platform};
use aai_engine::catalog::discovery::{Found, ScanOptions, Source};
use aai_engine::catalog::snapshot::Snapshot;
use aai_engine::config::Config;
use aai_engine::consent::Asker;
use aai_engine::pipeline::{Caller, Gateway, Pipeline as _, Request};
use aai_executor::Executors;
use serde_json::Value;

/// A tool call through the gateway's face ([`aai_engine::pipeline::Pipeline::call`]), asking
/// through `asker`, for a test that cannot continue a question between calls.
pub trait CallAsking {
    fn exec_asking<'a>(
        &'a self,
        who: &'a Caller,
        app: &'a str,
        tool: &'a str,
        args: &'a Value,
        asker: Option<&'a dyn Asker>,
    ) -> aai_executor::BoxFuture<'a, Result<Value, AaiError>>;
}

impl CallAsking for Gateway {
    fn exec_asking<'a>(
        &'a self,
        who: &'a Caller,
        app: &'a str,
        tool: &'a str,
        args: &'a Value,
        asker: Option<&'a dyn Asker>,
    ) -> aai_executor::BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            self.call(Request::tool(who, app, tool, args).asking(asker))
                .await
                .into_result()
        })
    }
}

/// A gateway of a test, and the folder it lives in (removed when dropped).
pub struct TestGateway {
    pub gateway: Arc<Gateway>,
    pub dir: tempfile::TempDir,
    data_db: PathBuf,
}

impl TestGateway {
    /// A gateway in `dir` offering `docs` as descriptors the user wrote (in order), on
    /// `platforms`, with `config` and `executors`; its `data.db` in `dir`.
    pub fn offering(
        dir: tempfile::TempDir,
        docs: &[Value],
        platforms: &[Platform],
        config: Config,
        executors: Executors,
    ) -> Self {
        let found: Vec<Found> = docs
            .iter()
            .enumerate()
            .map(|(rank, doc)| Found {
                rank,
                source: Source::UserWritten,
                path: format!("/apps/{rank}/aai.json").into(),
                outcome: aai_descriptor::parse("t", doc.to_string().as_bytes())
                    .map(|d| aai_engine::catalog::cache::Entry::held(Arc::new(d))),
            })
            .collect();
        let snapshot = Snapshot::build(&found, platforms, true);
        let data_db = dir.path().join("data.db");
        let gateway = aai_compose::kit_gateway(snapshot, config, executors, data_db.clone());
        Self {
            gateway,
            dir,
            data_db,
        }
    }

    /// A gateway in `dir` over what a scan of `home` finds on Linux (the built-in apps
    /// included), with `config`; its `data.db` in `home`.
    pub fn scanning(dir: tempfile::TempDir, home: &Path, config: Config) -> Self {
        let options =
            ScanOptions::new(home, &config, false).plug(&config, &aai_compose::kit_apps());
        let snapshot = aai_engine::scan_once(&options, &[Platform::Linux]);
        let data_db = home.join("data.db");
        let gateway = aai_compose::kit_gateway(snapshot, config, Executors::new(), data_db.clone());
        Self {
            gateway,
            dir,
            data_db,
        }
    }

    /// `relative` inside the test's folder.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// [`Self::path`] as text, for arguments.
    pub fn p(&self, relative: &str) -> String {
        self.path(relative).display().to_string()
    }

    /// A call by the client `test`.
    pub async fn call(&self, app: &str, tool: &str, args: Value) -> Result<Value, AaiError> {
        self.gateway.exec("test", app, tool, &args).await
    }

    /// A call by the client `caller`.
    pub async fn call_as(
        &self,
        caller: &str,
        app: &str,
        tool: &str,
        args: Value,
    ) -> Result<Value, AaiError> {
        self.gateway.exec(caller, app, tool, &args).await
    }

    /// The audit log as the gateway wrote it.
    pub fn audit(&self) -> AuditLog {
        AuditLog::open(&self.data_db).expect("audit log")
    }

    /// Each audited call as (tool, decision, result), oldest first.
    pub fn results(&self) -> Vec<(String, String, String)> {
        let rows = self.audit().query(&Filter::default()).expect("rows");
        rows.into_iter()
            .map(|r| (r.entry.tool, r.entry.decision, r.entry.result))
            .collect()
    }
}
