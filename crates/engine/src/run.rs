//! Running a [`Plan`]: one worker thread per share of the connections, a shared start
//! of the schedule, and this thread merging their seconds as they come into the
//! [`Outcome`].

use crate::outcome::{cpu_list, Outcome, SecondSummary};
use crate::resolve::Plan;
use crate::stats::{Interval, Totals};
use crate::{machine, windows, worker, EngineError};
use results::clock::{Clock, Nanos};
use results::histogram::serialize_v2;
use results::TimelineEntry;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};

/// Runs the plan to its end (or until `stop` is set) and merges the results.
/// `on_second` sees each second as soon as it is complete (live progress).
///
/// # Errors
/// [`EngineError`] when threads cannot be started.
pub fn run(
    plan: &Plan,
    stop: Arc<AtomicBool>,
    on_second: impl FnMut(&TimelineEntry),
) -> Result<Outcome, EngineError> {
    run_with(plan, Clock::start(), stop, |_| {}, on_second)
}

/// [`run`] on a clock the caller shares (so events it records line up with the
/// load's timeline); `on_start` gets the clock time at which the measured window
/// starts, as soon as it is fixed.
///
/// # Errors
/// [`EngineError`] when threads cannot be started.
pub fn run_with(
    plan: &Plan,
    clock: Clock,
    stop: Arc<AtomicBool>,
    on_start: impl FnOnce(Nanos),
    on_second: impl FnMut(&TimelineEntry),
) -> Result<Outcome, EngineError> {
    run_marked(plan, clock, stop, None, on_start, on_second)
}

/// [`run_with`], counting requests by the change windows the caller marks on `marks`
/// while the load runs (the counts are in the totals: [`Totals::windows`]).
///
/// # Errors
/// [`EngineError`] when threads cannot be started.
pub fn run_marked(
    plan: &Plan,
    clock: Clock,
    stop: Arc<AtomicBool>,
    marks: Option<Arc<windows::Marks>>,
    on_start: impl FnOnce(Nanos),
    mut on_second: impl FnMut(&TimelineEntry),
) -> Result<Outcome, EngineError> {
    raise_open_files_limit(plan.connections);
    let shared = Arc::new(shared_state(plan, clock, stop.clone(), marks));
    let (workers, rx) = spawn_workers(plan, &shared)?;
    let started = start_schedule(plan, &shared);
    on_start(started.measure_start);
    let collected = collect(plan, &shared, workers, rx, &mut on_second)?;
    Ok(outcome(plan, &shared, &stop, started, collected))
}

/// What every worker reads: the plan in the workers' units, the start gate and the
/// places they report to.
fn shared_state(
    plan: &Plan,
    clock: Clock,
    stop: Arc<AtomicBool>,
    marks: Option<Arc<windows::Marks>>,
) -> worker::Shared {
    worker::Shared {
        clock,
        addr: plan.addr,
        mix: plan.mix.clone(),
        tls: plan.tls.clone(),
        timeout_ns: plan.timeout.as_nanos() as Nanos,
        connect_timeout_ns: plan.connect_timeout.as_nanos() as Nanos,
        send_window_ns: plan.send_window.as_nanos() as Nanos,
        new_connection: plan.new_connection,
        backend_header: plan.backend_header.clone(),
        markers: plan.markers.clone().into_boxed_slice(),
        model: plan.model,
        rate: plan.rate,
        workers: plan.threads,
        connections: plan.connections,
        warmup_ns: plan.warmup.as_nanos() as Nanos,
        duration_ns: plan.duration.as_nanos() as Nanos,
        stop,
        gate: Barrier::new(plan.threads + 1),
        start: AtomicU64::new(0),
        stopped_at: AtomicU64::new(0),
        sample: plan.sample,
        cpus: plan.cpus.clone(),
        pinned: std::sync::Mutex::new(worker::Pinned::default()),
        priority_raised: AtomicBool::new(false),
        answered: AtomicBool::new(false),
        failure: std::sync::Mutex::new(None),
        marks,
        profile: plan
            .profile
            .as_ref()
            .map(|p| Arc::new(p.with_warmup(plan.warmup))),
        step_bounds: plan.profile.as_ref().map_or_else(Vec::new, |p| {
            p.report_steps()
                .iter()
                .map(|s| {
                    let ns = |t: f64| (t * 1e9).round() as Nanos;
                    (ns(s.start), ns(s.start + s.secs))
                })
                .collect()
        }),
        slice: plan.slice.clone(),
        netns: plan.netns.clone(),
        h2: plan.h2.clone(),
        spec: plan.spec.clone(),
    }
}

