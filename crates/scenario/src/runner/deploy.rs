//! A case's system set up and serving before its load: platform, backends, proxy,
//! and the route set it is given first.

use super::system::{RoutesInForce, System};
use super::{served, RunError, RunOptions};
use crate::plan::{Case, RoutesPlan};
use lab::{certs, driver_for, Expect, SutError};
use results::clock::Clock;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One system set up and serving: its platform, driver and event log, before any load.
pub(crate) struct Deployed {
    pub(crate) sys: System,
    pub(super) ctx: lab::DriverContext,
    pub(crate) placement: lab::platform::Placement,
    pub(super) versions: BTreeMap<String, String>,
    /// The route set given before the load (`routes:`), as it came up.
    pub(super) route_set: Option<results::RouteSetResult>,
}

/// How long a cluster's route may take to serve once its objects are in: a
/// controller that reloads its proxy (HAProxy's, ingress-nginx) takes seconds.
const SERVED_WAIT: Duration = Duration::from_secs(30);

/// How long a route that never served is given to say it was refused: its status
/// was written long before (the wait for traffic lasted seconds).
const REFUSAL_READ: Duration = Duration::from_secs(2);

/// Sets up `case`'s system (its files in the case's folder): platform, backends,
/// proxy, and its route set.
pub(crate) fn deploy(case: &Case, opts: &RunOptions) -> Result<Deployed, RunError> {
    let name = case.system.as_str();
    let d = &case.deploy;
    let lab = |source| RunError::Lab {
        system: name.to_string(),
        source,
    };
    let placement = d.placement.clone();
    let mut site = d.site.clone();
    site.out_dir = opts.out_dir.join(&d.site.out_dir);
    let clock = Clock::start();
    let mut platform = match &opts.platform {
        Some(make) => make(case),
        None => d.platform.build(name, &opts.exe),
    }
    .map_err(lab)?;
    // A cluster offers its installed controllers, the network lab its direct server;
    // otherwise the lab's profiles.
    let driver = match platform.driver_for(name) {
        Some(d) => d,
        None => driver_for(name),
    }
    .map_err(lab)?;
    let mut sys = System::new(driver, platform, clock, opts);
    sys.stop_mode = d.stop;
    sys.platform.set_flapping(d.flapping.clone()).map_err(lab)?;
    let mut ctx = sys.platform.prepare(&site).map_err(lab)?;
    ctx.passive_health = d.passive.clone();
    ctx.count_handshakes = d.count_handshakes;
    let endpoints = sys.platform.endpoints();
    sys.driver
        .deploy(&ctx, &endpoints, Duration::from_secs(15))
        .map_err(lab)?;
    // On a cluster the route's objects say nothing of serving (an Ingress has no
    // condition at all): the load's first request must reach a backend first.
    if sys.platform.name() == "kubernetes" {
        let target = sys.platform.target();
        let mut spec = case.load.at(&target.url, target.cacert.clone());
        if d.routes.is_some() {
            // The set's routes are not given yet: its requests cannot serve.
            spec.targets.clear();
        }
        let bound = match &d.platform {
            crate::plan::PlatformSpec::Kubernetes(k) => k.serve_timeout,
            _ => None,
        };
        let answered = match &spec.http2.grpc {
            Some(call) => {
                served::wait_served_grpc(&spec, call, bound.unwrap_or(SERVED_WAIT)).map(drop)
            }
            None if spec.http2.protocol == engine::Protocol::Http1 => {
                let ours: Vec<String> = endpoints.iter().map(|e| e.id.clone()).collect();
                served::wait_served(&spec, bound.unwrap_or(SERVED_WAIT), &ours).map(drop)
            }
            None => Ok(()),
        };
        if let Err(why) = answered {
            let grpc = spec.http2.grpc.is_some();
            // Not served: the route's own status may say why (a controller that
            // refused it), which beats what the traffic got.
            if let Err(e @ SutError::Rejected { .. }) =
                sys.driver.settle(&Expect::Applied, REFUSAL_READ)
            {
                let what = if grpc {
                    "so its gRPC calls got no OK"
                } else {
                    "so it did not serve"
                };
                return Err(RunError::Setup(format!("{name}: {e} ({what}: {why})")));
            }
            let hint = if grpc {
                ""
            } else if why.contains("TLS") {
                " (the run's certificate was not served there: did the controller refuse its TLS Secret, or not take the route? Its log says why)"
            } else if why.contains(" 404 ") {
                " (is a controller watching it?)"
            } else {
                ""
            };
            return Err(RunError::Setup(format!(
                "{name}: {}: {why}{hint}",
                sys.driver.routed_by()
            )));
        }
    }
    if d.rotates_certificate {
        sys.serial = Some(certs::serial(&ctx.cert).map_err(lab)?);
    }
    let versions: BTreeMap<String, String> = sys.driver.versions().into_iter().collect();
    let route_set = match d.routes {
        Some(r) => {
            let addr = probe_addr(&ctx, &sys.platform.target().url)
                .map_err(|e| RunError::Setup(format!("{name}: routes: {e}")))?;
            let got = apply_route_set(&mut sys, addr, r, name)?;
            sys.routes = Some(RoutesInForce {
                set: r.set,
                addr,
                bound: r.bound,
                changes: Vec::new(),
            });
            Some(got)
        }
        None => None,
    };
    if sys.platform.target().netns.is_some() && opts.load.is_some() {
        return Err(RunError::Setup(format!(
            "{name}: the network lab's load leaves from a namespace of this process: run it without --generators"
        )));
    }
    Ok(Deployed {
        sys,
        ctx,
        placement,
        versions,
        route_set,
    })
}

