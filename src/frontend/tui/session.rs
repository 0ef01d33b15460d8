//! One connection of the dashboard: a client for a context, the engine (or a passive
//! engine, which only watches) on it, the READY column's replica watch and the other kinds'
//! inventory, started in the order the first screen needs them. The dashboard's own
//! cluster has one; in a fleet, so has every other cluster (`fleet.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::cluster::client::{self, Scope, Target};
use crate::engine::{self, EngineConfig, EngineHandle};
use crate::frontend::inventory::Inventory;
use crate::health::replicas::Replicas;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Theme(String),
    #[error("cannot connect to the cluster: {0}")]
    Connect(String),
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// What `wheelhouse` (no subcommand) was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub cluster: Target,
    /// What a relative `chart.path` is relative to (the engine's `chart_root`).
    pub chart_root: Option<PathBuf>,
    /// What renders charts for the engine.
    pub render: crate::helm::render::Choice,
    pub readonly: bool,
    pub theme: Option<String>,
    /// Namespace of the engine Lease (default: `default`, as every wheelhouse).
    pub lease_namespace: Option<String>,
    /// Whether the engine covers the namespace shown only (`--engine-scope namespace`),
    /// else every namespace its identity may watch.
    pub namespace_engine: bool,
    /// Where the in-process engine serves webhook receivers (none: it does not).
    pub receiver_addr: Option<std::net::SocketAddr>,
    /// Whether this session runs the in-process engine (else a passive one, which only
    /// watches and never takes a Lease). True for the dashboard's own cluster unless a
    /// fleet's `--engine` leaves it out.
    pub engine: bool,
    /// A fleet's other clusters (kubeconfig contexts), each shown beside this one.
    pub fleet: Vec<String>,
    /// Which of `fleet` this dashboard runs an engine for (`--engine`).
    pub engine_contexts: Vec<String>,
}

/// The table first: the in-process engine takes its Lease and lists Helm's records and the
/// workloads, and the READY column's workload watch starts, once the dashboard's first
/// screen is whole (its wheelhouse releases and Helm's records listed, and Flux's
/// HelmReleases, or a little later on a cluster without Flux), and at the latest
/// [`ENGINE_START_AT_MOST`] after it started.
async fn open_when_listed(
    mut views: tokio::sync::watch::Receiver<Arc<crate::engine::Views>>,
    mut others: tokio::sync::watch::Receiver<Arc<crate::frontend::inventory::Others>>,
    open: tokio::sync::watch::Sender<bool>,
) {
    let listed = async {
        let _ = views.wait_for(|v| v.listed).await;
        let _ = others.wait_for(|o| o.helm_listed).await;
        // Without Flux's CRDs its watch never lists.
        let _ = tokio::time::timeout(FLUX_LIST_GRACE, others.wait_for(|o| o.flux_listed)).await;
    };
    if tokio::time::timeout(ENGINE_START_AT_MOST, listed)
        .await
        .is_err()
    {
        tracing::debug!("the first screen is not whole yet: the engine starts anyway");
    } else {
        tracing::debug!("the first screen is whole: the engine starts");
    }
    open.send_replace(true);
}

/// See [`open_when_listed`].
const ENGINE_START_AT_MOST: Duration = Duration::from_secs(10);
const FLUX_LIST_GRACE: Duration = Duration::from_secs(2);

/// One connection: a client for a context and the engine (or engine client) on it.
pub struct Session {
    pub client: Client,
    /// How this session connected (kubeconfig and context), for helm to do the same.
    pub context: String,
    pub scope: Scope,
    pub handle: EngineHandle,
    /// Replica counts of the workloads in the engine's namespaces (READY column).
    pub replicas: Replicas,
    /// Flux HelmReleases and stored Helm releases in the same namespaces.
    pub inventory: Inventory,
    /// Stops this session's webhook receivers (when it serves them).
    pub receivers: CancellationToken,
}

