//! `ingressbench run` and `ingressbench validate`: scenarios from the command line.

use super::usage;
use anyhow::Context;
use clap::Args;
use scenario::plan::{self, Plan};
use scenario::{runner, PlatformKind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Flags of `ingressbench run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Results folder (default: results/<scenario>-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace what an existing --out folder holds (by default a folder with results
    /// in it is refused).
    #[arg(long)]
    pub force: bool,
}

/// The flags that shape a run's plan: `run` and `validate` take the same, so a
/// scenario `validate` accepts with them is one `run` starts.
#[derive(Args, Debug, Default)]
pub struct PlanArgs {
    /// Scale durations and rates down (the scenario's `quick` section): under a minute.
    #[arg(long)]
    pub quick: bool,
    /// Only these systems (comma-separated profile names).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run each system N times, the systems taking turns, and keep every repetition
    /// in its result (`compare` then ranks them: docs/compare.md).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: usize,
    /// Where the backends live: `local`, `kubernetes` or `network-lab` (overrides the
    /// file's `platform`).
    #[arg(long)]
    pub platform: Option<String>,
    /// A system under test on a cluster and the URL its data plane listens on, as
    /// NAME=URL (repeatable; replaces the file's systems).
    #[arg(long = "system", value_name = "NAME=URL")]
    pub system: Vec<String>,
    /// kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Work in this existing namespace instead of creating one per system.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Keep the run's namespaces afterwards, for inspection.
    #[arg(long)]
    pub keep: bool,
    /// The Gateway the HTTPRoutes attach to, as NAMESPACE/NAME for every system or
    /// SYSTEM=NAMESPACE/NAME for one (repeatable; kubernetes.gateway and .gateways).
    #[arg(long = "gateway", value_name = "[SYSTEM=]NS/NAME")]
    pub gateway: Vec<String>,
    /// The routes a user brings for a system, as SYSTEM=FILE: its own Ingress
    /// objects or HTTPRoutes, applied in place of the generated route
    /// (repeatable; kubernetes.manifests).
    #[arg(long = "manifests", value_name = "SYSTEM=FILE")]
    pub manifests: Vec<String>,
    /// The CA certificate (PEM) of the controllers' https:// addresses, when no
    /// public CA signed them (kubernetes.cacert).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Split each system's load over this many generators, merged into one result
    /// as `load --generators` does: processes on this machine (each pinned to a CPU
    /// of the scenario's generator set when there are enough), or with platform
    /// kubernetes the pods of an indexed Job (kubernetes.generators places them).
    #[arg(long, value_name = "N")]
    pub generators: Option<usize>,
    /// With platform kubernetes and --generators: the generator pods' image
    /// (kubernetes.generators.image; default `ingressbench`).
    #[arg(long, value_name = "IMAGE")]
    pub generator_image: Option<String>,
    /// With platform kubernetes and --generators: the pods' head start before the
    /// load (kubernetes.generators.lead; default 30 s plus the connect timeout).
    #[arg(long, value_name = "DURATION")]
    pub lead: Option<String>,
    /// Exit 1 when a system crosses a limit, METRIC>LIMIT, comma-separated or
    /// repeated: `errors>0`, `errors.timeout>5`, `p99>50ms`, `max>1s`,
    /// `propagation>500ms`, `route_propagation>1s` (the metrics of compare
    /// --max-regression, as absolute limits), and `probe_diffs>0` (the behaviour
    /// probes' differences, changes and expectations not met: docs/probes.md).
    #[arg(long = "fail-on", value_name = "METRIC>LIMIT")]
    pub fail_on: Vec<String>,
    /// Serve live metrics (Prometheus or OpenMetrics text) at
    /// http://ADDR:PORT/metrics while the run goes on, each series labelled with the
    /// system under load; 127.0.0.1:9464 keeps them on this machine.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
}

impl PlanArgs {
    /// The flags as the plan reads them; a flag that cannot be read is bad input.
    pub(super) fn flags(&self) -> anyhow::Result<plan::RunFlags> {
        let platform = match &self.platform {
            None => None,
            Some(p) => Some(p.parse::<PlatformKind>().map_err(|_| {
                usage(format!(
                    "--platform {p}: use one of {}",
                    PlatformKind::names()
                ))
            })?),
        };
        let mut systems = Vec::new();
        for spec in &self.system {
            let Some((name, url)) = spec.split_once('=') else {
                return Err(usage(format!("--system {spec}: write it as NAME=URL")));
            };
            systems.push((name.to_string(), url.to_string()));
        }
        let mut manifests = Vec::new();
        for spec in &self.manifests {
            let Some((name, file)) = spec.split_once('=') else {
                return Err(usage(format!(
                    "--manifests {spec}: write it as SYSTEM=FILE"
                )));
            };
            manifests.push((name.to_string(), PathBuf::from(file)));
        }
        Ok(plan::RunFlags {
            quick: self.quick,
            only: self.only.clone(),
            repeat: self.repeat,
            cluster: scenario::ClusterFlags {
                platform,
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
                namespace: self.namespace.clone(),
                keep: self.keep,
                systems,
                gateways: self
                    .gateway
                    .iter()
                    .map(|g| match g.split_once('=') {
                        Some((sys, gw)) => (Some(sys.to_string()), gw.to_string()),
                        None => (None, g.clone()),
                    })
                    .collect(),
                cacert: self.cacert.clone(),
                manifests,
            },
            generators: self.generators,
            generator_image: self.generator_image.clone(),
            lead: self.lead.clone(),
            metrics_listen: self.metrics_listen.is_some(),
        })
    }

    /// The checked plan and `--fail-on`'s limits: every refusal `run` makes before
    /// it starts anything, and so every one `validate` makes.
    fn plan(&self, file: &std::path::Path) -> anyhow::Result<(Plan, Vec<::report::gate::Gate>)> {
        let plan = Plan::load(file, self.flags()?).map_err(|e| usage(results::with_causes(&e)))?;
        let gates = ::report::gate::parse_gates(&self.fail_on).map_err(|e| usage(e.to_string()))?;
        if plan.scenario.probes.is_none()
            && gates
                .iter()
                .any(|g| g.metric == ::report::compare::Metric::ProbeDiffs)
        {
            return Err(usage(
                "--fail-on probe_diffs: this scenario sends no probes: add a probes: section (docs/probes.md)",
            ));
        }
        Ok((plan, gates))
    }
}

/// Flags of `ingressbench cleanup`.
#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// Where to clean: `kubernetes` (a local run's watchdog already removes everything).
    #[arg(long)]
    pub platform: String,
    /// kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
}

/// Removes what interrupted or killed runs left in a cluster.
pub fn cleanup(a: CleanupArgs) -> anyhow::Result<i32> {
    if a.platform != PlatformKind::Kubernetes.name() {
        return Err(usage(format!(
            "--platform {}: only kubernetes has anything to clean (a local run's watchdog removes its processes and folders)",
            a.platform
        )));
    }
    let spec = kubernetes::ClusterSpec {
        kubeconfig: a.kubeconfig,
        context: a.context,
        ..kubernetes::ClusterSpec::default()
    };
    let gone = kubernetes::cleanup(&spec).map_err(anyhow::Error::from)?;
    if gone.is_empty() {
        println!(
            "nothing to clean: no namespace labelled app.kubernetes.io/managed-by=ingressbench"
        );
    }
    for ns in gone {
        if let Some(job) = ns.strip_prefix("job ") {
            println!("deleted Job {job}");
        } else if let Some(node) = ns.strip_prefix("node ") {
            println!("uncordoned node {node} (cordoned by a drain of a run that did not end)");
        } else {
            println!("deleted namespace {ns}");
        }
    }
    Ok(0)
}

/// Flags of `ingressbench validate`.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    /// The flags `run` would be given: the checks are those `run` makes with them.
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// Checks a scenario, with the flags `run` would be given, without running it.
pub fn validate(a: ValidateArgs) -> anyhow::Result<i32> {
    let (plan, _) = a.plan.plan(&a.scenario)?;
    println!("{}: ok: {}", a.scenario.display(), plan.summary());
    // Which profiles ever met their real controller: a user choosing one between
    // a tested profile and one written from documentation should know which is which.
    if plan.scenario.platform == PlatformKind::Kubernetes {
        for name in &plan.only {
            if kubernetes::controllers::controller(name).is_some() {
                println!("  {name}: {}", kubernetes::controllers::tested(name));
            }
        }
    }
    Ok(0)
}

/// Runs a scenario and prints the comparison.
pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    let (plan, gates) = a.plan.plan(&a.scenario)?;
    let s = &plan.scenario;
    let load: Option<Arc<dyn runner::LoadRunner>> = match &plan.generators {
        plan::Generators::InProcess => None,
        plan::Generators::Local { count } => Some(Arc::new(super::generators::LocalGenerators {
            count: *count,
        })),
        plan::Generators::Pods { count, pods } => {
            Some(Arc::new(super::generators::KubernetesGenerators {
                count: *count,
                pods: super::generators::Pods {
                    cluster: kubernetes::ClusterSpec {
                        kubeconfig: pods.kubeconfig.clone(),
                        context: pods.context.clone(),
                        namespace: pods.namespace.clone(),
                        ..kubernetes::ClusterSpec::default()
                    },
                    image: pods.image.clone(),
                    node_selector: pods.node_selector.clone(),
                    spread: pods.spread,
                    host_network: pods.host_network,
                    lead: pods.lead,
                    quiet: false,
                },
            }))
        }
    };
    // Bound before anything starts: a port in use is bad input. Closed when this
    // function returns, however the run ends.
    let metrics = super::metrics::start(a.plan.metrics_listen.as_deref(), || {
        live::Live::scenario(&s.name)
    })?;
    let out = a.out.unwrap_or_else(|| runner::default_out_dir(&s.name));
    // One run per folder, and no silent overwrite: held until this function returns.
    let _lock = results::folder::RunFolder::new(&out)
        .lock(a.force)
        .map_err(|e| usage(results::with_causes(&e)))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let exe = std::env::current_exe()?;
    // Whatever the run starts is also registered with a watchdog, which cleans up if
    // this process is killed (SIGKILL runs none of our code).
    lab::watchdog::start(&exe).context("start the watchdog")?;
    let opts = runner::RunOptions {
        out_dir: out.clone(),
        exe,
        stop: stop.clone(),
        progress: Box::new(|line| eprintln!("ingressbench: {line}")),
        load,
        watch: metrics
            .as_ref()
            .map(|(_, l)| Arc::new(super::metrics::Watch(l.clone())) as Arc<dyn runner::Watch>),
        system_done: Box::new(|r| {
            let system = r.lab.as_ref().map_or("?", |l| l.system.as_str());
            eprintln!(
                "ingressbench: {system}: done: p99 {} max {}, {} errors",
                ::report::fmt::fmt_opt_ms(r.latency_ms.corrected.p99),
                ::report::fmt::fmt_opt_ms(r.latency_ms.corrected.max),
                r.errors.total()
            );
            for w in &r.warnings {
                eprintln!("ingressbench: {system}: warning: {w}");
            }
        }),
        warn: Arc::new(|w| eprintln!("ingressbench: warning: {w}")),
        platform: None,
    };
    let outcome = runner::run(&plan, opts);
    let r = match outcome {
        Ok(r) => r,
        // Interrupted before a system's load began (e.g. while generator pods were
        // still being placed): nothing of that system was measured.
        Err(e) if stop.load(Ordering::Relaxed) => {
            eprintln!("ingressbench: interrupted: {}", results::Causes(&e));
            return Ok(130);
        }
        Err(e) => return Err(e.into()),
    };
    let page = out.join(results::folder::REPORT);
    // The summary is drawn from the results in hand, so it is written even when no
    // system finished and the folder holds no result to read back.
    let crossed = ::report::gate::check(&r.results, &gates);
    let done = ::report::input::ReportInput::lab_run(&out, &s.name, r.results);
    ::report::files::write(&done, &page, &[&::report::summary::Summary])?;
    print!("{}", ::report::summary::Summary::text(&done));
    println!("results written to {}", out.display());
    // Drawn from the files just written, like any later `ingressbench report`.
    let report = ::report::input::load(std::slice::from_ref(&out))
        .map_err(anyhow::Error::from)
        .and_then(|input| Ok(::report::files::write_all(&input, &page, false)?));
    match report {
        Ok(_) => println!("report written to {}", page.display()),
        Err(e) => {
            eprintln!("ingressbench: report not written: {}", results::Causes(&*e));
            if !r.partial {
                return Ok(1);
            }
        }
    }
    for line in &crossed {
        eprintln!("ingressbench: {line}");
    }
    Ok(if r.partial {
        130
    } else if !crossed.is_empty() {
        1
    } else {
        0
    })
}
