//! The built-in local toolsets as one kit (`spec/desktop-control.zh.md` §3): `local.files`,
//! `local.terminal`, `local.system` ([`aai_terminal`]), `local.screen`, `local.input`,
//! `local.apps` ([`aai_desktop`]) and `local.browser` ([`aai_browser`]) — each an app like any
//! other, a real `aai.json` checked by the same schema and rules, offered through the same MCP
//! surface and run through the same gate and audit log.
//!
//! [`Local`] is the [`Kit`] the binary plugs into the engine: which toolsets a config turns
//! on, and the toolsets built from one [`Setup`]. The engine knows none of them.

use std::sync::{Arc, LazyLock};

use aai_descriptor::Descriptor;
use aai_toolset::{Kit, LocalConfig, Setup, Toolset};

/// A toolset's entry in the kit: its descriptor, and whether a config turns it on.
struct Entry {
    descriptor: &'static LazyLock<Arc<Descriptor>>,
    enabled: fn(&LocalConfig) -> bool,
}

/// Every built-in toolset, in the order they are listed.
const TABLE: &[Entry] = &[
    Entry {
        descriptor: &aai_terminal::files::DESCRIPTOR,
        enabled: |c| c.files,
    },
    Entry {
        descriptor: &aai_terminal::terminal::DESCRIPTOR,
        enabled: |c| c.terminal,
    },
    Entry {
        descriptor: &aai_terminal::system::DESCRIPTOR,
        enabled: |c| c.system,
    },
    Entry {
        descriptor: &aai_desktop::screen::DESCRIPTOR,
        enabled: |c| c.screen,
    },
    Entry {
        descriptor: &aai_desktop::input::DESCRIPTOR,
        enabled: |c| c.input,
    },
    Entry {
        descriptor: &aai_desktop::apps::DESCRIPTOR,
        enabled: |c| c.apps,
    },
    Entry {
        descriptor: &aai_browser::DESCRIPTOR,
        enabled: |c| c.browser,
    },
];

/// The local toolsets as one kit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Kit for Local {
    fn all(&self) -> Vec<Arc<Descriptor>> {
        all_descriptors()
    }

    fn descriptors(&self, config: &LocalConfig) -> Vec<Arc<Descriptor>> {
        apps()
            .filter(|(_, enabled)| enabled(config))
            .map(|(descriptor, _)| descriptor)
            .collect()
    }

    fn build(&self, setup: &Setup) -> Vec<Box<dyn Toolset>> {
        let mut sets: Vec<Box<dyn Toolset>> = vec![
            Box::new(aai_terminal::files::Files::new(setup)),
            Box::new(aai_terminal::terminal::Terminal::new(setup)),
            Box::new(aai_terminal::system::System),
        ];
        sets.extend(aai_desktop::toolsets(setup));
        sets.push(Box::new(aai_browser::Browser::new(setup)));
        sets
    }
}

/// Every built-in toolset's descriptor, with whether a config turns it on, in the order they
/// are listed.
pub fn apps() -> impl Iterator<Item = (Arc<Descriptor>, fn(&LocalConfig) -> bool)> {
    TABLE
        .iter()
        .map(|entry| (Arc::clone(entry.descriptor), entry.enabled))
}

/// Every built-in descriptor, on or off (tests, documentation).
pub fn all_descriptors() -> Vec<Arc<Descriptor>> {
    apps().map(|(descriptor, _)| descriptor).collect()
}

/// What is on top at a point of the gateway's desktop, for clicks by pointer.
pub use aai_desktop::window_at;

/// The kit's toolsets built with `setup`.
pub fn toolsets(setup: &Setup) -> aai_toolset::Toolsets {
    aai_toolset::Toolsets::new(&Local, setup)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped descriptors pass every check an app's file does, are listed in the order
    /// they are built, and name the tools the toolsets run.
    #[test]
    fn shipped_descriptors_are_valid_apps() {
        let setup = Setup::new(LocalConfig::default(), Vec::new());
        let built = Local.build(&setup);
        let all = all_descriptors();
        assert_eq!(built.len(), all.len());
        for (descriptor, set) in all.iter().zip(&built) {
            assert!(
                descriptor.app_id.starts_with("local."),
                "{}",
                descriptor.app_id
            );
            assert_eq!(set.descriptor().app_id, descriptor.app_id);
            let tools = descriptor
                .tools(aai_descriptor::Platform::Local)
                .expect("local tools");
            assert!(!tools.is_empty());
        }
        let off = LocalConfig {
            browser: false,
            ..LocalConfig::default()
        };
        assert_eq!(Local.descriptors(&off).len(), all.len() - 1);
    }
}
