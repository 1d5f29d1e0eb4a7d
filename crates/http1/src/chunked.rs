//! The one chunked-body state machine (RFC 9112 section 7.1), and the body decoder
//! built on it.
//!
//! It keeps a few words of state and no buffer, so it runs over input split at any
//! byte, and it stops right after the final CRLF so a pipelined message is left
//! untouched. Data bytes go to a caller's sink (a no-op for the engine and the
//! backend, which only need to know where the body ends; a `Vec` for the client).

use crate::framing::{Framing, Strictness};
use crate::Error;

/// Largest trailer section skipped, in bytes not counting line ends; more is
/// [`Error::TrailersTooLarge`].
pub const MAX_TRAILERS: u32 = 64 * 1024;

/// Most significant hex digits of a chunk size: 15 (below 2^60), so the size never
/// overflows and no honest chunk is refused.
const MAX_SIZE_DIGITS: u8 = 15;

/// How far one call to a decoder got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input that belong to this body.
    pub consumed: usize,
    /// The body has ended (nothing after `consumed` was touched).
    pub done: bool,
}

/// Position in the chunked grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hex size; `digits` significant digits so far, `any` once a digit
    /// (even `0`) was seen.
    Size { size: u64, digits: u8, any: bool },
    /// After the size: whitespace, then chunk extensions up to the line end, checked
    /// as they pass (`ext` once a `;` was seen, `quoted` inside a quoted value,
    /// `escaped` after its backslash).
    Ext {
        size: u64,
        ext: bool,
        quoted: bool,
        escaped: bool,
    },
    /// Saw CR after the size line; LF must follow.
    SizeLf { size: u64 },
    /// Skipping chunk data.
    Data { left: u64 },
    /// CR after the data.
    DataCr,
    /// LF after the data.
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerStart,
    /// Inside a trailer line.
    TrailerLine,
    /// LF ending a trailer line.
    TrailerLf,
    /// LF of the final CRLF.
    FinalLf,
    /// The body has ended.
    Done,
}

const START: State = State::Size {
    size: 0,
    digits: 0,
    any: false,
};

/// Incremental decoder of one chunked body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: State,
    trailers: u32,
    strictness: Strictness,
}

impl ChunkedDecoder {
    /// A decoder at the start of a chunked body.
    pub fn new(strictness: Strictness) -> ChunkedDecoder {
        ChunkedDecoder {
            state: START,
            trailers: 0,
            strictness,
        }
    }

    /// Whether the final CRLF has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Advances through `input`, handing chunk data to `data`; stops right after
    /// the body's final line.
    ///
    /// # Errors
    /// [`Error::Chunk`] or [`Error::TrailersTooLarge`]; the decoder is then
    /// unusable.
    pub fn feed(&mut self, input: &[u8], mut data: impl FnMut(&[u8])) -> Result<Progress, Error> {
        let lenient = self.strictness == Strictness::Lenient;
        let mut i = 0;
        while i < input.len() {
            if let State::Data { left } = self.state {
                // `take` is at most the input length, so the casts cannot truncate.
                let take = left.min((input.len() - i) as u64) as usize;
                data(&input[i..i + take]);
                i += take;
                let left = left - take as u64;
                self.state = if left == 0 {
                    State::DataCr
                } else {
                    State::Data { left }
                };
                continue;
            }
            if self.state == State::Done {
                break;
            }
            let b = input[i];
            i += 1;
            self.state = match (self.state, b) {
                (State::Size { size, digits, .. }, _) if b.is_ascii_hexdigit() => {
                    let d = u64::from((b as char).to_digit(16).unwrap_or(0));
                    // Leading zeros are not significant and do not count.
                    let digits = if size == 0 && d == 0 {
                        digits
                    } else {
                        digits + 1
                    };
                    if digits > MAX_SIZE_DIGITS {
                        return Err(Error::Chunk);
                    }
                    State::Size {
                        size: size << 4 | d,
                        digits,
                        any: true,
                    }
                }
                (
                    State::Size {
                        size, any: true, ..
                    },
                    b';' | b' ' | b'\t',
                ) => State::Ext {
                    size,
                    ext: b == b';',
                    quoted: false,
                    escaped: false,
                },
                (
                    State::Size {
                        size, any: true, ..
                    }
                    | State::Ext {
                        size,
                        quoted: false,
                        ..
                    },
                    b'\r',
                ) => State::SizeLf { size },
                (
                    State::Size {
                        size, any: true, ..
                    }
                    | State::Ext {
                        size,
                        quoted: false,
                        ..
                    },
                    b'\n',
                ) if lenient => after_size(size),
                (State::Ext { quoted: true, .. }, b'\r' | b'\n') => return Err(Error::Chunk),
                (State::Ext { .. }, b'\n') => return Err(Error::Chunk),
                (
                    State::Ext {
                        size,
                        ext,
                        quoted,
                        escaped,
                    },
                    _,
                ) => extension(size, ext, quoted, escaped, b)?,
                (State::SizeLf { size }, b'\n') => after_size(size),
                (State::DataCr, b'\r') => State::DataLf,
                (State::DataCr, b'\n') if lenient => START,
                (State::DataLf, b'\n') => START,
                (State::TrailerStart, b'\r') => State::FinalLf,
                (State::TrailerStart, b'\n') if lenient => {
                    self.state = State::Done;
                    break;
                }
                (State::TrailerLine, b'\r') => State::TrailerLf,
                (State::TrailerLine, b'\n') if lenient => State::TrailerStart,
                (State::TrailerStart | State::TrailerLine, b'\n') => return Err(Error::Chunk),
                (State::TrailerStart | State::TrailerLine, _) => {
                    self.trailers += 1;
                    if self.trailers > MAX_TRAILERS {
                        return Err(Error::TrailersTooLarge);
                    }
                    State::TrailerLine
                }
                (State::TrailerLf, b'\n') => State::TrailerStart,
                (State::FinalLf, b'\n') => {
                    self.state = State::Done;
                    break;
                }
                _ => return Err(Error::Chunk),
            };
        }
        Ok(Progress {
            consumed: i,
            done: self.state == State::Done,
        })
    }
}

