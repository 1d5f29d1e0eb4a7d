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
//! One connection at a time, each closed after its answer: the coordinator is the only
//! client and sends a handful of requests; during the measured window only a `/clock`
//! from a late probe, a `/stop`, and one `/mark` per change of a scenario run.

use super::now_unix_ns;
use anyhow::Context as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a part keeps its result for a coordinator that does not come; then it
/// exits 1 (the Job's `activeDeadlineSeconds` bounds it in any case).
pub const COLLECT_LIMIT: Duration = Duration::from_secs(300);
/// The longest request head read.
const MAX_HEAD: usize = 8 << 10;

/// What the endpoint serves; shared with its thread.
pub struct Served {
    result: Mutex<Option<Arc<Vec<u8>>>>,
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
    pub fn start(addr: &str, stop: Arc<AtomicBool>) -> anyhow::Result<Arc<Served>> {
        let listener = TcpListener::bind(addr).with_context(|| format!("--serve {addr}"))?;
        let me = Arc::new(Served {
            result: Mutex::new(None),
            done: AtomicBool::new(false),
            stop,
            marks: OnceLock::new(),
            last_mark: Mutex::new(0),
        });
        let s = me.clone();
        std::thread::Builder::new()
            .name("serve".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let _ = s.answer(conn);
                }
            })
            .context("start the result endpoint")?;
        Ok(me)
    }

    /// From now on `/mark` opens windows in `marks`, on `clock`.
    pub fn take_marks(&self, marks: Arc<engine::windows::Marks>, clock: results::clock::Clock) {
        let _ = self.marks.set((marks, clock));
    }

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

    /// Offers the result and waits until it was collected (`true`), a signal arrived
    /// after it was offered, or `limit` passed (`false`).
    pub fn publish_and_wait(&self, result: Vec<u8>, limit: Duration) -> bool {
        let stopped_before = self.stop.load(Ordering::Relaxed);
        *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(result));
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.done.load(Ordering::Relaxed) {
                return true;
            }
            if !stopped_before && self.stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn answer(&self, mut conn: TcpStream) -> std::io::Result<()> {
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        conn.set_write_timeout(Some(Duration::from_secs(60)))?;
        let mut head = Vec::with_capacity(512);
        let mut buf = [0u8; 512];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf)?;
            if n == 0 || head.len() > MAX_HEAD {
                return Ok(());
            }
            head.extend_from_slice(&buf[..n]);
        }
        let line = String::from_utf8_lossy(&head);
        let mut words = line.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let path = path.split('?').next().unwrap_or("");
        let result = self
            .result
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let (status, body): (&str, Arc<Vec<u8>>) = match (method, path) {
            ("GET", "/clock") => ("200 OK", Arc::new(now_unix_ns().to_string().into_bytes())),
            ("GET", "/result") => match result {
                Some(r) => ("200 OK", r),
                None => ("202 Accepted", Arc::new(b"running\n".to_vec())),
            },
            ("POST", "/stop") => {
                self.stop.store(true, Ordering::Relaxed);
                ("200 OK", Arc::new(b"stopping\n".to_vec()))
            }
            ("POST", "/done") if result.is_some() => {
                self.done.store(true, Ordering::Relaxed);
                ("200 OK", Arc::new(b"bye\n".to_vec()))
            }
            ("POST", "/done") => ("409 Conflict", Arc::new(b"no result yet\n".to_vec())),
            ("POST", p) if p.starts_with("/mark/") => {
                let parsed = p["/mark/".len()..]
                    .split_once('/')
                    .and_then(|(k, t)| Some((k.parse::<u64>().ok()?, t.parse::<u128>().ok()?)));
                match parsed.map(|(k, t)| self.mark(k, t)) {
                    Some(Some(now)) => ("200 OK", Arc::new(now.to_string().into_bytes())),
                    Some(None) => (
                        "409 Conflict",
                        Arc::new(b"this load takes no marks\n".to_vec()),
                    ),
                    None => (
                        "400 Bad Request",
                        Arc::new(b"give /mark/NUMBER/UNIX_NS\n".to_vec()),
                    ),
                }
            }
            _ => ("404 Not Found", Arc::new(b"not found\n".to_vec())),
        };
        let content_type = if path == "/result" && status.starts_with("200") {
            "application/json"
        } else {
            "text/plain"
        };
        write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        conn.write_all(&body)?;
        conn.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(addr: std::net::SocketAddr, req: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn the_endpoint_serves_clock_then_result_and_ends_when_collected() {
        let stop = Arc::new(AtomicBool::new(false));
        // Port 0: bind a free port, then find which.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let s = Served::start(&addr.to_string(), stop.clone()).unwrap();
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
