//! Reports: what a person reads, drawn only from result documents (never from live
//! state), so any saved run can be re-drawn and compared.
//!
//! The modules point only down. At the bottom, [`fmt`], [`markup`] and [`theme`]
//! (numbers, escaping, colours and CSS) depend on nothing else here; [`page`] is the
//! HTML shell built on them; [`input`] loads runs; [`charts`], [`tables`] and the
//! renderers draw from the loaded input; [`files`] writes what the renderers made.

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
