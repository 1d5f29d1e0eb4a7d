//! One long-lived gRPC stream on a connection of its own (issue 45): the client
//! side of a bidirectional call held open for a run, without I/O, so that the
//! engine's session loop keeps its own clock and sockets.
//!
//! [`crate::ClientConn`] sends whole requests and hands back whole responses; a
//! stream is the other shape: the request stays open, each message goes out when
//! it is due, and each message that comes back is handed over as it arrives. One
//! stream per connection, as the sessions measure what a change does to a
//! connection: a GOAWAY or a cut ends exactly one of them.
//!
//! Flow control: this side grants a large window once ([`RECV_WINDOW`]) and tops
//! it up as messages are read; messages out are held while the peer's window is
//! closed and sent when a WINDOW_UPDATE opens it.

use crate::frame::{self, Head, HEADER_LEN};
use crate::hpack::Decoder;
use crate::request::integer;

/// The stream's id: the first a client opens.
pub const STREAM: u32 = 1;
/// The receive window this side grants, for the stream and the connection.
pub const RECV_WINDOW: u32 = 1 << 24;
/// The largest frame this side reads (the protocol's default, never raised).
pub const MAX_FRAME: usize = frame::DEFAULT_MAX_FRAME as usize;
/// The largest message this side assembles.
pub const MAX_MESSAGE: usize = 4 << 20;

/// What the bytes read came to, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The response's head: its `:status`, the backend header's value, and a
    /// `grpc-status` when the head is trailers-only (the call refused at once).
    Response {
        status: u16,
        backend: Option<&'a [u8]>,
        grpc_status: Option<u32>,
        grpc_message: &'a [u8],
    },
    /// One whole message back (its prefix removed).
    Message(&'a [u8]),
    /// The trailers: the call is over, with its status.
    Trailers {
        grpc_status: Option<u32>,
        grpc_message: &'a [u8],
    },
    /// The server reset the stream, with this error code.
    Reset(u32),
    /// The server's GOAWAY: the last stream it processes and its error code.
    GoAway { last: u32, code: u32 },
}

/// A frame or a header block a client must refuse: the connection is over.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StreamError(pub String);

/// The client's state for one stream on one connection.
pub struct StreamClient {
    decoder: Decoder,
    backend_header: Box<[u8]>,
    /// The peer's windows for what this side sends.
    send_conn: i64,
    send_stream: i64,
    peer_initial: i64,
    peer_max_frame: usize,
    /// Message bytes (prefixed) waiting for the peer's window.
    queued: Vec<u8>,
    /// The client's END_STREAM is to follow what is queued.
    end_queued: bool,
    /// Received DATA not yet given back as window.
    consumed: u32,
    /// A header block split over CONTINUATION frames: its bytes and its flags.
    block: Vec<u8>,
    block_flags: Option<u8>,
    /// Whether the response's head has come (the next block is the trailers).
    answered: bool,
    /// A message split over DATA frames.
    message: Vec<u8>,
    /// Scratch for the fields of a decoded block.
    fields: Vec<u8>,
}

impl StreamClient {
    /// A client for a stream whose response names its backend in `backend_header`.
    pub fn new(backend_header: &str) -> StreamClient {
        StreamClient {
            decoder: Decoder::new(4096),
            backend_header: backend_header.to_ascii_lowercase().into_bytes().into(),
            send_conn: i64::from(frame::DEFAULT_WINDOW),
            send_stream: i64::from(frame::DEFAULT_WINDOW),
            peer_initial: i64::from(frame::DEFAULT_WINDOW),
            peer_max_frame: MAX_FRAME,
            queued: Vec::new(),
            end_queued: false,
            consumed: 0,
            block: Vec::new(),
            block_flags: None,
            answered: false,
            message: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// The connection's opening and the call's head: the preface, this side's
    /// SETTINGS (no push, the large window), the connection's window raised to
    /// match, and HEADERS for `POST path` on `authority` with `extra` fields
    /// (lowercase names), the stream left open.
    pub fn start(
        &mut self,
        out: &mut Vec<u8>,
        scheme: &str,
        authority: &str,
        path: &str,
        extra: &[(String, String)],
    ) {
        out.extend_from_slice(frame::PREFACE);
        let mut settings = Vec::with_capacity(12);
        for (id, v) in [
            (frame::SETTINGS_ENABLE_PUSH, 0),
            (frame::SETTINGS_INITIAL_WINDOW_SIZE, RECV_WINDOW),
        ] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&v.to_be_bytes());
        }
        frame::write_frame(out, frame::SETTINGS, 0, 0, &settings);
        frame::window_update(out, 0, RECV_WINDOW - frame::DEFAULT_WINDOW);
        let mut block = Vec::with_capacity(128);
        block.push(0x83); // :method POST
        block.push(if scheme == "https" { 0x87 } else { 0x86 });
        literal(&mut block, Some(4), b":path", path.as_bytes());
        literal(&mut block, Some(1), b":authority", authority.as_bytes());
        literal(&mut block, None, b"content-type", b"application/grpc");
        literal(&mut block, None, b"te", b"trailers");
        for (n, v) in extra {
            literal(&mut block, None, n.as_bytes(), v.as_bytes());
        }
        frame::write_frame(out, frame::HEADERS, frame::END_HEADERS, STREAM, &block);
    }

