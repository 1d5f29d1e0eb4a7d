//! HTTP/1.1 on the wire: the target URL, the request encoded once before the run,
//! and an incremental response parser.
//!
//! The parser is fed whatever a read returned (a response may arrive split at any
//! byte, or several reads may be needed for its head) and keeps only the state it
//! needs, so one read buffer can serve every connection of a worker. It never panics
//! on bad bytes: a malformed response is a [`ParseError`], which the engine counts as
//! a `read` error.

use std::fmt::Write as _;

/// Largest response head accepted; more is treated as garbage.
const MAX_HEAD: usize = 64 * 1024;
/// Longest backend id kept; longer ones are truncated.
pub const MAX_BACKEND_ID: usize = 64;

/// A parsed `http://` or `https://` target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    /// Host as written (without brackets for IPv6).
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Target {
    /// Parses a URL of the form `scheme://host[:port][/path][?query]`.
    ///
    /// # Errors
    /// A message saying what is wrong when the URL is not an http(s) URL.
    pub fn parse(url: &str) -> Result<Target, String> {
        let bad = |why: &str| format!("url '{url}': {why}");
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("not a URL: expected http://host[:port]/path or https://..."))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            other => {
                return Err(bad(&format!(
                    "scheme '{other}' is not supported: use http or https"
                )))
            }
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let path = path.split('#').next().unwrap_or("/").to_string();
        if authority.contains('@') {
            return Err(bad(
                "user names in URLs are not supported: use -H 'Authorization: ...'",
            ));
        }
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("unclosed '[' in host"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p
                    .parse()
                    .map_err(|_| bad("port is not a number from 1 to 65535"))?,
                None if after.is_empty() => default_port,
                None => return Err(bad("unexpected text after ']'")),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse()
                        .map_err(|_| bad("port is not a number from 1 to 65535"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() || host.contains(|c: char| c.is_whitespace()) {
            return Err(bad("the host is empty or contains spaces"));
        }
        if port == 0 {
            return Err(bad("port 0 is not a port you can connect to"));
        }
        if path.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad(
                "the path contains spaces or control characters: percent-encode them",
            ));
        }
        Ok(Target {
            tls,
            host,
            port,
            path,
        })
    }

    /// The `Host` header value: the port is left out when it is the scheme's default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.tls { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// Encodes the one request every connection sends, once, before the run.
///
/// `headers` are `Name: value` strings; a `Host` among them replaces the default.
/// With `close`, the request asks the server to close the connection after answering
/// (used when every request opens its own connection, so TIME_WAIT lands on the
/// server as it does for real clients).
///
/// # Errors
/// A message naming a header that is not of the form `Name: value`.
pub fn encode_request(
    method: &str,
    target: &Target,
    headers: &[String],
    body: &[u8],
    close: bool,
) -> Result<Vec<u8>, String> {
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(format!(
            "method '{method}' is not an HTTP method (e.g. GET, POST)"
        ));
    }
    let mut head = String::with_capacity(256);
    let _ = write!(
        head,
        "{} {} HTTP/1.1\r\n",
        method.to_ascii_uppercase(),
        target.path
    );
    let mut has_host = false;
    let mut has_ua = false;
    let mut has_len = false;
    let mut lines = Vec::new();
    for h in headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("header '{h}' is not of the form 'Name: value'"))?;
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("header '{h}' has an invalid name"));
        }
        if value.contains(['\r', '\n']) {
            return Err(format!("header '{h}' contains a line break"));
        }
        match name.to_ascii_lowercase().as_str() {
            "host" => has_host = true,
            "user-agent" => has_ua = true,
            "content-length" => has_len = true,
            _ => {}
        }
        lines.push(format!("{name}: {}\r\n", value.trim()));
    }
    if !has_host {
        let _ = write!(head, "Host: {}\r\n", target.host_header());
    }
    if !has_ua {
        head.push_str(concat!(
            "User-Agent: ingressbench/",
            env!("CARGO_PKG_VERSION"),
            "\r\n"
        ));
    }
    for l in lines {
        head.push_str(&l);
    }
    if !body.is_empty() && !has_len {
        let _ = write!(head, "Content-Length: {}\r\n", body.len());
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    Ok(out)
}

/// Why a response could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed response head")]
    BadHead,
    #[error("response head larger than 64 KiB")]
    HeadTooLarge,
    #[error("malformed chunked body")]
    BadChunk,
    #[error("invalid content-length")]
    BadLength,
    #[error("bytes after the end of the response")]
    TrailingBytes,
    #[error("connection closed before the response ended")]
    Truncated,
    #[error("protocol switch is not supported")]
    Upgrade,
}

