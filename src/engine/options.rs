//! What an engine is started with.

use std::path::PathBuf;
use std::sync::Arc;

use super::coverage::Coverage;
use super::lease;
use crate::cluster::client::Scope;
use crate::helm::render::Renderer;

pub struct EngineConfig {
    /// Which HelmReleases the engine reconciles while it holds its Lease. The views show
    /// every release of `coverage.scope`, whichever shard it belongs to (a sharded engine
    /// lists only its shard, to keep its memory to its own releases).
    pub coverage: Coverage,
    /// Namespace of the cluster-wide engines' Leases; every wheelhouse of a cluster must
    /// agree on it. A namespace engine's Lease lives in its own namespace.
    pub lease_namespace: String,
    pub identity: String,
    pub chart_cache: PathBuf,
    /// What a relative `chart.path` is relative to (none: relative paths are refused).
    pub chart_root: Option<PathBuf>,
    pub renderer: Arc<dyn Renderer>,
    /// Observe only: never take the lease (e.g. `--readonly`).
    pub passive: bool,
    /// Cancel a running health-check wait as soon as a newer desired state is ready to
    /// apply (per release: `healthCheck.cancelOnNewRevision`). Off restores
    /// wait-until-timeout everywhere, for comparison.
    pub cancel_on_new_revision: bool,
    /// How often a running wait asks a chart repository for a newer matching version.
    pub chart_poll: std::time::Duration,
    /// At most this many renders (helm processes) at once; the rest queue.
    pub concurrent: usize,
    pub metrics: crate::telemetry::Metrics,
    /// The tenancy rules this engine was started with (`--default-service-account`,
    /// `--no-cross-namespace-refs`); the cluster's published policy tightens them.
    pub tenancy: crate::cluster::tenancy::Policy,
    /// What a release's kubeConfig Secret may hold beyond the default.
    pub kubeconfig_allowances: crate::cluster::remote::Allowances,
    /// Work that can wait for it waits until this is true: taking the Lease (and with it
    /// every worker's first reconcile and the config tracker's lists) and the lists of
    /// Helm's records and the workloads. The views' HelmRelease watch starts at once. The
    /// dashboard opens it once its first screen is whole (docs/user-guide/dashboard.md,
    /// "Starting"): on two cores its engine's start-up held the table back by seconds.
    pub start_after: Option<tokio::sync::watch::Receiver<bool>>,
}

impl EngineConfig {
    /// Defaults: unsharded, lease in `default`, chart cache in the platform cache
    /// directory, helm from $WHEELHOUSE_HELM or PATH with its default cluster access.
    pub fn new(scope: Scope) -> Self {
        let cache = directories::ProjectDirs::from("dev", "wheelhouse", "wheelhouse").map_or_else(
            || std::env::temp_dir().join("wheelhouse"),
            |d| d.cache_dir().to_path_buf(),
        );
        Self {
            coverage: Coverage::new(scope, None),
            lease_namespace: "default".into(),
            identity: lease::identity(),
            chart_cache: cache.join("charts"),
            chart_root: std::env::var_os("WHEELHOUSE_CHART_ROOT").map(PathBuf::from),
            renderer: crate::helm::render::Choice::from_env().renderer(None, None),
            passive: false,
            cancel_on_new_revision: true,
            chart_poll: std::time::Duration::from_secs(15),
            concurrent: 4,
            metrics: crate::telemetry::Metrics::new(),
            tenancy: crate::cluster::tenancy::Policy::default(),
            kubeconfig_allowances: Default::default(),
            start_after: None,
        }
    }
}
