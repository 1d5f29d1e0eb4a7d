//! Study S3's churn on `platform: kubernetes` through a real Gateway API controller:
//! Contour v1.33 with Envoy 1.40 ([`Contour`]) serving a Gateway, the run's HTTPRoute
//! attached to it, pods made real by the harness. `ingressbench run` runs inside the
//! cluster's network namespace; beside it a prober (on a thread in that namespace)
//! asks Envoy every 20 ms what the route does now, so the test sees each route change
//! reach traffic and can set that moment beside the one the controller reported.

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_contour::{Contour, CONTOUR_NS, DATA_ADDR};
use crate::common::k8s_pods::PodRunner;
use crate::common::proc::Proc;
use crate::common::{processes_with, read_json, shared, BIN};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The route in force, as one response shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shows {
    /// No CORS headers, no `x-custom`, the path as sent.
    Base,
    /// `x-custom: 1`.
    Header,
    /// `Access-Control-Allow-Origin: *`.
    Cors,
    /// The backend saw `/rewritten/probe`.
    Rewrite,
}

/// The path the prober asks for.
const PROBE_PATH: &str = "/probe";

/// One `GET /probe` through Envoy: what the route did, or `None` when there was no
/// answer from a backend (no listener yet, no route, a 5xx).
fn probe(addr: SocketAddr) -> Option<(Shows, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(
        format!("GET {PROBE_PATH} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    if lines.next()?.split(' ').nth(1)? != "200" {
        return None;
    }
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let has = |k: &str, v: &str| headers.iter().any(|(hk, hv)| hk == k && hv == v);
    let uri = body
        .lines()
        .find_map(|l| l.strip_prefix("uri: "))
        .unwrap_or("")
        .to_string();
    let shows = if uri.starts_with("/rewritten") {
        Shows::Rewrite
    } else if has("access-control-allow-origin", "*") {
        Shows::Cors
    } else if has("x-custom", "1") {
        Shows::Header
    } else {
        Shows::Base
    };
    Some((shows, uri))
}

fn unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (a result's `started_at`) as Unix milliseconds.
fn parse_rfc3339_ms(s: &str) -> f64 {
    let n = |a: usize, b: usize| -> i64 { s[a..b].parse().unwrap_or_else(|_| panic!("{s}")) };
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    let secs = n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    let ms = n(20, 23);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 86_400 + secs) * 1000 + ms) as f64
}

#[test]
fn parse_rfc3339_ms_inverts_the_results_format() {
    for ns in [0u128, 951_782_400_000_000_000, 1_795_317_845_123_000_000] {
        let text = results::time::rfc3339(ns);
        assert_eq!(parse_rfc3339_ms(&text), (ns / 1_000_000) as f64, "{text}");
    }
}

