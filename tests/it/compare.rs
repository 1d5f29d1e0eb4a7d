//! End-to-end tests of `ingressbench compare`: the built binary on result files made
//! from a real short load run against the built-in backend on 127.0.0.1:0, with
//! numbers edited in the JSON to simulate a regression, a different setup, a lab run
//! of several systems, and bad input.

use crate::common::backend::Backend;
use crate::common::json::f_at;
use crate::common::lab::path_text;
use crate::common::{fmt_ms, run, shared};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// The result of one real 1 s load at 500 req/s against the built-in backend, made
/// once per test process (under nextest, once per test: each is its own process).
fn real_result() -> &'static Value {
    static R: OnceLock<Value> = OnceLock::new();
    R.get_or_init(|| {
        let _turn = shared();
        let dir = tempfile::tempdir().unwrap();
        let backend = Backend::start_args(&[]);
        let json = dir.path().join("a.json");
        let url = backend.url();
        let out = run(
            &[
                "load",
                "-t1",
                "-c10",
                "-R500",
                "-d1s",
                "--json",
                json.to_str().unwrap(),
                &url,
            ],
            Duration::from_secs(30),
        );
        assert_eq!(out.code, Some(0), "load failed: {}", out.stderr);
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    })
}

/// `ingressbench compare ARGS`: exit code, stdout, stderr.
fn compare(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["compare"];
    all.extend_from_slice(args);
    let out = run(&all, Duration::from_secs(30));
    (out.code.expect("exit code"), out.stdout, out.stderr)
}

fn write(path: &Path, v: &Value) -> String {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

fn set(v: &mut Value, ptr: &str, x: Value) {
    *v.pointer_mut(ptr)
        .unwrap_or_else(|| panic!("{ptr} missing")) = x;
}

/// The real result with `n` more timeouts (the request balance kept) and p99 1.5
/// times as high (the higher percentiles at least as high).
fn regressed(base: &Value, n: u64) -> Value {
    let mut r = base.clone();
    let p99 = f_at(&r, "/latency_ms/corrected/p99") * 1.5;
    set(&mut r, "/latency_ms/corrected/p99", json!(p99));
    for p in ["p99.9", "p99.99", "p99.999", "p99.9999", "max"] {
        let ptr = format!("/latency_ms/corrected/{p}");
        let v = f_at(&r, &ptr).max(p99);
        set(&mut r, &ptr, json!(v));
    }
    let t = f_at(&r, "/errors/timeout") as u64 + n;
    set(&mut r, "/errors/timeout", json!(t));
    let completed = f_at(&r, "/requests/completed") as u64 - n;
    let failed = f_at(&r, "/requests/failed") as u64 + n;
    set(&mut r, "/requests/completed", json!(completed));
    set(&mut r, "/requests/failed", json!(failed));
    r
}

/// Writes `result` as system `system`'s result in the lab run folder `run`, of
/// scenario `dynamic-endpoints` with the given added-backend propagation.
fn write_system(run: &Path, system: &str, result: &Value, added_ms: &[f64]) {
    let r = as_lab(result, system, "dynamic-endpoints", added_ms);
    write(&run.join(system).join("result.json"), &r);
}

/// `compare A B --max-regression THRESHOLDS --out PAGE`: two lab runs' folders.
fn compare_runs(a: &Path, b: &Path, thresholds: &str, page: &Path) -> (i32, String, String) {
    let (a, b, page) = (path_text(a), path_text(b), path_text(page));
    compare(&[&a, &b, "--max-regression", thresholds, "--out", &page])
}

/// The result as one system of a lab run, with the given added-backend propagation.
fn as_lab(base: &Value, system: &str, scenario: &str, added_ms: &[f64]) -> Value {
    let mut r = base.clone();
    let mut sorted = added_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = (!sorted.is_empty()).then(|| sorted[sorted.len() / 2]);
    r["lab"] = json!({
        "system": system,
        "scenario": scenario,
        "versions": {"nginx": "1.22.1"},
        "events": [],
        "windows": [],
        "propagation": {
            "added": [],
            "removed": [],
            "added_ms": {"n": sorted.len(), "min": sorted.first(), "median": median, "max": sorted.last()},
            "removed_ms": {"n": 0, "min": null, "median": null, "max": null}
        },
        "proxy_died": false
    });
    r
}

fn one_line_error(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {stderr}");
    assert!(lines[0].starts_with("ingressbench: "), "{stderr}");
    lines[0]
}

#[test]
fn identical_runs_hold_every_threshold() {
    let d = tempfile::tempdir().unwrap();
    let a = write(&d.path().join("a.json"), real_result());
    write(&d.path().join("b/result.json"), real_result());
    let b_dir = d.path().join("b");
    let (code, out, err) = compare(&[
        &a,
        b_dir.to_str().unwrap(),
        "--max-regression",
        "p99=0%,p99.99=0ms,max=0ms",
        "--max-regression=errors=0",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("every threshold holds"), "{out}");
    assert!(!out.contains("REGRESSION"), "{out}");
    assert!(!out.contains("not comparable"), "{out}");
    // The table: every percentile and max, base = new, a zero delta.
    let p99 = fmt_ms(f_at(real_result(), "/latency_ms/corrected/p99"));
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("p99 "))
        .unwrap_or_else(|| panic!("no p99 row: {out}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["p99", &p99, &p99, "+0.00us", "+0.0%"]
    );
    for label in ["p50", "p99.9999", "max", "total", "achieved"] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(label)),
            "{label}: {out}"
        );
    }
    // Without thresholds nothing is judged.
    let (code, out, _) = compare(&[&a, &a]);
    assert_eq!(code, 0);
    assert!(!out.contains("threshold"), "{out}");
}

