//! The network lab as a platform (study S2): one nginx serving a file, behind a
//! container data path built from real kernel networking ([`netlab`]), and the load
//! leaving from another "node". What is compared is the path, so there is no proxy:
//! the system under test is the data path, and its driver ([`Direct`]) only reports
//! on the server the platform started.
//!
//! Per system the platform builds node A (the client), node B and, except on `host`,
//! a pod namespace behind B; starts nginx (`worker_processes 1`, the file served
//! through `open_file_cache`, S2's set-up) inside the server's namespace on the
//! backends' CPUs; and gives the runner the URL together with node A's namespace,
//! which the engine's workers enter before opening a socket. Every namespace the run
//! made is named `ibnl-<pid>-<role>`: teardown removes them, and the next run sweeps
//! those of a run that was killed before it could.

use crate::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, Route, SutError};
use crate::platform::{Platform, PlatformEvent, SiteSpec, StopMode, Target};
use crate::proc::Guard;
use netlab::{DataPath, Lab, PodDevice};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The data paths, by the names scenarios use, each as the CNI shape it stands for.
pub const PATHS: &[(&str, DataPath)] = &[
    ("host", DataPath::Host),
    ("bridge", DataPath::Bridge),
    ("host-gw", DataPath::HostGw),
    ("vxlan", DataPath::Vxlan),
    ("macvlan", DataPath::Macvlan),
];

/// The prefix of every namespace a network-lab run creates (see [`netlab::sweep`]).
pub const NS_PREFIX: &str = "ibnl";

/// A step of the network lab that [`netlab`] could not do: what the lab was doing,
/// over netlab's typed error as the `source()`.
///
/// It reaches callers as [`SutError::Part`] (the system-under-test error cannot name
/// netlab's type: `sut` does not depend on `netlab`), from which a caller downcasts
/// it to reach the [`netlab::NetlabError`] (a kernel's errno, a missing tool).
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct NetworkLabError {
    /// What the lab was doing, with the names involved.
    pub what: String,
    #[source]
    pub source: netlab::NetlabError,
}

impl From<NetworkLabError> for SutError {
    /// Kept whole, so that netlab's error stays the cause.
    fn from(e: NetworkLabError) -> Self {
        SutError::Part(Box::new(e))
    }
}

/// The path a scenario names, if it is one.
pub fn data_path(name: &str) -> Option<(&'static str, DataPath)> {
    PATHS.iter().copied().find(|(n, _)| *n == name)
}

/// The path names, for messages.
pub fn path_names() -> Vec<&'static str> {
    PATHS.iter().map(|(n, _)| *n).collect()
}

/// S2's sysctls that a network namespace has its own copy of (its list also has
/// `fs.file-max`, which is the machine's and is therefore left to the user).
pub const S2_SYSCTLS: &[(&str, &str)] = &[
    ("net.ipv4.ip_local_port_range", "2000 65535"),
    ("net.ipv4.tcp_max_tw_buckets", "2000000"),
    ("net.ipv4.tcp_tw_reuse", "1"),
    ("net.ipv4.tcp_fin_timeout", "10"),
    ("net.ipv4.tcp_slow_start_after_idle", "0"),
    ("net.ipv4.tcp_low_latency", "1"),
];

/// How the lab's nodes are tuned (S2's host tuning, per run).
#[derive(Clone, Debug, Default)]
pub struct NetworkOptions {
    /// NOTRACK rules for the server's port in every namespace (not on `bridge`).
    pub notrack: bool,
    /// `(key, value)`, dotted; only `net.*` keys can be set in a namespace.
    pub sysctls: Vec<(String, String)>,
    /// nginx writes an access log (`remote address`, `address:port` it was reached
    /// at) to the system's results folder: what the tests check a path by. Off by
    /// default: it costs the server CPU.
    pub access_log: bool,
}

/// What the server's driver reports, filled in by the platform once it runs.
#[derive(Debug, Default)]
struct Served {
    pid: Option<u32>,
    versions: Vec<(String, String)>,
}

