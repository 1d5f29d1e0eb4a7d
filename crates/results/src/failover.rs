//! Backend failover (issue 16 §3): what a flapping backend writes about the traffic it
//! received ([`FlapLog`], `ingressbench backend --flap-log`), and the `failover`
//! section of a lab result ([`Failover`]) computed from it and the load's timeline.
//!
//! Both sides of the measurement live here, with no I/O but the log's atomic write,
//! so the backend (which records) and the runner (which places the record on the
//! load's clock) share one schema, and the arithmetic that turns 100 ms arrival
//! buckets into "how quickly did the proxy stop sending" is unit-tested with plain
//! numbers.

use crate::{Spread, TimelineEntry};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// `schema` of a [`FlapLog`].
pub const FLAP_SCHEMA: &str = "ingressbench/flap/v1";

/// Width of the arrival buckets of a [`FlapLog`], in ms: fine enough to time a
/// proxy's reaction, coarse enough that a busy backend fills every bucket.
pub const BUCKET_MS: u64 = 100;

/// A run of at least this many empty buckets in a failing phase is where the proxy
/// *stopped* sending (300 ms: a gap that a backend receiving tens of requests a
/// second never shows by chance).
pub const QUIET_BUCKETS: usize = 3;

/// What a flapping backend received, phase by phase and per [`BUCKET_MS`], written
/// by the backend itself (so what the proxy *sent* it is counted, not guessed from
/// the client's side).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlapLog {
    /// [`FLAP_SCHEMA`].
    pub schema: String,
    /// The backend's id (`x-backend`).
    pub id: String,
    /// `reset`, `503` or `stall`.
    pub mode: String,
    /// Length of each healthy and each failing phase, in ms.
    pub healthy_ms: u64,
    pub failing_ms: u64,
    /// Unix time (ns) of the schedule's anchor: the start of phase 0 (healthy). Phase
    /// `k` starts `k / 2` periods later, plus `healthy_ms` when `k` is odd (failing).
    pub anchor_unix_ns: u64,
    /// [`BUCKET_MS`].
    pub bucket_ms: u64,
    /// Requests received (`/healthz` probes excluded) per bucket since the anchor.
    pub arrivals: Vec<u64>,
    /// Every phase from the anchor to the last write, in order.
    pub phases: Vec<FlapPhaseLog>,
}

/// One phase as the backend saw it. Times in ms from the phase's start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlapPhaseLog {
    /// From 0; even: healthy, odd: failing.
    pub index: u64,
    pub failing: bool,
    /// Requests received (probes excluded).
    pub received: u64,
    /// How they were answered: `ok`, `503`, `reset` or `stalled`.
    pub answered: BTreeMap<String, u64>,
    /// `/healthz` requests received (a proxy's active health checks).
    pub probes: u64,
    /// First and last request received in the phase.
    pub first_ms: Option<f64>,
    pub last_ms: Option<f64>,
}

impl FlapLog {
    /// Writes the log as JSON, atomically (a reader never sees half of it).
    ///
    /// # Errors
    /// What the file system said.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::fsutil::write_atomic(path, &json)
    }

    /// Reads a log written by [`FlapLog::write`].
    ///
    /// # Errors
    /// A one-line reason: unreadable, not JSON, or another schema.
    pub fn read(path: &Path) -> Result<FlapLog, String> {
        let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let log: FlapLog =
            serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if log.schema != FLAP_SCHEMA {
            return Err(format!(
                "{}: schema {:?}, expected {FLAP_SCHEMA:?}",
                path.display(),
                log.schema
            ));
        }
        Ok(log)
    }
}

/// The `failover` section of a lab result: one entry per flapping backend.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Failover {
    pub backends: Vec<FlappingBackend>,
}

/// A flapping backend's phases on the load's clock and what each saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlappingBackend {
    pub id: String,
    /// Why its log could not be read (then nothing else is filled in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub mode: String,
    pub healthy_ms: u64,
    pub failing_ms: u64,
    /// Every phase that overlaps the measured window, clipped to it.
    pub phases: Vec<FailoverPhase>,
    /// Requests the backend received per second of the measured window (from its
    /// 100 ms buckets, each counted in the second it starts in).
    pub received_per_s: Vec<u64>,
    /// Failing phases against healthy ones.
    pub failing: PhaseTotals,
    pub healthy: PhaseTotals,
    /// Over the failing phases wholly in the window: [`FailoverPhase::stop_ms`].
    pub stop_ms: Spread,
    /// Failing phases wholly in the window in which the proxy never stopped.
    pub never_stopped: usize,
    /// Over the healthy phases that follow a failing one, wholly in the window:
    /// [`FailoverPhase::resume_ms`].
    pub resume_ms: Spread,
    /// Such healthy phases in which it received nothing at all.
    pub never_resumed: usize,
}

