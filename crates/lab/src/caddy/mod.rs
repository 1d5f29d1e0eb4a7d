//! The `caddy-api` system under test: one `caddy run` process changed only through
//! its admin API, never restarted, the way a Caddy-based ingress controller drives it.
//!
//! This module owns the driver and the process. Caddy's JSON configuration is built by
//! the pure [`config()`] function (`config.rs`) and kept in `out_dir/caddy.json`,
//! rewritten after every change; the calls to the admin endpoint on 127.0.0.1
//! (`http1::client`) are in `admin.rs`. Endpoint
//! changes PATCH the proxy handler's upstreams through its `@id`; route changes PATCH
//! the handlers of a pass-through middleware route that sits before the proxy route,
//! so the proxy's path never moves; a reload POSTs the whole config to `/load`, and
//! so does a route set ([`Caddy::apply_route_set`]), which comes first in the
//! server's routes, before the middleware and proxy routes.
//!
//! Caddy applies a config synchronously: the admin call answers 200 once the new
//! config is serving. [`Caddy::settle`] therefore only reads the config back and
//! checks it equals what was asked; both durations are kept ([`Caddy::last_change`]).
//! Note that every real change re-provisions the whole server in Caddy (new upstream
//! connection pool, idle client connections closed): that cost is what this profile
//! measures. Caddy has no per-connection request limit for upstreams, so
//! `upstream_keepalive_requests` and `worker_connections` have no equivalent here.

mod admin;
mod config;

pub use self::config::{config, middleware, upstreams};

use self::admin::admin;
use self::config::{proxy_handler, MW_ID, PROXY_ID};
use super::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, Route, SutError};
use super::proc::{self, Guard};
use http1::client;
use serde_json::Value;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long `stop()` waits after `POST /stop` before killing the process group.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Attempts at starting when a port turned out to be taken (free-port race).
const START_ATTEMPTS: u32 = 3;

/// How long the last change took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeTiming {
    /// The admin call, e.g. `PATCH /id/proxy/upstreams`.
    pub what: String,
    /// From sending the call to its 200 (Caddy answers once the config is serving).
    pub call: Duration,
    /// The read-back in `settle()` that confirmed the config in force; `None` until then.
    pub confirm: Option<Duration>,
}

/// A change that `settle()` has yet to confirm: reading `path` must give `value`.
#[derive(Debug)]
struct Pending {
    path: String,
    value: Value,
}

/// The `caddy-api` driver.
#[derive(Debug)]
pub struct Caddy {
    binary: Option<PathBuf>,
    ctx: Option<DriverContext>,
    admin_port: u16,
    endpoints: Vec<Endpoint>,
    route: Route,
    /// The route set beside `route` ([`sut::routes`]), if one was applied.
    route_set: Option<sut::RouteSet>,
    guard: Option<Guard>,
    pending: Option<Pending>,
    last: Option<ChangeTiming>,
    version: Option<String>,
}

impl Default for Caddy {
    fn default() -> Caddy {
        Caddy {
            binary: None,
            ctx: None,
            admin_port: 0,
            endpoints: Vec::new(),
            route: Route::Base,
            route_set: None,
            guard: None,
            pending: None,
            last: None,
            version: None,
        }
    }
}

impl Caddy {
    /// A driver for Caddy's admin API; nothing happens until `prepare()`.
    pub fn new() -> Self {
        Caddy::default()
    }

    /// The pid of the running `caddy run` process (it stays the same across changes).
    pub fn pid(&self) -> Option<u32> {
        self.guard.as_ref().and_then(Guard::pid)
    }

    /// The admin API's port on 127.0.0.1, chosen free in `prepare()`.
    pub fn admin_port(&self) -> u16 {
        self.admin_port
    }

    /// Timing of the last change asked for (admin call, and its confirmation once
    /// `settle()` has run).
    pub fn last_change(&self) -> Option<&ChangeTiming> {
        self.last.as_ref()
    }

    fn ctx(&self) -> Result<&DriverContext, SutError> {
        self.ctx
            .as_ref()
            .ok_or_else(|| SutError::NotPrepared("caddy-api".into()))
    }

    fn config_path(&self) -> Result<PathBuf, SutError> {
        Ok(self.ctx()?.out_dir.join("caddy.json"))
    }

    fn current_config(&self) -> Result<Value, SutError> {
        Ok(config(
            self.ctx()?,
            self.admin_port,
            &self.endpoints,
            self.route,
            self.route_set.as_ref(),
        ))
    }

