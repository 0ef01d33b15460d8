//! The Applier against the local control plane: server-side apply in Helm's order, prune,
//! uninstall, CRDs and hooks.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, Resource, ResourceExt};
use support::{PATIENCE, TestNamespace, client};
use wheelhouse::api::CrdPolicy;
use wheelhouse::api::DeletionPropagation::Background;
use wheelhouse::helm::apply::{Applier, Error, ObjectRef, Owner, Removed};
use wheelhouse::helm::release::{Hook, HookPhase};

const RELEASE: &str = "demo";

fn refs(objects: &[ObjectRef]) -> Vec<String> {
    objects.iter().map(ToString::to_string).collect()
}

fn config_map(name: &str, extra_metadata: &str, data: &str) -> String {
    format!(
        "---\n# Source: demo/templates/{name}.yaml\napiVersion: v1\nkind: ConfigMap\n\
         metadata:\n  name: {name}\n{extra_metadata}data:\n{data}\n"
    )
}

const KEEP: &str = "  annotations:\n    helm.sh/resource-policy: keep\n";

fn web_manifest() -> String {
    // Deliberately out of install order: the Deployment comes first.
    let deployment = "---\n# Source: demo/templates/deployment.yaml\napiVersion: apps/v1\n\
        kind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n\
        \x20   matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n\
        \x20   spec:\n      containers:\n        - name: app\n          image: registry.invalid/web:1\n\
        \x20         volumeMounts: [{name: config, mountPath: /etc/web}]\n\
        \x20     volumes:\n        - name: config\n          configMap:\n            name: web\n\
        \x20           defaultMode: 0644\n";
    let service = "---\n# Source: demo/templates/service.yaml\napiVersion: v1\nkind: Service\n\
        metadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n";
    format!(
        "{deployment}{service}{}",
        config_map("web", "", "  greeting: hello")
    )
}

async fn setup(prefix: &str) -> (Client, Applier, TestNamespace) {
    let client = client().await;
    let ns = TestNamespace::new(&client, prefix).await;
    (client.clone(), Applier::new(client), ns)
}

fn managed_by(obj: &impl Resource) -> Vec<(String, String)> {
    obj.meta()
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn assert_owned_by_release(obj: &impl Resource, namespace: &str) {
    let meta = obj.meta();
    let labels = meta.labels.clone().unwrap_or_default();
    let annotations = meta.annotations.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("Helm")
    );
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some(RELEASE)
    );
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-namespace")
            .map(String::as_str),
        Some(namespace)
    );
    assert!(
        managed_by(obj).contains(&("helm".to_string(), "Apply".to_string())),
        "{:?}",
        managed_by(obj)
    );
}

