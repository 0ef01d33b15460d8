//! Connecting to a cluster: kubeconfig, context and namespace scope, as kubectl does.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, Resource};

use crate::Result;
use crate::cli::ClusterArgs;

/// Builds a client for the chosen kubeconfig and context, and returns the context's
/// default namespace with it. TLS verification stays as the kubeconfig asks.
pub async fn connect(args: &ClusterArgs) -> Result<(Client, String)> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if args.context.is_some() => Config::from_kubeconfig(&options).await?,
        None => Config::infer().await?,
    };
    let namespace = config.default_namespace.clone();
    Ok((Client::try_from(config)?, namespace))
}

/// Which namespaces a front end looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespace(String),
}

impl Scope {
    pub fn from_args(args: &ClusterArgs, default_namespace: String) -> Self {
        if args.all_namespaces {
            Self::All
        } else {
            Self::Namespace(args.namespace.clone().unwrap_or(default_namespace))
        }
    }

    pub fn api<K>(&self, client: Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self {
            Self::All => Api::all(client),
            Self::Namespace(ns) => Api::namespaced(client, ns),
        }
    }
}
