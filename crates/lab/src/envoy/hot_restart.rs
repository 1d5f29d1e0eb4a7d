//! The `envoy-hot-restart` system under test: every change is a new Envoy process with
//! a new static configuration, started through Envoy's hot restart, the way a
//! restart-based control plane drives Envoy (its docs' `hot-restarter.py` pattern).
//!
//! Epoch `n + 1` is started with `--restart-epoch n+1` and the same `--base-id`; it
//! takes the listening sockets and the stats from epoch `n` over Unix sockets in the
//! scratch folder, and once it is initialised epoch `n` drains
//! ([`DRAIN_TIME_S`]: HTTP/1 responses ask clients to close their connections) and
//! exits after [`PARENT_SHUTDOWN_TIME_S`]. Envoy keeps at most two epochs: starting
//! `n + 2` terminates `n` at once, whatever it still serves — the cost of frequent
//! changes on this path, which the lab measures.
//!
//! Hot restart shares memory between epochs through `/dev/shm/envoy_shared_memory_*`,
//! which Envoy never removes: the driver removes it when it stops, and registers it
//! with the watchdog so a killed run does not leave it behind. The base id is chosen
//! by Envoy (`--use-dynamic-base-id`), so several Envoys on one machine never share it.

use super::resources;
use super::{command, last_error, write_bootstrap, Setup};
use crate::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, Route, SutError};
use crate::proc::Guard;
use crate::watchdog;
use crate::RouteSet;
use prost::Message;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long an old epoch drains before it counts as drained (Envoy's default is
/// 600 s). The drain is `immediate`: from the moment the new epoch serves, every
/// response of the old one carries `Connection: close`, so each connection moves to
/// the new epoch at its next request. Envoy 1.40's default `gradual` drain closes
/// nothing in its first second (measured: 0 of 9,160 responses, then about 35 % in
/// the next second), so a change made less than a second after another was seen in
/// traffic only when the epoch before last happened to be killed, and a route change
/// could stay invisible for its whole window.
pub const DRAIN_TIME_S: u32 = 5;
/// When an old epoch exits, whatever it still serves (Envoy's default is 900 s). Like
/// nginx's `worker_shutdown_timeout` in the `nginx-reload` profile.
pub const PARENT_SHUTDOWN_TIME_S: u32 = 10;

/// How long the last change took, for the driver tests' notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeTiming {
    /// The epoch started for it.
    pub epoch: u64,
    /// From starting the process to its admin interface reporting it LIVE in that
    /// epoch; `None` until `settle()` saw it.
    pub live: Option<Duration>,
}

/// The `envoy-hot-restart` driver.
#[derive(Debug, Default)]
pub struct EnvoyHotRestart {
    s: Setup,
    /// The newest epoch, and its process.
    epoch: u64,
    current: Option<Guard>,
    /// Older epochs still draining.
    draining: Vec<Guard>,
    /// The base id epoch 0 chose, and the shared memory it made.
    base_id: Option<u64>,
    shared_memory: Option<PathBuf>,
    /// An epoch started that `settle()` has yet to see LIVE: (epoch, started at).
    pending: Option<(u64, Instant)>,
    last: Option<ChangeTiming>,
}

impl EnvoyHotRestart {
    /// A driver; nothing happens until `prepare()`.
    pub fn new() -> Self {
        EnvoyHotRestart::default()
    }

    /// The pid of the newest epoch's process.
    pub fn pid(&self) -> Option<u32> {
        self.current.as_ref().and_then(Guard::pid)
    }

    /// The newest epoch (0 for the first process).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Processes of older epochs still running (draining).
    pub fn draining(&mut self) -> usize {
        self.draining.retain_mut(Guard::alive);
        self.draining.len()
    }

    /// The shared-memory file of this Envoy's hot restart, once epoch 0 runs.
    pub fn shared_memory(&self) -> Option<&std::path::Path> {
        self.shared_memory.as_deref()
    }

    /// The last change's epoch and, once settled, how long it took to go LIVE.
    pub fn last_change(&self) -> Option<&ChangeTiming> {
        self.last.as_ref()
    }

    fn ctx(&self) -> Result<&DriverContext, SutError> {
        self.s.ctx(self.name())
    }

