//! `load --platform kubernetes --generators N`: the parts run as the pods of an indexed
//! Job (`kubernetes::generators`), each `ingressbench generator --part
//! $(JOB_COMPLETION_INDEX)/N --start-at T --serve 0.0.0.0:PORT --spec-json LOAD`; the coordinator
//! measures their clocks before T, collects each full result after the window, and
//! merges them with `results::merge` exactly as the local coordinator does. Every
//! exchange goes through the API server's pod proxy.

use crate::local_runner::merge_parts;
use crate::{for_runner, merge, now_unix_ns, serve, Error, Merged, PROBES};
use engine::split;
use engine::windows::Tally;
use kubernetes::generators::{GeneratorJob, GeneratorPod, JobPlan, PORT};
use results::clock::Nanos;
use results::clock::{estimate_offset, ClockProbe};
use results::merge::Part;
use results::{GeneratorPart, MarksReceived, RunResult};
use scenario::runner::{LoadRun, LoadRunner};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Time the parts have after the end of their window (beyond the request timeout and
/// the engine's drain) to offer their result.
const FINISH_GRACE: Duration = Duration::from_secs(20);
/// After an interrupt: the parts' drain and the collection.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);
/// How often the pods are listed while waiting.
const POLL: Duration = Duration::from_millis(200);

/// The most a pod's arguments carry of the load as JSON: a Job object must stay well
/// within what the API server stores (about 1.5 MiB).
const MAX_SPEC_JSON: usize = 1 << 20;

/// The arguments of each pod's `ingressbench`: the hidden `generator` command with
/// its part (the index Kubernetes sets), the shared start instant, the endpoint the
/// coordinator reaches it at, and the whole load as JSON (each part takes its own
/// share of it). `$(` is escaped as `$$(`: Kubernetes expands `$(VAR)` in a
/// container's args.
///
/// # Errors
/// A load too large to travel in a pod's arguments.
pub fn job_args(
    spec: &engine::LoadSpec,
    count: usize,
    start_at: u128,
    marks: bool,
) -> Result<Vec<String>, String> {
    let json = serde_json::to_string(spec).map_err(|e| format!("the load as JSON: {e}"))?;
    if json.len() > MAX_SPEC_JSON {
        return Err(format!(
            "the load is {} KiB as JSON, more than generator pods take in their arguments ({} KiB): a body or a request mix this large runs with local generators",
            json.len() >> 10,
            MAX_SPEC_JSON >> 10
        ));
    }
    let mut v: Vec<String> = vec![
        "generator".into(),
        "--part".into(),
        format!("$(JOB_COMPLETION_INDEX)/{count}"),
        "--start-at".into(),
        start_at.to_string(),
        "--serve".into(),
        format!("0.0.0.0:{PORT}"),
    ];
    if marks {
        v.push("--marks".into());
    }
    v.push("--spec-json".into());
    v.push(json.replace("$(", "$$("));
    Ok(v)
}

/// A run id: lowercase hex from the clock, as a namespace name can hold.
fn run_id() -> String {
    format!("g{:x}", (now_unix_ns() / 1_000_000) & 0xff_ffff_ffff)
}

/// Where the generator pods run and how: the same for `load` and `run`.
#[derive(Clone, Debug)]
pub struct Pods {
    /// The cluster (kubeconfig, context, a namespace to use instead of one per run).
    pub cluster: kubernetes::ClusterSpec,
    pub image: Option<String>,
    pub node_selector: BTreeMap<String, String>,
    pub spread: bool,
    pub host_network: bool,
    /// The pods' head start before the shared start instant.
    pub lead: Duration,
    pub quiet: bool,
}

/// What the coordinator learns of one part.
struct Gen {
    planned: GeneratorPart,
    pod: Option<String>,
    clocked: bool,
    /// The pod's clock minus ours, once measured.
    offset_ns: i128,
    stopped: bool,
    result: Option<RunResult>,
}

/// What a Job run gave: one entry per part, and whether it was interrupted.
struct JobOutcome {
    parts: Vec<Part>,
    interrupted: bool,
    /// The Job could not be removed: what is left and how to remove it.
    left: Option<String>,
}

/// A scenario run's change marks for the parts: each is a time on the coordinator's
/// clock (`epoch` + the mark, Unix ns), sent to every pod on its own clock.
struct MarkFeed {
    rx: mpsc::Receiver<Nanos>,
    epoch: u128,
    /// How many marks came so far: each goes out numbered, so that a retried request
    /// that reached its pod twice opens one window, not two.
    sent: u64,
}

impl MarkFeed {
    /// Forwards every mark that has come, to every part; `false` once the runner is
    /// done marking. Called between the coordinator's other calls, so that a slow
    /// one delays a mark by at most that call, not by a whole poll.
    fn pump(&mut self, job: &GeneratorJob, gens: &mut [Gen], listed: &[GeneratorPod]) -> bool {
        loop {
            match self.rx.try_recv() {
                Ok(t) => self.forward(t, job, gens, listed),
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => return false,
            }
        }
    }

    /// Sends the next mark, at `t` on the run's clock, to every part.
    fn forward(&mut self, t: Nanos, job: &GeneratorJob, gens: &mut [Gen], listed: &[GeneratorPod]) {
        self.sent += 1;
        let unix = self.epoch + u128::from(t);
        for g in gens.iter_mut() {
            forward_mark(job, g, self.sent, unix, listed);
        }
    }
}

/// What a scenario run adds to a Job's run: its change marks, and what to call once
/// the Job exists (the runner's changes start with the measured window).
struct ForScenario {
    marks: MarkFeed,
    created: Box<dyn FnOnce() + Send>,
}

/// Runs `plan` as an indexed Job whose pods run `args` (the whole load's flags with
/// the internal ones of a part), from the shared instant `start_at` for `window`:
/// finds the pods and measures their clocks before the start, forwards each change
/// mark while the load runs, and collects each result after it. `None`: interrupted
/// before the start, with nothing measured (the Job is removed).
fn run_job(
    pods: &Pods,
    plan: &[split::PartSpec],
    args: Vec<String>,
    spec: &engine::LoadSpec,
    start_at: u128,
    stop: &AtomicBool,
    scenario: Option<ForScenario>,
) -> Result<Option<JobOutcome>, Error> {
    let (mut marks, created) = match scenario {
        Some(s) => (Some(s.marks), Some(s.created)),
        None => (None, None),
    };
    let n = plan.len();
    let window = spec.warmup + spec.duration;
    let run = run_id();
    let job_plan = JobPlan {
        run: run.clone(),
        count: n,
        image: pods.image.clone(),
        args,
        node_selector: pods.node_selector.clone(),
        spread: pods.spread,
        host_network: pods.host_network,
        deadline: pods.lead
            + window
            + spec.timeout
            + FINISH_GRACE
            + serve::COLLECT_LIMIT.min(Duration::from_secs(60)),
    };
    let cluster = kubernetes::ClusterSpec {
        run,
        ..pods.cluster.clone()
    };
    let mut job =
        GeneratorJob::start(&cluster, &job_plan).map_err(|e| Error::Cluster(Box::new(e)))?;
    if let Some(f) = created {
        f();
    }
    if !pods.quiet {
        eprintln!(
            "ingressbench: {n} generators as Job {}/{}, starting in {:.0?}",
            job.namespace(),
            kubernetes::generators::JOB,
            Duration::from_nanos(start_at.saturating_sub(now_unix_ns()) as u64)
        );
    }
    let mut gens: Vec<Gen> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| Gen {
            planned: GeneratorPart {
                index: i,
                connections: p.spec.connections,
                threads: p.spec.threads.unwrap_or(0),
                rate: p.spec.rate,
                seed: p.slice.seed,
                ..Default::default()
            },
            pod: None,
            clocked: false,
            offset_ns: 0,
            stopped: false,
            result: None,
        })
        .collect();

    let begun = Instant::now();
    let until = |at: u128| Duration::from_nanos(at.saturating_sub(now_unix_ns()) as u64);
    let start_in = until(start_at);
    let end = begun + start_in + window;
    let mut collect_by = end + spec.timeout + FINISH_GRACE;
    let mut interrupted = false;
    // Before the start instant: find the pods and measure their clocks. During the
    // window: forward the marks and watch for an interrupt (and measure a late pod's
    // clock). After it: collect.
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) && !interrupted {
            interrupted = true;
            collect_by = collect_by.min(now + INTERRUPT_GRACE);
            if now < begun + start_in {
                // Nothing measured yet: no result to wait for, nor to hold a warning.
                eprintln!("ingressbench: interrupted before the start: removing the Job");
                if let Err(e) = job.remove() {
                    eprintln!("ingressbench: warning: {}", results::Causes(&e));
                }
                return Ok(None);
            }
        }
        if now >= collect_by {
            break;
        }
        let listed = match job.pods() {
            Ok(p) => p,
            Err(e) => {
                if !pods.quiet {
                    eprintln!("ingressbench: {} (retrying)", results::Causes(&e));
                }
                std::thread::sleep(POLL);
                continue;
            }
        };
        for i in 0..gens.len() {
            if let Some(feed) = &mut marks {
                if !feed.pump(&job, &mut gens, &listed) {
                    marks = None;
                }
            }
            let g = &mut gens[i];
            let Some(pod) = listed.iter().rev().find(|p| p.index == g.planned.index) else {
                continue;
            };
            g.pod = Some(pod.name.clone());
            step(&job, g, pod, interrupted, now >= end);
        }
        if gens
            .iter()
            .all(|g| g.result.is_some() || g.planned.error.is_some())
        {
            break;
        }
        // Waiting, marks are forwarded as they come; without any, it is a sleep.
        match &mut marks {
            Some(feed) => match feed.rx.recv_timeout(POLL) {
                Ok(t) => feed.forward(t, &job, &mut gens, &listed),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => marks = None,
            },
            None => std::thread::sleep(POLL),
        }
    }
    let waited = begun.elapsed().as_secs();
    let parts: Vec<Part> = gens
        .into_iter()
        .map(|mut g| {
            if g.result.is_none() && g.planned.error.is_none() {
                g.planned.error = Some(match &g.pod {
                    Some(p) => format!("pod {p} offered no result within {waited} s"),
                    None => format!("its pod did not run within {waited} s"),
                });
            }
            Part {
                planned: g.planned,
                result: g.result,
            }
        })
        .collect();
    let left = job.remove().err().map(|e| results::with_causes(&e));
    Ok(Some(JobOutcome {
        parts,
        interrupted,
        left,
    }))
}

