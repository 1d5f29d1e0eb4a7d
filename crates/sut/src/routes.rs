//! Routes at scale: a set of N routes over H virtual hosts that a system renders the
//! way its controller would, and the probe that measures how long it takes until
//! every one of them serves.
//!
//! Route `i` is the path `/r<i>` on host `h<i mod H>.routes.test`, and answers with
//! the header `x-route: r<i>`: a response names the route that served it, so a route
//! served by another (a catch-all, a stale configuration) is not counted as up. The
//! routes share the system's backends: the route count is the variable, not the pods.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The header each route adds to its responses, with the route's name as value.
pub const ROUTE_HEADER: &str = "x-route";

/// N routes over H hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteSet {
    pub count: u32,
    pub hosts: u32,
    /// The one route changed in place, if any: same host and path, a new marker
    /// (`r<i>v2`), as a user edits one route among N (the scenario's
    /// `route_set: change`).
    pub revised: Option<u32>,
}

impl RouteSet {
    /// `count` routes over `hosts` hosts (at least one, at most one per route).
    pub fn new(count: u32, hosts: u32) -> RouteSet {
        RouteSet {
            count,
            hosts: hosts.clamp(1, count.max(1)),
            revised: None,
        }
    }

    /// This set with route `i` changed in place, or changed back if it was.
    pub fn revise(&self, i: u32) -> RouteSet {
        RouteSet {
            revised: (self.revised != Some(i)).then_some(i),
            ..*self
        }
    }

    /// What route `i` answers with in [`ROUTE_HEADER`]: its name, or `r<i>v2`
    /// once it was changed in place.
    pub fn marker(&self, i: u32) -> String {
        if self.revised == Some(i) {
            format!("r{i}v2")
        } else {
            self.name(i)
        }
    }

    /// The host of route `i`.
    pub fn host(&self, i: u32) -> String {
        host_name(i % self.hosts)
    }

    /// The path of route `i`.
    pub fn path(&self, i: u32) -> String {
        format!("/r{i}")
    }

    /// The name of route `i` (what its objects are named after); it answers
    /// with [`RouteSet::marker`].
    pub fn name(&self, i: u32) -> String {
        format!("r{i}")
    }

    /// The routes of host `h`.
    pub fn routes_of(&self, h: u32) -> impl Iterator<Item = u32> + '_ {
        (h..self.count).step_by(self.hosts as usize)
    }

    /// Every host's name, in order.
    pub fn host_names(&self) -> impl Iterator<Item = String> {
        (0..self.hosts).map(host_name)
    }
}

/// The behaviour probes' fixture host (issue 44): when a run has probes, each
/// system also routes this host, as its controller renders an Ingress or HTTPRoute
/// of its own: the path [`FIXTURE_EMPTY_PATH`] to a backend set with no endpoint
/// (a Service with no ready pod), and nothing else. The probe `no-ready-endpoint`
/// asks that path, `unknown-path` another on the same host: two answers the run's
/// own route, which takes every path, cannot give.
pub const FIXTURE_HOST: &str = "fixture.probes.test";
/// The fixture's one path (a prefix), to backends with no endpoint.
pub const FIXTURE_EMPTY_PATH: &str = "/ib-empty";

fn host_name(h: u32) -> String {
    format!("h{h}.routes.test")
}

/// What the probe found: when each route first answered as itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Served {
    /// From the probe's start (the moment the configuration was applied) until the
    /// last route answered as itself; `None` when some never did within the bound.
    pub all_after: Option<Duration>,
    /// Routes that answered as themselves.
    pub served: u32,
    /// Routes that never did within the bound (their indices, at most 100 kept).
    pub never: Vec<u32>,
    /// How many never did (all of them, whatever `never` keeps).
    pub never_count: u32,
    /// Probe requests sent, and those answered by something else than the route
    /// (another status, another route's header, an error): a catch-all answering
    /// 404 before the route is in place is the common case.
    pub probes: u64,
    pub misses: u64,
}

/// Probes every route of `set` through `addr` (plain HTTP) until each has answered
/// 200 with its own [`ROUTE_HEADER`] once, or `bound` has passed since `since` (and
/// each was probed at least once: a busy machine's slow first round does not turn
/// routes nobody asked into routes never served); over
/// `threads` threads, each route polled again as soon as its thread comes back to it
/// (a round over N routes takes N probes' time, so at N = 1,000 and 4 threads on a
/// local proxy about 50 ms).
pub fn probe(
    addr: SocketAddr,
    set: &RouteSet,
    since: Instant,
    bound: Duration,
    threads: usize,
) -> Served {
    probe_until(addr, set, since, bound, threads, &AtomicBool::new(false))
}

