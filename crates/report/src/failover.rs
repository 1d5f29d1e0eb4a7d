//! The failover table (issue 16 §3): per system and flapping backend, what the
//! backend received while failing against while healthy, the errors users saw in
//! each, and how quickly the proxy stopped and resumed sending to it. Drawn from
//! `lab.failover` of each result; no rows without flapping backends.

use crate::fmt::{fmt_opt_ms1, MISSING};
use crate::input::ReportInput;
use crate::table::{Row, Table};

/// The failover table: one row per flapping backend of each series.
pub fn table(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(f) = s.result.lab.as_ref().and_then(|l| l.failover.as_ref()) else {
            continue;
        };
        for b in &f.backends {
            if let Some(e) = &b.error {
                let mut cells = vec![MISSING.to_string(); COLS.len()];
                cells[0] = s.name.clone();
                cells[1] = b.id.clone();
                cells[COLS.len() - 1] = e.clone();
                rows.push(Row {
                    series: Some(i),
                    cells,
                });
                continue;
            }
            let pct = |r: f64| format!("{:.2}", r * 100.0);
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    b.id.clone(),
                    format!(
                        "{} {}/{}",
                        b.mode,
                        secs(b.healthy_ms as f64),
                        secs(b.failing_ms as f64)
                    ),
                    format!("{:.1}", b.healthy.received_per_s),
                    format!("{:.1}", b.failing.received_per_s),
                    b.healthy.errors.to_string(),
                    pct(b.healthy.error_ratio),
                    b.failing.errors.to_string(),
                    pct(b.failing.error_ratio),
                    (b.stop_ms.n + b.never_stopped).to_string(),
                    fmt_opt_ms1(b.stop_ms.median),
                    fmt_opt_ms1(b.stop_ms.max),
                    b.never_stopped.to_string(),
                    fmt_opt_ms1(b.resume_ms.median),
                    fmt_opt_ms1(b.resume_ms.max),
                    b.never_resumed.to_string(),
                    MISSING.to_string(),
                ],
            });
        }
    }
    Table {
        id: "table-failover",
        title: "Backend failover",
        note: "Per flapping backend (healthy, then failing, repeatedly; the mode says how it fails): the requests it received per second of its healthy and of its failing phases (from its own log), the errors users saw during each kind of phase (and their share of all requests then), and, over the failing phases wholly inside the measured window, the milliseconds from the failure's start until the proxy stopped sending to it (the end of its last 100 ms of arrivals before 300 ms without any); over the healthy phases after a failure, until its first request again. \"never\": phases in which it never stopped, or never received a request again. See docs/results.md.".into(),
        cols: COLS
            .iter()
            .map(|(k, h)| (k.to_string(), h.to_string()))
            .collect(),
        rows,
    }
}

const COLS: [(&str, &str); 17] = [
    ("series", "series"),
    ("backend", "backend"),
    ("flap", "mode healthy/failing"),
    ("healthy_rps", "received/s healthy"),
    ("failing_rps", "received/s failing"),
    ("healthy_errors", "errors healthy"),
    ("healthy_error_pct", "errors healthy %"),
    ("failing_errors", "errors failing"),
    ("failing_error_pct", "errors failing %"),
    ("failures", "failures"),
    ("stop_median", "stopped after (median ms)"),
    ("stop_max", "stopped after (max ms)"),
    ("never_stopped", "never stopped"),
    ("resume_median", "resumed after (median ms)"),
    ("resume_max", "resumed after (max ms)"),
    ("never_resumed", "never resumed"),
    ("note", "note"),
];

/// Milliseconds as seconds, `8s` or `1.5s`.
fn secs(ms: f64) -> String {
    let s = ms / 1000.0;
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Series;
    use results::failover::{Failover, FlappingBackend, PhaseTotals};
    use results::{LabInfo, RunResult, Spread};

    #[test]
    fn one_row_per_flapping_backend() {
        let r = RunResult {
            lab: Some(LabInfo {
                system: "nginx-reload+passive".into(),
                failover: Some(Failover {
                    backends: vec![FlappingBackend {
                        id: "f1".into(),
                        mode: "reset".into(),
                        healthy_ms: 8000,
                        failing_ms: 1500,
                        healthy: PhaseTotals {
                            received_per_s: 250.0,
                            errors: 0,
                            ..PhaseTotals::default()
                        },
                        failing: PhaseTotals {
                            received_per_s: 1.26,
                            errors: 3,
                            error_ratio: 0.001,
                            ..PhaseTotals::default()
                        },
                        stop_ms: Spread::of(&[100.0, 200.0, 300.0]),
                        resume_ms: Spread::of(&[2000.0]),
                        ..FlappingBackend::default()
                    }],
                }),
                ..LabInfo::default()
            }),
            ..RunResult::default()
        };
        let input = ReportInput {
            series: vec![
                Series {
                    name: "nginx-reload+passive".into(),
                    result: r,
                    ..Series::default()
                },
                Series::default(),
            ],
            ..ReportInput::default()
        };
        let t = table(&input);
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.cell(0, "flap"), Some("reset 8s/1.5s"));
        assert_eq!(t.cell(0, "failing_rps"), Some("1.3"));
        assert_eq!(t.cell(0, "failing_error_pct"), Some("0.10"));
        assert_eq!(t.cell(0, "failures"), Some("3"));
        assert_eq!(t.cell(0, "stop_median"), Some("200.0"));
        assert_eq!(t.cell(0, "resume_max"), Some("2000.0"));
        assert_eq!(t.cell(0, "never_stopped"), Some("0"));
    }
}
