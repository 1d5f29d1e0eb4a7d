//! HTTP/2, h2c and gRPC against real servers: nginx over TLS (ALPN) and h2c, the
//! built-in backend as h2c, HTTPS and gRPC, a GOAWAY mid-run (nginx's reload),
//! a 1 MB response over the 64 KB windows, and bad flags.

use crate::common::backend::Backend;
use crate::common::json::u_at;
use crate::common::proc::{Output, Proc};
use crate::common::tls::{self_signed, Cert};
use crate::common::{free_port, nginx, read_json, run, scenario_run};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// nginx with HTTP/2 over TLS and h2c on two ports, a 1 MB file and an access log
/// of the protocol and connection of each request.
struct H2Nginx {
    https: SocketAddr,
    h2c: SocketAddr,
    http1: SocketAddr,
    cert: Cert,
    proc: Proc,
    dir: tempfile::TempDir,
}

impl H2Nginx {
    fn start() -> H2Nginx {
        let dir = tempfile::tempdir().unwrap();
        let cert = self_signed();
        let at = |p| SocketAddr::from(([127, 0, 0, 1], p));
        let (https, h2c, http1) = (at(free_port()), at(free_port()), at(free_port()));
        std::fs::write(dir.path().join("big"), vec![b'x'; 1 << 20]).unwrap();
        let d = dir.path().display();
        let conf = format!(
            r#"{head}
http {{
{temp}
    log_format h2 '$server_protocol|$connection|$status|$body_bytes_sent';
    access_log {d}/access.log h2;
    server {{
        listen {https} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{ add_header x-backend nginx-tls; return 200 "hello over h2\n"; }}
        location /big {{ alias {d}/big; }}
    }}
    server {{
        listen {h2c} http2;
        location / {{ add_header x-backend nginx-h2c; return 200 "hello over h2c\n"; }}
    }}
    server {{
        listen {http1};
        location / {{ return 200 "http/1.1 only\n"; }}
    }}
}}
"#,
            head = nginx::head(dir.path(), 1024),
            temp = nginx::temp_paths(dir.path()),
            cert = cert.cert.display(),
            key = cert.key.display(),
        );
        let proc = nginx::spawn(dir.path(), &conf, &[https, h2c, http1]);
        std::fs::write(dir.path().join("access.log"), "").unwrap();
        H2Nginx {
            https,
            h2c,
            http1,
            cert,
            proc,
            dir,
        }
    }

    /// The access log's lines: `protocol|connection|status|bytes`.
    fn logged(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap()
            .lines()
            .map(|l| l.split('|').map(str::to_string).collect())
            .collect()
    }
}

/// `ingressbench load URL WORDS MORE --quiet`, within [`LIMIT`]: `words` are flags
/// and their values split at white space, `more` those that may not be one word (a
/// certificate's path).
fn load_output(url: &str, words: &str, more: &[&str]) -> Output {
    let mut all = vec!["load", url, "--quiet"];
    all.extend(words.split_whitespace());
    all.extend(more);
    run(&all, LIMIT)
}

/// [`load_output`] of a run that succeeds: its result and what it printed on stderr.
fn load(url: &str, words: &str, more: &[&str]) -> (Value, String) {
    load_exit(url, words, more, 0)
}

/// [`load`] for a run that ends with `code` (1: nothing succeeded).
fn load_exit(url: &str, words: &str, more: &[&str], code: i32) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut all = vec!["--json", json.to_str().unwrap()];
    all.extend(more);
    let out = load_output(url, words, &all);
    let stderr = out.stderr.clone();
    assert!(
        out.code == Some(code),
        "ingressbench {all:?}: {:?}\n{stderr}",
        out.code
    );
    (read_json(&json), stderr)
}

