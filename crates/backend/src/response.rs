//! Writing the backend's answers: a fixed-size plain-text body that says who
//! answered, when, and which URI arrived.
//!
//! The body mirrors the "hello" backends of the published ingress studies (server
//! address, name, date, URI, request id) so results stay comparable, and its size is
//! exact so byte counts in a report mean something. Everything that does not change
//! per request (status line, headers, the server lines of the body, the padding) is
//! formatted once; a response is a few `memcpy`s into the connection's output buffer.

use std::cell::Cell;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Path answered `200 healthy` whatever `--status` says, so health checks of the
/// proxy under test keep the backend in rotation during error tests.
pub const HEALTH_PATH: &[u8] = b"/healthz";

/// Interim answer to `Expect: 100-continue`.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Bytes of an RFC 1123 date: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// Padding lines are this long, newline included.
const PAD_LINE: usize = 64;

/// The formatted, immutable parts of every answer; shared by all connections.
#[derive(Debug)]
pub struct Responder {
    id: String,
    status: u16,
    body_size: usize,
    /// Status line through `x-backend`, for the main answer.
    main_head: Box<[u8]>,
    /// Same for `/healthz`.
    health_head: Box<[u8]>,
    /// A whole `400` answer that closes the connection.
    bad_request: Box<[u8]>,
    /// `body_size` bytes of padding whose tail is used; ends with a newline.
    pad: Box<[u8]>,
}

/// What a response needs to know about the request it answers.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// Request target as received.
    pub uri: &'a [u8],
    /// The `HEAD` method: headers only.
    pub head_method: bool,
    /// Answer with `connection: close` (and the caller closes afterwards).
    pub close: bool,
    /// An HTTP/1.0 client that asked for keep-alive, which must be confirmed.
    pub confirm_keep_alive: bool,
    /// The request's number, shown in the body.
    pub request_id: u64,
}

impl Responder {
    /// Formats the fixed parts for server `id` answering `status` with bodies of
    /// exactly `body_size` bytes.
    ///
    /// `id` must be a valid header value (visible ASCII); the caller checks.
    pub fn new(id: &str, status: u16, body_size: usize) -> Responder {
        let head = |status: u16, len: usize| {
            format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: text/plain\r\ncontent-length: {len}\r\nx-backend: {id}\r\n",
                reason(status)
            )
            .into_bytes()
            .into_boxed_slice()
        };
        let bad_body = "bad request\n";
        let mut bad_request = head(400, bad_body.len()).into_vec();
        bad_request.extend_from_slice(b"connection: close\r\n\r\n");
        bad_request.extend_from_slice(bad_body.as_bytes());
        let pad = (0..body_size)
            .map(|i| {
                if (body_size - i) % PAD_LINE == 1 {
                    b'\n'
                } else {
                    b'.'
                }
            })
            .collect();
        Responder {
            id: id.to_string(),
            status,
            body_size,
            main_head: head(status, body_size),
            health_head: head(200, HEALTHY.len()),
            bad_request: bad_request.into_boxed_slice(),
            pad,
        }
    }

    /// The status of the main answer.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The exact size of the main answer's body.
    pub fn body_size(&self) -> usize {
        self.body_size
    }

    /// The server's id as sent in `x-backend`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The first lines of the body for a connection accepted on `local`; built once
    /// per connection and passed back to [`write`](Self::write).
    pub fn conn_prefix(&self, local: SocketAddr) -> Vec<u8> {
        format!("server address: {local}\nserver id: {}\n", self.id).into_bytes()
    }

    /// The whole `400` answer for a request that could not be read.
    pub fn bad_request(&self) -> &[u8] {
        &self.bad_request
    }

    /// Appends the answer to `a` to `out`, dated `date`.
    pub fn write(&self, out: &mut Vec<u8>, conn_prefix: &[u8], date: &[u8; DATE_LEN], a: &Answer) {
        self.write_as(out, conn_prefix, date, a, path_of(a.uri) == HEALTH_PATH);
    }

    /// Appends the main answer to `a`, even for `/healthz`: a flapping backend's
    /// probes fail with the rest ([`crate::flap`]).
    pub fn write_main(
        &self,
        out: &mut Vec<u8>,
        conn_prefix: &[u8],
        date: &[u8; DATE_LEN],
        a: &Answer,
    ) {
        self.write_as(out, conn_prefix, date, a, false);
    }

    fn write_as(
        &self,
        out: &mut Vec<u8>,
        conn_prefix: &[u8],
        date: &[u8; DATE_LEN],
        a: &Answer,
        health: bool,
    ) {
        out.extend_from_slice(if health {
            &self.health_head
        } else {
            &self.main_head
        });
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n");
        if a.close {
            out.extend_from_slice(b"connection: close\r\n");
        } else if a.confirm_keep_alive {
            out.extend_from_slice(b"connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if a.head_method {
            return;
        }
        if health {
            out.extend_from_slice(HEALTHY);
            return;
        }
        let start = out.len();
        out.extend_from_slice(conn_prefix);
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(date);
        out.extend_from_slice(b"\nuri: ");
        out.extend_from_slice(a.uri);
        out.extend_from_slice(b"\nrequest id: ");
        push_u64(out, a.request_id);
        out.push(b'\n');
        let written = out.len() - start;
        if written >= self.body_size {
            // A body smaller than its own lines (or a very long URI) is cut.
            out.truncate(start + self.body_size);
        } else {
            let rest = self.body_size - written;
            out.extend_from_slice(&self.pad[self.pad.len() - rest..]);
        }
    }
}