/// The worker threads, each with its way back for spent intervals.
struct Workers {
    handles: Vec<std::thread::JoinHandle<()>>,
    /// Per worker, the way back for its spent intervals (`SecondMerger`).
    recycle: Vec<mpsc::Sender<Box<Interval>>>,
}

/// Starts one worker per thread of the plan, each with its share of the connections.
fn spawn_workers(
    plan: &Plan,
    shared: &Arc<worker::Shared>,
) -> Result<(Workers, mpsc::Receiver<worker::Msg>), EngineError> {
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    let mut recycle = Vec::new();
    let mut offset = 0;
    for id in 0..plan.threads {
        // Spread connections as evenly as possible: the first threads take one more.
        let n = plan.connections / plan.threads + usize::from(id < plan.connections % plan.threads);
        let (s, t) = (shared.clone(), tx.clone());
        let (back, recycled) = mpsc::channel();
        recycle.push(back);
        let h = std::thread::Builder::new()
            .name(format!("ib-worker-{id}"))
            .spawn(move || worker::run(id, offset, n, s, t, recycled))
            .map_err(EngineError::Spawn)?;
        handles.push(h);
        offset += n;
    }
    Ok((Workers { handles, recycle }, rx))
}

/// When the schedule started, and what was measured of the machine from then on.
struct Started {
    start: Nanos,
    measure_start: Nanos,
    start_offset_ns: Option<u64>,
    cpu0: f64,
    allowed: Vec<usize>,
    watch: machine::Watch,
}

/// Waits until every worker has opened its connections, then starts the schedule
/// for all of them at once.
fn start_schedule(plan: &Plan, shared: &worker::Shared) -> Started {
    let clock = shared.clock;
    // Every worker has opened its connections: start the schedule together, a
    // moment from now so no worker starts late.
    shared.gate.wait();
    let (start, start_offset_ns) = match &plan.slice {
        None => (clock.now() + 1_000_000, None),
        Some(s) => {
            let (start, late) =
                schedule_start(s.start_at_unix_ns, clock.wall_epoch_ns(), clock.now());
            (start, Some(late))
        }
    };
    shared.start.store(start, Ordering::Release);
    let cpu0 = process_cpu_s();
    // The CPUs the generator's threads may run on unless pinned (this thread's,
    // which they inherit), and the machine watched from here to the end.
    let allowed = machine::allowed_cpus();
    // The stall probe only where a schedule can be late (open loop): at `--max` a
    // real-time wake-up every millisecond on the generator's core cost the server
    // its batching (8-11 % fewer requests a second through nginx, docs/benchmarks.md),
    // and a closed loop has no lag for the machine to explain.
    let watch = machine::Watch::start(clock, plan.rate.is_some());
    shared.gate.wait();
    Started {
        start,
        measure_start: start + shared.warmup_ns,
        start_offset_ns,
        cpu0,
        allowed,
        watch,
    }
}

/// What the workers reported, merged.
struct Collected {
    totals: Totals,
    seconds: Vec<SecondSummary>,
}