#[test]
fn nginx_serves_http2_over_tls_and_h2c_with_streams_shared_by_connections() {
    let ng = H2Nginx::start();
    let url = format!("https://localhost:{}/", ng.https.port());
    let (r, _) = load(
        &url,
        "--http2 -c 2 --streams 8 -R 400 -d 2s",
        &["--cacert", ng.cert.cert.to_str().unwrap()],
    );
    assert_eq!(r["config"]["protocol"], "h2");
    assert_eq!(u_at(&r, "/config/streams"), 8);
    assert_eq!(u_at(&r, "/requests/completed"), 800, "{}", r["errors"]);
    assert_eq!(u_at(&r, "/backends/nginx-tls"), 800);
    let h2 = &r["connections"]["http2"];
    assert_eq!(u_at(h2, "/connections_opened"), 2);
    assert!(u_at(h2, "/max_concurrent_streams") >= 1);
    // nginx's own account: every request over HTTP/2.0, on two connections.
    let log = ng.logged();
    assert_eq!(log.len(), 800);
    assert!(
        log.iter().all(|l| l[0] == "HTTP/2.0" && l[2] == "200"),
        "{:?}",
        &log[..3]
    );
    let conns: std::collections::BTreeSet<_> = log.iter().map(|l| l[1].clone()).collect();
    assert_eq!(
        conns.len(),
        2,
        "two connections carry every stream: {conns:?}"
    );

    let (r, _) = load(
        &format!("http://{}/", ng.h2c),
        "--h2c -c 1 --streams 4 -R 300 -d 1s",
        &[],
    );
    assert_eq!(r["config"]["protocol"], "h2c");
    assert_eq!(u_at(&r, "/requests/completed"), 300, "{}", r["errors"]);
    assert_eq!(u_at(&r, "/backends/nginx-h2c"), 300);

    // A megabyte per response over 64 KB windows: flow control gives window back.
    let (r, _) = load(
        &format!("https://localhost:{}/big", ng.https.port()),
        "--http2 --h2-window 65535 -c 1 --streams 4 -R 20 -d 1s",
        &["--cacert", ng.cert.cert.to_str().unwrap()],
    );
    assert_eq!(u_at(&r, "/requests/completed"), 20, "{}", r["errors"]);
    assert!(u_at(&r, "/bytes_read") >= 20 << 20, "{}", r["bytes_read"]);
    let big: Vec<_> = ng
        .logged()
        .into_iter()
        .filter(|l| l[3] == "1048576")
        .collect();
    assert_eq!(big.len(), 20);
}

#[test]
fn goaway_from_a_reload_loses_no_request() {
    let ng = H2Nginx::start();
    let url = format!("https://localhost:{}/", ng.https.port());
    let pid = ng.proc.id();
    let reloader = std::thread::spawn(move || {
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(900));
            let _ = std::process::Command::new("kill")
                .args(["-HUP", &pid.to_string()])
                .status();
        }
    });
    let (r, _) = load(
        &url,
        "--http2 -c 4 --streams 10 -R 800 -d 3s",
        &["--cacert", ng.cert.cert.to_str().unwrap()],
    );
    reloader.join().unwrap();
    let h2 = &r["connections"]["http2"];
    assert!(
        u_at(h2, "/goaways") >= 4,
        "each reload drains every connection: {h2}"
    );
    assert!(u_at(h2, "/connections_opened") > 4, "{h2}");
    // Every intended request accounted for, and none lost to the reloads.
    assert_eq!(u_at(&r, "/requests/intended"), 2400);
    assert_eq!(u_at(&r, "/requests/completed"), 2400, "{}", r["errors"]);
}

