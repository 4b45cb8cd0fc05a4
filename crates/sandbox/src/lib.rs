//! What the agent reaches through the built-in toolsets, and how it is kept in bounds:
//!
//! - [`files`]: the file sandbox — allowed folders, denied patterns and secret stores, every
//!   path checked after resolving links and opened beneath its folder ([`beneath`]);
//! - [`profile`]: the containment profile a terminal session, a launched app or a scheduled
//!   agent runs under, and a call's request to run outside it;
//! - [`egress`], [`proxy`], [`policy`]: the network, through a proxy of the gateway's under a
//!   domain policy.
//!
//! A library the toolsets share (terminal, files, apps, browser, drafts, the scheduler); no
//! toolset is here.

pub mod beneath;
pub mod egress;
pub mod files;
pub mod policy;
pub mod profile;
pub mod proxy;

use std::sync::Arc;

pub use files::{Sandbox, read_checked, secret_paths};
pub use profile::Contained;

/// Reads files for web uploads (multipart bodies) exactly as `file_read` would: inside the
/// allowed folders (narrowed by the client's roots), never the gateway's own files, within the
/// size limit, race-free.
pub fn upload_reader(setup: &aai_toolset::Setup) -> aai_executor::rest::FileReader {
    let setup = setup.clone();
    Arc::new(move |path: &str, roots: &[String]| {
        let (resolved, bytes) = read_checked(&setup.sandbox(roots), path)?;
        let name = resolved
            .file_name()
            .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
        Ok((bytes, name))
    })
}
