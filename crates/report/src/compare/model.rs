//! What a comparison is: two runs loaded by system name, the deltas of every figure
//! between them, and whether they measured the same thing at all (scenario, load
//! settings, machine). Pure functions of result documents but [`load_run`], so the
//! deltas are tested on known numbers; thresholds and rendering build on this.
//!
//! When both sides of a system were repeated (`--repeat N`), every figure is read
//! from each repetition alone: a side's value is the median of its repetitions, and
//! the delta carries their range and a rank test ([`Tested`]), so a gate can tell a
//! change from run-to-run noise. Otherwise one value a side, untested.

use super::significance::{mann_whitney, repetitions_needed, smallest_p, summarize, Summary};
use crate::fmt::fmt_secs_only;
use crate::warnings::warnings;
use results::{ErrorKind, Percentiles, RunResult, Spread};
use std::collections::BTreeMap;
use std::path::Path;

/// The name of the only system of a single load result (`ingressbench load --json`).
pub const LOAD_SYSTEM: &str = "load";

/// One run as loaded for comparison: its results by system name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    /// How the user named it (the path given), for headings.
    pub label: String,
    /// Results by system name (`lab.system`, or [`LOAD_SYSTEM`]), sorted by name.
    pub systems: BTreeMap<String, RunResult>,
}

/// Why a path cannot be compared. Each message is one line naming the path.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not a run, unreadable, not a result, or another schema: the report's loader
    /// decides what a run is, for compare as for reports.
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    #[error("{path}: two results for system {system}")]
    Duplicate { path: String, system: String },
}

/// Loads a run: a lab run folder (subfolders holding `result.json`), a folder holding
/// `result.json`, or a `result.json` itself.
///
/// # Errors
/// [`LoadError`]: not a run (see [`crate::input::load`]), or two results
/// claiming the same system.
pub fn load_run(path: &Path) -> Result<Run, LoadError> {
    let label = path.display().to_string();
    let input = crate::input::load(&[path.to_path_buf()])?;
    let mut systems = BTreeMap::new();
    for s in input.series {
        let name = system_name(&s.result);
        if systems.insert(name.clone(), s.result).is_some() {
            return Err(LoadError::Duplicate {
                path: label,
                system: name,
            });
        }
    }
    Ok(Run { label, systems })
}

/// Parses a result document (see [`crate::input::parse_result`]).
///
/// # Errors
/// [`LoadError::Input`] for text that is not a v1 result.
pub fn parse_result(path: &str, bytes: &[u8]) -> Result<RunResult, LoadError> {
    let text = String::from_utf8_lossy(bytes);
    Ok(crate::input::parse_result(path, &text)?)
}

/// The name a result is matched by across runs.
pub fn system_name(r: &RunResult) -> String {
    r.lab
        .as_ref()
        .map(|l| l.system.clone())
        .unwrap_or_else(|| LOAD_SYSTEM.to_string())
}

/// The significance level a difference is tested at unless `--alpha` says otherwise.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// How a figure's repetitions on both sides compare: each side's median and range,
/// and the two-sided Mann–Whitney test of one against the other.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tested {
    pub base: Summary,
    pub new: Summary,
    /// The rank test's two-sided p-value.
    pub p: f64,
    /// The level `p` is judged at (`--alpha`), kept here so a delta reads alone.
    pub alpha: f64,
}

impl Tested {
    /// Whether the repetitions are enough for any difference to reach `alpha`: 3
    /// against 3 never go below p = 0.1, so at 0.05 they cannot show anything, and
    /// calling that "not significant" would hide that the test never had a chance.
    pub fn testable(&self) -> bool {
        smallest_p(self.base.n, self.new.n) < self.alpha
    }

    /// Whether the difference is unlikely to be noise: `p < alpha`.
    pub fn significant(&self) -> bool {
        self.testable() && self.p < self.alpha
    }

