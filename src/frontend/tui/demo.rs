//! Synthetic engine views: releases in every state, for snapshot tests and the benchmark
//! (which is allowed synthetic views; the screenshots and the end-to-end test use a real
//! cluster).

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::api::HelmRelease;
use crate::engine::{LiveState, Phase, ReleaseKey, ReleaseView, Views, WaitView};
use crate::health::Progress;
use crate::health::replicas::{Kind, ReleaseId, ReleaseReplicas, ReplicaMap, WorkloadReplicas};

/// The moment the demo views are built around.
pub fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().expect("valid timestamp")
}

fn at(secs_ago: i64) -> String {
    (now() - std::time::Duration::from_secs(secs_ago as u64)).to_string()
}

/// A HelmRelease with a Ready condition (status, reason, message) and `revisions`
/// history entries.
pub fn release(
    namespace: &str,
    name: &str,
    chart: &str,
    ready: Option<(&str, &str, &str)>,
    revisions: i32,
    secs_ago: i64,
) -> HelmRelease {
    let conditions: Vec<serde_json::Value> = ready
        .into_iter()
        .map(|(status, reason, message)| {
            serde_json::json!({"type": "Ready", "status": status, "reason": reason,
                "message": message, "lastTransitionTime": at(secs_ago)})
        })
        .collect();
    let history: Vec<serde_json::Value> = (1..=revisions)
        .rev()
        .map(|v| {
            serde_json::json!({"version": v, "name": name, "namespace": namespace,
                "chartName": chart, "chartVersion": format!("1.{v}.0"),
                "configDigest": format!("sha256:{v:064x}"),
                "status": if v == revisions { "deployed" } else { "superseded" },
                "action": if v == 1 { "install" } else { "upgrade" },
                "lastDeployed": at(secs_ago + i64::from(revisions - v) * 3600)})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
        "spec": {"chart": {"repository": "https://charts.example", "name": chart},
                 "values": {"replicas": 2, "image": {"tag": "1.2.3"}, "db": {"password": "hunter2"}}},
        "status": {"conditions": conditions, "history": history},
    }))
    .expect("valid HelmRelease")
}

/// `hr` with its chart from a Git branch, its newest revision made from a commit.
fn from_git(mut hr: HelmRelease) -> HelmRelease {
    hr.spec.chart = crate::api::ChartSpec {
        git: Some(crate::api::GitSource {
            url: "https://git.example/platform/charts.git".into(),
            reference: Some(crate::api::GitRef {
                branch: Some("main".into()),
                ..Default::default()
            }),
            path: Some("charts/api".into()),
        }),
        ..Default::default()
    };
    if let Some(newest) = hr.status.as_mut().and_then(|s| s.history.first_mut()) {
        newest.commit = Some("3f2c9e1a7b4d5c6e8f9a0b1c2d3e4f5a6b7c8d9e".into());
    }
    hr
}

pub fn view(hr: HelmRelease, live: LiveState) -> ReleaseView {
    ReleaseView {
        key: ReleaseKey::of(&hr),
        release: Arc::new(hr),
        live,
        problem: None,
        elsewhere: None,
    }
}

/// A wait that started `elapsed` seconds ago with `left` seconds to go.
pub fn waiting(elapsed: i64, left: i64, ready: usize, pending: &[(&str, &str)]) -> LiveState {
    LiveState {
        phase: Phase::Waiting,
        wait: Some(WaitView {
            revision: 4,
            started_at: now() - std::time::Duration::from_secs(elapsed as u64),
            deadline: now() + std::time::Duration::from_secs(left as u64),
            if_it_fails: Some(
                "upgrade fails -> rollback to revision 3 (webapp 1.2.0); 0 retries left".into(),
            ),
            progress: Progress {
                ready,
                total: ready + pending.len(),
                pending: pending
                    .iter()
                    .map(|(o, w)| ((*o).to_owned(), (*w).to_owned()))
                    .collect(),
            },
        }),
        ..LiveState::default()
    }
}