/// Merges the workers' seconds as they come (each one handed to `on_second` when
/// complete) and their totals at the end, until every worker has finished.
///
/// # Errors
/// [`EngineError::Worker`] when a worker failed.
fn collect(
    plan: &Plan,
    shared: &worker::Shared,
    workers: Workers,
    rx: mpsc::Receiver<worker::Msg>,
    on_second: &mut impl FnMut(&TimelineEntry),
) -> Result<Collected, EngineError> {
    let mut totals = Totals::new();
    let mut merger = SecondMerger::new(plan.threads, workers.recycle);
    let mut seconds = Vec::new();
    // This thread wakes once a second to merge and summarise the workers' seconds
    // (a millisecond or two of work): at its default priority it would take the CPU
    // from a worker sharing it, whose sends would be that much late. Lowered for the
    // run, as far as the system allows, then restored.
    let _lowered = LoweredPriority::new();
    for msg in rx {
        match msg {
            worker::Msg::Interval(w, iv) => merger.add(w, iv),
            worker::Msg::Done(w, t) => {
                totals.merge(&t);
                merger.done(w);
            }
        }
        for s in merger.complete() {
            on_second(&s.entry);
            seconds.push(s);
        }
    }
    for h in workers.handles {
        let _ = h.join();
    }
    if let Some(f) = shared.failure.lock().ok().and_then(|mut f| f.take()) {
        return Err(EngineError::Worker(f));
    }
    for s in merger.complete() {
        on_second(&s.entry);
        seconds.push(s);
    }
    Ok(Collected { totals, seconds })
}

/// The CPUs the workers ran on, and a warning when that is not what was planned.
fn pinning(plan: &Plan, shared: &worker::Shared) -> (Vec<usize>, Vec<String>) {
    let pinned = shared
        .pinned
        .lock()
        .map(|mut p| std::mem::take(&mut *p))
        .unwrap_or_default();
    let cpus_applied: Vec<usize> = pinned.applied.into_iter().collect();
    let mut planned = plan.cpus.clone();
    planned.sort_unstable();
    planned.dedup();
    let warnings = match pinned.refused {
        Some(why) => vec![format!(
            "the generator's threads could not be pinned to CPUs {}: {why}; they ran on CPUs {}",
            cpu_list(&plan.cpus),
            cpu_list(&cpus_applied)
        )],
        // The kernel keeps only the CPUs it offers the process of a set it accepts.
        None if !planned.is_empty() && cpus_applied != planned => vec![format!(
            "the generator's threads ran on CPUs {} of the {} planned (the others are not offered to this process)",
            cpu_list(&cpus_applied),
            cpu_list(&plan.cpus)
        )],
        None => Vec::new(),
    };
    (cpus_applied, warnings)
}

/// The run's outcome: what was collected, the window as actually run, the CPU it
/// took and what the machine did meanwhile.
fn outcome(
    plan: &Plan,
    shared: &worker::Shared,
    stop: &AtomicBool,
    started: Started,
    collected: Collected,
) -> Outcome {
    let clock = shared.clock;
    let Collected { totals, seconds } = collected;
    let measure_start = started.measure_start;
    let stopped = clock.now();
    let planned_end = measure_start + shared.duration_ns;
    let (cpus_applied, warnings) = pinning(plan, shared);
    // An interrupt during the drain after the window leaves requests unsent or
    // unfinished too: the run is partial although its window was whole.
    let partial = totals.interrupted || (stop.load(Ordering::Relaxed) && stopped < planned_end);
    let measured_ns = if partial {
        // Interrupted: the window ended when sending stopped (the drain excluded).
        let at = shared.stopped_at.load(Ordering::Acquire);
        at.max(measure_start) - measure_start
    } else {
        shared.duration_ns
    };
    let cpu_s = process_cpu_s() - started.cpu0;
    let ran_s = clock.now().saturating_sub(started.start) as f64 / 1e9;
    let machine = started.watch.finish(
        if cpus_applied.is_empty() {
            &started.allowed
        } else {
            &cpus_applied
        },
        cpu_s,
        ran_s,
    );
    Outcome {
        totals,
        seconds,
        partial,
        started_at_unix_ns: clock.wall_epoch_ns() + measure_start as u128,
        duration_s: measured_ns as f64 / 1e9,
        cpu_s,
        busy: cpu_s / (ran_s * plan.threads as f64).max(1e-9),
        machine,
        measure_start,
        sample: plan.sample,
        priority_raised: shared.priority_raised.load(Ordering::Relaxed),
        cpus: plan.cpus.clone(),
        cpus_applied,
        warnings,
        slice: plan.slice.clone(),
        start_offset_ns: started.start_offset_ns,
        profile: plan.profile.clone(),
        mix: plan.mix.reported.then(|| plan.mix.clone()),
    }
}

