//! What a run measured ([`Outcome`]) and the result document made from it.

use crate::{mix, profile, split, stats, BUSY_OVERLOADED, LAG_LIMIT_NS};
use base64::Engine as _;
use hdrhistogram::Histogram;
use results::clock::Nanos;
use results::histogram::{percentiles, serialize_v2};
use results::time::rfc3339;
use results::{
    Errors, Generator, GeneratorPart, Generators, Latency, LoadConfig, Rate, Requests, RunResult,
    Samples, TimelineEntry, TlsStats, RESULT_SCHEMA,
};
use stats::Totals;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a run measured, merged over all workers.
pub struct Outcome {
    pub totals: Totals,
    /// One merged interval per second of the measured window; what completed
    /// during the drain after it is in the last one.
    pub seconds: Vec<SecondSummary>,
    /// The run stopped early (interrupt).
    pub partial: bool,
    /// Unix time of the start of the measured window, in nanoseconds.
    pub started_at_unix_ns: u128,
    /// Length of the measured window actually run, in seconds.
    pub duration_s: f64,
    /// CPU time of the process during the run (user + system), in seconds.
    pub cpu_s: f64,
    /// How busy the generator's threads were, on average, from the start of the
    /// schedule to the end of the run: its CPU time over that time times its worker
    /// threads (the collecting thread's share is small and counted in).
    pub busy: f64,
    /// What the machine did meanwhile: steal, other processes' CPU, stalls.
    pub machine: Option<results::MachineTime>,
    /// Clock time at which the measured window started.
    pub measure_start: Nanos,
    /// The sampled fraction (0: none).
    pub sample: f64,
    /// Whether the workers could raise their scheduling priority.
    pub priority_raised: bool,
    /// The CPUs the workers were to be confined to (empty: any).
    pub cpus: Vec<usize>,
    /// The CPUs the workers could run on once pinned, as the kernel reported them
    /// (empty: no pin asked for): `cpus` unless the pin was refused.
    pub cpus_applied: Vec<usize>,
    /// What went wrong without stopping the run (a refused CPU pin), one line each.
    pub warnings: Vec<String>,
    /// The plan's place in a split run, if it is one generator of several.
    pub slice: Option<split::Slice>,
    /// How late the schedule started after the slice's shared instant, in ns (0: on
    /// time); `None` for a whole run.
    pub start_offset_ns: Option<u64>,
    /// The load plan, if the rate followed one: its steps are in the totals.
    pub profile: Option<Arc<profile::RateProfile>>,
    /// The request mix, when the result reports it.
    pub mix: Option<Arc<mix::Mix>>,
}

/// One second, summarised as soon as every worker has reported it, so the run
/// keeps no per-second histogram in memory (a long soak stays flat).
pub struct SecondSummary {
    pub entry: TimelineEntry,
    /// The second's corrected histogram, V2 deflate, for `--hdr-log`.
    pub histogram_v2: Vec<u8>,
}

