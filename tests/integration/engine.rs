//! The reconcile engine end to end on the local control plane: HelmReleases become real
//! Helm releases that the helm CLI sees, and every action of the state machine runs.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use support::engine::{
    self as eng, condition, helm, helm_history, install_webapp, is, set_values, wait_for, webapp,
};
use support::{TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;

async fn setup(prefix: &str) -> (kube::Client, TestNamespace, Api<HelmRelease>) {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, prefix).await;
    let api = Api::namespaced(client.clone(), &ns.name);
    (client, ns, api)
}

fn merge_patch(v: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(v)
}

#[tokio::test]
async fn installs_to_ready_and_upgrades_on_a_values_change() {
    let (client, ns, api) = setup("eng-install").await;
    let _engine = eng::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &webapp("web", serde_json::json!({"values": {"message": "v1"}})),
    )
    .await
    .unwrap();

    let hr = wait_for(&api, "web", "Ready after install", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let status = hr.status.unwrap();
    assert_eq!(status.history[0].version, 1);
    assert_eq!(status.history[0].status, "deployed");
    assert_eq!(status.last_attempted_revision.as_deref(), Some("1.0.0"));
    let deployment = Api::<Deployment>::namespaced(client.clone(), &ns.name)
        .get("web")
        .await
        .unwrap();
    assert_eq!(deployment.status.unwrap().available_replicas, Some(2));

    let list: serde_json::Value =
        serde_json::from_str(&helm(&ns.name, &["list", "-o", "json"])).unwrap();
    assert_eq!(list[0]["name"], "web");
    assert_eq!(list[0]["status"], "deployed");
    assert_eq!(list[0]["chart"], "webapp-1.0.0");

    set_values(&api, "web", serde_json::json!({"message": "v2"})).await;
    wait_for(&api, "web", "Ready after upgrade", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 2
    })
    .await;
    let values: serde_json::Value =
        serde_json::from_str(&helm(&ns.name, &["get", "values", "web", "-o", "json"])).unwrap();
    assert_eq!(values["message"], "v2");
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["MESSAGE"], "v2");
    let history = helm_history(&ns.name, "web");
    assert_eq!(
        history
            .iter()
            .map(|(r, s, _)| (*r, s.as_str()))
            .collect::<Vec<_>>(),
        [(1, "superseded"), (2, "deployed")]
    );
    assert!(helm(&ns.name, &["get", "manifest", "web"]).contains("MESSAGE: \"v2\""));
    ns.delete().await;
}

