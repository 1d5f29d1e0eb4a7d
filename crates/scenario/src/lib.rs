//! Scenario files: which systems to compare, the backends, TLS, the load, and the
//! changes made while the load runs. Documented key by key in docs/scenarios.md.
//!
//! Everything is checked while parsing, so a typo or an impossible value is reported
//! with the file, line and key before any process starts.

pub mod runner;

use lab::backends::StopMode;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario {file}: cannot read it: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("scenario {file}: line {line}: {msg}")]
    Invalid {
        file: String,
        line: usize,
        msg: String,
    },
    #[error("scenario {file}: {msg}")]
    Other { file: String, msg: String },
}

/// A duration in a scenario: `12s`, `500ms`, `3m`, or a number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Dur(#[serde(serialize_with = "ser_dur")] pub Duration);

fn ser_dur<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}ms", d.as_millis()))
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration such as 12s, 500ms or 3m")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                results::duration::parse(v).map(Dur).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                Ok(Dur(Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                u64::try_from(v)
                    .map(|v| Dur(Duration::from_secs(v)))
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                if v.is_finite() && v >= 0.0 {
                    Ok(Dur(Duration::from_secs_f64(v)))
                } else {
                    Err(E::custom("a duration must be a positive number of seconds"))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A system-under-test profile: a name from the lab's registry ([`lab::PROFILES`]),
/// checked when the scenario is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Profile(&'static str);

impl Profile {
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl<'de> Deserialize<'de> for Profile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match lab::profiles::profile(&s) {
            Some(p) => Ok(Profile(p.name)),
            None => Err(de::Error::custom(format!(
                "unknown system `{s}`, expected one of {}",
                lab::profiles::names().join(", ")
            ))),
        }
    }
}

/// How removed backends stop, as written in a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    Graceful,
    Abrupt,
}

impl From<Stop> for StopMode {
    fn from(s: Stop) -> StopMode {
        match s {
            Stop::Graceful => StopMode::Graceful,
            Stop::Abrupt => StopMode::Abrupt,
        }
    }
}

/// The backends behind every system.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, try_from = "BackendsRaw")]
pub struct Backends {
    /// How many run when the load starts.
    pub replicas: u32,
    /// Response body size in bytes (the studies: about 1 KB).
    pub body_size: usize,
    /// Extra delay per response, passed to the backend (`2ms`, `exp:2ms`, `uniform:1ms-5ms`).
    pub delay: Option<String>,
    /// How a removed backend stops.
    pub stop: Stop,
    /// How long a gracefully stopped backend may drain.
    pub drain_timeout: Dur,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendsRaw {
    #[serde(default = "default_replicas")]
    replicas: u32,
    #[serde(default = "default_body")]
    body_size: usize,
    #[serde(default)]
    delay: Option<String>,
    #[serde(default = "default_stop")]
    stop: Stop,
    #[serde(default = "default_drain")]
    drain_timeout: Dur,
}

fn default_replicas() -> u32 {
    3
}
fn default_body() -> usize {
    1024
}
fn default_stop() -> Stop {
    Stop::Graceful
}
fn default_drain() -> Dur {
    Dur(Duration::from_secs(5))
}

/// Most backends a scenario may run at once (each is a process on this machine).
pub const MAX_REPLICAS: u32 = 32;

impl TryFrom<BackendsRaw> for Backends {
    type Error = String;
    fn try_from(r: BackendsRaw) -> Result<Self, String> {
        if r.replicas == 0 || r.replicas > MAX_REPLICAS {
            return Err(format!(
                "backends.replicas: {} is out of range: use 1 to {MAX_REPLICAS}",
                r.replicas
            ));
        }
        if r.body_size > 1 << 20 {
            return Err("backends.body_size: at most 1048576 bytes".into());
        }
        Ok(Backends {
            replicas: r.replicas,
            body_size: r.body_size,
            delay: r.delay,
            stop: r.stop,
            drain_timeout: r.drain_timeout,
        })
    }
}

impl Default for Backends {
    fn default() -> Self {
        Backends {
            replicas: default_replicas(),
            body_size: default_body(),
            delay: None,
            stop: default_stop(),
            drain_timeout: default_drain(),
        }
    }
}

/// The TLS version the load uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub enum TlsVersion {
    #[serde(rename = "1.2")]
    V12,
    #[serde(rename = "1.3")]
    V13,
}

