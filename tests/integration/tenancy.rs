//! Tenant boundaries: a HelmRelease acts only with the rights its namespace grants. The
//! controller runs as `wheelhouse install --default-service-account tenant-deployer
//! --no-cross-namespace-refs` deploys it (its ServiceAccount's token, the installed grant,
//! the Deployment's flags); the dashboard's in-process engine runs with the test's
//! administrator credentials against the published policy; Flux's helm-controller,
//! locked down the same way (tests/cluster/up.sh runs it as the shard `lockdown`), takes
//! the same tenant chart beside it.

use crate::support;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, ResourceExt};
use support::engine::{events_of, helm_history, release, wait_for};
use support::installed::{
    Controller, OnlyWriter, eventually, service_account_kubeconfig, wheelhouse_install,
};
use support::{TestNamespace, client, install_crd, testbin};
use wheelhouse::api::HelmRelease;
use wheelhouse::cluster::tenancy;
use wheelhouse::frontend::install::SERVICE_ACCOUNT;

/// The lockdown's default ServiceAccount, as the local control plane's locked-down Flux
/// helm-controller names it too.
pub(super) const DEPLOYER: &str = "tenant-deployer";
/// The tests' chart servers, registries and Git server listen on loopback, which the
/// lockdown's outbound policy refuses to tenants' sources unless allowed: the installed
/// controller allows it, as a platform team lists its own repositories' networks.
pub(super) const LOOPBACK: &str = "127.0.0.0/8";
const MANAGER: &str = "wheelhouse-tests";

/// The installed controller, shared by the tests of this file: one install (its
/// ClusterRoleBinding names one ServiceAccount), each test a controller of its own.
pub(super) struct Installed {
    pub(super) system: String,
    /// The Deployment's tenancy flags, as the controller in the cluster gets them.
    pub(super) flags: Vec<String>,
}

static INSTALLED: tokio::sync::OnceCell<Installed> = tokio::sync::OnceCell::const_new();

pub(super) async fn installed(admin: &Client) -> &'static Installed {
    INSTALLED
        .get_or_init(|| async {
            install_crd(admin).await;
            let system = format!("tenancy-sys-{:x}", support::rand_u32());
            let docs = wheelhouse_install(&[
                "--namespace",
                &system,
                "--default-service-account",
                DEPLOYER,
                "--no-cross-namespace-refs",
                "--allow-network",
                LOOPBACK,
            ]);
            // The published policy is cluster-wide: only the dashboard test publishes it,
            // for as long as it runs, so the rest of the suite never sees a lockdown.
            let (published, rest): (Vec<_>, Vec<_>) = docs
                .into_iter()
                .partition(|d| d["metadata"]["namespace"] == tenancy::SETTINGS_NAMESPACE);
            assert_eq!(published.len(), 3, "install publishes the policy");
            let rest = support::installed::apart(rest, &system);
            support::apply_documents(admin, &rest, MANAGER).await;
            let deployment = rest
                .iter()
                .find(|d| d["kind"] == "Deployment")
                .expect("a controller Deployment");
            let args: Vec<String> = serde_json::from_value(
                deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
            )
            .unwrap();
            let at = args
                .iter()
                .position(|a| a == "--default-service-account")
                .expect("the Deployment runs with the lockdown");
            assert!(args.iter().any(|a| a == "--no-cross-namespace-refs"));
            let allow = args
                .iter()
                .position(|a| a == "--allow-network")
                .expect("the Deployment runs with the outbound policy's exception");
            assert_eq!(args[allow + 1], LOOPBACK);
            Installed {
                system,
                flags: vec![
                    args[at].clone(),
                    args[at + 1].clone(),
                    "--no-cross-namespace-refs".into(),
                    args[allow].clone(),
                    args[allow + 1].clone(),
                ],
            }
        })
        .await
}

