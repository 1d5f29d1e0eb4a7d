//! `load --generators N` and the hidden `generator` command: the CLI's side of a
//! load split over several generators. The flags are checked and turned into the
//! load here; running the generators, measuring their clocks and merging their
//! results is the `generators` crate's; the merged result is printed and written as
//! a single `load` would.

use super::load::{self, LoadArgs};
use super::{duration, usage};
use generators::{LocalOptions, Merged, PartOptions, PartOutcome};
use scenario::plan::DEFAULT_POD_LEAD;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

pub use generators::{KubernetesGenerators, LocalGenerators, Pods};

/// A generators' error as the CLI says it: bad input (exit 2) when the load cannot be
/// split or shipped that way.
fn cli_error(e: generators::Error) -> anyhow::Error {
    match e {
        generators::Error::Input(m) => usage(m),
        e => anyhow::Error::new(e),
    }
}

/// Checks that the load of `args` is valid as one and split `n` ways, each share
/// valid on its own.
///
/// # Errors
/// A usage error naming what cannot be split.
fn checked_spec(args: &LoadArgs) -> anyhow::Result<engine::LoadSpec> {
    let n = args.generators;
    let spec = load::spec(args)?;
    spec.resolve().map_err(|e| usage(e.to_string()))?;
    let plan = engine::split::split(&spec, n, 0).map_err(|e| usage(e.to_string()))?;
    // A request mix needs a connection per host in every generator.
    for p in &plan {
        p.spec.resolve().map_err(|e| {
            usage(format!(
                "--generators {n}: generator {} of {n} would run {} connections: {e}",
                p.slice.index + 1,
                p.spec.connections
            ))
        })?;
    }
    Ok(spec)
}

/// Runs the load as `args.generators` child processes and prints and writes their
/// merged result as a single `load` would.
///
/// # Errors
/// A usage error (exit 2) for settings that cannot be split, before anything starts;
/// otherwise when no child could be started or no result could be merged.
pub fn coordinate(args: &LoadArgs) -> anyhow::Result<i32> {
    let spec = checked_spec(args)?;
    load::check_outputs(args)?;
    let stop = load::stop_on_signals()?;
    let opts = LocalOptions {
        lead: match &args.lead {
            Some(l) => Some(duration::parse(l).map_err(|e| usage(format!("--lead: {e}")))?),
            None => None,
        },
        live: !args.quiet && std::io::stderr().is_terminal(),
        quiet: args.quiet,
    };
    let merged = generators::run_local(&spec, args.generators, &opts, &stop).map_err(cli_error)?;
    Ok(finish(args, merged))
}

/// Runs the load as an indexed Job and prints and writes the merged result.
///
/// # Errors
/// A usage error (exit 2) for settings that cannot be split or shipped to a pod,
/// before anything is created; an error when the cluster refuses the Job.
pub fn coordinate_kubernetes(args: &LoadArgs) -> anyhow::Result<i32> {
    let n = args.generators;
    let spec = load::spec(args)?;
    spec.resolve().map_err(|e| usage(e.to_string()))?;
    engine::split::split(&spec, n, 0).map_err(|e| usage(e.to_string()))?;
    load::check_outputs(args)?;
    for (given, flag) in [
        (args.body_file.is_some(), "--body-file"),
        (args.request.cacert.is_some(), "--cacert"),
    ] {
        if given {
            return Err(usage(format!(
                "{flag} names a file on this machine, which the generator pods cannot read: give the body with --body (or trust with --insecure)"
            )));
        }
    }
    let pods = Pods {
        cluster: kubernetes::ClusterSpec {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
            namespace: args.namespace.clone(),
            ..kubernetes::ClusterSpec::default()
        },
        image: args.image.clone(),
        node_selector: node_selector(&args.node_selector)?,
        spread: args.spread,
        host_network: args.host_network,
        lead: lead(args.lead.as_deref(), &spec)?,
        quiet: args.quiet,
    };
    let stop = load::stop_on_signals()?;
    match generators::run_pods(&spec, n, &pods, &stop).map_err(cli_error)? {
        None => Ok(130),
        Some(merged) => Ok(finish(args, merged)),
    }
}

/// Prints and writes the merged result as a single `load` would, and says the exit
/// code.
fn finish(args: &LoadArgs, m: Merged) -> i32 {
    let seconds: Vec<(u64, &[u8])> = m.seconds.iter().map(|(t, b)| (*t, b.as_slice())).collect();
    if !load::emit(args, &m.result, &seconds, m.started_unix_ns) {
        return 1;
    }
    if m.interrupted {
        130
    } else if m.failed {
        // A generator that produced nothing is a failed run, not an interrupted one.
        1
    } else {
        load::exit_code(&m.result)
    }
}

