//! When each request is meant to be sent.
//!
//! The open-loop schedule is fixed before the run: request `k` of a lane is due at
//! `start + phase + k * interval`, whatever happens to earlier requests. A *lane* is a
//! sequence of due times together with the connections allowed to carry it:
//!
//! - `connection` (wrk2's model): one lane per connection, each with an equal share
//!   of the rate. A stuck connection delays only its own lane; its requests queue and
//!   their latency (from the due time) grows.
//! - `shared`: one lane per worker thread, carried by whichever of its connections is
//!   idle. A stuck connection then delays nothing while others are free, as a pool of
//!   real clients would behave; requests queue only when every connection is busy.
//! - `max` (closed loop): a request is due the moment its connection is free, so
//!   there is nothing to correct and no lag to measure.
//!
//! The engine's loop knows nothing of which model is in force: it asks a lane for its
//! due time and whether it has an idle connection.

use crate::profile::RateProfile;
// The error types alone, not the spec: the spec names a schedule's model.
use crate::setting::{Setting, SpecError};
use results::clock::Nanos;
use std::sync::Arc;

/// How a lane's due times advance.
#[derive(Clone, Debug, PartialEq)]
pub enum Pace {
    /// A fixed interval between due times, in nanoseconds (may be fractional).
    Every(f64),
    /// A load plan: the lane's request `k` is the run's request
    /// `offset + k * stride`, due when the plan says ([`RateProfile::time_of`]).
    Plan {
        profile: Arc<RateProfile>,
        stride: f64,
        offset: f64,
    },
    /// Closed loop: due as soon as a connection is free.
    Asap,
}

/// One sequence of due times and the idle connections that may carry it.
#[derive(Debug)]
pub struct Lane {
    pace: Pace,
    /// Due time of request 0.
    origin: Nanos,
    /// Index of the next request to send.
    next: u64,
    /// Idle connections of this lane (indices into the worker's connection table).
    pub idle: Vec<u32>,
    /// Waiting for a connection: off the timer heap until one frees up.
    pub blocked: bool,
    /// When the lane last stopped waiting for a connection: the generator's own lag
    /// is counted from the later of this and the due time.
    pub unblocked_at: Nanos,
    /// No more requests will be sent on this lane.
    pub finished: bool,
}

impl Lane {
    /// A lane whose first request is due at `origin`.
    pub fn new(pace: Pace, origin: Nanos, connections: usize) -> Self {
        Lane {
            pace,
            origin,
            next: 0,
            idle: Vec::with_capacity(connections),
            blocked: false,
            unblocked_at: 0,
            finished: false,
        }
    }

    /// Due time of request `k`.
    #[inline]
    pub fn due_at(&self, k: u64) -> Nanos {
        match &self.pace {
            Pace::Every(iv) => self.origin + (k as f64 * iv) as Nanos,
            Pace::Plan {
                profile,
                stride,
                offset,
            } => {
                // Past the plan's end the time is infinite: saturates to never.
                let t = profile.time_of(offset + k as f64 * stride) * 1e9;
                self.origin.saturating_add(t as Nanos)
            }
            Pace::Asap => 0,
        }
    }

    /// Due time of the next request; `now` for a closed-loop lane.
    #[inline]
    pub fn due(&self, now: Nanos) -> Nanos {
        match self.pace {
            Pace::Asap => now,
            _ => self.due_at(self.next),
        }
    }

    /// Moves on to the next request.
    #[inline]
    pub fn advance(&mut self) {
        self.next += 1;
    }

    /// Whether due times are fixed in advance (open loop).
    pub fn open_loop(&self) -> bool {
        !matches!(self.pace, Pace::Asap)
    }

    /// Smallest `k` whose due time is at or after `t`.
    pub fn first_at_or_after(&self, t: Nanos) -> u64 {
        if t <= self.origin {
            return 0;
        }
        // Estimate with floating point, then settle exactly on `due_at` so counts
        // agree with what the loop actually dispatches.
        let since = (t - self.origin) as f64;
        let mut k = match &self.pace {
            Pace::Every(iv) => (since / iv).floor() as u64,
            Pace::Plan {
                profile,
                stride,
                offset,
            } => ((profile.count_at(since / 1e9) - offset) / stride).max(0.0) as u64,
            Pace::Asap => return 0,
        };
        while k > 0 && self.due_at(k - 1) >= t {
            k -= 1;
        }
        while self.due_at(k) < t {
            k += 1;
        }
        k
    }

