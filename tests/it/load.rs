//! Acceptance tests of `ingressbench load` (issue 2, sections 2 and 4): the real binary
//! against the built-in backend, a real nginx, and servers made to fail in one way each,
//! judged by the JSON result it writes (`ingressbench/result/v1`).
//!
//! Every run checks the result's shape and its request balance (`common::load::check_result`).
//! Timing assertions are generous bounds only; load runs are serialised so that two of
//! them never share the machine's cores.

use crate::common::backend::Backend;
use crate::common::load::{
    decode_histogram, may_retry_overloaded, run_load, run_load_alone, run_not_overloaded, Load,
    LoadOutput,
};
use crate::common::nginx::{self, Nginx};
use crate::common::proc::Proc;
use crate::common::{cpu, exclusive, kill, servers, shared, tls};
use serde_json::Value;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Time allowed beyond a run's `-d` before it is killed and the test fails.
const SLACK: Duration = Duration::from_secs(15);

fn limit(duration_s: u64) -> Duration {
    Duration::from_secs(duration_s) + SLACK
}

fn assert_rate_within_1pct(out: &LoadOutput, target: f64) {
    let achieved = out.f("/rate/achieved");
    assert!(
        (achieved - target).abs() <= target * 0.01,
        "achieved {achieved} req/s is not within 1 % of {target}\n{}",
        out.context()
    );
    assert!(
        !out.overloaded(),
        "generator late (overloaded or woke late) at {target} req/s\n{}",
        out.context()
    );
}

/// The run kept its schedule: the requests it planned are those of `rate` over the
/// duration, and nearly all of them completed.
fn assert_schedule_kept(out: &LoadOutput, rate: f64, duration_s: f64) {
    let intended = out.u("/requests/intended") as f64;
    let planned = rate * duration_s;
    assert!(
        (intended - planned).abs() <= planned * 0.01,
        "intended {intended}, {rate} req/s for {duration_s} s is {planned}\n{}",
        out.context()
    );
    let completed = out.u("/requests/completed") as f64;
    assert!(
        completed >= intended * 0.99,
        "only {completed} of {intended} intended requests completed\n{}",
        out.context()
    );
    let d = out.f("/duration_s");
    assert!(
        (d - duration_s).abs() <= 0.2,
        "duration_s {d} for -d {duration_s}s\n{}",
        out.context()
    );
}

/// Number of values in the result's `histogram` (HdrHistogram V2, base64).
fn histogram_len(out: &LoadOutput) -> u64 {
    let b64 = out.result()["histogram"].as_str().unwrap();
    decode_histogram(b64)
        .unwrap_or_else(|e| panic!("histogram field: {e}\n{}", out.context()))
        .len()
}

// ---------------------------------------------------------------------------------
// The test support itself, checked with plain std clients (no engine involved), so a
// failing load test points at the engine and not at its fixtures.

#[test]
fn support_error_servers_behave() {
    use std::io::{ErrorKind, Read, Write};
    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let t = Duration::from_millis(200);

    let e = TcpStream::connect_timeout(&servers::refused(), t).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "refused: {e}");

    let full = servers::accept_queue_full();
    let e = TcpStream::connect_timeout(&full.addr, t).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock),
        "accept queue full: {e}"
    );

    let read_all = |s: &mut TcpStream| {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut v = Vec::new();
        let r = s.read_to_end(&mut v);
        (r, String::from_utf8_lossy(&v).into_owned())
    };

    let plain = servers::plain_http_for_tls();
    let mut s = TcpStream::connect(plain.addr).unwrap();
    s.write_all(b"\x16\x03\x01\x00\x05hello").unwrap();
    let (_, text) = read_all(&mut s);
    assert!(text.starts_with("HTTP/1.1 400"), "plain: {text:?}");

    let eof = servers::close_after_request();
    let mut s = TcpStream::connect(eof.addr).unwrap();
    s.write_all(GET).unwrap();
    let (r, text) = read_all(&mut s);
    assert!(
        r.is_ok() && text.is_empty(),
        "close after request: {r:?} {text:?}"
    );

    let garbage = servers::garbage_answer();
    let mut s = TcpStream::connect(garbage.addr).unwrap();
    s.write_all(GET).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"XYZ\r\n\r\n");

    let reset = servers::reset_while_receiving();
    let mut s = TcpStream::connect(reset.addr).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        4 << 20
    );
    s.write_all(head.as_bytes()).unwrap();
    let started = Instant::now();
    let e = s.write_all(&vec![b'a'; 4 << 20]).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
        "reset while receiving: {e}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "reset came before any wait"
    );

    let silent = servers::never_answers();
    let mut s = TcpStream::connect(silent.addr).unwrap();
    s.write_all(GET).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let e = s.read(&mut buf).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "never answers: {e}"
    );

    // Two requests in one write, to check that the 503 server answers each on the same
    // keep-alive connection.
    let s503 = servers::always_503();
    let mut s = TcpStream::connect(s503.addr).unwrap();
    s.write_all(&[GET, GET].concat()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let want = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n".repeat(2);
    let mut got = Vec::new();
    while got.len() < want.len() {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "503 server closed");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8_lossy(&got), want);
}

