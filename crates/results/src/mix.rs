//! A run over a request mix (`load --targets FILE`, a scenario's `requests:`): what
//! each target, or each group of targets, got. Routes at scale fail one route at a
//! time (a virtual host missing from a reload, a route that never came up), and the
//! run's totals hide that: these figures show it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most groups a result keeps figures for: one per target up to this many,
/// otherwise one per host up to this many, otherwise the first hosts and one group
/// for the rest. Each group costs a histogram per worker thread (about 20 KB), so
/// this bounds the memory a mix of any size adds.
pub const MAX_GROUPS: usize = 256;

/// The mix's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixResult {
    /// What a group is: `target`, `host`, or `host (first N, then the rest)`.
    pub grouped_by: String,
    /// Targets in the mix.
    pub targets: u64,
    /// Each host (authority and TLS server name): the connections that carried it and
    /// the requests it was given.
    pub hosts: Vec<MixHost>,
    /// Each group's outcomes, in the mix's order.
    pub groups: Vec<MixGroup>,
}

/// One host of the mix.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixHost {
    pub host: String,
    pub connections: u64,
    /// Measured requests sent to it.
    pub requests: u64,
}

/// One group's outcomes over the measured window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixGroup {
    /// `GET a.example/path` for a target; the host for a host group.
    pub name: String,
    /// The group's share of the mix's weight, 0-1.
    pub share: f64,
    /// Requests with an outcome (a response or an error).
    pub requests: u64,
    /// Responses below 400.
    pub ok: u64,
    /// Errors by kind (`status`, `timeout`, ...), only the kinds that occurred.
    pub errors: BTreeMap<String, u64>,
    /// Responses of 400 and above, by code.
    pub status_codes: BTreeMap<String, u64>,
    /// Corrected latency of the group's responses (and of requests cut short at the
    /// end), ms; absent when it had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<GroupLatency>,
    /// The group's corrected latency histogram (µs, base64 V2, as the run's own
    /// `histogram`), so the groups of generators and of repetitions add up exactly
    /// ([`merge`]); empty when it had no latency.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub histogram: String,
}

/// A group's latency percentiles, ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupLatency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl MixGroup {
    /// Errors of every kind.
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }
}

impl GroupLatency {
    /// The percentiles of a group's latency histogram (µs); `None` when empty.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Option<GroupLatency> {
        if h.is_empty() {
            return None;
        }
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        Some(GroupLatency {
            p50: ms(0.5),
            p90: ms(0.9),
            p99: ms(0.99),
            max: h.max() as f64 / 1000.0,
        })
    }
}

/// The mixes of several runs of one request mix as one: the parts of one load split
/// over generators (`parallel`: a host's connections are summed, each part opened
/// its own) or its repetitions (one after another: a host's connections are the
/// most any repetition opened). Counts are summed and each group's latency comes
/// from its histograms added, never from percentiles averaged.
///
/// # Errors
/// When the parts ran different mixes (their groups differ), or a group's
/// histogram cannot be decoded.
pub fn merge(parts: &[&MixResult], parallel: bool) -> Result<MixResult, String> {
    let Some(first) = parts.first() else {
        return Err("no mix to merge".into());
    };
    let mut out = (*first).clone();
    for (k, p) in parts.iter().enumerate().skip(1) {
        let same = p.grouped_by == first.grouped_by
            && p.targets == first.targets
            && p.groups.len() == first.groups.len()
            && p.groups
                .iter()
                .zip(&first.groups)
                .all(|(a, b)| a.name == b.name)
            && p.hosts.len() == first.hosts.len()
            && p.hosts
                .iter()
                .zip(&first.hosts)
                .all(|(a, b)| a.host == b.host);
        if !same {
            return Err(format!(
                "part {} ran another request mix than part 1",
                k + 1
            ));
        }
        for (h, ph) in out.hosts.iter_mut().zip(&p.hosts) {
            h.requests += ph.requests;
            h.connections = if parallel {
                h.connections + ph.connections
            } else {
                h.connections.max(ph.connections)
            };
        }
        for (g, pg) in out.groups.iter_mut().zip(&p.groups) {
            g.requests += pg.requests;
            g.ok += pg.ok;
            for (kind, n) in &pg.errors {
                *g.errors.entry(kind.clone()).or_default() += n;
            }
            for (code, n) in &pg.status_codes {
                *g.status_codes.entry(code.clone()).or_default() += n;
            }
        }
    }
    for (i, g) in out.groups.iter_mut().enumerate() {
        let mut h = crate::histogram::latency_histogram();
        for (k, p) in parts.iter().enumerate() {
            let text = &p.groups[i].histogram;
            if text.is_empty() {
                continue;
            }
            let part = crate::histogram::decode_base64(text)
                .map_err(|e| format!("part {}: group {}: {e}", k + 1, g.name))?;
            h.add(&part)
                .map_err(|e| format!("part {}: group {}: {e}", k + 1, g.name))?;
        }
        g.latency_ms = GroupLatency::of(&h);
        g.histogram = if h.is_empty() {
            String::new()
        } else {
            crate::histogram::encode_base64(&h)
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{encode_base64, latency_histogram};

    fn part(latencies_us: &[u64], connections: u64, errors: u64) -> MixResult {
        let mut h = latency_histogram();
        for &v in latencies_us {
            h.record(v).unwrap();
        }
        MixResult {
            grouped_by: "target".into(),
            targets: 2,
            hosts: vec![MixHost {
                host: "a.test".into(),
                connections,
                requests: latencies_us.len() as u64 + errors,
            }],
            groups: vec![
                MixGroup {
                    name: "GET a.test/x".into(),
                    share: 0.5,
                    requests: latencies_us.len() as u64,
                    ok: latencies_us.len() as u64,
                    latency_ms: GroupLatency::of(&h),
                    histogram: encode_base64(&h),
                    ..MixGroup::default()
                },
                MixGroup {
                    name: "GET a.test/y".into(),
                    share: 0.5,
                    requests: errors,
                    errors: BTreeMap::from([("timeout".to_string(), errors)]),
                    ..MixGroup::default()
                },
            ],
        }
    }

    #[test]
    fn parts_add_up_and_a_groups_percentiles_come_from_its_histograms() {
        // One part fast, one slow: the merged p99 is the slow part's, which no
        // average of the two p99s would give.
        let fast = part(&[1000; 99], 5, 1);
        let slow = part(&[1000, 1000, 50_000, 50_000], 5, 2);
        let m = merge(&[&fast, &slow], true).unwrap();
        let g = &m.groups[0];
        assert_eq!((g.requests, g.ok), (103, 103));
        let l = g.latency_ms.as_ref().unwrap();
        assert!((l.p50 - 1.0).abs() < 0.01, "{l:?}");
        assert!((l.p99 - 50.0).abs() < 0.1, "{l:?}");
        assert!((l.max - 50.0).abs() < 0.1, "{l:?}");
        assert_eq!(m.groups[1].errors["timeout"], 3);
        assert_eq!(m.groups[1].latency_ms, None);
        assert_eq!((m.hosts[0].connections, m.hosts[0].requests), (10, 106));
        // Repetitions one after another: the same connections again, not more.
        let r = merge(&[&fast, &slow], false).unwrap();
        assert_eq!(r.hosts[0].connections, 5);
        // A part of another mix is refused.
        let mut other = part(&[1000], 5, 0);
        other.groups[1].name = "GET a.test/z".into();
        let e = merge(&[&fast, &other], true).unwrap_err();
        assert!(e.contains("part 2 ran another request mix"), "{e}");
    }
}
