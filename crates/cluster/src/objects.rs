//! The objects a run creates, built as typed API objects, every one labelled with the
//! run. The default backend needs no image of ours: the stock `nginx` image with a
//! configuration (a ConfigMap) that answers as S1's backend and `ingressbench backend`
//! do: `200`, about `body_size` bytes of text naming the pod and the request URI, the
//! header `x-backend: <pod name>`, and `/healthz` for the readiness probe.

use super::{BACKEND, MANAGED_BY, RUN_LABEL};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, HTTPGetAction, Namespace, PodSpec,
    PodTemplateSpec, Probe, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use std::time::Duration;

/// The port the backend pods listen on.
pub const BACKEND_PORT: i32 = 8080;
/// The stock image the default backend runs.
pub const DEFAULT_IMAGE: &str = "nginx:1.27";

pub(crate) fn labels(run: &str) -> BTreeMap<String, String> {
    [
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (RUN_LABEL.to_string(), run.to_string()),
    ]
    .into()
}

fn pod_labels(run: &str) -> BTreeMap<String, String> {
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

pub fn config_map(run: &str, body_size: usize) -> ConfigMap {
    ConfigMap {
        metadata: meta(BACKEND, run),
        data: Some([("nginx.conf".to_string(), nginx_conf(body_size))].into()),
        ..ConfigMap::default()
    }
}

pub fn service(run: &str) -> Service {
    Service {
        metadata: meta(BACKEND, run),
        spec: Some(ServiceSpec {
            selector: Some(pod_labels(run)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                target_port: Some(IntOrString::Int(BACKEND_PORT)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The backends' Deployment: `replicas` pods, a readiness probe every 3 s as in S1,
/// and a grace period of the scenario's drain timeout.
pub fn deployment(run: &str, replicas: u32, drain: Duration, image: Option<&str>) -> Deployment {
    let probe = Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::Int(BACKEND_PORT),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(3),
        ..Probe::default()
    };
    let custom = image.is_some();
    let container = Container {
        name: "backend".into(),
        image: Some(image.unwrap_or(DEFAULT_IMAGE).into()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_carries_the_run_and_the_service_selects_the_pods() {
        let run = "r1";
        for m in [
            namespace("ns", run).metadata,
            config_map(run, 1024).metadata,
            service(run).metadata,
            deployment(run, 3, Duration::from_secs(5), None).metadata,
        ] {
            let l = m.labels.unwrap();
            assert_eq!(l[RUN_LABEL], run);
            assert_eq!(l[MANAGED_BY.0], MANAGED_BY.1);
        }
        let d = deployment(run, 3, Duration::from_secs(5), None);
        let spec = d.spec.unwrap();
        assert_eq!(spec.replicas, Some(3));
        let pod = spec.template.metadata.unwrap().labels.unwrap();
        let sel = service(run).spec.unwrap().selector.unwrap();
        assert!(sel.iter().all(|(k, v)| pod.get(k) == Some(v)));
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
        // A custom image gets no nginx config mounted.
        let d = deployment("r", 1, Duration::from_secs(1), Some("ingressbench:dev"));
        let ps = d.spec.unwrap().template.spec.unwrap();
        assert!(ps.volumes.is_none());
        assert_eq!(ps.containers[0].image.as_deref(), Some("ingressbench:dev"));
    }
}
