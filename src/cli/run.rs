//! `ingressbench run` and `ingressbench validate`: scenarios from the command line.

use super::usage;
use anyhow::Context;
use clap::Args;
use scenario::{runner, Scenario};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Flags of `ingressbench run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
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
    /// Results folder (default: results/<scenario>-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace what an existing --out folder holds (by default a folder with results
    /// in it is refused).
    #[arg(long)]
    pub force: bool,
    /// Where the backends live: `local` or `kubernetes` (overrides the file's
    /// `platform`).
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
    /// --max-regression, as absolute limits).
    #[arg(long = "fail-on", value_name = "METRIC>LIMIT")]
    pub fail_on: Vec<String>,
    /// Serve live metrics (Prometheus or OpenMetrics text) at
    /// http://ADDR:PORT/metrics while the run goes on, each series labelled with the
    /// system under load; 127.0.0.1:9464 keeps them on this machine.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
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
    if a.platform != "kubernetes" {
        return Err(usage(format!(
            "--platform {}: only kubernetes has anything to clean (a local run's watchdog removes its processes and folders)",
            a.platform
        )));
    }
    let spec = cluster::ClusterSpec {
        kubeconfig: a.kubeconfig,
        context: a.context,
        ..cluster::ClusterSpec::default()
    };
    let gone = cluster::cleanup(&spec).map_err(anyhow::Error::from)?;
    if gone.is_empty() {
        println!(
            "nothing to clean: no namespace labelled app.kubernetes.io/managed-by=ingressbench"
        );
    }
    for ns in gone {
        match ns.strip_prefix("job ") {
            Some(job) => println!("deleted Job {job}"),
            None => println!("deleted namespace {ns}"),
        }
    }
    Ok(0)
}

/// Flags of `ingressbench validate`.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
}

fn load(path: &std::path::Path) -> anyhow::Result<(Scenario, String)> {
    Scenario::load(path).map_err(|e| usage(results::with_causes(&e)))
}

/// The scenario's systems, as a list for a line of text: `nginx-reload, caddy-api`.
fn system_names(s: &Scenario) -> String {
    s.systems
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a scenario without running it.
pub fn validate(a: ValidateArgs) -> anyhow::Result<i32> {
    let (s, _) = load(&a.scenario)?;
    if let Some(z) = &s.sizing {
        println!(
            "{}: ok: sizing scan of {} systems ({}): {} rows each ({} allocations x {} measures)",
            a.scenario.display(),
            s.systems.len(),
            system_names(&s),
            z.rows().len(),
            z.cores.len(),
            z.measures().len()
        );
        return Ok(0);
    }
    let rate = if s.load.rates.is_empty() {
        s.load.rate.to_string()
    } else {
        let pct: Vec<String> = s
            .load
            .rates
            .iter()
            .map(|f| format!("{:.0} %", f * 100.0))
            .collect();
        format!("{} of each maximum", pct.join(", "))
    };
    println!(
        "{}: ok: {} systems ({}), {} backends, {} for {}s, {} change steps",
        a.scenario.display(),
        s.systems.len(),
        system_names(&s),
        s.backends.replicas,
        rate,
        s.load.duration.0.as_secs_f64(),
        s.changes.len()
    );
    Ok(0)
}

/// Runs a scenario and prints the comparison.
pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    let (mut s, text) = load(&a.scenario)?;
    if a.quick {
        s = s.quick();
    }
    let mut systems = Vec::new();
    for spec in &a.system {
        let Some((name, url)) = spec.split_once('=') else {
            return Err(usage(format!("--system {spec}: write it as NAME=URL")));
        };
        systems.push((name.to_string(), url.to_string()));
    }
    s.override_cluster(scenario::ClusterFlags {
        platform: a.platform.clone(),
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        namespace: a.namespace.clone(),
        keep: a.keep,
        systems,
        gateways: a
            .gateway
            .iter()
            .map(|g| match g.split_once('=') {
                Some((sys, gw)) => (Some(sys.to_string()), gw.to_string()),
                None => (None, g.clone()),
            })
            .collect(),
        cacert: a.cacert.clone(),
    })
    .map_err(usage)?;
    for o in &a.only {
        if !s.systems.iter().any(|p| p.name() == o) {
            return Err(usage(format!(
                "--only {o}: not in this scenario: use one of {}",
                system_names(&s)
            )));
        }
    }
    let gates = ::report::gate::parse_gates(&a.fail_on).map_err(|e| usage(e.to_string()))?;
    let on_cluster = s.platform == "kubernetes";
    let pods = s
        .kubernetes
        .as_ref()
        .map(|k| k.generators.clone())
        .unwrap_or_default();
    let generators = a.generators.or(pods.count).unwrap_or(1);
    if generators == 0 {
        return Err(usage("--generators 0: give at least 1"));
    }
    if generators > 1 && !s.load.rates.is_empty() {
        return Err(usage(format!(
            "--generators {generators} with load.rates: the search for each maximum runs in this process, so the runs at its fractions must too: drop --generators, or give load.rate"
        )));
    }
    if a.repeat == 0 {
        return Err(usage(
            "--repeat 0: give at least 1 (the number of runs of each system)",
        ));
    }
    if a.repeat > 1 && (!s.load.rates.is_empty() || s.sizing.is_some()) {
        return Err(usage(format!(
            "--repeat {} with {}: its runs follow a search of their own, which is not repeated: drop --repeat, or give load.rate",
            a.repeat,
            if s.sizing.is_some() { "sizing" } else { "load.rates" }
        )));
    }
    if generators > 1 && s.sizing.is_some() {
        return Err(usage(format!(
            "--generators {generators} with sizing: each row's search runs in this process: drop --generators"
        )));
    }
    if generators > 1 && s.platform == "network-lab" {
        return Err(usage(format!(
            "--generators {generators} on the network lab: its load leaves from a namespace of this process: drop --generators"
        )));
    }
    if generators > 1 && a.metrics_listen.is_some() {
        return Err(usage(format!(
            "--metrics-listen with --generators {generators}: the generators' seconds reach this process only at the end: drop one"
        )));
    }
    if !on_cluster && (a.generator_image.is_some() || a.lead.is_some()) {
        return Err(usage(
            "--generator-image and --lead are for generator pods: use them with platform kubernetes and --generators N",
        ));
    }
    // The same split the run will make, checked before anything starts.
    let spec = runner::load_spec(&s, "http://127.0.0.1:1/", None);
    if generators > 1 {
        let whole = super::generators::whole(&spec, generators);
        engine::split::split(&whole, generators, 0).map_err(|e| match e {
            // The scenario's key, not `load`'s flag.
            engine::split::SplitError::Connections { count, connections } => usage(format!(
                "--generators {count} needs at least {count} connections, not load.connections: {connections}: each generator needs one"
            )),
            e => usage(e.to_string()),
        })?;
    }
    let load: Option<Arc<dyn runner::LoadRunner>> = match (generators > 1, on_cluster) {
        (false, _) => None,
        (true, false) => Some(Arc::new(super::generators::LocalGenerators {
            count: generators,
        })),
        (true, true) => {
            let k = s.kubernetes.clone().unwrap_or_default();
            if k.cacert.is_some() {
                return Err(usage(
                    "--generators on a cluster: kubernetes.cacert (--cacert) names a file on this machine, which the generator pods cannot read: use generator pods only with a URL whose certificate a public CA signed (or http://), or run the load here (no --generators)",
                ));
            }
            Some(Arc::new(super::generators::KubernetesGenerators {
                count: generators,
                pods: super::generators::Pods {
                    cluster: cluster::ClusterSpec {
                        kubeconfig: k.kubeconfig.clone(),
                        context: k.context.clone(),
                        namespace: k.namespace.clone(),
                        ..cluster::ClusterSpec::default()
                    },
                    image: a.generator_image.clone().or(pods.image.clone()),
                    node_selector: pods.node_selector.clone(),
                    spread: pods.spread,
                    host_network: pods.host_network,
                    lead: super::generators::lead(
                        a.lead.as_deref(),
                        pods.lead.as_ref().map(|d| d.0),
                        &spec,
                    )?,
                    quiet: false,
                },
            }))
        }
    };
    // Bound before anything starts: a port in use is bad input. Closed when this
    // function returns, however the run ends.
    let metrics = super::metrics::start(a.metrics_listen.as_deref(), || {
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
        only: a.only,
        exe,
        stop: stop.clone(),
        progress: Box::new(|line| eprintln!("ingressbench: {line}")),
        load,
        repeat: a.repeat,
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
    };
    // A sizing scan searches each row's maximum; every other scenario runs its load.
    let outcome = if s.sizing.is_some() {
        scenario::scan::run(&s, &text, opts)
    } else {
        runner::run(&s, &text, opts)
    };
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
