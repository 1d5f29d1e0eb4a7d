//! Backend failover in a scenario (issue 16 §3): the `backends.flapping` and
//! `passive_health` keys, the systems each becomes (a profile's default and its
//! `+passive` variant), and the `failover` section each run's result gets from the
//! flapping backends' own logs.
//!
//! Kept apart from the rest of the scenario so the keys, their checks and the
//! measurement read together; `lib.rs` and the runner only call in.

use crate::{Dur, Scenario};
use lab::backends::FlapSpec;
use lab::health::{PassiveHealth, VARIANT};
use results::failover::{analyse, Failover, FlapLog, FlappingBackend, Window};
use results::TimelineEntry;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `backends.flapping`: backends that fail on a schedule, beside the steady ones.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Flapping {
    /// How many (named `f1`, `f2`, ...).
    #[serde(default = "one")]
    pub count: u32,
    /// Each healthy phase (the schedule starts healthy when the backend starts).
    pub healthy: Dur,
    /// Each failing phase.
    pub failing: Dur,
    /// How it fails.
    #[serde(default = "reset")]
    pub mode: FlapMode,
}

/// How a flapping backend fails, as a scenario writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub enum FlapMode {
    /// Resets connections.
    #[serde(rename = "reset")]
    Reset,
    /// Answers 503.
    #[serde(rename = "503")]
    Status503,
    /// Stops answering until the phase ends.
    #[serde(rename = "stall")]
    Stall,
}

impl FlapMode {
    fn name(self) -> &'static str {
        match self {
            FlapMode::Reset => "reset",
            FlapMode::Status503 => "503",
            FlapMode::Stall => "stall",
        }
    }
}

fn one() -> u32 {
    1
}
fn reset() -> FlapMode {
    FlapMode::Reset
}

/// `passive_health`: the tuned variant every system that has one also runs as,
/// `<system>+passive`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PassiveHealthSection {
    /// Failed requests that take a backend out.
    #[serde(default = "one")]
    pub max_fails: u32,
    /// How long it stays out.
    #[serde(default = "two_s")]
    pub fail_timeout: Dur,
    /// A response slower than this fails (default: the profile's own timeouts).
    #[serde(default)]
    pub timeout: Option<Dur>,
}

fn two_s() -> Dur {
    Dur(Duration::from_secs(2))
}

impl PassiveHealthSection {
    fn settings(&self) -> PassiveHealth {
        PassiveHealth {
            max_fails: self.max_fails,
            fail_timeout: self.fail_timeout.0,
            timeout: self.timeout.map(|d| d.0),
        }
    }
}

/// A refused key: its dotted name and why, for the scenario's line-numbered error.
pub(crate) type Refusal = (&'static str, String);

/// Checks both keys against each other and the rest of the scenario.
pub(crate) fn check(s: &Scenario) -> Result<(), Refusal> {
    if let Some(f) = &s.backends.flapping {
        let key = "backends.flapping";
        if s.platform != crate::PlatformKind::Local {
            return Err((
                key,
                format!(
                    "backends.flapping: flapping backends run on the local platform only (this scenario's is {})",
                    s.platform
                ),
            ));
        }
        if f.count == 0 || s.backends.replicas + f.count > crate::MAX_REPLICAS {
            return Err((
                "backends.flapping.count",
                format!(
                    "backends.flapping.count: {} is out of range: use 1 to {} (with backends.replicas, at most {} backends)",
                    f.count,
                    crate::MAX_REPLICAS.saturating_sub(s.backends.replicas).max(1),
                    crate::MAX_REPLICAS
                ),
            ));
        }
        // The backend's own rules for its schedule.
        backend::Flap::parse(&schedule(f), backend::FlapMode::Reset).map_err(|e| {
            (
                key,
                format!(
                    "backends.flapping: healthy {}ms, failing {}ms: {}",
                    f.healthy.0.as_millis(),
                    f.failing.0.as_millis(),
                    e.split_once(": ").map_or(e.as_str(), |(_, why)| why)
                ),
            )
        })?;
    }
    if let Some(p) = &s.passive_health {
        if s.platform != crate::PlatformKind::Local {
            return Err((
                "passive_health",
                "passive_health: the tuned variants are lab profiles (platform: local)".into(),
            ));
        }
        if !s.load.rates.is_empty() {
            return Err((
                "passive_health",
                "passive_health: not with load.rates (each variant would need its own search): give load.rate".into(),
            ));
        }
        if p.max_fails == 0 || p.max_fails > 1000 {
            return Err((
                "passive_health.max_fails",
                format!(
                    "passive_health.max_fails: {} is out of range: use 1 to 1000",
                    p.max_fails
                ),
            ));
        }
        if p.fail_timeout.0 < Duration::from_millis(100)
            || p.fail_timeout.0 > Duration::from_secs(3600)
        {
            return Err((
                "passive_health.fail_timeout",
                "passive_health.fail_timeout: give 100ms to 1h".into(),
            ));
        }
        if p.timeout.is_some_and(|t| t.0 < Duration::from_millis(10)) {
            return Err((
                "passive_health.timeout",
                "passive_health.timeout: give at least 10ms".into(),
            ));
        }
        if !s.systems.iter().any(|p| lab::health::supports(p.name())) {
            return Err((
                "passive_health",
                format!(
                    "passive_health: none of the systems has a tuned variant (those that do: {})",
                    lab::health::SUPPORTED.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// `HEALTHY/FAILING` as the backend's `--flap` takes it.
fn schedule(f: &Flapping) -> String {
    format!(
        "{}ms/{}ms",
        f.healthy.0.as_millis(),
        f.failing.0.as_millis()
    )
}

/// What the platform starts for `backends.flapping`.
pub(crate) fn flap_spec(s: &Scenario) -> Option<FlapSpec> {
    s.backends.flapping.as_ref().map(|f| FlapSpec {
        count: f.count,
        schedule: schedule(f),
        mode: f.mode.name().to_string(),
    })
}

/// The runs of `system`: its default, then, with `passive_health` and a profile
/// that has one, its tuned variant; each with the name its results go under.
pub(crate) fn variants(s: &Scenario, system: &str) -> Vec<(String, Option<PassiveHealth>)> {
    let mut v = vec![(system.to_string(), None)];
    if let Some(p) = &s.passive_health {
        if lab::health::supports(system) {
            v.push((format!("{system}{VARIANT}"), Some(p.settings())));
        }
    }
    v
}

/// The `failover` section from the flapping backends' logs (read once they have
/// stopped and written their last counts), placed on the load's clock: the
/// measured window starts at Unix time `start_unix_ns` and lasts `duration_ms`.
/// `None` without flapping backends.
pub(crate) fn measure(
    logs: &[(String, PathBuf)],
    start_unix_ns: u128,
    duration_ms: f64,
    timeline: &[TimelineEntry],
) -> Option<Failover> {
    if logs.is_empty() {
        return None;
    }
    let window = Window {
        start_unix_ns: u64::try_from(start_unix_ns).unwrap_or(u64::MAX),
        duration_ms,
        timeline,
    };
    let backends = logs
        .iter()
        .map(|(id, path)| match FlapLog::read(path) {
            Ok(log) => analyse(&log, &window),
            Err(e) => FlappingBackend {
                id: id.clone(),
                error: Some(e),
                ..FlappingBackend::default()
            },
        })
        .collect();
    Some(Failover { backends })
}
