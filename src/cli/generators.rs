//! `load --generators N`: the load split over N processes of this binary on this
//! machine, and their results merged into the one result a single `load` writes.
//!
//! The coordinator only wires: the split is `engine::split` and the merge is
//! `results::merge`, both pure, so a Kubernetes coordinator (an indexed Job whose pods
//! run `load ... --part $JOB_COMPLETION_INDEX/N --start-at T`) can reuse them as they
//! are. Each child (`--part INDEX/COUNT`) computes its own share from the same flags,
//! answers the coordinator's clock probes, starts its schedule at the shared instant,
//! writes its full result to a file the coordinator owns (a temporary folder removed
//! at the end) and prints nothing. The coordinator waits for all of them, bounded in
//! time: a child that fails or hangs is killed and named in the merged result.

mod kubernetes;
mod scenario;
mod serve;

pub use kubernetes::{coordinate_kubernetes, KubernetesGenerators, Pods};
pub use scenario::LocalGenerators;

use super::load::{self, LoadArgs};
use super::{duration, usage};
use anyhow::Context as _;
use engine::split;
use results::clock::{estimate_offset, ClockOffset, ClockProbe};
use results::merge::Part;
use results::{GeneratorPart, RunResult};
use rustix::process::{kill_process_group, Pid, Signal};
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Clock probes per generator: the shortest round trip of these is kept.
const PROBES: usize = 8;
/// Time the children have after the end of their window (beyond the request timeout
/// and the engine's own drain) before the coordinator kills them.
const FINISH_GRACE: Duration = Duration::from_secs(10);
/// After an interrupt: the engine's 1 s drain, then time to write the result.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

fn now_unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Runs the load as `args.generators` child processes and prints and writes their
/// merged result as a single `load` would.
///
/// # Errors
/// A usage error (exit 2) for settings that cannot be split, before anything starts;
/// otherwise when no child could be started or no result could be merged.
pub fn coordinate(args: &LoadArgs) -> anyhow::Result<i32> {
    let n = args.generators;
    let spec = load::spec(args)?;
    // The whole run must be valid as one, and split this many ways.
    spec.resolve().map_err(|e| usage(e.to_string()))?;
    let plan = split::split(&spec, n, 0).map_err(|e| usage(e.to_string()))?;
    // And each share valid on its own: a request mix needs a connection per host
    // in every generator.
    for p in &plan {
        p.spec.resolve().map_err(|e| {
            usage(format!(
                "--generators {n}: generator {} of {n} would run {} connections: {e}",
                p.slice.index + 1,
                p.spec.connections
            ))
        })?;
    }
    load::check_outputs(args)?;
    let stop = load::stop_on_signals()?;

    let cpus = available_cpus();
    let pinned = cpus.len() >= n;
    if !pinned && !args.quiet {
        eprintln!(
            "ingressbench: {n} generators on {} CPUs: not pinned, they share the CPUs",
            cpus.len()
        );
    }
    let dir = scratch_dir().context("temporary folder for the generators' results")?;
    // Time to start, answer the clock probes and open every connection before the
    // first request is due.
    let lead = match &args.lead {
        Some(l) => duration::parse(l).map_err(|e| usage(format!("--lead: {e}")))?,
        None => Duration::from_secs(1) + spec.connect_timeout,
    };
    let start_at = split::start_instant(now_unix_ns(), lead);
    let spec_file = write_spec(&spec, dir.path()).map_err(|e| anyhow::anyhow!(e))?;

    let mut gens = spawn_all(&plan, &cpus, start_at, dir.path(), &spec_file, &[])
        .map_err(|e| anyhow::anyhow!(e))?;
    probe_all(&mut gens, lead);

    let live = !args.quiet && std::io::stderr().is_terminal();
    let interrupted = wait_all(&mut gens, &spec, start_at, &stop, live, lead);

    let parts: Vec<Part> = gens.into_iter().map(Generator::into_part).collect();
    drop(dir);
    finish(args, parts, start_at, spec.warmup, interrupted, Vec::new())
}

