//! Helm-faithful rendering and waiting (issue "Helm-faithful rendering and waiting"):
//! the render-parity suite renders the project's own test charts with wheelhouse and
//! with the real helm CLI on the same local control plane (a real `helm install` /
//! `helm upgrade` in a second namespace) and compares the manifests; beside it, the
//! wait verdicts of Helm 4 and the Flux-style failure handling.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use support::engine::{chart, events_of, helm, is, release, set_values, start, wait_for};
use support::{PATIENCE, TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;

const WIDGETS_CRD: &str = "widgets.parity.wheelhouse.dev";

/// The group a dead APIService serves in `a_dead_aggregated_api_renders_as_helm_renders_it`.
const DEAD_GROUP: &str = "deadparity.wheelhouse.dev";

/// One test at a time installs the `parity` chart: each creates or deletes its
/// subchart's CRD, cluster-wide.
static PARITY_CHART: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn create_config_map(client: &Client, ns: &str, name: &str, data: serde_json::Value) {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}, "data": data}))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// `helm get manifest`, with what legitimately differs between the two namespaces
/// taken out: the namespace itself and the randomly generated password.
fn manifest_of(ns: &str) -> String {
    helm(ns, &["get", "manifest", "parity"])
        .replace(ns, "<namespace>")
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("password:") {
                "  password: <generated>"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn rendered(client: &Client, ns: &str) -> std::collections::BTreeMap<String, String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get("parity-rendered")
        .await
        .unwrap()
        .data
        .unwrap()
}

async fn password(client: &Client, ns: &str) -> Vec<u8> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get("parity-password")
        .await
        .unwrap()
        .data
        .unwrap()["password"]
        .0
        .clone()
}

