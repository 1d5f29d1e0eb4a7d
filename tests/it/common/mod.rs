//! What the integration tests share: the binary under test run with a time limit
//! ([`run`], [`proc::Proc`]), the built-in backend ([`backend`]), load runs and their
//! results ([`load`]), the machine's CPU ([`cpu`]), certificates and TLS clients
//! ([`tls`]), a real nginx ([`nginx`]), servers that fail in one way each
//! ([`servers`]), the lab's drivers ([`lab`]), the report read by Chromium
//! ([`chromium`], [`expect`], [`runs`]), and a real Kubernetes control plane
//! ([`k8s`]) whose pods run as processes ([`k8s_pods`]).
//!
//! Tests that generate load or measure time take turns through [`exclusive`].

pub mod backend;
pub mod chromium;
pub mod cpu;
pub mod expect;
pub mod k8s;
pub mod k8s_contour;
pub mod k8s_pods;
pub mod k8s_traefik;
pub mod lab;
pub mod load;
pub mod nginx;
pub mod proc;
pub mod runs;
pub mod servers;
pub mod tls;

// The library's internals the tests use; the only lines naming them besides the
// `pub use` in `lab.rs`.
pub use report::fmt::fmt_ms;

use proc::{Output, Proc};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_ingressbench");

/// `ingressbench` as a command to complete.
pub fn bin() -> Command {
    Command::new(BIN)
}

/// Runs `ingressbench ARGS` to its end within `limit`.
///
/// # Panics
/// When it overstays (it is killed first).
pub fn run(args: &[&str], limit: Duration) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = bin();
    cmd.args(args);
    Proc::spawn("ingressbench", &mut cmd, dir.path()).finish(limit)
}

/// All tests run in one binary, two at a time (`make test`: `--test-threads=2`), on a
/// machine of two cores: two load runs at once would steal each other's CPU and make
/// rate and latency assertions about the machine instead of the engine. Every test
/// that generates load, starts proxies, runs Chromium or asserts how long something
/// took holds this lock meanwhile; the CPU other processes take is measured
/// ([`cpu`]), but what this binary's other tests start counts as ours.
static LOCK: Mutex<()> = Mutex::new(());

/// The right to use the machine alone. Taken by [`load::Load::spawn`]; taken earlier,
/// with [`load::Load::spawn_exclusive`], by a test whose set-up must be timed against
/// the run's start. Never taken twice by one test: that would wait forever.
pub struct Exclusive {
    _lock: MutexGuard<'static, ()>,
}

pub fn exclusive() -> Exclusive {
    // A test that panicked while holding the lock must not fail all the others.
    Exclusive {
        _lock: LOCK.lock().unwrap_or_else(|e| e.into_inner()),
    }
}

/// The error kinds of `ingressbench/result/v1`, by their JSON names, in the result's
/// (and the report tables') order.
pub const ERROR_KINDS: [&str; 7] = [
    "connect",
    "connect_timeout",
    "tls",
    "read",
    "write",
    "timeout",
    "status",
];

/// The keys of every latency block, in increasing order for the percentiles.
pub const PERCENTILE_KEYS: [&str; 9] = [
    "p50", "p75", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max",
];

/// Reads and parses a JSON file.
pub fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", p.display()))
}

/// Ports on 127.0.0.1 that are free, all different, never handed out twice.
pub fn free_ports(n: usize) -> Vec<u16> {
    // The lab's own chooser: below the ephemeral range, so a server a test beside this
    // one binds on :0 cannot take the port before the proxy binds it.
    ::lab::ports::free_ports(n).expect("free ports on 127.0.0.1")
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// Waits until `addr` accepts TCP connections, up to `limit`.
pub fn wait_accepting(addr: std::net::SocketAddr, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Live processes (pid, command line) other than this one whose command line
/// mentions `needle`.
pub fn processes_with(needle: &str) -> Vec<(String, String)> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            if !pid.chars().all(|c| c.is_ascii_digit()) || pid == me {
                return None;
            }
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            (cmd.contains(needle) && !stat.contains(") Z ")).then_some((pid, cmd))
        })
        .collect()
}
