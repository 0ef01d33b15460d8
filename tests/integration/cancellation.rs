//! Cancellation, the core feature (docs/design.md, "Cancellation: a wait, never an apply"): a health-check wait is cancelled (never an
//! apply or a hook) as soon as a newer desired state is ready to apply; spurious events
//! never cancel; an operator's cancel fails the wait and remediates at once.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::engine::{
    self as eng, helm_history, install_webapp, is, set_values, wait_for, waiting_on,
};
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

/// Waits until the engine's live state of `ns/web` satisfies `pred`: the positive sign
/// that the worker took an update in, or checked a trigger, before absences are asserted.
async fn live_until(
    engine: &eng::TestEngine,
    ns: &str,
    what: &str,
    pred: impl Fn(&wheelhouse::engine::LiveState) -> bool,
) -> wheelhouse::engine::LiveState {
    let key = ReleaseKey {
        namespace: ns.into(),
        name: "web".into(),
    };
    let mut live = engine.handle.live();
    tokio::time::timeout(
        support::PATIENCE,
        live.wait_for(|m| m.get(&key).is_some_and(&pred)),
    )
    .await
    .unwrap_or_else(|_| panic!("the worker never showed {what}"))
    .unwrap()
    .get(&key)
    .cloned()
    .unwrap()
}

/// Whether resourceVersion `seen` is `version` or later. Opaque to clients in general;
/// this API server's are etcd revisions, which only grow: a test may compare them.
fn at_least(seen: Option<&str>, version: Option<&str>) -> bool {
    let number = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
    matches!((number(seen), number(version)), (Some(s), Some(v)) if s >= v)
}

fn checks(engine: &eng::TestEngine, ns: &str) -> u32 {
    let key = ReleaseKey {
        namespace: ns.into(),
        name: "web".into(),
    };
    engine
        .handle
        .live()
        .borrow()
        .get(&key)
        .map_or(0, |l| l.checks)
}

/// Installs `web`, then upgrades it to pods that never become ready and returns once the
/// engine waits on revision 2 (timeout 5m, so only a cancel can end it soon).
async fn stuck(api: &Api<HelmRelease>, spec: serde_json::Value) {
    let mut full = serde_json::json!({"timeout": "5m"});
    support::engine::merge_into(&mut full, spec);
    install_webapp(api, "web", full).await;
    set_values(api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    waiting_on(api, "web", 2).await;
}

/// Revision 2 of `helm history` is `superseded`, its description naming the trigger.
fn assert_superseded(history: &[(i64, String, String)], description: &[&str]) {
    let (_, status, text) = &history[1];
    assert_eq!(status, "superseded", "{history:#?}");
    for part in description {
        assert!(text.contains(part), "{part:?} not in {history:#?}");
    }
}

fn revision_of(hr: &HelmRelease) -> i32 {
    hr.status.as_ref().unwrap().history[0].version
}

#[tokio::test]
async fn a_spec_fix_supersedes_the_stuck_wait() {
    let (_client, ns, api, _engine) = setup("cancel-spec").await;
    stuck(&api, serde_json::json!({})).await;

    let pushed = Instant::now();
    set_values(&api, "web", serde_json::json!({"behavior": ""})).await;
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
    assert_superseded(
        &history,
        &["superseded by a newer desired state (generation"],
    );
    assert_eq!(history[2].1, "deployed");
    // No rollback ran: a superseded revision triggers no remediation.
    assert!(history.iter().all(|(_, _, d)| !d.starts_with("Rollback")));
    ns.delete().await;
}

#[tokio::test]
async fn a_values_from_change_supersedes_the_wait_but_identical_data_does_not() {
    let (client, ns, api, engine) = setup("cancel-valuesfrom").await;
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
    install_webapp(&api, "web", serde_json::json!({"timeout": "5m", "valuesFrom": [{"kind": "ConfigMap", "name": "web-values"}]})).await;
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
    waiting_on(&api, "web", 2).await;

    // Rewritten with identical data (only an annotation changes): a new resourceVersion,
    // the same desired state; the wait goes on once the worker has checked it.
    let before = checks(&engine, &ns.name);
    cms.replace(
        "web-values",
        &PostParams::default(),
        &cm("never-ready", "touched"),
    )
    .await
    .unwrap();
    live_until(&engine, &ns.name, "the rewritten ConfigMap checked", |l| {
        l.checks > before
    })
    .await;
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
    assert_superseded(&history, &["ConfigMap", "web-values changed"]);
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
    let before = checks(&engine, &ns.name);
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
    let labelled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "payments"}}})),
        )
        .await
        .unwrap();
    // The worker took the last of them in (or a later version: its own status writes
    // follow) and checked the reconcile request.
    let version = labelled.metadata.resource_version;
    live_until(&engine, &ns.name, "the updates handled", |l| {
        at_least(l.seen.as_deref(), version.as_deref()) && l.checks > before
    })
    .await;
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
    set_values(
        &api,
        "web",
        serde_json::json!({"behavior": "", "failRender": true}),
    )
    .await;
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
    set_values(&api, "web", serde_json::json!({"failRender": false})).await;
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
    stuck(
        &api,
        serde_json::json!({"timeout": "6s", "healthCheck": {"cancelOnNewRevision": false}}),
    )
    .await;
    set_values(&api, "web", serde_json::json!({"behavior": ""})).await;
    wait_for(&api, "web", "the fix deployed after the timeout", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && revision_of(h) == 3
    })
    .await;
    let history = helm_history(&ns.name, "web");
    assert!(history[1].2.contains("timed out after 6s"), "{history:#?}");
    ns.delete().await;
}

