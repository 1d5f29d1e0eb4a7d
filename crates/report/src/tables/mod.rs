//! The report's tables as plain data (a column key, a header, text cells), built once
//! from the results and rendered twice: as HTML in the page and as Markdown in
//! `report.md`. Cells hold the numbers as plain text, in the units the header names,
//! so a test (or a reader with a spreadsheet) can compare them with `result.json`.
//!
//! One file per kind of run: [`load`] (any load: percentiles, errors, throughput,
//! settings, a plan's steps, a mix), [`lab`] (changes, propagation, route sets, what
//! the system under test spent) and [`search`] (maxima and sizing scans); the list of
//! all tables in page order and the reasons not to trust a series are here.

use crate::fmt::MISSING;
use crate::input::{ReportInput, Series, Unreadable};

pub use crate::table::{Row, Table};

pub mod corpus;
mod lab;
mod load;
mod search;
#[cfg(test)]
mod tests;

pub use lab::{changes, probes, propagation, resources, route_sets, routes, sessions};
pub use load::{
    errors, handshakes_per_s, mix, percentiles, repetitions, settings, steps, throughput,
};
pub use search::{maxima, sizing};

fn cols(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, h)| (k.to_string(), h.to_string()))
        .collect()
}

/// A cell that lists: `items` joined by `sep`, or [`MISSING`] when there are none.
fn listed<S: AsRef<str>>(items: &[S], sep: &str) -> String {
    if items.is_empty() {
        return MISSING.into();
    }
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    items.join(sep)
}

/// A cell of counts by name (`read: 3, timeout: 1`), or [`MISSING`] when empty.
fn counted<'a, V: std::fmt::Display + 'a>(
    counts: impl IntoIterator<Item = (&'a String, &'a V)>,
) -> String {
    let items: Vec<String> = counts
        .into_iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    listed(&items, ", ")
}

/// One row per series, in series order (its colour), with the cells `cells` gives it.
fn per_series(input: &ReportInput, cells: impl Fn(&Series) -> Vec<String>) -> Vec<Row> {
    input
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| Row {
            series: Some(i),
            cells: cells(s),
        })
        .collect()
}

/// Every table, in page order.
pub fn all(input: &ReportInput) -> Vec<Table> {
    let sizing = input.has_sizings().then(|| sizing(input));
    let maxima = input.has_searches().then(|| maxima(input));
    let steps = input
        .series
        .iter()
        .any(|s| !s.result.steps.is_empty())
        .then(|| steps(input));
    let mix = input
        .series
        .iter()
        .any(|s| s.result.mix.is_some())
        .then(|| mix(input));
    let route_sets = input
        .series
        .iter()
        .any(|s| s.result.lab.as_ref().is_some_and(|l| l.route_set.is_some()))
        .then(|| route_sets(input));
    let held = input
        .series
        .iter()
        .any(|s| s.result.sessions.is_some())
        .then(|| sessions(input));
    sizing
        .into_iter()
        .chain(maxima)
        .chain(steps)
        .chain(route_sets)
        .chain(mix)
        .chain([percentiles(input), errors(input), changes(input)])
        .chain(held)
        .chain([
            propagation(input),
            routes(input),
            probes(input),
            corpus::corpus(input),
            resources(input),
            crate::failover::table(input),
            throughput(input),
            settings(input),
        ])
        .collect()
}

/// The row of a system whose stored search or scan cannot be read: its name, no
/// figures, and in its last column (the note) the file and why.
fn unreadable_row(u: &Unreadable, columns: usize) -> Row {
    let mut cells = vec![MISSING.to_string(); columns];
    cells[0] = u.name.clone();
    cells[columns - 1] = format!("cannot be read: {}", u.why);
    Row {
        series: None,
        cells,
    }
}

/// Each series' own warnings ([`results::RunResult::warnings`]: what went wrong around
/// the measurement, such as a refused CPU pin or a namespace left behind), by series.
pub fn run_warnings(input: &ReportInput) -> Vec<(usize, String)> {
    input
        .series
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.result.warnings.iter().map(move |w| (i, w.clone())))
        .collect()
}

/// Why each series is not to be trusted: `(series, reason)`, from the text report's
/// warnings plus a proxy that died.
pub fn warnings(input: &ReportInput) -> Vec<(usize, String)> {
    let mut w = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        for line in crate::warnings::warnings(&s.result) {
            w.push((i, line));
        }
        if s.result.lab.as_ref().is_some_and(|l| l.proxy_died) {
            w.push((i, "the proxy died during the run".to_string()));
        }
    }
    w
}
