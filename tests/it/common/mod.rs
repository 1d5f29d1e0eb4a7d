//! What the integration tests share: the binary under test run with a time limit
//! ([`run`], [`proc::Proc`]), the built-in backend ([`backend`]), load runs and their
//! results ([`load`]), the machine's CPU ([`cpu`]), certificates and TLS clients
//! ([`tls`]), a real nginx ([`nginx`]), servers that fail in one way each
//! ([`servers`]), the lab's drivers ([`lab`]), the report read by Chromium
//! ([`chromium`], [`expect`], [`runs`]), whole scenario runs ([`scenario_run`]), values
//! read out of results ([`json`]), and a real Kubernetes control plane ([`k8s`]) whose
//! pods run as processes ([`k8s_pods`]).
//!
//! Tests that generate load or measure time take turns through [`exclusive`].

pub mod backend;
pub mod chromium;
pub mod cpu;
pub mod expect;
pub mod json;
pub mod k8s;
pub mod k8s_contour;
pub mod k8s_dns;
pub mod k8s_envoy_gateway;
pub mod k8s_haproxy_ingress;
pub mod k8s_ingress_nginx;
pub mod k8s_nginx_gateway_fabric;
pub mod k8s_pod_root;
pub mod k8s_pods;
pub mod k8s_process_pods;
pub mod k8s_traefik;
pub mod lab;
pub mod load;
pub mod nginx;
pub mod proc;
pub mod runs;
pub mod scenario_run;
pub mod servers;
pub mod tls;

// The library's internals the tests use; the only lines naming them besides the
// `pub use` in `lab.rs`.
pub use report::fmt::fmt_ms;

use proc::{Output, Proc};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
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

/// Asserts that `ingressbench` refused bad input as every command does: exit code 2
/// and one line on stderr, `ingressbench: ` and then `says`. `case` names the input in
/// the messages.
pub fn assert_refused(o: &Output, says: &str, case: &str) {
    assert_eq!(o.code, Some(2), "{case}: {}", o.stderr);
    assert_eq!(
        o.stderr.trim_end().lines().count(),
        1,
        "{case}: {}",
        o.stderr
    );
    assert!(
        o.stderr.starts_with(&format!("ingressbench: {says}")),
        "{case}: {}",
        o.stderr
    );
}

/// Which tests may share the machine. `make test` runs each test in its own process
/// under cargo-nextest (`.config/nextest.toml`): a test whose assertions are about time
/// (rates held, latency, generator lag, CPU shares, propagation bounds) is in the
/// nextest group `alone` and takes every test slot, so nothing runs beside it; every
/// other test runs in parallel with the rest. Under a plain `cargo test` (one process,
/// several threads) the same rule holds through this lock: a timing test holds it
/// alone ([`exclusive`]), a test that loads the machine without timing it shares it
/// ([`shared`], taken by [`load::Load::spawn`]).
static LOCK: RwLock<()> = RwLock::new(());

/// A test's turn on the machine, held until dropped.
pub enum Turn {
    /// Nothing else runs meanwhile: a timing test.
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
    /// Other such tests may run beside it, never a timing test.
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
}

/// The nextest group whose tests run alone (`.config/nextest.toml`).
pub const ALONE_GROUP: &str = "alone";

/// The right to use the machine alone, for a test whose assertions are about time.
/// Taken by the test itself before anything it times, and handed to
/// [`load::Load::spawn_exclusive`]. Never taken twice by one test: that would wait
/// forever.
///
/// # Panics
/// Under nextest, when the test is not in the group `alone`: it would run beside
/// other tests and time the machine instead of the code. The fix is to add it to
/// that group's filter in `.config/nextest.toml`.
pub fn exclusive() -> Turn {
    if std::env::var_os("NEXTEST").is_some() {
        let group = std::env::var("NEXTEST_TEST_GROUP").unwrap_or_default();
        assert_eq!(
            group,
            ALONE_GROUP,
            "{} times the machine but nextest runs it in group '{group}', beside other \
             tests: add it to the group '{ALONE_GROUP}' in .config/nextest.toml",
            std::thread::current().name().unwrap_or("this test")
        );
    }
    // A test that panicked while holding the lock must not fail all the others.
    Turn::Alone(LOCK.write().unwrap_or_else(|e| e.into_inner()))
}

