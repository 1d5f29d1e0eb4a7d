//! Envoy Gateway v1.9 for real ([`EnvoyGateway`]): its controller and the Envoy
//! pods it makes per Gateway, run by the harness, each run with a Gateway of its own
//! (`kubernetes.gateway_class`), TLS at that Gateway with the run's certificate.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_envoy_gateway::{EnvoyGateway, CLASS};
use crate::common::k8s_pods::PodRunner;
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
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

fn run(
    cluster: &TestCluster,
    dir: &std::path::Path,
    scn: &str,
) -> (crate::common::proc::Output, std::path::PathBuf) {
    let file = dir.join("s.yaml");
    std::fs::write(&file, scn).unwrap();
    let out = dir.join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&file).arg("--out").arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut cmd, dir).finish(Duration::from_secs(300));
    eprintln!(
        "run took {:.1?}\n{}\n{}",
        t.elapsed(),
        done.stdout,
        done.stderr
    );
    (done, out)
}

#[test]
fn s1_endpoint_churn_with_tls_at_a_gateway_the_run_owns() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let eg = EnvoyGateway::start(&cluster);
    eprintln!("envoy gateway up in {:.1?}", eg.took);
    let dir = tempfile::tempdir().unwrap();
    let scn = format!(
        "{}backends:\n  replicas: 2\n  drain_timeout: 2s\n\
         load:\n  rate: 100\n  connections: 10\n  duration: 12s\n  warmup: 2s\n\
         changes:\n  - wait: 1s\n  - scale: 4\n  - wait: 2s\n  - scale: 2\n",
        head(&cluster, "k8s-eg-s1", true)
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
    eprintln!(
        "{:?}",
        std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect::<Vec<_>>()
    );
    let r = read_json(&out.join("result.json"));
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&r["load"])
            .unwrap_or_default()
            .chars()
            .take(3000)
            .collect::<String>()
    );
}
