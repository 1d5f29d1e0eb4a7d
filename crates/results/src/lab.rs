//! What the local lab reports of a system under test: the proxy's own resources, its
//! placement on CPUs, its events and versions.

use crate::{
    failover, ClusterInfo, Event, EventWindow, NetworkInfo, Propagation, RoutePropagation,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One second of what the system under test spent (its processes on this machine).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceSample {
    /// When it was read, seconds from the start of the measured window (about once a
    /// second; later while a change was being applied).
    pub t_s: f64,
    /// CPU (user + system) used since the previous reading, in cores: 1.0 is a whole
    /// core busy.
    pub cpu: f64,
    /// Resident memory at the end of the second, MiB.
    pub rss_mib: f64,
    /// Processes alive then (a reload's old workers included).
    pub processes: u32,
}

/// What the system under test spent over the measured window, read every second from
/// `/proc` for every process of its process groups.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    pub samples: Vec<ResourceSample>,
    /// CPU cores used on average and in the busiest second.
    pub cpu_mean: f64,
    pub cpu_max: f64,
    /// Largest resident memory seen, MiB.
    pub rss_max_mib: f64,
    /// CPU milliseconds per 1,000 completed requests.
    pub cpu_ms_per_1000: Option<f64>,
}

impl Resources {
    /// The samples with their summary; `completed`: the run's completed requests.
    pub fn of(samples: Vec<ResourceSample>, completed: u64) -> Self {
        let mut prev = 0.0;
        let mut total = 0.0;
        for s in &samples {
            total += s.cpu * (s.t_s - prev).max(0.0);
            prev = s.t_s;
        }
        Resources {
            cpu_mean: if prev > 0.0 { total / prev } else { 0.0 },
            cpu_max: samples.iter().map(|s| s.cpu).fold(0.0, f64::max),
            rss_max_mib: samples.iter().map(|s| s.rss_mib).fold(0.0, f64::max),
            cpu_ms_per_1000: (completed > 0).then(|| total * 1000.0 / completed as f64 * 1000.0),
            samples,
        }
    }
}

/// What a lab run adds to a result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LabInfo {
    /// The profile, e.g. `nginx-reload`.
    pub system: String,
    pub scenario: String,
    /// Versions of the proxy and its parts, e.g. `{"nginx": "1.22.1"}`.
    pub versions: BTreeMap<String, String>,
    /// The behaviour probes sent before the load (`probes:`), and where this
    /// system answered otherwise than the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<crate::probes::ProbeRun>,
    pub events: Vec<Event>,
    pub windows: Vec<EventWindow>,
    /// The same figures for the requests intended before the first change (the
    /// whole run when nothing changed): with `windows`, they add up to the run.
    /// Absent in results written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_changes: Option<EventWindow>,
    pub propagation: Propagation,
    /// Route changes as traffic saw them; absent when the run changed no route (and
    /// in results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_propagation: Option<RoutePropagation>,
    /// What the system under test spent, per second (absent when none of it ran on
    /// this machine, and in results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// The proxy process died during the run.
    pub proxy_died: bool,
    /// Which CPUs the generator, the proxy and the backends ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementInfo>,
    /// On a cluster: where the run worked and which pods served it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    /// On the network lab: the data path and how the nodes were tuned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkInfo>,
    /// In a run at fractions of a maximum (`load.rates`): which fraction this is and
    /// the maximum it is a fraction of (the search is in the system's `search.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<Fraction>,
    /// With flapping backends (`backends.flapping`): their phases and what each saw,
    /// see [`failover`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<failover::Failover>,
    /// With a route set (`routes:`): how long until every route served, and what
    /// the configuration cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_set: Option<RouteSetResult>,
    /// Each certificate rotation (`rotate: certificate`) as new connections saw it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rotations: Vec<Rotation>,
}

