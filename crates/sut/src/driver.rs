//! The one interface behind every system under test.
//!
//! It is shaped for the slowest, most asynchronous case (a controller watching a
//! Kubernetes API server): asking for a change (`apply_route`, `reload`) and learning
//! that it took effect (`settle`) are separate calls, so the runner times and logs
//! each. `settle` is told *what* to wait for ([`Expect`]), because on a cluster the
//! driver did not cause every change: a Deployment is scaled through the platform and
//! the controller discovers the new endpoints on its own. Pushing endpoints is a
//! capability of drivers that emulate a controller on this machine
//! ([`Capabilities::push_endpoints`]); the local lab's `endpoint_push` feeds them.
//!
//! The scenario runner talks only to this trait and to [`crate::Platform`] and never
//! knows which proxy, or where, is behind them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a system under test could not do what was asked: the error of every
/// [`Driver`] and [`crate::Platform`], the local lab's and the cluster's alike.
///
/// A message carries only its own context; the cause is `source()`, never repeated
/// in the message, so a caller prints the chain once ([`results::causes`]).
#[derive(Debug, thiserror::Error)]
pub enum SutError {
    #[error("unknown system under test '{name}': use one of {known}")]
    UnknownProfile { name: String, known: String },
    #[error("{binary} not found: install the Debian package {package} (make setup does)")]
    MissingBinary { binary: String, package: String },
    #[error("{binary} not found: {how}")]
    NotInstalled { binary: String, how: String },
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} did not become ready in time")]
    NotReady(String),
    #[error("{what} was rejected: {detail}")]
    Rejected { what: String, detail: String },
    #[error("{0} is not running")]
    NotRunning(String),
    #[error("{system} cannot {what}")]
    Unsupported { system: String, what: String },
    /// A driver or platform was asked to act before `prepare` gave it a context: a
    /// caller's mistake, named by what was asked (`nginx-reload`, `kubernetes:
    /// drain`). A variant of its own rather than types that make it impossible:
    /// [`Driver`]'s steps are separate calls on one object by design (the runner
    /// times each), so its prepared state is an `Option` inside each driver.
    #[error("{0}: prepare() was not called")]
    NotPrepared(String),
    /// `start` was asked of a process that already runs.
    #[error("{0} is already running")]
    AlreadyRunning(String),
    /// A process exited while it was starting, before it served: every driver's and
    /// platform's one way to say so. `why` is what the process left to read (the
    /// last error of its log, or where that log is), if anything.
    #[error("{process} exited at start{}", colon(why))]
    ExitedAtStart {
        /// The process, as the profile names it (`nginx-reload`, `envoy epoch 2`).
        process: String,
        why: Option<String>,
    },
    /// What the settings ask for cannot work here (a quota too small, a workload
    /// named in a form the platform cannot find, a protocol the backends' image does
    /// not serve): input for the user to change, not a failure of the system.
    #[error("{what}: {why}")]
    Setting { what: String, why: String },
    /// A tool or an API the driver asked (openssl, a proxy's admin API or socket)
    /// failed or answered something else than it should; `detail` is what it said.
    #[error("{tool}: {detail}")]
    ToolFailed { tool: String, detail: String },
    /// Something the driver made could not be encoded as the proxy or the API takes
    /// it (a configuration or an object as JSON, a certificate as text).
    #[error("{what}")]
    Render {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A message with nothing to match on. It stays a string because its only
    /// users are test doubles (a fake driver's failures in the scenario runner's
    /// tests), which make up errors no real part raises; every real failure has a
    /// variant above.
    #[error("{0}")]
    Other(String),
    /// The typed error of a part the lab uses (the xDS server) or that implements its
    /// traits elsewhere (the Kubernetes platform), kept whole: its message and its
    /// causes are its own, and a caller can downcast it.
    #[error(transparent)]
    Part(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl SutError {
    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SutError {
        let what = what.into();
        move |source| SutError::Io { what, source }
    }

    /// Wraps an encoding error with what was being encoded ([`SutError::Render`]).
    pub fn render<E>(what: impl Into<String>) -> impl FnOnce(E) -> SutError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let what = what.into();
        move |source| SutError::Render {
            what,
            source: Box::new(source),
        }
    }
}

/// `": why"`, or nothing without a why: the tail of [`SutError::ExitedAtStart`].
fn colon(why: &Option<String>) -> String {
    why.as_deref().map(|w| format!(": {w}")).unwrap_or_default()
}

/// A backend the proxy should send traffic to. `id` is unique per backend process
/// over the whole run (like a pod name), so propagation can be read from responses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub id: String,
    pub addr: SocketAddr,
}

