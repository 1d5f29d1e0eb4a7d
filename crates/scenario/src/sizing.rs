//! The `sizing:` section (study S4): which CPU allocations of the system under test
//! to scan, and what to measure at each: keep-alive requests per second for response
//! sizes, new TLS connections per second for key types, TLS versions and resumption,
//! and the price of a core to cost each row.
//!
//! Parsing and checking only; the scan itself is `crate::scan`. The rows are a pure
//! expansion of the section ([`SizingSection::rows`]), so their order is tested here.

use super::{Dur, Key, TlsVersion};
use results::sizing::Measure;
use serde::{Deserialize, Serialize};

/// Smallest quota the kernel enforces usefully here: a hundredth of a core.
const MIN_CORES: f64 = 0.01;

/// `sizing:` as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SizingSection {
    /// CPU allocations of the proxy, in cores: whole numbers are that many CPUs (and
    /// workers), others a CPU quota on `ceil(cores)` CPUs (0.25, 0.5: a Kubernetes CPU
    /// limit).
    pub cores: Vec<f64>,
    /// Response body sizes for the keep-alive requests-per-second rows (S4: 1024 and
    /// 128).
    #[serde(default)]
    pub rps: Vec<usize>,
    /// Whether the RPS rows go over TLS (S4's RPS is plain keep-alive HTTP).
    #[serde(default)]
    pub rps_tls: bool,
    /// The handshakes-per-second rows.
    #[serde(default)]
    pub tps: Option<TpsSection>,
    /// Price of a core, to cost each row.
    #[serde(default)]
    pub cost: Option<CostSection>,
}

/// `sizing.tps`: every combination of its lists is a row.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TpsSection {
    #[serde(default = "rsa_only")]
    pub keys: Vec<Key>,
    #[serde(default = "tls13_only")]
    pub versions: Vec<TlsVersion>,
    /// `[false]`: full handshakes only; `[false, true]`: a second row with the
    /// client resuming its previous session.
    #[serde(default = "no_resumption")]
    pub resumption: Vec<bool>,
    /// Concurrent new connections (default: `load.connections`).
    #[serde(default)]
    pub connections: Option<usize>,
    /// The p99 bound of the TPS rows (default: `search.p99`): a handshake costs
    /// milliseconds where a kept-alive request costs microseconds.
    #[serde(default)]
    pub p99: Option<Dur>,
}

fn rsa_only() -> Vec<Key> {
    vec![Key::Rsa2048]
}
fn tls13_only() -> Vec<TlsVersion> {
    vec![TlsVersion::V13]
}
fn no_resumption() -> Vec<bool> {
    vec![false]
}

/// `sizing.cost`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CostSection {
    /// Price of one core for one hour.
    pub per_core_hour: f64,
    #[serde(default = "usd")]
    pub currency: String,
}

fn usd() -> String {
    "USD".into()
}

/// The scenario's key as results name it (`rsa2048`, `ecdsa-p256` on disk).
pub(crate) fn key_name(k: Key) -> results::tls::KeyType {
    match k {
        Key::Rsa2048 => results::tls::KeyType::Rsa2048,
        Key::EcdsaP256 => results::tls::KeyType::EcdsaP256,
    }
}

/// The scenario's TLS version as results and the engine name it (`1.2`, `1.3`).
pub(crate) fn version_name(v: TlsVersion) -> results::tls::TlsVersion {
    match v {
        TlsVersion::V12 => results::tls::TlsVersion::V12,
        TlsVersion::V13 => results::tls::TlsVersion::V13,
    }
}

impl SizingSection {
    /// The measures, in the order they run at each allocation: RPS by body size,
    /// then TPS by key, version and resumption.
    pub fn measures(&self) -> Vec<Measure> {
        let mut out: Vec<Measure> = self
            .rps
            .iter()
            .map(|&body_size| Measure::Rps { body_size })
            .collect();
        if let Some(t) = &self.tps {
            for &k in &t.keys {
                for &v in &t.versions {
                    for &r in &t.resumption {
                        out.push(Measure::Tps {
                            key: key_name(k),
                            version: version_name(v),
                            resumption: r,
                        });
                    }
                }
            }
        }
        out
    }

    /// Every row of the scan, allocation by allocation (smallest first, as
    /// written), each with every measure.
    pub fn rows(&self) -> Vec<(f64, Measure)> {
        let measures = self.measures();
        self.cores
            .iter()
            .flat_map(|&c| measures.iter().map(move |m| (c, m.clone())))
            .collect()
    }

