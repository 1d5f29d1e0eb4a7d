//! The cases of a plan: one per thing a run measures (a system; a system at one size
//! of a route-scale sweep; its tuned variant; a repetition; a search and the runs at
//! fractions of its maximum; a row of a sizing scan), each resolved from the scenario
//! with everything the runner needs: its name, what to deploy, its load, its steps
//! and its role. The runner executes cases and never reads the scenario file; what
//! the file means is decided here, once.

use super::load::CaseLoad;
use super::LoadMode;
use crate::sizing::allocation;
use crate::{Key, PlatformKind, Scenario, Step, TlsVersion};
use lab::backends::StopMode;
use lab::health::PassiveHealth;
use lab::platform::{BackendSpec, FlapSpec, Placement, SiteSpec, TlsSpec};
use lab::{certs, Platform, SutError};
use results::search::SearchBounds;
use results::sizing::Measure;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One thing a run measures, as the runner executes it.
#[derive(Clone, Debug)]
pub struct Case {
    /// Its results folder (and rows): `nginx`, `nginx+passive`, `nginx-100routes`,
    /// `nginx@30`.
    pub name: String,
    /// The system deployed: a profile of the lab or a controller on a cluster.
    pub system: String,
    /// The scenario's name, as its results say it.
    pub scenario: String,
    pub deploy: Deployment,
    pub load: CaseLoad,
    /// The changes made while the load runs (none for a search or a sizing row).
    pub steps: Vec<Step>,
    pub role: Role,
    /// The behaviour probes sent before its load (`probes:`).
    pub probes: Option<ProbesPlan>,
    /// The WebSocket sessions (or gRPC streams) held beside its load (`sessions:`).
    pub sessions: Option<SessionsPlan>,
}

/// `sessions:` as a case runs them, checked.
#[derive(Clone, Debug)]
pub struct SessionsPlan {
    pub settings: engine::sessions::SessionSettings,
    /// The upgrade's path in place of the load's.
    pub path: Option<String>,
}

impl SessionsPlan {
    /// `scn`'s sessions, if it has some (its values were checked with the scenario).
    pub fn of(scn: &Scenario) -> Option<SessionsPlan> {
        let s = scn.sessions.as_ref()?;
        Some(SessionsPlan {
            settings: engine::sessions::SessionSettings {
                grpc: s.grpc_streams.map(|_| {
                    s.method
                        .clone()
                        .unwrap_or_else(|| engine::sessions::ECHO_STREAM.into())
                }),
                sessions: s.websocket.or(s.grpc_streams).unwrap_or(1),
                message_rate: s.rate,
                message_bytes: results::size::parse(&s.message_size).unwrap_or(32),
                reopen: engine::sessions::Reopen::parse(&s.reopen)
                    .unwrap_or(engine::sessions::Reopen::AtOnce),
            },
            path: s.path.clone(),
        })
    }
}

/// `probes:` as a case runs them.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbesPlan {
    /// The system the others are compared with.
    pub baseline: String,
    /// The built-in ones in the corpus's order, then the scenario's own; each with
    /// what the scenario expects of it.
    pub probes: Vec<crate::probes::Spec>,
    /// Again after each change step and at the end of the load.
    pub during: bool,
    /// The annotation corpus is among the probes (`probes.corpus`): its fixtures
    /// are applied and a matrix cell is made per behaviour.
    pub corpus: bool,
}

impl ProbesPlan {
    /// `scn`'s probes, if it has some.
    pub fn of(scn: &Scenario) -> Option<ProbesPlan> {
        let p = scn.probes.as_ref()?;
        let wanted = |id: &str| p.only.is_empty() || p.only.iter().any(|o| o == id);
        let mut probes: Vec<crate::probes::Spec> = crate::probes::CORPUS
            .iter()
            .filter(|c| wanted(c.id) && (!c.named_only || p.only.iter().any(|o| o == c.id)))
            .map(crate::probes::Spec::from)
            .collect();
        probes.extend(
            p.add
                .iter()
                .filter(|u| wanted(&u.id))
                .map(crate::probes::Spec::from),
        );
        if p.corpus.is_some() {
            probes.extend(crate::probes::corpus_specs(&p.only));
        }
        for spec in &mut probes {
            if let Some(e) = p.expect.get(&spec.id) {
                spec.expect = Some(e.clone());
            }
            if !p.record.is_empty() {
                spec.headers.push(format!(
                    "{}: {}",
                    backend::probe::RECORD_HEADER,
                    p.record.join(", ")
                ));
            }
        }
        Some(ProbesPlan {
            baseline: p
                .baseline
                .clone()
                .or_else(|| scn.systems.first().map(|s| s.name().to_string()))
                .unwrap_or_default(),
            probes,
            during: p.during,
            corpus: p.corpus.is_some(),
        })
    }
}

