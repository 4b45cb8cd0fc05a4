//! What discovery offers: the descriptors found on this machine ([`discovery`]) and kept
//! parsed between starts ([`cache`]), the snapshot of offered apps each scan publishes
//! ([`snapshot`]), the watcher that scans again when files change ([`watch`]), and where the
//! app store's apps live ([`store_apps`]).

pub mod cache;
pub mod discovery;
pub mod snapshot;
pub mod store_apps;
pub mod watch;
