//! How much CPU *other* processes took while a test ran, from /proc.
//!
//! The generator's lag is real whoever causes it: on a 2-core machine shared with a
//! parallel build, `generator.overloaded` is the engine telling the truth about the
//! machine, not a bug. To judge the engine, a test must know whether the machine was
//! free, so it measures the CPU used by everything except this test process and its
//! descendants (the generator, the backend, nginx).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Others' CPU, in cores, above which a run does not say anything about the generator.
pub const BUSY_CORES: f64 = 0.25;

/// CPU counters at one moment, in clock ticks.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// All CPUs, busy and idle.
    total: u64,
    /// All CPUs, busy (user, nice, system, irq, softirq, steal).
    busy: u64,
    /// This process, its reaped children, and its live descendants.
    ours: u64,
    cpus: usize,
}

/// Reads the counters now; `None` where /proc is not there to read.
pub fn sample() -> Option<Sample> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let mut lines = stat.lines();
    let all: Vec<u64> = lines
        .next()?
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total = all.iter().take(8).sum();
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&i| all.get(i).copied().unwrap_or(0))
        .sum();
    let cpus = lines.filter(|l| l.starts_with("cpu")).count().max(1);
    Some(Sample {
        total,
        busy,
        ours: ours()?,
        cpus,
    })
}

impl Sample {
    /// Average number of cores others kept busy between `earlier` and this sample.
    pub fn others_cores_since(&self, earlier: &Sample) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        let busy = self.busy.saturating_sub(earlier.busy);
        let ours = self.ours.saturating_sub(earlier.ours);
        busy.saturating_sub(ours) as f64 / total as f64 * self.cpus as f64
    }

    /// Average number of cores this process and its descendants kept busy.
    pub fn ours_cores_since(&self, earlier: &Sample) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        self.ours.saturating_sub(earlier.ours) as f64 / total as f64 * self.cpus as f64
    }
}

/// Waits, up to `limit`, for a second in which others use less than [`BUSY_CORES`].
/// Returns whether it found one.
pub fn wait_for_quiet(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let Some(a) = sample() else { return true };
        std::thread::sleep(Duration::from_secs(1));
        let Some(b) = sample() else { return true };
        if b.others_cores_since(&a) < BUSY_CORES {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

/// Fields of /proc/PID/stat after the command name (which may hold spaces), so that
/// index 0 is field 3 (state).
fn stat_fields(pid: &str) -> Option<Vec<u64>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    Some(
        rest.split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect(),
    )
}

/// CPU ticks of this process (with the children it reaped) and its live descendants.
fn ours() -> Option<u64> {
    const PPID: usize = 1; // field 4
    const UTIME: usize = 11; // field 14; stime, cutime, cstime follow
    let me = std::process::id();
    let own = stat_fields("self")?;
    let mut sum: u64 = own[UTIME..UTIME + 4].iter().sum();
    // pid -> (parent, utime + stime) of every process, to find our descendants.
    let mut procs: HashMap<u32, (u32, u64)> = HashMap::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(f) = stat_fields(&pid.to_string()) {
            if f.len() > UTIME + 1 {
                procs.insert(pid, (f[PPID] as u32, f[UTIME] + f[UTIME + 1]));
            }
        }
    }
    for (&pid, &(_, ticks)) in &procs {
        let mut p = pid;
        // Walk up to init; a descendant of ours meets `me` on the way.
        for _ in 0..64 {
            let Some(&(parent, _)) = procs.get(&p) else {
                break;
            };
            if parent == me {
                sum += ticks;
                break;
            }
            if parent <= 1 {
                break;
            }
            p = parent;
        }
    }
    Some(sum)
}
