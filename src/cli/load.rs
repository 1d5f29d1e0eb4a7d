//! `ingressbench load`: wrk2's flags (same names, same meaning) plus what the studies need.

use super::request::RequestArgs;
use super::{duration, usage};
use clap::Args;
use engine::profile::RateProfile;
use engine::schedule::Model;
use engine::{self, LoadSpec, Plan};
use results::LoadConfig;
use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Flags of `ingressbench load`.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// The URL, the connections and the request's headers, timeouts and TLS.
    #[command(flatten)]
    pub request: RequestArgs,
    /// Test duration (30s, 3m, ...), not counting --warmup [default: 10s; a plan
    /// given to -R sets its own].
    #[arg(short = 'd', long)]
    pub duration: Option<String>,
    /// Requests per second over all connections (required unless --max), or a load
    /// plan on the same connections: steps `1000:30s,2000:30s`, a linear ramp
    /// `100..5000:60s`, or both.
    #[arg(short = 'R', long, value_name = "RATE|PLAN")]
    pub rate: Option<String>,
    /// Print the full latency percentile spectrum.
    #[arg(short = 'L', long)]
    pub latency: bool,
    /// HTTP method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long)]
    pub body_file: Option<std::path::PathBuf>,
    /// Closed loop: each connection sends its next request as soon as the previous
    /// answer arrives (throughput); latency is then not corrected.
    #[arg(long, conflicts_with = "rate")]
    pub max: bool,
    /// Load sent before measuring starts, not recorded.
    #[arg(long, default_value = "0s")]
    pub warmup: String,
    /// How the rate is spread: `connection` (wrk2: each connection has a fixed share)
    /// or `shared` (one queue per thread served by any idle connection).
    #[arg(long, default_value = "connection")]
    pub schedule: String,
    /// With --new-connection over TLS: allow session resumption (off: a full
    /// handshake each time).
    #[arg(long)]
    pub tls_resume: bool,
    /// Response header whose value names the backend that answered.
    #[arg(long, default_value = "x-backend")]
    pub backend_header: String,
    /// HTTP/2 over TLS, agreed by ALPN (an https:// URL); the run stops with an
    /// error if the server does not agree.
    #[arg(long, conflicts_with = "h2c")]
    pub http2: bool,
    /// HTTP/2 over plain TCP with prior knowledge (an http:// URL).
    #[arg(long)]
    pub h2c: bool,
    /// With --http2 or --h2c: at most N requests in flight per connection (its
    /// streams); a due request waits only when all of them are busy [default: 1].
    #[arg(long, value_name = "N")]
    pub streams: Option<usize>,
    /// With --http2 or --h2c: each stream's receive window (`65535`, `1MiB`): how
    /// much of a response the server sends before waiting for this side's
    /// WINDOW_UPDATE [default: 1MiB; the connection's is 16 times it].
    #[arg(long, value_name = "BYTES")]
    pub h2_window: Option<String>,
    /// gRPC unary calls of SERVICE/METHOD (`grpc.health.v1.Health/Check`) in place
    /// of --method and the URL's path, over --http2 or --h2c; a grpc-status other
    /// than OK is an error of kind `grpc`.
    #[arg(long, value_name = "SERVICE/METHOD")]
    pub grpc: Option<String>,
    /// The call's request message: a file of serialized protobuf bytes.
    #[arg(
        long,
        value_name = "FILE",
        requires = "grpc",
        conflicts_with = "grpc_payload"
    )]
    pub grpc_message: Option<std::path::PathBuf>,
    /// The call's request message: one bytes field of this size (`100B`, `4KiB`),
    /// which the built-in backend's Echo method takes.
    #[arg(long, value_name = "SIZE", requires = "grpc")]
    pub grpc_payload: Option<String>,
    /// WebSocket sessions in place of requests: -c sessions opened on the URL (ws://
    /// or wss://) and held for the run, -R messages per second over all of them (0:
    /// only held), each echo timed from its intended send; every session that ends
    /// before the run does is counted by how it ended (docs/load.md, "WebSocket
    /// sessions").
    #[arg(long, conflicts_with_all = ["max", "http2", "h2c", "grpc", "grpc_stream", "targets", "hdr_log", "report", "metrics_listen", "sample", "body", "body_file"])]
    pub websocket: bool,
    /// gRPC streams in place of requests: -c bidirectional calls of SERVICE/METHOD
    /// (default: the backend's ingressbench.Backend/EchoStream), each on an HTTP/2
    /// connection of its own (h2c on http://, ALPN h2 on https://), held for the
    /// run, -R messages per second over all of them, each reply timed from its
    /// intended send; a stream's end is counted by its grpc-status, a reset or a cut
    /// (docs/load.md, "gRPC streams").
    #[arg(long, value_name = "SERVICE/METHOD", num_args = 0..=1, default_missing_value = engine::sessions::ECHO_STREAM, conflicts_with_all = ["max", "http2", "h2c", "grpc", "targets", "hdr_log", "report", "metrics_listen", "sample", "body", "body_file"])]
    pub grpc_stream: Option<String>,
    /// With --websocket or --grpc-stream: each message's payload (`32B`, `4KiB`; at
    /// least 8 bytes, its sequence number) [default: 32B].
    #[arg(long, value_name = "SIZE")]
    pub message_size: Option<String>,
    /// With --websocket or --grpc-stream: when a session that ended opens again:
    /// `at-once` (the reopen counted and timed), `after DURATION` or `never`
    /// [default: at-once].
    #[arg(long, value_name = "WHEN")]
    pub reopen: Option<String>,
    /// Write the result as JSON (schema ingressbench/result/v1) to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Write an HdrHistogram interval log (one interval per second) to this file.
    #[arg(long)]
    pub hdr_log: Option<std::path::PathBuf>,
    /// Keep this fraction of requests individually (send time, latency, status or
    /// error, backend) in the result, for scatter charts: 0.1 keeps one in ten.
    #[arg(long, default_value_t = 0.0)]
    pub sample: f64,
    /// Write a report page (charts and tables) of this run to this file; report.md,
    /// the CSVs and the .hgrm go beside it.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    /// Never draw the live progress line, even on a terminal.
    #[arg(long)]
    pub quiet: bool,
    /// A request mix instead of the one request: a file in Vegeta's http targets
    /// format (METHOD URL, headers, @body), a target per block, with an optional
    /// weight=N after the URL. Every connection still goes to the URL's address;
    /// each target names its host and path (docs/load.md, "A request mix").
    #[arg(long, value_name = "FILE")]
    pub targets: Option<std::path::PathBuf>,
    /// Run the same load N times, one after the other, and keep every repetition in
    /// the result (`compare` then ranks them: docs/compare.md).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: usize,
    /// Serve live metrics (Prometheus or OpenMetrics text) at
    /// http://ADDR:PORT/metrics while the load runs; 127.0.0.1:9464 keeps them on
    /// this machine.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
    /// Split the load over this many generator processes (each pinned to a CPU of
    /// its own when there are enough), merged into one result.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub generators: usize,
    /// Where the generators run: `local` (processes of this binary) or `kubernetes`
    /// (an indexed Job, its pods running this program's image).
    #[arg(long, default_value = "local")]
    pub platform: String,
    /// With --platform kubernetes: the kubeconfig file (default: KUBECONFIG, then
    /// ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// With --platform kubernetes: the kubeconfig context (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// With --platform kubernetes: run the Job in this existing namespace (default: a
    /// namespace of the run's own, deleted at the end).
    #[arg(long)]
    pub namespace: Option<String>,
    /// With --platform kubernetes: the generators' image (default: `ingressbench`).
    #[arg(long)]
    pub image: Option<String>,
    /// With --platform kubernetes: only on nodes with this label, KEY=VALUE
    /// (repeatable).
    #[arg(long = "node-selector", value_name = "KEY=VALUE")]
    pub node_selector: Vec<String>,
    /// With --platform kubernetes: at most one generator per node.
    #[arg(long)]
    pub spread: bool,
    /// With --platform kubernetes: the generators use their node's network.
    #[arg(long)]
    pub host_network: bool,
    /// Time from the start of the command to the generators' shared start instant
    /// (default: 1 s plus --connect-timeout locally, 30 s on Kubernetes, where the
    /// pods must be scheduled and their image pulled first).
    #[arg(long, value_name = "DURATION")]
    pub lead: Option<String>,
}