/// A tenant's namespace: its `tenant-deployer` ServiceAccount holds `admin` there, as a
/// platform team sets up each tenant.
pub(super) async fn tenant(admin: &Client, prefix: &str) -> TestNamespace {
    let ns = TestNamespace::new(admin, prefix).await;
    create_account(admin, &ns.name, DEPLOYER, true).await;
    ns
}

/// Creates ServiceAccount `name` in `ns`, with `admin` there when `grant`.
pub(super) async fn create_account(admin: &Client, ns: &str, name: &str, grant: bool) {
    let sa: ServiceAccount = support::from_yaml(&format!("metadata: {{name: {name}}}"));
    Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    if grant {
        grant_admin(admin, ns, name).await;
    }
}

pub(super) async fn grant_admin(admin: &Client, ns: &str, name: &str) {
    let binding: RoleBinding = support::from_yaml(&format!(
        "metadata: {{name: {name}-admin}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}}\n\
         subjects: [{{kind: ServiceAccount, name: {name}, namespace: {ns}}}]"
    ));
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// A namespace holding a Secret `db-pass` with a password nobody else may read; returns
/// the namespace and the password.
pub(super) async fn victim(admin: &Client) -> (TestNamespace, String) {
    let ns = TestNamespace::new(admin, "victim").await;
    let password = format!("S3cret-{:x}-{:x}", support::rand_u32(), support::rand_u32());
    let secret: Secret = support::from_yaml(&format!(
        "metadata: {{name: db-pass}}\nstringData: {{password: {password}}}"
    ));
    Api::<Secret>::namespaced(admin.clone(), &ns.name)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    (ns, password)
}

/// The Ready condition's status and message.
pub(super) fn ready_says(hr: &HelmRelease) -> Option<(String, String)> {
    hr.condition("Ready")
        .map(|c| (c.status.clone(), c.message.clone()))
}

/// Whether Helm's storage holds any revision of `name` in `ns` (`helm history` fails
/// with "not found" otherwise).
pub(super) fn stored(ns: &str, name: &str) -> bool {
    let (ok, text) = support::engine::helm_try(ns, &["history", name]);
    assert!(ok || text.contains("not found"), "{text}");
    ok
}

/// The tenant chart from a Helm repository on 127.0.0.1 (`charts`: the URL): under the
/// lockdown no chart.path is read, so a tenant's chart comes from a repository.
pub(super) fn from_repo(charts: &str, name: &str, spec: serde_json::Value) -> HelmRelease {
    let mut hr = release(name, "tenant-reach", spec);
    hr.spec.chart = support::from_yaml(&format!(
        "{{repository: \"{charts}\", name: tenant-reach, version: 0.1.0}}"
    ));
    hr
}

pub(super) fn reach(charts: &str, name: &str, values: serde_json::Value) -> HelmRelease {
    from_repo(charts, name, serde_json::json!({"values": values}))
}

/// Serves the tenant chart; keep the server for as long as the test runs.
pub(super) async fn tenant_charts() -> (support::source::RepoServer, String) {
    let chart = PathBuf::from(support::engine::chart("tenant-reach"));
    support::flux::serve(&chart, "tenant-reach", &["0.1.0"]).await
}

/// The installed controller, as its pod runs: the ServiceAccount's token only, every
/// namespace, the Deployment's tenancy flags; and a shard of its own (`shard`), so that
/// it reconciles only this test's releases (each labelled with it, see [`sharded`]).
pub(super) async fn controller(admin: &Client, shard: &str, home: &std::path::Path) -> Controller {
    let flags = installed(admin).await.flags.clone();
    controller_with(admin, shard, home, &flags).await
}

/// [`controller`] with other tenancy `flags` than the installed Deployment's.
pub(super) async fn controller_with(
    admin: &Client,
    shard: &str,
    home: &std::path::Path,
    flags: &[String],
) -> Controller {
    let installed = installed(admin).await;
    let kubeconfig =
        service_account_kubeconfig(admin, &installed.system, SERVICE_ACCOUNT, home).await;
    let mut args = vec!["--shard".to_owned(), shard.to_owned()];
    args.extend(flags.iter().cloned());
    Controller::start_with(&kubeconfig, &installed.system, home, &args)
}

/// `hr` in the test's shard (its namespace's name).
pub(super) fn sharded(mut hr: HelmRelease, shard: &str) -> HelmRelease {
    hr.metadata
        .labels
        .get_or_insert_default()
        .insert(wheelhouse::engine::SHARD_LABEL.into(), shard.into());
    hr
}

/// Everything a tenant could read the password from: the HelmRelease (status included),
/// the Events and ConfigMaps of its namespace, and `log`.
async fn assert_nowhere(admin: &Client, ns: &str, password: &str, log: &str) {
    let hrs = Api::<HelmRelease>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let shown = serde_json::to_string(&hrs.items).unwrap();
    assert!(
        !shown.contains(password),
        "the password is in a HelmRelease: {shown}"
    );
    for event in events_of(admin, ns, "reach").await {
        assert!(
            !event.contains(password),
            "the password is in an Event: {event}"
        );
    }
    let configmaps = Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let shown = serde_json::to_string(&configmaps.items).unwrap();
    assert!(
        !shown.contains(password),
        "the password is in a ConfigMap: {shown}"
    );
    assert!(!log.contains(password), "the password is in the log");
}

async fn no_takeover(admin: &Client, victim: &str) {
    let bindings = Api::<RoleBinding>::namespaced(admin.clone(), victim)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        bindings.items.is_empty(),
        "a RoleBinding appeared in {victim}: {:?}",
        bindings
            .items
            .iter()
            .map(|b| b.name_any())
            .collect::<Vec<_>>()
    );
}

