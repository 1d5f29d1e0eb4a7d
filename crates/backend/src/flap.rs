//! A backend that flaps (`--flap 8s/4s --flap-mode reset|503|stall`): healthy for
//! a while, then failing for a while, over and over, so passive health checks
//! (nginx's `max_fails`, HAProxy's `observe layer7`, Caddy's passive checks, Envoy's
//! outlier detection) can be timed against a failure whose every start and end is
//! known.
//!
//! The schedule is anchored at the server's start, like [`Stall`](crate::Stall), and
//! is pure arithmetic on elapsed time. The backend also counts what it received per
//! phase and per 100 ms ([`FlapCounter`]), because what the proxy *sent* to a failing
//! backend cannot be seen from the client: a reset that the proxy retried elsewhere
//! leaves no trace in the client's responses. The counts are written as a
//! [`results::failover::FlapLog`], with the anchor's Unix time, so the runner can place
//! each phase on the load's clock.

use results::failover::{FlapLog, FlapPhaseLog, BUCKET_MS, FLAP_SCHEMA};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// What the backend does while failing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlapMode {
    /// Reads each request, then resets the connection (`SO_LINGER 0`): a crashed or
    /// overloaded process, as the proxy sees it. Kept-alive connections see it at
    /// their next request, new ones at their first.
    Reset,
    /// Answers `503 Service Unavailable` (with `x-backend`).
    Status503,
    /// Holds every answer until the failing phase ends: a process that stopped
    /// answering.
    Stall,
}

impl FlapMode {
    /// The name as the flag and the logs write it.
    pub fn name(self) -> &'static str {
        match self {
            FlapMode::Reset => "reset",
            FlapMode::Status503 => "503",
            FlapMode::Stall => "stall",
        }
    }

    /// Parses `reset`, `503` or `stall`.
    ///
    /// # Errors
    /// A one-line message naming the choices.
    pub fn parse(s: &str) -> Result<FlapMode, String> {
        match s.trim() {
            "reset" => Ok(FlapMode::Reset),
            "503" => Ok(FlapMode::Status503),
            "stall" => Ok(FlapMode::Stall),
            _ => Err(format!(
                "--flap-mode {s:?}: use reset (reset connections), 503 (answer 503) or stall (stop answering)"
            )),
        }
    }

    /// How a request received while failing is answered, as the log names it.
    fn answered(self) -> &'static str {
        match self {
            FlapMode::Reset => "reset",
            FlapMode::Status503 => "503",
            FlapMode::Stall => "stalled",
        }
    }
}

/// Healthy for `healthy`, then failing for `failing`, repeatedly, from the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flap {
    pub healthy: Duration,
    pub failing: Duration,
    pub mode: FlapMode,
}

/// Where a time falls in the schedule. Times are since the anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    /// From 0; even: healthy, odd: failing.
    pub index: u64,
    pub failing: bool,
    pub start: Duration,
    pub end: Duration,
}

impl Flap {
    /// Parses `HEALTHY/FAILING` (e.g. `8s/4s`) with a mode.
    ///
    /// Both parts are whole multiples of 100 ms (the log's bucket), so every phase
    /// starts on a bucket boundary and its arrivals are counted exactly.
    ///
    /// # Errors
    /// A one-line message naming the flag.
    pub fn parse(s: &str, mode: FlapMode) -> Result<Flap, String> {
        let (h, f) = s.trim().split_once('/').ok_or_else(|| {
            format!("--flap {s:?}: write HEALTHY/FAILING, e.g. 8s/4s (healthy 8s, then failing 4s, repeatedly)")
        })?;
        let d = |x: &str| results::duration::parse(x).map_err(|e| format!("--flap {s:?}: {e}"));
        let (healthy, failing) = (d(h)?, d(f)?);
        for part in [healthy, failing] {
            if part.is_zero() || part.as_nanos() % (u128::from(BUCKET_MS) * 1_000_000) != 0 {
                return Err(format!(
                    "--flap {s:?}: each phase is a whole number of tenths of a second, at least 100ms"
                ));
            }
            if part > Duration::from_secs(24 * 3600) {
                return Err(format!("--flap {s:?}: a phase lasts at most 24h"));
            }
        }
        Ok(Flap {
            healthy,
            failing,
            mode,
        })
    }

