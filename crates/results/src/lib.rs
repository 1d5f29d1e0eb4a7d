//! Result types shared by every part: error kinds, percentile sets, the
//! `ingressbench/result/v1` document, the stored histogram format, the run's clock and
//! timestamps. Nothing here opens a socket or starts a process, so the engine, the lab,
//! the runner and the reports can all depend on it without depending on each other;
//! the only I/O is writing files atomically ([`fsutil`]).

pub mod causes;
pub mod clock;
pub mod duration;
pub mod failover;
pub mod folder;
pub mod fsutil;
pub mod histogram;
pub mod merge;
pub mod repeat;
pub mod search;
pub mod sizing;
pub mod time;

pub use causes::{with_causes, Causes};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema identifier written into every result file.
pub const RESULT_SCHEMA: &str = "ingressbench/result/v1";

/// Why a request failed. The names are the ones users see in tables and JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Refused, reset or unreachable while connecting.
    Connect,
    /// No connection (TCP and TLS) within the connect timeout.
    ConnectTimeout,
    /// The TLS handshake failed.
    Tls,
    /// Reset, EOF or bad bytes while reading a response.
    Read,
    /// The request could not be written.
    Write,
    /// No full response within the request timeout.
    Timeout,
    /// A full response with status >= 400.
    Status,
}

impl ErrorKind {
    /// Every kind, in the order tables show them.
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::Connect,
        ErrorKind::ConnectTimeout,
        ErrorKind::Tls,
        ErrorKind::Read,
        ErrorKind::Write,
        ErrorKind::Timeout,
        ErrorKind::Status,
    ];

    /// The kind's name in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::Read => "read",
            ErrorKind::Write => "write",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Status => "status",
        }
    }

    /// Position in [`ErrorKind::ALL`], for counting in a fixed array.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Error counts by kind, plus each HTTP status >= 400 seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Errors {
    pub connect: u64,
    pub connect_timeout: u64,
    pub tls: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    pub status: u64,
    /// Status code (as a string, e.g. "503") to count.
    pub status_codes: BTreeMap<String, u64>,
    /// The first error of each kind that occurred, kind name to its message
    /// (`{"tls": "invalid peer certificate: UnknownIssuer"}`): counts say how often,
    /// this says why. Absent in files written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub first: BTreeMap<String, String>,
}

impl Errors {
    /// Builds the table from an array indexed by [`ErrorKind::index`].
    pub fn from_counts(counts: &[u64; 7], status_codes: BTreeMap<String, u64>) -> Self {
        Errors {
            connect: counts[0],
            connect_timeout: counts[1],
            tls: counts[2],
            read: counts[3],
            write: counts[4],
            timeout: counts[5],
            status: counts[6],
            status_codes,
            first: BTreeMap::new(),
        }
    }

    /// The count of one kind.
    pub fn get(&self, kind: ErrorKind) -> u64 {
        match kind {
            ErrorKind::Connect => self.connect,
            ErrorKind::ConnectTimeout => self.connect_timeout,
            ErrorKind::Tls => self.tls,
            ErrorKind::Read => self.read,
            ErrorKind::Write => self.write,
            ErrorKind::Timeout => self.timeout,
            ErrorKind::Status => self.status,
        }
    }

    /// All errors of every kind.
    pub fn total(&self) -> u64 {
        ErrorKind::ALL.iter().map(|k| self.get(*k)).sum()
    }
}

/// The percentiles every latency figure reports, in milliseconds.
///
/// Every figure is `None` (JSON `null`) when it was computed from no value at all: a
/// run that received no response has no latency, and `0.0` would read as a perfect
/// one. Files written before this change hold numbers, which still read as `Some`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p75: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    #[serde(rename = "p99.9")]
    pub p99_9: Option<f64>,
    #[serde(rename = "p99.99")]
    pub p99_99: Option<f64>,
    #[serde(rename = "p99.999")]
    pub p99_999: Option<f64>,
    #[serde(rename = "p99.9999")]
    pub p99_9999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    pub stdev: Option<f64>,
    /// Number of values the figures were computed from.
    #[serde(default)]
    pub count: u64,
}

