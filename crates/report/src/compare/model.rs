//! What a comparison is: two runs loaded by system name, the deltas of every figure
//! between them, and whether they measured the same thing at all (scenario, load
//! settings, machine). Pure functions of result documents but [`load_run`], so the
//! deltas are tested on known numbers; thresholds and rendering build on this.

use crate::fmt::fmt_secs_only;
use crate::text::warnings;
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

/// A figure in the base run and in the new one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Delta {
    pub base: f64,
    pub new: f64,
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
    pub base: Option<f64>,
    pub new: Option<f64>,
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
    pub errors: [Delta; 7],
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
    /// Requests started per second.
    pub rate: Delta,
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
}

pub(crate) fn d(base: f64, new: f64) -> Delta {
    Delta { base, new }
}

pub(crate) fn dc(base: u64, new: u64) -> Delta {
    d(base as f64, new as f64)
}

pub(crate) fn od(base: Option<f64>, new: Option<f64>) -> OptDelta {
    OptDelta { base, new }
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

/// The deltas of one system.
pub fn system_delta(system: &str, base: &RunResult, new: &RunResult) -> SystemDelta {
    let (bl, nl) = (
        latency_values(&base.latency_ms.corrected),
        latency_values(&new.latency_ms.corrected),
    );
    let latency = std::array::from_fn(|i| od(bl[i], nl[i]));
    let errors = std::array::from_fn(|i| {
        let k = ErrorKind::ALL[i];
        dc(base.errors.get(k), new.errors.get(k))
    });
    let mut status_codes = BTreeMap::new();
    for code in base
        .errors
        .status_codes
        .keys()
        .chain(new.errors.status_codes.keys())
    {
        let get = |r: &RunResult| r.errors.status_codes.get(code).copied().unwrap_or(0);
        status_codes.insert(code.clone(), dc(get(base), get(new)));
    }
    let ((ba, br), (na, nr)) = (propagation(base), propagation(new));
    SystemDelta {
        system: system.to_string(),
        latency,
        errors,
        status_codes,
        errors_total: dc(base.errors.total(), new.errors.total()),
        added_median: od(ba.median, na.median),
        added_max: od(ba.max, na.max),
        removed_median: od(br.median, nr.median),
        removed_max: od(br.max, nr.max),
        route_seen_median: od(route_seen(base), route_seen(new)),
        rate: d(base.rate.achieved, new.rate.achieved),
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

/// Compares every system of `new` with the same system of `base`.
pub fn compare(base: &Run, new: &Run) -> Comparison {
    let mut c = Comparison {
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
        c.systems.push(system_delta(name, b, n));
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
    use crate::compare::fixtures::{result, run};

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
}