/// The wait says, before its deadline, what the engine will do when it fails, and the
/// engine then does exactly that: rollback to revision 1, then the one retry, whose wait
/// says no retry is left.
#[tokio::test]
async fn a_wait_says_what_happens_when_it_fails_and_the_engine_then_does_it() {
    let (client, ns, api) = setup("eng-forecast").await;
    let _engine = eng::start(&client, &ns.name).await;
    let spec = serde_json::json!({"timeout": "8s", "upgrade": {"remediation": {"retries": 1}}});
    install_webapp(&api, "web", spec).await;
    set_values(&api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    let forecast_of = |h: &HelmRelease, revision: i32| {
        h.status
            .as_ref()
            .and_then(|s| s.wait.as_ref())
            .filter(|w| w.revision == revision && w.hook.is_none())
            .and_then(|w| w.if_it_fails.clone())
    };
    let hr = wait_for(&api, "web", "revision 2 waiting, with its forecast", |h| {
        forecast_of(h, 2).is_some()
    })
    .await;
    assert_eq!(
        forecast_of(&hr, 2).unwrap(),
        "upgrade fails -> rollback to revision 1 (webapp 1.0.0); 1 retry left"
    );
    // The retry (revision 4, after the rollback to 1 as revision 3) has none left.
    let hr = wait_for(&api, "web", "revision 4 waiting, with its forecast", |h| {
        forecast_of(h, 4).is_some()
    })
    .await;
    assert_eq!(
        forecast_of(&hr, 4).unwrap(),
        "upgrade fails -> rollback to revision 3 (webapp 1.0.0); 0 retries left"
    );
    let history = helm_history(&ns.name, "web");
    assert_eq!(history[2].0, 3);
    assert_eq!(history[2].2, "Rollback to 1", "{history:?}");
    wait_for(&api, "web", "Stalled after the retry", |h| {
        is(h, "Stalled", "True", "RetriesExceeded")
    })
    .await;
    let history = helm_history(&ns.name, "web");
    assert_eq!(history[4].2, "Rollback to 3", "{history:?}");
    ns.delete().await;
}

#[tokio::test]
async fn a_failed_upgrade_is_remediated_by_rollback() {
    let (client, ns, api) = setup("eng-rollback").await;
    let _engine = eng::start(&client, &ns.name).await;
    let spec = serde_json::json!({"timeout": "3s", "upgrade": {"remediation": {"retries": 1}}});
    install_webapp(&api, "web", spec).await;

    // The new pods never become ready: the wait times out, the engine rolls back, retries
    // once, rolls back again, and stops.
    set_values(&api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    let hr = wait_for(&api, "web", "Stalled after retries", |h| {
        is(h, "Stalled", "True", "RetriesExceeded")
    })
    .await;
    let status = hr.status.unwrap();
    assert_eq!(status.upgrade_failures, 2);
    assert_eq!(
        condition_reason(&hr_remediated(&api).await),
        "RollbackSucceeded"
    );

    let history = helm_history(&ns.name, "web");
    let described: Vec<_> = history
        .iter()
        .map(|(r, s, d)| format!("{r} {s} {d}"))
        .collect();
    // As with `helm rollback`, the revision rolled back from becomes superseded; its
    // description keeps why it failed.
    assert_eq!(history.len(), 5, "{described:#?}");
    for failed in [1, 3] {
        let d = &history[failed].2;
        assert!(
            d.contains("failed: timed out after 3s waiting for Deployment"),
            "{described:#?}"
        );
        assert!(
            d.contains("/web (1 of 2 replicas updated)"),
            "{described:#?}"
        );
    }
    assert_eq!(history[2].2, "Rollback to 1", "{described:#?}");
    assert_eq!(history[4].1, "deployed", "{described:#?}");
    assert_eq!(history[4].2, "Rollback to 3", "{described:#?}");
    // The rollback restored revision 1's pods (no test-behavior label).
    let deployment = Api::<Deployment>::namespaced(client.clone(), &ns.name)
        .get("web")
        .await
        .unwrap();
    let labels = deployment
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .labels
        .unwrap();
    assert!(!labels.contains_key("wheelhouse.dev/test-behavior"));
    ns.delete().await;
}

async fn hr_remediated(api: &Api<HelmRelease>) -> HelmRelease {
    api.get("web").await.unwrap()
}

fn condition_reason(hr: &HelmRelease) -> String {
    condition(hr, "Remediated")
        .map(|(_, r)| r)
        .unwrap_or_default()
}

#[tokio::test]
async fn tests_run_after_install_and_a_failing_test_fails_the_release() {
    let (client, ns, api) = setup("eng-tests").await;
    let _engine = eng::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &webapp(
            "good",
            serde_json::json!({"test": {"enable": true}, "values": {"tests": {"enabled": true}}}),
        ),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &webapp("bad", serde_json::json!({"test": {"enable": true}, "values": {"tests": {"enabled": true, "fail": true}}})),
    )
    .await
    .unwrap();

    let good = wait_for(&api, "good", "tests passed", |h| {
        is(h, "Ready", "True", "TestSucceeded")
    })
    .await;
    assert!(is(&good, "TestSuccess", "True", "TestSucceeded"));
    assert_eq!(
        good.status.unwrap().history[0].test_result.as_deref(),
        Some("passed")
    );

    let bad = wait_for(&api, "bad", "tests failed", |h| {
        is(h, "TestSuccess", "False", "TestFailed")
    })
    .await;
    let (ready, _) = condition(&bad, "Ready").unwrap();
    assert_eq!(ready, "False");
    let message = bad.condition("TestSuccess").unwrap().message.clone();
    assert!(message.contains("bad-test"), "{message}");
    ns.delete().await;
}

#[tokio::test]
async fn deleting_the_helmrelease_uninstalls_the_release() {
    let (client, ns, api) = setup("eng-delete").await;
    let _engine = eng::start(&client, &ns.name).await;
    install_webapp(&api, "web", serde_json::json!({})).await;

    // Gone for real: the finalizer held it until the release was uninstalled.
    eng::delete_and_await_uninstall(&client, &ns.name, "web").await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        deployments
            .items
            .iter()
            .all(|d| d.metadata.deletion_timestamp.is_some()),
        "objects left behind: {:?}",
        deployments
            .items
            .iter()
            .map(|d| &d.metadata)
            .collect::<Vec<_>>()
    );
    ns.delete().await;
}

