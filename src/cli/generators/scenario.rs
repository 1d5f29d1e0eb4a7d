//! `run --generators N`: a scenario's load over N processes of this binary, while the
//! runner changes the system under test.
//!
//! The same children as `load --generators` (same split, shared start instant, clock
//! probes, bounded wait and merge), with two additions a scenario needs: each change
//! the runner marks is forwarded to every child on its stdin, so each counts its
//! requests by the same change windows, and each child writes those windows (counts,
//! latency histogram, route markers) into its result, added up here. Per-backend
//! first and last responses, which endpoint propagation is computed from, are merged
//! by `results::merge` like everything else.

use super::{available_cpus, now_unix_ns, probe_all, spawn_all, wait_all, Generator};
use engine::split;
use engine::windows::Tally;
use engine::LoadSpec;
use results::merge::Part;
use results::RunResult;
use scenario::runner::{LoadRun, LoadRunner};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The load of every system of a scenario run, split over `count` local processes.
pub struct LocalGenerators {
    pub count: usize,
}

impl LoadRunner for LocalGenerators {
    fn run(&self, load: LoadRun) -> Result<(RunResult, Tally), scenario::runner::LoadError> {
        let n = self.count;
        let spec = &split::whole(&load.spec, n);
        let plan = split::split(spec, n, 0).map_err(|e| e.to_string())?;
        // The scenario's generator CPUs (placement), one per child when there are
        // enough; otherwise the children share them.
        let cpus = if spec.cpus.is_empty() {
            available_cpus()
        } else {
            spec.cpus.clone()
        };
        let dir = tempfile::Builder::new()
            .prefix("ingressbench-generators-")
            .tempdir()
            .map_err(|e| format!("temporary folder for the generators' results: {e}"))?;
        // A run killed outright (SIGKILL) runs none of this: its watchdog removes the
        // folder and stops the children (which also die with their parent).
        lab::watchdog::watch_path(dir.path());
        let flags = load_flags(spec, Some(dir.path()))?;
        let lead = Duration::from_secs(1) + spec.connect_timeout;
        let start_at = split::start_instant(now_unix_ns(), lead);
        let mut args: Vec<std::ffi::OsString> = vec!["load".into()];
        args.extend(flags.into_iter().map(Into::into));
        let mut gens = spawn_all(
            &plan,
            &cpus,
            start_at,
            dir.path(),
            &args,
            &["--marks", "--quiet"],
        )?;
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
pub(super) fn merge_parts(
    parts: Vec<Part>,
    start_at: u128,
    origin: results::clock::Nanos,
) -> Result<(RunResult, Tally), scenario::runner::LoadError> {
    let mut tally = Tally::default();
    for p in &parts {
        let missed = p.planned.marks.as_ref().is_some_and(|m| m.missed > 0);
        if let (Some(r), false) = (&p.result, missed) {
            tally
                .add_parts(&r.windows_part, origin)
                .map_err(|e| format!("generator {}: {e}", p.planned.index))?;
        }
    }
    let mut merged = results::merge::merge(parts, start_at)
        .map_err(|e| format!("merging the generators' results: {e}"))?;
    // The per-second histograms served the merge; the result keeps the timeline.
    merged.take_second_histograms();
    Ok((merged, tally))
}

/// A request mix as a targets file (Vegeta's format, with `weight=N`) in `dir`, a
/// body in a file of its own beside it: what `load --targets` reads back into the
/// same list.
fn write_targets(targets: &[engine::targets::TargetSpec], dir: &Path) -> Result<PathBuf, String> {
    let mut text = String::new();
    for (i, t) in targets.iter().enumerate() {
        text.push_str(&format!("{} {} weight={}\n", t.method, t.url, t.weight));
        for h in &t.headers {
            text.push_str(h);
            text.push('\n');
        }
        if !t.body.is_empty() {
            let body = dir.join(format!("body-{i}"));
            std::fs::write(&body, &t.body)
                .map_err(|e| format!("writing {}: {e}", body.display()))?;
            text.push_str(&format!("@{}\n", body.display()));
        }
        text.push('\n');
    }
    let file = dir.join("targets.txt");
    std::fs::write(&file, text).map_err(|e| format!("writing {}: {e}", file.display()))?;
    Ok(file)
}

/// The flags of `ingressbench load` that make each child compute its share of
/// `spec` (every child splits the same whole load, as with `load --generators`). A
/// request mix goes as a targets file written in `dir`: children on this machine
/// read it; pods (`None`) cannot.
pub(super) fn load_flags(s: &LoadSpec, dir: Option<&Path>) -> Result<Vec<String>, String> {
    let d = |d: Duration| format!("{}us", d.as_micros());
    let mut f = vec![
        s.url.clone(),
        "--method".into(),
        s.method.clone(),
        "-c".into(),
        s.connections.to_string(),
        "-d".into(),
        d(s.duration),
        "--warmup".into(),
        d(s.warmup),
        "--timeout".into(),
        d(s.timeout),
        "--connect-timeout".into(),
        d(s.connect_timeout),
        "--send-window".into(),
        d(s.send_window),
        "--schedule".into(),
        s.schedule.clone(),
        "--backend-header".into(),
        s.backend_header.clone(),
        "--sample".into(),
        s.sample.to_string(),
    ];
    if let Some(t) = s.threads {
        f.extend(["-t".into(), t.to_string()]);
    }
    match s.rate {
        Some(r) => f.extend(["-R".into(), r.to_string()]),
        None => f.push("--max".into()),
    }
    for h in &s.headers {
        f.extend(["-H".into(), h.clone()]);
    }
    if !s.body.is_empty() {
        let body = String::from_utf8(s.body.clone())
            .map_err(|_| "--generators: a request body that is not UTF-8 cannot be passed on")?;
        f.extend(["--body".into(), body]);
    }
    if s.new_connection {
        f.push("--new-connection".into());
    }
    if s.reuse_closed {
        f.push("--reuse-closed".into());
    }
    if s.tls.insecure {
        f.push("-k".into());
    }
    if let Some(c) = &s.tls.cacert {
        f.extend(["--cacert".into(), c.display().to_string()]);
    }
    if let Some(v) = &s.tls.version {
        f.extend(["--tls-version".into(), v.clone()]);
    }
    if s.tls.resume {
        f.push("--tls-resume".into());
    }
    for m in &s.markers {
        f.extend(["--marker".into(), super::load::marker_flag(m)]);
    }
    if !s.targets.is_empty() {
        let Some(dir) = dir else {
            return Err("a request mix cannot be passed to generator pods yet: run it with local generators".into());
        };
        let file = write_targets(&s.targets, dir)?;
        f.extend(["--targets".into(), file.display().to_string()]);
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        load: super::super::LoadArgs,
    }

    /// A load spec with every setting off its default.
    fn sample_spec() -> LoadSpec {
        LoadSpec {
            url: "https://127.0.0.1:8443/x".into(),
            method: "GET".into(),
            headers: vec!["x-a: 1".into()],
            body: Vec::new(),
            targets: Vec::new(),
            targets_from: String::new(),
            threads: Some(2),
            connections: 50,
            rate: Some(1234.5),
            profile: None,
            schedule: "shared".into(),
            duration: Duration::from_millis(10_500),
            warmup: Duration::from_secs(2),
            timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_millis(1500),
            send_window: Duration::from_micros(120),
            new_connection: true,
            reuse_closed: true,
            tls: engine::tls::TlsOptions {
                insecure: false,
                cacert: Some("/tmp/ca.pem".into()),
                version: Some("1.3".into()),
                resume: false,
            },
            backend_header: "x-backend".into(),
            markers: vec![
                engine::Marker::Header("x-custom".into()),
                engine::Marker::Body(b"uri: /rewritten/".to_vec()),
            ],
            sample: 0.1,
            cpus: Vec::new(),
            http2: Default::default(),
        }
    }

    /// A request mix goes to the children as a targets file they read back into
    /// the same targets: method, URL, headers, body and weight.
    #[test]
    fn a_request_mix_survives_the_trip_through_a_targets_file() {
        let dir = tempfile::tempdir().unwrap();
        let t = |method: &str, url: &str, headers: &[&str], body: &[u8], weight| {
            engine::targets::TargetSpec {
                method: method.into(),
                url: url.into(),
                headers: headers.iter().map(|h| h.to_string()).collect(),
                body: body.to_vec(),
                weight,
                line: 0,
            }
        };
        let targets = vec![
            t(
                "GET",
                "http://h0.routes.test/r0",
                &["Host: h0.routes.test"],
                b"",
                1_000_000,
            ),
            t(
                "POST",
                "http://h1.routes.test/r1",
                &["x-a: 1", "x-b: 2"],
                b"{\"k\": 1}\n",
                3,
            ),
        ];
        let spec = LoadSpec {
            targets: targets.clone(),
            ..sample_spec()
        };
        let mut argv = vec!["ib".to_string()];
        argv.extend(load_flags(&spec, Some(dir.path())).unwrap());
        let args = Cli::try_parse_from(argv).unwrap().load;
        let back = super::super::load::spec(&args).unwrap();
        assert_eq!(back.targets.len(), 2);
        for (b, t) in back.targets.iter().zip(&targets) {
            assert_eq!(
                (&b.method, &b.url, &b.headers, &b.body, b.weight),
                (&t.method, &t.url, &t.headers, &t.body, t.weight)
            );
        }
        let e = load_flags(&spec, None).unwrap_err();
        assert!(e.contains("generator pods"), "{e}");
    }

    /// The flags read back by `load` give the same settings: what each child splits
    /// is the load the runner resolved.
    #[test]
    fn a_spec_survives_the_trip_through_flags() {
        let spec = sample_spec();
        let mut argv = vec!["ib".to_string()];
        argv.extend(load_flags(&spec, None).unwrap());
        let args = Cli::try_parse_from(argv).unwrap().load;
        let back = super::super::load::spec(&args).unwrap();
        assert_eq!(back.url, spec.url);
        assert_eq!(back.headers, spec.headers);
        assert_eq!(
            (back.threads, back.connections, back.rate),
            (spec.threads, 50, Some(1234.5))
        );
        assert_eq!(back.schedule, "shared");
        assert_eq!(
            (
                back.duration,
                back.warmup,
                back.timeout,
                back.connect_timeout
            ),
            (
                spec.duration,
                spec.warmup,
                spec.timeout,
                spec.connect_timeout
            )
        );
        assert_eq!(
            back.send_window,
            Duration::from_micros(120),
            "--send-window goes to each generator"
        );
        assert!(back.new_connection);
        assert!(back.reuse_closed, "--reuse-closed goes to each generator");
        assert_eq!(back.tls.cacert, spec.tls.cacert);
        assert_eq!(back.tls.version.as_deref(), Some("1.3"));
        assert_eq!(back.markers, spec.markers);
        assert_eq!(back.sample, 0.1);
    }
}