/// The network lab for one data path.
pub struct NetworkLab {
    name: &'static str,
    path: DataPath,
    opts: NetworkOptions,
    // Drop order: the server first, then the namespaces it ran in, then its files.
    server: Option<Guard>,
    lab: Option<Lab>,
    work: Option<tempfile::TempDir>,
    served: Arc<Mutex<Served>>,
    target: Option<Target>,
    info: Option<results::NetworkInfo>,
}

impl NetworkLab {
    /// A lab for the path named `system` (one of [`PATHS`]).
    ///
    /// # Errors
    /// [`SutError::UnknownProfile`] for a name that is not a path.
    pub fn new(system: &str, opts: NetworkOptions) -> Result<NetworkLab, SutError> {
        let (name, path) = data_path(system).ok_or_else(|| SutError::UnknownProfile {
            name: system.to_string(),
            known: path_names().join(", "),
        })?;
        Ok(NetworkLab {
            name,
            path,
            opts,
            server: None,
            lab: None,
            work: None,
            served: Arc::default(),
            target: None,
            info: None,
        })
    }

    fn build(&mut self, spec: &SiteSpec) -> Result<DriverContext, SutError> {
        let lab_err = |what: &str| {
            let what = what.to_string();
            move |source: netlab::NetlabError| SutError::from(NetworkLabError { what, source })
        };
        // A killed run's namespaces (its creator is gone) go first.
        netlab::sweep(NS_PREFIX).map_err(lab_err("remove a killed run's namespaces"))?;
        std::fs::create_dir_all(&spec.out_dir)
            .map_err(SutError::io(format!("create {}", spec.out_dir.display())))?;
        let lab = Lab::build(NS_PREFIX, self.path)
            .map_err(lab_err(&format!("build the {} data path", self.name)))?;
        let lab = self.lab.insert(lab);
        // Looked up once the namespaces exist, so that a machine without nginx
        // exercises the removal of a half-built lab like any other failure would.
        let nginx = match std::env::var_os(NGINX_ENV) {
            Some(p) => PathBuf::from(p),
            None => crate::proc::which("nginx").ok_or_else(|| SutError::MissingBinary {
                binary: "nginx".into(),
                package: "nginx-light".into(),
            })?,
        };
        if self.opts.notrack {
            lab.notrack().map_err(lab_err("notrack"))?;
        }
        let sysctls: BTreeMap<String, String> = lab
            .tune(&self.opts.sysctls)
            .into_iter()
            .map(|(k, r)| (k, r.err().unwrap_or_else(|| "ok".into())))
            .collect();

        // Kept in `self` at once, so that teardown removes and unregisters it
        // whatever fails next.
        let work = self.work.insert(crate::local::scratch_dir()?);
        let www = work.path().join("www");
        std::fs::create_dir_all(&www).map_err(SutError::io("create the served folder"))?;
        std::fs::write(www.join(FILE), body(spec.backends.body_size))
            .map_err(SutError::io("write the served file"))?;
        let conf = work.path().join("nginx.conf");
        let access_log = self
            .opts
            .access_log
            .then(|| spec.out_dir.join("access.log"));
        let text = server_config(&Server {
            prefix: work.path(),
            listen: SocketAddr::V4(lab.server_addr()),
            access_log: access_log.as_deref(),
            user_root: rustix::process::geteuid().is_root(),
        });
        std::fs::write(&conf, &text).map_err(SutError::io("write nginx.conf"))?;
        // A copy with the results: it is part of what was measured.
        let _ = std::fs::write(spec.out_dir.join("nginx.conf"), &text);
        let mut cmd = Command::new(&nginx);
        cmd.arg("-c").arg(&conf).arg("-p").arg(work.path());
        let log = spec.out_dir.join("nginx.log");
        let cpus = spec.backends.cpus.clone();
        let guard = lab
            .server_ns()
            .run(move || Guard::spawn_on("nginx", &mut cmd, &log, &cpus))
            .map_err(lab_err("enter the server's namespace"))?
            .map_err(SutError::io("start nginx in the server's namespace"))?;
        let pid = guard.pid();
        let server = self.server.insert(guard);
        wait_serving(lab, server, Duration::from_secs(10))?;

        let url = format!("http://{}/{FILE}", lab.target());
        self.target = Some(Target {
            url,
            cacert: None,
            reachable: vec![IpAddr::V4(*lab.target().ip())],
            netns: Some(lab.client_ns().path().to_path_buf()),
        });
        let mut versions = crate::nginx::static_versions();
        versions.push(("data path".into(), self.name.into()));
        if let Some(d) = lab.pod_device() {
            versions.push(("pod device".into(), device_name(d).into()));
        }
        if let Ok(k) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
            versions.push(("kernel".into(), k.trim().to_string()));
        }
        if let Ok(mut s) = self.served.lock() {
            s.pid = pid;
            s.versions = versions;
        }
        self.info = Some(results::NetworkInfo {
            path: self.name.to_string(),
            pod_device: lab.pod_device().map(|d| device_name(d).to_string()),
            target: lab.target().to_string(),
            server: lab.server_addr().to_string(),
            client: lab.client_addr().to_string(),
            notrack: self.opts.notrack,
            sysctls,
            body_size: spec.backends.body_size,
            links: BTreeMap::new(),
        });
        // The driver's context: nothing in it is used (there is no proxy), but the
        // runner records the proxy's workers from it.
        let mut ctx = DriverContext::with_s1_tuning(
            self.work
                .as_ref()
                .map_or_else(PathBuf::new, |w| w.path().to_path_buf()),
            spec.out_dir.clone(),
            (PathBuf::new(), PathBuf::new()),
            (0, 0),
        );
        ctx.cpus = spec.backends.cpus.clone();
        Ok(ctx)
    }
}

