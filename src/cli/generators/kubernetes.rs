//! `load --platform kubernetes --generators N`: the parts run as the pods of an indexed
//! Job (`cluster::generators`), each `ingressbench load ... --part
//! $(JOB_COMPLETION_INDEX)/N --start-at T --serve 0.0.0.0:PORT`; the coordinator
//! measures their clocks before T, collects each full result after the window, and
//! merges them with `results::merge` exactly as the local coordinator does. Every
//! exchange goes through the API server's pod proxy.

use super::{finish, now_unix_ns, PROBES};
use crate::cli::load::{self, LoadArgs};
use crate::cli::{duration, usage};
use cluster::generators::{GeneratorJob, GeneratorPod, JobPlan, PORT};
use engine::split;
use results::clock::{estimate_offset, ClockProbe};
use results::merge::Part;
use results::{GeneratorPart, RunResult};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Time the parts have after the end of their window (beyond the request timeout and
/// the engine's drain) to offer their result.
const FINISH_GRACE: Duration = Duration::from_secs(20);
/// After an interrupt: the parts' drain and the collection.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);
/// The pods' default head start: scheduling and an image pull.
const DEFAULT_LEAD: Duration = Duration::from_secs(30);
/// How often the pods are listed while waiting.
const POLL: Duration = Duration::from_millis(200);

/// The arguments of a part's `ingressbench` command: the load as the user gave it
/// (each part takes its own share of it), then the part's internal flags. `$(` in the
/// user's text is escaped as `$$(`: Kubernetes expands `$(VAR)` in a container's args.
pub(super) fn part_args(a: &LoadArgs, count: usize, start_at: u128) -> Vec<String> {
    let esc = |s: &str| s.replace("$(", "$$(");
    let mut v: Vec<String> = vec!["load".into()];
    let mut flag = |f: &str, val: String| {
        v.push(f.into());
        v.push(val);
    };
    if let Some(t) = a.threads {
        flag("--threads", t.to_string());
    }
    flag("--connections", a.connections.to_string());
    flag("--duration", a.duration.clone());
    if let Some(r) = a.rate {
        flag("--rate", r.to_string());
    }
    for h in &a.headers {
        flag("--header", esc(h));
    }
    flag("--timeout", a.timeout.clone());
    flag("--connect-timeout", a.connect_timeout.clone());
    flag("--method", esc(&a.method));
    if let Some(b) = &a.body {
        flag("--body", esc(b));
    }
    flag("--warmup", a.warmup.clone());
    flag("--schedule", a.schedule.clone());
    if let Some(t) = &a.tls_version {
        flag("--tls-version", t.clone());
    }
    flag("--backend-header", esc(&a.backend_header));
    flag("--sample", a.sample.to_string());
    flag("--generators", count.to_string());
    flag("--part", format!("$(JOB_COMPLETION_INDEX)/{count}"));
    flag("--start-at", start_at.to_string());
    flag("--serve", format!("0.0.0.0:{PORT}"));
    for (on, f) in [
        (a.max, "--max"),
        (a.insecure, "--insecure"),
        (a.new_connection, "--new-connection"),
        (a.tls_resume, "--tls-resume"),
        (true, "--quiet"),
    ] {
        if on {
            v.push(f.into());
        }
    }
    v.push("--".into());
    v.push(esc(&a.url));
    v
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

/// A run id: lowercase hex from the clock, as a namespace name can hold.
fn run_id() -> String {
    format!("g{:x}", (now_unix_ns() / 1_000_000) & 0xff_ffff_ffff)
}

/// What the coordinator learns of one part.
struct Gen {
    planned: GeneratorPart,
    pod: Option<String>,
    clocked: bool,
    stopped: bool,
    result: Option<RunResult>,
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
    let plan = split::split(&spec, n, 0).map_err(|e| usage(e.to_string()))?;
    load::check_outputs(args)?;
    for (given, flag) in [
        (args.body_file.is_some(), "--body-file"),
        (args.cacert.is_some(), "--cacert"),
    ] {
        if given {
            return Err(usage(format!(
                "{flag} names a file on this machine, which the generator pods cannot read: give the body with --body (or trust with --insecure)"
            )));
        }
    }
    let node_selector = node_selector(&args.node_selector)?;
    let lead = match &args.lead {
        Some(l) => duration::parse(l).map_err(|e| usage(format!("--lead: {e}")))?,
        None => DEFAULT_LEAD + spec.connect_timeout,
    };
    let stop = load::stop_on_signals()?;
    let window = spec.warmup + spec.duration;
    let run = run_id();
    let start_at = split::start_instant(now_unix_ns(), lead);
    let job_plan = JobPlan {
        run: run.clone(),
        count: n,
        image: args.image.clone(),
        args: part_args(args, n, start_at),
        node_selector,
        spread: args.spread,
        host_network: args.host_network,
        deadline: lead
            + window
            + spec.timeout
            + FINISH_GRACE
            + super::serve::COLLECT_LIMIT.min(Duration::from_secs(60)),
    };
    let cluster = cluster::ClusterSpec {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        namespace: args.namespace.clone(),
        run,
        ..cluster::ClusterSpec::default()
    };
    let job = GeneratorJob::start(&cluster, &job_plan).map_err(anyhow::Error::from)?;
    if !args.quiet {
        eprintln!(
            "ingressbench: {n} generators as Job {}/{}, starting in {:.0?}",
            job.namespace(),
            cluster::generators::JOB,
            lead
        );
    }
    let mut gens: Vec<Gen> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| Gen {
            planned: GeneratorPart {
                index: i,
                connections: p.spec.connections,
                threads: p.spec.threads.unwrap_or(0),
                rate: p.spec.rate,
                seed: p.slice.seed,
                ..Default::default()
            },
            pod: None,
            clocked: false,
            stopped: false,
            result: None,
        })
        .collect();

    let begun = Instant::now();
    let until = |at: u128| Duration::from_nanos(at.saturating_sub(now_unix_ns()) as u64);
    let start_in = until(start_at);
    let end = begun + start_in + window;
    let mut collect_by = end + spec.timeout + FINISH_GRACE;
    let mut interrupted = false;
    // Before the start instant: find the pods and measure their clocks. During the
    // window: only watch for an interrupt (and measure a late pod's clock). After it:
    // collect.
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) && !interrupted {
            interrupted = true;
            collect_by = collect_by.min(now + INTERRUPT_GRACE);
            if now < begun + start_in {
                // Nothing measured yet: no result to wait for.
                eprintln!("ingressbench: interrupted before the start: removing the Job");
                return Ok(130);
            }
        }
        if now >= collect_by {
            break;
        }
        let pods = match job.pods() {
            Ok(p) => p,
            Err(e) => {
                if !args.quiet {
                    eprintln!("ingressbench: {e} (retrying)");
                }
                std::thread::sleep(POLL);
                continue;
            }
        };
        for g in &mut gens {
            let Some(pod) = pods.iter().rev().find(|p| p.index == g.planned.index) else {
                continue;
            };
            g.pod = Some(pod.name.clone());
            step(&job, g, pod, interrupted, now >= end);
        }
        if gens
            .iter()
            .all(|g| g.result.is_some() || g.planned.error.is_some())
        {
            break;
        }
        std::thread::sleep(POLL);
    }
    let waited = begun.elapsed().as_secs();
    let parts: Vec<Part> = gens
        .into_iter()
        .map(|mut g| {
            if g.result.is_none() && g.planned.error.is_none() {
                g.planned.error = Some(match &g.pod {
                    Some(p) => format!("pod {p} offered no result within {waited} s"),
                    None => format!("its pod did not run within {waited} s"),
                });
            }
            Part {
                planned: g.planned,
                result: g.result,
            }
        })
        .collect();
    drop(job);
    finish(args, parts, start_at, spec.warmup, interrupted)
}

