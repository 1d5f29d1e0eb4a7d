//! The backends of a lab run: `ingressbench backend` processes, started and stopped
//! like pods of a Deployment.
//!
//! Each process gets a fresh id (`b1`, `b2`, ... never reused within a run), as each
//! pod gets a fresh name, so which backend answered a request says unambiguously
//! which process it was, and propagation can be timed per process. A new backend
//! counts as ready only once its `/healthz` answers, like a readiness probe.

use super::driver::{Endpoint, SutError};
use super::platform::BackendSpec;
use super::proc::Guard;
use http1::client;
use rustix::process::Signal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How a removed backend stops (a platform's notion; re-exported here for the pool's
/// callers).
pub use crate::platform::StopMode;

struct Running {
    endpoint: Endpoint,
    guard: Guard,
}

/// Declared with [`BackendSpec`], the other half of how a run's backends behave.
pub use crate::platform::FlapSpec;

/// The running backends, in start order.
pub struct Pool {
    /// The ingressbench binary (the backend is built in).
    exe: PathBuf,
    spec: BackendSpec,
    work_dir: PathBuf,
    log_dir: PathBuf,
    next: u32,
    running: Vec<Running>,
    /// Flapping backends: endpoints like the others, but outside scaling.
    flapping: Vec<Running>,
    /// Backends asked to stop gracefully, still draining.
    stopping: Vec<Guard>,
}

impl Pool {
    /// A pool whose processes keep their ready files in `work_dir` and logs in
    /// `log_dir`.
    pub fn new(exe: &Path, spec: BackendSpec, work_dir: &Path, log_dir: &Path) -> Pool {
        Pool {
            exe: exe.to_path_buf(),
            spec,
            work_dir: work_dir.to_path_buf(),
            log_dir: log_dir.to_path_buf(),
            next: 1,
            running: Vec::new(),
            flapping: Vec::new(),
            stopping: Vec::new(),
        }
    }

    /// The endpoints of the running backends, in start order, then the flapping ones.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.running
            .iter()
            .chain(&self.flapping)
            .map(|r| r.endpoint.clone())
            .collect()
    }

    /// The steady backends running (flapping ones are not counted: scaling leaves
    /// them alone).
    pub fn len(&self) -> usize {
        self.running.len()
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Starts one backend and waits until its `/healthz` answers 200.
    ///
    /// # Errors
    /// [`SutError`] when it cannot start or is not ready within 10 s.
    pub fn start_one(&mut self) -> Result<Endpoint, SutError> {
        let id = format!("b{}", self.next);
        self.next += 1;
        let r = self.spawn(&id, &[])?;
        let endpoint = r.endpoint.clone();
        self.running.push(r);
        Ok(endpoint)
    }

    /// Starts the flapping backends of `spec`, each writing its log to
    /// `flap-<id>.json` in the log folder, and waits until each is ready (the
    /// schedule starts healthy).
    ///
    /// # Errors
    /// [`SutError`] when one cannot start or is not ready within 10 s.
    pub fn start_flapping(&mut self, spec: &FlapSpec) -> Result<Vec<Endpoint>, SutError> {
        let mut out = Vec::new();
        for _ in 0..spec.count {
            let id = format!("f{}", self.flapping.len() + 1);
            let log = self.flap_log(&id);
            let args = [
                "--flap".to_string(),
                spec.schedule.clone(),
                "--flap-mode".to_string(),
                spec.mode.clone(),
                "--flap-log".to_string(),
                log.display().to_string(),
            ];
            let r = self.spawn(&id, &args)?;
            out.push(r.endpoint.clone());
            self.flapping.push(r);
        }
        Ok(out)
    }

    /// Where the flapping backend `id` writes what it received.
    pub fn flap_log(&self, id: &str) -> PathBuf {
        self.log_dir.join(format!("flap-{id}.json"))
    }

    /// The flapping backends' ids and logs, in start order.
    pub fn flap_logs(&self) -> Vec<(String, PathBuf)> {
        self.flapping
            .iter()
            .map(|r| (r.endpoint.id.clone(), self.flap_log(&r.endpoint.id)))
            .collect()
    }

    /// Starts backend `id` with `extra` flags and waits until `/healthz` answers.
    fn spawn(&mut self, id: &str, extra: &[String]) -> Result<Running, SutError> {
        let id = id.to_string();
        let ready = self.work_dir.join(format!("{id}.ready"));
        let mut cmd = Command::new(&self.exe);
        cmd.args(["backend", "--listen", "127.0.0.1:0", "--id", &id])
            .args(["--body-size", &self.spec.body_size.to_string()])
            .args(["--workers", &self.spec.workers.to_string()])
            .args([
                "--drain-timeout",
                &format!("{}ms", self.spec.drain_timeout.as_millis()),
            ])
            .arg("--ready-file")
            .arg(&ready)
            // Every backend of the pool counts a probe's attempts in one place.
            .arg("--probe-dir")
            .arg(&self.work_dir);
        if let Some(d) = &self.spec.delay {
            cmd.args(["--delay", d]);
        }
        cmd.args(extra);
        let log = self.log_dir.join(format!("backend-{id}.log"));
        let mut guard = Guard::spawn_on(&id, &mut cmd, &log, &self.spec.cpus)
            .map_err(SutError::io(format!("start backend {id}")))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let addr: SocketAddr = loop {
            if let Some(a) = std::fs::read_to_string(&ready)
                .ok()
                .and_then(|s| s.lines().next().map(str::to_string))
                .and_then(|l| l.trim().trim_start_matches("http://").parse().ok())
            {
                break a;
            }
            if !guard.alive() || Instant::now() > deadline {
                return Err(SutError::NotReady(format!(
                    "backend {id} (see {})",
                    log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        while !healthz(addr) {
            if !guard.alive() || Instant::now() > deadline {
                return Err(SutError::NotReady(format!("backend {id} /healthz")));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&ready);
        Ok(Running {
            endpoint: Endpoint { id, addr },
            guard,
        })
    }

    /// Picks the backend a scale-down removes: the newest, as a ReplicaSet prefers
    /// to delete the pod that has been ready the shortest time.
    pub fn victim(&self) -> Option<Endpoint> {
        self.running.last().map(|r| r.endpoint.clone())
    }

    /// Stops the backend with `id`. Graceful stops drain in the background; they
    /// are reaped by [`Pool::reap`] or [`Pool::stop_all`].
    pub fn stop(&mut self, id: &str, mode: StopMode) -> Option<Endpoint> {
        let i = self.running.iter().position(|r| r.endpoint.id == id)?;
        let mut r = self.running.remove(i);
        match mode {
            StopMode::Abrupt => {
                r.guard.stop(Signal::KILL, Duration::ZERO);
            }
            StopMode::Graceful => {
                r.guard.signal_main(Signal::TERM);
                self.stopping.push(r.guard);
            }
        }
        Some(r.endpoint)
    }

    /// Forgets draining backends that have exited.
    pub fn reap(&mut self) {
        self.stopping.retain_mut(|g| g.alive());
    }

    /// Stops every backend (running and draining) and waits for them.
    pub fn stop_all(&mut self) {
        for mut r in self.running.drain(..).chain(self.flapping.drain(..)) {
            r.guard.stop(Signal::TERM, Duration::from_millis(500));
        }
        for mut g in self.stopping.drain(..) {
            g.stop(Signal::TERM, Duration::from_millis(500));
        }
    }

    /// Whether the backend `id` is running (started and not stopped) and alive.
    pub fn alive(&mut self, id: &str) -> bool {
        self.running
            .iter_mut()
            .chain(self.flapping.iter_mut())
            .find(|r| r.endpoint.id == id)
            .is_some_and(|r| r.guard.alive())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// One readiness probe: `GET /healthz` answers 200.
pub fn healthz(addr: SocketAddr) -> bool {
    client::request(addr, "GET", "/healthz", &[], b"", Duration::from_secs(1))
        .is_ok_and(|r| r.status == 200)
}
