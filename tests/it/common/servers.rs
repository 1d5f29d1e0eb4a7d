//! Small servers on 127.0.0.1:0, each made to cause exactly one error kind in a client.
//!
//! They are plain std threads: an accept loop polling a stop flag, one thread per
//! connection reading with short timeouts so it notices the flag too. Dropping the
//! [`TestServer`] stops them all within about 50 ms.

use socket2::{Domain, SockRef, Socket, Type};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How often blocked server threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// A server running on background threads until dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    /// Sockets that must stay open as long as the server lives (see [`accept_queue_full`]).
    held: Vec<Box<dyn Send>>,
}

impl TestServer {
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}/", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Runs `handler` on a thread for each accepted connection.
fn serve<F>(listener: TcpListener, handler: F) -> TestServer
where
    F: Fn(TcpStream, &AtomicBool) + Send + Sync + 'static,
{
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    listener.set_nonblocking(true).unwrap();
    let flag = stop.clone();
    let handler = Arc::new(handler);
    let accept = thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(POLL)).unwrap();
                    let (flag, handler) = (flag.clone(), handler.clone());
                    thread::spawn(move || handler(s, &flag));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(2))
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Transient (EMFILE, ECONNABORTED): keep serving.
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    TestServer {
        addr,
        stop,
        accept: Some(accept),
        held: Vec::new(),
    }
}

fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0")
}

/// Reads into `buf` until it holds a request head (`\r\n\r\n`) and removes that head.
/// `false` on EOF, a socket error or stop. Request bodies are not expected.
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>, stop: &AtomicBool) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..i + 4);
            return true;
        }
        match read_some(s, &mut chunk, stop) {
            Some(n) => buf.extend_from_slice(&chunk[..n]),
            None => return false,
        }
    }
}

/// One read of at least one byte, retried across timeouts; `None` on EOF, error or stop.
fn read_some(s: &mut TcpStream, chunk: &mut [u8], stop: &AtomicBool) -> Option<usize> {
    loop {
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        match s.read(chunk) {
            Ok(0) => return None,
            Ok(n) => return Some(n),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return None,
        }
    }
}

/// Reads and discards until EOF, an error, stop, or `limit`.
fn drain_until_eof(s: &mut TcpStream, stop: &AtomicBool, limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut chunk = [0u8; 16 * 1024];
    while Instant::now() < deadline {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// `connect`: an address where nothing listens, so connecting is refused. The port was
/// bound a moment ago and released; nothing else in the tests binds fixed ports.
pub fn refused() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], super::free_port()))
}

/// A listener with backlog 0 that never accepts: its accept queue holds one
/// connection, and once that is taken new connections hang in the handshake until the
/// client's connect timeout.
pub fn never_accepts() -> TestServer {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    sock.listen(0).unwrap();
    let addr = sock.local_addr().unwrap().as_socket().unwrap();
    TestServer {
        addr,
        stop: Arc::new(AtomicBool::new(false)),
        accept: None,
        held: vec![Box::new(sock)],
    }
}

/// `connect_timeout`: [`never_accepts`] with its accept queue already full with our
/// own connection. Linux then drops every new SYN (it does not refuse it), so the
/// client's connect hangs until its own timeout; use a connect timeout well under the
/// 1 s SYN retransmission, e.g. 200 ms.
pub fn accept_queue_full() -> TestServer {
    let mut server = never_accepts();
    let addr = server.addr;
    // With backlog 0 the queue holds one connection; a second attempt confirms it is
    // full (its SYN is dropped and it times out), and fills it should the kernel allow two.
    for _ in 0..2 {
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
            server.held.push(Box::new(s));
        }
    }
    assert!(
        server.held.len() >= 2,
        "could not fill the accept queue of {addr}"
    );
    server
}

/// `tls`: a plain-text HTTP server; a TLS client gets an HTTP answer to its ClientHello.
pub fn plain_http_for_tls() -> TestServer {
    serve(bind(), |mut s, stop| {
        let mut chunk = [0u8; 16 * 1024];
        if read_some(&mut s, &mut chunk, stop).is_none() {
            return;
        }
        let _ = s.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\nConnection: close\r\n\r\nBad Request",
        );
        // Half-close and wait for the client to go: closing with its bytes unread would
        // send a RST that could overtake our answer.
        let _ = s.shutdown(Shutdown::Write);
        drain_until_eof(&mut s, stop, Duration::from_secs(2));
    })
}

/// `read`: reads the request and closes the connection without a byte of answer.
pub fn close_after_request() -> TestServer {
    serve(bind(), |mut s, stop| {
        let mut buf = Vec::new();
        if read_head(&mut s, &mut buf, stop) {
            let _ = s.shutdown(Shutdown::Both);
        }
    })
}

