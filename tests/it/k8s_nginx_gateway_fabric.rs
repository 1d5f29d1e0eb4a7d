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
    let samples = crate::common::k8s::sample_through_load(
        &proc,
        t,
        watch,
        || ngf.logs(),
        || ngf.nginx_workers(),
    );
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

/// A route set of 200 HTTPRoutes at the run's own Gateway, one route added, removed
/// and changed under load, with what that cost the untouched routes and what the
/// control plane and nginx spent; then a GRPCRoute, which NGF refuses on this nginx.
#[test]
fn a_route_set_of_200_and_a_grpc_route_through_nginx_gateway_fabric() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let ngf = NginxGatewayFabric::start(&cluster);
    // The pod's processes, control plane and nginx together, as the run reads them.
    let processes = format!(
        "{{nginx-gateway-fabric: \"{}\"}}",
        crate::common::k8s_nginx_gateway_fabric::ngf_dir()
            .join("bin/gateway")
            .display()
    );
    // Beside the run's own reading of both together: each one's memory, apart.
    let (results, (controller_mib, nginx_mib)) = crate::common::k8s::peak_while(
        || ngf.memory_mib(),
        || {
            crate::common::k8s::run_route_set(
                &cluster,
                &["nginx-gateway-fabric"],
                "{}",
                &format!("class:{CLASS}"),
                &processes,
                crate::common::k8s::ROUTES,
            )
        },
    );
    eprintln!(
        "nginx-gateway-fabric: at 200 routes, RSS max: control plane {controller_mib:.0} MiB, nginx {nginx_mib:.0} MiB"
    );
    assert!(
        controller_mib > 10.0 && nginx_mib > 1.0,
        "{controller_mib} {nginx_mib}"
    );
    let r = &results[0];
    eprintln!("nginx-gateway-fabric: route set: {}", r["lab"]["route_set"]);
    for w in r["lab"]["windows"].as_array().into_iter().flatten() {
        eprintln!(
            "nginx-gateway-fabric: window {}: {}",
            w["change"], w["errors"]
        );
    }

    // gRPC: NGF serves a GRPCRoute only over HTTP/2, which it turns on with `http2
    // on`, unknown to Debian's nginx 1.22; with the NginxProxy's `disableHTTP2` it
    // refuses every GRPCRoute, and the run says so in one line naming it.
    let dir = tempfile::tempdir().unwrap();
    let (done, _) = crate::common::k8s::grpc_run(
        &cluster,
        dir.path(),
        "nginx-gateway-fabric",
        "",
        &format!("class:{CLASS}"),
    );
    assert!(!done.success(), "{}", done.stdout);
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("GRPCRoute"))
        .unwrap_or_else(|| panic!("{}\n{}", done.stderr, ngf.logs()));
    eprintln!("nginx-gateway-fabric: gRPC: {line}");
    assert!(line.contains("HTTP2 is disabled"), "{line}");
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (_, left) = cluster.kubectl(&["get", "gateways,httproutes,grpcroutes", "-A", "-o", "name"]);
    assert!(left.trim().is_empty(), "{left}");
    drop(ngf);
    drop(pods);
}

