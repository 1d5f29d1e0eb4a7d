//! HTTP/2 in the worker: a connection carries up to `--streams` requests at once.
//!
//! The worker's unit of work stays the *slot* (a [`Conn`]): one request in flight,
//! with its lane, its intended time, its deadline and its outcome, exactly as for
//! HTTP/1.1. With HTTP/2 a connection has `streams` slots instead of one; the socket,
//! TLS and the protocol state ([`http2::ClientConn`]) live in a [`Session`] the slots
//! share. So the schedule, the lanes, the drain, sampling and every count work
//! unchanged: a lane's request waits only when all of its connection's streams are
//! busy, and its latency still counts from its intended time.
//!
//! What only HTTP/2 has:
//! - a stream that times out is cancelled (RST_STREAM CANCEL), not its connection;
//! - a GOAWAY's refused streams go back to their slots and are sent again on a new
//!   connection once the old one has finished what it took (counted:
//!   `retried_after_goaway`);
//! - a reset stream is a `reset` error; a connection that fails fails every stream
//!   on it;
//! - a server that does not agree to HTTP/2 (ALPN) or answers h2c in HTTP/1.1 ends
//!   the run with a one-line error: every connection would fail the same way.

use super::*;
use http1::response::MAX_BACKEND_ID;

/// What an HTTP/2 run shares beyond [`Shared`].
pub struct H2Setup {
    /// The mix's requests in HTTP/2 form, by target index.
    pub reqs: Vec<http2::Request>,
    /// Slots (requests in flight) per connection.
    pub streams: usize,
    /// gRPC: a response is a success only with `grpc-status: 0`.
    pub grpc: bool,
    pub tls: bool,
    pub config: http2::Config,
}

/// A slot of an HTTP/1.1 run: its connection is its own.
pub(super) const NO_SESSION: u32 = u32::MAX;

/// One HTTP/2 connection and the slots it carries.
pub(super) struct Session {
    pub sock: Option<TcpStream>,
    pub tls: Option<Box<rustls::ClientConnection>>,
    pub phase: Phase,
    pub generation: u32,
    pub conn: http2::ClientConn,
    pub first_slot: u32,
    pub host: u32,
    pub deadline: Nanos,
    pub head: [u8; 5],
    pub head_len: u8,
    pub rx_stamp: u64,
    /// The server closed it while it carried nothing.
    pub closed_by_server: bool,
    /// Requests were added to its output since it was last written
    /// ([`Worker::flush_dirty`]).
    pub dirty: bool,
}

/// What a slot's response carried, noted field by field as HPACK decodes them.
#[derive(Debug)]
pub(super) struct Answer {
    pub status: u16,
    pub backend: [u8; MAX_BACKEND_ID],
    pub backend_len: u8,
    /// `grpc-status` (`u32::MAX`: none seen).
    pub grpc: u32,
    pub markers: http1::marker::MarkerScan,
}

impl Answer {
    pub(super) fn new(markers: http1::marker::MarkerScan) -> Answer {
        Answer {
            status: 0,
            backend: [0; MAX_BACKEND_ID],
            backend_len: 0,
            grpc: u32::MAX,
            markers,
        }
    }

    fn start(&mut self) {
        self.status = 0;
        self.backend_len = 0;
        self.grpc = u32::MAX;
        self.markers.start();
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Ev {
    /// The response ended; the kernel's receive stamp of the read that ended it.
    End(u64),
    Reset(u32),
    Refused,
}

/// The handler the protocol state tells what happened, slot by slot.
struct Sink<'a> {
    conns: &'a mut [Conn],
    events: &'a mut Vec<(u32, Ev)>,
    backend_header: &'a str,
    /// The receive stamp of the read being handed over (see [`crate::rx`]).
    stamp: u64,
}

impl http2::Handler for Sink<'_> {
    fn field(&mut self, slot: u32, name: &[u8], value: &[u8], trailer: bool) {
        let a = &mut self.conns[slot as usize].answer;
        if name == b":status" {
            if !trailer {
                a.status = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            }
            return;
        }
        if name == b"grpc-status" {
            a.grpc = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(2);
        } else if name.eq_ignore_ascii_case(self.backend_header.as_bytes()) && !trailer {
            let n = value.len().min(MAX_BACKEND_ID);
            a.backend[..n].copy_from_slice(&value[..n]);
            a.backend_len = n as u8;
        }
        if !trailer {
            a.markers.field(name);
        }
    }