impl Outcome {
    /// Each id of a tally (a backend's, a certificate's serial) with its count and
    /// when it was first and last seen, in ms from the start of the measured window.
    fn spans<'a>(
        &'a self,
        tally: &'a stats::BackendTally,
    ) -> impl Iterator<Item = (String, u64, f64, f64)> + 'a {
        let rel = |v: Nanos| (v as f64 - self.measure_start as f64) / 1e6;
        tally.ids.iter().map(move |e| {
            (
                String::from_utf8_lossy(&e.id).into_owned(),
                e.count,
                rel(e.first),
                rel(e.last),
            )
        })
    }

    /// The result document for this outcome and the settings that produced it.
    pub fn to_result(&self, target: &str, config: LoadConfig) -> RunResult {
        let t = &self.totals;
        let lag = percentiles(&t.lag, 1.0);
        let late = config.rate.is_some() && lag.p99.unwrap_or(0.0) * 1e6 > LAG_LIMIT_NS as f64;
        let mut r = RunResult {
            schema: RESULT_SCHEMA.to_string(),
            partial: self.partial,
            target: target.to_string(),
            started_at: rfc3339(self.started_at_unix_ns),
            duration_s: self.duration_s,
            rate: self.rate(config.rate),
            requests: Requests {
                intended: t.intended,
                sent: t.sent,
                completed: t.completed,
                failed: t.failed,
                not_sent: t.not_sent,
                unfinished: t.unfinished,
                timed_out_unsent: t.timed_out_unsent,
            },
            errors: self.errors(),
            connections: self.connections(),
            latency_ms: Latency {
                corrected: percentiles(&t.corrected, 1000.0),
                uncorrected: percentiles(&t.uncorrected, 1000.0),
                generator_lag: lag.clone(),
            },
            timeline: self.timeline(),
            backends: t.backends.to_map(),
            backends_seen: self
                .spans(&t.backends)
                .map(|(id, _, first, last)| (id, [first, last]))
                .collect(),
            bytes_read: t.bytes_read,
            tls: self.tls(),
            generator: self.generator(late, lag.p99.unwrap_or(0.0)),
            histogram: b64(&t.corrected),
            histogram_uncorrected: b64(&t.uncorrected),
            histogram_lag: b64(&t.lag),
            generators: None,
            lab: None,
            mix: self.mix.as_ref().map(|m| m.result(&t.mix)),
            // A generator of a split scenario run hands its change windows over.
            windows_part: if self.slice.is_some() {
                t.windows.to_parts(self.measure_start)
            } else {
                Vec::new()
            },
            samples: self.samples(),
            sessions: None,
            machine: Some(crate::sysinfo::machine()),
            ingressbench_version: env!("CARGO_PKG_VERSION").to_string(),
            steps: self.steps(),
            repetitions: Vec::new(),
            warnings: self.warnings.clone(),
            config,
        };
        r.generators = self.slice.as_ref().map(|s| self.own_part(s, &r));
        r
    }

    /// The rate asked for (`target`), what went out and whether it was reached.
    fn rate(&self, target: Option<f64>) -> Rate {
        let t = &self.totals;
        // What went out in the window: requests due in it but started in the drain
        // after it are measured, yet did not reach the server within the window.
        let achieved = if self.duration_s > 0.0 {
            t.sent_in_window as f64 / self.duration_s
        } else {
            0.0
        };
        // A load plan's rate changes along the run: what it called for in the window
        // is what the window is judged by. Its mean over the whole plan would fail a run
        // interrupted in a low step (and pass one interrupted in a high step).
        let judged = match (&self.profile, self.duration_s > 0.0) {
            (Some(_), true) => Some(t.intended as f64 / self.duration_s),
            _ => target,
        };
        Rate {
            target,
            achieved,
            completed_per_s: if self.duration_s > 0.0 {
                t.completed as f64 / self.duration_s
            } else {
                0.0
            },
            // Nothing was due in a window that never began (an interrupt during
            // start-up): no shortfall to report.
            reached: judged.is_none_or(|r| t.intended == 0 || achieved >= 0.99 * r),
            shortfall: t.shortfall.clone(),
        }
    }

    /// Errors by kind, status codes and gRPC status codes.
    fn errors(&self) -> Errors {
        let t = &self.totals;
        let mut status_codes = BTreeMap::new();
        for (code, n) in t.status.iter().enumerate() {
            if *n > 0 {
                status_codes.insert(code.to_string(), *n);
            }
        }
        Errors {
            first: t.first_errors.to_map(),
            grpc_codes: t
                .grpc_codes
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(c, n)| {
                    let name = if c + 1 == stats::GRPC_CODES {
                        "OTHER_OR_NONE".to_string()
                    } else {
                        results::errors::grpc_code_name(c as u32).into_owned()
                    };
                    (name, *n)
                })
                .collect(),
            ..Errors::from_counts(&t.errors, status_codes)
        }
    }

    /// What happened to the connections: reconnects, framing warnings, HTTP/2.
    fn connections(&self) -> results::Connections {
        let t = &self.totals;
        results::Connections {
            reconnects_after_server_close: t.reconnects_after_server_close,
            framing_warnings: t.framing_warnings.count,
            framing_warning_first: (t.framing_warnings.count > 0).then(|| {
                format!(
                    "a {} response with both Content-Length and Transfer-Encoding \
                     (decoded as chunked, the connection closed after it)",
                    t.framing_warnings.first_status
                )
            }),
            http2: t.h2.clone(),
        }
    }

    /// One entry per second; a part of a split run keeps each second's histogram.
    fn timeline(&self) -> Vec<TimelineEntry> {
        self.seconds
            .iter()
            .map(|s| {
                let mut e = s.entry.clone();
                // A part of a split run keeps each second's histogram, so the
                // merge can recompute the second's percentiles exactly.
                if self.slice.is_some() {
                    e.histogram = Some(if s.histogram_v2.is_empty() {
                        b64(&stats::latency_histogram())
                    } else {
                        base64::engine::general_purpose::STANDARD.encode(&s.histogram_v2)
                    });
                }
                e
            })
            .collect()
    }

    /// Handshakes, resumptions, the version agreed and the certificates seen.
    fn tls(&self) -> TlsStats {
        let t = &self.totals;
        TlsStats {
            handshakes: t.handshakes,
            resumed: t.resumed,
            version: t.tls_version.map(str::to_string),
            certificates: self
                .spans(&t.certificates)
                .map(|(serial, handshakes, first_ms, last_ms)| {
                    let seen = results::CertificateSeen {
                        handshakes,
                        first_ms,
                        last_ms,
                    };
                    (serial, seen)
                })
                .collect(),
        }
    }

    /// How the generator itself did: its lag (`late`: over the limit at an open-loop
    /// rate), its CPU and the machine's, and why it was late.
    fn generator(&self, late: bool, lag_p99_ms: f64) -> Generator {
        let t = &self.totals;
        Generator {
            // No lag recorded (nothing was sent) is no lag at all. Over the limit,
            // busy threads were short of CPU; idle ones woke late.
            overloaded: late && self.busy >= BUSY_OVERLOADED,
            woke_late: late && self.busy < BUSY_OVERLOADED,
            wakeup_us: results::WakeUp::of(&mut t.wakeup_ns.clone()),
            lag_p99_ms,
            lag_limit_ms: LAG_LIMIT_NS as f64 / 1e6,
            cpu_s: self.cpu_s,
            sleeps: t.sleeps,
            clock_resolution_ns: results::clock::resolution_ns(),
            priority_raised: self.priority_raised,
            cpus: cpu_list(&self.cpus),
            cpus_applied: cpu_list(&self.cpus_applied),
            cause: late
                .then(|| results::MachineTime::cause(self.machine.as_ref(), self.duration_s * 1e3)),
            machine: self.machine.clone(),
        }
    }
}

