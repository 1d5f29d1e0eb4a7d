//! `summary.txt`: the systems of a run side by side (the text comparison), and, for a
//! run at fractions of each system's maximum, the maximum-throughput table under it.
//!
//! Its figures are the report's own tables ([`crate::tables`]) written as text
//! ([`crate::plain`]): a percentile in `summary.txt` is the one on the page and in
//! `report.md`, formatted once where the table is built.

use crate::fmt::{fmt_secs, MISSING};
use crate::input::ReportInput;
use crate::plain::{self, Plain};
use crate::render::{File, Rendered, Rendering, Report, ReportError};
use crate::table::{Row, Table};
use crate::tables;
use crate::text::{mix_lines, route_set_change_line, route_set_line};
use crate::warnings::warnings;
use results::RunResult;
use std::fmt::Write as _;

/// `summary.txt`, as a renderer: the systems of a run side by side ([`comparison`]),
/// what `ingressbench run` prints when it ends. It is not among the files of
/// `ingressbench report`; `ingressbench run` writes it into the run's folder.
pub struct Summary;

impl Summary {
    /// The summary's text: every series of `input` under its scenario's name.
    pub fn text(input: &ReportInput) -> String {
        let scenario = input.scenarios().join(", ");
        // A sizing scan has no load of its own to compare: its table is the summary.
        let mut out = if input.series.is_empty() && input.has_sizings() {
            format!("Scenario {scenario}\n")
        } else {
            comparison(&scenario, input)
        };
        let studies = [
            input.has_searches().then(|| tables::maxima(input)),
            input.has_sizings().then(|| tables::sizing(input)),
            Some(crate::failover::table(input)).filter(|t| !t.rows.is_empty()),
        ];
        for t in studies.into_iter().flatten() {
            out.push('\n');
            out.push_str(&plain::table(&t));
        }
        out
    }
}

impl Report for Summary {
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError> {
        Ok(Rendered::one(File::Summary, Summary::text(r.input)))
    }
}

/// Systems side by side: how they were loaded, the percentile spectrum, the S1 error
/// table, endpoint and route propagation and what each system spent (lab runs), and
/// the worst change of each system, then why any of them is not to be trusted.
pub fn comparison(scenario: &str, input: &ReportInput) -> String {
    let series = &input.series;
    let mut s = String::new();
    let _ = writeln!(s, "Scenario {scenario}: {} systems", series.len());
    let results: Vec<&RunResult> = series.iter().map(|x| &x.result).collect();
    if let Some(line) = load_line(&results) {
        let _ = writeln!(s, "  {line}");
    }
    // What went wrong around the runs, before their figures are read.
    for x in series {
        for w in &x.result.warnings {
            let _ = writeln!(s, "WARNING: {}: {w}", x.name);
        }
    }
    // Each system's route set and request mix, when the scenario has them.
    for x in series {
        let r = &x.result;
        let mut lines = Vec::new();
        if let Some(rs) = r.lab.as_ref().and_then(|l| l.route_set.as_ref()) {
            lines.push(route_set_line(rs));
            lines.extend(rs.changes.iter().map(route_set_change_line));
        }
        if let Some(m) = &r.mix {
            lines.extend(mix_lines(m));
        }
        if !lines.is_empty() {
            let _ = writeln!(s, "\n{}", x.name);
            for l in lines {
                let _ = writeln!(s, "  {l}");
            }
        }
    }
    let mut shown = vec![tables::percentiles(input), tables::errors(input)];
    let labs = || results.iter().filter_map(|r| r.lab.as_ref());
    if labs().next().is_some() {
        shown.push(tables::propagation(input));
        if labs().any(|l| l.route_propagation.is_some()) {
            shown.push(tables::routes(input));
        }
        if labs().any(|l| l.probes.is_some()) {
            shown.push(tables::probes(input));
        }
        if labs().any(|l| l.probes.as_ref().is_some_and(|p| !p.corpus.is_empty())) {
            shown.push(tables::corpus::corpus(input));
        }
        if labs().any(|l| l.resources.is_some()) {
            shown.push(tables::resources(input));
        }
        shown.push(worst_changes(input));
    }
    if results.iter().any(|r| r.sessions.is_some()) {
        shown.push(tables::sessions(input));
    }
    for t in &shown {
        s.push('\n');
        // Latency and propagation cells are bare milliseconds: their notes say so.
        let noted = matches!(t.id, "table-percentiles" | "table-propagation");
        let plain = Plain::new(t);
        s.push_str(&if noted { plain.with_note() } else { plain }.render());
    }
    if labs().next().is_some() {
        for x in series {
            s.push_str(&failed_changes(x));
        }
    }
    for x in series {
        for w in warnings(&x.result) {
            let _ = writeln!(s, "WARNING: {}: {w}", x.name);
        }
    }
    s
}

/// How the systems were loaded, from the first result: the rate (or the plan, or the
/// fractions of each system's maximum, which give each run a rate of its own),
/// connections, threads and duration; `None` without results.
fn load_line(results: &[&RunResult]) -> Option<String> {
    let c = &results.first()?.config;
    let mut fractions: Vec<f64> = results
        .iter()
        .filter_map(|r| r.lab.as_ref()?.fraction.as_ref().map(|f| f.fraction))
        .collect();
    fractions.sort_by(f64::total_cmp);
    fractions.dedup();
    let rate = if let Some(p) = &c.plan {
        format!("plan {p} (mean {} req/s)", c.rate.unwrap_or(0.0))
    } else if fractions.is_empty() {
        format!("{} req/s", c.rate.unwrap_or(0.0))
    } else {
        let pct: Vec<String> = fractions
            .iter()
            .map(|f| format!("{:.0} %", f * 100.0))
            .collect();
        format!("{} of each system's maximum", pct.join(", "))
    };
    Some(format!(
        "load: {rate} over {} connections, {} threads, {}{}",
        c.connections,
        c.threads,
        fmt_secs(c.duration_s),
        if c.new_connection {
            ", new connection per request"
        } else {
            ""
        }
    ))
}

