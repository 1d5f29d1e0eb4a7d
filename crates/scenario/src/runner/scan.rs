//! A sizing scan's rows (study S4): each row (a CPU allocation and a measure) on a
//! deployment of its own, its maximum found by the search, and what the row needs to
//! be trusted: the proxy under its quota, the generator with headroom, and every
//! handshake a full one by the proxy's own count.
//!
//! A whole number of cores pins the proxy to that many CPUs with one worker each; a
//! fraction runs it on one CPU under a CPU quota (a cgroup, as a Kubernetes CPU limit
//! is), so a 2-core machine whose generator keeps a core still scans 0.25, 0.5 and 1.

use super::deploy::deploy;
use super::measure::{found, search_plan};
use super::{RunError, RunOptions};
use crate::plan::{Case, RowSpec};
use engine::search::run_search;
use lab::cgroup::CpuQuota;
use lab::platform::fmt_set;
use results::search::SearchResult;
use results::sizing::{
    Allocation, Headroom, ProxyHandshakes, SizingResult, SizingRow, GENERATOR_CPU_LIMIT,
    SIZING_SCHEMA,
};

/// The scan of `case`'s system before its first row.
pub(super) fn result(case: &Case, row: &RowSpec) -> SizingResult {
    SizingResult {
        schema: SIZING_SCHEMA.into(),
        system: case.system.clone(),
        cost_per_core_hour: row.cost.as_ref().map(|c| c.0),
        currency: row.cost.as_ref().map(|c| c.1.clone()),
        ..SizingResult::default()
    }
}

/// Measures one row into `out` (a row the proxy's CPUs cannot hold is skipped, and
/// says why). Returns whether its search was interrupted.
///
/// # Errors
/// [`RunError`]: a deployment or a quota failed.
pub(super) fn row(
    case: &Case,
    spec: &RowSpec,
    opts: &mut RunOptions,
    out: &mut SizingResult,
) -> Result<bool, RunError> {
    let name = case.system.as_str();
    let cores = spec.cores;
    let mut row = SizingRow {
        allocation: Allocation {
            cores,
            cpus: String::new(),
            workers: spec.workers,
            quota: spec.quota,
        },
        measure: Some(spec.measure.clone()),
        ..SizingRow::default()
    };
    let label = format!("{name}: {cores} cores, {}", spec.measure.label());
    let cpus = match &spec.cpus {
        Ok(cpus) => cpus,
        Err(why) => {
            (opts.progress)(&format!("{label}: skipped: {why}"));
            row.skipped = Some(why.clone());
            out.rows.push(row);
            return Ok(false);
        }
    };
    row.allocation.cpus = fmt_set(cpus);
    (opts.progress)(&format!("{label}: searching the maximum"));
    measure_row(case, spec, opts, &mut row, out)?;
    let stopped = row.search.as_ref().is_some_and(|s| s.partial);
    if let Some(per_core_hour) = out.cost_per_core_hour {
        row.cost = row.price(per_core_hour);
    }
    (opts.progress)(&format!(
        "{label}: {}{}",
        row.max_rate
            .map_or("no maximum".to_string(), |m| format!("max {m:.0}/s")),
        if row.headroom.ok {
            String::new()
        } else {
            format!(" ({})", row.headroom.why.clone().unwrap_or_default())
        }
    ));
    out.rows.push(row);
    out.partial |= stopped;
    Ok(stopped)
}

/// Deploys the row's system, puts the proxy under its quota, searches, and fills
/// `row` (and `out.cgroup`).
pub(super) fn measure_row(
    case: &Case,
    spec: &RowSpec,
    opts: &mut RunOptions,
    row: &mut SizingRow,
    out: &mut SizingResult,
) -> Result<(), RunError> {
    let name = case.system.as_str();
    let lab_err = |source| RunError::Lab {
        system: name.to_string(),
        source,
    };
    let tps = spec.measure.is_tps();
    let mut d = deploy(case, opts)?;
    let groups = d.sys.driver.process_groups();
    // The quota's cgroup outlives the proxy (declared first, dropped last); a killed
    // run's is removed by the watchdog or the next run's sweep.
    let _quota = match spec.quota {
        Some(q) => {
            let g = CpuQuota::create(&format!("{name}-{}", spec.index), q).map_err(lab_err)?;
            for pg in &groups {
                g.add_group(*pg).map_err(lab_err)?;
            }
            out.cgroup = Some(g.version().name().to_string());
            Some(g)
        }
        None => None,
    };
    let before = if tps { d.sys.driver.handshakes() } else { None };
    let plan = search_plan(case, &spec.search, &d);
    // The proxy's CPU over each step, read as each step ends: its process groups'
    // CPU time since the last reading, over the step's warm-up and window.
    let mut usage = lab::usage::Usage::default();
    let mut last = usage.read(&groups).cpu_s;
    let mut proxy_cores = Vec::new();
    let s = &spec.search;
    let (warmup, window, probe) = (s.warmup, s.duration, s.probe);
    let progress = &mut opts.progress;
    let got = run_search(&plan, &opts.stop, |st| {
        let now = usage.read(&groups).cpu_s;
        let wall = warmup + if st.target.is_none() { probe } else { window };
        proxy_cores.push((now - last) / wall.as_secs_f64());
        last = now;
        if let Some(t) = st.target {
            progress(&format!(
                "{name}: {t:.0}/s: {:.0}/s, p99 {}{}",
                st.achieved,
                st.p99_ms.map_or("-".into(), |p| format!("{p:.2} ms")),
                if st.passed() { " pass" } else { " fail" }
            ));
        }
    });
    let after = if tps { d.sys.driver.handshakes() } else { None };
    let found = found(got, d, name, &mut **progress)?;
    row.handshakes = after.map(|a| {
        let h = before.as_ref().map_or(a.clone(), |b| a.since(b));
        ProxyHandshakes {
            full: h.full,
            resumed: h.resumed,
            source: h.source.to_string(),
        }
    });
    row.max_rate = found.max_rate;
    row.per_core = found.max_rate.map(|m| m / row.allocation.cores);
    row.proxy_cores_at_max = at_max(&found).and_then(|i| proxy_cores.get(i).copied());
    row.headroom = headroom(&found);
    row.search = Some(found);
    Ok(())
}