/// The webapp fixture chart packaged as `.tgz` with another version and default values.
fn webapp_tgz(version: &str, behavior: &str) -> Vec<u8> {
    use std::io::Write;
    let dir = std::path::PathBuf::from(support::engine::chart("webapp"));
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(encoder);
    let mut add = |path: String, data: Vec<u8>| {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("webapp/{path}"), data.as_slice())
            .unwrap();
    };
    let chart = std::fs::read_to_string(dir.join("Chart.yaml"))
        .unwrap()
        .replace("version: 1.0.0", &format!("version: {version}"));
    add("Chart.yaml".into(), chart.into_bytes());
    let values = std::fs::read_to_string(dir.join("values.yaml"))
        .unwrap()
        .replace("behavior: \"\"", &format!("behavior: \"{behavior}\""));
    add("values.yaml".into(), values.into_bytes());
    for entry in std::fs::read_dir(dir.join("templates")).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            add(
                format!("templates/{}", entry.file_name().to_string_lossy()),
                std::fs::read(entry.path()).unwrap(),
            );
        }
    }
    let mut encoder = tar.into_inner().unwrap();
    encoder.flush().unwrap();
    encoder.finish().unwrap()
}

#[tokio::test]
async fn a_new_chart_version_in_range_supersedes_the_wait() {
    use support::source::{Entry, RepoServer, index_yaml, sha256_hex};
    let (_client, ns, api, _engine) = setup("cancel-chart").await;
    let repo = RepoServer::start().await;
    let publish = |versions: &[(&str, &str)]| {
        let mut entries = Vec::new();
        for (version, behavior) in versions {
            let tgz = webapp_tgz(version, behavior);
            let path = format!("/webapp-{version}.tgz");
            entries.push(Entry {
                name: "webapp",
                version,
                app_version: "1.0",
                url: repo.url(&path),
                digest: Some(sha256_hex(&tgz)),
            });
            repo.put(&path, tgz);
        }
        repo.put("/index.yaml", index_yaml(&entries));
    };
    publish(&[("1.0.0", "")]);
    let hr: HelmRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "web"},
        "spec": {"chart": {"repository": repo.url(""), "name": "webapp", "version": "1.x"}, "timeout": "5m"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &hr).await.unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    // 1.1.0 is broken (pods never ready); a requestedAt makes the engine pick it up.
    publish(&[("1.0.0", ""), ("1.1.0", "never-ready")]);
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
        "reconcile.wheelhouse.dev/requestedAt": "take-1.1.0"}}})),
    )
    .await
    .unwrap();
    waiting_on(&api, "web", 2).await;

    // 1.1.1 fixes it: the repository poll during the wait finds it.
    publish(&[("1.0.0", ""), ("1.1.0", "never-ready"), ("1.1.1", "")]);
    let hr = wait_for(&api, "web", "1.1.1 deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].chart_version == "1.1.1"
    })
    .await;
    assert_eq!(revision_of(&hr), 3);
    let history = helm_history(&ns.name, "web");
    assert_superseded(&history, &["chart source checked", "webapp@1.1.1"]);
    ns.delete().await;
}

