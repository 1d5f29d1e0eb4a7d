//! The community ingress-nginx controller (controller-v1.11.0) for real
//! ([`IngressNginx`]), the studies' baseline: TLS at the controller with the run's
//! Secret named in the Ingress, routes through its `nginx.ingress.kubernetes.io`
//! annotations, endpoints pushed to its Lua balancer without a reload.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_ingress_nginx::{IngressNginx, HTTPS_ADDR};
use crate::common::k8s_pods::PodRunner;
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The host the run's Ingress names: ingress-nginx gives a client that sends no
/// server name (a load to an address) its default certificate, never an Ingress's.
const HOST: &str = "ingress.test";

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Runs `extra` (tls, backends, load, changes) through the controller; returns
/// the result, and nginx's worker processes as sampled every 100 ms from the load's
/// start for `watch` (each sample's pids).
fn run(
    cluster: &TestCluster,
    inx: &IngressNginx,
    name: &str,
    extra: &str,
    watch: Duration,
) -> (Value, Vec<Vec<u32>>) {
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: {name}\nplatform: kubernetes\nsystems: [ingress-nginx]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{ingress-nginx: \"https://{HTTPS_ADDR}/\"}}\n\
             \x20 workloads: {}\n  processes: {{ingress-nginx: \"{}\"}}\n  host: {HOST}\n\
             requests:\n  - {{host: {HOST}, path: /}}\n{extra}",
            cluster.kubeconfig().display(),
            inx.workloads(),
            inx.processes(),
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let t = Instant::now();
    let proc = Proc::spawn_group("run", &mut cmd, dir.path());
    let samples = crate::common::k8s::sample_through_load(&proc, t, watch, String::new, || {
        inx.nginx_workers()
    });
    let done = proc.finish(Duration::from_secs(300));
    eprintln!("{name} took {:.1?}\n{}", t.elapsed(), done.stdout);
    assert!(
        done.success(),
        "{}\n{}\n{}",
        done.stdout,
        done.stderr,
        inx.logs()
    );
    (read_json(&out.join("ingress-nginx/result.json")), samples)
}

/// S1's defining property first: endpoint churn (2 -> 4 -> 2 pods) under a TLS load
/// reaches nginx through the Lua balancer, without a reload (the same worker
/// processes before and after). Then S3's route changes, a rotation and both
/// restarts in one TLS run, each reported with what it cost.
#[test]
fn s1_churn_without_a_reload_then_s3_routes_rotation_and_restarts_through_ingress_nginx() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    // Snippets allowed, as S3's `header` change (a configuration-snippet) needs: the
    // controller's default refuses them (the failures test).
    let inx = IngressNginx::start(&cluster, &[("allow-snippet-annotations", "true")]);
    eprintln!("ingress-nginx up in {:.1?}", inx.took);

    let (r, samples) = run(
        &cluster,
        &inx,
        "k8s-inx-churn",
        "tls:\n  key: ecdsa-p256\nbackends:\n  replicas: 2\n  drain_timeout: 2s\n\
         load:\n  rate: 100\n  connections: 10\n  new_connection: true\n  duration: 13s\n  warmup: 2s\n\
         changes:\n  - wait: 1s\n  - scale: 4\n  - wait: 6s\n  - scale: 2\n  - wait: 3s\n\
         probes:\n  only: [plain, underscore-header, body-1mib-plus-1, upstream-reset-once, unknown-path, no-ready-endpoint]\n",
        Duration::from_secs(11),
    );
    // The behaviour probes through the real controller, before the load and after
    // each scale step: its defaults, as docs/probes.md lists them, in every round.
    let p = &r["lab"]["probes"];
    let rounds = p["rounds"].as_array().unwrap();
    assert!(rounds.len() >= 2, "{p}");
    // During the churn a probe may meet a pod on its way out, as the load's own
    // requests do (2 % allowed below): a probe answered by the controller instead of
    // a backend, in a round after a scale step, is that loss (a 502 in a rehearsal,
    // with one of the load's requests lost in the same window; once a 404), said
    // and counted, not a behaviour. Before the load every probe must answer.
    let mut lost = 0;
    for (k, observed) in std::iter::once(&p["observed"])
        .chain(rounds.iter().map(|x| &x["observed"]))
        .enumerate()
    {
        let probe = |id: &str| crate::common::k8s::probe_answer(observed, id);
        let mut churned = |a: &Value| {
            let gone = k > 0 && a["status"] != 200 && a["received"].is_null();
            if gone {
                eprintln!("ingress-nginx: probes: round {k}: lost to the churn: {a}");
                lost += 1;
            }
            gone
        };
        let plain = probe("plain");
        if !churned(&plain) {
            assert_eq!(plain["status"], 200, "round {k}: {plain}");
            assert!(
                plain["received"]["headers"]["x-real-ip"].is_string(),
                "{plain}"
            );
        }
        // nginx drops a header with an underscore (enable-underscores-in-headers off).
        let under = probe("underscore-header");
        if !churned(&under) {
            assert_eq!(under["status"], 200, "round {k}: {under}");
            assert!(
                under["received"]["headers"]["x_ib_underscore"].is_null(),
                "{under}"
            );
        }
        // proxy-body-size 1m: a byte over it is the controller's 413.
        let big = probe("body-1mib-plus-1");
        assert_eq!(big["status"], 413, "{big}");
        assert!(big["received"].is_null(), "{big}");
        // A Service with no endpoint: 503 from the controller (its balancer); a
        // path no rule of the fixture host names: its default backend's 404.
        assert_eq!(
            crate::common::k8s::fixture_answers(observed, "ingress-nginx"),
            [(503, false), (404, false)]
        );
        eprintln!(
            "ingress-nginx: probes: reset once -> {} after {} attempt(s)",
            probe("upstream-reset-once")["status"],
            probe("upstream-reset-once")["received"]["attempt"]
        );
    }
    // Of the rounds' probes that go to a pod, a few at most met one going away.
    assert!(lost <= 2, "{lost} probes lost to the churn: {p}");
    let q = &r["requests"];
    assert!(
        n(&q["completed"]) * 100 >= n(&q["intended"]) * 98,
        "{q}: {}",
        r["errors"]
    );
    for a in r["lab"]["propagation"]["added"].as_array().unwrap() {
        let ms = a["propagation_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("a new pod never served: {a}\n{}", inx.logs()));
        eprintln!("ingress-nginx: new pod first served {ms:.0} ms after it was ready");
        // Its controller syncs at most every 3.3 s (--sync-rate-limit 0.3), its Lua
        // balancer takes the new list within a second.
        assert!(ms < 5000.0, "{a}");
    }
    assert_eq!(
        r["backends"].as_object().unwrap().len(),
        4,
        "{}",
        r["backends"]
    );
    // From the load's start (the run's Ingress and Secret in force, served) through
    // both scale steps, nginx kept its workers: no reload.
    let first = samples.first().cloned().unwrap_or_default();
    assert!(!first.is_empty(), "no nginx worker seen: {}", inx.logs());
    assert!(samples.len() > 50, "{} samples", samples.len());
    for s in &samples {
        assert_eq!(
            s, &first,
            "nginx reloaded during the endpoint churn: {samples:?}"
        );
    }
    eprintln!(
        "ingress-nginx: workers {first:?} through the churn ({} samples)",
        samples.len()
    );

    let (r2, _) = run(
        &cluster,
        &inx,
        "k8s-inx-lifecycle",
        // Pods held 6 s, not 2, and changes 4 s apart: the controller syncs at most
        // every 3.3 s, so a pod gone sooner is never routed to, and a route changed
        // again sooner is never in force (both measured in the failures test).
        &format!(
            "tls:\n  key: ecdsa-p256\n{}",
            crate::common::k8s::LIFECYCLE_RUN
        )
        .replace("scale: 4\n  - wait: 2s", "scale: 4\n  - wait: 6s")
        .replace("wait: 2s", "wait: 4s")
        .replace("duration: 30s", "duration: 50s"),
        Duration::ZERO,
    );
    for w in r2["lab"]["windows"].as_array().unwrap() {
        eprintln!(
            "ingress-nginx: window {}: {} completed, errors {}",
            w["change"], w["completed"], w["errors"]
        );
    }
    crate::common::k8s::check_lifecycle_run(&r2, "ingress-nginx", 5);
    // Half the requests may fail in all (both restarts take nginx down with its
    // pod), but outside the restarts' windows next to nothing does, as HAProxy's.
    let (outside, intended) = crate::common::k8s::failed_outside_restarts(&r2);
    assert!(
        outside * 20 <= intended,
        "{outside} of {intended} failed outside the restarts' windows: {}",
        r2["errors"]
    );
    let changes = crate::common::k8s::lifecycle_route_changes(&r2);
    for c in &changes {
        eprintln!(
            "ingress-nginx: route {}: applied {} ms, seen {} ms, errors {}",
            c["route"], c["applied_ms"], c["seen_ms"], c["errors"]
        );
        // Every change shows, `cors` too: ingress-nginx adds its CORS headers to
        // every response, with an Origin or not (unlike HAProxy's controller, whose
        // answer needs one: docs/kubernetes.md).
        assert!(c["seen_ms"].as_f64().is_some(), "{c}\n{}", inx.logs());
    }
    // What the controller made under /etc stayed in its pod's root (pod-root.sh
    // --private /etc): nothing on this machine.
    assert!(
        !std::path::Path::new("/etc/ingress-controller").exists(),
        "the controller wrote to this machine's /etc"
    );
    let res = &r2["lab"]["resources"];
    eprintln!("ingress-nginx: controller and nginx: {res}");
    assert!(res["rss_max_mib"].as_f64().unwrap_or(0.0) > 10.0, "{res}");
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    drop(inx);
    drop(pods);
}

/// What goes wrong with the controller as installed by default, said in one line:
/// a route change through a snippet annotation, which it drops without a word
/// (snippets are off by default since v1.9), and the controller crashing mid-run.
/// Each run's result is written, and nothing of it stays in the cluster.
#[test]
fn a_dropped_snippet_and_a_crash_are_said_in_one_line() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let inx = IngressNginx::start(&cluster, &[]);
    let warnings = |r: &Value| -> Vec<String> {
        r["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect()
    };

    // The header change: the Ingress carries the snippet, the controller syncs it
    // (its reload shows nothing), traffic never shows it; the base after it shows.
    let (r, _) = run(
        &cluster,
        &inx,
        "k8s-inx-snippet",
        "tls:\n  key: ecdsa-p256\nbackends:\n  replicas: 2\n  drain_timeout: 2s\n\
         load:\n  rate: 50\n  connections: 4\n  duration: 12s\n  warmup: 1s\n\
         changes:\n  - wait: 1s\n  - route: header\n  - wait: 5s\n  - route: base\n  - wait: 4s\n",
        Duration::ZERO,
    );
    let changes = r["lab"]["route_propagation"]["changes"].as_array().unwrap();
    assert!(changes[0]["seen_ms"].is_null(), "{changes:?}");
    assert_eq!(n(&changes[0]["errors"]), 0, "the route stays: {changes:?}");
    let w = warnings(&r);
    let line = w
        .iter()
        .find(|l| l.contains("route header"))
        .unwrap_or_else(|| panic!("{w:?}"));
    assert!(
        line.contains("never showed in traffic")
            && line.contains("allow-snippet-annotations")
            && !line.contains('\n'),
        "{line}"
    );

    // The controller killed mid-run: nginx goes with its pod's processes, the
    // pod's container is started again and counted; the result says so.
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s-inx-crash\nplatform: kubernetes\nsystems: [ingress-nginx]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{ingress-nginx: \"https://{HTTPS_ADDR}/\"}}\n\
             \x20 workloads: {}\n  host: {HOST}\n\
             tls:\n  key: ecdsa-p256\nrequests:\n  - {{host: {HOST}, path: /}}\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             load:\n  rate: 50\n  connections: 2\n  duration: 12s\n  warmup: 1s\n",
            cluster.kubeconfig().display(),
            inx.workloads(),
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let p = Proc::spawn_group("run", &mut cmd, dir.path());
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
    inx.crash_controller();
    let done = p.finish(Duration::from_secs(120));
    eprintln!("{}\n{}", done.stdout, done.stderr);
    let r = read_json(&out.join("ingress-nginx/result.json"));
    let w = warnings(&r);
    let crash = w
        .iter()
        .find(|l| l.contains("container restarted during the run"))
        .unwrap_or_else(|| panic!("{w:?}\n{}", inx.logs()));
    assert!(
        crash.contains("ingress-nginx/") && crash.contains("(0 -> 1)"),
        "{crash}"
    );
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

    // Last, so that nothing after it meets what the controller made of it: a TLS Secret it rejects: the team's own Ingress (the routes a user brings)
    // names a Secret of its own whose certificate is no PEM. The controller keeps
    // its default certificate for the host, the run's wait for its route to serve
    // ends in one line, and nothing of the run stays.
    let manifest = dir.path().join("broken-tls.yaml");
    std::fs::write(
        &manifest,
        crate::common::k8s::broken_tls_manifest("nginx", HOST),
    )
    .unwrap();
    let scn = dir.path().join("tls.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s-inx-badtls\nplatform: kubernetes\nsystems: [ingress-nginx]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{ingress-nginx: \"https://{HTTPS_ADDR}/\"}}\n\
             \x20 host: {HOST}\n  serve_timeout: 6s\n  manifests: {{ingress-nginx: {}}}\n\
             tls:\n  key: ecdsa-p256\nrequests:\n  - {{host: {HOST}, path: /}}\n\
             backends:\n  replicas: 1\n\
             load:\n  rate: 20\n  connections: 2\n  duration: 2s\n  warmup: 0s\n",
            cluster.kubeconfig().display(),
            manifest.display(),
        ),
    )
    .unwrap();
    let mut cmd = cluster.ingressbench();
    cmd.arg("run")
        .arg(&scn)
        .arg("--out")
        .arg(dir.path().join("tls-out"));
    let done = Proc::spawn_group("run", &mut cmd, dir.path()).finish(Duration::from_secs(120));
    assert!(!done.success(), "{}", done.stderr);
    crate::common::k8s::refused_tls_secret_line(&done.stderr, &inx.logs());
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));

    drop(inx);
    drop(pods);
}

