//! The load engine: a constant, open-loop request rate over many connections, with
//! latency measured from each request's intended send time.
//!
//! [`run`] takes a validated [`Plan`], starts one [`worker`] per thread (each owns its
//! connections, its epoll loop and its histograms), merges what they report once a
//! second into a timeline, and returns the merged [`Outcome`]. The engine knows
//! nothing of scenarios, proxies or reports; [`Outcome::to_result`] turns its figures
//! into the shared result document.

pub mod failure;
pub mod machine;
pub mod mix;
pub mod profile;
pub mod rx;
pub mod schedule;
pub mod search;
pub mod spec;
pub mod split;
pub mod stats;
pub mod sysinfo;
pub mod targets;
pub mod tls;
pub mod windows;
pub mod worker;

use hdrhistogram::Histogram;
/// What a response may carry that tells which configuration served it (see
/// [`LoadSpec::markers`]).
pub use http1::Marker;
use results::clock::{Clock, Nanos};
use results::histogram::{percentiles, serialize_v2};
use results::time::rfc3339;
use results::{
    Errors, Generator, GeneratorPart, Generators, Latency, LoadConfig, Rate, Requests, RunResult,
    Samples, TimelineEntry, TlsStats, RESULT_SCHEMA,
};
use spec::SpecError;
use stats::{Interval, Totals};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

/// Lag p99 above which the generator counts as overloaded: it was not sending when
/// it meant to, so the latencies it measured are not the server's alone.
pub const LAG_LIMIT_NS: u64 = 2_000_000;

/// The default of [`LoadSpec::send_window`]: at 20,000 req/s on one thread it cut
/// the CPU per request by a quarter (docs/benchmarks.md) and moves no arrival by
/// more than 50 µs, a tenth of the lag a user could notice.
pub const DEFAULT_SEND_WINDOW: Duration = Duration::from_micros(50);

/// The widest [`LoadSpec::send_window`]: arrivals stay within a millisecond of the
/// schedule, the precision wrk2's tick gives.
pub const MAX_SEND_WINDOW: Duration = Duration::from_millis(1);

/// `2ms`, `50us`: a short duration as a user writes it.
fn micros_or_millis(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// How busy (CPU time over wall time, per worker thread) a generator whose lag is
/// over the limit must have been to be called overloaded, short of CPU. Below it the
/// threads had time to spare and woke late instead: more threads would not help.
/// A generator short of CPU runs its threads nearly flat out; 0.85 leaves room for
/// the seconds of warm-up and drain in which it was not.
pub const BUSY_OVERLOADED: f64 = 0.85;

/// Why the engine could not run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("could not start worker threads: {0}")]
    Spawn(std::io::Error),
    #[error("{0}")]
    Worker(String),
}

/// A resolved, validated load.
#[derive(Clone)]
pub struct Plan {
    pub addr: SocketAddr,
    /// The requests, encoded once, and the host each connection carries (one
    /// request and one host for a plain run).
    pub mix: Arc<mix::Mix>,
    /// TLS for an https:// URL; each connection's server name is its host's.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub threads: usize,
    pub connections: usize,
    /// Requests per second over all connections; `None` is closed loop (`--max`).
    /// With a load plan: the plan's mean.
    pub rate: Option<f64>,
    /// A load plan in place of a constant rate (its warm-up not included).
    pub profile: Option<Arc<profile::RateProfile>>,
    pub model: schedule::Model,
    pub duration: Duration,
    pub warmup: Duration,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// See [`LoadSpec::send_window`].
    pub send_window: Duration,
    pub new_connection: bool,
    /// See [`LoadSpec::reuse_closed`].
    pub reuse_closed: bool,
    pub backend_header: String,
    /// What each response is scanned for, counted per change window.
    pub markers: Vec<http1::Marker>,
    /// Fraction of requests kept individually (0: none).
    pub sample: f64,
    /// The CPUs the worker threads run on (empty: any).
    pub cpus: Vec<usize>,
    /// This generator's place in a run split N ways (`None`: the whole run): its
    /// connections' place in the shared schedule, its sampling seed and the shared
    /// start instant.
    pub slice: Option<split::Slice>,
    /// A network namespace (its file, e.g. `/run/netns/NAME`) every worker thread
    /// enters before opening a socket, so that the load leaves from a node of the
    /// network lab while the rest of the process stays where it is. `None`: this
    /// process's own namespace. Set after [`LoadSpec::resolve`], which cannot know it.
    pub netns: Option<std::path::PathBuf>,
    /// HTTP/2: the requests in HTTP/2 form and the streams per connection (`None`:
    /// HTTP/1.1).
    pub h2: Option<Arc<worker::H2Setup>>,
}

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