    /// The phase `t` (since the anchor) falls in; a phase's end belongs to the next.
    pub fn phase_at(&self, t: Duration) -> Phase {
        let period = self.healthy + self.failing;
        let cycle = t.as_nanos() / period.as_nanos();
        let cycle_start = period * u32::try_from(cycle).unwrap_or(u32::MAX);
        let into = t.saturating_sub(cycle_start);
        let index = (cycle as u64).saturating_mul(2);
        if into < self.healthy {
            Phase {
                index,
                failing: false,
                start: cycle_start,
                end: cycle_start + self.healthy,
            }
        } else {
            Phase {
                index: index + 1,
                failing: true,
                start: cycle_start + self.healthy,
                end: cycle_start + period,
            }
        }
    }
}

/// Most buckets kept: a week of 100 ms buckets; later arrivals are counted in their
/// phase only.
const MAX_BUCKETS: usize = 7 * 24 * 36_000;

/// The backend's record of what it received while flapping.
///
/// One mutex, taken once per request: only a flapping backend has it, and it serves
/// a share of a lab's load (hundreds of requests a second), where an uncontended
/// lock costs nanoseconds; the steady backends' path stays lock-free.
pub struct FlapCounter {
    flap: Flap,
    id: String,
    anchor: Instant,
    anchor_unix_ns: u64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    phases: Vec<FlapPhaseLog>,
    arrivals: Vec<u64>,
}

