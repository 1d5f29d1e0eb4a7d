//! One result from the results of N generators that ran one load split N ways
//! (`load --generators N` here; an indexed Job on Kubernetes later).
//!
//! The merge is exact where it can be and says where it cannot: latencies are
//! histograms, so they are added bucket by bucket, never averaged (a p99 of p99s is
//! not a p99); counters, error kinds and the per-second timeline are summed; each
//! generator's own figures (lag, start offset, clock offset, failure) are kept under
//! `generators`, because a sum hides the one generator that was late or overloaded.
//! It works on result documents only, with no I/O, so any coordinator that can
//! collect the parts' JSON can use it.

use crate::histogram::{decode_base64, encode_base64, lag_histogram, latency_histogram};
use crate::{
    histogram, time, ErrorKind, Errors, GeneratorPart, Generators, Latency, Percentiles, Rate,
    Requests, RunResult, Samples, TimelineEntry, TlsStats,
};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// How late a generator may start after the shared instant (or how far its clock may
/// be from the coordinator's) before the merged run is not trusted, in ms. Timeline
/// seconds are whole seconds: 50 ms moves at most 5 % of a second's requests into
/// the next one.
pub const START_TOLERANCE_MS: f64 = 50.0;

/// One generator as the coordinator knows it.
#[derive(Clone, Debug, Default)]
pub struct Part {
    /// Its index and planned share, the clock offset the coordinator measured, and
    /// `error` when it produced no result. The figures only it knows (lag, start
    /// offset, seed, CPUs) come from its result.
    pub planned: GeneratorPart,
    /// Its own result document; `None` when it failed to produce one.
    pub result: Option<RunResult>,
}

/// Why results could not be merged.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("no generator to merge")]
    Empty,
    #[error("generator index {index} appears twice, or is not below the count {count}")]
    Index { index: usize, count: usize },
    #[error("every generator failed: {0}")]
    NoResult(String),
    #[error("{generator}: its result says it is generator {found}")]
    WrongPart { generator: String, found: usize },
    #[error("{generator}: the request balance does not add up: {detail}")]
    Balance { generator: String, detail: String },
    #[error("{generator}: {what} histogram: {reason}")]
    Histogram {
        generator: String,
        what: &'static str,
        reason: String,
    },
    #[error("{generator} ran another load than {first}: its {field} differs")]
    Mismatch {
        generator: String,
        first: String,
        field: &'static str,
    },
}

