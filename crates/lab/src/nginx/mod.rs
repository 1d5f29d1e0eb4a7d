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
//! This module owns the driver: its state and the order of the steps. The generated
//! configuration (kept in the results folder as `nginx.conf`, with every accepted
//! version numbered `nginx.conf.1`, `.2`, …) is rendered in `config.rs`, the Lua
//! balancer (`balancer.lua`) and its admin client are in `lua.rs`, and the nginx
//! process (a foreground master in its own process group) is started, signalled and
//! watched in `process.rs`.

mod config;
mod lua;
mod process;

use self::config::{render, Settings};
use self::lua::{BALANCER_LUA, LUA_MODULE, RESTY_CORE};
use super::driver::{
    Capabilities, Driver, DriverContext, Endpoint, Expect, Handshakes, Route, SutError,
};
use super::proc::{self, Guard};
use rustix::process::Signal;
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

/// A reload asked for and not yet confirmed.
#[derive(Debug)]
struct PendingReload {
    /// Every child of the master when the `SIGHUP` was sent.
    old_workers: Vec<u32>,
    /// Length of nginx.log then: problems are looked for after it.
    log_offset: u64,
}

pub(crate) use config::temp_paths;

/// Handshakes in an access log of `$connection_requests $ssl_session_reused`: the
/// first request of each TLS connection, `.` for a full handshake and `r` for a
/// resumed session (plain HTTP logs an empty second field and is not counted).
fn count_handshakes(log: &str) -> Handshakes {
    let mut h = Handshakes {
        source: "nginx access log ($ssl_session_reused)",
        ..Handshakes::default()
    };
    for line in log.lines() {
        let mut f = line.split_ascii_whitespace();
        if f.next() != Some("1") {
            continue;
        }
        match f.next() {
            Some(".") => h.full += 1,
            Some("r") => h.resumed += 1,
            _ => {}
        }
    }
    h
}