    /// The verdict as shown: `p=0.0079`, `not significant, p=0.31`, or
    /// `needs 4+ repetitions per side` when [`Tested::testable`] is false. Equal
    /// medians read `p=1.00` alone: there is no change to call noise.
    pub fn verdict(&self) -> String {
        if !self.testable() {
            format!(
                "needs {}+ repetitions per side",
                repetitions_needed(self.alpha)
            )
        } else if self.significant() || self.base.median == self.new.median {
            format!("p={}", fmt_p(self.p))
        } else {
            format!("not significant, p={}", fmt_p(self.p))
        }
    }
}

/// A p-value in as few digits as tell it from the usual levels: `0.31`, `0.029`,
/// `0.0079`, `<0.0001`.
pub fn fmt_p(p: f64) -> String {
    if p < 0.0001 {
        "<0.0001".to_string()
    } else if p < 0.01 {
        format!("{p:.4}")
    } else if p < 0.1 {
        format!("{p:.3}")
    } else {
        format!("{p:.2}")
    }
}

/// A figure in the base run and in the new one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Delta {
    /// The base run's value: the median of its repetitions when tested.
    pub base: f64,
    pub new: f64,
    /// The repetitions' ranges and rank test, when both sides were repeated.
    pub test: Option<Tested>,
}

impl Delta {
    /// `new - base`.
    pub fn abs(&self) -> f64 {
        self.new - self.base
    }

    /// The change in percent of `base`; `None` when `base` is zero.
    pub fn pct(&self) -> Option<f64> {
        (self.base != 0.0).then(|| (self.new - self.base) / self.base * 100.0)
    }
}

/// A figure that may be absent on either side (propagation when nothing changed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OptDelta {
    /// The base run's value: the median of the repetitions that have one, when
    /// both sides were repeated.
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// The repetitions' ranges and rank test, when at least two repetitions on each
    /// side have the figure.
    pub test: Option<Tested>,
}

impl OptDelta {
    /// Both values, when both sides have one.
    pub fn both(&self) -> Option<Delta> {
        Some(Delta {
            base: self.base?,
            new: self.new?,
            test: self.test,
        })
    }
}

/// The latency rows: the "nines" then max. Their labels are the threshold metric names.
pub const LATENCY_METRICS: [&str; 9] = [
    "p50", "p75", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max",
];

/// The deltas of one system between two runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemDelta {
    pub system: String,
    /// Corrected latency in ms, in the order of [`LATENCY_METRICS`]; `None` on a side
    /// that received no response.
    pub latency: [OptDelta; 9],
    /// Errors by kind, in the order of [`ErrorKind::ALL`].
    pub errors: [Delta; results::ErrorKind::COUNT],
    /// Responses per status code >= 400, over both runs' codes.
    pub status_codes: BTreeMap<String, Delta>,
    /// All errors of every kind.
    pub errors_total: Delta,
    /// Endpoint propagation in ms: median and max, for added and removed backends.
    pub added_median: OptDelta,
    pub added_max: OptDelta,
    pub removed_median: OptDelta,
    pub removed_max: OptDelta,
    /// Route propagation in ms: the median time until traffic showed a route change.
    pub route_seen_median: OptDelta,
    /// Long-lived sessions (`sessions:`, `load --websocket`, `--grpc-stream`):
    /// those that ended before the run did, those of them with no close frame or
    /// status, the messages lost, and the message latency's p99 and max in ms;
    /// `None` on a side that held none.
    pub sessions_cut: OptDelta,
    pub sessions_broken: OptDelta,
    pub sessions_lost: OptDelta,
    pub message_p99: OptDelta,
    pub message_max: OptDelta,
    /// Requests started per second.
    pub rate: Delta,
    /// How many repetitions each side had, when both were repeated and the figures
    /// above are their medians, tested; `None`: one value a side, untested.
    pub repetitions: Option<(usize, usize)>,
    /// Why the base run, or the new one, measured no working system
    /// ([`RunResult::failure`]): its latency is no evidence of anything.
    pub base_failed: Option<String>,
    pub new_failed: Option<String>,
}