#[tokio::test]
async fn a_suspended_release_is_left_alone_until_resumed() {
    let (client, ns, api) = setup("eng-suspend").await;
    let engine = eng::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &webapp("web", serde_json::json!({"suspend": true})),
    )
    .await
    .unwrap();
    // The worker handled it (a positive sign: its finalizer is on), and installed nothing.
    eng::wait_for(&api, "web", "the finalizer added", |h| {
        h.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == wheelhouse::api::FINALIZER))
    })
    .await;
    assert!(
        helm_history_opt(&ns.name, "web").is_empty(),
        "a suspended release was installed"
    );

    let key = wheelhouse::engine::ReleaseKey {
        namespace: ns.name.clone(),
        name: "web".into(),
    };
    engine
        .handle
        .send(wheelhouse::engine::Command::Resume(key.clone()))
        .await
        .unwrap();
    wait_for(&api, "web", "installed after resume", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    engine
        .handle
        .send(wheelhouse::engine::Command::Suspend(key))
        .await
        .unwrap();
    assert!(api.get("web").await.unwrap().spec.suspend);
    ns.delete().await;
}

/// The pin as the dashboard's `b` writes it: suspend and rollbackTo in one patch; the
/// rollback is the engine's own (a new revision, as `helm rollback`), status names the pin,
/// and resume returns the release to its spec with an upgrade.
#[tokio::test]
async fn a_pinned_release_is_rolled_back_held_there_and_returned_to_its_spec_on_resume() {
    let (client, ns, api) = setup("eng-pin").await;
    let engine = eng::start(&client, &ns.name).await;
    install_webapp(
        &api,
        "web",
        serde_json::json!({"values": {"message": "one"}}),
    )
    .await;
    set_values(&api, "web", serde_json::json!({"message": "two"})).await;
    wait_for(&api, "web", "upgraded to revision 2", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status
                .as_ref()
                .is_some_and(|s| s.history.first().is_some_and(|r| r.version == 2))
    })
    .await;

    let key = wheelhouse::engine::ReleaseKey::new(&ns.name, "web");
    engine
        .handle
        .send(wheelhouse::engine::Command::Pin {
            key: key.clone(),
            revision: 1,
            by: "alice@example.com".into(),
        })
        .await
        .unwrap();
    let pinned = wait_for(&api, "web", "pinned", |h| is(h, "Ready", "True", "Pinned")).await;
    let pin = pinned.status.as_ref().unwrap().pinned.clone().unwrap();
    assert_eq!((pin.revision, pin.recorded_as), (1, 3));
    assert_eq!(pin.by, "alice@example.com");
    let ready = pinned.condition("Ready").unwrap().message.clone();
    assert!(
        ready.starts_with("pinned to revision 1 by alice@example.com at ")
            && ready.ends_with("; resume to return to the spec"),
        "{ready}"
    );
    assert!(pinned.spec.suspend);
    // As helm rollback records it: revision 3, deployed, "Rollback to 1", with revision
    // 1's values; revision 2 superseded.
    let history = helm_history(&ns.name, "web");
    assert_eq!(
        history,
        [
            (1, "superseded".into(), "Install complete".into()),
            (2, "superseded".into(), "Upgrade complete".into()),
            (3, "deployed".into(), "Rollback to 1".into()),
        ]
    );
    let values = helm(&ns.name, &["get", "values", "web", "-o", "json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&values).unwrap(),
        serde_json::json!({"message": "one"})
    );
    let pinned_event = |e: &str| e.contains("Pinned") && e.contains("alice@example.com");
    let events = eng::event_matching(&client, &ns.name, "web", pinned_event).await;
    assert!(events.iter().any(|e| pinned_event(e)), "{events:?}");
    // Held there: a reconcile request while suspended changes nothing (its token is
    // recorded as handled: the positive sign it was looked at).
    eng::annotate(
        &api,
        "web",
        wheelhouse::api::annotations::RECONCILE_REQUESTED_AT,
        "look",
    )
    .await;
    wait_for(&api, "web", "the reconcile request handled", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some("look")
    })
    .await;
    assert_eq!(
        helm_history(&ns.name, "web").len(),
        3,
        "a pinned release was upgraded"
    );

    // Resume: the pin goes, and the spec (message: two) is applied as revision 4.
    engine
        .handle
        .send(wheelhouse::engine::Command::Resume(key))
        .await
        .unwrap();
    let resumed = wait_for(&api, "web", "back on the spec", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().is_some_and(|s| s.pinned.is_none())
    })
    .await;
    assert_eq!(resumed.status.as_ref().unwrap().history[0].version, 4);
    let values = helm(&ns.name, &["get", "values", "web", "-o", "json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&values).unwrap(),
        serde_json::json!({"message": "two"})
    );
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        cm.items.iter().any(|c| c
            .data
            .as_ref()
            .is_some_and(|d| d.values().any(|v| v.contains("two")))),
        "the spec's ConfigMap is back"
    );
    ns.delete().await;
}

