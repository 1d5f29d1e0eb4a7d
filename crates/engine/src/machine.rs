//! What the machine did to the generator while it ran: time the hypervisor stole
//! from its CPUs, the CPU other processes used there, and stalls of the whole
//! machine ([`results::MachineTime`]).
//!
//! Why: a generator's lag over the limit has three causes that need three different
//! answers (more threads; moving the other processes; a quieter machine), and on a
//! cloud VM the third is common: the host takes a vCPU away (`steal` in
//! `/proc/stat`) or pauses the whole guest, and the generator, which had CPU to
//! spare, sends late. Telling them apart takes figures the generator's own lag
//! cannot give, so they are recorded beside it.

use results::clock::{Clock, Nanos};
use results::MachineTime;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// One CPU's counters from `/proc/stat`, in the kernel's ticks (`USER_HZ`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub cpu: usize,
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    pub steal: u64,
}

/// The per-CPU lines of a `/proc/stat` text (`cpu0 ...`, not the `cpu` total).
pub fn parse_stat(text: &str) -> Vec<CpuTicks> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cpu")?;
            let (id, fields) = rest.split_once(' ')?;
            let cpu = id.parse().ok()?;
            let f: Vec<u64> = fields
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            let at = |i: usize| f.get(i).copied().unwrap_or(0);
            // user nice system idle iowait irq softirq steal guest guest_nice
            Some(CpuTicks {
                cpu,
                busy: at(0) + at(1) + at(2) + at(5) + at(6),
                steal: at(7),
            })
        })
        .collect()
}

fn read_stat() -> Vec<CpuTicks> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_stat(&t))
        .unwrap_or_default()
}

/// The CPUs this process may run on now (what its threads inherit unless pinned).
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// What a stall probe saw.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProbeStats {
    pub wakeups: u64,
    pub stalls: u64,
    pub stall_ns: u64,
    pub max_ns: u64,
    pub raised: bool,
}

/// How long the probe sleeps between looks.
const PROBE_PERIOD_NS: u64 = 1_000_000;

/// A thread that sleeps [`PROBE_PERIOD_NS`] at a time at real-time priority (where
/// allowed, see [`real_time`]) and counts the wake-ups at least
/// [`MachineTime::STALL_MS`] late. About a
/// thousand wake-ups a second, a few microseconds of CPU each: a fraction of a
/// percent of one core, taken on whichever CPU is free (it is never pinned).
pub struct Probe {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<ProbeStats>,
}