    fn running(&mut self) -> bool {
        self.current.as_mut().is_some_and(Guard::alive)
    }

    /// The static configuration in force.
    fn bootstrap(
        &self,
    ) -> Result<envoy_types::pb::envoy::config::bootstrap::v3::Bootstrap, SutError> {
        Ok(resources::static_bootstrap(
            self.ctx()?,
            self.s.admin.port,
            &self.s.endpoints,
            self.s.route,
            self.s.route_set.as_ref(),
        ))
    }

    /// Starts the process of `self.epoch` with the configuration in force.
    fn spawn(&mut self) -> Result<(), SutError> {
        let ctx = self.ctx()?.clone();
        let bootstrap = self.bootstrap()?;
        let path = write_bootstrap(&ctx, &format!("envoy-{}.pb", self.epoch), &bootstrap)?;
        let binary = self.s.binary(self.name())?;
        let mut cmd = command(&binary, &ctx, &path);
        cmd.arg("--restart-epoch")
            .arg(self.epoch.to_string())
            // The epochs find each other through Unix sockets named after this path,
            // in the scratch folder rather than the abstract namespace.
            .arg("--socket-path")
            .arg(ctx.work_dir.join("hot-restart"))
            .arg("--drain-time-s")
            .arg(DRAIN_TIME_S.to_string())
            .arg("--drain-strategy")
            .arg("immediate")
            .arg("--parent-shutdown-time-s")
            .arg(PARENT_SHUTDOWN_TIME_S.to_string());
        match self.base_id {
            Some(id) => {
                cmd.arg("--base-id").arg(id.to_string());
            }
            None => {
                cmd.arg("--use-dynamic-base-id")
                    .arg("--base-id-path")
                    .arg(ctx.work_dir.join("base-id"));
            }
        }
        let log = ctx.out_dir.join("envoy.log");
        let guard = Guard::spawn_on("envoy", &mut cmd, &log, &ctx.cpus)
            .map_err(SutError::io("starting envoy"))?;
        if let Some(old) = self.current.replace(guard) {
            self.draining.push(old);
        }
        self.draining.retain_mut(Guard::alive);
        self.pending = Some((self.epoch, Instant::now()));
        Ok(())
    }

    /// Reads the base id epoch 0 chose and registers its shared memory for removal.
    fn learn_base_id(&mut self) -> Result<(), SutError> {
        if self.base_id.is_some() {
            return Ok(());
        }
        let file = self.ctx()?.work_dir.join("base-id");
        let Some(id) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        else {
            return Ok(()); // Not written yet.
        };
        self.base_id = Some(id);
        // Envoy names the region after the base id times ten (its epoch-0 slot).
        let shm = PathBuf::from(format!("/dev/shm/envoy_shared_memory_{}", id * 10));
        watchdog::watch_path(&shm);
        self.shared_memory = Some(shm);
        Ok(())
    }

    /// A new epoch with the configuration in force: every change is one.
    fn restart(&mut self) -> Result<(), SutError> {
        if !self.running() {
            return Ok(()); // Not started: the next start uses the new configuration.
        }
        // One epoch at a time: the previous one must be serving before the next
        // starts, as Envoy's hot restart requires.
        if self.pending.is_some() {
            self.settle(&Expect::Applied, Duration::from_secs(10))?;
        }
        self.epoch += 1;
        self.spawn()
    }

    fn stop_all(&mut self) {
        if let Some(mut g) = self.current.take() {
            g.stop(rustix::process::Signal::TERM, Duration::from_secs(2));
        }
        for mut g in self.draining.drain(..) {
            g.stop(rustix::process::Signal::KILL, Duration::ZERO);
        }
        if let Some(shm) = self.shared_memory.take() {
            let _ = std::fs::remove_file(&shm);
            watchdog::unwatch_path(&shm);
        }
        self.base_id = None;
        self.pending = None;
    }
}

impl Driver for EnvoyHotRestart {
    fn handshakes(&mut self) -> Option<crate::driver::Handshakes> {
        self.s.handshakes()
    }
    /// Every epoch still running: the newest and those draining.
    fn process_groups(&self) -> Vec<u32> {
        self.current
            .iter()
            .chain(&self.draining)
            .filter_map(Guard::pid)
            .collect()
    }

