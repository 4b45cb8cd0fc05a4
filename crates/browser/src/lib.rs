//! The built-in browser toolset, `local.browser` (see [`browser`]): a Chromium of each
//! client's own behind the domain policy, driven over the DevTools Protocol.

pub mod browser;

pub(crate) use aai_toolset::{Call, Check, Setup, Toolset, shipped, tool_names, unknown};
pub use browser::{Browser, DESCRIPTOR};
