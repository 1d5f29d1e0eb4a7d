//! The header scan and the body-framing decision, shared by requests and responses.
//!
//! Every rule that decides where a body ends lives here, once, with the
//! [`Strictness`] it depends on; the request and response parsers only add what is
//! specific to their side (1xx, HEAD, `Expect`). Keeping the decision in one place is
//! the point: a client and a server of this project that disagree on framing is
//! exactly the bug the lab exists to find in proxies.

use crate::Error;

/// How much the parsers tolerate. Each rule is listed in the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strictness {
    /// Accept what real servers and clients (curl, browsers) accept, as long as the
    /// meaning is unambiguous. The engine measures real proxies: flagging a response
    /// curl would take would count a working proxy as failing.
    Lenient,
    /// Reject every framing that two careful parsers could read differently
    /// (request smuggling vectors). The backend stands behind proxies under test: a
    /// proxy that forwards such a request shows up as a `400`.
    Strict,
}

/// Where a message body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body at all.
    None,
    /// Exactly this many bytes (never 0: that is [`Framing::None`]).
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the peer closes (responses only).
    UntilClose,
}

/// What the framing-relevant headers of one head say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scan {
    /// The head was HTTP/1.0.
    pub http10: bool,
    /// The agreed `Content-Length`, if any.
    pub content_length: Option<u64>,
    /// Some `Transfer-Encoding` header was present.
    pub transfer_encoding: bool,
    /// The final transfer coding is `chunked`.
    pub chunked: bool,
    /// `Connection` lists `close`.
    pub close: bool,
    /// `Connection` lists `keep-alive`.
    pub keep_alive: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
}

