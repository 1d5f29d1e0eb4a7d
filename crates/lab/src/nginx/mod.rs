//! nginx as a system under test, driven the two ways Kubernetes ingress controllers
//! drive it (recipes verified in the lab notes, `notes/lab.md` sections 3, 4 and 8).
//!
//! - `nginx-reload` stands for the NGINX Open Source based controller: every endpoint or
//!   route change rewrites `nginx.conf`, `nginx -t` checks it, and a `SIGHUP` to the
//!   master starts new workers; the change has taken effect when every old worker is gone.
//! - `nginx-lua` stands for community ingress-nginx: a `balancer_by_lua` picks the peer
//!   from a list kept in a `lua_shared_dict`, which a local admin server replaces on
//!   `POST /endpoints`; endpoint changes never reload, route changes still do.
//!
//! This module owns the generated configuration (kept in the results folder as
//! `nginx.conf`, with every accepted version numbered `nginx.conf.1`, `.2`, …), the Lua
//! balancer, and the nginx process (a foreground master in its own process group).

use super::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, LabError, Route};
use super::proc::{self, Guard};
use http1::client;
use rustix::process::Signal;
use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How endpoint changes reach nginx.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rewrite the upstream and reload.
    Reload,
    /// Push endpoints to a Lua balancer, no reload.
    Lua,
}

/// Where Debian puts dynamic modules when `nginx -V` does not say.
const DEFAULT_MODULES_DIR: &str = "/usr/lib/nginx/modules";
/// lua-resty-core, which the Lua module refuses to start without.
const RESTY_CORE: &str = "/usr/share/lua/5.1/resty/core.lua";
/// How long old workers may keep busy connections after a reload; bounds a settle.
const WORKER_SHUTDOWN_TIMEOUT: &str = "10s";
/// Client-side keep-alive requests: large, so nginx never closes the load generator's
/// connections on its own (the recipe's value).
const CLIENT_KEEPALIVE_REQUESTS: u64 = 100_000_000;
/// Name of the Lua module written into `work_dir/lua`.
const LUA_MODULE: &str = "ingressbench_balancer";

/// The Lua side of `nginx-lua`: per-worker round robin over the list in the shared
/// dictionary, re-parsed only when its version changes; `POST /endpoints` (one
/// `a.b.c.d:port` a line) replaces the list and answers `ok version=N endpoints=M`;
/// `GET /endpoints` answers `version=N` then the list. An empty list gives 503 in the
/// access phase, as ingress-nginx does (a status set in `balancer_by_lua` reaches the
/// client as 500).
const BALANCER_LUA: &str = include_str!("balancer.lua");

/// Everything a configuration is rendered from, fixed by `prepare()`; paths absolute.
#[derive(Clone, Debug)]
struct Settings {
    mode: Mode,
    /// nginx's `-p` prefix: the private work folder (pid, lock, temp paths, Lua).
    prefix: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    https_port: u16,
    http_port: u16,
    /// The Lua admin server's port (unused in `Mode::Reload`).
    admin_port: u16,
    upstream_keepalive: u32,
    upstream_keepalive_requests: u64,
    worker_connections: u32,
    worker_rlimit_nofile: u64,
    /// Workers run as root when the master does: the temp folders are 0700.
    user_root: bool,
    modules_dir: PathBuf,
}

/// A path as an nginx quoted string.
fn q(p: &Path) -> String {
    let s = p.display().to_string();
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The directives a route adds inside `location /` (lab notes section 8).
fn route_snippet(route: Route) -> &'static str {
    match route {
        Route::Base => "",
        Route::Cors => concat!(
            "            add_header Access-Control-Allow-Origin \"*\" always;\n",
            "            add_header Access-Control-Allow-Methods \"GET, POST, OPTIONS\" always;\n",
            "            add_header Access-Control-Allow-Headers \"Content-Type, Authorization\" always;\n",
        ),
        Route::Header => "            add_header x-custom 1 always;\n",
        Route::Rewrite => "            rewrite ^/(.*)$ /rewritten/$1 break;\n",
    }
}