/// Sends change mark number `seq` (Unix ns on our clock) to a part, on its own clock,
/// and notes whether it arrived in time: tried twice, and counted as missed otherwise
/// (also when the part's clock was never measured: a mark on a guessed clock would
/// put its windows off by the unknown offset).
fn forward_mark(job: &GeneratorJob, g: &mut Gen, seq: u64, unix: u128, listed: &[GeneratorPod]) {
    let m = g.planned.marks.get_or_insert_with(MarksReceived::default);
    m.sent += 1;
    if g.result.is_some() || g.planned.error.is_some() {
        return;
    }
    let running = listed.iter().any(|p| {
        p.index == g.planned.index && p.running && g.pod.as_deref() == Some(p.name.as_str())
    });
    let t = u128::try_from(i128::try_from(unix).unwrap_or(i128::MAX) + g.offset_ns).unwrap_or(0);
    let path = format!("/mark/{seq}/{t}");
    for _ in 0..2 {
        let Some(pod) = g.pod.as_deref().filter(|_| running && g.clocked) else {
            break;
        };
        if let Ok((200, body)) = job.proxy(pod, "POST", &path, Duration::from_secs(1)) {
            if let Some(arrived) = std::str::from_utf8(&body)
                .ok()
                .and_then(|b| b.trim().parse::<u128>().ok())
            {
                let late = arrived.saturating_sub(t) as f64 / 1e6;
                m.late_max_ms = m.late_max_ms.max(late);
                return;
            }
        }
    }
    m.missed += 1;
}

