//! `wheelhouse` with no subcommand: the dashboard on the current kubeconfig context.

use clap::Args;

use super::{ClusterArgs, RenderArgs};
use crate::engine::Result;
use crate::frontend::tui;

/// Dashboard flags (global, so they may come before or after a subcommand name).
#[derive(Debug, Clone, Args)]
pub struct DashboardArgs {
    /// Observe only: never take the engine lease and refuse every write.
    #[arg(long, global = true)]
    pub readonly: bool,

    /// Theme name (dark, light, high-contrast, colorblind, or a user theme) or a theme file.
    #[arg(
        long,
        global = true,
        env = "WHEELHOUSE_THEME",
        value_name = "NAME|PATH"
    )]
    pub theme: Option<String>,

    /// Namespace of the engine Lease (every wheelhouse of a cluster must agree on it).
    #[arg(long, global = true, hide = true, env = "WHEELHOUSE_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// Serve the webhook receivers (ConfigMap `wheelhouse-receivers` beside the Lease) on
    /// this address while the dashboard's engine runs, e.g. 127.0.0.1:9292.
    #[arg(long = "receiver-addr", value_name = "ADDR")]
    pub dashboard_receiver_addr: Option<std::net::SocketAddr>,
}

pub async fn run(cluster: &ClusterArgs, render: &RenderArgs, args: &DashboardArgs) -> Result<()> {
    let options = tui::Options {
        cluster: cluster.target(),
        chart_root: cluster.chart_root.clone(),
        render: render.choice(),
        readonly: args.readonly,
        theme: args.theme.clone(),
        lease_namespace: args.lease_namespace.clone(),
        receiver_addr: args.dashboard_receiver_addr,
    };
    tui::run(options)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()).into())
}
