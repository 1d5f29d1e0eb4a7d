//! `load --platform kubernetes --generators 2` end to end on a real API server: the
//! generators are the pods of an indexed Job, made real by the pod harness (each
//! `ingressbench generator --part $(JOB_COMPLETION_INDEX)/2 ...` in its own network
//! namespace), their clocks probed and their results collected through the API
//! server's pod proxy, and merged into one result. The coordinator runs inside the
//! cluster's network namespace (no default route); the target is the built-in backend
//! on the cluster's own address, which every pod reaches through its veth.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_pods::{pod_netns_on_machine, PodRunner};
use crate::common::proc::Proc;
use crate::common::{exclusive, processes_with, read_json, shared, BIN};
use std::time::{Duration, Instant};

/// The target: the cluster namespace's own address (API_IP in the harness).
const TARGET: &str = "198.18.0.1:18080";

#[test]
fn two_generators_run_as_an_indexed_job_and_give_one_merged_result() {
    let _alone = exclusive();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let runner = PodRunner::start(&cluster, BIN);
    let dir = tempfile::tempdir().unwrap();
    let mut b = cluster.ingressbench();
    b.arg("backend")
        .args(["--listen", TARGET, "--id", "target", "--workers", "1"]);
    let backend = Proc::spawn_group("target", &mut b, dir.path());

    let out = dir.path().join("r.json");
    let mut load = cluster.ingressbench();
    load.arg("load")
        .arg(format!("http://{TARGET}/"))
        .args(["--platform", "kubernetes", "--generators", "2"])
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["--image", "ingressbench:test", "--lead", "6s"])
        .args([
            "-R", "200", "-c", "4", "-d", "4s", "--warmup", "1s", "--quiet",
        ])
        .arg("--json")
        .arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("load", &mut load, dir.path()).finish(Duration::from_secs(90));
    let took = t.elapsed();
    eprintln!(
        "k8s generators: load took {took:.1?}\n{}\nrunner log:\n{}",
        done.stdout,
        runner.log().join("\n")
    );
    assert!(done.success(), "{}\n{}", done.stdout, done.stderr);
    drop(backend);

    let r = read_json(&out);
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let q = &r["requests"];
    let parts = r["generators"]["parts"].as_array().expect("parts");
    assert_eq!(parts.len(), 2, "{}", r["generators"]);
    // One merged result: the parts' requests add up to it, and each part did its half.
    for k in ["intended", "completed", "failed"] {
        let sum: u64 = parts.iter().map(|p| n(&p["requests"][k])).sum();
        assert_eq!(sum, n(&q[k]), "{k}: {}", r["generators"]);
    }
    assert_eq!(
        n(&q["intended"]),
        n(&q["completed"]) + n(&q["failed"]) + n(&q["not_sent"]) + n(&q["unfinished"])
    );
    assert_eq!(n(&q["failed"]), 0, "{}", r["errors"]);
    // 200 req/s for 4 s measured.
    assert!((760..=840).contains(&n(&q["intended"])), "{q}");
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(n(&p["index"]), i as u64, "{p}");
        assert!(p["error"].is_null(), "{p}");
        let half = n(&p["requests"]["intended"]) as f64 / n(&q["intended"]) as f64;
        assert!(
            (0.45..=0.55).contains(&half),
            "part {i} had {half:.2} of the load: {p}"
        );
        // Measured through the pod proxy before the start: offset and its bound.
        let err = p["clock_offset_error_ms"].as_f64().expect("clock measured");
        let off = p["clock_offset_ms"].as_f64().unwrap();
        eprintln!("k8s generators: part {i}: clock offset {off:.3} ms ± {err:.3} ms");
        assert!(err < 50.0 && off.abs() < 50.0 + err, "{p}");
    }
    assert_eq!(
        n(&r["backends"]["target"]),
        n(&q["completed"]),
        "{}",
        r["backends"]
    );

    // Nothing left: the run's namespace (and its Job) goes, then the pods, their
    // namespaces and processes.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (ok, jobs) = cluster.kubectl(&["get", "jobs", "-A", "-o", "name"]);
    assert!(ok && jobs.trim().is_empty(), "{jobs}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !runner.live_netns().is_empty() {
        assert!(Instant::now() < deadline, "{:?}", runner.live_netns());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(runner.problems(), Vec::<String>::new());
    let recs = runner.records();
    assert_eq!(recs.len(), 2, "{recs:#?}");
    for rec in &recs {
        assert!(rec.name.starts_with("ib-generators-"), "{rec:?}");
        // It ended by itself once collected: a kubelet's Succeeded.
        let how = rec.exited.as_ref().map(|(_, h)| h.as_str());
        assert_eq!(how, Some("exit code 0"), "{rec:?}");
    }
    assert!(runner
        .log()
        .iter()
        .any(|l| l.contains("reported Succeeded")));
    drop(runner);
    let left = pod_netns_on_machine();
    assert!(recs.iter().all(|r| !left.contains(&r.netns)), "{left:?}");
    assert_eq!(processes_with("--serve 0.0.0.0:9090"), vec![]);
    assert_eq!(processes_with(&format!("--listen {TARGET}")), vec![]);
    eprintln!("k8s generators: whole test {:.1?}", t.elapsed() + took);
}