/// `--lead`, else the default for `spec` ([`DEFAULT_POD_LEAD`] beyond its connect
/// timeout; a scenario's plan resolves its own the same way).
///
/// # Errors
/// A usage error for a malformed duration.
fn lead(flag: Option<&str>, spec: &engine::LoadSpec) -> anyhow::Result<Duration> {
    match flag {
        Some(l) => duration::parse(l).map_err(|e| usage(format!("--lead: {e}"))),
        None => Ok(DEFAULT_POD_LEAD + spec.connect_timeout),
    }
}

/// `KEY=VALUE` flags as a map.
fn node_selector(flags: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    flags
        .iter()
        .map(|f| match f.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(usage(format!("--node-selector {f}: write it as KEY=VALUE"))),
        })
        .collect()
}

/// `ingressbench generator`: one generator of a load split by `load --generators` or
/// `run --generators`. Its flags are set by the coordinator, never by a user.
#[derive(clap::Args, Debug)]
pub struct GeneratorArgs {
    /// This generator's part: INDEX (from 0) of COUNT.
    #[arg(long, value_name = "INDEX/COUNT")]
    pub part: String,
    /// The shared start of every generator's schedule, Unix nanoseconds.
    #[arg(long, value_name = "UNIX_NS")]
    pub start_at: String,
    /// The whole load (JSON, an `engine::LoadSpec`) in a file: every generator
    /// splits it the same way and runs its part.
    #[arg(long, value_name = "FILE", required_unless_present = "spec_json")]
    pub spec: Option<std::path::PathBuf>,
    /// The whole load as JSON in the argument itself (a pod, which cannot read the
    /// coordinator's files).
    #[arg(long, value_name = "JSON", conflicts_with = "spec")]
    pub spec_json: Option<String>,
    /// Where to write the full result (JSON).
    #[arg(long, value_name = "FILE")]
    pub result_out: Option<std::path::PathBuf>,
    /// The CPUs the threads are pinned to (`0,1`).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Answer the coordinator's clock probes on stdin/stdout first.
    #[arg(long)]
    pub sync_clock: bool,
    /// After the clock probes, read the change marks (`mark <unix ns>`) on stdin
    /// (or at `--serve`'s endpoint) and count requests by window.
    #[arg(long)]
    pub marks: bool,
    /// Serve the clock probes and the result on this address (through the API
    /// server's pod proxy) instead of stdin and a file.
    #[arg(long, value_name = "ADDR:PORT")]
    pub serve: Option<String>,
}

/// `INDEX/COUNT`, the index from 0.
fn parse_part(s: &str) -> Option<(usize, usize)> {
    let (i, n) = s.split_once('/')?;
    Some((i.trim().parse().ok()?, n.trim().parse().ok()?))
}

/// A CPU list as `--cpus` takes it: `0,2,5`.
fn parse_cpus(s: &str) -> Option<Vec<usize>> {
    s.split(',').map(|c| c.trim().parse().ok()).collect()
}

/// The whole load a generator was given, by file or in its argument.
///
/// # Errors
/// A usage error when it cannot be read or is not a load.
fn read_spec(args: &GeneratorArgs) -> anyhow::Result<engine::LoadSpec> {
    let (from, json) = match (&args.spec, &args.spec_json) {
        (Some(f), _) => (
            format!("--spec {}", f.display()),
            std::fs::read_to_string(f)
                .map_err(|e| usage(format!("--spec {}: {e}", f.display())))?,
        ),
        (None, Some(j)) => ("--spec-json".to_string(), j.clone()),
        (None, None) => return Err(usage("give the load with --spec FILE or --spec-json JSON")),
    };
    serde_json::from_str(&json).map_err(|e| usage(format!("{from}: not a load: {e}")))
}

/// The generator's flags as what it runs.
///
/// # Errors
/// A usage error for a missing or malformed flag.
fn part_options(args: &GeneratorArgs) -> anyhow::Result<PartOptions> {
    let part = &args.part;
    let (index, count) = parse_part(part)
        .ok_or_else(|| usage(format!("--part {part}: give INDEX/COUNT, e.g. 0/2")))?;
    let start_at: u128 = args
        .start_at
        .parse()
        .map_err(|_| usage("--start-at: give Unix nanoseconds"))?;
    if args.result_out.is_none() && args.serve.is_none() {
        return Err(usage("generator needs --result-out or --serve"));
    }
    let cpus = match args.cpus.as_deref() {
        None => Vec::new(),
        Some(c) => parse_cpus(c).ok_or_else(|| usage(format!("--cpus {c}: give 0,1,...")))?,
    };
    Ok(PartOptions {
        spec: read_spec(args)?,
        index,
        count,
        start_at,
        result_out: args.result_out.clone(),
        serve: args.serve.clone(),
        cpus,
        sync_clock: args.sync_clock,
        marks: args.marks,
    })
}

