//! Runs a scenario: for each system under test in turn, start the backends and the
//! proxy, start the load, apply the changes while it runs, then stop everything and
//! write what was measured.
//!
//! The runner talks only to a [`Platform`] (where backends live and how they
//! change) and a [`Driver`] (the proxy): it never knows which proxy it drives, where
//! it runs, which ports it listens on or how a backend is started. Every change is logged twice on the load's clock: when it was asked for
//! and when it took effect, so a latency spike can be tied to the change behind it.

use super::{RestartWhat, Scenario, Step};
use crate::plan::{load_spec, LoadMode, Plan};
use engine::search::{run_search, SearchError, SearchPlan};
use engine::windows::{Marks, Tally};
use engine::{self, LoadSpec};
use lab::backends::StopMode;
use lab::endpoint_push::{self, Sync};
use lab::platform::{fmt_set, BackendSpec, SiteSpec, TlsSpec};
use lab::{certs, driver_for, Driver, Expect, Platform, PlatformEvent, SutError};
use results::clock::{Clock, Nanos};
use results::folder::RunFolder;
use results::search::SearchResult;
use results::{
    Event, EventKind, EventWindow, Fraction, LabInfo, PlacementInfo, Propagation, PropagationEntry,
    ResourceSample, Resources, RouteChange, RoutePropagation, RunResult, Spread,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

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
    #[error("{0}")]
    Setup(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
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
    fn run(&self, load: LoadRun) -> Result<(RunResult, Tally), String>;

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
}

/// What a scenario run produced.
pub struct RunOutput {
    pub results: Vec<RunResult>,
    pub partial: bool,
}

/// Writes the scenario into the results folder and lists the systems to run (the
/// scenario's, or those of `--only`), in order: how every kind of run starts.
///
/// # Errors
/// The folder cannot be written.
pub(crate) fn start<'p>(
    plan: &'p Plan,
    opts: &RunOptions,
) -> Result<(RunFolder, Vec<&'p str>), RunError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| RunError::Io { what, source }
    };
    let folder = RunFolder::new(&opts.out_dir);
    let effective = serde_json::to_vec_pretty(&plan.scenario).unwrap_or_default();
    folder
        .write_scenario(&plan.text, &effective)
        .map_err(io("write the scenario into the results folder"))?;
    Ok((folder, plan.only.iter().map(String::as_str).collect()))
}

/// Runs the plan's scenario (already `--quick`-ed if asked) and writes its results folder: the
/// scenario, and per system `result.json` and `events.json`. The summary is the
/// caller's to render.
///
/// # Errors
/// [`RunError`] when a system cannot be set up; systems already run keep their
/// results on disk.
pub fn run(plan: &Plan, mut opts: RunOptions) -> Result<RunOutput, RunError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| RunError::Io { what, source }
    };
    let scn = &plan.scenario;
    let (folder, systems) = start(plan, &opts)?;
    if plan.load == LoadMode::Given {
        return run_repeated(scn, &folder, &systems, plan.repeat, opts);
    }
    let mut results = Vec::new();
    let mut partial = false;
    for name in systems {
        if opts.stop.load(Ordering::Relaxed) {
            partial = true;
            break;
        }
        (opts.progress)(&format!("{name}: starting"));
        // Fractions of a maximum: the search first, then a run at each fraction.
        let found = search_system(scn, name, &mut opts)?;
        folder
            .write_search(name, &found)
            .map_err(io(&format!("write {name}'s search")))?;
        if found.partial {
            partial = true;
            break;
        }
        let Some(max) = found.max_rate else {
            (opts.progress)(&format!(
                "{name}: no rate held the search's bounds: no runs at fractions of a maximum"
            ));
            continue;
        };
        for &f in &scn.load.rates {
            if opts.stop.load(Ordering::Relaxed) {
                partial = true;
                break;
            }
            let at = Fraction {
                of: name.to_string(),
                fraction: f,
                max_rate: max,
            };
            let label = fraction_label(name, f);
            (opts.progress)(&format!(
                "{label}: {:.0} req/s ({:.0} % of {max:.0})",
                f * max,
                f * 100.0
            ));
            let r = run_system(scn, name, &mut opts, Some((label.as_str(), at)), None, None)?;
            partial |= r.partial;
            folder
                .write_result(&label, &r)
                .map_err(io(&format!("write {label}'s result")))?;
            (opts.system_done)(&r);
            results.push(r);
        }
    }
    Ok(RunOutput { results, partial })
}

/// Each system at the scenario's rate, `repeat` times, the systems taking
/// turns (all of them once, then all again). Each system's result is written after
/// every repetition, all of its repetitions so far in it, so an interrupt loses
/// nothing that was measured.
fn run_repeated(
    scn: &Scenario,
    folder: &RunFolder,
    systems: &[&str],
    repeat: usize,
    mut opts: RunOptions,
) -> Result<RunOutput, RunError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| RunError::Io { what, source }
    };
    // The profile's default, then its tuned variant (`passive_health`); each at
    // every size of a `route_scale` sweep.
    let sizes = scn.route_sizes();
    type Run<'a> = (
        String,
        &'a str,
        Option<lab::health::PassiveHealth>,
        Option<u32>,
    );
    let mut runs: Vec<Run> = Vec::new();
    for name in systems {
        for (label, passive) in crate::failover::variants(scn, name) {
            for &n in &sizes {
                let label = n.map_or(label.clone(), |n| super::route_scale_label(&label, n));
                runs.push((label, *name, passive.clone(), n));
            }
        }
    }
    let repeat = repeat.max(1);
    let mut reps: Vec<Vec<RunResult>> = vec![Vec::new(); runs.len()];
    // Each run's repetitions so far, combined: what is on disk.
    let mut latest: Vec<Option<RunResult>> = vec![None; runs.len()];
    let mut partial = false;
    'all: for rep in 1..=repeat {
        for (i, (label, name, passive, size)) in runs.iter().enumerate() {
            if opts.stop.load(Ordering::Relaxed) {
                partial = true;
                break 'all;
            }
            let which = if repeat > 1 {
                format!(" (run {rep}/{repeat})")
            } else {
                String::new()
            };
            (opts.progress)(&format!("{label}: starting{which}"));
            let sized = size.map(|n| scn.with_routes(n));
            let (scn_here, out) = match &sized {
                Some(s) => (s, Some(label.as_str())),
                None => (scn, None),
            };
            let r = run_system(scn_here, name, &mut opts, None, passive.as_ref(), out)?;
            let stopped = r.partial;
            reps[i].push(r);
            let all = results::repeat::combine(reps[i].clone(), repeat)
                .map_err(|e| RunError::Setup(format!("{label}: {e}")))?;
            folder
                .write_result(label, &all)
                .map_err(io(&format!("write {label}'s result")))?;
            if repeat == 1 {
                (opts.system_done)(&all);
            }
            latest[i] = Some(all);
            if stopped {
                partial = true;
                break 'all;
            }
        }
    }
    let mut results = Vec::new();
    for all in latest.into_iter().flatten() {
        partial |= all.partial;
        if repeat > 1 {
            (opts.system_done)(&all);
        }
        results.push(all);
    }
    Ok(RunOutput { results, partial })
}

