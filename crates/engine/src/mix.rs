//! A request mix: many requests in one run (`load --targets FILE`, a scenario's
//! `requests:`), each with its own method, host, path, headers, body and weight.
//!
//! Everything is decided before the run, so the hot loop only indexes:
//! - each request is encoded once ([`MixTarget::request`]);
//! - each connection carries one host (its `Host` and, over TLS, its server name),
//!   and the hosts get connections in proportion to their weight ([`spread`]);
//! - which target an intended request goes to follows from the schedule alone: a
//!   hash of the lane and the request's index in it, drawn by weight among its
//!   host's targets ([`Mix::pick`]). The same mix, rate and connections pick the
//!   same targets in the same order in every run, whichever connection is free.

use crate::targets::TargetSpec;
use hdrhistogram::Histogram;
use results::mix::MAX_GROUPS;
use results::{ErrorKind, MixGroup, MixResult};
use rustls::pki_types::ServerName;
use std::collections::BTreeMap;

/// One request of the mix, ready to write.
#[derive(Debug)]
pub struct MixTarget {
    pub request: Box<[u8]>,
    /// A HEAD request: its response has no body whatever its headers say.
    pub head: bool,
    pub host: u32,
    pub weight: u32,
    /// `GET a.example/path`: how the result names it.
    pub name: String,
    /// The group its figures go to.
    pub group: u32,
}

/// One host: the authority its requests name, and the connections that carry them.
#[derive(Debug)]
pub struct MixHost {
    /// As in the `Host` header (`a.example`, `a.example:8443`).
    pub authority: String,
    /// The TLS server name (SNI) of its connections: the authority without its port.
    pub server_name: Option<ServerName<'static>>,
    /// Its targets, and their cumulative weights (for the draw).
    pub targets: Box<[u32]>,
    cumulative: Box<[u64]>,
}

