//! HTTP/1.1 framing for ingressbench: one header scan, one chunked-body state
//! machine and one body-framing decision, used by the load engine (responses), the
//! backend (requests) and the lab's small client.
//!
//! # Why one crate
//!
//! The project had three chunked decoders and two header scanners, and they
//! disagreed: the engine took `Transfer-Encoding` with `Content-Length`, a signed
//! length and bare LFs that the backend refused. Some disagreement is wanted: a load
//! generator measuring real proxies must accept what curl accepts, and a backend
//! behind proxies under test must refuse what could smuggle a request. So the rules
//! are written once, and where the two sides differ it is by one explicit
//! parameter, [`Strictness`], not by accident. The engine is lenient where real
//! clients are, and says so below; the backend is strict where a careful server
//! must be.
//!
//! # Rules
//!
//! | Rule | Lenient (engine, lab client) | Strict (backend) | Why |
//! |---|---|---|---|
//! | `Transfer-Encoding` and `Content-Length` together | chunked wins, the length is ignored, the connection closes after the message; [`ResponseParser::ambiguous`] says so (the engine counts a framing warning) | [`Error::AmbiguousLength`] | the classic smuggling vector; RFC 9112 §6.1 lets a recipient decode by TE but requires the close |
//! | final transfer coding is not `chunked` | request: [`Error::TransferEncoding`]; response: body runs until close | same | RFC 9112 §6.3 |
//! | `chunked` not last or applied twice (`chunked, gzip`, `chunked, chunked`) | the last coding decides | [`Error::TransferEncoding`] | forbidden by RFC 9112 §6.1; parsers differ on it |
//! | `Transfer-Encoding` on HTTP/1.0 | decoded, connection closes after | [`Error::TransferEncoding`] | RFC 9112 §6.1: faulty framing |
//! | signed `Content-Length` (`+5`) | [`Error::ContentLength`] | same | not in the grammar (RFC 9110: digits only); a parser that reads it beside one that refuses it can be smuggled through (hyper's CVE-2021-32715) |
//! | `Content-Length` with leading zeros (`007`) | 7 | 7 | in the grammar (`1*DIGIT`) |
//! | `Content-Length` list of equal values (`5, 5`) | 5 | [`Error::ContentLength`] | RFC 9112 §6.3 allows accepting it; a server need not |
//! | repeated `Content-Length` lines, equal | accepted | accepted | same meaning |
//! | repeated `Content-Length`, differing; empty, non-digit or above `u64` | [`Error::ContentLength`] | same | no safe reading exists (a garbage length is an error even next to chunked) |
//! | bare LF ending a chunk-size line, chunk data or a trailer line | accepted as a line end | [`Error::Chunk`] | curl and most servers accept it; a front and a back that disagree on it can be smuggled through |
//! | bare CR anywhere in the chunk grammar | [`Error::Chunk`] | same | nobody sends it on purpose |
//! | chunk extensions (`5;a=b`, `5;c="d"`), spaces or tabs after the size | checked, not interpreted | same | allowed by the grammar (BWS) |
//! | anything else after a chunk size (`5 junk`, `5;a="open`) | [`Error::Chunk`] | same | two parsers would disagree on where the chunk starts |
//! | chunk size with leading zeros | accepted | accepted | in the grammar; they do not count towards the digit limit |
//! | chunk size of 16 or more significant hex digits (≥ 2^60) | [`Error::Chunk`] | same | cannot overflow a `u64`, no real chunk is that large |
//! | empty chunk-size line, data not followed by its line end | [`Error::Chunk`] | same | grammar |
//! | trailer fields | skipped, not interpreted, at most [`chunked::MAX_TRAILERS`] bytes | same | nothing here needs them |
//! | obs-fold (continuation lines) in a response head | accepted, the value keeps the fold | [`Error::Head`] | curl accepts it; RFC 9112 §5.2 lets a recipient reject |
//! | obs-fold in a request head | [`Error::Head`] | same | `httparse` never accepts it in requests; RFC 9112 §5.2 allows refusing |
//! | bare LF ending head lines | accepted | accepted | `httparse` has no switch for it; RFC 9112 §2.2 lets a recipient accept it, and the head is parsed once here, so no second parser can disagree |
//! | response to `HEAD`, `1xx`, `204`, `304` | no body, whatever the headers say (`1xx` are skipped, `101` is [`Error::Upgrade`]) | same | RFC 9112 §6.3 |
//! | response with neither framing | body until close; the response says `close` | same | RFC 9112 §6.3 |
//! | request with neither framing | no body | same | requests never run to close |
//! | keep-alive | HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `keep-alive` | same | RFC 9112 §9.3 |
//! | size limits | head: response 64 KiB, request 16 KiB, 64 header lines; client body 64 MiB | same | bounded memory per connection |
//! | a response beginning with bytes that cannot begin one (not `HTTP/`) | [`Error::NotAResponse`] | same | on a connection that carried a response before, the rest of that one: the engine counts a `framing` error, elsewhere a `read` error |
//! | bytes after a complete response ([`ResponseParser`]) | [`Error::TrailingBytes`] | same | the engine never pipelines, so they are garbage: a framing desync, counted as a `framing` error |
//!
//! `docs/http1.md` carries the same table for readers of the repository.
//!
//! # Layout
//!
//! - [`framing`]: [`Strictness`], the header [`Scan`] and the [`Framing`] decision.
//! - [`chunked`]: the chunked state machine and the [`BodyDecoder`] on top of it.
//! - [`response`]: the engine's incremental, allocation-free [`ResponseParser`].
//! - [`request`]: the backend's [`RequestReader`].
//! - [`marker`]: which of a few headers or body strings a response carried.
//! - [`target`]: the engine's target URL and request encoding.
//! - [`client`]: a blocking client for the lab's admin calls and probes.

pub mod chunked;
pub mod client;
mod error;
pub mod framing;
pub mod marker;
pub mod request;
pub mod response;
pub mod target;
pub mod ws;

pub use chunked::{BodyDecoder, ChunkedDecoder, Progress};
pub use error::Error;
pub use framing::{Framing, Scan, Strictness};
pub use marker::Marker;
pub use request::{Feed, RequestReader};
pub use response::ResponseParser;
pub use target::{encode_request, Target};

/// The engine's name for [`Error`].
pub type ParseError = Error;
/// The backend's name for [`Error`].
pub type HttpError = Error;
