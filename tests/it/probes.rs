//! Behaviour probes (issue 44) against real proxies: the same requests to every
//! local profile, what came back and what reached the backend compared with nginx's;
//! known and stable differences asserted. Then the probes again during a run's
//! changes, and expectations a CI gate holds a system to.

use crate::common::proc::Output;
use crate::common::{read_json, run, shared};
use serde_json::Value;
use std::time::Duration;

/// `ingressbench probe` on the scenario `text` (written in `dir`), its answers
/// written as JSON, with `extra` flags: the run's output and that JSON (`Null`
/// when none was written).
fn probe_json(
    dir: &std::path::Path,
    text: &str,
    extra: &[&str],
    limit: Duration,
) -> (Output, Value) {
    let scn = dir.join("p.yaml");
    std::fs::write(&scn, text).unwrap();
    let json = dir.join("probes.json");
    let args = [
        &[
            "probe",
            scn.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ][..],
        extra,
    ]
    .concat();
    let o = run(&args, limit);
    let v = if json.is_file() {
        read_json(&json)
    } else {
        Value::Null
    };
    (o, v)
}

/// What probe `probe` got, in a list of answers.
fn answer<'a>(observed: &'a Value, probe: &str) -> &'a Value {
    observed
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["probe"] == probe)
        .unwrap_or_else(|| panic!("no {probe}: {observed}"))
}

const SEVEN: [&str; 7] = [
    "nginx-reload",
    "nginx-lua",
    "haproxy-reload",
    "haproxy-runtime",
    "caddy-api",
    "envoy-xds",
    "envoy-hot-restart",
];

#[test]
fn the_corpus_through_the_seven_local_profiles_differs_where_their_defaults_do() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let (o, all) = probe_json(
        dir.path(),
        &format!(
            "name: probes\nsystems: [{}]\nprobes:\n  baseline: nginx-reload\n\
             backends:\n  replicas: 2\nload:\n  rate: 20\n  connections: 2\n  duration: 1s\n",
            SEVEN.join(", ")
        ),
        &["--fail-on", "probe_diffs>0"],
        Duration::from_secs(240),
    );
    // Every system but the baseline and the other nginx profile (the same nginx,
    // rendering the same ingress-nginx defaults, differs in nothing) differs from
    // it: the gate fails, naming each.
    assert_eq!(o.code, Some(1), "{}\n{}", o.stdout, o.stderr);
    for s in &SEVEN[2..] {
        assert!(
            o.stderr.contains(&format!("FAIL: {s}: probe_diffs ")),
            "{s}: {}",
            o.stderr
        );
    }
    assert!(!o.stderr.contains("FAIL: nginx-"), "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("nginx-reload: 25 probes (the baseline)\n"),
        "{}",
        o.stdout
    );
    let of = |s: &str| &all[s]["observed"];
    for s in ["nginx-reload", "nginx-lua"] {
        assert_eq!(all[s]["differences"], serde_json::json!([]), "{s}");
    }
    for s in SEVEN {
        for a in of(s).as_array().unwrap() {
            assert!(a["status"].as_u64().is_some(), "{s}: {a}");
        }
        // Every profile keeps connections to its backends open: of five requests
        // in a row, one reached a backend on a connection an earlier one used.
        let reuse = answer(of(s), "upstream-reuse");
        assert_eq!(reuse["reused"], true, "{s}: {reuse}");
        // The backend reports what reached it.
        let plain = &answer(of(s), "plain")["received"];
        assert_eq!(
            (plain["method"].as_str(), plain["target"].as_str()),
            (Some("GET"), Some("/probe")),
            "{s}"
        );
    }
    let nginx = ["nginx-reload", "nginx-lua"];
    for s in SEVEN {
        let big = answer(of(s), "body-1mib-plus-1");
        let under = &answer(of(s), "underscore-header")["received"]["headers"]["x_ib_underscore"];
        if nginx.contains(&s) {
            // ingress-nginx's 1m body limit, from nginx itself; its headers with
            // underscores dropped.
            assert_eq!(
                (big["status"].as_u64(), big["received"].is_null()),
                (Some(413), true),
                "{s}: {big}"
            );
            assert!(under.is_null(), "{s}: {under}");
        } else {
            assert_eq!(
                big["received"]["body_len"].as_u64(),
                Some(1_048_577),
                "{s}: {big}"
            );
            assert_eq!(under, "yes", "{s}");
        }
    }
    // The fixture host: a route to backends with no endpoint, and a path no route
    // names. Neither reaches a backend; each proxy answers itself, as its
    // controller renders a Service with no endpoint (503) and a path of a known
    // host that no rule names (404).
    for s in SEVEN {
        for (probe, status) in [("no-ready-endpoint", 503), ("unknown-path", 404)] {
            let a = answer(of(s), probe);
            assert_eq!(
                (a["status"].as_u64(), a["received"].is_null()),
                (Some(status), true),
                "{s} {probe}: {a}"
            );
        }
    }
    // A reset on the first attempt: nginx retries on the next backend (`error
    // timeout`), whose answer says it was the probe's second attempt across the
    // backends; Envoy without a retry policy answers 503 itself.
    for s in nginx {
        let r = answer(of(s), "upstream-reset-once");
        assert_eq!(
            (r["status"].as_u64(), r["received"]["attempt"].as_u64()),
            (Some(200), Some(2)),
            "{s}: {r}"
        );
    }
    let r = answer(of("envoy-xds"), "upstream-reset-once");
    assert_eq!(
        (r["status"].as_u64(), r["received"].is_null()),
        (Some(503), true),
        "{r}"
    );
    // And the comparison says so, field by field, with both values.
    let diffs = all["envoy-xds"]["differences"].as_array().unwrap();
    for (probe, field, base, got) in [
        ("underscore-header", "received x_ib_underscore", "-", "yes"),
        ("body-1mib-plus-1", "status", "413", "200"),
        ("upstream-reset-once", "status", "200", "503"),
    ] {
        assert!(
            diffs.iter().any(|d| d["probe"] == probe
                && d["field"] == field
                && d["baseline"] == base
                && d["system"] == got),
            "{probe} {field}: {diffs:?}"
        );
    }
}

