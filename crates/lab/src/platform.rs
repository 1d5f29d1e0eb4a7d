//! Where backends live and how they change: the other half of a system under test.
//!
//! A [`Driver`](crate::Driver) is the proxy; a [`Platform`] is everything around it:
//! the backends (processes here, pods of a Deployment on a cluster), the scratch space,
//! the TLS material and the address the load is sent to. Scaling is the platform's
//! job, and it names the backends itself (a process id here, a pod name on
//! Kubernetes), so the runner never mints ids, picks ports or spawns processes.
//! Readiness and termination come back as [`PlatformEvent`]s, which the runner
//! timestamps on the load's clock the moment it receives them.

use crate::certs::KeyType;
use crate::driver::{DriverContext, Endpoint, LabError};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How a removed backend stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopMode {
    /// SIGTERM: stop accepting, finish requests in flight, close idle connections
    /// (a pod with a grace period).
    Graceful,
    /// SIGKILL: gone at once (a lost node).
    Abrupt,
}

impl StopMode {
    pub fn name(self) -> &'static str {
        match self {
            StopMode::Graceful => "graceful",
            StopMode::Abrupt => "abrupt",
        }
    }
}

/// How every backend of a run answers and stops.
#[derive(Clone, Debug)]
pub struct BackendSpec {
    pub body_size: usize,
    /// `--delay` value passed through, e.g. `2ms` or `exp:2ms`.
    pub delay: Option<String>,
    /// How long a gracefully stopped backend may drain.
    pub drain_timeout: Duration,
    /// Worker threads per backend.
    pub workers: usize,
}

/// TLS between the load and the system under test.
#[derive(Clone, Debug)]
pub struct TlsSpec {
    /// false: plain HTTP.
    pub enabled: bool,
    pub key: KeyType,
}

/// What one system under test is set up with.
#[derive(Clone, Debug)]
pub struct SiteSpec {
    pub system: String,
    /// The results folder of this system: configs and logs are kept here.
    pub out_dir: PathBuf,
    pub backends: BackendSpec,
    /// Backends running when the system is deployed.
    pub replicas: u32,
    pub tls: TlsSpec,
}

/// Where the load goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL the engine loads.
    pub url: String,
    /// The certificate to trust, when the platform made it.
    pub cacert: Option<PathBuf>,
    /// The addresses the load may reach: a run refuses to send traffic elsewhere.
    pub reachable: Vec<IpAddr>,
}

/// Something that happened to a backend, reported by the platform as it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlatformEvent {
    /// A backend answers its readiness probe; `took` is from the request to start it.
    Ready { endpoint: Endpoint, took: Duration },
    /// A backend was told to stop (and leaves the endpoint set now).
    Stopping { id: String, mode: StopMode },
    /// A backend could not be started or stopped.
    Failed { detail: String },
}

/// Where backends live and how they change (see the module docs).
pub trait Platform: Send {
    /// The platform's name in scenarios: `local`.
    fn name(&self) -> &'static str;
    /// Sets up one system: its scratch space, TLS material and listen addresses, and
    /// `spec.replicas` ready backends. Returns what the driver deploys with.
    ///
    /// # Errors
    /// [`LabError`] when something cannot be set up.
    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, LabError>;
    /// Where the load goes, once prepared.
    fn target(&self) -> Target;
    /// The backends that are ready now, oldest first.
    fn endpoints(&self) -> Vec<Endpoint>;
    /// How many backends run (ready or starting).
    fn replicas(&self) -> u32;
    /// Scales to `to` backends, removing with `stop`; `on` is called with each event
    /// as it happens (a backend ready, one stopping), so the caller can time it.
    fn scale(&mut self, to: u32, stop: StopMode, on: &mut dyn FnMut(PlatformEvent));
    /// Housekeeping between steps (reaping drained backends).
    fn tick(&mut self);
    /// Stops every backend and removes what `prepare` made.
    fn teardown(&mut self);
}

/// Every platform, by the name scenarios use.
pub const PLATFORMS: &[&str] = &["local"];
