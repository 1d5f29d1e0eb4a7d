//! The terminal summary of a load run, laid out like wrk2's so its users read it
//! without thinking, plus what wrk2 lacks: errors by kind, the request balance, the
//! generator's own lag, and a loud warning when the numbers are not to be trusted;
//! and `summary.txt` ([`Summary`]), the systems of a lab run side by side.

use crate::fmt::{fmt_bytes, fmt_ms, fmt_opt_ms, fmt_secs};
use results::{ErrorKind, Percentiles, RunResult};
use std::fmt::Write as _;

/// Why a result should not be trusted, one reason per line; empty when it can be.
///
/// A run that failed ([`RunResult::failure`]) comes first: nothing else about it matters.
pub fn warnings(r: &RunResult) -> Vec<String> {
    let mut w: Vec<String> = r.failure().into_iter().collect();
    let parts = r
        .generators
        .as_ref()
        .map(|g| &g.parts[..])
        .unwrap_or_default();
    let interrupted = parts.is_empty() || parts.iter().any(|p| p.partial);
    if r.partial && interrupted {
        w.push("the run was interrupted: figures cover only what was measured".to_string());
    }
    if let Some(g) = &r.generators {
        // A split run names the generator that failed, was overloaded or late: the
        // merged lag alone would hide one generator among several.
        w.extend(g.warnings());
    } else if r.generator.overloaded || r.generator.woke_late {
        w.push(generator_late(&r.generator));
    }
    // A generator that failed already says why the rate fell short.
    let missing = parts.iter().any(|p| p.error.is_some());
    if let Some(t) = r.rate.target.filter(|_| !missing) {
        if !r.rate.reached {
            w.push(rate_missed(r, t));
        }
    }
    if !r.requests.balanced() {
        w.push("the request balance does not add up: this is a bug in ingressbench".to_string());
    }
    w
}

/// Why the generator was late, with the advice that fits its cause
/// ([`results::LagCause`]): a generator short of CPU needs more threads; other
/// processes on its CPUs need moving; a machine that stole time or stalled needs a
/// quieter machine, and neither threads nor cores would help.
fn generator_late(g: &results::Generator) -> String {
    use results::LagCause;
    let lag = format!(
        "its lag p99 was {} (limit {})",
        fmt_ms(g.lag_p99_ms),
        fmt_ms(g.lag_limit_ms)
    );
    let saw = g
        .machine
        .as_ref()
        .map_or_else(|| "nothing measurable".to_string(), |m| m.describe());
    let floor = g.wakeup_us.as_ref().map_or(String::new(), |w| {
        format!(
            " (this machine's timed wake-ups, measured before the run: p50 {:.0} us, p99 {:.0} us, max {:.0} us)",
            w.p50, w.p99, w.max
        )
    });
    let what = if g.overloaded {
        format!("the load generator was overloaded: {lag}")
    } else {
        format!("the load generator woke late: {lag} while its threads had CPU to spare")
    };
    match (g.cause, g.overloaded) {
        (Some(LagCause::Machine), _) => format!(
            "{what}, and the machine took the time: {saw}{floor}; latencies include the delay. More threads or other cores would not help: run on a quieter machine (a host that does not take its CPUs back)"
        ),
        (Some(LagCause::OtherProcesses), _) => format!(
            "{what} while {saw}{floor}; latencies include the delay. Give the generator cores nothing else uses (placement, --cpus)"
        ),
        (_, true) => format!(
            "{what}; latencies include its own delay. Use more threads, fewer connections, or a lower rate"
        ),
        (_, false) => format!(
            "{what}, so more threads would not help, and the machine took no measurable time ({saw}): its timed wake-ups were slow{floor}; latencies include the delay"
        ),
    }
}

/// Why the target rate was missed, naming whose doing it was. Each cause has its own
/// words: a server that kept every connection busy (its latency, already in the
/// corrected figures: not the generator's fault), connections that could not be
/// opened (see the errors), or a generator that was late (its own delay, which also
/// marks it overloaded when its lag says so).
fn rate_missed(r: &RunResult, target: f64) -> String {
    let mut s = format!(
        "the target rate was not reached: {:.1} of {:.1} requests/s were sent during the window",
        r.rate.achieved, target
    );
    let sf = &r.rate.shortfall;
    if sf.total() == 0 {
        // A file written before the causes were recorded.
        if r.requests.not_sent > 0 {
            let _ = write!(s, " ({} not sent)", r.requests.not_sent);
        }
        return s;
    }
    let mut why = Vec::new();
    if sf.connections_busy > 0 {
        why.push(format!(
            "{} waited for connections the server kept busy with slow responses (the server's latency, in the corrected figures: not a fault of the generator)",
            sf.connections_busy
        ));
    }
    if sf.connections_failed > 0 {
        why.push(format!(
            "{} waited for connections still being opened (connects or TLS handshakes failing or slow: see the errors)",
            sf.connections_failed
        ));
    }
    if sf.generator_late > 0 {
        why.push(format!(
            "{} had a free connection but the generator was late sending them (its own delay: lag p99 {})",
            sf.generator_late,
            fmt_ms(r.generator.lag_p99_ms)
        ));
    }
    let then = if r.requests.not_sent > 0 {
        "the interrupt left them unsent"
    } else {
        "they were sent after it and are measured from their intended times"
    };
    let _ = write!(
        s,
        "; of the {} due in it but not started by its end ({then}), {}",
        sf.total(),
        why.join("; ")
    );
    s
}