impl Responder {
    /// Appends the answer to a behaviour probe: `status` with `body` (what was
    /// received, [`crate::probe::body`]), this backend's `x-backend`.
    pub fn write_probe(
        &self,
        out: &mut Vec<u8>,
        date: &[u8; DATE_LEN],
        status: u16,
        body: &str,
        a: &Answer,
    ) {
        out.extend_from_slice(
            format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-backend: {}\r\ndate: ",
                reason(status),
                body.len(),
                self.id
            )
            .as_bytes(),
        );
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n");
        if a.close {
            out.extend_from_slice(b"connection: close\r\n");
        } else if a.confirm_keep_alive {
            out.extend_from_slice(b"connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !a.head_method {
            out.extend_from_slice(body.as_bytes());
        }
    }
}

/// Body of `/healthz`.
const HEALTHY: &[u8] = b"healthy";

/// `uri` without its query.
fn path_of(uri: &[u8]) -> &[u8] {
    let q = uri.iter().position(|&b| b == b'?').unwrap_or(uri.len());
    &uri[..q]
}

/// Appends the decimal digits of `n` without going through `fmt`.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The reason phrase of common status codes; others get a generic one (clients
/// ignore it anyway).
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        418 => "I'm a teapot",
        421 => "Misdirected Request",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Whether `--status` may be used: the answer always has a body, so codes that
/// forbid one (1xx, 204, 304) are refused, as are codes outside 200..=599.
pub fn status_allowed(status: u16) -> bool {
    (200..=599).contains(&status) && status != 204 && status != 304
}

/// Now as an RFC 1123 date, formatted at most once per second per thread.
pub fn now_date() -> [u8; DATE_LEN] {
    thread_local! {
        static CACHE: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
    }
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    CACHE.with(|c| {
        let (at, date) = c.get();
        if at == secs {
            date
        } else {
            let date = http_date(secs);
            c.set((secs, date));
            date
        }
    })
}

/// `secs` since the Unix epoch as an RFC 1123 date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date(secs: u64) -> [u8; DATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let sod = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    let mut d = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    d[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    two(&mut d[5..7], day as u64);
    d[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    let y = year as u64;
    two(&mut d[12..14], y / 100 % 100);
    two(&mut d[14..16], y % 100);
    two(&mut d[17..19], sod / 3600);
    two(&mut d[20..22], sod / 60 % 60);
    two(&mut d[23..25], sod % 60);
    d
}

fn two(dst: &mut [u8], n: u64) {
    dst[0] = b'0' + (n / 10 % 10) as u8;
    dst[1] = b'0' + (n % 10) as u8;
}

