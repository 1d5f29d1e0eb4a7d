//! The report's tables as plain data (a column key, a header, text cells), built once
//! from the results and rendered twice: as HTML in the page and as Markdown in
//! `report.md`. Cells hold the numbers as plain text, in the units the header names,
//! so a test (or a reader with a spreadsheet) can compare them with `result.json`.

use crate::fmt::{fmt_ms_cell, fmt_opt_ms1, fmt_opt_ms_cell, MISSING};
use crate::input::{ReportInput, Unreadable};
use results::{ErrorKind, Percentiles, RunResult, Spread};

pub use crate::table::{Row, Table};

fn cols(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, h)| (k.to_string(), h.to_string()))
        .collect()
}

/// Every table, in page order.
pub fn all(input: &ReportInput) -> Vec<Table> {
    let sizing = input.has_sizings().then(|| sizing(input));
    let maxima = input.has_searches().then(|| maxima(input));
    let steps = input
        .series
        .iter()
        .any(|s| !s.result.steps.is_empty())
        .then(|| steps(input));
    let mix = input
        .series
        .iter()
        .any(|s| s.result.mix.is_some())
        .then(|| mix(input));
    let route_sets = input
        .series
        .iter()
        .any(|s| s.result.lab.as_ref().is_some_and(|l| l.route_set.is_some()))
        .then(|| route_sets(input));
    sizing
        .into_iter()
        .chain(maxima)
        .chain(steps)
        .chain(route_sets)
        .chain(mix)
        .chain([
            percentiles(input),
            errors(input),
            changes(input),
            propagation(input),
            routes(input),
            resources(input),
            crate::failover::table(input),
            throughput(input),
            settings(input),
        ])
        .collect()
}

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

/// The row of a system whose stored search or scan cannot be read: its name, no
/// figures, and in its last column (the note) the file and why.
fn unreadable_row(u: &Unreadable, columns: usize) -> Row {
    let mut cells = vec![MISSING.to_string(); columns];
    cells[0] = u.name.clone();
    cells[columns - 1] = format!("cannot be read: {}", u.why);
    Row {
        series: None,
        cells,
    }
}

/// A price with three significant digits, however small (a thousand handshakes on a
/// quarter core cost thousandths of a cent): `0.00307`, `1.25`, `12.3`.
fn fmt_price(v: f64) -> String {
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
                    if note.is_empty() {
                        MISSING.into()
                    } else {
                        note.join("; ")
                    },
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

/// A load plan's steps per series: what each offered and sent, its own percentiles
/// and errors, and whether the generator kept its rate (judged per step).
pub fn steps(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        for st in &s.result.steps {
            let mut note = Vec::new();
            if !st.reached {
                note.push("below the offered rate");
            }
            if st.overloaded {
                note.push("generator late");
            }
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    st.plan.clone(),
                    format!("{:.1}", st.start_s),
                    format!("{:.1}", st.offered),
                    format!("{:.1}", st.achieved),
                    fmt_opt_ms_cell(st.latency_ms.p50),
                    fmt_opt_ms_cell(st.latency_ms.p99),
                    fmt_opt_ms_cell(st.latency_ms.max),
                    st.failed.to_string(),
                    fmt_ms_cell(st.lag_p99_ms),
                    if note.is_empty() {
                        MISSING.into()
                    } else {
                        note.join("; ")
                    },
                ],
            });
        }
    }
    Table {
        id: "table-steps",
        title: "Load plan, step by step",
        note: "Each step of the load plan (a ramp in 5 s pieces), its requests counted by their intended send time: the rate it offered and sent, the corrected latency and errors of its requests, and the generator's own lag in it. The connections stayed open across steps.".into(),
        cols: cols(&[
            ("series", "series"),
            ("step", "step"),
            ("start_s", "starts at (s)"),
            ("offered", "offered req/s"),
            ("achieved", "sent req/s"),
            ("p50_ms", "p50 (ms)"),
            ("p99_ms", "p99 (ms)"),
            ("max_ms", "max (ms)"),
            ("errors", "errors"),
            ("lag_p99_ms", "lag p99 (ms)"),
            ("note", "note"),
        ]),
        rows,
    }
}

