//! End-to-end runs of scenarios against every real proxy: the churn takes effect,
//! the event log agrees with what the load saw, and nothing is left behind however
//! the run ends.

use crate::common::json::{f, u};
use crate::common::proc::Proc;
use crate::common::scenario_run::{
    assert_balanced, assert_nothing_left, events, finish, result, start, start_with,
};
use crate::common::{
    bin, exclusive, in_our_network_namespace, processes_with, shared, ERROR_KINDS,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Every registered profile, as a scenario's `systems` list.
fn all() -> String {
    format!("[{}]", lab::profiles::names().join(", "))
}

/// Envoy's hot-restart shared memory regions now on the machine.
fn envoy_shared_memory() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("envoy_shared_memory_"))
        .collect()
}

/// The regions of [`envoy_shared_memory`] some live process has mapped, with the
/// command lines of the processes that map them.
fn mapped_envoy_shared_memory() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(maps) = std::fs::read_to_string(e.path().join("maps")) else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        for region in maps
            .lines()
            .filter_map(|l| l.split_once("/dev/shm/").map(|(_, n)| n.trim()))
            .filter(|n| n.starts_with("envoy_shared_memory_"))
        {
            out.push((region.to_string(), cmd.clone()));
        }
    }
    out
}

/// Regions made since `before` that no live process maps and that stay: left behind
/// by a run that has ended. Tests run beside this one may start Envoys of their own:
/// their regions are mapped while they run, and removed by their own run as it ends
/// (unmapped for a moment before that), so a region is counted only if it is still
/// there, unmapped, after 5 s. A leaked region is never removed by anyone: it stays.
fn envoy_shared_memory_left(before: &std::collections::BTreeSet<String>) -> Vec<String> {
    let unmapped_new = || -> Vec<String> {
        let mapped: std::collections::BTreeSet<String> = mapped_envoy_shared_memory()
            .into_iter()
            .map(|(region, _)| region)
            .collect();
        envoy_shared_memory()
            .difference(before)
            .filter(|r| !mapped.contains(*r))
            .cloned()
            .collect()
    };
    let t = Instant::now();
    loop {
        let left = unmapped_new();
        if left.is_empty() || t.elapsed() > Duration::from_secs(5) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn scenario(dir: &Path, systems: &str, duration: &str, changes: &str) -> PathBuf {
    let text = format!(
        "name: t\nsystems: {systems}\nbackends:\n  replicas: 2\n  drain_timeout: 1s\n\
         tls:\n  version: \"1.3\"\nload:\n  rate: 200\n  connections: 10\n  duration: {duration}\n\
         changes:\n{changes}"
    );
    let p = dir.join("s.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

fn event_time(ev: &[(f64, String, String)], kind: &str, detail_has: &str) -> f64 {
    ev.iter()
        .find(|(_, k, d)| k == kind && d.contains(detail_has))
        .unwrap_or_else(|| panic!("no {kind} event with '{detail_has}' in {ev:?}"))
        .0
}

#[test]
fn every_profile_scales_up_and_down_and_changes_routes() {
    let _alone = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = scenario(
        dir.path(),
        &all(),
        // The steps' own times add to the waits (one profile's changes took 0.5-0.7 s
        // each in a rehearsal, and its last change fell after 5 s): 7 s leaves room.
        "7s",
        "  - wait: 500ms\n  - scale: 3\n  - wait: 1500ms\n  - scale: 2\n  - wait: 700ms\n  - route: header\n  - wait: 700ms\n  - route: base\n",
    );
    let (code, text) = finish(start(&scn, &out), Duration::from_secs(180));
    assert_eq!(code, 0, "{text}");
    for system in lab::profiles::names() {
        let r = result(&out, system);
        assert_eq!(r["schema"], "ingressbench/result/v1");
        assert_eq!(r["partial"], false, "{system}");
        assert_balanced(&r);
        assert_eq!(r["lab"]["system"], system);
        assert_eq!(r["lab"]["proxy_died"], false, "{system}");
        let ev = events(&r);
        // Each change is logged when asked for and when it took effect, in order.
        let ready = event_time(&ev, "backend_ready", "b3");
        let applied = ev
            .iter()
            .find(|(t, k, d)| k == "endpoints_applied" && d.contains("b3") && *t >= ready)
            .unwrap_or_else(|| panic!("{system}: b3 never applied: {ev:?}"))
            .0;
        let stopping = event_time(&ev, "backend_stopping", "b3");
        assert!(ready < applied && applied < stopping, "{system}: {ev:?}");
        event_time(&ev, "route_applied", "header");
        event_time(&ev, "route_applied", "base");
        assert!(
            !ev.iter().any(|(_, k, _)| k == "change_failed"),
            "{system}: {ev:?}"
        );
        // The new backend really received traffic, only after it was ready, and
        // stopped receiving it once removed.
        let seen = &r["backends_seen"]["b3"];
        assert!(u(&r["backends"]["b3"]) > 0, "{system}: b3 got no traffic");
        let (first, last) = (f(&seen[0]), f(&seen[1]));
        assert!(
            first >= ready,
            "{system}: b3 answered at {first} before it was ready at {ready}"
        );
        assert!(
            last <= stopping + 1500.0,
            "{system}: b3 answered at {last}, long after its stop at {stopping}"
        );
        assert!(u(&r["backends"]["b1"]) > 0 && u(&r["backends"]["b2"]) > 0);
        // Propagation is what the responses say.
        let added = &r["lab"]["propagation"]["added"][0];
        assert_eq!(added["backend"], "b3");
        let prop = f(&added["propagation_ms"]);
        assert!(
            (prop - (first - f(&added["at_ms"])).max(0.0)).abs() < 0.01,
            "{system}: {added}"
        );
        assert!(prop < 3000.0, "{system}: b3 took {prop} ms to get traffic");
        // The timeline adds up to the totals.
        let tl = r["timeline"].as_array().unwrap();
        let completed: u64 = tl.iter().map(|s| u(&s["completed"])).sum();
        assert_eq!(completed, u(&r["requests"]["completed"]), "{system}");
        let by_backend: u64 = tl
            .iter()
            .flat_map(|s| s["backends"].as_object().unwrap().values())
            .map(u)
            .sum();
        let all: u64 = r["backends"].as_object().unwrap().values().map(u).sum();
        assert_eq!(by_backend, all, "{system}");
        // A tenth of the requests is kept individually, each tied to its backend.
        let smp = &r["samples"];
        let n = smp["t_ms"].as_array().unwrap().len() as f64;
        let intended = u(&r["requests"]["intended"]) as f64;
        assert!(
            n > 0.04 * intended && n < 0.2 * intended,
            "{system}: {n} samples of {intended}"
        );
        let ids = smp["backend_ids"].as_array().unwrap().len() as i64;
        assert!(smp["backend"].as_array().unwrap().iter().all(|b| {
            let b = b.as_i64().unwrap();
            (-1..ids).contains(&b)
        }));
        // Each route change is seen in traffic, after it was asked for.
        let rp = &r["lab"]["route_propagation"]["changes"];
        let routes: Vec<&str> = rp
            .as_array()
            .unwrap_or_else(|| panic!("{system}: no route propagation: {}", r["lab"]))
            .iter()
            .map(|c| c["route"].as_str().unwrap())
            .collect();
        assert_eq!(routes, ["header", "base"], "{system}");
        for c in rp.as_array().unwrap() {
            let seen = c["seen_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{system}: a route never seen: {c}"));
            assert!(u(&c["responses_new"]) > 0, "{system}: {c}");
            assert!(
                seen > 0.0 && seen < f(&c["applied_ms"]) + 1000.0,
                "{system}: {c}"
            );
        }
        // What the proxy itself spent, read about once a second of the 5 s window.
        let res = &r["lab"]["resources"];
        let samples = res["samples"]
            .as_array()
            .unwrap_or_else(|| panic!("{system}: {res}"));
        assert!((3..=6).contains(&samples.len()), "{system}: {res}");
        assert!(
            samples.iter().all(|s| u(&s["processes"]) >= 1),
            "{system}: {res}"
        );
        assert!(f(&res["rss_max_mib"]) > 1.0, "{system}: {res}");
        assert!(
            f(&res["cpu_mean"]) > 0.0,
            "{system}: a proxy that served 200 req/s used no CPU: {res}"
        );
        // One impact window per change asked for inside the measured window.
        let windows = r["lab"]["windows"].as_array().unwrap();
        assert_eq!(windows.len(), 4, "{system}: {windows:?}");
        assert_windows_add_up(&r, system);
        // The proxy's config was kept.
        let kept = std::fs::read_dir(out.join(system))
            .unwrap()
            .flatten()
            .any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.ends_with(".conf")
                    || n.ends_with(".cfg")
                    || n.ends_with(".json") && n.starts_with("caddy")
                    || n == "envoy-config.json"
            });
        assert!(kept, "{system}: no proxy config in the results");
        assert!(out.join(system).join("events.json").is_file());
    }
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("haproxy-runtime") && summary.contains("Endpoint propagation"));
    assert!(summary.contains("Route propagation"), "{summary}");
    assert!(summary.contains("own CPU and memory"), "{summary}");
    assert!(out.join("scenario.yaml").is_file());
    assert_nothing_left(dir.path());
}