    fn data(&mut self, slot: u32, data: &[u8]) {
        let a = &mut self.conns[slot as usize].answer;
        if !a.markers.is_empty() {
            a.markers.body(data);
        }
    }

    fn end(&mut self, slot: u32) {
        self.events.push((slot, Ev::End(self.stamp)));
    }

    fn reset(&mut self, slot: u32, code: u32) {
        self.events.push((slot, Ev::Reset(code)));
    }

    fn refused(&mut self, slot: u32) {
        self.events.push((slot, Ev::Refused));
    }
}

/// Sessions of `conns` connections with `streams` slots each, and their slots'
/// session numbers (slot `i` is stream `i % streams` of session `i / streams`).
pub(super) fn sessions(setup: &H2Setup, conns: usize) -> Vec<Session> {
    (0..conns)
        .map(|k| Session {
            sock: None,
            tls: None,
            phase: Phase::Closed,
            generation: 0,
            conn: http2::ClientConn::new(setup.config),
            first_slot: (k * setup.streams) as u32,
            host: 0,
            deadline: 0,
            head: [0; 5],
            head_len: 0,
            rx_stamp: 0,
            closed_by_server: false,
            dirty: false,
        })
        .collect()
}

impl Worker {
    fn setup(&self) -> &H2Setup {
        self.shared
            .h2
            .as_deref()
            .expect("an HTTP/2 worker has its setup")
    }

    fn slots_of(&self, si: usize) -> std::ops::Range<usize> {
        let n = self.setup().streams;
        let a = self.sessions[si].first_slot as usize;
        a..a + n
    }

    /// A request for slot `ci` (already marked busy): onto its connection's next
    /// stream, or opening the connection first.
    pub(super) fn h2_start(&mut self, ci: usize, now: Nanos) {
        let si = self.conns[ci].session as usize;
        match self.sessions[si].phase {
            Phase::Idle | Phase::Active => {
                // Written once per turn of the loop with every other request due
                // in it ([`Self::flush_dirty`]): one write for several streams.
                self.h2_open_stream(ci, now);
                if !std::mem::replace(&mut self.sessions[si].dirty, true) {
                    self.h2_dirty.push(si as u32);
                }
            }
            Phase::Closed => {
                if std::mem::take(&mut self.sessions[si].closed_by_server)
                    && self.conns[ci].measured
                {
                    self.rec.totals.reconnects_after_server_close += 1;
                    if let Some(m) = &self.shared.marks {
                        let w = m.window_of(self.conns[ci].intended);
                        self.rec.totals.windows.reconnect(w);
                    }
                }
                self.session_open(si, now);
            }
            Phase::Connecting | Phase::Handshaking => {
                let d = self.sessions[si].deadline;
                let c = &mut self.conns[ci];
                c.phase = Phase::Connecting;
                c.deadline = d;
            }
        }
    }

    /// Gives slot `ci`'s request to its ready connection (written at the next
    /// flush); a connection that takes no more streams (GOAWAY) is replaced once it
    /// has finished its own.
    fn h2_open_stream(&mut self, ci: usize, now: Nanos) {
        let si = self.conns[ci].session as usize;
        let timeout = self.shared.timeout_ns;
        let reqs = &self.shared.h2.as_deref().expect("HTTP/2 setup").reqs;
        let c = &mut self.conns[ci];
        c.answer.start();
        c.deadline = now + timeout;
        c.phase = Phase::Active;
        if self.sessions[si].conn.open(ci as u32, c.target, reqs) {
            c.stream_open = true;
        } else {
            self.h2_after(si, now);
        }
    }

