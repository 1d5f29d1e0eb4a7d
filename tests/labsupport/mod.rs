//! Helpers for lab integration tests: built-in backends as real processes, a
//! driver context in a temp folder, and HTTPS requests through a proxy with curl.
#![allow(dead_code)]

use lab::{certs, ports, proc::Guard, DriverContext, Endpoint};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A running `ingressbench backend` with a unique id.
pub struct Backend {
    pub endpoint: Endpoint,
    pub guard: Guard,
}

/// Starts a backend on a free port and waits until it is ready.
pub fn backend(dir: &Path, id: &str) -> Backend {
    let ready = dir.join(format!("{id}.ready"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ingressbench"));
    cmd.args([
        "backend",
        "--listen",
        "127.0.0.1:0",
        "--id",
        id,
        "--workers",
        "1",
    ])
    .arg("--ready-file")
    .arg(&ready);
    let guard = Guard::spawn(id, &mut cmd, &dir.join(format!("{id}.log"))).expect("spawn backend");
    let t = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(&ready) {
            if let Some(line) = s.lines().next() {
                let addr = line
                    .trim()
                    .trim_start_matches("http://")
                    .parse()
                    .expect("ready file address");
                return Backend {
                    endpoint: Endpoint {
                        id: id.to_string(),
                        addr,
                    },
                    guard,
                };
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "backend {id} not ready"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A driver context in `dir` with fresh ports and an RSA-2048 certificate.
pub fn context(dir: &Path) -> DriverContext {
    let work = dir.join("work");
    let out = dir.join("out");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let (cert, key) = certs::generate(dir, certs::KeyType::Rsa2048).expect("certificate");
    let p = ports::free_ports(2).unwrap();
    DriverContext {
        work_dir: work,
        out_dir: out,
        cert,
        key,
        https_port: p[0],
        http_port: p[1],
        upstream_keepalive: 100,
        upstream_keepalive_requests: 100_000_000,
        worker_connections: 10_000,
    }
}

/// One HTTPS response: status, lower-cased headers, body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }
}

/// GET `https://127.0.0.1:port{path}` with curl, trusting `cert`.
pub fn get(ctx: &DriverContext, path: &str) -> Resp {
    let url = format!("https://127.0.0.1:{}{path}", ctx.https_port);
    let out = Command::new("curl")
        .args(["-s", "-D", "-", "--max-time", "5", "--cacert"])
        .arg(&ctx.cert)
        .arg(&url)
        .output()
        .expect("curl (make setup installs it)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_string(),
    }
}

/// The set of backend ids seen in `n` requests.
pub fn ids_seen(ctx: &DriverContext, n: usize) -> std::collections::BTreeSet<String> {
    (0..n)
        .filter_map(|_| get(ctx, "/").header("x-backend").map(str::to_string))
        .collect()
}

/// Asserts that no process whose command line mentions `needle` is left.
pub fn assert_no_process_with(needle: &str) {
    let me = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) || name == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if cmdline.contains(needle) && !stat.contains(") Z ") {
            panic!("process left behind: {name} {cmdline}");
        }
    }
}

/// A temp dir path as text (for `assert_no_process_with`).
pub fn path_text(p: &Path) -> String {
    PathBuf::from(p).display().to_string()
}
