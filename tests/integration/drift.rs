//! A revision written by someone else: `helm rollback` (or `helm upgrade`) by hand on a
//! wheelhouse release, with the real helm CLI, under each `driftDetection.mode`. The
//! releases' interval is the default 10 minutes, so a status that changes within the
//! tests' patience was woken by the storage watch, not by the interval.

use crate::support;

use std::time::Instant;

use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::engine::{self as eng, event_matching, events_of, helm, helm_history, is, wait_for};
use wheelhouse::api::HelmRelease;

/// Installs `name` with greeting one, upgrades it to two, then rolls it back to 1 with
/// the helm CLI; returns when the rollback was taken.
async fn rolled_back_by_hand(api: &Api<HelmRelease>, ns: &str, name: &str, mode: &str) -> Instant {
    let mut spec = serde_json::json!({"values": {"message": "one"}});
    if !mode.is_empty() {
        spec["driftDetection"] = serde_json::json!({"mode": mode});
    }
    api.create(&PostParams::default(), &eng::webapp(name, spec))
        .await
        .unwrap();
    wait_for(api, name, "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    set_message(api, name, "two").await;
    wait_for(api, name, "upgraded to two", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 2
    })
    .await;
    let at = Instant::now();
    helm(ns, &["rollback", name, "1"]);
    at
}

async fn set_message(api: &Api<HelmRelease>, name: &str, message: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"values": {"message": message}}})),
    )
    .await
    .unwrap();
}

fn statuses(ns: &str, name: &str) -> Vec<String> {
    helm_history(ns, name).into_iter().map(|h| h.1).collect()
}

/// warn (the default): reported within seconds and left as helm left it, until the spec
/// changes.
#[tokio::test]
async fn warn_reports_a_helm_rollback_by_hand_and_leaves_it() {
    let (client, ns, api) = eng::setup("external-warn").await;
    let _engine = eng::start(&client, &ns.name).await;
    let rolled = rolled_back_by_hand(&api, &ns.name, "web", "").await;
    let hr = wait_for(&api, "web", "the external revision reported", |h| {
        is(h, "Ready", "False", "ExternalRevision")
    })
    .await;
    println!("helm rollback -> ExternalRevision: {:?}", rolled.elapsed());
    let status = hr.status.unwrap();
    let external = status.external_revision.clone().unwrap();
    assert_eq!((external.revision, external.by.as_str()), (3, "Helm"));
    assert_eq!(external.description, "Rollback to 1");
    let ready = hr_condition_message(&status);
    assert!(
        ready.contains("revision 3 (Rollback to 1) was written by Helm")
            && ready.contains("left as it is"),
        "{ready}"
    );
    // The status shows what runs: revision 3, with the values of revision 1.
    assert_eq!(status.history[0].version, 3);
    let events = event_matching(&client, &ns.name, "web", |e| {
        e.starts_with("ExternalRevision")
    })
    .await;
    assert!(
        events.iter().any(|e| e.starts_with("ExternalRevision")),
        "{events:?}"
    );
    // Left alone: no revision after the reported one.
    assert_eq!(
        statuses(&ns.name, "web"),
        ["superseded", "superseded", "deployed"]
    );

    // A new spec is applied (and the report goes away).
    set_message(&api, "web", "three").await;
    let hr = wait_for(&api, "web", "the new spec applied", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 4
    })
    .await;
    assert_eq!(hr.status.unwrap().external_revision, None);
    ns.delete().await;
}

/// enabled: the spec is applied again as a new revision.
#[tokio::test]
async fn enabled_restores_the_spec_after_a_helm_rollback_by_hand() {
    let (client, ns, api) = eng::setup("external-enabled").await;
    let _engine = eng::start(&client, &ns.name).await;
    let rolled = rolled_back_by_hand(&api, &ns.name, "web", "enabled").await;
    let hr = wait_for(&api, "web", "the spec restored", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 4
    })
    .await;
    println!("helm rollback -> restored: {:?}", rolled.elapsed());
    assert_eq!(hr.status.unwrap().external_revision, None);
    let history = helm_history(&ns.name, "web");
    assert_eq!(history[2].2, "Rollback to 1");
    assert_eq!(history[3].1, "deployed");
    let values = helm(&ns.name, &["get", "values", "web", "-o", "json"]);
    assert!(values.contains("\"two\""), "{values}");
    let events = event_matching(&client, &ns.name, "web", |e| {
        e.contains("applying the spec again")
    })
    .await;
    assert!(
        events
            .iter()
            .any(|e| e.contains("revision 3 (Rollback to 1) was written by Helm")),
        "{events:?}"
    );
    ns.delete().await;
}

