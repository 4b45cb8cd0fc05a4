//! `local.descriptors`: the agent drafts a descriptor (`aai_describe`) and installs one it
//! wrote or edited (`aai_install_descriptor`). An install changes what the gate lets through,
//! so it is asked every time with what the app would reach, never covered by a grant, and
//! checked exactly as a file on disk before anyone is asked.

use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use aai_sandbox::Contained as _;
use aai_toolset::{Call, Toolset};
use serde_json::{Map, Value, json};

use aai_engine::catalog::discovery::{PluggedApp, Source};
use aai_engine::pipeline::Gateway;

/// The toolset's appId.
pub const APP_ID: &str = "local.descriptors";
/// How long an install waits for the new app to be offered.
const OFFERED_WITHIN: Duration = Duration::from_secs(10);

/// The toolset's descriptor.
pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> = LazyLock::new(|| {
    aai_toolset::shipped(APP_ID, include_str!("../toolsets/descriptors.aai.json"))
});

/// The app for discovery: offered while `describe_tools` is on.
pub fn app() -> PluggedApp {
    PluggedApp::new(DESCRIPTOR.clone(), |config| config.describe_tools)
}

/// Plugs the toolset into `gateway`.
pub fn plug(gateway: &Arc<Gateway>) {
    if gateway.toolsets().plugged(APP_ID).is_some() {
        return;
    }
    gateway.plug(Arc::new(DescriptorTools {
        gateway: Arc::downgrade(gateway),
    }));
}

struct DescriptorTools {
    gateway: Weak<Gateway>,
}

fn invalid(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::InvalidParams, message)
}

fn text<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A descriptor the agent asks to install, checked, its risks raised to at least what each
/// tool's name says.
struct Checked {
    descriptor: Descriptor,
    json: Value,
    raised: Vec<String>,
    /// The user's own descriptor of the same appId it replaces.
    replaces: Option<String>,
}

const RISKS: [&str; 4] = ["low", "medium", "high", "critical"];

fn rank(risk: &str) -> usize {
    RISKS.iter().position(|r| *r == risk).unwrap_or(1)
}

/// Raises a tool whose name says it deletes, sends or runs something (`delete_…`, `send_…`) to
/// high when it was declared lower: the agent wrote the risks, and a risk decides what runs
/// unasked.
fn raise_risks(doc: &mut Value) -> Vec<String> {
    let mut raised = Vec::new();
    let Some(platforms) = doc.get_mut("platforms").and_then(Value::as_object_mut) else {
        return raised;
    };
    for (platform, section) in platforms.iter_mut() {
        let Some(tools) = section.get_mut("tools").and_then(Value::as_array_mut) else {
            continue;
        };
        for tool in tools {
            let name = tool["name"].as_str().unwrap_or_default().to_owned();
            let http = (platform == "web").then(|| {
                tool["method"]
                    .as_str()
                    .unwrap_or("GET")
                    .to_ascii_uppercase()
            });
            // What the tool calls counts as much as what it is called: a `get_info` that calls
            // D-Bus `PowerOff` or COM `Delete` is guessed from the method too.
            let mut called: Vec<String> = vec![name.clone()];
            if platform != "web"
                && let Some(method) = tool["method"].as_str()
            {
                called.push(method.to_owned());
            }
            for step in tool["script"].as_array().into_iter().flatten() {
                if let Some(method) = step["method"].as_str() {
                    called.push(method.to_owned());
                }
            }
            let guessed = called
                .iter()
                .map(|c| aai_describe::guess_risk(c, http.as_deref()).0)
                .max_by_key(|r| rank(r))
                .unwrap_or("medium");
            let declared = tool["risk"].as_str().unwrap_or("medium").to_owned();
            // Only up to high: a harmless name declared low stays low (the user reads it).
            if guessed == "high" && rank(guessed) > rank(&declared) {
                tool["risk"] = json!(guessed);
                raised.push(format!("{name}: {declared} → {guessed}"));
            }
        }
    }
    raised
}