/// One certificate rotation, from the serial numbers the load's handshakes saw
/// (`tls.certificates`): when new connections were first served with the new
/// certificate, and when an old one was last served, from the request (ms).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rotation {
    /// When it was asked for, ms from the start of the measured window.
    pub at_ms: f64,
    /// The serial in force before, and the new one (hex, as `tls.certificates`).
    pub serial_old: String,
    pub serial_new: String,
    /// From the request until the system said it was done; absent when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_ms: Option<f64>,
    /// From the request until the first handshake served with the new certificate;
    /// absent when none was (no new connection, or the rotation never took).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_seen_ms: Option<f64>,
    /// From the request until the last handshake still served with the old one
    /// (absent: none after the request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_old_ms: Option<f64>,
    /// Handshakes with the new certificate over the run.
    pub handshakes_new: u64,
    /// Errors of the rotation's window: `tls` (handshake failures), and all.
    pub tls_errors: u64,
    pub errors: u64,
    /// Requests of the window sent again on a new connection because the server
    /// closed a kept-alive one: existing connections that did not survive.
    pub reconnects: u64,
}

/// A route set given to the system before the load (scenario `routes:`), and how
/// long until every route answered as itself (`sut::routes::probe`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteSetResult {
    pub count: u32,
    pub hosts: u32,
    /// The configuration the proxy was given for it, bytes (absent when the driver
    /// does not know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_bytes: Option<u64>,
    /// How long the driver took to apply it (write, reload or push), ms.
    pub apply_ms: f64,
    /// From the apply until the system reported it in force, ms: a local proxy's
    /// reload or push settled, or a Kubernetes controller's `Accepted` status on
    /// every HTTPRoute of the set (what gateway-api-bench times as route status);
    /// routes are probed meanwhile, so `all_served_ms` may come first.
    #[serde(default)]
    pub settled_ms: f64,
    /// From the apply until the last route answered as itself, ms; absent when some
    /// never did within `bound_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_served_ms: Option<f64>,
    pub bound_ms: f64,
    pub served: u32,
    /// Routes that never answered as themselves within the bound: how many, and the
    /// first hundred of them.
    pub never_count: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never: Vec<u32>,
    /// Probe requests, and those answered by something else than their route.
    pub probes: u64,
    pub misses: u64,
    /// Status writes the controller made to the set's routing objects from the
    /// apply until both the probe and the settling ended (a watch counts them; a
    /// Kubernetes controller's HTTPRoute conditions). Absent where nothing counts
    /// them (a local proxy, a run not allowed to watch its routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_writes: Option<u64>,
    /// CPU seconds the system's processes on this machine spent from the apply
    /// until both the probe and the settling ended (a proxy's reload, a
    /// controller's rendering), and their resident memory then, MiB; absent where
    /// none of them runs here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_mib: Option<f64>,
    /// One route added to or removed from the set while the load ran (the
    /// scenario's `route_set: add|remove|change` steps), in order. Each one's window in
    /// `windows` holds the load's errors meanwhile: on routes nobody changed, the
    /// collateral damage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<RouteSetChange>,
}

/// One route added to or removed from a running route set, and how long until
/// traffic through the proxy showed it (`sut::routes::watch`, polled every 5 ms as
/// gateway-api-bench does).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteSetChange {
    /// `add` or `remove`.
    pub change: String,
    /// The route (`r1000`) and how many routes the set has after the change.
    pub route: String,
    pub routes_after: u32,
    /// When the change was asked, ms into the measured window.
    pub at_ms: f64,
    /// How long the driver took to apply and settle it, ms; absent when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_ms: Option<f64>,
    /// From the ask until the route first answered as itself (added) or first did
    /// not (removed), ms; absent when that did not happen within `bound_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown_ms: Option<f64>,
    pub bound_ms: f64,
    pub probes: u64,
    /// Status writes the controller made to the set's routing objects from the ask
    /// until the watch ended (shown or bound); absent where nothing counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_writes: Option<u64>,
}

/// A run at a fraction of the maximum its system sustained (study S2's 30-50 %).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fraction {
    /// The system the maximum was searched for (`host`), without the fraction.
    pub of: String,
    /// 0 to 1, e.g. 0.3.
    pub fraction: f64,
    /// The maximum found by the search, req/s.
    pub max_rate: f64,
}

/// The CPUs each part of a lab run used, as `0-3,6` lists, and the proxy's workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacementInfo {
    pub generator: String,
    pub proxy: String,
    pub backends: String,
    /// Workers (processes or threads) the proxy ran: one per CPU of its set.
    pub proxy_workers: usize,
}