/// Renders the whole `nginx.conf`. In `Mode::Lua` `endpoints` is ignored (the list
/// lives in the shared dictionary); in `Mode::Reload` an empty list gives an upstream
/// whose only server is marked down, so requests fail at once with 502.
fn render(s: &Settings, endpoints: &[Endpoint], route: Route) -> String {
    let mut c = String::with_capacity(4096);
    let p = &s.prefix;
    let profile = match s.mode {
        Mode::Reload => "nginx-reload",
        Mode::Lua => "nginx-lua",
    };
    // `write!` to a String cannot fail.
    let _ = writeln!(
        c,
        "# ingressbench {profile}: generated, rewritten on every change"
    );
    if s.mode == Mode::Lua {
        // ndk first: the Lua module needs its symbols (lab notes section 4).
        let _ = writeln!(
            c,
            "load_module {};",
            q(&s.modules_dir.join("ndk_http_module.so"))
        );
        let _ = writeln!(
            c,
            "load_module {};",
            q(&s.modules_dir.join("ngx_http_lua_module.so"))
        );
    }
    if s.user_root {
        c.push_str("user root;\n");
    }
    c.push_str("daemon off;\nmaster_process on;\n");
    // One worker: the load generator needs the other core of the lab machine.
    c.push_str("worker_processes 1;\n");
    let _ = writeln!(c, "worker_rlimit_nofile {};", s.worker_rlimit_nofile);
    let _ = writeln!(c, "worker_shutdown_timeout {WORKER_SHUTDOWN_TIMEOUT};");
    let _ = writeln!(c, "pid {};", q(&p.join("nginx.pid")));
    let _ = writeln!(c, "lock_file {};", q(&p.join("nginx.lock")));
    // The driver sends stderr to the results folder (nginx.log).
    c.push_str("error_log stderr notice;\n");
    let _ = writeln!(
        c,
        "events {{ worker_connections {}; }}",
        s.worker_connections
    );
    c.push_str("http {\n    access_log off;\n");
    for (directive, dir) in [
        ("client_body_temp_path", "body"),
        ("proxy_temp_path", "proxy"),
        ("fastcgi_temp_path", "fastcgi"),
        ("uwsgi_temp_path", "uwsgi"),
        ("scgi_temp_path", "scgi"),
    ] {
        let _ = writeln!(c, "    {directive} {};", q(&p.join("tmp").join(dir)));
    }
    if s.mode == Mode::Lua {
        let lua_path = format!("{}/lua/?.lua;;", p.display());
        let _ = writeln!(c, "    lua_package_path {};", q(Path::new(&lua_path)));
        c.push_str("    lua_shared_dict endpoints 1m;\n");
    }
    c.push_str("    upstream backends {\n");
    match s.mode {
        Mode::Reload if endpoints.is_empty() => {
            c.push_str("        server 127.0.0.1:1 down;\n");
        }
        Mode::Reload => {
            for e in endpoints {
                let _ = writeln!(c, "        server {} max_fails=0;", e.addr);
            }
        }
        Mode::Lua => {
            c.push_str("        server 0.0.0.1;  # placeholder, the balancer picks the peer\n");
            let _ = writeln!(
                c,
                "        balancer_by_lua_block {{ require(\"{LUA_MODULE}\").balance() }}"
            );
        }
    }
    // In Lua mode keepalive must come after balancer_by_lua_block, or it is silently
    // dropped ("load balancing method redefined").
    if s.upstream_keepalive > 0 {
        let _ = writeln!(c, "        keepalive {};", s.upstream_keepalive);
        let _ = writeln!(
            c,
            "        keepalive_requests {};",
            s.upstream_keepalive_requests
        );
        c.push_str("        keepalive_timeout 60s;\n");
    }
    c.push_str("    }\n");
    if s.mode == Mode::Lua {
        let _ = writeln!(
            c,
            concat!(
                "    server {{\n",
                "        listen 127.0.0.1:{};\n",
                "        client_body_buffer_size 1m;  # = max size: the body stays in memory\n",
                "        client_max_body_size 1m;\n",
                "        location = /endpoints {{ content_by_lua_block {{ require(\"{}\").admin() }} }}\n",
                "        location / {{ return 404; }}\n",
                "    }}"
            ),
            s.admin_port, LUA_MODULE
        );
    }
    c.push_str("    server {\n");
    let _ = writeln!(c, "        listen 127.0.0.1:{} ssl;", s.https_port);
    let _ = writeln!(c, "        listen 127.0.0.1:{};", s.http_port);
    let _ = writeln!(c, "        ssl_certificate {};", q(&s.cert));
    let _ = writeln!(c, "        ssl_certificate_key {};", q(&s.key));
    c.push_str("        ssl_protocols TLSv1.2 TLSv1.3;\n");
    let _ = writeln!(c, "        keepalive_requests {CLIENT_KEEPALIVE_REQUESTS};");
    c.push_str("        location / {\n");
    c.push_str(route_snippet(route));
    if s.mode == Mode::Lua {
        let _ = writeln!(
            c,
            "            access_by_lua_block {{ require(\"{LUA_MODULE}\").access() }}"
        );
    }
    c.push_str(concat!(
        "            proxy_pass http://backends;\n",
        "            proxy_http_version 1.1;\n",
        "            proxy_set_header Connection \"\";\n",
        "            proxy_set_header Host $host;\n",
        "            proxy_next_upstream error timeout;\n",
        "        }\n",
        "    }\n",
        "}\n",
    ));
    c
}