/// Runs one generator: its share of the load, from the shared start instant, its
/// full result written to `--result-out` (or served at `--serve`), nothing printed.
///
/// # Errors
/// A usage error for missing or malformed flags, or as `load` fails.
pub fn run_part(args: &GeneratorArgs) -> anyhow::Result<i32> {
    let opts = part_options(args)?;
    // Before the clock probes: an interrupt forwarded that early still ends in a
    // (partial) result rather than a dead child.
    let stop = load::stop_on_signals()?;
    match generators::run_part(&opts, stop).map_err(cli_error)? {
        PartOutcome::Written(result) => Ok(load::exit_code(&result)),
        // A pod: a collected result is a success (and the Job's completion).
        PartOutcome::Served { collected: true } => Ok(0),
        PartOutcome::Served { collected: false } => {
            eprintln!(
                "ingressbench: no coordinator collected the result within {} s",
                generators::COLLECT_LIMIT.as_secs()
            );
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: LoadArgs,
    }

    fn parse(v: &[&str]) -> LoadArgs {
        T::try_parse_from(std::iter::once("x").chain(v.iter().copied()))
            .unwrap()
            .a
    }

    #[derive(Parser)]
    struct G {
        #[command(flatten)]
        g: GeneratorArgs,
    }

    #[test]
    fn internal_flags_parse() {
        assert_eq!(parse_part("1/4"), Some((1, 4)));
        assert_eq!(parse_part("1"), None);
        assert_eq!(parse_part("a/4"), None);
        assert_eq!(parse_cpus("0, 3"), Some(vec![0, 3]));
        assert_eq!(parse_cpus("0,x"), None);
    }

    /// A pod's arguments carry the load the user gave, setting by setting, and its
    /// part; nothing of this machine's.
    #[test]
    fn a_pod_gets_the_same_load_and_its_part() {
        let a = parse(&[
            "-c",
            "10",
            "-R",
            "300",
            "-d",
            "5s",
            "--warmup",
            "1s",
            "-H",
            "x-a: $(HOME)",
            "-k",
            "--sample",
            "0.1",
            "--json",
            "/tmp/x.json",
            "--kubeconfig",
            "/k",
            "--generators",
            "3",
            "http://h/$(x)",
        ]);
        let spec = load::spec(&a).unwrap();
        let args = generators::job_args(&spec, 3, 42, false).unwrap();
        // Kubernetes' expansion of $(JOB_COMPLETION_INDEX) (and of $$ to $).
        let expanded: Vec<String> = args
            .iter()
            .map(|s| s.replace("$(JOB_COMPLETION_INDEX)", "2").replace("$$", "$"))
            .collect();
        assert_eq!(expanded[0], "generator");
        let g = G::try_parse_from(&expanded).unwrap().g;
        let o = part_options(&g).unwrap();
        let p = &o.spec;
        assert_eq!(p, &spec);
        assert_eq!(p.url, "http://h/$(x)");
        assert_eq!(p.headers, vec!["x-a: $(HOME)".to_string()]);
        assert_eq!(
            (p.connections, p.rate, p.tls.insecure),
            (10, Some(300.0), true)
        );
        assert_eq!(
            (p.duration, p.warmup),
            (Duration::from_secs(5), Duration::from_secs(1))
        );
        assert_eq!(p.sample, 0.1);
        assert_eq!((o.index, o.count, o.start_at), (2, 3, 42));
        assert_eq!(
            o.serve,
            Some(format!("0.0.0.0:{}", kubernetes::generators::PORT))
        );
        assert!(!o.marks);
        // Nothing of this machine's: no output files, no kubeconfig.
        assert!(
            !expanded
                .iter()
                .any(|s| s.contains("/tmp/x.json") || s.contains("\"/k\"")),
            "{expanded:?}"
        );
        // A scenario's pods also count by change window.
        let args = generators::job_args(&spec, 3, 42, true).unwrap();
        assert!(G::try_parse_from(&args).unwrap().g.marks);
    }

    /// A local generator reads the whole load from the file its coordinator wrote.
    #[test]
    fn a_local_generator_reads_the_load_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let spec = load::spec(&parse(&["-R", "100", "--schedule", "shared", "http://h/"])).unwrap();
        let f = dir.path().join("spec.json");
        std::fs::write(&f, serde_json::to_vec(&spec).unwrap()).unwrap();
        let g = G::try_parse_from([
            "g",
            "--part",
            "1/2",
            "--start-at",
            "7",
            "--result-out",
            "/r.json",
            "--spec",
            f.to_str().unwrap(),
        ])
        .unwrap()
        .g;
        assert_eq!(part_options(&g).unwrap().spec, spec);
        // A generator with no load, or one it cannot read, is refused as bad input.
        assert!(G::try_parse_from(["g", "--part", "1/2", "--start-at", "7"]).is_err());
        std::fs::write(&f, "{\"schedule\": \"sharde\"}").unwrap();
        let e = part_options(&g).unwrap_err();
        assert!(e.downcast_ref::<crate::cli::UsageError>().is_some(), "{e}");
    }

    #[test]
    fn node_selectors_are_key_value() {
        let m = node_selector(&["pool=load".into(), "zone=a=b".into()]).unwrap();
        assert_eq!(m["pool"], "load");
        assert_eq!(m["zone"], "a=b");
        assert!(node_selector(&["pool".into()]).is_err());
    }
}