#[tokio::test]
async fn a_running_post_upgrade_hook_is_not_interrupted_by_a_newer_revision() {
    let (_client, ns, api, _engine) = setup("cancel-hook").await;
    install_webapp(&api, "web", serde_json::json!({"timeout": "6s"})).await;
    // Revision 2 has a post-upgrade hook (say a migration) that takes until the timeout.
    set_values(
        &api,
        "web",
        serde_json::json!({"postUpgradeHook": true, "hookBehavior": "never-ready"}),
    )
    .await;
    wait_for(&api, "web", "revision 2 pending", |h| {
        h.status.as_ref().and_then(|s| s.last_attempted_generation) == Some(2)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pushed = Instant::now();
    set_values(
        &api,
        "web",
        serde_json::json!({"hookBehavior": "", "message": "next"}),
    )
    .await;
    wait_for(&api, "web", "revision 3 deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && revision_of(h) == 3
    })
    .await;
    // The hook ran to its end (its 6 s timeout) before anything newer was applied.
    assert!(
        pushed.elapsed() >= Duration::from_secs(4),
        "the hook was cut short"
    );
    let history = helm_history(&ns.name, "web");
    assert_eq!(history[1].1, "failed", "{history:#?}");
    assert!(history[1].2.contains("web-migrate"), "{history:#?}");
    ns.delete().await;
}

/// Issue #12: an operator-cancelled wait reads `⊘ Canceled` (Ready reason
/// HealthCheckCanceled) until the next action. Without retries the engine stalls after the
/// cancel; neither the stall, the requeues at `interval` nor a reconcile request that plans
/// nothing new may overwrite the reason.
#[tokio::test]
async fn an_operator_cancel_reads_canceled_until_the_next_action() {
    use wheelhouse::frontend::tui::view_model::{Row, State};
    let (_client, ns, api, engine) = setup("cancel-stays").await;
    stuck(&api, serde_json::json!({"interval": "3s"})).await;
    let key = ReleaseKey {
        namespace: ns.name.clone(),
        name: "web".into(),
    };
    engine.handle.send(Command::CancelWait(key)).await.unwrap();
    let canceled = |h: &HelmRelease| {
        is(h, "Ready", "False", "HealthCheckCanceled")
            && h.status.as_ref().unwrap().wait.is_none()
            && h.condition("Reconciling")
                .is_none_or(|c| c.status != "True")
    };
    let hr = wait_for(&api, "web", "stalled after the cancel", |h| {
        is(h, "Stalled", "True", "RetriesExceeded")
    })
    .await;
    assert!(canceled(&hr), "{:#?}", hr.status);
    let row = Row::of(&wheelhouse::frontend::tui::demo::view(
        hr,
        wheelhouse::engine::LiveState::default(),
    ));
    assert_eq!(row.state, State::Canceled, "{row:?}");

    // A reconcile request plans nothing new (retries are used up): the reason stays.
    eng::annotate(
        &api,
        "web",
        "reconcile.wheelhouse.dev/requestedAt",
        "2026-11-21T13:00:00Z",
    )
    .await;
    let hr = wait_for(&api, "web", "the reconcile request handled", |h| {
        h.status
            .as_ref()
            .unwrap()
            .last_handled_reconcile_at
            .as_deref()
            == Some("2026-11-21T13:00:00Z")
    })
    .await;
    assert!(canceled(&hr), "{:#?}", hr.status);
    // Another reconcile later (handled: a positive sign), still the same, and no new
    // revision.
    eng::annotate(
        &api,
        "web",
        "reconcile.wheelhouse.dev/requestedAt",
        "2026-11-21T13:00:01Z",
    )
    .await;
    let hr = wait_for(&api, "web", "the second reconcile request handled", |h| {
        h.status
            .as_ref()
            .unwrap()
            .last_handled_reconcile_at
            .as_deref()
            == Some("2026-11-21T13:00:01Z")
    })
    .await;
    assert!(canceled(&hr), "{:#?}", hr.status);
    assert_eq!(helm_history(&ns.name, "web").len(), 2);

    // The next action (a fix) replaces it.
    set_values(&api, "web", serde_json::json!({"behavior": ""})).await;
    wait_for(&api, "web", "the fix deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    ns.delete().await;
}

/// The fix pushed at once after a broken revision: that revision's pod, created moments
/// before the fix's wait began, crash-loops during it. It is the old template's and never
/// fails the fix (only pods of the workload's current template count: its new
/// ReplicaSet's pod-template-hash). A creation-time rule alone would count it.
#[tokio::test]
async fn an_earlier_rollouts_crash_looping_pod_never_fails_the_fix() {
    use k8s_openapi::api::core::v1::Pod;
    let (client, ns, api, _engine) = setup("cancel-oldpods").await;
    let values = |image: &str| {
        serde_json::json!({"replicaCount": 1, "behavior": "never-ready",
                           "image": format!("registry.invalid/webapp:{image}")})
    };
    install_webapp(
        &api,
        "web",
        serde_json::json!({"timeout": "2m", "values": {"replicaCount": 1}}),
    )
    .await;
    set_values(&api, "web", values("broken")).await;
    waiting_on(&api, "web", 2).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let image_of = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default()
    };
    let old = poll_pods(&pods, |all| {
        all.iter()
            .find(|p| image_of(p).ends_with(":broken"))
            .cloned()
    })
    .await;
    let old_name = old.metadata.name.clone().unwrap();
    // Held while it terminates (a kubelet takes its grace period; kwok would not), with
    // its last status, as the rollout of the fix deletes it.
    let hold = |finalizers: serde_json::Value| {
        Patch::Merge(serde_json::json!({"metadata": {"finalizers": finalizers}}))
    };
    pods.patch(
        &old_name,
        &PatchParams::default(),
        &hold(serde_json::json!(["wheelhouse.dev/test-hold"])),
    )
    .await
    .unwrap();
    // At once, so the broken revision's pod is younger than the fix's wait by < 2 s.
    set_values(&api, "web", values("fix")).await;
    waiting_on(&api, "web", 3).await;
    let (old, new) = poll_pods(&pods, |all| {
        let old = all
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(old_name.as_str()))?;
        let new = all.iter().find(|p| image_of(p).ends_with(":fix"))?;
        Some((old.clone(), new.clone()))
    })
    .await;
    // The broken revision's pod crash-loops now, during the fix's wait.
    let mut status = old.status.clone().unwrap_or_default();
    for c in status.container_statuses.iter_mut().flatten() {
        c.ready = false;
        c.restart_count = 3;
        c.state = Some(k8s_openapi::api::core::v1::ContainerState {
            waiting: Some(k8s_openapi::api::core::v1::ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                message: Some("back-off restarting failed container".into()),
            }),
            ..Default::default()
        });
    }
    pods.patch_status(
        &old_name,
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"status": {"containerStatuses": status.container_statuses}}),
        ),
    )
    .await
    .unwrap();
    // Then the fix's pod becomes ready (its test behaviour label dropped): the wait sees
    // that after the crash loop, so its outcome tells whether the crash loop failed it.
    pods.patch(
        new.metadata.name.as_deref().unwrap(),
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"metadata": {"labels": {"wheelhouse.dev/test-behavior": null}}}),
        ),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "web", "revision 3 decided", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.history.first())
            .is_some_and(|r| r.version == 3 && r.status != "pending-upgrade")
    })
    .await;
    assert!(
        is(&hr, "Ready", "True", "UpgradeSucceeded"),
        "the fix failed on {old_name}: {:?}",
        hr.condition("Ready")
    );
    let history = helm_history(&ns.name, "web");
    assert_eq!(
        history.last().map(|h| (h.0, h.1.as_str())),
        Some((3, "deployed")),
        "{history:?}"
    );
    ns.delete().await;
}

async fn poll_pods<T>(
    pods: &Api<k8s_openapi::api::core::v1::Pod>,
    pick: impl Fn(&[k8s_openapi::api::core::v1::Pod]) -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        let all = pods.list(&Default::default()).await.unwrap().items;
        if let Some(t) = pick(&all) {
            return t;
        }
        assert!(
            start.elapsed() < support::PATIENCE,
            "the pods never appeared"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
