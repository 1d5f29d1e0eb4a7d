//! `ingressbench load` run as the tests' real binary, with a hard time limit, and its
//! JSON result read and checked (shape and request balance).

use super::proc::Proc;
use super::{cpu, shared, Turn, BIN, ERROR_KINDS, PERCENTILE_KEYS, REQUEST_COUNTS};
use serde_json::Value;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// A running `ingressbench load`, with `--json` pointing into its own temp dir.
pub struct Load {
    // Field order matters: the process goes before its temp dir.
    proc: Proc,
    dir: tempfile::TempDir,
    started: Instant,
    cpu_before: Option<cpu::Sample>,
    args: Vec<String>,
    _lock: Turn,
}

/// What a finished (or killed) load run left behind.
#[derive(Debug)]
pub struct LoadOutput {
    /// Exit code; `None` when it was killed by a signal (ours after the time limit, or
    /// one it did not handle).
    pub code: Option<i32>,
    /// True when the run outlived its time limit and was killed.
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    /// The parsed `--json` file, if the run wrote one.
    pub json: Option<Value>,
    /// From spawn to exit.
    pub elapsed: Duration,
    /// Cores kept busy by processes other than the test's own during the run: above
    /// [`cpu::BUSY_CORES`] the machine, not the generator, may explain lag.
    pub others_cpu: Option<f64>,
    pub args: Vec<String>,
    /// Kept so that files written next to the JSON (`--hdr-log`) can still be read.
    pub dir: tempfile::TempDir,
    /// The process id it ran as (which names its generators' scratch folder).
    pub pid: u32,
}

impl Load {
    /// Starts `ingressbench load ARGS --json <tmp>/r.json`. `{dir}` in an argument is
    /// replaced with the run's temp dir (for `--hdr-log {dir}/h.hlog`). It shares the
    /// machine ([`shared`]): a test that times the run uses [`Load::spawn_exclusive`].
    pub fn spawn<S: AsRef<OsStr>>(args: &[S]) -> Load {
        Load::spawn_exclusive(args, shared())
    }

    /// [`Load::spawn`] with the test's turn already taken ([`super::exclusive`] for a
    /// timing test).
    pub fn spawn_exclusive<S: AsRef<OsStr>>(args: &[S], lock: Turn) -> Load {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().to_str().expect("utf-8 temp path").to_string();
        let mut argv: Vec<String> = vec!["load".into()];
        argv.extend(
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().replace("{dir}", &d)),
        );
        argv.push("--json".into());
        argv.push(format!("{d}/r.json"));
        let cpu_before = cpu::sample();
        let mut cmd = Command::new(BIN);
        cmd.args(&argv);
        Load {
            proc: Proc::spawn("load", &mut cmd, dir.path()),
            dir,
            started: Instant::now(),
            cpu_before,
            args: argv,
            _lock: lock,
        }
    }

    pub fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// Waits up to `limit` for the run to end (killing it after that) and collects it.
    pub fn finish(self, limit: Duration) -> LoadOutput {
        let Load {
            mut proc,
            dir,
            started,
            cpu_before,
            args,
            _lock,
        } = self;
        let pid = proc.id();
        let status = proc.wait_timeout(limit);
        let timed_out = status.is_none();
        let status = status.or_else(|| proc.kill());
        let elapsed = started.elapsed();
        let others_cpu = cpu_before
            .zip(cpu::sample())
            .map(|(a, b)| b.others_cores_since(&a));
        let stdout = proc.stdout_so_far();
        let stderr = proc.stderr_so_far();
        let path = dir.path().join("r.json");
        let json = std::fs::read(&path).ok().map(|b| {
            serde_json::from_slice(&b).unwrap_or_else(|e| {
                panic!(
                    "{} is not JSON: {e}\n{}",
                    path.display(),
                    String::from_utf8_lossy(&b)
                )
            })
        });
        let out = LoadOutput {
            code: status.and_then(|s| s.code()),
            timed_out,
            stdout,
            stderr,
            json,
            elapsed,
            others_cpu,
            args,
            dir,
            pid,
        };
        // To see what passing runs measured: INGRESSBENCH_TEST_VERBOSE=1 cargo test -- --nocapture
        if std::env::var_os("INGRESSBENCH_TEST_VERBOSE").is_some() {
            eprintln!("{}\n", out.context());
        }
        out
    }
}