impl MixHost {
    /// The host's total weight.
    pub fn weight(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

/// What one request of the mix is, before it is encoded.
pub struct MixRequest<'a> {
    pub method: &'a str,
    /// The authority it names (`Host`), and its path and query.
    pub authority: String,
    pub path: String,
    pub headers: &'a [String],
    pub body: &'a [u8],
    pub weight: u32,
}

/// The whole mix, shared read-only by the workers.
#[derive(Debug)]
pub struct Mix {
    pub targets: Vec<MixTarget>,
    pub hosts: Vec<MixHost>,
    /// Group names, and what a group is (see [`MAX_GROUPS`]).
    pub groups: Vec<String>,
    pub grouped_by: String,
    /// Whether the result reports the mix (a mix given by the user; not the single
    /// request of a plain run).
    pub reported: bool,
    /// Connections per host.
    pub connections: Vec<u64>,
    /// The host of each connection of the run, by its index among all of them.
    pub conn_host: Vec<u32>,
}

/// A problem with one request of the mix: which one (its index) and what.
#[derive(Debug, PartialEq, Eq)]
pub struct MixError {
    pub index: usize,
    pub problem: String,
}

impl Mix {
    /// The mix of `requests` over `connections` connections; `close`: each request
    /// asks for the connection to close (`--new-connection`).
    ///
    /// # Errors
    /// The first request that cannot be encoded, or fewer connections than hosts.
    pub fn new(
        requests: &[MixRequest],
        connections: usize,
        close: bool,
        tls: bool,
        reported: bool,
    ) -> Result<Mix, MixError> {
        let mut host_index: BTreeMap<String, u32> = BTreeMap::new();
        let mut hosts: Vec<(String, Vec<u32>)> = Vec::new();
        let mut targets = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let bad = |problem: String| MixError { index: i, problem };
            if r.weight == 0 {
                return Err(bad("weight 0: give a whole number from 1 up".into()));
            }
            if !r.path.starts_with('/') {
                return Err(bad(format!(
                    "path '{}' does not start with /: write /path",
                    r.path
                )));
            }
            let t = http1::Target {
                tls,
                host: r.authority.clone(),
                port: 0,
                path: r.path.clone(),
            };
            let mut headers = Vec::with_capacity(r.headers.len() + 1);
            if !r.headers.iter().any(|h| {
                h.split(':')
                    .next()
                    .is_some_and(|n| n.trim().eq_ignore_ascii_case("host"))
            }) {
                headers.push(format!("Host: {}", r.authority));
            }
            headers.extend(r.headers.iter().cloned());
            let request =
                http1::encode_request(r.method, &t, &headers, r.body, close).map_err(bad)?;
            let h = *host_index.entry(r.authority.clone()).or_insert_with(|| {
                hosts.push((r.authority.clone(), Vec::new()));
                (hosts.len() - 1) as u32
            });
            hosts[h as usize].1.push(i as u32);
            targets.push(MixTarget {
                request: request.into_boxed_slice(),
                head: r.method.eq_ignore_ascii_case("HEAD"),
                host: h,
                weight: r.weight,
                name: format!(
                    "{} {}{}",
                    r.method.to_ascii_uppercase(),
                    r.authority,
                    r.path
                ),
                group: 0,
            });
        }
        if hosts.len() > connections {
            return Err(MixError {
                index: usize::MAX,
                problem: format!(
                    "{} hosts need at least as many connections: each connection carries one host",
                    hosts.len()
                ),
            });
        }
        let hosts: Vec<MixHost> = hosts
            .into_iter()
            .map(|(authority, ts)| {
                let mut sum = 0u64;
                let cumulative = ts
                    .iter()
                    .map(|&t| {
                        sum += u64::from(targets[t as usize].weight);
                        sum
                    })
                    .collect();
                let name = authority_host(&authority);
                MixHost {
                    server_name: ServerName::try_from(name.to_string()).ok(),
                    authority,
                    targets: ts.into_boxed_slice(),
                    cumulative,
                }
            })
            .collect();
        if let Some(h) = hosts.iter().find(|h| tls && h.server_name.is_none()) {
            let index = targets
                .iter()
                .position(|t| hosts[t.host as usize].authority == h.authority);
            return Err(MixError {
                index: index.unwrap_or(0),
                problem: format!(
                    "host '{}' is not a name TLS can ask for (SNI): give a DNS name or an IP address",
                    h.authority
                ),
            });
        }
        let weights: Vec<u64> = hosts.iter().map(MixHost::weight).collect();
        let conn_host = spread(&weights, connections);
        let mut per_host = vec![0u64; hosts.len()];
        for &h in &conn_host {
            per_host[h as usize] += 1;
        }
        let mut mix = Mix {
            targets,
            hosts,
            groups: Vec::new(),
            grouped_by: String::new(),
            reported,
            connections: per_host,
            conn_host,
        };
        mix.group();
        Ok(mix)
    }

    /// The one request of a plain run, on every connection.
    pub fn single(
        request: Vec<u8>,
        head: bool,
        authority: String,
        server_name: Option<ServerName<'static>>,
        connections: usize,
    ) -> Mix {
        Mix {
            targets: vec![MixTarget {
                request: request.into_boxed_slice(),
                head,
                host: 0,
                weight: 1,
                name: String::new(),
                group: 0,
            }],
            hosts: vec![MixHost {
                authority,
                server_name,
                targets: vec![0].into_boxed_slice(),
                cumulative: vec![1].into_boxed_slice(),
            }],
            groups: Vec::new(),
            grouped_by: String::new(),
            reported: false,
            connections: vec![connections as u64],
            conn_host: vec![0; connections],
        }
    }

