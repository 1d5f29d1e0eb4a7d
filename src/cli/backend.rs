//! `ingressbench backend`: flags of the built-in backend, resolved into a
//! [`backend::Config`], then the runtime, signal handlers, start-up announcements
//! (stdout lines, ready file) and the drain report.
//!
//! Signal handlers are installed before anything is announced: a parent that sees
//! the ready file may send SIGTERM at once, and that must start a drain, not kill
//! the process with the default action.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio::signal::unix::{signal, SignalKind};

use super::usage;
use ::backend::{self, response, Config, Delay, DrainEnd, Flap, FlapMode, Server, Stall};

/// Largest `--body-size`; the padding is held in memory once and per connection.
const MAX_BODY: usize = 64 << 20;

/// Flags of `ingressbench backend`.
#[derive(Args, Debug, Clone)]
pub struct BackendArgs {
    /// Address to listen on (repeatable); port 0 picks a free port, printed at start.
    #[arg(
        long = "listen",
        value_name = "ADDR:PORT",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: Vec<String>,
    /// Name sent in the x-backend header and the body [default: <hostname>-<port>].
    #[arg(long, value_name = "NAME")]
    pub id: Option<String>,
    /// Exact size of every answer's body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub body_size: usize,
    /// Delay before each answer: a duration (5ms), uniform:1ms-5ms, or exp:2ms (mean).
    #[arg(long, value_name = "DELAY", default_value = "0")]
    pub delay: String,
    /// Hold all answers for the first STALL of every WINDOW since start (e.g. 1s/5s).
    #[arg(long, value_name = "STALL/WINDOW")]
    pub stall: Option<String>,
    /// Flap: healthy for HEALTHY, then failing for FAILING, repeatedly since start (e.g. 8s/4s).
    #[arg(long, value_name = "HEALTHY/FAILING")]
    pub flap: Option<String>,
    /// How a flapping backend fails: reset (connections), 503, or stall (no answer).
    #[arg(long, value_name = "MODE")]
    pub flap_mode: Option<String>,
    /// With --flap: write what was received per phase here (JSON, atomically, every second and at exit).
    #[arg(long, value_name = "FILE")]
    pub flap_log: Option<PathBuf>,
    /// Status of every answer except /healthz (e.g. 503 for error tests).
    #[arg(long, value_name = "CODE", default_value_t = 200)]
    pub status: u16,
    /// PEM certificate chain: serve HTTPS (TLS 1.2 and 1.3, ALPN h2 and http/1.1).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// After SIGTERM/SIGINT, longest wait for requests in flight before exiting.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub drain_timeout: String,
    /// Once listening, write the bound addresses here, one per line (atomically).
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// Worker threads [default: number of cores].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// A folder shared with the other backends of a run: the attempts of each
    /// behaviour probe are counted across them, so a `503-once` fails once in all
    /// (docs/probes.md).
    #[arg(long, value_name = "DIR")]
    pub probe_dir: Option<PathBuf>,
}

/// The validated run: the server's config plus what only the binary handles.
#[derive(Debug)]
struct Plan {
    config: Config,
    workers: usize,
    ready_file: Option<PathBuf>,
    flap_log: Option<PathBuf>,
}

/// How often a flap log is rewritten while the backend runs: a reader (the runner,
/// after a backend it could not stop cleanly) then misses at most this much.
const FLAP_LOG_EVERY: Duration = Duration::from_secs(1);

