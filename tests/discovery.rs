//! A discovery that is incomplete (an aggregated API whose backend is down) fails the
//! action instead of rendering from partial capabilities, and nothing is pruned. Its own
//! test binary: the broken APIService affects every render on the cluster while it
//! exists, and cargo runs test binaries one at a time.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use support::engine::{is, release, set_values, start, wait_for};
use support::{TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;

const BROKEN: &str = "v1.broken.wheelhouse.dev";

fn apiservices(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&GroupVersionKind::gvk(
            "apiregistration.k8s.io",
            "v1",
            "APIService",
        )),
    )
}

/// Deletes the broken APIService when the test ends, pass or fail. With kubectl: a drop
/// cannot wait on the test's own (single-threaded) runtime.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::process::Command::new(support::testbin().join("kubectl"))
            .arg("--kubeconfig")
            .arg(support::kubeconfig_path())
            .args(["delete", "apiservice", BROKEN, "--ignore-not-found"])
            .output();
    }
}

#[tokio::test]
async fn an_incomplete_discovery_fails_the_action_and_prunes_nothing() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "discovery").await;
    let _engine = start(&client, &ns.name).await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &release("web", "shared", serde_json::json!({})),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    // An APIService whose backend does not exist: its group drops out of discovery.
    let _cleanup = Cleanup;
    let broken: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": BROKEN},
        "spec": {"group": "broken.wheelhouse.dev", "version": "v1",
                 "groupPriorityMinimum": 100, "versionPriority": 10,
                 "insecureSkipTLSVerify": true,
                 "service": {"name": "nowhere", "namespace": ns.name, "port": 443}}
    }))
    .unwrap();
    apiservices(&client)
        .patch(
            BROKEN,
            &PatchParams::apply("wheelhouse-tests").force(),
            &Patch::Apply(&broken),
        )
        .await
        .unwrap();

    set_values(&api, "web", serde_json::json!({"value": "two"})).await;
    let failed = wait_for(&api, "web", "UpgradeFailed", |h| {
        is(h, "Ready", "False", "UpgradeFailed")
    })
    .await;
    let message = failed.condition("Ready").unwrap().message.clone();
    assert!(
        message.contains("not rendered from partial capabilities")
            && message.contains("broken.wheelhouse.dev/v1"),
        "{message}"
    );
    // Nothing was applied or pruned: the release's objects are as revision 1 left them.
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["value"], "one");

    // Discovery whole again: a new attempt succeeds.
    apiservices(&client)
        .delete(BROKEN, &DeleteParams::default())
        .await
        .unwrap();
    support::engine::annotate(
        &api,
        "web",
        "reconcile.wheelhouse.dev/resetAt",
        "discovery-fixed",
    )
    .await;
    wait_for(&api, "web", "upgraded once discovery is whole", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    ns.delete().await;
}
