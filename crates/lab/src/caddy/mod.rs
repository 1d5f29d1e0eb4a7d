//! The `caddy-api` system under test: one `caddy run` process changed only through
//! its admin API, never restarted, the way a Caddy-based ingress controller drives it.
//!
//! This module owns Caddy's JSON configuration (built by the pure [`config`]
//! function and kept in `out_dir/caddy.json`, rewritten after every change), the
//! process, and the calls to the admin endpoint on 127.0.0.1 (`http1::client`). Endpoint
//! changes PATCH the proxy handler's upstreams through its `@id`; route changes PATCH
//! the handlers of a pass-through middleware route that sits before the proxy route,
//! so the proxy's path never moves; a reload POSTs the whole config to `/load`.
//!
//! Caddy applies a config synchronously: the admin call answers 200 once the new
//! config is serving. [`Caddy::settle`] therefore only reads the config back and
//! checks it equals what was asked; both durations are kept ([`Caddy::last_change`]).
//! Note that every real change re-provisions the whole server in Caddy (new upstream
//! connection pool, idle client connections closed): that cost is what this profile
//! measures. Caddy has no per-connection request limit for upstreams, so
//! `upstream_keepalive_requests` and `worker_connections` have no equivalent here.

use super::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, LabError, Route};
use super::proc::{self, Guard};
use http1::client::{self, Response};
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// `@id` of the reverse-proxy handler (its upstreams are at `/id/proxy/upstreams`).
const PROXY_ID: &str = "proxy";
/// `@id` of the middleware route (its handlers are at `/id/mw/handle`).
const MW_ID: &str = "mw";
/// Tag that ties our certificate to the TLS connection policy.
const CERT_TAG: &str = "ingressbench";
/// How long the old server may finish in-flight requests after a change or stop.
const GRACE: &str = "10s";
/// Longest wait for an admin reply: a change waits for the old server's shutdown,
/// which may take up to the grace period.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(15);
/// How long `stop()` waits after `POST /stop` before killing the process group.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Attempts at starting when a port turned out to be taken (free-port race).
const START_ATTEMPTS: u32 = 3;

/// The Caddy configuration routing to `endpoints` with `route`.
///
/// One server listens on both ports: Caddy serves TLS on every listener of a server
/// with TLS connection policies except the app's `http_port`, which stays plain.
/// No automatic HTTPS (no ACME, no redirects), no autosave, storage under
/// `ctx.work_dir`; the proxy speaks HTTP/1.1 with keep-alive to the backends.
pub fn config(ctx: &DriverContext, admin_port: u16, endpoints: &[Endpoint], route: Route) -> Value {
    json!({
        "admin": {
            "listen": format!("127.0.0.1:{admin_port}"),
            "config": {"persist": false}
        },
        "storage": {
            "module": "file_system",
            "root": ctx.work_dir.join("storage").to_string_lossy()
        },
        "apps": {
            "tls": {"certificates": {"load_files": [{
                "certificate": ctx.cert.to_string_lossy(),
                "key": ctx.key.to_string_lossy(),
                "tags": [CERT_TAG]
            }]}},
            "http": {
                "http_port": ctx.http_port,
                "https_port": ctx.https_port,
                "grace_period": GRACE,
                "servers": {"srv0": {
                    "listen": [
                        format!("127.0.0.1:{}", ctx.http_port),
                        format!("127.0.0.1:{}", ctx.https_port)
                    ],
                    "automatic_https": {"disable": true},
                    "tls_connection_policies": [{
                        "certificate_selection": {"any_tag": [CERT_TAG]},
                        "protocol_min": "tls1.2",
                        "protocol_max": "tls1.3",
                        "alpn": ["http/1.1"]
                    }],
                    // The other proxies offer only HTTP/1.1 to clients too.
                    "protocols": ["h1"],
                    "routes": [
                        // No terminal handler: requests fall through to the proxy.
                        {"@id": MW_ID, "handle": middleware(route)},
                        {"handle": [proxy_handler(ctx, endpoints)]}
                    ]
                }}
            }
        }
    })
}