/// Each series' route set (scenario `routes:`, one row per size of a
/// `route_scale` sweep): what the configuration cost, how long until every route
/// served, the latency of the mix and what the proxy held, then each route added or
/// removed during the load and how long until traffic showed it.
pub fn route_sets(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(lab) = &s.result.lab else {
            continue;
        };
        let Some(rs) = &lab.route_set else {
            continue;
        };
        let l = &s.result.latency_ms.corrected;
        let changes: Vec<String> = rs
            .changes
            .iter()
            .map(|c| {
                format!(
                    "{} {}: {}{}",
                    c.change,
                    c.route,
                    c.shown_ms
                        .map_or("not seen".into(), |ms| format!("{ms:.1} ms")),
                    c.status_writes
                        .map_or(String::new(), |w| format!(", {w} status writes"))
                )
            })
            .collect();
        rows.push(Row {
            series: Some(i),
            cells: vec![
                s.name.clone(),
                rs.count.to_string(),
                rs.hosts.to_string(),
                rs.config_bytes.map_or(MISSING.into(), |b| b.to_string()),
                format!("{:.1}", rs.apply_ms),
                rs.all_served_ms
                    .map_or(MISSING.into(), |ms| format!("{ms:.1}")),
                rs.never_count.to_string(),
                format!("{:.1}", rs.settled_ms),
                rs.status_writes.map_or(MISSING.into(), |w| w.to_string()),
                rs.apply_cpu_s.map_or(MISSING.into(), |c| format!("{c:.2}")),
                fmt_opt_ms_cell(l.p50),
                fmt_opt_ms_cell(l.p99),
                lab.resources
                    .as_ref()
                    .map_or(MISSING.into(), |r| format!("{:.1}", r.rss_max_mib)),
                if changes.is_empty() {
                    MISSING.into()
                } else {
                    changes.join("; ")
                },
            ],
        });
    }
    Table {
        id: "table-route-sets",
        title: "Route sets",
        note: "Each system's route set: its routes and hosts, the configuration it was given (bytes) and how long the apply took, how long from the apply until every route answered as itself (and how many never did), when the system reported it in force (a reload settled, a controller's Accepted status on every route) and the status writes a Kubernetes controller made to the routes meanwhile, the CPU its processes on this machine spent until then, the corrected latency of the whole load, the proxy's peak RSS, and each route added or removed during the load with the time until traffic showed it.".into(),
        cols: cols(&[
            ("series", "series"),
            ("routes", "routes"),
            ("hosts", "hosts"),
            ("config_bytes", "config (bytes)"),
            ("apply_ms", "apply (ms)"),
            ("all_served_ms", "all served (ms)"),
            ("never", "never served"),
            ("settled_ms", "reported (ms)"),
            ("status_writes", "status writes"),
            ("apply_cpu_s", "CPU to render (s)"),
            ("p50_ms", "p50 (ms)"),
            ("p99_ms", "p99 (ms)"),
            ("rss_mib", "proxy RSS (MiB)"),
            ("changes", "changes at N"),
        ]),
        rows,
    }
}

/// A request mix, group by group: the groups with errors first (most first), then
/// the slowest by p99, so the routes that failed or lagged lead the table.
pub fn mix(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(m) = &s.result.mix else {
            continue;
        };
        let mut groups: Vec<&results::MixGroup> = m.groups.iter().collect();
        let p99 = |g: &results::MixGroup| g.latency_ms.as_ref().map_or(0.0, |l| l.p99);
        groups.sort_by(|a, b| {
            b.failed()
                .cmp(&a.failed())
                .then_with(|| p99(b).total_cmp(&p99(a)))
        });
        for g in groups {
            let l = g.latency_ms.as_ref();
            let kinds: Vec<String> = g
                .errors
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .chain(g.status_codes.iter().map(|(c, n)| format!("HTTP {c}: {n}")))
                .collect();
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    g.name.clone(),
                    format!("{:.1}", g.share * 100.0),
                    g.requests.to_string(),
                    g.failed().to_string(),
                    fmt_opt_ms_cell(l.map(|l| l.p50)),
                    fmt_opt_ms_cell(l.map(|l| l.p99)),
                    fmt_opt_ms_cell(l.map(|l| l.max)),
                    if kinds.is_empty() {
                        MISSING.into()
                    } else {
                        kinds.join(", ")
                    },
                ],
            });
        }
    }
    let by: Vec<String> = input
        .series
        .iter()
        .filter_map(|s| {
            s.result
                .mix
                .as_ref()
                .map(|m| format!("{}: by {}", s.name, m.grouped_by))
        })
        .collect();
    Table {
        id: "table-mix",
        title: "Request mix, group by group",
        note: format!(
            "Each group of the request mix ({}): its share of the mix's weight, its requests and errors, and the corrected latency of its responses. Groups with errors come first, then the slowest by p99.",
            by.join("; ")
        ),
        cols: cols(&[
            ("series", "series"),
            ("group", "group"),
            ("share_pct", "share (%)"),
            ("requests", "requests"),
            ("errors", "errors"),
            ("p50_ms", "p50 (ms)"),
            ("p99_ms", "p99 (ms)"),
            ("max_ms", "max (ms)"),
            ("error_kinds", "errors by kind"),
        ]),
        rows,
    }
}

