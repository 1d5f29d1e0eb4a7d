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
//! This module owns the generated configuration, the haproxy process (a direct
//! foreground child, so its exit is seen at once) and the conversations on its two
//! unix sockets. The recipes and their gotchas were verified by hand first
//! (`/work/notes/lab.md`, sections 5 and 6).

use super::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, LabError, Route};
use super::proc::{self, Guard};
use http1::client;
use rustix::process::{getrlimit, Resource, Signal};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
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
/// The one backend every frontend uses.
const BACKEND: &str = "be";
/// `srv_admin_state` bit "disabled in the configuration": the template's `disabled`
/// keeps it set even after `state ready`, so it does not mean out of rotation.
const ADMF_CMAINT: u32 = 0x04;
/// `srv_op_state` of a server that takes traffic.
const OP_RUNNING: u32 = 2;
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
            route: Route::Base,
            endpoints: Vec::new(),
            slots: vec![None; SLOTS],
            applied: vec![None; SLOTS],
            pending: None,
            worker: None,
        }
    }

    fn run(&self) -> Result<&Run, LabError> {
        self.run
            .as_ref()
            .ok_or_else(|| LabError::Other(format!("{}: prepare was not called", self.name())))
    }

    /// Whether a process was started; an error if it was and has died since.
    fn running(&mut self) -> Result<bool, LabError> {
        match self.guard.as_mut().map(Guard::alive) {
            None => Ok(false),
            Some(true) => Ok(true),
            Some(false) => Err(LabError::NotRunning(self.name().to_string())),
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
            route,
            endpoints,
        })
    }

    /// Writes `text` as the new haproxy.cfg if `haproxy -c` accepts it.
    fn write_checked(&self, text: &str) -> Result<(), LabError> {
        let run = self.run()?;
        let cfg = run.cfg();
        let candidate = cfg.with_extension("cfg.new");
        std::fs::write(&candidate, text)
            .map_err(LabError::io(format!("writing {}", candidate.display())))?;
        let (ok, out) = proc::output(
            Command::new(&run.binary)
                .arg("-c")
                .arg("-f")
                .arg(&candidate),
        )
        .map_err(LabError::io(format!("running {} -c", run.binary.display())))?;
        if !ok {
            let _ = std::fs::remove_file(&candidate);
            return Err(LabError::Rejected {
                what: format!("{} configuration", self.name()),
                detail: alerts(&out),
            });
        }
        std::fs::rename(&candidate, &cfg)
            .map_err(LabError::io(format!("writing {}", cfg.display())))
    }

    /// Rewrites the configuration and, when haproxy runs, reloads it.
    fn change_config(&mut self, route: Route, endpoints: &[Endpoint]) -> Result<(), LabError> {
        let running = self.running()?;
        if running && self.pending.is_some() {
            // One reload at a time: the previous one must be in place (and, in
            // runtime mode, its slots right) before its state is saved again.
            self.settle(&Expect::Reloaded, PENDING_WAIT)?;
        }
        if running && self.mode == Mode::Runtime {
            self.save_server_state()?;
        }
        let text = self.render_current(self.run()?, route, endpoints);
        self.write_checked(&text)?;
        if running {
            self.request_reload()?;
        }
        Ok(())
    }

    /// Asks the master to reload and notes what it looked like before.
    fn request_reload(&mut self) -> Result<(), LabError> {
        let master = self.run()?.master_sock();
        let deadline = Instant::now() + Duration::from_secs(2);
        // The master socket can refuse for a moment (start-up, an earlier re-exec).
        let before = loop {
            if let Some(t) = cli(&master, "show proc")
                .ok()
                .and_then(|s| ProcTable::parse(&s))
            {
                break Some(t);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let Some(before) = before else {
            return Err(LabError::Other(format!(
                "{}: master socket {} does not answer",
                self.name(),
                master.display()
            )));
        };
        self.pending = Some(PendingReload {
            reloads_before: before.reloads,
            failed_before: before.failed,
            old_workers: before.workers.iter().map(|w| w.pid).collect(),
        });
        self.worker = None;
        // 2.6 answers `reload` with nothing and closes while it re-execs; if the
        // socket is gone meanwhile, SIGUSR2 to the master does the same.
        match send(&master, "reload") {
            Ok(mut s) => {
                let _ = s.read_to_end(&mut Vec::new());
            }
            Err(_) => {
                if let Some(g) = self.guard.as_ref() {
                    g.signal_main(Signal::USR2);
                }
            }
        }
        Ok(())
    }

    /// Waits for the pending reload's new worker; returns its pid.
    fn wait_reload(&mut self, deadline: Instant) -> Result<u32, LabError> {
        let master = self.run()?.master_sock();
        loop {
            if !self.running()? {
                return Err(LabError::NotRunning(self.name().to_string()));
            }
            let p = self.pending.as_ref().expect("a reload is pending");
            if let Some(t) = cli(&master, "show proc")
                .ok()
                .and_then(|s| ProcTable::parse(&s))
            {
                if t.reloads > p.reloads_before {
                    if let Some(w) = t
                        .workers
                        .iter()
                        .find(|w| w.reloads == 0 && !p.old_workers.contains(&w.pid))
                    {
                        self.pending = None;
                        return Ok(w.pid);
                    }
                    if t.failed > p.failed_before {
                        self.pending = None;
                        return Err(LabError::Rejected {
                            what: format!("{} reload", self.name()),
                            detail: log_tail(&self.run()?.log()),
                        });
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(LabError::NotReady(format!("{} reload", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Sends one runtime API command on the admin socket and checks its reply.
    fn runtime_command(&self, command: &str) -> Result<(), LabError> {
        let admin = self.run()?.admin_sock();
        let reply = cli(&admin, command).map_err(LabError::io(format!(
            "haproxy runtime API {}",
            admin.display()
        )))?;
        if runtime_reply_ok(&reply) {
            Ok(())
        } else {
            Err(LabError::Rejected {
                what: format!("haproxy runtime command '{command}'"),
                detail: reply.trim().to_string(),
            })
        }
    }

    /// Tells the running process every slot change between `applied` and `slots`:
    /// new endpoints first, removals last, so capacity never dips in between.
    fn push_slots(&mut self) -> Result<(), LabError> {
        for i in 0..SLOTS {
            let Some(want) = self.slots[i].as_ref().map(|e| e.addr) else {
                continue;
            };
            if self.applied[i] == Some(want) {
                continue;
            }
            let name = format!("{BACKEND}/s{}", i + 1);
            if self.applied[i].is_some() {
                self.runtime_command(&format!("set server {name} state maint"))?;
                self.applied[i] = None;
            }
            self.runtime_command(&format!(
                "set server {name} addr {} port {}",
                want.ip(),
                want.port()
            ))?;
            self.runtime_command(&format!("set server {name} state ready"))?;
            self.applied[i] = Some(want);
        }
        for i in 0..SLOTS {
            if self.slots[i].is_none() && self.applied[i].is_some() {
                self.runtime_command(&format!("set server {BACKEND}/s{} state maint", i + 1))?;
                self.applied[i] = None;
            }
        }
        Ok(())
    }

    /// Reads `show servers state` and compares it with the wanted slots. When they
    /// differ, pushes the difference and returns false (the caller reads again).
    fn sync_slots(&mut self) -> Result<bool, LabError> {
        let admin = self.run()?.admin_sock();
        let Ok(text) = cli(&admin, &format!("show servers state {BACKEND}")) else {
            return Ok(false);
        };
        let states = parse_servers_state(&text);
        if states.is_empty() {
            return Ok(false);
        }
        let mut actual = vec![None; SLOTS];
        let mut matches = true;
        for (i, slot) in actual.iter_mut().enumerate() {
            let name = format!("s{}", i + 1);
            let st = states.iter().find(|s| s.name == name);
            *slot = st.filter(|s| s.serving()).map(|s| s.addr);
            let want = self.slots[i].as_ref().map(|e| e.addr);
            matches &= st.is_some() && *slot == want;
        }
        if matches {
            self.applied = actual;
            return Ok(true);
        }
        self.applied = actual;
        self.push_slots()?;
        Ok(false)
    }

    /// Saves the runtime slots where the next worker loads them from.
    fn save_server_state(&mut self) -> Result<(), LabError> {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.sync_slots()? {
            if Instant::now() >= deadline {
                return Err(LabError::NotReady(format!("{} runtime slots", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let run = self.run()?;
        let text = cli(&run.admin_sock(), "show servers state")
            .map_err(LabError::io("haproxy runtime API: show servers state"))?;
        if !text.starts_with("1\n") {
            return Err(LabError::Other(format!(
                "haproxy: unexpected server state dump: {}",
                first_line(&text)
            )));
        }
        let path = run.state_file();
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, &text).map_err(LabError::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(LabError::io(format!("writing {}", path.display())))
    }

    /// The pid of the process answering on the admin socket.
    fn admin_pid(&self) -> Option<u32> {
        let text = cli(&self.run.as_ref()?.admin_sock(), "show info").ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("Pid:"))
            .and_then(|p| p.trim().parse().ok())
    }
}

impl Driver for Haproxy {
    fn name(&self) -> &'static str {
        match self.mode {
            Mode::Reload => "haproxy-reload",
            Mode::Runtime => "haproxy-runtime",
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), LabError> {
        let binary = proc::which("haproxy").ok_or(LabError::MissingBinary {
            binary: "haproxy".into(),
            package: "haproxy".into(),
        })?;
        validate_endpoints(self.mode, endpoints)?;
        for dir in [&ctx.work_dir, &ctx.out_dir] {
            std::fs::create_dir_all(dir)
                .map_err(LabError::io(format!("creating {}", dir.display())))?;
        }
        let longest = ctx.work_dir.join("master.sock").as_os_str().len();
        if longest > MAX_SOCKET_PATH {
            return Err(LabError::Other(format!(
                "haproxy: work folder {} is too long for a unix socket path",
                ctx.work_dir.display()
            )));
        }
        let run = Run {
            ctx: ctx.clone(),
            binary,
            maxconn: workable_maxconn(ctx.worker_connections),
        };
        write_pem(&run)?;
        self.run = Some(run);
        self.route = Route::Base;
        self.endpoints = endpoints.to_vec();
        self.slots = assign_slots(&vec![None; SLOTS], endpoints);
        self.applied = vec![None; SLOTS];
        let text = self.render_current(self.run()?, Route::Base, endpoints);
        self.write_checked(&text)
    }

    fn start(&mut self) -> Result<(), LabError> {
        if self.alive() {
            return Ok(());
        }
        // A process that died is reaped here and started again.
        self.guard = None;
        let run = self.run()?;
        let master = run.master_sock();
        // A state file from an earlier process would be loaded at start-up; the slots
        // are pushed from the driver's own map instead.
        let _ = std::fs::remove_file(run.state_file());
        let mut cmd = Command::new(&run.binary);
        // -W without -D: the master stays our direct child (seen exiting at once).
        cmd.arg("-W")
            .arg("-S")
            .arg(format!("{},mode,600", master.display()))
            .arg("-f")
            .arg(run.cfg());
        let guard = Guard::spawn("haproxy", &mut cmd, &run.log())
            .map_err(LabError::io(format!("starting {}", run.binary.display())))?;
        self.guard = Some(guard);
        self.pending = None;
        self.worker = None;
        self.applied = vec![None; SLOTS];
        Ok(())
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LabError> {
        let deadline = Instant::now() + timeout;
        let (http, https) = {
            let run = self.run()?;
            (run.ctx.http_port, run.ctx.https_port)
        };
        let mut slots_ready = self.mode == Mode::Reload;
        loop {
            if self.guard.is_none() {
                return Err(LabError::NotRunning(self.name().to_string()));
            }
            if !self.running().unwrap_or(false) {
                return Err(LabError::Other(format!(
                    "{} exited while starting: {}",
                    self.name(),
                    log_tail(&self.run()?.log())
                )));
            }
            if !slots_ready {
                slots_ready = self.sync_slots()?;
            }
            if slots_ready && http_answers(http) && tcp_accepts(https) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LabError::NotReady(self.name().to_string()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), LabError> {
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

    fn apply_route(&mut self, route: Route) -> Result<(), LabError> {
        let endpoints = self.endpoints.clone();
        self.change_config(route, &endpoints)?;
        self.route = route;
        Ok(())
    }

    fn reload(&mut self) -> Result<(), LabError> {
        if !self.running()? {
            return Err(LabError::NotRunning(self.name().to_string()));
        }
        let endpoints = self.endpoints.clone();
        self.change_config(self.route, &endpoints)
    }

    /// The driver made every change itself, so whatever `_expect` says is the last
    /// change it was asked for: settling is waiting for that one to finish.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), LabError> {
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
                return Err(LabError::NotRunning(self.name().to_string()));
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
                return Err(LabError::NotReady(format!("{} runtime slots", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn alive(&mut self) -> bool {
        self.guard.as_mut().is_some_and(Guard::alive)
    }

    fn stop(&mut self) -> Result<(), LabError> {
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

/// Everything the configuration depends on.
struct Settings<'a> {
    mode: Mode,
    work_dir: &'a Path,
    https_port: u16,
    http_port: u16,
    maxconn: u32,
    /// Idle connections kept per server (`pool-max-conn`).
    pool_max_conn: u32,
    /// Reuses per server connection (`max-reuse`, -1 = unlimited).
    max_reuse: i64,
    route: Route,
    /// Reload mode only: runtime mode has template slots instead.
    endpoints: &'a [Endpoint],
}

/// The complete haproxy.cfg for `s`.
fn render(s: &Settings) -> String {
    let dir = |name: &str| quote(&s.work_dir.join(name));
    let runtime = s.mode == Mode::Runtime;
    let mut c = String::new();
    let mut line = |l: &str| {
        c.push_str(l);
        c.push('\n');
    };
    let profile = match s.mode {
        Mode::Reload => "haproxy-reload",
        Mode::Runtime => "haproxy-runtime",
    };
    line(&format!("# Generated by ingressbench for {profile}."));
    line("global");
    // One thread: on the 2-core lab machine the load generator needs the other core.
    line("    nbthread 1");
    // Two fds per connection within the hard nofile limit.
    line(&format!("    maxconn {}", s.maxconn));
    // expose-fd listeners: the new worker takes the listening sockets over on reload.
    line(&format!(
        "    stats socket {} mode 600 level admin expose-fd listeners",
        dir("admin.sock")
    ));
    line("    log stderr format raw local0 notice");
    line("    hard-stop-after 30s");
    line("    ssl-default-bind-options ssl-min-ver TLSv1.2 ssl-max-ver TLSv1.3");
    line("    tune.ssl.default-dh-param 2048");
    if runtime {
        line(&format!("    server-state-file {}", dir("server-state")));
    }
    line("defaults");
    line("    mode http");
    line("    log global");
    line("    option dontlognull");
    line("    option http-keep-alive");
    line("    timeout connect 5s");
    line("    timeout client 60s");
    line("    timeout server 60s");
    line("    timeout http-keep-alive 60s");
    // Like nginx's proxy_next_upstream: a refused connection is retried elsewhere.
    line("    retries 2");
    line("    option redispatch");
    if runtime {
        line("    load-server-state-from-file global");
    }
    line("frontend fe");
    line(&format!(
        "    bind 127.0.0.1:{} ssl crt {} alpn http/1.1",
        s.https_port,
        dir("combined.pem")
    ));
    line(&format!("    bind 127.0.0.1:{}", s.http_port));
    line(&format!("    default_backend {BACKEND}"));
    line(&format!("backend {BACKEND}"));
    line("    balance roundrobin");
    line("    http-reuse always");
    line(&format!(
        "    default-server pool-max-conn {} max-reuse {}",
        s.pool_max_conn, s.max_reuse
    ));
    match s.route {
        Route::Base => {}
        Route::Cors => {
            line("    http-response set-header Access-Control-Allow-Origin \"*\"");
            line(
                "    http-response set-header Access-Control-Allow-Methods \"GET, POST, OPTIONS\"",
            );
            line("    http-response set-header Access-Control-Allow-Headers \"Content-Type, Authorization\"");
        }
        Route::Header => line("    http-response set-header x-custom 1"),
        Route::Rewrite => line("    http-request set-path /rewritten%[path]"),
    }
    if runtime {
        line(&format!(
            "    server-template s 1-{SLOTS} 127.0.0.1:1 disabled"
        ));
    } else {
        for (i, e) in s.endpoints.iter().enumerate() {
            line(&format!(
                "    server s{} {}  # {}",
                i + 1,
                e.addr,
                comment_safe(&e.id)
            ));
        }
    }
    c
}

/// Puts `wanted` into slots: endpoints already placed keep their slot (their address
/// follows if it changed), new ones take slots that were free before this change
/// first, so a removed endpoint's slot is not swapped in the same step.
fn assign_slots(current: &[Option<Endpoint>], wanted: &[Endpoint]) -> Vec<Option<Endpoint>> {
    let mut next: Vec<Option<Endpoint>> = current
        .iter()
        .map(|slot| {
            slot.as_ref()
                .and_then(|e| wanted.iter().find(|w| w.id == e.id).cloned())
        })
        .collect();
    next.resize(SLOTS, None);
    let free_before = (0..SLOTS).filter(|&i| current.get(i).is_none_or(Option::is_none));
    let freed_now = (0..SLOTS).filter(|&i| current.get(i).is_some_and(Option::is_some));
    let mut free: Vec<usize> = free_before
        .chain(freed_now)
        .filter(|&i| next[i].is_none())
        .collect();
    free.reverse();
    for w in wanted {
        if next.iter().flatten().any(|e| e.id == w.id) {
            continue;
        }
        if let Some(i) = free.pop() {
            next[i] = Some(w.clone());
        }
    }
    next
}

/// Rejects endpoint lists haproxy would take wrongly or not at all.
fn validate_endpoints(mode: Mode, endpoints: &[Endpoint]) -> Result<(), LabError> {
    let reject = |what: String, detail: &str| LabError::Rejected {
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

/// `show proc` on the master socket, as far as reloads are concerned.
#[derive(Debug, PartialEq)]
struct ProcTable {
    reloads: u32,
    failed: u32,
    workers: Vec<Worker>,
}

#[derive(Debug, PartialEq)]
struct Worker {
    pid: u32,
    /// Reloads since the worker started: 0 for the current one.
    reloads: u32,
}

impl ProcTable {
    /// Parses `show proc`; `None` without a master line (a partial answer).
    fn parse(text: &str) -> Option<ProcTable> {
        let mut master = None;
        let mut workers = Vec::new();
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(pid), Some(kind), Some(reloads)) = (
                f.first().and_then(|p| p.parse::<u32>().ok()),
                f.get(1),
                f.get(2).and_then(|r| r.parse::<u32>().ok()),
            ) else {
                continue;
            };
            match *kind {
                "master" => {
                    // `1 [failed: 0]`
                    let failed = f
                        .iter()
                        .position(|w| *w == "[failed:")
                        .and_then(|i| f.get(i + 1))
                        .and_then(|n| n.trim_end_matches(']').parse().ok())
                        .unwrap_or(0);
                    master = Some((reloads, failed));
                }
                "worker" => workers.push(Worker { pid, reloads }),
                _ => {}
            }
        }
        let (reloads, failed) = master?;
        Some(ProcTable {
            reloads,
            failed,
            workers,
        })
    }
}

/// One line of `show servers state`.
#[derive(Debug, PartialEq)]
struct ServerState {
    name: String,
    addr: SocketAddr,
    op_state: u32,
    admin_state: u32,
}

impl ServerState {
    /// Takes traffic: running and in no maintenance or drain beyond the template's
    /// "disabled in the configuration" flag.
    fn serving(&self) -> bool {
        self.op_state == OP_RUNNING && self.admin_state & !ADMF_CMAINT == 0
    }
}

/// Parses `show servers state <backend>` (format 1), finding columns by the header.
fn parse_servers_state(text: &str) -> Vec<ServerState> {
    let mut cols = [
        "srv_name",
        "srv_addr",
        "srv_op_state",
        "srv_admin_state",
        "srv_port",
    ]
    .map(|_| None);
    let mut out = Vec::new();
    for l in text.lines() {
        if let Some(header) = l.strip_prefix('#') {
            let names: Vec<&str> = header.split_whitespace().collect();
            for (c, want) in cols.iter_mut().zip([
                "srv_name",
                "srv_addr",
                "srv_op_state",
                "srv_admin_state",
                "srv_port",
            ]) {
                *c = names.iter().position(|n| *n == want);
            }
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        let get = |i: Option<usize>| i.and_then(|i| f.get(i)).copied();
        let [name, addr, op, admin, port] = cols.map(get);
        let (Some(name), Some(addr), Some(op), Some(admin), Some(port)) =
            (name, addr, op, admin, port)
        else {
            continue;
        };
        let (Ok(ip), Ok(port), Ok(op_state), Ok(admin_state)) = (
            addr.parse::<std::net::IpAddr>(),
            port.parse::<u16>(),
            op.parse(),
            admin.parse(),
        ) else {
            continue;
        };
        out.push(ServerState {
            name: name.to_string(),
            addr: SocketAddr::new(ip, port),
            op_state,
            admin_state,
        });
    }
    out
}

/// Whether a runtime API reply means success: `state` answers nothing, `addr` says
/// what it changed. Anything else (`No such server.`, usage text) is an error.
fn runtime_reply_ok(reply: &str) -> bool {
    let r = reply.trim();
    r.is_empty() || r.starts_with("no need to change the addr") || r.starts_with("IP changed from")
}

/// The version from `haproxy -v`: `HAProxy version 2.6.12-1+deb12u4 2026/10/17 - ...`.
fn parse_version(out: &str) -> Option<String> {
    let first = out.lines().find(|l| l.contains("version"))?;
    let mut words = first.split_whitespace();
    words.find(|w| *w == "version")?;
    words.next().map(str::to_string)
}

/// Client connections haproxy can take: what was asked for, within two fds per
/// connection under the hard nofile limit (lab.md: `maxconn 20000` fails at 20000 fds).
fn workable_maxconn(wanted: u32) -> u32 {
    let limit = getrlimit(Resource::Nofile).maximum;
    let fit = limit.map_or(u64::from(wanted), |h| h.saturating_sub(100) / 2);
    u32::try_from(u64::from(wanted).min(fit))
        .unwrap_or(wanted)
        .max(1)
}

/// haproxy's `max-reuse` (reuses, not requests) for a requests-per-connection limit.
fn max_reuse(requests: u64) -> i64 {
    match i64::try_from(requests) {
        Ok(r) if r < i64::from(i32::MAX) => (r - 1).max(0),
        _ => -1,
    }
}

/// The certificate and key in one file, as haproxy's `crt` wants them.
fn write_pem(run: &Run) -> Result<(), LabError> {
    use std::os::unix::fs::OpenOptionsExt;
    let cert = std::fs::read(&run.ctx.cert)
        .map_err(LabError::io(format!("reading {}", run.ctx.cert.display())))?;
    let key = std::fs::read(&run.ctx.key)
        .map_err(LabError::io(format!("reading {}", run.ctx.key.display())))?;
    let path = run.pem();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(LabError::io(format!("writing {}", path.display())))?;
    let mut pem = cert;
    if !pem.ends_with(b"\n") {
        pem.push(b'\n');
    }
    pem.extend_from_slice(&key);
    f.write_all(&pem)
        .map_err(LabError::io(format!("writing {}", path.display())))
}

/// A path as one haproxy config word: single quotes, which expand nothing.
fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// An endpoint id made safe for a config comment.
fn comment_safe(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect()
}

/// One command on a haproxy CLI socket (non-interactive: it answers and closes).
fn cli(path: &Path, command: &str) -> std::io::Result<String> {
    let mut s = send(path, command)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Connects and writes `command`, leaving the reply unread.
fn send(path: &Path, command: &str) -> std::io::Result<UnixStream> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(format!("{command}\n").as_bytes())?;
    s.shutdown(Shutdown::Write)?;
    Ok(s)
}

/// Whether a plain HTTP GET on 127.0.0.1:`port` gets an HTTP response (any status:
/// with no endpoints, 503 is the right answer).
fn http_answers(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    client::request(addr, "GET", "/", &[], b"", Duration::from_secs(2)).is_ok()
}

fn tcp_accepts(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    )
    .is_ok()
}

/// The `[ALERT]` lines of haproxy's output, or all of it if there are none.
fn alerts(out: &str) -> String {
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("[ALERT]")).collect();
    if lines.is_empty() {
        out.trim().to_string()
    } else {
        lines.join("; ")
    }
}

/// The last lines of haproxy's log, for an error message.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let alerts: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("[ALERT]"))
        .collect();
    let pick = if alerts.is_empty() { &lines } else { &alerts };
    pick[pick.len().saturating_sub(4)..].join("; ")
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(id: &str, port: u16) -> Endpoint {
        Endpoint {
            id: id.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    fn settings<'a>(mode: Mode, route: Route, endpoints: &'a [Endpoint]) -> Settings<'a> {
        Settings {
            mode,
            work_dir: Path::new("/tmp/w"),
            https_port: 8443,
            http_port: 8080,
            maxconn: 9950,
            pool_max_conn: 100,
            max_reuse: -1,
            route,
            endpoints,
        }
    }

    #[test]
    fn reload_config_lists_one_server_per_endpoint() {
        let eps = [ep("b1", 5001), ep("b2", 5002)];
        let c = render(&settings(Mode::Reload, Route::Base, &eps));
        for want in [
            "    nbthread 1\n",
            "    maxconn 9950\n",
            "    stats socket '/tmp/w/admin.sock' mode 600 level admin expose-fd listeners\n",
            "    ssl-default-bind-options ssl-min-ver TLSv1.2 ssl-max-ver TLSv1.3\n",
            "    timeout connect 5s\n",
            "    timeout client 60s\n",
            "    timeout server 60s\n",
            "    option http-keep-alive\n",
            "    bind 127.0.0.1:8443 ssl crt '/tmp/w/combined.pem' alpn http/1.1\n",
            "    bind 127.0.0.1:8080\n",
            "    http-reuse always\n",
            "    default-server pool-max-conn 100 max-reuse -1\n",
            "    server s1 127.0.0.1:5001  # b1\n",
            "    server s2 127.0.0.1:5002  # b2\n",
        ] {
            assert!(c.contains(want), "missing {want:?} in\n{c}");
        }
        assert!(!c.contains("server-template"));
        assert!(!c.contains("server-state"));
        assert!(!c.contains("http-response"));
    }

    #[test]
    fn reload_config_without_endpoints_has_an_empty_backend() {
        let c = render(&settings(Mode::Reload, Route::Base, &[]));
        assert!(c
            .trim_end()
            .ends_with("default-server pool-max-conn 100 max-reuse -1"));
    }

    #[test]
    fn runtime_config_has_disabled_slots_and_a_state_file() {
        let eps = [ep("b1", 5001)];
        let c = render(&settings(Mode::Runtime, Route::Base, &eps));
        assert!(c.contains("    server-template s 1-32 127.0.0.1:1 disabled\n"));
        assert!(c.contains("    server-state-file '/tmp/w/server-state'\n"));
        assert!(c.contains("    load-server-state-from-file global\n"));
        assert!(
            !c.contains("5001"),
            "runtime endpoints go through the API, not the file"
        );
    }

    #[test]
    fn routes_render_their_rules() {
        let c = render(&settings(Mode::Reload, Route::Cors, &[]));
        assert!(c.contains("http-response set-header Access-Control-Allow-Origin \"*\"\n"));
        assert!(c.contains("Access-Control-Allow-Methods \"GET, POST, OPTIONS\"\n"));
        assert!(c.contains("Access-Control-Allow-Headers \"Content-Type, Authorization\"\n"));
        let c = render(&settings(Mode::Reload, Route::Header, &[]));
        assert!(c.contains("    http-response set-header x-custom 1\n"));
        let c = render(&settings(Mode::Runtime, Route::Rewrite, &[]));
        assert!(c.contains("    http-request set-path /rewritten%[path]\n"));
    }

    #[test]
    fn the_rendered_config_passes_haproxy_check() {
        let Some(bin) = proc::which("haproxy") else {
            return; // checked for real in tests/lab_haproxy.rs
        };
        let dir = tempfile::tempdir().unwrap();
        let eps = [ep("b1", 5001), ep("b2", 5002)];
        for mode in [Mode::Reload, Mode::Runtime] {
            for route in [Route::Base, Route::Cors, Route::Header, Route::Rewrite] {
                let mut s = settings(mode, route, &eps);
                s.work_dir = Path::new("/nonexistent-dir");
                let mut text = render(&s);
                // `-c` loads the certificate: point it at none rather than a real one.
                text = text.replace(" ssl crt '/nonexistent-dir/combined.pem' alpn http/1.1", "");
                let f = dir.path().join("h.cfg");
                std::fs::write(&f, &text).unwrap();
                let (ok, out) =
                    proc::output(Command::new(&bin).arg("-c").arg("-f").arg(&f)).unwrap();
                assert!(ok, "{mode:?} {route:?}: {out}\n{text}");
            }
        }
    }

    #[test]
    fn paths_are_quoted_as_single_words() {
        assert_eq!(quote(Path::new("/a b/c")), "'/a b/c'");
        assert_eq!(quote(Path::new("/it's")), r"'/it'\''s'");
    }

    #[test]
    fn slots_keep_their_endpoint_and_new_ones_take_free_slots_first() {
        let empty = vec![None; SLOTS];
        let s = assign_slots(&empty, &[ep("b1", 1), ep("b2", 2)]);
        assert_eq!(s[0], Some(ep("b1", 1)));
        assert_eq!(s[1], Some(ep("b2", 2)));
        // b1 leaves, b3 joins: b2 stays in s2, b3 takes s3 (free before), s1 empties.
        let s2 = assign_slots(&s, &[ep("b2", 2), ep("b3", 3)]);
        assert_eq!(s2[0], None);
        assert_eq!(s2[1], Some(ep("b2", 2)));
        assert_eq!(s2[2], Some(ep("b3", 3)));
        assert_eq!(s2.len(), SLOTS);
        // A moved endpoint keeps its slot with the new address.
        let s3 = assign_slots(&s2, &[ep("b2", 22), ep("b3", 3)]);
        assert_eq!(s3[1], Some(ep("b2", 22)));
        // When the never-used slots run out, freed ones are taken.
        let full: Vec<Endpoint> = (0..SLOTS)
            .map(|i| ep(&format!("x{i}"), 100 + i as u16))
            .collect();
        let s4 = assign_slots(&empty, &full);
        let mut next = full[1..].to_vec();
        next.push(ep("new", 9));
        let s5 = assign_slots(&s4, &next);
        assert_eq!(s5[0], Some(ep("new", 9)));
        assert!(s5.iter().all(Option::is_some));
    }

    #[test]
    fn endpoints_are_validated() {
        assert!(validate_endpoints(Mode::Runtime, &[ep("a", 1)]).is_ok());
        assert!(matches!(
            validate_endpoints(Mode::Runtime, &[ep("a", 0)]),
            Err(LabError::Rejected { .. })
        ));
        assert!(matches!(
            validate_endpoints(Mode::Reload, &[ep("a", 1), ep("a", 2)]),
            Err(LabError::Rejected { .. })
        ));
        let many: Vec<Endpoint> = (0..=SLOTS)
            .map(|i| ep(&format!("x{i}"), 100 + i as u16))
            .collect();
        assert!(validate_endpoints(Mode::Reload, &many).is_ok());
        assert!(validate_endpoints(Mode::Runtime, &many).is_err());
    }

    #[test]
    fn show_proc_is_parsed() {
        let text =
            "#<PID>          <type>          <reloads>       <uptime>        <version>      \n\
            16656           master          1 [failed: 0]   0d00h00m07s     2.6.12-1+deb12u4\n\
            # workers\n\
            17087           worker          0               0d00h00m00s     2.6.12-1+deb12u4\n\
            16660           worker          1               0d00h00m07s     2.6.12-1+deb12u4\n\
            # programs\n\n";
        assert_eq!(
            ProcTable::parse(text),
            Some(ProcTable {
                reloads: 1,
                failed: 0,
                workers: vec![
                    Worker {
                        pid: 17087,
                        reloads: 0
                    },
                    Worker {
                        pid: 16660,
                        reloads: 1
                    }
                ],
            })
        );
        let failed = "16656           master          3 [failed: 1]   0d00h00m07s     2.6.12\n";
        let t = ProcTable::parse(failed).unwrap();
        assert_eq!((t.reloads, t.failed), (3, 1));
        assert_eq!(ProcTable::parse(""), None);
    }

    #[test]
    fn servers_state_is_parsed() {
        let text = "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n\
            3 be 1 s1 127.0.0.1 2 4 1 1 0 1 0 0 8 0 0 0 - 34403 - 0 0 - - 0\n\
            3 be 2 s2 127.0.0.1 0 5 1 1 0 1 0 0 8 0 0 0 - 1 - 0 0 - - 0\n\
            3 be 3 s3 127.0.0.1 2 12 1 1 0 1 0 0 8 0 0 0 - 50337 - 0 0 - - 0\n";
        let s = parse_servers_state(text);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].name, "s1");
        assert_eq!(s[0].addr, "127.0.0.1:34403".parse().unwrap());
        assert!(s[0].serving());
        assert!(!s[1].serving(), "maint");
        assert!(!s[2].serving(), "drain");
    }

    #[test]
    fn runtime_replies_are_judged() {
        assert!(runtime_reply_ok("\n"));
        assert!(runtime_reply_ok(
            "no need to change the addr, port changed from '1' to '50337' by 'stats socket command'\n\n"
        ));
        assert!(runtime_reply_ok(
            "IP changed from '127.0.0.1' to '127.0.0.2' by 'stats socket command'\n"
        ));
        assert!(!runtime_reply_ok("No such server.\n"));
        assert!(!runtime_reply_ok(
            "'set server <srv> state' expects 'ready', 'drain' and 'maint'.\n"
        ));
    }

    #[test]
    fn version_and_limits() {
        assert_eq!(
            parse_version(
                "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\nStatus: x\n"
            ),
            Some("2.6.12-1+deb12u4".to_string())
        );
        assert_eq!(parse_version("garbage"), None);
        assert_eq!(max_reuse(100_000_000), 99_999_999);
        assert_eq!(max_reuse(u64::MAX), -1);
        assert_eq!(max_reuse(1), 0);
        assert!(workable_maxconn(10) == 10);
        assert!(workable_maxconn(u32::MAX) < u32::MAX);
    }
}
