//! `run --generators N`: a scenario's load over N processes of this program, while
//! the runner changes the system under test.
//!
//! The same children as `load --generators` (same split, shared start instant, clock
//! probes, bounded wait and merge), with two additions a scenario needs: each change
//! the runner marks is forwarded to every child on its stdin, so each counts its
//! requests by the same change windows, and each child writes those windows (counts,
//! latency histogram, route markers) into its result, added up here. Per-backend
//! first and last responses, which endpoint propagation is computed from, are merged
//! by `results::merge` like everything else.

use crate::local::{
    available_cpus, probe_all, scratch_dir, spawn_all, wait_all, write_spec, Generator,
};
use crate::{for_runner, now_unix_ns, Error};
use engine::split;
use engine::windows::Tally;
use results::merge::Part;
use results::RunResult;
use scenario::runner::{LoadRun, LoadRunner};
use std::io::Write;
use std::time::Duration;

/// The load of every system of a scenario run, split over `count` local processes.
pub struct LocalGenerators {
    pub count: usize,
}

impl LoadRunner for LocalGenerators {
    fn run(&self, load: LoadRun) -> Result<(RunResult, Tally), scenario::runner::LoadError> {
        self.run_load(load).map_err(for_runner)
    }
}

impl LocalGenerators {
    fn run_load(&self, load: LoadRun) -> Result<(RunResult, Tally), Error> {
        let n = self.count;
        let spec = &split::whole(&load.spec, n);
        let plan = split::split(spec, n, 0).map_err(|e| Error::Input(e.to_string()))?;
        // The scenario's generator CPUs (placement), one per child when there are
        // enough; otherwise the children share them.
        let cpus = if spec.cpus.is_empty() {
            available_cpus()
        } else {
            spec.cpus.clone()
        };
        let dir =
            scratch_dir().map_err(Error::io("temporary folder for the generators' results"))?;
        // A run killed outright (SIGKILL) runs none of this: its watchdog removes the
        // folder and stops the children (which also die with their parent).
        lab::watchdog::watch_path(dir.path());
        let spec_file = write_spec(spec, dir.path())?;
        let lead = Duration::from_secs(1) + spec.connect_timeout;
        let start_at = split::start_instant(now_unix_ns(), lead);
        let mut gens = spawn_all(&plan, &cpus, start_at, dir.path(), &spec_file, &["--marks"])?;
        for g in &gens {
            lab::watchdog::watch_group(g.child.id());
        }
        let mut stdins = probe_all(&mut gens, lead);

        // The measured window starts at the shared instant plus the warm-up, for
        // every child; on the run's clock that is the origin of the event log.
        let clock = load.clock;
        let epoch = clock.wall_epoch_ns();
        let measured_at = start_at + spec.warmup.as_nanos();
        let origin = u64::try_from(measured_at.saturating_sub(epoch)).unwrap_or(u64::MAX);
        (load.on_start)(origin);
        // Each change to every child as soon as it is marked, until the runner is
        // done (its sender dropped); then their stdin closes.
        let marks = load.marks;
        let forward = std::thread::spawn(move || {
            for t in marks {
                let line = format!("mark {}\n", epoch + u128::from(t));
                for s in &mut stdins {
                    let _ = s.write_all(line.as_bytes()).and_then(|_| s.flush());
                }
            }
        });

        wait_all(&mut gens, spec, start_at, &load.stop, false, lead);
        let pgids: Vec<u32> = gens.iter().map(|g| g.child.id()).collect();
        let parts: Vec<Part> = gens.into_iter().map(Generator::into_part).collect();
        for p in pgids {
            lab::watchdog::unwatch_group(p);
        }
        lab::watchdog::unwatch_path(dir.path());
        drop(dir);
        let _ = forward.join();

        merge_parts(parts, start_at, origin)
    }
}

/// The generators' change windows added up (each part's, placed on the run's clock,
/// whose measured window starts at `origin`) and their results merged. A part that
/// missed a change mark counted its windows by other changes than the rest: its
/// windows are left out (its merged entry says so) rather than added to the wrong
/// ones.
///
/// # Errors
/// A part's windows or results that cannot be read or merged.
pub(crate) fn merge_parts(
    parts: Vec<Part>,
    start_at: u128,
    origin: results::clock::Nanos,
) -> Result<(RunResult, Tally), Error> {
    let mut tally = Tally::default();
    for p in &parts {
        let missed = p.planned.marks.as_ref().is_some_and(|m| m.missed > 0);
        if let (Some(r), false) = (&p.result, missed) {
            tally
                .add_parts(&r.windows_part, origin)
                .map_err(|e| Error::Generator(format!("generator {}: {e}", p.planned.index)))?;
        }
    }
    let mut merged = results::merge::merge(parts, start_at).map_err(Error::Merge)?;
    // The per-second histograms served the merge; the result keeps the timeline.
    merged.take_second_histograms();
    Ok((merged, tally))
}
