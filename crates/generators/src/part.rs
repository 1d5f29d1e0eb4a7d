//! One generator of a split load (`ingressbench generator`, started by a coordinator):
//! its part of the whole load, from the shared start instant, with the clock probes
//! and change marks of its coordinator, and its full result handed back.

use crate::{now_unix_ns, serve, Error};
use engine::{split, LoadSpec};
use results::RunResult;
use rustix::process::Signal;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// One generator of a split load, as its coordinator started it.
#[derive(Clone, Debug)]
pub struct PartOptions {
    /// The whole load: every generator splits it the same way.
    pub spec: LoadSpec,
    /// This generator's part: `index` (from 0) of `count`.
    pub index: usize,
    pub count: usize,
    /// The shared start of every generator's schedule, Unix ns.
    pub start_at: u128,
    /// Where the full result goes (a local generator).
    pub result_out: Option<PathBuf>,
    /// Where the coordinator reaches this generator through the API server's pod
    /// proxy (a pod): clock probes, change marks, the result.
    pub serve: Option<String>,
    /// The CPUs the threads are pinned to (empty: any).
    pub cpus: Vec<usize>,
    /// Answer the coordinator's clock probes on stdin and stdout first.
    pub sync_clock: bool,
    /// Count requests by the change windows the coordinator marks (on stdin, or at
    /// the endpoint).
    pub marks: bool,
}

/// How a generator ended.
pub enum PartOutcome {
    /// Its result was written to `result_out`.
    Written(Box<RunResult>),
    /// A pod's result was collected by its coordinator (`true`), or no coordinator
    /// came for it within [`serve::COLLECT_LIMIT`].
    Served { collected: bool },
}

/// Runs one generator until its part ends or `stop` is set (an interrupt, or the
/// coordinator's `/stop`).
///
/// # Errors
/// [`Error::Input`] for a part the load cannot be split into; otherwise when the
/// endpoint cannot be bound, the clock probes fail, the engine cannot run, or the
/// result cannot be written.
pub fn run_part(o: &PartOptions, stop: Arc<AtomicBool>) -> Result<PartOutcome, Error> {
    // A coordinator that dies (even by SIGKILL) takes its generators with it.
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    let served = match o.serve.as_deref() {
        Some(addr) => Some(serve::Served::start(addr, stop.clone())?),
        None => None,
    };
    let mut p = split::part(&o.spec, o.index, o.count, o.start_at)
        .map_err(|e| Error::Input(e.to_string()))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    p.spec.threads = Some(p.spec.threads.unwrap_or_else(|| {
        split::default_threads(o.cpus.len(), cores, o.count, p.spec.connections)
    }));
    p.spec.cpus = o.cpus.clone();
    let (mut plan, config) = p.spec.resolve().map_err(|e| Error::Input(e.to_string()))?;
    plan.slice = Some(p.slice);
    if o.sync_clock {
        answer_clock_probes().map_err(Error::io("clock probes"))?;
    }
    let clock = results::clock::Clock::start();
    // A pod takes the marks at its endpoint; a local child on its stdin.
    let marks = o.marks.then(|| {
        let marks = Arc::new(engine::windows::Marks::new());
        match &served {
            Some(s) => s.take_marks(marks.clone(), clock),
            None => read_marks(marks.clone(), clock),
        }
        marks
    });
    let outcome = engine::run_marked(&plan, clock, stop, marks, |_| {}, |_| {})?;
    let result = outcome.to_result(&o.spec.url, config);
    let mut bytes = serde_json::to_vec(&result)?;
    bytes.push(b'\n');
    if let Some(out) = &o.result_out {
        results::fsutil::write_atomic(out, &bytes)
            .map_err(Error::io(format!("writing {}", out.display())))?;
    }
    Ok(match served {
        // A pod: its result is its product; how the run went is the coordinator's
        // to say.
        Some(s) => PartOutcome::Served {
            collected: s.publish_and_wait(bytes, serve::COLLECT_LIMIT),
        },
        None => PartOutcome::Written(Box::new(result)),
    })
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