/// Which of the three ways the load runs: the coordinator of generator processes,
/// of generator pods, or a single generator ([`run`]).
pub enum Mode {
    Coordinator,
    /// The generators are the pods of an indexed Job (`--platform kubernetes`).
    Kubernetes,
    Single,
}

/// Which way `args` asks the load to run.
///
/// # Errors
/// A usage error for flags that do not go together.
pub fn mode(args: &LoadArgs) -> anyhow::Result<Mode> {
    let kubernetes = match args.platform.as_str() {
        "local" => false,
        "kubernetes" => true,
        other => {
            return Err(usage(format!(
                "--platform {other}: use local or kubernetes"
            )))
        }
    };
    if !kubernetes {
        let given = [
            (args.kubeconfig.is_some(), "--kubeconfig"),
            (args.context.is_some(), "--context"),
            (args.namespace.is_some(), "--namespace"),
            (args.image.is_some(), "--image"),
            (!args.node_selector.is_empty(), "--node-selector"),
            (args.spread, "--spread"),
            (args.host_network, "--host-network"),
        ];
        if let Some((_, flag)) = given.iter().find(|(g, _)| *g) {
            return Err(usage(format!("{flag} needs --platform kubernetes")));
        }
    }
    if kubernetes && args.generators == 0 {
        return Err(usage("--generators 0: give at least 1"));
    }
    if args.repeat == 0 {
        return Err(usage("--repeat 0: give at least 1 (the number of runs)"));
    }
    if args.targets.is_some() && kubernetes {
        return Err(usage(
            "--targets with --platform kubernetes: the targets file is on this machine, which the generator pods cannot read; run the mix here (--generators N splits it over local processes)",
        ));
    }
    if args.repeat > 1 && (kubernetes || args.generators != 1) {
        return Err(usage(format!(
            "--repeat {} with --generators: repetitions run on one generator for now; drop one of them",
            args.repeat
        )));
    }
    let sessions = args.sessions_flag();
    if let Some(flag) = sessions {
        if kubernetes || args.generators != 1 || args.repeat != 1 {
            return Err(usage(format!(
                "{flag} runs on one generator, once: drop --generators, --platform kubernetes and --repeat"
            )));
        }
    } else if args.message_size.is_some() || args.reopen.is_some() {
        let flag = if args.message_size.is_some() {
            "--message-size"
        } else {
            "--reopen"
        };
        return Err(usage(format!(
            "{flag} is for sessions: add --websocket or --grpc-stream"
        )));
    }
    if args.metrics_listen.is_some() && (kubernetes || args.generators != 1) {
        return Err(usage(
            "--metrics-listen needs a single generator: the generators' seconds reach this process only at the end",
        ));
    }
    Ok(if kubernetes {
        Mode::Kubernetes
    } else if args.generators != 1 {
        Mode::Coordinator
    } else {
        Mode::Single
    })
}

