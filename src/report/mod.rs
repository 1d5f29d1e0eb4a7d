//! Reports: what a person reads, drawn only from result documents (never from live
//! state), so any saved run can be re-drawn and compared.

pub mod compare;
pub mod hdr;
pub mod text;
