//! One checked run plan, built once from the scenario file and `run`'s flags.
//!
//! `validate` and `run` both build a [`Plan`], so a file that validates is one `run`
//! accepts with the same flags, and every refusal has one wording and one line. What
//! the plan decides is resolved here into its [`Case`]s (which systems, what each
//! deploys, its load, its steps, where the load runs): the runner executes them and
//! never reads the scenario file again. [`PlatformSpec::build`] is the one place
//! that builds a platform.

mod cases;
mod load;

pub use cases::{
    fraction_label, Case, Deployment, PlatformSpec, ProbesPlan, Role, RoutesPlan, RowSpec,
    SearchSpec, SessionsPlan,
};
pub use load::{load_spec, CaseLoad, RequestsPlan, GRPC_METHOD, GRPC_PAYLOAD};

use crate::{Bad, ClusterFlags, GeneratorPods, PlatformKind, Scenario, ScenarioError};
use engine::split::{self, SplitError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The head start of generator pods before the load, beyond the connect timeout:
/// scheduling and an image pull.
pub const DEFAULT_POD_LEAD: Duration = Duration::from_secs(30);

/// `run`'s flags that shape the plan (those that only say where to write, or when to
/// fail afterwards, stay with the command). `validate` takes the same.
#[derive(Clone, Debug)]
pub struct RunFlags {
    /// `--quick`: the scenario's `quick` section replaces durations, rates, connections.
    pub quick: bool,
    /// `--only`: these systems, each one of the scenario's.
    pub only: Vec<String>,
    /// `--repeat`: runs of each system, taking turns.
    pub repeat: usize,
    /// `--platform`, `--system`, `--kubeconfig` and the other cluster flags.
    pub cluster: ClusterFlags,
    /// `--generators`: over how many generators each system's load is split.
    pub generators: Option<usize>,
    /// `--generator-image`.
    pub generator_image: Option<String>,
    /// `--lead`, as written.
    pub lead: Option<String>,
    /// Whether `--metrics-listen` is given (the live metrics come from this process).
    pub metrics_listen: bool,
}

impl Default for RunFlags {
    fn default() -> Self {
        RunFlags {
            quick: false,
            only: Vec::new(),
            repeat: 1,
            cluster: ClusterFlags::default(),
            generators: None,
            generator_image: None,
            lead: None,
            metrics_listen: false,
        }
    }
}

/// What each system's load is.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadMode {
    /// `load.rate`: a constant rate or a plan of steps and ramps.
    Given,
    /// `load.rates`: fractions of each system's maximum, searched first.
    Fractions(Vec<f64>),
    /// `sizing`: each system's maximum at each CPU allocation (study S4).
    Sizing,
}

/// Where each system's load is generated.
#[derive(Clone, Debug, PartialEq)]
pub enum Generators {
    /// By this process.
    InProcess,
    /// Split over `count` child processes on this machine.
    Local { count: usize },
    /// Split over the `count` pods of an indexed Job in the cluster.
    Pods {
        count: usize,
        pods: GeneratorPodsPlan,
    },
}

/// The generator pods, resolved from `kubernetes.generators` and the flags.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorPodsPlan {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
    /// `None`: the default image (`ingressbench`).
    pub image: Option<String>,
    pub node_selector: BTreeMap<String, String>,
    pub spread: bool,
    pub host_network: bool,
    /// The pods' head start before the load.
    pub lead: Duration,
}

/// A scenario checked together with the flags it runs under.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The scenario with the flags applied (`--quick`, the cluster flags).
    pub scenario: Scenario,
    /// The file as written, stored beside the results.
    pub text: String,
    /// The systems to run, in the scenario's order (all unless `--only`).
    pub only: Vec<String>,
    pub repeat: usize,
    pub load: LoadMode,
    pub generators: Generators,
    /// What the run does, in order: one case per thing measured.
    pub cases: Vec<Case>,
    /// The scenario as it runs (the flags applied), as JSON: stored beside the file
    /// as written.
    pub effective: Vec<u8>,
}

/// Where a generator count came from, so a refusal names what the user wrote.
#[derive(Clone, Copy)]
enum CountFrom {
    Flag,
    File,
}

