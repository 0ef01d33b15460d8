//! `wheelhouse install` runs the controller in a cluster: its output applies to the local
//! control plane as it is, and `wheelhouse controller`, run with nothing but a token of the
//! installed ServiceAccount (what its pod would get), installs, upgrades and uninstalls a
//! release. Meanwhile an admission policy lets only that ServiceAccount write the
//! release's namespace, so no other credentials can have done the work.

use crate::support;

use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use support::engine::{condition, helm_history, set_values, webapp};
use support::installed::{
    Controller, OnlyWriter, eventually, forbidden, service_account_kubeconfig, wheelhouse_install,
};
use support::{TestNamespace, client, install_crd, kubeconfig_path, testbin};
use wheelhouse::api::HelmRelease;
use wheelhouse::frontend::install::{CONTROLLER, SERVICE_ACCOUNT};

const MANAGER: &str = "wheelhouse-tests";

#[tokio::test]
async fn the_installed_service_account_runs_the_controller() {
    let admin = client().await;
    // The CRD is every test's: `install` prints the same object, applied idempotently
    // below, and it is never deleted.
    install_crd(&admin).await;
    let apps = TestNamespace::new(&admin, "install-apps").await;
    let system = apps.name.replace("install-apps", "install-sys");

    // What `wheelhouse install` prints, applied as it is.
    let docs = wheelhouse_install(&["--namespace", &system, "--shard", "s1"]);
    let names: Vec<String> = docs
        .iter()
        .map(|d| {
            let (kind, name) = (&d["kind"], &d["metadata"]["name"]);
            format!("{}/{}", kind.as_str().unwrap(), name.as_str().unwrap())
        })
        .collect();
    assert_eq!(
        names,
        [
            "CustomResourceDefinition/helmreleases.wheelhouse.dev",
            &format!("Namespace/{system}"),
            "ServiceAccount/wheelhouse",
            "ClusterRole/wheelhouse-engine",
            "Role/wheelhouse-engine-lease",
            "RoleBinding/wheelhouse-engine-lease",
            "ClusterRoleBinding/wheelhouse-engine",
            "ClusterRoleBinding/wheelhouse-release-admin",
            "ClusterRole/wheelhouse-view",
            "ClusterRole/wheelhouse-edit",
            "Service/wheelhouse-controller-metrics",
            "NetworkPolicy/wheelhouse-controller",
            "Deployment/wheelhouse-controller",
            "Service/wheelhouse-webhook-receiver",
            "Deployment/wheelhouse-controller-shard-s1",
            "Service/wheelhouse-webhook-receiver-shard-s1",
            "ConfigMap/wheelhouse-tenancy",
            "Role/wheelhouse-tenancy-reader",
            "RoleBinding/wheelhouse-tenancy-reader",
        ]
    );
    support::apply_documents(&admin, &docs, MANAGER).await;
    // The API server accepted the pod templates; the Deployments' pods (on the fake node)
    // are admitted with the ServiceAccount and become available.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &system);
    for name in [CONTROLLER, &format!("{CONTROLLER}-shard-s1")] {
        eventually(&format!("Deployment {name} available"), || async {
            deployments.get(name).await.ok().is_some_and(|d| {
                d.status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Available" && c.status == "True")
            })
        })
        .await;
    }

    // A token of the installed ServiceAccount, as its pod gets one, in a kubeconfig of its
    // own with the test cluster's server and CA.
    let home = tempfile::tempdir().unwrap();
    let kubeconfig =
        service_account_kubeconfig(&admin, &system, SERVICE_ACCOUNT, home.path()).await;
    let sa = Client::try_from(
        Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&kubeconfig).unwrap(),
            &KubeConfigOptions::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let review = Api::<SelfSubjectReview>::all(sa.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let username = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap();
    assert_eq!(
        username,
        format!("system:serviceaccount:{system}:{SERVICE_ACCOUNT}")
    );
    // The installed controllers watch every namespace, and may; they may not grant
    // themselves more. (RBAC takes effect in the authorizer's cache within moments.)
    eventually("the installed grant in effect", || async {
        Api::<HelmRelease>::all(sa.clone())
            .list(&ListParams::default().limit(1))
            .await
            .is_ok()
            && forbidden(
                Api::<ClusterRole>::all(sa.clone())
                    .create(
                        &PostParams::default(),
                        &support::from_yaml("metadata: {name: wheelhouse-install-escalation}"),
                    )
                    .await,
            )
    })
    .await;

    // From now on only the ServiceAccount may write the objects of the release's namespace.
    let only_sa = OnlyWriter::create(&admin, &apps.name, &username).await;

    let mut controller = Controller::start(&kubeconfig, &apps.name, &system, home.path());
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &apps.name);
    api.create(
        &PostParams::default(),
        &webapp("web", serde_json::json!({"values": {"message": "v1"}})),
    )
    .await
    .unwrap();
    controller
        .wait_for(&api, "web", "installed as revision 1", |h| {
            revision(h) == Some(1) && ready(h, "InstallSucceeded")
        })
        .await;

    set_values(&api, "web", serde_json::json!({"message": "v2"})).await;
    controller
        .wait_for(&api, "web", "upgraded to revision 2", |h| {
            revision(h) == Some(2) && ready(h, "UpgradeSucceeded")
        })
        .await;
    // Helm's storage (read by the helm CLI) and the release's objects agree.
    let history: Vec<(i64, String)> = helm_history(&apps.name, "web")
        .into_iter()
        .map(|(revision, status, _)| (revision, status))
        .collect();
    assert_eq!(
        history,
        [(1, "superseded".to_owned()), (2, "deployed".to_owned())]
    );
    let config = Api::<ConfigMap>::namespaced(admin.clone(), &apps.name)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(config.data.unwrap()["MESSAGE"], "v2");

    // Deleting the HelmRelease uninstalls the release, as the ServiceAccount too.
    api.delete("web", &DeleteParams::default()).await.unwrap();
    controller
        .wait_until(
            "the release uninstalled and the HelmRelease gone",
            || async { api.get_opt("web").await.unwrap().is_none() },
        )
        .await;
    assert!(helm_history_is_empty(&apps.name));
    controller.stop();

    // Clean up what this test created. The CRD and the ClusterRole `wheelhouse-engine`
    // (the same object tests/integration/rbac.rs applies) stay; the bindings name this test's
    // ServiceAccount and go.
    only_sa.delete(&admin).await;
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    for name in ["wheelhouse-engine", "wheelhouse-release-admin"] {
        bindings
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    Api::<Namespace>::all(admin.clone())
        .delete(&system, &DeleteParams::default())
        .await
        .unwrap();
    apps.delete().await;
}

fn revision(hr: &HelmRelease) -> Option<i32> {
    hr.status.as_ref()?.history.first().map(|r| r.version)
}

fn ready(hr: &HelmRelease, reason: &str) -> bool {
    condition(hr, "Ready") == Some(("True".into(), reason.into()))
}

/// `helm history` of an uninstalled release fails with "release: not found".
fn helm_history_is_empty(namespace: &str) -> bool {
    let out = Command::new(testbin().join("helm"))
        .args(["history", "web", "--namespace", namespace, "--kubeconfig"])
        .arg(kubeconfig_path())
        .output()
        .unwrap();
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("not found")
}

#[test]
fn install_refuses_what_it_cannot_deploy_and_says_why() {
    for (args, says) in [
        (&["--shard", "EU_1"][..], "is not a usable shard key"),
        (&["--namespace", "Ops"], "is not a namespace name"),
        (&["-A"], "not --all-namespaces"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
            .arg("install")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// Each object of `docs` as the API server has it now: (kind/name, its generation when it
/// has one, else its resourceVersion), so a second apply that changed nothing shows none.
async fn versions(client: &Client, docs: &[serde_json::Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in docs {
        let (api, obj, kind) = support::api_of(client, doc).await;
        let name = obj.metadata.name.unwrap();
        let live = api.get(&name).await.unwrap();
        let version = live
            .metadata
            .generation
            .map(|g| format!("generation {g}"))
            .unwrap_or_else(|| {
                format!(
                    "resourceVersion {}",
                    live.metadata.resource_version.unwrap()
                )
            });
        out.push((format!("{kind}/{name}"), version));
    }
    out
}

/// `wheelhouse install` applied over an older install (another image): only what differs
/// changes, the releases (a HelmRelease and a helm CLI release) are all still there, and
/// applying the same output again changes nothing. (Its ClusterRoleBindings are left out:
/// a cluster has one of each, which the other tests that install hold.)
#[tokio::test]
async fn reapplying_install_over_an_older_one_changes_only_what_differs_and_keeps_every_release() {
    let admin = client().await;
    install_crd(&admin).await;
    let apps = TestNamespace::new(&admin, "reinstall-apps").await;
    let system = apps.name.replace("reinstall-apps", "reinstall-sys");
    let shard = apps.name.clone();
    // Without the ClusterRoleBindings: one cluster has one of each, naming the install's
    // ServiceAccount, and the other tests that install hold it for theirs.
    let install = |image: &str| -> Vec<serde_json::Value> {
        wheelhouse_install(&["--namespace", &system, "--shard", &shard, "--image", image])
            .into_iter()
            .filter(|d| d["kind"] != "ClusterRoleBinding")
            .collect()
    };
    let old = install("registry.example/wheelhouse:old");
    support::apply_documents(&admin, &old, MANAGER).await;
    // The releases: a (suspended) HelmRelease and one the helm CLI made.
    // Of a shard no engine here serves, so nothing writes to it meanwhile.
    let mut hr = webapp("web", serde_json::json!({"suspend": true}));
    hr.metadata.namespace = Some(apps.name.clone());
    hr.metadata.labels = Some(
        [(
            wheelhouse::engine::SHARD_LABEL.to_owned(),
            format!("{shard}-none"),
        )]
        .into(),
    );
    let hrs: Api<HelmRelease> = Api::namespaced(admin.clone(), &apps.name);
    let created = hrs.create(&PostParams::default(), &hr).await.unwrap();
    support::engine::helm(
        &apps.name,
        &["install", "cli", &support::engine::chart("webapp")],
    );

    let new = install("registry.example/wheelhouse:new");
    let before = versions(&admin, &new).await;
    support::apply_documents(&admin, &new, MANAGER).await;
    let after = versions(&admin, &new).await;
    let changed: Vec<&String> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, _)| &b.0)
        .collect();
    assert_eq!(
        changed,
        [
            &"Deployment/wheelhouse-controller".to_owned(),
            &format!("Deployment/{CONTROLLER}-shard-{shard}")
        ],
        "only the Deployments' image differs"
    );
    let image = support::pod_spec(&admin, &system, CONTROLLER)
        .await
        .containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("registry.example/wheelhouse:new"));
    // Every release still there, untouched.
    let kept = hrs.get("web").await.unwrap();
    assert_eq!(
        (kept.metadata.uid, kept.metadata.resource_version),
        (created.metadata.uid, created.metadata.resource_version)
    );
    assert_eq!(helm_history(&apps.name, "cli").len(), 1);
    // The same output once more: nothing changes.
    support::apply_documents(&admin, &new, MANAGER).await;
    assert_eq!(
        versions(&admin, &new).await,
        after,
        "a second apply changed something"
    );
    apps.delete().await;
}

/// Every field of a CRD schema by path (`spec.chart.valuesFiles`, `[]` for list items,
/// `{}` for map values), with its type and whether its parent requires it.
fn schema_fields(schema: &serde_json::Value, path: &str, out: &mut Vec<(String, String, bool)>) {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            let at = format!("{path}.{name}");
            let kind = sub["type"].as_str().unwrap_or("any").to_owned();
            out.push((at.clone(), kind, required.contains(&name.as_str())));
            schema_fields(sub, &at, out);
        }
    }
    if schema["items"].is_object() {
        schema_fields(&schema["items"], &format!("{path}[]"), out);
    }
    if schema["additionalProperties"].is_object() {
        schema_fields(&schema["additionalProperties"], &format!("{path}{{}}"), out);
    }
}

