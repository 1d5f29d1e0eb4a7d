//! The sessions' loop against a small WebSocket server on 127.0.0.1 whose every
//! connection does what the test scripts: echo, then end one way or another (a
//! close frame, an EOF, a silence, a frame a client must refuse), or answer the
//! upgrade with something that is not one. The real backend and the real proxies are
//! in the integration tests (`tests/it/websocket.rs`); this checks the counting.

use super::*;
use http1::ws;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;

/// What one connection of the server does.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Echo every message until the client closes.
    Echo,
    /// Echo `n` messages, then send a close frame 1001 with a reason.
    CloseAfter(usize),
    /// Echo `n` messages, then send a close frame and close the socket at once (as
    /// Caddy does at a config load): the EOF comes in the same read.
    CloseEofAfter(usize),
    /// Echo `n` messages, then close the socket with no frame.
    EofAfter(usize),
    /// Echo `n` messages, then read on without answering.
    SilentAfter(usize),
    /// Echo `n` messages, then send a masked frame (a server must not).
    MaskedAfter(usize),
    /// Answer the upgrade 404.
    Refuse,
    /// Answer bytes that are not HTTP.
    Garbage,
}

struct Server {
    addr: SocketAddr,
    /// How each connection ended at the server: `true` when the client's close frame
    /// came.
    closes: Arc<Mutex<Vec<bool>>>,
}

/// A server whose n-th connection does `script[n]` (the last one for every later).
fn server(script: Vec<Act>) -> Server {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let closes = Arc::new(Mutex::new(Vec::new()));
    let c = closes.clone();
    std::thread::spawn(move || {
        for (n, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            let act = script[n.min(script.len() - 1)];
            let c = c.clone();
            std::thread::spawn(move || {
                let closed = serve(s, act);
                c.lock().unwrap().push(closed);
            });
        }
    });
    Server { addr, closes }
}

/// Reads one client frame: (opcode, unmasked payload); `None` at EOF.
fn read_frame(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(u8, Vec<u8>)> {
    loop {
        if let ws::Parsed::Frame(h) = ws::parse(buf, true) {
            if buf.len() >= h.len + h.payload {
                let m = h.mask.unwrap();
                let p: Vec<u8> = buf[h.len..h.len + h.payload]
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b ^ m[i & 3])
                    .collect();
                buf.drain(..h.len + h.payload);
                return Some((h.opcode, p));
            }
        }
        let mut b = [0u8; 4096];
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
}

fn serve(mut s: TcpStream, act: Act) -> bool {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).unwrap_or(0) == 0 {
            return false;
        }
        head.push(b[0]);
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap()
        .to_string();
    match act {
        Act::Refuse => {
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
            return false;
        }
        Act::Garbage => {
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n");
            return false;
        }
        _ => {}
    }
    let ok = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\nx-backend: test-1\r\n\r\n",
        ws::accept(key.as_bytes())
    );
    s.write_all(ok.as_bytes()).unwrap();
    let limit = match act {
        Act::CloseAfter(n)
        | Act::CloseEofAfter(n)
        | Act::EofAfter(n)
        | Act::SilentAfter(n)
        | Act::MaskedAfter(n) => n,
        _ => usize::MAX,
    };
    let mut buf = Vec::new();
    let mut echoed = 0;
    while let Some((op, p)) = read_frame(&mut s, &mut buf) {
        if op == ws::CLOSE {
            let mut out = Vec::new();
            ws::frame(&mut out, true, ws::CLOSE, &p);
            let _ = s.write_all(&out);
            return true;
        }
        if echoed == limit {
            match act {
                Act::CloseAfter(_) => {
                    let mut payload = 1001u16.to_be_bytes().to_vec();
                    payload.extend_from_slice(b"test draining");
                    let mut out = Vec::new();
                    ws::frame(&mut out, true, ws::CLOSE, &payload);
                    let _ = s.write_all(&out);
                    // The client's close comes back.
                    return read_frame(&mut s, &mut buf).is_some_and(|(op, _)| op == ws::CLOSE);
                }
                Act::CloseEofAfter(_) => {
                    let mut out = Vec::new();
                    ws::frame(&mut out, true, ws::CLOSE, &1001u16.to_be_bytes());
                    let _ = s.write_all(&out);
                    return false;
                }
                Act::EofAfter(_) => return false,
                Act::MaskedAfter(_) => {
                    let mut out = Vec::new();
                    ws::masked_frame(&mut out, ws::BINARY, &p, [1, 2, 3, 4]);
                    let _ = s.write_all(&out);
                    return read_frame(&mut s, &mut buf).is_some_and(|(op, p)| {
                        op == ws::CLOSE && p == ws::PROTOCOL_ERROR.to_be_bytes()
                    });
                }
                _ => continue,
            }
        }
        let mut out = Vec::new();
        ws::frame(&mut out, true, op, &p);
        s.write_all(&out).unwrap();
        echoed += 1;
    }
    false
}