/// [`probe`], given up once `cancel` is set (the routes not probed yet count as
/// never served): a probe that runs beside a controller's settling stops when the
/// settling failed.
pub fn probe_until(
    addr: SocketAddr,
    set: &RouteSet,
    since: Instant,
    bound: Duration,
    threads: usize,
    cancel: &AtomicBool,
) -> Served {
    let threads = threads.clamp(1, set.count.max(1) as usize);
    let out = Mutex::new((Duration::ZERO, 0u32, Vec::new(), 0u64, 0u64));
    std::thread::scope(|s| {
        for t in 0..threads {
            let out = &out;
            let stop = cancel;
            s.spawn(move || {
                let mut pending: Vec<u32> = (t as u32..set.count).step_by(threads).collect();
                let (mut last, mut served, mut probes, mut misses) = (Duration::ZERO, 0u32, 0, 0);
                // The first round probes every route whatever the bound: a route is
                // reported never served only once it was asked.
                let mut first = true;
                while !pending.is_empty() && !stop.load(Ordering::Relaxed) {
                    let before = pending.len();
                    pending.retain(|&i| {
                        if (!first && since.elapsed() > bound) || stop.load(Ordering::Relaxed) {
                            return true;
                        }
                        probes += 1;
                        if answers_as_itself(addr, set, i) {
                            last = last.max(since.elapsed());
                            served += 1;
                            false
                        } else {
                            misses += 1;
                            true
                        }
                    });
                    first = false;
                    if since.elapsed() > bound {
                        break;
                    }
                    if pending.len() == before {
                        // Nothing came up this round: a short pause, as
                        // gateway-api-bench's probe polls every 5 ms.
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                o.0 = o.0.max(last);
                o.1 += served;
                o.2.extend(pending);
                o.3 += probes;
                o.4 += misses;
            });
        }
    });
    let (last, served, mut never, probes, misses) =
        out.into_inner().unwrap_or_else(|e| e.into_inner());
    never.sort_unstable();
    let never_count = never.len() as u32;
    never.truncate(100);
    Served {
        all_after: (never_count == 0).then_some(last),
        served,
        never,
        never_count,
        probes,
        misses,
    }
}

/// Polls route `i` of `set` through `addr` every 5 ms until it answers as itself
/// (`served`) or stops doing so (`!served`), for at most `bound` after `since`: how
/// long after `since` that was first seen (`None`: not within the bound), and the
/// probes made. One route added to or removed from a running set, as
/// gateway-api-bench polls a new route until it answers 200 instead of 404.
pub fn watch(
    addr: SocketAddr,
    set: &RouteSet,
    i: u32,
    since: Instant,
    bound: Duration,
    served: bool,
) -> (Option<Duration>, u64) {
    let mut probes = 0;
    loop {
        probes += 1;
        if answers_as_itself(addr, set, i) == served {
            return (Some(since.elapsed()), probes);
        }
        if since.elapsed() > bound {
            return (None, probes);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One probe of route `i`: 200 with its own name in [`ROUTE_HEADER`].
fn answers_as_itself(addr: SocketAddr, set: &RouteSet, i: u32) -> bool {
    let host = set.host(i);
    match http1::client::request(
        addr,
        "GET",
        &set.path(i),
        &[("Host", host.as_str())],
        &[],
        Duration::from_secs(2),
    ) {
        Ok(r) => r.status == 200 && r.header(ROUTE_HEADER) == Some(set.marker(i).as_str()),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_spread_over_hosts_and_named() {
        let s = RouteSet::new(10, 3);
        assert_eq!(s.host(0), "h0.routes.test");
        assert_eq!(s.host(4), "h1.routes.test");
        assert_eq!((s.path(7).as_str(), s.name(7).as_str()), ("/r7", "r7"));
        let of1: Vec<u32> = s.routes_of(1).collect();
        assert_eq!(of1, vec![1, 4, 7]);
        let all: u32 = (0..3).map(|h| s.routes_of(h).count() as u32).sum();
        assert_eq!(all, 10);
        assert_eq!(RouteSet::new(2, 5).hosts, 2, "no more hosts than routes");
        assert_eq!(RouteSet::new(5, 0).hosts, 1);
        // One route changed in place: a new marker, the same name, host and path;
        // changed again, back as it was.
        let r = s.revise(4);
        assert_eq!((r.marker(4).as_str(), r.name(4).as_str()), ("r4v2", "r4"));
        assert_eq!((r.host(4), r.path(4)), (s.host(4), s.path(4)));
        assert_eq!(r.marker(3), "r3");
        assert_eq!(r.revise(4), s);
    }

    #[test]
    fn a_probe_of_nothing_listening_reports_every_route_as_never_served() {
        // A port nothing listens on: every probe is refused at once.
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let set = RouteSet::new(150, 2);
        let got = probe(addr, &set, Instant::now(), Duration::from_millis(100), 2);
        assert_eq!(got.all_after, None);
        assert_eq!((got.served, got.never_count), (0, 150));
        assert_eq!(got.never.len(), 100, "the first hundred are kept");
        assert_eq!(got.never[0], 0);
        assert!(got.probes >= 150 && got.misses == got.probes, "{got:?}");
    }

    #[test]
    fn every_route_is_probed_once_even_past_the_bound() {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let set = RouteSet::new(40, 2);
        // The bound passed before the probe began: one round still asks every route.
        let since = Instant::now() - Duration::from_secs(1);
        let got = probe(addr, &set, since, Duration::from_millis(10), 2);
        assert_eq!((got.probes, got.never_count), (40, 40), "{got:?}");
    }
}
