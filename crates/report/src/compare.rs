//! Comparing saved runs: the deltas between a base run and newer ones, system by
//! system, and the `--max-regression` thresholds a CI pipeline gates on.
//!
//! It owns loading runs for comparison (a lab run folder or one `result.json`), the
//! check that two runs measured the same thing (scenario and load settings), the delta
//! tables in the terminal and as a self-contained HTML page, and the threshold specs:
//! their parsing and their evaluation. Everything but [`load_run`] is a pure function
//! of result documents, so it is tested on known numbers.

use super::text::{fmt_ms, warnings};
use results::{ErrorKind, Percentiles, RunResult, Spread};
use std::collections::BTreeMap;
use std::fmt::Write as _;
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
    /// Corrected latency in ms, in the order of [`LATENCY_METRICS`].
    pub latency: [Delta; 9],
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
    /// Requests started per second.
    pub rate: Delta,
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

fn d(base: f64, new: f64) -> Delta {
    Delta { base, new }
}

fn dc(base: u64, new: u64) -> Delta {
    d(base as f64, new as f64)
}

fn od(base: Option<f64>, new: Option<f64>) -> OptDelta {
    OptDelta { base, new }
}

fn latency_values(p: &Percentiles) -> [f64; 9] {
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

/// The deltas of one system.
pub fn system_delta(system: &str, base: &RunResult, new: &RunResult) -> SystemDelta {
    let (bl, nl) = (
        latency_values(&base.latency_ms.corrected),
        latency_values(&new.latency_ms.corrected),
    );
    let latency = std::array::from_fn(|i| d(bl[i], nl[i]));
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
        rate: d(base.rate.achieved, new.rate.achieved),
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

fn secs(s: f64) -> String {
    if (s - s.round()).abs() < 1e-9 {
        format!("{}s", s.round())
    } else {
        format!("{s:.2}s")
    }
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
    check("duration", secs(b.duration_s), secs(n.duration_s));
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
        secs(r.config.duration_s),
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

/// What a threshold limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Corrected latency: an index into [`LATENCY_METRICS`].
    Latency(usize),
    /// Errors: of one kind, or in total.
    Errors(Option<ErrorKind>),
    /// Median endpoint propagation: of added backends, removed ones, or both.
    Propagation(Option<Direction>),
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

const METRICS_HELP: &str = "use p50, p75, p90, p99, p99.9, p99.99, p99.999, p99.9999, max, errors, errors.KIND, propagation, propagation.added or propagation.removed";

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
    let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
    let metric = if let Some(i) = LATENCY_METRICS.iter().position(|m| *m == name) {
        Metric::Latency(i)
    } else if name == "errors" {
        Metric::Errors(None)
    } else if let Some(k) = name.strip_prefix("errors.") {
        match ErrorKind::ALL.iter().find(|e| e.name() == k) {
            Some(e) => Metric::Errors(Some(*e)),
            None => {
                let kinds: Vec<&str> = ErrorKind::ALL.iter().map(|e| e.name()).collect();
                return Err(err(&format!(
                    "unknown error kind '{k}': use one of {}",
                    kinds.join(", ")
                )));
            }
        }
    } else if name == "propagation" {
        Metric::Propagation(None)
    } else if name == "propagation.added" {
        Metric::Propagation(Some(Direction::Added))
    } else if name == "propagation.removed" {
        Metric::Propagation(Some(Direction::Removed))
    } else {
        return Err(err(&format!("unknown metric '{name}': {METRICS_HELP}")));
    };
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

/// A threshold the new run crossed.
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
    /// The spec that set it.
    pub spec: String,
}

impl Crossing {
    /// One line naming system, metric, base, new and limit.
    pub fn line(&self) -> String {
        format!(
            "REGRESSION: {}: {}: base {}, new {}, limit {} (--max-regression {})",
            self.system, self.metric, self.base, self.new, self.limit, self.spec
        )
    }
}

/// The largest value `new` may take under `limit`, and the limit as displayed.
fn allowed(base: f64, limit: Limit, fmt: fn(f64) -> String) -> (f64, String) {
    match limit {
        Limit::Percent(p) => {
            let a = base * (1.0 + p / 100.0);
            (a, format!("+{p}% ({})", fmt(a)))
        }
        Limit::Ms(ms) => (base + ms, format!("+{} ({})", fmt_ms(ms), fmt(base + ms))),
        Limit::Count(n) => (base + n as f64, format!("+{n} ({})", fmt(base + n as f64))),
    }
}

fn fmt_count(x: f64) -> String {
    format!("{x:.0}")
}

/// The thresholds `cmp`'s new run crosses, in threshold then system order.
///
/// A limit holds when `new <= allowed`: equal is not a regression. A propagation
/// median that the base has and the new run lacks (no backend propagated) crosses;
/// one the base lacks cannot be judged and is skipped.
pub fn evaluate(cmp: &Comparison, thresholds: &[Threshold]) -> Vec<Crossing> {
    let mut out = Vec::new();
    for t in thresholds {
        for s in &cmp.systems {
            let mut cross = |metric: &str, base: String, new: String, limit: String| {
                out.push(Crossing {
                    run: cmp.new.clone(),
                    system: s.system.clone(),
                    metric: metric.to_string(),
                    base,
                    new,
                    limit,
                    spec: t.spec.clone(),
                });
            };
            match t.metric {
                Metric::Latency(i) => {
                    let v = s.latency[i];
                    let (a, lim) = allowed(v.base, t.limit, fmt_ms);
                    if v.new > a {
                        cross(LATENCY_METRICS[i], fmt_ms(v.base), fmt_ms(v.new), lim);
                    }
                }
                Metric::Errors(kind) => {
                    let (name, v) = match kind {
                        Some(k) => (format!("errors.{}", k.name()), s.errors[k.index()]),
                        None => ("errors".to_string(), s.errors_total),
                    };
                    let (a, lim) = allowed(v.base, t.limit, fmt_count);
                    if v.new > a {
                        cross(&name, fmt_count(v.base), fmt_count(v.new), lim);
                    }
                }
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
                        let (a, lim) = allowed(b, t.limit, fmt_ms);
                        match v.new {
                            Some(n) if n <= a => {}
                            Some(n) => cross(&format!("{name} median"), fmt_ms(b), fmt_ms(n), lim),
                            None => cross(
                                &format!("{name} median"),
                                fmt_ms(b),
                                "none measured".to_string(),
                                lim,
                            ),
                        }
                    }
                }
            }
        }
    }
    out
}

