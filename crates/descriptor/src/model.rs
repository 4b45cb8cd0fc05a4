//! Typed view of an `aai.json` descriptor (`spec/aai-json.md`).
//!
//! Deserialize only after [`crate::parse`] checked the document against the published schema;
//! that keeps every error message tied to a JSON pointer.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One application's descriptor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Descriptor {
    pub schema_version: String,
    #[serde(rename = "appId")]
    pub app_id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Other names users call the app by; searched by `aai_apps`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    pub platforms: Platforms,
    /// Came from the network (`web_discover`, a registry copy) rather than from a file the
    /// user put on this machine. Such a descriptor never reads an environment variable or a
    /// credential bound to another origin without the user's approval. Set by the gateway;
    /// never read from or written to JSON.
    #[serde(skip)]
    pub fetched: bool,
}

/// The automation sections, one per platform.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Platforms {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub macos: Option<Section<MacosSection, MacosTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Section<WindowsSection, WindowsTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux: Option<Section<LinuxSection, LinuxTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub android: Option<Section<AndroidSection, AndroidTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ios: Option<Section<IosSection, IosTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web: Option<Section<WebSection, WebTool>>,
    /// The gateway's own built-in toolsets (terminal, files, system): `automation: "builtin"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<Section<LocalSection, LocalTool>>,
    /// An MCP server the user already has, run behind the gate: `automation: "stdio"` (a
    /// command) or `"http"` (a Streamable HTTP URL). Its tools come from the server's own
    /// `tools/list`; tools listed here only set a tool's risk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Section<McpSection, McpTool>>,
}

/// The platforms a descriptor can describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Macos,
    Windows,
    Linux,
    Android,
    Ios,
    Web,
    /// Built into the gateway, on every OS.
    Local,
    /// An MCP server behind the gate, on every OS.
    Mcp,
}

impl Platform {
    /// The desktop platform this binary was built for.
    pub fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::Macos
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Linux
        }
    }

    /// The key of this platform under `platforms`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Macos => "macos",
            Self::Windows => "windows",
            Self::Linux => "linux",
            Self::Android => "android",
            Self::Ios => "ios",
            Self::Web => "web",
            Self::Local => "local",
            Self::Mcp => "mcp",
        }
    }

    pub const ALL: [Platform; 8] = [
        Self::Macos,
        Self::Windows,
        Self::Linux,
        Self::Android,
        Self::Ios,
        Self::Web,
        Self::Local,
        Self::Mcp,
    ];
}

/// A platform section: its automation kind, section fields `S` and tools with fields `T`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Section<S, T> {
    pub automation: String,
    #[serde(flatten)]
    pub fields: S,
    #[serde(default = "Vec::new")]
    pub tools: Vec<Tool<T>>,
}

/// A tool: the fields every platform shares plus the platform's own `T`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tool<T> {
    #[serde(flatten)]
    pub common: ToolCommon,
    #[serde(flatten)]
    pub fields: T,
}

/// Fields every tool has, whatever its platform.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCommon {
    pub name: String,
    /// Boxed: thousands of tools stay in memory, and a `Box<str>` is a word smaller. (Every
    /// section's schema requires it but `mcp`'s, whose entries only set a tool's risk.)
    #[serde(default)]
    pub description: Box<str>,
    /// JSON Schema of the arguments; `None` means the tool takes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Parameters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    #[serde(default, rename = "readOnly", skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
}

/// A tool's parameter schema, held as compact JSON text.
///
/// Installed apps can number in the thousands and a parsed schema takes several times the
/// memory of its text, so schemas are parsed when a guide or a call needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameters(Arc<str>);

impl Parameters {
    pub fn from_value(schema: &Value) -> Self {
        Self(schema.to_string().into())
    }

    /// The schema as JSON (parsed from the stored text, which was valid JSON when stored).
    pub fn schema(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl Serialize for Parameters {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.schema().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Parameters {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|schema| Self::from_value(&schema))
    }
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    Low,
    Medium,
    High,
    Critical,
}

/// A macOS section: scripts (`applescript`, `jxa`), or a running application's accessibility
/// tree through System Events (`ax`: `app`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MacosSection {
    /// `ax`: the application's process name as System Events knows it, or its bundle id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MacosTool {
    /// `applescript`, `jxa`: the script (empty in an `ax` section).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub script: String,
    /// `ax`: the steps, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Box<[crate::ui::UiStep]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_parser: Option<String>,
}

/// A Windows section: a COM action list per tool (`com`), or a running application's UI
/// Automation tree (`uia`: `app`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WindowsSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progid: Option<String>,
    /// `uia`: the application's process name (`notepad`), else a window title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowsTool {
    /// `com`: the action list (empty in a `uia` section).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub script: Vec<ComStep>,
    /// `uia`: the steps, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Box<[crate::ui::UiStep]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_parser: Option<String>,
}

/// One step of a COM action list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComStep {
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub var: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<Value>>,
}

/// Which D-Bus bus a service lives on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bus {
    #[default]
    Session,
    System,
}

