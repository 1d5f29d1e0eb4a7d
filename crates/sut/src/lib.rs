//! The system under test as the scenario runner sees it: where backends live and how
//! they change ([`Platform`]), the proxy or controller in front of them ([`Driver`]),
//! their events, contexts and errors.
//!
//! A crate of its own so that each implementation depends only on this: the local lab
//! (`lab`: real proxies and backends on this machine, the network lab) and Kubernetes
//! (`kubernetes`: installed controllers, backends as pods) compile without each other.
//! The watchdog and the scratch folders are here too, since both kinds of platform
//! register what a killed run must not leave behind.

pub mod certs;
pub mod driver;
pub mod platform;
pub mod routes;
pub mod scratch;
pub mod tools;
pub mod watchdog;

pub use driver::{
    Capabilities, Driver, DriverContext, Endpoint, Expect, Handshakes, RestartKind, Route, SutError,
};
pub use platform::{Platform, PlatformEvent, Target};
pub use routes::RouteSet;

use std::time::Duration;

/// The key type of the proxy's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    Rsa2048,
    EcdsaP256,
}

impl KeyType {
    /// Parses a scenario's key name: `rsa2048` or `ecdsa-p256`.
    pub fn parse(s: &str) -> Option<KeyType> {
        match s {
            "rsa2048" | "rsa-2048" => Some(KeyType::Rsa2048),
            "ecdsa-p256" | "p256" => Some(KeyType::EcdsaP256),
            _ => None,
        }
    }
}

/// The tuned variant's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassiveHealth {
    /// Failed requests that take a backend out (nginx `max_fails`, HAProxy
    /// `error-limit`, Caddy `max_fails`, Envoy `consecutive_5xx`).
    pub max_fails: u32,
    /// How long it stays out before it is tried again (nginx `fail_timeout`, HAProxy
    /// `downinter` of the checks that bring it back, Caddy `fail_duration`, Envoy
    /// `base_ejection_time`).
    pub fail_timeout: Duration,
    /// A response slower than this counts as failed (and is retried where the proxy
    /// retries): nginx `proxy_read_timeout`, HAProxy `timeout server`, Caddy
    /// `response_header_timeout`, Envoy's route timeout. `None`: the profile's own.
    pub timeout: Option<Duration>,
}
