//! Command-line interface: flags shared by every front end, and the subcommands.

mod controller;
mod dashboard;
mod list;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::{Result, api, client};

#[derive(Debug, Parser)]
#[command(
    name = "wheelhouse",
    version,
    about = "Terminal dashboard and reconcile engine for Helm releases (HelmRelease, wheelhouse.dev/v1alpha1)",
    long_about = None,
)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub dashboard: dashboard::DashboardArgs,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Which cluster and namespaces to talk to; the same flags as kubectl and k9s.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, env = "KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use (default: the current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,

    /// Namespace to show (default: the context's namespace).
    #[arg(
        short,
        long,
        global = true,
        value_name = "NAME",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,

    /// Show HelmReleases in every namespace.
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the HelmRelease CustomResourceDefinition (apply it with `kubectl apply -f -`).
    Crd,
    /// List HelmReleases with their readiness, like `kubectl get helmreleases`.
    List,
    /// Run the reconcile engine headless until SIGINT/SIGTERM (structured logs on stderr).
    Controller(controller::ControllerArgs),
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Crd) => {
            print!("{}", api::crd_yaml());
            Ok(())
        }
        Some(Command::Controller(args)) => controller::run(&cli.cluster, args).await,
        None => dashboard::run(&cli.cluster, &cli.dashboard).await,
        Some(Command::List) => {
            let (client, default_ns) = client::connect(&cli.cluster).await?;
            let scope = client::Scope::from_args(&cli.cluster, default_ns);
            list::print(client, &scope, &mut std::io::stdout()).await
        }
    }
}