impl LoadSpec {
    /// Checks the settings and resolves them into a plan and the settings as
    /// recorded in results.
    ///
    /// # Errors
    /// [`SpecError`]: which setting is wrong and why, rendered with CLI flags by
    /// `Display` and with scenario keys by [`SpecError::scenario`].
    pub fn resolve(&self) -> Result<(Plan, LoadConfig), SpecError> {
        use spec::Setting as S;
        let target = http1::Target::parse(&self.url).map_err(|e| SpecError::new(S::Url, e))?;
        let (rate, duration) = match &self.profile {
            Some(p) => (Some(p.mean()), p.duration()),
            None => (self.rate, self.duration),
        };
        if duration.is_zero() {
            return Err(SpecError::new(S::Duration, " must be longer than 0s").example("-d 30s"));
        }
        if self.timeout.is_zero() {
            return Err(
                SpecError::new(S::Timeout, " must be longer than 0s").example("--timeout 2s")
            );
        }
        if self.connect_timeout.is_zero() {
            return Err(SpecError::new(S::ConnectTimeout, " must be longer than 0s")
                .example("--connect-timeout 2s"));
        }
        if self.send_window > MAX_SEND_WINDOW {
            return Err(SpecError::new(
                S::SendWindow,
                format!(
                    " is too wide: at most {}, so that arrivals stay within a millisecond of the schedule",
                    micros_or_millis(MAX_SEND_WINDOW)
                ),
            )
            .value(micros_or_millis(self.send_window))
            .example("--send-window 50us"));
        }
        if let Some(r) = rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(SpecError::new(
                    S::Rate,
                    " is not a rate: give requests per second above 0",
                )
                .value(r.to_string())
                .example("-R 1000"));
            }
        }
        if self.connections == 0 {
            return Err(SpecError::new(S::Connections, " must be at least 1"));
        }
        check_open_files(self.connections, open_files_hard_limit())?;
        let threads = self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(self.connections)
        });
        if threads == 0 {
            return Err(SpecError::new(S::Threads, " must be at least 1"));
        }
        if self.connections < threads {
            return Err(SpecError::new(
                S::Connections,
                " must be at least {other}: each thread needs a connection",
            )
            .value(format!("({})", self.connections))
            .other(S::Threads, threads.to_string()));
        }
        let model = schedule::Model::parse(&self.schedule)?;
        self.check_http2(&target)?;
        let (method, headers, body) = match &self.http2.grpc {
            Some(g) => {
                let mut headers = self.headers.clone();
                headers.push("Content-Type: application/grpc".into());
                headers.push("TE: trailers".into());
                headers.push(format!(
                    "grpc-timeout: {}m",
                    self.timeout.as_millis().max(1)
                ));
                ("POST".to_string(), headers, g.framed())
            }
            None => (self.method.clone(), self.headers.clone(), self.body.clone()),
        };
        let target = match &self.http2.grpc {
            Some(g) => http1::Target {
                path: format!("/{}", g.method),
                ..target
            },
            None => target,
        };
        let request = http1::encode_request(&method, &target, &headers, &body, self.new_connection)
            .map_err(|e| SpecError::new(S::Request, e))?;
        self.check_body_headers()?;
        let t = &self.tls;
        if !target.tls {
            let given = [
                (t.insecure, S::Insecure),
                (t.cacert.is_some(), S::CaCert),
                (t.version.is_some(), S::TlsVersion),
                (t.resume, S::TlsResume),
            ];
            if let Some((_, s)) = given.into_iter().find(|(on, _)| *on) {
                return Err(SpecError::new(
                    s,
                    " needs an https:// URL: there is no TLS over http://",
                ));
            }
        }
        if t.resume && !self.new_connection {
            return Err(SpecError::new(
                S::TlsResume,
                " needs --new-connection: kept-alive connections make no new handshakes to resume",
            ));
        }
        let tls = if target.tls {
            let mut cfg = tls::client_config(t)
                .map_err(|e| SpecError::new(S::Tls, results::with_causes(&e)))?;
            if self.http2.protocol == Protocol::H2 {
                let mut c = (*cfg).clone();
                c.alpn_protocols = vec![b"h2".to_vec()];
                cfg = Arc::new(c);
            }
            Some(cfg)
        } else {
            None
        };
        let mix = if self.targets.is_empty() {
            let name = if target.tls {
                Some(
                    tls::server_name(&target.host)
                        .map_err(|e| SpecError::new(S::Tls, e.to_string()))?,
                )
            } else {
                None
            };
            mix::Mix::single(
                request,
                self.method.eq_ignore_ascii_case("HEAD"),
                target.host_header(),
                name,
                self.connections,
            )
        } else {
            self.mix(&target, model)?
        };
        use std::net::ToSocketAddrs;
        let addr = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|e| {
                SpecError::new(
                    S::Url,
                    format!("cannot resolve host '{}': {e}", target.host),
                )
            })?
            .next()
            .ok_or_else(|| {
                SpecError::new(S::Url, format!("host '{}' has no address", target.host))
            })?;
        if self.backend_header.is_empty() || self.backend_header.contains([':', ' ']) {
            return Err(SpecError::new(
                S::BackendHeader,
                " must be a header name such as x-backend",
            ));
        }
        if self.markers.len() > http1::marker::MAX_MARKERS {
            return Err(SpecError::new(
                S::Markers,
                format!(
                    "response markers: at most {}, not {}",
                    http1::marker::MAX_MARKERS,
                    self.markers.len()
                ),
            ));
        }
        if let Some(e) = self.markers.iter().find_map(|m| m.check().err()) {
            return Err(SpecError::new(S::Markers, format!("response marker: {e}")));
        }
        if !(self.sample.is_finite() && (0.0..=1.0).contains(&self.sample)) {
            return Err(
                SpecError::new(S::Sample, ": give a fraction of requests from 0 to 1")
                    .value(self.sample.to_string())
                    .example("0.1"),
            );
        }
        let h2 = self.h2_setup(&mix, target.tls)?;
        let plan = Plan {
            h2,
            addr,
            mix: Arc::new(mix),
            tls,
            threads,
            connections: self.connections,
            rate,
            profile: self.profile.clone().map(Arc::new),
            model,
            duration,
            warmup: self.warmup,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            send_window: self.send_window,
            new_connection: self.new_connection,
            reuse_closed: self.reuse_closed,
            backend_header: self.backend_header.clone(),
            markers: self.markers.clone(),
            sample: self.sample,
            cpus: self.cpus.clone(),
            slice: None,
            netns: None,
        };
        let config = LoadConfig {
            url: self.url.clone(),
            method: self.method.to_ascii_uppercase(),
            threads,
            connections: self.connections,
            duration_s: duration.as_secs_f64(),
            warmup_s: self.warmup.as_secs_f64(),
            rate,
            plan: self.profile.as_ref().map(|p| p.text()),
            max: rate.is_none(),
            schedule: if rate.is_none() {
                "max".into()
            } else {
                model.name().into()
            },
            timeout_s: self.timeout.as_secs_f64(),
            connect_timeout_s: self.connect_timeout.as_secs_f64(),
            send_window_ms: self.send_window.as_secs_f64() * 1e3,
            new_connection: self.new_connection,
            reuse_closed: self.reuse_closed,
            tls_version: t.version.clone(),
            tls_resume: t.resume,
            headers: self.headers.clone(),
            body_bytes: body.len(),
            backend_header: self.backend_header.clone(),
            protocol: self.http2.protocol.name().into(),
            streams: (self.http2.protocol != Protocol::Http1)
                .then(|| self.http2.streams.unwrap_or(1) as u32),
            grpc: self.http2.grpc.as_ref().map(|g| g.method.clone()),
        };
        Ok((plan, config))
    }
}

impl LoadSpec {
    /// The HTTP/2 settings against the URL and the other settings.
    fn check_http2(&self, url: &http1::Target) -> Result<(), SpecError> {
        use spec::Setting as S;
        let h = &self.http2;
        if let Some(w) = h.window {
            if !(65_535..=0x7fff_ffff).contains(&w) {
                return Err(SpecError::new(
                    S::H2Window,
                    " is out of range: give 65535 (64KiB - 1) to 2147483647 bytes",
                )
                .value(w.to_string())
                .example("--h2-window 1MiB"));
            }
            if h.protocol == Protocol::Http1 {
                return Err(SpecError::new(S::H2Window, " needs --http2 or --h2c"));
            }
        }
        if h.streams == Some(0) {
            return Err(SpecError::new(S::Streams, " must be at least 1").example("--streams 10"));
        }
        match h.protocol {
            Protocol::Http1 => {
                if h.streams.is_some_and(|n| n > 1) {
                    return Err(SpecError::new(
                        S::Streams,
                        " needs --http2 or --h2c: HTTP/1.1 carries one request at a time on a connection",
                    ));
                }
                if h.grpc.is_some() {
                    return Err(SpecError::new(
                        S::Grpc,
                        " needs --http2 (https://) or --h2c (http://): gRPC runs over HTTP/2",
                    ));
                }
            }
            Protocol::H2 if !url.tls => {
                return Err(SpecError::new(
                    S::Http2,
                    ": HTTP/2 needs TLS (an https:// URL; in a scenario, tls.enabled: true): it is agreed by ALPN in the handshake; for plain TCP, ingressbench load --h2c",
                ));
            }
            Protocol::H2c if url.tls => {
                return Err(SpecError::new(
                    S::H2c,
                    ": h2c is HTTP/2 over plain TCP: give an http:// URL, or use --http2 for https://",
                ));
            }
            Protocol::H2 | Protocol::H2c => {
                if self.new_connection {
                    return Err(SpecError::new(
                        if h.protocol == Protocol::H2 { S::Http2 } else { S::H2c },
                        ": HTTP/2 keeps its connections to carry their streams; leave out --new-connection (load.new_connection)",
                    ));
                }
            }
        }
        if let Some(g) = &h.grpc {
            g.check().map_err(|e| SpecError::new(S::Grpc, e))?;
            if !self.targets.is_empty() {
                return Err(SpecError::new(
                    S::Grpc,
                    " with a request mix: a gRPC run calls one method; leave out the mix",
                ));
            }
            if !self.body.is_empty() {
                return Err(SpecError::new(
                    S::Grpc,
                    " with --body: the call's message is --grpc-message or --grpc-payload",
                ));
            }
        }
        Ok(())
    }