/// When a generator of a split run starts its schedule, on its own clock, and how
/// late that is: at the shared instant (Unix ns, converted with the clock's wall-time
/// anchor) if it is still ahead, else a moment from `now`. A late generator does not
/// send the requests it missed in a burst to catch up: its schedule starts late, and
/// the merge names it.
fn schedule_start(at_unix_ns: u128, wall_epoch_ns: u128, now: Nanos) -> (Nanos, u64) {
    let at = at_unix_ns as i128 - wall_epoch_ns as i128;
    if at >= now as i128 {
        (at.min(Nanos::MAX as i128) as Nanos, 0)
    } else {
        let start = now + 1_000_000;
        (start, (start as i128 - at).min(u64::MAX as i128) as u64)
    }
}

/// Merges workers' intervals by second and releases each second once every worker
/// has moved past it. Each interval, once merged or summarised, goes back to the
/// worker it came from, cleared, for a later second: a worker allocates its
/// intervals once, not once a second.
struct SecondMerger {
    /// Per worker: every second before this one has been reported.
    progress: Vec<u64>,
    /// By second: the first worker's interval, the others merged into it, and that
    /// worker.
    pending: BTreeMap<u64, (usize, Box<Interval>)>,
    /// Next second to release.
    next: u64,
    /// Per worker, where its cleared intervals go (a worker that ended has dropped
    /// its end: the interval is freed).
    recycle: Vec<mpsc::Sender<Box<Interval>>>,
}

impl SecondMerger {
    fn new(workers: usize, recycle: Vec<mpsc::Sender<Box<Interval>>>) -> Self {
        SecondMerger {
            progress: vec![0; workers],
            pending: BTreeMap::new(),
            next: 0,
            recycle,
        }
    }

    fn add(&mut self, w: usize, iv: Box<Interval>) {
        self.progress[w] = self.progress[w].max(iv.second + 1);
        match self.pending.get_mut(&iv.second) {
            Some((_, p)) => {
                p.merge(&iv);
                self.give_back(w, iv);
            }
            None => {
                self.pending.insert(iv.second, (w, iv));
            }
        }
    }

    fn give_back(&self, w: usize, mut iv: Box<Interval>) {
        if let Some(back) = self.recycle.get(w) {
            iv.clear();
            let _ = back.send(iv);
        }
    }

    fn done(&mut self, w: usize) {
        self.progress[w] = u64::MAX;
    }

    /// Seconds every worker has reported, in order; empty seconds in between are
    /// released as zeros so a stall shows on the timeline.
    fn complete(&mut self) -> Vec<SecondSummary> {
        let upto = self.progress.iter().copied().min().unwrap_or(0);
        let last = if upto == u64::MAX {
            self.pending.keys().next_back().map_or(self.next, |k| k + 1)
        } else {
            upto
        };
        let mut out = Vec::new();
        while self.next < last {
            let s = self.next;
            let iv = self.pending.remove(&s);
            out.push(summarize_second(s, iv.as_ref().map(|(_, iv)| &**iv)));
            if let Some((w, iv)) = iv {
                self.give_back(w, iv);
            }
            self.next += 1;
        }
        out
    }
}