/// The event log of one system, on the load's clock.
struct Events {
    clock: Clock,
    /// Clock time of the start of the measured window (0 until known).
    origin: Nanos,
    list: Vec<(Nanos, EventKind, String, Option<f64>)>,
    /// Where each change asked for starts a window, for the engine to count
    /// requests by.
    marks: Arc<Marks>,
    /// The event that opened each marked window, by index into `list`.
    opened: Vec<usize>,
    /// Where each mark also goes, when the load runs elsewhere ([`LoadRunner`]).
    forward: Option<mpsc::Sender<Nanos>>,
    /// [`LoadRunner::mark_lead`], when the load runs elsewhere.
    lead: Nanos,
    /// Told of each change that opens a window ([`RunOptions::watch`]).
    watch: Option<Arc<dyn Watch>>,
}

impl Events {
    fn log(&mut self, kind: EventKind, detail: impl Into<String>, took: Option<Duration>) -> Nanos {
        let detail = detail.into();
        let mut t = self.clock.now();
        let opens = kind.change().is_some() && self.origin != 0 && t >= self.origin;
        if opens && self.forward.is_some() {
            // Announced ahead, so that a generator elsewhere has the mark by then.
            t += self.lead;
        }
        // Marked as soon as the time is fixed: the requests intended from `t` on
        // belong to this change.
        if opens && self.marks.mark(t).is_some() {
            self.opened.push(self.list.len());
            if let Some(f) = &self.forward {
                let _ = f.send(t);
            }
            // The change itself is made at its time, not before.
            while self.clock.now() < t {
                std::thread::sleep(Duration::from_nanos(t.saturating_sub(self.clock.now())));
            }
            if let (Some(w), Some(change)) = (&self.watch, kind.change()) {
                w.step(self.opened.len(), format!("{change} {detail}").trim_end());
            }
        }
        self.list
            .push((t, kind, detail, took.map(|d| d.as_secs_f64() * 1000.0)));
        t
    }

    fn to_events(&self) -> Vec<Event> {
        self.list
            .iter()
            .map(|(t, k, d, took)| Event {
                t_ms: (*t as f64 - self.origin as f64) / 1e6,
                kind: *k,
                detail: d.clone(),
                took_ms: *took,
            })
            .collect()
    }
}

/// Everything one system's run holds; dropping it stops every process.
pub(crate) struct System {
    pub(crate) driver: Box<dyn Driver>,
    pub(crate) platform: Box<dyn Platform>,
    events: Events,
    stop_mode: StopMode,
    stop: Arc<AtomicBool>,
    /// Clock time at which the load ends.
    end: Nanos,
    proxy_died: bool,
    /// Backends that became ready (id, time) and were removed (id, time).
    added: Vec<(String, Nanos)>,
    removed: Vec<(String, Nanos)>,
    settle_timeout: Duration,
    /// What the system under test spends, read once a second on the load's clock.
    usage: lab::usage::Usage,
    resources: Vec<ResourceSample>,
    /// Clock time of the next reading; time and CPU total of the last one.
    next_reading: Nanos,
    last_reading: (Nanos, f64),
    /// Closed already ([`System::close`]): nothing left to stop.
    closed: bool,
    /// Where the warnings of a system dropped unclosed go ([`RunOptions::warn`]).
    warn: Arc<dyn Fn(&str) + Send + std::marker::Sync>,
    /// The route set in force (`routes:`), where its routes are probed (the proxy's
    /// plain-HTTP port) and for how long, and its changes during the load.
    routes: Option<RoutesInForce>,
    /// The serial (hex) of the certificate the proxy serves, when it serves TLS:
    /// what a rotation replaces.
    serial: Option<String>,
    /// Each rotation asked for, in order: the serial before and the new one.
    rotated: Vec<(String, String)>,
}

/// A system's route set while the load runs (see [`System::change_route_set`]).
struct RoutesInForce {
    set: lab::RouteSet,
    addr: std::net::SocketAddr,
    bound: Duration,
    changes: Vec<results::RouteSetChange>,
}

impl System {
    /// A system of `driver` on `platform`, its events on `clock`, before anything is
    /// set up.
    fn new(
        driver: Box<dyn Driver>,
        platform: Box<dyn Platform>,
        clock: Clock,
        opts: &RunOptions,
    ) -> System {
        System {
            driver,
            platform,
            events: Events {
                clock,
                origin: 0,
                list: Vec::new(),
                marks: Arc::new(Marks::new()),
                opened: Vec::new(),
                forward: None,
                lead: 0,
                watch: None,
            },
            stop_mode: StopMode::Graceful,
            stop: opts.stop.clone(),
            end: u64::MAX,
            proxy_died: false,
            added: Vec::new(),
            removed: Vec::new(),
            settle_timeout: Duration::from_secs(10),
            usage: lab::usage::Usage::default(),
            resources: Vec::new(),
            next_reading: 0,
            last_reading: (0, 0.0),
            closed: false,
            warn: opts.warn.clone(),
            routes: None,
            serial: None,
            rotated: Vec::new(),
        }
    }

    /// Adds one route to the set in force, or removes its last, while the load runs,
    /// and watches the proxy for the change from the moment it is asked: a new route
    /// until it answers as itself, a removed one until it no longer does. The
    /// change's window (opened by its event) holds the load's errors meanwhile.
    fn change_route_set(&mut self, step: super::RouteSetStep) {
        let Some(r) = self.routes.as_ref() else {
            self.events.log(
                EventKind::ChangeFailed,
                "route_set: no route set in force",
                None,
            );
            return;
        };
        let (set, addr, bound) = (r.set, r.addr, r.bound);
        let (new, i, watched) = match step {
            // A route changed in place before stays changed.
            super::RouteSetStep::Add => (
                lab::RouteSet {
                    count: set.count + 1,
                    ..set
                },
                set.count,
                None,
            ),
            super::RouteSetStep::Remove if set.count > 1 => (
                lab::RouteSet {
                    count: set.count - 1,
                    revised: set.revised.filter(|&r| r < set.count - 1),
                    ..set
                },
                set.count - 1,
                Some(set),
            ),
            super::RouteSetStep::Remove => {
                self.events.log(
                    EventKind::ChangeFailed,
                    "route_set remove: the set has one route left",
                    None,
                );
                return;
            }
            super::RouteSetStep::Change => (set.revise(0), 0, None),
        };
        // A removed route is probed as the set before had it, an added or changed
        // one as after (until it answers with its new marker).
        let probe_set = watched.unwrap_or(new);
        let served = step != super::RouteSetStep::Remove;
        let detail = format!("{} {}", step.name(), new.name(i));
        let writes0 = self.driver.route_status_writes();
        let (t0, since) = (self.events.clock.now(), Instant::now());
        // Whether the driver took the new set, settled or not: it holds it then.
        let mut taken = false;
        let ((shown, probes), applied, asked) = std::thread::scope(|s| {
            let watcher =
                s.spawn(move || lab::routes::watch(addr, &probe_set, i, since, bound, served));
            let before = self.events.list.len();
            self.change(
                Some(EventKind::RouteSetRequested),
                &detail,
                EventKind::RouteSetApplied,
                Some(Expect::Applied),
                |d, _| {
                    let r = d.apply_route_set(&new).map(|_| ());
                    taken = r.is_ok();
                    r
                },
            );
            let applied = self.events.list[before..]
                .iter()
                .find(|e| e.1 == EventKind::RouteSetApplied)
                .and_then(|e| e.3);
            // When the change was asked: later than `t0` when a load elsewhere needs
            // its mark ahead (the log waits for the mark's time before the change).
            let asked = self.events.list.get(before).map_or(t0, |e| e.0.max(t0));
            (watcher.join().unwrap_or((None, 0)), applied, asked)
        });
        // The watch began at `t0`; the change was made at `asked`.
        let lead = Duration::from_nanos(asked - t0);
        let shown = shown.map(|d| d.saturating_sub(lead));
        let at_ms = asked.saturating_sub(self.events.origin) as f64 / 1e6;
        let status_writes = self
            .driver
            .route_status_writes()
            .map(|w| w.saturating_sub(writes0.unwrap_or(0)));
        let Some(r) = self.routes.as_mut() else {
            return;
        };
        if taken {
            r.set = new;
        }
        r.changes.push(results::RouteSetChange {
            change: step.name().to_string(),
            route: new.name(i),
            routes_after: if taken { new.count } else { set.count },
            at_ms,
            applied_ms: applied,
            shown_ms: shown.map(|d| d.as_secs_f64() * 1e3),
            bound_ms: bound.as_secs_f64() * 1e3,
            probes,
            status_writes,
        });
    }