/// `read`: answers every request with bytes that are not HTTP (`XYZ\r\n\r\n`).
pub fn garbage_answer() -> TestServer {
    serve(bind(), |mut s, stop| {
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf, stop) {
            if s.write_all(b"XYZ\r\n\r\n").is_err() {
                return;
            }
        }
    })
}

/// `write`: accepts, never reads, and after 100 ms resets the connection (SO_LINGER 0).
/// A client sending a large body (4 MB) is still writing then: the receive buffer is
/// kept small so the body cannot all fit into kernel buffers first.
pub fn reset_while_receiving() -> TestServer {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    // Set before listen: accepted sockets inherit it, and it caps the advertised window.
    sock.set_recv_buffer_size(4096).unwrap();
    sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    sock.listen(128).unwrap();
    serve(sock.into(), |s, stop| {
        let deadline = Instant::now() + Duration::from_millis(100);
        while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(5));
        }
        let _ = SockRef::from(&s).set_linger(Some(Duration::ZERO));
        drop(s);
    })
}

/// `read` or `write`: reads a little of the request (up to 50 ms), then resets the
/// connection (RST), so that it fails while the client is still writing or waiting.
pub fn reset_after_first_read() -> TestServer {
    serve(bind(), |mut s, _| {
        let _ = s.read(&mut [0u8; 512]);
        let _ = SockRef::from(&s).set_linger(Some(Duration::ZERO));
        drop(s);
    })
}

/// `timeout`: reads requests and never answers, keeping the connection open.
pub fn never_answers() -> TestServer {
    serve(bind(), |mut s, stop| {
        drain_until_eof(&mut s, stop, Duration::from_secs(3600));
    })
}

/// `status`: answers every request `503 Service Unavailable`, empty body, keep-alive.
pub fn always_503() -> TestServer {
    serve(bind(), |mut s, stop| {
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf, stop) {
            if s.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                .is_err()
            {
                return;
            }
        }
    })
}

/// No error at all, if the client watches its idle connections: answers one request
/// per connection with a complete `200` (a `Content-Length`, no `Connection: close`)
/// and closes, as a proxy closes its idle keep-alive connections on a reload. `half`:
/// closes only its sending side and keeps reading, so a request written on the
/// connection is never answered (it times out).
pub fn answer_once_then_close(half: bool) -> TestServer {
    fn answer(s: &mut TcpStream, stop: &AtomicBool) -> bool {
        let mut buf = Vec::new();
        read_head(s, &mut buf, stop)
            && s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_ok()
    }
    if half {
        serve(bind(), |mut s, stop| {
            if answer(&mut s, stop) {
                let _ = s.shutdown(Shutdown::Write);
                drain_until_eof(&mut s, stop, Duration::from_secs(5));
            }
        })
    } else {
        serve(bind(), |mut s, stop| {
            if answer(&mut s, stop) {
                let _ = s.shutdown(Shutdown::Both);
            }
        })
    }
}

/// Answers every request with `head` (a whole response) followed by `extra`, written
/// `gap` later (`Duration::ZERO`: in the same write), keep-alive.
fn answer_with_extra(head: &'static [u8], extra: &'static [u8], gap: Duration) -> TestServer {
    serve(bind(), move |mut s, stop| {
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf, stop) {
            let mut out = head.to_vec();
            if gap.is_zero() {
                out.extend_from_slice(extra);
            }
            if s.write_all(&out).is_err() {
                return;
            }
            if !gap.is_zero() {
                thread::sleep(gap);
                if s.write_all(extra).is_err() {
                    return;
                }
            }
        }
    })
}

/// `framing`: a `204` followed, in the same write, by a body it must not have.
pub fn body_after_204() -> TestServer {
    answer_with_extra(b"HTTP/1.1 204 No Content\r\n\r\n", b"hello", Duration::ZERO)
}

/// `framing`: a complete `200` (2 bytes, as its `Content-Length` says), then 5 more
/// bytes 10 ms later, when the client's connection is idle.
pub fn bytes_after_response_later() -> TestServer {
    answer_with_extra(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"extra",
        Duration::from_millis(10),
    )
}

/// `framing`: as [`bytes_after_response_later`], after a complete `503`.
pub fn bytes_after_error_response_later() -> TestServer {
    answer_with_extra(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\nno",
        b"extra",
        Duration::from_millis(10),
    )
}

/// No error, one framing warning per response: a `200` with both `Content-Length`
/// and `Transfer-Encoding: chunked` (decoded by the chunked coding, which is
/// complete), keep-alive as far as the server is concerned.
pub fn length_and_chunked() -> TestServer {
    answer_with_extra(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        b"",
        Duration::ZERO,
    )
}
