//! Behaviour probes as a result holds them: what each probe got from one system
//! (its answer, and what the backend received), and where a system differs from
//! the run's baseline. The corpus and the comparison are the scenario's.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one probe got from one system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub probe: String,
    /// The answer's status; `None` when none came (the error says what happened).
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// A hash of the body when no backend answered (a proxy's own page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_hash: Option<String>,
    /// What the backend received, when a backend answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<Received>,
    /// How long the answer took, in milliseconds.
    pub ms: f64,
}

/// What the backend said it received.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Received {
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: BTreeMap<String, String>,
    pub body_len: u64,
    pub attempt: u32,
}

/// One field of a probe where a system differs from the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub probe: String,
    pub field: String,
    pub baseline: String,
    pub system: String,
}

/// The probes of one system: what each got, and where it differs from the
/// baseline system (none for the baseline itself).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeRun {
    pub baseline: String,
    pub observed: Vec<Observed>,
    #[serde(default)]
    pub differences: Vec<Difference>,
}
