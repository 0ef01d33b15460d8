//! Command-line interface: flags shared by every front end, and the subcommands.

mod controller;
mod dashboard;
mod freeze;
mod install;
pub mod list;
mod migrate;
mod timeline;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::api;
use crate::cluster::client;
use crate::engine::Result;
use crate::helm::render;

#[derive(Debug, Parser)]
#[command(
    name = "wheelhouse",
    version,
    about = "Terminal dashboard and reconcile engine for Helm releases (HelmRelease, wheelhouse.dev/v1alpha1)",
    long_about = None,
    after_help = EXAMPLES,
)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub dashboard: dashboard::DashboardArgs,

    #[command(flatten)]
    pub render: RenderArgs,

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
    #[arg(long, global = true, value_name = "NAME", conflicts_with_all = ["contexts", "all_contexts"])]
    pub context: Option<String>,

    /// A fleet: these kubeconfig contexts at once, each with its own credentials (the
    /// dashboard's table, `list` and `timeline` name each row's cluster).
    #[arg(
        long,
        global = true,
        value_name = "NAME,...",
        value_delimiter = ',',
        num_args = 1..,
        conflicts_with = "all_contexts"
    )]
    pub contexts: Vec<String>,

    /// A fleet of every context of the kubeconfig (see --contexts).
    #[arg(long, global = true)]
    pub all_contexts: bool,

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

    /// What a relative `chart.path` is relative to; give every engine of a cluster the
    /// same one (without it, relative paths are refused, never resolved against the
    /// working directory).
    #[arg(long, global = true, env = "WHEELHOUSE_CHART_ROOT", value_name = "DIR")]
    pub chart_root: Option<PathBuf>,
}

/// How charts are rendered, by the engine of the dashboard and of `wheelhouse controller`.
#[derive(Debug, Clone, Args)]
pub struct RenderArgs {
    /// What renders charts: `helper`, wheelhouse's long-lived render helper on Helm's
    /// Go SDK, or `helm`, the helm CLI started for every render (slower; a fallback).
    #[arg(
        long,
        global = true,
        env = "WHEELHOUSE_RENDERER",
        value_enum,
        default_value = "helper"
    )]
    pub renderer: render::Kind,

    /// The render helper (default: $WHEELHOUSE_RENDER_HELPER, then wheelhouse-render
    /// beside this executable, then on PATH).
    #[arg(
        long,
        global = true,
        env = "WHEELHOUSE_RENDER_HELPER",
        value_name = "PATH"
    )]
    pub render_helper: Option<PathBuf>,

    /// The helm binary of `--renderer helm` (default: $WHEELHOUSE_HELM, then `helm` on
    /// PATH).
    #[arg(long, global = true, env = "WHEELHOUSE_HELM", value_name = "PATH")]
    pub helm: Option<PathBuf>,

    /// How long one render may take before its renderer is given up (a helper then
    /// replaced, the render tried again on a new one), e.g. `60s`.
    #[arg(
        long,
        global = true,
        env = "WHEELHOUSE_RENDER_TIMEOUT",
        value_name = "DURATION",
        default_value = "60s"
    )]
    pub render_timeout: api::Duration,
}

impl RenderArgs {
    pub fn choice(&self) -> render::Choice {
        render::Choice {
            kind: self.renderer,
            helper: self.render_helper.clone(),
            helm: self.helm.clone(),
            timeout: Some(self.render_timeout.as_std()),
        }
    }
}

impl ClusterArgs {
    /// The fleet these flags ask for (`--contexts`, `--all-contexts`), if any.
    pub fn fleet(&self) -> Option<crate::cluster::fleet::Selection> {
        use crate::cluster::fleet::Selection;
        if self.all_contexts {
            Some(Selection::All)
        } else if !self.contexts.is_empty() {
            Some(Selection::Named(self.contexts.clone()))
        } else {
            None
        }
    }

    /// The cluster and namespaces these flags choose, as [`client::connect`] takes them.
    pub fn target(&self) -> client::Target {
        client::Target {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace: self.namespace.clone(),
            all_namespaces: self.all_namespaces,
        }
    }
}