/// One release in each state the table shows.
pub fn sample() -> Arc<Views> {
    let mut suspended = release(
        "apps",
        "billing",
        "billing",
        Some((
            "True",
            "UpgradeSucceeded",
            "Helm upgrade succeeded for release apps/billing.v7",
        )),
        7,
        86400 * 3,
    );
    suspended.spec.suspend = true;
    let views = [
        view(
            release(
                "apps",
                "web",
                "podinfo",
                Some((
                    "True",
                    "UpgradeSucceeded",
                    "Helm upgrade succeeded for release apps/web.v3 with chart podinfo@6.7.1",
                )),
                3,
                600,
            ),
            LiveState::default(),
        ),
        view(
            from_git(release(
                "apps",
                "api",
                "api",
                Some((
                    "Unknown",
                    "Progressing",
                    "Running upgrade with chart api@2.4.0",
                )),
                4,
                40,
            )),
            waiting(
                38,
                262,
                2,
                &[
                    ("Deployment/apps/api", "1 of 3 replicas available"),
                    ("Job/apps/api-migrate", "running"),
                ],
            ),
        ),
        view(
            release(
                "apps",
                "worker",
                "worker",
                Some((
                    "False",
                    "HealthCheckFailed",
                    "Deployment/apps/worker: pod worker-7d9 in CrashLoopBackOff",
                )),
                2,
                1800,
            ),
            LiveState::default(),
        ),
        view(suspended, LiveState::default()),
        view(
            release(
                "data",
                "cache",
                "redis",
                Some((
                    "False",
                    "HealthCheckCanceled",
                    "health check canceled by operator",
                )),
                5,
                120,
            ),
            LiveState::default(),
        ),
        view(
            release("data", "queue", "rabbitmq", None, 0, 0),
            LiveState::default(),
        ),
    ];
    Arc::new(views.into_iter().collect())
}

/// Replica counts of the sample releases' workloads (queue has none).
pub fn replicas() -> Arc<ReplicaMap> {
    let w = |kind, name: &str, ready, desired| {
        WorkloadReplicas::counted(kind, "", name, ready, desired)
    };
    let release = |ns: &str, name: &str, workloads: Vec<WorkloadReplicas>| {
        let workloads = workloads
            .into_iter()
            .map(|mut w| {
                w.namespace = ns.to_owned();
                w
            })
            .collect();
        (ReleaseId::new(ns, name), ReleaseReplicas { workloads })
    };
    Arc::new(ReplicaMap::from_iter([
        release("apps", "web", vec![w(Kind::Deployment, "web", 2, 2)]),
        release(
            "apps",
            "api",
            vec![
                w(Kind::Deployment, "api", 1, 3),
                w(Kind::StatefulSet, "api-db", 1, 1),
            ],
        ),
        release("apps", "worker", vec![w(Kind::Deployment, "worker", 0, 1)]),
        release(
            "apps",
            "billing",
            vec![w(Kind::Deployment, "billing", 2, 2)],
        ),
        release(
            "data",
            "cache",
            vec![
                w(Kind::StatefulSet, "cache", 3, 3),
                w(Kind::DaemonSet, "cache-exporter", 4, 4),
            ],
        ),
    ]))
}

/// Replica counts for [`many`]: one Deployment per release, a StatefulSet beside every
/// third one.
pub fn many_replicas(n: usize) -> Arc<ReplicaMap> {
    let map = (0..n).map(|i| {
        let ns = format!("team-{:02}", i % 50);
        let name = format!("service-{i:05}");
        let mut workloads = vec![WorkloadReplicas::counted(
            Kind::Deployment,
            &ns,
            &name,
            (i % 3) as i32,
            2,
        )];
        if i % 3 == 0 {
            workloads.push(WorkloadReplicas::counted(
                Kind::StatefulSet,
                &ns,
                &format!("{name}-db"),
                1,
                1,
            ));
        }
        (ReleaseId::new(ns, name), ReleaseReplicas { workloads })
    });
    Arc::new(map.collect())
}

/// `n` releases over 50 namespaces in a realistic mix of states, for the benchmark.
pub fn many(n: usize) -> Arc<Views> {
    let views = (0..n).map(|i| {
        let ns = format!("team-{:02}", i % 50);
        let name = format!("service-{i:05}");
        let (ready, live) = match i % 10 {
            0 => (
                Some(("Unknown", "Progressing", "Running upgrade")),
                waiting(20, 280, 1, &[("Deployment/x", "0 of 2 replicas available")]),
            ),
            1 => (
                Some(("False", "UpgradeFailed", "timed out waiting for Deployment")),
                LiveState::default(),
            ),
            _ => (
                Some(("True", "UpgradeSucceeded", "Helm upgrade succeeded")),
                LiveState::default(),
            ),
        };
        view(
            release(
                &ns,
                &name,
                "podinfo",
                ready,
                (i % 7) as i32 + 1,
                (i * 37 % 86400) as i64,
            ),
            live,
        )
    });
    Arc::new(views.collect())
}

