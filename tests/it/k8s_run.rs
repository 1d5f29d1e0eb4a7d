//! A scenario run on `platform: kubernetes` end to end: a real API server, pods made
//! real by the test harness (each a built-in backend in its own network namespace,
//! Ready only once it answers), and Traefik v3.6 routing an Ingress the run creates,
//! as a user's installed controller would. `ingressbench run` itself runs inside the
//! cluster's network namespace, which has no default route.

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
             changes:\n  - wait: 2s\n  - scale: 3\n  - wait: 4s\n  - scale: 2\n",
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
    assert_eq!(
        backends.len(),
        3,
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
    for k in ["scale_requested", "backend_ready", "backend_stopping"] {
        assert!(kinds.contains(&k), "{k} missing: {kinds:?}");
    }
    let added = &r["lab"]["propagation"]["added"][0];
    let prop = added["propagation_ms"]
        .as_f64()
        .expect("the new pod got traffic");
    eprintln!("k8s: new pod first response {prop:.0} ms after ready in the EndpointSlice");
    assert!(prop < 10_000.0, "{added}");
    let errors = n(&q["failed"]);
    assert!(
        errors * 20 < n(&q["intended"]),
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
