//! The scenario file's types, as serde reads them, with their defaults: what a
//! scenario may say. What it must not say is `checks.rs`; where a key is, `keys.rs`.

pub use crate::platform::PlatformKind;
use crate::{failover, sizing};
use lab::backends::StopMode;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario {file}: cannot read it")]
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
    /// A manifest of `kubernetes.manifests` at fault, at its own line.
    #[error("manifest {file}: {}{msg}", if *line > 0 { format!("line {line}: ") } else { String::new() })]
    Manifest {
        file: String,
        line: usize,
        msg: String,
    },
    /// A flag of `run` (or `validate`) at fault, or two flags together.
    #[error("{0}")]
    Flag(String),
}

/// A duration in a scenario: `12s`, `500ms`, `3m`, or a number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Dur(#[serde(serialize_with = "ser_dur")] pub Duration);

/// Whole milliseconds where they are exact; microseconds otherwise, so that a
/// send window of 50us survives the trip.
fn ser_dur<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    if d.subsec_nanos().is_multiple_of(1_000_000) {
        s.serialize_str(&format!("{}ms", d.as_millis()))
    } else {
        s.serialize_str(&format!("{}us", d.as_micros()))
    }
}

/// `load.rate`: requests per second, or a load plan: a list of steps and ramps
/// (`[1000:30s, 2000:30s]`, `["100..5000:60s"]`) or the same as one string, as `-R`
/// takes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Rate {
    /// Requests per second (0: not given).
    Fixed(f64),
    Plan(engine::profile::RateProfile),
}

impl Default for Rate {
    fn default() -> Self {
        Rate::Fixed(0.0)
    }
}

impl Rate {
    /// Whether `load.rate` was given at all (a plan, or a rate other than 0; a NaN
    /// counts as given so that it is refused as a bad rate, not as a missing one).
    pub fn given(&self) -> bool {
        match self {
            Rate::Fixed(r) => *r != 0.0,
            Rate::Plan(_) => true,
        }
    }

    /// The fixed rate (0 for a plan).
    pub fn fixed(&self) -> f64 {
        match self {
            Rate::Fixed(r) => *r,
            Rate::Plan(_) => 0.0,
        }
    }

