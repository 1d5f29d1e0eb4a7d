//! A small blocking HTTP/1.1 client for the lab: admin APIs and readiness probes.
//!
//! One request per connection (`Connection: close`), plain TCP, a deadline on the
//! whole exchange. The answer is read with the same framing rules as the engine
//! (lenient: the lab talks to real servers), so a chunked admin reply, a
//! `Content-Length` one and one that runs until close all decode alike. Not for the
//! hot path: it allocates freely.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::chunked::BodyDecoder;
use crate::framing::{self, Framing, Scan, Strictness};
use crate::Error;

/// Largest response body read; more is [`ClientError::TooLarge`].
pub const MAX_BODY: usize = 64 * 1024 * 1024;
/// Largest response head read.
const MAX_HEAD: usize = crate::response::MAX_HEAD;
/// Most header lines in one response head.
const MAX_HEADERS: usize = 64;

/// A whole response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Header lines in order, names as sent, values trimmed (lossy UTF-8).
    pub headers: Vec<(String, String)>,
    /// The decoded body (chunked coding removed).
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Why a request got no response. A message never repeats its cause, which is
/// `source()` (the workspace's rule: the caller prints the chain once).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting, writing or reading failed (refused, reset, timed out).
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The answer is not valid HTTP/1.1.
    #[error("invalid response")]
    Http(#[from] Error),
    /// The body is larger than [`MAX_BODY`].
    #[error("response body larger than {MAX_BODY} bytes")]
    TooLarge,
    /// The method, path or a header cannot be sent as given.
    #[error("invalid request: {0}")]
    Request(String),
}

impl ClientError {
    /// The I/O error kind, if this is one (e.g. to retry a refused connection).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            ClientError::Io(e) => Some(e.kind()),
            _ => None,
        }
    }
}