    /// Writes the config in force (or to be started with) to `out_dir/caddy.json`.
    fn write_config(&self) -> Result<(), SutError> {
        let path = self.config_path()?;
        let text = serde_json::to_string_pretty(&self.current_config()?)
            .map_err(SutError::render("caddy config"))?;
        std::fs::write(&path, text + "\n")
            .map_err(SutError::io(format!("writing {}", path.display())))
    }

    fn running(&mut self) -> bool {
        self.guard.as_mut().is_some_and(Guard::alive)
    }

    /// Starts `caddy run` once; the config file must be written.
    fn spawn(&mut self) -> Result<(), SutError> {
        let ctx = self.ctx()?.clone();
        let binary = self
            .binary
            .clone()
            .ok_or_else(|| SutError::NotPrepared("caddy-api".into()))?;
        let home = ctx.work_dir.join("home");
        for d in ["data", "config", "cache"] {
            std::fs::create_dir_all(home.join(d))
                .map_err(SutError::io(format!("creating {}", home.display())))?;
        }
        let mut cmd = Command::new(binary);
        cmd.arg("run")
            .arg("--config")
            .arg(self.config_path()?)
            .arg("--pidfile")
            .arg(ctx.work_dir.join("caddy.pid"))
            // Caddy writes under HOME/XDG dirs (e.g. `.step`) even with file storage
            // configured: keep all of it in the run's scratch folder.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            // One Go scheduler thread per CPU of its set, like the other proxies' workers.
            .env("GOMAXPROCS", ctx.workers().to_string());
        let log = ctx.out_dir.join("caddy.log");
        let guard = Guard::spawn_on("caddy", &mut cmd, &log, &ctx.cpus)
            .map_err(SutError::io("starting caddy"))?;
        self.guard = Some(guard);
        Ok(())
    }

    /// Whether the admin API, the HTTP port and the HTTPS port all answer.
    fn answers(&self, ctx: &DriverContext) -> bool {
        let short = Duration::from_secs(1);
        let local = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let admin_ok = client::request(local(self.admin_port), "GET", "/config/", &[], b"", short)
            .is_ok_and(|r| r.status == 200);
        if !admin_ok {
            return false;
        }
        // With no endpoints Caddy answers 503 by design; any answer means it serves.
        let http_ok = client::request(local(ctx.http_port), "GET", "/", &[], b"", short)
            .is_ok_and(|r| r.status == 200 || self.endpoints.is_empty());
        let https_addr = SocketAddr::from(([127, 0, 0, 1], ctx.https_port));
        http_ok && TcpStream::connect_timeout(&https_addr, short).is_ok()
    }
}

impl Caddy {
    /// POSTs the config of the driver's state to `/load` (not forced: Caddy skips a
    /// config equal to the one in force), to be confirmed by `settle()` reading it
    /// back; the size of the JSON sent. The caller keeps it as `caddy.json`.
    fn load_current(&mut self) -> Result<u64, SutError> {
        let full = self.current_config()?;
        let bytes = full.to_string().len() as u64;
        let confirm = Pending {
            path: "/config/".into(),
            value: full.clone(),
        };
        self.change("POST", "/load", &full, confirm, &[])?;
        Ok(bytes)
    }
}

/// The last line of Caddy's log that says why it stopped.
fn last_error(log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| l.contains("error") || l.contains("Error"))
        .or_else(|| text.lines().last())
        .unwrap_or("no output")
        .to_string()
}

/// A free port on 127.0.0.1 other than the ones in `taken`.
fn free_port_except(taken: &[u16]) -> Result<u16, SutError> {
    loop {
        let p = super::ports::free_port().map_err(SutError::io("choosing a free port"))?;
        if !taken.contains(&p) {
            return Ok(p);
        }
    }
}

impl Driver for Caddy {
    fn handshakes(&mut self) -> Option<crate::driver::Handshakes> {
        let ctx = self.ctx.as_ref().filter(|c| c.count_handshakes)?;
        // Caddy writes each entry as it is made (no buffer), so what has been
        // answered is in the file.
        let log = std::fs::read_to_string(config::handshake_log(ctx)).unwrap_or_default();
        Some(config::count_handshakes(&log))
    }

    fn process_groups(&self) -> Vec<u32> {
        self.pid().into_iter().collect()
    }