/// The tenant chart of the issue: a `lookup` of another namespace's Secret and a
/// RoleBinding there. As the tenant's ServiceAccount the lookup is refused, as helm run
/// with that ServiceAccount's credentials refuses it; nothing is applied and the password
/// appears nowhere.
#[tokio::test]
async fn a_tenant_chart_reads_and_binds_nothing_outside_its_namespace() {
    let admin = client().await;
    let (_charts, charts) = tenant_charts().await;
    let ns = tenant(&admin, "tenancy-a").await;
    let (victim, password) = victim(&admin).await;
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &ns.name, home.path()).await;
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &sharded(
            reach(&charts, "reach", serde_json::json!({"victim": victim.name})),
            &ns.name,
        ),
    )
    .await
    .unwrap();
    let user = format!("system:serviceaccount:{}:{DEPLOYER}", ns.name);
    controller
        .wait_for(&api, "reach", "the lookup refused, named", |h| {
            ready_says(h)
                .is_some_and(|(s, m)| s == "False" && m.contains("forbidden") && m.contains(&user))
        })
        .await;
    let hr = api.get("reach").await.unwrap();
    let (_, message) = ready_says(&hr).unwrap();
    assert!(
        message.contains("get resource \"secrets\"") && message.contains(&victim.name),
        "the reason names the verb, the resource and where: {message}"
    );
    // Held, not failed: no retry used, nothing stored, nothing applied.
    assert!(
        hr.condition("Stalled").is_none_or(|c| c.status != "True"),
        "{hr:?}"
    );
    assert!(!stored(&ns.name, "reach"));
    no_takeover(&admin, &victim.name).await;
    assert_nowhere(&admin, &ns.name, &password, &controller.log()).await;

    // helm v4.3.1 with the ServiceAccount's own credentials refuses the same lookup.
    let chart = support::engine::chart("tenant-reach");
    let out = std::process::Command::new(testbin().join("helm"))
        .args([
            "template",
            "reach",
            &chart,
            "--dry-run=server",
            "--namespace",
            &ns.name,
        ])
        .args(["--set", &format!("victim={}", victim.name)])
        .args(["--kube-as-user", &user, "--kubeconfig"])
        .arg(support::kubeconfig_path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "helm rendered it as {user}");
    assert!(
        stderr.contains("forbidden") && stderr.contains("cannot get resource \"secrets\""),
        "{stderr}"
    );
    assert!(!stderr.contains(&password));
    controller.stop();
    ns.delete().await;
    victim.delete().await;
}

