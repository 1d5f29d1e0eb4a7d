//! Where backends live and how they change: the other half of a system under test.
//!
//! A [`Driver`](crate::Driver) is the proxy; a [`Platform`] is everything around it:
//! the backends (processes here, pods of a Deployment on a cluster), the scratch space,
//! the TLS material and the address the load is sent to. Scaling is the platform's
//! job, and it names the backends itself (a process id here, a pod name on
//! Kubernetes), so the runner never mints ids, picks ports or spawns processes.
//! Readiness and termination come back as [`PlatformEvent`]s, which the runner
//! timestamps on the load's clock the moment it receives them.

use crate::driver::{DriverContext, Endpoint, SutError};
use crate::KeyType;
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

/// Backends that flap (`backends.flapping` of a scenario): started with the steady
/// ones, given to the proxy with them, never the ones a scale-down removes, and
/// named `f1`, `f2`, ... so reports tell them apart at a glance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlapSpec {
    pub count: u32,
    /// `--flap` of the backend: `HEALTHY/FAILING`, e.g. `8s/4s`.
    pub schedule: String,
    /// `--flap-mode`: `reset`, `503` or `stall`.
    pub mode: String,
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
    /// The CPUs the backends run on (empty: any).
    pub cpus: Vec<usize>,
}

/// TLS between the load and the system under test.
#[derive(Clone, Debug)]
pub struct TlsSpec {
    /// false: plain HTTP.
    pub enabled: bool,
    pub key: KeyType,
    /// Offer HTTP/2 by ALPN (a scenario's `protocol: h2`; see
    /// [`crate::DriverContext::http2`]).
    pub http2: bool,
}

/// Which CPUs the generator, the proxy and the backends use. On a small machine the
/// load generator must not compete with what it measures: by default it gets the
/// first half of the CPUs and the proxy and backends the other half (on 4 or more,
/// the proxy and the backends get disjoint quarters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub generator: Vec<usize>,
    pub proxy: Vec<usize>,
    pub backends: Vec<usize>,
}

impl Placement {
    /// The default for a machine with `n` CPUs (numbered 0..n).
    pub fn default_for(n: usize) -> Placement {
        let all: Vec<usize> = (0..n.max(1)).collect();
        if n < 2 {
            return Placement {
                generator: all.clone(),
                proxy: all.clone(),
                backends: all,
            };
        }
        let half = n / 2;
        let (generator, rest) = all.split_at(half);
        let (proxy, backends) = if rest.len() >= 2 && n >= 4 {
            rest.split_at(rest.len() / 2)
        } else {
            (rest, rest)
        };
        Placement {
            generator: generator.to_vec(),
            proxy: proxy.to_vec(),
            backends: backends.to_vec(),
        }
    }

    /// The default for this machine's online CPUs.
    pub fn for_this_machine() -> Placement {
        Placement::default_for(online_cpus().len())
    }

    /// Checks every CPU named is one this process may run on.
    ///
    /// # Errors
    /// A message naming the first CPU that is not.
    pub fn check(&self) -> Result<(), String> {
        let online = online_cpus();
        for (what, set) in [
            ("generator", &self.generator),
            ("proxy", &self.proxy),
            ("backends", &self.backends),
        ] {
            if set.is_empty() {
                return Err(format!("placement.{what}: name at least one CPU"));
            }
            if let Some(c) = set.iter().find(|c| !online.contains(c)) {
                return Err(format!(
                    "placement.{what}: CPU {c} is not available here (this machine has {})",
                    fmt_set(&online)
                ));
            }
        }
        Ok(())
    }
}

/// The CPUs this process may run on.
pub fn online_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|c| set.is_set(*c))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// A CPU set as `0-3,6`.
pub fn fmt_set(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
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
    /// The proxy's CPUs (the backends' are in `backends.cpus`); empty: any.
    pub proxy_cpus: Vec<usize>,
    pub tls: TlsSpec,
    /// The load is gRPC (a scenario's `protocol: grpc`): the system carries it to
    /// the backends over HTTP/2 (h2c), as gRPC needs.
    pub grpc: bool,
    /// The run has behaviour probes: the system routes their fixture host too
    /// ([`crate::routes::FIXTURE_HOST`]).
    pub probe_fixture: bool,
    /// The run probes the annotation corpus: the platform makes what its fixtures
    /// need besides the run's backends (a second Service of one pod).
    pub probe_corpus: bool,
}

