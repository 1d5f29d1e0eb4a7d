//! Load plans (`-R 1000:30s,2000:30s`, `-R 100..5000:60s`, `load.rate: [...]`): the
//! real binary against the built-in backend and a real proxy, judged by the result it
//! writes. The plan's expected counts are computed here from the flag's text, not by
//! the engine's own code, so a wrong schedule cannot agree with itself.
//!
//! Every run is bounded in time and sends only to 127.0.0.1.

use crate::common::backend::Backend;
use crate::common::json::{f, u};
use crate::common::load::{run_not_overloaded, Load};
use crate::common::{exclusive, kill, read_json, runs, servers, shared, tls};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Time allowed beyond a plan's length before the run is killed and the test fails.
const SLACK: Duration = Duration::from_secs(15);

/// A plan as the tests read it: `(from, to, secs)` per item of `-R`'s text.
fn segments(plan: &str) -> Vec<(f64, f64, f64)> {
    plan.split(',')
        .map(|item| {
            let (rates, secs) = item.rsplit_once(':').expect("RATE:DURATION");
            let secs: f64 = secs.strip_suffix('s').expect("seconds").parse().unwrap();
            let (from, to) = match rates.split_once("..") {
                Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                None => (rates.parse().unwrap(), rates.parse().unwrap()),
            };
            (from, to, secs)
        })
        .collect()
}

/// Requests the plan offers in its first `t` seconds: the integral of its rate.
fn offered_until(plan: &[(f64, f64, f64)], t: f64) -> f64 {
    let mut start = 0.0;
    let mut n = 0.0;
    for &(from, to, secs) in plan {
        let x = (t - start).clamp(0.0, secs);
        n += from * x + (to - from) / secs * x * x / 2.0;
        start += secs;
    }
    n
}

/// The plan's length, seconds.
fn length(plan: &[(f64, f64, f64)]) -> f64 {
    plan.iter().map(|s| s.2).sum()
}

/// The steps results are reported by, as docs/load.md states them: a held rate is
/// one step, a ramp is cut into 5 s pieces. `(start, secs)`.
fn report_steps(plan: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut start = 0.0;
    for &(from, to, secs) in plan {
        if from == to {
            out.push((start, secs));
        } else {
            let mut a = 0.0;
            while a < secs {
                let b = (a + 5.0).min(secs);
                out.push((start + a, b - a));
                a = b;
            }
        }
        start += secs;
    }
    out
}

/// The per-step results add up to the run's: by intended time every request of the
/// measured window is in exactly one step, and so is every response's latency.
/// `ctx` is printed on failure.
fn assert_steps_add_up(r: &Value, ctx: &str) {
    let steps = r["steps"].as_array().expect("steps");
    assert!(!steps.is_empty(), "a plan's run has steps\n{ctx}");
    for k in ["intended", "sent", "completed", "failed"] {
        let sum: u64 = steps.iter().map(|s| u(&s[k])).sum();
        assert_eq!(
            sum,
            u(&r["requests"][k]),
            "steps' {k} add up to requests.{k}\n{ctx}"
        );
    }
    let latencies: u64 = steps.iter().map(|s| u(&s["latency_ms"]["count"])).sum();
    assert_eq!(
        latencies,
        u(&r["latency_ms"]["corrected"]["count"]),
        "steps' latency counts add up to the run's corrected latency count\n{ctx}"
    );
    let errors: u64 = steps
        .iter()
        .flat_map(|s| s["errors_by_kind"].as_object().unwrap().values())
        .map(u)
        .sum();
    let failed: u64 = steps.iter().map(|s| u(&s["failed"])).sum();
    assert_eq!(
        errors, failed,
        "steps' errors by kind are their failures\n{ctx}"
    );
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(u(&s["index"]), i as u64, "{ctx}");
    }
}