/// The percentile spectrum per series (corrected latency, ms).
pub fn percentiles(input: &ReportInput) -> Table {
    let mut c = vec![
        ("series".to_string(), "series".to_string()),
        ("count".to_string(), "responses".to_string()),
    ];
    for (_, l) in Percentiles::QUANTILES {
        c.push((format!("p{l}"), format!("p{l}")));
    }
    c.push(("max".into(), "max".into()));
    c.push(("mean".into(), "mean".into()));
    let rows = input
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let p = &s.result.latency_ms.corrected;
            let mut cells = vec![s.name.clone(), p.count.to_string()];
            cells.extend(p.values().iter().map(|v| fmt_opt_ms_cell(*v)));
            cells.push(fmt_opt_ms_cell(p.max));
            cells.push(fmt_opt_ms_cell(p.mean));
            Row {
                series: Some(i),
                cells,
            }
        })
        .collect();
    Table {
        id: "table-percentiles",
        title: "Latency percentiles",
        note: "Corrected latency (from the intended send time), in milliseconds.".into(),
        cols: c,
        rows,
    }
}

/// Errors by kind per series: the S1 table, with the request balance beside it.
pub fn errors(input: &ReportInput) -> Table {
    let mut c = vec![("series".to_string(), "series".to_string())];
    for k in ErrorKind::ALL {
        c.push((k.name().to_string(), k.name().replace('_', " ")));
    }
    c.extend(cols(&[
        ("total", "total errors"),
        ("status_codes", "status codes"),
        ("completed", "completed"),
        ("not_sent", "not sent"),
        ("intended", "intended"),
    ]));
    let rows = input
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let r = &s.result;
            let mut cells = vec![s.name.clone()];
            cells.extend(ErrorKind::ALL.iter().map(|k| r.errors.get(*k).to_string()));
            cells.push(r.errors.total().to_string());
            cells.push(if r.errors.status_codes.is_empty() {
                MISSING.into()
            } else {
                r.errors
                    .status_codes
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            cells.push(r.requests.completed.to_string());
            cells.push(r.requests.not_sent.to_string());
            cells.push(r.requests.intended.to_string());
            Row {
                series: Some(i),
                cells,
            }
        })
        .collect();
    Table {
        id: "table-errors",
        title: "Errors by kind",
        note: "Requests that failed, by kind: connect (refused or reset while connecting), connect timeout, tls (handshake), read (reset or EOF while reading), write, timeout (no full response in time), status (a response with status ≥ 400), framing (bytes after a complete response: a desync), reset (HTTP/2: a stream the server reset), grpc (a gRPC call that ended with a status other than OK).".into(),
        cols: c,
        rows,
    }
}

/// The impact of each change: the load's figures from it until the next one.
pub fn changes(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(lab) = &s.result.lab else { continue };
        for w in &lab.windows {
            let errs: u64 = w.errors.values().sum();
            let kinds = if w.errors.is_empty() {
                MISSING.to_string()
            } else {
                w.errors
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    w.change.clone(),
                    format!("{:.1}", w.from_ms / 1000.0),
                    format!("{:.1}", w.until_ms / 1000.0),
                    w.completed.to_string(),
                    errs.to_string(),
                    kinds,
                    w.reconnects_after_server_close.to_string(),
                    w.retried_after_goaway.to_string(),
                    fmt_ms_cell(w.p99_ms),
                    fmt_ms_cell(w.max_ms),
                ],
            });
        }
    }
    Table {
        id: "table-changes",
        title: "Impact of each change",
        note: "For each change asked for, the requests meant to be sent from it until the next one (each request in exactly one window): successful responses, errors (HTTP/2 adds reset: streams the server reset), reconnects (requests sent on a new connection because the server had closed the kept-alive one: not errors), GOAWAY retries (HTTP/2: requests the server refused in a GOAWAY, sent again on a new connection: not errors), p99 and max (ms). Times in seconds from the start of the measured window.".into(),
        cols: cols(&[
            ("series", "series"),
            ("change", "change"),
            ("from_s", "from (s)"),
            ("until_s", "until (s)"),
            ("completed", "completed"),
            ("errors", "errors"),
            ("errors_by_kind", "errors by kind"),
            ("reconnects", "reconnects"),
            ("goaway_retries", "GOAWAY retries"),
            ("p99_ms", "p99 (ms)"),
            ("max_ms", "max (ms)"),
        ]),
        rows,
    }
}