    /// Stops the proxy and tears the platform down; returns what went wrong on the
    /// way (an object the driver could not delete, a namespace left behind), one
    /// line each, for the result. Once: a second call returns nothing.
    pub(crate) fn close(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.closed, true) {
            return Vec::new();
        }
        let stopped = self.driver.stop();
        let mut left = self.driver.take_warnings();
        left.extend(stopped.err());
        left.extend(self.platform.teardown().err());
        left.iter().map(|e| results::with_causes(e)).collect()
    }
}

impl Drop for System {
    /// A system whose run failed is dropped unclosed: its warnings have no result to
    /// go into, and go to [`RunOptions::warn`].
    fn drop(&mut self) {
        for w in self.close() {
            (self.warn)(&w);
        }
    }
}

/// The name of a run at a fraction of `system`'s maximum, as its folder and its
/// rows are named: `host@30`.
pub fn fraction_label(system: &str, fraction: f64) -> String {
    format!("{system}@{}", (fraction * 100.0).round())
}

/// One system set up and serving: its platform, driver and event log, before any load.
pub(crate) struct Deployed {
    pub(crate) sys: System,
    ctx: lab::DriverContext,
    pub(crate) placement: lab::platform::Placement,
    versions: BTreeMap<String, String>,
    /// The route set given before the load (`routes:`), as it came up.
    route_set: Option<results::RouteSetResult>,
}

/// Sets up `name` (results in `out_name`'s folder): platform, backends, proxy;
/// `count_handshakes` asks the proxy to count its TLS handshakes (a log, for some).
pub(crate) fn deploy(
    scn: &Scenario,
    name: &str,
    out_name: &str,
    opts: &RunOptions,
    passive: Option<&lab::health::PassiveHealth>,
    count_handshakes: bool,
) -> Result<Deployed, RunError> {
    let lab = |source| RunError::Lab {
        system: name.to_string(),
        source,
    };
    let placement = super::PlacementSpec::resolve(scn.placement.as_ref());
    let site = SiteSpec {
        system: name.to_string(),
        out_dir: opts.out_dir.join(out_name),
        backends: BackendSpec {
            body_size: scn.backends.body_size,
            delay: scn.backends.delay.clone(),
            drain_timeout: scn.backends.drain_timeout.0,
            workers: 1,
            cpus: placement.backends.clone(),
        },
        replicas: scn.backends.replicas,
        proxy_cpus: placement.proxy.clone(),
        tls: TlsSpec {
            enabled: scn.tls.enabled,
            key: match scn.tls.key {
                super::Key::Rsa2048 => certs::KeyType::Rsa2048,
                super::Key::EcdsaP256 => certs::KeyType::EcdsaP256,
            },
            http2: scn.protocol != super::Protocol::Http1,
        },
        grpc: scn.protocol == super::Protocol::Grpc,
    };
    let clock = Clock::start();
    let mut platform = crate::plan::platform_for(scn, name, &opts.exe).map_err(lab)?;
    // A cluster offers its installed controllers, the network lab its direct server;
    // otherwise the lab's profiles.
    let driver = match platform.driver_for(name) {
        Some(d) => d,
        None => driver_for(name),
    }
    .map_err(lab)?;
    let mut sys = System::new(driver, platform, clock, opts);
    sys.stop_mode = scn.backends.stop.into();
    sys.platform
        .set_flapping(crate::failover::flap_spec(scn))
        .map_err(lab)?;
    let mut ctx = sys.platform.prepare(&site).map_err(lab)?;
    ctx.passive_health = passive.cloned();
    ctx.count_handshakes = count_handshakes;
    let endpoints = sys.platform.endpoints();
    sys.driver
        .deploy(&ctx, &endpoints, Duration::from_secs(15))
        .map_err(lab)?;
    if scn.tls.enabled && scn.changes_certificate() {
        sys.serial = Some(certs::serial(&ctx.cert).map_err(lab)?);
    }
    let versions: BTreeMap<String, String> = sys.driver.versions().into_iter().collect();
    let route_set = match &scn.routes {
        Some(r) => {
            let addr = probe_addr(&ctx, &sys.platform.target().url)
                .map_err(|e| RunError::Setup(format!("{name}: routes: {e}")))?;
            let got = apply_route_set(&mut sys, addr, r, name)?;
            sys.routes = Some(RoutesInForce {
                set: lab::RouteSet::new(r.count, r.hosts),
                addr,
                bound: r.bound.0,
                changes: Vec::new(),
            });
            Some(got)
        }
        None => None,
    };
    if sys.platform.target().netns.is_some() && opts.load.is_some() {
        return Err(RunError::Setup(format!(
            "{name}: the network lab's load leaves from a namespace of this process: run it without --generators"
        )));
    }
    Ok(Deployed {
        sys,
        ctx,
        placement,
        versions,
        route_set,
    })
}

/// Where a system's routes are probed: a local proxy's plain-HTTP port, or the
/// plain-HTTP address of a controller's data plane (the URL the load uses).
fn probe_addr(ctx: &lab::DriverContext, url: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if ctx.http_port != 0 {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], ctx.http_port)));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "the route probe speaks plain HTTP, and `{url}` is not an http:// URL: give the data plane's http:// address"
        ));
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("`{url}`: no address for {with_port}"))
}