impl Percentiles {
    /// The quantiles (as fractions) behind the `pNN` fields, in field order, with
    /// their labels: the "nines" every table and chart uses.
    pub const QUANTILES: [(f64, &'static str); 8] = [
        (0.50, "50"),
        (0.75, "75"),
        (0.90, "90"),
        (0.99, "99"),
        (0.999, "99.9"),
        (0.9999, "99.99"),
        (0.99999, "99.999"),
        (0.999999, "99.9999"),
    ];

    /// The `pNN` values in the order of [`Percentiles::QUANTILES`].
    pub fn values(&self) -> [Option<f64>; 8] {
        [
            self.p50,
            self.p75,
            self.p90,
            self.p99,
            self.p99_9,
            self.p99_99,
            self.p99_999,
            self.p99_9999,
        ]
    }

    /// Whether the figures come from no value at all (every field `None`).
    pub fn is_empty(&self) -> bool {
        self.max.is_none()
    }
}

/// Latency from the intended send time, from the actual send time, and the
/// generator's own delay in sending.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub corrected: Percentiles,
    pub uncorrected: Percentiles,
    pub generator_lag: Percentiles,
}

/// The request balance: `intended = completed + failed + not_sent + unfinished`, and
/// of those, `sent + timed_out_unsent = completed + failed + unfinished`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    /// Requests the schedule called for in the measured window.
    pub intended: u64,
    /// Requests the engine started (connect or write begun), during the window or in
    /// the drain after it.
    pub sent: u64,
    /// Full responses with status < 400.
    pub completed: u64,
    /// Requests that ended in an error of any kind (status >= 400 included).
    pub failed: u64,
    /// Intended requests never started because the run was interrupted (always 0
    /// at a normal end: what is due is sent in the drain after the window). Still
    /// written, so readers of older files find it where it always was.
    #[serde(default)]
    pub not_sent: u64,
    /// Requests still in flight when an interrupted run gave up waiting for them.
    pub unfinished: u64,
    /// Of `failed`: `timeout`s that were never sent, because every connection of
    /// theirs was still busy when the drain after the window ended (`--timeout`
    /// after it). Absent (0) in files written before the drain existed.
    #[serde(default)]
    pub timed_out_unsent: u64,
}

impl Requests {
    /// Whether every intended request is accounted for exactly once.
    pub fn balanced(&self) -> bool {
        self.intended == self.completed + self.failed + self.not_sent + self.unfinished
            && self.sent + self.timed_out_unsent == self.completed + self.failed + self.unfinished
    }
}

/// Why some requests due in the measured window had not been started by its end, by
/// cause: the three add up to `intended` minus the requests started in the window
/// (counting, as started, those due with a free connection within the lag limit of
/// the end: the loop's ordinary wake-up, not a delay).
/// At a normal end they are then sent in the drain (or time out) and measured from
/// their intended times like any other; after an interrupt they are `not_sent`.
///
/// Only the first says anything about the generator; the other two are the system
/// under test's doing, already in the corrected latency and the error counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Shortfall {
    /// A connection was free but the generator had not sent them: it was late by more
    /// than the lag limit (see `generator.overloaded`).
    #[serde(default)]
    pub generator_late: u64,
    /// Every connection that could carry them was waiting for a response: the server
    /// was slow to answer (its latency), not a fault of the generator.
    #[serde(default)]
    pub connections_busy: u64,
    /// Every connection that could carry them was still being opened (TCP connect or
    /// TLS handshake), the way connections that time out or fail to open hold
    /// requests back; see the `connect`, `connect_timeout` and `tls` errors.
    #[serde(default)]
    pub connections_failed: u64,
}

impl Shortfall {
    /// Requests behind for any reason.
    pub fn total(&self) -> u64 {
        self.generator_late + self.connections_busy + self.connections_failed
    }

    /// Adds another count (another worker's, or generator's).
    pub fn add(&mut self, o: &Shortfall) {
        self.generator_late += o.generator_late;
        self.connections_busy += o.connections_busy;
        self.connections_failed += o.connections_failed;
    }
}

/// Target and achieved request rates, per second.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// The `-R` rate; `null` in `--max` mode.
    pub target: Option<f64>,
    /// Requests started during the measured window, per second of it (those started
    /// in the drain after it, though due in it, are not counted: see `shortfall`).
    pub achieved: f64,
    /// Successful responses per second of the measured window.
    pub completed_per_s: f64,
    /// Whether `achieved` is at least 99 % of `target` (always true with `--max`).
    pub reached: bool,
    /// Why requests due in the window were not started by its end (what keeps
    /// `achieved` below `target`). Zero in files written before it existed.
    #[serde(default)]
    pub shortfall: Shortfall,
}

