//! The haproxy process: a master-worker (`-W`) master that stays our direct child,
//! configurations checked with `haproxy -c` before they are installed, seamless
//! reloads asked of the master and judged by its `show proc` (a new worker, or one more
//! failed reload), readiness waits on both ports, and what its output and log say
//! when something goes wrong; the version a run records.

use super::runtime::{cli, send, ProcTable};
use super::{Haproxy, PendingReload, SLOTS};
use crate::driver::{Driver, LabError};
use crate::proc::{self, Guard};
use http1::client;
use rustix::process::Signal;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

impl Haproxy {
    /// Writes `text` as the new haproxy.cfg if `haproxy -c` accepts it.
    pub(super) fn write_checked(&self, text: &str) -> Result<(), LabError> {
        let run = self.run()?;
        let cfg = run.cfg();
        let candidate = cfg.with_extension("cfg.new");
        std::fs::write(&candidate, text)
            .map_err(LabError::io(format!("writing {}", candidate.display())))?;
        let (ok, out) = proc::output(
            Command::new(&run.binary)
                .arg("-c")
                .arg("-f")
                .arg(&candidate),
        )
        .map_err(LabError::io(format!("running {} -c", run.binary.display())))?;
        if !ok {
            let _ = std::fs::remove_file(&candidate);
            return Err(LabError::Rejected {
                what: format!("{} configuration", self.name()),
                detail: alerts(&out),
            });
        }
        std::fs::rename(&candidate, &cfg)
            .map_err(LabError::io(format!("writing {}", cfg.display())))
    }

    /// Asks the master to reload and notes what it looked like before.
    pub(super) fn request_reload(&mut self) -> Result<(), LabError> {
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
            return Err(LabError::Other(format!(
                "{}: master socket {} does not answer",
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
    pub(super) fn wait_reload(&mut self, deadline: Instant) -> Result<u32, LabError> {
        let master = self.run()?.master_sock();
        loop {
            if !self.running()? {
                return Err(LabError::NotRunning(self.name().to_string()));
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
                        return Err(LabError::Rejected {
                            what: format!("{} reload", self.name()),
                            detail: log_tail(&self.run()?.log()),
                        });
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(LabError::NotReady(format!("{} reload", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Starts the master on the installed haproxy.cfg, with no slots applied yet.
    pub(super) fn spawn(&mut self) -> Result<(), LabError> {
        let run = self.run()?;
        let master = run.master_sock();
        // A state file from an earlier process would be loaded at start-up; the slots
        // are pushed from the driver's own map instead.
        let _ = std::fs::remove_file(run.state_file());
        let mut cmd = Command::new(&run.binary);
        // -W without -D: the master stays our direct child (seen exiting at once).
        cmd.arg("-W")
            .arg("-S")
            .arg(format!("{},mode,600", master.display()))
            .arg("-f")
            .arg(run.cfg());
        let guard = Guard::spawn_on("haproxy", &mut cmd, &run.log(), &run.ctx.cpus)
            .map_err(LabError::io(format!("starting {}", run.binary.display())))?;
        self.guard = Some(guard);
        self.pending = None;
        self.worker = None;
        self.applied = vec![None; SLOTS];
        Ok(())
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