    pub fn plan(&self) -> Option<&engine::profile::RateProfile> {
        match self {
            Rate::Plan(p) => Some(p),
            Rate::Fixed(_) => None,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Fixed(r) => write!(f, "{r} req/s"),
            Rate::Plan(p) => write!(f, "plan {}", p.text()),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::Fixed(r) => s.serialize_f64(*r),
            Rate::Plan(p) => s.collect_seq(p.segments().iter().map(|g| g.text.as_str())),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        fn plan<E: de::Error>(
            r: Result<engine::profile::RateProfile, engine::profile::PlanError>,
        ) -> Result<Rate, E> {
            r.map(Rate::Plan)
                .map_err(|e| E::custom(format!("the plan {e}")))
        }
        impl<'de> de::Visitor<'de> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("requests per second, or a plan such as [1000:30s, 2000:30s] or [\"100..5000:60s\"]")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
                Ok(Rate::Fixed(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
                Ok(Rate::Fixed(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
                Ok(Rate::Fixed(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                if engine::profile::RateProfile::looks_like_plan(v) {
                    plan(engine::profile::RateProfile::parse(v))
                } else {
                    v.trim().parse().map(Rate::Fixed).map_err(|_| {
                        E::custom(format!("'{v}' is not a rate: give requests per second, or a plan such as [1000:30s, 2000:30s]"))
                    })
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Rate, A::Error> {
                let mut items: Vec<String> = Vec::new();
                while let Some(item) = seq.next_element::<serde_yaml_ng::Value>()? {
                    match item {
                        serde_yaml_ng::Value::String(s) => items.push(s),
                        other => {
                            return Err(de::Error::custom(format!(
                                "a plan's steps are RATE:DURATION or FROM..TO:DURATION, not {}",
                                serde_yaml_ng::to_string(&other).unwrap_or_default().trim()
                            )))
                        }
                    }
                }
                plan(engine::profile::RateProfile::from_items(&items))
            }
        }
        d.deserialize_any(V)
    }
}

/// The longest duration a scenario may give anywhere: a week-long soak is the most a
/// run on one machine makes sense for, and a longer one is a typo (or overflows the
/// load's clock).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

impl Dur {
    fn checked(d: Duration) -> Result<Dur, String> {
        if d > MAX_DURATION {
            Err(format!(
                "{}s is too long: a scenario's durations are at most 7 days (168h)",
                d.as_secs()
            ))
        } else {
            Ok(Dur(d))
        }
    }
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
                results::duration::parse(v)
                    .and_then(Dur::checked)
                    .map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                Dur::checked(Duration::from_secs(v)).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                let v = u64::try_from(v).map_err(|_| E::custom("a duration cannot be negative"))?;
                self.visit_u64(v)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                match Duration::try_from_secs_f64(v) {
                    Ok(d) => Dur::checked(d).map_err(E::custom),
                    Err(_) if v.is_finite() && v > 0.0 => Err(E::custom(format!(
                        "{v}s is too long: a scenario's durations are at most 7 days (168h)"
                    ))),
                    Err(_) => Err(E::custom("a duration must be a positive number of seconds")),
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
pub struct Profile(pub(crate) &'static str);

impl Profile {
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl<'de> Deserialize<'de> for Profile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if let Some(p) = lab::profiles::profile(&s) {
            return Ok(Profile(p.name));
        }
        if let Some((name, _)) = lab::network::data_path(&s) {
            return Ok(Profile(name));
        }
        match kubernetes::controllers::controller(&s) {
            Some(c) => Ok(Profile(c.name)),
            None => Err(de::Error::custom(format!(
                "unknown system `{s}`, expected one of {} (platform: local), {} (platform: kubernetes) or {} (platform: network-lab)",
                lab::profiles::names().join(", "),
                kubernetes::controllers::names().join(", "),
                lab::network::path_names().join(", ")
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
#[serde(deny_unknown_fields)]
pub struct Backends {
    /// How many run when the load starts.
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// Response body size in bytes (the studies: about 1 KB).
    #[serde(default = "default_body")]
    pub body_size: usize,
    /// Extra delay per response, passed to the backend (`2ms`, `exp:2ms`, `uniform:1ms-5ms`).
    #[serde(default)]
    pub delay: Option<String>,
    /// How a removed backend stops.
    #[serde(default = "default_stop")]
    pub stop: Stop,
    /// How long a gracefully stopped backend may drain.
    #[serde(default = "default_drain")]
    pub drain_timeout: Dur,
    /// Backends that flap, beside the `replicas` steady ones (never scaled away).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flapping: Option<failover::Flapping>,
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

impl Default for Backends {
    fn default() -> Self {
        Backends {
            replicas: default_replicas(),
            body_size: default_body(),
            delay: None,
            stop: default_stop(),
            drain_timeout: default_drain(),
            flapping: None,
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

/// The load: the engine's settings, checked by the engine itself
/// ([`engine::LoadSpec::resolve`]) when the scenario is parsed.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Requests per second over all connections (0: not given, `rates` instead), or
    /// a load plan.
    #[serde(default)]
    pub rate: Rate,
    /// Fractions of each system's maximum (found by a search first, with the bounds
    /// of the `search` section), one run at each: study S2's 30 % and 50 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    #[serde(default = "default_connections")]
    pub connections: usize,
    #[serde(default = "one")]
    pub threads: usize,
    /// The measured window (required, but for a sizing scan: its search steps have
    /// their own).
    #[serde(default = "zero")]
    pub duration: Dur,
    #[serde(default = "zero")]
    pub warmup: Dur,
    #[serde(default = "ten_s")]
    pub timeout: Dur,
    #[serde(default = "two_s")]
    pub connect_timeout: Dur,
    /// `--send-window`: requests due within it after a wake-up go out in that
    /// wake-up (see [`engine::LoadSpec::send_window`]).
    #[serde(default = "default_send_window")]
    pub send_window: Dur,
    #[serde(default)]
    pub new_connection: bool,
    /// wrk2's way with kept-alive connections the server closed while idle: write
    /// the next request on them and count what it gets as an error (`--reuse-closed`).
    #[serde(default)]
    pub reuse_closed: bool,
    /// With `protocol: h2`: requests in flight per connection (its streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<usize>,
    /// `connection` (wrk2) or `shared`.
    #[serde(default = "default_schedule")]
    pub schedule: engine::schedule::Model,
    /// Fraction of requests kept individually for the latency scatter.
    #[serde(default = "default_sample")]
    pub sample: f64,
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
fn default_send_window() -> Dur {
    Dur(engine::DEFAULT_SEND_WINDOW)
}
fn default_sample() -> f64 {
    // Study S3 plotted 10 % of requests.
    0.1
}
fn default_schedule() -> engine::schedule::Model {
    engine::schedule::Model::PerConnection
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
    /// Add one route to the running route set of `routes:`, or remove its last
    /// (`route_set: add|remove`).
    RouteSet(RouteSetStep),
    /// Reload the proxy (`reload: true`).
    Reload(bool),
    /// Restart the proxy (`restart: proxy`, or `true` as before) the way its
    /// controller does, or the controller (`restart: controller`).
    Restart(RestartWhat),
    /// Give the proxy a new certificate (`rotate: certificate`).
    Rotate(RotateWhat),
    /// Drain a node of the cluster (`drain: node`, or `drain: {node: NAME}`).
    Drain(DrainNode),
    /// Repeat steps.
    Repeat(Repeat),
}

/// What a `restart:` step restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RestartWhat {
    /// The data plane: each local profile as its controller restarts it, a
    /// rolling restart of the data plane's pods on a cluster.
    Proxy,
    /// The control plane: the controller's pod, or envoy-xds's ADS server.
    Controller,
    /// `restart: false`: nothing (kept for files that switch a step off).
    Nothing,
}

impl<'de> Deserialize<'de> for RestartWhat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            B(bool),
            S(String),
        }
        let bad = || de::Error::custom("restart: expected proxy or controller");
        match Either::deserialize(d).map_err(|_| bad())? {
            Either::B(true) => Ok(RestartWhat::Proxy),
            Either::B(false) => Ok(RestartWhat::Nothing),
            Either::S(s) if s == "proxy" => Ok(RestartWhat::Proxy),
            Either::S(s) if s == "controller" => Ok(RestartWhat::Controller),
            Either::S(_) => Err(bad()),
        }
    }
}

impl RestartWhat {
    pub fn name(self) -> &'static str {
        match self {
            RestartWhat::Proxy => "proxy",
            RestartWhat::Controller => "controller",
            RestartWhat::Nothing => "nothing",
        }
    }
}

/// What a `rotate:` step rotates: today only the serving certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RotateWhat {
    Certificate,
}

/// The node a `drain:` step drains: `drain: node` (the node of the oldest backend
/// pod) or `drain: {node: NAME}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DrainNode {
    pub node: Option<String>,
}

impl<'de> Deserialize<'de> for DrainNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            node: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            S(String),
            Full(Full),
        }
        let bad = || {
            de::Error::custom(
                "drain: expected node (the node of the oldest backend pod) or {node: NAME}",
            )
        };
        match Either::deserialize(d).map_err(|_| bad())? {
            Either::S(s) if s == "node" => Ok(DrainNode { node: None }),
            Either::S(_) => Err(bad()),
            Either::Full(f) if !f.node.is_empty() => Ok(DrainNode { node: Some(f.node) }),
            Either::Full(_) => Err(bad()),
        }
    }
}

/// One route added to a running route set, or its last removed: the one change
/// at N routes that gateway benchmarks time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteSetStep {
    Add,
    Remove,
    /// Route 0 (the most requested under a skewed mix) changed in place: the same
    /// host and path, a new marker; a second `change` changes it back.
    Change,
}

impl RouteSetStep {
    pub fn name(self) -> &'static str {
        match self {
            RouteSetStep::Add => "add",
            RouteSetStep::Remove => "remove",
            RouteSetStep::Change => "change",
        }
    }
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

/// The `kubernetes:` section: how to reach the cluster and where each installed
/// controller's data plane listens. Flags of `run` override each key.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesSection {
    /// A kubeconfig file (default: `KUBECONFIG`, then `~/.kube/config`).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current one).
    #[serde(default)]
    pub context: Option<String>,
    /// Work in this existing namespace instead of creating `ingressbench-<run>`.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Keep the run's namespace afterwards.
    #[serde(default)]
    pub keep: bool,
    /// The backend image (default: the stock nginx image with a ConfigMap config).
    #[serde(default)]
    pub image: Option<String>,
    /// The Gateway HTTPRoutes attach to, `namespace/name`.
    #[serde(default)]
    pub gateway: Option<String>,
    /// A Gateway per system, `namespace/name` by system name, for runs that compare
    /// two Gateway API implementations (each watches only its own GatewayClass);
    /// a system not named here uses `gateway`.
    #[serde(default)]
    pub gateways: BTreeMap<String, String>,
    /// The run creates a Gateway of its own, of this GatewayClass, in its namespace
    /// (an HTTP listener, and an HTTPS one with the run's certificate when the load
    /// is TLS), attaches its routes to it, loads the address the implementation
    /// gives it, and deletes it at the end: for Envoy Gateway, a data plane of the
    /// run's own, as each of its users gets one per Gateway.
    #[serde(default)]
    pub gateway_class: Option<String>,
    /// A GatewayClass per system (`gateway_class` for the others).
    #[serde(default)]
    pub gateway_classes: BTreeMap<String, String>,
    /// The IngressClass the run's Ingresses name, for a controller installed with
    /// another than its profile's (`nginx`, `haproxy`, `traefik`, `contour`): a
    /// second ingress-nginx beside the first is the usual case.
    #[serde(default)]
    pub ingress_class: Option<String>,
    /// An IngressClass per system (`ingress_class` for the others).
    #[serde(default)]
    pub ingress_classes: BTreeMap<String, String>,
    /// How long the run's route may take to answer from a backend, once its objects
    /// are in, before the load (default 30 s).
    #[serde(default)]
    pub serve_timeout: Option<Dur>,
    /// The ports of the run's own Gateway's listeners.
    #[serde(default)]
    pub gateway_ports: GatewayPorts,
    /// How long the run's own Gateway may take to be Programmed with an address
    /// (default 90 s; a cloud load balancer can take minutes).
    #[serde(default)]
    pub gateway_timeout: Option<Dur>,
    /// The CA certificate (PEM) that signed the controllers' serving certificates,
    /// for an `https://` URL whose certificate no public CA signed (a lab cluster's).
    #[serde(default)]
    pub cacert: Option<PathBuf>,
    /// The host the routes match (default: every host).
    #[serde(default)]
    pub host: Option<String>,
    /// The URL each system's data plane listens on, by system name.
    #[serde(default)]
    pub urls: BTreeMap<String, String>,
    /// Where the load generators run when they are pods (`run --generators N`).
    #[serde(default)]
    pub generators: GeneratorPods,
    /// The controller's processes on this machine, by system name: every process
    /// whose command line holds this text (a kind node's or the test
    /// environment's controller and proxy), read for CPU and memory as a local
    /// proxy's are (docs/kubernetes.md).
    #[serde(default)]
    pub processes: BTreeMap<String, String>,
    /// Where each system's controller and data plane run, by system name, for the
    /// `restart:` steps; a profile with a standard install (docs/kubernetes.md)
    /// needs none.
    #[serde(default)]
    pub workloads: BTreeMap<String, Workloads>,
    /// The routes the user brings, by system name: a YAML file (beside the scenario,
    /// or a path) of the team's own Ingress objects, HTTPRoutes and the controller's
    /// own kinds, applied in the run's namespace in place of the generated route and
    /// pointed at the run's backends by `${IB_BACKEND}` and `${IB_BACKEND_PORT}`
    /// (docs/kubernetes.md, "The routes a user brings").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub manifests: BTreeMap<String, PathBuf>,
    /// Each system's manifest as read when the scenario was parsed: (the file as
    /// errors name it, its text).
    #[serde(skip)]
    pub manifest_texts: BTreeMap<String, (String, String)>,
}

/// `kubernetes.gateway_ports`: the listener ports of a Gateway the run owns.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GatewayPorts {
    #[serde(default = "http_port")]
    pub http: u16,
    #[serde(default = "https_port")]
    pub https: u16,
}

fn http_port() -> u16 {
    80
}

fn https_port() -> u16 {
    443
}

impl Default for GatewayPorts {
    fn default() -> Self {
        GatewayPorts {
            http: http_port(),
            https: https_port(),
        }
    }
}

/// `kubernetes.workloads.<system>`: the controller's namespace, the labels of its
/// pods, and its data plane's workload in the same namespace.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workloads {
    pub namespace: String,
    /// A label selector, `key=value,...`.
    pub controller: String,
    /// `deployment/NAME` or `daemonset/NAME`.
    #[serde(default)]
    pub data_plane: Option<String>,
}

impl Workloads {
    pub fn install(self) -> kubernetes::controllers::Install<String> {
        kubernetes::controllers::Install {
            namespace: self.namespace,
            controller: self.controller,
            data_plane: self.data_plane,
        }
    }
}

/// `kubernetes.generators`: the load split over the pods of an indexed Job, placed
/// as a study placed its load generator (S3 gave it a node pool of its own).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratorPods {
    /// How many pods (`run --generators N` overrides it; 1: the load runs here).
    #[serde(default)]
    pub count: Option<usize>,
    /// Their image: this program's (default: `ingressbench`, see docs/kubernetes.md).
    #[serde(default)]
    pub image: Option<String>,
    /// Only on nodes with these labels.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// At most one per node.
    #[serde(default)]
    pub spread: bool,
    /// In the node's own network namespace.
    #[serde(default)]
    pub host_network: bool,
    /// Their head start before the load begins: scheduling and an image pull
    /// (default: 30 s plus the connect timeout).
    #[serde(default)]
    pub lead: Option<Dur>,
}

impl KubernetesSection {
    /// `kubernetes.gateway` as (namespace, name).
    pub fn gateway(&self) -> Option<(String, String)> {
        split_gateway(self.gateway.as_deref()?)
    }

    /// The Gateway `system`'s HTTPRoutes attach to: its own in `gateways`, else
    /// `gateway`.
    pub fn gateway_for(&self, system: &str) -> Option<(String, String)> {
        match self.gateways.get(system) {
            Some(g) => split_gateway(g),
            None => self.gateway(),
        }
    }
}

impl KubernetesSection {
    /// The IngressClass of `system`'s Ingresses, when not its profile's.
    pub fn ingress_class_for(&self, system: &str) -> Option<String> {
        self.ingress_classes
            .get(system)
            .or(self.ingress_class.as_ref())
            .cloned()
    }

    /// The GatewayClass of the Gateway `system`'s run creates: its own in
    /// `gateway_classes`, else `gateway_class`; none when a Gateway is named for it.
    pub fn gateway_class_for(&self, system: &str) -> Option<String> {
        if self.gateways.contains_key(system) {
            return None;
        }
        self.gateway_classes
            .get(system)
            .or(self.gateway_class.as_ref())
            .cloned()
    }
}

/// `namespace/name` as its two parts, neither empty.
pub(crate) fn split_gateway(s: &str) -> Option<(String, String)> {
    let (ns, name) = s.split_once('/')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .then(|| (ns.to_string(), name.to_string()))
}

/// Every route a list of steps changes to, repeats included, each once.
pub(crate) fn routes_in(steps: &[Step], out: &mut Vec<RouteName>) {
    for s in steps {
        match s {
            Step::Route(r) if !out.contains(r) => out.push(*r),
            Step::Repeat(r) => routes_in(&r.steps, out),
            _ => {}
        }
    }
}

/// `run`'s flags for a cluster (see [`Scenario::override_cluster`]).
#[derive(Clone, Debug, Default)]
pub struct ClusterFlags {
    pub platform: Option<PlatformKind>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
    pub keep: bool,
    /// `--system NAME=URL`, in order.
    pub systems: Vec<(String, String)>,
    /// `--gateway [SYSTEM=]NAMESPACE/NAME`: without a system, every system's.
    pub gateways: Vec<(Option<String>, String)>,
    /// `--cacert FILE`: the CA of the controllers' serving certificates.
    pub cacert: Option<PathBuf>,
    /// `--manifests SYSTEM=FILE`: the routes a user brings for a system.
    pub manifests: Vec<(String, PathBuf)>,
}

/// Longest scenario name (it names a folder, with a timestamp appended).
pub const MAX_NAME: usize = 64;

/// A name that is safe as one path component: `[A-Za-z0-9._-]`, not starting with a
/// dot (no `..`, no hidden folder, no separator), at most [`MAX_NAME`] characters.
fn scenario_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    let ok = !s.is_empty()
        && s.len() <= MAX_NAME
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(s)
    } else {
        Err(de::Error::custom(format!(
            "name {s:?}: use 1 to {MAX_NAME} letters, digits, '.', '_' or '-', not starting with '.' (it names the results folder)"
        )))
    }
}

pub(crate) fn quarter() -> f64 {
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
    /// Names the results folder: letters, digits, `.`, `_` and `-` only.
    #[serde(deserialize_with = "scenario_name")]
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub systems: Vec<Profile>,
    /// Where the backends live: `local` (processes on this machine) by default.
    #[serde(default)]
    pub platform: PlatformKind,
    /// What only a cluster has: how to reach it and where its systems listen.
    #[serde(default)]
    pub kubernetes: Option<KubernetesSection>,
    #[serde(default)]
    pub backends: Backends,
    #[serde(default)]
    pub tls: Tls,
    /// What the load speaks to the systems: `http/1.1` (the studies'), `h2`
    /// (HTTP/2 over TLS, agreed by ALPN; every local profile then offers it), or
    /// `grpc` (gRPC calls over that, carried to the backends over h2c).
    #[serde(default, skip_serializing_if = "Protocol::is_http1")]
    pub protocol: Protocol,
    /// CPUs of the generator, the proxy and the backends (default: disjoint halves).
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    pub load: Load,
    /// A request mix in place of the one request to `/`: a list (each entry a
    /// method, a virtual host, a path, headers, a body and a weight), or
    /// `{from: routes}`: every route of `routes:` (docs/scenarios.md).
    #[serde(default, skip_serializing_if = "Requests::is_one")]
    pub requests: Requests,
    /// A route set each system is given before the load: N routes over H virtual
    /// hosts, and how long until every one serves (docs/scenarios.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<RoutesSection>,
    /// Behaviour probes: the built-in corpus sent to every system before its load,
    /// each compared with the baseline system (docs/probes.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbesSection>,
    /// Long-lived WebSocket sessions held open beside the request load, each end
    /// counted by how it ended and in which change window (docs/scenarios.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsSection>,
    /// `route_scale: [10, 100, 1000]`: every system runs once per size, its route set
    /// of `routes:` with that many routes (and its mix from them), each run named
    /// `<system>-<N>routes` (docs/scenarios.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_scale: Vec<u32>,
    /// `- wait: 12s` style: each step is a map with one key.
    #[serde(default, with = "serde_yaml_ng::with::singleton_map_recursive")]
    pub changes: Vec<Step>,
    #[serde(default)]
    pub quick: Option<Quick>,
    /// Only with `platform: network-lab`: how its nodes are tuned.
    #[serde(default)]
    pub network_lab: Option<NetworkLabSection>,
    /// The bounds of the maximum that `load.rates` are fractions of, and of each row
    /// of a sizing scan.
    #[serde(default)]
    pub search: Option<SearchSection>,
    /// A sizing scan (study S4) instead of a load: each system's maximum at each
    /// CPU allocation.
    #[serde(default)]
    pub sizing: Option<sizing::SizingSection>,
    /// Passive health checks of the tuned variants (`<system>+passive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passive_health: Option<failover::PassiveHealthSection>,
}

/// `protocol:`, the load's protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    #[default]
    #[serde(rename = "http/1.1")]
    Http1,
    #[serde(rename = "h2")]
    H2,
    /// gRPC unary calls (the backend's `ingressbench.Backend/Echo`) over HTTP/2 by
    /// ALPN; the systems carry them to the backends over h2c.
    #[serde(rename = "grpc")]
    Grpc,
}

impl Protocol {
    fn is_http1(&self) -> bool {
        *self == Protocol::Http1
    }
}

/// `requests:`: the one request of the studies, a list, or the routes' own.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Requests {
    /// `GET /` on the system's address (no `requests:`).
    #[default]
    One,
    List(Vec<RequestEntry>),
    /// `{from: routes, skew: S}`: one request per route of `routes:`, route `i`
    /// weighted `1 / (i + 1)^S` (0, the default: every route alike; 1: Zipf's law).
    FromRoutes(FromRoutes),
}