/// Two runs side by side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    /// A one-line description of what the base run measured.
    pub setup: String,
    /// Systems in both runs, by name.
    pub systems: Vec<SystemDelta>,
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
    /// What differs between the runs so that their numbers do not measure the same
    /// thing (scenario, rate, connections, duration, TLS); empty when comparable.
    pub not_comparable: Vec<String>,
    /// Facts worth knowing that do not make the runs incomparable (versions).
    pub notes: Vec<String>,
    /// Why a result on either side is not to be trusted (partial, overloaded...).
    pub warnings: Vec<String>,
    /// The level differences are tested at (`--alpha`).
    pub alpha: f64,
    /// Which systems' deltas were not tested for significance, as one line, when
    /// either side of them had no repetitions; `None` when every system was tested.
    pub untested: Option<String>,
}

#[cfg(test)]
pub(crate) fn d(base: f64, new: f64) -> Delta {
    Delta {
        base,
        new,
        test: None,
    }
}

#[cfg(test)]
pub(crate) fn dc(base: u64, new: u64) -> Delta {
    d(base as f64, new as f64)
}

#[cfg(test)]
pub(crate) fn od(base: Option<f64>, new: Option<f64>) -> OptDelta {
    OptDelta {
        base,
        new,
        test: None,
    }
}

fn latency_values(p: &Percentiles) -> [Option<f64>; 9] {
    let v = p.values();
    [v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], p.max]
}

fn propagation(r: &RunResult) -> (Spread, Spread) {
    r.lab
        .as_ref()
        .map(|l| {
            (
                l.propagation.added_ms.clone(),
                l.propagation.removed_ms.clone(),
            )
        })
        .unwrap_or_default()
}

fn route_seen(r: &RunResult) -> Option<f64> {
    r.lab
        .as_ref()
        .and_then(|l| l.route_propagation.as_ref())
        .and_then(|p| p.seen_ms.median)
}

/// Every figure a comparison reads from one result (or one repetition).
#[derive(Clone, Debug, Default)]
struct Figures {
    latency: [Option<f64>; 9],
    errors: [f64; results::ErrorKind::COUNT],
    status_codes: BTreeMap<String, f64>,
    errors_total: f64,
    added_median: Option<f64>,
    added_max: Option<f64>,
    removed_median: Option<f64>,
    removed_max: Option<f64>,
    route_seen_median: Option<f64>,
    sessions_cut: Option<f64>,
    sessions_broken: Option<f64>,
    sessions_lost: Option<f64>,
    message_p99: Option<f64>,
    message_max: Option<f64>,
    rate: f64,
}

fn figures(r: &RunResult) -> Figures {
    let (added, removed) = propagation(r);
    Figures {
        latency: latency_values(&r.latency_ms.corrected),
        errors: std::array::from_fn(|i| r.errors.get(ErrorKind::ALL[i]) as f64),
        status_codes: r
            .errors
            .status_codes
            .iter()
            .map(|(k, v)| (k.clone(), *v as f64))
            .collect(),
        errors_total: r.errors.total() as f64,
        added_median: added.median,
        added_max: added.max,
        removed_median: removed.median,
        removed_max: removed.max,
        route_seen_median: route_seen(r),
        sessions_cut: r.sessions.as_ref().map(|s| s.cut() as f64),
        sessions_broken: r.sessions.as_ref().map(|s| s.broken() as f64),
        sessions_lost: r.sessions.as_ref().map(|s| s.messages.lost as f64),
        message_p99: r.sessions.as_ref().and_then(|s| s.latency_ms.p99),
        message_max: r.sessions.as_ref().and_then(|s| s.latency_ms.max),
        rate: r.rate.achieved,
    }
}