/// One line on the generators of a split run: each one's CPU, lag p99 and start
/// offset, so a glance shows whether they were alike.
fn generators_line(g: &results::Generators) -> String {
    let each: Vec<String> = g
        .parts
        .iter()
        .map(|p| {
            if p.error.is_some() {
                return format!("#{} failed", p.index);
            }
            let cpu = if p.cpus.is_empty() {
                String::new()
            } else {
                format!("cpu {}, ", p.cpus)
            };
            let start = p
                .start_offset_ms
                .map(|o| format!(", started +{}", fmt_ms(o)))
                .unwrap_or_default();
            format!("#{} {cpu}lag p99 {}{start}", p.index, fmt_ms(p.lag_p99_ms))
        })
        .collect();
    format!("  {} generators: {}", g.parts.len(), each.join("; "))
}

/// The summary: header, latency, distribution (`detailed`: the full spectrum),
/// counts, errors, balance, rates.
/// A load plan's steps, one line each: what each offered and what it got, judged
/// by its own rate (a step the generator could not keep is flagged in it, not
/// averaged away over the run).
pub fn steps_table(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  Plan {} (mean {:.1} req/s), by step:",
        r.config.plan.as_deref().unwrap_or("?"),
        r.config.rate.unwrap_or(0.0)
    );
    let w = r
        .steps
        .iter()
        .map(|st| st.plan.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        s,
        "    {:<w$} {:>9} {:>9} {:>10} {:>10} {:>8} {:>9}",
        "step", "offered/s", "sent/s", "p50", "p99", "errors", "lag p99"
    );
    for st in &r.steps {
        let mut flags = Vec::new();
        if !st.reached {
            flags.push("below the offered rate");
        }
        if st.overloaded {
            flags.push("generator late");
        }
        let _ = writeln!(
            s,
            "    {:<w$} {:>9.1} {:>9.1} {:>10} {:>10} {:>8} {:>9}{}",
            st.plan,
            st.offered,
            st.achieved,
            fmt_opt_ms(st.latency_ms.p50),
            fmt_opt_ms(st.latency_ms.p99),
            st.failed,
            fmt_ms(st.lag_p99_ms),
            if flags.is_empty() {
                String::new()
            } else {
                format!("  ({})", flags.join(", "))
            }
        );
    }
    s
}

/// A repeated run's repetitions, one line each, so the spread is in plain sight
/// before any comparison: the figures above pool them all.
pub fn repetitions_table(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {} repetitions (the figures above pool them all):",
        r.repetitions.len()
    );
    let _ = writeln!(
        s,
        "    {:>4} {:>10} {:>10} {:>10} {:>11} {:>8}",
        "run", "p50", "p99", "max", "req/s", "errors"
    );
    for (i, x) in r.repetitions.iter().enumerate() {
        let c = &x.latency_ms.corrected;
        let _ = writeln!(
            s,
            "    {:>4} {:>10} {:>10} {:>10} {:>11.1} {:>8}{}",
            i + 1,
            fmt_opt_ms(c.p50),
            fmt_opt_ms(c.p99),
            fmt_opt_ms(c.max),
            x.rate.completed_per_s,
            x.requests.failed,
            if x.partial { "  (interrupted)" } else { "" }
        );
    }
    s
}

/// A route set in one line: its size, what it cost, and how long until every route
/// served (or which never did).
pub fn route_set_line(rs: &results::RouteSetResult) -> String {
    let bytes = rs.config_bytes.map_or(String::new(), |b| {
        format!(", {} of configuration", fmt_bytes(b as f64))
    });
    let served = match rs.all_served_ms {
        Some(ms) => format!("every route served {} after the apply", fmt_ms(ms)),
        None => {
            let list: Vec<String> = rs.never.iter().take(5).map(|i| format!("r{i}")).collect();
            format!(
                "{} of {} never served within {} ({}{})",
                rs.never_count,
                rs.count,
                fmt_ms(rs.bound_ms),
                list.join(", "),
                if rs.never_count > 5 { ", ..." } else { "" }
            )
        }
    };
    let writes = rs.status_writes.map_or(String::new(), |w| {
        format!(
            "; reported in force after {} ({w} status writes)",
            fmt_ms(rs.settled_ms)
        )
    });
    let cost = match (rs.apply_cpu_s, rs.rss_mib) {
        (Some(cpu), Some(rss)) => format!("; {cpu:.2} s of CPU to render it, {rss:.0} MiB after"),
        _ => String::new(),
    };
    format!(
        "Route set: {} routes over {} hosts{bytes}, applied in {}; {served}{writes}{cost}",
        rs.count,
        rs.hosts,
        fmt_ms(rs.apply_ms)
    )
}

