//! `timeline.csv` and `samples.csv`: the per-second figures and the sampled requests
//! of every series as plain rows, for a spreadsheet or a script; drawn from the
//! results like the page, with the same series names.

use crate::input::ReportInput;
use crate::render::{File, Rendered, Rendering, Report, ReportError};
use std::fmt::Write as _;

/// The CSVs of a report: `timeline.csv` always, `samples.csv` when a series has
/// samples.
pub struct Csv;

impl Report for Csv {
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError> {
        let mut out = Rendered::one(File::TimelineCsv, timeline_csv(r.input));
        if let Some(s) = samples_csv(r.input) {
            out.files.push((File::SamplesCsv, s.into_bytes()));
        }
        Ok(out)
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `timeline.csv`: one row per series and second: `series,t,sent,completed,errors,
/// p50_ms,p99_ms,max_ms`, then one column per error kind seen in the report.
pub fn timeline_csv(input: &ReportInput) -> String {
    let mut kinds: Vec<String> = Vec::new();
    for k in results::ErrorKind::ALL {
        let name = k.name().to_string();
        if input.series.iter().any(|s| {
            s.result
                .timeline
                .iter()
                .any(|e| e.errors_by_kind.contains_key(&name))
        }) {
            kinds.push(name);
        }
    }
    let mut s = String::from("series,t,sent,completed,errors,p50_ms,p99_ms,max_ms");
    for k in &kinds {
        let _ = write!(s, ",{k}");
    }
    s.push('\n');
    for series in &input.series {
        for e in &series.result.timeline {
            let _ = write!(
                s,
                "{},{},{},{},{},{},{},{}",
                csv_field(&series.name),
                e.t,
                e.sent,
                e.completed,
                e.errors,
                e.p50,
                e.p99,
                e.max
            );
            for k in &kinds {
                let _ = write!(s, ",{}", e.errors_by_kind.get(k).copied().unwrap_or(0));
            }
            s.push('\n');
        }
    }
    s
}

/// `samples.csv`: one row per sampled request: `series,t_ms,latency_ms,status,error,
/// backend` (error and backend empty when there is none); `None` when no series has
/// samples.
pub fn samples_csv(input: &ReportInput) -> Option<String> {
    if input.series.iter().all(|s| s.result.samples.is_none()) {
        return None;
    }
    let mut s = String::from("series,t_ms,latency_ms,status,error,backend\n");
    for series in &input.series {
        let Some(sm) = &series.result.samples else {
            continue;
        };
        let name = csv_field(&series.name);
        for i in 0..sm.len() {
            let backend = sm
                .backend
                .get(i)
                .and_then(|b| usize::try_from(*b).ok())
                .and_then(|b| sm.backend_ids.get(b))
                .map(|b| csv_field(b))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{name},{},{},{},{},{backend}",
                sm.t_ms[i],
                sm.latency_ms.get(i).copied().unwrap_or(0.0),
                sm.status.get(i).copied().unwrap_or(0),
                sm.error_kind(i).unwrap_or(""),
            );
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{RunResult, Samples, TimelineEntry};

    fn input() -> ReportInput {
        let mut r = RunResult::default();
        let mut e = TimelineEntry {
            t: 0,
            sent: 10,
            completed: 9,
            errors: 1,
            p50: 0.3,
            p99: 1.5,
            max: 2.0,
            ..Default::default()
        };
        e.errors_by_kind.insert("read".into(), 1);
        r.timeline.push(e);
        r.samples = Some(Samples {
            fraction: 1.0,
            t_ms: vec![1.5, 2.5],
            latency_ms: vec![0.3, 4.0],
            status: vec![200, 0],
            error: vec![0, 1],
            error_kinds: vec!["read".into()],
            backend: vec![0, -1],
            backend_ids: vec!["b1".into()],
        });
        ReportInput {
            runs: vec![Default::default()],
            series: vec![
                crate::input::Series {
                    name: "a,b".into(),
                    result: r,
                    ..Default::default()
                },
                crate::input::Series {
                    name: "plain".into(),
                    ..Default::default()
                },
            ],
            ..ReportInput::default()
        }
    }

    #[test]
    fn csv_rows() {
        let i = input();
        assert_eq!(
            timeline_csv(&i),
            "series,t,sent,completed,errors,p50_ms,p99_ms,max_ms,read\n\"a,b\",0,10,9,1,0.3,1.5,2,1\n"
        );
        assert_eq!(
            samples_csv(&i).unwrap(),
            "series,t_ms,latency_ms,status,error,backend\n\"a,b\",1.5,0.3,200,,b1\n\"a,b\",2.5,4,0,read,\n"
        );
        let mut none = i.clone();
        none.series[0].result.samples = None;
        assert!(samples_csv(&none).is_none());
    }
}
