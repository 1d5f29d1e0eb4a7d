//! Lifecycle changes under load on every local profile: the proxy restarted the
//! way its controller restarts it, the certificate rotated the way its controller
//! rotates it, envoy-xds's control plane restarted, and a restart that fails leaves
//! nothing behind.

use crate::common::json::{f, u};
use crate::common::scenario_run::{
    assert_balanced, assert_nothing_left, events, finish, result, start,
};
use crate::common::{exclusive, processes_with, read_json, shared};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// A scenario of `systems` at `rate` req/s over TLS 1.3 with an
/// ECDSA key, each request on a new connection: every request is a handshake, so a
/// listener closed for a moment shows as refused connections, and a new
/// certificate as soon as the proxy serves it.
fn lifecycle_scenario(
    dir: &Path,
    systems: &str,
    rate: u32,
    duration: &str,
    changes: &str,
) -> std::path::PathBuf {
    let text = format!(
        "name: lifecycle\nsystems: {systems}\nbackends:\n  replicas: 2\n  drain_timeout: 1s\n\
         tls:\n  version: \"1.3\"\n  key: ecdsa-p256\nload:\n  rate: {rate}\n  connections: 20\n  \
         new_connection: true\n  duration: {duration}\nchanges:\n{changes}"
    );
    let p = dir.join("lifecycle.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The window a change of `kind` opened (the first).
fn window<'a>(r: &'a Value, kind: &str) -> &'a Value {
    r["lab"]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["change"].as_str().unwrap().starts_with(kind))
        .unwrap_or_else(|| panic!("no {kind} window: {}", r["lab"]["windows"]))
}

fn errors_of(w: &Value) -> u64 {
    w["errors"]
        .as_object()
        .map_or(0, |m| m.values().map(u).sum())
}

/// Each profile's proxy restarted its own way and its certificate rotated its own
/// way, under one run. A profile that promises a seamless restart (HAProxy's
/// listeners handed over with `-x`, Envoy's hot restart) loses no request; one that
/// stops and starts (nginx, Caddy, a cold Envoy) may refuse connections while its
/// listener is closed, and the run says how many. Every rotation is seen by the
/// load: new handshakes are served with the new serial, never before it was asked
/// for, and soon after the profile said it was done.
#[test]
fn every_profile_restarts_its_proxy_and_rotates_its_certificate_its_own_way() {
    // Alone: 500 handshakes a second through each proxy in turn would slow the
    // controllers of the Kubernetes tests beside it past their own bounds.
    let _alone = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let systems = format!("[{}]", lab::profiles::names().join(", "));
    let scn = lifecycle_scenario(
        dir.path(),
        &systems,
        500,
        // Room for both changes when a restart is slow: a rotation the run's end
        // cuts off has no window to read.
        "4s",
        "  - wait: 600ms\n  - restart: proxy\n  - wait: 900ms\n  - rotate: certificate\n",
    );
    let (code, text) = finish(start(&scn, &out), Duration::from_secs(180));
    assert_eq!(code, 0, "{text}");
    for system in lab::profiles::names() {
        let driver = lab::driver_for(system).unwrap();
        let promise = driver.restart_kind();
        let r = result(&out, system);
        assert_balanced(&r);
        let ev = events(&r);
        assert!(
            !ev.iter()
                .any(|(_, k, _)| k == "change_failed" || k == "proxy_died"),
            "{system}: {ev:?}"
        );
        let restart = ev
            .iter()
            .find(|(_, k, _)| k == "restart_requested")
            .unwrap_or_else(|| panic!("{system}: {ev:?}"));
        assert_eq!(
            restart.2,
            format!(
                "proxy ({}{})",
                promise.how,
                if promise.seamless { ", seamless" } else { "" }
            ),
            "{system}"
        );
        assert!(
            ev.iter().any(|(_, k, _)| k == "restart_done"),
            "{system}: {ev:?}"
        );
        let w = window(&r, "restart");
        let lost = errors_of(w);
        eprintln!(
            "lifecycle: {system}: restart ({}): {lost} of {} failed: {}; p99 {} ms, max {} ms",
            promise.how,
            u(&w["completed"]) + lost,
            w["errors"],
            w["p99_ms"],
            w["max_ms"]
        );
        if promise.seamless {
            assert_eq!(
                lost, 0,
                "{system} promises a seamless restart: {}",
                w["errors"]
            );
        }
        // The whole run is not lost to a restart, seamless or not.
        assert!(
            u(&w["completed"]) > 100,
            "{system}: only {} completed after the restart",
            w["completed"]
        );
        // The rotation, as the handshakes saw it.
        let rot = &r["lab"]["rotations"][0];
        let (old, new) = (
            rot["serial_old"].as_str().unwrap(),
            rot["serial_new"].as_str().unwrap(),
        );
        assert!(!old.is_empty() && old != new, "{system}: {rot}");
        let certs = &r["tls"]["certificates"];
        assert!(u(&certs[old]["handshakes"]) > 0, "{system}: {certs}");
        assert!(
            u(&certs[new]["handshakes"]) > 0,
            "{system}: the new certificate was never served: {certs}"
        );
        // Never served before it was asked for.
        let asked = f(&rot["at_ms"]);
        assert!(
            f(&certs[new]["first_ms"]) >= asked,
            "{system}: the new certificate served before the rotation at {asked}: {certs}"
        );
        let seen = f(&rot["new_seen_ms"]);
        let applied = f(&rot["applied_ms"]);
        // Loose bounds: the test shares the machine; what it checks is the order.
        assert!(
            seen < applied + 3000.0,
            "{system}: new certificate seen {seen} ms after the request, applied at {applied}"
        );
        // Served with the old one only before the new one took over (a draining
        // worker may finish a handshake it had accepted).
        assert!(
            f(&certs[old]["first_ms"]) < f(&certs[new]["first_ms"]),
            "{system}: {certs}"
        );
        if let Some(last_old) = rot["last_old_ms"].as_f64() {
            assert!(last_old < applied + 3000.0, "{system}: {rot}");
        }
        eprintln!(
            "lifecycle: {system}: rotation applied in {applied:.1} ms, new certificate seen at {seen:.1} ms, last old at {}, {} errors ({} tls)",
            rot["last_old_ms"], rot["errors"], rot["tls_errors"]
        );
    }
    assert_nothing_left(dir.path());
}

