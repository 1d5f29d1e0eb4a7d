//! The `envoy-xds` system under test: one Envoy process configured entirely over ADS
//! by ingressbench, standing in for an xDS controller (Contour, Envoy Gateway, Istio).
//!
//! The bootstrap holds only the admin listener and the control plane's address (a Unix
//! socket in the scratch folder); listeners, the route configuration, the backends
//! cluster and its endpoints are pushed by [`xds::Server`]. An endpoint change is one
//! EDS update, a route change or a route set one RDS update, a reload a resync of
//! every type (what a restarted controller sends): Envoy never restarts.
//! [`EnvoyXds::settle`] waits for Envoy to acknowledge the versions pushed, so the
//! runner's events separate "pushed" (`*_requested`) from "acknowledged"
//! (`*_applied`), and the endpoint propagation table adds "seen in traffic".

use super::resources::{self, any, Source};
use super::{command, last_error, listeners_up, write_bootstrap, Setup};
use crate::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, Route, SutError};
use crate::proc::Guard;
use crate::RouteSet;
use prost::Message;
use std::time::{Duration, Instant};
use xds::{Server, XdsError, TYPE_CLUSTER, TYPE_ENDPOINTS, TYPE_LISTENER, TYPE_ROUTE, TYPE_SECRET};

/// Attempts at starting when the admin port turned out to be taken.
const START_ATTEMPTS: u32 = 3;

/// How long the last change took, for the driver tests' notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeTiming {
    /// What was pushed: `endpoints`, `routes`, or `everything` (a reload).
    pub what: &'static str,
    /// From the push to Envoy's ACK; `None` until `settle()` saw it.
    pub acked: Option<Duration>,
}

/// The `envoy-xds` driver.
#[derive(Default)]
pub struct EnvoyXds {
    s: Setup,
    server: Option<Server>,
    guard: Option<Guard>,
    /// Versions pushed that `settle()` has yet to see acknowledged.
    pending: Vec<(&'static str, u64)>,
    pushed_at: Option<Instant>,
    last: Option<ChangeTiming>,
    /// The route set in force before the last one pushed, until `settle()` saw the
    /// route configuration acknowledged: a NACK puts it back.
    set_before: Option<Option<RouteSet>>,
}

impl std::fmt::Debug for EnvoyXds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvoyXds")
            .field("admin_port", &self.s.admin.port)
            .field("endpoints", &self.s.endpoints)
            .field("route", &self.s.route)
            .field("route_set", &self.s.route_set)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl EnvoyXds {
    /// A driver; nothing happens until `prepare()`.
    pub fn new() -> Self {
        EnvoyXds::default()
    }

    /// The pid of the Envoy process (the same across every change).
    pub fn pid(&self) -> Option<u32> {
        self.guard.as_ref().and_then(Guard::pid)
    }

    /// The admin port on 127.0.0.1.
    pub fn admin_port(&self) -> u16 {
        self.s.admin.port
    }

    /// The last change asked for and, once settled, how long Envoy took to ACK it.
    pub fn last_change(&self) -> Option<&ChangeTiming> {
        self.last.as_ref()
    }

    fn ctx(&self) -> Result<&DriverContext, SutError> {
        self.s.ctx(self.name())
    }

    fn running(&mut self) -> bool {
        self.guard.as_mut().is_some_and(Guard::alive)
    }

    fn server(&self) -> Result<&Server, SutError> {
        self.server
            .as_ref()
            .ok_or_else(|| SutError::NotRunning("envoy-xds control plane".into()))
    }

    /// Pushes one type and remembers its version for `settle()`.
    fn push(
        &mut self,
        type_url: &'static str,
        resources: Vec<xds::envoy_types::pb::google::protobuf::Any>,
    ) -> Result<(), SutError> {
        let v = self.server()?.set(type_url, resources);
        self.pending.retain(|(t, _)| *t != type_url);
        self.pending.push((type_url, v));
        Ok(())
    }

    fn push_endpoints(&mut self) -> Result<(), SutError> {
        let cla = any(&resources::load_assignment(&self.s.endpoints));
        self.push(TYPE_ENDPOINTS, vec![cla])
    }

    fn push_route(&mut self) -> Result<(), SutError> {
        let fixture = self.ctx()?.probe_fixture;
        let rc = resources::routes(self.s.route, self.s.route_set.as_ref(), fixture);
        self.push(TYPE_ROUTE, vec![any(&rc)])
    }

    /// After Envoy refused a route configuration with a new route set: the set before
    /// is in force again, in the driver and on the control plane (what Envoy would be
    /// sent again if it reconnected), as Envoy itself kept it.
    fn undo_route_set(&mut self) {
        if let Some(before) = self.set_before.take() {
            self.s.route_set = before;
            let _ = self.push_route();
        }
    }

    /// Every type, clusters and endpoints before the listeners that use them (ADS
    /// keeps the order on its one stream).
    fn push_everything(&mut self) -> Result<(), SutError> {
        let ctx = self.ctx()?.clone();
        let clusters = resources::clusters(&ctx, Source::Ads, &self.s.endpoints);
        self.push(TYPE_CLUSTER, clusters.iter().map(any).collect())?;
        self.push_endpoints()?;
        self.push_secret()?;
        let listeners = resources::listeners(&ctx, Source::Ads, self.s.route);
        self.push(TYPE_LISTENER, listeners.iter().map(any).collect())?;
        self.push_route()
    }

    /// The serving certificate over SDS, before the listeners that name it.
    fn push_secret(&mut self) -> Result<(), SutError> {
        let ctx = self.ctx()?;
        let secret = resources::certificate_secret(&ctx.cert, &ctx.key)
            .map_err(SutError::io("reading the certificate for SDS"))?;
        self.push(TYPE_SECRET, vec![any(&secret)])
    }

    /// A control plane on the scratch folder's socket, holding nothing yet.
    fn start_server(&mut self) -> Result<(), SutError> {
        let socket = self.ctx()?.work_dir.join("xds.sock");
        let _ = std::fs::remove_file(&socket);
        self.server = Some(Server::start(&socket).map_err(|e| SutError::Part(Box::new(e)))?);
        Ok(())
    }

    fn began(&mut self, what: &'static str) {
        self.pushed_at = Some(Instant::now());
        self.last = Some(ChangeTiming { what, acked: None });
    }

    fn spawn(&mut self) -> Result<(), SutError> {
        let ctx = self.ctx()?.clone();
        let socket = self.server()?.socket().to_path_buf();
        let bootstrap = resources::xds_bootstrap(self.s.admin.port, &socket);
        let path = write_bootstrap(&ctx, "envoy-xds.pb", &bootstrap)?;
        let binary = self.s.binary(self.name())?;
        let mut cmd = command(&binary, &ctx, &path);
        // One Envoy per run, no hot restart: no shared memory, no domain sockets.
        cmd.arg("--disable-hot-restart");
        let log = ctx.out_dir.join("envoy.log");
        let guard = Guard::spawn_on("envoy", &mut cmd, &log, &ctx.cpus)
            .map_err(SutError::io("starting envoy"))?;
        self.guard = Some(guard);
        Ok(())
    }

    /// Versions still unacknowledged, for messages.
    fn unacked(&self) -> Vec<String> {
        let Some(s) = self.server.as_ref() else {
            return Vec::new();
        };
        self.pending
            .iter()
            .filter(|(t, v)| s.acked(t) < *v)
            .map(|(t, v)| format!("{} v{v}", xds::short_name(t)))
            .collect()
    }
}

fn nack(e: XdsError) -> SutError {
    match e {
        XdsError::Nacked { .. } => SutError::Rejected {
            what: "an xDS update".into(),
            detail: e.to_string(),
        },
        XdsError::NotAcked { .. } => SutError::NotReady(format!("envoy ({e})")),
        other => SutError::Part(Box::new(other)),
    }
}

impl Driver for EnvoyXds {
    fn process_groups(&self) -> Vec<u32> {
        self.pid().into_iter().collect()
    }