/// Whether a change is worse, better or neither, for colouring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    Worse,
    Better,
    Same,
}

/// One row of a delta table, formatted: the same rows feed the terminal and the page.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    pub base: String,
    pub new: String,
    pub delta: String,
    pub pct: String,
    pub trend: Trend,
}

/// A titled group of rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub title: &'static str,
    pub rows: Vec<Row>,
}

fn signed_ms(x: f64) -> String {
    if x < 0.0 {
        format!("-{}", fmt_ms(-x))
    } else {
        format!("+{}", fmt_ms(x))
    }
}

fn pct_text(v: &Delta) -> String {
    match v.pct() {
        Some(p) => format!("{p:+.1}%"),
        None if v.new == v.base => "0.0%".to_string(),
        None => "new".to_string(),
    }
}

fn trend(v: &Delta, higher_is_worse: bool) -> Trend {
    match v.new.partial_cmp(&v.base) {
        Some(std::cmp::Ordering::Greater) if higher_is_worse => Trend::Worse,
        Some(std::cmp::Ordering::Greater) => Trend::Better,
        Some(std::cmp::Ordering::Less) if higher_is_worse => Trend::Better,
        Some(std::cmp::Ordering::Less) => Trend::Worse,
        _ => Trend::Same,
    }
}

fn ms_row(label: &str, v: Delta) -> Row {
    Row {
        label: label.to_string(),
        base: fmt_ms(v.base),
        new: fmt_ms(v.new),
        delta: signed_ms(v.abs()),
        pct: pct_text(&v),
        trend: trend(&v, true),
    }
}

