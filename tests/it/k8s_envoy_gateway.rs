//! Envoy Gateway v1.9 for real ([`EnvoyGateway`]): its controller and the Envoy
//! pods it makes per Gateway, run by the harness, each run with a Gateway of its own
//! (`kubernetes.gateway_class`), TLS at that Gateway with the run's certificate.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_envoy_gateway::{EnvoyGateway, CLASS, EG_NS};
use crate::common::k8s_pods::PodRunner;
use crate::common::proc::{Output, Proc};
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The scenario head every run here shares: the cluster, the run's own Gateway.
fn head(cluster: &TestCluster, name: &str, tls: bool) -> String {
    format!(
        "name: {name}\nplatform: kubernetes\nsystems: [envoy-gateway]\n\
         kubernetes:\n  kubeconfig: {}\n  gateway_class: {CLASS}\n  gateway_ports: {{http: 8080, https: 8443}}\n\
         tls:\n  enabled: {tls}\n",
        cluster.kubeconfig().display()
    )
}

fn run(cluster: &TestCluster, dir: &Path, scn: &str) -> (Output, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("s.yaml");
    std::fs::write(&file, scn).unwrap();
    let out = dir.join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&file).arg("--out").arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut cmd, dir).finish(Duration::from_secs(300));
    eprintln!("run took {:.1?}\n{}", t.elapsed(), done.stdout);
    (done, out)
}

