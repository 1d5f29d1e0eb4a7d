//! `ingressbench search` against a server whose ceiling is known: the built-in backend
//! answering every request after exactly 20 ms, loaded over 20 connections, can
//! complete at most 20 / 0.020 s = 1000 requests per second, and its p99 stays near
//! 20 ms below that rate while it grows without bound above it.

use crate::common::backend::Backend;
use crate::common::proc::Output;
use crate::common::{assert_refused, exclusive, read_json, run};
use serde_json::Value;
use std::time::Duration;

/// `ingressbench search URL FLAGS MORE` within `limit_s` seconds: `flags` are words
/// apart, `more` the arguments that are not one word (a path).
fn search(url: &str, flags: &str, more: &[&str], limit_s: u64) -> Output {
    let mut args = vec!["search", url];
    args.extend(flags.split_whitespace());
    args.extend(more);
    run(&args, Duration::from_secs(limit_s))
}

#[test]
fn search_finds_a_known_ceiling() {
    let _alone = exclusive();
    let b = Backend::start("slow", &["--delay", "20ms"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let url = b.url();
    let flags = "-c 20 --p99 60ms --errors 0% -d 2s --warmup 500ms --probe 1500ms --precision 4%";
    let o = search(&url, flags, &["--json", json.to_str().unwrap()], 120);
    eprintln!("{}", o.stdout);
    assert_eq!(o.code, Some(0), "{}\n{}", o.stdout, o.stderr);
    let r = read_json(&json);
    assert_eq!(r["schema"], "ingressbench/search/v1");
    let ceiling = r["ceiling"].as_f64().unwrap();
    assert!(
        (850.0..=1010.0).contains(&ceiling),
        "closed loop: {ceiling}"
    );
    let max = r["max_rate"].as_f64().expect("a maximum");
    assert!((800.0..=1010.0).contains(&max), "maximum {max}");
    assert!(
        o.stdout.contains(&format!("maximum: {max:.0} req/s")),
        "{}",
        o.stdout
    );
    // Consistent steps: each rate passed or failed as its own figures say, and
    // nothing above the maximum passed.
    let steps = r["steps"].as_array().unwrap();
    assert!(steps[0]["target"].is_null(), "the probe comes first");
    assert!(steps.len() >= 3, "{steps:?}");
    for s in &steps[1..] {
        let t = s["target"].as_f64().unwrap();
        let passed = s["missed"].as_array().unwrap().is_empty();
        let p99 = s["p99_ms"].as_f64().unwrap_or(f64::INFINITY);
        let held = s["achieved"].as_f64().unwrap() >= 0.99 * t;
        assert_eq!(
            passed,
            p99 <= 60.0
                && held
                && s["error_ratio"].as_f64() == Some(0.0)
                && !missed(s, "generator"),
            "{s}"
        );
        if t > max {
            assert!(!passed, "{t} passed above the maximum {max}: {s}");
        }
        if passed {
            // Below the ceiling the latency is the backend's own 20 ms.
            assert!(s["p50_ms"].as_f64().unwrap() >= 19.5, "{s}");
        }
    }
}

/// Against a backend that answers no sooner than 20 ms, no rate holds a p99 of 5 ms
/// however fast or busy the machine is: not a timing test, it runs beside others.
#[test]
fn search_says_when_no_rate_holds_and_refuses_bad_bounds() {
    let b = Backend::start("slow", &["--delay", "20ms"]);
    let url = b.url();
    // A bound below the backend's own delay: no rate can hold it.
    let flags = "-c 20 --p99 5ms -d 1s --warmup 200ms --probe 1s --precision 25%";
    let o = search(&url, flags, &[], 60);
    assert_eq!(o.code, Some(1), "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("no rate held p99 <= 5.00 ms"),
        "{}",
        o.stdout
    );

    // Bad input: one line, exit 2, before any load.
    for (flags, want) in [
        (
            vec!["--p99", "5ms", "--errors", "150%"],
            "--errors 150%: give a share",
        ),
        (vec!["--p99", "0s"], "--p99 0s: give a bound above zero"),
        (
            vec!["--p99", "5ms", "--trials", "0"],
            "--trials 0: give 1 to 9",
        ),
    ] {
        let mut args = vec!["search", url.as_str()];
        args.extend(flags.iter().copied());
        let o = run(&args, Duration::from_secs(10));
        assert_refused(&o, want, &format!("{flags:?}"));
    }
}

fn missed(s: &Value, what: &str) -> bool {
    s["missed"].as_array().unwrap().iter().any(|m| m == what)
}