/// Whether a run (or a pair of runs) whose generator said it was overloaded may be run
/// again, after `attempt` attempts.
///
/// `generator.overloaded` is the engine's honest verdict on its own send lag, and lag
/// is real whoever causes it. On a machine others keep busy (a parallel build: 20 ms
/// lag p99 at 20 req/s was seen) the verdict says nothing about the engine, so up to 4
/// attempts are made. On a machine others left nearly free, one attempt more is
/// allowed: CI's virtual machine once put a 3 s run's lag p99 at 2.07 ms against the
/// 2 ms limit, with others at 0.21 cores, which a second run does not repeat. A
/// generator that cannot hold the rate is overloaded every time and fails.
pub fn may_retry_overloaded(attempt: usize, runs: &[&LoadOutput]) -> bool {
    let overloaded = runs.iter().any(|o| o.overloaded());
    if !overloaded {
        return false;
    }
    // The machine, not the generator: run again once it settles, apart from the
    // budget (see `super::machine_rerun`).
    if let Some(o) = runs.iter().find(|o| o.overloaded() && o.machine_caused()) {
        if super::machine_rerun(&format!(
            "attempt {attempt}: the machine took the generator's time: {}",
            o.machine_said()
        )) {
            return true;
        }
    }
    // Attempts the machine spoiled are not the engine's: not counted. Saturating:
    // the count is the test's, and a test may rerun for the machine in a loop of
    // its own around this one (`load::sends_are_timed_...`).
    let attempt = attempt.saturating_sub(super::machine_reruns());
    let busy = runs
        .iter()
        .any(|o| o.others_cpu.is_some_and(|c| c >= cpu::BUSY_CORES));
    let attempts = if busy { 4 } else { 2 };
    if attempt < attempts {
        let why = format!(
            "attempt {attempt}: generator overloaded while other processes used {} cores ({}); \
             running again",
            runs.iter()
                .map(|o| o.others_cpu.map_or("?".into(), |c| format!("{c:.2}")))
                .collect::<Vec<_>>()
                .join(" and "),
            runs.iter()
                .map(|o| o.machine_said())
                .collect::<Vec<_>>()
                .join("; ")
        );
        eprintln!("{why}");
        super::record_retry(&why);
        return true;
    }
    false
}

/// Runs `ingressbench load ARGS --json FILE`, killed after `limit`.
pub fn run_load<S: AsRef<OsStr>>(args: &[S], limit: Duration) -> LoadOutput {
    Load::spawn(args).finish(limit)
}

/// [`run_load`] for a timing test: the machine is the run's alone ([`super::exclusive`]).
pub fn run_load_alone<S: AsRef<OsStr>>(args: &[S], limit: Duration) -> LoadOutput {
    Load::spawn_exclusive(args, super::exclusive()).finish(limit)
}

/// Runs a load whose generator must not be overloaded, on a machine free enough to
/// tell: each attempt first waits for a quiet second, and an overloaded run is run
/// again as [`may_retry_overloaded`] allows. `before_each` runs before each attempt
/// (to reset a server's log).
pub fn run_not_overloaded(
    args: &[&str],
    limit: Duration,
    mut before_each: impl FnMut(),
) -> LoadOutput {
    let mut attempt = 1;
    loop {
        cpu::wait_for_quiet(Duration::from_secs(20));
        before_each();
        let out = run_load_alone(args, limit);
        if !may_retry_overloaded(attempt, &[&out]) {
            return out;
        }
        attempt += 1;
    }
}

impl LoadOutput {
    /// Whether the run's generator said it was overloaded.
    /// The generator's lag was over the limit, whatever the cause: short of CPU
    /// (`overloaded`) or woken late with CPU to spare (`woke_late`). Either way its
    /// own delay is in the latencies, which is what a timing test must not judge.
    pub fn overloaded(&self) -> bool {
        let g = |k: &str| self.result()["generator"][k] == Value::Bool(true);
        self.json.is_some() && (g("overloaded") || g("woke_late"))
    }

