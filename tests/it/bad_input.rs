//! The bad-input catalogue: files and flags a user gets wrong, each refused with one
//! line that says what and where, and exit code 2, before anything is started.

use crate::common::run;
use std::time::Duration;

/// A small valid scenario; each case below replaces one line of it.
const SCENARIO: &str = "\
name: t
systems: [caddy-api]
backends:
  replicas: 2
load:
  rate: 200
  duration: 4s
quick:
  rate: 100
";

/// (line replaced, replacement, what follows `scenario FILE: ` on stderr).
const BAD_SCENARIOS: &[(&str, &str, &str)] = &[
    (
        "  replicas: 2\n",
        "  replicas: 2\n  delay: soon\n",
        "line 5: backends.delay \"soon\": 'soon' is not a duration",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  timeout: 0s\n",
        "line 7: load.timeout must be longer than 0s",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  connect_timeout: 0s\n",
        "line 7: load.connect_timeout must be longer than 0s",
    ),
    (
        "  rate: 100\n",
        "  rate: 0\n",
        "line 9: quick.rate 0 is not a rate",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\n  connections: 0\n",
        "line 10: quick.connections must be at least 1",
    ),
    (
        "  duration: 4s\n",
        "  duration: 99999999999s\n",
        "line 7: load.duration: 99999999999s is too long: a scenario's durations are at most 7 days",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 0\n",
        "line 4: backends.replicas: 0 is out of range",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  sample: 1.5\n",
        "line 7: load.sample 1.5: give a fraction of requests from 0 to 1",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api\n",
        "line 3: did not find expected ',' or ']', while parsing a flow sequence at line 2",
    ),
    (
        "name: t\n",
        "name: \"../../etc/x\"\n",
        "line 1: name \"../../etc/x\": use 1 to 64 letters, digits, '.', '_' or '-'",
    ),
];

/// `validate` and `run` refuse each bad scenario with the same one line and exit 2;
/// `run` writes nothing (its results folder would be named after the scenario).
#[test]
fn validate_and_run_refuse_bad_scenarios_alike() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    let out = dir.path().join("out");
    std::fs::write(&file, SCENARIO).unwrap();
    let ok = run(
        &["validate", file.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(ok.code, Some(0), "the base is valid: {}", ok.stderr);
    for (from, to, want) in BAD_SCENARIOS {
        assert!(SCENARIO.contains(from), "{from:?}");
        std::fs::write(&file, SCENARIO.replacen(from, to, 1)).unwrap();
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
