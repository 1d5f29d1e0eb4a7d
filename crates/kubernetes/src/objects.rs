//! The objects a run creates, built as typed API objects, every one labelled with the
//! run. The default backend needs no image of ours: the stock `nginx` image with a
//! configuration (a ConfigMap) that answers as S1's backend and `ingressbench backend`
//! do: `200`, about `body_size` bytes of text naming the pod and the request URI, the
//! header `x-backend: <pod name>`, and `/healthz` for the readiness probe.

use super::{BACKEND, MANAGED_BY, RUN_LABEL};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
    HTTPGetAction, Namespace, ObjectFieldSelector, PodSpec, PodTemplateSpec, Probe, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use std::time::Duration;

/// The annotation corpus's second set of backends: a Service and a Deployment of
/// one pod, so a canary (and a default backend) can be told from the run's own
/// backends by the pod that answered (`ib-canary-...`).
pub const CANARY: &str = "ib-canary";

/// The label that tells the corpus's objects apart (`ingressbench.io/corpus:
/// <behaviour>`), so a run can list or delete them.
pub const CORPUS_LABEL: &str = "ingressbench.io/corpus";

/// The port the backend pods listen on.
pub const BACKEND_PORT: i32 = 8080;

/// The port of the backends' Service, which every route of the run names.
pub const SERVICE_PORT: i32 = 80;
/// The stock image the default backend runs.
pub const DEFAULT_IMAGE: &str = "nginx:1.27";

pub(crate) fn labels(run: &str) -> BTreeMap<String, String> {
    [
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (RUN_LABEL.to_string(), run.to_string()),
    ]
    .into()
}

/// The labels of the run's backend pods, which its Service selects.
pub fn pod_labels(run: &str) -> BTreeMap<String, String> {
    let mut l = labels(run);
    l.insert("app.kubernetes.io/name".into(), BACKEND.into());
    l
}

fn meta(name: &str, run: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(labels(run)),
        ..ObjectMeta::default()
    }
}

pub fn namespace(name: &str, run: &str) -> Namespace {
    Namespace {
        metadata: meta(name, run),
        ..Namespace::default()
    }
}

/// nginx's configuration for the default backend.
pub fn nginx_conf(body_size: usize) -> String {
    // The body: a first line naming the pod, the URI and the address, padded with
    // `x` to about `body_size` bytes, as S1's ~1 KB responses.
    let pad = "x".repeat(body_size.saturating_sub(80).min(1 << 20));
    format!(
        "worker_processes 1;\n\
         pid /tmp/nginx.pid;\n\
         events {{ worker_connections 10000; }}\n\
         http {{\n\
         \x20   access_log off;\n\
         \x20   keepalive_requests 100000000;\n\
         \x20   server {{\n\
         \x20       listen {BACKEND_PORT};\n\
         \x20       location = /healthz {{ return 200 \"ok\\n\"; }}\n\
         \x20       location / {{\n\
         \x20           add_header x-backend $hostname always;\n\
         \x20           default_type text/plain;\n\
         \x20           return 200 \"backend: $hostname\\naddr: $server_addr\\nuri: $request_uri\\n{pad}\\n\";\n\
         \x20       }}\n\
         \x20   }}\n\
         }}\n"
    )
}

/// The TLS Secret the controller terminates the run's TLS with (`kubernetes.io/tls`),
/// from PEM files.
pub fn tls_secret(
    run: &str,
    name: &str,
    cert: &[u8],
    key: &[u8],
) -> k8s_openapi::api::core::v1::Secret {
    use k8s_openapi::ByteString;
    k8s_openapi::api::core::v1::Secret {
        metadata: meta(name, run),
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_string(), ByteString(cert.to_vec())),
            ("tls.key".to_string(), ByteString(key.to_vec())),
        ])),
        ..Default::default()
    }
}

pub fn config_map(run: &str, body_size: usize) -> ConfigMap {
    ConfigMap {
        metadata: meta(BACKEND, run),
        data: Some([("nginx.conf".to_string(), nginx_conf(body_size))].into()),
        ..ConfigMap::default()
    }
}