/// One look at one part: clock probes until measured, a forwarded interrupt, and once
/// the window is over its result.
fn step(job: &GeneratorJob, g: &mut Gen, pod: &GeneratorPod, interrupted: bool, over: bool) {
    if g.result.is_some() || g.planned.error.is_some() {
        return;
    }
    if pod.running && !g.clocked {
        if let Ok(o) = probe_clock(job, &pod.name) {
            g.planned.clock_offset_ms = Some(o.offset_ns as f64 / 1e6);
            g.planned.clock_offset_error_ms = Some(o.error_ns as f64 / 1e6);
            g.clocked = true;
        }
    }
    if interrupted && pod.running && !g.stopped {
        g.stopped = job
            .proxy(&pod.name, "POST", "/stop", Duration::from_secs(5))
            .is_ok();
    }
    if over || interrupted {
        if pod.running {
            // Anything but 200 (202: still draining; an error: not reachable yet or
            // any more) is asked again at the next look.
            if let Ok((200, body)) = job.proxy(&pod.name, "GET", "/result", Duration::from_secs(60))
            {
                match serde_json::from_slice::<RunResult>(&body) {
                    Ok(r) => {
                        g.result = Some(r);
                        let _ = job.proxy(&pod.name, "POST", "/done", Duration::from_secs(5));
                    }
                    Err(e) => {
                        g.planned.error = Some(format!("pod {}: its result: {e}", pod.name));
                    }
                }
            }
        }
        if g.result.is_none() {
            if let Some(how) = &pod.ended {
                g.planned.error = Some(format!("pod {} ended without a result: {how}", pod.name));
            }
        }
    }
}