/// The handlers of the middleware route for `route` (what `PATCH /id/mw/handle` sends).
pub fn middleware(route: Route) -> Value {
    match route {
        Route::Base => json!([]),
        Route::Cors => json!([{"handler": "headers", "response": {"set": {
            "Access-Control-Allow-Origin": ["*"],
            "Access-Control-Allow-Methods": ["GET, POST, OPTIONS"],
            "Access-Control-Allow-Headers": ["Content-Type, Authorization"]
        }}}]),
        Route::Header => json!([{"handler": "headers", "response": {"set": {"x-custom": ["1"]}}}]),
        // Only the path is given, so Caddy keeps the query string.
        Route::Rewrite => {
            json!([{"handler": "rewrite", "uri": "/rewritten{http.request.uri.path}"}])
        }
    }
}

/// The upstream list for `endpoints` (what `PATCH /id/proxy/upstreams` sends).
pub fn upstreams(endpoints: &[Endpoint]) -> Value {
    Value::Array(
        endpoints
            .iter()
            .map(|e| json!({"dial": e.addr.to_string()}))
            .collect(),
    )
}

/// The reverse-proxy handler. Retries on dial errors (like nginx's default
/// `proxy_next_upstream error`) only when there are endpoints: with none, Caddy would
/// spin for the whole try duration before its 503, and the other proxies fail at once.
fn proxy_handler(ctx: &DriverContext, endpoints: &[Endpoint]) -> Value {
    let mut load_balancing = json!({"selection_policy": {"policy": "round_robin"}});
    if !endpoints.is_empty() {
        load_balancing["try_duration"] = json!("1s");
        load_balancing["try_interval"] = json!("50ms");
    }
    json!({
        "@id": PROXY_ID,
        "handler": "reverse_proxy",
        "upstreams": upstreams(endpoints),
        "load_balancing": load_balancing,
        "transport": {
            "protocol": "http",
            "versions": ["1.1"],
            "keep_alive": {
                "enabled": true,
                "max_idle_conns_per_host": ctx.upstream_keepalive,
                "idle_timeout": "60s"
            }
        }
    })
}

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

    fn ctx(&self) -> Result<&DriverContext, LabError> {
        self.ctx
            .as_ref()
            .ok_or_else(|| LabError::Other("caddy-api: prepare() was not called".into()))
    }

    fn config_path(&self) -> Result<PathBuf, LabError> {
        Ok(self.ctx()?.out_dir.join("caddy.json"))
    }

    fn current_config(&self) -> Result<Value, LabError> {
        Ok(config(
            self.ctx()?,
            self.admin_port,
            &self.endpoints,
            self.route,
        ))
    }

    /// Writes the config in force (or to be started with) to `out_dir/caddy.json`.
    fn write_config(&self) -> Result<(), LabError> {
        let path = self.config_path()?;
        let text = serde_json::to_string_pretty(&self.current_config()?)
            .map_err(|e| LabError::Other(format!("caddy config: {e}")))?;
        std::fs::write(&path, text + "\n")
            .map_err(LabError::io(format!("writing {}", path.display())))
    }

    fn running(&mut self) -> bool {
        self.guard.as_mut().is_some_and(Guard::alive)
    }

    /// Sends one change to the admin API and records it for `settle()`.
    fn change(
        &mut self,
        method: &str,
        path: &str,
        body: &Value,
        confirm: Pending,
        headers: &[(&str, &str)],
    ) -> Result<(), LabError> {
        let what = format!("caddy {method} {path}");
        let body = body.to_string();
        let t = Instant::now();
        let reply = admin(self.admin_port, method, path, headers, body.as_bytes())
            .map_err(LabError::io(what.clone()))?;
        let call = t.elapsed();
        if !(200..300).contains(&reply.status) {
            return Err(LabError::Rejected {
                what,
                detail: format!("HTTP {}: {}", reply.status, reply.text().trim()),
            });
        }
        self.pending = Some(confirm);
        self.last = Some(ChangeTiming {
            what,
            call,
            confirm: None,
        });
        Ok(())
    }

    /// Starts `caddy run` once; the config file must be written.
    fn spawn(&mut self) -> Result<(), LabError> {
        let ctx = self.ctx()?.clone();
        let binary = self
            .binary
            .clone()
            .ok_or_else(|| LabError::Other("caddy-api: prepare() was not called".into()))?;
        let home = ctx.work_dir.join("home");
        for d in ["data", "config", "cache"] {
            std::fs::create_dir_all(home.join(d))
                .map_err(LabError::io(format!("creating {}", home.display())))?;
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
            .env("XDG_CACHE_HOME", home.join("cache"));
        let log = ctx.out_dir.join("caddy.log");
        let guard =
            Guard::spawn("caddy", &mut cmd, &log).map_err(LabError::io("starting caddy"))?;
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
fn free_port_except(taken: &[u16]) -> Result<u16, LabError> {
    loop {
        let p = super::ports::free_port().map_err(LabError::io("choosing a free port"))?;
        if !taken.contains(&p) {
            return Ok(p);
        }
    }
}

impl Driver for Caddy {
    fn name(&self) -> &'static str {
        "caddy-api"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }

    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), LabError> {
        let binary = proc::which("caddy").ok_or(LabError::MissingBinary {
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

    fn start(&mut self) -> Result<(), LabError> {
        if self.running() {
            return Err(LabError::Other("caddy is already running".into()));
        }
        self.write_config()?;
        self.spawn()
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LabError> {
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
                return Err(LabError::Other(format!(
                    "caddy exited before it was ready: {why}"
                )));
            }
            if self.answers(&ctx) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LabError::NotReady("caddy".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), LabError> {
        let before_empty = self.endpoints.is_empty();
        if !self.running() {
            // Not started yet (or stopped): the next start uses the new list.
            self.endpoints = endpoints.to_vec();
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

    fn apply_route(&mut self, route: Route) -> Result<(), LabError> {
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

    fn reload(&mut self) -> Result<(), LabError> {
        if !self.running() {
            return Err(LabError::NotRunning("caddy".into()));
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

    /// The driver made every change itself, so whatever `_expect` says is the last
    /// change it was asked for: settling is waiting for that one to finish.
    fn settle(&mut self, _expect: &Expect, timeout: Duration) -> Result<(), LabError> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let t = Instant::now();
        let deadline = t + timeout;
        loop {
            if !self.running() {
                return Err(LabError::NotRunning("caddy".into()));
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
                return Err(LabError::NotReady(format!(
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

    fn stop(&mut self) -> Result<(), LabError> {
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

/// An admin call on 127.0.0.1:`port`, retrying the connection for a moment: Caddy
/// re-binds its admin listener on every config change. A body (and any method but
/// `GET`) is sent as JSON.
fn admin(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Response> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut all = Vec::with_capacity(headers.len() + 1);
    if !body.is_empty() || method != "GET" {
        all.push(("Content-Type", "application/json"));
    }
    all.extend_from_slice(headers);
    let t = Instant::now();
    loop {
        match client::request(addr, method, path, &all, body, ADMIN_TIMEOUT) {
            Err(e)
                if e.io_kind() == Some(std::io::ErrorKind::ConnectionRefused)
                    && t.elapsed() < Duration::from_secs(1) =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other.map_err(std::io::Error::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> DriverContext {
        DriverContext {
            work_dir: "/w".into(),
            out_dir: "/o".into(),
            cert: "/c/cert.pem".into(),
            key: "/c/key.pem".into(),
            https_port: 8443,
            http_port: 8080,
            upstream_keepalive: 32,
            upstream_keepalive_requests: 1000,
            worker_connections: 10_000,
        }
    }

    fn ep(id: &str, port: u16) -> Endpoint {
        Endpoint {
            id: id.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    fn routes(c: &Value) -> &Vec<Value> {
        c["apps"]["http"]["servers"]["srv0"]["routes"]
            .as_array()
            .unwrap()
    }

    #[test]
    fn config_listens_locally_with_our_certificate_and_no_automation() {
        let c = config(&ctx(), 2019, &[ep("b1", 9001)], Route::Base);
        assert_eq!(c["admin"]["listen"], "127.0.0.1:2019");
        assert_eq!(c["admin"]["config"]["persist"], false);
        assert_eq!(c["storage"]["root"], "/w/storage");
        let http = &c["apps"]["http"];
        assert_eq!(http["http_port"], 8080);
        assert_eq!(http["https_port"], 8443);
        let srv = &http["servers"]["srv0"];
        assert_eq!(srv["listen"], json!(["127.0.0.1:8080", "127.0.0.1:8443"]));
        assert_eq!(srv["automatic_https"]["disable"], true);
        let policy = &srv["tls_connection_policies"][0];
        assert_eq!(policy["protocol_min"], "tls1.2");
        assert_eq!(policy["protocol_max"], "tls1.3");
        assert_eq!(
            policy["certificate_selection"]["any_tag"],
            json!([CERT_TAG])
        );
        let file = &c["apps"]["tls"]["certificates"]["load_files"][0];
        assert_eq!(file["certificate"], "/c/cert.pem");
        assert_eq!(file["key"], "/c/key.pem");
        assert_eq!(file["tags"], json!([CERT_TAG]));
    }

    #[test]
    fn proxy_route_keeps_its_id_and_upstream_keepalive() {
        let c = config(
            &ctx(),
            2019,
            &[ep("b1", 9001), ep("b2", 9002)],
            Route::Header,
        );
        let r = routes(&c);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0]["@id"], MW_ID);
        assert_eq!(r[0]["handle"], middleware(Route::Header));
        let p = &r[1]["handle"][0];
        assert_eq!(p["@id"], PROXY_ID);
        assert_eq!(p["handler"], "reverse_proxy");
        assert_eq!(
            p["upstreams"],
            json!([{"dial": "127.0.0.1:9001"}, {"dial": "127.0.0.1:9002"}])
        );
        assert_eq!(p["transport"]["versions"], json!(["1.1"]));
        assert_eq!(p["transport"]["keep_alive"]["enabled"], true);
        assert_eq!(p["transport"]["keep_alive"]["max_idle_conns_per_host"], 32);
        assert_eq!(p["load_balancing"]["try_duration"], "1s");
    }

    #[test]
    fn no_endpoints_means_an_empty_list_and_no_retry_wait() {
        let c = config(&ctx(), 2019, &[], Route::Base);
        let p = &routes(&c)[1]["handle"][0];
        assert_eq!(p["upstreams"], json!([]));
        assert!(p["load_balancing"].get("try_duration").is_none());
    }

    #[test]
    fn each_route_has_its_middleware() {
        assert_eq!(middleware(Route::Base), json!([]));
        let cors = &middleware(Route::Cors)[0]["response"]["set"];
        assert_eq!(cors["Access-Control-Allow-Origin"], json!(["*"]));
        assert_eq!(
            cors["Access-Control-Allow-Methods"],
            json!(["GET, POST, OPTIONS"])
        );
        assert_eq!(
            cors["Access-Control-Allow-Headers"],
            json!(["Content-Type, Authorization"])
        );
        assert_eq!(
            middleware(Route::Header)[0]["response"]["set"]["x-custom"],
            json!(["1"])
        );
        let rw = &middleware(Route::Rewrite)[0];
        assert_eq!(rw["handler"], "rewrite");
        assert_eq!(rw["uri"], "/rewritten{http.request.uri.path}");
    }

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