/// How the generator itself fared: results from an overloaded generator are not valid.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    /// True when the generator could not send on time (lag p99 over the limit).
    pub overloaded: bool,
    /// 99th percentile of the generator's lag, in milliseconds.
    pub lag_p99_ms: f64,
    /// The lag p99 above which the generator counts as overloaded, in milliseconds.
    pub lag_limit_ms: f64,
    /// CPU time the generator used (user + system), in seconds.
    pub cpu_s: f64,
    /// Resolution of the clock, in nanoseconds.
    pub clock_resolution_ns: u64,
    /// The generator's threads ran at a raised scheduling priority (nice -10).
    #[serde(default)]
    pub priority_raised: bool,
    /// The CPUs the generator's threads were to be confined to (`0,1`; empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus: String,
    /// The CPUs its threads could run on once pinned, as the kernel reports them
    /// (`0,1`): `cpus` when the pin held, the CPUs they were allowed before when it
    /// was refused (then a warning says why). Absent when no pin was asked for (and
    /// in files written before it existed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus_applied: String,
}

/// The generators of a split run (`load --generators N`): the instant they all
/// started from and each one's own figures, which the merged totals cannot show
/// (one generator's lag or late start is hidden in the sum of the others).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generators {
    /// The shared start of every generator's schedule, RFC 3339 UTC.
    pub start_at: String,
    /// How late (or how far off the coordinator's clock) a generator may be before the
    /// merged run is not trusted, in ms.
    pub start_tolerance_ms: f64,
    /// One entry per generator, by index; a single generator's own result holds its
    /// own entry only.
    pub parts: Vec<GeneratorPart>,
}

/// One generator of a split run: its share of the load and how it fared.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorPart {
    /// 0-based, as in `--part INDEX/COUNT` (and a Kubernetes indexed Job).
    pub index: usize,
    /// Its share of the run: connections, threads and requests per second (`null`
    /// with `--max`).
    pub connections: usize,
    pub threads: usize,
    pub rate: Option<f64>,
    /// The seed of its sampling decisions (`--sample`), different for each generator.
    pub seed: u64,
    /// The CPUs it was pinned to (`0`; empty: not pinned).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus: String,
    /// Why it has no result (it failed, hung and was killed, or wrote nothing); its
    /// requests are then missing from the merged figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// It stopped before its planned end (interrupt).
    #[serde(default)]
    pub partial: bool,
    /// Its own request balance.
    #[serde(default)]
    pub requests: Requests,
    /// Its lag p99 exceeded the limit: its latencies include its own delay.
    #[serde(default)]
    pub overloaded: bool,
    #[serde(default)]
    pub lag_p99_ms: f64,
    #[serde(default)]
    pub cpu_s: f64,
    /// How late its schedule started after the shared instant, by its own clock, in
    /// ms (0: on time; `null` when unknown).
    #[serde(default)]
    pub start_offset_ms: Option<f64>,
    /// Its wall clock minus the coordinator's, measured before the run, in ms
    /// (`null`: not measured).
    #[serde(default)]
    pub clock_offset_ms: Option<f64>,
    /// The uncertainty of that measure (half its round trip), in ms.
    #[serde(default)]
    pub clock_offset_error_ms: Option<f64>,
    /// A scenario run's changes that reached it (each announced ahead, to take
    /// effect at a time on its own clock), `null` when none was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<MarksReceived>,
}

/// How a generator elsewhere (a pod) received the change marks of a scenario run.
/// Each is sent ahead of the change, to open its window at a set time on the
/// generator's clock; one that arrives after that time leaves the requests between
/// the two in the window before.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MarksReceived {
    /// Marks sent to it.
    pub sent: u64,
    /// Of those, how many it never acknowledged: its windows are wrong from the
    /// first of them on.
    pub missed: u64,
    /// The latest any mark arrived after its time, by its own clock, in ms (0: every
    /// mark was on time).
    pub late_max_ms: f64,
}

impl GeneratorPart {
    /// `generator INDEX/COUNT`, as messages name a generator.
    pub fn name(&self, count: usize) -> String {
        format!("generator {}/{count}", self.index)
    }
}