/// One phase, on the load's clock (ms from the start of the measured window).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FailoverPhase {
    pub failing: bool,
    /// The phase's start and end, clipped to the window.
    pub from_ms: f64,
    pub until_ms: f64,
    /// The phase lies wholly inside the window: only then are its reaction times
    /// measured (one cut by the window's end may not have had the time to react).
    pub whole: bool,
    /// Requests the backend received in `from_ms..until_ms` (its buckets).
    pub received: u64,
    /// Responses the client saw from it (`x-backend`), and all the client's
    /// responses and errors, over the seconds of the timeline overlapping the phase,
    /// each second weighted by its overlap (so to the nearest request, not exact).
    pub responses_from_it: u64,
    pub responses: u64,
    pub errors: u64,
    /// Failing phases: ms from the phase's start to the end of the last 100 ms
    /// bucket with arrivals before the first [`QUIET_BUCKETS`] empty ones: when the
    /// proxy stopped sending to it. `None`: it never did within the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_ms: Option<f64>,
    /// Failing phases: ms from the phase's start to the last request received in it
    /// (a proxy that tries the backend again after a timeout shows it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ms: Option<f64>,
    /// Healthy phases after a failing one: ms from the phase's start to the first
    /// request received in it (the backend's own time; its 100 ms bucket when its log
    /// lacks the phase). `None`: none arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_ms: Option<f64>,
}

/// Phases of one kind added up (clipped to the window).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTotals {
    pub phases: usize,
    /// Their total length in the window, in ms.
    pub duration_ms: f64,
    /// Requests the backend received, and per second of these phases.
    pub received: u64,
    pub received_per_s: f64,
    /// What the client saw during them (seconds weighted by overlap).
    pub responses: u64,
    pub errors: u64,
    /// `errors / (responses + errors)`; 0 when there was no request.
    pub error_ratio: f64,
}

/// What [`analyse`] needs about the run.
pub struct Window<'a> {
    /// Unix time (ns) of the start of the measured window.
    pub start_unix_ns: u64,
    /// Its length, in ms.
    pub duration_ms: f64,
    /// The load's per-second timeline.
    pub timeline: &'a [TimelineEntry],
}

