//! The tables of any load run: its percentiles, its errors, its throughput and
//! settings, a load plan's steps and a request mix's groups.

use super::{cols, counted, listed, per_series, Row, Table};
use crate::fmt::{fmt_ms_cell, fmt_opt_ms_cell, MISSING};
use crate::input::ReportInput;
use results::{ErrorKind, Percentiles, RunResult};

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
                    listed(&note, ", "),
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

/// A repeated run's repetitions per series, one row each, so the spread is in plain
/// sight before any comparison: the series' own figures pool them all.
pub fn repetitions(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        for (k, x) in s.result.repetitions.iter().enumerate() {
            let c = &x.latency_ms.corrected;
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    (k + 1).to_string(),
                    fmt_opt_ms_cell(c.p50),
                    fmt_opt_ms_cell(c.p99),
                    fmt_opt_ms_cell(c.max),
                    format!("{:.1}", x.rate.completed_per_s),
                    x.requests.failed.to_string(),
                    if x.partial { "interrupted" } else { MISSING }.to_string(),
                ],
            });
        }
    }
    Table {
        id: "table-repetitions",
        title: "Repetitions",
        note: "Each repetition of a repeated run on its own: corrected latency (ms), completed requests per second and failed requests. The series' other figures pool them all.".into(),
        cols: cols(&[
            ("series", "series"),
            ("run", "run"),
            ("p50_ms", "p50 (ms)"),
            ("p99_ms", "p99 (ms)"),
            ("max_ms", "max (ms)"),
            ("completed_per_s", "req/s"),
            ("errors", "errors"),
            ("note", "note"),
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
                    listed(&kinds, ", "),
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
    let rows = per_series(input, |s| {
        let p = &s.result.latency_ms.corrected;
        let mut cells = vec![s.name.clone(), p.count.to_string()];
        cells.extend(p.values().iter().map(|v| fmt_opt_ms_cell(*v)));
        cells.push(fmt_opt_ms_cell(p.max));
        cells.push(fmt_opt_ms_cell(p.mean));
        cells
    });
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
    let rows = per_series(input, |s| {
        let r = &s.result;
        let mut cells = vec![s.name.clone()];
        cells.extend(ErrorKind::ALL.iter().map(|k| r.errors.get(*k).to_string()));
        cells.push(r.errors.total().to_string());
        cells.push(counted(&r.errors.status_codes));
        cells.push(r.requests.completed.to_string());
        cells.push(r.requests.not_sent.to_string());
        cells.push(r.requests.intended.to_string());
        cells
    });
    Table {
        id: "table-errors",
        title: "Errors by kind",
        note: "Requests that failed, by kind: connect (refused or reset while connecting), connect timeout, tls (handshake), read (reset or EOF while reading), write, timeout (no full response in time), status (a response with status ≥ 400), framing (bytes after a complete response: a desync), reset (HTTP/2: a stream the server reset), grpc (a gRPC call that ended with a status other than OK).".into(),
        cols: c,
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
    let rows = per_series(input, |s| {
        let r = &s.result;
        vec![
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
        ]
    });
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
