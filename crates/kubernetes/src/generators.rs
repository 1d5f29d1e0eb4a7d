//! Distributed load generators as an indexed Job (`completionMode: Indexed`,
//! completions = parallelism = N): Kubernetes places and runs them, so there is no
//! agent of ours on the nodes. Pod `i` runs `ingressbench generator --part i/N
//! --start-at T --serve :PORT --spec-json LOAD` (the index from
//! `$(JOB_COMPLETION_INDEX)`, which the Job controller sets; the whole load as JSON),
//! as a local `--generators` child runs with `--spec FILE`.
//!
//! The coordinator reaches each part only through the API server's pod proxy
//! (`pods/proxy`, the verb `get`/`create` on `pods/proxy` in RBAC terms): `GET /clock`
//! for the clock probes before the start instant, `GET /result` for its full result
//! once it has one (`202` until then), `POST /stop` to end it early, `POST /done` once
//! collected, after which the part exits 0. Nothing else listens and nothing is
//! pushed: a part whose coordinator is gone stops serving after a bounded time, and
//! the Job's `activeDeadlineSeconds` bounds the pods' life whatever happens.

use super::{connect, objects, ClusterSpec, RUN_LABEL};
use crate::error::{self, ClusterError};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, HTTPGetAction, Namespace, Pod, PodAffinityTerm,
    PodAntiAffinity, PodSpec, PodTemplateSpec, Probe,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use std::collections::BTreeMap;
use std::time::Duration;

/// The Job's name (one per run, in the run's namespace).
pub const JOB: &str = "ib-generators";
/// The port each part serves its clock and result on.
pub const PORT: u16 = 9090;
/// The image the generators run when none is given: this program, built with the
/// repository's Dockerfile and tagged `ingressbench` (see docs/kubernetes.md).
pub const DEFAULT_IMAGE: &str = "ingressbench";
/// `app.kubernetes.io/name` of the generator pods.
const NAME: &str = "ib-generator";
/// The annotation the Job controller sets on each pod of an indexed Job.
pub const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// The largest result the coordinator accepts from one part.
pub const MAX_RESULT: usize = 256 << 20;

/// What the Job runs and where.
#[derive(Clone, Debug, Default)]
pub struct JobPlan {
    /// The run's id (labels).
    pub run: String,
    /// How many generators (completions = parallelism).
    pub count: usize,
    /// The image; `None`: [`DEFAULT_IMAGE`].
    pub image: Option<String>,
    /// The arguments after `ingressbench` (`generator --part
    /// $(JOB_COMPLETION_INDEX)/N ... --spec-json LOAD`).
    pub args: Vec<String>,
    /// Only nodes with these labels (S3 gave the load its own node pool).
    pub node_selector: BTreeMap<String, String>,
    /// At most one generator per node (a required pod anti-affinity on the hostname).
    pub spread: bool,
    /// Use the node's network namespace (no overlay between generator and target).
    pub host_network: bool,
    /// Kubernetes ends the pods after this long, whatever the coordinator does.
    pub deadline: Duration,
}

fn pod_labels(run: &str) -> BTreeMap<String, String> {
    let mut l = objects::labels(run);
    l.insert("app.kubernetes.io/name".into(), NAME.into());
    l
}