/// Route propagation has a known lower bound: with every backend answering 150 ms late,
/// no response to a request sent after a change can arrive sooner, whatever the proxy.
/// Every S3 route is seen, each for what it is (the rewritten path in the body, a
/// header), and the report shows the table.
#[test]
fn route_changes_are_seen_no_sooner_than_the_backend_can_answer() {
    let _alone = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let text = [
        "name: t",
        "systems: [envoy-xds, haproxy-reload]",
        "backends: {replicas: 2, delay: 150ms}",
        "tls: {enabled: false}",
        "load: {rate: 200, connections: 60, duration: 7s}",
        "changes:",
        "  - wait: 1s",
        "  - route: rewrite",
        "  - wait: 1s",
        "  - route: cors",
        "  - wait: 1s",
        "  - route: header",
        "  - wait: 1s",
        "  - route: base",
        "",
    ]
    .join("\n");
    let scn = dir.path().join("s.yaml");
    std::fs::write(&scn, text).unwrap();
    // A gate no route change can pass: none is seen sooner than 150 ms.
    let (code, text) = finish(
        start_with(
            &scn,
            &out,
            &["--fail-on", "errors>100000,route_propagation>100ms"],
        ),
        Duration::from_secs(120),
    );
    assert_eq!(code, 1, "{text}");
    for system in ["envoy-xds", "haproxy-reload"] {
        assert!(
            text.contains(&format!(
                "ingressbench: FAIL: {system}: route_propagation max "
            )),
            "{text}"
        );
    }
    assert!(!text.contains(": errors "), "the errors gate holds: {text}");
    for system in ["envoy-xds", "haproxy-reload"] {
        let r = result(&out, system);
        let changes = r["lab"]["route_propagation"]["changes"].as_array().unwrap();
        let routes: Vec<&str> = changes
            .iter()
            .map(|c| c["route"].as_str().unwrap())
            .collect();
        assert_eq!(routes, ["rewrite", "cors", "header", "base"], "{system}");
        for c in changes {
            let seen = f(&c["seen_ms"]);
            assert!(
                seen >= 150.0,
                "{system}: seen before the backend could answer: {c}"
            );
            assert!(
                seen < f(&c["applied_ms"]) + 150.0 + 1000.0,
                "{system}: seen long after it was applied: {c}"
            );
            if let Some(old) = c["last_old_ms"].as_f64() {
                assert!(old >= 150.0, "{system}: {c}");
            }
            assert!(u(&c["responses_new"]) > 50, "{system}: {c}");
        }
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<table id=\"table-routes\""));
    assert_nothing_left(dir.path());
}