/// `requests: {from: routes, skew: 1.0}`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FromRoutes {
    pub from: FromWhat,
    #[serde(default)]
    pub skew: f64,
}

/// What a generated mix is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FromWhat {
    Routes,
}

impl Requests {
    pub fn is_one(&self) -> bool {
        *self == Requests::One
    }
}

impl Serialize for Requests {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Requests::One => s.serialize_none(),
            Requests::List(l) => l.serialize(s),
            Requests::FromRoutes(f) => f.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Requests {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Requests;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of requests ({host: ..., path: ...}) or {from: routes}")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, a: A) -> Result<Requests, A::Error> {
                Vec::<RequestEntry>::deserialize(de::value::SeqAccessDeserializer::new(a))
                    .map(Requests::List)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, a: A) -> Result<Requests, A::Error> {
                FromRoutes::deserialize(de::value::MapAccessDeserializer::new(a))
                    .map(Requests::FromRoutes)
            }
        }
        d.deserialize_any(V)
    }
}

/// `routes: {count: 1000, hosts: 10}`: route `i` is `/r<i>` on host
/// `sessions:`: WebSocket sessions (or gRPC streams) opened on the system's
/// address as the load is (the same host and, unless `path` says otherwise, the
/// same path), held for the measured window, each sending messages on one
/// open-loop schedule.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsSection {
    /// WebSocket sessions held open (this or `grpc_streams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<usize>,
    /// gRPC streams held open, each a bidirectional call on an HTTP/2 connection
    /// of its own (`protocol: grpc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_streams: Option<usize>,
    /// The streams' method, SERVICE/METHOD (default: the backend's
    /// `ingressbench.Backend/EchoStream`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Messages per second over all sessions (0, the default: only held open).
    #[serde(default)]
    pub rate: f64,
    /// Each message's payload (`32B`, `4KiB`; at least 8 bytes).
    #[serde(default = "default_message_size")]
    pub message_size: String,
    /// When a session that ended opens again: `at-once`, `after 1s` or `never`.
    #[serde(default = "default_reopen")]
    pub reopen: String,
    /// The upgrade's path (default: the load's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

