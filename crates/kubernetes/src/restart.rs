//! The `restart:` steps on a cluster, as an operator makes them: the controller's
//! pods deleted (their ReplicaSet or DaemonSet makes new ones, as after a crash or
//! an eviction), and the data plane's workload rolled as `kubectl rollout restart`
//! does (a new `kubectl.kubernetes.io/restartedAt` in its pod template, and the
//! workload's own update strategy from there). Both wait, polling the pods every
//! 100 ms, until as many new pods as there were are ready, reporting each new pod as
//! it becomes ready, so the run logs every replacement on the load's clock.
//!
//! These are the only steps that touch objects outside the run's namespace: the
//! installed controller's, in its own namespace, which is what they measure.

use crate::controllers::Install;
use crate::error::{self, ClusterError};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use sut::SutError;

/// How long a restart may take until every new pod is ready.
const RESTART_WAIT: Duration = Duration::from_secs(120);

/// A pod as a restart sees it.
struct Seen {
    name: String,
    ready: bool,
    terminating: bool,
}

/// What a restart works with: the client on its runtime, and where the pods are.
pub(crate) struct Restarter<'a> {
    pub rt: &'a tokio::runtime::Runtime,
    pub client: kube::Client,
    pub install: &'a Install<String>,
    /// The system's name, for messages that say which key to set.
    pub system: &'a str,
    /// The Gateway the run's routes attach to, (namespace, name).
    pub gateway: Option<(String, String)>,
}