/// What a case is for.
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    /// A run at the load's rate: repetition `rep` (from 1) of `of`, all of whose
    /// results are combined under the case's name.
    Run { rep: usize, of: usize },
    /// The search of the system's maximum; the `Fraction` cases after it run at
    /// fractions of what it finds.
    Search(SearchSpec),
    /// A run at `fraction` of the maximum the system's search found.
    Fraction { fraction: f64 },
    /// A row of the system's sizing scan (study S4).
    SizingRow(Box<RowSpec>),
}

/// A search for a maximum: its step's window, its probe and its bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchSpec {
    pub probe: Duration,
    pub warmup: Duration,
    pub duration: Duration,
    pub bounds: SearchBounds,
    pub precision: f64,
    pub trials: usize,
}

/// A row of a sizing scan: an allocation of the proxy and a measure.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSpec {
    /// Its place in the system's scan, from 0 (names its CPU quota's cgroup).
    pub index: usize,
    pub cores: f64,
    pub measure: Measure,
    /// CPUs (one worker each) and the quota, if any.
    pub workers: usize,
    pub quota: Option<f64>,
    /// The proxy's CPUs, or why the row is skipped (it needs more than the
    /// proxy's set).
    pub cpus: Result<Vec<usize>, String>,
    pub search: SearchSpec,
    /// The price of a core for an hour, and its currency.
    pub cost: Option<(f64, String)>,
}

/// What a case deploys: the platform, the backends, the proxy's settings.
#[derive(Clone, Debug)]
pub struct Deployment {
    pub platform: PlatformSpec,
    pub placement: Placement,
    /// The system's site; `out_dir` is the case's folder, relative to the run's.
    pub site: SiteSpec,
    /// How backends stop when a scale step does not say.
    pub stop: StopMode,
    pub flapping: Option<FlapSpec>,
    /// The tuned variant's passive health checks.
    pub passive: Option<PassiveHealth>,
    /// The proxy counts its TLS handshakes (a sizing row's TPS).
    pub count_handshakes: bool,
    /// A step rotates the certificate: its serial is read at deployment.
    pub rotates_certificate: bool,
    /// The route set given before the load.
    pub routes: Option<RoutesPlan>,
}

/// `routes:`: the set and how long until every route must serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutesPlan {
    pub set: lab::RouteSet,
    pub bound: Duration,
}

/// Where a case's system runs; [`PlatformSpec::build`] is the one place a platform
/// is built.
#[derive(Clone, Debug)]
pub enum PlatformSpec {
    Local,
    NetworkLab(lab::network::NetworkOptions),
    /// `run` is left empty: each deployment gets its own ([`PlatformSpec::build`]).
    Kubernetes(Box<kubernetes::ClusterSpec>),
}

impl PlatformSpec {
    fn of(scn: &Scenario, system: &str) -> PlatformSpec {
        match scn.platform {
            PlatformKind::Local => PlatformSpec::Local,
            PlatformKind::NetworkLab => {
                let n = scn.network_lab.clone().unwrap_or_default();
                PlatformSpec::NetworkLab(lab::network::NetworkOptions {
                    notrack: n.notrack,
                    sysctls: n.sysctls(),
                    access_log: n.access_log,
                })
            }
            PlatformKind::Kubernetes => {
                let k = scn.kubernetes.clone().unwrap_or_default();
                let own_gateway =
                    k.gateway_class_for(system)
                        .map(|class| kubernetes::gateway::OwnGateway {
                            class,
                            http_port: k.gateway_ports.http,
                            https_port: k.gateway_ports.https,
                            timeout: k
                                .gateway_timeout
                                .map_or(kubernetes::gateway::PROGRAMMED_WAIT, |d| d.0),
                        });
                PlatformSpec::Kubernetes(Box::new(kubernetes::ClusterSpec {
                    manifests: k.manifest_texts.get(system).cloned(),
                    grpc: scn.protocol == crate::Protocol::Grpc,
                    ingress_class: k.ingress_class_for(system),
                    serve_timeout: k.serve_timeout.map(|d| d.0),
                    gateway: k.gateway_for(system),
                    own_gateway,
                    cacert: k.cacert.clone(),
                    kubeconfig: k.kubeconfig,
                    context: k.context,
                    namespace: k.namespace,
                    keep: k.keep,
                    run: String::new(),
                    urls: k.urls.into_iter().collect(),
                    processes: k.processes.into_iter().collect(),
                    image: k.image,
                    host: k.host,
                    installs: k
                        .workloads
                        .into_iter()
                        .map(|(system, w)| (system, w.install()))
                        .collect(),
                }))
            }
        }
    }

