//! The `--max-regression` gate a CI pipeline relies on: the spec grammar
//! (`p99=10%`, `max=1s`, `errors.timeout=5`, `propagation=200ms`), its parsing with
//! one-line errors naming the spec, and the check of a comparison against the specs.
//!
//! When both runs were repeated, a limit is crossed only when the median moved past
//! it *and* the rank test says the move is unlikely to be noise: a gate that fails on
//! run-to-run noise gets switched off. Over the limit but not significant is still
//! reported, and does not fail.

use super::model::{fmt_p, Comparison, Tested, LATENCY_METRICS};
use crate::fmt::{fmt_count, Units};
use results::ErrorKind;

/// What a threshold limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Corrected latency: an index into [`LATENCY_METRICS`].
    Latency(usize),
    /// Errors: of one kind, or in total.
    Errors(Option<ErrorKind>),
    /// Median endpoint propagation: of added backends, removed ones, or both.
    Propagation(Option<Direction>),
    /// Route propagation: until the first response showing each route change.
    RoutePropagation,
    /// Behaviour probes' differences (`run --fail-on` only: the count is of one
    /// run's systems against its baseline).
    ProbeDiffs,
    /// Long-lived sessions that ended before the run did (`run --fail-on` only):
    /// every one (`sessions_cut`), or only those that ended with no close frame
    /// (`sessions_broken`: `true`).
    Sessions { broken: bool },
}

/// Which way a backend's propagation went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Added,
    Removed,
}

/// How much worse the new run may be than the base.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// At most this many percent above the base.
    Percent(f64),
    /// At most this many milliseconds above the base.
    Ms(f64),
    /// At most this many more (errors).
    Count(u64),
}

/// One `--max-regression` spec, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// The spec as written, for messages.
    pub spec: String,
    pub metric: Metric,
    pub limit: Limit,
}

/// A spec that cannot be parsed: names the spec and says what is accepted.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("--max-regression '{spec}': {reason}")]
pub struct SpecError {
    pub spec: String,
    pub reason: String,
}

const METRICS_HELP: &str = "use p50, p75, p90, p99, p99.9, p99.99, p99.999, p99.9999, max, errors, errors.KIND, propagation, propagation.added, propagation.removed, route_propagation, or (run --fail-on) probe_diffs, sessions_cut or sessions_broken";

/// The metric a threshold names (`p99`, `errors.timeout`, `route_propagation`...), as
/// `--max-regression` and `run --fail-on` both read it.
///
/// # Errors
/// What is wrong with the name, and what is accepted.
pub fn parse_metric(name: &str) -> Result<Metric, String> {
    let name = name.trim().to_ascii_lowercase();
    Ok(
        if let Some(i) = LATENCY_METRICS.iter().position(|m| *m == name) {
            Metric::Latency(i)
        } else if name == "errors" {
            Metric::Errors(None)
        } else if let Some(k) = name.strip_prefix("errors.") {
            match ErrorKind::ALL.iter().find(|e| e.name() == k) {
                Some(e) => Metric::Errors(Some(*e)),
                None => {
                    let kinds: Vec<&str> = ErrorKind::ALL.iter().map(|e| e.name()).collect();
                    return Err(format!(
                        "unknown error kind '{k}': use one of {}",
                        kinds.join(", ")
                    ));
                }
            }
        } else if name == "propagation" {
            Metric::Propagation(None)
        } else if name == "propagation.added" {
            Metric::Propagation(Some(Direction::Added))
        } else if name == "propagation.removed" {
            Metric::Propagation(Some(Direction::Removed))
        } else if name == "route_propagation" {
            Metric::RoutePropagation
        } else if name == "probe_diffs" {
            Metric::ProbeDiffs
        } else if name == "sessions_cut" {
            Metric::Sessions { broken: false }
        } else if name == "sessions_broken" {
            Metric::Sessions { broken: true }
        } else {
            return Err(format!("unknown metric '{name}': {METRICS_HELP}"));
        },
    )
}

/// Parses specs as given to `--max-regression` (each may hold several, comma-separated).
///
/// # Errors
/// The first spec that is not `METRIC=LIMIT`.
pub fn parse_thresholds<S: AsRef<str>>(specs: &[S]) -> Result<Vec<Threshold>, SpecError> {
    specs
        .iter()
        .flat_map(|s| s.as_ref().split(','))
        .map(parse_threshold)
        .collect()
}

