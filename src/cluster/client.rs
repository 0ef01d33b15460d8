//! Connecting to a cluster: kubeconfig, context and namespace scope, as kubectl does.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, Resource};

/// Why no client could be built for the chosen cluster.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("cluster configuration: {0}")]
    InferConfig(#[from] kube::config::InferConfigError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

/// Which cluster and namespaces to talk to: what kubectl's `--kubeconfig`, `--context`,
/// `--namespace` and `--all-namespaces` choose.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// Path to the kubeconfig file (`None`: $KUBECONFIG, then ~/.kube/config).
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (`None`: the current context).
    pub context: Option<String>,
    /// Namespace to look at (`None`: the context's namespace).
    pub namespace: Option<String>,
    /// Look at every namespace.
    pub all_namespaces: bool,
}

/// Builds a client for the chosen kubeconfig and context, and returns the context's
/// default namespace with it. TLS verification stays as the kubeconfig asks.
pub async fn connect(target: &Target) -> Result<(Client, String), ConnectError> {
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..Default::default()
    };
    let config = match &target.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if target.context.is_some() => Config::from_kubeconfig(&options).await?,
        None => Config::infer().await?,
    };
    let namespace = config.default_namespace.clone();
    Ok((Client::try_from(config)?, namespace))
}

/// The kubeconfig context a connection made with `kubeconfig` and `context` uses: the
/// one given, else the kubeconfig's current context (the file given, else `$KUBECONFIG`
/// or `~/.kube/config`, as [`connect`] reads them); `None` in a pod without a kubeconfig.
/// Child processes (helm) are given it explicitly, so they reach the same cluster.
pub fn selected_context(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Option<String> {
    if let Some(context) = context {
        return Some(context.to_string());
    }
    let config = match kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    };
    config.ok()?.current_context.filter(|c| !c.is_empty())
}

/// Which namespaces a front end looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespace(String),
}

impl Scope {
    /// The namespaces `target` asks for; `default_namespace` (the context's) when it
    /// names none.
    pub fn of(target: &Target, default_namespace: String) -> Self {
        if target.all_namespaces {
            Self::All
        } else {
            Self::Namespace(target.namespace.clone().unwrap_or(default_namespace))
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

/// Whether this identity may list and watch HelmReleases in every namespace (a
/// SelfSubjectAccessReview). An engine covers all namespaces when it can, else one.
pub async fn can_watch_all_helmreleases(client: &Client) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let mut allowed = true;
    for verb in ["list", "watch"] {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(crate::api::GROUP.into()),
                    resource: Some("helmreleases".into()),
                    verb: Some(verb.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
        allowed &= match api.create(&Default::default(), &review).await {
            Ok(r) => r.status.is_some_and(|s| s.allowed),
            Err(_) => false,
        };
    }
    allowed
}

/// Who this client is to the API server (a SelfSubjectReview): the username status and
/// Events name when an operator pins a release. `None` when the server cannot say.
pub async fn username(client: &Client) -> Option<String> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&Default::default(), &SelfSubjectReview::default())
        .await
        .ok()?;
    review.status?.user_info?.username
}

/// The engine scope of a front end: every namespace when the identity can see them all,
/// else the namespace it was pointed at.
pub async fn engine_scope(client: &Client, view: &Scope, default_namespace: &str) -> Scope {
    if can_watch_all_helmreleases(client).await {
        return Scope::All;
    }
    match view {
        Scope::Namespace(ns) => Scope::Namespace(ns.clone()),
        Scope::All => Scope::Namespace(default_namespace.to_owned()),
    }
}

/// The API server's own message for a failed request (kube's Display adds a debug dump).
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        kube::Error::Api(status) => format!("{} ({})", status.reason, status.code),
        other => other.to_string(),
    }
}
