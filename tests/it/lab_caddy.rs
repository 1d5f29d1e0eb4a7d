//! The `caddy-api` profile against a real Caddy: endpoint and route changes through
//! the admin API take effect (seen in responses), the process is never restarted,
//! and stopping leaves nothing behind.

use crate::common::lab::{self as labsupport, caddy::Caddy, ids, ids_seen, settle_change, Driver};
use crate::common::lab::{routes, Endpoint, Resp, Route, RouteSet, SutError};
use crate::common::shared;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_secs(5);

/// [`settle_change`], then what the admin API's call and its confirmation cost (for
/// the notes).
fn changed(d: &mut Caddy, label: &str, change: impl FnOnce(&mut Caddy) -> Result<(), SutError>) {
    settle_change(d, label, SETTLE, change);
    let t = d.last_change().expect("a change was timed");
    eprintln!(
        "{label:<12} {:<30} call {:>7.2?}  confirm {:>7.2?}",
        t.what,
        t.call,
        t.confirm.expect("settle confirms")
    );
}

#[test]
fn caddy_api_applies_endpoint_and_route_changes_without_restart() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = labsupport::backend("b1");
    let b2 = labsupport::backend("b2");
    let b3 = labsupport::backend("b3");
    let ep = |b: &labsupport::Backend| -> Endpoint { b.endpoint.clone() };
    let ctx = labsupport::context(dir.path());

    let mut d = Caddy::new();
    assert_eq!(d.name(), "caddy-api");
    d.prepare(&ctx, &[ep(&b1), ep(&b2)]).unwrap();
    let versions = d.versions();
    assert_eq!(versions[0].0, "caddy");
    assert!(versions[0].1.starts_with('2'), "{versions:?}");
    d.start().unwrap();
    let t = Instant::now();
    d.wait_ready(Duration::from_secs(10)).unwrap();
    eprintln!("ready after {:.2?}", t.elapsed());
    let pid = d.pid().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let work = labsupport::path_text(&ctx.work_dir);
    assert!(String::from_utf8_lossy(&cmdline).contains(&work));
    assert_eq!(ids_seen(&ctx, 20), ids(["b1", "b2"]));
    for tls in [
        ["--tlsv1.2", "--tls-max", "1.2"],
        ["--tlsv1.3", "--tls-max", "1.3"],
    ] {
        assert_eq!(
            labsupport::status(
                &[&tls[..], &["--cacert"]].concat(),
                &ctx,
                "https",
                ctx.https_port
            ),
            "200"
        );
    }
    assert_eq!(labsupport::status(&[], &ctx, "http", ctx.http_port), "200");

    changed(&mut d, "endpoints", |d| {
        d.set_endpoints(&[ep(&b2), ep(&b3)])
    });
    assert_eq!(ids_seen(&ctx, 20), ids(["b2", "b3"]));
    let saved = std::fs::read_to_string(ctx.out_dir.join("caddy.json")).unwrap();
    assert!(saved.contains(&b3.endpoint.addr.to_string()));
    assert!(!saved.contains(&b1.endpoint.addr.to_string()));

    changed(&mut d, "cors", |d| d.apply_route(Route::Cors));
    let r: Resp = labsupport::get(&ctx, "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, POST, OPTIONS")
    );
    assert_eq!(ids_seen(&ctx, 20), ids(["b2", "b3"]));

    changed(&mut d, "header", |d| d.apply_route(Route::Header));
    let r = labsupport::get(&ctx, "/");
    assert_eq!(r.header("x-custom"), Some("1"));
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert!(r.header("x-backend").is_some());

    changed(&mut d, "rewrite", |d| d.apply_route(Route::Rewrite));
    let r = labsupport::get(&ctx, "/x");
    assert!(r.body.contains("uri: /rewritten/x"), "{}", r.body);
    assert_eq!(r.header("x-custom"), None);

    changed(&mut d, "base", |d| d.apply_route(Route::Base));
    let r = labsupport::get(&ctx, "/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-custom"), None);
    assert!(r.body.contains("uri: /x"), "{}", r.body);

    // No endpoints: a quick 503, not a wait for retries.
    changed(&mut d, "no endpoints", |d| d.set_endpoints(&[]));
    let t = Instant::now();
    let r = labsupport::get(&ctx, "/");
    assert!(matches!(r.status, 502 | 503), "{}", r.status);
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    changed(&mut d, "endpoints", |d| {
        d.set_endpoints(&[ep(&b2), ep(&b3)])
    });
    assert_eq!(ids_seen(&ctx, 20), ids(["b2", "b3"]));

    changed(&mut d, "reload", |d| d.reload());
    assert_eq!(ids_seen(&ctx, 10), ids(["b2", "b3"]));

    assert_eq!(d.pid(), Some(pid), "caddy was restarted");
    let log = std::fs::read_to_string(ctx.out_dir.join("caddy.log")).unwrap();
    assert!(!log.contains("config is unchanged"), "a change was a no-op");
    assert!(d.alive());

    let t = Instant::now();
    d.stop().unwrap();
    eprintln!("stopped in {:.2?}", t.elapsed());
    assert!(!d.alive());
    labsupport::assert_no_process_with(&work);
    labsupport::assert_no_process_with(&labsupport::path_text(&ctx.out_dir));
    assert!(ctx.out_dir.join("caddy.log").exists());
}

