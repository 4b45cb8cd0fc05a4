//! The settings the built-in toolsets read: `local`, `desktop` and `browser` in config.json.
//! The engine keeps them in its config and hands them to the toolsets through [`crate::Setup`];
//! neither side needs the other's crate for them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// `local` in config.json: which built-in apps are on, and each one's settings.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LocalConfig {
    pub terminal: bool,
    /// Terminal sessions may start in, and `cd` by `working_dir` to, any folder (by default
    /// only inside `sandbox.allowed_directories`). What the commands may write is decided by
    /// `containment` either way.
    pub terminal_anywhere: bool,
    /// How terminal commands, launched apps and scheduled agents are contained: `"sandbox"`
    /// (Landlock on Linux, Seatbelt on macOS: writes only in the allowed folders, the
    /// temporary folder and `writable_caches`; the gateway's home read-only and its secrets
    /// unreadable; refused where no sandbox can apply) or `"none"` (the user's full rights).
    pub containment: Containment,
    /// Folders contained processes may also write (build and package caches).
    pub writable_caches: Vec<PathBuf>,
    /// Where contained processes may connect (`mode`: `"proxy"` or `"open"`; `allow`).
    pub egress: EgressConfig,
    pub files: bool,
    pub system: bool,
    /// Screenshots, OCR and finding UI elements (`local.screen`).
    pub screen: bool,
    /// Mouse and keyboard (`local.input`).
    pub input: bool,
    /// Launching, switching and closing apps, managing windows (`local.apps`).
    pub apps: bool,
    /// A Chromium of the client's own behind the domain policy (`local.browser`).
    pub browser: bool,
    pub sandbox: SandboxConfig,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            terminal: true,
            terminal_anywhere: false,
            containment: Containment::default(),
            writable_caches: default_caches(),
            egress: EgressConfig::default(),
            files: true,
            system: true,
            screen: true,
            input: true,
            apps: true,
            browser: true,
            sandbox: SandboxConfig::default(),
        }
    }
}

/// `local.containment` in config.json.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Containment {
    /// Terminal commands, launched apps and scheduled agents run in the system's sandbox
    /// (Landlock on Linux, Seatbelt on macOS); where none can apply they are refused.
    #[default]
    #[serde(alias = "landlock")]
    Sandbox,
    /// They run with the user's full rights (only the file tools' checks apply).
    None,
}

/// Caches contained processes may write by default: none. Every package and build cache
/// holds code the user's own tools run later without checking it again — a virtualenv under
/// `~/.cache`, a crate's `build.rs` extracted under `~/.cargo/registry/src`, a hook checkout of
/// pre-commit — so a command that could write one would leave behind what runs uncontained.
/// A user who wants downloads to land in a cache adds it to `local.writable_caches` knowingly.
pub fn default_caches() -> Vec<PathBuf> {
    Vec::new()
}

/// `local.egress` in config.json.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct EgressConfig {
    /// `"proxy"` (the default): terminal commands and command-line launches reach the network
    /// only through the gateway's proxy, to the package registries and the hosts in `allow`
    /// (desktop programs, scheduled agents and MCP servers keep the network as it is).
    /// `"open"`: the network as it is for them too.
    pub mode: EgressMode,
    /// Hosts they may reach besides the package registries: a name (`example.com`, which
    /// covers its subdomains too) or, for a service on this computer or a private network,
    /// the address with its port (`127.0.0.1:8080`). The gateway's own ports are never reached.
    pub allow: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EgressMode {
    #[default]
    Proxy,
    Open,
}

/// The package registries every box may reach: Rust's, Python's, JavaScript's, Go's, Ruby's,
/// Java's and Debian's.
pub const REGISTRIES: &[&str] = &[
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "static.rust-lang.org",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "deb.debian.org",
    "security.debian.org",
];

impl EgressConfig {
    /// The hosts a box may reach: the registries and the user's.
    pub fn allowed(&self) -> Vec<String> {
        REGISTRIES
            .iter()
            .map(|h| (*h).to_owned())
            .chain(self.allow.iter().map(|h| host_of(h)))
            .collect()
    }
}

/// `host` of an allow entry `host:port` (the port matters only for private addresses).
fn host_of(entry: &str) -> String {
    match entry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !host.contains(':') => {
            host.to_owned()
        }
        _ => entry.to_owned(),
    }
}

/// `local.sandbox` in config.json.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    pub allowed_directories: Vec<PathBuf>,
    pub denied_patterns: Vec<String>,
    /// Secret stores beyond the built-in ones (`~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.config/gh`,
    /// `~/.netrc`, keyrings, browser profiles, …): the file tools refuse them, and every
    /// contained process (terminal commands, launched apps, scheduled agents, MCP servers) sees
    /// them as empty read-only folders or files.
    pub denied_paths: Vec<PathBuf>,
    pub max_file_size: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            allowed_directories: vec!["~/Projects".into(), "~/Desktop".into()],
            denied_patterns: [
                "~/.ssh",
                "~/.ssh/**",
                "~/.gnupg",
                "~/.gnupg/**",
                "~/.aws",
                "~/.aws/**",
                "**/node_modules",
                "**/node_modules/**",
                "/etc",
                "/etc/**",
                "/System/**",
            ]
            .map(str::to_owned)
            .to_vec(),
            denied_paths: Vec::new(),
            max_file_size: 50 * 1024 * 1024,
        }
    }
}