/// Merges the parts of a run whose schedules all started at `start_at_unix_ns`.
///
/// Every part with a result must balance (`intended = completed + failed + not_sent
/// + unfinished`, `sent + timed_out_unsent = completed + failed + unfinished`) and
/// must have run the same load (URL, method, schedule, window); a part without a
/// result makes the merged run `partial` and is named in [`Generators::warnings`].
/// The rate's shortfall is summed by cause. Timeline `p50` and
/// `p99` are exact when every part wrote its per-second histogram (generators do), and
/// otherwise the largest of the parts' values, an upper bound; the lag percentiles
/// likewise without `histogram_lag` (files written before it existed).
///
/// # Errors
/// [`MergeError`] naming the generator whose result is inconsistent, or listing why
/// every generator failed.
pub fn merge(mut parts: Vec<Part>, start_at_unix_ns: u128) -> Result<RunResult, MergeError> {
    let count = parts.len();
    if count == 0 {
        return Err(MergeError::Empty);
    }
    parts.sort_by_key(|p| p.planned.index);
    for (i, p) in parts.iter().enumerate() {
        if p.planned.index != i {
            return Err(MergeError::Index {
                index: p.planned.index,
                count,
            });
        }
    }
    let name = |i: usize| format!("generator {i}/{count}");
    let done: Vec<(usize, &RunResult)> = parts
        .iter()
        .filter_map(|p| p.result.as_ref().map(|r| (p.planned.index, r)))
        .collect();
    let Some(&(first_i, first)) = done.first() else {
        let why: Vec<String> = parts
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    name(p.planned.index),
                    p.planned.error.as_deref().unwrap_or("no result")
                )
            })
            .collect();
        return Err(MergeError::NoResult(why.join("; ")));
    };

    let mut pooled = Pooled::new();
    for &(i, r) in &done {
        check_part(r, i, count, first_i, first)?;
        pooled
            .add(r)
            .map_err(|(what, reason)| MergeError::Histogram {
                generator: name(i),
                what,
                reason,
            })?;
    }

    let results: Vec<&RunResult> = done.iter().map(|(_, r)| *r).collect();
    // A request mix: every part ran it (its groups added), or none did.
    let mixes: Vec<&crate::MixResult> = results.iter().filter_map(|r| r.mix.as_ref()).collect();
    let mix = if mixes.is_empty() {
        None
    } else if let Some(&(i, _)) = done.iter().find(|(_, r)| r.mix.is_none()) {
        return Err(MergeError::Mismatch {
            generator: name(i),
            first: name(first_i),
            field: "request mix",
        });
    } else {
        Some(
            crate::mix::merge(&mixes, true).map_err(|reason| MergeError::Histogram {
                generator: "a generator".into(),
                what: "request mix group",
                reason,
            })?,
        )
    };
    let sum = |f: &dyn Fn(&RunResult) -> u64| results.iter().map(|r| f(r)).sum::<u64>();
    let requests = sum_requests(&results);
    let entries: Vec<GeneratorPart> = parts.iter().map(part_entry).collect();

    let mut config = first.config.clone();
    config.connections = entries.iter().map(|e| e.connections).sum();
    config.threads = entries.iter().map(|e| e.threads).sum();
    // Shares of a rate add up to it up to the last bit of a float: 2000, not
    // 1999.9999999999998, is what was asked for.
    config.rate = entries
        .iter()
        .map(|e| e.rate)
        .sum::<Option<f64>>()
        .map(|r| (r * 1e6).round() / 1e6);
    let duration_s = results.iter().map(|r| r.duration_s).fold(0.0, f64::max);
    let achieved: f64 = results.iter().map(|r| r.rate.achieved).sum();
    let lag_p =
        pooled.lag_percentiles(|| upper_bound(results.iter().map(|r| &r.latency_ms.generator_lag)));
    let [histogram, histogram_uncorrected, histogram_lag] = pooled.encoded();
    let g = |f: &dyn Fn(&crate::Generator) -> bool| results.iter().any(|r| f(&r.generator));
    let mut cpus: Vec<&str> = entries
        .iter()
        .map(|e| e.cpus.as_str())
        .filter(|c| !c.is_empty())
        .collect();
    cpus.dedup();
    let mut cpus_applied: Vec<&str> = results
        .iter()
        .map(|r| r.generator.cpus_applied.as_str())
        .filter(|c| !c.is_empty())
        .collect();
    cpus_applied.dedup();
    // Each generator's own, named: the merged figures hide which one it was.
    let warnings = done
        .iter()
        .flat_map(|(i, r)| r.warnings.iter().map(move |w| format!("{}: {w}", name(*i))))
        .collect();

    Ok(RunResult {
        schema: crate::RESULT_SCHEMA.to_string(),
        partial: results.iter().any(|r| r.partial) || results.len() < count,
        target: first.target.clone(),
        started_at: time::rfc3339(start_at_unix_ns + (first.config.warmup_s * 1e9).round() as u128),
        duration_s,
        rate: Rate {
            target: config.rate,
            achieved,
            completed_per_s: results.iter().map(|r| r.rate.completed_per_s).sum(),
            // The engine's rule: nothing due (an interrupt before the window) is no
            // shortfall.
            reached: config
                .rate
                .is_none_or(|t| requests.intended == 0 || achieved >= 0.99 * t),
            shortfall: results.iter().fold(Default::default(), |mut s, r| {
                s.add(&r.rate.shortfall);
                s
            }),
        },
        errors: merge_errors(&results),
        connections: sum_connections(&results),
        latency_ms: pooled.latency(lag_p.clone()),
        timeline: merge_timelines(&results),
        backends: sum_maps(results.iter().map(|r| &r.backends)),
        backends_seen: {
            let mut seen: BTreeMap<String, [f64; 2]> = BTreeMap::new();
            for r in &results {
                for (id, [a, b]) in &r.backends_seen {
                    let e = seen.entry(id.clone()).or_insert([*a, *b]);
                    e[0] = e[0].min(*a);
                    e[1] = e[1].max(*b);
                }
            }
            seen
        },
        bytes_read: sum(&|r| r.bytes_read),
        tls: sum_tls(&results),
        generator: crate::Generator {
            overloaded: g(&|x| x.overloaded),
            woke_late: g(&|x| x.woke_late),
            wakeup_us: results.iter().fold(None, |w, r| {
                crate::WakeUp::worst(w.as_ref(), r.generator.wakeup_us.as_ref())
            }),
            lag_p99_ms: lag_p.p99.unwrap_or(0.0),
            lag_limit_ms: first.generator.lag_limit_ms,
            cpu_s: results.iter().map(|r| r.generator.cpu_s).sum(),
            sleeps: results.iter().map(|r| r.generator.sleeps).sum(),
            clock_resolution_ns: results
                .iter()
                .map(|r| r.generator.clock_resolution_ns)
                .max()
                .unwrap_or(0),
            priority_raised: results.iter().all(|r| r.generator.priority_raised),
            cpus: cpus.join(","),
            cpus_applied: cpus_applied.join(","),
            cause: crate::LagCause::worst(results.iter().map(|r| r.generator.cause)),
            machine: results.iter().fold(None, |m, r| {
                crate::MachineTime::merge(m.as_ref(), r.generator.machine.as_ref())
            }),
        },
        histogram,
        histogram_uncorrected,
        histogram_lag,
        generators: Some(Generators {
            start_at: time::rfc3339(start_at_unix_ns),
            start_tolerance_ms: START_TOLERANCE_MS,
            parts: entries,
        }),
        lab: None,
        mix,
        windows_part: Vec::new(),
        samples: merge_samples(&results),
        // Sessions run on one generator only (`load --websocket` refuses
        // `--generators`), so no part carries them.
        sessions: None,
        machine: first.machine.clone(),
        ingressbench_version: first.ingressbench_version.clone(),
        // Plans and repetitions are refused with --generators (the CLI says so).
        steps: Vec::new(),
        repetitions: Vec::new(),
        warnings,
        requests,
        config,
    })
}

