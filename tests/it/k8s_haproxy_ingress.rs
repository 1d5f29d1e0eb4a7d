//! HAProxy Technologies' Kubernetes Ingress v1.11 for real ([`HaproxyIngress`]): the
//! controller and the HAProxy 2.8 it runs, the studies' Ingress way: TLS at the
//! controller with the run's Secret named in the Ingress, routes through its
//! `haproxy.org` annotations.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_haproxy_ingress::{HaproxyIngress, HTTPS_ADDR};
use crate::common::k8s_pods::PodRunner;
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::time::{Duration, Instant};

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// S1's endpoint churn and S3's route changes under one TLS load terminated by the
/// controller, with the run's certificate rotated, the controller's pod replaced
/// and its Deployment rolled: each change reported, and what it cost.
#[test]
fn s1_churn_s3_routes_rotation_and_restarts_through_haproxy_ingress() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let hi = HaproxyIngress::start(&cluster);
    eprintln!("haproxy ingress up in {:.1?}", hi.took);
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s-haproxy\nplatform: kubernetes\nsystems: [haproxy-ingress]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{haproxy-ingress: \"https://{HTTPS_ADDR}/\"}}\n\
             \x20 workloads: {}\n  processes: {{haproxy-ingress: \"{}\"}}\n\
             tls:\n  key: ecdsa-p256\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             load:\n  rate: 100\n  connections: 10\n  new_connection: true\n  duration: 30s\n  warmup: 2s\n\
             changes:\n  - wait: 1s\n  - scale: 4\n  - wait: 2s\n  - scale: 2\n  - wait: 1s\n\
             \x20 - route: header\n  - wait: 2s\n  - route: cors\n  - wait: 2s\n  - route: rewrite\n  - wait: 2s\n  - route: base\n\
             \x20 - wait: 1s\n  - rotate: certificate\n  - wait: 2s\n  - restart: controller\n  - wait: 1s\n\
             \x20 - route: header\n  - wait: 2s\n  - restart: proxy\n  - wait: 2s\n",
            cluster.kubeconfig().display(),
            hi.workloads(),
            hi.processes(),
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut cmd, dir.path()).finish(Duration::from_secs(300));
    eprintln!("run took {:.1?}\n{}", t.elapsed(), done.stdout);
    assert!(
        done.success(),
        "{}\n{}\n{}\npods: {:#?}",
        done.stdout,
        done.stderr,
        hi.logs(),
        pods.log()
    );
    let r = read_json(&out.join("haproxy-ingress/result.json"));
    let q = &r["requests"];
    assert_eq!(
        n(&q["intended"]),
        n(&q["completed"]) + n(&q["failed"]) + n(&q["not_sent"]) + n(&q["unfinished"]),
        "{q}"
    );
    assert!(
        n(&q["completed"]) * 10 > n(&q["intended"]) * 8,
        "{q}: {}\n{}",
        r["errors"],
        hi.logs()
    );
    let events = r["lab"]["events"].as_array().unwrap();
    assert!(
        !events.iter().any(|e| e["kind"] == "change_failed"),
        "{events:?}"
    );
    for w in r["lab"]["windows"].as_array().unwrap() {
        eprintln!(
            "haproxy-ingress: {}: {} completed, errors {}",
            w["change"], w["completed"], w["errors"]
        );
    }

    // S1: the new pods reached through the runtime API (no reload), each served.
    let backends = r["backends"].as_object().unwrap();
    assert_eq!(backends.len(), 4, "{backends:?}");
    for a in r["lab"]["propagation"]["added"].as_array().unwrap() {
        let ms = a["propagation_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("a new pod never served: {a}"));
        eprintln!("haproxy-ingress: new pod first served {ms:.0} ms after it was ready");
    }

    // S3 through its annotations: the header and the rewrite show, after a reload.
    // Its CORS answers only a request that carries an Origin, which the load does
    // not send: that change never shows (docs/kubernetes.md).
    let changes = r["lab"]["route_propagation"]["changes"].as_array().unwrap();
    for c in changes {
        eprintln!(
            "haproxy-ingress: route {}: applied {} ms, seen {} ms, errors {}",
            c["route"], c["applied_ms"], c["seen_ms"], c["errors"]
        );
        let seen = c["seen_ms"].as_f64();
        if c["route"] == "cors" {
            assert!(seen.is_none(), "CORS headers without an Origin: {c}");
        } else {
            assert!(seen.is_some(), "{c}");
        }
    }

    // The run's Secret, named in the Ingress, rotated: the new serial served.
    let rot = &r["lab"]["rotations"][0];
    let certs = &r["tls"]["certificates"];
    let (old, new) = (
        rot["serial_old"].as_str().unwrap(),
        rot["serial_new"].as_str().unwrap(),
    );
    assert!(n(&certs[old]["handshakes"]) > 0, "{certs}");
    assert!(n(&certs[new]["handshakes"]) > 0, "{rot} {certs}");
    eprintln!(
        "haproxy-ingress: Secret rotated: new certificate first served {} ms after, {} errors",
        rot["new_seen_ms"], rot["errors"]
    );

    // Both restarts done, each new pod reported; HAProxy runs in the controller's
    // pod, so both restart the data plane.
    for what in ["controller", "proxy"] {
        let done = events
            .iter()
            .find(|e| {
                e["kind"] == "restart_done"
                    && e["detail"].as_str().is_some_and(|d| d.starts_with(what))
            })
            .unwrap_or_else(|| panic!("no restart_done {what}: {events:?}"));
        eprintln!(
            "haproxy-ingress: restart {what} took {} ms",
            done["took_ms"]
        );
    }
    let res = &r["lab"]["resources"];
    eprintln!("haproxy-ingress: controller and HAProxy: {res}");
    assert!(res["rss_max_mib"].as_f64().unwrap_or(0.0) > 10.0, "{res}");
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    drop(hi);
    drop(pods);
}

