//! The `caddy-api` profile against a real Caddy: endpoint and route changes through
//! the admin API take effect (seen in responses), the process is never restarted,
//! and stopping leaves nothing behind.

use crate::common::lab::{self as labsupport, caddy::Caddy, ids_seen, Driver};
use crate::common::lab::{Endpoint, Expect, Resp, Route};
use crate::common::shared;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_secs(5);

fn ids(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Asks for a change, settles it, and prints what it cost (for the notes).
fn changed(d: &mut Caddy, label: &str, change: impl FnOnce(&mut Caddy)) {
    change(d);
    d.settle(&Expect::Applied, SETTLE).expect("settle");
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
    assert_eq!(ids_seen(&ctx, 20), ids(&["b1", "b2"]));
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
        d.set_endpoints(&[ep(&b2), ep(&b3)]).unwrap()
    });
    assert_eq!(ids_seen(&ctx, 20), ids(&["b2", "b3"]));
    let saved = std::fs::read_to_string(ctx.out_dir.join("caddy.json")).unwrap();
    assert!(saved.contains(&b3.endpoint.addr.to_string()));
    assert!(!saved.contains(&b1.endpoint.addr.to_string()));

    changed(&mut d, "cors", |d| d.apply_route(Route::Cors).unwrap());
    let r: Resp = labsupport::get(&ctx, "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, POST, OPTIONS")
    );
    assert_eq!(ids_seen(&ctx, 20), ids(&["b2", "b3"]));

    changed(&mut d, "header", |d| d.apply_route(Route::Header).unwrap());
    let r = labsupport::get(&ctx, "/");
    assert_eq!(r.header("x-custom"), Some("1"));
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert!(r.header("x-backend").is_some());

    changed(&mut d, "rewrite", |d| {
        d.apply_route(Route::Rewrite).unwrap()
    });
    let r = labsupport::get(&ctx, "/x");
    assert!(r.body.contains("uri: /rewritten/x"), "{}", r.body);
    assert_eq!(r.header("x-custom"), None);

    changed(&mut d, "base", |d| d.apply_route(Route::Base).unwrap());
    let r = labsupport::get(&ctx, "/x");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-custom"), None);
    assert!(r.body.contains("uri: /x"), "{}", r.body);

    // No endpoints: a quick 503, not a wait for retries.
    changed(&mut d, "no endpoints", |d| d.set_endpoints(&[]).unwrap());
    let t = Instant::now();
    let r = labsupport::get(&ctx, "/");
    assert!(matches!(r.status, 502 | 503), "{}", r.status);
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    changed(&mut d, "endpoints", |d| {
        d.set_endpoints(&[ep(&b2), ep(&b3)]).unwrap()
    });
    assert_eq!(ids_seen(&ctx, 20), ids(&["b2", "b3"]));

    changed(&mut d, "reload", |d| d.reload().unwrap());
    assert_eq!(ids_seen(&ctx, 10), ids(&["b2", "b3"]));

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