/// A legitimate release of the same tenant installs, upgrades, rolls back and uninstalls,
/// and an admission policy that refuses every other writer in its namespace shows that
/// every write (its objects and Helm's storage) was made as its ServiceAccount.
#[tokio::test]
async fn a_tenant_release_lives_as_its_service_account() {
    let admin = client().await;
    let (_charts, charts) = tenant_charts().await;
    let ns = tenant(&admin, "tenancy-b").await;
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &ns.name, home.path()).await;
    let user = format!("system:serviceaccount:{}:{DEPLOYER}", ns.name);
    let only = OnlyWriter::create(&admin, &ns.name, &user).await;
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &sharded(
            reach(&charts, "legit", serde_json::json!({"message": "v1"})),
            &ns.name,
        ),
    )
    .await
    .unwrap();
    let ready = |reason: &'static str, revision: i32| {
        move |h: &HelmRelease| {
            ready_says(h).is_some_and(|(s, _)| s == "True")
                && h.condition("Ready").is_some_and(|c| c.reason == reason)
                && h.status
                    .as_ref()
                    .and_then(|s| s.history.first())
                    .map(|r| r.version)
                    == Some(revision)
        }
    };
    controller
        .wait_for(&api, "legit", "installed", ready("InstallSucceeded", 1))
        .await;
    support::engine::set_values(&api, "legit", serde_json::json!({"message": "v2"})).await;
    controller
        .wait_for(&api, "legit", "upgraded", ready("UpgradeSucceeded", 2))
        .await;
    // Roll back and pin, as the dashboard's `b` writes it.
    let request = wheelhouse::api::RollbackRequest {
        revision: 1,
        requested_by: "tenancy-test".into(),
        requested_at: "t1".into(),
    };
    api.patch(
        "legit",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({
            "metadata": {"annotations": {wheelhouse::api::annotations::ROLLBACK_TO: request.to_annotation()}},
            "spec": {"suspend": true},
        })),
    )
    .await
    .unwrap();
    controller
        .wait_until("rolled back to revision 1 as revision 3", || async {
            helm_history(&ns.name, "legit")
                .iter()
                .any(|(r, s, d)| *r == 3 && s == "deployed" && d.contains("Rollback to 1"))
        })
        .await;
    let message = Api::<ConfigMap>::namespaced(admin.clone(), &ns.name)
        .get("legit-reach")
        .await
        .unwrap()
        .data
        .unwrap()["message"]
        .clone();
    assert_eq!(message, "v1");
    // Resumed, it returns to its spec (revision 4); deleted, it is uninstalled.
    api.patch(
        "legit",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"suspend": false}})),
    )
    .await
    .unwrap();
    controller
        .wait_for(
            &api,
            "legit",
            "back to its spec",
            ready("UpgradeSucceeded", 4),
        )
        .await;
    api.delete("legit", &DeleteParams::default()).await.unwrap();
    controller
        .wait_until("uninstalled and gone", || async {
            api.get_opt("legit").await.unwrap().is_none()
        })
        .await;
    assert!(!stored(&ns.name, "legit"));
    assert!(
        Api::<ConfigMap>::namespaced(admin.clone(), &ns.name)
            .get_opt("legit-reach")
            .await
            .unwrap()
            .is_none()
    );
    controller.stop();
    only.delete(&admin).await;
    ns.delete().await;
}

