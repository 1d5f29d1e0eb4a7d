//! Lifecycle steps on a cluster: Traefik v3.6 installed as a Deployment in namespace
//! `traefik` (its pods run by the harness as Traefik processes), and a run that
//! deletes its controller pod (`restart: controller`), changes a route while the new
//! one starts, and rolls its Deployment (`restart: proxy`), under load through it.
//! Traefik is its own data plane: its controller restart is a data plane restart
//! too, and the run says what each cost.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_pods::PodRunner;
use crate::common::k8s_traefik::{Providers, Traefik, ENTRY_POINT};
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::time::{Duration, Instant};

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

#[test]
fn traefiks_controller_pod_and_deployment_restart_under_load_and_a_route_change_made_meanwhile_shows(
) {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let (traefik, _dir) = Traefik::as_pods(
        &cluster,
        Providers {
            ingress: true,
            gateway: false,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s-lifecycle\nplatform: kubernetes\nsystems: [traefik]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{traefik: \"http://{ENTRY_POINT}/\"}}\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             tls:\n  enabled: false\n\
             load:\n  rate: 200\n  connections: 10\n  duration: 14s\n  warmup: 2s\n\
             changes:\n  - wait: 2s\n  - restart: controller\n  - route: header\n  - wait: 3s\n\
             \x20 - restart: proxy\n  - wait: 2s\n  - route: base\n",
            cluster.kubeconfig().display()
        ),
    )
    .unwrap();
    let mut run = cluster.ingressbench();
    run.arg("run").arg(&scn).arg("--out").arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut run, dir.path()).finish(Duration::from_secs(240));
    eprintln!(
        "k8s lifecycle run took {:.1?}\n{}",
        t.elapsed(),
        done.stdout
    );
    assert!(
        done.success(),
        "{}\n{}\nTraefik pods: {:?}",
        done.stdout,
        done.stderr,
        traefik.log()
    );
    let r = read_json(&out.join("traefik/result.json"));
    let q = &r["requests"];
    assert_eq!(
        n(&q["intended"]),
        n(&q["completed"]) + n(&q["failed"]) + n(&q["not_sent"]) + n(&q["unfinished"])
    );
    assert!(pods.problems().is_empty(), "{:?}", pods.problems());
    let events = r["lab"]["events"].as_array().unwrap();
    let ev = |kind: &str, detail: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["kind"] == kind && e["detail"].as_str().unwrap().starts_with(detail))
            .collect()
    };
    assert!(
        ev("change_failed", "").is_empty(),
        "{events:?}\n{:?}",
        traefik.log()
    );
    // Each restart replaced Traefik's pod, logged on the load's clock between its
    // request and its end.
    for (what, detail) in [
        ("controller", "controller"),
        ("proxy", "proxy (rolling restart of its Deployment)"),
    ] {
        let asked = ev("restart_requested", detail);
        let done = ev("restart_done", detail);
        assert_eq!((asked.len(), done.len()), (1, 1), "{what}: {events:?}");
        let (t0, t1) = (
            asked[0]["t_ms"].as_f64().unwrap(),
            done[0]["t_ms"].as_f64().unwrap(),
        );
        let replaced: Vec<&Value> = ev("pod_replaced", "traefik-")
            .into_iter()
            .filter(|e| (t0..=t1).contains(&e["t_ms"].as_f64().unwrap()))
            .collect();
        assert_eq!(replaced.len(), 1, "{what}: {events:?}");
        let w = r["lab"]["windows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| {
                w["change"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("restart {detail}"))
            })
            .unwrap();
        eprintln!(
            "k8s lifecycle: restart {what}: {:.0} ms, {} ready; its window: {} completed, errors {}, p99 {} ms, max {} ms",
            t1 - t0,
            replaced[0]["detail"],
            w["completed"],
            w["errors"],
            w["p99_ms"],
            w["max_ms"]
        );
    }
    // The route change asked for as the new controller started reached traffic.
    let change = &r["lab"]["route_propagation"]["changes"][0];
    assert_eq!(change["route"], "header", "{change}");
    let seen = change["seen_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("the change made during the restart never showed: {change}"));
    eprintln!(
        "k8s lifecycle: the route change after the controller restart showed in {seen:.0} ms"
    );
    // The rest of the run got through.
    assert!(n(&q["completed"]) * 2 > n(&q["intended"]), "{q}");

    // TLS at the controller, as S1 and S5 had it: the run makes the certificate's
    // Secret and an Ingress that terminates TLS with it (and a TLSStore that makes
    // it Traefik's certificate for clients that send no server name), then rotates
    // the Secret under load; new connections see the new serial.
    let out = dir.path().join("out-tls");
    let scn = dir.path().join("tls.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s-tls\nplatform: kubernetes\nsystems: [traefik]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{traefik: \"https://{ENTRY_POINT}/\"}}\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             tls:\n  version: \"1.3\"\n  key: ecdsa-p256\n\
             load:\n  rate: 100\n  connections: 10\n  new_connection: true\n  duration: 6s\n  warmup: 1s\n\
             changes:\n  - wait: 1500ms\n  - rotate: certificate\n",
            cluster.kubeconfig().display()
        ),
    )
    .unwrap();
    let mut run = cluster.ingressbench();
    run.arg("run").arg(&scn).arg("--out").arg(&out);
    let done = Proc::spawn_group("run-tls", &mut run, dir.path()).finish(Duration::from_secs(120));
    assert!(done.success(), "{}\n{}", done.stdout, done.stderr);
    let r = read_json(&out.join("traefik/result.json"));
    let events = r["lab"]["events"].as_array().unwrap();
    assert!(
        !events.iter().any(|e| e["kind"] == "change_failed"),
        "{events:?}"
    );
    let q = &r["requests"];
    assert!(n(&q["completed"]) > 400, "{q}: {}", r["errors"]);
    assert_eq!(r["tls"]["version"], "TLSv1.3");
    let rot = &r["lab"]["rotations"][0];
    let certs = &r["tls"]["certificates"];
    let new = rot["serial_new"].as_str().unwrap();
    assert!(
        n(&certs[rot["serial_old"].as_str().unwrap()]["handshakes"]) > 0,
        "{certs}"
    );
    assert!(
        n(&certs[new]["handshakes"]) > 0,
        "the new certificate was never served: {rot} {certs}"
    );
    eprintln!(
        "k8s lifecycle: Secret rotated: applied {} ms, new certificate first served {} ms after, the old one last {} ms after; {} errors ({} tls)",
        rot["applied_ms"], rot["new_seen_ms"], rot["last_old_ms"], rot["errors"], rot["tls_errors"]
    );
    drop(traefik);
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
}