async fn delete_crd(client: &Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds.delete(name, &DeleteParams::default()).await;
    let deadline = Instant::now() + PATIENCE;
    while crds.get_opt(name).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "CRD {name} was never deleted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The parity suite: one chart exercising Capabilities by group/version and by Kind
/// (served, removed, and a CRD-gated template whose CRD a subchart ships in crds/),
/// lookup of an existing object and of the release's own generated Secret,
/// Revision/IsInstall/IsUpgrade, and YAML 1.1 values from a valuesFrom ConfigMap.
#[tokio::test]
async fn wheelhouse_renders_what_helm_install_and_upgrade_render() {
    let _one_at_a_time = PARITY_CHART.lock().await;
    let client = client().await;
    install_crd(&client).await;
    // The subchart's CRD must not exist yet: wheelhouse installs it (install.crds Create).
    delete_crd(&client, WIDGETS_CRD).await;
    delete_crd(&client, "gadgets.parity.wheelhouse.dev").await;
    let ours = TestNamespace::new(&client, "parity-w").await;
    let theirs = TestNamespace::new(&client, "parity-h").await;
    for ns in [&ours.name, &theirs.name] {
        create_config_map(
            &client,
            ns,
            "parity-source",
            serde_json::json!({"token": "t-123"}),
        )
        .await;
    }
    let values_v1 = "flag: yes\nmode: 0644\nnote: v1\n";
    create_config_map(
        &client,
        &ours.name,
        "parity-values",
        serde_json::json!({"values.yaml": values_v1}),
    )
    .await;
    let values_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(values_file.path(), values_v1).unwrap();

    // Install: wheelhouse first (it must install the subchart's CRD), then helm.
    let _engine = start(&client, &ours.name).await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ours.name);
    api.create(
        &PostParams::default(),
        &release(
            "parity",
            "parity",
            serde_json::json!({"valuesFrom": [{"kind": "ConfigMap", "name": "parity-values"}]}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "parity", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get_opt(WIDGETS_CRD).await.unwrap().is_some(),
        "the subchart's CRD was installed"
    );
    let values_path = values_file.path().to_str().unwrap();
    helm(
        &theirs.name,
        &["install", "parity", &chart("parity"), "-f", values_path],
    );

    assert_eq!(manifest_of(&ours.name), manifest_of(&theirs.name));
    let data = rendered(&client, &ours.name).await;
    let version = client.apiserver_version().await.unwrap().git_version;
    for (key, want) in [
        ("kubeVersion", version.as_str()),
        ("hasAppsV1", "true"),
        ("hasDeploymentKind", "true"),
        ("hasRemovedApi", "false"),
        ("hasRemovedKind", "false"),
        ("hasWidgetKind", "true"),
        ("hasGadgetKind", "false"),
        ("hasDeadGroupKind", "false"),
        ("revision", "1"),
        ("isInstall", "true"),
        ("isUpgrade", "false"),
        ("flag", "true"),
        ("mode", "420"),
        ("lookedUp", "t-123"),
    ] {
        assert_eq!(data[key], want, "{key}");
    }
    let widget = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ours.name,
        &kube::api::ApiResource::from_gvk(&GroupVersionKind::gvk(
            "parity.wheelhouse.dev",
            "v1",
            "Widget",
        )),
    );
    assert!(widget.get_opt("parity-widget").await.unwrap().is_some());
    let password_before = password(&client, &ours.name).await;

    // A CRD someone installs now is seen by the very next render.
    let gadget_crd = std::fs::read_to_string(
        std::path::Path::new(&chart("parity")).join("charts/widgets/crds/widgets.yaml"),
    )
    .unwrap()
    .replace("widgets", "gadgets")
    .replace("widget", "gadget")
    .replace("Widget", "Gadget");
    let gadget: CustomResourceDefinition = wheelhouse::text::yaml::from_str(&gadget_crd).unwrap();
    crds.create(&PostParams::default(), &gadget).await.unwrap();
    tokio::time::timeout(
        PATIENCE,
        kube::runtime::wait::await_condition(
            crds.clone(),
            "gadgets.parity.wheelhouse.dev",
            kube::runtime::wait::conditions::is_crd_established(),
        ),
    )
    .await
    .unwrap()
    .unwrap();

    // Upgrade both the same way.
    let values_v2 = values_v1.replace("note: v1", "note: v2");
    Api::<ConfigMap>::namespaced(client.clone(), &ours.name)
        .patch(
            "parity-values",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"values.yaml": values_v2}})),
        )
        .await
        .unwrap();
    support::engine::annotate(
        &api,
        "parity",
        "reconcile.wheelhouse.dev/requestedAt",
        "values-v2",
    )
    .await;
    wait_for(&api, "parity", "upgraded", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    std::fs::write(values_file.path(), &values_v2).unwrap();
    let theirs_password = password(&client, &theirs.name).await;
    helm(
        &theirs.name,
        &["upgrade", "parity", &chart("parity"), "-f", values_path],
    );

    assert_eq!(manifest_of(&ours.name), manifest_of(&theirs.name));
    let data = rendered(&client, &ours.name).await;
    for (key, want) in [
        ("revision", "2"),
        ("isInstall", "false"),
        ("isUpgrade", "true"),
        ("hasGadgetKind", "true"),
        ("note", "v2"),
    ] {
        assert_eq!(data[key], want, "{key}");
    }
    // lookup kept the generated password, as it does for helm.
    assert_eq!(password(&client, &ours.name).await, password_before);
    assert_eq!(password(&client, &theirs.name).await, theirs_password);
    ours.delete().await;
    theirs.delete().await;
    delete_crd(&client, "gadgets.parity.wheelhouse.dev").await;
}

