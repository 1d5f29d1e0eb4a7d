//! NGINX Gateway Fabric v1.6.2 for real ([`NginxGatewayFabric`]): its control plane
//! and the nginx it configures, in one pod the harness runs, each run with a Gateway
//! of its own (`kubernetes.gateway_class`).

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_nginx_gateway_fabric::{NginxGatewayFabric, CLASS};
use crate::common::k8s_pods::PodRunner;
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The run's route's host, sent as the TLS server name: NGF's default server
/// refuses a handshake without one (`ssl_reject_handshake on`), and answers 421 to
/// a request whose Host is not its server name.
const HOST: &str = "ngf.test";

/// Runs `extra` (tls, backends, load, changes, probes) at a Gateway of the run's
/// own; returns the result, and nginx's worker processes as sampled every 100 ms
/// from the load's start for `watch`.
fn run(
    cluster: &TestCluster,
    ngf: &NginxGatewayFabric,
    name: &str,
    extra: &str,
    watch: Duration,
) -> (Value, Vec<Vec<u32>>) {
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: {name}\nplatform: kubernetes\nsystems: [nginx-gateway-fabric]\n\
             kubernetes:\n  kubeconfig: {}\n  gateway_class: {CLASS}\n  gateway_ports: {{http: 8080, https: 8443}}\n\
             \x20 workloads: {}\n  host: {HOST}\nrequests:\n  - {{host: {HOST}, path: /}}\n{extra}",
            cluster.kubeconfig().display(),
            ngf.workloads(),
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let t = Instant::now();
    let proc = Proc::spawn_group("run", &mut cmd, dir.path());
    let mut samples = Vec::new();
    if !watch.is_zero() {
        while !proc.stderr_so_far().contains("load running") {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "{}\n{}",
                proc.stderr_so_far(),
                ngf.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let w = Instant::now();
        while w.elapsed() < watch {
            samples.push(ngf.nginx_workers());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let done = proc.finish(Duration::from_secs(300));
    eprintln!("{name} took {:.1?}\n{}", t.elapsed(), done.stdout);
    assert!(
        done.success(),
        "{}\n{}\n{}",
        done.stdout,
        done.stderr,
        ngf.logs()
    );
    (
        read_json(&out.join("nginx-gateway-fabric/result.json")),
        samples,
    )
}

/// S1's endpoint churn and S3's route changes under one TLS load at the run's own
/// Gateway, with the certificate rotated and the pod restarted: each change
/// reported and seen in traffic, and whether nginx reloaded for the endpoints.
#[test]
fn s1_churn_s3_routes_rotation_and_restarts_through_nginx_gateway_fabric() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let ngf = NginxGatewayFabric::start(&cluster);
    eprintln!("nginx gateway fabric up in {:.1?}", ngf.took);
    let (r, samples) = run(
        &cluster,
        &ngf,
        "k8s-ngf",
        &format!(
            "tls:\n  enabled: true\n  key: ecdsa-p256\n{}\
             probes:\n  only: [plain, underscore-header, body-1mib-plus-1, upstream-reset-once, unknown-path, no-ready-endpoint]\n  during: false\n",
            crate::common::k8s::LIFECYCLE_RUN
        ),
        Duration::from_secs(6),
    );
    eprintln!("ngf: errors: {}", r["errors"]);
    for w in r["lab"]["windows"].as_array().unwrap() {
        eprintln!("ngf: {}: {}", w["change"], w["errors"]);
    }
    // The behaviour probes through NGF's nginx before the load: nginx's defaults.
    let observed = &r["lab"]["probes"]["observed"];
    let probe = |id: &str| crate::common::k8s::probe_answer(observed, id);
    assert_eq!(probe("plain")["status"], 200, "{observed}");
    // nginx drops a header with an underscore (underscores_in_headers off).
    let under = probe("underscore-header");
    assert_eq!(under["status"], 200, "{under}");
    assert!(
        under["received"]["headers"]["x_ib_underscore"].is_null(),
        "{under}"
    );
    // client_max_body_size's 1m default, which NGF leaves: a byte over it is 413.
    let big = probe("body-1mib-plus-1");
    assert_eq!(big["status"], 413, "{big}");
    assert!(big["received"].is_null(), "{big}");
    // No retry of a reset: nginx's 502 (proxy_next_upstream left as NGF writes it).
    assert_eq!(probe("upstream-reset-once")["status"], 502, "{observed}");
    // The fixture host asked over a connection whose TLS name is the run's host:
    // NGF answers 421 (its `$ssl_server_name != $host` check) before any route.
    assert_eq!(
        crate::common::k8s::fixture_answers(observed, "nginx-gateway-fabric"),
        [(421, false), (421, false)]
    );
    let events = crate::common::k8s::check_lifecycle_run(&r, "nginx-gateway-fabric", 8);
    // S1: NGF writes the endpoints into nginx's configuration and reloads it: the
    // worker processes of the load's start were replaced during the churn.
    let first = samples.first().cloned().unwrap_or_default();
    assert!(!first.is_empty(), "no nginx worker seen: {}", ngf.logs());
    let sets: std::collections::BTreeSet<&Vec<u32>> = samples.iter().collect();
    eprintln!(
        "nginx-gateway-fabric: {} worker sets in {} samples through the churn",
        sets.len(),
        samples.len()
    );
    assert!(
        samples.last() != Some(&first) && sets.len() >= 2,
        "nginx kept its workers through the endpoint churn: {samples:?}"
    );
    // S3: each filter applied and seen by the load.
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
        eprintln!(
            "nginx-gateway-fabric: route {route}: applied {} ms, seen {seen:.0} ms",
            c["applied_ms"]
        );
    }
    // Both restarts replace the one pod of control plane and nginx.
    let replaced = events
        .iter()
        .filter(|e| e["kind"] == "pod_replaced")
        .filter_map(|e| e["detail"].as_str())
        .filter(|p| p.starts_with("nginx-gateway-fabric-"))
        .count();
    assert!(replaced >= 2, "{events:?}");
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (_, left) = cluster.kubectl(&["get", "gateways", "-A", "-o", "name"]);
    assert!(left.trim().is_empty(), "{left}");
    drop(ngf);
    drop(pods);
}