#[test]
fn support_cpu_meter_tells_ours_from_others() {
    use std::process::Command;
    // It measures the CPU: not beside a load, a proxy or Chromium (which, started by
    // this binary, would count as ours).
    let _alone = exclusive();
    // Busy loops of shell builtins only (no child processes), bounded in case a kill is
    // missed (20 M iterations: about 25 s here), and killed after the measured second.
    const SPIN: &str = "i=0; while [ $i -lt 20000000 ]; do i=$((i+1)); done";
    // One is our child; the other is started in the background by a shell that exits,
    // so it is re-parented away from us and its CPU is someone else's.
    let logs = tempfile::tempdir().unwrap();
    let _ours = Proc::spawn(
        "busy child",
        Command::new("sh").args(["-c", SPIN]),
        logs.path(),
    );
    let out = Command::new("sh")
        .args(["-c", &format!("sh -c '{SPIN}' >/dev/null 2>&1 & echo $!")])
        .output()
        .unwrap();
    struct KillPid(i32);
    impl Drop for KillPid {
        fn drop(&mut self) {
            if let Some(pid) = rustix::process::Pid::from_raw(self.0) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
    let _foreign = KillPid(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap());
    let a = cpu::sample().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let b = cpu::sample().unwrap();
    let (mine, others) = (b.ours_cores_since(&a), b.others_cores_since(&a));
    // Each loop wants a whole core; on a busy machine they get less, but never none.
    assert!(
        mine >= 0.3,
        "our busy child counted {mine:.2} cores as ours"
    );
    assert!(
        others >= 0.3,
        "the foreign busy process counted {others:.2} cores as others'"
    );
}

#[test]
fn support_nginx_serves() {
    use std::io::{Read, Write};
    let mut nginx = Nginx::start();

    let mut s = TcpStream::connect(nginx.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(resp.ends_with(&nginx::body()), "{resp}");
    assert!(resp.contains("Content-Length: 1024\r\n"), "{resp}");

    use rustls::version::{TLS12, TLS13};
    use rustls::ProtocolVersion;
    for (version, want) in [
        (&TLS12, ProtocolVersion::TLSv1_2),
        (&TLS13, ProtocolVersion::TLSv1_3),
    ] {
        let (got, resp) = tls::https_get(nginx.https, &nginx.cert, version)
            .unwrap_or_else(|e| panic!("https {want:?}: {e}\n{}", nginx.error_log()));
        assert_eq!(got, want);
        assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    }
    tls::https_get(nginx.https_tls12_only, &nginx.cert, &TLS12).unwrap();
    assert!(
        tls::https_get(nginx.https_tls12_only, &nginx.cert, &TLS13).is_err(),
        "the TLS 1.2-only port accepted TLS 1.3"
    );

    let log = nginx.access(nginx.https.port());
    let protos: Vec<_> = log.iter().map(|a| a.tls.as_deref()).collect();
    assert_eq!(protos, [Some("TLSv1.2"), Some("TLSv1.3")], "{log:?}");
    assert_eq!(nginx.access(nginx.http.port()).len(), 1);
    assert!(nginx.alive());
}

#[test]
fn support_backend_serves() {
    use std::io::{Read, Write};
    let b = Backend::start("b-support", &[]);
    let mut s = TcpStream::connect(b.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}\n{}", b.stderr());
    assert!(
        resp.to_ascii_lowercase()
            .contains("\r\nx-backend: b-support\r\n"),
        "{resp}"
    );
}

// ---------------------------------------------------------------------------------
// 1. The rate.

#[test]
fn rate_is_held_against_the_backend() {
    let b = Backend::start("b-rate", &[]);
    let out = run_not_overloaded(
        &["-t2", "-c20", "-R2000", "-d3s", &b.url()],
        limit(3),
        || {},
    );
    out.ok();
    out.assert_no_errors();
    assert_rate_within_1pct(&out, 2000.0);
    assert_schedule_kept(&out, 2000.0, 3.0);
    let n = out.result()["timeline"].as_array().unwrap().len();
    assert_eq!(n, 3, "{n} timeline entries for 3 s\n{}", out.context());
    // The histogram field is the real corrected histogram: one value per response.
    assert_eq!(
        histogram_len(&out),
        out.u("/requests/completed"),
        "{}",
        out.context()
    );
    assert_eq!(out.result()["partial"], Value::Bool(false));
}

// ---------------------------------------------------------------------------------
// 2. Every error kind, caused by a server made for it and counted under its name.

/// A short, slow run: errors need no rate, and 40 req/s keeps reconnect loops cheap;
/// its 20 requests are enough to see which kind each error is, and what it counts
/// does not depend on the machine's speed (these tests run beside others).
const ERR_LOAD: [&str; 4] = ["-t1", "-c2", "-R40", "-d500ms"];

fn err_run(extra: &[&str], url: &str) -> LoadOutput {
    let mut args: Vec<&str> = ERR_LOAD.to_vec();
    args.extend_from_slice(extra);
    args.push(url);
    let out = run_load(&args, limit(2));
    // Errors of the system under test are data: the run goes on to its end and saves
    // them; but a run in which nothing succeeded exits 1 and says so.
    out.failed();
    out
}

/// The message of the first error of `kind` (`errors.first`), also printed in the
/// summary.
fn first_error(out: &LoadOutput, kind: &str) -> String {
    let m = out
        .result()
        .pointer(&format!("/errors/first/{kind}"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no errors.first.{kind}\n{}", out.context()))
        .to_string();
    assert!(
        out.stdout.contains(&format!("  first {kind} error: {m}\n")),
        "the summary does not say why\n{}",
        out.context()
    );
    m
}

#[test]
fn error_connect_refused() {
    let out = err_run(&[], &format!("http://{}/", servers::refused()));
    out.assert_only_error("connect");
    let m = first_error(&out, "connect");
    assert!(m.contains("Connection refused"), "{m}");
}

#[test]
fn error_connect_timeout() {
    let s = servers::accept_queue_full();
    let out = err_run(&["--connect-timeout", "200ms"], &s.url("http"));
    out.assert_only_error("connect_timeout");
}

#[test]
fn error_tls_handshake() {
    // -k: the handshake must fail on the protocol, not on the certificate.
    let s = servers::plain_http_for_tls();
    let out = err_run(&["-k"], &s.url("https"));
    out.assert_only_error("tls");
    assert_eq!(
        first_error(&out, "tls"),
        "the server answered plain HTTP to a TLS handshake: use http://"
    );
}

#[test]
fn https_to_the_backends_plain_port_is_named() {
    let b = Backend::start("b-plain", &[]);
    let url = format!("https://{}/", b.addr);
    let out = err_run(&[], &url);
    out.assert_only_error("tls");
    assert_eq!(
        first_error(&out, "tls"),
        "the server answered plain HTTP to a TLS handshake: use http://"
    );
}

#[test]
fn error_read_eof() {
    let s = servers::close_after_request();
    let out = err_run(&[], &s.url("http"));
    out.assert_only_error("read");
}

#[test]
fn error_read_garbage() {
    let s = servers::garbage_answer();
    let out = err_run(&[], &s.url("http"));
    out.assert_only_error("read");
}

/// A server that answers in full and then closes its kept-alive connection (what a
/// proxy does to idle connections on a reload) costs nothing: the engine sees the close
/// with the response and sends the next request on a new connection, counted apart.
/// Both the full close and the half close, in which a request written on the
/// connection would wait out its timeout.
#[test]
fn a_connection_closed_after_its_answer_is_reopened_not_failed() {
    for half in [false, true] {
        let s = servers::answer_once_then_close(half);
        let out = run_load(
            &[
                "-t1",
                "-c2",
                "-R40",
                "-d1s",
                "--timeout",
                "300ms",
                &s.url("http"),
            ],
            limit(3),
        );
        out.ok();
        let ctx = || format!("half close: {half}\n{}", out.context());
        for kind in crate::common::ERROR_KINDS {
            assert_eq!(
                out.u(&format!("/errors/{kind}")),
                0,
                "{kind} errors; {}",
                ctx()
            );
        }
        let completed = out.u("/requests/completed");
        assert!(completed >= 38, "{completed} answered; {}", ctx());
        // Every request after a connection's first goes out on a new connection.
        let reconnects = out.u("/connections/reconnects_after_server_close");
        assert!(
            reconnects + 2 >= completed && reconnects <= completed,
            "{reconnects} reconnects for {completed} requests on 2 connections; {}",
            ctx()
        );
        assert!(
            out.stdout
                .contains("Reconnects after the server closed a kept-alive connection: "),
            "the summary does not say so; {}",
            ctx()
        );
    }
}

/// `--reuse-closed` keeps wrk2's way, to compare with it and with the studies: the
/// next request is written on the closed connection and fails (reset or unanswered).
#[test]
fn reuse_closed_counts_the_servers_close_as_errors_as_wrk2_did() {
    for half in [false, true] {
        let s = servers::answer_once_then_close(half);
        let out = run_load(
            &[
                "-t1",
                "-c2",
                "-R40",
                "-d1s",
                "--timeout",
                "200ms",
                "--reuse-closed",
                &s.url("http"),
            ],
            limit(3),
        );
        let ctx = || format!("half close: {half}\n{}", out.context());
        let failed = out.u("/requests/failed");
        assert!(failed >= 10, "{failed} failed; {}", ctx());
        assert_eq!(
            out.u("/connections/reconnects_after_server_close"),
            0,
            "{}",
            ctx()
        );
        let kind = if half { "timeout" } else { "read" };
        assert!(
            out.u(&format!("/errors/{kind}")) > 0,
            "no {kind} errors; {}",
            ctx()
        );
        assert_eq!(
            out.result().pointer("/config/reuse_closed"),
            Some(&Value::Bool(true))
        );
    }
}

/// Bytes after a complete response are a framing desync, their own error kind:
/// in the same read (a body after a `204`)...
#[test]
fn error_framing_body_after_204() {
    let s = servers::body_after_204();
    let out = err_run(&[], &s.url("http"));
    out.assert_only_error("framing");
    assert_eq!(
        first_error(&out, "framing"),
        "not a valid HTTP/1.1 response: bytes after the end of the response"
    );
}

/// ...or in a later one, arriving while the connection is idle: the response they
/// follow turns from a success into a `framing` error.
#[test]
fn error_framing_bytes_after_the_response_later() {
    framing_later(&servers::bytes_after_response_later(), "completed");
}

/// The same after an error status: the request moves from `status` to `framing`
/// (one request, one outcome), and the status codes still add up to `status`.
#[test]
fn error_framing_bytes_after_an_error_response_later() {
    framing_later(&servers::bytes_after_error_response_later(), "status");
}

/// Runs 40 req/s for 1 s against `s`, whose responses are each followed by stray
/// bytes 10 ms later: all are `framing` errors but the last of each connection (the
/// run may end before its bytes), which stays counted under `last` ("completed"
/// or "status"). A timing test (group `alone`): on a machine busy enough to hold
/// the server's stray bytes past the connection's next send (50 ms later), they
/// arrive as the next request's answer, and one more request keeps its status (a
/// clean clone's rehearsal beside three Kubernetes tests once saw it: `status 3`).
fn framing_later(s: &servers::TestServer, last: &str) {
    let out = run_load_alone(&["-t1", "-c2", "-R40", "-d1s", &s.url("http")], limit(3));
    let ctx = out.context();
    let framing = out.u("/errors/framing");
    let left = match last {
        "completed" => out.u("/requests/completed"),
        _ => out.u(&format!("/errors/{last}")),
    };
    assert!(
        framing >= 36 && left <= 2,
        "framing {framing}, {last} {left}\n{ctx}"
    );
    for other in crate::common::ERROR_KINDS
        .iter()
        .filter(|k| **k != "framing" && **k != last)
    {
        assert_eq!(
            out.u(&format!("/errors/{other}")),
            0,
            "{other} errors\n{ctx}"
        );
    }
    let q = out.result()["requests"].clone();
    assert_eq!(
        q["intended"].as_u64(),
        Some(q["completed"].as_u64().unwrap() + q["failed"].as_u64().unwrap()),
        "every request counted once\n{ctx}"
    );
    let codes: u64 = out.result()["errors"]["status_codes"]
        .as_object()
        .map_or(0, |m| m.values().map(|v| v.as_u64().unwrap()).sum());
    assert_eq!(codes, out.u("/errors/status"), "status codes\n{ctx}");
    let seconds: u64 = out.result()["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["errors"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        seconds,
        out.u("/requests/failed"),
        "the seconds add up to the run\n{ctx}"
    );
}

/// A response framed both ways is answered (decoded as chunked), and counted as a
/// framing warning with its first example.
#[test]
fn length_and_chunked_together_is_a_framing_warning_not_an_error() {
    let s = servers::length_and_chunked();
    let out = run_load(&["-t1", "-c2", "-R40", "-d500ms", &s.url("http")], limit(2));
    out.ok();
    let ctx = out.context();
    let completed = out.u("/requests/completed");
    assert!(completed >= 18, "{completed}\n{ctx}");
    assert_eq!(out.u("/requests/failed"), 0, "{ctx}");
    assert_eq!(out.u("/connections/framing_warnings"), completed, "{ctx}");
    let first = out.result()["connections"]["framing_warning_first"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        first.starts_with("a 200 response with both Content-Length and Transfer-Encoding"),
        "{first}"
    );
    assert!(out.stdout.contains("Framing warnings: "), "{ctx}");
}

/// A generator whose lag is over the limit while its threads have CPU to spare woke
/// late; it is not short of CPU: the process is stopped (SIGSTOP) for 60 ms out of
/// every 250 here, at 400 req/s, so a quarter of its requests go out up to 60 ms late
/// while it uses a few percent of a core. It is not called overloaded, the summary
/// does not tell the user to add threads, and the result carries the machine's
/// wake-up figures measured before the run.
#[test]
fn a_generator_late_with_cpu_to_spare_woke_late_and_is_not_overloaded() {
    let b = Backend::start("b-late", &[]);
    let url = format!("http://{}/", b.addr);
    let load = Load::spawn(&["-t1", "-c4", "-R400", "-d2s", &url]);
    let pid = load.pid().to_string();
    let signal = |sig: &str| kill(sig, &pid);
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(190));
        if !signal("-STOP") {
            break;
        }
        std::thread::sleep(Duration::from_millis(60));
        signal("-CONT");
    }
    let out = load.finish(limit(3));
    let r = out.ok();
    let ctx = out.context();
    let g = &r["generator"];
    assert!(
        g["lag_p99_ms"].as_f64().unwrap() > 2.0,
        "the stops made it late\n{ctx}"
    );
    assert_eq!(g["overloaded"], Value::Bool(false), "{ctx}");
    assert_eq!(g["woke_late"], Value::Bool(true), "{ctx}");
    assert!(
        out.stdout.contains("WARNING: the load generator woke late"),
        "{ctx}"
    );
    assert!(!out.stdout.contains("Use more threads"), "{ctx}");
    let w = &g["wakeup_us"];
    assert_eq!(w["samples"].as_u64(), Some(100), "{ctx}");
    let (p50, p99, max) = (
        w["p50"].as_f64().unwrap(),
        w["p99"].as_f64().unwrap(),
        w["max"].as_f64().unwrap(),
    );
    assert!(0.0 <= p50 && p50 <= p99 && p99 <= max, "{ctx}");
    assert!(
        out.stdout
            .contains("This machine's timed wake-ups (the lag's floor): p50 "),
        "{ctx}"
    );
}

/// The loop waits with microsecond precision (epoll_pwait2, timer slack 1 ns): at a
/// low rate on a quiet machine, requests go out within tens of microseconds of their
/// due time. A wait rounded up to whole milliseconds (epoll_wait's timeout, or a
/// rustix built without `linux_5_11` falling back to it) would put the median lag
/// near half a millisecond and the p99 near 1 ms: this fails then.
#[test]
fn sends_are_timed_to_the_microsecond_not_the_millisecond() {
    let b = Backend::start("b-us", &[]);
    let url = format!("http://{}/", b.addr);
    // Each request at its own due time (no send window): the waits alone are judged.
    // A wait rounded to milliseconds puts the median near 0.5 ms in every run. A
    // stall of this VM (0.7-2.6 ms, docs/benchmarks.md) can put the p99 of one run
    // of 2 s over any bound with the median still precise: that run is repeated (at
    // most twice, each retry recorded in the run's retry budget).
    // This loop's own machine reruns: the test's count also holds those made
    // inside `run_not_overloaded`, which are not this loop's attempts.
    let mut machine = 0;
    for attempt in 1usize.. {
        let out = run_not_overloaded(
            &["-t1", "-c10", "-R1000", "-d2s", "--send-window", "0", &url],
            limit(2),
            || {},
        );
        let ctx = out.context();
        let lag = &out.result()["latency_ms"]["generator_lag"];
        let (p50, p99) = (lag["p50"].as_f64().unwrap(), lag["p99"].as_f64().unwrap());
        assert!(
            p50 < 0.25,
            "lag p50 {p50} ms: waits are not microsecond-precise\n{ctx}"
        );
        if p99 < 0.9 {
            return;
        }
        // The machine's own figures say it stole the time or stalled: not the waits.
        if out.machine_disturbed()
            && crate::common::machine_rerun(&format!(
                "attempt {attempt}: lag p99 {p99} ms with p50 {p50} ms; {}",
                out.machine_said()
            ))
        {
            machine += 1;
            continue;
        }
        let attempt = attempt - machine;
        assert!(
            attempt < 3,
            "lag p99 {p99} ms in three runs: waits are not microsecond-precise\n{ctx}"
        );
        crate::common::record_retry(&format!(
            "attempt {attempt}: lag p99 {p99} ms with p50 {p50} ms (a stall of the machine); running again"
        ));
    }
}

/// With a send window, a wake-up also sends what is due within the window after
/// it: at 5,000 req/s and a 1 ms window most requests go out before their due
/// time, so the median lag is zero, which no request sent at its due time can
/// reach. Their latency counts from the send, so corrected latency is never below
/// the uncorrected (which counts from the send too): counted from the later due
/// time it would be.
#[test]
fn a_send_window_sends_early_and_counts_latency_from_the_send() {
    let b = Backend::start("b-window", &[]);
    let url = format!("http://{}/", b.addr);
    let out = run_not_overloaded(
        &[
            "-t1",
            "-c20",
            "-R5000",
            "-d2s",
            "--send-window",
            "1ms",
            &url,
        ],
        limit(2),
        || {},
    );
    let ctx = out.context();
    let r = out.result();
    assert_eq!(r["config"]["send_window_ms"].as_f64(), Some(1.0), "{ctx}");
    assert_schedule_kept(&out, 5000.0, 2.0);
    let lat = &r["latency_ms"];
    let lag = lat["generator_lag"]["p50"].as_f64().unwrap();
    assert!(
        lag < 0.001,
        "lag p50 {lag} ms: nothing went out early\n{ctx}"
    );
    for p in ["p50", "p90", "p99"] {
        let (c, u) = (
            lat["corrected"][p].as_f64().unwrap(),
            lat["uncorrected"][p].as_f64().unwrap(),
        );
        assert!(
            c >= u,
            "{p}: corrected {c} ms below uncorrected {u} ms: an early request counted from its due time\n{ctx}"
        );
    }
}

/// At a fixed rate the worker sleeps until its next send whatever arrives meanwhile,
/// and reads every response that came in one pass: 4 connections at 400 req/s send
/// every 2.5 ms, so a worker woken by each response would sleep about twice per
/// request, and one that sleeps through them about once. A response read at the
/// next send is still timed when it arrived (the kernel's receive stamp): timed
/// when read, its latency would be the 2.5 ms until that send.
#[test]
fn a_fixed_rate_sleeps_through_responses_and_times_each_when_it_arrived() {
    let b = Backend::start("b-quiet", &[]);
    let url = format!("http://{}/", b.addr);
    let out = run_not_overloaded(
        &["-t1", "-c4", "-R400", "-d2s", "--send-window", "1ms", &url],
        limit(2),
        || {},
    );
    let ctx = out.context();
    let r = out.result();
    assert_schedule_kept(&out, 400.0, 2.0);
    let sent = r["requests"]["sent"].as_f64().unwrap();
    let sleeps = r["generator"]["sleeps"]
        .as_f64()
        .unwrap_or_else(|| panic!("no generator.sleeps\n{ctx}"));
    assert!(
        sleeps / sent < 1.5,
        "{sleeps} sleeps for {sent} requests: the worker woke for responses\n{ctx}"
    );
    let p50 = r["latency_ms"]["corrected"]["p50"].as_f64().unwrap();
    assert!(
        p50 < 1.25,
        "p50 {p50} ms: responses timed when read at the next send, not when they arrived\n{ctx}"
    );
}

#[test]
fn a_send_window_over_a_millisecond_is_refused_in_one_line() {
    let out = run_load(
        &[
            "-R100",
            "-d1s",
            "--send-window",
            "2ms",
            "http://127.0.0.1:9/",
        ],
        limit(1),
    );
    assert_eq!(out.code, Some(2), "{}", out.context());
    let err = out.stderr.trim();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--send-window 2ms is too wide: at most 1ms"),
        "{err}"
    );
}

#[test]
fn error_write_reset() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'a'; 4 << 20]).unwrap();
    let s = servers::reset_while_receiving();
    let out = err_run(
        &["--method", "POST", "--body-file", body.to_str().unwrap()],
        &s.url("http"),
    );
    out.assert_only_error("write");
}

