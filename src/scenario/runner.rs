//! runner (being built)