#[test]
fn s3_route_and_scale_steps_run_through_contour_and_envoy_on_a_real_api_server() {
    let _turn = shared();
    let t0 = Instant::now();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    // Contour's controller as the pod of a Deployment in its own namespace, which
    // the run restarts; Envoy keeps serving through it. The route asked for as the
    // new Contour starts reaches Envoy only once Envoy has reconnected to it: 8 s
    // to show (3 s were once not enough on a busy machine, the change Accepted
    // 154 ms after it was asked).
    let contour = Contour::start_as_pods(&cluster);
    eprintln!(
        "contour: cluster up in {:.1?}, Contour and Envoy ready {:.1?} later",
        t0.elapsed() - contour.took,
        contour.took
    );
    let dir = tempfile::tempdir().unwrap();
    let state = cluster.state_dir().to_path_buf();

    let out = dir.path().join("out");
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: k8s-contour\nplatform: kubernetes\nsystems: [contour]\n\
             kubernetes:\n  kubeconfig: {}\n  gateway: {}\n  urls: {{contour: \"{}\"}}\n\
             \x20 workloads: {{contour: {{namespace: {CONTOUR_NS}, controller: app.kubernetes.io/name=contour}}}}\n\
             \x20 image: \"ingressbench:test\"\n\
             backends:\n  replicas: 2\n  drain_timeout: 2s\n\
             sessions: {{websocket: 20, rate: 50}}\n\
             tls:\n  enabled: false\n\
             load:\n  rate: 100\n  connections: 10\n  duration: 27s\n  warmup: 3s\n\
             changes:\n  - wait: 2s\n  - scale: 3\n  - wait: 4s\n  - scale: 2\n  - wait: 2s\n\
             \x20 - route: header\n  - wait: 3s\n  - route: cors\n  - wait: 3s\n\
             \x20 - restart: controller\n  - route: rewrite\n  - wait: 8s\n  - route: base\n",
            state.join("kubeconfig").display(),
            contour.gateway(),
            contour.url(),
        ),
    )
    .unwrap();
    let mut run = cluster.ingressbench();
    run.arg("run").arg(&scn).arg("--out").arg(&out);

    // The run, and the prober beside it until the run ends.
    let stop = AtomicBool::new(false);
    let addr: SocketAddr = DATA_ADDR.parse().unwrap();
    let t = Instant::now();
    let (done, seen) = std::thread::scope(|s| {
        let prober = s.spawn(|| {
            cluster.inside(|| {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Some((shows, uri)) = probe(addr) {
                        seen.push((unix_ms(), shows, uri));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                seen
            })
        });
        let done = Proc::spawn_group("run", &mut run, dir.path()).finish(Duration::from_secs(180));
        stop.store(true, Ordering::Relaxed);
        (done, prober.join().unwrap())
    });
    eprintln!("k8s contour run took {:.1?}\n{}", t.elapsed(), done.stdout);
    assert!(
        done.success(),
        "{}\n{}\n{}",
        done.stdout,
        done.stderr,
        contour.logs()
    );

    let r = read_json(&out.join("contour/result.json"));
    let q = &r["requests"];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    assert_eq!(
        n(&q["intended"]),
        n(&q["completed"]) + n(&q["failed"]) + n(&q["not_sent"]) + n(&q["unfinished"])
    );
    assert!(n(&q["completed"]) > 1500, "{q}");
    let errors = n(&q["failed"]);
    assert!(
        errors * 50 < n(&q["intended"]),
        "{errors} failed: {}",
        r["errors"]
    );

    // Every pod served traffic through Envoy, the scaled-up one among them.
    let backends = r["backends"].as_object().unwrap();
    assert_eq!(backends.len(), 3, "{backends:?}");
    assert!(
        backends.keys().all(|k| k.starts_with("ib-backend-")),
        "{backends:?}"
    );
    let added = &r["lab"]["propagation"]["added"][0];
    let prop = added["propagation_ms"]
        .as_f64()
        .expect("the new pod got traffic");
    eprintln!("contour: new pod first response {prop:.0} ms after ready in the EndpointSlice");
    assert!(prop < 10_000.0, "{added}");

    // Each route step: requested, then applied once Contour reported the HTTPRoute
    // Accepted for its generation.
    let events = r["lab"]["events"].as_array().unwrap();
    // Issue 30: Contour's pod deleted and replaced; Envoy served on its last
    // configuration meanwhile (no request of the restart's window failed), and the
    // rewrite asked for as the new Contour started is checked below like the others.
    let restarted = events
        .iter()
        .find(|e| e["kind"] == "restart_done" && e["detail"] == "controller")
        .unwrap_or_else(|| panic!("no restart_done: {events:?}"));
    assert!(
        events.iter().any(|e| e["kind"] == "pod_replaced"
            && e["detail"].as_str().unwrap().starts_with("contour-")),
        "{events:?}"
    );
    let w = r["lab"]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["change"] == "restart controller")
        .unwrap();
    eprintln!(
        "contour: controller restarted in {} ms; its window: {} completed, errors {}",
        restarted["took_ms"], w["completed"], w["errors"]
    );
    assert_eq!(w["errors"], serde_json::json!({}), "{w}");
    // The sessions beside the load (issue 45), through Contour's Envoy (Gateway API
    // routes upgrade WebSockets by default since Contour 1.26) to the pods' own
    // backend: the controller's restart leaves Envoy and its sessions alone.
    let s: results::sessions::Sessions =
        serde_json::from_value(r["sessions"].clone()).expect("the sessions part");
    eprintln!("contour: {}", report::text::sessions_summary(&s));
    for w in r["lab"]["windows"].as_array().unwrap() {
        eprintln!(
            "contour: window {}: sessions {}",
            w["change"], w["sessions"]
        );
    }
    assert!(s.messages.balanced(), "{:?}", s.messages);
    assert_eq!(s.held, 20, "every session open again at the end: {s:?}");
    assert!(
        s.backends.keys().all(|k| k.starts_with("ib-backend-")),
        "each 101 came from a pod: {:?}",
        s.backends
    );
    assert!(
        w["sessions"].is_object()
            && w["sessions"]["ends"]
                .as_object()
                .is_none_or(|e| e.is_empty()),
        "the controller's restart ended no session: {w}"
    );
    let find = |kind: &str, detail: &str| {
        events
            .iter()
            .find(|e| e["kind"] == kind && e["detail"].as_str() == Some(detail))
            .unwrap_or_else(|| panic!("no {kind} {detail}: {events:?}"))
    };
    let start_ms = parse_rfc3339_ms(r["started_at"].as_str().unwrap());
    let mut last_seen = 0.0;
    for (route, shows) in [
        ("header", Shows::Header),
        ("cors", Shows::Cors),
        ("rewrite", Shows::Rewrite),
        ("base", Shows::Base),
    ] {
        let asked = find("route_requested", route)["t_ms"].as_f64().unwrap();
        let applied = find("route_applied", route);
        let settle = applied["took_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("route_applied {route} without took_ms: {applied}"));
        assert!((0.0..10_000.0).contains(&settle), "{applied}");
        // The first response showing the route after it was asked for.
        let asked_unix = start_ms + asked;
        let first = seen
            .iter()
            .find(|(at, s, _)| *at >= asked_unix && *s == shows)
            .unwrap_or_else(|| panic!("route {route} never showed in a response: {seen:?}"));
        let traffic = first.0 - asked_unix;
        eprintln!(
            "contour: route {route}: HTTPRoute Accepted {settle:.0} ms after the request, \
             first response showing it {traffic:.0} ms after (uri {})",
            first.2
        );
        // The run's own load saw the same: its route propagation says when the
        // controller reported it done and when traffic showed it, beside each other.
        let change = r["lab"]["route_propagation"]["changes"]
            .as_array()
            .unwrap_or_else(|| panic!("no route propagation: {}", r["lab"]))
            .iter()
            .find(|c| c["route"] == route && (c["at_ms"].as_f64().unwrap() - asked).abs() < 1.0)
            .unwrap_or_else(|| panic!("no route propagation entry for {route}"))
            .clone();
        let by_load = change["seen_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("the load never saw {route}: {change}"));
        eprintln!(
            "contour: route {route}: ingressbench's load saw it {by_load:.0} ms after the request (applied {} ms)",
            change["applied_ms"]
        );
        assert!(change["applied_ms"].as_f64().is_some(), "{change}");
        assert!(
            (by_load - traffic).abs() < 500.0,
            "route {route}: the load saw it at {by_load} ms, the prober at {traffic} ms"
        );
        assert!(traffic < 10_000.0, "route {route}: {traffic} ms");
        assert!(
            first.0 >= last_seen,
            "route {route} showed before the one before it"
        );
        last_seen = first.0;
        if shows == Shows::Rewrite {
            assert_eq!(first.2, format!("/rewritten{PROBE_PATH}"));
        }
    }
    // The last responses are the base route's.
    let tail = seen.last().expect("the prober saw responses");
    assert_eq!(tail.1, Shows::Base, "{tail:?}");

    // Issue 28: 200 HTTPRoutes over 10 hosts through the same Contour, a mix over
    // them, one route added and removed under it.
    crate::common::k8s::run_route_set(
        &cluster,
        &["contour"],
        &format!("{{contour: \"{}\"}}", contour.url()),
        &contour.gateway(),
        &format!("{{contour: \"{}\"}}", contour.dir_text()),
        crate::common::k8s::ROUTES,
    );

    // Issue 29: gRPC through the same Contour, a GRPCRoute to the pods (which
    // Envoy reaches over h2c), the load h2c to Envoy's plain listener; a scale step
    // and a header change under it.
    let r = crate::common::k8s::run_grpc(
        &cluster,
        "contour",
        &contour.url(),
        &contour.gateway(),
        false,
    );
    assert!(r.is_some(), "contour: {}", contour.logs());

    // The run's namespace goes when it ends.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    // And nothing else is left: Contour, Envoy, the pods, the cluster.
    let marker = contour.dir_text();
    drop(contour);
    assert!(
        processes_with(&marker).is_empty(),
        "{:?}",
        processes_with(&marker)
    );
    drop(pods);
    let netns = cluster.netns().to_string();
    let state_text = state.display().to_string();
    drop(cluster);
    assert!(
        !Path::new("/run/netns").join(&netns).exists(),
        "{netns} left"
    );
    assert!(
        processes_with(&state_text).is_empty(),
        "{:?}",
        processes_with(&state_text)
    );
}