    /// Queues one message (prefixed, not compressed) and sends what the peer's
    /// window takes.
    pub fn send(&mut self, out: &mut Vec<u8>, message: &[u8]) {
        self.queued.push(0);
        self.queued
            .extend_from_slice(&(message.len() as u32).to_be_bytes());
        self.queued.extend_from_slice(message);
        self.pump(out);
    }

    /// The client's side ended (END_STREAM) once what is queued is sent: the
    /// server's trailers then end the call.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.end_queued = true;
        self.pump(out);
    }

    /// Message bytes still waiting for the peer's window.
    pub fn waiting(&self) -> usize {
        self.queued.len()
    }

    /// Sends what is queued as far as the windows allow.
    fn pump(&mut self, out: &mut Vec<u8>) {
        let mut at = 0;
        while at < self.queued.len() {
            let room = self.send_conn.min(self.send_stream);
            if room <= 0 {
                break;
            }
            let n = (self.queued.len() - at)
                .min(room as usize)
                .min(self.peer_max_frame);
            frame::write_frame(out, frame::DATA, 0, STREAM, &self.queued[at..at + n]);
            self.send_conn -= n as i64;
            self.send_stream -= n as i64;
            at += n;
        }
        self.queued.drain(..at);
        if self.end_queued && self.queued.is_empty() {
            frame::write_frame(out, frame::DATA, frame::END_STREAM, STREAM, &[]);
            self.end_queued = false;
        }
    }

    /// Reads the whole frames at the start of `input`, writing what they call for
    /// (SETTINGS and PING acknowledged, windows given back, messages the peer's
    /// window now takes) to `out`, and handing each [`Event`] to `on`. Returns the
    /// bytes used: a frame not yet whole is left for the next call.
    ///
    /// # Errors
    /// A frame a client must refuse (too large, a bad SETTINGS or WINDOW_UPDATE, a
    /// header block that does not decode, a message beyond [`MAX_MESSAGE`]).
    pub fn read(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        on: &mut dyn FnMut(Event<'_>),
    ) -> Result<usize, StreamError> {
        let mut at = 0;
        while input.len() - at >= HEADER_LEN {
            let h = Head::parse(input[at..at + HEADER_LEN].try_into().expect("9 bytes"));
            let len = h.len as usize;
            if len > MAX_FRAME {
                return Err(StreamError(format!(
                    "a {}-byte frame is larger than the {MAX_FRAME} bytes this side reads",
                    len
                )));
            }
            if input.len() - at < HEADER_LEN + len {
                break;
            }
            let payload = &input[at + HEADER_LEN..at + HEADER_LEN + len];
            at += HEADER_LEN + len;
            self.frame(h, payload, out, on)?;
        }
        Ok(at)
    }

    fn frame(
        &mut self,
        h: Head,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), StreamError> {
        if self.block_flags.is_some() && h.kind != frame::CONTINUATION {
            return Err(StreamError(
                "a header block was interrupted by another frame".into(),
            ));
        }
        match h.kind {
            frame::SETTINGS if h.flags & frame::ACK == 0 => {
                if !payload.len().is_multiple_of(6) {
                    return Err(StreamError("a SETTINGS frame of a bad length".into()));
                }
                for s in payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([s[0], s[1]]);
                    let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                    match id {
                        frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                            if i64::from(v) > frame::MAX_WINDOW {
                                return Err(StreamError(format!(
                                    "SETTINGS_INITIAL_WINDOW_SIZE {v} is beyond 2^31-1"
                                )));
                            }
                            self.send_stream += i64::from(v) - self.peer_initial;
                            self.peer_initial = i64::from(v);
                        }
                        frame::SETTINGS_MAX_FRAME_SIZE => {
                            self.peer_max_frame = (v as usize).clamp(MAX_FRAME, 1 << 24);
                        }
                        _ => {}
                    }
                }
                frame::write_frame(out, frame::SETTINGS, frame::ACK, 0, &[]);
                self.pump(out);
            }
            frame::PING if h.flags & frame::ACK == 0 => {
                frame::write_frame(out, frame::PING, frame::ACK, 0, payload);
            }
            frame::WINDOW_UPDATE => {
                let Some(b) = payload.get(..4) else {
                    return Err(StreamError("a WINDOW_UPDATE frame of a bad length".into()));
                };
                let inc = i64::from(u32::from_be_bytes(b.try_into().expect("4")) & 0x7fff_ffff);
                match h.stream {
                    0 => self.send_conn += inc,
                    STREAM => self.send_stream += inc,
                    _ => {}
                }
                self.pump(out);
            }
            frame::GOAWAY => {
                let Some(b) = payload.get(..8) else {
                    return Err(StreamError("a GOAWAY frame of a bad length".into()));
                };
                let last = u32::from_be_bytes(b[..4].try_into().expect("4")) & 0x7fff_ffff;
                let code = u32::from_be_bytes(b[4..8].try_into().expect("4"));
                on(Event::GoAway { last, code });
            }
            frame::RST_STREAM if h.stream == STREAM => {
                let code = payload.get(..4).map_or(frame::PROTOCOL_ERROR, |b| {
                    u32::from_be_bytes(b.try_into().expect("4"))
                });
                on(Event::Reset(code));
            }
            frame::HEADERS if h.stream == STREAM => {
                let body = unpadded(h, payload)?;
                let body = if h.flags & frame::PRIORITY_FLAG != 0 {
                    body.get(5..).ok_or_else(|| {
                        StreamError("a HEADERS frame too short for its priority".into())
                    })?
                } else {
                    body
                };
                self.block.clear();
                self.block.extend_from_slice(body);
                self.block_flags = Some(h.flags);
                if h.flags & frame::END_HEADERS != 0 {
                    self.end_block(on)?;
                }
            }
            frame::CONTINUATION => {
                if self.block_flags.is_none() {
                    return Err(StreamError(
                        "a CONTINUATION frame with no header block".into(),
                    ));
                }
                self.block.extend_from_slice(payload);
                if h.flags & frame::END_HEADERS != 0 {
                    self.end_block(on)?;
                }
            }
            frame::DATA if h.stream == STREAM => {
                self.consumed += h.len;
                let body = unpadded(h, payload)?;
                self.message.extend_from_slice(body);
                let mut used = 0;
                while self.message.len() - used >= 5 {
                    let m = &self.message[used..];
                    let n = u32::from_be_bytes([m[1], m[2], m[3], m[4]]) as usize;
                    if n > MAX_MESSAGE {
                        return Err(StreamError(format!(
                            "a {n}-byte message is beyond the {MAX_MESSAGE} bytes this side reads"
                        )));
                    }
                    if m.len() < 5 + n {
                        break;
                    }
                    on(Event::Message(&m[5..5 + n]));
                    used += 5 + n;
                }
                self.message.drain(..used);
                if h.flags & frame::END_STREAM != 0 {
                    // Ended with no trailers: a call without a status.
                    on(Event::Trailers {
                        grpc_status: None,
                        grpc_message: b"",
                    });
                }
                if self.consumed >= RECV_WINDOW / 2 {
                    frame::window_update(out, 0, self.consumed);
                    frame::window_update(out, STREAM, self.consumed);
                    self.consumed = 0;
                }
            }
            frame::DATA => {
                // Another stream's (none is opened): its bytes are still the
                // connection's window.
                self.consumed += h.len;
            }
            _ => {}
        }
        Ok(())
    }

    /// A whole header block: the response's head, or its trailers.
    fn end_block(&mut self, on: &mut dyn FnMut(Event<'_>)) -> Result<(), StreamError> {
        self.block_flags = None;
        let (mut status, mut grpc_status) = (None, None);
        // The fields kept, as ranges of `self.fields`: the backend header's value
        // and grpc-message.
        let (mut backend, mut message) = (None, (0, 0));
        self.fields.clear();
        let fields = &mut self.fields;
        let want = &self.backend_header;
        self.decoder
            .decode(&self.block, |name, value| match name {
                b":status" => status = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()),
                b"grpc-status" => {
                    grpc_status = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok())
                }
                b"grpc-message" => {
                    message = (fields.len(), fields.len() + value.len());
                    fields.extend_from_slice(value);
                }
                n if n == &**want => {
                    backend = Some((fields.len(), fields.len() + value.len()));
                    fields.extend_from_slice(value);
                }
                _ => {}
            })
            .map_err(|e| StreamError(format!("a header block that does not decode: {e}")))?;
        let grpc_message = &self.fields[message.0..message.1];
        if !self.answered {
            self.answered = true;
            on(Event::Response {
                status: status.ok_or_else(|| StreamError("a response with no :status".into()))?,
                backend: backend.map(|(a, z)| &self.fields[a..z]),
                grpc_status,
                grpc_message,
            });
        } else {
            on(Event::Trailers {
                grpc_status,
                grpc_message,
            });
        }
        Ok(())
    }
}