/// disabled: status says what runs; nothing is corrected and no Event is emitted.
#[tokio::test]
async fn disabled_says_what_runs_and_does_nothing_else() {
    let (client, ns, api) = eng::setup("external-disabled").await;
    let _engine = eng::start(&client, &ns.name).await;
    rolled_back_by_hand(&api, &ns.name, "web", "disabled").await;
    let hr = wait_for(&api, "web", "the external revision in status", |h| {
        is(h, "Ready", "False", "ExternalRevision")
    })
    .await;
    assert!(
        hr_condition_message(hr.status.as_ref().unwrap()).contains("driftDetection.mode disabled")
    );
    // The status write above is the sign the reconcile handled it; its Events came first.
    let events = events_of(&client, &ns.name, "web").await;
    assert!(
        !events.iter().any(|e| e.starts_with("ExternalRevision")),
        "{events:?}"
    );
    assert_eq!(
        statuses(&ns.name, "web"),
        ["superseded", "superseded", "deployed"]
    );
    // forceAt applies the spec.
    eng::annotate(&api, "web", "reconcile.wheelhouse.dev/forceAt", "restore").await;
    wait_for(&api, "web", "forced back to the spec", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 4
    })
    .await;
    ns.delete().await;
}

fn hr_condition_message(status: &wheelhouse::api::HelmReleaseStatus) -> String {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn kubectl(ns: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(support::testbin().join("kubectl"))
        .args(args)
        .args(["-n", ns])
        .env("KUBECONFIG", support::kubeconfig_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl edit` of the web Deployment's image, as a JSON patch.
fn edit_image(ns: &str) {
    kubectl(
        ns,
        &[
            "patch",
            "deployment/web",
            "--type=json",
            "-p",
            r#"[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "registry.invalid/webapp:hotfix"}]"#,
        ],
    );
}

/// The web Deployment's first container image.
async fn image(client: &kube::Client, ns: &str) -> String {
    support::pod_spec(client, ns, "web").await.containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

async fn replicas(client: &kube::Client, ns: &str) -> i32 {
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns)
        .get("web")
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas
        .unwrap()
}

/// Installs `web` (2 replicas) with `drift` as its driftDetection.
async fn installed(api: &Api<HelmRelease>, drift: serde_json::Value) {
    api.create(
        &PostParams::default(),
        &eng::webapp("web", serde_json::json!({"driftDetection": drift})),
    )
    .await
    .unwrap();
    wait_for(api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
}

fn drifted(h: &HelmRelease) -> bool {
    h.condition("Drifted").is_some_and(|c| c.status == "True")
}

/// A reconcile request, answered: the sign a drift check ran after what came before.
async fn reconciled(api: &Api<HelmRelease>, token: &str) -> HelmRelease {
    eng::annotate(api, "web", "reconcile.wheelhouse.dev/requestedAt", token).await;
    wait_for(api, "web", "the reconcile request handled", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some(token)
    })
    .await
}

/// warn: `kubectl scale` and `kubectl edit` (a patch of the image) are reported with the
/// objects and fields, within moments, and left as they are.
#[tokio::test]
async fn warn_reports_a_scaled_and_edited_deployment() {
    let (client, ns, api) = eng::setup("drift-warn").await;
    let _engine = eng::start(&client, &ns.name).await;
    installed(&api, serde_json::json!({"mode": "warn"})).await;
    let scaled = Instant::now();
    kubectl(&ns.name, &["scale", "deployment/web", "--replicas=5"]);
    let hr = wait_for(&api, "web", "the scale reported as drift", drifted).await;
    println!("kubectl scale -> Drifted: {:?}", scaled.elapsed());
    let drift = hr.status.as_ref().unwrap().drift.clone().unwrap();
    assert_eq!(drift.objects.len(), 1, "{drift:?}");
    assert_eq!(drift.objects[0].object, "Deployment/web");
    assert_eq!(drift.objects[0].fields, ["/spec/replicas"]);
    let message = hr.condition("Drifted").unwrap().message.clone();
    assert!(
        message.contains("Deployment/web: /spec/replicas"),
        "{message}"
    );
    // Ready still says the release is deployed; it is left as it is.
    assert!(is(&hr, "Ready", "True", "InstallSucceeded"));
    assert_eq!(replicas(&client, &ns.name).await, 5);
    let events = event_matching(&client, &ns.name, "web", |e| e.starts_with("Drifted")).await;
    assert!(
        events.iter().any(|e| e.starts_with("Drifted")),
        "{events:?}"
    );

    edit_image(&ns.name);
    let hr = wait_for(&api, "web", "the edit reported too", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.drift.as_ref())
            .is_some_and(|d| {
                d.objects[0]
                    .fields
                    .iter()
                    .any(|f| f.starts_with("/spec/template/spec/containers"))
            })
    })
    .await;
    assert!(
        hr.status.unwrap().drift.unwrap().objects[0]
            .fields
            .contains(&"/spec/replicas".to_owned())
    );
    ns.delete().await;
}

/// enabled: the drifted Deployment is applied again, and nothing else.
#[tokio::test]
async fn enabled_corrects_a_scaled_deployment() {
    let (client, ns, api) = eng::setup("drift-enabled").await;
    let _engine = eng::start(&client, &ns.name).await;
    installed(&api, serde_json::json!({"mode": "enabled"})).await;
    let config = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns.name);
    let config_version = config
        .get("web-config")
        .await
        .unwrap()
        .metadata
        .resource_version;
    let scaled = Instant::now();
    kubectl(&ns.name, &["scale", "deployment/web", "--replicas=5"]);
    // Seen at once: `kubectl scale` (the scale subresource) leaves no time in
    // managedFields, and the engine's wake-up must not wait for the interval for it.
    let hr = wait_for(&api, "web", "the scale corrected", |h| {
        h.condition("Drifted")
            .is_some_and(|c| c.reason == "DriftCorrected")
    })
    .await;
    println!("kubectl scale -> corrected: {:?}", scaled.elapsed());
    assert_eq!(replicas(&client, &ns.name).await, 2);
    assert_eq!(hr.status.unwrap().drift, None);
    // Only the drifted object was applied.
    assert_eq!(
        config
            .get("web-config")
            .await
            .unwrap()
            .metadata
            .resource_version,
        config_version
    );
    let events = event_matching(&client, &ns.name, "web", |e| {
        e.starts_with("DriftCorrected")
    })
    .await;
    assert!(
        events.iter().any(
            |e| e.starts_with("DriftCorrected") && e.contains("Deployment/web: /spec/replicas")
        ),
        "{events:?}"
    );
    // `kubectl edit` of the image: corrected too.
    edit_image(&ns.name);
    let edited = Instant::now();
    while image(&client, &ns.name).await != "registry.invalid/webapp:1.0" {
        assert!(
            edited.elapsed() < support::PATIENCE,
            "the edited image was never restored"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // No new revision: correction is not an upgrade.
    assert_eq!(statuses(&ns.name, "web"), ["deployed"]);
    ns.delete().await;
}

/// An ignore rule leaves the Deployment's replicas to whoever sets them (an HPA, say),
/// even with correction on; disabled looks at nothing.
#[tokio::test]
async fn an_ignore_rule_and_disabled_leave_a_scaled_deployment_alone() {
    let (client, ns, api) = eng::setup("drift-ignore").await;
    let _engine = eng::start(&client, &ns.name).await;
    installed(
        &api,
        serde_json::json!({"mode": "enabled", "ignore": [
            {"paths": ["/spec/replicas"], "target": {"kind": "Deployment", "name": "web"}}]}),
    )
    .await;
    kubectl(&ns.name, &["scale", "deployment/web", "--replicas=5"]);
    let hr = reconciled(&api, "after-scale").await;
    assert!(hr.condition("Drifted").is_none(), "{:?}", hr.status);
    assert_eq!(replicas(&client, &ns.name).await, 5);

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"spec": {"driftDetection": {"mode": "disabled", "ignore": null}}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "the new spec seen", |h| {
        h.status.as_ref().and_then(|s| s.observed_generation) == h.metadata.generation
    })
    .await;
    kubectl(&ns.name, &["scale", "deployment/web", "--replicas=7"]);
    edit_image(&ns.name);
    let hr = reconciled(&api, "disabled").await;
    assert!(hr.condition("Drifted").is_none(), "{:?}", hr.status);
    assert_eq!(replicas(&client, &ns.name).await, 7);
    assert_eq!(
        image(&client, &ns.name).await,
        "registry.invalid/webapp:hotfix"
    );
    ns.delete().await;
}

/// A deleted object is drift (and, enabled, recreated); one the release keeps by policy
/// (`helm.sh/resource-policy: keep`) and the user deleted on purpose is left deleted.
#[tokio::test]
async fn a_deleted_object_is_recreated_unless_the_release_keeps_it_by_policy() {
    let (client, ns, api) = eng::setup("drift-deleted").await;
    let _engine = eng::start(&client, &ns.name).await;
    let config = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns.name);
    for (name, keep) in [("plain", false), ("kept", true)] {
        let spec = serde_json::json!({"values": {"keepConfig": keep}, "driftDetection": {"mode": "enabled"}});
        api.create(&PostParams::default(), &eng::webapp(name, spec))
            .await
            .unwrap();
        wait_for(&api, name, "installed", |h| {
            is(h, "Ready", "True", "InstallSucceeded")
        })
        .await;
        kubectl(
            &ns.name,
            &["delete", "configmap", &format!("{name}-config")],
        );
        eng::annotate(
            &api,
            name,
            "reconcile.wheelhouse.dev/requestedAt",
            "after-delete",
        )
        .await;
        let hr = wait_for(&api, name, "the reconcile request handled", |h| {
            h.status
                .as_ref()
                .and_then(|s| s.last_handled_reconcile_at.as_deref())
                == Some("after-delete")
        })
        .await;
        let exists = config
            .get_opt(&format!("{name}-config"))
            .await
            .unwrap()
            .is_some();
        if keep {
            assert!(!exists, "a kept object the user deleted is not recreated");
            assert!(hr.condition("Drifted").is_none(), "{:?}", hr.status);
        } else {
            assert!(exists, "the deleted ConfigMap is recreated");
            let events =
                event_matching(&client, &ns.name, name, |e| e.starts_with("DriftCorrected")).await;
            assert!(
                events
                    .iter()
                    .any(|e| e.contains("ConfigMap/plain-config missing")),
                "{events:?}"
            );
        }
    }
    ns.delete().await;
}

/// An edit of an object that is not a workload (a ConfigMap) is seen at once too.
#[tokio::test]
async fn an_edited_configmap_is_reported_at_once() {
    let (client, ns, api) = eng::setup("drift-configmap").await;
    let _engine = eng::start(&client, &ns.name).await;
    installed(&api, serde_json::json!({"mode": "warn"})).await;
    let edited = Instant::now();
    kubectl(
        &ns.name,
        &[
            "patch",
            "configmap/web-config",
            "--type=merge",
            "-p",
            r#"{"data": {"MESSAGE": "edited by hand"}}"#,
        ],
    );
    let hr = wait_for(&api, "web", "the edit reported", drifted).await;
    println!("kubectl patch configmap -> Drifted: {:?}", edited.elapsed());
    let drift = hr.status.unwrap().drift.unwrap();
    assert_eq!(drift.objects[0].object, "ConfigMap/web-config");
    assert_eq!(drift.objects[0].fields, ["/data/MESSAGE"]);
    ns.delete().await;
}

/// enabled, against an autoscaler: `fake-hpa` sets the Deployment's replicas to 5 through
/// the scale subresource whenever they are not (as an HPA does), every 200 ms. The engine
/// corrects a few times, then leaves the field to it, says so once naming the manager and
/// the ignore rule, and no longer holds the field: from then on nothing fights.
#[tokio::test]
async fn a_field_an_autoscaler_keeps_changing_back_is_left_to_it() {
    let (client, ns, api) = eng::setup("drift-fight").await;
    let _engine = eng::start(&client, &ns.name).await;
    installed(&api, serde_json::json!({"mode": "enabled"})).await;
    let deployments =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns.name);
    let patches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let hpa = {
        let (deployments, patches) = (deployments.clone(), patches.clone());
        tokio::spawn(async move {
            loop {
                let now = deployments.get("web").await.unwrap();
                if now.spec.and_then(|s| s.replicas) != Some(5) {
                    let params = PatchParams {
                        field_manager: Some("fake-hpa".into()),
                        ..PatchParams::default()
                    };
                    deployments
                        .patch_scale(
                            "web",
                            &params,
                            &Patch::Merge(serde_json::json!({"spec": {"replicas": 5}})),
                        )
                        .await
                        .unwrap();
                    patches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        })
    };
    let hr = wait_for(&api, "web", "the field left to fake-hpa", |h| {
        h.status.as_ref().is_some_and(|s| {
            s.contested
                .iter()
                .any(|f| f.yielded && f.manager == "fake-hpa")
        })
    })
    .await;
    let condition = hr.condition("Drifted").unwrap();
    assert_eq!(condition.reason, "DriftContested", "{condition:?}");
    assert!(
        condition.message.contains("/spec/replicas to fake-hpa"),
        "{condition:?}"
    );
    let events = event_matching(&client, &ns.name, "web", |e| {
        e.starts_with("DriftContested")
    })
    .await;
    let said: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("DriftContested"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {events:#?}");
    assert!(
        said[0].contains("fake-hpa")
            && said[0].contains("driftDetection: {ignore: [{paths: [\"/spec/replicas\"]"),
        "{said:?}"
    );
    // Calm: the autoscaler has nothing more to change back, the engine corrects nothing.
    let corrections = || async {
        eng::events_about(&client, &ns.name, "web")
            .await
            .iter()
            .filter(|e| e.reason.as_deref() == Some("DriftCorrected"))
            .map(|e| e.series.as_ref().map_or(1, |s| s.count))
            .sum::<i32>()
    };
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let (patched, corrected) = (
        patches.load(std::sync::atomic::Ordering::SeqCst),
        corrections().await,
    );
    assert!(
        corrected <= 3,
        "{corrected} corrections before leaving the field"
    );
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    assert_eq!(
        patches.load(std::sync::atomic::Ordering::SeqCst),
        patched,
        "the fight went on"
    );
    assert_eq!(corrections().await, corrected);
    assert_eq!(replicas(&client, &ns.name).await, 5);
    // Never taken by force: the release's manager holds the replicas no more.
    let live = deployments.get("web").await.unwrap();
    let helm_holds = live.metadata.managed_fields.unwrap().iter().any(|m| {
        m.manager.as_deref() == Some("helm")
            && m.fields_v1
                .as_ref()
                .and_then(|f| f.0.pointer("/f:spec/f:replicas"))
                .is_some()
    });
    assert!(!helm_holds, "helm still holds /spec/replicas");
    hpa.abort();
    ns.delete().await;
}

/// Waits (at most 30 s) until the engine counted three drift checks that read nothing.
async fn three_checks_read_nothing(metrics: &wheelhouse::telemetry::Metrics, otherwise: &str) {
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while eng::drift_checks(metrics, "unchanged") < 3 {
        assert!(
            Instant::now() < deadline,
            "{otherwise}: {}",
            metrics.encode()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// An idle release's interval checks read none of its objects while nobody touches them
/// (the engine's watches vouch for them), and still find what changed: a ConfigMap
/// deleted (which wakes nothing) is reported missing at the next interval.
#[tokio::test]
async fn interval_checks_read_nothing_nobody_changed_and_still_find_a_deletion() {
    let (client, ns, api) = eng::setup("drift-idle").await;
    let (_engine, metrics) =
        eng::start_with_metrics(&client, &ns.name, "test-engine-drift-idle").await;
    api.create(
        &PostParams::default(),
        &eng::webapp(
            "web",
            serde_json::json!({"interval": "1s", "driftDetection": {"mode": "warn"}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    three_checks_read_nothing(&metrics, "no interval check relied on the watches").await;
    let compared = eng::drift_checks(&metrics, "compared");
    kubectl(&ns.name, &["delete", "configmap", "web-config"]);
    let hr = wait_for(&api, "web", "the deletion reported", drifted).await;
    let drift = hr.status.unwrap().drift.unwrap();
    assert_eq!(drift.objects[0].object, "ConfigMap/web-config");
    assert!(drift.objects[0].missing, "{drift:?}");
    assert!(
        eng::drift_checks(&metrics, "compared") > compared,
        "found by a check that read the objects"
    );
    ns.delete().await;
}

/// A clean check at the interval is recorded in the release's status (`driftChecked`): an
/// engine started later relies on it and reads nothing of an untouched release, while one
/// whose Deployment was scaled while no engine ran is compared and found drifted. (One
/// namespace and engine each, so each engine's counts are one release's.)
#[tokio::test]
async fn an_engine_started_later_relies_on_the_recorded_check_and_finds_what_changed_meanwhile() {
    let (client, untouched, untouched_api) = eng::setup("drift-restart").await;
    let (_, edited, edited_api) = eng::setup("drift-restart-edit").await;
    let mut first = Vec::new();
    for (ns, api) in [(&untouched, &untouched_api), (&edited, &edited_api)] {
        first.push(eng::start(&client, &ns.name).await);
        let spec = serde_json::json!({"interval": "1s", "driftDetection": {"mode": "warn"}});
        api.create(&PostParams::default(), &eng::webapp("web", spec))
            .await
            .unwrap();
        let hr = wait_for(
            api,
            "web",
            "installed and recorded clean at an interval",
            |h| {
                is(h, "Ready", "True", "InstallSucceeded")
                    && h.status.as_ref().is_some_and(|s| s.drift_checked.is_some())
            },
        )
        .await;
        let checked = hr.status.unwrap().drift_checked.unwrap();
        assert_eq!(checked.revision, 1);
        assert!(checked.objects.starts_with("sha256:"), "{checked:?}");
    }
    for engine in first {
        engine.handle.shutdown();
        engine.handle.stopped().await;
    }

    // Scaled while no engine runs, written as `helm` would: nothing wakes the release for
    // it (nor config tracking, as a ConfigMap's edit would), so only a check can find it.
    kubectl(
        &edited.name,
        &[
            "patch",
            "deployment/web",
            "--type=merge",
            "--field-manager=helm",
            "-p",
            r#"{"spec": {"replicas": 3}}"#,
        ],
    );
    let (_second, edited_metrics) =
        eng::start_with_metrics(&client, &edited.name, "test-engine-drift-restart-edit-2").await;
    let hr = wait_for(&edited_api, "web", "the edit found", drifted).await;
    let drift = hr.status.unwrap().drift.unwrap();
    assert_eq!(drift.objects[0].fields, ["/spec/replicas"], "{drift:?}");
    assert_eq!(eng::drift_checks(&edited_metrics, "unchanged"), 0);

    let (_second, metrics) =
        eng::start_with_metrics(&client, &untouched.name, "test-engine-drift-restart-2").await;
    three_checks_read_nothing(
        &metrics,
        "the untouched release's checks did not rely on the recorded one",
    )
    .await;
    assert_eq!(
        eng::drift_checks(&metrics, "compared"),
        0,
        "the untouched release's first check after the start read nothing"
    );
    untouched.delete().await;
    edited.delete().await;
}