/// One route added to or removed from the running set, in one line: when, and how
/// long until traffic showed it.
pub fn route_set_change_line(c: &results::RouteSetChange) -> String {
    let (did, shown) = match c.change.as_str() {
        "add" => ("added", "served"),
        "change" => ("changed", "served as changed"),
        _ => ("removed", "gone"),
    };
    let applied = c.applied_ms.map_or("the change failed".to_string(), |ms| {
        format!("applied in {}", fmt_ms(ms))
    });
    let seen = c
        .shown_ms
        .map_or(format!("not {shown} within {}", fmt_ms(c.bound_ms)), |ms| {
            format!("{shown} after {}", fmt_ms(ms))
        });
    let writes = c
        .status_writes
        .map_or(String::new(), |w| format!(", {w} status writes"));
    format!(
        "Route {} {did} at {} ({} routes after): {seen}, {applied}{writes}",
        c.route,
        fmt_ms(c.at_ms),
        c.routes_after
    )
}

/// How many of the slowest and of the most failing groups the summary names.
const MIX_SHOWN: usize = 5;

/// The request mix in a few lines: its size and hosts, then the slowest groups by
/// p99 and the groups with the most errors (a route that fails is one among
/// thousands, and the totals hide it).
pub fn mix_lines(m: &results::MixResult) -> Vec<String> {
    let mut out = Vec::new();
    let shown = 8;
    let mut hosts: Vec<String> = m
        .hosts
        .iter()
        .take(shown)
        .map(|h| format!("{} {}", h.host, h.connections))
        .collect();
    if m.hosts.len() > shown {
        hosts.push(format!("... ({} more)", m.hosts.len() - shown));
    }
    out.push(format!(
        "Request mix: {} target{} over {} host{}, figures by {}; connections per host: {}",
        m.targets,
        if m.targets == 1 { "" } else { "s" },
        m.hosts.len(),
        if m.hosts.len() == 1 { "" } else { "s" },
        m.grouped_by,
        hosts.join(", ")
    ));
    let mut slow: Vec<&results::MixGroup> =
        m.groups.iter().filter(|g| g.latency_ms.is_some()).collect();
    slow.sort_by(|a, b| {
        let p = |g: &results::MixGroup| g.latency_ms.as_ref().map_or(0.0, |l| l.p99);
        p(b).total_cmp(&p(a))
    });
    if slow.len() > 1 {
        let list: Vec<String> = slow
            .iter()
            .take(MIX_SHOWN)
            .map(|g| {
                let l = g.latency_ms.as_ref().expect("filtered");
                format!("{} {} ({} requests)", g.name, fmt_ms(l.p99), g.requests)
            })
            .collect();
        out.push(format!("Slowest by p99: {}", list.join("; ")));
    }
    let mut failing: Vec<&results::MixGroup> = m.groups.iter().filter(|g| g.failed() > 0).collect();
    failing.sort_by_key(|g| std::cmp::Reverse(g.failed()));
    if !failing.is_empty() {
        let list: Vec<String> = failing
            .iter()
            .take(MIX_SHOWN)
            .map(|g| {
                let kinds: Vec<String> = g.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!(
                    "{} {} of {} failed ({})",
                    g.name,
                    g.failed(),
                    g.requests,
                    kinds.join(", ")
                )
            })
            .collect();
        out.push(format!(
            "Most failing: {}{}",
            list.join("; "),
            if failing.len() > MIX_SHOWN {
                format!(" ... ({} groups failed in all)", failing.len())
            } else {
                String::new()
            }
        ));
    }
    out
}