/// The calling thread at the lowest priority (nice 19) until dropped, then back at
/// its own. Setting it is best effort: a system that refuses leaves it as it was.
struct LoweredPriority {
    was: Option<i32>,
}

impl LoweredPriority {
    fn new() -> Self {
        let me = Some(rustix::thread::gettid());
        let was = rustix::process::getpriority_process(me).ok();
        let was = was.filter(|_| rustix::process::setpriority_process(me, 19).is_ok());
        LoweredPriority { was }
    }
}

impl Drop for LoweredPriority {
    fn drop(&mut self) {
        if let Some(was) = self.was {
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), was);
        }
    }
}

fn summarize_second(second: u64, iv: Option<&Interval>) -> SecondSummary {
    let mut entry = TimelineEntry {
        t: second,
        ..Default::default()
    };
    let mut histogram_v2 = Vec::new();
    if let Some(iv) = iv {
        entry.sent = iv.sent;
        entry.completed = iv.completed;
        entry.errors = iv.errors.iter().sum();
        for k in results::ErrorKind::ALL {
            let n = iv.errors[k.index()];
            if n > 0 {
                entry.errors_by_kind.insert(k.name().to_string(), n);
            }
        }
        if !iv.corrected.is_empty() {
            entry.p50 = us_to_ms(iv.corrected.value_at_quantile(0.5));
            entry.p99 = us_to_ms(iv.corrected.value_at_quantile(0.99));
            entry.max = us_to_ms(iv.corrected.max());
        }
        entry.lag_max_ms = iv.lag_max_ns as f64 / 1e6;
        entry.backends = iv.backends.to_map();
        histogram_v2 = serialize_v2(&iv.corrected);
    }
    SecondSummary {
        entry,
        histogram_v2,
    }
}

fn us_to_ms(v: u64) -> f64 {
    v as f64 / 1000.0
}

/// CPU time (user + system) this process has used, in seconds, from /proc.
pub fn process_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces) start at ')'.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the ')'.
    (num(11) + num(12)) / ticks
}

