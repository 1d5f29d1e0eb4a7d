//! One request on one connection, HTTP/1.1 over TCP or TLS: opening the connection,
//! writing the request, reading and parsing the response, completing or failing it,
//! and what an idle kept-alive connection's readiness means. HTTP/2's sessions are
//! [`super::h2`].
//!
//! This is the state machine the event loop ([`super::event_loop`]) drives; the
//! functions it calls per request are `#[inline]` so that they stay as cheap as when
//! both lived in one file.

use super::*;

impl Worker {
    /// Whether the next request goes into the sample.
    #[inline]
    pub(super) fn sample_next(&mut self) -> bool {
        let f = self.shared.sample;
        if f <= 0.0 {
            return false;
        }
        if f >= 1.0 {
            return true;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        ((self.rng >> 11) as f64 / (1u64 << 53) as f64) < f
    }

    #[inline]
    pub(super) fn start_request(
        &mut self,
        ci: usize,
        target: u32,
        intended: Nanos,
        measured: bool,
        now: Nanos,
    ) {
        let sampled = measured && self.sample_next();
        let mix = &self.shared.mix;
        let c = &mut self.conns[ci];
        if measured {
            self.rec.totals.mix.sent(c.host);
        }
        if mix.targets.len() > 1 {
            c.parser.set_head_request(mix.targets[target as usize].head);
        }
        c.target = target;
        c.sampled = sampled;
        debug_assert!(!c.busy);
        c.busy = true;
        c.measured = measured;
        c.intended = intended;
        c.dispatched = now;
        c.written = 0;
        self.busy += 1;
        if c.session != NO_SESSION {
            self.h2_start(ci, now);
            return;
        }
        match c.phase {
            Phase::Idle => {
                enter(&mut self.opening, &mut c.phase, Phase::Active);
                c.deadline = now + self.shared.timeout_ns;
                let r = self.drive(ci, false);
                self.settle(ci, r);
            }
            Phase::Closed => {
                if std::mem::take(&mut self.conns[ci].closed_by_server) && measured {
                    self.rec.totals.reconnects_after_server_close += 1;
                    if let Some(m) = &self.shared.marks {
                        self.rec.totals.windows.reconnect(m.window_of(intended));
                    }
                }
                self.open(ci, now)
            }
            // A connection still opening (only possible before the run) takes the
            // request along; it is written once the connection is up.
            Phase::Connecting | Phase::Handshaking | Phase::Active => {}
        }
    }

    /// Starts a TCP connection.
    #[inline]
    pub(super) fn open(&mut self, ci: usize, now: Nanos) {
        let s = &self.shared;
        let res = connect(s.addr, s.new_connection);
        let c = &mut self.conns[ci];
        c.deadline = now + s.connect_timeout_ns;
        c.parser.reset();
        c.head_len = 0;
        c.peer_closed = false;
        c.reused = false;
        c.last_status = 0;
        c.rx_stamp = 0;
        match res {
            Ok((sock, connected)) => {
                if s.rate.is_some() {
                    crate::rx::enable(&sock);
                }
                let key = ((c.generation as u64) << 32) | ci as u64;
                let flags = epoll::EventFlags::IN
                    | epoll::EventFlags::OUT
                    | epoll::EventFlags::RDHUP
                    | epoll::EventFlags::ET;
                if let Err(e) = epoll::add(&self.ep, &sock, epoll::EventData::new_u64(key), flags) {
                    self.fail(ci, Failure::io(ErrorKind::Connect, e.into()));
                    return;
                }
                c.sock = Some(sock);
                enter(&mut self.opening, &mut c.phase, Phase::Connecting);
                if connected {
                    self.connected(ci, now);
                }
            }
            Err(e) => self.fail(ci, Failure::io(ErrorKind::Connect, e)),
        }
    }

    /// TCP is up: start TLS, or go straight to the request.
    #[inline]
    pub(super) fn connected(&mut self, ci: usize, now: Nanos) {
        let c = &mut self.conns[ci];
        if let Some(cfg) = &self.shared.tls {
            let name = self.shared.mix.hosts[c.host as usize]
                .server_name
                .clone()
                .expect("an https host has a server name (checked when the mix was built)");
            match rustls::ClientConnection::new(cfg.clone(), name) {
                Ok(t) => c.tls = Some(Box::new(t)),
                Err(e) => {
                    self.fail(ci, Failure::new(ErrorKind::Tls, Cause::Tls(e)));
                    return;
                }
            }
            enter(&mut self.opening, &mut c.phase, Phase::Handshaking);
            let r = self.drive(ci, false);
            self.settle(ci, r);
        } else if c.busy {
            enter(&mut self.opening, &mut c.phase, Phase::Active);
            c.deadline = now + self.shared.timeout_ns;
            let r = self.drive(ci, false);
            self.settle(ci, r);
        } else {
            enter(&mut self.opening, &mut c.phase, Phase::Idle);
        }
    }

    /// Acts on the result of driving a connection.
    #[inline]
    pub(super) fn settle(&mut self, ci: usize, r: Result<Step, Failure>) {
        match r {
            Ok(Step::Pending) => {}
            Ok(Step::Done(resp)) => self.complete(ci, resp),
            Err(f) => self.fail(ci, f),
        }
    }

    pub(super) fn complete(&mut self, ci: usize, resp: Response) {
        let c = &mut self.conns[ci];
        // Complete when its last bytes arrived, however long the thread slept or
        // worked before reading them.
        let now = crate::rx::arrived(
            c.rx_stamp,
            self.shared.clock.now(),
            crate::rx::wall_now(),
            c.dispatched,
        );
        let latency = now - c.origin();
        if c.measured {
            let group = self.shared.mix.targets[c.target as usize].group;
            self.rec.totals.mix.response(group, latency, resp.status);
            if !self.answered {
                self.answered = true;
                self.shared.answered.store(true, Ordering::Relaxed);
            }
            let backend =
                self.rec
                    .response(now, latency, now - c.dispatched, resp.status, c.backend());
            if let Some(m) = &self.shared.marks {
                let w = m.window_of(c.intended);
                let windows = &mut self.rec.totals.windows;
                windows.response(w, latency, resp.status);
                if resp.status < 400 && !self.shared.markers.is_empty() {
                    windows.marked(w, c.markers(), now);
                }
            }
            if let Some(st) = step_of(&self.shared.step_bounds, self.measure_start, c.intended) {
                self.rec.totals.steps.response(st, latency, resp.status);
            }
            if resp.status >= 400 {
                let t = &mut self.rec.totals;
                t.first_errors
                    .note(ErrorKind::Status, &Cause::Status(resp.status));
            }
            if c.ambiguous() {
                self.rec.totals.framing_warnings.note(resp.status);
            }
            if c.sampled {
                self.rec.totals.samples.push(RawSample {
                    intended: c.intended,
                    latency_ns: latency,
                    status: resp.status,
                    error: if resp.status >= 400 {
                        1 + ErrorKind::Status.index() as u8
                    } else {
                        0
                    },
                    backend,
                });
            }
        }
        let c = &mut self.conns[ci];
        if c.session != NO_SESSION {
            c.phase = Phase::Idle;
            self.finish(ci, now);
            return;
        }
        c.reused = true;
        c.last_status = if c.measured { resp.status } else { 0 };
        // The server closed a connection it had kept alive (no `Connection: close`),
        // and said so with this response: it must not carry another request.
        let server_closed = c.peer_closed && !resp.close && !self.shared.spec.reuse_closed;
        let close = resp.close || self.shared.new_connection || server_closed;
        self.finish(ci, now);
        if close {
            self.close(ci);
            self.conns[ci].closed_by_server = server_closed;
        } else {
            enter(&mut self.opening, &mut self.conns[ci].phase, Phase::Idle);
        }
    }

    /// A request (or a connection opened ahead of the run) failed.
    #[inline]
    pub(super) fn fail(&mut self, ci: usize, f: Failure) {
        let kind = f.kind;
        let c = &self.conns[ci];
        if c.busy && c.measured {
            self.rec.error(kind);
            let group = self.shared.mix.targets[c.target as usize].group;
            self.rec.totals.mix.error(group, kind);
            if let Some(m) = &self.shared.marks {
                self.rec.totals.windows.error(m.window_of(c.intended), kind);
            }
            if let Some(st) = step_of(&self.shared.step_bounds, self.measure_start, c.intended) {
                self.rec.totals.steps.error(st, kind);
            }
            self.rec.totals.first_errors.note(kind, &f.cause);
            if c.sampled {
                let now = self.shared.clock.now();
                self.rec.totals.samples.push(RawSample {
                    intended: c.intended,
                    latency_ns: now.saturating_sub(c.origin()),
                    status: 0,
                    error: 1 + kind.index() as u8,
                    backend: -1,
                });
            }
        }
        self.close(ci);
        if self.conns[ci].busy {
            let now = self.shared.clock.now();
            self.finish(ci, now);
        }
    }

    /// The connection no longer carries a request: give it back to its lane.
    pub(super) fn finish(&mut self, ci: usize, now: Nanos) {
        let c = &mut self.conns[ci];
        c.busy = false;
        self.busy -= 1;
        let li = c.lane;
        let lane = &mut self.lanes[li as usize];
        lane.idle.push(ci as u32);
        if lane.blocked && !lane.finished {
            lane.blocked = false;
            lane.unblocked_at = now;
            self.heap.push(Reverse((lane.due(now), li)));
        }
    }

    #[inline]
    pub(super) fn close(&mut self, ci: usize) {
        if self.conns[ci].session != NO_SESSION {
            self.h2_release(ci);
            return;
        }
        let c = &mut self.conns[ci];
        if c.sock.is_some() {
            // Closing the descriptor also removes it from the epoll set.
            c.sock = None;
            c.tls = None;
            c.generation = c.generation.wrapping_add(1);
        }
        enter(&mut self.opening, &mut c.phase, Phase::Closed);
        c.parser.reset();
        c.peer_closed = false;
        c.closed_by_server = false;
    }

    /// Something happened on an idle connection. Servers close idle keep-alive
    /// connections as a matter of course (a reload, an idle timeout): that is not an
    /// error, the connection is closed at once and the next request opens a new one
    /// (counted in `reconnects_after_server_close`), unless `reuse_closed` keeps
    /// wrk2's way. Bytes, though, are the rest of the last response: a framing
    /// desync, which turns that response into a `framing` error.
    #[inline]
    pub(super) fn idle_event(&mut self, ci: usize) {
        match self.idle_read(ci) {
            IdleRead::Nothing => {}
            IdleRead::Closed if self.shared.spec.reuse_closed => {}
            IdleRead::Closed => {
                self.close(ci);
                self.conns[ci].closed_by_server = true;
            }
            IdleRead::Bytes => {
                let c = &self.conns[ci];
                if c.last_status != 0 {
                    let (intended, status) = (c.intended, c.last_status);
                    let group = self.shared.mix.targets[c.target as usize].group;
                    self.rec.desync(status);
                    self.rec.totals.mix.desync(group, status);
                    let was_error = status >= 400;
                    if let Some(m) = &self.shared.marks {
                        self.rec
                            .totals
                            .windows
                            .desync(m.window_of(intended), was_error);
                    }
                    if let Some(st) =
                        step_of(&self.shared.step_bounds, self.measure_start, intended)
                    {
                        self.rec.totals.steps.desync(st, was_error);
                    }
                    self.rec.totals.first_errors.note(
                        ErrorKind::Framing,
                        &Cause::Text(
                            "bytes arrived on a kept-alive connection after a complete response",
                        ),
                    );
                }
                self.close(ci);
            }
        }
    }

    /// What an idle connection's readiness was.
    pub(super) fn idle_read(&mut self, ci: usize) -> IdleRead {
        let c = &mut self.conns[ci];
        let Some(sock) = c.sock.as_mut() else {
            return IdleRead::Closed;
        };
        match c.tls.as_mut() {
            None => match sock.read(&mut self.scratch[..1]) {
                Ok(0) => IdleRead::Closed,
                Ok(_) => IdleRead::Bytes,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => IdleRead::Nothing,
                Err(_) => IdleRead::Closed,
            },
            Some(tls) => loop {
                // TLS 1.3 servers send session tickets after the handshake; those are
                // fine. Application data is a desync; a close is a close.
                match tls.read_tls(sock) {
                    Ok(0) => return IdleRead::Closed,
                    Ok(_) => match tls.process_new_packets() {
                        Ok(st) if st.plaintext_bytes_to_read() > 0 => return IdleRead::Bytes,
                        Ok(st) if st.peer_has_closed() => return IdleRead::Closed,
                        Ok(_) => {}
                        Err(_) => return IdleRead::Closed,
                    },
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return IdleRead::Nothing,
                    Err(_) => return IdleRead::Closed,
                }
            },
        }
    }

    /// Makes all the progress possible on a connection's request without blocking.
    /// `readable`: called from a readiness event (at dispatch nothing can have been
    /// answered yet, so no read is tried, saving a syscall per request).
    #[inline]
    pub(super) fn drive(&mut self, ci: usize, readable: bool) -> Result<Step, Failure> {
        if self.conns[ci].tls.is_some() {
            self.drive_tls(ci, readable)
        } else {
            self.drive_plain(ci, readable)
        }
    }

    pub(super) fn drive_plain(&mut self, ci: usize, readable: bool) -> Result<Step, Failure> {
        let stamps = self.shared.rate.is_some();
        let c = &mut self.conns[ci];
        let req = &self.shared.mix.targets[c.target as usize].request;
        let Some(sock) = c.sock.as_mut() else {
            return Err(NO_SOCKET);
        };
        if !c.busy {
            return Ok(Step::Pending);
        }
        let mut wrote_now = false;
        while c.written < req.len() {
            match sock.write(&req[c.written..]) {
                Ok(0) => return Err(Failure::new(ErrorKind::Write, Cause::Text(WROTE_NOTHING))),
                Ok(n) => {
                    c.written += n;
                    wrote_now = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Pending),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::io(ErrorKind::Write, e)),
            }
        }
        if wrote_now && !readable {
            return Ok(Step::Pending);
        }
        let mut read = 0;
        let mut sock = crate::rx::Stamped {
            sock,
            stamp: &mut c.rx_stamp,
            on: stamps,
        };
        let step = read_response(
            &mut sock,
            &mut c.parser,
            &mut self.scratch,
            &mut read,
            c.reused,
        );
        if c.measured {
            self.rec.totals.bytes_read += read;
        }
        step
    }

