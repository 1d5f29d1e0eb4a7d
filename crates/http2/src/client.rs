//! One client connection's HTTP/2 state, without I/O: the engine reads the socket
//! into [`ClientConn::read_buf`], hands over what it read with
//! [`ClientConn::received`], and writes out [`ClientConn::output`]. What happened to
//! each stream is told to a [`Handler`] by the *slot* the engine opened it for (its
//! own index of a request in flight), so the engine never maps stream ids.
//!
//! What it does (RFC 9113):
//! - the preface and SETTINGS (push off, this side's stream window), the server's
//!   SETTINGS honoured (concurrent streams, initial window, frame size) and
//!   acknowledged;
//! - flow control both ways: request bodies wait for window, and each DATA read
//!   is given back by WINDOW_UPDATE once half a window is used, per stream and for
//!   the connection;
//! - streams past the server's `MAX_CONCURRENT_STREAMS` wait in a queue and open
//!   as others close;
//! - GOAWAY: streams above its last stream id were not processed and go back to
//!   the engine ([`Handler::refused`]) to be sent again on a new connection;
//!   streams at or below it finish; no stream opens after it;
//! - RST_STREAM from the server ([`Handler::reset`]); PING answered and counted;
//!   1xx heads skipped; trailers read; unknown frame types ignored.
//!
//! Connection errors (a malformed frame, a window overflow, HPACK that does not
//! decode) are returned as [`H2Error`]: the connection is then unusable.

use crate::frame::{self, Head, HEADER_LEN};
use crate::request::Request;
use std::collections::VecDeque;

/// Why a connection cannot go on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum H2Error {
    #[error("the server answered in HTTP/1.x, not HTTP/2: it does not speak h2c (prior knowledge) on this port")]
    Http1Answer,
    #[error("HTTP/2 protocol error from the server: {0}")]
    Protocol(&'static str),
    #[error("HTTP/2 flow-control error from the server: {0}")]
    FlowControl(&'static str),
    #[error("the server's HPACK header block does not decode: {0}")]
    Compression(String),
    #[error("the server sent a frame of {0} bytes, over the 16,384 this client allows")]
    FrameSize(u32),
}

impl H2Error {
    fn code(&self) -> u32 {
        match self {
            H2Error::Http1Answer | H2Error::Protocol(_) => frame::PROTOCOL_ERROR,
            H2Error::FlowControl(_) => frame::FLOW_CONTROL_ERROR,
            H2Error::Compression(_) => frame::COMPRESSION_ERROR,
            H2Error::FrameSize(_) => frame::FRAME_SIZE_ERROR,
        }
    }
}

/// What happens to the streams of a connection, told by slot.
pub trait Handler {
    /// A field of the response's final head (`trailer` false, pseudo-headers
    /// included) or of its trailers (`trailer` true).
    fn field(&mut self, slot: u32, name: &[u8], value: &[u8], trailer: bool);
    /// Body bytes of the response.
    fn data(&mut self, slot: u32, data: &[u8]);
    /// The response is complete (the server ended its stream).
    fn end(&mut self, slot: u32);
    /// The server reset the stream (RST_STREAM) with `code`.
    fn reset(&mut self, slot: u32, code: u32);
    /// The stream was above a GOAWAY's last stream id (or refused with
    /// REFUSED_STREAM): the server did not process it, it may be sent again.
    fn refused(&mut self, slot: u32);
}

/// This side's settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// SETTINGS_INITIAL_WINDOW_SIZE: how much of a response body the server may
    /// send on a stream before this side gives window back.
    pub stream_window: u32,
    /// The connection's receive window (raised from 65,535 by a WINDOW_UPDATE).
    pub conn_window: u32,
}

impl Config {
    /// RFC 9113's initial windows (65,535 bytes each): a server may send that much
    /// before this side gives window back.
    pub fn rfc_defaults() -> Config {
        Config {
            stream_window: frame::DEFAULT_WINDOW,
            conn_window: frame::DEFAULT_WINDOW,
        }
    }

    /// A stream window of `stream` bytes, and a connection window as large as 16
    /// such streams (at most 2^31-1).
    pub fn with_stream_window(stream: u32) -> Config {
        Config {
            stream_window: stream,
            conn_window: (u64::from(stream) * 16).min(frame::MAX_WINDOW as u64) as u32,
        }
    }
}

