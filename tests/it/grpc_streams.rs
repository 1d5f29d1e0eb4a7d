//! gRPC streams held open (issue 45): `ingressbench load --grpc-stream` against the
//! built-in backend's streaming Echo (h2c and TLS), the backend's drain, refusals,
//! and through every local profile across its reload, each end counted by the
//! engine and checked against what the backend saw.

use crate::common::backend::Backend;
use crate::common::{kill, tls};
use crate::websocket::{across_each_reload, answering, sessions_of};
use std::time::{Duration, Instant};

/// The backend's count of streams: (opened, ended by the peer, ended at the drain,
/// cut).
fn stream_count(b: &mut Backend) -> (u64, u64, u64, u64) {
    assert!(kill("-TERM", b.proc.id()));
    b.proc
        .wait_timeout(Duration::from_secs(10))
        .expect("the backend did not end its drain");
    let err = b.stderr();
    let line = err
        .lines()
        .find_map(|l| l.split_once("grpc streams: ").map(|(_, t)| t.to_string()))
        .unwrap_or_else(|| panic!("no stream count in the backend's stderr: {err}"));
    let n = numbers(&line);
    assert_eq!(n.len(), 4, "{line}");
    (n[0], n[1], n[2], n[3])
}

fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect()
}

fn load(args: &[&str], json: &std::path::Path, url: &str) -> crate::common::proc::Output {
    let mut all = vec!["load", "--grpc-stream"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", json.to_str().unwrap(), url]);
    crate::common::run(&all, Duration::from_secs(30))
}

#[test]
fn streams_echo_every_message_over_h2c_and_tls_and_end_with_the_clients_end() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("g.json");
    let mut b = Backend::start("g-1", &["--workers", "1"]);
    let url = format!("http://127.0.0.1:{}/", b.addr.port());
    let o = load(&["-c", "20", "-R", "400", "-d", "2s"], &json, &url);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("Sessions: 20 gRPC streams"),
        "{}",
        o.stdout
    );
    let s = sessions_of(&json);
    assert_eq!(s.protocol, "grpc");
    assert_eq!((s.opened, s.held, s.cut()), (20, 20, 0), "{s:?}");
    // 400 messages a second for 2 s, each stream's from its opening: the time
    // the opens took is not sent in (22 ms of them under a loaded machine, 9
    // messages: a rehearsal of 6e36213).
    let opening = (s.open_ms.max.unwrap_or(0.0) * 0.4).ceil() as u64 + 1;
    assert!(
        (799 - opening.min(100)..=801).contains(&s.messages.intended),
        "{s:?}"
    );
    assert_eq!(s.messages.echoed, s.messages.intended, "{s:?}");
    assert_eq!(
        s.backends["g-1"], 20,
        "each response head names its backend"
    );
    assert!(s.timeline.iter().all(|t| t.open == 20), "{:?}", s.timeline);
    // The backend ended each stream with OK when the client ended its side.
    assert_eq!(stream_count(&mut b), (20, 20, 0, 0));

    // Over TLS, HTTP/2 chosen by ALPN.
    let cert = tls::self_signed();
    let (c, k) = (cert.cert.to_str().unwrap(), cert.key.to_str().unwrap());
    let mut b = Backend::start("g-2", &["--workers", "1", "--tls-cert", c, "--tls-key", k]);
    let url = format!("https://127.0.0.1:{}/", b.addr.port());
    let o = load(
        &["-c", "5", "-R", "100", "-d", "1s", "--cacert", c],
        &json,
        &url,
    );
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let s = sessions_of(&json);
    assert_eq!((s.opened, s.held, s.cut()), (5, 5, 0), "{s:?}");
    assert_eq!(s.messages.echoed, s.messages.intended, "{s:?}");
    assert_eq!(stream_count(&mut b), (5, 5, 0, 0));
}

/// The backend's drain ends every stream with UNAVAILABLE and its reason (beside
/// hyper's GOAWAY): a graceful end, counted as `status 14`, at the time it came.
#[test]
fn the_backends_drain_ends_every_stream_with_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("g.json");
    let mut b = Backend::start("g-1", &["--workers", "1", "--drain-timeout", "3s"]);
    let url = format!("http://127.0.0.1:{}/", b.addr.port());
    let bin = crate::common::BIN;
    let run = std::process::Command::new(bin)
        .args(["load", "--grpc-stream", "-c", "10", "-R", "200", "-d", "3s"])
        .args(["--reopen", "never", "--quiet", "--json"])
        .arg(&json)
        .arg(&url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let counted = stream_count(&mut b);
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = sessions_of(&json);
    let ends: Vec<(&str, u64)> = s.ends.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    assert_eq!(ends, [("status 14", 10)], "{s:?}");
    assert_eq!(s.broken(), 0, "a status is a graceful end");
    assert_eq!(
        s.close_reasons["status 14"],
        "ingressbench backend draining"
    );
    assert_eq!((s.held, s.reopened), (0, 0), "--reopen never");
    // The ends are in the second they came (the drain began 1.5 s into the run,
    // the streams having opened before its first second).
    let ended: Vec<u64> = s.timeline.iter().map(|t| t.ended).collect();
    assert_eq!(ended.iter().sum::<u64>(), 10, "{ended:?}");
    assert!(ended[0] == 0 && ended[1] == 10, "{ended:?}");
    assert!(s.messages.balanced(), "{:?}", s.messages);
    assert_eq!(counted, (10, 0, 10, 0));
}

