//! The terminal summary of a load run ([`summary`], laid out like wrk2's), and the
//! one-line descriptions of a route set and a request mix that it shares with
//! `summary.txt` ([`crate::summary`]). Its tables are the report's own
//! ([`crate::tables`]) written as text ([`crate::plain`]); why a result should not be
//! trusted is [`crate::warnings`].

mod lines;
mod load;
mod sessions;

pub use lines::{mix_lines, route_set_change_line, route_set_line};
pub use load::summary;
pub use sessions::{ends_line, sessions_summary};
