//! Why a result should not be trusted, in words a person acts on: a failed run, an
//! interrupt, a generator that was late (with the advice that fits its cause), a
//! target rate that was missed (naming whose doing it was), counts that do not add
//! up. The terminal summary, `summary.txt`, the page and the comparison all list
//! these.

use crate::fmt::fmt_ms;
use results::RunResult;
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

#[cfg(test)]
mod tests {
    use super::*;
    use results::Requests;

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
}