fn default_message_size() -> String {
    "32B".into()
}

fn default_reopen() -> String {
    "at-once".into()
}

/// `probes:`: which system the others are compared with (default: the first), and
/// which probes run (default: all of [`crate::probes::CORPUS`]).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProbesSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    /// Probes of the user's own, run after the built-in ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<UserProbe>,
    /// What a probe's answer must show, by probe id (built-in or added).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expect: BTreeMap<String, crate::probes::Expect>,
    /// Probes again after each change step and at the end of the load (default),
    /// or before the load only.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub during: bool,
    /// Request headers the backend records and the probes compare besides its
    /// own list (Host, the forwarding headers, ...): those a system's routes add,
    /// such as a header a user's Middleware or HTTPRoute filter sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub record: Vec<String>,
    /// `annotations`: ingress-nginx's annotation corpus too (a cluster's
    /// controllers render it; docs/migration.md), its behaviours named in `only`
    /// by their ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusKind>,
}

/// Which corpus of fixtures `probes.corpus` adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CorpusKind {
    /// ingress-nginx's annotated behaviours (`kubernetes::corpus`).
    Annotations,
}

impl Default for ProbesSection {
    fn default() -> Self {
        ProbesSection {
            baseline: None,
            only: Vec::new(),
            add: Vec::new(),
            expect: BTreeMap::new(),
            during: true,
            record: Vec::new(),
            corpus: None,
        }
    }
}