/// Parses one spec: `p99=10%`, `p99.99=50ms`, `max=1s`, `errors=0`,
/// `errors.timeout=5`, `propagation=200ms`.
///
/// Latency and propagation take a percentage of the base or a duration with its unit
/// (a bare number is refused: milliseconds or seconds would be a guess); errors take
/// a count or a percentage. Every limit is an increase over the base.
///
/// # Errors
/// [`SpecError`] naming the spec.
pub fn parse_threshold(spec: &str) -> Result<Threshold, SpecError> {
    let err = |reason: &str| SpecError {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let t = spec.trim();
    if t.is_empty() {
        return Err(err("empty: use METRIC=LIMIT, e.g. p99=10%"));
    }
    let Some((name, value)) = t.split_once('=') else {
        return Err(err("not METRIC=LIMIT, e.g. p99=10% or errors=0"));
    };
    let value = value.trim();
    let metric = parse_metric(name).map_err(|e| err(&e))?;
    if metric == Metric::ProbeDiffs {
        return Err(err(
            "probe_diffs is a limit on one run (its systems against its baseline): use run --fail-on 'probe_diffs>0'",
        ));
    }
    if let Metric::Sessions { .. } = metric {
        return Err(err(
            "sessions_cut and sessions_broken are limits on one run: use run --fail-on 'sessions_cut[reload]>0'",
        ));
    }
    let limit = if let Some(p) = value.strip_suffix('%') {
        match p.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Limit::Percent(x),
            _ => return Err(err("not a percentage: use e.g. 10%")),
        }
    } else if let Metric::Errors(_) = metric {
        match value.parse::<u64>() {
            Ok(n) => Limit::Count(n),
            Err(_) => return Err(err(
                "errors take a count of additional errors (e.g. 0, 5) or a percentage (e.g. 10%)",
            )),
        }
    } else if value.is_empty() || value.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(err(
            "a latency limit needs a unit: a percentage (10%) or a duration (50ms, 1s)",
        ));
    } else {
        match results::duration::parse(value) {
            Ok(dur) => Limit::Ms(dur.as_secs_f64() * 1000.0),
            Err(e) => return Err(err(&e)),
        }
    };
    Ok(Threshold {
        spec: t.to_string(),
        metric,
        limit,
    })
}

/// A threshold the new run went over: crossed, or (with repetitions) over the limit
/// but not significant, see [`Crossing::fails`].
#[derive(Clone, Debug, PartialEq)]
pub struct Crossing {
    /// The new run's label.
    pub run: String,
    pub system: String,
    /// The metric's name: `p99`, `errors.timeout`, `propagation.added`...
    pub metric: String,
    /// Base and new values as displayed (`12.00ms`, `3`).
    pub base: String,
    pub new: String,
    /// The limit as displayed, e.g. `+10% (13.20ms)` or `+50.00ms (62.00ms)`.
    pub limit: String,
    /// The spec that set it (every spec, for a run that failed).
    pub spec: String,
    /// Why no limit can hold, when a run failed: then `base`, `new` and `limit`
    /// are empty.
    pub why: Option<String>,
    /// The repetitions' rank test, when both runs were repeated: then `base` and
    /// `new` are medians.
    pub test: Option<Tested>,
}

impl Crossing {
    /// Whether it fails the gate: always without repetitions; with them, when the
    /// difference is significant, or when the repetitions are too few for any
    /// difference to be (then the gate judges the medians alone rather than never
    /// failing, and the line says why).
    pub fn fails(&self) -> bool {
        self.test.is_none_or(|t| t.significant() || !t.testable())
    }

    /// One line naming system, metric, base, new and limit (or why nothing holds),
    /// and with repetitions the test's verdict: `REGRESSION: ...` when it fails the
    /// gate, `NOT SIGNIFICANT: ...` when it does not.
    pub fn line(&self) -> String {
        if let Some(why) = &self.why {
            return format!(
                "REGRESSION: {}: {why} (--max-regression {})",
                self.system, self.spec
            );
        }
        let head = if self.fails() {
            "REGRESSION"
        } else {
            "NOT SIGNIFICANT"
        };
        let mut change = String::new();
        let mut test = String::new();
        if let Some(t) = &self.test {
            if t.base.median != 0.0 {
                let pct = (t.new.median - t.base.median) / t.base.median * 100.0;
                change = format!(" {pct:+.1}%");
            }
            let reps = format!("medians of {} vs {} repetitions", t.base.n, t.new.n);
            test = if !t.testable() {
                format!("; {reps}, too few to test ({})", t.verdict())
            } else if t.significant() {
                format!("; {reps}, significant, p={}", fmt_p(t.p))
            } else {
                format!("; {reps}, not significant, p={}", fmt_p(t.p))
            };
        }
        format!(
            "{head}: {}: {}{change}: base {}, new {}, limit {}{test} (--max-regression {})",
            self.system, self.metric, self.base, self.new, self.limit, self.spec
        )
    }
}