/// A response that has been read in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The server will close the connection (or the protocol requires it).
    pub close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Waiting for (more of) the head.
    Head,
    /// `remaining` body bytes to skip.
    Length(u64),
    Chunked(Chunk),
    /// No length: the body ends when the server closes.
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading hex digits of a chunk size.
    Size {
        size: u64,
        digits: u8,
    },
    /// Skipping a chunk extension up to CR LF.
    Ext {
        size: u64,
    },
    /// Saw CR after the size line, need LF.
    SizeLf {
        size: u64,
    },
    Data {
        remaining: u64,
    },
    DataCr,
    DataLf,
    /// In the trailer section; `len` bytes of the current line seen.
    Trailer {
        len: u32,
    },
    TrailerLf {
        len: u32,
    },
}

/// Incremental parser for one response at a time on a connection.
#[derive(Debug)]
pub struct ResponseParser {
    /// Head bytes kept across reads when the head arrives split; empty otherwise.
    head: Vec<u8>,
    body: Body,
    status: u16,
    close: bool,
    /// Lower-case name of the header that names the backend.
    backend_header: Box<str>,
    backend: [u8; MAX_BACKEND_ID],
    backend_len: u8,
    /// The request was HEAD: no body whatever the headers say.
    head_request: bool,
}

impl ResponseParser {
    /// A parser that captures the value of `backend_header` (case-insensitive).
    pub fn new(backend_header: &str, head_request: bool) -> Self {
        ResponseParser {
            head: Vec::new(),
            body: Body::Head,
            status: 0,
            close: false,
            backend_header: backend_header.to_ascii_lowercase().into_boxed_str(),
            backend: [0; MAX_BACKEND_ID],
            backend_len: 0,
            head_request,
        }
    }

    /// Forgets any partial response, for a fresh connection.
    pub fn reset(&mut self) {
        self.head.clear();
        self.body = Body::Head;
        self.status = 0;
        self.close = false;
        self.backend_len = 0;
    }

    /// Whether some of a response has been seen (so an EOF now is a truncation).
    pub fn in_progress(&self) -> bool {
        !self.head.is_empty() || self.body != Body::Head
    }

    /// The backend id of the last full response, if it carried one.
    pub fn backend(&self) -> Option<&[u8]> {
        (self.backend_len > 0).then(|| &self.backend[..self.backend_len as usize])
    }

    /// Feeds bytes read from the connection.
    ///
    /// Returns `Ok(Some(response))` once the response is complete (all of `input`
    /// must then have been used: this client never pipelines), `Ok(None)` when more
    /// bytes are needed.
    ///
    /// # Errors
    /// A [`ParseError`] when the bytes are not a valid HTTP/1.1 response.
    pub fn feed(&mut self, mut input: &[u8]) -> Result<Option<Response>, ParseError> {
        loop {
            match self.body {
                Body::Head => {
                    let used = match self.parse_head(input)? {
                        Some(n) => n,
                        None => return Ok(None),
                    };
                    input = &input[used..];
                    if self.body == Body::Head {
                        // An interim 1xx response: the real one follows.
                        continue;
                    }
                }
                Body::Length(remaining) => {
                    let n = remaining.min(input.len() as u64);
                    input = &input[n as usize..];
                    self.body = Body::Length(remaining - n);
                }
                Body::UntilClose => return Ok(None),
                Body::Chunked(_) => {
                    let used = self.parse_chunked(input)?;
                    input = &input[used..];
                }
            }
            if self.body_done() {
                if !input.is_empty() {
                    return Err(ParseError::TrailingBytes);
                }
                let r = Response {
                    status: self.status,
                    close: self.close,
                };
                self.head.clear();
                self.body = Body::Head;
                return Ok(Some(r));
            }
            if input.is_empty() {
                return Ok(None);
            }
        }
    }

    /// The server closed the connection: completes a read-until-close response.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] when a response was under way and needed more bytes.
    pub fn eof(&mut self) -> Result<Option<Response>, ParseError> {
        match self.body {
            Body::UntilClose => {
                self.body = Body::Head;
                Ok(Some(Response {
                    status: self.status,
                    close: true,
                }))
            }
            _ if self.in_progress() => Err(ParseError::Truncated),
            _ => Ok(None),
        }
    }

    fn body_done(&self) -> bool {
        matches!(self.body, Body::Length(0))
    }

