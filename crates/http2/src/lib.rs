//! HTTP/2 for ingressbench's load engine: the client side of RFC 9113 without I/O,
//! so the engine's own epoll loop decides when each request is sent (an async
//! HTTP/2 library would hand that to its runtime's timer, with a millisecond tick).
//!
//! - [`frame`]: frame headers, types, flags, error codes.
//! - [`request`]: requests encoded once into HPACK blocks and bodies.
//! - [`client`]: one connection's state: streams, flow control, GOAWAY.
//! - [`stream`]: one long-lived bidirectional stream (a gRPC call held open).
//!
//! - [`hpack`]: HPACK decoding, field by field, Huffman by `httlib-huffman`.
//!
//! `docs/http2.md` says why this and not the `h2` crate.

pub mod client;
pub mod frame;
pub mod hpack;
pub mod request;
pub mod stream;

pub use client::{ClientConn, Config, Counters, H2Error, Handler};
pub use request::Request;

#[cfg(test)]
mod tests;