impl DescriptorTools {
    fn gateway(&self) -> Result<Arc<Gateway>, AaiError> {
        self.gateway.upgrade().ok_or_else(|| {
            AaiError::new(
                ErrorKind::AppNotRunning,
                "the gateway this toolset belonged to has ended",
            )
        })
    }

    /// `aai_install_descriptor`'s argument, validated as a file on disk and checked against
    /// what is installed.
    fn checked(&self, args: &Map<String, Value>) -> Result<Checked, AaiError> {
        let gateway = self.gateway()?;
        let mut json = args
            .get("descriptor")
            .filter(|d| d.is_object())
            .cloned()
            .ok_or_else(|| invalid("\"descriptor\": the aai.json, as an object"))?;
        let raised = raise_risks(&mut json);
        let bytes = serde_json::to_vec_pretty(&json).unwrap_or_default();
        let descriptor = aai_descriptor::parse("the descriptor", &bytes).map_err(|error| {
            let problems: Vec<Value> = error
                .problems
                .iter()
                .map(|p| json!({"pointer": p.pointer, "problem": p.message}))
                .collect();
            AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!("the descriptor is not valid, so nothing was installed:\n{error}"),
            )
            .with_detail(json!({"problems": problems}))
        })?;
        let app_id = descriptor.app_id.clone();
        if app_id.starts_with("local.") {
            return Err(invalid(format!(
                "{app_id}: appIds under `local.` are the gateway's own toolsets"
            )));
        }
        if descriptor.platforms.local.is_some() {
            return Err(invalid(
                "a `local` section is for the gateway's own toolsets, not an installed app",
            ));
        }
        if descriptor
            .platforms
            .mcp
            .as_ref()
            .is_some_and(|s| s.automation == "stdio")
        {
            return Err(invalid(format!(
                "{app_id}: an MCP server started as a command is added by the user (`aai-gateway import`, or its aai.json written by hand), not installed by an agent"
            )));
        }
        let registry = gateway.snapshot_changes().borrow().clone();
        // An appId differing only in case is the same folder on macOS and Windows.
        if let Some(other) = registry
            .apps
            .iter()
            .find(|a| a.id() != app_id && a.id().eq_ignore_ascii_case(&app_id))
        {
            return Err(invalid(format!(
                "{app_id} differs from the installed {} only in case",
                other.id()
            )));
        }
        let replaces = match registry.find(&app_id) {
            Some(found) if found.source == Source::AgentInstalled => Some(found.name().to_owned()),
            Some(found) => {
                return Err(invalid(format!(
                    "{app_id} is already an app from {} ({}); an agent's descriptor never takes its place",
                    found.source.words(),
                    found.source().display()
                )));
            }
            None => None,
        };
        // The user's policy rules for this appId were written for another app.
        let config = gateway.config();
        let named = config.policy.profiles.values().any(|profile| {
            profile.tool_overrides.keys().any(|k| {
                k == &app_id
                    || k.starts_with(&format!("{app_id}:"))
                    || k.starts_with(&format!("{app_id}."))
            })
        });
        if named {
            return Err(invalid(format!(
                "{app_id} is named in your policy's tool_overrides: an agent's app cannot take over rules written for another"
            )));
        }
        Ok(Checked {
            descriptor,
            json,
            raised,
            replaces,
        })
    }

    /// The question put to the user: the app, each tool with its risk, what it talks to,
    /// the credentials it asks for and the origins it reaches.
    fn question(checked: &Checked) -> String {
        let d = &checked.descriptor;
        let tools: Vec<String> = aai_engine::appstore::summary(d)
            .into_iter()
            .map(|(_, tool, risk)| {
                format!("{:?} ({risk})", aai_descriptor::visible::visible(&tool))
            })
            .collect();
        let mut parts = vec![format!(
            "install the app {:?} ({}){} with {} tools: {}",
            aai_descriptor::visible::visible(&d.name)
                .chars()
                .take(60)
                .collect::<String>(),
            d.app_id,
            checked
                .replaces
                .as_deref()
                .map_or(String::new(), |old| format!(", replacing your {old}")),
            tools.len(),
            tools.join(", ")
        )];
        parts.extend(local_reach(d));
        let reach = aai_engine::appstore::reach(d);
        for credential in &reach.credentials {
            parts.push(format!("it uses {}", credential.describe(&d.app_id)));
        }
        if !reach.origins.is_empty() {
            parts.push(format!(
                "it talks to {}",
                reach.origins.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if d.platforms.mcp.is_some() {
            parts.push("its tools are whatever the MCP server lists when it is used (each asked about by its annotations, new ones as high risk)".into());
        }
        parts.push(format!(
            "it loads as an app from the network (no environment variable or stored key without your approval), and any grants remembered for {} are forgotten",
            d.app_id
        ));
        if !checked.raised.is_empty() {
            parts.push(format!(
                "risks raised to what the names say: {}",
                checked.raised.join(", ")
            ));
        }
        parts.join("; ")
    }

    async fn install(&self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let gateway = self.gateway()?;
        let checked = self.checked(args)?;
        let app_id = checked.descriptor.app_id.clone();
        let forgotten = gateway.gate().forget_app(&app_id)?;
        let folder = gateway.home().join("agent").join(&app_id);
        let path = folder.join("aai.json");
        let failed = |e: std::io::Error| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("cannot write {}: {e}", path.display()),
            )
        };
        aai_contain::own_files::create_dir(&folder).map_err(failed)?;
        let text = serde_json::to_string_pretty(&checked.json).unwrap_or_default() + "\n";
        aai_engine::private::write_private(&path, text.as_bytes()).map_err(failed)?;
        tracing::info!(app = %app_id, path = %path.display(), "a descriptor was installed at the agent's request");
        let offered = offered(&gateway, &app_id, &path).await;
        Ok(json!({
            "installed": app_id,
            "path": path.display().to_string(),
            "tools": aai_engine::appstore::summary(&checked.descriptor).len(),
            "risks_raised": checked.raised,
            "grants_forgotten": forgotten,
            "offered": offered,
            "next": if offered { format!("read its guide (aai_guide {app_id})") } else { "it is offered once the gateway's scan picks it up".to_owned() },
        }))
    }

    async fn describe(&self, call: &Call<'_>) -> Result<Value, AaiError> {
        let gateway = self.gateway()?;
        let args = call.args;
        let target = text(args, "target")
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| invalid("\"target\": the bus name, URL, file or running app"))?;
        let draft = match text(args, "kind").unwrap_or_default() {
            "dbus" => {
                let source = super::DbusSource {
                    name: target.to_owned(),
                    system: args.get("system").and_then(Value::as_bool).unwrap_or(false),
                    path: None,
                    interface: text(args, "interface").map(str::to_owned),
                };
                super::dbus(gateway.executors().dbus(), &source).await?
            }
            "openapi" => {
                let words = |key: &str| -> Vec<String> {
                    args.get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                };
                let remote = target.contains("://");
                let body = if remote {
                    fetch_public(target).await?
                } else {
                    read_sandboxed(&gateway, call, target)?
                };
                let options = aai_describe::openapi::Options {
                    tags: words("tags"),
                    include: words("include"),
                    max_tools: args
                        .get("max_tools")
                        .and_then(Value::as_u64)
                        .map_or(30, |n| n.clamp(1, 200) as usize),
                    source_url: remote.then(|| target.to_owned()),
                };
                super::openapi(&body, &options)?
            }
            // A running app that publishes nothing: its accessibility tree, on the gateway's
            // own session (a protected app is not read).
            "a11y" => {
                let protected = gateway.config().desktop.protected();
                super::a11y(None, target, None, &protected).await?
            }
            "sdef" => {
                let body = read_sandboxed(&gateway, call, target)?;
                aai_describe::sdef::draft(&body, text(args, "app"))
                    .map_err(|e| invalid(e.to_string()))?
            }
            other => {
                return Err(invalid(format!(
                    "\"kind\": {other:?} is not dbus, openapi, sdef or a11y"
                )));
            }
        };
        Ok(json!({
            "draft": draft.descriptor,
            "notes": draft.notes,
            "next": "Check the draft (its `todo` notes say what was guessed), edit it, then call aai_install_descriptor {descriptor}: the user is asked.",
        }))
    }
}

