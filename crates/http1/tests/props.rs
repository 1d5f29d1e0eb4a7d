//! Property tests for both parsers: a valid message decodes to the same result at
//! every split, and no input (random, or a valid message mutated) makes a parser
//! panic, report more bytes than it was given, or accept garbage.

use http1::response::Response;
use http1::{ChunkedDecoder, Error, RequestReader, ResponseParser, Strictness};
use proptest::prelude::*;
use proptest::sample::Index;

/// One chunked body: its chunks (data, extension, leading zeros of the size,
/// upper-case hex) and trailer lines.
#[derive(Debug, Clone)]
struct Chunked {
    chunks: Vec<(Vec<u8>, Option<String>, usize, bool)>,
    last_zeros: usize,
    trailers: Vec<(String, String)>,
}

impl Chunked {
    /// The encoding, with every line end `eol` (`\r\n`, or `\n` for the lenient
    /// variant).
    fn encode(&self, eol: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for (data, ext, zeros, upper) in &self.chunks {
            let size = if *upper {
                format!("{:X}", data.len())
            } else {
                format!("{:x}", data.len())
            };
            out.extend_from_slice("0".repeat(*zeros).as_bytes());
            out.extend_from_slice(size.as_bytes());
            if let Some(ext) = ext {
                out.extend_from_slice(ext.as_bytes());
            }
            out.extend_from_slice(eol.as_bytes());
            out.extend_from_slice(data);
            out.extend_from_slice(eol.as_bytes());
        }
        out.extend_from_slice("0".repeat(self.last_zeros + 1).as_bytes());
        out.extend_from_slice(eol.as_bytes());
        for (name, value) in &self.trailers {
            out.extend_from_slice(format!("{name}: {value}{eol}").as_bytes());
        }
        out.extend_from_slice(eol.as_bytes());
        out
    }

    fn data(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.0.clone()).collect()
    }
}

#[derive(Debug, Clone)]
enum Body {
    None,
    Length(Vec<u8>),
    Chunked(Chunked),
    /// Responses only.
    UntilClose(Vec<u8>),
}

fn chunked() -> impl Strategy<Value = Chunked> {
    let chunk = (
        prop::collection::vec(any::<u8>(), 1..40),
        // Extensions as the grammar has them: a token or a quoted value.
        prop::option::of("[ \t]?;[a-z]{1,5}(=([a-z0-9]{1,5}|\"[a-z0-9 ;]{0,5}\"))?"),
        0usize..3,
        any::<bool>(),
    );
    (
        prop::collection::vec(chunk, 0..5),
        0usize..3,
        prop::collection::vec(("X-T[a-z]{0,5}", "[a-z0-9 ]{0,8}[a-z]"), 0..3),
    )
        .prop_map(|(chunks, last_zeros, trailers)| Chunked {
            chunks,
            last_zeros,
            trailers,
        })
}

fn extra_headers() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec(("X-G-[A-Za-z0-9-]{0,10}", "[!-~]([ -~]{0,20}[!-~])?"), 0..4)
}

/// Positions at which to cut a message of `len` bytes.
fn cuts(len: usize, idx: &[Index]) -> Vec<usize> {
    let mut c: Vec<usize> = idx.iter().map(|i| i.index(len + 1)).collect();
    c.sort_unstable();
    c
}

fn pieces<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
        out.push(&bytes[at..c]);
        at = c;
    }
    out
}

// --- Responses.

#[derive(Debug, Clone)]
struct Resp {
    status: u16,
    http10: bool,
    close: bool,
    keep_alive: bool,
    backend: Option<String>,
    extra: Vec<(String, String)>,
    body: Body,
}

