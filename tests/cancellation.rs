//! Cancellation, the core feature (DESIGN §4): a health-check wait is cancelled (never an
//! apply or a hook) as soon as a newer desired state is ready to apply; spurious events
//! never cancel; an operator's cancel fails the wait and remediates at once.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::engine::{self as eng, helm_history, is, wait_for, webapp};
use support::{TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;
use wheelhouse::engine::{Command, ReleaseKey};

async fn setup(
    prefix: &str,
) -> (
    kube::Client,
    TestNamespace,
    Api<HelmRelease>,
    eng::TestEngine,
) {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, prefix).await;
    let api = Api::namespaced(client.clone(), &ns.name);
    let engine = eng::start(&client, &ns.name).await;
    (client, ns, api, engine)
}

fn values(v: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(serde_json::json!({"spec": {"values": v}}))
}

/// Installs `web`, then upgrades it to pods that never become ready and returns once the
/// engine waits on revision 2 (timeout 5m, so only a cancel can end it soon).
async fn stuck(api: &Api<HelmRelease>, spec: serde_json::Value) {
    let mut full = serde_json::json!({"timeout": "5m"});
    support::engine::merge_into(&mut full, spec);
    api.create(&PostParams::default(), &webapp("web", full))
        .await
        .unwrap();
    wait_for(api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    api.patch(
        "web",
        &PatchParams::default(),
        &values(serde_json::json!({"behavior": "never-ready"})),
    )
    .await
    .unwrap();
    waiting_on(api, 2).await;
}

async fn waiting_on(api: &Api<HelmRelease>, revision: i32) {
    wait_for(
        api,
        "web",
        &format!("waiting on revision {revision}"),
        |h| {
            h.status
                .as_ref()
                .and_then(|s| s.wait.as_ref())
                .is_some_and(|w| w.revision == revision)
        },
    )
    .await;
}

fn revision_of(hr: &HelmRelease) -> i32 {
    hr.status.as_ref().unwrap().history[0].version
}

#[tokio::test]
async fn a_spec_fix_supersedes_the_stuck_wait() {
    let (_client, ns, api, _engine) = setup("cancel-spec").await;
    stuck(&api, serde_json::json!({})).await;

    let pushed = Instant::now();
    api.patch(
        "web",
        &PatchParams::default(),
        &values(serde_json::json!({"behavior": ""})),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "web", "the fix deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && revision_of(h) == 3
    })
    .await;
    // Not a 5-minute timeout (a loose bound; the benchmark measures latency).
    assert!(pushed.elapsed() < Duration::from_secs(60));
    let status = hr.status.unwrap();
    assert_eq!(status.failures, 0, "a superseded wait is not a failure");
    let history = helm_history(&ns.name, "web");
    assert_eq!(history.len(), 3, "{history:#?}");
    assert_eq!(history[1].1, "superseded");
    assert!(
        history[1]
            .2
            .starts_with("superseded by a newer desired state (generation"),
        "{history:#?}"
    );
    assert_eq!(history[2].1, "deployed");
    // No rollback ran: a superseded revision triggers no remediation.
    assert!(history.iter().all(|(_, _, d)| !d.starts_with("Rollback")));
    ns.delete().await;
}

#[tokio::test]
async fn a_values_from_change_supersedes_the_wait_but_identical_data_does_not() {
    let (client, ns, api, _engine) = setup("cancel-valuesfrom").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let cm = |behavior: &str, note: &str| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-values", "annotations": {"note": note}},
            "data": {"values.yaml": format!("behavior: \"{behavior}\"\n")}
        }))
        .unwrap()
    };
    cms.create(&PostParams::default(), &cm("", "first"))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &webapp("web", serde_json::json!({"timeout": "5m", "valuesFrom": [{"kind": "ConfigMap", "name": "web-values"}]})),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    cms.replace(
        "web-values",
        &PostParams::default(),
        &cm("never-ready", "broken"),
    )
    .await
    .unwrap();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
        "reconcile.wheelhouse.dev/requestedAt": "pick-up-broken"}}})),
    )
    .await
    .unwrap();
    waiting_on(&api, 2).await;

    // Rewritten with identical data (only an annotation changes): a new resourceVersion,
    // the same desired state; the wait goes on.
    cms.replace(
        "web-values",
        &PostParams::default(),
        &cm("never-ready", "touched"),
    )
    .await
    .unwrap();
    // And a status-only update of the HelmRelease (what a third party's status write looks like).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let hr = api.get("web").await.unwrap();
    assert!(
        hr.status
            .as_ref()
            .unwrap()
            .wait
            .as_ref()
            .is_some_and(|w| w.revision == 2),
        "the wait was cancelled by identical data"
    );
    assert_eq!(helm_history(&ns.name, "web")[1].1, "pending-upgrade");

    // Real new data supersedes it.
    cms.replace("web-values", &PostParams::default(), &cm("", "fixed"))
        .await
        .unwrap();
    wait_for(&api, "web", "the fix deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && revision_of(h) == 3
    })
    .await;
    let history = helm_history(&ns.name, "web");
    assert_eq!(history[1].1, "superseded", "{history:#?}");
    assert!(
        history[1].2.contains("ConfigMap") && history[1].2.contains("web-values changed"),
        "{history:#?}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn spurious_updates_never_cancel() {
    let (_client, ns, api, engine) = setup("cancel-spurious").await;
    stuck(&api, serde_json::json!({})).await;
    let key = ReleaseKey {
        namespace: ns.name.clone(),
        name: "web".into(),
    };
    // A reconcile request with nothing new, a status-only write, and a label change.
    engine.handle.send(Command::Reconcile(key)).await.unwrap();
    api.patch_status(
        "web",
        &PatchParams::apply("someone-else").force(),
        &Patch::Apply(
            serde_json::json!({"apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
            "status": {"lastHandledForceAt": "unrelated"}}),
        ),
    )
    .await
    .unwrap();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "payments"}}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let hr = api.get("web").await.unwrap();
    assert!(
        hr.status.unwrap().wait.is_some_and(|w| w.revision == 2),
        "a spurious event cancelled the wait"
    );
    assert_eq!(helm_history(&ns.name, "web").len(), 2);
    ns.delete().await;
}

