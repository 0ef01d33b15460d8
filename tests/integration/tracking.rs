//! Config tracking against the local control plane. The engine does not call
//! `prepare_manifest` yet, so each test plays the release: it prepares a manifest string
//! and applies it with the Applier (server-side apply, field manager `wheelhouse`, Helm's
//! ownership annotations), runs the tracker over the test namespace with a 1 s debounce,
//! changes ConfigMaps and Secrets, and counts the Deployment's ReplicaSets (one per pod
//! template the Deployment has had; the default revisionHistoryLimit of 10 keeps them).
//!
//! "Settled" below means: the expected state was reached, then nothing else happened for
//! three debounce windows.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use support::{PATIENCE, TestNamespace, client, from_yaml};
use tokio_util::sync::CancellationToken;
use wheelhouse::cluster::client::Scope;
use wheelhouse::helm::apply::Applier;
use wheelhouse::tracking::{
    self, CONFIG_HASH_ANNOTATION, CONFIG_PENDING_GATE, ConfigKind, HashKey, TrackerConfig,
    TrackerHandle, WorkloadKind, prepare_manifest,
};

const WINDOW: Duration = Duration::from_secs(1);

fn start_tracker(client: &Client, ns: &str) -> (TrackerHandle, CancellationToken) {
    let stop = CancellationToken::new();
    let handle = tracking::start(
        client.clone(),
        Scope::Namespace(ns.to_string()),
        TrackerConfig {
            debounce: WINDOW,
            max_delay: WINDOW * 10,
            ..Default::default()
        },
        stop.clone(),
    );
    (handle, stop)
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the tracker has handled the workload's current state and has no decision
/// about it left to make: the positive sign that no rollout is coming from what happened
/// so far, before a test asserts that none came.
async fn caught_up(
    tracker: &TrackerHandle,
    client: &Client,
    kind: WorkloadKind,
    ns: &str,
    name: &str,
) {
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &kind.api_resource());
    let key = tracking::WorkloadRef {
        kind,
        namespace: ns.to_string(),
        name: name.to_string(),
    };
    eventually(&format!("the tracker caught up with {key}"), || async {
        let live = api.get(name).await.unwrap();
        let version = live.metadata.resource_version.unwrap_or_default();
        tracker.caught_up(&key, &version)
    })
    .await;
}

/// Waits until the scheduler has looked at every pod of `app` and left it unscheduled for
/// its scheduling gate (PodScheduled=False, reason SchedulingGated).
async fn held_by_the_gate(client: &Client, ns: &str, app: &str, count: usize) {
    eventually(
        &format!("{count} pods of {app} held by the gate"),
        || async {
            let pods = pods(client, ns, app).await;
            pods.len() == count
                && pods.iter().all(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter().any(|c| {
                                c.type_ == "PodScheduled"
                                    && c.status == "False"
                                    && c.reason.as_deref() == Some("SchedulingGated")
                            })
                        })
                })
        },
    )
    .await;
}

async fn replica_sets(client: &Client, ns: &str, app: &str) -> Vec<ReplicaSet> {
    Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

async fn rs_count(client: &Client, ns: &str, app: &str) -> usize {
    replica_sets(client, ns, app).await.len()
}

async fn pods(client: &Client, ns: &str, app: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

fn template_hash(d: &Deployment) -> Option<String> {
    d.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(CONFIG_HASH_ANNOTATION)
        .cloned()
}

fn template_gated(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == CONFIG_PENDING_GATE))
}

/// The Deployment has rolled out its current template completely: every replica updated
/// and available, no old pod left.
async fn rolled_out(api: &Api<Deployment>, name: &str) -> bool {
    let Ok(d) = api.get(name).await else {
        return false;
    };
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(status) = &d.status else {
        return false;
    };
    status.observed_generation == d.metadata.generation
        && status.updated_replicas == Some(want)
        && status.available_replicas == Some(want)
        && status.replicas == Some(want)
}

async fn wait_rolled_out(client: &Client, ns: &str, name: &str) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    eventually(&format!("Deployment {name} rolled out"), || {
        rolled_out(&api, name)
    })
    .await;
}