/// The report's table of changes cut to each lab system's worst row (by the max
/// latency in its window); a system that changed nothing says so in its row.
fn worst_changes(input: &ReportInput) -> Table {
    let all = tables::changes(input);
    let max = all.cols.iter().position(|(k, _)| k == "max_ms");
    let max_of = |r: &Row| {
        max.and_then(|c| r.cells.get(c))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NEG_INFINITY)
    };
    let mut rows = Vec::new();
    for (i, x) in input.series.iter().enumerate() {
        if x.result.lab.is_none() {
            continue;
        }
        let worst = all
            .rows
            .iter()
            .filter(|r| r.series == Some(i))
            .max_by(|a, b| max_of(a).total_cmp(&max_of(b)));
        rows.push(worst.cloned().unwrap_or_else(|| {
            let mut cells = vec![MISSING.to_string(); all.cols.len()];
            cells[0] = x.name.clone();
            cells[1] = "no changes".into();
            Row {
                series: Some(i),
                cells,
            }
        }));
    }
    Table {
        title: "Worst change per system (by max latency in its window)",
        rows,
        ..all
    }
}

/// The changes of a lab system that failed, and a proxy that died, one warning
/// line each; empty when neither happened.
fn failed_changes(x: &crate::input::Series) -> String {
    let mut s = String::new();
    let Some(l) = &x.result.lab else {
        return s;
    };
    for e in l
        .events
        .iter()
        .filter(|e| e.kind == results::EventKind::ChangeFailed && e.t_ms >= 0.0)
    {
        let _ = writeln!(
            s,
            "  {} WARNING: a change failed at {:.1}s: {}",
            x.name,
            e.t_ms / 1000.0,
            e.detail
        );
    }
    if l.proxy_died {
        let _ = writeln!(s, "  {} WARNING: the proxy died during the run", x.name);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Series;
    use results::{EventWindow, LabInfo};

    fn lab_series(name: &str, windows: &[(&str, f64)]) -> Series {
        let mut r = RunResult::default();
        r.latency_ms.corrected.p99 = Some(1.25);
        r.errors.timeout = 7;
        r.lab = Some(LabInfo {
            system: name.into(),
            windows: windows
                .iter()
                .map(|(change, max_ms)| EventWindow {
                    change: change.to_string(),
                    max_ms: *max_ms,
                    ..EventWindow::default()
                })
                .collect(),
            ..LabInfo::default()
        });
        Series {
            name: name.into(),
            system: name.into(),
            result: r,
            ..Default::default()
        }
    }

    /// The figures of `summary.txt` are the cells of the report's tables: the p99
    /// of the percentiles table, the timeouts of the errors table, the worst window
    /// of the changes table.
    #[test]
    fn the_comparison_writes_the_report_tables_cells() {
        let input = ReportInput {
            series: vec![
                lab_series(
                    "nginx-reload",
                    &[("scale 1 -> 2", 3.0), ("scale 2 -> 1", 9.5)],
                ),
                lab_series("caddy-api", &[]),
            ],
            ..ReportInput::default()
        };
        let s = comparison("dynamic", &input);
        let p = tables::percentiles(&input);
        let row = s
            .lines()
            .find(|l| l.trim_start().starts_with("nginx-reload ") && l.contains("1.250"))
            .unwrap_or_else(|| panic!("no percentiles row\n{s}"));
        assert_eq!(p.cell(0, "p99"), Some("1.250"));
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            p.rows[0]
                .cells
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
        );
        assert!(s.contains("Errors by kind\n"), "{s}");
        let worst = s
            .split("Worst change per system")
            .nth(1)
            .unwrap_or_else(|| panic!("no worst change\n{s}"));
        assert!(worst.contains("scale 2 -> 1"), "{worst}");
        assert!(!worst.contains("scale 1 -> 2"), "{worst}");
        assert!(
            worst
                .lines()
                .any(|l| l.contains("caddy-api ") && l.contains(" no changes")),
            "{worst}"
        );
    }

    /// A sizing scan alone has no load to compare: its table is the summary, under
    /// the scenario's name.
    #[test]
    fn a_sizing_scan_alone_is_its_table() {
        use results::sizing::{Allocation, SizingResult, SizingRow};
        let input = ReportInput {
            runs: vec![crate::input::Run {
                scenario: Some("s4".into()),
                ..Default::default()
            }],
            sizings: vec![crate::input::Sized {
                name: "nginx-reload".into(),
                run: 0,
                sizing: SizingResult {
                    rows: vec![SizingRow {
                        allocation: Allocation {
                            cores: 1.0,
                            cpus: "1".into(),
                            workers: 1,
                            quota: None,
                        },
                        max_rate: Some(500.0),
                        ..SizingRow::default()
                    }],
                    ..SizingResult::default()
                },
            }],
            ..ReportInput::default()
        };
        let s = Summary::text(&input);
        assert!(
            s.starts_with("Scenario s4\n\nSizing: maximum per CPU allocation"),
            "{s}"
        );
        assert!(!s.contains("Latency percentiles"), "{s}");
        let row = s
            .lines()
            .find(|l| l.trim_start().starts_with("nginx-reload "))
            .unwrap_or_else(|| panic!("{s}"));
        assert!(row.split_whitespace().any(|c| c == "500"), "{row}");
    }
}