/// Each step offered what the plan says: its intended requests are the plan's
/// integral over the step (within the one request an integral's rounding can move
/// across a boundary), and `offered` is that per second.
fn assert_steps_follow(r: &Value, plan: &str, ctx: &str) {
    let segs = segments(plan);
    let want = report_steps(&segs);
    let steps = r["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), want.len(), "report steps of {plan}\n{ctx}");
    for (s, &(start, secs)) in steps.iter().zip(&want) {
        assert!((f(&s["start_s"]) - start).abs() < 1e-6, "{s}\n{ctx}");
        assert!((f(&s["duration_s"]) - secs).abs() < 1e-6, "{s}\n{ctx}");
        let due = offered_until(&segs, start + secs) - offered_until(&segs, start);
        let intended = u(&s["intended"]) as f64;
        assert!(
            (intended - due).abs() <= 1.0,
            "step {}: {intended} intended, the plan offers {due}\n{ctx}",
            s["plan"]
        );
        assert!(
            (f(&s["offered"]) - due / secs).abs() <= 1.0 / secs,
            "step {}: offered {} req/s, the plan {} req/s\n{ctx}",
            s["plan"],
            s["offered"],
            due / secs
        );
    }
}

/// The check: a plan's requests follow it, each second within 1 %. Steps, a
/// ramp longer than a report step and a warm-up (at the first rate, not counted).
#[test]
fn a_plans_requests_follow_it_each_second_within_one_percent() {
    let plan = "300:2s,900:2s,300..1500:6s";
    let segs = segments(plan);
    let b = Backend::start("b-plan", &[]);
    let url = b.url();
    let args = ["-t2", "-c20", "--warmup", "1s", "-R", plan, &url];
    let out = run_not_overloaded(&args, Duration::from_secs(11) + SLACK, || {});
    let r = out.ok();
    let ctx = out.context();
    out.assert_no_errors();
    // The timeline counts by actual send time: it shows the plan only if the generator
    // sent on time, which it says.
    assert!(
        !out.overloaded(),
        "generator late (overloaded or woke late)\n{ctx}"
    );
    assert_eq!(r["config"]["plan"], plan, "{ctx}");
    assert!((f(&r["duration_s"]) - 10.0).abs() < 0.2, "{ctx}");
    // The whole plan, and nothing of the warm-up, is in the measured window.
    let total = offered_until(&segs, length(&segs));
    assert_eq!(u(&r["requests"]["intended"]) as f64, total, "{ctx}");
    assert_eq!(u(&r["requests"]["sent"]) as f64, total, "{ctx}");
    assert!(
        (f(&r["config"]["rate"]) - total / 10.0).abs() < 1e-9,
        "{ctx}"
    );
    let timeline = r["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 10, "{ctx}");
    for e in timeline {
        let t = u(&e["t"]) as f64;
        let want = offered_until(&segs, t + 1.0) - offered_until(&segs, t);
        let sent = u(&e["sent"]) as f64;
        assert!(
            (sent - want).abs() <= (want * 0.01).max(1.0),
            "second {t}: {sent} sent, the plan offers {want}\n{ctx}"
        );
    }
    assert_steps_follow(r, plan, &ctx);
    assert_steps_add_up(r, &ctx);
    // The ramp is reported in a 5 s piece and the 1 s left.
    let names: Vec<&str> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["plan"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "300:2s",
            "900:2s",
            "300..1500:6s [1/2]",
            "300..1500:6s [2/2]"
        ],
        "{ctx}"
    );
    // The summary's step table: a line per step, in order.
    let table: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.contains("by step:"))
        .skip(2)
        .take(names.len())
        .collect();
    assert_eq!(table.len(), names.len(), "step table\n{ctx}");
    for (line, name) in table.iter().zip(&names) {
        assert!(line.trim_start().starts_with(name), "{line:?}\n{ctx}");
    }
}

/// The client ports of established TCP connections to `port` on 127.0.0.1 right now,
/// as the kernel lists them (`/proc/net/tcp`, the server's side of each).
fn peers_of(port: u16) -> BTreeSet<u16> {
    let text = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let hex = |a: &str| u16::from_str_radix(a.rsplit_once(':').unwrap().1, 16).unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // State 01: established.
            (f.len() > 3 && f[3] == "01" && hex(f[1]) == port).then(|| hex(f[2]))
        })
        .collect()
}

