//! One session's socket: the non-blocking connect, TLS, the upgrade request and its
//! answer (or a gRPC stream's HTTP/2 opening and response head), and frames in
//! both directions. The loop ([`super::Loop`]) decides what a step means for the
//! run; this side only says what happened.

use super::{SessionKind, SessionSpec};
use base64::Engine as _;
use http1::ws::{self, Parsed};
use http2::stream::{Event, StreamClient};
use results::clock::Nanos;
use results::sessions::SessionEnd;
use rustix::event::epoll;
use rustls::ClientConnection;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;

use crate::worker::connect_result;

/// The first read buffer of a session; it grows for a bigger frame.
const BUF: usize = 2048;
/// The longest answer head to an upgrade that is read.
const MAX_HEAD: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Not opened yet.
    Idle,
    Connecting,
    /// The upgrade request sent (over TLS: queued behind the handshake).
    Upgrading,
    Open,
    /// The client's close frame sent at the end; the server's close (or EOF) ends it.
    Closing,
    /// Down until `until`: a reopen after a pause, or a failed open tried again.
    Waiting {
        until: Nanos,
    },
    /// Ended for good.
    Done,
}

/// What an event came to.
pub(super) enum Step {
    Nothing,
    OpenFailed(&'static str, String),
    /// The 101 came; the backend it named.
    Opened(Option<String>),
    /// Bytes of frames were read.
    Frames,
    /// The connection ended (after the frames read with it).
    Ended(SessionEnd),
    /// The client's close handshake is done.
    Closed,
}

/// What the next whole frame in the buffer is.
pub(super) enum Frame {
    None,
    /// The echo of message `seq`.
    Echo(u64),
    /// What an end said (a close frame's reason, a stream's grpc-message); its
    /// [`Frame::End`] follows.
    Reason(SessionEnd, String),
    End(SessionEnd),
}

pub(super) struct Session {
    pub phase: Phase,
    sock: Option<TcpStream>,
    tls: Option<Box<ClientConnection>>,
    /// Bumped at each connect; an event of an older socket is ignored.
    pub generation: u32,
    buf: Vec<u8>,
    rstart: usize,
    rend: usize,
    /// Bytes to write (over TLS: to hand to rustls).
    pub out: Vec<u8>,
    /// Messages sent and not yet echoed: intended time, send time, number.
    pub inflight: VecDeque<(Nanos, Nanos, u64)>,
    /// Messages due while the session was down: intended time, number.
    pub backlog: VecDeque<(Nanos, u64)>,
    /// When the current open was meant to happen (for its time to open).
    pub planned: Option<Nanos>,
    /// When the session last ended (a reopen is timed from it).
    pub ended_at: Option<Nanos>,
    /// When the current connect began.
    pub attempt_at: Nanos,
    /// The number of an echo whose last fragment is still to come.
    frag: Option<u64>,
    /// The end a close frame announced, returned after its reason.
    pending: Option<SessionEnd>,
    key: String,
    accept: String,
    /// Open when the run ended: closed by the client, not cut.
    pub held_to_end: bool,
    /// The kernel's receive stamp (wall clock) of the last bytes read; 0: none.
    pub stamp: u64,
    /// A gRPC stream's HTTP/2 state (`None` for a WebSocket, or before the open).
    grpc: Option<Box<StreamClient>>,
    /// A stream's frames read and not yet taken ([`Session::next_frame`]).
    queue: VecDeque<Frame>,
    /// The error code of a GOAWAY the stream's connection got.
    pub goaway: Option<u32>,
}

impl Session {
    pub fn new(rng: &mut u64) -> Session {
        let mut k = [0u8; 16];
        for b in &mut k {
            *b = xorshift(rng) as u8;
        }
        let key = base64::engine::general_purpose::STANDARD.encode(k);
        let accept = ws::accept(key.as_bytes());
        Session {
            phase: Phase::Idle,
            sock: None,
            tls: None,
            generation: 0,
            buf: Vec::new(),
            rstart: 0,
            rend: 0,
            out: Vec::new(),
            inflight: VecDeque::new(),
            backlog: VecDeque::new(),
            planned: None,
            ended_at: None,
            attempt_at: 0,
            frag: None,
            pending: None,
            key,
            accept,
            held_to_end: false,
            stamp: 0,
            grpc: None,
            queue: VecDeque::new(),
            goaway: None,
        }
    }

