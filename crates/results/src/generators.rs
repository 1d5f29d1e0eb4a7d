//! A load split over several generators: each part as planned and as it ran, and the
//! marks each received.

use crate::Requests;
use serde::{Deserialize, Serialize};

/// How the generator itself fared: results from an overloaded generator are not valid.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    /// True when the generator could not send on time (lag p99 over the limit) and
    /// was short of CPU doing so: its threads were busy (see `woke_late` for the
    /// other cause).
    pub overloaded: bool,
    /// The lag p99 was over the limit although the generator's threads had CPU to
    /// spare: they woke late (a machine whose timer wake-ups are slow, or another
    /// process on their cores), so adding threads would not help. The latencies
    /// include that delay all the same. Absent (false) in older files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub woke_late: bool,
    /// How late the generator's threads woke from a timed wait on this machine,
    /// measured by each worker just before the run: the floor under its lag.
    /// Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeup_us: Option<WakeUp>,
    /// 99th percentile of the generator's lag, in milliseconds.
    pub lag_p99_ms: f64,
    /// The lag p99 above which the generator counts as overloaded, in milliseconds.
    pub lag_limit_ms: f64,
    /// CPU time the generator used (user + system), in seconds.
    pub cpu_s: f64,
    /// How many times the generator's threads went to sleep in the window (their
    /// voluntary context switches, over every thread): on a virtual machine each
    /// costs a wake-up that can cost more CPU than a request, so sleeps per request
    /// say where the CPU went. Absent where unknown (older files, no `/proc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<u64>,
    /// Resolution of the clock, in nanoseconds.
    pub clock_resolution_ns: u64,
    /// The generator's threads ran at a raised scheduling priority (nice -10).
    #[serde(default)]
    pub priority_raised: bool,
    /// The CPUs the generator's threads were to be confined to (`0,1`; empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus: String,
    /// The CPUs its threads could run on once pinned, as the kernel reports them
    /// (`0,1`): `cpus` when the pin held, the CPUs they were allowed before when it
    /// was refused (then a warning says why). Absent when no pin was asked for (and
    /// in files written before it existed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus_applied: String,
}

/// How late a thread wakes from a timed wait (epoll with a 100 µs timeout, the
/// engine's own way of waiting), in microseconds over the time asked for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WakeUp {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// How many timed waits were measured, over every worker.
    pub samples: u64,
}

impl WakeUp {
    /// The figures of `ns` (each wait's overshoot, ns); `None` for none.
    pub fn of(ns: &mut [u32]) -> Option<WakeUp> {
        if ns.is_empty() {
            return None;
        }
        ns.sort_unstable();
        let at = |q: f64| {
            let i = ((ns.len() as f64 * q).ceil() as usize).clamp(1, ns.len()) - 1;
            f64::from(ns[i]) / 1000.0
        };
        Some(WakeUp {
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
            samples: ns.len() as u64,
        })
    }

    /// The worse of two machines' figures (a split run's generators).
    pub fn worst(a: Option<&WakeUp>, b: Option<&WakeUp>) -> Option<WakeUp> {
        match (a, b) {
            (Some(a), Some(b)) => Some(WakeUp {
                p50: a.p50.max(b.p50),
                p99: a.p99.max(b.p99),
                max: a.max.max(b.max),
                samples: a.samples + b.samples,
            }),
            (a, b) => a.or(b).cloned(),
        }
    }
}

/// The generators of a split run (`load --generators N`): the instant they all
/// started from and each one's own figures, which the merged totals cannot show
/// (one generator's lag or late start is hidden in the sum of the others).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generators {
    /// The shared start of every generator's schedule, RFC 3339 UTC.
    pub start_at: String,
    /// How late (or how far off the coordinator's clock) a generator may be before the
    /// merged run is not trusted, in ms.
    pub start_tolerance_ms: f64,
    /// One entry per generator, by index; a single generator's own result holds its
    /// own entry only.
    pub parts: Vec<GeneratorPart>,
}