    pub(super) fn session_open(&mut self, si: usize, now: Nanos) {
        let res = connect(self.shared.addr, false);
        let deadline = now + self.shared.connect_timeout_ns;
        let s = &mut self.sessions[si];
        s.deadline = deadline;
        s.head_len = 0;
        s.rx_stamp = 0;
        s.closed_by_server = false;
        s.conn.restart();
        self.h2_opened += 1;
        for ci in self.slots_of(si) {
            let c = &mut self.conns[ci];
            if c.busy && !c.stream_open {
                c.phase = Phase::Connecting;
                c.deadline = deadline;
            }
        }
        match res {
            Ok((sock, connected)) => {
                crate::rx::enable(&sock);
                let s = &mut self.sessions[si];
                let key = ((s.generation as u64) << 32) | si as u64;
                let flags = epoll::EventFlags::IN
                    | epoll::EventFlags::OUT
                    | epoll::EventFlags::RDHUP
                    | epoll::EventFlags::ET;
                if let Err(e) = epoll::add(&self.ep, &sock, epoll::EventData::new_u64(key), flags) {
                    self.session_fail(si, Failure::io(ErrorKind::Connect, e.into()));
                    return;
                }
                s.sock = Some(sock);
                enter(&mut self.opening, &mut s.phase, Phase::Connecting);
                if connected {
                    self.session_connected(si, now);
                }
            }
            Err(e) => self.session_fail(si, Failure::io(ErrorKind::Connect, e)),
        }
    }

    fn session_connected(&mut self, si: usize, now: Nanos) {
        let Some(cfg) = self.shared.tls.clone() else {
            self.session_ready(si, now);
            return;
        };
        let host = self.sessions[si].host as usize;
        let name = self.shared.mix.hosts[host]
            .server_name
            .clone()
            .expect("an https host has a server name (checked when the mix was built)");
        match rustls::ClientConnection::new(cfg, name) {
            Ok(t) => self.sessions[si].tls = Some(Box::new(t)),
            Err(e) => {
                self.session_fail(si, Failure::new(ErrorKind::Tls, Cause::Tls(e)));
                return;
            }
        }
        let s = &mut self.sessions[si];
        enter(&mut self.opening, &mut s.phase, Phase::Handshaking);
        self.session_io(si, false, false);
    }

    /// TCP (and TLS) are up: every waiting slot's request goes out.
    fn session_ready(&mut self, si: usize, now: Nanos) {
        let s = &mut self.sessions[si];
        enter(&mut self.opening, &mut s.phase, Phase::Idle);
        for ci in self.slots_of(si) {
            let c = &self.conns[ci];
            if c.busy && !c.stream_open {
                self.h2_open_stream(ci, now);
            }
        }
        if let Err(f) = self.session_flush(si) {
            self.session_fail(si, f);
        }
    }

    /// Writes the connections that requests were given to in this turn of the loop.
    pub(super) fn flush_dirty(&mut self) {
        while let Some(si) = self.h2_dirty.pop() {
            let si = si as usize;
            if std::mem::take(&mut self.sessions[si].dirty) {
                if let Err(f) = self.session_flush(si) {
                    self.session_fail(si, f);
                }
            }
        }
    }

    /// Writes what the protocol state has to say, as far as the socket takes it.
    fn session_flush(&mut self, si: usize) -> Result<(), Failure> {
        let s = &mut self.sessions[si];
        s.dirty = false;
        // Nothing goes out before TCP is up (a connection being replaced keeps
        // its new preface until then); TLS writes its handshake below.
        if matches!(s.phase, Phase::Closed | Phase::Connecting) {
            return Ok(());
        }
        let Some(sock) = s.sock.as_mut() else {
            return Ok(());
        };
        match s.tls.as_mut() {
            None => {
                while !s.conn.output().is_empty() {
                    match sock.write(s.conn.output()) {
                        Ok(0) => {
                            return Err(Failure::new(ErrorKind::Write, Cause::Text(WROTE_NOTHING)))
                        }
                        Ok(n) => s.conn.wrote(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(Failure::io(ErrorKind::Write, e)),
                    }
                }
            }
            Some(tls) => loop {
                // rustls takes a bounded amount of plaintext at a time: hand it
                // more as it writes, until all is out or the socket is full.
                if !tls.is_handshaking() && !s.conn.output().is_empty() {
                    let n = tls
                        .writer()
                        .write(s.conn.output())
                        .map_err(|e| Failure::io(ErrorKind::Write, e))?;
                    s.conn.wrote(n);
                }
                let mut blocked = false;
                while tls.wants_write() {
                    match tls.write_tls(sock) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            blocked = true;
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(Failure::io(ErrorKind::Write, e)),
                    }
                }
                if blocked || tls.is_handshaking() || s.conn.output().is_empty() {
                    break;
                }
            },
        }
        Ok(())
    }

