//! A repeated run (`--repeat N`): every repetition kept whole, and the figures of all
//! of them together on top.
//!
//! One run against one run cannot tell a regression from the machine's noise; the
//! spread between repetitions can. So the repetitions are kept as they were measured
//! (a comparison ranks them), and the top-level figures pool every request of every
//! repetition, as if it had been one longer run: histograms are added (percentiles of
//! parts cannot be averaged), counts summed, and the timelines laid end to end.

use crate::merge::{merge_errors, sum_connections, sum_maps, sum_requests, sum_tls, Pooled};
use crate::{Rate, RunResult, Samples, StepResult};
use std::collections::BTreeMap;

/// The repetitions as one result with each kept in `repetitions`; one repetition is
/// returned as it is (a run of one is not a repeated run). Fewer repetitions than the
/// `asked` for (an interrupt) make the result partial, even if each that ran was
/// whole.
///
/// # Errors
/// A repetition's histogram that cannot be decoded.
pub fn combine(mut reps: Vec<RunResult>, asked: usize) -> Result<RunResult, String> {
    let short = reps.len() < asked;
    if reps.len() <= 1 {
        if let Some(r) = reps.first_mut() {
            r.partial |= short;
        }
        return reps
            .pop()
            .ok_or_else(|| "no repetition to combine".to_string());
    }
    for r in &mut reps {
        r.repetitions.clear();
    }
    // A request mix: each repetition's groups added (a repetition without one ran
    // another load, which `--repeat` never does).
    let mixes: Vec<&crate::MixResult> = reps.iter().filter_map(|r| r.mix.as_ref()).collect();
    let mix = if mixes.len() == reps.len() {
        Some(crate::mix::merge(&mixes, false).map_err(|e| format!("request mix: {e}"))?)
    } else {
        None
    };
    let mut pooled = Pooled::new();
    for (i, r) in reps.iter().enumerate() {
        pooled
            .add(r)
            .map_err(|(what, e)| format!("repetition {}: {what} histogram: {e}", i + 1))?;
    }
    let all: Vec<&RunResult> = reps.iter().collect();
    let first = &reps[0];
    let sum = |f: &dyn Fn(&RunResult) -> u64| reps.iter().map(f).sum::<u64>();
    let duration_s: f64 = reps.iter().map(|r| r.duration_s).sum();
    // Each repetition's rate times its window is what it sent (or completed).
    let per_s = |f: &dyn Fn(&RunResult) -> f64| {
        if duration_s > 0.0 {
            reps.iter().map(|r| f(r) * r.duration_s).sum::<f64>() / duration_s
        } else {
            0.0
        }
    };
    let lag_p = pooled.lag_percentiles(|| first.latency_ms.generator_lag.clone());
    let [histogram, histogram_uncorrected, histogram_lag] = pooled.encoded();
    let mut out = RunResult {
        schema: first.schema.clone(),
        partial: short || reps.iter().any(|r| r.partial),
        target: first.target.clone(),
        config: first.config.clone(),
        started_at: first.started_at.clone(),
        duration_s,
        rate: Rate {
            target: first.rate.target,
            achieved: per_s(&|r| r.rate.achieved),
            completed_per_s: per_s(&|r| r.rate.completed_per_s),
            reached: reps.iter().all(|r| r.rate.reached),
            shortfall: reps.iter().fold(Default::default(), |mut s, r| {
                s.add(&r.rate.shortfall);
                s
            }),
        },
        requests: sum_requests(&all),
        errors: merge_errors(&all),
        connections: sum_connections(&all),
        latency_ms: pooled.latency(lag_p.clone()),
        timeline: end_to_end(&reps),
        backends: sum_maps(reps.iter().map(|r| &r.backends)),
        backends_seen: seen_end_to_end(&reps),
        bytes_read: sum(&|r| r.bytes_read),
        tls: sum_tls(&all),
        generator: crate::Generator {
            overloaded: reps.iter().any(|r| r.generator.overloaded),
            woke_late: reps.iter().any(|r| r.generator.woke_late),
            lag_p99_ms: lag_p.p99.unwrap_or(0.0),
            cpu_s: reps.iter().map(|r| r.generator.cpu_s).sum(),
            sleeps: reps.iter().map(|r| r.generator.sleeps).sum(),
            cause: crate::LagCause::worst(reps.iter().map(|r| r.generator.cause)),
            machine: reps.iter().fold(None, |m, r| {
                crate::MachineTime::merge(m.as_ref(), r.generator.machine.as_ref())
            }),
            ..first.generator.clone()
        },
        histogram,
        histogram_uncorrected,
        histogram_lag,
        generators: None,
        // What is bound to one system's deployment (its events, windows and
        // propagation) is the first repetition's, whose time is also the start of
        // the pooled timeline; every repetition's own is in `repetitions`.
        lab: first.lab.clone(),
        mix,
        windows_part: Vec::new(),
        samples: samples_end_to_end(&reps),
        // A repeated run is of requests; sessions are not repeated.
        sessions: None,
        machine: first.machine.clone(),
        ingressbench_version: first.ingressbench_version.clone(),
        steps: steps_pooled(&reps),
        repetitions: Vec::new(),
        warnings: warnings_of(&reps),
    };
    out.config.duration_s = duration_s;
    out.repetitions = reps;
    Ok(out)
}

