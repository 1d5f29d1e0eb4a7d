//! Comparing saved runs: the deltas between a base run and newer ones, system by
//! system, and the `--max-regression` thresholds a CI pipeline gates on.
//!
//! Four parts, each pointing only down: [`significance`] tells a difference between
//! repetitions from noise (a rank test, pure arithmetic); [`model`] loads runs for
//! comparison (a lab run folder or one `result.json`), computes the deltas (medians
//! and their test when both runs were repeated) and checks that two runs measured the
//! same thing; [`thresholds`] parses the specs and checks a comparison against them;
//! [`rendering`] shows it all in the terminal and as an HTML page.

pub mod model;
pub mod rendering;
pub mod significance;
pub mod thresholds;

pub use model::{
    compare, compare_at, differences, fmt_p, load_run, parse_result, system_name, Comparison,
    Delta, LoadError, OptDelta, Run, SystemDelta, Tested, DEFAULT_ALPHA, LATENCY_METRICS,
    LOAD_SYSTEM,
};
pub use rendering::{flags, html, tables, tables_in, text, Row, Table, Trend};
pub use thresholds::{
    evaluate, evaluate_all, evaluate_all_in, evaluate_in, parse_metric, parse_threshold,
    parse_thresholds, Crossing, Direction, Limit, Metric, SpecError, Threshold,
};

/// Runs the comparison's tests are made of.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::model::{system_name, Run};
    use super::thresholds::{parse_threshold, Threshold};
    use results::{LabInfo, Propagation, RunResult, Spread};

    pub(crate) fn result(p99: f64, max: f64, timeouts: u64) -> RunResult {
        let mut r = RunResult {
            schema: results::RESULT_SCHEMA.to_string(),
            ..Default::default()
        };
        r.config.url = "http://127.0.0.1:1/".to_string();
        r.config.rate = Some(500.0);
        r.config.connections = 10;
        r.config.duration_s = 3.0;
        r.latency_ms.corrected.p50 = Some(1.0);
        r.latency_ms.corrected.p99 = Some(p99);
        r.latency_ms.corrected.max = Some(max);
        r.latency_ms.corrected.count = 1000;
        r.requests.intended = 1500;
        r.requests.sent = 1500;
        r.requests.completed = 1500 - timeouts;
        r.requests.failed = timeouts;
        r.errors.timeout = timeouts;
        r.rate.target = Some(500.0);
        r.rate.achieved = 500.0;
        r.rate.reached = true;
        r
    }

    /// A repeated run: one repetition per p99 (max twice as high, no error); the
    /// top level, all of them together, with the highest p99.
    pub(crate) fn repeated(p99s: &[f64]) -> RunResult {
        let top = p99s.iter().copied().fold(0.0, f64::max);
        let mut r = result(top, top * 2.0, 0);
        r.repetitions = p99s.iter().map(|&p| result(p, p * 2.0, 0)).collect();
        r
    }

    /// The p99s of repetitions of one server: around 10 ms, and another five of the same.
    pub(crate) const SAME_A: [f64; 5] = [10.2, 9.8, 10.5, 9.9, 10.1];
    pub(crate) const SAME_B: [f64; 5] = [10.0, 10.4, 9.7, 10.3, 10.6];

    pub(crate) fn lab(mut r: RunResult, system: &str, added: &[f64]) -> RunResult {
        r.lab = Some(LabInfo {
            system: system.to_string(),
            scenario: "dynamic-endpoints".to_string(),
            propagation: Propagation {
                added_ms: Spread::of(added),
                ..Default::default()
            },
            ..Default::default()
        });
        r
    }

    pub(crate) fn run(label: &str, rs: Vec<RunResult>) -> Run {
        Run {
            label: label.to_string(),
            systems: rs.into_iter().map(|r| (system_name(&r), r)).collect(),
        }
    }

    pub(crate) fn th(s: &str) -> Threshold {
        parse_threshold(s).unwrap()
    }
}