/// Waits until the Deployment has `n` ReplicaSets, is rolled out and the tracker has
/// caught up with it, then checks that it has exactly `n`: no further rollout.
async fn settles_with(tracker: &TrackerHandle, client: &Client, ns: &str, app: &str, n: usize) {
    eventually(&format!("{app} has {n} ReplicaSets"), || async {
        rs_count(client, ns, app).await >= n
    })
    .await;
    wait_rolled_out(client, ns, app).await;
    caught_up(tracker, client, WorkloadKind::Deployment, ns, app).await;
    assert_eq!(
        rs_count(client, ns, app).await,
        n,
        "{app}: ReplicaSets after settling"
    );
}

async fn patch_config_map(client: &Client, ns: &str, name: &str, data: serde_json::Value) {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": data})),
        )
        .await
        .unwrap();
}

fn release_manifest() -> String {
    "---\n# Source: web/templates/config.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\n\
     data:\n  greeting: hello\n\
     ---\n# Source: web/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: web-secret\n\
     stringData:\n  token: s3cr3t\n  unused: x\n\
     ---\n# Source: web/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n\
     spec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n\
     \x20   spec:\n      containers:\n        - name: app\n          image: registry.invalid/web:1\n\
     \x20         env:\n            - name: TOKEN\n              valueFrom: {secretKeyRef: {name: web-secret, key: token}}\n\
     \x20         volumeMounts: [{name: config, mountPath: /etc/web}]\n\
     \x20     volumes:\n        - name: config\n          configMap: {name: web-config}\n"
        .to_string()
}

/// First install: one ReplicaSet whose pods carry the hash from the start. One change: one
/// more. Three changes within the window: one more. A rewrite with identical data: none.
/// Re-preparing and re-applying the release (what the engine's next upgrade does) after the
/// tracker patched the hash: none.
#[tokio::test]
async fn a_release_rolls_once_per_burst_of_config_changes_and_never_on_install() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "track-release").await;
    let (tracker, stop) = start_tracker(&client, &ns.name);
    tracker.ready().await;
    let applier = Applier::new(client.clone());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);

    let prepared = prepare_manifest(
        &client,
        &release_manifest(),
        &ns.name,
        &HashKey::Unkeyed,
        None,
    )
    .await
    .unwrap()
    .applied;
    applier.apply(&prepared, &ns.name, "web").await.unwrap();
    settles_with(&tracker, &client, &ns.name, "web", 1).await;
    let first = template_hash(&deployments.get("web").await.unwrap())
        .expect("hash written before the first apply");
    assert!(!template_gated(&deployments.get("web").await.unwrap()));
    let running = pods(&client, &ns.name, "web").await;
    assert_eq!(running.len(), 2);
    for pod in &running {
        assert_eq!(
            pod.annotations().get(CONFIG_HASH_ANNOTATION),
            Some(&first),
            "pods start with the hash"
        );
    }

    // The next upgrade prepares the same manifest against the live data: same hash.
    let again = prepare_manifest(
        &client,
        &release_manifest(),
        &ns.name,
        &HashKey::Unkeyed,
        None,
    )
    .await
    .unwrap()
    .applied;
    assert_eq!(again, prepared);
    applier.apply(&again, &ns.name, "web").await.unwrap();
    caught_up(&tracker, &client, WorkloadKind::Deployment, &ns.name, "web").await;
    assert_eq!(rs_count(&client, &ns.name, "web").await, 1);

    // One change of a key the pods read.
    patch_config_map(
        &client,
        &ns.name,
        "web-config",
        serde_json::json!({"greeting": "hi"}),
    )
    .await;
    settles_with(&tracker, &client, &ns.name, "web", 2).await;
    let second = template_hash(&deployments.get("web").await.unwrap()).unwrap();
    assert_ne!(second, first);

    // Three changes, to both objects, well within one window.
    patch_config_map(
        &client,
        &ns.name,
        "web-config",
        serde_json::json!({"greeting": "one"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .patch(
            "web-secret",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"stringData": {"token": "rotated"}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    patch_config_map(
        &client,
        &ns.name,
        "web-config",
        serde_json::json!({"greeting": "three"}),
    )
    .await;
    settles_with(&tracker, &client, &ns.name, "web", 3).await;
    let third = template_hash(&deployments.get("web").await.unwrap()).unwrap();

    // Identical data rewritten (new resourceVersion, new label), and a change of a Secret key
    // nobody reads: no rollout.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let before = cms.get("web-config").await.unwrap().resource_version();
    cms.patch(
        "web-config",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"touched": "yes"}}, "data": {"greeting": "three"}})),
    )
    .await
    .unwrap();
    assert_ne!(
        cms.get("web-config").await.unwrap().resource_version(),
        before
    );
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .patch(
            "web-secret",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"stringData": {"unused": "y"}})),
        )
        .await
        .unwrap();
    caught_up(&tracker, &client, WorkloadKind::Deployment, &ns.name, "web").await;
    assert_eq!(rs_count(&client, &ns.name, "web").await, 3);
    assert_eq!(
        template_hash(&deployments.get("web").await.unwrap()),
        Some(third.clone())
    );

    let tracked = tracker.tracked(Some(&ns.name), Some("web"));
    assert_eq!(tracked.len(), 1);
    assert_eq!(tracked[0].workload.name, "web");
    assert!(!tracked[0].gated);
    assert_eq!(tracked[0].hash, Some(third));
    assert_eq!(
        tracked[0]
            .objects
            .iter()
            .map(|o| (o.object.kind, o.object.name.as_str(), o.exists))
            .collect::<Vec<_>>(),
        vec![
            (ConfigKind::ConfigMap, "web-config", true),
            (ConfigKind::Secret, "web-secret", true)
        ]
    );

    stop.cancel();
    ns.delete().await;
}