#[test]
fn error_timeout() {
    let s = servers::never_answers();
    let out = err_run(&["--timeout", "300ms"], &s.url("http"));
    out.assert_only_error("timeout");
    assert_eq!(
        first_error(&out, "timeout"),
        "no full response within the timeout (300ms)"
    );
}

#[test]
fn error_status_503() {
    let s = servers::always_503();
    let out = err_run(&[], &s.url("http"));
    out.assert_only_error("status");
    let v = out.result();
    let status = out.u("/errors/status");
    let codes = v["errors"]["status_codes"].as_object().unwrap();
    assert_eq!(codes.len(), 1, "only 503 was answered\n{}", out.context());
    assert_eq!(
        codes.get("503").and_then(Value::as_u64),
        Some(status),
        "{}",
        out.context()
    );
    // Every request got a full answer: each failed one failed with a 503.
    assert_eq!(out.u("/requests/failed"), status, "{}", out.context());
}

// ---------------------------------------------------------------------------------
// 3. TLS 1.2 and 1.3 against a real nginx.

fn tls_run(url: &str, extra: &[&str]) -> LoadOutput {
    let mut args = vec!["-t1", "-c4", "-R200", "-d1s"];
    args.extend_from_slice(extra);
    args.push(url);
    run_load(&args, limit(2))
}

