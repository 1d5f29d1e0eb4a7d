//! Scenario files: which systems to compare, the backends, TLS, the load, and the
//! changes made while the load runs. Documented key by key in docs/scenarios.md.
//!
//! Everything is checked while parsing, so a typo or an impossible value is reported
//! with the file, line and key before any process starts.

pub mod failover;
pub mod plan;
pub mod platform;
pub mod probes;
pub mod runner;
pub mod sizing;
pub mod testing;

mod checks;
mod keys;
mod schema;

pub(crate) use keys::Bad;
pub(crate) use schema::{quarter, routes_in, split_gateway};
/// The file's sections, named at the crate's root as users of the crate write them.
pub use schema::{
    route_scale_label, share, Backends, ClusterFlags, CorpusKind, DrainNode, Dur, FromRoutes,
    FromWhat, GatewayPorts, GeneratorPods, Key, KubernetesSection, Load, NetworkLabSection,
    PlacementSpec, PlatformKind, ProbesSection, Profile, Protocol, Quick, Rate, Repeat,
    RequestEntry, Requests, RestartWhat, RotateWhat, RouteName, RouteSetStep, RoutesSection,
    ScaleTo, Scenario, ScenarioError, SearchSection, SessionsSection, Step, Stop, Tls, TlsVersion,
    UserProbe, Workloads, MAX_DURATION, MAX_NAME, MAX_REPLICAS, MAX_ROUTES, MAX_ROUTE_SIZES,
    MAX_SESSIONS,
};

#[cfg(test)]
mod tests;
