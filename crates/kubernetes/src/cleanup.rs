//! What a run leaves in the cluster: removed when it ends (its namespace, or its
//! objects in a namespace it was given), on a panic by `Drop`, and after a killed
//! run by `ingressbench cleanup` ([`cleanup`]).

use crate::drain::uncordon_patch;
use crate::{
    connect, error, generators, ClusterError, ClusterSpec, Kubernetes, CORDONED_BY, MANAGED_BY,
    RUN_LABEL,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use sut::platform::Platform;

impl Kubernetes {
    /// Deletes what the run made in `ns`: the namespace itself if the run created
    /// it, else the run's objects in it.
    pub(crate) fn delete(&mut self, ns: &str) -> Result<(), ClusterError> {
        let left = |source| ClusterError::Left {
            what: format!("namespace {ns}"),
            remedy: error::CLEANUP.into(),
            source,
        };
        // Connected since `prepare` made the namespace: the client is at hand.
        let client = self.client()?;
        let (run, created) = (self.spec.run.clone(), self.created_namespace);
        self.rt.block_on(async {
            if created {
                match Api::<Namespace>::all(client)
                    .delete(ns, &DeleteParams::default())
                    .await
                {
                    Err(e) if !error::gone(&e) => Err(left(e)),
                    _ => Ok(()),
                }
            } else {
                delete_run_objects(&client, ns, &run)
                    .await
                    .map_err(|(what, e)| ClusterError::left_in(what.into(), ns, &run, false, e))
            }
        })
    }
}

impl Drop for Kubernetes {
    /// A run tears the platform down itself and reports what failed; this is for
    /// a run that ended in a panic, with no one left to tell.
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Deletes the objects of `run` in a namespace the run did not create.
///
/// # Errors
/// The kind of the objects that could not be deleted, and why.
pub(crate) async fn delete_run_objects(
    client: &kube::Client,
    ns: &str,
    run: &str,
) -> Result<(), (&'static str, kube::Error)> {
    let lp = ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    let dp = DeleteParams::default();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await
        .map_err(|e| ("the backends' Deployment", e))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await
        .map_err(|e| ("the backends' ConfigMap", e))?;
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await
        .map_err(|e| ("the run's TLS Secret", e))?;
    crate::gateway::delete_labelled(client, ns, &lp)
        .await
        .map_err(|e| ("the run's Gateway", e))?;
    // Services have no delete-collection verb: one by one.
    let svcs = Api::<Service>::namespaced(client.clone(), ns);
    let listed = svcs
        .list(&lp)
        .await
        .map_err(|e| ("the backends' Service", e))?;
    for s in listed {
        if let Some(name) = s.metadata.name {
            match svcs.delete(&name, &dp).await {
                Err(e) if !error::gone(&e) => return Err(("the backends' Service", e)),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Removes what runs left in the cluster: every namespace labelled as created by
/// ingressbench. Returns their names.
///
/// # Errors
/// [`ClusterError`] when the cluster cannot be reached or refuses.
pub fn cleanup(spec: &ClusterSpec) -> Result<Vec<String>, ClusterError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClusterError::Runtime)?;
    rt.block_on(async {
        let client = connect(spec).await?;
        let nss: Api<Namespace> = Api::all(client.clone());
        let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
        let mut gone = Vec::new();
        for ns in nss
            .list(&lp)
            .await
            .map_err(ClusterError::api("list namespaces"))?
        {
            let Some(name) = ns.metadata.name else {
                continue;
            };
            if ns.metadata.deletion_timestamp.is_none() {
                nss.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(ClusterError::api(format!("delete namespace {name}")))?;
            }
            gone.push(name);
        }
        // Generator Jobs of runs that worked in a namespace they were given.
        for job in generators::cleanup_jobs(&client, &gone).await? {
            gone.push(format!("job {job}"));
        }
        // Nodes a killed run's drain left cordoned.
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
        for node in nodes
            .list(&ListParams::default().labels(CORDONED_BY))
            .await
            .map_err(ClusterError::api(format!(
                "list nodes labelled {CORDONED_BY}"
            )))?
        {
            let Some(name) = node.metadata.name else {
                continue;
            };
            nodes
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&uncordon_patch()),
                )
                .await
                .map_err(ClusterError::api(format!("uncordon node {name}")))?;
            gone.push(format!("node {name}"));
        }
        Ok(gone)
    })
}