#[tokio::test]
async fn a_fix_that_fails_to_render_leaves_the_wait_alone_and_is_reported() {
    let (_client, ns, api, _engine) = setup("cancel-badfix").await;
    stuck(&api, serde_json::json!({})).await;
    api.patch(
        "web",
        &PatchParams::default(),
        &values(serde_json::json!({"behavior": "", "failRender": true})),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "web", "the render error reported", |h| {
        h.condition("Ready")
            .is_some_and(|c| c.message.contains("refuses to render"))
    })
    .await;
    assert!(
        hr.status.unwrap().wait.is_some_and(|w| w.revision == 2),
        "the wait must go on"
    );
    assert_eq!(helm_history(&ns.name, "web").len(), 2);

    // A good fix then supersedes it.
    api.patch(
        "web",
        &PatchParams::default(),
        &values(serde_json::json!({"failRender": false})),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "the good fix deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && revision_of(h) == 3
    })
    .await;
    ns.delete().await;
}

#[tokio::test]
async fn an_operator_cancel_fails_the_wait_and_rolls_back_at_once() {
    let (_client, ns, api, engine) = setup("cancel-operator").await;
    stuck(
        &api,
        serde_json::json!({"upgrade": {"remediation": {"retries": 1}}}),
    )
    .await;
    let key = ReleaseKey {
        namespace: ns.name.clone(),
        name: "web".into(),
    };
    let pressed = Instant::now();
    engine.handle.send(Command::CancelWait(key)).await.unwrap();
    let hr = wait_for(&api, "web", "rolled back", |h| {
        is(h, "Remediated", "True", "RollbackSucceeded")
    })
    .await;
    assert!(pressed.elapsed() < Duration::from_secs(60));
    let status = hr.status.unwrap();
    assert_eq!(
        status.upgrade_failures, 1,
        "an operator's cancel counts as a failure"
    );
    assert!(status.last_handled_cancel_wait_at.is_some());
    let history = helm_history(&ns.name, "web");
    let described: Vec<_> = history
        .iter()
        .map(|(r, s, d)| format!("{r} {s} {d}"))
        .collect();
    assert!(
        history[1].2.contains("canceled by operator"),
        "{described:#?}"
    );
    assert_eq!(history[2].2, "Rollback to 1", "{described:#?}");
    ns.delete().await;
}

#[tokio::test]
async fn the_cancel_wait_annotation_cancels_like_the_command() {
    let (_client, ns, api, _engine) = setup("cancel-annotation").await;
    stuck(&api, serde_json::json!({})).await;
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
        "reconcile.wheelhouse.dev/cancelWaitAt": "2026-11-21T12:00:00Z"}}})),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "web", "canceled", |h| {
        h.condition("Ready")
            .is_some_and(|c| c.reason == "HealthCheckCanceled" || c.reason == "RetriesExceeded")
            && h.status.as_ref().unwrap().wait.is_none()
    })
    .await;
    assert_eq!(
        hr.status.unwrap().last_handled_cancel_wait_at.as_deref(),
        Some("2026-11-21T12:00:00Z")
    );
    assert!(
        helm_history(&ns.name, "web")[1]
            .2
            .contains("canceled by operator")
    );
    ns.delete().await;
}

#[tokio::test]
async fn with_cancel_on_new_revision_off_the_wait_runs_to_its_timeout() {
    let (_client, ns, api, _engine) = setup("cancel-off").await;
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            serde_json::json!({"timeout": "6s", "healthCheck": {"cancelOnNewRevision": false}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    api.patch(
        "web",
        &PatchParams::default(),
        &values(serde_json::json!({"behavior": "never-ready"})),
    )
    .await
    .unwrap();
    waiting_on(&api, 2).await;
    api.patch(
        "web",
        &PatchParams::default(),
        &values(serde_json::json!({"behavior": ""})),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "the fix deployed after the timeout", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && revision_of(h) == 3
    })
    .await;
    let history = helm_history(&ns.name, "web");
    assert!(history[1].2.contains("timed out after 6s"), "{history:#?}");
    ns.delete().await;
}
