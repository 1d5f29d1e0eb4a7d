//! The end of the window, run for real: the engine against a small keep-alive server
//! on 127.0.0.1 that holds its answers during a stall placed across the window's end,
//! so the requests due at the end are queued behind busy connections.
//!
//! 200 requests/s over 4 connections (one lane each, 20 ms apart) for 1 s. Times are
//! from the server's start, a few milliseconds before the window's: the bounds below
//! are wide enough for that and for a busy machine.

use crate::tests;
use crate::{run, Plan};
use results::LoadConfig;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

/// A server that answers every request at once, except those that arrive between
/// `from` and `until` after it started: those are answered at `until`.
struct StallServer {
    url: String,
    done: Arc<AtomicBool>,
}

impl Drop for StallServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn stall_server(from: Duration, until: Duration) -> StallServer {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    l.set_nonblocking(true).unwrap();
    let t0 = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        while !d.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((s, _)) => {
                    std::thread::spawn(move || serve(s, t0, from, until));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    });
    StallServer { url, done }
}

fn serve(mut s: TcpStream, t0: Instant, from: Duration, until: Duration) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_nodelay(true);
    let mut buf = [0u8; 4096];
    let mut have = Vec::new();
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        have.extend_from_slice(&buf[..n]);
        while let Some(i) = have.windows(4).position(|w| w == b"\r\n\r\n") {
            have.drain(..i + 4);
            let now = t0.elapsed();
            if now >= from && now < until {
                std::thread::sleep(until - now);
            }
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .is_err()
            {
                return;
            }
        }
    }
}

fn plan(url: &str, timeout: Duration) -> (Plan, LoadConfig) {
    let mut s = tests::spec(url);
    s.connections = 4;
    s.rate = Some(200.0);
    s.timeout = timeout;
    s.resolve().unwrap()
}

fn ms(v: u64) -> f64 {
    v as f64 / 1000.0
}

#[test]
fn a_stall_across_the_end_is_waited_for_and_measured() {
    // Requests due from 0.7 s wait for the stall's end at 1.3 s: those due in the
    // last 0.3 s of the window are still queued when it ends.
    let server = stall_server(Duration::from_millis(700), Duration::from_millis(1300));
    let (plan, config) = plan(&server.url, Duration::from_secs(5));
    let began = Instant::now();
    let o = run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
    let elapsed = began.elapsed();
    let r = o.to_result(&server.url, config);
    let (q, sf) = (&r.requests, &r.rate.shortfall);
    let ctx = format!("{q:?} {:?} in {elapsed:?}", r.rate);
    // Every request due in the window was sent and answered: none left out.
    assert_eq!(q.intended, 200, "{ctx}");
    assert_eq!((q.completed, q.failed), (200, 0), "{ctx}");
    assert_eq!((q.sent, q.not_sent, q.unfinished), (200, 0, 0), "{ctx}");
    assert!(q.balanced() && !r.partial, "{ctx}");
    // ... and measured from its intended time: the first one due in the stall waited
    // about 0.6 s for it.
    let max = o.totals.corrected.max();
    assert!(
        (500_000..1_000_000).contains(&max),
        "max {} ms {ctx}",
        ms(max)
    );
    assert_eq!(o.totals.corrected.len(), 200, "{ctx}");
    // The ~60 due in the stall's part of the window: 4 in flight at the end, the rest
    // queued behind them, which is the server's doing.
    assert!(
        (40..=60).contains(&sf.connections_busy),
        "connections_busy {} {ctx}",
        sf.connections_busy
    );
    assert_eq!((sf.generator_late, sf.connections_failed), (0, 0), "{ctx}");
    assert!(!r.rate.reached, "{ctx}");
    let started_in_window = r.rate.achieved * r.duration_s;
    assert!(
        (started_in_window - (200 - sf.total()) as f64).abs() < 0.5,
        "{ctx}"
    );
    // The run waited for the stall (1.3 s), not for the timeout.
    assert!(elapsed < Duration::from_millis(2500), "{ctx}");
    // What completed during the drain counts in the last second.
    let sent: u64 = o.seconds.iter().map(|s| s.entry.sent).sum();
    let done: u64 = o.seconds.iter().map(|s| s.entry.completed).sum();
    assert_eq!((o.seconds.len(), sent, done), (1, 200, 200), "{ctx}");
}