/// The backends' Service; `h2c`: its port says the pods speak HTTP/2 without TLS
/// (`appProtocol: kubernetes.io/h2c`, Gateway API's GEP-1911), which is how a
/// controller knows to carry gRPC to them over HTTP/2.
pub fn service(run: &str, h2c: bool) -> Service {
    Service {
        metadata: meta(BACKEND, run),
        spec: Some(ServiceSpec {
            selector: Some(pod_labels(run)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: SERVICE_PORT,
                target_port: Some(IntOrString::Int(BACKEND_PORT)),
                app_protocol: h2c.then(|| "kubernetes.io/h2c".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// What the backend pods run, from `kubernetes.image`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendImage {
    /// No image given: the stock nginx image with our ConfigMap.
    Nginx,
    /// ingressbench's own image (`ingressbench`, or a reference whose repository is
    /// named `ingressbench`): `ingressbench backend`, so a scenario's backend delay
    /// and drain apply in the cluster too.
    Ingressbench(String),
    /// Any other image, run as it is: it must answer on port 8080 with `/healthz`.
    /// (Not an error: the string is the image reference the user gave.)
    Other(String),
}

impl BackendImage {
    /// Reads `kubernetes.image`. A bare `ingressbench` is this version's image,
    /// `ingressbench:<version>`, as `docker build -t` in docs/kubernetes.md names it.
    pub fn from_setting(image: Option<&str>) -> BackendImage {
        let Some(image) = image else {
            return BackendImage::Nginx;
        };
        if image == "ingressbench" {
            return BackendImage::Ingressbench(format!(
                "ingressbench:{}",
                env!("CARGO_PKG_VERSION")
            ));
        }
        let name = image.split('@').next().unwrap_or(image);
        let repo = name.rsplit('/').next().unwrap_or(name);
        let repo = repo.split(':').next().unwrap_or(repo);
        if repo == "ingressbench" {
            BackendImage::Ingressbench(image.to_string())
        } else {
            BackendImage::Other(image.to_string())
        }
    }
}

/// How the backends answer: the scenario's `backends` settings a pod can honour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendArgs {
    pub body_size: usize,
    /// `--delay` of `ingressbench backend` (e.g. `2ms`, `exp:2ms`).
    pub delay: Option<String>,
    pub drain: Duration,
}

/// The container command of the `ingressbench` backend image: the binary is
/// `/ingressbench` on an empty (`scratch`) image (see `Dockerfile`), named after
/// its pod as nginx's `$hostname` names it.
pub fn ingressbench_command(args: &BackendArgs) -> Vec<String> {
    let mut c: Vec<String> = [
        "/ingressbench",
        "backend",
        "--listen",
        &format!("0.0.0.0:{BACKEND_PORT}"),
        "--id",
        "$(POD_NAME)",
        "--body-size",
        &args.body_size.to_string(),
        "--drain-timeout",
        &format!("{}ms", args.drain.as_millis()),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    if let Some(d) = &args.delay {
        c.push("--delay".into());
        c.push(d.clone());
    }
    c
}

/// The backends' Deployment: `replicas` pods, a readiness probe every 3 s as in S1,
/// and a grace period of the scenario's drain timeout.
pub fn deployment(
    run: &str,
    replicas: u32,
    image: &BackendImage,
    args: &BackendArgs,
) -> Deployment {
    let drain = args.drain;
    let probe = Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::Int(BACKEND_PORT),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(3),
        ..Probe::default()
    };
    let custom = *image != BackendImage::Nginx;
    let (reference, command, env) = match image {
        BackendImage::Nginx => (DEFAULT_IMAGE.to_string(), None, None),
        BackendImage::Ingressbench(r) => (
            r.clone(),
            Some(ingressbench_command(args)),
            Some(vec![EnvVar {
                name: "POD_NAME".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.name".into(),
                        ..ObjectFieldSelector::default()
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            }]),
        ),
        BackendImage::Other(r) => (r.clone(), None, None),
    };
    let container = Container {
        name: "backend".into(),
        image: Some(reference),
        command,
        env,
        ports: Some(vec![ContainerPort {
            container_port: BACKEND_PORT,
            name: Some("http".into()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(probe),
        volume_mounts: (!custom).then(|| {
            vec![VolumeMount {
                name: "conf".into(),
                mount_path: "/etc/nginx/nginx.conf".into(),
                sub_path: Some("nginx.conf".into()),
                ..VolumeMount::default()
            }]
        }),
        ..Container::default()
    };
    Deployment {
        metadata: meta(BACKEND, run),
        spec: Some(DeploymentSpec {
            replicas: Some(i32::try_from(replicas).unwrap_or(i32::MAX)),
            selector: LabelSelector {
                match_labels: Some(pod_labels(run)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels(run)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    termination_grace_period_seconds: Some(
                        i64::try_from(drain.as_secs()).unwrap_or(i64::MAX).max(1),
                    ),
                    volumes: (!custom).then(|| {
                        vec![Volume {
                            name: "conf".into(),
                            config_map: Some(ConfigMapVolumeSource {
                                name: BACKEND.into(),
                                ..ConfigMapVolumeSource::default()
                            }),
                            ..Volume::default()
                        }]
                    }),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The labels of the corpus's canary pod, which its Services select.
pub fn canary_pod_labels(run: &str) -> BTreeMap<String, String> {
    [
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        ("app.kubernetes.io/name".to_string(), CANARY.to_string()),
        (CORPUS_LABEL.to_string(), run.to_string()),
    ]
    .into()
}

/// The annotation corpus's second set of backends ([`CANARY`]): a
/// Service and a Deployment of one pod like the run's own, but whose pods carry
/// neither the run's label nor the backends' name, so the run's watches, its scale
/// steps and its count of backends never see them; the Deployment itself carries the
/// run's labels, so it goes with the run.
pub fn canary(run: &str, image: &BackendImage, args: &BackendArgs) -> (Service, Deployment) {
    let name = CANARY;
    let mut pod = canary_pod_labels(run);
    let mut svc = service(run, false);
    svc.metadata.name = Some(name.into());
    if let Some(spec) = svc.spec.as_mut() {
        spec.selector = Some(pod.clone());
    }
    let mut d = deployment(run, 1, image, args);
    d.metadata.name = Some(name.into());
    if let Some(spec) = d.spec.as_mut() {
        spec.selector.match_labels = Some(pod.clone());
        if let Some(m) = spec.template.metadata.as_mut() {
            m.labels = Some(std::mem::take(&mut pod));
        }
    }
    (svc, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(drain_s: u64) -> BackendArgs {
        BackendArgs {
            body_size: 1024,
            delay: None,
            drain: Duration::from_secs(drain_s),
        }
    }

    #[test]
    fn every_object_carries_the_run_and_the_service_selects_the_pods() {
        let run = "r1";
        for m in [
            namespace("ns", run).metadata,
            config_map(run, 1024).metadata,
            service(run, false).metadata,
            deployment(run, 3, &BackendImage::Nginx, &args(5)).metadata,
        ] {
            let l = m.labels.unwrap();
            assert_eq!(l[RUN_LABEL], run);
            assert_eq!(l[MANAGED_BY.0], MANAGED_BY.1);
        }
        let d = deployment(run, 3, &BackendImage::Nginx, &args(5));
        let spec = d.spec.unwrap();
        assert_eq!(spec.replicas, Some(3));
        let pod = spec.template.metadata.unwrap().labels.unwrap();
        let sel = service(run, false).spec.unwrap().selector.unwrap();
        assert!(sel.iter().all(|(k, v)| pod.get(k) == Some(v)));
        // gRPC: the port says h2c, so a controller speaks HTTP/2 to the pods.
        let port = |h2c| {
            service(run, h2c).spec.unwrap().ports.unwrap()[0]
                .app_protocol
                .clone()
        };
        assert_eq!(port(false), None);
        assert_eq!(port(true).as_deref(), Some("kubernetes.io/h2c"));
        let ps = spec.template.spec.unwrap();
        assert_eq!(ps.termination_grace_period_seconds, Some(5));
        let probe = ps.containers[0].readiness_probe.clone().unwrap();
        assert_eq!(probe.period_seconds, Some(3));
    }

    #[test]
    fn the_default_backend_answers_like_the_studies_backend() {
        let c = nginx_conf(1024);
        assert!(c.contains("add_header x-backend $hostname always;"), "{c}");
        assert!(c.contains("location = /healthz"));
        assert!(c.contains("uri: $request_uri"));
        assert!(c.contains(&format!("listen {BACKEND_PORT};")));
        // About the body size asked for.
        let body = c.split("return 200 \"backend").nth(1).unwrap();
        assert!(body.len() > 900 && body.len() < 1100, "{}", body.len());
        // Another image gets no nginx config mounted, and is run as it is.
        let other = BackendImage::from_setting(Some("example.com/echo:1"));
        let d = deployment("r", 1, &other, &args(1));
        let ps = d.spec.unwrap().template.spec.unwrap();
        assert!(ps.volumes.is_none());
        assert_eq!(
            ps.containers[0].image.as_deref(),
            Some("example.com/echo:1")
        );
        assert!(ps.containers[0].command.is_none());
    }

    #[test]
    fn the_ingressbench_image_runs_its_backend_named_after_the_pod() {
        use BackendImage::*;
        assert_eq!(BackendImage::from_setting(None), Nginx);
        assert_eq!(
            BackendImage::from_setting(Some("ingressbench")),
            Ingressbench(format!("ingressbench:{}", env!("CARGO_PKG_VERSION")))
        );
        for r in [
            "ghcr.io/me/ingressbench:0.1.0",
            "localhost:5000/ingressbench",
            "ingressbench@sha256:abc",
        ] {
            assert_eq!(BackendImage::from_setting(Some(r)), Ingressbench(r.into()));
        }
        assert_eq!(
            BackendImage::from_setting(Some("ingressbench-old/nginx")),
            Other("ingressbench-old/nginx".into())
        );
        let mut a = args(7);
        a.delay = Some("exp:2ms".into());
        let d = deployment(
            "r",
            2,
            &BackendImage::from_setting(Some("ib/ingressbench:1")),
            &a,
        );
        let ps = d.spec.unwrap().template.spec.unwrap();
        assert!(ps.volumes.is_none(), "no nginx config");
        let c = &ps.containers[0];
        assert_eq!(
            c.command.as_ref().unwrap().join(" "),
            "/ingressbench backend --listen 0.0.0.0:8080 --id $(POD_NAME) --body-size 1024 \
             --drain-timeout 7000ms --delay exp:2ms"
        );
        let env = &c.env.as_ref().unwrap()[0];
        assert_eq!(env.name, "POD_NAME");
        assert_eq!(
            env.value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path,
            "metadata.name"
        );
        // The backend drains within the pod's grace period.
        assert_eq!(ps.termination_grace_period_seconds, Some(7));
    }
}