/// `run --generators 2`: the scenario's load over two processes, one merged result
/// that keeps everything a single generator's has: the windows of each change (the
/// changes reach both generators), endpoint propagation from the merged per-backend
/// arrivals, route propagation from the added-up markers; no generator left.
#[test]
fn a_scenario_split_over_two_generators_keeps_its_change_windows() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = scenario(
        dir.path(),
        "[envoy-xds, nginx-reload]",
        // 8 s, not 6: on a machine shared with the Kubernetes tests, nginx's
        // reload for `route: header` has taken 1.3 s and the last change fell
        // after the load's end (a rehearsal of 6e36213).
        "8s",
        "  - wait: 1s\n  - scale: 3\n  - wait: 1s\n  - route: header\n  - wait: 1s\n  - scale: 2\n  - wait: 1s\n  - route: base\n",
    );
    // With limits it holds: the gate passes.
    let (code, text) = finish(
        start_with(
            &scn,
            &out,
            &[
                "--generators",
                "2",
                "--fail-on",
                "errors>1000",
                "--fail-on",
                "route_propagation>10s",
            ],
        ),
        Duration::from_secs(120),
    );
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    for system in ["envoy-xds", "nginx-reload"] {
        let r = result(&out, system);
        let parts = r["generators"]["parts"].as_array().unwrap();
        assert_eq!(parts.len(), 2, "{system}");
        for p in parts {
            assert!(p["error"].is_null(), "{system}: {p}");
        }
        assert!(
            r.get("windows_part").is_none(),
            "only the parts carry their windows"
        );
        assert_balanced(&r);
        // 200 req/s for 8 s, split in two.
        assert_eq!(u(&r["requests"]["intended"]), 1600, "{system}");
        let windows = r["lab"]["windows"].as_array().unwrap();
        assert_eq!(windows.len(), 4, "{system}: {windows:?}");
        assert_windows_add_up(&r, system);
        assert!(
            windows.iter().all(|w| u(&w["completed"]) > 0),
            "{system}: {windows:?}"
        );
        let added = &r["lab"]["propagation"]["added"][0];
        assert_eq!(added["backend"], "b3");
        assert!(
            added["propagation_ms"].as_f64().is_some(),
            "{system}: {added}"
        );
        let changes = r["lab"]["route_propagation"]["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 2, "{system}");
        for c in changes {
            assert!(c["seen_ms"].as_f64().is_some(), "{system}: {c}");
            assert!(u(&c["responses_new"]) > 0, "{system}: {c}");
        }
    }
    assert_nothing_left(dir.path());
    let generators: Vec<_> = processes_with("--part")
        .into_iter()
        .filter(|(_, c)| c.contains("--marks"))
        .filter(|(pid, _)| in_our_network_namespace(pid))
        .collect();
    assert!(generators.is_empty(), "left: {generators:?}");
}