/// What a descriptor talks to on this computer, one line a platform.
fn local_reach(d: &Descriptor) -> Vec<String> {
    let mut out = Vec::new();
    let through_tree = |app: Option<&str>| {
        format!(
            "it operates the application {} through its accessibility tree (menus, buttons, fields), as a person at the keyboard could",
            app.unwrap_or("?")
        )
    };
    if let Some(linux) = &d.platforms.linux
        && linux.automation == "atspi"
    {
        out.push(through_tree(linux.fields.app.as_deref()));
    } else if let Some(linux) = &d.platforms.linux {
        out.push(format!(
            "it calls the D-Bus service {} on the {} bus",
            linux.fields.service,
            if matches!(linux.fields.bus, aai_descriptor::Bus::System) {
                "system"
            } else {
                "session"
            }
        ));
    }
    if let Some(macos) = &d.platforms.macos
        && macos.automation == "ax"
    {
        out.push(through_tree(macos.fields.app.as_deref()));
    } else if let Some(macos) = &d.platforms.macos {
        let scripts: Vec<&str> = macos
            .tools
            .iter()
            .map(|t| t.fields.script.as_str())
            .collect();
        let mut apps: Vec<String> = scripts
            .iter()
            .flat_map(|s| s.split("application \"").skip(1))
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_owned)
            .collect();
        apps.sort();
        apps.dedup();
        out.push(format!(
            "its scripts drive {}",
            if apps.is_empty() {
                "macOS apps".to_owned()
            } else {
                apps.join(", ")
            }
        ));
        // AppleScript ignores case and spaces the reader cannot see; raw Apple events and
        // JXA's Objective-C bridge reach the same.
        let shell = [
            "doshellscript",
            "«event",
            "runscript",
            "nstask",
            "loadscript",
            "$.",
            "objc.",
        ];
        if scripts.iter().any(|s| {
            let squeezed: String = s.to_lowercase().split_whitespace().collect();
            shell.iter().any(|w| squeezed.contains(w))
        }) {
            out.push("A SCRIPT RUNS SHELL COMMANDS, OTHER SCRIPTS OR RAW APPLE EVENTS".into());
        }
    }
    if let Some(windows) = &d.platforms.windows
        && windows.automation == "uia"
    {
        out.push(through_tree(windows.fields.app.as_deref()));
    } else if let Some(windows) = &d.platforms.windows {
        let mut progids: Vec<String> = windows.fields.progid.iter().cloned().collect();
        for tool in &windows.tools {
            progids.extend(
                tool.fields
                    .script
                    .iter()
                    .filter_map(|step| step.progid.clone()),
            );
        }
        progids.sort();
        progids.dedup();
        out.push(format!("it drives the COM servers {}", progids.join(", ")));
    }
    if let Some(android) = &d.platforms.android {
        let mut targets = vec![android.fields.package.clone()];
        for tool in &android.tools {
            targets.extend(tool.fields.component.iter().cloned());
            targets.extend(tool.fields.result_uri.iter().cloned());
        }
        targets.sort();
        targets.dedup();
        out.push(format!(
            "it sends intents to and reads {}",
            targets.join(", ")
        ));
    }
    if d.platforms.ios.is_some() {
        out.push("it opens iOS URL schemes".into());
    }
    out
}