/// Issue #35: CRD changes are additive. Every field of the previous build's CRD
/// (`tests/previous_build.sh`) is in this build's with the same type, nothing newly
/// required, and every version it served still served: what was written for the previous
/// build stays valid and means the same, so wheelhouse can be upgraded with its CRD first.
#[test]
fn the_crd_only_adds_to_the_previous_builds() {
    let out = Command::new(support::previous_build().join("wheelhouse"))
        .arg("crd")
        .output()
        .expect("the previous build runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let previous: serde_json::Value =
        wheelhouse::text::yaml::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let current: serde_json::Value =
        wheelhouse::text::yaml::from_str(&wheelhouse::api::crd_yaml()).unwrap();
    let versions = |crd: &serde_json::Value| -> Vec<(String, bool, serde_json::Value)> {
        crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap().to_owned(),
                    v["served"].as_bool().unwrap_or(false),
                    v["schema"]["openAPIV3Schema"].clone(),
                )
            })
            .collect()
    };
    let now = versions(&current);
    for (name, served, schema) in versions(&previous) {
        let Some((_, still_served, new_schema)) = now.iter().find(|(n, _, _)| *n == name) else {
            panic!("version {name} is gone");
        };
        assert!(
            !served || *still_served,
            "version {name} is no longer served"
        );
        let (mut old, mut new) = (Vec::new(), Vec::new());
        schema_fields(&schema, "", &mut old);
        schema_fields(new_schema, "", &mut new);
        assert!(old.len() > 50, "{name}: {} fields read", old.len());
        for (path, kind, was_required) in &old {
            let Some((_, new_kind, required)) = new.iter().find(|(p, _, _)| p == path) else {
                panic!("{name}: field {path} is gone");
            };
            assert_eq!(new_kind, kind, "{name}: {path} changed type");
            assert!(
                !required || *was_required,
                "{name}: {path} is newly required"
            );
        }
        // A new field may be required only inside a new one (an item of a new list):
        // no object written before can lack it.
        for (path, _, required) in &new {
            let known = |p: &str| old.iter().any(|(o, _, _)| o == p);
            let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
            let parent_existed = parent.is_empty() || known(parent);
            assert!(
                known(path) || !required || !parent_existed,
                "{name}: new field {path} is required"
            );
        }
    }
}