/// Runs a load with one generator and prints the summary.
pub fn run(args: LoadArgs) -> anyhow::Result<i32> {
    if args.sessions_flag().is_some() {
        return websocket(&args);
    }
    let (plan, config, target) = resolve(&args)?;
    check_outputs(&args)?;
    // Bound before the load: a port in use is bad input, not a failed run. Closed
    // when this function returns, however the run ends.
    let metrics = super::metrics::start(args.metrics_listen.as_deref(), || {
        live::Live::load(&target, plan.rate)
    })?;
    let stop = stop_on_signals()?;
    let live = !args.quiet && std::io::stderr().is_terminal();
    let total_s = plan.duration.as_secs();
    let mut reps = Vec::new();
    // Each second's histogram of every repetition, end to end, for --hdr-log.
    let mut seconds: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut started_at_unix_ns = None;
    for rep in 1..=args.repeat {
        let which = if args.repeat > 1 {
            format!("run {rep}/{} ", args.repeat)
        } else {
            String::new()
        };
        let outcome = engine::run(&plan, stop.clone(), |e| {
            if let Some((_, m)) = &metrics {
                m.second(e);
            }
            if live {
                let p99 = report::fmt::fmt_ms(e.p99);
                eprint!(
                    "\r\x1b[2K{which}[{:>4}s/{total_s}s] {:>9} req/s  p99 {:>9}  errors {:<8}",
                    e.t + 1,
                    e.completed,
                    p99,
                    e.errors
                );
            }
        })?;
        if live {
            eprint!("\r\x1b[2K");
        }
        started_at_unix_ns.get_or_insert(outcome.started_at_unix_ns);
        let r = outcome.to_result(&target, config.clone());
        // The result is made: each second's histogram moves on to --hdr-log.
        let offset = seconds.last().map_or(0, |(t, _)| t + 1);
        seconds.extend(
            outcome
                .seconds
                .into_iter()
                .map(|s| (offset + s.entry.t, s.histogram_v2)),
        );
        let partial = r.partial;
        if args.repeat > 1 && !args.quiet {
            eprintln!(
                "ingressbench: {which}done: p99 {}, {:.1} req/s{}",
                report::fmt::fmt_opt_ms(r.latency_ms.corrected.p99),
                r.rate.completed_per_s,
                if partial { " (interrupted)" } else { "" }
            );
        }
        reps.push(r);
        if partial {
            break;
        }
    }
    let result = results::repeat::combine(reps, args.repeat).map_err(anyhow::Error::msg)?;
    let seconds: Vec<(u64, &[u8])> = seconds.iter().map(|(t, h)| (*t, h.as_slice())).collect();
    if !emit(&args, &result, &seconds, started_at_unix_ns.unwrap_or(0)) {
        return Ok(1);
    }
    Ok(exit_code(&result))
}

