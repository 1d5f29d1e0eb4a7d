//! `run --fail-on`: absolute limits on each system's own result, so a platform team
//! can put "this controller upgrade drops no request and shows a route change within
//! a second" into CI without a base run to compare with.
//!
//! The metrics are those of `compare --max-regression` ([`parse_metric`]), written
//! `METRIC>LIMIT` (or `METRIC=LIMIT`): latency and propagation take a duration with
//! its unit, errors a count. Endpoint and route propagation are judged by their worst
//! case (the max over the run's changes), since one slow change is the outage a gate
//! exists for; a route change never seen in traffic, or an added backend that never
//! answered, crosses any limit.

use crate::compare::{parse_metric, Direction, Metric, LATENCY_METRICS};
use crate::fmt::fmt_opt_ms;
use results::RunResult;

/// The kinds of change a gate can be limited to (`errors[restart]>0`): the step
/// names of scenarios, as the change windows of a result are named.
pub const STEP_KINDS: &[&str] = &[
    "scale",
    "route",
    "route_set",
    "reload",
    "restart",
    "rotate",
    "drain",
];

/// One `--fail-on` spec, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    /// As written, for messages.
    pub spec: String,
    pub metric: Metric,
    /// `METRIC[KIND]`: judged on the windows of that kind of change only (their
    /// errors, their worst p99 or max), not on the whole run.
    pub step: Option<&'static str>,
    /// Milliseconds for latency and propagation, a count for errors.
    pub limit: f64,
}

/// A spec that cannot be parsed.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("--fail-on '{spec}': {reason}")]
pub struct GateError {
    pub spec: String,
    pub reason: String,
}

/// Parses `--fail-on` specs (each may hold several, comma-separated).
///
/// # Errors
/// The first spec that is not `METRIC>LIMIT` with a known metric and a limit of the
/// metric's kind.
pub fn parse_gates<S: AsRef<str>>(specs: &[S]) -> Result<Vec<Gate>, GateError> {
    specs
        .iter()
        .flat_map(|s| s.as_ref().split(','))
        .map(parse_gate)
        .collect()
}

fn parse_gate(spec: &str) -> Result<Gate, GateError> {
    let t = spec.trim();
    let err = |reason: String| GateError {
        spec: t.to_string(),
        reason,
    };
    let Some((name, value)) = t.split_once('>').or_else(|| t.split_once('=')) else {
        return Err(err(
            "not METRIC>LIMIT, e.g. errors>0, p99>50ms or route_propagation>1s".into(),
        ));
    };
    let (name, step) = match name
        .trim()
        .strip_suffix(']')
        .and_then(|n| n.split_once('['))
    {
        Some((metric, kind)) => {
            let Some(k) = STEP_KINDS.iter().find(|k| **k == kind.trim()) else {
                return Err(err(format!(
                    "unknown kind of change '{}': use one of {}",
                    kind.trim(),
                    STEP_KINDS.join(", ")
                )));
            };
            (metric, Some(*k))
        }
        None => (name, None),
    };
    let metric = parse_metric(name).map_err(err)?;
    if step.is_some()
        && !matches!(metric, Metric::Errors(None) | Metric::Sessions { .. })
        && !matches!(metric, Metric::Latency(i) if LATENCY_METRICS[i] == "p99" || i == 8)
    {
        return Err(err(
            "a kind of change takes errors, p99, max, sessions_cut or sessions_broken (what each change window holds), e.g. errors[restart]>0".into(),
        ));
    }
    let value = value.trim();
    let limit = match metric {
        Metric::ProbeDiffs => value
            .parse::<u64>()
            .map(|n| n as f64)
            .map_err(|_| err("probe_diffs takes a count, e.g. probe_diffs>0".into()))?,
        Metric::Errors(_) => value
            .parse::<u64>()
            .map(|n| n as f64)
            .map_err(|_| err("errors take a count, e.g. errors>0".into()))?,
        Metric::Sessions { .. } => value.parse::<u64>().map(|n| n as f64).map_err(|_| {
            err("sessions_cut and sessions_broken take a count, e.g. sessions_cut>0".into())
        })?,
        _ if value.ends_with('%') => {
            return Err(err(
                "a percentage needs a base run: use compare --max-regression, or give a time, e.g. 50ms".into(),
            ))
        }
        _ if value.is_empty() || value.chars().all(|c| c.is_ascii_digit() || c == '.') => {
            return Err(err("a time limit needs a unit, e.g. 50ms or 1s".into()))
        }
        _ => results::duration::parse(value)
            .map_err(err)?
            .as_secs_f64()
            * 1000.0,
    };
    Ok(Gate {
        spec: t.to_string(),
        metric,
        step,
        limit,
    })
}

