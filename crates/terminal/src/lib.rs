//! The built-in toolsets that work on the user's files and shell, each an app like any other
//! (a real `aai.json` in `toolsets/`): `local.terminal` (commands in contained sessions, their
//! risk judged from what they do), `local.files` (the file sandbox's reads, writes and
//! searches) and `local.system` (notifications, the clipboard, processes).

pub mod files;
pub mod system;
pub mod terminal;

pub use aai_classify as classify;
pub(crate) use aai_toolset::{Binding, Call, Rated, Setup, Toolset, shipped, unknown};
