//! `wheelhouse install`: prints everything to run the controller in a cluster.

use clap::{Args, CommandFactory, error::ErrorKind};

use super::{Cli, ClusterArgs};
use crate::frontend::install::{self, InstallOptions};

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The controller image. It must run `wheelhouse` as its entrypoint and have the render
    /// helper `wheelhouse-render` beside it or on its PATH (no image is published yet: name
    /// your own build).
    #[arg(long, value_name = "REF", default_value_t = install::default_image())]
    pub image: String,

    /// Also run a controller for the shard KEY (repeatable): its own Deployment, for the
    /// HelmReleases labelled `sharding.wheelhouse.dev/key: KEY`.
    #[arg(long = "shard", value_name = "KEY", value_parser = install::parse_shard_key)]
    pub shards: Vec<String>,

    /// Multi-tenant lockdown (Flux's flag): every HelmRelease without serviceAccountName
    /// acts as this ServiceAccount of its own namespace. The engine's ServiceAccount then
    /// holds only what the engine needs plus `impersonate` on ServiceAccounts, and the
    /// policy is published for every engine of the cluster, dashboards included.
    #[arg(long, value_name = "NAME", value_parser = super::controller::parse_service_account_name)]
    pub default_service_account: Option<String>,

    /// Refuse targetNamespace, storageNamespace and dependsOn outside a HelmRelease's own
    /// namespace, on every engine of the cluster (Flux's flag).
    #[arg(long)]
    pub no_cross_namespace_refs: bool,

    /// Where the controllers' `/metrics` listens in their pods. Its series name every
    /// release; the NetworkPolicy printed beside lets only namespaces labelled
    /// `wheelhouse.dev/metrics-scraper: "true"` reach it. `127.0.0.1:8080` keeps it in
    /// the pod.
    #[arg(long, value_name = "ADDR", default_value_t = install::default_metrics_addr())]
    pub metrics_addr: std::net::SocketAddr,

    /// Outbound policy (with the lockdown): a network (CIDR) tenants' chart sources,
    /// registries, Git servers and remote kubeconfigs may reach although the lockdown
    /// refuses it by default (loopback, link-local, the cluster's own ranges); repeatable.
    #[arg(long = "allow-network", value_name = "CIDR", value_parser = super::controller::parse_network)]
    pub allow_networks: Vec<ipnet::IpNet>,

    /// Outbound policy: a network (CIDR) no release's source may reach; repeatable.
    #[arg(long = "deny-network", value_name = "CIDR", value_parser = super::controller::parse_network)]
    pub deny_networks: Vec<ipnet::IpNet>,
}

pub fn run(cluster: &ClusterArgs, args: InstallArgs) {
    let usage = |kind, message: String| Cli::command().error(kind, message).exit();
    if cluster.all_namespaces {
        usage(
            ErrorKind::ArgumentConflict,
            "install deploys into one namespace (--namespace), not --all-namespaces".into(),
        );
    }
    let namespace = cluster
        .namespace
        .clone()
        .unwrap_or_else(|| install::DEFAULT_NAMESPACE.to_owned());
    if !install::is_namespace_name(&namespace) {
        usage(
            ErrorKind::ValueValidation,
            format!(
                "{namespace:?} is not a namespace name (lower-case letters, digits and '-', at most 63)"
            ),
        );
    }
    print!(
        "{}",
        install::yaml(&InstallOptions {
            namespace,
            image: args.image,
            shards: args.shards,
            tenancy: crate::cluster::tenancy::Policy {
                default_service_account: args.default_service_account,
                no_cross_namespace_refs: args.no_cross_namespace_refs,
                allowed_networks: args.allow_networks,
                denied_networks: args.deny_networks,
            },
            metrics_addr: args.metrics_addr,
        })
    );
}