/// Every gate each result crosses, one line each: `FAIL: system: what (--fail-on spec)`.
/// A run that failed (no response, or most requests failed) crosses every gate.
pub fn check(results: &[RunResult], gates: &[Gate]) -> Vec<String> {
    let mut out = Vec::new();
    if gates.is_empty() {
        return out;
    }
    for r in results {
        let system = r.lab.as_ref().map_or("load", |l| l.system.as_str());
        if let Some(why) = r.failure() {
            let specs: Vec<&str> = gates.iter().map(|g| g.spec.as_str()).collect();
            out.push(format!(
                "FAIL: {system}: the run failed, no limit can hold: {why} (--fail-on {})",
                specs.join(",")
            ));
            continue;
        }
        for g in gates {
            if let Some(what) = crossed(r, g) {
                out.push(format!("FAIL: {system}: {what} (--fail-on {})", g.spec));
            }
        }
    }
    out
}

/// What the windows of `kind`'s changes show beyond `g`'s limit: errors added up
/// over them, latency at its worst. A run without such a change passes.
fn crossed_in_windows(r: &RunResult, g: &Gate, kind: &str) -> Option<String> {
    let windows: Vec<_> = r
        .lab
        .as_ref()?
        .windows
        .iter()
        .filter(|w| w.kind() == kind)
        .collect();
    if windows.is_empty() {
        return None;
    }
    // A change of this kind that failed crosses any limit on it, whatever the
    // traffic showed.
    let lab = r.lab.as_ref()?;
    if let Some(e) = lab.events.iter().find(|e| {
        e.kind == results::EventKind::ChangeFailed
            && windows
                .iter()
                .any(|w| e.t_ms >= w.from_ms && e.t_ms < w.until_ms.max(w.from_ms + 1e-9))
    }) {
        return Some(format!(
            "a {kind} step failed at {:.1} s: {}",
            e.t_ms / 1000.0,
            e.detail
        ));
    }
    match g.metric {
        Metric::Errors(_) => {
            let n: u64 = windows.iter().flat_map(|w| w.errors.values()).sum();
            (n as f64 > g.limit).then(|| {
                format!(
                    "errors[{kind}] {n} > {} (in {} change window{})",
                    g.limit,
                    windows.len(),
                    if windows.len() == 1 { "" } else { "s" }
                )
            })
        }
        Metric::Sessions { broken } => {
            if r.sessions.is_none() {
                return Some(no_sessions(broken));
            }
            let n: u64 = windows
                .iter()
                .filter_map(|w| w.sessions.as_ref())
                .map(|s| if broken { s.broken() } else { s.cut() })
                .sum();
            (n as f64 > g.limit).then(|| {
                format!(
                    "{}[{kind}] {n} > {} (in {} change window{})",
                    sessions_name(broken),
                    g.limit,
                    windows.len(),
                    if windows.len() == 1 { "" } else { "s" }
                )
            })
        }
        Metric::Latency(i) => {
            let (name, v) = if i == 8 {
                ("max", windows.iter().map(|w| w.max_ms).fold(0.0, f64::max))
            } else {
                ("p99", windows.iter().map(|w| w.p99_ms).fold(0.0, f64::max))
            };
            (v > g.limit).then(|| {
                format!(
                    "{name}[{kind}] {} > {}",
                    fmt_opt_ms(Some(v)),
                    fmt_opt_ms(Some(g.limit))
                )
            })
        }
        _ => None,
    }
}