    /// The generator said its lag was the machine's doing (`generator.cause`:
    /// stolen time or stalls, see `results::MachineTime`).
    pub fn machine_caused(&self) -> bool {
        self.json.is_some() && self.result()["generator"]["cause"] == "machine"
    }

    /// The machine took enough of the window to explain a lag over the limit
    /// (`results::MachineTime::disturbed`), whatever the lag was.
    pub fn machine_disturbed(&self) -> bool {
        let Some(v) = &self.json else { return false };
        let Ok(m) =
            serde_json::from_value::<results::MachineTime>(v["generator"]["machine"].clone())
        else {
            return false;
        };
        m.disturbed(v["duration_s"].as_f64().unwrap_or(0.0) * 1e3)
    }

    /// What the generator said the machine did, for a retry's reason.
    pub fn machine_said(&self) -> String {
        let Some(v) = &self.json else {
            return "no result".into();
        };
        let g = &v["generator"];
        let m = &g["machine"];
        if m.is_null() {
            return format!("cause {}, no machine figures", g["cause"]);
        }
        format!(
            "cause {}, lag p99 {} ms, steal {} ms (share {}), others {} cores, {} stalls ({} ms, longest {} ms)",
            g["cause"],
            g["lag_p99_ms"],
            m["steal_ms"],
            m["steal_share"],
            m["others_cores"],
            m["stalls"],
            m["stall_ms"],
            m["stall_max_ms"]
        )
    }

    /// Path of a file in the run's temp dir (the `{dir}` of [`Load::spawn`]).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Everything needed to judge a failure, for assertion messages.
    pub fn context(&self) -> String {
        let brief = self.json.as_ref().map(|v| {
            let pick = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
            serde_json::json!({
                "partial": pick("partial"),
                "duration_s": pick("duration_s"),
                "rate": pick("rate"),
                "requests": pick("requests"),
                "errors": pick("errors"),
                "tls": pick("tls"),
                "generator": pick("generator"),
                "backends": pick("backends"),
                "corrected": v.pointer("/latency_ms/corrected").cloned(),
                "uncorrected": v.pointer("/latency_ms/uncorrected").cloned(),
            })
        });
        format!(
            "args: {:?}\nexit: {:?} (timed out: {}, {:.1?}; other processes used {} cores)\n\
             stderr: {}\nstdout: {}\nresult: {}",
            self.args,
            self.code,
            self.timed_out,
            self.elapsed,
            self.others_cpu
                .map(|c| format!("{c:.2}"))
                .unwrap_or_else(|| "?".into()),
            self.stderr.trim_end(),
            self.stdout.trim_end(),
            brief
                .map(|b| serde_json::to_string_pretty(&b).unwrap())
                .unwrap_or_else(|| "(no JSON written)".into()),
        )
    }

    /// The result of a run that must have ended on its own, with exit code 0, and
    /// written a well-formed, balanced result.
    pub fn ok(&self) -> &Value {
        assert!(
            !self.timed_out,
            "run did not end in time\n{}",
            self.context()
        );
        assert_eq!(self.code, Some(0), "exit code\n{}", self.context());
        self.result()
    }

    /// The result of a run that ended on its own with nothing succeeded: exit code 1,
    /// the summary's `FAILED:` line, and a well-formed, balanced result.
    pub fn failed(&self) -> &Value {
        assert!(
            !self.timed_out,
            "run did not end in time\n{}",
            self.context()
        );
        assert_eq!(
            self.code,
            Some(1),
            "exit code of a run where nothing succeeded\n{}",
            self.context()
        );
        assert!(
            self.stdout.contains("\nFAILED: "),
            "no FAILED line\n{}",
            self.context()
        );
        self.result()
    }

    /// The JSON result (checked for shape and balance), whatever the exit code.
    pub fn result(&self) -> &Value {
        let v = self
            .json
            .as_ref()
            .unwrap_or_else(|| panic!("no JSON result\n{}", self.context()));
        if let Err(e) = check_result(v) {
            panic!("malformed result: {e}\n{}", self.context());
        }
        v
    }

    /// `u64` at a JSON pointer of the result (`/requests/completed`).
    pub fn u(&self, ptr: &str) -> u64 {
        let v = self.result();
        v.pointer(ptr)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{ptr} is not an unsigned integer\n{}", self.context()))
    }