/// Runs the backend until SIGTERM/SIGINT, drains, and returns 0.
///
/// # Errors
/// A usage error (exit 2) for bad flags or unusable TLS files; other errors (a
/// port in use, an unwritable ready file) exit 1.
pub fn run(args: BackendArgs) -> anyhow::Result<i32> {
    let plan = resolve(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.workers)
        .thread_name("backend")
        .enable_all()
        .build()
        .context("backend: starting the runtime")?;
    let code = runtime.block_on(serve(plan));
    // Connections cut by a drain timeout are dropped here, not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

async fn serve(plan: Plan) -> anyhow::Result<i32> {
    let mut term = signal(SignalKind::terminate()).context("backend: SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("backend: SIGINT handler")?;
    let (stop_tx, stop_rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            if stop_tx.send(()).await.is_err() {
                return;
            }
        }
    });

    let drain_timeout = plan.config.drain_timeout;
    let server = Server::bind(plan.config).await.context("backend")?;
    {
        let mut out = std::io::stdout().lock();
        for addr in server.local_addrs() {
            // A parent that closed our stdout must not stop the server.
            let _ = writeln!(
                out,
                "listening on {}://{addr} id={}",
                server.scheme(),
                server.id()
            );
        }
        let _ = out.flush();
    }
    // The flap log exists before the ready file does: a parent that sees the backend
    // ready finds the log too.
    let flap_log = match (server.flap_counter(), plan.flap_log.clone()) {
        (Some(counter), Some(path)) => {
            let write = move || {
                counter
                    .snapshot(tokio::time::Instant::now())
                    .write(&path)
                    .with_context(|| format!("backend: flap log {}", path.display()))
            };
            write()?;
            let every = write.clone();
            let task = tokio::spawn(async move {
                let mut tick = tokio::time::interval(FLAP_LOG_EVERY);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let _ = every();
                }
            });
            Some((task, write))
        }
        _ => None,
    };
    if let Some(path) = &plan.ready_file {
        backend::write_ready_file(path, server.local_addrs()).context("backend")?;
    }

    let d = server.run(stop_rx).await;
    if let Some((task, write)) = flap_log {
        task.abort();
        write()?;
    }
    for line in [&d.websocket, &d.grpc_streams].into_iter().flatten() {
        eprintln!("ingressbench backend: {line}");
    }
    match d.end {
        DrainEnd::Clean => eprintln!(
            "ingressbench backend: drained {} connections in {:.2?}",
            d.open_at_stop, d.took
        ),
        DrainEnd::Timeout => eprintln!(
            "ingressbench backend: drain timeout ({drain_timeout:?}): closing {} of {} connections",
            d.still_open, d.open_at_stop
        ),
        DrainEnd::Forced => eprintln!(
            "ingressbench backend: second signal: closing {} of {} connections",
            d.still_open, d.open_at_stop
        ),
    }
    Ok(0)
}