    /// Every request of the mix in HTTP/2 form, for an HTTP/2 load.
    fn h2_setup(
        &self,
        mix: &mix::Mix,
        tls: bool,
    ) -> Result<Option<Arc<worker::H2Setup>>, SpecError> {
        if self.http2.protocol == Protocol::Http1 {
            return Ok(None);
        }
        let scheme = if tls { "https" } else { "http" };
        let reqs = mix
            .targets
            .iter()
            .map(|t| http2::Request::from_http1(&t.request, scheme))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SpecError::new(spec::Setting::Request, e))?;
        Ok(Some(Arc::new(worker::H2Setup {
            reqs,
            streams: self.http2.streams.unwrap_or(1),
            grpc: self.http2.grpc.is_some(),
            tls,
            config: self
                .http2
                .window
                .map_or_else(http2::Config::default, http2::Config::with_stream_window),
        })))
    }

    /// The request mix of `targets`, checked: each target's scheme is the URL's,
    /// no `--body` beside it, and every host has a connection of its own (and,
    /// with several hosts, a lane of its own: `--schedule connection`).
    fn mix(&self, url: &http1::Target, model: schedule::Model) -> Result<mix::Mix, SpecError> {
        use spec::Setting as S;
        let at = |line: usize| {
            if self.targets_from.is_empty() {
                format!("requests entry {line}")
            } else {
                format!("{}:{line}", self.targets_from)
            }
        };
        if !self.body.is_empty() {
            return Err(SpecError::new(
                S::Targets,
                "a body beside a request mix: give each target's body in the mix (@file in a targets file, body: in requests:)",
            ));
        }
        let scheme = |tls: bool| if tls { "https" } else { "http" };
        for t in &self.targets {
            let tls = t
                .url
                .get(..8)
                .is_some_and(|p| p.eq_ignore_ascii_case("https://"));
            if tls != url.tls {
                return Err(SpecError::new(
                    S::Targets,
                    format!(
                        "{}: {} is {}:// but the URL every connection goes to is {}://: give the targets the URL's scheme",
                        at(t.line),
                        t.url,
                        scheme(tls),
                        scheme(url.tls)
                    ),
                ));
            }
        }
        let mut reqs = mix::requests_of(&self.targets).map_err(|e| {
            SpecError::new(
                S::Targets,
                format!("{}: {}", at(self.targets[e.index].line), e.problem),
            )
        })?;
        // `-H` headers go to every target, after its own.
        let headers: Vec<Vec<String>> = if self.headers.is_empty() {
            Vec::new()
        } else {
            self.targets
                .iter()
                .map(|t| t.headers.iter().chain(&self.headers).cloned().collect())
                .collect()
        };
        for (r, h) in reqs.iter_mut().zip(&headers) {
            r.headers = h;
        }
        let m = mix::Mix::new(&reqs, self.connections, self.new_connection, url.tls, true)
            .map_err(|e| match self.targets.get(e.index) {
                Some(t) => SpecError::new(S::Targets, format!("{}: {}", at(t.line), e.problem)),
                None => SpecError::new(
                    S::Connections,
                    format!(" ({}) is too few: {}", self.connections, e.problem),
                ),
            })?;
        if m.hosts.len() > 1 && model == schedule::Model::Shared {
            return Err(SpecError::new(
                S::Schedule,
                format!(
                    " shared with {} hosts: a connection carries one host, so a shared lane would give each host the share of its free connections; use --schedule connection",
                    m.hosts.len()
                ),
            ));
        }
        Ok(m)
    }

    /// Headers that would frame the body differently from the body given: a
    /// `Content-Length` that is not the body's length makes every request hang (or
    /// leaves bytes the server reads as a second request), and a `Transfer-Encoding`
    /// is not applied to the body.
    fn check_body_headers(&self) -> Result<(), SpecError> {
        for h in &self.headers {
            let Some((name, value)) = h.split_once(':') else {
                continue; // encode_request names the malformed header
            };
            let name = name.trim();
            if name.eq_ignore_ascii_case("content-length")
                && value.trim().parse::<u64>().ok() != Some(self.body.len() as u64)
            {
                return Err(SpecError::new(
                    spec::Setting::Header,
                    format!(
                        " does not match the body ({} bytes): leave it out, the length is set from --body",
                        self.body.len()
                    ),
                )
                .value(format!("'{}'", h.trim())));
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(SpecError::new(
                    spec::Setting::Header,
                    " is not supported: the body is sent as given, with a Content-Length",
                )
                .value(format!("'{}'", h.trim())));
            }
        }
        Ok(())
    }
}

/// Descriptors a run needs besides its connections (epoll, stdio, files, a lab's
/// pipes), with room to spare.
pub const OPEN_FILES_MARGIN: usize = 32;

/// The hard limit on open files (`None`: unlimited).
fn open_files_hard_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum
}

/// Refuses a run whose connections cannot all be open at once under the hard
/// open-files limit: it would fail its connects with "too many open files", which
/// reads as the server's fault. (A low soft limit is raised at the start of the run.)
fn check_open_files(connections: usize, hard: Option<u64>) -> Result<(), SpecError> {
    let need = connections as u64 + OPEN_FILES_MARGIN as u64;
    match hard {
        Some(h) if h < need => Err(SpecError::new(
            spec::Setting::Connections,
            format!(
                " needs about {need} open files, but this process may open at most {h} (ulimit -Hn): use fewer connections or raise the hard limit"
            ),
        )
        .value(connections.to_string())),
        _ => Ok(()),
    }
}