fn spec(addr: SocketAddr, sessions: usize, rate: f64, secs: f64) -> SessionSpec {
    SessionSpec {
        kind: super::SessionKind::WebSocket,
        url: format!("ws://{addr}/chat"),
        addr,
        host: "ws.test".into(),
        path: "/chat".into(),
        headers: Vec::new(),
        tls: None,
        sessions,
        message_rate: rate,
        message_bytes: 32,
        duration: Duration::from_secs_f64(secs),
        timeout: Duration::from_millis(300),
        connect_timeout: Duration::from_secs(1),
        reopen: Reopen::AtOnce,
        backend_header: "x-backend".into(),
        netns: None,
    }
}

fn go(spec: &SessionSpec) -> Sessions {
    let clock = Clock::start();
    run(
        spec,
        &clock,
        &AtomicBool::new(false),
        None,
        Begin::WhenOpen,
        |_| {},
    )
    .unwrap()
}

/// The message balance holds whatever happened.
fn balanced(r: &Sessions) {
    let m = &r.messages;
    assert!(m.balanced(), "{m:?}");
}

#[test]
fn held_sessions_echo_every_message_and_close_with_the_client() {
    let srv = server(vec![Act::Echo]);
    let r = go(&spec(srv.addr, 4, 200.0, 1.0));
    balanced(&r);
    assert_eq!(
        (r.opened, r.reopened, r.held, r.cut()),
        (4, 0, 4, 0),
        "{r:?}"
    );
    assert!((195..=201).contains(&r.messages.intended), "{r:?}");
    assert_eq!(r.messages.echoed, r.messages.intended, "{r:?}");
    assert_eq!(r.backends["test-1"], 4);
    assert!(r.latency_ms.p99.unwrap() < 100.0, "{r:?}");
    assert_eq!(r.open_ms.count, 4);
    assert_eq!(r.timeline.len(), 1, "{:?}", r.timeline);
    std::thread::sleep(Duration::from_millis(200));
    let closes = srv.closes.lock().unwrap().clone();
    assert_eq!(
        closes, [true; 4],
        "every session ended with the client's close"
    );
}

#[test]
fn each_kind_of_end_is_counted_and_the_session_reopened() {
    // Four sessions; the first connection of each kind ends after 5 echoes, every
    // later one echoes on.
    let srv = server(vec![
        Act::CloseAfter(5),
        Act::EofAfter(5),
        Act::SilentAfter(5),
        Act::MaskedAfter(5),
        Act::Echo,
    ]);
    let r = go(&spec(srv.addr, 4, 200.0, 1.5));
    balanced(&r);
    let ends: Vec<(&str, u64)> = r.ends.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    assert_eq!(
        ends,
        [
            ("close 1001", 1),
            ("eof", 1),
            ("protocol", 1),
            ("timeout", 1)
        ],
        "{r:?}"
    );
    assert_eq!(r.close_reasons["close 1001"], "test draining");
    assert_eq!((r.opened, r.reopened, r.held), (8, 4, 4), "{r:?}");
    assert_eq!(r.reopen_ms.count, 4);
    // The silent session's message timed out; the ones due while it was waiting
    // for it were lost with it.
    assert!(r.messages.timed_out >= 1, "{:?}", r.messages);
    assert_eq!(r.broken(), 3);
    let ended: u64 = r.timeline.iter().map(|s| s.ended).sum();
    assert_eq!(ended, 4);
}