    pub(super) fn on_session_event(&mut self, si: usize, flags: epoll::EventFlags) {
        let readable = flags.intersects(
            epoll::EventFlags::IN
                | epoll::EventFlags::RDHUP
                | epoll::EventFlags::HUP
                | epoll::EventFlags::ERR,
        );
        match self.sessions[si].phase {
            Phase::Closed => {}
            Phase::Connecting => {
                let Some(sock) = &self.sessions[si].sock else {
                    return;
                };
                match connect_result(sock) {
                    Ok(true) => {
                        let now = self.shared.clock.now();
                        self.session_connected(si, now);
                    }
                    Ok(false) => {}
                    Err(e) => self.session_fail(si, Failure::io(ErrorKind::Connect, e)),
                }
            }
            Phase::Handshaking | Phase::Idle | Phase::Active => {
                let hup = flags.intersects(epoll::EventFlags::RDHUP | epoll::EventFlags::HUP);
                self.session_io(si, readable, hup)
            }
        }
    }

    /// Reads and writes what the connection allows, then acts on what its streams
    /// did.
    fn session_io(&mut self, si: usize, readable: bool, hup: bool) {
        let r = self.session_read(si, readable, hup);
        let now = self.shared.clock.now();
        match r {
            Ok(Read2::Open) => {}
            Ok(Read2::Ready) => self.session_ready(si, now),
            Ok(Read2::Eof) => {
                self.h2_events_done();
                self.session_eof(si, now);
                return;
            }
            Err(f) => {
                self.h2_events_done();
                self.session_fail(si, f);
                return;
            }
        }
        self.h2_events_done();
        if self.sessions[si].phase == Phase::Closed {
            return;
        }
        if let Err(f) = self.session_flush(si) {
            self.session_fail(si, f);
            return;
        }
        self.h2_after(si, now);
    }

