//! The sizing scan (study S4) end to end, against real proxies: each proxy's own count
//! of TLS handshakes agrees exactly with the handshakes the load made (full and
//! resumed); a CPU quota of half a core measurably halves a CPU-bound proxy's
//! maximum next to a quarter; and the quota's cgroup is gone however the run ends
//! (a normal end, Ctrl-C, SIGKILL).

use crate::common::lab::{backend, context, Driver};
use crate::common::load::run_load;
use crate::common::proc::{tail, Proc};
use crate::common::{bin, exclusive, names_with_prefix, read_json, shared};
use rustix::process::Signal;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a cgroup cpu controller is (v2 offering `cpu`, else v1's cpu hierarchy), as
/// the lab looks for one; `None`: quotas cannot be tested here.
fn cpu_controller() -> Option<PathBuf> {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let c = Path::new(root).join("cgroup.controllers");
        if std::fs::read_to_string(&c).is_ok_and(|s| s.split_whitespace().any(|w| w == "cpu")) {
            return Some(PathBuf::from(root));
        }
    }
    ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("cpu.cfs_quota_us").is_file())
}

/// The quota cgroups of run `pid` (`ingressbench-<pid>-...`).
fn cgroups_of(root: &Path, pid: u32) -> Vec<String> {
    names_with_prefix(root, &format!("ingressbench-{pid}-"))
}

/// The cgroup cpu controller these tests put quotas under.
///
/// # Panics
/// When quotas cannot be made here (not root, or no cpu controller): a test that
/// cannot run fails rather than passing unseen. `make test` leaves these tests out,
/// and says so in its closing summary, only when asked with
/// `INGRESSBENCH_TEST_OPT_OUT=cpu-quotas` (by the module name `cpu_quotas`).
fn quota_root() -> PathBuf {
    assert!(
        rustix::process::geteuid().is_root(),
        "CPU quotas need root: run the tests as root, or opt out with INGRESSBENCH_TEST_OPT_OUT=cpu-quotas make test"
    );
    cpu_controller().expect(
        "no cgroup cpu controller is mounted (v2 offering cpu, or v1's cpu hierarchy): \
         mount one, or opt out with INGRESSBENCH_TEST_OPT_OUT=cpu-quotas make test",
    )
}

fn scenario(dir: &Path, sizing: &str) -> PathBuf {
    let p = dir.join("sizing.yaml");
    std::fs::write(
        &p,
        format!(
            "name: sizing-test\nsystems: [nginx-reload]\nbackends:\n  replicas: 1\n\
             load:\n  connections: 20\n  timeout: 2s\n\
             search:\n  p99: 200ms\n  duration: 1s\n  warmup: 200ms\n  probe: 2s\n  precision: 20%\n\
             sizing:\n{sizing}"
        ),
    )
    .unwrap();
    p
}

fn run(scn: &Path, out: &Path) -> Proc {
    let mut cmd = bin();
    cmd.arg("run").arg(scn).arg("--out").arg(out);
    Proc::spawn_group("sizing-run", &mut cmd, out.parent().unwrap())
        .stop_with(Signal::INT, Duration::from_secs(20))
}