impl CountFrom {
    /// `--generators 3` or `kubernetes.generators.count: 3`.
    fn said(self, n: usize) -> String {
        match self {
            CountFrom::Flag => format!("--generators {n}"),
            CountFrom::File => format!("kubernetes.generators.count: {n}"),
        }
    }

    /// What to drop to take it back.
    fn what(self) -> &'static str {
        match self {
            CountFrom::Flag => "--generators",
            CountFrom::File => "kubernetes.generators.count",
        }
    }
}

impl Plan {
    /// Reads the scenario file and checks it with `flags`.
    ///
    /// # Errors
    /// [`ScenarioError`]: the file's (naming the line and the key), or a flag's.
    pub fn load(path: &Path, flags: RunFlags) -> Result<Plan, ScenarioError> {
        let (s, text) = Scenario::load(path)?;
        Plan::build(s, text, &path.display().to_string(), flags)
    }

    /// Checks a parsed scenario (`text` as written, `file` naming it) with `flags`.
    ///
    /// # Errors
    /// [`ScenarioError`]: a refusal naming the flag, or the key and its line.
    pub fn build(
        mut s: Scenario,
        text: String,
        file: &str,
        flags: RunFlags,
    ) -> Result<Plan, ScenarioError> {
        let flag = |msg: String| ScenarioError::Flag(msg);
        // A refusal that names a key of the file: its line, as the file's own checks.
        let keyed = |key: &'static str, msg: String| Bad::new(key, msg).located(&text, file);
        if flags.quick {
            s = s.quick();
        }
        s.override_cluster(flags.cluster).map_err(flag)?;
        for o in &flags.only {
            if !s.systems.iter().any(|p| p.name() == o) {
                return Err(flag(format!(
                    "--only {o}: not in this scenario: use one of {}",
                    s.system_names()
                )));
            }
        }
        if flags.repeat == 0 {
            return Err(flag(
                "--repeat 0: give at least 1 (the number of runs of each system)".into(),
            ));
        }
        // The probes' baseline among the systems that run: the others are compared
        // with it, and without it a gate on their differences could not fail.
        if let Some(b) = s.probes.as_ref().and_then(|p| p.baseline.clone()) {
            if !s.systems.iter().any(|p| p.name() == b) {
                return Err(keyed(
                    "probes.baseline",
                    format!(
                        "probes.baseline: {b} is not among the systems ({})",
                        s.system_names()
                    ),
                ));
            }
        }
        if let Some(p) = &s.probes {
            let base = p
                .baseline
                .clone()
                .or_else(|| s.systems.first().map(|x| x.name().to_string()))
                .unwrap_or_default();
            if !flags.only.is_empty() && !flags.only.contains(&base) {
                return Err(flag(format!(
                    "--only {}: leaves out {base}, the probes' baseline: add it, or name another in probes.baseline",
                    flags.only.join(",")
                )));
            }
        }
        let load = if s.sizing.is_some() {
            LoadMode::Sizing
        } else if !s.load.rates.is_empty() {
            LoadMode::Fractions(s.load.rates.clone())
        } else {
            LoadMode::Given
        };
        if flags.repeat > 1 && load != LoadMode::Given {
            let key = if load == LoadMode::Sizing {
                "sizing"
            } else {
                "load.rates"
            };
            return Err(keyed(
                key,
                format!(
                    "--repeat {} with {key}: its runs follow a search of their own, which is not repeated: drop --repeat, or give load.rate",
                    flags.repeat
                ),
            ));
        }
        let on_cluster = s.platform == PlatformKind::Kubernetes;
        if !on_cluster && (flags.generator_image.is_some() || flags.lead.is_some()) {
            return Err(flag(
                "--generator-image and --lead are for generator pods: use them with platform kubernetes and --generators N".into(),
            ));
        }
        let pods: GeneratorPods = s
            .kubernetes
            .as_ref()
            .map(|k| k.generators.clone())
            .unwrap_or_default();
        let (count, from) = match (flags.generators, pods.count) {
            (Some(n), _) => (n, CountFrom::Flag),
            (None, Some(n)) => (n, CountFrom::File),
            (None, None) => (1, CountFrom::Flag),
        };
        // A refusal of a count: on the file's line when the file gave it.
        let refuse = |msg: String| match from {
            CountFrom::Flag => flag(msg),
            CountFrom::File => keyed("kubernetes.generators.count", msg),
        };
        let said = from.said(count);
        let drop = from.what();
        if count == 0 {
            return Err(refuse(format!("{said}: give at least 1")));
        }
        if count > 1 {
            let conflict = match load {
                LoadMode::Fractions(_) => Some(format!(
                    "{said} with load.rates: the search for each maximum runs in this process, so the runs at its fractions must too: drop {drop}, or give load.rate"
                )),
                LoadMode::Sizing => Some(format!(
                    "{said} with sizing: each row's search runs in this process: drop {drop}"
                )),
                LoadMode::Given => None,
            };
            let conflict = conflict.or_else(|| {
                (on_cluster && !s.requests.is_one()).then(|| format!(
                    "{said} with requests: a request mix is not passed to generator pods yet (local generators, platform: local, take one): drop {drop}"
                ))
            });
            let conflict = conflict.or_else(|| match s.platform {
                PlatformKind::NetworkLab => Some(format!(
                    "{said} on the network lab: its load leaves from a namespace of this process: drop {drop}"
                )),
                PlatformKind::Local | PlatformKind::Kubernetes => None,
            });
            let conflict = conflict.or_else(|| {
                flags.metrics_listen.then(|| format!(
                    "--metrics-listen with {said}: the generators' seconds reach this process only at the end: drop one"
                ))
            });
            if let Some(msg) = conflict {
                return Err(refuse(msg));
            }
            // The same split the run will make, checked before anything starts.
            let spec = load_spec(&s);
            split::split(&split::whole(&spec, count), count, 0).map_err(|e| match e {
                SplitError::Connections { connections, .. } => refuse(format!(
                    "{said} needs at least {count} connections, not load.connections: {connections}: each generator needs one"
                )),
                SplitError::Threads { threads, .. } => refuse(format!(
                    "{said} needs at least {count} threads, not load.threads: {threads}: each generator runs one"
                )),
                SplitError::Plan { .. } => refuse(format!(
                    "{said} with a load plan in load.rate: a plan runs on one generator for now: give a constant rate, or drop {drop}"
                )),
                e => refuse(e.to_string()),
            })?;
        }
        let generators = match (count, on_cluster) {
            (1, _) => Generators::InProcess,
            (count, false) => Generators::Local { count },
            (count, true) => {
                let k = s.kubernetes.clone().unwrap_or_default();
                if k.cacert.is_some() {
                    return Err(refuse(format!(
                        "{said} on a cluster: kubernetes.cacert (--cacert) names a file on this machine, which the generator pods cannot read: use generator pods only with a URL whose certificate a public CA signed (or http://), or run the load here (drop {drop})"
                    )));
                }
                let connect_timeout = s.load.connect_timeout.0;
                let lead = match &flags.lead {
                    Some(l) => {
                        results::duration::parse(l).map_err(|e| flag(format!("--lead: {e}")))?
                    }
                    None => pods
                        .lead
                        .as_ref()
                        .map_or(DEFAULT_POD_LEAD + connect_timeout, |d| d.0),
                };
                Generators::Pods {
                    count,
                    pods: GeneratorPodsPlan {
                        kubeconfig: k.kubeconfig,
                        context: k.context,
                        namespace: k.namespace,
                        image: flags.generator_image.clone().or(pods.image.clone()),
                        node_selector: pods.node_selector.clone(),
                        spread: pods.spread,
                        host_network: pods.host_network,
                        lead,
                    },
                }
            }
        };
        let only = if flags.only.is_empty() {
            s.systems.iter().map(|p| p.name().to_string()).collect()
        } else {
            flags.only
        };
        let cases = cases::resolve(&s, &only, flags.repeat, &load);
        let effective = serde_json::to_vec_pretty(&s).unwrap_or_default();
        Ok(Plan {
            scenario: s,
            text,
            only,
            repeat: flags.repeat,
            load,
            generators,
            cases,
            effective,
        })
    }