impl Probe {
    /// Starts the probe; `None` if no thread could be started (the run goes on
    /// without stall figures).
    pub fn start(clock: Clock) -> Option<Probe> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ib-stall-probe".into())
            .spawn(move || probe_loop(clock, &flag))
            .ok()?;
        Some(Probe { stop, handle })
    }

    /// Stops the probe and returns what it saw.
    pub fn finish(self) -> ProbeStats {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Puts the calling thread in the real-time class (`SCHED_FIFO`, the lowest
/// real-time priority): it then runs as soon as it wakes, ahead of every ordinary
/// thread, the generator's own included (which may run at nice -20 themselves, and
/// would otherwise delay the probe's wake-ups by their time slices: a stall of the
/// generator's own making, not the machine's). Refused without root or
/// `CAP_SYS_NICE`: then the probe's late wake-ups are recorded but not judged.
#[allow(unsafe_code)]
fn real_time() -> bool {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: pid 0 is the calling thread; a valid parameter block.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
}

fn probe_loop(clock: Clock, stop: &AtomicBool) -> ProbeStats {
    let raised = real_time();
    let mut s = ProbeStats {
        raised,
        ..ProbeStats::default()
    };
    let stall_ns = (MachineTime::STALL_MS * 1e6) as u64;
    let ts = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: PROBE_PERIOD_NS as _,
    };
    while !stop.load(Ordering::Relaxed) {
        let before: Nanos = clock.now();
        let _ = rustix::thread::clock_nanosleep_relative(rustix::thread::ClockId::Monotonic, &ts);
        let late = clock.now().saturating_sub(before + PROBE_PERIOD_NS);
        s.wakeups += 1;
        if late >= stall_ns {
            s.stalls += 1;
            s.stall_ns += late;
            s.max_ns = s.max_ns.max(late);
        }
    }
    s
}

/// Watches the machine over a run: `/proc/stat` at its start and end, and a stall
/// probe in between.
pub struct Watch {
    before: Vec<CpuTicks>,
    probe: Option<Probe>,
}

impl Watch {
    /// Starts watching (at the start of the schedule); with `stalls`, a stall probe
    /// too (without, no stall is counted and `probe_raised` is false).
    pub fn start(clock: Clock, stalls: bool) -> Watch {
        Watch {
            before: read_stat(),
            probe: if stalls { Probe::start(clock) } else { None },
        }
    }

    /// Stops watching: the figures for `cpus` (the CPUs the generator's threads
    /// could run on), given the generator's own CPU time over `wall_s` seconds.
    /// `None` where `/proc/stat` could not be read.
    pub fn finish(self, cpus: &[usize], own_cpu_s: f64, wall_s: f64) -> Option<MachineTime> {
        let probe = self.probe.map(Probe::finish).unwrap_or_default();
        let after = read_stat();
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        figures(&self.before, &after, cpus, ticks, own_cpu_s, wall_s, probe)
    }
}

/// The figures between two `/proc/stat` readings for `cpus`.
pub fn figures(
    before: &[CpuTicks],
    after: &[CpuTicks],
    cpus: &[usize],
    ticks_per_s: f64,
    own_cpu_s: f64,
    wall_s: f64,
    probe: ProbeStats,
) -> Option<MachineTime> {
    if after.is_empty() || wall_s <= 0.0 {
        return None;
    }
    let (mut steal_s, mut busy_s, mut share) = (0.0, 0.0, 0.0f64);
    let mut seen = Vec::new();
    for a in after
        .iter()
        .filter(|a| cpus.is_empty() || cpus.contains(&a.cpu))
    {
        let Some(b) = before.iter().find(|b| b.cpu == a.cpu) else {
            continue;
        };
        let steal = a.steal.saturating_sub(b.steal) as f64 / ticks_per_s;
        steal_s += steal;
        busy_s += a.busy.saturating_sub(b.busy) as f64 / ticks_per_s;
        share = share.max(steal / wall_s);
        seen.push(a.cpu.to_string());
    }
    Some(MachineTime {
        steal_ms: steal_s * 1e3,
        steal_share: share,
        others_cores: ((busy_s - own_cpu_s) / wall_s).max(0.0),
        cpus: seen.join(","),
        stalls: probe.stalls,
        stall_ms: probe.stall_ns as f64 / 1e6,
        stall_max_ms: probe.max_ns as f64 / 1e6,
        probe_wakeups: probe.wakeups,
        probe_raised: probe.raised,
    })
}

/// One look at the machine over a short window, as a run would see it: how late a
/// timed wait wakes (the generator's floor) and what the machine took meanwhile.
#[derive(Clone, Debug)]
pub struct Look {
    /// The 99th percentile of the timed waits' overshoot, in microseconds.
    pub wakeup_p99_us: f64,
    pub machine: MachineTime,
}

/// Looks at the machine for `window`: timed waits of 100 µs one after the other (the
/// engine's own wait, so the floor is the one a run would meet) while the machine
/// is watched.
pub fn look(clock: Clock, window: std::time::Duration) -> Look {
    let cpus = allowed_cpus();
    let cpu0 = crate::process_cpu_s();
    let start = clock.now();
    let watch = Watch::start(clock, true);
    let mut waits = Vec::new();
    let end = start + window.as_nanos() as Nanos;
    while clock.now() < end {
        waits.extend(crate::worker::measure_wakeup(&clock));
    }
    let wall_s = clock.now().saturating_sub(start) as f64 / 1e9;
    let machine = watch
        .finish(&cpus, crate::process_cpu_s() - cpu0, wall_s)
        .unwrap_or_default();
    let p99 = results::WakeUp::of(&mut waits).map_or(0.0, |w| w.p99);
    Look {
        wakeup_p99_us: p99,
        machine,
    }
}

/// A look is quiet when the machine took nothing that could put a run's lag over
/// the limit (see [`MachineTime::disturbed`]), other processes leave the CPUs
/// alone, and the wake-up floor is back near the best this machine showed while
/// waiting (`best_p99_us`: this machine's own floor, measured, not assumed; 1.5
/// times it plus 50 µs of slack for the timer's jitter).
pub fn quiet(l: &Look, best_p99_us: f64, window_ms: f64) -> bool {
    !l.machine.disturbed(window_ms)
        && l.machine.stall_max_ms < 2.0 * MachineTime::STALL_MS
        && l.machine.others_cores < MachineTime::OTHERS_CORES
        && l.wakeup_p99_us <= best_p99_us * 1.5 + 50.0
}

/// How a wait for a quiet machine ended.
#[derive(Clone, Debug)]
pub struct Settled {
    pub settled: bool,
    pub waited: std::time::Duration,
    /// The best wake-up p99 seen while waiting (µs).
    pub floor_p99_us: f64,
    pub looks: usize,
}

/// How many quiet looks in a row make a settled machine.
pub const SETTLED_LOOKS: usize = 2;

/// Looks at the machine a second at a time until [`SETTLED_LOOKS`] quiet looks in a
/// row, or `limit`. `each` sees every look and whether it was quiet.
pub fn settle(
    clock: Clock,
    limit: std::time::Duration,
    mut each: impl FnMut(&Look, bool),
) -> Settled {
    let window = std::time::Duration::from_secs(1);
    let t0 = std::time::Instant::now();
    let (mut best, mut run, mut looks) = (f64::INFINITY, 0, 0);
    loop {
        let l = look(clock, window);
        looks += 1;
        best = best.min(l.wakeup_p99_us);
        let q = quiet(&l, best, window.as_secs_f64() * 1e3);
        each(&l, q);
        run = if q { run + 1 } else { 0 };
        if run >= SETTLED_LOOKS || t0.elapsed() >= limit {
            return Settled {
                settled: run >= SETTLED_LOOKS,
                waited: t0.elapsed(),
                floor_p99_us: best,
                looks,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  1119 0 904 9052 393 0 38 12 0 0\n\
                        cpu0 271 5 213 5263 9 1 13 1 0 0\n\
                        cpu1 847 0 691 3789 383 2 24 10 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn per_cpu_lines_are_read_and_the_total_line_is_not() {
        let t = parse_stat(STAT);
        assert_eq!(
            t,
            vec![
                CpuTicks {
                    cpu: 0,
                    busy: 271 + 5 + 213 + 1 + 13,
                    steal: 1
                },
                CpuTicks {
                    cpu: 1,
                    busy: 847 + 691 + 2 + 24,
                    steal: 10
                },
            ]
        );
    }

    #[test]
    fn steal_and_others_are_counted_on_the_generators_cpus_only() {
        let before = [
            CpuTicks {
                cpu: 0,
                busy: 100,
                steal: 5,
            },
            CpuTicks {
                cpu: 1,
                busy: 100,
                steal: 5,
            },
        ];
        // Over 2 s: CPU 0 busy 150 ticks (1.5 s) with 6 ticks stolen; CPU 1, where
        // the generator does not run, fully busy and stolen from heavily.
        let after = [
            CpuTicks {
                cpu: 0,
                busy: 250,
                steal: 11,
            },
            CpuTicks {
                cpu: 1,
                busy: 300,
                steal: 105,
            },
        ];
        let m = figures(
            &before,
            &after,
            &[0],
            100.0,
            1.0,
            2.0,
            ProbeStats::default(),
        )
        .unwrap();
        assert!((m.steal_ms - 60.0).abs() < 1e-9, "{m:?}");
        assert!((m.steal_share - 0.03).abs() < 1e-9, "{m:?}");
        // 1.5 s busy, 1.0 s of it the generator's: others 0.25 cores.
        assert!((m.others_cores - 0.25).abs() < 1e-9, "{m:?}");
        assert_eq!(m.cpus, "0");
        // Unpinned (every CPU): both count, the worst share is CPU 1's.
        let m = figures(&before, &after, &[], 100.0, 1.0, 2.0, ProbeStats::default()).unwrap();
        assert!((m.steal_share - 0.5).abs() < 1e-9, "{m:?}");
        assert_eq!(m.cpus, "0,1");
    }

    /// The whole process stopped for 80 ms (SIGSTOP from another process, as a
    /// paused VM would stop it): the probe wakes that late and says so.
    #[test]
    fn the_probe_sees_a_stop_of_the_whole_process_as_a_stall() {
        let clock = Clock::start();
        let probe = Probe::start(clock).expect("a probe thread");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let pid = std::process::id().to_string();
        let st = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("kill -STOP {pid}; sleep 0.08; kill -CONT {pid}"),
            ])
            .status()
            .expect("sh");
        assert!(st.success());
        std::thread::sleep(std::time::Duration::from_millis(30));
        let s = probe.finish();
        assert!(s.stalls >= 1, "{s:?}");
        assert!(s.max_ns >= 60_000_000, "{s:?}");
        assert!(s.wakeups >= 20, "{s:?}");
    }

    #[test]
    fn a_look_is_quiet_only_without_steal_stalls_others_or_a_raised_floor() {
        let calm = Look {
            wakeup_p99_us: 200.0,
            machine: MachineTime {
                probe_raised: true,
                ..MachineTime::default()
            },
        };
        assert!(quiet(&calm, 180.0, 1000.0));
        // The floor well above the best seen (80 µs: at most 1.5 x 80 + 50 = 170 µs
        // is normal): not back to normal; 100 µs allows 200, just.
        assert!(!quiet(&calm, 80.0, 1000.0));
        assert!(quiet(&calm, 100.0, 1000.0));
        let with = |f: &dyn Fn(&mut MachineTime)| {
            let mut l = calm.clone();
            f(&mut l.machine);
            quiet(&l, 180.0, 1000.0)
        };
        assert!(!with(&|m| m.steal_share = 0.02));
        assert!(!with(&|m| m.others_cores = 0.5));
        assert!(!with(&|m| {
            m.stalls = 3;
            m.stall_ms = 9.0;
            m.stall_max_ms = 3.0;
        }));
        // One stall of 3 ms in a second: under the share, but no run should meet it.
        assert!(!with(&|m| {
            m.stalls = 1;
            m.stall_ms = 3.0;
            m.stall_max_ms = 3.0;
        }));
        assert!(with(&|m| {
            m.stalls = 1;
            m.stall_ms = 1.2;
            m.stall_max_ms = 1.2;
        }));
    }

    #[test]
    fn a_quiet_probe_sees_no_stall_of_a_second() {
        let clock = Clock::start();
        let probe = Probe::start(clock).expect("a probe thread");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let s = probe.finish();
        // Not "no stall at all" (the test machine may be busy): none near the
        // 80 ms the stopped process shows above.
        assert!(s.max_ns < 50_000_000, "{s:?}");
    }
}
