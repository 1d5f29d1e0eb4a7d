use super::*;

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
    assert_eq!(p.eof(), Err(ParseError::Truncated));
    let mut p = parser();
    assert_eq!(p.eof(), Ok(None));
    let mut p = parser();
    assert_eq!(p.feed(b"HTTP/1.1 2"), Ok(None));
    assert_eq!(p.eof(), Err(ParseError::Truncated));
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
    assert!(matches!(
        err,
        Some(ParseError::HeadTooLarge | ParseError::BadHead)
    ));
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

#[test]
fn targets_parse() {
    let t = Target::parse("https://127.0.0.1:8443/a?b=1").unwrap();
    assert_eq!(
        t,
        Target {
            tls: true,
            host: "127.0.0.1".into(),
            port: 8443,
            path: "/a?b=1".into()
        }
    );
    assert_eq!(t.host_header(), "127.0.0.1:8443");
    let t = Target::parse("http://[::1]/").unwrap();
    assert_eq!((t.host.as_str(), t.port), ("::1", 80));
    assert_eq!(t.host_header(), "[::1]");
    assert_eq!(Target::parse("http://h?q").unwrap().path, "/?q");
    assert_eq!(Target::parse("https://h").unwrap().port, 443);
    for bad in [
        "not a url",
        "ftp://x/",
        "http://",
        "http://h:70000/",
        "http://h:0/",
        "http://u@h/",
    ] {
        assert!(Target::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn request_is_encoded_once_with_host_and_length() {
    let t = Target::parse("http://127.0.0.1:8080/p").unwrap();
    let r = encode_request("post", &t, &["X-A: 1".into()], b"body", false).unwrap();
    let s = String::from_utf8(r).unwrap();
    assert!(
        s.starts_with("POST /p HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"),
        "{s}"
    );
    assert!(s.contains("X-A: 1\r\n"));
    assert!(s.ends_with("Content-Length: 4\r\n\r\nbody"));
    let r = encode_request("GET", &t, &["Host: example.com".into()], b"", true).unwrap();
    let s = String::from_utf8(r).unwrap();
    assert!(s.contains("Host: example.com\r\n") && !s.contains("127.0.0.1"));
    assert!(s.contains("Connection: close\r\n"));
    assert!(encode_request("GET", &t, &["nocolon".into()], b"", false).is_err());
    assert!(encode_request("G T", &t, &[], b"", false).is_err());
}