/// Waits (a little) for the app at `path` to be offered.
async fn offered(gateway: &Gateway, app_id: &str, path: &std::path::Path) -> bool {
    let mut changes = gateway.snapshot_changes();
    let seen = |registry: &aai_engine::catalog::snapshot::Snapshot| {
        registry
            .find(app_id)
            .is_some_and(|app| app.source() == path)
    };
    let wait = async {
        loop {
            if seen(&changes.borrow_and_update()) {
                return true;
            }
            if changes.changed().await.is_err() {
                return false;
            }
        }
    };
    tokio::time::timeout(OFFERED_WITHIN, wait)
        .await
        .unwrap_or(false)
}

/// A document from a file the client's sandbox lets it read.
fn read_sandboxed(gateway: &Gateway, call: &Call<'_>, path: &str) -> Result<String, AaiError> {
    let sandbox = gateway.toolsets().setup().sandbox(call.roots);
    // As the file tools read: beneath its allowed folder, no link followed, a regular file,
    // within the sandbox's size limit.
    let (_, bytes) = aai_sandbox::read_checked(&sandbox, path)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

pub use aai_contain::addresses::is_internal;

/// An https document from a public address: the name is resolved once, every address it
/// gives must be public, and the request goes to that address (no redirects).
async fn fetch_public(url: &str) -> Result<String, AaiError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| invalid(format!("{url:?}: {e}")))?;
    if parsed.scheme() != "https" {
        return Err(invalid(format!(
            "{url}: only https documents are fetched for an agent"
        )));
    }
    let host = parsed
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addresses: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| invalid(format!("{host}: {e}")))?
        .collect();
    if addresses.is_empty() || addresses.iter().any(|a| is_internal(a.ip())) {
        return Err(AaiError::new(
            ErrorKind::PermissionDenied,
            format!(
                "{host} is this computer or a private network: the gateway fetches only public documents for an agent (the user can run `aai-gateway describe openapi {url}`)"
            ),
        ));
    }
    let client = aai_executor::client_builder()
        .https_only(true)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(&host, addresses[0])
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    super::document(&client, parsed.as_str()).await
}