#[test]
fn a_backend_slower_than_envoys_route_timeout_is_504_from_envoy_and_waited_for_by_nginx() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let (o, all) = probe_json(
        dir.path(),
        "name: slow\nsystems: [nginx-reload, envoy-xds]\n\
         probes:\n  only: [plain, slow-backend-16s]\n\
         load:\n  rate: 20\n  connections: 2\n  duration: 1s\n",
        &[],
        Duration::from_secs(180),
    );
    assert_eq!(o.code, Some(0), "{}\n{}", o.stdout, o.stderr);
    // nginx waits (ingress-nginx's 60 s proxy-read-timeout): the backend's answer.
    let nginx = answer(&all["nginx-reload"]["observed"], "slow-backend-16s");
    assert_eq!(nginx["status"], 200, "{nginx}");
    assert!(nginx["received"].is_object(), "{nginx}");
    assert!(nginx["ms"].as_f64().unwrap() >= 16_000.0, "{nginx}");
    // Envoy's route keeps its 15 s default (Contour's and Envoy Gateway's): Envoy
    // answers 504 itself, after 15 s and before the backend's 16.
    let envoy = answer(&all["envoy-xds"]["observed"], "slow-backend-16s");
    assert_eq!(
        (envoy["status"].as_u64(), envoy["received"].is_null()),
        (Some(504), true),
        "{envoy}"
    );
    let ms = envoy["ms"].as_f64().unwrap();
    assert!((15_000.0..16_000.0).contains(&ms), "{envoy}");
    let diffs = all["envoy-xds"]["differences"].as_array().unwrap();
    assert!(
        diffs.iter().any(|d| d["probe"] == "slow-backend-16s"
            && d["field"] == "status"
            && d["baseline"] == "200"
            && d["system"] == "504"),
        "{diffs:?}"
    );
}

