//! What a Kubernetes run reports: the cluster and the pods that served.

use serde::{Deserialize, Serialize};

/// The cluster's view of a run (`platform: kubernetes`); the controller's version is
/// in [`LabInfo::versions`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// The kubeconfig context (`None`: its current one).
    pub context: Option<String>,
    pub namespace: String,
    /// Every backend pod the run saw, oldest first, with where it ran.
    pub pods: Vec<ClusterPod>,
}

/// One backend pod of a cluster run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterPod {
    pub name: String,
    /// `spec.nodeName`; `None` if it was never scheduled.
    pub node: Option<String>,
    pub ip: Option<String>,
}