#[tokio::test]
async fn applies_with_server_side_apply_in_install_order() {
    let (client, applier, ns) = setup("apply-basic").await;
    let applied = applier
        .apply(&web_manifest(), &ns.name, RELEASE)
        .await
        .unwrap();
    assert_eq!(
        refs(&applied),
        [
            format!("ConfigMap/{}/web", ns.name),
            format!("Service/{}/web", ns.name),
            format!("Deployment/{}/web", ns.name),
        ]
    );

    // What the engine watches: the same objects, in manifest order, namespaces filled in.
    let mut objects = applier.objects(&web_manifest(), &ns.name).await.unwrap();
    objects.sort();
    let mut sorted = applied.clone();
    sorted.sort();
    assert_eq!(objects, sorted);

    let cm: ConfigMap = Api::namespaced(client.clone(), &ns.name)
        .get("web")
        .await
        .unwrap();
    assert_owned_by_release(&cm, &ns.name);
    let svc: Service = Api::namespaced(client.clone(), &ns.name)
        .get("web")
        .await
        .unwrap();
    assert_owned_by_release(&svc, &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let deployment = deployments.get("web").await.unwrap();
    assert_owned_by_release(&deployment, &ns.name);
    // `defaultMode: 0644` is octal, as every Kubernetes client reads it.
    let mode = deployment
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .volumes
        .unwrap()[0]
        .config_map
        .clone()
        .unwrap()
        .default_mode;
    assert_eq!(mode, Some(0o644));

    tokio::time::timeout(
        PATIENCE,
        await_condition(deployments, "web", conditions::is_deployment_completed()),
    )
    .await
    .expect("the Deployment became available in time")
    .unwrap();
    ns.delete().await;
}

#[tokio::test]
async fn a_namespace_is_created_before_the_objects_in_it() {
    let (client, applier, ns) = setup("apply-order").await;
    let extra = format!("{}-extra", ns.name);
    let manifest = format!(
        "{}---\n# Source: demo/templates/ns.yaml\napiVersion: v1\nkind: Namespace\n\
         metadata:\n  name: {extra}\n",
        config_map("inside", &format!("  namespace: {extra}\n"), "  a: b")
    );
    let applied = applier.apply(&manifest, &ns.name, RELEASE).await.unwrap();
    assert_eq!(
        refs(&applied),
        [
            format!("Namespace/{extra}"),
            format!("ConfigMap/{extra}/inside")
        ]
    );
    let cm: ConfigMap = Api::namespaced(client.clone(), &extra)
        .get("inside")
        .await
        .unwrap();
    assert_owned_by_release(&cm, &ns.name);

    let _ = Api::<Namespace>::all(client)
        .delete(&extra, &DeleteParams::default())
        .await;
    ns.delete().await;
}

#[tokio::test]
async fn applying_twice_changes_nothing() {
    let (client, applier, ns) = setup("apply-idempotent").await;
    let first = applier
        .apply(&web_manifest(), &ns.name, RELEASE)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let cm_version = cms.get("web").await.unwrap().resource_version();
    let deployment = deployments.get("web").await.unwrap();

    let second = applier
        .apply(&web_manifest(), &ns.name, RELEASE)
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(cms.get("web").await.unwrap().resource_version(), cm_version);
    let again = deployments.get("web").await.unwrap();
    assert_eq!(again.metadata.generation, deployment.metadata.generation);
    assert_eq!(again.spec, deployment.spec);
    ns.delete().await;
}

/// Fields another manager holds with another value (issue "Nothing lost and nothing
/// misreported", point 3): a changed rendering fails naming manager and field, an unchanged
/// one leaves them their value, and `force_conflicts` takes them back, as `helm upgrade
/// --force-conflicts` does.
#[tokio::test]
async fn fields_another_manager_holds_conflict_stay_theirs_or_are_forced_back() {
    let (client, applier, ns) = setup("apply-conflict").await;
    let manifest = config_map("settings", "", "  color: blue\n  size: small");
    applier.apply(&manifest, &ns.name, RELEASE).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);

    // Another field manager takes `color` over by server-side apply, as `kubectl apply
    // --server-side --force-conflicts` would.
    let theirs = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
        "data": {"color": "red"}
    });
    cms.patch(
        "settings",
        &PatchParams::apply("someone-else").force(),
        &Patch::Apply(&theirs),
    )
    .await
    .unwrap();

    // A rendering of color the release never made (no previous revision): a conflict,
    // nothing applied.
    let version = cms.get("settings").await.unwrap().resource_version();
    let err = applier
        .apply(&manifest, &ns.name, RELEASE)
        .await
        .expect_err("a conflict");
    assert!(matches!(err, Error::FieldConflict { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(r#"conflict with "someone-else": .data.color"#),
        "{err}"
    );
    assert_eq!(
        cms.get("settings").await.unwrap().resource_version(),
        version
    );

    // The chart renders what it rendered before: their value stays, the rest applies.
    let next = config_map("settings", "", "  color: blue\n  size: large");
    let owner = Owner::new(RELEASE, &ns.name).previous(Some(&manifest));
    applier.apply_release(&next, &owner).await.unwrap();
    let data = cms.get("settings").await.unwrap().data.unwrap();
    assert_eq!(
        (data["color"].as_str(), data["size"].as_str()),
        ("red", "large")
    );

    // Forced, as --force-conflicts: taken back, and someone-else owns nothing any more.
    let forced = Owner::new(RELEASE, &ns.name)
        .previous(Some(&next))
        .force_conflicts(true);
    applier.apply_release(&next, &forced).await.unwrap();
    let cm = cms.get("settings").await.unwrap();
    assert_eq!(cm.data.clone().unwrap()["color"], "blue");
    let others: Vec<_> = managed_by(&cm)
        .into_iter()
        .filter(|(manager, _)| manager == "someone-else")
        .collect();
    assert!(
        others.is_empty(),
        "someone-else still owns fields: {others:?}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn apply_errors_name_the_object() {
    let (client, applier, ns) = setup("apply-errors").await;

    // An unknown kind fails before anything is applied.
    let manifest = format!(
        "{}---\n# Source: demo/templates/gizmo.yaml\napiVersion: nothing.example.com/v1\n\
         kind: Gizmo\nmetadata:\n  name: g\n",
        config_map("early", "", "  a: b")
    );
    let err = applier
        .apply(&manifest, &ns.name, RELEASE)
        .await
        .expect_err("Gizmo is not served");
    assert!(matches!(err, Error::UnknownKind { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("Gizmo/g"), "{msg}");
    assert!(msg.contains("nothing.example.com/v1"), "{msg}");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(cms.get_opt("early").await.unwrap().is_none());

    // The API server's message comes through with the object's name.
    let invalid = "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: bad\n\
                   spec:\n  ports: [{port: 700000}]\n";
    let err = applier
        .apply(invalid, &ns.name, RELEASE)
        .await
        .expect_err("the port is out of range");
    let msg = err.to_string();
    assert!(msg.contains(&format!("Service/{}/bad", ns.name)), "{msg}");
    assert!(msg.contains("spec.ports[0].port"), "{msg}");

    // A manifest that is not YAML names its template.
    let err = applier
        .apply(
            "---\n# Source: demo/templates/broken.yaml\nkind: [\n",
            &ns.name,
            RELEASE,
        )
        .await
        .expect_err("not YAML");
    assert!(
        err.to_string().contains("demo/templates/broken.yaml"),
        "{err}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn prune_deletes_what_the_new_revision_dropped_except_kept_objects() {
    let (client, applier, ns) = setup("apply-prune").await;
    let old = format!(
        "{}{}{}",
        config_map("stays", "", "  a: b"),
        config_map("kept", KEEP, "  a: b"),
        config_map("dropped", "", "  a: b")
    );
    let new = config_map("stays", "", "  a: c");
    applier.apply(&old, &ns.name, RELEASE).await.unwrap();
    applier.apply(&new, &ns.name, RELEASE).await.unwrap();

    let owner = Owner::new(RELEASE, &ns.name);
    let pruned = applier.prune(&old, &new, &owner).await.unwrap();
    assert_eq!(
        refs(&pruned.deleted),
        [format!("ConfigMap/{}/dropped", ns.name)]
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(cms.get_opt("dropped").await.unwrap().is_none());
    assert!(cms.get_opt("kept").await.unwrap().is_some());
    assert_eq!(cms.get("stays").await.unwrap().data.unwrap()["a"], "c");

    // Nothing left to prune the second time.
    assert_eq!(
        applier.prune(&old, &new, &owner).await.unwrap(),
        Removed::default()
    );
    ns.delete().await;
}

#[tokio::test]
async fn delete_uninstalls_in_order_and_keeps_kept_objects() {
    let (client, applier, ns) = setup("apply-delete").await;
    let manifest = format!("{}{}", web_manifest(), config_map("kept", KEEP, "  a: b"));
    applier.apply(&manifest, &ns.name, RELEASE).await.unwrap();

    let owner = Owner::new(RELEASE, &ns.name);
    let deleted = applier
        .delete(&manifest, &owner, Background)
        .await
        .unwrap()
        .deleted;
    assert_eq!(
        refs(&deleted),
        [
            format!("Service/{}/web", ns.name),
            format!("Deployment/{}/web", ns.name),
            format!("ConfigMap/{}/web", ns.name),
        ]
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(cms.get_opt("kept").await.unwrap().is_some());
    assert!(cms.get_opt("web").await.unwrap().is_none());
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    assert!(services.get_opt("web").await.unwrap().is_none());

    // Objects already gone are skipped, not errors.
    assert_eq!(
        applier.delete(&manifest, &owner, Background).await.unwrap(),
        Removed::default()
    );
    ns.delete().await;
}

#[tokio::test]
async fn ensure_namespace_creates_it_once() {
    let client = client().await;
    let applier = Applier::new(client.clone());
    let name = format!(
        "apply-ensure-{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    applier.ensure_namespace(&name).await.unwrap();
    applier.ensure_namespace(&name).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client);
    let ns = namespaces.get(&name).await.unwrap();
    assert_eq!(ns.labels().get("name"), Some(&name));
    namespaces
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
}

/// A CRD of a group unique to the test, so tests do not share cluster-scoped state.
fn widget_crd(group: &str, short_name: &str) -> String {
    format!(
        "# crds/widgets.yaml\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
         metadata:\n  name: widgets.{group}\nspec:\n  group: {group}\n  scope: Namespaced\n\
         \x20 names: {{plural: widgets, singular: widget, kind: Widget, shortNames: [{short_name}]}}\n\
         \x20 versions:\n    - name: v1\n      served: true\n      storage: true\n\
         \x20     schema:\n        openAPIV3Schema:\n          type: object\n\
         \x20         x-kubernetes-preserve-unknown-fields: true\n"
    )
}

fn widget(group: &str, name: &str) -> String {
    format!(
        "---\n# Source: demo/templates/widget.yaml\napiVersion: {group}/v1\nkind: Widget\n\
         metadata:\n  name: {name}\nspec:\n  size: 3\n"
    )
}

async fn delete_crd(client: &Client, group: &str) {
    let _ = Api::<CustomResourceDefinition>::all(client.clone())
        .delete(&format!("widgets.{group}"), &DeleteParams::default())
        .await;
}

fn widgets(client: &Client, group: &str, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: group.to_string(),
        version: "v1".to_string(),
        api_version: format!("{group}/v1"),
        kind: "Widget".to_string(),
        plural: "widgets".to_string(),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

#[tokio::test]
async fn crds_from_the_chart_are_installed_before_objects_of_their_kind() {
    let (client, applier, ns) = setup("apply-crds").await;
    let group = format!("{}.apply.wheelhouse.dev", ns.name);

    // Discovery is cached before the CRD exists: the Applier must look again.
    let err = applier
        .apply(&widget(&group, "w1"), &ns.name, RELEASE)
        .await
        .expect_err("no Widget yet");
    assert!(matches!(err, Error::UnknownKind { .. }), "{err:?}");

    let installed = applier
        .apply_crds(&[widget_crd(&group, "wdg")], CrdPolicy::Create)
        .await
        .unwrap();
    assert_eq!(
        refs(&installed),
        [format!("CustomResourceDefinition/widgets.{group}")]
    );
    let applied = applier
        .apply(&widget(&group, "w1"), &ns.name, RELEASE)
        .await
        .unwrap();
    assert_eq!(refs(&applied), [format!("Widget/{}/w1", ns.name)]);
    let w1 = widgets(&client, &group, &ns.name).get("w1").await.unwrap();
    assert_eq!(w1.data["spec"]["size"], 3);

    // Create leaves an existing CRD alone; CreateReplace updates it.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_name = format!("widgets.{group}");
    let changed = widget_crd(&group, "wdgt");
    let created = applier
        .apply_crds(std::slice::from_ref(&changed), CrdPolicy::Create)
        .await
        .unwrap();
    assert!(created.is_empty());
    let short_names = |crd: CustomResourceDefinition| crd.spec.names.short_names.unwrap();
    assert_eq!(short_names(crds.get(&crd_name).await.unwrap()), ["wdg"]);
    let replaced = applier
        .apply_crds(&[changed], CrdPolicy::CreateReplace)
        .await
        .unwrap();
    assert_eq!(replaced.len(), 1);
    assert_eq!(short_names(crds.get(&crd_name).await.unwrap()), ["wdgt"]);

    delete_crd(&client, &group).await;
    ns.delete().await;
}

#[tokio::test]
async fn skip_leaves_crds_alone() {
    let (client, applier, ns) = setup("apply-crd-skip").await;
    let group = format!("{}.apply.wheelhouse.dev", ns.name);
    let installed = applier
        .apply_crds(&[widget_crd(&group, "wdg")], CrdPolicy::Skip)
        .await
        .unwrap();
    assert!(installed.is_empty());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get_opt(&format!("widgets.{group}"))
            .await
            .unwrap()
            .is_none()
    );
    let err = applier
        .apply(&widget(&group, "w1"), &ns.name, RELEASE)
        .await
        .expect_err("no Widget kind");
    assert!(err.to_string().contains("Widget/w1"), "{err}");
    ns.delete().await;
}

#[tokio::test]
async fn a_crd_in_the_templates_is_served_before_its_objects_are_applied() {
    let (client, applier, ns) = setup("apply-crd-inline").await;
    let group = format!("{}.apply.wheelhouse.dev", ns.name);
    // The custom resource comes first in the manifest; install order puts the CRD first.
    let manifest = format!(
        "{}---\n# Source: demo/templates/crd.yaml\n{}",
        widget(&group, "w1"),
        widget_crd(&group, "wdg")
    );
    let applied = applier.apply(&manifest, &ns.name, RELEASE).await.unwrap();
    assert_eq!(
        refs(&applied),
        [
            format!("CustomResourceDefinition/widgets.{group}"),
            format!("Widget/{}/w1", ns.name)
        ]
    );
    assert!(
        widgets(&client, &group, &ns.name)
            .get_opt("w1")
            .await
            .unwrap()
            .is_some()
    );
    delete_crd(&client, &group).await;
    ns.delete().await;
}

// Hooks.

fn hook(
    name: &str,
    kind: &str,
    events: &[&str],
    weight: i32,
    policies: &[&str],
    manifest: String,
) -> Hook {
    Hook {
        name: name.to_string(),
        kind: kind.to_string(),
        path: format!("demo/templates/{name}.yaml"),
        manifest,
        events: events.iter().map(|e| e.to_string()).collect(),
        weight,
        delete_policies: policies.iter().map(|p| p.to_string()).collect(),
        ..Hook::default()
    }
}

fn job_hook(
    name: &str,
    event: &str,
    weight: i32,
    policies: &[&str],
    behavior: Option<&str>,
) -> Hook {
    let labels = behavior
        .map(|b| format!("      labels: {{wheelhouse.dev/test-behavior: {b}}}\n"))
        .unwrap_or_default();
    let manifest = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n\
         \x20   helm.sh/hook: {event}\nspec:\n  backoffLimit: 0\n  template:\n    metadata:\n{labels}\
         \x20   spec:\n      restartPolicy: Never\n\
         \x20     containers:\n        - name: run\n          image: registry.invalid/job:1\n"
    );
    hook(name, "Job", &[event], weight, policies, manifest)
}

fn pod_hook(
    name: &str,
    event: &str,
    weight: i32,
    policies: &[&str],
    behavior: Option<&str>,
) -> Hook {
    let labels = behavior
        .map(|b| format!("  labels: {{wheelhouse.dev/test-behavior: {b}}}\n"))
        .unwrap_or_default();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{labels}  annotations:\n\
         \x20   helm.sh/hook: {event}\nspec:\n  restartPolicy: Never\n  containers:\n\
         \x20   - name: test\n      image: registry.invalid/test:1\n"
    );
    hook(name, "Pod", &[event], weight, policies, manifest)
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_pre_install_job_hook_completes_before_the_apply() {
    let (client, applier, ns) = setup("apply-hook-job").await;
    let mut hooks = vec![
        job_hook("migrate", "pre-install", 0, &[], None),
        pod_hook("later", "post-install", 0, &[], None),
    ];
    applier
        .run_hooks(&mut hooks, "pre-install", &ns.name, PATIENCE)
        .await
        .unwrap();
    let run = &hooks[0].last_run;
    assert_eq!(run.phase, HookPhase::Succeeded);
    assert!(run.started_at.is_some() && run.completed_at >= run.started_at);
    // The default delete policy is recorded, as Helm records it.
    assert_eq!(hooks[0].delete_policies, ["before-hook-creation"]);
    // Only the hooks of the event ran.
    assert_eq!(hooks[1].last_run.phase, HookPhase::NotRun);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    assert!(pods.get_opt("later").await.unwrap().is_none());

    let job = Api::<Job>::namespaced(client.clone(), &ns.name)
        .get("migrate")
        .await
        .unwrap();
    let complete = job.status.unwrap().conditions.unwrap_or_default();
    assert!(
        complete
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True"),
        "{complete:?}"
    );
    let applied = applier
        .apply(&web_manifest(), &ns.name, RELEASE)
        .await
        .unwrap();
    assert_eq!(applied.len(), 3);
    ns.delete().await;
}

#[tokio::test]
async fn a_test_pod_hook_succeeds() {
    let (client, applier, ns) = setup("apply-hook-test").await;
    let mut hooks = vec![pod_hook("demo-test", "test", 0, &[], None)];
    applier
        .run_hooks(&mut hooks, "test", &ns.name, PATIENCE)
        .await
        .unwrap();
    assert_eq!(hooks[0].last_run.phase, HookPhase::Succeeded);
    let pod = Api::<Pod>::namespaced(client, &ns.name)
        .get("demo-test")
        .await
        .unwrap();
    assert_eq!(phase(&pod), "Succeeded");
    ns.delete().await;
}

#[tokio::test]
async fn a_failing_test_hook_fails_the_run_and_names_the_hook() {
    let (_client, applier, ns) = setup("apply-hook-fail").await;
    let mut hooks = vec![
        pod_hook("demo-test-bad", "test", 0, &[], Some("fail")),
        pod_hook("demo-test-after", "test", 1, &[], None),
    ];
    let err = applier
        .run_hooks(&mut hooks, "test", &ns.name, PATIENCE)
        .await
        .expect_err("the test pod fails");
    let msg = err.to_string();
    assert!(matches!(err, Error::HookFailed { .. }), "{err:?}");
    assert!(msg.contains("test hook demo-test-bad"), "{msg}");
    assert!(msg.contains("pod failed"), "{msg}");
    assert!(
        msg.contains("failed as the test-behavior label asked"),
        "{msg}"
    );
    assert_eq!(hooks[0].last_run.phase, HookPhase::Failed);
    assert!(hooks[0].last_run.completed_at.is_some());
    // The first failure stops the run.
    assert_eq!(hooks[1].last_run.phase, HookPhase::NotRun);
    ns.delete().await;
}

#[tokio::test]
async fn a_failing_job_hook_reports_the_job_condition_and_honours_hook_failed() {
    let (client, applier, ns) = setup("apply-hook-jobfail").await;
    let mut hooks = vec![job_hook(
        "broken",
        "pre-upgrade",
        0,
        &["hook-failed"],
        Some("fail"),
    )];
    let err = applier
        .run_hooks(&mut hooks, "pre-upgrade", &ns.name, PATIENCE)
        .await
        .expect_err("the job fails");
    let msg = err.to_string();
    assert!(msg.contains("pre-upgrade hook broken"), "{msg}");
    assert!(msg.contains("BackoffLimitExceeded"), "{msg}");
    assert_eq!(hooks[0].last_run.phase, HookPhase::Failed);
    let jobs: Api<Job> = Api::namespaced(client, &ns.name);
    assert!(
        jobs.get_opt("broken").await.unwrap().is_none(),
        "hook-failed deletes it"
    );
    ns.delete().await;
}

#[tokio::test]
async fn a_hook_that_never_finishes_times_out() {
    let (_client, applier, ns) = setup("apply-hook-timeout").await;
    let mut hooks = vec![pod_hook(
        "stuck",
        "post-install",
        0,
        &[],
        Some("never-ready"),
    )];
    let err = applier
        .run_hooks(&mut hooks, "post-install", &ns.name, Duration::from_secs(3))
        .await
        .expect_err("the pod never finishes");
    let msg = err.to_string();
    assert!(msg.contains("post-install hook stuck"), "{msg}");
    assert!(msg.contains("timed out after 3s"), "{msg}");
    assert_eq!(hooks[0].last_run.phase, HookPhase::Failed);
    ns.delete().await;
}

#[tokio::test]
async fn weights_order_the_hooks() {
    let (_client, applier, ns) = setup("apply-hook-weights").await;
    // Name order and weight order disagree: weight wins.
    let mut hooks = vec![
        job_hook("a-second", "pre-install", 5, &[], None),
        job_hook("z-first", "pre-install", -5, &[], None),
    ];
    applier
        .run_hooks(&mut hooks, "pre-install", &ns.name, PATIENCE)
        .await
        .unwrap();
    let (second, first) = (&hooks[0].last_run, &hooks[1].last_run);
    assert_eq!(first.phase, HookPhase::Succeeded);
    assert_eq!(second.phase, HookPhase::Succeeded);
    assert!(
        first.completed_at.unwrap() <= second.started_at.unwrap(),
        "z-first ran {:?}..{:?}, a-second started {:?}",
        first.started_at,
        first.completed_at,
        second.started_at
    );
    ns.delete().await;
}

#[tokio::test]
async fn hook_succeeded_deletes_the_finished_hook() {
    let (client, applier, ns) = setup("apply-hook-cleanup").await;
    let mut hooks = vec![
        job_hook("cleanup", "post-upgrade", 0, &["hook-succeeded"], None),
        job_hook(
            "remains",
            "post-upgrade",
            1,
            &["before-hook-creation"],
            None,
        ),
    ];
    applier
        .run_hooks(&mut hooks, "post-upgrade", &ns.name, PATIENCE)
        .await
        .unwrap();
    assert_eq!(hooks[0].last_run.phase, HookPhase::Succeeded);
    let jobs: Api<Job> = Api::namespaced(client, &ns.name);
    assert!(jobs.get_opt("cleanup").await.unwrap().is_none());
    assert!(jobs.get_opt("remains").await.unwrap().is_some());
    ns.delete().await;
}

#[tokio::test]
async fn before_hook_creation_replaces_the_previous_hook_object() {
    let (client, applier, ns) = setup("apply-hook-replace").await;
    let pods: Api<Pod> = Api::namespaced(client, &ns.name);
    let mut hooks = vec![pod_hook("demo-test", "test", 0, &[], None)];
    applier
        .run_hooks(&mut hooks, "test", &ns.name, PATIENCE)
        .await
        .unwrap();
    let first = pods.get("demo-test").await.unwrap();
    assert_eq!(phase(&first), "Succeeded");

    applier
        .run_hooks(&mut hooks, "test", &ns.name, PATIENCE)
        .await
        .unwrap();
    let second = pods.get("demo-test").await.unwrap();
    assert_ne!(first.uid(), second.uid(), "the old pod was replaced");
    assert_eq!(phase(&second), "Succeeded");
    ns.delete().await;
}

#[tokio::test]
async fn a_rendered_chart_applies_and_its_hooks_run() {
    use wheelhouse::helm::render::{Previous, RenderRequest};

    let (client, applier, ns) = setup("apply-rendered").await;
    let chart =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/apply-render");
    let values = serde_json::Map::new();
    let renderer = support::renderer(None);
    let mut rendered = renderer
        .render(RenderRequest {
            release_name: RELEASE,
            namespace: &ns.name,
            chart_path: &chart,
            values: &values,
            previous: Some(Previous {
                version: 1,
                status: wheelhouse::helm::release::Status::Deployed,
                chart_name: "apply-render",
                chart_version: "0.1.0",
            }),
            discovery: None,
            as_user: None,
            kubeconfig: None,
            priority: Default::default(),
            post_renderers: &[],
            post_render_strategy: Default::default(),
            skip_schema_validation: false,
            chart_values: None,
            kept: None,
        })
        .await
        .unwrap();

    let applied = applier
        .apply(&rendered.manifest, &ns.name, RELEASE)
        .await
        .unwrap();
    assert_eq!(
        refs(&applied),
        [
            format!("ConfigMap/{}/demo-settings", ns.name),
            format!("Service/{}/demo", ns.name)
        ]
    );
    applier
        .run_hooks(&mut rendered.hooks, "post-upgrade", &ns.name, PATIENCE)
        .await
        .unwrap();
    applier
        .run_hooks(&mut rendered.hooks, "test", &ns.name, PATIENCE)
        .await
        .unwrap();
    assert!(
        rendered
            .hooks
            .iter()
            .all(|h| h.last_run.phase == HookPhase::Succeeded),
        "{:#?}",
        rendered.hooks
    );
    // The migrate Job asked to be deleted once it succeeded; the test Pod stays.
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    assert!(jobs.get_opt("demo-migrate").await.unwrap().is_none());
    let pods: Api<Pod> = Api::namespaced(client, &ns.name);
    assert_eq!(phase(&pods.get("demo-test").await.unwrap()), "Succeeded");
    ns.delete().await;
}

/// A ConfigMap created by someone else (not through a release), with Helm ownership
/// metadata for `release` when given.
async fn foreign_config_map(client: &Client, ns: &str, name: &str, release: Option<&str>) {
    let mut cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"team": "other"}},
        "data": {"owner": "other"}
    });
    if let Some(release) = release {
        cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "Helm".into();
        cm["metadata"]["annotations"] = serde_json::json!({
            "meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns});
    }
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(
            &PostParams {
                field_manager: Some("kubectl-create".into()),
                ..PostParams::default()
            },
            &serde_json::from_value(cm).unwrap(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn objects_of_someone_else_are_refused_with_helms_message_and_nothing_is_applied() {
    let (client, applier, ns) = setup("apply-owner").await;
    foreign_config_map(&client, &ns.name, "web", Some("other")).await;
    let owner = Owner::new(RELEASE, &ns.name);

    let err = applier
        .check_adoption(&web_manifest(), &owner)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Ownership { .. }), "{err}");
    assert!(
        text.starts_with(&format!(
            "ConfigMap \"web\" in namespace \"{}\" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key \"meta.helm.sh/release-name\" must equal \"demo\": current value is \"other\"",
            ns.name
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("owned by Helm release {}/other", ns.name)),
        "{text}"
    );

    // apply_release checks too, before sending anything: the Deployment and Service that
    // sort after the ConfigMap are not created either.
    let err = applier
        .apply_release(&web_manifest(), &owner)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Ownership { .. }), "{err}");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let cm = cms.get("web").await.unwrap();
    assert_eq!(cm.data.as_ref().unwrap()["owner"], "other");
    assert_eq!(cm.annotations()["meta.helm.sh/release-name"], "other");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("web").await.unwrap().is_none());

    // An object with no Helm metadata at all is refused too, naming who wrote it.
    foreign_config_map(&client, &ns.name, "plain", None).await;
    let err = applier
        .check_adoption(&config_map("plain", "", "  a: b"), &owner)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("label validation error: missing key \"app.kubernetes.io/managed-by\"")
            && err.to_string().contains("written by kubectl-create"),
        "{err}"
    );

    // The previous revision's objects are the release's own: no check for them.
    let previous = config_map("plain", "", "  a: b");
    applier
        .check_adoption(&previous, &owner.previous(Some(&previous)))
        .await
        .unwrap();

    // takeOwnership adopts it and marks it as the release's.
    let adopted = owner.take_ownership(true);
    applier
        .apply_release(&web_manifest(), &adopted)
        .await
        .unwrap();
    let cm = cms.get("web").await.unwrap();
    assert_eq!(cm.annotations()["meta.helm.sh/release-name"], RELEASE);
    assert_eq!(cm.data.unwrap()["greeting"], "hello");
    ns.delete().await;
}

#[tokio::test]
async fn prune_and_uninstall_leave_objects_that_belong_to_another_release() {
    let (client, applier, ns) = setup("apply-foreign").await;
    let owner = Owner::new(RELEASE, &ns.name);
    let old = format!(
        "{}{}",
        config_map("mine", "", "  a: b"),
        config_map("taken", "", "  a: b")
    );
    applier.apply_release(&old, &owner).await.unwrap();
    // Another release takes "taken" over (helm --take-ownership).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    cms.patch(
        "taken",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            "meta.helm.sh/release-name": "thief"}}})),
    )
    .await
    .unwrap();

    let removed = applier.delete(&old, &owner, Background).await.unwrap();
    assert_eq!(
        refs(&removed.deleted),
        [format!("ConfigMap/{}/mine", ns.name)]
    );
    assert_eq!(removed.foreign.len(), 1);
    assert!(
        removed.foreign_note().unwrap().contains("taken"),
        "{removed:?}"
    );
    assert!(cms.get_opt("taken").await.unwrap().is_some());

    let pruned = applier
        .prune(&old, &config_map("other", "", "  a: b"), &owner)
        .await
        .unwrap();
    assert!(pruned.deleted.is_empty(), "{pruned:?}");
    assert!(cms.get_opt("taken").await.unwrap().is_some());
    ns.delete().await;
}

