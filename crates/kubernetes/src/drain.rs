//! `drain: node`: a node cordoned and the run's pods on it evicted, as `kubectl
//! drain` does, and the nodes made schedulable again when the run ends.

use crate::book::{Book, PodSeen};
use crate::{error, ClusterError, Kubernetes, CORDONED_BY, SCALE_WAIT};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use std::time::{Duration, Instant};
use sut::driver::SutError;
use sut::platform::{PlatformEvent, StopMode};

impl Kubernetes {
    /// Cordons the node (`spec.unschedulable`, as `kubectl cordon`), then evicts
    /// each of the run's backend pods on it through the Eviction API, which honours
    /// PodDisruptionBudgets (a refused eviction, 429, is asked again every 500 ms, as
    /// `kubectl drain` does); the Deployment puts the replacements on other nodes.
    /// Done when as many backends as before are ready and none is on the node. The
    /// node is made schedulable again when the run ends. Only the run's own pods
    /// are evicted.
    pub(crate) fn drain_node(
        &mut self,
        node: Option<&str>,
        on: &mut dyn FnMut(PlatformEvent),
    ) -> Result<String, SutError> {
        let client = self.client()?;
        let Some(ns) = self.namespace.clone() else {
            return Err(SutError::NotPrepared("kubernetes: drain".into()));
        };
        if let Some(rx) = &self.events {
            while rx.try_recv().is_ok() {}
        }
        let t = Instant::now();
        let want = self.book().running() as usize;
        let node = match node {
            Some(n) => n.to_string(),
            None => {
                let book = self.book();
                let mut pods: Vec<&PodSeen> = book.pods().filter(|p| !p.terminating).collect();
                pods.sort_by(|a, b| a.created.cmp(&b.created));
                pods.iter()
                    .find_map(|p| p.node.clone())
                    .ok_or_else(|| SutError::Unsupported {
                        system: "kubernetes".into(),
                        what: "drain a node yet: no backend pod is on a node".into(),
                    })?
            }
        };
        let victims: Vec<String> = self
            .book()
            .pods()
            .filter(|p| !p.terminating && p.node.as_deref() == Some(node.as_str()))
            .map(|p| p.name.clone())
            .collect();
        let api_err = |what: String| move |source| ClusterError::Api { what, source };
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        // A node cordoned before the run stays cordoned after it.
        let was_cordoned = self
            .rt
            .block_on(nodes.get(&node))
            .map_err(api_err(format!("get node {node}")))?
            .spec
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        let cordon = if was_cordoned {
            serde_json::json!({"spec": {"unschedulable": true}})
        } else {
            serde_json::json!({"metadata": {"labels": {CORDONED_BY: self.spec.run}},
                               "spec": {"unschedulable": true}})
        };
        self.rt
            .block_on(nodes.patch(&node, &PatchParams::default(), &Patch::Merge(&cordon)))
            .map_err(api_err(format!("cordon node {node}")))?;
        if !was_cordoned && !self.cordoned.contains(&node) {
            self.cordoned.push(node.clone());
        }
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        for pod in &victims {
            let deadline = Instant::now() + SCALE_WAIT;
            loop {
                match self
                    .rt
                    .block_on(pods.evict(pod, &kube::api::EvictParams::default()))
                {
                    Ok(_) => break,
                    Err(e) if error::gone(&e) => break,
                    Err(kube::Error::Api(s)) if s.code == 429 && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(500));
                    }
                    Err(e) => return Err(api_err(format!("evict pod {pod}"))(e).into()),
                }
            }
        }
        let gone = victims.clone();
        let done = move |b: &Book| {
            b.running() as usize == want
                && b.endpoints().len() == want
                && !b.endpoints().iter().any(|e| gone.contains(&e.id))
        };
        self.follow(t, StopMode::Graceful, on, &done)?;
        Ok(format!("{node} ({} evicted)", victims.len()))
    }

    /// Makes the nodes a drain cordoned schedulable again.
    pub(crate) fn uncordon(&mut self) -> Result<(), ClusterError> {
        if self.cordoned.is_empty() {
            return Ok(());
        }
        let client = self.client()?;
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
        let patch = uncordon_patch();
        let mut res = Ok(());
        for node in std::mem::take(&mut self.cordoned) {
            match self.rt.block_on(nodes.patch(
                &node,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )) {
                Err(e) if !error::gone(&e) => {
                    res = Err(ClusterError::Api {
                        what: format!("uncordon node {node} (kubectl uncordon {node})"),
                        source: e,
                    });
                }
                _ => {}
            }
        }
        res
    }
}

/// What makes a node a drain cordoned schedulable again, its label gone.
pub(crate) fn uncordon_patch() -> serde_json::Value {
    serde_json::json!({"metadata": {"labels": {CORDONED_BY: null}}, "spec": {"unschedulable": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncordoning_removes_the_drains_label_and_the_flag() {
        assert_eq!(
            uncordon_patch(),
            serde_json::json!({"metadata": {"labels": {"ingressbench.io/cordoned-by": null}},
                               "spec": {"unschedulable": null}})
        );
    }
}