    /// Whether a message can be written now: the session is open, or it is a
    /// stream whose call head is sent. A gRPC client sends without waiting for the
    /// response's head, and some proxies (nginx's `grpc_pass`) pass the call on
    /// only once its first message has come.
    pub fn writable(&self) -> bool {
        self.phase == Phase::Open || (self.phase == Phase::Upgrading && self.grpc.is_some())
    }

    pub fn drop_socket(&mut self) {
        self.sock = None;
        self.tls = None;
        self.out.clear();
        self.rstart = 0;
        self.rend = 0;
        self.frag = None;
        self.pending = None;
        self.grpc = None;
        self.queue.clear();
        self.goaway = None;
    }

    /// Starts a connect registered on `ep` under `key` (its high half is the new
    /// generation).
    pub fn connect(
        &mut self,
        spec: &SessionSpec,
        ep: &std::os::fd::OwnedFd,
        key: u64,
        now: Nanos,
    ) -> Result<(), (&'static str, String)> {
        self.drop_socket();
        self.generation = (key >> 32) as u32;
        self.attempt_at = now;
        let fail = |e: io::Error| ("connect", format!("connect to {}: {e}", spec.addr));
        let (sock, _) = crate::worker::connect(spec.addr, false).map_err(fail)?;
        // Echoes are timed by when their bytes arrived, not when this thread woke
        // to read them (crate::rx), as responses are.
        crate::rx::enable(&sock);
        let flags = epoll::EventFlags::IN
            | epoll::EventFlags::OUT
            | epoll::EventFlags::RDHUP
            | epoll::EventFlags::ET;
        epoll::add(ep, &sock, epoll::EventData::new_u64(key), flags).map_err(|e| fail(e.into()))?;
        if let Some((config, name)) = &spec.tls {
            let c = ClientConnection::new(config.clone(), name.clone())
                .map_err(|e| ("tls", format!("TLS: {e}")))?;
            self.tls = Some(Box::new(c));
        }
        if self.buf.len() < BUF {
            self.buf.resize(BUF, 0);
        }
        self.sock = Some(sock);
        self.phase = Phase::Connecting;
        Ok(())
    }

    /// What opens the session, queued to be written: the upgrade request, or a
    /// stream's preface, settings and call head.
    fn queue_open(&mut self, spec: &SessionSpec) {
        if spec.kind == SessionKind::Grpc {
            let mut c = Box::new(StreamClient::new(&spec.backend_header));
            let headers: Vec<(String, String)> = spec
                .headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
                .collect();
            let scheme = if spec.tls.is_some() { "https" } else { "http" };
            c.start(&mut self.out, scheme, &spec.host, &spec.path, &headers);
            self.grpc = Some(c);
            return;
        }
        let mut req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {}\r\n",
            spec.path, spec.host, self.key
        );
        for (name, value) in &spec.headers {
            req.push_str(name);
            req.push_str(": ");
            req.push_str(value);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        self.out.extend_from_slice(req.as_bytes());
    }

