//! The failover chart (issue 16 §3): per series and flapping backend, the requests
//! it received each second (from its own log), with its failing phases shaded, so a
//! proxy that keeps sending to a failing backend shows as bars inside the shading
//! and one that stops as gaps.

use super::data::{Body, Chart, Stack};
use crate::input::ReportInput;
use crate::theme::backend_rgb;

/// The chart, when any series has flapping backends.
pub(super) fn chart(input: &ReportInput) -> Option<Chart> {
    let mut stacks = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(f) = s.result.lab.as_ref().and_then(|l| l.failover.as_ref()) else {
            continue;
        };
        for (k, b) in f.backends.iter().enumerate() {
            let title = if f.backends.len() > 1 {
                format!("{} · {}", s.name, b.id)
            } else {
                s.name.clone()
            };
            stacks.push(Stack {
                title: (title, i),
                keys: vec![(format!("{} received", b.id), backend_rgb(k))],
                bars: b
                    .received_per_s
                    .iter()
                    .enumerate()
                    .map(|(t, &n)| (t as f64, vec![n as f64]))
                    .collect(),
                percent: false,
                marks: Vec::new(),
                spans: b
                    .phases
                    .iter()
                    .filter(|p| p.failing)
                    .map(|p| (p.from_ms / 1000.0, p.until_ms / 1000.0))
                    .collect(),
                x_max: s.result.duration_s.ceil().max(1.0),
                empty_note: b
                    .error
                    .clone()
                    .unwrap_or_else(|| "it received nothing".into()),
            });
        }
    }
    if stacks.is_empty() {
        return None;
    }
    Some(Chart {
        id: "chart-failover".into(),
        title: "Requests the flapping backend received".into(),
        caption: "Requests each flapping backend received per second (counted by the backend itself, retries the client never saw included); shaded: its failing phases. Bars inside the shading: the proxy kept sending to it while it failed.".into(),
        height: stacks.len() as u32 * 200 + 10,
        body: Body::Stacks(stacks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Series;
    use results::failover::{Failover, FailoverPhase, FlappingBackend};
    use results::{LabInfo, RunResult};

    #[test]
    fn bars_per_second_and_failing_phases_shaded() {
        assert!(chart(&ReportInput::default()).is_none());
        let r = RunResult {
            duration_s: 3.0,
            lab: Some(LabInfo {
                failover: Some(Failover {
                    backends: vec![FlappingBackend {
                        id: "f1".into(),
                        received_per_s: vec![100, 3, 90],
                        phases: vec![
                            FailoverPhase {
                                failing: false,
                                from_ms: 0.0,
                                until_ms: 1000.0,
                                ..FailoverPhase::default()
                            },
                            FailoverPhase {
                                failing: true,
                                from_ms: 1000.0,
                                until_ms: 2000.0,
                                ..FailoverPhase::default()
                            },
                        ],
                        ..FlappingBackend::default()
                    }],
                }),
                ..LabInfo::default()
            }),
            ..RunResult::default()
        };
        let input = ReportInput {
            series: vec![Series {
                name: "nginx-reload".into(),
                result: r,
                ..Series::default()
            }],
            ..ReportInput::default()
        };
        let c = chart(&input).unwrap();
        assert_eq!(c.id, "chart-failover");
        let Body::Stacks(st) = &c.body else {
            panic!("not stacks")
        };
        assert_eq!(st.len(), 1);
        assert_eq!(st[0].bars[1], (1.0, vec![3.0]));
        assert_eq!(st[0].spans, vec![(1.0, 2.0)]);
        assert!(c.svg().unwrap().contains("<svg"));
    }
}
