//! `wheelhouse rbac` grants exactly enough: an engine running as the generated
//! ServiceAccount (by impersonation) installs, tests, upgrades, tracks config and
//! uninstalls a release in its namespace, and is refused outside it.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::api::{DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use support::engine::{self as eng, is, wait_for, webapp};
use support::{PATIENCE, TestNamespace, client, install_crd, kubeconfig_path};
use wheelhouse::api::HelmRelease;

/// The release role of this test: exactly the kinds the webapp chart creates, so the
/// engine's own needs (HelmReleases, Helm storage Secrets, Lease, Events) come from the
/// generated engine role alone and are checked by the test.
const CONTENT_ROLE: &str = "wheelhouse-test-webapp-content";

async fn create_content_role(admin: &Client) {
    let role: ClusterRole = support::from_yaml(&format!(
        "metadata: {{name: {CONTENT_ROLE}}}\n\
         rules:\n\
         - apiGroups: ['']\n  resources: [configmaps, services, pods]\n  verbs: &all [get, list, watch, create, patch, update, delete]\n\
         - apiGroups: [apps]\n  resources: [deployments]\n  verbs: *all\n\
         - apiGroups: [batch]\n  resources: [jobs]\n  verbs: *all\n"
    ));
    Api::<ClusterRole>::all(admin.clone())
        .patch(
            CONTENT_ROLE,
            &PatchParams::apply("wheelhouse-tests").force(),
            &Patch::Apply(&role),
        )
        .await
        .unwrap();
}

/// Runs the real binary's `rbac` subcommand and applies its output as an administrator.
async fn apply_generated_rbac(admin: &Client, ns: &str) {
    create_content_role(admin).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .args(["rbac", "-n", ns, "--lease-namespace", ns])
        .args(["--release-role", CONTENT_ROLE])
        .args(["--service-account", &format!("{ns}/engine")])
        .output()
        .expect("wheelhouse rbac runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<DynamicObject> = wheelhouse::text::yaml::parse_documents(&text)
        .expect("rbac output is YAML")
        .into_iter()
        .map(|d| wheelhouse::text::yaml::from_value(d).expect("rbac output is YAML objects"))
        .collect();
    assert_eq!(docs.len(), 8, "{text}");
    for obj in docs {
        let types = obj.types.clone().unwrap();
        let gvk = GroupVersionKind::try_from(&types).unwrap();
        let (resource, caps) = kube::discovery::pinned_kind(admin, &gvk).await.unwrap();
        let api: Api<DynamicObject> = match (&obj.metadata.namespace, caps.scope) {
            (Some(ns), kube::discovery::Scope::Namespaced) => {
                Api::namespaced_with(admin.clone(), ns, &resource)
            }
            _ => Api::all_with(admin.clone(), &resource),
        };
        let name = obj.metadata.name.clone().unwrap();
        api.patch(
            &name,
            &PatchParams::apply("wheelhouse-tests").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {}/{name}: {e}", types.kind));
    }
}

/// A client that acts as the ServiceAccount, with only the permissions RBAC gives it.
async fn client_as(ns: &str, service_account: &str) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig_path()).unwrap();
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let (user, groups) = identity(ns, service_account);
    config.auth_info.impersonate = Some(user);
    config.auth_info.impersonate_groups = Some(groups);
    Client::try_from(config).unwrap()
}

/// The user and groups of a ServiceAccount, as the API server authenticates it.
fn identity(ns: &str, service_account: &str) -> (String, Vec<String>) {
    (
        format!("system:serviceaccount:{ns}:{service_account}"),
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
    )
}

/// Stops the engine when the test ends, pass or fail.
struct EngineGuard(wheelhouse::engine::EngineHandle);

