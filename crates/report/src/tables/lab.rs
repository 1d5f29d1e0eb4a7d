//! The tables of a lab run: what each change did to the load, how long endpoints and
//! routes took to show in traffic, the route sets, and what the system under test
//! spent. A plain load has no rows in them.

use super::{cols, counted, listed, Row, Table};
use crate::fmt::{fmt_ms_cell, fmt_opt_ms1, fmt_opt_ms_cell, MISSING};
use crate::input::ReportInput;
use results::Spread;

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
                listed(&changes, "; "),
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

/// The impact of each change: the load's figures from it until the next one, and
/// (in a run that held them) what the long-lived sessions met in it.
pub fn changes(input: &ReportInput) -> Table {
    let with_sessions = input.series.iter().any(|s| s.result.sessions.is_some());
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(lab) = &s.result.lab else { continue };
        for w in &lab.windows {
            let errs: u64 = w.errors.values().sum();
            let kinds = counted(&w.errors);
            let mut cells = vec![
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
            ];
            if with_sessions {
                match &w.sessions {
                    Some(ss) => cells.extend([
                        ss.cut().to_string(),
                        ss.broken().to_string(),
                        counted(&ss.ends),
                        ss.reopened.to_string(),
                        ss.lost.to_string(),
                        fmt_opt_ms_cell(ss.p99_ms),
                        fmt_opt_ms_cell(ss.max_ms),
                    ]),
                    None => cells.extend(std::iter::repeat_n(MISSING.to_string(), 7)),
                }
            }
            rows.push(Row {
                series: Some(i),
                cells,
            });
        }
    }
    let mut columns = vec![
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
    ];
    let mut note = "For each change asked for, the requests meant to be sent from it until the next one (each request in exactly one window): successful responses, errors (HTTP/2 adds reset: streams the server reset), reconnects (requests sent on a new connection because the server had closed the kept-alive one: not errors), GOAWAY retries (HTTP/2: requests the server refused in a GOAWAY, sent again on a new connection: not errors), p99 and max (ms). Times in seconds from the start of the measured window.".to_string();
    if with_sessions {
        columns.extend([
            ("sessions_cut", "sessions cut"),
            ("sessions_broken", "cut without close"),
            ("session_ends", "ends by kind"),
            ("sessions_reopened", "reopened"),
            ("messages_lost", "messages lost"),
            ("message_p99_ms", "message p99 (ms)"),
            ("message_max_ms", "message max (ms)"),
        ]);
        note.push_str(" Sessions: the long-lived WebSocket sessions that ended in the window (by the time they ended; a close frame and its code, or an EOF, reset or timeout with none), those reopened, the messages lost in flight at an end, and the latency of the messages meant to be sent in the window, from their intended send.");
    }
    Table {
        id: "table-changes",
        title: "Impact of each change",
        note,
        cols: cols(&columns),
        rows,
    }
}

/// The long-lived sessions of each series (`sessions:`): how many ended before the
/// run did and how, what they cost, and their messages' latency.
pub fn sessions(input: &ReportInput) -> Table {
    let rows = input
        .series
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let ss = s.result.sessions.as_ref()?;
            Some(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    ss.sessions.to_string(),
                    ss.cut().to_string(),
                    ss.broken().to_string(),
                    counted(&ss.ends),
                    ss.reopened.to_string(),
                    fmt_opt_ms_cell(ss.reopen_ms.p99),
                    ss.messages.lost.to_string(),
                    fmt_opt_ms_cell(ss.latency_ms.p50),
                    fmt_opt_ms_cell(ss.latency_ms.p99),
                    fmt_opt_ms_cell(ss.latency_ms.max),
                    counted(&ss.open_failures),
                ],
            })
        })
        .collect();
    Table {
        id: "table-sessions",
        title: "Long-lived sessions",
        note: "Each system's WebSocket sessions held beside the load: how many, how many ended before the run did (cut), of those with no close frame (an EOF, a reset, an echo that never came), the ends by kind (a close frame by its code), the reopens and the p99 of the time from an end to the new 101, the messages lost in flight at an end, the messages' latency from their intended send (ms), and the opens that failed, by kind.".into(),
        cols: cols(&[
            ("series", "series"),
            ("sessions", "sessions"),
            ("cut", "cut"),
            ("broken", "without close"),
            ("ends", "ends by kind"),
            ("reopened", "reopened"),
            ("reopen_p99_ms", "reopen p99 (ms)"),
            ("lost", "messages lost"),
            ("p50_ms", "message p50 (ms)"),
            ("p99_ms", "message p99 (ms)"),
            ("max_ms", "message max (ms)"),
            ("open_failures", "failed opens"),
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

/// Behaviour probes (`probes:`): every field where a system answered otherwise
/// than the baseline before its load, every answer a change during the load
/// changed, and every expectation not met, with both values; a row per system that
/// differs from the baseline in nothing. No rows when no series sent probes.
pub fn probes(input: &ReportInput) -> Table {
    let mut rows = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let Some(p) = s.result.lab.as_ref().and_then(|l| l.probes.as_ref()) else {
            continue;
        };
        let mut row = |when: String, probe: &str, field: &str, reference: &str, got: &str| {
            rows.push(Row {
                series: Some(i),
                cells: vec![
                    s.name.clone(),
                    when,
                    probe.into(),
                    field.into(),
                    reference.into(),
                    got.into(),
                ],
            });
        };
        if p.differences.is_empty() {
            let what = if s.name == p.baseline
                || s.result
                    .lab
                    .as_ref()
                    .is_some_and(|l| l.system == p.baseline)
            {
                "(the baseline)"
            } else {
                "(the same as the baseline)"
            };
            let all = format!("all {}", p.observed.len());
            row("before the load".into(), &all, what, MISSING, MISSING);
        }
        // The corpus's probes are read in its own table, a cell per behaviour.
        let in_corpus = |probe: &str| {
            probe
                .split_once('.')
                .is_some_and(|(b, _)| p.corpus.iter().any(|c| c.behaviour == b))
        };
        for d in p.differences.iter().filter(|d| !in_corpus(&d.probe)) {
            let when = format!("before the load (vs {})", p.baseline);
            row(when, &d.probe, &d.field, &d.baseline, &d.system);
        }
        for r in &p.rounds {
            for d in &r.changed {
                let when = format!(
                    "after {} at {:.1} s (vs before the load)",
                    r.after,
                    r.at_ms / 1000.0
                );
                row(when, &d.probe, &d.field, &d.baseline, &d.system);
            }
        }
        for u in &p.unmet {
            let when = format!("{} (expected)", u.round);
            row(when, &u.probe, &u.field, &u.expected, &u.got);
        }
    }
    Table {
        id: "table-probes",
        title: "Behaviour probes: where a system answered otherwise than the baseline, than before, or than expected",
        note: "The same requests sent to every system before its load, each compared with the baseline system's answer: the status, the Location, who answered (a backend, or the proxy itself), and what reached the backend (method, target as bytes, forwarding and hop-by-hop headers, body length, attempts). X-Forwarded-For, X-Real-IP, X-Request-Id, Via and Forwarded are compared on whether they arrived. The probes run again after each change and at the end of the load, each round compared with the system's own answers before the load; an expectation (expect:) is checked in every round. docs/probes.md says what each probe covers.".into(),
        cols: cols(&[
            ("series", "series"),
            ("when", "when"),
            ("probe", "probe"),
            ("field", "field"),
            ("reference", "baseline, before or expected"),
            ("system", "this system"),
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
        title: "What the system under test spent: its own CPU and memory",
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