impl Generators {
    /// Why the merged run is not to be trusted because of one of its generators, one
    /// line each naming the generator: it failed, was overloaded, started late, or
    /// its clock is off the coordinator's by more than the tolerance.
    pub fn warnings(&self) -> Vec<String> {
        let n = self.parts.len();
        let tol = self.start_tolerance_ms;
        let mut w = Vec::new();
        for p in &self.parts {
            let name = p.name(n);
            if let Some(e) = &p.error {
                w.push(format!(
                    "{name} failed: {e}; its share of the load is missing"
                ));
                continue;
            }
            if p.overloaded {
                w.push(format!(
                    "{name} was overloaded: its lag p99 was {:.3} ms; latencies include its own delay. Use more generators, threads or cores, or a lower rate",
                    p.lag_p99_ms
                ));
            }
            if let Some(off) = p.start_offset_ms.filter(|o| *o > tol) {
                w.push(format!(
                    "{name} started {off:.1} ms late (tolerance {tol} ms): its requests are not on the shared schedule"
                ));
            }
            if let Some(off) = p.clock_offset_ms.filter(|o| o.abs() > tol) {
                w.push(format!(
                    "{name}'s clock is {off:+.1} ms off the coordinator's (tolerance {tol} ms): its seconds on the timeline are shifted by that much"
                ));
            }
            if let Some(m) = &p.marks {
                if m.missed > 0 {
                    w.push(format!(
                        "{name} missed {} of {} change marks: its requests are left out of the change windows (and of the route propagation drawn from them)",
                        m.missed, m.sent
                    ));
                }
                if m.late_max_ms > 0.0 {
                    w.push(format!(
                        "{name} received a change mark up to {:.1} ms after its time: requests intended in that gap are counted in the window before the change",
                        m.late_max_ms
                    ));
                }
            }
        }
        w
    }
}

/// TLS figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsStats {
    /// Handshakes completed in the measured window.
    pub handshakes: u64,
    /// Of those, how many resumed a session.
    pub resumed: u64,
    /// Negotiated protocol version, e.g. "TLSv1.3".
    pub version: Option<String>,
}

/// One second of the run (by completion time).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineEntry {
    /// Seconds since the start of the measured window (the second's start).
    pub t: u64,
    /// Requests started in this second.
    pub sent: u64,
    /// Successful responses in this second.
    pub completed: u64,
    /// Errors of any kind in this second.
    pub errors: u64,
    /// Errors by kind in this second (kinds with zero omitted).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Corrected latency percentiles of the responses in this second, in ms.
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// The generator's largest send lag in this second, in ms (0 in files written
    /// before it existed): how far behind its schedule it fell, for live views that
    /// cannot wait for the run's lag histogram.
    #[serde(default)]
    pub lag_max_ms: f64,
    /// Responses per backend id in this second.
    pub backends: BTreeMap<String, u64>,
    /// The second's corrected histogram (µs, V2 deflate, base64), written only in a
    /// generator's part of a split run so the merge can recompute `p50` and `p99` of
    /// the second exactly: percentiles of parts cannot be added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

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
    pub new_connection: bool,
    pub tls_version: Option<String>,
    pub tls_resume: bool,
    pub headers: Vec<String>,
    pub body_bytes: usize,
    pub backend_header: String,
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
    /// A generator of a split scenario run: its counts per change window, for the
    /// coordinator to add up (never in a merged or single result).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows_part: Vec<WindowPart>,
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

/// A change to the system under test, or a step of one, on the load's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Milliseconds from the start of the measured window (negative: during setup).
    pub t_ms: f64,
    pub kind: EventKind,
    /// What it was about: a backend id, a route name, a replica count, an error.
    pub detail: String,
    /// For a step that completes another (`*_applied`, `*_done`, `backend_ready`):
    /// how long it took from its request, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<f64>,
}

/// What an event says happened. Written in JSON as its snake_case name
/// (`scale_requested`, ...), the names docs/scenarios.md lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    ScaleRequested,
    BackendReady,
    BackendStopping,
    EndpointsRequested,
    EndpointsApplied,
    RouteRequested,
    RouteApplied,
    ReloadRequested,
    ReloadDone,
    RestartRequested,
    RestartDone,
    ProxyDied,
    ChangeFailed,
}

