//! What the load measured: latency percentiles, request counts, the rate reached, TLS
//! handshakes, the per-second timeline.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

    /// Percentiles whose `pNN` figures are `quantile(i)`, for the `i`th of
    /// [`Percentiles::QUANTILES`], and the rest empty: the one place that lists the
    /// fields, for figures made quantile by quantile (from a histogram, or combined
    /// from several sets through [`Percentiles::values`]).
    pub fn from_quantiles(quantile: impl FnMut(usize) -> Option<f64>) -> Percentiles {
        let [p50, p75, p90, p99, p99_9, p99_99, p99_999, p99_9999] = std::array::from_fn(quantile);
        Percentiles {
            p50,
            p75,
            p90,
            p99,
            p99_9,
            p99_99,
            p99_999,
            p99_9999,
            ..Percentiles::default()
        }
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

/// What the connections went through beside the requests' outcomes: neither is an
/// error, both say something about the system under test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Connections {
    /// Requests sent on a new connection because the server had closed the kept-alive
    /// one they would have used (a proxy closing its idle connections on a reload or
    /// an idle timeout, without `Connection: close`). The engine sees the close
    /// (`EPOLLRDHUP`) and reconnects, the latency still counted from the intended
    /// time; with `--reuse-closed` (wrk2's way) it writes on the closed connection
    /// instead and the request fails, so this stays 0.
    #[serde(default)]
    pub reconnects_after_server_close: u64,
    /// Responses that carried both `Content-Length` and `Transfer-Encoding`: decoded
    /// by the chunked coding and the connection closed (RFC 9112 section 6.1), so
    /// they count as answered, but a proxy that forwards both framings is the classic
    /// request-smuggling setup.
    #[serde(default)]
    pub framing_warnings: u64,
    /// The first such response, described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing_warning_first: Option<String>,
    /// What HTTP/2 connections went through (`--http2`, `--h2c`); absent for
    /// HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2Stats>,
}

/// HTTP/2's own events over a run: none is an error by itself (a reset stream is
/// also counted as a `reset` error, a refused one was sent again).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Http2Stats {
    /// `--streams`: requests in flight allowed per connection.
    pub streams_per_connection: u32,
    /// The most streams one connection had open at once: below
    /// `streams_per_connection` when the load never needed more, or the server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` held it lower.
    pub max_concurrent_streams: u32,
    /// GOAWAY frames received: the server draining a connection (a reload, a
    /// restart, an idle or age limit).
    pub goaways: u64,
    /// Measured requests the server did not process (above a GOAWAY's last stream
    /// id, or refused with REFUSED_STREAM) and that were sent again on a new
    /// connection, their latency still counted from their intended time.
    pub retried_after_goaway: u64,
    /// Streams the server reset (RST_STREAM other than REFUSED_STREAM).
    pub streams_reset: u64,
    /// PINGs the server sent (answered, not counted as requests).
    pub pings: u64,
    /// Connections opened, the first ones included.
    pub connections_opened: u64,
}

impl Http2Stats {
    /// Adds another generator's (or repetition's) figures; maxima stay maxima.
    pub fn add(&mut self, o: &Http2Stats) {
        self.streams_per_connection = self.streams_per_connection.max(o.streams_per_connection);
        self.max_concurrent_streams = self.max_concurrent_streams.max(o.max_concurrent_streams);
        self.goaways += o.goaways;
        self.retried_after_goaway += o.retried_after_goaway;
        self.streams_reset += o.streams_reset;
        self.pings += o.pings;
        self.connections_opened += o.connections_opened;
    }
}

impl Connections {
    /// Adds another generator's (or repetition's) figures.
    pub fn add(&mut self, o: &Connections) {
        match (&mut self.http2, &o.http2) {
            (Some(a), Some(b)) => a.add(b),
            (None, Some(b)) => self.http2 = Some(b.clone()),
            _ => {}
        }
        self.reconnects_after_server_close += o.reconnects_after_server_close;
        self.framing_warnings += o.framing_warnings;
        if self.framing_warning_first.is_none() {
            self.framing_warning_first = o.framing_warning_first.clone();
        }
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

/// TLS figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsStats {
    /// Handshakes completed in the measured window.
    pub handshakes: u64,
    /// Of those, how many resumed a session.
    pub resumed: u64,
    /// Negotiated protocol version, e.g. "TLSv1.3".
    pub version: Option<String>,
    /// The server certificates the handshakes were served with, by serial number
    /// (hex): how many handshakes saw each, and when the first and the last of them
    /// completed (ms from the start of the measured window). A certificate rotation
    /// shows as a new serial taking over (`lab.rotations`). Empty over plain HTTP.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub certificates: BTreeMap<String, CertificateSeen>,
}

/// Handshakes served with one certificate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CertificateSeen {
    pub handshakes: u64,
    pub first_ms: f64,
    pub last_ms: f64,
}

impl CertificateSeen {
    /// Adds another count of the same certificate (another generator's, another
    /// repetition's on the same clock).
    pub fn merge(&mut self, o: &CertificateSeen) {
        if self.handshakes == 0 {
            *self = o.clone();
            return;
        }
        self.handshakes += o.handshakes;
        self.first_ms = self.first_ms.min(o.first_ms);
        self.last_ms = self.last_ms.max(o.last_ms);
    }
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
