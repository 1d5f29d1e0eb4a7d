//! A scenario run on `platform: kubernetes` end to end: a real API server, pods made
//! real by the test harness (each a built-in backend in its own network namespace,
//! Ready only once it answers), and Traefik v3.6 routing an Ingress the run creates,
//! as a user's installed controller would: installed as a Deployment in namespace
//! `traefik` whose pods the harness runs as Traefik processes. `ingressbench run`
//! itself runs inside the cluster's network namespace, which has no default route.
//!
//! Issue 30's lifecycle steps on it: a second kwok node joins and a `drain: node`
//! empties the first of the run's pods; Traefik's controller pod is deleted
//! (`restart: controller`), a route changed while the new one starts, and its
//! Deployment rolled (`restart: proxy`); Traefik is its own data plane, so the run
//! says what each cost. Then TLS at the controller: the run's Secret, rotated.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_pods::PodRunner;
use crate::common::k8s_traefik::{Providers, Traefik, ENTRY_POINT};
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::time::{Duration, Instant};

#[test]
fn a_scale_scenario_runs_through_traefik_on_a_real_api_server_and_real_pods() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let dir = tempfile::tempdir().unwrap();
    let state = cluster.state_dir().to_path_buf();

    // Traefik's Ingress provider, installed as a Deployment.
    let (traefik, _traefik_dir) = Traefik::as_pods(
        &cluster,
        Providers {
            ingress: true,
            gateway: false,
            ingress_nginx: false,
        },
    );
    let url = format!("http://{ENTRY_POINT}/");
    // A second node for the drained pods to go to (kwok plays both).
    let node = dir.path().join("node.yaml");
    std::fs::write(
        &node,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: kwok-node-1\n  annotations:\n    \
         kwok.x-k8s.io/node: fake\n    node.alpha.kubernetes.io/ttl: \"0\"\n  labels:\n    \
         kubernetes.io/hostname: kwok-node-1\n    kubernetes.io/os: linux\n    type: kwok\n\
         spec:\n  podCIDR: 198.18.64.0/18\n  podCIDRs: [198.18.64.0/18]\n",
    )
    .unwrap();
    let (ok, text) = cluster.kubectl(&["create", "-f", node.to_str().unwrap()]);
    assert!(ok, "{text}");
    let t = Instant::now();
    while !cluster
        .kubectl(&[
            "get",
            "node",
            "kwok-node-1",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ])
        .1
        .contains("True")
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "kwok-node-1 never Ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let out = dir.path().join("out");
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s\nplatform: kubernetes\nsystems: [traefik]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{traefik: \"{url}\"}}\n  image: \"ingressbench:test\"\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             tls:\n  enabled: false\n\
             load:\n  rate: 100\n  connections: 10\n  duration: 16s\n  warmup: 2s\n\
             sessions: {{websocket: 20, rate: 50}}\n\
             changes:\n  - wait: 2s\n  - scale: 3\n  - wait: 2s\n  - drain: node\n  - wait: 2s\n\
             \x20 - restart: controller\n  - route: header\n  - wait: 2s\n  - restart: proxy\n\
             \x20 - wait: 2s\n  - route: base\n  - scale: 2\n",
            state.join("kubeconfig").display()
        ),
    )
    .unwrap();
    let mut run = cluster.ingressbench();
    run.arg("run").arg(&scn).arg("--out").arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut run, dir.path()).finish(Duration::from_secs(180));
    eprintln!("k8s run took {:.1?}\n{}", t.elapsed(), done.stdout);
    assert!(done.success(), "{}\n{}", done.stdout, done.stderr);
    let traefik_log = traefik.log().join("\n");

    let r = read_json(&out.join("traefik/result.json"));
    let q = &r["requests"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    assert_eq!(
        n(&q["intended"]),
        n(&q["completed"]) + n(&q["failed"]) + n(&q["not_sent"]) + n(&q["unfinished"])
    );
    assert!(n(&q["completed"]) > 1000, "{q}");
    // Every response came from a pod, by its name; the scaled-up pod among them.
    let backends = r["backends"].as_object().unwrap();
    assert_eq!(
        pods.problems(),
        Vec::<String>::new(),
        "{}",
        pods.log().join("\n")
    );
    assert!(
        backends.len() >= 3,
        "{backends:?}\npod runner log:\n{}\nproblems: {:?}\nTraefik's log:\n{}",
        pods.log().join("\n"),
        pods.problems(),
        traefik_log
    );
    assert!(
        backends.keys().all(|k| k.starts_with("ib-backend-")),
        "{backends:?}"
    );
    // The cluster's record: the new pod ready in the EndpointSlice, then its first
    // response through Traefik; the removed one stopping.
    let kinds: Vec<&str> = r["lab"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for k in [
        "scale_requested",
        "backend_ready",
        "backend_stopping",
        "drain_requested",
        "pod_evicted",
        "drain_done",
    ] {
        assert!(kinds.contains(&k), "{k} missing: {kinds:?}");
    }
    assert!(!kinds.contains(&"change_failed"), "{}", r["lab"]["events"]);
    // The drain: the oldest pod's node emptied of the run's pods, each evicted pod
    // replaced by one on the other node, which served.
    let events = r["lab"]["events"].as_array().unwrap();
    let drained = events
        .iter()
        .find(|e| e["kind"] == "drain_done")
        .and_then(|e| e["detail"].as_str())
        .unwrap();
    let drained_node = drained.split(' ').next().unwrap();
    let evicted: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "pod_evicted")
        .map(|e| e["detail"].as_str().unwrap().split(' ').next().unwrap())
        .collect();
    let pods_of = |node: &str| -> Vec<String> {
        r["lab"]["cluster"]["pods"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["node"] == node)
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let other = if drained_node == "kwok-node-0" {
        "kwok-node-1"
    } else {
        "kwok-node-0"
    };
    let drain_at = events
        .iter()
        .find(|e| e["kind"] == "drain_requested")
        .unwrap()["t_ms"]
        .as_f64()
        .unwrap();
    let replacements: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "backend_ready" && e["t_ms"].as_f64().unwrap() > drain_at)
        .map(|e| e["detail"].as_str().unwrap().to_string())
        .collect();
    eprintln!("k8s: drained {drained}: evicted {evicted:?}, replaced by {replacements:?}");
    assert!(
        !evicted.is_empty() && evicted.len() == replacements.len(),
        "{drained}: {evicted:?} {replacements:?}"
    );
    for p in &replacements {
        assert!(
            pods_of(other).contains(p),
            "{p} not on {other}: {}",
            r["lab"]["cluster"]
        );
        assert!(
            n(&r["backends"][p.as_str()]) > 0,
            "{p} got no traffic: {backends:?}"
        );
    }
    // The evicted pods served no more once the drain was done and their grace
    // period (2 s) over.
    let drain_done = events.iter().find(|e| e["kind"] == "drain_done").unwrap()["t_ms"]
        .as_f64()
        .unwrap();
    for p in &evicted {
        if let Some(last) = r["backends_seen"][*p][1].as_f64() {
            assert!(
                last < drain_done + 3000.0,
                "{p} served at {last} ms, drain done at {drain_done}"
            );
        }
    }
    // The node is schedulable again once the run has ended.
    let node_field = |path: &str| {
        let jsonpath = format!("jsonpath={{{path}}}");
        cluster
            .kubectl(&["get", "node", drained_node, "-o", &jsonpath])
            .1
    };
    let cordoned = node_field(".spec.unschedulable");
    assert_eq!(cordoned.trim(), "", "{drained_node} left cordoned");
    let label = node_field(".metadata.labels");
    assert!(!label.contains("cordoned-by"), "{drained_node}: {label}");
    // What a drain killed with SIGKILL would leave: the node cordoned and labelled
    // with the run. `ingressbench cleanup` makes it schedulable again.
    for args in [
        &["cordon", drained_node][..],
        &[
            "label",
            "node",
            drained_node,
            "ingressbench.io/cordoned-by=killed-run",
        ][..],
    ] {
        let (ok, text) = cluster.kubectl(args);
        assert!(ok, "{text}");
    }
    let mut cmd = cluster.ingressbench();
    cmd.args(["cleanup", "--platform", "kubernetes", "--kubeconfig"])
        .arg(cluster.kubeconfig());
    let clean = Proc::spawn_group("cleanup", &mut cmd, dir.path()).finish(Duration::from_secs(60));
    assert!(clean.success(), "{}\n{}", clean.stdout, clean.stderr);
    assert!(
        clean
            .stdout
            .contains(&format!("uncordoned node {drained_node}")),
        "{}",
        clean.stdout
    );
    let cordoned = node_field(".spec.unschedulable");
    assert_eq!(cordoned.trim(), "", "cleanup left {drained_node} cordoned");
    let added = &r["lab"]["propagation"]["added"][0];
    let prop = added["propagation_ms"]
        .as_f64()
        .expect("the new pod got traffic");
    eprintln!("k8s: new pod first response {prop:.0} ms after ready in the EndpointSlice");
    assert!(prop < 10_000.0, "{added}");
    // Traefik fails requests while removed pods terminate (S1's finding of it under
    // churn): here after the drain and the scale-down, each window's count printed,
    // not judged beyond most of the load getting through.
    let windows = r["lab"]["windows"].as_array().unwrap();
    for w in windows {
        eprintln!(
            "k8s: window {}: {} completed, errors {}",
            w["change"], w["completed"], w["errors"]
        );
    }
    // The sessions beside the load (issue 45), through Traefik to the pods' own
    // backend: what each change did to them, by window.
    let s: results::sessions::Sessions =
        serde_json::from_value(r["sessions"].clone()).expect("the sessions part");
    eprintln!("k8s: {}", report::text::sessions_summary(&s));
    for w in windows {
        eprintln!("k8s: window {}: sessions {}", w["change"], w["sessions"]);
    }
    for t in s.timeline.iter().filter(|t| t.ended > 0) {
        eprintln!("k8s: sessions second {}: {} ended", t.second, t.ended);
    }
    for e in r["lab"]["events"].as_array().unwrap() {
        if e["kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("restart") || k == "pod_replaced")
        {
            eprintln!(
                "k8s: event at {} ms: {} {}",
                e["t_ms"], e["kind"], e["detail"]
            );
        }
    }
    let m = &s.messages;
    assert!(m.balanced(), "{m:?}");
    assert_eq!(s.held, 20, "every session open again at the end: {s:?}");
    assert!(
        s.backends.keys().all(|k| k.starts_with("ib-backend-")),
        "each 101 came from a pod: {:?}",
        s.backends
    );
    // The drain's evicted pods said goodbye to their sessions (the backend's
    // drain: 1001 with its reason, passed on by Traefik), and they reopened.
    let drain = windows
        .iter()
        .find(|w| w["change"] == "drain node")
        .unwrap();
    let ends = drain["sessions"]["ends"].as_object().unwrap();
    assert!(
        ends.keys().all(|k| k == "close 1001") && n(&ends["close 1001"]) > 0,
        "{drain}"
    );
    assert_eq!(
        s.close_reasons["close 1001"], "ingressbench backend draining",
        "{s:?}"
    );
    // Before any pod is removed, nothing fails.
    let scale_up = windows
        .iter()
        .find(|w| w["change"] == "scale 2 -> 3")
        .unwrap();
    assert_eq!(scale_up["errors"], serde_json::json!({}), "{scale_up}");
    assert_eq!(
        r["lab"]["before_changes"]["errors"],
        serde_json::json!({}),
        "{}",
        r["lab"]["before_changes"]
    );
    let errors = n(&q["failed"]);
    assert!(
        errors * 4 < n(&q["intended"]),
        "{errors} failed: {}",
        r["errors"]
    );
    assert_eq!(
        r["lab"]["versions"]["kubernetes"].as_str(),
        Some("v1.33.13"),
        "{}",
        r["lab"]["versions"]
    );
    let ev = |kind: &str, detail: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["kind"] == kind && e["detail"].as_str().unwrap().starts_with(detail))
            .collect()
    };
    assert!(
        ev("change_failed", "").is_empty(),
        "{events:?}\n{:?}",
        traefik_log
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
    // The run's namespace goes when it ends.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
}