    /// One group per target up to [`MAX_GROUPS`], else one per host, else the first
    /// hosts and one for the rest.
    fn group(&mut self) {
        if self.targets.len() <= MAX_GROUPS {
            self.grouped_by = "target".into();
            self.groups = self.targets.iter().map(|t| t.name.clone()).collect();
            for (i, t) in self.targets.iter_mut().enumerate() {
                t.group = i as u32;
            }
        } else if self.hosts.len() <= MAX_GROUPS {
            self.grouped_by = "host".into();
            self.groups = self.hosts.iter().map(|h| h.authority.clone()).collect();
            for t in &mut self.targets {
                t.group = t.host;
            }
        } else {
            let first = MAX_GROUPS - 1;
            self.grouped_by = format!("host (the first {first}, then the rest)");
            self.groups = self.hosts[..first]
                .iter()
                .map(|h| h.authority.clone())
                .collect();
            self.groups
                .push(format!("the other {} hosts", self.hosts.len() - first));
            for t in &mut self.targets {
                t.group = t.host.min(first as u32);
            }
        }
    }

    /// The target of request `k` of a lane whose key is `lane` and whose connections
    /// carry `host`: a draw by weight among the host's targets that depends on
    /// nothing but these three numbers.
    #[inline]
    pub fn pick(&self, host: u32, lane: u64, k: u64) -> u32 {
        let h = &self.hosts[host as usize];
        if h.targets.len() == 1 {
            return h.targets[0];
        }
        let r = splitmix(lane.rotate_left(32) ^ k) % h.weight();
        let i = h.cumulative.partition_point(|&c| c <= r);
        h.targets[i]
    }

    /// The figures of a run's tally, as the result gives them.
    pub fn result(&self, tally: &MixTally) -> MixResult {
        let total: u64 = self.targets.iter().map(|t| u64::from(t.weight)).sum();
        let mut share = vec![0u64; self.groups.len()];
        for t in &self.targets {
            share[t.group as usize] += u64::from(t.weight);
        }
        let groups = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let g = tally.groups.get(i);
                let mut errors = BTreeMap::new();
                let mut status_codes = BTreeMap::new();
                let (mut ok, mut latency, mut histogram) = (0, None, String::new());
                if let Some(g) = g {
                    ok = g.ok;
                    for k in ErrorKind::ALL {
                        let n = g.errors[k.index()];
                        if n > 0 {
                            errors.insert(k.name().to_string(), n);
                        }
                    }
                    for &(code, n) in &g.status {
                        if n > 0 {
                            status_codes.insert(code.to_string(), n);
                        }
                    }
                    latency = results::mix::GroupLatency::of(&g.latency);
                    if latency.is_some() {
                        histogram = results::histogram::encode_base64(&g.latency);
                    }
                }
                let failed: u64 = errors.values().sum();
                MixGroup {
                    name: name.clone(),
                    share: share[i] as f64 / total.max(1) as f64,
                    requests: ok + failed,
                    ok,
                    errors,
                    status_codes,
                    latency_ms: latency,
                    histogram,
                }
            })
            .collect();
        MixResult {
            grouped_by: self.grouped_by.clone(),
            targets: self.targets.len() as u64,
            hosts: self
                .hosts
                .iter()
                .enumerate()
                .map(|(i, h)| results::MixHost {
                    host: h.authority.clone(),
                    connections: self.connections[i],
                    requests: tally.host_requests.get(i).copied().unwrap_or(0),
                })
                .collect(),
            groups,
        }
    }
}

/// `a.example` of `a.example:8443`, `::1` of `[::1]:443`.
fn authority_host(a: &str) -> &str {
    if let Some(v6) = a.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    match a.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => a,
    }
}