/// A histogram as results keep it: V2 deflate, base64.
fn b64(h: &Histogram<u64>) -> String {
    base64::engine::general_purpose::STANDARD.encode(serialize_v2(h))
}

impl Outcome {
    /// Each report step of the load plan: what it offered, what went out, and what
    /// came back, from the requests intended in it. An interrupted run reports the
    /// steps it reached, the last one cut at the interrupt.
    fn steps(&self) -> Vec<results::StepResult> {
        let Some(p) = &self.profile else {
            return Vec::new();
        };
        let t = &self.totals;
        let mut out = Vec::new();
        for (i, s) in p.report_steps().into_iter().enumerate() {
            if s.start >= self.duration_s && i > 0 {
                break;
            }
            let secs = s.secs.min(self.duration_s - s.start).max(0.0);
            let intended = t.steps_intended.get(i).copied().unwrap_or(0);
            let w = t.steps.windows.get(i);
            let (sent, completed, failed) =
                w.map_or((0, 0, 0), |w| (w.sent, w.completed, w.failed()));
            let mut errors_by_kind = BTreeMap::new();
            if let Some(w) = w {
                for k in results::ErrorKind::ALL {
                    let n = w.errors[k.index()];
                    if n > 0 {
                        errors_by_kind.insert(k.name().to_string(), n);
                    }
                }
            }
            let latency_ms = w
                .map(|w| percentiles(&w.latency, 1000.0))
                .unwrap_or_default();
            let lag_p99_ms = w
                .and_then(|w| w.lag.as_ref())
                .map_or(0.0, |h| percentiles(h, 1000.0).p99.unwrap_or(0.0));
            let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
            out.push(results::StepResult {
                index: i,
                plan: s.text,
                start_s: s.start,
                duration_s: secs,
                rate_from: s.from,
                rate_to: s.to,
                offered: per_s(intended),
                achieved: per_s(sent.min(intended)),
                intended,
                sent,
                completed,
                failed,
                errors_by_kind,
                latency_ms,
                lag_p99_ms,
                reached: intended == 0 || sent as f64 >= 0.99 * intended as f64,
                overloaded: lag_p99_ms * 1e6 > LAG_LIMIT_NS as f64,
            });
        }
        out
    }

