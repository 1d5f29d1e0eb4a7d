//! The decisions of a maximum-throughput search, with no I/O: how one step is judged
//! against the bounds, and which constant rate to try next. The caller runs the steps
//! (each a short open-loop load from this engine) and feeds their figures back, so
//! every rule here is tested without a server.
//!
//! The search starts from a closed-loop probe: with `c` connections a server completes
//! about as much per second as it does when every connection sends again as soon as it
//! is answered, so that is the first rate tried. The probe underestimates a little (it
//! waits a round trip between requests), so a ceiling that passes is raised by a
//! quarter until a rate fails (at most to twice the probe). From there the search
//! halves the interval between the highest rate that passed and the lowest that failed
//! until the two are within the precision asked for. A step the generator
//! itself could not hold (its lag) counts as a failure for the bisection, because it
//! says nothing of the server, and is remembered as the generator's limit so that a
//! maximum next to it is reported as possibly the generator's.

use crate::spec::SpecError;
use crate::{EngineError, LoadSpec};
use results::search::{Miss, SearchBounds, SearchResult, SearchStep, SEARCH_SCHEMA};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A search as checked input: the load of one step (its rate replaced per step), the
/// bounds and how finely to search.
#[derive(Clone, Debug)]
pub struct SearchPlan {
    pub spec: LoadSpec,
    /// Length of the closed-loop probe.
    pub probe: Duration,
    pub bounds: SearchBounds,
    /// Stop when the highest pass and the lowest failure are this close, as a share of
    /// the ceiling.
    pub precision: f64,
    /// Runs of each rate (it passes when more than half pass).
    pub trials: usize,
    /// The network namespace the load leaves from (the network lab's client node).
    pub netns: Option<PathBuf>,
}

/// Why a search could not run (a server that fails every step is a result, not this).
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The closed-loop probe completed nothing: there is nothing to search below.
    #[error("the closed-loop probe completed {rate:.1} requests/s against {url}: {why}")]
    NoCeiling {
        rate: f64,
        url: String,
        why: String,
        /// The search so far (the probe), to keep on record.
        result: Box<SearchResult>,
    },
}