/// Under --no-cross-namespace-refs each reference that leaves the HelmRelease's namespace
/// is refused, naming the field, and nothing is stored or applied anywhere.
#[tokio::test]
async fn cross_namespace_references_are_refused_by_name() {
    let admin = client().await;
    let (_charts, charts) = tenant_charts().await;
    let ns = tenant(&admin, "tenancy-c").await;
    let (other, _) = victim(&admin).await;
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &ns.name, home.path()).await;
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &ns.name);
    let cases = [
        (
            "target",
            serde_json::json!({"targetNamespace": other.name}),
            "spec.targetNamespace",
        ),
        (
            "storage",
            serde_json::json!({"storageNamespace": other.name}),
            "spec.storageNamespace",
        ),
        (
            "depends",
            serde_json::json!({"dependsOn": [{"name": "db", "namespace": other.name}]}),
            "spec.dependsOn[0].namespace",
        ),
    ];
    for (name, spec, _) in &cases {
        api.create(
            &PostParams::default(),
            &sharded(from_repo(&charts, name, spec.clone()), &ns.name),
        )
        .await
        .unwrap();
    }
    for (name, _, field) in &cases {
        controller
            .wait_for(&api, name, "refused, naming the field", |h| {
                h.condition("Stalled").is_some_and(|c| {
                    c.status == "True" && c.reason == "AccessDenied" && c.message.contains(field)
                })
            })
            .await;
        assert!(!stored(&ns.name, name), "{name}");
        assert!(!stored(&other.name, name), "{name}");
    }
    // The engine's filesystem is not a tenant's: a chart.path is refused, named.
    api.create(
        &PostParams::default(),
        &sharded(
            release("local", "tenant-reach", serde_json::json!({})),
            &ns.name,
        ),
    )
    .await
    .unwrap();
    controller
        .wait_for(&api, "local", "the chart path refused", |h| {
            h.condition("Ready").is_some_and(|c| {
                c.reason == "ArtifactFailed"
                    && c.message.contains("chart.path")
                    && c.message.contains("locked down")
            })
        })
        .await;
    assert!(!stored(&ns.name, "local"));
    let stored = Api::<Secret>::namespaced(admin.clone(), &other.name)
        .list(&ListParams::default().labels("owner=helm"))
        .await
        .unwrap();
    assert!(stored.items.is_empty());
    controller.stop();
    ns.delete().await;
    other.delete().await;
}

/// Publishes the lockdown (as `wheelhouse install` does) for as long as it lives, and
/// takes it back when dropped, even when the test fails. Held with [`UNPUBLISHED`], so a
/// test that needs no published policy never runs meanwhile.
struct Published {
    _held: tokio::sync::MutexGuard<'static, ()>,
}

/// Held by whoever publishes the cluster-wide policy, or needs none published.
pub(super) static UNPUBLISHED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Published {
    async fn lockdown(admin: &Client) -> Self {
        let guard = UNPUBLISHED.lock().await;
        // The tests' repositories are on loopback: allowed, as a platform team lists the
        // networks of its own repositories.
        let policy = tenancy::Policy {
            default_service_account: Some(DEPLOYER.into()),
            no_cross_namespace_refs: true,
            allowed_networks: wheelhouse::cluster::egress::parse_networks(LOOPBACK).unwrap(),
            ..Default::default()
        };
        support::apply_documents(admin, &tenancy::manifests(&policy), MANAGER).await;
        Self { _held: guard }
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        let _ = std::process::Command::new(testbin().join("kubectl"))
            .args(["--kubeconfig"])
            .arg(support::kubeconfig_path())
            .args([
                "delete",
                "configmap",
                tenancy::SETTINGS_NAME,
                "-n",
                tenancy::SETTINGS_NAMESPACE,
            ])
            .args(["--ignore-not-found"])
            .output();
    }
}

