//! Never destructive (issue "Never destructive"), end to end on the local control plane
//! with the real helm CLI beside the engine: a release never takes, changes or deletes
//! what belongs to someone else, and one bad object never stops the engine.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use support::engine::{
    chart, delete_and_await_uninstall, helm, helm_history, helm_try, is, set_values, setup, start,
    wait_for,
};
use support::{PATIENCE, kubeconfig_path, testbin};
use wheelhouse::api::{HelmRelease, RawHelmRelease};
use wheelhouse::cluster::client::Scope;
use wheelhouse::engine::{self, Role};
use wheelhouse::helm::render::HelmRenderer;

/// A HelmRelease of the `shared` test chart with `spec` merged in.
fn shared(name: &str, spec: serde_json::Value) -> HelmRelease {
    support::engine::release(name, "shared", spec)
}

async fn storage_of(client: &Client, ns: &str, release: &str) -> Vec<Secret> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("owner=helm,name={release}")))
        .await
        .unwrap()
        .items
}

fn ready_message(hr: &HelmRelease) -> String {
    hr.condition("Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_object_of_a_helm_cli_release_is_never_taken_changed_or_deleted() {
    let (client, ns, api) = setup("safe-owner").await;
    let _engine = start(&client, &ns.name).await;
    // Release "a" of the helm CLI owns the ConfigMap "shared".
    helm(
        &ns.name,
        &[
            "install",
            "a",
            &chart("shared"),
            "--set",
            "configName=shared",
            "--set",
            "value=a",
        ],
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let before = cms.get("shared").await.unwrap();

    // HelmRelease "b" renders the same ConfigMap: refused with Helm's message, nothing
    // applied, nothing stored.
    api.create(
        &PostParams::default(),
        &shared(
            "b",
            serde_json::json!({"values": {"configName": "shared", "value": "b"}}),
        ),
    )
    .await
    .unwrap();
    let refused = wait_for(&api, "b", "InstallFailed", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let message = ready_message(&refused);
    assert!(
        message.contains(&format!(
            "ConfigMap \"shared\" in namespace \"{}\" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key \"meta.helm.sh/release-name\" must equal \"b\": current value is \"a\"",
            ns.name
        )) && message.contains(&format!("owned by Helm release {}/a", ns.name)),
        "{message}"
    );
    let stalled = wait_for(&api, "b", "Stalled", |h| {
        is(h, "Stalled", "True", "RetriesExceeded")
    })
    .await;
    assert!(
        ready_message(&stalled).contains("cannot be imported"),
        "Ready keeps the reason"
    );
    let after = cms.get("shared").await.unwrap();
    assert_eq!(after.data, before.data, "the ConfigMap's data is untouched");
    assert_eq!(after.annotations(), before.annotations());
    assert_eq!(after.labels(), before.labels());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(
        deployments.get_opt("b").await.unwrap().is_none(),
        "nothing of b applied"
    );
    assert!(
        storage_of(&client, &ns.name, "b").await.is_empty(),
        "nothing of b stored"
    );
    let events = support::engine::events_of(&client, &ns.name, "b").await;
    assert!(
        events.iter().any(|e| e.contains("InstallFailed")),
        "{events:?}"
    );

    // Deleting "b" leaves "a" and its ConfigMap in place.
    delete_and_await_uninstall(&client, &ns.name, "b").await;
    let kept = cms.get("shared").await.unwrap();
    assert_eq!(kept.data, before.data);
    assert_eq!(kept.annotations()["meta.helm.sh/release-name"], "a");
    assert!(deployments.get_opt("a").await.unwrap().is_some());
    assert_eq!(helm_history(&ns.name, "a")[0].1, "deployed");

    // With install.takeOwnership, as with `helm install --take-ownership`, it is adopted.
    api.create(
        &PostParams::default(),
        &shared(
            "c",
            serde_json::json!({"install": {"takeOwnership": true},
                               "values": {"configName": "shared", "value": "c"}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "c", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let taken = cms.get("shared").await.unwrap();
    assert_eq!(taken.annotations()["meta.helm.sh/release-name"], "c");
    assert_eq!(taken.data.unwrap()["value"], "c");
    ns.delete().await;
}

#[tokio::test]
async fn a_second_helmrelease_for_the_same_release_is_refused_and_its_deletion_uninstalls_nothing()
{
    let (client, ns, api) = setup("safe-claim").await;
    let _engine = start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &shared("web-a", serde_json::json!({"releaseName": "web"})),
    )
    .await
    .unwrap();
    wait_for(&api, "web-a", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    api.create(
        &PostParams::default(),
        &shared(
            "web-b",
            serde_json::json!({"releaseName": "web", "values": {"value": "other"}}),
        ),
    )
    .await
    .unwrap();
    let refused = wait_for(&api, "web-b", "ReleaseConflict", |h| {
        is(h, "Ready", "False", "ReleaseConflict") && is(h, "Stalled", "True", "ReleaseConflict")
    })
    .await;
    assert!(
        ready_message(&refused).contains(&format!("managed by HelmRelease {}/web-a", ns.name)),
        "{}",
        ready_message(&refused)
    );
    // The first is untouched: still Ready, one revision, its values.
    let first = api.get("web-a").await.unwrap();
    assert!(is(&first, "Ready", "True", "InstallSucceeded"));
    assert_eq!(helm_history(&ns.name, "web").len(), 1);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert_eq!(
        cms.get("web-config").await.unwrap().data.unwrap()["value"],
        "one"
    );

    // Deleting the refused one uninstalls nothing.
    api.delete("web-b", &DeleteParams::default()).await.unwrap();
    wait_for_gone(&api, "web-b").await;
    assert_eq!(helm_history(&ns.name, "web")[0].1, "deployed");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("web").await.unwrap().is_some());

    delete_and_await_uninstall(&client, &ns.name, "web-a").await;
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    ns.delete().await;
}

/// The data, labels and annotations of every ConfigMap and the spec of every Deployment
/// in `ns`: what a release stored elsewhere must never change.
async fn objects_in(client: &Client, ns: &str) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for cm in cms.list(&ListParams::default()).await.unwrap().items {
        if cm.name_any() == "kube-root-ca.crt" {
            continue;
        }
        out.push(format!(
            "ConfigMap {} {:?} {:?} {:?}",
            cm.name_any(),
            cm.data,
            cm.labels(),
            cm.annotations()
        ));
    }
    for d in deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        // The deployment controller annotates its revision whenever it gets to it: not
        // the release's content, and a race with the first snapshot.
        let annotations: std::collections::BTreeMap<_, _> = d
            .annotations()
            .iter()
            .filter(|(k, _)| !k.starts_with("deployment.kubernetes.io/"))
            .collect();
        out.push(format!(
            "Deployment {} {:?} {:?}",
            d.name_any(),
            serde_json::to_string(&d.spec).unwrap(),
            annotations
        ));
    }
    out.sort();
    out
}

/// A HelmRelease in namespace `a` deploying release `x` into `t`, where the helm CLI
/// already has release `x`: Helm's ownership metadata (name x, namespace t) cannot tell
/// the two apart, the storage namespace can. Refused as a ReleaseConflict naming the helm
/// CLI's release; nothing stored or changed; deleting it deletes nothing of x.
#[tokio::test]
async fn a_helmrelease_stored_elsewhere_never_takes_or_deletes_a_helm_cli_release() {
    let (client, ns, api) = setup("id-a").await;
    let target = support::TestNamespace::new(&client, "id-t").await;
    let _engine = start(&client, &ns.name).await;
    helm(
        &target.name,
        &["install", "x", &chart("shared"), "--set", "value=cli"],
    );
    let before = objects_in(&client, &target.name).await;
    assert_eq!(before.len(), 2, "{before:?}");

    api.create(
        &PostParams::default(),
        &shared(
            "x",
            serde_json::json!({"releaseName": "x", "targetNamespace": target.name,
                               "values": {"value": "mine"}}),
        ),
    )
    .await
    .unwrap();
    let refused = wait_for(&api, "x", "ReleaseConflict", |h| {
        is(h, "Ready", "False", "ReleaseConflict") && is(h, "Stalled", "True", "ReleaseConflict")
    })
    .await;
    let message = ready_message(&refused);
    assert!(
        message.contains(&format!(
            "is already Helm release x stored in namespace {} (revision 1, deployed; not managed by a HelmRelease",
            target.name
        )),
        "{message}"
    );
    assert_eq!(
        objects_in(&client, &target.name).await,
        before,
        "x's objects unchanged"
    );
    assert!(
        storage_of(&client, &ns.name, "x").await.is_empty(),
        "nothing stored"
    );
    let events = support::engine::events_of(&client, &ns.name, "x").await;
    assert!(
        events.iter().any(|e| e.starts_with("ReleaseConflict")),
        "{events:?}"
    );

    // Deleting it: the finalizer let go (a positive sign it was handled), and x is whole.
    api.delete("x", &DeleteParams::default()).await.unwrap();
    wait_for_gone(&api, "x").await;
    assert_eq!(
        objects_in(&client, &target.name).await,
        before,
        "x's objects kept"
    );
    let status = helm(&target.name, &["status", "x", "-o", "json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["info"]["status"], "deployed");
    ns.delete().await;
    target.delete().await;
}

/// The conflict clears on its cause, not on a clock: with a 10 minute interval, the
/// HelmRelease installs within seconds of `helm uninstall` of the release it deferred to,
/// started by that record's change (per the metric), not by its interval.
#[tokio::test]
async fn a_release_conflict_clears_as_soon_as_the_other_release_is_uninstalled() {
    let (client, ns, api) = setup("id-clear").await;
    let target = support::TestNamespace::new(&client, "id-t").await;
    let (_engine, metrics) =
        support::engine::start_with_metrics(&client, &ns.name, "test-engine-id-clear").await;
    helm(&target.name, &["install", "x", &chart("shared")]);
    api.create(
        &PostParams::default(),
        &shared(
            "x",
            serde_json::json!({"releaseName": "x", "targetNamespace": target.name,
                               "interval": "10m", "values": {"value": "mine"}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "x", "ReleaseConflict", |h| {
        is(h, "Ready", "False", "ReleaseConflict")
    })
    .await;
    let before = support::engine::cause_retries(&metrics, "release_record");

    let uninstalled = Instant::now();
    helm(&target.name, &["uninstall", "x"]);
    wait_for(&api, "x", "installed once the other release went", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    println!(
        "conflicting release uninstalled -> Ready in {:.2} s",
        uninstalled.elapsed().as_secs_f64()
    );
    assert!(
        support::engine::cause_retries(&metrics, "release_record") > before,
        "{}",
        metrics.encode()
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &target.name);
    assert_eq!(
        cms.get("x-config").await.unwrap().data.unwrap()["value"],
        "mine",
        "its own values applied"
    );
    ns.delete().await;
    target.delete().await;
}

/// The same between two HelmReleases in two namespaces with the same target and release
/// name: the second is refused naming the first, and deleting it deletes nothing of the
/// first; deleting the first then uninstalls its objects (the check is not blanket).
#[tokio::test]
async fn two_helmreleases_stored_in_two_namespaces_never_share_a_release() {
    let (client, first_ns, first) = setup("id-a").await;
    let second_ns = support::TestNamespace::new(&client, "id-b").await;
    let second: Api<HelmRelease> = Api::namespaced(client.clone(), &second_ns.name);
    let target = support::TestNamespace::new(&client, "id-t").await;
    let _first_engine = start(&client, &first_ns.name).await;
    let _second_engine = start(&client, &second_ns.name).await;
    // The second would correct drift: it must not, on the first's objects.
    let spec = |value: &str| {
        serde_json::json!({"releaseName": "x", "targetNamespace": target.name,
                           "values": {"value": value}, "driftDetection": {"mode": "enabled"}})
    };
    first
        .create(&PostParams::default(), &shared("web", spec("first")))
        .await
        .unwrap();
    wait_for(&first, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let before = objects_in(&client, &target.name).await;

    second
        .create(&PostParams::default(), &shared("web", spec("second")))
        .await
        .unwrap();
    let refused = wait_for(&second, "web", "ReleaseConflict", |h| {
        is(h, "Ready", "False", "ReleaseConflict")
    })
    .await;
    let message = ready_message(&refused);
    assert!(
        message.contains(&format!(
            "Helm release x stored in namespace {} (revision 1, deployed; managed by HelmRelease {}/web)",
            first_ns.name, first_ns.name
        )),
        "{message}"
    );
    assert_eq!(objects_in(&client, &target.name).await, before);
    assert!(storage_of(&client, &second_ns.name, "x").await.is_empty());
    // Someone scales the first's Deployment: the first (its own drift, enabled) puts it
    // back; the second, asked to reconcile, touches nothing and reports no drift.
    kubectl_scale(&target.name, "x", 3);
    // (Asked: each test engine watches only its own namespace, not the target one.)
    support::engine::annotate(
        &first,
        "web",
        "reconcile.wheelhouse.dev/requestedAt",
        "look",
    )
    .await;
    wait_for(&first, "web", "the first corrects its own drift", |h| {
        h.condition("Drifted")
            .is_some_and(|c| c.reason == "DriftCorrected")
    })
    .await;
    support::engine::annotate(
        &second,
        "web",
        "reconcile.wheelhouse.dev/requestedAt",
        "look",
    )
    .await;
    let second_seen = wait_for(&second, "web", "the second's reconcile handled", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some("look")
    })
    .await;
    assert!(
        second_seen.condition("Drifted").is_none(),
        "{:?}",
        second_seen.status
    );
    assert!(storage_of(&client, &second_ns.name, "x").await.is_empty());

    second
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_for_gone(&second, "web").await;
    assert_eq!(
        objects_in(&client, &target.name).await,
        before,
        "the first's objects kept"
    );
    assert_eq!(helm_history(&first_ns.name, "x")[0].1, "deployed");

    first.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for_gone(&first, "web").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &target.name);
    assert!(
        deployments.get_opt("x").await.unwrap().is_none(),
        "its own uninstall deletes"
    );
    first_ns.delete().await;
    second_ns.delete().await;
    target.delete().await;
}

/// `kubectl scale` with the real kubectl: a write through the scale subresource.
fn kubectl_scale(ns: &str, deployment: &str, replicas: u32) {
    let out = std::process::Command::new(testbin().join("kubectl"))
        .args([
            "scale",
            &format!("deployment/{deployment}"),
            &format!("--replicas={replicas}"),
        ])
        .args(["--namespace", ns, "--kubeconfig"])
        .arg(kubeconfig_path())
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (replicas, image) of a Deployment.
async fn replicas_and_image(client: &Client, ns: &str, name: &str) -> (i32, String) {
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap();
    let spec = d.spec.unwrap();
    let image = spec.template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default();
    (spec.replicas.unwrap_or(1), image)
}

/// Waits for the HelmRelease's Ready condition to speak of its current generation.
async fn settled(api: &Api<HelmRelease>, name: &str, reason: &str) -> HelmRelease {
    wait_for(api, name, reason, |h| {
        h.condition("Ready")
            .is_some_and(|c| c.reason == reason && c.observed_generation == h.metadata.generation)
    })
    .await
}

/// Another manager's replica count, beside `helm upgrade` on the same cluster: a
/// `kubectl scale` (scale subresource) and a server-side-apply manager `hpa-controller`.
/// While the chart renders the replica count it rendered before, an upgrade keeps theirs
/// (helm 4 fails with a conflict); when the chart changes it, both fail naming the
/// manager and field; forceConflicts overwrites as `helm upgrade --force-conflicts`.
#[tokio::test]
async fn another_managers_replica_count_is_kept_or_reported_never_silently_overwritten() {
    let (client, ns, api) = setup("fields").await;
    let _engine = start(&client, &ns.name).await;
    let webapp = chart("webapp");
    helm(&ns.name, &["install", "cli", &webapp]);
    support::engine::install_webapp(&api, "web", serde_json::json!({})).await;
    kubectl_scale(&ns.name, "cli", 5);
    kubectl_scale(&ns.name, "web", 5);

    // The chart still renders replicas 2; only the image changes.
    let (ok, out) = helm_try(
        &ns.name,
        &[
            "upgrade",
            "cli",
            &webapp,
            "--set",
            "image=registry.invalid/web:2",
        ],
    );
    assert!(!ok, "helm 4 refuses: {out}");
    assert!(
        out.contains(
            r#"conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas"#
        ),
        "{out}"
    );
    set_values(
        &api,
        "web",
        serde_json::json!({"image": "registry.invalid/web:2"}),
    )
    .await;
    settled(&api, "web", "UpgradeSucceeded").await;
    assert_eq!(
        replicas_and_image(&client, &ns.name, "web").await,
        (5, "registry.invalid/web:2".to_string()),
        "the scaled count is kept, the image rolled"
    );

    // The chart changes the replica count: a conflict for both, nothing applied.
    let (ok, out) = helm_try(
        &ns.name,
        &["upgrade", "cli", &webapp, "--set", "replicaCount=3"],
    );
    assert!(!ok && out.contains(".spec.replicas"), "{out}");
    let revisions = helm_history(&ns.name, "web").len();
    set_values(
        &api,
        "web",
        serde_json::json!({"replicaCount": 3, "image": "registry.invalid/web:3"}),
    )
    .await;
    let failed = settled(&api, "web", "UpgradeFailed").await;
    let message = ready_message(&failed);
    assert!(
        message.contains(r#"conflict with "kubectl" with subresource "scale": .spec.replicas"#)
            && message.contains("forceConflicts"),
        "{message}"
    );
    assert_eq!(
        replicas_and_image(&client, &ns.name, "web").await,
        (5, "registry.invalid/web:2".to_string()),
        "nothing applied"
    );
    assert_eq!(
        helm_history(&ns.name, "web").len(),
        revisions,
        "nothing stored"
    );

    // forceConflicts overwrites, as --force-conflicts does.
    helm(
        &ns.name,
        &[
            "upgrade",
            "cli",
            &webapp,
            "--set",
            "replicaCount=3",
            "--force-conflicts",
        ],
    );
    assert_eq!(replicas_and_image(&client, &ns.name, "cli").await.0, 3);
    api.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(
            serde_json::json!({"spec": {"upgrade": {"forceConflicts": true}}}),
        ),
    )
    .await
    .unwrap();
    settled(&api, "web", "UpgradeSucceeded").await;
    assert_eq!(
        replicas_and_image(&client, &ns.name, "web").await,
        (3, "registry.invalid/web:3".to_string())
    );

    // An HPA-style server-side-apply manager takes the count; the next upgrade (chart
    // unchanged in replicas, forceConflicts off again) leaves it theirs.
    for name in ["cli", "web"] {
        support::apply_documents(
            &client,
            &[
                serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns.name}, "spec": {"replicas": 4}}),
            ],
            "hpa-controller",
        )
        .await;
    }
    let (ok, out) = helm_try(
        &ns.name,
        &[
            "upgrade",
            "cli",
            &webapp,
            "--set",
            "replicaCount=3",
            "--set",
            "image=registry.invalid/web:4",
        ],
    );
    assert!(
        !ok && out.contains(r#"conflict with "hpa-controller": .spec.replicas"#),
        "{out}"
    );
    api.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {
            "upgrade": {"forceConflicts": false},
            "values": {"image": "registry.invalid/web:4"}}})),
    )
    .await
    .unwrap();
    settled(&api, "web", "UpgradeSucceeded").await;
    assert_eq!(
        replicas_and_image(&client, &ns.name, "web").await,
        (4, "registry.invalid/web:4".to_string())
    );
    ns.delete().await;
}

/// A revision installed while its config was missing (pods held by the config-pending
/// gate) is stored without the gate: `helm rollback` to it with no wheelhouse running
/// ends with schedulable, Ready pods.
#[tokio::test]
async fn helm_rollback_to_a_revision_that_was_gated_works_without_wheelhouse() {
    let (client, ns, api) = setup("gate-rollback").await;
    let engine = start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &support::engine::webapp(
            "web",
            serde_json::json!({"values": {"extraConfigMap": "late"}}),
        ),
    )
    .await
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let gated = |d: &Deployment| {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| g.iter().any(|g| g.name == "wheelhouse.dev/config-pending"))
    };
    // Applied gated (a positive sign the gate was in play for revision 1) ...
    let deadline = Instant::now() + PATIENCE;
    while !deployments
        .get_opt("web")
        .await
        .unwrap()
        .is_some_and(|d| gated(&d))
    {
        assert!(
            Instant::now() < deadline,
            "revision 1 was never applied gated"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // ... and stored without it.
    let stored = helm(&ns.name, &["get", "manifest", "web", "--revision", "1"]);
    assert!(stored.contains("wheelhouse.dev/config-hash"), "{stored}");
    assert!(!stored.contains("schedulingGates"), "{stored}");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    cms.create(
        &PostParams::default(),
        &support::from_yaml("metadata: {name: late}\ndata: {K: v}"),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    set_values(
        &api,
        "web",
        serde_json::json!({"extraConfigMap": null, "message": "two"}),
    )
    .await;
    settled(&api, "web", "UpgradeSucceeded").await;

    // The engine stops (a positive sign: it no longer holds the lease); helm rolls back.
    engine.handle.shutdown();
    let mut role = engine.handle.role();
    tokio::time::timeout(PATIENCE, role.wait_for(|r| *r != Role::Leader))
        .await
        .expect("the engine stopped")
        .unwrap();
    drop(engine);
    helm(
        &ns.name,
        &["rollback", "web", "1", "--wait", "--timeout", "60s"],
    );
    let history = helm_history(&ns.name, "web");
    assert_eq!(history.last().unwrap().1, "deployed", "{history:?}");
    let d = deployments.get("web").await.unwrap();
    assert!(!gated(&d), "no gate after the rollback");
    let status = d.status.unwrap();
    assert_eq!(status.ready_replicas, Some(2), "{status:?}");
    ns.delete().await;
}

/// The values editor writes `key: null` (Helm's way to remove a chart default) as null,
/// so the default stays removed, exactly as `helm upgrade --set key=null` does.
#[tokio::test]
async fn the_values_editor_stores_null_and_the_chart_default_stays_removed() {
    let (client, ns, api) = setup("values-null").await;
    let _engine = start(&client, &ns.name).await;
    let webapp = chart("webapp");
    helm(
        &ns.name,
        &["install", "cli", &webapp, "--set", "message=custom"],
    );
    support::engine::install_webapp(
        &api,
        "web",
        serde_json::json!({"values": {"message": "custom"}}),
    )
    .await;

    let original = serde_json::json!({"message": "custom"});
    let draft = wheelhouse::frontend::tui::view_model::parse_values("message: null\n").unwrap();
    let key = wheelhouse::engine::ReleaseKey {
        namespace: ns.name.clone(),
        name: "web".into(),
    };
    wheelhouse::frontend::tui::io::patch_values(client.clone(), key, original, draft)
        .await
        .unwrap();
    let stored = api.get("web").await.unwrap();
    assert_eq!(
        stored.spec.values,
        Some(serde_json::json!({"message": null}))
    );

    helm(
        &ns.name,
        &["upgrade", "cli", &webapp, "--set", "message=null"],
    );
    settled(&api, "web", "UpgradeSucceeded").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let ours = cms.get("web-config").await.unwrap().data;
    let helms = cms.get("cli-config").await.unwrap().data;
    assert_eq!(ours, helms, "rendered as the helm CLI renders it");
    assert_ne!(
        ours.unwrap()["MESSAGE"],
        "hello",
        "the default does not come back"
    );
    assert_eq!(
        helm(&ns.name, &["get", "values", "web", "-o", "json"]),
        helm(&ns.name, &["get", "values", "cli", "-o", "json"])
    );
    ns.delete().await;
}

/// helm's own cluster settings in the controller's environment (a context that does not
/// exist, an API server nobody listens on, a token) never reach the helm child: it
/// renders against the cluster the engine applies to, from the kubeconfig and context
/// the engine passes.
#[tokio::test]
async fn the_helm_child_reaches_only_the_cluster_the_engine_passes() {
    let (_client, ns, api) = setup("helm-env").await;
    let _controller = support::controller::Controller::start_with_env(
        &["--namespace", &ns.name, "--lease-namespace", &ns.name],
        &[
            ("HELM_KUBECONTEXT", "another-cluster"),
            ("HELM_KUBEAPISERVER", "https://127.0.0.1:9"),
            ("HELM_KUBETOKEN", "not-the-engines-token"),
        ],
    );
    support::engine::install_webapp(&api, "web", serde_json::json!({})).await;
    assert_eq!(helm_history(&ns.name, "web")[0].1, "deployed");
    ns.delete().await;
}

/// Values nested 120 to 125 levels deep: the spec alone would decode, the object as the
/// API server returns it (its managedFields mirror the values, deeper) would not. Handled
/// as deeper values are: InvalidSpec, a short log line, and never the body (which holds an
/// inline password) in the controller's log.
#[tokio::test]
async fn values_nested_just_below_the_decoders_limit_are_invalid_and_never_logged() {
    let (client, ns, api) = setup("safe-band").await;
    let controller = support::controller::Controller::start(&[
        "--namespace",
        &ns.name,
        "--lease-namespace",
        &ns.name,
    ]);
    let raw_api: Api<RawHelmRelease> = Api::namespaced(client.clone(), &ns.name);
    for depth in [120, 123, 125] {
        let mut deep = String::from(r#"{"password":"hunter2-in-band"}"#);
        for _ in 0..depth - 1 {
            deep = format!("{{\"a\":{deep}}}");
        }
        let text = format!(
            r#"{{"apiVersion":"wheelhouse.dev/v1alpha1","kind":"HelmRelease","metadata":{{"name":"band-{depth}"}},"spec":{{"chart":{{"path":"{}"}},"values":{deep}}}}}"#,
            chart("shared")
        );
        raw_api
            .create(
                &PostParams::default(),
                &serde_json::from_str(&text).unwrap(),
            )
            .await
            .unwrap();
    }
    api.create(
        &PostParams::default(),
        &shared("fine", serde_json::json!({})),
    )
    .await
    .unwrap();
    for depth in [120, 123, 125] {
        let name = format!("band-{depth}");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let raw = raw_api.get(&name).await.unwrap();
            let status: Option<wheelhouse::api::HelmReleaseStatus> = raw
                .status
                .as_deref()
                .and_then(|s| serde_json::from_str(s.get()).ok());
            let ready = status.and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"));
            if let Some(c) = ready.filter(|c| c.reason == "InvalidSpec") {
                assert!(c.message.contains("nests deeper"), "{}", c.message);
                break;
            }
            assert!(Instant::now() < deadline, "{name} never got InvalidSpec");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    wait_for(&api, "fine", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    // A positive sign that time passed with the engine at work: a reconcile of the
    // healthy release, requested and handled.
    support::engine::annotate(&api, "fine", "reconcile.wheelhouse.dev/requestedAt", "t1").await;
    wait_for(&api, "fine", "the reconcile handled", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some("t1")
    })
    .await;
    let log = controller.log();
    assert!(!log.contains("hunter2"), "a body reached the log");
    for depth in [120, 123, 125] {
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("band-{depth}")))
            .collect();
        assert!(!lines.is_empty() && lines.len() <= 2, "{lines:#?}");
        assert!(lines.iter().all(|l| l.len() < 600), "{lines:#?}");
        assert!(!log.contains("recursion limit"), "{log}");
    }
    ns.delete().await;
}

/// A chart error that quotes a value that came from a Secret (the API server's message
/// for an invalid label) is masked wherever it is copied: Ready, the Event, and Helm's
/// release description.
#[tokio::test]
async fn a_message_quoting_a_value_from_a_secret_is_masked_everywhere() {
    let (client, ns, api) = setup("safe-mask").await;
    let _engine = start(&client, &ns.name).await;
    let secret = "not a label s3cr3t from vault";
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(
            &PostParams::default(),
            &support::from_yaml(&format!(
                "metadata: {{name: creds}}\nstringData:\n  values.yaml: |\n    behavior: \"{secret}\"\n"
            )),
        )
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &shared(
            "web",
            serde_json::json!({"valuesFrom": [{"kind": "Secret", "name": "creds"}]}),
        ),
    )
    .await
    .unwrap();
    let failed = wait_for(&api, "web", "InstallFailed", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let message = ready_message(&failed);
    // The API server's refusal, quoted with the value masked.
    assert!(message.contains("Invalid value: \"***\""), "{message}");
    assert!(!message.contains("s3cr3t"), "{message}");
    let events = support::engine::events_of(&client, &ns.name, "web").await;
    assert!(events.iter().any(|e| e.contains("***")), "{events:?}");
    assert!(events.iter().all(|e| !e.contains("s3cr3t")), "{events:?}");
    let history = helm_history(&ns.name, "web");
    assert!(
        history.iter().any(|(_, _, d)| d.contains("***")),
        "{history:?}"
    );
    assert!(
        history.iter().all(|(_, _, d)| !d.contains("s3cr3t")),
        "{history:?}"
    );
    ns.delete().await;
}

async fn wait_for_gone(api: &Api<HelmRelease>, name: &str) {
    let deadline = Instant::now() + PATIENCE;
    while api.get_opt(name).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "{name} was never deleted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The stale-nodeSelector incident: a release installed by the helm CLI pins its pods to
/// a node that does not exist; the HelmRelease that adopts it drops the nodeSelector, and
/// the fix must actually remove it (client-side and server-side helm installs alike), and
/// again after a `helm rollback` by hand.
#[tokio::test]
async fn adopting_a_helm_cli_release_ends_in_exactly_the_new_manifest() {
    let (client, ns, api) = setup("safe-adopt").await;
    let _engine = start(&client, &ns.name).await;
    for (release, server_side) in [
        ("ssa", "--server-side=true"),
        ("csa", "--server-side=false"),
    ] {
        helm(
            &ns.name,
            &[
                "install",
                release,
                &chart("shared"),
                server_side,
                "--set",
                "nodeSelector.disk=nowhere",
            ],
        );
        assert!(
            support::node_selector(&client, &ns.name, release)
                .await
                .is_some()
        );
        api.create(
            &PostParams::default(),
            &shared(release, serde_json::json!({"values": {"value": "fixed"}})),
        )
        .await
        .unwrap();
        wait_for(&api, release, "adopted and Ready", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
        })
        .await;
        assert_eq!(
            support::node_selector(&client, &ns.name, release).await,
            None,
            "{release}"
        );
        let history = helm_history(&ns.name, release);
        assert_eq!(history.len(), 2, "{history:?}");
        assert_eq!(history[1].1, "deployed");
        // `auto` after another tool's revision, client-side or not: server-side, the helm
        // CLI's fields handed over, so no field another manager set is set back.
        let meta: serde_json::Value =
            serde_json::from_str(&helm(&ns.name, &["get", "metadata", release, "-o", "json"]))
                .unwrap();
        assert_eq!(meta["applyMethod"], "ssa", "{release}");
    }

    // `helm rollback` by hand to the helm CLI's revision (no --force-conflicts needed)
    // brings the nodeSelector back; wheelhouse leaves another tool's revision alone
    // (driftDetection warn) until asked: a forced reconcile removes it again.
    helm(&ns.name, &["rollback", "ssa", "1"]);
    assert!(
        support::node_selector(&client, &ns.name, "ssa")
            .await
            .is_some()
    );
    support::engine::annotate(
        &api,
        "ssa",
        "reconcile.wheelhouse.dev/forceAt",
        "after-rollback",
    )
    .await;
    wait_for(&api, "ssa", "upgraded after the manual rollback", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_some_and(|r| r.version == 4)
    })
    .await;
    assert_eq!(support::node_selector(&client, &ns.name, "ssa").await, None);
    // And `helm upgrade` by hand on a wheelhouse release works without --force-conflicts.
    helm(
        &ns.name,
        &["upgrade", "ssa", &chart("shared"), "--set", "value=by-hand"],
    );
    ns.delete().await;
}

#[tokio::test]
async fn an_unreadable_or_oversized_helmrelease_never_stops_the_others() {
    let (client, ns, api) = setup("safe-bad").await;
    let _engine = start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &shared("fine", serde_json::json!({})),
    )
    .await
    .unwrap();
    wait_for(&api, "fine", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    // Values nested 300 levels deep: the API server takes it, a typed list cannot read it.
    let mut deep = String::from("1");
    for _ in 0..300 {
        deep = format!("{{\"a\":{deep}}}");
    }
    let text = format!(
        r#"{{"apiVersion":"wheelhouse.dev/v1alpha1","kind":"HelmRelease","metadata":{{"name":"deep"}},"spec":{{"chart":{{"path":"{}"}},"values":{deep}}}}}"#,
        chart("shared")
    );
    let raw_api: Api<RawHelmRelease> = Api::namespaced(client.clone(), &ns.name);
    raw_api
        .create(
            &PostParams::default(),
            &serde_json::from_str(&text).unwrap(),
        )
        .await
        .unwrap();
    assert!(
        api.list(&ListParams::default()).await.is_err(),
        "a typed list fails"
    );

    // The bad one gets a clear reason in its status ...
    let deadline = Instant::now() + PATIENCE;
    loop {
        let raw = raw_api.get("deep").await.unwrap();
        let status: Option<wheelhouse::api::HelmReleaseStatus> = raw
            .status
            .as_deref()
            .and_then(|s| serde_json::from_str(s.get()).ok());
        let ready = status.and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"));
        if let Some(c) = ready.filter(|c| c.reason == "InvalidSpec") {
            assert!(c.message.contains("nests deeper"), "{}", c.message);
            break;
        }
        assert!(Instant::now() < deadline, "deep never got InvalidSpec");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // ... `wheelhouse list` shows both and names the bad one ...
    let mut out = Vec::new();
    wheelhouse::frontend::cli::list::print(
        client.clone(),
        &Scope::Namespace(ns.name.clone()),
        &mut out,
    )
    .await
    .unwrap();
    let listing = String::from_utf8(out).unwrap();
    assert!(
        listing
            .lines()
            .any(|l| l.contains("fine") && l.contains("True")),
        "{listing}"
    );
    assert!(
        listing
            .lines()
            .any(|l| l.contains("deep") && l.contains("Invalid") && l.contains("nests deeper")),
        "{listing}"
    );
    // ... and the healthy one still upgrades.
    set_values(&api, "fine", serde_json::json!({"value": "two"})).await;
    wait_for(&api, "fine", "upgraded", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;

    // Values too large for one storage Secret: a clear failure, nothing applied or stored.
    // 700 KB of letters that gzip cannot squeeze much: under the ConfigMap's own 1 MiB,
    // but the release record holds them twice (values and manifest).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let padding: String = (0..700_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect();
    api.create(
        &PostParams::default(),
        &shared("huge", serde_json::json!({"values": {"padding": padding}})),
    )
    .await
    .unwrap();
    let huge = wait_for(&api, "huge", "InstallFailed", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    assert!(
        ready_message(&huge).contains("one Secret holds"),
        "{}",
        ready_message(&huge)
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("huge").await.unwrap().is_none());
    assert!(storage_of(&client, &ns.name, "huge").await.is_empty());

    // Deleting the unreadable one lets it go (its release, if any, is left in place).
    raw_api
        .delete("deep", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    while raw_api.get_opt("deep").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "deep was never deleted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ns.delete().await;
}

#[tokio::test]
async fn deleting_a_helmrelease_during_a_wait_uninstalls_at_once() {
    let (client, ns, api) = setup("safe-delete").await;
    let _engine = start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &shared(
            "stuck",
            serde_json::json!({"timeout": "5m", "values": {"behavior": "never-ready"}}),
        ),
    )
    .await
    .unwrap();
    support::engine::waiting_on(&api, "stuck", 1).await;
    let started = Instant::now();
    // Within PATIENCE (60 s), far below the 5-minute wait.
    delete_and_await_uninstall(&client, &ns.name, "stuck").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("stuck").await.unwrap().is_none());
    println!(
        "deleted mid-wait and uninstalled in {:?}",
        started.elapsed()
    );
    ns.delete().await;
}

#[tokio::test]
async fn dependency_cycles_are_reported_not_waited_on() {
    let (client, ns, api) = setup("safe-cycle").await;
    let _engine = start(&client, &ns.name).await;
    for (name, deps) in [
        ("cx", vec!["cy"]),
        ("cy", vec!["cx"]),
        ("self", vec!["self"]),
    ] {
        let deps: Vec<_> = deps
            .iter()
            .map(|d| serde_json::json!({"name": d}))
            .collect();
        api.create(
            &PostParams::default(),
            &shared(
                name,
                serde_json::json!({"dependsOn": deps, "interval": "10m"}),
            ),
        )
        .await
        .unwrap();
    }
    let ns_name = ns.name.clone();
    for (name, cycle) in [
        (
            "cx",
            format!("{ns_name}/cx -> {ns_name}/cy -> {ns_name}/cx"),
        ),
        ("self", format!("{ns_name}/self -> {ns_name}/self")),
    ] {
        let hr = wait_for(&api, name, "Stalled DependencyCycle", |h| {
            is(h, "Stalled", "True", "DependencyCycle")
        })
        .await;
        assert!(
            ready_message(&hr).contains(&cycle),
            "{name}: {}",
            ready_message(&hr)
        );
    }
    // Causes, not clocks: breaking the cycle (cy no longer depends on cx) is looked at
    // when cy changes, not at the 10 minute interval: cy installs, then cx once cy is
    // Ready. (Not `y`: YAML 1.1 reads an unquoted release name `y` as true.)
    api.patch(
        "cy",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"dependsOn": null}})),
    )
    .await
    .unwrap();
    for name in ["cy", "cx"] {
        wait_for(&api, name, "installed once the cycle is broken", |h| {
            is(h, "Ready", "True", "InstallSucceeded")
        })
        .await;
    }
    ns.delete().await;
}

#[tokio::test]
async fn an_engine_that_cannot_render_says_how_to_fix_it_and_leaves_the_lease() {
    let (client, ns, api) = setup("safe-render").await;
    // Neither renderer's program exists: each engine says how to fix it.
    let renderers: [(
        std::sync::Arc<dyn wheelhouse::helm::render::Renderer>,
        [&str; 2],
    ); 2] = [
        (
            std::sync::Arc::new(wheelhouse::helm::render::HelperRenderer::new(
                "/nonexistent/wheelhouse-render".into(),
                Duration::from_secs(5),
            )),
            [
                "cannot run /nonexistent/wheelhouse-render",
                "WHEELHOUSE_RENDER_HELPER",
            ],
        ),
        (
            std::sync::Arc::new(HelmRenderer::new(
                "/nonexistent/helm".into(),
                Duration::from_secs(5),
            )),
            ["cannot run /nonexistent/helm", "WHEELHOUSE_HELM"],
        ),
    ];
    let mut broken = Vec::new();
    for (i, (renderer, said)) in renderers.into_iter().enumerate() {
        let (mut config, _cache) = support::engine::config(&ns.name, &format!("no-renderer-{i}"));
        config.renderer = renderer;
        let engine = engine::start(client.clone(), config).unwrap();
        let mut role = engine.role();
        let reason = tokio::time::timeout(
            PATIENCE,
            role.wait_for(|r| matches!(r, Role::Unable { .. })),
        )
        .await
        .expect("the engine says it cannot work")
        .unwrap()
        .clone();
        let Role::Unable { reason } = reason else {
            unreachable!()
        };
        assert!(said.iter().all(|s| reason.contains(s)), "{reason}");
        broken.push(engine);
    }
    // An engine that can render takes the lease and reconciles.
    let _good = start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &shared("app", serde_json::json!({})),
    )
    .await
    .unwrap();
    wait_for(&api, "app", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    for engine in broken {
        engine.shutdown();
    }

    // The headless controller refuses to start, once, with the fix in its message.
    for (flags, said) in [
        (
            &["--render-helper", "/nonexistent/wheelhouse-render"][..],
            "WHEELHOUSE_RENDER_HELPER",
        ),
        (
            &["--renderer", "helm", "--helm", "/nonexistent/helm"][..],
            "WHEELHOUSE_HELM",
        ),
    ] {
        let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
            .arg("--kubeconfig")
            .arg(kubeconfig_path())
            .args(["-n", &ns.name, "controller", "--lease-namespace", &ns.name])
            .args(flags)
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(PATIENCE, run)
            .await
            .expect("the controller exits at once")
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
    }
    let _ = testbin();
    ns.delete().await;
}