/// What a run measured, merged over all workers.
pub struct Outcome {
    pub totals: Totals,
    /// One merged interval per second of the measured window; what completed
    /// during the drain after it is in the last one.
    pub seconds: Vec<SecondSummary>,
    /// The run stopped early (interrupt).
    pub partial: bool,
    /// Unix time of the start of the measured window, in nanoseconds.
    pub started_at_unix_ns: u128,
    /// Length of the measured window actually run, in seconds.
    pub duration_s: f64,
    /// CPU time of the process during the run (user + system), in seconds.
    pub cpu_s: f64,
    /// How busy the generator's threads were, on average, from the start of the
    /// schedule to the end of the run: its CPU time over that time times its worker
    /// threads (the collecting thread's share is small and counted in).
    pub busy: f64,
    /// What the machine did meanwhile: steal, other processes' CPU, stalls.
    pub machine: Option<results::MachineTime>,
    /// Clock time at which the measured window started.
    pub measure_start: Nanos,
    /// The sampled fraction (0: none).
    pub sample: f64,
    /// Whether the workers could raise their scheduling priority.
    pub priority_raised: bool,
    /// The CPUs the workers were to be confined to (empty: any).
    pub cpus: Vec<usize>,
    /// The CPUs the workers could run on once pinned, as the kernel reported them
    /// (empty: no pin asked for): `cpus` unless the pin was refused.
    pub cpus_applied: Vec<usize>,
    /// What went wrong without stopping the run (a refused CPU pin), one line each.
    pub warnings: Vec<String>,
    /// The plan's place in a split run, if it is one generator of several.
    pub slice: Option<split::Slice>,
    /// How late the schedule started after the slice's shared instant, in ns (0: on
    /// time); `None` for a whole run.
    pub start_offset_ns: Option<u64>,
    /// The load plan, if the rate followed one: its steps are in the totals.
    pub profile: Option<Arc<profile::RateProfile>>,
    /// The request mix, when the result reports it.
    pub mix: Option<Arc<mix::Mix>>,
}

/// One second, summarised as soon as every worker has reported it, so the run
/// keeps no per-second histogram in memory (a long soak stays flat).
pub struct SecondSummary {
    pub entry: TimelineEntry,
    /// The second's corrected histogram, V2 deflate, for `--hdr-log`.
    pub histogram_v2: Vec<u8>,
}

/// Runs the plan to its end (or until `stop` is set) and merges the results.
/// `on_second` sees each second as soon as it is complete (live progress).
///
/// # Errors
/// [`EngineError`] when threads cannot be started.
pub fn run(
    plan: &Plan,
    stop: Arc<AtomicBool>,
    on_second: impl FnMut(&TimelineEntry),
) -> Result<Outcome, EngineError> {
    run_with(plan, Clock::start(), stop, |_| {}, on_second)
}

/// [`run`] on a clock the caller shares (so events it records line up with the
/// load's timeline); `on_start` gets the clock time at which the measured window
/// starts, as soon as it is fixed.
///
/// # Errors
/// [`EngineError`] when threads cannot be started.
pub fn run_with(
    plan: &Plan,
    clock: Clock,
    stop: Arc<AtomicBool>,
    on_start: impl FnOnce(Nanos),
    on_second: impl FnMut(&TimelineEntry),
) -> Result<Outcome, EngineError> {
    run_marked(plan, clock, stop, None, on_start, on_second)
}

/// [`run_with`], counting requests by the change windows the caller marks on `marks`
/// while the load runs (the counts are in the totals: [`Totals::windows`]).
///
/// # Errors
/// [`EngineError`] when threads cannot be started.
pub fn run_marked(
    plan: &Plan,
    clock: Clock,
    stop: Arc<AtomicBool>,
    marks: Option<Arc<windows::Marks>>,
    on_start: impl FnOnce(Nanos),
    mut on_second: impl FnMut(&TimelineEntry),
) -> Result<Outcome, EngineError> {
    raise_open_files_limit(plan.connections);
    let shared = Arc::new(worker::Shared {
        clock,
        addr: plan.addr,
        mix: plan.mix.clone(),
        tls: plan.tls.clone(),
        timeout_ns: plan.timeout.as_nanos() as Nanos,
        connect_timeout_ns: plan.connect_timeout.as_nanos() as Nanos,
        send_window_ns: plan.send_window.as_nanos() as Nanos,
        new_connection: plan.new_connection,
        reuse_closed: plan.reuse_closed,
        backend_header: plan.backend_header.clone(),
        markers: plan.markers.clone().into_boxed_slice(),
        model: plan.model,
        rate: plan.rate,
        workers: plan.threads,
        connections: plan.connections,
        warmup_ns: plan.warmup.as_nanos() as Nanos,
        duration_ns: plan.duration.as_nanos() as Nanos,
        stop: stop.clone(),
        gate: Barrier::new(plan.threads + 1),
        start: AtomicU64::new(0),
        stopped_at: AtomicU64::new(0),
        sample: plan.sample,
        cpus: plan.cpus.clone(),
        pinned: std::sync::Mutex::new(worker::Pinned::default()),
        priority_raised: AtomicBool::new(false),
        answered: AtomicBool::new(false),
        failure: std::sync::Mutex::new(None),
        marks,
        profile: plan
            .profile
            .as_ref()
            .map(|p| Arc::new(p.with_warmup(plan.warmup))),
        step_bounds: plan.profile.as_ref().map_or_else(Vec::new, |p| {
            p.report_steps()
                .iter()
                .map(|s| {
                    let ns = |t: f64| (t * 1e9).round() as Nanos;
                    (ns(s.start), ns(s.start + s.secs))
                })
                .collect()
        }),
        slice: plan.slice.clone(),
        netns: plan.netns.clone(),
        h2: plan.h2.clone(),
    });
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    // Per worker, the way back for its spent intervals (`SecondMerger`).
    let mut recycle = Vec::new();
    let mut offset = 0;
    for id in 0..plan.threads {
        // Spread connections as evenly as possible: the first threads take one more.
        let n = plan.connections / plan.threads + usize::from(id < plan.connections % plan.threads);
        let (s, t) = (shared.clone(), tx.clone());
        let (back, recycled) = mpsc::channel();
        recycle.push(back);
        let h = std::thread::Builder::new()
            .name(format!("ib-worker-{id}"))
            .spawn(move || worker::run(id, offset, n, s, t, recycled))
            .map_err(EngineError::Spawn)?;
        handles.push(h);
        offset += n;
    }
    drop(tx);
    // Every worker has opened its connections: start the schedule together, a
    // moment from now so no worker starts late.
    shared.gate.wait();
    let (start, start_offset_ns) = match &plan.slice {
        None => (clock.now() + 1_000_000, None),
        Some(s) => {
            let (start, late) =
                schedule_start(s.start_at_unix_ns, clock.wall_epoch_ns(), clock.now());
            (start, Some(late))
        }
    };
    shared.start.store(start, Ordering::Release);
    let cpu0 = process_cpu_s();
    // The CPUs the generator's threads may run on unless pinned (this thread's,
    // which they inherit), and the machine watched from here to the end.
    let allowed = machine::allowed_cpus();
    // The stall probe only where a schedule can be late (open loop): at `--max` a
    // real-time wake-up every millisecond on the generator's core cost the server
    // its batching (8-11 % fewer requests a second through nginx, docs/benchmarks.md),
    // and a closed loop has no lag for the machine to explain.
    let watch = machine::Watch::start(clock, plan.rate.is_some());
    shared.gate.wait();
    let measure_start = start + shared.warmup_ns;
    on_start(measure_start);

    let mut totals = Totals::new();
    let mut merger = SecondMerger::new(plan.threads, recycle);
    let mut seconds = Vec::new();
    // This thread wakes once a second to merge and summarise the workers' seconds
    // (a millisecond or two of work): at its default priority it would take the CPU
    // from a worker sharing it, whose sends would be that much late. Lowered for the
    // run, as far as the system allows, then restored.
    let _lowered = LoweredPriority::new();
    for msg in rx {
        match msg {
            worker::Msg::Interval(w, iv) => merger.add(w, iv),
            worker::Msg::Done(w, t) => {
                totals.merge(&t);
                merger.done(w);
            }
        }
        for s in merger.complete() {
            on_second(&s.entry);
            seconds.push(s);
        }
    }
    for h in handles {
        let _ = h.join();
    }
    if let Some(f) = shared.failure.lock().ok().and_then(|mut f| f.take()) {
        return Err(EngineError::Worker(f));
    }
    for s in merger.complete() {
        on_second(&s.entry);
        seconds.push(s);
    }
    let stopped = clock.now();
    let planned_end = measure_start + shared.duration_ns;
    let pinned = shared
        .pinned
        .lock()
        .map(|mut p| std::mem::take(&mut *p))
        .unwrap_or_default();
    let cpus_applied: Vec<usize> = pinned.applied.into_iter().collect();
    let mut planned = plan.cpus.clone();
    planned.sort_unstable();
    planned.dedup();
    let warnings = match pinned.refused {
        Some(why) => vec![format!(
            "the generator's threads could not be pinned to CPUs {}: {why}; they ran on CPUs {}",
            cpu_list(&plan.cpus),
            cpu_list(&cpus_applied)
        )],
        // The kernel keeps only the CPUs it offers the process of a set it accepts.
        None if !planned.is_empty() && cpus_applied != planned => vec![format!(
            "the generator's threads ran on CPUs {} of the {} planned (the others are not offered to this process)",
            cpu_list(&cpus_applied),
            cpu_list(&plan.cpus)
        )],
        None => Vec::new(),
    };
    // An interrupt during the drain after the window leaves requests unsent or
    // unfinished too: the run is partial although its window was whole.
    let partial = totals.interrupted || (stop.load(Ordering::Relaxed) && stopped < planned_end);
    let measured_ns = if partial {
        // Interrupted: the window ended when sending stopped (the drain excluded).
        let at = shared.stopped_at.load(Ordering::Acquire);
        at.max(measure_start) - measure_start
    } else {
        shared.duration_ns
    };
    let cpu_s = process_cpu_s() - cpu0;
    let ran_s = clock.now().saturating_sub(start) as f64 / 1e9;
    let machine = watch.finish(
        if cpus_applied.is_empty() {
            &allowed
        } else {
            &cpus_applied
        },
        cpu_s,
        ran_s,
    );
    Ok(Outcome {
        totals,
        seconds,
        partial,
        started_at_unix_ns: clock.wall_epoch_ns() + measure_start as u128,
        duration_s: measured_ns as f64 / 1e9,
        cpu_s,
        busy: cpu_s / (ran_s * plan.threads as f64).max(1e-9),
        machine,
        measure_start,
        sample: plan.sample,
        priority_raised: shared.priority_raised.load(Ordering::Relaxed),
        cpus: plan.cpus.clone(),
        cpus_applied,
        warnings,
        slice: plan.slice.clone(),
        start_offset_ns,
        profile: plan.profile.clone(),
        mix: plan.mix.reported.then(|| plan.mix.clone()),
    })
}