    fn handshakes(&mut self) -> Option<crate::driver::Handshakes> {
        self.s.handshakes()
    }

    fn name(&self) -> &'static str {
        "envoy-xds"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            restart_controller: true,
            ..Capabilities::LOCAL_PROXY
        }
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), SutError> {
        self.s.prepare(ctx, endpoints)?;
        self.pending.clear();
        self.last = None;
        self.set_before = None;
        Ok(())
    }

    fn start(&mut self) -> Result<(), SutError> {
        if self.running() {
            return Err(SutError::AlreadyRunning("envoy".into()));
        }
        if self.server.is_none() {
            self.start_server()?;
        }
        // A new Envoy starts from nothing: its ACKs are what counts from now on.
        self.server()?.forget_verdicts();
        self.push_everything()?;
        self.spawn()
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SutError> {
        let deadline = Instant::now() + timeout;
        let ctx = self.ctx()?.clone();
        let log = ctx.out_dir.join("envoy.log");
        let mut attempts = 1;
        loop {
            if !self.running() {
                let why = last_error(&log);
                if why.contains("Address already in use")
                    && attempts < START_ATTEMPTS
                    && Instant::now() < deadline
                {
                    attempts += 1;
                    self.s.admin.port = crate::ports::free_port()
                        .map_err(SutError::io("choosing the envoy admin port"))?;
                    self.spawn()?;
                    continue;
                }
                return Err(SutError::ExitedAtStart {
                    process: "envoy".into(),
                    why: Some(why),
                });
            }
            if self.unacked().is_empty() && self.s.admin.ready() && listeners_up(&ctx) {
                self.pending.clear();
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!(
                    "envoy (not acknowledged: {})",
                    self.unacked().join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), SutError> {
        self.s.endpoints = endpoints.to_vec();
        if self.server.is_none() {
            return Ok(()); // Not started: the first push carries them.
        }
        self.began("endpoints");
        self.push_endpoints()
    }

    fn apply_route(&mut self, route: Route) -> Result<(), SutError> {
        self.s.route = route;
        if self.server.is_none() {
            return Ok(());
        }
        self.began("routes");
        self.push_route()
    }

    /// The route set goes into the route configuration both listeners share, pushed
    /// as one RDS update as Envoy Gateway or Contour push a changed HTTPRoute; Envoy
    /// takes it without a restart. The size is the pushed RouteConfiguration's
    /// (protobuf, encoded). Settled by Envoy's ACK of the version; a NACK leaves the
    /// set before in force (`settle()` reports it).
    fn apply_route_set(&mut self, set: &RouteSet) -> Result<Option<u64>, SutError> {
        let fixture = self.ctx()?.probe_fixture;
        let rc = resources::routes(self.s.route, Some(set), fixture);
        let bytes = rc.encoded_len() as u64;
        let before = self.s.route_set.replace(*set);
        if self.server.is_none() {
            return Ok(Some(bytes)); // Not started: the first push carries it.
        }
        self.began("routes");
        if let Err(e) = self.push(TYPE_ROUTE, vec![any(&rc)]) {
            self.s.route_set = before;
            return Err(e);
        }
        // The earliest set not yet acknowledged is the one to go back to.
        if self.set_before.is_none() {
            self.set_before = Some(before);
        }
        Ok(Some(bytes))
    }

    fn reload(&mut self) -> Result<(), SutError> {
        if !self.running() {
            return Err(SutError::NotRunning("envoy".into()));
        }
        self.began("everything");
        self.push_everything()
    }

    /// A cold restart: Envoy is stopped and a new one started, which gets its whole
    /// configuration over ADS again, as when an xDS controller's Envoy pod is
    /// replaced. The listening sockets close in between.
    fn restart_kind(&self) -> sut::RestartKind {
        sut::RestartKind {
            how: "cold restart, configuration over ADS again",
            seamless: false,
        }
    }

    fn restart_proxy(&mut self, _replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        if let Some(mut guard) = self.guard.take() {
            guard.stop(rustix::process::Signal::TERM, Duration::from_secs(2));
        }
        self.pending.clear();
        self.start()?;
        self.wait_ready(Duration::from_secs(15))
    }

    /// The ADS server stops (Envoy's stream breaks) and a new one starts on the same
    /// socket with what the driver holds, as a restarted controller rebuilds its
    /// state from the API: Envoy keeps serving its last configuration meanwhile,
    /// reconnects after its own back-off and is sent everything again. Returns once
    /// the new server listens; a change asked for next waits for Envoy's ACK, so its
    /// time includes the resync.
    fn restart_controller(&mut self, _replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        if !self.running() {
            return Err(SutError::NotRunning("envoy".into()));
        }
        if let Some(mut s) = self.server.take() {
            s.stop();
        }
        self.start_server()?;
        self.began("everything");
        self.push_everything()
    }

    /// The new certificate goes to Envoy as a new version of its SDS secret over
    /// ADS, as Contour and Envoy Gateway send a changed TLS Secret: no listener
    /// changes, open connections stay. Settled by Envoy's ACK.
    fn rotate_certificate(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        sut::driver::rotate_with(
            self,
            |d| d.s.ctx.as_mut(),
            (cert, key),
            |d| {
                if d.server.is_none() {
                    return Ok(()); // Not started: the first push carries it.
                }
                d.began("secret");
                d.push_secret()
            },
        )
    }

    /// Waits for Envoy's ACK of every version pushed since the last settle. The driver
    /// pushed them itself, so `_expect` adds nothing to wait for.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), SutError> {
        let deadline = Instant::now() + timeout;
        let pending = std::mem::take(&mut self.pending);
        for (type_url, version) in &pending {
            if !self.running() {
                return Err(SutError::NotRunning("envoy".into()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(e) = self.server()?.wait_ack(type_url, *version, left) {
                if *type_url == TYPE_ROUTE && matches!(e, XdsError::Nacked { .. }) {
                    self.undo_route_set();
                }
                return Err(nack(e));
            }
        }
        self.set_before = None;
        if let (Some(at), Some(last)) = (self.pushed_at.take(), self.last.as_mut()) {
            last.acked = Some(at.elapsed());
        }
        Ok(())
    }

    fn alive(&mut self) -> bool {
        self.running()
    }

    fn stop(&mut self) -> Result<(), SutError> {
        if let Some(mut guard) = self.guard.take() {
            if guard.alive() {
                if let Ok(ctx) = self.ctx() {
                    self.s.admin.save_config_dump(&ctx.out_dir);
                }
            }
            // Envoy exits promptly on SIGTERM; what is left is killed.
            guard.stop(rustix::process::Signal::TERM, Duration::from_secs(2));
        }
        // The control plane stops with the proxy, as a controller's pod would not, but
        // a run has nothing else for it to serve.
        if let Some(mut s) = self.server.take() {
            s.stop();
        }
        self.pending.clear();
        self.set_before = None;
        Ok(())
    }

    fn versions(&self) -> Vec<(String, String)> {
        self.s.versions()
    }
}
