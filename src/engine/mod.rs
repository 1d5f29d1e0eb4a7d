//! The load engine (being built).
