//! How long a change took to show in traffic: endpoints added and removed, route
//! changes.

use serde::{Deserialize, Serialize};

/// How long one backend took to start or stop receiving traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PropagationEntry {
    pub backend: String,
    /// When it became ready (added) or was told to stop (removed), ms from start.
    pub at_ms: f64,
    /// Added: from ready to its first response through the proxy. Removed: from the
    /// stop to its last response. `null`: it never answered through the proxy.
    pub propagation_ms: Option<f64>,
    /// Removed only: errors in the seconds from its removal to its last response.
    pub errors_between: u64,
}

/// Minimum, median and maximum of a set of times, in ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub min: Option<f64>,
    pub median: Option<f64>,
    pub max: Option<f64>,
}

impl Spread {
    /// The spread of `values`.
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let median = match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        };
        Spread {
            n: v.len(),
            min: v.first().copied(),
            median,
            max: v.last().copied(),
        }
    }
}

/// Endpoint propagation of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Propagation {
    pub added: Vec<PropagationEntry>,
    pub removed: Vec<PropagationEntry>,
    pub added_ms: Spread,
    pub removed_ms: Spread,
}

/// How one route change showed in traffic. Times are ms from the request for the
/// change; the responses counted are those of requests intended from the request
/// until the next route change (its windows), so the previous change's stragglers
/// are not taken for this one's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteChange {
    /// The route asked for: `base`, `cors`, `header` or `rewrite`.
    pub route: String,
    /// When it was asked for, ms from the start of the measured window.
    pub at_ms: f64,
    /// Until the driver or controller said it was applied (`route_applied`: an
    /// ACK, a reload done, an HTTPRoute `Accepted`); `null` when it never did.
    pub applied_ms: Option<f64>,
    /// Until the first response that showed it; `null` when none did.
    pub seen_ms: Option<f64>,
    /// Until the last response that did not show it yet (old and new served side
    /// by side until then); `null` when every response showed it.
    pub last_old_ms: Option<f64>,
    /// Responses that showed the new route, and that did not.
    pub responses_new: u64,
    pub responses_old: u64,
    /// Errors of the requests counted (every kind, status >= 400 included).
    pub errors: u64,
}

/// Route propagation of a run: each route change as traffic saw it, beside what the
/// system under test reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutePropagation {
    pub changes: Vec<RouteChange>,
    /// Spread of `applied_ms`, `seen_ms` and `last_old_ms` over the changes.
    pub applied_ms: Spread,
    pub seen_ms: Spread,
    pub last_old_ms: Spread,
}

impl RoutePropagation {
    /// The changes with their spreads.
    pub fn of(changes: Vec<RouteChange>) -> Self {
        let spread = |f: fn(&RouteChange) -> Option<f64>| {
            Spread::of(&changes.iter().filter_map(f).collect::<Vec<_>>())
        };
        RoutePropagation {
            applied_ms: spread(|c| c.applied_ms),
            seen_ms: spread(|c| c.seen_ms),
            last_old_ms: spread(|c| c.last_old_ms),
            changes,
        }
    }
}
