//! The long-lived gateway (`aai-gateway serve`): one per user, many clients.
//!
//! It serves MCP Streamable HTTP on loopback ([`http`]) and says where it listens (see [`aai_engine::runfiles`]) the way
//! Jupyter's runtime files do: `AAI_HOME/run/serve.json` (`{"url", "pid"}`) and
//! `AAI_HOME/run/token` (the bearer token), both 0600 and removed on a clean exit, so the
//! stdio forwarder, `aai-gateway stop` and scripts find it.

mod control;
pub mod dashboard;
pub mod forward;
pub mod http;
mod ids;
mod logins;
mod reply;
pub mod service;
pub mod sessions;

/// Where the daemon listens unless `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7377";
