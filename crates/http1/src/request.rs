//! The backend's request reader: one request after another off a connection's bytes.
//!
//! The backend never looks at a body, but it must find where each request ends so
//! that keep-alive and pipelining work and a proxy's request cannot bleed into the
//! next one. The reader is pure (bytes in, progress out) so split reads, pipelines
//! and chunk boundaries are tested without sockets. Strict by default: the backend
//! stands behind the proxies under test, and a proxy that forwards an ambiguous
//! request should show up as a `400`, not be papered over.

use crate::chunked::{BodyDecoder, Progress};
use crate::framing::{self, Framing, Scan, Strictness};
use crate::Error;

/// Longest request head accepted, in bytes; also the size a connection's read
/// buffer may grow to.
pub const MAX_HEAD: usize = 16 * 1024;

/// Most header lines in one request.
const MAX_HEADERS: usize = 64;

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
/// ...) describe the request just finished until the next `feed`. The method and URI
/// are copied into buffers owned by the reader and reused, so steady state allocates
/// nothing.
#[derive(Debug)]
pub struct RequestReader {
    /// `None` between requests (waiting for a head).
    body: Option<BodyDecoder>,
    method: Vec<u8>,
    uri: Vec<u8>,
    keep_alive: bool,
    http10: bool,
    continue_pending: bool,
    strictness: Strictness,
}

impl Default for RequestReader {
    fn default() -> Self {
        RequestReader::new()
    }
}

impl RequestReader {
    /// A strict reader waiting for a connection's first request.
    pub fn new() -> RequestReader {
        RequestReader::with_strictness(Strictness::Strict)
    }

    /// As [`new`](Self::new) with the given rules.
    pub fn with_strictness(strictness: Strictness) -> RequestReader {
        RequestReader {
            body: None,
            method: Vec::with_capacity(16),
            uri: Vec::with_capacity(128),
            keep_alive: true,
            http10: false,
            continue_pending: false,
            strictness,
        }
    }

    /// Reads as much of the current request from `buf` as is there, throwing the
    /// body away.
    ///
    /// Stops at the end of the request: bytes of a pipelined next request are not
    /// consumed. When a head is incomplete nothing is consumed; call again with the
    /// same bytes and more appended.
    ///
    /// # Errors
    /// [`Error`] when the bytes cannot be a valid request; the reader is then
    /// unusable and the connection should be answered `400` and closed.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Feed, Error> {
        self.feed_with(buf, |_| {})
    }

    /// As [`feed`](Self::feed), handing the decoded body bytes to `data`.
    ///
    /// # Errors
    /// As [`feed`](Self::feed).
    pub fn feed_with(&mut self, buf: &[u8], data: impl FnMut(&[u8])) -> Result<Feed, Error> {
        let mut pos = 0;
        if self.body.is_none() {
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
        let Some(body) = &mut self.body else {
            // A request without a body.
            return Ok(Feed {
                consumed: pos,
                complete: true,
            });
        };
        let Progress { consumed, done } = body.feed(&buf[pos..], data)?;
        if done {
            self.body = None;
        }
        Ok(Feed {
            consumed: pos + consumed,
            complete: done,
        })
    }

    /// True between requests: no part of a request has been consumed.
    ///
    /// A connection that is idle here (and has no unread bytes) can be closed by a
    /// draining server without cutting a request in half.
    pub fn between_requests(&self) -> bool {
        self.body.is_none()
    }

    /// The method of the last head read, as sent (`GET`).
    pub fn method(&self) -> &[u8] {
        &self.method
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
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `Connection:
    /// keep-alive`; never after a (lenient) request framed both ways.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// The request was HTTP/1.0 (its keep-alive must be confirmed in the answer).
    pub fn http10(&self) -> bool {
        self.http10
    }

    /// The request method was `HEAD`: answer with headers only.
    pub fn head_method(&self) -> bool {
        self.method == b"HEAD"
    }

    /// True once per head that asked `Expect: 100-continue` and announced a body;
    /// the caller then sends `100 Continue` so the client sends that body.
    pub fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_pending)
    }

    /// Parses a head at the start of `buf`; `Ok(None)` when it is not all there.
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<usize>, Error> {
        if buf.is_empty() {
            return Ok(None);
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                return Err(Error::HeadTooLarge)
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(Error::Head(e)),
        };
        let scan = Scan::headers(req.version.unwrap_or(1), req.headers, self.strictness)?;
        let framing = framing::request(&scan, self.strictness)?;
        self.method.clear();
        self.method
            .extend_from_slice(req.method.unwrap_or_default().as_bytes());
        self.uri.clear();
        self.uri
            .extend_from_slice(req.path.unwrap_or_default().as_bytes());
        self.http10 = scan.http10;
        self.keep_alive = scan.persistent() && !scan.ambiguous();
        self.continue_pending = scan.expect_continue && !scan.http10 && framing != Framing::None;
        self.body = (framing != Framing::None).then(|| BodyDecoder::new(framing, self.strictness));
        Ok(Some(n))
    }
}

#[cfg(test)]
mod tests;
