use super::*;
use crate::framing::Strictness;
use crate::Error as HttpError;

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

// --- Strict by default; the rules of the crate docs from the server side.

#[test]
fn strict_refuses_smuggling_vectors() {
    let cases: &[(&[u8], HttpError)] = &[
        (
            b"POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc",
            HttpError::ContentLength,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc",
            HttpError::ContentLength,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
            HttpError::TransferEncoding,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
            HttpError::TransferEncoding,
        ),
        (
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            HttpError::TransferEncoding,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\n\r\n",
            HttpError::Chunk,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n",
            HttpError::Chunk,
        ),
        (
            b"POST / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            HttpError::Head(httparse::Error::HeaderName),
        ),
    ];
    for (input, want) in cases {
        let got = read_all(input, input.len()).unwrap_err();
        assert_eq!(&got, want, "{}", String::from_utf8_lossy(input));
    }
}

#[test]
fn lenient_reader_decodes_by_chunked_and_closes_after() {
    let mut r = RequestReader::with_strictness(Strictness::Lenient);
    let req = b"POST /l HTTP/1.1\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n";
    let f = r.feed(req).unwrap();
    assert_eq!(
        f,
        Feed {
            consumed: req.len(),
            complete: true
        }
    );
    assert!(
        !r.keep_alive(),
        "ambiguous framing must close the connection"
    );
    assert_eq!(r.method(), b"POST");
}

#[test]
fn body_bytes_reach_the_sink_at_every_split() {
    let req = b"PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET";
    for step in 1..=req.len() {
        let mut r = RequestReader::new();
        let mut body = Vec::new();
        let mut buf = Vec::new();
        let mut complete = false;
        for piece in req.chunks(step) {
            buf.extend_from_slice(piece);
            if complete {
                continue;
            }
            let f = r.feed_with(&buf, |d| body.extend_from_slice(d)).unwrap();
            buf.drain(..f.consumed);
            complete = f.complete;
        }
        assert!(complete, "step {step}");
        assert_eq!(body, b"hello world", "step {step}");
        assert_eq!(buf, b"GET", "step {step}");
    }
}
