//! WebSocket sessions (RFC 6455; issue 45): a request that asks for an upgrade is
//! answered `101 Switching Protocols` (naming the backend in `x-backend`, as every
//! answer does), and the connection then echoes every data frame as it came, answers
//! pings, and returns a close frame with the peer's code. A session is a long-lived
//! connection a proxy's reload, restart or rollout may cut; what this side does at
//! the end is what tells a graceful end from a cut:
//!
//! - the backend's drain (SIGTERM) sends a close frame `1001 going away`, with the
//!   reason [`DRAIN_REASON`], to every open session and waits for the peer's close,
//!   as a well-behaved server does;
//! - anything else the client sees (a reset, an EOF without a close frame, a close
//!   frame from the proxy) came from something between them.
//!
//! The framing is checked as a server must: a client frame that is not masked, a
//! reserved bit or opcode, a fragmented or oversized control frame is closed with
//! `1002`, a frame over [`MAX_PAYLOAD`] with `1009`.

use std::io;
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::state::draining;

/// The GUID of RFC 6455 section 1.3, appended to the client's key.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The largest frame payload echoed: bigger ones are closed with 1009 (a message
/// too big), so a session's buffer stays bounded.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// After the backend sent its close frame, how long it waits for the peer's.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Close codes this side sends.
pub const GOING_AWAY: u16 = 1001;
pub const PROTOCOL_ERROR: u16 = 1002;
pub const TOO_BIG: u16 = 1009;