/// A part's result is one of this run's: its own index, balanced, the same load.
fn check_part(
    r: &RunResult,
    i: usize,
    count: usize,
    first_i: usize,
    first: &RunResult,
) -> Result<(), MergeError> {
    let name = |i: usize| format!("generator {i}/{count}");
    if let Some(own) = r.generators.as_ref().and_then(|g| g.parts.first()) {
        if own.index != i {
            return Err(MergeError::WrongPart {
                generator: name(i),
                found: own.index,
            });
        }
    }
    let q = &r.requests;
    if !q.balanced() {
        return Err(MergeError::Balance {
            generator: name(i),
            detail: format!(
                "intended {} against completed {} + failed {} + not_sent {} + unfinished {}, sent {} + timed_out_unsent {}",
                q.intended, q.completed, q.failed, q.not_sent, q.unfinished, q.sent, q.timed_out_unsent
            ),
        });
    }
    let (a, b) = (&r.config, &first.config);
    let fields: [(&'static str, bool); 6] = [
        ("url", a.url == b.url),
        ("method", a.method == b.method),
        ("schedule", a.schedule == b.schedule),
        ("duration", a.duration_s == b.duration_s),
        ("warmup", a.warmup_s == b.warmup_s),
        ("request body", a.body_bytes == b.body_bytes),
    ];
    if let Some((field, _)) = fields.iter().find(|(_, same)| !same) {
        return Err(MergeError::Mismatch {
            generator: name(i),
            first: name(first_i),
            field,
        });
    }
    Ok(())
}

/// A generator's entry: what the coordinator planned and measured, with what only the
/// generator knows taken from its result.
fn part_entry(p: &Part) -> GeneratorPart {
    let mut e = p.planned.clone();
    let Some(r) = &p.result else {
        return e;
    };
    if let Some(own) = r.generators.as_ref().and_then(|g| g.parts.first()) {
        e.seed = own.seed;
        e.start_offset_ms = own.start_offset_ms;
        if e.cpus.is_empty() {
            e.cpus = own.cpus.clone();
        }
    }
    if e.cpus.is_empty() {
        e.cpus = r.generator.cpus.clone();
    }
    e.connections = r.config.connections;
    e.threads = r.config.threads;
    e.rate = r.config.rate;
    e.partial = r.partial;
    e.requests = r.requests.clone();
    e.overloaded = r.generator.overloaded;
    e.lag_p99_ms = r.generator.lag_p99_ms;
    e.cpu_s = r.generator.cpu_s;
    e
}

/// The histograms of several results added (a split run's parts, a repeated run's
/// repetitions): percentiles of parts cannot be combined, their histograms can.
pub(crate) struct Pooled {
    pub(crate) corrected: Histogram<u64>,
    pub(crate) uncorrected: Histogram<u64>,
    pub(crate) lag: Histogram<u64>,
    /// Whether every result had its lag histogram (files written before it existed
    /// have none: the pooled lag is then not exact).
    pub(crate) lag_exact: bool,
}

impl Pooled {
    pub(crate) fn new() -> Self {
        Pooled {
            corrected: latency_histogram(),
            uncorrected: latency_histogram(),
            lag: lag_histogram(),
            lag_exact: true,
        }
    }

    /// Adds one result's histograms; on failure, which one and why.
    pub(crate) fn add(&mut self, r: &RunResult) -> Result<(), (&'static str, String)> {
        let add = |into: &mut Histogram<u64>, b64: &str, what: &'static str| {
            decode_base64(b64)
                .and_then(|h| into.add(&h).map_err(|e| format!("{e:?}")))
                .map_err(|reason| (what, reason))
        };
        add(&mut self.corrected, &r.histogram, "corrected")?;
        add(
            &mut self.uncorrected,
            &r.histogram_uncorrected,
            "uncorrected",
        )?;
        if r.histogram_lag.is_empty() {
            self.lag_exact = false;
        } else {
            add(&mut self.lag, &r.histogram_lag, "lag")?;
        }
        Ok(())
    }

    /// The pooled generator lag's percentiles when every result had its histogram,
    /// else `otherwise` (what the results' own figures allow).
    pub(crate) fn lag_percentiles(&self, otherwise: impl FnOnce() -> Percentiles) -> Percentiles {
        if self.lag_exact {
            histogram::percentiles(&self.lag, 1.0)
        } else {
            otherwise()
        }
    }

    /// The pooled latencies, with `generator_lag` (from [`Pooled::lag_percentiles`]).
    pub(crate) fn latency(&self, generator_lag: Percentiles) -> Latency {
        Latency {
            corrected: histogram::percentiles(&self.corrected, 1000.0),
            uncorrected: histogram::percentiles(&self.uncorrected, 1000.0),
            generator_lag,
        }
    }

    /// The pooled histograms as a result writes them: corrected, uncorrected, and
    /// the lag's (empty when not every result had one).
    pub(crate) fn encoded(&self) -> [String; 3] {
        let lag = if self.lag_exact {
            encode_base64(&self.lag)
        } else {
            String::new()
        };
        [
            encode_base64(&self.corrected),
            encode_base64(&self.uncorrected),
            lag,
        ]
    }
}