/// Each request is in exactly one window, by its intended send time: the part before
/// the first change and the windows tile the measured window and add up to the run.
fn assert_windows_add_up(r: &Value, system: &str) {
    let lab = &r["lab"];
    let all: Vec<&Value> = std::iter::once(&lab["before_changes"])
        .chain(lab["windows"].as_array().unwrap())
        .collect();
    assert_eq!(f(&all[0]["from_ms"]), 0.0, "{system}");
    for pair in all.windows(2) {
        assert_eq!(pair[0]["until_ms"], pair[1]["from_ms"], "{system}: {all:?}");
    }
    let end = f(&all[all.len() - 1]["until_ms"]);
    assert!(
        (end - f(&r["duration_s"]) * 1000.0).abs() < 1e-6,
        "{system}"
    );
    let completed: u64 = all.iter().map(|w| u(&w["completed"])).sum();
    assert_eq!(
        completed,
        u(&r["requests"]["completed"]),
        "{system}: {all:?}"
    );
    for kind in ERROR_KINDS {
        let n: u64 = all.iter().map(|w| w["errors"].get(kind).map_or(0, u)).sum();
        assert_eq!(n, u(&r["errors"][kind]), "{system}: {kind} errors: {all:?}");
    }
}

/// A 30 s run of `system` scaling 2 -> 3 -> 2 every second, results in `dir/out`.
fn churning_run(dir: &Path, system: &str, flags: &[&str]) -> (Proc, PathBuf) {
    let out = dir.join("out");
    let scn = scenario(
        dir,
        &format!("[{system}]"),
        "30s",
        "  - repeat:\n      steps:\n        - scale: 3\n        - wait: 1s\n        - scale: 2\n        - wait: 1s\n",
    );
    (start_with(&scn, &out, flags), out)
}

fn interrupted_run(signal: &str, system: &str) {
    interrupted_run_with(signal, system, &[]);
}

fn interrupted_run_with(signal: &str, system: &str, flags: &[&str]) {
    let shm = envoy_shared_memory();
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = churning_run(dir.path(), system, flags);
    // Let the measured window begin (on a busy machine, deploying and starting two
    // generators has taken over 4 s) and a change or two happen.
    let t = Instant::now();
    while !child.stderr_so_far().contains("load running, measuring") {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the load did not start: {}",
            child.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(2500));
    let pid = child.id().to_string();
    Command::new("kill").args([signal, &pid]).status().unwrap();
    let t = Instant::now();
    let (code, text) = finish(child, Duration::from_secs(15));
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?} to stop",
        t.elapsed()
    );
    assert_eq!(code, 130, "{text}");
    let r = result(&out, system);
    assert_eq!(r["partial"], true);
    assert_balanced(&r);
    assert_windows_add_up(&r, system);
    assert!(u(&r["requests"]["completed"]) > 0);
    assert!(
        f(&r["duration_s"]) < 20.0,
        "the window ends at the interrupt"
    );
    assert_nothing_left(dir.path());
    assert_eq!(
        envoy_shared_memory_left(&shm),
        Vec::<String>::new(),
        "Envoy shared memory left behind"
    );
}

