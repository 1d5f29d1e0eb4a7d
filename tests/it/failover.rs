//! Backend failover (issue 16 §3) end to end: a backend flapping with a known period
//! fails at that period, as a client sees it and as the backend's own log says; each
//! failing mode (reset, 503, stall) fails the way it is documented; and a scenario
//! through real nginx measures its default (no passive health check) against its
//! tuned variant.

use crate::common::backend::Backend;
use crate::common::json::f;
use crate::common::load::run_load_alone;
use crate::common::scenario_run::start;
use crate::common::{exclusive, processes_with, read_json};
use rustix::process::Signal;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Starts a flapping backend logging to `dir/flap.json`.
fn flapping(dir: &Path, schedule: &str, mode: &str) -> Backend {
    let log = dir.join("flap.json");
    Backend::start(
        "f1",
        &[
            "--workers",
            "1",
            "--flap",
            schedule,
            "--flap-mode",
            mode,
            "--flap-log",
            log.to_str().unwrap(),
        ],
    )
}

/// Unix time of the flap schedule's anchor, from the log the backend wrote before
/// it was ready.
fn anchor_ns(dir: &Path) -> u128 {
    let log = read_json(&dir.join("flap.json"));
    assert_eq!(log["schema"], "ingressbench/flap/v1", "{log}");
    u128::from(log["anchor_unix_ns"].as_u64().unwrap())
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Sleeps until `ms` after the anchor.
fn at(anchor: u128, ms: u64) {
    let t = anchor + u128::from(ms) * 1_000_000;
    let now = now_ns();
    assert!(now <= t, "too late for {ms} ms after the anchor");
    std::thread::sleep(Duration::from_nanos((t - now) as u64));
}

/// Sends one GET of `path` on `conn` and reads its answer: the status and the
/// `x-backend` header, or the I/O error's kind.
fn get(conn: &mut TcpStream, path: &str) -> Result<(u16, String), std::io::ErrorKind> {
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(conn, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").map_err(|e| e.kind())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).map_err(|e| e.kind())?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof);
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        let Some(head_end) = text.find("\r\n\r\n") else {
            continue;
        };
        let head = &text[..head_end];
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if buf.len() < head_end + 4 + len {
            continue;
        }
        let status = head[9..12].parse().unwrap();
        let backend = head
            .lines()
            .find_map(|l| l.strip_prefix("x-backend: "))
            .unwrap_or("")
            .to_string();
        return Ok((status, backend));
    }
}

/// Healthy 1 s, failing 1 s, reset: under direct load (every request sampled), the
/// failed requests fall in windows 1 s long that start every 2 s, the successful
/// ones outside them; the backend's log lists the same phases, every request of a
/// failing phase reset and none of a healthy one.
#[test]
fn a_backend_flapping_with_a_known_period_fails_at_that_period() {
    let dir = tempfile::tempdir().unwrap();
    let b = flapping(dir.path(), "1s/1s", "reset");
    let out = run_load_alone(
        &[
            "-c10",
            "-R200",
            "-d7s",
            "--sample",
            "1",
            "--timeout",
            "2s",
            &b.url(),
        ],
        Duration::from_secs(30),
    );
    let r = out.result();
    let s = &r["samples"];
    let t: Vec<f64> = s["t_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let err: Vec<bool> = s["error"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() > 0)
        .collect();
    assert!(
        t.len() > 1000,
        "sampled {} requests\n{}",
        t.len(),
        out.context()
    );
    // Failure windows: runs of failed requests, split where 300 ms pass without one.
    let mut windows: Vec<(f64, f64)> = Vec::new();
    for (&ti, _) in t.iter().zip(&err).filter(|(_, &e)| e) {
        match windows.last_mut() {
            Some(w) if ti - w.1 < 300.0 => w.1 = ti,
            _ => windows.push((ti, ti)),
        }
    }
    // The first and last may be cut by the window's edges.
    let whole: Vec<(f64, f64)> = windows
        .iter()
        .copied()
        .filter(|w| w.0 > 50.0 && w.1 < 6950.0)
        .collect();
    assert!(
        whole.len() >= 2,
        "failure windows {windows:?}\n{}",
        out.context()
    );
    for w in &whole {
        let len = w.1 - w.0;
        assert!(
            (900.0..=1050.0).contains(&len),
            "a failure window lasted {len:.0} ms, not ~1 s: {windows:?}"
        );
    }
    for pair in windows.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        if pair[0].0 > 50.0 {
            assert!(
                (1900.0..=2100.0).contains(&gap),
                "failure windows start {gap:.0} ms apart, not every 2 s: {windows:?}"
            );
        }
    }
    // Nothing succeeded inside a failure window (10 ms inside its edges: a request
    // is timed from when it was due, its arrival a little later).
    for (&ti, &e) in t.iter().zip(&err) {
        if !e {
            assert!(
                !windows.iter().any(|w| ti > w.0 + 10.0 && ti < w.1 - 10.0),
                "a success at {ti} ms inside a failure window: {windows:?}"
            );
        }
    }
    // The backend's own record, read after it wrote its last counts.
    let mut proc = b.proc;
    proc.signal(Signal::TERM);
    assert!(proc.wait_timeout(Duration::from_secs(5)).is_some());
    let log = read_json(&dir.path().join("flap.json"));
    let phases = log["phases"].as_array().unwrap();
    assert!(phases.len() >= 8, "{log}");
    let mut reset = 0;
    for (k, p) in phases.iter().enumerate() {
        assert_eq!(p["index"].as_u64(), Some(k as u64));
        let failing = p["failing"].as_bool().unwrap();
        assert_eq!(failing, k % 2 == 1, "phase {k}: {p}");
        let received = p["received"].as_u64().unwrap();
        let answered = &p["answered"];
        if failing {
            assert_eq!(answered["reset"].as_u64().unwrap_or(0), received, "{p}");
            reset += received;
        } else {
            assert_eq!(answered["ok"].as_u64().unwrap_or(0), received, "{p}");
            assert!(answered.get("reset").is_none(), "{p}");
        }
    }
    // Every error the client saw was a reset the backend made.
    let errors = r["requests"]["failed"].as_u64().unwrap();
    assert!(
        errors > 0 && reset >= errors,
        "backend reset {reset}, client saw {errors} errors"
    );
    let buckets: u64 = log["arrivals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let received: u64 = phases.iter().map(|p| p["received"].as_u64().unwrap()).sum();
    assert_eq!(buckets, received, "buckets and phases disagree");
}

/// Each failing mode, on a schedule read from the backend's log: reset on a
/// kept-alive and on a new connection, 503 with `x-backend` (for `/healthz` too),
/// and an answer held until the failing phase ends; healthy again after it.
#[test]
fn each_failing_mode_fails_as_documented() {
    let _lock = exclusive();
    // reset
    let dir = tempfile::tempdir().unwrap();
    let b = flapping(dir.path(), "1s/1s", "reset");
    let anchor = anchor_ns(dir.path());
    let mut kept = TcpStream::connect(b.addr).unwrap();
    assert_eq!(get(&mut kept, "/a"), Ok((200, "f1".into())));
    at(anchor, 1300);
    let e = get(&mut kept, "/a").unwrap_err();
    assert_eq!(e, std::io::ErrorKind::ConnectionReset, "kept-alive: {e:?}");
    let mut new = TcpStream::connect(b.addr).unwrap();
    let e = get(&mut new, "/b").unwrap_err();
    assert_eq!(e, std::io::ErrorKind::ConnectionReset, "new: {e:?}");
    at(anchor, 2200);
    let mut again = TcpStream::connect(b.addr).unwrap();
    assert_eq!(get(&mut again, "/c"), Ok((200, "f1".into())));
    drop(b);

    // 503
    let dir = tempfile::tempdir().unwrap();
    let b = flapping(dir.path(), "1s/1s", "503");
    let anchor = anchor_ns(dir.path());
    let mut c = TcpStream::connect(b.addr).unwrap();
    assert_eq!(get(&mut c, "/healthz"), Ok((200, "f1".into())));
    at(anchor, 1300);
    assert_eq!(get(&mut c, "/x"), Ok((503, "f1".into())));
    assert_eq!(get(&mut c, "/healthz"), Ok((503, "f1".into())));
    at(anchor, 2200);
    assert_eq!(get(&mut c, "/x"), Ok((200, "f1".into())));
    drop(b);

    // stall: asked 300 ms into the failing phase, answered when it ends.
    let dir = tempfile::tempdir().unwrap();
    let b = flapping(dir.path(), "1s/1s", "stall");
    let anchor = anchor_ns(dir.path());
    let mut c = TcpStream::connect(b.addr).unwrap();
    at(anchor, 1300);
    assert_eq!(get(&mut c, "/s"), Ok((200, "f1".into())));
    let answered_ms = (now_ns() - anchor) / 1_000_000;
    assert!(
        (1990..2300).contains(&answered_ms),
        "a stalled answer came {answered_ms} ms after the anchor, not when the phase ended (2000 ms)"
    );
}

/// A run of `nginx-reload` and `nginx-reload+passive` against 3 steady backends
/// and a flapping one, with a scale down and up in between (which never touches the
/// flapping one).
fn scenario(dir: &Path) -> std::path::PathBuf {
    let text = "\
name: failover-it
systems: [nginx-reload]
backends:
  replicas: 3
  drain_timeout: 1s
  flapping: {count: 1, healthy: 2s, failing: 2s, mode: reset}
passive_health:
  max_fails: 1
  fail_timeout: 1s
tls:
  enabled: false
load:
  rate: 400
  connections: 20
  duration: 11s
changes:
  - wait: 3s
  - scale: 2
  - wait: 3s
  - scale: 3
";
    let p = dir.join("failover.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Through real nginx: the default profile (`max_fails=0`) keeps sending to the
/// flapping backend while it fails (retrying the resets on the others); the tuned
/// variant (`max_fails=1 fail_timeout=1s`) stops, so the backend receives far fewer
/// requests per second while failing than while healthy. Both results carry the
/// failover section, the summary its table, and nothing is left running.
#[test]
fn nginx_default_and_passive_variant_against_a_flapping_backend() {
    let _lock = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let scn = scenario(dir.path());
    let out = dir.path().join("out");
    let run = start(&scn, &out).finish(Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);

    let section = |system: &str| -> Value {
        let r = read_json(&out.join(system).join("result.json"));
        let b = r["lab"]["failover"]["backends"][0].clone();
        assert_eq!(b["id"], "f1", "{system}: {}", r["lab"]["failover"]);
        assert!(b.get("error").is_none(), "{system}: {b}");
        // The phases cover the window, alternating, 2 s each inside it.
        let phases = b["phases"].as_array().unwrap();
        assert!(phases.len() >= 5, "{system}: {b}");
        for w in phases.windows(2) {
            assert_ne!(w[0]["failing"], w[1]["failing"]);
            assert!((f(&w[0]["until_ms"]) - f(&w[1]["from_ms"])).abs() < 1e-6);
        }
        assert!(out.join(system).join("flap-f1.json").exists());
        // Scaling moved the steady backends only: b3 went, b4 came, f1 stayed.
        let events = r["lab"]["events"].as_array().unwrap();
        let detail = |kind: &str| -> Vec<String> {
            events
                .iter()
                .filter(|e| e["kind"] == kind)
                .map(|e| e["detail"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(detail("backend_stopping"), ["b3 (graceful)"], "{system}");
        assert_eq!(detail("backend_ready"), ["b4"], "{system}");
        let applied = detail("endpoints_applied");
        assert!(
            applied.len() == 2 && applied.iter().all(|d| d.split(',').any(|id| id == "f1")),
            "{system}: {applied:?}"
        );
        // The per-second arrivals add up to the phases'.
        let per_s: u64 = b["received_per_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let in_phases: u64 = phases.iter().map(|p| p["received"].as_u64().unwrap()).sum();
        assert_eq!(per_s, in_phases, "{system}: {b}");
        b
    };
    let default = section("nginx-reload");
    let tuned = section("nginx-reload+passive");
    let rates = |b: &Value| {
        (
            f(&b["healthy"]["received_per_s"]),
            f(&b["failing"]["received_per_s"]),
        )
    };
    let (dh, df) = rates(&default);
    let (th, tf) = rates(&tuned);
    // A quarter of 400 req/s goes to each of the 4 backends while all are healthy.
    assert!(dh > 50.0 && th > 40.0, "healthy: default {dh}, tuned {th}");
    assert!(
        df > 0.5 * dh,
        "nginx with max_fails=0 kept sending while it failed: failing {df}/s, healthy {dh}/s"
    );
    assert!(
        tf < 0.25 * th,
        "nginx with max_fails=1 stopped sending while it failed: failing {tf}/s, healthy {th}/s"
    );
    assert!(tuned["stop_ms"]["n"].as_u64().unwrap() >= 1, "{tuned}");
    assert_eq!(tuned["never_stopped"], 0, "{tuned}");
    assert!(default["never_stopped"].as_u64().unwrap() >= 1, "{default}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("Backend failover") && summary.contains("nginx-reload+passive"),
        "{summary}"
    );

    // Nothing left: no process naming the run's folders, no scratch folder.
    let tmp = dir.path().join("tmp");
    let t = std::time::Instant::now();
    loop {
        let procs = processes_with(&dir.path().display().to_string());
        let scratch: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
        if procs.is_empty() && scratch.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "left behind: {procs:?}, {:?}",
            scratch.iter().map(|e| e.file_name()).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
