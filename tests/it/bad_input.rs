//! The bad-input catalogue: files and flags a user gets wrong, each refused with one
//! line that says what and where, and exit code 2, before anything is started.

use crate::common::run;
use std::time::Duration;

include!("../data/bad_scenarios.rs");

/// `validate` and `run` refuse each bad scenario with the same one line and exit 2;
/// `run` writes nothing (its results folder would be named after the scenario).
#[test]
fn validate_and_run_refuse_bad_scenarios_alike() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    let out = dir.path().join("out");
    std::fs::write(&file, BASE).unwrap();
    let ok = run(
        &["validate", file.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(ok.code, Some(0), "the base is valid: {}", ok.stderr);
    for (from, to, want) in BAD {
        assert!(BASE.contains(from), "{from:?}");
        std::fs::write(&file, BASE.replacen(from, to, 1)).unwrap();
        let path = file.to_str().unwrap();
        let lines: Vec<String> = [
            vec!["validate", path],
            vec!["run", path, "--out", out.to_str().unwrap()],
            vec!["run", path, "--quick", "--out", out.to_str().unwrap()],
        ]
        .iter()
        .map(|args| {
            let o = run(args, Duration::from_secs(10));
            assert_eq!(o.code, Some(2), "{args:?} {to:?}: {}", o.stderr);
            assert_eq!(
                o.stderr.trim_end().lines().count(),
                1,
                "{args:?}: {}",
                o.stderr
            );
            assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
            o.stderr.trim_end().to_string()
        })
        .collect();
        let expected = format!("ingressbench: scenario {path}: {want}");
        assert!(
            lines[0].starts_with(&expected),
            "{to:?}:\n{}\nnot\n{expected}",
            lines[0]
        );
        assert!(lines.iter().all(|l| *l == lines[0]), "{to:?}: {lines:#?}");
        assert!(!out.exists(), "{to:?}: run wrote {}", out.display());
    }
}