/// The resident memory of the processes whose command line holds `text`, summed.
fn rss_mib(text: &str) -> f64 {
    let pids: Vec<u32> = crate::common::processes_with(text)
        .iter()
        .filter_map(|(pid, _)| pid.parse().ok())
        .collect();
    crate::common::k8s::rss_mib_of(&pids)
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// What Envoy Gateway made for the run's Gateway is gone once the run has ended:
/// the Gateway, and the Envoy Deployment and Service in its own namespace.
fn nothing_left_of_the_runs_gateway(cluster: &TestCluster) {
    let t = Instant::now();
    loop {
        let (_, left) = cluster.kubectl(&[
            "get",
            "deployments,services,pods,configmaps",
            "-n",
            EG_NS,
            "-o",
            "name",
        ]);
        let (_, gws) = cluster.kubectl(&["get", "gateways", "-A", "-o", "name"]);
        if !left.contains("envoy-ingressbench-") && gws.trim().is_empty() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "left of the run's Gateway after 60 s: {left} {gws}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// S1's endpoint churn and S3's route changes under one TLS load at the run's own
/// Gateway, with the certificate rotated, the controller restarted and the Envoy
/// Deployment rolled: each change reported and seen in traffic.
#[test]
fn s1_churn_s3_routes_rotation_and_restarts_at_a_gateway_the_run_owns() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let eg = EnvoyGateway::start(&cluster);
    eprintln!("envoy gateway up in {:.1?}", eg.took);
    let dir = tempfile::tempdir().unwrap();
    let scn = format!(
        "{}  key: ecdsa-p256\n{}\
         probes:\n  only: [plain, underscore-header, body-1mib-plus-1, upstream-reset-once, unknown-path, no-ready-endpoint, slow-backend-16s]\n  during: false\n",
        head(&cluster, "k8s-eg", true),
        crate::common::k8s::LIFECYCLE_RUN
    );
    let (done, out) = run(&cluster, dir.path(), &scn);
    assert!(
        done.success(),
        "{}\n{}\n{}\npods: {:#?}",
        done.stdout,
        done.stderr,
        eg.logs(),
        pods.log()
    );
    let r = read_json(&out.join("envoy-gateway/result.json"));
    // The behaviour probes through Envoy Gateway's own Envoy before the load: its
    // defaults where ingress-nginx's differ (docs/probes.md).
    let observed = &r["lab"]["probes"]["observed"];
    let probe = |id: &str| crate::common::k8s::probe_answer(observed, id);
    assert_eq!(probe("plain")["status"], 200, "{observed}");
    // What its Envoy adds and leaves out (docs/probes.md): an X-Request-Id, no
    // X-Real-IP (migration pitfall 7).
    let plain = &probe("plain")["received"]["headers"];
    assert!(plain["x-real-ip"].is_null(), "{plain}");
    assert!(!plain["x-request-id"].is_null(), "{plain}");
    // A header with an underscore is refused with a 400 by Envoy Gateway's Envoy
    // (its listeners' default, headers_with_underscores_action REJECT_REQUEST), where
    // ingress-nginx drops the header and HAProxy's controller passes it.
    let under = probe("underscore-header");
    assert_eq!(under["status"], 400, "{under}");
    assert!(under["received"].is_null(), "{under}");
    let big = probe("body-1mib-plus-1");
    assert_eq!(big["status"], 200, "{big}");
    assert_eq!(big["received"]["body_len"], (1 << 20) + 1, "{big}");
    // Envoy's 15 s route timeout, which Envoy Gateway leaves in force: a backend
    // answering after 16 s is a 504 from Envoy, after 15 s.
    let slow = probe("slow-backend-16s");
    eprintln!(
        "envoy-gateway: probes: slow-backend-16s -> {} in {} ms",
        slow["status"], slow["ms"]
    );
    assert_eq!(slow["status"], 504, "{slow}");
    assert!(slow["received"].is_null(), "{slow}");
    let ms = slow["ms"].as_f64().unwrap();
    assert!((15_000.0..16_000.0).contains(&ms), "{slow}");
    assert_eq!(
        crate::common::k8s::fixture_answers(observed, "envoy-gateway"),
        [(503, false), (404, false)]
    );
    eprintln!(
        "envoy-gateway: probes: reset once -> {} ({}); plain received {}",
        probe("upstream-reset-once")["status"],
        probe("upstream-reset-once")["received"],
        probe("plain")["received"]["headers"]
    );
    let events = crate::common::k8s::check_lifecycle_run(&r, "envoy-gateway", 8);

    // S3: each filter applied (the HTTPRoute Accepted for its generation) and seen
    // by the load.
    let changes = r["lab"]["route_propagation"]["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", r["lab"]));
    for route in ["header", "cors", "rewrite", "base"] {
        let c = changes
            .iter()
            .find(|c| c["route"] == route)
            .unwrap_or_else(|| panic!("no route propagation for {route}: {changes:?}"));
        let seen = c["seen_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("{route} never seen: {c}"));
        assert!(c["applied_ms"].as_f64().is_some(), "{c}");
        eprintln!(
            "envoy-gateway: route {route}: applied {} ms, seen {seen:.0} ms",
            c["applied_ms"]
        );
    }

    // The certificate rotated through the Secret the Gateway's listener names
    // (checked above); the controller's pod replaced, and Envoy's Deployment
    // rolled, each new pod reported.
    let replaced: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "pod_replaced")
        .filter_map(|e| e["detail"].as_str())
        .collect();
    assert!(
        replaced.iter().any(|p| p.starts_with("envoy-gateway-")),
        "{replaced:?}"
    );
    assert!(
        replaced
            .iter()
            .any(|p| p.starts_with("envoy-ingressbench-")),
        "{replaced:?}"
    );
    let lb = eg.lb_log();
    assert!(
        lb.iter().filter(|l| l.contains(" -> envoy-")).count() >= 2,
        "the load balancer followed the roll: {lb:?}"
    );

    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    nothing_left_of_the_runs_gateway(&cluster);
    drop(eg);
    drop(pods);
}

/// Issue 28's route set (200 HTTPRoutes over 10 hosts, one added, removed and
/// changed under load, status writes counted) and issue 29's gRPC through a
/// GRPCRoute, each at a Gateway of the run's own; the controller's and Envoy's
/// memory and CPU read from their processes.
#[test]
fn a_route_set_of_200_and_grpc_at_a_gateway_the_run_owns() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let eg = EnvoyGateway::start(&cluster);
    // Both the controller and Envoy run from build-gateways.sh's folder.
    let processes = format!(
        "{{envoy-gateway: \"{}\"}}",
        crate::common::k8s_envoy_gateway::eg_dir()
            .join("bin")
            .display()
    );
    // Beside the run's own reading of both together: each one's memory, apart.
    let bin = crate::common::k8s_envoy_gateway::eg_dir().join("bin");
    let (controller, envoy) = (
        format!("{} server", bin.join("envoy-gateway").display()),
        format!("{} --service-cluster", bin.join("envoy").display()),
    );
    let (results, (controller_mib, envoy_mib)) = crate::common::k8s::peak_while(
        || (rss_mib(&controller), rss_mib(&envoy)),
        || {
            crate::common::k8s::run_route_set(
                &cluster,
                &["envoy-gateway"],
                "{}",
                &format!("class:{CLASS}"),
                &processes,
                crate::common::k8s::ROUTES,
            )
        },
    );
    eprintln!(
        "envoy-gateway: at 200 routes, RSS max: controller {controller_mib:.0} MiB, Envoy {envoy_mib:.0} MiB"
    );
    assert!(
        controller_mib > 10.0 && envoy_mib > 10.0,
        "{controller_mib} {envoy_mib}"
    );
    let rs = &results[0]["lab"]["route_set"];
    eprintln!("envoy-gateway: route set: {rs}");
    let r = crate::common::k8s::run_grpc(
        &cluster,
        "envoy-gateway",
        "",
        &format!("class:{CLASS}"),
        true,
    );
    assert!(r.is_some(), "envoy-gateway: {}", eg.logs());
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    nothing_left_of_the_runs_gateway(&cluster);
    drop(eg);
    drop(pods);
}