fn is_true(b: &bool) -> bool {
    *b
}

/// A probe a scenario adds (`probes.add`), with the probes it joins.
pub use crate::probes::UserProbe;

/// `h<i mod hosts>.routes.test` and answers `x-route: r<i>` (`lab::routes`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoutesSection {
    pub count: u32,
    #[serde(default = "one_host")]
    pub hosts: u32,
    /// How long every route has to come up before the ones that did not are
    /// reported as never served.
    #[serde(default = "sixty_s")]
    pub bound: Dur,
}

fn one_host() -> u32 {
    1
}
fn sixty_s() -> Dur {
    Dur(Duration::from_secs(60))
}

/// The most routes a scenario may give: a configuration of about 15 MB for nginx.
pub const MAX_ROUTES: u32 = 100_000;

/// Most sessions a scenario holds open: 10,000 take about 35 MB of the generator
/// (docs/benchmarks.md); twice that stays inside a default open-files limit.
pub const MAX_SESSIONS: usize = 20_000;
/// The most sizes of a `route_scale` sweep.
pub const MAX_ROUTE_SIZES: usize = 10;

impl Scenario {
    /// The sizes this scenario's route sets run at: `route_scale`, or the one
    /// size of `routes:` (none without it; `None` entries stand for that).
    pub fn route_sizes(&self) -> Vec<Option<u32>> {
        if self.route_scale.is_empty() {
            vec![None]
        } else {
            self.route_scale.iter().map(|&n| Some(n)).collect()
        }
    }

