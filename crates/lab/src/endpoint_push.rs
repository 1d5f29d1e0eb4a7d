//! Endpoint push: what an ingress controller does between the platform and the
//! proxy, for proxies on this machine (not to be confused with `kubernetes::controllers`,
//! the ingress controllers installed in a cluster, which are systems under test).
//!
//! On a cluster the controller is the system under test and discovers endpoints
//! itself. Here nothing watches the backends, so after every scale step this feeds
//! the platform's ready set to drivers that take endpoints
//! ([`Capabilities::push_endpoints`](crate::Capabilities)); for the others, it only says
//! what to wait for.

use crate::driver::{Driver, Endpoint, Expect, SutError};

/// What the runner does after the platform's endpoint set changed.
#[derive(Debug)]
pub enum Sync {
    /// The set was pushed to the driver; settle on `Expect`.
    Pushed(Expect),
    /// The driver discovers endpoints itself; settle on `Expect`.
    Discovers(Expect),
}

/// Feeds `endpoints` to `driver` when it takes them.
///
/// # Errors
/// The driver's [`SutError`] when the push failed.
pub fn endpoints_changed(
    driver: &mut dyn Driver,
    endpoints: &[Endpoint],
) -> Result<Sync, SutError> {
    let expect = Expect::endpoints(endpoints);
    if driver.capabilities().push_endpoints {
        driver.set_endpoints(endpoints)?;
        Ok(Sync::Pushed(expect))
    } else {
        Ok(Sync::Discovers(expect))
    }
}
