//! Runs a scenario: for each system under test in turn, start the backends and the
//! proxy, start the load, apply the changes while it runs, then stop everything and
//! write what was measured.
//!
//! The runner talks only to a [`Platform`] (where backends live and how they
//! change) and a [`Driver`] (the proxy): it never knows which proxy it drives, where
//! it runs, which ports it listens on or how a backend is started. Every change is logged twice on the load's clock: when it was asked for
//! and when it took effect, so a latency spike can be tied to the change behind it.

mod analysis;
mod deploy;
mod measure;
mod probing;
mod scan;
mod served;
mod steps;
mod system;
#[cfg(test)]
mod tests;

use crate::plan::{Case, Plan, Role, RowSpec, SearchSpec};
use deploy::deploy;
use engine::search::SearchError;
use engine::windows::Tally;
use engine::{self, LoadSpec};
use lab::{Platform, SutError};
use measure::{close, run_system, search_system};
use results::clock::{Clock, Nanos};
use results::folder::RunFolder;
use results::search::SearchResult;
use results::sizing::SizingResult;
use results::{Fraction, RunResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Why a scenario run failed (as opposed to a system misbehaving, which is data). A
/// message never repeats its cause, which is `source()` ([`results::causes`]).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{system}")]
    Lab {
        system: String,
        #[source]
        source: SutError,
    },
    /// What could not be set up around a system (its route probe's address, a
    /// network lab asked to send its load from elsewhere): the message says what to
    /// change.
    #[error("{0}")]
    Setup(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The system's route set did not come up (`routes:`).
    #[error("{system}: routes")]
    Routes {
        system: String,
        #[source]
        source: SutError,
    },
    /// The route set's probe thread panicked.
    #[error("{system}: routes: the probe failed")]
    RouteProbe { system: String },
    /// A search could not run (a refused setting, a load that could not start).
    #[error("{system}: search")]
    Search {
        system: String,
        /// Boxed: a search error carries what the search had found so far.
        #[source]
        source: Box<SearchError>,
    },
    /// The load's settings, refused by the engine once the target is known; worded
    /// with the scenario's keys.
    #[error("{}", .0.scenario())]
    Spec(engine::spec::SpecError),
    /// A run's repetitions could not be combined.
    #[error("{name}: {why}")]
    Repeat { name: String, why: String },
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// Why a system's load could not run at all (generators that fail are named in the
/// merged result instead, as data).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// This process's engine.
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    /// The generators elsewhere ([`LoadRunner`]): the coordinator's own error, with
    /// its causes.
    #[error(transparent)]
    Elsewhere(Box<dyn std::error::Error + Send + std::marker::Sync>),
    #[error("the load ended before its window began")]
    NoWindow,
    #[error("the load thread panicked")]
    Panicked,
}

impl From<String> for LoadError {
    /// A coordinator's refusal that is only a message (a generator's last line).
    fn from(msg: String) -> Self {
        LoadError::Elsewhere(msg.into())
    }
}

/// Runs a system's load elsewhere than on this process's engine: over several
/// generator processes (`run --generators N`). The binary provides it (it owns
/// processes and the merge of their results); the runner hands over the engine's
/// settings and each change as it is marked, and gets back one result and the
/// requests counted per change window.
pub trait LoadRunner: Send + std::marker::Sync {
    /// # Errors
    /// Why the load could not run at all (generators that fail are named in the
    /// merged result instead).
    fn run(&self, load: LoadRun) -> Result<(RunResult, Tally), LoadError>;

    /// How far ahead of each change its mark is sent: a generator reached through a
    /// network (a pod behind the API server) must have it before the change's time,
    /// or the requests in between are counted in the window before. The runner marks
    /// each change at `now + lead`, forwards it, and makes the change only then.
    fn mark_lead(&self) -> Duration {
        Duration::ZERO
    }
}

/// What a [`LoadRunner`] gets for one system.
pub struct LoadRun {
    /// The engine's settings, as the runner resolved them (`cpus`: the generator's
    /// CPU set from `placement`).
    pub spec: LoadSpec,
    /// The run's clock: the event log's times, and what `on_start` and the windows'
    /// marker times are on.
    pub clock: Clock,
    /// Each change that opens a window, its clock time, in order, as it is marked.
    pub marks: mpsc::Receiver<Nanos>,
    pub stop: Arc<AtomicBool>,
    /// Called with the clock time at which the measured window starts, once fixed.
    pub on_start: Box<dyn FnOnce(Nanos) + Send>,
}

/// A live view of each system's load (the binary's metrics endpoint): told which
/// system runs, each change as it is made, and each second of the load as the engine
/// completes it. Called from the load's thread and the runner's, once a second or a
/// change: never per request.
pub trait Watch: Send + std::marker::Sync {
    /// A system's load is about to start: `name` as its results folder is named,
    /// the URL it is sent to and its rate (`None`: a closed loop).
    fn system(&self, name: &str, target: &str, rate: Option<f64>);
    /// The `index`th change (from 1) of the measured window is being made: `change`
    /// as the event log says it (`scale 2 -> 4`, `route v2`, `reload`).
    fn step(&self, index: usize, change: &str);
    /// A second of the load is complete.
    fn second(&self, entry: &results::TimelineEntry);
}

/// How to run a scenario.
pub struct RunOptions {
    /// Results folder (created).
    pub out_dir: PathBuf,
    /// The ingressbench binary, for the built-in backend.
    pub exe: PathBuf,
    /// Set by a signal handler: finish the current system early, write, stop.
    pub stop: Arc<AtomicBool>,
    /// Called with a line of progress now and then.
    pub progress: Box<dyn FnMut(&str)>,
    /// Called with each system's result once it is on disk: the binary renders the
    /// line (the runner knows no report formatting).
    pub system_done: Box<dyn FnMut(&RunResult)>,
    /// Where the load runs instead of this process's engine (`None`: here).
    pub load: Option<Arc<dyn LoadRunner>>,
    /// Who watches the load live (`--metrics-listen`). The seconds come from this
    /// process's engine only: a load run elsewhere ([`LoadRunner`]) shows its
    /// systems and changes, not its seconds.
    pub watch: Option<Arc<dyn Watch>>,
    /// Told each warning no result will hold: what a system left behind when its
    /// run failed (a namespace not deleted). A result's own warnings are in it
    /// ([`RunResult::warnings`]).
    pub warn: Arc<dyn Fn(&str) + Send + std::marker::Sync>,
    /// Where each case is deployed instead of the platform it names (`None`: its
    /// own): the tests' fake platform ([`crate::testing`]).
    pub platform: Option<PlatformFor>,
}

/// Makes the platform a case deploys on, in place of its own.
pub type PlatformFor = Box<dyn Fn(&Case) -> Result<Box<dyn Platform>, SutError>>;

/// What a scenario run produced.
pub struct RunOutput {
    pub results: Vec<RunResult>,
    pub partial: bool,
}

/// The error of a results folder that cannot be written: `what` was being written.
fn io(what: &str) -> impl FnOnce(std::io::Error) -> RunError {
    let what = what.to_string();
    move |source| RunError::Io { what, source }
}

/// Runs the plan's cases in order and writes its results folder: the scenario, and
/// per case `result.json` and `events.json` (a search's `search.json`, a sizing
/// scan's `sizing.json`), each as soon as it is measured. The summary is the
/// caller's to render.
///
/// # Errors
/// [`RunError`] when a system cannot be set up; cases already run keep their
/// results on disk.
pub fn run(plan: &Plan, mut opts: RunOptions) -> Result<RunOutput, RunError> {
    let folder = RunFolder::new(&opts.out_dir);
    folder
        .write_scenario(&plan.text, &plan.effective)
        .map_err(io("write the scenario into the results folder"))?;
    let mut done = Done::default();
    for case in &plan.cases {
        if opts.stop.load(Ordering::Relaxed) {
            done.partial = true;
            done.cut_short(case).write(&folder)?;
            break;
        }
        let (output, stopped) = match &case.role {
            Role::Run { rep, of } => done.run(case, (*rep, *of), &mut opts)?,
            Role::Search(search) => done.search(case, search, &mut opts)?,
            Role::Fraction { fraction } => done.fraction(case, *fraction, &mut opts)?,
            Role::SizingRow(row) => done.row(case, row, &mut opts)?,
        };
        output.write(&folder)?;
        if stopped {
            done.partial = true;
            break;
        }
    }
    Ok(done.finish(&mut opts))
}

/// What a case leaves in the results folder, written as soon as it is measured.
enum Output {
    Nothing,
    /// A run's `result.json`, under its name.
    Result(String, Box<RunResult>),
    /// A system's `search.json`.
    Search(String, SearchResult),
    /// A system's `sizing.json`, rows so far.
    Sizing(SizingResult),
}

impl Output {
    fn write(&self, folder: &RunFolder) -> Result<(), RunError> {
        match self {
            Output::Nothing => Ok(()),
            Output::Result(name, r) => folder
                .write_result(name, r)
                .map_err(io(&format!("write {name}'s result"))),
            Output::Search(name, s) => folder
                .write_search(name, s)
                .map_err(io(&format!("write {name}'s search"))),
            Output::Sizing(s) => folder
                .write_sizing(s)
                .map_err(io(&format!("write {}'s sizing scan", s.system))),
        }
    }
}

/// What the cases run so far produced: each run's repetitions, each system's
/// maximum and its sizing scan.
#[derive(Default)]
struct Done {
    /// Each run's name, its repetitions so far and them combined, in the order they
    /// first ran.
    runs: Vec<(String, Vec<RunResult>, Option<RunResult>)>,
    /// Repetitions of each run: its combined result is told to `system_done` after
    /// each one when 1, else at the end.
    repeat: usize,
    /// The results of runs at fractions of a maximum.
    fractions: Vec<RunResult>,
    /// Each system's maximum, once its search is over (`None`: none held).
    maxima: BTreeMap<String, Option<f64>>,
    /// The sizing scan in progress.
    scan: Option<SizingResult>,
    /// What the probes' baseline system answered, once it ran.
    probe_baseline: Option<results::probes::ProbeRun>,
    partial: bool,
}

impl Done {
    /// Repetition `rep` of `of` of a run at the load's rate: its result holds all of
    /// its repetitions so far, so an interrupt loses nothing measured. Says whether
    /// the run was interrupted.
    fn run(
        &mut self,
        case: &Case,
        (rep, of): (usize, usize),
        opts: &mut RunOptions,
    ) -> Result<(Output, bool), RunError> {
        let label = case.name.as_str();
        let which = if of > 1 {
            format!(" (run {rep}/{of})")
        } else {
            String::new()
        };
        (opts.progress)(&format!("{label}: starting{which}"));
        let r = run_system(case, opts, None, self.probe_baseline.as_ref())?;
        if self.probe_baseline.is_none() {
            if let (Some(p), Some(run)) =
                (&case.probes, r.lab.as_ref().and_then(|l| l.probes.as_ref()))
            {
                if case.system == p.baseline {
                    self.probe_baseline = Some(run.clone());
                }
            }
        }
        let stopped = r.partial;
        self.repeat = of;
        let i = match self.runs.iter().position(|(n, ..)| n == label) {
            Some(i) => i,
            None => {
                self.runs.push((label.to_string(), Vec::new(), None));
                self.runs.len() - 1
            }
        };
        let (_, reps, latest) = &mut self.runs[i];
        reps.push(r);
        let all = results::repeat::combine(reps.clone(), of).map_err(|why| RunError::Repeat {
            name: label.to_string(),
            why,
        })?;
        if of == 1 {
            (opts.system_done)(&all);
        }
        *latest = Some(all.clone());
        Ok((Output::Result(label.to_string(), Box::new(all)), stopped))
    }

    /// The search of a system's maximum. Says whether it was interrupted.
    fn search(
        &mut self,
        case: &Case,
        search: &SearchSpec,
        opts: &mut RunOptions,
    ) -> Result<(Output, bool), RunError> {
        let name = case.name.as_str();
        (opts.progress)(&format!("{name}: starting"));
        let found = search_system(case, search, opts)?;
        if found.max_rate.is_none() && !found.partial {
            (opts.progress)(&format!(
                "{name}: no rate held the search's bounds: no runs at fractions of a maximum"
            ));
        }
        self.maxima.insert(case.system.clone(), found.max_rate);
        let stopped = found.partial;
        Ok((Output::Search(name.to_string(), found), stopped))
    }

    /// A run at `fraction` of its system's maximum; none when its search found none.
    fn fraction(
        &mut self,
        case: &Case,
        fraction: f64,
        opts: &mut RunOptions,
    ) -> Result<(Output, bool), RunError> {
        let Some(&Some(max)) = self.maxima.get(&case.system) else {
            return Ok((Output::Nothing, false));
        };
        let label = case.name.as_str();
        (opts.progress)(&format!(
            "{label}: {:.0} req/s ({:.0} % of {max:.0})",
            fraction * max,
            fraction * 100.0
        ));
        let at = Fraction {
            of: case.system.clone(),
            fraction,
            max_rate: max,
        };
        let r = run_system(case, opts, Some(at), None)?;
        self.partial |= r.partial;
        (opts.system_done)(&r);
        self.fractions.push(r.clone());
        Ok((Output::Result(label.to_string(), Box::new(r)), false))
    }

    /// A row of a system's sizing scan; its output is the scan, rows so far.
    fn row(
        &mut self,
        case: &Case,
        row: &RowSpec,
        opts: &mut RunOptions,
    ) -> Result<(Output, bool), RunError> {
        if self.scan.as_ref().is_some_and(|s| s.system != case.system) {
            self.scan = None;
        }
        let out = match &mut self.scan {
            Some(out) => out,
            None => {
                (opts.progress)(&format!("{}: starting", case.system));
                self.scan.insert(scan::result(case, row))
            }
        };
        let stopped = scan::row(case, row, opts, out)?;
        Ok((Output::Sizing(out.clone()), stopped))
    }

    /// The run stops before `next`: a sizing scan whose rows it would have
    /// continued is written as cut short (one whose rows are all done is not).
    fn cut_short(&mut self, next: &Case) -> Output {
        match (&next.role, self.scan.as_mut()) {
            (Role::SizingRow(_), Some(scan)) if scan.system == next.system && !scan.partial => {
                scan.partial = true;
                Output::Sizing(scan.clone())
            }
            _ => Output::Nothing,
        }
    }

    /// Every result, each run's repetitions combined, told to `system_done` if not
    /// yet.
    fn finish(mut self, opts: &mut RunOptions) -> RunOutput {
        let mut results = Vec::new();
        for (_, _, all) in self.runs {
            let Some(all) = all else { continue };
            self.partial |= all.partial;
            if self.repeat > 1 {
                (opts.system_done)(&all);
            }
            results.push(all);
        }
        results.extend(self.fractions);
        RunOutput {
            results,
            partial: self.partial,
        }
    }
}

/// Where a run's results go by default: `results/<scenario>-<UTC time>`.
pub fn default_out_dir(scenario: &str) -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let stamp = results::time::rfc3339(now)
        .replace([':', '-'], "")
        .replace('T', "-")
        .chars()
        .take(15)
        .collect::<String>();
    Path::new("results").join(format!("{scenario}-{stamp}"))
}

