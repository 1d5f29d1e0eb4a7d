//! HAProxy as a system under test, in the two ways Kubernetes ingress controllers
//! drive it.
//!
//! `haproxy-reload` stands for the OpenShift Router: every endpoint or route change
//! rewrites `haproxy.cfg`, checks it with `haproxy -c` and asks the master (master-worker
//! mode, `-W`) for a seamless reload; the listening sockets pass to the new worker
//! through the stats socket's `expose-fd listeners`. `haproxy-runtime` stands for the
//! HAProxy Kubernetes ingress controller: the backend is a fixed set of
//! `server-template` slots that the runtime API points at endpoints (`set server ...
//! addr`, `state ready|maint`) without a reload; only route changes reload, with the
//! slots saved to a `server-state-file` first so they survive.
//!
//! A route set ([`sut::routes`]) is rendered in both modes as the HAProxy ingress
//! controller renders many routes: frontend rules that look host and path up in a
//! map file (`routes.map`, beside `haproxy.cfg` in the results folder) and name the
//! route in a response header, every route on the one shared backend; applying one
//! rewrites the files and reloads (see [`Haproxy::apply_route_set`]), except that
//! `haproxy-runtime` adds routes to (and removes them from) a running set on the
//! same hosts through the runtime API's `add map` / `del map`, without a reload.
//!
//! This module owns the driver: its state and the order of the steps. The generated
//! configuration is rendered in `config.rs`, the haproxy process (a direct foreground
//! child, so its exit is seen at once) is started, checked and reloaded in
//! `process.rs`, and the conversations on its two unix sockets are in `runtime.rs`.
//! The recipes and their gotchas were verified by hand first (`/work/notes/lab.md`,
//! sections 5 and 6).

mod config;
mod process;
mod runtime;

use self::config::{max_reuse, render, route_files, workable_maxconn, Settings};
use self::process::{http_answers, log_tail, parse_version, tcp_accepts};
use self::runtime::assign_slots;
use super::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, Route, SutError};
use super::proc::{self, Guard};
use rustix::process::Signal;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// How endpoint changes reach HAProxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rewrite and seamless reload (master-worker), like the OpenShift Router.
    Reload,
    /// Runtime API on server-template slots, like the HAProxy ingress controller.
    Runtime,
}

/// Server-template slots in runtime mode: the most endpoints it can carry at once.
const SLOTS: usize = 32;
/// How long a request waits for an earlier, unsettled reload before starting its own.
const PENDING_WAIT: Duration = Duration::from_secs(10);
/// Unix socket paths are limited to 108 bytes; haproxy binds `<path>.<pid>.tmp` first.
const MAX_SOCKET_PATH: usize = 90;

/// The haproxy system under test. Dropping it kills whatever it started.
pub struct Haproxy {
    mode: Mode,
    run: Option<Run>,
    guard: Option<Guard>,
    route: Route,
    /// The route set beside `route` ([`sut::routes`]), if one was applied.
    route_set: Option<sut::RouteSet>,
    /// The endpoints traffic should go to (reload mode: those in the config).
    endpoints: Vec<Endpoint>,
    /// Runtime mode: which endpoint each slot should carry (`s1` is index 0).
    slots: Vec<Option<Endpoint>>,
    /// Runtime mode: what the running process was last told per slot (`None` = maint).
    applied: Vec<Option<SocketAddr>>,
    /// A reload asked for and not yet confirmed.
    pending: Option<PendingReload>,
    /// Runtime mode: the worker the admin socket must answer from after a reload.
    worker: Option<u32>,
    /// Masters replaced by a restart, finishing their connections (`-sf`): reaped
    /// once they exit, killed with the driver's stop.
    retiring: Vec<Guard>,
    /// What went wrong without failing the change (`Driver::take_warnings`).
    warnings: Vec<SutError>,
}

/// What `prepare` learned: where things live and the binary to run.
struct Run {
    ctx: DriverContext,
    binary: PathBuf,
    maxconn: u32,
}

impl Run {
    fn master_sock(&self) -> PathBuf {
        self.ctx.work_dir.join("master.sock")
    }

    fn admin_sock(&self) -> PathBuf {
        self.ctx.work_dir.join("admin.sock")
    }

    fn pem(&self) -> PathBuf {
        self.ctx.work_dir.join("combined.pem")
    }

    fn state_file(&self) -> PathBuf {
        self.ctx.work_dir.join("server-state")
    }

    fn cfg(&self) -> PathBuf {
        self.ctx.out_dir.join("haproxy.cfg")
    }