#[test]
fn what_the_drains_deadline_cuts_is_a_censored_timeout() {
    // The server stops answering at 0.5 s for longer than the run: with a 300 ms
    // timeout the drain ends at about 1.3 s, and what is still queued or in flight
    // then is a timeout recorded at its latency so far.
    let server = stall_server(Duration::from_millis(500), Duration::from_secs(30));
    let timeout = Duration::from_millis(300);
    let (plan, config) = plan(&server.url, timeout);
    let began = Instant::now();
    let o = run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
    let elapsed = began.elapsed();
    let r = o.to_result(&server.url, config);
    let q = &r.requests;
    let ctx = format!("{q:?} {:?} {:?} in {elapsed:?}", r.rate, r.errors);
    assert_eq!(q.intended, 200, "{ctx}");
    assert!((90..=110).contains(&q.completed), "{ctx}");
    assert_eq!(q.completed + q.failed, 200, "{ctx}");
    assert_eq!((q.not_sent, q.unfinished), (0, 0), "{ctx}");
    assert_eq!(r.errors.timeout, q.failed, "{ctx}");
    assert!(q.timed_out_unsent > 50, "{ctx}");
    assert!(q.balanced() && !r.partial, "{ctx}");
    // The cut ones are in the histogram (those that timed out on their own are not),
    // the oldest at about 1.3 - 0.54 s: more than twice the timeout.
    let t = &o.totals;
    assert!(
        t.corrected.len() >= q.completed + q.timed_out_unsent,
        "{} values {ctx}",
        t.corrected.len()
    );
    let max = t.corrected.max();
    assert!(
        (600_000..1_300_000).contains(&max),
        "max {} ms {ctx}",
        ms(max)
    );
    // The drain ends at the window's end plus the timeout, not later.
    assert!(elapsed < Duration::from_millis(2500), "{ctx}");
    assert!(r.errors.first.contains_key("timeout"), "{ctx}");
}

#[test]
fn an_interrupt_during_the_drain_stops_it() {
    // A stall from 0.7 s to beyond the run with a 10 s timeout: the drain would last
    // until 11 s. An interrupt at 1.2 s stops sending at once, waits 1 s for what is in
    // flight, and leaves the rest unsent and unfinished.
    let server = stall_server(Duration::from_millis(700), Duration::from_secs(30));
    let (plan, config) = plan(&server.url, Duration::from_secs(10));
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1200));
        s.store(true, Ordering::Relaxed);
    });
    let began = Instant::now();
    let o = run(&plan, stop, |_| {}).unwrap();
    let elapsed = began.elapsed();
    let r = o.to_result(&server.url, config);
    let q = &r.requests;
    let ctx = format!("{q:?} {:?} in {elapsed:?}", r.rate);
    assert!(r.partial, "{ctx}");
    assert!(q.balanced(), "{ctx}");
    assert_eq!(q.intended, 200, "the window was whole {ctx}");
    assert_eq!(q.unfinished, 4, "one in flight per connection {ctx}");
    assert!(q.not_sent > 40, "{ctx}");
    assert_eq!((q.failed, q.timed_out_unsent), (0, 0), "{ctx}");
    assert!(elapsed < Duration::from_millis(3500), "{ctx}");
    assert!((r.duration_s - 1.0).abs() < 0.01, "{ctx}");
}

#[test]
fn a_run_without_a_response_records_no_censored_latency() {
    // A server that never answers: the drain's cut-offs would be the run's only
    // latencies, bounds on answers that never came. They are plain timeouts.
    let server = stall_server(Duration::ZERO, Duration::from_secs(30));
    let (plan, config) = plan(&server.url, Duration::from_millis(300));
    let o = run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
    let r = o.to_result(&server.url, config);
    let q = &r.requests;
    let ctx = format!("{q:?} {:?}", r.errors);
    assert_eq!(
        (q.intended, q.failed, r.errors.timeout),
        (200, 200, 200),
        "{ctx}"
    );
    assert!(q.timed_out_unsent > 0 && q.balanced(), "{ctx}");
    assert_eq!(o.totals.corrected.len(), 0, "{ctx}");
    assert_eq!(r.latency_ms.corrected.max, None, "{ctx}");
    assert!(
        r.failure()
            .is_some_and(|f| f.starts_with("no response was received")),
        "{ctx}"
    );
}