/// A rollbackTo without suspend pins nothing (the next reconcile would undo it): refused
/// with an Event, and no revision written.
#[tokio::test]
async fn a_rollback_request_without_suspend_is_refused() {
    let (client, ns, api) = setup("eng-pin-refused").await;
    let _engine = eng::start(&client, &ns.name).await;
    install_webapp(&api, "web", serde_json::json!({})).await;
    let request = wheelhouse::api::RollbackRequest {
        revision: 1,
        requested_by: "bob".into(),
        requested_at: "t1".into(),
    };
    eng::annotate(
        &api,
        "web",
        wheelhouse::api::annotations::ROLLBACK_TO,
        &request.to_annotation(),
    )
    .await;
    wait_for(&api, "web", "the request handled", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_rollback_to.as_deref())
            == Some(request.to_annotation().as_str())
    })
    .await;
    let refused = |e: &str| e.contains("RollbackRefused") && e.contains("spec.suspend");
    let events = eng::event_matching(&client, &ns.name, "web", refused).await;
    assert!(events.iter().any(|e| refused(e)), "{events:?}");
    assert_eq!(helm_history(&ns.name, "web").len(), 1);
    let hr = api.get("web").await.unwrap();
    assert!(hr.status.unwrap().pinned.is_none());
    ns.delete().await;
}

fn helm_history_opt(ns: &str, release: &str) -> Vec<String> {
    let out = std::process::Command::new(support::testbin().join("helm"))
        .args([
            "history",
            release,
            "-o",
            "json",
            "--namespace",
            ns,
            "--kubeconfig",
        ])
        .arg(support::kubeconfig_path())
        .output()
        .unwrap();
    if out.status.success() {
        vec![String::from_utf8_lossy(&out.stdout).into_owned()]
    } else {
        vec![]
    }
}

