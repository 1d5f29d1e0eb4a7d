use super::*;
use crate::keys::{is_key, key_line};
use std::path::Path;
use std::time::Duration;

const S1: &str = "\
name: dynamic-endpoints
systems: [nginx-reload, haproxy-runtime]
backends:
  replicas: 5
  stop: graceful
tls:
  version: \"1.3\"
  key: rsa2048
load:
  rate: 2000
  connections: 100
  duration: 60s
changes:
  - repeat:
      steps:
        - scale: 5
        - wait: 12s
        - scale: {to: 7, stop: abrupt}
        - wait: 10s
  - route: cors
  - reload: true
";

fn err(text: &str) -> String {
    Scenario::parse(text, "my.yaml").unwrap_err().to_string()
}

#[test]
fn s1_parses() {
    let s = Scenario::parse(S1, "s1.yaml").unwrap();
    assert_eq!(
        s.systems.iter().map(|p| p.name()).collect::<Vec<_>>(),
        ["nginx-reload", "haproxy-runtime"]
    );
    assert_eq!(s.platform, PlatformKind::Local);
    assert_eq!(s.backends.replicas, 5);
    assert_eq!(s.load.duration.0, Duration::from_secs(60));
    assert_eq!(s.load.threads, 1);
    let Step::Repeat(r) = &s.changes[0] else {
        panic!()
    };
    assert_eq!(r.times, None);
    assert!(matches!(
        r.steps[2],
        Step::Scale(ScaleTo {
            to: 7,
            stop: Some(Stop::Abrupt)
        })
    ));
    assert!(matches!(s.changes[1], Step::Route(RouteName::Cors)));
}

#[test]
fn a_typo_names_the_line_and_the_key() {
    let e = err(&S1.replace("  replicas: 5", "  replicase: 5"));
    assert!(e.starts_with("scenario my.yaml: line 4: "), "{e}");
    assert!(e.contains("replicase"), "{e}");
    let e = err(&S1.replace("- wait: 12s", "- wiat: 12s"));
    assert!(e.contains("line 17") && e.contains("wiat"), "{e}");
    let e = err(&S1.replace("nginx-reload", "nginx-relaod"));
    assert!(e.contains("line 2") && e.contains("nginx-relaod"), "{e}");
}

#[test]
fn wrong_types_and_values_are_rejected() {
    let e = err(&S1.replace("rate: 2000", "rate: fast"));
    assert!(e.contains("line 10"), "{e}");
    let e = err(&S1.replace("rate: 2000", "rate: 0"));
    assert!(e.contains("load.rate"), "{e}");
    let e = err(&S1.replace("wait: 12s", "wait: 12x"));
    assert!(e.contains("line 17") && e.contains("not a duration"), "{e}");
    let e = err(&S1.replace("- scale: 5", "- scale: 0"));
    assert!(e.contains("out of range"), "{e}");
    let e = err(&S1.replace("route: cors", "route: jsonp"));
    assert!(e.contains("line 20") && e.contains("jsonp"), "{e}");
    let e = err(&S1.replace("version: \"1.3\"", "version: \"1.1\""));
    assert!(e.contains("line 7"), "{e}");
    let e = err(&S1.replace("  connections: 100", "  connections: 100\n  threads: 200"));
    assert!(e.contains("load.connections"), "{e}");
    let e = err(&S1.replace("systems: [nginx-reload, haproxy-runtime]", "systems: []"));
    assert!(e.contains("systems"), "{e}");
}

#[test]
fn a_repeat_without_a_wait_is_refused() {
    let text = S1
        .replace("        - wait: 12s\n", "")
        .replace("        - wait: 10s\n", "");
    assert!(err(&text).contains("must contain a wait"));
}

#[test]
fn quick_scales_times_down() {
    let s = Scenario::parse(S1, "s1.yaml").unwrap().quick();
    assert_eq!(s.load.duration.0, Duration::from_secs(15));
    let Step::Repeat(r) = &s.changes[0] else {
        panic!()
    };
    assert!(matches!(r.steps[1], Step::Wait(Dur(d)) if d == Duration::from_secs(3)));
    let with = format!("{S1}quick:\n  duration: 20s\n  rate: 300\n  time_scale: 0.5\n");
    let s = Scenario::parse(&with, "s1.yaml").unwrap().quick();
    assert_eq!(
        (s.load.duration.0.as_secs(), s.load.rate.fixed()),
        (20, 300.0)
    );
}