/// Gives the system the scenario's route set and measures how long until every
/// route answers as itself, from the moment the driver was asked (the write, the
/// reload or the push; its settling included), probing `addr` over plain HTTP.
fn apply_route_set(
    sys: &mut System,
    addr: std::net::SocketAddr,
    r: &super::RoutesSection,
    name: &str,
) -> Result<results::RouteSetResult, RunError> {
    let set = lab::RouteSet::new(r.count, r.hosts);
    let fail = |e: SutError| RunError::Setup(format!("{name}: routes: {}", results::Causes(&e)));
    let writes0 = sys.driver.route_status_writes();
    // What the system spends rendering the set: its processes read before and
    // after (a process that exits in between, an old worker, loses its share).
    let mut usage = lab::usage::Usage::default();
    let before = usage.read(&sys.driver.process_groups());
    let t0 = Instant::now();
    let config_bytes = sys.driver.apply_route_set(&set).map_err(fail)?;
    let apply_ms = t0.elapsed().as_secs_f64() * 1e3;
    // Traffic is probed while the driver settles, not after: a controller may serve
    // routes long before it reports them (Contour writes statuses at its client's
    // 5 per second, 40 s for 200 routes, while Envoy serves them all in seconds).
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let (settled, got) = std::thread::scope(|s| {
        let probe = s.spawn(|| lab::routes::probe_until(addr, &set, t0, r.bound.0, 4, &cancel));
        let settled = sys.driver.settle(&Expect::Applied, r.bound.0);
        if settled.is_err() {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let settled_ms = t0.elapsed().as_secs_f64() * 1e3;
        (settled.map(|()| settled_ms), probe.join())
    });
    let settled_ms = settled.map_err(fail)?;
    let got = got.map_err(|_| RunError::Setup(format!("{name}: routes: the probe failed")))?;
    let groups = sys.driver.process_groups();
    let after = usage.read(&groups);
    let (apply_cpu_s, rss_mib) = if groups.is_empty() {
        (None, None)
    } else {
        (
            Some((after.cpu_s - before.cpu_s).max(0.0)),
            Some(after.rss_bytes as f64 / f64::from(1u32 << 20)),
        )
    };
    let status_writes = sys
        .driver
        .route_status_writes()
        .map(|w| w.saturating_sub(writes0.unwrap_or(0)));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(results::RouteSetResult {
        count: set.count,
        hosts: set.hosts,
        config_bytes,
        apply_ms,
        settled_ms,
        all_served_ms: got.all_after.map(ms),
        bound_ms: ms(r.bound.0),
        served: got.served,
        never_count: got.never_count,
        never: got.never,
        probes: got.probes,
        misses: got.misses,
        status_writes,
        apply_cpu_s,
        rss_mib,
        changes: Vec::new(),
    })
}

/// The search of a deployed system with the `search` section's steps and bounds (its
/// p99 bound `p99`): the scenario's load on each step, without samples.
pub(crate) fn search_plan(
    scn: &Scenario,
    sr: &super::SearchSection,
    d: &Deployed,
    p99: Duration,
) -> SearchPlan {
    let target = d.sys.platform.target();
    let mut spec = load_spec(scn, &target.url, target.cacert.clone());
    spec.cpus = d.placement.generator.clone();
    spec.duration = sr.duration.0;
    spec.warmup = sr.warmup.0;
    spec.sample = 0.0;
    SearchPlan {
        spec,
        probe: sr.probe.0,
        bounds: results::search::SearchBounds {
            p99_ms: p99.as_secs_f64() * 1e3,
            error_ratio: super::share(&sr.errors).unwrap_or(0.001),
            min_achieved: 0.99,
        },
        precision: super::share(&sr.precision).unwrap_or(0.02),
        trials: sr.trials,
        netns: target.netns.clone(),
    }
}

/// Searches `name`'s maximum with the scenario's `search` bounds (the load's
/// connections, threads and timeouts; each step's own duration), on a deployment of
/// its own.
fn search_system(
    scn: &Scenario,
    name: &str,
    opts: &mut RunOptions,
) -> Result<SearchResult, RunError> {
    let Some(sr) = &scn.search else {
        return Err(RunError::Setup("load.rates needs a search section".into()));
    };
    let d = deploy(scn, name, name, opts, None, false)?;
    let plan = search_plan(scn, sr, &d, sr.p99.0);
    (opts.progress)(&format!(
        "{name}: searching the maximum (p99 <= {:.2} ms, errors <= {:.3} %)",
        plan.bounds.p99_ms,
        plan.bounds.error_ratio * 100.0
    ));
    let progress = &mut opts.progress;
    let found = run_search(&plan, &opts.stop, |st| {
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
    let left = close(d, name, &mut **progress);
    let mut found = match found {
        Ok(f) => f,
        Err(SearchError::NoCeiling { result, why, .. }) => {
            (progress)(&format!("{name}: the probe got no response: {why}"));
            *result
        }
        Err(e) => {
            return Err(RunError::Setup(format!(
                "{name}: search: {}",
                results::Causes(&e)
            )))
        }
    };
    found.warnings.extend(left);
    Ok(found)
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

fn run_system(
    scn: &Scenario,
    name: &str,
    opts: &mut RunOptions,
    at: Option<(&str, Fraction)>,
    passive: Option<&lab::health::PassiveHealth>,
    label: Option<&str>,
) -> Result<RunResult, RunError> {
    let variant = passive.map(|_| format!("{name}{}", lab::health::VARIANT));
    let out_name = label
        .or(at.as_ref().map(|(label, _)| *label))
        .or(variant.as_deref())
        .unwrap_or(name);
    let Deployed {
        mut sys,
        ctx,
        placement,
        versions,
        route_set,
    } = deploy(scn, name, out_name, opts, passive, false)?;
    let clock = sys.events.clock;
    let target = sys.platform.target();
    let url = target.url.clone();
    let load = &scn.load;
    let mut spec = load_spec(scn, &url, target.cacert.clone());
    spec.cpus = placement.generator.clone();
    if let Some((_, f)) = &at {
        spec.rate = Some((f.fraction * f.max_rate).max(1.0));
    }
    let (mut plan, config) = spec.resolve().map_err(|e| RunError::Setup(e.scenario()))?;
    plan.netns = target.netns.clone();

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
        .spawn(move || -> Result<(RunResult, Tally), String> {
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
                        engine::run_marked(&plan, clock, es, Some(marks), on_start, on_second)
                            .map_err(|e| e.to_string())?;
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
            return Err(match handle.join() {
                Ok(Err(e)) => RunError::Setup(e),
                Ok(Ok(_)) => RunError::Setup("the load ended before its window began".into()),
                Err(_) => RunError::Setup("the load thread panicked".into()),
            })
        }
    };
    sys.events.origin = origin;
    sys.end = origin + load.duration.0.as_nanos() as Nanos;
    // Warm-up first, unchanged; the changes start with the measured window.
    sys.sleep_until(origin);
    // Deploying and starting the load can take seconds (proxies, pods, generators on
    // other machines): say when the measured window begins.
    (opts.progress)(&format!(
        "{out_name}: load running, measuring {:?}",
        load.duration.0
    ));
    run_steps(&mut sys, &scn.changes, 0);
    sys.sleep_until(sys.end);
    let interrupted = sys.stop.load(Ordering::Relaxed);
    if interrupted {
        engine_stop.store(true, Ordering::Relaxed);
    }
    // No more marks: a runner forwarding them sees the end.
    sys.events.forward = None;
    let (mut result, tally) = match handle.join() {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return Err(RunError::Setup(e)),
        Err(_) => return Err(RunError::Setup("the load thread panicked".into())),
    };
    result.partial |= interrupted;
    let events = sys.events.to_events();
    let (before_changes, windows) = windows(
        &events,
        &sys.events.opened,
        &tally,
        result.duration_s * 1000.0,
    );
    let propagation = propagation(&sys, &result);
    let route_propagation =
        route_propagation(&events, &sys.events.opened, &tally, sys.events.origin);
    let rotations = rotations(&events, &sys.rotated, &windows, &result.tls.certificates);
    let cluster = sys.platform.cluster_info();
    let network = sys.platform.network_info();
    result.lab = Some(LabInfo {
        system: out_name.to_string(),
        scenario: scn.name.clone(),
        versions,
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
        fraction: at.map(|(_, f)| f),
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

impl System {
    fn done(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.events.clock.now() >= self.end
    }

    /// Waits until `t` (clock time) or the end of the load, watching the proxy.
    fn sleep_until(&mut self, t: Nanos) {
        loop {
            self.watch();
            let now = self.events.clock.now();
            if now >= t || self.stop.load(Ordering::Relaxed) {
                return;
            }
            let left = Duration::from_nanos(t - now).min(Duration::from_millis(20));
            std::thread::sleep(left);
        }
    }

    /// Reads what the system under test spent, once a second of the measured window
    /// (the first reading, at its start, is the baseline).
    fn read_usage(&mut self) {
        let origin = self.events.origin;
        let now = self.events.clock.now();
        if origin == 0 || now < self.next_reading || now > self.end {
            return;
        }
        let groups = self.driver.process_groups();
        if groups.is_empty() {
            return;
        }
        let r = self.usage.read(&groups);
        let (t0, cpu0) = self.last_reading;
        if self.next_reading != 0 && now > t0 {
            self.resources.push(ResourceSample {
                t_s: (now - origin) as f64 / 1e9,
                cpu: (r.cpu_s - cpu0).max(0.0) / ((now - t0) as f64 / 1e9),
                rss_mib: r.rss_bytes as f64 / (1u64 << 20) as f64,
                processes: r.processes,
            });
        }
        self.last_reading = (now, r.cpu_s);
        let second = 1_000_000_000;
        self.next_reading = origin.max(self.next_reading) + second;
    }

    /// Notices a proxy that died (once) and reaps drained backends.
    fn watch(&mut self) {
        self.read_usage();
        if !self.proxy_died && !self.driver.alive() {
            self.proxy_died = true;
            self.events
                .log(EventKind::ProxyDied, self.driver.name(), None);
        }
        self.platform.tick();
    }

    /// Asks for a change (`ask`, logged as `requested`), then waits until `expect`
    /// holds (none: `ask` itself waited for its end), logged as `done` with the time
    /// from the request, or logs the failure. `ask` is handed a callback for each
    /// pod or process it replaces, logged as `pod_replaced` as it happens. Returns
    /// whether it succeeded.
    fn change<F>(
        &mut self,
        requested: Option<EventKind>,
        detail: &str,
        done: EventKind,
        expect: Option<Expect>,
        ask: F,
    ) -> bool
    where
        F: FnOnce(&mut dyn Driver, &mut dyn FnMut(String)) -> Result<(), SutError>,
    {
        // Timed from when the change is made: a load elsewhere has the request
        // logged (and the change made) only after its mark's lead.
        if let Some(kind) = requested {
            self.events.log(kind, detail, None);
        }
        let t0 = Instant::now();
        let timeout = self.settle_timeout;
        let (driver, events) = (&mut self.driver, &mut self.events);
        let res = ask(driver.as_mut(), &mut |pod: String| {
            events.log(EventKind::PodReplaced, pod, Some(t0.elapsed()));
        })
        .and_then(|_| match &expect {
            Some(e) => self.driver.settle(e, timeout),
            None => Ok(()),
        });
        match res {
            Ok(()) => {
                self.events.log(done, detail, Some(t0.elapsed()));
                true
            }
            Err(e) => {
                self.events.log(
                    EventKind::ChangeFailed,
                    format!("{detail}: {}", results::Causes(&e)),
                    Some(t0.elapsed()),
                );
                false
            }
        }
    }

    /// `restart: proxy`: the driver restarts its proxy its own way, and the
    /// endpoints in force are given to the new process. A proxy that does not come
    /// back is stopped for good (nothing of it left running), the failure logged,
    /// and the rest of the run measures what that does to the traffic.
    fn restart_proxy(&mut self) {
        let eps = self.platform.endpoints();
        let kind = self.driver.restart_kind();
        let detail = format!(
            "proxy ({}{})",
            kind.how,
            if kind.seamless { ", seamless" } else { "" }
        );
        let timeout = self.settle_timeout;
        let ok = self.change(
            Some(EventKind::RestartRequested),
            &detail,
            EventKind::RestartDone,
            None,
            |d, replaced| {
                d.restart_proxy(replaced)?;
                // The endpoints given again, and in force, before the restart is done.
                endpoint_push::endpoints_changed(d, &eps)?;
                d.settle(&Expect::endpoints(&eps), timeout)
            },
        );
        if !ok && !self.driver.alive() {
            if let Err(e) = self.driver.stop() {
                self.events.log(
                    EventKind::ChangeFailed,
                    format!(
                        "stopping what the failed restart left: {}",
                        results::Causes(&e)
                    ),
                    None,
                );
            }
        }
    }

    /// `rotate: certificate`: a new certificate from the platform (same names, new
    /// key and serial), given to the proxy the way its controller does. The event
    /// names both serials, which the result's rotation figures are read by.
    fn rotate_certificate(&mut self) {
        let issued = self
            .platform
            .new_certificate()
            .and_then(|(cert, key)| Ok((lab::certs::serial(&cert)?, cert, key)));
        let (serial, cert, key) = match issued {
            Ok(v) => v,
            Err(e) => {
                // Still a rotation asked for: its window, and its failure.
                self.events
                    .log(EventKind::RotateRequested, "certificate", None);
                self.events.log(
                    EventKind::ChangeFailed,
                    format!("certificate: {}", results::Causes(&e)),
                    None,
                );
                return;
            }
        };
        let old = self.serial.replace(serial.clone()).unwrap_or_default();
        // The event names the serials by their first 8 digits (enough to tell a
        // run's apart, short enough for a chart's marker); the result has them whole.
        let short = |s: &str| s.chars().take(8).collect::<String>();
        self.rotated.push((old.clone(), serial.clone()));
        let ok = self.change(
            Some(EventKind::RotateRequested),
            &format!("certificate {} -> {}", short(&old), short(&serial)),
            EventKind::RotateDone,
            Some(Expect::Applied),
            |d, _| d.rotate_certificate(&cert, &key),
        );
        if !ok {
            // Still the old one in force, as far as anyone knows.
            self.serial = Some(old);
        }
    }

    /// `drain: node`: the platform cordons the node and evicts its backends; each
    /// eviction and each replacement is logged as it happens, then the proxy is
    /// settled on the endpoints left.
    fn drain(&mut self, node: Option<&str>) {
        self.events
            .log(EventKind::DrainRequested, node.unwrap_or("node"), None);
        let t0 = Instant::now();
        let res = {
            let mut on = on_platform(
                &mut self.events,
                &mut self.added,
                &mut self.removed,
                EventKind::PodEvicted,
            );
            self.platform.drain(node, &mut on)
        };
        match res {
            Ok(name) => {
                self.events
                    .log(EventKind::DrainDone, name, Some(t0.elapsed()));
            }
            Err(e) => {
                self.events.log(
                    EventKind::ChangeFailed,
                    format!("drain: {}", results::Causes(&e)),
                    Some(t0.elapsed()),
                );
            }
        }
        self.endpoints_changed();
    }

    fn scale(&mut self, to: u32, mode: StopMode) {
        let have = self.platform.replicas();
        if to == have {
            return;
        }
        self.events
            .log(EventKind::ScaleRequested, format!("{have} -> {to}"), None);
        {
            let mut on = on_platform(
                &mut self.events,
                &mut self.added,
                &mut self.removed,
                EventKind::BackendStopping,
            );
            self.platform.scale(to, mode, &mut on);
        }
        self.endpoints_changed();
    }

    /// The endpoint set changed: `endpoint_push` pushes it to drivers that take
    /// it; either way the driver settles on the new set.
    fn endpoints_changed(&mut self) {
        let eps = self.platform.endpoints();
        let detail = eps
            .iter()
            .map(|e| e.id.as_str())
            .collect::<Vec<_>>()
            .join(",");
        // A driver that takes endpoints is asked (and the request logged); one that
        // discovers them is only waited for.
        let pushed = self.driver.capabilities().push_endpoints;
        self.change(
            pushed.then_some(EventKind::EndpointsRequested),
            &detail,
            EventKind::EndpointsApplied,
            Some(Expect::endpoints(&eps)),
            |d, _| endpoint_push::endpoints_changed(d, &eps).map(|_: Sync| ()),
        );
    }
}

/// Logs each platform event as it happens and notes each backend added and removed
/// (for propagation); a stop is logged as `stopping` (a scale's `backend_stopping`, a
/// drain's `pod_evicted`).
fn on_platform<'a>(
    events: &'a mut Events,
    added: &'a mut Vec<(String, Nanos)>,
    removed: &'a mut Vec<(String, Nanos)>,
    stopping: EventKind,
) -> impl FnMut(PlatformEvent) + 'a {
    move |ev| match ev {
        PlatformEvent::Ready { endpoint, took } => {
            let at = events.log(EventKind::BackendReady, &endpoint.id, Some(took));
            added.push((endpoint.id, at));
        }
        PlatformEvent::Stopping { id, mode } => {
            let at = events.log(stopping, format!("{id} ({})", mode.name()), None);
            removed.push((id, at));
        }
        PlatformEvent::Failed { detail } => {
            events.log(EventKind::ChangeFailed, detail, None);
        }
    }
}

/// Runs steps until they end or the load does. `depth` bounds nested repeats.
fn run_steps(sys: &mut System, steps: &[Step], depth: usize) {
    for st in steps {
        if sys.done() {
            return;
        }
        match st {
            Step::Wait(d) => {
                let until = sys.events.clock.now() + d.0.as_nanos() as Nanos;
                sys.sleep_until(until.min(sys.end));
            }
            Step::Scale(s) => {
                let mode = s.stop.map(StopMode::from).unwrap_or(sys.stop_mode);
                sys.scale(s.to, mode);
            }
            Step::Route(r) => {
                let route = r.route();
                sys.change(
                    Some(EventKind::RouteRequested),
                    route.name(),
                    EventKind::RouteApplied,
                    Some(Expect::Route(route)),
                    |d, _| d.apply_route(route),
                );
            }
            Step::RouteSet(step) => sys.change_route_set(*step),
            Step::Reload(true) => {
                sys.change(
                    Some(EventKind::ReloadRequested),
                    "",
                    EventKind::ReloadDone,
                    Some(Expect::Reloaded),
                    |d, _| d.reload(),
                );
            }
            Step::Restart(RestartWhat::Proxy) => sys.restart_proxy(),
            Step::Restart(RestartWhat::Controller) => {
                // Done once a new controller runs: what the next step asks for is
                // made while it resyncs, and timed by the traffic.
                sys.change(
                    Some(EventKind::RestartRequested),
                    "controller",
                    EventKind::RestartDone,
                    None,
                    |d, replaced| d.restart_controller(replaced),
                );
            }
            Step::Rotate(_) => sys.rotate_certificate(),
            Step::Drain(n) => sys.drain(n.node.as_deref()),
            Step::Reload(false) | Step::Restart(RestartWhat::Nothing) => {}
            Step::Repeat(r) => {
                let mut n = 0;
                while !sys.done() && r.times.is_none_or(|t| n < t) && depth < 4 {
                    run_steps(sys, &r.steps, depth + 1);
                    n += 1;
                }
            }
        }
    }
}

/// The load's figures before the first change and between each change and the next
/// (until the end of the measured window), from the engine's per-request counts:
/// `opened` names the event that started each window the engine counted by.
/// Windows that start after the measured window (an interrupted run) hold no
/// request and are left out.
fn windows(
    events: &[Event],
    opened: &[usize],
    tally: &Tally,
    end_ms: f64,
) -> (EventWindow, Vec<EventWindow>) {
    let figures = |i: usize, w: &mut EventWindow| {
        let Some(c) = tally.windows.get(i) else {
            return;
        };
        w.completed = c.completed;
        w.reconnects_after_server_close = c.reconnects;
        w.retried_after_goaway = c.retried;
        for k in results::ErrorKind::ALL {
            let n = c.errors[k.index()];
            if n > 0 {
                w.errors.insert(k.name().to_string(), n);
            }
        }
        if !c.latency.is_empty() {
            w.p99_ms = c.latency.value_at_quantile(0.99) as f64 / 1000.0;
            w.max_ms = c.max_us as f64 / 1000.0;
        }
    };
    let start = |i: usize| {
        opened
            .get(i)
            .map_or(end_ms, |&e| events[e].t_ms.min(end_ms))
    };
    let mut before = EventWindow {
        change: "before changes".into(),
        from_ms: 0.0,
        until_ms: start(0),
        ..Default::default()
    };
    figures(0, &mut before);
    let mut out = Vec::new();
    for (i, &ev) in opened.iter().enumerate() {
        let e = &events[ev];
        if e.t_ms >= end_ms {
            continue;
        }
        let mut w = EventWindow {
            change: format!("{} {}", e.kind.change().unwrap_or_default(), e.detail)
                .trim()
                .to_string(),
            from_ms: e.t_ms,
            until_ms: start(i + 1),
            ..Default::default()
        };
        figures(i + 1, &mut w);
        out.push(w);
    }
    (before, out)
}

/// Each route change as traffic saw it: from the engine's per-window marker counts,
/// the first response showing the new route and the last one not showing it yet,
/// beside when the driver said it was applied. A change's responses are those of the
/// windows from its request until the next route change, so a scale step in between
/// does not cut it short. `None` when the run changed no route.
fn route_propagation(
    events: &[Event],
    opened: &[usize],
    tally: &Tally,
    origin: Nanos,
) -> Option<RoutePropagation> {
    let routes: Vec<(usize, usize)> = opened
        .iter()
        .enumerate()
        .filter(|(_, &e)| events[e].kind == EventKind::RouteRequested)
        .map(|(i, &e)| (i + 1, e))
        .collect();
    if routes.is_empty() {
        return None;
    }
    let mut changes = Vec::new();
    for (k, &(w, e)) in routes.iter().enumerate() {
        let asked = &events[e];
        let Some(route) = lab::Route::parse(&asked.detail) else {
            continue;
        };
        let until = routes.get(k + 1).map_or(usize::MAX, |r| r.0);
        let mut seen = [engine::windows::Seen::default(); engine::windows::PATTERNS];
        let mut errors = 0;
        for c in tally.windows.iter().take(until).skip(w) {
            for (a, b) in seen.iter_mut().zip(c.markers.iter()) {
                a.merge(b);
            }
            errors += c.failed();
        }
        let expected = usize::from(route.shows());
        let mut old = engine::windows::Seen::default();
        for (p, s) in seen.iter().enumerate() {
            if p != expected {
                old.merge(s);
            }
        }
        let new = seen[expected];
        let since = |t: Nanos| ((t.saturating_sub(origin)) as f64 / 1e6 - asked.t_ms).max(0.0);
        // The first outcome logged after the request for this change.
        let applied = took_to(events, e, EventKind::RouteApplied);
        changes.push(RouteChange {
            route: route.name().to_string(),
            at_ms: asked.t_ms,
            applied_ms: applied,
            seen_ms: (new.responses > 0).then(|| since(new.first)),
            last_old_ms: (old.responses > 0).then(|| since(old.last)),
            responses_new: new.responses,
            responses_old: old.responses,
            errors,
        });
    }
    Some(RoutePropagation::of(changes))
}

/// From the change asked for by `events[asked]` until its `done` event, in ms;
/// `None` when the first outcome logged for it was a failure (or none was).
fn took_to(events: &[Event], asked: usize, done: EventKind) -> Option<f64> {
    let a = &events[asked];
    events[asked + 1..]
        .iter()
        .find(|x| {
            (x.kind == done && x.detail == a.detail)
                || (x.kind == EventKind::ChangeFailed && x.detail.starts_with(&a.detail))
        })
        .filter(|x| x.kind == done)
        .map(|x| (x.t_ms - a.t_ms).max(0.0))
}

/// Each certificate rotation as the load's handshakes saw it: the serials its event
/// names, looked up in what the engine counted per serial, and its window's errors.
fn rotations(
    events: &[Event],
    rotated: &[(String, String)],
    windows: &[EventWindow],
    seen: &BTreeMap<String, results::CertificateSeen>,
) -> Vec<results::Rotation> {
    let mut out = Vec::new();
    // A rotation whose certificate could not be made names no serials: it has no
    // entry in `rotated`.
    let asked = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::RotateRequested && e.detail.contains(" -> "));
    for ((i, e), (old, new)) in asked.zip(rotated) {
        let (old, new) = (old.as_str(), new.as_str());
        let applied = took_to(events, i, EventKind::RotateDone);
        let new_seen = seen.get(new);
        let last_old = seen
            .get(old)
            .filter(|c| c.last_ms >= e.t_ms)
            .map(|c| c.last_ms - e.t_ms);
        let w = windows
            .iter()
            .find(|w| w.kind() == "rotate" && (w.from_ms - e.t_ms).abs() < 1e-6);
        out.push(results::Rotation {
            at_ms: e.t_ms,
            serial_old: old.to_string(),
            serial_new: new.to_string(),
            applied_ms: applied,
            new_seen_ms: new_seen.map(|c| (c.first_ms - e.t_ms).max(0.0)),
            last_old_ms: last_old,
            handshakes_new: new_seen.map_or(0, |c| c.handshakes),
            tls_errors: w.and_then(|w| w.errors.get("tls").copied()).unwrap_or(0),
            errors: w.map_or(0, |w| w.errors.values().sum()),
            reconnects: w.map_or(0, |w| w.reconnects_after_server_close),
        });
    }
    out
}

/// Propagation of added and removed backends, from when each response arrived.
fn propagation(sys: &System, r: &RunResult) -> Propagation {
    let rel = |t: Nanos| (t as f64 - sys.events.origin as f64) / 1e6;
    let mut p = Propagation::default();
    for (id, at) in &sys.added {
        let at_ms = rel(*at);
        let seen = r.backends_seen.get(id).map(|s| s[0] - at_ms);
        p.added.push(PropagationEntry {
            backend: id.clone(),
            at_ms,
            propagation_ms: seen.map(|v| v.max(0.0)),
            errors_between: 0,
        });
    }
    for (id, at) in &sys.removed {
        let at_ms = rel(*at);
        let last = r.backends_seen.get(id).map(|s| s[1] - at_ms);
        let errors_between = match last {
            Some(d) if d > 0.0 => {
                let (s0, s1) = (
                    (at_ms / 1000.0).floor() as u64,
                    ((at_ms + d) / 1000.0).ceil() as u64,
                );
                r.timeline
                    .iter()
                    .filter(|s| s.t >= s0 && s.t < s1.max(s0 + 1))
                    .map(|s| s.errors)
                    .sum()
            }
            _ => 0,
        };
        p.removed.push(PropagationEntry {
            backend: id.clone(),
            at_ms,
            propagation_ms: last.map(|v| v.max(0.0)),
            errors_between,
        });
    }
    let vals = |v: &[PropagationEntry]| -> Vec<f64> {
        v.iter().filter_map(|e| e.propagation_ms).collect()
    };
    p.added_ms = Spread::of(&vals(&p.added));
    p.removed_ms = Spread::of(&vals(&p.removed));
    p
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

#[cfg(test)]
mod tests {
    use super::*;
    use lab::{Capabilities, DriverContext, Endpoint, Route, Target};
    use std::sync::Mutex;

    /// A proxy that leaves an old route's object behind, then fails to stop.
    struct Leaky;

    impl Driver for Leaky {
        fn name(&self) -> &'static str {
            "leaky"
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities::LOCAL_PROXY
        }
        fn prepare(&mut self, _: &DriverContext, _: &[Endpoint]) -> Result<(), SutError> {
            Ok(())
        }
        fn start(&mut self) -> Result<(), SutError> {
            Ok(())
        }
        fn wait_ready(&mut self, _: Duration) -> Result<(), SutError> {
            Ok(())
        }
        fn apply_route(&mut self, _: Route) -> Result<(), SutError> {
            Ok(())
        }
        fn reload(&mut self) -> Result<(), SutError> {
            Ok(())
        }
        fn settle(&mut self, _: &Expect, _: Duration) -> Result<(), SutError> {
            Ok(())
        }
        fn alive(&mut self) -> bool {
            true
        }
        fn stop(&mut self) -> Result<(), SutError> {
            Err(SutError::Io {
                what: "stop leaky".into(),
                // EPERM
                source: std::io::Error::from_raw_os_error(1),
            })
        }
        fn versions(&self) -> Vec<(String, String)> {
            Vec::new()
        }
        fn take_warnings(&mut self) -> Vec<SutError> {
            vec![SutError::Other("Middleware m not deleted".into())]
        }
    }

    /// A platform whose teardown leaves its namespace behind.
    struct Sticky;

    impl Platform for Sticky {
        fn name(&self) -> &'static str {
            "sticky"
        }
        fn prepare(&mut self, _: &SiteSpec) -> Result<DriverContext, SutError> {
            Err(SutError::Other("not for this test".into()))
        }
        fn target(&self) -> Target {
            Target::default()
        }
        fn endpoints(&self) -> Vec<Endpoint> {
            Vec::new()
        }
        fn replicas(&self) -> u32 {
            0
        }
        fn scale(&mut self, _: u32, _: StopMode, _: &mut dyn FnMut(PlatformEvent)) {}
        fn tick(&mut self) {}
        fn teardown(&mut self) -> Result<(), SutError> {
            Err(SutError::Other("namespace n not deleted".into()))
        }
    }

    fn options(told: Arc<Mutex<Vec<String>>>) -> RunOptions {
        RunOptions {
            out_dir: PathBuf::new(),
            exe: PathBuf::new(),
            stop: Arc::new(AtomicBool::new(false)),
            progress: Box::new(|_| {}),
            system_done: Box::new(|_| {}),
            load: None,
            watch: None,
            warn: Arc::new(move |w| told.lock().unwrap().push(w.to_string())),
        }
    }

    /// What a system leaves behind is each a warning with its causes: in the result
    /// of a run that ends, told to `warn` by one that fails (dropped unclosed).
    #[test]
    fn what_a_system_leaves_behind_is_warned_of_once() {
        let told = Arc::new(Mutex::new(Vec::new()));
        let opts = options(told.clone());
        let mut sys = System::new(Box::new(Leaky), Box::new(Sticky), Clock::start(), &opts);
        let want = [
            "Middleware m not deleted",
            "stop leaky: Operation not permitted (os error 1)",
            "namespace n not deleted",
        ];
        assert_eq!(sys.close(), want);
        assert!(sys.close().is_empty(), "closed once");
        drop(sys);
        assert!(
            told.lock().unwrap().is_empty(),
            "a closed system tells nothing more"
        );
        // A run that failed drops its system unclosed: the same, told.
        drop(System::new(
            Box::new(Leaky),
            Box::new(Sticky),
            Clock::start(),
            &opts,
        ));
        assert_eq!(*told.lock().unwrap(), want);
    }

    fn ev(t_ms: f64, kind: EventKind, detail: &str) -> Event {
        Event {
            t_ms,
            kind,
            detail: detail.into(),
            took_ms: None,
        }
    }

    /// A load elsewhere gets each change's mark ahead of it: the window opens at
    /// `now + lead`, the mark goes out at once, and the change (the return of `log`)
    /// is made only at that time. A step inside a change opens no window.
    #[test]
    fn a_change_is_announced_ahead_when_the_load_runs_elsewhere() {
        let clock = Clock::start();
        let (tx, rx) = mpsc::channel();
        let lead = Duration::from_millis(80);
        let watch = Arc::new(Steps::default());
        let mut ev = Events {
            clock,
            origin: 1,
            list: Vec::new(),
            marks: Arc::new(Marks::new()),
            opened: Vec::new(),
            forward: Some(tx),
            lead: lead.as_nanos() as Nanos,
            watch: Some(watch.clone()),
        };
        let asked = clock.now();
        let t = ev.log(EventKind::RouteRequested, "cors", None);
        let made = clock.now();
        let sent = rx.try_recv().expect("forwarded before the change");
        assert_eq!(sent, t);
        assert!(t >= asked + lead.as_nanos() as Nanos, "{t} {asked}");
        assert!(made >= t, "the change was made before its mark's time");
        assert_eq!(ev.marks.len(), 1);
        assert_eq!(ev.marks.window_of(t - 1), 0);
        assert_eq!(ev.marks.window_of(t), 1);
        assert_eq!(ev.list[0].0, t);
        ev.log(EventKind::RouteApplied, "cors", None);
        assert!(rx.try_recv().is_err());
        assert_eq!(ev.marks.len(), 1);
        // The live view is told of the change once, as the event log says it.
        ev.log(EventKind::ReloadRequested, "", None);
        assert_eq!(
            *watch.0.lock().unwrap(),
            [(1, "route cors".to_string()), (2, "reload".to_string())]
        );
    }

    /// A live view that keeps the changes it is told of.
    #[derive(Default)]
    struct Steps(std::sync::Mutex<Vec<(usize, String)>>);

    impl Watch for Steps {
        fn system(&self, _: &str, _: &str, _: Option<f64>) {}
        fn step(&self, index: usize, change: &str) {
            self.0.lock().unwrap().push((index, change.to_string()));
        }
        fn second(&self, _: &results::TimelineEntry) {}
    }

    #[test]
    fn windows_follow_the_marked_changes_and_add_up() {
        let events = [
            ev(1000.0, EventKind::ScaleRequested, "2 -> 3"),
            ev(1300.0, EventKind::BackendReady, "b3"),
            ev(2000.0, EventKind::RouteRequested, "cors"),
            ev(3200.0, EventKind::ReloadRequested, ""),
            // After an interrupt ended the measured window at 3.5 s.
            ev(3600.0, EventKind::ReloadRequested, ""),
        ];
        let mut tally = Tally::default();
        for (w, n) in [(0, 200), (1, 200), (2, 239), (3, 60)] {
            for _ in 0..n {
                tally.response(w, 2_000_000, 200);
            }
        }
        tally.error(2, results::ErrorKind::Read);
        let (before, w) = windows(&events, &[0, 2, 3, 4], &tally, 3500.0);
        assert_eq!(
            (
                before.change.as_str(),
                before.from_ms,
                before.until_ms,
                before.completed
            ),
            ("before changes", 0.0, 1000.0, 200)
        );
        let got: Vec<(&str, f64, f64, u64)> = w
            .iter()
            .map(|w| (w.change.as_str(), w.from_ms, w.until_ms, w.completed))
            .collect();
        assert_eq!(
            got,
            [
                ("scale 2 -> 3", 1000.0, 2000.0, 200),
                ("route cors", 2000.0, 3200.0, 239),
                ("reload", 3200.0, 3500.0, 60),
            ]
        );
        assert_eq!(w[1].errors.get("read"), Some(&1));
        assert!(w[0].errors.is_empty() && w[2].errors.is_empty());
        assert!(
            (w[0].p99_ms - 2.0).abs() < 0.02 && w[0].max_ms == 2.0,
            "{:?}",
            w[0]
        );
    }

    /// Two route changes with a scale between: each change's responses come from its
    /// windows until the next route change, the old route's stragglers are the last
    /// old response, a change never seen has no `seen_ms`, and `applied_ms` comes
    /// from the driver's own event (none when it failed).
    #[test]
    fn route_changes_are_timed_from_the_responses_that_show_them() {
        let events = [
            ev(1000.0, EventKind::RouteRequested, "header"),
            ev(1010.0, EventKind::RouteApplied, "header"),
            ev(1500.0, EventKind::ScaleRequested, "2 -> 3"),
            ev(3000.0, EventKind::RouteRequested, "base"),
            ev(3100.0, EventKind::ChangeFailed, "base: timed out"),
        ];
        let origin: Nanos = 5_000_000_000;
        let at = |ms: u64| origin + ms * 1_000_000;
        let mut tally = Tally::default();
        // Window 1 (header asked at 1000 ms): old responses until 1040, new from 1025.
        tally.marked(1, 0, at(1005));
        tally.marked(1, 0, at(1040));
        tally.marked(1, 0b010, at(1025));
        tally.error(1, results::ErrorKind::Read);
        // Window 2 (the scale) still belongs to the header change.
        tally.marked(2, 0b010, at(1600));
        tally.marked(2, 0b011, at(1700));
        // Window 3 (base at 3000 ms): nothing shows it.
        tally.marked(3, 0b010, at(3050));
        tally.marked(0, 0, at(10));
        let p = route_propagation(&events, &[0, 2, 3], &tally, origin).unwrap();
        let c = &p.changes;
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].route, "header");
        assert_eq!(c[0].applied_ms, Some(10.0));
        assert_eq!(c[0].seen_ms, Some(25.0));
        assert_eq!(
            c[0].last_old_ms,
            Some(700.0),
            "the 0b011 response is not the header route"
        );
        assert_eq!(
            (c[0].responses_new, c[0].responses_old, c[0].errors),
            (2, 3, 1)
        );
        assert_eq!(c[1].route, "base");
        assert_eq!((c[1].applied_ms, c[1].seen_ms), (None, None));
        assert_eq!(c[1].last_old_ms, Some(50.0));
        assert_eq!(p.seen_ms.n, 1);
        assert!(route_propagation(&events[2..3], &[0], &tally, origin).is_none());
    }
}
