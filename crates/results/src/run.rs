//! The result document itself (`ingressbench/result/v1`): the load as configured, the
//! run, its steps, the machine, the kept samples.

use crate::{
    Connections, ErrorKind, Errors, Generator, Generators, LabInfo, Latency, Percentiles, Rate,
    Requests, TimelineEntry, TlsStats, WindowPart,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The load settings, as resolved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadConfig {
    pub url: String,
    pub method: String,
    pub threads: usize,
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// With a load plan: its mean rate; the plan itself is `plan`.
    pub rate: Option<f64>,
    /// The load plan as given (`1000:30s,2000:30s`, `100..5000:60s`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    pub max: bool,
    pub schedule: String,
    pub timeout_s: f64,
    pub connect_timeout_s: f64,
    /// `--send-window` in milliseconds: requests due within it after a wake-up were
    /// sent in that wake-up, early by at most this much. Absent (0) in older files,
    /// which sent each request at its own due time.
    #[serde(default)]
    pub send_window_ms: f64,
    pub new_connection: bool,
    /// `--reuse-closed`: connections the server closed while idle carried the next
    /// request anyway (wrk2's way). Absent (false) in older files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reuse_closed: bool,
    pub tls_version: Option<String>,
    pub tls_resume: bool,
    pub headers: Vec<String>,
    pub body_bytes: usize,
    pub backend_header: String,
    /// `http/1.1`, `h2` (over TLS, by ALPN) or `h2c` (plain, prior knowledge).
    /// Absent in files written before HTTP/2, which were all HTTP/1.1.
    #[serde(default = "http11")]
    pub protocol: String,
    /// HTTP/2: requests in flight allowed per connection (`--streams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    /// gRPC: the method called (`package.Service/Method`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<String>,
}

fn http11() -> String {
    "http/1.1".into()
}

/// The `ingressbench/result/v1` document: everything one load run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    /// True when the run was interrupted (or the system under test failed) before
    /// its planned end: the figures cover only what was measured.
    pub partial: bool,
    pub target: String,
    pub config: LoadConfig,
    /// RFC 3339 UTC time of the start of the measured window.
    pub started_at: String,
    /// Length of the measured window, in seconds.
    pub duration_s: f64,
    pub rate: Rate,
    pub requests: Requests,
    pub errors: Errors,
    /// Reconnects after the server's close and responses framed two ways; absent
    /// (zero) in files written before they were counted.
    #[serde(default)]
    pub connections: Connections,
    pub latency_ms: Latency,
    pub timeline: Vec<TimelineEntry>,
    /// Responses per backend id over the whole run.
    pub backends: BTreeMap<String, u64>,
    /// Per backend id: when its first and last response arrived, in ms from the start
    /// of the measured window (endpoint propagation is computed from these).
    #[serde(default)]
    pub backends_seen: BTreeMap<String, [f64; 2]>,
    /// Bytes of responses read (headers and body), measured window only.
    pub bytes_read: u64,
    pub tls: TlsStats,
    pub generator: Generator,
    /// The corrected histogram (µs), HdrHistogram V2 deflate, base64.
    pub histogram: String,
    /// The uncorrected histogram (µs), same encoding.
    pub histogram_uncorrected: String,
    /// The generator-lag histogram (ns), same encoding, so lag merges exactly too.
    /// Empty in files written before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub histogram_lag: String,
    /// A run made by several generators (`load --generators N`): the shared start
    /// and each generator's own figures. Absent for a single generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generators: Option<Generators>,
    /// What a lab run adds: the system, its events, their impact, propagation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabInfo>,
    /// A run over a request mix: each target's or group's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<crate::MixResult>,
    /// A generator of a split scenario run: its counts per change window, for the
    /// coordinator to add up (never in a merged or single result).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows_part: Vec<WindowPart>,
    /// Long-lived sessions held beside (or instead of) the requests (issue 45).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<crate::sessions::Sessions>,
    /// A sample of individual requests (`--sample FRACTION`), for scatter charts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<Samples>,
    /// Where the run happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// The ingressbench version that measured it.
    #[serde(default)]
    pub ingressbench_version: String,
    /// Each step of a load plan (`-R 1000:30s,2000:30s`, a ramp), counted by each
    /// request's intended send time so the steps add up to the run. Empty for a
    /// constant rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepResult>,
    /// Every repetition of a repeated run (`--repeat N`), each a whole result of its
    /// own (with no repetitions of its own); the figures above are all of them
    /// together. A comparison reads the spread between them. Empty: one run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repetitions: Vec<RunResult>,
    /// What went wrong around the measurement without stopping it, one line each
    /// with its causes: a CPU pin the kernel refused, an object or a namespace the
    /// run could not delete (and how to remove it). Printed as the run ends and shown
    /// by every report; the figures stand, but the reader must know. Absent when
    /// nothing went wrong (and in files written before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One step of a load plan: what the plan offered in it and what the system did.
///
/// A request belongs to the step that holds its intended send time, like every
/// latency the engine reports; the drain after the window keeps counting for the
/// last step. So `intended`, `completed` and `failed` add up to the run's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// From 0, in plan order.
    pub index: usize,
    /// The step as the plan wrote it (`2000:30s`, `100..5000:60s`).
    pub plan: String,
    /// Where the step starts, seconds from the measured window's start.
    pub start_s: f64,
    pub duration_s: f64,
    /// The offered rate at the step's start and end (equal for a step, different for
    /// a ramp), requests per second.
    pub rate_from: f64,
    pub rate_to: f64,
    /// What the schedule called for in the step, per second.
    pub offered: f64,
    /// What went out in the step, per second.
    pub achieved: f64,
    pub intended: u64,
    pub sent: u64,
    /// Responses with status < 400.
    pub completed: u64,
    /// Errors of any kind (status >= 400 included).
    pub failed: u64,
    /// Errors by kind (kinds with zero omitted).
    #[serde(default)]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Corrected latency of the step's responses, ms.
    pub latency_ms: Percentiles,
    /// The generator's own lag in the step, ms: judged against the step's own rate,
    /// not the run's mean.
    pub lag_p99_ms: f64,
    /// Whether at least 99 % of what the step offered went out.
    pub reached: bool,
    /// Whether the generator's lag p99 in the step crossed its limit.
    pub overloaded: bool,
}

