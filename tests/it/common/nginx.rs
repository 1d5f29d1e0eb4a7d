//! A real nginx for the tests, as in the studies: `return 200` with ~1 KB of text over
//! HTTP and HTTPS (RSA 2048), one worker, everything (pid, logs, temp dirs) inside a
//! temp prefix so it runs next to any system nginx without touching /var.
//!
//! Unlike the studies' servers it keeps a tiny access log (port, TLS protocol, requests
//! on the connection, session reuse): it is the server's own account of what the
//! generator did, which the tests compare with the generator's JSON.

use super::proc::Proc;
use super::tls::Cert;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the Debian packages `nginx-light` and `nginx` put the binary.
const NGINX: &str = "/usr/sbin/nginx";

/// The body every request gets: 1 KB of plain text, like the studies' backend.
pub fn body() -> String {
    let line = "ingressbench test body: nginx return 200 from the test's own prefix. ";
    line.repeat(1024 / line.len() + 1)[..1024].to_string()
}

/// A running nginx; stopped (SIGQUIT, then SIGTERM, then SIGKILL) when dropped.
pub struct Nginx {
    /// Plain HTTP.
    pub http: SocketAddr,
    /// HTTPS, TLS 1.2 and 1.3.
    pub https: SocketAddr,
    /// HTTPS that only speaks TLS 1.2: proves `--tls-version 1.3` is really enforced.
    pub https_tls12_only: SocketAddr,
    /// The certificate nginx serves; pass `cert.cert` with `--cacert`.
    pub cert: Cert,
    // Field order matters: nginx must stop before its prefix dir is removed.
    proc: Proc,
    dir: tempfile::TempDir,
}

/// The main context of a test's nginx.conf: one worker, `connections` per worker,
/// its pid and error log under `dir`.
pub fn head(dir: &Path, connections: u32) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections {connections}; }}"
    )
}

/// The `http` block's temporary folders, under `dir`: nginx's defaults are the
/// package's, which a test must not write to.
pub fn temp_paths(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "    client_body_temp_path {d}/client_body;\n    proxy_temp_path {d}/proxy;\n    \
         fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;"
    )
}

/// Starts nginx on `conf` (a whole configuration, its pid, logs and temp paths
/// under `dir`) and waits until it accepts on every one of `ports`; stopped
/// (SIGQUIT first) when the returned process is dropped. For a test that needs
/// server blocks of its own; [`Nginx::start`] is the common one.
pub fn spawn(dir: &Path, conf: &str, ports: &[SocketAddr]) -> Proc {
    assert!(
        Path::new(NGINX).exists(),
        "{NGINX} not found: these tests need a real nginx; `make test` installs it \
         (scripts/setup.sh: apt-get install nginx-light)"
    );
    set_mode(dir, 0o755);
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let mut cmd = Command::new(NGINX);
    cmd.arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf_path)
        // Before the config is read nginx logs to its compiled-in path; keep it here.
        .arg("-e")
        .arg(dir.join("error.log"));
    let mut proc = Proc::spawn("nginx", &mut cmd, dir)
        .stop_with(rustix::process::Signal::QUIT, Duration::from_secs(3));
    for a in ports {
        if !super::wait_accepting(*a, Duration::from_secs(10)) {
            let st = proc.try_wait();
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            panic!("nginx does not accept on {a} (exit: {st:?}); error.log:\n{log}");
        }
    }
    proc
}

/// One access log line: which port, which TLS protocol (`None` on plain HTTP), the
/// request's number on its connection (1 = first), whether the TLS session was resumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub port: u16,
    pub tls: Option<String>,
    pub connection_requests: u64,
    pub session_reused: bool,
}

impl Nginx {
    /// Starts nginx and waits until all its ports accept connections.
    ///
    /// Panics with a clear message when nginx is not installed: the tests need a real
    /// one, and `make test` (scripts/setup.sh) installs it.
    pub fn start() -> Nginx {
        assert!(
            Path::new(NGINX).exists(),
            "{NGINX} not found: these tests need a real nginx; `make test` installs it \
             (scripts/setup.sh: apt-get install nginx-light)"
        );
        let cert = super::tls::self_signed();
        let dir = tempfile::tempdir().expect("tempdir");
        // Workers drop to `nobody` when run as root; let them traverse the prefix.
        set_mode(dir.path(), 0o755);
        // Released together just before nginx binds them.
        let [http_a, https_a, tls12_a] = <[u16; 3]>::try_from(super::free_ports(3))
            .unwrap()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)));

        let d = dir.path().display();
        let body = body();
        let head = head(dir.path(), 4096);
        let temp = temp_paths(dir.path());
        let conf = format!(
            r#"{head}
master_process on;
http {{
    default_type text/plain;
{temp}
    # The studies' tuning: connections are never closed for having served many requests.
    keepalive_requests 100000000;
    log_format conn '$server_port $ssl_protocol $connection_requests $ssl_session_reused';
    access_log {d}/access.log conn;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    server {{
        listen {http_a};
        listen {https_a} ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{ return 200 "{body}"; }}
    }}
    server {{
        listen {tls12_a} ssl;
        ssl_protocols TLSv1.2;
        location / {{ return 200 "{body}"; }}
    }}
}}
"#,
            cert = cert.cert.display(),
            key = cert.key.display(),
        );
        let proc = spawn(dir.path(), &conf, &[http_a, https_a, tls12_a]);
        let mut n = Nginx {
            http: http_a,
            https: https_a,
            https_tls12_only: tls12_a,
            cert,
            proc,
            dir,
        };
        // The readiness probes above are in the log; tests count from a clean slate.
        n.clear_log();
        n
    }

    pub fn http_url(&self) -> String {
        format!("http://{}/", self.http)
    }

    pub fn https_url(&self) -> String {
        format!("https://{}/", self.https)
    }

    pub fn cacert(&self) -> &Path {
        &self.cert.cert
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("access.log")
    }

    /// Empties the access log (nginx keeps appending to the same open file).
    pub fn clear_log(&mut self) {
        std::fs::write(self.log_path(), b"").unwrap();
    }

    /// The access log lines for `port`; probes that sent no request are not logged.
    pub fn access(&self, port: u16) -> Vec<Access> {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let [p, proto, n, reused] = f[..] else {
                    panic!("unexpected access log line {l:?}");
                };
                let port: u16 = p.parse().unwrap();
                Access {
                    port,
                    tls: (proto != "-").then(|| proto.to_string()),
                    connection_requests: n.parse().unwrap(),
                    session_reused: reused == "r",
                }
            })
            .filter(|a| a.port == port)
            .collect()
    }

    /// nginx's error log, for failure messages.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Whether nginx is still running.
    pub fn alive(&mut self) -> bool {
        self.proc.alive()
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}