impl Default for Config {
    /// 1 MiB per stream, 16 MiB for the connection: a response of up to 1 MiB
    /// arrives without waiting for a WINDOW_UPDATE, however long the engine sleeps
    /// (Go's client has 4 MiB and 1 GiB, h2load 1 GiB each).
    fn default() -> Config {
        Config::with_stream_window(DEFAULT_STREAM_WINDOW)
    }
}

/// The default stream window, bytes.
pub const DEFAULT_STREAM_WINDOW: u32 = 1 << 20;

/// Counters over a connection's life, for the result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub goaways: u64,
    pub resets: u64,
    pub pings: u64,
    /// Most streams open at once.
    pub max_open: u32,
}

#[derive(Clone, Copy, Debug)]
struct Stream {
    id: u32,
    slot: u32,
    /// The request, for its body.
    req: u32,
    body_sent: usize,
    /// The body (or the end of a bodiless request) is all out.
    sent: bool,
    send_window: i64,
    recv_window: i64,
    recv_unacked: u32,
    /// The final (non-1xx) head has come: a HEADERS now is trailers.
    got_head: bool,
}

/// The state of one client connection.
pub struct ClientConn {
    cfg: Config,
    dec: crate::hpack::Decoder,
    inbuf: Box<[u8]>,
    in_start: usize,
    in_end: usize,
    out: Vec<u8>,
    /// A header block split over CONTINUATION frames, and its stream.
    block: Vec<u8>,
    block_stream: u32,
    block_end_stream: bool,
    streams: Vec<Stream>,
    queued: VecDeque<(u32, u32)>,
    next_id: u32,
    peer_max_streams: u32,
    peer_initial_window: i64,
    peer_max_frame: u32,
    send_window: i64,
    recv_window: i64,
    recv_unacked: u32,
    goaway: Option<u32>,
    saw_first_frame: bool,
    pub counters: Counters,
}

/// Room to read into: a frame of the largest size plus its header, twice.
const INBUF: usize = 2 * (frame::DEFAULT_MAX_FRAME as usize + HEADER_LEN) + 4096;
/// Streams opened before the server's SETTINGS say how many it takes: RFC 9113
/// §6.5.2 recommends a limit of no less than 100, so no server refuses these.
const PRESUMED_MAX_STREAMS: u32 = 100;
/// SETTINGS_HEADER_TABLE_SIZE: the default, never changed.
const HEADER_TABLE: usize = 4096;
/// The largest header block accepted across CONTINUATION frames.
const MAX_BLOCK: usize = 256 * 1024;

impl ClientConn {
    pub fn new(cfg: Config) -> ClientConn {
        let mut c = ClientConn {
            cfg,
            dec: crate::hpack::Decoder::new(HEADER_TABLE),
            inbuf: vec![0; INBUF].into_boxed_slice(),
            in_start: 0,
            in_end: 0,
            out: Vec::with_capacity(16 * 1024),
            block: Vec::new(),
            block_stream: 0,
            block_end_stream: false,
            streams: Vec::new(),
            queued: VecDeque::new(),
            next_id: 1,
            peer_max_streams: PRESUMED_MAX_STREAMS,
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            send_window: i64::from(frame::DEFAULT_WINDOW),
            recv_window: i64::from(frame::DEFAULT_WINDOW),
            recv_unacked: 0,
            goaway: None,
            saw_first_frame: false,
            counters: Counters::default(),
        };
        c.start();
        c
    }

    /// Forgets everything for a new connection (keeping the buffers) and queues
    /// the preface.
    pub fn restart(&mut self) {
        self.dec = crate::hpack::Decoder::new(HEADER_TABLE);
        self.in_start = 0;
        self.in_end = 0;
        self.out.clear();
        self.block.clear();
        self.block_stream = 0;
        self.streams.clear();
        self.queued.clear();
        self.next_id = 1;
        self.peer_max_streams = PRESUMED_MAX_STREAMS;
        self.peer_initial_window = i64::from(frame::DEFAULT_WINDOW);
        self.peer_max_frame = frame::DEFAULT_MAX_FRAME;
        self.send_window = i64::from(frame::DEFAULT_WINDOW);
        self.recv_window = i64::from(frame::DEFAULT_WINDOW);
        self.recv_unacked = 0;
        self.goaway = None;
        self.saw_first_frame = false;
        self.start();
    }