/// Places a flapping backend's log on the load's clock and measures each phase.
pub fn analyse(log: &FlapLog, w: &Window) -> FlappingBackend {
    let offset_ms = (log.anchor_unix_ns as f64 - w.start_unix_ns as f64) / 1e6;
    let bucket_ms = log.bucket_ms.max(1);
    let bucket = bucket_ms as f64;
    let period_ms = (log.healthy_ms + log.failing_ms).max(1);
    let end = w.duration_ms.max(0.0);
    // Everything is decided in ms since the anchor, where phase boundaries and bucket
    // starts are exact integers: neighbouring phases then share their boundary to the
    // bit, and each bucket lands in exactly one phase and one second.
    let (win_lo, win_hi) = (-offset_ms, end - offset_ms);
    let arrivals = |j: usize| log.arrivals.get(j).copied().unwrap_or(0);
    // Buckets whose start lies in [lo, hi).
    let span = |lo: f64, hi: f64| {
        let j0 = (lo / bucket).floor().max(0.0) as usize;
        let j1 = (hi / bucket).ceil().max(0.0) as usize + 1;
        (j0..j1).filter(move |&j| {
            let t = (j as u64 * bucket_ms) as f64;
            t >= lo && t < hi
        })
    };

    let seconds = (end / 1000.0).ceil() as usize;
    let mut received_per_s = vec![0u64; seconds];
    for j in span(win_lo, win_hi) {
        let s = (((j as u64 * bucket_ms) as f64 - win_lo) / 1000.0) as usize;
        if let Some(x) = received_per_s.get_mut(s.min(seconds.saturating_sub(1))) {
            *x += arrivals(j);
        }
    }

    let mut phases = Vec::new();
    // The first phase that can overlap the window.
    let mut k = ((win_lo / period_ms as f64).floor().max(0.0) as u64) * 2;
    loop {
        // Phase `k`: even ones healthy, odd ones failing.
        let failing = k % 2 == 1;
        let ps = (k / 2) * period_ms + if failing { log.healthy_ms } else { 0 };
        let pe = ps
            + if failing {
                log.failing_ms
            } else {
                log.healthy_ms
            };
        let (ps, pe) = (ps as f64, pe as f64);
        if ps >= win_hi {
            break;
        }
        let index = k;
        k += 1;
        if pe <= win_lo {
            continue;
        }
        let (lo, hi) = (ps.max(win_lo), pe.min(win_hi));
        let from = if ps >= win_lo { ps + offset_ms } else { 0.0 };
        let until = if pe <= win_hi { pe + offset_ms } else { end };
        let received = span(lo, hi).map(arrivals).sum();
        let (responses_from_it, responses, errors) = client_side(w.timeline, &log.id, from, until);
        let mut p = FailoverPhase {
            failing,
            from_ms: from,
            until_ms: until,
            whole: ps >= win_lo && pe <= win_hi,
            received,
            responses_from_it,
            responses,
            errors,
            ..FailoverPhase::default()
        };
        if p.whole {
            let counts: Vec<u64> = span(ps, pe).map(arrivals).collect();
            let logged = log.phases.iter().find(|x| x.index == index);
            if failing {
                p.stop_ms = stop_ms(&counts, bucket);
                p.last_ms = logged.and_then(|x| x.last_ms);
            } else if index > 0 {
                // The backend's exact time; its buckets when the log has no phase.
                p.resume_ms = logged.and_then(|x| x.first_ms).or_else(|| {
                    counts
                        .iter()
                        .position(|&n| n > 0)
                        .map(|j| j as f64 * bucket)
                });
            }
        }
        phases.push(p);
    }

    let totals = |failing: bool| {
        let mut t = PhaseTotals::default();
        for p in phases.iter().filter(|p| p.failing == failing) {
            t.phases += 1;
            t.duration_ms += p.until_ms - p.from_ms;
            t.received += p.received;
            t.responses += p.responses;
            t.errors += p.errors;
        }
        if t.duration_ms > 0.0 {
            t.received_per_s = t.received as f64 * 1000.0 / t.duration_ms;
        }
        if t.responses + t.errors > 0 {
            t.error_ratio = t.errors as f64 / (t.responses + t.errors) as f64;
        }
        t
    };
    let measured_failing: Vec<&FailoverPhase> =
        phases.iter().filter(|p| p.failing && p.whole).collect();
    let measured_resumes: Vec<&FailoverPhase> = phases
        .iter()
        .enumerate()
        .filter(|(i, p)| !p.failing && p.whole && *i > 0 && phases[i - 1].failing)
        .map(|(_, p)| p)
        .collect();
    FlappingBackend {
        id: log.id.clone(),
        error: None,
        mode: log.mode.clone(),
        healthy_ms: log.healthy_ms,
        failing_ms: log.failing_ms,
        failing: totals(true),
        healthy: totals(false),
        stop_ms: Spread::of(
            &measured_failing
                .iter()
                .filter_map(|p| p.stop_ms)
                .collect::<Vec<_>>(),
        ),
        never_stopped: measured_failing
            .iter()
            .filter(|p| p.stop_ms.is_none())
            .count(),
        resume_ms: Spread::of(
            &measured_resumes
                .iter()
                .filter_map(|p| p.resume_ms)
                .collect::<Vec<_>>(),
        ),
        never_resumed: measured_resumes
            .iter()
            .filter(|p| p.resume_ms.is_none())
            .count(),
        phases,
        received_per_s,
    }
}

/// When a failing phase's arrivals stopped: the end of the last bucket with
/// arrivals before the first run of [`QUIET_BUCKETS`] empty ones (0 when the run
/// starts the phase); `None` when no such run fits in the phase.
pub fn stop_ms(counts: &[u64], bucket_ms: f64) -> Option<f64> {
    let mut run = 0;
    for (j, &n) in counts.iter().enumerate() {
        if n == 0 {
            run += 1;
            if run == QUIET_BUCKETS {
                return Some((j + 1 - QUIET_BUCKETS) as f64 * bucket_ms);
            }
        } else {
            run = 0;
        }
    }
    None
}