fn count_row(label: &str, v: Delta) -> Row {
    Row {
        label: label.to_string(),
        base: fmt_count(v.base),
        new: fmt_count(v.new),
        delta: format!("{:+.0}", v.abs()),
        pct: pct_text(&v),
        trend: trend(&v, true),
    }
}

fn opt_row(label: &str, v: OptDelta) -> Row {
    let show = |x: Option<f64>| x.map(fmt_ms).unwrap_or_else(|| "-".to_string());
    match (v.base, v.new) {
        (Some(b), Some(n)) => ms_row(label, d(b, n)),
        _ => Row {
            label: label.to_string(),
            base: show(v.base),
            new: show(v.new),
            delta: "-".to_string(),
            pct: "-".to_string(),
            trend: Trend::Same,
        },
    }
}

/// The delta tables of one system: latency, errors (the kinds seen in either run, and
/// the total), propagation (lab runs), rate.
pub fn tables(s: &SystemDelta) -> Vec<Table> {
    let latency = LATENCY_METRICS
        .iter()
        .zip(s.latency)
        .map(|(m, v)| ms_row(m, v))
        .collect();
    // Kinds with no error on either side are left out: the total still counts them.
    let mut errors: Vec<Row> = ErrorKind::ALL
        .iter()
        .zip(s.errors)
        .filter(|(_, v)| v.base != 0.0 || v.new != 0.0)
        .map(|(k, v)| count_row(k.name(), v))
        .collect();
    for (code, v) in &s.status_codes {
        errors.push(count_row(&format!("  status {code}"), *v));
    }
    errors.push(count_row("total", s.errors_total));
    let mut out = vec![
        Table {
            title: "latency (corrected)",
            rows: latency,
        },
        Table {
            title: "errors",
            rows: errors,
        },
    ];
    let props = [
        ("added median", s.added_median),
        ("added max", s.added_max),
        ("removed median", s.removed_median),
        ("removed max", s.removed_max),
    ];
    if props
        .iter()
        .any(|(_, v)| v.base.is_some() || v.new.is_some())
    {
        out.push(Table {
            title: "propagation",
            rows: props.iter().map(|(l, v)| opt_row(l, *v)).collect(),
        });
    }
    out.push(Table {
        title: "rate (req/s)",
        rows: vec![Row {
            label: "achieved".to_string(),
            base: format!("{:.1}", s.rate.base),
            new: format!("{:.1}", s.rate.new),
            delta: format!("{:+.1}", s.rate.abs()),
            pct: pct_text(&s.rate),
            trend: trend(&s.rate, false),
        }],
    });
    out
}

/// The lines flagging what is wrong with the comparison itself: `WARNING: ...`.
pub fn flags(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    if !c.not_comparable.is_empty() {
        out.push(format!(
            "WARNING: not comparable: {}",
            c.not_comparable.join("; ")
        ));
    }
    for s in &c.only_in_base {
        out.push(format!(
            "WARNING: missing: {s} is in {} but not in {}",
            c.base, c.new
        ));
    }
    for s in &c.only_in_new {
        out.push(format!(
            "WARNING: missing: {s} is in {} but not in {}",
            c.new, c.base
        ));
    }
    for w in &c.warnings {
        out.push(format!("WARNING: {w}"));
    }
    out
}