/// The largest value `new` may take under `limit`, and the limit as displayed.
fn allowed(base: f64, limit: Limit, fmt: &dyn Fn(f64) -> String) -> (f64, String) {
    match limit {
        Limit::Percent(p) => {
            let a = base * (1.0 + p / 100.0);
            (a, format!("+{p}% ({})", fmt(a)))
        }
        Limit::Ms(ms) => (base + ms, format!("+{} ({})", fmt(ms), fmt(base + ms))),
        Limit::Count(n) => (base + n as f64, format!("+{n} ({})", fmt(base + n as f64))),
    }
}

/// The thresholds `cmp`'s new run crosses, the ones that fail the gate
/// ([`evaluate_all`] without those over the limit but not significant).
///
/// A run that failed ([`results::RunResult::failure`]: no response, or most requests
/// failed) crosses every gate at once, on either side: its latency describes no
/// working system, so a new run that lost every request must not pass as faster, and a
/// failed base leaves nothing to hold the new run to. Otherwise a limit holds when
/// `new <= allowed`: equal is not a regression. A propagation median that the base
/// has and the new run lacks (no backend propagated) crosses; one the base lacks
/// cannot be judged and is skipped.
pub fn evaluate(cmp: &Comparison, thresholds: &[Threshold]) -> Vec<Crossing> {
    evaluate_in(cmp, thresholds, Units::Terminal)
}

/// [`evaluate`], with the latencies of the crossings written in `u`.
pub fn evaluate_in(cmp: &Comparison, thresholds: &[Threshold], u: Units) -> Vec<Crossing> {
    let mut all = evaluate_all_in(cmp, thresholds, u);
    all.retain(Crossing::fails);
    all
}

/// Every threshold `cmp`'s new run goes over: first the systems where either run
/// failed, then in threshold then system order. With repetitions on both sides the
/// values are medians and each carries its test; those over the limit but not
/// significant are kept, for the output to say so ([`Crossing::fails`] is false).
pub fn evaluate_all(cmp: &Comparison, thresholds: &[Threshold]) -> Vec<Crossing> {
    evaluate_all_in(cmp, thresholds, Units::Terminal)
}