/// What goes wrong, said in one line naming the object and its condition: a
/// GatewayClass that does not exist, a Gateway no controller programs, a
/// controller that crashes mid-run. Each run's result is written (partial where it
/// was cut), and nothing of it stays in the cluster.
#[test]
fn a_missing_class_an_unprogrammed_gateway_and_a_crashed_controller_are_said_in_one_line() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let mut eg = EnvoyGateway::start(&cluster);
    let dir = tempfile::tempdir().unwrap();
    let short = "load:\n  rate: 50\n  connections: 2\n  duration: 2s\n  warmup: 0s\n";

    // No such GatewayClass.
    let scn = head(&cluster, "k8s-eg-noclass", false)
        .replace(&format!("gateway_class: {CLASS}"), "gateway_class: nope");
    let (done, _) = run(&cluster, &dir.path().join("a"), &format!("{scn}{short}"));
    assert!(!done.success());
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("GatewayClass nope"))
        .unwrap_or_else(|| panic!("{}", done.stderr));
    assert!(
        line.contains("does not exist") && line.contains("kubernetes.gateway_class"),
        "{line}"
    );

    // A GatewayClass whose controller does not run: its Gateway is never Programmed.
    let class = dir.path().join("class.yaml");
    std::fs::write(
        &class,
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: orphan\n\
         spec:\n  controllerName: example.invalid/nobody\n",
    )
    .unwrap();
    let (ok, o) = cluster.kubectl(&["apply", "-f", class.to_str().unwrap()]);
    assert!(ok, "{o}");
    let scn = head(&cluster, "k8s-eg-orphan", false).replace(
        &format!("gateway_class: {CLASS}"),
        "gateway_class: orphan\n  gateway_timeout: 3s",
    );
    let (done, _) = run(&cluster, &dir.path().join("b"), &format!("{scn}{short}"));
    assert!(!done.success());
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("Gateway ") && l.contains("/ib-gateway"))
        .unwrap_or_else(|| panic!("{}", done.stderr));
    assert!(
        line.contains("not Programmed after 3s") && line.contains("Waiting for controller"),
        "{line}"
    );
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (_, gws) = cluster.kubectl(&["get", "gateways", "-A", "-o", "name"]);
    assert!(gws.trim().is_empty(), "{gws}");

    // The controller crashes a second into the run and stays down: Envoy serves on
    // its last configuration, the route change asked for meanwhile is reported not
    // accepted (naming the HTTPRoute), the result is written.
    let scn = format!(
        "{}backends:\n  replicas: 2\n  drain_timeout: 2s\n\
         load:\n  rate: 50\n  connections: 2\n  duration: 14s\n  warmup: 1s\n\
         changes:\n  - wait: 2s\n  - route: header\n",
        head(&cluster, "k8s-eg-crash", false)
            .replace("gateway_ports:", "gateway_timeout: 10s\n  gateway_ports:")
    );
    let sub = dir.path().join("c");
    std::fs::create_dir_all(&sub).unwrap();
    let file = sub.join("s.yaml");
    std::fs::write(&file, &scn).unwrap();
    let out = sub.join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&file).arg("--out").arg(&out);
    let proc = Proc::spawn_group("run", &mut cmd, &sub);
    // Killed once the load runs (the run says so when its Gateway served).
    crate::common::k8s::wait_load_running(&proc, Instant::now(), || eg.logs());
    std::thread::sleep(Duration::from_secs(1));
    eg.kill_controller();
    let done = proc.finish(Duration::from_secs(120));
    eprintln!("{}\n{}", done.stdout, done.stderr);
    let r = read_json(&out.join("envoy-gateway/result.json"));
    let events = r["lab"]["events"].as_array().unwrap();
    let failed = events
        .iter()
        .find(|e| e["kind"] == "change_failed")
        .unwrap_or_else(|| panic!("{events:?}"));
    let detail = failed["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("header: ") && detail.contains("HTTPRoute"),
        "{detail}"
    );
    assert!(!detail.contains('\n'), "{detail}");
    let q = &r["requests"];
    assert!(
        n(&q["completed"]) * 10 >= n(&q["intended"]) * 9,
        "Envoy kept serving: {q}"
    );
    // The run waited for Envoy Gateway to remove the data plane it made for the
    // run's Gateway, and says what stays and how to remove it.
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("has not removed it"))
        .unwrap_or_else(|| panic!("{}", done.stderr));
    assert!(
        line.contains("Deployment envoy-ingressbench-") && line.contains("kubectl delete"),
        "{line}"
    );
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    eg.revive_controller();
    // Envoy Gateway 1.9.1, back, does not remove the data plane of a Gateway
    // deleted while it was down (measured: still there 10 s after it served
    // again); the run's line says how, and that removes it.
    let t = Instant::now();
    while !eg.controller_log().iter().any(|l| l.ends_with(": ready")) {
        assert!(t.elapsed() < Duration::from_secs(60), "{}", eg.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(10));
    let (_, left) = cluster.kubectl(&["get", "deployments", "-n", EG_NS, "-o", "name"]);
    eprintln!("envoy-gateway: 10 s after it served again: {left}");
    let remedy = line.split("remove it with kubectl ").nth(1).unwrap();
    let args: Vec<&str> = remedy.split_whitespace().collect();
    let (ok, o) = cluster.kubectl(&args);
    assert!(ok, "{o}");
    nothing_left_of_the_runs_gateway(&cluster);
    drop(eg);
    drop(pods);
}