/// A Flux HelmRelease in `namespace` with a Ready condition (status, reason, message)
/// and `revisions` history entries of `chart`.
pub fn flux_release(
    namespace: &str,
    name: &str,
    chart: &str,
    ready: (&str, &str, &str),
    revisions: i32,
    suspend: bool,
) -> crate::api::flux::FluxHelmRelease {
    let (status, reason, message) = ready;
    let history: Vec<serde_json::Value> = (1..=revisions)
        .rev()
        .map(|v| {
            serde_json::json!({"name": name, "namespace": namespace, "version": v,
                "status": if v == revisions { "deployed" } else { "superseded" },
                "chartName": chart, "chartVersion": format!("2.{v}.0"), "appVersion": "2.0",
                "lastDeployed": at(i64::from(revisions - v) * 3600 + 300)})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
        "spec": {"suspend": suspend, "interval": "10m",
                 "chart": {"spec": {"chart": chart, "version": "2.x",
                                    "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                 "values": {"replicas": 2, "apiKey": "s3cr3t"}},
        "status": {
            "conditions": [
                {"type": "Ready", "status": status, "reason": reason, "message": message,
                 "lastTransitionTime": at(300)},
                {"type": "Released", "status": "True", "reason": "UpgradeSucceeded",
                 "message": message, "lastTransitionTime": at(300)},
            ],
            "history": history,
            "lastAttemptedRevision": format!("2.{revisions}.0"),
            "storageNamespace": namespace,
        },
    }))
    .expect("valid Flux HelmRelease")
}

/// A stored Helm release's newest record.
pub fn stored(
    namespace: &str,
    name: &str,
    chart: &str,
    revision: i32,
    status: crate::helm::release::Status,
    description: &str,
) -> crate::frontend::inventory::Stored {
    crate::frontend::inventory::Stored {
        key: ReleaseKey::new(namespace, name),
        target_namespace: namespace.to_owned(),
        revision,
        status,
        chart: chart.to_owned(),
        chart_version: "0.9.1".into(),
        app_version: "0.9".into(),
        updated: Some(now() - std::time::Duration::from_secs(7200)),
        description: description.to_owned(),
        created: Some(now() - std::time::Duration::from_secs(7200)),
        author: "helm CLI".into(),
    }
}

/// The other kinds beside [`sample`]: two Flux HelmReleases (one suspended) and the
/// stored releases of the cluster, of which `legacy` and `batch` no HelmRelease manages
/// (the others are the records of the wheelhouse and Flux releases themselves).
pub fn others() -> Arc<crate::frontend::inventory::Others> {
    use crate::helm::release::Status;
    let payments = flux_release(
        "apps",
        "payments",
        "payments",
        (
            "True",
            "UpgradeSucceeded",
            "Helm upgrade succeeded for release apps/payments.v3 with chart payments@2.3.0",
        ),
        3,
        false,
    );
    let search = flux_release(
        "data",
        "search",
        "opensearch",
        ("True", "InstallSucceeded", "Helm install succeeded"),
        1,
        true,
    );
    let mut others = crate::frontend::inventory::Others {
        flux_listed: true,
        helm_listed: true,
        ..Default::default()
    };
    for hr in [payments, search] {
        others.flux.insert(
            ReleaseKey::new(
                hr.metadata.namespace.clone().unwrap(),
                hr.metadata.name.clone().unwrap(),
            ),
            Arc::new(hr),
        );
    }
    for s in [
        stored(
            "apps",
            "legacy",
            "legacy",
            4,
            Status::Deployed,
            "Upgrade complete",
        ),
        stored(
            "data",
            "batch",
            "batch",
            2,
            Status::Failed,
            "Upgrade \"batch\" failed: timed out waiting for the condition",
        ),
        stored(
            "apps",
            "web",
            "podinfo",
            3,
            Status::Deployed,
            "Upgrade complete",
        ),
        stored(
            "apps",
            "payments",
            "payments",
            3,
            Status::Deployed,
            "Upgrade complete",
        ),
    ] {
        others.helm.insert(s.key.clone(), Arc::new(s));
    }
    Arc::new(others)
}

/// Replicas of the other kinds' workloads: legacy is rolling (1 of 2 ready).
pub fn others_replicas() -> Arc<ReplicaMap> {
    let mut map = (*replicas()).clone();
    map.insert(
        ReleaseId::new("apps", "legacy"),
        ReleaseReplicas {
            workloads: vec![WorkloadReplicas::counted(
                Kind::Deployment,
                "apps",
                "legacy",
                1,
                2,
            )],
        },
    );
    map.insert(
        ReleaseId::new("apps", "payments"),
        ReleaseReplicas {
            workloads: vec![WorkloadReplicas::counted(
                Kind::Deployment,
                "apps",
                "payments",
                2,
                2,
            )],
        },
    );
    Arc::new(map)
}