/// The key of the proxy's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Key {
    Rsa2048,
    EcdsaP256,
}

/// TLS between the load and the proxy (the proxy terminates it).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// false: load the proxy over plain HTTP.
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "default_tls_version")]
    pub version: TlsVersion,
    #[serde(default = "default_key")]
    pub key: Key,
}

fn yes() -> bool {
    true
}
fn default_tls_version() -> TlsVersion {
    TlsVersion::V13
}
fn default_key() -> Key {
    Key::Rsa2048
}

impl Default for Tls {
    fn default() -> Self {
        Tls {
            enabled: true,
            version: default_tls_version(),
            key: default_key(),
        }
    }
}

/// The load: the engine's settings.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, try_from = "LoadRaw")]
pub struct Load {
    /// Requests per second over all connections.
    pub rate: f64,
    pub connections: usize,
    pub threads: usize,
    pub duration: Dur,
    pub warmup: Dur,
    pub timeout: Dur,
    pub connect_timeout: Dur,
    pub new_connection: bool,
    /// `connection` (wrk2) or `shared`.
    pub schedule: String,
    /// Fraction of requests kept individually for the latency scatter.
    pub sample: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadRaw {
    rate: f64,
    #[serde(default = "default_connections")]
    connections: usize,
    #[serde(default = "one")]
    threads: usize,
    duration: Dur,
    #[serde(default = "zero")]
    warmup: Dur,
    #[serde(default = "ten_s")]
    timeout: Dur,
    #[serde(default = "two_s")]
    connect_timeout: Dur,
    #[serde(default)]
    new_connection: bool,
    #[serde(default = "default_schedule")]
    schedule: String,
    #[serde(default = "default_sample")]
    sample: f64,
}

fn default_connections() -> usize {
    50
}
fn one() -> usize {
    1
}
fn zero() -> Dur {
    Dur(Duration::ZERO)
}
fn ten_s() -> Dur {
    Dur(Duration::from_secs(10))
}
fn two_s() -> Dur {
    Dur(Duration::from_secs(2))
}
fn default_sample() -> f64 {
    // Study S3 plotted 10 % of requests.
    0.1
}
fn default_schedule() -> String {
    "connection".into()
}

impl TryFrom<LoadRaw> for Load {
    type Error = String;
    fn try_from(r: LoadRaw) -> Result<Self, String> {
        if !(r.rate.is_finite() && r.rate > 0.0) {
            return Err(format!(
                "load.rate: {} is not a rate: give requests per second above 0",
                r.rate
            ));
        }
        if r.connections == 0 || r.threads == 0 {
            return Err("load.connections and load.threads must be at least 1".into());
        }
        if r.connections < r.threads {
            return Err(format!(
                "load.connections ({}) must be at least load.threads ({})",
                r.connections, r.threads
            ));
        }
        if r.duration.0.is_zero() {
            return Err("load.duration must be longer than 0s".into());
        }
        if !(0.0..=1.0).contains(&r.sample) {
            return Err(format!(
                "load.sample: {} is not a fraction from 0 to 1",
                r.sample
            ));
        }
        engine::schedule::Model::parse(&r.schedule).map_err(|e| e.scenario())?;
        Ok(Load {
            rate: r.rate,
            connections: r.connections,
            threads: r.threads,
            duration: r.duration,
            warmup: r.warmup,
            timeout: r.timeout,
            connect_timeout: r.connect_timeout,
            new_connection: r.new_connection,
            schedule: r.schedule,
            sample: r.sample,
        })
    }
}

/// Route configurations (study S3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteName {
    Base,
    Cors,
    Header,
    Rewrite,
}

