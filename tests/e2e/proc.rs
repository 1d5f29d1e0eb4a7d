//! Processes started by the end-to-end tests (backends, loads, lab runs, Chromium),
//! each in its own process group and owned by a guard that ends the whole group on
//! drop, so a failing assertion leaves nothing running: Chromium forks a zygote,
//! a GPU process and renderers that outlive a killed parent otherwise.

use rustix::process::{kill_process_group, Pid, Signal};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A child process (and its group) that is stopped and reaped when dropped.
pub struct Proc {
    child: Option<Child>,
    name: String,
    /// The command line, for failure messages.
    what: String,
    /// Asked first on drop, with the time it gets to exit on its own: a lab run must
    /// be interrupted (SIGINT) to stop its proxies, which live in groups of their own.
    stop: Option<(Signal, Duration)>,
    stdout: PathBuf,
    stderr: PathBuf,
    started: Instant,
}

/// How a process ended, with what it printed.
#[derive(Debug)]
pub struct Output {
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Proc {
    /// Spawns `cmd` in a new process group, stdout and stderr going to
    /// `<logs>/<name>.out` and `<name>.err` (files, not pipes: nothing can block).
    pub fn spawn(name: &str, cmd: &mut Command, logs: &Path) -> Proc {
        let what = format!("{cmd:?}");
        let stdout = logs.join(format!("{name}.out"));
        let stderr = logs.join(format!("{name}.err"));
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).expect("stdout log"))
            .stderr(File::create(&stderr).expect("stderr log"))
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: spawn {:?}: {e}", cmd.get_program()));
        Proc {
            child: Some(child),
            name: name.to_string(),
            what,
            stop: None,
            stdout,
            stderr,
            started: Instant::now(),
        }
    }

    /// On drop, send `sig` first and allow `grace` before killing the group.
    pub fn stop_with(mut self, sig: Signal, grace: Duration) -> Proc {
        self.stop = Some((sig, grace));
        self
    }

    fn pgid(&self) -> Option<Pid> {
        Pid::from_raw(self.child.as_ref()?.id() as i32)
    }

    /// Sends `sig` to the process group (ignored once it is gone).
    pub fn signal(&self, sig: Signal) {
        if let Some(pgid) = self.pgid() {
            let _ = kill_process_group(pgid, sig);
        }
    }

    /// What the process printed so far on stderr.
    pub fn stderr_so_far(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        child
            .try_wait()
            .unwrap_or_else(|e| panic!("{}: wait: {e}", self.name))
    }

    fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.try_wait() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to end within `limit` and returns what it printed.
    ///
    /// # Panics
    /// When it overstays (after stopping it), with the tail of its stderr.
    pub fn finish(mut self, limit: Duration) -> Output {
        let status = self.wait_for(limit);
        let elapsed = self.started.elapsed();
        let Some(status) = status else {
            self.kill();
            panic!(
                "{} still running after {limit:?}: {}\nstderr:\n{}",
                self.name,
                self.what,
                tail(&self.stderr_so_far(), 40)
            );
        };
        // The leader is gone; whatever it left in its group goes too.
        self.signal(Signal::KILL);
        self.child = None;
        Output {
            code: status.code(),
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.stderr).unwrap_or_default(),
            elapsed,
        }
    }

    fn kill(&mut self) {
        if self.child.is_none() {
            return;
        }
        if self.try_wait().is_none() {
            if let Some((sig, grace)) = self.stop {
                self.signal(sig);
                self.wait_for(grace);
            }
        }
        self.signal(Signal::KILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of `s`, for failure messages.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
