//! The studies' charts, drawn with `plotters` from saved results: the percentile
//! distribution on a "nines" axis (S1, S5), latency over time with every change
//! marked (S3), throughput and errors over time, and which backend answered.
//!
//! Three steps, one module each, each pointing only down: [`data`] prepares what a
//! chart shows from results (pure functions, unit-tested), [`axes`] holds the axes
//! and ticks plotters lacks, and [`drawing`] draws the prepared data on any plotters
//! backend: SVG for the page, an RGB buffer for `--png`.

pub mod axes;
pub mod data;
pub mod drawing;
mod failover;

pub use axes::{
    log_bounds, log_ticks, nines, nines_label, nines_ticks, quantile_of_nines, LogAxis, NinesAxis,
};
pub use data::{
    axis_nines, event_label, marks_of, merge_marks, natural_order, percentile_points, Chart, Line,
    Mark,
};
pub use drawing::{series_color, svg_for_page, thin_by_pixel, thin_layers, ChartError, WIDTH};

/// Every chart of a report, in page order.
pub fn build(input: &crate::input::ReportInput) -> Vec<Chart> {
    let mut charts = vec![
        data::percentiles_chart(input, true),
        data::percentiles_chart(input, false),
    ];
    if !input.searches.is_empty() {
        charts.push(data::rates_chart(input));
    }
    charts.extend(data::plan_chart(input));
    charts.extend(data::route_scale_charts(input));
    for tps in [false, true] {
        if let Some(c) = data::sizing_chart(input, tps) {
            charts.push(c);
        }
    }
    charts.extend(data::latency_charts(input));
    charts.push(data::throughput_chart(input));
    charts.push(data::errors_chart(input));
    charts.extend(data::sessions_chart(input));
    charts.push(data::backends_chart(input));
    charts.extend(failover::chart(input));
    charts
}

/// Results the charts' tests draw.
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::input::{ReportInput, Series};
    use results::{Event, LabInfo, RunResult, Samples, TimelineEntry};

    pub(crate) fn ev(t_ms: f64, kind: &str, detail: &str) -> Event {
        Event {
            t_ms,
            kind: serde_json::from_value(serde_json::Value::from(kind)).unwrap(),
            detail: detail.into(),
            took_ms: None,
        }
    }

    pub(crate) fn histogram_b64(values_us: &[u64]) -> String {
        use base64::Engine as _;
        let mut h = results::histogram::latency_histogram();
        for v in values_us {
            h.record(*v).unwrap();
        }
        base64::engine::general_purpose::STANDARD.encode(results::histogram::serialize_v2(&h))
    }

    pub(crate) fn sample_input() -> ReportInput {
        let mut r = RunResult {
            schema: results::RESULT_SCHEMA.into(),
            duration_s: 3.0,
            histogram: histogram_b64(&[300, 400, 5000, 40_000]),
            histogram_uncorrected: histogram_b64(&[300, 400, 4000]),
            ..Default::default()
        };
        r.config.rate = Some(100.0);
        for t in 0..3u64 {
            let mut e = TimelineEntry {
                t,
                sent: 100,
                completed: 98,
                errors: 2,
                p50: 0.3,
                p99: 4.0 + t as f64,
                max: 40.0,
                ..Default::default()
            };
            e.errors_by_kind.insert("read".into(), 2);
            e.backends.insert("b1".into(), 50);
            e.backends.insert("b2".into(), 48);
            r.timeline.push(e);
        }
        r.errors.read = 6;
        r.samples = Some(Samples {
            fraction: 0.1,
            t_ms: vec![10.0, 500.0, 2100.0],
            latency_ms: vec![0.3, 12.0, 3.0],
            status: vec![200, 200, 0],
            error: vec![0, 0, 1],
            error_kinds: vec!["read".into()],
            backend: vec![0, 1, -1],
            backend_ids: vec!["b1".into(), "b2".into()],
        });
        r.lab = Some(LabInfo {
            system: "nginx-reload".into(),
            events: vec![ev(1500.0, "scale_requested", "5 -> 7")],
            ..Default::default()
        });
        let mut other = r.clone();
        other.samples = None;
        other.timeline.iter_mut().for_each(|e| {
            e.errors = 0;
            e.errors_by_kind.clear();
        });
        ReportInput {
            runs: vec![Default::default()],
            series: vec![
                Series {
                    name: "nginx-reload".into(),
                    result: r,
                    ..Default::default()
                },
                Series {
                    name: "caddy-api".into(),
                    result: other,
                    ..Default::default()
                },
            ],
            ..ReportInput::default()
        }
    }
}