/// SplitMix64's finaliser: a well-mixed 64-bit value of `x`.
#[inline]
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The host of each of `n` connections, for hosts of `weights`: every host gets at
/// least one; the rest go by weight (largest remainder), and the sequence
/// interleaves the hosts (smooth weighted round-robin), so that each worker thread,
/// which takes a contiguous range of connections, carries every host it can.
///
/// # Panics
/// With more hosts than connections (the caller refuses that first).
pub fn spread(weights: &[u64], n: usize) -> Vec<u32> {
    let hosts = weights.len();
    assert!(
        hosts <= n && hosts > 0,
        "{hosts} hosts over {n} connections"
    );
    let total: u64 = weights.iter().sum::<u64>().max(1);
    let spare = (n - hosts) as u64;
    // Whole shares of the spare connections, then the largest remainders.
    let mut count: Vec<u64> = weights.iter().map(|w| 1 + spare * w / total).collect();
    let mut rest = n as u64 - count.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..hosts).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((spare * weights[i]) % total));
    for &i in order.iter().cycle() {
        if rest == 0 {
            break;
        }
        count[i] += 1;
        rest -= 1;
    }
    // Smooth weighted round-robin over the counts.
    let mut current = vec![0i64; hosts];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut best = 0;
        for i in 0..hosts {
            current[i] += count[i] as i64;
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= n as i64;
        out.push(best as u32);
    }
    out
}

/// One group's outcomes, kept by one worker.
#[derive(Clone, Debug)]
pub struct GroupTally {
    pub ok: u64,
    pub errors: [u64; ErrorKind::COUNT],
    /// Responses of 400 and above, by code (few codes: a list).
    pub status: Vec<(u16, u64)>,
    /// Corrected latency, µs (two significant digits: about 20 KB each).
    pub latency: Histogram<u64>,
}

impl GroupTally {
    fn new() -> Self {
        GroupTally {
            ok: 0,
            errors: [0; ErrorKind::COUNT],
            status: Vec::new(),
            latency: Histogram::new_with_bounds(1, results::histogram::MAX_LATENCY_US, 2)
                .expect("valid bounds"),
        }
    }

    fn code(&mut self, status: u16) -> &mut u64 {
        let i = match self.status.iter().position(|(c, _)| *c == status) {
            Some(i) => i,
            None => {
                self.status.push((status, 0));
                self.status.len() - 1
            }
        };
        &mut self.status[i].1
    }
}

/// A worker's outcomes by group of the mix, and its requests by host; empty for a
/// run without a reported mix.
#[derive(Clone, Debug, Default)]
pub struct MixTally {
    pub groups: Vec<GroupTally>,
    pub host_requests: Vec<u64>,
}

impl MixTally {
    /// Room for `mix`'s groups and hosts, before the run (nothing grows after).
    pub fn for_mix(mix: &Mix) -> Self {
        if !mix.reported {
            return MixTally::default();
        }
        MixTally {
            groups: (0..mix.groups.len()).map(|_| GroupTally::new()).collect(),
            host_requests: vec![0; mix.hosts.len()],
        }
    }

    #[inline]
    pub fn sent(&mut self, host: u32) {
        if let Some(n) = self.host_requests.get_mut(host as usize) {
            *n += 1;
        }
    }

    #[inline]
    pub fn response(&mut self, group: u32, latency_ns: u64, status: u16) {
        let Some(g) = self.groups.get_mut(group as usize) else {
            return;
        };
        let us = (latency_ns / 1000).clamp(1, results::histogram::MAX_LATENCY_US);
        g.latency.saturating_record(us);
        if status >= 400 {
            g.errors[ErrorKind::Status.index()] += 1;
            *g.code(status) += 1;
        } else {
            g.ok += 1;
        }
    }

    /// A request cut short by the drain's deadline: a timeout, and its latency so far
    /// when `record`.
    pub fn censored(&mut self, group: u32, latency_ns: u64, record: bool) {
        let Some(g) = self.groups.get_mut(group as usize) else {
            return;
        };
        if record {
            let us = (latency_ns / 1000).clamp(1, results::histogram::MAX_LATENCY_US);
            g.latency.saturating_record(us);
        }
        g.errors[ErrorKind::Timeout.index()] += 1;
    }

    #[inline]
    pub fn error(&mut self, group: u32, kind: ErrorKind) {
        if let Some(g) = self.groups.get_mut(group as usize) {
            g.errors[kind.index()] += 1;
        }
    }

