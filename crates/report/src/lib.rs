//! Reports: what a person reads, drawn only from result documents (never from live
//! state), so any saved run can be re-drawn and compared.

pub mod charts;
pub mod compare;
pub mod files;
pub mod fmt;
pub mod hdr;
pub mod html;
pub mod input;
pub mod markdown;
pub mod markup;
pub mod page;
pub mod tables;
pub mod text;
pub mod theme;
