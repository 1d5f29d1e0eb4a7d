//! `ingressbench load --generators N` (issue 12, local mode): the load split over N
//! child processes and their results merged into one, judged by the merged JSON
//! result against the built-in backend on 127.0.0.1.
//!
//! Every run is bounded in time; each takes the machine alone (`common::exclusive`,
//! through `Load::spawn`).

use crate::common::backend::Backend;
use crate::common::load::{
    decode_histogram, may_retry_overloaded, run_load_alone, Load, LoadOutput,
};
use crate::common::{cpu, kill, processes_with, REQUEST_COUNTS};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The lead before the shared start (1 s + the default 2 s connect timeout), the
/// window, and room to spare.
fn limit(duration_s: u64) -> Duration {
    Duration::from_secs(3 + duration_s + 20)
}

fn parts(out: &LoadOutput) -> Vec<Value> {
    out.result()["generators"]["parts"]
        .as_array()
        .unwrap_or_else(|| panic!("no generators.parts\n{}", out.context()))
        .clone()
}

/// The scratch folder of the coordinator `pid`, which its generators' arguments name.
fn scratch_of(pid: u32) -> String {
    format!("ingressbench-generators-{pid}-")
}

/// No generator of the run `needle` names (its scratch folder) is left running.
fn assert_no_generator_left(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left: Vec<_> = processes_with(needle)
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("--part"))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "generators left running: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_generators_merge_into_the_sum_of_their_parts() {
    let b = Backend::start("b-gen", &[]);
    let out = run_load_alone(
        &[
            "--generators",
            "2",
            "-c6",
            "-R600",
            "-d3s",
            "--sample",
            "0.2",
            "--hdr-log",
            "{dir}/h.hlog",
            &b.url(),
        ],
        limit(3),
    );
    let v = out.ok();
    out.assert_no_errors();
    let ps = parts(&out);
    assert_eq!(ps.len(), 2, "{}", out.context());
    // Each generator's own share, the whole run's settings in `config`.
    for (i, p) in ps.iter().enumerate() {
        assert_eq!(p["index"], i, "{}", out.context());
        assert_eq!(p["connections"], 3, "{}", out.context());
        assert_eq!(p["rate"], 300.0, "{}", out.context());
        assert_eq!(p["seed"], i, "a seed each\n{}", out.context());
        assert!(p["error"].is_null() && p["partial"] == false, "{p}");
        let late = p["start_offset_ms"].as_f64().unwrap();
        assert!(
            late <= 50.0,
            "generator {i} started {late} ms late\n{}",
            out.context()
        );
        assert!(p["clock_offset_ms"].as_f64().is_some(), "{p}");
    }
    assert_eq!(v["config"]["connections"], 6);
    assert_eq!(v["config"]["rate"], 600.0);
    // The merged counts are the sums of the parts' counts, and balance.
    for k in REQUEST_COUNTS {
        let sum: u64 = ps.iter().map(|p| p["requests"][k].as_u64().unwrap()).sum();
        assert_eq!(
            out.u(&format!("/requests/{k}")),
            sum,
            "{k}\n{}",
            out.context()
        );
    }
    let intended = out.u("/requests/intended");
    assert!(
        (1782..=1818).contains(&intended),
        "600 req/s for 3 s is 1800 intended, not {intended}\n{}",
        out.context()
    );
    assert!(
        out.u("/requests/completed") >= intended * 99 / 100,
        "{}",
        out.context()
    );
    // One histogram value per response, one timeline second per second, the
    // timeline summing to the run, one interval per second in the log.
    let completed = out.u("/requests/completed");
    let h = decode_histogram(v["histogram"].as_str().unwrap()).unwrap();
    assert_eq!(h.len(), completed, "{}", out.context());
    let timeline = v["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 3, "{}", out.context());
    let sum = |k: &str| timeline.iter().map(|e| e[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("completed"), completed, "{}", out.context());
    assert_eq!(sum("sent"), out.u("/requests/sent"), "{}", out.context());
    assert!(
        timeline.iter().all(|e| e.get("histogram").is_none()),
        "a merged result is written as a single one: no per-second histograms"
    );
    let log = std::fs::read_to_string(out.file("h.hlog")).unwrap();
    let intervals = log.lines().filter(|l| l.starts_with("Tag=")).count();
    assert_eq!(intervals, 3, "{log}");
    // Samples from both generators, in one table.
    let n = v["samples"]["t_ms"].as_array().unwrap().len() as f64;
    assert!(
        (completed as f64 * 0.1..completed as f64 * 0.3).contains(&n),
        "{n} samples of {completed} at 0.2"
    );
    assert!(v["generator"]["cpus"].is_string());
    assert!(out.stdout.contains("  2 generators: #0 "), "{}", out.stdout);
    // Nothing failed, started late or fell short; only an overload, which is the
    // machine's doing when other processes take its CPUs, may be warned about.
    for w in out.stdout.lines().filter(|l| l.starts_with("WARNING")) {
        assert!(w.contains("overloaded"), "{w}\n{}", out.context());
    }
    assert_no_generator_left(&scratch_of(out.pid));
}

/// Two generators at half the rate measure what one measures at the full rate: the
/// corrected p50, p90 and p99 each within 25 % of the single generator's (or 0.5 ms,
/// whichever is larger). The backend holds each answer 1-5 ms (uniform), so the
/// percentiles are the server's, well above the generators' own noise.
///
/// An overloaded generator measures its own delay, not the server's: a pair of runs
/// in which one was overloaded is run again as `common::load::may_retry_overloaded`
/// allows, and fails if one is overloaded at every attempt.
#[test]
fn two_half_rate_generators_measure_what_one_does() {
    let b = Backend::start("b-half", &["--delay", "uniform:1ms-5ms"]);
    let url = b.url();
    let measure = |args: &[&str]| {
        cpu::wait_for_quiet(Duration::from_secs(20));
        let out = run_load_alone(
            &[args, &["-c20", "-R1000", "-d5s", &url]].concat(),
            limit(5),
        );
        out.ok();
        out.assert_no_errors();
        out
    };
    let mut attempt = 1;
    let (one, two) = loop {
        let one = measure(&["-t2"]);
        let two = measure(&["--generators", "2"]);
        if !may_retry_overloaded(attempt, &[&one, &two]) {
            break (one, two);
        }
        attempt += 1;
    };
    assert!(
        !one.overloaded() && !two.overloaded(),
        "a generator was overloaded on every attempt\none:\n{}\ntwo:\n{}",
        one.context(),
        two.context()
    );
    assert_eq!(parts(&two).len(), 2);
    let mut table = String::new();
    let mut bad = Vec::new();
    for p in ["p50", "p90", "p99"] {
        let ptr = format!("/latency_ms/corrected/{p}");
        let (a, b) = (one.f(&ptr), two.f(&ptr));
        table.push_str(&format!(
            "{p}: 1 generator {a:.3} ms, 2 generators {b:.3} ms\n"
        ));
        if (a - b).abs() > (0.25 * a).max(0.5) {
            bad.push(p);
        }
    }
    eprintln!("{table}");
    assert!(
        bad.is_empty(),
        "{bad:?} differ by more than 25 %:\n{table}\none:\n{}\ntwo:\n{}",
        one.context(),
        two.context()
    );
    let n1 = one.u("/requests/completed") as f64;
    let n2 = two.u("/requests/completed") as f64;
    assert!((n1 - n2).abs() <= n1 * 0.02, "{n1} against {n2}");
}

#[test]
fn sigint_stops_every_generator_and_writes_what_was_measured() {
    let b = Backend::start("b-gen-int", &[]);
    let load = Load::spawn(&["--generators", "2", "-c4", "-R200", "-d30s", &b.url()]);
    // The lead (3 s) and two seconds of load.
    std::thread::sleep(Duration::from_secs(5));
    assert!(kill("-INT", load.pid()));
    let out = load.finish(Duration::from_secs(10));
    assert!(
        !out.timed_out,
        "still running 10 s after SIGINT\n{}",
        out.context()
    );
    assert_eq!(out.code, Some(130), "{}", out.context());
    let v = out.result();
    assert_eq!(v["partial"], true, "{}", out.context());
    assert!(out.u("/requests/completed") > 0, "{}", out.context());
    for p in parts(&out) {
        assert!(p["error"].is_null(), "each generator wrote its part: {p}");
        assert_eq!(p["partial"], true, "{p}");
    }
    let d = out.f("/duration_s");
    assert!((1.0..5.0).contains(&d), "duration_s {d}\n{}", out.context());
    assert!(out.stdout.contains("interrupted"), "{}", out.stdout);
    assert_no_generator_left(&scratch_of(out.pid));
}

/// A generator that hangs (stopped with SIGSTOP here) is killed at the deadline (the
/// window, the request timeout and 10 s of grace), named in the result and the
/// summary, and the others' figures are still written; the exit code is 1.
#[test]
fn a_hung_generator_is_killed_and_named() {
    let b = Backend::start("b-gen-hang", &[]);
    let load = Load::spawn(&[
        "--generators",
        "2",
        "-c4",
        "-R100",
        "-d2s",
        "--timeout",
        "1s",
        &b.url(),
    ]);
    let started = Instant::now();
    let stopped = loop {
        // Its coordinator's scratch folder is in its arguments, so the child is ours.
        let me = scratch_of(load.pid());
        let found: Vec<_> = processes_with(&me)
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("--part 1/2"))
            .collect();
        if let Some((pid, _)) = found.first() {
            break pid.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no generator 1/2"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Into its window (the lead is 3 s): it hangs while running, not while starting.
    std::thread::sleep(Duration::from_secs(4).saturating_sub(started.elapsed()));
    assert!(kill("-STOP", &stopped));
    let out = load.finish(limit(2 + 1 + 10));
    assert!(!out.timed_out, "{}", out.context());
    assert_eq!(out.code, Some(1), "{}", out.context());
    let v = out.result();
    assert_eq!(v["partial"], true, "{}", out.context());
    let ps = parts(&out);
    let err = ps[1]["error"].as_str().unwrap_or_default();
    assert!(
        err.starts_with("did not finish within "),
        "{}",
        out.context()
    );
    assert!(ps[0]["error"].is_null(), "{}", out.context());
    assert!(
        out.u("/requests/completed") > 0,
        "the other's share\n{}",
        out.context()
    );
    assert!(
        out.stdout
            .contains("WARNING: generator 1/2 failed: did not finish within"),
        "{}",
        out.stdout
    );
    assert_no_generator_left(&scratch_of(out.pid));
}
