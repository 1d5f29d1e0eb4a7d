//! Requests encoded once, before the run: the engine builds every request as
//! HTTP/1.1 bytes (its mix, `--header`, bodies); this turns each into an HTTP/2
//! header block and a body, so a request on the wire costs a frame header and two
//! copies, and nothing is encoded per request.
//!
//! The block never uses HPACK's dynamic table: its fields are literals "without
//! indexing" (RFC 7541 §6.2.2), or indexed static entries for the usual
//! pseudo-header values. A table would save a few bytes per request on the wire
//! and cost the encoder state per connection and per request; the server's table
//! size setting cannot affect a block that never touches the table.

/// A request ready for any HTTP/2 connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The HPACK header block (pseudo-headers first).
    pub block: Box<[u8]>,
    pub body: Box<[u8]>,
    /// The method is HEAD: no body comes back whatever the headers say.
    pub head: bool,
}

/// Fields that are HTTP/1.1's connection management and are forbidden in HTTP/2
/// (RFC 9113 §8.2.2); `Host` becomes `:authority`.
const CONNECTION_SPECIFIC: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

impl Request {
    /// The HTTP/2 form of an HTTP/1.1 request (as `http1::encode_request` writes
    /// it: a `Content-Length` body, never chunked), for `scheme` (`http`, `https`).
    ///
    /// # Errors
    /// What is wrong with the bytes, in a sentence: not a request, no `Host`, a
    /// chunked body, or a `TE` other than `trailers`.
    pub fn from_http1(bytes: &[u8], scheme: &str) -> Result<Request, String> {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut fields);
        let head_len = match req.parse(bytes) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Err("the request head is incomplete".into()),
            Err(e) => return Err(format!("the request is not HTTP/1.1: {e}")),
        };
        let method = req.method.unwrap_or("GET");
        let path = req.path.unwrap_or("/");
        let mut authority = None;
        let mut block = Vec::with_capacity(128);
        match method {
            "GET" => block.push(0x82),
            "POST" => block.push(0x83),
            m => literal_indexed_name(&mut block, 2, m.as_bytes()),
        }
        match scheme {
            "http" => block.push(0x86),
            "https" => block.push(0x87),
            s => literal_indexed_name(&mut block, 6, s.as_bytes()),
        }
        if path == "/" {
            block.push(0x84);
        } else {
            literal_indexed_name(&mut block, 4, path.as_bytes());
        }
        // :authority goes before the regular fields; its value is found first.
        for f in req.headers.iter() {
            if f.name.eq_ignore_ascii_case("host") {
                authority = Some(f.value);
            }
        }
        let Some(authority) = authority else {
            return Err("the request has no Host header to make :authority of".into());
        };
        literal_indexed_name(&mut block, 1, authority);
        for f in req.headers.iter() {
            let name = f.name.to_ascii_lowercase();
            if name == "transfer-encoding" {
                return Err(
                    "a chunked request body cannot be sent over HTTP/2 here: give the body whole"
                        .into(),
                );
            }
            if CONNECTION_SPECIFIC.contains(&name.as_str()) {
                continue;
            }
            if name == "te" && !f.value.eq_ignore_ascii_case(b"trailers") {
                return Err("HTTP/2 allows only `TE: trailers`".into());
            }
            literal_new_name(&mut block, name.as_bytes(), f.value);
        }
        Ok(Request {
            block: block.into_boxed_slice(),
            body: bytes[head_len..].into(),
            head: method.eq_ignore_ascii_case("HEAD"),
        })
    }
}

/// An integer with an `n`-bit prefix whose high bits are `flags` (RFC 7541 §5.1).
pub fn integer(out: &mut Vec<u8>, flags: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A string literal, not Huffman-coded (RFC 7541 §5.2).
fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// A literal field without indexing whose name is static-table entry `index`.
fn literal_indexed_name(out: &mut Vec<u8>, index: usize, value: &[u8]) {
    integer(out, 0, 4, index);
    string(out, value);
}

/// A literal field without indexing with a literal name.
fn literal_new_name(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0);
    string(out, name);
    string(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block as another HPACK implementation reads it.
    fn decoded(block: &[u8]) -> Vec<(String, String)> {
        crate::hpack::tests::theirs(&mut loona_hpack::Decoder::new(), block)
    }

    #[test]
    fn an_http1_request_becomes_pseudo_headers_fields_and_its_body() {
        let r = Request::from_http1(
            b"POST /api/x?y=1 HTTP/1.1\r\nHost: example.test:8080\r\nConnection: keep-alive\r\nX-Long: abc\r\nContent-Length: 3\r\n\r\nabc",
            "https",
        )
        .unwrap();
        let f = decoded(&r.block);
        let want: Vec<(String, String)> = [
            (":method", "POST"),
            (":scheme", "https"),
            (":path", "/api/x?y=1"),
            (":authority", "example.test:8080"),
            ("x-long", "abc"),
            ("content-length", "3"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(f, want);
        assert_eq!(&*r.body, b"abc");
        assert!(!r.head);
        let g = Request::from_http1(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "http").unwrap();
        assert_eq!(
            &g.block[..3],
            &[0x82, 0x86, 0x84],
            "static entries, one byte each"
        );
        let h = Request::from_http1(b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n", "http").unwrap();
        assert!(h.head);
        assert_eq!(decoded(&h.block)[0], (":method".into(), "HEAD".into()));
    }

    #[test]
    fn what_http2_cannot_carry_is_named() {
        let e = Request::from_http1(b"GET / HTTP/1.1\r\nX: y\r\n\r\n", "http").unwrap_err();
        assert!(e.contains("Host"), "{e}");
        let e = Request::from_http1(
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            "http",
        )
        .unwrap_err();
        assert!(e.contains("chunked"), "{e}");
        let e = Request::from_http1(b"GET / HTTP/1.1\r\nHost: a\r\nTE: gzip\r\n\r\n", "http")
            .unwrap_err();
        assert!(e.contains("TE"), "{e}");
    }

    #[test]
    fn integers_use_the_prefix_then_continuation_bytes() {
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
        out.clear();
        integer(&mut out, 0x80, 7, 10);
        assert_eq!(out, [0x8a]);
        // A long value is decoded back whole.
        let long = vec![b'v'; 300];
        let mut block = Vec::new();
        literal_new_name(&mut block, b"x-long", &long);
        assert_eq!(decoded(&block)[0].1.len(), 300);
    }
}
