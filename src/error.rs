//! The crate-wide error type. Each module keeps its own precise error enum; this one
//! wraps them so callers handle one type, and its messages go into status and logs as
//! they are (none of them carries Secret data).

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

    #[error(transparent)]
    Source(#[from] crate::source::Error),

    /// Boxed: values errors carry several names and keep the crate's error small.
    #[error(transparent)]
    Values(Box<crate::values::Error>),

    #[error(transparent)]
    Chart(#[from] crate::chart::Error),

    #[error(transparent)]
    Render(#[from] crate::render::Error),

    #[error(transparent)]
    Apply(#[from] crate::apply::Error),

    #[error(transparent)]
    Storage(#[from] crate::release::Error),

    #[error("config tracking: {0}")]
    Tracking(Box<crate::tracking::Error>),

    #[error("{0}")]
    Io(#[from] std::io::Error),

    /// The engine stopped during an action; the revision stays pending for the next one.
    #[error("the engine stopped mid-action; the next engine unlocks the revision and retries")]
    Stopped,
}

impl From<crate::values::Error> for Error {
    fn from(e: crate::values::Error) -> Self {
        Self::Values(Box::new(e))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
