//! The `local` platform: backends are `ingressbench backend` processes on this
//! machine, the proxy listens on loopback, and the TLS material is made per system in
//! a scratch folder that goes when the system is torn down.

use crate::backends::{FlapSpec, Pool, StopMode};
use crate::certs;
use crate::driver::{DriverContext, Endpoint, SutError};
use crate::platform::{Platform, PlatformEvent, SiteSpec, Target};
use crate::ports;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Processes on this machine, started and stopped like pods of a Deployment.
pub struct LocalProcesses {
    exe: PathBuf,
    /// Scratch space of the current system (pid files, sockets, certificates).
    work: Option<tempfile::TempDir>,
    pool: Option<Pool>,
    target: Option<Target>,
    /// Flapping backends the next `prepare` starts.
    flapping: Option<FlapSpec>,
    /// The key type of the run's certificates, and how many were issued.
    key: certs::KeyType,
    issued: u32,
}

pub use sut::scratch::{remove_scratch, scratch_dir, SCRATCH_PREFIX};

/// Where everything listens: loopback only, so a mistake never leaves the machine.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

impl LocalProcesses {
    /// A platform whose backends run `exe backend ...` (the built-in backend).
    pub fn new(exe: &Path) -> Self {
        LocalProcesses {
            exe: exe.to_path_buf(),
            work: None,
            pool: None,
            target: None,
            flapping: None,
            key: certs::KeyType::Rsa2048,
            issued: 1,
        }
    }
}

impl Platform for LocalProcesses {
    fn name(&self) -> &'static str {
        "local"
    }

    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, SutError> {
        self.teardown()?;
        sweep_leftovers(&std::env::temp_dir());
        crate::cgroup::sweep();
        std::fs::create_dir_all(&spec.out_dir)
            .map_err(SutError::io(format!("create {}", spec.out_dir.display())))?;
        let work = scratch_dir()?;
        let (cert, key) = certs::generate(work.path(), spec.tls.key)?;
        self.key = spec.tls.key;
        self.issued = 1;
        let p = ports::free_ports(2).map_err(SutError::io("choose free ports"))?;
        let mut ctx = DriverContext::with_s1_tuning(
            work.path().to_path_buf(),
            spec.out_dir.clone(),
            (cert.clone(), key),
            (p[0], p[1]),
        );
        ctx.cpus = spec.proxy_cpus.clone();
        ctx.http2 = spec.tls.enabled && spec.tls.http2;
        ctx.upstream_h2c = spec.grpc;
        ctx.probe_fixture = spec.probe_fixture;
        let (scheme, port) = if spec.tls.enabled {
            ("https", ctx.https_port)
        } else {
            ("http", ctx.http_port)
        };
        self.target = Some(Target {
            url: format!("{scheme}://{LOOPBACK}:{port}/"),
            cacert: spec.tls.enabled.then(|| certs::trust(work.path())),
            reachable: vec![LOOPBACK],
            netns: None,
        });
        let mut pool = Pool::new(&self.exe, spec.backends.clone(), work.path(), &spec.out_dir);
        self.work = Some(work);
        for _ in 0..spec.replicas {
            pool.start_one()?;
        }
        if let Some(f) = &self.flapping {
            pool.start_flapping(f)?;
        }
        self.pool = Some(pool);
        Ok(ctx)
    }

    fn target(&self) -> Target {
        self.target.clone().unwrap_or_default()
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.pool.as_ref().map(Pool::endpoints).unwrap_or_default()
    }

    fn replicas(&self) -> u32 {
        self.pool.as_ref().map_or(0, |p| p.len() as u32)
    }

    fn scale(&mut self, to: u32, stop: StopMode, on: &mut dyn FnMut(PlatformEvent)) {
        let Some(pool) = self.pool.as_mut() else {
            return;
        };
        let have = pool.len() as u32;
        if to > have {
            for _ in have..to {
                let t = Instant::now();
                match pool.start_one() {
                    Ok(endpoint) => on(PlatformEvent::Ready {
                        endpoint,
                        took: t.elapsed(),
                    }),
                    Err(e) => on(PlatformEvent::Failed {
                        detail: format!("start backend: {}", results::Causes(&e)),
                    }),
                }
            }
        } else {
            // As in Kubernetes, the pod is told to stop and leaves the endpoint set at
            // the same moment; the proxy learns of it when it learns of it.
            for _ in to..have {
                let Some(victim) = pool.victim() else {
                    break;
                };
                pool.stop(&victim.id, stop);
                on(PlatformEvent::Stopping {
                    id: victim.id,
                    mode: stop,
                });
            }
        }
    }

    /// A new leaf from the run's CA: same names, new key and serial.
    fn new_certificate(&mut self) -> Result<(PathBuf, PathBuf), SutError> {
        let Some(work) = &self.work else {
            return Err(SutError::NotPrepared("local".into()));
        };
        self.issued += 1;
        certs::issue(work.path(), self.key, self.issued)
    }

    fn set_flapping(&mut self, spec: Option<FlapSpec>) -> Result<(), SutError> {
        self.flapping = spec;
        Ok(())
    }

    fn flap_logs(&self) -> Vec<(String, PathBuf)> {
        self.pool.as_ref().map(Pool::flap_logs).unwrap_or_default()
    }

    fn tick(&mut self) {
        if let Some(p) = self.pool.as_mut() {
            p.reap();
        }
    }

    fn teardown(&mut self) -> Result<(), SutError> {
        if let Some(mut p) = self.pool.take() {
            p.stop_all();
        }
        self.target = None;
        if let Some(w) = self.work.take() {
            remove_scratch(w);
        }
        Ok(())
    }
}

