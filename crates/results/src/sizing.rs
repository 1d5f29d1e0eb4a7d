//! The result of a sizing scan (study S4): for one system under test, the maximum of
//! each measure (keep-alive requests per second, new TLS connections per second) at
//! each CPU allocation, with what makes a row trustworthy (the generator's headroom,
//! the proxy's own count of full handshakes) and what it costs.
//!
//! Plain data, as every result: the S4 table and chart are drawn from this file, so a
//! scan can be re-drawn, and its cost re-priced, long after it ran.

use crate::search::SearchResult;
use serde::{Deserialize, Serialize};

/// The version of this file's shape.
pub const SIZING_SCHEMA: &str = "ingressbench/sizing/v1";

/// One system's scan: every (allocation, measure) row, in the order run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizingResult {
    pub schema: String,
    pub system: String,
    /// How the quotas were enforced: `cgroup v2 cpu.max` or `cgroup v1
    /// cpu.cfs_quota_us` (`null` when no row needed a quota).
    pub cgroup: Option<String>,
    /// Price of one core for one hour, in the scenario's currency (`sizing.cost`).
    pub cost_per_core_hour: Option<f64>,
    pub currency: Option<String>,
    /// The run was interrupted: rows after the last are missing.
    pub partial: bool,
    pub rows: Vec<SizingRow>,
}

/// What is measured: requests over kept-alive connections, or new connections with
/// a TLS handshake each.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Measure {
    /// Keep-alive HTTP/1.1 requests per second with responses of `body_size` bytes.
    Rps { body_size: usize },
    /// New TLS connections per second, one request each.
    Tps {
        /// The proxy certificate's key (`rsa2048` or `ecdsa-p256` on disk).
        key: crate::tls::KeyType,
        /// The TLS version (`1.2` or `1.3` on disk).
        version: crate::tls::TlsVersion,
        /// The client offers the session of its previous connection (a ticket or a
        /// session id); off: every handshake is a full one.
        resumption: bool,
    },
}

impl Measure {
    /// A short label: `rps 1024 B`, `tps rsa2048 TLS1.3`, `tps ecdsa-p256 TLS1.2 resumed`.
    pub fn label(&self) -> String {
        match self {
            Measure::Rps { body_size } => format!("rps {body_size} B"),
            Measure::Tps {
                key,
                version,
                resumption,
            } => format!(
                "tps {key} TLS{version}{}",
                if *resumption { " resumed" } else { "" }
            ),
        }
    }

    pub fn is_tps(&self) -> bool {
        matches!(self, Measure::Tps { .. })
    }
}

/// The CPU the system under test was given for a row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Cores of CPU time: a whole number of CPUs, or a quota (0.25: a quarter of one
    /// CPU's time).
    pub cores: f64,
    /// The CPUs the proxy was pinned to (`1` or `2,3`), and its worker count.
    pub cpus: String,
    pub workers: usize,
    /// The quota enforced by a cgroup (`null`: whole CPUs, no quota).
    pub quota: Option<f64>,
}

/// Whether the generator, not the system under test, may have set a row's maximum.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// Share of the generator's cores its process used (0-1), at the maximum and at
    /// the lowest failed rate above it (the step that set the limit).
    pub cpu_at_max: Option<f64>,
    pub cpu_at_limit: Option<f64>,
    /// The generator's lag p99 at the maximum, in ms.
    pub lag_p99_ms: Option<f64>,
    /// True when the generator had headroom: no step was voided by its lag and its
    /// CPU stayed below [`GENERATOR_CPU_LIMIT`] up to the step that set the limit.
    pub ok: bool,
    /// Why not, in words (`null` when `ok`).
    pub why: Option<String>,
}

/// Above this share of its cores the generator is taken as the possible limit of a
/// row: a rate it could barely produce says nothing of the proxy's ceiling.
pub const GENERATOR_CPU_LIMIT: f64 = 0.85;

/// TLS handshakes counted on the proxy's side over the whole search of a row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProxyHandshakes {
    pub full: u64,
    pub resumed: u64,
    /// Where the counts come from: `nginx access log ($ssl_session_reused)`, ...
    pub source: String,
}

