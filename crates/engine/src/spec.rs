//! The load as a user or a scenario describes it, before the engine checks it: a
//! [`LoadSpec`] and its parts (the protocol, HTTP/2 and gRPC settings), and why one
//! is refused ([`SpecError`], naming the [`Setting`]).
//!
//! Resolving a spec into what the engine runs is [`crate::resolve`]; the spec itself
//! holds plain values, so that it can travel as data to another generator.

mod error;

pub use error::{Setting, SpecError};

use crate::{profile, targets, tls};
use std::time::Duration;

/// The default of [`LoadSpec::send_window`]: at 20,000 req/s on one thread it cut
/// the CPU per request by a quarter (docs/benchmarks.md) and moves no arrival by
/// more than 50 µs, a tenth of the lag a user could notice.
pub const DEFAULT_SEND_WINDOW: Duration = Duration::from_micros(50);

/// The widest [`LoadSpec::send_window`]: arrivals stay within a millisecond of the
/// schedule, the precision wrk2's tick gives.
pub const MAX_SEND_WINDOW: Duration = Duration::from_millis(1);

/// Load settings as a user or a scenario gives them, before validation.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub url: String,
    pub method: String,
    pub headers: Vec<String>,
    pub body: Vec<u8>,
    /// A request mix (`--targets FILE`, a scenario's `requests:`) in place of the
    /// one request of `method`, `url`'s path and `body`: every connection still
    /// goes to `url`'s address and scheme; each target names its host (the `Host`
    /// header and the TLS server name) and its path. `headers` are added to each.
    pub targets: Vec<targets::TargetSpec>,
    /// Where `targets` came from, for errors: a file (`targets.txt:7: ...`), or
    /// empty for a scenario's list (`requests entry 7: ...`).
    pub targets_from: String,
    /// `None`: one per core, at most one per connection.
    pub threads: Option<usize>,
    pub connections: usize,
    /// `None`: closed loop.
    pub rate: Option<f64>,
    /// A load plan (`-R 1000:30s,2000:30s`) in place of `rate`; it sets the
    /// duration too.
    pub profile: Option<profile::RateProfile>,
    pub schedule: String,
    pub duration: Duration,
    pub warmup: Duration,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// When a thread wakes for a due request, it also sends those due within this
    /// long after it, in the same turn of its loop, instead of sleeping again for
    /// each: a wake-up costs more CPU than a request at high rates. A request sent
    /// early counts its latency from its send, so no latency is understated; its
    /// arrival moves earlier by at most the window, never later. wrk2 and oha do
    /// the same on a fixed 1 ms tick, which puts a floor of ~1 ms under their p50;
    /// this window is short and starts at the due time, so there is none. Zero: each
    /// request is sent at its own due time. At most [`MAX_SEND_WINDOW`].
    pub send_window: Duration,
    pub new_connection: bool,
    /// wrk2's way (`--reuse-closed`): a kept-alive connection the server closed
    /// while idle still carries the next request, which fails. Off (the default),
    /// the engine watches idle connections for the server's close and reconnects,
    /// counting it in `connections.reconnects_after_server_close`.
    pub reuse_closed: bool,
    pub tls: tls::TlsOptions,
    pub backend_header: String,
    /// Headers or body strings to note per response (at most
    /// [`http1::marker::MAX_MARKERS`]), counted per change window: how a scenario
    /// sees a route change in traffic. Empty for a plain load.
    pub markers: Vec<http1::Marker>,
    /// Fraction of requests to keep individually (`--sample`), 0 for none.
    pub sample: f64,
    /// The CPUs the generator's threads run on (empty: any).
    pub cpus: Vec<usize>,
    /// HTTP/2 and gRPC (`--http2`, `--h2c`, `--streams`, `--grpc`); the default is
    /// HTTP/1.1.
    pub http2: Http2Spec,
}

/// The protocol the load speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Http1,
    /// HTTP/2 over TLS, agreed by ALPN (`--http2`).
    H2,
    /// HTTP/2 over plain TCP with prior knowledge (`--h2c`).
    H2c,
}

impl Protocol {
    /// The name in results (`config.protocol`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::H2 => "h2",
            Protocol::H2c => "h2c",
        }
    }
}

/// HTTP/2 settings of a load.
#[derive(Clone, Debug, Default)]
pub struct Http2Spec {
    pub protocol: Protocol,
    /// Requests in flight per connection (`--streams`); `None`: 1.
    pub streams: Option<usize>,
    /// A gRPC unary call in place of the method, path and body.
    pub grpc: Option<GrpcCall>,
    /// The receive window of each stream, bytes (`--h2-window`); `None`:
    /// [`http2::client::DEFAULT_STREAM_WINDOW`].
    pub window: Option<u32>,
}

/// A gRPC unary call (`--grpc SERVICE/METHOD`).
#[derive(Clone, Debug)]
pub struct GrpcCall {
    /// `package.Service/Method`.
    pub method: String,
    /// The request message, serialized protobuf.
    pub message: Vec<u8>,
}

impl GrpcCall {
    /// Checks the method name: `package.Service/Method`, no leading slash, one
    /// slash, neither side empty, no spaces.
    ///
    /// # Errors
    /// What is wrong, in a sentence.
    pub fn check(&self) -> Result<(), String> {
        let m = &self.method;
        let ok = match m.split_once('/') {
            Some((svc, meth)) => {
                !svc.is_empty()
                    && !meth.is_empty()
                    && !meth.contains('/')
                    && m.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._/".contains(&b))
            }
            None => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                " '{m}' is not SERVICE/METHOD: write the full service name, a slash and the method, e.g. grpc.health.v1.Health/Check"
            ))
        }
    }

    /// The message with gRPC's length prefix (uncompressed).
    pub fn framed(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(5 + self.message.len());
        b.push(0);
        b.extend_from_slice(&(self.message.len() as u32).to_be_bytes());
        b.extend_from_slice(&self.message);
        b
    }

    /// A message of `n` bytes for `--grpc-payload`: field 1 of type bytes, which
    /// every message of one `bytes` field reads (and the backend's echo takes).
    pub fn payload(n: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(n + 6);
        b.push(0x0a);
        let mut v = n;
        while v >= 0x80 {
            b.push((v as u8) | 0x80);
            v >>= 7;
        }
        b.push(v as u8);
        b.resize(b.len() + n, b'x');
        b
    }
}