    fn start(&mut self) {
        self.out.extend_from_slice(frame::PREFACE);
        let mut p = [0u8; 12];
        p[..6].copy_from_slice(&setting(frame::SETTINGS_ENABLE_PUSH, 0));
        p[6..].copy_from_slice(&setting(
            frame::SETTINGS_INITIAL_WINDOW_SIZE,
            self.cfg.stream_window,
        ));
        frame::write_frame(&mut self.out, frame::SETTINGS, 0, 0, &p);
        if self.cfg.conn_window > frame::DEFAULT_WINDOW {
            let more = self.cfg.conn_window - frame::DEFAULT_WINDOW;
            frame::window_update(&mut self.out, 0, more);
            self.recv_window += i64::from(more);
        }
    }

    /// Bytes waiting to be written to the connection.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// `n` bytes of [`Self::output`] were written.
    pub fn wrote(&mut self, n: usize) {
        if n >= self.out.len() {
            self.out.clear();
        } else {
            self.out.drain(..n);
        }
    }

    /// Where the next read goes (never empty).
    pub fn read_buf(&mut self) -> &mut [u8] {
        if self.in_start > 0 {
            self.inbuf.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
        &mut self.inbuf[self.in_end..]
    }

    /// Streams open (not counting those queued behind the server's limit).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The slots whose requests wait behind the server's stream limit: not sent.
    pub fn unsent(&self) -> impl Iterator<Item = u32> + '_ {
        self.queued.iter().map(|&(slot, _)| slot)
    }

    /// Requests given to [`Self::open`] and not yet ended, reset or refused.
    pub fn in_flight(&self) -> usize {
        self.streams.len() + self.queued.len()
    }

    /// The server sent GOAWAY (its last stream id): no new stream may open.
    pub fn goaway(&self) -> Option<u32> {
        self.goaway
    }

    /// No more streams can open here: GOAWAY, or the stream ids are used up.
    pub fn closing(&self) -> bool {
        self.goaway.is_some() || self.next_id > 0x7fff_fff0
    }

    /// Sends request `req` (an index into `reqs`) for `slot`, now or, past the
    /// server's stream limit, as soon as a stream closes. `false` when the
    /// connection takes no more streams ([`Self::closing`]).
    pub fn open(&mut self, slot: u32, req: u32, reqs: &[Request]) -> bool {
        if self.closing() {
            return false;
        }
        if self.streams.len() as u32 >= self.peer_max_streams {
            self.queued.push_back((slot, req));
            return true;
        }
        self.start_stream(slot, req, reqs);
        true
    }

    fn start_stream(&mut self, slot: u32, req: u32, reqs: &[Request]) {
        let id = self.next_id;
        self.next_id += 2;
        let r = &reqs[req as usize];
        let end = if r.body.is_empty() {
            frame::END_STREAM
        } else {
            0
        };
        // A block larger than the server's frame size goes on in CONTINUATIONs.
        let max = self.peer_max_frame as usize;
        let mut rest: &[u8] = &r.block;
        let first = rest.len().min(max);
        let flags = end
            | if first == rest.len() {
                frame::END_HEADERS
            } else {
                0
            };
        frame::write_frame(&mut self.out, frame::HEADERS, flags, id, &rest[..first]);
        rest = &rest[first..];
        while !rest.is_empty() {
            let n = rest.len().min(max);
            let f = if n == rest.len() {
                frame::END_HEADERS
            } else {
                0
            };
            frame::write_frame(&mut self.out, frame::CONTINUATION, f, id, &rest[..n]);
            rest = &rest[n..];
        }
        self.streams.push(Stream {
            id,
            slot,
            req,
            body_sent: 0,
            sent: end != 0,
            send_window: self.peer_initial_window,
            recv_window: i64::from(self.cfg.stream_window),
            recv_unacked: 0,
            got_head: false,
        });
        self.counters.max_open = self.counters.max_open.max(self.streams.len() as u32);
        if end == 0 {
            let i = self.streams.len() - 1;
            self.send_body(i, reqs);
        }
    }

    /// Writes as much of stream `i`'s body as the windows allow.
    fn send_body(&mut self, i: usize, reqs: &[Request]) {
        let s = &mut self.streams[i];
        let body = &reqs[s.req as usize].body;
        while !s.sent {
            let left = body.len() - s.body_sent;
            let n = (left as i64)
                .min(s.send_window)
                .min(self.send_window)
                .min(i64::from(self.peer_max_frame));
            if n <= 0 && left > 0 {
                return;
            }
            let n = n as usize;
            let last = n == left;
            let flags = if last { frame::END_STREAM } else { 0 };
            let chunk = &body[s.body_sent..s.body_sent + n];
            frame::write_frame(&mut self.out, frame::DATA, flags, s.id, chunk);
            s.body_sent += n;
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            s.sent = last;
        }
    }