#[test]
fn a_regression_exits_1_naming_each_crossed_threshold() {
    let d = tempfile::tempdir().unwrap();
    let base = real_result();
    let new = regressed(base, 5);
    let a = write(&d.path().join("a.json"), base);
    let b = write(&d.path().join("b.json"), &new);
    let (code, out, err) = compare(&[
        &a,
        &b,
        "--max-regression",
        "p99=10%",
        "--max-regression",
        "errors.timeout=2,max=1m,errors=10",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let crossed: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("REGRESSION:"))
        .collect();
    assert_eq!(crossed.len(), 2, "{out}");
    // The figures as `compare` reads them: parsed back from the files written (a float
    // written and parsed again may differ in its last bit, and so round the other way
    // at the last printed digit).
    let read =
        |p: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (b99, n99) = (
        f_at(&read(&a), "/latency_ms/corrected/p99"),
        f_at(&read(&b), "/latency_ms/corrected/p99"),
    );
    assert_eq!(
        crossed[0],
        format!(
            "REGRESSION: load: p99: base {}, new {}, limit +10% ({}) (--max-regression p99=10%)",
            fmt_ms(b99),
            fmt_ms(n99),
            fmt_ms(b99 * 1.1)
        )
    );
    let t0 = f_at(base, "/errors/timeout");
    assert_eq!(
        crossed[1],
        format!(
            "REGRESSION: load: errors.timeout: base {t0}, new {}, limit +2 ({}) (--max-regression errors.timeout=2)",
            t0 + 5.0,
            t0 + 2.0
        )
    );
    assert!(out.contains("2 threshold(s) crossed"), "{out}");
    // The deltas in the table agree with the files.
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("timeout "))
        .unwrap_or_else(|| panic!("no timeout row: {out}"));
    assert_eq!(row.split_whitespace().nth(3), Some("+5"), "{row}");
    // Loose enough limits hold.
    let (code, out, _) = compare(&[&a, &b, "--max-regression", "p99=60%,errors=5"]);
    assert_eq!(code, 0, "{out}");
    // The other way round, new is better: nothing is crossed.
    let (code, out, _) = compare(&[&b, &a, "--max-regression", "p99=0%,errors=0"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn runs_of_different_setups_are_flagged() {
    let d = tempfile::tempdir().unwrap();
    let base = real_result();
    let mut new = base.clone();
    set(&mut new, "/config/rate", json!(1000.0));
    set(&mut new, "/config/connections", json!(20));
    set(&mut new, "/config/duration_s", json!(30.0));
    let a = write(&d.path().join("a.json"), base);
    let b = write(&d.path().join("b.json"), &new);
    let (code, out, err) = compare(&[&a, &b]);
    assert_eq!(code, 0, "{err}");
    let warning = out
        .lines()
        .find(|l| l.starts_with("WARNING: not comparable: "))
        .unwrap_or_else(|| panic!("no warning: {out}"));
    assert_eq!(
        warning,
        "WARNING: not comparable: rate: 500 req/s vs 1000 req/s; connections: 10 vs 20; duration: 1s vs 30s"
    );
    // A lab run of another scenario is flagged too.
    let la = write(
        &d.path().join("la/nginx-reload/result.json"),
        &as_lab(base, "nginx-reload", "dynamic-endpoints", &[100.0]),
    );
    let lb = write(
        &d.path().join("lb/result.json"),
        &as_lab(base, "nginx-reload", "static-routes", &[100.0]),
    );
    let (code, out, _) = compare(&[&la, &lb]);
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "WARNING: not comparable: scenario: scenario dynamic-endpoints vs scenario static-routes"
        ),
        "{out}"
    );
}

#[test]
fn lab_runs_match_systems_by_name_and_write_a_page() {
    let d = tempfile::tempdir().unwrap();
    let base = real_result();
    let a = d.path().join("a");
    let b = d.path().join("b");
    write_system(&a, "nginx-reload", base, &[100.0, 120.0, 140.0]);
    write_system(&a, "caddy-api", base, &[50.0]);
    std::fs::create_dir_all(a.join("haproxy-runtime")).unwrap(); // never ran: skipped
    write_system(
        &b,
        "nginx-reload",
        &regressed(base, 0),
        &[400.0, 420.0, 440.0],
    );
    write_system(&b, "envoy", base, &[50.0]);
    let page = d.path().join("cmp.html");
    let (code, out, err) = compare_runs(&a, &b, "propagation=200ms", &page);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("\nnginx-reload\n"), "{out}");
    assert!(
        out.contains(&format!(
            "WARNING: missing: caddy-api is in {} but not in {}",
            a.display(),
            b.display()
        )),
        "{out}"
    );
    assert!(out.contains("WARNING: missing: envoy is in"), "{out}");
    let crossed: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("REGRESSION:"))
        .collect();
    assert_eq!(
        crossed,
        ["REGRESSION: nginx-reload: propagation.added median: base 120.00ms, new 420.00ms, limit +200.00ms (320.00ms) (--max-regression propagation=200ms)"]
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("prefers-color-scheme: dark"));
    assert!(html.contains("<h3>nginx-reload</h3>"));
    assert!(html.contains("propagation.added median"));
    assert!(html.contains("missing: caddy-api"));
    for external in ["http://", "https://", "<script", "<link", "url("] {
        assert!(!html.contains(external), "page refers to {external}");
    }
}

