//! Reading HTTP/1.1 requests off a byte stream: heads with `httparse`, bodies framed
//! by `Content-Length` or chunked encoding, read and thrown away.
//!
//! The backend never looks at a body, but it must find where each request ends so
//! that keep-alive and pipelining work and a proxy's request cannot bleed into the
//! next one. This module is pure (bytes in, progress out) so split reads, pipelines
//! and chunk boundaries are unit-tested without sockets. Lengths are parsed strictly
//! (one value, digits only; never both framings) — the same rules a proxy in front
//! must follow to avoid request smuggling, so a sloppy proxy shows up as a `400`.

/// Longest request head accepted, in bytes; also the size a connection's read
/// buffer may grow to.
pub const MAX_HEAD: usize = 16 * 1024;

/// Most header lines in one request.
const MAX_HEADERS: usize = 64;

/// Why a request could not be read; the connection answers `400` and closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The head is not HTTP/1.x as `httparse` understands it.
    #[error("malformed request head: {0}")]
    Head(httparse::Error),
    /// The head did not end within [`MAX_HEAD`] bytes.
    #[error("request head longer than {MAX_HEAD} bytes")]
    HeadTooLarge,
    /// `Content-Length` is not a number, or two of them differ.
    #[error("invalid content-length")]
    ContentLength,
    /// `Transfer-Encoding` whose last coding is not `chunked`.
    #[error("unsupported transfer-encoding (only chunked is understood)")]
    TransferEncoding,
    /// Both `Content-Length` and `Transfer-Encoding`: ambiguous framing.
    #[error("both content-length and transfer-encoding")]
    AmbiguousLength,
    /// A chunked body that breaks the chunk grammar.
    #[error("malformed chunked body")]
    Chunk,
}

/// What one call to [`RequestReader::feed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feed {
    /// Bytes of the input that belong to the current request and may be dropped.
    pub consumed: usize,
    /// The current request, head and body, has been read in full.
    pub complete: bool,
}

/// Reads one request after another from a connection's bytes.
///
/// Call [`feed`](Self::feed) with the unread bytes; drop the `consumed` ones; when
/// `complete`, the head's facts ([`uri`](Self::uri), [`keep_alive`](Self::keep_alive),
/// ...) describe the request just finished until the next `feed`. The URI is copied
/// into a buffer owned by the reader and reused, so steady state allocates nothing.
#[derive(Debug)]
pub struct RequestReader {
    state: State,
    uri: Vec<u8>,
    keep_alive: bool,
    http10: bool,
    head_method: bool,
    continue_pending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for (the rest of) a request head.
    Head,
    /// This many body bytes still to skip.
    Length(u64),
    /// Inside a chunked body.
    Chunked(Chunk),
}

/// Position in the chunked-body grammar (RFC 9112 section 7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex chunk size; `digits` seen so far.
    Size { size: u64, digits: u8 },
    /// Skipping a chunk extension (or whitespace) up to CR.
    Ext { size: u64 },
    /// Saw CR after the size line; LF must follow.
    SizeLf { size: u64 },
    /// Skipping chunk data.
    Data { left: u64 },
    /// CR after the data.
    DataCr,
    /// LF after the data.
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerStart,
    /// Inside a trailer line, skipping up to CR.
    TrailerLine,
    /// LF ending a trailer line.
    TrailerLf,
    /// LF of the final CRLF.
    FinalLf,
}

impl Default for RequestReader {
    fn default() -> Self {
        RequestReader::new()
    }
}

impl RequestReader {
    /// A reader waiting for a connection's first request.
    pub fn new() -> RequestReader {
        RequestReader {
            state: State::Head,
            uri: Vec::with_capacity(128),
            keep_alive: true,
            http10: false,
            head_method: false,
            continue_pending: false,
        }
    }