/// Waits until run `p` has put a quota cgroup in place (up to 60 s).
fn wait_for_a_cgroup(root: &Path, p: &mut Proc) {
    let t0 = Instant::now();
    while cgroups_of(root, p.id()).is_empty() {
        assert!(p.alive(), "the run ended early:\n{}", p.stderr_so_far());
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no cgroup after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn rows(out: &Path) -> Vec<Value> {
    let s = read_json(&out.join("nginx-reload").join("sizing.json"));
    assert_eq!(s["schema"], "ingressbench/sizing/v1", "{s}");
    s["rows"].as_array().unwrap().clone()
}

/// The tests that put CPU quotas on proxies: root and a cgroup cpu controller, or
/// they fail (`make test` leaves them out only with INGRESSBENCH_TEST_OPT_OUT=cpu-quotas,
/// by this module's name).
mod cpu_quotas {
    use super::*;

    #[test]
    fn a_half_core_quota_doubles_a_quarters_handshakes_and_the_cgroups_go_with_the_run() {
        let root = quota_root();
        let _alone = exclusive();
        let dir = tempfile::tempdir().unwrap();
        // RSA-2048 full handshakes: the proxy's signing is what its CPU is spent on.
        let scn = scenario(
            dir.path(),
            "  cores: [0.25, 0.5]\n  tps: {keys: [rsa2048], versions: [\"1.3\"]}\n",
        );
        let out = dir.path().join("out");
        let p = run(&scn, &out);
        let pid = p.id();
        let o = p.finish(Duration::from_secs(300));
        assert_eq!(o.code, Some(0), "{}\n{}", o.stdout, tail(&o.stderr, 30));
        let rows = rows(&out);
        assert_eq!(rows.len(), 2);
        let mut ceilings = Vec::new();
        for (r, quota) in rows.iter().zip([0.25, 0.5]) {
            assert_eq!(r["allocation"]["quota"].as_f64(), Some(quota), "{r}");
            assert_eq!(r["measure"]["kind"], "tps");
            let s = &r["search"];
            // The closed-loop probe saturates the proxy: its rate is the quota's doing.
            ceilings.push(s["ceiling"].as_f64().unwrap());
            assert!(r["max_rate"].as_f64().is_some(), "{quota}: no maximum: {s}");
            // nginx's own log: every handshake of the search a full one.
            let h = &r["handshakes"];
            assert!(h["full"].as_u64().unwrap() > 10, "{quota}: {h}");
            assert_eq!(h["resumed"].as_u64(), Some(0), "{quota}: {h}");
            // The proxy never used more than its quota (with slack for the reading's
            // wall time being a little shorter than the step's).
            if let Some(c) = r["proxy_cores_at_max"].as_f64() {
                assert!(c <= quota * 1.5, "{quota}: proxy used {c} cores");
            }
        }
        let ratio = ceilings[1] / ceilings[0];
        // Twice the CPU, twice the handshakes; generous for a noisy machine, but an
        // unenforced quota (both alike) or a halving gone wrong would fail it.
        assert!(
            (1.5..=2.7).contains(&ratio),
            "handshakes/s at 0.5 core over 0.25 core: {ceilings:?} ({ratio:.2})"
        );
        let z = read_json(&out.join("nginx-reload").join("sizing.json"));
        assert!(z["cgroup"].as_str().unwrap().starts_with("cgroup v"), "{z}");
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains("Sizing: maximum per CPU allocation"),
            "{summary}"
        );
        assert!(
            cgroups_of(&root, pid).is_empty(),
            "{:?}",
            cgroups_of(&root, pid)
        );
    }

    #[test]
    fn an_interrupted_scan_keeps_its_rows_and_leaves_no_cgroup_or_proxy() {
        let root = quota_root();
        let _turn = shared();
        let dir = tempfile::tempdir().unwrap();
        let scn = scenario(dir.path(), "  cores: [0.5, 0.25]\n  rps: [1024, 128]\n");
        let out = dir.path().join("out");
        let mut p = run(&scn, &out);
        let pid = p.id();
        // Into the first row's search, with its quota in place.
        wait_for_a_cgroup(&root, &mut p);
        std::thread::sleep(Duration::from_millis(1500));
        p.signal(Signal::INT);
        let o = p.finish(Duration::from_secs(60));
        assert_eq!(o.code, Some(130), "{}\n{}", o.stdout, tail(&o.stderr, 30));
        let z = read_json(&out.join("nginx-reload").join("sizing.json"));
        assert_eq!(z["partial"], true, "{z}");
        assert!(z["rows"].as_array().unwrap().len() < 4, "{z}");
        assert!(
            cgroups_of(&root, pid).is_empty(),
            "{:?}",
            cgroups_of(&root, pid)
        );
        let left = crate::common::processes_with(&format!("ingressbench-run-{pid}-"));
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_killed_scans_cgroup_and_proxy_are_removed_by_its_watchdog() {
        let root = quota_root();
        let _turn = shared();
        let dir = tempfile::tempdir().unwrap();
        let scn = scenario(dir.path(), "  cores: [0.5]\n  rps: [1024]\n");
        let out = dir.path().join("out");
        let mut p = run(&scn, &out);
        let pid = p.id();
        wait_for_a_cgroup(&root, &mut p);
        // SIGKILL runs none of the run's code: only its watchdog can clean up.
        p.signal(Signal::KILL);
        let _ = p.wait_timeout(Duration::from_secs(10));
        let t1 = Instant::now();
        let left = || {
            (
                cgroups_of(&root, pid),
                crate::common::processes_with(&format!("ingressbench-run-{pid}-")),
            )
        };
        while left() != (Vec::new(), Vec::new()) && t1.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(left(), (Vec::new(), Vec::new()), "left after SIGKILL");
    }
}

/// Runs `load --new-connection` (with `--tls-resume` when `resume`) through `d` and
/// checks that the proxy counted exactly the handshakes the load made.
fn counts_exactly(d: &mut dyn Driver, https_port: u16, cacert: &Path, resume: bool) {
    let before = d.handshakes().expect("the proxy counts handshakes");
    let url = format!("https://127.0.0.1:{https_port}/");
    let mut args = vec![
        "-c4",
        "-R100",
        "-d2s",
        "--new-connection",
        "--tls-version",
        "1.3",
        "--cacert",
    ];
    let ca = cacert.to_str().unwrap();
    args.push(ca);
    if resume {
        args.push("--tls-resume");
    }
    args.push(&url);
    let o = run_load(&args, Duration::from_secs(60));
    let r = o.result();
    assert_eq!(r["requests"]["failed"].as_u64(), Some(0), "{}", o.context());
    // Let the proxy finish writing what it answered (its log, its counters).
    std::thread::sleep(Duration::from_millis(300));
    let after = d.handshakes().unwrap();
    let (full, resumed) = (after.full - before.full, after.resumed - before.resumed);
    let made = r["tls"]["handshakes"].as_u64().unwrap();
    let made_resumed = r["tls"]["resumed"].as_u64().unwrap();
    assert!(made >= 150, "{}: {made} handshakes", d.name());
    assert_eq!(
        (full, resumed),
        (made - made_resumed, made_resumed),
        "{} ({}): proxy counted (full, resumed), the load made {made} with {made_resumed} resumed",
        d.name(),
        after.source
    );
    if resume {
        assert!(
            made_resumed > made / 2,
            "{}: {made_resumed} of {made} resumed",
            d.name()
        );
    } else {
        assert_eq!(made_resumed, 0);
    }
}

#[test]
fn every_proxy_counts_full_and_resumed_handshakes_exactly() {
    use crate::common::lab::{caddy, envoy, haproxy, nginx};
    // Each load takes its turn (`run_load` holds the exclusive lock); the proxies
    // wait idle in between.
    let b = backend("b1");
    let drivers: Vec<Box<dyn Driver>> = vec![
        Box::new(nginx::Nginx::new(nginx::Mode::Reload)),
        Box::new(haproxy::Haproxy::new(haproxy::Mode::Reload)),
        Box::new(caddy::Caddy::new()),
        Box::new(envoy::xds::EnvoyXds::new()),
    ];
    for mut d in drivers {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path());
        ctx.count_handshakes = true;
        d.prepare(&ctx, std::slice::from_ref(&b.endpoint)).unwrap();
        d.start().unwrap();
        d.wait_ready(Duration::from_secs(15)).unwrap();
        for resume in [false, true] {
            counts_exactly(d.as_mut(), ctx.https_port, &ctx.cert, resume);
        }
        d.stop().unwrap();
    }
}