impl LoadArgs {
    /// `--websocket` or `--grpc-stream` when the run is of sessions.
    pub(super) fn sessions_flag(&self) -> Option<&'static str> {
        if self.websocket {
            Some("--websocket")
        } else if self.grpc_stream.is_some() {
            Some("--grpc-stream")
        } else {
            None
        }
    }
}

/// The sessions `--websocket` or `--grpc-stream` asks for.
///
/// # Errors
/// A usage error naming the flag that is wrong.
pub(super) fn session_spec(a: &LoadArgs) -> anyhow::Result<engine::sessions::SessionSpec> {
    use engine::sessions::{Reopen, SessionSettings, SessionSpec};
    let mut load = a.request.spec()?;
    load.duration = match &a.duration {
        Some(d) => duration::parse(d).map_err(|e| usage(format!("-d/--duration: {e}")))?,
        None => std::time::Duration::from_secs(10),
    };
    load.backend_header = a.backend_header.clone();
    let flag = a.sessions_flag().unwrap_or("--websocket");
    let rate = a.rate.as_deref().ok_or_else(|| {
        usage(format!("{flag} needs -R/--rate: messages per second over all sessions (0: hold them open only)"))
    })?;
    if RateProfile::looks_like_plan(rate) {
        return Err(usage(format!(
            "-R/--rate {rate} with {flag}: a plan of steps is for requests; give messages per second"
        )));
    }
    let message_rate = rate.trim().parse::<f64>().map_err(|_| {
        usage(format!(
            "-R/--rate '{rate}' is not a rate: give messages per second over all sessions (-R 100)"
        ))
    })?;
    let message_bytes = match &a.message_size {
        Some(m) => {
            results::size::parse(m).map_err(|e| usage(format!("--message-size '{m}' {e}")))?
        }
        None => 32,
    };
    let reopen = match &a.reopen {
        Some(r) => Reopen::parse(r).map_err(|e| usage(format!("--reopen: {e}")))?,
        None => Reopen::AtOnce,
    };
    let settings = SessionSettings {
        grpc: a.grpc_stream.clone(),
        sessions: a.request.connections,
        message_rate,
        message_bytes,
        reopen,
    };
    SessionSpec::resolve(&load, settings).map_err(|e| usage(format!("{flag}: {e}")))
}

