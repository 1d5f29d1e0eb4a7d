//! An aggregated discovery service (ADS) over gRPC on a Unix socket: the half of an
//! Envoy-based controller (Contour, Envoy Gateway, Istio) that pushes listeners,
//! routes, clusters and endpoints to Envoy and learns whether Envoy took them.
//!
//! The lab's `envoy-xds` profile uses it in place of such a controller. It keeps, per
//! resource type, the resources last set and a version number; every connected Envoy
//! is sent each new version, and [`Server::wait_ack`] tells when Envoy acknowledged
//! it (or refused it, with Envoy's reason). That moment is what a controller knows,
//! and it is what the lab's figures separate from "pushed" and "seen in traffic".
//!
//! The protocol bookkeeping is pure ([`protocol`]), the transport is tonic on a
//! tokio runtime of its own thread ([`server`]), so the lab's drivers stay blocking.

pub mod protocol;
mod server;

pub use envoy_types;
pub use server::{Server, TYPE_CLUSTER, TYPE_ENDPOINTS, TYPE_LISTENER, TYPE_ROUTE, TYPE_SECRET};

use std::time::Duration;

/// Why the xDS server could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum XdsError {
    #[error("xDS server on {path}")]
    Bind {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("xDS server: its runtime")]
    Runtime(#[source] std::io::Error),
    #[error("Envoy refused {what} version {version}: {detail}")]
    Nacked {
        what: &'static str,
        version: u64,
        detail: String,
    },
    #[error("Envoy did not acknowledge {what} version {version} within {waited:?} (last acknowledged: {acked})")]
    NotAcked {
        what: &'static str,
        version: u64,
        acked: u64,
        waited: Duration,
    },
}

/// A short name of a type URL for messages: `clusters`, `endpoints`, ...
pub fn short_name(type_url: &str) -> &'static str {
    match type_url {
        TYPE_LISTENER => "listeners",
        TYPE_ROUTE => "routes",
        TYPE_CLUSTER => "clusters",
        TYPE_ENDPOINTS => "endpoints",
        TYPE_SECRET => "secrets",
        _ => "resources",
    }
}