/// Applies a Deployment the way another tool would: as `manager`, client-side
/// (`Update`, a create) or server-side (`Apply`).
async fn deployment_written_by(
    client: &Client,
    ns: &str,
    manager: &str,
    ssa: bool,
    node_selector: bool,
) {
    let mut obj = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": ns}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/web:1"}]}}}
    });
    if node_selector {
        obj["spec"]["template"]["spec"]["nodeSelector"] = serde_json::json!({"disk": "ssd"});
    }
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deployment: Deployment = serde_json::from_value(obj).unwrap();
    if ssa {
        api.patch(
            "web",
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&deployment),
        )
        .await
        .unwrap();
    } else {
        api.create(
            &PostParams {
                field_manager: Some(manager.into()),
                ..PostParams::default()
            },
            &deployment,
        )
        .await
        .unwrap();
    }
}

fn deployment_manifest(node_selector: bool) -> String {
    let selector = if node_selector {
        "      nodeSelector: {disk: ssd}\n"
    } else {
        ""
    };
    format!(
        "---\n# Source: demo/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\n\
         metadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n\
         \x20 template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n{selector}\
         \x20     containers:\n        - name: app\n          image: registry.invalid/web:1\n"
    )
}

#[tokio::test]
async fn a_field_the_new_manifest_drops_is_removed_whoever_wrote_the_release_before() {
    let client = client().await;
    let applier = Applier::new(client.clone());
    let previous = deployment_manifest(true);
    let next = deployment_manifest(false);
    // The helm CLI's client-side apply, wheelhouse round 1, and another tool that
    // server-side applied the same rendered release (Flux's helm-controller).
    for (manager, ssa) in [
        ("helm", false),
        ("wheelhouse", true),
        ("helm-controller", true),
    ] {
        let ns = TestNamespace::new(&client, "apply-handover").await;
        deployment_written_by(&client, &ns.name, manager, ssa, true).await;
        let owner = Owner::new(RELEASE, &ns.name).previous(Some(&previous));
        applier.apply_release(&next, &owner).await.unwrap();
        assert_eq!(
            support::node_selector(&client, &ns.name, "web").await,
            None,
            "written by {manager}"
        );
        let live = Api::<Deployment>::namespaced(client.clone(), &ns.name)
            .get("web")
            .await
            .unwrap();
        // The helm CLI's and round 1's entries fold whole into helm's Apply entry; another
        // manager keeps what the release never rendered (its own ownership metadata).
        let entries = managed_by(&live);
        assert!(
            !entries.contains(&("helm".into(), "Update".into()))
                && !entries.iter().any(|(m, _)| m == "wheelhouse"),
            "{manager}: {entries:?}"
        );
        ns.delete().await;
    }
}

#[tokio::test]
async fn fields_another_manager_set_on_its_own_are_left_alone() {
    let client = client().await;
    let applier = Applier::new(client.clone());
    let ns = TestNamespace::new(&client, "apply-theirs").await;
    let owner = Owner::new(RELEASE, &ns.name);
    applier
        .apply_release(&deployment_manifest(false), &owner)
        .await
        .unwrap();
    // An operator (not the release) adds a nodeSelector with its own field manager.
    Api::<Deployment>::namespaced(client.clone(), &ns.name)
        .patch(
            "web",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(serde_json::json!({"spec": {"template": {"spec": {
                "nodeSelector": {"zone": "a"}}}}})),
        )
        .await
        .unwrap();
    let previous = deployment_manifest(false);
    applier
        .apply_release(
            &deployment_manifest(false),
            &owner.previous(Some(&previous)),
        )
        .await
        .unwrap();
    assert_eq!(
        support::node_selector(&client, &ns.name, "web").await,
        Some([("zone".to_string(), "a".to_string())].into())
    );
    ns.delete().await;
}