fn response() -> impl Strategy<Value = Resp> {
    let body = prop_oneof![
        Just(Body::None),
        prop::collection::vec(any::<u8>(), 0..60).prop_map(Body::Length),
        chunked().prop_map(Body::Chunked),
        prop::collection::vec(any::<u8>(), 0..60).prop_map(Body::UntilClose),
    ];
    (
        prop::sample::select(vec![200u16, 201, 204, 304, 404, 500, 503]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of("[a-z0-9-]{1,70}"),
        extra_headers(),
        body,
    )
        .prop_map(
            |(status, http10, close, keep_alive, backend, extra, body)| {
                // 204 and 304 carry no body; chunked is not for HTTP/1.0.
                let body = match body {
                    _ if status == 204 || status == 304 => Body::None,
                    Body::Chunked(_) if http10 => Body::Length(b"x".to_vec()),
                    b => b,
                };
                Resp {
                    status,
                    http10,
                    close,
                    keep_alive,
                    backend,
                    extra,
                    body,
                }
            },
        )
}

impl Resp {
    fn encode(&self, eol: &str) -> Vec<u8> {
        let v = if self.http10 { "1.0" } else { "1.1" };
        let mut out = format!("HTTP/{v} {} Whatever\r\n", self.status).into_bytes();
        let mut h = |line: String| out.extend_from_slice(format!("{line}\r\n").as_bytes());
        if self.close {
            h("Connection: close".into());
        } else if self.keep_alive {
            h("Connection: keep-alive".into());
        }
        if let Some(b) = &self.backend {
            h(format!("X-Backend: {b}"));
        }
        for (n, v) in &self.extra {
            h(format!("{n}: {v}"));
        }
        match &self.body {
            Body::None if self.status == 204 || self.status == 304 => {}
            Body::None => h("Content-Length: 0".into()),
            Body::Length(b) => h(format!("Content-Length: {}", b.len())),
            Body::Chunked(_) => h("Transfer-Encoding: chunked".into()),
            Body::UntilClose(_) => {}
        }
        out.extend_from_slice(b"\r\n");
        match &self.body {
            Body::None => {}
            Body::Length(b) | Body::UntilClose(b) => out.extend_from_slice(b),
            Body::Chunked(c) => out.extend_from_slice(&c.encode(eol)),
        }
        out
    }

    fn want(&self) -> Response {
        let until_close = matches!(self.body, Body::UntilClose(_));
        Response {
            status: self.status,
            close: self.close || (self.http10 && !self.keep_alive) || until_close,
        }
    }
}

/// Feeds the pieces, then EOF; returns the outcome, the captured value, and the
/// pieces fed.
fn run_response(
    p: &mut ResponseParser,
    pieces: &[&[u8]],
) -> (Result<Option<Response>, Error>, Option<Vec<u8>>) {
    let mut out = Ok(None);
    for piece in pieces {
        if piece.is_empty() {
            continue;
        }
        out = p.feed(piece);
        if !matches!(out, Ok(None)) {
            break;
        }
    }
    if matches!(out, Ok(None)) {
        out = p.eof();
    }
    (out, p.backend().map(<[u8]>::to_vec))
}

// --- Requests.

#[derive(Debug, Clone)]
struct Req {
    method: &'static str,
    uri: String,
    http10: bool,
    close: bool,
    extra: Vec<(String, String)>,
    body: Body,
}

fn request() -> impl Strategy<Value = Req> {
    let body = prop_oneof![
        Just(Body::None),
        prop::collection::vec(any::<u8>(), 0..60).prop_map(Body::Length),
        chunked().prop_map(Body::Chunked),
    ];
    (
        prop::sample::select(vec!["GET", "POST", "PUT", "HEAD", "DELETE"]),
        "/[a-z0-9/._-]{0,12}(\\?[a-z0-9=&]{0,8})?",
        any::<bool>(),
        any::<bool>(),
        extra_headers(),
        body,
    )
        .prop_map(|(method, uri, http10, close, extra, body)| {
            let body = match body {
                Body::Chunked(_) if http10 => Body::Length(b"x".to_vec()),
                b => b,
            };
            Req {
                method,
                uri,
                http10,
                close,
                extra,
                body,
            }
        })
}

impl Req {
    fn encode(&self, eol: &str) -> Vec<u8> {
        let v = if self.http10 { "1.0" } else { "1.1" };
        let mut out = format!("{} {} HTTP/{v}\r\nHost: x\r\n", self.method, self.uri).into_bytes();
        if self.close {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        for (n, v) in &self.extra {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        match &self.body {
            Body::None | Body::UntilClose(_) => {}
            Body::Length(b) => {
                out.extend_from_slice(format!("Content-Length: {}\r\n", b.len()).as_bytes())
            }
            Body::Chunked(_) => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        }
        out.extend_from_slice(b"\r\n");
        match &self.body {
            Body::None | Body::UntilClose(_) => {}
            Body::Length(b) => out.extend_from_slice(b),
            Body::Chunked(c) => out.extend_from_slice(&c.encode(eol)),
        }
        out
    }

    fn body(&self) -> Vec<u8> {
        match &self.body {
            Body::None | Body::UntilClose(_) => Vec::new(),
            Body::Length(b) => b.clone(),
            Body::Chunked(c) => c.data(),
        }
    }
}

/// What the reader saw of each complete request.
type Seen = (String, Vec<u8>, bool, bool);

/// Reads pipelined requests from `pieces` as the backend does (unread bytes kept in
/// a buffer); checks every `consumed` is within the bytes given.
fn run_requests(r: &mut RequestReader, pieces: &[&[u8]]) -> Result<(Vec<Seen>, usize), Error> {
    let mut buf = Vec::new();
    let mut seen = Vec::new();
    let mut body = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            let f = r.feed_with(&buf, |d| body.extend_from_slice(d))?;
            assert!(
                f.consumed <= buf.len(),
                "consumed {} of {}",
                f.consumed,
                buf.len()
            );
            buf.drain(..f.consumed);
            if !f.complete {
                break;
            }
            seen.push((
                String::from_utf8_lossy(r.uri()).into_owned(),
                std::mem::take(&mut body),
                r.keep_alive(),
                r.head_method(),
            ));
        }
    }
    Ok((seen, buf.len()))
}

/// Bytes that cannot start a message: not a token character, not a line end.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(b"\x00\x01\x7f\xff ()<>@,;:\\\"/[]?={}".to_vec()),
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(first, rest)| {
            let mut v = vec![first];
            v.extend(rest);
            v
        })
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(Index, u8),
    Insert(Index, u8),
    Delete(Index),
    Truncate(Index),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let m = prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Delete),
        any::<Index>().prop_map(Mutation::Truncate),
    ];
    prop::collection::vec(m, 1..4)
}