pub fn summary(r: &RunResult, detailed: bool) -> String {
    let mut s = String::new();
    let c = &r.config;
    let _ = writeln!(s, "Running {} test @ {}", fmt_secs(c.duration_s), r.target);
    let rate = match c.rate {
        Some(rt) if c.plan.is_some() => format!(
            "plan {} (mean {rt} requests/s), schedule: {}",
            c.plan.as_deref().unwrap_or_default(),
            c.schedule
        ),
        Some(rt) => format!("{rt} requests/s, schedule: {}", c.schedule),
        None => "closed loop (--max)".to_string(),
    };
    let _ = writeln!(
        s,
        "  {} threads and {} connections, {rate}{}",
        c.threads,
        c.connections,
        if c.new_connection {
            ", a new connection per request"
        } else {
            ""
        }
    );
    // What went wrong around the run, before its figures are read.
    for w in &r.warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    let _ = writeln!(
        s,
        "  {:<12} {:>10} {:>10} {:>10}",
        "Latency", "Avg", "Stdev", "Max"
    );
    let row = |s: &mut String, name: &str, p: &Percentiles| {
        let _ = writeln!(
            s,
            "    {:<10} {:>10} {:>10} {:>10}",
            name,
            fmt_opt_ms(p.mean),
            fmt_opt_ms(p.stdev),
            fmt_opt_ms(p.max)
        );
    };
    if c.rate.is_some() {
        row(&mut s, "corrected", &r.latency_ms.corrected);
        row(&mut s, "uncorrected", &r.latency_ms.uncorrected);
    } else {
        // Closed loop has no schedule to correct for: the two are the same figure.
        row(&mut s, "latency", &r.latency_ms.corrected);
    }
    let _ = writeln!(
        s,
        "  Latency Distribution (HdrHistogram - Recorded Latency)"
    );
    let p = &r.latency_ms.corrected;
    for ((_, label), v) in Percentiles::QUANTILES.iter().zip(p.values()) {
        let pct: f64 = label.parse().unwrap_or(0.0);
        let _ = writeln!(s, "{:>8.4}% {:>10}", pct, fmt_opt_ms(v));
    }
    let _ = writeln!(s, "{:>8.4}% {:>10}", 100.0, fmt_opt_ms(p.max));
    if detailed {
        if let Ok(h) = crate::hdr::decode_base64(&r.histogram) {
            let _ = writeln!(s, "\n  Detailed Percentile spectrum (corrected, ms):");
            s.push_str(&crate::hdr::percentile_distribution(&h, 1000.0));
        }
    }
    let lag = &r.latency_ms.generator_lag;
    if c.rate.is_some() {
        let _ = writeln!(
            s,
            "  Generator lag: p50 {}, p99 {}, max {}",
            fmt_opt_ms(lag.p50),
            fmt_opt_ms(lag.p99),
            fmt_opt_ms(lag.max)
        );
        if let Some(w) = &r.generator.wakeup_us {
            let _ = writeln!(
                s,
                "  This machine's timed wake-ups (the lag's floor): p50 {:.0} us, p99 {:.0} us, max {:.0} us",
                w.p50, w.p99, w.max
            );
        }
        if let Some(m) = &r.generator.machine {
            let _ = writeln!(
                s,
                "  The machine meanwhile: {:.0} ms stolen from CPUs {}, other processes {:.2} cores there, {} stall{} of {} ms or more (longest {:.1} ms)",
                m.steal_ms,
                if m.cpus.is_empty() { "?" } else { &m.cpus },
                m.others_cores,
                m.stalls,
                if m.stalls == 1 { "" } else { "s" },
                results::MachineTime::STALL_MS,
                m.stall_max_ms
            );
        }
        if let (Some(sleeps), true) = (r.generator.sleeps, r.requests.sent > 0) {
            let n = r.requests.sent as f64;
            let _ = writeln!(
                s,
                "  Generator: {:.1} us of CPU and {:.2} sleeps per request (a wider --send-window sleeps less)",
                r.generator.cpu_s * 1e6 / n,
                sleeps as f64 / n
            );
        }
    }
    let q = &r.requests;
    let _ = writeln!(
        s,
        "  {} requests in {}, {} read",
        q.completed + q.failed,
        fmt_secs(r.duration_s),
        fmt_bytes(r.bytes_read as f64)
    );
    if r.tls.handshakes > 0 || r.tls.version.is_some() {
        let _ = writeln!(
            s,
            "  TLS: {} handshakes ({} resumed), {}",
            r.tls.handshakes,
            r.tls.resumed,
            r.tls.version.as_deref().unwrap_or("?")
        );
    }
    let e = &r.errors;
    // HTTP/2's own kinds are shown only where the protocol can have them.
    let h2 = r.connections.http2.is_some();
    let kinds: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| h2 || !matches!(k, ErrorKind::Reset | ErrorKind::Grpc) || e.get(**k) > 0)
        .map(|k| format!("{} {}", k.name(), e.get(*k)))
        .collect();
    let _ = writeln!(s, "  Errors: {}", kinds.join(", "));
    for k in ErrorKind::ALL {
        if let Some(m) = e.first.get(k.name()) {
            let _ = writeln!(s, "  first {} error: {m}", k.name());
        }
    }
    if !e.grpc_codes.is_empty() {
        let codes: Vec<String> = e
            .grpc_codes
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(s, "  gRPC statuses other than OK: {}", codes.join(", "));
    }
    if let Some(h) = &r.connections.http2 {
        let _ = writeln!(
            s,
            "  {}: {} connections opened, at most {} of {} streams in flight on one; {} GOAWAYs ({} requests sent again), {} streams reset, {} PINGs",
            r.config.protocol,
            h.connections_opened,
            h.max_concurrent_streams,
            h.streams_per_connection,
            h.goaways,
            h.retried_after_goaway,
            h.streams_reset,
            h.pings
        );
    }
    if !e.status_codes.is_empty() {
        let codes: Vec<String> = e
            .status_codes
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(s, "  Non-2xx/3xx responses: {}", codes.join(", "));
    }
    let k = &r.connections;
    if k.reconnects_after_server_close > 0 {
        let _ = writeln!(
            s,
            "  Reconnects after the server closed a kept-alive connection: {} (not errors; --reuse-closed counts them as wrk2 did)",
            k.reconnects_after_server_close
        );
    }
    if k.framing_warnings > 0 {
        let _ = writeln!(
            s,
            "  Framing warnings: {}, first: {}",
            k.framing_warnings,
            k.framing_warning_first.as_deref().unwrap_or("?")
        );
    }
    let _ = writeln!(
        s,
        "  Requests: intended {} = completed {} + failed {}{} + not sent {}{}",
        q.intended,
        q.completed,
        q.failed,
        if q.timed_out_unsent > 0 {
            format!(
                " ({} of them timed out unsent, still waiting when the drain ended)",
                q.timed_out_unsent
            )
        } else {
            String::new()
        },
        q.not_sent,
        if q.unfinished > 0 {
            format!(" + unfinished {}", q.unfinished)
        } else {
            String::new()
        }
    );
    if !r.backends.is_empty() {
        let b: Vec<String> = r.backends.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "  Backends: {}", b.join(", "));
    }
    if let Some(rs) = r.lab.as_ref().and_then(|l| l.route_set.as_ref()) {
        let _ = writeln!(s, "  {}", route_set_line(rs));
        for c in &rs.changes {
            let _ = writeln!(s, "  {}", route_set_change_line(c));
        }
    }
    if let Some(m) = &r.mix {
        for l in mix_lines(m) {
            let _ = writeln!(s, "  {l}");
        }
    }
    if !r.steps.is_empty() {
        s.push_str(&steps_table(r));
    }
    if !r.repetitions.is_empty() {
        s.push_str(&repetitions_table(r));
    }
    if let Some(g) = &r.generators {
        let _ = writeln!(s, "{}", generators_line(g));
    }
    let _ = write!(s, "Requests/sec: {:>10.2}", r.rate.completed_per_s);
    match r.rate.target {
        Some(t) => {
            let _ = writeln!(s, "  (sent {:.2}/s of a target {t})", r.rate.achieved);
        }
        None => s.push('\n'),
    }
    let _ = writeln!(
        s,
        "Transfer/sec: {:>10}",
        fmt_bytes(if r.duration_s > 0.0 {
            r.bytes_read as f64 / r.duration_s
        } else {
            0.0
        })
    );
    let failure = r.failure();
    for w in warnings(r) {
        // The failure is the loudest line: a run that measured nothing must not
        // be read as a fast one.
        let tag = if failure.as_ref() == Some(&w) {
            "FAILED"
        } else {
            "WARNING"
        };
        let _ = writeln!(s, "{tag}: {w}");
    }
    s
}