/// One figure over both sides' figure sets: the median of each side's values (the
/// value itself for one), tested when `alpha` is given and each side has two or more.
fn over(
    base: &[Figures],
    new: &[Figures],
    alpha: Option<f64>,
    get: impl Fn(&Figures) -> Option<f64>,
) -> OptDelta {
    let b: Vec<f64> = base.iter().filter_map(&get).collect();
    let n: Vec<f64> = new.iter().filter_map(&get).collect();
    let (sb, sn) = (summarize(&b), summarize(&n));
    let test = match (alpha, sb, sn) {
        (Some(alpha), Some(base), Some(new)) if base.n >= 2 && new.n >= 2 => mann_whitney(&b, &n)
            .map(|t| Tested {
                base,
                new,
                p: t.p,
                alpha,
            }),
        _ => None,
    };
    OptDelta {
        base: sb.map(|s| s.median),
        new: sn.map(|s| s.median),
        test,
    }
}

/// [`over`] for a figure every result has (counts, rate).
fn over_all(
    base: &[Figures],
    new: &[Figures],
    alpha: Option<f64>,
    get: impl Fn(&Figures) -> f64,
) -> Delta {
    let o = over(base, new, alpha, |f| Some(get(f)));
    Delta {
        base: o.base.unwrap_or(0.0),
        new: o.new.unwrap_or(0.0),
        test: o.test,
    }
}

/// Whether a result holds repetitions enough to be read one by one.
fn repeated(r: &RunResult) -> bool {
    r.repetitions.len() >= 2
}

/// The deltas of one system, untested ([`system_delta_at`] at the default alpha).
pub fn system_delta(system: &str, base: &RunResult, new: &RunResult) -> SystemDelta {
    system_delta_at(system, base, new, DEFAULT_ALPHA)
}

/// The deltas of one system. When both results hold repetitions (two or more each),
/// every figure is the median of the repetitions', with their ranges and a rank test
/// at `alpha`; otherwise the results' own figures, one a side, untested.
pub fn system_delta_at(system: &str, base: &RunResult, new: &RunResult, alpha: f64) -> SystemDelta {
    let tested = repeated(base) && repeated(new);
    let (bf, nf, alpha_if) = if tested {
        (
            base.repetitions.iter().map(figures).collect(),
            new.repetitions.iter().map(figures).collect(),
            Some(alpha),
        )
    } else {
        (vec![figures(base)], vec![figures(new)], None)
    };
    let (bf, nf): (Vec<Figures>, Vec<Figures>) = (bf, nf);
    let opt = |get: &dyn Fn(&Figures) -> Option<f64>| over(&bf, &nf, alpha_if, get);
    let all = |get: &dyn Fn(&Figures) -> f64| over_all(&bf, &nf, alpha_if, get);
    let codes: std::collections::BTreeSet<&String> = bf
        .iter()
        .chain(&nf)
        .flat_map(|f| f.status_codes.keys())
        .collect();
    let status_codes = codes
        .into_iter()
        .map(|code| {
            let v = all(&|f| f.status_codes.get(code).copied().unwrap_or(0.0));
            (code.clone(), v)
        })
        .collect();
    SystemDelta {
        system: system.to_string(),
        latency: std::array::from_fn(|i| opt(&|f| f.latency[i])),
        errors: std::array::from_fn(|i| all(&|f| f.errors[i])),
        status_codes,
        errors_total: all(&|f| f.errors_total),
        added_median: opt(&|f| f.added_median),
        added_max: opt(&|f| f.added_max),
        removed_median: opt(&|f| f.removed_median),
        removed_max: opt(&|f| f.removed_max),
        route_seen_median: opt(&|f| f.route_seen_median),
        sessions_cut: opt(&|f| f.sessions_cut),
        sessions_broken: opt(&|f| f.sessions_broken),
        sessions_lost: opt(&|f| f.sessions_lost),
        message_p99: opt(&|f| f.message_p99),
        message_max: opt(&|f| f.message_max),
        rate: all(&|f| f.rate),
        repetitions: tested.then_some((base.repetitions.len(), new.repetitions.len())),
        base_failed: base.failure(),
        new_failed: new.failure(),
    }
}

fn scenario_of(r: &RunResult) -> String {
    match &r.lab {
        Some(l) => format!("scenario {}", l.scenario),
        None => "a single load run".to_string(),
    }
}