fn assert_tls_version(nginx: &mut Nginx, version: &str, want: &str) {
    nginx.clear_log();
    let cacert = nginx.cacert().to_str().unwrap().to_string();
    let out = tls_run(
        &nginx.https_url(),
        &["--tls-version", version, "--cacert", &cacert],
    );
    out.ok();
    out.assert_no_errors();
    let completed = out.u("/requests/completed");
    assert!(completed > 0, "{}", out.context());
    if let Some(v) = out.result().pointer("/tls/version").and_then(Value::as_str) {
        assert_eq!(v, want, "tls.version\n{}", out.context());
    }
    // nginx's own account: every request it answered came over the asked version, on
    // kept-alive connections, and it answered as many as the generator counted (give or
    // take those in flight at the end).
    let log = nginx.access(nginx.https.port());
    assert!(
        log.iter().all(|a| a.tls.as_deref() == Some(want)),
        "nginx saw other protocols than {want}: {:?}",
        log.iter()
            .map(|a| &a.tls)
            .collect::<std::collections::BTreeSet<_>>()
    );
    assert!(
        log.iter().any(|a| a.connection_requests > 1),
        "no keep-alive"
    );
    assert!(
        (log.len() as u64).abs_diff(completed) <= 4,
        "nginx answered {} requests, the generator counted {completed}\n{}",
        log.len(),
        out.context()
    );
}

