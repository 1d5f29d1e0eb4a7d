//! WebSocket framing (RFC 6455), shared by the backend (a server: it reads masked
//! frames and sends plain ones) and the load engine (a client: the other way round),
//! so that both sides check a frame by the same rules and neither can drift from the
//! other. Only the framing is here; the sessions are each side's own.

use base64::Engine as _;

/// The GUID of RFC 6455 section 1.3, appended to the client's key.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The largest frame payload echoed: bigger ones are closed with 1009 (a message
/// too big), so a session's buffer stays bounded.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// Close codes (RFC 6455 7.4.1).
pub const NORMAL: u16 = 1000;
pub const GOING_AWAY: u16 = 1001;
pub const PROTOCOL_ERROR: u16 = 1002;
pub const TOO_BIG: u16 = 1009;

/// Opcodes.
pub const CONTINUATION: u8 = 0x0;
pub const TEXT: u8 = 0x1;
pub const BINARY: u8 = 0x2;
pub const CLOSE: u8 = 0x8;
pub const PING: u8 = 0x9;
pub const PONG: u8 = 0xA;

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`: the base64 of the
/// SHA-1 of the key and the GUID.
pub fn accept(key: &[u8]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key);
    ctx.update(GUID);
    base64::engine::general_purpose::STANDARD.encode(ctx.finish().as_ref())
}

/// Whether a header's comma-separated value holds `token` (any case).
pub fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
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

/// Reads a frame's head from the start of `buf`, checked as its receiver must
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

/// Appends a server's frame (unmasked) to `out`.
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

/// Appends a client's frame to `out`: masked with `mask`, as RFC 6455 5.3 requires
/// of every frame a client sends (the key is the sender's choice; it only has to be
/// one a proxy cannot predict, which no benchmark's traffic needs to defend).
pub fn masked_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8], mask: [u8; 4]) {
    out.push(0x80 | opcode);
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
}

/// A close frame's code and reason; 1005 (no status received) for an empty one.
pub fn close_reason(payload: &[u8]) -> (u16, &[u8]) {
    match payload {
        [a, b, reason @ ..] => (u16::from_be_bytes([*a, *b]), reason),
        _ => (1005, &[]),
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

    #[test]
    fn a_clients_frame_is_read_back_masked_in_each_length_form() {
        for n in [0usize, 125, 126, 65_535, 65_536] {
            let payload: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let mut out = Vec::new();
            masked_frame(&mut out, TEXT, &payload, [9, 8, 7, 6]);
            let Parsed::Frame(h) = parse(&out, true) else {
                panic!("{n}");
            };
            assert_eq!(
                (h.fin, h.opcode, h.payload, h.mask),
                (true, TEXT, n, Some([9, 8, 7, 6]))
            );
            let back: Vec<u8> = out[h.len..]
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ [9, 8, 7, 6][i & 3])
                .collect();
            assert_eq!(back, payload, "{n}");
            // A server refuses to read it as its own kind.
            assert_eq!(parse(&out, false), Parsed::Refused(PROTOCOL_ERROR));
        }
        assert_eq!(close_reason(&[0x03, 0xE9, b'b', b'y']), (1001, &b"by"[..]));
        assert_eq!(close_reason(&[]), (1005, &[][..]));
    }
}
