//! A request mix (`load --targets FILE`) against a real nginx with virtual hosts:
//! what each host and path got, as the generator counts it and as nginx logged it,
//! over plain HTTP and over TLS (the server name each connection asked for).

use crate::common::load::{run_load, LoadOutput};
use crate::common::nginx;
use crate::common::proc::Proc;
use crate::common::tls::Cert;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// nginx with three virtual hosts on one HTTP and one HTTPS port: `a.test` answers
/// 200, `b.test` answers 200 on `/ok` and 503 on `/fail`, anything else 421. Its log
/// line: host, server name (TLS), URI, status, the `x-test` header (`-` for none).
struct Vhosts {
    http: SocketAddr,
    https: SocketAddr,
    _proc: Proc,
    dir: tempfile::TempDir,
    _cert: Cert,
}

impl Vhosts {
    fn start() -> Vhosts {
        let cert = crate::common::tls::self_signed();
        let dir = tempfile::tempdir().unwrap();
        let [http, https] = <[u16; 2]>::try_from(crate::common::free_ports(2))
            .unwrap()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
        let d = dir.path().display();
        let (head, temp) = (nginx::head(dir.path(), 1024), nginx::temp_paths(dir.path()));
        let conf = format!(
            r#"{head}
http {{
    default_type text/plain;
{temp}
    log_format vhost '$host|$ssl_server_name|$request_uri|$status|$http_x_test';
    access_log {d}/access.log vhost;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    server {{
        listen {http} default_server;
        listen {https} ssl default_server;
        location / {{ return 421 "no such host"; }}
    }}
    server {{
        listen {http};
        listen {https} ssl;
        server_name a.test;
        location / {{ return 200 "a"; }}
    }}
    server {{
        listen {http};
        listen {https} ssl;
        server_name b.test;
        location /ok {{ return 200 "b ok"; }}
        location /fail {{ return 503 "b fails"; }}
    }}
}}
"#,
            cert = cert.cert.display(),
            key = cert.key.display(),
        );
        let proc = nginx::spawn(dir.path(), &conf, &[http, https]);
        let v = Vhosts {
            http,
            https,
            _proc: proc,
            dir,
            _cert: cert,
        };
        // The readiness probes are not the test's requests.
        std::fs::write(v.log_path(), "").unwrap();
        v
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("access.log")
    }

    /// Requests nginx logged, by `host|server name|uri|status|x-test`.
    fn logged(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for l in std::fs::read_to_string(self.log_path()).unwrap().lines() {
            *m.entry(l.to_string()).or_insert(0) += 1;
        }
        m
    }
}

fn targets_file(dir: &Path, text: &str) -> String {
    let p = dir.join("targets.txt");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const MIX: &str = "# a.test carries half the weight, b.test's two paths a quarter each\n\
GET http://a.test/ weight=2\n\
\n\
GET http://b.test/ok\n\
X-Test: yes\n\
\n\
GET http://b.test/fail\n";

fn group<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["mix"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name} in {}", r["mix"]))
}

fn run_mix(url: &str, file: &str, extra: &[&str]) -> LoadOutput {
    let mut args = vec!["-t1", "-c6", "-R300", "-d2s", "--targets", file];
    args.extend_from_slice(extra);
    args.push(url);
    run_load(&args, Duration::from_secs(20))
}