    fn session_read(&mut self, si: usize, readable: bool, hup: bool) -> Result<Read2, Failure> {
        self.session_flush(si)?;
        if !readable {
            return Ok(Read2::Open);
        }
        let counting = self.shared.clock.now() >= self.measure_start;
        let reqs = &self.shared.h2.as_deref().expect("HTTP/2 setup").reqs;
        let s = &mut self.sessions[si];
        let mut sink = Sink {
            conns: &mut self.conns,
            events: &mut self.h2_events,
            backend_header: &self.shared.backend_header,
            stamp: 0,
        };
        let Some(sock) = s.sock.as_mut() else {
            return Ok(Read2::Open);
        };
        let h2_failure = |e: http2::H2Error| Failure::new(ErrorKind::Read, Cause::H2(e));
        let Some(tls) = s.tls.as_mut() else {
            loop {
                let buf = s.conn.read_buf();
                let room = buf.len();
                let got = crate::rx::Stamped {
                    sock: &mut *sock,
                    stamp: &mut s.rx_stamp,
                    on: true,
                }
                .read(buf);
                match got {
                    Ok(0) => return Ok(Read2::Eof),
                    Ok(n) => {
                        if counting {
                            self.rec.totals.bytes_read += n as u64;
                        }
                        sink.stamp = s.rx_stamp;
                        s.conn.received(n, reqs, &mut sink).map_err(h2_failure)?;
                        // A short read emptied the socket: edge-triggered epoll
                        // says when more comes, so no read is spent on EAGAIN. Not
                        // after a close, which no later event would announce.
                        if n < room && !hup {
                            return Ok(Read2::Open);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Read2::Open),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Failure::io(ErrorKind::Read, e)),
                }
            }
        };
        let mut ready = false;
        loop {
            let handshaking = tls.is_handshaking();
            let got = if handshaking {
                tls.read_tls(&mut HeadReader {
                    sock,
                    head: &mut s.head,
                    len: &mut s.head_len,
                })
            } else {
                tls.read_tls(&mut crate::rx::Stamped {
                    sock: &mut *sock,
                    stamp: &mut s.rx_stamp,
                    on: true,
                })
            };
            let kind = if handshaking {
                ErrorKind::Tls
            } else {
                ErrorKind::Read
            };
            match got {
                Ok(0) if handshaking => {
                    return Err(Failure::new(
                        ErrorKind::Tls,
                        Cause::Text("the server closed the connection during the TLS handshake"),
                    ))
                }
                Ok(0) => return Ok(Read2::Eof),
                Ok(_) => {
                    let st = match tls.process_new_packets() {
                        Ok(st) => st,
                        Err(rustls::Error::AlertReceived(
                            rustls::AlertDescription::NoApplicationProtocol,
                        )) if handshaking => return Err(self.alpn_refused(None)),
                        Err(e) => {
                            let _ = tls.write_tls(sock);
                            let cause = if handshaking && s.head[..s.head_len as usize] == *b"HTTP/"
                            {
                                Cause::PlainHttp
                            } else {
                                Cause::Tls(e)
                            };
                            return Err(Failure::new(kind, cause));
                        }
                    };
                    if handshaking && !tls.is_handshaking() {
                        if tls.alpn_protocol() != Some(b"h2") {
                            let chose = tls
                                .alpn_protocol()
                                .map(|p| String::from_utf8_lossy(p).into_owned());
                            return Err(self.alpn_refused(chose));
                        }
                        let measured = sink.conns[s.first_slot as usize..]
                            .iter()
                            .take(self.shared.h2.as_ref().map_or(1, |h| h.streams))
                            .any(|c| c.busy && c.measured);
                        let version = tls.protocol_version().map(version_name);
                        if self.tls_version.is_none() {
                            self.tls_version = version;
                        }
                        if measured {
                            let now = self.shared.clock.now();
                            let t = &mut self.rec.totals;
                            t.handshakes += 1;
                            crate::tls::count_certificate(
                                &mut t.certificates,
                                tls.peer_certificates(),
                                now,
                            );
                            if tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                                t.resumed += 1;
                            }
                            if t.tls_version.is_none() {
                                t.tls_version = version;
                            }
                        }
                        ready = true;
                    }
                    if st.plaintext_bytes_to_read() > 0 {
                        loop {
                            match tls.reader().read(s.conn.read_buf()) {
                                Ok(0) => return Ok(Read2::Eof),
                                Ok(n) => {
                                    if counting {
                                        self.rec.totals.bytes_read += n as u64;
                                    }
                                    sink.stamp = s.rx_stamp;
                                    s.conn.received(n, reqs, &mut sink).map_err(h2_failure)?;
                                }
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(e) => return Err(Failure::io(ErrorKind::Read, e)),
                            }
                        }
                    } else if st.peer_has_closed() {
                        return Ok(Read2::Eof);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(if ready { Read2::Ready } else { Read2::Open })
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::io(kind, e)),
            }
        }
    }

    /// The server chose another protocol than HTTP/2: every connection would, so
    /// the run ends with one line that says so.
    fn alpn_refused(&self, chose: Option<String>) -> Failure {
        let what = match chose {
            Some(p) => format!("it chose {p} by ALPN"),
            None => "it offered no h2 by ALPN".into(),
        };
        self.fatal(format!(
            "the server at {} did not agree to HTTP/2 ({what}): it speaks HTTP/1.1 there; leave out --http2",
            self.shared.addr
        ));
        Failure::new(
            ErrorKind::Tls,
            Cause::Text("the server did not agree to HTTP/2 by ALPN"),
        )
    }