/// What goes wrong, said in one line naming the object and its condition: a
/// GatewayClass that does not exist, a team's Gateway whose listener NGF refused
/// for its certificate, a control plane killed mid-run. Each run's result is
/// written where it ran, and nothing of it stays in the cluster.
#[test]
fn a_missing_class_a_refused_certificate_and_a_killed_control_plane_are_said_in_one_line() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let ngf = NginxGatewayFabric::start(&cluster);
    let dir = tempfile::tempdir().unwrap();
    let short = "load:\n  rate: 50\n  connections: 2\n  duration: 2s\n  warmup: 0s\n";
    let file = |name: &str, text: &str| {
        let f = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&f, text).unwrap();
        f
    };
    let kubeconfig = cluster.kubeconfig().display().to_string();

    // No such GatewayClass.
    let scn = file(
        "noclass",
        &format!(
            "name: k8s-ngf-noclass\nplatform: kubernetes\nsystems: [nginx-gateway-fabric]\n\
             kubernetes:\n  kubeconfig: {kubeconfig}\n  gateway_class: nope\n{short}"
        ),
    );
    let mut cmd = cluster.ingressbench();
    cmd.arg("run")
        .arg(&scn)
        .arg("--out")
        .arg(dir.path().join("a"));
    let done = Proc::spawn_group("run", &mut cmd, dir.path()).finish(Duration::from_secs(120));
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

    // A team's Gateway, installed beforehand, whose HTTPS listener names a Secret
    // that holds no certificate: NGF refuses that listener, and the run says so
    // before it loads it, naming the Gateway, the listener and the condition.
    let team = file(
        "team",
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-gw\n---\n{}---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: shop\n  namespace: team-gw\n\
             spec:\n  gatewayClassName: {CLASS}\n  listeners:\n\
             \x20 - {{name: web, protocol: HTTP, port: 8093, allowedRoutes: {{namespaces: {{from: All}}}}}}\n\
             \x20 - name: https\n    protocol: HTTPS\n    port: 8456\n    allowedRoutes: {{namespaces: {{from: All}}}}\n\
             \x20   tls: {{certificateRefs: [{{name: broken}}]}}\n",
            crate::common::k8s::broken_tls_manifest(CLASS, HOST)
                .split("---")
                .next()
                .unwrap()
                .replace("metadata: {name: broken}", "metadata: {name: broken, namespace: team-gw}"),
        ),
    );
    crate::common::k8s::kubectl_ok(&cluster, &["apply", "-f", team.to_str().unwrap()]);
    let refused = cluster.wait_for(
        &[
            "get",
            "gateway",
            "-n",
            "team-gw",
            "shop",
            "-o",
            "jsonpath={.status.listeners[?(@.name==\"https\")].conditions[?(@.type==\"ResolvedRefs\")].status}",
        ],
        "False",
        Duration::from_secs(30),
    );
    assert!(refused, "{}", ngf.logs());
    let scn = file(
        "badtls",
        &format!(
            "name: k8s-ngf-badtls\nplatform: kubernetes\nsystems: [nginx-gateway-fabric]\n\
             kubernetes:\n  kubeconfig: {kubeconfig}\n  gateway: team-gw/shop\n\
             \x20 urls: {{nginx-gateway-fabric: \"https://198.18.0.1:8456/\"}}\n  host: {HOST}\n\
             requests:\n  - {{host: {HOST}, path: /}}\n{short}"
        ),
    );
    let mut cmd = cluster.ingressbench();
    cmd.arg("run")
        .arg(&scn)
        .arg("--out")
        .arg(dir.path().join("b"));
    let done = Proc::spawn_group("run", &mut cmd, dir.path()).finish(Duration::from_secs(120));
    assert!(!done.success(), "{}", done.stdout);
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("Gateway team-gw/shop listener https (port 8456)"))
        .unwrap_or_else(|| panic!("{}", done.stderr));
    eprintln!("nginx-gateway-fabric: a refused certificate: {line}");
    assert!(line.contains("InvalidCertificateRef"), "{line}");
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (_, routes) = cluster.kubectl(&["get", "httproutes", "-A", "-o", "name"]);
    assert!(routes.trim().is_empty(), "{routes}");
    // Gone before the next run's Gateway: NGF 1.x serves one Gateway of its class
    // (the oldest), and refuses the others.
    crate::common::k8s::kubectl_ok(
        &cluster,
        &["delete", "namespace", "team-gw", "--timeout=60s"],
    );

    // The control plane killed a second into the load: nginx serves on with what
    // it was given, the route change asked meanwhile is reported not accepted
    // (naming the HTTPRoute), and the result is written.
    let scn = file(
        "crash",
        &format!(
            "name: k8s-ngf-crash\nplatform: kubernetes\nsystems: [nginx-gateway-fabric]\n\
             kubernetes:\n  kubeconfig: {kubeconfig}\n  gateway_class: {CLASS}\n  gateway_ports: {{http: 8080, https: 8443}}\n\
             \x20 host: {HOST}\nrequests:\n  - {{host: {HOST}, path: /}}\ntls:\n  enabled: false\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             load:\n  rate: 50\n  connections: 2\n  duration: 14s\n  warmup: 1s\n\
             changes:\n  - wait: 2s\n  - route: header\n"
        ),
    );
    let out = dir.path().join("c");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let proc = Proc::spawn_group("run", &mut cmd, dir.path());
    crate::common::k8s::wait_load_running(&proc, Instant::now(), || ngf.logs());
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(ngf.kill_control_plane(), 1, "{}", ngf.logs());
    let done = proc.finish(Duration::from_secs(120));
    eprintln!("{}\n{}", done.stdout, done.stderr);
    let r = read_json(&out.join("nginx-gateway-fabric/result.json"));
    let events = r["lab"]["events"].as_array().unwrap();
    let failed = events
        .iter()
        .find(|e| e["kind"] == "change_failed")
        .unwrap_or_else(|| panic!("{events:?}"));
    let detail = failed["detail"].as_str().unwrap();
    eprintln!("nginx-gateway-fabric: with its control plane killed: {detail}");
    assert!(
        detail.starts_with("header: ") && detail.contains("HTTPRoute"),
        "{detail}"
    );
    assert!(!detail.contains('\n'), "{detail}");
    let q = &r["requests"];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    assert!(
        n(&q["completed"]) * 10 >= n(&q["intended"]) * 9,
        "nginx kept serving: {q}"
    );
    // Nothing of the run stays in the cluster, the control plane down or not.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (_, left) = cluster.kubectl(&["get", "gateways,httproutes", "-A", "-o", "name"]);
    assert!(left.lines().all(|l| !l.contains("ib-")), "{left}");
    drop(ngf);
    drop(pods);
}