fn rate_of(r: &RunResult) -> String {
    match r.config.rate {
        Some(x) if !r.config.max => format!("{x} req/s"),
        _ => "as fast as possible (--max)".to_string(),
    }
}

fn tls_of(r: &RunResult) -> String {
    let c = &r.config;
    if !c.url.starts_with("https://") && c.tls_version.is_none() {
        return "plain HTTP".to_string();
    }
    format!(
        "TLS {}{}",
        c.tls_version.as_deref().unwrap_or("(any version)"),
        if c.tls_resume { " with resumption" } else { "" }
    )
}

/// What differs between two results so that their numbers do not measure the same
/// thing: the scenario, and the load's rate, connections, duration, TLS and
/// connection reuse. Each entry reads "what: base vs new".
pub fn differences(base: &RunResult, new: &RunResult) -> Vec<String> {
    let (b, n) = (&base.config, &new.config);
    let mut out = Vec::new();
    let mut check = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what}: {x} vs {y}"));
        }
    };
    check("scenario", scenario_of(base), scenario_of(new));
    check("rate", rate_of(base), rate_of(new));
    check(
        "connections",
        b.connections.to_string(),
        n.connections.to_string(),
    );
    check(
        "duration",
        fmt_secs_only(b.duration_s),
        fmt_secs_only(n.duration_s),
    );
    check("tls", tls_of(base), tls_of(new));
    let reuse = |r: &RunResult| {
        if r.config.new_connection {
            "a new connection per request"
        } else {
            "keep-alive"
        }
        .to_string()
    };
    check("connections reuse", reuse(base), reuse(new));
    // Numbers from two machines measure the machines as much as the systems. Old
    // results without a machine are not judged.
    if let (Some(mb), Some(mn)) = (&base.machine, &new.machine) {
        let m = |x: &results::Machine| {
            format!(
                "{} x{} ({}), kernel {}",
                x.cpu_model, x.cores, x.hostname, x.kernel
            )
        };
        check("machine", m(mb), m(mn));
    }
    out
}