/// When a generator of a split run starts its schedule, on its own clock, and how
/// late that is: at the shared instant (Unix ns, converted with the clock's wall-time
/// anchor) if it is still ahead, else a moment from `now`. A late generator does not
/// send the requests it missed in a burst to catch up: its schedule starts late, and
/// the merge names it.
fn schedule_start(at_unix_ns: u128, wall_epoch_ns: u128, now: Nanos) -> (Nanos, u64) {
    let at = at_unix_ns as i128 - wall_epoch_ns as i128;
    if at >= now as i128 {
        (at.min(Nanos::MAX as i128) as Nanos, 0)
    } else {
        let start = now + 1_000_000;
        (start, (start as i128 - at).min(u64::MAX as i128) as u64)
    }
}

/// Merges workers' intervals by second and releases each second once every worker
/// has moved past it. Each interval, once merged or summarised, goes back to the
/// worker it came from, cleared, for a later second: a worker allocates its
/// intervals once, not once a second.
struct SecondMerger {
    /// Per worker: every second before this one has been reported.
    progress: Vec<u64>,
    /// By second: the first worker's interval, the others merged into it, and that
    /// worker.
    pending: BTreeMap<u64, (usize, Box<Interval>)>,
    /// Next second to release.
    next: u64,
    /// Per worker, where its cleared intervals go (a worker that ended has dropped
    /// its end: the interval is freed).
    recycle: Vec<mpsc::Sender<Box<Interval>>>,
}

impl SecondMerger {
    fn new(workers: usize, recycle: Vec<mpsc::Sender<Box<Interval>>>) -> Self {
        SecondMerger {
            progress: vec![0; workers],
            pending: BTreeMap::new(),
            next: 0,
            recycle,
        }
    }

    fn add(&mut self, w: usize, iv: Box<Interval>) {
        self.progress[w] = self.progress[w].max(iv.second + 1);
        match self.pending.get_mut(&iv.second) {
            Some((_, p)) => {
                p.merge(&iv);
                self.give_back(w, iv);
            }
            None => {
                self.pending.insert(iv.second, (w, iv));
            }
        }
    }

    fn give_back(&self, w: usize, mut iv: Box<Interval>) {
        if let Some(back) = self.recycle.get(w) {
            iv.clear();
            let _ = back.send(iv);
        }
    }

    fn done(&mut self, w: usize) {
        self.progress[w] = u64::MAX;
    }

    /// Seconds every worker has reported, in order; empty seconds in between are
    /// released as zeros so a stall shows on the timeline.
    fn complete(&mut self) -> Vec<SecondSummary> {
        let upto = self.progress.iter().copied().min().unwrap_or(0);
        let last = if upto == u64::MAX {
            self.pending.keys().next_back().map_or(self.next, |k| k + 1)
        } else {
            upto
        };
        let mut out = Vec::new();
        while self.next < last {
            let s = self.next;
            let iv = self.pending.remove(&s);
            out.push(summarize_second(s, iv.as_ref().map(|(_, iv)| &**iv)));
            if let Some((w, iv)) = iv {
                self.give_back(w, iv);
            }
            self.next += 1;
        }
        out
    }
}

/// The calling thread at the lowest priority (nice 19) until dropped, then back at
/// its own. Setting it is best effort: a system that refuses leaves it as it was.
struct LoweredPriority {
    was: Option<i32>,
}

impl LoweredPriority {
    fn new() -> Self {
        let me = Some(rustix::thread::gettid());
        let was = rustix::process::getpriority_process(me).ok();
        let was = was.filter(|_| rustix::process::setpriority_process(me, 19).is_ok());
        LoweredPriority { was }
    }
}

impl Drop for LoweredPriority {
    fn drop(&mut self) {
        if let Some(was) = self.was {
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), was);
        }
    }
}

