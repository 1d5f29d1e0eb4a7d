//! Placeholder: the nginx driver is being built.

use super::driver::{Driver, DriverContext, Endpoint, LabError, Route};
use std::time::Duration;

/// How endpoint changes reach nginx.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rewrite the upstream and reload.
    Reload,
    /// Push endpoints to a Lua balancer, no reload.
    Lua,
}

/// The nginx system under test.
pub struct Nginx {}

impl Nginx {
    /// A driver in the given mode.
    pub fn new(_mode: Mode) -> Self {
        Nginx {}
    }
}

impl Driver for Nginx {
    fn name(&self) -> &'static str {
        "nginx"
    }
    fn prepare(&mut self, _ctx: &DriverContext, _e: &[Endpoint]) -> Result<(), LabError> {
        Err(LabError::Other("nginx driver not built yet".into()))
    }
    fn start(&mut self) -> Result<(), LabError> {
        Err(LabError::Other("nginx driver not built yet".into()))
    }
    fn wait_ready(&mut self, _t: Duration) -> Result<(), LabError> {
        Err(LabError::Other("nginx driver not built yet".into()))
    }
    fn set_endpoints(&mut self, _e: &[Endpoint]) -> Result<(), LabError> {
        Err(LabError::Other("nginx driver not built yet".into()))
    }
    fn apply_route(&mut self, _r: Route) -> Result<(), LabError> {
        Err(LabError::Other("nginx driver not built yet".into()))
    }
    fn reload(&mut self) -> Result<(), LabError> {
        Err(LabError::Other("nginx driver not built yet".into()))
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
