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

    /// What the dashboard's engine reconciles: `cluster` (every namespace its identity may
    /// watch, the default) or `namespace` (the namespace shown, -n, as a namespace engine:
    /// its Lease in that namespace, deferring to a cluster-wide engine; the table then
    /// shows that namespace).
    #[arg(long, global = true, value_enum, default_value = "cluster")]
    pub engine_scope: EngineScope,

    /// Namespace of the engine Lease (every wheelhouse of a cluster must agree on it).
    #[arg(long, global = true, hide = true, env = "WHEELHOUSE_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// In a fleet (--contexts, --all-contexts, `fleet:` in config.yaml): the contexts
    /// this dashboard runs its engine for (default: the current context only). The
    /// others' tables are live, and this dashboard never reconciles their releases.
    #[arg(long, global = true, value_name = "CONTEXT,...", value_delimiter = ',', num_args = 1..)]
    pub engine: Vec<String>,

    /// Serve the webhook receivers (ConfigMap `wheelhouse-receivers` beside the Lease) on
    /// this address while the dashboard's engine runs, e.g. 127.0.0.1:9292.
    #[arg(long = "receiver-addr", value_name = "ADDR")]
    pub dashboard_receiver_addr: Option<std::net::SocketAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineScope {
    Cluster,
    Namespace,
}

pub async fn run(cluster: &ClusterArgs, render: &RenderArgs, args: &DashboardArgs) -> Result<()> {
    let mut target = cluster.target();
    let mut fleet = Vec::new();
    let mut engine = true;
    let mut engine_contexts = Vec::new();
    // The fleet of the flags, else the config file's `fleet:` (unless --context names one).
    let selection = cluster.fleet().or_else(|| {
        let config = tui::theme::config_dir()
            .and_then(|dir| tui::theme::Config::load(&dir).ok())
            .unwrap_or_default();
        config
            .fleet
            .filter(|f| !f.is_empty() && cluster.context.is_none())
            .map(crate::cluster::fleet::Selection::Named)
    });
    if let Some(selection) = selection {
        let kubeconfig = target.kubeconfig.as_deref();
        let contexts = crate::cluster::fleet::resolve(kubeconfig, &selection)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // The dashboard's own cluster: the current context when it is one of them.
        let home = crate::cluster::fleet::current_context(kubeconfig)
            .filter(|c| contexts.contains(c))
            .unwrap_or_else(|| contexts[0].clone());
        for name in &args.engine {
            if !contexts.contains(name) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "--engine {name}: not one of the fleet's contexts ({})",
                        contexts.join(", ")
                    ),
                )
                .into());
            }
        }
        if !args.engine.is_empty() {
            engine = args.engine.contains(&home);
            engine_contexts = args
                .engine
                .iter()
                .filter(|c| **c != home)
                .cloned()
                .collect();
        }
        fleet = contexts.into_iter().filter(|c| *c != home).collect();
        target.context = Some(home);
    }
    let options = tui::Options {
        cluster: target,
        chart_root: cluster.chart_root.clone(),
        render: render.choice(),
        readonly: args.readonly,
        theme: args.theme.clone(),
        lease_namespace: args.lease_namespace.clone(),
        namespace_engine: args.engine_scope == EngineScope::Namespace,
        receiver_addr: args.dashboard_receiver_addr,
        engine,
        fleet,
        engine_contexts,
    };
    tui::run(options)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()).into())
}
