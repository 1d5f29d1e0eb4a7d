//! Child processes that cannot outlive their owner.
//!
//! Each child runs in its own process group; dropping the guard kills the group and
//! reaps it, so a panic, an error or an interrupt leaves nothing running. Each group
//! is also registered with this process's [`watchdog`](super::watchdog), which kills
//! it if ingressbench itself is killed. Proxies run
//! in the foreground as direct children (no daemonising), so their exit is seen at
//! once.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, Pid, Signal};

/// A running child process and its process group.
#[derive(Debug)]
pub struct Guard {
    name: String,
    child: Option<Child>,
}

impl Guard {
    /// Starts `cmd` in a new process group with stdout and stderr appended to `log`.
    ///
    /// # Errors
    /// The I/O error when the log cannot be opened or the program cannot start.
    pub fn spawn(name: &str, cmd: &mut Command, log: &Path) -> std::io::Result<Guard> {
        use std::os::unix::process::CommandExt;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0);
        let child = cmd.spawn()?;
        super::watchdog::watch_group(child.id());
        Ok(Guard {
            name: name.to_string(),
            child: Some(child),
        })
    }

    /// Like [`Guard::spawn`], with the child (and everything it starts) confined to
    /// the CPUs `cpus` (empty: no confinement). The child inherits the affinity of the
    /// thread that forks it, so this thread takes the set for the spawn and gets its
    /// own back afterwards: no window in which the child runs elsewhere.
    ///
    /// # Errors
    /// As [`Guard::spawn`], and the error of setting the affinity.
    pub fn spawn_on(
        name: &str,
        cmd: &mut Command,
        log: &Path,
        cpus: &[usize],
    ) -> std::io::Result<Guard> {
        if cpus.is_empty() {
            return Guard::spawn(name, cmd, log);
        }
        let mine = rustix::thread::sched_getaffinity(None)?;
        rustix::thread::sched_setaffinity(None, &cpu_set(cpus))?;
        let res = Guard::spawn(name, cmd, log);
        let _ = rustix::thread::sched_setaffinity(None, &mine);
        res
    }

    /// Wraps a child that is already running in its own process group.
    pub fn adopt(name: &str, child: Child) -> Guard {
        Guard {
            name: name.to_string(),
            child: Some(child),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's pid (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Whether the child is still running.
    pub fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Sends a signal to the child's whole process group.
    pub fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid().and_then(|p| Pid::from_raw(p as i32)) {
            let _ = kill_process_group(pid, sig);
        }
    }

    /// Sends a signal to the child only (not its group).
    pub fn signal_main(&self, sig: Signal) {
        if let Some(pid) = self.pid().and_then(|p| Pid::from_raw(p as i32)) {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }

    /// Stops the child: `sig` to the group, up to `grace` to exit, then SIGKILL.
    /// Returns the time it took.
    pub fn stop(&mut self, sig: Signal, grace: Duration) -> Duration {
        let t = Instant::now();
        let Some(mut child) = self.child.take() else {
            return Duration::ZERO;
        };
        if matches!(child.try_wait(), Ok(None)) {
            self.signal_pid(child.id(), sig);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if !matches!(child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // Whatever is left in the group (workers of a proxy) goes too.
        self.signal_pid(child.id(), Signal::KILL);
        let _ = child.kill();
        let _ = child.wait();
        super::watchdog::unwatch_group(child.id());
        t.elapsed()
    }

    fn signal_pid(&self, pid: u32, sig: Signal) {
        if let Some(p) = Pid::from_raw(pid as i32) {
            let _ = kill_process_group(p, sig);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop(Signal::KILL, Duration::ZERO);
    }
}

/// The CPUs in `cpus` as a kernel CPU set.
pub fn cpu_set(cpus: &[usize]) -> rustix::thread::CpuSet {
    let mut set = rustix::thread::CpuSet::new();
    for c in cpus {
        set.set(*c);
    }
    set
}

pub use sut::tools::{output, which};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_spawned_on_a_cpu_set_runs_there_and_the_spawner_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let before = rustix::thread::sched_getaffinity(None).unwrap();
        let g = Guard::spawn_on(
            "sleeper",
            Command::new("sleep").arg("5"),
            &dir.path().join("log"),
            &[0],
        )
        .unwrap();
        let pid = rustix::process::Pid::from_raw(g.pid().unwrap() as i32);
        let child = rustix::thread::sched_getaffinity(pid).unwrap();
        assert!(child.is_set(0));
        assert_eq!(child.count(), 1, "confined to CPU 0");
        assert_eq!(rustix::thread::sched_getaffinity(None).unwrap(), before);
    }

    #[test]
    fn dropping_a_guard_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        // A shell with a grandchild: both must be gone after the drop.
        let g = Guard::spawn(
            "sleeper",
            Command::new("sh").args(["-c", "sleep 30 & echo $! ; wait"]),
            &log,
        )
        .unwrap();
        let pid = g.pid().unwrap();
        let t = Instant::now();
        let mut grandchild = String::new();
        while grandchild.trim().is_empty() && t.elapsed() < Duration::from_secs(5) {
            grandchild = std::fs::read_to_string(&log).unwrap_or_default();
            std::thread::sleep(Duration::from_millis(10));
        }
        let gc: i32 = grandchild.trim().parse().unwrap();
        drop(g);
        // SIGKILL is delivered asynchronously: give the kernel a moment to act on it.
        let alive = |p: i32| {
            std::path::Path::new(&format!("/proc/{p}")).exists()
                && !std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .unwrap_or_default()
                    .contains(") Z ")
        };
        let t = Instant::now();
        while (alive(pid as i32) || alive(gc)) && t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        for p in [pid as i32, gc] {
            assert!(!alive(p), "process {p} survived");
        }
    }
}