    fn send_bodies(&mut self, reqs: &[Request]) {
        for i in 0..self.streams.len() {
            if !self.streams[i].sent {
                self.send_body(i, reqs);
            }
        }
    }

    /// Cancels `slot`'s stream (RST_STREAM CANCEL), as when its request timed out;
    /// `false` if it has none.
    pub fn cancel(&mut self, slot: u32, reqs: &[Request]) -> bool {
        if let Some(q) = self.queued.iter().position(|&(s, _)| s == slot) {
            self.queued.remove(q);
            return true;
        }
        let Some(i) = self.streams.iter().position(|s| s.slot == slot) else {
            return false;
        };
        let s = self.streams.swap_remove(i);
        frame::rst_stream(&mut self.out, s.id, frame::CANCEL);
        // Its place goes to a stream waiting behind the server's limit.
        self.open_queued(reqs);
        true
    }

    /// `n` bytes were read into [`Self::read_buf`]: acts on every whole frame.
    ///
    /// # Errors
    /// A connection error: the connection must be closed (a GOAWAY saying why is
    /// in [`Self::output`] to write first).
    pub fn received(
        &mut self,
        n: usize,
        reqs: &[Request],
        h: &mut impl Handler,
    ) -> Result<(), H2Error> {
        self.in_end += n;
        let r = self.frames(reqs, h);
        if let Err(e) = &r {
            let last = self.next_id.saturating_sub(2);
            let mut p = [0u8; 8];
            p[..4].copy_from_slice(&last.to_be_bytes());
            p[4..].copy_from_slice(&e.code().to_be_bytes());
            frame::write_frame(&mut self.out, frame::GOAWAY, 0, 0, &p);
        }
        r
    }

    fn frames(&mut self, reqs: &[Request], h: &mut impl Handler) -> Result<(), H2Error> {
        loop {
            let avail = self.in_end - self.in_start;
            if !self.saw_first_frame
                && avail >= 5
                && &self.inbuf[self.in_start..self.in_start + 5] == b"HTTP/"
            {
                return Err(H2Error::Http1Answer);
            }
            if avail < HEADER_LEN {
                return Ok(());
            }
            let hb: [u8; HEADER_LEN] = self.inbuf[self.in_start..self.in_start + HEADER_LEN]
                .try_into()
                .expect("nine bytes");
            let head = Head::parse(&hb);
            if head.len > frame::DEFAULT_MAX_FRAME {
                return Err(H2Error::FrameSize(head.len));
            }
            let total = HEADER_LEN + head.len as usize;
            if avail < total {
                return Ok(());
            }
            if !self.saw_first_frame && head.kind != frame::SETTINGS {
                return Err(H2Error::Protocol("the first frame was not SETTINGS"));
            }
            self.saw_first_frame = true;
            let start = self.in_start + HEADER_LEN;
            self.in_start += total;
            self.frame(head, start, reqs, h)?;
            if !self.queued.is_empty() {
                self.open_queued(reqs);
            }
        }
    }