fn gated_manifest() -> String {
    "---\n# Source: late/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: late\n\
     spec:\n  replicas: 2\n  selector:\n    matchLabels: {app: late}\n  template:\n    metadata:\n      labels: {app: late}\n\
     \x20   spec:\n      containers:\n        - name: app\n          image: registry.invalid/late:1\n\
     \x20         envFrom:\n            - configMapRef: {name: late-config}\n            - secretRef: {name: maybe, optional: true}\n"
        .to_string()
}

/// A required ConfigMap that does not exist: the pods stay Pending and unscheduled with
/// the gate, and an Event on the Deployment names what it waits for. When the ConfigMap
/// appears the tracker removes the gate and sets the hash in one patch: the gated
/// ReplicaSet (whose pods never ran) is replaced by exactly one new ReplicaSet, whose pods
/// run with the hash, restartCount 0, and stay the same pods afterwards.
#[tokio::test]
async fn missing_config_holds_pods_with_the_gate_until_it_appears() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "track-gate").await;
    let (tracker, stop) = start_tracker(&client, &ns.name);
    tracker.ready().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);

    let prepared = prepare_manifest(
        &client,
        &gated_manifest(),
        &ns.name,
        &HashKey::Unkeyed,
        None,
    )
    .await
    .unwrap()
    .applied;
    Applier::new(client.clone())
        .apply(&prepared, &ns.name, "late")
        .await
        .unwrap();
    assert!(template_gated(&deployments.get("late").await.unwrap()));

    eventually("two gated pods exist", || async {
        pods(&client, &ns.name, "late").await.len() == 2
    })
    .await;
    // The scheduler has seen them and left them for their gate.
    held_by_the_gate(&client, &ns.name, "late", 2).await;
    let gated_pods = pods(&client, &ns.name, "late").await;
    let mut gated_uids = BTreeSet::new();
    for pod in &gated_pods {
        let spec = pod.spec.as_ref().unwrap();
        assert!(spec.node_name.is_none(), "a gated pod is not scheduled");
        assert!(
            spec.scheduling_gates
                .iter()
                .flatten()
                .any(|g| g.name == CONFIG_PENDING_GATE)
        );
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
        gated_uids.insert(pod.uid().unwrap());
    }
    assert_eq!(rs_count(&client, &ns.name, "late").await, 1);

    let waiting = format!("waiting for ConfigMap {}/late-config", ns.name);
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    eventually("an Event says what the Deployment waits for", || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("late")
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Deployment")
                    && e.note.as_deref() == Some(waiting.as_str())
            })
    })
    .await;
    let tracked = tracker.tracked(Some(&ns.name), None);
    assert_eq!(tracked.len(), 1);
    assert!(tracked[0].gated);
    assert_eq!(
        tracked[0]
            .objects
            .iter()
            .map(|o| (o.object.name.as_str(), o.object.optional, o.exists))
            .collect::<Vec<_>>(),
        vec![("late-config", false, false), ("maybe", true, false)]
    );

    let cm: ConfigMap = from_yaml("metadata: {name: late-config}\ndata: {mode: ready}\n");
    Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    settles_with(&tracker, &client, &ns.name, "late", 2).await;
    let deployment = deployments.get("late").await.unwrap();
    assert!(!template_gated(&deployment));
    let hash = template_hash(&deployment).unwrap();
    // The gate and the hash changed in the same patch: exactly one new ReplicaSet, and it
    // has both (no gate, the new hash).
    let sets = replica_sets(&client, &ns.name, "late").await;
    let new: Vec<_> = sets
        .iter()
        .filter(|rs| rs.spec.as_ref().and_then(|s| s.replicas) == Some(2))
        .collect();
    assert_eq!(new.len(), 1);
    let new_template = new[0].spec.as_ref().unwrap().template.as_ref().unwrap();
    assert!(
        new_template
            .spec
            .as_ref()
            .unwrap()
            .scheduling_gates
            .is_none()
    );
    let running = pods(&client, &ns.name, "late").await;
    assert_eq!(running.len(), 2);
    let mut uids = BTreeSet::new();
    for pod in &running {
        assert!(
            !gated_uids.contains(&pod.uid().unwrap()),
            "the gated pods were replaced, not released"
        );
        assert_eq!(pod.annotations().get(CONFIG_HASH_ANNOTATION), Some(&hash));
        assert!(pod.spec.as_ref().unwrap().scheduling_gates.is_none());
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        for c in status.container_statuses.iter().flatten() {
            assert_eq!(c.restart_count, 0);
        }
        uids.insert(pod.uid().unwrap());
    }
    // Still the same pods a while later: they started once.
    caught_up(
        &tracker,
        &client,
        WorkloadKind::Deployment,
        &ns.name,
        "late",
    )
    .await;
    let later: BTreeSet<String> = pods(&client, &ns.name, "late")
        .await
        .iter()
        .map(|p| p.uid().unwrap())
        .collect();
    assert_eq!(later, uids);
    assert_eq!(rs_count(&client, &ns.name, "late").await, 2);

    let tracked = tracker.tracked(Some(&ns.name), Some("late"));
    assert!(!tracked[0].gated);
    assert!(tracked[0].objects[0].exists);

    // The engine's next upgrade prepares the same chart against the live data: no gate, the
    // hash the tracker wrote, so its forced apply changes nothing and rolls nothing.
    let next = prepare_manifest(
        &client,
        &gated_manifest(),
        &ns.name,
        &HashKey::Unkeyed,
        None,
    )
    .await
    .unwrap()
    .applied;
    assert!(!next.contains(CONFIG_PENDING_GATE));
    assert!(next.contains(&hash));
    Applier::new(client.clone())
        .apply(&next, &ns.name, "late")
        .await
        .unwrap();
    caught_up(
        &tracker,
        &client,
        WorkloadKind::Deployment,
        &ns.name,
        "late",
    )
    .await;
    assert_eq!(rs_count(&client, &ns.name, "late").await, 2);
    let after: BTreeSet<String> = pods(&client, &ns.name, "late")
        .await
        .iter()
        .map(|p| p.uid().unwrap())
        .collect();
    assert_eq!(after, uids);

    stop.cancel();
    ns.delete().await;
}