#[test]
fn sigint_writes_a_partial_result_and_leaves_nothing() {
    let _turn = shared();
    interrupted_run("-INT", "nginx-reload");
    interrupted_run("-INT", "envoy-hot-restart");
}

#[test]
fn sigterm_writes_a_partial_result_and_leaves_nothing() {
    let _turn = shared();
    interrupted_run("-TERM", "haproxy-runtime");
    interrupted_run("-TERM", "envoy-xds");
}

/// SIGKILL runs none of ingressbench's code: its watchdog must stop the proxy and
/// the backends and remove the scratch folder (with its private key) on its own.
fn killed_run_leaves_nothing(system: &str) {
    killed_run_leaves_nothing_with(system, &[]);
}

fn killed_run_leaves_nothing_with(system: &str, flags: &[&str]) {
    let shm = envoy_shared_memory();
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = churning_run(dir.path(), system, flags);
    let pid = child.id().to_string();
    // Wait until the proxy and the backends run (they name the run's folders).
    let t = Instant::now();
    while processes_with(&dir.path().display().to_string()).len() < 3 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the run did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    if system == "envoy-hot-restart" {
        let run = dir.path().display().to_string();
        let ours: Vec<_> = mapped_envoy_shared_memory()
            .into_iter()
            .filter(|(region, cmd)| !shm.contains(region) && cmd.contains(&run))
            .collect();
        assert!(!ours.is_empty(), "hot restart made no shared memory");
    }
    let watchdog = format!("__watchdog --parent {pid}");
    assert_eq!(processes_with(&watchdog).len(), 1, "one watchdog per run");
    Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    let (code, _) = finish(child, Duration::from_secs(15));
    assert_eq!(code, -1, "killed by a signal");
    assert_nothing_left(dir.path());
    let t = Instant::now();
    while !processes_with(&watchdog).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5), "the watchdog stays");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        envoy_shared_memory_left(&shm),
        Vec::<String>::new(),
        "Envoy shared memory left behind"
    );
}

#[test]
fn sigkill_leaves_no_process_and_no_scratch_folder() {
    let _turn = shared();
    killed_run_leaves_nothing("caddy-api");
    killed_run_leaves_nothing("envoy-hot-restart");
    killed_run_leaves_nothing("envoy-xds");
    // The generators of `run --generators` go with the run (they ask the kernel for
    // SIGKILL when their parent dies).
    killed_run_leaves_nothing_with("nginx-reload", &["--generators", "2"]);
    let left: Vec<_> = processes_with("--marks")
        .into_iter()
        .filter(|(_, c)| c.contains("--part"))
        .filter(|(pid, _)| in_our_network_namespace(pid))
        .collect();
    assert!(left.is_empty(), "generators left: {left:?}");
}

/// Ctrl-C of a run split over generators: every generator stops and writes what it
/// measured; the merged result is partial and balanced.
#[test]
fn sigint_of_a_split_run_writes_a_merged_partial_result() {
    let _turn = shared();
    interrupted_run_with("-INT", "haproxy-runtime", &["--generators", "2"]);
}

#[test]
fn a_proxy_that_dies_is_an_event_and_the_load_goes_on() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = scenario(dir.path(), "[caddy-api]", "5s", "  - wait: 1s\n");
    let child = start(&scn, &out);
    // Find the proxy by its scratch folder and kill it mid-run.
    let t = Instant::now();
    let mut killed = false;
    while t.elapsed() < Duration::from_secs(20) && !killed {
        std::thread::sleep(Duration::from_millis(100));
        for (pid, cmd) in processes_with(&dir.path().display().to_string()) {
            let is_caddy =
                cmd.starts_with("caddy") || cmd.contains("/caddy run") || cmd.contains("bin/caddy");
            if is_caddy && out.join("caddy-api").join("caddy.log").exists() {
                std::thread::sleep(Duration::from_millis(1500));
                Command::new("kill").args(["-KILL", &pid]).status().unwrap();
                killed = true;
                break;
            }
        }
    }
    assert!(killed, "caddy was never seen running");
    let (code, text) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{text}");
    let r = result(&out, "caddy-api");
    assert_eq!(r["lab"]["proxy_died"], true);
    assert!(events(&r).iter().any(|(_, k, _)| k == "proxy_died"));
    // The load went on: the requests after the death failed and were counted.
    assert!(u(&r["requests"]["failed"]) > 0);
    assert!(u(&r["errors"]["connect"]) > 0, "{}", r["errors"]);
    assert_balanced(&r);
    assert_windows_add_up(&r, "caddy-api");
    assert_nothing_left(dir.path());
}

