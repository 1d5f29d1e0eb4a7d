//! The two HAProxy profiles against real haproxy and real backends: endpoints change,
//! routes change, and the responses show each change took effect; nothing is left
//! running afterwards.

use crate::common::lab::haproxy::{Haproxy, Mode};
use crate::common::lab::{self as labsupport, routes, Driver, Endpoint, Route, RouteSet};
use crate::common::lab::{apply_set, assert_all_served, assert_only_the_last_never_serves};
use crate::common::lab::{ids, settle_change};
use crate::common::shared;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How long a change may take to settle.
const SETTLE: Duration = Duration::from_secs(5);

fn exercise(mode: Mode) {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b: Vec<_> = ["b1", "b2", "b3"]
        .iter()
        .map(|id| labsupport::backend(id))
        .collect();
    let ep = |i: usize| -> Endpoint { b[i].endpoint.clone() };
    let ctx = labsupport::context(dir.path());
    let mut d = Haproxy::new(mode);

    d.prepare(&ctx, &[ep(0), ep(1)]).expect("prepare");
    assert!(
        ctx.out_dir.join("haproxy.cfg").is_file(),
        "config kept in out_dir"
    );
    d.start().expect("start");
    let t = Instant::now();
    d.wait_ready(Duration::from_secs(10)).expect("ready");
    eprintln!("{}: ready after {:?}", d.name(), t.elapsed());
    assert!(d.alive());
    let v = d.versions();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].0, "haproxy");
    assert!(v[0].1.starts_with('2'), "{v:?}");

    assert_eq!(labsupport::ids_seen(&ctx, 20), ids(["b1", "b2"]));

    settle_change(&mut d, "endpoints b2,b3", SETTLE, |d| {
        d.set_endpoints(&[ep(1), ep(2)])
    });
    assert_eq!(labsupport::ids_seen(&ctx, 20), ids(["b2", "b3"]));

    settle_change(&mut d, "route cors", SETTLE, |d| d.apply_route(Route::Cors));
    let r = labsupport::get(&ctx, "/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, POST, OPTIONS")
    );
    assert!(r.header("x-backend").is_some());
    assert_eq!(
        labsupport::ids_seen(&ctx, 20),
        ids(["b2", "b3"]),
        "endpoints survive a route reload"
    );

    settle_change(&mut d, "route header", SETTLE, |d| {
        d.apply_route(Route::Header)
    });
    let r = labsupport::get(&ctx, "/x");
    assert_eq!(r.header("x-custom"), Some("1"));
    assert_eq!(r.header("access-control-allow-origin"), None);

    settle_change(&mut d, "route rewrite", SETTLE, |d| {
        d.apply_route(Route::Rewrite)
    });
    let r = labsupport::get(&ctx, "/x");
    assert!(r.body.contains("uri: /rewritten/x"), "{r:?}");
    assert_eq!(r.header("x-custom"), None);

    settle_change(&mut d, "route base", SETTLE, |d| d.apply_route(Route::Base));
    let r = labsupport::get(&ctx, "/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-custom"), None);
    assert!(r.body.contains("uri: /x"), "{r:?}");
    assert_eq!(labsupport::ids_seen(&ctx, 10), ids(["b2", "b3"]));

    // An explicit reload keeps the endpoints too.
    settle_change(&mut d, "reload", SETTLE, |d| d.reload());
    assert_eq!(labsupport::ids_seen(&ctx, 10), ids(["b2", "b3"]));

    // No endpoints: a quick 503, not a hang.
    settle_change(&mut d, "no endpoints", SETTLE, |d| d.set_endpoints(&[]));
    let t = Instant::now();
    let r = labsupport::get(&ctx, "/");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());

    // A bad endpoint is refused before it reaches haproxy; the proxy goes on.
    let mut bad = ep(0);
    bad.addr.set_port(0);
    assert!(d.set_endpoints(&[bad]).is_err());
    settle_change(&mut d, "endpoints b1", SETTLE, |d| {
        d.set_endpoints(&[ep(0)])
    });
    assert_eq!(labsupport::ids_seen(&ctx, 5), ids(["b1"]));

    let t = Instant::now();
    d.stop().expect("stop");
    eprintln!("{}: stop took {:?}", d.name(), t.elapsed());
    assert!(!d.alive());
    labsupport::assert_no_process_with(&labsupport::path_text(&ctx.work_dir));
    drop(b);
}