/// A dead aggregated API (an APIService whose backend is gone): wheelhouse renders what
/// `helm install` renders on the same cluster, without the group; once the API is back,
/// the next upgrade of each renders with it (the render helper's cached discovery is
/// dropped when the discovery document changes).
#[tokio::test]
async fn a_dead_aggregated_api_renders_as_helm_renders_it() {
    let _one_at_a_time = PARITY_CHART.lock().await;
    let client = client().await;
    install_crd(&client).await;
    let ours = TestNamespace::new(&client, "parity-dead-w").await;
    let theirs = TestNamespace::new(&client, "parity-dead-h").await;
    let dead = support::discovery::DeadGroup::create(&client, DEAD_GROUP, &ours.name).await;

    let _engine = start(&client, &ours.name).await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ours.name);
    api.create(
        &PostParams::default(),
        &release(
            "parity",
            "parity",
            serde_json::json!({"values": {"note": "v1"}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "parity", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    helm(
        &theirs.name,
        &["install", "parity", &chart("parity"), "--set", "note=v1"],
    );
    assert_eq!(manifest_of(&ours.name), manifest_of(&theirs.name));
    assert_eq!(
        rendered(&client, &ours.name).await["hasDeadGroupKind"],
        "false"
    );

    // The backend is back: the group is served (by its CRD) and discovery is whole.
    dead.heal(&client).await;
    let deadline = Instant::now() + PATIENCE;
    while !wheelhouse::helm::render::discovery_state(&client)
        .await
        .unwrap()
        .1
        .contains(&format!("{DEAD_GROUP}/v1"))
    {
        assert!(Instant::now() < deadline, "{DEAD_GROUP} never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    set_values(&api, "parity", serde_json::json!({"note": "v2"})).await;
    wait_for(&api, "parity", "upgraded", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    helm(
        &theirs.name,
        &["upgrade", "parity", &chart("parity"), "--set", "note=v2"],
    );
    assert_eq!(manifest_of(&ours.name), manifest_of(&theirs.name));
    let data = rendered(&client, &ours.name).await;
    assert_eq!(data["hasDeadGroupKind"], "true");
    assert_eq!(data["revision"], "2");
    ours.delete().await;
    theirs.delete().await;
    drop(dead);
}

/// A LoadBalancer Service that never gets an address: `helm install --wait` (Helm 4)
/// succeeds, and so does wheelhouse by default; the stricter wait is opt-in.
#[tokio::test]
async fn the_health_wait_reaches_helm_4s_verdict_unless_asked_to_be_stricter() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "parity-wait").await;
    let _engine = start(&client, &ns.name).await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);

    helm(
        &ns.name,
        &[
            "install",
            "by-helm",
            &chart("shared"),
            "--set",
            "loadBalancer=true",
            "--wait",
            "--timeout",
            "30s",
        ],
    );
    api.create(
        &PostParams::default(),
        &release(
            "lb",
            "shared",
            serde_json::json!({"values": {"loadBalancer": true}}),
        ),
    )
    .await
    .unwrap();
    wait_for(
        &api,
        "lb",
        "installed without a load balancer address",
        |h| is(h, "Ready", "True", "InstallSucceeded"),
    )
    .await;

    api.create(
        &PostParams::default(),
        &release(
            "strict",
            "shared",
            serde_json::json!({"timeout": "5s", "values": {"loadBalancer": true},
                               "healthCheck": {"waitForLoadBalancerAddress": true}}),
        ),
    )
    .await
    .unwrap();
    let strict = wait_for(&api, "strict", "timed out waiting for the address", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let message = strict.condition("Ready").unwrap().message.clone();
    assert!(message.contains("load balancer address"), "{message}");
    ns.delete().await;
}

/// A template error (`fail`) is an InstallFailed with an Event that counts against the
/// retries; retries back off; when they are used up the release stalls with Ready
/// keeping the reason; a fixed spec clears Stalled.
#[tokio::test]
async fn render_failures_are_flux_failures_that_back_off_and_stall() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "parity-fail").await;
    let _engine = start(&client, &ns.name).await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &release(
            "web",
            "webapp",
            serde_json::json!({"values": {"failRender": true},
                               "install": {"remediation": {"retries": 1}}}),
        ),
    )
    .await
    .unwrap();
    let first = wait_for(&api, "web", "the first InstallFailed", |h| {
        is(h, "Ready", "False", "InstallFailed")
            && h.status.as_ref().is_some_and(|s| s.install_failures == 1)
    })
    .await;
    let failed_at = Instant::now();
    let message = first.condition("Ready").unwrap().message.clone();
    assert!(message.starts_with("Helm install failed:"), "{message}");
    assert!(
        events_of(&client, &ns.name, "web")
            .await
            .iter()
            .any(|e| e.starts_with("InstallFailed")),
        "an Event says so"
    );
    let stalled = wait_for(&api, "web", "Stalled after the retry", |h| {
        is(h, "Stalled", "True", "RetriesExceeded")
    })
    .await;
    // The retry came after a backoff (5 s, ±10 %), not at once.
    assert!(
        failed_at.elapsed() >= Duration::from_secs(4),
        "{:?}",
        failed_at.elapsed()
    );
    assert_eq!(stalled.status.as_ref().unwrap().install_failures, 2);
    assert!(
        is(&stalled, "Ready", "False", "InstallFailed"),
        "Ready keeps the reason"
    );
    let stored = Api::<Secret>::namespaced(client.clone(), &ns.name)
        .list(&ListParams::default().labels("owner=helm,name=web"))
        .await
        .unwrap();
    assert!(stored.items.is_empty(), "a render failure stores nothing");

    set_values(&api, "web", serde_json::json!({"failRender": false})).await;
    let fixed = wait_for(&api, "web", "installed after the fix", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    assert!(fixed.condition("Stalled").is_none(), "Stalled is cleared");
    ns.delete().await;
}

/// Issue #12: `helm get manifest` and the dashboard's Manifest tab show the YAML as Helm
/// rendered it (comments, key order, quoting), never re-serialised JSON. Config tracking
/// adds one line, the hash in the pod template's annotations; the tab masks the Secret's
/// data and nothing else.
#[tokio::test]
async fn stored_manifest_and_the_manifest_tab_keep_the_rendered_yaml() {
    use wheelhouse::frontend::tui::view_model::Fetch;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "yamlkeep").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let _engine = start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &release("keep", "yamlkeep", serde_json::json!({})),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "keep", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    let rendered = helm(&ns.name, &["template", "keep", &chart("yamlkeep")]);
    assert!(rendered.contains("    zeta: \"double-quoted\"   # an inline comment\n"));
    let stored = helm(&ns.name, &["get", "manifest", "keep"]);
    let hash_line = |l: &str| l.starts_with("        wheelhouse.dev/config-hash: \"");
    assert_eq!(
        stored.lines().filter(|l| hash_line(l)).count(),
        1,
        "{stored}"
    );
    assert!(
        stored.contains("      annotations:\n        note: \"kept as written\"\n        wheelhouse.dev/config-hash: \""),
        "{stored}"
    );
    let without_hash: String = stored
        .lines()
        .filter(|l| !hash_line(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(without_hash.trim_end(), rendered.trim_end());

    // The Manifest tab: the stored text, the Secret's value masked and nothing else.
    let target = wheelhouse::frontend::tui::io::DetailTarget::of_wheelhouse(&hr);
    let data = wheelhouse::frontend::tui::io::load_detail(client.clone(), target, Vec::new()).await;
    let Fetch::Loaded(h) = data.helm else {
        panic!("{:?}", data.helm)
    };
    assert!(!h.manifest.contains("hunter2"), "{}", h.manifest);
    let docs =
        |t: &str| -> Vec<String> { t.trim_end().split("---\n").map(str::to_owned).collect() };
    let (tab, stored) = (docs(&h.manifest), docs(&stored));
    assert_eq!(tab.len(), stored.len(), "{}", h.manifest);
    for (shown, kept) in tab.iter().zip(&stored) {
        if kept.contains("\nkind: Secret\n") {
            assert_eq!(shown, &kept.replace("\"hunter2\"", "'***'"));
        } else {
            assert_eq!(shown, kept);
        }
    }
    ns.delete().await;
}