/// Names another nginx binary for the network lab's server (a custom build).
pub const NGINX_ENV: &str = "INGRESSBENCH_NGINX";

/// The served file's name (the URL's path).
const FILE: &str = "file";

fn device_name(d: PodDevice) -> &'static str {
    match d {
        PodDevice::IpVlan => "ipvlan",
        PodDevice::MacVlan => "macvlan",
    }
}

/// `n` bytes of printable text (a file a person can open).
fn body(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            if i % 64 == 63 {
                b'\n'
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect()
}

/// What the server's configuration is made of.
struct Server<'a> {
    prefix: &'a Path,
    listen: SocketAddr,
    access_log: Option<&'a Path>,
    user_root: bool,
}

/// nginx as S2 ran it: one worker, a fixed file served from `open_file_cache`, keep-
/// alive for as long as the load lasts.
///
/// No `tcp_nopush` (TCP_CORK with sendfile): measured here, it holds the last partial
/// segment of a response larger than one segment on a kept-alive connection, so 4 KB
/// responses at 5,000 req/s over 100 connections had a p90 of 20 ms and a p99 of 40 ms
/// (a delayed-ACK wait) instead of 70 µs and 108 µs without it.
fn server_config(s: &Server) -> String {
    let p = s.prefix.display();
    let mut c = String::new();
    if s.user_root {
        c.push_str("user root;\n");
    }
    c.push_str("daemon off;\nmaster_process on;\nworker_processes 1;\n");
    c.push_str("worker_rlimit_nofile 65536;\n");
    let _ = writeln!(c, "pid {p}/nginx.pid;\nlock_file {p}/nginx.lock;");
    c.push_str("error_log stderr notice;\n");
    c.push_str("events { worker_connections 20000; }\n");
    c.push_str("http {\n");
    match s.access_log {
        Some(log) => {
            c.push_str("    log_format path '$remote_addr $server_addr:$server_port';\n");
            let _ = writeln!(c, "    access_log {} path;", log.display());
        }
        None => c.push_str("    access_log off;\n"),
    }
    crate::nginx::temp_paths(&mut c, s.prefix);
    c.push_str(
        "    default_type application/octet-stream;\n\
         \x20   sendfile on;\n    tcp_nodelay on;\n\
         \x20   keepalive_timeout 300s;\n    keepalive_requests 100000000;\n\
         \x20   open_file_cache max=16 inactive=300s;\n    open_file_cache_valid 300s;\n",
    );
    let _ = writeln!(
        c,
        "    server {{\n        listen {} backlog=4096;\n        root {p}/www;\n    }}\n}}",
        s.listen
    );
    c
}