/// One byte of what follows a chunk size: whitespace, then `;`-led extensions
/// (`name`, `name=token`, `name="quoted \" string"`). Anything else after the size
/// (`5 junk`) or a quote left open is refused in both modes: a proxy that forwards
/// such a size line lets two parsers disagree on where the chunk starts.
fn extension(size: u64, ext: bool, quoted: bool, escaped: bool, b: u8) -> Result<State, Error> {
    let state = |ext, quoted, escaped| State::Ext {
        size,
        ext,
        quoted,
        escaped,
    };
    if quoted {
        return Ok(match b {
            _ if escaped => state(ext, true, false),
            b'\\' => state(ext, true, true),
            b'"' => state(ext, false, false),
            // qdtext: visible characters, spaces, tabs and obs-text; no other control.
            b'\t' | b' '..=0x7e | 0x80..=0xff => state(ext, true, false),
            _ => return Err(Error::Chunk),
        });
    }
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    match b {
        b' ' | b'\t' => Ok(state(ext, false, false)),
        b';' => Ok(state(true, false, false)),
        b'=' if ext => Ok(state(ext, false, false)),
        b'"' if ext => Ok(state(ext, true, false)),
        _ if ext && tchar(b) => Ok(state(ext, false, false)),
        _ => Err(Error::Chunk),
    }
}

fn after_size(size: u64) -> State {
    if size == 0 {
        State::TrailerStart
    } else {
        State::Data { left: size }
    }
}

/// Decoder of one message body of any [`Framing`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyDecoder {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Length(u64),
    Chunked(ChunkedDecoder),
    UntilClose,
}

impl BodyDecoder {
    /// A decoder for a body framed as `framing`.
    pub fn new(framing: Framing, strictness: Strictness) -> BodyDecoder {
        BodyDecoder {
            kind: match framing {
                Framing::None => Kind::Length(0),
                Framing::Length(n) => Kind::Length(n),
                Framing::Chunked => Kind::Chunked(ChunkedDecoder::new(strictness)),
                Framing::UntilClose => Kind::UntilClose,
            },
        }
    }

    /// Whether the body has ended (a body that runs until close never has).
    pub fn is_done(&self) -> bool {
        match &self.kind {
            Kind::Length(left) => *left == 0,
            Kind::Chunked(c) => c.is_done(),
            Kind::UntilClose => false,
        }
    }

    /// Whether the body ends only when the peer closes.
    pub fn until_close(&self) -> bool {
        self.kind == Kind::UntilClose
    }