    /// Reads as much of the current request from `buf` as is there.
    ///
    /// Stops at the end of the request: bytes of a pipelined next request are not
    /// consumed. When a head is incomplete nothing is consumed; call again with the
    /// same bytes and more appended.
    ///
    /// # Errors
    /// [`HttpError`] when the bytes cannot be a valid request; the reader is then
    /// unusable and the connection should be answered `400` and closed.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Feed, HttpError> {
        let mut pos = 0;
        if self.state == State::Head {
            match self.parse_head(buf)? {
                None => {
                    return Ok(Feed {
                        consumed: 0,
                        complete: false,
                    })
                }
                Some(n) => pos = n,
            }
        }
        let complete = match &mut self.state {
            State::Head => true,
            State::Length(left) => {
                let take = (*left).min((buf.len() - pos) as u64);
                pos += take as usize;
                *left -= take;
                *left == 0
            }
            State::Chunked(chunk) => {
                let (n, done) = chunk.feed(&buf[pos..])?;
                pos += n;
                done
            }
        };
        if complete {
            self.state = State::Head;
        }
        Ok(Feed {
            consumed: pos,
            complete,
        })
    }

    /// True between requests: no part of a request has been consumed.
    ///
    /// A connection that is idle here (and has no unread bytes) can be closed by a
    /// draining server without cutting a request in half.
    pub fn between_requests(&self) -> bool {
        self.state == State::Head
    }

    /// The request target of the last head read, as sent (`/path?query`).
    pub fn uri(&self) -> &[u8] {
        &self.uri
    }

    /// The path part of [`uri`](Self::uri), without the query.
    pub fn path(&self) -> &[u8] {
        let q = self
            .uri
            .iter()
            .position(|&b| b == b'?')
            .unwrap_or(self.uri.len());
        &self.uri[..q]
    }

    /// Whether the client lets the connection stay open after this request:
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// The request was HTTP/1.0 (its keep-alive must be confirmed in the answer).
    pub fn http10(&self) -> bool {
        self.http10
    }

    /// The request method was `HEAD`: answer with headers only.
    pub fn head_method(&self) -> bool {
        self.head_method
    }

    /// True once per head that asked `Expect: 100-continue` and announced a body;
    /// the caller then sends `100 Continue` so the client sends that body.
    pub fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_pending)
    }

    /// Parses a head at the start of `buf`; `Ok(None)` when it is not all there.
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<usize>, HttpError> {
        if buf.is_empty() {
            return Ok(None);
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                return Err(HttpError::HeadTooLarge)
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(HttpError::Head(e)),
        };
        let http10 = req.version == Some(0);
        let (mut close, mut keep) = (false, false);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut has_te = false;
        let mut expect = false;
        for h in req.headers.iter() {
            let name = h.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                let v = parse_length(h.value).ok_or(HttpError::ContentLength)?;
                if length.is_some_and(|l| l != v) {
                    return Err(HttpError::ContentLength);
                }
                length = Some(v);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                has_te = true;
                let last = h.value.rsplit(|&b| b == b',').next().unwrap_or_default();
                chunked = trim(last).eq_ignore_ascii_case(b"chunked");
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in h.value.split(|&b| b == b',').map(trim) {
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case(b"expect") {
                expect = trim(h.value).eq_ignore_ascii_case(b"100-continue");
            }
        }
        if has_te && !chunked {
            return Err(HttpError::TransferEncoding);
        }
        if has_te && length.is_some() {
            return Err(HttpError::AmbiguousLength);
        }
        self.uri.clear();
        self.uri
            .extend_from_slice(req.path.unwrap_or_default().as_bytes());
        self.http10 = http10;
        self.keep_alive = !close && (!http10 || keep);
        self.head_method = req.method == Some("HEAD");
        self.state = if chunked {
            State::Chunked(Chunk::Size { size: 0, digits: 0 })
        } else {
            match length {
                Some(l) if l > 0 => State::Length(l),
                _ => State::Head,
            }
        };
        self.continue_pending = expect && !http10 && self.state != State::Head;
        Ok(Some(n))
    }
}