#[test]
fn the_backend_speaks_h2c_https_h2_and_grpc_with_errors_by_status() {
    let b = Backend::start("b-h2", &[]);
    let (r, _) = load(&b.url(), "--h2c -c 2 --streams 5 -R 300 -d 1s", &[]);
    assert_eq!(u_at(&r, "/backends/b-h2"), 300, "{}", r["errors"]);

    // gRPC: Echo answers OK with the backend's id as metadata.
    let (r, _) = load(
        &b.url(),
        "--h2c --grpc ingressbench.Backend/Echo --grpc-payload 100B -c 1 --streams 4 -R 200 -d 1s",
        &[],
    );
    assert_eq!(r["config"]["grpc"], "ingressbench.Backend/Echo");
    assert_eq!(u_at(&r, "/requests/completed"), 200, "{}", r["errors"]);
    assert_eq!(u_at(&r, "/backends/b-h2"), 200);
    // The reply carries the 100-byte payload back: more than 100 bytes read each.
    assert!(u_at(&r, "/bytes_read") > 200 * 100);

    // A method the server does not have: UNIMPLEMENTED in trailers, never a success.
    let (r, _) = load_exit(
        &b.url(),
        "--h2c --grpc no.Such/Method -c 1 -R 50 -d 1s",
        &[],
        1,
    );
    assert_eq!(u_at(&r, "/requests/completed"), 0);
    assert_eq!(u_at(&r, "/errors/grpc"), 50);
    assert_eq!(u_at(&r, "/errors/grpc_codes/UNIMPLEMENTED"), 50);
    assert!(r["errors"]["first"]["grpc"]
        .as_str()
        .unwrap()
        .contains("UNIMPLEMENTED"));

    // --status 503 on gRPC calls: a trailers-only UNAVAILABLE (HTTP 200).
    let failing = Backend::start("b-503", &["--status", "503"]);
    let (r, _) = load_exit(
        &failing.url(),
        "--h2c --grpc ingressbench.Backend/Echo -c 1 -R 50 -d 1s",
        &[],
        1,
    );
    assert_eq!(
        u_at(&r, "/errors/grpc_codes/UNAVAILABLE"),
        50,
        "{}",
        r["errors"]
    );
    assert_eq!(u_at(&r, "/errors/status"), 0, "the HTTP status was 200");

    // HTTPS: the backend offers h2 by ALPN.
    let cert = self_signed();
    let tls = Backend::start(
        "b-tls",
        &[
            "--tls-cert",
            cert.cert.to_str().unwrap(),
            "--tls-key",
            cert.key.to_str().unwrap(),
        ],
    );
    let (r, _) = load(
        &format!("https://localhost:{}/", tls.addr.port()),
        "--http2 -c 2 --streams 3 -R 200 -d 1s",
        &["--cacert", cert.cert.to_str().unwrap()],
    );
    assert_eq!(u_at(&r, "/backends/b-tls"), 200, "{}", r["errors"]);
}