/// The share of the intended requests that may fail before a run counts as failed:
/// more than half failing, the latency figures describe the few requests that got
/// through, not the system.
pub const FAILED_SHARE_LIMIT: f64 = 0.5;

impl RunResult {
    /// Why this run measured no working system, in one line; `None` when it did.
    ///
    /// A run fails when it received no response at all (every request was refused,
    /// failed its TLS handshake or timed out: the latency figures are empty), when no
    /// request succeeded, or when more than [`FAILED_SHARE_LIMIT`] of the intended
    /// requests failed. Such a run is never better than another, whatever its
    /// latency says; reports say so loudly and `compare` gates fail on it.
    pub fn failure(&self) -> Option<String> {
        let q = &self.requests;
        let kinds = || {
            let k: Vec<String> = ErrorKind::ALL
                .iter()
                .filter(|k| self.errors.get(**k) > 0)
                .map(|k| format!("{} {}", k.name(), self.errors.get(*k)))
                .collect();
            if k.is_empty() {
                String::new()
            } else {
                format!(" ({})", k.join(", "))
            }
        };
        let failed = |what: &str| {
            format!(
                "{what}: {} of {} intended requests failed{}",
                q.failed,
                q.intended,
                kinds()
            )
        };
        if self.latency_ms.corrected.count == 0 && q.completed == 0 {
            Some(if q.sent == 0 && q.failed == 0 {
                "no response was received: no request was sent".to_string()
            } else {
                failed("no response was received")
            })
        } else if q.completed == 0 {
            Some(failed("no request succeeded"))
        } else if q.intended > 0 && q.failed as f64 > FAILED_SHARE_LIMIT * q.intended as f64 {
            Some(failed("most requests failed"))
        } else {
            None
        }
    }
}

/// The machine a run happened on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    pub hostname: String,
}

/// A random sample of individual requests, stored by column (compact in JSON).
/// Row `i` of every column is one request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    /// The fraction of requests sampled (0-1].
    pub fraction: f64,
    /// Intended send time, ms from the start of the measured window.
    pub t_ms: Vec<f64>,
    /// Corrected latency in ms: to the full response, or to the error.
    pub latency_ms: Vec<f64>,
    /// HTTP status; 0 when there was no response (a transport error or timeout).
    pub status: Vec<u16>,
    /// 0: no error; otherwise 1 + the index of the kind in `error_kinds`.
    pub error: Vec<u8>,
    /// Names of the error kinds, in the order `error` indexes them (minus one).
    pub error_kinds: Vec<String>,
    /// Index into `backend_ids` of the backend that answered; -1 when none said.
    pub backend: Vec<i32>,
    pub backend_ids: Vec<String>,
}

impl Samples {
    pub fn len(&self) -> usize {
        self.t_ms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t_ms.is_empty()
    }

    /// The error kind of row `i`, if it failed.
    pub fn error_kind(&self, i: usize) -> Option<&str> {
        match self.error.get(i) {
            Some(0) | None => None,
            Some(k) => self.error_kinds.get(*k as usize - 1).map(String::as_str),
        }
    }
}
