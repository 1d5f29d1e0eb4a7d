//! Checking a [`LoadSpec`] and resolving it into the [`Plan`] the engine runs and the
//! settings as results record them ([`LoadConfig`]).

use crate::spec::{LoadSpec, Protocol, Setting as S, SpecError, MAX_SEND_WINDOW};
use crate::{mix, profile, schedule, split, tls, worker};
use results::LoadConfig;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// `2ms`, `50us`: a short duration as a user writes it.
fn micros_or_millis(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
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
    /// The settings this plan was resolved from. A plain setting (a switch the
    /// workers only read) needs no field of its own here or in [`worker::Shared`],
    /// which carries this too: the workers read it from the spec.
    pub spec: Arc<LoadSpec>,
}

/// The rate and the measured window a spec asks for: a load plan's mean and length,
/// or the constant rate and `duration`.
struct Window {
    rate: Option<f64>,
    duration: Duration,
}

/// The request every connection sends (or the first of a mix), encoded once.
struct Request {
    target: http1::Target,
    bytes: Vec<u8>,
    body_len: usize,
}

impl LoadSpec {
    /// Checks the settings and resolves them into a plan and the settings as
    /// recorded in results.
    ///
    /// The checks run in a fixed order (timing, connections, schedule, protocol,
    /// request, TLS, mix, address, response settings) so that a spec with several
    /// problems is always refused for the same one.
    ///
    /// # Errors
    /// [`SpecError`]: which setting is wrong and why, rendered with CLI flags by
    /// `Display` and with scenario keys by [`SpecError::scenario`].
    pub fn resolve(&self) -> Result<(Plan, LoadConfig), SpecError> {
        let target = http1::Target::parse(&self.url).map_err(|e| SpecError::new(S::Url, e))?;
        let window = self.window()?;
        let threads = self.threads()?;
        let model = self.schedule;
        self.check_http2(&target)?;
        let request = self.request(target)?;
        let target = &request.target;
        let tls = self.tls_config(target)?;
        let mix = if self.targets.is_empty() {
            self.single(request.bytes, target)?
        } else {
            self.mix(target, model)?
        };
        let addr = address(target)?;
        self.check_responses()?;
        let h2 = self.h2_setup(&mix, target.tls)?;
        let config = self.config(&window, threads, model, request.body_len);
        let plan = Plan {
            h2,
            addr,
            mix: Arc::new(mix),
            tls,
            threads,
            connections: self.connections,
            rate: window.rate,
            profile: self.profile.clone().map(Arc::new),
            model,
            duration: window.duration,
            warmup: self.warmup,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            send_window: self.send_window,
            new_connection: self.new_connection,
            backend_header: self.backend_header.clone(),
            markers: self.markers.clone(),
            sample: self.sample,
            cpus: self.cpus.clone(),
            slice: None,
            netns: None,
            spec: Arc::new(self.clone()),
        };
        Ok((plan, config))
    }

    /// The rate and window, and the timeouts and send window beside them.
    fn window(&self) -> Result<Window, SpecError> {
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
        Ok(Window { rate, duration })
    }

    /// The worker threads (one per core unless given, at most one per connection),
    /// checked against the connections and the open-files limit.
    fn threads(&self) -> Result<usize, SpecError> {
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
        Ok(threads)
    }

    /// The one request, encoded: the method, headers and body given, or a gRPC
    /// call's POST to `/SERVICE/METHOD` with its framed message.
    fn request(&self, target: http1::Target) -> Result<Request, SpecError> {
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
        let bytes = http1::encode_request(&method, &target, &headers, &body, self.new_connection)
            .map_err(|e| SpecError::new(S::Request, e))?;
        self.check_body_headers()?;
        Ok(Request {
            target,
            bytes,
            body_len: body.len(),
        })
    }

    /// The TLS client for an https:// URL (with ALPN `h2` for HTTP/2); TLS settings
    /// beside an http:// URL are refused, as is resumption without new connections.
    fn tls_config(
        &self,
        target: &http1::Target,
    ) -> Result<Option<Arc<rustls::ClientConfig>>, SpecError> {
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
        if !target.tls {
            return Ok(None);
        }
        let mut cfg =
            tls::client_config(t).map_err(|e| SpecError::new(S::Tls, results::with_causes(&e)))?;
        if self.http2.protocol == Protocol::H2 {
            let mut c = (*cfg).clone();
            c.alpn_protocols = vec![b"h2".to_vec()];
            cfg = Arc::new(c);
        }
        Ok(Some(cfg))
    }

    /// The mix of a plain run: one request to one host on every connection.
    fn single(&self, request: Vec<u8>, target: &http1::Target) -> Result<mix::Mix, SpecError> {
        let name = if target.tls {
            Some(
                tls::server_name(&target.host)
                    .map_err(|e| SpecError::new(S::Tls, e.to_string()))?,
            )
        } else {
            None
        };
        Ok(mix::Mix::single(
            request,
            self.method.eq_ignore_ascii_case("HEAD"),
            target.host_header(),
            name,
            self.connections,
        ))
    }

    /// What is read from each response: the backend header and the markers, and the
    /// share of requests sampled.
    fn check_responses(&self) -> Result<(), SpecError> {
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
        Ok(())
    }

    /// The settings as the result records them.
    fn config(
        &self,
        window: &Window,
        threads: usize,
        model: schedule::Model,
        body_len: usize,
    ) -> LoadConfig {
        let rate = window.rate;
        LoadConfig {
            url: self.url.clone(),
            method: self.method.to_ascii_uppercase(),
            threads,
            connections: self.connections,
            duration_s: window.duration.as_secs_f64(),
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
            tls_version: self.tls.version.map(|v| v.name().to_string()),
            tls_resume: self.tls.resume,
            headers: self.headers.clone(),
            body_bytes: body_len,
            backend_header: self.backend_header.clone(),
            protocol: self.http2.protocol.name().into(),
            streams: (self.http2.protocol != Protocol::Http1)
                .then(|| self.http2.streams.unwrap_or(1) as u32),
            grpc: self.http2.grpc.as_ref().map(|g| g.method.clone()),
        }
    }
}

/// The address every connection goes to: the URL's host, resolved once.
pub(crate) fn address(target: &http1::Target) -> Result<SocketAddr, SpecError> {
    use std::net::ToSocketAddrs;
    (target.host.as_str(), target.port)
        .to_socket_addrs()
        .map_err(|e| {
            SpecError::new(
                S::Url,
                format!("cannot resolve host '{}': {e}", target.host),
            )
        })?
        .next()
        .ok_or_else(|| SpecError::new(S::Url, format!("host '{}' has no address", target.host)))
}

impl LoadSpec {
    /// The HTTP/2 settings against the URL and the other settings.
    fn check_http2(&self, url: &http1::Target) -> Result<(), SpecError> {
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
            .map_err(|e| SpecError::new(S::Request, e))?;
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
                    S::Header,
                    format!(
                        " does not match the body ({} bytes): leave it out, the length is set from --body",
                        self.body.len()
                    ),
                )
                .value(format!("'{}'", h.trim())));
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(SpecError::new(
                    S::Header,
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
            S::Connections,
            format!(
                " needs about {need} open files, but this process may open at most {h} (ulimit -Hn): use fewer connections or raise the hard limit"
            ),
        )
        .value(connections.to_string())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::spec;

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
}
