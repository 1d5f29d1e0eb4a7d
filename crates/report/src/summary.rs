//! `summary.txt`: the systems of a run side by side (the text comparison), and, for a
//! run at fractions of each system's maximum, the maximum-throughput table under it.

use crate::input::ReportInput;
use crate::render::{File, Rendered, Rendering, Report, ReportError};
use crate::text::comparison;
use results::RunResult;
use std::fmt::Write as _;

/// `summary.txt`, as a renderer: the systems of a run side by side ([`comparison`]),
/// what `ingressbench run` prints when it ends. It is not among the files of
/// `ingressbench report`; `ingressbench run` writes it into the run's folder.
pub struct Summary;

impl Summary {
    /// The summary's text: every series of `input` under its scenario's name.
    pub fn text(input: &ReportInput) -> String {
        let results: Vec<RunResult> = input.series.iter().map(|s| s.result.clone()).collect();
        // A sizing scan has no load of its own to compare: its table is the summary.
        let mut out = if results.is_empty() && input.has_sizings() {
            format!("Scenario {}\n", input.scenarios().join(", "))
        } else {
            comparison(&input.scenarios().join(", "), &results)
        };
        if input.has_searches() {
            out.push('\n');
            out.push_str(&plain(&crate::tables::maxima(input)));
        }
        if input.has_sizings() {
            out.push('\n');
            out.push_str(&plain(&crate::tables::sizing(input)));
        }
        let failover = crate::failover::table(input);
        if !failover.rows.is_empty() {
            out.push('\n');
            out.push_str(&plain(&failover));
        }
        out
    }
}

impl Report for Summary {
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError> {
        Ok(Rendered::one(File::Summary, Summary::text(r.input)))
    }
}

/// A table as aligned plain text under its title (text columns left, numbers right).
fn plain(t: &crate::tables::Table) -> String {
    let mut widths: Vec<usize> = t.cols.iter().map(|(_, h)| h.len()).collect();
    for r in &t.rows {
        for (w, c) in widths.iter_mut().zip(&r.cells) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut l = String::from(" ");
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let numeric = c.chars().next().is_some_and(|ch| ch.is_ascii_digit());
            if i == 0 || !numeric {
                let _ = write!(l, " {c:<w$}");
            } else {
                let _ = write!(l, " {c:>w$}");
            }
        }
        l.trim_end().to_string()
    };
    let mut s = format!("{}\n", t.title);
    s.push_str(&line(t.cols.iter().map(|(_, h)| h.as_str()).collect()));
    s.push('\n');
    for r in &t.rows {
        s.push_str(&line(r.cells.iter().map(String::as_str).collect()));
        s.push('\n');
    }
    s
}