    /// Ends the run with `why` (shown as the run's error).
    fn fatal(&self, why: String) {
        if let Ok(mut f) = self.shared.failure.lock() {
            f.get_or_insert(why);
        }
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    /// Acts on what the protocol state told the sink.
    fn h2_events_done(&mut self) {
        if self.h2_events.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.h2_events);
        let now = self.shared.clock.now();
        for &(slot, ev) in &events {
            let ci = slot as usize;
            if !self.conns[ci].busy {
                continue;
            }
            match ev {
                Ev::End(stamp) => self.h2_end(ci, stamp),
                Ev::Reset(code) => {
                    self.conns[ci].stream_open = false;
                    self.fail(ci, Failure::new(ErrorKind::Reset, Cause::H2Reset(code)));
                }
                Ev::Refused => {
                    let c = &mut self.conns[ci];
                    c.stream_open = false;
                    c.phase = Phase::Active;
                    c.deadline = now + self.shared.timeout_ns;
                    if c.measured {
                        self.h2_retried += 1;
                        if let Some(m) = &self.shared.marks {
                            let w = m.window_of(c.intended);
                            self.rec.totals.windows.retried(w);
                        }
                    }
                }
            }
        }
        self.h2_events = events;
        self.h2_events.clear();
    }

    /// A stream ended: a response, or for gRPC a call whose status decides.
    fn h2_end(&mut self, ci: usize, stamp: u64) {
        let grpc = self.setup().grpc;
        let c = &mut self.conns[ci];
        c.stream_open = false;
        c.rx_stamp = stamp;
        c.answer.markers.done();
        let status = c.answer.status;
        if status == 0 {
            self.fail(
                ci,
                Failure::new(
                    ErrorKind::Read,
                    Cause::Text("an HTTP/2 response without :status"),
                ),
            );
            return;
        }
        if grpc && status < 400 && c.answer.grpc != 0 {
            let code = c.answer.grpc;
            if c.measured {
                let i = (code as usize).min(crate::stats::GRPC_CODES - 1);
                self.rec.totals.grpc_codes[i] += 1;
            }
            self.fail(ci, Failure::new(ErrorKind::Grpc, Cause::Grpc(code)));
            return;
        }
        self.complete(
            ci,
            Response {
                status,
                close: false,
            },
        );
    }

    /// After the streams acted: a connection that takes no more streams and has
    /// finished its own is closed, and opened again for the slots still waiting;
    /// on a connection still open, waiting slots (refused streams) go again.
    fn h2_after(&mut self, si: usize, now: Nanos) {
        if !matches!(self.sessions[si].phase, Phase::Idle | Phase::Active) {
            return;
        }
        let waiting = self
            .slots_of(si)
            .any(|ci| self.conns[ci].busy && !self.conns[ci].stream_open);
        let conn = &self.sessions[si].conn;
        if conn.closing() {
            if conn.in_flight() == 0 {
                self.close_session(si);
                if waiting {
                    self.session_open(si, now);
                } else {
                    // The server drained it (GOAWAY) while it carried nothing:
                    // the next request's new connection is a reconnect.
                    self.sessions[si].closed_by_server = true;
                }
            }
        } else if waiting {
            for ci in self.slots_of(si) {
                if self.conns[ci].busy && !self.conns[ci].stream_open {
                    self.h2_open_stream(ci, now);
                }
            }
            if let Err(f) = self.session_flush(si) {
                self.session_fail(si, f);
            }
        }
    }

    /// The server closed the connection: fine when it carried nothing (the next
    /// request opens a new one); streams it still owed are `read` errors.
    fn session_eof(&mut self, si: usize, now: Nanos) {
        if self.sessions[si].conn.in_flight() > 0 {
            self.session_fail(
                si,
                Failure::new(
                    ErrorKind::Read,
                    Cause::Text("the server closed the HTTP/2 connection with streams open"),
                ),
            );
            return;
        }
        self.close_session(si);
        let waiting = self
            .slots_of(si)
            .any(|ci| self.conns[ci].busy && !self.conns[ci].stream_open);
        if waiting {
            self.session_open(si, now);
        } else {
            self.sessions[si].closed_by_server = true;
        }
    }