fn summarize_second(second: u64, iv: Option<&Interval>) -> SecondSummary {
    let mut entry = TimelineEntry {
        t: second,
        ..Default::default()
    };
    let mut histogram_v2 = Vec::new();
    if let Some(iv) = iv {
        entry.sent = iv.sent;
        entry.completed = iv.completed;
        entry.errors = iv.errors.iter().sum();
        for k in results::ErrorKind::ALL {
            let n = iv.errors[k.index()];
            if n > 0 {
                entry.errors_by_kind.insert(k.name().to_string(), n);
            }
        }
        if !iv.corrected.is_empty() {
            entry.p50 = us_to_ms(iv.corrected.value_at_quantile(0.5));
            entry.p99 = us_to_ms(iv.corrected.value_at_quantile(0.99));
            entry.max = us_to_ms(iv.corrected.max());
        }
        entry.lag_max_ms = iv.lag_max_ns as f64 / 1e6;
        entry.backends = iv.backends.to_map();
        histogram_v2 = serialize_v2(&iv.corrected);
    }
    SecondSummary {
        entry,
        histogram_v2,
    }
}

fn us_to_ms(v: u64) -> f64 {
    v as f64 / 1000.0
}

impl Outcome {
    /// Each id of a tally (a backend's, a certificate's serial) with its count and
    /// when it was first and last seen, in ms from the start of the measured window.
    fn spans<'a>(
        &'a self,
        tally: &'a stats::BackendTally,
    ) -> impl Iterator<Item = (String, u64, f64, f64)> + 'a {
        let rel = |v: Nanos| (v as f64 - self.measure_start as f64) / 1e6;
        tally.ids.iter().map(move |e| {
            (
                String::from_utf8_lossy(&e.id).into_owned(),
                e.count,
                rel(e.first),
                rel(e.last),
            )
        })
    }

    /// The result document for this outcome and the settings that produced it.
    pub fn to_result(&self, target: &str, config: LoadConfig) -> RunResult {
        use base64::Engine as _;
        let t = &self.totals;
        // What went out in the window: requests due in it but started in the drain
        // after it are measured, yet did not reach the server within the window.
        let achieved = if self.duration_s > 0.0 {
            t.sent_in_window as f64 / self.duration_s
        } else {
            0.0
        };
        let lag = percentiles(&t.lag, 1.0);
        let rate_target = config.rate;
        let late = rate_target.is_some() && lag.p99.unwrap_or(0.0) * 1e6 > LAG_LIMIT_NS as f64;
        // A load plan's rate changes along the run: what it called for in the window
        // is what the window is judged by. Its mean over the whole plan would fail a run
        // interrupted in a low step (and pass one interrupted in a high step).
        let judged = match (&self.profile, self.duration_s > 0.0) {
            (Some(_), true) => Some(t.intended as f64 / self.duration_s),
            _ => rate_target,
        };
        let mut status_codes = BTreeMap::new();
        for (code, n) in t.status.iter().enumerate() {
            if *n > 0 {
                status_codes.insert(code.to_string(), *n);
            }
        }
        let b64 =
            |h: &Histogram<u64>| base64::engine::general_purpose::STANDARD.encode(serialize_v2(h));
        let mut r = RunResult {
            schema: RESULT_SCHEMA.to_string(),
            partial: self.partial,
            target: target.to_string(),
            started_at: rfc3339(self.started_at_unix_ns),
            duration_s: self.duration_s,
            rate: Rate {
                target: rate_target,
                achieved,
                completed_per_s: if self.duration_s > 0.0 {
                    t.completed as f64 / self.duration_s
                } else {
                    0.0
                },
                // Nothing was due in a window that never began (an interrupt during
                // start-up): no shortfall to report.
                reached: judged.is_none_or(|r| t.intended == 0 || achieved >= 0.99 * r),
                shortfall: t.shortfall.clone(),
            },
            requests: Requests {
                intended: t.intended,
                sent: t.sent,
                completed: t.completed,
                failed: t.failed,
                not_sent: t.not_sent,
                unfinished: t.unfinished,
                timed_out_unsent: t.timed_out_unsent,
            },
            errors: Errors {
                first: t.first_errors.to_map(),
                grpc_codes: t
                    .grpc_codes
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(c, n)| {
                        let name = if c + 1 == stats::GRPC_CODES {
                            "OTHER_OR_NONE".to_string()
                        } else {
                            results::errors::grpc_code_name(c as u32).into_owned()
                        };
                        (name, *n)
                    })
                    .collect(),
                ..Errors::from_counts(&t.errors, status_codes)
            },
            connections: results::Connections {
                reconnects_after_server_close: t.reconnects_after_server_close,
                framing_warnings: t.framing_warnings.count,
                framing_warning_first: (t.framing_warnings.count > 0).then(|| {
                    format!(
                        "a {} response with both Content-Length and Transfer-Encoding \
                         (decoded as chunked, the connection closed after it)",
                        t.framing_warnings.first_status
                    )
                }),
                http2: t.h2.clone(),
            },
            latency_ms: Latency {
                corrected: percentiles(&t.corrected, 1000.0),
                uncorrected: percentiles(&t.uncorrected, 1000.0),
                generator_lag: lag.clone(),
            },
            timeline: self
                .seconds
                .iter()
                .map(|s| {
                    let mut e = s.entry.clone();
                    // A part of a split run keeps each second's histogram, so the
                    // merge can recompute the second's percentiles exactly.
                    if self.slice.is_some() {
                        e.histogram = Some(if s.histogram_v2.is_empty() {
                            b64(&stats::latency_histogram())
                        } else {
                            base64::engine::general_purpose::STANDARD.encode(&s.histogram_v2)
                        });
                    }
                    e
                })
                .collect(),
            backends: t.backends.to_map(),
            backends_seen: self
                .spans(&t.backends)
                .map(|(id, _, first, last)| (id, [first, last]))
                .collect(),
            bytes_read: t.bytes_read,
            tls: TlsStats {
                handshakes: t.handshakes,
                resumed: t.resumed,
                version: t.tls_version.map(str::to_string),
                certificates: self
                    .spans(&t.certificates)
                    .map(|(serial, handshakes, first_ms, last_ms)| {
                        let seen = results::CertificateSeen {
                            handshakes,
                            first_ms,
                            last_ms,
                        };
                        (serial, seen)
                    })
                    .collect(),
            },
            generator: Generator {
                // No lag recorded (nothing was sent) is no lag at all. Over the limit,
                // busy threads were short of CPU; idle ones woke late.
                overloaded: late && self.busy >= BUSY_OVERLOADED,
                woke_late: late && self.busy < BUSY_OVERLOADED,
                wakeup_us: results::WakeUp::of(&mut t.wakeup_ns.clone()),
                lag_p99_ms: lag.p99.unwrap_or(0.0),
                lag_limit_ms: LAG_LIMIT_NS as f64 / 1e6,
                cpu_s: self.cpu_s,
                sleeps: t.sleeps,
                clock_resolution_ns: results::clock::resolution_ns(),
                priority_raised: self.priority_raised,
                cpus: cpu_list(&self.cpus),
                cpus_applied: cpu_list(&self.cpus_applied),
                cause: late.then(|| {
                    results::MachineTime::cause(self.machine.as_ref(), self.duration_s * 1e3)
                }),
                machine: self.machine.clone(),
            },
            histogram: b64(&t.corrected),
            histogram_uncorrected: b64(&t.uncorrected),
            histogram_lag: b64(&t.lag),
            generators: None,
            lab: None,
            mix: self.mix.as_ref().map(|m| m.result(&t.mix)),
            // A generator of a split scenario run hands its change windows over.
            windows_part: if self.slice.is_some() {
                t.windows.to_parts(self.measure_start)
            } else {
                Vec::new()
            },
            samples: self.samples(),
            machine: Some(crate::sysinfo::machine()),
            ingressbench_version: env!("CARGO_PKG_VERSION").to_string(),
            steps: self.steps(),
            repetitions: Vec::new(),
            warnings: self.warnings.clone(),
            config,
        };
        r.generators = self.slice.as_ref().map(|s| self.own_part(s, &r));
        r
    }
}