/// Checks every flag and builds the plan; each failure is one line naming the flag.
fn resolve(args: BackendArgs) -> anyhow::Result<Plan> {
    let listen = args
        .listen
        .iter()
        .map(|s| {
            s.parse::<SocketAddr>().map_err(|_| {
                usage(format!(
                    "--listen {s:?}: not an ADDR:PORT; use e.g. 127.0.0.1:8080, 0.0.0.0:0 or [::1]:8080"
                ))
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(id) = &args.id {
        if !backend::valid_id(id) {
            return Err(usage(format!(
                "--id {id:?}: use 1 to 128 visible ASCII characters without spaces"
            )));
        }
    }
    if args.body_size > MAX_BODY {
        return Err(usage(format!(
            "--body-size {}: at most {MAX_BODY} bytes (64 MiB)",
            args.body_size
        )));
    }
    let delay = Delay::parse(&args.delay).map_err(|e| usage(format!("--delay {e}")))?;
    let stall = args
        .stall
        .as_deref()
        .map(Stall::parse)
        .transpose()
        .map_err(usage)?;
    let flap = match (&args.flap, &args.flap_mode, &args.flap_log) {
        (Some(f), mode, _) => {
            let mode = FlapMode::parse(mode.as_deref().unwrap_or("reset")).map_err(usage)?;
            Some(Flap::parse(f, mode).map_err(usage)?)
        }
        (None, None, None) => None,
        (None, _, _) => {
            return Err(usage(
                "--flap-mode and --flap-log go with --flap HEALTHY/FAILING (e.g. --flap 8s/4s)",
            ))
        }
    };
    if !response::status_allowed(args.status) {
        return Err(usage(format!(
            "--status {}: use a code from 200 to 599 that allows a body (not 204 or 304)",
            args.status
        )));
    }
    let drain_timeout = super::duration::parse(&args.drain_timeout)
        .map_err(|e| usage(format!("--drain-timeout: {e}")))?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(backend::tls::server_config(cert, key).map_err(|e| {
            usage(format!(
                "{e} (--tls-cert and --tls-key take PEM files, e.g. from openssl req -x509 -nodes)"
            ))
        })?),
        (None, None) => None,
        _ => return Err(usage("--tls-cert and --tls-key go together; give both")),
    };
    let workers = match args.workers {
        Some(0) => return Err(usage("--workers 0: use at least 1 worker thread")),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    Ok(Plan {
        config: Config {
            listen,
            id: args.id,
            body_size: args.body_size,
            delay,
            stall,
            flap,
            status: args.status,
            tls,
            drain_timeout,
            probe_dir: args.probe_dir,
        },
        workers,
        ready_file: args.ready_file,
        flap_log: args.flap_log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: BackendArgs,
    }

    fn plan(flags: &[&str]) -> anyhow::Result<Plan> {
        let args = Cmd::try_parse_from(std::iter::once("backend").chain(flags.iter().copied()))
            .map_err(|e| anyhow::anyhow!("clap: {e}"))?
            .args;
        resolve(args)
    }

    /// The error's one line, checked to be a usage error (exit 2).
    fn usage_err(flags: &[&str]) -> String {
        let e = plan(flags).expect_err("should fail");
        assert!(
            e.downcast_ref::<super::super::UsageError>().is_some(),
            "{flags:?}: not a usage error: {e}"
        );
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        msg
    }

    #[test]
    fn defaults() {
        let p = plan(&[]).unwrap();
        assert_eq!(
            p.config.listen,
            ["127.0.0.1:8080".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(p.config.id, None);
        assert_eq!(p.config.body_size, 1024);
        assert_eq!(p.config.delay, Delay::None);
        assert_eq!(p.config.stall, None);
        assert_eq!(p.config.flap, None);
        assert!(p.flap_log.is_none());
        assert_eq!(p.config.status, 200);
        assert!(p.config.tls.is_none());
        assert_eq!(p.config.drain_timeout, Duration::from_secs(10));
        assert!(p.ready_file.is_none());
        assert!(p.workers >= 1);
    }

    #[test]
    fn every_flag() {
        let p = plan(&[
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "[::1]:9000",
            "--id",
            "web-1",
            "--body-size",
            "0",
            "--delay",
            "exp:2ms",
            "--stall",
            "1s/5s",
            "--status",
            "503",
            "--drain-timeout",
            "30s",
            "--ready-file",
            "/tmp/r",
            "--workers",
            "3",
        ])
        .unwrap();
        assert_eq!(p.config.listen.len(), 2);
        assert_eq!(p.config.id.as_deref(), Some("web-1"));
        assert_eq!(p.config.body_size, 0);
        assert_eq!(
            p.config.delay,
            Delay::Exp {
                mean: Duration::from_millis(2)
            }
        );
        assert_eq!(p.config.stall.unwrap().period, Duration::from_secs(5));
        assert_eq!(p.config.status, 503);
        assert_eq!(p.config.drain_timeout, Duration::from_secs(30));
        assert_eq!(p.ready_file, Some(PathBuf::from("/tmp/r")));
        assert_eq!(p.workers, 3);
    }

    #[test]
    fn flap_flags() {
        let p = plan(&["--flap", "8s/4s", "--flap-log", "/tmp/f.json"]).unwrap();
        let f = p.config.flap.unwrap();
        assert_eq!(
            (f.healthy, f.failing),
            (Duration::from_secs(8), Duration::from_secs(4))
        );
        assert_eq!(f.mode, FlapMode::Reset, "reset is the default mode");
        assert_eq!(p.flap_log, Some(PathBuf::from("/tmp/f.json")));
        for (flag, mode) in [("503", FlapMode::Status503), ("stall", FlapMode::Stall)] {
            let p = plan(&["--flap", "1s/1s", "--flap-mode", flag]).unwrap();
            assert_eq!(p.config.flap.unwrap().mode, mode);
        }
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        assert!(usage_err(&["--listen", "localhost"]).starts_with("--listen"));
        assert!(usage_err(&["--id", "a b"]).starts_with("--id"));
        assert!(usage_err(&["--body-size", "100000000000"]).starts_with("--body-size"));
        assert!(usage_err(&["--delay", "soon"]).starts_with("--delay"));
        assert!(usage_err(&["--stall", "5s/1s"]).starts_with("--stall"));
        assert!(usage_err(&["--status", "204"]).starts_with("--status"));
        assert!(usage_err(&["--status", "99"]).starts_with("--status"));
        assert!(usage_err(&["--drain-timeout", "x"]).starts_with("--drain-timeout"));
        assert!(usage_err(&["--workers", "0"]).starts_with("--workers"));
        assert!(usage_err(&["--flap", "8s"]).starts_with("--flap "));
        assert!(usage_err(&["--flap", "8s/50ms"]).starts_with("--flap "));
        assert!(usage_err(&["--flap", "8s/4s", "--flap-mode", "crash"]).starts_with("--flap-mode"));
        assert!(usage_err(&["--flap-mode", "503"]).starts_with("--flap-mode and --flap-log"));
        assert!(usage_err(&["--flap-log", "/tmp/f.json"]).starts_with("--flap-mode and --flap-log"));
        let tls = usage_err(&["--tls-cert", "/no/such.pem", "--tls-key", "/no/such.key"]);
        assert!(tls.starts_with("certificate /no/such.pem:"), "{tls}");
        // clap itself refuses one TLS flag without the other.
        assert!(plan(&["--tls-cert", "c.pem"]).is_err());
    }
}
