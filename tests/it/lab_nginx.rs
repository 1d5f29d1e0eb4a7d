//! The nginx profiles against real nginx and real backends: endpoint changes, route
//! changes, a rejected change, an empty endpoint list, a reload, and a clean stop.

use crate::common::lab::nginx::{Mode, Nginx};
use crate::common::lab::{
    apply_set, assert_all_served, assert_no_process_with, assert_only_the_last_never_serves,
    backend, context, get, ids_seen, path_text,
};
use crate::common::lab::{Driver, DriverContext, Endpoint, Expect, Route, RouteSet, SutError};
use crate::common::shared;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Asks for a change, settles it and reports both times.
fn timed(what: &str, d: &mut Nginx, change: impl FnOnce(&mut Nginx) -> Result<(), SutError>) {
    let t = Instant::now();
    change(d).unwrap_or_else(|e| panic!("{what}: {e}"));
    let asked = t.elapsed();
    d.settle(&Expect::Applied, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{what}: settle: {e}"));
    eprintln!(
        "{}: {what}: request {:?}, settle {:?}",
        d.name(),
        asked,
        t.elapsed() - asked
    );
}

/// Established IPv4 connections whose remote port is `port` (nginx's side of its
/// upstream connections to a backend listening there).
fn established_to(port: u16) -> usize {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    tcp.lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let remote = f.get(2).and_then(|a| a.rsplit(':').next());
            let remote = remote.and_then(|p| u16::from_str_radix(p, 16).ok());
            remote == Some(port) && f.get(3) == Some(&"01")
        })
        .count()
}

fn route(d: &mut Nginx, r: Route) {
    timed(r.name(), d, |d| d.apply_route(r));
}

fn exercise(mode: Mode) {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = backend("b1");
    let b2 = backend("b2");
    let b3 = backend("b3");
    let ctx: DriverContext = context(dir.path());
    let (e1, e2, e3) = (
        b1.endpoint.clone(),
        b2.endpoint.clone(),
        b3.endpoint.clone(),
    );

    let mut d = Nginx::new(mode);
    assert!(d
        .versions()
        .iter()
        .any(|(n, v)| n == "nginx" && !v.is_empty()));
    d.prepare(&ctx, &[e1.clone(), e2.clone()]).unwrap();
    d.start().unwrap();
    let t = Instant::now();
    d.wait_ready(Duration::from_secs(10)).unwrap();
    eprintln!("{}: ready after {:?}", d.name(), t.elapsed());
    assert!(d.alive());
    assert_eq!(ids_seen(&ctx, 20), ids(&["b1", "b2"]));
    // Upstream keep-alive: 10 requests each went over one kept connection per backend.
    for e in [&e1, &e2] {
        let n = established_to(e.addr.port());
        assert!((1..=2).contains(&n), "{n} connections to {}", e.id);
    }

    // Endpoint change.
    timed("endpoints b2,b3", &mut d, |d| {
        d.set_endpoints(&[e2.clone(), e3.clone()])
    });
    assert_eq!(ids_seen(&ctx, 20), ids(&["b2", "b3"]));

    // Route changes: each reloads, and the endpoints stay.
    route(&mut d, Route::Cors);
    let r = get(&ctx, "/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, POST, OPTIONS")
    );
    route(&mut d, Route::Header);
    let r = get(&ctx, "/x");
    assert_eq!(r.header("x-custom"), Some("1"));
    assert_eq!(r.header("access-control-allow-origin"), None);
    route(&mut d, Route::Rewrite);
    let r = get(&ctx, "/x");
    assert!(r.body.contains("uri: /rewritten/x"), "body: {}", r.body);
    route(&mut d, Route::Base);
    let r = get(&ctx, "/x");
    assert_eq!(r.header("x-custom"), None);
    assert!(r.body.contains("uri: /x"), "body: {}", r.body);
    assert_eq!(ids_seen(&ctx, 20), ids(&["b2", "b3"]));

    // A change nginx (or the Lua admin server) refuses leaves the running set alone.
    let bad = Endpoint {
        id: "bad".into(),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    match d.set_endpoints(&[bad]) {
        Err(SutError::Rejected { detail, .. }) => eprintln!("{}: rejected: {detail}", d.name()),
        other => panic!("port 0 accepted: {other:?}"),
    }
    d.settle(&Expect::Applied, Duration::from_secs(5)).unwrap();
    assert_eq!(ids_seen(&ctx, 10), ids(&["b2", "b3"]));

    // No endpoints: requests fail at once instead of hanging.
    timed("endpoints none", &mut d, |d| d.set_endpoints(&[]));
    let t = Instant::now();
    let r = get(&ctx, "/");
    assert!(matches!(r.status, 502 | 503), "status {}", r.status);
    assert!(t.elapsed() < Duration::from_secs(2));

    // Back to one endpoint, then a plain reload keeps it.
    timed("endpoints b1", &mut d, |d| {
        d.set_endpoints(std::slice::from_ref(&e1))
    });
    assert_eq!(ids_seen(&ctx, 5), ids(&["b1"]));
    timed("reload", &mut d, |d| d.reload());
    assert_eq!(ids_seen(&ctx, 5), ids(&["b1"]));

    // A restart (stop + start): the Lua list is pushed again before ready.
    d.stop().unwrap();
    assert!(!d.alive());
    d.start().unwrap();
    d.wait_ready(Duration::from_secs(10)).unwrap();
    d.settle(&Expect::Applied, Duration::from_secs(5)).unwrap();
    assert_eq!(ids_seen(&ctx, 5), ids(&["b1"]));

    // The configuration is kept with the results, with its history.
    let conf = std::fs::read_to_string(ctx.out_dir.join("nginx.conf")).unwrap();
    assert!(conf.contains("proxy_pass http://backends;"));
    assert!(ctx.out_dir.join("nginx.conf.1").is_file());
    if mode == Mode::Reload {
        assert!(ctx.out_dir.join("nginx.conf.rejected").is_file());
    }
    // No warnings: e.g. `keepalive` placed before `balancer_by_lua_block` only warns
    // ("load balancing method redefined") and silently drops upstream keep-alive.
    let log = std::fs::read_to_string(ctx.out_dir.join("nginx.log")).unwrap();
    for l in log.lines().filter(|l| !l.contains("[notice]")) {
        eprintln!("{}: log: {l}", d.name());
    }
    assert!(!log.contains("[warn]"), "{log}");

    let t = Instant::now();
    d.stop().unwrap();
    eprintln!("{}: stop {:?}", d.name(), t.elapsed());
    assert!(!d.alive());
    assert_no_process_with(&path_text(&ctx.work_dir));
    drop((b1, b2, b3));
}

