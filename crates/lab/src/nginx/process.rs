//! The nginx process: a foreground master in its own process group, started with the
//! run's prefix, configurations checked with `nginx -t`, reloads sent as `SIGHUP` and
//! judged by the master's children in `/proc` (every old worker gone, a new one
//! running) and by the `[emerg]`/`[alert]` lines of its log; the readiness probe and
//! the versions a run records.

use super::lua::http;
use super::{Mode, Nginx, PendingReload};
use crate::driver::{Driver, SutError};
use crate::proc::{self, Guard};
use rustix::process::Signal;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

impl Nginx {
    /// Checks a configuration file with `nginx -t`.
    ///
    /// # Errors
    /// [`SutError::Rejected`] with nginx's message line.
    pub(super) fn test_config(&self, path: &Path) -> Result<(), SutError> {
        let s = self.settings()?;
        let (ok, text) = proc::output(
            Command::new(&self.binary)
                .arg("-t")
                .arg("-q")
                .arg("-p")
                .arg(prefix_arg(&s.prefix))
                .arg("-c")
                .arg(path),
        )
        .map_err(SutError::io(format!(
            "running {} -t",
            self.binary.display()
        )))?;
        if ok {
            return Ok(());
        }
        let detail = problem_line(&text).unwrap_or_else(|| text.trim().to_string());
        Err(SutError::Rejected {
            what: format!("nginx configuration {}", path.display()),
            detail,
        })
    }

    /// Sends `SIGHUP` to a running master and records what `settle()` must see.
    pub(super) fn hup(&mut self) {
        let Some(master) = self.master_pid() else {
            return;
        };
        if !self.running() {
            return;
        }
        let old_workers = match self.pending_reload.take() {
            // A reload not yet confirmed: its old workers must go as well.
            Some(mut p) => {
                for w in children(master) {
                    if !p.old_workers.contains(&w) {
                        p.old_workers.push(w);
                    }
                }
                p.old_workers
            }
            None => children(master),
        };
        let log_offset = file_len(&self.log_path());
        if let Some(g) = &self.guard {
            g.signal_main(Signal::HUP);
        }
        self.pending_reload = Some(PendingReload {
            old_workers,
            log_offset,
        });
    }