    /// Advances through `input`, handing body bytes to `data`.
    ///
    /// # Errors
    /// As [`ChunkedDecoder::feed`].
    pub fn feed(&mut self, input: &[u8], mut data: impl FnMut(&[u8])) -> Result<Progress, Error> {
        match &mut self.kind {
            Kind::Length(left) => {
                let take = (*left).min(input.len() as u64) as usize;
                if take > 0 {
                    data(&input[..take]);
                }
                *left -= take as u64;
                Ok(Progress {
                    consumed: take,
                    done: *left == 0,
                })
            }
            Kind::Chunked(c) => c.feed(input, data),
            Kind::UntilClose => {
                if !input.is_empty() {
                    data(input);
                }
                Ok(Progress {
                    consumed: input.len(),
                    done: false,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes; returns the data and the bytes
    /// consumed.
    fn decode(input: &[u8], step: usize, s: Strictness) -> Result<(Vec<u8>, usize), Error> {
        let mut d = ChunkedDecoder::new(s);
        let mut data = Vec::new();
        let mut used = 0;
        for piece in input.chunks(step) {
            let p = d.feed(piece, |b| data.extend_from_slice(b))?;
            used += p.consumed;
            if p.done {
                return Ok((data, used));
            }
            assert_eq!(p.consumed, piece.len());
        }
        Err(Error::Truncated)
    }

    #[test]
    fn data_and_end_at_every_step_in_both_modes() {
        let body = b"5;a=b;c=\"d\"\r\nhello\r\n001\r\n \r\n00\r\nT: 1\r\n\r\nNEXT";
        for s in [Strictness::Lenient, Strictness::Strict] {
            for step in 1..=body.len() {
                assert_eq!(
                    decode(body, step, s),
                    Ok((b"hello ".to_vec(), body.len() - 4)),
                    "{s:?} step {step}"
                );
            }
        }
    }

    #[test]
    fn size_digits_are_limited_but_leading_zeros_are_free() {
        let ok = b"0000000000000000000000001\r\na\r\n0\r\n\r\n";
        assert_eq!(decode(ok, 1, Strictness::Strict).unwrap().0, b"a");
        let max = b"fffffffffffffff\r\n";
        assert_eq!(decode(max, 1, Strictness::Strict), Err(Error::Truncated));
        let over = b"1000000000000000\r\n";
        assert_eq!(decode(over, 1, Strictness::Lenient), Err(Error::Chunk));
    }

    #[test]
    fn grammar_errors_in_both_modes() {
        for bad in [
            &b"\r\n"[..],
            b";x\r\n",
            b"g\r\n",
            b"1\r\nab",
            b"1\rx",
            b"1\r\na\rx",
            b"0\r\n\rx",
            b"0\r\nT\rx",
            // Junk after the size, and extensions that do not close.
            b"5 junk\r\nhello\r\n0\r\n\r\n",
            b"5 x=1\r\nhello\r\n0\r\n\r\n",
            b"5;a=\"open\r\nhello\r\n0\r\n\r\n",
            b"5;a=\"b\\\"\r\nhello\r\n0\r\n\r\n",
            b"5;a=(b)\r\nhello\r\n0\r\n\r\n",
            b"5;a\x01\r\nhello\r\n0\r\n\r\n",
        ] {
            for s in [Strictness::Lenient, Strictness::Strict] {
                assert_eq!(
                    decode(bad, bad.len(), s),
                    Err(Error::Chunk),
                    "{s:?} {bad:?}"
                );
            }
        }
    }

    #[test]
    fn extensions_in_the_grammar_pass_in_both_modes() {
        for body in [
            &b"5 ;a\r\nhello\r\n0\r\n\r\n"[..],
            b"5;a=b;c=\"d;e \\\" f\"\r\nhello\r\n0\r\n\r\n",
            b"5 ; a = b \t\r\nhello\r\n0;last\r\n\r\n",
        ] {
            for s in [Strictness::Lenient, Strictness::Strict] {
                assert_eq!(
                    decode(body, 1, s),
                    Ok((b"hello".to_vec(), body.len())),
                    "{s:?} {body:?}"
                );
            }
        }
    }

    #[test]
    fn trailer_section_is_bounded() {
        let mut body = b"0\r\n".to_vec();
        // Each line has 9 bytes before its line end.
        for _ in 0..MAX_TRAILERS / 9 + 1 {
            body.extend_from_slice(b"X-T: 1234\r\n");
        }
        assert_eq!(
            decode(&body, 4096, Strictness::Lenient),
            Err(Error::TrailersTooLarge)
        );
    }

    #[test]
    fn a_done_decoder_takes_nothing_more() {
        let mut d = ChunkedDecoder::new(Strictness::Strict);
        assert!(d.feed(b"0\r\n\r\n", |_| {}).unwrap().done);
        assert_eq!(
            d.feed(b"more", |_| {}),
            Ok(Progress {
                consumed: 0,
                done: true
            })
        );
    }

    #[test]
    fn body_decoder_framings() {
        let mut b = BodyDecoder::new(Framing::Length(3), Strictness::Strict);
        let mut data = Vec::new();
        let p = b.feed(b"abcdef", |d| data.extend_from_slice(d)).unwrap();
        assert_eq!(
            (p.consumed, p.done, data.as_slice()),
            (3, true, &b"abc"[..])
        );
        let b = BodyDecoder::new(Framing::None, Strictness::Strict);
        assert!(b.is_done());
        let mut b = BodyDecoder::new(Framing::UntilClose, Strictness::Lenient);
        assert!(!b.feed(b"xyz", |_| {}).unwrap().done);
        assert!(b.until_close() && !b.is_done());
    }
}
