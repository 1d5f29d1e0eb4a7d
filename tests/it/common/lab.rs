//! The lab's drivers as the library has them, and helpers for their tests: built-in
//! backends as endpoints, a driver context in a temp folder, HTTPS requests through
//! a proxy with curl, and processes left behind.

// The library's internals the lab tests drive; with `fmt_ms` in `mod.rs`, the only
// lines naming them.
pub use lab::{
    caddy, certs, envoy, haproxy, nginx, routes, Driver, DriverContext, Endpoint, Expect, Route,
    RouteSet, SutError,
};

use super::{backend, free_ports, processes_with};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running `ingressbench backend` with a unique id, as an endpoint of the lab.
pub struct Backend {
    pub endpoint: Endpoint,
    _backend: backend::Backend,
}

/// Starts a backend named `id` (one worker) on a free port, once it is ready.
pub fn backend(id: &str) -> Backend {
    let b = backend::Backend::start(id, &["--workers", "1"]);
    Backend {
        endpoint: Endpoint {
            id: id.to_string(),
            addr: b.addr,
        },
        _backend: b,
    }
}

/// A driver context in `dir` with fresh ports and an RSA-2048 certificate.
pub fn context(dir: &Path) -> DriverContext {
    let work = dir.join("work");
    let out = dir.join("out");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let (cert, key) = certs::generate(dir, certs::KeyType::Rsa2048).expect("certificate");
    let p = free_ports(2);
    DriverContext::with_s1_tuning(work, out, (cert, key), (p[0], p[1]))
}

/// One HTTPS response: status, lower-cased headers, body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    /// A whole HTTP/1 answer as text (head, blank line, body): a status of 0 when
    /// there is no status line.
    pub fn parse(text: &str) -> Resp {
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Resp {
            status,
            headers,
            body: body.to_string(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }
}

/// GET `https://127.0.0.1:port{path}` with curl, trusting `cert`.
pub fn get(ctx: &DriverContext, path: &str) -> Resp {
    let url = format!("https://127.0.0.1:{}{path}", ctx.https_port);
    let out = Command::new("curl")
        .args(["-s", "-D", "-", "--max-time", "5", "--cacert"])
        .arg(&ctx.cert)
        .arg(&url)
        .output()
        .expect("curl (make setup installs it)");
    Resp::parse(&String::from_utf8_lossy(&out.stdout))
}

/// The status code of a GET with curl and extra `flags` (a trailing `--cacert` gets
/// the run's certificate).
pub fn status(flags: &[&str], ctx: &DriverContext, scheme: &str, port: u16) -> String {
    let mut cmd = std::process::Command::new("curl");
    cmd.args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "5",
    ])
    .args(flags);
    if flags.last() == Some(&"--cacert") {
        cmd.arg(&ctx.cert);
    }
    let out = cmd
        .arg(format!("{scheme}://127.0.0.1:{port}/"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The set of backend ids seen in `n` requests.
pub fn ids_seen(ctx: &DriverContext, n: usize) -> std::collections::BTreeSet<String> {
    (0..n)
        .filter_map(|_| get(ctx, "/").header("x-backend").map(str::to_string))
        .collect()
}

/// Asserts that no process whose command line mentions `needle` is left.
pub fn assert_no_process_with(needle: &str) {
    if let Some((pid, cmdline)) = processes_with(needle).first() {
        panic!("process left behind: {pid} {cmdline}");
    }
}

/// A temp dir path as text (for `assert_no_process_with`).
pub fn path_text(p: &Path) -> String {
    PathBuf::from(p).display().to_string()
}

/// Gives `d` a route set and waits until it has settled: when it was asked, and the
/// size of the configuration the driver gave the proxy.
pub fn apply_set(d: &mut dyn Driver, set: RouteSet) -> (std::time::Instant, u64) {
    let t0 = std::time::Instant::now();
    let bytes = d
        .apply_route_set(&set)
        .unwrap_or_else(|e| panic!("{}: apply {} routes: {e}", d.name(), set.count))
        .expect("the driver knows its configuration's size");
    d.settle(&Expect::Applied, std::time::Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{}: settle {} routes: {e}", d.name(), set.count));
    (t0, bytes)
}

/// Every route of `set` answers as itself through `http` (plain HTTP) within 20 s of
/// `t0`, its apply.
pub fn assert_all_served(
    name: &str,
    http: std::net::SocketAddr,
    set: &RouteSet,
    t0: std::time::Instant,
) {
    let got = routes::probe(http, set, t0, std::time::Duration::from_secs(20), 4);
    eprintln!("{name}: {} routes: {got:?}", set.count);
    assert_eq!(
        (got.served, got.never_count),
        (set.count, 0),
        "{name}: {got:?}"
    );
    let all = got.all_after.expect("every route served");
    assert!(all > std::time::Duration::ZERO, "{name}: {all:?}");
}

/// `set`'s last route is not in the configuration: probed for `bound`, it and only
/// it never answers as itself, and the probe says so.
pub fn assert_only_the_last_never_serves(
    http: std::net::SocketAddr,
    set: &RouteSet,
    bound: std::time::Duration,
) {
    let got = routes::probe(http, set, std::time::Instant::now(), bound, 4);
    let last = set.count - 1;
    assert_eq!(
        (got.never.as_slice(), got.never_count),
        ([last].as_slice(), 1),
        "{got:?}"
    );
    assert_eq!(got.all_after, None);
}