    /// The checks of the section alone; `(key, message)` on the first failure.
    pub(crate) fn check(&self, tls_enabled: bool) -> Result<(), (&'static str, String)> {
        if self.cores.is_empty() {
            return Err((
                "sizing.cores",
                "sizing.cores: give the allocations to scan, e.g. [0.25, 0.5, 1]".into(),
            ));
        }
        for (i, &c) in self.cores.iter().enumerate() {
            if !(c.is_finite() && (MIN_CORES..=1024.0).contains(&c)) {
                return Err((
                    "sizing.cores",
                    format!("sizing.cores: {c} is not an allocation: give cores from {MIN_CORES} (a quota) to 1024"),
                ));
            }
            if self.cores[..i].iter().any(|d| (d - c).abs() < 1e-9) {
                return Err(("sizing.cores", format!("sizing.cores: {c} is listed twice")));
            }
        }
        if self.rps.is_empty() && self.tps.is_none() {
            return Err((
                "sizing",
                "sizing: measure something: rps (body sizes, e.g. [1024, 128]) or tps (keys: [rsa2048])".into(),
            ));
        }
        if let Some(b) = self.rps.iter().find(|b| **b > 1 << 20) {
            return Err((
                "sizing.rps",
                format!("sizing.rps: {b} bytes: at most 1048576"),
            ));
        }
        if let Some(t) = &self.tps {
            if !tls_enabled {
                return Err((
                    "sizing.tps",
                    "sizing.tps: measures TLS handshakes, but tls.enabled is false: remove one of them".into(),
                ));
            }
            if t.keys.is_empty() || t.versions.is_empty() || t.resumption.is_empty() {
                return Err((
                    "sizing.tps",
                    "sizing.tps: keys, versions and resumption must each name at least one value"
                        .into(),
                ));
            }
            if t.connections == Some(0) {
                return Err((
                    "sizing.tps.connections",
                    "sizing.tps.connections: give at least 1".into(),
                ));
            }
            if t.p99.is_some_and(|d| d.0.is_zero()) {
                return Err((
                    "sizing.tps.p99",
                    "sizing.tps.p99: give a bound above zero, e.g. 50ms".into(),
                ));
            }
        }
        if self.rps_tls && !tls_enabled {
            return Err((
                "sizing.rps_tls",
                "sizing.rps_tls: RPS over TLS needs tls.enabled: true".into(),
            ));
        }
        if let Some(c) = &self.cost {
            if !(c.per_core_hour.is_finite() && c.per_core_hour > 0.0) {
                return Err((
                    "sizing.cost.per_core_hour",
                    format!(
                        "sizing.cost.per_core_hour: {}: give the price of one core for one hour, above 0",
                        c.per_core_hour
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// How an allocation of `cores` is given to the proxy: how many CPUs (one worker
/// each) and the quota, if any (`None`: whole CPUs).
pub fn allocation(cores: f64) -> (usize, Option<f64>) {
    let cpus = cores.ceil().max(1.0) as usize;
    let whole = (cores - cores.round()).abs() < 1e-9;
    (cpus, (!whole).then_some(cores))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(yaml: &str) -> SizingSection {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn rows_are_every_measure_at_every_allocation_in_order() {
        let s = section(
            "cores: [0.5, 1]\nrps: [1024, 128]\ntps: {keys: [rsa2048, ecdsa-p256], versions: [\"1.2\", \"1.3\"], resumption: [false, true]}\n",
        );
        let rows = s.rows();
        assert_eq!(rows.len(), 2 * (2 + 2 * 2 * 2));
        assert_eq!(rows[0], (0.5, Measure::Rps { body_size: 1024 }));
        assert_eq!(rows[1], (0.5, Measure::Rps { body_size: 128 }));
        assert_eq!(rows[2].1.label(), "tps rsa2048 TLS1.2");
        assert_eq!(rows[3].1.label(), "tps rsa2048 TLS1.2 resumed");
        assert_eq!(rows[9].1.label(), "tps ecdsa-p256 TLS1.3 resumed");
        assert_eq!(rows[10], (1.0, Measure::Rps { body_size: 1024 }));
    }

    #[test]
    fn tps_defaults_to_full_rsa_handshakes_over_tls13() {
        let s = section("cores: [1]\ntps: {}\n");
        assert_eq!(
            s.measures(),
            [Measure::Tps {
                key: results::tls::KeyType::Rsa2048,
                version: results::tls::TlsVersion::V13,
                resumption: false
            }]
        );
    }

    #[test]
    fn whole_cores_are_cpus_and_fractions_are_quotas() {
        assert_eq!(allocation(0.25), (1, Some(0.25)));
        assert_eq!(allocation(1.0), (1, None));
        assert_eq!(allocation(2.0), (2, None));
        assert_eq!(allocation(1.5), (2, Some(1.5)));
    }

    #[test]
    fn bad_sections_are_named() {
        let bad = |y: &str, tls: bool| section(y).check(tls).unwrap_err();
        assert_eq!(bad("cores: []\nrps: [1]\n", true).0, "sizing.cores");
        assert!(bad("cores: [0.001]\nrps: [1]\n", true).1.contains("0.001"));
        assert!(bad("cores: [1, 1.0]\nrps: [1]\n", true).1.contains("twice"));
        assert_eq!(bad("cores: [1]\n", true).0, "sizing");
        assert_eq!(bad("cores: [1]\ntps: {}\n", false).0, "sizing.tps");
        assert_eq!(
            bad("cores: [1]\nrps: [1]\ncost: {per_core_hour: 0}\n", true).0,
            "sizing.cost.per_core_hour"
        );
        assert!(section("cores: [0.25, 1]\nrps: [1024]\n")
            .check(false)
            .is_ok());
    }
}
