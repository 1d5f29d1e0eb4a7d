//! Where a scenario's backends live, as a type: every rule that depends on the
//! platform matches on [`PlatformKind`], so adding one is a compile error at each
//! place that must decide what it means, not a string compared in a dozen places.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// The platforms a scenario can name (`platform:` or `run --platform`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PlatformKind {
    /// Backends and proxies as processes on this machine (the lab).
    #[default]
    Local,
    /// Backends as pods of a cluster, behind its installed controllers.
    Kubernetes,
    /// One nginx behind a kernel data path between network namespaces (study S2).
    NetworkLab,
}

impl PlatformKind {
    /// Every platform, in the order messages list them.
    pub const ALL: [PlatformKind; 3] = [
        PlatformKind::Local,
        PlatformKind::Kubernetes,
        PlatformKind::NetworkLab,
    ];

    /// The name scenarios and flags use.
    pub fn name(self) -> &'static str {
        match self {
            PlatformKind::Local => "local",
            PlatformKind::Kubernetes => "kubernetes",
            PlatformKind::NetworkLab => "network-lab",
        }
    }

    /// Every name, for a message that lists what may be written: `local, kubernetes,
    /// network-lab`.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

impl fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no platform.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown platform `{0}`, expected one of {names}", names = PlatformKind::names())]
pub struct UnknownPlatform(pub String);

impl FromStr for PlatformKind {
    type Err = UnknownPlatform;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPlatform(s.to_string()))
    }
}

impl<'de> Deserialize<'de> for PlatformKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

impl Serialize for PlatformKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_reads_back_from_its_name_and_nothing_else_does() {
        for p in PlatformKind::ALL {
            assert_eq!(p.name().parse::<PlatformKind>(), Ok(p));
        }
        let e = "Local".parse::<PlatformKind>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown platform `Local`, expected one of local, kubernetes, network-lab"
        );
    }
}