/// `run --platform kubernetes --generators 2`: a scenario's load from two generator
/// pods through Traefik (its Ingress provider) to the run's pods, while the run
/// scales them and changes a route. Each change is announced to both pods ahead of
/// its time, through the pod proxy, so both count their requests by the same change
/// windows; the merged result has the windows, the new pod's propagation and the
/// route change seen in traffic, like a run whose load ran here.
#[test]
fn a_scenario_runs_its_load_from_two_generator_pods_through_traefik() {
    use crate::common::k8s_traefik::{Providers, Traefik};
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let runner = PodRunner::start(&cluster, BIN);
    let traefik = Traefik::start(
        &cluster,
        Providers {
            ingress: true,
            gateway: false,
            ingress_nginx: false,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s-generators\nplatform: kubernetes\nsystems: [traefik]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{traefik: \"{}\"}}\n\
             \x20 generators: {{image: \"ingressbench:test\", lead: 6s}}\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             tls:\n  enabled: false\n\
             load:\n  rate: 200\n  connections: 10\n  duration: 14s\n  warmup: 2s\n\
             changes:\n  - wait: 1s\n  - scale: 3\n  - wait: 3s\n  - route: header\n  - wait: 3s\n  - route: base\n",
            cluster.kubeconfig().display(),
            traefik.url()
        ),
    )
    .unwrap();
    let mut run = cluster.ingressbench();
    run.arg("run")
        .arg(&scn)
        .args(["--generators", "2", "--out"])
        .arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut run, dir.path()).finish(Duration::from_secs(240));
    eprintln!(
        "k8s generators run: took {:.1?}\n{}\nrunner log:\n{}",
        t.elapsed(),
        done.stdout,
        runner.log().join("\n")
    );
    assert!(done.success(), "{}\n{}", done.stdout, done.stderr);
    drop(traefik);

    let r = read_json(&out.join("traefik/result.json"));
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let q = &r["requests"];
    assert_eq!(
        n(&q["intended"]),
        n(&q["completed"]) + n(&q["failed"]) + n(&q["not_sent"]) + n(&q["unfinished"])
    );
    // 200 req/s for 14 s measured, from both pods, each with every change mark in
    // time on its own clock.
    assert!((2660..=2940).contains(&n(&q["intended"])), "{q}");
    let parts = r["generators"]["parts"].as_array().expect("parts");
    assert_eq!(parts.len(), 2, "{}", r["generators"]);
    let changes = r["lab"]["windows"].as_array().expect("windows").len() as u64;
    for p in parts {
        assert!(p["error"].is_null(), "{p}");
        let m = &p["marks"];
        assert_eq!(n(&m["sent"]), changes, "{p}");
        assert_eq!(n(&m["missed"]), 0, "{p}");
        let late = m["late_max_ms"].as_f64().unwrap();
        eprintln!(
            "k8s generators run: part {}: marks late by up to {late:.1} ms",
            p["index"]
        );
        assert!(late < 300.0, "{p}");
    }
    // The windows are the whole run's: they add up to its completed requests.
    let before = n(&r["lab"]["before_changes"]["completed"]);
    let in_windows: u64 = r["lab"]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| n(&w["completed"]))
        .sum();
    assert_eq!(
        before + in_windows,
        n(&q["completed"]),
        "{}",
        r["lab"]["windows"]
    );
    // The scaled-up pod got traffic from the pods' load.
    let backends = r["backends"].as_object().unwrap();
    assert_eq!(backends.len(), 3, "{backends:?}");
    let added = &r["lab"]["propagation"]["added"][0];
    let prop = added["propagation_ms"]
        .as_f64()
        .expect("the new pod got traffic");
    assert!(prop < 10_000.0, "{added}");
    // Each route change seen in traffic, in order, by the merged windows.
    let rp = r["lab"]["route_propagation"]["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no route propagation: {}", r["lab"]));
    let routes: Vec<&str> = rp.iter().map(|c| c["route"].as_str().unwrap()).collect();
    assert_eq!(routes, ["header", "base"]);
    for c in rp {
        let seen = c["seen_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("a route never seen: {c}"));
        eprintln!(
            "k8s generators run: {} applied {} ms, seen {seen:.0} ms",
            c["route"], c["applied_ms"]
        );
        assert!(n(&c["responses_new"]) > 0 && seen < 3000.0, "{c}");
    }
    assert!(n(&q["failed"]) * 20 < n(&q["intended"]), "{}", r["errors"]);
    // Nothing left: the system's namespace and the generators' Job and namespace.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (ok, jobs) = cluster.kubectl(&["get", "jobs", "-A", "-o", "name"]);
    assert!(ok && jobs.trim().is_empty(), "{jobs}");
    assert_eq!(runner.problems(), Vec::<String>::new());
    drop(runner);
    assert_eq!(processes_with("--serve 0.0.0.0:9090"), vec![]);
}