    fn frame(
        &mut self,
        head: Head,
        at: usize,
        reqs: &[Request],
        h: &mut impl Handler,
    ) -> Result<(), H2Error> {
        let len = head.len as usize;
        if self.block_stream != 0 && head.kind != frame::CONTINUATION {
            return Err(H2Error::Protocol(
                "a header block was interrupted by another frame",
            ));
        }
        match head.kind {
            frame::DATA => self.data(head, at, h),
            frame::HEADERS => {
                if head.stream == 0 {
                    return Err(H2Error::Protocol("HEADERS on stream 0"));
                }
                let (mut a, mut b) = (at, at + len);
                if head.flags & frame::PADDED != 0 {
                    if len == 0 {
                        return Err(H2Error::Protocol("a padded HEADERS without its pad length"));
                    }
                    let pad = usize::from(self.inbuf[a]);
                    a += 1;
                    if pad > b - a {
                        return Err(H2Error::Protocol("HEADERS padding longer than the frame"));
                    }
                    b -= pad;
                }
                if head.flags & frame::PRIORITY_FLAG != 0 {
                    if b - a < 5 {
                        return Err(H2Error::Protocol("short HEADERS priority"));
                    }
                    a += 5;
                }
                self.block.clear();
                self.block.extend_from_slice(&self.inbuf[a..b]);
                self.block_end_stream = head.flags & frame::END_STREAM != 0;
                if head.flags & frame::END_HEADERS != 0 {
                    self.header_block(head.stream, h)
                } else {
                    self.block_stream = head.stream;
                    Ok(())
                }
            }
            frame::CONTINUATION => {
                if self.block_stream == 0 || head.stream != self.block_stream {
                    return Err(H2Error::Protocol(
                        "CONTINUATION without the HEADERS it continues",
                    ));
                }
                if self.block.len() + len > MAX_BLOCK {
                    return Err(H2Error::Protocol("a header block over 256 KiB"));
                }
                self.block.extend_from_slice(&self.inbuf[at..at + len]);
                if head.flags & frame::END_HEADERS != 0 {
                    let s = std::mem::take(&mut self.block_stream);
                    self.header_block(s, h)
                } else {
                    Ok(())
                }
            }
            frame::PRIORITY => {
                if len != 5 {
                    return Err(H2Error::FrameSize(head.len));
                }
                Ok(())
            }
            frame::RST_STREAM => {
                if len != 4 || head.stream == 0 {
                    return Err(H2Error::Protocol("a malformed RST_STREAM"));
                }
                let code = be32(&self.inbuf[at..]);
                if let Some(i) = self.find(head.stream) {
                    let s = self.streams.swap_remove(i);
                    if code == frame::REFUSED_STREAM {
                        h.refused(s.slot);
                    } else {
                        self.counters.resets += 1;
                        h.reset(s.slot, code);
                    }
                }
                Ok(())
            }
            frame::SETTINGS => self.settings(head, at, reqs),
            frame::PUSH_PROMISE => Err(H2Error::Protocol("PUSH_PROMISE after push was turned off")),
            frame::PING => {
                if len != 8 || head.stream != 0 {
                    return Err(H2Error::Protocol("a malformed PING"));
                }
                if head.flags & frame::ACK == 0 {
                    self.counters.pings += 1;
                    let mut p = [0u8; 8];
                    p.copy_from_slice(&self.inbuf[at..at + 8]);
                    frame::write_frame(&mut self.out, frame::PING, frame::ACK, 0, &p);
                }
                Ok(())
            }
            frame::GOAWAY => {
                if len < 8 || head.stream != 0 {
                    return Err(H2Error::Protocol("a malformed GOAWAY"));
                }
                let last = be32(&self.inbuf[at..]) & 0x7fff_ffff;
                self.counters.goaways += 1;
                self.goaway = Some(self.goaway.map_or(last, |g| g.min(last)));
                let mut i = 0;
                while i < self.streams.len() {
                    if self.streams[i].id > last {
                        let s = self.streams.swap_remove(i);
                        h.refused(s.slot);
                    } else {
                        i += 1;
                    }
                }
                while let Some((slot, _)) = self.queued.pop_front() {
                    h.refused(slot);
                }
                Ok(())
            }
            frame::WINDOW_UPDATE => {
                if len != 4 {
                    return Err(H2Error::FrameSize(head.len));
                }
                let inc = i64::from(be32(&self.inbuf[at..]) & 0x7fff_ffff);
                if inc == 0 {
                    return Err(H2Error::Protocol("a WINDOW_UPDATE of 0"));
                }
                if head.stream == 0 {
                    self.send_window += inc;
                    if self.send_window > frame::MAX_WINDOW {
                        return Err(H2Error::FlowControl(
                            "the connection window grew past 2^31-1",
                        ));
                    }
                } else if let Some(i) = self.find(head.stream) {
                    self.streams[i].send_window += inc;
                    if self.streams[i].send_window > frame::MAX_WINDOW {
                        return Err(H2Error::FlowControl("a stream window grew past 2^31-1"));
                    }
                }
                self.send_bodies(reqs);
                Ok(())
            }
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    fn data(&mut self, head: Head, at: usize, h: &mut impl Handler) -> Result<(), H2Error> {
        if head.stream == 0 {
            return Err(H2Error::Protocol("DATA on stream 0"));
        }
        let len = head.len as usize;
        // The whole frame, padding included, counts against the windows.
        self.recv_window -= len as i64;
        if self.recv_window < 0 {
            return Err(H2Error::FlowControl("DATA beyond the connection's window"));
        }
        self.recv_unacked += head.len;
        if i64::from(self.recv_unacked) >= i64::from(self.cfg.conn_window) / 2 {
            frame::window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_window += i64::from(self.recv_unacked);
            self.recv_unacked = 0;
        }
        let (mut a, mut b) = (at, at + len);
        if head.flags & frame::PADDED != 0 {
            if len == 0 {
                return Err(H2Error::Protocol("a padded DATA without its pad length"));
            }
            let pad = usize::from(self.inbuf[a]);
            a += 1;
            if pad > b - a {
                return Err(H2Error::Protocol("DATA padding longer than the frame"));
            }
            b -= pad;
        }
        let Some(i) = self.find(head.stream) else {
            // A stream this side cancelled: its data still counted above.
            return Ok(());
        };
        let end = head.flags & frame::END_STREAM != 0;
        let s = &mut self.streams[i];
        s.recv_window -= len as i64;
        if s.recv_window < 0 {
            return Err(H2Error::FlowControl("DATA beyond the stream's window"));
        }
        s.recv_unacked += head.len;
        if !end && s.recv_unacked >= self.cfg.stream_window / 2 {
            frame::window_update(&mut self.out, s.id, s.recv_unacked);
            s.recv_window += i64::from(s.recv_unacked);
            s.recv_unacked = 0;
        }
        let slot = s.slot;
        if b > a {
            h.data(slot, &self.inbuf[a..b]);
        }
        if end {
            let s = self.streams.swap_remove(i);
            self.end_early(&s);
            h.end(slot);
        }
        Ok(())
    }

    fn header_block(&mut self, stream: u32, h: &mut impl Handler) -> Result<(), H2Error> {
        let found = self.find(stream);
        let (slot, trailer) = match found {
            Some(i) => (Some(self.streams[i].slot), self.streams[i].got_head),
            None => (None, false),
        };
        // Every block is decoded, for a stream this side forgot too: the HPACK
        // table is the connection's.
        let mut informational = false;
        let mut first = true;
        let block = std::mem::take(&mut self.block);
        let r = self.dec.decode(&block, |n, v| {
            if first && !trailer && n == b":status" && v.first() == Some(&b'1') {
                informational = true;
            }
            first = false;
            if let (Some(slot), false) = (slot, informational) {
                h.field(slot, n, v, trailer);
            }
        });
        self.block = block;
        r.map_err(|e| H2Error::Compression(e.to_string()))?;
        let Some(i) = found else {
            return Ok(());
        };
        if informational {
            return Ok(());
        }
        self.streams[i].got_head = true;
        if self.block_end_stream {
            let s = self.streams.swap_remove(i);
            self.end_early(&s);
            h.end(s.slot);
        }
        Ok(())
    }

    fn settings(&mut self, head: Head, at: usize, reqs: &[Request]) -> Result<(), H2Error> {
        if head.stream != 0 || !head.len.is_multiple_of(6) {
            return Err(H2Error::Protocol("a malformed SETTINGS"));
        }
        if head.flags & frame::ACK != 0 {
            return Ok(());
        }
        for k in 0..head.len as usize / 6 {
            let p = &self.inbuf[at + 6 * k..at + 6 * k + 6];
            let id = u16::from_be_bytes([p[0], p[1]]);
            let v = be32(&p[2..]);
            match id {
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_max_streams = v,
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > frame::MAX_WINDOW {
                        return Err(H2Error::FlowControl("an initial window over 2^31-1"));
                    }
                    let delta = i64::from(v) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(v);
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW {
                            return Err(H2Error::FlowControl(
                                "a new initial window took a stream's window past 2^31-1",
                            ));
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(H2Error::Protocol("a MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = v;
                }
                // The table size bounds an encoder that never indexes; the rest
                // do not concern a client.
                _ => {}
            }
        }
        frame::write_frame(&mut self.out, frame::SETTINGS, frame::ACK, 0, &[]);
        self.open_queued(reqs);
        self.send_bodies(reqs);
        Ok(())
    }

    /// The server ended a stream whose request body was not all sent: the rest is
    /// not sent, and the stream is reset so that it does not stay half-closed on
    /// the server's side, counted against its stream limit (RFC 9113 §8.1).
    fn end_early(&mut self, s: &Stream) {
        if !s.sent {
            frame::rst_stream(&mut self.out, s.id, frame::NO_ERROR);
        }
    }

    fn open_queued(&mut self, reqs: &[Request]) {
        while (self.streams.len() as u32) < self.peer_max_streams && !self.closing() {
            let Some((slot, req)) = self.queued.pop_front() else {
                break;
            };
            self.start_stream(slot, req, reqs);
        }
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }
}

fn setting(id: u16, v: u32) -> [u8; 6] {
    let i = id.to_be_bytes();
    let v = v.to_be_bytes();
    [i[0], i[1], v[0], v[1], v[2], v[3]]
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