/// Starts one generator (`ingressbench generator`, a child of this program) per part
/// of `plan`: each reads the whole load from `spec` (every child splits it the same
/// way) and takes the part's internal flags and `extra`; each pinned to a CPU of its
/// own when `cpus` has one per part. A child that cannot start stops those already
/// started.
///
/// # Errors
/// Which generator could not start, and why.
fn spawn_all(
    plan: &[split::PartSpec],
    cpus: &[usize],
    start_at: u128,
    dir: &std::path::Path,
    spec: &std::path::Path,
    extra: &[&str],
) -> Result<Vec<Generator>, String> {
    let n = plan.len();
    let pinned = cpus.len() >= n;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut gens: Vec<Generator> = Vec::with_capacity(n);
    for (i, p) in plan.iter().enumerate() {
        let cpu = pinned.then(|| cpus[i]);
        let out = dir.join(format!("part-{i}.json"));
        let mut cmd = Command::new(&exe);
        cmd.arg("generator")
            .arg("--part")
            .arg(format!("{i}/{n}"))
            .arg("--start-at")
            .arg(start_at.to_string())
            .arg("--result-out")
            .arg(&out)
            .arg("--sync-clock")
            .arg("--spec")
            .arg(spec)
            .args(extra);
        if let Some(c) = cpu {
            cmd.arg("--cpus").arg(c.to_string());
        }
        let threads = p.spec.threads.unwrap_or_else(|| {
            split::default_threads(usize::from(pinned), cpus.len(), n, p.spec.connections)
        });
        let planned = GeneratorPart {
            index: i,
            connections: p.spec.connections,
            threads,
            rate: p.spec.rate,
            seed: p.slice.seed,
            cpus: cpu.map(|c| c.to_string()).unwrap_or_default(),
            ..Default::default()
        };
        match Generator::spawn(&mut cmd, planned, out) {
            Ok(g) => gens.push(g),
            Err(e) => {
                for g in &mut gens {
                    g.kill();
                }
                return Err(format!("starting generator {i}/{n}: {e}"));
            }
        }
    }
    Ok(gens)
}

/// The coordinator's scratch folder (the whole load for the children, their results),
/// named after this process so that its children can be told from another run's.
fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("ingressbench-generators-{}-", std::process::id()))
        .tempdir()
}

/// The whole load as JSON in `dir`, for the children's `--spec`.
///
/// # Errors
/// When the file cannot be written.
fn write_spec(
    spec: &engine::LoadSpec,
    dir: &std::path::Path,
) -> Result<std::path::PathBuf, String> {
    let file = dir.join("spec.json");
    let json = serde_json::to_vec(spec).map_err(|e| format!("the load as JSON: {e}"))?;
    std::fs::write(&file, json).map_err(|e| format!("writing {}: {e}", file.display()))?;
    Ok(file)
}

/// The clock probes, one generator after the other (each takes well under a
/// millisecond once the child is up), all within `lead`: each child's offset goes
/// into its entry, a child that does not answer is failed. Returns the stdin of each
/// child that answered, in order, for what the coordinator sends next.
fn probe_all(gens: &mut [Generator], lead: Duration) -> Vec<ChildStdin> {
    let sync_deadline = Instant::now() + lead;
    let probes: Vec<_> = gens.iter_mut().map(|g| g.start_probes()).collect();
    let mut stdins = Vec::with_capacity(gens.len());
    for (g, rx) in gens.iter_mut().zip(probes) {
        let left = sync_deadline.saturating_duration_since(Instant::now());
        match rx.and_then(|rx| {
            rx.recv_timeout(left)
                .unwrap_or_else(|_| Err("did not answer the clock probes in time".into()))
        }) {
            Ok((o, stdin)) => {
                g.planned.clock_offset_ms = Some(o.offset_ns as f64 / 1e6);
                g.planned.clock_offset_error_ms = Some(o.error_ns as f64 / 1e6);
                stdins.push(stdin);
            }
            Err(e) => g.fail(e),
        }
    }
    stdins
}