    /// A response counted before turns out to be followed by stray bytes: its
    /// outcome becomes a `framing` error (see `stats::Recorder::desync`).
    pub fn desync(&mut self, group: u32, status: u16) {
        let Some(g) = self.groups.get_mut(group as usize) else {
            return;
        };
        if status >= 400 {
            let i = ErrorKind::Status.index();
            g.errors[i] = g.errors[i].saturating_sub(1);
            let c = g.code(status);
            *c = c.saturating_sub(1);
        } else {
            g.ok = g.ok.saturating_sub(1);
        }
        g.errors[ErrorKind::Framing.index()] += 1;
    }

    /// Adds another worker's tally.
    pub fn merge(&mut self, o: &MixTally) {
        if self.groups.is_empty() {
            *self = o.clone();
            return;
        }
        for (a, b) in self.groups.iter_mut().zip(&o.groups) {
            a.ok += b.ok;
            for (x, y) in a.errors.iter_mut().zip(b.errors) {
                *x += y;
            }
            for &(code, n) in &b.status {
                *a.code(code) += n;
            }
            let _ = a.latency.add(&b.latency);
        }
        for (a, b) in self.host_requests.iter_mut().zip(&o.host_requests) {
            *a += b;
        }
    }
}

/// The mix of a targets file: each target's URL names its host and path; a `Host`
/// header in the target names the host instead (Vegeta's way of addressing a
/// virtual host at an IP address).
pub fn requests_of(targets: &[TargetSpec]) -> Result<Vec<MixRequest<'_>>, MixError> {
    targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let u =
                http1::Target::parse(&t.url).map_err(|problem| MixError { index: i, problem })?;
            let from_url = u.host_header();
            let header = t.headers.iter().find_map(|h| {
                let (n, v) = h.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case("host")
                    .then(|| v.trim().to_string())
            });
            Ok(MixRequest {
                method: &t.method,
                authority: header.unwrap_or(from_url),
                path: u.path,
                headers: &t.headers,
                body: &t.body,
                weight: t.weight,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(authority: &str, path: &str, weight: u32) -> MixRequest<'a> {
        MixRequest {
            method: "GET",
            authority: authority.into(),
            path: path.into(),
            headers: &[],
            body: &[],
            weight,
        }
    }

    #[test]
    fn spread_gives_each_host_a_connection_then_goes_by_weight() {
        let s = spread(&[1, 1, 2], 10);
        let count = |h: u32| s.iter().filter(|&&x| x == h).count();
        assert_eq!(s.len(), 10);
        // 7 spare by weight 1:1:2 is 1.75, 1.75, 3.5: whole 1, 1, 3, the remaining two
        // to the largest remainders (0.75, 0.75).
        assert_eq!((count(0), count(1), count(2)), (3, 3, 4));
        // Interleaved: the first half carries every host.
        let first: std::collections::BTreeSet<u32> = s[..5].iter().copied().collect();
        assert_eq!(first.len(), 3, "{s:?}");
        assert_eq!(spread(&[5, 1], 2), vec![0, 1]);
    }

    #[test]
    fn picks_follow_the_weights_and_the_schedule_alone() {
        let m = Mix::new(
            &[req("a", "/1", 1), req("a", "/2", 3), req("b", "/", 1)],
            4,
            false,
            false,
            true,
        )
        .unwrap();
        assert_eq!(m.hosts.len(), 2);
        let mut n = [0u32; 3];
        for k in 0..40_000 {
            n[m.pick(0, 7, k) as usize] += 1;
        }
        assert_eq!(n[2], 0, "host a's draws stay on host a");
        let share = f64::from(n[1]) / 40_000.0;
        assert!((share - 0.75).abs() < 0.01, "weight 3 of 4: {share}");
        // The same lane and index give the same target; other lanes differ.
        let seq = |lane| (0..64).map(|k| m.pick(0, lane, k)).collect::<Vec<_>>();
        assert_eq!(seq(7), seq(7));
        assert_ne!(seq(7), seq(8));
        assert_eq!(m.pick(1, 3, 5), 2);
    }

    #[test]
    fn requests_name_their_host_and_are_encoded_once() {
        let m = Mix::new(&[req("a.example:8080", "/x?y=1", 1)], 1, false, false, true).unwrap();
        let r = std::str::from_utf8(&m.targets[0].request).unwrap();
        assert!(r.starts_with("GET /x?y=1 HTTP/1.1\r\n"), "{r}");
        assert!(r.contains("Host: a.example:8080\r\n"), "{r}");
        assert_eq!(m.targets[0].name, "GET a.example:8080/x?y=1");
        assert_eq!(
            m.hosts[0]
                .server_name
                .as_ref()
                .map(|n| n.to_str().into_owned()),
            Some("a.example".into())
        );
    }

    #[test]
    fn bad_requests_name_their_index() {
        let e = Mix::new(&[req("a", "/", 1), req("a", "x", 1)], 2, false, false, true).unwrap_err();
        assert_eq!(e.index, 1);
        assert!(e.problem.contains("does not start with /"), "{}", e.problem);
        let e = Mix::new(&[req("a", "/", 0)], 2, false, false, true).unwrap_err();
        assert!(e.problem.starts_with("weight 0"), "{}", e.problem);
        let e = Mix::new(&[req("a", "/", 1), req("b", "/", 1)], 1, false, false, true).unwrap_err();
        assert!(e
            .problem
            .contains("2 hosts need at least as many connections"));
    }

    #[test]
    fn groups_are_targets_then_hosts_then_the_first_hosts() {
        let many = |hosts: usize, per: usize| {
            let v: Vec<MixRequest> = (0..hosts * per)
                .map(|i| req(&format!("h{}", i / per), &format!("/{i}"), 1))
                .collect();
            Mix::new(&v, hosts.max(1), false, false, true).unwrap()
        };
        let m = many(2, 3);
        assert_eq!((m.grouped_by.as_str(), m.groups.len()), ("target", 6));
        let m = many(10, 30);
        assert_eq!((m.grouped_by.as_str(), m.groups.len()), ("host", 10));
        assert_eq!(m.targets[299].group, 9);
        let m = many(300, 1);
        assert_eq!(m.groups.len(), MAX_GROUPS);
        assert_eq!(m.targets[299].group, (MAX_GROUPS - 1) as u32);
        assert_eq!(m.groups[MAX_GROUPS - 1], "the other 45 hosts");
    }

    #[test]
    fn tallies_merge_and_report_by_group() {
        let m = Mix::new(
            &[req("a", "/1", 1), req("a", "/2", 1)],
            2,
            false,
            false,
            true,
        )
        .unwrap();
        let mut a = MixTally::for_mix(&m);
        let mut b = MixTally::for_mix(&m);
        a.sent(0);
        a.response(0, 2_000_000, 200);
        b.sent(0);
        b.response(0, 4_000_000, 503);
        b.error(1, ErrorKind::Timeout);
        b.response(1, 1_000_000, 200);
        b.desync(1, 200);
        a.merge(&b);
        let r = m.result(&a);
        assert_eq!(r.hosts[0].requests, 2);
        let g = &r.groups[0];
        assert_eq!((g.requests, g.ok), (2, 1));
        assert_eq!(g.status_codes.get("503"), Some(&1));
        assert_eq!(g.errors.get("status"), Some(&1));
        assert!((g.latency_ms.as_ref().unwrap().max - 4.0).abs() < 0.05);
        let g = &r.groups[1];
        assert_eq!((g.requests, g.ok), (2, 0));
        assert_eq!(g.errors.get("framing"), Some(&1));
        assert!((r.groups[0].share - 0.5).abs() < 1e-9);
    }
}
