//! The engine's incremental response parser.
//!
//! It is fed whatever a read returned (a response may arrive split at any byte, or
//! need several reads for its head) and keeps only the state it needs, so one read
//! buffer serves every connection of a worker. The head is parsed straight from the
//! read buffer; only a head that arrives split is copied, into a buffer the parser
//! keeps, so steady state allocates nothing. It never panics on bad bytes: a
//! malformed response is an [`Error`], which the engine counts as a `read` error.
//!
//! Lenient by default: the engine measures real proxies and must not fail a
//! response curl would take (see the crate docs for each rule).

use crate::chunked::BodyDecoder;
use crate::framing::{self, Framing, Scan, Strictness};
use crate::marker::{Marker, MarkerScan};
use crate::Error;

/// Largest response head accepted; more is [`Error::HeadTooLarge`].
pub const MAX_HEAD: usize = 64 * 1024;
/// Longest captured header value kept; longer ones are truncated.
pub const MAX_CAPTURE: usize = 64;
/// The engine's name for [`MAX_CAPTURE`]: the header it captures names the backend.
pub const MAX_BACKEND_ID: usize = MAX_CAPTURE;
/// Most header lines in one response head.
const MAX_HEADERS: usize = 64;

/// A response that has been read in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The server will close the connection (or the protocol requires it).
    pub close: bool,
}

/// Incremental parser for one response at a time on a connection.
#[derive(Debug)]
pub struct ResponseParser {
    /// Head bytes kept across reads when the head arrives split; empty otherwise.
    head: Vec<u8>,
    /// `None` while waiting for (more of) a head.
    body: Option<BodyDecoder>,
    status: u16,
    close: bool,
    /// Lower-case name of the header whose value is captured.
    capture_name: Box<str>,
    capture: [u8; MAX_CAPTURE],
    capture_len: u8,
    /// The request was HEAD: no body whatever the headers say.
    head_request: bool,
    strictness: Strictness,
    /// Which of the caller's markers each response carries (none by default).
    markers: MarkerScan,
    /// The current (or last full) response carried both `Content-Length` and
    /// `Transfer-Encoding`.
    ambiguous: bool,
}

impl ResponseParser {
    /// A lenient parser that captures the value of `backend_header`
    /// (case-insensitive; empty captures nothing).
    pub fn new(backend_header: &str, head_request: bool) -> Self {
        ResponseParser::with_strictness(backend_header, head_request, Strictness::Lenient)
    }

    /// As [`new`](Self::new) with the given rules.
    pub fn with_strictness(
        backend_header: &str,
        head_request: bool,
        strictness: Strictness,
    ) -> Self {
        ResponseParser {
            head: Vec::new(),
            body: None,
            status: 0,
            close: false,
            capture_name: backend_header.to_ascii_lowercase().into_boxed_str(),
            capture: [0; MAX_CAPTURE],
            capture_len: 0,
            head_request,
            strictness,
            markers: MarkerScan::default(),
            ambiguous: false,
        }
    }

    /// Also notes which of `markers` each response carries ([`Self::markers`]).
    pub fn with_markers(mut self, markers: &[Marker]) -> Self {
        self.markers = MarkerScan::new(markers);
        self
    }

    /// The markers the last full response carried: bit `i` for marker `i` given to
    /// [`Self::with_markers`].
    #[inline]
    pub fn markers(&self) -> u8 {
        self.markers.seen()
    }

    /// The next request is (or is not) HEAD: a request mix may mix methods on one
    /// connection. Set before the request is written, between responses.
    #[inline]
    pub fn set_head_request(&mut self, head: bool) {
        self.head_request = head;
    }

    /// Forgets any partial response, for a fresh connection.
    pub fn reset(&mut self) {
        self.head.clear();
        self.body = None;
        self.status = 0;
        self.close = false;
        self.capture_len = 0;
        self.markers.reset();
        self.ambiguous = false;
    }

    /// Whether the last full response carried both `Content-Length` and
    /// `Transfer-Encoding`. Lenient parsing decodes it by the chunked coding (RFC 9112
    /// section 6.1), so it completes; the engine still counts it, because a proxy
    /// that forwards both is the classic request-smuggling setup.
    #[inline]
    pub fn ambiguous(&self) -> bool {
        self.ambiguous
    }

    /// Whether some of a response has been seen (so an EOF now is a truncation).
    pub fn in_progress(&self) -> bool {
        !self.head.is_empty() || self.body.is_some()
    }

    /// The captured header value of the last full response, if it carried one
    /// (at most [`MAX_CAPTURE`] bytes, surrounding whitespace trimmed).
    pub fn backend(&self) -> Option<&[u8]> {
        (self.capture_len > 0).then(|| &self.capture[..usize::from(self.capture_len)])
    }