/// The request balances of several results (generators' parts, repetitions) added.
pub(crate) fn sum_requests(results: &[&RunResult]) -> Requests {
    let sum = |f: fn(&Requests) -> u64| results.iter().map(|r| f(&r.requests)).sum::<u64>();
    Requests {
        intended: sum(|q| q.intended),
        sent: sum(|q| q.sent),
        completed: sum(|q| q.completed),
        failed: sum(|q| q.failed),
        not_sent: sum(|q| q.not_sent),
        unfinished: sum(|q| q.unfinished),
        timed_out_unsent: sum(|q| q.timed_out_unsent),
    }
}

/// Handshakes of several results added; the first version any of them saw.
pub(crate) fn sum_tls(results: &[&RunResult]) -> TlsStats {
    TlsStats {
        handshakes: results.iter().map(|r| r.tls.handshakes).sum(),
        resumed: results.iter().map(|r| r.tls.resumed).sum(),
        version: results.iter().find_map(|r| r.tls.version.clone()),
        certificates: {
            let mut m: BTreeMap<String, crate::measures::CertificateSeen> = BTreeMap::new();
            for r in results {
                for (serial, c) in &r.tls.certificates {
                    m.entry(serial.clone()).or_default().merge(c);
                }
            }
            m
        },
    }
}