impl Restarter<'_> {
    fn pods(&self, selector: &str) -> Result<Vec<Seen>, ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.install.namespace);
        let list = self
            .rt
            .block_on(api.list(&ListParams::default().labels(selector)))
            .map_err(ClusterError::api(format!(
                "list pods {selector} in namespace {}",
                self.install.namespace
            )))?;
        Ok(list
            .items
            .into_iter()
            .map(|p| Seen {
                name: p.metadata.name.clone().unwrap_or_default(),
                terminating: p.metadata.deletion_timestamp.is_some(),
                ready: p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
            })
            .collect())
    }

    /// The container restarts of each of the controller's pods, by pod name: what
    /// the kubelet counts when a container crashes and is started again. Read at
    /// the run's start and end, a count that grew is a crash the run did not ask for
    /// (a `restart:` step replaces pods; it never restarts a container).
    pub(crate) fn restarts(&self) -> Result<BTreeMap<String, i32>, ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.install.namespace);
        let sel = &self.install.controller;
        let list = self
            .rt
            .block_on(api.list(&ListParams::default().labels(sel)))
            .map_err(ClusterError::api(format!(
                "list pods {sel} in namespace {}",
                self.install.namespace
            )))?;
        Ok(list
            .items
            .into_iter()
            .map(|p| {
                let n = p
                    .status
                    .and_then(|s| s.container_statuses)
                    .into_iter()
                    .flatten()
                    .map(|c| c.restart_count)
                    .sum();
                (p.metadata.name.unwrap_or_default(), n)
            })
            .collect())
    }

    /// The running (not terminating) pods of `selector`, which a restart replaces.
    fn running(&self, selector: &str) -> Result<Vec<String>, SutError> {
        let names: Vec<String> = self
            .pods(selector)?
            .into_iter()
            .filter(|p| !p.terminating)
            .map(|p| p.name)
            .collect();
        if names.is_empty() {
            return Err(SutError::Setting {
                what: self.system.into(),
                why: format!(
                    "no running pod labelled {selector} in namespace {}: say where it runs in kubernetes.workloads.{}",
                    self.install.namespace, self.system
                ),
            });
        }
        Ok(names)
    }

    /// Deletes the controller's pods; returns once as many new ones are ready.
    pub fn restart_controller(&self, replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        let selector = &self.install.controller;
        let old = self.running(selector)?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.install.namespace);
        for pod in &old {
            match self.rt.block_on(api.delete(pod, &DeleteParams::default())) {
                Err(e) if !error::gone(&e) => {
                    return Err(ClusterError::api(format!(
                        "delete pod {pod} in namespace {}",
                        self.install.namespace
                    ))(e)
                    .into())
                }
                _ => {}
            }
        }
        self.wait_replaced(selector, &old, old.len(), "the controller's pods", replaced)
    }

    /// Rolls the data plane's workload as `kubectl rollout restart` does; returns
    /// once it has as many new pods ready as it wants and no old one running.
    pub fn restart_data_plane(&self, replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        let found;
        let install = match self.data_plane_of_gateway()? {
            Some(name) => {
                found = Install {
                    data_plane: Some(format!("deployment/{name}")),
                    ..self.install.clone()
                };
                &found
            }
            None => self.install,
        };
        let workload = install.workload().map_err(|why| SutError::Setting {
            what: format!("kubernetes.workloads.{}", self.system),
            why,
        })?;
        let Some((kind, name)) = workload else {
            return Err(SutError::Unsupported {
                system: self.system.into(),
                what: format!(
                    "restart its proxy: say which workload runs it in kubernetes.workloads.{}.data_plane",
                    self.system
                ),
            });
        };
        let ns = &self.install.namespace;
        let what = format!("{kind}/{name} in namespace {ns}");
        let at = k8s_openapi::jiff::Timestamp::now().to_string();
        let patch = serde_json::json!({"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": at
        }}}}});
        let pp = PatchParams::default();
        let (selector, want) = if kind == "deployment" {
            let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
            let d = self
                .rt
                .block_on(api.get(name))
                .map_err(ClusterError::api(format!("get {what}")))?;
            let spec = d.spec.unwrap_or_default();
            (
                labels(spec.selector.match_labels),
                spec.replicas.unwrap_or(1).max(0) as usize,
            )
        } else {
            let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
            let d = self
                .rt
                .block_on(api.get(name))
                .map_err(ClusterError::api(format!("get {what}")))?;
            (
                labels(d.spec.unwrap_or_default().selector.match_labels),
                d.status
                    .map_or(1, |s| s.desired_number_scheduled.max(0) as usize),
            )
        };
        if selector.is_empty() {
            // An empty selector would take every pod of the namespace for the
            // workload's.
            return Err(SutError::Setting {
                what: self.system.into(),
                why: format!(
                    "{what} selects its pods with matchExpressions only: a restart finds the pods it replaces by matchLabels"
                ),
            });
        }
        let old = self.running(&selector)?;
        let asked = if kind == "deployment" {
            let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
            self.rt
                .block_on(api.patch(name, &pp, &Patch::Merge(&patch)))
                .map(|_| ())
        } else {
            let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
            self.rt
                .block_on(api.patch(name, &pp, &Patch::Merge(&patch)))
                .map(|_| ())
        };
        asked.map_err(ClusterError::api(format!("restart {what}")))?;
        self.wait_replaced(&selector, &old, want, &what, replaced)
    }

    /// For a `deployment?SELECTOR` data plane: the name of the one Deployment the
    /// selector finds, the run's Gateway put in it.
    fn data_plane_of_gateway(&self) -> Result<Option<String>, SutError> {
        let Some(sel) = self
            .install
            .data_plane
            .as_deref()
            .and_then(|w| w.strip_prefix("deployment?"))
        else {
            return Ok(None);
        };
        let (gw_ns, gw) = self.gateway.clone().unwrap_or_default();
        let sel = sel
            .replace("{gateway_namespace}", &gw_ns)
            .replace("{gateway_name}", &gw);
        let ns = &self.install.namespace;
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        let list = self
            .rt
            .block_on(api.list(&ListParams::default().labels(&sel)))
            .map_err(ClusterError::api(format!(
                "list deployments {sel} in namespace {ns}"
            )))?;
        let names: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|d| d.metadata.name)
            .collect();
        match names.as_slice() {
            [one] => Ok(Some(one.clone())),
            _ => Err(SutError::Setting {
                what: format!("kubernetes.workloads.{}.data_plane", self.system),
                why: format!(
                    "{} Deployments labelled {sel} in namespace {ns} ({}): the data plane of Gateway {gw_ns}/{gw} is one",
                    names.len(),
                    names.join(", ")
                ),
            }),
        }
    }

    /// Waits until `want` pods of `selector` that are not in `old` are ready and no
    /// pod of `old` runs (a terminating one may still finish its requests),
    /// reporting each new pod once, as it becomes ready.
    fn wait_replaced(
        &self,
        selector: &str,
        old: &[String],
        want: usize,
        what: &str,
        replaced: &mut dyn FnMut(String),
    ) -> Result<(), SutError> {
        let deadline = Instant::now() + RESTART_WAIT;
        let mut reported = BTreeSet::new();
        loop {
            let now = self.pods(selector)?;
            for p in &now {
                if !old.contains(&p.name)
                    && p.ready
                    && !p.terminating
                    && reported.insert(p.name.clone())
                {
                    replaced(format!("{} ready", p.name));
                }
            }
            let ready_new = now
                .iter()
                .filter(|p| !old.contains(&p.name) && p.ready && !p.terminating)
                .count();
            let old_running = now
                .iter()
                .filter(|p| old.contains(&p.name) && !p.terminating)
                .count();
            if ready_new >= want && old_running == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!(
                    "{what} after a restart ({ready_new} of {want} new pods ready, {old_running} old still running, after {} s)",
                    RESTART_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A selector's `matchLabels` as `key=value,...`.
fn labels(m: Option<std::collections::BTreeMap<String, String>>) -> String {
    m.unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The controller's pods whose containers restarted between two readings of
/// [`Restarter::restarts`], in one line for the result's warnings; `None` when none
/// did. A pod only in one reading was made or removed (a `restart:` step), not
/// restarted.
pub(crate) fn crashed(
    namespace: &str,
    before: &BTreeMap<String, i32>,
    after: &BTreeMap<String, i32>,
) -> Option<String> {
    let grew: Vec<String> = after
        .iter()
        .filter_map(|(pod, n)| {
            let was = *before.get(pod)?;
            (*n > was).then(|| format!("{namespace}/{pod} ({was} -> {n})"))
        })
        .collect();
    (!grew.is_empty()).then(|| {
        format!(
            "the controller's container restarted during the run, as after a crash: {} (kubectl logs --previous says why); the errors of that moment are the crash's",
            grew.join(", ")
        )
    })
}

#[cfg(test)]
mod crash_tests {
    use super::*;

    #[test]
    fn only_a_restart_count_that_grew_on_the_same_pod_is_a_crash() {
        let m = |v: &[(&str, i32)]| -> BTreeMap<String, i32> {
            v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
        };
        let before = m(&[("c-1", 0), ("c-2", 3)]);
        assert_eq!(crashed("ns", &before, &before), None);
        // Replaced by a restart step: new names, whatever their counts.
        assert_eq!(crashed("ns", &before, &m(&[("c-3", 1)])), None);
        let line = crashed("ns", &before, &m(&[("c-1", 1), ("c-2", 3)])).unwrap();
        assert!(
            line.starts_with("the controller's container restarted"),
            "{line}"
        );
        assert!(
            line.contains("ns/c-1 (0 -> 1)") && !line.contains("c-2"),
            "{line}"
        );
    }
}