/// Every repetition's warnings, each once: a CPU pin refused is refused at every
/// repetition, and what one left behind names its own namespace.
fn warnings_of(reps: &[RunResult]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in reps.iter().flat_map(|r| &r.warnings) {
        if !out.contains(w) {
            out.push(w.clone());
        }
    }
    out
}

/// Where each repetition starts on the pooled timeline, in seconds.
fn offsets(reps: &[RunResult]) -> Vec<u64> {
    let mut at = 0;
    reps.iter()
        .map(|r| {
            let o = at;
            at += r.timeline.last().map_or(0, |e| e.t + 1);
            o
        })
        .collect()
}

fn end_to_end(reps: &[RunResult]) -> Vec<crate::TimelineEntry> {
    reps.iter()
        .zip(offsets(reps))
        .flat_map(|(r, o)| {
            r.timeline.iter().map(move |e| crate::TimelineEntry {
                t: e.t + o,
                ..e.clone()
            })
        })
        .collect()
}

fn seen_end_to_end(reps: &[RunResult]) -> BTreeMap<String, [f64; 2]> {
    let mut seen: BTreeMap<String, [f64; 2]> = BTreeMap::new();
    for (r, o) in reps.iter().zip(offsets(reps)) {
        let ms = o as f64 * 1000.0;
        for (id, [a, b]) in &r.backends_seen {
            let e = seen.entry(id.clone()).or_insert([a + ms, b + ms]);
            e[0] = e[0].min(a + ms);
            e[1] = e[1].max(b + ms);
        }
    }
    seen
}

fn samples_end_to_end(reps: &[RunResult]) -> Option<Samples> {
    let mut out: Option<Samples> = None;
    for (r, o) in reps.iter().zip(offsets(reps)) {
        let Some(s) = &r.samples else { continue };
        let into = out.get_or_insert_with(|| Samples {
            fraction: s.fraction,
            ..Default::default()
        });
        let ms = o as f64 * 1000.0;
        into.t_ms.extend(s.t_ms.iter().map(|t| t + ms));
        into.latency_ms.extend(&s.latency_ms);
        into.status.extend(&s.status);
        into.error.extend(&s.error);
        into.error_kinds.clone_from(&s.error_kinds);
        // Backend indices point into each repetition's own id list: re-index.
        for b in &s.backend {
            let id = usize::try_from(*b).ok().and_then(|i| s.backend_ids.get(i));
            let at = id.map_or(-1, |id| {
                let p = into.backend_ids.iter().position(|x| x == id);
                p.unwrap_or_else(|| {
                    into.backend_ids.push(id.clone());
                    into.backend_ids.len() - 1
                }) as i32
            });
            into.backend.push(at);
        }
    }
    out
}

