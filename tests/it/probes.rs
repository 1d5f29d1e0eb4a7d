//! Behaviour probes (issue 44) against real proxies: the same requests to nginx,
//! Envoy and HAProxy profiles, what came back and what reached the backend compared
//! with nginx's; known and stable differences asserted.

use crate::common::{read_json, run, shared};
use serde_json::Value;
use std::time::Duration;

fn observed<'a>(r: &'a Value, probe: &str) -> &'a Value {
    r["lab"]["probes"]["observed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["probe"] == probe)
        .unwrap_or_else(|| panic!("no {probe}: {}", r["lab"]["probes"]))
}

#[test]
fn the_same_requests_through_nginx_envoy_and_haproxy_differ_where_their_defaults_do() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("p.yaml");
    std::fs::write(
        &scn,
        "name: probes\nsystems: [envoy-xds, nginx-reload, haproxy-runtime]\n\
         probes:\n  baseline: nginx-reload\n  only: [plain, underscore-header, body-1mib-plus-1, encoded-dots, header-16k]\n\
         backends:\n  replicas: 2\nload:\n  rate: 20\n  connections: 2\n  duration: 1s\n  warmup: 0s\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = run(
        &["run", scn.to_str().unwrap(), "--out", out.to_str().unwrap()],
        Duration::from_secs(240),
    );
    assert!(o.success(), "{}", o.stderr);
    let nginx = read_json(&out.join("nginx-reload/result.json"));
    let envoy = read_json(&out.join("envoy-xds/result.json"));
    let haproxy = read_json(&out.join("haproxy-runtime/result.json"));
    // The baseline differs from nothing; every probe got an answer.
    assert_eq!(nginx["lab"]["probes"]["differences"], serde_json::json!([]));
    for r in [&nginx, &envoy, &haproxy] {
        for o in r["lab"]["probes"]["observed"].as_array().unwrap() {
            assert!(o["status"].as_u64().is_some(), "{o}");
        }
    }
    // The backend reports what reached it.
    let plain = &observed(&envoy, "plain")["received"];
    assert_eq!(
        (plain["method"].as_str(), plain["target"].as_str()),
        (Some("GET"), Some("/probe"))
    );
    // nginx's 1m body limit: 413 from nginx itself; Envoy and HAProxy pass the body.
    let big = observed(&nginx, "body-1mib-plus-1");
    assert_eq!(
        (big["status"].as_u64(), big["received"].is_null()),
        (Some(413), true),
        "{big}"
    );
    for r in [&envoy, &haproxy] {
        let o = observed(r, "body-1mib-plus-1");
        assert_eq!(o["received"]["body_len"].as_u64(), Some(1_048_577), "{o}");
    }
    // A header with an underscore: nginx drops it, Envoy and HAProxy pass it.
    let u = |r: &Value| {
        observed(r, "underscore-header")["received"]["headers"]["x_ib_underscore"].clone()
    };
    assert_eq!(
        (u(&nginx), u(&envoy), u(&haproxy)),
        (Value::Null, "yes".into(), "yes".into())
    );
    // And the comparison says so, field by field, with both values.
    let diffs = envoy["lab"]["probes"]["differences"].as_array().unwrap();
    let d = diffs
        .iter()
        .find(|d| d["probe"] == "underscore-header" && d["field"] == "received x_ib_underscore")
        .unwrap_or_else(|| panic!("{diffs:?}"));
    assert_eq!(
        (d["baseline"].as_str(), d["system"].as_str()),
        (Some("-"), Some("yes"))
    );
    assert!(
        diffs.iter().any(|d| d["probe"] == "body-1mib-plus-1"
            && d["field"] == "status"
            && d["baseline"] == "413"
            && d["system"] == "200"),
        "{diffs:?}"
    );
}
