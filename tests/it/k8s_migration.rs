//! The annotation corpus (issue 54) through real controllers on one test cluster:
//! ingress-nginx v1.11.0 (the baseline), Traefik v3.6's ingress-nginx provider
//! (`traefik-nginx`, the same Ingresses and annotations read unchanged), HAProxy
//! Technologies' controller v1.11 (HAProxy's own annotations), and four Gateway API
//! implementations given the bundled HTTPRoute translation
//! (`deploy/migration/gateway-api.yaml`): Traefik's Gateway provider, Contour v1.33,
//! and Envoy Gateway v1.9 and NGINX Gateway Fabric v1.6 (each at a Gateway of the
//! run's own). One cluster with every controller on ports of its own, one corpus
//! apply per controller, one run: the compatibility matrix, its cells asserted as
//! measured (docs/migration.md).

use crate::common::k8s::{PodReadiness, TestCluster};
use crate::common::k8s_contour::Contour;
use crate::common::k8s_envoy_gateway::{EnvoyGateway, CLASS as EG_CLASS};
use crate::common::k8s_haproxy_ingress::HaproxyIngress;
use crate::common::k8s_ingress_nginx::IngressNginx;
use crate::common::k8s_nginx_gateway_fabric::{NginxGatewayFabric, CLASS as NGF_CLASS};
use crate::common::k8s_pods::PodRunner;
use crate::common::k8s_traefik::{Providers, Traefik};
use crate::common::proc::Proc;
use crate::common::{read_json, shared, BIN};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The verdict and line of `behaviour` for `system`.
fn cell<'a>(probed: &'a Value, system: &str, behaviour: &str) -> (&'a str, &'a str) {
    let c = probed[system]["corpus"]
        .as_array()
        .unwrap_or_else(|| panic!("{system}: no corpus: {}", probed[system]))
        .iter()
        .find(|c| c["behaviour"] == behaviour)
        .unwrap_or_else(|| panic!("{system}: no cell {behaviour}"));
    (
        c["verdict"].as_str().unwrap(),
        c["detail"].as_str().unwrap_or(""),
    )
}

/// What probe `id` got from `system` before the load.
fn answer<'a>(probed: &'a Value, system: &str, id: &str) -> &'a Value {
    probed[system]["observed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["probe"] == id)
        .unwrap_or_else(|| panic!("{system}: no answer to {id}"))
}

