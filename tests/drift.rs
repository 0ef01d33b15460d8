//! A revision written by someone else: `helm rollback` (or `helm upgrade`) by hand on a
//! wheelhouse release, with the real helm CLI, under each `driftDetection.mode`. The
//! releases' interval is the default 10 minutes, so a status that changes within the
//! tests' patience was woken by the storage watch, not by the interval.

mod support;

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
