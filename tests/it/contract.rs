//! The driver contract: what every registered profile must do on the `local`
//! platform, checked from the traffic it serves. A new driver (Envoy, a Kubernetes
//! controller, a network-namespace lab) joins [`lab::PROFILES`] and must pass this
//! suite unchanged:
//!
//! - it deploys in front of the platform's backends and serves all of them;
//! - after a scale, it settles on the expected endpoint set (pushed by the local
//!   controller when it takes endpoints) and traffic reaches exactly that set;
//! - each route change it claims shows in responses, and `base` removes it;
//! - a reload keeps serving the same set;
//! - it refuses what its capabilities say it cannot do;
//! - stopped, it is not alive and leaves no process behind.

use crate::common::lab::{assert_no_process_with, get, ids, ids_seen, path_text};
use crate::common::{processes_with, shared, BIN};
use lab::backends::StopMode;
use lab::endpoint_push::{self, Sync};
use lab::local::LocalProcesses;
use lab::platform::{fmt_set, BackendSpec, Placement, SiteSpec, TlsSpec};
use lab::{certs, Driver, Expect, Platform, PlatformEvent, Route, SutError, PROFILES};
use std::path::Path;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(10);

fn contract(profile: &lab::profiles::Profile) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(profile.name);
    let mut platform = LocalProcesses::new(Path::new(BIN));
    let place = Placement::for_this_machine();
    let ctx = platform
        .prepare(&SiteSpec {
            system: profile.name.to_string(),
            out_dir: out.clone(),
            backends: BackendSpec {
                body_size: 1024,
                delay: None,
                drain_timeout: Duration::from_secs(2),
                workers: 1,
                cpus: place.backends.clone(),
            },
            replicas: 2,
            proxy_cpus: place.proxy.clone(),
            tls: TlsSpec {
                enabled: true,
                key: certs::KeyType::Rsa2048,
                http2: false,
            },
            grpc: false,
            probe_fixture: false,
            probe_corpus: false,
        })
        .expect("platform prepares");
    let target = platform.target();
    assert_eq!(
        target.url,
        format!("https://127.0.0.1:{}/", ctx.https_port),
        "the load goes where the driver listens"
    );
    // The load trusts the served certificate (and the run's CA, for rotations).
    let trust = std::fs::read_to_string(target.cacert.as_deref().expect("a CA file")).unwrap();
    let cert = std::fs::read_to_string(&ctx.cert).unwrap();
    assert!(trust.contains(cert.trim()), "{trust}");
    assert_eq!(ctx.cpus, place.proxy, "the proxy gets its CPU set");
    assert_eq!(ctx.workers(), place.proxy.len());
    let mut d: Box<dyn Driver> = profile.driver();
    assert_eq!(d.name(), profile.name);
    let caps = d.capabilities();

    // Deploys in front of the platform's backends and serves all of them.
    let start = platform.endpoints();
    assert_eq!(start.len(), 2);
    d.deploy(&ctx, &start, Duration::from_secs(15))
        .unwrap_or_else(|e| panic!("{}: deploy: {e}", profile.name));
    assert!(d.alive());
    assert_eq!(
        ids_seen(&ctx, 12),
        ids(start.iter().map(|e| e.id.as_str())),
        "{}: serves every backend",
        profile.name
    );

    // Every process runs on its part's CPUs: the proxy on the proxy's, the backends on
    // theirs, none on the generator's (unless the machine has one CPU).
    let mut seen_proxy = false;
    for (pid, cmd) in processes_with(&path_text(&ctx.work_dir)) {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let Some(allowed) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(str::trim)
        else {
            continue;
        };
        let want = if cmd.contains(" backend ") {
            &place.backends
        } else {
            seen_proxy = true;
            &place.proxy
        };
        assert_eq!(allowed, fmt_set(want), "{}: {cmd}", profile.name);
    }
    assert!(
        seen_proxy,
        "{}: no proxy process names its scratch folder",
        profile.name
    );

    // Scale up: the platform names the new backend; traffic reaches exactly the set.
    let mut ready = Vec::new();
    platform.scale(3, StopMode::Graceful, &mut |ev| {
        if let PlatformEvent::Ready { endpoint, .. } = ev {
            ready.push(endpoint.id)
        }
    });
    assert_eq!(ready.len(), 1, "one backend added");
    let eps = platform.endpoints();
    let expect = match endpoint_push::endpoints_changed(d.as_mut(), &eps).expect("endpoints") {
        Sync::Pushed(e) => {
            assert!(caps.push_endpoints);
            e
        }
        Sync::Discovers(e) => {
            assert!(!caps.push_endpoints);
            e
        }
    };
    assert_eq!(expect, Expect::endpoints(&eps));
    d.settle(&expect, SETTLE)
        .expect("settle on three endpoints");
    assert_eq!(
        ids_seen(&ctx, 18),
        ids(eps.iter().map(|e| e.id.as_str())),
        "{}: the new backend serves",
        profile.name
    );

    // Scale down: the stopped backend leaves the set.
    let mut stopped = Vec::new();
    platform.scale(2, StopMode::Graceful, &mut |ev| {
        if let PlatformEvent::Stopping { id, .. } = ev {
            stopped.push(id)
        }
    });
    assert_eq!(stopped, ready, "the newest backend is removed");
    let eps = platform.endpoints();
    let expect = match endpoint_push::endpoints_changed(d.as_mut(), &eps).unwrap() {
        Sync::Pushed(e) | Sync::Discovers(e) => e,
    };
    d.settle(&expect, SETTLE).expect("settle on two endpoints");
    let seen = ids_seen(&ctx, 12);
    assert!(
        !seen.contains(&stopped[0]),
        "{}: {} still answers",
        profile.name,
        stopped[0]
    );

    // Route changes show in responses, and base takes them away.
    if caps.routes {
        d.apply_route(Route::Header).unwrap();
        d.settle(&Expect::Route(Route::Header), SETTLE).unwrap();
        assert_eq!(
            get(&ctx, "/").header("x-custom"),
            Some("1"),
            "{}",
            profile.name
        );
        d.apply_route(Route::Cors).unwrap();
        d.settle(&Expect::Route(Route::Cors), SETTLE).unwrap();
        assert_eq!(
            get(&ctx, "/").header("access-control-allow-origin"),
            Some("*"),
            "{}",
            profile.name
        );
        d.apply_route(Route::Rewrite).unwrap();
        d.settle(&Expect::Route(Route::Rewrite), SETTLE).unwrap();
        let r = get(&ctx, "/x");
        assert!(
            r.body.contains("uri: /rewritten/x"),
            "{}: {}",
            profile.name,
            r.body
        );
        d.apply_route(Route::Base).unwrap();
        d.settle(&Expect::Route(Route::Base), SETTLE).unwrap();
        let r = get(&ctx, "/x");
        assert!(r.body.contains("uri: /x"), "{}: {}", profile.name, r.body);
        assert_eq!(r.header("x-custom"), None);
        assert_eq!(r.header("access-control-allow-origin"), None);
    }

    // A reload keeps serving the same set.
    if caps.reload {
        d.reload().unwrap();
        d.settle(&Expect::Reloaded, SETTLE).unwrap();
        assert_eq!(
            ids_seen(&ctx, 12),
            ids(eps.iter().map(|e| e.id.as_str())),
            "{}: after reload",
            profile.name
        );
    } else {
        assert!(
            d.reload().is_err(),
            "{}: reload without the capability",
            profile.name
        );
    }
    if !caps.push_endpoints {
        assert!(matches!(
            d.set_endpoints(&eps),
            Err(SutError::Unsupported { .. })
        ));
    }

    // Stopped: not alive, nothing left.
    d.stop().unwrap();
    assert!(!d.alive(), "{}: alive after stop", profile.name);
    platform.teardown().unwrap();
    assert_no_process_with(&path_text(&out));
    assert_no_process_with(&path_text(&ctx.work_dir));
    assert!(
        !ctx.work_dir.exists(),
        "the platform's scratch folder is removed"
    );
}

#[test]
fn every_registered_profile_keeps_the_driver_contract() {
    let _turn = shared();
    assert!(PROFILES.len() >= 5);
    for p in PROFILES {
        eprintln!("contract: {}", p.name);
        contract(p);
    }
}