/// One allocation and one measure: the maximum found by the search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizingRow {
    pub allocation: Allocation,
    pub measure: Option<Measure>,
    /// The maximum rate (requests or handshakes per second) that held the search's
    /// bounds; `null` when none did, when skipped, or when interrupted.
    pub max_rate: Option<f64>,
    /// `max_rate / allocation.cores`.
    pub per_core: Option<f64>,
    /// The proxy's CPU at the maximum's step, in cores (from `/proc`, its process
    /// groups): near `allocation.cores` when the proxy was the limit.
    pub proxy_cores_at_max: Option<f64>,
    pub headroom: Headroom,
    /// `null` for RPS rows and for proxies that do not count them.
    pub handshakes: Option<ProxyHandshakes>,
    /// Cost of a million requests (RPS) or a thousand handshakes (TPS) at the
    /// maximum, with `cost_per_core_hour`.
    pub cost: Option<f64>,
    /// Why the row was not measured (`needs 2 CPUs, the proxy's set has 1`).
    pub skipped: Option<String>,
    pub search: Option<SearchResult>,
}

impl SizingRow {
    /// The row's cost at its maximum: per million requests for RPS, per thousand
    /// handshakes for TPS.
    pub fn price(&self, per_core_hour: f64) -> Option<f64> {
        let rate = self.max_rate.filter(|r| *r > 0.0)?;
        let per_second = per_core_hour * self.allocation.cores / 3600.0;
        let unit = if self.measure.as_ref().is_some_and(Measure::is_tps) {
            1e3
        } else {
            1e6
        };
        Some(per_second / rate * unit)
    }
}

impl SizingResult {
    /// Scaling efficiency of `row`: its per-core figure over the 1-core row's of the
    /// same measure (1.0: linear). `None` without a measured 1-core row.
    pub fn efficiency(&self, row: &SizingRow) -> Option<f64> {
        let one = self.rows.iter().find(|r| {
            r.measure == row.measure
                && (r.allocation.cores - 1.0).abs() < 1e-9
                && r.max_rate.is_some()
        })?;
        Some(row.per_core? / one.per_core?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cores: f64, m: Measure, max: Option<f64>) -> SizingRow {
        SizingRow {
            allocation: Allocation {
                cores,
                ..Allocation::default()
            },
            measure: Some(m),
            max_rate: max,
            per_core: max.map(|r| r / cores),
            ..SizingRow::default()
        }
    }

    #[test]
    fn a_row_is_priced_per_million_requests_or_per_thousand_handshakes() {
        let rps = row(0.5, Measure::Rps { body_size: 1024 }, Some(10_000.0));
        // Half a core at 3.6 per core-hour is 0.0005 per second; 10,000 req/s.
        let p = rps.price(3.6).unwrap();
        assert!((p - 0.05).abs() < 1e-12, "{p}");
        let tps = row(
            2.0,
            Measure::Tps {
                key: crate::tls::KeyType::Rsa2048,
                version: crate::tls::TlsVersion::V13,
                resumption: false,
            },
            Some(1_000.0),
        );
        // Two cores: 0.002 per second over 1,000 handshakes/s, per thousand.
        let p = tps.price(3.6).unwrap();
        assert!((p - 0.002).abs() < 1e-12, "{p}");
        assert_eq!(
            row(1.0, Measure::Rps { body_size: 128 }, None).price(3.6),
            None
        );
    }

    #[test]
    fn efficiency_is_against_the_one_core_row_of_the_same_measure() {
        let m = Measure::Rps { body_size: 1024 };
        let other = Measure::Rps { body_size: 128 };
        let s = SizingResult {
            rows: vec![
                row(1.0, other.clone(), Some(100.0)),
                row(1.0, m.clone(), Some(1_000.0)),
                row(0.5, m.clone(), Some(600.0)),
            ],
            ..SizingResult::default()
        };
        let e = s.efficiency(&s.rows[2]).unwrap();
        assert!((e - 1.2).abs() < 1e-12, "{e}");
        assert_eq!(
            s.efficiency(&row(0.5, Measure::Rps { body_size: 7 }, Some(1.0))),
            None
        );
    }

    #[test]
    fn labels_name_the_measure() {
        let t = Measure::Tps {
            key: crate::tls::KeyType::EcdsaP256,
            version: crate::tls::TlsVersion::V12,
            resumption: true,
        };
        assert_eq!(t.label(), "tps ecdsa-p256 TLS1.2 resumed");
        assert_eq!(Measure::Rps { body_size: 128 }.label(), "rps 128 B");
    }
}
