//! `--metrics-listen ADDR:PORT`: serves the live metrics of a run ([`live::Live`]) at
//! `GET /metrics` while the load goes on, so a dashboard shows ingressbench's view
//! beside the controller's own metrics.
//!
//! A small HTTP server on a thread of its own ([`generators::endpoint`]): a scrape a second
//! at most reads text that the run renders on demand, so nothing here touches the
//! load's hot path, and a scraper that stalls delays no other. The listener is bound
//! before the load starts (a port in use is bad input, not a failed run) and closed
//! when the [`Server`] is dropped, however the run ends.

use super::usage;
use generators::endpoint::{Body, Endpoint, Limits};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use live::{Format, Live};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// How long one client may take to send its request, and then to read the answer: a
/// stuck client holds its own connection no longer than this.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
const LIMITS: Limits = Limits {
    head: CLIENT_TIMEOUT,
    exchange: CLIENT_TIMEOUT.saturating_mul(2),
    // A scraper's request head is a few hundred bytes.
    max_head: 16 * 1024,
};

/// The metrics endpoint of a run; stops serving and closes its socket when dropped.
pub struct Server {
    endpoint: Endpoint,
}

impl Server {
    /// Binds `addr` (as given: an IP address and a port; `127.0.0.1` keeps the
    /// endpoint on this machine) and serves `live` from a thread of its own.
    ///
    /// # Errors
    /// A usage error naming `--metrics-listen` when the address is not IP:PORT or
    /// cannot be bound (port in use, address not on this machine).
    pub fn start(addr: &str, live: Arc<Live>) -> anyhow::Result<Server> {
        let flag = format!("--metrics-listen {addr}");
        let parsed: SocketAddr = addr.parse().map_err(|_| {
            usage(format!(
                "{flag}: give an IP address and a port, such as 127.0.0.1:9464"
            ))
        })?;
        let listener = TcpListener::bind(parsed).map_err(|e| usage(format!("{flag}: {e}")))?;
        let endpoint = Endpoint::start(listener, "ib-metrics", LIMITS, move |req| {
            answer(req, &live)
        })?;
        Ok(Server { endpoint })
    }

    /// The address bound (the port chosen, when 0 was given).
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr()
    }
}

/// Starts the endpoint when `--metrics-listen` was given and says where it is.
///
/// # Errors
/// As [`Server::start`].
pub fn start(
    addr: Option<&str>,
    live: impl FnOnce() -> Live,
) -> anyhow::Result<Option<(Server, Arc<Live>)>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let live = Arc::new(live());
    let server = Server::start(addr, live.clone())?;
    eprintln!("ingressbench: metrics at http://{}/metrics", server.addr());
    Ok(Some((server, live)))
}

/// A scenario run's live view, as the runner tells it what runs.
pub struct Watch(pub Arc<Live>);

impl scenario::runner::Watch for Watch {
    fn system(&self, name: &str, target: &str, rate: Option<f64>) {
        self.0.system(name, target, rate);
    }
    fn step(&self, index: usize, change: &str) {
        self.0.step(index, change);
    }
    fn second(&self, entry: &results::TimelineEntry) {
        self.0.second(entry);
    }
}

/// The answer to a request: `GET /metrics` (a query string ignored) in the format
/// its `Accept` header asks for; 405 for another method on it, 404 elsewhere.
fn answer(req: &Request<Incoming>, live: &Live) -> Response<Body> {
    let text = |status: StatusCode, body: &'static str| {
        let mut r = Response::new(Body::from(body));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        r
    };
    if req.uri().path() != "/metrics" {
        return text(StatusCode::NOT_FOUND, "not found: try /metrics\n");
    }
    if req.method() != Method::GET {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET /metrics\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let mut r = Response::new(Body::from(live.render(format)));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_metrics_in_the_format_asked_and_nothing_else() {
        let live = Arc::new(Live::load("http://127.0.0.1:1/", Some(10.0)));
        let server = Server::start("127.0.0.1:0", live).unwrap();
        let a = server.addr();
        let plain = get(a, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(plain.starts_with("HTTP/1.1 200 OK\r\n"), "{plain}");
        assert!(plain.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert!(plain.contains("\r\n\r\n# HELP ingressbench_run_info "));
        let open = get(
            a,
            "GET /metrics?x=1 HTTP/1.1\r\naccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
        );
        assert!(
            open.contains(
                "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
            ),
            "{open}"
        );
        assert!(open.ends_with("# EOF\n"));
        assert!(get(a, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        let post = get(a, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("Allow: GET\r\n"));
        // Dropped: the port is free again.
        drop(server);
        assert!(TcpStream::connect(a).is_err(), "still listening on {a}");
        TcpListener::bind(a).unwrap();
    }

    /// Whether the server has closed `conn` (without waiting for it).
    fn closed(conn: &TcpStream) -> bool {
        conn.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let closed =
            !matches!(conn.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        conn.set_nonblocking(false).unwrap();
        closed
    }

    /// A scraper that stalls halfway through its request (a slow link, a stuck
    /// process) must not hold up the others: each connection is served on its own.
    #[test]
    fn a_slow_client_delays_no_other() {
        let live = Arc::new(Live::load("http://127.0.0.1:1/", None));
        let server = Server::start("127.0.0.1:0", live).unwrap();
        let a = server.addr();
        let mut slow = TcpStream::connect(a).unwrap();
        slow.write_all(b"GET /metr").unwrap();
        // Let the server take the slow connection first, as a serial server would.
        std::thread::sleep(Duration::from_millis(100));
        let started = std::time::Instant::now();
        let other = get(a, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(other.starts_with("HTTP/1.1 200 OK\r\n"), "{other}");
        // Answered while the slow one still waits for the rest of its request: a
        // server taking one client at a time answers only once it gave up on it.
        assert!(
            !closed(&slow),
            "the slow client was dropped before the other was answered"
        );
        assert!(
            started.elapsed() < CLIENT_TIMEOUT,
            "{:?}",
            started.elapsed()
        );
        slow.write_all(b"ics HTTP/1.1\r\n\r\n").unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut late = String::new();
        slow.read_to_string(&mut late).unwrap();
        assert!(late.starts_with("HTTP/1.1 200 OK\r\n"), "{late}");
        // A client stalled when the run ends does not keep the endpoint open.
        let mut stalled = TcpStream::connect(a).unwrap();
        stalled.write_all(b"GET /").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(server);
        assert!(TcpStream::connect(a).is_err(), "still listening on {a}");
        assert!(
            closed(&stalled),
            "the stalled connection outlived the server"
        );
    }

    #[test]
    fn a_bad_or_busy_address_is_bad_input() {
        let live = || Arc::new(Live::load("http://127.0.0.1:1/", None));
        let e = Server::start("localhost", live()).err().unwrap();
        assert!(e.downcast_ref::<crate::cli::UsageError>().is_some());
        assert_eq!(
            e.to_string(),
            "--metrics-listen localhost: give an IP address and a port, such as 127.0.0.1:9464"
        );
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let e = Server::start(&addr, live()).err().unwrap();
        assert!(e.downcast_ref::<crate::cli::UsageError>().is_some());
        assert!(
            e.to_string()
                .starts_with(&format!("--metrics-listen {addr}: Address already in use")),
            "{e}"
        );
    }
}