impl RouteName {
    pub fn route(self) -> lab::Route {
        use lab::Route;
        match self {
            RouteName::Base => Route::Base,
            RouteName::Cors => Route::Cors,
            RouteName::Header => Route::Header,
            RouteName::Rewrite => Route::Rewrite,
        }
    }
}

/// The target of a scale step: `scale: 7` or `scale: {to: 7, stop: abrupt}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScaleTo {
    pub to: u32,
    /// Overrides `backends.stop` for this step.
    pub stop: Option<Stop>,
}

impl<'de> Deserialize<'de> for ScaleTo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            to: u32,
            #[serde(default)]
            stop: Option<Stop>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            N(u32),
            Full(Full),
        }
        let v = match Either::deserialize(d).map_err(|_| {
            de::Error::custom(
                "scale: expected a number of backends (scale: 7) or {to: 7, stop: graceful|abrupt}",
            )
        })? {
            Either::N(n) => ScaleTo { to: n, stop: None },
            Either::Full(f) => ScaleTo {
                to: f.to,
                stop: f.stop,
            },
        };
        if v.to == 0 || v.to > MAX_REPLICAS {
            return Err(de::Error::custom(format!(
                "scale: {} is out of range: use 1 to {MAX_REPLICAS}",
                v.to
            )));
        }
        Ok(v)
    }
}

/// A repeated block of steps.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    /// How many times; absent: until the load ends.
    #[serde(default)]
    pub times: Option<u32>,
    pub steps: Vec<Step>,
}

/// One change, or a pause, during the load.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Do nothing for this long.
    Wait(Dur),
    /// Scale the backends to this many.
    Scale(ScaleTo),
    /// Apply a route configuration.
    Route(RouteName),
    /// Reload the proxy (`reload: true`).
    Reload(bool),
    /// Stop and start the proxy process (`restart: true`).
    Restart(bool),
    /// Repeat steps.
    Repeat(Repeat),
}

/// What `--quick` changes, so a scenario runs in under a minute (CI, demos).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    /// Multiplies every duration of `changes` and the warm-up (default 0.25).
    #[serde(default = "quarter")]
    pub time_scale: f64,
    /// Replaces `load.duration`.
    #[serde(default)]
    pub duration: Option<Dur>,
    /// Replaces `load.rate`.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Replaces `load.connections`.
    #[serde(default)]
    pub connections: Option<usize>,
}

fn local() -> String {
    "local".to_string()
}

fn platform_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if lab::platform::PLATFORMS.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(de::Error::custom(format!(
            "unknown platform `{s}`, expected one of {}",
            lab::platform::PLATFORMS.join(", ")
        )))
    }
}

fn quarter() -> f64 {
    0.25
}

/// `placement:` as written: CPU lists; a missing part takes the machine's default.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    pub generator: Option<Vec<usize>>,
    pub proxy: Option<Vec<usize>>,
    pub backends: Option<Vec<usize>>,
}

impl PlacementSpec {
    /// The placement on this machine: the given sets, the default for the rest.
    pub fn resolve(spec: Option<&PlacementSpec>) -> lab::platform::Placement {
        let d = lab::platform::Placement::for_this_machine();
        let Some(s) = spec else { return d };
        lab::platform::Placement {
            generator: s.generator.clone().unwrap_or(d.generator),
            proxy: s.proxy.clone().unwrap_or(d.proxy),
            backends: s.backends.clone().unwrap_or(d.backends),
        }
    }
}

/// A parsed, checked scenario.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub systems: Vec<Profile>,
    /// Where the backends live: `local` (processes on this machine) by default.
    #[serde(default = "local", deserialize_with = "platform_name")]
    pub platform: String,
    #[serde(default)]
    pub backends: Backends,
    #[serde(default)]
    pub tls: Tls,
    /// CPUs of the generator, the proxy and the backends (default: disjoint halves).
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    pub load: Load,
    /// `- wait: 12s` style: each step is a map with one key.
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub changes: Vec<Step>,
    #[serde(default)]
    pub quick: Option<Quick>,
}

