//! The TLS settings a run names by value: the protocol version the load allows and
//! the key type of the proxy's certificate.
//!
//! They are enums everywhere in the code and strings only on disk and on the command
//! line (`"1.2"`, `"ecdsa-p256"`, through serde's renames), so that a misspelt value
//! is refused where it is read instead of falling back to a default somewhere else.

use serde::{Deserialize, Serialize};

/// A TLS protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TlsVersion {
    #[serde(rename = "1.2")]
    V12,
    #[serde(rename = "1.3")]
    V13,
}

impl TlsVersion {
    /// The name in results and on the command line: `1.2`, `1.3`.
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::V12 => "1.2",
            TlsVersion::V13 => "1.3",
        }
    }

    /// `1.2` or `1.3` (also `tls1.2`, `TLSv1.3`, as OpenSSL and curl write them);
    /// `None` for anything else.
    pub fn parse(s: &str) -> Option<TlsVersion> {
        match s {
            "1.2" | "tls1.2" | "TLSv1.2" => Some(TlsVersion::V12),
            "1.3" | "tls1.3" | "TLSv1.3" => Some(TlsVersion::V13),
            _ => None,
        }
    }
}

impl std::fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The key type of a server certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyType {
    Rsa2048,
    EcdsaP256,
}

impl KeyType {
    /// The name in results and scenario files: `rsa2048`, `ecdsa-p256`.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Rsa2048 => "rsa2048",
            KeyType::EcdsaP256 => "ecdsa-p256",
        }
    }
}

impl std::fmt::Display for KeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names on disk are the serde names, both ways, and a misspelt one is an
    /// error rather than another value.
    #[test]
    fn names_round_trip_and_typos_are_refused() {
        for v in [TlsVersion::V12, TlsVersion::V13] {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.name()));
            assert_eq!(serde_json::from_str::<TlsVersion>(&json).unwrap(), v);
            assert_eq!(TlsVersion::parse(v.name()), Some(v));
        }
        for k in [KeyType::Rsa2048, KeyType::EcdsaP256] {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<KeyType>(&json).unwrap(), k);
        }
        assert!(serde_json::from_str::<KeyType>("\"ecdsa-256\"").is_err());
        assert!(serde_json::from_str::<TlsVersion>("\"1.4\"").is_err());
        assert_eq!(TlsVersion::parse("1.4"), None);
    }
}