#[test]
fn haproxy_reload_follows_endpoint_and_route_changes() {
    exercise(Mode::Reload);
}

#[test]
fn haproxy_runtime_follows_endpoint_and_route_changes() {
    exercise(Mode::Runtime);
}

#[test]
fn a_port_in_use_is_reported_from_haproxy_log() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let ctx = labsupport::context(dir.path());
    let _taken = std::net::TcpListener::bind(("127.0.0.1", ctx.http_port)).unwrap();
    let mut d = Haproxy::new(Mode::Reload);
    d.prepare(&ctx, &[]).expect("prepare");
    d.start().expect("start");
    let err = d
        .wait_ready(Duration::from_secs(5))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot bind socket"), "{err}");
    d.stop().unwrap();
    labsupport::assert_no_process_with(&labsupport::path_text(&ctx.work_dir));
}

/// Routes at scale (issue 28), as the nginx test does it: 10 and then 1,000 routes
/// over 10 virtual hosts go into the frontend's map and haproxy reloads; every route
/// then answers as itself through the plain-HTTP port, timed from the moment the set
/// was applied. A route the set lacks is never served, and a request on a route host
/// with a path no route has is a 404; a set that cannot be installed leaves the one
/// before in force; adding a route at 1,000 brings it up; the main route, its rule
/// and its endpoints are untouched.
fn route_set_of_1000(mode: Mode) {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = labsupport::backend("b1");
    let ctx = labsupport::context(dir.path());
    let http = SocketAddr::from(([127, 0, 0, 1], ctx.http_port));
    let mut d = Haproxy::new(mode);
    d.deploy(
        &ctx,
        std::slice::from_ref(&b1.endpoint),
        Duration::from_secs(10),
    )
    .unwrap();
    settle_change(&mut d, "route header", SETTLE, |d| {
        d.apply_route(Route::Header)
    });
    let name = d.name();
    let mut sizes = Vec::new();
    for n in [10, 1000] {
        let set = RouteSet::new(n, 10);
        let (t0, bytes) = apply_set(&mut d, set);
        sizes.push(bytes);
        assert_all_served(name, http, &set, t0);
    }
    let map = std::fs::metadata(ctx.out_dir.join("routes.map"))
        .unwrap()
        .len();
    let cfg = std::fs::metadata(ctx.out_dir.join("haproxy.cfg"))
        .unwrap()
        .len();
    assert!(
        sizes[1] > map + cfg && map > 20 * 1000,
        "the map counts: {sizes:?}, map {map}, cfg {cfg}"
    );
    assert!(
        sizes[1] > sizes[0] * 10,
        "1,000 routes make a larger configuration than 10: {sizes:?}"
    );
    // Route 1000 is not in the set: probed, it never answers as itself; on its host
    // the path is a 404 from haproxy, not the main route.
    let more = RouteSet::new(1001, 10);
    assert_only_the_last_never_serves(http, &more, Duration::from_millis(500));
    let r = plain_get(http, &more.host(1000), &more.path(1000));
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(r.header("x-backend"), None, "{r:?}");
    // A route's response names it and nothing of the main route's rule.
    let r = plain_get(http, "H7.routes.test:80", "/r7");
    assert_eq!(
        (r.status, r.header("x-route"), r.header("x-custom")),
        (200, Some("r7"), None),
        "{r:?}"
    );
    assert_eq!(r.header("x-backend"), Some("b1"), "{r:?}");
    // A set that cannot be installed (its map cannot be written) is refused, and
    // the 1,000 routes stay, in haproxy and in the driver: a reload renders them.
    let blocker = ctx.out_dir.join("routes.map.new");
    std::fs::create_dir(&blocker).unwrap();
    assert!(d.apply_route_set(&RouteSet::new(5, 10)).is_err());
    std::fs::remove_dir(&blocker).unwrap();
    settle_change(&mut d, "reload after a refused set", SETTLE, |d| d.reload());
    let kept = RouteSet::new(1000, 10);
    let got = routes::probe(http, &kept, Instant::now(), Duration::from_secs(5), 4);
    assert_eq!((got.served, got.never_count), (1000, 0), "{got:?}");
    assert_eq!(
        std::fs::metadata(ctx.out_dir.join("routes.map"))
            .unwrap()
            .len(),
        map,
        "the map file is the 1,000 routes' still"
    );
    // One more route at 1,000: it comes up, and the others stay. haproxy-runtime
    // adds it to the running worker's map (`add map`, no reload: the same worker
    // answers after); haproxy-reload reloads (a new worker).
    let pid = worker_pid(&ctx);
    let (t0, bytes) = apply_set(&mut d, more);
    let got = routes::probe(http, &more, t0, Duration::from_secs(20), 4);
    eprintln!("{name}: 1001 routes: {got:?}, {bytes} bytes");
    assert_eq!((got.served, got.never_count), (1001, 0), "{got:?}");
    let map_text = std::fs::read_to_string(ctx.out_dir.join("routes.map")).unwrap();
    assert!(
        map_text.contains("h0.routes.test/r1000 r1000\n"),
        "the map file has the new route, for the next reload"
    );
    if mode == Mode::Runtime {
        assert_eq!(worker_pid(&ctx), pid, "{name} reloaded to add one route");
        assert!(
            bytes < 200,
            "{bytes} bytes: one runtime command, not a configuration"
        );
        // And takes it away the same way; a reload then renders what the driver holds.
        apply_set(&mut d, kept);
        assert_only_the_last_never_serves(http, &more, Duration::from_millis(500));
        assert_eq!(worker_pid(&ctx), pid, "{name} reloaded to remove one route");
        // One route changed in place (`set map`): it answers with its new marker,
        // its neighbours as before, the same worker; and back again.
        let revised = kept.revise(3);
        let (_, bytes) = apply_set(&mut d, revised);
        assert!(bytes < 200, "{bytes} bytes: one runtime command");
        let r = plain_get(http, &kept.host(3), &kept.path(3));
        assert_eq!(r.header("x-route"), Some("r3v2"), "{r:?}");
        let r = plain_get(http, &kept.host(4), &kept.path(4));
        assert_eq!(r.header("x-route"), Some("r4"), "{r:?}");
        assert_eq!(worker_pid(&ctx), pid, "{name} reloaded to change one route");
        apply_set(&mut d, kept);
        let r = plain_get(http, &kept.host(3), &kept.path(3));
        assert_eq!(r.header("x-route"), Some("r3"), "{r:?}");
        let (t0, _) = apply_set(&mut d, more);
        settle_change(&mut d, "reload after runtime routes", SETTLE, |d| {
            d.reload()
        });
        assert_ne!(worker_pid(&ctx), pid, "the reload gave a new worker");
        assert_all_served(name, http, &more, t0);
    } else {
        assert_ne!(worker_pid(&ctx), pid, "{name} adds a route by a reload");
    }
    // The main route is untouched by the set: its backend, its rule.
    assert_eq!(labsupport::ids_seen(&ctx, 5), ids(["b1"]));
    let r = labsupport::get(&ctx, "/r1");
    assert_eq!(
        (r.status, r.header("x-custom"), r.header("x-route")),
        (200, Some("1"), None)
    );
    // A set of none takes the routes away and leaves no map behind.
    let (_, bytes) = apply_set(&mut d, RouteSet::new(0, 10));
    assert_eq!(bytes, cfg_len(&ctx));
    assert!(!ctx.out_dir.join("routes.map").exists());
    let got = routes::probe(http, &kept, Instant::now(), Duration::from_millis(300), 4);
    assert_eq!(got.served, 0, "{got:?}");
    d.stop().unwrap();
    labsupport::assert_no_process_with(&labsupport::path_text(&ctx.work_dir));
}

/// The pid of the haproxy worker that answers on the admin socket (`show info`).
fn worker_pid(ctx: &crate::common::lab::DriverContext) -> u32 {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(ctx.work_dir.join("admin.sock")).unwrap();
    s.write_all(b"show info\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("Pid: "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Pid in show info: {text}"))
}

/// One plain-HTTP request with `host` as its Host header (HTTP/1.0: the answer
/// ends with the connection).
fn plain_get(addr: SocketAddr, host: &str, path: &str) -> labsupport::Resp {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    labsupport::Resp::parse(&text)
}

fn cfg_len(ctx: &crate::common::lab::DriverContext) -> u64 {
    std::fs::metadata(ctx.out_dir.join("haproxy.cfg"))
        .unwrap()
        .len()
}

#[test]
fn haproxy_reload_serves_a_route_set_of_1000_over_10_hosts() {
    route_set_of_1000(Mode::Reload);
}

#[test]
fn haproxy_runtime_serves_a_route_set_of_1000_over_10_hosts() {
    route_set_of_1000(Mode::Runtime);
}
