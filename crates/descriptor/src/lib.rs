//! The `aai.json` descriptor: model, validation, tool naming, guides and placeholders.
//!
//! This crate is pure: it reads no files, opens no sockets and looks at no clock, so every
//! rule here is tested fast and exhaustively. Discovery (which files exist) lives in the
//! gateway; executing tools lives in `aai-executor`.
//!
//! ```
//! let json = br#"{"schema_version": "1.0", "appId": "org.example.app", "name": "Example",
//!   "platforms": {"linux": {"automation": "dbus", "service": "org.example.App",
//!     "object": "/org/example/App", "interface": "org.example.App",
//!     "tools": [{"name": "ping", "description": "Ping it", "method": "Ping"}]}}}"#;
//! let descriptor = aai_descriptor::parse("example/aai.json", json).unwrap();
//! assert_eq!(descriptor.tools(aai_descriptor::Platform::Linux).unwrap()[0].name, "ping");
//! ```

pub mod dbus_sig;
mod error;
pub mod guide;
mod model;
pub mod naming;
mod parse;
pub mod script;
pub mod statements;
pub mod template;
pub mod ui;
pub mod url;
pub mod visible;

pub use error::{AaiError, ErrorKind, LoadError, Problem};
pub use model::*;
pub use parse::{KeepSchema, SCHEMA_JSON, is_valid_app_id, parse, parse_known, script_output};