/// Runs one step: the load at `rate` (`None`: closed loop for the probe's length).
fn step(
    p: &SearchPlan,
    rate: Option<f64>,
    trial: usize,
    stop: &Arc<AtomicBool>,
) -> Result<(SearchStep, results::RunResult), SearchError> {
    let mut spec = p.spec.clone();
    spec.rate = rate;
    if rate.is_none() {
        spec.duration = p.probe;
    }
    let (mut plan, config) = spec.resolve()?;
    plan.netns = p.netns.clone();
    // The step's own stop flag, following the caller's: a worker that fails sets its
    // run's flag, and that must end this step, not read as the user's Ctrl-C.
    let own = Arc::new(AtomicBool::new(stop.load(Ordering::Relaxed)));
    let done = AtomicBool::new(false);
    let outcome = std::thread::scope(|sc| {
        sc.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if stop.load(Ordering::Relaxed) {
                    own.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let r = crate::run(&plan, own.clone(), |_| {});
        done.store(true, Ordering::Relaxed);
        r
    })?;
    let r = outcome.to_result(&spec.url, config);
    let q = &r.requests;
    let mut s = SearchStep {
        target: rate,
        trial,
        achieved: if rate.is_some() {
            r.rate.achieved
        } else {
            r.rate.completed_per_s
        },
        p50_ms: r.latency_ms.corrected.p50,
        p99_ms: r.latency_ms.corrected.p99,
        error_ratio: if q.intended == 0 {
            0.0
        } else {
            q.failed as f64 / q.intended as f64
        },
        lag_p99_ms: r.generator.lag_p99_ms,
        missed: Vec::new(),
        generator_cpu: generator_share(r.generator.cpu_s, &spec, r.duration_s, plan.threads),
    };
    judge(&mut s, &p.bounds, r.generator.overloaded);
    Ok((s, r))
}

/// The share of `threads` cores that `cpu_s` of generator CPU is over a step's
/// wall time (its warm-up and measured window; the drain after it is short).
fn generator_share(cpu_s: f64, spec: &LoadSpec, window_s: f64, threads: usize) -> Option<f64> {
    let wall = spec.warmup.as_secs_f64() + window_s;
    (wall > 0.0 && threads > 0).then(|| (cpu_s / wall / threads as f64).min(1.0))
}

/// Runs a whole search: the closed-loop probe, then the bisection, each step handed
/// to `on_step` as it ends. Interrupted (`stop`), it returns the steps so far marked
/// partial, with no maximum.
///
/// # Errors
/// [`SearchError`]: a step could not run, or the probe got no response at all.
pub fn run_search(
    p: &SearchPlan,
    stop: &Arc<AtomicBool>,
    mut on_step: impl FnMut(&SearchStep),
) -> Result<SearchResult, SearchError> {
    let mut out = SearchResult {
        schema: SEARCH_SCHEMA.into(),
        target: p.spec.url.clone(),
        connections: p.spec.connections,
        bounds: p.bounds.clone(),
        ..SearchResult::default()
    };
    let (probe, r) = step(p, None, 1, stop)?;
    warn(&mut out, &r);
    on_step(&probe);
    out.ceiling = probe.achieved;
    out.steps.push(probe);
    if out.ceiling < 1.0 && !stop.load(Ordering::Relaxed) {
        let why = r
            .errors
            .first
            .values()
            .next()
            .cloned()
            .unwrap_or_else(|| "no response".into());
        out.failed = Some(format!("the closed-loop probe got no response: {why}"));
        return Err(SearchError::NoCeiling {
            rate: out.ceiling,
            url: p.spec.url.clone(),
            why,
            result: Box::new(out),
        });
    }
    let mut b = Bisection::new(out.ceiling, p.precision);
    while let Some(rate) = b.next_rate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut trials = Vec::new();
        for t in 1..=p.trials.max(1) {
            // Let the last step's connections close and the server settle.
            std::thread::sleep(Duration::from_millis(300));
            let (s, r) = step(p, Some(rate), t, stop)?;
            warn(&mut out, &r);
            on_step(&s);
            trials.push(s);
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if stop.load(Ordering::Relaxed) {
            out.steps.extend(trials);
            break;
        }
        b.record(rate, verdict(&trials));
        out.steps.extend(trials);
    }
    out.partial = stop.load(Ordering::Relaxed);
    if !out.partial {
        out.max_rate = b.max_rate();
    }
    out.generator_limit = b.generator_limit();
    Ok(out)
}

/// Keeps a step's warnings in the search's, each once (a refused CPU pin is refused
/// at every step).
fn warn(out: &mut SearchResult, r: &results::RunResult) {
    for w in &r.warnings {
        if !out.warnings.contains(w) {
            out.warnings.push(w.clone());
        }
    }
}

/// Fills `step.missed` with every bound it broke.
pub fn judge(step: &mut SearchStep, bounds: &SearchBounds, generator_overloaded: bool) {
    step.missed.clear();
    let Some(target) = step.target else {
        return;
    };
    if generator_overloaded {
        step.missed.push(Miss::Generator);
    }
    if step.achieved < target * bounds.min_achieved {
        step.missed.push(Miss::Rate);
    }
    // No response at all is no p99 at all: that is not under any bound.
    if step.p99_ms.is_none_or(|p| p > bounds.p99_ms) {
        step.missed.push(Miss::P99);
    }
    if step.error_ratio > bounds.error_ratio {
        step.missed.push(Miss::Errors);
    }
}

/// What the trials of one rate add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    /// A trial's generator fell behind: the rate is not judged.
    Generator,
}