/// [`evaluate_all`], with the latencies written in `u`.
pub fn evaluate_all_in(cmp: &Comparison, thresholds: &[Threshold], u: Units) -> Vec<Crossing> {
    let fmt_ms = |v: f64| u.ms(v);
    let mut out = Vec::new();
    if thresholds.is_empty() {
        return out;
    }
    let specs: Vec<&str> = thresholds.iter().map(|t| t.spec.as_str()).collect();
    let mut judged = Vec::new();
    for s in &cmp.systems {
        let why = match (&s.base_failed, &s.new_failed) {
            (_, Some(n)) => format!("the new run failed, no limit can hold: {n}"),
            (Some(b), None) => {
                format!("the base run failed, there is nothing to hold the new run to: {b}")
            }
            (None, None) => {
                judged.push(s);
                continue;
            }
        };
        out.push(Crossing {
            run: cmp.new.clone(),
            system: s.system.clone(),
            metric: "responses".to_string(),
            base: String::new(),
            new: String::new(),
            limit: String::new(),
            spec: specs.join(","),
            why: Some(why),
            test: None,
        });
    }
    for t in thresholds {
        for s in &judged {
            let mut cross =
                |metric: &str, base: String, new: String, limit: String, test: Option<Tested>| {
                    out.push(Crossing {
                        run: cmp.new.clone(),
                        system: s.system.clone(),
                        metric: metric.to_string(),
                        base,
                        new,
                        limit,
                        spec: t.spec.clone(),
                        why: None,
                        test,
                    });
                };
            match t.metric {
                Metric::Latency(i) => {
                    // Neither run failed, so both have responses, hence latencies.
                    let (Some(b), Some(n)) = (s.latency[i].base, s.latency[i].new) else {
                        continue;
                    };
                    let (a, lim) = allowed(b, t.limit, &fmt_ms);
                    if n > a {
                        let test = s.latency[i].test;
                        cross(LATENCY_METRICS[i], fmt_ms(b), fmt_ms(n), lim, test);
                    }
                }
                Metric::Errors(kind) => {
                    let (name, v) = match kind {
                        Some(k) => (format!("errors.{}", k.name()), s.errors[k.index()]),
                        None => ("errors".to_string(), s.errors_total),
                    };
                    let (a, lim) = allowed(v.base, t.limit, &fmt_count);
                    if v.new > a {
                        cross(&name, fmt_count(v.base), fmt_count(v.new), lim, v.test);
                    }
                }
                Metric::RoutePropagation => {
                    let Some(b) = s.route_seen_median.base else {
                        continue;
                    };
                    let (a, lim) = allowed(b, t.limit, &fmt_ms);
                    match s.route_seen_median.new {
                        Some(n) if n <= a => {}
                        n => cross(
                            "route_propagation median",
                            fmt_ms(b),
                            n.map_or_else(|| "none seen".to_string(), fmt_ms),
                            lim,
                            n.and(s.route_seen_median.test),
                        ),
                    }
                }
                // Refused by parse_threshold.
                Metric::ProbeDiffs | Metric::Sessions { .. } => {}
                Metric::Propagation(dir) => {
                    let sides = [
                        (Direction::Added, "propagation.added", s.added_median),
                        (Direction::Removed, "propagation.removed", s.removed_median),
                    ];
                    for (dn, name, v) in sides {
                        if dir.is_some_and(|x| x != dn) {
                            continue;
                        }
                        let Some(b) = v.base else { continue };
                        let (a, lim) = allowed(b, t.limit, &fmt_ms);
                        match v.new {
                            Some(n) if n <= a => {}
                            Some(n) => {
                                cross(&format!("{name} median"), fmt_ms(b), fmt_ms(n), lim, v.test)
                            }
                            None => cross(
                                &format!("{name} median"),
                                fmt_ms(b),
                                "none measured".to_string(),
                                lim,
                                None,
                            ),
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fixtures::{lab, repeated, result, run, th, SAME_A, SAME_B};
    use crate::compare::model::{compare, compare_at};

    #[test]
    fn specs_parse() {
        assert_eq!(th("p99=10%").metric, Metric::Latency(3));
        assert_eq!(th("p99=10%").limit, Limit::Percent(10.0));
        assert_eq!(th("p99.99=50ms").metric, Metric::Latency(5));
        assert_eq!(th("p99.99=50ms").limit, Limit::Ms(50.0));
        assert_eq!(th("max=1s").limit, Limit::Ms(1000.0));
        assert_eq!(th("max=1s").metric, Metric::Latency(8));
        assert_eq!(th("errors=0").metric, Metric::Errors(None));
        assert_eq!(th("errors=0").limit, Limit::Count(0));
        assert_eq!(
            th("errors.timeout=5").metric,
            Metric::Errors(Some(ErrorKind::Timeout))
        );
        assert_eq!(th("errors.connect_timeout=1").limit, Limit::Count(1));
        assert_eq!(th("errors=5%").limit, Limit::Percent(5.0));
        assert_eq!(th("propagation=200ms").metric, Metric::Propagation(None));
        assert_eq!(
            th("propagation.removed=1.5s").metric,
            Metric::Propagation(Some(Direction::Removed))
        );
        assert_eq!(th(" P99 = 10% ").spec, "P99 = 10%");
        let all = parse_thresholds(&["p99=10%,errors=0", "max=1s"]).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1].spec, "errors=0");
    }

    #[test]
    fn bad_specs_name_themselves() {
        for (s, why) in [
            ("p99", "METRIC=LIMIT"),
            ("", "empty"),
            ("p98=10%", "unknown metric 'p98'"),
            ("p99=10", "needs a unit"),
            ("p99=ten%", "percentage"),
            ("p99=-5%", "percentage"),
            ("p99=10xs", "not a duration"),
            ("errors=5ms", "count"),
            ("errors=-1", "count"),
            ("errors.boom=1", "unknown error kind 'boom'"),
            ("propagation=", "needs a unit"),
        ] {
            let e = parse_threshold(s).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("--max-regression '{s}': ")),
                "{msg}"
            );
            assert!(msg.contains(why), "{s}: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        let e = parse_thresholds(&["p99=10%,nope=1"]).unwrap_err();
        assert_eq!(e.spec, "nope=1");
    }

    #[test]
    fn thresholds_cross_or_hold() {
        let b = run("A", vec![lab(result(10.0, 100.0, 1), "nginx", &[100.0])]);
        let n = run("B", vec![lab(result(11.5, 1200.0, 4), "nginx", &[450.0])]);
        let c = compare(&b, &n);
        let names = |specs: &[&str]| -> Vec<String> {
            evaluate(&c, &parse_thresholds(specs).unwrap())
                .into_iter()
                .map(|x| x.metric)
                .collect()
        };
        assert_eq!(names(&["p99=10%"]), ["p99"]);
        assert!(names(&["p99=15%"]).is_empty(), "equal is not a regression");
        assert!(names(&["p99=2ms"]).is_empty());
        assert_eq!(names(&["p99=1ms"]), ["p99"]);
        assert_eq!(names(&["max=1s"]), ["max"]);
        assert!(names(&["max=1.1s"]).is_empty());
        assert_eq!(names(&["errors=0"]), ["errors"]);
        assert!(names(&["errors=3"]).is_empty());
        assert_eq!(names(&["errors.timeout=2"]), ["errors.timeout"]);
        assert!(names(&["errors.connect=0"]).is_empty());
        assert_eq!(names(&["propagation=200ms"]), ["propagation.added median"]);
        assert!(names(&["propagation=350ms"]).is_empty());
        assert!(names(&["propagation.removed=0ms"]).is_empty(), "no base");
        let x = &evaluate(&c, &[th("p99=10%")])[0];
        assert_eq!(
            (x.system.as_str(), x.base.as_str(), x.new.as_str()),
            ("nginx", "10.00ms", "11.50ms")
        );
        assert_eq!(x.limit, "+10% (11.00ms)");
        assert_eq!(
            x.line(),
            "REGRESSION: nginx: p99: base 10.00ms, new 11.50ms, limit +10% (11.00ms) (--max-regression p99=10%)"
        );
        let e = &evaluate(&c, &[th("errors.timeout=2")])[0];
        assert_eq!((e.base.as_str(), e.new.as_str()), ("1", "4"));
        assert_eq!(e.limit, "+2 (3)");
        let lost = run("C", vec![lab(result(10.0, 100.0, 1), "nginx", &[])]);
        let c2 = compare(&b, &lost);
        let p = evaluate(&c2, &[th("propagation=1s")]);
        assert_eq!(p[0].new, "none measured");
    }

    /// A result that received no response: every request refused.
    fn dead() -> results::RunResult {
        let mut r = result(0.0, 0.0, 0);
        r.latency_ms.corrected = Default::default();
        r.requests.completed = 0;
        r.requests.failed = r.requests.intended;
        r.errors.connect = r.requests.intended;
        r
    }

    #[test]
    fn a_failed_run_crosses_every_gate() {
        let base = run("base", vec![result(10.0, 100.0, 0)]);
        let c = compare(&base, &run("dead", vec![dead()]));
        let x = evaluate(&c, &parse_thresholds(&["p99=10%,max=1s"]).unwrap());
        assert_eq!(x.len(), 1, "{x:?}");
        assert_eq!(
            x[0].line(),
            "REGRESSION: load: the new run failed, no limit can hold: no response was received: 1500 of 1500 intended requests failed (connect 1500) (--max-regression p99=10%,max=1s)"
        );
        // No gate, no crossing; but the comparison still says what happened.
        assert!(evaluate(&c, &[]).is_empty());
        assert!(c.warnings[0].starts_with("new load: no response was received"));
        // A failed base is no baseline either.
        let c = compare(&run("dead", vec![dead()]), &base);
        let x = evaluate(&c, &[th("p99=10%")]);
        assert!(x[0].line().contains("the base run failed"), "{x:?}");
        // Most requests failing is failing, even with a low p99 on the rest.
        let mut most = result(1.0, 2.0, 800);
        most.errors.timeout = 800;
        let c = compare(&base, &run("most", vec![most]));
        let x = evaluate(&c, &[th("p99=10%")]);
        assert!(
            x[0].line().contains("most requests failed: 800 of 1500"),
            "{x:?}"
        );
    }

    #[test]
    fn repetitions_of_the_same_server_do_not_cross() {
        let c = compare(
            &run("A", vec![repeated(&SAME_A)]),
            &run("B", vec![repeated(&SAME_B)]),
        );
        // The medians are 10.10 and 10.30 ms, 2% apart: over a 1% limit, but noise.
        let ths = [th("p99=1%")];
        assert!(evaluate(&c, &ths).is_empty());
        let all = evaluate_all(&c, &ths);
        assert_eq!(all.len(), 1, "{all:?}");
        assert!(!all[0].fails());
        assert_eq!(
            all[0].line(),
            "NOT SIGNIFICANT: load: p99 +2.0%: base 10.10ms, new 10.30ms, limit +1% (10.20ms); medians of 5 vs 5 repetitions, not significant, p=0.69 (--max-regression p99=1%)"
        );
        // Within the limit: nothing to say.
        assert!(evaluate_all(&c, &[th("p99=5%")]).is_empty());
    }

    #[test]
    fn a_2x_slower_server_crosses_with_its_p_value() {
        let slow: Vec<f64> = SAME_A.iter().map(|x| x * 2.0).collect();
        let c = compare(
            &run("A", vec![repeated(&SAME_A)]),
            &run("B", vec![repeated(&slow)]),
        );
        let x = evaluate(&c, &[th("p99=10%")]);
        assert_eq!(x.len(), 1, "{x:?}");
        assert!(x[0].fails());
        assert_eq!(
            x[0].line(),
            "REGRESSION: load: p99 +100.0%: base 10.10ms, new 20.20ms, limit +10% (11.11ms); medians of 5 vs 5 repetitions, significant, p=0.0079 (--max-regression p99=10%)"
        );
        // A limit the medians stay under holds, significant or not.
        assert!(evaluate_all(&c, &[th("p99=150%")]).is_empty());
        // At a level 5 a side cannot reach, the medians alone judge, and the line
        // says how many it would take.
        let strict = compare_at(
            &run("A", vec![repeated(&SAME_A)]),
            &run("B", vec![repeated(&slow)]),
            0.005,
        );
        let x = evaluate(&strict, &[th("p99=10%")]);
        assert_eq!(x.len(), 1, "{x:?}");
        assert!(
            x[0].line()
                .contains("too few to test (needs 6+ repetitions per side)"),
            "{}",
            x[0].line()
        );
    }

    #[test]
    fn too_few_repetitions_judge_the_medians_and_say_so() {
        // 3 a side can never reach p < 0.05: the gate falls back to the medians
        // rather than never failing.
        let slow: Vec<f64> = SAME_A.iter().map(|x| x * 2.0).collect();
        let c = compare(
            &run("A", vec![repeated(&SAME_A[..3])]),
            &run("B", vec![repeated(&slow[..3])]),
        );
        let x = evaluate(&c, &[th("p99=10%")]);
        assert_eq!(x.len(), 1, "{x:?}");
        assert!(
            x[0].line().ends_with("medians of 3 vs 3 repetitions, too few to test (needs 4+ repetitions per side) (--max-regression p99=10%)"),
            "{}",
            x[0].line()
        );
    }

    #[test]
    fn error_counts_are_tested_too() {
        let side = |errors: &[u64]| {
            let mut r = result(10.0, 20.0, 0);
            r.repetitions = errors.iter().map(|&e| result(10.0, 20.0, e)).collect();
            r
        };
        // Medians 0 and 1: one more error, over errors=0, but within the noise.
        let c = compare(
            &run("A", vec![side(&[0, 1, 0, 2, 0])]),
            &run("B", vec![side(&[1, 0, 0, 1, 2])]),
        );
        let ths = [th("errors=0")];
        assert!(evaluate(&c, &ths).is_empty());
        let all = evaluate_all(&c, &ths);
        assert_eq!(all[0].metric, "errors");
        assert!(all[0].line().starts_with("NOT SIGNIFICANT: load: errors: base 0, new 1, limit +0 (0); medians of 5 vs 5 repetitions, not significant, p="), "{}", all[0].line());
        // Errors in every new repetition and none in the base: significant.
        let c = compare(
            &run("A", vec![side(&[0, 0, 0, 0, 0])]),
            &run("B", vec![side(&[3, 5, 2, 4, 6])]),
        );
        let x = evaluate(&c, &ths);
        assert_eq!(x.len(), 1, "{x:?}");
        assert!(
            x[0].line().contains("significant, p=0.0"),
            "{}",
            x[0].line()
        );
    }
}