/// What `r` shows beyond `g`'s limit, if anything.
fn crossed(r: &RunResult, g: &Gate) -> Option<String> {
    if let Some(kind) = g.step {
        return crossed_in_windows(r, g, kind);
    }
    let ms = |v: f64| fmt_opt_ms(Some(v));
    let over =
        |name: &str, v: f64| (v > g.limit).then(|| format!("{name} {} > {}", ms(v), ms(g.limit)));
    match g.metric {
        Metric::Latency(i) => {
            let p = &r.latency_ms.corrected;
            let v = if i == 8 { p.max } else { p.values()[i] };
            over(LATENCY_METRICS[i], v?)
        }
        Metric::Errors(kind) => {
            let (name, n) = match kind {
                Some(k) => (format!("errors.{}", k.name()), r.errors.get(k)),
                None => ("errors".to_string(), r.errors.total()),
            };
            (n as f64 > g.limit).then(|| format!("{name} {n} > {}", g.limit))
        }
        Metric::Propagation(dir) => {
            let p = &r.lab.as_ref()?.propagation;
            let mut worst: Vec<String> = Vec::new();
            for (d, name, entries) in [
                (Direction::Added, "propagation.added", &p.added),
                (Direction::Removed, "propagation.removed", &p.removed),
            ] {
                if dir.is_some_and(|x| x != d) {
                    continue;
                }
                if let Some(e) = entries
                    .iter()
                    .find(|e| e.propagation_ms.is_none() && d == Direction::Added)
                {
                    worst.push(format!("{name}: {} never answered", e.backend));
                } else if let Some(m) = entries
                    .iter()
                    .filter_map(|e| e.propagation_ms)
                    .reduce(f64::max)
                {
                    worst.extend(over(&format!("{name} max"), m));
                }
            }
            (!worst.is_empty()).then(|| worst.join("; "))
        }
        Metric::ProbeDiffs => {
            let Some(p) = r.lab.as_ref().and_then(|l| l.probes.as_ref()) else {
                return Some(
                    "probe_diffs: the run sent no probes (add probes: to the scenario)".into(),
                );
            };
            let n = p.diffs();
            (n as f64 > g.limit).then(|| {
                format!(
                    "probe_diffs {n} > {} ({} from {}, {} changed during the load, {} expectations not met)",
                    g.limit,
                    p.differences.len(),
                    p.baseline,
                    n - p.differences.len() - p.unmet.len(),
                    p.unmet.len()
                )
            })
        }
        Metric::Sessions { broken } => {
            let Some(s) = &r.sessions else {
                return Some(no_sessions(broken));
            };
            let n = if broken { s.broken() } else { s.cut() };
            (n as f64 > g.limit).then(|| {
                format!(
                    "{} {n} > {} ({})",
                    sessions_name(broken),
                    g.limit,
                    crate::text::ends_line(s)
                )
            })
        }
        Metric::RoutePropagation => {
            let p = r.lab.as_ref()?.route_propagation.as_ref()?;
            if let Some(c) = p.changes.iter().find(|c| c.seen_ms.is_none()) {
                return Some(format!(
                    "route_propagation: the change to {} at {:.1} s was never seen in traffic",
                    c.route,
                    c.at_ms / 1000.0
                ));
            }
            over("route_propagation max", p.seen_ms.max?)
        }
    }
}

fn sessions_name(broken: bool) -> &'static str {
    if broken {
        "sessions_broken"
    } else {
        "sessions_cut"
    }
}