/// A dashboard opened with cluster-admin credentials on a locked-down cluster: its
/// in-process engine reads the published policy and reconciles the tenant's release as
/// the tenant's ServiceAccount, never with the administrator's rights; an identity that
/// may not impersonate does not run an engine at all, and says why.
#[tokio::test]
async fn a_dashboard_engine_enforces_the_published_lockdown() {
    let admin = client().await;
    let (_charts, charts) = tenant_charts().await;
    install_crd(&admin).await;
    let ns = tenant(&admin, "tenancy-d").await;
    let (victim, password) = victim(&admin).await;
    let _published = Published::lockdown(&admin).await;
    // The dashboard's engine: the engine config a dashboard builds (no tenancy flags).
    let engine = support::engine::start(&admin, &ns.name).await;
    assert_eq!(
        engine.handle.policy().default_service_account.as_deref(),
        Some(DEPLOYER)
    );
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &reach(&charts, "reach", serde_json::json!({"victim": victim.name})),
    )
    .await
    .unwrap();
    let user = format!("system:serviceaccount:{}:{DEPLOYER}", ns.name);
    wait_for(&api, "reach", "the lookup refused as the tenant", |h| {
        ready_says(h)
            .is_some_and(|(s, m)| s == "False" && m.contains("forbidden") && m.contains(&user))
    })
    .await;
    no_takeover(&admin, &victim.name).await;
    assert_nowhere(&admin, &ns.name, &password, "").await;
    drop(engine);

    // An identity that may read the namespace but not impersonate there (a namespace
    // `admin` may: Kubernetes' `edit` includes impersonating its ServiceAccounts) runs
    // no engine under the lockdown, and says why.
    create_account(&admin, &ns.name, "viewer", false).await;
    let binding: RoleBinding = support::from_yaml(&format!(
        "metadata: {{name: viewer-view}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\n\
         subjects: [{{kind: ServiceAccount, name: viewer, namespace: {}}}]",
        ns.name
    ));
    Api::<RoleBinding>::namespaced(admin.clone(), &ns.name)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = service_account_kubeconfig(&admin, &ns.name, "viewer", home.path()).await;
    let tenant_client = Client::try_from(
        Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&kubeconfig).unwrap(),
            &KubeConfigOptions::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let (mut config, _cache) = support::engine::config(&ns.name, "tenant-dashboard");
    config.renderer = support::renderer(None);
    let handle = wheelhouse::engine::start(tenant_client, config).unwrap();
    let mut role = handle.role();
    let role = tokio::time::timeout(
        support::PATIENCE,
        role.wait_for(|r| !matches!(r, wheelhouse::engine::Role::Unknown)),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    match role {
        wheelhouse::engine::Role::Unable { reason } => assert!(
            reason.contains("locked down") && reason.contains("impersonate"),
            "{reason}"
        ),
        other => panic!("an engine that cannot impersonate ran: {other:?}"),
    }
    handle.shutdown();
    ns.delete().await;
    victim.delete().await;
}