    fn name(&self) -> &'static str {
        "caddy-api"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), SutError> {
        let binary = proc::which("caddy").ok_or(SutError::MissingBinary {
            binary: "caddy".into(),
            package: "caddy".into(),
        })?;
        self.version = version_of(&binary);
        self.binary = Some(binary);
        self.admin_port = free_port_except(&[ctx.http_port, ctx.https_port])?;
        self.ctx = Some(ctx.clone());
        self.endpoints = endpoints.to_vec();
        self.route = Route::Base;
        self.pending = None;
        self.last = None;
        self.write_config()
    }

    fn start(&mut self) -> Result<(), SutError> {
        if self.running() {
            return Err(SutError::AlreadyRunning("caddy".into()));
        }
        self.write_config()?;
        self.spawn()
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SutError> {
        let deadline = Instant::now() + timeout;
        let ctx = self.ctx()?.clone();
        let log = ctx.out_dir.join("caddy.log");
        let mut attempts = 1;
        loop {
            if !self.running() {
                let why = last_error(&log);
                // The free-port race: another process took a port between choosing
                // and binding. Our admin port can be chosen again; the runner's ports
                // may simply be free again a moment later.
                if why.contains("address already in use")
                    && attempts < START_ATTEMPTS
                    && Instant::now() < deadline
                {
                    attempts += 1;
                    self.admin_port = free_port_except(&[ctx.http_port, ctx.https_port])?;
                    self.write_config()?;
                    self.spawn()?;
                    continue;
                }
                return Err(SutError::ExitedAtStart {
                    process: "caddy".into(),
                    why: Some(why),
                });
            }
            if self.answers(&ctx) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady("caddy".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), SutError> {
        let before_empty = self.endpoints.is_empty();
        if !self.running() {
            // Not started yet (or stopped): the next start uses the new list.
            self.endpoints = endpoints.to_vec();
            return self.write_config();
        }
        if self.route_set.is_some_and(|s| s.count > 0) {
            // Every route of the set has its own copy of the proxy handler (only the
            // main one has the `@id`): the whole config, so they all change at once.
            let before = std::mem::replace(&mut self.endpoints, endpoints.to_vec());
            if let Err(e) = self.load_current() {
                self.endpoints = before;
                return Err(e);
            }
            return self.write_config();
        }
        // Going to or from no endpoints also changes the retry settings, so the
        // whole handler is replaced; otherwise only the upstream list.
        let (path, value) = if before_empty == endpoints.is_empty() {
            (format!("/id/{PROXY_ID}/upstreams"), upstreams(endpoints))
        } else {
            (
                format!("/id/{PROXY_ID}"),
                proxy_handler(self.ctx()?, endpoints),
            )
        };
        let confirm = Pending {
            path: path.clone(),
            value: value.clone(),
        };
        self.change("PATCH", &path, &value, confirm, &[])?;
        self.endpoints = endpoints.to_vec();
        self.write_config()
    }

    fn apply_route(&mut self, route: Route) -> Result<(), SutError> {
        if !self.running() {
            self.route = route;
            return self.write_config();
        }
        let path = format!("/id/{MW_ID}/handle");
        let value = middleware(route);
        let confirm = Pending {
            path: path.clone(),
            value: value.clone(),
        };
        self.change("PATCH", &path, &value, confirm, &[])?;
        self.route = route;
        self.write_config()
    }

    /// A route set goes into the whole config, which is POSTed to `/load`, as
    /// Caddy's ingress controller loads the whole config it generated on every
    /// Ingress change. `/load` rather than a PATCH of the server's routes: a PATCH
    /// costs Caddy the same (any admin change re-provisions the whole config), but
    /// would have to address the route set by its index among the routes and would
    /// leave the set's copies of the proxy handler to a change of its own; `/load`
    /// replaces everything at once, and Caddy keeps the config in force when it
    /// refuses the new one (so does the driver: the previous set stays). Returns the
    /// size of the JSON sent (compact), the whole config; settled by reading the
    /// config back (`GET /config/`) like a reload.
    fn apply_route_set(&mut self, set: &sut::RouteSet) -> Result<Option<u64>, SutError> {
        let before = self.route_set.replace(*set);
        let bytes = if self.running() {
            self.load_current()
        } else {
            // Not started yet (or stopped): the next start uses the set.
            self.current_config().map(|c| c.to_string().len() as u64)
        };
        match bytes {
            Ok(b) => self.write_config().map(|()| Some(b)),
            Err(e) => {
                self.route_set = before;
                Err(e)
            }
        }
    }

    fn reload(&mut self) -> Result<(), SutError> {
        if !self.running() {
            return Err(SutError::NotRunning("caddy".into()));
        }
        let full = self.current_config()?;
        let confirm = Pending {
            path: "/config/".into(),
            value: full.clone(),
        };
        // Caddy skips a /load identical to the config in force unless told to
        // revalidate; a reload must really re-provision.
        let force = [("Cache-Control", "must-revalidate")];
        self.change("POST", "/load", &full, confirm, &force)?;
        self.write_config()
    }

    /// The new files replace the loaded ones through the admin API (a PATCH of
    /// `apps/tls/certificates/load_files`), as an API-driven controller gives Caddy
    /// a changed Secret: Caddy re-provisions, and new handshakes get the new
    /// certificate while open connections stay. Settled by reading it back.
    fn rotate_certificate(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        sut::driver::rotate_with(
            self,
            |d| d.ctx.as_mut(),
            (cert, key),
            |d| {
                if !d.running() {
                    return d.write_config();
                }
                let path = "/config/apps/tls/certificates/load_files";
                let value =
                    d.current_config()?["apps"]["tls"]["certificates"]["load_files"].clone();
                let confirm = Pending {
                    path: path.into(),
                    value: value.clone(),
                };
                d.change("PATCH", path, &value, confirm, &[])?;
                d.write_config()
            },
        )
    }

    /// The driver made every change itself, so whatever `_expect` says is the last
    /// change it was asked for: settling is waiting for that one to finish.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), SutError> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let t = Instant::now();
        let deadline = t + timeout;
        loop {
            if !self.running() {
                return Err(SutError::NotRunning("caddy".into()));
            }
            let reply = admin(self.admin_port, "GET", &pending.path, &[], b"");
            let in_force = reply
                .ok()
                .filter(|r| r.status == 200)
                .and_then(|r| serde_json::from_slice::<Value>(&r.body).ok());
            if in_force.as_ref() == Some(&pending.value) {
                if let Some(last) = self.last.as_mut() {
                    last.confirm = Some(t.elapsed());
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!(
                    "caddy config at {} (it differs from the one asked for)",
                    pending.path
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn alive(&mut self) -> bool {
        self.running()
    }

    fn stop(&mut self) -> Result<(), SutError> {
        let Some(mut guard) = self.guard.take() else {
            return Ok(());
        };
        if guard.alive() {
            // Caddy may close the connection while exiting: the reply does not matter.
            let addr = SocketAddr::from(([127, 0, 0, 1], self.admin_port));
            let json = [("Content-Type", "application/json")];
            let _ = client::request(addr, "POST", "/stop", &json, b"", STOP_GRACE);
            let deadline = Instant::now() + STOP_GRACE;
            while guard.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // Kills whatever is left of the group and reaps the process.
        guard.stop(rustix::process::Signal::KILL, Duration::ZERO);
        self.pending = None;
        Ok(())
    }

    fn versions(&self) -> Vec<(String, String)> {
        let version = self
            .version
            .clone()
            .or_else(|| proc::which("caddy").as_deref().and_then(version_of));
        version
            .map(|v| vec![("caddy".to_string(), v)])
            .unwrap_or_default()
    }
}

/// Runs `caddy version` and parses its answer.
fn version_of(binary: &std::path::Path) -> Option<String> {
    let (ok, out) = proc::output(Command::new(binary).arg("version")).ok()?;
    ok.then(|| parse_version(&out)).flatten()
}

/// `2.6.2` (Debian) or `v2.7.6 h1:...` (upstream builds) → `2.6.2` / `2.7.6`.
fn parse_version(out: &str) -> Option<String> {
    let first = out.split_whitespace().next()?;
    let v = first.strip_prefix('v').unwrap_or(first);
    v.starts_with(|c: char| c.is_ascii_digit())
        .then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_debian_and_upstream_output() {
        assert_eq!(parse_version("2.6.2\n").as_deref(), Some("2.6.2"));
        assert_eq!(
            parse_version("v2.7.6 h1:w0NymbG2m9PcvKWsrXO6EEkY9Ru4FJK8uQbYcev1p3A=\n").as_deref(),
            Some("2.7.6")
        );
        assert_eq!(parse_version("caddy: not found"), None);
    }
}
