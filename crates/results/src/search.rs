//! The result of a maximum-throughput search (`ingressbench search`, study S2's "max
//! rps" and the ceiling that runs at 30-50 % of it are fractions of): every step tried,
//! with the figures it was judged on, and the highest rate that held the bounds.
//!
//! Kept as plain data so a report can draw the latency-versus-rate curve from the file
//! long after the search, as it draws everything else.

use serde::{Deserialize, Serialize};

/// The version of this file's shape.
pub const SEARCH_SCHEMA: &str = "ingressbench/search/v1";

/// What a rate must keep to pass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchBounds {
    /// Corrected p99 (from each request's intended send time), ms.
    pub p99_ms: f64,
    /// Failed requests over intended requests, 0 to 1.
    pub error_ratio: f64,
    /// Achieved rate over target rate, 0 to 1 (0.99: the generator sent 99 %).
    pub min_achieved: f64,
}

/// Why a step did not pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Miss {
    /// The corrected p99 was above the bound.
    P99,
    /// Too many requests failed.
    Errors,
    /// The achieved rate was below 99 % of the target.
    Rate,
    /// The generator could not send on time (its lag): the step says nothing of the
    /// server, and the search does not go above it.
    Generator,
}

/// One run of the search: a closed-loop probe (`target: null`) or one trial of a
/// constant rate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchStep {
    /// Requests per second asked for; `None` for the closed-loop probe.
    pub target: Option<f64>,
    /// 1-based trial of this rate.
    pub trial: usize,
    pub achieved: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub error_ratio: f64,
    pub lag_p99_ms: f64,
    /// What it missed; empty when it passed (always empty for the probe).
    pub missed: Vec<Miss>,
    /// Share of its threads' cores the generator's process used over the step (its
    /// warm-up, window and drain), 0-1: near 1, the generator may have set the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_cpu: Option<f64>,
}

impl SearchStep {
    pub fn passed(&self) -> bool {
        self.missed.is_empty()
    }
}

/// A whole search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    pub schema: String,
    pub target: String,
    pub connections: usize,
    pub bounds: SearchBounds,
    /// What the closed-loop probe completed per second: where the bisection started.
    pub ceiling: f64,
    /// The highest rate that passed; `None` when none did.
    pub max_rate: Option<f64>,
    /// The lowest rate at which the generator itself fell behind, if any: a maximum
    /// close to it may be the generator's, not the server's.
    pub generator_limit: Option<f64>,
    /// Interrupted (Ctrl-C): the steps so far.
    pub partial: bool,
    /// Why nothing could be searched: the closed-loop probe got no response (its
    /// first error). Absent when the probe was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Every step, in the order run.
    pub steps: Vec<SearchStep>,
    /// What went wrong around the search without stopping it, each once (a CPU pin
    /// refused at every step, a namespace not deleted after it): as
    /// [`crate::RunResult::warnings`]. Absent when nothing did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}