/// Runs `spec` as `n` generator pods of an indexed Job (the load valid as one and
/// split this many ways: the caller checks both first) until they end or `stop` is
/// set, and merges their results; `None` when interrupted before the start, with
/// nothing measured (the Job is removed).
///
/// # Errors
/// [`Error::Input`] for a load that cannot travel to a pod; [`Error::Cluster`] when
/// the cluster refuses the Job; [`Error::Merge`] when nothing can be merged.
pub fn run_pods(
    spec: &engine::LoadSpec,
    n: usize,
    pods: &Pods,
    stop: &AtomicBool,
) -> Result<Option<Merged>, Error> {
    let plan = split::split(spec, n, 0).map_err(|e| Error::Input(e.to_string()))?;
    let start_at = split::start_instant(now_unix_ns(), pods.lead);
    let job_args = job_args(spec, n, start_at, false).map_err(Error::Input)?;
    match run_job(pods, &plan, job_args, spec, start_at, stop, None)? {
        None => Ok(None),
        Some(o) => merge(
            o.parts,
            start_at,
            spec.warmup,
            o.interrupted,
            o.left.into_iter().collect(),
        )
        .map(Some),
    }
}

/// How far ahead of a change its mark goes to the pods: the pod proxy's round trip
/// (a few ms to tens of ms), retries, and one mark per pod in turn.
fn mark_lead(count: usize) -> Duration {
    Duration::from_millis(200 + 50 * count.min(16) as u64)
}

/// A scenario run's load over the pods of an indexed Job (`run --platform
/// kubernetes --generators N`).
pub struct KubernetesGenerators {
    pub count: usize,
    pub pods: Pods,
}