/// Merges the parts' results (`results::merge`, the same for every platform), prints
/// and writes the merged result as a single `load` would, and says the exit code.
fn finish(
    args: &LoadArgs,
    parts: Vec<Part>,
    start_at: u128,
    warmup: Duration,
    interrupted: bool,
    warnings: Vec<String>,
) -> anyhow::Result<i32> {
    let failed = parts.iter().any(|p| p.result.is_none());
    let mut result =
        results::merge::merge(parts, start_at).context("merging the generators' results")?;
    result.warnings.extend(warnings);
    let seconds = result.take_second_histograms();
    let seconds: Vec<(u64, &[u8])> = seconds.iter().map(|(t, b)| (*t, b.as_slice())).collect();
    let started = start_at + warmup.as_nanos();
    if !load::emit(args, &result, &seconds, started) {
        return Ok(1);
    }
    Ok(if interrupted {
        130
    } else if failed {
        // A generator that produced nothing is a failed run, not an interrupted one.
        1
    } else {
        load::exit_code(&result)
    })
}

/// Waits for every generator of `spec`'s load started at `start_at` until its window,
/// the request timeout and [`FINISH_GRACE`] have passed, forwarding an interrupt once
/// (each child then stops, drains and writes what it measured), and kills whatever is
/// still running then. Returns whether the run was interrupted.
fn wait_all(
    gens: &mut [Generator],
    spec: &engine::LoadSpec,
    start_at: u128,
    stop: &AtomicBool,
    live: bool,
    lead: Duration,
) -> bool {
    let window = spec.warmup + spec.duration;
    let mut deadline = Instant::now()
        + Duration::from_nanos(start_at.saturating_sub(now_unix_ns()) as u64)
        + window
        + spec.timeout
        + FINISH_GRACE;
    let began = Instant::now();
    let mut forwarded = false;
    loop {
        for g in gens.iter_mut() {
            g.poll();
        }
        let running = gens.iter().filter(|g| g.running()).count();
        if running == 0 {
            break;
        }
        if stop.load(Ordering::Relaxed) && !forwarded {
            forwarded = true;
            for g in gens.iter().filter(|g| g.running()) {
                g.signal(Signal::INT);
            }
            deadline = deadline.min(Instant::now() + INTERRUPT_GRACE);
        }
        if Instant::now() >= deadline {
            let waited = began.elapsed().as_secs();
            for g in gens.iter_mut().filter(|g| g.running()) {
                g.kill();
                g.fail(format!("did not finish within {waited} s: killed"));
            }
            break;
        }
        if live {
            let t = began.elapsed().saturating_sub(lead).as_secs();
            eprint!(
                "\r\x1b[2K[{:>4}s/{}s] {running} generators running",
                t.min(window.as_secs()),
                window.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if live {
        eprint!("\r\x1b[2K");
    }
    forwarded
}

/// One child process and what the coordinator learns of it.
struct Generator {
    child: Child,
    /// Its index and planned share, the clock offset, and why it failed.
    planned: GeneratorPart,
    /// Where it writes its result.
    out: std::path::PathBuf,
    status: Option<ExitStatus>,
    /// Its stderr, read by a thread of its own so the child never blocks on it.
    stderr: Arc<Mutex<String>>,
}

impl Generator {
    /// Starts a child in a process group of its own, so a Ctrl-C at the terminal
    /// reaches the coordinator only, which forwards it exactly once.
    fn spawn(
        cmd: &mut Command,
        planned: GeneratorPart,
        out: std::path::PathBuf,
    ) -> std::io::Result<Generator> {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn()?;
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(pipe) = child.stderr.take() {
            let sink = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Ok(mut s) = sink.lock() {
                        s.push_str(&line);
                        s.push('\n');
                    }
                }
            });
        }
        Ok(Generator {
            child,
            planned,
            out,
            status: None,
            stderr,
        })
    }

    /// Starts measuring its clock on a thread (a child that hangs must not hang the
    /// coordinator); the answer arrives on the returned channel, with the child's
    /// stdin for whatever the coordinator sends next.
    #[allow(clippy::type_complexity)]
    fn start_probes(
        &mut self,
    ) -> Result<mpsc::Receiver<Result<(ClockOffset, ChildStdin), String>>, String> {
        let (Some(stdin), Some(stdout)) = (self.child.stdin.take(), self.child.stdout.take())
        else {
            return Err("its pipes are gone".into());
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(probe_clock(stdin, stdout));
        });
        Ok(rx)
    }

    fn poll(&mut self) {
        if self.status.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.status = Some(st);
            }
        }
    }

    fn running(&self) -> bool {
        self.status.is_none()
    }

    fn signal(&self, sig: Signal) {
        if let Some(pid) = Pid::from_raw(self.child.id() as i32) {
            let _ = kill_process_group(pid, sig);
        }
    }

    /// Kills the child's group and reaps it.
    fn kill(&mut self) {
        if self.status.is_none() {
            self.signal(Signal::KILL);
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Marks it failed (the first reason is kept) and makes sure it is gone.
    fn fail(&mut self, why: String) {
        self.kill();
        self.planned.error.get_or_insert(why);
    }

    /// The last line the child wrote on stderr (its error, if it failed).
    fn last_words(&self) -> String {
        self.stderr
            .lock()
            .ok()
            .and_then(|s| s.lines().last().map(str::to_string))
            .unwrap_or_default()
    }

    /// What the merge needs: its result, or why there is none.
    fn into_part(mut self) -> Part {
        self.kill();
        if let Some(e) = self.planned.error.take() {
            let said = self.last_words();
            self.planned.error = Some(if said.is_empty() {
                e
            } else {
                format!("{e} ({said})")
            });
            return Part {
                planned: self.planned,
                result: None,
            };
        }
        let read = std::fs::read(&self.out)
            .and_then(|b| serde_json::from_slice::<RunResult>(&b).map_err(std::io::Error::other));
        match read {
            Ok(r) => Part {
                planned: self.planned,
                result: Some(r),
            },
            Err(e) => {
                let said = self.last_words();
                use std::os::unix::process::ExitStatusExt as _;
                let how = match (
                    self.status.and_then(|s| s.code()),
                    self.status.and_then(|s| s.signal()),
                ) {
                    (Some(c), _) => format!("exited with code {c}"),
                    (None, Some(sig)) => format!("was killed by signal {sig}"),
                    (None, None) => "ended".to_string(),
                };
                let why = match (said.is_empty(), e.kind()) {
                    (false, _) => format!("{how}: {said}"),
                    (true, std::io::ErrorKind::NotFound) => format!("{how} and wrote no result"),
                    (true, _) => format!("{how}; its result could not be read: {e}"),
                };
                self.planned.error = Some(why);
                Part {
                    planned: self.planned,
                    result: None,
                }
            }
        }
    }
}

/// The coordinator's side of the clock probes: `ping`, answered by `pong <unix ns>`,
/// [`PROBES`] times, then `go`. Gives stdin back: a scenario's changes follow on it.
fn probe_clock(
    mut stdin: ChildStdin,
    stdout: ChildStdout,
) -> Result<(ClockOffset, ChildStdin), String> {
    let mut lines = BufReader::new(stdout);
    let mut probes = Vec::with_capacity(PROBES);
    let mut line = String::new();
    for _ in 0..PROBES {
        let sent = now_unix_ns();
        stdin
            .write_all(b"ping\n")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("clock probe: {e}"))?;
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => return Err("exited before its clock was measured".into()),
            Ok(_) => {}
        }
        let received = now_unix_ns();
        let remote = line
            .trim()
            .strip_prefix("pong ")
            .and_then(|v| v.parse::<u128>().ok())
            .ok_or_else(|| format!("clock probe answered {:?}", line.trim()))?;
        probes.push(ClockProbe {
            sent,
            remote,
            received,
        });
    }
    let _ = stdin.write_all(b"go\n").and_then(|_| stdin.flush());
    let offset = estimate_offset(&probes).ok_or("no usable clock probe")?;
    Ok((offset, stdin))
}

