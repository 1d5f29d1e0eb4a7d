//! What the system under test itself spends: CPU time and resident memory of every
//! process of its process groups (a proxy's master, its workers, old workers still
//! draining after a reload, every epoch of a hot restart), read from `/proc`.
//!
//! A reload that doubles memory while old workers drain, or a control loop that burns
//! a core per change, shows here and nowhere in latency. The CPU time of a process is
//! kept after it exits (its last reading), so a reload's old workers do not make the
//! total go backwards; what they used between the last reading and their exit (under a
//! second) is lost, and said so in docs/scenarios.md.

use std::collections::HashMap;

/// One reading of a set of process groups.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// CPU time (user + system) of every process ever seen in the groups, seconds.
    pub cpu_s: f64,
    /// Resident memory of the processes alive now, bytes.
    pub rss_bytes: u64,
    /// Processes alive now.
    pub processes: u32,
}

/// Readings over a run: remembers each process's CPU time so exits do not lose it.
#[derive(Debug)]
pub struct Usage {
    /// Last CPU ticks seen per pid (start time, to tell a reused pid apart).
    ticks: HashMap<(u32, u64), u64>,
    tick_s: f64,
    page: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            ticks: HashMap::new(),
            tick_s: 1.0 / rustix::param::clock_ticks_per_second() as f64,
            page: rustix::param::page_size() as u64,
        }
    }
}

/// The fields of `/proc/PID/stat` used here: process group, CPU ticks, start time,
/// resident pages. `None` for a line that does not parse.
fn parse_stat(line: &str) -> Option<(u32, u64, u64, u64)> {
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state): field N is f[N - 3].
    let n = |i: usize| f.get(i - 3)?.parse::<u64>().ok();
    Some((u32::try_from(n(5)?).ok()?, n(14)? + n(15)?, n(22)?, n(24)?))
}

/// Whether process `pid` runs: it exists and is neither a zombie (`Z`, dead but not
/// yet reaped by its parent) nor dead (`X`).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
        st.rfind(')')
            .and_then(|i| st[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The processes now in process group `pgid` (a proxy's master and workers).
pub fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|l| parse_stat(&l))
                .is_some_and(|(g, ..)| g == pgid)
        })
        .collect()
}

impl Usage {
    /// Reads every process now in `groups` (process group ids).
    pub fn read(&mut self, groups: &[u32]) -> Reading {
        let mut r = Reading::default();
        if groups.is_empty() {
            return r;
        }
        let procs = std::fs::read_dir("/proc").into_iter().flatten().flatten();
        for e in procs {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(line) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue; // gone meanwhile
            };
            let Some((pgrp, ticks, start, rss)) = parse_stat(&line) else {
                continue;
            };
            if !groups.contains(&pgrp) {
                continue;
            }
            self.ticks.insert((pid, start), ticks);
            r.rss_bytes += rss * self.page;
            r.processes += 1;
        }
        r.cpu_s = self.ticks.values().sum::<u64>() as f64 * self.tick_s;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    #[test]
    fn stat_lines_parse_whatever_the_command_name() {
        let line = "4242 (nginx: worker (x) 1) S 4240 4240 4240 0 -1 4194624 100 0 0 0 250 50 0 0 20 0 1 0 98765 1000000 512 18446744073709551615";
        assert_eq!(parse_stat(line), Some((4240, 300, 98765, 512)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 0"), None);
    }

    /// A real process of a known size: `dd` with a 64 MiB buffer, copying zeros
    /// (a core's worth of CPU), in a process group of its own.
    #[test]
    fn a_process_group_shows_its_memory_and_cpu() {
        let mut child = Command::new("dd")
            .args(["if=/dev/zero", "of=/dev/null", "bs=64M", "count=100000"])
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("dd");
        let pgid = child.id();
        let mut u = Usage::default();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let a = u.read(&[pgid]);
        std::thread::sleep(std::time::Duration::from_millis(500));
        let b = u.read(&[pgid]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(b.processes, 1);
        let mib = b.rss_bytes as f64 / (1 << 20) as f64;
        assert!((64.0..100.0).contains(&mib), "rss {mib} MiB");
        assert!(b.cpu_s > a.cpu_s, "{a:?} then {b:?}");
        // Gone: no process, but its CPU time is kept.
        let c = u.read(&[pgid]);
        assert_eq!((c.processes, c.rss_bytes), (0, 0));
        assert!(c.cpu_s >= b.cpu_s);
        assert_eq!(u.read(&[]), Reading::default());
    }
}
