//! `--metrics-listen ADDR:PORT`: serves the live metrics of a run ([`live::Live`]) at
//! `GET /metrics` while the load goes on, so a dashboard shows ingressbench's view
//! beside the controller's own metrics.
//!
//! One thread and a plain TCP listener: a scrape a second at most reads text that
//! the run renders on demand, so nothing here touches the load's hot path. The
//! listener is bound before the load starts (a port in use is bad input, not a
//! failed run) and closed when the [`Server`] is dropped, however the run ends.

use super::usage;
use live::{Format, Live};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest request head read; a scraper's is a few hundred bytes.
const MAX_HEAD: usize = 16 * 1024;
/// How long one client may take to send its request or read the answer: a stuck
/// client holds the (only) serving thread no longer than this.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the idle listener looks at its stop flag.
const POLL: Duration = Duration::from_millis(20);

/// The metrics endpoint of a run; stops serving and closes its socket when dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
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
        let bound = listener.local_addr()?;
        // Non-blocking, so the thread sees its stop flag without a connection.
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ib-metrics".into())
            .spawn(move || serve(&listener, &live, &s))?;
        Ok(Server {
            addr: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// The address bound (the port chosen, when 0 was given).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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

fn serve(listener: &TcpListener, live: &Live, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                // One client at a time: a scraper's request is small and answered
                // at once; a failed exchange concerns only that client.
                let _ = answer(conn, live);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Reads one request and answers it, then closes the connection.
fn answer(mut conn: TcpStream, live: &Live) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    conn.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return respond(
                &mut conn,
                "431 Request Header Fields Too Large",
                "text/plain",
                "request head too large\n",
            );
        }
    }
    let head = String::from_utf8_lossy(&head);
    let (status, content_type, body) = route(&head, live);
    respond(&mut conn, status, content_type, &body)
}

/// The answer to a request head: `GET /metrics` (a query string ignored) in the
/// format its `Accept` header asks for; 405 for another method on it, 404 elsewhere.
fn route(head: &str, live: &Live) -> (&'static str, &'static str, String) {
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics\n".into(),
        );
    }
    if method != "GET" {
        return (
            "405 Method Not Allowed",
            "text/plain",
            "only GET /metrics\n".into(),
        );
    }
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.trim());
    let format = Format::negotiate(accept);
    ("200 OK", format.content_type(), live.render(format))
}

fn respond(
    conn: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let allow = if status.starts_with("405") {
        "Allow: GET\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

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
