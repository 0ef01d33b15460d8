//! A dead aggregated API on the local control plane: an APIService whose backend is gone,
//! so discovery marks its group stale (a crashed metrics-server, in the everyday case).

use kube::api::{DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};

use super::{PATIENCE, kubeconfig_path, testbin};

pub fn apiservices(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&GroupVersionKind::gvk(
            "apiregistration.k8s.io",
            "v1",
            "APIService",
        )),
    )
}

/// Waits until discovery says whether `group` is stale.
pub async fn discovery_stale(client: &Client, group: &str, stale: bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while wheelhouse::helm::render::unavailable_groups(client)
        .await
        .unwrap()
        .iter()
        .any(|g| g.starts_with(group))
        != stale
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{group} never became {}",
            if stale { "stale" } else { "fresh" }
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// API group `group` (kind `Widget`, version v1) served by a dead APIService, with a CRD
/// of the same group beside it: deleting the APIService ([`DeadGroup::heal`]) lets the
/// API server serve the group from the CRD, as a restarted backend would. Both go when
/// dropped (with kubectl: a drop cannot wait on the test's own runtime).
pub struct DeadGroup {
    pub group: String,
}

impl DeadGroup {
    /// Creates the dead APIService (pointing at a Service of `namespace` that does not
    /// exist) and then the CRD, and waits until discovery marks the group stale.
    pub async fn create(client: &Client, group: &str, namespace: &str) -> Self {
        let dead = Self {
            group: group.to_string(),
        };
        let mut service: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": dead.apiservice()},
            "spec": {"group": group, "version": "v1",
                     "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "insecureSkipTLSVerify": true,
                     "service": {"namespace": namespace, "name": "nowhere", "port": 443}},
        }))
        .unwrap();
        service.metadata.name = Some(dead.apiservice());
        apiservices(client)
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        // Created after the APIService, so the API server does not register its own one.
        let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": dead.crd()},
                "spec": {"group": group, "scope": "Namespaced",
                         "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                         "versions": [{"name": "v1", "served": true, "storage": true,
                                       "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": true}}}]},
            }))
            .unwrap();
        Api::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
        discovery_stale(client, group, true).await;
        dead
    }

    pub fn apiservice(&self) -> String {
        format!("v1.{}", self.group)
    }

    fn crd(&self) -> String {
        format!("widgets.{}", self.group)
    }

    /// The backend is back: the dead APIService goes and the group is served.
    pub async fn heal(&self, client: &Client) {
        apiservices(client)
            .delete(&self.apiservice(), &DeleteParams::default())
            .await
            .unwrap();
    }
}

impl Drop for DeadGroup {
    fn drop(&mut self) {
        for (kind, name) in [("apiservice", self.apiservice()), ("crd", self.crd())] {
            let _ = std::process::Command::new(testbin().join("kubectl"))
                .arg("--kubeconfig")
                .arg(kubeconfig_path())
                .args(["delete", kind, &name, "--ignore-not-found", "--wait=false"])
                .output();
        }
    }
}