impl Toolset for DescriptorTools {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            match call.tool {
                "aai_describe" => self.describe(&call).await,
                "aai_install_descriptor" => self.install(call.args).await,
                other => Err(invalid(format!("{APP_ID} has no tool {other:?}"))),
            }
        })
    }

    /// Introspecting the system bus can start system services: asked like a high-risk call.
    fn rate(&self, call: &aai_toolset::Call<'_>, _boxed: bool) -> Option<aai_toolset::Rated> {
        let args = call.args;
        (call.tool == "aai_describe"
            && args.get("kind").and_then(Value::as_str) == Some("dbus")
            && args.get("system").and_then(Value::as_bool) == Some(true))
        .then(|| aai_toolset::Rated {
            risk: aai_policy::Risk::High,
            why: Some("introspecting the system bus can start system services".to_owned()),
            each_time: true,
        })
    }

    /// A descriptor that could not be installed is refused before anyone is asked.
    fn refusal(&self, call: &Call<'_>) -> Option<AaiError> {
        (call.tool == "aai_install_descriptor")
            .then(|| self.checked(call.args).err())
            .flatten()
    }

    /// Every install is put to the user, with what the app would reach.
    fn must_ask<'a>(&'a self, call: &'a Call<'a>) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            if call.tool != "aai_install_descriptor" {
                return None;
            }
            Some(match self.checked(call.args) {
                Ok(checked) => Self::question(&checked),
                Err(error) => error.message,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_refused() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "::127.0.0.1",
            "192.0.0.8",
            "240.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["140.82.112.3", "2606:4700::1111", "8.8.8.8"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn a_tool_is_installed_at_least_as_risky_as_its_name() {
        let mut doc = json!({"platforms": {
            "linux": {"tools": [{"name": "delete_all", "risk": "low"}, {"name": "get_state", "risk": "low"},
                {"name": "get_info", "method": "KillUnit", "risk": "low"}]},
            "web": {"tools": [{"name": "items", "method": "DELETE"}, {"name": "list", "risk": "critical"}]}}});
        let raised = raise_risks(&mut doc);
        assert_eq!(
            raised,
            [
                "delete_all: low → high",
                "get_info: low → high",
                "items: medium → high"
            ]
        );
        assert_eq!(doc["platforms"]["linux"]["tools"][1]["risk"], "low");
        assert_eq!(doc["platforms"]["web"]["tools"][1]["risk"], "critical");
    }
}