impl Drop for EngineGuard {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// Lets the engine of `engine_ns` keep Helm's storage Secrets in `ns`.
async fn grant_secrets(admin: &Client, ns: &str, engine_ns: &str) {
    let role: Role = support::from_yaml(
        "metadata: {name: wheelhouse-test-storage}\n\
         rules:\n\
         - apiGroups: ['']\n  resources: [secrets]\n  verbs: [get, list, watch, create, patch, update, delete]\n",
    );
    let binding: RoleBinding = support::from_yaml(&format!(
        "metadata: {{name: wheelhouse-test-storage}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: wheelhouse-test-storage}}\n\
         subjects: [{{kind: ServiceAccount, name: engine, namespace: {engine_ns}}}]\n"
    ));
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

fn forbidden<T: std::fmt::Debug>(result: kube::Result<T>) -> bool {
    matches!(result, Err(kube::Error::Api(ref e)) if e.code == 403)
}

#[tokio::test]
async fn the_generated_rbac_is_enough_for_the_engine_and_no_more() {
    let admin = client().await;
    install_crd(&admin).await;
    let ns = TestNamespace::new(&admin, "rbac").await;
    apply_generated_rbac(&admin, &ns.name).await;
    let engine_client = client_as(&ns.name, "engine").await;

    // Outside its namespace and its grant, the engine is refused.
    let ns_name = ns.name.clone();
    let checks = || async {
        forbidden(
            Api::<Secret>::namespaced(engine_client.clone(), "kube-system")
                .list(&ListParams::default())
                .await,
        ) && forbidden(
            Api::<HelmRelease>::all(engine_client.clone())
                .list(&ListParams::default())
                .await,
        ) && forbidden(
            Api::<ClusterRole>::all(engine_client.clone())
                .create(
                    &PostParams::default(),
                    &support::from_yaml("metadata: {name: wheelhouse-rbac-test-escalation}"),
                )
                .await,
        ) && !forbidden(
            Api::<Secret>::namespaced(engine_client.clone(), &ns_name)
                .list(&ListParams::default())
                .await,
        )
    };
    // RBAC objects take effect in the API server's authorizer cache within moments.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !checks().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the engine's grant is not what the generated RBAC says"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // helm renders (discovery, lookup) as the same ServiceAccount.
    let (mut config, _cache) = eng::config(&ns.name, "rbac-engine");
    let metrics = config.metrics.clone();
    let (user, groups) = identity(&ns.name, "engine");
    config.renderer = support::renderer(Some((&user, &groups)));
    let handle = wheelhouse::engine::start(engine_client.clone(), config).unwrap();
    let mut role = handle.role();
    tokio::time::timeout(
        PATIENCE,
        role.wait_for(|r| *r == wheelhouse::engine::Role::Leader),
    )
    .await
    .expect("the engine took the lease")
    .unwrap();
    let _engine = EngineGuard(handle);
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            serde_json::json!({
                "test": {"enable": true},
                "values": {"tests": {"enabled": true}, "message": "v1"},
            }),
        ),
    )
    .await
    .unwrap();
    wait_for(
        &api,
        "web",
        "installed and tested as the ServiceAccount",
        |h| is(h, "Ready", "True", "TestSucceeded"),
    )
    .await;

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"values": {"message": "v2"}}})),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "upgraded as the ServiceAccount", |h| {
        h.status.as_ref().is_some_and(|s| s.history[0].version == 2)
            && is(h, "Ready", "True", "TestSucceeded")
    })
    .await;

    // Config tracking watches and patches with the same grant: an outside change to the
    // consumed ConfigMap rolls the Deployment.
    let deployments = Api::<Deployment>::namespaced(admin.clone(), &ns.name);
    let before = eng::config_hash(&deployments, "web").await;
    assert!(before.is_some());
    Api::<ConfigMap>::namespaced(admin.clone(), &ns.name)
        .patch(
            "web-config",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"EXTRA": "changed outside"}})),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while eng::config_hash(&deployments, "web").await == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the tracker did not roll web"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // A storage namespace the grant does not cover: a clear reason naming the refused
    // call, an Event, no raw dump of the API server's answer.
    let vault = TestNamespace::new(&admin, "rbac-vault").await;
    api.create(
        &PostParams::default(),
        &webapp(
            "locked",
            serde_json::json!({"storageNamespace": vault.name, "interval": "10m"}),
        ),
    )
    .await
    .unwrap();
    let locked = wait_for(&api, "locked", "Forbidden", |h| {
        is(h, "Ready", "False", "Forbidden")
    })
    .await;
    let message = locked.condition("Ready").unwrap().message.clone();
    assert!(
        message.contains("cannot list resource \"secrets\"")
            && message.contains(&vault.name)
            && message.contains("wheelhouse rbac"),
        "{message}"
    );
    assert!(
        !message.contains("Status {") && !message.contains("ApiError"),
        "{message}"
    );
    let events = eng::events_of(&admin, &ns.name, "locked").await;
    assert!(
        events.iter().any(|e| e.starts_with("Forbidden: ")),
        "{events:?}"
    );

    // The permission granted: the release starts again as soon as the engine sees the
    // grant (a SelfSubjectAccessReview), not when its backoff runs out.
    let retried = eng::cause_retries(&metrics, "access_granted");
    let granted = std::time::Instant::now();
    grant_secrets(&admin, &vault.name, &ns.name).await;
    wait_for(&api, "locked", "installed once granted", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    println!(
        "permission granted -> release Ready in {:.2} s",
        granted.elapsed().as_secs_f64()
    );
    assert!(
        eng::cause_retries(&metrics, "access_granted") > retried,
        "{}",
        metrics.encode()
    );
    eng::delete_and_await_uninstall(&admin, &ns.name, "locked").await;

    eng::delete_and_await_uninstall(&admin, &ns.name, "web").await;
    ns.delete().await;
    vault.delete().await;
}
