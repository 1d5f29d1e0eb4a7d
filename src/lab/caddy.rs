//! Placeholder: the caddy driver is being built.

use super::driver::{Driver, DriverContext, Endpoint, LabError, Route};
use std::time::Duration;

/// The caddy system under test.
#[derive(Default)]
pub struct Caddy {}

impl Caddy {
    /// A driver for Caddy's admin API.
    pub fn new() -> Self {
        Caddy {}
    }
}

impl Driver for Caddy {
    fn name(&self) -> &'static str {
        "caddy"
    }
    fn prepare(&mut self, _ctx: &DriverContext, _e: &[Endpoint]) -> Result<(), LabError> {
        Err(LabError::Other("caddy driver not built yet".into()))
    }
    fn start(&mut self) -> Result<(), LabError> {
        Err(LabError::Other("caddy driver not built yet".into()))
    }
    fn wait_ready(&mut self, _t: Duration) -> Result<(), LabError> {
        Err(LabError::Other("caddy driver not built yet".into()))
    }
    fn set_endpoints(&mut self, _e: &[Endpoint]) -> Result<(), LabError> {
        Err(LabError::Other("caddy driver not built yet".into()))
    }
    fn apply_route(&mut self, _r: Route) -> Result<(), LabError> {
        Err(LabError::Other("caddy driver not built yet".into()))
    }
    fn reload(&mut self) -> Result<(), LabError> {
        Err(LabError::Other("caddy driver not built yet".into()))
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