#[test]
fn servers_that_do_not_speak_http2_end_the_run_in_one_line() {
    let ng = H2Nginx::start();
    // h2c to an HTTP/1.1-only port.
    let out = load_output(&format!("http://{}/", ng.http1), "--h2c -R 10 -d 1s", &[]);
    let err = &out.stderr;
    assert_eq!(out.code, Some(1), "{err}");
    assert!(
        err.contains("answered the HTTP/2 preface in HTTP/1.1"),
        "{err}"
    );
    // --http2 to a TLS server that offers only http/1.1 by ALPN.
    let h1 = crate::common::nginx::Nginx::start();
    let out = load_output(
        &format!("https://localhost:{}/", h1.https.port()),
        "--http2 -R 10 -d 1s",
        &["--cacert", h1.cert.cert.to_str().unwrap()],
    );
    let err = &out.stderr;
    assert_eq!(out.code, Some(1), "{err}");
    assert!(err.contains("did not agree to HTTP/2"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bad_http2_flags_are_one_line_and_exit_2() {
    for (args, says) in [
        (
            vec!["--h2c", "--streams", "0"],
            "--streams must be at least 1",
        ),
        (vec!["--streams", "4"], "needs --http2 or --h2c"),
        (vec!["--grpc", "a.B/C"], "gRPC runs over HTTP/2"),
        (vec!["--h2c", "--grpc", "nomethod"], "is not SERVICE/METHOD"),
        (vec!["--h2c", "--grpc", "a.B/C/D"], "is not SERVICE/METHOD"),
        (vec!["--http2"], "--http2: HTTP/2 needs TLS"),
        (
            vec!["--h2c", "--new-connection"],
            "leave out --new-connection",
        ),
        (
            vec!["--h2c", "--grpc", "a.B/C", "--grpc-payload", "12XB"],
            "unknown unit",
        ),
    ] {
        let mut all = vec!["load", "http://127.0.0.1:9/", "-R", "10", "-d", "1s"];
        all.extend(args.iter().copied());
        let out = run(&all, LIMIT);
        let err = &out.stderr;
        assert_eq!(out.code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// A lab run of `systems` with `protocol`, a scale step up and down and a route
/// change under 200 req/s over 4 connections of 5 streams: each system's result.
/// `duration` leaves room for all three changes on a loaded machine: a reload's
/// scale step has taken 1.3 s there while three clusters ran beside it, and a
/// change the run's end cuts off has no window.
fn lab_run(protocol: &str, systems: &[&str], duration: &str) -> Vec<(String, Value)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = dir.path().join("h2.yaml");
    std::fs::write(
        &scn,
        format!(
            "name: h2\nsystems: [{}]\nprotocol: {protocol}\nbackends:\n  replicas: 2\n  drain_timeout: 1s\n\
             load:\n  rate: 200\n  connections: 4\n  streams: 5\n  duration: {duration}\n\
             changes:\n  - wait: 500ms\n  - scale: 3\n  - wait: 800ms\n  - route: header\n  - wait: 800ms\n  - scale: 2\n",
            systems.join(", ")
        ),
    )
    .unwrap();
    let done = scenario_run::start(&scn, &out).finish(Duration::from_secs(180));
    assert_eq!(done.code, Some(0), "{}\n{}", done.stdout, done.stderr);
    systems
        .iter()
        .map(|system| {
            let r = read_json(&out.join(system).join("result.json"));
            // The run would have stopped at the first connection had the proxy not
            // agreed to h2 by ALPN.
            assert_eq!(r["config"]["protocol"], "h2", "{system}");
            assert_eq!(r["partial"], false, "{system}");
            let q = &r["requests"];
            assert_eq!(
                u_at(q, "/intended"),
                u_at(q, "/completed")
                    + u_at(q, "/failed")
                    + u_at(q, "/not_sent")
                    + u_at(q, "/unfinished"),
                "{system}: {q}"
            );
            assert!(
                u_at(q, "/completed") * 10 >= u_at(q, "/intended") * 9,
                "{system}: {q} {}",
                r["errors"]
            );
            assert!(
                u_at(&r, "/backends/b3") > 0,
                "{system}: the new backend: {}",
                r["backends"]
            );
            let h2 = &r["connections"]["http2"];
            assert_eq!(u_at(h2, "/streams_per_connection"), 5, "{system}: {h2}");
            assert!(u_at(h2, "/connections_opened") >= 4, "{system}: {h2}");
            let windows = r["lab"]["windows"].as_array().map_or(0, Vec::len);
            assert!(
                windows >= 3,
                "{system}: one window per change: {}",
                r["lab"]["windows"]
            );
            // The route's header came back over HTTP/2 too: the change was seen.
            let rp = &r["lab"]["route_propagation"];
            assert!(rp.is_object(), "{system}: {rp}");
            (system.to_string(), r)
        })
        .collect()
}

/// The lab's four proxies.
const PROXIES: [&str; 4] = ["nginx-reload", "haproxy-reload", "caddy-api", "envoy-xds"];

#[test]
fn the_lab_serves_http2_under_churn() {
    // Every proxy speaks h2 to the load in the gRPC test below; here plain HTTP
    // responses come back over it, through two of them.
    for (system, r) in lab_run("h2", &["haproxy-reload", "caddy-api"], "5s") {
        assert!(r["config"]["grpc"].is_null(), "{system}");
    }
}

#[test]
fn each_proxy_of_the_lab_carries_grpc_to_its_backends_over_h2c() {
    for (system, r) in lab_run("grpc", &PROXIES, "5s") {
        assert_eq!(r["config"]["grpc"], "ingressbench.Backend/Echo", "{system}");
        // Every call answered OK by a backend (Echo over h2c through the proxy);
        // a proxy that spoke HTTP/1.1 upstream would have failed them all.
        assert!(
            r["errors"]["grpc_codes"].is_null(),
            "{system}: {}",
            r["errors"]
        );
        assert!(
            u_at(&r, "/backends/b1") > 0 && u_at(&r, "/backends/b2") > 0,
            "{system}: {}",
            r["backends"]
        );
    }
}

#[test]
fn a_stream_the_server_resets_is_a_reset_error_and_the_connection_goes_on() {
    // A flapping backend in reset mode resets each stream of its failing phases
    // (RST_STREAM), as over HTTP/1.1 it resets the connection.
    let b = Backend::start("b-flap", &["--flap", "500ms/500ms", "--flap-mode", "reset"]);
    let (r, _) = load(&b.url(), "--h2c -c 2 --streams 4 -R 200 -d 2s", &[]);
    let h2 = &r["connections"]["http2"];
    let resets = u_at(&r, "/errors/reset");
    assert!(
        resets > 50 && u_at(&r, "/requests/completed") > 50,
        "{}",
        r["errors"]
    );
    assert_eq!(u_at(h2, "/streams_reset"), resets, "{h2}");
    assert_eq!(u_at(&r, "/requests/failed"), resets, "{}", r["errors"]);
    assert!(
        r["errors"]["first"]["reset"]
            .as_str()
            .unwrap()
            .contains("RST_STREAM"),
        "{}",
        r["errors"]
    );
    // The streams were reset, not the connections: the two stayed.
    assert_eq!(u_at(h2, "/connections_opened"), 2, "{h2}");
}