#[test]
fn tls_1_2_against_nginx() {
    let mut nginx = Nginx::start();
    assert_tls_version(&mut nginx, "1.2", "TLSv1.2");
}

#[test]
fn tls_1_3_against_nginx() {
    let mut nginx = Nginx::start();
    assert_tls_version(&mut nginx, "1.3", "TLSv1.3");
}

#[test]
fn tls_version_is_enforced() {
    // A server that only speaks 1.2 cannot serve a client restricted to 1.3.
    let nginx = Nginx::start();
    let cacert = nginx.cacert().to_str().unwrap().to_string();
    let url = format!("https://{}/", nginx.https_tls12_only);
    let out = tls_run(&url, &["--tls-version", "1.3", "--cacert", &cacert]);
    out.failed();
    out.assert_only_error("tls");
}

#[test]
fn tls_unknown_ca_fails_and_insecure_works() {
    let nginx = Nginx::start();
    let out = tls_run(&nginx.https_url(), &[]);
    out.failed();
    out.assert_only_error("tls");
    // Why: the certificate is self-signed, so its issuer is unknown.
    let m = first_error(&out, "tls");
    assert!(
        m.starts_with("invalid peer certificate: UnknownIssuer") && m.contains("--cacert"),
        "{m}"
    );

    let out = tls_run(&nginx.https_url(), &["--insecure"]);
    out.ok();
    out.assert_no_errors();
    assert!(out.u("/requests/completed") > 0, "{}", out.context());
}

// ---------------------------------------------------------------------------------
// 4. --new-connection.

#[test]
fn new_connection_over_tls_makes_one_handshake_per_request() {
    let mut nginx = Nginx::start();
    nginx.clear_log();
    let cacert = nginx.cacert().to_str().unwrap().to_string();
    // 100 full RSA-2048 handshakes/s: well within what one nginx worker serves.
    let out = run_load(
        &[
            "-t1",
            "-c4",
            "-R100",
            "-d1s",
            "--new-connection",
            "--cacert",
            &cacert,
            &nginx.https_url(),
        ],
        limit(2),
    );
    out.ok();
    out.assert_no_errors();
    let completed = out.u("/requests/completed");
    assert!(completed > 0, "{}", out.context());
    let sent = out.u("/requests/sent");
    let handshakes = out.u("/tls/handshakes");
    assert!(
        handshakes.abs_diff(sent) <= 4,
        "{handshakes} handshakes for {sent} requests sent\n{}",
        out.context()
    );
    if let Some(r) = out.result().pointer("/tls/resumed").and_then(Value::as_u64) {
        assert_eq!(r, 0, "resumption is off by default\n{}", out.context());
    }
    let log = nginx.access(nginx.https.port());
    assert!(!log.is_empty());
    assert!(
        log.iter()
            .all(|a| a.connection_requests == 1 && !a.session_reused),
        "nginx saw reused connections or sessions: {log:?}"
    );
}

#[test]
fn new_connection_over_plain_http() {
    let mut nginx = Nginx::start();
    nginx.clear_log();
    let out = run_load(
        &[
            "-t1",
            "-c4",
            "-R200",
            "-d1s",
            "--new-connection",
            &nginx.http_url(),
        ],
        limit(2),
    );
    out.ok();
    out.assert_no_errors();
    assert!(out.u("/requests/completed") > 0, "{}", out.context());
    assert_eq!(out.u("/tls/handshakes"), 0, "{}", out.context());
    let log = nginx.access(nginx.http.port());
    assert!(!log.is_empty());
    assert!(
        log.iter().all(|a| a.connection_requests == 1),
        "a connection served more than one request"
    );
}

// ---------------------------------------------------------------------------------
// 5. Plain HTTP against a real nginx.

#[test]
fn rate_is_held_against_nginx() {
    let mut nginx = Nginx::start();
    let url = nginx.http_url();
    let out = run_not_overloaded(&["-t2", "-c20", "-R1000", "-d3s", &url], limit(3), || {
        nginx.clear_log()
    });
    out.ok();
    out.assert_no_errors();
    assert_rate_within_1pct(&out, 1000.0);
    assert_schedule_kept(&out, 1000.0, 3.0);
    // nginx sends no x-backend header.
    assert_eq!(
        out.result()["backends"],
        serde_json::json!({}),
        "{}",
        out.context()
    );
    let completed = out.u("/requests/completed");
    let served = nginx.access(nginx.http.port()).len() as u64;
    assert!(
        served.abs_diff(completed) <= 20,
        "nginx answered {served}, the generator counted {completed}\n{}",
        out.context()
    );
}

// ---------------------------------------------------------------------------------
// 6. Coordinated omission: a stalling server shows in corrected latency only.

