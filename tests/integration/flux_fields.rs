//! Flux's remaining per-action fields, each beside the real tool whose meaning it has:
//! `disableWaitForJobs` beside Flux's helm-controller, `test.filters` beside `helm test
//! --filter`, `disableSchemaValidation` beside `helm install --skip-schema-validation`,
//! `uninstall.deletionPropagation` beside `helm uninstall --cascade`, `chart.valuesFiles`
//! beside Flux's source-controller and helm-controller, `upgrade.preserveValues` beside
//! `helm upgrade --reuse-values`, `serverSideApply` beside `helm --server-side=false`.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support;
use support::engine::{self as eng, chart, helm, helm_try, is, wait_for};
use wheelhouse::api::HelmRelease;
use wheelhouse::engine::SHARD_LABEL;

fn release(name: &str, spec: Value) -> HelmRelease {
    eng::release(name, "fluxfields", spec)
}

/// `helm get hooks` of the helm CLI's release `cli`, named as wheelhouse's `wh`.
fn hooks_as_wh(ns: &str) -> String {
    helm(ns, &["get", "hooks", "cli"]).replace("cli", "wh")
}

/// Each stored hook's name and the phase of its last run, in stored order, as `helm
/// status` reads them (the CLI's names as wheelhouse's).
fn last_runs(ns: &str, release: &str) -> Vec<(String, String)> {
    let status: Value =
        serde_json::from_str(&helm(ns, &["status", release, "-o", "json"])).unwrap();
    status["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().replace("cli", "wh"),
                h["last_run"]["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn test_filters_choose_the_tests_as_helm_test_filter_does() {
    let (client, ns, api) = eng::setup("ff-filters").await;
    let n = ns.name.as_str();
    helm(n, &["install", "cli", &chart("fluxfields"), "--wait"]);
    // Two included, one of them excluded too: only smoke runs (broken would fail).
    let (ok, out) = helm_try(
        n,
        &[
            "test",
            "cli",
            "--filter",
            "name=cli-smoke",
            "--filter",
            "name=cli-broken",
            "--filter",
            "!name=cli-broken",
        ],
    );
    assert!(ok, "{out}");
    let _engine = eng::start(&client, n).await;
    api.create(
        &PostParams::default(),
        &release(
            "wh",
            json!({"test": {"enable": true, "filters": [
                {"name": "wh-smoke"}, {"name": "wh-broken"}, {"name": "wh-broken", "exclude": true},
            ]}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "wh", "its tests passed", |h| {
        is(h, "Ready", "True", "TestSucceeded")
    })
    .await;
    let runs = last_runs(n, "wh");
    assert_eq!(
        runs,
        last_runs(n, "cli"),
        "which tests ran, in stored order"
    );
    assert!(
        runs.contains(&("wh-smoke".into(), "Succeeded".into()))
            && runs.iter().filter(|(_, phase)| phase.is_empty()).count() == 2,
        "{runs:?}"
    );
    assert_eq!(
        helm(n, &["get", "hooks", "wh"]),
        hooks_as_wh(n),
        "the stored hooks, skipped ones first"
    );
    ns.delete().await;
}

#[tokio::test]
async fn disable_schema_validation_skips_the_charts_schema_as_helm_does() {
    let (client, ns, api) = eng::setup("ff-schema").await;
    let n = ns.name.as_str();
    let (ok, refused) = helm_try(
        n,
        &["install", "cli", &chart("fluxfields"), "--set", "size=0"],
    );
    assert!(
        !ok && refused.contains("values don't meet the specifications of the schema"),
        "{refused}"
    );
    helm(
        n,
        &[
            "install",
            "cli",
            &chart("fluxfields"),
            "--set",
            "size=0",
            "--skip-schema-validation",
        ],
    );
    let _engine = eng::start(&client, n).await;
    for (name, spec) in [
        ("checked", json!({"values": {"size": 0}})),
        (
            "skipped",
            json!({"values": {"size": 0}, "install": {"disableSchemaValidation": true}}),
        ),
    ] {
        api.create(&PostParams::default(), &release(name, spec))
            .await
            .unwrap();
    }
    let failed = wait_for(&api, "checked", "refused by the schema", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let message = &failed.condition("Ready").unwrap().message;
    assert!(
        message.contains("values don't meet the specifications of the schema")
            && message.contains("size"),
        "{message}"
    );
    wait_for(&api, "skipped", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), n);
    let replicas = |d: Deployment| d.spec.and_then(|s| s.replicas);
    assert_eq!(
        replicas(deployments.get("skipped").await.unwrap()),
        replicas(deployments.get("cli").await.unwrap())
    );
    ns.delete().await;
}

/// Waits until the Deployment `name` has a ReplicaSet; returns its name.
async fn replica_set_of(client: &Client, ns: &str, name: &str) -> String {
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    loop {
        let found = sets
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await
            .unwrap();
        if let Some(rs) = found.items.first() {
            return rs.metadata.name.clone().unwrap();
        }
        assert!(
            start.elapsed() < support::PATIENCE,
            "no ReplicaSet for {name}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the Deployment is gone (an orphaning deletion finishes after its
/// dependents are released), then says whether its ReplicaSet is still there, and
/// without an owner.
async fn orphaned(client: &Client, ns: &str, deployment: &str, rs: &str) -> bool {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    while deployments.get_opt(deployment).await.unwrap().is_some() {
        assert!(
            start.elapsed() < support::PATIENCE,
            "{deployment} never deleted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    sets.get_opt(rs)
        .await
        .unwrap()
        .is_some_and(|rs| rs.metadata.owner_references.unwrap_or_default().is_empty())
}

#[tokio::test]
async fn deletion_propagation_orphans_as_helm_uninstall_cascade_does() {
    let (client, ns, api) = eng::setup("ff-cascade").await;
    let n = ns.name.as_str();
    helm(n, &["install", "cli", &chart("fluxfields")]);
    let cli_rs = replica_set_of(&client, n, "cli").await;
    helm(n, &["uninstall", "cli", "--cascade", "orphan"]);
    assert!(
        orphaned(&client, n, "cli", &cli_rs).await,
        "helm left {cli_rs} orphaned"
    );

    let _engine = eng::start(&client, n).await;
    api.create(
        &PostParams::default(),
        &release(
            "wh",
            json!({"uninstall": {"deletionPropagation": "orphan"}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "wh", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let wh_rs = replica_set_of(&client, n, "wh").await;
    eng::delete_and_await_uninstall(&client, n, "wh").await;
    assert!(
        orphaned(&client, n, "wh", &wh_rs).await,
        "wheelhouse left {wh_rs} orphaned, as helm did"
    );
    ns.delete().await;
}

#[tokio::test]
async fn disable_wait_for_jobs_counts_a_started_job_as_fluxs_helm_controller_does() {
    let (client, ns, api) = eng::setup("ff-jobs").await;
    support::flux::require_flux(&client).await;
    let n = ns.name.clone();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/fluxfields");
    let (_server, url) = support::flux::serve(&fixture, "fluxfields", &["0.1.0"]).await;
    support::flux::helm_repository(&client, &n, "charts", &url).await;
    support::flux::helm_release(
        &client,
        &n,
        "flux-side",
        "  interval: 1m\n  timeout: 1m\n  install: {disableWaitForJobs: true}\n  values: {job: {enabled: true}}\n  chart:\n    spec: {chart: fluxfields, version: 0.1.0, sourceRef: {kind: HelmRepository, name: charts}}\n",
    )
    .await;
    let spec = |install: Value| {
        json!({
            "chart": {"repository": url, "name": "fluxfields", "version": "0.1.0"},
            "timeout": "1m",
            "values": {"job": {"enabled": true}},
            "install": install,
        })
    };
    for (name, install) in [
        ("wh-side", json!({"disableWaitForJobs": true})),
        // The same without it: the Job that never completes is waited for.
        ("waits", json!({"timeout": "5s"})),
    ] {
        let hr: HelmRelease = serde_json::from_value(json!({
            "apiVersion": "wheelhouse.dev/v1alpha1",
            "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": n, "labels": {SHARD_LABEL: n}},
            "spec": spec(install),
        }))
        .unwrap();
        api.create(&PostParams::default(), &hr).await.unwrap();
    }
    let _engine = support::engine::start_shard(&client, &n).await;

    support::flux::until(&client, &n, "flux-side", "Ready", support::flux::ready).await;
    wait_for(&api, "wh-side", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let waited = wait_for(&api, "waits", "the install failed on its Job", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let message = &waited.condition("Ready").unwrap().message;
    assert!(message.contains("Job"), "{message}");
    // Both installs counted a Job that is running, not complete.
    let jobs: Api<Job> = Api::namespaced(client.clone(), &n);
    for name in ["flux-side-migrate", "wh-side-migrate"] {
        let status = jobs.get(name).await.unwrap().status.unwrap_or_default();
        assert!(
            status.start_time.is_some() && status.succeeded.unwrap_or(0) == 0,
            "{name}: {status:?}"
        );
    }
}

/// The ConfigMap's `data` of release `name` (the valuesfiles chart writes its values there).
async fn values_data(
    client: &Client,
    ns: &str,
    name: &str,
) -> std::collections::BTreeMap<String, String> {
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    maps.get(name).await.unwrap().data.unwrap_or_default()
}

/// `chart.valuesFiles` beside Flux's `chart.spec.valuesFiles`: the same chart, values and
/// values files installed (and upgraded) by Flux's controllers and by wheelhouse give the
/// same `helm get manifest` and the same computed values (`helm get values --all`): the
/// files replace the chart's values.yaml, merged in order, YAML 1.1 as Helm reads it. A
/// missing file fails the chart (nothing installed) unless ignoreMissingValuesFiles; a Git
/// chart's files come from the repository root (`chart::values_files`'s unit tests).
#[tokio::test]
async fn values_files_replace_the_charts_values_as_flux_builds_the_chart() {
    let (client, ns, api) = eng::setup("ff-valuesfiles").await;
    support::flux::require_flux(&client).await;
    let n = ns.name.clone();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/valuesfiles");
    let (_server, url) = support::flux::serve(&fixture, "valuesfiles", &["0.1.0"]).await;
    support::flux::helm_repository(&client, &n, "charts", &url).await;
    let flux_spec = |files: &str, repository: &str| {
        format!(
            "  interval: 1m\n  values: {{image: {{repository: {repository}}}}}\n  chart:\n    spec: {{chart: valuesfiles, version: 0.1.0, interval: 1m, valuesFiles: [{files}], sourceRef: {{kind: HelmRepository, name: charts}}}}\n"
        )
    };
    support::flux::helm_release(
        &client,
        &n,
        "flux-side",
        &flux_spec("values.yaml, values-prod.yaml", "custom/web"),
    )
    .await;
    let spec = |files: Value, ignore: bool| {
        json!({
            "chart": {
                "repository": url, "name": "valuesfiles", "version": "0.1.0",
                "valuesFiles": files, "ignoreMissingValuesFiles": ignore,
            },
            "values": {"image": {"repository": "custom/web"}},
            "configTracking": {"enabled": false},
        })
    };
    for (name, files, ignore) in [
        ("wh-side", json!(["values.yaml", "values-prod.yaml"]), false),
        ("missing", json!(["values.yaml", "missing.yaml"]), false),
        (
            "ignored",
            json!(["missing.yaml", "values-prod.yaml", "./envs/ci.yaml"]),
            true,
        ),
    ] {
        let hr: HelmRelease = serde_json::from_value(json!({
            "apiVersion": "wheelhouse.dev/v1alpha1",
            "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": n, "labels": {SHARD_LABEL: n}},
            "spec": spec(files, ignore),
        }))
        .unwrap();
        api.create(&PostParams::default(), &hr).await.unwrap();
    }
    let _engine = support::engine::start_shard(&client, &n).await;

    support::flux::until(&client, &n, "flux-side", "Ready at revision 1", |hr| {
        support::flux::ready(hr) && support::flux::revision(hr) == 1
    })
    .await;
    wait_for(&api, "wh-side", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    // Flux's manifest is re-serialised by the labels helm-controller adds (a post-render):
    // compared as objects, without those labels.
    let objects = |release: &str| -> Vec<Value> {
        let manifest = helm(&n, &["get", "manifest", release]).replace("flux-side", "wh-side");
        let mut docs = wheelhouse::text::yaml::parse_documents(&manifest).unwrap();
        docs.retain(|d| !d.is_null());
        for doc in &mut docs {
            let meta = doc["metadata"].as_object_mut().unwrap();
            if let Some(Value::Object(labels)) = meta.get_mut("labels") {
                labels.retain(|k, _| !k.starts_with("helm.toolkit.fluxcd.io/"));
            }
            if meta
                .get("labels")
                .is_some_and(|l| l.as_object().is_none_or(|l| l.is_empty()))
            {
                meta.remove("labels");
            }
        }
        docs
    };
    let same = |when: &str| {
        assert_eq!(objects("wh-side"), objects("flux-side"), "{when}: manifest");
        let values = |r: &str| -> Value {
            serde_json::from_str(&helm(&n, &["get", "values", r, "--all", "-o", "json"])).unwrap()
        };
        assert_eq!(
            values("wh-side"),
            values("flux-side"),
            "{when}: computed values"
        );
    };
    same("installed");
    let data = values_data(&client, &n, "wh-side").await;
    assert_eq!(data["replicas"], "3");
    assert!(data["values"].contains("onlyInDefaults"), "{data:?}");

    // A file that is not there fails the chart, as Flux's HelmChart fails: no revision.
    let missing = wait_for(&api, "missing", "failed on the missing file", |h| {
        is(h, "Ready", "False", "ArtifactFailed")
    })
    .await;
    let message = &missing.condition("Ready").unwrap().message;
    assert!(
        message.contains("no values file found at path 'missing.yaml'"),
        "{message}"
    );
    assert!(!helm(&n, &["list", "-q"]).lines().any(|l| l == "missing"));
    // ... unless ignored: values.yaml left out, a later file's null removes a key.
    wait_for(&api, "ignored", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let data = values_data(&client, &n, "ignored").await;
    assert_eq!(data["replicas"], "5");
    assert!(!data["values"].contains("onlyInDefaults"), "{data:?}");
    assert!(
        data["values"].contains("repository: custom/web"),
        "{data:?}"
    );
    assert!(!data["values"].contains("tag:"), "{data:?}");

    // Both upgraded with another list (and a value, which is what makes helm-controller
    // upgrade: it compares the chart's version and the release's values only).
    support::flux::patch(
        &client,
        &n,
        "flux-side",
        &json!({"spec": {
            "values": {"image": {"repository": "custom/web2"}},
            "chart": {"spec": {"valuesFiles": ["values-prod.yaml", "envs/ci.yaml"]}},
        }}),
    )
    .await
    .unwrap();
    api.patch(
        "wh-side",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"spec": {
            "values": {"image": {"repository": "custom/web2"}},
            "chart": {"valuesFiles": ["values-prod.yaml", "envs/ci.yaml"]},
        }})),
    )
    .await
    .unwrap();
    support::flux::until(&client, &n, "flux-side", "Ready at revision 2", |hr| {
        support::flux::ready(hr) && support::flux::revision(hr) == 2
    })
    .await;
    wait_for(&api, "wh-side", "upgraded", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    same("upgraded");
    assert_eq!(values_data(&client, &n, "wh-side").await["replicas"], "5");

    // A changed list alone is a new desired state for wheelhouse (a new chart artifact
    // for Flux's source-controller, which helm-controller does not upgrade to).
    api.patch(
        "wh-side",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"spec": {"chart": {"valuesFiles": ["values.yaml"]}}})),
    )
    .await
    .unwrap();
    wait_for(&api, "wh-side", "revision 3", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status
                .as_ref()
                .is_some_and(|s| s.history.first().is_some_and(|r| r.version == 3))
    })
    .await;
    assert_eq!(values_data(&client, &n, "wh-side").await["replicas"], "1");
}

/// `upgrade.preserveValues` beside `helm upgrade --reuse-values` (what helm-controller
/// runs for it): after an upgrade to the chart's next version with other values, both
/// store the same values (the new ones merged over the kept ones, a null removing a
/// key), the same computed values (the kept revision's chart values, none of the new
/// chart's defaults) and the same manifest. An unchanged spec then stays at its revision
/// (helm-controller upgrades it again at every interval, fluxcd/helm-controller#1371); a
/// change of the spec's values upgrades again, merged over the kept revision.
#[tokio::test]
async fn preserve_values_keeps_the_previous_values_as_helm_reuse_values_does() {
    let (client, ns, api) = eng::setup("ff-preserve").await;
    let n = ns.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let values_file = |name: &str, values: &Value| -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_string(values).unwrap()).unwrap();
        path.display().to_string()
    };
    let v1 = json!({"greeting": "hi", "keepMe": "from revision 1", "nested": {"a": "user-a"}});
    helm(
        &n,
        &[
            "install",
            "cli-side",
            &chart("preserved"),
            "-f",
            &values_file("v1", &v1),
        ],
    );
    let hr = release(
        "wh-side",
        json!({
            "chart": {"path": chart("preserved")},
            "values": v1,
            "upgrade": {"preserveValues": true},
        }),
    );
    api.create(&PostParams::default(), &hr).await.unwrap();
    let _engine = eng::start(&client, &n).await;
    wait_for(&api, "wh-side", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    let same = |when: &str| {
        let get = |release: &str, args: &[&str]| -> Value {
            let mut all = vec!["get", "values", release, "-o", "json"];
            all.extend_from_slice(args);
            serde_json::from_str(&helm(&n, &all)).unwrap()
        };
        assert_eq!(
            get("wh-side", &[]),
            get("cli-side", &[]),
            "{when}: stored values"
        );
        assert_eq!(
            get("wh-side", &["--all"]),
            get("cli-side", &["--all"]),
            "{when}: computed values"
        );
        assert_eq!(
            helm(&n, &["get", "manifest", "wh-side"]),
            helm(&n, &["get", "manifest", "cli-side"]).replace("cli-side", "wh-side"),
            "{when}: manifest"
        );
    };
    same("installed");

    // The next chart version, other values (a null removes a chart default).
    let v2 = json!({"greeting": "hey", "nested": {"b": "user-b"}, "dropped": null});
    helm(
        &n,
        &[
            "upgrade",
            "cli-side",
            &chart("preserved-2"),
            "--reuse-values",
            "-f",
            &values_file("v2", &v2),
        ],
    );
    let replace = |values: &Value, path: Option<String>| {
        let mut ops = vec![json!({"op": "replace", "path": "/spec/values", "value": values})];
        if let Some(path) = path {
            ops.push(json!({"op": "replace", "path": "/spec/chart/path", "value": path}));
        }
        kube::api::Patch::Json::<()>(serde_json::from_value(Value::Array(ops)).unwrap())
    };
    api.patch(
        "wh-side",
        &kube::api::PatchParams::default(),
        &replace(&v2, Some(chart("preserved-2"))),
    )
    .await
    .unwrap();
    let upgraded = wait_for(&api, "wh-side", "upgraded to revision 2", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_some_and(|r| r.version == 2)
    })
    .await;
    same("upgraded with kept values");
    let stored: Value =
        serde_json::from_str(&helm(&n, &["get", "values", "wh-side", "-o", "json"])).unwrap();
    assert_eq!(stored["keepMe"], "from revision 1", "{stored}");
    assert_eq!(stored["greeting"], "hey", "{stored}");
    let data = values_data(&client, &n, "wh-side").await;
    assert_eq!(data["chart"], "0.2.0");
    assert!(!data["values"].contains("newDefault"), "{data:?}");

    // Nothing changed: a reconcile request is answered at revision 2.
    let token = "preserve-unchanged";
    eng::annotate(
        &api,
        "wh-side",
        "reconcile.wheelhouse.dev/requestedAt",
        token,
    )
    .await;
    let answered = wait_for(&api, "wh-side", "the reconcile request handled", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some(token)
    })
    .await;
    assert!(is(&answered, "Ready", "True", "UpgradeSucceeded"));
    assert_eq!(
        answered
            .status
            .as_ref()
            .unwrap()
            .history
            .first()
            .map(|r| r.version),
        Some(2)
    );
    assert_eq!(
        upgraded.status.as_ref().unwrap().history.len(),
        answered.status.as_ref().unwrap().history.len()
    );
    let revisions = eng::helm_history_json(&n, "wh-side");
    assert_eq!(revisions.len(), 2, "{revisions:?}");

    // The spec's values change: upgraded again, merged over revision 2's.
    let v3 = json!({"greeting": "third"});
    helm(
        &n,
        &[
            "upgrade",
            "cli-side",
            &chart("preserved-2"),
            "--reuse-values",
            "-f",
            &values_file("v3", &v3),
        ],
    );
    api.patch(
        "wh-side",
        &kube::api::PatchParams::default(),
        &replace(&v3, None),
    )
    .await
    .unwrap();
    wait_for(&api, "wh-side", "upgraded to revision 3", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_some_and(|r| r.version == 3)
    })
    .await;
    same("upgraded again");
}

/// `waitStrategy: legacy` beside `helm install --wait=legacy`: Helm 3's rules wait for a
/// LoadBalancer Service's address, where kstatus' (Helm 4's default `--wait`, Flux's
/// poller, wheelhouse's default) need only its cluster IP. On a cluster without a load
/// balancer the helm CLI's legacy install times out and its default one succeeds; the
/// same chart under wheelhouse waits with `legacy` until the Service has an ingress
/// address, and is installed at once without it.
#[tokio::test]
async fn legacy_wait_strategy_waits_for_a_load_balancer_as_helm_3_does() {
    let (client, ns, api) = eng::setup("ff-legacy").await;
    let n = ns.name.clone();
    let lb = chart("loadbalancer");
    let (ok, out) = helm_try(
        &n,
        &[
            "install",
            "cli-legacy",
            &lb,
            "--wait=legacy",
            "--timeout",
            "5s",
        ],
    );
    assert!(
        !ok,
        "helm --wait=legacy installed without a load balancer: {out}"
    );
    helm(
        &n,
        &["install", "cli-watcher", &lb, "--wait", "--timeout", "60s"],
    );
    for (name, strategy) in [("wh-legacy", "legacy"), ("wh-poller", "poller")] {
        let hr = release(
            name,
            json!({
                "chart": {"path": lb},
                "timeout": "2m",
                "waitStrategy": {"name": strategy},
            }),
        );
        api.create(&PostParams::default(), &hr).await.unwrap();
    }
    let _engine = eng::start(&client, &n).await;
    wait_for(&api, "wh-poller", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    // The legacy one has judged both objects: the ConfigMap ready, the Service not.
    let waiting = eng::waiting_with_ready(&api, "wh-legacy", 1, 2).await;
    assert!(
        waiting
            .condition("Ready")
            .is_none_or(|c| c.status != "True"),
        "{:#?}",
        waiting.status
    );
    // The load balancer gives it an address: the wait ends, installed.
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), &n);
    services
        .patch_status(
            "wh-legacy",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}),
            ),
        )
        .await
        .unwrap();
    wait_for(
        &api,
        "wh-legacy",
        "installed once the Service has an address",
        |h| is(h, "Ready", "True", "InstallSucceeded"),
    )
    .await;
}

/// The (manager, operation) pairs of an object's managedFields, status ones and the
/// deployment controller's (its revision annotation) left out.
fn managers(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Vec<String> {
    let mut found: Vec<String> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| f.subresource.as_deref().unwrap_or_default().is_empty())
        .filter(|f| f.manager.as_deref() != Some("kube-controller-manager"))
        .map(|f| {
            format!(
                "{} {}",
                f.manager.as_deref().unwrap_or_default(),
                f.operation.as_deref().unwrap_or_default()
            )
        })
        .collect();
    found.sort_unstable();
    found
}

/// `install.serverSideApply: false` and `upgrade.serverSideApply: auto` (the default)
/// beside `helm install --server-side=false` and a plain `helm upgrade`: both record
/// `csa`, and the upgrade sends Helm's three-way patch, so a field the renders dropped is
/// removed, a rendered field another tool changed is set back, and what only another tool
/// added stays, with the same field managers on each object.
#[tokio::test]
async fn client_side_apply_patches_as_helm_server_side_false_does() {
    let (client, ns, api) = eng::setup("ff-csa").await;
    let n = ns.name.clone();
    helm(
        &n,
        &[
            "install",
            "cli-side",
            &chart("shared"),
            "--server-side=false",
            "--set",
            "nodeSelector.disk=ssd",
        ],
    );
    let hr = release(
        "wh-side",
        json!({
            "chart": {"path": chart("shared")},
            "values": {"nodeSelector": {"disk": "ssd"}},
            // No node has that disk: the pods stay Pending, as the helm CLI does not wait.
            "upgrade": {"disableWait": true},
            "install": {"serverSideApply": false, "disableWait": true},
        }),
    );
    api.create(&PostParams::default(), &hr).await.unwrap();
    let _engine = eng::start(&client, &n).await;
    wait_for(&api, "wh-side", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let method = |release: &str| -> String {
        let meta: Value =
            serde_json::from_str(&helm(&n, &["get", "metadata", release, "-o", "json"])).unwrap();
        meta["applyMethod"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(method("cli-side"), "csa");
    assert_eq!(method("wh-side"), "csa");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &n);
    let configs: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &n);
    for name in ["cli-side", "wh-side"] {
        let d = deployments.get(name).await.unwrap();
        assert_eq!(managers(&d.metadata), ["helm Update"], "{name}");
    }

    // Another tool scales both and annotates them (a client-side update of its own).
    for name in ["cli-side", "wh-side"] {
        deployments
            .patch(
                name,
                &kube::api::PatchParams {
                    field_manager: Some("other-tool".into()),
                    ..Default::default()
                },
                &kube::api::Patch::Merge(json!({
                    "metadata": {"annotations": {"team": "other"}},
                    "spec": {"replicas": 3},
                })),
            )
            .await
            .unwrap();
    }

    // The next revision drops the nodeSelector and changes the ConfigMap's value.
    helm(
        &n,
        &[
            "upgrade",
            "cli-side",
            &chart("shared"),
            "--set",
            "value=two",
        ],
    );
    api.patch(
        "wh-side",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Json::<()>(
            serde_json::from_value(json!([
                {"op": "replace", "path": "/spec/values", "value": {"value": "two"}}
            ]))
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "wh-side", "upgraded to revision 2", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_some_and(|r| r.version == 2)
    })
    .await;
    assert_eq!(method("cli-side"), "csa");
    assert_eq!(method("wh-side"), "csa");
    for name in ["cli-side", "wh-side"] {
        let d = deployments.get(name).await.unwrap();
        let spec = d.spec.as_ref().unwrap();
        // What the renders dropped is gone, the rendered replicas are back, what only the
        // other tool added stays.
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.node_selector, None, "{name}");
        assert_eq!(spec.replicas, Some(1), "{name}");
        assert_eq!(
            d.metadata.annotations.as_ref().unwrap().get("team"),
            Some(&"other".to_owned()),
            "{name}"
        );
        assert_eq!(
            managers(&d.metadata),
            ["helm Update", "other-tool Update"],
            "{name}"
        );
        let config = configs.get(&format!("{name}-config")).await.unwrap();
        assert_eq!(
            config.data.as_ref().unwrap().get("value"),
            Some(&"two".to_owned()),
            "{name}"
        );
        assert_eq!(managers(&config.metadata), ["helm Update"], "{name}");
    }
    assert_eq!(
        helm(&n, &["get", "manifest", "wh-side"]),
        helm(&n, &["get", "manifest", "cli-side"]).replace("cli-side", "wh-side"),
    );
    ns.delete().await;
}