    /// This scenario with `n` routes in its route set.
    pub fn with_routes(&self, n: u32) -> Scenario {
        let mut s = self.clone();
        if let Some(r) = s.routes.as_mut() {
            r.count = n;
        }
        s
    }
}

/// The name of a system's run at one size of a `route_scale` sweep.
pub fn route_scale_label(system: &str, routes: u32) -> String {
    format!("{system}-{routes}routes")
}

/// One request of a scenario's `requests:` mix.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestEntry {
    #[serde(default = "default_method")]
    pub method: String,
    /// The virtual host: the `Host` header and, over TLS, the server name (default:
    /// the system's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Path and query, from `/`.
    #[serde(default = "default_path")]
    pub path: String,
    /// `Name: value` each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
    /// Relative weight among the entries (a whole number from 1).
    #[serde(default = "default_weight")]
    pub weight: u32,
}

fn default_method() -> String {
    "GET".into()
}
fn default_path() -> String {
    "/".into()
}
fn default_weight() -> u32 {
    1
}

/// The `network_lab:` section: study S2's host tuning.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkLabSection {
    /// `s2`: the sysctls study S2 lists (those a namespace has); `none`: the kernel's
    /// defaults.
    #[serde(default = "no_tuning")]
    pub tuning: String,
    /// More sysctls (dotted keys, `net.*` only), set after `tuning`'s.
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// NOTRACK rules for the server's port (conntrack bypassed); not on `bridge`.
    #[serde(default)]
    pub notrack: bool,
    /// nginx logs each request's source and the address it was reached at.
    #[serde(default)]
    pub access_log: bool,
}