    /// Feeds bytes read from the connection.
    ///
    /// Returns `Ok(Some(response))` once the response is complete (all of `input`
    /// must then have been used: this client never pipelines), `Ok(None)` when more
    /// bytes are needed.
    ///
    /// # Errors
    /// An [`Error`] when the bytes are not a valid HTTP/1.1 response; the parser
    /// must then be [`reset`](Self::reset) with a new connection.
    pub fn feed(&mut self, mut input: &[u8]) -> Result<Option<Response>, Error> {
        loop {
            let body = match &mut self.body {
                Some(body) => body,
                None => {
                    let Some(used) = self.parse_head(input)? else {
                        return Ok(None);
                    };
                    input = &input[used..];
                    match &mut self.body {
                        Some(body) => body,
                        // An interim 1xx response: the real one follows.
                        None if input.is_empty() => return Ok(None),
                        None => continue,
                    }
                }
            };
            let markers = &mut self.markers;
            let progress = if markers.is_empty() {
                body.feed(input, |_| {})?
            } else {
                body.feed(input, |d| markers.body(d))?
            };
            input = &input[progress.consumed..];
            if !progress.done {
                return Ok(None);
            }
            if !input.is_empty() {
                return Err(Error::TrailingBytes);
            }
            self.markers.done();
            self.body = None;
            return Ok(Some(Response {
                status: self.status,
                close: self.close,
            }));
        }
    }

    /// The server closed the connection: completes a read-until-close response.
    ///
    /// # Errors
    /// [`Error::Truncated`] when a response was under way and needed more bytes.
    pub fn eof(&mut self) -> Result<Option<Response>, Error> {
        match &self.body {
            Some(b) if b.until_close() => {
                self.body = None;
                self.markers.done();
                Ok(Some(Response {
                    status: self.status,
                    close: true,
                }))
            }
            _ if self.in_progress() => Err(Error::Truncated),
            _ => Ok(None),
        }
    }

    /// Parses the head; returns how many bytes of `input` it used, or `None` when the
    /// head is still incomplete (then all of `input` was kept). Leaves `body` `None`
    /// after an interim 1xx head.
    fn parse_head(&mut self, input: &[u8]) -> Result<Option<usize>, Error> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let mut config = httparse::ParserConfig::default();
        config
            .allow_obsolete_multiline_headers_in_responses(self.strictness == Strictness::Lenient);
        // Parse straight from the read buffer when no earlier part is pending: the
        // common case, and it avoids a copy.
        let prev = self.head.len();
        let status = if prev == 0 {
            config.parse_response(&mut resp, input)
        } else {
            self.head.extend_from_slice(input);
            config.parse_response(&mut resp, &self.head)
        };
        let head_len = match status {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if prev == 0 {
                    self.head.extend_from_slice(input);
                }
                if self.head.len() >= MAX_HEAD {
                    return Err(Error::HeadTooLarge);
                }
                return Ok(None);
            }
            Err(e) => {
                let bytes = if prev == 0 { input } else { &self.head[..] };
                let n = bytes.len().min(5);
                return Err(if bytes[..n] != b"HTTP/"[..n] {
                    Error::NotAResponse
                } else {
                    Error::Head(e)
                });
            }
        };
        // httparse always sets both once a head is complete.
        let code = resp.code.unwrap_or(0);
        let scan = Scan::headers(resp.version.unwrap_or(1), resp.headers, self.strictness)?;
        if code == 101 {
            return Err(Error::Upgrade);
        }
        let used = head_len - prev;
        if (100..200).contains(&code) {
            self.head.clear();
            return Ok(Some(used));
        }
        let framing = framing::response(code, self.head_request, &scan, self.strictness)?;
        let mut capture_len = 0;
        if !self.capture_name.is_empty() {
            // The last one wins, as a later header line would overwrite an earlier.
            if let Some(h) = resp
                .headers
                .iter()
                .rev()
                .find(|h| h.name.eq_ignore_ascii_case(&self.capture_name))
            {
                let v = h.value.trim_ascii();
                let n = v.len().min(MAX_CAPTURE);
                self.capture[..n].copy_from_slice(&v[..n]);
                capture_len = n as u8;
            }
        }
        self.capture_len = capture_len;
        if !self.markers.is_empty() {
            self.markers.head(resp.headers);
        }
        self.status = code;
        self.ambiguous = scan.ambiguous();
        self.close = !scan.persistent() || scan.ambiguous() || framing == Framing::UntilClose;
        self.body = Some(BodyDecoder::new(framing, self.strictness));
        self.head.clear();
        Ok(Some(used))
    }
}

#[cfg(test)]
mod tests;