/// Each plan step over every repetition: counts summed, rates over the summed
/// windows, and each latency percentile the median of the repetitions' (a step
/// keeps no histogram to pool).
fn steps_pooled(reps: &[RunResult]) -> Vec<StepResult> {
    let n = reps.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    (0..n)
        .map(|i| {
            let of: Vec<&StepResult> = reps.iter().filter_map(|r| r.steps.get(i)).collect();
            let mut st = of[0].clone();
            let secs: f64 = of.iter().map(|s| s.duration_s).sum();
            let add = |f: fn(&StepResult) -> u64| of.iter().map(|s| f(s)).sum::<u64>();
            st.intended = add(|s| s.intended);
            st.sent = add(|s| s.sent);
            st.completed = add(|s| s.completed);
            st.failed = add(|s| s.failed);
            st.errors_by_kind = sum_maps(of.iter().map(|s| &s.errors_by_kind));
            st.offered = if secs > 0.0 {
                st.intended as f64 / secs
            } else {
                0.0
            };
            st.achieved = if secs > 0.0 {
                st.sent.min(st.intended) as f64 / secs
            } else {
                0.0
            };
            st.reached = of.iter().all(|s| s.reached);
            st.overloaded = of.iter().any(|s| s.overloaded);
            st.lag_p99_ms = median(of.iter().map(|s| s.lag_p99_ms).collect());
            let p = |f: &dyn Fn(&crate::Percentiles) -> Option<f64>| {
                let v: Vec<f64> = of.iter().filter_map(|s| f(&s.latency_ms)).collect();
                (!v.is_empty()).then(|| median(v))
            };
            st.latency_ms = crate::Percentiles {
                max: of.iter().filter_map(|s| s.latency_ms.max).reduce(f64::max),
                mean: p(&|x| x.mean),
                stdev: p(&|x| x.stdev),
                count: of.iter().map(|s| s.latency_ms.count).sum(),
                ..crate::Percentiles::from_quantiles(|i| p(&|x| x.values()[i]))
            };
            st
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{encode_base64, latency_histogram};
    use crate::{Requests, TimelineEntry};

    fn rep(latencies_us: &[u64], seconds: u64, p99_step: f64) -> RunResult {
        let mut h = latency_histogram();
        for v in latencies_us {
            h.record(*v).unwrap();
        }
        let n = latencies_us.len() as u64;
        RunResult {
            schema: crate::RESULT_SCHEMA.into(),
            duration_s: seconds as f64,
            histogram: encode_base64(&h),
            histogram_uncorrected: encode_base64(&h),
            requests: Requests {
                intended: n,
                sent: n,
                completed: n,
                ..Default::default()
            },
            rate: Rate {
                target: Some(n as f64 / seconds as f64),
                achieved: n as f64 / seconds as f64,
                reached: true,
                ..Default::default()
            },
            timeline: (0..seconds)
                .map(|t| TimelineEntry {
                    t,
                    sent: n / seconds,
                    ..Default::default()
                })
                .collect(),
            backends: [("a".to_string(), n)].into(),
            steps: vec![StepResult {
                intended: n,
                sent: n,
                completed: n,
                duration_s: seconds as f64,
                latency_ms: crate::Percentiles {
                    p99: Some(p99_step),
                    count: n,
                    ..Default::default()
                },
                reached: true,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn repetitions_pool_their_requests_and_keep_each_whole() {
        let a = rep(&[1000; 100], 2, 1.0);
        let b = rep(&[9000; 100], 3, 3.0);
        let c = rep(&[2000; 100], 2, 2.0);
        let all = combine(vec![a.clone(), b.clone(), c.clone()], 3).unwrap();
        assert_eq!(all.repetitions, vec![a, b, c]);
        assert_eq!(all.requests.completed, 300);
        assert_eq!(all.duration_s, 7.0);
        assert_eq!(all.config.duration_s, 7.0);
        assert!((all.rate.achieved - 300.0 / 7.0).abs() < 1e-9);
        // Pooled, not averaged: a third of all requests took 9 ms.
        let p = &all.latency_ms.corrected;
        assert_eq!(p.count, 300);
        assert!((p.p50.unwrap() - 2.0).abs() < 0.01, "{p:?}");
        assert!((p.p99.unwrap() - 9.0).abs() < 0.01, "{p:?}");
        // Timelines end to end: 2 + 3 + 2 seconds.
        let ts: Vec<u64> = all.timeline.iter().map(|e| e.t).collect();
        assert_eq!(ts, (0..7).collect::<Vec<_>>());
        assert_eq!(all.backends["a"], 300);
        // A step over the repetitions: counts add, latency is the median.
        assert_eq!(all.steps[0].intended, 300);
        assert_eq!(all.steps[0].latency_ms.p99, Some(2.0));
        assert_eq!(all.steps[0].latency_ms.count, 300);
    }

    /// A warning every repetition has (a CPU pin refused) is said once; one of a
    /// single repetition is kept too.
    #[test]
    fn each_warning_of_the_repetitions_is_kept_once() {
        let mut a = rep(&[1000; 10], 1, 1.0);
        let mut b = rep(&[1000; 10], 1, 1.0);
        a.warnings = vec!["pin refused".into()];
        b.warnings = vec!["pin refused".into(), "namespace left".into()];
        let all = combine(vec![a, b], 2).unwrap();
        assert_eq!(all.warnings, ["pin refused", "namespace left"]);
    }

    #[test]
    fn one_repetition_is_a_plain_run() {
        let a = rep(&[1000; 10], 1, 1.0);
        assert_eq!(combine(vec![a.clone()], 1).unwrap(), a);
        assert!(combine(Vec::new(), 1).is_err());
        // Stopped after the first of three: partial, though that one was whole.
        assert!(combine(vec![a.clone()], 3).unwrap().partial);
        assert!(combine(vec![a.clone(), a.clone()], 3).unwrap().partial);
        let mut bad = a.clone();
        bad.histogram = "not base64".into();
        let e = combine(vec![a, bad], 2).unwrap_err();
        assert!(e.starts_with("repetition 2: corrected histogram"), "{e}");
    }
}
