//! Starts the built-in backend (`ingressbench backend`) on 127.0.0.1:0 and learns its
//! addresses from `--ready-file`, so tests never guess a port.

use super::proc::Proc;
use super::BIN;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

/// A running backend; killed when dropped.
pub struct Backend {
    /// The first listener's address.
    pub addr: SocketAddr,
    /// Every listener's address, in the order of the `--listen` flags.
    pub addrs: Vec<SocketAddr>,
    // Field order matters: the process goes before its log dir.
    pub proc: Proc,
    _dir: tempfile::TempDir,
}

impl Backend {
    /// `ingressbench backend --listen 127.0.0.1:0 --id ID EXTRA...`, once it is
    /// listening.
    pub fn start(id: &str, extra: &[&str]) -> Backend {
        Backend::start_args(&[&["--id", id], extra].concat())
    }

    /// `ingressbench backend ARGS`, with `--listen 127.0.0.1:0` unless ARGS has a
    /// `--listen` of its own, once it is listening.
    pub fn start_args(args: &[&str]) -> Backend {
        let dir = tempfile::tempdir().expect("tempdir");
        let ready = dir.path().join("ready");
        let mut cmd = Command::new(BIN);
        cmd.arg("backend");
        if !args.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(args).arg("--ready-file").arg(&ready);
        let mut proc = Proc::spawn("backend", &mut cmd, dir.path());
        let deadline = Instant::now() + Duration::from_secs(10);
        let addrs = loop {
            if let Some(a) = read_ready_file(&ready) {
                break a;
            }
            if let Some(st) = proc.try_wait() {
                panic!(
                    "backend {args:?} exited ({st}) before it was ready: {}",
                    proc.stderr_so_far()
                );
            }
            assert!(
                Instant::now() < deadline,
                "backend {args:?} not ready after 10 s (no address in {}): {}",
                ready.display(),
                proc.stderr_so_far()
            );
            thread::sleep(Duration::from_millis(10));
        };
        Backend {
            addr: addrs[0],
            addrs,
            proc,
            _dir: dir,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The first line the backend printed on stdout, with its newline (printed and
    /// flushed before the ready file is written).
    pub fn announced(&self) -> String {
        let out = self.proc.stdout_so_far();
        out.split_inclusive('\n').next().unwrap_or("").to_string()
    }

    /// The backend's stderr so far, for failure messages.
    pub fn stderr(&self) -> String {
        self.proc.stderr_so_far()
    }
}

/// The addresses of a ready file, one per line. The backend writes it whole (a
/// temporary file, then a rename), so a file that exists is complete.
fn read_ready_file(path: &Path) -> Option<Vec<SocketAddr>> {
    let text = std::fs::read_to_string(path).ok()?;
    let addrs: Vec<SocketAddr> = text
        .lines()
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|e| panic!("ready file {}: {l:?}: {e}", path.display()))
        })
        .collect();
    (!addrs.is_empty()).then_some(addrs)
}