#[test]
fn the_annotation_corpus_through_ingress_nginx_traefiks_nginx_provider_and_a_gateway() {
    let _turn = shared();
    let t0 = Instant::now();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    // ingress-nginx as installed by default (snippets refused), its plain HTTP on
    // 8088: Envoy Gateway's controller holds 8080.
    let inx = IngressNginx::start_on(&cluster, &[], 8088);
    let traefik = Traefik::start(
        &cluster,
        Providers {
            ingress: false,
            gateway: true,
            ingress_nginx: true,
        },
    );
    traefik.gateway(&cluster, "ib-gateway", "traefik");
    // Beside them: HAProxy on 8091, Contour's Envoy on 8100; Envoy Gateway's Envoy
    // has an address of its own (the Gateway the run makes).
    let haproxy = HaproxyIngress::start_on(&cluster, (8091, 8454));
    let contour = Contour::start_on(&cluster, 100);
    // Last: its Gateway API CRDs (v1.5) come with a policy that refuses older ones,
    // which Traefik's and Contour's harnesses apply.
    let eg = EnvoyGateway::start(&cluster);
    // NGF's nginx on the cluster's network, on the ports of the Gateway the run
    // makes of its class (Envoy Gateway's Envoy listens on them at an address of
    // its own).
    let ngf = NginxGatewayFabric::start(&cluster);
    eprintln!(
        "migration: cluster and controllers up in {:.1?}",
        t0.elapsed()
    );

    // The bundled example as a team runs it: the corpus and the team's own Ingress
    // (given unchanged to the two profiles that read ingress-nginx's annotations),
    // every controller a system of one run, under a short load of its own route
    // (the file's scale steps left out: the cells are what is asserted here, and
    // the load's route must lose nothing while the corpus is in force).
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let text = std::fs::read_to_string(root.join("migration.yaml")).unwrap();
    let changes = "changes:\n  - wait: 10s\n  - scale: 4\n  - wait: 10s\n  - scale: 2\n";
    assert!(text.contains(changes), "{text}");
    let text = text
        .replace(changes, "")
        .replace("rate: 100\n  duration: 30s", "rate: 50\n  duration: 4s")
        .replace("probes:\n", "probes:\n  during: false\n")
        // Every controller a system of the file's, Envoy Gateway's address that of
        // the Gateway the run makes of its class.
        .replace(
            "systems: [ingress-nginx, traefik-nginx]\n",
            "systems: [ingress-nginx, traefik-nginx, haproxy-ingress, gateway-api, contour, envoy-gateway, nginx-gateway-fabric]\n",
        )
        .replace(
            "kubernetes:\n",
            &format!(
                "kubernetes:\n  urls: {{ingress-nginx: \"http://198.18.0.1:8088/\", traefik-nginx: \"{t}\", \
                 haproxy-ingress: \"http://198.18.0.1:8091/\", gateway-api: \"{t}\", contour: \"{c}\"}}\n  \
                 gateway_classes: {{envoy-gateway: {EG_CLASS}, nginx-gateway-fabric: {NGF_CLASS}}}\n  gateway_ports: {{http: 8092, https: 8455}}\n",
                t = traefik.url(),
                c = contour.url()
            ),
        )
        .replace(
            "manifests/shop-ingress-nginx.yaml",
            root.join("manifests/shop-ingress-nginx.yaml")
                .to_str()
                .unwrap(),
        );
    let scn = dir.path().join("migration.yaml");
    std::fs::write(&scn, text).unwrap();
    let out = dir.path().join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run")
        .arg(&scn)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .arg("--out")
        .arg(&out);
    let systems = [
        "ingress-nginx",
        "traefik-nginx",
        "haproxy-ingress",
        "gateway-api",
        "contour",
        "envoy-gateway",
        "nginx-gateway-fabric",
    ];
    cmd.args(["--gateway", "gateway-api=ib-gateway/traefik"])
        .arg("--gateway")
        .arg(format!("contour={}", contour.gateway()));
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut cmd, dir.path()).finish(Duration::from_secs(400));
    eprintln!(
        "migration: run took {:.1?}\n{}\n{}",
        t.elapsed(),
        done.stdout,
        done.stderr
    );
    assert!(
        done.success(),
        "{}\n{}\n{}\ntraefik:\n{}\nhaproxy:\n{}\ncontour:\n{}\nenvoy gateway:\n{}\nngf:\n{}",
        done.stdout,
        done.stderr,
        inx.logs(),
        traefik.log(),
        haproxy.logs(),
        contour.logs(),
        eg.logs(),
        ngf.logs()
    );
    // Each system's probes, as `probe --json` writes them; its load lost nothing.
    let mut probed = serde_json::Map::new();
    for system in systems {
        let r = read_json(&out.join(system).join("result.json"));
        let q = &r["requests"];
        assert!(q["intended"].as_u64().unwrap_or(0) >= 150, "{system}: {q}");
        if system == "nginx-gateway-fabric" {
            // NGF leaves nginx's passive health checks as nginx has them (max_fails
            // 1, fail_timeout 10 s): a pod that reset one probe's connection (the
            // corpus has two such probes) is out of its upstream for 10 s, and with
            // both pods out the load that follows the probes is answered 502 ("no
            // live upstreams": 200 of 200 in two runs here). ingress-nginx never
            // takes a pod out so (its max-fails is 0). Measured, and said.
            let failed = q["failed"].as_u64().unwrap_or(0);
            eprintln!("migration: nginx-gateway-fabric: the load after the probes: {failed} of {} failed: {}", q["intended"], r["errors"]);
            assert_eq!(
                r["errors"]["status_codes"]["502"].as_u64().unwrap_or(0),
                failed,
                "{q}: {}\n{}",
                r["errors"],
                ngf.logs()
            );
        } else {
            assert_eq!(
                q["completed"], q["intended"],
                "{system}: {q}: {}",
                r["errors"]
            );
        }
        probed.insert(system.to_string(), r["lab"]["probes"].clone());
    }
    let probed = Value::Object(probed);
    if let Ok(keep) = std::env::var("IB_KEEP_PROBES") {
        std::fs::write(keep, probed.to_string()).unwrap();
    }

    // Every behaviour has a cell for every system, the baseline's all its own.
    let n = probed["ingress-nginx"]["corpus"].as_array().unwrap().len();
    assert!(n >= 30, "{n} behaviours");
    for system in systems {
        // A difference every answer shows is a row of its own.
        let cells: Vec<&Value> = probed[system]["corpus"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["behaviour"] != "(every answer)")
            .collect();
        assert_eq!(cells.len(), n, "{system}");
        for c in cells {
            let v = c["verdict"].as_str().unwrap();
            eprintln!(
                "migration: {system}: {}: {v}: {}",
                c["behaviour"], c["detail"]
            );
            if system == "ingress-nginx" {
                assert_eq!(v, "baseline", "{c}");
            }
        }
        // The run's own route served meanwhile.
        assert_eq!(answer(&probed, system, "plain")["status"], 200, "{system}");
    }
    // The matrix is printed, a row per behaviour.
    assert!(
        done.stdout
            .contains("ingress-nginx's annotations: what each system did with them"),
        "{}",
        done.stdout
    );

    // What ingress-nginx itself does (the baseline's answers, as its docs and the
    // kubernetes.io blog say).
    let base = |id: &str| answer(&probed, "ingress-nginx", id);
    // (1) a regex path matches by prefix and case-insensitively.
    assert_eq!(base("regex-prefix-case.upper")["status"], 200);
    assert_eq!(base("regex-prefix-case.longer")["status"], 200);
    // (2) use-regex on one Ingress makes the other's Exact path a regex prefix.
    assert_eq!(base("use-regex-host-wide.longer")["status"], 200);
    // (3) rewrite-target implies use-regex: `.` matches any character.
    assert_eq!(base("rewrite-implies-regex.dot-is-any")["status"], 200);
    // (4) a trailing-slash path asked without it: 301 to the slash.
    assert_eq!(base("trailing-slash-redirect.prefix")["status"], 301);
    // Redirects and rewrites.
    assert_eq!(base("permanent-redirect-code.any")["status"], 308);
    assert_eq!(base("temporal-redirect.any")["status"], 302);
    assert_eq!(
        base("rewrite-capture.nested")["received"]["target"],
        "/a/b?q=1"
    );
    assert_eq!(base("app-root.root")["status"], 302);
    assert_eq!(base("proxy-body-size.over")["status"], 413);
    assert_eq!(base("proxy-read-timeout.slow")["status"], 504);
    assert_eq!(base("allow-list-refuses.get")["status"], 403);
    let canary = base("canary-by-header.always");
    assert!(
        canary["received"]["backend"]
            .as_str()
            .is_some_and(|b| b.starts_with("ib-canary")),
        "{canary}"
    );
    // x-forwarded-prefix is written only with a rewrite-target.
    let alone = &base("x-forwarded-prefix.get")["received"]["headers"];
    assert!(alone["x-forwarded-prefix"].is_null(), "{alone}");
    let with = &base("x-forwarded-prefix-rewrite.get")["received"];
    assert_eq!(with["target"], "/x", "{with}");
    assert_eq!(with["headers"]["x-forwarded-prefix"], "/shop", "{with}");
    // The retry of a 503 to one pod: its second attempt answers.
    let retried = &base("proxy-next-upstream-503.503");
    assert_eq!(retried["status"], 200, "{retried}");
    assert_eq!(retried["received"]["attempt"], 2, "{retried}");
    // The team's own Ingress: the API's prefix stripped by the regex's group.
    assert_eq!(
        base("shop-api")["received"]["target"],
        "/v1/cart?id=7",
        "{}",
        base("shop-api")
    );

    // The cells measured here (docs/migration.md): those that do not depend on
    // chance (which of two equal routers Traefik picks, a canary's share).
    let expect = |system: &str, cells: &[(&str, &str)]| {
        for (behaviour, want) in cells {
            let (got, detail) = cell(&probed, system, behaviour);
            assert_eq!(got, *want, "{system}: {behaviour}: {detail}");
        }
    };
    expect(
        "traefik-nginx",
        &[
            // Traefik v3.6.12's provider reads neither rewrites nor redirects nor
            // limits, and says nothing of it.
            ("rewrite-capture", "ignored"),
            ("app-root", "ignored"),
            ("permanent-redirect", "ignored"),
            ("permanent-redirect-code", "ignored"),
            ("temporal-redirect", "ignored"),
            ("upstream-vhost", "ignored"),
            ("x-forwarded-prefix-rewrite", "ignored"),
            ("proxy-body-size", "ignored"),
            ("proxy-read-timeout", "ignored"),
            ("allow-list-refuses", "ignored"),
            ("deny-list-refuses", "ignored"),
            ("limit-rps", "ignored"),
            // What it reads: TLS redirects, affinity, CORS (otherwise).
            ("ssl-redirect", "same"),
            ("ssl-redirect-off", "same"),
            ("force-ssl-redirect", "same"),
            ("affinity-cookie", "same"),
            ("cors", "differs"),
            // Round robin only: one URI's 20 requests reach both backends.
            ("upstream-hash-by", "ignored"),
            // The blog's behaviours: regex paths exact and case-sensitive, no
            // trailing-slash redirect, `..` and `//` normalised.
            ("regex-prefix-case", "differs"),
            ("trailing-slash-redirect", "differs"),
            ("path-normalised", "differs"),
        ],
    );
    let (v, d) = cell(&probed, "traefik-nginx", "canary-by-header");
    assert_ne!(v, "same", "{d}");
    expect(
        "haproxy-ingress",
        &[
            ("regex-prefix-case", "differs"),
            ("path-normalised", "differs"),
            ("ssl-redirect", "differs"),
            ("allow-list-refuses", "same"),
            ("limit-rps", "differs"),
            // Per-Service settings, each on a Service of its own: the timeout
            // kept, the cookie set without HttpOnly and Max-Age.
            ("proxy-read-timeout", "same"),
            ("upstream-hash-by", "same"),
            ("affinity-cookie", "differs"),
            ("app-root", "not expressible"),
            ("canary-weight-10", "not expressible"),
        ],
    );
    for gateway in ["gateway-api", "contour", "envoy-gateway"] {
        expect(
            gateway,
            &[
                ("regex-prefix-case", "same"),
                ("rewrite-capture", "same"),
                ("x-forwarded-prefix-rewrite", "same"),
                ("canary-by-header", "same"),
                ("trailing-slash-redirect", "differs"),
                ("ssl-redirect", "differs"),
                ("permanent-redirect", "differs"),
                ("proxy-read-timeout", "ignored"),
                ("cors", "not expressible"),
                ("permanent-redirect-code", "not expressible"),
                ("limit-rps", "not expressible"),
            ],
        );
    }

    // NGINX Gateway Fabric v1.6.2 on the same HTTPRoutes, where it is not as the
    // three above: its regular-expression path is not ingress-nginx's prefix and
    // case-insensitive match, its redirects name the listener's port, its
    // backend timeout is a 502 rather than a timeout ignored.
    expect(
        "nginx-gateway-fabric",
        &[
            ("regex-prefix-case", "differs"),
            ("rewrite-capture", "same"),
            ("x-forwarded-prefix-rewrite", "same"),
            ("canary-by-header", "same"),
            ("path-normalised", "same"),
            ("trailing-slash-redirect", "differs"),
            ("app-root", "differs"),
            ("ssl-redirect", "differs"),
            ("permanent-redirect", "differs"),
            ("proxy-read-timeout", "differs"),
            ("cors", "not expressible"),
            ("permanent-redirect-code", "not expressible"),
            ("limit-rps", "not expressible"),
        ],
    );
    let (_, d) = cell(&probed, "nginx-gateway-fabric", "app-root");
    assert!(d.contains(":8092/app"), "{d}");

    // Nothing of the run is left in the cluster.
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    drop(ngf);
    drop(eg);
    drop(contour);
    drop(haproxy);
    drop(traefik);
    drop(inx);
    drop(pods);
}

