//! The client against scripted servers: each test writes what a server sends, frame
//! by frame, and checks what the client told its handler and what it wrote back.

use crate::client::{ClientConn, Config, H2Error, Handler};
use crate::frame::{self, Head};
use crate::request::Request;
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Field(u32, String, String, bool),
    Data(u32, usize),
    End(u32),
    Reset(u32, u32),
    Refused(u32),
}

#[derive(Default)]
struct Rec(Vec<Ev>);

impl Handler for Rec {
    fn field(&mut self, slot: u32, name: &[u8], value: &[u8], trailer: bool) {
        self.0.push(Ev::Field(
            slot,
            String::from_utf8_lossy(name).into(),
            String::from_utf8_lossy(value).into(),
            trailer,
        ));
    }
    fn data(&mut self, slot: u32, data: &[u8]) {
        // Consecutive data of one slot is one event, however the frames fell.
        if let Some(Ev::Data(s, n)) = self.0.last_mut() {
            if *s == slot {
                *n += data.len();
                return;
            }
        }
        self.0.push(Ev::Data(slot, data.len()));
    }
    fn end(&mut self, slot: u32) {
        self.0.push(Ev::End(slot));
    }
    fn reset(&mut self, slot: u32, code: u32) {
        self.0.push(Ev::Reset(slot, code));
    }
    fn refused(&mut self, slot: u32) {
        self.0.push(Ev::Refused(slot));
    }
}

fn get() -> Vec<Request> {
    vec![
        Request::from_http1(b"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n", "http").unwrap(),
        Request::from_http1(
            &[
                &b"POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 100\r\n\r\n"[..],
                &[7u8; 100],
            ]
            .concat(),
            "http",
        )
        .unwrap(),
    ]
}

/// Feeds `bytes` in reads of at most `chunk` bytes.
fn feed_in(
    c: &mut ClientConn,
    bytes: &[u8],
    chunk: usize,
    reqs: &[Request],
    rec: &mut Rec,
) -> Result<(), H2Error> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let b = c.read_buf();
        let n = b.len().min(rest.len()).min(chunk);
        b[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        c.received(n, reqs, rec)?;
    }
    Ok(())
}

fn feed(c: &mut ClientConn, bytes: &[u8], reqs: &[Request], rec: &mut Rec) -> Result<(), H2Error> {
    feed_in(c, bytes, usize::MAX, reqs, rec)
}

/// The frames the client wrote (after the preface, if it is there), and clears them.
fn sent(c: &mut ClientConn) -> Vec<(Head, Vec<u8>)> {
    let mut b = c.output().to_vec();
    c.wrote(b.len());
    if b.starts_with(frame::PREFACE) {
        b.drain(..frame::PREFACE.len());
    }
    let mut v = Vec::new();
    let mut at = 0;
    while at + 9 <= b.len() {
        let h = Head::parse(b[at..at + 9].try_into().unwrap());
        let end = at + 9 + h.len as usize;
        v.push((h, b[at + 9..end].to_vec()));
        at = end;
    }
    assert_eq!(at, b.len(), "whole frames only");
    v
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (id, v) in pairs {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    let mut out = Vec::new();
    frame::write_frame(&mut out, frame::SETTINGS, 0, 0, &p);
    out
}

fn headers(
    enc: &mut loona_hpack::Encoder,
    stream: u32,
    fields: &[(&str, &str)],
    flags: u8,
) -> Vec<u8> {
    let block = enc.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    let mut out = Vec::new();
    frame::write_frame(
        &mut out,
        frame::HEADERS,
        flags | frame::END_HEADERS,
        stream,
        &block,
    );
    out
}

fn data(stream: u32, bytes: &[u8], end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let f = if end { frame::END_STREAM } else { 0 };
    frame::write_frame(&mut out, frame::DATA, f, stream, bytes);
    out
}

fn field(slot: u32, n: &str, v: &str) -> Ev {
    Ev::Field(slot, n.into(), v.into(), false)
}

#[test]
fn a_request_and_its_response_with_settings_acknowledged() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    assert!(c.output().starts_with(frame::PREFACE));
    let first = sent(&mut c);
    assert_eq!(first[0].0.kind, frame::SETTINGS);
    assert!(c.open(7, 0, &reqs));
    let f = sent(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.stream), (frame::HEADERS, 1));
    assert_eq!(f[0].0.flags, frame::END_HEADERS | frame::END_STREAM);
    assert_eq!(&f[0].1[..], &reqs[0].block[..]);
    let mut enc = loona_hpack::Encoder::new();
    let mut rec = Rec::default();
    let mut srv = settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 100)]);
    srv.extend(headers(
        &mut enc,
        1,
        &[(":status", "200"), ("x-backend", "b1")],
        0,
    ));
    srv.extend(data(1, b"hello", true));
    feed(&mut c, &srv, &reqs, &mut rec).unwrap();
    assert_eq!(
        rec.0,
        vec![
            field(7, ":status", "200"),
            field(7, "x-backend", "b1"),
            Ev::Data(7, 5),
            Ev::End(7)
        ]
    );
    let back = sent(&mut c);
    assert_eq!(back[0].0.kind, frame::SETTINGS);
    assert_eq!(back[0].0.flags, frame::ACK);
    assert_eq!(c.in_flight(), 0);
    // The next stream id is 3.
    c.open(8, 0, &reqs);
    assert_eq!(sent(&mut c)[0].0.stream, 3);
}

