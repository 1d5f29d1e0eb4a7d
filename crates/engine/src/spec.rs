//! The load as a user or a scenario describes it, before the engine checks it: a
//! [`LoadSpec`] and its parts (the protocol, HTTP/2 and gRPC settings), and why one
//! is refused ([`SpecError`], naming the [`Setting`]).
//!
//! Resolving a spec into what the engine runs is [`crate::resolve`]; the spec itself
//! holds plain values, so that it can travel as data to another generator.

pub use crate::setting::{Setting, SpecError};

use crate::{profile, schedule, targets, tls};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The default of [`LoadSpec::send_window`]: at 20,000 req/s on one thread it cut
/// the CPU per request by a quarter (docs/benchmarks.md) and moves no arrival by
/// more than 50 µs, a tenth of the lag a user could notice.
pub const DEFAULT_SEND_WINDOW: Duration = Duration::from_micros(50);

/// The widest [`LoadSpec::send_window`]: arrivals stay within a millisecond of the
/// schedule, the precision wrk2's tick gives.
pub const MAX_SEND_WINDOW: Duration = Duration::from_millis(1);

/// Load settings as a user or a scenario gives them, before validation.
///
/// Every value is typed (a schedule, a TLS version, a protocol are enums), and the
/// whole spec is serde data: it is what a coordinator hands each of its generators
/// (a local process or a pod), which split and resolve it exactly as a single
/// generator does. A field added here travels with it; `#[serde(default)]` lets a
/// spec that leaves a setting out take its default ([`LoadSpec::default`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// Which connections carry which due times.
    pub schedule: schedule::Model,
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
    #[serde(with = "markers")]
    pub markers: Vec<http1::Marker>,
    /// Fraction of requests to keep individually (`--sample`), 0 for none.
    pub sample: f64,
    /// The CPUs the generator's threads run on (empty: any).
    pub cpus: Vec<usize>,
    /// HTTP/2 and gRPC (`--http2`, `--h2c`, `--streams`, `--grpc`); the default is
    /// HTTP/1.1.
    pub http2: Http2Spec,
}

/// The defaults of `ingressbench load`: one GET of `url` at no rate (closed loop)
/// over 10 connections for 10 s, 10 s request timeout, 2 s connect timeout.
impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            url: String::new(),
            method: "GET".into(),
            headers: Vec::new(),
            body: Vec::new(),
            targets: Vec::new(),
            targets_from: String::new(),
            threads: None,
            connections: 10,
            rate: None,
            profile: None,
            schedule: schedule::Model::default(),
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            send_window: DEFAULT_SEND_WINDOW,
            new_connection: false,
            reuse_closed: false,
            tls: tls::TlsOptions::default(),
            backend_header: "x-backend".into(),
            markers: Vec::new(),
            sample: 0.0,
            cpus: Vec::new(),
            http2: Http2Spec::default(),
        }
    }
}

/// Response markers as data: `{"header": NAME}` or `{"body": [bytes]}`
/// ([`http1::Marker`] is the parser's type, which knows nothing of serde).
mod markers {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Marker {
        Header(String),
        Body(Vec<u8>),
    }

    pub fn serialize<S: Serializer>(m: &[http1::Marker], s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<Marker> = m
            .iter()
            .map(|m| match m {
                http1::Marker::Header(n) => Marker::Header(n.clone()),
                http1::Marker::Body(b) => Marker::Body(b.clone()),
            })
            .collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<http1::Marker>, D::Error> {
        Ok(Vec::<Marker>::deserialize(d)?
            .into_iter()
            .map(|m| match m {
                Marker::Header(n) => http1::Marker::Header(n),
                Marker::Body(b) => http1::Marker::Body(b),
            })
            .collect())
    }
}

/// The protocol the load speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    #[default]
    #[serde(rename = "http/1.1")]
    Http1,
    /// HTTP/2 over TLS, agreed by ALPN (`--http2`).
    #[serde(rename = "h2")]
    H2,
    /// HTTP/2 over plain TCP with prior knowledge (`--h2c`).
    #[serde(rename = "h2c")]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec with every setting off its default.
    fn every_setting() -> LoadSpec {
        LoadSpec {
            url: "https://127.0.0.1:8443/x".into(),
            method: "POST".into(),
            headers: vec!["x-a: $(HOME)".into()],
            body: b"{\"k\": 1}\n".to_vec(),
            targets: vec![targets::TargetSpec {
                method: "PUT".into(),
                url: "https://h1.routes.test/r1".into(),
                headers: vec!["x-b: 2".into()],
                body: vec![0, 159, 146, 150],
                weight: 3,
                line: 7,
            }],
            targets_from: "t.txt".into(),
            threads: Some(2),
            connections: 50,
            rate: Some(1234.5),
            profile: Some(profile::RateProfile::parse("100..5000:60s,2000:30s").unwrap()),
            schedule: schedule::Model::Shared,
            duration: Duration::from_millis(10_500),
            warmup: Duration::from_secs(2),
            timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_millis(1500),
            send_window: Duration::from_micros(120),
            new_connection: true,
            reuse_closed: true,
            tls: tls::TlsOptions {
                insecure: true,
                cacert: Some("/tmp/ca.pem".into()),
                version: Some(tls::TlsVersion::V12),
                resume: true,
            },
            backend_header: "x-served-by".into(),
            markers: vec![
                http1::Marker::Header("x-custom".into()),
                http1::Marker::Body(b"uri: /rewritten/".to_vec()),
            ],
            sample: 0.1,
            cpus: vec![0, 3],
            http2: Http2Spec {
                protocol: Protocol::H2,
                streams: Some(8),
                grpc: Some(GrpcCall {
                    method: "a.B/C".into(),
                    message: GrpcCall::payload(10),
                }),
                window: Some(1 << 20),
            },
        }
    }

    /// The spec a generator reads back is the one its coordinator wrote, setting by
    /// setting: what each generator splits is the load the user or the scenario gave.
    #[test]
    fn a_spec_survives_the_trip_through_json() {
        let spec = every_setting();
        let json = serde_json::to_string(&spec).unwrap();
        let back: LoadSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        // The typed values are written by name.
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["schedule"], "shared");
        assert_eq!(v["tls"]["version"], "1.2");
        assert_eq!(v["http2"]["protocol"], "h2");
        assert_eq!(v["profile"], "100..5000:60s,2000:30s");
        assert_eq!(v["markers"][0]["header"], "x-custom");
        // Left out, a setting takes its default; a misspelt one is refused, as is a
        // misspelt value.
        let min: LoadSpec = serde_json::from_str(r#"{"url": "http://h/"}"#).unwrap();
        assert_eq!(
            min,
            LoadSpec {
                url: "http://h/".into(),
                ..LoadSpec::default()
            }
        );
        assert!(serde_json::from_str::<LoadSpec>(r#"{"reuse_close": true}"#).is_err());
        assert!(serde_json::from_str::<LoadSpec>(r#"{"schedule": "sharde"}"#).is_err());
        assert!(serde_json::from_str::<LoadSpec>(r#"{"tls": {"version": "1.4"}}"#).is_err());
    }
}