    pub(super) fn drive_tls(&mut self, ci: usize, readable: bool) -> Result<Step, Failure> {
        let stamps = self.shared.rate.is_some();
        let clock = self.shared.clock;
        let timeout_ns = self.shared.timeout_ns;
        let c = &mut self.conns[ci];
        let req = &self.shared.mix.targets[c.target as usize].request;
        let (Some(sock), Some(tls)) = (c.sock.as_mut(), c.tls.as_mut()) else {
            return Err(NO_SOCKET);
        };
        // A failure during the handshake is a `tls` error; after it, a read or write.
        let during = |handshaking: bool, after: ErrorKind| {
            if handshaking {
                ErrorKind::Tls
            } else {
                after
            }
        };
        loop {
            let handshaking = tls.is_handshaking();
            // rustls buffers a request written during the handshake and sends it as
            // soon as the handshake allows.
            if c.busy && c.written < req.len() {
                match tls.writer().write(&req[c.written..]) {
                    Ok(n) => c.written += n,
                    Err(e) => return Err(Failure::io(ErrorKind::Write, e)),
                }
            }
            while tls.wants_write() {
                match tls.write_tls(sock) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(Failure::io(during(handshaking, ErrorKind::Write), e));
                    }
                }
            }
            if !readable {
                return Ok(Step::Pending);
            }
            let got = if handshaking {
                tls.read_tls(&mut HeadReader {
                    sock,
                    head: &mut c.head,
                    len: &mut c.head_len,
                })
            } else {
                tls.read_tls(&mut crate::rx::Stamped {
                    sock,
                    stamp: &mut c.rx_stamp,
                    on: stamps,
                })
            };
            match got {
                Ok(0) => {
                    if handshaking {
                        return Err(Failure::new(
                            ErrorKind::Tls,
                            Cause::Text(
                                "the server closed the connection during the TLS handshake",
                            ),
                        ));
                    }
                    return eof_step(&mut c.parser);
                }
                Ok(_) => {
                    let st = match tls.process_new_packets() {
                        Ok(st) => st,
                        Err(e) => {
                            // Let the server see our alert, then give up.
                            let _ = tls.write_tls(sock);
                            let cause = if handshaking && c.head[..c.head_len as usize] == *b"HTTP/"
                            {
                                Cause::PlainHttp
                            } else {
                                Cause::Tls(e)
                            };
                            return Err(Failure::new(during(handshaking, ErrorKind::Read), cause));
                        }
                    };
                    if handshaking && !tls.is_handshaking() {
                        if self.tls_version.is_none() {
                            self.tls_version = tls.protocol_version().map(version_name);
                        }
                        // Handshake done: the request timeout starts now.
                        if c.busy {
                            enter(&mut self.opening, &mut c.phase, Phase::Active);
                            c.deadline = clock.now() + timeout_ns;
                            if c.measured {
                                let t = &mut self.rec.totals;
                                t.handshakes += 1;
                                crate::tls::count_certificate(
                                    &mut t.certificates,
                                    tls.peer_certificates(),
                                    clock.now(),
                                );
                                if tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                                    t.resumed += 1;
                                }
                                if t.tls_version.is_none() {
                                    t.tls_version = tls.protocol_version().map(version_name);
                                }
                            }
                        } else {
                            enter(&mut self.opening, &mut c.phase, Phase::Idle);
                        }
                    }
                    if st.plaintext_bytes_to_read() > 0 {
                        loop {
                            match tls.reader().read(&mut self.scratch) {
                                Ok(0) => return eof_step(&mut c.parser),
                                Ok(n) => {
                                    // Response bytes after decryption, as for plain HTTP.
                                    if c.measured {
                                        self.rec.totals.bytes_read += n as u64;
                                    }
                                    match c.parser.feed(&self.scratch[..n]) {
                                        Ok(Some(r)) => return Ok(Step::Done(r)),
                                        Ok(None) => {}
                                        Err(e) => return Err(http_failure(e, c.reused)),
                                    }
                                }
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(e) => return Err(Failure::io(ErrorKind::Read, e)),
                            }
                        }
                    } else if st.peer_has_closed() {
                        return eof_step(&mut c.parser);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Pending),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Failure::io(during(handshaking, ErrorKind::Read), e));
                }
            }
        }
    }
}