/// Systems side by side: the percentile spectrum, the S1 error table, endpoint
/// propagation, and the worst change of each system.
pub fn comparison(scenario: &str, results: &[RunResult]) -> String {
    let mut s = String::new();
    let names: Vec<String> = results
        .iter()
        .map(|r| {
            r.lab
                .as_ref()
                .map(|l| l.system.clone())
                .unwrap_or_else(|| r.target.clone())
        })
        .collect();
    let w = names.iter().map(|n| n.len()).max().unwrap_or(8).max(10);
    let _ = writeln!(s, "Scenario {scenario}: {} systems", results.len());
    if let Some(r) = results.first() {
        let c = &r.config;
        // Runs at fractions of each system's maximum have a rate each.
        let mut fractions: Vec<f64> = results
            .iter()
            .filter_map(|r| r.lab.as_ref()?.fraction.as_ref().map(|f| f.fraction))
            .collect();
        fractions.sort_by(f64::total_cmp);
        fractions.dedup();
        let rate = if let Some(p) = &c.plan {
            format!("plan {p} (mean {} req/s)", c.rate.unwrap_or(0.0))
        } else if fractions.is_empty() {
            format!("{} req/s", c.rate.unwrap_or(0.0))
        } else {
            let pct: Vec<String> = fractions
                .iter()
                .map(|f| format!("{:.0} %", f * 100.0))
                .collect();
            format!("{} of each system's maximum", pct.join(", "))
        };
        let _ = writeln!(
            s,
            "  load: {rate} over {} connections, {} threads, {}{}",
            c.connections,
            c.threads,
            fmt_secs(c.duration_s),
            if c.new_connection {
                ", new connection per request"
            } else {
                ""
            }
        );
    }
    // What went wrong around the runs, before their figures are read.
    for (n, r) in names.iter().zip(results) {
        for w in &r.warnings {
            let _ = writeln!(s, "WARNING: {n}: {w}");
        }
    }
    // Each system's route set and request mix, when the scenario has them.
    for (n, r) in names.iter().zip(results) {
        let mut lines = Vec::new();
        if let Some(rs) = r.lab.as_ref().and_then(|l| l.route_set.as_ref()) {
            lines.push(route_set_line(rs));
            lines.extend(rs.changes.iter().map(route_set_change_line));
        }
        if let Some(m) = &r.mix {
            lines.extend(mix_lines(m));
        }
        if !lines.is_empty() {
            let _ = writeln!(s, "\n{n}");
            for l in lines {
                let _ = writeln!(s, "  {l}");
            }
        }
    }
    let _ = writeln!(s, "\nLatency (corrected, from the intended send time)");
    let _ = write!(s, "  {:<w$}", "system");
    for (_, l) in Percentiles::QUANTILES {
        let _ = write!(s, " {:>9}", format!("p{l}"));
    }
    let _ = writeln!(s, " {:>9}", "max");
    for (n, r) in names.iter().zip(results) {
        let _ = write!(s, "  {n:<w$}");
        for v in r.latency_ms.corrected.values() {
            let _ = write!(s, " {:>9}", fmt_opt_ms(v));
        }
        let _ = writeln!(s, " {:>9}", fmt_opt_ms(r.latency_ms.corrected.max));
    }
    let _ = writeln!(s, "\nErrors");
    let _ = write!(s, "  {:<w$}", "system");
    for k in ErrorKind::ALL {
        let _ = write!(s, " {:>15}", k.name());
    }
    let _ = writeln!(s, " {:>10} {:>10}", "completed", "intended");
    for (n, r) in names.iter().zip(results) {
        let _ = write!(s, "  {n:<w$}");
        for k in ErrorKind::ALL {
            let _ = write!(s, " {:>15}", r.errors.get(k));
        }
        let _ = writeln!(
            s,
            " {:>10} {:>10}",
            r.requests.completed, r.requests.intended
        );
    }
    if results.iter().any(|r| r.lab.is_some()) {
        let _ = writeln!(
            s,
            "\nEndpoint propagation (ms: min / median / max; added: ready to first response, removed: stop to last response)"
        );
        let fmt = |sp: &results::Spread| match (sp.min, sp.median, sp.max) {
            (Some(a), Some(b), Some(c)) => format!("{a:.0} / {b:.0} / {c:.0} (n={})", sp.n),
            _ => "-".to_string(),
        };
        let _ = writeln!(s, "  {:<w$} {:>28} {:>28}", "system", "added", "removed");
        for (n, r) in names.iter().zip(results) {
            if let Some(l) = &r.lab {
                let never = l
                    .propagation
                    .added
                    .iter()
                    .filter(|e| e.propagation_ms.is_none())
                    .count();
                let _ = writeln!(
                    s,
                    "  {n:<w$} {:>28} {:>28}{}",
                    fmt(&l.propagation.added_ms),
                    fmt(&l.propagation.removed_ms),
                    if never > 0 {
                        format!("  ({never} added backends never answered)")
                    } else {
                        String::new()
                    }
                );
            }
        }
        if results.iter().any(|r| {
            r.lab
                .as_ref()
                .is_some_and(|l| l.route_propagation.is_some())
        }) {
            let _ = writeln!(
                s,
                "\nRoute propagation (ms from the request, median / max; applied: the system said so, seen: first response showing it, last old: last response not showing it)"
            );
            let _ = writeln!(
                s,
                "  {:<w$} {:>8} {:>20} {:>20} {:>20} {:>8}",
                "system", "changes", "applied", "seen", "last old", "errors"
            );
            let two = |sp: &results::Spread| match (sp.median, sp.max) {
                (Some(m), Some(x)) => format!("{m:.0} / {x:.0}"),
                _ => "-".to_string(),
            };
            for (n, r) in names.iter().zip(results) {
                let Some(p) = r.lab.as_ref().and_then(|l| l.route_propagation.as_ref()) else {
                    continue;
                };
                let unseen = p.changes.iter().filter(|c| c.seen_ms.is_none()).count();
                let _ = writeln!(
                    s,
                    "  {n:<w$} {:>8} {:>20} {:>20} {:>20} {:>8}{}",
                    p.changes.len(),
                    two(&p.applied_ms),
                    two(&p.seen_ms),
                    two(&p.last_old_ms),
                    p.changes.iter().map(|c| c.errors).sum::<u64>(),
                    if unseen > 0 {
                        format!("  ({unseen} never seen in traffic)")
                    } else {
                        String::new()
                    }
                );
            }
        }
        if results
            .iter()
            .any(|r| r.lab.as_ref().is_some_and(|l| l.resources.is_some()))
        {
            let _ = writeln!(
                s,
                "\nSystem under test's own CPU and memory (its processes, read every second)"
            );
            let _ = writeln!(
                s,
                "  {:<w$} {:>10} {:>10} {:>14} {:>16}",
                "system", "CPU mean", "CPU max", "RSS max", "CPU per 1000 req"
            );
            for (n, r) in names.iter().zip(results) {
                let Some(u) = r.lab.as_ref().and_then(|l| l.resources.as_ref()) else {
                    continue;
                };
                let _ = writeln!(
                    s,
                    "  {n:<w$} {:>10} {:>10} {:>14} {:>16}",
                    format!("{:.2} cores", u.cpu_mean),
                    format!("{:.2} cores", u.cpu_max),
                    format!("{:.1} MiB", u.rss_max_mib),
                    u.cpu_ms_per_1000
                        .map_or_else(|| "-".to_string(), |v| format!("{v:.1} ms")),
                );
            }
        }
        let _ = writeln!(
            s,
            "\nWorst change per system (by max latency in its window)"
        );
        for (n, r) in names.iter().zip(results) {
            let Some(l) = &r.lab else { continue };
            match l
                .windows
                .iter()
                .max_by(|a, b| a.max_ms.total_cmp(&b.max_ms))
            {
                Some(wd) => {
                    let errs: u64 = wd.errors.values().sum();
                    let _ = writeln!(
                        s,
                        "  {n:<w$} {} at {:.1}s: p99 {}, max {}, {errs} errors",
                        wd.change,
                        wd.from_ms / 1000.0,
                        fmt_ms(wd.p99_ms),
                        fmt_ms(wd.max_ms)
                    );
                }
                None => {
                    let _ = writeln!(s, "  {n:<w$} no changes");
                }
            }
            for e in l
                .events
                .iter()
                .filter(|e| e.kind == results::EventKind::ChangeFailed && e.t_ms >= 0.0)
            {
                let _ = writeln!(
                    s,
                    "  {n:<w$} WARNING: a change failed at {:.1}s: {}",
                    e.t_ms / 1000.0,
                    e.detail
                );
            }
            if l.proxy_died {
                let _ = writeln!(s, "  {n:<w$} WARNING: the proxy died during the run");
            }
        }
    }
    for (n, r) in names.iter().zip(results) {
        for wline in warnings(r) {
            let _ = writeln!(s, "WARNING: {n}: {wline}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{Requests, RunResult};

    #[test]
    fn a_route_set_change_says_when_traffic_showed_it_or_that_it_did_not() {
        let mut c = results::RouteSetChange {
            change: "add".into(),
            route: "r1000".into(),
            routes_after: 1001,
            at_ms: 1000.0,
            applied_ms: Some(8.0),
            shown_ms: Some(12.5),
            bound_ms: 60_000.0,
            probes: 3,
            status_writes: None,
        };
        let l = route_set_change_line(&c);
        assert!(l.starts_with("Route r1000 added at 1"), "{l}");
        assert!(!l.contains("status writes"), "a local proxy has none: {l}");
        c.status_writes = Some(2);
        let l = route_set_change_line(&c);
        assert!(l.ends_with(", 2 status writes"), "{l}");
        assert!(l.contains("(1001 routes after): served after 12"), "{l}");
        assert!(l.contains("applied in 8"), "{l}");
        c.change = "remove".into();
        c.shown_ms = None;
        c.applied_ms = None;
        let l = route_set_change_line(&c);
        assert!(
            l.contains("removed") && l.contains("not gone within"),
            "{l}"
        );
        assert!(l.contains("the change failed"), "{l}");
    }

    #[test]
    fn a_late_generator_gets_the_advice_of_its_cause() {
        use results::{LagCause, MachineTime};
        let late = |overloaded: bool, cause: Option<LagCause>, m: Option<MachineTime>| {
            let mut r = RunResult::default();
            r.generator.overloaded = overloaded;
            r.generator.woke_late = !overloaded;
            r.generator.lag_p99_ms = 3.0;
            r.generator.lag_limit_ms = 2.0;
            r.generator.cause = cause;
            r.generator.machine = m;
            let w = warnings(&r);
            let late: Vec<_> = w.iter().filter(|l| l.contains("generator")).collect();
            assert_eq!(late.len(), 1, "{w:?}");
            late[0].clone()
        };
        let stolen = MachineTime {
            steal_ms: 120.0,
            steal_share: 0.03,
            cpus: "0".into(),
            stalls: 2,
            stall_ms: 7.5,
            stall_max_ms: 5.0,
            probe_raised: true,
            ..MachineTime::default()
        };
        // The machine: named with what it took; neither threads nor cores advised.
        for overloaded in [true, false] {
            let w = late(overloaded, Some(LagCause::Machine), Some(stolen.clone()));
            assert!(w.contains("the machine took the time"), "{w}");
            assert!(w.contains("stole 120 ms from its CPUs 0"), "{w}");
            assert!(w.contains("2 stalls of the machine"), "{w}");
            assert!(w.contains("run on a quieter machine"), "{w}");
            assert!(!w.contains("Use more threads"), "{w}");
            assert!(!w.contains("nothing else uses"), "{w}");
        }
        // Other processes: move them.
        let busy = MachineTime {
            others_cores: 0.6,
            cpus: "0".into(),
            ..MachineTime::default()
        };
        let w = late(false, Some(LagCause::OtherProcesses), Some(busy));
        assert!(w.contains("other processes used 0.60 cores"), "{w}");
        assert!(
            w.contains("Give the generator cores nothing else uses"),
            "{w}"
        );
        // The generator short of CPU: more threads.
        let w = late(
            true,
            Some(LagCause::Generator),
            Some(MachineTime::default()),
        );
        assert!(w.starts_with("the load generator was overloaded"), "{w}");
        assert!(w.contains("Use more threads"), "{w}");
        // Late with CPU to spare and nothing taken: its wake-ups, not the cores.
        let w = late(
            false,
            Some(LagCause::Generator),
            Some(MachineTime::default()),
        );
        assert!(w.starts_with("the load generator woke late"), "{w}");
        assert!(w.contains("wake-ups were slow"), "{w}");
        assert!(!w.contains("nothing else uses"), "{w}");
    }

    #[test]
    fn untrustworthy_results_are_flagged() {
        let mut r = RunResult {
            requests: Requests {
                intended: 100,
                sent: 90,
                completed: 90,
                not_sent: 10,
                ..Default::default()
            },
            ..Default::default()
        };
        r.rate.target = Some(100.0);
        r.rate.achieved = 90.0;
        r.rate.reached = false;
        r.generator.overloaded = true;
        r.partial = true;
        let w = warnings(&r);
        assert_eq!(w.len(), 3, "{w:?}");
        let s = summary(&r, false);
        assert_eq!(s.matches("WARNING:").count(), 3);
        assert!(s.contains("intended 100 = completed 90 + failed 0 + not sent 10"));
        assert!(
            w.iter().any(|w| w
                .ends_with("90.0 of 100.0 requests/s were sent during the window (10 not sent)")),
            "a file without the shortfall's causes: {w:?}"
        );
        r.requests.completed = 89;
        assert!(warnings(&r).iter().any(|w| w.contains("bug")));
    }

    /// A plan's run says so in its header, with its mean, and lists its steps and
    /// its repetitions; a constant rate shows neither.
    #[test]
    fn a_plan_and_repetitions_are_named_in_the_summary() {
        let mut r = RunResult::default();
        r.config.rate = Some(1500.0);
        r.config.plan = Some("1000:2s,2000:2s".into());
        r.config.schedule = "connection".into();
        r.steps = vec![
            results::StepResult {
                plan: "1000:2s".into(),
                offered: 1000.0,
                achieved: 1000.0,
                reached: true,
                ..Default::default()
            },
            results::StepResult {
                plan: "2000:2s".into(),
                offered: 2000.0,
                achieved: 1500.0,
                overloaded: true,
                ..Default::default()
            },
        ];
        r.repetitions = vec![RunResult::default(), RunResult::default()];
        let s = summary(&r, false);
        assert!(
            s.contains("plan 1000:2s,2000:2s (mean 1500 requests/s), schedule: connection"),
            "{s}"
        );
        let step_lines: Vec<&str> = s
            .lines()
            .filter(|l| l.starts_with("    1000:2s ") || l.starts_with("    2000:2s "))
            .collect();
        assert_eq!(step_lines.len(), 2, "{s}");
        assert!(
            step_lines[1].ends_with("(below the offered rate, generator late)"),
            "{s}"
        );
        assert!(
            s.contains("2 repetitions (the figures above pool them all)"),
            "{s}"
        );
        r.config.plan = None;
        r.steps.clear();
        r.repetitions.clear();
        let s = summary(&r, false);
        assert!(!s.contains("plan") && !s.contains("repetitions"), "{s}");
    }

    #[test]
    fn a_missed_rate_says_whose_doing_it_was() {
        use results::Shortfall;
        let mut r = RunResult {
            requests: Requests {
                intended: 15750,
                sent: 15750,
                completed: 15750,
                ..Default::default()
            },
            ..Default::default()
        };
        r.latency_ms.corrected.count = 15750;
        r.rate.target = Some(1500.0);
        r.rate.achieved = 1433.3;
        r.rate.reached = false;
        r.generator.lag_p99_ms = 0.116;
        r.rate.shortfall = Shortfall {
            connections_busy: 700,
            ..Default::default()
        };
        let w = warnings(&r);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(
            w[0],
            "the target rate was not reached: 1433.3 of 1500.0 requests/s were sent during the window; of the 700 due in it but not started by its end (they were sent after it and are measured from their intended times), 700 waited for connections the server kept busy with slow responses (the server's latency, in the corrected figures: not a fault of the generator)"
        );
        r.rate.shortfall = Shortfall {
            connections_failed: 700,
            ..Default::default()
        };
        let w = warnings(&r);
        assert!(
            w[0].contains("700 waited for connections still being opened")
                && !w[0].contains("server kept busy")
                && !w[0].contains("generator was late"),
            "{w:?}"
        );
        r.rate.shortfall = Shortfall {
            generator_late: 650,
            connections_busy: 50,
            ..Default::default()
        };
        r.generator.lag_p99_ms = 12.0;
        let w = warnings(&r);
        assert!(
            w[0].contains("; 650 had a free connection but the generator was late sending them (its own delay: lag p99 12.00ms)")
                && w[0].contains("of the 700 due in it")
                && w[0].contains("50 waited for connections the server kept busy"),
            "{w:?}"
        );
        // After an interrupt they were never sent.
        r.requests.not_sent = 700;
        r.requests.sent = 15050;
        r.requests.completed = 15050;
        assert!(warnings(&r)[0].contains("(the interrupt left them unsent)"));
    }

    #[test]
    fn a_split_run_names_its_generators() {
        use results::{GeneratorPart, Generators};
        let mut r = RunResult {
            requests: Requests {
                intended: 10,
                sent: 10,
                completed: 10,
                ..Default::default()
            },
            partial: true,
            ..Default::default()
        };
        r.latency_ms.corrected.count = 10;
        r.generator.overloaded = true;
        r.generators = Some(Generators {
            start_at: "2026-11-22T03:24:05.123Z".into(),
            start_tolerance_ms: 50.0,
            parts: vec![
                GeneratorPart {
                    index: 0,
                    overloaded: true,
                    lag_p99_ms: 4.0,
                    cpus: "0".into(),
                    start_offset_ms: Some(0.0),
                    ..Default::default()
                },
                GeneratorPart {
                    index: 1,
                    error: Some("exited with code 1".into()),
                    ..Default::default()
                },
            ],
        });
        let w = warnings(&r);
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(w[0].starts_with("generator 0/2 was overloaded"), "{w:?}");
        assert!(
            w[1].starts_with("generator 1/2 failed: exited with code 1"),
            "{w:?}"
        );
        let s = summary(&r, false);
        assert!(
            !s.contains("interrupted"),
            "a failed generator is no interrupt\n{s}"
        );
        assert!(
            s.contains("  2 generators: #0 cpu 0, lag p99 4.00ms, started +0.00us; #1 failed\n"),
            "{s}"
        );
    }
}
