//! `ingressbench run SCENARIO` as a process, for the tests of whole runs: started with
//! its scratch folders in the test's own folder, finished within a limit, its results
//! read, and what it may leave behind looked for.

use super::json::{f, u};
use super::proc::Proc;
use super::{bin, processes_with, read_json};
use rustix::process::Signal;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Starts a run whose scratch folders go into `<scenario's folder>/tmp`, so what it
/// leaves behind can be told apart from other runs on the machine. If the test ends
/// first, the run is interrupted, so that it stops its proxies and backends.
pub fn start(scn: &Path, out: &Path) -> Proc {
    start_with(scn, out, &[])
}

/// [`start`] with more flags for `run`.
pub fn start_with(scn: &Path, out: &Path, flags: &[&str]) -> Proc {
    let dir = scn.parent().unwrap();
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = bin();
    cmd.env("TMPDIR", &tmp)
        .arg("run")
        .arg(scn)
        .arg("--out")
        .arg(out)
        .args(flags);
    Proc::spawn_group("run", &mut cmd, dir).stop_with(Signal::INT, Duration::from_secs(20))
}

/// Waits for the run with a hard limit (stopping it if it overstays): its exit code
/// and what it printed.
pub fn finish(run: Proc, limit: Duration) -> (i32, String) {
    let out = run.finish(limit);
    (
        out.code.unwrap_or(-1),
        format!("{}{}", out.stdout, out.stderr),
    )
}

/// The result of `system` in the run folder `out`.
pub fn result(out: &Path, system: &str) -> Value {
    read_json(&out.join(system).join("result.json"))
}

/// Every request the run intended is accounted for: completed, failed, not sent or
/// unfinished.
pub fn assert_balanced(r: &Value) {
    let q = &r["requests"];
    assert_eq!(
        u(&q["intended"]),
        u(&q["completed"]) + u(&q["failed"]) + u(&q["not_sent"]) + u(&q["unfinished"]),
        "balance: {q}"
    );
}

/// Every process a run makes names its scratch folder (under `dir/tmp`) or its
/// results folder (under `dir`) in its command line; none may remain, and no scratch
/// folder either.
pub fn assert_nothing_left(dir: &Path) {
    let scope = dir.display().to_string();
    let t = Instant::now();
    loop {
        let leftovers: Vec<String> = processes_with(&scope)
            .into_iter()
            .map(|(_, cmd)| cmd)
            .collect();
        let dirs: Vec<String> = std::fs::read_dir(dir.join("tmp"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                n.starts_with("ingressbench-run-") || n.starts_with("ingressbench-generators-")
            })
            .collect();
        if leftovers.is_empty() && dirs.is_empty() {
            return;
        }
        // Processes already killed may take a moment to be reaped by init.
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "left behind: processes {leftovers:?}, temp folders {dirs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The run's lab events: (time in ms, kind, detail).
pub fn events(r: &Value) -> Vec<(f64, String, String)> {
    r["lab"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                f(&e["t_ms"]),
                e["kind"].as_str().unwrap().to_string(),
                e["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}