#[test]
fn the_default_windows_are_a_mebibyte_per_stream_and_sixteen_per_connection() {
    let mut c = ClientConn::new(Config::default());
    let f = sent(&mut c);
    assert_eq!(f[0].0.kind, frame::SETTINGS);
    let window = f[0].1[6..12].to_vec();
    assert_eq!(window, [0, 4, 0, 0x10, 0, 0], "INITIAL_WINDOW_SIZE 1 MiB");
    assert_eq!((f[1].0.kind, f[1].0.stream), (frame::WINDOW_UPDATE, 0));
    let inc = u32::from_be_bytes(f[1].1[..4].try_into().unwrap());
    assert_eq!(inc, (16 << 20) - 65_535);
}

#[test]
fn streams_wait_for_the_servers_settings_past_a_hundred_and_a_cancel_lets_one_in() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    sent(&mut c);
    for slot in 0..101 {
        c.open(slot, 0, &reqs);
    }
    assert_eq!(
        sent(&mut c).len(),
        100,
        "100 streams before the server's SETTINGS"
    );
    assert!(c.cancel(0, &reqs));
    let f = sent(&mut c);
    assert_eq!((f[0].0.kind, f[0].0.stream), (frame::RST_STREAM, 1));
    assert_eq!(
        (f[1].0.kind, f[1].0.stream),
        (frame::HEADERS, 201),
        "the waiting one opens"
    );
    assert_eq!(c.open_streams(), 100);
}

#[test]
fn a_megabyte_over_a_64k_window_arrives_whole_with_window_given_back() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    sent(&mut c);
    c.open(0, 0, &reqs);
    sent(&mut c);
    let mut enc = loona_hpack::Encoder::new();
    let mut rec = Rec::default();
    let mut first = settings(&[]);
    first.extend(headers(&mut enc, 1, &[(":status", "200")], 0));
    feed(&mut c, &first, &reqs, &mut rec).unwrap();
    sent(&mut c);
    // A server that keeps to the windows: it sends while both allow, then waits for
    // the client's WINDOW_UPDATEs.
    let total = 1 << 20;
    let (mut conn_w, mut stream_w, mut left) = (65_535i64, 65_535i64, total as i64);
    let mut updates = 0;
    while left > 0 {
        let mut burst = Vec::new();
        while left > 0 && conn_w > 0 && stream_w > 0 {
            let n = left.min(conn_w).min(stream_w).min(16_384);
            left -= n;
            conn_w -= n;
            stream_w -= n;
            burst.extend(data(1, &vec![1u8; n as usize], left == 0));
        }
        assert!(!burst.is_empty(), "the client gave no window back: stalled");
        feed_in(&mut c, &burst, 5_000, &reqs, &mut rec).unwrap();
        for (h, p) in sent(&mut c) {
            assert_eq!(h.kind, frame::WINDOW_UPDATE);
            let inc = i64::from(u32::from_be_bytes(p[..4].try_into().unwrap()));
            updates += 1;
            if h.stream == 0 {
                conn_w += inc;
            } else {
                stream_w += inc;
            }
        }
    }
    assert_eq!(rec.0[1..], [Ev::Data(0, total), Ev::End(0)]);
    assert!(updates >= 2 * (total / 65_535), "{updates} updates");
    // A server that does not keep to the window breaks the connection: one frame
    // over a stream window of 1,000.
    let mut c = ClientConn::new(Config {
        stream_window: 1_000,
        conn_window: 65_535,
    });
    c.open(0, 0, &reqs);
    let mut over = settings(&[]);
    over.extend(headers(&mut enc, 1, &[(":status", "200")], 0));
    over.extend(data(1, &[0u8; 1_001], false));
    let e = feed(&mut c, &over, &reqs, &mut Rec::default()).unwrap_err();
    assert!(matches!(e, H2Error::FlowControl(_)), "{e}");
    let last = sent(&mut c).pop().unwrap();
    assert_eq!(last.0.kind, frame::GOAWAY, "the client says why it leaves");
}