/// A DATA or HEADERS payload without its padding.
fn unpadded(h: Head, payload: &[u8]) -> Result<&[u8], StreamError> {
    if h.flags & frame::PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload
        .first()
        .ok_or_else(|| StreamError("a padded frame with no pad length".into()))?
        as usize;
    payload
        .get(1..payload.len().saturating_sub(pad))
        .filter(|_| pad < payload.len())
        .ok_or_else(|| StreamError("a frame's padding is longer than the frame".into()))
}

/// A literal field without indexing: by a static table name index, or by name.
fn literal(out: &mut Vec<u8>, index: Option<usize>, name: &[u8], value: &[u8]) {
    match index {
        Some(i) => integer(out, 0x00, 4, i),
        None => {
            out.push(0x00);
            integer(out, 0, 7, name.len());
            out.extend_from_slice(name);
        }
    }
    integer(out, 0, 7, value.len());
    out.extend_from_slice(value);
}

/// A gRPC status code's name (`UNAVAILABLE`), for a stream's end.
pub fn status_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "unknown status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's header block of literal fields by name.
    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in fields {
            literal(&mut b, None, n.as_bytes(), v.as_bytes());
        }
        b
    }

    fn grpc(message: &[u8]) -> Vec<u8> {
        let mut m = vec![0];
        m.extend_from_slice(&(message.len() as u32).to_be_bytes());
        m.extend_from_slice(message);
        m
    }

    /// What `read` handed over, owned.
    #[derive(Debug, PartialEq)]
    enum Got {
        Response(u16, Option<Vec<u8>>, Option<u32>),
        Message(Vec<u8>),
        Trailers(Option<u32>, Vec<u8>),
        Reset(u32),
        GoAway(u32, u32),
    }

    fn read_all(c: &mut StreamClient, input: &[u8], out: &mut Vec<u8>) -> (usize, Vec<Got>) {
        let mut got = Vec::new();
        let n = c
            .read(input, out, &mut |e| {
                got.push(match e {
                    Event::Response {
                        status,
                        backend,
                        grpc_status,
                        ..
                    } => Got::Response(status, backend.map(<[u8]>::to_vec), grpc_status),
                    Event::Message(m) => Got::Message(m.to_vec()),
                    Event::Trailers {
                        grpc_status,
                        grpc_message,
                    } => Got::Trailers(grpc_status, grpc_message.to_vec()),
                    Event::Reset(c) => Got::Reset(c),
                    Event::GoAway { last, code } => Got::GoAway(last, code),
                })
            })
            .unwrap();
        (n, got)
    }

    /// The frames of `out`: (kind, flags, stream, payload).
    fn frames(mut out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut v = Vec::new();
        while out.len() >= HEADER_LEN {
            let h = Head::parse(out[..HEADER_LEN].try_into().unwrap());
            let end = HEADER_LEN + h.len as usize;
            v.push((h.kind, h.flags, h.stream, out[HEADER_LEN..end].to_vec()));
            out = &out[end..];
        }
        v
    }

    #[test]
    fn the_call_opens_with_the_preface_settings_window_and_an_open_stream() {
        let mut c = StreamClient::new("X-Backend");
        let mut out = Vec::new();
        c.start(
            &mut out,
            "http",
            "echo.test",
            "/ingressbench.Backend/EchoStream",
            &[],
        );
        assert!(out.starts_with(frame::PREFACE));
        let f = frames(&out[frame::PREFACE.len()..]);
        assert_eq!(f[0].0, frame::SETTINGS);
        assert_eq!(
            (f[1].0, f[1].2, f[1].3.clone()),
            (
                frame::WINDOW_UPDATE,
                0,
                (RECV_WINDOW - 65_535).to_be_bytes().to_vec()
            )
        );
        let (kind, flags, stream, block) = &f[2];
        assert_eq!(
            (*kind, *flags, *stream),
            (frame::HEADERS, frame::END_HEADERS, 1)
        );
        // The block decodes to the call's head, the stream not ended.
        let mut fields = Vec::new();
        Decoder::new(4096)
            .decode(block, |n, v| {
                fields.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .unwrap();
        let get = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get(":method"), Some("POST"));
        assert_eq!(get(":scheme"), Some("http"));
        assert_eq!(get(":path"), Some("/ingressbench.Backend/EchoStream"));
        assert_eq!(get(":authority"), Some("echo.test"));
        assert_eq!(get("content-type"), Some("application/grpc"));
        assert_eq!(get("te"), Some("trailers"));
    }

    #[test]
    fn messages_come_back_whole_across_frames_and_the_trailers_end_the_call() {
        let mut c = StreamClient::new("x-backend");
        let mut out = Vec::new();
        let mut input = Vec::new();
        frame::write_frame(&mut input, frame::SETTINGS, 0, 0, &[]);
        let head = block(&[
            (":status", "200"),
            ("x-backend", "b-1"),
            ("content-type", "application/grpc"),
        ]);
        frame::write_frame(&mut input, frame::HEADERS, frame::END_HEADERS, 1, &head);
        // Two messages: the first split over two DATA frames, the second padded.
        let (a, b) = (grpc(b"first!"), grpc(b"second"));
        frame::write_frame(&mut input, frame::DATA, 0, 1, &a[..3]);
        frame::write_frame(&mut input, frame::DATA, 0, 1, &a[3..]);
        let mut padded = vec![2];
        padded.extend_from_slice(&b);
        padded.extend_from_slice(&[0, 0]);
        frame::write_frame(&mut input, frame::DATA, frame::PADDED, 1, &padded);
        let trailers = block(&[("grpc-status", "14"), ("grpc-message", "draining")]);
        frame::write_frame(
            &mut input,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1,
            &trailers,
        );
        // Read in two halves: a frame cut in the middle waits for the rest.
        let cut = input.len() - 5;
        let (n, mut got) = read_all(&mut c, &input[..cut], &mut out);
        assert!(n < cut);
        let (m, more) = read_all(&mut c, &input[n..], &mut out);
        assert_eq!(n + m, input.len());
        got.extend(more);
        assert_eq!(
            got,
            [
                Got::Response(200, Some(b"b-1".to_vec()), None),
                Got::Message(b"first!".to_vec()),
                Got::Message(b"second".to_vec()),
                Got::Trailers(Some(14), b"draining".to_vec()),
            ]
        );
        // The server's SETTINGS was acknowledged.
        assert_eq!(frames(&out)[0], (frame::SETTINGS, frame::ACK, 0, vec![]));
    }

    #[test]
    fn messages_wait_for_the_peers_window_and_the_end_follows_them() {
        let mut c = StreamClient::new("x-backend");
        let mut out = Vec::new();
        // The server allows 10 bytes per stream.
        let mut input = Vec::new();
        let mut s = frame::SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
        s.extend_from_slice(&10u32.to_be_bytes());
        frame::write_frame(&mut input, frame::SETTINGS, 0, 0, &s);
        read_all(&mut c, &input, &mut out);
        out.clear();
        c.send(&mut out, &[7u8; 12]); // 17 bytes with its prefix
        c.finish(&mut out);
        let f = frames(&out);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].0, f[0].3.len()), (frame::DATA, 10));
        assert_eq!(c.waiting(), 7);
        // The window opens: the rest, then END_STREAM.
        out.clear();
        let mut input = Vec::new();
        frame::window_update(&mut input, 1, 100);
        read_all(&mut c, &input, &mut out);
        let f = frames(&out);
        assert_eq!((f[0].0, f[0].1, f[0].3.len()), (frame::DATA, 0, 7));
        assert_eq!(
            (f[1].0, f[1].1, f[1].3.len()),
            (frame::DATA, frame::END_STREAM, 0)
        );
        assert_eq!(c.waiting(), 0);
    }

    #[test]
    fn pings_are_answered_and_resets_goaways_and_refusals_are_said() {
        let mut c = StreamClient::new("x-backend");
        let mut out = Vec::new();
        let mut input = Vec::new();
        frame::write_frame(&mut input, frame::PING, 0, 0, b"12345678");
        frame::write_frame(&mut input, frame::GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]);
        frame::rst_stream(&mut input, 1, frame::CANCEL);
        let (_, got) = read_all(&mut c, &input, &mut out);
        assert_eq!(got, [Got::GoAway(1, 0), Got::Reset(frame::CANCEL)]);
        assert_eq!(
            frames(&out)[0],
            (frame::PING, frame::ACK, 0, b"12345678".to_vec())
        );

        // A trailers-only answer: the call refused in its head.
        let mut c = StreamClient::new("x-backend");
        let mut input = Vec::new();
        let head = block(&[(":status", "200"), ("grpc-status", "12")]);
        frame::write_frame(
            &mut input,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1,
            &head,
        );
        let (_, got) = read_all(&mut c, &input, &mut out);
        assert_eq!(got, [Got::Response(200, None, Some(12))]);
        // DATA that ends the stream with no trailers: a call with no status.
        let mut input = Vec::new();
        frame::write_frame(
            &mut input,
            frame::DATA,
            frame::END_STREAM,
            1,
            &grpc(b"last"),
        );
        let (_, got) = read_all(&mut c, &input, &mut out);
        assert_eq!(
            got,
            [Got::Message(b"last".to_vec()), Got::Trailers(None, vec![])]
        );

        // A frame larger than this side reads is refused, in words.
        let mut c = StreamClient::new("x-backend");
        let mut big = Vec::new();
        Head {
            len: 20_000,
            kind: frame::DATA,
            flags: 0,
            stream: 1,
        }
        .write(&mut big);
        let e = c.read(&big, &mut out, &mut |_| {}).unwrap_err();
        assert!(e.0.contains("20000-byte frame"), "{e}");
    }

    #[test]
    fn the_window_is_given_back_as_messages_are_read() {
        let mut c = StreamClient::new("x-backend");
        let mut out = Vec::new();
        let mut input = Vec::new();
        frame::write_frame(
            &mut input,
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &block(&[(":status", "200")]),
        );
        let m = grpc(&[1u8; 16_000]);
        let frames_needed = (RECV_WINDOW / 2) as usize / m.len() + 1;
        for _ in 0..frames_needed {
            frame::write_frame(&mut input, frame::DATA, 0, 1, &m);
        }
        let (_, got) = read_all(&mut c, &input, &mut out);
        assert_eq!(got.len(), 1 + frames_needed);
        let f = frames(&out);
        let updates: Vec<_> = f
            .iter()
            .filter(|f| f.0 == frame::WINDOW_UPDATE)
            .map(|f| f.2)
            .collect();
        assert_eq!(updates, [0, 1], "the connection's and the stream's");
        assert_eq!(status_name(14), "UNAVAILABLE");
    }
}