/// A route configuration (study S3's changes), applied to all traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Route {
    /// Plain proxying to the backends.
    #[default]
    Base,
    /// Add CORS response headers: `Access-Control-Allow-Origin: *`,
    /// `Access-Control-Allow-Methods: GET, POST, OPTIONS`,
    /// `Access-Control-Allow-Headers: Content-Type, Authorization`.
    Cors,
    /// Add the response header `x-custom: 1`.
    Header,
    /// Rewrite the request path: `/x` reaches the backend as `/rewritten/x`.
    Rewrite,
}

impl Route {
    /// The name scenarios use.
    pub fn name(self) -> &'static str {
        match self {
            Route::Base => "base",
            Route::Cors => "cors",
            Route::Header => "header",
            Route::Rewrite => "rewrite",
        }
    }

    /// Parses a scenario's route name.
    pub fn parse(s: &str) -> Option<Route> {
        match s {
            "base" => Some(Route::Base),
            "cors" => Some(Route::Cors),
            "header" => Some(Route::Header),
            "rewrite" => Some(Route::Rewrite),
            _ => None,
        }
    }

    /// What the routes leave in a response, as markers for the engine to look for:
    /// a CORS header, the custom header, and the rewritten path in the backend's
    /// `uri:` line (both backends, the built-in one and the cluster's nginx, echo
    /// the path they received there). Bit `i` of [`Route::shows`] is marker `i`.
    /// The rewrite's marker is the prefix without its slash: implementations read
    /// "replace the prefix `/` with `/rewritten/`" differently (Envoy Gateway 1.9
    /// sends `/rewrittenprobe` for `/probe`, Gateway API says `/rewritten/probe`),
    /// and either way the rewrite is in force.
    pub fn markers() -> Vec<http1::Marker> {
        vec![
            http1::Marker::Header("access-control-allow-origin".into()),
            http1::Marker::Header("x-custom".into()),
            http1::Marker::Body(b"uri: /rewritten".to_vec()),
        ]
    }

    /// The markers a response carries when this route is the one in force: exactly
    /// one for each change route, none for `base`.
    pub fn shows(self) -> u8 {
        match self {
            Route::Base => 0,
            Route::Cors => 0b001,
            Route::Header => 0b010,
            Route::Rewrite => 0b100,
        }
    }
}

/// Where and how a driver runs.
#[derive(Clone, Debug)]
pub struct DriverContext {
    /// Private scratch folder (pid files, sockets, temp paths); removed after the run.
    pub work_dir: PathBuf,
    /// The results folder of this system: configs and logs the driver keeps go here.
    pub out_dir: PathBuf,
    /// PEM certificate and key the proxy terminates TLS with.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Port the proxy listens on for HTTPS, on 127.0.0.1 (chosen free by the runner).
    pub https_port: u16,
    /// Port the proxy listens on for plain HTTP, on 127.0.0.1.
    pub http_port: u16,
    /// Upstream keep-alive as in study S1: idle connections kept per worker, and
    /// requests per upstream connection.
    pub upstream_keepalive: u32,
    pub upstream_keepalive_requests: u64,
    /// Client connections a worker accepts (S1: 10000).
    pub worker_connections: u32,
    /// The CPUs the proxy may use (empty: any). The proxy runs one worker per CPU of
    /// its set (nginx `worker_processes`, HAProxy `nbthread`, Caddy `GOMAXPROCS`).
    pub cpus: Vec<usize>,
    /// Count TLS handshakes, full and resumed, on the proxy's side
    /// ([`Driver::handshakes`]); for proxies that need a log for it (nginx, Caddy),
    /// off by default because the log costs CPU.
    pub count_handshakes: bool,
    /// The tuned variant's passive health checks (`<profile>+passive`); `None`: the
    /// profile's default.
    pub passive_health: Option<crate::PassiveHealth>,
    /// Offer HTTP/2 to clients on the HTTPS port, by ALPN (`h2`, then `http/1.1`):
    /// a scenario's `protocol: h2`. Off, every profile offers only HTTP/1.1, as the
    /// studies' proxies did.
    pub http2: bool,
    /// Speak HTTP/2 without TLS (h2c) to the backends: gRPC's requirement
    /// (`protocol: grpc`). Off, every profile speaks HTTP/1.1 to them.
    pub upstream_h2c: bool,
    /// Route the behaviour probes' fixture host beside the run's route
    /// ([`crate::routes::FIXTURE_HOST`]): a run with probes. Off, a profile
    /// renders nothing of it.
    pub probe_fixture: bool,
    /// Route the annotation corpus beside the run's route (`probes.corpus`), where
    /// the profile renders it ([`Driver::corpus_left_out`]).
    pub probe_corpus: bool,
}