#[test]
fn a_request_body_waits_for_the_servers_window() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    let mut rec = Rec::default();
    feed(
        &mut c,
        &settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 30)]),
        &reqs,
        &mut rec,
    )
    .unwrap();
    sent(&mut c);
    c.open(0, 1, &reqs);
    let f = sent(&mut c);
    assert_eq!(f[0].0.kind, frame::HEADERS);
    assert_eq!(f[0].0.flags & frame::END_STREAM, 0);
    assert_eq!((f[1].0.kind, f[1].1.len()), (frame::DATA, 30));
    assert_eq!(f.len(), 2, "no more than the window");
    let mut wu = Vec::new();
    frame::window_update(&mut wu, 1, 50);
    feed(&mut c, &wu, &reqs, &mut rec).unwrap();
    let f = sent(&mut c);
    assert_eq!((f[0].1.len(), f[0].0.flags), (50, 0));
    let mut wu = Vec::new();
    frame::window_update(&mut wu, 1, 1000);
    feed(&mut c, &wu, &reqs, &mut rec).unwrap();
    let f = sent(&mut c);
    assert_eq!((f[0].1.len(), f[0].0.flags), (20, frame::END_STREAM));
}

#[test]
fn goaway_refuses_the_streams_above_its_last_id_and_ends_new_ones() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    let mut rec = Rec::default();
    for slot in 0..3 {
        assert!(c.open(slot, 0, &reqs));
    }
    let mut g = settings(&[]);
    let mut p = Vec::new();
    p.extend_from_slice(&1u32.to_be_bytes());
    p.extend_from_slice(&0u32.to_be_bytes());
    frame::write_frame(&mut g, frame::GOAWAY, 0, 0, &p);
    feed(&mut c, &g, &reqs, &mut rec).unwrap();
    let mut refused: Vec<_> = rec.0.clone();
    refused.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(refused, vec![Ev::Refused(1), Ev::Refused(2)]);
    assert_eq!(c.goaway(), Some(1));
    assert!(!c.open(9, 0, &reqs), "no stream opens after GOAWAY");
    assert_eq!(c.in_flight(), 1, "stream 1 is still answered");
    let mut enc = loona_hpack::Encoder::new();
    feed(
        &mut c,
        &headers(&mut enc, 1, &[(":status", "204")], frame::END_STREAM),
        &reqs,
        &mut rec,
    )
    .unwrap();
    assert_eq!(rec.0[2..], [field(0, ":status", "204"), Ev::End(0)]);
    assert_eq!(c.counters.goaways, 1);
}

