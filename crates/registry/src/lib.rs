//! The AAI app store's server: publishers sign descriptors with ed25519, the registry checks
//! them with the gateway's own descriptor checks and keeps every version in PostgreSQL, and
//! clients search it (ranked full text + trigram typo tolerance) and install from it.
//! Server processes hold no state; run as many as needed against one database.

pub mod api;
pub mod claims;
pub mod db;
pub mod keys;
