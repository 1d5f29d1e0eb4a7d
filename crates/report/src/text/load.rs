//! The terminal summary of a load run, laid out like wrk2's so its users read it
//! without thinking, plus what wrk2 lacks: errors by kind, the request balance, the
//! generator's own lag, a plan's steps and a run's repetitions (the report's own
//! tables, as text), and a loud warning when the numbers are not to be trusted.

use super::lines::{mix_lines, route_set_change_line, route_set_line};
use crate::fmt::{fmt_bytes, fmt_ms, fmt_opt_ms, fmt_secs};
use crate::input::ReportInput;
use crate::plain::Plain;
use crate::tables::{self, Table};
use crate::warnings::warnings;
use results::{ErrorKind, Percentiles, RunResult};
use std::fmt::Write as _;

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

/// One of the report's tables drawn from this run alone, under `title`: indented
/// below it, without the series column (there is one), its note written after
/// each row as a remark.
fn run_table(t: &Table, title: String) -> String {
    Plain::new(t)
        .title(Some(title))
        .indent(4)
        .hide("series")
        .remark("note")
        .render()
}

/// A load plan's steps, one line each (the report's steps table): what each offered
/// and what it got, judged by its own rate (a step the generator could not keep is
/// flagged in it, not averaged away over the run).
fn steps_table(r: &RunResult, one: &ReportInput) -> String {
    let title = format!(
        "  Plan {} (mean {:.1} req/s), by step:",
        r.config.plan.as_deref().unwrap_or("?"),
        r.config.rate.unwrap_or(0.0)
    );
    run_table(&tables::steps(one), title)
}

/// A repeated run's repetitions, one line each (the report's repetitions table), so
/// the spread is in plain sight before any comparison: the figures above pool them
/// all.
fn repetitions_table(r: &RunResult, one: &ReportInput) -> String {
    let title = format!(
        "  {} repetitions (the figures above pool them all):",
        r.repetitions.len()
    );
    run_table(&tables::repetitions(one), title)
}

/// The summary: header, latency, distribution (`detailed`: the full spectrum),
/// counts, errors, balance, rates.
pub fn summary(r: &RunResult, detailed: bool) -> String {
    if let Some(sessions) = &r.sessions {
        if r.requests.intended == 0 {
            // Sessions alone (`load --websocket`): no request figures to show.
            return super::sessions::sessions_summary(sessions);
        }
    }
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
    latency(&mut s, r, detailed);
    generator(&mut s, r);
    requests(&mut s, r);
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
    if !r.steps.is_empty() || !r.repetitions.is_empty() {
        // The report's tables are drawn from a report's input: this run alone.
        let one = ReportInput::single("load", r.clone());
        if !r.steps.is_empty() {
            s.push_str(&steps_table(r, &one));
        }
        if !r.repetitions.is_empty() {
            s.push_str(&repetitions_table(r, &one));
        }
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

/// wrk's latency block: the corrected and uncorrected rows (one row in a closed
/// loop, where the two are the same), the distribution, and with `detailed` the
/// full percentile spectrum.
fn latency(s: &mut String, r: &RunResult, detailed: bool) {
    let c = &r.config;
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
        row(s, "corrected", &r.latency_ms.corrected);
        row(s, "uncorrected", &r.latency_ms.uncorrected);
    } else {
        // Closed loop has no schedule to correct for: the two are the same figure.
        row(s, "latency", &r.latency_ms.corrected);
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
}

/// What the generator itself did, in an open loop: its lag, this machine's timed
/// wake-ups, what the machine took meanwhile, and its CPU and sleeps per request.
fn generator(s: &mut String, r: &RunResult) {
    let c = &r.config;
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
}

/// The counts: requests and bytes, TLS handshakes, errors by kind and the first of
/// each, gRPC and HTTP statuses, HTTP/2's connections, reconnects, framing
/// warnings, and the request balance.
fn requests(s: &mut String, r: &RunResult) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{Requests, RunResult};

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