/// Flux's helm-controller with --default-service-account (the shard `lockdown` of the
/// local control plane) and the installed wheelhouse controller, given the same tenant
/// chart from the same repository: both refuse the lookup and apply nothing, and both
/// install the legitimate variant.
#[tokio::test]
async fn flux_locked_down_and_wheelhouse_agree() {
    let admin = client().await;
    support::flux::require_flux(&admin).await;
    let ns = tenant(&admin, "tenancy-e").await;
    let (victim, password) = victim(&admin).await;
    let (_server, url) = tenant_charts().await;
    support::flux::helm_repository(&admin, &ns.name, "charts", &url).await;
    let flux = |name: &str, victim: &str| -> serde_json::Value {
        support::from_yaml(&format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n\
             metadata: {{name: {name}, namespace: {ns}, labels: {{sharding.fluxcd.io/key: lockdown}}}}\n\
             spec:\n  interval: 1m\n  chart:\n    spec: {{chart: tenant-reach, version: 0.1.0, sourceRef: {{kind: HelmRepository, name: charts}}}}\n  \
             install: {{remediation: {{retries: -1}}}}\n  values: {{victim: \"{victim}\"}}\n",
            ns = ns.name
        ))
    };
    let flux_api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        admin.clone(),
        &ns.name,
        &kube::api::ApiResource::erase::<wheelhouse::api::flux::FluxHelmRelease>(&()),
    );
    for (name, victim) in [("flux-reach", victim.name.as_str()), ("flux-legit", "")] {
        flux_api
            .create(
                &PostParams::default(),
                &serde_json::from_value(flux(name, victim)).unwrap(),
            )
            .await
            .unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &ns.name, home.path()).await;
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &ns.name);
    let ours = |name: &str, victim: &str| reach(&url, name, serde_json::json!({"victim": victim}));
    for (name, victim) in [("reach", victim.name.as_str()), ("legit", "")] {
        api.create(
            &PostParams::default(),
            &sharded(ours(name, victim), &ns.name),
        )
        .await
        .unwrap();
    }
    // The legitimate release: installed by both, as the tenant's ServiceAccount.
    support::flux::until(
        &admin,
        &ns.name,
        "flux-legit",
        "installed",
        support::flux::ready,
    )
    .await;
    controller
        .wait_for(&api, "legit", "installed", |h| {
            h.condition("Ready").is_some_and(|c| c.status == "True")
        })
        .await;
    // The reaching one: refused by both, on the same forbidden lookup.
    let user = format!("system:serviceaccount:{}:{DEPLOYER}", ns.name);
    let flux_hr = support::flux::until(&admin, &ns.name, "flux-reach", "refused", |h| {
        h.condition("Ready")
            .is_some_and(|c| c.status == "False" && c.message.contains("forbidden"))
    })
    .await;
    controller
        .wait_for(&api, "reach", "refused", |h| {
            ready_says(h)
                .is_some_and(|(s, m)| s == "False" && m.contains("forbidden") && m.contains(&user))
        })
        .await;
    let flux_message = serde_json::to_string(&flux_hr.status).unwrap();
    assert!(flux_message.contains(&user), "{flux_message}");
    assert!(!flux_message.contains(&password));
    no_takeover(&admin, &victim.name).await;
    assert_nowhere(&admin, &ns.name, &password, &controller.log()).await;
    assert!(!stored(&ns.name, "reach"));
    controller.stop();
    ns.delete().await;
    victim.delete().await;
}

/// Bad identities: a ServiceAccount that does not exist, and one without rights. Each
/// says why, applies nothing, and is tried again as soon as the cause clears (no resetAt,
/// no spec change).
#[tokio::test]
async fn missing_and_powerless_service_accounts_fail_clearly_and_recover() {
    let admin = client().await;
    let (_charts, charts) = tenant_charts().await;
    let ns = tenant(&admin, "tenancy-f").await;
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &ns.name, home.path()).await;
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &ns.name);
    create_account(&admin, &ns.name, "powerless", false).await;
    for (name, account) in [("ghost", "ghost"), ("weak", "powerless")] {
        let mut hr = reach(&charts, name, serde_json::json!({}));
        hr.spec.service_account_name = Some(account.into());
        api.create(&PostParams::default(), &sharded(hr, &ns.name))
            .await
            .unwrap();
    }
    controller
        .wait_for(&api, "ghost", "the missing ServiceAccount named", |h| {
            h.condition("Ready").is_some_and(|c| {
                c.status == "False"
                    && c.reason == "AccessDenied"
                    && c.message
                        .contains(&format!("ServiceAccount {}/ghost does not exist", ns.name))
            })
        })
        .await;
    controller
        .wait_for(&api, "weak", "the refusal names the ServiceAccount", |h| {
            ready_says(h).is_some_and(|(s, m)| {
                s == "False"
                    && m.contains(&format!("system:serviceaccount:{}:powerless", ns.name))
                    && m.contains("cannot")
            })
        })
        .await;
    for name in ["ghost", "weak"] {
        assert!(!stored(&ns.name, name), "{name}");
    }
    // The causes clear: both install without anyone asking again.
    create_account(&admin, &ns.name, "ghost", true).await;
    grant_admin(&admin, &ns.name, "powerless").await;
    for name in ["ghost", "weak"] {
        controller
            .wait_for(&api, name, "installed once the cause cleared", |h| {
                h.condition("Ready").is_some_and(|c| c.status == "True")
            })
            .await;
    }
    eventually("retries stayed unused", || async {
        let hr = api.get("weak").await.unwrap();
        hr.status.is_some_and(|s| s.install_failures == 0)
    })
    .await;
    controller.stop();
    ns.delete().await;
}