impl Scenario {
    /// Reads and checks a scenario file.
    ///
    /// # Errors
    /// [`ScenarioError`] naming the file, the line and the key.
    pub fn load(path: &Path) -> Result<(Scenario, String), ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            file: file.clone(),
            source,
        })?;
        let s = Scenario::parse(&text, &file)?;
        Ok((s, text))
    }

    /// Parses and checks scenario text; `file` names it in errors.
    ///
    /// # Errors
    /// [`ScenarioError`] naming the file, the line and the key.
    pub fn parse(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = serde_yaml_ng::from_str(text).map_err(|e| {
            let line = e.location().map(|l| l.line()).unwrap_or(0);
            let mut msg = e.to_string();
            // The location is reported once, in front.
            if let Some(i) = msg.find(" at line ") {
                msg.truncate(i);
            }
            ScenarioError::Invalid {
                file: file.to_string(),
                line,
                msg,
            }
        })?;
        let other = |msg: String| ScenarioError::Other {
            file: file.to_string(),
            msg,
        };
        if s.systems.is_empty() {
            return Err(other("systems: name at least one system under test".into()));
        }
        for (i, a) in s.systems.iter().enumerate() {
            if s.systems[..i].contains(a) {
                return Err(other(format!("systems: {} is listed twice", a.name())));
            }
        }
        if let Some(q) = &s.quick {
            if !(q.time_scale > 0.0 && q.time_scale <= 1.0) {
                return Err(other(
                    "quick.time_scale must be above 0 and at most 1".into(),
                ));
            }
        }
        check_steps(&s.changes, 0).map_err(other)?;
        PlacementSpec::resolve(s.placement.as_ref())
            .check()
            .map_err(other)?;
        Ok(s)
    }

    /// The scenario as `--quick` runs it.
    pub fn quick(&self) -> Scenario {
        let q = self.quick.clone().unwrap_or(Quick {
            time_scale: quarter(),
            duration: None,
            rate: None,
            connections: None,
        });
        let mut s = self.clone();
        let scale = |d: Dur| Dur(d.0.mul_f64(q.time_scale));
        s.load.duration = q.duration.unwrap_or(scale(s.load.duration));
        s.load.warmup = scale(s.load.warmup);
        if let Some(r) = q.rate {
            s.load.rate = r;
        }
        if let Some(c) = q.connections {
            s.load.connections = c.max(s.load.threads);
        }
        fn scale_steps(steps: &mut [Step], k: f64) {
            for st in steps {
                match st {
                    Step::Wait(d) => d.0 = d.0.mul_f64(k),
                    Step::Repeat(r) => scale_steps(&mut r.steps, k),
                    _ => {}
                }
            }
        }
        scale_steps(&mut s.changes, q.time_scale);
        s
    }
}

/// A repeat must wait somewhere, or it would spin; nesting is kept shallow.
fn check_steps(steps: &[Step], depth: usize) -> Result<(), String> {
    if depth > 3 {
        return Err("changes: repeat blocks nest more than 3 deep".into());
    }
    for st in steps {
        if let Step::Repeat(r) = st {
            if r.steps.is_empty() {
                return Err("changes: a repeat block needs steps".into());
            }
            if !waits(&r.steps) {
                return Err(
                    "changes: a repeat block must contain a wait (it would otherwise change the system as fast as it can)".into(),
                );
            }
            check_steps(&r.steps, depth + 1)?;
        }
    }
    Ok(())
}

fn waits(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Wait(d) => !d.0.is_zero(),
        Step::Repeat(r) => waits(&r.steps),
        _ => false,
    })
}

#[cfg(test)]
mod tests;
