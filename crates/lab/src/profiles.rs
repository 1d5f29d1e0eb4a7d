//! Every system-under-test profile, registered once: its name in scenarios, what it
//! stands for, and how its driver is built. Scenario validation, `--only`, the error
//! for an unknown name and the contract tests all read this table.

use crate::driver::{Driver, SutError};
use crate::{caddy, envoy, haproxy, nginx};

/// One profile.
pub struct Profile {
    /// The name scenarios use.
    pub name: &'static str,
    /// What it stands for, in one line (docs/scenarios.md has the long form).
    pub stands_for: &'static str,
    make: fn() -> Box<dyn Driver>,
}

impl Profile {
    /// A new driver of this profile.
    pub fn driver(&self) -> Box<dyn Driver> {
        (self.make)()
    }
}

/// The registry.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "nginx-reload",
        stands_for: "NGINX Open Source controllers: config rewritten and reloaded per change",
        make: || Box::new(nginx::Nginx::new(nginx::Mode::Reload)),
    },
    Profile {
        name: "nginx-lua",
        stands_for: "ingress-nginx: endpoints pushed to a Lua balancer, no reload",
        make: || Box::new(nginx::Nginx::new(nginx::Mode::Lua)),
    },
    Profile {
        name: "haproxy-reload",
        stands_for: "OpenShift router style: HAProxy config rewritten and reloaded",
        make: || Box::new(haproxy::Haproxy::new(haproxy::Mode::Reload)),
    },
    Profile {
        name: "haproxy-runtime",
        stands_for: "HAProxy ingress: server slots set through the runtime API",
        make: || Box::new(haproxy::Haproxy::new(haproxy::Mode::Runtime)),
    },
    Profile {
        name: "caddy-api",
        stands_for: "API-driven proxy: every change through Caddy's admin API",
        make: || Box::new(caddy::Caddy::new()),
    },
    Profile {
        name: "envoy-xds",
        stands_for: "Envoy-based controllers (Contour, Envoy Gateway, Istio): everything pushed over ADS, no restart",
        make: || Box::new(envoy::xds::EnvoyXds::new()),
    },
    Profile {
        name: "envoy-hot-restart",
        stands_for: "a restart-based Envoy control plane: a new Envoy with a new static config per change, through hot restart",
        make: || Box::new(envoy::hot_restart::EnvoyHotRestart::new()),
    },
];

/// The profile called `name`.
pub fn profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// Every profile name, in the registry's order.
pub fn names() -> Vec<&'static str> {
    PROFILES.iter().map(|p| p.name).collect()
}

/// Builds the driver for a profile name.
///
/// # Errors
/// [`SutError::UnknownProfile`] naming the profiles that exist.
pub fn driver_for(name: &str) -> Result<Box<dyn Driver>, SutError> {
    profile(name)
        .map(Profile::driver)
        .ok_or_else(|| SutError::UnknownProfile {
            name: name.to_string(),
            known: names().join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_builds_a_driver_of_its_own_name() {
        for p in PROFILES {
            assert_eq!(p.driver().name(), p.name);
        }
        let mut n = names();
        n.dedup();
        assert_eq!(n.len(), PROFILES.len(), "names are unique");
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let e = driver_for("nginx-relaod").err().unwrap().to_string();
        for p in PROFILES {
            assert!(e.contains(p.name), "{e}");
        }
    }
}