#[test]
fn with_reopen_never_the_messages_of_an_ended_session_are_not_sent() {
    let srv = server(vec![Act::EofAfter(3), Act::Echo]);
    let mut s = spec(srv.addr, 2, 100.0, 1.0);
    s.reopen = Reopen::Never;
    let r = go(&s);
    balanced(&r);
    assert_eq!(
        (r.opened, r.reopened, r.held, r.cut()),
        (2, 0, 1, 1),
        "{r:?}"
    );
    assert!(r.messages.not_sent >= 40, "{:?}", r.messages);
    assert_eq!(r.timeline.last().unwrap().open, 1, "{:?}", r.timeline);
}

#[test]
fn an_upgrade_that_is_refused_or_not_http_is_named() {
    let srv = server(vec![Act::Refuse]);
    let r = go(&spec(srv.addr, 1, 0.0, 0.3));
    assert_eq!(r.opened, 0);
    assert!(r.open_failures["refused"] >= 1, "{r:?}");
    let e = &r.first_errors["refused"];
    assert!(e.contains("\"HTTP/1.1 404 Not Found\", not 101"), "{e}");
    let srv = server(vec![Act::Garbage]);
    let r = go(&spec(srv.addr, 1, 0.0, 0.3));
    let e = &r.first_errors["not_websocket"];
    assert!(e.contains("SSH-2.0-OpenSSH"), "{e}");
    // Nothing listening: a connect failure, tried again until the open's bound.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = go(&spec(dead, 1, 0.0, 0.1));
    assert!(r.open_failures["connect"] >= 2, "{r:?}");
    assert!(r.first_errors["connect"].contains("refused"), "{r:?}");
}

#[test]
fn reopen_settings_parse_and_bad_ones_say_what_is_known() {
    assert_eq!(Reopen::parse("at-once"), Ok(Reopen::AtOnce));
    assert_eq!(Reopen::parse("never"), Ok(Reopen::Never));
    assert_eq!(
        Reopen::parse("after 500ms"),
        Ok(Reopen::After(Duration::from_millis(500)))
    );
    assert_eq!(Reopen::After(Duration::from_secs(1)).name(), "after 1000ms");
    let e = Reopen::parse("later").unwrap_err();
    assert!(e.contains("at-once, never or after DURATION"), "{e}");
    let mut s = spec("127.0.0.1:1".parse().unwrap(), 1, 1.0, 1.0);
    s.message_bytes = 4;
    assert!(s.check().unwrap_err().contains("not 4"));
}

#[test]
fn a_close_frame_read_with_its_eof_ends_the_session_once_and_it_reopens() {
    let srv = server(vec![
        Act::CloseEofAfter(2),
        Act::CloseEofAfter(2),
        Act::CloseEofAfter(2),
        Act::Echo,
    ]);
    let r = go(&spec(srv.addr, 3, 150.0, 1.0));
    balanced(&r);
    assert_eq!(r.ends["close 1001"], 3, "{r:?}");
    assert_eq!(r.cut(), 3, "one end each, not a second for the EOF: {r:?}");
    assert_eq!((r.reopened, r.held), (3, 3), "{r:?}");
    assert!(r.open_failures.is_empty(), "{r:?}");
}

#[test]
fn an_epoll_failure_says_its_cause_once() {
    let e = SessionsError::from(io::Error::from_raw_os_error(24));
    assert_eq!(e.to_string(), "sessions: epoll");
    let line = results::Causes(&e).to_string();
    assert!(line.starts_with("sessions: epoll: "), "{line}");
    assert_eq!(line.matches("Too many open files").count(), 1, "{line}");
}