    fn log(&self) -> PathBuf {
        self.ctx.out_dir.join("haproxy.log")
    }
}

/// The master's state when a reload was asked for, to recognise its outcome.
#[derive(Debug)]
struct PendingReload {
    reloads_before: u32,
    failed_before: u32,
    old_workers: Vec<u32>,
}

impl Haproxy {
    /// A driver in the given mode.
    pub fn new(mode: Mode) -> Self {
        Haproxy {
            mode,
            run: None,
            guard: None,
            retiring: Vec::new(),
            warnings: Vec::new(),
            route: Route::Base,
            route_set: None,
            endpoints: Vec::new(),
            slots: vec![None; SLOTS],
            applied: vec![None; SLOTS],
            pending: None,
            worker: None,
        }
    }

    fn run(&self) -> Result<&Run, SutError> {
        self.run
            .as_ref()
            .ok_or_else(|| SutError::NotPrepared(self.name().into()))
    }

    /// Whether a process was started; an error if it was and has died since.
    fn running(&mut self) -> Result<bool, SutError> {
        match self.guard.as_mut().map(Guard::alive) {
            None => Ok(false),
            Some(true) => Ok(true),
            Some(false) => Err(SutError::NotRunning(self.name().to_string())),
        }
    }

    fn render_current(&self, run: &Run, route: Route, endpoints: &[Endpoint]) -> String {
        render(&Settings {
            mode: self.mode,
            work_dir: &run.ctx.work_dir,
            https_port: run.ctx.https_port,
            http_port: run.ctx.http_port,
            maxconn: run.maxconn,
            pool_max_conn: run.ctx.upstream_keepalive,
            max_reuse: max_reuse(run.ctx.upstream_keepalive_requests),
            threads: run.ctx.workers(),
            route,
            endpoints,
            passive: run.ctx.passive_health.as_ref(),
            route_set: self.route_set.as_ref(),
            out_dir: &run.ctx.out_dir,
            http2: run.ctx.http2,
            grpc: run.ctx.upstream_h2c,
            fixture: run.ctx.probe_fixture,
        })
    }

    /// The route set's files (map and host list) for the configuration in force,
    /// with their paths in the results folder.
    fn route_files_current(&self, run: &Run) -> Vec<(PathBuf, String)> {
        route_files(self.route_set.as_ref())
            .into_iter()
            .map(|(name, text)| (run.ctx.out_dir.join(name), text))
            .collect()
    }

    /// Rewrites the configuration and, when haproxy runs, reloads it.
    fn change_config(&mut self, route: Route, endpoints: &[Endpoint]) -> Result<(), SutError> {
        let running = self.running()?;
        if running && self.pending.is_some() {
            // One reload at a time: the previous one must be in place (and, in
            // runtime mode, its slots right) before its state is saved again.
            self.settle(&Expect::Reloaded, PENDING_WAIT)?;
        }
        if running && self.mode == Mode::Runtime {
            self.save_server_state()?;
        }
        let run = self.run()?;
        let text = self.render_current(run, route, endpoints);
        let files = self.route_files_current(run);
        self.write_checked(&text, &files)?;
        if running {
            self.request_reload()?;
        }
        Ok(())
    }
}

/// Whether `new` differs from the running `old` only by routes added or removed
/// on the same hosts, which the runtime API can change in the loaded map: the host
/// list (an ACL file) stays as it is.
fn runtime_can_change(old: &sut::RouteSet, new: &sut::RouteSet) -> bool {
    old.count > 0
        && new.count > 0
        && old.hosts == new.hosts
        && (old.count != new.count) != (old.revised != new.revised)
}

/// Runtime commands sent on one connection of the admin socket, `;`-separated.
const RUNTIME_BATCH: usize = 200;