/// A server that speaks HTTP/1 only, and a method the backend does not have: the
/// run ends on time, opens nothing (exit 1), and names what came back; and flags
/// that cannot make a stream run are refused in one line.
#[test]
fn load_grpc_stream_names_what_refused_its_streams_and_refuses_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("g.json");
    let http1 = answering(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
    let t = Instant::now();
    let o = load(
        &["-c", "2", "-R", "10", "-d", "1s"],
        &json,
        &format!("http://{http1}/"),
    );
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let s = sessions_of(&json);
    assert_eq!(s.opened, 0);
    assert!(
        s.first_errors["not_http2"].contains("answered HTTP/1 to the HTTP/2 preface")
            && s.first_errors["not_http2"].contains("HTTP/1.1 400 Bad Request"),
        "{:?}",
        s.first_errors
    );

    let mut b = Backend::start("g-1", &["--workers", "1"]);
    let url = format!("http://127.0.0.1:{}/", b.addr.port());
    let o = crate::common::run(
        &[
            "load",
            "--grpc-stream",
            "no.Such/Method",
            "-c",
            "2",
            "-R",
            "10",
            "-d",
            "1s",
            "--json",
            json.to_str().unwrap(),
            &url,
        ],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    let s = sessions_of(&json);
    assert!(
        s.first_errors["refused"].contains("grpc-status 12 UNIMPLEMENTED"),
        "{:?}",
        s.first_errors
    );
    assert!(s.open_failures["refused"] >= 2, "{:?}", s.open_failures);
    assert!(kill("-TERM", b.proc.id()));
    b.proc.wait_timeout(Duration::from_secs(10)).unwrap();

    for (args, url, says) in [
        (
            &["-c", "2", "-R", "1"][..],
            "ws://127.0.0.1:1/",
            "--grpc-stream: url 'ws://127.0.0.1:1/': gRPC streams speak HTTP/2",
        ),
        (
            &["-c", "2"][..],
            "http://127.0.0.1:1/",
            "--grpc-stream needs -R/--rate",
        ),
        (
            &["-c", "2", "-R", "1", "--generators", "2"][..],
            "http://127.0.0.1:1/",
            "--grpc-stream runs on one generator",
        ),
    ] {
        let mut all = vec!["load", "--grpc-stream"];
        all.extend_from_slice(args);
        all.push(url);
        let o = crate::common::run(&all, Duration::from_secs(10));
        crate::common::assert_refused(&o, says, &format!("{args:?}"));
    }
    let o = crate::common::run(
        &[
            "load",
            "--grpc-stream=Echo",
            "-c",
            "1",
            "-R",
            "1",
            "http://127.0.0.1:1/",
        ],
        Duration::from_secs(10),
    );
    crate::common::assert_refused(
        &o,
        "--grpc-stream: the gRPC method 'Echo' is not SERVICE/METHOD",
        "method",
    );
    let o = crate::common::run(
        &[
            "load",
            "--message-size",
            "64B",
            "-R",
            "1",
            "http://127.0.0.1:1/",
        ],
        Duration::from_secs(10),
    );
    crate::common::assert_refused(&o, "--message-size is for sessions", "message-size");
}

/// 50 streams of the engine through each local profile as `protocol: grpc` sets it
/// up (HTTP/2 by ALPN on its HTTPS port, h2c to the backend), across its reload 2 s
/// into a 14 s run at 200 messages/s, every profile at once. What the engine
/// counted must be what the backend saw: as many opens, an OK end for each stream
/// held to the end, and a cut for each stream the proxy cut.
#[test]
fn streams_across_each_profiles_reload_end_as_its_mechanism_implies() {
    let _turn = crate::common::shared();
    let runs: Vec<_> = across_each_reload(true, |up| {
        let url = format!("https://127.0.0.1:{}/", up.ctx.https_port);
        let mut c = std::process::Command::new(crate::common::BIN);
        c.args([
            "load",
            "--grpc-stream",
            "-c",
            "50",
            "-R",
            "200",
            "-d",
            "14s",
        ])
        .args(["--timeout", "2s", "--cacert"])
        .arg(&up.ctx.cert)
        .arg(url);
        c
    })
    .into_iter()
    .map(|(profile, s, up)| (profile, s, up.stop_counting("grpc streams: ")))
    .collect();
    for (profile, s, n) in &runs {
        let m = &s.messages;
        assert!(m.balanced(), "{profile}: {m:?}");
        assert_eq!(s.open_failures.len(), 0, "{profile}: {:?}", s.first_errors);
        assert_eq!((s.held, s.reopened), (50, s.cut()), "{profile}: {s:?}");
        let (opened, by_peer, at_drain, cut) = (n[0], n[1], n[2], n[3]);
        assert_eq!(
            (opened, by_peer + cut, at_drain),
            (s.opened, s.held + s.cut(), 0),
            "{profile}: the backend's count against the engine's: {s:?}"
        );
        assert_eq!(by_peer, s.held, "{profile}");
        let ends: Vec<(&str, u64)> = s.ends.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        match *profile {
            // The old workers say GOAWAY at the reload, keep their streams up to
            // worker_shutdown_timeout (10 s here), then close the connections: every
            // stream cut, with no status, after its GOAWAY.
            "nginx-reload" | "nginx-lua" => {
                assert_eq!((s.cut(), s.broken()), (50, 50), "{profile}: {ends:?}");
                assert_eq!(
                    s.close_reasons.get("eof").map(String::as_str),
                    Some("after a GOAWAY (NO_ERROR)"),
                    "{profile}: {s:?}"
                );
            }
            // The old epoch keeps its connections while it drains and ends them
            // with it (parent shutdown, 10 s): cut, with no status.
            "envoy-hot-restart" => {
                assert_eq!((s.cut(), s.broken()), (50, 50), "{profile}: {ends:?}")
            }
            // HAProxy's old process keeps its streams (hard-stop-after, 30 s), the
            // configuration sent again over ADS changes nothing, and Caddy's config
            // load leaves its HTTP/2 streams alone (it closes its WebSockets).
            "envoy-xds" | "haproxy-reload" | "haproxy-runtime" | "caddy-api" => {
                assert_eq!(ends, [], "{profile}: {s:?}");
                assert_eq!(m.echoed, m.intended, "{profile}: {m:?}");
            }
            other => panic!("a profile this test does not know: {other}"),
        }
    }
}

/// A scenario's gRPC streams (`sessions: {grpc_streams}` with `protocol: grpc`)
/// beside its gRPC calls, across a reload: HAProxy keeps every stream; Envoy's hot
/// restart ends each with its old epoch, 10 s on, in the reload's window, with no
/// status; `--fail-on 'sessions_broken[reload]>0'` fails Envoy alone.
#[test]
fn a_scenarios_grpc_streams_are_counted_in_the_reloads_window_and_gated() {
    use crate::common::scenario_run::{finish, result, start_with};
    let _turn = crate::common::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        "name: t\nsystems: [haproxy-reload, envoy-hot-restart]\nprotocol: grpc\n\
         backends: {replicas: 2, drain_timeout: 1s}\n\
         load: {rate: 100, connections: 4, duration: 13s}\n\
         sessions: {grpc_streams: 20, rate: 100}\n\
         changes:\n  - wait: 2s\n  - reload: true\n",
    )
    .unwrap();
    let (code, text) = finish(
        start_with(&scn, &out, &["--fail-on", "sessions_broken[reload]>0"]),
        Duration::from_secs(180),
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "FAIL: envoy-hot-restart: sessions_broken[reload] 20 > 0 (in 1 change window)"
        ),
        "{text}"
    );
    assert!(!text.contains("FAIL: haproxy-reload"), "{text}");
    for (system, cut) in [("haproxy-reload", 0), ("envoy-hot-restart", 20)] {
        let r: results::RunResult = serde_json::from_value(result(&out, system)).unwrap();
        let s = r.sessions.as_ref().expect("sessions");
        assert_eq!(s.protocol, "grpc");
        assert_eq!(
            (s.cut(), s.broken(), s.held),
            (cut, cut, 20),
            "{system}: {s:?}"
        );
        assert!(s.messages.balanced(), "{system}");
        let lab = r.lab.as_ref().unwrap();
        let reload: Vec<_> = lab
            .windows
            .iter()
            .filter(|w| w.kind() == "reload")
            .collect();
        assert_eq!(reload.len(), 1, "{system}: {:?}", lab.windows);
        let w = reload[0].sessions.as_ref().expect("the window's sessions");
        assert_eq!(w.broken(), cut, "{system}: {w:?}");
        // The calls beside them were answered: the load is gRPC too.
        assert!(r.requests.completed > 1000, "{system}: {:?}", r.requests);
    }
}
