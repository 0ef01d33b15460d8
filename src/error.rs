//! The crate-wide error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),

    #[error("cluster configuration: {0}")]
    InferConfig(#[from] kube::config::InferConfigError),

    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    #[error(
        "the HelmRelease CRD is not installed in this cluster; install it with `wheelhouse crd | kubectl apply -f -`"
    )]
    CrdMissing,

    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
