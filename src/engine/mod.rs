//! The load engine.
pub mod http1;
