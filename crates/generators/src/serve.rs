//! A part's side of the Kubernetes collection path (`--serve ADDR:PORT`): a tiny HTTP
//! endpoint the coordinator reaches through the API server's pod proxy.
//!
//! - `GET /clock`: this machine's wall clock, Unix nanoseconds (the clock probes, and
//!   the pod's readiness probe);
//! - `GET /result`: `202` while the load runs, then `200` and the full result (JSON);
//! - `POST /stop`: stop sending now, as an interrupt does (the result is then partial);
//! - `POST /done`: the result was collected; the part exits.
//! - `POST /mark/K/T` (a scenario run's part, `--marks`): change number `K` (from 1)
//!   opens a window at Unix time `T` nanoseconds on this machine's clock; the answer
//!   is this clock's time on arrival, so the coordinator knows whether it came before
//!   `T`. A `K` already taken (a retried request that arrived twice) opens nothing.
//!
//! The coordinator is the only client and sends a handful of requests (during the
//! measured window only a `/clock` from a late probe, a `/stop`, and one `/mark` per
//! change of a scenario run), each on a connection closed after its answer. They are
//! served side by side ([`crate::endpoint`]), so a stalled connection (a proxy's
//! half-sent request) never holds up a `/stop`.

use crate::endpoint::{Body, Endpoint, Limits};
use crate::{now_unix_ns, Error};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a part keeps its result for a coordinator that does not come; then it
/// exits 1 (the Job's `activeDeadlineSeconds` bounds it in any case).
pub const COLLECT_LIMIT: Duration = Duration::from_secs(300);
/// A request head within 5 s (the API server forwards it whole); then 60 s more to
/// take the answer, as the coordinator gives each transfer of a result 60 s.
const LIMITS: Limits = Limits {
    head: Duration::from_secs(5),
    exchange: Duration::from_secs(65),
    max_head: 8 << 10,
};

/// The result endpoint of a part; stops serving and closes its socket when dropped.
pub struct Served {
    state: Arc<State>,
    _endpoint: Endpoint,
}

/// What the endpoint serves; shared with its thread.
struct State {
    /// The result, once the load has ended.
    result: Mutex<Option<Bytes>>,
    done: AtomicBool,
    stop: Arc<AtomicBool>,
    /// Where `/mark` puts the windows, once the load's clock has started.
    marks: OnceLock<(Arc<engine::windows::Marks>, results::clock::Clock)>,
    /// The number of the last mark taken.
    last_mark: Mutex<u64>,
}