impl Session {
    pub async fn connect(
        opts: &Options,
        context: Option<String>,
        scope: Option<Scope>,
        previous: Option<(EngineHandle, CancellationToken)>,
    ) -> Result<Self, Error> {
        let mut args = opts.cluster.clone();
        args.context = context;
        let (client, default_ns) = client::connect(&args).await.map_err(|e| {
            let home_config = std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".kube/config"))
                .is_some_and(|p| p.is_file());
            let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
            if args.kubeconfig.is_none() && !home_config && !in_cluster {
                Error::Connect(format!(
                    "no kubeconfig found ($KUBECONFIG and ~/.kube/config are not set): pass \
                     --kubeconfig, or run tests/run.sh to use the project's local control plane ({e})"
                ))
            } else {
                Error::Connect(e.to_string())
            }
        })?;
        let view = scope.unwrap_or_else(|| Scope::of(&args, default_ns.clone()));
        let coverage = engine_coverage(opts, &client, &view, &default_ns).await;
        // A view the engine's watch cannot show falls back to the engine's namespace.
        let scope = match (&coverage, view) {
            (Scope::Namespace(ns), Scope::All) => Scope::Namespace(ns.clone()),
            (_, view) => view,
        };
        let name = args
            .context
            .clone()
            .unwrap_or_else(|| current_context(&args));
        // Connected: now the old engine may go (it hands back the lease first), and its
        // receivers' address with it.
        if let Some((previous, receivers)) = previous {
            receivers.cancel();
            stop(&previous).await;
        }
        Self::start(opts, &args, client, name, scope, coverage).await
    }

    pub async fn start(
        opts: &Options,
        args: &Target,
        client: Client,
        context: String,
        scope: Scope,
        coverage: Scope,
    ) -> Result<Self, Error> {
        // The table first (see `open_when_listed`): the in-process engine's start-up and
        // the READY column's workload list wait for it.
        let (first_screen, listed) = tokio::sync::watch::channel(false);
        let replicas = Replicas::start_after(client.clone(), &coverage, Some(listed.clone()));
        let inventory =
            Inventory::start_reading_after(client.clone(), &coverage, Some(listed.clone()));
        let mut config = EngineConfig::new(coverage);
        config.chart_root = opts.chart_root.clone();
        // Rendering talks to the same cluster, as the same identity.
        let selected =
            client::selected_context(args.kubeconfig.as_deref(), args.context.as_deref());
        config.renderer = opts
            .render
            .renderer(args.kubeconfig.as_deref(), selected.as_deref());
        config.passive = opts.readonly || !opts.engine;
        config.metrics = crate::telemetry::Metrics::unscraped();
        if let Some(ns) = &opts.lease_namespace {
            config.lease_namespace = ns.clone();
        }
        let (metrics, lease_namespace) = (config.metrics.clone(), config.lease_namespace.clone());
        config.start_after = Some(listed);
        let handle =
            engine::start(client.clone(), config).map_err(|e| Error::Connect(e.to_string()))?;
        tokio::spawn(open_when_listed(
            handle.views(),
            inventory.subscribe(),
            first_screen,
        ));
        let receivers = CancellationToken::new();
        if let Some(addr) = opts.receiver_addr {
            // A previous session's server lets the address go as its task ends.
            let mut tries = 0;
            loop {
                match crate::webhooks::receive::serve(
                    addr,
                    client.clone(),
                    lease_namespace.clone(),
                    std::sync::Arc::new(handle.pusher()),
                    metrics.clone(),
                    receivers.clone(),
                )
                .await
                {
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 40 => {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => {
                        handle.shutdown();
                        return Err(Error::Connect(format!(
                            "cannot serve webhook receivers on {addr}: {e}"
                        )));
                    }
                }
            }
        }
        Ok(Self {
            client,
            context,
            scope,
            handle,
            replicas,
            inventory,
            receivers,
        })
    }
}

fn current_context(args: &Target) -> String {
    let kubeconfig = match &args.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path).ok(),
        None => kube::config::Kubeconfig::read().ok(),
    };
    kubeconfig
        .and_then(|k| k.current_context)
        .unwrap_or_else(|| "in-cluster".into())
}

/// Stops the engine and gives it a moment to hand back the lease, so the next wheelhouse
/// takes over at once instead of after the lease expires. The lease task drops the role
/// sender when it is done.
pub async fn stop(handle: &EngineHandle) {
    handle.shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(3), handle.stopped()).await;
}

/// [`client::engine_scope`] within a few seconds: a server that does not answer its
/// access review gets the namespace in view (its watches then say it does not answer),
/// so one silent cluster never holds a dashboard's start.
/// What this session's engine covers: the view's namespace when asked
/// (`--engine-scope namespace`), else what its identity may watch.
pub async fn engine_coverage(
    opts: &Options,
    client: &Client,
    view: &Scope,
    default_ns: &str,
) -> Scope {
    if opts.namespace_engine {
        return match view {
            Scope::Namespace(ns) => Scope::Namespace(ns.clone()),
            Scope::All => Scope::Namespace(default_ns.to_owned()),
        };
    }
    bounded_engine_scope(client, view, default_ns).await
}

async fn bounded_engine_scope(client: &Client, view: &Scope, default_ns: &str) -> Scope {
    const WITHIN: Duration = Duration::from_secs(5);
    match tokio::time::timeout(WITHIN, client::engine_scope(client, view, default_ns)).await {
        Ok(scope) => scope,
        Err(_) => match view {
            Scope::Namespace(ns) => Scope::Namespace(ns.clone()),
            Scope::All => Scope::Namespace(default_ns.to_owned()),
        },
    }
}
