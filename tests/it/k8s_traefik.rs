//! S3's route changes through real Traefik v3.6 on a real API server and real pods, as
//! two systems of one `ingressbench run`: `traefik` (its Ingress provider, each change
//! a Middleware of traefik.io/v1alpha1 the Ingress names) and `gateway-api` (its
//! Gateway API provider, each change an HTTPRoute filter), one Traefik serving both on
//! one entry point. A prober beside the run asks Traefik every 20 ms what a request
//! gets, so each change is seen in traffic, not only in the API.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_pods::PodRunner;
use crate::common::k8s_traefik::{Providers, Traefik, ENTRY_POINT};
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What one request through Traefik got, as S3's route names (or what went wrong).
fn probe(addr: SocketAddr) -> String {
    let get = || -> std::io::Result<String> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        s.write_all(b"GET /probe HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    let text = match get() {
        Ok(t) => t,
        Err(e) => return format!("error: {}", e.kind()),
    };
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let head = head.to_ascii_lowercase();
    let status = head.split(' ').nth(1).unwrap_or("?");
    if status != "200" {
        return format!("status {status}");
    }
    let mut seen = Vec::new();
    if head.contains("\r\naccess-control-allow-origin: *") {
        seen.push("cors");
    }
    if head.contains("\r\nx-custom: 1") {
        seen.push("header");
    }
    // The built-in backend echoes the URI it got.
    match body.lines().find_map(|l| l.strip_prefix("uri: ")) {
        Some("/probe") => {}
        Some(u) if u.starts_with("/rewritten/probe") => seen.push("rewrite"),
        other => return format!("uri {other:?}"),
    }
    if seen.is_empty() {
        "base".into()
    } else {
        seen.join("+")
    }
}

/// Whether `want` occurs in `seen` in order (not necessarily next to each other).
fn in_order(seen: &[String], want: &[&str]) -> usize {
    let mut it = seen.iter();
    let mut n = 0;
    'outer: loop {
        for w in want {
            if !it.by_ref().any(|s| s == w) {
                break 'outer;
            }
        }
        n += 1;
    }
    n
}