impl EventKind {
    /// The change a user asked for that this event starts, named as in scenarios
    /// (`scale`, `route`, `reload`, `restart`): a marker on charts and a window in
    /// the tables. `None` for the steps inside a change (an endpoint push is a step
    /// of a scale) and for what follows from one.
    pub fn change(self) -> Option<&'static str> {
        match self {
            EventKind::ScaleRequested => Some("scale"),
            EventKind::RouteRequested => Some("route"),
            EventKind::ReloadRequested => Some("reload"),
            EventKind::RestartRequested => Some("restart"),
            _ => None,
        }
    }

    /// Whether the event says something went wrong with the system under test.
    pub fn is_alarm(self) -> bool {
        matches!(self, EventKind::ProxyDied | EventKind::ChangeFailed)
    }

    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::ScaleRequested => "scale_requested",
            EventKind::BackendReady => "backend_ready",
            EventKind::BackendStopping => "backend_stopping",
            EventKind::EndpointsRequested => "endpoints_requested",
            EventKind::EndpointsApplied => "endpoints_applied",
            EventKind::RouteRequested => "route_requested",
            EventKind::RouteApplied => "route_applied",
            EventKind::ReloadRequested => "reload_requested",
            EventKind::ReloadDone => "reload_done",
            EventKind::RestartRequested => "restart_requested",
            EventKind::RestartDone => "restart_done",
            EventKind::ProxyDied => "proxy_died",
            EventKind::ChangeFailed => "change_failed",
        }
    }
}

/// The load's figures in the window from one change until the next: the requests
/// whose intended send time is in `[from_ms, until_ms)`, each in exactly one window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventWindow {
    /// The change: kind and detail of its first event (e.g. "scale 7").
    pub change: String,
    pub from_ms: f64,
    pub until_ms: f64,
    /// Successful responses, errors by kind, and the corrected latency (p99 to 2
    /// significant digits, and the exact max) of those requests; a request answered
    /// after the window ended still counts in it.
    pub completed: u64,
    pub errors: BTreeMap<String, u64>,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One change window as one generator of a split scenario run counted it (written
/// in the generator's result, added up by the coordinator, absent elsewhere): the
/// same figures the engine keeps per window, in a form that crosses a process.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowPart {
    pub completed: u64,
    /// Errors by kind name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Corrected latency (µs, 2 significant digits), HdrHistogram V2 deflate, base64.
    pub latency: String,
    pub max_us: u64,
    /// Successful responses by the route markers they carried (only patterns seen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<MarkerPart>,
}

/// The responses of a window that carried one marker pattern, with when the first
/// and last arrived in ms from the start of the measured window (the shared instant
/// every generator starts from, so the coordinator can place them on its clock).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MarkerPart {
    pub pattern: u8,
    pub responses: u64,
    pub first_ms: f64,
    pub last_ms: f64,
}

/// How long one backend took to start or stop receiving traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PropagationEntry {
    pub backend: String,
    /// When it became ready (added) or was told to stop (removed), ms from start.
    pub at_ms: f64,
    /// Added: from ready to its first response through the proxy. Removed: from the
    /// stop to its last response. `null`: it never answered through the proxy.
    pub propagation_ms: Option<f64>,
    /// Removed only: errors in the seconds from its removal to its last response.
    pub errors_between: u64,
}

/// Minimum, median and maximum of a set of times, in ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub min: Option<f64>,
    pub median: Option<f64>,
    pub max: Option<f64>,
}

impl Spread {
    /// The spread of `values`.
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let median = match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        };
        Spread {
            n: v.len(),
            min: v.first().copied(),
            median,
            max: v.last().copied(),
        }
    }
}

/// Endpoint propagation of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Propagation {
    pub added: Vec<PropagationEntry>,
    pub removed: Vec<PropagationEntry>,
    pub added_ms: Spread,
    pub removed_ms: Spread,
}

/// How one route change showed in traffic. Times are ms from the request for the
/// change; the responses counted are those of requests intended from the request
/// until the next route change (its windows), so the previous change's stragglers
/// are not taken for this one's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteChange {
    /// The route asked for: `base`, `cors`, `header` or `rewrite`.
    pub route: String,
    /// When it was asked for, ms from the start of the measured window.
    pub at_ms: f64,
    /// Until the driver or controller said it was applied (`route_applied`: an
    /// ACK, a reload done, an HTTPRoute `Accepted`); `null` when it never did.
    pub applied_ms: Option<f64>,
    /// Until the first response that showed it; `null` when none did.
    pub seen_ms: Option<f64>,
    /// Until the last response that did not show it yet (old and new served side
    /// by side until then); `null` when every response showed it.
    pub last_old_ms: Option<f64>,
    /// Responses that showed the new route, and that did not.
    pub responses_new: u64,
    pub responses_old: u64,
    /// Errors of the requests counted (every kind, status >= 400 included).
    pub errors: u64,
}