/// The trials of one rate: the generator's failure in any of them voids the rate;
/// otherwise it passes when more than half of the trials passed (one noisy trial in
/// three does not move the maximum).
pub fn verdict(trials: &[SearchStep]) -> Verdict {
    if trials.iter().any(|t| t.missed.contains(&Miss::Generator)) {
        return Verdict::Generator;
    }
    let passed = trials.iter().filter(|t| t.passed()).count();
    if !trials.is_empty() && passed * 2 > trials.len() {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}

/// The bisection over constant rates, in whole requests per second.
#[derive(Clone, Debug)]
pub struct Bisection {
    /// The highest rate that passed.
    lo: Option<f64>,
    /// The lowest rate that failed, or the highest tried before any did.
    hi: f64,
    /// Whether any rate failed yet (until then the search goes up).
    failed: bool,
    /// How far up it may go: twice the probe's rate.
    cap: f64,
    /// Stop once `hi - lo` is at most this (req/s).
    precision: f64,
    next: Option<f64>,
    generator_limit: Option<f64>,
}

impl Bisection {
    /// A search below `ceiling` (the closed-loop probe's rate), to within
    /// `precision` of it (0.02: 2 %, and never finer than 1 request per second).
    pub fn new(ceiling: f64, precision: f64) -> Self {
        let top = ceiling.round().max(1.0);
        Bisection {
            lo: None,
            hi: top,
            failed: false,
            cap: top * 2.0,
            precision: (ceiling * precision).max(1.0),
            next: Some(top),
            generator_limit: None,
        }
    }

    /// The rate to try next; `None` when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        self.next
    }

    /// Records how `rate` went and decides the next one.
    pub fn record(&mut self, rate: f64, v: Verdict) {
        match v {
            Verdict::Pass => self.lo = Some(self.lo.map_or(rate, |l| l.max(rate))),
            Verdict::Fail | Verdict::Generator => {
                self.hi = if self.failed { self.hi.min(rate) } else { rate };
                self.failed = true;
            }
        }
        if !self.failed {
            // Everything so far passed: up by a quarter, up to the cap.
            let up = (rate * 1.25).round().min(self.cap);
            self.hi = up;
            self.next = (up > rate).then_some(up);
            return;
        }
        if v == Verdict::Generator {
            self.generator_limit = Some(self.generator_limit.map_or(rate, |g| g.min(rate)));
        }
        let lo = self.lo.unwrap_or(0.0);
        self.next = if self.hi - lo <= self.precision || lo >= self.hi {
            None
        } else {
            let mid = ((lo + self.hi) / 2.0).round();
            // Rounding may land on an end already judged: then it is as close as
            // whole requests per second get.
            (mid > lo && mid < self.hi).then_some(mid)
        };
    }

    /// The highest rate that passed.
    pub fn max_rate(&self) -> Option<f64> {
        self.lo
    }

    /// The lowest rate the generator could not hold, if any.
    pub fn generator_limit(&self) -> Option<f64> {
        self.generator_limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> SearchBounds {
        SearchBounds {
            p99_ms: 10.0,
            error_ratio: 0.001,
            min_achieved: 0.99,
        }
    }

    fn step(target: f64, achieved: f64, p99: Option<f64>, errors: f64) -> SearchStep {
        SearchStep {
            target: Some(target),
            trial: 1,
            achieved,
            p50_ms: p99.map(|p| p / 2.0),
            p99_ms: p99,
            error_ratio: errors,
            lag_p99_ms: 0.05,
            missed: Vec::new(),
            generator_cpu: None,
        }
    }

    #[test]
    fn a_step_names_every_bound_it_broke() {
        let b = bounds();
        let mut s = step(1000.0, 1000.0, Some(3.0), 0.0);
        judge(&mut s, &b, false);
        assert!(s.passed());
        let mut s = step(1000.0, 900.0, Some(30.0), 0.01);
        judge(&mut s, &b, false);
        assert_eq!(s.missed, [Miss::Rate, Miss::P99, Miss::Errors]);
        let mut s = step(1000.0, 1000.0, None, 0.0);
        judge(&mut s, &b, false);
        assert_eq!(s.missed, [Miss::P99], "no response is no p99");
        let mut s = step(1000.0, 1000.0, Some(3.0), 0.0);
        judge(&mut s, &b, true);
        assert_eq!(s.missed, [Miss::Generator]);
        // The probe is never judged.
        let mut s = step(1.0, 0.0, None, 1.0);
        s.target = None;
        judge(&mut s, &b, true);
        assert!(s.passed());
    }

    #[test]
    fn trials_pass_by_majority_and_the_generator_voids_them() {
        let b = bounds();
        let mut ok = step(100.0, 100.0, Some(1.0), 0.0);
        judge(&mut ok, &b, false);
        let mut bad = step(100.0, 100.0, Some(50.0), 0.0);
        judge(&mut bad, &b, false);
        let mut late = ok.clone();
        judge(&mut late, &b, true);
        assert_eq!(
            verdict(&[ok.clone(), bad.clone(), ok.clone()]),
            Verdict::Pass
        );
        assert_eq!(verdict(&[ok.clone(), bad.clone()]), Verdict::Fail);
        assert_eq!(verdict(&[ok.clone(), late, ok]), Verdict::Generator);
        assert_eq!(verdict(&[]), Verdict::Fail);
    }

    /// A server that holds everything up to a known rate: the bisection finds it to
    /// within the precision, trying the ceiling first and halving after.
    fn search(ceiling: f64, truth: f64, generator_max: f64) -> (Bisection, Vec<f64>) {
        let mut b = Bisection::new(ceiling, 0.02);
        let mut tried = Vec::new();
        while let Some(r) = b.next_rate() {
            tried.push(r);
            assert!(tried.len() < 50, "no end: {tried:?}");
            let v = if r > generator_max {
                Verdict::Generator
            } else if r <= truth {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            b.record(r, v);
        }
        (b, tried)
    }

    #[test]
    fn the_bisection_finds_a_known_ceiling_to_within_the_precision() {
        let (b, tried) = search(1000.0, 730.0, f64::INFINITY);
        assert_eq!(tried[..3], [1000.0, 500.0, 750.0]);
        let max = b.max_rate().unwrap();
        assert!((710.0..=730.0).contains(&max), "{max} ({tried:?})");
        assert!(tried.len() <= 8, "{tried:?}");
        assert_eq!(b.generator_limit(), None);

        // Everything passes: up by a quarter at a time, to twice the probe.
        let (b, tried) = search(1000.0, 5000.0, f64::INFINITY);
        assert_eq!(tried, [1000.0, 1250.0, 1563.0, 1954.0, 2000.0]);
        assert_eq!(b.max_rate(), Some(2000.0));

        // The probe underestimated: the search goes above it, then bisects.
        let (b, tried) = search(1000.0, 1100.0, f64::INFINITY);
        assert_eq!(tried[..2], [1000.0, 1250.0]);
        let max = b.max_rate().unwrap();
        assert!((1080.0..=1100.0).contains(&max), "{max} ({tried:?})");

        // Nothing passes: no maximum, and the search still ends.
        let (b, tried) = search(1000.0, 0.0, f64::INFINITY);
        assert_eq!(b.max_rate(), None);
        assert!(tried.last().unwrap() <= &20.0, "{tried:?}");
    }

    #[test]
    fn a_generator_that_falls_behind_caps_the_search_and_is_named() {
        let (b, _) = search(1000.0, 900.0, 600.0);
        let max = b.max_rate().unwrap();
        assert!((580.0..=600.0).contains(&max), "{max}");
        let g = b.generator_limit().unwrap();
        assert!(g > 600.0 && g - max <= 20.0, "{g} vs {max}");
    }

    #[test]
    fn tiny_ceilings_search_in_whole_requests() {
        let (b, tried) = search(3.0, 2.0, f64::INFINITY);
        assert_eq!(tried[0], 3.0);
        assert_eq!(b.max_rate(), Some(2.0), "{tried:?}");
        assert!(tried.iter().all(|r| r.fract() == 0.0), "{tried:?}");
    }
}