fn mutate(mut bytes: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        if bytes.is_empty() {
            break;
        }
        match m {
            Mutation::Flip(i, b) => {
                let i = i.index(bytes.len());
                bytes[i] ^= b | 1;
            }
            Mutation::Insert(i, b) => bytes.insert(i.index(bytes.len() + 1), *b),
            Mutation::Delete(i) => {
                bytes.remove(i.index(bytes.len()));
            }
            Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len())),
        }
    }
    bytes
}

const BOTH: [Strictness; 2] = [Strictness::Lenient, Strictness::Strict];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_responses_decode_alike_at_every_split(
        r in response(),
        idx in prop::collection::vec(any::<Index>(), 0..6),
    ) {
        let bytes = r.encode("\r\n");
        let want = (Ok(Some(r.want())), r.backend.as_ref().map(|b| b.as_bytes()[..b.len().min(64)].to_vec()));
        for s in BOTH {
            let mut p = ResponseParser::with_strictness("x-backend", false, s);
            prop_assert_eq!(&run_response(&mut p, &[&bytes]), &want, "{:?} whole", s);
            let mut p = ResponseParser::with_strictness("x-backend", false, s);
            let c = cuts(bytes.len(), &idx);
            prop_assert_eq!(&run_response(&mut p, &pieces(&bytes, &c)), &want, "{:?} cut at {:?}", s, c);
            // The same parser serves the next response on the connection.
            if !want.0.as_ref().unwrap().as_ref().unwrap().close {
                prop_assert_eq!(&run_response(&mut p, &[&bytes]), &want, "{:?} reused", s);
            }
        }
    }

    #[test]
    fn bare_lf_chunked_responses_only_lenient(
        c in chunked(),
        idx in prop::collection::vec(any::<Index>(), 0..6),
    ) {
        let r = Resp { status: 200, http10: false, close: false, keep_alive: false, backend: None, extra: vec![], body: Body::Chunked(c) };
        let bytes = r.encode("\n");
        let c = cuts(bytes.len(), &idx);
        let mut p = ResponseParser::new("x-backend", false);
        prop_assert_eq!(run_response(&mut p, &pieces(&bytes, &c)).0, Ok(Some(r.want())));
        let mut p = ResponseParser::with_strictness("x-backend", false, Strictness::Strict);
        prop_assert_eq!(run_response(&mut p, &pieces(&bytes, &c)).0, Err(Error::Chunk));
    }

    #[test]
    fn pipelined_requests_decode_alike_at_every_split(
        reqs in prop::collection::vec(request(), 1..4),
        idx in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let bytes: Vec<u8> = reqs.iter().flat_map(|r| r.encode("\r\n")).collect();
        let want: Vec<Seen> = reqs
            .iter()
            .map(|r| (r.uri.clone(), r.body(), !r.close && !r.http10, r.method == "HEAD"))
            .collect();
        for s in BOTH {
            let c = cuts(bytes.len(), &idx);
            let got = run_requests(&mut RequestReader::with_strictness(s), &pieces(&bytes, &c));
            prop_assert_eq!(got, Ok((want.clone(), 0)), "{:?} cut at {:?}", s, c);
        }
    }

    #[test]
    fn chunked_bodies_decode_alike_at_every_split(
        c in chunked(),
        idx in prop::collection::vec(any::<Index>(), 0..8),
        lf in any::<bool>(),
    ) {
        let bytes = c.encode(if lf { "\n" } else { "\r\n" });
        let cut = cuts(bytes.len(), &idx);
        for s in BOTH {
            let mut d = ChunkedDecoder::new(s);
            let mut data = Vec::new();
            let mut result = Ok(false);
            for piece in pieces(&bytes, &cut) {
                match d.feed(piece, |b| data.extend_from_slice(b)) {
                    Ok(p) => {
                        prop_assert!(p.consumed <= piece.len());
                        if p.done {
                            prop_assert_eq!(p.consumed, piece.len(), "stopped early");
                            result = Ok(true);
                            break;
                        }
                        prop_assert_eq!(p.consumed, piece.len());
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            if lf && s == Strictness::Strict {
                prop_assert_eq!(result, Err(Error::Chunk));
            } else {
                prop_assert_eq!(result, Ok(true));
                prop_assert_eq!(&data, &c.data());
            }
        }
    }

    #[test]
    fn garbage_is_an_error_or_needs_more(
        g in garbage(),
        idx in prop::collection::vec(any::<Index>(), 0..4),
    ) {
        let c = cuts(g.len(), &idx);
        for s in BOTH {
            let mut p = ResponseParser::with_strictness("x-backend", false, s);
            let (out, _) = run_response(&mut p, &pieces(&g, &c));
            prop_assert!(out.is_err(), "{:?}", out);
            let got = run_requests(&mut RequestReader::with_strictness(s), &pieces(&g, &c));
            prop_assert!(got.as_ref().map_or(true, |(seen, _)| seen.is_empty()), "{:?}", got);
        }
    }

    #[test]
    fn garbage_after_a_head_never_panics(
        head_kind in 0usize..3,
        g in prop::collection::vec(any::<u8>(), 0..300),
        idx in prop::collection::vec(any::<Index>(), 0..4),
    ) {
        let head: &[u8] = match head_kind {
            0 => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            1 => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            _ => b"HTTP/1.1 200 OK\r\n",
        };
        let bytes = [head, &g].concat();
        let c = cuts(bytes.len(), &idx);
        for s in BOTH {
            let mut p = ResponseParser::with_strictness("x-backend", false, s);
            let _ = run_response(&mut p, &pieces(&bytes, &c));
            let req = [&b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"[..], &g].concat();
            let _ = run_requests(&mut RequestReader::with_strictness(s), &pieces(&req, &c));
        }
    }

    #[test]
    fn mutated_messages_never_panic_nor_overrun(
        r in response(),
        q in request(),
        ms in mutations(),
        idx in prop::collection::vec(any::<Index>(), 0..4),
    ) {
        let resp = mutate(r.encode("\r\n"), &ms);
        let req = mutate(q.encode("\r\n"), &ms);
        for s in BOTH {
            let mut p = ResponseParser::with_strictness("x-backend", false, s);
            let (_, backend) = run_response(&mut p, &pieces(&resp, &cuts(resp.len(), &idx)));
            prop_assert!(backend.is_none_or(|b| b.len() <= 64));
            let _ = run_requests(&mut RequestReader::with_strictness(s), &pieces(&req, &cuts(req.len(), &idx)));
            let _ = http1::client::parse(&resp, false);
        }
    }
}