    /// Waits until every old worker is gone and a new one runs.
    pub(super) fn wait_workers(
        &mut self,
        p: &PendingReload,
        deadline: Instant,
    ) -> Result<(), SutError> {
        let Some(master) = self.master_pid() else {
            return Err(SutError::NotRunning(self.name().into()));
        };
        let mut polls = 0u32;
        loop {
            if !self.running() {
                return Err(SutError::NotRunning(format!(
                    "{} (master exited during a reload{})",
                    self.name(),
                    self.log_problem(p.log_offset)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                )));
            }
            let now = children(master);
            let old_left = now.iter().any(|w| p.old_workers.contains(w));
            let new = now.iter().any(|w| !p.old_workers.contains(w));
            if new && !old_left {
                return Ok(());
            }
            polls += 1;
            // A HUP with a configuration the master cannot apply keeps the old
            // workers; the reason is only in the log.
            if polls.is_multiple_of(25) && !new {
                if let Some(line) = self.log_problem(p.log_offset) {
                    return Err(SutError::Rejected {
                        what: format!("{} reload", self.name()),
                        detail: line,
                    });
                }
            }
            if Instant::now() >= deadline {
                let why = self.log_problem(p.log_offset).unwrap_or_else(|| {
                    format!(
                        "old workers {:?} still running, children now {now:?}",
                        p.old_workers
                    )
                });
                return Err(SutError::NotReady(format!(
                    "{} reload ({why})",
                    self.name()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The last `[emerg]` or `[alert]` line nginx logged after `offset`.
    pub(super) fn log_problem(&self, offset: u64) -> Option<String> {
        let mut f = std::fs::File::open(self.log_path()).ok()?;
        f.seek(SeekFrom::Start(offset)).ok()?;
        let mut text = String::new();
        f.take(1 << 20).read_to_string(&mut text).ok()?;
        problem_line(&text)
    }

    /// One GET of `/` through the plain HTTP port: its status.
    pub(super) fn probe(&self) -> Option<u16> {
        let s = self.settings.as_ref()?;
        TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], s.https_port)),
            Duration::from_millis(200),
        )
        .ok()?;
        http(
            SocketAddr::from(([127, 0, 0, 1], s.http_port)),
            "GET",
            "/",
            "",
        )
        .ok()
        .map(|(status, _)| status)
    }

    pub(super) fn spawn(&mut self) -> Result<(), SutError> {
        let s = self.settings()?.clone();
        let log = self.log_path();
        self.start_log_offset = file_len(&log);
        let mut cmd = Command::new(&self.binary);
        cmd.arg("-p")
            .arg(prefix_arg(&s.prefix))
            .arg("-c")
            .arg(self.conf_path());
        let guard = Guard::spawn_on(self.name(), &mut cmd, &log, &s.cpus)
            .map_err(SutError::io(format!("starting {}", self.binary.display())))?;
        self.guard = Some(guard);
        self.pending_reload = None;
        self.pushed = false;
        Ok(())
    }
}

/// Versions of what runs: nginx, and in Lua mode the Debian packages of the Lua module.
pub(super) fn versions(mode: Mode) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let Some(nginx) = proc::which("nginx") else {
        return v;
    };
    // `nginx -v` prints `nginx version: nginx/1.22.1` on stderr.
    if let Ok((_, text)) = proc::output(Command::new(nginx).arg("-v")) {
        if let Some(ver) = text
            .split("nginx/")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
        {
            v.push(("nginx".to_string(), ver.to_string()));
        }
    }
    if mode == Mode::Lua {
        for package in ["libnginx-mod-http-lua", "lua-resty-core"] {
            let out =
                proc::output(Command::new("dpkg-query").args(["-W", "-f=${Version}", package]));
            if let Ok((true, ver)) = out {
                v.push((package.to_string(), ver.trim().to_string()));
            }
        }
    }
    v
}

/// The `-p` argument: nginx wants the prefix to end with a slash.
fn prefix_arg(prefix: &Path) -> String {
    let mut s = prefix.display().to_string();
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

/// The last `[emerg]`/`[alert]` line of nginx output, without its timestamp and pids.
fn problem_line(text: &str) -> Option<String> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("[emerg]") || l.contains("[alert]"))?;
    // "2026/11/22 03:49:13 [emerg] 14322#14322: invalid port ..." -> "invalid port ..."
    let msg = line.split_once("] ").map_or(line, |(_, rest)| rest);
    let msg = match msg.split_once(": ") {
        Some((pids, m))
            if pids
                .split('#')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            m
        }
        _ => msg,
    };
    Some(msg.trim().to_string())
}

/// Live (non-zombie) children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let listed = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    let pids: Vec<u32> = match listed {
        Ok(s) => s
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        // Kernels without CONFIG_PROC_CHILDREN: look for the parent pid in every stat.
        Err(_) => std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .filter(|p| stat_fields(*p).is_some_and(|(_, ppid)| ppid == pid))
            .collect(),
    };
    pids.into_iter()
        .filter(|p| stat_fields(*p).is_some_and(|(state, _)| state != 'Z' && state != 'X'))
        .collect()
}

/// (state, parent pid) from `/proc/<pid>/stat`.
fn stat_fields(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_line_keeps_only_the_message() {
        let out = "2026/11/22 03:49:13 [emerg] 14322#14322: invalid port in upstream \"127.0.0.1:0\" in /x/nginx.conf:4\nnginx: configuration file /x/nginx.conf test failed\n";
        assert_eq!(
            problem_line(out).unwrap(),
            "invalid port in upstream \"127.0.0.1:0\" in /x/nginx.conf:4"
        );
        assert_eq!(problem_line("all good\n"), None);
        let bind = "2026/11/22 03:49:13 [emerg] 1#1: bind() to 127.0.0.1:80 failed (98: Address already in use)";
        assert_eq!(
            problem_line(bind).unwrap(),
            "bind() to 127.0.0.1:80 failed (98: Address already in use)"
        );
        let plain = "nginx: [emerg] unknown directive \"x\" in /c:3";
        assert_eq!(
            problem_line(plain).unwrap(),
            "unknown directive \"x\" in /c:3"
        );
    }

    #[test]
    fn prefix_ends_with_a_slash() {
        assert_eq!(prefix_arg(Path::new("/a/b")), "/a/b/");
        assert_eq!(prefix_arg(Path::new("/a/b/")), "/a/b/");
    }
}