/// Study S5's own file on the cluster (TLS 1.3, 2 <-> 4 backends every few seconds,
/// `--quick`) through the real controller, then issue 28's route set of 200
/// Ingresses over 10 hosts with one added, removed and changed under load.
#[test]
fn s5_and_a_route_set_of_200_through_haproxy_ingress() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let hi = HaproxyIngress::start(&cluster);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/scale-tls13.yaml");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run")
        .arg(&scn)
        .arg("--quick")
        .args(["--platform", "kubernetes", "--kubeconfig"])
        .arg(cluster.kubeconfig())
        .arg("--system")
        .arg(format!("haproxy-ingress=https://{HTTPS_ADDR}/"))
        .arg("--out")
        .arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("s5", &mut cmd, dir.path()).finish(Duration::from_secs(180));
    eprintln!(
        "S5 on the cluster took {:.1?}\n{}",
        t.elapsed(),
        done.stdout
    );
    assert!(
        done.success(),
        "{}\n{}\n{}",
        done.stdout,
        done.stderr,
        hi.logs()
    );
    let r = read_json(&out.join("haproxy-ingress/result.json"));
    assert_eq!(r["tls"]["version"], "TLSv1.3", "{}", r["tls"]);
    let q = &r["requests"];
    assert!(
        n(&q["completed"]) * 10 > n(&q["intended"]) * 9,
        "{q}: {}",
        r["errors"]
    );
    // Every pod served, the scaled-up ones too, each within a second of being ready.
    let prop = &r["lab"]["propagation"];
    let added = prop["added"].as_array().unwrap();
    assert!(!added.is_empty(), "{prop}");
    for a in added {
        let ms = a["propagation_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("never served: {a}"));
        assert!(ms < 1000.0, "{a}");
    }
    eprintln!(
        "haproxy-ingress S5: {} of {} completed, errors {}, added {}, removed {}",
        q["completed"], q["intended"], r["errors"], prop["added_ms"], prop["removed_ms"]
    );
    crate::common::k8s::run_route_set(
        &cluster,
        &["haproxy-ingress"],
        "{haproxy-ingress: \"http://198.18.0.1:8080/\"}",
        "unused/unused",
        &format!("{{haproxy-ingress: \"{}\"}}", hi.processes()),
        crate::common::k8s::ROUTES,
    );
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    drop(hi);
    drop(pods);
}
