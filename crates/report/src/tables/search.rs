//! The tables of a search for each system's maximum (study S2's maximum throughput)
//! and of a sizing scan (study S4's maximum per CPU allocation): what the stored
//! `search.json` and `sizing.json` of a run say, beside the rows of those that cannot
//! be read.

use super::{cols, listed, unreadable_row, Row, Table};
use crate::fmt::{fmt_opt_ms_cell, MISSING};
use crate::input::ReportInput;

/// Study S4's table: each system's maximum per CPU allocation and measure, per core,
/// its scaling against the 1-core row, what the proxy itself used at the maximum,
/// the proxy's own count of handshakes, whether the generator had headroom, and the
/// cost of a million requests or a thousand handshakes.
pub fn sizing(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    let mut cgroups = Vec::new();
    let mut price = None;
    for (i, sz) in input.sizings.iter().enumerate() {
        let z = &sz.sizing;
        if let Some(c) = &z.cgroup {
            if !cgroups.contains(c) {
                cgroups.push(c.clone());
            }
        }
        if let (Some(p), Some(c)) = (z.cost_per_core_hour, &z.currency) {
            price = Some(format!("{p} {c} per core-hour"));
        }
        for r in &z.rows {
            let a = &r.allocation;
            let cpus = match a.quota {
                Some(q) => format!("{} (quota {q})", a.cpus),
                None => a.cpus.clone(),
            };
            let rate = |v: Option<f64>| v.map_or_else(|| MISSING.into(), |v| format!("{v:.0}"));
            let handshakes = r.handshakes.as_ref().map_or_else(
                || MISSING.into(),
                |h| format!("{} full, {} resumed", h.full, h.resumed),
            );
            let trusted = if r.skipped.is_some() || r.max_rate.is_none() {
                MISSING.into()
            } else if r.headroom.ok {
                "yes".to_string()
            } else {
                format!("no: {}", r.headroom.why.clone().unwrap_or_default())
            };
            let note = r
                .skipped
                .clone()
                .or_else(|| r.search.as_ref().and_then(|s| s.failed.clone()))
                .or_else(|| {
                    r.search
                        .as_ref()
                        .filter(|s| s.max_rate.is_none() && !s.partial)
                        .map(|_| "no rate held the bounds".into())
                })
                .unwrap_or_else(|| MISSING.into());
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    sz.name.clone(),
                    r.measure
                        .as_ref()
                        .map_or_else(|| MISSING.into(), |m| m.label()),
                    format!("{}", a.cores),
                    cpus,
                    rate(r.max_rate),
                    rate(r.per_core),
                    z.efficiency(r)
                        .map_or_else(|| MISSING.into(), |e| format!("{:.0} %", e * 100.0)),
                    r.proxy_cores_at_max
                        .map_or_else(|| MISSING.into(), |c| format!("{c:.2}")),
                    handshakes,
                    trusted,
                    r.cost.map_or_else(|| MISSING.into(), fmt_price),
                    note,
                ],
            });
        }
    }
    let cols = cols(&[
        ("system", "system"),
        ("measure", "measure"),
        ("cores", "cores"),
        ("cpus", "CPUs"),
        ("max_rate", "max/s"),
        ("per_core", "per core/s"),
        ("scaling", "scaling vs 1 core"),
        ("proxy_cpu", "proxy CPU at max (cores)"),
        ("handshakes", "proxy handshakes"),
        ("trusted", "generator headroom"),
        ("cost", "cost"),
        ("note", "note"),
    ]);
    for u in input.unreadable(results::folder::SIZING) {
        rows.push(unreadable_row(u, cols.len()));
    }
    Table {
        id: "table-sizing",
        title: "Sizing: maximum per CPU allocation (study S4)",
        note: format!(
            "Each row is the highest constant rate the system held at that allocation within the search's bounds: requests/s over kept-alive connections (rps) or new TLS connections/s, one request each (tps). Whole cores are CPUs with one worker each; fractions are a CPU quota ({}). Scaling is the per-core figure over the 1-core row's. Proxy CPU is what its processes used at the maximum, in cores. Handshakes are the proxy's own count over the row's search. Cost ({}) is per million requests (rps) or per thousand handshakes (tps) at the maximum.",
            if cgroups.is_empty() { "none used".to_string() } else { cgroups.join(", ") },
            price.unwrap_or_else(|| "no sizing.cost given".into()),
        ),
        cols,
        rows,
    }
}

/// A price with three significant digits, however small (a thousand handshakes on a
/// quarter core cost thousandths of a cent): `0.00307`, `1.25`, `12.3`.
pub(super) fn fmt_price(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let decimals = (2 - v.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// The maximum each system sustained within the search's bounds (study S2's "max
/// rps"), with the figures of the step that set it.
pub fn maxima(input: &ReportInput) -> Table {
    let cols = cols(&[
        ("system", "system"),
        ("max_rate", "max req/s"),
        ("p50_ms", "p50 at max (ms)"),
        ("p99_ms", "p99 at max (ms)"),
        ("ceiling", "closed-loop ceiling req/s"),
        ("steps", "steps"),
        ("note", "note"),
    ]);
    let rows = input
        .searches
        .iter()
        .map(|sr| {
            let s = &sr.search;
            let at = s.max_rate.and_then(|m| {
                s.steps
                    .iter()
                    .filter(|st| st.target == Some(m) && st.passed())
                    .max_by(|a, b| a.achieved.total_cmp(&b.achieved))
            });
            let series = input.series_of(sr);
            let mut note = Vec::new();
            if s.partial {
                note.push("interrupted".to_string());
            }
            if let Some(g) = s.generator_limit {
                note.push(format!("generator could not hold {g:.0} req/s"));
            }
            if let Some(why) = &s.failed {
                note.push(why.clone());
            } else if s.max_rate.is_none() && !s.partial {
                note.push("no rate held the bounds".into());
            }
            Row {
                series,
                cells: vec![
                    sr.name.clone(),
                    s.max_rate
                        .map_or_else(|| MISSING.into(), |m| format!("{m:.0}")),
                    fmt_opt_ms_cell(at.and_then(|a| a.p50_ms)),
                    fmt_opt_ms_cell(at.and_then(|a| a.p99_ms)),
                    format!("{:.0}", s.ceiling),
                    s.steps.len().to_string(),
                    listed(&note, "; "),
                ],
            }
        })
        .chain(
            input
                .unreadable(results::folder::SEARCH)
                .map(|u| unreadable_row(u, cols.len())),
        )
        .collect();
    let bounds = input.searches.first().map(|s| &s.search.bounds);
    Table {
        id: "table-maxima",
        title: "Maximum throughput per system",
        note: format!(
            "The highest constant rate each system held with p99 <= {} ms and errors <= {} %, found by a closed-loop probe (ceiling) and a bisection over open-loop steps; p50 and p99 are those of the step at the maximum. Runs named system@N ran at N % of it.",
            bounds.map_or(MISSING.into(), |b| format!("{}", b.p99_ms)),
            bounds.map_or(MISSING.into(), |b| format!("{}", b.error_ratio * 100.0)),
        ),
        cols,
        rows,
    }
}