/// One generator of a split run: its share of the load and how it fared.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorPart {
    /// 0-based, as in `--part INDEX/COUNT` (and a Kubernetes indexed Job).
    pub index: usize,
    /// Its share of the run: connections, threads and requests per second (`null`
    /// with `--max`).
    pub connections: usize,
    pub threads: usize,
    pub rate: Option<f64>,
    /// The seed of its sampling decisions (`--sample`), different for each generator.
    pub seed: u64,
    /// The CPUs it was pinned to (`0`; empty: not pinned).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus: String,
    /// Why it has no result (it failed, hung and was killed, or wrote nothing); its
    /// requests are then missing from the merged figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// It stopped before its planned end (interrupt).
    #[serde(default)]
    pub partial: bool,
    /// Its own request balance.
    #[serde(default)]
    pub requests: Requests,
    /// Its lag p99 exceeded the limit: its latencies include its own delay.
    #[serde(default)]
    pub overloaded: bool,
    #[serde(default)]
    pub lag_p99_ms: f64,
    #[serde(default)]
    pub cpu_s: f64,
    /// How late its schedule started after the shared instant, by its own clock, in
    /// ms (0: on time; `null` when unknown).
    #[serde(default)]
    pub start_offset_ms: Option<f64>,
    /// Its wall clock minus the coordinator's, measured before the run, in ms
    /// (`null`: not measured).
    #[serde(default)]
    pub clock_offset_ms: Option<f64>,
    /// The uncertainty of that measure (half its round trip), in ms.
    #[serde(default)]
    pub clock_offset_error_ms: Option<f64>,
    /// A scenario run's changes that reached it (each announced ahead, to take
    /// effect at a time on its own clock), `null` when none was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<MarksReceived>,
}

/// How a generator elsewhere (a pod) received the change marks of a scenario run.
/// Each is sent ahead of the change, to open its window at a set time on the
/// generator's clock; one that arrives after that time leaves the requests between
/// the two in the window before.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MarksReceived {
    /// Marks sent to it.
    pub sent: u64,
    /// Of those, how many it never acknowledged: its windows are wrong from the
    /// first of them on.
    pub missed: u64,
    /// The latest any mark arrived after its time, by its own clock, in ms (0: every
    /// mark was on time).
    pub late_max_ms: f64,
}

impl GeneratorPart {
    /// `generator INDEX/COUNT`, as messages name a generator.
    pub fn name(&self, count: usize) -> String {
        format!("generator {}/{count}", self.index)
    }
}

impl Generators {
    /// Why the merged run is not to be trusted because of one of its generators, one
    /// line each naming the generator: it failed, was overloaded, started late, or
    /// its clock is off the coordinator's by more than the tolerance.
    pub fn warnings(&self) -> Vec<String> {
        let n = self.parts.len();
        let tol = self.start_tolerance_ms;
        let mut w = Vec::new();
        for p in &self.parts {
            let name = p.name(n);
            if let Some(e) = &p.error {
                w.push(format!(
                    "{name} failed: {e}; its share of the load is missing"
                ));
                continue;
            }
            if p.overloaded {
                w.push(format!(
                    "{name} was overloaded: its lag p99 was {:.3} ms; latencies include its own delay. Use more generators, threads or cores, or a lower rate",
                    p.lag_p99_ms
                ));
            }
            if let Some(off) = p.start_offset_ms.filter(|o| *o > tol) {
                w.push(format!(
                    "{name} started {off:.1} ms late (tolerance {tol} ms): its requests are not on the shared schedule"
                ));
            }
            if let Some(off) = p.clock_offset_ms.filter(|o| o.abs() > tol) {
                w.push(format!(
                    "{name}'s clock is {off:+.1} ms off the coordinator's (tolerance {tol} ms): its seconds on the timeline are shifted by that much"
                ));
            }
            if let Some(m) = &p.marks {
                if m.missed > 0 {
                    w.push(format!(
                        "{name} missed {} of {} change marks: its requests are left out of the change windows (and of the route propagation drawn from them)",
                        m.missed, m.sent
                    ));
                }
                if m.late_max_ms > 0.0 {
                    w.push(format!(
                        "{name} received a change mark up to {:.1} ms after its time: requests intended in that gap are counted in the window before the change",
                        m.late_max_ms
                    ));
                }
            }
        }
        w
    }
}
