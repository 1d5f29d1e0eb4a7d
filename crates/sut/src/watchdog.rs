//! A watchdog that outlives a killed ingressbench just long enough to clean up.
//!
//! Guards stop every child when ingressbench ends normally, on an error or on
//! Ctrl-C. A SIGKILL (a CI `timeout -s KILL`, the OOM killer) runs no code at all, so
//! proxies and backends would be reparented to init and keep listening, and the
//! run's scratch folder (with a private key) would stay. The watchdog is a second,
//! tiny process (`ingressbench __watchdog`) holding the read end of a pipe from its
//! parent; the parent writes each process group and scratch folder it creates, and
//! their removal. When the pipe reaches end of file, the parent is gone however it
//! ended: the watchdog kills what is still registered, removes the folders and exits.
//! No `unsafe` is needed: the kernel closes the pipe for us.

use rustix::process::{kill_process_group, Pid, Signal};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The pipe to this process's watchdog, once started.
static PIPE: Mutex<Option<ChildStdin>> = Mutex::new(None);

/// Starts this process's watchdog: `exe __watchdog --parent <pid>`, in a process group
/// of its own (so a Ctrl-C meant for ingressbench does not reach it). Idempotent.
///
/// # Errors
/// The I/O error when it cannot start.
pub fn start(exe: &Path) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if pipe.is_some() {
        return Ok(());
    }
    let mut child = Command::new(exe)
        .args(["__watchdog", "--parent", &std::process::id().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    *pipe = child.stdin.take();
    // The watchdog is reaped by init once it exits after us; nothing waits for it.
    std::mem::forget(child);
    Ok(())
}

fn send(line: String) {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pipe.as_mut() {
        if p.write_all(line.as_bytes())
            .and_then(|_| p.flush())
            .is_err()
        {
            *pipe = None;
        }
    }
}

/// Registers a process group to kill if this process dies.
pub fn watch_group(pgid: u32) {
    send(format!("+g {pgid}\n"));
}

/// Unregisters a process group (it was stopped and reaped).
pub fn unwatch_group(pgid: u32) {
    send(format!("-g {pgid}\n"));
}

/// Registers a folder or a file to remove if this process dies.
pub fn watch_path(path: &Path) {
    send(format!("+p {}\n", path.display()));
}

/// Unregisters a folder or file (it was removed).
pub fn unwatch_path(path: &Path) {
    send(format!("-p {}\n", path.display()));
}

/// What a watchdog holds: the groups and folders still registered.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Registry {
    pub groups: Vec<u32>,
    pub paths: Vec<PathBuf>,
}

impl Registry {
    /// Applies one line of the protocol; unknown lines are ignored.
    pub fn apply(&mut self, line: &str) {
        let Some((op, arg)) = line.split_once(' ') else {
            return;
        };
        match op {
            "+g" => {
                if let Ok(g) = arg.trim().parse() {
                    self.groups.push(g);
                }
            }
            "-g" => {
                if let Ok(g) = arg.trim().parse::<u32>() {
                    self.groups.retain(|x| *x != g);
                }
            }
            "+p" => self.paths.push(PathBuf::from(arg.trim_end_matches('\n'))),
            "-p" => {
                let p = PathBuf::from(arg.trim_end_matches('\n'));
                self.paths.retain(|x| *x != p);
            }
            _ => {}
        }
    }

    /// Kills every registered group (SIGTERM, then SIGKILL after `grace`) and removes
    /// every registered folder.
    pub fn clean(&self, grace: Duration) {
        let pids: Vec<Pid> = self
            .groups
            .iter()
            .filter_map(|g| Pid::from_raw(*g as i32))
            .collect();
        for p in &pids {
            let _ = kill_process_group(*p, Signal::TERM);
        }
        let t = Instant::now();
        while t.elapsed() < grace
            && pids
                .iter()
                .any(|p| rustix::process::test_kill_process_group(*p).is_ok())
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        for p in &pids {
            let _ = kill_process_group(*p, Signal::KILL);
        }
        for path in &self.paths {
            // A folder (a run's scratch space) or a file (Envoy's shared memory).
            let _ = match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
                _ => std::fs::remove_file(path),
            };
        }
    }
}

/// The watchdog's life: read registrations until the parent is gone, then clean, then
/// run `after` (the lab sweeps the cgroups of its CPU quotas, empty by then).
pub fn serve(input: impl BufRead, after: impl FnOnce()) {
    let mut reg = Registry::default();
    for line in input.lines() {
        match line {
            Ok(l) => reg.apply(&l),
            Err(_) => break,
        }
    }
    reg.clean(Duration::from_secs(2));
    after();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_come_and_go() {
        let mut r = Registry::default();
        for l in ["+g 12", "+g 13", "+p /tmp/x y", "-g 12", "bogus", "+g nope"] {
            r.apply(l);
        }
        assert_eq!(r.groups, [13]);
        assert_eq!(r.paths, [PathBuf::from("/tmp/x y")]);
        r.apply("-p /tmp/x y");
        assert!(r.paths.is_empty());
    }

    #[test]
    fn end_of_input_kills_the_groups_and_removes_the_folders() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let scratch = dir.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        let file = dir.path().join("shared-memory");
        std::fs::write(&file, b"x").unwrap();
        let mut child = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let input = format!(
            "+g {}\n+p {}\n+p {}\n",
            child.id(),
            scratch.display(),
            file.display()
        );
        let mut after_ran_clean = None;
        serve(std::io::Cursor::new(input), || {
            after_ran_clean = Some(!scratch.exists());
        });
        assert_eq!(
            after_ran_clean,
            Some(true),
            "`after` runs once, after the cleaning"
        );
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if t.elapsed() > Duration::from_secs(5) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let _ = child.kill();
        assert!(status.is_some(), "the registered group survived");
        assert!(!scratch.exists(), "the registered folder survived");
        assert!(!file.exists(), "the registered file survived");
    }
}