    /// How many requests are due in `[from, to)`.
    pub fn due_between(&self, from: Nanos, to: Nanos) -> u64 {
        self.first_at_or_after(to)
            .saturating_sub(self.first_at_or_after(from))
    }

    /// The same lane with every due time moved `by` later (lanes are planned from
    /// zero and placed once the run's start is known).
    pub fn shifted(mut self, by: Nanos) -> Self {
        self.origin += by;
        self
    }

    /// Index of the next request to send.
    pub fn next_index(&self) -> u64 {
        self.next
    }
}

/// Which part of the run's connections one worker owns.
#[derive(Clone, Copy, Debug)]
pub struct Share {
    /// This worker's index and the number of workers.
    pub worker: usize,
    pub workers: usize,
    /// Index of this worker's first connection among all connections, so phases
    /// interleave across workers and the combined schedule is evenly spaced.
    pub conn_offset: usize,
    /// Connections of this worker, and of the whole run.
    pub conns: usize,
    pub total_conns: usize,
}

/// Builds the lanes of one worker; `rate` is the total over all workers (`None` for
/// closed loop); a `profile` (a load plan) replaces it.
pub fn lanes_for_worker(
    model: Model,
    rate: Option<f64>,
    profile: Option<&Arc<RateProfile>>,
    start: Nanos,
    sh: Share,
) -> Vec<Lane> {
    if let Some(p) = profile {
        // The same interleaving as a constant rate: by connection, or by worker.
        let lane = |stride: usize, offset: usize, conns: usize| {
            let pace = Pace::Plan {
                profile: p.clone(),
                stride: stride as f64,
                offset: offset as f64,
            };
            Lane::new(pace, start, conns)
        };
        return match model {
            Model::PerConnection => (0..sh.conns)
                .map(|j| lane(sh.total_conns, sh.conn_offset + j, 1))
                .collect(),
            Model::Shared => vec![lane(sh.workers, sh.worker, sh.conns)],
        };
    }
    match (rate, model) {
        (None, _) => (0..sh.conns)
            .map(|_| Lane::new(Pace::Asap, start, 1))
            .collect(),
        (Some(r), Model::PerConnection) => {
            let iv = sh.total_conns as f64 * 1e9 / r;
            (0..sh.conns)
                .map(|j| {
                    let phase = ((sh.conn_offset + j) as f64 * 1e9 / r) as Nanos;
                    Lane::new(Pace::Every(iv), start + phase, 1)
                })
                .collect()
        }
        (Some(r), Model::Shared) => {
            let iv = sh.workers as f64 * 1e9 / r;
            let phase = (sh.worker as f64 * 1e9 / r) as Nanos;
            vec![Lane::new(Pace::Every(iv), start + phase, sh.conns)]
        }
    }
}

/// Which connections carry which due times (`--schedule`, `load.schedule`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Model {
    /// wrk2: every connection has a fixed share of the rate.
    #[default]
    #[serde(rename = "connection", alias = "per-connection")]
    PerConnection,
    /// One queue per worker thread, served by any idle connection.
    #[serde(rename = "shared")]
    Shared,
}

impl Model {
    /// Parses `connection` or `shared`.
    ///
    /// # Errors
    /// A message listing the accepted names.
    pub fn parse(s: &str) -> Result<Model, SpecError> {
        match s {
            "connection" | "per-connection" => Ok(Model::PerConnection),
            "shared" => Ok(Model::Shared),
            _ => Err(SpecError::new(
                Setting::Schedule,
                " is not a schedule: use 'connection' (wrk2) or 'shared'",
            )
            .value(format!("'{s}'"))),
        }
    }