/// A reload asked for and not yet confirmed.
#[derive(Debug)]
struct PendingReload {
    /// Every child of the master when the `SIGHUP` was sent.
    old_workers: Vec<u32>,
    /// Length of nginx.log then: problems are looked for after it.
    log_offset: u64,
}

/// The nginx system under test.
pub struct Nginx {
    mode: Mode,
    binary: PathBuf,
    settings: Option<Settings>,
    out_dir: PathBuf,
    /// What traffic should go to (the last accepted list).
    endpoints: Vec<Endpoint>,
    route: Route,
    guard: Option<Guard>,
    /// Number of the last accepted configuration (`nginx.conf.N`).
    generation: u32,
    pending_reload: Option<PendingReload>,
    /// Lua: the version the admin server gave the last list pushed.
    lua_version: u64,
    /// Lua: whether the list has been pushed since the master started.
    pushed: bool,
    /// Length of nginx.log when the master started.
    start_log_offset: u64,
}

impl Nginx {
    /// A driver in the given mode.
    pub fn new(mode: Mode) -> Self {
        Nginx {
            mode,
            binary: PathBuf::from("nginx"),
            settings: None,
            out_dir: PathBuf::new(),
            endpoints: Vec::new(),
            route: Route::Base,
            guard: None,
            generation: 0,
            pending_reload: None,
            lua_version: 0,
            pushed: false,
            start_log_offset: 0,
        }
    }

    fn settings(&self) -> Result<&Settings, LabError> {
        self.settings
            .as_ref()
            .ok_or_else(|| LabError::Other(format!("{}: prepare() was not called", self.name())))
    }

    fn conf_path(&self) -> PathBuf {
        self.out_dir.join("nginx.conf")
    }

    fn log_path(&self) -> PathBuf {
        self.out_dir.join("nginx.log")
    }

    fn running(&mut self) -> bool {
        self.guard.as_mut().is_some_and(Guard::alive)
    }

    fn master_pid(&self) -> Option<u32> {
        self.guard.as_ref().and_then(Guard::pid)
    }

    /// Checks a configuration file with `nginx -t`.
    ///
    /// # Errors
    /// [`LabError::Rejected`] with nginx's message line.
    fn test_config(&self, path: &Path) -> Result<(), LabError> {
        let s = self.settings()?;
        let (ok, text) = proc::output(
            Command::new(&self.binary)
                .arg("-t")
                .arg("-q")
                .arg("-p")
                .arg(prefix_arg(&s.prefix))
                .arg("-c")
                .arg(path),
        )
        .map_err(LabError::io(format!(
            "running {} -t",
            self.binary.display()
        )))?;
        if ok {
            return Ok(());
        }
        let detail = problem_line(&text).unwrap_or_else(|| text.trim().to_string());
        Err(LabError::Rejected {
            what: format!("nginx configuration {}", path.display()),
            detail,
        })
    }

    /// Renders, tests and installs a configuration; nothing changes when nginx rejects
    /// it (the candidate is kept as `nginx.conf.rejected`).
    fn install_config(&mut self, endpoints: &[Endpoint], route: Route) -> Result<(), LabError> {
        let text = render(self.settings()?, endpoints, route);
        let next = self.out_dir.join("nginx.conf.next");
        std::fs::write(&next, &text)
            .map_err(LabError::io(format!("writing {}", next.display())))?;
        if let Err(e) = self.test_config(&next) {
            let rejected = self.out_dir.join("nginx.conf.rejected");
            let _ = std::fs::rename(&next, &rejected);
            return Err(match e {
                LabError::Rejected { detail, .. } => LabError::Rejected {
                    what: format!("nginx configuration {}", rejected.display()),
                    detail: detail
                        .replace(&next.display().to_string(), &rejected.display().to_string()),
                },
                other => other,
            });
        }
        // A rename, so a reloading master never reads a half-written file.
        let conf = self.conf_path();
        std::fs::rename(&next, &conf)
            .map_err(LabError::io(format!("installing {}", conf.display())))?;
        self.generation += 1;
        let numbered = self.out_dir.join(format!("nginx.conf.{}", self.generation));
        std::fs::write(&numbered, &text)
            .map_err(LabError::io(format!("writing {}", numbered.display())))?;
        Ok(())
    }