#[test]
fn stall_shows_in_corrected_latency_only() {
    // The backend stops answering for 1 s out of every 5 s. Over 10 s a fifth of the
    // requests are intended during a stall and wait up to 1 s, evenly spread: the
    // corrected p99 (the top 5 % of those) is about 0.95 s. Measured from the actual
    // send, only the ~10 requests in flight when a stall begins (one per connection)
    // wait long, far fewer than 1 %.
    //
    // The stalls are the first second of every 5 s since the backend started. Starting
    // the load 1.2 s after it makes the 10 s window hold two whole stalls and end outside
    // one, so no request is still held when the run ends.
    let lock = exclusive();
    let launched = Instant::now();
    let b = Backend::start("b-stall", &["--stall", "1s/5s"]);
    std::thread::sleep(
        (launched + Duration::from_millis(1200)).saturating_duration_since(Instant::now()),
    );
    let out = Load::spawn_exclusive(&["-t1", "-c10", "-R1000", "-d10s", &b.url()], lock)
        .finish(limit(10));
    out.ok();
    out.assert_no_errors();
    let corrected = out.f("/latency_ms/corrected/p99");
    let uncorrected = out.f("/latency_ms/uncorrected/p99");
    assert!(
        (600.0..=1300.0).contains(&corrected),
        "corrected p99 {corrected} ms, expected about 1000\n{}",
        out.context()
    );
    assert!(
        uncorrected < 100.0,
        "uncorrected p99 {uncorrected} ms, expected small\n{}",
        out.context()
    );
    // The stalls delay requests, they do not drop them.
    assert_schedule_kept(&out, 1000.0, 10.0);
}

