//! Why a request failed: the error kinds users see, and their counts.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a request failed. The names are the ones users see in tables and JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Refused, reset or unreachable while connecting.
    Connect,
    /// No connection (TCP and TLS) within the connect timeout.
    ConnectTimeout,
    /// The TLS handshake failed.
    Tls,
    /// Reset, EOF or bad bytes while reading a response.
    Read,
    /// The request could not be written.
    Write,
    /// No full response within the request timeout.
    Timeout,
    /// A full response with status >= 400.
    Status,
    /// The response's framing and the bytes on the connection disagree: bytes
    /// after a complete response (a body after a `204` or `304`, more than its
    /// `Content-Length`), whether in the same read or a later one. Not a `read`
    /// error: the response arrived; what came with it would be read as the next one
    /// (a desync, the kind of fault request smuggling is built on).
    Framing,
    /// HTTP/2: the server reset the request's stream (RST_STREAM), or the
    /// connection ended with the stream open and below a GOAWAY's last id.
    Reset,
    /// gRPC: the call ended with a `grpc-status` other than OK (or none); the
    /// status names are counted in [`Errors::grpc_codes`]. Never a success, whatever
    /// the HTTP status.
    Grpc,
}

impl ErrorKind {
    /// Every kind, in the order tables show them.
    pub const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::Connect,
        ErrorKind::ConnectTimeout,
        ErrorKind::Tls,
        ErrorKind::Read,
        ErrorKind::Write,
        ErrorKind::Timeout,
        ErrorKind::Status,
        ErrorKind::Framing,
        ErrorKind::Reset,
        ErrorKind::Grpc,
    ];
    /// How many kinds there are: the length of every per-kind counter array.
    pub const COUNT: usize = 10;

    /// The kind's name in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::Read => "read",
            ErrorKind::Write => "write",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Status => "status",
            ErrorKind::Framing => "framing",
            ErrorKind::Reset => "reset",
            ErrorKind::Grpc => "grpc",
        }
    }

    /// Position in [`ErrorKind::ALL`], for counting in a fixed array.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Error counts by kind, plus each HTTP status >= 400 seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Errors {
    pub connect: u64,
    pub connect_timeout: u64,
    pub tls: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    pub status: u64,
    /// Framing desyncs ([`ErrorKind::Framing`]); absent (0) in files written before
    /// the kind existed, when they were counted as `read`.
    #[serde(default)]
    pub framing: u64,
    /// HTTP/2 streams the server reset ([`ErrorKind::Reset`]); absent (0) in older
    /// files and in HTTP/1.1 runs' files.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reset: u64,
    /// gRPC calls that ended with a status other than OK ([`ErrorKind::Grpc`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grpc: u64,
    /// gRPC status name (`UNAVAILABLE`, `INTERNAL`) to count, for the `grpc` errors.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_codes: BTreeMap<String, u64>,
    /// Status code (as a string, e.g. "503") to count.
    pub status_codes: BTreeMap<String, u64>,
    /// The first error of each kind that occurred, kind name to its message
    /// (`{"tls": "invalid peer certificate: UnknownIssuer"}`): counts say how often,
    /// this says why. Absent in files written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub first: BTreeMap<String, String>,
}

impl Errors {
    /// Builds the table from an array indexed by [`ErrorKind::index`].
    pub fn from_counts(
        counts: &[u64; ErrorKind::COUNT],
        status_codes: BTreeMap<String, u64>,
    ) -> Self {
        Errors {
            connect: counts[0],
            connect_timeout: counts[1],
            tls: counts[2],
            read: counts[3],
            write: counts[4],
            timeout: counts[5],
            status: counts[6],
            framing: counts[7],
            reset: counts[8],
            grpc: counts[9],
            grpc_codes: BTreeMap::new(),
            status_codes,
            first: BTreeMap::new(),
        }
    }

    /// The count of one kind.
    pub fn get(&self, kind: ErrorKind) -> u64 {
        match kind {
            ErrorKind::Connect => self.connect,
            ErrorKind::ConnectTimeout => self.connect_timeout,
            ErrorKind::Tls => self.tls,
            ErrorKind::Read => self.read,
            ErrorKind::Write => self.write,
            ErrorKind::Timeout => self.timeout,
            ErrorKind::Status => self.status,
            ErrorKind::Framing => self.framing,
            ErrorKind::Reset => self.reset,
            ErrorKind::Grpc => self.grpc,
        }
    }

    /// All errors of every kind.
    pub fn total(&self) -> u64 {
        ErrorKind::ALL.iter().map(|k| self.get(*k)).sum()
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The name of a gRPC status code (grpc/doc/statuscodes.md), `OK` to
/// `UNAUTHENTICATED`; codes outside them are `CODE_<n>`.
pub fn grpc_code_name(code: u32) -> std::borrow::Cow<'static, str> {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    match NAMES.get(code as usize) {
        Some(n) => (*n).into(),
        None => format!("CODE_{code}").into(),
    }
}