    /// The platform of `system`. On a cluster each deployment gets its own run id
    /// (and so its own namespace): a namespace is deleted asynchronously, and the
    /// next system must not wait for it or meet its leftovers.
    ///
    /// # Errors
    /// [`SutError`] when the platform cannot start (a network lab's namespaces, a
    /// cluster's client).
    pub fn build(&self, system: &str, exe: &Path) -> Result<Box<dyn Platform>, SutError> {
        match self {
            PlatformSpec::Local => Ok(Box::new(lab::local::LocalProcesses::new(exe))),
            PlatformSpec::NetworkLab(opts) => Ok(Box::new(lab::network::NetworkLab::new(
                system,
                opts.clone(),
            )?)),
            PlatformSpec::Kubernetes(spec) => {
                // Milliseconds: two runs started in one second (a run that failed
                // at once, then the next) must not meet in one namespace.
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                let mut spec = (**spec).clone();
                spec.run = format!("{stamp:x}-{system}").chars().take(40).collect();
                Ok(Box::new(kubernetes::Kubernetes::new(spec)?))
            }
        }
    }
}

/// The name of a run at a fraction of `system`'s maximum, as its folder and its
/// rows are named: `host@30`.
pub fn fraction_label(system: &str, fraction: f64) -> String {
    format!("{system}@{}", (fraction * 100.0).round())
}

/// Every case of `scn` for the systems `only`, in the order they run.
pub(crate) fn resolve(
    scn: &Scenario,
    only: &[String],
    repeat: usize,
    mode: &LoadMode,
) -> Vec<Case> {
    let (LoadMode::Fractions(_) | LoadMode::Sizing, Some(sr)) = (mode, &scn.search) else {
        // `load.rates` and `sizing` come with their `search` section (the checks).
        return given(scn, only, repeat);
    };
    let search = search_spec(sr, None);
    match mode {
        LoadMode::Fractions(fractions) => only
            .iter()
            .flat_map(|system| {
                let search = case(scn, system, system, Role::Search(search.clone()));
                let runs = fractions.iter().map(|&fraction| {
                    let name = fraction_label(system, fraction);
                    case(scn, system, &name, Role::Fraction { fraction })
                });
                std::iter::once(search).chain(runs).collect::<Vec<_>>()
            })
            .collect(),
        _ => only
            .iter()
            .flat_map(|system| sizing(scn, sr, system))
            .collect(),
    }
}

/// Each system at the scenario's rate: its default, then its tuned variant
/// (`passive_health`), each at every size of a `route_scale` sweep; all of them once,
/// then all again, `repeat` times.
fn given(scn: &Scenario, only: &[String], repeat: usize) -> Vec<Case> {
    let sizes = scn.route_sizes();
    let mut once = Vec::new();
    // The probes' baseline first: the others are compared with it as they run.
    let mut order: Vec<&String> = only.iter().collect();
    if let Some(b) = ProbesPlan::of(scn).map(|p| p.baseline) {
        order.sort_by_key(|s| **s != b);
    }
    for system in order {
        for (label, passive) in crate::failover::variants(scn, system) {
            for &n in &sizes {
                let (name, sized) = match n {
                    Some(n) => (crate::route_scale_label(&label, n), scn.with_routes(n)),
                    None => (label.clone(), scn.clone()),
                };
                let mut c = case(&sized, system, &name, Role::Run { rep: 1, of: repeat });
                c.deploy.passive = passive.clone();
                once.push(c);
            }
        }
    }
    let repeat = repeat.max(1);
    (1..=repeat)
        .flat_map(|rep| {
            once.iter().map(move |c| Case {
                role: Role::Run { rep, of: repeat },
                ..c.clone()
            })
        })
        .collect()
}

/// The rows of `system`'s sizing scan, each on a scenario of its own
/// ([`row_scenario`]).
fn sizing(scn: &Scenario, sr: &crate::SearchSection, system: &str) -> Vec<Case> {
    let Some(z) = &scn.sizing else {
        return Vec::new();
    };
    let placement = crate::PlacementSpec::resolve(scn.placement.as_ref());
    let cost = z
        .cost
        .as_ref()
        .map(|c| (c.per_core_hour, c.currency.clone()));
    z.rows()
        .into_iter()
        .enumerate()
        .map(|(index, (cores, measure))| {
            let (workers, quota) = allocation(cores);
            let cpus = if workers > placement.proxy.len() {
                Err(format!(
                    "needs {workers} CPUs, the proxy's set (placement.proxy: {}) has {}: the generator keeps its own",
                    lab::platform::fmt_set(&placement.proxy),
                    placement.proxy.len()
                ))
            } else {
                Ok(placement.proxy[..workers].to_vec())
            };
            let row_scn = match &cpus {
                Ok(cpus) => row_scenario(scn, &measure, cpus, z.rps_tls),
                Err(_) => scn.clone(),
            };
            let tps = measure.is_tps();
            let p99 = match (&z.tps, tps) {
                (Some(t), true) => t.p99.map(|d| d.0),
                _ => None,
            };
            let row = RowSpec {
                index,
                cores,
                measure: measure.clone(),
                workers,
                quota,
                cpus,
                search: search_spec(sr, p99),
                cost: cost.clone(),
            };
            let mut c = case(&row_scn, system, system, Role::SizingRow(Box::new(row)));
            c.deploy.count_handshakes = tps;
            if let Measure::Tps { resumption, .. } = measure {
                c.load.spec.tls.resume = resumption;
            }
            c
        })
        .collect()
}

