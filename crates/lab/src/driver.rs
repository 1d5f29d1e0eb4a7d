//! The one interface behind every system under test.
//!
//! It is shaped for the slowest, most asynchronous case (a Kubernetes API server):
//! asking for a change (`set_endpoints`, `apply_route`, `reload`) and learning that the
//! change took effect (`settle`) are separate calls, so the runner times and logs
//! each. The scenario runner talks only to this trait and never knows which proxy is
//! behind it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Why the lab could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("unknown system under test '{0}': use one of nginx-reload, nginx-lua, haproxy-reload, haproxy-runtime, caddy-api")]
    UnknownProfile(String),
    #[error("{binary} not found: install the Debian package {package} (make setup does)")]
    MissingBinary { binary: String, package: String },
    #[error("{what}: {source}")]
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
    #[error("{0}")]
    Other(String),
}

impl LabError {
    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
        let what = what.into();
        move |source| LabError::Io { what, source }
    }
}

/// A backend the proxy should send traffic to. `id` is unique per backend process
/// over the whole run (like a pod name), so propagation can be read from responses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub id: String,
    pub addr: SocketAddr,
}

/// A route configuration (study S3's changes), applied to all traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Plain proxying to the backends.
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
}

/// A system under test, driven the way its ingress controller drives it.
pub trait Driver: Send {
    /// The profile name, e.g. `nginx-reload`.
    fn name(&self) -> &'static str;
    /// Checks the binaries exist, writes the initial configuration (kept in
    /// `out_dir`) routing to `endpoints` with `Route::Base`.
    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), LabError>;
    /// Starts the proxy process(es).
    fn start(&mut self) -> Result<(), LabError>;
    /// Waits until the proxy answers through its HTTPS port.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LabError>;
    /// Asks for traffic to go to exactly `endpoints` from now on.
    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), LabError>;
    /// Asks for a route configuration.
    fn apply_route(&mut self, route: Route) -> Result<(), LabError>;
    /// Asks for a reload of the proxy with its current configuration.
    fn reload(&mut self) -> Result<(), LabError>;
    /// Waits until the last change asked for has taken effect (new workers serving,
    /// API answered, ...).
    fn settle(&mut self, timeout: Duration) -> Result<(), LabError>;
    /// Whether the proxy's main process is still running.
    fn alive(&mut self) -> bool;
    /// Stops every process the driver started, and waits for them.
    fn stop(&mut self) -> Result<(), LabError>;
    /// Versions of what runs, e.g. `[("nginx", "1.22.1")]`.
    fn versions(&self) -> Vec<(String, String)>;
}