/// Waits until nginx answers on the target from node A (a TCP connect there, from a
/// thread that entered A), or fails early if it exited.
fn wait_serving(lab: &Lab, server: &mut Guard, timeout: Duration) -> Result<(), SutError> {
    let target = SocketAddr::V4(lab.target());
    let deadline = Instant::now() + timeout;
    loop {
        if !server.alive() {
            return Err(SutError::ExitedAtStart {
                process: "nginx".into(),
                why: Some(
                    "it ran in the server's namespace: see nginx.log in the system's results folder"
                        .into(),
                ),
            });
        }
        let up = lab
            .client_ns()
            .run(|| TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_ok())
            .unwrap_or(false);
        if up {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(SutError::NotReady(format!("nginx behind {target}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Platform for NetworkLab {
    fn name(&self) -> &'static str {
        "network-lab"
    }

    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, SutError> {
        self.teardown()?;
        let r = self.build(spec);
        if r.is_err() {
            // The build's error is the one to report.
            let _ = self.teardown();
        }
        r
    }

    fn target(&self) -> Target {
        self.target.clone().unwrap_or_default()
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        match (&self.lab, &self.server) {
            (Some(lab), Some(_)) => vec![Endpoint {
                id: format!("nginx@{}", self.name),
                addr: SocketAddr::V4(lab.server_addr()),
            }],
            _ => Vec::new(),
        }
    }

    fn replicas(&self) -> u32 {
        u32::from(self.server.is_some())
    }

    fn scale(&mut self, _to: u32, _stop: StopMode, on: &mut dyn FnMut(PlatformEvent)) {
        on(PlatformEvent::Failed {
            detail: "the network lab runs one server per data path: it does not scale".into(),
        });
    }

    fn tick(&mut self) {}

    fn teardown(&mut self) -> Result<(), SutError> {
        if let Some(mut s) = self.server.take() {
            s.stop(rustix::process::Signal::TERM, Duration::from_secs(2));
        }
        // Removing the namespaces removes every link, address, route and rule in them.
        self.lab = None;
        if let Some(w) = self.work.take() {
            crate::local::remove_scratch(w);
        }
        if let Ok(mut s) = self.served.lock() {
            s.pid = None;
        }
        Ok(())
    }

    fn driver_for(&mut self, system: &str) -> Option<Result<Box<dyn Driver>, SutError>> {
        let _ = system;
        Some(Ok(Box::new(Direct {
            served: self.served.clone(),
        })))
    }

    fn network_info(&self) -> Option<results::NetworkInfo> {
        let mut info = self.info.clone()?;
        // Read now: the counters go with the namespaces at teardown.
        if let Some(Ok(links)) = self.lab.as_ref().map(Lab::path_packets) {
            info.links = links
                .into_iter()
                .map(|(name, rx, tx)| (name, results::LinkPackets { rx, tx }))
                .collect();
        }
        Some(info)
    }
}

impl Drop for NetworkLab {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The "driver" of a data path: no proxy stands between the load and the server, so
/// it deploys nothing and changes nothing; it reports the server the platform runs
/// (its versions, and its process for the CPU and memory readings).
pub struct Direct {
    served: Arc<Mutex<Served>>,
}

impl Driver for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            push_endpoints: false,
            routes: false,
            reload: false,
            restart: false,
            restart_controller: false,
            rotate_certificate: false,
        }
    }

    fn prepare(&mut self, _ctx: &DriverContext, _endpoints: &[Endpoint]) -> Result<(), SutError> {
        Ok(())
    }

    fn start(&mut self) -> Result<(), SutError> {
        Ok(())
    }

    fn wait_ready(&mut self, _timeout: Duration) -> Result<(), SutError> {
        Ok(())
    }

    fn apply_route(&mut self, _route: Route) -> Result<(), SutError> {
        Err(self.unsupported("change routes (no proxy serves a data path)"))
    }

    fn reload(&mut self) -> Result<(), SutError> {
        Err(self.unsupported("reload (no proxy serves a data path)"))
    }

    fn settle(&mut self, _expect: &Expect, _timeout: Duration) -> Result<(), SutError> {
        Ok(())
    }

    fn alive(&mut self) -> bool {
        let pid = self.served.lock().ok().and_then(|s| s.pid);
        // Not reaped until teardown, a dead nginx lingers as a zombie (state `Z`).
        pid.is_some_and(crate::usage::running)
    }

    fn stop(&mut self) -> Result<(), SutError> {
        Ok(())
    }

    fn versions(&self) -> Vec<(String, String)> {
        self.served
            .lock()
            .map(|s| s.versions.clone())
            .unwrap_or_default()
    }

    fn process_groups(&self) -> Vec<u32> {
        self.served
            .lock()
            .ok()
            .and_then(|s| s.pid)
            .into_iter()
            .collect()
    }
}

impl Direct {
    fn unsupported(&self, what: &str) -> SutError {
        SutError::Unsupported {
            system: "the network lab".into(),
            what: what.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_netlab_error_stays_typed_under_the_lab_error() {
        let e = SutError::from(NetworkLabError {
            what: "build the bridge data path".into(),
            source: netlab::NetlabError::MissingTool("tc".into()),
        });
        assert_eq!(
            results::with_causes(&e),
            "build the bridge data path: missing tool: tc"
        );
        let SutError::Part(part) = &e else {
            panic!("not a part's error: {e:?}")
        };
        let lab = part
            .downcast_ref::<NetworkLabError>()
            .expect("the lab's error");
        assert!(
            matches!(lab.source, netlab::NetlabError::MissingTool(ref t) if t == "tc"),
            "{lab:?}"
        );
    }

    #[test]
    fn the_server_serves_one_file_with_one_worker_and_logs_only_when_asked() {
        let c = server_config(&Server {
            prefix: Path::new("/w"),
            listen: "198.18.10.2:80".parse().unwrap(),
            access_log: None,
            user_root: false,
        });
        assert!(c.contains("worker_processes 1;"), "{c}");
        assert!(c.contains("listen 198.18.10.2:80 backlog=4096;"), "{c}");
        assert!(c.contains("root /w/www;"), "{c}");
        assert!(c.contains("open_file_cache max=16"), "{c}");
        assert!(c.contains("access_log off;"), "{c}");
        assert!(
            !c.contains("tcp_nopush"),
            "corks multi-segment responses: {c}"
        );
        assert!(!c.contains("user root"), "{c}");
        let c = server_config(&Server {
            prefix: Path::new("/w"),
            listen: "198.18.0.2:80".parse().unwrap(),
            access_log: Some(Path::new("/out/access.log")),
            user_root: true,
        });
        assert!(c.contains("access_log /out/access.log path;"), "{c}");
        assert!(
            c.contains("'$remote_addr $server_addr:$server_port'"),
            "{c}"
        );
        assert!(c.starts_with("user root;\n"), "{c}");
    }

    #[test]
    fn paths_are_named_as_scenarios_write_them() {
        assert_eq!(data_path("host-gw").map(|p| p.1), Some(DataPath::HostGw));
        assert!(data_path("ipvlan").is_none());
        assert_eq!(body(130).len(), 130);
        assert_eq!(body(64)[63], b'\n');
    }
}
