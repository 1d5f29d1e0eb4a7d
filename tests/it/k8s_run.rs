//! A scenario run on `platform: kubernetes` end to end: a real API server, pods made
//! real by the test harness (each a built-in backend in its own network namespace,
//! Ready only once it answers), and Traefik v3.6 routing an Ingress the run creates,
//! as a user's installed controller would. `ingressbench run` itself runs inside the
//! cluster's network namespace, which has no default route. A second kwok node
//! joins, and a `drain: node` step empties the first of the run's pods.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_pods::PodRunner;
use crate::common::k8s_traefik::{Providers, Traefik};
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use std::time::{Duration, Instant};

#[test]
fn a_scale_scenario_runs_through_traefik_on_a_real_api_server_and_real_pods() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let dir = tempfile::tempdir().unwrap();
    let state = cluster.state_dir().to_path_buf();

    // Traefik's Ingress provider, as installed.
    let traefik = Traefik::start(
        &cluster,
        Providers {
            ingress: true,
            gateway: false,
        },
    );
    let url = traefik.url();
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
             kubernetes:\n  kubeconfig: {}\n  urls: {{traefik: \"{url}\"}}\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             tls:\n  enabled: false\n\
             load:\n  rate: 100\n  connections: 10\n  duration: 12s\n  warmup: 3s\n\
             changes:\n  - wait: 2s\n  - scale: 3\n  - wait: 2s\n  - drain: node\n  - wait: 2s\n  - scale: 2\n",
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
    let traefik_log = traefik.log();
    drop(traefik);

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
    for p in &evicted {
        assert!(
            pods_of(drained_node).contains(&p.to_string()),
            "{p}: {}",
            r["lab"]["cluster"]
        );
    }
    // The node is schedulable again once the run has ended.
    let (_, cordoned) = cluster.kubectl(&[
        "get",
        "node",
        drained_node,
        "-o",
        "jsonpath={.spec.unschedulable}",
    ]);
    assert_eq!(cordoned.trim(), "", "{drained_node} left cordoned");
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
    // The run's namespace goes when it ends.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
}
