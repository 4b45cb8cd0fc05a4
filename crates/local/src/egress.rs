//! The network of what the agent starts (`local.egress`): contained processes reach it only
//! through a proxy of the gateway's, which lets through the package registries and the hosts
//! the user allowed, and never an address of this computer or of a private network the user
//! did not name, nor the gateway's own ports by any name. Each box gets a proxy of its own, so
//! what a command reached is known and goes into its result (and so its audit row).

use std::sync::Arc;

use serde::Deserialize;

use crate::browser::policy::DomainPolicy;
use crate::browser::proxy::Proxy;

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

    /// Starts a proxy for one box; `Ok(None)` when the mode is `open`.
    ///
    /// # Errors
    /// AUTOMATION_FAILED when the proxy cannot start: the box is not started with the open
    /// network instead.
    pub async fn proxy(
        &self,
        home: &std::path::Path,
    ) -> Result<Option<Arc<Proxy>>, aai_descriptor::AaiError> {
        if self.mode == EgressMode::Open {
            return Ok(None);
        }
        let policy = Arc::new(DomainPolicy::keyed(
            "local.egress",
            &self.allowed(),
            &[],
            true,
        ));
        match Proxy::start_with(
            policy,
            std::collections::BTreeMap::new(),
            Some(home.to_path_buf()),
            Some(self.allow.clone()),
        )
        .await
        {
            Ok(proxy) => Ok(Some(Arc::new(proxy))),
            Err(error) => Err(crate::failed(format!(
                "the gateway's egress proxy could not start ({error}), and nothing is started with the open network instead; try again, or set \"local\": {{\"egress\": {{\"mode\": \"open\"}}}} in config.json"
            ))),
        }
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

/// What a command reached and was refused, for its result: `{"reached": [...], "refused":
/// [{"host", "port", "why"}]}`, and a hint when something was refused.
pub fn report(proxy: &Proxy, mark: u64) -> serde_json::Value {
    let refused: Vec<serde_json::Value> = proxy
        .refused_since(mark)
        .into_iter()
        .map(|r| serde_json::json!({"host": r.host, "port": r.port, "why": r.rule}))
        .collect();
    let mut out = serde_json::json!({
        "reached": proxy.reached_since(mark),
        "refused": refused,
    });
    if !refused.is_empty() {
        out["hint"] = serde_json::Value::from(
            "the sandbox reaches the network only through the gateway's proxy: package registries and the hosts in local.egress.allow. Run the command again naming the host in `hosts` (the user is asked every time), or ask the user to add it to local.egress.allow",
        );
    }
    out
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