/// The common tasks, as `wheelhouse --help` ends.
const EXAMPLES: &str = "\
Examples:
  wheelhouse                                  the dashboard, on the current kubeconfig context
  wheelhouse -A                               the dashboard over every namespace
  wheelhouse --context prod -n payments       another context and namespace
  wheelhouse --readonly                       look, never write (no engine lease taken)
  wheelhouse list -A                          HelmReleases with readiness, in a table
  wheelhouse --contexts prod-eu,prod-us -A    the fleet on one screen: every context's releases
  wheelhouse crd | kubectl apply --server-side -f -
                                              install or update the CRD
  wheelhouse install --image REG/wheelhouse:TAG | kubectl apply -f -
                                              run the controller in the cluster
  wheelhouse migrate apps/podinfo             a Flux HelmRelease as a wheelhouse one (printed)
  wheelhouse migrate apps/podinfo --apply     ... and hand the release over
  wheelhouse timeline -A --since 1h           what changed in the last hour
  wheelhouse freeze -n apps --for 2h --reason INC-1
                                              suspend every release of apps, with who and why
  wheelhouse thaw -n apps                     resume what that freeze suspended
  wheelhouse completion bash > ~/.local/share/bash-completion/completions/wheelhouse";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the HelmRelease CustomResourceDefinition (apply it with `kubectl apply -f -`).
    Crd,
    /// List Helm releases (wheelhouse's, Flux's and the helm CLI's) with their readiness;
    /// across a fleet with --contexts / --all-contexts
    #[command(after_help = "Examples:
  wheelhouse list -A                             every namespace of the current context
  wheelhouse list -A --contexts prod-eu,prod-us -o wide
  wheelhouse list -A --all-contexts -o json      each row names its cluster")]
    List(list::ListArgs),
    /// Run the reconcile engine headless until SIGINT/SIGTERM (structured logs on stderr).
    #[command(after_help = "Examples:
  wheelhouse controller -A --metrics-addr 0.0.0.0:8080 --health-addr 0.0.0.0:8081
  wheelhouse controller -n apps                 one namespace, the current context
  wheelhouse controller -A --shard team-a       the HelmReleases labelled sharding.wheelhouse.dev/key: team-a")]
    Controller(controller::ControllerArgs),
    /// Print least-privilege RBAC for `wheelhouse controller`; `-n NS` scopes it to one
    /// namespace (apply it with `kubectl apply -f -`)
    Rbac(RbacArgs),
    /// Print everything to run the controller in a cluster: CRD, namespace (`-n`, default
    /// wheelhouse-system), ServiceAccount and RBAC, Deployments, metrics Service (apply it
    /// with `kubectl apply -f -`)
    Install(install::InstallArgs),
    /// Turn a Flux HelmRelease (helm.toolkit.fluxcd.io/v2) into a wheelhouse one that
    /// continues the same Helm release: print it, or hand the release over with --apply
    #[command(after_help = "Examples:
  wheelhouse migrate apps/podinfo                print the wheelhouse HelmRelease, and what is not carried
  wheelhouse migrate apps/podinfo --apply        dry-run it, suspend the Flux one, apply ours")]
    Migrate(migrate::MigrateArgs),
    /// What changed: every change to any Helm release in scope (wheelhouse's, Flux's, the
    /// helm CLI's), newest first, with who made it
    #[command(after_help = "Examples:
  wheelhouse timeline -A                         the last hour, every namespace
  wheelhouse timeline --since 10m -o markdown    for a postmortem
  wheelhouse timeline -n apps -o json            for a script")]
    Timeline(timeline::TimelineArgs),
    /// Incident freeze: suspend every matching release of every kind (wheelhouse, Flux),
    /// recording on each who froze it, why, until when and whether it was suspended before
    #[command(after_help = "Examples:
  wheelhouse freeze -n payments --for 2h --reason 'INC-4211: bad rollout'
  wheelhouse freeze -A -l team=checkout --for 30m --reason 'INC-4211' -o json
  wheelhouse freeze -n apps web worker --for 1h --reason 'db migration' --until-thawed")]
    Freeze(freeze::FreezeArgs),
    /// End a freeze: resume exactly the releases it suspended (never one suspended before
    /// it, or suspended again since by someone else) and take its record off
    #[command(after_help = "Examples:
  wheelhouse thaw -n payments
  wheelhouse thaw -A -o json")]
    Thaw(freeze::Selected),
    /// Print the shell completion script (e.g. `wheelhouse completion bash >
    /// ~/.local/share/bash-completion/completions/wheelhouse`)
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print wheelhouse's version and commit, the Helm its render helper is built on, and
    /// the Kubernetes version it is tested against
    Version,
}

/// The Kubernetes version the test suite's control plane runs (tests/cluster/versions.env).
fn tested_kubernetes() -> &'static str {
    include_str!("../../../tests/cluster/versions.env")
        .lines()
        .find_map(|l| l.strip_prefix("KUBERNETES_VERSION="))
        .unwrap_or("unknown")
}

