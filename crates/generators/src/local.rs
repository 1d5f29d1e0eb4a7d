//! The coordinator of generators that are processes of this program on this machine:
//! each started with the whole load in a file of the coordinator's scratch folder and
//! pinned to a CPU of its own when there are enough, its clock measured over its
//! stdin and stdout, waited for (bounded in time, an interrupt forwarded once) and its
//! result read from the file it wrote.

use crate::{merge, now_unix_ns, Error, Merged, PROBES};
use engine::split;
use results::clock::{estimate_offset, ClockOffset, ClockProbe};
use results::merge::Part;
use results::{GeneratorPart, RunResult};
use rustix::process::{kill_process_group, Pid, Signal};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Time the children have after the end of their window (beyond the request timeout
/// and the engine's own drain) before the coordinator kills them.
const FINISH_GRACE: Duration = Duration::from_secs(10);
/// After an interrupt: the engine's 1 s drain, then time to write the result.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// How `load --generators` runs its processes.
#[derive(Clone, Debug, Default)]
pub struct LocalOptions {
    /// Time from now to the generators' shared start instant (`None`: 1 s plus the
    /// load's connect timeout): to start, answer the clock probes and open every
    /// connection before the first request is due.
    pub lead: Option<Duration>,
    /// Draw a progress line on stderr while they run.
    pub live: bool,
    /// Say nothing on stderr (that the generators share CPUs).
    pub quiet: bool,
}

/// Runs `spec` as `n` generator processes (the whole load valid as one, and split
/// this many ways: the caller checks both first) until they end or `stop` is set,
/// and merges their results.
///
/// # Errors
/// When no generator could be started, or no result could be merged.
pub fn run_local(
    spec: &engine::LoadSpec,
    n: usize,
    opts: &LocalOptions,
    stop: &AtomicBool,
) -> Result<Merged, Error> {
    let plan = split::split(spec, n, 0).map_err(|e| Error::Input(e.to_string()))?;
    let cpus = available_cpus();
    let pinned = cpus.len() >= n;
    if !pinned && !opts.quiet {
        eprintln!(
            "ingressbench: {n} generators on {} CPUs: not pinned, they share the CPUs",
            cpus.len()
        );
    }
    let dir = scratch_dir().map_err(Error::io("temporary folder for the generators' results"))?;
    let lead = opts
        .lead
        .unwrap_or_else(|| Duration::from_secs(1) + spec.connect_timeout);
    let start_at = split::start_instant(now_unix_ns(), lead);
    let spec_file = write_spec(spec, dir.path())?;

    let mut gens = spawn_all(&plan, &cpus, start_at, dir.path(), &spec_file, &[])?;
    probe_all(&mut gens, lead);
    let interrupted = wait_all(&mut gens, spec, start_at, stop, opts.live, lead);

    let parts: Vec<Part> = gens.into_iter().map(Generator::into_part).collect();
    drop(dir);
    merge(parts, start_at, spec.warmup, interrupted, Vec::new())
}

/// Starts one generator (`ingressbench generator`, a child of this program) per part
/// of `plan`: each reads the whole load from `spec` (every child splits it the same
/// way) and takes the part's internal flags and `extra`; each pinned to a CPU of its
/// own when `cpus` has one per part. A child that cannot start stops those already
/// started.
///
/// # Errors
/// Which generator could not start, and why.
pub(crate) fn spawn_all(
    plan: &[split::PartSpec],
    cpus: &[usize],
    start_at: u128,
    dir: &std::path::Path,
    spec: &std::path::Path,
    extra: &[&str],
) -> Result<Vec<Generator>, Error> {
    let n = plan.len();
    let pinned = cpus.len() >= n;
    let exe = std::env::current_exe().map_err(Error::io("this program's path"))?;
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
                return Err(Error::Io {
                    what: format!("starting generator {i}/{n}"),
                    source: e,
                });
            }
        }
    }
    Ok(gens)
}

/// The coordinator's scratch folder (the whole load for the children, their results),
/// named after this process so that its children can be told from another run's.
pub(crate) fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("ingressbench-generators-{}-", std::process::id()))
        .tempdir()
}

/// The whole load as JSON in `dir`, for the children's `--spec`.
///
/// # Errors
/// When the file cannot be written.
pub(crate) fn write_spec(
    spec: &engine::LoadSpec,
    dir: &std::path::Path,
) -> Result<std::path::PathBuf, Error> {
    let file = dir.join("spec.json");
    let json = serde_json::to_vec(spec)?;
    std::fs::write(&file, json).map_err(Error::io(format!("writing {}", file.display())))?;
    Ok(file)
}

/// The clock probes, one generator after the other (each takes well under a
/// millisecond once the child is up), all within `lead`: each child's offset goes
/// into its entry, a child that does not answer is failed. Returns the stdin of each
/// child that answered, in order, for what the coordinator sends next.
pub(crate) fn probe_all(gens: &mut [Generator], lead: Duration) -> Vec<ChildStdin> {
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

/// Waits for every generator of `spec`'s load started at `start_at` until its window,
/// the request timeout and [`FINISH_GRACE`] have passed, forwarding an interrupt once
/// (each child then stops, drains and writes what it measured), and kills whatever is
/// still running then. Returns whether the run was interrupted.
pub(crate) fn wait_all(
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
pub(crate) struct Generator {
    pub(crate) child: Child,
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
    pub(crate) fn into_part(mut self) -> Part {
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

/// The CPUs this process may run on, in order.
pub(crate) fn available_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|c| set.is_set(*c))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_may_run_somewhere() {
        assert!(!available_cpus().is_empty());
    }
}
