//! The haproxy process: a master-worker (`-W`) master that stays our direct child,
//! configurations checked with `haproxy -c` before they are installed, seamless
//! reloads asked of the master and judged by its `show proc` (a new worker, or one more
//! failed reload), readiness waits on both ports, and what its output and log say
//! when something goes wrong; the version a run records.

use super::config::{ROUTES_MAP, ROUTE_HOSTS};
use super::runtime::{cli, send, ProcTable};
use super::{Haproxy, PendingReload, SLOTS};
use crate::driver::{Driver, SutError};
use crate::proc::{self, Guard};
use http1::client;
use rustix::process::Signal;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

impl Haproxy {
    /// Writes `text` as the new haproxy.cfg, with the `files` it reads (a route set's
    /// map and host list, by their paths), if `haproxy -c` accepts them. The files
    /// must be in place for the check, so each is swapped in with the one it replaces
    /// kept aside, and put back if haproxy refuses: a refused change leaves every
    /// file as it was (haproxy reads them only when it starts or reloads). Route files
    /// of an earlier configuration that `files` no longer has are removed.
    pub(super) fn write_checked(
        &self,
        text: &str,
        files: &[(PathBuf, String)],
    ) -> Result<(), SutError> {
        let run = self.run()?;
        let cfg = run.cfg();
        let candidate = cfg.with_extension("cfg.new");
        std::fs::write(&candidate, text)
            .map_err(SutError::io(format!("writing {}", candidate.display())))?;
        let mut swapped = Vec::new();
        let mut outcome = swap_in(files, &mut swapped);
        if outcome.is_ok() {
            outcome = proc::output(
                Command::new(&run.binary)
                    .arg("-c")
                    .arg("-f")
                    .arg(&candidate),
            )
            .map_err(SutError::io(format!("running {} -c", run.binary.display())))
            .and_then(|(ok, out)| {
                if ok {
                    Ok(())
                } else {
                    Err(SutError::Rejected {
                        what: format!("{} configuration", self.name()),
                        detail: alerts(&out),
                    })
                }
            });
        }
        if let Err(e) = outcome {
            let _ = std::fs::remove_file(&candidate);
            swap_back(&swapped);
            return Err(e);
        }
        for (_, old) in &swapped {
            let _ = std::fs::remove_file(old);
        }
        std::fs::rename(&candidate, &cfg)
            .map_err(SutError::io(format!("writing {}", cfg.display())))?;
        for name in [ROUTES_MAP, ROUTE_HOSTS] {
            let path = run.ctx.out_dir.join(name);
            if !files.iter().any(|(p, _)| *p == path) {
                let _ = std::fs::remove_file(path);
            }
        }
        Ok(())
    }