#[test]
fn a_stall_across_the_end_of_the_window_is_measured_not_dropped() {
    // The backend stalls for the first 1 s of every 5 s since it started. A 4.3 s load
    // started 1.2 s after it ends at 5.5 s, halfway through the second stall: the
    // ~500 requests due from 5.0 s to the end wait for the stall's end at 6.0 s, the
    // last of them 0.5 s (the stall left after the end). They must be sent after the
    // window and measured from their intended times, not dropped: hundreds of
    // latencies of 0.45 s and more, where dropping them leaves one per connection (the
    // one in flight when the stall began). The rate falls short in the window, and the
    // summary must say it was the server's doing, not the generator's.
    let mut attempt = 1;
    let out = loop {
        cpu::wait_for_quiet(Duration::from_secs(20));
        let lock = exclusive();
        let launched = Instant::now();
        let b = Backend::start("b-stall-end", &["--stall", "1s/5s"]);
        std::thread::sleep(
            (launched + Duration::from_millis(1200)).saturating_duration_since(Instant::now()),
        );
        let out = Load::spawn_exclusive(&["-t1", "-c10", "-R1000", "-d4300ms", &b.url()], lock)
            .finish(limit(5));
        if !may_retry_overloaded(attempt, &[&out]) {
            break out;
        }
        attempt += 1;
    };
    out.ok();
    out.assert_no_errors();
    assert_eq!(out.result()["partial"], Value::Bool(false));
    // Every intended request was sent and answered: none left out.
    let intended = out.u("/requests/intended");
    assert!(
        (4257..=4343).contains(&intended),
        "1000 req/s for 4.3 s is 4300 intended, not {intended}\n{}",
        out.context()
    );
    assert_eq!(out.u("/requests/completed"), intended, "{}", out.context());
    assert_eq!(out.u("/requests/sent"), intended, "{}", out.context());
    assert_eq!(out.u("/requests/not_sent"), 0, "{}", out.context());
    assert_eq!(out.u("/requests/unfinished"), 0, "{}", out.context());
    // Each in the histogram, from its intended time.
    let h = decode_histogram(out.result()["histogram"].as_str().unwrap()).unwrap();
    assert_eq!(h.len(), intended, "{}", out.context());
    let held = h.count_between(450_000, h.max());
    assert!(
        held >= 350,
        "{held} latencies of 0.45 s or more: the requests due in the stall's part of \
         the window were not measured\n{}",
        out.context()
    );
    let max = out.f("/latency_ms/corrected/max");
    assert!(
        (900.0..=1300.0).contains(&max),
        "corrected max {max} ms, the first request due in the stall waits about 1 s\n{}",
        out.context()
    );
    // The drain's answers count in the last second of the timeline.
    let timeline = out.result()["timeline"].as_array().unwrap();
    let done: u64 = timeline
        .iter()
        .map(|e| e["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(done, intended, "{}", out.context());
    // Why the rate fell short in the window: requests behind connections the server
    // kept busy.
    let busy = out.u("/rate/shortfall/connections_busy");
    assert!(busy >= 350, "{}", out.context());
    assert_eq!(
        out.u("/rate/shortfall/connections_failed"),
        0,
        "{}",
        out.context()
    );
    let late = out.u("/rate/shortfall/generator_late");
    assert!(late * 100 <= busy, "{}", out.context());
    assert_eq!(out.result()["rate"]["reached"], Value::Bool(false));
    let warning = out
        .stdout
        .lines()
        .find(|l| l.starts_with("WARNING: the target rate was not reached"))
        .unwrap_or_else(|| panic!("no rate warning\n{}", out.context()));
    assert!(
        warning.contains(&format!(
            "{busy} waited for connections the server kept busy with slow responses"
        )) && warning.contains("not a fault of the generator"),
        "{warning}"
    );
    if late == 0 {
        assert!(!warning.contains("generator was late"), "{warning}");
    }
    assert!(
        !out.stdout.contains("generator was overloaded")
            && !out.stdout.contains("generator woke late"),
        "{}",
        out.context()
    );
}

// ---------------------------------------------------------------------------------
// 7. Which backend answered.

#[test]
fn backends_are_tallied_overall_and_per_second() {
    let b = Backend::start("b-tally", &[]);
    let out = run_load(&["-t2", "-c10", "-R500", "-d2s", &b.url()], limit(2));
    let v = out.ok();
    out.assert_no_errors();
    let completed = out.u("/requests/completed");
    assert!(completed > 0, "{}", out.context());
    assert_eq!(
        v["backends"],
        serde_json::json!({ "b-tally": completed }),
        "{}",
        out.context()
    );
    let timeline = v["timeline"].as_array().unwrap();
    for e in timeline {
        let sum: u64 = e["backends"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum();
        assert_eq!(sum, e["completed"].as_u64().unwrap(), "timeline entry {e}");
    }
    let per_second: u64 = timeline
        .iter()
        .map(|e| e["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(
        per_second,
        completed,
        "timeline does not add up\n{}",
        out.context()
    );
}

// ---------------------------------------------------------------------------------
// 8. SIGINT.

#[test]
fn sigint_writes_a_partial_result() {
    let b = Backend::start("b-int", &[]);
    let load = Load::spawn(&["-t1", "-c10", "-R500", "-d20s", &b.url()]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(kill("-INT", load.pid()), "kill -INT failed");
    let signalled = Instant::now();
    let out = load.finish(Duration::from_secs(5));
    assert!(
        !out.timed_out,
        "still running 5 s after SIGINT\n{}",
        out.context()
    );
    assert!(
        signalled.elapsed() <= Duration::from_secs(5),
        "took {:?} to stop",
        signalled.elapsed()
    );
    // It stopped by itself (handled the signal), not killed by it.
    assert!(out.code.is_some(), "died of the signal\n{}", out.context());
    let v = out.result();
    assert_eq!(v["partial"], Value::Bool(true), "{}", out.context());
    assert!(out.u("/requests/completed") > 0, "{}", out.context());
    let d = out.f("/duration_s");
    assert!(
        (1.0..6.0).contains(&d),
        "duration_s {d} for a run stopped at 2 s\n{}",
        out.context()
    );
}

#[test]
fn sigint_during_start_up_blames_no_connection() {
    // Every connect hangs, so the run is still opening its connections (up to the
    // connect timeout) when it is interrupted: its window never began.
    let s = servers::accept_queue_full();
    let load = Load::spawn(&[
        "-t1",
        "-c4",
        "-R100",
        "-d20s",
        "--connect-timeout",
        "8s",
        &s.url("http"),
    ]);
    std::thread::sleep(Duration::from_millis(700));
    assert!(kill("-INT", load.pid()), "kill -INT failed");
    let out = load.finish(Duration::from_secs(5));
    assert!(!out.timed_out, "still running\n{}", out.context());
    let v = out.result();
    assert_eq!(v["partial"], Value::Bool(true), "{}", out.context());
    assert_eq!(out.u("/requests/intended"), 0, "{}", out.context());
    assert_eq!(
        v["timeline"].as_array().map(Vec::len),
        Some(0),
        "a window that never began has no seconds\n{}",
        out.context()
    );
    assert!(
        !out.stdout.contains("connections were busy"),
        "nothing was due, so no connection was busy\n{}",
        out.context()
    );
    assert!(out.stdout.contains("interrupted"), "{}", out.context());
}

// ---------------------------------------------------------------------------------
// 9. Bad input.

/// One refused input: the arguments, what the one line must say, and the open-files
/// limit (soft and hard) to run it under, if any.
struct Refused<'a> {
    args: Vec<&'a str>,
    says: &'a str,
    nofile: Option<u32>,
}

fn refused<'a>(args: &[&'a str], says: &'a str) -> Refused<'a> {
    Refused {
        args: args.to_vec(),
        says,
        nofile: None,
    }
}

/// Runs `ingressbench load` under `ulimit -n LIMIT` (soft and hard), `--json` into a
/// temp dir, and returns the exit code, stdout, stderr and whether a result was written.
fn load_under_nofile(limit: u32, args: &[&str]) -> (Option<i32>, String, String, bool) {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(crate::common::BIN)
        .arg("load")
        .args(args)
        .arg("--json")
        .arg(&json);
    let out = Proc::spawn("load", &mut cmd, dir.path()).finish(Duration::from_secs(10));
    (out.code, out.stdout, out.stderr, json.exists())
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let closed = format!("http://{}/", servers::refused());
    let closed_tls = format!("https://{}/", servers::refused());
    let cases = vec![
        refused(&["-R", "0", &closed], "-R/--rate 0 is not a rate"),
        refused(&["-R", "-5", &closed], "unexpected argument '-5'"),
        refused(&["--rate=-5", &closed], "-R/--rate -5 is not a rate"),
        refused(
            &["-R", "10", "-c", "0", &closed],
            "-c/--connections must be at least 1",
        ),
        refused(
            &["-R", "10", "-t4", "-c2", &closed],
            "-c/--connections (2) must be at least -t/--threads (4)",
        ),
        refused(&["-R", "10", "not a url"], "not a URL"),
        refused(&["-R", "10", "ftp://x"], "scheme 'ftp' is not supported"),
        refused(
            &["-R", "10", "--cacert", "/nonexistent.pem", &closed_tls],
            "--cacert /nonexistent.pem: No such file",
        ),
        refused(&["-R", "10", "--duration", "10x", &closed], "--duration"),
        // Conflicting settings (issue 9, item 8).
        refused(
            &["-R", "10", "-H", "Content-Length: 5", &closed],
            "-H/--header 'Content-Length: 5' does not match the body (0 bytes)",
        ),
        refused(
            &["-R", "10", "-H", "Transfer-Encoding: chunked", &closed],
            "-H/--header 'Transfer-Encoding: chunked' is not supported",
        ),
        refused(
            &["-R", "10", "-k", &closed],
            "-k/--insecure needs an https:// URL",
        ),
        refused(
            &["-R", "10", "--cacert", "/nonexistent.pem", &closed],
            "--cacert needs an https:// URL",
        ),
        refused(
            &["-R", "10", "--tls-version", "1.3", &closed],
            "--tls-version needs an https:// URL",
        ),
        refused(
            &["-R", "10", "--tls-resume", &closed_tls],
            "--tls-resume needs --new-connection",
        ),
        // A load that cannot be split as asked (issue 12).
        refused(
            &["-R", "10", "--generators", "0", &closed],
            "--generators must be at least 1",
        ),
        refused(
            &["-R", "10", "-c2", "--generators", "3", &closed],
            "--generators 3 needs at least 3 connections, not -c 2: each generator needs one",
        ),
        refused(
            &["-R", "10", "-c8", "-t2", "--generators", "3", &closed],
            "--generators 3 needs at least 3 threads, not -t 2: each generator runs one",
        ),
        refused(
            &["-R", "10", "--generators", "two", &closed],
            "invalid value 'two' for '--generators <N>'",
        ),
        // More connections than the hard open-files limit allows (item 7): refused
        // before the run, instead of counting "too many open files" as `connect`.
        Refused {
            nofile: Some(64),
            ..refused(
                &["-R", "10", "-c500", &closed],
                "-c/--connections 500 needs about 532 open files, but this process may open at most 64 (ulimit -Hn)",
            )
        },
    ];
    for case in cases {
        // -d 1s: should a bad input be accepted anyway, the run stays short. Not added
        // where the case sets the duration itself: clap refuses a repeated flag, and
        // the case would then pass for that reason instead of its own.
        let mut args = case.args.clone();
        if !args.contains(&"--duration") {
            args.splice(0..0, ["-d", "1s"]);
        }
        let (code, stdout, stderr, wrote) = match case.nofile {
            None => {
                let out = run_load(&args, Duration::from_secs(10));
                (out.code, out.stdout, out.stderr, out.json.is_some())
            }
            Some(n) => load_under_nofile(n, &args),
        };
        let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
        let args = &case.args;
        assert_eq!(code, Some(2), "{args:?}: exit code\n{ctx}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: stderr must be one line\n{ctx}");
        assert!(lines[0].starts_with("ingressbench: "), "{args:?}\n{ctx}");
        assert!(
            lines[0].contains(case.says),
            "{args:?}: should say {:?}\n{ctx}",
            case.says
        );
        assert!(
            !stderr.contains("panicked") && !stdout.contains("panicked"),
            "{args:?}\n{ctx}"
        );
        assert!(!wrote, "{args:?}: wrote a result\n{ctx}");
    }
}

#[test]
fn an_os_error_is_said_once() {
    // A port already taken: the OS's reason appears once, not after its own echo.
    let b = Backend::start("b-taken", &[]);
    let out = crate::common::run(
        &["backend", "--listen", &b.addr.to_string()],
        Duration::from_secs(10),
    );
    let stderr = &out.stderr;
    assert_eq!(out.code, Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("Address already in use").count(),
        1,
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

// ---------------------------------------------------------------------------------
// 10. The HdrHistogram interval log, and --max.

#[test]
fn hdr_log_is_a_standard_interval_log() {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let b = Backend::start("b-hdr", &[]);
    let out = run_load(
        &[
            "-t1",
            "-c4",
            "-R200",
            "-d3s",
            "--hdr-log",
            "{dir}/h.hlog",
            &b.url(),
        ],
        limit(3),
    );
    out.ok();
    out.assert_no_errors();
    let text = std::fs::read_to_string(out.file("h.hlog"))
        .unwrap_or_else(|e| panic!("--hdr-log file: {e}\n{}", out.context()));
    assert!(
        text.lines().any(|l| l.starts_with("#[StartTime: ")),
        "no StartTime header:\n{text}"
    );
    // Read it with HdrHistogram's own parser, and decode every interval's histogram.
    let (mut start, mut intervals, mut values) = (false, 0, 0);
    for entry in IntervalLogIterator::new(text.as_bytes()) {
        match entry.unwrap_or_else(|e| panic!("{e:?} in:\n{text}")) {
            LogEntry::StartTime(_) => start = true,
            LogEntry::BaseTime(_) => {}
            LogEntry::Interval(h) => {
                intervals += 1;
                values += decode_histogram(h.encoded_histogram())
                    .unwrap_or_else(|e| panic!("interval {intervals}: {e}\n{text}"))
                    .len();
            }
        }
    }
    assert!(start, "the parser found no StartTime:\n{text}");
    // One interval per second of the window, the drain counted in the last: no
    // empty extra interval at the end.
    assert_eq!(intervals, 3, "{intervals} intervals for 3 s:\n{text}");
    let timeline = out.result()["timeline"].as_array().unwrap();
    let ts: Vec<u64> = timeline.iter().map(|e| e["t"].as_u64().unwrap()).collect();
    assert_eq!(ts, [0, 1, 2], "timeline of a 3 s run\n{}", out.context());
    let completed: u64 = timeline
        .iter()
        .map(|e| e["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(
        completed,
        out.u("/requests/completed"),
        "the timeline holds every response\n{}",
        out.context()
    );
    assert_eq!(
        values,
        out.u("/requests/completed"),
        "the intervals do not hold every response\n{text}"
    );
}

#[test]
fn max_mode_runs_closed_loop() {
    let b = Backend::start("b-max", &[]);
    let out = run_load(&["-t1", "-c10", "-d500ms", "--max", &b.url()], limit(2));
    let v = out.ok();
    out.assert_no_errors();
    assert!(out.u("/requests/completed") > 0, "{}", out.context());
    assert!(v["rate"]["target"].is_null(), "{}", out.context());
    // No schedule, nothing to correct: one latency, labelled as such.
    assert_eq!(
        v["latency_ms"]["corrected"],
        v["latency_ms"]["uncorrected"],
        "{}",
        out.context()
    );
    assert!(
        out.stdout.contains("\n    latency ") && !out.stdout.contains("corrected"),
        "{}",
        out.context()
    );
}

// ---------------------------------------------------------------------------------
// 11. A run that measured nothing never looks good: no latency (null, not 0), a loud
// line, exit 1, and a compare gate that fails on it.

/// A real short load against the built-in backend, saved once for the gates below.
fn good_base() -> &'static std::path::Path {
    static BASE: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> =
        std::sync::OnceLock::new();
    let (_, p) = BASE.get_or_init(|| {
        let b = Backend::start("b-base", &[]);
        let out = run_load(&["-t1", "-c2", "-R100", "-d1s", &b.url()], limit(2));
        out.ok();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("base.json");
        std::fs::copy(out.file("r.json"), &p).unwrap();
        (dir, p)
    });
    p
}

/// The run received no response: every latency is null, the summary says so, it
/// exited 1, and `compare BASE RUN --max-regression ...` fails naming why.
fn assert_measured_nothing(out: &LoadOutput) {
    let v = out.result();
    for block in ["corrected", "uncorrected"] {
        for k in crate::common::PERCENTILE_KEYS
            .iter()
            .chain(&["mean", "stdev"])
        {
            assert!(
                v["latency_ms"][block][k].is_null(),
                "latency_ms.{block}.{k} is not null\n{}",
                out.context()
            );
        }
    }
    assert!(
        out.stdout.contains("FAILED: no response was received: "),
        "no loud line\n{}",
        out.context()
    );
    // No latency row (corrected, uncorrected, the distribution) shows a figure: the
    // generator's own lag line may well read `30.00us`, and the warning of a machine
    // that took the generator's time its stolen milliseconds and shares.
    let latency_rows = out.stdout.lines().filter(|l| {
        let t = l.trim_start();
        !t.starts_with("WARNING:")
            && (t.starts_with("corrected") || t.starts_with("uncorrected") || t.contains('%'))
    });
    for row in latency_rows {
        assert!(
            !row.split_whitespace()
                .any(|w| w.ends_with("us") || w.ends_with("ms")),
            "a latency printed for nothing: {row}\n{}",
            out.context()
        );
    }
    let dead = out.file("r.json");
    let cmp = crate::common::run(
        &[
            "compare",
            good_base().to_str().unwrap(),
            dead.to_str().unwrap(),
            "--max-regression",
            "p99=10%,p99.9=50ms,max=1s",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(cmp.code, Some(1), "the gate passed\n{}", cmp.stdout);
    assert!(
        cmp.stdout.contains(
            "REGRESSION: load: the new run failed, no limit can hold: no response was received: "
        ),
        "{}",
        cmp.stdout
    );
    assert!(
        !cmp.stdout.contains("every threshold holds"),
        "{}",
        cmp.stdout
    );
    assert!(!cmp.stdout.contains("-100.0%"), "{}", cmp.stdout);
}

#[test]
fn failed_run_dead_port() {
    let out = err_run(&[], &format!("http://{}/", servers::refused()));
    assert_measured_nothing(&out);
}

#[test]
fn failed_run_every_tls_handshake() {
    let s = servers::plain_http_for_tls();
    let out = err_run(&["-k"], &s.url("https"));
    out.assert_only_error("tls");
    assert_measured_nothing(&out);
}

#[test]
fn failed_run_every_request_timed_out() {
    let s = servers::never_answers();
    let out = err_run(&["--timeout", "300ms"], &s.url("http"));
    out.assert_only_error("timeout");
    assert_measured_nothing(&out);
}