impl FlapCounter {
    /// A counter whose schedule starts at `anchor` (Unix time `anchor_unix_ns`).
    pub fn new(flap: Flap, id: &str, anchor: Instant, anchor_unix_ns: u64) -> FlapCounter {
        FlapCounter {
            flap,
            id: id.to_string(),
            anchor,
            anchor_unix_ns,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn flap(&self) -> Flap {
        self.flap
    }

    /// Records a request received at `now` (a `/healthz` probe when `probe`) and
    /// returns the phase it fell in, which decides its answer.
    pub fn arrive(&self, now: Instant, probe: bool) -> Phase {
        let t = now.saturating_duration_since(self.anchor);
        let phase = self.flap.phase_at(t);
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = &mut *g;
        fill_phases(&mut inner.phases, phase.index);
        let p = &mut inner.phases[phase.index as usize];
        if probe {
            p.probes += 1;
            return phase;
        }
        p.received += 1;
        let answered = if phase.failing {
            self.flap.mode.answered()
        } else {
            "ok"
        };
        *p.answered.entry(answered.to_string()).or_default() += 1;
        let since = (t - phase.start).as_secs_f64() * 1000.0;
        if p.first_ms.is_none() {
            p.first_ms = Some(since);
        }
        p.last_ms = Some(since);
        let bucket = (t.as_millis() / u128::from(BUCKET_MS)) as usize;
        if bucket < MAX_BUCKETS {
            if inner.arrivals.len() <= bucket {
                inner.arrivals.resize(bucket + 1, 0);
            }
            inner.arrivals[bucket] += 1;
        }
        phase
    }

    /// The log so far, every phase up to `now` listed (those that received nothing
    /// too).
    pub fn snapshot(&self, now: Instant) -> FlapLog {
        let t = now.saturating_duration_since(self.anchor);
        let current = self.flap.phase_at(t).index;
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        fill_phases(&mut g.phases, current);
        let buckets = (t.as_millis() / u128::from(BUCKET_MS)) as usize + 1;
        let mut arrivals = g.arrivals.clone();
        if arrivals.len() < buckets.min(MAX_BUCKETS) {
            arrivals.resize(buckets.min(MAX_BUCKETS), 0);
        }
        FlapLog {
            schema: FLAP_SCHEMA.into(),
            id: self.id.clone(),
            mode: self.flap.mode.name().into(),
            healthy_ms: self.flap.healthy.as_millis() as u64,
            failing_ms: self.flap.failing.as_millis() as u64,
            anchor_unix_ns: self.anchor_unix_ns,
            bucket_ms: BUCKET_MS,
            arrivals,
            phases: g.phases.clone(),
        }
    }
}

/// Makes `phases` list every phase up to `index`.
fn fill_phases(phases: &mut Vec<FlapPhaseLog>, index: u64) {
    while phases.len() as u64 <= index {
        let i = phases.len() as u64;
        phases.push(FlapPhaseLog {
            index: i,
            failing: i % 2 == 1,
            answered: BTreeMap::new(),
            ..FlapPhaseLog::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ms;

    #[test]
    fn parses_and_validates() {
        let f = Flap::parse("8s/4s", FlapMode::Reset).unwrap();
        assert_eq!((f.healthy, f.failing), (ms(8000), ms(4000)));
        assert_eq!(
            Flap::parse("1.5s/300ms", FlapMode::Stall).unwrap().failing,
            ms(300)
        );
        for bad in [
            "8s", "0s/4s", "8s/0s", "x/4s", "8s/", "/4s", "150ms/1s", "1s/1.05s", "25h/1s",
        ] {
            let e = Flap::parse(bad, FlapMode::Reset).unwrap_err();
            assert!(e.starts_with("--flap ") && !e.contains('\n'), "{bad}: {e}");
        }
        assert_eq!(FlapMode::parse("503").unwrap(), FlapMode::Status503);
        assert_eq!(FlapMode::parse("stall").unwrap().name(), "stall");
        assert!(FlapMode::parse("crash")
            .unwrap_err()
            .starts_with("--flap-mode"));
    }

    /// Healthy 8 s, failing 4 s: phases alternate at that period, each end
    /// belonging to the next phase.
    #[test]
    fn phases_alternate_at_the_period() {
        let f = Flap::parse("8s/4s", FlapMode::Reset).unwrap();
        let at = |t| {
            let p = f.phase_at(ms(t));
            (p.index, p.failing, p.start.as_millis(), p.end.as_millis())
        };
        assert_eq!(at(0), (0, false, 0, 8000));
        assert_eq!(at(7999), (0, false, 0, 8000));
        assert_eq!(at(8000), (1, true, 8000, 12000));
        assert_eq!(at(11_999), (1, true, 8000, 12000));
        assert_eq!(at(12_000), (2, false, 12_000, 20_000));
        assert_eq!(at(20_500), (3, true, 20_000, 24_000));
        // A day later the schedule has not drifted.
        assert_eq!(at(86_400_000), (14_400, false, 86_400_000, 86_408_000));
    }

    #[test]
    fn counts_per_phase_and_bucket() {
        let f = Flap::parse("1s/500ms", FlapMode::Status503).unwrap();
        let anchor = Instant::now();
        let c = FlapCounter::new(f, "f1", anchor, 42);
        assert!(!c.arrive(anchor + ms(10), false).failing);
        c.arrive(anchor + ms(950), false);
        c.arrive(anchor + ms(960), true);
        let p = c.arrive(anchor + ms(1200), false);
        assert!(p.failing && p.index == 1);
        // Phases 2 and 3 receive nothing, phase 4 one request.
        c.arrive(anchor + ms(3050), false);
        let log = c.snapshot(anchor + ms(3100));
        assert_eq!((log.id.as_str(), log.mode.as_str()), ("f1", "503"));
        assert_eq!(
            (log.healthy_ms, log.failing_ms, log.anchor_unix_ns),
            (1000, 500, 42)
        );
        assert_eq!(log.phases.len(), 5);
        let p0 = &log.phases[0];
        assert_eq!((p0.received, p0.probes), (2, 1));
        assert_eq!(p0.answered.get("ok"), Some(&2));
        assert_eq!((p0.first_ms, p0.last_ms), (Some(10.0), Some(950.0)));
        let p1 = &log.phases[1];
        assert_eq!(p1.answered.get("503"), Some(&1));
        assert_eq!(p1.first_ms, Some(200.0));
        assert_eq!(log.phases[2].received, 0);
        assert!(log.phases[3].failing);
        assert_eq!(log.phases[4].first_ms, Some(50.0));
        assert_eq!(log.arrivals.len(), 32);
        assert_eq!(log.arrivals[0], 1);
        assert_eq!(log.arrivals[9], 1);
        assert_eq!(log.arrivals[12], 1);
        assert_eq!(log.arrivals[30], 1);
        assert_eq!(log.arrivals.iter().sum::<u64>(), 4);
    }
}