impl DriverContext {
    /// A context with study S1's tuning: upstream keep-alive of 100 idle connections
    /// and 100,000,000 requests per connection, 10,000 worker connections.
    pub fn with_s1_tuning(
        work_dir: PathBuf,
        out_dir: PathBuf,
        (cert, key): (PathBuf, PathBuf),
        (https_port, http_port): (u16, u16),
    ) -> Self {
        DriverContext {
            work_dir,
            out_dir,
            cert,
            key,
            https_port,
            http_port,
            upstream_keepalive: 100,
            upstream_keepalive_requests: 100_000_000,
            worker_connections: 10_000,
            cpus: Vec::new(),
            count_handshakes: false,
            passive_health: None,
            http2: false,
            upstream_h2c: false,
            probe_fixture: false,
            probe_corpus: false,
        }
    }

    /// Makes `cert` and `key` the certificate files in force; returns the ones
    /// before, to put back if the proxy refuses them (a rotation).
    pub fn set_certificate(&mut self, cert: &Path, key: &Path) -> (PathBuf, PathBuf) {
        (
            std::mem::replace(&mut self.cert, cert.to_path_buf()),
            std::mem::replace(&mut self.key, key.to_path_buf()),
        )
    }

    /// Workers the proxy runs: one per CPU of its set, one when it has no set.
    pub fn workers(&self) -> usize {
        self.cpus.len().max(1)
    }
}

/// What a driver can do beyond serving traffic, so the runner (and a scenario check)
/// knows before a run which steps mean something for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// It takes endpoint sets pushed to it ([`Driver::set_endpoints`]): a proxy on
    /// this machine with `endpoint_push` in front. A Kubernetes controller
    /// discovers endpoints itself and does not.
    pub push_endpoints: bool,
    /// It applies S3's route changes.
    pub routes: bool,
    /// It reloads with its current configuration.
    pub reload: bool,
    /// It can be stopped and started again within a run.
    pub restart: bool,
    /// It has a control plane of its own that `restart: controller` restarts
    /// ([`Driver::restart_controller`]).
    pub restart_controller: bool,
    /// It takes a new serving certificate while it runs
    /// ([`Driver::rotate_certificate`]).
    pub rotate_certificate: bool,
}

impl Capabilities {
    /// Everything a proxy driven on this machine does.
    pub const LOCAL_PROXY: Capabilities = Capabilities {
        push_endpoints: true,
        routes: true,
        reload: true,
        restart: true,
        restart_controller: false,
        rotate_certificate: true,
    };
}

/// A rotation as every local driver makes it: `cert` and `key` become the
/// certificate of the context `ctx` finds in `d`, then `apply` gives them to the
/// proxy; if it refuses, the old files are in force again, as in the proxy.
///
/// # Errors
/// [`SutError::NotPrepared`] when `d` has no context yet, else `apply`'s.
pub fn rotate_with<D: Driver + ?Sized>(
    d: &mut D,
    ctx: fn(&mut D) -> Option<&mut DriverContext>,
    (cert, key): (&Path, &Path),
    apply: impl FnOnce(&mut D) -> Result<(), SutError>,
) -> Result<(), SutError> {
    let name = d.name();
    let before = ctx(d)
        .ok_or_else(|| SutError::NotPrepared(name.into()))?
        .set_certificate(cert, key);
    let res = apply(d);
    if res.is_err() {
        if let Some(c) = ctx(d) {
            c.set_certificate(&before.0, &before.1);
        }
    }
    res
}

/// How a system's proxy restarts (`restart: proxy`), and what that promises the
/// traffic: what the tests hold each profile to, and what a report says beside the
/// errors it saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartKind {
    /// How, in a few words: `hot restart`, `stop and start`, ...
    pub how: &'static str,
    /// Whether it promises to lose no request: the listening sockets are handed to
    /// the new process, and the old one finishes what it has.
    pub seamless: bool,
}

/// The state a driver's `settle` waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Traffic goes to exactly these backend ids.
    Endpoints(Vec<String>),
    /// This route configuration is in force.
    Route(Route),
    /// A reload (or restart) asked for has finished: new workers serve, old ones are
    /// gone or draining.
    Reloaded,
    /// Whatever this driver was last asked to do has taken effect. Only meaningful
    /// for a driver that makes every change itself (the local proxies); the driver
    /// tests use it to settle a change without restating it.
    Applied,
}