/// Where the load goes (empty until a platform is prepared).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// The URL the engine loads.
    pub url: String,
    /// The certificate to trust, when the platform made it.
    pub cacert: Option<PathBuf>,
    /// The addresses the load may reach: a run refuses to send traffic elsewhere.
    pub reachable: Vec<IpAddr>,
    /// The network namespace the load must leave from (the network lab's node A);
    /// `None`: this process's own.
    pub netns: Option<PathBuf>,
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
    /// [`SutError`] when something cannot be set up.
    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, SutError>;
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
    /// Stops every backend and removes what `prepare` made. Whatever it could not
    /// remove is the error, for the run to report (a cluster's namespace left
    /// behind, and how to remove it); the rest is removed all the same.
    ///
    /// # Errors
    /// [`SutError`] naming what is left.
    fn teardown(&mut self) -> Result<(), SutError>;
    /// The driver of `system` when the platform has systems under test of its own (a
    /// cluster's installed controllers); `None`: one of the lab's profiles
    /// ([`crate::driver_for`]).
    fn driver_for(&mut self, system: &str) -> Option<Result<Box<dyn crate::Driver>, SutError>> {
        let _ = system;
        None
    }
    /// Drains a node as `kubectl drain` does (`drain: node`): cordons it, evicts
    /// the backends on it (respecting their disruption budget), and reports each
    /// eviction ([`PlatformEvent::Stopping`]) and each replacement that is ready
    /// ([`PlatformEvent::Ready`]) as it happens. `node`: which one (`None`: the node
    /// of the oldest backend). Returns the node's name.
    ///
    /// # Errors
    /// [`SutError::Unsupported`] on a platform without nodes.
    fn drain(
        &mut self,
        node: Option<&str>,
        on: &mut dyn FnMut(PlatformEvent),
    ) -> Result<String, SutError> {
        let _ = (node, on);
        Err(SutError::Unsupported {
            system: self.name().into(),
            what: "drain a node: it has none".into(),
        })
    }
    /// A new serving certificate for the system, with the same names as the one it
    /// was deployed with and a new key and serial, signed by the same CA, so that the
    /// load trusts it (a `rotate: certificate` step); returns (cert, key), PEM.
    ///
    /// # Errors
    /// [`SutError::Unsupported`] on a platform that makes no certificates.
    fn new_certificate(&mut self) -> Result<(PathBuf, PathBuf), SutError> {
        Err(SutError::Unsupported {
            system: self.name().into(),
            what: "issue certificates".into(),
        })
    }
    /// What a cluster says of the run (its namespace, the pods and their nodes), for
    /// the result; `None` on a platform that is not a cluster. Called before
    /// `teardown`.
    fn cluster_info(&self) -> Option<results::ClusterInfo> {
        None
    }
    /// What the network lab built (its data path, its tuning); `None` elsewhere.
    fn network_info(&self) -> Option<results::NetworkInfo> {
        None
    }

    /// Backends that flap (`backends.flapping`), started by the next
    /// [`prepare`](Self::prepare) beside the steady replicas and never scaled away.
    /// A platform that cannot run them refuses.
    ///
    /// # Errors
    /// [`SutError::Unsupported`] naming the platform.
    fn set_flapping(&mut self, spec: Option<FlapSpec>) -> Result<(), SutError> {
        match spec {
            None => Ok(()),
            Some(_) => Err(SutError::Unsupported {
                system: self.name().into(),
                what: "run flapping backends: they run on the local platform only".into(),
            }),
        }
    }

    /// Each flapping backend's id and the log it writes (see `ingressbench backend
    /// --flap-log`), readable once the platform is torn down.
    fn flap_logs(&self) -> Vec<(String, PathBuf)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_never_shares_a_cpu_by_default() {
        let p = Placement::default_for(2);
        assert_eq!(
            (p.generator, p.proxy, p.backends),
            (vec![0], vec![1], vec![1])
        );
        let p = Placement::default_for(8);
        assert_eq!(p.generator, [0, 1, 2, 3]);
        assert_eq!(p.proxy, [4, 5]);
        assert_eq!(p.backends, [6, 7]);
        let p = Placement::default_for(1);
        assert_eq!((p.generator, p.proxy), (vec![0], vec![0]));
        assert_eq!(fmt_set(&[0, 1, 2, 3, 6]), "0-3,6");
    }

    #[test]
    fn a_cpu_the_machine_lacks_is_named() {
        let p = Placement {
            generator: vec![0],
            proxy: vec![4096],
            backends: vec![0],
        };
        let e = p.check().unwrap_err();
        assert!(
            e.starts_with("placement.proxy: CPU 4096 is not available"),
            "{e}"
        );
    }
}