#[tokio::test]
async fn depends_on_holds_a_release_until_its_dependency_is_ready() {
    let (client, ns, api) = setup("eng-deps").await;
    let _engine = eng::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &webapp("app", serde_json::json!({"dependsOn": [{"name": "db"}]})),
    )
    .await
    .unwrap();
    let held = wait_for(&api, "app", "held by its dependency", |h| {
        is(h, "Ready", "False", "DependencyNotReady")
    })
    .await;
    assert!(held.condition("Ready").unwrap().message.contains("db"));
    assert!(helm_history_opt(&ns.name, "app").is_empty());

    api.create(&PostParams::default(), &webapp("db", serde_json::json!({})))
        .await
        .unwrap();
    let db = wait_for(&api, "db", "db ready", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let app = wait_for(&api, "app", "app ready after db", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let deployed = |h: &HelmRelease| {
        h.status.as_ref().unwrap().history[0]
            .first_deployed
            .clone()
            .unwrap()
            .0
    };
    assert!(deployed(&app) >= deployed(&db));
    ns.delete().await;
}

/// Issue #17 (causes, not clocks): a release that failed for want of its valuesFrom
/// ConfigMap installs as soon as the ConfigMap appears, without a request, long before
/// its 10 m interval and without waiting out its backoff.
#[tokio::test]
async fn a_missing_values_source_is_picked_up_as_soon_as_it_appears() {
    let (client, ns, api) = setup("eng-lateval").await;
    let (engine, metrics) =
        support::engine::start_with_metrics(&client, &ns.name, "late-values-engine").await;
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            serde_json::json!({"interval": "10m", "valuesFrom": [{"kind": "ConfigMap", "name": "late-values"}]}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "InitFailed", |h| {
        is(h, "Ready", "False", "InitFailed")
    })
    .await;
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "late-values"}, "data": {"values.yaml": "message: late\n"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    wait_for(&api, "web", "installed once the ConfigMap appeared", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    // Started by the ConfigMap's appearing, not by a clock.
    assert_eq!(
        support::engine::cause_retries(&metrics, "values_source"),
        1,
        "{}",
        metrics.encode()
    );
    drop(engine);
    ns.delete().await;
}

#[tokio::test]
async fn missing_values_source_gives_a_clear_condition_and_applies_nothing() {
    let (client, ns, api) = setup("eng-badvalues").await;
    let _engine = eng::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            serde_json::json!({"valuesFrom": [{"kind": "ConfigMap", "name": "web-values"}]}),
        ),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "web", "InitFailed", |h| {
        is(h, "Ready", "False", "InitFailed")
    })
    .await;
    let message = &hr.condition("Ready").unwrap().message;
    assert!(
        message.contains("web-values") && message.contains("not found"),
        "{message}"
    );
    assert!(helm_history_opt(&ns.name, "web").is_empty());
    assert!(
        Api::<Deployment>::namespaced(client.clone(), &ns.name)
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
    );

    // Providing the ConfigMap (and asking for a reconcile) lets it install.
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-values"}, "data": {"values.yaml": "message: from-configmap\n"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    api.patch(
        "web",
        &PatchParams::default(),
        &merge_patch(serde_json::json!({"metadata": {"annotations": {
        "reconcile.wheelhouse.dev/requestedAt": "now"}}})),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "web", "installed on request", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
            && h.status
                .as_ref()
                .unwrap()
                .last_handled_reconcile_at
                .as_deref()
                == Some("now")
    })
    .await;
    let status = hr.status.unwrap();
    assert_eq!(
        status.last_handled_reconcile_at.as_deref(),
        Some("now"),
        "{status:#?}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn a_second_engine_stays_passive_while_the_first_holds_the_lease() {
    let (client, ns, api) = setup("eng-lease").await;
    let first = eng::start(&client, &ns.name).await;
    let (config, _cache) = eng::config(&ns.name, "second-engine");
    let second = wheelhouse::engine::start(client.clone(), config).unwrap();
    let mut role = second.role();
    tokio::time::timeout(
        support::PATIENCE,
        role.wait_for(|r| matches!(r, wheelhouse::engine::Role::Follower { .. })),
    )
    .await
    .expect("second engine became a follower")
    .unwrap();

    install_webapp(&api, "web", serde_json::json!({})).await;
    // Only the leader wrote: one revision, and the second engine still follows.
    assert_eq!(helm_history(&ns.name, "web").len(), 1);
    assert!(matches!(
        *second.role().borrow(),
        wheelhouse::engine::Role::Follower { .. }
    ));
    // The follower sees the release and its commands still reach the cluster.
    let views = second.views();
    assert!(views.borrow().keys().any(|k| k.name == "web"));
    second
        .send(wheelhouse::engine::Command::Suspend(
            wheelhouse::engine::ReleaseKey {
                namespace: ns.name.clone(),
                name: "web".into(),
            },
        ))
        .await
        .unwrap();
    assert!(api.get("web").await.unwrap().spec.suspend);
    second.shutdown();
    drop(first);
    ns.delete().await;
}