/// Route propagation of a run: each route change as traffic saw it, beside what the
/// system under test reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutePropagation {
    pub changes: Vec<RouteChange>,
    /// Spread of `applied_ms`, `seen_ms` and `last_old_ms` over the changes.
    pub applied_ms: Spread,
    pub seen_ms: Spread,
    pub last_old_ms: Spread,
}

impl RoutePropagation {
    /// The changes with their spreads.
    pub fn of(changes: Vec<RouteChange>) -> Self {
        let spread = |f: fn(&RouteChange) -> Option<f64>| {
            Spread::of(&changes.iter().filter_map(f).collect::<Vec<_>>())
        };
        RoutePropagation {
            applied_ms: spread(|c| c.applied_ms),
            seen_ms: spread(|c| c.seen_ms),
            last_old_ms: spread(|c| c.last_old_ms),
            changes,
        }
    }
}

/// One second of what the system under test spent (its processes on this machine).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceSample {
    /// When it was read, seconds from the start of the measured window (about once a
    /// second; later while a change was being applied).
    pub t_s: f64,
    /// CPU (user + system) used since the previous reading, in cores: 1.0 is a whole
    /// core busy.
    pub cpu: f64,
    /// Resident memory at the end of the second, MiB.
    pub rss_mib: f64,
    /// Processes alive then (a reload's old workers included).
    pub processes: u32,
}

/// What the system under test spent over the measured window, read every second from
/// `/proc` for every process of its process groups.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    pub samples: Vec<ResourceSample>,
    /// CPU cores used on average and in the busiest second.
    pub cpu_mean: f64,
    pub cpu_max: f64,
    /// Largest resident memory seen, MiB.
    pub rss_max_mib: f64,
    /// CPU milliseconds per 1,000 completed requests.
    pub cpu_ms_per_1000: Option<f64>,
}

impl Resources {
    /// The samples with their summary; `completed`: the run's completed requests.
    pub fn of(samples: Vec<ResourceSample>, completed: u64) -> Self {
        let mut prev = 0.0;
        let mut total = 0.0;
        for s in &samples {
            total += s.cpu * (s.t_s - prev).max(0.0);
            prev = s.t_s;
        }
        Resources {
            cpu_mean: if prev > 0.0 { total / prev } else { 0.0 },
            cpu_max: samples.iter().map(|s| s.cpu).fold(0.0, f64::max),
            rss_max_mib: samples.iter().map(|s| s.rss_mib).fold(0.0, f64::max),
            cpu_ms_per_1000: (completed > 0).then(|| total * 1000.0 / completed as f64 * 1000.0),
            samples,
        }
    }
}

/// What a lab run adds to a result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LabInfo {
    /// The profile, e.g. `nginx-reload`.
    pub system: String,
    pub scenario: String,
    /// Versions of the proxy and its parts, e.g. `{"nginx": "1.22.1"}`.
    pub versions: BTreeMap<String, String>,
    pub events: Vec<Event>,
    pub windows: Vec<EventWindow>,
    /// The same figures for the requests intended before the first change (the
    /// whole run when nothing changed): with `windows`, they add up to the run.
    /// Absent in results written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_changes: Option<EventWindow>,
    pub propagation: Propagation,
    /// Route changes as traffic saw them; absent when the run changed no route (and
    /// in results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_propagation: Option<RoutePropagation>,
    /// What the system under test spent, per second (absent when none of it ran on
    /// this machine, and in results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// The proxy process died during the run.
    pub proxy_died: bool,
    /// Which CPUs the generator, the proxy and the backends ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementInfo>,
    /// On a cluster: where the run worked and which pods served it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    /// On the network lab: the data path and how the nodes were tuned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkInfo>,
    /// In a run at fractions of a maximum (`load.rates`): which fraction this is and
    /// the maximum it is a fraction of (the search is in the system's `search.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<Fraction>,
    /// With flapping backends (`backends.flapping`): their phases and what each saw,
    /// see [`failover`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<failover::Failover>,
}