/// `load --websocket` or `--grpc-stream`: sessions alone, their summary and result.
fn websocket(args: &LoadArgs) -> anyhow::Result<i32> {
    let spec = session_spec(args)?;
    check_outputs(args)?;
    let stop = stop_on_signals()?;
    let clock = results::clock::Clock::start();
    let mut started = 0;
    let sessions = engine::sessions::run(
        &spec,
        &clock,
        &stop,
        None,
        engine::sessions::Begin::WhenOpen,
        |t| started = t,
    )?;
    let partial = stop.load(std::sync::atomic::Ordering::Relaxed);
    let started_unix_ns = clock.wall_epoch_ns() + u128::from(started);
    let result = results::RunResult {
        schema: results::RESULT_SCHEMA.into(),
        partial,
        target: spec.url.clone(),
        config: LoadConfig {
            url: spec.url.clone(),
            connections: spec.sessions,
            duration_s: spec.duration.as_secs_f64(),
            rate: Some(spec.message_rate),
            timeout_s: spec.timeout.as_secs_f64(),
            connect_timeout_s: spec.connect_timeout.as_secs_f64(),
            method: "GET".into(),
            threads: 1,
            protocol: match spec.kind {
                engine::sessions::SessionKind::WebSocket => "websocket".into(),
                engine::sessions::SessionKind::Grpc => "grpc-stream".into(),
            },
            grpc: args.grpc_stream.clone(),
            headers: args.request.headers.clone(),
            backend_header: spec.backend_header.clone(),
            ..LoadConfig::default()
        },
        started_at: results::time::rfc3339(started_unix_ns),
        // An interrupted run measured its seconds so far.
        duration_s: if partial {
            sessions.timeline.len() as f64
        } else {
            spec.duration.as_secs_f64()
        },
        sessions: Some(sessions),
        ingressbench_version: env!("CARGO_PKG_VERSION").into(),
        ..results::RunResult::default()
    };
    if !emit(args, &result, &[], started_unix_ns) {
        return Ok(1);
    }
    let s = result.sessions.as_ref().expect("set above");
    Ok(if partial {
        130
    } else if s.opened == 0 {
        1
    } else {
        0
    })
}

/// Checks every output before the load: a run must not measure for an hour and then
/// fail to save.
///
/// # Errors
/// A usage error naming the flag whose file cannot be written, or two flags naming
/// one file.
pub(super) fn check_outputs(args: &LoadArgs) -> anyhow::Result<()> {
    let outputs: Vec<(&str, &std::path::Path)> = [
        ("--json", args.json.as_deref()),
        ("--hdr-log", args.hdr_log.as_deref()),
        ("--report", args.report.as_deref()),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.map(|p| (f, p)))
    .collect();
    for (flag, p) in &outputs {
        results::fsutil::check_writable(p).map_err(|e| usage(format!("{flag} {e}")))?;
    }
    results::fsutil::check_distinct(&outputs).map_err(usage)?;
    Ok(())
}

/// SIGINT and SIGTERM set the returned flag (stop sending, finish, report); a second
/// one while stopping exits at once.
pub(super) fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// Prints the summary and writes every output asked for: the result, the interval
/// log (from each second's corrected histogram, V2 deflate) and the report page.
/// Each output is written on its own: one that fails does not cost the others.
/// Returns whether all were written (each failure is said on stderr).
pub(super) fn emit(
    args: &LoadArgs,
    result: &results::RunResult,
    seconds: &[(u64, &[u8])],
    started_at_unix_ns: u128,
) -> bool {
    print!("{}", report::text::summary(result, args.latency));
    let mut failed = Vec::new();
    if let Some(p) = &args.json {
        let res = serde_json::to_vec_pretty(result)
            .map_err(anyhow::Error::from)
            .and_then(|mut bytes| {
                bytes.push(b'\n');
                Ok(results::fsutil::write_atomic(p, &bytes)?)
            });
        if let Err(e) = res {
            failed.push(format!("--json: {}", results::Causes(&*e)));
        }
    }
    if let Some(p) = &args.hdr_log {
        let res = report::hdr::interval_log(started_at_unix_ns, seconds)
            .map_err(anyhow::Error::msg)
            .and_then(|log| Ok(results::fsutil::write_atomic(p, &log)?));
        if let Err(e) = res {
            failed.push(format!("--hdr-log: {}", results::Causes(&*e)));
        }
    }
    if let Some(p) = &args.report {
        let input = report::input::ReportInput::single("load", result.clone());
        match report::files::write_all(&input, p, false) {
            Ok(_) => println!("report written to {}", p.display()),
            Err(e) => failed.push(format!("--report: {}", results::Causes(&e))),
        }
    }
    for f in &failed {
        eprintln!("ingressbench: not written: {f}");
    }
    warn(result);
    failed.is_empty()
}