impl Expect {
    /// The ids of an endpoint set, for [`Expect::Endpoints`].
    pub fn endpoints(eps: &[Endpoint]) -> Expect {
        Expect::Endpoints(eps.iter().map(|e| e.id.clone()).collect())
    }
}

/// A system under test, driven the way its ingress controller drives it.
pub trait Driver: Send {
    /// The profile name, e.g. `nginx-reload`.
    fn name(&self) -> &'static str;
    /// What it can do (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities;
    /// Checks the binaries exist, writes the initial configuration (kept in
    /// `out_dir`) routing to `endpoints` with `Route::Base`.
    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), SutError>;
    /// Starts the proxy process(es).
    fn start(&mut self) -> Result<(), SutError>;
    /// Waits until the proxy answers through its HTTPS port.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SutError>;
    /// Prepares, starts and waits until the system serves: what a run does first.
    ///
    /// # Errors
    /// The first step's [`SutError`].
    fn deploy(
        &mut self,
        ctx: &DriverContext,
        endpoints: &[Endpoint],
        timeout: Duration,
    ) -> Result<(), SutError> {
        self.prepare(ctx, endpoints)?;
        self.start()?;
        self.wait_ready(timeout)
    }
    /// Asks for traffic to go to exactly `endpoints` from now on. Only drivers with
    /// [`Capabilities::push_endpoints`] implement it.
    ///
    /// # Errors
    /// [`SutError::Unsupported`] by default.
    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), SutError> {
        let _ = endpoints;
        Err(SutError::Unsupported {
            system: self.name().into(),
            what: "take endpoints pushed to it".into(),
        })
    }
    /// What a route change needs of the system beyond the change itself, in words
    /// for a change that never showed in traffic: a controller's setting that
    /// lets the annotation through, or when it answers with it. `None` when
    /// nothing is known.
    fn route_needs(&self, route: Route) -> Option<String> {
        let _ = route;
        None
    }
    /// What routes the load to the backends, in words for a message: a cluster's
    /// routing object and its class.
    fn routed_by(&self) -> String {
        "its route".to_string()
    }
    /// Asks for a route configuration.
    fn apply_route(&mut self, route: Route) -> Result<(), SutError>;
    /// How many times the controller wrote the status of the route set's routing
    /// objects since the first set was asked for (a Kubernetes controller's
    /// HTTPRoute conditions); `None` where routes carry no status, or nothing counts.
    fn route_status_writes(&self) -> Option<u64> {
        None
    }
    /// Asks for a route set ([`crate::routes`]) beside the route all traffic takes
    /// today: N routes over H virtual hosts, rendered the way the system's
    /// controller would, replacing the set given before (`count` 0: none). Returns
    /// the size of the configuration it gave the proxy, in bytes, when it knows it.
    /// Settled like any change ([`Expect::Applied`]); whether each route serves is
    /// for [`crate::routes::probe`] to find out.
    ///
    /// # Errors
    /// [`SutError::Unsupported`] by default.
    fn apply_route_set(&mut self, set: &crate::RouteSet) -> Result<Option<u64>, SutError> {
        let _ = set;
        Err(SutError::Unsupported {
            system: self.name().into(),
            what: "render a route set".into(),
        })
    }
    /// Asks for a reload of the proxy with its current configuration.
    fn reload(&mut self) -> Result<(), SutError>;
    /// How [`restart_proxy`](Self::restart_proxy) restarts this system's proxy.
    fn restart_kind(&self) -> RestartKind {
        RestartKind {
            how: "stop and start",
            seamless: false,
        }
    }
    /// Restarts the proxy process itself the way its controller would (a pod
    /// replaced, a binary handed its sockets), with the configuration it has, and
    /// returns once the new process serves; `replaced` is told of each pod replaced
    /// as it happens (a rolling restart on a cluster). The default stops it and
    /// starts it again, as when a controller's pod is replaced.
    ///
    /// # Errors
    /// The [`SutError`] of the step that failed; whatever it left running is
    /// stopped by [`stop`](Self::stop) as always.
    fn restart_proxy(&mut self, replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        let _ = replaced;
        self.stop()?;
        self.start()?;
        self.wait_ready(Duration::from_secs(15))
    }
    /// Restarts the system's control plane, where it has one apart from the proxy
    /// ([`Capabilities::restart_controller`]): returns once a new controller runs,
    /// which may not have given the proxy anything yet, so a change asked for next
    /// is made while it resyncs. `replaced` is told of each pod replaced.
    ///
    /// # Errors
    /// [`SutError::Unsupported`] by default.
    fn restart_controller(&mut self, replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        let _ = replaced;
        Err(SutError::Unsupported {
            system: self.name().into(),
            what: "restart a controller: it has no control plane apart from its proxy".into(),
        })
    }
    /// Gives the proxy a new serving certificate (`cert`, `key`: PEM files) the way
    /// its controller does (a reload, a runtime API, SDS); settled like any change.
    ///
    /// # Errors
    /// [`SutError::Unsupported`] by default.
    fn rotate_certificate(&mut self, cert: &Path, key: &Path) -> Result<(), SutError> {
        let _ = (cert, key);
        Err(SutError::Unsupported {
            system: self.name().into(),
            what: "rotate its certificate".into(),
        })
    }
    /// Waits until `expect` holds (new workers serving, API answered, ...). A driver
    /// that made the change itself knows when it is done; one that did not (a
    /// cluster's controller) watches for the state.
    fn settle(&mut self, expect: &Expect, timeout: Duration) -> Result<(), SutError>;
    /// Whether the system under test still serves: its processes run (or its pods).
    fn alive(&mut self) -> bool;
    /// Stops every process the driver started, and waits for them.
    fn stop(&mut self) -> Result<(), SutError>;
    /// Versions of what runs, e.g. `[("nginx", "1.22.1")]`.
    fn versions(&self) -> Vec<(String, String)>;
    /// The process groups of what runs on this machine (each proxy process started
    /// in a group of its own, its workers with it), so the runner can read what the
    /// system spends in CPU and memory ([`crate::usage`]). Empty when nothing of it
    /// runs here (a cluster's controller).
    fn process_groups(&self) -> Vec<u32> {
        Vec::new()
    }
    /// TLS handshakes the proxy completed since it started, as the proxy itself counts
    /// them (its log or its statistics), so that a handshake rate can be checked to
    /// be made of full handshakes. `None`: it does not count them here.
    fn handshakes(&mut self) -> Option<Handshakes> {
        None
    }
    /// The annotation corpus's behaviours this system was not given, each with why
    /// (`not expressible: ...`, `not run: ...`, `refused: ...`), when the context
    /// asked for the corpus; `None`: the profile renders no corpus at all.
    fn corpus_left_out(&self) -> Option<Vec<(String, String)>> {
        None
    }

    /// What went wrong since the last call without failing the change it came with
    /// (the object of an old route that could not be deleted, while the new route is
    /// in force), for the run to report: each is returned once.
    fn take_warnings(&mut self) -> Vec<SutError> {
        Vec::new()
    }
}

