//! The bad-input catalogue: files and flags a user gets wrong, each refused with one
//! line that says what and where, and exit code 2, before anything is started.

use crate::common::{assert_refused, run};
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

/// `run`'s flags: each mistake is one line and exit 2, before anything starts (no
/// cluster is contacted, nothing is written), and `validate` given the same flags
/// says the same line.
#[test]
fn run_refuses_bad_cluster_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, BASE).unwrap();
    let out = dir.path().join("out");
    let path = file.to_str().unwrap();
    let manifest = dir.path().join("shop.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: shop}\nspec:\n  defaultBackend:\n    service: {name: \"${IB_SERVICE}\", port: {number: 80}}\n",
    )
    .unwrap();
    let brought = format!("traefik={}", manifest.display());
    let unknown = format!(
        "manifest {}: line 6: unknown placeholder ${{IB_SERVICE}} (known: ${{IB_BACKEND}},",
        manifest.display()
    );
    for (flags, want) in [
        (vec!["--platform", "k8s"], "--platform k8s: use one of local, kubernetes"),
        (
            vec!["--platform", "kubernetes", "--system", "traefik"],
            "--system traefik: write it as NAME=URL",
        ),
        (
            vec!["--context", "staging"],
            "--system, --kubeconfig, --context, --namespace, --keep, --gateway, --cacert and --manifests are for --platform kubernetes",
        ),
        (
            vec!["--platform", "kubernetes", "--system", "traefik=https://198.18.0.1/", "--manifests", "traefik"],
            "--manifests traefik: write it as SYSTEM=FILE",
        ),
        (
            vec!["--platform", "kubernetes", "--system", "traefik=https://198.18.0.1/", "--manifests", brought.as_str()],
            unknown.as_str(),
        ),
        (
            vec!["--platform", "kubernetes", "--system", "traefik=https://198.18.0.1/", "--manifests", "traefik=/nonexistent/shop.yaml"],
            "manifest /nonexistent/shop.yaml: cannot read it (kubernetes.manifests of traefik): No such file or directory",
        ),
        (
            vec!["--platform", "kubernetes", "--system", "contour=https://198.18.0.1/", "--gateway", "contour"],
            "--gateway contour: write it as [SYSTEM=]NAMESPACE/NAME",
        ),
        (
            vec!["--platform", "kubernetes", "--system", "trafik=https://198.18.0.1/"],
            "--system trafik: not an installed-controller profile: use one of ingress-nginx,",
        ),
        (
            vec!["--platform", "kubernetes"],
            "systems: caddy-api is not an installed controller (platform: kubernetes)",
        ),
        (
            vec!["--platform", "kubernetes", "--system", "traefik=198.18.0.1"],
            "kubernetes.urls: traefik: `198.18.0.1` is not an http:// or https:// URL",
        ),
        (vec!["--generators", "0"], "--generators 0: give at least 1"),
        (
            vec!["--repeat", "0"],
            "--repeat 0: give at least 1 (the number of runs of each system)",
        ),
        (
            vec!["--generators", "2", "--metrics-listen", "127.0.0.1:0"],
            "--metrics-listen with --generators 2: the generators' seconds reach this process only at the end: drop one",
        ),
        (
            vec!["--platform", "network-lab"],
            "systems: caddy-api is not a data path (platform: network-lab): use one of host, bridge, host-gw, vxlan, macvlan",
        ),
        (
            vec!["--only", "host"],
            "--only host: not in this scenario: use one of caddy-api",
        ),
        (
            vec!["--fail-on", "p99>50"],
            "--fail-on 'p99>50': a time limit needs a unit, e.g. 50ms or 1s",
        ),
        (
            vec!["--generators", "100000"],
            "--generators 100000 needs at least 100000 connections",
        ),
        (
            vec!["--generators", "2", "--lead", "5s"],
            "--generator-image and --lead are for generator pods: use them with platform kubernetes and --generators N",
        ),
        (
            vec!["--generators", "2", "--platform", "kubernetes", "--system", "traefik=https://198.18.0.1/", "--cacert", "/nonexistent/ca.pem"],
            "--generators 2 on a cluster: kubernetes.cacert (--cacert) names a file on this machine, which the generator pods cannot read",
        ),
        (
            vec!["--generators", "2", "--platform", "kubernetes", "--system", "traefik=https://198.18.0.1/", "--lead", "soon"],
            "--lead: ",
        ),
    ] {
        let mut args = vec!["run", path, "--out", out.to_str().unwrap()];
        args.extend(flags.iter().copied());
        let o = run(&args, Duration::from_secs(10));
        assert_refused(&o, want, &format!("{flags:?}"));
        assert!(!out.exists());
        let mut args = vec!["validate", path];
        args.extend(flags.iter().copied());
        let v = run(&args, Duration::from_secs(10));
        assert_eq!(v.code, Some(2), "validate {flags:?}: {}", v.stderr);
        assert_eq!(v.stderr, o.stderr, "validate {flags:?}");
        assert!(v.stdout.is_empty(), "validate {flags:?}: {}", v.stdout);
    }
    let o = run(&["cleanup", "--platform", "local"], Duration::from_secs(10));
    assert_eq!(o.code, Some(2), "{}", o.stderr);
}

#[test]
fn run_refuses_generators_where_the_load_must_stay_in_this_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let net = "name: n\nplatform: network-lab\nsystems: [host, vxlan]\ntls:\n  enabled: false\n";
    for (text, want) in [
        (
            format!("{net}load:\n  rates: [0.3]\n  duration: 2s\nsearch:\n  p99: 5ms\n"),
            "--generators 2 with load.rates: the search for each maximum runs in this process",
        ),
        (
            format!("{net}load:\n  rate: 100\n  duration: 2s\n"),
            "--generators 2 on the network lab: its load leaves from a namespace of this process",
        ),
    ] {
        let file = dir.path().join("n.yaml");
        std::fs::write(&file, text).unwrap();
        let path = file.to_str().unwrap();
        let o = run(
            &[
                "run",
                path,
                "--out",
                out.to_str().unwrap(),
                "--generators",
                "2",
            ],
            Duration::from_secs(10),
        );
        assert_refused(&o, want, path);
        assert!(!out.exists());
        let v = run(
            &["validate", path, "--generators", "2"],
            Duration::from_secs(10),
        );
        assert_eq!((v.code, &v.stderr), (Some(2), &o.stderr));
    }
}

/// A sizing scan (the bundled S4 file) runs its searches in this process, once.
#[test]
fn a_sizing_scan_refuses_generators_and_repeats_in_validate_as_in_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/sizing.yaml");
    let ok = run(&["validate", file], Duration::from_secs(10));
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    for (flags, want) in [
        (
            ["--generators", "2"],
            "--generators 2 with sizing: each row's search runs in this process: drop --generators",
        ),
        (
            ["--repeat", "2"],
            "--repeat 2 with sizing: its runs follow a search of their own, which is not repeated",
        ),
    ] {
        let mut args = vec!["run", file, "--out", out.to_str().unwrap()];
        args.extend(flags);
        let o = run(&args, Duration::from_secs(10));
        assert_eq!(o.code, Some(2), "{flags:?}: {}", o.stderr);
        assert_eq!(o.stderr.trim_end().lines().count(), 1, "{}", o.stderr);
        assert!(o.stderr.contains(want), "{flags:?}: {}", o.stderr);
        let mut args = vec!["validate", file];
        args.extend(flags);
        let v = run(&args, Duration::from_secs(10));
        assert_eq!((v.code, &v.stderr), (Some(2), &o.stderr), "{flags:?}");
        assert!(!out.exists());
    }
}