impl Served {
    /// Binds `addr` and serves on a thread of its own.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub fn start(addr: &str, stop: Arc<AtomicBool>) -> Result<Served, Error> {
        let listener = TcpListener::bind(addr).map_err(Error::io(format!("--serve {addr}")))?;
        let state = Arc::new(State {
            result: Mutex::new(None),
            done: AtomicBool::new(false),
            stop,
            marks: OnceLock::new(),
            last_mark: Mutex::new(0),
        });
        let s = state.clone();
        let endpoint = Endpoint::start(listener, "serve", LIMITS, move |req| s.answer(req))
            .map_err(Error::io("start the result endpoint"))?;
        Ok(Served {
            state,
            _endpoint: endpoint,
        })
    }

    /// From now on `/mark` opens windows in `marks`, on `clock`.
    pub fn take_marks(&self, marks: Arc<engine::windows::Marks>, clock: results::clock::Clock) {
        let _ = self.state.marks.set((marks, clock));
    }

    /// Offers the result and waits until it was collected (`true`), a signal arrived
    /// after it was offered, or `limit` passed (`false`).
    pub fn publish_and_wait(&self, result: Vec<u8>, limit: Duration) -> bool {
        let state = &self.state;
        let stopped_before = state.stop.load(Ordering::Relaxed);
        *state.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(Bytes::from(result));
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if state.done.load(Ordering::Relaxed) {
                return true;
            }
            if !stopped_before && state.stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl State {
    /// Mark number `seq` opens a window at Unix time `unix` (ns) on this machine's
    /// clock, unless a mark of that number or later was taken already (then nothing
    /// changes: the request was a retry); the clock's time on arrival, or `None` when
    /// no load takes marks.
    fn mark(&self, seq: u64, unix: u128) -> Option<u128> {
        let now = now_unix_ns();
        let (marks, clock) = self.marks.get()?;
        let mut last = self.last_mark.lock().unwrap_or_else(|e| e.into_inner());
        if seq > *last {
            *last = seq;
            let t = unix.saturating_sub(clock.wall_epoch_ns());
            marks.mark(u64::try_from(t).unwrap_or(u64::MAX));
        }
        Some(now)
    }

    fn answer(&self, req: &Request<Incoming>) -> Response<Body> {
        let path = req.uri().path();
        let result = self
            .result
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let text = |s: &'static str| Bytes::from_static(s.as_bytes());
        let (status, body) = match (req.method(), path) {
            (&Method::GET, "/clock") => (StatusCode::OK, Bytes::from(now_unix_ns().to_string())),
            (&Method::GET, "/result") => match result {
                Some(r) => (StatusCode::OK, r),
                None => (StatusCode::ACCEPTED, text("running\n")),
            },
            (&Method::POST, "/stop") => {
                self.stop.store(true, Ordering::Relaxed);
                (StatusCode::OK, text("stopping\n"))
            }
            (&Method::POST, "/done") if result.is_some() => {
                self.done.store(true, Ordering::Relaxed);
                (StatusCode::OK, text("bye\n"))
            }
            (&Method::POST, "/done") => (StatusCode::CONFLICT, text("no result yet\n")),
            (&Method::POST, p) if p.starts_with("/mark/") => {
                let parsed = p["/mark/".len()..]
                    .split_once('/')
                    .and_then(|(k, t)| Some((k.parse::<u64>().ok()?, t.parse::<u128>().ok()?)));
                match parsed.map(|(k, t)| self.mark(k, t)) {
                    Some(Some(now)) => (StatusCode::OK, Bytes::from(now.to_string())),
                    Some(None) => (StatusCode::CONFLICT, text("this load takes no marks\n")),
                    None => (StatusCode::BAD_REQUEST, text("give /mark/NUMBER/UNIX_NS\n")),
                }
            }
            _ => (StatusCode::NOT_FOUND, text("not found\n")),
        };
        let content_type = if path == "/result" && status == StatusCode::OK {
            "application/json"
        } else {
            "text/plain"
        };
        let mut r = Response::new(Body::new(body));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn call(addr: std::net::SocketAddr, req: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    /// A client that stalls halfway through its request must not hold up the
    /// coordinator's `/stop` (a Ctrl-C forwarded during the measured window).
    #[test]
    fn a_slow_client_delays_no_stop() {
        let stop = Arc::new(AtomicBool::new(false));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let _s = Served::start(&addr.to_string(), stop.clone()).unwrap();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /clo").unwrap();
        // Let the server take the slow connection first, as a serial server would.
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let r = call(addr, "POST /stop HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(stop.load(Ordering::Relaxed));
        // Answered while the slow one still waits for the rest of its request: a
        // server taking one client at a time answers only once it gave up on it.
        slow.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        assert!(
            matches!(slow.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the slow client was dropped before /stop was answered"
        );
        slow.set_nonblocking(false).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        slow.write_all(b"ck HTTP/1.1\r\n\r\n").unwrap();
        let mut late = String::new();
        slow.read_to_string(&mut late).unwrap();
        assert!(late.starts_with("HTTP/1.1 200"), "{late}");
    }

    #[test]
    fn the_endpoint_serves_clock_then_result_and_ends_when_collected() {
        let stop = Arc::new(AtomicBool::new(false));
        // Port 0: bind a free port, then find which.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let s = Arc::new(Served::start(&addr.to_string(), stop.clone()).unwrap());
        let t = call(addr, "GET /clock HTTP/1.1\r\nHost: x\r\n\r\n");
        let ns: u128 = t.rsplit("\r\n\r\n").next().unwrap().parse().unwrap();
        assert!(ns.abs_diff(now_unix_ns()) < 1_000_000_000, "{t}");
        assert!(call(addr, "GET /result HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 202"));
        assert!(call(addr, "POST /done HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 409"));
        // Marks: refused until a load takes them, then each opens a window at its
        // time on this clock, and the answer is the clock on arrival.
        let mark = |k: u64, t: u128| call(addr, &format!("POST /mark/{k}/{t} HTTP/1.1\r\n\r\n"));
        assert!(mark(1, 1).starts_with("HTTP/1.1 409"));
        let marks = Arc::new(engine::windows::Marks::new());
        let clock = results::clock::Clock::start();
        s.take_marks(marks.clone(), clock);
        let at = clock.wall_epoch_ns() + 5_000_000_000;
        let r = mark(1, at);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        let arrived: u128 = r.rsplit("\r\n\r\n").next().unwrap().parse().unwrap();
        assert!(arrived < at && arrived.abs_diff(now_unix_ns()) < 1_000_000_000);
        assert_eq!(marks.len(), 1);
        assert_eq!(marks.window_of(4_999_999_999), 0);
        assert_eq!(marks.window_of(5_000_000_000), 1);
        // A retry of mark 1 that arrives again opens nothing; mark 2 does.
        assert!(mark(1, at).starts_with("HTTP/1.1 200"));
        assert_eq!(marks.len(), 1);
        assert!(mark(2, at + 1).starts_with("HTTP/1.1 200"));
        assert_eq!(marks.len(), 2);
        assert!(call(addr, "POST /mark/3 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(call(addr, "POST /mark/x HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400"));
        call(addr, "POST /stop HTTP/1.1\r\n\r\n");
        assert!(stop.load(Ordering::Relaxed));
        let s2 = s.clone();
        let waiter =
            std::thread::spawn(move || s2.publish_and_wait(b"{\"x\":1}".to_vec(), COLLECT_LIMIT));
        let deadline = Instant::now() + Duration::from_secs(5);
        let r = loop {
            let r = call(addr, "GET /result HTTP/1.1\r\n\r\n");
            if r.starts_with("HTTP/1.1 200") || Instant::now() > deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(r.ends_with("\r\n\r\n{\"x\":1}"), "{r}");
        assert!(call(addr, "POST /done HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
        assert!(waiter.join().unwrap());
    }
}