impl Haproxy {
    /// Adds the routes `new` has beyond `old` to the running worker's map (`add map`),
    /// or removes those it lacks (`del map`), in batches on the admin socket, and
    /// puts the map file as `new` has it in place, so that a later reload keeps them.
    /// A command haproxy refuses stops there with its reply: the commands before it
    /// are in force until the next reload, which renders `old` (the driver and the
    /// file keep it).
    fn change_routes_at_runtime(
        &mut self,
        old: sut::RouteSet,
        new: sut::RouteSet,
    ) -> Result<u64, SutError> {
        let run = self.run()?;
        let map = run.ctx.out_dir.join(config::ROUTES_MAP);
        let map_text = map.display().to_string();
        let commands: Vec<String> = if new.count == old.count {
            // One route changed in place (or back): its entry set anew.
            [old.revised, new.revised]
                .into_iter()
                .flatten()
                .filter(|&i| i < new.count)
                .map(|i| {
                    format!(
                        "set map {map_text} {}{} {}",
                        new.host(i),
                        new.path(i),
                        new.marker(i)
                    )
                })
                .collect()
        } else if new.count > old.count {
            (old.count..new.count)
                .map(|i| {
                    format!(
                        "add map {map_text} {}{} {}",
                        new.host(i),
                        new.path(i),
                        new.marker(i)
                    )
                })
                .collect()
        } else {
            (new.count..old.count)
                .map(|i| format!("del map {map_text} {}{}", old.host(i), old.path(i)))
                .collect()
        };
        // The map file as `new` has it, written beside first: a map that cannot be
        // written changes nothing, in haproxy or on disk.
        let (_, text) = route_files(Some(&new))
            .into_iter()
            .find(|(name, _)| *name == config::ROUTES_MAP)
            .ok_or_else(|| SutError::NotReady("a route set without a map".into()))?;
        let beside = map.with_extension("map.new");
        std::fs::write(&beside, text)
            .map_err(SutError::io(format!("writing {}", beside.display())))?;
        let mut bytes = 0;
        for batch in commands.chunks(RUNTIME_BATCH) {
            let line = batch.join(";");
            bytes += line.len() as u64 + 1;
            if let Err(e) = self.runtime_command(&line) {
                let _ = std::fs::remove_file(&beside);
                return Err(e);
            }
        }
        std::fs::rename(&beside, &map)
            .map_err(SutError::io(format!("writing {}", map.display())))?;
        self.route_set = Some(new);
        Ok(bytes)
    }
}

