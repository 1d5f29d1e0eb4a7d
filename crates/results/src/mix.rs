//! A run over a request mix (`load --targets FILE`, a scenario's `requests:`): what
//! each target, or each group of targets, got. Routes at scale fail one route at a
//! time (a virtual host missing from a reload, a route that never came up), and the
//! run's totals hide that: these figures show it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most groups a result keeps figures for: one per target up to this many,
/// otherwise one per host up to this many, otherwise the first hosts and one group
/// for the rest. Each group costs a histogram per worker thread (about 20 KB), so
/// this bounds the memory a mix of any size adds.
pub const MAX_GROUPS: usize = 256;

/// The mix's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixResult {
    /// What a group is: `target`, `host`, or `host (first N, then the rest)`.
    pub grouped_by: String,
    /// Targets in the mix.
    pub targets: u64,
    /// Each host (authority and TLS server name): the connections that carried it and
    /// the requests it was given.
    pub hosts: Vec<MixHost>,
    /// Each group's outcomes, in the mix's order.
    pub groups: Vec<MixGroup>,
}

/// One host of the mix.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixHost {
    pub host: String,
    pub connections: u64,
    /// Measured requests sent to it.
    pub requests: u64,
}

/// One group's outcomes over the measured window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixGroup {
    /// `GET a.example/path` for a target; the host for a host group.
    pub name: String,
    /// The group's share of the mix's weight, 0-1.
    pub share: f64,
    /// Requests with an outcome (a response or an error).
    pub requests: u64,
    /// Responses below 400.
    pub ok: u64,
    /// Errors by kind (`status`, `timeout`, ...), only the kinds that occurred.
    pub errors: BTreeMap<String, u64>,
    /// Responses of 400 and above, by code.
    pub status_codes: BTreeMap<String, u64>,
    /// Corrected latency of the group's responses (and of requests cut short at the
    /// end), ms; absent when it had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<GroupLatency>,
}

/// A group's latency percentiles, ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupLatency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl MixGroup {
    /// Errors of every kind.
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }
}