    /// `f64` at a JSON pointer of the result (`/latency_ms/corrected/p99`).
    pub fn f(&self, ptr: &str) -> f64 {
        let v = self.result();
        v.pointer(ptr)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("{ptr} is not a number\n{}", self.context()))
    }

    /// Errors of every kind.
    pub fn errors_total(&self) -> u64 {
        ERROR_KINDS
            .iter()
            .map(|k| self.u(&format!("/errors/{k}")))
            .sum()
    }

    /// Asserts that the run saw no error of any kind.
    pub fn assert_no_errors(&self) {
        assert_eq!(self.errors_total(), 0, "errors\n{}", self.context());
        assert_eq!(self.u("/requests/failed"), 0, "failed\n{}", self.context());
    }

    /// Asserts that `kind` was counted, no other kind was, and no request succeeded.
    pub fn assert_only_error(&self, kind: &str) {
        assert!(ERROR_KINDS.contains(&kind), "unknown kind {kind}");
        assert!(
            self.u(&format!("/errors/{kind}")) > 0,
            "expected {kind} errors\n{}",
            self.context()
        );
        for other in ERROR_KINDS.iter().filter(|k| **k != kind) {
            assert_eq!(
                self.u(&format!("/errors/{other}")),
                0,
                "a {kind} server must not produce {other} errors\n{}",
                self.context()
            );
        }
        assert_eq!(
            self.u("/requests/completed"),
            0,
            "nothing can succeed against a {kind} server\n{}",
            self.context()
        );
        assert!(
            self.u("/requests/failed") > 0,
            "errors must fail requests\n{}",
            self.context()
        );
    }
}