impl LoadRunner for KubernetesGenerators {
    fn run(&self, load: LoadRun) -> Result<(RunResult, Tally), scenario::runner::LoadError> {
        self.run_load(load).map_err(for_runner)
    }

    fn mark_lead(&self) -> Duration {
        mark_lead(self.count)
    }
}

impl KubernetesGenerators {
    fn run_load(&self, load: LoadRun) -> Result<(RunResult, Tally), Error> {
        let n = self.count;
        let spec = &split::whole(&load.spec, n);
        let plan = split::split(spec, n, 0).map_err(|e| Error::Input(e.to_string()))?;
        let start_at = split::start_instant(now_unix_ns(), self.pods.lead);
        let args = job_args(spec, n, start_at, true).map_err(Error::Input)?;
        let clock = load.clock;
        let epoch = clock.wall_epoch_ns();
        let measured_at = start_at + spec.warmup.as_nanos();
        let origin = u64::try_from(measured_at.saturating_sub(epoch)).unwrap_or(u64::MAX);
        // The runner's changes start with the measured window: only once the Job
        // exists, so that a cluster that refuses it fails the run at once.
        let on_start = load.on_start;
        let created: Box<dyn FnOnce() + Send> = Box::new(move || on_start(origin));
        let feed = MarkFeed {
            rx: load.marks,
            epoch,
            sent: 0,
        };
        let outcome = run_job(
            &self.pods,
            &plan,
            args,
            spec,
            start_at,
            &load.stop,
            Some(ForScenario {
                marks: feed,
                created,
            }),
        )?
        .ok_or_else(|| Error::Generator("interrupted before the generators started".into()))?;
        let (mut merged, tally) = merge_parts(outcome.parts, start_at, origin)?;
        merged.warnings.extend(outcome.left);
        Ok((merged, tally))
    }
}

/// One look at one part: clock probes until measured, a forwarded interrupt, and once
/// the window is over its result.
fn step(job: &GeneratorJob, g: &mut Gen, pod: &GeneratorPod, interrupted: bool, over: bool) {
    if g.result.is_some() || g.planned.error.is_some() {
        return;
    }
    if pod.running && !g.clocked {
        if let Ok(o) = probe_clock(job, &pod.name) {
            g.planned.clock_offset_ms = Some(o.offset_ns as f64 / 1e6);
            g.planned.clock_offset_error_ms = Some(o.error_ns as f64 / 1e6);
            g.offset_ns = i128::from(o.offset_ns);
            g.clocked = true;
        }
    }
    if interrupted && pod.running && !g.stopped {
        g.stopped = job
            .proxy(&pod.name, "POST", "/stop", Duration::from_secs(5))
            .is_ok();
    }
    if over || interrupted {
        if pod.running {
            // Anything but 200 (202: still draining; an error: not reachable yet or
            // any more) is asked again at the next look.
            if let Ok((200, body)) = job.proxy(&pod.name, "GET", "/result", Duration::from_secs(60))
            {
                match serde_json::from_slice::<RunResult>(&body) {
                    Ok(r) => {
                        g.result = Some(r);
                        let _ = job.proxy(&pod.name, "POST", "/done", Duration::from_secs(5));
                    }
                    Err(e) => {
                        g.planned.error = Some(format!("pod {}: its result: {e}", pod.name));
                    }
                }
            }
        }
        if g.result.is_none() {
            if let Some(how) = &pod.ended {
                g.planned.error = Some(format!("pod {} ended without a result: {how}", pod.name));
            }
        }
    }
}

/// The coordinator's side of the clock probes, through the pod proxy: [`PROBES`]
/// `GET /clock`, the shortest round trip kept. Its error bound is half that round
/// trip, which here includes the API server's hop to the pod.
fn probe_clock(job: &GeneratorJob, pod: &str) -> Result<results::clock::ClockOffset, String> {
    let mut probes = Vec::with_capacity(PROBES);
    for _ in 0..PROBES {
        let sent = now_unix_ns();
        let (status, body) = job.proxy(pod, "GET", "/clock", Duration::from_secs(2))?;
        let received = now_unix_ns();
        if status != 200 {
            return Err(format!("clock probe: status {status}"));
        }
        let remote = std::str::from_utf8(&body)
            .ok()
            .and_then(|t| t.trim().parse::<u128>().ok())
            .ok_or_else(|| "clock probe: not a time".to_string())?;
        probes.push(ClockProbe {
            sent,
            remote,
            received,
        });
    }
    estimate_offset(&probes).ok_or_else(|| "no usable clock probe".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_short_hex() {
        assert!(run_id().len() <= 11 && run_id().starts_with('g'));
    }
}