/// envoy-xds's ADS server restarted under load: Envoy keeps serving its last
/// configuration (no request lost), and a route change asked for right after the
/// restart, before Envoy has reconnected, reaches traffic once it has resynced.
#[test]
fn envoy_keeps_serving_while_its_control_plane_restarts_and_resyncs() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = lifecycle_scenario(
        dir.path(),
        "[envoy-xds]",
        200,
        "4s",
        "  - wait: 1s\n  - restart: controller\n  - route: header\n",
    );
    let (code, text) = finish(start(&scn, &out), Duration::from_secs(60));
    assert_eq!(code, 0, "{text}");
    let r = result(&out, "envoy-xds");
    assert_balanced(&r);
    let ev = events(&r);
    assert!(!ev.iter().any(|(_, k, _)| k == "change_failed"), "{ev:?}");
    let done = ev
        .iter()
        .find(|(_, k, d)| k == "restart_done" && d == "controller")
        .unwrap_or_else(|| panic!("{ev:?}"));
    assert_eq!(r["requests"]["failed"], 0, "{}", r["errors"]);
    let change = &r["lab"]["route_propagation"]["changes"][0];
    assert_eq!(change["route"], "header");
    let seen = f(&change["seen_ms"]);
    eprintln!(
        "lifecycle: envoy-xds: controller restart took {:?} ms; the route change after it was applied at {:?} ms, seen at {seen:.1} ms",
        done.0, change["applied_ms"]
    );
    assert!(seen < 3000.0, "{change}");
    assert_nothing_left(dir.path());
}

/// A restart whose new proxy does not come back (its configuration file broken
/// under it): the failure is an event of the run, the proxy's processes are gone
/// while the load still runs, the requests after it fail and are counted, and the
/// run still writes its result.
#[test]
fn a_restart_that_fails_is_reported_and_leaves_nothing_behind() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = lifecycle_scenario(
        dir.path(),
        "[nginx-reload]",
        200,
        "4s",
        "  - wait: 1500ms\n  - restart: proxy\n",
    );
    let mut run = start(&scn, &out);
    let t = Instant::now();
    while !run.stderr_so_far().contains("load running") {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{}",
            run.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The running master has read it already; the restarted one cannot.
    std::fs::write(out.join("nginx-reload").join("nginx.conf"), "events {\n").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let scope = dir.path().display().to_string();
    let nginx: Vec<_> = processes_with(&scope)
        .into_iter()
        .filter(|(_, cmd)| cmd.starts_with("nginx"))
        .collect();
    assert!(
        run.alive() && nginx.is_empty(),
        "while the load still runs, the failed restart left {nginx:?}"
    );
    let (code, text) = finish(run, Duration::from_secs(60));
    let r = read_json(&out.join("nginx-reload").join("result.json"));
    assert_balanced(&r);
    let ev = events(&r);
    let failed = ev
        .iter()
        .find(|(_, k, d)| k == "change_failed" && d.starts_with("proxy (stop and start)"))
        .unwrap_or_else(|| panic!("{ev:?}"));
    assert!(failed.2.contains("nginx"), "{failed:?}");
    assert_eq!(r["lab"]["proxy_died"], true);
    assert!(u(&r["requests"]["failed"]) > 50, "{}", r["requests"]);
    // Reported as the run ends, beside the result (the run itself completed).
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("WARNING: a change failed at ")
            && text.contains("s: proxy (stop and start): nginx-reload")
            && text.contains("WARNING: the proxy died during the run"),
        "{text}"
    );
    eprintln!("lifecycle: failed restart: exit {code}, {}", failed.2);
    assert_nothing_left(dir.path());
}