/// A run at a fraction of the maximum its system sustained (study S2's 30-50 %).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fraction {
    /// The system the maximum was searched for (`host`), without the fraction.
    pub of: String,
    /// 0 to 1, e.g. 0.3.
    pub fraction: f64,
    /// The maximum found by the search, req/s.
    pub max_rate: f64,
}

/// What the network lab built for a run (`platform: network-lab`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkInfo {
    /// `host`, `bridge`, `host-gw`, `vxlan` or `macvlan`.
    pub path: String,
    /// On `macvlan`: the device the pod got (`ipvlan` where the kernel has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_device: Option<String>,
    /// Where the load connected (node A's view) and where the server listened.
    pub target: String,
    pub server: String,
    /// Node A's address: the source the server sees.
    pub client: String,
    /// Conntrack bypassed with NOTRACK rules for the server's port.
    pub notrack: bool,
    /// Each sysctl asked for: `ok`, or why it was not set.
    pub sysctls: BTreeMap<String, String>,
    /// The served file's size (the response body), bytes.
    pub body_size: usize,
    /// Packets received and sent on the links only this path's traffic crosses
    /// (`b/wire`, and `b/br0`, `b/pod0`, `b/vx0` or `pod/mv0`), counted from the
    /// lab's start to the end of the run: which way the load went.
    #[serde(default)]
    pub links: BTreeMap<String, LinkPackets>,
}

/// A link's packet counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkPackets {
    pub rx: u64,
    pub tx: u64,
}

/// The cluster's view of a run (`platform: kubernetes`); the controller's version is
/// in [`LabInfo::versions`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// The kubeconfig context (`None`: its current one).
    pub context: Option<String>,
    pub namespace: String,
    /// Every backend pod the run saw, oldest first, with where it ran.
    pub pods: Vec<ClusterPod>,
}

/// One backend pod of a cluster run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterPod {
    pub name: String,
    /// `spec.nodeName`; `None` if it was never scheduled.
    pub node: Option<String>,
    pub ip: Option<String>,
}