/// The indexed Job for `p`.
pub fn job(p: &JobPlan) -> Job {
    let count = i32::try_from(p.count).unwrap_or(i32::MAX);
    let probe = Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/clock".into()),
            port: IntOrString::Int(i32::from(PORT)),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(1),
        ..Probe::default()
    };
    let container = Container {
        name: "generator".into(),
        image: Some(p.image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into())),
        command: Some(vec!["ingressbench".into()]),
        args: Some(p.args.clone()),
        ports: Some(vec![ContainerPort {
            container_port: i32::from(PORT),
            name: Some("results".into()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(probe),
        ..Container::default()
    };
    let affinity = p.spread.then(|| Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(pod_labels(&p.run)),
                    ..LabelSelector::default()
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..PodAffinityTerm::default()
            }]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    });
    let deadline = i64::try_from(p.deadline.as_secs())
        .unwrap_or(i64::MAX)
        .max(1);
    Job {
        metadata: ObjectMeta {
            name: Some(JOB.into()),
            labels: Some(objects::labels(&p.run)),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(count),
            parallelism: Some(count),
            // A part is never retried (its start instant has passed) and one that
            // fails does not end the others: it is named in the merged result.
            backoff_limit_per_index: Some(0),
            active_deadline_seconds: Some(deadline),
            ttl_seconds_after_finished: Some(60),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels(&p.run)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    restart_policy: Some("Never".into()),
                    node_selector: (!p.node_selector.is_empty()).then(|| p.node_selector.clone()),
                    affinity,
                    host_network: p.host_network.then_some(true),
                    enable_service_links: Some(false),
                    termination_grace_period_seconds: Some(5),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

/// One generator pod as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratorPod {
    pub index: usize,
    pub name: String,
    /// It has an IP and is Running: the proxy can reach it.
    pub running: bool,
    /// It ended (phase Succeeded or Failed): how, from its container's status.
    pub ended: Option<String>,
}

/// The pod of `index` from a pod object, if it is one of the Job's.
fn generator_pod(p: &Pod) -> Option<GeneratorPod> {
    let index = p
        .metadata
        .annotations
        .as_ref()?
        .get(INDEX_ANNOTATION)?
        .parse()
        .ok()?;
    let status = p.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let has_ip = status.and_then(|s| s.pod_ip.as_ref()).is_some();
    let ended = matches!(phase, "Succeeded" | "Failed").then(|| {
        let term = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.terminated.as_ref());
        match term {
            Some(t) => format!(
                "pod {phase}: exit code {}{}",
                t.exit_code,
                t.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
            None => format!("pod {phase}"),
        }
    });
    Some(GeneratorPod {
        index,
        name: p.metadata.name.clone()?,
        running: phase == "Running" && has_ip && p.metadata.deletion_timestamp.is_none(),
        ended,
    })
}

/// The Job of a run, from its creation to its deletion ([`GeneratorJob::remove`],
/// or on drop however the run ends; `ingressbench cleanup` removes what a killed
/// coordinator left).
pub struct GeneratorJob {
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    namespace: String,
    created_namespace: bool,
    /// Kept (`--keep`), or removed already: nothing to delete.
    keep: bool,
    /// The run's id: in a shared namespace (`--namespace`) every run's Job has the
    /// same name, so pods are told apart by the run's label.
    run: String,
}

impl GeneratorJob {
    /// Creates the run's namespace (unless `cluster.namespace` names one) and the Job.
    ///
    /// # Errors
    /// [`ClusterError`] when the cluster cannot be reached or refuses an object.
    pub fn start(cluster: &ClusterSpec, plan: &JobPlan) -> Result<GeneratorJob, ClusterError> {
        let rt = super::runtime()?;
        let client = rt.block_on(connect(cluster))?;
        let (namespace, create) = match &cluster.namespace {
            Some(ns) => (ns.clone(), false),
            None => (format!("ingressbench-{}", plan.run), true),
        };
        let nss: Api<Namespace> = Api::all(client.clone());
        rt.block_on(async {
            if create {
                nss.create(
                    &PostParams::default(),
                    &objects::namespace(&namespace, &plan.run),
                )
                .await
                .map_err(ClusterError::api(format!("create namespace {namespace}")))
                .map(|_| ())
            } else {
                nss.get(&namespace)
                    .await
                    .map_err(ClusterError::api(format!("namespace {namespace}")))
                    .map(|_| ())
            }
        })?;
        let me = GeneratorJob {
            rt,
            client,
            namespace,
            created_namespace: create,
            keep: cluster.keep,
            run: plan.run.clone(),
        };
        let jobs: Api<Job> = Api::namespaced(me.client.clone(), &me.namespace);
        me.rt
            .block_on(jobs.create(&PostParams::default(), &job(plan)))
            .map_err(ClusterError::api("create the generators' Job"))?;
        Ok(me)
    }

    /// The namespace the Job is in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// This run's pods of the Job, by index.
    ///
    /// # Errors
    /// [`ClusterError`] when the API cannot be listed within 5 s.
    pub fn pods(&self) -> Result<Vec<GeneratorPod>, ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = ListParams::default().labels(&format!(
            "batch.kubernetes.io/job-name={JOB},{RUN_LABEL}={}",
            self.run
        ));
        let what = "list the generators' pods";
        let waited = Duration::from_secs(5);
        let list = self
            .rt
            .block_on(async {
                tokio::time::timeout(waited, api.list(&lp))
                    .await
                    .map_err(|_| ClusterError::Timeout {
                        what: what.into(),
                        waited,
                    })
            })?
            .map_err(ClusterError::api(what))?;
        let mut pods: Vec<GeneratorPod> = list.items.iter().filter_map(generator_pod).collect();
        pods.sort_by_key(|p| p.index);
        Ok(pods)
    }

    /// `method path` on the pod's [`PORT`] through the API server's pod proxy: the
    /// status and the body.
    ///
    /// # Errors
    /// A line saying why (the API server could not reach the pod, a timeout, a body
    /// larger than [`MAX_RESULT`]).
    pub fn proxy(
        &self,
        pod: &str,
        method: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<(u16, Vec<u8>), String> {
        let uri = format!(
            "/api/v1/namespaces/{}/pods/{pod}:{PORT}/proxy{path}",
            self.namespace
        );
        let req = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(Vec::new())
            .map_err(|e| results::with_causes(&e))?;
        let client = self.client.clone();
        self.rt.block_on(async move {
            let call = async {
                let res = client
                    .send(req.map(kube::client::Body::from))
                    .await
                    .map_err(|e| results::with_causes(&e))?;
                let status = res.status().as_u16();
                let mut body = res.into_body();
                let mut out = Vec::new();
                while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
                    let frame = frame.map_err(|e| results::with_causes(&e))?;
                    if let Some(d) = frame.data_ref() {
                        out.extend_from_slice(d);
                        if out.len() > MAX_RESULT {
                            return Err(format!("answer larger than {} MiB", MAX_RESULT >> 20));
                        }
                    }
                }
                Ok((status, out))
            };
            tokio::time::timeout(timeout, call)
                .await
                .map_err(|_| format!("no answer within {timeout:?}"))?
        })
    }

    /// Deletes the Job and its pods (the namespace too, if the run created it),
    /// unless kept; once, whatever the outcome.
    ///
    /// # Errors
    /// [`ClusterError::Left`] naming what is still in the cluster, and `ingressbench
    /// cleanup`, which removes it.
    pub fn remove(&mut self) -> Result<(), ClusterError> {
        if std::mem::replace(&mut self.keep, true) {
            return Ok(());
        }
        let client = self.client.clone();
        let ns = self.namespace.clone();
        let created = self.created_namespace;
        let (what, res) = self.rt.block_on(async move {
            if created {
                let res = Api::<Namespace>::all(client)
                    .delete(&ns, &DeleteParams::default())
                    .await
                    .map(|_| ());
                (format!("namespace {ns}"), res)
            } else {
                let dp = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    ..DeleteParams::default()
                };
                let res = Api::<Job>::namespaced(client, &ns)
                    .delete(JOB, &dp)
                    .await
                    .map(|_| ());
                (format!("Job {ns}/{JOB}"), res)
            }
        });
        match res {
            Err(source) if !error::gone(&source) => Err(ClusterError::Left {
                what,
                remedy: error::CLEANUP.into(),
                source,
            }),
            _ => Ok(()),
        }
    }
}