impl Outcome {
    /// Each report step of the load plan: what it offered, what went out, and what
    /// came back, from the requests intended in it. An interrupted run reports the
    /// steps it reached, the last one cut at the interrupt.
    fn steps(&self) -> Vec<results::StepResult> {
        let Some(p) = &self.profile else {
            return Vec::new();
        };
        let t = &self.totals;
        let mut out = Vec::new();
        for (i, s) in p.report_steps().into_iter().enumerate() {
            if s.start >= self.duration_s && i > 0 {
                break;
            }
            let secs = s.secs.min(self.duration_s - s.start).max(0.0);
            let intended = t.steps_intended.get(i).copied().unwrap_or(0);
            let w = t.steps.windows.get(i);
            let (sent, completed, failed) =
                w.map_or((0, 0, 0), |w| (w.sent, w.completed, w.failed()));
            let mut errors_by_kind = BTreeMap::new();
            if let Some(w) = w {
                for k in results::ErrorKind::ALL {
                    let n = w.errors[k.index()];
                    if n > 0 {
                        errors_by_kind.insert(k.name().to_string(), n);
                    }
                }
            }
            let latency_ms = w
                .map(|w| percentiles(&w.latency, 1000.0))
                .unwrap_or_default();
            let lag_p99_ms = w
                .and_then(|w| w.lag.as_ref())
                .map_or(0.0, |h| percentiles(h, 1000.0).p99.unwrap_or(0.0));
            let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
            out.push(results::StepResult {
                index: i,
                plan: s.text,
                start_s: s.start,
                duration_s: secs,
                rate_from: s.from,
                rate_to: s.to,
                offered: per_s(intended),
                achieved: per_s(sent.min(intended)),
                intended,
                sent,
                completed,
                failed,
                errors_by_kind,
                latency_ms,
                lag_p99_ms,
                reached: intended == 0 || sent as f64 >= 0.99 * intended as f64,
                overloaded: lag_p99_ms * 1e6 > LAG_LIMIT_NS as f64,
            });
        }
        out
    }

    /// A generator's own entry in its result: what only it knows (seed, CPUs, how late
    /// it started); the merge adds what the coordinator measured.
    fn own_part(&self, s: &split::Slice, r: &RunResult) -> Generators {
        // Read from the result it belongs to, so the part's figures are the run's.
        let (config, g) = (&r.config, &r.generator);
        Generators {
            start_at: rfc3339(s.start_at_unix_ns),
            start_tolerance_ms: results::merge::START_TOLERANCE_MS,
            parts: vec![GeneratorPart {
                index: s.index,
                connections: config.connections,
                threads: config.threads,
                rate: config.rate,
                seed: s.seed,
                cpus: g.cpus.clone(),
                error: None,
                partial: self.partial,
                requests: r.requests.clone(),
                overloaded: g.overloaded,
                lag_p99_ms: g.lag_p99_ms,
                cpu_s: g.cpu_s,
                start_offset_ms: self.start_offset_ns.map(|n| n as f64 / 1e6),
                clock_offset_ms: None,
                clock_offset_error_ms: None,
                marks: None,
            }],
        }
    }

    /// The sampled requests by column, in order of intended send time.
    fn samples(&self) -> Option<Samples> {
        let t = &self.totals;
        if t.samples.is_empty() {
            return None;
        }
        let mut rows = t.samples.clone();
        rows.sort_by_key(|r| r.intended);
        let ms = |ns: f64| ns / 1e6;
        Some(Samples {
            fraction: self.sample,
            t_ms: rows
                .iter()
                .map(|r| ms(r.intended as f64 - self.measure_start as f64))
                .collect(),
            latency_ms: rows.iter().map(|r| ms(r.latency_ns as f64)).collect(),
            status: rows.iter().map(|r| r.status).collect(),
            error: rows.iter().map(|r| r.error).collect(),
            error_kinds: results::ErrorKind::ALL
                .iter()
                .map(|k| k.name().to_string())
                .collect(),
            backend: rows.iter().map(|r| r.backend).collect(),
            backend_ids: t
                .backends
                .ids
                .iter()
                .map(|e| String::from_utf8_lossy(&e.id).into_owned())
                .collect(),
        })
    }
}

/// CPUs as results write them: `0,1`.
fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// CPU time (user + system) this process has used, in seconds, from /proc.
pub fn process_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces) start at ')'.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the ')'.
    (num(11) + num(12)) / ticks
}

/// Raises the soft open-files limit to the hard limit when the run needs more
/// descriptors than the soft limit allows (10,000 connections on a default 1024).
fn raise_open_files_limit(connections: usize) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let lim = getrlimit(Resource::Nofile);
    let want = connections as u64 + 256;
    if lim.current.is_some_and(|c| c < want) {
        let new = rustix::process::Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        let _ = setrlimit(Resource::Nofile, new);
    }
}