impl From<ClientError> for io::Error {
    fn from(e: ClientError) -> io::Error {
        match e {
            ClientError::Io(e) => e,
            // An I/O error is printed as a leaf: its text carries the cause.
            ClientError::Http(h) => {
                io::Error::new(io::ErrorKind::InvalidData, format!("invalid response: {h}"))
            }
            other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

/// Sends one request to `addr` on a fresh connection and reads the whole answer,
/// all within `timeout`.
///
/// Adds `Host` (the address) and `User-Agent` unless given, `Connection: close`,
/// and `Content-Length` when there is a body or the method is not `GET`/`HEAD`
/// (servers may refuse a bodiless `POST` without it). Interim 1xx answers are
/// skipped.
///
/// # Errors
/// [`ClientError`]: I/O (including the timeout), a malformed answer, or a request
/// that cannot be encoded.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, ClientError> {
    let msg = encode(addr, method, path, headers, body)?;
    let until = Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(remaining(until)?))?;
    s.write_all(&msg)?;
    read_response(
        &mut Deadline { s: &s, until },
        method.eq_ignore_ascii_case("HEAD"),
    )
}

/// Parses a whole answer already read (until the server closed).
///
/// # Errors
/// [`ClientError::Http`] when it is malformed or cut short.
pub fn parse(raw: &[u8], head_request: bool) -> Result<Response, ClientError> {
    read_response(&mut &raw[..], head_request)
}

fn encode(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<u8>, ClientError> {
    let bad = |what: String| Err(ClientError::Request(what));
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return bad(format!("method '{method}' is not an HTTP method"));
    }
    if !path.starts_with('/') && path != "*"
        || path.contains(|c: char| c.is_whitespace() || c.is_control())
    {
        return bad(format!(
            "path '{path}' must start with '/' and have no spaces"
        ));
    }
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    let has = |name: &str| {
        headers
            .iter()
            .any(|(n, _)| n.trim().eq_ignore_ascii_case(name))
    };
    if !has("host") {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    if !has("user-agent") {
        head.push_str(&format!("User-Agent: {}\r\n", crate::target::USER_AGENT));
    }
    for (name, value) in headers {
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return bad(format!("header name '{name}' is invalid"));
        }
        if value.contains(['\r', '\n']) {
            return bad(format!("header '{name}' contains a line break"));
        }
        if name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("transfer-encoding")
        {
            return bad(format!("header '{name}' is set by the client"));
        }
        if name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        head.push_str(&format!("{name}: {}\r\n", value.trim()));
    }
    let bodiless = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    if !body.is_empty() || !bodiless {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut msg = head.into_bytes();
    msg.extend_from_slice(body);
    Ok(msg)
}

/// Reads one response, skipping interim ones; bytes after it are ignored (the
/// connection is closed anyway).
fn read_response(r: &mut impl Read, head_request: bool) -> Result<Response, ClientError> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 16 * 1024];
    let (status, headers, framing, head_len) = loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut slots);
        let parsed = httparse::ParserConfig::default()
            .allow_obsolete_multiline_headers_in_responses(true)
            .parse_response(&mut resp, &buf);
        match parsed {
            Ok(httparse::Status::Complete(n)) => {
                let code = resp.code.unwrap_or(0);
                let scan =
                    Scan::headers(resp.version.unwrap_or(1), resp.headers, Strictness::Lenient)?;
                if code == 101 {
                    return Err(Error::Upgrade.into());
                }
                if (100..200).contains(&code) {
                    buf.drain(..n);
                    continue;
                }
                let framing = framing::response(code, head_request, &scan, Strictness::Lenient)?;
                let headers = resp
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value.trim_ascii()).into_owned(),
                        )
                    })
                    .collect();
                break (code, headers, framing, n);
            }
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                return Err(Error::HeadTooLarge.into())
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(Error::Head(e).into()),
        }
        let n = read_some(r, &mut chunk)?;
        if n == 0 {
            return Err(Error::Truncated.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut body = Vec::new();
    let mut decoder = BodyDecoder::new(framing, Strictness::Lenient);
    let mut done = framing == Framing::None
        || decoder
            .feed(&buf[head_len..], |d| body.extend_from_slice(d))?
            .done;
    while !done {
        if body.len() > MAX_BODY {
            return Err(ClientError::TooLarge);
        }
        let n = read_some(r, &mut chunk)?;
        if n == 0 {
            if decoder.until_close() {
                break;
            }
            return Err(Error::Truncated.into());
        }
        done = decoder
            .feed(&chunk[..n], |d| body.extend_from_slice(d))?
            .done;
    }
    if body.len() > MAX_BODY {
        return Err(ClientError::TooLarge);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// One read, retried when interrupted.
fn read_some(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Time left before `until`, or a timeout error.
fn remaining(until: Instant) -> io::Result<Duration> {
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "http request timed out",
        ));
    }
    Ok(left)
}

/// A socket whose every read ends by one deadline, so a server that trickles bytes
/// cannot hold the caller past its timeout.
struct Deadline<'a> {
    s: &'a TcpStream,
    until: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.set_read_timeout(Some(remaining(self.until)?))?;
        self.s.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn replies_are_parsed_with_any_framing() {
        let r = parse(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
            false,
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
        let r = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: ETag\r\n\r\n\
              3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\nETag: x\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(r.body, b"{\"a\":1}");
        assert_eq!(r.header("trailer"), Some("ETag"));
        let r = parse(b"HTTP/1.1 400 Bad Request\r\n\r\n{\"error\":\"x\"}", false).unwrap();
        assert_eq!((r.status, r.text().as_str()), (400, "{\"error\":\"x\"}"));
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Le", false).is_err());
        assert!(matches!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok", false),
            Err(ClientError::Http(Error::Truncated))
        ));
        let r = parse(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
            true,
        )
        .unwrap();
        assert_eq!((r.status, r.body.len()), (200, 0));
    }

    #[test]
    fn requests_are_encoded_with_length_host_and_close() {
        let addr: SocketAddr = "127.0.0.1:2019".parse().unwrap();
        let m = encode(addr, "POST", "/stop", &[], b"").unwrap();
        let m = String::from_utf8(m).unwrap();
        assert!(
            m.starts_with("POST /stop HTTP/1.1\r\nHost: 127.0.0.1:2019\r\n"),
            "{m}"
        );
        assert!(
            m.ends_with("Content-Length: 0\r\nConnection: close\r\n\r\n"),
            "{m}"
        );
        let m = encode(
            addr,
            "GET",
            "/x",
            &[("Host", "h"), ("Content-Type", "application/json")],
            b"",
        )
        .unwrap();
        let m = String::from_utf8(m).unwrap();
        assert!(m.contains("Host: h\r\n") && !m.contains("2019") && !m.contains("Content-Length"));
        assert!(encode(addr, "G T", "/", &[], b"").is_err());
        assert!(encode(addr, "GET", "no-slash", &[], b"").is_err());
        assert!(encode(addr, "GET", "/", &[("X", "a\r\nB: c")], b"").is_err());
    }

    /// A one-shot server: reads one request head (and `Content-Length` body), sends
    /// `reply` in small pieces, closes. Returns what it read.
    fn serve(reply: &'static [u8]) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut got = Vec::new();
            let mut r = crate::RequestReader::new();
            let mut buf = [0u8; 512];
            loop {
                let n = s.read(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
                if n == 0 || r.feed(&got).unwrap().complete {
                    break;
                }
            }
            for piece in reply.chunks(7) {
                s.write_all(piece).unwrap();
                s.flush().unwrap();
            }
            got
        });
        (addr, h)
    }

    #[test]
    fn round_trip_over_tcp() {
        let (addr, h) = serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n");
        let r = request(
            addr,
            "PATCH",
            "/config/x",
            &[("Content-Type", "application/json")],
            b"[1]",
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{\"a\":1}"[..]));
        let sent = String::from_utf8(h.join().unwrap()).unwrap();
        assert!(sent.starts_with("PATCH /config/x HTTP/1.1\r\n"), "{sent}");
        assert!(
            sent.ends_with("Content-Length: 3\r\nConnection: close\r\n\r\n[1]"),
            "{sent}"
        );

        let (addr, h) = serve(b"HTTP/1.0 503 Service Unavailable\r\n\r\nno endpoints");
        let r = request(addr, "GET", "/healthz", &[], b"", Duration::from_secs(5)).unwrap();
        assert_eq!((r.status, r.text().as_str()), (503, "no endpoints"));
        h.join().unwrap();
    }

    #[test]
    fn refused_and_silent_servers_are_io_errors() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = request(addr, "GET", "/", &[], b"", Duration::from_secs(2)).unwrap_err();
        assert_eq!(e.io_kind(), Some(io::ErrorKind::ConnectionRefused));

        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = Instant::now();
        let e = request(addr, "GET", "/", &[], b"", Duration::from_millis(200)).unwrap_err();
        assert!(
            matches!(
                e.io_kind(),
                Some(io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
            ),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(2));
        let io: io::Error = e.into();
        assert!(matches!(
            io.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
        drop(l);
    }
}