/// A Linux section: a D-Bus service's methods (`dbus`: `service`, `object`, `interface`), or a
/// running application's accessibility tree (`atspi`: `app`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinuxSection {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub object: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interface: String,
    #[serde(default)]
    pub bus: Bus,
    /// `atspi`: the application's accessible name, as the accessibility registry lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinuxTool {
    /// `dbus`: the method called.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub method: Box<str>,
    /// `atspi`: the steps, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Box<[crate::ui::UiStep]>>,
    /// Overrides the section's interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<Box<str>>,
    /// Overrides the section's object path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Box<str>>,
    /// The in-args in order: `"${param}"` takes an argument, anything else is fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Box<[Value]>>,
    /// Signature of the in-args; introspected when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_parser: Option<Box<str>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AndroidSection {
    pub package: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AndroidTool {
    pub action: String,
    /// How the intent is sent: `activity` (`am start`, the default), `broadcast` or `service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_uri: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IosSection {
    pub scheme: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IosTool {
    pub url_template: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_group_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LocalSection {}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LocalTool {}

/// How to reach an MCP server: a command to start (`stdio`) or a URL (`http`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpSection {
    /// The program to start (`npx`, `uvx`, a path), looked up on `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables the server gets (it gets none of the gateway's own but `PATH`, `HOME` and
    /// the locale). `${NAME}` in a value is the gateway's variable `NAME`, for a descriptor
    /// in the user's own apps folder only.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Variables the server gets from the gateway's credential store, where they are kept for
    /// this appId by name (`aai-gateway import` moves a server's credentials there;
    /// `aai-gateway auth set <appId> --env NAME` sets one): the value is never in this file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from_store: Vec<String>,
    /// The working folder; `~` is the home folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The Streamable HTTP endpoint (`https://…/mcp`; plain http only on loopback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Bearer token for `url`: `{"type": "bearer", "env": "VAR"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<WebAuth>,
    /// Stop the server after this long without a call (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    /// Set on a descriptor whose tools are the ones its server listed, not the user's words
    /// (never read from a file).
    #[serde(skip)]
    pub listed: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpTool {}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebSection {
    pub base_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<WebAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_headers: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebAuth {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebTool {
    pub endpoint: String,
    /// How `body` is sent: `json` (the default), `form` (urlencoded fields) or `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_type: Option<String>,
    /// Response headers handed to the agent with the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<Vec<String>>,
    /// Follow `Link: rel="next"` up to `max_pages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paginate: Option<Paginate>,
    /// How array query values are sent: `repeat` (default), `comma` or `brackets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_style: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_params: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_parser: Option<String>,
}

/// Pagination of a web tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Paginate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pages: Option<u32>,
    /// JSON Pointer to each page's array of items; default the page itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<String>,
}

impl Descriptor {
    /// The common view of the tools in `platform`'s section, if there is one.
    pub fn tools(&self, platform: Platform) -> Option<Vec<&ToolCommon>> {
        fn common<S, T>(section: &Option<Section<S, T>>) -> Option<Vec<&ToolCommon>> {
            section
                .as_ref()
                .map(|s| s.tools.iter().map(|t| &t.common).collect())
        }
        let p = &self.platforms;
        match platform {
            Platform::Macos => common(&p.macos),
            Platform::Windows => common(&p.windows),
            Platform::Linux => common(&p.linux),
            Platform::Android => common(&p.android),
            Platform::Ios => common(&p.ios),
            Platform::Web => common(&p.web),
            Platform::Local => common(&p.local),
            Platform::Mcp => common(&p.mcp),
        }
    }

    /// One tool of `platform`'s section by name.
    pub fn tool(&self, platform: Platform, name: &str) -> Option<&ToolCommon> {
        self.tools(platform)?.into_iter().find(|t| t.name == name)
    }

    /// The automation kind of `platform`'s section (`dbus`, `applescript`, …).
    pub fn automation(&self, platform: Platform) -> Option<&str> {
        let p = &self.platforms;
        let kind = match platform {
            Platform::Macos => &p.macos.as_ref()?.automation,
            Platform::Windows => &p.windows.as_ref()?.automation,
            Platform::Linux => &p.linux.as_ref()?.automation,
            Platform::Android => &p.android.as_ref()?.automation,
            Platform::Ios => &p.ios.as_ref()?.automation,
            Platform::Web => &p.web.as_ref()?.automation,
            Platform::Local => &p.local.as_ref()?.automation,
            Platform::Mcp => &p.mcp.as_ref()?.automation,
        };
        Some(kind)
    }

    /// Where `platform`'s requests go and the credential they carry, for the sections that
    /// reach a server over HTTP: a web app's, and an MCP server's reached at a URL (its `url`
    /// in place of a base URL). `None` for every other section.
    pub fn credentialed(&self, platform: Platform) -> Option<WebSection> {
        match platform {
            Platform::Web => self.platforms.web.as_ref().map(|s| s.fields.clone()),
            Platform::Mcp => {
                let fields = &self.platforms.mcp.as_ref()?.fields;
                Some(WebSection {
                    base_url: fields.url.clone()?,
                    auth: fields.auth.clone(),
                    default_headers: None,
                })
            }
            _ => None,
        }
    }

    /// The descriptor as an agent should read it for `platform`: the common fields and that
    /// platform's section only.
    pub fn for_platform(&self, platform: Platform) -> Value {
        let mut doc = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(platforms) = doc.get_mut("platforms").and_then(Value::as_object_mut) {
            platforms.retain(|key, _| key == platform.key());
            // How an MCP server is started or reached is the user's: its command line,
            // variables and URL can hold secrets (a token in `env`, a password in a database
            // URL), and the agent needs none of it to call the tools.
            if let Some(mcp) = platforms.get_mut("mcp").and_then(Value::as_object_mut) {
                mcp.retain(|key, _| key == "automation" || key == "tools");
            }
        }
        doc
    }
}