    /// Asks the master to reload and notes what it looked like before.
    pub(super) fn request_reload(&mut self) -> Result<(), SutError> {
        let master = self.run()?.master_sock();
        let deadline = Instant::now() + Duration::from_secs(2);
        // The master socket can refuse for a moment (start-up, an earlier re-exec).
        let before = loop {
            if let Some(t) = cli(&master, "show proc")
                .ok()
                .and_then(|s| ProcTable::parse(&s))
            {
                break Some(t);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let Some(before) = before else {
            return Err(SutError::NotReady(format!(
                "{}: master socket {}",
                self.name(),
                master.display()
            )));
        };
        self.pending = Some(PendingReload {
            reloads_before: before.reloads,
            failed_before: before.failed,
            old_workers: before.workers.iter().map(|w| w.pid).collect(),
        });
        self.worker = None;
        // 2.6 answers `reload` with nothing and closes while it re-execs; if the
        // socket is gone meanwhile, SIGUSR2 to the master does the same.
        match send(&master, "reload") {
            Ok(mut s) => {
                let _ = s.read_to_end(&mut Vec::new());
            }
            Err(_) => {
                if let Some(g) = self.guard.as_ref() {
                    g.signal_main(Signal::USR2);
                }
            }
        }
        Ok(())
    }

    /// Waits for the pending reload's new worker; returns its pid.
    pub(super) fn wait_reload(&mut self, deadline: Instant) -> Result<u32, SutError> {
        let master = self.run()?.master_sock();
        loop {
            if !self.running()? {
                return Err(SutError::NotRunning(self.name().to_string()));
            }
            let p = self.pending.as_ref().expect("a reload is pending");
            if let Some(t) = cli(&master, "show proc")
                .ok()
                .and_then(|s| ProcTable::parse(&s))
            {
                if t.reloads > p.reloads_before {
                    if let Some(w) = t
                        .workers
                        .iter()
                        .find(|w| w.reloads == 0 && !p.old_workers.contains(&w.pid))
                    {
                        self.pending = None;
                        return Ok(w.pid);
                    }
                    if t.failed > p.failed_before {
                        self.pending = None;
                        return Err(SutError::Rejected {
                            what: format!("{} reload", self.name()),
                            detail: log_tail(&self.run()?.log()),
                        });
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!("{} reload", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Starts the master on the installed haproxy.cfg, with no slots applied yet.
    pub(super) fn spawn(&mut self) -> Result<(), SutError> {
        // A state file from an earlier process would be loaded at start-up; the slots
        // are pushed from the driver's own map instead.
        let _ = std::fs::remove_file(self.run()?.state_file());
        self.spawn_handing_over(None)
    }

    /// Starts a master; with `old` (the running master's pid), one that takes the
    /// listening sockets over from the running worker (`-x` on its admin socket) and
    /// soft-stops the old master (`-sf`), loading the server-state file it left.
    pub(super) fn spawn_handing_over(&mut self, old: Option<u32>) -> Result<(), SutError> {
        let run = self.run()?;
        let master = run.master_sock();
        let mut cmd = Command::new(&run.binary);
        if let Some(pid) = old {
            cmd.arg("-x")
                .arg(run.admin_sock())
                .arg("-sf")
                .arg(pid.to_string());
        }
        // -W without -D: the master stays our direct child (seen exiting at once).
        cmd.arg("-W")
            .arg("-S")
            .arg(format!("{},mode,600", master.display()))
            .arg("-f")
            .arg(run.cfg());
        let guard = Guard::spawn_on("haproxy", &mut cmd, &run.log(), &run.ctx.cpus)
            .map_err(SutError::io(format!("starting {}", run.binary.display())))?;
        self.guard = Some(guard);
        self.pending = None;
        self.worker = None;
        self.applied = vec![None; SLOTS];
        Ok(())
    }
}

/// Puts each file's new text in place, noting in `swapped` every path done and where
/// the file it replaced was kept (`<path>.old`, absent if there was none).
fn swap_in(
    files: &[(PathBuf, String)],
    swapped: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<(), SutError> {
    for (path, text) in files {
        let beside = |ext: &str| {
            let mut p = path.as_os_str().to_owned();
            p.push(ext);
            PathBuf::from(p)
        };
        let (new, old) = (beside(".new"), beside(".old"));
        std::fs::write(&new, text).map_err(SutError::io(format!("writing {}", new.display())))?;
        let _ = std::fs::remove_file(&old);
        if path.exists() {
            std::fs::rename(path, &old)
                .map_err(SutError::io(format!("keeping {}", path.display())))?;
        }
        swapped.push((path.clone(), old));
        std::fs::rename(&new, path).map_err(SutError::io(format!("writing {}", path.display())))?;
    }
    Ok(())
}

/// Puts back what [`swap_in`] replaced (and removes what it added).
fn swap_back(swapped: &[(PathBuf, PathBuf)]) {
    for (path, old) in swapped.iter().rev() {
        if old.exists() {
            let _ = std::fs::rename(old, path);
        } else {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The version from `haproxy -v`: `HAProxy version 2.6.12-1+deb12u4 2026/10/17 - ...`.
pub(super) fn parse_version(out: &str) -> Option<String> {
    let first = out.lines().find(|l| l.contains("version"))?;
    let mut words = first.split_whitespace();
    words.find(|w| *w == "version")?;
    words.next().map(str::to_string)
}

/// Whether a plain HTTP GET on 127.0.0.1:`port` gets an HTTP response (any status:
/// with no endpoints, 503 is the right answer).
pub(super) fn http_answers(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    client::request(addr, "GET", "/", &[], b"", Duration::from_secs(2)).is_ok()
}

pub(super) fn tcp_accepts(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    )
    .is_ok()
}

/// The `[ALERT]` lines of haproxy's output, or all of it if there are none.
fn alerts(out: &str) -> String {
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("[ALERT]")).collect();
    if lines.is_empty() {
        out.trim().to_string()
    } else {
        lines.join("; ")
    }
}

/// The last lines of haproxy's log, for an error message.
pub(super) fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let alerts: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("[ALERT]"))
        .collect();
    let pick = if alerts.is_empty() { &lines } else { &alerts };
    pick[pick.len().saturating_sub(4)..].join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_files_swapped_in_are_put_back_when_the_change_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (map, hosts) = (dir.path().join("routes.map"), dir.path().join("hosts.lst"));
        std::fs::write(&map, "old\n").unwrap();
        let files = [(map.clone(), "new\n".into()), (hosts.clone(), "h\n".into())];
        let mut swapped = Vec::new();
        swap_in(&files, &mut swapped).unwrap();
        assert_eq!(std::fs::read_to_string(&map).unwrap(), "new\n");
        assert_eq!(std::fs::read_to_string(&hosts).unwrap(), "h\n");
        assert_eq!(swapped.len(), 2);
        swap_back(&swapped);
        assert_eq!(std::fs::read_to_string(&map).unwrap(), "old\n");
        assert!(!hosts.exists(), "a file the change added is taken away");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "nothing beside: {left:?}");
    }

    #[test]
    fn version_is_parsed() {
        assert_eq!(
            parse_version(
                "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\nStatus: x\n"
            ),
            Some("2.6.12-1+deb12u4".to_string())
        );
        assert_eq!(parse_version("garbage"), None);
    }
}