/// Says each of a result's warnings on stderr (the summary on stdout lists them too,
/// where a script reading the figures would not look).
pub(super) fn warn(result: &results::RunResult) {
    for w in &result.warnings {
        eprintln!("ingressbench: warning: {w}");
    }
}

/// The exit code of a load whose outputs were all written: 130 when interrupted, 1
/// when no request succeeded (a CI step must not pass on a run that measured
/// nothing; the summary's `FAILED:` line says why), 0 otherwise. A run where most but
/// not all requests failed exits 0: it is flagged, and `compare` gates fail on it.
pub(super) fn exit_code(r: &results::RunResult) -> i32 {
    if r.partial {
        130
    } else if r.requests.completed == 0 {
        1
    } else {
        0
    }
}

/// Validates the flags and resolves them into an engine plan, the settings as they
/// will be recorded, and the target as shown.
fn resolve(a: &LoadArgs) -> anyhow::Result<(Plan, LoadConfig, String)> {
    let (plan, config) = spec(a)?.resolve().map_err(|e| usage(e.to_string()))?;
    Ok((plan, config, a.request.url.clone()))
}

/// The flags as load settings, before the engine checks them ([`LoadSpec::resolve`]).
pub(super) fn spec(a: &LoadArgs) -> anyhow::Result<LoadSpec> {
    let dur = |flag: &str, v: &str| duration::parse(v).map_err(|e| usage(format!("--{flag}: {e}")));
    let (rate, profile) = match (&a.rate, a.max) {
        (Some(r), _) if RateProfile::looks_like_plan(r) => {
            let p = RateProfile::parse(r).map_err(|e| usage(format!("-R/--rate: the plan {e}")))?;
            if let Some(d) = &a.duration {
                return Err(usage(format!(
                    "-d/--duration {d} with a plan: the plan lasts {}s and sets the measured window; drop -d",
                    p.duration().as_secs_f64()
                )));
            }
            (None, Some(p))
        }
        (Some(r), _) => (
            Some(r.trim().parse::<f64>().map_err(|_| {
                usage(format!(
                    "-R/--rate '{r}' is not a rate: give requests per second (-R 1000) or a plan (-R 1000:30s,2000:30s or -R 100..5000:60s)"
                ))
            })?),
            None,
        ),
        (None, true) => (None, None),
        (None, false) => {
            return Err(usage(
                "-R/--rate is required (requests per second over all connections); use --max for a closed loop",
            ))
        }
    };
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(f)) => {
            std::fs::read(f).map_err(|e| usage(format!("--body-file {}: {e}", f.display())))?
        }
        (None, None) => Vec::new(),
    };
    let (targets, targets_from) = match &a.targets {
        Some(f) => (
            engine::targets::read(f).map_err(|e| usage(format!("--targets {e}")))?,
            f.display().to_string(),
        ),
        None => (Vec::new(), String::new()),
    };
    let mut spec = a.request.spec()?;
    spec.tls.resume = a.tls_resume;
    Ok(LoadSpec {
        method: a.method.clone(),
        body,
        targets,
        targets_from,
        rate,
        profile,
        schedule: Model::parse(&a.schedule).map_err(|e| usage(e.to_string()))?,
        duration: dur("duration", a.duration.as_deref().unwrap_or("10s"))?,
        warmup: dur("warmup", &a.warmup)?,
        backend_header: a.backend_header.clone(),
        sample: a.sample,
        http2: http2_spec(a)?,
        ..spec
    })
}