#[test]
fn resets_refusals_pings_and_the_stream_limit() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    let mut rec = Rec::default();
    feed(
        &mut c,
        &settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 1)]),
        &reqs,
        &mut rec,
    )
    .unwrap();
    sent(&mut c);
    c.open(0, 0, &reqs);
    c.open(1, 0, &reqs);
    let f = sent(&mut c);
    assert_eq!(f.len(), 1, "the second waits for the first: limit 1");
    assert_eq!(c.in_flight(), 2);
    let mut srv = Vec::new();
    frame::rst_stream(&mut srv, 1, 0x2);
    feed(&mut c, &srv, &reqs, &mut rec).unwrap();
    assert_eq!(rec.0, vec![Ev::Reset(0, 0x2)]);
    let f = sent(&mut c);
    assert_eq!(
        (f[0].0.kind, f[0].0.stream),
        (frame::HEADERS, 3),
        "the queued one opens"
    );
    let mut srv = Vec::new();
    frame::rst_stream(&mut srv, 3, frame::REFUSED_STREAM);
    frame::write_frame(&mut srv, frame::PING, 0, 0, b"12345678");
    feed(&mut c, &srv, &reqs, &mut rec).unwrap();
    assert_eq!(rec.0[1], Ev::Refused(1));
    let f = sent(&mut c);
    assert_eq!(
        (f[0].0.kind, f[0].0.flags, &f[0].1[..]),
        (frame::PING, frame::ACK, &b"12345678"[..])
    );
    assert_eq!(
        (c.counters.resets, c.counters.pings, c.counters.max_open),
        (1, 1, 1)
    );
    // A cancelled stream's later frames are ignored.
    c.open(2, 0, &reqs);
    assert!(c.cancel(2, &reqs));
    let f = sent(&mut c);
    assert_eq!(f.last().unwrap().0.kind, frame::RST_STREAM);
    let mut enc = loona_hpack::Encoder::new();
    let mut srv = headers(&mut enc, 5, &[(":status", "200")], 0);
    srv.extend(data(5, b"late", true));
    feed(&mut c, &srv, &reqs, &mut rec).unwrap();
    assert_eq!(rec.0.len(), 2);
}

#[test]
fn informational_heads_are_skipped_trailers_and_continuations_read() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    let mut rec = Rec::default();
    c.open(4, 0, &reqs);
    let mut enc = loona_hpack::Encoder::new();
    let mut srv = settings(&[]);
    srv.extend(headers(
        &mut enc,
        1,
        &[(":status", "103"), ("link", "</a>")],
        0,
    ));
    // The final head split over HEADERS and a CONTINUATION.
    let block = enc.encode([
        (&b":status"[..], &b"200"[..]),
        (&b"x-backend"[..], &b"b2"[..]),
    ]);
    frame::write_frame(&mut srv, frame::HEADERS, 0, 1, &block[..2]);
    frame::write_frame(
        &mut srv,
        frame::CONTINUATION,
        frame::END_HEADERS,
        1,
        &block[2..],
    );
    srv.extend(data(1, b"x", false));
    srv.extend(headers(
        &mut enc,
        1,
        &[("grpc-status", "13")],
        frame::END_STREAM,
    ));
    feed_in(&mut c, &srv, 3, &reqs, &mut rec).unwrap();
    assert_eq!(
        rec.0,
        vec![
            field(4, ":status", "200"),
            field(4, "x-backend", "b2"),
            Ev::Data(4, 1),
            Ev::Field(4, "grpc-status".into(), "13".into(), true),
            Ev::End(4)
        ]
    );
}

#[test]
fn an_http1_answer_and_bad_frames_are_connection_errors() {
    let reqs = get();
    let mut c = ClientConn::new(Config::rfc_defaults());
    let e = feed(
        &mut c,
        b"HTTP/1.1 400 Bad Request\r\n\r\n",
        &reqs,
        &mut Rec::default(),
    )
    .unwrap_err();
    assert_eq!(e, H2Error::Http1Answer);
    let mut c = ClientConn::new(Config::rfc_defaults());
    let e = feed(&mut c, &data(1, b"x", true), &reqs, &mut Rec::default()).unwrap_err();
    assert!(
        matches!(e, H2Error::Protocol(_)),
        "the first frame must be SETTINGS: {e}"
    );
    let mut c = ClientConn::new(Config::rfc_defaults());
    let mut big = settings(&[]);
    Head {
        len: 20_000,
        kind: frame::DATA,
        flags: 0,
        stream: 1,
    }
    .write(&mut big);
    let e = feed(&mut c, &big, &reqs, &mut Rec::default()).unwrap_err();
    assert_eq!(e, H2Error::FrameSize(20_000));
    let mut c = ClientConn::new(Config::rfc_defaults());
    let mut bad = settings(&[]);
    frame::write_frame(
        &mut bad,
        frame::HEADERS,
        frame::END_HEADERS,
        1,
        &[0xff, 0xff, 0xff, 0xff, 0x0f],
    );
    c.open(0, 0, &reqs);
    let e = feed(&mut c, &bad, &reqs, &mut Rec::default()).unwrap_err();
    assert!(matches!(e, H2Error::Compression(_)), "{e}");
}