impl Chunk {
    /// Advances through `buf`; returns the bytes used and whether the body ended.
    /// Stops right after the final CRLF so a pipelined request is left untouched.
    fn feed(&mut self, buf: &[u8]) -> Result<(usize, bool), HttpError> {
        let mut i = 0;
        while i < buf.len() {
            if let Chunk::Data { left } = self {
                let take = (*left).min((buf.len() - i) as u64);
                i += take as usize;
                *left -= take;
                if *left == 0 {
                    *self = Chunk::DataCr;
                }
                continue;
            }
            let b = buf[i];
            i += 1;
            *self = match (*self, b) {
                (Chunk::Size { size, digits }, _) if b.is_ascii_hexdigit() => {
                    // 15 hex digits cannot overflow a u64.
                    if digits >= 15 {
                        return Err(HttpError::Chunk);
                    }
                    let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                    Chunk::Size {
                        size: size * 16 + d,
                        digits: digits + 1,
                    }
                }
                (Chunk::Size { size, digits }, b';' | b' ' | b'\t') if digits > 0 => {
                    Chunk::Ext { size }
                }
                (Chunk::Size { size, digits }, b'\r') if digits > 0 => Chunk::SizeLf { size },
                (Chunk::Ext { size }, b'\r') => Chunk::SizeLf { size },
                // A bare LF where CRLF is required: lenient line ends are a known
                // smuggling vector, so they are refused.
                (Chunk::Ext { .. }, b'\n') => return Err(HttpError::Chunk),
                (Chunk::Ext { size }, _) => Chunk::Ext { size },
                (Chunk::SizeLf { size: 0 }, b'\n') => Chunk::TrailerStart,
                (Chunk::SizeLf { size }, b'\n') => Chunk::Data { left: size },
                (Chunk::DataCr, b'\r') => Chunk::DataLf,
                (Chunk::DataLf, b'\n') => Chunk::Size { size: 0, digits: 0 },
                (Chunk::TrailerStart, b'\r') => Chunk::FinalLf,
                (Chunk::TrailerLine, b'\r') => Chunk::TrailerLf,
                (Chunk::TrailerStart | Chunk::TrailerLine, b'\n') => return Err(HttpError::Chunk),
                (Chunk::TrailerStart | Chunk::TrailerLine, _) => Chunk::TrailerLine,
                (Chunk::TrailerLf, b'\n') => Chunk::TrailerStart,
                (Chunk::FinalLf, b'\n') => {
                    *self = Chunk::Size { size: 0, digits: 0 };
                    return Ok((i, true));
                }
                _ => return Err(HttpError::Chunk),
            };
        }
        Ok((i, false))
    }
}