impl Scan {
    /// Reads the framing headers of a head. `version` is httparse's minor version.
    ///
    /// # Errors
    /// [`Error::ContentLength`] for a bad or conflicting length, and (strict)
    /// [`Error::TransferEncoding`] for `chunked` applied twice.
    pub fn headers(
        version: u8,
        headers: &[httparse::Header<'_>],
        s: Strictness,
    ) -> Result<Scan, Error> {
        let mut scan = Scan {
            http10: version == 0,
            ..Scan::default()
        };
        for h in headers {
            let name = h.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                let v = parse_length(h.value, s).ok_or(Error::ContentLength)?;
                if scan.content_length.is_some_and(|l| l != v) {
                    return Err(Error::ContentLength);
                }
                scan.content_length = Some(v);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                scan.transfer_encoding = true;
                // The codings of all the lines form one list; empty elements are
                // ignored (RFC 9110 section 5.6.1).
                for coding in h
                    .value
                    .split(|&b| b == b',')
                    .map(trim)
                    .filter(|c| !c.is_empty())
                {
                    if scan.chunked && s == Strictness::Strict {
                        // Another coding after chunked: chunked was not final, or was
                        // applied twice (RFC 9112 section 6.1 forbids both).
                        return Err(Error::TransferEncoding);
                    }
                    scan.chunked = coding.eq_ignore_ascii_case(b"chunked");
                }
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in h.value.split(|&b| b == b',').map(trim) {
                    scan.close |= token.eq_ignore_ascii_case(b"close");
                    scan.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case(b"expect") {
                scan.expect_continue = trim(h.value).eq_ignore_ascii_case(b"100-continue");
            }
        }
        Ok(scan)
    }

    /// Whether the connection stays open after this message, by its own headers:
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `keep-alive`.
    pub fn persistent(&self) -> bool {
        !self.close && (!self.http10 || self.keep_alive)
    }

    /// Both framings were given (only possible in lenient mode past [`request`] and
    /// [`response`]): chunked wins, and the connection must close after the
    /// message (RFC 9112 section 6.1), since the peer may have meant the other one.
    pub fn ambiguous(&self) -> bool {
        self.transfer_encoding && (self.content_length.is_some() || self.http10)
    }
}

/// The body framing of a request (RFC 9112 section 6.3; requests never run to close).
///
/// # Errors
/// [`Error::TransferEncoding`] when the final coding is not chunked, and in strict
/// mode [`Error::AmbiguousLength`] for both framings and [`Error::TransferEncoding`]
/// for `Transfer-Encoding` on HTTP/1.0.
pub fn request(scan: &Scan, s: Strictness) -> Result<Framing, Error> {
    if scan.transfer_encoding {
        if !scan.chunked {
            return Err(Error::TransferEncoding);
        }
        check_te(scan, s)?;
        return Ok(Framing::Chunked);
    }
    Ok(match scan.content_length {
        None | Some(0) => Framing::None,
        Some(n) => Framing::Length(n),
    })
}

/// The body framing of a final (non-1xx) response to a request that was a `HEAD` or
/// not (RFC 9112 section 6.3).
///
/// # Errors
/// In strict mode, [`Error::AmbiguousLength`] for both framings and
/// [`Error::TransferEncoding`] for `Transfer-Encoding` on HTTP/1.0.
pub fn response(
    status: u16,
    head_request: bool,
    scan: &Scan,
    s: Strictness,
) -> Result<Framing, Error> {
    if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(Framing::None);
    }
    if scan.transfer_encoding {
        check_te(scan, s)?;
        // A response whose final coding is not chunked runs until close.
        return Ok(if scan.chunked {
            Framing::Chunked
        } else {
            Framing::UntilClose
        });
    }
    Ok(match scan.content_length {
        Some(0) => Framing::None,
        Some(n) => Framing::Length(n),
        None => Framing::UntilClose,
    })
}

fn check_te(scan: &Scan, s: Strictness) -> Result<(), Error> {
    if s == Strictness::Strict {
        if scan.content_length.is_some() {
            return Err(Error::AmbiguousLength);
        }
        if scan.http10 {
            return Err(Error::TransferEncoding);
        }
    }
    Ok(())
}

/// A `Content-Length` value: decimal digits (leading zeros allowed, as the grammar
/// does), surrounding spaces and tabs allowed, no overflow. Lenient also takes a list
/// of identical values such as `5, 5` (RFC 9112 section 6.3 allows that). A sign
/// (`+5`) is refused in both modes: RFC 9110 allows digits only, and a parser that
/// reads `+5` beside one that refuses it is a smuggling vector (hyper's CVE-2021-32715).
pub fn parse_length(v: &[u8], s: Strictness) -> Option<u64> {
    if s == Strictness::Lenient && v.contains(&b',') {
        let mut values = v.split(|&b| b == b',').map(|e| parse_length(e, s));
        let first = values.next()??;
        return values.all(|e| e == Some(first)).then_some(first);
    }
    let v = trim(v);
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// `v` without leading and trailing spaces and tabs.
pub(crate) fn trim(v: &[u8]) -> &[u8] {
    let is_ws = |b: &u8| *b == b' ' || *b == b'\t';
    let start = v.iter().position(|b| !is_ws(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !is_ws(b)).map_or(start, |e| e + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use Strictness::{Lenient, Strict};

    #[test]
    fn content_length_values() {
        let cases: &[(&[u8], Option<u64>, Option<u64>)] = &[
            (b"5", Some(5), Some(5)),
            (b" 5\t", Some(5), Some(5)),
            (b"007", Some(7), Some(7)),
            (b"+5", None, None),
            (b"5, 5", Some(5), None),
            (b"5, 6", None, None),
            (b"5,", None, None),
            (b"-5", None, None),
            (b"", None, None),
            (b"+", None, None),
            (b"5 5", None, None),
            (b"0x10", None, None),
            (b"18446744073709551615", Some(u64::MAX), Some(u64::MAX)),
            (b"18446744073709551616", None, None),
            (b"000000000000000000000000001", Some(1), Some(1)),
        ];
        for (v, lenient, strict) in cases {
            let shown = String::from_utf8_lossy(v);
            assert_eq!(parse_length(v, Lenient), *lenient, "lenient {shown}");
            assert_eq!(parse_length(v, Strict), *strict, "strict {shown}");
        }
    }

    fn scan(version: u8, lines: &[(&str, &str)], s: Strictness) -> Result<Scan, Error> {
        let headers: Vec<_> = lines
            .iter()
            .map(|(name, value)| httparse::Header {
                name,
                value: value.as_bytes(),
            })
            .collect();
        Scan::headers(version, &headers, s)
    }

    #[test]
    fn transfer_codings_form_one_list() {
        let s = scan(
            1,
            &[
                ("Transfer-Encoding", "gzip"),
                ("transfer-encoding", "chunked,"),
            ],
            Strict,
        )
        .unwrap();
        assert!(s.transfer_encoding && s.chunked);
        let s = scan(
            1,
            &[
                ("Transfer-Encoding", "chunked"),
                ("Transfer-Encoding", "gzip"),
            ],
            Lenient,
        )
        .unwrap();
        assert!(s.transfer_encoding && !s.chunked);
        assert_eq!(request(&s, Lenient), Err(Error::TransferEncoding));
        assert_eq!(response(200, false, &s, Lenient), Ok(Framing::UntilClose));
        let s = scan(1, &[("Transfer-Encoding", "")], Lenient).unwrap();
        assert_eq!(request(&s, Lenient), Err(Error::TransferEncoding));
    }

    #[test]
    fn framing_decisions() {
        let none = scan(1, &[], Strict).unwrap();
        assert_eq!(request(&none, Strict), Ok(Framing::None));
        assert_eq!(response(200, false, &none, Strict), Ok(Framing::UntilClose));
        let len = scan(1, &[("Content-Length", "0")], Strict).unwrap();
        assert_eq!(response(200, false, &len, Strict), Ok(Framing::None));
        let len = scan(1, &[("Content-Length", "9")], Strict).unwrap();
        assert_eq!(request(&len, Strict), Ok(Framing::Length(9)));
        for (status, head) in [(200, true), (204, false), (304, false), (100, false)] {
            assert_eq!(response(status, head, &len, Strict), Ok(Framing::None));
        }
        let both = scan(
            1,
            &[("Content-Length", "9"), ("Transfer-Encoding", "chunked")],
            Lenient,
        )
        .unwrap();
        assert!(both.ambiguous());
        assert_eq!(request(&both, Lenient), Ok(Framing::Chunked));
        assert_eq!(request(&both, Strict), Err(Error::AmbiguousLength));
        assert_eq!(
            response(200, false, &both, Strict),
            Err(Error::AmbiguousLength)
        );
    }

    #[test]
    fn persistence() {
        let keep = |v, lines: &[(&str, &str)]| scan(v, lines, Strict).unwrap().persistent();
        assert!(keep(1, &[]));
        assert!(!keep(1, &[("Connection", "Keep-Alive, CLOSE")]));
        assert!(!keep(0, &[]));
        assert!(keep(0, &[("connection", " keep-alive ")]));
    }
}