/// The comparison as terminal text.
pub fn text(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Comparing {} (base) with {} (new)", c.base, c.new);
    let _ = writeln!(s, "  {}", c.setup);
    if !c.notes.is_empty() {
        let _ = writeln!(s, "  versions: {}", c.notes.join("; "));
    }
    for f in flags(c) {
        let _ = writeln!(s, "{f}");
    }
    for sys in &c.systems {
        let _ = writeln!(s, "\n{}", sys.system);
        for t in tables(sys) {
            let _ = writeln!(
                s,
                "  {:<22} {:>10} {:>10} {:>11} {:>9}",
                t.title, "base", "new", "delta", "%"
            );
            for r in t.rows {
                let _ = writeln!(
                    s,
                    "    {:<20} {:>10} {:>10} {:>11} {:>9}",
                    r.label, r.base, r.new, r.delta, r.pct
                );
            }
        }
    }
    s
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const CSS: &str = "
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #ffffff; --muted: #6e6e73;
  --line: #d2d2d7; --worse: #b3261e; --better: #1b7f3b; --warn-bg: #fff4e5; --warn: #8a4b00; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e8e8ed; --bg: #161618; --muted: #a1a1a6; --line: #3a3a3c;
    --worse: #ff6b60; --better: #4cd27a; --warn-bg: #3a2a10; --warn: #ffcc80; } }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg);
  max-width: 60em; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1.05em; }
