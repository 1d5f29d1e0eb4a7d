//! The terminal summary of a run's long-lived sessions: what the messages took, and
//! above all how many sessions ended before the run did and how (a close frame and
//! its code and reason, against an EOF or a reset, which a graceful drain never
//! leaves), what it cost in messages and the time to open again.

use crate::fmt::{fmt_ms, fmt_opt_ms};
use results::sessions::{graceful_key, Sessions};
use std::fmt::Write as _;

/// A latency's p50, p99, p99.9 and max on one line.
fn spread(p: &results::Percentiles) -> String {
    format!(
        "p50 {}  p99 {}  p99.9 {}  max {}",
        fmt_opt_ms(p.p50),
        fmt_opt_ms(p.p99),
        fmt_opt_ms(p.p99_9),
        fmt_opt_ms(p.max)
    )
}

/// The ends by kind: `close 1001 x3 ("ingressbench backend draining"), eof x5`.
pub fn ends_line(s: &Sessions) -> String {
    let each: Vec<String> = s
        .ends
        .iter()
        .map(|(k, n)| match s.close_reasons.get(k) {
            Some(r) if !r.is_empty() => format!("{k} x{n} ({r:?})"),
            _ => format!("{k} x{n}"),
        })
        .collect();
    each.join(", ")
}

pub fn sessions_summary(s: &Sessions) -> String {
    let mut out = String::new();
    let rate = if s.message_rate > 0.0 {
        format!("{} messages/s of {} B", s.message_rate, s.message_bytes)
    } else {
        "no messages (held open)".into()
    };
    let (what, graceful_as) = if s.protocol == "grpc" {
        ("gRPC streams", "with a status")
    } else {
        ("websocket sessions", "with a close frame")
    };
    let _ = writeln!(
        out,
        "Sessions: {} {what} @ {}, {rate}, reopen {}",
        s.sessions, s.url, s.reopen
    );
    if s.messages.echoed > 0 {
        let _ = writeln!(
            out,
            "  Message latency (from intended send): {}",
            spread(&s.latency_ms)
        );
    }
    let _ = writeln!(
        out,
        "  Opened {} ({} reopens), held to the end {}; time to open p99 {}",
        s.opened,
        s.reopened,
        s.held,
        fmt_opt_ms(s.open_ms.p99)
    );
    let cut = s.cut();
    if cut == 0 {
        let _ = writeln!(out, "  Ended before the run did: none");
    } else {
        let graceful: u64 = s
            .ends
            .iter()
            .filter(|(k, _)| graceful_key(k))
            .map(|(_, n)| n)
            .sum();
        let _ = writeln!(
            out,
            "  Ended before the run did: {cut} ({graceful} {graceful_as}, {} cut): {}",
            s.broken(),
            ends_line(s)
        );
        if s.reopen_ms.count > 0 {
            let _ = writeln!(out, "  Time to reopen: {}", spread(&s.reopen_ms));
        }
    }
    let m = &s.messages;
    let _ = writeln!(
        out,
        "  Messages: {} intended, {} echoed, {} lost at an end, {} timed out, {} not sent",
        m.intended, m.echoed, m.lost, m.timed_out, m.not_sent
    );
    if !s.open_failures.is_empty() {
        let each: Vec<String> = s
            .open_failures
            .iter()
            .map(|(k, n)| format!("{k} x{n}"))
            .collect();
        let _ = writeln!(out, "  Opens that failed: {}", each.join(", "));
    }
    for (k, e) in &s.first_errors {
        let _ = writeln!(out, "    first {k}: {e}");
    }
    if !s.backends.is_empty() {
        let b: Vec<String> = s.backends.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "  Backends (opens): {}", b.join(", "));
    }
    let worst = s
        .timeline
        .iter()
        .filter_map(|t| t.max_ms.map(|m| (t.second, m)))
        .fold(None, |acc: Option<(u64, f64)>, (sec, m)| match acc {
            Some((_, best)) if best >= m => acc,
            _ => Some((sec, m)),
        });
    if let Some((sec, m)) = worst {
        let _ = writeln!(out, "  Slowest echo: {} in second {sec}", fmt_ms(m));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_tells_graceful_ends_from_cuts_and_names_the_reason() {
        let s = Sessions {
            protocol: "websocket".into(),
            url: "ws://127.0.0.1:1/chat".into(),
            sessions: 10,
            message_rate: 100.0,
            message_bytes: 32,
            reopen: "at-once".into(),
            opened: 18,
            reopened: 8,
            held: 10,
            ends: [("close 1001".into(), 3), ("eof".into(), 5)]
                .into_iter()
                .collect(),
            close_reasons: [("close 1001".into(), "ingressbench backend draining".into())]
                .into_iter()
                .collect(),
            ..Sessions::default()
        };
        let t = sessions_summary(&s);
        assert!(
            t.contains("Ended before the run did: 8 (3 with a close frame, 5 cut): close 1001 x3 (\"ingressbench backend draining\"), eof x5"),
            "{t}"
        );
        assert!(
            t.contains("Opened 18 (8 reopens), held to the end 10"),
            "{t}"
        );
    }
}