/// The generator's side of the clock probes, on stdin and stdout, until `go` or the
/// end of stdin.
fn answer_clock_probes() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        match line?.trim() {
            "ping" => {
                writeln!(out, "pong {}", now_unix_ns())?;
                out.flush()?;
            }
            _ => break,
        }
    }
    Ok(())
}

/// A scenario run's changes, as the coordinator forwards them on stdin (`mark <unix
/// ns>`, in time order), marked on this generator's clock by a thread of their own
/// until stdin ends. Each arrives a pipe's latency (tens of µs) after the change:
/// well within the shortest round trip, so a request intended after a change is
/// still counted in its window (see engine::windows).
fn read_marks(marks: Arc<engine::windows::Marks>, clock: results::clock::Clock) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            let Some(unix) = line
                .trim()
                .strip_prefix("mark ")
                .and_then(|v| v.parse::<u128>().ok())
            else {
                continue;
            };
            let t = unix.saturating_sub(clock.wall_epoch_ns());
            marks.mark(u64::try_from(t).unwrap_or(u64::MAX));
        }
    });
}

/// The CPUs this process may run on, in order.
fn available_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|c| set.is_set(*c))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// `INDEX/COUNT`, the index from 0.
fn parse_part(s: &str) -> Option<(usize, usize)> {
    let (i, n) = s.split_once('/')?;
    Some((i.trim().parse().ok()?, n.trim().parse().ok()?))
}