/// `load.rate` as a list is a load plan: it sets the measured window, `--quick`
/// shrinks its durations but keeps its rates, and the engine gets it whole.
#[test]
fn a_plan_in_load_rate_sets_the_window_and_reaches_the_engine() {
    let text = S1
        .replace("  rate: 2000\n", "  rate: [1000:2s, 2000:2s]\n")
        .replace("  duration: 60s\n", "");
    let s = Scenario::parse(&text, "s1.yaml").unwrap();
    let p = s.load.rate.plan().expect("a list is a plan");
    let shape = |p: &engine::profile::RateProfile| -> Vec<(f64, f64, f64)> {
        p.segments()
            .iter()
            .map(|g| (g.from, g.to, g.secs))
            .collect()
    };
    assert_eq!(shape(p), [(1000.0, 1000.0, 2.0), (2000.0, 2000.0, 2.0)]);
    assert_eq!(s.load.duration.0, Duration::from_secs(4));
    // One string, as -R takes it, is the same plan; a duration that agrees is kept.
    let one = text.replace("[1000:2s, 2000:2s]", "\"1000:2s,2000:2s\"\n  duration: 4s");
    assert_eq!(
        Scenario::parse(&one, "s1.yaml").unwrap().load.rate,
        s.load.rate
    );

    let q = s.quick();
    let qp = q.load.rate.plan().expect("--quick keeps the plan");
    assert_eq!(shape(qp), [(1000.0, 1000.0, 0.5), (2000.0, 2000.0, 0.5)]);
    assert_eq!(q.load.duration.0, Duration::from_secs(1));

    let spec = plan::load_spec(&s);
    assert_eq!(spec.profile.as_ref(), Some(p));
    let (plan, config) = spec.resolve().unwrap();
    assert_eq!(plan.duration, Duration::from_secs(4));
    assert_eq!(plan.rate, Some(1500.0));
    assert_eq!(config.plan.as_deref(), Some("1000:2s,2000:2s"));
}

#[test]
fn an_unknown_system_or_platform_names_the_line_and_the_known_ones() {
    let bad = S1.replace("haproxy-runtime", "haproxy-rutime");
    let e = Scenario::parse(&bad, "s1.yaml").unwrap_err().to_string();
    assert!(
        e.contains("haproxy-rutime") && e.contains("caddy-api"),
        "{e}"
    );
    assert!(e.contains("line "), "{e}");
    let bad = format!("{S1}platform: mars\n");
    let e = Scenario::parse(&bad, "s1.yaml").unwrap_err().to_string();
    assert!(
        e.contains("unknown platform `mars`") && e.contains("local"),
        "{e}"
    );
}

#[test]
fn bundled_scenarios_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "yaml") {
            Scenario::load(&e.path()).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 3, "S1, S3 and S5 are bundled");
}

include!("../../../tests/data/bad_scenarios.rs");

#[test]
fn bad_scenarios_name_the_key_and_its_line() {
    // The file's checks, then the plan's (what `run` refuses with no flags).
    let plan = |text: &str| {
        Scenario::parse(text, "bad.yaml").and_then(|s| {
            crate::plan::Plan::build(s, text.to_string(), "bad.yaml", Default::default())
        })
    };
    plan(BASE).expect("the base is valid");
    Scenario::parse(BASE, "bad.yaml").unwrap().quick();
    for (from, to, want) in BAD {
        assert!(BASE.contains(from), "{from:?}");
        let text = BASE.replacen(from, to, 1);
        let got = plan(&text)
            .map(|_| "accepted".to_string())
            .unwrap_or_else(|e| e.to_string());
        assert_eq!(got, format!("scenario bad.yaml: {want}"), "{text}");
    }
}

#[test]
fn range_errors_are_at_their_key_wherever_it_is() {
    // The same key further down, after comments and other sections.
    let text = format!(
        "# a comment\n\ntls:\n  enabled: false\n{}",
        BASE.replace("replicas: 2", "replicas: 40")
    );
    let e = err(&text);
    assert!(
        e.starts_with("scenario my.yaml: line 8: backends.replicas: 40"),
        "{e}"
    );
    // A default is placed at the other key the message names, else at its section.
    let e = err(&BASE.replace("  rate: 200\n", "  rate: 200\n  threads: 60\n"));
    assert!(
        e.starts_with(
            "scenario my.yaml: line 7: load.connections (50) must be at least load.threads (60)"
        ),
        "{e}"
    );
    let e = err(&BASE.replace(
        "load:\n  rate: 200\n  duration: 4s\n",
        "load: {rate: 200, timeout: 0s, duration: 1s}\n",
    ));
    assert!(
        e.starts_with("scenario my.yaml: line 5: load.timeout"),
        "{e}"
    );
}