/// TLS handshakes counted by the proxy: full ones and resumed sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Handshakes {
    pub full: u64,
    pub resumed: u64,
    /// Where the counts come from, e.g. `nginx access log ($ssl_session_reused)`.
    pub source: &'static str,
}

impl Handshakes {
    /// What was counted since `before` (an earlier reading of the same proxy).
    pub fn since(&self, before: &Handshakes) -> Handshakes {
        Handshakes {
            full: self.full.saturating_sub(before.full),
            resumed: self.resumed.saturating_sub(before.resumed),
            source: self.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_exits_at_start_says_so_with_or_without_why() {
        let e = SutError::ExitedAtStart {
            process: "nginx-reload".into(),
            why: Some("bind() to 127.0.0.1:80 failed".into()),
        };
        assert_eq!(
            e.to_string(),
            "nginx-reload exited at start: bind() to 127.0.0.1:80 failed"
        );
        let e = SutError::ExitedAtStart {
            process: "nginx-reload".into(),
            why: None,
        };
        assert_eq!(e.to_string(), "nginx-reload exited at start");
    }

    #[test]
    fn not_prepared_names_what_was_asked() {
        let e = SutError::NotPrepared("caddy-api".into());
        assert_eq!(e.to_string(), "caddy-api: prepare() was not called");
    }

    #[test]
    fn render_keeps_the_encoding_error_as_its_source() {
        let bad = String::from_utf8(vec![0xff]).unwrap_err();
        let e = SutError::render("haproxy: the certificate as PEM text")(bad);
        assert_eq!(e.to_string(), "haproxy: the certificate as PEM text");
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.to_string().contains("utf-8"), "{source}");
    }
}