#[test]
fn bad_scenarios_are_one_line_with_the_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.yaml");
    std::fs::write(&p, "name: x\nsystems: [nginx-reload]\nbackends:\n  replicase: 3\nload:\n  rate: 1\n  duration: 1s\n").unwrap();
    for cmd in ["validate", "run"] {
        let o = bin().arg(cmd).arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("line 4") && err.contains("replicase"), "{err}");
    }
    let o = bin().args(["run", "/nonexistent.yaml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = bin()
        .args([
            "run",
            "scenarios/dynamic-endpoints.yaml",
            "--only",
            "envoy-xsd",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("envoy-xsd") && err.contains("envoy-xds"),
        "{err}"
    );
}

/// `run --repeat 2` (issue 17 §2): the systems take turns (each once, then each
/// again), each system's result keeps both repetitions whole, and the top level pools
/// them; a load plan in `load.rate` runs the same way and reports its steps.
#[test]
fn repeated_systems_take_turns_and_keep_every_repetition() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let text = [
        "name: t",
        "systems: [nginx-reload, haproxy-reload]",
        "backends: {replicas: 2}",
        "tls: {enabled: false}",
        "load: {rate: [100:1s, 300:1s], connections: 10}",
        "changes:",
        "  - wait: 1s",
        "",
    ]
    .join("\n");
    let scn = dir.path().join("s.yaml");
    std::fs::write(&scn, text).unwrap();
    let (code, text) = finish(
        start_with(&scn, &out, &["--repeat", "2"]),
        Duration::from_secs(180),
    );
    assert_eq!(code, 0, "{text}");
    let order: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(": starting (run "))
        .map(|l| l.trim_start_matches("ingressbench: "))
        .collect();
    assert_eq!(
        order,
        [
            "nginx-reload: starting (run 1/2)",
            "haproxy-reload: starting (run 1/2)",
            "nginx-reload: starting (run 2/2)",
            "haproxy-reload: starting (run 2/2)",
        ],
        "{text}"
    );
    for system in ["nginx-reload", "haproxy-reload"] {
        let r = result(&out, system);
        assert_balanced(&r);
        assert_eq!(r["partial"], Value::Bool(false), "{system}");
        let reps = r["repetitions"].as_array().expect("repetitions");
        assert_eq!(reps.len(), 2, "{system}");
        let intended: u64 = reps.iter().map(|x| u(&x["requests"]["intended"])).sum();
        assert_eq!(intended, u(&r["requests"]["intended"]), "{system}");
        for x in reps {
            // Each repetition ran the whole plan: 100 + 300 requests, in two steps.
            assert_eq!(u(&x["requests"]["intended"]), 400, "{system}: {x}");
            let steps = x["steps"].as_array().expect("steps");
            let per: Vec<u64> = steps.iter().map(|s| u(&s["intended"])).collect();
            assert_eq!(per, [100, 300], "{system}");
            assert_eq!(x["lab"]["system"], Value::from(system));
        }
        assert_eq!(u(&r["steps"][1]["intended"]), 600, "{system}");
        assert!((f(&r["duration_s"]) - 4.0).abs() < 0.01, "{system}");
    }
    assert_nothing_left(dir.path());
}