fn no_tuning() -> String {
    "none".into()
}

impl NetworkLabSection {
    /// The sysctls to set, in order.
    pub fn sysctls(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = if self.tuning == "s2" {
            lab::network::S2_SYSCTLS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        } else {
            Vec::new()
        };
        for (k, v) in &self.sysctls {
            out.retain(|(k0, _)| k0 != k);
            out.push((k.clone(), v.clone()));
        }
        out
    }
}

/// The `search:` section: what a rate must keep to count towards the maximum.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSection {
    /// The corrected p99 a rate must keep.
    pub p99: Dur,
    /// The share of failed requests a rate may have: `0.1%` or `0.001`.
    #[serde(default = "default_errors")]
    pub errors: String,
    /// Each step's measured window.
    #[serde(default = "five_s")]
    pub duration: Dur,
    #[serde(default = "one_s")]
    pub warmup: Dur,
    /// The closed-loop probe that finds the ceiling.
    #[serde(default = "three_s")]
    pub probe: Dur,
    #[serde(default = "one")]
    pub trials: usize,
    /// How close the highest pass and the lowest failure must get, a share of the
    /// ceiling.
    #[serde(default = "default_precision")]
    pub precision: String,
}

fn default_errors() -> String {
    "0.1%".into()
}
fn default_precision() -> String {
    "2%".into()
}
fn five_s() -> Dur {
    Dur(Duration::from_secs(5))
}
fn one_s() -> Dur {
    Dur(Duration::from_secs(1))
}
fn three_s() -> Dur {
    Dur(Duration::from_secs(3))
}

/// `0.1%` or `0.001` as a share in 0..=1.
pub fn share(s: &str) -> Option<f64> {
    let v = match s.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().ok()? / 100.0,
        None => s.trim().parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&v).then_some(v)
}