/// Moves a connection to `phase`, keeping the count of connections that are opening
/// (connecting or in their TLS handshake) right.
#[inline]
pub(super) fn enter(opening: &mut u32, at: &mut Phase, phase: Phase) {
    let was = matches!(at, Phase::Connecting | Phase::Handshaking) as u32;
    let is = matches!(phase, Phase::Connecting | Phase::Handshaking) as u32;
    *opening = *opening + is - was;
    *at = phase;
}

/// A connection with no socket was driven: a bug, counted rather than panicking.
pub(super) const NO_SOCKET: Failure = Failure {
    kind: ErrorKind::Connect,
    cause: Cause::Text("no socket (this is a bug in ingressbench)"),
};
pub(super) const WROTE_NOTHING: &str = "the socket accepted no bytes of the request";

/// The socket as rustls reads it during a handshake, keeping the first bytes the
/// server sent: `HTTP/` there means a plain-HTTP server answered the ClientHello.
pub(super) struct HeadReader<'a> {
    pub(super) sock: &'a mut TcpStream,
    pub(super) head: &'a mut [u8; 5],
    pub(super) len: &'a mut u8,
}

impl Read for HeadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        let have = *self.len as usize;
        let k = (self.head.len() - have).min(n);
        self.head[have..have + k].copy_from_slice(&buf[..k]);
        *self.len += k as u8;
        Ok(n)
    }
}

