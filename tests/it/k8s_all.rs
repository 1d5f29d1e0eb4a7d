//! Studies S1 and S3, the bundled scenario files themselves, run with `--platform
//! kubernetes` against every real controller of the test environment at once, each a
//! system of one run: Traefik v3.6 through its Ingress provider (`traefik`) and its
//! Gateway API provider (`gateway-api`), Contour v1.33 + Envoy 1.40 through Gateway
//! API (`contour`) and through Ingress (`contour-ingress`, S1 only: Contour's Ingress
//! cannot express S3's route changes, and that run is refused before it starts). Both
//! controllers run side by side in one cluster, each on its own Gateway. Then a run
//! killed with SIGKILL leaves its namespace behind, and `ingressbench cleanup`
//! removes it.
//!
//! The studies terminated TLS at the controller; here the controllers listen on plain
//! HTTP (their TLS set-up is not what is being tested), so the files' `tls:` section
//! is switched off and nothing else of them changes.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_contour::Contour;
use crate::common::k8s_pods::PodRunner;
use crate::common::k8s_traefik::{Providers, Traefik};
use crate::common::proc::Proc;
use crate::common::{processes_with, read_json, shared, BIN};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A bundled scenario with its `tls:` section turned off, written into `dir`.
fn plain_http(bundled: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(bundled);
    let text = std::fs::read_to_string(&src).unwrap();
    let tls = "tls:\n  version: \"1.2\"\n  key: rsa2048\n";
    assert!(text.contains(tls), "{bundled} changed its tls section");
    let out = dir.join(bundled);
    std::fs::write(&out, text.replace(tls, "tls:\n  enabled: false\n")).unwrap();
    out
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// What every system's result must show: the request balance, a load that mostly
/// got through, and responses from the run's own pods only. The errors themselves
/// are the controllers' (S1's finding: some controllers fail requests while
/// endpoints churn, Traefik among them here) and are reported, not judged.
fn check_load(system: &str, r: &Value, min_completed: u64) {
    let q = &r["requests"];
    assert_eq!(
        n(&q["intended"]),
        n(&q["completed"]) + n(&q["failed"]) + n(&q["not_sent"]) + n(&q["unfinished"]),
        "{system}: {q}"
    );
    assert!(n(&q["completed"]) >= min_completed, "{system}: {q}");
    assert!(
        n(&q["failed"]) * 4 < n(&q["intended"]),
        "{system}: {} failed: {}",
        n(&q["failed"]),
        r["errors"]
    );
    eprintln!(
        "k8s all: {system}: {} of {} failed: {}",
        n(&q["failed"]),
        n(&q["intended"]),
        r["errors"]
    );
    let backends = r["backends"].as_object().unwrap();
    assert!(
        backends.keys().all(|k| k.starts_with("ib-backend-")),
        "{system}: {backends:?}"
    );
}

/// The behaviour probes S1 sends here: few, so that a round under churn is short.
const PROBES: [&str; 5] = [
    "plain",
    "underscore-header",
    "double-slash",
    "upstream-reset-once",
    "unknown-host",
];

/// Every probe answered before the load and in a round after each scale step and
/// at the end; a plain GET served by a pod of the run before the load, and during
/// it by a pod or failed as the load's requests failed (S1's finding: a controller
/// that fails requests while endpoints churn fails a probe too). What differed from
/// Traefik's Ingress and what changed under the churn are printed for
/// docs/probes.md.
fn check_probes(system: &str, r: &Value) {
    let p = &r["lab"]["probes"];
    assert_eq!(p["baseline"], "traefik", "{system}: {p}");
    let rounds = p["rounds"].as_array().unwrap();
    assert!(rounds.len() >= 3, "{system}: {} rounds", rounds.len());
    // The last round is the end's; changes that came while the round before it ran
    // are probed with it, in one round named after all of them ("scale 5 -> 7 +
    // end"), as a slow round on a busy machine makes them.
    let last = rounds.last().unwrap()["after"].as_str().unwrap_or_default();
    assert!(
        last == "end" || last.ends_with(" + end"),
        "{system}: the last round is after {last:?}"
    );
    let plain = |observed: &Value| {
        let all = observed.as_array().unwrap();
        assert_eq!(all.len(), PROBES.len(), "{system}: {observed}");
        assert!(
            all.iter().all(|o| o["status"].is_u64()),
            "{system}: {observed}"
        );
        all.iter().find(|o| o["probe"] == "plain").unwrap().clone()
    };
    let before = plain(&p["observed"]);
    assert_eq!(before["status"], 200, "{system}: {before}");
    assert!(
        before["received"]["headers"]["host"].is_string(),
        "{system}: {before}"
    );
    let mut failed = 0;
    for round in rounds {
        let o = plain(&round["observed"]);
        if o["status"] != 200 {
            let status = o["status"].to_string();
            assert!(
                r["errors"]["status_codes"][status.as_str()].as_u64() > Some(0),
                "{system}: a probe failed as no request of the load did: {o} {}",
                r["errors"]
            );
            failed += 1;
        }
    }
    eprintln!(
        "k8s all: probes {system}: {} rounds, plain failed in {failed}; differences {}; changed {}",
        rounds.len(),
        p["differences"],
        rounds
            .iter()
            .map(|x| format!("{}: {}", x["after"], x["changed"]))
            .collect::<Vec<_>>()
            .join("; ")
    );
}

#[test]
fn s1_and_s3_run_against_every_controller_in_one_run_and_a_killed_run_is_cleaned_up() {
    let _turn = shared();
    let t0 = Instant::now();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    // Traefik first: Contour then installs the experimental Gateway API CRDs over the
    // standard ones, a superset both accept.
    let traefik = Traefik::start(
        &cluster,
        Providers {
            ingress: true,
            gateway: true,
            ingress_nginx: false,
        },
    );
    traefik.gateway(&cluster, "ib-gateway", "traefik");
    let contour = Contour::start(&cluster);
    eprintln!(
        "k8s all: cluster and both controllers up in {:.1?}",
        t0.elapsed()
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig();
    let run = |file: &Path,
               out: &Path,
               systems: &[(&str, String)],
               brought: &[(&str, PathBuf)],
               limit: u64| {
        let mut cmd = cluster.ingressbench();
        cmd.arg("run")
            .arg(file)
            .arg("--quick")
            .args(["--platform", "kubernetes", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--out")
            .arg(out);
        for (system, manifest) in brought {
            cmd.arg("--manifests")
                .arg(format!("{system}={}", manifest.display()));
        }
        for (name, url) in systems {
            cmd.arg("--system").arg(format!("{name}={url}"));
            // Each Gateway API system on its own controller's Gateway.
            match *name {
                "gateway-api" => cmd.args(["--gateway", "gateway-api=ib-gateway/traefik"]),
                "contour" => cmd
                    .arg("--gateway")
                    .arg(format!("contour={}", contour.gateway())),
                _ => &mut cmd,
            };
        }
        let t = Instant::now();
        let done =
            Proc::spawn_group("run", &mut cmd, dir.path()).finish(Duration::from_secs(limit));
        eprintln!(
            "k8s all: {} took {:.1?}\n{}",
            file.display(),
            t.elapsed(),
            done.stdout
        );
        done
    };
    let succeeded = |done: &crate::common::proc::Output| {
        assert!(
            done.success(),
            "{}\n{}\n{}\ntraefik:\n{}",
            done.stdout,
            done.stderr,
            contour.logs(),
            traefik.log()
        );
    };
    let all = [
        ("traefik", traefik.url()),
        ("gateway-api", traefik.url()),
        ("contour", contour.url()),
        ("contour-ingress", contour.url()),
    ];

    // S1: 5 <-> 7 backends, every controller; behaviour probes before the load,
    // after each scale step and at the end, Traefik's Ingress the baseline.
    let s1 = plain_http("dynamic-endpoints.yaml", dir.path());
    let text = std::fs::read_to_string(&s1).unwrap();
    std::fs::write(
        &s1,
        format!(
            "{text}probes:\n  only: [{}]\n  record: [x-team]\n",
            PROBES.join(", ")
        ),
    )
    .unwrap();
    // The routes a user brings: Traefik's Ingress as a team runs it (an annotation
    // naming a Middleware that adds a request header) and, for Contour, the same
    // routing translated by hand to an HTTPRoute; the other two systems keep the
    // run's generated routes.
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let brought = [
        ("traefik", manifests.join("shop-ingress-traefik.yaml")),
        ("contour", manifests.join("shop-httproute.yaml")),
    ];
    let out1 = dir.path().join("s1");
    succeeded(&run(&s1, &out1, &all, &brought, 420));
    for (system, _) in &all {
        let r = read_json(&out1.join(system).join("result.json"));
        check_load(system, &r, 4000);
        // More than the first five pods served: the scaled-up ones got traffic, each
        // within 10 s of being ready in the EndpointSlice, and the removed ones
        // stopped getting it.
        let backends = r["backends"].as_object().unwrap();
        assert!(backends.len() >= 7, "{system}: {backends:?}");
        let p = &r["lab"]["propagation"];
        let added = p["added"].as_array().unwrap();
        assert!(added.len() >= 2, "{system}: {p}");
        // A pod must have been seen only if it lived 3 s in the window: one ready
        // in the last seconds may get its first request after the window, and the
        // ReplicaSet removes the newest pods first, so one added just before a
        // scale-down can be gone before a slow controller (Traefik has taken 2.5 s
        // under CI load) sends it anything.
        let window_ms = r["duration_s"].as_f64().unwrap() * 1e3;
        let removed_at = |backend: &Value| {
            p["removed"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| &x["backend"] == backend)
                .map_or(window_ms, |x| x["at_ms"].as_f64().unwrap())
        };
        let mut seen = 0;
        for a in added {
            match a["propagation_ms"].as_f64() {
                Some(ms) => {
                    assert!(ms < 10_000.0, "{system}: {a}");
                    seen += 1;
                }
                None => assert!(
                    removed_at(&a["backend"]) - a["at_ms"].as_f64().unwrap() < 3000.0,
                    "{system}: a new pod that lived 3 s never got traffic: {a} in {p}"
                ),
            }
        }
        assert!(seen >= 1, "{system}: {p}");
        assert!(
            !p["removed"].as_array().unwrap().is_empty(),
            "{system}: {p}"
        );
        check_probes(system, &r);
        // The user's routing was in force for the load and the probes: its header
        // reached the backend through the user's objects only.
        let marked = brought.iter().any(|(b, _)| b == system);
        // The result says what routed it.
        let routes = r["lab"]["versions"]["routes"].as_str();
        assert_eq!(
            routes.is_some(),
            marked,
            "{system}: {}",
            r["lab"]["versions"]
        );
        if let Some(routes) = routes {
            assert!(routes.contains("shop-"), "{routes}");
        }
        for o in r["lab"]["probes"]["observed"].as_array().unwrap() {
            let team = &o["received"]["headers"]["x-team"];
            if o["received"].is_object() {
                assert_eq!(team.as_str() == Some("shop"), marked, "{system}: {o}");
            }
        }
        eprintln!(
            "k8s all: S1 {system}: new pod's first response median {} ms, removed pod's last {} ms, {} failed",
            p["added_ms"]["median"], p["removed_ms"]["median"], r["requests"]["failed"]
        );
    }
    // Each system's namespace is deleted as its run ends, asynchronously: gone
    // before the next check counts what a run created.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    let summary = std::fs::read_to_string(out1.join("summary.txt")).unwrap();
    for (system, _) in &all {
        assert!(
            summary.contains(system),
            "{system} not compared:\n{summary}"
        );
    }

    // S3: scale 3 <-> 4, then the route changes, through the three controllers that
    // can express them; with Contour's Ingress the run is refused up front.
    let s3 = plain_http("route-changes-100.yaml", dir.path());
    // The whole corpus of behaviour probes, once before each system's load. Two
    // rounds of scaling, not three: on a cluster each scale step waits for its pods,
    // and a busy machine's three rounds once took all of `--quick`'s 30 s, leaving
    // no time for a route change (Contour's run, in a rehearsal beside a build).
    let text = std::fs::read_to_string(&s3).unwrap();
    assert!(text.contains("      times: 3\n"), "S3 changed its repeat");
    std::fs::write(
        &s3,
        format!(
            "{}probes:\n  during: false\n",
            text.replace("      times: 3\n", "      times: 2\n")
        ),
    )
    .unwrap();
    let refused = run(
        &s3,
        &dir.path().join("refused"),
        &[("contour-ingress", contour.url())],
        &[],
        30,
    );
    assert_eq!(
        refused.code,
        Some(2),
        "{}\n{}",
        refused.stdout,
        refused.stderr
    );
    assert!(
        refused
            .stderr
            .contains("contour-ingress cannot express the route change `cors`"),
        "{}",
        refused.stderr
    );
    let (ok, left) = cluster.our_namespaces();
    assert!(
        ok && !left.contains("namespace/"),
        "a refused run created {left}"
    );

    // A manifest the cluster cannot take, a kind no API of the cluster's serves:
    // the dry run before the run writes any route refuses it in one line naming
    // the file and the object's line; nothing of the run stays.
    let widget = dir.path().join("widget.yaml");
    let shop = std::fs::read_to_string(&brought[0].1).unwrap();
    std::fs::write(
        &widget,
        format!("{shop}---\napiVersion: example.invalid/v1\nkind: Widget\nmetadata: {{name: w}}\n"),
    )
    .unwrap();
    let done = run(
        &s1,
        &dir.path().join("widget"),
        &all[..1],
        &[("traefik", widget.clone())],
        120,
    );
    assert!(!done.success(), "{}", done.stderr);
    let line = done
        .stderr
        .lines()
        .find(|l| l.contains("Widget w"))
        .unwrap_or_else(|| panic!("{}", done.stderr));
    let at = shop.lines().count() + 2;
    assert!(
        line.contains(&format!(
            "{}:{at}: Widget w: the cluster serves no Widget of example.invalid/v1",
            widget.display()
        )),
        "{line}"
    );
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));

    let out3 = dir.path().join("s3");
    let routed = &all[..3];
    succeeded(&run(&s3, &out3, routed, &[], 420));
    for (system, _) in routed {
        let r = read_json(&out3.join(system).join("result.json"));
        check_load(system, &r, 2000);
        // Every probe of the corpus answered (or said why it got no answer), each
        // system compared with Traefik's Ingress; Envoy sets no X-Real-IP, Traefik
        // does (docs/probes.md).
        let p = &r["lab"]["probes"];
        let observed = p["observed"].as_array().unwrap();
        assert_eq!(observed.len(), 25, "{system}: {p}");
        // The fixture host beside the run's host-less route: Traefik's Ingress
        // provider leaves out a route whose Service has no endpoint, and both of
        // Traefik's providers serve a path the fixture's route does not name from
        // the run's catch-all; Contour's Envoy answers both itself.
        let want = match *system {
            "traefik" => [(200, true), (200, true)],
            "gateway-api" => [(503, false), (200, true)],
            _ => [(503, false), (404, false)],
        };
        assert_eq!(
            crate::common::k8s::fixture_answers(&p["observed"], system),
            want,
            "{system}"
        );
        assert!(
            observed
                .iter()
                .all(|o| o["status"].is_u64() || o["error"].is_string()),
            "{system}: {p}"
        );
        let differs = |field: &str| {
            p["differences"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["field"] == field)
        };
        assert_eq!(
            differs("received x-real-ip"),
            *system == "contour",
            "{system}: {p}"
        );
        eprintln!(
            "k8s all: corpus {system}: {}",
            p["differences"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| format!(
                    "{} {}: {} -> {}",
                    d["probe"].as_str().unwrap_or_default(),
                    d["field"].as_str().unwrap_or_default(),
                    d["baseline"].as_str().unwrap_or_default(),
                    d["system"].as_str().unwrap_or_default()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        let changes = r["lab"]["route_propagation"]["changes"]
            .as_array()
            .unwrap_or_else(|| panic!("{system}: no route propagation: {}", r["lab"]));
        // On a cluster every scale step waits for the pods, so `--quick`'s 30 s reach
        // S3's route steps late: the changes made are S3's, in its order, from
        // `cors`, and each one made was seen in traffic.
        let order = ["cors", "header", "rewrite", "base"];
        assert!(!changes.is_empty(), "{system}: no route change made");
        for (c, route) in changes.iter().zip(order) {
            assert_eq!(c["route"], route, "{system}: {changes:?}");
            if route == "base" && c["seen_ms"].is_null() {
                // Made in the window's last moments: nothing after it to show it.
                continue;
            }
            let seen = c["seen_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{system}: {route} never seen in traffic: {c}"));
            assert!(seen < 10_000.0, "{system}: {c}");
            eprintln!(
                "k8s all: S3 {system}: {route} applied {} ms, first seen {seen:.0} ms, last old {} ms",
                c["applied_ms"], c["last_old_ms"]
            );
        }
        assert!(
            !r["lab"]["propagation"]["added"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{system}: {}",
            r["lab"]["propagation"]
        );
    }
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));

    // Interrupted (Ctrl-C) and killed (SIGKILL) in the middle of a run.
    let start_s1 = |name: &str| {
        let mut cmd = cluster.ingressbench();
        cmd.arg("run")
            .arg(&s1)
            .arg("--quick")
            .args(["--platform", "kubernetes", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--system")
            .arg(format!("traefik={}", traefik.url()))
            .arg("--out")
            .arg(dir.path().join(name));
        Proc::spawn_group(name, &mut cmd, dir.path())
    };
    let under_way = |p: &Proc| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, names) = cluster.our_namespaces();
            let ours = names
                .lines()
                .find_map(|l| l.trim().strip_prefix("namespace/"));
            if let Some(ns) = ours {
                // Its pods run and the load has begun.
                let (_, running) = cluster.kubectl(&[
                    "get",
                    "pods",
                    "-n",
                    ns,
                    "--field-selector=status.phase=Running",
                    "-o",
                    "name",
                ]);
                if running.lines().count() >= 5 {
                    std::thread::sleep(Duration::from_secs(3));
                    return ns.to_string();
                }
            }
            assert!(
                Instant::now() < deadline,
                "the run never started:\n{}",
                p.stderr_so_far()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    // Ctrl-C: the run stops, writes what it measured marked partial, and removes its
    // namespace itself.
    let interrupted = start_s1("interrupted");
    let ns = under_way(&interrupted);
    interrupted.signal(rustix::process::Signal::INT);
    let done = interrupted.finish(Duration::from_secs(90));
    assert_eq!(done.code, Some(130), "{}\n{}", done.stdout, done.stderr);
    let r = read_json(&dir.path().join("interrupted/traefik/result.json"));
    assert_eq!(r["partial"], true, "{}", r["requests"]);
    assert!(n(&r["requests"]["completed"]) > 0, "{}", r["requests"]);
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    eprintln!("k8s all: interrupted run removed {ns} itself");

    // SIGKILL: nothing of the run can clean up then, so the namespace it created (and
    // its pods) stays, labelled; `ingressbench cleanup` removes it.
    let mut killed = start_s1("killed");
    let ns = under_way(&killed);
    // The run's process alone, as `kill -9 <pid>` would: its watchdog (its own
    // child) must still remove what it can on this machine.
    let pid = killed.id().to_string();
    std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    let _ = killed.wait_timeout(Duration::from_secs(10));
    let (_, still) = cluster.our_namespaces();
    assert!(
        still.contains(&ns),
        "{ns} should outlive a SIGKILL: {still}"
    );
    let mut cmd = cluster.ingressbench();
    cmd.args(["cleanup", "--platform", "kubernetes", "--kubeconfig"])
        .arg(&kubeconfig);
    let clean = Proc::spawn_group("cleanup", &mut cmd, dir.path()).finish(Duration::from_secs(60));
    assert!(clean.success(), "{}\n{}", clean.stdout, clean.stderr);
    assert!(
        clean.stdout.contains(&format!("deleted namespace {ns}")),
        "{}",
        clean.stdout
    );
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    // Its pods went with it: their processes and network namespaces too.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pods.live_netns().is_empty() {
        assert!(Instant::now() < deadline, "{:?}", pods.live_netns());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(pods.problems(), Vec::<String>::new());
    let marker = s1.display().to_string();
    assert_eq!(
        processes_with(&marker),
        vec![],
        "the killed run left processes"
    );
    drop(contour);
    drop(traefik);
    eprintln!("k8s all: whole test {:.1?}", t0.elapsed());
}
