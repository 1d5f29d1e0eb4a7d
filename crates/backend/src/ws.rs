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

use crate::tally::{WsEnd as End, WsTally as Tally};
use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine as _;
use http1::ws::{
    accept, close_frame, frame, has_token, parse, Parsed, CLOSE, DRAIN_REASON, GOING_AWAY,
    MAX_PAYLOAD, PING, PONG,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::state::draining;

/// After the backend sent its close frame, how long it waits for the peer's.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

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

/// Serves a session on `io` until it ends, counting it in `tally`; `buf[start..end]`
/// holds what the client sent after its upgrade request.
pub async fn session<S>(
    io: &mut S,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    drain: &mut watch::Receiver<bool>,
    tally: &Tally,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    tally.opened.fetch_add(1, Ordering::Relaxed);
    let ended = serve(io, buf, start, end, drain).await;
    tally.count(*ended.as_ref().unwrap_or(&End::Gone));
    ended.map(|_| ())
}

/// [`session`]'s frames: returns once the close handshake is done, the peer went
/// away, or a frame was refused.
async fn serve<S>(
    io: &mut S,
    mut buf: Vec<u8>,
    mut start: usize,
    mut end: usize,
    drain: &mut watch::Receiver<bool>,
) -> io::Result<End>
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
                    let _ = io.shutdown().await;
                    return Ok(End::Refused);
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
                    let _ = io.shutdown().await;
                    return Ok(if closing_since.is_some() {
                        End::Drained
                    } else {
                        End::PeerClose
                    });
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
                    Err(_) => {
                        let _ = io.shutdown().await;
                        return Ok(End::Drained);
                    }
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
            return Ok(if closing_since.is_some() {
                End::Drained
            } else {
                End::Gone
            });
        }
        end += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