/// Reads until the response is complete or the socket has nothing more.
pub(super) fn read_response(
    sock: &mut impl Read,
    parser: &mut ResponseParser,
    scratch: &mut [u8],
    bytes_read: &mut u64,
    reused: bool,
) -> Result<Step, Failure> {
    loop {
        match sock.read(scratch) {
            Ok(0) => return eof_step(parser),
            Ok(n) => {
                *bytes_read += n as u64;
                match parser.feed(&scratch[..n]) {
                    Ok(Some(r)) => return Ok(Step::Done(r)),
                    Ok(None) => {}
                    Err(e) => return Err(http_failure(e, reused)),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Pending),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::io(ErrorKind::Read, e)),
        }
    }
}

/// What bytes that are not a valid response are: a framing desync when they are
/// bytes after a complete response (in the same read), or bytes that cannot begin a
/// response on a connection that already carried one (the rest of the last, read
/// later); otherwise a bad response, a `read` error.
pub(super) fn http_failure(e: http1::Error, reused: bool) -> Failure {
    let kind = match e {
        http1::Error::TrailingBytes => ErrorKind::Framing,
        http1::Error::NotAResponse if reused => ErrorKind::Framing,
        _ => ErrorKind::Read,
    };
    Failure::new(kind, Cause::Http(e))
}