/// Traefik's ingress-nginx provider under S1's churn with TLS at the controller
/// (the run's Secret named in the Ingress's `tls`, served on the TLS entry point),
/// S3's route changes written as ingress-nginx's annotations, a rotation and both
/// restarts in one run: Traefik as the pod of a Deployment the harness runs, so a
/// restart replaces it as a kubelet would.
#[test]
fn traefik_nginx_through_s1_churn_with_tls_s3_routes_a_rotation_and_restarts() {
    let _turn = shared();
    let cluster = TestCluster::up_with(PodReadiness::Harness);
    let pods = PodRunner::start(&cluster, BIN);
    let (traefik, traefik_dir) = Traefik::as_pods(
        &cluster,
        Providers {
            ingress: false,
            gateway: false,
            ingress_nginx: true,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("s.yaml");
    // The host the Ingress names, sent as the TLS server name: Traefik serves an
    // Ingress's certificate to the names its `tls` lists, its own to the rest.
    std::fs::write(
        &scn,
        format!(
            "name: traefik-nginx-lifecycle\nplatform: kubernetes\nsystems: [traefik-nginx]\n\
             kubernetes:\n  kubeconfig: {}\n  urls: {{traefik-nginx: \"https://{}/\"}}\n  host: ingress.test\n\
             requests:\n  - {{host: ingress.test, path: /}}\n\
             tls:\n  key: ecdsa-p256\n{}\
             probes:\n  only: [plain, underscore-header, body-1mib-plus-1, unknown-path, no-ready-endpoint]\n",
            cluster.kubeconfig().display(),
            crate::common::k8s_traefik::TLS_ENTRY_POINT,
            // The new pods held 6 s before the scale-down, as for ingress-nginx.
            crate::common::k8s::LIFECYCLE_RUN
                .replace("scale: 4\n  - wait: 2s", "scale: 4\n  - wait: 6s")
                .replace("duration: 30s", "duration: 34s"),
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut cmd = cluster.ingressbench();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out);
    let t = Instant::now();
    let done = Proc::spawn_group("run", &mut cmd, dir.path()).finish(Duration::from_secs(300));
    eprintln!(
        "traefik-nginx: run took {:.1?}\n{}",
        t.elapsed(),
        done.stdout
    );
    assert!(
        done.success(),
        "{}\n{}\n{}",
        done.stdout,
        done.stderr,
        crate::common::proc::tails_in(traefik_dir.path(), 40)
    );
    let r = read_json(&out.join("traefik-nginx/result.json"));
    for a in r["lab"]["propagation"]["added"].as_array().unwrap() {
        eprintln!("traefik-nginx: added {a}");
    }
    crate::common::k8s::check_lifecycle_run(&r, "traefik-nginx", 8);
    let changes = r["lab"]["route_propagation"]["changes"].as_array().unwrap();
    assert!(changes.len() >= 4, "{changes:?}");
    for c in changes {
        eprintln!(
            "traefik-nginx: route {}: applied {} ms, seen {} ms, errors {}",
            c["route"], c["applied_ms"], c["seen_ms"], c["errors"]
        );
        // The same annotations ingress-nginx takes (a configuration-snippet, a
        // rewrite-target): Traefik v3.6.12's provider reads neither, so neither
        // change ever shows in traffic, and the run says so.
        if c["route"] == "header" || c["route"] == "rewrite" {
            assert!(c["seen_ms"].is_null(), "{c}");
        }
    }
    assert!(
        done.stderr
            .contains("Traefik's ingress-nginx provider (v3.6) reads no rewrite-target"),
        "{}",
        done.stderr
    );
    let p = &r["lab"]["probes"];
    eprintln!("traefik-nginx: probes before the load: {}", p["observed"]);
    cluster.wait_until_our_namespaces_are_gone(Duration::from_secs(60));
    drop(traefik);
    drop(pods);
}