impl Drop for LocalProcesses {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Removes what killed runs left in `tmp`: scratch folders whose owner (the pid in
/// their name) is gone, and every process whose command line names such a folder
/// (proxies read their configs there, backends write their ready files there).
/// Normally the [watchdog](crate::watchdog) has done this already; this covers a run
/// whose watchdog was killed too.
pub fn sweep_leftovers(tmp: &Path) -> Vec<PathBuf> {
    let mut swept = Vec::new();
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return swept;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(owner) = name
            .strip_prefix(SCRATCH_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if owner == std::process::id() || Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let dir = e.path();
        kill_processes_naming(&dir.display().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        swept.push(dir);
    }
    swept
}

/// Kills (SIGKILL, with their process groups) the processes whose command line
/// contains `needle`.
fn kill_processes_naming(needle: &str) {
    use rustix::process::{kill_process, kill_process_group, Pid, Signal};
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(needle) {
            continue;
        }
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = kill_process_group(pid, Signal::KILL);
            let _ = kill_process(pid, Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_runs_scratch_and_processes_are_swept_a_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid that cannot be running: above the kernel's pid_max.
        let dead = tmp.path().join(format!("{SCRATCH_PREFIX}4194399-abc"));
        let live = tmp
            .path()
            .join(format!("{SCRATCH_PREFIX}{}-abc", std::process::id()));
        let other = tmp.path().join("not-ours");
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).unwrap();
        }
        // A leftover "proxy" naming the dead run's folder in its command line: one
        // process (the shell's own `read` waits on a pipe nobody writes), so the
        // sweep leaves no child of it behind, holding this test's output open.
        let mut orphan = std::process::Command::new("sh")
            .args([
                "-c",
                "read x",
                &dead.join("nginx.conf").display().to_string(),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Until it has exec'd, the child's command line is still ours.
        let cmdline = format!("/proc/{}/cmdline", orphan.id());
        let t = std::time::Instant::now();
        while !String::from_utf8_lossy(&std::fs::read(&cmdline).unwrap_or_default())
            .contains(&dead.display().to_string())
        {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(5),
                "orphan never ran"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let swept = sweep_leftovers(tmp.path());
        assert_eq!(swept, std::slice::from_ref(&dead));
        assert!(!dead.exists() && live.exists() && other.exists());
        let t = std::time::Instant::now();
        while orphan.try_wait().unwrap().is_none() {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(5),
                "orphan survived"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