/// What `probe` found for one system: the system's name, and its probes' answers
/// and differences.
pub type Probed = (String, results::probes::ProbeRun);

/// The behaviour probes alone (`ingressbench probe`): each system of the plan
/// deployed in turn, the baseline first, probed once, and stopped; no load. The
/// plan's cases must carry probes ([`crate::plan::ProbesPlan`]).
///
/// # Errors
/// [`RunError`] when a system cannot be set up; the systems probed before it are
/// lost with it only in that they are not returned (nothing is written).
pub fn probe(plan: &Plan, mut opts: RunOptions) -> Result<Vec<Probed>, RunError> {
    let mut baseline: Option<results::probes::ProbeRun> = None;
    let mut out: Vec<Probed> = Vec::new();
    // The baseline's case first, whatever order the plan runs its cases in.
    let is_base = |c: &&Case| c.probes.as_ref().is_some_and(|p| p.baseline == c.system);
    let cases = plan
        .cases
        .iter()
        .filter(is_base)
        .chain(plan.cases.iter().filter(|c| !is_base(c)));
    for case in cases {
        let Some(p) = &case.probes else { continue };
        if out.iter().any(|(name, _)| *name == case.system) {
            continue;
        }
        if opts.stop.load(Ordering::Relaxed) {
            break;
        }
        let name = case.system.as_str();
        (opts.progress)(&format!("{name}: probing"));
        let deployed = deploy(case, &opts)?;
        let run = probing::Prober::new(&deployed, case, p)
            .map(|mut prober| probing::before(&mut prober, case, p, baseline.as_ref()));
        close(deployed, name, &mut opts.progress);
        let run = run.map_err(|why| RunError::Setup(format!("{name}: probes: {why}")))?;
        if case.system == p.baseline {
            baseline = Some(run.clone());
        }
        out.push((case.system.clone(), run));
    }
    Ok(out)
}