impl Haproxy {
    /// Waits until the admin socket answers from a worker other than `old_worker`:
    /// the new master's, which has bound it.
    fn wait_handover(&mut self, old_worker: Option<u32>) -> Result<(), SutError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if !self.running()? {
                return Err(SutError::ExitedAtStart {
                    process: format!("{}'s new process", self.name()),
                    why: Some(log_tail(&self.run()?.log())),
                });
            }
            if self.admin_pid().is_some_and(|p| Some(p) != old_worker) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!("{} restart", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Gives the proxy the certificate files `run.ctx` names (see
    /// `rotate_certificate`).
    fn install_certificate(&mut self) -> Result<(), SutError> {
        let run = self.run()?;
        match self.mode {
            Mode::Reload => {
                write_pem(run)?;
                self.reload()
            }
            Mode::Runtime => {
                let pem_path = run.pem();
                let admin = run.admin_sock();
                let pem = String::from_utf8(combined_pem(&run.ctx)?)
                    .map_err(SutError::render("haproxy: the certificate as PEM text"))?;
                let set = format!(
                    "set ssl cert {} <<\n{}\n\n",
                    pem_path.display(),
                    pem.trim_end()
                );
                let said = runtime::cli_payload(&admin, &set)
                    .map_err(SutError::io("haproxy runtime API: set ssl cert"))?;
                if !said.contains("Transaction created") && !said.contains("Transaction updated") {
                    return Err(SutError::Rejected {
                        what: "haproxy set ssl cert".into(),
                        detail: said.trim().to_string(),
                    });
                }
                let said = runtime::cli(&admin, &format!("commit ssl cert {}", pem_path.display()))
                    .map_err(SutError::io("haproxy runtime API: commit ssl cert"))?;
                if !said.contains("Success") {
                    return Err(SutError::Rejected {
                        what: "haproxy commit ssl cert".into(),
                        detail: said.trim().to_string(),
                    });
                }
                // For a later reload or restart; the running process has it already.
                if let Err(e) = write_pem(self.run()?) {
                    self.warnings.push(e);
                }
                Ok(())
            }
        }
    }
}

impl Driver for Haproxy {
    fn handshakes(&mut self) -> Option<crate::driver::Handshakes> {
        let admin = self.run().ok()?.admin_sock();
        runtime::parse_ssl_stat(&runtime::cli(&admin, "show stat").ok()?)
    }

    fn process_groups(&self) -> Vec<u32> {
        self.guard
            .iter()
            .chain(self.retiring.iter())
            .filter_map(Guard::pid)
            .collect()
    }

    fn name(&self) -> &'static str {
        match self.mode {
            Mode::Reload => "haproxy-reload",
            Mode::Runtime => "haproxy-runtime",
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), SutError> {
        let binary = proc::which("haproxy").ok_or(SutError::MissingBinary {
            binary: "haproxy".into(),
            package: "haproxy".into(),
        })?;
        validate_endpoints(self.mode, endpoints)?;
        for dir in [&ctx.work_dir, &ctx.out_dir] {
            std::fs::create_dir_all(dir)
                .map_err(SutError::io(format!("creating {}", dir.display())))?;
        }
        let longest = ctx.work_dir.join("master.sock").as_os_str().len();
        if longest > MAX_SOCKET_PATH {
            return Err(SutError::Unsupported {
                system: "haproxy".into(),
                what: format!(
                    "use the work folder {}: it is too long for a unix socket path",
                    ctx.work_dir.display()
                ),
            });
        }
        let run = Run {
            ctx: ctx.clone(),
            binary,
            maxconn: workable_maxconn(ctx.worker_connections),
        };
        write_pem(&run)?;
        self.run = Some(run);
        self.route = Route::Base;
        self.route_set = None;
        self.endpoints = endpoints.to_vec();
        self.slots = assign_slots(&vec![None; SLOTS], endpoints);
        self.applied = vec![None; SLOTS];
        let text = self.render_current(self.run()?, Route::Base, endpoints);
        self.write_checked(&text, &[])
    }

    fn start(&mut self) -> Result<(), SutError> {
        if self.alive() {
            return Ok(());
        }
        // A process that died is reaped here and started again.
        self.guard = None;
        self.spawn()
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SutError> {
        let deadline = Instant::now() + timeout;
        let (http, https) = {
            let run = self.run()?;
            (run.ctx.http_port, run.ctx.https_port)
        };
        let mut slots_ready = self.mode == Mode::Reload;
        loop {
            if self.guard.is_none() {
                return Err(SutError::NotRunning(self.name().to_string()));
            }
            if !self.running().unwrap_or(false) {
                return Err(SutError::ExitedAtStart {
                    process: self.name().into(),
                    why: Some(log_tail(&self.run()?.log())),
                });
            }
            if !slots_ready {
                slots_ready = self.sync_slots()?;
            }
            if slots_ready && http_answers(http) && tcp_accepts(https) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(self.name().to_string()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), SutError> {
        validate_endpoints(self.mode, endpoints)?;
        match self.mode {
            Mode::Reload => {
                self.change_config(self.route, endpoints)?;
            }
            Mode::Runtime => {
                self.slots = assign_slots(&self.slots, endpoints);
                // While a reload is under way the admin socket may still belong to the
                // old worker: settle pushes the slots once the new one answers.
                if self.running()? && self.pending.is_none() {
                    self.push_slots()?;
                }
            }
        }
        self.endpoints = endpoints.to_vec();
        Ok(())
    }

    fn apply_route(&mut self, route: Route) -> Result<(), SutError> {
        let endpoints = self.endpoints.clone();
        self.change_config(route, &endpoints)?;
        self.route = route;
        Ok(())
    }

    /// A route set goes into the frontend's rules and their map file, and haproxy
    /// reloads (seamlessly, as for any route change): the new worker serves the new
    /// routes. `haproxy-runtime`, as the HAProxy ingress controller does, changes a
    /// running set without a reload when it can: routes added to or removed from a
    /// set on the same hosts are `add map` / `del map` commands on the loaded map
    /// (the map file is rewritten too, for the next reload); a new host list, a
    /// first set, a set of none or a reload under way reload as before. Returns the
    /// bytes given to haproxy: `haproxy.cfg` plus the map and the host list after a
    /// reload, the commands' bytes after a runtime change. A set haproxy refuses
    /// leaves the previous one in force, files included.
    fn apply_route_set(&mut self, set: &sut::RouteSet) -> Result<Option<u64>, SutError> {
        if let Some(old) = self.route_set {
            if self.mode == Mode::Runtime
                && runtime_can_change(&old, set)
                && self.pending.is_none()
                && self.running()?
            {
                return self.change_routes_at_runtime(old, *set).map(Some);
            }
        }
        let before = self.route_set.replace(*set);
        let endpoints = self.endpoints.clone();
        if let Err(e) = self.change_config(self.route, &endpoints) {
            self.route_set = before;
            return Err(e);
        }
        let run = self.run()?;
        let mut bytes = std::fs::metadata(run.cfg()).map(|m| m.len()).ok();
        for (path, _) in self.route_files_current(run) {
            let len = std::fs::metadata(&path).map(|m| m.len()).ok();
            bytes = bytes.zip(len).map(|(a, b)| a + b);
        }
        Ok(bytes)
    }

    fn reload(&mut self) -> Result<(), SutError> {
        if !self.running()? {
            return Err(SutError::NotRunning(self.name().to_string()));
        }
        let endpoints = self.endpoints.clone();
        self.change_config(self.route, &endpoints)
    }

    /// The driver made every change itself, so whatever `_expect` says is the last
    /// change it was asked for: settling is waiting for that one to finish.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), SutError> {
        let deadline = Instant::now() + timeout;
        if !self.running()? {
            return Ok(());
        }
        if self.pending.is_some() {
            let worker = self.wait_reload(deadline)?;
            self.worker = Some(worker);
        }
        if self.mode == Mode::Reload {
            return Ok(());
        }
        loop {
            if !self.running()? {
                return Err(SutError::NotRunning(self.name().to_string()));
            }
            // After a reload, only the new worker's answers count.
            let right_process = match self.worker {
                Some(w) => self.admin_pid() == Some(w),
                None => true,
            };
            if right_process && self.sync_slots()? {
                self.worker = None;
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!("{} runtime slots", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A new master, started with `-x` on the admin socket (the running worker
    /// hands it the listening sockets: `expose-fd listeners`) and `-sf` naming the
    /// old master, which soft-stops: its worker closes its listeners only once the
    /// new one holds them, and finishes the requests it has. The way the OpenShift
    /// Router and the HAProxy ingress controller replace their process; in runtime
    /// mode the slots are saved to the server-state file first, as for a reload.
    fn restart_kind(&self) -> sut::RestartKind {
        sut::RestartKind {
            how: "new process, listeners handed over (-x, -sf)",
            seamless: true,
        }
    }

    fn restart_proxy(&mut self, _replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        if !self.running()? {
            return Err(SutError::NotRunning(self.name().to_string()));
        }
        if self.pending.is_some() {
            self.settle(&Expect::Reloaded, PENDING_WAIT)?;
        }
        if self.mode == Mode::Runtime {
            self.save_server_state()?;
        }
        let old_worker = self.admin_pid();
        let old = self.guard.take().expect("running");
        let old_pid = old.pid();
        self.retiring.push(old);
        let handed = self
            .spawn_handing_over(old_pid)
            .and_then(|()| self.wait_handover(old_worker));
        if let Err(e) = handed {
            // The old master still serves (the new one soft-stops it only once it
            // holds the listeners): it stays the proxy, and the new one goes.
            if let Some(mut new) = self.guard.take() {
                new.stop(Signal::KILL, Duration::ZERO);
            }
            self.guard = self.retiring.pop();
            return Err(e);
        }
        self.wait_ready(Duration::from_secs(10))
    }

    /// `haproxy-reload` writes the new certificate and reloads, as the OpenShift
    /// Router does; `haproxy-runtime` hands it to the running process through the
    /// runtime API (`set ssl cert`, then `commit ssl cert`), as the HAProxy ingress
    /// controller does, and writes the file too, for a later reload.
    fn rotate_certificate(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        let res = sut::driver::rotate_with(
            self,
            |d| d.run.as_mut().map(|r| &mut r.ctx),
            (cert, key),
            Self::install_certificate,
        );
        if res.is_err() {
            // The old certificate's file too, for the next reload.
            if let Ok(run) = self.run() {
                let _ = write_pem(run);
            }
        }
        res
    }

    fn take_warnings(&mut self) -> Vec<SutError> {
        std::mem::take(&mut self.warnings)
    }

    fn alive(&mut self) -> bool {
        self.retiring.retain_mut(Guard::alive);
        self.guard.as_mut().is_some_and(Guard::alive)
    }

    fn stop(&mut self) -> Result<(), SutError> {
        for mut g in self.retiring.drain(..) {
            g.stop(Signal::USR1, Duration::from_secs(1));
        }
        if let Some(mut g) = self.guard.take() {
            // SIGUSR1 is haproxy's soft stop; the guard kills what is left after 2 s.
            g.stop(Signal::USR1, Duration::from_secs(2));
        }
        self.pending = None;
        self.worker = None;
        if let Some(run) = self.run.as_ref() {
            // haproxy leaves its sockets behind.
            for p in [run.master_sock(), run.admin_sock(), run.state_file()] {
                let _ = std::fs::remove_file(p);
            }
        }
        Ok(())
    }

    fn versions(&self) -> Vec<(String, String)> {
        let binary = match self.run.as_ref() {
            Some(r) => Some(r.binary.clone()),
            None => proc::which("haproxy"),
        };
        binary
            .and_then(|b| proc::output(Command::new(b).arg("-v")).ok())
            .and_then(|(_, out)| parse_version(&out))
            .map(|v| vec![("haproxy".to_string(), v)])
            .unwrap_or_default()
    }
}

/// Rejects endpoint lists haproxy would take wrongly or not at all.
fn validate_endpoints(mode: Mode, endpoints: &[Endpoint]) -> Result<(), SutError> {
    let reject = |what: String, detail: &str| SutError::Rejected {
        what,
        detail: detail.to_string(),
    };
    for (i, e) in endpoints.iter().enumerate() {
        // The runtime API accepts any number and wraps it (99999 -> 34463); a u16 cannot
        // be out of range, but 0 is no port a backend listens on.
        if e.addr.port() == 0 {
            return Err(reject(format!("endpoint {} ({})", e.id, e.addr), "port 0"));
        }
        if e.addr.ip().is_unspecified() {
            return Err(reject(
                format!("endpoint {} ({})", e.id, e.addr),
                "unspecified address",
            ));
        }
        if endpoints[..i].iter().any(|o| o.id == e.id) {
            return Err(reject(format!("endpoint {}", e.id), "the id appears twice"));
        }
    }
    if mode == Mode::Runtime && endpoints.len() > SLOTS {
        return Err(reject(
            "haproxy-runtime endpoints".into(),
            &format!(
                "{} endpoints but only {SLOTS} server-template slots",
                endpoints.len()
            ),
        ));
    }
    Ok(())
}

/// The certificate and then its key, as one PEM text.
fn combined_pem(ctx: &DriverContext) -> Result<Vec<u8>, SutError> {
    let mut pem = std::fs::read(&ctx.cert)
        .map_err(SutError::io(format!("reading {}", ctx.cert.display())))?;
    let key =
        std::fs::read(&ctx.key).map_err(SutError::io(format!("reading {}", ctx.key.display())))?;
    if !pem.ends_with(b"\n") {
        pem.push(b'\n');
    }
    pem.extend_from_slice(&key);
    Ok(pem)
}

/// The certificate and key in one file, as haproxy's `crt` wants them.
fn write_pem(run: &Run) -> Result<(), SutError> {
    use std::os::unix::fs::OpenOptionsExt;

    let pem = combined_pem(&run.ctx)?;
    let path = run.pem();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(SutError::io(format!("writing {}", path.display())))?;
    f.write_all(&pem)
        .map_err(SutError::io(format!("writing {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_api_takes_one_kind_of_route_change_at_a_time() {
        let s = sut::RouteSet::new(10, 5);
        assert!(runtime_can_change(&s, &sut::RouteSet::new(11, 5)), "add");
        assert!(runtime_can_change(&s, &sut::RouteSet::new(9, 5)), "remove");
        assert!(runtime_can_change(&s, &s.revise(2)), "change");
        assert!(runtime_can_change(&s.revise(2), &s), "change back");
        assert!(!runtime_can_change(&s, &s), "nothing to change");
        assert!(
            !runtime_can_change(&s, &sut::RouteSet::new(11, 5).revise(2)),
            "both"
        );
        assert!(!runtime_can_change(&s, &sut::RouteSet::new(10, 4)), "hosts");
        assert!(
            !runtime_can_change(&sut::RouteSet::new(0, 1), &s),
            "none before"
        );
    }

    /// An endpoint on 127.0.0.1, for the tests of every part of the driver.
    pub(super) fn ep(id: &str, port: u16) -> Endpoint {
        Endpoint {
            id: id.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    #[test]
    fn endpoints_are_validated() {
        assert!(validate_endpoints(Mode::Runtime, &[ep("a", 1)]).is_ok());
        assert!(matches!(
            validate_endpoints(Mode::Runtime, &[ep("a", 0)]),
            Err(SutError::Rejected { .. })
        ));
        assert!(matches!(
            validate_endpoints(Mode::Reload, &[ep("a", 1), ep("a", 2)]),
            Err(SutError::Rejected { .. })
        ));
        let many: Vec<Endpoint> = (0..=SLOTS)
            .map(|i| ep(&format!("x{i}"), 100 + i as u16))
            .collect();
        assert!(validate_endpoints(Mode::Reload, &many).is_ok());
        assert!(validate_endpoints(Mode::Runtime, &many).is_err());
    }
}