/// A Deployment outside any release opts in with `wheelhouse.dev/track-config: "true"`.
/// The tracker gives it the hash when it first sees it (one rollout: without a webhook
/// there is no earlier moment), then rolls it once per change of its ConfigMap and of the
/// ConfigMap named in `wheelhouse.dev/extra-configmaps`. A Deployment that does not opt in
/// is never touched.
#[tokio::test]
async fn a_standalone_opted_in_deployment_rolls_on_its_config_map_change() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "track-solo").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    for name in ["solo-config", "solo-extra"] {
        let cm: ConfigMap = from_yaml(&format!("metadata: {{name: {name}}}\ndata: {{v: '1'}}\n"));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let deployment = |name: &str, annotations: &str| -> Deployment {
        from_yaml(&format!(
            "metadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  replicas: 1\n\
             \x20 selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n\
             \x20   spec:\n      containers: [{{name: app, image: registry.invalid/solo:1}}]\n\
             \x20     volumes: [{{name: c, configMap: {{name: solo-config}}}}]\n"
        ))
    };
    deployments
        .create(
            &PostParams::default(),
            &deployment(
                "solo",
                "wheelhouse.dev/track-config: 'true', wheelhouse.dev/extra-configmaps: solo-extra",
            ),
        )
        .await
        .unwrap();
    deployments
        .create(&PostParams::default(), &deployment("bystander", ""))
        .await
        .unwrap();
    wait_rolled_out(&client, &ns.name, "bystander").await;
    // A release workload whose manifest was not prepared (the release has config tracking
    // disabled): it has Helm's ownership annotation but no hash, and is left alone.
    let unprepared = format!(
        "---\n# Source: plain/templates/deployment.yaml\n{}",
        wheelhouse::text::yaml::to_string(&deployment("plain", ""))
    );
    Applier::new(client.clone())
        .apply(&unprepared, &ns.name, "plain")
        .await
        .unwrap();
    wait_rolled_out(&client, &ns.name, "plain").await;
    // An opted-in CronJob reading one key of solo-config and a Secret through the API.
    let token: Secret = from_yaml("metadata: {name: solo-token}\nstringData: {t: '1'}\n");
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &token)
        .await
        .unwrap();
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), &ns.name);
    let cron: CronJob = from_yaml(
        "metadata:\n  name: nightly\n  annotations: {wheelhouse.dev/track-config: 'true', wheelhouse.dev/extra-secrets: solo-token}\n\
         spec:\n  schedule: '0 0 1 1 *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n\
         \x20         restartPolicy: Never\n          containers:\n            - name: job\n              image: registry.invalid/job:1\n\
         \x20             env: [{name: V, valueFrom: {configMapKeyRef: {name: solo-config, key: v}}}]\n",
    );
    cron_jobs
        .create(&PostParams::default(), &cron)
        .await
        .unwrap();
    let cron_hash = || async {
        cron_jobs
            .get("nightly")
            .await
            .unwrap()
            .spec
            .unwrap()
            .job_template
            .spec
            .unwrap()
            .template
            .metadata
            .and_then(|m| m.annotations)
            .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
    };

    let (tracker, stop) = start_tracker(&client, &ns.name);
    tracker.ready().await;
    eventually("the opted-in Deployment gets its hash", || async {
        template_hash(&deployments.get("solo").await.unwrap()).is_some()
    })
    .await;
    settles_with(&tracker, &client, &ns.name, "solo", 2).await;
    let cron_first = cron_hash()
        .await
        .expect("the opted-in CronJob gets its hash");

    patch_config_map(
        &client,
        &ns.name,
        "solo-config",
        serde_json::json!({"v": "2"}),
    )
    .await;
    settles_with(&tracker, &client, &ns.name, "solo", 3).await;
    let cron_second = cron_hash().await.unwrap();
    assert_ne!(
        cron_second, cron_first,
        "the CronJob's job template got the new hash"
    );
    // The Secret only the CronJob names changes its hash, not the Deployment's.
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .patch(
            "solo-token",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"stringData": {"t": "2"}})),
        )
        .await
        .unwrap();
    eventually("the CronJob follows its extra Secret", || async {
        cron_hash().await.is_some_and(|h| h != cron_second)
    })
    .await;
    caught_up(
        &tracker,
        &client,
        WorkloadKind::Deployment,
        &ns.name,
        "solo",
    )
    .await;
    assert_eq!(rs_count(&client, &ns.name, "solo").await, 3);

    patch_config_map(
        &client,
        &ns.name,
        "solo-extra",
        serde_json::json!({"v": "2"}),
    )
    .await;
    settles_with(&tracker, &client, &ns.name, "solo", 4).await;

    for untouched in ["bystander", "plain"] {
        assert_eq!(
            rs_count(&client, &ns.name, untouched).await,
            1,
            "{untouched}"
        );
        assert!(template_hash(&deployments.get(untouched).await.unwrap()).is_none());
    }
    let tracked = tracker.tracked(Some(&ns.name), None);
    assert_eq!(
        tracked
            .iter()
            .map(|t| t.workload.name.as_str())
            .collect::<Vec<_>>(),
        vec!["solo", "nightly"]
    );
    assert_eq!(tracked[0].release, None);
    assert_eq!(
        tracked[1]
            .objects
            .iter()
            .map(|o| (o.object.kind, o.object.name.as_str(), o.exists))
            .collect::<Vec<_>>(),
        vec![
            (ConfigKind::ConfigMap, "solo-config", true),
            (ConfigKind::Secret, "solo-token", true)
        ]
    );

    stop.cancel();
    ns.delete().await;
}

