//! The one guard for every process a test starts (backends, loads, nginx, lab runs,
//! Chromium): stopped and reaped when dropped, so a failing assertion leaves nothing
//! running. Output goes to files, never pipes, so a chatty child cannot block.
//!
//! A process runs in the tests' own process group unless it forks helpers that
//! outlive it ([`Proc::spawn_group`]: Chromium's zygote, GPU and renderers; a lab
//! run): then it gets a group of its own and the whole group is ended with it.

use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A child process (with its group, if it has one) that is stopped and reaped on drop.
pub struct Proc {
    child: Option<Child>,
    name: String,
    /// The command line, for failure messages.
    what: String,
    /// Whether the child leads a process group of its own.
    group: bool,
    /// Asked first when stopping, with the time it gets to exit on its own, then
    /// SIGTERM with the same time, then SIGKILL: nginx's master must be asked (SIGQUIT)
    /// or its workers outlive it; a lab run must be interrupted (SIGINT) to stop its
    /// proxies, which live in groups of their own.
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

impl Output {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl Proc {
    /// Spawns `cmd` in the tests' process group, stdout and stderr going to
    /// `<logs>/<name>.out` and `<name>.err`.
    pub fn spawn(name: &str, cmd: &mut Command, logs: &Path) -> Proc {
        Proc::start(name, cmd, logs, false)
    }

    /// [`Proc::spawn`] in a new process group, ended as a whole.
    pub fn spawn_group(name: &str, cmd: &mut Command, logs: &Path) -> Proc {
        cmd.process_group(0);
        Proc::start(name, cmd, logs, true)
    }

    fn start(name: &str, cmd: &mut Command, logs: &Path, group: bool) -> Proc {
        let what = format!("{cmd:?}");
        let stdout = logs.join(format!("{name}.out"));
        let stderr = logs.join(format!("{name}.err"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).expect("stdout log"))
            .stderr(File::create(&stderr).expect("stderr log"))
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: spawn {:?}: {e}", cmd.get_program()));
        Proc {
            child: Some(child),
            name: name.to_string(),
            what,
            group,
            stop: None,
            stdout,
            stderr,
            started: Instant::now(),
        }
    }

    /// When stopping, send `sig` first and allow `grace` (then SIGTERM, then SIGKILL).
    pub fn stop_with(mut self, sig: Signal, grace: Duration) -> Proc {
        self.stop = Some((sig, grace));
        self
    }

    /// The child's pid.
    ///
    /// # Panics
    /// Once it has been reaped.
    pub fn id(&self) -> u32 {
        self.child.as_ref().expect("child already reaped").id()
    }

    /// Sends `sig` to the process, or its group (ignored once it is gone).
    pub fn signal(&self, sig: Signal) {
        if let Some(c) = &self.child {
            send(c.id(), self.group, sig);
        }
    }

    /// What the process printed so far on stdout.
    pub fn stdout_so_far(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// What the process printed so far on stderr.
    pub fn stderr_so_far(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The exit status if the process has ended, without blocking.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        child
            .try_wait()
            .unwrap_or_else(|e| panic!("{}: wait: {e}", self.name))
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.is_some() && self.try_wait().is_none()
    }

    /// Waits up to `limit` for the process to end; `None` if it is still running.
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.try_wait() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the process to end within `limit` and returns what it printed.
    ///
    /// # Panics
    /// When it overstays (after stopping it), with the tail of its stderr.
    pub fn finish(mut self, limit: Duration) -> Output {
        let status = self.wait_timeout(limit);
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
        self.kill();
        Output {
            code: status.code(),
            stdout: self.stdout_so_far(),
            stderr: self.stderr_so_far(),
            elapsed,
        }
    }

    /// Stops the process now (as [`Proc::stop_with`] says, else SIGKILL), ends what is
    /// left of its group, and returns its exit status.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let pid = child.id();
        let mut status = child.try_wait().ok().flatten();
        if status.is_none() {
            if let Some((sig, grace)) = self.stop {
                for s in [sig, Signal::TERM] {
                    send(pid, self.group, s);
                    let deadline = Instant::now() + grace;
                    while status.is_none() && Instant::now() < deadline {
                        thread::sleep(Duration::from_millis(10));
                        status = child.try_wait().ok().flatten();
                    }
                    if status.is_some() || s == Signal::TERM {
                        break;
                    }
                }
            }
        }
        if self.group {
            send(pid, true, Signal::KILL);
        }
        if status.is_none() {
            let _ = child.kill();
            status = child.wait().ok();
        }
        status
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn send(pid: u32, group: bool, sig: Signal) {
    if let Some(pid) = Pid::from_raw(pid as i32) {
        let _ = if group {
            kill_process_group(pid, sig)
        } else {
            kill_process(pid, sig)
        };
    }
}

/// The last `n` lines of `s`, for failure messages.
/// The last `n` lines of each process output (`NAME.out`, `NAME.err`) in `dir`,
/// each under its path: for a harness's failure messages.
pub fn tails_in(dir: &Path, n: usize) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "out" || x == "err") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            out += &format!("--- {}:\n{}\n", p.display(), tail(&text, n));
        }
    }
    out
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