impl Drop for GeneratorJob {
    /// A run removes the Job itself and reports what failed; this is for one that
    /// ended early (an error, a panic), with no result left to tell.
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// Deletes every generator Job a run left outside its own namespaces (in a namespace
/// given with `--namespace`): those labelled with [`RUN_LABEL`] and ours. Returns
/// `namespace/name` of each. Jobs in `skip` (namespaces being deleted) go with them.
pub(crate) async fn cleanup_jobs(
    client: &kube::Client,
    skip: &[String],
) -> Result<Vec<String>, ClusterError> {
    let lp = ListParams::default().labels(&format!("{},{RUN_LABEL}", super::MANAGED_BY.0));
    let jobs: Api<Job> = Api::all(client.clone());
    let mut gone = Vec::new();
    for j in jobs
        .list(&lp)
        .await
        .map_err(ClusterError::api("list Jobs"))?
    {
        let (Some(ns), Some(name)) = (j.metadata.namespace, j.metadata.name) else {
            continue;
        };
        if skip.contains(&ns) || j.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        Api::<Job>::namespaced(client.clone(), &ns)
            .delete(&name, &dp)
            .await
            .map_err(ClusterError::api(format!("delete Job {ns}/{name}")))?;
        gone.push(format!("{ns}/{name}"));
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake;

    #[test]
    fn a_job_left_behind_is_named_with_the_cleanup_that_removes_it() {
        let rt = crate::runtime().unwrap();
        let (client, seen) = fake::client(&rt, |_, _| {
            fake::refused(503, "ServiceUnavailable", "the server is shutting down")
        });
        let mut job = GeneratorJob {
            rt,
            client,
            namespace: "team-a".into(),
            created_namespace: false,
            keep: false,
            run: "r1".into(),
        };
        let e = job.remove().expect_err("the Job is left");
        assert_eq!(
            results::with_causes(&e),
            "kubernetes: Job team-a/ib-generators not deleted (run `ingressbench cleanup --platform kubernetes`): the server is shutting down: ServiceUnavailable"
        );
        job.remove().expect("removed once: nothing more is asked");
        drop(job);
        assert_eq!(
            *seen.lock().unwrap(),
            ["DELETE /apis/batch/v1/namespaces/team-a/jobs/ib-generators"]
        );
    }

    fn plan() -> JobPlan {
        JobPlan {
            run: "r1".into(),
            count: 3,
            image: None,
            args: vec![
                "load".into(),
                "--part".into(),
                "$(JOB_COMPLETION_INDEX)/3".into(),
            ],
            node_selector: [("pool".to_string(), "load".to_string())].into(),
            spread: true,
            host_network: false,
            deadline: Duration::from_secs(90),
        }
    }

    #[test]
    fn the_job_is_indexed_never_retried_and_the_runs_own() {
        let j = job(&plan());
        let l = j.metadata.labels.clone().unwrap();
        assert_eq!(l[RUN_LABEL], "r1");
        assert_eq!(l[super::super::MANAGED_BY.0], "ingressbench");
        let s = j.spec.unwrap();
        assert_eq!(s.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!((s.completions, s.parallelism), (Some(3), Some(3)));
        assert_eq!(s.backoff_limit_per_index, Some(0));
        assert_eq!(s.active_deadline_seconds, Some(90));
        let pod_labels = s.template.metadata.unwrap().labels.unwrap();
        assert_eq!(pod_labels[RUN_LABEL], "r1");
        let ps = s.template.spec.unwrap();
        assert_eq!(ps.restart_policy.as_deref(), Some("Never"));
        assert_eq!(ps.node_selector.unwrap()["pool"], "load");
        assert_eq!(ps.host_network, None);
        let c = &ps.containers[0];
        assert_eq!(c.image.as_deref(), Some(DEFAULT_IMAGE));
        assert_eq!(
            c.command.as_deref(),
            Some(&["ingressbench".to_string()][..])
        );
        assert_eq!(c.args.as_ref().unwrap()[2], "$(JOB_COMPLETION_INDEX)/3");
        assert_eq!(c.ports.as_ref().unwrap()[0].container_port, i32::from(PORT));
        // The anti-affinity selects exactly the run's generator pods, per node.
        let term = &ps
            .affinity
            .unwrap()
            .pod_anti_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()[0];
        assert_eq!(term.topology_key, "kubernetes.io/hostname");
        let sel = term.label_selector.clone().unwrap().match_labels.unwrap();
        assert!(sel.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
        assert_eq!(sel.get(RUN_LABEL).map(String::as_str), Some("r1"));
    }

    #[test]
    fn without_spread_or_selector_the_scheduler_is_free() {
        let mut p = plan();
        p.spread = false;
        p.node_selector.clear();
        p.host_network = true;
        p.image = Some("registry.example/ingressbench:1".into());
        let ps = job(&p).spec.unwrap().template.spec.unwrap();
        assert!(ps.affinity.is_none() && ps.node_selector.is_none());
        assert_eq!(ps.host_network, Some(true));
        assert_eq!(
            ps.containers[0].image.as_deref(),
            Some("registry.example/ingressbench:1")
        );
    }

    #[test]
    fn a_pod_is_read_by_its_completion_index() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ib-generators-1-abc", "annotations": {INDEX_ANNOTATION: "1"}},
            "status": {"phase": "Running", "podIP": "198.18.64.3"}
        }))
        .unwrap();
        let g = generator_pod(&pod).unwrap();
        assert_eq!((g.index, g.running, g.ended.clone()), (1, true, None));
        pod.status = serde_json::from_value(serde_json::json!({
            "phase": "Failed",
            "containerStatuses": [{"name": "generator", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
        }))
        .unwrap();
        let g = generator_pod(&pod).unwrap();
        assert!(!g.running);
        assert_eq!(g.ended.as_deref(), Some("pod Failed: exit code 1 (Error)"));
        pod.metadata.annotations = None;
        assert!(generator_pod(&pod).is_none());
    }
}
