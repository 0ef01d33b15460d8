//! The kubeconfig's contexts and the cluster's namespaces, for the pickers.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};

use super::limited;

/// The cluster's namespace names, for `:ns` completion (metadata only). An identity that
/// may not list namespaces gets the API's refusal, which the dashboard does not show.
pub async fn list_namespaces(client: Client) -> Result<Vec<String>, String> {
    let api: Api<Namespace> = Api::all(client);
    let list = limited(api.list_metadata(&ListParams::default())).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// The kubeconfig's context names, for `:ctx` completion (the file given with
/// `--kubeconfig`, else `$KUBECONFIG` or `~/.kube/config` as kubectl reads them); none
/// when it cannot be read.
pub fn kubeconfig_contexts(path: Option<&std::path::Path>) -> Vec<String> {
    let kubeconfig = match path {
        Some(path) => kube::config::Kubeconfig::read_from(path),
        None => kube::config::Kubeconfig::read(),
    };
    kubeconfig
        .map(|k| k.contexts.into_iter().map(|c| c.name).collect())
        .unwrap_or_default()
}