    /// The connection failed: so does every request on it (the first with `f`,
    /// which is the message a user sees), and it is closed.
    pub(super) fn session_fail(&mut self, si: usize, f: Failure) {
        if let Cause::H2(http2::H2Error::Http1Answer) = &f.cause {
            self.fatal(format!(
                "the server at {} answered the HTTP/2 preface in HTTP/1.1: it does not speak h2c on that port; leave out --h2c",
                self.shared.addr
            ));
        }
        // Let a GOAWAY that says why reach the server.
        let _ = self.session_flush(si);
        // On a connection that was up, the requests it had not taken (refused by
        // a GOAWAY, or waiting for it to drain) never reached the server: they go
        // on a new connection. On one that never came up, every request fails.
        let established = matches!(self.sessions[si].phase, Phase::Idle | Phase::Active);
        let unsent: Vec<u32> = self.sessions[si].conn.unsent().collect();
        for slot in unsent {
            self.conns[slot as usize].stream_open = false;
        }
        self.close_session(si);
        let kind = f.kind;
        let mut first = Some(f);
        for ci in self.slots_of(si) {
            let c = &self.conns[ci];
            if c.busy && (c.stream_open || !established) {
                self.conns[ci].stream_open = false;
                let f = first.take().unwrap_or(Failure::new(
                    kind,
                    Cause::Text("the HTTP/2 connection carrying the stream failed"),
                ));
                self.fail(ci, f);
            }
        }
        let waiting = self.slots_of(si).any(|ci| self.conns[ci].busy);
        if waiting && !self.shared.stop.load(Ordering::Relaxed) {
            let now = self.shared.clock.now();
            self.session_open(si, now);
        }
    }

    pub(super) fn close_session(&mut self, si: usize) {
        let s = &mut self.sessions[si];
        if s.sock.is_some() {
            s.sock = None;
            s.tls = None;
            s.generation = s.generation.wrapping_add(1);
        }
        enter(&mut self.opening, &mut s.phase, Phase::Closed);
    }

    /// A slot gives up its request (it failed or timed out): its stream, if it has
    /// one, is cancelled; the connection goes on.
    pub(super) fn h2_release(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        c.phase = Phase::Idle;
        if std::mem::take(&mut c.stream_open) {
            let si = c.session as usize;
            let reqs = &self.shared.h2.as_deref().expect("HTTP/2 setup").reqs;
            if self.sessions[si].conn.cancel(ci as u32, reqs) {
                let _ = self.session_flush(si);
                // The last stream of a connection that takes no more may have
                // gone: it is replaced now for the requests waiting on it.
                let now = self.shared.clock.now();
                self.h2_after(si, now);
            }
        }
    }

    /// Connections still connecting past their deadline fail every request on them.
    pub(super) fn sweep_sessions(&mut self, now: Nanos) {
        for si in 0..self.sessions.len() {
            let s = &self.sessions[si];
            if !matches!(s.phase, Phase::Connecting | Phase::Handshaking) || s.deadline > now {
                continue;
            }
            let f = Failure::new(
                ErrorKind::ConnectTimeout,
                Cause::ConnectDeadline {
                    after: self.shared.connect_timeout_ns,
                    tls: s.phase == Phase::Handshaking,
                },
            );
            self.session_fail(si, f);
        }
    }

    /// The run's HTTP/2 figures, from every connection's counters.
    pub(super) fn h2_totals(&self) -> Option<results::Http2Stats> {
        let setup = self.shared.h2.as_deref()?;
        let mut t = results::Http2Stats {
            streams_per_connection: setup.streams as u32,
            retried_after_goaway: self.h2_retried,
            connections_opened: self.h2_opened,
            ..Default::default()
        };
        for s in &self.sessions {
            let c = &s.conn.counters;
            t.max_concurrent_streams = t.max_concurrent_streams.max(c.max_open);
            t.goaways += c.goaways;
            t.streams_reset += c.resets;
            t.pings += c.pings;
        }
        Some(t)
    }
}

/// What a read of a connection came to.
enum Read2 {
    Open,
    /// The TLS handshake finished (with HTTP/2 agreed).
    Ready,
    Eof,
}
