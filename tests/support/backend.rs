//! Starts the built-in backend (`ingressbench backend`) on 127.0.0.1:0 and learns its
//! address from `--ready-file`, so tests never guess a port.

use super::{KillOnDrop, BIN};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A running backend; killed when dropped.
pub struct Backend {
    pub addr: SocketAddr,
    pub id: String,
    // Field order matters: the process goes before its log dir.
    guard: KillOnDrop,
    dir: tempfile::TempDir,
}

impl Backend {
    /// `ingressbench backend --listen 127.0.0.1:0 --id ID --ready-file F EXTRA...`, once
    /// it is listening.
    pub fn start(id: &str, extra: &[&str]) -> Backend {
        let dir = tempfile::tempdir().expect("tempdir");
        let ready = dir.path().join("ready");
        let out = std::fs::File::create(dir.path().join("stdout")).unwrap();
        let err = std::fs::File::create(dir.path().join("stderr")).unwrap();
        let child = Command::new(BIN)
            .args([
                "backend",
                "--listen",
                "127.0.0.1:0",
                "--id",
                id,
                "--ready-file",
            ])
            .arg(&ready)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {BIN} backend: {e}"));
        let mut guard = KillOnDrop::new(child, format!("backend {id}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        let addr = loop {
            if let Some(a) = std::fs::read_to_string(&ready)
                .ok()
                .as_deref()
                .and_then(first_addr)
            {
                break a;
            }
            let stdout = std::fs::read_to_string(dir.path().join("stdout")).unwrap_or_default();
            if let Some(a) = stdout.lines().find_map(listening_line) {
                break a;
            }
            if let Some(st) = guard.try_wait() {
                let stderr = std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
                panic!("backend {id} {extra:?} exited ({st}) before it was ready: {stderr}");
            }
            assert!(
                Instant::now() < deadline,
                "backend {id} not ready after 10 s (no address in {})",
                ready.display()
            );
            thread::sleep(Duration::from_millis(10));
        };
        Backend {
            addr,
            id: id.to_string(),
            guard,
            dir,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The backend's stderr so far, for failure messages.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// Whether the backend is still running.
    pub fn alive(&mut self) -> bool {
        self.guard.try_wait().is_none()
    }
}

/// The first address of a ready file; only complete lines count, since the file may
/// be read while it is being written.
fn first_addr(text: &str) -> Option<SocketAddr> {
    let line = text.split_inclusive('\n').next()?;
    if !line.ends_with('\n') {
        return None;
    }
    let a = line.trim();
    let a = a
        .strip_prefix("http://")
        .or_else(|| a.strip_prefix("https://"))
        .unwrap_or(a);
    a.trim_end_matches('/').parse().ok()
}

/// The address in `listening on http://127.0.0.1:PORT id=NAME`.
fn listening_line(line: &str) -> Option<SocketAddr> {
    let rest = line.trim().strip_prefix("listening on ")?;
    let url = rest.split_whitespace().next()?;
    let a = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    a.trim_end_matches('/').parse().ok()
}