/// Where a system's routes are probed: a local proxy's plain-HTTP port, or the
/// plain-HTTP address of a controller's data plane (the URL the load uses).
pub(super) fn probe_addr(
    ctx: &lab::DriverContext,
    url: &str,
) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if ctx.http_port != 0 {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], ctx.http_port)));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "the route probe speaks plain HTTP, and `{url}` is not an http:// URL: give the data plane's http:// address"
        ));
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("`{url}`: no address for {with_port}"))
}

/// Gives the system the scenario's route set and measures how long until every
/// route answers as itself, from the moment the driver was asked (the write, the
/// reload or the push; its settling included), probing `addr` over plain HTTP.
pub(super) fn apply_route_set(
    sys: &mut System,
    addr: std::net::SocketAddr,
    r: RoutesPlan,
    name: &str,
) -> Result<results::RouteSetResult, RunError> {
    let set = r.set;
    let fail = |source| RunError::Routes {
        system: name.to_string(),
        source,
    };
    let writes0 = sys.driver.route_status_writes();
    // What the system spends rendering the set: its processes read before and
    // after (a process that exits in between, an old worker, loses its share).
    let mut usage = lab::usage::Usage::default();
    let before = usage.read(&sys.driver.process_groups());
    let t0 = Instant::now();
    let config_bytes = sys.driver.apply_route_set(&set).map_err(fail)?;
    let apply_ms = t0.elapsed().as_secs_f64() * 1e3;
    // Traffic is probed while the driver settles, not after: a controller may serve
    // routes long before it reports them (Contour writes statuses at its client's
    // 5 per second, 40 s for 200 routes, while Envoy serves them all in seconds).
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let (settled, got) = std::thread::scope(|s| {
        let probe = s.spawn(|| lab::routes::probe_until(addr, &set, t0, r.bound, 4, &cancel));
        let settled = sys.driver.settle(&Expect::Applied, r.bound);
        if settled.is_err() {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let settled_ms = t0.elapsed().as_secs_f64() * 1e3;
        (settled.map(|()| settled_ms), probe.join())
    });
    let settled_ms = settled.map_err(fail)?;
    let got = got.map_err(|_| RunError::RouteProbe {
        system: name.to_string(),
    })?;
    let groups = sys.driver.process_groups();
    let after = usage.read(&groups);
    let (apply_cpu_s, rss_mib) = if groups.is_empty() {
        (None, None)
    } else {
        (
            Some((after.cpu_s - before.cpu_s).max(0.0)),
            Some(after.rss_bytes as f64 / f64::from(1u32 << 20)),
        )
    };
    let status_writes = sys
        .driver
        .route_status_writes()
        .map(|w| w.saturating_sub(writes0.unwrap_or(0)));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(results::RouteSetResult {
        count: set.count,
        hosts: set.hosts,
        config_bytes,
        apply_ms,
        settled_ms,
        all_served_ms: got.all_after.map(ms),
        bound_ms: ms(r.bound),
        served: got.served,
        never_count: got.never_count,
        never: got.never,
        probes: got.probes,
        misses: got.misses,
        status_writes,
        apply_cpu_s,
        rss_mib,
        changes: Vec::new(),
    })
}