/// The client's side of `[from, until)`: responses from `id`, all responses, and
/// errors, each second of the timeline weighted by its overlap with the span.
fn client_side(timeline: &[TimelineEntry], id: &str, from: f64, until: f64) -> (u64, u64, u64) {
    let (mut mine, mut all, mut errors) = (0.0, 0.0, 0.0);
    for s in timeline {
        let (a, b) = (s.t as f64 * 1000.0, (s.t + 1) as f64 * 1000.0);
        let overlap = (b.min(until) - a.max(from)).max(0.0) / 1000.0;
        if overlap > 0.0 {
            mine += overlap * s.backends.get(id).copied().unwrap_or(0) as f64;
            all += overlap * s.completed as f64;
            errors += overlap * s.errors as f64;
        }
    }
    (
        mine.round() as u64,
        all.round() as u64,
        errors.round() as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_is_the_end_of_traffic_before_the_first_quiet_stretch() {
        // Traffic for 300 ms, then nothing: stopped at 300 ms.
        assert_eq!(stop_ms(&[5, 4, 1, 0, 0, 0, 0], 100.0), Some(300.0));
        // Quiet from the start: stopped at once.
        assert_eq!(stop_ms(&[0, 0, 0, 0], 100.0), Some(0.0));
        // A single empty bucket is chance, not a stop; a retry after the stop
        // (nginx's fail_timeout) does not move it.
        assert_eq!(stop_ms(&[5, 0, 5, 0, 0, 0, 2, 0], 100.0), Some(300.0));
        // Never quiet for 300 ms: never stopped.
        assert_eq!(stop_ms(&[5, 0, 0, 5, 5, 0, 0], 100.0), None);
        assert_eq!(stop_ms(&[], 100.0), None);
    }

    fn second(t: u64, completed: u64, errors: u64, from_f1: u64) -> TimelineEntry {
        TimelineEntry {
            t,
            completed,
            errors,
            backends: [("f1".to_string(), from_f1)].into(),
            ..TimelineEntry::default()
        }
    }

    /// A 1 s / 1 s flap whose anchor is 500 ms before the window: phases start at
    /// -500, 500, 1500, ... on the load's clock; the proxy stops 200 ms into each
    /// failing phase and resumes 50 ms into each healthy one.
    #[test]
    fn phases_are_placed_on_the_load_clock_and_timed() {
        let start_unix_ns = 1_000_000_000_000u64;
        let mut arrivals = Vec::new();
        for k in 0..8 {
            // 10 buckets per phase.
            for j in 0..10 {
                let failing = k % 2 == 1;
                arrivals.push(if failing { u64::from(j < 2) * 7 } else { 10 });
            }
        }
        let phases = (0..8)
            .map(|k| FlapPhaseLog {
                index: k,
                failing: k % 2 == 1,
                received: 0,
                first_ms: Some(if k % 2 == 1 { 3.0 } else { 50.0 }),
                last_ms: Some(if k % 2 == 1 { 180.0 } else { 990.0 }),
                ..FlapPhaseLog::default()
            })
            .collect();
        let log = FlapLog {
            schema: FLAP_SCHEMA.into(),
            id: "f1".into(),
            mode: "reset".into(),
            healthy_ms: 1000,
            failing_ms: 1000,
            anchor_unix_ns: start_unix_ns - 500_000_000,
            bucket_ms: 100,
            arrivals,
            phases,
        };
        // The client: 100 responses, 10 errors and 20 responses from f1 a second.
        let timeline: Vec<TimelineEntry> = (0..6).map(|t| second(t, 100, 10, 20)).collect();
        let f = analyse(
            &log,
            &Window {
                start_unix_ns,
                duration_ms: 6000.0,
                timeline: &timeline,
            },
        );
        let spans: Vec<(bool, f64, f64, bool)> = f
            .phases
            .iter()
            .map(|p| (p.failing, p.from_ms, p.until_ms, p.whole))
            .collect();
        assert_eq!(
            spans,
            [
                (false, 0.0, 500.0, false),
                (true, 500.0, 1500.0, true),
                (false, 1500.0, 2500.0, true),
                (true, 2500.0, 3500.0, true),
                (false, 3500.0, 4500.0, true),
                (true, 4500.0, 5500.0, true),
                (false, 5500.0, 6000.0, false),
            ]
        );
        // The first, clipped healthy phase: its last 5 buckets.
        assert_eq!(f.phases[0].received, 50);
        assert_eq!(f.phases[1].received, 14);
        assert_eq!(f.phases[1].stop_ms, Some(200.0));
        assert_eq!(f.phases[1].last_ms, Some(180.0));
        assert_eq!(f.phases[2].resume_ms, Some(50.0));
        // The first healthy phase follows no failing one in the window.
        assert_eq!(f.phases[0].resume_ms, None);
        // Half of second 0 and half of second 1: 100 responses, 10 errors.
        assert_eq!(
            (
                f.phases[1].responses,
                f.phases[1].errors,
                f.phases[1].responses_from_it
            ),
            (100, 10, 20)
        );
        assert_eq!(f.stop_ms.n, 3);
        assert_eq!(f.stop_ms.median, Some(200.0));
        assert_eq!(f.never_stopped, 0);
        // Healthy phases at 1500 and 3500 follow a failing one; the one at 5500 is
        // cut by the window's end.
        assert_eq!((f.resume_ms.n, f.never_resumed), (2, 0));
        assert_eq!(f.phases[6].resume_ms, None);
        assert_eq!(f.failing.phases, 3);
        assert_eq!(f.failing.received, 42);
        assert!((f.failing.received_per_s - 14.0).abs() < 1e-9);
        assert_eq!(f.healthy.received, 50 + 100 + 100 + 50);
        assert!((f.healthy.received_per_s - 100.0).abs() < 1e-9);
        // Per second of the window: second 0 holds 5 healthy buckets and 5 failing.
        assert_eq!(f.received_per_s.len(), 6);
        assert_eq!(f.received_per_s[0], 50 + 14);
        // Second 1: the failing phase's quiet buckets, then half a healthy phase.
        assert_eq!(f.received_per_s[1], 50);
        assert_eq!(
            f.received_per_s.iter().sum::<u64>(),
            50 + 14 + 100 + 14 + 100 + 14 + 50
        );
    }

    /// Whatever the anchor's offset, every bucket in the window is counted once:
    /// in one phase and in one second (an 11 s run once counted 11 requests twice
    /// where two phases met at 5952.768512 ms).
    #[test]
    fn each_bucket_is_counted_once_whatever_the_offset() {
        for offset_ns in [47_231_488u64, 1, 999_999, 450_000_000, 1_999_999_999] {
            let start_unix_ns = 10_000_000_000_000u64;
            let log = FlapLog {
                schema: FLAP_SCHEMA.into(),
                id: "f1".into(),
                mode: "reset".into(),
                healthy_ms: 2000,
                failing_ms: 2000,
                anchor_unix_ns: start_unix_ns - offset_ns,
                bucket_ms: 100,
                arrivals: (0..200).map(|j| j % 7 + 1).collect(),
                phases: Vec::new(),
            };
            let f = analyse(
                &log,
                &Window {
                    start_unix_ns,
                    duration_ms: 11_000.0,
                    timeline: &[],
                },
            );
            let per_s: u64 = f.received_per_s.iter().sum();
            let in_phases: u64 = f.phases.iter().map(|p| p.received).sum();
            assert_eq!(per_s, in_phases, "offset {offset_ns} ns");
            // The buckets starting in the window: 110, give or take the edges.
            let lo = offset_ns as f64 / 1e8;
            let want: u64 = (lo.ceil() as usize..(lo + 110.0).ceil() as usize)
                .map(|j| log.arrivals[j])
                .sum();
            assert_eq!(per_s, want, "offset {offset_ns} ns");
            for w in f.phases.windows(2) {
                assert_eq!(w[0].until_ms.to_bits(), w[1].from_ms.to_bits());
            }
        }
    }

    #[test]
    fn a_proxy_that_never_stops_is_counted() {
        let log = FlapLog {
            schema: FLAP_SCHEMA.into(),
            id: "f1".into(),
            mode: "503".into(),
            healthy_ms: 500,
            failing_ms: 500,
            anchor_unix_ns: 10_000_000_000,
            bucket_ms: 100,
            arrivals: vec![3; 40],
            phases: Vec::new(),
        };
        let f = analyse(
            &log,
            &Window {
                start_unix_ns: 10_000_000_000,
                duration_ms: 2000.0,
                timeline: &[],
            },
        );
        assert_eq!(f.phases.len(), 4);
        assert_eq!(f.never_stopped, 2);
        assert_eq!(f.stop_ms.n, 0);
        // No per-phase log: the resume comes from the buckets.
        assert_eq!(
            (f.resume_ms.n, f.resume_ms.max, f.never_resumed),
            (1, Some(0.0), 0)
        );
        assert!((f.failing.received_per_s - 30.0).abs() < 1e-9);
    }

    #[test]
    fn a_log_round_trips_and_another_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flap.json");
        let log = FlapLog {
            schema: FLAP_SCHEMA.into(),
            id: "f1".into(),
            arrivals: vec![1, 2],
            ..FlapLog::default()
        };
        log.write(&path).unwrap();
        assert_eq!(FlapLog::read(&path).unwrap(), log);
        std::fs::write(&path, r#"{"schema":"x"}"#).unwrap();
        assert!(FlapLog::read(&path).is_err());
    }
}