/// Stepping the rate keeps the connections: over TLS, 8 connections are opened once
/// (before the schedule starts, so that no step pays for a handshake), and the
/// backend's side sees those 8 and no other for the whole run.
#[test]
fn connections_are_opened_once_across_steps() {
    let cert = tls::self_signed();
    let b = Backend::start(
        "b-plan-tls",
        &[
            "--tls-cert",
            cert.cert.to_str().unwrap(),
            "--tls-key",
            cert.key.to_str().unwrap(),
        ],
    );
    let url = format!("https://{}/", b.addr);
    let port = b.addr.port();
    let lock = shared();
    assert!(peers_of(port).is_empty(), "a connection before the run");
    // Every connection the backend sees during the run, sampled every 10 ms: a
    // connection opened again at a step would stay in the list with a new port.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut seen = BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                seen.extend(peers_of(port));
                thread::sleep(Duration::from_millis(10));
            }
            seen
        })
    };
    let out = Load::spawn_exclusive(
        &[
            "-t1",
            "-c8",
            "--cacert",
            cert.cert.to_str().unwrap(),
            "-R",
            "100:1s,400:1s,200:1s",
            &url,
        ],
        lock,
    )
    .finish(Duration::from_secs(3) + SLACK);
    stop.store(true, Ordering::Relaxed);
    let seen = sampler.join().unwrap();
    let r = out.ok();
    let ctx = out.context();
    out.assert_no_errors();
    assert_eq!(r["tls"]["version"], "TLSv1.3", "{ctx}");
    // `tls.handshakes` counts handshakes in the measured window: the connections were
    // made before it, and none was made again.
    assert_eq!(u(&r["tls"]["handshakes"]), 0, "{ctx}");
    assert_eq!(
        seen.len(),
        8,
        "client ports seen by the backend: {seen:?}\n{ctx}"
    );
    assert_eq!(u(&r["requests"]["completed"]), 700, "{ctx}");
    assert_steps_follow(r, "100:1s,400:1s,200:1s", &ctx);
    assert_steps_add_up(r, &ctx);
}

/// An interrupted plan reports the steps it reached, the last one cut at the
/// interrupt, and the window is judged by what the plan called for in it: the mean of
/// the whole plan (918 req/s here) is not a rate the first 3 s were ever meant to send.
#[test]
fn an_interrupted_plan_is_judged_by_the_steps_it_reached() {
    let b = Backend::start("b-plan-int", &[]);
    let url = b.url();
    let load = Load::spawn_exclusive(&["-t1", "-c4", "-R", "100:2s,1000:20s", &url], exclusive());
    thread::sleep(Duration::from_millis(3500));
    assert!(kill("-INT", load.pid()), "kill -INT failed");
    let out = load.finish(Duration::from_secs(5));
    assert_eq!(out.code, Some(130), "{}", out.context());
    let r = out.result();
    let ctx = out.context();
    assert_eq!(r["partial"], Value::Bool(true), "{ctx}");
    let d = f(&r["duration_s"]);
    assert!((2.5..4.5).contains(&d), "{ctx}");
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{ctx}");
    assert_eq!(f(&steps[0]["duration_s"]), 2.0, "{ctx}");
    assert_eq!(u(&steps[0]["intended"]), 200, "{ctx}");
    assert!(
        (f(&steps[1]["duration_s"]) - (d - 2.0)).abs() < 1e-6,
        "{ctx}"
    );
    assert_steps_add_up(r, &ctx);
    assert!(
        (f(&r["rate"]["target"]) - 20200.0 / 22.0).abs() < 1e-6,
        "{ctx}"
    );
    assert_eq!(r["rate"]["reached"], Value::Bool(true), "{ctx}");
    assert!(
        !out.stdout.contains("the target rate was not reached"),
        "{ctx}"
    );
}