#[test]
fn several_new_runs_are_each_compared_with_the_base() {
    let d = tempfile::tempdir().unwrap();
    let base = real_result();
    let a = write(&d.path().join("a.json"), base);
    let b = write(&d.path().join("b.json"), base);
    let c = write(&d.path().join("c.json"), &regressed(base, 3));
    let (code, out, err) = compare(&[&a, &b, &c, "--max-regression", "errors=0"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(&format!("Comparing {a} (base) with {b} (new)")));
    assert!(out.contains(&format!("Comparing {a} (base) with {c} (new)")));
    let crossed: Vec<&str> = out.lines().filter(|l| l.contains("REGRESSION:")).collect();
    assert_eq!(crossed.len(), 1, "{out}");
    assert!(
        crossed[0].starts_with(&format!("{c}: REGRESSION: load: errors: ")),
        "{out}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let good = write(&d.path().join("good.json"), real_result());
    let empty = d.path().join("empty");
    std::fs::create_dir_all(empty.join("sub")).unwrap();
    let mut v2 = real_result().clone();
    v2["schema"] = json!("ingressbench/result/v2");
    let v2 = write(&d.path().join("v2.json"), &v2);
    let junk = d.path().join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    let missing = d.path().join("nope.json");
    let other = write(
        &d.path().join("other.json"),
        &as_lab(real_result(), "caddy-api", "dynamic-endpoints", &[]),
    );
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec![empty.to_str().unwrap(), &good],
            format!("{}: not a run: no result.json found", empty.display()),
        ),
        (
            vec![&good, &v2],
            format!("{v2}: schema \"ingressbench/result/v2\" is not supported"),
        ),
        (
            vec![&good, junk.to_str().unwrap()],
            format!("{}: not a result document: ", junk.display()),
        ),
        (
            vec![&good, missing.to_str().unwrap()],
            format!("{}: ", missing.display()),
        ),
        (
            vec![&good, &good, "--max-regression", "p99=10"],
            "--max-regression 'p99=10': a latency limit needs a unit".to_string(),
        ),
        (
            vec![&good, &good, "--max-regression", "p99=10%,p42=1ms"],
            "--max-regression 'p42=1ms': unknown metric 'p42'".to_string(),
        ),
        (
            vec![&good, &good, "--max-regression", "errors.oops=1"],
            "--max-regression 'errors.oops=1': unknown error kind 'oops'".to_string(),
        ),
        (
            vec![&good, &other],
            "have no system in common (load vs caddy-api)".to_string(),
        ),
        (vec![&good], "NEW".to_string()),
    ];
    for (args, want) in cases {
        let (code, out, err) = compare(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        let line = one_line_error(&err);
        assert!(line.contains(&want), "{args:?}: {line}");
        assert!(out.is_empty(), "{args:?}: printed {out}");
    }
}

/// A result of `runs` repetitions: each the real result with its p99 multiplied by
/// one factor (the higher percentiles at least as high), the top level the real one.
fn repeated(base: &Value, factors: &[f64]) -> Value {
    let mut top = base.clone();
    let reps: Vec<Value> = factors
        .iter()
        .map(|k| {
            let mut r = base.clone();
            let p99 = f_at(&r, "/latency_ms/corrected/p99") * k;
            set(&mut r, "/latency_ms/corrected/p99", json!(p99));
            for p in ["p99.9", "p99.99", "p99.999", "p99.9999", "max"] {
                let ptr = format!("/latency_ms/corrected/{p}");
                let v = f_at(&r, &ptr).max(p99);
                set(&mut r, &ptr, json!(v));
            }
            r
        })
        .collect();
    top["repetitions"] = json!(reps);
    top
}

/// Five repetitions of one server, and five more of the same: the p99 medians are
/// 1.01 and 1.03 times the real one, 2% apart, in ranges that overlap.
const SAME_A: [f64; 5] = [1.02, 0.98, 1.05, 0.99, 1.01];
const SAME_B: [f64; 5] = [1.00, 1.04, 0.97, 1.03, 1.06];

#[test]
fn repetitions_of_the_same_server_are_not_significant() {
    let d = tempfile::tempdir().unwrap();
    let base = real_result();
    let a = d.path().join("a");
    let b = d.path().join("b");
    write_system(&a, "nginx-reload", &repeated(base, &SAME_A), &[]);
    write_system(&b, "nginx-reload", &repeated(base, &SAME_B), &[]);
    let page = d.path().join("cmp.html");
    let (code, out, err) = compare_runs(&a, &b, "p99=1%", &page);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("medians of 5 (base) and 5 (new) repetitions, their range, and a rank test at alpha 0.05"),
        "{out}"
    );
    let p99 = f_at(base, "/latency_ms/corrected/p99");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("p99 "))
        .unwrap_or_else(|| panic!("no p99 row: {out}"));
    assert!(row.ends_with("not significant, p=0.69"), "{row}");
    assert!(row.contains(&fmt_ms(p99 * 1.01)), "{row}");
    let held: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("NOT SIGNIFICANT:"))
        .collect();
    assert_eq!(held.len(), 1, "{out}");
    assert!(
        held[0].starts_with(&format!(
            "NOT SIGNIFICANT: nginx-reload: p99 +2.0%: base {}, new {}, limit +1% (",
            fmt_ms(p99 * 1.01),
            fmt_ms(p99 * 1.03)
        )),
        "{}",
        held[0]
    );
    assert!(
        held[0].ends_with(
            "; medians of 5 vs 5 repetitions, not significant, p=0.69 (--max-regression p99=1%)"
        ),
        "{}",
        held[0]
    );
    assert!(!out.contains("REGRESSION"), "{out}");
    assert!(out.contains("every threshold holds (p99=1%)"), "{out}");
    assert!(!out.contains("no repetitions"), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Over the limit, not significant"));
    assert!(html.contains("not significant, p=0.69"));
}

