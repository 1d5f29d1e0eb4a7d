use super::*;
use crate::framing::Strictness;

fn parser() -> ResponseParser {
    ResponseParser::new("x-backend", false)
}

/// Feeds `bytes` split at every possible pair of points and checks that each way of
/// cutting them gives `want`: responses arrive in arbitrary pieces.
fn assert_every_split(bytes: &[u8], want: Response) {
    for a in 0..=bytes.len() {
        for b in a..=bytes.len() {
            let mut p = parser();
            let mut out = Ok(None);
            for piece in [&bytes[..a], &bytes[a..b], &bytes[b..]] {
                if piece.is_empty() {
                    continue;
                }
                out = p.feed(piece);
                if !matches!(out, Ok(None)) {
                    break;
                }
            }
            assert_eq!(out, Ok(Some(want)), "split at {a} and {b}");
        }
    }
}

#[test]
fn content_length_response_in_any_split() {
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Backend: b7\r\n\r\nhello";
    assert_every_split(
        r,
        Response {
            status: 200,
            close: false,
        },
    );
    let mut p = parser();
    p.feed(r).unwrap();
    assert_eq!(p.backend(), Some(&b"b7"[..]));
}

#[test]
fn chunked_response_in_any_split() {
    let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n";
    assert_every_split(
        r,
        Response {
            status: 200,
            close: false,
        },
    );
}

#[test]
fn incomplete_responses_need_more() {
    let full = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
    for cut in 0..full.len() {
        let mut p = parser();
        assert_eq!(p.feed(&full[..cut]), Ok(None), "cut at {cut}");
    }
}

#[test]
fn interim_100_continue_is_skipped() {
    let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    assert_every_split(
        r,
        Response {
            status: 201,
            close: false,
        },
    );
}

