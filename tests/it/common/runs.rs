//! Real short runs for the report's end-to-end tests to draw: the built binary as load
//! generator and lab, each bounded in time, traffic only to 127.0.0.1; and the report
//! drawn from them.

use super::proc::{tail, Output, Proc};
use super::{bin, read_json};
use rustix::process::Signal;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `ingressbench load ARGS --json <dir>/result.json` as a process (`dir` is created).
///
/// `-t1`: one worker thread. A second worker panics in debug builds (an overflowing
/// multiplication seeding its sampling rng) and the process then never exits.
pub fn spawn_load(dir: &Path, args: &[&str]) -> Proc {
    std::fs::create_dir_all(dir).expect("run dir");
    let mut cmd = bin();
    cmd.args(["load", "--quiet", "-t1"])
        .args(args)
        .arg("--json")
        .arg(dir.join("result.json"));
    Proc::spawn("load", &mut cmd, dir).stop_with(Signal::INT, Duration::from_secs(3))
}

/// Runs a load to its end (within `limit`) and returns its output and result.
///
/// # Panics
/// When it fails, overstays or writes no result.
pub fn load(dir: &Path, args: &[&str], limit: Duration) -> (Output, Value) {
    load_exiting(dir, args, limit, 0)
}

/// [`load`] of a run that must exit with `code`: 1 when nothing can succeed (every
/// request refused, failing its handshake or answered with an error).
pub fn load_exiting(dir: &Path, args: &[&str], limit: Duration, code: i32) -> (Output, Value) {
    let out = spawn_load(dir, args).finish(limit);
    assert_eq!(
        out.code,
        Some(code),
        "load {args:?}: exit code:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let result = read_json(&dir.join("result.json"));
    (out, result)
}

/// `ingressbench run SCENARIO --quick --only SYSTEMS --out OUT`, within `limit`.
///
/// Interrupted (SIGINT, then killed) if the test ends early, so its proxies and
/// backends, which it runs in process groups of their own, are stopped by it.
pub fn lab_run(scenario: &Path, systems: &str, out: &Path, limit: Duration) -> Output {
    let logs = out.parent().expect("out has a parent");
    let mut cmd = bin();
    cmd.arg("run")
        .arg(scenario)
        .args(["--quick", "--only", systems, "--out"])
        .arg(out);
    let run = Proc::spawn_group("lab-run", &mut cmd, logs)
        .stop_with(Signal::INT, Duration::from_secs(20));
    let out = run.finish(limit);
    assert_eq!(
        out.code,
        Some(0),
        "ingressbench run failed:\n{}",
        tail(&out.stderr, 40)
    );
    out
}

/// `ingressbench report ARGS` (quick: it only reads files), from `cwd`.
pub fn report(cwd: &Path, args: &[&Path]) -> Output {
    let mut cmd = bin();
    cmd.current_dir(cwd).arg("report").args(args);
    Proc::spawn("report", &mut cmd, cwd).finish(Duration::from_secs(30))
}

/// Writes the report of `runs` to `page` and returns where the command said it went.
///
/// # Panics
/// When the command fails or the page is missing.
pub fn write_report(runs: &[&Path], page: Option<&Path>, cwd: &Path) -> PathBuf {
    let mut args: Vec<&Path> = runs.to_vec();
    if let Some(p) = page {
        args.push(Path::new("--out"));
        args.push(p);
    }
    let out = report(cwd, &args);
    assert_eq!(
        out.code,
        Some(0),
        "ingressbench report {args:?} failed:\n{}{}",
        out.stdout,
        out.stderr
    );
    let said = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("report written to "))
        .unwrap_or_else(|| panic!("report: no \"report written to\" line in:\n{}", out.stdout));
    let path = cwd.join(said.trim());
    assert!(path.is_file(), "report: {} does not exist", path.display());
    path
}
