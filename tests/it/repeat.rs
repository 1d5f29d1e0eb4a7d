//! `--repeat N` and the comparison that knows the noise (issue 17, section 2), end to
//! end: real repeated loads of real backends, compared by the real binary.
//!
//! Two backends of the same kind and delay stand for "the same server" and one with
//! twice the delay for "a 2x slower server". Each side is 4 repetitions, the fewest
//! with which the rank test can reach alpha 0.05 (its smallest p is 2/70 = 0.029).

use crate::common::backend::Backend;
use crate::common::load::{run_load_alone, LoadOutput};
use crate::common::{cpu, run};
use std::time::Duration;

const REPS: &str = "4";

fn repeated(b: &Backend) -> LoadOutput {
    cpu::wait_for_quiet(Duration::from_secs(20));
    let url = b.url();
    let out = run_load_alone(
        &[
            url.as_str(),
            "-R",
            "200",
            "-d",
            "1s",
            "-c",
            "10",
            "-t",
            "1",
            "--repeat",
            REPS,
        ],
        Duration::from_secs(40),
    );
    assert_eq!(out.code, Some(0), "{}", out.context());
    out
}

fn save(out: &LoadOutput, dir: &std::path::Path, name: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(out.result()).unwrap()).unwrap();
    p.display().to_string()
}

/// Every repetition is a whole result of its own, and the top level pools them.
fn check_pooled(out: &LoadOutput) {
    let r = out.result();
    let reps = r["repetitions"].as_array().expect("repetitions kept");
    assert_eq!(reps.len(), 4, "{}", out.context());
    let sum = |k: &str| -> u64 {
        reps.iter()
            .map(|x| x["requests"][k].as_u64().unwrap())
            .sum()
    };
    for k in ["intended", "sent", "completed", "failed"] {
        assert_eq!(sum(k), out.u(&format!("/requests/{k}")), "{k}");
    }
    assert_eq!(out.u("/requests/intended"), 800, "{}", out.context());
    let counts: u64 = reps
        .iter()
        .map(|x| x["latency_ms"]["corrected"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counts, out.u("/latency_ms/corrected/count"));
    assert!(reps.iter().all(|x| x["repetitions"].is_null()));
    assert!((out.f("/duration_s") - 4.0).abs() < 0.1);
    // The terminal lists each repetition.
    assert!(
        out.stdout
            .contains("4 repetitions (the figures above pool them all)"),
        "{}",
        out.stdout
    );
}

#[test]
fn same_server_is_not_a_regression_and_a_2x_slower_one_is() {
    let a = Backend::start("a", &["--delay", "4ms", "--workers", "1"]);
    let b = Backend::start("b", &["--delay", "4ms", "--workers", "1"]);
    let slow = Backend::start("slow", &["--delay", "8ms", "--workers", "1"]);
    // Interleaved by hand as `run --repeat` interleaves systems: base, same, slow.
    let (ra, rb, rs) = (repeated(&a), repeated(&b), repeated(&slow));
    check_pooled(&ra);
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb, ps) = (
        save(&ra, dir.path(), "a.json"),
        save(&rb, dir.path(), "b.json"),
        save(&rs, dir.path(), "slow.json"),
    );

    // The same server: the medians of p50 may differ by a hair, but no limit of 20 %
    // is crossed by two sets of runs of one server, significant or not.
    let same = run(
        &["compare", &pa, &pb, "--max-regression", "p50=20%,p99=100%"],
        Duration::from_secs(20),
    );
    let text = same.stdout.clone();
    assert_eq!(same.code, Some(0), "{text}");
    assert!(
        text.contains("medians of 4 (base) and 4 (new) repetitions"),
        "{text}"
    );
    assert!(text.contains("every threshold holds"), "{text}");

    // Twice the delay: p50 goes from about 4 ms to about 8 ms in every repetition, so
    // the ranks separate completely and p is the smallest 4 against 4 can give.
    let slower = run(
        &["compare", &pa, &ps, "--max-regression", "p50=20%"],
        Duration::from_secs(20),
    );
    let text = slower.stdout.clone();
    assert_eq!(slower.code, Some(1), "{text}");
    assert!(text.contains("REGRESSION"), "{text}");
    assert!(text.contains("significant, p=0.029"), "{text}");
    assert!(!text.contains("NOT SIGNIFICANT"), "{text}");

    // The same 2x difference judged one run against one run is a crossing without a
    // test: the repetitions are what make the verdict.
    let first = |r: &LoadOutput, name: &str| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            serde_json::to_vec(&r.result()["repetitions"][0]).unwrap(),
        )
        .unwrap();
        p.display().to_string()
    };
    let (oa, os) = (first(&ra, "a1.json"), first(&rs, "s1.json"));
    let single = run(
        &["compare", &oa, &os, "--max-regression", "p50=20%"],
        Duration::from_secs(20),
    );
    let text = single.stdout.clone();
    assert_eq!(single.code, Some(1), "{text}");
    assert!(text.contains("no repetitions"), "{text}");
}

#[test]
fn repeat_is_refused_where_it_cannot_run() {
    for (args, says) in [
        (
            vec!["load", "http://127.0.0.1:9/", "-R", "10", "--repeat", "0"],
            "--repeat 0",
        ),
        (
            vec![
                "load",
                "http://127.0.0.1:9/",
                "-R",
                "10",
                "--repeat",
                "3",
                "--generators",
                "2",
            ],
            "--repeat 3 with --generators",
        ),
    ] {
        let out = run(&args, Duration::from_secs(10));
        let err = out.stderr.clone();
        assert_eq!(out.code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