/// The coordinator's side of the clock probes, through the pod proxy: [`PROBES`]
/// `GET /clock`, the shortest round trip kept. Its error bound is half that round
/// trip, which here includes the API server's hop to the pod.
fn probe_clock(job: &GeneratorJob, pod: &str) -> Result<results::clock::ClockOffset, String> {
    let mut probes = Vec::with_capacity(PROBES);
    for _ in 0..PROBES {
        let sent = now_unix_ns();
        let (status, body) = job.proxy(pod, "GET", "/clock", Duration::from_secs(2))?;
        let received = now_unix_ns();
        if status != 200 {
            return Err(format!("clock probe: status {status}"));
        }
        let remote = std::str::from_utf8(&body)
            .ok()
            .and_then(|t| t.trim().parse::<u128>().ok())
            .ok_or_else(|| "clock probe: not a time".to_string())?;
        probes.push(ClockProbe {
            sent,
            remote,
            received,
        });
    }
    estimate_offset(&probes).ok_or_else(|| "no usable clock probe".into())
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
        let args = part_args(&a, 3, 42);
        // Kubernetes' expansion of $(JOB_COMPLETION_INDEX) (and of $$ to $).
        let expanded: Vec<String> = args
            .iter()
            .map(|s| s.replace("$(JOB_COMPLETION_INDEX)", "2").replace("$$", "$"))
            .collect();
        assert_eq!(expanded[0], "load");
        let refs: Vec<&str> = expanded[1..].iter().map(String::as_str).collect();
        let p = parse(&refs);
        assert_eq!(p.url, "http://h/$(x)");
        assert_eq!(p.headers, vec!["x-a: $(HOME)".to_string()]);
        assert_eq!((p.connections, p.rate, p.insecure), (10, Some(300.0), true));
        assert_eq!((p.duration.as_str(), p.warmup.as_str()), ("5s", "1s"));
        assert_eq!(p.sample, 0.1);
        assert_eq!(p.part.as_deref(), Some("2/3"));
        assert_eq!(p.start_at.as_deref(), Some("42"));
        assert_eq!(p.serve, Some(format!("0.0.0.0:{PORT}")));
        // Nothing of this machine's: no output files, no kubeconfig.
        assert!(p.json.is_none() && p.kubeconfig.is_none());
        assert!(matches!(load::mode(&p), Ok(load::Mode::Part)));
    }

    #[test]
    fn node_selectors_are_key_value() {
        let m = node_selector(&["pool=load".into(), "zone=a=b".into()]).unwrap();
        assert_eq!(m["pool"], "load");
        assert_eq!(m["zone"], "a=b");
        assert!(node_selector(&["pool".into()]).is_err());
        assert!(run_id().len() <= 11 && run_id().starts_with('g'));
    }
}