/// The scenario one sizing row runs: the measure's response size or TLS settings,
/// and the proxy on `cpus` (one worker each).
fn row_scenario(scn: &Scenario, measure: &Measure, cpus: &[usize], rps_tls: bool) -> Scenario {
    let mut s = scn.clone();
    let mut p = scn.placement.clone().unwrap_or_default();
    p.proxy = Some(cpus.to_vec());
    s.placement = Some(p);
    match measure {
        Measure::Rps { body_size } => {
            s.backends.body_size = *body_size;
            s.tls.enabled = rps_tls;
            s.load.new_connection = false;
        }
        Measure::Tps { key, version, .. } => {
            s.tls.enabled = true;
            s.tls.key = match key {
                results::tls::KeyType::Rsa2048 => Key::Rsa2048,
                results::tls::KeyType::EcdsaP256 => Key::EcdsaP256,
            };
            s.tls.version = match version {
                results::tls::TlsVersion::V12 => TlsVersion::V12,
                results::tls::TlsVersion::V13 => TlsVersion::V13,
            };
            s.load.new_connection = true;
            if let Some(c) = s.sizing.as_ref().and_then(|z| z.tps.as_ref()?.connections) {
                s.load.connections = c.max(s.load.threads);
            }
        }
    }
    s
}

/// The `search` section as a search's settings, with the p99 bound `p99` in place of
/// its own when given (a TPS row's).
fn search_spec(sr: &crate::SearchSection, p99: Option<Duration>) -> SearchSpec {
    SearchSpec {
        probe: sr.probe.0,
        warmup: sr.warmup.0,
        duration: sr.duration.0,
        bounds: SearchBounds {
            p99_ms: p99.unwrap_or(sr.p99.0).as_secs_f64() * 1e3,
            error_ratio: crate::share(&sr.errors).unwrap_or(0.001),
            min_achieved: 0.99,
        },
        precision: crate::share(&sr.precision).unwrap_or(0.02),
        trials: sr.trials,
    }
}

/// A case of `system` named `name` from `scn`: its deployment, its load (on the
/// generator's CPUs) and its steps.
fn case(scn: &Scenario, system: &str, name: &str, role: Role) -> Case {
    let placement = crate::PlacementSpec::resolve(scn.placement.as_ref());
    let site = SiteSpec {
        system: system.to_string(),
        out_dir: PathBuf::from(name),
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
                Key::Rsa2048 => certs::KeyType::Rsa2048,
                Key::EcdsaP256 => certs::KeyType::EcdsaP256,
            },
            http2: scn.protocol != crate::Protocol::Http1,
        },
        grpc: scn.protocol == crate::Protocol::Grpc,
        // Only a run that asks the fixture's host renders it.
        probe_fixture: ProbesPlan::of(scn).is_some_and(|p| {
            p.probes
                .iter()
                .any(|s| s.host.as_deref() == Some(lab::routes::FIXTURE_HOST))
        }),
        probe_corpus: ProbesPlan::of(scn).is_some_and(|p| p.corpus),
    };
    let mut load = CaseLoad::of(scn);
    load.spec.cpus = placement.generator.clone();
    let measured = matches!(role, Role::Run { .. } | Role::Fraction { .. });
    Case {
        name: name.to_string(),
        system: system.to_string(),
        scenario: scn.name.clone(),
        deploy: Deployment {
            platform: PlatformSpec::of(scn, system),
            site,
            stop: scn.backends.stop.into(),
            flapping: crate::failover::flap_spec(scn),
            passive: None,
            count_handshakes: false,
            rotates_certificate: measured && scn.tls.enabled && scn.changes_certificate(),
            routes: scn.routes.as_ref().map(|r| RoutesPlan {
                set: lab::RouteSet::new(r.count, r.hosts),
                bound: r.bound.0,
            }),
            placement,
        },
        load,
        steps: if measured {
            scn.changes.clone()
        } else {
            Vec::new()
        },
        role,
        probes: if measured { ProbesPlan::of(scn) } else { None },
        sessions: if measured {
            SessionsPlan::of(scn)
        } else {
            None
        },
    }
}