/// A sweep over route-set sizes (issue 28): each system runs once per size of
/// `route_scale`, its set and its mix that large, each run under its own name, and
/// the report has one row per size in its route-set table.
#[test]
fn a_route_scale_sweep_runs_each_size_under_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        "name: t\nsystems: [haproxy-reload]\nbackends:\n  replicas: 1\n  drain_timeout: 1s\n\
         tls:\n  enabled: false\nroutes:\n  count: 10\n  hosts: 10\nroute_scale: [10, 300]\n\
         requests: {from: routes}\nload:\n  rate: 200\n  connections: 10\n  duration: 1s\n";
    let p = dir.path().join("s.yaml");
    std::fs::write(&p, text).unwrap();
    let out = dir.path().join("out");
    let (code, printed) = finish(start(&p, &out), Duration::from_secs(90));
    assert_eq!(code, 0, "{printed}");
    for n in [10u64, 300] {
        let name = format!("haproxy-reload-{n}routes");
        let r = result(&out, &name);
        let rs = &r["lab"]["route_set"];
        assert_eq!((u(&rs["count"]), u(&rs["served"])), (n, n), "{name}: {rs}");
        // HAProxy's reload, read from its processes: CPU spent, memory after.
        assert!(rs["apply_cpu_s"].as_f64().unwrap() > 0.0, "{name}: {rs}");
        assert!(rs["rss_mib"].as_f64().unwrap() > 1.0, "{name}: {rs}");
        assert!(
            rs["settled_ms"].as_f64().unwrap() >= rs["apply_ms"].as_f64().unwrap(),
            "{name}: {rs}"
        );
        assert_eq!(u(&r["mix"]["targets"]), n, "{name}");
        assert_eq!(r["lab"]["system"], name.as_str());
        assert_eq!(u(&r["requests"]["failed"]), 0, "{name}: {}", r["errors"]);
        assert!(
            printed.contains(&format!("Route set: {n} routes over 10 hosts")),
            "{printed}"
        );
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let table = page
        .split("<table id=\"table-route-sets\"")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("the report has the route-set table");
    for n in [10, 300] {
        assert!(
            table.contains(&format!("haproxy-reload-{n}routes")),
            "{table}"
        );
    }
    assert_nothing_left(dir.path());
}

/// One change at N (issue 28): while a mix runs over 1,000 routes, haproxy-runtime
/// is given route 1,000 and later loses it, then route 0 is changed in place (a new
/// marker on the same host and path), all through its runtime API (no reload).
/// Each change is timed from its ask until a probe of that route sees it, and the
/// load's window for each holds no error: no route nobody touched was hurt.
#[test]
fn one_route_added_removed_and_changed_at_1000_is_timed_and_hurts_no_other_route() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name: t\nsystems: [haproxy-runtime]\nbackends:\n  replicas: 1\n  drain_timeout: 1s\n\
         tls:\n  enabled: false\nroutes:\n  count: 1000\n  hosts: 10\n  bound: 10s\nrequests: {from: routes}\n\
         load:\n  rate: 400\n  connections: 20\n  duration: 4s\n\
         changes:\n  - wait: 1s\n  - route_set: add\n  - wait: 1s\n  - route_set: remove\n\
         \x20 - wait: 1s\n  - route_set: change\n";
    let p = dir.path().join("s.yaml");
    std::fs::write(&p, text).unwrap();
    let out = dir.path().join("out");
    let (code, printed) = finish(start(&p, &out), Duration::from_secs(90));
    assert_eq!(code, 0, "{printed}");
    let r = result(&out, "haproxy-runtime");
    let changes = r["lab"]["route_set"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 3, "{changes:?}");
    for (c, (what, route, after)) in changes.iter().zip([
        ("add", "r1000", 1001),
        ("remove", "r1000", 1000),
        ("change", "r0", 1000),
    ]) {
        assert_eq!(c["change"], what, "{c}");
        assert_eq!(c["route"], route, "{c}");
        assert_eq!(u(&c["routes_after"]), after, "{c}");
        let shown = f(&c["shown_ms"]);
        assert!(shown > 0.0 && shown < 10_000.0, "{c}");
        assert!(c["applied_ms"].as_f64().is_some(), "{c}");
    }
    assert!(
        f(&changes[1]["at_ms"]) > f(&changes[0]["at_ms"]) + 900.0,
        "{changes:?}"
    );
    let windows = r["lab"]["windows"].as_array().unwrap();
    let of_changes: Vec<_> = windows
        .iter()
        .filter(|w| {
            w["change"]
                .as_str()
                .is_some_and(|c| c.starts_with("route_set"))
        })
        .collect();
    assert_eq!(of_changes.len(), 3, "{windows:?}");
    for w in &of_changes {
        assert!(u(&w["completed"]) > 0, "{w}");
        assert_eq!(w["errors"].as_object().map_or(0, |e| e.len()), 0, "{w}");
    }
    assert_eq!(u(&r["requests"]["failed"]), 0, "{}", r["errors"]);
    assert!(printed.contains("Route r1000 added at"), "{printed}");
    assert!(printed.contains("Route r1000 removed at"), "{printed}");
    assert!(printed.contains("Route r0 changed at"), "{printed}");

    assert_nothing_left(dir.path());
}