    /// Writes what is queued, as far as the socket takes it.
    pub fn flush(&mut self) -> Result<(), SessionEnd> {
        let Some(sock) = self.sock.as_mut() else {
            return Ok(());
        };
        let broken = |_: io::Error| SessionEnd::Reset;
        match self.tls.as_deref_mut() {
            None => {
                let mut written = 0;
                while written < self.out.len() {
                    match sock.write(&self.out[written..]) {
                        Ok(n) => written += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(broken(e)),
                    }
                }
                self.out.drain(..written);
            }
            Some(tls) => {
                if !self.out.is_empty() {
                    tls.writer().write_all(&self.out).map_err(broken)?;
                    self.out.clear();
                }
                while tls.wants_write() {
                    match tls.write_tls(sock) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(broken(e)),
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads what has come: `Ok(true)` at EOF, or the error.
    fn read_in(&mut self) -> Result<bool, io::Error> {
        // This read's stamp only: an older one would time a new echo too early.
        self.stamp = 0;
        let Some(sock) = self.sock.as_mut() else {
            return Ok(true);
        };
        match self.tls.as_deref_mut() {
            None => loop {
                if !room(&mut self.buf, &mut self.rstart, &mut self.rend) {
                    return Ok(false);
                }
                let mut stamp = 0;
                let read = crate::rx::Stamped {
                    sock,
                    stamp: &mut stamp,
                    on: true,
                }
                .read(&mut self.buf[self.rend..]);
                if stamp != 0 {
                    self.stamp = stamp;
                }
                match read {
                    Ok(0) => return Ok(true),
                    Ok(n) => self.rend += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            },
            Some(tls) => loop {
                // Until the socket has nothing more: the registration is
                // edge-triggered.
                let mut stamp = 0;
                let read = tls.read_tls(&mut crate::rx::Stamped {
                    sock,
                    stamp: &mut stamp,
                    on: true,
                });
                if stamp != 0 {
                    self.stamp = stamp;
                }
                let (eof, drained) = match read {
                    Ok(0) => (true, false),
                    Ok(_) => (false, false),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => (false, true),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                tls.process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                // The plaintext that came.
                while room(&mut self.buf, &mut self.rstart, &mut self.rend) {
                    match tls.reader().read(&mut self.buf[self.rend..]) {
                        Ok(0) => return Ok(true),
                        Ok(n) => self.rend += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(true),
                        Err(e) => return Err(e),
                    }
                }
                if eof {
                    return Ok(true);
                }
                // The handshake's answers.
                while tls.wants_write() {
                    match tls.write_tls(sock) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                }
                if drained {
                    return Ok(false);
                }
            },
        }
    }

    /// Handles an event on the socket.
    pub fn step(&mut self, spec: &SessionSpec, rng: &mut u64) -> Step {
        if self.phase == Phase::Connecting {
            let Some(sock) = self.sock.as_ref() else {
                return Step::Nothing;
            };
            match connect_result(sock) {
                Ok(false) => return Step::Nothing,
                Err(e) => {
                    return Step::OpenFailed("connect", format!("connect to {}: {e}", spec.addr))
                }
                Ok(true) => {
                    self.queue_open(spec);
                    self.phase = Phase::Upgrading;
                }
            }
        }
        if !matches!(self.phase, Phase::Upgrading | Phase::Open | Phase::Closing) {
            return Step::Nothing;
        }
        if let Err(end) = self.flush() {
            return match self.phase {
                Phase::Upgrading => {
                    Step::OpenFailed("connect", "the upgrade request could not be sent".into())
                }
                Phase::Closing => self.closed(),
                _ => Step::Ended(end),
            };
        }
        let read = self.read_in();
        match self.phase {
            Phase::Upgrading => {
                let answered = if self.grpc.is_some() {
                    self.grpc_answer()
                } else {
                    self.answer(spec)
                };
                match (answered, read) {
                    (Some(step), _) => step,
                    (None, Ok(false)) => Step::Nothing,
                    (None, Ok(true)) => Step::OpenFailed(
                        "eof",
                        "the connection closed before an answer to the upgrade".into(),
                    ),
                    (None, Err(e)) if e.kind() == io::ErrorKind::InvalidData => {
                        Step::OpenFailed("tls", format!("TLS: {e}"))
                    }
                    (None, Err(e)) => Step::OpenFailed(
                        "eof",
                        format!("the connection failed before an answer to the upgrade: {e}"),
                    ),
                }
            }
            Phase::Open => match read {
                Ok(false) => Step::Frames,
                Ok(true) => Step::Ended(SessionEnd::Eof),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    Step::Ended(SessionEnd::Protocol)
                }
                Err(_) => Step::Ended(SessionEnd::Reset),
            },
            _ => {
                // Closing: the server's close frame or its EOF ends it.
                while let Frame::Echo(_) | Frame::Reason(..) = self.next_frame(rng) {}
                if self.phase == Phase::Done || !matches!(read, Ok(false)) {
                    return self.closed();
                }
                Step::Nothing
            }
        }
    }

    fn closed(&mut self) -> Step {
        self.drop_socket();
        self.phase = Phase::Done;
        Step::Closed
    }

    /// The answer to the upgrade, once its head is in: `None` until then.
    fn answer(&mut self, spec: &SessionSpec) -> Option<Step> {
        let data = &self.buf[self.rstart..self.rend];
        let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            return (data.len() > MAX_HEAD || (data.len() >= 5 && !data.starts_with(b"HTTP/")))
                .then(|| not_websocket(data));
        };
        let head = &data[..at];
        if !head.starts_with(b"HTTP/1.") {
            return Some(not_websocket(data));
        }
        let line_end = head.iter().position(|&b| b == b'\r').unwrap_or(head.len());
        let status_line = String::from_utf8_lossy(&head[..line_end]).into_owned();
        let code = head.get(9..12);
        if code != Some(b"101") {
            return Some(Step::OpenFailed(
                "refused",
                format!(
                    "the upgrade was answered {:?}, not 101; first bytes: {}",
                    status_line,
                    escaped(data, 60)
                ),
            ));
        }
        let mut accept_ok = false;
        let mut backend = None;
        for line in head.split(|&b| b == b'\n').skip(1) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
            if name.eq_ignore_ascii_case(b"sec-websocket-accept") {
                accept_ok = value == self.accept.as_bytes();
            } else if name.eq_ignore_ascii_case(spec.backend_header.as_bytes()) {
                backend = Some(String::from_utf8_lossy(value).into_owned());
            }
        }
        if !accept_ok {
            return Some(Step::OpenFailed(
                "not_websocket",
                format!(
                    "{status_line:?} without the Sec-WebSocket-Accept of the key sent: not a \
                     WebSocket server"
                ),
            ));
        }
        self.rstart += at + 4;
        self.phase = Phase::Open;
        Some(Step::Opened(backend))
    }

    /// A stream's frames read so far: events into [`Session::queue`], what they
    /// call for (acknowledgements, windows) written. `Some` in the open: the
    /// response head's verdict.
    fn grpc_read(&mut self) -> Option<Step> {
        let opening = self.phase == Phase::Upgrading;
        let closing = self.phase == Phase::Closing;
        let c = self.grpc.as_deref_mut()?;
        let (queue, goaway) = (&mut self.queue, &mut self.goaway);
        let mut verdict = None;
        let read = c.read(&self.buf[self.rstart..self.rend], &mut self.out, &mut |e| {
            match e {
                Event::Response {
                    status,
                    backend,
                    grpc_status,
                    grpc_message,
                } => {
                    let refused = |what: String| Step::OpenFailed("refused", what);
                    verdict = Some(if status != 200 {
                        refused(format!("the call was answered :status {status}, not 200"))
                    } else if let Some(code) = grpc_status {
                        refused(format!(
                            "the call was answered grpc-status {code} {} at once: {:?}",
                            http2::stream::status_name(code),
                            String::from_utf8_lossy(grpc_message)
                        ))
                    } else {
                        Step::Opened(backend.map(|b| String::from_utf8_lossy(b).into_owned()))
                    });
                }
                Event::Message(m) => queue.push_back(match echo_seq(m) {
                    Some(n) => Frame::Echo(n),
                    None => Frame::End(SessionEnd::Protocol),
                }),
                Event::Trailers {
                    grpc_status,
                    grpc_message,
                } => {
                    // No status in the trailers is UNKNOWN (gRPC's rule).
                    let end = SessionEnd::Status(grpc_status.unwrap_or(2));
                    if !closing {
                        let why = String::from_utf8_lossy(grpc_message).into_owned();
                        queue.push_back(Frame::Reason(end, why));
                    }
                    queue.push_back(Frame::End(end));
                }
                Event::Reset(code) => queue.push_back(Frame::End(SessionEnd::StreamReset(code))),
                Event::GoAway { last, code } => {
                    *goaway = Some(code);
                    if last < http2::stream::STREAM {
                        // Not taken: the stream was never processed.
                        queue.push_back(Frame::End(SessionEnd::StreamReset(
                            http2::frame::REFUSED_STREAM,
                        )));
                    }
                }
            }
        });
        match read {
            Ok(n) => self.rstart += n,
            Err(e) => {
                self.rstart = self.rend;
                if opening {
                    // A head that refused the call says why better than what came
                    // after it (a proxy's 404 page, not a gRPC message).
                    return Some(match verdict {
                        Some(v @ Step::OpenFailed(..)) => v,
                        _ => Step::OpenFailed("not_http2", format!("HTTP/2: {e}")),
                    });
                }
                self.queue.push_back(Frame::End(SessionEnd::Protocol));
            }
        }
        let _ = self.flush();
        verdict
    }

    /// A stream's answer to its open: `None` until the response head has come.
    fn grpc_answer(&mut self) -> Option<Step> {
        let data = &self.buf[self.rstart..self.rend];
        if data.starts_with(b"HTTP/") {
            return Some(Step::OpenFailed(
                "not_http2",
                format!(
                    "the server answered HTTP/1 to the HTTP/2 preface (no h2c there?); first \
                     bytes: {}",
                    escaped(data, 60)
                ),
            ));
        }
        let verdict = self.grpc_read()?;
        if matches!(verdict, Step::Opened(_)) {
            self.phase = Phase::Open;
        }
        Some(verdict)
    }

    /// Writes one message: a masked frame, or a stream's length-prefixed message.
    pub fn send_message(&mut self, payload: &[u8], rng: &mut u64) {
        match self.grpc.as_deref_mut() {
            Some(c) => c.send(&mut self.out, payload),
            None => {
                let mask = next_mask(rng);
                ws::masked_frame(&mut self.out, ws::BINARY, payload, mask);
            }
        }
    }

    /// The next whole frame read, answering pings and a server's close on the way.
    pub fn next_frame(&mut self, rng: &mut u64) -> Frame {
        if let Some(end) = self.pending.take() {
            return Frame::End(end);
        }
        if self.grpc.is_some() {
            if self.queue.is_empty() {
                self.grpc_read();
            }
            return match self.queue.pop_front() {
                Some(Frame::End(_)) if self.phase == Phase::Closing => {
                    // The answer to the client's end: done.
                    self.drop_socket();
                    self.phase = Phase::Done;
                    Frame::None
                }
                Some(f) => f,
                None => {
                    if self.rstart == self.rend {
                        (self.rstart, self.rend) = (0, 0);
                    }
                    Frame::None
                }
            };
        }
        loop {
            if self.rstart == self.rend {
                (self.rstart, self.rend) = (0, 0);
                return Frame::None;
            }
            let h = match ws::parse(&self.buf[self.rstart..self.rend], false) {
                Parsed::Incomplete => return Frame::None,
                Parsed::Refused(code) => {
                    self.close_with(code, rng);
                    return Frame::End(SessionEnd::Protocol);
                }
                Parsed::Frame(h) => h,
            };
            if self.rend - self.rstart < h.len + h.payload {
                return Frame::None;
            }
            let at = self.rstart + h.len;
            self.rstart = at + h.payload;
            let payload = &self.buf[at..at + h.payload];
            let seq = || {
                payload
                    .get(..8)
                    .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
            };
            match h.opcode {
                ws::TEXT | ws::BINARY => {
                    let Some(n) = seq() else {
                        return Frame::End(SessionEnd::Protocol);
                    };
                    if h.fin {
                        return Frame::Echo(n);
                    }
                    self.frag = Some(n);
                }
                ws::CONTINUATION => {
                    if h.fin {
                        match self.frag.take() {
                            Some(n) => return Frame::Echo(n),
                            None => return Frame::End(SessionEnd::Protocol),
                        }
                    }
                }
                ws::PING => {
                    let p = payload.to_vec();
                    let mask = next_mask(rng);
                    ws::masked_frame(&mut self.out, ws::PONG, &p, mask);
                    let _ = self.flush();
                }
                ws::PONG => {}
                _ => {
                    // CLOSE.
                    let (code, reason) = ws::close_reason(payload);
                    let reason = String::from_utf8_lossy(reason).into_owned();
                    if self.phase == Phase::Closing {
                        // The answer to the client's close: done.
                        self.drop_socket();
                        self.phase = Phase::Done;
                        return Frame::None;
                    }
                    // Answered with its code (RFC 6455 5.5.1), then the session ends.
                    let mask = next_mask(rng);
                    let echo = if code == 1005 {
                        vec![]
                    } else {
                        code.to_be_bytes().to_vec()
                    };
                    ws::masked_frame(&mut self.out, ws::CLOSE, &echo, mask);
                    let _ = self.flush();
                    self.pending = Some(SessionEnd::Close(code));
                    return Frame::Reason(SessionEnd::Close(code), reason);
                }
            }
        }
    }

    /// Sends a close frame with `code`.
    fn close_with(&mut self, code: u16, rng: &mut u64) {
        let mask = next_mask(rng);
        ws::masked_frame(&mut self.out, ws::CLOSE, &code.to_be_bytes(), mask);
        let _ = self.flush();
    }

    /// The end of the run: the client's close frame (1000), or its end of the
    /// stream, and the server's answer awaited.
    pub fn start_close(&mut self, rng: &mut u64) {
        self.held_to_end = true;
        match self.grpc.as_deref_mut() {
            Some(c) => {
                c.finish(&mut self.out);
                let _ = self.flush();
            }
            None => self.close_with(ws::NORMAL, rng),
        }
        self.phase = Phase::Closing;
    }
}

/// Room at the end of a read buffer: what was parsed (before `rstart`) is dropped,
/// and a buffer full of one frame grows. `false` when it holds the largest frame
/// already (its parse then refuses it).
fn room(buf: &mut Vec<u8>, rstart: &mut usize, rend: &mut usize) -> bool {
    if *rend < buf.len() {
        return true;
    }
    if *rstart > 0 {
        buf.copy_within(*rstart..*rend, 0);
        *rend -= *rstart;
        *rstart = 0;
        return true;
    }
    if buf.len() >= ws::MAX_PAYLOAD + 16 {
        return false;
    }
    let n = (buf.len() * 2).clamp(BUF, ws::MAX_PAYLOAD + 16);
    buf.resize(n, 0);
    true
}

/// The message number an echo carries: the first 8 bytes of the payload of an
/// `EchoReply` (field 2, as the backend's streaming Echo answers), else of the
/// message itself (a server that echoes the bytes as they came).
fn echo_seq(m: &[u8]) -> Option<u64> {
    let first8 = |b: &[u8]| {
        b.get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8")))
    };
    let mut at = 0;
    while at < m.len() {
        let tag = m[at];
        at += 1;
        if tag & 0x07 != 2 {
            break;
        }
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let b = *m.get(at)?;
            at += 1;
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 || shift > 28 {
                break;
            }
        }
        let field = m.get(at..at.checked_add(len)?)?;
        if tag == 0x12 {
            return first8(field);
        }
        at += len;
    }
    first8(m)
}

/// The loop's one generator of keys and masks (xorshift64): a WebSocket mask only
/// has to vary, not to be secret.
pub(super) fn xorshift(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

pub(super) fn next_mask(rng: &mut u64) -> [u8; 4] {
    (xorshift(rng) as u32).to_be_bytes()
}

/// An answer that is not HTTP, or whose head never ends.
fn not_websocket(data: &[u8]) -> Step {
    Step::OpenFailed(
        "not_websocket",
        format!(
            "the answer to the upgrade is not an HTTP/1.1 head; first bytes: {}",
            escaped(data, 60)
        ),
    )
}

/// The first `n` bytes, printable.
fn escaped(data: &[u8], n: usize) -> String {
    let s: String = data[..data.len().min(n)]
        .iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    format!("\"{s}\"")
}

#[cfg(test)]
mod tests {
    use super::echo_seq;

    #[test]
    fn an_echo_carries_its_number_in_an_echo_reply_or_as_sent() {
        let n = 0x0102_0304_0506_0708u64.to_be_bytes();
        // EchoReply { backend = 1: "b-1", payload = 2: n + padding }.
        let mut reply = vec![0x0a, 3, b'b', b'-', b'1', 0x12, 10];
        reply.extend_from_slice(&n);
        reply.extend_from_slice(&[0, 0]);
        assert_eq!(echo_seq(&reply), Some(0x0102_0304_0506_0708));
        // The bytes echoed as they were sent.
        assert_eq!(echo_seq(&n), Some(0x0102_0304_0506_0708));
        // Too short for a number either way.
        assert_eq!(echo_seq(&[0x12, 2, 1, 2]), None);
        // A payload field whose length runs past the message: no number.
        assert_eq!(echo_seq(&[0x12, 50, 1, 2, 3, 4, 5, 6, 7, 8]), None);
    }
}