/// Every refused plan is one line naming the flag and what to do, exit 2, before
/// anything is sent or written.
#[test]
fn bad_plans_are_one_line_and_exit_2() {
    let closed = format!("http://{}/", servers::refused());
    for (args, says) in [
        (
            vec!["-R", "1000:3x"],
            "-R/--rate: the plan '1000:3x': '3x' is not a duration: use a number with s, ms, us, m or h (e.g. 30s, 500ms, 3m)",
        ),
        (
            vec!["-R", "abc"],
            "-R/--rate 'abc' is not a rate: give requests per second (-R 1000) or a plan (-R 1000:30s,2000:30s or -R 100..5000:60s)",
        ),
        (
            vec!["-R", "1000:0s"],
            "-R/--rate: the plan '1000:0s' lasts 0s: give each step a duration above 0",
        ),
        (
            vec!["-R", "1000:30s", "-d", "10s"],
            "-d/--duration 10s with a plan: the plan lasts 30s and sets the measured window; drop -d",
        ),
        (
            vec!["-R", "0:5s"],
            "-R/--rate: the plan offers no request: give a rate above 0 in some step",
        ),
        (
            vec!["-R", "1000:30s,abc:10s"],
            "-R/--rate: the plan 'abc:10s' has a rate that is not a number of requests per second",
        ),
        (
            vec!["-R", "100:2s,"],
            "-R/--rate: the plan '' is not a step: write RATE:DURATION (1000:30s) or FROM..TO:DURATION (100..5000:60s)",
        ),
        (
            vec!["--generators", "2", "-R", "100:2s,200:2s"],
            "--generators 2 with a load plan: a plan runs on one generator for now; give a constant rate, or drop --generators",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let mut argv = vec!["load", "-c2"];
        argv.extend(&args);
        argv.extend([closed.as_str(), "--json", json.to_str().unwrap()]);
        let o = crate::common::run(&argv, Duration::from_secs(10));
        let ctx = format!("{args:?}\nstdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
        assert_eq!(o.code, Some(2), "{ctx}");
        let lines: Vec<&str> = o.stderr.lines().collect();
        assert_eq!(lines, [format!("ingressbench: {says}")], "{ctx}");
        assert!(o.stdout.is_empty(), "{ctx}");
        assert!(!json.exists(), "wrote a result\n{ctx}");
    }
}

/// A scenario's `load.rate` as a list runs as a plan in the lab, `--quick` shrinking
/// its durations and keeping its rates; the system's result has the steps, adding up.
#[test]
fn a_scenario_runs_its_plan_through_a_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("plan.yaml");
    std::fs::write(
        &scn,
        "name: plan\nsystems: [caddy-api]\nbackends:\n  replicas: 2\n\
         load:\n  rate: [200:4s, \"400..800:4s\"]\n  connections: 5\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    {
        let _turn = shared();
        runs::lab_run(&scn, "caddy-api", &out, Duration::from_secs(120));
    }
    let r = read_json(&out.join("caddy-api").join("result.json"));
    let ctx = serde_json::to_string_pretty(&serde_json::json!({
        "config": r["config"], "requests": r["requests"], "steps": r["steps"],
    }))
    .unwrap();
    // --quick: a quarter of each duration, the same rates.
    let plan = "200:1s,400..800:1s";
    assert_eq!(r["config"]["plan"], plan, "{ctx}");
    assert_eq!(f(&r["duration_s"]), 2.0, "{ctx}");
    assert_eq!(u(&r["requests"]["intended"]), 800, "{ctx}");
    assert_steps_follow(&r, plan, &ctx);
    assert_steps_add_up(&r, &ctx);
}

/// The report of a plan's run draws latency against the offered rate.
#[test]
fn the_report_draws_latency_against_the_offered_rate() {
    let b = Backend::start("b-plan-report", &[]);
    let url = b.url();
    let out = Load::spawn(&[
        "-t1",
        "-c4",
        "-R",
        "100:1s,200..400:2s",
        "--report",
        "{dir}/report.html",
        &url,
    ])
    .finish(Duration::from_secs(3) + SLACK);
    out.ok();
    let page = std::fs::read_to_string(out.file("report.html")).expect("report.html");
    for has in [
        "id=\"chart-plan\"",
        "id=\"fig-plan\"",
        "requests per second offered",
    ] {
        assert!(
            page.contains(has),
            "no {has} in the page\n{}",
            out.context()
        );
    }
    // A constant rate has no plan to draw.
    let out = Load::spawn(&[
        "-t1",
        "-c4",
        "-R",
        "100",
        "-d",
        "1s",
        "--report",
        "{dir}/report.html",
        &url,
    ])
    .finish(Duration::from_secs(1) + SLACK);
    out.ok();
    let page = std::fs::read_to_string(out.file("report.html")).expect("report.html");
    assert!(
        page.contains("id=\"chart-throughput\""),
        "{}",
        out.context()
    );
    assert!(!page.contains("chart-plan"), "{}", out.context());
}
