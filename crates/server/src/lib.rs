//! The gateway's MCP surface over the engine (`aai-engine`): the rmcp server with the
//! gateway's tools ([`mcp`]), the stdio transport ([`transport`]) and the daemon — MCP over
//! HTTP on loopback, its control endpoints and dashboard, sessions and the stdio forwarder
//! ([`daemon`]).

pub mod daemon;
pub mod mcp;
pub mod transport;
