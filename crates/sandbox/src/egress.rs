//! The network of what the agent starts (`local.egress`): contained processes reach it only
//! through a proxy of the gateway's, which lets through the package registries and the hosts
//! the user allowed, and never an address of this computer or of a private network the user
//! did not name, nor the gateway's own ports by any name. Each box gets a proxy of its own, so
//! what a command reached is known and goes into its result (and so its audit row).

use std::sync::Arc;

use aai_toolset::{EgressConfig, EgressMode};

use crate::policy::DomainPolicy;
use crate::proxy::Proxy;

/// Starts a proxy for one box under `config`; `Ok(None)` when the mode is `open`.
///
/// # Errors
/// AUTOMATION_FAILED when the proxy cannot start: the box is not started with the open
/// network instead.
pub async fn proxy(
    config: &EgressConfig,
    home: &std::path::Path,
) -> Result<Option<Arc<Proxy>>, aai_descriptor::AaiError> {
    if config.mode == EgressMode::Open {
        return Ok(None);
    }
    let policy = Arc::new(DomainPolicy::keyed(
        "local.egress",
        &config.allowed(),
        &[],
        true,
    ));
    match Proxy::start_with(
        policy,
        std::collections::BTreeMap::new(),
        Some(home.to_path_buf()),
        Some(config.allow.clone()),
    )
    .await
    {
        Ok(proxy) => Ok(Some(Arc::new(proxy))),
        Err(error) => Err(aai_toolset::failed(format!(
            "the gateway's egress proxy could not start ({error}), and nothing is started with the open network instead; try again, or set \"local\": {{\"egress\": {{\"mode\": \"open\"}}}} in config.json"
        ))),
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