/// Study S5's load on the cluster (TLS 1.3, RSA 2048, 500 req/s over 50
/// connections, 2 <-> 4 backends every 10 s, as its file has it) through the real
/// controller, then issue 28's route set of 200 Ingresses over 10 hosts with one
/// added, removed and changed under load.
#[test]
fn s5_and_a_route_set_of_200_through_ingress_nginx() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    // The route set marks each route with a header: a configuration-snippet.
    let inx = IngressNginx::start(&cluster, &[("allow-snippet-annotations", "true")]);
    let (r, _) = run(
        &cluster,
        &inx,
        "k8s-inx-s5",
        "tls:\n  version: \"1.3\"\n  key: rsa2048\n\
         backends:\n  replicas: 2\n  body_size: 1024\n  stop: graceful\n\
         load:\n  rate: 500\n  connections: 50\n  threads: 1\n  duration: 28s\n\
         changes:\n  - repeat:\n      steps:\n        - scale: 4\n        - wait: 10s\n        - scale: 2\n        - wait: 10s\n",
        Duration::ZERO,
    );
    assert_eq!(r["tls"]["version"], "TLSv1.3", "{}", r["tls"]);
    let q = &r["requests"];
    assert!(
        n(&q["completed"]) * 100 > n(&q["intended"]) * 98,
        "{q}: {}",
        r["errors"]
    );
    // The last scale-up comes 8 s before the end: a sync (3.3 s) and the Lua
    // balancer's second fit in that, on a busy machine too.
    let prop = &r["lab"]["propagation"];
    let added = prop["added"].as_array().unwrap();
    assert!(!added.is_empty(), "{prop}");
    for a in added {
        let ms = a["propagation_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("never served: {a}"));
        assert!(ms < 5000.0, "{a}");
    }
    eprintln!(
        "ingress-nginx S5: {} of {} completed, errors {}, added {}, removed {}",
        q["completed"], q["intended"], r["errors"], prop["added_ms"], prop["removed_ms"]
    );
    crate::common::k8s::run_route_set(
        &cluster,
        &["ingress-nginx"],
        "{ingress-nginx: \"http://198.18.0.1:8080/\"}",
        "unused/unused",
        &format!("{{ingress-nginx: \"{}\"}}", inx.processes()),
        crate::common::k8s::ROUTES,
    );
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    drop(inx);
    drop(pods);
}