.muted { color: var(--muted); }
.warn { background: var(--warn-bg); color: var(--warn); padding: .5em .8em; border-radius: 4px;
  margin: .4em 0; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { padding: .2em .8em; border-bottom: 1px solid var(--line); }
th { text-align: left; } th.n, td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.worse { color: var(--worse); font-weight: 600; } td.better, .ok { color: var(--better); }
@media print { body { max-width: none; } }
";

/// The comparisons (each new run against the base) and the crossed thresholds as one
/// self-contained HTML page: no script, no external resource, light and dark schemes
/// following the reader's setting.
pub fn html(comparisons: &[Comparison], thresholds: &[Threshold], crossed: &[Crossing]) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>ingressbench compare</title>\n<style>");
    h.push_str(CSS);
    h.push_str("</style>\n</head>\n<body>\n<h1>ingressbench compare</h1>\n");
    if !thresholds.is_empty() {
        let specs: Vec<String> = thresholds.iter().map(|t| esc(&t.spec)).collect();
        let _ = writeln!(
            h,
            "<p>Thresholds (--max-regression): <code>{}</code></p>",
            specs.join("</code>, <code>")
        );
        if crossed.is_empty() {
            h.push_str("<p class=\"ok\">Every threshold holds.</p>\n");
        } else {
            h.push_str("<h2>Crossed thresholds</h2>\n<table>\n<tr><th>run</th><th>system</th><th>metric</th><th>base</th><th>new</th><th>limit</th><th>spec</th></tr>\n");
            for c in crossed {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n worse\">{}</td><td class=\"n\">{}</td><td><code>{}</code></td></tr>",
                    esc(&c.run),
                    esc(&c.system),
                    esc(&c.metric),
                    esc(&c.base),
                    esc(&c.new),
                    esc(&c.limit),
                    esc(&c.spec)
                );
            }
            h.push_str("</table>\n");
        }
    }
    for c in comparisons {
        let _ = writeln!(
            h,
            "<h2>{} <span class=\"muted\">(base)</span> vs {} <span class=\"muted\">(new)</span></h2>\n<p class=\"muted\">{}</p>",
            esc(&c.base),
            esc(&c.new),
            esc(&c.setup)
        );
        if !c.notes.is_empty() {
            let _ = writeln!(h, "<p>Versions: {}</p>", esc(&c.notes.join("; ")));
        }
        for f in flags(c) {
            let _ = writeln!(h, "<div class=\"warn\">{}</div>", esc(&f));
        }
        for sys in &c.systems {
            let _ = writeln!(h, "<h3>{}</h3>", esc(&sys.system));
            for t in tables(sys) {
                let _ = writeln!(
                    h,
                    "<table>\n<tr><th>{}</th><th class=\"n\">base</th><th class=\"n\">new</th><th class=\"n\">delta</th><th class=\"n\">%</th></tr>",
                    esc(t.title)
                );
                for r in t.rows {
                    let class = match r.trend {
                        Trend::Worse => "n worse",
                        Trend::Better => "n better",
                        Trend::Same => "n",
                    };
                    let _ = writeln!(
                        h,
                        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"{class}\">{}</td><td class=\"{class}\">{}</td></tr>",
                        esc(&r.label),
                        esc(&r.base),
                        esc(&r.new),
                        esc(&r.delta),
                        esc(&r.pct)
                    );
                }
                h.push_str("</table>\n");
            }
        }
    }
    h.push_str("</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{LabInfo, Propagation};

    fn result(p99: f64, max: f64, timeouts: u64) -> RunResult {
        let mut r = RunResult {
            schema: results::RESULT_SCHEMA.to_string(),
            ..Default::default()
        };
        r.config.url = "http://127.0.0.1:1/".to_string();
        r.config.rate = Some(500.0);
        r.config.connections = 10;
        r.config.duration_s = 3.0;
        r.latency_ms.corrected.p50 = 1.0;
        r.latency_ms.corrected.p99 = p99;
        r.latency_ms.corrected.max = max;
        r.errors.timeout = timeouts;
        r.rate.target = Some(500.0);
        r.rate.achieved = 500.0;
        r.rate.reached = true;
        r
    }

    fn lab(mut r: RunResult, system: &str, added: &[f64]) -> RunResult {
        r.lab = Some(LabInfo {
            system: system.to_string(),
            scenario: "dynamic-endpoints".to_string(),
            propagation: Propagation {
                added_ms: Spread::of(added),
                ..Default::default()
            },
            ..Default::default()
        });
        r
    }

    fn run(label: &str, rs: Vec<RunResult>) -> Run {
        Run {
            label: label.to_string(),
            systems: rs.into_iter().map(|r| (system_name(&r), r)).collect(),
        }
    }

    fn th(s: &str) -> Threshold {
        parse_threshold(s).unwrap()
    }

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
    fn deltas_by_system() {
        let mut b = result(10.0, 20.0, 1);
        b.errors.status = 2;
        b.errors.status_codes.insert("503".into(), 2);
        let mut n = result(12.5, 15.0, 4);
        n.errors.status_codes.insert("502".into(), 1);
        n.errors.status = 1;
        n.rate.achieved = 450.0;
        let s = system_delta("load", &b, &n);
        assert_eq!(s.latency[3], d(10.0, 12.5));
        assert_eq!(s.latency[3].abs(), 2.5);
        assert_eq!(s.latency[3].pct(), Some(25.0));
        assert_eq!(s.latency[8].pct(), Some(-25.0));
        assert_eq!(s.errors[ErrorKind::Timeout.index()], dc(1, 4));
        assert_eq!(s.errors_total, dc(3, 5));
        assert_eq!(s.status_codes["503"], dc(2, 0));
        assert_eq!(s.status_codes["502"], dc(0, 1));
        assert_eq!(s.rate.abs(), -50.0);
        assert_eq!(d(0.0, 1.0).pct(), None);
        let t = tables(&s);
        assert_eq!(
            t.iter().map(|t| t.title).collect::<Vec<_>>(),
            ["latency (corrected)", "errors", "rate (req/s)"]
        );
        let p99 = &t[0].rows[3];
        assert_eq!(
            (p99.base.as_str(), p99.new.as_str(), p99.delta.as_str()),
            ("10.00ms", "12.50ms", "+2.50ms")
        );
        assert_eq!((p99.pct.as_str(), p99.trend), ("+25.0%", Trend::Worse));
        assert_eq!(t[0].rows[8].delta, "-5.00ms");
        assert_eq!(t[0].rows[8].trend, Trend::Better);
        assert_eq!(
            t[1].rows
                .iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>(),
            ["timeout", "status", "  status 502", "  status 503", "total"]
        );
        let e502 = &t[1].rows[2];
        assert_eq!((e502.delta.as_str(), e502.pct.as_str()), ("+1", "new"));
        assert_eq!(t[2].rows[0].trend, Trend::Worse);
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

    #[test]
    fn different_setups_are_flagged() {
        let b = result(10.0, 20.0, 0);
        assert!(differences(&b, &b.clone()).is_empty());
        let mut n = b.clone();
        n.config.rate = Some(1000.0);
        n.config.connections = 50;
        n.config.url = "https://127.0.0.1:1/".to_string();
        n.config.tls_version = Some("1.3".to_string());
        let diffs = differences(&b, &n);
        assert_eq!(
            diffs,
            [
                "rate: 500 req/s vs 1000 req/s",
                "connections: 10 vs 50",
                "tls: plain HTTP vs TLS 1.3"
            ]
        );
        let lb = lab(b.clone(), "nginx", &[]);
        let mut ln = lab(b.clone(), "nginx", &[]);
        ln.lab.as_mut().unwrap().scenario = "other".to_string();
        let on = |host: &str| results::Machine {
            cpu_model: "AMD EPYC".into(),
            cores: 2,
            kernel: "6.1".into(),
            hostname: host.into(),
        };
        let (mut mb, mut mn) = (lb.clone(), ln.clone());
        mb.machine = Some(on("a"));
        mn.machine = Some(on("b"));
        assert!(differences(&mb, &mn)
            .iter()
            .any(|d| d.starts_with("machine: ")));
        mn.machine = Some(on("a"));
        assert!(!differences(&mb, &mn)
            .iter()
            .any(|d| d.starts_with("machine: ")));
        ln.config.duration_s = 30.0;
        assert_eq!(
            differences(&lb, &ln),
            [
                "scenario: scenario dynamic-endpoints vs scenario other",
                "duration: 3s vs 30s"
            ]
        );
        let c = compare(&run("A", vec![lb]), &run("B", vec![ln]));
        let f = flags(&c);
        assert!(
            f[0].starts_with("WARNING: not comparable: scenario:"),
            "{f:?}"
        );
        assert!(text(&c).contains("WARNING: not comparable: "));
    }

    #[test]
    fn missing_systems_are_listed() {
        let b = run(
            "A",
            vec![
                lab(result(1.0, 2.0, 0), "nginx", &[]),
                lab(result(1.0, 2.0, 0), "caddy", &[]),
            ],
        );
        let n = run(
            "B",
            vec![
                lab(result(1.0, 2.0, 0), "nginx", &[]),
                lab(result(1.0, 2.0, 0), "haproxy", &[]),
            ],
        );
        let c = compare(&b, &n);
        assert_eq!(c.systems.len(), 1);
        assert_eq!(c.only_in_base, ["caddy"]);
        assert_eq!(c.only_in_new, ["haproxy"]);
        let f = flags(&c);
        assert!(f.contains(&"WARNING: missing: caddy is in A but not in B".to_string()));
        assert!(f.contains(&"WARNING: missing: haproxy is in B but not in A".to_string()));
    }

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
    fn page_is_self_contained_and_escaped() {
        let mut b = lab(result(10.0, 20.0, 0), "<nginx>", &[100.0]);
        b.lab.as_mut().unwrap().propagation.removed_ms = Spread::of(&[5.0]);
        let n = lab(result(20.0, 20.0, 0), "<nginx>", &[150.0]);
        let c = compare(&run("A&B", vec![b]), &run("C", vec![n]));
        let ths = [th("p99=10%")];
        let crossed = evaluate(&c, &ths);
        let h = html(&[c], &ths, &crossed);
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("prefers-color-scheme: dark"));
        assert!(h.contains("&lt;nginx&gt;") && h.contains("A&amp;B"));
        assert!(!h.contains("<nginx>"));
        for external in ["http://", "https://", "<script", "<link", "@import", "url("] {
            assert!(!h.contains(external), "{external}");
        }
        assert!(h.contains("Crossed thresholds"));
        assert!(h.contains("<td class=\"n worse\">+10.00ms</td>"));
        assert!(h.contains("removed median"));
    }
}