/// A CPU list as `--cpus` takes it: `0,2,5`.
fn parse_cpus(s: &str) -> Option<Vec<usize>> {
    s.split(',').map(|c| c.trim().parse().ok()).collect()
}

/// `ingressbench generator`: one generator of a load split by `load --generators` or
/// `run --generators`. Its flags are set by the coordinator, never by a user.
#[derive(clap::Args, Debug)]
pub struct GeneratorArgs {
    /// This generator's part: INDEX (from 0) of COUNT.
    #[arg(long, value_name = "INDEX/COUNT")]
    pub part: String,
    /// The shared start of every generator's schedule, Unix nanoseconds.
    #[arg(long, value_name = "UNIX_NS")]
    pub start_at: String,
    /// The whole load (JSON, an `engine::LoadSpec`) in a file: every generator
    /// splits it the same way and runs its part.
    #[arg(long, value_name = "FILE", required_unless_present = "spec_json")]
    pub spec: Option<std::path::PathBuf>,
    /// The whole load as JSON in the argument itself (a pod, which cannot read the
    /// coordinator's files).
    #[arg(long, value_name = "JSON", conflicts_with = "spec")]
    pub spec_json: Option<String>,
    /// Where to write the full result (JSON).
    #[arg(long, value_name = "FILE")]
    pub result_out: Option<std::path::PathBuf>,
    /// The CPUs the threads are pinned to (`0,1`).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Answer the coordinator's clock probes on stdin/stdout first.
    #[arg(long)]
    pub sync_clock: bool,
    /// After the clock probes, read the change marks (`mark <unix ns>`) on stdin
    /// (or at `--serve`'s endpoint) and count requests by window.
    #[arg(long)]
    pub marks: bool,
    /// Serve the clock probes and the result on this address (through the API
    /// server's pod proxy) instead of stdin and a file.
    #[arg(long, value_name = "ADDR:PORT")]
    pub serve: Option<String>,
}

