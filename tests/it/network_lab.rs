//! The network lab (study S2) end to end, as root: every data path carries the load
//! from node A to nginx over the links that make it that path; `load.rates` searches
//! each path's maximum and runs at fractions of it; and nothing a run creates
//! (namespaces, their links and rules, nginx) survives it, whether it ends well,
//! fails half-built, is interrupted (SIGINT, SIGTERM) or is killed (the next run
//! sweeps what a killed one left).

use crate::common::proc::{tail, Proc};
use crate::common::{bin, exclusive, names_with_prefix, read_json, shared};
use rustix::process::Signal;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Namespaces named by a network-lab run (`ibnl-<pid>-<role>`), with that pid.
fn namespaces_of(pid: u32) -> Vec<String> {
    names_with_prefix(Path::new("/run/netns"), &format!("ibnl-{pid}-"))
}

/// nginx processes whose configuration is in a run's scratch folder of this pid.
fn servers_of(pid: u32) -> Vec<(String, String)> {
    crate::common::processes_with(&format!("ingressbench-run-{pid}-"))
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("nginx"))
        .collect()
}

fn scenario(dir: &Path, systems: &str, extra: &str) -> std::path::PathBuf {
    let p = dir.join("paths.yaml");
    std::fs::write(
        &p,
        format!(
            "name: paths\nplatform: network-lab\nsystems: [{systems}]\n\
             network_lab:\n  access_log: true\n  tuning: s2\n\
             backends:\n  body_size: 100\ntls:\n  enabled: false\n{extra}"
        ),
    )
    .unwrap();
    p
}

fn run_to_end(scn: &Path, out: &Path, limit: Duration) -> (crate::common::proc::Output, u32) {
    let mut cmd = bin();
    cmd.arg("run").arg(scn).arg("--out").arg(out);
    let p = Proc::spawn_group("netlab-run", &mut cmd, out.parent().unwrap())
        .stop_with(Signal::INT, Duration::from_secs(20));
    let pid = p.id();
    (p.finish(limit), pid)
}

#[test]
fn every_data_path_carries_the_load_over_its_own_links_and_leaves_nothing() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let scn = scenario(
        dir.path(),
        "host, bridge, host-gw, vxlan, macvlan",
        "load:\n  rate: 400\n  connections: 4\n  duration: 2s\n",
    );
    let out = dir.path().join("out");
    let (o, pid) = run_to_end(&scn, &out, Duration::from_secs(180));
    assert_eq!(o.code, Some(0), "{}\n{}", o.stdout, tail(&o.stderr, 30));
    // (server address nginx saw, the link only this path crosses)
    let want = [
        ("host", "198.18.0.2:80", None),
        ("bridge", "198.18.10.2:80", Some("b/br0")),
        ("host-gw", "198.18.10.2:80", Some("b/pod0")),
        ("vxlan", "198.18.10.2:80", Some("b/vx0")),
        ("macvlan", "198.18.10.2:80", Some("pod/mv0")),
    ];
    for (path, server, link) in want {
        let r = read_json(&out.join(path).join("result.json"));
        let done = r["requests"]["completed"].as_u64().unwrap();
        assert!(done >= 700, "{path}: {done} completed of 800");
        assert_eq!(r["requests"]["failed"].as_u64(), Some(0), "{path}");
        let net = &r["lab"]["network"];
        assert_eq!(net["path"], path);
        assert_eq!(net["server"], server, "{path}: {net}");
        // What nginx itself saw: every request from node A's address, at the
        // address this path delivers to (the bridge path's DNAT turns node B's
        // port 8080 into the pod's port 80).
        let log = std::fs::read_to_string(out.join(path).join("access.log")).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert!(lines.len() as u64 >= done, "{path}: {} logged", lines.len());
        assert!(
            lines.iter().all(|l| *l == format!("198.18.0.1 {server}")),
            "{path}: {:?}",
            &lines[..3.min(lines.len())]
        );
        if path == "bridge" {
            assert_eq!(net["target"], "198.18.0.2:8080");
        }
        // The path's own link carried at least one packet per request each way.
        let links = net["links"].as_object().unwrap();
        let wire = &links["b/wire"];
        assert!(wire["rx"].as_u64().unwrap() >= done, "{path}: {links:?}");
        if let Some(l) = link {
            let c = &links[l];
            assert!(
                c["rx"].as_u64().unwrap() >= done && c["tx"].as_u64().unwrap() >= done,
                "{path}: {l}: {links:?}"
            );
        } else {
            assert_eq!(links.len(), 1, "host has no pod link: {links:?}");
        }
        // S2's sysctls that a namespace has were set; the machine's were not tried.
        assert_eq!(net["sysctls"]["net.ipv4.tcp_tw_reuse"], "ok", "{net}");
        if path == "macvlan" {
            assert!(
                ["macvlan", "ipvlan"].contains(&net["pod_device"].as_str().unwrap()),
                "{net}"
            );
        }
    }
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    assert!(servers_of(pid).is_empty(), "{:?}", servers_of(pid));
}