/// A gated StatefulSet: its rolling update would wait forever for the gated pod to become
/// Ready, so the tracker deletes the gated pods (which never ran) after lifting the gate;
/// the controller recreates them from the new template and they run once.
#[tokio::test]
async fn a_gated_stateful_set_runs_once_its_secret_appears() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "track-sts").await;
    let (tracker, stop) = start_tracker(&client, &ns.name);
    tracker.ready().await;
    let manifest = "---\n# Source: db/templates/sts.yaml\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n\
        spec:\n  replicas: 2\n  serviceName: db\n  selector:\n    matchLabels: {app: db}\n  template:\n\
        \x20   metadata:\n      labels: {app: db}\n    spec:\n      containers:\n        - name: db\n\
        \x20         image: registry.invalid/db:1\n          env:\n            - name: PASSWORD\n\
        \x20             valueFrom: {secretKeyRef: {name: db-creds, key: password}}\n";
    let prepared = prepare_manifest(&client, manifest, &ns.name, &HashKey::Unkeyed, None)
        .await
        .unwrap()
        .applied;
    assert!(prepared.contains(CONFIG_PENDING_GATE));
    Applier::new(client.clone())
        .apply(&prepared, &ns.name, "db")
        .await
        .unwrap();
    eventually("db-0 exists", || async {
        !pods(&client, &ns.name, "db").await.is_empty()
    })
    .await;
    held_by_the_gate(&client, &ns.name, "db", 1).await;
    let held = pods(&client, &ns.name, "db").await;
    assert_eq!(held.len(), 1, "OrderedReady: only db-0 while it is held");
    assert!(held[0].spec.as_ref().unwrap().node_name.is_none());
    let held_uid = held[0].uid().unwrap();

    let secret: Secret = from_yaml("metadata: {name: db-creds}\nstringData: {password: pw}\n");
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(client.clone(), &ns.name);
    eventually(
        "the StatefulSet is rolled out with 2 ready pods",
        || async {
            let s = sts.get("db").await.unwrap();
            let status = s.status.unwrap_or_default();
            status.ready_replicas == Some(2)
                && status.updated_replicas == Some(2)
                && status.current_revision == status.update_revision
        },
    )
    .await;
    let template = sts.get("db").await.unwrap().spec.unwrap().template;
    let hash = template.metadata.unwrap().annotations.unwrap()[CONFIG_HASH_ANNOTATION].clone();
    assert!(template.spec.unwrap().scheduling_gates.is_none());
    let running = pods(&client, &ns.name, "db").await;
    let uids: BTreeSet<String> = running.iter().map(|p| p.uid().unwrap()).collect();
    assert!(!uids.contains(&held_uid));
    for pod in &running {
        assert_eq!(pod.annotations().get(CONFIG_HASH_ANNOTATION), Some(&hash));
        for c in pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .iter()
            .flatten()
        {
            assert_eq!(c.restart_count, 0);
        }
    }
    caught_up(&tracker, &client, WorkloadKind::StatefulSet, &ns.name, "db").await;
    let later: BTreeSet<String> = pods(&client, &ns.name, "db")
        .await
        .iter()
        .map(|p| p.uid().unwrap())
        .collect();
    assert_eq!(later, uids, "the pods started once");

    stop.cancel();
    ns.delete().await;
}