fn describe(r: &RunResult) -> String {
    format!(
        "{}, {} over {} connections for {}, {}",
        scenario_of(r),
        rate_of(r),
        r.config.connections,
        fmt_secs_only(r.config.duration_s),
        tls_of(r)
    )
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// Compares every system of `new` with the same system of `base`, testing the
/// differences of repeated runs at [`DEFAULT_ALPHA`].
pub fn compare(base: &Run, new: &Run) -> Comparison {
    compare_at(base, new, DEFAULT_ALPHA)
}

/// Compares every system of `new` with the same system of `base`; where both sides
/// of a system were repeated, each difference is tested at `alpha` (0 < alpha < 1).
pub fn compare_at(base: &Run, new: &Run, alpha: f64) -> Comparison {
    let mut c = Comparison {
        alpha,
        base: base.label.clone(),
        new: new.label.clone(),
        setup: base
            .systems
            .values()
            .next()
            .map(describe)
            .unwrap_or_default(),
        ..Default::default()
    };
    for (name, b) in &base.systems {
        let Some(n) = new.systems.get(name) else {
            c.only_in_base.push(name.clone());
            continue;
        };
        c.systems.push(system_delta_at(name, b, n, alpha));
        for diff in differences(b, n) {
            push_unique(&mut c.not_comparable, diff);
        }
        if let (Some(bl), Some(nl)) = (&b.lab, &n.lab) {
            for (part, bv) in &bl.versions {
                if let Some(nv) = nl.versions.get(part).filter(|nv| *nv != bv) {
                    push_unique(&mut c.notes, format!("{part} {bv} vs {nv}"));
                }
            }
        }
    }
    let untested: Vec<&str> = c
        .systems
        .iter()
        .filter(|s| s.repetitions.is_none())
        .map(|s| s.system.as_str())
        .collect();
    if !untested.is_empty() {
        let whose = if untested.len() == c.systems.len() {
            String::new()
        } else {
            format!(" for {}", untested.join(", "))
        };
        c.untested = Some(format!(
            "no repetitions{whose}: deltas not tested for significance (use --repeat N, {}+ a side)",
            repetitions_needed(alpha)
        ));
    }
    c.only_in_new = new
        .systems
        .keys()
        .filter(|k| !base.systems.contains_key(*k))
        .cloned()
        .collect();
    for (side, run) in [("base", base), ("new", new)] {
        for (name, r) in &run.systems {
            for w in warnings(r) {
                c.warnings.push(format!("{side} {name}: {w}"));
            }
            if r.lab.as_ref().is_some_and(|l| l.proxy_died) {
                c.warnings
                    .push(format!("{side} {name}: the proxy died during the run"));
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fixtures::{lab, repeated, result, run, SAME_A, SAME_B};

    #[test]
    fn untrusted_results_are_warned() {
        let b = result(1.0, 2.0, 0);
        let mut n = b.clone();
        n.partial = true;
        let c = compare(&run("A", vec![b]), &run("B", vec![n]));
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].starts_with("new load: the run was interrupted"));
    }

    #[test]
    fn results_of_another_schema_are_refused() {
        let e = parse_result("r.json", br#"{"schema": "ingressbench/result/v2"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "r.json: schema \"ingressbench/result/v2\" is not supported (this ingressbench reads \"ingressbench/result/v1\")"
        );
        let e = parse_result("r.json", b"{}").unwrap_err();
        assert!(e.to_string().contains("no \"schema\" field"), "{e}");
        let e = parse_result("r.json", b"not json").unwrap_err();
        assert!(e.to_string().starts_with("r.json: not a result document: "));
        let ok = serde_json::to_vec(&result(1.0, 2.0, 0)).unwrap();
        assert_eq!(parse_result("r.json", &ok).unwrap().config.connections, 10);
    }

    #[test]
    fn repetitions_on_both_sides_give_medians_ranges_and_a_test() {
        let c = compare(
            &run("A", vec![repeated(&SAME_A)]),
            &run("B", vec![repeated(&SAME_B)]),
        );
        assert_eq!(c.untested, None);
        assert_eq!(c.alpha, DEFAULT_ALPHA);
        let s = &c.systems[0];
        assert_eq!(s.repetitions, Some((5, 5)));
        // The medians of the repetitions, not the top level (10.5 and 10.6).
        let p99 = s.latency[3];
        assert_eq!((p99.base, p99.new), (Some(10.1), Some(10.3)));
        let t = p99.test.unwrap();
        assert_eq!(
            (t.base.min, t.base.max, t.new.min, t.new.max),
            (9.8, 10.5, 9.7, 10.6)
        );
        // 174 of the 252 splits are at least as far apart (see significance.rs).
        assert!((t.p - 174.0 / 252.0).abs() < 1e-12, "{}", t.p);
        assert!(t.testable() && !t.significant());
        assert_eq!(t.verdict(), "not significant, p=0.69");
        // Every figure compared is tested: errors (all 0: p = 1) and the rate.
        assert_eq!(s.errors_total.test.unwrap().p, 1.0);
        assert_eq!(s.errors_total.test.unwrap().verdict(), "p=1.00");
        assert!(s.rate.test.is_some());
        assert!(s.latency[8].test.is_some(), "max");
        // No propagation in either: nothing to test.
        assert_eq!(s.added_median, OptDelta::default());

        let slow: Vec<f64> = SAME_A.iter().map(|x| x * 2.0).collect();
        let c = compare(
            &run("A", vec![repeated(&SAME_A)]),
            &run("B", vec![repeated(&slow)]),
        );
        let t = c.systems[0].latency[3].test.unwrap();
        assert!((t.p - 2.0 / 252.0).abs() < 1e-15);
        assert!(t.significant());
        assert_eq!(t.verdict(), "p=0.0079");
        // Fewer than 4 a side cannot reach 0.05, and say so.
        let c = compare(
            &run("A", vec![repeated(&SAME_A[..3])]),
            &run("B", vec![repeated(&slow[..3])]),
        );
        let t = c.systems[0].latency[3].test.unwrap();
        assert!((t.p - 0.1).abs() < 1e-15);
        assert!(!t.testable() && !t.significant());
        assert_eq!(t.verdict(), "needs 4+ repetitions per side");
        // The level is the caller's.
        let c = compare_at(
            &run("A", vec![repeated(&SAME_A[..4])]),
            &run("B", vec![repeated(&slow[..4])]),
            0.01,
        );
        assert_eq!(c.alpha, 0.01);
        assert_eq!(
            c.systems[0].latency[3].test.unwrap().verdict(),
            "needs 5+ repetitions per side"
        );
    }

    #[test]
    fn propagation_is_tested_over_the_repetitions_that_have_it() {
        let side = |added: &[&[f64]]| {
            let mut r = lab(result(1.0, 2.0, 0), "nginx", &[]);
            r.repetitions = added
                .iter()
                .map(|a| lab(result(1.0, 2.0, 0), "nginx", a))
                .collect();
            r
        };
        let b = side(&[&[100.0, 110.0], &[90.0], &[], &[105.0], &[95.0]]);
        let n = side(&[&[300.0], &[310.0], &[290.0], &[305.0], &[295.0]]);
        let c = compare(&run("A", vec![b]), &run("B", vec![n]));
        let v = c.systems[0].added_median;
        // 4 base repetitions measured it (one changed nothing): 105, 90, 105, 95.
        assert_eq!((v.base, v.new), (Some(100.0), Some(300.0)));
        let t = v.test.unwrap();
        assert_eq!((t.base.n, t.new.n), (4, 5));
        assert!((t.p - 2.0 / 126.0).abs() < 1e-15, "{}", t.p);
        assert!(c.systems[0].removed_median.test.is_none());
    }

    #[test]
    fn without_repetitions_on_both_sides_nothing_is_tested() {
        let plain = result(10.0, 20.0, 0);
        let once = {
            let mut r = repeated(&[11.0]);
            r.repetitions[0] = result(11.0, 22.0, 0);
            r
        };
        for (b, n) in [
            (plain.clone(), plain.clone()),
            (repeated(&SAME_A), plain.clone()),
            (plain.clone(), repeated(&SAME_B)),
            (repeated(&SAME_A), once),
        ] {
            let c = compare(&run("A", vec![b.clone()]), &run("B", vec![n.clone()]));
            let s = &c.systems[0];
            assert_eq!(s.repetitions, None);
            // Exactly as before repetitions: the results' own figures.
            let before = system_delta("load", &b, &n);
            assert_eq!(s, &before);
            assert_eq!(s.latency[3].base, b.latency_ms.corrected.p99);
            assert!(s.latency.iter().all(|v| v.test.is_none()));
            assert!(s.errors.iter().all(|v| v.test.is_none()));
            assert_eq!(
                c.untested.as_deref(),
                Some("no repetitions: deltas not tested for significance (use --repeat N, 4+ a side)")
            );
        }
        // Some systems repeated, some not: the untested ones are named.
        let c = compare(
            &run(
                "A",
                vec![
                    lab(repeated(&SAME_A), "nginx", &[]),
                    lab(plain.clone(), "caddy", &[]),
                ],
            ),
            &run(
                "B",
                vec![
                    lab(repeated(&SAME_B), "nginx", &[]),
                    lab(plain, "caddy", &[]),
                ],
            ),
        );
        assert_eq!(
            c.untested.as_deref(),
            Some("no repetitions for caddy: deltas not tested for significance (use --repeat N, 4+ a side)")
        );
    }

    #[test]
    fn p_values_are_written_short() {
        assert_eq!(fmt_p(0.690_476), "0.69");
        assert_eq!(fmt_p(1.0), "1.00");
        assert_eq!(fmt_p(0.1), "0.10");
        assert_eq!(fmt_p(2.0 / 70.0), "0.029");
        assert_eq!(fmt_p(2.0 / 252.0), "0.0079");
        assert_eq!(fmt_p(0.000_01), "<0.0001");
    }
}