#[test]
fn rates_search_each_maximum_then_run_at_its_fractions() {
    let _alone = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let scn = scenario(
        dir.path(),
        "host-gw",
        "load:\n  rates: [0.3, 0.5]\n  connections: 20\n  duration: 2s\n\
         search:\n  p99: 20ms\n  duration: 1s\n  warmup: 200ms\n  probe: 1s\n  precision: 10%\n",
    );
    let out = dir.path().join("out");
    let (o, pid) = run_to_end(&scn, &out, Duration::from_secs(240));
    assert_eq!(o.code, Some(0), "{}\n{}", o.stdout, tail(&o.stderr, 30));
    let s = read_json(&out.join("host-gw").join("search.json"));
    let max = s["max_rate"].as_f64().expect("a maximum");
    assert!(max > 100.0, "{s}");
    for (label, f) in [("host-gw@30", 0.3), ("host-gw@50", 0.5)] {
        let r = read_json(&out.join(label).join("result.json"));
        let frac = &r["lab"]["fraction"];
        assert_eq!(frac["of"], "host-gw");
        assert_eq!(frac["fraction"].as_f64(), Some(f));
        assert_eq!(frac["max_rate"].as_f64(), Some(max));
        let rate = r["config"]["rate"].as_f64().unwrap();
        assert!(
            (rate - f * max).abs() < 1.0,
            "{label}: {rate} vs {f} x {max}"
        );
    }
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("host-gw@30"), "{summary}");
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
}

/// Waits until a run of `pid` has built its lab (its namespaces exist).
fn wait_built(p: &mut Proc, pid: u32) {
    let t0 = Instant::now();
    while namespaces_of(pid).len() < 2 {
        assert!(p.alive(), "the run ended early:\n{}", p.stderr_so_far());
        assert!(t0.elapsed() < Duration::from_secs(60), "no lab after 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Into the load.
    std::thread::sleep(Duration::from_millis(1500));
}

#[test]
fn interrupted_failed_and_killed_runs_leave_no_namespace_or_server() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let scn = scenario(
        dir.path(),
        "vxlan",
        "load:\n  rate: 200\n  connections: 2\n  duration: 30s\n",
    );
    for (sig, code) in [(Signal::INT, 130), (Signal::TERM, 130)] {
        let out = dir.path().join(format!("out-{sig:?}"));
        let mut cmd = bin();
        cmd.arg("run").arg(&scn).arg("--out").arg(&out);
        let mut p = Proc::spawn_group("netlab-signal", &mut cmd, dir.path())
            .stop_with(Signal::INT, Duration::from_secs(20));
        let pid = p.id();
        wait_built(&mut p, pid);
        p.signal(sig);
        let o = p.finish(Duration::from_secs(30));
        assert_eq!(o.code, Some(code), "{sig:?}: {}", tail(&o.stderr, 20));
        let r: Value = read_json(&out.join("vxlan").join("result.json"));
        assert_eq!(r["partial"], true, "{sig:?}");
        assert!(
            namespaces_of(pid).is_empty(),
            "{sig:?}: {:?}",
            namespaces_of(pid)
        );
        assert!(servers_of(pid).is_empty(), "{sig:?}: {:?}", servers_of(pid));
    }

    // Failing half-built: a server that exits at once, in namespaces already built.
    let out = dir.path().join("out-fail");
    let mut cmd = bin();
    cmd.env("INGRESSBENCH_NGINX", "/bin/false")
        .arg("run")
        .arg(&scn)
        .arg("--out")
        .arg(&out);
    let p = Proc::spawn_group("netlab-fail", &mut cmd, dir.path());
    let pid = p.id();
    let o = p.finish(Duration::from_secs(60));
    assert_ne!(o.code, Some(0));
    assert!(o.stderr.contains("nginx exited at start"), "{}", o.stderr);
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));

    // Killed: nothing of ours runs, so the namespaces stay; the next run sweeps them
    // (and the processes inside them) before it builds its own.
    let out = dir.path().join("out-kill");
    let mut cmd = bin();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let mut p = Proc::spawn_group("netlab-kill", &mut cmd, dir.path());
    let killed = p.id();
    wait_built(&mut p, killed);
    p.signal(Signal::KILL);
    let _ = p.wait_timeout(Duration::from_secs(10));
    assert_eq!(
        namespaces_of(killed).len(),
        3,
        "a killed run leaves its namespaces"
    );
    let scn2 = scenario(
        dir.path(),
        "host",
        "load:\n  rate: 100\n  connections: 1\n  duration: 1s\n",
    );
    let (o, pid) = run_to_end(
        &scn2,
        &dir.path().join("out-after"),
        Duration::from_secs(60),
    );
    assert_eq!(o.code, Some(0), "{}", tail(&o.stderr, 20));
    assert!(
        namespaces_of(killed).is_empty(),
        "{:?}",
        namespaces_of(killed)
    );
    assert!(servers_of(killed).is_empty(), "{:?}", servers_of(killed));
    assert!(namespaces_of(pid).is_empty());
}

#[test]
fn an_interrupted_search_is_written_partial_and_claims_no_maximum() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let scn = scenario(
        dir.path(),
        "host, vxlan",
        "load:\n  rates: [0.5]\n  connections: 4\n  duration: 2s\n\
         search:\n  p99: 20ms\n  duration: 20s\n  probe: 20s\n",
    );
    let out = dir.path().join("out");
    let mut cmd = bin();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let mut p = Proc::spawn_group("netlab-search-int", &mut cmd, dir.path())
        .stop_with(Signal::INT, Duration::from_secs(20));
    let pid = p.id();
    wait_built(&mut p, pid);
    p.signal(Signal::INT);
    let o = p.finish(Duration::from_secs(40));
    assert_eq!(o.code, Some(130), "{}", tail(&o.stderr, 20));
    let s = read_json(&out.join("host").join("search.json"));
    assert_eq!(s["partial"], true, "{s}");
    assert!(s["max_rate"].is_null(), "{s}");
    assert!(
        !out.join("host@50").exists(),
        "no run at a fraction of nothing"
    );
    assert!(!out.join("vxlan").exists(), "the next system never started");
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
}
