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
    /// Why the lag was over the limit, when it was: the generator itself, other
    /// processes on its CPUs, or the machine (see [`LagCause`]). Absent when the lag
    /// was within the limit, and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<LagCause>,
    /// What the machine did to the generator during the run, beside its own lag:
    /// time the hypervisor stole from its CPUs, the CPU other processes used there,
    /// stalls of the whole machine. Absent where unknown (no `/proc`, older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineTime>,
}

/// Whose doing a lag over the limit was. Each has its own advice: a generator short
/// of CPU needs more threads or a lower rate; other processes on its CPUs need
/// moving; a machine that stole time or stalled needs a quieter machine, and
/// neither threads nor placement would help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LagCause {
    /// Neither the machine nor other processes explain it: the generator's own work
    /// (threads busy: too little CPU for it) or its own wake-ups.
    Generator,
    /// Other processes kept the generator's CPUs busy (at least
    /// [`MachineTime::OTHERS_CORES`] of a core).
    OtherProcesses,
    /// The machine took the time: the hypervisor stole it from the generator's CPUs,
    /// or the whole machine (or the whole generator process) stalled.
    Machine,
}

impl LagCause {
    /// The cause that speaks for several runs or generators: the machine over other
    /// processes over the generator (the one that explains the others' lateness).
    pub fn worst(causes: impl IntoIterator<Item = Option<LagCause>>) -> Option<LagCause> {
        let rank = |c: &LagCause| match c {
            LagCause::Generator => 0,
            LagCause::OtherProcesses => 1,
            LagCause::Machine => 2,
        };
        causes.into_iter().flatten().max_by_key(rank)
    }

    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            LagCause::Generator => "generator",
            LagCause::OtherProcesses => "other_processes",
            LagCause::Machine => "machine",
        }
    }
}

/// What the machine did to the generator during the measured window.
///
/// Steal and other processes' CPU come from `/proc/stat` (per CPU, in the kernel's
/// 10 ms ticks) for the CPUs the generator's threads could run on; stalls from a
/// probe thread of the generator that sleeps 1 ms at a time at real-time priority
/// (`SCHED_FIFO`, where the system allows it) and records every wake-up at least
/// [`MachineTime::STALL_MS`] late: no ordinary thread, the generator's own included,
/// holds a real-time thread back, so such a wake-up is the machine (or the whole
/// process) not running.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineTime {
    /// Time the hypervisor took from the generator's CPUs (`steal`), summed over them,
    /// in milliseconds.
    pub steal_ms: f64,
    /// The largest share of the window stolen from any one of those CPUs (0.01: 1 %).
    pub steal_share: f64,
    /// CPU time other processes used on those CPUs, in cores over the window (the
    /// CPUs' busy time less the generator's own).
    pub others_cores: f64,
    /// The CPUs these figures cover (`0,1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus: String,
    /// Probe wake-ups at least [`Self::STALL_MS`] late, their summed lateness, and the
    /// latest, in milliseconds.
    pub stalls: u64,
    pub stall_ms: f64,
    pub stall_max_ms: f64,
    /// How many probe wake-ups there were (about one a millisecond).
    pub probe_wakeups: u64,
    /// The probe ran at real-time priority: only then are its late wake-ups taken
    /// as the machine's (at an ordinary priority the generator's own busy threads
    /// could hold it back).
    pub probe_raised: bool,
}

impl MachineTime {
    /// A probe wake-up this late (ms) counts as a stall: half the lag limit, so a
    /// stall that can by itself put a send over the limit is counted.
    pub const STALL_MS: f64 = 1.0;
    /// Steal on one of the generator's CPUs above this share of the window explains
    /// a lag p99 over the limit: steal comes in slices of milliseconds (the host's
    /// scheduler), and 1 % of requests late is exactly what a p99 measures.
    pub const STEAL_SHARE: f64 = 0.01;
    /// Stalls adding up to this share of the window (0.5 %) explain a lag p99 over
    /// the limit: every send due during a stall is late, and so are those behind
    /// them while the generator catches up (about as many again).
    pub const STALL_SHARE: f64 = 0.005;
    /// Other processes using this much of a core on the generator's CPUs explain a
    /// lag over the limit (the test suite's own threshold for a busy machine).
    pub const OTHERS_CORES: f64 = 0.25;

    /// The machine took enough time from a window of `window_ms` to explain a lag p99
    /// over the limit: steal, or stalls seen by a probe at raised priority.
    pub fn disturbed(&self, window_ms: f64) -> bool {
        let stalls = self.probe_raised && self.stall_ms >= Self::STALL_SHARE * window_ms;
        self.steal_share >= Self::STEAL_SHARE || stalls
    }

    /// Whose doing a lag over the limit was, given how busy the generator's threads
    /// were (see `Generator::overloaded`). The machine first: its stolen time also
    /// makes threads look busy or late; then other processes; else the generator.
    pub fn cause(m: Option<&MachineTime>, window_ms: f64) -> LagCause {
        match m {
            Some(m) if m.disturbed(window_ms) => LagCause::Machine,
            Some(m) if m.others_cores >= Self::OTHERS_CORES => LagCause::OtherProcesses,
            _ => LagCause::Generator,
        }
    }