#[test]
fn connection_close_and_http10() {
    let mut p = parser();
    let r = p
        .feed(b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!((r.status, r.close), (503, true));
    let mut p = parser();
    let r = p
        .feed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(r.close, "HTTP/1.0 closes unless it says keep-alive");
    let mut p = parser();
    let r = p
        .feed(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!r.close);
}

#[test]
fn body_until_close_completes_on_eof() {
    let mut p = parser();
    assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\n\r\nsome body"), Ok(None));
    assert_eq!(p.feed(b" more"), Ok(None));
    assert_eq!(
        p.eof(),
        Ok(Some(Response {
            status: 200,
            close: true
        }))
    );
}

#[test]
fn eof_mid_response_is_truncation_and_idle_eof_is_not() {
    let mut p = parser();
    assert_eq!(
        p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01"),
        Ok(None)
    );
    assert_eq!(p.eof(), Err(Error::Truncated));
    let mut p = parser();
    assert_eq!(p.eof(), Ok(None));
    let mut p = parser();
    assert_eq!(p.feed(b"HTTP/1.1 2"), Ok(None));
    assert_eq!(p.eof(), Err(Error::Truncated));
}

#[test]
fn head_and_204_have_no_body() {
    let mut p = ResponseParser::new("x-backend", true);
    let r = p
        .feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n")
        .unwrap();
    assert_eq!(r.map(|r| r.status), Some(200));
    let mut p = parser();
    let r = p.feed(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
    assert_eq!(r.map(|r| r.status), Some(204));
}

#[test]
fn garbage_is_an_error_never_a_panic() {
    let cases: &[&[u8]] = &[
        b"XYZ\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        b"\x00\x01\x02\x03\r\n\r\n",
    ];
    for c in cases {
        let mut p = parser();
        assert!(p.feed(c).is_err(), "{:?}", String::from_utf8_lossy(c));
    }
    // Random bytes: must never panic whatever they are.
    let mut x: u64 = 0x9E3779B97F4A7C15;
    for _ in 0..2000 {
        let mut buf = [0u8; 64];
        for b in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let mut p = parser();
        let _ = p.feed(b"HTTP/1.1 200 OK\r\n");
        let _ = p.feed(&buf);
        let _ = p.eof();
    }
}

#[test]
fn oversized_head_is_rejected() {
    let mut p = parser();
    let _ = p.feed(b"HTTP/1.1 200 OK\r\n");
    let line = vec![b'a'; 1024];
    let mut err = None;
    for _ in 0..100 {
        if let Err(e) = p.feed(&line) {
            err = Some(e);
            break;
        }
    }
    assert!(matches!(err, Some(Error::HeadTooLarge | Error::Head(_))));
}

#[test]
fn parser_is_reusable_across_responses() {
    let mut p = parser();
    for i in 0..3 {
        let id = format!("b{i}");
        let r = format!("HTTP/1.1 200 OK\r\nx-backend: {id}\r\nContent-Length: 2\r\n\r\nok");
        assert!(p.feed(r.as_bytes()).unwrap().is_some());
        assert_eq!(p.backend(), Some(id.as_bytes()));
    }
    // A response without the header does not inherit the last id.
    assert!(p
        .feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        .unwrap()
        .is_some());
    assert_eq!(p.backend(), None);
}

// --- The rules of the crate docs, as the engine (lenient) and a strict user see them.

fn feed_all(p: &mut ResponseParser, bytes: &[u8]) -> Result<Option<Response>, Error> {
    p.feed(bytes)
}

fn strict() -> ResponseParser {
    ResponseParser::with_strictness("x-backend", false, Strictness::Strict)
}

#[test]
fn te_with_content_length_lenient_decodes_chunked_and_closes() {
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    assert_every_split(
        r,
        Response {
            status: 200,
            close: true,
        },
    );
    assert_eq!(feed_all(&mut strict(), r), Err(Error::AmbiguousLength));
}

#[test]
fn listed_lengths_only_lenient_and_signed_ones_never() {
    // A sign is not in the grammar: refused by both (hyper's CVE-2021-32715).
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok";
    assert_eq!(feed_all(&mut parser(), r), Err(Error::ContentLength));
    assert_eq!(feed_all(&mut strict(), r), Err(Error::ContentLength));
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok";
    assert_eq!(
        feed_all(&mut parser(), r),
        Ok(Some(Response {
            status: 200,
            close: false
        }))
    );
    assert_eq!(feed_all(&mut strict(), r), Err(Error::ContentLength));
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: 002\r\n\r\nok";
    assert!(feed_all(&mut strict(), r).unwrap().is_some());
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n";
    assert_eq!(feed_all(&mut parser(), r), Err(Error::ContentLength));
}

#[test]
fn bare_lf_in_chunks_and_trailers_only_lenient() {
    let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x\nok\n0\nX-T: 1\n\n";
    assert_every_split(
        r,
        Response {
            status: 200,
            close: false,
        },
    );
    assert_eq!(feed_all(&mut strict(), r), Err(Error::Chunk));
    let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\n\r\n";
    assert_eq!(feed_all(&mut strict(), r), Err(Error::Chunk));
    assert!(feed_all(&mut parser(), r).unwrap().is_some());
}

#[test]
fn obs_fold_only_lenient() {
    let r = b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 0\r\n\r\n";
    assert!(feed_all(&mut parser(), r).unwrap().is_some());
    assert!(matches!(feed_all(&mut strict(), r), Err(Error::Head(_))));
}

#[test]
fn non_chunked_coding_runs_until_close() {
    let mut p = parser();
    let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabcdef";
    assert_eq!(p.feed(r), Ok(None));
    assert_eq!(
        p.eof().unwrap().map(|r| (r.status, r.close)),
        Some((200, true))
    );
    let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n";
    assert_eq!(feed_all(&mut strict(), r), Err(Error::TransferEncoding));
}

#[test]
fn http10_chunked_lenient_closes_strict_refuses() {
    let r =
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    let got = feed_all(&mut parser(), r).unwrap().unwrap();
    assert!(got.close);
    assert_eq!(feed_all(&mut strict(), r), Err(Error::TransferEncoding));
}

#[test]
fn no_body_statuses_ignore_their_headers() {
    for r in [
        &b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"[..],
        b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert!(feed_all(&mut parser(), r).unwrap().is_some());
    }
}

#[test]
fn captured_value_is_trimmed_truncated_and_last_wins() {
    let long = "x".repeat(100);
    let r = format!(
        "HTTP/1.1 200 OK\r\nX-Backend: a\r\nx-backend:  {long} \r\nContent-Length: 0\r\n\r\n"
    );
    let mut p = parser();
    assert!(p.feed(r.as_bytes()).unwrap().is_some());
    assert_eq!(p.backend(), Some(&long.as_bytes()[..MAX_CAPTURE]));
    let mut p = ResponseParser::new("", false);
    assert!(p
        .feed(b"HTTP/1.1 200 OK\r\nX-Backend: a\r\nContent-Length: 0\r\n\r\n")
        .unwrap()
        .is_some());
    assert_eq!(p.backend(), None);
}

#[test]
fn reset_forgets_a_partial_response() {
    let mut p = parser();
    assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
    assert!(p.in_progress());
    p.reset();
    assert!(!p.in_progress());
    assert_eq!(
        p.feed(b"HTTP/1.1 201 OK\r\nContent-Length: 0\r\n\r\n"),
        Ok(Some(Response {
            status: 201,
            close: false
        }))
    );
}

/// Markers are read from real framings: a header in the head, a body string split
/// across reads and across chunks, and a read-until-close body; each response
/// reports only its own.
#[test]
fn markers_follow_each_response_whatever_its_framing() {
    use crate::Marker;
    let mut p = parser().with_markers(&[
        Marker::Header("x-custom".into()),
        Marker::Body(b"/rewritten/".to_vec()),
    ]);
    let with_header = b"HTTP/1.1 200 OK\r\nX-Custom: 1\r\nContent-Length: 7\r\n\r\nuri: /x";
    assert!(p.feed(with_header).unwrap().is_some());
    assert_eq!(p.markers(), 0b01);
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nuri: /re\r\n9\r\nwritten/x\r\n0\r\n\r\n";
    let (a, b) = chunked.split_at(50);
    assert_eq!(p.feed(a), Ok(None));
    assert!(p.feed(b).unwrap().is_some());
    assert_eq!(p.markers(), 0b10);
    let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nuri: /x";
    assert!(p.feed(plain).unwrap().is_some());
    assert_eq!(p.markers(), 0);
    assert_eq!(
        p.feed(b"HTTP/1.0 200 OK\r\nX-CUSTOM: 1\r\n\r\nuri: /rewritten/"),
        Ok(None)
    );
    assert!(p.eof().unwrap().is_some());
    assert_eq!(p.markers(), 0b11);
    p.reset();
    assert_eq!(p.markers(), 0);
}
