use super::*;
use crate::histogram::{decode_base64, encode_base64, lag_histogram, latency_histogram};
use crate::{LoadConfig, RunResult};

const START: u128 = 1_795_317_845_000_000_000;

fn hist(values: &[u64]) -> Histogram<u64> {
    let mut h = latency_histogram();
    for v in values {
        h.record(*v).unwrap();
    }
    h
}

/// A generator's result whose second `t` answered `seconds[t]` (corrected µs), all
/// completed, with its own entry as a generator writes it.
fn part(index: usize, count: usize, seconds: &[&[u64]]) -> RunResult {
    assert!(index < count);
    let all: Vec<u64> = seconds.iter().flat_map(|s| s.iter().copied()).collect();
    let n = all.len() as u64;
    let mut lag = lag_histogram();
    lag.record(1_000 * (index as u64 + 1)).unwrap();
    RunResult {
        schema: crate::RESULT_SCHEMA.into(),
        target: "http://127.0.0.1:1/".into(),
        config: LoadConfig {
            url: "http://127.0.0.1:1/".into(),
            method: "GET".into(),
            threads: 1,
            connections: 5,
            duration_s: 3.0,
            rate: Some(50.0),
            schedule: "connection".into(),
            ..Default::default()
        },
        duration_s: seconds.len() as f64,
        rate: Rate {
            target: Some(50.0),
            achieved: n as f64 / seconds.len() as f64,
            completed_per_s: n as f64 / seconds.len() as f64,
            reached: true,
            ..Default::default()
        },
        requests: Requests {
            intended: n + 1,
            sent: n,
            completed: n,
            not_sent: 1,
            ..Default::default()
        },
        latency_ms: Latency {
            corrected: histogram::percentiles(&hist(&all), 1000.0),
            ..Default::default()
        },
        timeline: seconds
            .iter()
            .enumerate()
            .map(|(t, v)| {
                let h = hist(v);
                TimelineEntry {
                    t: t as u64,
                    sent: v.len() as u64,
                    completed: v.len() as u64,
                    p50: h.value_at_quantile(0.5) as f64 / 1000.0,
                    p99: h.value_at_quantile(0.99) as f64 / 1000.0,
                    max: h.max() as f64 / 1000.0,
                    backends: [(format!("b{index}"), v.len() as u64)].into(),
                    histogram: Some(encode_base64(&h)),
                    lag_max_ms: (index as f64 + 1.0) / 10.0,
                    ..Default::default()
                }
            })
            .collect(),
        backends: [(format!("b{index}"), n)].into(),
        histogram: encode_base64(&hist(&all)),
        histogram_uncorrected: encode_base64(&hist(&all)),
        histogram_lag: encode_base64(&lag),
        generator: crate::Generator {
            lag_p99_ms: (index as f64 + 1.0) / 1000.0,
            lag_limit_ms: 2.0,
            cpu_s: 0.5,
            cpus: index.to_string(),
            ..Default::default()
        },
        generators: Some(Generators {
            start_at: time::rfc3339(START),
            start_tolerance_ms: START_TOLERANCE_MS,
            parts: vec![GeneratorPart {
                index,
                seed: index as u64,
                cpus: index.to_string(),
                start_offset_ms: Some(0.0),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

fn done(r: RunResult, index: usize) -> Part {
    Part {
        planned: GeneratorPart {
            index,
            connections: 5,
            threads: 1,
            rate: Some(50.0),
            clock_offset_ms: Some(0.01),
            ..Default::default()
        },
        result: Some(r),
    }
}

const A0: &[u64] = &[100, 250, 999, 1_000, 1_001, 70_000];
const A1: &[u64] = &[3, 3, 3, 2_000_000];
const B0: &[u64] = &[120, 121, 5_000, 5_001, 123_456];
const B1: &[u64] = &[4, 400, 40_000];
const B2: &[u64] = &[9_999_999];

#[test]
fn merged_histogram_is_the_histogram_of_the_union_value_for_value() {
    let a = part(0, 2, &[A0, A1]);
    let b = part(1, 2, &[B0, B1, B2]);
    let m = merge(vec![done(b, 1), done(a, 0)], START).unwrap();
    let union: Vec<u64> = [A0, A1, B0, B1, B2].concat();
    let want = hist(&union);
    let got = decode_base64(&m.histogram).unwrap();
    assert_eq!(got, want);
    // Value for value: every bucket holds the same count.
    for (g, w) in got.iter_recorded().zip(want.iter_recorded()) {
        assert_eq!(
            (g.value_iterated_to(), g.count_at_value()),
            (w.value_iterated_to(), w.count_at_value())
        );
    }
    assert_eq!(got.iter_recorded().count(), want.iter_recorded().count());
    assert_eq!(got.len(), union.len() as u64);
    assert_eq!(
        m.latency_ms.corrected,
        histogram::percentiles(&want, 1000.0)
    );
    assert_eq!(decode_base64(&m.histogram_uncorrected).unwrap(), want);
    // Lag merges exactly too: 1 µs and 2 µs, one each.
    let lag = decode_base64(&m.histogram_lag).unwrap();
    assert_eq!((lag.len(), lag.min(), lag.max()), (2, 1_000, 2_000));
    assert_eq!(
        m.generator.lag_p99_ms,
        m.latency_ms.generator_lag.p99.unwrap()
    );
}

#[test]
fn timelines_add_per_second_with_exact_percentiles() {
    let m = merge(
        vec![
            done(part(0, 2, &[A0, A1]), 0),
            done(part(1, 2, &[B0, B1, B2]), 1),
        ],
        START,
    )
    .unwrap();
    assert_eq!(m.timeline.len(), 3);
    for (t, values) in [[A0, B0].concat(), [A1, B1].concat(), B2.to_vec()]
        .iter()
        .enumerate()
    {
        let e = &m.timeline[t];
        let h = hist(values);
        assert_eq!(e.t, t as u64);
        assert_eq!((e.sent, e.completed), (h.len(), h.len()), "second {t}");
        assert_eq!(
            e.p50,
            h.value_at_quantile(0.5) as f64 / 1000.0,
            "second {t}"
        );
        assert_eq!(
            e.p99,
            h.value_at_quantile(0.99) as f64 / 1000.0,
            "second {t}"
        );
        assert_eq!(e.max, h.max() as f64 / 1000.0, "second {t}");
        assert_eq!(decode_base64(e.histogram.as_deref().unwrap()).unwrap(), h);
    }
    assert_eq!(
        m.timeline[1].backends,
        [("b0".into(), 4), ("b1".into(), 3)].into()
    );
    assert_eq!(m.timeline[2].backends, [("b1".into(), 1)].into());
    // A second's largest lag is the largest of its parts'.
    assert_eq!(m.timeline[0].lag_max_ms, 0.2);
    // The entries still sum to the run.
    let sent: u64 = m.timeline.iter().map(|e| e.sent).sum();
    assert_eq!(sent, m.requests.sent);

    // Without per-second histograms, a second's percentiles are the parts' largest:
    // an upper bound, never an average.
    let mut a = part(0, 2, &[A0]);
    let mut b = part(1, 2, &[B0]);
    a.timeline[0].histogram = None;
    b.timeline[0].histogram = None;
    let (pa, pb) = (a.timeline[0].p99, b.timeline[0].p99);
    let m = merge(vec![done(a, 0), done(b, 1)], START).unwrap();
    assert_eq!(m.timeline[0].p99, pa.max(pb));
    assert_eq!(m.timeline[0].histogram, None);
}

#[test]
fn counts_and_errors_are_summed_and_first_messages_kept() {
    let mut a = part(0, 2, &[A0]);
    let mut b = part(1, 2, &[B0]);
    a.requests.failed = 2;
    a.requests.sent += 2;
    a.requests.intended += 2;
    a.errors.status = 2;
    a.errors.status_codes.insert("503".into(), 2);
    // b: one of its timeouts was still queued when its drain ended, never sent.
    b.requests.failed = 4;
    b.requests.sent += 3;
    b.requests.timed_out_unsent = 1;
    b.requests.intended += 4;
    b.errors.status = 1;
    b.errors.timeout = 3;
    a.rate.shortfall.connections_busy = 5;
    b.rate.shortfall.connections_busy = 2;
    b.rate.shortfall.connections_failed = 1;
    b.errors.status_codes.insert("503".into(), 1);
    b.errors
        .first
        .insert("timeout".into(), "b timed out".into());
    b.errors.first.insert("status".into(), "b 503".into());
    a.errors.first.insert("status".into(), "a 503".into());
    a.bytes_read = 10;
    b.bytes_read = 5;
    let m = merge(vec![done(a, 0), done(b, 1)], START).unwrap();
    assert_eq!(m.requests.failed, 6);
    assert_eq!(m.requests.completed, (A0.len() + B0.len()) as u64);
    assert_eq!(m.requests.timed_out_unsent, 1);
    assert!(m.requests.balanced(), "{:?}", m.requests);
    let sf = &m.rate.shortfall;
    assert_eq!(
        (
            sf.generator_late,
            sf.connections_busy,
            sf.connections_failed
        ),
        (0, 7, 1)
    );
    assert_eq!((m.errors.status, m.errors.timeout), (3, 3));
    assert_eq!(m.errors.status_codes["503"], 3);
    assert_eq!(
        m.errors.first["status"], "a 503",
        "the lower generator's first"
    );
    assert_eq!(m.errors.first["timeout"], "b timed out");
    assert_eq!(m.bytes_read, 15);
    assert_eq!(m.backends, [("b0".into(), 6), ("b1".into(), 5)].into());
    // The merged settings are the whole run's.
    assert_eq!(
        (m.config.connections, m.config.threads, m.config.rate),
        (10, 2, Some(100.0))
    );
    assert_eq!(m.rate.target, Some(100.0));
    assert_eq!(m.started_at, time::rfc3339(START));
    assert!(!m.partial);
    let g = m.generators.as_ref().unwrap();
    assert_eq!(g.parts.len(), 2);
    assert_eq!(g.parts[1].requests.failed, 4);
    assert_eq!(g.parts[1].seed, 1);
    assert_eq!(g.parts[0].clock_offset_ms, Some(0.01));
    assert_eq!(m.generator.cpus, "0,1");
    assert!(g.warnings().is_empty(), "{:?}", g.warnings());
}

#[test]
fn a_bad_balance_is_an_error_naming_the_generator() {
    let a = part(0, 2, &[A0]);
    let mut b = part(1, 2, &[B0]);
    b.requests.completed -= 1;
    let e = merge(vec![done(a, 0), done(b, 1)], START).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("generator 1/2: the request balance does not add up: intended 6"),
        "{e}"
    );
}

#[test]
fn inconsistent_parts_are_refused() {
    let a = part(0, 2, &[A0]);
    let mut b = part(1, 2, &[B0]);
    b.config.url = "http://127.0.0.1:2/".into();
    assert_eq!(
        merge(vec![done(a.clone(), 0), done(b, 1)], START)
            .unwrap_err()
            .to_string(),
        "generator 1/2 ran another load than generator 0/2: its url differs"
    );
    // A result filed under the wrong index.
    let e = merge(vec![done(a.clone(), 0), done(a.clone(), 1)], START).unwrap_err();
    assert_eq!(
        e.to_string(),
        "generator 1/2: its result says it is generator 0"
    );
    let e = merge(vec![done(a.clone(), 0), done(a, 0)], START).unwrap_err();
    assert!(matches!(e, MergeError::Index { index: 0, count: 2 }), "{e}");
    assert_eq!(merge(Vec::new(), START), Err(MergeError::Empty));
    let mut bad = part(0, 1, &[A0]);
    bad.histogram = "not base64!".into();
    assert!(merge(vec![done(bad, 0)], START)
        .unwrap_err()
        .to_string()
        .starts_with("generator 0/1: corrected histogram: "));
}

#[test]
fn failed_overloaded_or_late_generators_are_named() {
    let mut a = part(0, 3, &[A0]);
    a.generator.overloaded = true;
    a.generator.lag_p99_ms = 7.5;
    let mut b = part(1, 3, &[B0]);
    b.generators.as_mut().unwrap().parts[0].start_offset_ms = Some(120.0);
    let failed = Part {
        planned: GeneratorPart {
            index: 2,
            connections: 5,
            threads: 1,
            rate: Some(50.0),
            error: Some("did not finish within 20 s: killed".into()),
            ..Default::default()
        },
        result: None,
    };
    let m = merge(vec![done(a, 0), done(b, 1), failed], START).unwrap();
    assert!(m.partial, "a missing generator leaves the run partial");
    assert!(m.generator.overloaded);
    assert_eq!(m.config.connections, 15, "the whole run, as planned");
    assert_eq!(m.requests.completed, (A0.len() + B0.len()) as u64);
    let w = m.generators.as_ref().unwrap().warnings();
    assert_eq!(w.len(), 3, "{w:#?}");
    assert!(w[0].starts_with("generator 0/3 was overloaded: its lag p99 was 7.500 ms"));
    assert!(w[1].starts_with("generator 1/3 started 120.0 ms late (tolerance 50 ms)"));
    assert_eq!(
        w[2],
        "generator 2/3 failed: did not finish within 20 s: killed; its share of the load is missing"
    );
    // Clock skew beyond the tolerance is named too.
    let mut p = done(part(0, 1, &[A0]), 0);
    p.planned.clock_offset_ms = Some(-80.0);
    let m = merge(vec![p], START).unwrap();
    let w = m.generators.unwrap().warnings();
    assert!(
        w[0].starts_with("generator 0/1's clock is -80.0 ms off"),
        "{w:?}"
    );
    // Change marks of a scenario run: on time says nothing; late or missed is named,
    // and what the coordinator measured survives the merge.
    let marked = |m: crate::MarksReceived| {
        let mut p = done(part(0, 1, &[A0]), 0);
        p.planned.marks = Some(m);
        merge(vec![p], START).unwrap().generators.unwrap()
    };
    let on_time = marked(crate::MarksReceived {
        sent: 3,
        missed: 0,
        late_max_ms: 0.0,
    });
    assert!(on_time.warnings().is_empty(), "{:?}", on_time.warnings());
    assert_eq!(on_time.parts[0].marks.as_ref().unwrap().sent, 3);
    let bad = marked(crate::MarksReceived {
        sent: 3,
        missed: 1,
        late_max_ms: 12.5,
    })
    .warnings();
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(
        bad[0].starts_with("generator 0/1 missed 1 of 3 change marks"),
        "{bad:?}"
    );
    assert!(bad[1].contains("up to 12.5 ms after its time"), "{bad:?}");

    let none = merge(
        vec![Part {
            planned: GeneratorPart {
                error: Some("exited with code 2".into()),
                ..Default::default()
            },
            result: None,
        }],
        START,
    );
    assert_eq!(
        none.unwrap_err().to_string(),
        "every generator failed: generator 0/1: exited with code 2"
    );
}

/// A generator's own warnings (a CPU pin refused) are the merged run's, named: the
/// merged figures would hide which generator it was. Its CPUs stay beside them.
#[test]
fn each_generators_warnings_are_kept_and_named() {
    let mut a = part(0, 2, &[A0]);
    a.generator.cpus = "7".into();
    a.generator.cpus_applied = "0,1".into();
    a.warnings = vec!["the generator's threads could not be pinned to CPUs 7".into()];
    let b = part(1, 2, &[B0]);
    let m = merge(vec![done(a, 0), done(b, 1)], START).unwrap();
    assert_eq!(
        m.warnings,
        ["generator 0/2: the generator's threads could not be pinned to CPUs 7"]
    );
    assert_eq!(m.generator.cpus_applied, "0,1");
}

#[test]
fn samples_are_renumbered_and_sorted() {
    let mut a = part(0, 2, &[A0]);
    let mut b = part(1, 2, &[B0]);
    a.samples = Some(Samples {
        fraction: 0.5,
        t_ms: vec![1.0, 30.0],
        latency_ms: vec![0.1, 0.2],
        status: vec![200, 0],
        error: vec![0, 6],
        error_kinds: ErrorKind::ALL.iter().map(|k| k.name().into()).collect(),
        backend: vec![0, -1],
        backend_ids: vec!["b0".into()],
    });
    b.samples = Some(Samples {
        fraction: 0.5,
        t_ms: vec![2.0],
        latency_ms: vec![0.3],
        status: vec![503],
        error: vec![1],
        error_kinds: vec!["status".into()],
        backend: vec![0],
        backend_ids: vec!["b1".into()],
    });
    let m = merge(vec![done(a, 0), done(b, 1)], START).unwrap();
    let s = m.samples.unwrap();
    assert_eq!(s.t_ms, vec![1.0, 2.0, 30.0]);
    assert_eq!(s.status, vec![200, 503, 0]);
    assert_eq!(
        (0..3).map(|i| s.error_kind(i)).collect::<Vec<_>>(),
        vec![None, Some("status"), Some("timeout")]
    );
    assert_eq!(s.backend, vec![0, 1, -1]);
    assert_eq!(s.backend_ids, vec!["b0".to_string(), "b1".into()]);
}

#[test]
fn second_histograms_are_taken_out_for_the_interval_log() {
    let mut m = merge(vec![done(part(0, 1, &[A0, A1]), 0)], START).unwrap();
    let seconds = m.take_second_histograms();
    assert_eq!(seconds.len(), 2);
    assert_eq!(
        crate::histogram::decode_v2(&seconds[1].1).unwrap(),
        hist(A1)
    );
    assert!(m.timeline.iter().all(|e| e.histogram.is_none()));
    let json = serde_json::to_value(&m.timeline[0]).unwrap();
    assert!(json.get("histogram").is_none(), "{json}");
}