/// The dashboard's engine takes its Lease only once the dashboard lets it (its first
/// screen whole): until then it shows the releases and reconciles none.
#[tokio::test]
async fn an_engine_held_by_its_front_end_shows_releases_and_reconciles_them_once_let() {
    let (client, ns, api) = setup("eng-gate").await;
    // Beside it, started at the same moment, an engine nobody holds with a release of
    // its own: once that one is installed, the held engine has had the time to act.
    let free_ns = TestNamespace::new(&client, "eng-gate-free").await;
    let free_api: Api<HelmRelease> = Api::namespaced(client.clone(), &free_ns.name);
    let (mut config, _cache) = eng::config(&ns.name, "gated-engine");
    let (open, held) = tokio::sync::watch::channel(false);
    config.start_after = Some(held);
    let (free_config, _free_cache) = eng::config(&free_ns.name, "free-engine");
    let engine = wheelhouse::engine::start(client.clone(), config).unwrap();
    let free = wheelhouse::engine::start(client.clone(), free_config).unwrap();
    for api in [&api, &free_api] {
        api.create(
            &PostParams::default(),
            &webapp("web", serde_json::json!({})),
        )
        .await
        .unwrap();
    }
    // The held engine's views show its release ...
    let mut views = engine.views();
    tokio::time::timeout(
        support::PATIENCE,
        views.wait_for(|v| v.listed && v.keys().any(|k| k.name == "web")),
    )
    .await
    .expect("the views show the release")
    .unwrap();
    // ... and the free engine's release, created at the same moment, is installed.
    wait_for(&free_api, "web", "installed by the free engine", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    assert!(
        !matches!(*engine.role().borrow(), wheelhouse::engine::Role::Leader),
        "the engine took its Lease before it was let"
    );
    assert!(api.get("web").await.unwrap().status.is_none());
    let records = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &ns.name)
        .list(&ListParams::default().labels("owner=helm,name=web"))
        .await
        .unwrap();
    assert!(records.items.is_empty(), "a release record was stored");
    open.send_replace(true);
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    assert_eq!(helm_history(&ns.name, "web").len(), 1);
    engine.shutdown();
    free.shutdown();
    ns.delete().await;
    free_ns.delete().await;
}

#[tokio::test]
async fn config_tracking_through_the_engine_rolls_exactly_once() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    let (client, ns, api) = setup("eng-tracking").await;
    let engine = eng::start(&client, &ns.name).await;
    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), &ns.name);
    let count = || async {
        replica_sets
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .len()
    };
    install_webapp(
        &api,
        "web",
        serde_json::json!({"values": {"message": "one"}}),
    )
    .await;
    // The hash was in the template from the first apply: one ReplicaSet, pods started once.
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns.name);
    let first_hash = eng::config_hash(&deployments, "web").await;
    assert_eq!(count().await, 1);

    // A values change that changes the consumed ConfigMap: one upgrade, one rollout.
    set_values(&api, "web", serde_json::json!({"message": "two"})).await;
    wait_for(&api, "web", "upgraded", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    // Once the tracker has handled the Deployment as it is now, with nothing left to
    // decide, nothing else rolled it.
    eng::tracker_caught_up(&engine, &client, &ns.name, "web").await;
    assert_eq!(count().await, 2);
    let second_hash = eng::config_hash(&deployments, "web").await;
    assert_ne!(first_hash, second_hash);
    ns.delete().await;
}

/// A running hook is visible (issue "Keeps shipping fixes", point 6): status.wait names
/// it with its event, start and deadline while it runs, as a health check's wait is shown.
#[tokio::test]
async fn a_running_hook_is_shown_in_status() {
    let (client, ns, api) = setup("eng-hook").await;
    let _engine = eng::start(&client, &ns.name).await;
    eng::install_webapp(&api, "web", serde_json::json!({"timeout": "30s"})).await;
    set_values(
        &api,
        "web",
        serde_json::json!({"postUpgradeHook": true, "hookBehavior": "never-ready"}),
    )
    .await;
    let running = eng::wait_for(&api, "web", "the hook shown in status.wait", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.wait.as_ref())
            .and_then(|w| w.hook.as_deref())
            .is_some()
    })
    .await;
    let wait = running.status.unwrap().wait.unwrap();
    assert_eq!(
        wait.hook.as_deref(),
        Some("Job/web-migrate (post-upgrade hook)")
    );
    assert_eq!(wait.revision, 2);
    let window = wait.deadline.0.duration_since(wait.started_at.0);
    assert_eq!(window.as_secs(), 30, "the hook's timeout");

    // Deleted while the hook runs: the hook is not interrupted, and status says what the
    // deletion waits for; the uninstall follows once the hook ended.
    api.delete("web", &Default::default()).await.unwrap();
    eng::wait_for(&api, "web", "the deletion told it waits for the hook", |h| {
        h.condition("Reconciling").is_some_and(|c| {
            c.message.contains(
                "deletion requested: waiting for the running hook Job/web-migrate (post-upgrade hook) to finish",
            )
        })
    })
    .await;
    eng::delete_and_await_uninstall(&client, &ns.name, "web").await;
    ns.delete().await;
}