/// Raises the soft open-files limit to the hard limit when the run needs more
/// descriptors than the soft limit allows (10,000 connections on a default 1024).
fn raise_open_files_limit(connections: usize) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let lim = getrlimit(Resource::Nofile);
    let want = connections as u64 + 256;
    if lim.current.is_some_and(|c| c < want) {
        let new = rustix::process::Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        let _ = setrlimit(Resource::Nofile, new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::cpu_list;
    use crate::tests::spec;
    use std::time::Duration;

    #[test]
    fn merger_releases_seconds_in_order_with_gaps() {
        let (back0, recycled0) = mpsc::channel();
        let (back1, recycled1) = mpsc::channel();
        let mut m = SecondMerger::new(2, vec![back0, back1]);
        let iv = |s: u64, sent: u64| {
            let mut i = Box::new(Interval::empty(s));
            i.sent = sent;
            i.corrected.record(100).unwrap();
            i
        };
        m.add(0, iv(0, 5));
        assert!(
            m.complete().is_empty(),
            "worker 1 has not reported second 0"
        );
        m.add(1, iv(0, 7));
        // Merged into worker 0's: worker 1's goes back to worker 1, cleared.
        let spent = recycled1
            .try_recv()
            .expect("worker 1's interval comes back");
        assert!(spent.is_empty() && spent.corrected.is_empty());
        assert!(recycled0.try_recv().is_err());
        let out = m.complete();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].entry.sent, 12);
        // Summarised: worker 0's goes back to worker 0, cleared.
        let spent = recycled0
            .try_recv()
            .expect("worker 0's interval comes back");
        assert!(spent.is_empty() && spent.corrected.is_empty());
        // Worker 0 slept through seconds 1 and 2.
        m.add(0, iv(3, 1));
        m.add(1, iv(1, 2));
        m.add(1, iv(2, 2));
        m.add(1, iv(3, 2));
        let out = m.complete();
        let ts: Vec<u64> = out.iter().map(|s| s.entry.t).collect();
        assert_eq!(ts, vec![1, 2, 3]);
        assert_eq!(out[2].entry.sent, 3);
        m.done(0);
        m.done(1);
        assert!(m.complete().is_empty());
    }

    #[test]
    fn a_split_run_starts_at_the_shared_instant_or_says_how_late() {
        // The clock's anchor is at Unix time 10 s; its reading now is 1 s.
        let wall = 10_000_000_000u128;
        let now = 1_000_000_000;
        // The instant is 2 s ahead: start then, on time.
        assert_eq!(
            schedule_start(13_000_000_000, wall, now),
            (3_000_000_000, 0)
        );
        // Exactly now is on time too.
        assert_eq!(schedule_start(11_000_000_000, wall, now), (now, 0));
        // 250 ms past: start a moment from now, 251 ms late.
        assert_eq!(
            schedule_start(10_750_000_000, wall, now),
            (now + 1_000_000, 251_000_000)
        );
        // Before the clock's anchor altogether.
        assert_eq!(schedule_start(0, wall, now).1, 11_001_000_000);
    }

    /// The CPUs the calling thread may run on, as the kernel says.
    fn allowed_cpus() -> Vec<usize> {
        use rustix::thread::CpuSet;
        let set = rustix::thread::sched_getaffinity(None).unwrap();
        (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
    }

    /// A pin the kernel refuses (a CPU this machine does not have) does not stop the
    /// load, and is not hidden either: the result keeps the planned CPUs beside the
    /// ones the workers ran on, and a warning says why.
    #[test]
    fn a_refused_cpu_pin_is_recorded_beside_the_planned_cpus() {
        let allowed = allowed_cpus();
        let absent = rustix::thread::CpuSet::MAX_CPU - 1;
        assert!(!allowed.contains(&absent), "this machine has CPU {absent}");
        // Nothing listens on port 1: the load runs and fails, which is data.
        let mut s = spec("http://127.0.0.1:1/");
        s.duration = Duration::from_millis(200);
        s.cpus = vec![absent];
        let (plan, config) = s.resolve().unwrap();
        let o = run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
        let r = o.to_result(&s.url, config);
        assert_eq!(r.generator.cpus, absent.to_string());
        assert_eq!(r.generator.cpus_applied, cpu_list(&allowed));
        assert_eq!(
            r.warnings,
            [format!(
                "the generator's threads could not be pinned to CPUs {absent}: Invalid argument (os error 22); they ran on CPUs {}",
                cpu_list(&allowed)
            )]
        );
        assert_eq!(allowed_cpus(), allowed, "only the workers were pinned");

        // A pin that holds in part: the kernel keeps the CPU it has.
        s.cpus = vec![allowed[0], absent];
        let (plan, config) = s.resolve().unwrap();
        let r = run(&plan, Arc::new(AtomicBool::new(false)), |_| {})
            .unwrap()
            .to_result(&s.url, config);
        assert_eq!(r.generator.cpus_applied, allowed[0].to_string());
        assert_eq!(
            r.warnings,
            [format!(
                "the generator's threads ran on CPUs {} of the {},{absent} planned (the others are not offered to this process)",
                allowed[0], allowed[0]
            )]
        );

        // A pin that holds: the same CPUs twice, and nothing to warn of.
        s.cpus = vec![allowed[0]];
        let (plan, config) = s.resolve().unwrap();
        let o = run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
        let r = o.to_result(&s.url, config);
        assert_eq!(r.generator.cpus_applied, r.generator.cpus);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        // No pin asked for: none recorded, as in files written before.
        s.cpus = Vec::new();
        let (plan, config) = s.resolve().unwrap();
        let r = run(&plan, Arc::new(AtomicBool::new(false)), |_| {})
            .unwrap()
            .to_result(&s.url, config);
        assert!(r.generator.cpus_applied.is_empty() && r.warnings.is_empty());
    }
}
