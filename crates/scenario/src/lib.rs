//! Scenario files: which systems to compare, the backends, TLS, the load, and the
//! changes made while the load runs. Documented key by key in docs/scenarios.md.
//!
//! Everything is checked while parsing, so a typo or an impossible value is reported
//! with the file, line and key before any process starts.

pub mod failover;
pub mod plan;
pub mod platform;
pub mod probes;
pub mod runner;
pub mod sizing;
pub mod testing;

mod checks;
mod keys;
mod schema;

pub(crate) use keys::Bad;
pub use schema::*;

#[cfg(test)]
mod tests;