/// Endpoint propagation per series: min / median / max, added and removed.
pub fn propagation(input: &ReportInput) -> Table {
    let spread = |s: &Spread| {
        vec![
            s.n.to_string(),
            fmt_opt_ms1(s.min),
            fmt_opt_ms1(s.median),
            fmt_opt_ms1(s.max),
        ]
    };
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(lab) = &s.result.lab else { continue };
        let p = &lab.propagation;
        let never = p
            .added
            .iter()
            .filter(|e| e.propagation_ms.is_none())
            .count();
        let between: u64 = p.removed.iter().map(|e| e.errors_between).sum();
        let mut cells = vec![s.name.clone()];
        cells.extend(spread(&p.added_ms));
        cells.push(never.to_string());
        cells.extend(spread(&p.removed_ms));
        cells.push(between.to_string());
        rows.push(Row {
            series: Some(i),
            cells,
        });
    }
    Table {
        id: "table-propagation",
        title: "Endpoint propagation",
        note: "Added: from a backend's readiness to its first response through the proxy. Removed: from its stop to its last response, and the errors in between. Milliseconds.".into(),
        cols: cols(&[
            ("series", "series"),
            ("added_n", "added"),
            ("added_min", "min"),
            ("added_median", "median"),
            ("added_max", "max"),
            ("added_never", "never answered"),
            ("removed_n", "removed"),
            ("removed_min", "min"),
            ("removed_median", "median"),
            ("removed_max", "max"),
            ("removed_errors", "errors between"),
        ]),
        rows,
    }
}

/// Each route change per series: when the system said it was applied beside when
/// traffic showed it (the first response with the new route, the last without it).
/// No rows when no series changed a route.
pub fn routes(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(p) = s
            .result
            .lab
            .as_ref()
            .and_then(|l| l.route_propagation.as_ref())
        else {
            continue;
        };
        for c in &p.changes {
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    c.route.clone(),
                    format!("{:.1}", c.at_ms / 1000.0),
                    fmt_opt_ms1(c.applied_ms),
                    fmt_opt_ms1(c.seen_ms),
                    fmt_opt_ms1(c.last_old_ms),
                    c.responses_new.to_string(),
                    c.responses_old.to_string(),
                    c.errors.to_string(),
                ],
            });
        }
    }
    Table {
        id: "table-routes",
        title: "Route propagation",
        note: "Per route change, in milliseconds from the request for it: until the system said it was applied (an ACK, a finished reload, the controller's status), until the first response that showed the new route, and until the last response that did not (old and new served side by side until then). Responses and errors are those of the requests sent from the change until the next route change.".into(),
        cols: cols(&[
            ("series", "series"),
            ("route", "route"),
            ("at_s", "at (s)"),
            ("applied", "applied"),
            ("seen", "first seen"),
            ("last_old", "last old"),
            ("new", "new responses"),
            ("old", "old responses"),
            ("errors", "errors"),
        ]),
        rows,
    }
}

/// What each system under test spent in CPU and memory (its own processes, read
/// every second); no rows when none ran on the measuring machine.
pub fn resources(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(r) = s.result.lab.as_ref().and_then(|l| l.resources.as_ref()) else {
            continue;
        };
        rows.push(Row {
            series: Some(i),
            cells: vec![
                s.name.clone(),
                format!("{:.2}", r.cpu_mean),
                format!("{:.2}", r.cpu_max),
                format!("{:.1}", r.rss_max_mib),
                r.cpu_ms_per_1000
                    .map_or_else(|| MISSING.to_string(), |v| format!("{v:.1}")),
                r.samples
                    .iter()
                    .map(|x| x.processes)
                    .max()
                    .unwrap_or(0)
                    .to_string(),
            ],
        });
    }
    Table {
        id: "table-resources",
        title: "What the system under test spent",
        note: "CPU (user + system) in cores and resident memory of every process of the system under test (master, workers, old workers draining, every epoch), read from /proc about once a second during the measured window; CPU per 1,000 completed requests in milliseconds.".into(),
        cols: cols(&[
            ("series", "series"),
            ("cpu_mean", "CPU mean (cores)"),
            ("cpu_max", "CPU max (cores)"),
            ("rss_max", "RSS max (MiB)"),
            ("cpu_per_1000", "CPU ms / 1000 requests"),
            ("processes_max", "processes max"),
        ]),
        rows,
    }
}

/// Handshakes per second of the measured window, when each request had its own
/// connection (the S4 "SSL TPS"); `None` otherwise.
pub fn handshakes_per_s(r: &RunResult) -> Option<f64> {
    (r.config.new_connection && r.duration_s > 0.0 && r.tls.handshakes > 0)
        .then(|| r.tls.handshakes as f64 / r.duration_s)
}

/// The S4 table: throughput per series, so a scan over rates or cores reads as rows.
pub fn throughput(input: &ReportInput) -> Table {
    let rows = input
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let r = &s.result;
            Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    r.config.threads.to_string(),
                    r.config.connections.to_string(),
                    r.rate
                        .target
                        .map(|t| format!("{t:.0}"))
                        .unwrap_or_else(|| "max".into()),
                    format!("{:.1}", r.rate.achieved),
                    format!("{:.1}", r.rate.completed_per_s),
                    fmt_opt_ms_cell(r.latency_ms.corrected.p99),
                    handshakes_per_s(r)
                        .map(|h| format!("{h:.1}"))
                        .unwrap_or_else(|| MISSING.into()),
                    format!("{:.2}", r.generator.cpu_s),
                ],
            }
        })
        .collect();
    Table {
        id: "table-throughput",
        title: "Throughput per series",
        note: "Requests per second over the measured window: the target (-R), sent (achieved), and successful responses; TLS handshakes per second when every request opened a new connection; CPU seconds the load generator used.".into(),
        cols: cols(&[
            ("series", "series"),
            ("threads", "threads"),
            ("connections", "connections"),
            ("rate_target", "target req/s"),
            ("achieved", "sent req/s"),
            ("completed_per_s", "completed req/s"),
            ("p99_ms", "p99 (ms)"),
            ("handshakes_per_s", "handshakes/s"),
            ("cpu_s", "generator cpu (s)"),
        ]),
        rows,
    }
}