/// `--http2`, `--h2c`, `--streams` and `--grpc*` as settings.
fn http2_spec(a: &LoadArgs) -> anyhow::Result<engine::Http2Spec> {
    let protocol = match (a.http2, a.h2c) {
        (true, _) => engine::Protocol::H2,
        (_, true) => engine::Protocol::H2c,
        _ => engine::Protocol::Http1,
    };
    let grpc = match &a.grpc {
        None => None,
        Some(method) => {
            let message = match (&a.grpc_message, &a.grpc_payload) {
                (Some(f), _) => std::fs::read(f)
                    .map_err(|e| usage(format!("--grpc-message {}: {e}", f.display())))?,
                (None, Some(size)) => engine::GrpcCall::payload(
                    results::size::parse(size)
                        .map_err(|e| usage(format!("--grpc-payload '{size}' {e}")))?,
                ),
                (None, None) => Vec::new(),
            };
            Some(engine::GrpcCall {
                method: method.trim_start_matches('/').to_string(),
                message,
            })
        }
    };
    let window = match &a.h2_window {
        None => None,
        Some(w) => Some(
            results::size::parse(w)
                .ok()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| usage(format!("--h2-window '{w}' is not a size in bytes: give 65535 to 2147483647, e.g. 1MiB")))?,
        ),
    };
    Ok(engine::Http2Spec {
        protocol,
        streams: a.streams,
        grpc,
        window,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: LoadArgs,
    }

    fn args(v: &[&str]) -> LoadArgs {
        let mut all = vec!["x"];
        all.extend_from_slice(v);
        T::try_parse_from(all).unwrap().a
    }

    fn err(v: &[&str]) -> String {
        let e = resolve(&args(v)).err().expect("should be rejected");
        assert!(e.downcast_ref::<crate::cli::UsageError>().is_some(), "{e}");
        e.to_string()
    }

    #[test]
    fn wrk2_flags_resolve() {
        let (p, c, _) = resolve(&args(&[
            "-t2",
            "-c1000",
            "-d180s",
            "-R30000",
            "-L",
            "http://127.0.0.1:8080/",
        ]))
        .unwrap();
        assert_eq!((p.threads, p.connections, p.rate), (2, 1000, Some(30000.0)));
        assert_eq!(p.duration.as_secs(), 180);
        assert_eq!(c.schedule, "connection");
        let (p, c, _) = resolve(&args(&["--max", "-c4", "-t1", "http://127.0.0.1/"])).unwrap();
        assert_eq!(p.rate, None);
        assert_eq!(c.schedule, "max");
    }

    #[test]
    fn nothing_succeeded_is_exit_1() {
        let mut r = results::RunResult::default();
        r.requests.intended = 10;
        r.requests.completed = 1;
        assert_eq!(exit_code(&r), 0);
        r.requests.completed = 0;
        assert_eq!(exit_code(&r), 1);
        r.partial = true;
        assert_eq!(exit_code(&r), 130);
    }

    #[test]
    fn bad_input_is_named() {
        assert!(err(&["-R0", "http://127.0.0.1/"]).contains("--rate"));
        assert!(err(&["--rate=-5", "http://127.0.0.1/"]).contains("--rate"));
        assert!(err(&["http://127.0.0.1/"]).contains("required"));
        assert!(err(&["-R1", "-c0", "http://127.0.0.1/"]).contains("--connections"));
        assert!(err(&["-R1", "-t4", "-c2", "http://127.0.0.1/"]).contains("--threads"));
        assert!(err(&["-R1", "not a url"]).contains("url"));
        assert!(err(&["-R1", "-d", "10x", "http://127.0.0.1/"]).contains("--duration"));
        assert!(
            err(&["-R1", "--cacert", "/nonexistent.pem", "https://127.0.0.1/"])
                .contains("--cacert")
        );
        assert!(err(&["-R1", "--tls-version", "1.3", "http://127.0.0.1/"]).contains("https"));
        assert!(err(&["-R1", "-k", "http://127.0.0.1/"]).starts_with("-k/--insecure needs"));
        assert!(err(&["-R1", "--tls-resume", "https://127.0.0.1/"]).contains("--new-connection"));
        assert!(
            err(&["-R1", "-H", "content-length: 3", "http://127.0.0.1/"])
                .contains("does not match the body")
        );
        assert!(err(&["-R1", "--schedule", "x", "http://127.0.0.1/"]).contains("--schedule"));
        assert!(err(&["-R1", "-H", "nocolon", "http://127.0.0.1/"]).contains("header"));
        assert!(
            err(&["-R1", "--body-file", "/nonexistent", "http://127.0.0.1/"])
                .contains("--body-file")
        );
    }
}