/// Counts summed by kind and status code; the first message of each kind is kept from
/// the lowest-numbered generator that had one.
/// The connections' figures of several runs, added up.
pub(crate) fn sum_connections(results: &[&RunResult]) -> crate::Connections {
    results.iter().fold(Default::default(), |mut c, r| {
        c.add(&r.connections);
        c
    })
}

pub(crate) fn merge_errors(results: &[&RunResult]) -> Errors {
    let mut counts = [0u64; ErrorKind::COUNT];
    for r in results {
        for k in ErrorKind::ALL {
            counts[k.index()] += r.errors.get(k);
        }
    }
    let mut e = Errors::from_counts(
        &counts,
        sum_maps(results.iter().map(|r| &r.errors.status_codes)),
    );
    e.grpc_codes = sum_maps(results.iter().map(|r| &r.errors.grpc_codes));
    for r in results {
        for (k, m) in &r.errors.first {
            e.first.entry(k.clone()).or_insert_with(|| m.clone());
        }
    }
    e
}

pub(crate) fn sum_maps<'a>(
    maps: impl Iterator<Item = &'a BTreeMap<String, u64>>,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for m in maps {
        for (k, v) in m {
            *out.entry(k.clone()).or_insert(0) += v;
        }
    }
    out
}

/// Per-figure upper bound of percentile sets whose histograms are not at hand: the
/// largest of each percentile, the count-weighted mean, the largest stdev.
fn upper_bound<'a>(sets: impl Iterator<Item = &'a Percentiles>) -> Percentiles {
    let sets: Vec<&Percentiles> = sets.filter(|p| !p.is_empty()).collect();
    let max =
        |f: &dyn Fn(&Percentiles) -> Option<f64>| sets.iter().filter_map(|p| f(p)).reduce(f64::max);
    let count: u64 = sets.iter().map(|p| p.count).sum();
    let mean = (count > 0).then(|| {
        sets.iter()
            .map(|p| p.mean.unwrap_or(0.0) * p.count as f64)
            .sum::<f64>()
            / count as f64
    });
    Percentiles {
        max: max(&|p| p.max),
        mean: mean.filter(|_| !sets.is_empty()),
        stdev: max(&|p| p.stdev),
        count,
        ..Percentiles::from_quantiles(|i| max(&|p| p.values()[i]))
    }
}

