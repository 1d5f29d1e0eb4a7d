//! Placeholder: the haproxy driver is being built.

use super::driver::{Driver, DriverContext, Endpoint, LabError, Route};
use std::time::Duration;

/// How endpoint changes reach HAProxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rewrite and seamless reload (master-worker).
    Reload,
    /// Runtime API on server-template slots.
    Runtime,
}

/// The haproxy system under test.
pub struct Haproxy {}

impl Haproxy {
    /// A driver in the given mode.
    pub fn new(_mode: Mode) -> Self {
        Haproxy {}
    }
}

impl Driver for Haproxy {
    fn name(&self) -> &'static str {
        "haproxy"
    }
    fn prepare(&mut self, _ctx: &DriverContext, _e: &[Endpoint]) -> Result<(), LabError> {
        Err(LabError::Other("haproxy driver not built yet".into()))
    }
    fn start(&mut self) -> Result<(), LabError> {
        Err(LabError::Other("haproxy driver not built yet".into()))
    }
    fn wait_ready(&mut self, _t: Duration) -> Result<(), LabError> {
        Err(LabError::Other("haproxy driver not built yet".into()))
    }
    fn set_endpoints(&mut self, _e: &[Endpoint]) -> Result<(), LabError> {
        Err(LabError::Other("haproxy driver not built yet".into()))
    }
    fn apply_route(&mut self, _r: Route) -> Result<(), LabError> {
        Err(LabError::Other("haproxy driver not built yet".into()))
    }
    fn reload(&mut self) -> Result<(), LabError> {
        Err(LabError::Other("haproxy driver not built yet".into()))
    }
    fn settle(&mut self, _t: Duration) -> Result<(), LabError> {
        Ok(())
    }
    fn alive(&mut self) -> bool {
        false
    }
    fn stop(&mut self) -> Result<(), LabError> {
        Ok(())
    }
    fn versions(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}
