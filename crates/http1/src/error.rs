//! The one error type of both parsers and the decoders under them.
//!
//! The engine and the backend used to have an error enum each; they only ever told
//! "malformed" from "fine", so one enum serves both and the variant says which rule
//! the bytes broke. [`crate::ParseError`] and [`crate::HttpError`] name it as the
//! old call sites did.

/// Why bytes are not a valid HTTP/1.1 message under the rules in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The head is not HTTP/1.x as `httparse` understands it.
    #[error("malformed message head: {0}")]
    Head(httparse::Error),
    /// Where a response should begin, bytes that cannot begin one (not `HTTP/`). On
    /// a connection that already carried a response, these are most likely the
    /// rest of the previous one: a framing desync.
    #[error("bytes that do not begin a response where a response should begin")]
    NotAResponse,
    /// The head did not end within the parser's limit.
    #[error("message head too large")]
    HeadTooLarge,
    /// `Content-Length` is not a number, overflows, or two values differ.
    #[error("invalid content-length")]
    ContentLength,
    /// A request `Transfer-Encoding` whose final coding is not `chunked`, or (strict)
    /// one that applies `chunked` more than once.
    #[error("unsupported transfer-encoding (only a final chunked is understood)")]
    TransferEncoding,
    /// Both `Content-Length` and `Transfer-Encoding` (strict only): ambiguous framing.
    #[error("both content-length and transfer-encoding")]
    AmbiguousLength,
    /// A chunked body that breaks the chunk grammar (or has a chunk of 2^60 bytes
    /// or more).
    #[error("malformed chunked body")]
    Chunk,
    /// The trailer section of a chunked body is longer than [`crate::chunked::MAX_TRAILERS`].
    #[error("chunked trailer section too large")]
    TrailersTooLarge,
    /// Bytes arrived after a complete response on a connection that never pipelines.
    #[error("bytes after the end of the response")]
    TrailingBytes,
    /// The connection closed before the message ended.
    #[error("connection closed before the message ended")]
    Truncated,
    /// A `101 Switching Protocols` answer: no longer HTTP/1.1.
    #[error("protocol switch is not supported")]
    Upgrade,
}