/// The index of the step that passed at the maximum (its last trial).
pub(super) fn at_max(s: &SearchResult) -> Option<usize> {
    let max = s.max_rate?;
    s.steps
        .iter()
        .rposition(|st| st.target.is_some_and(|t| (t - max).abs() < 1e-6) && st.passed())
}

/// Whether the generator left headroom up to the rate that set the limit: no step
/// voided by its lag, and its CPU below [`GENERATOR_CPU_LIMIT`] at the maximum and at
/// the lowest failed rate above it (or, when none failed, at the probe's ceiling).
pub(super) fn headroom(s: &SearchResult) -> Headroom {
    let mut h = Headroom::default();
    let Some(max) = s.max_rate else {
        h.why = Some("no rate held the bounds".into());
        return h;
    };
    let at = at_max(s).map(|i| &s.steps[i]);
    h.cpu_at_max = at.and_then(|st| st.generator_cpu);
    h.lag_p99_ms = at.map(|st| st.lag_p99_ms);
    let limit = s
        .steps
        .iter()
        .filter(|st| st.target.is_some_and(|t| t > max) && !st.passed())
        .min_by(|a, b| {
            a.target
                .partial_cmp(&b.target)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .or_else(|| s.steps.iter().find(|st| st.target.is_none()));
    h.cpu_at_limit = limit.and_then(|st| st.generator_cpu);
    let busy = |c: Option<f64>| c.is_some_and(|c| c >= GENERATOR_CPU_LIMIT);
    h.why = if let Some(g) = s.generator_limit {
        Some(format!("the generator fell behind at {g:.0}/s"))
    } else if busy(h.cpu_at_max) || busy(h.cpu_at_limit) {
        Some(format!(
            "the generator used {:.0} % of its cores at the limit: it may be the limit",
            100.0
                * h.cpu_at_limit
                    .unwrap_or(0.0)
                    .max(h.cpu_at_max.unwrap_or(0.0))
        ))
    } else {
        None
    };
    h.ok = h.why.is_none();
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::search::{Miss, SearchStep};

    pub(super) fn step(target: Option<f64>, missed: Vec<Miss>, cpu: f64) -> SearchStep {
        SearchStep {
            target,
            trial: 1,
            missed,
            generator_cpu: Some(cpu),
            lag_p99_ms: 0.05,
            ..SearchStep::default()
        }
    }

    pub(super) fn search(steps: Vec<SearchStep>, max: Option<f64>) -> SearchResult {
        SearchResult {
            max_rate: max,
            steps,
            ..SearchResult::default()
        }
    }

    #[test]
    pub(super) fn a_generator_with_spare_cpu_up_to_the_limit_leaves_headroom() {
        let s = search(
            vec![
                step(None, vec![], 0.6),
                step(Some(1000.0), vec![], 0.4),
                step(Some(1200.0), vec![Miss::P99], 0.5),
                step(Some(1100.0), vec![], 0.45),
            ],
            Some(1100.0),
        );
        let h = headroom(&s);
        assert!(h.ok, "{h:?}");
        assert_eq!((h.cpu_at_max, h.cpu_at_limit), (Some(0.45), Some(0.5)));
        assert_eq!(at_max(&s), Some(3));
    }

    #[test]
    pub(super) fn a_busy_generator_at_the_failed_rate_is_named_as_the_possible_limit() {
        let s = search(
            vec![
                step(None, vec![], 0.99),
                step(Some(1000.0), vec![], 0.7),
                step(Some(1200.0), vec![Miss::Rate], 0.93),
            ],
            Some(1000.0),
        );
        let h = headroom(&s);
        assert!(!h.ok);
        assert!(h.why.unwrap().contains("93 %"));
    }

    #[test]
    pub(super) fn with_no_failure_above_the_maximum_the_probe_is_the_limit() {
        let s = search(
            vec![step(None, vec![], 0.97), step(Some(1000.0), vec![], 0.5)],
            Some(1000.0),
        );
        assert_eq!(headroom(&s).cpu_at_limit, Some(0.97));
        assert!(!headroom(&s).ok);
    }

    #[test]
    pub(super) fn a_generator_limit_or_no_maximum_is_never_trusted() {
        let mut s = search(vec![step(Some(1000.0), vec![], 0.1)], Some(1000.0));
        s.generator_limit = Some(1500.0);
        assert!(headroom(&s).why.unwrap().contains("fell behind at 1500"));
        assert_eq!(
            headroom(&search(vec![], None)).why.as_deref(),
            Some("no rate held the bounds")
        );
    }
}