/// Opcodes.
const CONTINUATION: u8 = 0x0;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`: the base64 of the
/// SHA-1 of the key and the GUID.
pub fn accept(key: &[u8]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key);
    ctx.update(GUID);
    base64::engine::general_purpose::STANDARD.encode(ctx.finish().as_ref())
}

/// Whether a header's comma-separated value holds `token` (any case).
fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// The key of a request head (the bytes up to its blank line) that asks for a
/// WebSocket: a GET with `Upgrade: websocket`, `Connection: upgrade`,
/// `Sec-WebSocket-Version: 13` and a key of 16 bytes in base64. `None` for any
/// other request, which is answered as usual.
pub fn upgrade_key(head: &[u8]) -> Option<Vec<u8>> {
    if !head.starts_with(b"GET ") {
        return None;
    }
    let (mut upgrade, mut connection, mut version) = (false, false, false);
    let mut key = None;
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade |= has_token(value, "websocket");
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection |= has_token(value, "upgrade");
        } else if name.eq_ignore_ascii_case(b"sec-websocket-version") {
            version = value == b"13";
        } else if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            let decoded = base64::engine::general_purpose::STANDARD.decode(value);
            if decoded.is_ok_and(|d| d.len() == 16) {
                key = Some(value.to_vec());
            }
        }
    }
    key.filter(|_| upgrade && connection && version)
}

/// The `101` answer to a request with `key`, from the backend `id`.
pub fn switching(key: &[u8], id: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-accept: {}\r\nx-backend: {id}\r\n\r\n",
        accept(key)
    )
    .into_bytes()
}

/// A frame's head, read from the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub fin: bool,
    pub opcode: u8,
    pub mask: Option<[u8; 4]>,
    /// Bytes of the head (2 to 14).
    pub len: usize,
    pub payload: usize,
}

/// What the start of a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A frame's head; its payload may not all be there yet.
    Frame(Head),
    /// Not a whole head yet.
    Incomplete,
    /// A frame this side refuses, with the close code to send.
    Refused(u16),
}

/// Reads a frame's head from the start of `buf`, as a server must check a client's
/// (`masked`: a client's frames must be, a server's must not).
pub fn parse(buf: &[u8], masked: bool) -> Parsed {
    let [b0, b1, ..] = *buf else {
        return Parsed::Incomplete;
    };
    let (fin, opcode) = (b0 & 0x80 != 0, b0 & 0x0F);
    if b0 & 0x70 != 0 || !matches!(opcode, CONTINUATION | TEXT | BINARY | CLOSE | PING | PONG) {
        return Parsed::Refused(PROTOCOL_ERROR);
    }
    if (b1 & 0x80 != 0) != masked {
        return Parsed::Refused(PROTOCOL_ERROR);
    }
    let (mut len, payload) = match b1 & 0x7F {
        126 => {
            let Some(n) = buf.get(2..4) else {
                return Parsed::Incomplete;
            };
            (4, u16::from_be_bytes([n[0], n[1]]) as u64)
        }
        127 => {
            let Some(n) = buf.get(2..10) else {
                return Parsed::Incomplete;
            };
            let mut b = [0u8; 8];
            b.copy_from_slice(n);
            (10, u64::from_be_bytes(b))
        }
        n => (2, u64::from(n)),
    };
    if opcode >= CLOSE && (!fin || payload > 125) {
        return Parsed::Refused(PROTOCOL_ERROR);
    }
    if payload > MAX_PAYLOAD as u64 {
        return Parsed::Refused(TOO_BIG);
    }
    let mask = if masked {
        let Some(m) = buf.get(len..len + 4) else {
            return Parsed::Incomplete;
        };
        len += 4;
        Some([m[0], m[1], m[2], m[3]])
    } else {
        None
    };
    Parsed::Frame(Head {
        fin,
        opcode,
        mask,
        len,
        payload: payload as usize,
    })
}

/// Appends a frame of this side's (unmasked) to `out`.
pub fn frame(out: &mut Vec<u8>, fin: bool, opcode: u8, payload: &[u8]) {
    out.push(if fin { 0x80 } else { 0 } | opcode);
    match payload.len() {
        n @ 0..=125 => out.push(n as u8),
        n @ 126..=0xFFFF => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// Appends a close frame with `code` to `out`.
pub fn close_frame(out: &mut Vec<u8>, code: u16) {
    frame(out, true, CLOSE, &code.to_be_bytes());
}

/// The reason of the drain's close frame: a proxy that closes its sessions with
/// 1001 too (Caddy on a config reload) is told from the backend by it.
pub const DRAIN_REASON: &[u8] = b"ingressbench backend draining";

/// Serves a session on `io` until it ends; `buf[start..end]` holds what the client
/// sent after its upgrade request. Returns once the close handshake is done, the
/// peer went away, or a frame was refused.
pub async fn session<S>(
    io: &mut S,
    mut buf: Vec<u8>,
    mut start: usize,
    mut end: usize,
    drain: &mut watch::Receiver<bool>,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut out = Vec::with_capacity(256);
    // Set once this side sent its close frame: the peer's close then ends it.
    let mut closing_since: Option<tokio::time::Instant> = None;
    loop {
        // Every whole frame in the buffer, in order.
        loop {
            let head = match parse(&buf[start..end], true) {
                Parsed::Incomplete => break,
                Parsed::Refused(code) => {
                    close_frame(&mut out, code);
                    io.write_all(&out).await?;
                    return io.shutdown().await;
                }
                Parsed::Frame(h) => h,
            };
            if end - start < head.len + head.payload {
                break;
            }
            let at = start + head.len;
            let payload = &mut buf[at..at + head.payload];
            if let Some(m) = head.mask {
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= m[i & 3];
                }
            }
            start = at + head.payload;
            match head.opcode {
                CLOSE => {
                    if closing_since.is_none() {
                        // The peer's close: answered with its code (RFC 6455 5.5.1).
                        let code = payload.get(..2).map_or(&[][..], |c| c);
                        frame(&mut out, true, CLOSE, code);
                        io.write_all(&out).await?;
                    }
                    return io.shutdown().await;
                }
                PING => frame(&mut out, true, PONG, payload),
                PONG => {}
                // After its close frame this side sends no data (RFC 6455 5.5.1).
                _ if closing_since.is_some() => {}
                op => frame(&mut out, head.fin, op, payload),
            }
        }
        if start == end {
            (start, end) = (0, 0);
        } else if end == buf.len() {
            buf.copy_within(start..end, 0);
            (start, end) = (0, end - start);
            if end == buf.len() {
                // A frame bigger than the buffer: room for the largest one taken.
                buf.resize(MAX_PAYLOAD + 14, 0);
            }
        }
        if !out.is_empty() {
            io.write_all(&out).await?;
            out.clear();
        }
        let n = match closing_since {
            Some(since) => {
                match tokio::time::timeout_at(since + CLOSE_WAIT, io.read(&mut buf[end..])).await {
                    Ok(r) => r?,
                    // No close frame came back: the TCP close ends it.
                    Err(_) => return io.shutdown().await,
                }
            }
            None => tokio::select! {
                biased;
                r = io.read(&mut buf[end..]) => r?,
                _ = draining(drain) => {
                    let mut payload = GOING_AWAY.to_be_bytes().to_vec();
                    payload.extend_from_slice(DRAIN_REASON);
                    frame(&mut out, true, CLOSE, &payload);
                    closing_since = Some(tokio::time::Instant::now());
                    continue;
                }
            },
        };
        if n == 0 {
            return Ok(());
        }
        end += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_of_rfc_6455s_example_key() {
        assert_eq!(
            accept(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn only_a_whole_upgrade_request_is_one() {
        let ok = b"GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: WebSocket\r\n\
            Connection: keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\n\
            Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
        assert_eq!(
            upgrade_key(ok).as_deref(),
            Some(&b"dGhlIHNhbXBsZSBub25jZQ=="[..])
        );
        let text = std::str::from_utf8(ok).unwrap();
        for (from, to) in [
            ("GET ", "POST "),
            ("Upgrade: WebSocket", "Upgrade: h2c"),
            ("keep-alive, Upgrade", "keep-alive"),
            ("Version: 13", "Version: 8"),
            ("dGhlIHNhbXBsZSBub25jZQ==", "short=="),
        ] {
            let other = text.replace(from, to);
            assert_eq!(upgrade_key(other.as_bytes()), None, "{from} -> {to}");
        }
    }

    #[test]
    fn frames_are_read_as_a_server_must() {
        // RFC 6455 5.7: a masked "Hello" from a client.
        let hello = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        assert_eq!(
            parse(&hello, true),
            Parsed::Frame(Head {
                fin: true,
                opcode: TEXT,
                mask: Some([0x37, 0xfa, 0x21, 0x3d]),
                len: 6,
                payload: 5,
            })
        );
        assert_eq!(parse(&hello[..1], true), Parsed::Incomplete);
        assert_eq!(parse(&hello[..4], true), Parsed::Incomplete);
        // Unmasked from a client, a reserved bit, an unknown opcode: refused.
        assert_eq!(parse(&[0x81, 0x05], true), Parsed::Refused(PROTOCOL_ERROR));
        assert_eq!(parse(&[0xC1, 0x80], true), Parsed::Refused(PROTOCOL_ERROR));
        assert_eq!(parse(&[0x83, 0x80], true), Parsed::Refused(PROTOCOL_ERROR));
        // A fragmented or long control frame.
        assert_eq!(parse(&[0x09, 0x80], true), Parsed::Refused(PROTOCOL_ERROR));
        assert_eq!(
            parse(&[0x89, 0xFE, 0, 126], true),
            Parsed::Refused(PROTOCOL_ERROR)
        );
        // Over the largest payload, announced in 64 bits.
        let mut big = vec![0x82, 0xFF];
        big.extend_from_slice(&((MAX_PAYLOAD as u64) + 1).to_be_bytes());
        assert_eq!(parse(&big, true), Parsed::Refused(TOO_BIG));
        // This side's own frames, read back unmasked, in each length form.
        for n in [0usize, 125, 126, 65_535, 65_536] {
            let mut out = Vec::new();
            frame(&mut out, false, BINARY, &vec![7u8; n]);
            let Parsed::Frame(h) = parse(&out, false) else {
                panic!("{n}");
            };
            assert_eq!(
                (h.fin, h.opcode, h.payload, h.mask),
                (false, BINARY, n, None)
            );
            assert_eq!(out.len(), h.len + n, "{n}");
        }
    }
}