/// A `Content-Length` value: ASCII digits only, surrounding whitespace allowed.
fn parse_length(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// `v` without leading and trailing spaces and tabs.
fn trim(v: &[u8]) -> &[u8] {
    let is_ws = |b: &u8| *b == b' ' || *b == b'\t';
    let start = v.iter().position(|b| !is_ws(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !is_ws(b)).map_or(start, |e| e + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes, the way reads arrive, and returns
    /// the URIs of the requests completed, in order.
    fn read_all(input: &[u8], step: usize) -> Result<Vec<String>, HttpError> {
        let mut r = RequestReader::new();
        let mut buf = Vec::new();
        let mut done = Vec::new();
        for piece in input.chunks(step) {
            buf.extend_from_slice(piece);
            loop {
                let f = r.feed(&buf)?;
                buf.drain(..f.consumed);
                if !f.complete {
                    break;
                }
                done.push(String::from_utf8(r.uri().to_vec()).unwrap());
            }
        }
        assert!(
            buf.is_empty(),
            "left over: {:?}",
            String::from_utf8_lossy(&buf)
        );
        Ok(done)
    }

    const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";

    #[test]
    fn one_get() {
        let mut r = RequestReader::new();
        let f = r.feed(GET).unwrap();
        assert_eq!(
            f,
            Feed {
                consumed: GET.len(),
                complete: true
            }
        );
        assert_eq!(r.uri(), b"/a");
        assert!(r.keep_alive());
        assert!(!r.head_method());
        assert!(r.between_requests());
    }

    #[test]
    fn split_reads_at_every_size() {
        let mut input = Vec::new();
        input.extend_from_slice(GET);
        input.extend_from_slice(b"POST /b?q=1 HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world");
        input.extend_from_slice(
            b"PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n",
        );
        input.extend_from_slice(b"GET /d HTTP/1.1\r\n\r\n");
        for step in 1..=input.len() {
            assert_eq!(
                read_all(&input, step).unwrap(),
                ["/a", "/b?q=1", "/c", "/d"],
                "step {step}"
            );
        }
    }

    #[test]
    fn pipelined_requests_stop_at_each_boundary() {
        let two = [GET, b"GET /second HTTP/1.1\r\n\r\n"].concat();
        let mut r = RequestReader::new();
        let f = r.feed(&two).unwrap();
        assert_eq!(f.consumed, GET.len());
        assert!(f.complete);
        let f = r.feed(&two[GET.len()..]).unwrap();
        assert!(f.complete);
        assert_eq!(r.uri(), b"/second");
    }

    #[test]
    fn body_is_skipped_across_reads() {
        let mut r = RequestReader::new();
        let head = b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
        let f = r.feed(head).unwrap();
        assert_eq!(f.consumed, head.len());
        assert!(!f.complete);
        assert!(!r.between_requests());
        assert_eq!(
            r.feed(b"0123").unwrap(),
            Feed {
                consumed: 4,
                complete: false
            }
        );
        // The rest of the body, then a pipelined request that must stay unread.
        let f = r.feed(b"456789GET").unwrap();
        assert_eq!(
            f,
            Feed {
                consumed: 6,
                complete: true
            }
        );
    }

    #[test]
    fn chunked_with_trailers_and_no_trailers() {
        let plain = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        assert_eq!(read_all(plain, 1000).unwrap(), ["/"]);
        let te_list = b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(read_all(te_list, 3).unwrap(), ["/"]);
    }

    #[test]
    fn connection_semantics() {
        let mut r = RequestReader::new();
        r.feed(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n")
            .unwrap();
        assert!(!r.keep_alive());
        r.feed(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!r.keep_alive());
        assert!(r.http10());
        r.feed(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        assert!(r.keep_alive());
        r.feed(b"HEAD /x?y HTTP/1.1\r\nConnection: upgrade, keep-alive\r\n\r\n")
            .unwrap();
        assert!(r.keep_alive());
        assert!(r.head_method());
        assert_eq!(r.path(), b"/x");
    }

    #[test]
    fn expect_continue_only_with_a_body() {
        let mut r = RequestReader::new();
        r.feed(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
            .unwrap();
        assert!(r.take_continue());
        assert!(!r.take_continue());
        r.feed(b"abc").unwrap();
        r.feed(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n")
            .unwrap();
        assert!(!r.take_continue());
    }

    #[test]
    fn malformed_requests_are_errors() {
        let cases: &[(&[u8], HttpError)] = &[
            (b"GARBAGE\r\n\r\n", HttpError::Head(httparse::Error::Token)),
            (
                b"GET / HTTP/2.0\r\n\r\n",
                HttpError::Head(httparse::Error::Version),
            ),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
                HttpError::ContentLength,
            ),
            (
                b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                HttpError::ContentLength,
            ),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                HttpError::ContentLength,
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                HttpError::TransferEncoding,
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                HttpError::AmbiguousLength,
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                HttpError::Chunk,
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n",
                HttpError::Chunk,
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX",
                HttpError::Chunk,
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
                HttpError::Chunk,
            ),
            (
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
                HttpError::Chunk,
            ),
        ];
        for (input, want) in cases {
            let got = read_all(input, input.len()).unwrap_err();
            assert_eq!(&got, want, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn duplicate_equal_lengths_are_fine() {
        let r = read_all(
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length:  2 \r\n\r\nok",
            5,
        );
        assert_eq!(r.unwrap(), ["/"]);
    }

    #[test]
    fn oversized_head_is_refused() {
        let mut head = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
        head.resize(MAX_HEAD, b'a');
        let mut r = RequestReader::new();
        assert_eq!(r.feed(&head).unwrap_err(), HttpError::HeadTooLarge);
        // One byte less is still "need more".
        let mut r = RequestReader::new();
        assert!(!r.feed(&head[..MAX_HEAD - 1]).unwrap().complete);
    }
}