#[test]
fn s3_route_changes_reach_traffic_through_traefiks_ingress_and_gateway_providers() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let mut traefik = Traefik::start(
        &cluster,
        Providers {
            ingress: true,
            gateway: true,
            ingress_nginx: false,
        },
    );
    traefik.gateway(&cluster, "ib-gateway", "traefik");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = dir.path().join("s.yaml");
    let url = traefik.url();
    std::fs::write(
        &scn,
        format!(
            "name: k8s-traefik-routes\nplatform: kubernetes\nsystems: [traefik, gateway-api]\n\
             kubernetes:\n  kubeconfig: {}\n  gateway: ib-gateway/traefik\n\
             \x20 urls: {{traefik: \"{url}\", gateway-api: \"{url}\"}}\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             tls:\n  enabled: false\n\
             load:\n  rate: 100\n  connections: 10\n  duration: 15s\n  warmup: 2s\n\
             changes:\n  - wait: 1s\n  - scale: 3\n  - wait: 2s\n\
             \x20 - route: cors\n  - wait: 2s\n  - route: header\n  - wait: 2s\n\
             \x20 - route: rewrite\n  - wait: 2s\n  - route: base\n",
            cluster.kubeconfig().display()
        ),
    )
    .unwrap();

    // The run and, beside it in the cluster's namespace, the prober.
    let stop = AtomicBool::new(false);
    let addr: SocketAddr = ENTRY_POINT.parse().unwrap();
    let (done, seen) = std::thread::scope(|s| {
        let prober = s.spawn(|| {
            cluster.inside(|| {
                let mut seen: Vec<String> = Vec::new();
                let mut log = Vec::new();
                let t = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let got = probe(addr);
                    if seen.last() != Some(&got) {
                        log.push(format!("{:>6.0} ms {got}", t.elapsed().as_secs_f64() * 1e3));
                        seen.push(got);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                eprintln!("prober saw:\n{}", log.join("\n"));
                seen
            })
        });
        let mut run = cluster.ingressbench();
        run.arg("run").arg(&scn).arg("--out").arg(&out);
        let t = Instant::now();
        let done = Proc::spawn_group("run", &mut run, dir.path()).finish(Duration::from_secs(240));
        eprintln!("k8s traefik run took {:.1?}\n{}", t.elapsed(), done.stdout);
        stop.store(true, Ordering::Relaxed);
        (done, prober.join().unwrap())
    });
    assert!(
        done.success(),
        "{}\n{}\ntraefik:\n{}",
        done.stdout,
        done.stderr,
        traefik.log()
    );
    assert!(traefik.alive(), "Traefik died:\n{}", traefik.log());
    // What Traefik complained of while routes changed under it (for the record).
    let log = traefik.log();
    let complaints: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" ERR ") || l.contains(" WRN "))
        .collect();
    eprintln!(
        "traefik: {} ERR/WRN lines\n{}",
        complaints.len(),
        complaints.join("\n")
    );

    // Each system in turn went base -> cors -> header -> rewrite -> base in traffic.
    let s3 = ["base", "cors", "header", "rewrite", "base"];
    assert_eq!(
        in_order(&seen, &s3),
        2,
        "two passes of S3's routes: {seen:?}"
    );
    assert!(
        seen.iter().all(|s| s3.contains(&s.as_str())
            || s.starts_with("status 404")
            || s.starts_with("error")),
        "nothing but S3's routes (and no route between the systems): {seen:?}"
    );

    let records = pods.records();
    for system in ["traefik", "gateway-api"] {
        let r = read_json(&out.join(system).join("result.json"));
        let q = &r["requests"];
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        assert!(n(&q["completed"]) > 1000, "{system}: {q}");
        assert!(
            n(&q["failed"]) * 20 < n(&q["intended"]),
            "{system}: {} failed: {}",
            n(&q["failed"]),
            r["errors"]
        );
        // Every route change asked for and applied, with how long applying took.
        let events = r["lab"]["events"].as_array().unwrap();
        for route in ["cors", "header", "rewrite", "base"] {
            let find = |kind: &str| {
                events
                    .iter()
                    .find(|e| e["kind"] == kind && e["detail"] == route)
                    .unwrap_or_else(|| panic!("{system}: no {kind} {route}: {events:?}"))
            };
            find("route_requested");
            let took = find("route_applied")["took_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{system}: route_applied {route} without took_ms"));
            eprintln!("{system}: route {route} applied in {took:.0} ms");
            assert!(took < 10_000.0, "{system} {route}: {took} ms");
        }
        assert!(
            !events.iter().any(|e| e["kind"] == "change_failed"),
            "{system}: {events:?}"
        );
        // The report's side by side: when Traefik said the route was in, and when the
        // run's own traffic showed it.
        let changes = r["lab"]["route_propagation"]["changes"]
            .as_array()
            .unwrap_or_else(|| panic!("{system}: no route propagation: {}", r["lab"]));
        assert!(changes.len() >= 4, "{system}: {changes:?}");
        for c in changes {
            let seen = c["seen_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{system}: a route never seen in traffic: {c}"));
            eprintln!(
                "{system}: route {}: applied {} ms, seen in traffic {seen:.0} ms after the request",
                c["route"], c["applied_ms"]
            );
            assert!(c["applied_ms"].as_f64().is_some(), "{system}: {c}");
            assert!(seen < 10_000.0, "{system}: {c}");
        }
        // Every pod the run's namespace had served, by its name.
        let backends = r["backends"].as_object().unwrap();
        let ns_suffix = format!("-{system}");
        let mine: Vec<_> = records
            .iter()
            .filter(|p| {
                p.namespace.starts_with("ingressbench-") && p.namespace.ends_with(&ns_suffix)
            })
            .map(|p| p.name.clone())
            .collect();
        assert_eq!(mine.len(), 3, "{system}: pods {mine:?}");
        for p in &mine {
            assert!(
                backends.contains_key(p),
                "{system}: {p} never answered: {backends:?}"
            );
        }
        assert_eq!(backends.len(), 3, "{system}: {backends:?}");
    }

    // Issue 28: 100 routes over 10 hosts through both providers (an Ingress and a
    // Middleware per route; an HTTPRoute per route), one added and removed under load.
    crate::common::k8s::run_route_set(
        &cluster,
        &["traefik", "gateway-api"],
        &format!("{{traefik: \"{url}\", gateway-api: \"{url}\"}}"),
        "ib-gateway/traefik",
        &format!("{{traefik: \"--entrypoints.web.address={ENTRY_POINT}\"}}"),
        crate::common::k8s::TRAEFIK_ROUTES,
    );

    // Issue 29: gRPC through Traefik's Gateway API provider, by a GRPCRoute (until
    // 2026-12-07 the run wrote an HTTPRoute: docs/http2.md). Measured here: every
    // call answered until the `header` change gives the GRPCRoute a
    // ResponseHeaderModifier; from then on Traefik 3.6.12 ends each call without a
    // grpc-status (278 of 278 after the change in the first run). What the test
    // holds: a GRPCRoute routed it, nothing failed before the change (the first
    // second aside, where the HTTPRoute runs met Traefik's HTTP/1.1 answers), and
    // every failure is a call ended without a grpc-status.
    let dir = tempfile::tempdir().unwrap();
    let (done, out) = crate::common::k8s::grpc_run(
        &cluster,
        dir.path(),
        "gateway-api",
        &url,
        "ib-gateway/traefik",
    );
    assert!(
        done.success(),
        "{}\n{}\n{}",
        done.stdout,
        done.stderr,
        traefik.log()
    );
    let r = read_json(&out.join("gateway-api/result.json"));
    assert_eq!(
        r["lab"]["versions"]["routes"], "GRPCRoute ib-route",
        "{}",
        r["lab"]
    );
    let change_s = r["lab"]["route_propagation"]["changes"][0]["at_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("{}", r["lab"]["route_propagation"]))
        / 1000.0;
    let per_second: Vec<u64> = r["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["errors"].as_u64().unwrap_or(0))
        .collect();
    eprintln!("traefik: gRPC calls failed by second {per_second:?}, the header change at {change_s:.1} s: {}", r["errors"]);
    for (i, e) in per_second.iter().enumerate().skip(1) {
        assert!(
            *e == 0 || (i + 1) as f64 > change_s,
            "traefik: calls failed in second {i}, before the change at {change_s} s: {per_second:?}"
        );
    }
    let errors = &r["errors"];
    let failed: u64 = per_second.iter().sum();
    assert_eq!(errors["grpc"].as_u64().unwrap_or(0), failed, "{errors}");
    if failed > 0 {
        assert_eq!(
            errors["first"]["grpc"], "the call ended without a grpc-status",
            "{errors}"
        );
    }

    // Nothing of the run stays: its namespaces, their pods' network namespaces.
    let t = Instant::now();
    loop {
        let (ok, list) = cluster.our_namespaces();
        if ok && !list.contains("namespace/") && pods.live_netns().is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "left: {list} {:?}",
            pods.live_netns()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (ok, left) = cluster.kubectl(&[
        "get",
        "ingress,middlewares.traefik.io,httproutes,grpcroutes",
        "-A",
        "-o",
        "name",
    ]);
    assert!(ok && left.trim().is_empty(), "routing objects left: {left}");
}