#[test]
fn key_lines_follow_the_nesting() {
    let text = "a:\n  b: 1\n  c:\n    b: 2\nb: 3\n\"q\": 4\n";
    assert_eq!(key_line(text, "a.b"), Some((2, true)));
    assert_eq!(key_line(text, "a.c.b"), Some((4, true)));
    assert_eq!(key_line(text, "b"), Some((5, true)));
    assert_eq!(key_line(text, "q"), Some((6, true)));
    assert_eq!(key_line(text, "a.x"), Some((1, false)));
    assert_eq!(key_line(text, "x.y"), None);
    assert!(!is_key("ab: 1", "a") && !is_key("a:b", "a") && is_key("a :", "a"));
}

#[test]
fn names_are_one_safe_path_component() {
    for ok in ["dynamic-endpoints", "s3.v2", "A_b-1"] {
        Scenario::parse(&BASE.replace("name: t", &format!("name: {ok}")), "x.yaml")
            .unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    let long = "x".repeat(MAX_NAME + 1);
    for bad in ["..", ".hidden", "a/b", "a b", "\"\"", "é", long.as_str()] {
        let e = err(&BASE.replace("name: t", &format!("name: {bad}")));
        assert!(
            e.contains("line 1: ") && e.contains("letters, digits"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn a_backend_delay_on_a_cluster_needs_ingressbench_s_image() {
    let k8s = "name: k\nplatform: kubernetes\nsystems: [traefik]\n\
               backends:\n  replicas: 2\n  delay: exp:2ms\n\
               load:\n  rate: 10\n  duration: 5s\n";
    let e = err(k8s);
    assert!(
        e.contains("backends.delay") && e.contains("kubernetes.image: ingressbench"),
        "{e}"
    );
    assert!(e.contains("line 6"), "{e}");
    let ok = format!("{k8s}kubernetes:\n  image: ghcr.io/me/ingressbench:0.1.0\n");
    Scenario::parse(&ok, "k.yaml").expect("ingressbench's image can delay");
    let other = format!("{k8s}kubernetes:\n  image: example.com/echo:1\n");
    assert!(err(&other).contains("backends.delay"));
}

#[test]
fn a_route_step_a_controller_cannot_express_is_refused_before_the_run() {
    let k8s = "name: k\nplatform: kubernetes\nsystems: [traefik, contour-ingress]\n\
               tls:\n  enabled: false\n\
               load:\n  rate: 10\n  duration: 5s\n\
               changes:\n  - scale: 3\n  - wait: 1s\n  - repeat:\n      times: 2\n      steps:\n        - route: header\n        - wait: 1s\n";
    let e = err(k8s);
    assert!(
        e.contains("contour-ingress cannot express the route change `header`")
            && e.contains("use the profile `contour`"),
        "{e}"
    );
    assert!(e.contains("line 9: changes:"), "at `changes`: {e}");
    // Scale churn alone (S1, S5) runs through Contour's Ingress.
    let scale_only = k8s.replace("        - route: header\n", "        - scale: 2\n");
    Scenario::parse(&scale_only, "k.yaml").expect("scale steps need no route change");
    // `base` is always expressible.
    Scenario::parse(&k8s.replace("route: header", "route: base"), "k.yaml")
        .expect("base is every profile's own route");
}

#[test]
fn a_gateway_of_the_runs_own_is_for_gateway_api_systems_only_and_alone() {
    let k8s = "name: k\nplatform: kubernetes\nsystems: [envoy-gateway, contour]\n\
               load:\n  rate: 10\n  duration: 5s\n\
               changes:\n  - wait: 1s\n  - rotate: certificate\n\
               kubernetes:\n  gateway_class: eg\n  gateway_classes:\n    contour: contour\n\
               \x20 gateway_ports: {http: 8080, https: 8443}\n";
    // No URL needed: the Gateway gives its address; TLS at it, so a rotation too.
    let s = Scenario::parse(k8s, "k.yaml").unwrap();
    let k = s.kubernetes.as_ref().unwrap();
    assert_eq!(k.gateway_class_for("envoy-gateway").as_deref(), Some("eg"));
    assert_eq!(k.gateway_class_for("contour").as_deref(), Some("contour"));
    let plan = crate::plan::Plan::build(s, k8s.to_string(), "k.yaml", Default::default()).unwrap();
    let crate::plan::PlatformSpec::Kubernetes(spec) = &plan.cases[0].deploy.platform else {
        panic!("not a cluster")
    };
    let own = spec.own_gateway.as_ref().unwrap();
    assert_eq!(
        (own.class.as_str(), own.http_port, own.https_port),
        ("eg", 8080, 8443)
    );
    assert_eq!(own.timeout, kubernetes::gateway::PROGRAMMED_WAIT);
    assert!(spec.gateway.is_none());
    assert!(!spec.grpc);
    // A gRPC load: the platform knows before its driver writes the route, so the
    // route is a GRPCRoute.
    let grpc = k8s.replace("load:\n", "protocol: grpc\nload:\n");
    let s = Scenario::parse(&grpc, "k.yaml").unwrap();
    let plan = crate::plan::Plan::build(s, grpc.clone(), "k.yaml", Default::default()).unwrap();
    let crate::plan::PlatformSpec::Kubernetes(spec) = &plan.cases[0].deploy.platform else {
        panic!("not a cluster")
    };
    assert!(spec.grpc);

    let e = err(&k8s
        .replace(
            "systems: [envoy-gateway, contour]",
            "systems: [traefik, contour]",
        )
        .replace("  - rotate: certificate\n", ""));
    assert!(
        e.contains("traefik is not routed through Gateway API"),
        "{e}"
    );
    let e = err(&k8s.replace(
        "gateway_class: eg",
        "gateway_class: eg\n  gateway: infra/gw",
    ));
    assert!(
        e.contains("kubernetes.gateway_class and kubernetes.gateway both"),
        "{e}"
    );
    let e = err(&k8s.replace("https: 8443", "https: 8080"));
    assert!(e.contains("two different ports"), "{e}");
    let e = err(&k8s.replace("    contour: contour", "    traefik: x"));
    assert!(
        e.contains("kubernetes.gateway_classes: traefik is not among the systems"),
        "{e}"
    );
    // Without a class of its own, contour needs a URL and cannot rotate.
    let e = err(&k8s
        .replace("  gateway_classes:\n    contour: contour\n", "")
        .replace(
            "  gateway_class: eg\n",
            "  gateway_classes: {envoy-gateway: eg}\n",
        ));
    assert!(e.contains("contour"), "{e}");
}

#[test]
fn an_ingress_class_of_the_users_install_reaches_the_cluster_spec_and_only_for_ingress_systems() {
    let k8s = "name: k\nplatform: kubernetes\nsystems: [haproxy-ingress, traefik, contour]\n\
               tls:\n  enabled: false\nload:\n  rate: 10\n  duration: 5s\n\
               kubernetes:\n  urls: {haproxy-ingress: \"http://198.18.0.1/\", traefik: \"http://198.18.0.2/\", contour: \"http://198.18.0.3/\"}\n\
               \x20 gateway: infra/gw\n  ingress_class: internal\n  ingress_classes: {traefik: traefik-2}\n";
    let s = Scenario::parse(k8s, "k.yaml").unwrap();
    let plan = crate::plan::Plan::build(s, k8s.to_string(), "k.yaml", Default::default()).unwrap();
    let classes: Vec<Option<String>> = plan
        .cases
        .iter()
        .map(|c| match &c.deploy.platform {
            crate::plan::PlatformSpec::Kubernetes(spec) => spec.ingress_class.clone(),
            _ => panic!("not a cluster"),
        })
        .collect();
    assert_eq!(
        classes,
        [
            Some("internal".into()),
            Some("traefik-2".into()),
            Some("internal".into())
        ]
    );
    let e = err(&k8s.replace("{traefik: traefik-2}", "{contour: x}"));
    assert!(
        e.contains("kubernetes.ingress_classes: contour: name an IngressClass"),
        "{e}"
    );
    let e = err(&k8s.replace("{traefik: traefik-2}", "{nginx-ingress: x}"));
    assert!(e.contains("nginx-ingress is not among the systems"), "{e}");
    let e = err(&k8s
        .replace(
            "systems: [haproxy-ingress, traefik, contour]",
            "systems: [contour]",
        )
        .replace("  ingress_classes: {traefik: traefik-2}\n", ""));
    assert!(
        e.contains("kubernetes.ingress_class: name an IngressClass"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn each_gateway_api_system_can_attach_to_its_own_gateway() {
    let k8s = "name: k\nplatform: kubernetes\nsystems: [contour, gateway-api]\n\
               tls:\n  enabled: false\n\
               load:\n  rate: 10\n  duration: 5s\n\
               kubernetes:\n  gateway: infra/shared\n  gateways:\n    contour: projectcontour/contour\n";
    let s = Scenario::parse(k8s, "k.yaml").unwrap();
    let k = s.kubernetes.as_ref().unwrap();
    assert_eq!(
        k.gateway_for("contour"),
        Some(("projectcontour".into(), "contour".into()))
    );
    assert_eq!(
        k.gateway_for("gateway-api"),
        Some(("infra".into(), "shared".into()))
    );
    let e = err(&k8s.replace("contour: projectcontour/contour", "traefik: a/b"));
    assert!(
        e.contains("kubernetes.gateways: traefik is not among the systems")
            && e.contains("line 11"),
        "{e}"
    );
    let e = err(&k8s.replace("projectcontour/contour", "projectcontour"));
    assert!(
        e.contains("write `projectcontour` as namespace/name"),
        "{e}"
    );

    // The flags: --gateway NS/NAME for all, --gateway SYSTEM=NS/NAME for one.
    let mut s = Scenario::parse(k8s, "k.yaml").unwrap();
    s.override_cluster(ClusterFlags {
        gateways: vec![
            (None, "infra/other".into()),
            (Some("gateway-api".into()), "t/gw".into()),
        ],
        systems: vec![
            ("contour".into(), "http://198.18.0.1:8080/".into()),
            ("gateway-api".into(), "http://198.18.0.1:8000/".into()),
        ],
        ..ClusterFlags::default()
    })
    .unwrap();
    let k = s.kubernetes.as_ref().unwrap();
    assert_eq!(
        k.gateway_for("gateway-api"),
        Some(("t".into(), "gw".into()))
    );
    assert_eq!(
        k.gateway_for("contour"),
        Some(("projectcontour".into(), "contour".into())),
        "the file's own entry for a system stays"
    );
    assert_eq!(k.gateway(), Some(("infra".into(), "other".into())));
    let mut s = Scenario::parse(k8s, "k.yaml").unwrap();
    let e = s
        .override_cluster(ClusterFlags {
            gateways: vec![(None, "nogateway".into())],
            ..ClusterFlags::default()
        })
        .unwrap_err();
    assert!(e.starts_with("--gateway nogateway: write it as"), "{e}");
}

#[test]
fn a_tls_scenario_against_a_plain_http_url_is_refused_with_the_fix() {
    let k8s = "name: k\nplatform: kubernetes\nsystems: [traefik]\n\
               load:\n  rate: 10\n  duration: 5s\n\
               kubernetes:\n  urls:\n    traefik: http://198.18.0.1:8000/\n";
    let e = err(k8s);
    assert!(
        e.contains(
            "traefik: `http://198.18.0.1:8000/` is plain HTTP but the scenario loads over TLS"
        ) && e.contains("tls.enabled: false"),
        "{e}"
    );
    let https = k8s.replace("http://", "https://");
    Scenario::parse(&https, "k.yaml").expect("an https URL for a TLS scenario");
}

/// A scenario's `requests:` becomes the engine's mix against the system's URL: each
/// entry's host (default: the URL's), its path, headers, body and weight, the URL's
/// scheme kept; the checks the engine makes for `--targets` apply.
#[test]
fn requests_become_the_engines_mix_on_the_systems_url() {
    let text = format!(
        "{BASE}requests:\n  - {{host: a.test, path: /x, weight: 3}}\n  - {{method: POST, path: /y, headers: [\"x-a: 1\"], body: hi}}\n"
    );
    let s = Scenario::parse(&text, "m.yaml").unwrap();
    let spec = crate::plan::CaseLoad::of(&s).at("https://198.18.0.1:8443/", None);
    let t = &spec.targets;
    assert_eq!(t.len(), 2);
    assert_eq!(
        (t[0].url.as_str(), t[0].weight, t[0].line),
        ("https://a.test/x", 3, 1)
    );
    assert_eq!(t[0].headers, vec!["Host: a.test".to_string()]);
    assert_eq!(
        (
            t[1].method.as_str(),
            t[1].url.as_str(),
            t[1].body.as_slice()
        ),
        ("POST", "https://198.18.0.1:8443/y", b"hi".as_slice())
    );
    assert_eq!(t[1].headers, vec!["x-a: 1".to_string()]);
    let (plan, _) = spec.resolve().unwrap();
    assert_eq!(plan.mix.hosts.len(), 2);
    assert!(plan.mix.reported);
    let names: Vec<&str> = plan.mix.targets.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["GET a.test/x", "POST 198.18.0.1:8443/y"]);
}

#[test]
fn a_route_scale_sweep_runs_the_route_set_at_each_size() {
    let text = "name: t\nsystems: [nginx-reload]\nroutes: {count: 10, hosts: 5}\n\
                route_scale: [10, 100, 1000]\nrequests: {from: routes}\nload:\n  rate: 100\n  duration: 2s\n\
                changes:\n  - wait: 1s\n  - route_set: add\n  - route_set: remove\n";
    let s = Scenario::parse(text, "t.yaml").unwrap();
    assert_eq!(s.route_sizes(), vec![Some(10), Some(100), Some(1000)]);
    let at = s.with_routes(1000);
    assert_eq!(at.routes.map(|r| (r.count, r.hosts)), Some((1000, 5)));
    assert_eq!(
        s.routes.map(|r| r.count),
        Some(10),
        "the scenario itself unchanged"
    );
    assert_eq!(
        crate::route_scale_label("nginx-reload", 1000),
        "nginx-reload-1000routes"
    );
    assert!(matches!(s.changes[1], Step::RouteSet(RouteSetStep::Add)));
    assert!(matches!(s.changes[2], Step::RouteSet(RouteSetStep::Remove)));
    // Without a sweep: the one size of routes:.
    let one = Scenario::parse(
        &text.replace("route_scale: [10, 100, 1000]\n", ""),
        "t.yaml",
    )
    .unwrap();
    assert_eq!(one.route_sizes(), vec![None]);
}

#[test]
fn lifecycle_steps_parse_and_what_a_system_cannot_do_is_refused() {
    let with = |changes: &str| S1.replace("  - reload: true\n", changes);
    let s = Scenario::parse(
        &with(
            "  - restart: proxy\n  - restart: true\n  - restart: false\n  - rotate: certificate\n",
        ),
        "l.yaml",
    )
    .unwrap();
    assert!(matches!(s.changes[2], Step::Restart(RestartWhat::Proxy)));
    assert!(matches!(s.changes[3], Step::Restart(RestartWhat::Proxy)));
    assert!(matches!(s.changes[4], Step::Restart(RestartWhat::Nothing)));
    assert!(matches!(
        s.changes[5],
        Step::Rotate(RotateWhat::Certificate)
    ));
    assert!(s.changes_certificate());
    // Only envoy-xds has a control plane of its own on this machine.
    let e = err(&with("  - restart: controller\n"));
    assert!(
        e.contains("restart: controller: nginx-reload has no control plane apart from its proxy")
            && e.contains("only envoy-xds has one"),
        "{e}"
    );
    let xds =
        with("  - restart: controller\n").replace("[nginx-reload, haproxy-runtime]", "[envoy-xds]");
    assert!(Scenario::parse(&xds, "l.yaml").is_ok());
    let e = err(&with("  - restart: contoller\n"));
    assert!(e.contains("restart: expected proxy or controller"), "{e}");
    // A rotation needs TLS; a drain needs nodes.
    let plain = with("  - rotate: certificate\n").replace(
        "tls:\n  version: \"1.3\"\n  key: rsa2048\n",
        "tls:\n  enabled: false\n",
    );
    let e = err(&plain);
    assert!(e.contains("rotate: certificate needs TLS"), "{e}");
    let e = err(&with("  - drain: node\n"));
    assert!(e.contains("drain: node needs platform kubernetes"), "{e}");
    let e = err(&with("  - drain: nodes\n"));
    assert!(e.contains("drain: expected node"), "{e}");
    let e = err(&with("  - rotate: key\n"));
    assert!(
        e.contains("unknown variant `key`, expected `certificate`"),
        "{e}"
    );
}

#[test]
fn probes_name_a_baseline_among_the_systems_and_probes_of_the_corpus() {
    let base = "name: p\nsystems: [nginx-reload, envoy-xds]\nload:\n  rate: 10\n  duration: 1s\n";
    let s = Scenario::parse(
        &format!(
            "{base}probes:\n  baseline: envoy-xds\n  only: [mine, plain, underscore-header]\n  \
             expect:\n    plain: {{status: 200}}\n  add:\n    - {{id: mine, path: /x, backend: 503}}\n    - {{id: other, path: /y}}\n"
        ),
        "p.yaml",
    )
    .unwrap();
    let plan = crate::plan::Plan::build(s, String::new(), "p.yaml", Default::default()).unwrap();
    // The baseline runs first, so that the others are compared with it as they run.
    let systems: Vec<&str> = plan.cases.iter().map(|c| c.system.as_str()).collect();
    assert_eq!(systems, ["envoy-xds", "nginx-reload"]);
    let p = plan.cases[1].probes.as_ref().unwrap();
    // The built-in ones in the corpus's order, then the scenario's own; `only` picks.
    let ids: Vec<&str> = p.probes.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        (p.baseline.as_str(), ids.as_slice(), p.during),
        (
            "envoy-xds",
            &["plain", "underscore-header", "mine"][..],
            true
        )
    );
    assert_eq!(
        p.probes[0].expect.as_ref().and_then(|e| e.status),
        Some(200)
    );
    let mine = &p.probes[2];
    let bytes = String::from_utf8(mine.bytes("h.test", "mine~s~0")).unwrap();
    assert!(
        bytes.starts_with(
            "GET /x HTTP/1.1\r\nHost: h.test\r\nx-ib-probe: mine~s~0\r\nx-ib-probe-do: 503\r\n"
        ),
        "{bytes}"
    );
    let plan_err = |text: &str| {
        let s = Scenario::parse(text, "p.yaml").unwrap();
        crate::plan::Plan::build(s, text.to_string(), "p.yaml", Default::default())
            .unwrap_err()
            .to_string()
    };
    let e = plan_err(&format!("{base}probes:\n  baseline: caddy-api\n"));
    assert!(
        e.contains("line 7: probes.baseline: caddy-api is not among the systems"),
        "{e}"
    );
    // --only must keep the baseline: without it nothing would be compared.
    let s = Scenario::parse(&format!("{base}probes: {{}}\n"), "p.yaml").unwrap();
    let flags = crate::plan::RunFlags {
        only: vec!["envoy-xds".into()],
        ..Default::default()
    };
    let e = crate::plan::Plan::build(s, String::new(), "p.yaml", flags)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--only envoy-xds: leaves out nginx-reload, the probes' baseline"),
        "{e}"
    );
    let e = err(&format!("{base}probes:\n  only: [plain, nope]\n"));
    assert!(
        e.contains("probes.only: no probe nope (known: plain, "),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    let e = err(&format!("{base}probes:\n  baselne: x\n"));
    assert!(e.contains("baselne"), "{e}");
}

/// A manifest of the user's for traefik: an Ingress whose annotation names a
/// Middleware beside it, pointed at the run's Service by its placeholders.
const BROUGHT: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: shop\n  annotations:\n    traefik.ingress.kubernetes.io/router.middlewares: ${IB_NAMESPACE}-team@kubernetescrd\nspec:\n  ingressClassName: ${IB_INGRESS_CLASS}\n  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: \"${IB_BACKEND}\", port: {number: ${IB_BACKEND_PORT}}}}}\n---\napiVersion: traefik.io/v1alpha1\nkind: Middleware\nmetadata: {name: team}\nspec:\n  headers:\n    customRequestHeaders: {x-team: shop}\n";

#[test]
fn the_routes_a_user_brings_are_read_beside_the_scenario_and_reach_the_cluster_spec() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("routes")).unwrap();
    let manifest = dir.path().join("routes/shop.yaml");
    std::fs::write(&manifest, BROUGHT).unwrap();
    let k8s = "name: k\nplatform: kubernetes\nsystems: [traefik, contour]\n\
               tls:\n  enabled: false\nload:\n  rate: 10\n  duration: 5s\n\
               kubernetes:\n  urls: {traefik: \"http://198.18.0.2/\", contour: \"http://198.18.0.3/\"}\n\
               \x20 gateway: infra/gw\n  manifests:\n    traefik: routes/shop.yaml\n";
    let file = dir.path().join("k.yaml");
    let name = file.display().to_string();
    let s = Scenario::parse(k8s, &name).unwrap();
    let plan = crate::plan::Plan::build(s, k8s.to_string(), &name, Default::default()).unwrap();
    let brought: Vec<Option<(String, String)>> = plan
        .cases
        .iter()
        .map(|c| match &c.deploy.platform {
            crate::plan::PlatformSpec::Kubernetes(spec) => spec.manifests.clone(),
            _ => panic!("not a cluster"),
        })
        .collect();
    assert_eq!(
        brought,
        [
            Some((manifest.display().to_string(), BROUGHT.to_string())),
            None
        ]
    );

    // Each refusal in one line, before anything runs: at the manifest's own line
    // for what is in it, at the scenario's for the key.
    let at = |text: &str| {
        std::fs::write(&manifest, text).unwrap();
        let e = Scenario::parse(k8s, &name).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    };
    let e = at(&BROUGHT.replace("${IB_INGRESS_CLASS}", "${IB_CLAS}"));
    assert!(
        e.starts_with(&format!(
            "manifest {}: line 8: unknown placeholder ${{IB_CLAS}}",
            manifest.display()
        )),
        "{e}"
    );
    let e = at(&BROUGHT.replace(
        "metadata: {name: team}",
        "metadata: {name: team, namespace: prod}",
    ));
    assert!(
        e.contains("line 14: Middleware team names namespace prod: a run applies objects in its own namespace only"),
        "{e}"
    );
    let e = at(&BROUGHT.replace("spec:\n  headers:", "spec:\n  headers: [\n"));
    assert!(
        e.contains("while parsing a flow sequence at line 18 column 12"),
        "{e}"
    );
    let e = at(&BROUGHT.replace("\"${IB_BACKEND}\"", "shop"));
    assert!(e.contains("no object names ${IB_BACKEND}"), "{e}");
    std::fs::remove_file(&manifest).unwrap();
    let e = Scenario::parse(k8s, &name).unwrap_err().to_string();
    assert!(
        e.contains("cannot read it (kubernetes.manifests of traefik)"),
        "{e}"
    );
    std::fs::write(&manifest, BROUGHT).unwrap();

    let e = err(&k8s.replace(
        "    traefik: routes/shop.yaml",
        "    haproxy-ingress: routes/shop.yaml",
    ));
    assert!(
        e.contains("kubernetes.manifests: haproxy-ingress is not among the systems"),
        "{e}"
    );
    assert!(e.contains("line 13"), "{e}");
    let routed = format!("{k8s}changes:\n  - wait: 1s\n  - route: header\n");
    let e = Scenario::parse(&routed, &name).unwrap_err().to_string();
    assert!(
        e.contains("kubernetes.manifests: traefik is routed by its own manifests, which the route change `header` cannot rewrite"),
        "{e}"
    );
}

#[test]
fn manifests_given_as_a_flag_replace_the_files_systems_and_are_read_there() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("shop.yaml");
    std::fs::write(&manifest, BROUGHT).unwrap();
    let k8s = "name: k\nplatform: kubernetes\nsystems: [contour]\n\
               tls:\n  enabled: false\nload:\n  rate: 10\n  duration: 5s\n\
               kubernetes:\n  urls: {contour: \"http://198.18.0.3/\"}\n  gateway: infra/gw\n";
    let mut s = Scenario::parse(k8s, "s.yaml").unwrap();
    s.override_cluster(ClusterFlags {
        platform: Some(PlatformKind::Kubernetes),
        systems: vec![
            ("traefik".into(), "http://198.18.0.2/".into()),
            ("contour".into(), "http://198.18.0.3/".into()),
        ],
        manifests: vec![("traefik".into(), manifest.clone())],
        ..ClusterFlags::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let k = s.kubernetes.as_ref().unwrap();
    assert_eq!(k.manifest_texts["traefik"].1, BROUGHT);
    let e = Scenario::parse(k8s, "s.yaml")
        .unwrap()
        .override_cluster(ClusterFlags {
            platform: Some(PlatformKind::Kubernetes),
            systems: vec![("contour".into(), "http://198.18.0.3/".into())],
            manifests: vec![("traefik".into(), manifest)],
            ..ClusterFlags::default()
        })
        .unwrap_err();
    assert!(
        e.contains("kubernetes.manifests: traefik is not among the systems"),
        "{e}"
    );
}

#[test]
fn a_slow_built_in_probe_runs_only_when_named_and_waits_past_its_delay() {
    let with = |probes: &str| {
        let text = format!(
            "name: p\nsystems: [nginx-reload, envoy-xds]\nload:\n  rate: 10\n  duration: 2s\n\
             probes:{probes}\n"
        );
        let s = Scenario::parse(&text, "p.yaml").unwrap();
        crate::plan::ProbesPlan::of(&s).unwrap().probes
    };
    let all = with(" {}");
    let ids: Vec<&str> = all.iter().map(|p| p.id.as_str()).collect();
    assert!(!ids.contains(&"slow-backend-16s"), "{ids:?}");
    assert_eq!(all.len(), crate::probes::CORPUS.len() - 1);
    let named = with("\n  only: [plain, slow-backend-16s]");
    assert_eq!(named.len(), 2);
    assert_eq!(named[1].id, "slow-backend-16s");
    assert_eq!(named[1].timeout(), std::time::Duration::from_secs(26));
    assert_eq!(named[0].timeout(), crate::probes::PROBE_TIMEOUT);
}

#[test]
fn probes_record_asks_the_backend_for_the_headers_a_users_routes_add() {
    let with = |record: &str| {
        format!(
            "name: p\nsystems: [nginx-reload, envoy-xds]\nload:\n  rate: 10\n  duration: 2s\n\
             probes:\n  only: [plain, double-slash]\n  record: {record}\n"
        )
    };
    let text = with("[x-team, X-Zone]");
    let s = Scenario::parse(&text, "p.yaml").unwrap();
    let plan = crate::plan::ProbesPlan::of(&s).unwrap();
    assert_eq!(plan.probes.len(), 2);
    for spec in &plan.probes {
        assert!(
            spec.headers
                .contains(&"x-ib-record: x-team, X-Zone".to_string()),
            "{:?}",
            spec.headers
        );
    }
    let e = err(&with("[\"x team\"]"));
    assert!(
        e.contains("line 8: probes.record: \"x team\" is not a header name"),
        "{e}"
    );
}
