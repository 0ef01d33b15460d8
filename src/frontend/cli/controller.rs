//! `wheelhouse controller`: the engine without a dashboard, for running in a cluster or
//! beside one. It holds the engine lease while it runs; a second one waits its turn.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{ClusterArgs, RenderArgs};
use crate::cluster::client::{self, Scope};
use crate::engine::Result;
use crate::engine::{self, Connection, EngineConfig, Role};
use crate::telemetry::server::{self, Endpoints};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Namespace of the engine Lease; every wheelhouse of a cluster must use the same one.
    #[arg(long, env = "WHEELHOUSE_LEASE_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,

    /// Directory for downloaded charts (default: the platform cache directory).
    #[arg(long, value_name = "DIR")]
    pub chart_cache: Option<PathBuf>,

    /// Reconcile only the HelmReleases labelled `sharding.wheelhouse.dev/key: KEY`, with
    /// this shard's own Lease (without it: the releases that have no such label).
    #[arg(long, value_name = "KEY", value_parser = parse_shard)]
    pub shard: Option<String>,

    /// Serve Prometheus metrics on this address (`/metrics`), e.g. `0.0.0.0:8080`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Serve `/healthz` and `/readyz` on this address, e.g. `0.0.0.0:8081`.
    #[arg(long, value_name = "ADDR")]
    pub health_addr: Option<SocketAddr>,

    /// Serve the webhook receivers (ConfigMap `wheelhouse-receivers` beside the Lease) on
    /// this address, e.g. `0.0.0.0:9292`: a push to a chart source wakes its releases.
    #[arg(long, env = "WHEELHOUSE_RECEIVER_ADDR", value_name = "ADDR")]
    pub receiver_addr: Option<SocketAddr>,

    /// At most this many charts are rendered at once; further reconciles queue.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub concurrent: usize,

    /// Never cancel a running health-check wait for a newer desired state: waits run to
    /// their timeout (as in Flux and Helm), for comparison.
    #[arg(long)]
    pub no_cancel_on_new_revision: bool,

    /// Tenancy lockdown (Flux's flag): a HelmRelease without spec.serviceAccountName acts
    /// as this ServiceAccount of its own namespace, by impersonation. The cluster's
    /// published policy (`wheelhouse install --default-service-account`) applies too.
    #[arg(long, env = "WHEELHOUSE_DEFAULT_SERVICE_ACCOUNT", value_name = "NAME", value_parser = parse_service_account_name)]
    pub default_service_account: Option<String>,

    /// Refuse spec.targetNamespace, spec.storageNamespace and dependsOn outside the
    /// HelmRelease's own namespace (Flux's flag).
    #[arg(long, env = "WHEELHOUSE_NO_CROSS_NAMESPACE_REFS")]
    pub no_cross_namespace_refs: bool,

    /// Outbound policy (with the lockdown): a network (CIDR) tenants' chart sources,
    /// registries, Git servers and remote kubeconfigs may reach although the lockdown
    /// refuses it by default (loopback, link-local, the cluster's own ranges); repeatable.
    #[arg(long = "allow-network", value_name = "CIDR", value_parser = parse_network)]
    pub allow_networks: Vec<ipnet::IpNet>,

    /// Outbound policy: a network (CIDR) no release's source may reach; repeatable.
    #[arg(long = "deny-network", value_name = "CIDR", value_parser = parse_network)]
    pub deny_networks: Vec<ipnet::IpNet>,

    /// Let a release's kubeConfig Secret run the `exec` credential plugin it names, a
    /// program on this machine (Flux's flag). Off: such a kubeconfig is refused.
    #[arg(long, env = "WHEELHOUSE_INSECURE_KUBECONFIG_EXEC")]
    pub insecure_kubeconfig_exec: bool,

    /// Let a release's kubeConfig Secret turn off TLS verification with
    /// insecure-skip-tls-verify (Flux's flag). Off: such a kubeconfig is refused.
    #[arg(long, env = "WHEELHOUSE_INSECURE_KUBECONFIG_TLS")]
    pub insecure_kubeconfig_tls: bool,
}

pub(super) fn parse_network(text: &str) -> std::result::Result<ipnet::IpNet, String> {
    match crate::cluster::egress::parse_networks(text)?.as_slice() {
        [one] => Ok(*one),
        _ => Err(format!("{text:?}: one network (CIDR) per flag")),
    }
}

pub(super) fn parse_service_account_name(name: &str) -> std::result::Result<String, String> {
    if crate::cluster::tenancy::is_dns_subdomain(name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "{name:?} is not a ServiceAccount name (a DNS-1123 subdomain)"
        ))
    }
}

