//! The two HAProxy profiles against real haproxy and real backends: endpoints change,
//! routes change, and the responses show each change took effect; nothing is left
//! running afterwards.

use crate::common::lab::haproxy::{Haproxy, Mode};
use crate::common::lab::{self as labsupport, Driver, Endpoint, Expect, Route};
use crate::common::shared;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Asks for a change, settles it, and returns how long settling took.
fn settled(d: &mut Haproxy, what: &str, change: impl FnOnce(&mut Haproxy)) -> Duration {
    let t = Instant::now();
    change(d);
    let asked = t.elapsed();
    let t = Instant::now();
    d.settle(&Expect::Applied, Duration::from_secs(5))
        .expect("settle");
    let took = t.elapsed();
    eprintln!("{}: {what}: request {asked:?}, settle {took:?}", d.name());
    took
}

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

    assert_eq!(labsupport::ids_seen(&ctx, 20), ids(&["b1", "b2"]));

    settled(&mut d, "endpoints b2,b3", |d| {
        d.set_endpoints(&[ep(1), ep(2)]).expect("set_endpoints")
    });
    assert_eq!(labsupport::ids_seen(&ctx, 20), ids(&["b2", "b3"]));

    settled(&mut d, "route cors", |d| {
        d.apply_route(Route::Cors).expect("cors")
    });
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
        ids(&["b2", "b3"]),
        "endpoints survive a route reload"
    );

    settled(&mut d, "route header", |d| {
        d.apply_route(Route::Header).expect("header")
    });
    let r = labsupport::get(&ctx, "/x");
    assert_eq!(r.header("x-custom"), Some("1"));
    assert_eq!(r.header("access-control-allow-origin"), None);

    settled(&mut d, "route rewrite", |d| {
        d.apply_route(Route::Rewrite).expect("rewrite")
    });
    let r = labsupport::get(&ctx, "/x");
    assert!(r.body.contains("uri: /rewritten/x"), "{r:?}");
    assert_eq!(r.header("x-custom"), None);

    settled(&mut d, "route base", |d| {
        d.apply_route(Route::Base).expect("base")
    });
    let r = labsupport::get(&ctx, "/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-custom"), None);
    assert!(r.body.contains("uri: /x"), "{r:?}");
    assert_eq!(labsupport::ids_seen(&ctx, 10), ids(&["b2", "b3"]));

    // An explicit reload keeps the endpoints too.
    settled(&mut d, "reload", |d| d.reload().expect("reload"));
    assert_eq!(labsupport::ids_seen(&ctx, 10), ids(&["b2", "b3"]));

    // No endpoints: a quick 503, not a hang.
    settled(&mut d, "no endpoints", |d| {
        d.set_endpoints(&[]).expect("empty")
    });
    let t = Instant::now();
    let r = labsupport::get(&ctx, "/");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());

    // A bad endpoint is refused before it reaches haproxy; the proxy goes on.
    let mut bad = ep(0);
    bad.addr.set_port(0);
    assert!(d.set_endpoints(&[bad]).is_err());
    settled(&mut d, "endpoints b1", |d| {
        d.set_endpoints(&[ep(0)]).expect("b1")
    });
    assert_eq!(labsupport::ids_seen(&ctx, 5), ids(&["b1"]));

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