/// A limit on sessions for a run that held none: the scenario lacks them.
fn no_sessions(broken: bool) -> String {
    format!(
        "{}: the run held no sessions (add sessions: to the scenario)",
        sessions_name(broken)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{LabInfo, PropagationEntry, RouteChange, RoutePropagation};

    fn ok_run() -> RunResult {
        let mut r = RunResult::default();
        r.requests.intended = 100;
        r.requests.sent = 100;
        r.requests.completed = 100;
        r.latency_ms.corrected.p99 = Some(20.0);
        r.latency_ms.corrected.max = Some(80.0);
        let mut lab = LabInfo {
            system: "envoy-xds".into(),
            ..Default::default()
        };
        lab.propagation.added.push(PropagationEntry {
            backend: "b3".into(),
            at_ms: 1.0,
            propagation_ms: Some(300.0),
            errors_between: 0,
        });
        lab.route_propagation = Some(RoutePropagation::of(vec![RouteChange {
            route: "cors".into(),
            at_ms: 2000.0,
            seen_ms: Some(700.0),
            ..Default::default()
        }]));
        r.lab = Some(lab);
        r
    }

    fn gates(s: &str) -> Vec<Gate> {
        parse_gates(&[s]).unwrap()
    }

    #[test]
    fn a_run_within_its_limits_passes_and_one_beyond_fails_naming_each() {
        let r = ok_run();
        let all = gates("errors>0,p99>50ms,route_propagation>1s,propagation.added>500ms");
        assert!(check(std::slice::from_ref(&r), &all).is_empty());
        let tight = gates("p99>10ms,max>1s,route_propagation>500ms,propagation>250ms");
        let fails = check(std::slice::from_ref(&r), &tight);
        assert_eq!(fails.len(), 3, "{fails:?}");
        assert!(
            fails[0].starts_with("FAIL: envoy-xds: p99 20.00ms > 10.00ms (--fail-on p99>10ms)"),
            "{fails:?}"
        );
        assert!(
            fails[1].contains("route_propagation max 700.00ms > 500.00ms"),
            "{fails:?}"
        );
        assert!(
            fails[2].contains("propagation.added max 300.00ms > 250.00ms"),
            "{fails:?}"
        );
        let mut errs = r.clone();
        errs.errors.timeout = 2;
        errs.requests.completed = 98;
        errs.requests.failed = 2;
        assert_eq!(
            check(&[errs], &gates("errors.timeout>1")),
            ["FAIL: envoy-xds: errors.timeout 2 > 1 (--fail-on errors.timeout>1)"]
        );
    }

    #[test]
    fn never_seen_and_failed_runs_cross_every_limit() {
        let mut r = ok_run();
        let lab = r.lab.as_mut().unwrap();
        lab.route_propagation = Some(RoutePropagation::of(vec![RouteChange {
            route: "rewrite".into(),
            at_ms: 3000.0,
            seen_ms: None,
            ..Default::default()
        }]));
        lab.propagation.added[0].propagation_ms = None;
        let f = check(&[r], &gates("route_propagation>1h,propagation.added>1h"));
        assert!(
            f[0].contains("the change to rewrite at 3.0 s was never seen"),
            "{f:?}"
        );
        assert!(f[1].contains("b3 never answered"), "{f:?}");
        let dead = RunResult {
            lab: ok_run().lab,
            ..Default::default()
        };
        let f = check(&[dead], &gates("p99>1s,errors>0"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("the run failed") && f[0].ends_with("(--fail-on p99>1s,errors>0)"));
    }

    #[test]
    fn a_kind_of_change_is_judged_on_its_own_windows() {
        let mut r = ok_run();
        let lab = r.lab.as_mut().unwrap();
        let w = |change: &str, errors: u64, p99: f64| results::EventWindow {
            change: change.into(),
            errors: if errors > 0 {
                [("connect".to_string(), errors)].into()
            } else {
                Default::default()
            },
            p99_ms: p99,
            max_ms: p99 * 2.0,
            ..Default::default()
        };
        lab.windows = vec![
            w("scale 3 -> 5", 7, 900.0),
            w("restart proxy (hot restart, seamless)", 0, 4.0),
            w("rotate certificate 1a -> 2b", 2, 30.0),
            w("rotate certificate 2b -> 3c", 1, 80.0),
        ];
        lab.windows[1].from_ms = 1000.0;
        lab.windows[1].until_ms = 2000.0;
        r.errors.connect = 10;
        // The scale's errors and latency are not the restart's.
        assert!(check(
            std::slice::from_ref(&r),
            &gates("errors[restart]>0,p99[restart]>10ms")
        )
        .is_empty());
        let f = check(
            std::slice::from_ref(&r),
            &gates("errors[rotate]>2,max[rotate]>100ms,errors[drain]>0"),
        );
        assert_eq!(
            f,
            [
                "FAIL: envoy-xds: errors[rotate] 3 > 2 (in 2 change windows) (--fail-on errors[rotate]>2)",
                "FAIL: envoy-xds: max[rotate] 160.00ms > 100.00ms (--fail-on max[rotate]>100ms)",
            ]
        );
        // A restart that failed crosses the limit, errors or not.
        let mut failed = r.clone();
        failed.lab.as_mut().unwrap().events.push(results::Event {
            t_ms: 1500.0,
            kind: results::EventKind::ChangeFailed,
            detail: "proxy (stop and start): nginx-reload is not running".into(),
            took_ms: None,
        });
        assert_eq!(
            check(&[failed], &gates("errors[restart]>5")),
            ["FAIL: envoy-xds: a restart step failed at 1.5 s: proxy (stop and start): nginx-reload is not running (--fail-on errors[restart]>5)"]
        );
    }

    #[test]
    fn probe_differences_changes_and_unmet_expectations_add_up_against_the_limit() {
        use results::probes::{Difference, ProbeRound, ProbeRun, Unmet};
        let mut r = ok_run();
        let g = gates("probe_diffs>1");
        let f = check(std::slice::from_ref(&r), &g);
        assert_eq!(
            f,
            ["FAIL: envoy-xds: probe_diffs: the run sent no probes (add probes: to the scenario) (--fail-on probe_diffs>1)"]
        );
        let d = || Difference {
            probe: "plain".into(),
            field: "status".into(),
            baseline: "200".into(),
            system: "503".into(),
        };
        r.lab.as_mut().unwrap().probes = Some(ProbeRun {
            baseline: "nginx-reload".into(),
            differences: vec![d()],
            ..ProbeRun::default()
        });
        assert!(check(std::slice::from_ref(&r), &g).is_empty());
        let p = r.lab.as_mut().unwrap().probes.as_mut().unwrap();
        p.rounds.push(ProbeRound {
            after: "reload".into(),
            changed: vec![d()],
            ..ProbeRound::default()
        });
        p.unmet.push(Unmet {
            probe: "plain".into(),
            round: "end".into(),
            field: "status".into(),
            expected: "200".into(),
            got: "503".into(),
        });
        let f = check(std::slice::from_ref(&r), &g);
        assert_eq!(
            f,
            ["FAIL: envoy-xds: probe_diffs 3 > 1 (1 from nginx-reload, 1 changed during the load, 1 expectations not met) (--fail-on probe_diffs>1)"]
        );
        assert!(gates("probe_diffs>0").len() == 1);
        let e = parse_gates(&["probe_diffs>1s"]).unwrap_err().to_string();
        assert!(e.contains("probe_diffs takes a count"), "{e}");
        let e = crate::compare::parse_thresholds(&["probe_diffs=0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("use run --fail-on 'probe_diffs>0'"), "{e}");
    }

    #[test]
    fn bad_specs_are_one_line_naming_the_spec() {
        for (spec, want) in [
            ("p99", "not METRIC>LIMIT"),
            ("p98>1s", "unknown metric 'p98'"),
            ("p99>50", "needs a unit"),
            ("p99>10%", "a percentage needs a base"),
            ("errors>x", "errors take a count"),
            ("errors.oops>0", "unknown error kind 'oops'"),
            (
                "errors[restrat]>0",
                "unknown kind of change 'restrat': use one of scale,",
            ),
            (
                "p50[restart]>1s",
                "a kind of change takes errors, p99, max, sessions_cut or sessions_broken",
            ),
            (
                "errors.tls[rotate]>0",
                "a kind of change takes errors, p99, max, sessions_cut or sessions_broken",
            ),
        ] {
            let e = parse_gates(&[spec]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--fail-on '{spec}': ")), "{e}");
            assert!(e.contains(want), "{spec}: {e}");
        }
        assert_eq!(gates("errors=0")[0].limit, 0.0);
        assert_eq!(gates("max>2s")[0].limit, 2000.0);
    }

    #[test]
    fn sessions_cut_is_judged_by_kind_of_change_and_a_run_without_sessions_fails_it() {
        use results::sessions::{SessionWindow, Sessions};
        let mut r = ok_run();
        let ends = |pairs: &[(&str, u64)]| {
            pairs
                .iter()
                .map(|(k, n)| (k.to_string(), *n))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let lab = r.lab.as_mut().unwrap();
        lab.windows = vec![
            results::EventWindow {
                change: "reload".into(),
                sessions: Some(SessionWindow {
                    ends: ends(&[("eof", 40), ("close 1001", 10)]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            results::EventWindow {
                change: "scale 2 -> 3".into(),
                sessions: Some(SessionWindow::default()),
                ..Default::default()
            },
        ];
        let none = check(std::slice::from_ref(&r), &gates("sessions_cut>0"));
        assert!(none[0].contains("the run held no sessions"), "{none:?}");
        r.sessions = Some(Sessions {
            ends: ends(&[("eof", 40), ("close 1001", 10)]),
            ..Default::default()
        });
        assert_eq!(
            check(std::slice::from_ref(&r), &gates("sessions_cut[reload]>0")),
            ["FAIL: envoy-xds: sessions_cut[reload] 50 > 0 (in 1 change window) (--fail-on sessions_cut[reload]>0)"]
        );
        assert_eq!(
            check(
                std::slice::from_ref(&r),
                &gates("sessions_broken[reload]>40")
            ),
            Vec::<String>::new()
        );
        assert!(check(std::slice::from_ref(&r), &gates("sessions_cut[scale]>0")).is_empty());
        let f = check(std::slice::from_ref(&r), &gates("sessions_broken>5"));
        assert_eq!(
            f,
            ["FAIL: envoy-xds: sessions_broken 40 > 5 (close 1001 x10, eof x40) (--fail-on sessions_broken>5)"]
        );
        assert!(parse_gates(&["sessions_cut>1s"])
            .unwrap_err()
            .reason
            .contains("take a count"));
    }
}