#[cfg(test)]
mod drain_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merger_releases_seconds_in_order_with_gaps() {
        let (back0, recycled0) = mpsc::channel();
        let (back1, recycled1) = mpsc::channel();
        let mut m = SecondMerger::new(2, vec![back0, back1]);
        let iv = |s: u64, sent: u64| {
            let mut i = Box::new(Interval::empty(s));
            i.sent = sent;
            i.corrected.record(100).unwrap();
            i
        };
        m.add(0, iv(0, 5));
        assert!(
            m.complete().is_empty(),
            "worker 1 has not reported second 0"
        );
        m.add(1, iv(0, 7));
        // Merged into worker 0's: worker 1's goes back to worker 1, cleared.
        let spent = recycled1
            .try_recv()
            .expect("worker 1's interval comes back");
        assert!(spent.is_empty() && spent.corrected.is_empty());
        assert!(recycled0.try_recv().is_err());
        let out = m.complete();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].entry.sent, 12);
        // Summarised: worker 0's goes back to worker 0, cleared.
        let spent = recycled0
            .try_recv()
            .expect("worker 0's interval comes back");
        assert!(spent.is_empty() && spent.corrected.is_empty());
        // Worker 0 slept through seconds 1 and 2.
        m.add(0, iv(3, 1));
        m.add(1, iv(1, 2));
        m.add(1, iv(2, 2));
        m.add(1, iv(3, 2));
        let out = m.complete();
        let ts: Vec<u64> = out.iter().map(|s| s.entry.t).collect();
        assert_eq!(ts, vec![1, 2, 3]);
        assert_eq!(out[2].entry.sent, 3);
        m.done(0);
        m.done(1);
        assert!(m.complete().is_empty());
    }

    pub(super) fn spec(url: &str) -> LoadSpec {
        LoadSpec {
            url: url.into(),
            method: "GET".into(),
            headers: Vec::new(),
            body: Vec::new(),
            targets: Vec::new(),
            targets_from: String::new(),
            threads: Some(1),
            connections: 1,
            rate: Some(10.0),
            profile: None,
            schedule: "connection".into(),
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            send_window: DEFAULT_SEND_WINDOW,
            new_connection: false,
            reuse_closed: false,
            tls: tls::TlsOptions::default(),
            backend_header: "x-backend".into(),
            markers: Vec::new(),
            sample: 0.0,
            cpus: Vec::new(),
            http2: Default::default(),
        }
    }

    fn refused(s: &LoadSpec) -> String {
        s.resolve().err().expect("should be refused").to_string()
    }

    #[test]
    fn conflicting_settings_are_refused() {
        let mut s = spec("http://127.0.0.1:1/");
        s.headers = vec!["Content-Length: 5".into()];
        assert_eq!(
            refused(&s),
            "-H/--header 'Content-Length: 5' does not match the body (0 bytes): leave it out, the length is set from --body"
        );
        s.body = b"hello".to_vec();
        assert!(s.resolve().is_ok(), "a matching length is fine");
        s.headers = vec!["transfer-encoding: chunked".into()];
        assert!(
            refused(&s).starts_with("-H/--header 'transfer-encoding: chunked' is not supported")
        );

        let mut s = spec("http://127.0.0.1:1/");
        s.tls.insecure = true;
        assert_eq!(
            refused(&s),
            "-k/--insecure needs an https:// URL: there is no TLS over http://"
        );
        s.tls.insecure = false;
        s.tls.cacert = Some("/x.pem".into());
        assert!(refused(&s).starts_with("--cacert needs an https:// URL"));

        let mut s = spec("https://127.0.0.1:1/");
        s.tls.resume = true;
        assert_eq!(
            refused(&s),
            "--tls-resume needs --new-connection: kept-alive connections make no new handshakes to resume"
        );
        s.new_connection = true;
        assert!(s.resolve().is_ok());
    }

    #[test]
    fn connections_are_checked_against_the_open_files_limit() {
        assert!(check_open_files(10_000, None).is_ok());
        assert!(check_open_files(32, Some(64)).is_ok());
        let e = check_open_files(500, Some(64)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-c/--connections 500 needs about 532 open files, but this process may open at most 64 (ulimit -Hn): use fewer connections or raise the hard limit"
        );
        assert!(e
            .scenario()
            .starts_with("load.connections 500 needs about 532"));
    }

    #[test]
    fn a_split_run_starts_at_the_shared_instant_or_says_how_late() {
        // The clock's anchor is at Unix time 10 s; its reading now is 1 s.
        let wall = 10_000_000_000u128;
        let now = 1_000_000_000;
        // The instant is 2 s ahead: start then, on time.
        assert_eq!(
            schedule_start(13_000_000_000, wall, now),
            (3_000_000_000, 0)
        );
        // Exactly now is on time too.
        assert_eq!(schedule_start(11_000_000_000, wall, now), (now, 0));
        // 250 ms past: start a moment from now, 251 ms late.
        assert_eq!(
            schedule_start(10_750_000_000, wall, now),
            (now + 1_000_000, 251_000_000)
        );
        // Before the clock's anchor altogether.
        assert_eq!(schedule_start(0, wall, now).1, 11_001_000_000);
    }

    #[test]
    fn percentiles_convert_units() {
        let mut h = stats::latency_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap(); // 1..1000 ms in µs
        }
        let p = percentiles(&h, 1000.0);
        assert!((p.p50.unwrap() - 500.0).abs() < 1.0, "{:?}", p.p50);
        assert!((p.p99.unwrap() - 990.0).abs() < 1.0, "{:?}", p.p99);
        assert!((p.max.unwrap() - 1000.0).abs() < 1.0);
        assert_eq!(p.count, 1000);
    }

    /// The CPUs the calling thread may run on, as the kernel says.
    fn allowed_cpus() -> Vec<usize> {
        use rustix::thread::CpuSet;
        let set = rustix::thread::sched_getaffinity(None).unwrap();
        (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
    }

    /// A pin the kernel refuses (a CPU this machine does not have) does not stop the
    /// load, and is not hidden either: the result keeps the planned CPUs beside the
    /// ones the workers ran on, and a warning says why.
    #[test]
    fn a_refused_cpu_pin_is_recorded_beside_the_planned_cpus() {
        let allowed = allowed_cpus();
        let absent = rustix::thread::CpuSet::MAX_CPU - 1;
        assert!(!allowed.contains(&absent), "this machine has CPU {absent}");
        // Nothing listens on port 1: the load runs and fails, which is data.
        let mut s = spec("http://127.0.0.1:1/");
        s.duration = Duration::from_millis(200);
        s.cpus = vec![absent];
        let (plan, config) = s.resolve().unwrap();
        let o = run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
        let r = o.to_result(&s.url, config);
        assert_eq!(r.generator.cpus, absent.to_string());
        assert_eq!(r.generator.cpus_applied, cpu_list(&allowed));
        assert_eq!(
            r.warnings,
            [format!(
                "the generator's threads could not be pinned to CPUs {absent}: Invalid argument (os error 22); they ran on CPUs {}",
                cpu_list(&allowed)
            )]
        );
        assert_eq!(allowed_cpus(), allowed, "only the workers were pinned");

        // A pin that holds in part: the kernel keeps the CPU it has.
        s.cpus = vec![allowed[0], absent];
        let (plan, config) = s.resolve().unwrap();
        let r = run(&plan, Arc::new(AtomicBool::new(false)), |_| {})
            .unwrap()
            .to_result(&s.url, config);
        assert_eq!(r.generator.cpus_applied, allowed[0].to_string());
        assert_eq!(
            r.warnings,
            [format!(
                "the generator's threads ran on CPUs {} of the {},{absent} planned (the others are not offered to this process)",
                allowed[0], allowed[0]
            )]
        );

        // A pin that holds: the same CPUs twice, and nothing to warn of.
        s.cpus = vec![allowed[0]];
        let (plan, config) = s.resolve().unwrap();
        let o = run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
        let r = o.to_result(&s.url, config);
        assert_eq!(r.generator.cpus_applied, r.generator.cpus);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        // No pin asked for: none recorded, as in files written before.
        s.cpus = Vec::new();
        let (plan, config) = s.resolve().unwrap();
        let r = run(&plan, Arc::new(AtomicBool::new(false)), |_| {})
            .unwrap()
            .to_result(&s.url, config);
        assert!(r.generator.cpus_applied.is_empty() && r.warnings.is_empty());
    }
}