/// (year, month 1..=12, day 1..=31) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8; DATE_LEN] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    fn answer(uri: &[u8]) -> Answer<'_> {
        Answer {
            uri,
            head_method: false,
            close: false,
            confirm_keep_alive: false,
            request_id: 42,
        }
    }

    /// Splits a response into (head, body).
    fn split(out: &[u8]) -> (String, Vec<u8>) {
        let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        (
            String::from_utf8(out[..at].to_vec()).unwrap(),
            out[at..].to_vec(),
        )
    }

    #[test]
    fn dates() {
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(784_111_777), DATE);
        assert_eq!(&http_date(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(&http_date(1_709_251_199), b"Thu, 29 Feb 2024 23:59:59 GMT");
        assert_eq!(&http_date(4_102_444_800), b"Fri, 01 Jan 2100 00:00:00 GMT");
        assert_eq!(now_date().len(), DATE_LEN);
    }

    #[test]
    fn body_size_is_exact_for_every_size() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        for size in (0..300).chain([1023, 1024, 1025, 4096, 65_536]) {
            let r = Responder::new("b-1", 200, size);
            let prefix = r.conn_prefix(addr);
            let mut out = Vec::new();
            r.write(&mut out, &prefix, DATE, &answer(b"/some/path?x=1"));
            let (head, body) = split(&out);
            assert_eq!(body.len(), size, "size {size}");
            assert!(
                head.contains(&format!("content-length: {size}\r\n")),
                "{head}"
            );
            if size >= 200 {
                assert_eq!(body.last(), Some(&b'\n'));
            }
        }
    }

    #[test]
    fn body_lines() {
        let r = Responder::new("web-7", 200, 1024);
        let prefix = r.conn_prefix("127.0.0.1:9000".parse().unwrap());
        let mut out = Vec::new();
        r.write(&mut out, &prefix, DATE, &answer(b"/rewritten?a=b"));
        let (head, body) = split(&out);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("\r\ncontent-type: text/plain\r\n"));
        assert!(head.contains("\r\nx-backend: web-7\r\n"));
        assert!(head.contains("\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"));
        assert!(!head.contains("connection"));
        let body = String::from_utf8(body).unwrap();
        let lines: Vec<&str> = body.lines().take(5).collect();
        assert_eq!(
            lines,
            [
                "server address: 127.0.0.1:9000",
                "server id: web-7",
                "date: Sun, 06 Nov 1994 08:49:37 GMT",
                "uri: /rewritten?a=b",
                "request id: 42",
            ]
        );
        assert!(body.lines().skip(5).all(|l| l.bytes().all(|b| b == b'.')));
        assert!(body.lines().all(|l| l.len() < PAD_LINE));
    }

    #[test]
    fn long_uri_is_cut_to_size() {
        let r = Responder::new("b", 200, 100);
        let uri = vec![b'a'; 500];
        let mut out = Vec::new();
        r.write(&mut out, b"", DATE, &answer(&uri));
        assert_eq!(split(&out).1.len(), 100);
    }

    #[test]
    fn status_close_head_and_health() {
        let r = Responder::new("b", 503, 1024);
        let mut out = Vec::new();
        let mut a = answer(b"/x");
        a.close = true;
        r.write(&mut out, b"", DATE, &a);
        let (head, body) = split(&out);
        assert!(head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
        assert!(head.contains("\r\nconnection: close\r\n"));
        assert_eq!(body.len(), 1024);

        out.clear();
        let mut a = answer(b"/healthz?probe=1");
        a.confirm_keep_alive = true;
        r.write(&mut out, b"", DATE, &a);
        let (head, body) = split(&out);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("content-length: 7\r\n"));
        assert!(head.contains("connection: keep-alive\r\n"));
        assert_eq!(body, b"healthy");

        out.clear();
        let mut a = answer(b"/x");
        a.head_method = true;
        r.write(&mut out, b"", DATE, &a);
        let (head, body) = split(&out);
        assert!(head.contains("content-length: 1024\r\n"));
        assert!(body.is_empty());
    }

    #[test]
    fn bad_request_closes() {
        let r = Responder::new("b", 200, 10);
        let (head, body) = split(r.bad_request());
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"));
        assert!(head.contains("connection: close\r\n"));
        assert!(head.contains(&format!("content-length: {}\r\n", body.len())));
    }

    #[test]
    fn numbers_and_statuses() {
        for n in [0u64, 7, 10, 99, 12_345, u64::MAX] {
            let mut v = Vec::new();
            push_u64(&mut v, n);
            assert_eq!(v, n.to_string().into_bytes());
        }
        assert!(status_allowed(200) && status_allowed(503) && status_allowed(599));
        for s in [100, 199, 204, 304, 600, 0] {
            assert!(!status_allowed(s), "{s}");
        }
    }
}