/// The right to load the machine beside other tests that do not time it.
pub fn shared() -> Turn {
    Turn::Shared(LOCK.read().unwrap_or_else(|e| e.into_inner()))
}

/// Records that the running test is trying again (a timing test whose generator was
/// overloaded), one line in the file `INGRESSBENCH_TEST_RETRIES` names: `make test`
/// lists them in its closing summary, with their count, and fails a run that needed
/// three or more, so a regression that overloads the generator now and then is seen
/// instead of passing on its second try.
pub fn record_retry(why: &str) {
    record_rerun("retry", why)
}

/// One line `TEST<TAB>KIND<TAB>WHY` in the retries file; KIND is `retry` (counted
/// toward the limit) or `machine` (see [`machine_rerun`]).
fn record_rerun(kind: &str, why: &str) {
    use std::io::Write;
    let Some(path) = std::env::var_os("INGRESSBENCH_TEST_RETRIES") else {
        return;
    };
    // libtest names each test's thread after the test, under nextest as under cargo test.
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    let line = format!("{test}\t{kind}\t{}\n", why.replace(['\t', '\n'], " "));
    // One append of one short line: whole lines, whatever other tests write beside it.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .unwrap_or_else(|e| panic!("record a retry in {}: {e}", Path::new(&path).display()));
}

/// How many times one test may be run again because the machine, not the engine,
/// spoiled an attempt (see [`machine_rerun`]).
pub const MAX_MACHINE_RERUNS: usize = 3;

thread_local! {
    static MACHINE_RERUNS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many of this test's attempts the machine spoiled so far.
pub fn machine_reruns() -> usize {
    MACHINE_RERUNS.with(|c| c.get())
}

/// An attempt of a timing test that the machine disturbed (the generator's own
/// verdict: stolen time or stalls of the whole machine during its window, see
/// `results::MachineTime`): waits for the machine to settle (`ingressbench machine
/// --settle`) and says whether to run it again. Such reruns are recorded as
/// `machine` in the retries file, listed apart in `make test`'s summary and not
/// counted toward its limit of retries, because they say nothing about the engine;
/// at most [`MAX_MACHINE_RERUNS`] per test, so a machine that never settles still
/// fails the test instead of hiding it.
pub fn machine_rerun(why: &str) -> bool {
    let n = machine_reruns();
    if n >= MAX_MACHINE_RERUNS {
        return false;
    }
    MACHINE_RERUNS.with(|c| c.set(n + 1));
    let settled = settle_machine(Duration::from_secs(30));
    let why = format!("{why}; running again once the machine settled ({settled})");
    eprintln!("{why}");
    record_rerun("machine", &why);
    true
}

/// Waits, up to `limit`, for the machine to settle (`ingressbench machine --settle`):
/// its last line, which says how long that took.
pub fn settle_machine(limit: Duration) -> String {
    let out = bin()
        .args(["machine", "--settle", &format!("{}s", limit.as_secs())])
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap_or("no answer")
            .to_string(),
        Err(e) => format!("could not run ingressbench machine: {e}"),
    }
}

/// The error kinds of `ingressbench/result/v1`, by their JSON names, in the result's
/// (and the report tables') order.
pub const ERROR_KINDS: [&str; 8] = [
    "connect",
    "connect_timeout",
    "tls",
    "read",
    "write",
    "timeout",
    "status",
    "framing",
];

/// The counts of a result's `requests` block, in the result's order.
pub const REQUEST_COUNTS: [&str; 7] = [
    "intended",
    "sent",
    "completed",
    "failed",
    "not_sent",
    "unfinished",
    "timed_out_unsent",
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

/// The names in folder `dir` that start with `prefix`; none when it cannot be read
/// (a folder only some machines have).
pub fn names_with_prefix(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Sends `signal` (`-INT`, `-STOP`) to process `pid` with kill(1): whether it was
/// delivered.
pub fn kill(signal: &str, pid: impl std::fmt::Display) -> bool {
    Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
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

/// Whether process `pid` is in this process's network namespace: generator pods of the
/// Kubernetes tests run with the same flags as a local run's generators, each in a
/// namespace of its own, and are not a local run's leftovers.
pub fn in_our_network_namespace(pid: &str) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    ns(pid).is_some_and(|n| Some(n) == ns("self"))
}