    /// Sends `SIGHUP` to a running master and records what `settle()` must see.
    fn hup(&mut self) {
        let Some(master) = self.master_pid() else {
            return;
        };
        if !self.running() {
            return;
        }
        let old_workers = match self.pending_reload.take() {
            // A reload not yet confirmed: its old workers must go as well.
            Some(mut p) => {
                for w in children(master) {
                    if !p.old_workers.contains(&w) {
                        p.old_workers.push(w);
                    }
                }
                p.old_workers
            }
            None => children(master),
        };
        let log_offset = file_len(&self.log_path());
        if let Some(g) = &self.guard {
            g.signal_main(Signal::HUP);
        }
        self.pending_reload = Some(PendingReload {
            old_workers,
            log_offset,
        });
    }

    /// The admin server's address (Lua mode).
    fn admin_addr(&self) -> Result<SocketAddr, LabError> {
        Ok(SocketAddr::from((
            [127, 0, 0, 1],
            self.settings()?.admin_port,
        )))
    }

    /// Pushes `endpoints` to the Lua balancer; returns the list's new version.
    ///
    /// # Errors
    /// [`LabError::Io`] when the admin server cannot be reached,
    /// [`LabError::Rejected`] when it refuses the list.
    fn push(&mut self, endpoints: &[Endpoint]) -> Result<u64, LabError> {
        let addr = self.admin_addr()?;
        let body: String = endpoints.iter().map(|e| format!("{}\n", e.addr)).collect();
        let (status, reply) = http(addr, "POST", "/endpoints", &body).map_err(LabError::io(
            format!("nginx-lua: POST http://{addr}/endpoints"),
        ))?;
        let version = reply
            .trim()
            .strip_prefix("ok version=")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok());
        match (status, version) {
            (200, Some(v)) => {
                self.lua_version = v;
                self.pushed = true;
                Ok(v)
            }
            _ => Err(LabError::Rejected {
                what: "nginx-lua endpoint list".into(),
                detail: format!("{status} {}", reply.trim()),
            }),
        }
    }

    /// Reads the Lua balancer's list: (version, `ip:port` lines).
    fn fetch_list(&self) -> Result<(u64, Vec<String>), LabError> {
        let addr = self.admin_addr()?;
        let (status, reply) = http(addr, "GET", "/endpoints", "").map_err(LabError::io(
            format!("nginx-lua: GET http://{addr}/endpoints"),
        ))?;
        let mut lines = reply.lines();
        let version = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("version="))
            .and_then(|v| v.parse().ok());
        match (status, version) {
            (200, Some(v)) => Ok((
                v,
                lines
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect(),
            )),
            _ => Err(LabError::Other(format!(
                "nginx-lua: GET http://{addr}/endpoints answered {status} {}",
                reply.trim()
            ))),
        }
    }

    /// Waits until every old worker is gone and a new one runs.
    fn wait_workers(&mut self, p: &PendingReload, deadline: Instant) -> Result<(), LabError> {
        let Some(master) = self.master_pid() else {
            return Err(LabError::NotRunning(self.name().into()));
        };
        let mut polls = 0u32;
        loop {
            if !self.running() {
                return Err(LabError::NotRunning(format!(
                    "{} (master exited during a reload{})",
                    self.name(),
                    self.log_problem(p.log_offset)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                )));
            }
            let now = children(master);
            let old_left = now.iter().any(|w| p.old_workers.contains(w));
            let new = now.iter().any(|w| !p.old_workers.contains(w));
            if new && !old_left {
                return Ok(());
            }
            polls += 1;
            // A HUP with a configuration the master cannot apply keeps the old
            // workers; the reason is only in the log.
            if polls % 25 == 0 && !new {
                if let Some(line) = self.log_problem(p.log_offset) {
                    return Err(LabError::Rejected {
                        what: format!("{} reload", self.name()),
                        detail: line,
                    });
                }
            }
            if Instant::now() >= deadline {
                let why = self.log_problem(p.log_offset).unwrap_or_else(|| {
                    format!(
                        "old workers {:?} still running, children now {now:?}",
                        p.old_workers
                    )
                });
                return Err(LabError::NotReady(format!(
                    "{} reload ({why})",
                    self.name()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Lua: makes sure the balancer holds exactly the wanted list, pushing it again
    /// when it does not (after a restart the shared dictionary is empty).
    fn confirm_list(&mut self, deadline: Instant) -> Result<(), LabError> {
        let want: Vec<String> = self.endpoints.iter().map(|e| e.addr.to_string()).collect();
        let mut last: String;
        loop {
            match self.fetch_list() {
                Ok((v, list)) if list == want && v >= self.lua_version => return Ok(()),
                Ok((v, list)) => {
                    last = format!("version {v} holds {list:?}");
                    let eps = self.endpoints.clone();
                    if let Err(e) = self.push(&eps) {
                        last = e.to_string();
                    }
                }
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= deadline {
                return Err(LabError::NotReady(format!(
                    "nginx-lua endpoint list ({last})"
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The last `[emerg]` or `[alert]` line nginx logged after `offset`.
    fn log_problem(&self, offset: u64) -> Option<String> {
        let mut f = std::fs::File::open(self.log_path()).ok()?;
        f.seek(SeekFrom::Start(offset)).ok()?;
        let mut text = String::new();
        f.take(1 << 20).read_to_string(&mut text).ok()?;
        problem_line(&text)
    }

    /// One GET of `/` through the plain HTTP port: its status.
    fn probe(&self) -> Option<u16> {
        let s = self.settings.as_ref()?;
        TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], s.https_port)),
            Duration::from_millis(200),
        )
        .ok()?;
        http(
            SocketAddr::from(([127, 0, 0, 1], s.http_port)),
            "GET",
            "/",
            "",
        )
        .ok()
        .map(|(status, _)| status)
    }

    fn spawn(&mut self) -> Result<(), LabError> {
        let s = self.settings()?.clone();
        let log = self.log_path();
        self.start_log_offset = file_len(&log);
        let mut cmd = Command::new(&self.binary);
        cmd.arg("-p")
            .arg(prefix_arg(&s.prefix))
            .arg("-c")
            .arg(self.conf_path());
        let guard = Guard::spawn(self.name(), &mut cmd, &log)
            .map_err(LabError::io(format!("starting {}", self.binary.display())))?;
        self.guard = Some(guard);
        self.pending_reload = None;
        self.pushed = false;
        Ok(())
    }
}

impl Driver for Nginx {
    fn name(&self) -> &'static str {
        match self.mode {
            Mode::Reload => "nginx-reload",
            Mode::Lua => "nginx-lua",
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), LabError> {
        self.binary = proc::which("nginx").ok_or_else(|| LabError::MissingBinary {
            binary: "nginx".into(),
            package: "nginx-light".into(),
        })?;
        let (_, v) = proc::output(Command::new(&self.binary).arg("-V")).map_err(LabError::io(
            format!("running {} -V", self.binary.display()),
        ))?;
        let modules_dir = v
            .split_whitespace()
            .find_map(|a| a.strip_prefix("--modules-path="))
            .map_or_else(|| PathBuf::from(DEFAULT_MODULES_DIR), PathBuf::from);
        if self.mode == Mode::Lua {
            for (file, package) in [
                ("ndk_http_module.so", "libnginx-mod-http-ndk"),
                ("ngx_http_lua_module.so", "libnginx-mod-http-lua"),
            ] {
                if !modules_dir.join(file).is_file() {
                    return Err(LabError::MissingBinary {
                        binary: modules_dir.join(file).display().to_string(),
                        package: package.into(),
                    });
                }
            }
            if !Path::new(RESTY_CORE).is_file() {
                return Err(LabError::MissingBinary {
                    binary: RESTY_CORE.into(),
                    package: "lua-resty-core".into(),
                });
            }
        }
        let abs = |p: &Path| {
            std::path::absolute(p).map_err(LabError::io(format!("resolving {}", p.display())))
        };
        let prefix = abs(&ctx.work_dir)?;
        self.out_dir = abs(&ctx.out_dir)?;
        for d in [prefix.join("tmp"), prefix.join("lua"), self.out_dir.clone()] {
            std::fs::create_dir_all(&d)
                .map_err(LabError::io(format!("creating {}", d.display())))?;
        }
        let admin_port = if self.mode == Mode::Lua {
            let lua = prefix.join("lua").join(format!("{LUA_MODULE}.lua"));
            std::fs::write(&lua, BALANCER_LUA)
                .map_err(LabError::io(format!("writing {}", lua.display())))?;
            // A copy with the results: it is part of the configuration.
            let kept = self.out_dir.join(format!("{LUA_MODULE}.lua"));
            std::fs::write(&kept, BALANCER_LUA)
                .map_err(LabError::io(format!("writing {}", kept.display())))?;
            super::ports::free_port().map_err(LabError::io("choosing the nginx-lua admin port"))?
        } else {
            0
        };
        // Two descriptors per proxied connection, within the hard limit.
        let wanted = 2 * u64::from(ctx.worker_connections) + 128;
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .maximum
            .unwrap_or(u64::MAX);
        self.settings = Some(Settings {
            mode: self.mode,
            prefix,
            cert: abs(&ctx.cert)?,
            key: abs(&ctx.key)?,
            https_port: ctx.https_port,
            http_port: ctx.http_port,
            admin_port,
            upstream_keepalive: ctx.upstream_keepalive,
            upstream_keepalive_requests: ctx.upstream_keepalive_requests,
            worker_connections: ctx.worker_connections,
            worker_rlimit_nofile: wanted.min(hard),
            user_root: rustix::process::geteuid().is_root(),
            modules_dir,
        });
        self.route = Route::Base;
        self.install_config(endpoints, Route::Base)?;
        self.endpoints = endpoints.to_vec();
        Ok(())
    }

    fn start(&mut self) -> Result<(), LabError> {
        self.settings()?;
        if self.running() {
            return Err(LabError::Other(format!(
                "{} is already running",
                self.name()
            )));
        }
        self.spawn()
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LabError> {
        let deadline = Instant::now() + timeout;
        let mut admin_retries = 2;
        loop {
            if !self.running() {
                let problem = self.log_problem(self.start_log_offset);
                let admin = self.settings()?.admin_port;
                let admin_taken = problem
                    .as_deref()
                    .is_some_and(|l| l.contains(&format!("127.0.0.1:{admin} failed")));
                // The admin port is ours to choose: another free one, and again.
                if self.mode == Mode::Lua && admin_taken && admin_retries > 0 {
                    admin_retries -= 1;
                    let port = super::ports::free_port()
                        .map_err(LabError::io("choosing the nginx-lua admin port"))?;
                    if let Some(s) = self.settings.as_mut() {
                        s.admin_port = port;
                    }
                    let (eps, route) = (self.endpoints.clone(), self.route);
                    self.install_config(&eps, route)?;
                    self.spawn()?;
                    continue;
                }
                return Err(LabError::NotRunning(format!(
                    "{} (exited while starting{})",
                    self.name(),
                    problem.map(|l| format!(": {l}")).unwrap_or_default()
                )));
            }
            if self.mode == Mode::Lua && !self.pushed {
                let eps = self.endpoints.clone();
                match self.push(&eps) {
                    Ok(_) => {}
                    Err(e @ LabError::Rejected { .. }) => return Err(e),
                    Err(_) => {} // not listening yet
                }
            }
            if self.mode == Mode::Reload || self.pushed {
                match self.probe() {
                    Some(200) => return Ok(()),
                    // No endpoints: any answer (502/503) means nginx serves.
                    Some(_) if self.endpoints.is_empty() => return Ok(()),
                    _ => {}
                }
            }
            if Instant::now() >= deadline {
                let s = self.settings()?;
                return Err(LabError::NotReady(format!(
                    "{} on 127.0.0.1:{} (http {})",
                    self.name(),
                    s.https_port,
                    s.http_port
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), LabError> {
        self.settings()?;
        match self.mode {
            Mode::Reload => {
                self.install_config(endpoints, self.route)?;
                self.endpoints = endpoints.to_vec();
                self.hup();
            }
            Mode::Lua => {
                if self.running() && self.pushed {
                    self.push(endpoints)?;
                }
                // Otherwise wait_ready() pushes it.
                self.endpoints = endpoints.to_vec();
            }
        }
        Ok(())
    }

    fn apply_route(&mut self, route: Route) -> Result<(), LabError> {
        let eps = self.endpoints.clone();
        self.install_config(&eps, route)?;
        self.route = route;
        self.hup();
        Ok(())
    }

    fn reload(&mut self) -> Result<(), LabError> {
        let (eps, route) = (self.endpoints.clone(), self.route);
        self.install_config(&eps, route)?;
        self.hup();
        Ok(())
    }

    /// The driver made every change itself, so whatever `_expect` says is the last
    /// change it was asked for: settling is waiting for that one to finish.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), LabError> {
        let deadline = Instant::now() + timeout;
        if !self.running() {
            return Err(LabError::NotRunning(self.name().into()));
        }
        if let Some(p) = self.pending_reload.take() {
            self.wait_workers(&p, deadline)?;
        }
        if self.mode == Mode::Lua {
            self.confirm_list(deadline)?;
        }
        Ok(())
    }

    fn alive(&mut self) -> bool {
        self.running()
    }

    fn stop(&mut self) -> Result<(), LabError> {
        if let Some(mut g) = self.guard.take() {
            // QUIT: graceful; whatever is left after 2 s is killed with the group.
            g.stop(Signal::QUIT, Duration::from_secs(2));
        }
        self.pending_reload = None;
        self.pushed = false;
        Ok(())
    }

    fn versions(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        let Some(nginx) = proc::which("nginx") else {
            return v;
        };
        // `nginx -v` prints `nginx version: nginx/1.22.1` on stderr.
        if let Ok((_, text)) = proc::output(Command::new(nginx).arg("-v")) {
            if let Some(ver) = text
                .split("nginx/")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
            {
                v.push(("nginx".to_string(), ver.to_string()));
            }
        }
        if self.mode == Mode::Lua {
            for package in ["libnginx-mod-http-lua", "lua-resty-core"] {
                let out =
                    proc::output(Command::new("dpkg-query").args(["-W", "-f=${Version}", package]));
                if let Ok((true, ver)) = out {
                    v.push((package.to_string(), ver.trim().to_string()));
                }
            }
        }
        v
    }
}

/// The `-p` argument: nginx wants the prefix to end with a slash.
fn prefix_arg(prefix: &Path) -> String {
    let mut s = prefix.display().to_string();
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

/// The last `[emerg]`/`[alert]` line of nginx output, without its timestamp and pids.
fn problem_line(text: &str) -> Option<String> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("[emerg]") || l.contains("[alert]"))?;
    // "2026/11/22 03:49:13 [emerg] 14322#14322: invalid port ..." -> "invalid port ..."
    let msg = line.split_once("] ").map_or(line, |(_, rest)| rest);
    let msg = match msg.split_once(": ") {
        Some((pids, m))
            if pids
                .split('#')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            m
        }
        _ => msg,
    };
    Some(msg.trim().to_string())
}

/// Live (non-zombie) children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let listed = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    let pids: Vec<u32> = match listed {
        Ok(s) => s
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        // Kernels without CONFIG_PROC_CHILDREN: look for the parent pid in every stat.
        Err(_) => std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .filter(|p| stat_fields(*p).is_some_and(|(_, ppid)| ppid == pid))
            .collect(),
    };
    pids.into_iter()
        .filter(|p| stat_fields(*p).is_some_and(|(state, _)| state != 'Z' && state != 'X'))
        .collect()
}

/// (state, parent pid) from `/proc/<pid>/stat`.
fn stat_fields(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// One request to a local server (`http1::client`, 2 s for the whole exchange):
/// (status, decoded body). A body is sent as plain text.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let headers: &[(&str, &str)] = if body.is_empty() {
        &[]
    } else {
        &[("Content-Type", "text/plain")]
    };
    let r = client::request(
        addr,
        method,
        path,
        headers,
        body.as_bytes(),
        Duration::from_secs(2),
    )?;
    Ok((r.status, r.text()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: Mode) -> Settings {
        Settings {
            mode,
            prefix: PathBuf::from("/tmp/ib-work"),
            cert: PathBuf::from("/tmp/ib/cert.pem"),
            key: PathBuf::from("/tmp/ib/key.pem"),
            https_port: 8443,
            http_port: 8080,
            admin_port: 9901,
            upstream_keepalive: 100,
            upstream_keepalive_requests: 100_000_000,
            worker_connections: 10_000,
            worker_rlimit_nofile: 20_000,
            user_root: false,
            modules_dir: PathBuf::from(DEFAULT_MODULES_DIR),
        }
    }

    fn ep(id: &str, port: u16) -> Endpoint {
        Endpoint {
            id: id.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    #[test]
    fn reload_config_lists_the_endpoints_and_keepalive() {
        let c = render(
            &settings(Mode::Reload),
            &[ep("b1", 5001), ep("b2", 5002)],
            Route::Base,
        );
        assert!(c.contains("server 127.0.0.1:5001 max_fails=0;"), "{c}");
        assert!(c.contains("server 127.0.0.1:5002 max_fails=0;"), "{c}");
        assert!(c.contains("keepalive 100;"), "{c}");
        assert!(c.contains("keepalive_requests 100000000;"), "{c}");
        assert!(c.contains("proxy_http_version 1.1;"), "{c}");
        assert!(c.contains("proxy_set_header Connection \"\";"), "{c}");
        assert!(c.contains("worker_processes 1;"), "{c}");
        assert!(c.contains("events { worker_connections 10000; }"), "{c}");
        assert!(c.contains("listen 127.0.0.1:8443 ssl;"), "{c}");
        assert!(c.contains("listen 127.0.0.1:8080;"), "{c}");
        assert!(c.contains("ssl_protocols TLSv1.2 TLSv1.3;"), "{c}");
        assert!(c.contains("pid \"/tmp/ib-work/nginx.pid\";"), "{c}");
        assert!(!c.contains("lua"), "{c}");
        assert!(!c.contains("user root"), "{c}");
    }

    #[test]
    fn reload_config_without_endpoints_fails_fast() {
        let c = render(&settings(Mode::Reload), &[], Route::Base);
        assert!(c.contains("server 127.0.0.1:1 down;"), "{c}");
    }

    #[test]
    fn lua_config_loads_ndk_first_and_keepalive_after_the_balancer() {
        let c = render(&settings(Mode::Lua), &[ep("b1", 5001)], Route::Base);
        let ndk = c.find("ndk_http_module.so").unwrap();
        let lua = c.find("ngx_http_lua_module.so").unwrap();
        assert!(ndk < lua);
        let balancer = c.find("balancer_by_lua_block").unwrap();
        let keepalive = c.find("keepalive 100;").unwrap();
        assert!(balancer < keepalive);
        assert!(c.contains("listen 127.0.0.1:9901;"));
        assert!(
            !c.contains("5001"),
            "the list lives in the shared dict: {c}"
        );
    }

    #[test]
    fn routes_add_their_directives() {
        let s = settings(Mode::Reload);
        let cors = render(&s, &[], Route::Cors);
        assert!(cors.contains("add_header Access-Control-Allow-Origin \"*\" always;"));
        assert!(
            cors.contains("add_header Access-Control-Allow-Methods \"GET, POST, OPTIONS\" always;")
        );
        assert!(cors.contains(
            "add_header Access-Control-Allow-Headers \"Content-Type, Authorization\" always;"
        ));
        assert!(render(&s, &[], Route::Header).contains("add_header x-custom 1 always;"));
        assert!(render(&s, &[], Route::Rewrite).contains("rewrite ^/(.*)$ /rewritten/$1 break;"));
        let base = render(&s, &[], Route::Base);
        assert!(!base.contains("add_header") && !base.contains("rewrite "));
    }

    #[test]
    fn keepalive_zero_leaves_the_directive_out() {
        let mut s = settings(Mode::Reload);
        s.upstream_keepalive = 0;
        assert!(!render(&s, &[ep("b1", 5001)], Route::Base).contains("keepalive "));
    }

    #[test]
    fn problem_line_keeps_only_the_message() {
        let out = "2026/11/22 03:49:13 [emerg] 14322#14322: invalid port in upstream \"127.0.0.1:0\" in /x/nginx.conf:4\nnginx: configuration file /x/nginx.conf test failed\n";
        assert_eq!(
            problem_line(out).unwrap(),
            "invalid port in upstream \"127.0.0.1:0\" in /x/nginx.conf:4"
        );
        assert_eq!(problem_line("all good\n"), None);
        let bind = "2026/11/22 03:49:13 [emerg] 1#1: bind() to 127.0.0.1:80 failed (98: Address already in use)";
        assert_eq!(
            problem_line(bind).unwrap(),
            "bind() to 127.0.0.1:80 failed (98: Address already in use)"
        );
        let plain = "nginx: [emerg] unknown directive \"x\" in /c:3";
        assert_eq!(
            problem_line(plain).unwrap(),
            "unknown directive \"x\" in /c:3"
        );
    }

    #[test]
    fn prefix_ends_with_a_slash() {
        assert_eq!(prefix_arg(Path::new("/a/b")), "/a/b/");
        assert_eq!(prefix_arg(Path::new("/a/b/")), "/a/b/");
    }
}