/// The whole load a generator was given, by file or in its argument.
///
/// # Errors
/// A usage error when it cannot be read or is not a load.
fn read_spec(args: &GeneratorArgs) -> anyhow::Result<engine::LoadSpec> {
    let (from, json) = match (&args.spec, &args.spec_json) {
        (Some(f), _) => (
            format!("--spec {}", f.display()),
            std::fs::read_to_string(f)
                .map_err(|e| usage(format!("--spec {}: {e}", f.display())))?,
        ),
        (None, Some(j)) => ("--spec-json".to_string(), j.clone()),
        (None, None) => return Err(usage("give the load with --spec FILE or --spec-json JSON")),
    };
    serde_json::from_str(&json).map_err(|e| usage(format!("{from}: not a load: {e}")))
}

/// Runs one generator: its share of the load, from the shared start instant, its
/// full result written to `--result-out` (or served at `--serve`), nothing printed.
///
/// # Errors
/// A usage error for missing or malformed flags, or as `load` fails.
pub fn run_part(args: &GeneratorArgs) -> anyhow::Result<i32> {
    let part = &args.part;
    let (index, count) = parse_part(part)
        .ok_or_else(|| usage(format!("--part {part}: give INDEX/COUNT, e.g. 0/2")))?;
    let start_at: u128 = args
        .start_at
        .parse()
        .map_err(|_| usage("--start-at: give Unix nanoseconds"))?;
    let out = args.result_out.as_deref();
    if out.is_none() && args.serve.is_none() {
        return Err(usage("generator needs --result-out or --serve"));
    }
    let cpus = match args.cpus.as_deref() {
        None => Vec::new(),
        Some(c) => parse_cpus(c).ok_or_else(|| usage(format!("--cpus {c}: give 0,1,...")))?,
    };
    let spec = read_spec(args)?;
    // A coordinator that dies (even by SIGKILL) takes its generators with it.
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    // Before the clock probes: an interrupt forwarded that early still ends in a
    // (partial) result rather than a dead child.
    let stop = load::stop_on_signals()?;
    let served = match args.serve.as_deref() {
        Some(addr) => Some(serve::Served::start(addr, stop.clone())?),
        None => None,
    };
    let mut p = split::part(&spec, index, count, start_at).map_err(|e| usage(e.to_string()))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    p.spec.threads =
        Some(p.spec.threads.unwrap_or_else(|| {
            split::default_threads(cpus.len(), cores, count, p.spec.connections)
        }));
    p.spec.cpus = cpus;
    let (mut plan, config) = p.spec.resolve().map_err(|e| usage(e.to_string()))?;
    plan.slice = Some(p.slice);
    if args.sync_clock {
        answer_clock_probes().context("clock probes")?;
    }
    let clock = results::clock::Clock::start();
    // A pod takes the marks at its endpoint; a local child on its stdin.
    let marks = args.marks.then(|| {
        let marks = Arc::new(engine::windows::Marks::new());
        match &served {
            Some(s) => s.take_marks(marks.clone(), clock),
            None => read_marks(marks.clone(), clock),
        }
        marks
    });
    let outcome = engine::run_marked(&plan, clock, stop, marks, |_| {}, |_| {})?;
    let result = outcome.to_result(&spec.url, config);
    let mut bytes = serde_json::to_vec(&result)?;
    bytes.push(b'\n');
    if let Some(out) = out {
        results::fsutil::write_atomic(out, &bytes)
            .with_context(|| format!("--result-out {}", out.display()))?;
    }
    match served {
        // A pod: its result is its product; how the run went is the coordinator's
        // to say, so a collected result is a success (and the Job's completion).
        Some(s) => Ok(if s.publish_and_wait(bytes, serve::COLLECT_LIMIT) {
            0
        } else {
            eprintln!(
                "ingressbench: no coordinator collected the result within {} s",
                serve::COLLECT_LIMIT.as_secs()
            );
            1
        }),
        None => Ok(load::exit_code(&result)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_flags_parse() {
        assert_eq!(parse_part("1/4"), Some((1, 4)));
        assert_eq!(parse_part("1"), None);
        assert_eq!(parse_part("a/4"), None);
        assert_eq!(parse_cpus("0, 3"), Some(vec![0, 3]));
        assert_eq!(parse_cpus("0,x"), None);
        assert!(!available_cpus().is_empty());
    }
}