    /// One line for a person: what the machine did, for a warning.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.steal_ms > 0.0 {
            parts.push(format!(
                "the hypervisor stole {:.0} ms from its CPUs {} (up to {:.1} % of one CPU's time)",
                self.steal_ms,
                self.cpus,
                self.steal_share * 100.0
            ));
        }
        if self.stalls > 0 {
            parts.push(format!(
                "{} stall{} of the machine ({:.1} ms in all, the longest {:.1} ms)",
                self.stalls,
                if self.stalls == 1 { "" } else { "s" },
                self.stall_ms,
                self.stall_max_ms
            ));
        }
        if self.others_cores >= 0.01 {
            parts.push(format!(
                "other processes used {:.2} cores of its CPUs",
                self.others_cores
            ));
        }
        if parts.is_empty() {
            "nothing measurable".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// The figures of several generators or runs: steal summed (each its own CPUs),
    /// the worst of the rest (generators on one machine see the same stalls).
    pub fn merge(a: Option<&MachineTime>, b: Option<&MachineTime>) -> Option<MachineTime> {
        match (a, b) {
            (Some(a), Some(b)) => Some(MachineTime {
                steal_ms: a.steal_ms + b.steal_ms,
                steal_share: a.steal_share.max(b.steal_share),
                others_cores: a.others_cores.max(b.others_cores),
                cpus: if a.cpus == b.cpus {
                    a.cpus.clone()
                } else {
                    format!("{};{}", a.cpus, b.cpus)
                },
                stalls: a.stalls.max(b.stalls),
                stall_ms: a.stall_ms.max(b.stall_ms),
                stall_max_ms: a.stall_max_ms.max(b.stall_max_ms),
                probe_wakeups: a.probe_wakeups + b.probe_wakeups,
                probe_raised: a.probe_raised && b.probe_raised,
            }),
            (a, b) => a.or(b).cloned(),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn m(f: impl Fn(&mut MachineTime)) -> MachineTime {
        let mut m = MachineTime {
            probe_raised: true,
            ..MachineTime::default()
        };
        f(&mut m);
        m
    }

    #[test]
    fn the_cause_of_a_late_generator_is_the_machine_then_others_then_itself() {
        let window_ms = 10_000.0;
        assert_eq!(MachineTime::cause(None, window_ms), LagCause::Generator);
        assert_eq!(
            MachineTime::cause(Some(&m(|_| {})), window_ms),
            LagCause::Generator
        );
        // 1 % of one CPU's window stolen: the machine.
        let stolen = m(|m| m.steal_share = 0.012);
        assert_eq!(
            MachineTime::cause(Some(&stolen), window_ms),
            LagCause::Machine
        );
        // Just under it: not.
        let little = m(|m| m.steal_share = 0.009);
        assert_eq!(
            MachineTime::cause(Some(&little), window_ms),
            LagCause::Generator
        );
        // Stalls adding up to 0.5 % of the window (50 ms of 10 s): the machine; but
        // only when the probe ran above ordinary processes.
        let stalled = m(|m| m.stall_ms = 50.0);
        assert_eq!(
            MachineTime::cause(Some(&stalled), window_ms),
            LagCause::Machine
        );
        let unraised = m(|m| {
            m.stall_ms = 50.0;
            m.probe_raised = false;
        });
        assert_eq!(
            MachineTime::cause(Some(&unraised), window_ms),
            LagCause::Generator
        );
        // Others on its CPUs: theirs, unless the machine explains it first.
        let others = m(|m| m.others_cores = 0.4);
        assert_eq!(
            MachineTime::cause(Some(&others), window_ms),
            LagCause::OtherProcesses
        );
        let both = m(|m| {
            m.others_cores = 0.4;
            m.steal_share = 0.05;
        });
        assert_eq!(
            MachineTime::cause(Some(&both), window_ms),
            LagCause::Machine
        );
    }

    #[test]
    fn several_runs_speak_with_their_worst_cause() {
        use LagCause::*;
        assert_eq!(LagCause::worst([None, None]), None);
        assert_eq!(LagCause::worst([Some(Generator), None]), Some(Generator));
        assert_eq!(
            LagCause::worst([Some(Generator), Some(Machine), Some(OtherProcesses)]),
            Some(Machine)
        );
    }

    #[test]
    fn a_cause_is_written_by_its_name() {
        let g = Generator {
            cause: Some(LagCause::OtherProcesses),
            ..Generator::default()
        };
        let v = serde_json::to_value(&g).unwrap();
        assert_eq!(v["cause"], "other_processes");
        assert_eq!(LagCause::OtherProcesses.name(), "other_processes");
        // Absent when the lag was within the limit.
        let v = serde_json::to_value(Generator::default()).unwrap();
        assert!(v.get("cause").is_none() && v.get("machine").is_none());
    }
}