/// The load settings and versions, one column per series (there are more settings
/// than series, and a page is taller than it is wide).
pub fn settings(input: &ReportInput) -> Table {
    let per = |f: &dyn Fn(&RunResult) -> String| -> Vec<String> {
        input.series.iter().map(|s| f(&s.result)).collect()
    };
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let lines: Vec<(&str, Vec<String>)> = vec![
        ("started (UTC)", per(&|r| r.started_at.clone())),
        ("measured (s)", per(&|r| format!("{}", r.duration_s))),
        ("url", per(&|r| r.config.url.clone())),
        (
            "rate (req/s)",
            per(&|r| {
                r.config
                    .rate
                    .map(|x| format!("{x}"))
                    .unwrap_or_else(|| "max (closed loop)".into())
            }),
        ),
        ("connections", per(&|r| r.config.connections.to_string())),
        ("threads", per(&|r| r.config.threads.to_string())),
        ("schedule", per(&|r| r.config.schedule.clone())),
        ("warm-up (s)", per(&|r| format!("{}", r.config.warmup_s))),
        ("timeout (s)", per(&|r| format!("{}", r.config.timeout_s))),
        (
            "connect timeout (s)",
            per(&|r| format!("{}", r.config.connect_timeout_s)),
        ),
        ("new connection", per(&|r| yes_no(r.config.new_connection))),
        (
            "CPUs: generator / proxy (workers) / backends",
            per(
                &|r| match r.lab.as_ref().and_then(|l| l.placement.as_ref()) {
                    Some(p) => format!(
                        "{} / {} ({}) / {}",
                        p.generator, p.proxy, p.proxy_workers, p.backends
                    ),
                    None if !r.generator.cpus.is_empty() => format!("{} / – / –", r.generator.cpus),
                    None => "any".into(),
                },
            ),
        ),
        (
            "generator priority raised",
            per(&|r| yes_no(r.generator.priority_raised)),
        ),
        (
            "TLS",
            per(&|r| {
                r.config
                    .tls_version
                    .clone()
                    .or_else(|| r.tls.version.clone())
                    .unwrap_or_else(|| MISSING.into())
            }),
        ),
        (
            "sampled",
            per(&|r| {
                r.samples
                    .as_ref()
                    .map(|s| format!("{} ({} requests)", s.fraction, s.len()))
                    .unwrap_or_else(|| MISSING.into())
            }),
        ),
        (
            "versions",
            per(&|r| {
                let mut v: Vec<String> = r
                    .lab
                    .as_ref()
                    .map(|l| l.versions.iter().map(|(k, v)| format!("{k} {v}")).collect())
                    .unwrap_or_default();
                if !r.ingressbench_version.is_empty() {
                    v.insert(0, format!("ingressbench {}", r.ingressbench_version));
                }
                if v.is_empty() {
                    "not recorded".into()
                } else {
                    v.join(", ")
                }
            }),
        ),
        (
            "machine",
            per(&|r| {
                r.machine
                    .as_ref()
                    .map(|m| format!("{}, {} cores, kernel {}", m.cpu_model, m.cores, m.kernel))
                    .unwrap_or_else(|| "not recorded".into())
            }),
        ),
        ("partial", per(&|r| yes_no(r.partial))),
    ];
    let mut c = vec![("setting".to_string(), "setting".to_string())];
    c.extend(
        input
            .series
            .iter()
            .map(|s| (s.name.clone(), s.name.clone())),
    );
    Table {
        id: "table-settings",
        title: "Settings per series",
        note: String::new(),
        cols: c,
        rows: lines
            .into_iter()
            .map(|(k, v)| {
                let mut cells = vec![k.to_string()];
                cells.extend(v);
                Row {
                    series: None,
                    cells,
                }
            })
            .collect(),
    }
}

/// Why each series is not to be trusted: `(series, reason)`, from the text report's
/// warnings plus a proxy that died.
/// Each series' own warnings ([`RunResult::warnings`]: what went wrong around the
/// measurement, such as a refused CPU pin or a namespace left behind), by series.
pub fn run_warnings(input: &ReportInput) -> Vec<(usize, String)> {
    input
        .series
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.result.warnings.iter().map(move |w| (i, w.clone())))
        .collect()
}