/// The CPUs each part of a lab run used, as `0-3,6` lists, and the proxy's workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacementInfo {
    pub generator: String,
    pub proxy: String,
    pub backends: String,
    /// Workers (processes or threads) the proxy ran: one per CPU of its set.
    pub proxy_workers: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU is weighted by each reading's interval (a reading delayed by a change
    /// covers more time), memory is the largest seen.
    #[test]
    fn resources_sum_up_readings_by_their_interval() {
        let at = |t_s: f64, cpu: f64, rss_mib: f64| ResourceSample {
            t_s,
            cpu,
            rss_mib,
            processes: 2,
        };
        let r = Resources::of(
            vec![at(1.0, 0.5, 20.0), at(3.0, 1.0, 40.0), at(4.0, 0.0, 30.0)],
            5000,
        );
        assert!((r.cpu_mean - 0.625).abs() < 1e-9, "{r:?}"); // (0.5 + 2.0 + 0) / 4 s
        assert_eq!((r.cpu_max, r.rss_max_mib), (1.0, 40.0));
        assert!((r.cpu_ms_per_1000.unwrap() - 500.0).abs() < 1e-9); // 2.5 s / 5000 req
        assert_eq!(Resources::of(Vec::new(), 0).cpu_ms_per_1000, None);
    }

    #[test]
    fn percentile_keys_are_the_nines() {
        let v = serde_json::to_value(Percentiles::default()).unwrap();
        for k in [
            "p50", "p75", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max", "mean",
            "stdev",
        ] {
            assert!(v.get(k).is_some_and(|x| x.is_null()), "{k}: {v}");
        }
    }

    #[test]
    fn old_files_with_numbers_still_read() {
        let p: Percentiles =
            serde_json::from_str(r#"{"p50": 1.5, "p99": 0.0, "max": null, "count": 3}"#).unwrap();
        assert_eq!(
            (p.p50, p.p99, p.max, p.count),
            (Some(1.5), Some(0.0), None, 3)
        );
        assert_eq!(p.p75, None);
    }

    #[test]
    fn a_run_without_responses_failed() {
        let mut r = RunResult {
            requests: Requests {
                intended: 200,
                sent: 200,
                failed: 200,
                ..Default::default()
            },
            ..Default::default()
        };
        r.errors.connect = 200;
        assert_eq!(
            r.failure().as_deref(),
            Some("no response was received: 200 of 200 intended requests failed (connect 200)")
        );
        r.errors = Errors {
            status: 200,
            ..Default::default()
        };
        r.latency_ms.corrected.count = 200;
        assert!(r.failure().unwrap().starts_with("no request succeeded: "));
        r.requests.completed = 99;
        r.requests.failed = 101;
        r.errors.status = 101;
        assert!(r
            .failure()
            .unwrap()
            .starts_with("most requests failed: 101 of 200"));
        r.requests.completed = 100;
        r.requests.failed = 100;
        assert_eq!(r.failure(), None, "half is not most");
        let nothing = RunResult::default();
        assert_eq!(
            nothing.failure().as_deref(),
            Some("no response was received: no request was sent")
        );
    }

    #[test]
    fn balance_detects_a_lost_request() {
        let mut r = Requests {
            intended: 10,
            sent: 9,
            completed: 7,
            failed: 2,
            not_sent: 1,
            unfinished: 0,
            timed_out_unsent: 0,
        };
        assert!(r.balanced());
        r.completed = 6;
        assert!(!r.balanced());
        // A request still queued when the drain ended failed without being sent.
        let mut r = Requests {
            intended: 10,
            sent: 8,
            completed: 7,
            failed: 3,
            timed_out_unsent: 2,
            ..Default::default()
        };
        assert!(r.balanced());
        r.timed_out_unsent = 0;
        assert!(!r.balanced(), "a failure neither sent nor counted unsent");
    }

    #[test]
    fn files_without_the_drains_fields_still_read() {
        let r: Rate = serde_json::from_str(
            r#"{"target": 100.0, "achieved": 90.0, "completed_per_s": 90.0, "reached": false}"#,
        )
        .unwrap();
        assert_eq!(r.shortfall, Shortfall::default());
        let q: Requests = serde_json::from_str(
            r#"{"intended": 10, "sent": 9, "completed": 9, "failed": 0, "not_sent": 1, "unfinished": 0}"#,
        )
        .unwrap();
        assert_eq!(q.timed_out_unsent, 0);
        assert!(q.balanced());
        let e: TimelineEntry = serde_json::from_str(
            r#"{"t": 0, "sent": 1, "completed": 1, "errors": 0, "errors_by_kind": {}, "p50": 1.0, "p99": 1.0, "max": 1.0, "backends": {}}"#,
        )
        .unwrap();
        assert_eq!(e.lag_max_ms, 0.0);
    }

    #[test]
    fn spread_of_values() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!(
            (s.n, s.min, s.median, s.max),
            (3, Some(1.0), Some(2.0), Some(3.0))
        );
        assert_eq!(Spread::of(&[1.0, 4.0]).median, Some(2.5));
        assert_eq!(Spread::of(&[]).median, None);
    }

    #[test]
    fn event_kinds_serialize_as_their_names() {
        use EventKind::*;
        for k in [
            ScaleRequested,
            BackendReady,
            BackendStopping,
            EndpointsRequested,
            EndpointsApplied,
            RouteRequested,
            RouteApplied,
            ReloadRequested,
            ReloadDone,
            RestartRequested,
            RestartDone,
            ProxyDied,
            ChangeFailed,
        ] {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<EventKind>(&json).unwrap(), k);
        }
        assert_eq!(ScaleRequested.change(), Some("scale"));
        assert_eq!(EndpointsRequested.change(), None);
        assert!(ProxyDied.is_alarm() && !BackendReady.is_alarm());
    }

    #[test]
    fn error_kind_indices_match_all() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        let e = Errors::from_counts(&[1, 2, 3, 4, 5, 6, 7], BTreeMap::new());
        assert_eq!(e.get(ErrorKind::Write), 5);
        assert_eq!(e.total(), 28);
    }

    #[test]
    fn first_errors_are_optional_in_files() {
        let mut e = Errors::from_counts(&[0, 0, 3, 0, 0, 0, 0], BTreeMap::new());
        let json = serde_json::to_value(&e).unwrap();
        assert!(json.get("first").is_none(), "an empty map is not written");
        // A file written before the field existed still reads.
        let old: Errors = serde_json::from_value(json).unwrap();
        assert!(old.first.is_empty());
        e.first.insert(
            "tls".into(),
            "invalid peer certificate: UnknownIssuer".into(),
        );
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(
            json["first"]["tls"],
            "invalid peer certificate: UnknownIssuer"
        );
        assert_eq!(serde_json::from_value::<Errors>(json).unwrap(), e);
    }
}