/// The long edge of the agent's space by default: what vision models are trained on.
pub const DEFAULT_MAX_EDGE: u32 = 1568;
/// The long edge is never above this, whatever the config says.
pub const MAX_EDGE_LIMIT: u32 = 2000;

/// `desktop` in config.json.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DesktopConfig {
    /// The long edge of screenshots and of the coordinate space, in pixels (at most 2000).
    pub max_edge: u32,
    /// Apps whose windows are blacked out in screenshots and OCR, and which input never
    /// reaches while one is focused: matched, case-insensitively, as a substring of a window's
    /// title or its application class. Added to the defaults (password managers, banking).
    pub protected_apps: Vec<String>,
    /// Drop the default protected apps and keep only `protected_apps`.
    pub no_default_protected_apps: bool,
    /// Tesseract's language(s) for OCR when a call names none (e.g. `eng`, `eng+deu`).
    pub ocr_language: String,
    /// Allow mouse and keyboard on Wayland (through the RemoteDesktop portal). Wayland does
    /// not tell the gateway which window is focused, so protected apps cannot be checked
    /// there: input is off until the user turns this on.
    pub wayland_input: bool,
    /// Grab Ctrl+Shift+Esc on the X display while `aai-gateway serve` runs: pressing it is
    /// the emergency stop.
    pub stop_hotkey: bool,
}

impl Default for DesktopConfig {
    fn default() -> Self {
        Self {
            max_edge: DEFAULT_MAX_EDGE,
            protected_apps: Vec::new(),
            no_default_protected_apps: false,
            ocr_language: "eng".into(),
            wayland_input: false,
            stop_hotkey: true,
        }
    }
}

/// Password managers and banking apps: protected unless the user opts out.
pub const DEFAULT_PROTECTED: &[&str] = &[
    "1password",
    "bitwarden",
    "keepass",
    "keepassxc",
    "lastpass",
    "dashlane",
    "enpass",
    "nordpass",
    "proton pass",
    "keeper password",
    "seahorse",
    "kwalletmanager",
    "gnome-keyring",
    "passwords and keys",
    "keychain access",
    "roboform",
    "authy",
    "yubico authenticator",
    "banking",
    "online banking",
    "paypal",
];

impl DesktopConfig {
    /// The long edge in effect (a configured value above the limit is capped).
    pub fn max_edge(&self) -> u32 {
        self.max_edge.clamp(200, MAX_EDGE_LIMIT)
    }

    /// The protected-app patterns in effect, lower-cased.
    pub fn protected(&self) -> Vec<String> {
        let defaults = if self.no_default_protected_apps {
            &[][..]
        } else {
            DEFAULT_PROTECTED
        };
        defaults
            .iter()
            .map(|s| (*s).to_owned())
            .chain(self.protected_apps.iter().map(|s| s.to_lowercase()))
            .filter(|s| !s.trim().is_empty())
            .collect()
    }

    /// The pattern a window of this title and application class matches, if it is protected.
    pub fn protects(&self, title: &str, class: &str) -> Option<String> {
        let title = title.to_lowercase();
        let class = class.to_lowercase();
        self.protected()
            .into_iter()
            .find(|p| title.contains(p.as_str()) || class.contains(p.as_str()))
    }
}

/// `browser` in config.json.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BrowserConfig {
    /// The Chromium or Chrome to launch (default: the first of chromium, chromium-browser,
    /// google-chrome, microsoft-edge on PATH).
    pub executable: Option<PathBuf>,
    /// Run without a window (default true).
    pub headless: bool,
    /// Use a browser the user runs instead of launching one: its debugging endpoint
    /// (`http://127.0.0.1:9222` or a `ws://` URL). Each client gets a browser context of its
    /// own there, behind the same policy proxy.
    pub attach: Option<String>,
    /// Hosts the browser may reach (a name covers its subdomains; `*.x` only the
    /// subdomains). Empty: every host not denied.
    pub allow: Vec<String>,
    /// Hosts the browser never reaches; wins over `allow`.
    pub deny: Vec<String>,
    /// Drop the built-in deny list of banking, payment and password-manager sites.
    pub no_default_deny: bool,
    /// Connect to another address for a host and port (`{"app.test:443": "127.0.0.1:8443"}`),
    /// as curl's `--connect-to`: for development servers and tests.
    pub resolve: BTreeMap<String, String>,
    /// Close a client's browser after this many seconds without a call.
    pub idle_seconds: u64,
    /// The window (viewport) size.
    pub width: u32,
    pub height: u32,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            executable: None,
            headless: true,
            attach: None,
            allow: Vec::new(),
            deny: Vec::new(),
            no_default_deny: false,
            resolve: BTreeMap::new(),
            idle_seconds: 600,
            width: 1280,
            height: 800,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowed_hosts_are_the_registries_and_the_users() {
        let config: EgressConfig = serde_json::from_value(serde_json::json!({
            "allow": ["example.com", "127.0.0.1:8080"]
        }))
        .expect("config");
        assert_eq!(config.mode, EgressMode::Proxy);
        let allowed = config.allowed();
        assert!(allowed.contains(&"crates.io".to_owned()));
        assert!(allowed.contains(&"example.com".to_owned()));
        assert!(allowed.contains(&"127.0.0.1".to_owned()));
        let open: EgressConfig =
            serde_json::from_value(serde_json::json!({"mode": "open"})).expect("open");
        assert_eq!(open.mode, EgressMode::Open);
    }
}