    /// A generator's own entry in its result: what only it knows (seed, CPUs, how late
    /// it started); the merge adds what the coordinator measured.
    fn own_part(&self, s: &split::Slice, r: &RunResult) -> Generators {
        // Read from the result it belongs to, so the part's figures are the run's.
        let (config, g) = (&r.config, &r.generator);
        Generators {
            start_at: rfc3339(s.start_at_unix_ns),
            start_tolerance_ms: results::merge::START_TOLERANCE_MS,
            parts: vec![GeneratorPart {
                index: s.index,
                connections: config.connections,
                threads: config.threads,
                rate: config.rate,
                seed: s.seed,
                cpus: g.cpus.clone(),
                error: None,
                partial: self.partial,
                requests: r.requests.clone(),
                overloaded: g.overloaded,
                lag_p99_ms: g.lag_p99_ms,
                cpu_s: g.cpu_s,
                start_offset_ms: self.start_offset_ns.map(|n| n as f64 / 1e6),
                clock_offset_ms: None,
                clock_offset_error_ms: None,
                marks: None,
            }],
        }
    }

    /// The sampled requests by column, in order of intended send time.
    fn samples(&self) -> Option<Samples> {
        let t = &self.totals;
        if t.samples.is_empty() {
            return None;
        }
        let mut rows = t.samples.clone();
        rows.sort_by_key(|r| r.intended);
        let ms = |ns: f64| ns / 1e6;
        Some(Samples {
            fraction: self.sample,
            t_ms: rows
                .iter()
                .map(|r| ms(r.intended as f64 - self.measure_start as f64))
                .collect(),
            latency_ms: rows.iter().map(|r| ms(r.latency_ns as f64)).collect(),
            status: rows.iter().map(|r| r.status).collect(),
            error: rows.iter().map(|r| r.error).collect(),
            error_kinds: results::ErrorKind::ALL
                .iter()
                .map(|k| k.name().to_string())
                .collect(),
            backend: rows.iter().map(|r| r.backend).collect(),
            backend_ids: t
                .backends
                .ids
                .iter()
                .map(|e| String::from_utf8_lossy(&e.id).into_owned())
                .collect(),
        })
    }
}

/// CPUs as results write them: `0,1`.
pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_convert_units() {
        let mut h = stats::latency_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap(); // 1..1000 ms in µs
        }
        let p = percentiles(&h, 1000.0);
        assert!((p.p50.unwrap() - 500.0).abs() < 1.0, "{:?}", p.p50);
        assert!((p.p99.unwrap() - 990.0).abs() < 1.0, "{:?}", p.p99);
        assert!((p.max.unwrap() - 1000.0).abs() < 1.0);
        assert_eq!(p.count, 1000);
    }
}