/// One GET of `path` on `host` with curl, through the plain-HTTP port or over HTTPS
/// (SNI `host`, the lab certificate not checked: it does not name the set's hosts):
/// the status and the `x-route` and `x-backend` headers.
fn on_host(
    ctx: &labsupport::DriverContext,
    https: bool,
    host: &str,
    path: &str,
) -> (u16, Option<String>, Option<String>) {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-o", "/dev/null", "-D", "-", "--max-time", "5"]);
    let url = if https {
        let port = ctx.https_port;
        cmd.args(["-k", "--resolve", &format!("{host}:{port}:127.0.0.1")]);
        format!("https://{host}:{port}{path}")
    } else {
        cmd.args(["-H", &format!("Host: {host}")]);
        format!("http://127.0.0.1:{}{path}", ctx.http_port)
    };
    let out = cmd.arg(url).output().expect("curl");
    let head = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let header = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    (status, header(routes::ROUTE_HEADER), header("x-backend"))
}

/// Routes at scale (issue 28) for caddy-api: 10 and then 1,000 routes over 10 virtual
/// hosts, each set one `/load` of the whole config through the admin API, no
/// restart; every route answers as itself through the plain-HTTP port (and one over
/// HTTPS by its SNI), other paths on a set host answer 404, a route the set lacks is
/// reported as never served and comes up once added, and the main route and an
/// endpoint change reach the routes of the set and the main route alike.
#[test]
fn caddy_api_a_route_set_of_1000_over_10_hosts_serves_every_route() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = labsupport::backend("b1");
    let b2 = labsupport::backend("b2");
    let ctx = labsupport::context(dir.path());
    let http = SocketAddr::from(([127, 0, 0, 1], ctx.http_port));
    let mut d = Caddy::new();
    d.deploy(
        &ctx,
        std::slice::from_ref(&b1.endpoint),
        Duration::from_secs(10),
    )
    .unwrap();
    let pid = d.pid().unwrap();
    let apply = |d: &mut Caddy, set: RouteSet| {
        let (t0, bytes) = labsupport::apply_set(d, set);
        let t = d.last_change().expect("a change was timed");
        assert_eq!(t.what, "caddy POST /load");
        eprintln!(
            "caddy-api: {} routes: call {:.2?}, confirm {:.2?}",
            set.count,
            t.call,
            t.confirm.expect("settle confirms")
        );
        (t0, bytes)
    };
    let mut sizes = Vec::new();
    for n in [10, 1000] {
        let set = RouteSet::new(n, 10);
        let (t0, bytes) = apply(&mut d, set);
        sizes.push(bytes);
        labsupport::assert_all_served("caddy-api", http, &set, t0);
        // Once all serve: a round of probes alone (no new upstream connections).
        let again = routes::probe(http, &set, Instant::now(), Duration::from_secs(20), 4);
        eprintln!("caddy-api: {n} routes, a round: {:?}", again.all_after);
        let saved = std::fs::read_to_string(ctx.out_dir.join("caddy.json")).unwrap();
        assert!(
            saved.contains(&format!("\"/r{}\"", n - 1)),
            "caddy.json has the set"
        );
    }
    assert!(
        sizes[1] > sizes[0] * 20,
        "1,000 routes make a larger configuration than 10: {sizes:?}"
    );
    // Another path on a set host, or a route on the wrong host: 404.
    assert_eq!(on_host(&ctx, false, "h3.routes.test", "/r4").0, 404);
    assert_eq!(on_host(&ctx, false, "h3.routes.test", "/").0, 404);
    assert_eq!(on_host(&ctx, false, "h3.routes.test", "/r33/x").0, 404);
    // Over HTTPS by SNI: served with the lab certificate, no certificate management.
    let (status, route, _) = on_host(&ctx, true, "h3.routes.test", "/r33");
    assert_eq!((status, route.as_deref()), (200, Some("r33")));
    // Route 1000 is not in the configuration: probed, it never answers as itself. A
    // round over 1,000 routes takes Caddy much longer than nginx (every request tests
    // the route objects in order): a bound of a few rounds.
    let more = RouteSet::new(1001, 10);
    // A round over 1,000 routes takes Caddy most of a second: 5 s to probe them all.
    labsupport::assert_only_the_last_never_serves(http, &more, Duration::from_secs(5));
    // One more route at 1,000: it comes up, and the others stay.
    let (t0, _) = apply(&mut d, more);
    let got = routes::probe(http, &more, t0, Duration::from_secs(20), 4);
    eprintln!("caddy-api: 1001 routes: {got:?}");
    assert_eq!((got.served, got.never_count), (1001, 0), "{got:?}");
    // The main route is untouched by the set, over HTTPS and plain HTTP.
    assert_eq!(ids_seen(&ctx, 5), ids(["b1"]));
    let (status, route, backend) = on_host(&ctx, false, "localhost", "/x");
    assert_eq!((status, route, backend.as_deref()), (200, None, Some("b1")));
    // An endpoint change reaches the set's routes (their own proxy handlers) too.
    changed(&mut d, "endpoints", |d| {
        d.set_endpoints(std::slice::from_ref(&b2.endpoint))
    });
    assert_eq!(ids_seen(&ctx, 5), ids(["b2"]));
    let (status, route, backend) = on_host(&ctx, false, "h7.routes.test", "/r997");
    assert_eq!(
        (status, route.as_deref(), backend.as_deref()),
        (200, Some("r997"), Some("b2"))
    );
    // No set: the hosts fall to the main route.
    let (t0, _) = apply(&mut d, RouteSet::new(0, 10));
    let (status, route, backend) = on_host(&ctx, false, "h3.routes.test", "/r3");
    assert_eq!(
        (status, route, backend.as_deref()),
        (200, None, Some("b2")),
        "{:?} after the empty set",
        t0.elapsed()
    );
    assert_eq!(d.pid(), Some(pid), "caddy was restarted");
    d.stop().unwrap();
    assert!(!d.alive());
    drop((b1, b2));
}
