//! The local lab: real proxies (nginx, HAProxy, Caddy from Debian packages) in front
//! of built-in backend processes, driven the way each ingress controller drives its
//! proxy. Everything a lab starts is owned by a guard that stops it when dropped, so
//! a run leaves no process, socket or temp file behind however it ends.

pub mod backends;
pub mod caddy;
pub mod certs;
pub mod driver;
pub mod haproxy;
pub mod nginx;
pub mod ports;
pub mod proc;

pub use driver::{Driver, DriverContext, Endpoint, LabError, Route};

/// Every system-under-test profile the lab knows, by the name scenarios use.
pub const PROFILES: [&str; 5] = [
    "nginx-reload",
    "nginx-lua",
    "haproxy-reload",
    "haproxy-runtime",
    "caddy-api",
];

/// Builds the driver for a profile name.
///
/// # Errors
/// [`LabError::UnknownProfile`] naming the profiles that exist.
pub fn driver_for(profile: &str) -> Result<Box<dyn Driver>, LabError> {
    match profile {
        "nginx-reload" => Ok(Box::new(nginx::Nginx::new(nginx::Mode::Reload))),
        "nginx-lua" => Ok(Box::new(nginx::Nginx::new(nginx::Mode::Lua))),
        "haproxy-reload" => Ok(Box::new(haproxy::Haproxy::new(haproxy::Mode::Reload))),
        "haproxy-runtime" => Ok(Box::new(haproxy::Haproxy::new(haproxy::Mode::Runtime))),
        "caddy-api" => Ok(Box::new(caddy::Caddy::new())),
        other => Err(LabError::UnknownProfile(other.to_string())),
    }
}