    /// One line of what will run, for `validate`.
    pub fn summary(&self) -> String {
        let s = &self.scenario;
        let systems = format!("{} systems ({})", s.systems.len(), s.system_names());
        let what = match &self.load {
            LoadMode::Sizing => {
                let z = s.sizing.as_ref().expect("a sizing plan has its section");
                return format!(
                    "sizing scan of {systems}: {} rows each ({} allocations x {} measures)",
                    z.rows().len(),
                    z.cores.len(),
                    z.measures().len()
                );
            }
            LoadMode::Given => s.load.rate.to_string(),
            LoadMode::Fractions(f) => {
                let pct: Vec<String> = f.iter().map(|f| format!("{:.0} %", f * 100.0)).collect();
                format!("{} of each maximum", pct.join(", "))
            }
        };
        let generators = match &self.generators {
            Generators::InProcess => String::new(),
            Generators::Local { count } => format!(", over {count} local generators"),
            Generators::Pods { count, .. } => format!(", over {count} generator pods"),
        };
        format!(
            "{systems}, {} backends, {what} for {}s, {} change steps{generators}",
            s.backends.replicas,
            s.load.duration.0.as_secs_f64(),
            s.changes.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K8S: &str = "name: k\nplatform: kubernetes\nsystems: [traefik]\n\
        kubernetes:\n  urls: {traefik: \"https://198.18.0.1/\"}\n  generators:\n    count: 2\n    image: gen:1\n\
        load:\n  rate: 100\n  duration: 2s\n  connect_timeout: 3s\n";

    fn plan(text: &str, flags: RunFlags) -> Result<Plan, ScenarioError> {
        let s = Scenario::parse(text, "p.yaml")?;
        Plan::build(s, text.to_string(), "p.yaml", flags)
    }

    #[test]
    fn generator_pods_take_the_files_settings_unless_a_flag_overrides_them() {
        let p = plan(K8S, RunFlags::default()).unwrap();
        let Generators::Pods { count, pods } = &p.generators else {
            panic!("{:?}", p.generators)
        };
        assert_eq!(*count, 2);
        assert_eq!(pods.image.as_deref(), Some("gen:1"));
        // No lead given: the default beyond the load's connect timeout.
        assert_eq!(pods.lead, DEFAULT_POD_LEAD + Duration::from_secs(3));
        let p = plan(
            K8S,
            RunFlags {
                generators: Some(3),
                generator_image: Some("gen:2".into()),
                lead: Some("5s".into()),
                ..RunFlags::default()
            },
        )
        .unwrap();
        let Generators::Pods { count, pods } = &p.generators else {
            panic!("{:?}", p.generators)
        };
        assert_eq!((*count, pods.image.as_deref()), (3, Some("gen:2")));
        assert_eq!(pods.lead, Duration::from_secs(5));
        // One generator is this process, whatever the file says.
        let p = plan(
            K8S,
            RunFlags {
                generators: Some(1),
                ..RunFlags::default()
            },
        )
        .unwrap();
        assert_eq!(p.generators, Generators::InProcess);
    }

    #[test]
    fn the_load_mode_and_the_systems_to_run_are_decided_once() {
        let text =
            "name: l\nsystems: [caddy-api, nginx-reload]\nload:\n  rate: 100\n  duration: 2s\n";
        let p = plan(text, RunFlags::default()).unwrap();
        assert_eq!(p.load, LoadMode::Given);
        assert_eq!(p.only, ["caddy-api", "nginx-reload"]);
        assert_eq!(p.generators, Generators::InProcess);
        let p = plan(
            text,
            RunFlags {
                only: vec!["nginx-reload".into()],
                generators: Some(2),
                ..RunFlags::default()
            },
        )
        .unwrap();
        assert_eq!(p.only, ["nginx-reload"]);
        assert_eq!(p.generators, Generators::Local { count: 2 });
        let rates = "name: r\nsystems: [caddy-api]\nload:\n  rates: [0.3, 0.6]\n  duration: 2s\nsearch:\n  p99: 5ms\n";
        let p = plan(rates, RunFlags::default()).unwrap();
        assert_eq!(p.load, LoadMode::Fractions(vec![0.3, 0.6]));
        // The platform flag is a type: the file's systems then meet its checks.
        let e = plan(
            text,
            RunFlags {
                cluster: ClusterFlags {
                    platform: Some(PlatformKind::NetworkLab),
                    ..ClusterFlags::default()
                },
                ..RunFlags::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("is not a data path"), "{e}");
    }
}