/// A conversation: settings, three responses interleaved with a ping, a reset and a
/// window update.
fn conversation() -> Vec<u8> {
    let mut enc = loona_hpack::Encoder::new();
    let mut s = settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 10)]);
    s.extend(headers(
        &mut enc,
        1,
        &[(":status", "200"), ("x-backend", "a")],
        0,
    ));
    s.extend(headers(
        &mut enc,
        3,
        &[(":status", "503"), ("x-backend", "a")],
        0,
    ));
    frame::write_frame(&mut s, frame::PING, 0, 0, b"pingping");
    s.extend(data(1, &[1; 3000], false));
    s.extend(data(3, &[2; 10], true));
    frame::window_update(&mut s, 0, 10);
    s.extend(data(1, &[1; 20], true));
    frame::rst_stream(&mut s, 5, 8);
    s
}

#[test]
fn padding_without_its_length_is_an_error_not_a_panic() {
    // Found by the proptest below: a PADDED flag on an empty frame.
    for kind in [frame::HEADERS, frame::DATA] {
        let reqs = get();
        let mut c = ClientConn::new(Config::rfc_defaults());
        c.open(0, 0, &reqs);
        let mut srv = settings(&[]);
        frame::write_frame(&mut srv, kind, frame::PADDED | frame::END_HEADERS, 1, &[]);
        // Bytes after it that a wrong read would take for the pad length.
        frame::write_frame(&mut srv, frame::PING, 0, 0, b"12345678");
        let e = feed(&mut c, &srv, &reqs, &mut Rec::default()).unwrap_err();
        assert!(matches!(e, H2Error::Protocol(_)), "{e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// However the reads split the bytes, the handler hears the same story.
    #[test]
    fn reads_split_anywhere_tell_the_same_story(chunk in 1usize..200) {
        let reqs = get();
        let run = |chunk| {
            let mut c = ClientConn::new(Config::rfc_defaults());
            for s in 0..3 { c.open(s, 0, &reqs); }
            let mut rec = Rec::default();
            feed_in(&mut c, &conversation(), chunk, &reqs, &mut rec).unwrap();
            rec.0
        };
        prop_assert_eq!(run(chunk), run(usize::MAX));
    }

    /// Garbage after a valid start never panics: it is an error or it is ignored.
    #[test]
    fn arbitrary_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), chunk in 1usize..64) {
        let reqs = get();
        let mut c = ClientConn::new(Config::rfc_defaults());
        for s in 0..3 { c.open(s, s % 2, &reqs); }
        let mut all = settings(&[]);
        all.extend(bytes);
        let _ = feed_in(&mut c, &all, chunk, &reqs, &mut Rec::default());
    }

    /// Well-formed frames with random types, flags, streams and payloads: never a
    /// panic, and the client's output is whole frames.
    #[test]
    fn random_well_formed_frames_never_panic(
        frames in proptest::collection::vec((0u8..12, any::<u8>(), 0u32..8, proptest::collection::vec(any::<u8>(), 0..40)), 0..30)
    ) {
        let reqs = get();
        let mut c = ClientConn::new(Config::rfc_defaults());
        for s in 0..3 { c.open(s, s % 2, &reqs); }
        let mut all = settings(&[]);
        for (kind, flags, stream, payload) in frames {
            frame::write_frame(&mut all, kind, flags, stream, &payload);
        }
        if feed(&mut c, &all, &reqs, &mut Rec::default()).is_ok() {
            let _ = sent(&mut c);
        }
    }
}
