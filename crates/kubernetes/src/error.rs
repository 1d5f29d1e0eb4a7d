//! The cluster's one error type: what was being asked of the cluster, over the
//! kube-rs error that says why. The kube-rs error is kept whole as the `source()`
//! (a caller can match on its status), never copied into the message: the chain is
//! printed once, by [`results::causes`].

use std::path::PathBuf;
use std::time::Duration;

/// What `ingressbench cleanup` removes: a namespace a run created, a generator Job.
pub const CLEANUP: &str = "run `ingressbench cleanup --platform kubernetes`";

/// Why the cluster could not do what a run asked.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A request the API server refused, or that did not reach it.
    #[error("kubernetes: {what}")]
    Api {
        /// The request, with the names involved (`create namespace ingressbench-x`).
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The kubeconfig file given could not be read.
    #[error("kubernetes: kubeconfig {}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig names a cluster to talk to.
    #[error("kubernetes: no usable kubeconfig (set KUBECONFIG or --kubeconfig, and --context)")]
    NoConfig {
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A request the API server did not answer in time.
    #[error("kubernetes: {what}: no answer in {} s", waited.as_secs())]
    Timeout { what: String, waited: Duration },
    /// Something the run made is still in the cluster after its end: what it is,
    /// and how to remove it.
    #[error("kubernetes: {what} not deleted ({remedy})")]
    Left {
        /// `namespace ingressbench-x`, `HTTPRoute ib-route in namespace team-a`.
        what: String,
        /// [`CLEANUP`], or what to delete where `ingressbench cleanup` does not.
        remedy: String,
        #[source]
        source: kube::Error,
    },
    /// An object the run made (or names) that the implementation refused or never
    /// made ready: which object, and the condition it reports.
    #[error("kubernetes: {object}: {condition}")]
    Condition { object: String, condition: String },
    /// A manifest of the user's (`kubernetes.manifests`) that cannot be applied:
    /// the file, the line of the object, and why.
    #[error("kubernetes: {file}:{line}: {msg}")]
    Manifest {
        file: String,
        line: usize,
        msg: String,
    },
    /// The route change cannot be expressed by the controller.
    #[error(transparent)]
    Unsupported(#[from] crate::controllers::Unsupported),
    /// The client's runtime could not start.
    #[error("start the Kubernetes client's runtime")]
    Runtime(#[source] std::io::Error),
}

impl ClusterError {
    /// The error of request `what`, for `map_err`.
    pub(crate) fn api(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> ClusterError {
        let what = what.to_string();
        move |source| ClusterError::Api { what, source }
    }

    /// What is left of run `run` in `namespace`. A namespace the run created
    /// (`owned`) goes whole, and `ingressbench cleanup` removes it if it stays; in
    /// one it was given, which cleanup leaves alone, the remedy is the run's label.
    pub(crate) fn left_in(
        what: String,
        namespace: &str,
        run: &str,
        owned: bool,
        source: kube::Error,
    ) -> Self {
        ClusterError::Left {
            what: format!("{what} in namespace {namespace}"),
            remedy: if owned {
                CLEANUP.into()
            } else {
                format!("delete what is labelled {}={run} there", crate::RUN_LABEL)
            },
            source,
        }
    }
}

impl From<ClusterError> for sut::SutError {
    /// Kept whole, so that the kube-rs error stays the cause.
    fn from(e: ClusterError) -> Self {
        sut::SutError::Part(Box::new(e))
    }
}

/// Whether a delete failed only because the object is already gone: not a failure.
pub(crate) fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