pub fn warnings(input: &ReportInput) -> Vec<(usize, String)> {
    let mut w = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        for line in crate::text::warnings(&s.result) {
            w.push((i, line));
        }
        if s.result.lab.as_ref().is_some_and(|l| l.proxy_died) {
            w.push((i, "the proxy died during the run".to_string()));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Series;
    use results::{EventWindow, LabInfo, PropagationEntry};

    fn input() -> ReportInput {
        let mut r = RunResult::default();
        r.errors.connect = 33365;
        r.errors.connect_timeout = 309;
        r.errors.read = 4650;
        r.errors.status = 2;
        r.errors.status_codes.insert("502".into(), 2);
        r.requests.intended = 100;
        r.requests.completed = 90;
        r.requests.sent = 100;
        r.requests.failed = 10;
        r.latency_ms.corrected.p99 = Some(23.743);
        r.latency_ms.corrected.p99_9999 = Some(60_000.0);
        r.config.new_connection = true;
        r.duration_s = 10.0;
        r.tls.handshakes = 8000;
        let mut lab = LabInfo::default();
        lab.windows.push(EventWindow {
            change: "scale 5 -> 7".into(),
            from_ms: 3000.5,
            until_ms: 5645.4,
            completed: 1500,
            errors: [("read".to_string(), 3)].into(),
            p99_ms: 36.607,
            max_ms: 43.263,
            reconnects_after_server_close: 12,
            retried_after_goaway: 4,
        });
        lab.propagation.added.push(PropagationEntry {
            backend: "b6".into(),
            at_ms: 1.0,
            propagation_ms: None,
            errors_between: 0,
        });
        lab.propagation.added_ms = Spread::of(&[139.1, 151.3, 199.7]);
        lab.proxy_died = true;
        r.lab = Some(lab);
        ReportInput {
            runs: vec![Default::default()],
            series: vec![
                Series {
                    name: "nginx-reload".into(),
                    result: r,
                    ..Default::default()
                },
                Series {
                    name: "plain".into(),
                    ..Default::default()
                },
            ],
            searches: Vec::new(),
            sizings: Vec::new(),
            unreadable: Vec::new(),
        }
    }

    #[test]
    fn route_changes_have_a_row_each_with_the_result_figures() {
        let mut i = input();
        assert!(routes(&i).rows.is_empty(), "no route changed: no row");
        let lab = i.series[0].result.lab.as_mut().unwrap();
        lab.route_propagation = Some(results::RoutePropagation::of(vec![
            results::RouteChange {
                route: "cors".into(),
                at_ms: 30_000.0,
                applied_ms: Some(4.26),
                seen_ms: Some(12.5),
                last_old_ms: None,
                responses_new: 900,
                responses_old: 0,
                errors: 0,
            },
            results::RouteChange {
                route: "base".into(),
                at_ms: 60_000.0,
                applied_ms: None,
                seen_ms: None,
                last_old_ms: Some(29_000.0),
                responses_new: 0,
                responses_old: 1000,
                errors: 7,
            },
        ]));
        let t = routes(&i);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.cell(0, "series"), Some("nginx-reload"));
        assert_eq!(t.cell(0, "at_s"), Some("30.0"));
        assert_eq!(t.cell(0, "applied"), Some("4.3"));
        assert_eq!(t.cell(0, "seen"), Some("12.5"));
        assert_eq!(t.cell(0, "last_old"), Some(MISSING));
        assert_eq!(t.cell(1, "route"), Some("base"));
        assert_eq!(t.cell(1, "seen"), Some(MISSING));
        assert_eq!(t.cell(1, "errors"), Some("7"));
    }

    #[test]
    fn the_errors_table_has_exactly_the_counts() {
        let t = errors(&input());
        assert_eq!(t.cell(0, "series"), Some("nginx-reload"));
        assert_eq!(t.cell(0, "connect"), Some("33365"));
        assert_eq!(t.cell(0, "connect_timeout"), Some("309"));
        assert_eq!(t.cell(0, "read"), Some("4650"));
        assert_eq!(t.cell(0, "tls"), Some("0"));
        assert_eq!(t.cell(0, "total"), Some("38326"));
        assert_eq!(t.cell(0, "status_codes"), Some("502: 2"));
        assert_eq!(t.cell(0, "intended"), Some("100"));
        assert_eq!(t.cell(1, "total"), Some("0"));
        assert!(t.rows.iter().all(|r| r.cells.len() == t.cols.len()));
    }

    #[test]
    fn percentiles_changes_propagation_throughput() {
        let i = input();
        let p = percentiles(&i);
        assert_eq!(p.cell(0, "p99"), Some("23.743"));
        assert_eq!(p.cell(0, "p99.9999"), Some("60000.000"));
        let c = changes(&i);
        assert_eq!(c.rows.len(), 1, "only lab series have changes");
        assert_eq!(c.cell(0, "from_s"), Some("3.0"));
        assert_eq!(c.cell(0, "errors"), Some("3"));
        assert_eq!(c.cell(0, "errors_by_kind"), Some("read: 3"));
        assert_eq!(c.cell(0, "reconnects"), Some("12"));
        assert_eq!(c.cell(0, "max_ms"), Some("43.263"));
        let g = propagation(&i);
        assert_eq!(g.cell(0, "added_median"), Some("151.3"));
        assert_eq!(g.cell(0, "added_never"), Some("1"));
        assert_eq!(g.cell(0, "removed_min"), Some("–"));
        let t = throughput(&i);
        assert_eq!(t.cell(0, "handshakes_per_s"), Some("800.0"));
        assert_eq!(t.cell(1, "handshakes_per_s"), Some("–"));
        assert_eq!(t.cell(1, "rate_target"), Some("max"));
        for t in all(&i) {
            assert!(
                t.rows.iter().all(|r| r.cells.len() == t.cols.len()),
                "{}",
                t.id
            );
        }
    }

    #[test]
    fn warnings_name_their_series() {
        let w = warnings(&input());
        assert!(w.iter().any(|(i, l)| *i == 0 && l.contains("proxy died")));
        // The default result is balanced (0 intended adds up) but received nothing.
        assert!(w
            .iter()
            .all(|(i, l)| *i == 0 || l == "no response was received: no request was sent"));
    }

    #[test]
    fn settings_say_where_each_part_ran() {
        let mut i = input();
        if let Some(l) = i.series[0].result.lab.as_mut() {
            l.placement = Some(results::PlacementInfo {
                generator: "0".into(),
                proxy: "1".into(),
                backends: "1".into(),
                proxy_workers: 1,
            });
        }
        i.series[0].result.generator.priority_raised = true;
        let t = settings(&i);
        let text = format!("{:?}", t.rows);
        assert!(text.contains("0 / 1 (1) / 1"), "{text}");
        assert!(text.contains("generator priority raised"), "{text}");
        assert!(text.contains("any"), "a plain load ran anywhere: {text}");
    }

    #[test]
    fn prices_keep_three_significant_digits() {
        assert_eq!(fmt_price(0.0000324), "0.0000324");
        assert_eq!(fmt_price(0.00307), "0.00307");
        assert_eq!(fmt_price(1.254), "1.25");
        assert_eq!(fmt_price(12.34), "12.3");
        assert_eq!(fmt_price(1234.0), "1234");
    }

    #[test]
    fn the_sizing_table_has_per_core_scaling_cost_and_trust_per_row() {
        use results::search::SearchResult;
        use results::sizing::{
            Allocation, Headroom, Measure, ProxyHandshakes, SizingResult, SizingRow,
        };
        let tps = Measure::Tps {
            key: results::tls::KeyType::Rsa2048,
            version: results::tls::TlsVersion::V13,
            resumption: false,
        };
        let row = |cores: f64, quota: Option<f64>, max: Option<f64>, ok: bool| SizingRow {
            allocation: Allocation {
                cores,
                cpus: "1".into(),
                workers: 1,
                quota,
            },
            measure: Some(tps.clone()),
            max_rate: max,
            per_core: max.map(|m| m / cores),
            proxy_cores_at_max: Some(cores * 0.98),
            headroom: Headroom {
                ok,
                why: (!ok).then(|| "the generator fell behind at 900/s".into()),
                ..Headroom::default()
            },
            handshakes: Some(ProxyHandshakes {
                full: 1234,
                resumed: 0,
                source: "nginx".into(),
            }),
            cost: max.map(|_| 0.0000324),
            search: Some(SearchResult::default()),
            ..SizingRow::default()
        };
        let scan = SizingResult {
            system: "nginx-reload".into(),
            cgroup: Some("cgroup v1 cpu.cfs_quota_us".into()),
            cost_per_core_hour: Some(0.048),
            currency: Some("USD".into()),
            rows: vec![
                row(0.5, Some(0.5), Some(300.0), true),
                row(1.0, None, Some(500.0), false),
                SizingRow {
                    skipped: Some("needs 2 CPUs".into()),
                    ..row(2.0, None, None, false)
                },
            ],
            ..SizingResult::default()
        };
        let input = ReportInput {
            runs: vec![Default::default()],
            sizings: vec![crate::input::Sized {
                name: "nginx-reload".into(),
                run: 0,
                sizing: scan,
            }],
            ..Default::default()
        };
        let t = sizing(&input);
        assert_eq!(t.cell(0, "measure"), Some("tps rsa2048 TLS1.3"));
        assert_eq!(t.cell(0, "cpus"), Some("1 (quota 0.5)"));
        assert_eq!(t.cell(0, "per_core"), Some("600"));
        // 600 per core at half a core against 500 at one: 120 % of linear.
        assert_eq!(t.cell(0, "scaling"), Some("120 %"));
        assert_eq!(t.cell(0, "handshakes"), Some("1234 full, 0 resumed"));
        assert_eq!(t.cell(0, "trusted"), Some("yes"));
        assert_eq!(t.cell(0, "cost"), Some("0.0000324"));
        assert_eq!(
            t.cell(1, "trusted"),
            Some("no: the generator fell behind at 900/s")
        );
        assert_eq!(t.cell(2, "max_rate"), Some(MISSING));
        assert_eq!(t.cell(2, "note"), Some("needs 2 CPUs"));
        assert!(t.note.contains("cgroup v1 cpu.cfs_quota_us"), "{}", t.note);
        assert!(t.note.contains("0.048 USD per core-hour"), "{}", t.note);
        assert_eq!(all(&input)[0].id, "table-sizing");
    }

    #[test]
    fn a_plans_steps_are_a_table_and_a_chart_of_latency_against_offered_rate() {
        let step = |plan: &str, offered: f64, p99: f64, reached: bool| results::StepResult {
            plan: plan.into(),
            offered,
            achieved: if reached { offered } else { offered * 0.9 },
            latency_ms: Percentiles {
                p50: Some(p99 / 2.0),
                p99: Some(p99),
                ..Default::default()
            },
            reached,
            ..Default::default()
        };
        let r = RunResult {
            steps: vec![
                step("2000:5s", 2000.0, 9.0, false),
                step("1000:5s", 1000.0, 2.0, true),
            ],
            ..Default::default()
        };
        let input = ReportInput::single("load", r);
        let t = steps(&input);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.cell(0, "step"), Some("2000:5s"));
        assert_eq!(t.cell(0, "achieved"), Some("1800.0"));
        assert_eq!(t.cell(0, "note"), Some("below the offered rate"));
        assert_eq!(t.cell(1, "note"), Some(MISSING));
        assert!(all(&input).iter().any(|t| t.id == "table-steps"));
        let charts = crate::charts::build(&input);
        let plan = charts
            .iter()
            .find(|c| c.id == "chart-plan")
            .expect("chart-plan");
        assert!(plan.title.contains("offered rate"), "{}", plan.title);
        // Without a plan there is neither.
        let plain = ReportInput::single("load", RunResult::default());
        assert!(all(&plain).iter().all(|t| t.id != "table-steps"));
        assert!(crate::charts::build(&plain)
            .iter()
            .all(|c| c.id != "chart-plan"));
    }

    #[test]
    fn maxima_come_from_the_step_at_the_maximum_and_say_why_one_is_missing() {
        use results::search::{Miss, SearchResult, SearchStep};
        let step = |t: Option<f64>, achieved: f64, p99: f64, missed: Vec<Miss>| SearchStep {
            target: t,
            trial: 1,
            achieved,
            p50_ms: Some(p99 / 4.0),
            p99_ms: Some(p99),
            missed,
            ..Default::default()
        };
        let found = SearchResult {
            ceiling: 900.0,
            max_rate: Some(1000.0),
            generator_limit: Some(1200.0),
            steps: vec![
                step(None, 900.0, 50.0, vec![]),
                step(Some(1000.0), 999.0, 4.0, vec![]),
                step(Some(1100.0), 1050.0, 80.0, vec![Miss::P99, Miss::Rate]),
                step(Some(1200.0), 1150.0, 90.0, vec![Miss::Generator]),
            ],
            ..Default::default()
        };
        let none = SearchResult {
            ceiling: 10.0,
            steps: vec![step(Some(10.0), 10.0, 99.0, vec![Miss::P99])],
            ..Default::default()
        };
        let input = ReportInput {
            runs: vec![Default::default()],
            series: vec![Series {
                name: "host@30".into(),
                ..Default::default()
            }],
            searches: vec![
                crate::input::Searched {
                    name: "host".into(),
                    run: 0,
                    search: found,
                },
                crate::input::Searched {
                    name: "vxlan".into(),
                    run: 0,
                    search: none,
                },
            ],
            sizings: Vec::new(),
            unreadable: Vec::new(),
        };
        let t = maxima(&input);
        assert_eq!(t.cell(0, "max_rate"), Some("1000"));
        assert_eq!(t.cell(0, "p99_ms"), Some("4.000"));
        assert_eq!(t.cell(0, "ceiling"), Some("900"));
        assert_eq!(t.cell(0, "steps"), Some("4"));
        assert_eq!(
            t.cell(0, "note"),
            Some("generator could not hold 1200 req/s")
        );
        assert_eq!(t.rows[0].series, Some(0), "coloured as its fraction runs");
        assert_eq!(t.cell(1, "max_rate"), Some(MISSING));
        assert_eq!(t.cell(1, "note"), Some("no rate held the bounds"));
        assert_eq!(t.rows[1].series, None);
        assert_eq!(all(&input)[0].id, "table-maxima");
    }
}