/// nginx's version, as a plain server runs it (the network lab's server).
pub fn static_versions() -> Vec<(String, String)> {
    process::versions(Mode::Reload)
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
    /// The route set beside `route` ([`sut::routes`]), if one was applied.
    route_set: Option<sut::RouteSet>,
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
            route_set: None,
            guard: None,
            generation: 0,
            pending_reload: None,
            lua_version: 0,
            pushed: false,
            start_log_offset: 0,
        }
    }

    fn settings(&self) -> Result<&Settings, SutError> {
        self.settings
            .as_ref()
            .ok_or_else(|| SutError::NotPrepared(self.name().into()))
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

    /// Renders, tests and installs a configuration; nothing changes when nginx rejects
    /// it (the candidate is kept as `nginx.conf.rejected`).
    fn install_config(&mut self, endpoints: &[Endpoint], route: Route) -> Result<(), SutError> {
        let text = render(self.settings()?, endpoints, route, self.route_set.as_ref());
        let next = self.out_dir.join("nginx.conf.next");
        std::fs::write(&next, &text)
            .map_err(SutError::io(format!("writing {}", next.display())))?;
        if let Err(e) = self.test_config(&next) {
            let rejected = self.out_dir.join("nginx.conf.rejected");
            let _ = std::fs::rename(&next, &rejected);
            return Err(match e {
                SutError::Rejected { detail, .. } => SutError::Rejected {
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
            .map_err(SutError::io(format!("installing {}", conf.display())))?;
        self.generation += 1;
        let numbered = self.out_dir.join(format!("nginx.conf.{}", self.generation));
        std::fs::write(&numbered, &text)
            .map_err(SutError::io(format!("writing {}", numbered.display())))?;
        Ok(())
    }
}

impl Driver for Nginx {
    fn process_groups(&self) -> Vec<u32> {
        self.master_pid().into_iter().collect()
    }

    fn handshakes(&mut self) -> Option<Handshakes> {
        let log = self.settings.as_ref()?.tls_log.as_ref()?;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        Some(count_handshakes(&text))
    }

    fn name(&self) -> &'static str {
        match self.mode {
            Mode::Reload => "nginx-reload",
            Mode::Lua => "nginx-lua",
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), SutError> {
        self.binary = proc::which("nginx").ok_or_else(|| SutError::MissingBinary {
            binary: "nginx".into(),
            package: "nginx-light".into(),
        })?;
        let (_, v) = proc::output(Command::new(&self.binary).arg("-V")).map_err(SutError::io(
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
                    return Err(SutError::MissingBinary {
                        binary: modules_dir.join(file).display().to_string(),
                        package: package.into(),
                    });
                }
            }
            if !Path::new(RESTY_CORE).is_file() {
                return Err(SutError::MissingBinary {
                    binary: RESTY_CORE.into(),
                    package: "lua-resty-core".into(),
                });
            }
        }
        let abs = |p: &Path| {
            std::path::absolute(p).map_err(SutError::io(format!("resolving {}", p.display())))
        };
        let prefix = abs(&ctx.work_dir)?;
        self.out_dir = abs(&ctx.out_dir)?;
        for d in [prefix.join("tmp"), prefix.join("lua"), self.out_dir.clone()] {
            std::fs::create_dir_all(&d)
                .map_err(SutError::io(format!("creating {}", d.display())))?;
        }
        let admin_port = if self.mode == Mode::Lua {
            let lua = prefix.join("lua").join(format!("{LUA_MODULE}.lua"));
            std::fs::write(&lua, BALANCER_LUA)
                .map_err(SutError::io(format!("writing {}", lua.display())))?;
            // A copy with the results: it is part of the configuration.
            let kept = self.out_dir.join(format!("{LUA_MODULE}.lua"));
            std::fs::write(&kept, BALANCER_LUA)
                .map_err(SutError::io(format!("writing {}", kept.display())))?;
            super::ports::free_port().map_err(SutError::io("choosing the nginx-lua admin port"))?
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
            workers: ctx.workers(),
            cpus: ctx.cpus.clone(),
            worker_rlimit_nofile: wanted.min(hard),
            user_root: rustix::process::geteuid().is_root(),
            modules_dir,
            tls_log: ctx
                .count_handshakes
                .then(|| self.out_dir.join("tls-handshakes.log")),
            passive: ctx.passive_health.clone(),
            http2: ctx.http2,
            grpc: ctx.upstream_h2c,
            fixture: ctx.probe_fixture,
        });
        self.route = Route::Base;
        self.install_config(endpoints, Route::Base)?;
        self.endpoints = endpoints.to_vec();
        Ok(())
    }

    fn start(&mut self) -> Result<(), SutError> {
        self.settings()?;
        if self.running() {
            return Err(SutError::AlreadyRunning(self.name().into()));
        }
        self.spawn()
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SutError> {
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
                        .map_err(SutError::io("choosing the nginx-lua admin port"))?;
                    if let Some(s) = self.settings.as_mut() {
                        s.admin_port = port;
                    }
                    let (eps, route) = (self.endpoints.clone(), self.route);
                    self.install_config(&eps, route)?;
                    self.spawn()?;
                    continue;
                }
                return Err(SutError::ExitedAtStart {
                    process: self.name().into(),
                    why: problem,
                });
            }
            if self.mode == Mode::Lua && !self.pushed {
                let eps = self.endpoints.clone();
                match self.push(&eps) {
                    Ok(_) => {}
                    Err(e @ SutError::Rejected { .. }) => return Err(e),
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
                return Err(SutError::NotReady(format!(
                    "{} on 127.0.0.1:{} (http {})",
                    self.name(),
                    s.https_port,
                    s.http_port
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), SutError> {
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

    fn apply_route(&mut self, route: Route) -> Result<(), SutError> {
        let eps = self.endpoints.clone();
        self.install_config(&eps, route)?;
        self.route = route;
        self.hup();
        Ok(())
    }

    /// A route set goes into the configuration and nginx reloads, as ingress-nginx
    /// does for a changed Ingress: the new workers serve the new routes.
    fn apply_route_set(&mut self, set: &sut::RouteSet) -> Result<Option<u64>, SutError> {
        let before = self.route_set.replace(*set);
        let (eps, route) = (self.endpoints.clone(), self.route);
        if let Err(e) = self.install_config(&eps, route) {
            self.route_set = before;
            return Err(e);
        }
        self.hup();
        let bytes = std::fs::metadata(self.conf_path()).map(|m| m.len()).ok();
        Ok(bytes)
    }

    fn reload(&mut self) -> Result<(), SutError> {
        let (eps, route) = (self.endpoints.clone(), self.route);
        self.install_config(&eps, route)?;
        self.hup();
        Ok(())
    }

    /// The new files go into the configuration and nginx reloads, as the NGINX
    /// controllers do for a changed TLS Secret (ingress-nginx can also swap
    /// certificates in Lua without a reload; that path is not modelled here): new
    /// workers serve the new certificate, old ones finish their connections.
    fn rotate_certificate(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        let abs = |p: &Path| {
            std::path::absolute(p).map_err(SutError::io(format!("resolving {}", p.display())))
        };
        let (cert, key) = (abs(cert)?, abs(key)?);
        let s = self
            .settings
            .as_mut()
            .ok_or_else(|| SutError::NotPrepared("nginx".into()))?;
        let before = (
            std::mem::replace(&mut s.cert, cert),
            std::mem::replace(&mut s.key, key),
        );
        let (eps, route) = (self.endpoints.clone(), self.route);
        if let Err(e) = self.install_config(&eps, route) {
            if let Some(s) = self.settings.as_mut() {
                (s.cert, s.key) = before;
            }
            return Err(e);
        }
        self.hup();
        Ok(())
    }

    /// The driver made every change itself, so whatever `_expect` says is the last
    /// change it was asked for: settling is waiting for that one to finish.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), SutError> {
        let deadline = Instant::now() + timeout;
        if !self.running() {
            return Err(SutError::NotRunning(self.name().into()));
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

    fn stop(&mut self) -> Result<(), SutError> {
        if let Some(mut g) = self.guard.take() {
            // QUIT: graceful; whatever is left after 2 s is killed with the group.
            g.stop(Signal::QUIT, Duration::from_secs(2));
        }
        self.pending_reload = None;
        self.pushed = false;
        Ok(())
    }

    fn versions(&self) -> Vec<(String, String)> {
        process::versions(self.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::count_handshakes;

    #[test]
    fn a_connection_counts_once_by_its_first_request() {
        // Two full handshakes, one resumed, a second request on a kept connection,
        // and a plain-HTTP request (empty `$ssl_session_reused`).
        let h = count_handshakes("1 .\n1 r\n2 .\n1 .\n1 \n");
        assert_eq!((h.full, h.resumed), (2, 1));
        assert!(h.source.contains("ssl_session_reused"));
    }
}
