//! `ingressbench probe`: a scenario's behaviour probes alone, without a load: each
//! system deployed in turn, sent the probes once, compared with the baseline, and
//! stopped. What a migration check in CI runs before it spends minutes on load.

use super::run::PlanArgs;
use super::usage;
use anyhow::Context;
use clap::Args;
use scenario::plan::Plan;
use scenario::{runner, PlatformKind, Scenario};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Flags of `ingressbench probe`.
#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// The scenario file (YAML); without a `probes:` section every built-in probe
    /// runs, the first system the baseline.
    pub scenario: PathBuf,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Write every answer and difference here as JSON (written whole or not at all).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Probes every system of a scenario and prints where each differs from the
/// baseline; exit 1 when `--fail-on probe_diffs>N` is crossed.
pub fn run(a: ProbeArgs) -> anyhow::Result<i32> {
    let (mut s, text) = Scenario::load(&a.scenario).map_err(|e| usage(results::with_causes(&e)))?;
    if s.probes.is_none() {
        s.probes = Some(scenario::ProbesSection::default());
    }
    let mut limit: Option<f64> = None;
    for g in ::report::gate::parse_gates(&a.plan.fail_on).map_err(|e| usage(e.to_string()))? {
        if g.metric != ::report::compare::Metric::ProbeDiffs {
            return Err(usage(format!(
                "--fail-on '{}': probe runs no load; its one limit is probe_diffs, e.g. probe_diffs>0",
                g.spec
            )));
        }
        // Several: the strictest holds.
        limit = Some(limit.map_or(g.limit, |l| l.min(g.limit)));
    }
    // Flags that shape a load, which probe does not run: said, not ignored.
    for (given, flag) in [
        (a.plan.repeat != 1, "--repeat"),
        (a.plan.generators.is_some(), "--generators"),
        (a.plan.metrics_listen.is_some(), "--metrics-listen"),
        (a.plan.lead.is_some(), "--lead"),
    ] {
        if given {
            return Err(usage(format!(
                "{flag}: probe sends each probe once and runs no load: leave {flag} out, or use run"
            )));
        }
    }
    let plan = Plan::build(s, text, &a.scenario.display().to_string(), a.plan.flags()?)
        .map_err(|e| usage(results::with_causes(&e)))?;
    if plan.scenario.platform == PlatformKind::NetworkLab {
        return Err(usage(
            "probe: the network lab's server is not the backend that reports what it received: use --platform local or kubernetes",
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let exe = std::env::current_exe()?;
    lab::watchdog::start(&exe).context("start the watchdog")?;
    // The systems' logs: a folder of this command's own, removed when it ends.
    let work = std::env::temp_dir().join(format!("ingressbench-probe-{}", std::process::id()));
    let _gone = RemoveOnDrop(work.clone());
    let opts = runner::RunOptions {
        out_dir: work.clone(),
        exe,
        stop: stop.clone(),
        progress: Box::new(|line| eprintln!("ingressbench: {line}")),
        load: None,
        watch: None,
        system_done: Box::new(|_| {}),
        warn: Arc::new(|w| eprintln!("ingressbench: warning: {w}")),
        platform: None,
    };
    let probed = match runner::probe(&plan, opts) {
        Ok(p) => p,
        Err(e) if stop.load(std::sync::atomic::Ordering::Relaxed) => {
            eprintln!("ingressbench: interrupted: {}", results::Causes(&e));
            return Ok(130);
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(path) = &a.json {
        let all: serde_json::Map<String, serde_json::Value> = probed
            .iter()
            .map(|(name, run)| Ok((name.clone(), serde_json::to_value(run)?)))
            .collect::<anyhow::Result<_>>()?;
        let bytes = serde_json::to_vec_pretty(&all)?;
        results::fsutil::write_atomic(path, &bytes)
            .with_context(|| format!("write {}", path.display()))?;
    }
    let mut crossed = Vec::new();
    for (name, run) in &probed {
        print!("{}", text_of(name, run));
        if let Some(l) = limit {
            if run.diffs() as f64 > l {
                crossed.push(format!("FAIL: {name}: probe_diffs {} > {l}", run.diffs()));
            }
        }
    }
    let systems: Vec<(&str, &results::probes::ProbeRun)> =
        probed.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let matrix = report::tables::corpus::matrix(&systems);
    if !matrix.rows.is_empty() {
        print!(
            "\n{}",
            report::plain::Plain::new(&matrix)
                .title(Some(matrix.title.to_string()))
                .render()
        );
    }
    for c in &crossed {
        eprintln!("ingressbench: {c}");
    }
    Ok(if stop.load(std::sync::atomic::Ordering::Relaxed) {
        130
    } else if crossed.is_empty() {
        0
    } else {
        1
    })
}

/// A system's probes as lines: a heading, then a line per difference and per
/// expectation not met.
fn text_of(name: &str, run: &results::probes::ProbeRun) -> String {
    let mut out = format!("{name}: {} probes", run.observed.len());
    if name == run.baseline {
        out.push_str(" (the baseline)");
    } else {
        out.push_str(&format!(
            ", {} differences from {}",
            run.differences.len(),
            run.baseline
        ));
    }
    if !run.unmet.is_empty() {
        out.push_str(&format!(", {} expectations not met", run.unmet.len()));
    }
    out.push('\n');
    // The corpus's probes are read in its matrix, a cell per behaviour.
    let in_corpus = |probe: &str| {
        probe
            .split_once('.')
            .is_some_and(|(b, _)| run.corpus.iter().any(|c| c.behaviour == b))
    };
    for d in run.differences.iter().filter(|d| !in_corpus(&d.probe)) {
        out.push_str(&format!(
            "  {}: {}: {} here, {} at {}\n",
            d.probe, d.field, d.system, d.baseline, run.baseline
        ));
    }
    for u in &run.unmet {
        out.push_str(&format!(
            "  {}: {}: {} here, expected {}\n",
            u.probe, u.field, u.got, u.expected
        ));
    }
    out
}

/// Removes a folder when dropped, however the command ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