/// What an idle connection's readiness turned out to be.
pub(super) enum IdleRead {
    /// Nothing to read (a TLS session ticket, or a spurious wake-up).
    Nothing,
    /// The server closed it (or reset it).
    Closed,
    /// Bytes where none belong: the rest of the last response.
    Bytes,
}

/// The server closed the connection: that completes a read-until-close response;
/// anything else (nothing or half a response) is a read error.
pub(super) fn eof_step(parser: &mut ResponseParser) -> Result<Step, Failure> {
    match parser.eof() {
        Ok(Some(r)) => Ok(Step::Done(r)),
        Ok(None) => Err(Failure::new(
            ErrorKind::Read,
            Cause::Text("the server closed the connection without answering"),
        )),
        Err(e) => Err(Failure::new(ErrorKind::Read, Cause::Http(e))),
    }
}

pub(super) fn version_name(v: rustls::ProtocolVersion) -> &'static str {
    match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "other",
    }
}

/// Starts a non-blocking connect; `true` when it completed at once.
pub(crate) fn connect(addr: SocketAddr, new_connection: bool) -> io::Result<(TcpStream, bool)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_nonblocking(true)?;
    s.set_nodelay(true)?;
    if new_connection {
        // One connection per request would leave a TIME_WAIT socket per request on
        // this side and run out of local ports within a minute; an abortive close
        // leaves none. The server has already answered in full by then.
        s.set_linger(Some(std::time::Duration::ZERO))?;
    }
    let connected = match s.connect(&addr.into()) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
        Err(e) => return Err(e),
    };
    Ok((s.into(), connected))
}

/// The state of a non-blocking connect: `Ok(true)` connected, `Ok(false)` pending,
/// or why it failed.
pub(crate) fn connect_result(sock: &TcpStream) -> io::Result<bool> {
    match sock.take_error() {
        Ok(None) => {}
        Ok(Some(e)) | Err(e) => return Err(e),
    }
    match sock.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}
