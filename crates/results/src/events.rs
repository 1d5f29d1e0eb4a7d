//! What happened during a run, on the load's clock: events and the windows of each
//! change.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A change to the system under test, or a step of one, on the load's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Milliseconds from the start of the measured window (negative: during setup).
    pub t_ms: f64,
    pub kind: EventKind,
    /// What it was about: a backend id, a route name, a replica count, an error.
    pub detail: String,
    /// For a step that completes another (`*_applied`, `*_done`, `backend_ready`):
    /// how long it took from its request, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<f64>,
}

/// What an event says happened. Written in JSON as its snake_case name
/// (`scale_requested`, ...), the names docs/scenarios.md lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    ScaleRequested,
    BackendReady,
    BackendStopping,
    EndpointsRequested,
    EndpointsApplied,
    RouteRequested,
    RouteApplied,
    RouteSetRequested,
    RouteSetApplied,
    ReloadRequested,
    ReloadDone,
    RestartRequested,
    RestartDone,
    RotateRequested,
    RotateDone,
    DrainRequested,
    /// A pod of the drained node evicted (on a cluster).
    PodEvicted,
    DrainDone,
    /// A pod of the restarted proxy or controller replaced by a new one that is
    /// ready (on a cluster: one per pod of a rolling restart).
    PodReplaced,
    ProxyDied,
    ChangeFailed,
}

impl EventKind {
    /// The change a user asked for that this event starts, named as in scenarios
    /// (`scale`, `route`, `reload`, `restart`): a marker on charts and a window in
    /// the tables. `None` for the steps inside a change (an endpoint push is a step
    /// of a scale) and for what follows from one.
    pub fn change(self) -> Option<&'static str> {
        match self {
            EventKind::ScaleRequested => Some("scale"),
            EventKind::RouteRequested => Some("route"),
            EventKind::RouteSetRequested => Some("route_set"),
            EventKind::ReloadRequested => Some("reload"),
            EventKind::RestartRequested => Some("restart"),
            EventKind::RotateRequested => Some("rotate"),
            EventKind::DrainRequested => Some("drain"),
            _ => None,
        }
    }

    /// Whether the event says something went wrong with the system under test.
    pub fn is_alarm(self) -> bool {
        matches!(self, EventKind::ProxyDied | EventKind::ChangeFailed)
    }

    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::ScaleRequested => "scale_requested",
            EventKind::BackendReady => "backend_ready",
            EventKind::BackendStopping => "backend_stopping",
            EventKind::EndpointsRequested => "endpoints_requested",
            EventKind::EndpointsApplied => "endpoints_applied",
            EventKind::RouteRequested => "route_requested",
            EventKind::RouteApplied => "route_applied",
            EventKind::RouteSetRequested => "route_set_requested",
            EventKind::RouteSetApplied => "route_set_applied",
            EventKind::ReloadRequested => "reload_requested",
            EventKind::ReloadDone => "reload_done",
            EventKind::RestartRequested => "restart_requested",
            EventKind::RestartDone => "restart_done",
            EventKind::RotateRequested => "rotate_requested",
            EventKind::RotateDone => "rotate_done",
            EventKind::DrainRequested => "drain_requested",
            EventKind::PodEvicted => "pod_evicted",
            EventKind::DrainDone => "drain_done",
            EventKind::PodReplaced => "pod_replaced",
            EventKind::ProxyDied => "proxy_died",
            EventKind::ChangeFailed => "change_failed",
        }
    }
}

impl EventWindow {
    /// The kind of change that opened the window, as scenarios name its step
    /// (`scale`, `restart`, `rotate`, ...): what `--fail-on errors[restart]>0`
    /// selects windows by.
    pub fn kind(&self) -> &str {
        self.change.split(' ').next().unwrap_or_default()
    }
}

/// The load's figures in the window from one change until the next: the requests
/// whose intended send time is in `[from_ms, until_ms)`, each in exactly one window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventWindow {
    /// The change: kind and detail of its first event (e.g. "scale 7").
    pub change: String,
    pub from_ms: f64,
    pub until_ms: f64,
    /// Successful responses, errors by kind, and the corrected latency (p99 to 2
    /// significant digits, and the exact max) of those requests; a request answered
    /// after the window ended still counts in it.
    pub completed: u64,
    pub errors: BTreeMap<String, u64>,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Requests of the window sent on a new connection because the server had closed
    /// the kept-alive one (not errors: see `connections` in the result). A reload
    /// that closes its idle connections shows here. Absent (0) in older files.
    #[serde(default)]
    pub reconnects_after_server_close: u64,
    /// HTTP/2: requests of the window the server refused in a GOAWAY (a reload
    /// draining its connections) and that were sent again on a new connection;
    /// not errors. Absent (0) for HTTP/1.1.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retried_after_goaway: u64,
    /// The run's long-lived sessions in the window (`sessions:`): their ends by the
    /// time they happened, their messages by intended send time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<crate::sessions::SessionWindow>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One change window as one generator of a split scenario run counted it (written
/// in the generator's result, added up by the coordinator, absent elsewhere): the
/// same figures the engine keeps per window, in a form that crosses a process.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowPart {
    pub completed: u64,
    /// Errors by kind name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Corrected latency (µs, 2 significant digits), HdrHistogram V2 deflate, base64.
    pub latency: String,
    pub max_us: u64,
    /// Successful responses by the route markers they carried (only patterns seen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<MarkerPart>,
    #[serde(default)]
    pub reconnects_after_server_close: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retried_after_goaway: u64,
}

/// The responses of a window that carried one marker pattern, with when the first
/// and last arrived in ms from the start of the measured window (the shared instant
/// every generator starts from, so the coordinator can place them on its clock).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MarkerPart {
    pub pattern: u8,
    pub responses: u64,
    pub first_ms: f64,
    pub last_ms: f64,
}