/// Checks the shape of an `ingressbench/result/v1` document and its request balance.
///
/// # Errors
/// A message naming the first field that is missing, mistyped or inconsistent.
pub fn check_result(v: &Value) -> Result<(), String> {
    let get = |ptr: &str| v.pointer(ptr).ok_or_else(|| format!("missing {ptr}"));
    let num = |ptr: &str| -> Result<f64, String> {
        get(ptr)?
            .as_f64()
            .ok_or_else(|| format!("{ptr} is not a number"))
    };
    let count = |ptr: &str| -> Result<u64, String> {
        get(ptr)?
            .as_u64()
            .ok_or_else(|| format!("{ptr} is not a count"))
    };

    if get("/schema")? != "ingressbench/result/v1" {
        return Err(format!("schema is {}", v["schema"]));
    }
    get("/partial")?.as_bool().ok_or("partial is not a bool")?;
    get("/target")?.as_str().ok_or("target is not a string")?;
    get("/config")?
        .as_object()
        .ok_or("config is not an object")?;
    get("/started_at")?
        .as_str()
        .ok_or("started_at is not a string")?;
    num("/duration_s")?;
    get("/rate/target")?; // null in --max mode
    num("/rate/achieved")?;

    let r: Vec<u64> = REQUEST_COUNTS
        .iter()
        .map(|k| count(&format!("/requests/{k}")))
        .collect::<Result<_, _>>()?;
    let (intended, sent, completed, failed, not_sent, unfinished, timed_out_unsent) =
        (r[0], r[1], r[2], r[3], r[4], r[5], r[6]);
    if intended != completed + failed + not_sent + unfinished {
        return Err(format!(
            "balance: intended {intended} != completed {completed} + failed {failed} \
             + not_sent {not_sent} + unfinished {unfinished}"
        ));
    }
    if sent + timed_out_unsent != completed + failed + unfinished {
        return Err(format!(
            "balance: sent {sent} + timed_out_unsent {timed_out_unsent} != completed {completed} \
             + failed {failed} + unfinished {unfinished}"
        ));
    }
    // Only an interrupt leaves due requests unsent or unfinished.
    if get("/partial")? == &Value::Bool(false) && not_sent + unfinished > 0 {
        return Err(format!(
            "not_sent {not_sent} and unfinished {unfinished} in a run that was not interrupted"
        ));
    }
    // Why the requests behind at the window's end were: the causes add up to the
    // intended requests not started in the window.
    let behind: u64 = ["generator_late", "connections_busy", "connections_failed"]
        .iter()
        .map(|k| count(&format!("/rate/shortfall/{k}")))
        .sum::<Result<_, _>>()?;
    if behind > intended {
        return Err(format!(
            "rate.shortfall adds up to {behind}, more than the {intended} intended"
        ));
    }

    for k in ERROR_KINDS {
        count(&format!("/errors/{k}"))?;
    }
    // Every kind that occurred says why (its first message), and only those.
    let first = v.pointer("/errors/first").and_then(Value::as_object);
    for k in ERROR_KINDS {
        let n = count(&format!("/errors/{k}"))?;
        let msg = first.and_then(|f| f.get(k)).and_then(Value::as_str);
        match (n, msg) {
            (0, Some(m)) => return Err(format!("errors.first.{k} is {m:?} but no {k} error")),
            (1.., None) => return Err(format!("{n} {k} errors and no errors.first.{k}")),
            (_, Some("")) => return Err(format!("errors.first.{k} is empty")),
            _ => {}
        }
    }
    let codes = get("/errors/status_codes")?
        .as_object()
        .ok_or("status_codes is not an object")?;
    let mut by_code = 0;
    for (code, n) in codes {
        let c: u16 = code
            .parse()
            .map_err(|_| format!("status code {code:?} is not a number"))?;
        if c < 400 {
            return Err(format!("status code {c} < 400 counted as an error"));
        }
        by_code += n.as_u64().ok_or("status_codes value is not a count")?;
    }
    if by_code != count("/errors/status")? {
        return Err(format!(
            "status_codes add up to {by_code}, errors.status is {}",
            v["errors"]["status"]
        ));
    }

    for block in ["corrected", "uncorrected", "generator_lag"] {
        // Figures of no value at all are null, never a perfect 0.
        if count(&format!("/latency_ms/{block}/count"))? == 0 {
            for k in PERCENTILE_KEYS.iter().chain(&["mean", "stdev"]) {
                let x = get(&format!("/latency_ms/{block}/{k}"))?;
                if !x.is_null() {
                    return Err(format!(
                        "latency_ms.{block}.{k} = {x} with count 0, not null"
                    ));
                }
            }
            continue;
        }
        let mut prev = 0.0_f64;
        for k in PERCENTILE_KEYS {
            let x = num(&format!("/latency_ms/{block}/{k}"))?;
            // Percentiles come from histogram buckets, max possibly from the raw value:
            // allow the 3-significant-digit bucket width between them.
            if x < 0.0 || x < prev * 0.998 - 1e-6 {
                return Err(format!(
                    "latency_ms.{block}.{k} = {x} below the previous percentile {prev}"
                ));
            }
            prev = prev.max(x);
        }
        num(&format!("/latency_ms/{block}/mean"))?;
        num(&format!("/latency_ms/{block}/stdev"))?;
    }

    let timeline = get("/timeline")?
        .as_array()
        .ok_or("timeline is not an array")?;
    for (i, e) in timeline.iter().enumerate() {
        for k in ["t", "completed", "errors"] {
            e.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("timeline[{i}].{k} is not a count"))?;
        }
        for k in ["p50", "p99", "max"] {
            e.get(k)
                .and_then(Value::as_f64)
                .ok_or_else(|| format!("timeline[{i}].{k} is not a number"))?;
        }
        e.get("backends")
            .and_then(Value::as_object)
            .ok_or_else(|| format!("timeline[{i}].backends is not an object"))?;
    }
    get("/backends")?
        .as_object()
        .ok_or("backends is not an object")?;
    get("/histogram")?
        .as_str()
        .ok_or("histogram is not a string")?;
    get("/generator/overloaded")?
        .as_bool()
        .ok_or("generator.overloaded is not a bool")?;
    num("/generator/lag_p99_ms")?;
    count("/tls/handshakes")?;
    Ok(())
}

/// Decodes a base64 HdrHistogram (V2, compressed or not), as in `histogram` of the result
/// and in interval log lines.
///
/// # Errors
/// A message when the text is not base64 or not a serialized histogram.
pub fn decode_histogram(b64: &str) -> Result<hdrhistogram::Histogram<u64>, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("base64: {e}"))?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("histogram: {e:?}"))
}