    /// Parses the head; returns how many bytes of `input` it used, or `None` when the
    /// head is still incomplete (then all of `input` was kept).
    fn parse_head(&mut self, input: &[u8]) -> Result<Option<usize>, ParseError> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        // Parse straight from the read buffer when no earlier part is pending: the
        // common case, and it avoids a copy.
        let (status, prev) = if self.head.is_empty() {
            (resp.parse(input), 0)
        } else {
            let prev = self.head.len();
            self.head.extend_from_slice(input);
            (resp.parse(&self.head), prev)
        };
        let head_len = match status {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if self.head.is_empty() {
                    self.head.extend_from_slice(input);
                }
                if self.head.len() > MAX_HEAD {
                    return Err(ParseError::HeadTooLarge);
                }
                return Ok(None);
            }
            Err(_) => return Err(ParseError::BadHead),
        };
        let code = resp.code.ok_or(ParseError::BadHead)?;
        let http10 = resp.version == Some(0);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut close = http10;
        let mut backend_len = 0u8;
        for h in resp.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or(ParseError::BadLength)?;
                if length.is_some_and(|l| l != v) {
                    return Err(ParseError::BadLength);
                }
                length = Some(v);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                // Chunked must be the final coding; anything else is read until close.
                chunked = h
                    .value
                    .rsplit(|b| *b == b',')
                    .next()
                    .map(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
                    .unwrap_or(false);
            } else if name.eq_ignore_ascii_case("connection") {
                for tok in h.value.split(|b| *b == b',') {
                    let tok = tok.trim_ascii();
                    if tok.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if tok.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        close = false;
                    }
                }
            } else if name.eq_ignore_ascii_case(&self.backend_header) {
                let v = h.value.trim_ascii();
                let n = v.len().min(MAX_BACKEND_ID);
                self.backend[..n].copy_from_slice(&v[..n]);
                backend_len = n as u8;
            }
        }
        let used = head_len - prev;
        self.head.clear();
        if code == 101 {
            return Err(ParseError::Upgrade);
        }
        if (100..200).contains(&code) {
            self.body = Body::Head;
            return Ok(Some(used));
        }
        self.status = code;
        self.close = close;
        self.backend_len = backend_len;
        self.body = if self.head_request || code == 204 || code == 304 {
            Body::Length(0)
        } else if chunked {
            Body::Chunked(Chunk::Size { size: 0, digits: 0 })
        } else if let Some(l) = length {
            Body::Length(l)
        } else {
            self.close = true;
            Body::UntilClose
        };
        Ok(Some(used))
    }

    /// Advances through a chunked body; returns bytes used.
    fn parse_chunked(&mut self, input: &[u8]) -> Result<usize, ParseError> {
        let Body::Chunked(mut st) = self.body else {
            return Ok(0);
        };
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            st = match st {
                Chunk::Size { size, digits } => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        if digits >= 15 {
                            return Err(ParseError::BadChunk);
                        }
                        let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                        Chunk::Size {
                            size: size * 16 + d,
                            digits: digits + 1,
                        }
                    }
                    b';' | b' ' | b'\t' if digits > 0 => Chunk::Ext { size },
                    b'\r' if digits > 0 => Chunk::SizeLf { size },
                    _ => return Err(ParseError::BadChunk),
                },
                Chunk::Ext { size } => match b {
                    b'\r' => Chunk::SizeLf { size },
                    b'\n' => return Err(ParseError::BadChunk),
                    _ => Chunk::Ext { size },
                },
                Chunk::SizeLf { size } => match (b, size) {
                    (b'\n', 0) => Chunk::Trailer { len: 0 },
                    (b'\n', n) => Chunk::Data { remaining: n },
                    _ => return Err(ParseError::BadChunk),
                },
                Chunk::Data { remaining } => {
                    let n = remaining.min((input.len() - i) as u64);
                    i += n as usize;
                    st = if remaining == n {
                        Chunk::DataCr
                    } else {
                        Chunk::Data {
                            remaining: remaining - n,
                        }
                    };
                    continue;
                }
                Chunk::DataCr if b == b'\r' => Chunk::DataLf,
                Chunk::DataLf if b == b'\n' => Chunk::Size { size: 0, digits: 0 },
                Chunk::DataCr | Chunk::DataLf => return Err(ParseError::BadChunk),
                Chunk::Trailer { len } => match b {
                    b'\r' => Chunk::TrailerLf { len },
                    _ if len > MAX_HEAD as u32 => return Err(ParseError::HeadTooLarge),
                    _ => Chunk::Trailer { len: len + 1 },
                },
                Chunk::TrailerLf { len } => match b {
                    b'\n' if len == 0 => {
                        self.body = Body::Length(0);
                        return Ok(i + 1);
                    }
                    b'\n' => Chunk::Trailer { len: 0 },
                    _ => return Err(ParseError::BadChunk),
                },
            };
            i += 1;
        }
        self.body = Body::Chunked(st);
        Ok(i)
    }
}

#[cfg(test)]
mod tests;
