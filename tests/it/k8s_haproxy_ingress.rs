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
             tls:\n  key: ecdsa-p256\n{}\
             probes:\n  only: [plain, underscore-header, body-1mib-plus-1, upstream-reset-once, unknown-path, no-ready-endpoint]\n  during: false\n",
            cluster.kubeconfig().display(),
            hi.workloads(),
            hi.processes(),
            crate::common::k8s::LIFECYCLE_RUN,
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
    // The behaviour probes through the real controller before the load: its
    // defaults where they differ from ingress-nginx's (docs/probes.md).
    let observed = &r["lab"]["probes"]["observed"];
    let probe = |id: &str| crate::common::k8s::probe_answer(observed, id);
    assert_eq!(probe("plain")["status"], 200, "{observed}");
    // A header with an underscore passes, and so does a body over a mebibyte.
    let under = probe("underscore-header");
    assert_eq!(
        under["received"]["headers"]["x_ib_underscore"], "yes",
        "{under}"
    );
    let big = probe("body-1mib-plus-1");
    assert_eq!(big["status"], 200, "{big}");
    assert_eq!(big["received"]["body_len"], (1 << 20) + 1, "{big}");
    // A Service with no endpoint: 503 from HAProxy (a backend with no server); a
    // path no rule of the fixture host names: 404, neither from a backend.
    assert_eq!(
        crate::common::k8s::fixture_answers(observed, "haproxy-ingress"),
        [(503, false), (404, false)]
    );
    eprintln!(
        "haproxy-ingress: probes: reset once -> {} ({})",
        probe("upstream-reset-once")["status"],
        probe("upstream-reset-once")["received"]
    );
    // Both restarts take HAProxy down with the controller's pod (connections are
    // refused until the new pod's HAProxy listens): 10-23 % of the 3,000 requests
    // here, more on a busier machine.
    crate::common::k8s::check_lifecycle_run(&r, "haproxy-ingress", 6);
    // Outside the restarts' windows, next to nothing fails.
    let (outside, intended) = crate::common::k8s::failed_outside_restarts(&r);
    assert!(
        outside * 20 <= intended,
        "{outside} of {intended} failed outside the restarts' windows: {}",
        r["errors"]
    );

    // S3 through its annotations: the header and the rewrite show, after a reload.
    // Its CORS answers only a request that carries an Origin, which the load does
    // not send: that change never shows (docs/kubernetes.md).
    let changes = crate::common::k8s::lifecycle_route_changes(&r);
    for c in &changes {
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
    // Every pod served, the scaled-up ones too, each within 2 s of being ready: the
    // controller syncs every second (--sync-period=1s), and on a machine shared
    // with the other Kubernetes tests one took 1.14 s (a rehearsal of 189edde).
    let prop = &r["lab"]["propagation"];
    let added = prop["added"].as_array().unwrap();
    assert!(!added.is_empty(), "{prop}");
    for a in added {
        let ms = a["propagation_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("never served: {a}"));
        assert!(ms < 2000.0, "{a}");
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

/// What goes wrong, said in one line: an IngressClass that does not exist, one no
/// controller watches (the URL answers with another certificate than the run's, as
/// when a controller refuses the run's TLS Secret), and the controller crashing
/// mid-run. Each run ends with its result or its line, and nothing of it stays in
/// the cluster.
#[test]
fn a_missing_class_a_class_nobody_serves_and_a_crash_are_said_in_one_line() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let hi = HaproxyIngress::start(&cluster);
    let dir = tempfile::tempdir().unwrap();
    let head = |name: &str, extra: &str| {
        format!(
            "name: {name}\nplatform: kubernetes\nsystems: [haproxy-ingress]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{haproxy-ingress: \"https://{HTTPS_ADDR}/\"}}\n\
             \x20 workloads: {}\n  processes: {{haproxy-ingress: \"{}\"}}\n{extra}\
             tls:\n  key: ecdsa-p256\nbackends:\n  replicas: 2\n  drain_timeout: 2s\n",
            cluster.kubeconfig().display(),
            hi.workloads(),
            hi.processes(),
        )
    };
    let run = |sub: &str, scn: String| {
        let sub = dir.path().join(sub);
        std::fs::create_dir_all(&sub).unwrap();
        let file = sub.join("s.yaml");
        std::fs::write(&file, scn).unwrap();
        let out = sub.join("out");
        let mut cmd = cluster.ingressbench();
        cmd.arg("run").arg(&file).arg("--out").arg(&out);
        (Proc::spawn_group("run", &mut cmd, &sub), out)
    };
    let short = "load:\n  rate: 50\n  connections: 2\n  duration: 2s\n  warmup: 0s\n";

    // No such IngressClass: said before anything is made.
    let (p, _) = run(
        "a",
        head("k8s-hi-noclass", "  ingress_class: nope\n") + short,
    );
    let done = p.finish(Duration::from_secs(120));
    assert!(!done.success());
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("IngressClass nope"))
        .unwrap_or_else(|| panic!("{}", done.stderr));
    assert!(
        line.contains(
            "does not exist (installed: haproxy (haproxy.org/ingress-controller/haproxy))"
        ) && line.contains("kubernetes.ingress_class"),
        "{line}"
    );

    // A class of a controller that does not run: HAProxy never takes the Ingress,
    // and answers the load's TLS with its own default certificate.
    let class = dir.path().join("class.yaml");
    std::fs::write(
        &class,
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: other\n\
         spec:\n  controller: example.invalid/nobody\n",
    )
    .unwrap();
    let (ok, o) = cluster.kubectl(&["apply", "-f", class.to_str().unwrap()]);
    assert!(ok, "{o}");
    let t = Instant::now();
    let (p, _) = run(
        "b",
        head(
            "k8s-hi-other",
            "  ingress_class: other\n  serve_timeout: 3s\n",
        ) + short,
    );
    let done = p.finish(Duration::from_secs(120));
    assert!(!done.success());
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("Ingress ib-route of class other"))
        .unwrap_or_else(|| panic!("{}", done.stderr));
    assert!(
        line.contains("got no answer from a backend in 3 s")
            && line.contains("TLS")
            && line.contains("did the controller refuse its TLS Secret, or not take the route"),
        "{line}"
    );
    eprintln!("unserved class said in {:.1?}: {line}", t.elapsed());
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));

    // A TLS Secret it rejects: the team's own Ingress (the routes a user brings)
    // names a Secret of its own whose certificate is no PEM. HAProxy never gets a
    // certificate for the host, the run's wait for its route to serve ends in one
    // line, and nothing of the run stays.
    let manifest = dir.path().join("broken-tls.yaml");
    std::fs::write(
        &manifest,
        crate::common::k8s::broken_tls_manifest("haproxy", "ingress.test"),
    )
    .unwrap();
    let (p, _) = run(
        "t",
        head(
            "k8s-hi-badtls",
            &format!(
                "  host: ingress.test\n  serve_timeout: 4s\n  manifests: {{haproxy-ingress: {}}}\n",
                manifest.display()
            ),
        ) + "requests:\n  - {host: ingress.test, path: /}\n"
            + short,
    );
    let done = p.finish(Duration::from_secs(120));
    assert!(!done.success(), "{}", done.stderr);
    crate::common::k8s::refused_tls_secret_line(&done.stderr, &hi.logs());
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));

    // The controller crashes mid-run: HAProxy goes with its pod's processes, the
    // pod's container is started again; the run ends, its result says so.
    let (p, out) = run(
        "c",
        head("k8s-hi-crash", "")
            + "load:\n  rate: 50\n  connections: 2\n  duration: 12s\n  warmup: 1s\n",
    );
    let t = Instant::now();
    while !p.stderr_so_far().contains("load running") {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "{}",
            p.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    hi.crash_controller();
    let done = p.finish(Duration::from_secs(120));
    eprintln!("{}\n{}", done.stdout, done.stderr);
    let r = read_json(&out.join("haproxy-ingress/result.json"));
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let crash = warnings
        .iter()
        .find(|w| w.contains("container restarted during the run"))
        .unwrap_or_else(|| {
            panic!(
                "{warnings:?}\n{}\n{:?}",
                hi.logs(),
                cluster.kubectl(&["get", "pods", "-A", "-o", "wide"])
            )
        });
    assert!(
        crash.contains("haproxy-controller/")
            && crash.contains("(0 -> 1)")
            && !crash.contains('\n'),
        "{crash}"
    );
    // HAProxy was down a while: refused connections, counted as errors.
    assert!(n(&r["requests"]["failed"]) > 0, "{}", r["requests"]);
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let (_, left) = cluster.kubectl(&[
        "get",
        "ingress,secret",
        "-A",
        "-l",
        "app.kubernetes.io/managed-by=ingressbench",
        "-o",
        "name",
    ]);
    assert!(left.trim().is_empty(), "{left}");
    drop(hi);
    drop(pods);
}