/// `wheelhouse version`: what this build is and what it renders with.
async fn print_version(render: &RenderArgs) {
    println!(
        "wheelhouse {} (commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("WHEELHOUSE_COMMIT")
    );
    let renderer = render.choice().renderer(None, None);
    match renderer.check().await {
        Ok(what) => println!("renderer: {what}"),
        Err(e) => println!("renderer: unavailable: {e}"),
    }
    println!(
        "Kubernetes: tested against {} (the API server of its test suite)",
        tested_kubernetes()
    );
}

#[derive(Debug, Args)]
pub struct RbacArgs {
    /// The engine's ServiceAccount, as NAMESPACE/NAME.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        default_value = "wheelhouse-system/wheelhouse",
        value_parser = parse_service_account
    )]
    pub service_account: (String, String),

    /// Namespace of the engine Lease: the controller's --lease-namespace.
    #[arg(long, env = "WHEELHOUSE_LEASE_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,

    /// Existing ClusterRole bound for what the charts create. `admin` covers namespaced
    /// objects; charts with CRDs or cluster-scoped objects need a wider one.
    #[arg(
        long,
        value_name = "CLUSTERROLE",
        default_value = "admin",
        conflicts_with = "multi_tenant"
    )]
    pub release_role: String,

    /// No grant for release contents: every release acts as a ServiceAccount of its own
    /// namespace (serviceAccountName, or the cluster's --default-service-account), which
    /// the engine may impersonate; the engine writes no Secrets of its own.
    #[arg(long)]
    pub multi_tenant: bool,
}

fn parse_service_account(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(format!("expected NAMESPACE/NAME, got {s:?}")),
    }
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Crd) => {
            print!("{}", api::crd_yaml());
            Ok(())
        }
        Some(Command::Controller(args)) => controller::run(&cli.cluster, &cli.render, args).await,
        Some(Command::Rbac(args)) => {
            let (service_account_namespace, service_account) = args.service_account;
            // Like the controller: every namespace unless one is named.
            let scope = match &cli.cluster.namespace {
                Some(ns) => client::Scope::Namespace(ns.clone()),
                None => client::Scope::All,
            };
            print!(
                "{}",
                crate::cluster::rbac::yaml(&crate::cluster::rbac::RbacOptions {
                    scope,
                    service_account_namespace,
                    service_account,
                    lease_namespace: args.lease_namespace,
                    release_role: (!args.multi_tenant).then_some(args.release_role),
                })
            );
            Ok(())
        }
        Some(Command::Install(args)) => {
            install::run(&cli.cluster, args);
            Ok(())
        }
        Some(Command::Migrate(args)) => migrate::run(&cli.cluster, args).await,
        Some(Command::Timeline(args)) => timeline::run(&cli.cluster, &args).await,
        Some(Command::Freeze(args)) => freeze::run_freeze(&cli.cluster, &args).await,
        Some(Command::Thaw(args)) => freeze::run_thaw(&cli.cluster, &args).await,
        Some(Command::Completion { shell }) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "wheelhouse", &mut script);
            // A reader that stops early (`| head`) is not an error.
            match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(()),
            }
        }
        Some(Command::Version) => {
            print_version(&cli.render).await;
            Ok(())
        }
        None => dashboard::run(&cli.cluster, &cli.render, &cli.dashboard).await,
        Some(Command::List(args)) => {
            let target = cli.cluster.target();
            // `-o wide|json` on one cluster: the fleet's listing of the context in use.
            let fleet = cli.cluster.fleet().or_else(|| {
                (args.output != list::Output::Text)
                    .then(|| {
                        client::selected_context(
                            target.kubeconfig.as_deref(),
                            target.context.as_deref(),
                        )
                    })
                    .flatten()
                    .map(|c| crate::cluster::fleet::Selection::Named(vec![c]))
            });
            match fleet {
                Some(selection) => {
                    list::print_fleet(&target, &selection, &args, &mut std::io::stdout()).await
                }
                None => {
                    let (client, default_ns) = client::connect(&target).await?;
                    let scope = client::Scope::of(&target, default_ns);
                    list::print(client, &scope, &mut std::io::stdout()).await
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_cover_every_subcommand() {
        let mut command = <Cli as clap::CommandFactory>::command();
        let mut script = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut command,
            "wheelhouse",
            &mut script,
        );
        let script = String::from_utf8(script).unwrap();
        for sub in ["controller", "migrate", "install", "completion", "version"] {
            assert!(script.contains(sub), "{sub} missing");
        }
    }

    #[test]
    fn the_tested_kubernetes_version_is_the_test_suites() {
        let version = tested_kubernetes();
        assert!(version.starts_with("v1."), "{version}");
    }
}