#[test]
fn nginx_reload_profile() {
    exercise(Mode::Reload);
}

#[test]
fn nginx_lua_profile() {
    exercise(Mode::Lua);
}

/// Routes at scale (issue 28): nginx-reload renders 10 and then 1,000 routes over 10
/// virtual hosts; after each reload every route answers as itself (its own
/// `x-route`), and the time until the last one did is measured from the moment the
/// configuration was applied. A route the configuration does not have is reported
/// as never served; adding it at 1,000 makes it serve.
#[test]
fn a_route_set_of_1000_over_10_hosts_serves_every_route() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = backend("b1");
    let ctx: DriverContext = context(dir.path());
    let http = SocketAddr::from(([127, 0, 0, 1], ctx.http_port));
    let mut d = Nginx::new(Mode::Reload);
    d.deploy(
        &ctx,
        std::slice::from_ref(&b1.endpoint),
        Duration::from_secs(10),
    )
    .unwrap();
    let mut sizes = Vec::new();
    for n in [10, 1000] {
        let set = RouteSet::new(n, 10);
        let (t0, bytes) = apply_set(&mut d, set);
        sizes.push(bytes);
        assert_all_served("nginx-reload", http, &set, t0);
    }
    assert!(
        sizes[1] > sizes[0] * 20,
        "1,000 routes make a larger configuration than 10: {sizes:?}"
    );
    // Route 1000 is not in the configuration: probed, it never answers as itself.
    let more = RouteSet::new(1001, 10);
    assert_only_the_last_never_serves(http, &more, Duration::from_millis(500));
    // One more route at 1,000: it comes up, and the others stay.
    let (t0, _) = apply_set(&mut d, more);
    assert_all_served("nginx-reload", http, &more, t0);
    // The main route is untouched by the set.
    assert_eq!(ids_seen(&ctx, 5), ids(&["b1"]));
    d.stop().unwrap();
}