#[test]
fn a_2x_slower_server_is_a_significant_regression() {
    let d = tempfile::tempdir().unwrap();
    let base = real_result();
    let slow: Vec<f64> = SAME_A.iter().map(|k| k * 2.0).collect();
    let a = write(&d.path().join("a.json"), &repeated(base, &SAME_A));
    let b = write(&d.path().join("b.json"), &repeated(base, &slow));
    let (code, out, err) = compare(&[&a, &b, "--max-regression", "p99=10%"]);
    assert_eq!(code, 1, "{out}{err}");
    let crossed: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("REGRESSION:"))
        .collect();
    assert_eq!(crossed.len(), 1, "{out}");
    assert!(
        crossed[0].starts_with("REGRESSION: load: p99 +100.0%: base "),
        "{}",
        crossed[0]
    );
    assert!(
        crossed[0].ends_with(
            "; medians of 5 vs 5 repetitions, significant, p=0.0079 (--max-regression p99=10%)"
        ),
        "{}",
        crossed[0]
    );
    assert!(out.contains("1 threshold(s) crossed"), "{out}");
    // At a level 5 a side cannot reach, the medians alone judge, and it says so.
    let (code, out, _) = compare(&[&a, &b, "--max-regression", "p99=10%", "--alpha", "0.005"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("too few to test (needs 6+ repetitions per side)"),
        "{out}"
    );
    // Repeated against not repeated: as before, and said once.
    let plain = write(&d.path().join("plain.json"), base);
    let (code, out, _) = compare(&[&a, &plain, "--max-regression", "p99=50%"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.matches(
            "no repetitions: deltas not tested for significance (use --repeat N, 4+ a side)"
        )
        .count(),
        1,
        "{out}"
    );
    assert!(!out.contains("significant"), "{out}");
}

#[test]
fn alpha_outside_0_1_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let good = write(&d.path().join("good.json"), real_result());
    for bad in ["0", "1", "1.5", "-0.1", "nan", "abc"] {
        let (code, out, err) = compare(&[&good, &good, "--alpha", bad]);
        assert_eq!(code, 2, "{bad}: {out}{err}");
        let line = one_line_error(&err);
        assert!(line.contains("--alpha"), "{bad}: {line}");
        if bad != "abc" {
            assert!(line.contains("between 0 and 1"), "{bad}: {line}");
        }
        assert!(out.is_empty(), "{bad}: {out}");
    }
    let (code, out, err) = compare(&[&good, &good, "--alpha", "0.01"]);
    assert_eq!(code, 0, "{out}{err}");
}