/// Events say what happened last: after several upgrades, the newest UpgradeSucceeded
/// Event names the newest revision (kube's recorder kept the first note of a reason), and
/// a repeat of the very same note is counted in its Event's series, not a new Event.
#[tokio::test]
async fn events_name_the_newest_revision() {
    let (client, ns, api) = setup("eng-events").await;
    let _engine = eng::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            serde_json::json!({"values": {"message": "v1", "replicaCount": 1}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    for revision in 2..=6 {
        set_values(
            &api,
            "web",
            serde_json::json!({"message": format!("v{revision}"), "replicaCount": 1}),
        )
        .await;
        wait_for(&api, "web", "upgraded", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
                && h.status.as_ref().unwrap().history[0].version == revision
        })
        .await;
    }
    let newest = |events: &[k8s_openapi::api::events::v1::Event]| {
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some("UpgradeSucceeded"))
            .max_by_key(|e| {
                e.series
                    .as_ref()
                    .map(|s| s.last_observed_time.0)
                    .or_else(|| e.event_time.as_ref().map(|t| t.0))
            })
            .and_then(|e| e.note.clone())
            .unwrap_or_default()
    };
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    loop {
        let events = eng::events_about(&client, &ns.name, "web").await;
        let note = newest(&events);
        if note.contains("web.v6") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the newest UpgradeSucceeded Event says {note:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let upgrades = eng::events_about(&client, &ns.name, "web")
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("UpgradeSucceeded"))
        .count();
    assert_eq!(upgrades, 5, "one Event per upgrade, each with its own note");
    ns.delete().await;
}

/// Waits (at most 30 s) until the engine counted `n` interval checks that read no history.
async fn unchanged_checks_reach(metrics: &wheelhouse::telemetry::Metrics, n: u64, otherwise: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while eng::unchanged_checks(metrics) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{otherwise}: {}",
            metrics.encode()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The interval checks of a release nothing touched read no history (counted), and still
/// find what no event tells of: its chart directory edited on disk (a new version, a new
/// template) is read again at the next check and upgraded to, as `helm upgrade` of the
/// edited directory would; then the checks read nothing again, and upgrade nothing more.
#[tokio::test]
async fn interval_checks_read_no_history_while_nothing_changed_and_find_an_edited_chart_path() {
    let (client, ns, api) = setup("eng-unchanged").await;
    let (_engine, metrics) =
        eng::start_with_metrics(&client, &ns.name, "test-engine-unchanged").await;
    let charts = tempfile::tempdir().unwrap();
    let chart = charts.path().join("webapp");
    support::copy_dir(std::path::Path::new(&eng::chart("webapp")), &chart);
    let spec = serde_json::json!({
        "interval": "1s",
        "chart": {"path": chart.display().to_string()},
    });
    api.create(&PostParams::default(), &webapp("web", spec))
        .await
        .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    unchanged_checks_reach(&metrics, 3, "no interval check went without the history").await;

    // Edited on disk, which no watch sees: a new version, with one more object.
    let chart_yaml = chart.join("Chart.yaml");
    let text = std::fs::read_to_string(&chart_yaml).unwrap();
    std::fs::write(
        &chart_yaml,
        text.replace("version: 1.0.0", "version: 1.0.1"),
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/edited.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-edited\ndata:\n  edited: \"yes\"\n",
    )
    .unwrap();
    wait_for(&api, "web", "the edited chart upgraded to", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    let expected: Vec<(i64, String, String)> = vec![
        (1, "superseded".into(), "webapp-1.0.0".into()),
        (2, "deployed".into(), "webapp-1.0.1".into()),
    ];
    assert_eq!(eng::helm_history_charts(&ns.name, "web"), expected);
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let edited = configs.get("web-edited").await.unwrap();
    assert_eq!(edited.data.unwrap()["edited"], "yes");

    // Unchanged again: the checks read nothing, and the history stays as it is.
    let after = eng::unchanged_checks(&metrics);
    unchanged_checks_reach(
        &metrics,
        after + 3,
        "the checks after the upgrade read the history",
    )
    .await;
    assert_eq!(eng::helm_history_charts(&ns.name, "web"), expected);
    ns.delete().await;
}

/// An interval check that finds nothing changed writes nothing: the first one after the
/// install records its clean drift check (`status.driftChecked`, which a restart relies
/// on), and those after it leave the HelmRelease as it is. At 10,000 releases every check
/// writing its status again was a thousand status writes a minute on an idle engine.
#[tokio::test]
async fn interval_checks_after_the_first_write_no_status() {
    let (client, ns, api) = setup("eng-quiet-checks").await;
    let (_engine, metrics) =
        eng::start_with_metrics(&client, &ns.name, "test-engine-quiet-checks").await;
    let checked = installed_in_sync(&api, &metrics).await;
    let before = api.get("web").await.unwrap();
    let writes = eng::status_writes(&metrics);
    // The positive sign: three more checks made (counted), each finding it unchanged.
    unchanged_checks_reach(&metrics, checked + 3, "the checks stopped").await;
    // A write of the same status changes nothing stored (no resourceVersion, no event):
    // the engine's count of the writes it sent is what tells.
    assert_eq!(
        eng::status_writes(&metrics),
        writes,
        "an unchanged check sent its status again"
    );
    left_as_it_was(&api, &before, "an unchanged check").await;
    ns.delete().await;
}

/// Installs `web` checked every second and waits until its clean drift check is recorded
/// and an interval check after that record found it unchanged; returns the count of
/// unchanged checks by then.
async fn installed_in_sync(
    api: &Api<HelmRelease>,
    metrics: &wheelhouse::telemetry::Metrics,
) -> u64 {
    let spec = serde_json::json!({"interval": "1s"});
    api.create(&PostParams::default(), &webapp("web", spec))
        .await
        .unwrap();
    wait_for(api, "web", "its clean drift check recorded", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
            && h.status.as_ref().is_some_and(|s| s.drift_checked.is_some())
    })
    .await;
    let checked = eng::unchanged_checks(metrics);
    // Two: the first may be the check whose record was just read.
    unchanged_checks_reach(metrics, checked + 2, "no interval check after the record").await;
    checked + 2
}

/// The HelmRelease `web` is as `before`: its status, and no write at all.
async fn left_as_it_was(api: &Api<HelmRelease>, before: &HelmRelease, by: &str) {
    let after = api.get("web").await.unwrap();
    assert_eq!(
        serde_json::to_value(&after.status).unwrap(),
        serde_json::to_value(&before.status).unwrap(),
        "{by} changed the status"
    );
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "{by} wrote the HelmRelease"
    );
}

/// A restart over a release in sync writes nothing: the new engine's first reconcile
/// (the positive sign: its metrics count it) reads the release's history and finds it as
/// the last engine left it, drift included (`status.driftChecked`), and leaves the
/// HelmRelease as it is. At 10,000 releases a restart that wrote every status was 10,000
/// writes in its first minute.
#[tokio::test]
async fn a_restart_over_a_release_in_sync_writes_no_status() {
    let (client, ns, api) = setup("eng-quiet-restart").await;
    let (first, metrics) =
        eng::start_with_metrics(&client, &ns.name, "test-engine-quiet-restart-1").await;
    installed_in_sync(&api, &metrics).await;
    first.handle.shutdown();
    first.handle.stopped().await;
    drop(first);
    // Its times as another writer would leave them, with microseconds (a custom
    // resource's status keeps what was written): the same status once written.
    let mut by_hand = serde_json::to_value(api.get("web").await.unwrap().status).unwrap();
    for condition in by_hand["conditions"].as_array_mut().unwrap() {
        let time = condition["lastTransitionTime"].as_str().unwrap().to_owned();
        condition["lastTransitionTime"] = time.replace('Z', ".123456Z").into();
    }
    api.patch_status(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"status": by_hand})),
    )
    .await
    .unwrap();
    let before = api.get("web").await.unwrap();
    assert!(
        before.status.as_ref().unwrap().conditions.iter().all(|c| c
            .last_transition_time
            .0
            .subsec_nanosecond()
            == 123_456_000),
        "the times written by hand are kept"
    );

    let (_second, metrics) =
        eng::start_with_metrics(&client, &ns.name, "test-engine-quiet-restart-2").await;
    let reconciled = |m: &wheelhouse::telemetry::Metrics| {
        m.encode()
            .lines()
            .filter(|l| l.starts_with("gotk_reconcile_duration_seconds_count{"))
            .filter(|l| l.contains("name=\"web\""))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum::<u64>()
    };
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while reconciled(&metrics) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the new engine never reconciled the release twice: {}",
            metrics.encode()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // A write of the same status changes nothing stored: the count of writes sent tells.
    assert_eq!(
        eng::status_writes(&metrics),
        0,
        "the restart sent the release's status again"
    );
    left_as_it_was(&api, &before, "the restart").await;
    ns.delete().await;
}