/// Seconds added by index: each generator's second `t` counts from its own window
/// start, which is the shared instant (plus warm-up) when it started on time.
fn merge_timelines(results: &[&RunResult]) -> Vec<TimelineEntry> {
    let len = results.iter().map(|r| r.timeline.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(len);
    for t in 0..len {
        let mut e = TimelineEntry {
            t: t as u64,
            ..Default::default()
        };
        let mut h = latency_histogram();
        let mut exact = true;
        for r in results {
            let Some(s) = r.timeline.get(t) else { continue };
            e.sent += s.sent;
            e.completed += s.completed;
            e.errors += s.errors;
            for (k, n) in &s.errors_by_kind {
                *e.errors_by_kind.entry(k.clone()).or_insert(0) += n;
            }
            for (k, n) in &s.backends {
                *e.backends.entry(k.clone()).or_insert(0) += n;
            }
            e.p50 = e.p50.max(s.p50);
            e.p99 = e.p99.max(s.p99);
            e.max = e.max.max(s.max);
            e.lag_max_ms = e.lag_max_ms.max(s.lag_max_ms);
            match s.histogram.as_deref().map(decode_base64) {
                Some(Ok(sh)) if h.add(&sh).is_ok() => {}
                _ => exact = false,
            }
        }
        if exact {
            if !h.is_empty() {
                let ms = |us: u64| us as f64 / 1000.0;
                e.p50 = ms(h.value_at_quantile(0.5));
                e.p99 = ms(h.value_at_quantile(0.99));
                e.max = ms(h.max());
            }
            e.histogram = Some(encode_base64(&h));
        }
        out.push(e);
    }
    out
}

/// The parts' samples in one table, rows sorted by intended send time, with error
/// kinds and backend ids renumbered into one list each.
fn merge_samples(results: &[&RunResult]) -> Option<Samples> {
    let parts: Vec<&Samples> = results.iter().filter_map(|r| r.samples.as_ref()).collect();
    let first = parts.first()?;
    let mut out = Samples {
        fraction: first.fraction,
        error_kinds: ErrorKind::ALL
            .iter()
            .map(|k| k.name().to_string())
            .collect(),
        ..Default::default()
    };
    let mut rows: Vec<(f64, f64, u16, u8, i32)> = Vec::new();
    for s in parts {
        for i in 0..s.len() {
            let error = match s.error_kind(i) {
                None => 0,
                Some(k) => match out.error_kinds.iter().position(|x| x == k) {
                    Some(p) => p as u8 + 1,
                    None => {
                        out.error_kinds.push(k.to_string());
                        out.error_kinds.len() as u8
                    }
                },
            };
            let backend = match s
                .backend
                .get(i)
                .and_then(|b| usize::try_from(*b).ok())
                .and_then(|b| s.backend_ids.get(b))
            {
                None => -1,
                Some(id) => match out.backend_ids.iter().position(|x| x == id) {
                    Some(p) => p as i32,
                    None => {
                        out.backend_ids.push(id.clone());
                        out.backend_ids.len() as i32 - 1
                    }
                },
            };
            rows.push((
                s.t_ms[i],
                s.latency_ms.get(i).copied().unwrap_or(0.0),
                s.status.get(i).copied().unwrap_or(0),
                error,
                backend,
            ));
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (t, l, st, e, b) in rows {
        out.t_ms.push(t);
        out.latency_ms.push(l);
        out.status.push(st);
        out.error.push(e);
        out.backend.push(b);
    }
    Some(out)
}

impl RunResult {
    /// Takes the per-second histograms out of the timeline (a merged run keeps them
    /// only until its interval log is written: a single generator's result has none),
    /// as `(second, V2 deflate bytes)`; a second without one has empty bytes.
    pub fn take_second_histograms(&mut self) -> Vec<(u64, Vec<u8>)> {
        use base64::Engine as _;
        self.timeline
            .iter_mut()
            .map(|e| {
                let bytes = e
                    .histogram
                    .take()
                    .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                    .unwrap_or_default();
                (e.t, bytes)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
