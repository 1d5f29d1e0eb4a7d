//! A deployed case measured: a run under its load with its steps, or a search of its
//! maximum.

use super::analysis::{propagation, rotations, route_propagation, windows};
use super::deploy::{deploy, Deployed};
use super::steps::run_steps;
use super::{probing, LoadError, LoadRun, RunError, RunOptions};
use crate::plan::{Case, SearchSpec};
use engine::search::{run_search, SearchError, SearchPlan};
use engine::windows::Tally;
use lab::platform::fmt_set;
use results::clock::Nanos;
use results::search::SearchResult;
use results::{Fraction, LabInfo, PlacementInfo, Resources, RunResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

/// The search of a deployed case: its load on each step of `search`, without
/// samples.
pub(crate) fn search_plan(case: &Case, search: &SearchSpec, d: &Deployed) -> SearchPlan {
    let target = d.sys.platform.target();
    let mut spec = case.load.at(&target.url, target.cacert.clone());
    spec.duration = search.duration;
    spec.warmup = search.warmup;
    spec.sample = 0.0;
    SearchPlan {
        spec,
        probe: search.probe,
        bounds: search.bounds.clone(),
        precision: search.precision,
        trials: search.trials,
        netns: target.netns.clone(),
    }
}

/// What a search of `name` found, once its deployment `d` is closed: what the
/// deployment left behind among its warnings; a probe that got no response is a
/// result (no maximum), told to `progress`.
pub(crate) fn found(
    found: Result<SearchResult, SearchError>,
    d: Deployed,
    name: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<SearchResult, RunError> {
    let left = close(d, name, progress);
    let mut found = match found {
        Ok(f) => f,
        Err(SearchError::NoCeiling { result, why, .. }) => {
            progress(&format!("{name}: the probe got no response: {why}"));
            *result
        }
        Err(source) => {
            return Err(RunError::Search {
                system: name.to_string(),
                source: Box::new(source),
            })
        }
    };
    found.warnings.extend(left);
    Ok(found)
}

/// Searches `case`'s maximum with the scenario's `search` bounds (the load's
/// connections, threads and timeouts; each step's own duration), on a deployment of
/// its own.
pub(crate) fn search_system(
    case: &Case,
    search_spec: &SearchSpec,
    opts: &mut RunOptions,
) -> Result<SearchResult, RunError> {
    let name = case.name.as_str();
    let d = deploy(case, opts)?;
    let plan = search_plan(case, search_spec, &d);
    (opts.progress)(&format!(
        "{name}: searching the maximum (p99 <= {:.2} ms, errors <= {:.3} %)",
        plan.bounds.p99_ms,
        plan.bounds.error_ratio * 100.0
    ));
    let progress = &mut opts.progress;
    let got = run_search(&plan, &opts.stop, |st| {
        let what = st
            .target
            .map_or("probe".to_string(), |t| format!("{t:.0} req/s"));
        let verdict = if st.target.is_none() {
            ""
        } else if st.passed() {
            " pass"
        } else {
            " fail"
        };
        progress(&format!(
            "{name}: {what}: {:.0}/s, p99 {}{verdict}",
            st.achieved,
            st.p99_ms.map_or("-".into(), |p| format!("{p:.2} ms"))
        ));
    });
    found(got, d, name, &mut **progress)
}

/// Closes a deployment whose run is over: its warnings, each also told to
/// `progress` (they go into a search's result, which no one prints).
pub(crate) fn close(mut d: Deployed, name: &str, progress: &mut dyn FnMut(&str)) -> Vec<String> {
    let left = d.sys.close();
    for w in &left {
        progress(&format!("{name}: warning: {w}"));
    }
    left
}

/// Runs `case` under its load (at `at`, a fraction of a maximum, when given),
/// making its changes while the load runs.
pub(crate) fn run_system(
    case: &Case,
    opts: &mut RunOptions,
    at: Option<Fraction>,
    probe_baseline: Option<&results::probes::ProbeRun>,
) -> Result<RunResult, RunError> {
    let out_name = case.name.as_str();
    let deployed = deploy(case, opts)?;
    // The behaviour probes, before the load (`probes:`), then during it.
    let mut during = None;
    let probes = match &case.probes {
        Some(p) => {
            let mut prober = probing::Prober::new(&deployed, case, p)
                .map_err(|why| RunError::Setup(format!("{out_name}: probes: {why}")))?;
            let run = probing::before(&mut prober, case, p, probe_baseline);
            (opts.progress)(&format!(
                "{out_name}: {} probes, {} differences from {}{}",
                run.observed.len(),
                run.differences.len(),
                run.baseline,
                match run.unmet.len() {
                    0 => String::new(),
                    n => format!(", {n} expectations not met"),
                }
            ));
            if p.during {
                let clock = deployed.sys.events.clock;
                let stop = opts.stop.clone();
                during = Some(probing::During::start(
                    prober,
                    run.observed.clone(),
                    clock,
                    stop,
                )?);
            }
            Some(run)
        }
        None => None,
    };
    let Deployed {
        mut sys,
        ctx,
        placement,
        versions,
        route_set,
    } = deployed;
    sys.probes = during;
    let clock = sys.events.clock;
    let target = sys.platform.target();
    let url = target.url.clone();
    let mut spec = case.load.at(&url, target.cacert.clone());
    if let Some(f) = &at {
        spec.rate = Some((f.fraction * f.max_rate).max(1.0));
    }
    let duration = spec.duration;
    let (mut plan, config) = spec.resolve().map_err(RunError::Spec)?;
    plan.netns = target.netns.clone();
    // The sessions (`sessions:`) open now, on a thread of their own, and start
    // their messages with the load's measured window.
    let sessions = match &case.sessions {
        Some(sp) => Some(
            Sessions::start(
                sp,
                &spec,
                target.netns.clone(),
                clock,
                sys.events.marks.clone(),
            )
            .map_err(|why| RunError::Setup(format!("{out_name}: sessions: {why}")))?,
        ),
        None => None,
    };

    // The load runs on its own thread (or elsewhere, through it); this one applies
    // the changes.
    let engine_stop = Arc::new(AtomicBool::new(false));
    let (start_tx, start_rx) = mpsc::channel();
    let es = engine_stop.clone();
    let marks = sys.events.marks.clone();
    let elsewhere = opts.load.clone().map(|runner| {
        let (tx, rx) = mpsc::channel();
        sys.events.forward = Some(tx);
        sys.events.lead = Nanos::try_from(runner.mark_lead().as_nanos()).unwrap_or(Nanos::MAX);
        (runner, rx)
    });
    let load_url = url.clone();
    let watch = opts.watch.clone();
    if let Some(w) = &watch {
        w.system(out_name, &url, plan.rate);
        sys.events.watch = Some(w.clone());
    }
    let handle = std::thread::Builder::new()
        .name("ib-load".into())
        .spawn(move || -> Result<(RunResult, Tally), LoadError> {
            let on_start = move |t| {
                let _ = start_tx.send(t);
            };
            match elsewhere {
                None => {
                    let on_second = |e: &results::TimelineEntry| {
                        if let Some(w) = &watch {
                            w.second(e);
                        }
                    };
                    let mut o =
                        engine::run_marked(&plan, clock, es, Some(marks), on_start, on_second)?;
                    let tally = std::mem::take(&mut o.totals.windows);
                    Ok((o.to_result(&load_url, config), tally))
                }
                Some((runner, rx)) => runner.run(LoadRun {
                    spec,
                    clock,
                    marks: rx,
                    stop: es,
                    on_start: Box::new(on_start),
                }),
            }
        })
        .map_err(|source| RunError::Io {
            what: "start the load".into(),
            source,
        })?;
    let origin = match start_rx.recv() {
        Ok(t) => t,
        // The load ended before its window began (its runner could not start it):
        // no change is made to a system that no load measures.
        Err(_) => {
            return Err(RunError::Load(match handle.join() {
                Ok(Err(e)) => e,
                Ok(Ok(_)) => LoadError::NoWindow,
                Err(_) => LoadError::Panicked,
            }))
        }
    };
    if let Some(s) = &sessions {
        s.start.store(origin.max(1), Ordering::Release);
    }
    sys.events.origin = origin;
    sys.end = origin + duration.as_nanos() as Nanos;
    // Warm-up first, unchanged; the changes start with the measured window.
    sys.sleep_until(origin);
    // Deploying and starting the load can take seconds (proxies, pods, generators on
    // other machines): say when the measured window begins.
    (opts.progress)(&format!("{out_name}: load running, measuring {duration:?}"));
    run_steps(&mut sys, &case.steps, 0);
    sys.sleep_until(sys.end);
    let interrupted = sys.stop.load(Ordering::Relaxed);
    if interrupted {
        engine_stop.store(true, Ordering::Relaxed);
    }
    // No more marks: a runner forwarding them sees the end.
    sys.events.forward = None;
    let (mut result, tally) = match handle.join() {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => return Err(LoadError::Panicked.into()),
    };
    result.partial |= interrupted;
    if let Some(s) = sessions {
        if interrupted {
            s.stop.store(true, Ordering::Relaxed);
        }
        result.sessions = Some(
            s.finish()
                .map_err(|why| RunError::Setup(format!("{out_name}: sessions: {why}")))?,
        );
    }
    // The last round, once the load is over (none when it was interrupted).
    let mut probes = probes;
    if let Some(during) = sys.probes.take() {
        if !interrupted {
            during.after("end".into(), sys.events.origin);
        }
        let (rounds, unmet) = during.finish();
        if let Some(p) = probes.as_mut() {
            let changed: usize = rounds.iter().map(|r| r.changed.len()).sum();
            if changed > 0 || !unmet.is_empty() {
                (opts.progress)(&format!(
                    "{out_name}: probes during the load: {changed} answers changed, {} expectations not met",
                    unmet.len()
                ));
            }
            p.rounds = rounds;
            p.unmet.extend(unmet);
        }
    }
    let events = sys.events.to_events();
    let (before_changes, windows) = windows(
        &events,
        &sys.events.opened,
        &tally,
        result.duration_s * 1000.0,
        result.sessions.as_ref(),
    );
    let propagation = propagation(&sys, &result);
    let route_propagation =
        route_propagation(&events, &sys.events.opened, &tally, sys.events.origin);
    let rotations = rotations(&events, &sys.rotated, &windows, &result.tls.certificates);
    // A change no response ever showed is said, with what the system needs for it.
    for c in route_propagation.iter().flat_map(|p| &p.changes) {
        if c.seen_ms.is_none() {
            let needs = lab::Route::parse(&c.route).and_then(|r| sys.driver.route_needs(r));
            result.warnings.push(format!(
                "{out_name}: route {} (at {:.1} s) never showed in traffic ({} responses after it){}",
                c.route,
                c.at_ms / 1000.0,
                c.responses_old,
                needs.map(|n| format!(": {n}")).unwrap_or_default()
            ));
        }
    }
    let cluster = sys.platform.cluster_info();
    let network = sys.platform.network_info();
    result.lab = Some(LabInfo {
        system: out_name.to_string(),
        scenario: case.scenario.clone(),
        versions,
        probes,
        events,
        windows,
        before_changes: Some(before_changes),
        propagation,
        route_propagation,
        resources: (!sys.resources.is_empty()).then(|| {
            Resources::of(
                std::mem::take(&mut sys.resources),
                result.requests.completed,
            )
        }),
        proxy_died: sys.proxy_died,
        placement: Some(PlacementInfo {
            generator: fmt_set(&placement.generator),
            proxy: fmt_set(&placement.proxy),
            backends: fmt_set(&placement.backends),
            proxy_workers: ctx.workers(),
        }),
        cluster,
        network,
        fraction: at,
        rotations,
        route_set: route_set.map(|mut rs| {
            if let Some(r) = sys.routes.as_mut() {
                rs.changes = std::mem::take(&mut r.changes);
            }
            rs
        }),
        ..LabInfo::default()
    });
    // The flapping backends write their last counts as they stop.
    let flap_logs = sys.platform.flap_logs();
    let window_start = clock.wall_epoch_ns() + u128::from(sys.events.origin);
    result.warnings.extend(sys.close());
    drop(sys);
    if let Some(lab) = result.lab.as_mut() {
        lab.failover = crate::failover::measure(
            &flap_logs,
            window_start,
            result.duration_s * 1000.0,
            &result.timeline,
        );
    }
    Ok(result)
}

/// The sessions of a case, on their thread: opened before the load, started with
/// its window (`start`, published by the runner), stopped with it.
struct Sessions {
    start: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Result<results::sessions::Sessions, String>>>,
}

impl Sessions {
    fn start(
        plan: &crate::plan::SessionsPlan,
        load: &engine::LoadSpec,
        netns: Option<std::path::PathBuf>,
        clock: results::clock::Clock,
        marks: Arc<engine::windows::Marks>,
    ) -> Result<Sessions, String> {
        let mut load = load.clone();
        if let Some(p) = &plan.path {
            load.url = with_path(&load.url, p);
        }
        let mut spec = engine::sessions::SessionSpec::resolve(&load, plan.settings.clone())?;
        spec.netns = netns;
        let start = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (at, st) = (start.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("ib-sessions".into())
            .spawn(move || {
                engine::sessions::run(
                    &spec,
                    &clock,
                    &st,
                    Some(&marks),
                    engine::sessions::Begin::At(&at),
                    |_| {},
                )
                .map_err(|e| results::Causes(&e).to_string())
            })
            .map_err(|e| format!("cannot start its thread: {e}"))?;
        Ok(Sessions {
            start,
            stop,
            handle: Some(handle),
        })
    }

    /// Waits for the sessions' end (the window's, their drain and close).
    fn finish(mut self) -> Result<results::sessions::Sessions, String> {
        let h = self.handle.take().expect("joined once");
        h.join()
            .map_err(|_| "its thread panicked".to_string())
            .and_then(|r| r)
    }
}

impl Drop for Sessions {
    /// A run that ends early (the load could not start) stops its sessions.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `url` with its path (and query) replaced by `path`.
fn with_path(url: &str, path: &str) -> String {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..].find('/').map_or(url.len(), |i| after + i);
    format!("{}{path}", &url[..end])
}

#[cfg(test)]
mod sessions_tests {
    #[test]
    fn a_sessions_path_replaces_the_loads() {
        assert_eq!(
            super::with_path("https://127.0.0.1:8443/", "/chat"),
            "https://127.0.0.1:8443/chat"
        );
        assert_eq!(
            super::with_path("http://a.test:80/x?y=1", "/ws"),
            "http://a.test:80/ws"
        );
        assert_eq!(super::with_path("http://a.test", "/ws"), "http://a.test/ws");
    }
}