/// A route set's mix over two generator processes (`run --generators 2`): the
/// children read the mix from a targets file the run wrote, and the merged result
/// has every route's group, adding up to the run.
#[test]
fn a_route_sets_mix_runs_over_two_generators_and_adds_up() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name: t\nsystems: [haproxy-runtime]\nbackends:\n  replicas: 1\n  drain_timeout: 1s\n\
         tls:\n  enabled: false\nroutes:\n  count: 100\n  hosts: 5\nrequests: {from: routes, skew: 1}\n\
         load:\n  rate: 300\n  connections: 10\n  duration: 2s\n";
    let p = dir.path().join("s.yaml");
    std::fs::write(&p, text).unwrap();
    let out = dir.path().join("out");
    let (code, printed) = finish(
        start_with(&p, &out, &["--generators", "2"]),
        Duration::from_secs(90),
    );
    assert_eq!(code, 0, "{printed}");
    let r = result(&out, "haproxy-runtime");
    assert_eq!(r["generators"]["parts"].as_array().unwrap().len(), 2);
    assert_balanced(&r);
    let m = &r["mix"];
    assert_eq!(u(&m["targets"]), 100, "{m}");
    let groups = m["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 100);
    let completed = u(&r["requests"]["completed"]);
    let failed = u(&r["requests"]["failed"]);
    assert_eq!(failed, 0, "{}", r["errors"]);
    assert_eq!(groups.iter().map(|g| u(&g["ok"])).sum::<u64>(), completed);
    // Zipf's skew: route 0 took the most, and more than route 99.
    let req = |i: usize| u(&groups[i]["requests"]);
    assert!(req(0) > req(99) * 5, "{} vs {}", req(0), req(99));
    assert!(groups[0]["latency_ms"]["p99"].as_f64().unwrap() > 0.0);
    // Each host's connections: five of each generator's five, one per host each.
    let hosts = m["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 5);
    assert!(hosts.iter().all(|h| u(&h["connections"]) == 2), "{hosts:?}");
    assert_nothing_left(dir.path());
}

/// A scenario with a route set (issue 28): nginx-reload is given 200 routes over 10
/// hosts before the load, every route serves (the result says how long after the
/// apply, and what the configuration weighed), and the load's mix is made of the
/// routes themselves (`requests: {from: routes}`), every request answered by its
/// route, the mix's figures per route in the result and the summary.
#[test]
fn a_route_set_comes_up_and_the_load_spreads_over_its_routes() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name: t\nsystems: [nginx-reload]\nbackends:\n  replicas: 1\n  drain_timeout: 1s\n\
         tls:\n  enabled: false\nroutes:\n  count: 200\n  hosts: 10\nrequests: {from: routes}\n\
         load:\n  rate: 400\n  connections: 20\n  duration: 2s\n";
    let p = dir.path().join("s.yaml");
    std::fs::write(&p, text).unwrap();
    let out = dir.path().join("out");
    let (code, printed) = finish(start(&p, &out), Duration::from_secs(90));
    assert_eq!(code, 0, "{printed}");
    let r = result(&out, "nginx-reload");
    let rs = &r["lab"]["route_set"];
    assert_eq!((u(&rs["count"]), u(&rs["hosts"])), (200, 10), "{rs}");
    assert_eq!((u(&rs["served"]), u(&rs["never_count"])), (200, 0), "{rs}");
    assert!(f(&rs["all_served_ms"]) > 0.0, "{rs}");
    assert!(u(&rs["config_bytes"]) > 200 * 50, "{rs}");
    let m = &r["mix"];
    assert_eq!(u(&m["targets"]), 200, "{m}");
    assert_eq!(m["hosts"].as_array().unwrap().len(), 10, "{m}");
    let groups = m["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 200);
    assert!(
        groups[0]["name"] == "GET h0.routes.test/r0",
        "{}",
        groups[0]
    );
    let total: u64 = groups.iter().map(|g| u(&g["requests"])).sum();
    assert_eq!(
        total,
        u(&r["requests"]["completed"]) + u(&r["requests"]["failed"])
    );
    assert_eq!(
        u(&r["requests"]["failed"]),
        0,
        "every route answers: {}",
        r["errors"]
    );
    assert!(
        printed.contains("Route set: 200 routes over 10 hosts"),
        "{printed}"
    );
    assert!(
        printed.contains("Request mix: 200 targets over 10 hosts"),
        "{printed}"
    );
    assert_nothing_left(dir.path());
}