    fn name(&self) -> &'static str {
        "envoy-hot-restart"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), SutError> {
        self.s.prepare(ctx, endpoints)?;
        self.last = None;
        Ok(())
    }

    fn start(&mut self) -> Result<(), SutError> {
        if self.running() {
            return Err(SutError::AlreadyRunning("envoy".into()));
        }
        self.stop_all();
        self.epoch = 0;
        // Epoch 0 writes the base id it chose here; an older file must not be read.
        let _ = std::fs::remove_file(self.ctx()?.work_dir.join("base-id"));
        self.spawn()
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SutError> {
        self.settle(&Expect::Applied, timeout)
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), SutError> {
        self.s.endpoints = endpoints.to_vec();
        self.restart()
    }

    fn apply_route(&mut self, route: Route) -> Result<(), SutError> {
        self.s.route = route;
        self.restart()
    }

    /// The route set goes into both listeners' routes in a new static configuration,
    /// and a hot restart starts the epoch that serves it, as every change on this
    /// path. The size is the bootstrap's, as written for Envoy (binary protobuf).
    /// Settled when the new epoch is LIVE.
    fn apply_route_set(&mut self, set: &RouteSet) -> Result<Option<u64>, SutError> {
        let before = self.s.route_set.replace(*set);
        let bytes = match self.bootstrap() {
            Ok(b) => b.encoded_len() as u64,
            Err(e) => {
                self.s.route_set = before;
                return Err(e);
            }
        };
        if let Err(e) = self.restart() {
            self.s.route_set = before;
            return Err(e);
        }
        Ok(Some(bytes))
    }

    fn reload(&mut self) -> Result<(), SutError> {
        if !self.running() {
            return Err(SutError::NotRunning("envoy".into()));
        }
        self.restart()
    }

    /// A hot restart with the configuration in force: the new epoch takes the
    /// listening sockets over and the old one drains, as Envoy's own
    /// `hot-restarter.py` restarts it.
    fn restart_kind(&self) -> sut::RestartKind {
        sut::RestartKind {
            how: "hot restart",
            seamless: true,
        }
    }

    fn restart_proxy(&mut self, _replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        if !self.running() {
            return Err(SutError::NotRunning("envoy".into()));
        }
        self.restart()?;
        self.settle(&Expect::Applied, Duration::from_secs(15))
    }

    /// A new static configuration naming the new files, through a hot restart: a
    /// restart-based control plane has no other way to change Envoy.
    fn rotate_certificate(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        sut::driver::rotate_with(self, |d| d.s.ctx.as_mut(), (cert, key), Self::restart)
    }

    /// Waits until the newest epoch answers the admin port as LIVE (the old one has
    /// handed over its listeners and drains). The driver made the change itself, so
    /// `_expect` adds nothing to wait for.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), SutError> {
        let Some((epoch, started)) = self.pending else {
            return Ok(());
        };
        let deadline = Instant::now() + timeout;
        let log = self.ctx()?.out_dir.join("envoy.log");
        loop {
            if !self.running() {
                self.pending = None;
                return Err(SutError::ExitedAtStart {
                    process: format!("envoy epoch {epoch}"),
                    why: Some(last_error(&log)),
                });
            }
            self.learn_base_id()?;
            let live = self
                .s
                .admin
                .server_info()
                .is_some_and(|i| i.restart_epoch == epoch && i.state == "LIVE");
            if live && super::listeners_up(self.ctx()?) {
                self.pending = None;
                self.last = Some(ChangeTiming {
                    epoch,
                    live: Some(started.elapsed()),
                });
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!("envoy epoch {epoch}")));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn alive(&mut self) -> bool {
        self.running()
    }

    fn stop(&mut self) -> Result<(), SutError> {
        if self.running() {
            if let Ok(ctx) = self.ctx() {
                self.s.admin.save_config_dump(&ctx.out_dir.clone());
            }
        }
        self.stop_all();
        Ok(())
    }

    fn versions(&self) -> Vec<(String, String)> {
        self.s.versions()
    }
}

impl Drop for EnvoyHotRestart {
    fn drop(&mut self) {
        self.stop_all();
    }
}