#[test]
fn a_targets_file_spreads_requests_over_virtual_hosts_by_weight() {
    let v = Vhosts::start();
    let file = targets_file(v.dir.path(), MIX);
    let out = run_mix(&format!("http://{}/", v.http), &file, &[]);
    let ctx = out.context();
    let r = out.result();
    assert_eq!(out.code, Some(0), "{ctx}");
    let m = &r["mix"];
    assert_eq!(m["targets"], 3, "{ctx}");
    assert_eq!(m["grouped_by"], "target", "{ctx}");
    // Weight 2 against 1 + 1: the six connections go three and three.
    let hosts: BTreeMap<String, (u64, u64)> = m["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["host"].as_str().unwrap().to_string(),
                (
                    h["connections"].as_u64().unwrap(),
                    h["requests"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(hosts["a.test"].0, 3, "{ctx}");
    assert_eq!(hosts["b.test"].0, 3, "{ctx}");
    let (a, ok, fail) = (
        group(r, "GET a.test/"),
        group(r, "GET b.test/ok"),
        group(r, "GET b.test/fail"),
    );
    assert_eq!(a["share"].as_f64(), Some(0.5), "{ctx}");
    assert_eq!(ok["share"].as_f64(), Some(0.25), "{ctx}");
    let n = |g: &Value, k: &str| g[k].as_u64().unwrap_or(0);
    let completed = out.u("/requests/completed");
    let failed = out.u("/requests/failed");
    // Every outcome is in a group, and the groups add up to the run.
    assert_eq!(n(a, "ok") + n(ok, "ok") + n(fail, "ok"), completed, "{ctx}");
    assert_eq!(
        n(a, "requests") + n(ok, "requests") + n(fail, "requests"),
        completed + failed,
        "{ctx}"
    );
    // b.test/fail is the run's only failure, a 503 each time.
    assert_eq!(n(fail, "ok"), 0, "{ctx}");
    assert!(n(fail, "requests") > 0, "{ctx}");
    assert_eq!(
        fail["errors"]["status"].as_u64(),
        Some(n(fail, "requests")),
        "{ctx}"
    );
    assert_eq!(
        fail["status_codes"]["503"].as_u64(),
        Some(n(fail, "requests")),
        "{ctx}"
    );
    assert_eq!(out.u("/errors/status"), n(fail, "requests"), "{ctx}");
    // Half the connections, half the requests; b.test's split by weight 1:1 (a draw:
    // within 25 % of even over ~150 requests).
    let total = (n(a, "requests") + n(ok, "requests") + n(fail, "requests")) as f64;
    assert!(
        (n(a, "requests") as f64 / total - 0.5).abs() < 0.02,
        "{ctx}"
    );
    let b_ok = n(ok, "requests") as f64 / (n(ok, "requests") + n(fail, "requests")) as f64;
    assert!(
        (b_ok - 0.5).abs() < 0.125,
        "b.test/ok took {b_ok} of b.test\n{ctx}"
    );
    assert!(a["latency_ms"]["p99"].as_f64().unwrap() > 0.0, "{ctx}");
    // nginx's own account: each host got exactly its paths, as many as counted, and
    // the target's header came along.
    let logged = v.logged();
    let want: BTreeMap<String, u64> = [
        ("a.test|-|/|200|-".to_string(), n(a, "requests")),
        ("b.test|-|/ok|200|yes".to_string(), n(ok, "requests")),
        ("b.test|-|/fail|503|-".to_string(), n(fail, "requests")),
    ]
    .into_iter()
    .collect();
    assert_eq!(logged, want, "nginx's log against the mix\n{ctx}");
    // The summary names the mix and the failing target.
    assert!(
        out.stdout.contains("Request mix: 3 targets over 2 hosts"),
        "{ctx}"
    );
    assert!(
        out.stdout.contains("Most failing: GET b.test/fail"),
        "{ctx}"
    );
}

/// Which target each request goes to follows from the schedule alone: the same file
/// and load give each target the same number of requests in two runs.
#[test]
fn the_same_mix_and_load_pick_the_same_targets() {
    let v = Vhosts::start();
    let file = targets_file(v.dir.path(), MIX);
    let url = format!("http://{}/", v.http);
    let counts = |out: &LoadOutput| -> Vec<u64> {
        out.result()["mix"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["requests"].as_u64().unwrap())
            .collect()
    };
    let first = run_mix(&url, &file, &[]);
    let second = run_mix(&url, &file, &[]);
    for o in [&first, &second] {
        assert_eq!(o.u("/requests/not_sent"), 0, "{}", o.context());
    }
    assert_eq!(
        counts(&first),
        counts(&second),
        "{}\n{}",
        first.context(),
        second.context()
    );
}

/// A mix over two generator processes, and repeated: each group's figures are the
/// parts' added (its latency from their histograms), and still add up to the run and
/// to what nginx logged.
#[test]
fn a_mix_split_over_generators_or_repeated_adds_up_group_by_group() {
    let v = Vhosts::start();
    let file = targets_file(v.dir.path(), MIX);
    let url = format!("http://{}/", v.http);
    for extra in [&["--generators", "2"][..], &["--repeat", "2"][..]] {
        std::fs::write(v.log_path(), "").unwrap();
        let mut args = vec!["-c8", "-R300", "-d2s", "--targets", &file];
        args.extend_from_slice(extra);
        args.push(&url);
        let out = run_load(&args, Duration::from_secs(30));
        let ctx = out.context();
        assert_eq!(out.code, Some(0), "{extra:?}: {ctx}");
        let r = out.result();
        let n = |g: &Value, k: &str| g[k].as_u64().unwrap_or(0);
        let groups = r["mix"]["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 3, "{extra:?}: {ctx}");
        let completed = out.u("/requests/completed");
        let failed = out.u("/requests/failed");
        let sum = |k: &str| groups.iter().map(|g| n(g, k)).sum::<u64>();
        assert_eq!(sum("ok"), completed, "{extra:?}: {ctx}");
        assert_eq!(sum("requests"), completed + failed, "{extra:?}: {ctx}");
        // 300 req/s for 2 s, done twice (repeated) or by two (split).
        let runs = if extra[0] == "--repeat" { 2 } else { 1 };
        assert!(
            completed + failed > 500 * runs,
            "{extra:?}: {completed} + {failed}: {ctx}"
        );
        let logged: u64 = v.logged().values().sum();
        assert_eq!(
            logged,
            completed + failed,
            "{extra:?}: nginx's log
{ctx}"
        );
        // Every group's latency, from its merged histogram, within the run's.
        let run_max = r["latency_ms"]["corrected"]["max"].as_f64().unwrap();
        for g in groups {
            let l = &g["latency_ms"];
            assert!(l["p50"].as_f64().unwrap() > 0.0, "{extra:?}: {g}");
            assert!(
                l["max"].as_f64().unwrap() <= run_max * 1.001,
                "{extra:?}: {g}"
            );
            assert!(!g["histogram"].as_str().unwrap().is_empty(), "{g}");
        }
        // Connections per host: the generators' added (4 + 4), a repetition's own.
        let conns: u64 = r["mix"]["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| n(h, "connections"))
            .sum();
        assert_eq!(conns, 8, "{extra:?}: {ctx}");
    }
}

/// Over TLS each connection asks for its host's name (SNI), and nginx routes it.
#[test]
fn over_tls_each_connection_names_its_host() {
    let v = Vhosts::start();
    let file = targets_file(
        v.dir.path(),
        "GET https://a.test/\nGET https://b.test/ok\nX-Test: tls\n",
    );
    let out = run_mix(&format!("https://{}/", v.https), &file, &["-k"]);
    let ctx = out.context();
    out.ok();
    out.assert_no_errors();
    let logged = v.logged();
    assert_eq!(logged.len(), 2, "{logged:?}\n{ctx}");
    let a = logged.get("a.test|a.test|/|200|-").copied().unwrap_or(0);
    let b = logged
        .get("b.test|b.test|/ok|200|tls")
        .copied()
        .unwrap_or(0);
    assert_eq!(a + b, out.u("/requests/completed"), "{logged:?}\n{ctx}");
    assert!(a > 0 && b > 0, "{logged:?}\n{ctx}");
}

#[test]
fn a_bad_targets_file_is_refused_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |text: &str, extra: &[&str], want: &str| {
        let file = targets_file(dir.path(), text);
        let mut args = vec!["-R100", "-d1s", "-c2", "--targets", &file];
        args.extend_from_slice(extra);
        args.push("http://127.0.0.1:9/");
        let out = run_load(&args, Duration::from_secs(10));
        let err = out.stderr.trim().to_string();
        assert_eq!(out.code, Some(2), "{want}\n{}", out.context());
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(want), "want '{want}' in: {err}");
    };
    refused(
        "GET http://a.test/\nHost a.test\n",
        &[],
        "targets.txt:2: 'Host a.test' is not a header",
    );
    refused(
        "GET http://a.test/ weight=0\n",
        &[],
        "targets.txt:1: weight=0",
    );
    refused(
        "GET http://a.test/\n\nGET https://b.test/\n",
        &[],
        "targets.txt:3: https://b.test/ is https:// but the URL every connection goes to is http://",
    );
    refused(
        "GET http://a.test/\nGET http://b.test/\nGET http://c.test/\n",
        &[],
        "3 hosts need at least as many connections",
    );
    refused(
        "GET http://a.test/\nGET http://b.test/\n",
        &["--generators", "2"],
        "--generators 2: generator 1 of 2 would run 1 connections: ",
    );
    refused(
        "GET http://a.test/\nGET http://b.test/\n",
        &["--schedule", "shared"],
        "--schedule shared with 2 hosts",
    );
}
