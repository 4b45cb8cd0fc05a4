//! Which `tools/call` names are tools of this server. A name that routes nowhere is a request
//! that cannot be routed, and the spec's answer to an unknown tool is JSON-RPC `-32602`; names
//! that route to a lookup (an app's guide, an app's tool by the spec's `<appId>:<tool>`, a
//! workflow that exists) keep the lookup's own tool errors, which name the nearest apps, the
//! app store and web discovery.

use std::path::Path;

use rmcp::ErrorData as McpError;
use serde_json::json;

use aai_engine::catalog::snapshot::Snapshot;

/// The gateway's own tools, offered whatever apps are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Own {
    /// `aai_exec`: run an app's tool.
    Exec,
    /// `aai_batch`: run several at once.
    Batch,
    /// `web_discover`: a web app's guide from its URL.
    Discover,
    /// `aai_apps`: list or search the apps (compact exposure).
    Apps,
    /// `aai_guide`: an app's guide (compact exposure).
    Guide,
}

/// Every own tool: its name, the spec's spelling of it (`aai:exec`), and which it is. The one
/// list the listing, the routing, the dispatch and the approval queue read.
const OWN: &[(&str, Option<&str>, Own)] = &[
    ("aai_exec", Some("aai:exec"), Own::Exec),
    (
        aai_engine::pipeline::batch::TOOL,
        Some("aai:batch"),
        Own::Batch,
    ),
    ("web_discover", Some("web:discover"), Own::Discover),
    ("aai_apps", None, Own::Apps),
    ("aai_guide", None, Own::Guide),
];

/// Which own tool `name` is, by its name or the spec's spelling.
pub(crate) fn own(name: &str) -> Option<Own> {
    OWN.iter()
        .find(|(plain, spec, _)| *plain == name || *spec == Some(name))
        .map(|(_, _, tool)| *tool)
}

/// The name an own tool is listed under.
pub(crate) fn own_name(tool: Own) -> &'static str {
    OWN.iter()
        .find(|(_, _, t)| *t == tool)
        .map_or("", |(plain, _, _)| plain)
}

/// How many near names the error offers.
const NEAREST: usize = 3;

/// The `-32602` error for `name`, a name that [`routes`] nowhere, naming the nearest tools.
pub(crate) fn unknown(name: &str, registry: &Snapshot) -> McpError {
    let workflows: Vec<String> = registry
        .workflows
        .iter()
        .filter(|found| found.loaded.is_ok())
        .map(|found| format!("workflow_{}", found.name))
        .collect();
    let candidates = OWN
        .iter()
        .map(|(plain, _, _)| *plain)
        .chain(registry.apps.iter().map(|app| app.slug.as_str()))
        .chain(workflows.iter().map(String::as_str));
    let near = aai_engine::catalog::snapshot::nearest(name, candidates, NEAREST);
    let hint = match near.as_slice() {
        [] => String::new(),
        names => format!(
            " Did you mean {}?",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    McpError::invalid_params(
        format!(
            "Unknown tool: {name:?}.{hint} tools/list names every tool; an app's own tools run through aai_exec after its guide (app_<app> or aai_guide)."
        ),
        Some(json!({"tool": name, "nearest": near})),
    )
}

/// Whether `name` is a fixed tool, an app's guide (`app_<slug>`, `app:<appId>`) or an app's
/// tool (`<appId>:<tool>`) of an app in `registry`, or a workflow that exists. Anything else —
/// a misspelling, a path — names no tool.
pub(crate) fn routes(name: &str, home: &Path, registry: &Snapshot) -> bool {
    if own(name).is_some() {
        return true;
    }
    if name.starts_with("app_") || name.starts_with("app:") {
        return registry.find(name).is_some();
    }
    if let Some(workflow) = name.strip_prefix("workflow_") {
        // Read where running it reads, so a file written since the last scan runs too.
        let file = home
            .join(aai_engine::workflow::DIR)
            .join(format!("{workflow}.json"));
        return aai_engine::workflow::name_of(&file).as_deref() == Some(workflow) && file.is_file();
    }
    // `<appId>:<tool>`, run as aai_exec runs it.
    name.rsplit_once(':').is_some_and(|(app, tool)| {
        !app.is_empty() && !tool.is_empty() && registry.find(app).is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_own_tool_is_found_by_its_names_and_listed_under_one() {
        for (plain, spec, tool) in OWN {
            assert_eq!(own(plain), Some(*tool));
            assert_eq!(spec.and_then(own), spec.map(|_| *tool));
            assert_eq!(own_name(*tool), *plain);
        }
        assert_eq!(own("aai_exce"), None);
        assert_eq!(own("aai:guide"), None);
    }

    #[test]
    fn names_that_route_nowhere_are_unknown_tools() {
        let home = tempfile::tempdir().expect("dir");
        let workflows = home.path().join(aai_engine::workflow::DIR);
        std::fs::create_dir_all(&workflows).expect("dir");
        std::fs::write(workflows.join("report.json"), "{}").expect("file");
        let doc = json!({"schema_version": "1.0", "appId": "org.aai.test", "name": "Test",
            "description": "A test app.", "platforms": {"linux": {"automation": "dbus",
            "service": "org.aai.Test", "object": "/org/aai/Test",
            "interface": "org.aai.Test", "tools": []}}});
        let descriptor =
            aai_descriptor::parse("t", doc.to_string().as_bytes()).expect("valid descriptor");
        let found = aai_engine::catalog::discovery::Found {
            rank: 0,
            source: aai_engine::catalog::discovery::Source::UserWritten,
            path: home.path().join("aai.json"),
            outcome: Ok(aai_engine::catalog::cache::Entry::held(
                std::sync::Arc::new(descriptor),
            )),
        };
        let registry = Snapshot::build(&[found], &[aai_descriptor::Platform::Linux], true);
        for routed in [
            "aai_exec",
            "aai:exec",
            "aai_guide",
            "app_org_aai_test",
            "app:org.aai.test",
            "org.aai.test:echo",
            "workflow_report",
        ] {
            assert!(routes(routed, home.path(), &registry), "{routed}");
        }
        for unknown in [
            "aai_exce",
            "",
            "echo",
            "workflow_nope",
            "workflow_../report",
            ":echo",
            "org.aai.test:",
            "app_org_nowhere",
            "app:org.nowhere",
            "org.nowhere:echo",
            "../../etc/passwd",
            "app_../../etc/passwd",
            "/etc/passwd:x",
            "org.aai.test/../x:echo",
        ] {
            assert!(!routes(unknown, home.path(), &registry), "{unknown:?}");
        }
        let error = super::unknown("aai_exce", &registry);
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(
            error.message.contains("Did you mean `aai_exec`"),
            "{}",
            error.message
        );
        assert_eq!(error.data.expect("data")["nearest"][0], "aai_exec");
    }
}