    /// The name written into results.
    pub fn name(self) -> &'static str {
        match self {
            Model::PerConnection => "connection",
            Model::Shared => "shared",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All due times of all lanes of all workers in `[0, until)`, sorted.
    fn all_due(model: Model, rate: f64, workers: usize, conns: usize, until: Nanos) -> Vec<Nanos> {
        let per = conns / workers;
        let mut v = Vec::new();
        for w in 0..workers {
            let sh = Share {
                worker: w,
                workers,
                conn_offset: w * per,
                conns: per,
                total_conns: conns,
            };
            for lane in lanes_for_worker(model, Some(rate), None, 0, sh) {
                let mut k = 0;
                while lane.due_at(k) < until {
                    v.push(lane.due_at(k));
                    k += 1;
                }
            }
        }
        v.sort_unstable();
        v
    }

    #[test]
    fn combined_schedule_is_evenly_spaced_at_the_rate() {
        for model in [Model::PerConnection, Model::Shared] {
            // 1000 req/s over 2 workers and 10 connections: one every millisecond.
            let due = all_due(model, 1000.0, 2, 10, 1_000_000_000);
            assert_eq!(due.len(), 1000, "{model:?}");
            for (i, w) in due.windows(2).enumerate() {
                let gap = w[1] - w[0];
                assert!(
                    (999_000..=1_001_000).contains(&gap),
                    "{model:?} gap {i}: {gap}"
                );
            }
        }
    }

    /// A plan's due times over every lane of every worker are the plan's own: the
    /// lanes split it without losing, doubling or bunching a request.
    #[test]
    fn lanes_together_follow_a_plan() {
        let profile = Arc::new(RateProfile::parse("1000:1s,3000:1s,200..800:2s").unwrap());
        let whole: Vec<Nanos> = (0..)
            .map(|k| profile.time_of(k as f64))
            .take_while(|t| t.is_finite())
            .map(|t| (t * 1e9) as Nanos)
            .collect();
        for model in [Model::PerConnection, Model::Shared] {
            let (workers, conns) = (2, 10);
            let mut v = Vec::new();
            for w in 0..workers {
                let sh = Share {
                    worker: w,
                    workers,
                    conn_offset: w * 5,
                    conns: 5,
                    total_conns: conns,
                };
                for lane in lanes_for_worker(model, None, Some(&profile), 0, sh) {
                    assert!(lane.open_loop());
                    let mut k = 0;
                    while lane.due_at(k) < Nanos::MAX {
                        v.push(lane.due_at(k));
                        k += 1;
                    }
                    // Counting agrees with what the loop would dispatch.
                    assert_eq!(lane.due_between(0, 4_000_000_000), k, "{model:?}");
                    assert_eq!(lane.first_at_or_after(1_500_000_000), {
                        (0..k).find(|i| lane.due_at(*i) >= 1_500_000_000).unwrap()
                    });
                }
            }
            v.sort_unstable();
            assert_eq!(v, whole, "{model:?}");
            let per_second = |s: u64| v.iter().filter(|t| **t / 1_000_000_000 == s).count();
            assert_eq!(
                (0..4).map(per_second).collect::<Vec<_>>(),
                [1000, 3000, 350, 650],
                "{model:?}"
            );
        }
    }

    #[test]
    fn fractional_intervals_do_not_drift() {
        // 3 req/s: interval 333,333,333.3 ns; after 3e6 requests (11.5 days) the error must stay
        // below a microsecond, which integer intervals would not give.
        let lane = Lane::new(Pace::Every(1e9 / 3.0), 0, 1);
        let t = lane.due_at(3_000_000);
        assert!(t.abs_diff(1_000_000_000_000_000) < 1_000, "{t}");
    }

    #[test]
    fn due_between_counts_exactly() {
        let lane = Lane::new(Pace::Every(1e9 / 7.0), 123, 1);
        for (from, to) in [
            (0, 1_000_000_000),
            (500, 3_000_000_123),
            (123, 124),
            (10, 10),
        ] {
            let brute = (0..100)
                .map(|k| lane.due_at(k))
                .filter(|t| *t >= from && *t < to)
                .count() as u64;
            assert_eq!(lane.due_between(from, to), brute, "[{from},{to})");
        }
    }

    #[test]
    fn closed_loop_is_always_due() {
        let sh = Share {
            worker: 0,
            workers: 1,
            conn_offset: 0,
            conns: 3,
            total_conns: 3,
        };
        let lanes = lanes_for_worker(Model::PerConnection, None, None, 5, sh);
        assert_eq!(lanes.len(), 3);
        assert_eq!(lanes[0].due(42), 42);
        assert!(!lanes[0].open_loop());
    }

    #[test]
    fn model_names() {
        assert_eq!(Model::parse("shared").unwrap(), Model::Shared);
        assert_eq!(Model::parse("connection").unwrap().name(), "connection");
        assert!(Model::parse("queue").is_err());
    }
}
