//! Where results go is checked before anything runs: a folder given as a file, two
//! outputs on one file, and a results folder that is in use or already full are each
//! refused with one line and exit code 2, before a load or a proxy starts.

use crate::common::run;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);

fn one_line_exit_2(args: &[&str], expect: &str) {
    let t = Instant::now();
    let out = run(args, LIMIT);
    assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {}", out.stderr);
    assert!(lines[0].contains(expect), "{args:?}: {}", lines[0]);
    // Refused before the 30 s load would have run.
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn load_outputs_are_checked_before_the_load() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().display().to_string();
    let json = d.path().join("r.json").display().to_string();
    let base = ["load", "-c1", "-R10", "-d30s", "http://127.0.0.1:1/"];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    for (extra, expect) in [
        (vec!["--json", dir.as_str()], "--json "),
        (vec!["--hdr-log", dir.as_str()], "is a folder"),
        (vec!["--report", dir.as_str()], "is a folder"),
        (
            vec!["--json", json.as_str(), "--hdr-log", json.as_str()],
            "--json and --hdr-log are the same file",
        ),
    ] {
        let args = with(&extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        one_line_exit_2(&args, expect);
    }
}

#[test]
fn a_results_folder_with_results_is_not_overwritten_unasked() {
    let d = tempfile::tempdir().unwrap();
    let scn = d.path().join("s.yaml");
    std::fs::write(
        &scn,
        "name: t\nsystems: [caddy-api]\nload:\n  rate: 10\n  duration: 30s\n",
    )
    .unwrap();
    let (scn_s, other) = (scn.display().to_string(), d.path().join("o2"));
    one_line_exit_2(
        &[
            "run",
            &scn_s,
            "--only",
            "nginx-lua",
            "--out",
            &other.display().to_string(),
        ],
        "--only nginx-lua: not in this scenario: use one of caddy-api",
    );
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("summary.txt"), "an earlier run").unwrap();
    let (scn, out_s) = (scn.display().to_string(), out.display().to_string());
    one_line_exit_2(
        &["run", &scn, "--out", &out_s],
        "already holds results: give another --out, or --force",
    );
    assert_eq!(
        std::fs::read_to_string(out.join("summary.txt")).unwrap(),
        "an earlier run",
        "nothing of the earlier run was touched"
    );
}
