//! Reports: what a person reads, drawn only from result documents (never from live
//! state), so any saved run can be re-drawn and compared.
//!
//! The modules point only down. At the bottom, [`fmt`], [`markup`] and [`theme`]
//! (numbers, escaping, colours and CSS) depend on nothing else here; [`page`] is the
//! HTML shell built on them; [`input`] loads runs; [`warnings`] says why a result is
//! not to be trusted; [`charts`] and [`tables`] prepare what is shown, each table one
//! [`table::Table`] that the page, `report.md` and the text ([`plain`]) all render;
//! each output is one [`Report`] renderer ([`html`], [`markdown`], [`csv`], [`hgrm`],
//! [`png`], [`summary`]) drawing from a [`Rendering`] of the loaded input, and
//! [`text`] is the terminal summary of a load run; [`files`] writes what the
//! renderers made. [`compare`] stands beside them,
//! and [`gate`] (the `run --fail-on` limits) beside it, on its metric names.

pub mod charts;
pub mod compare;
pub mod csv;
pub mod failover;
pub mod files;
pub mod fmt;
pub mod gate;
pub mod hdr;
pub mod hgrm;
pub mod html;
pub mod input;
pub mod markdown;
pub mod markup;
pub mod page;
pub mod plain;
pub mod png;
pub mod render;
pub mod summary;
pub mod table;
pub mod tables;
pub mod text;
pub mod theme;
pub mod warnings;

pub use render::{Rendering, Report};