#[test]
fn the_probes_run_again_after_each_change_and_a_gate_holds_their_expectations() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("p.yaml");
    std::fs::write(
        &scn,
        "name: probes-during\nsystems: [nginx-reload]\n\
         probes:\n  only: [plain, upstream-reset-once, legacy]\n  expect:\n    plain: {status: 201}\n  \
         add:\n    - id: legacy\n      path: /old%2Fpath?x=1\n      headers: [\"X-Team: a\"]\n      \
         expect: {status: 200, target: /old%2Fpath?x=1, attempts: 1}\n\
         backends:\n  replicas: 2\nload:\n  rate: 50\n  connections: 2\n  duration: 4s\n\
         changes:\n  - wait: 500ms\n  - scale: 3\n  - wait: 1s\n  - restart: proxy\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = run(
        &[
            "run",
            scn.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--fail-on",
            "probe_diffs>0",
        ],
        Duration::from_secs(120),
    );
    // Only the expectation written to fail fails: once before the load, once after
    // each change and once at the end.
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains("probe_diffs 4 > 0 (0 from nginx-reload, 0 changed during the load, 4 expectations not met)"),
        "{}",
        o.stderr
    );
    let r = read_json(&out.join("nginx-reload/result.json"));
    let p = &r["lab"]["probes"];
    let rounds = p["rounds"].as_array().unwrap();
    let after: Vec<&str> = rounds
        .iter()
        .map(|x| x["after"].as_str().unwrap())
        .collect();
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(after[0], "scale 2 -> 3");
    assert!(after[1].starts_with("restart proxy"), "{after:?}");
    assert_eq!(after[2], "end");
    for round in rounds {
        // The same system, probed again: nothing changed under the changes.
        assert_eq!(round["changed"], serde_json::json!([]), "{round}");
        let legacy = answer(&round["observed"], "legacy");
        assert_eq!(legacy["received"]["target"], "/old%2Fpath?x=1", "{legacy}");
        // Each round's probes are counted apart at the backends: a reset once per
        // round, retried.
        let reset = answer(&round["observed"], "upstream-reset-once");
        assert_eq!(reset["received"]["attempt"].as_u64(), Some(2), "{reset}");
    }
    let unmet = p["unmet"].as_array().unwrap();
    let rounds_unmet: Vec<&str> = unmet.iter().map(|u| u["round"].as_str().unwrap()).collect();
    assert_eq!(rounds_unmet.len(), 4, "{unmet:?}");
    assert_eq!(rounds_unmet[0], "before");
    for u in unmet {
        assert_eq!(
            (&u["probe"], &u["field"], &u["expected"], &u["got"]),
            (
                &Value::from("plain"),
                &Value::from("status"),
                &Value::from("201"),
                &Value::from("200")
            )
        );
    }
    // The summary's table says it in a row per round.
    assert!(o.stdout.contains("before (expected)"), "{}", o.stdout);
    assert!(o.stdout.contains("end (expected)"), "{}", o.stdout);
}

#[test]
fn what_probes_cannot_do_is_refused_in_one_line_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let with = dir.path().join("with.yaml");
    let without = dir.path().join("without.yaml");
    let base = "name: p\nsystems: [nginx-reload, envoy-xds]\nload:\n  rate: 10\n  duration: 1s\n";
    std::fs::write(&with, format!("{base}probes: {{}}\n")).unwrap();
    std::fs::write(&without, base).unwrap();
    let (w, wo) = (with.to_str().unwrap(), without.to_str().unwrap());
    for (args, says) in [
        (
            vec!["run", wo, "--fail-on", "probe_diffs>0"],
            "--fail-on probe_diffs: this scenario sends no probes",
        ),
        (
            vec!["probe", w, "--repeat", "2"],
            "--repeat: probe sends each probe once",
        ),
        (
            vec!["probe", w, "--fail-on", "p99>1s"],
            "its one limit is probe_diffs",
        ),
        (
            vec!["probe", w, "--only", "envoy-xds"],
            "leaves out nginx-reload, the probes' baseline",
        ),
    ] {
        let o = run(&args, Duration::from_secs(10));
        assert_eq!(o.code, Some(2), "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{args:?}: {}", o.stderr);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{args:?}: {}", o.stderr);
    }
}

/// The annotation corpus on the local lab: its profiles render no Ingress, so no
/// probe of the corpus is sent and every behaviour is a cell that says why, the
/// matrix printed after the differences and written in the JSON.
#[test]
fn the_annotation_corpus_on_local_profiles_is_a_matrix_of_cells_that_say_why_not() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let (o, all) = probe_json(
        dir.path(),
        "name: corpus\nsystems: [nginx-reload, caddy-api]\n\
         probes:\n  only: [plain, cors, canary-weight-10.share]\n  corpus: annotations\n\
         backends:\n  replicas: 1\nload:\n  rate: 20\n  connections: 2\n  duration: 1s\n",
        &[],
        Duration::from_secs(120),
    );
    assert!(o.success(), "{}\n{}", o.stdout, o.stderr);
    for s in ["nginx-reload", "caddy-api"] {
        // Only the built-in probe was sent.
        let sent: Vec<&str> = all[s]["observed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["probe"].as_str().unwrap())
            .collect();
        assert_eq!(sent, ["plain"], "{s}");
        let cells = all[s]["corpus"].as_array().unwrap();
        let named: Vec<&str> = cells
            .iter()
            .map(|c| c["behaviour"].as_str().unwrap())
            .collect();
        assert_eq!(named, ["cors", "canary-weight-10"], "{s}: {cells:?}");
        for c in cells {
            assert_eq!(c["verdict"], "not run", "{s}: {c}");
            assert!(
                c["detail"].as_str().unwrap().contains("renders no corpus"),
                "{c}"
            );
        }
    }
    assert!(
        o.stdout
            .contains("ingress-nginx's annotations: what each system did with them"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("nginx-reload (baseline)"), "{}", o.stdout);
}