pub async fn run(cluster: &ClusterArgs, render: &RenderArgs, args: ControllerArgs) -> Result<()> {
    let target = cluster.target();
    let (client, default_ns) = client::connect(&target).await?;
    // Like Flux controllers, the headless engine watches every namespace unless told not to.
    let scope = if target.namespace.is_some() {
        Scope::of(&target, default_ns)
    } else {
        Scope::All
    };
    let mut config = EngineConfig::new(scope);
    config.coverage.shard = args.shard;
    config.lease_namespace = args.lease_namespace;
    // Rendering talks to the same cluster, as the same identity (in a pod: its
    // ServiceAccount, through the in-cluster configuration).
    let context =
        client::selected_context(cluster.kubeconfig.as_deref(), cluster.context.as_deref());
    config.renderer = render
        .choice()
        .renderer(cluster.kubeconfig.as_deref(), context.as_deref());
    if let Some(dir) = args.chart_cache {
        config.chart_cache = dir;
    }
    config.chart_root = cluster.chart_root.clone();
    config.cancel_on_new_revision = !args.no_cancel_on_new_revision;
    config.concurrent = args.concurrent;
    config.kubeconfig_allowances = crate::cluster::remote::Allowances {
        exec: args.insecure_kubeconfig_exec,
        insecure_tls: args.insecure_kubeconfig_tls,
    };
    config.tenancy = crate::cluster::tenancy::Policy {
        default_service_account: args.default_service_account,
        no_cross_namespace_refs: args.no_cross_namespace_refs,
        allowed_networks: args.allow_networks,
        denied_networks: args.deny_networks,
    };
    tracing::info!(identity = %config.identity, coverage = %config.coverage, lease_namespace = %config.lease_namespace, "starting engine");
    // A controller that cannot render charts is of no use: say how to fix it and stop,
    // as a misconfigured controller should (its pod restarts with the message in its log).
    if let Err(e) = config.renderer.check().await {
        return Err(crate::engine::Error::Render(e));
    }
    let metrics = config.metrics.clone();
    let lease_namespace = config.lease_namespace.clone();
    let handle = engine::start(client.clone(), config)?;
    let servers = CancellationToken::new();
    if let Some(addr) = args.receiver_addr {
        let bound = crate::webhooks::receive::serve(
            addr,
            client,
            lease_namespace,
            std::sync::Arc::new(handle.pusher()),
            metrics.clone(),
            servers.clone(),
        )
        .await?;
        tracing::info!(%bound, "serving webhook receivers on /hook/");
    }
    if let Some(addr) = args.metrics_addr {
        let bound = server::serve(addr, Endpoints::Metrics(metrics), servers.clone()).await?;
        tracing::info!(%bound, "serving metrics on /metrics");
    }
    if let Some(addr) = args.health_addr {
        let (role, connection) = (handle.role(), handle.connection());
        let ready: server::Readiness = Arc::new(move || {
            if let Connection::Disconnected { since, error } = &*connection.borrow() {
                return Err(format!(
                    "the API server does not answer since {since}: {error}"
                ));
            }
            match &*role.borrow() {
                Role::Unable { reason } => Err(reason.clone()),
                Role::Unknown => Err("the engine lease is not decided yet".into()),
                Role::Leader | Role::Follower { .. } => Ok(()),
            }
        });
        let bound = server::serve(addr, Endpoints::Health(ready), servers.clone()).await?;
        tracing::info!(%bound, "serving /healthz and /readyz");
    }

    let mut role = handle.role();
    let roles = tokio::spawn(async move {
        while role.changed().await.is_ok() {
            match &*role.borrow() {
                Role::Leader => tracing::info!("engine lease acquired: reconciling"),
                Role::Follower { holder } => {
                    tracing::info!(%holder, "another engine covers these releases: standing by")
                }
                Role::Unable { .. } | Role::Unknown => {}
            }
        }
    });

    shutdown_signal().await;
    tracing::info!(
        "shutting down: finishing running actions' current step and releasing the lease"
    );
    handle.shutdown();
    // The engine hands the lease back once its workers have finished their current step
    // (bounded by the engine's own grace period, below Kubernetes' 30 s); exiting before
    // the release call returned would cut it short.
    let _ = tokio::time::timeout(Duration::from_secs(25), handle.stopped()).await;
    tracing::info!("stopped");
    roles.abort();
    servers.cancel();
    Ok(())
}

fn parse_shard(key: &str) -> std::result::Result<String, String> {
    engine::validate_shard(key).map(|()| key.to_owned())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
