//! `wheelhouse install` runs the controller in a cluster: its output applies to the local
//! control plane as it is, and `wheelhouse controller`, run with nothing but a token of the
//! installed ServiceAccount (what its pod would get), installs, upgrades and uninstalls a
//! release. Meanwhile an admission policy lets only that ServiceAccount write the
//! release's namespace, so no other credentials can have done the work.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedContext};
use kube::{Api, Client, Config};
use support::engine::{condition, helm_history, set_values, webapp};
use support::{PATIENCE, TestNamespace, client, install_crd, kubeconfig_path, testbin};
use wheelhouse::api::HelmRelease;
use wheelhouse::install::{CONTROLLER, SERVICE_ACCOUNT};

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
            "Service/wheelhouse-controller-metrics",
            "Deployment/wheelhouse-controller",
            "Deployment/wheelhouse-controller-shard-s1",
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
    let kubeconfig = service_account_kubeconfig(&admin, &system, home.path()).await;
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
    // (the same object tests/rbac.rs applies) stay; the bindings name this test's
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

/// Runs `wheelhouse install ARGS` and reads its output as kubectl reads YAML.
fn wheelhouse_install(args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .arg("install")
        .args(args)
        .output()
        .expect("wheelhouse install runs");
    assert!(
        out.status.success(),
        "wheelhouse install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wheelhouse::yaml::parse_documents(&String::from_utf8(out.stdout).unwrap())
        .expect("install prints YAML")
}

/// Writes a kubeconfig holding only a fresh token of the installed ServiceAccount (a
/// TokenRequest, as the kubelet asks for a pod) and the test cluster's server and CA.
async fn service_account_kubeconfig(admin: &Client, system: &str, dir: &Path) -> PathBuf {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), system)
        .create_token_request(SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .expect("a token for the installed ServiceAccount")
        .status
        .unwrap()
        .token;
    let test = Kubeconfig::read_from(kubeconfig_path()).unwrap();
    let current = test.current_context.clone().unwrap();
    let context = test
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.clone())
        .unwrap();
    let cluster = test
        .clusters
        .into_iter()
        .find(|c| c.name == context.cluster)
        .unwrap();
    let kubeconfig = Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        contexts: vec![NamedContext {
            name: SERVICE_ACCOUNT.into(),
            context: Some(Context {
                cluster: cluster.name.clone(),
                user: Some(SERVICE_ACCOUNT.into()),
                namespace: Some(system.into()),
                ..Context::default()
            }),
            other: Default::default(),
        }],
        clusters: vec![cluster],
        auth_infos: vec![NamedAuthInfo {
            name: SERVICE_ACCOUNT.into(),
            auth_info: Some(AuthInfo {
                token: Some(token.into()),
                ..AuthInfo::default()
            }),
            ..NamedAuthInfo::default()
        }],
        current_context: Some(SERVICE_ACCOUNT.into()),
        ..Kubeconfig::default()
    };
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        wheelhouse::yaml::to_documents(&[serde_json::to_value(&kubeconfig).unwrap()]),
    )
    .unwrap();
    // Private, as kubeconfigs are (helm warns about readable ones).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A ValidatingAdmissionPolicy that refuses every write of ConfigMaps, Secrets, Services
/// and Deployments in one namespace unless `username` makes it: whatever the controller
/// (and the helm it runs) does there, it can only have done as that user.
struct OnlyWriter {
    name: String,
}

impl OnlyWriter {
    async fn create(admin: &Client, namespace: &str, username: &str) -> Self {
        let name = format!("wheelhouse-test-only-writer-{namespace}");
        let policy: ValidatingAdmissionPolicy = support::from_yaml(&format!(
            r#"
metadata: {{name: {name}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["", apps]
      apiVersions: ["*"]
      operations: [CREATE, UPDATE, DELETE]
      resources: [configmaps, secrets, services, deployments]
    # Published into every namespace by the controller-manager.
    excludeResourceRules:
    - apiGroups: [""]
      apiVersions: ["*"]
      operations: ["*"]
      resources: [configmaps]
      resourceNames: [kube-root-ca.crt]
  validations:
  - expression: "request.userInfo.username == '{username}'"
    messageExpression: "'only {username} writes here, not ' + request.userInfo.username"
"#
        ));
        let binding: ValidatingAdmissionPolicyBinding = support::from_yaml(&format!(
            r#"
metadata: {{name: {name}}}
spec:
  policyName: {name}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {{kubernetes.io/metadata.name: {namespace}}}
"#
        ));
        let params = PatchParams::apply(MANAGER).force();
        Api::<ValidatingAdmissionPolicy>::all(admin.clone())
            .patch(&name, &params, &Patch::Apply(&policy))
            .await
            .unwrap();
        Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
            .patch(&name, &params, &Patch::Apply(&binding))
            .await
            .unwrap();
        // In force once the test's own (administrator's) writes are refused there; a
        // server-side dry run goes through admission and writes nothing.
        let configmaps = Api::<ConfigMap>::namespaced(admin.clone(), namespace);
        let probe: ConfigMap = support::from_yaml("metadata: {name: admission-probe}");
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        eventually("the admission policy in force", || async {
            matches!(
                configmaps.create(&dry_run, &probe).await,
                Err(kube::Error::Api(e)) if e.message.contains("writes here")
            )
        })
        .await;
        Self { name }
    }

    /// Before the namespace goes: its deletion would be refused.
    async fn delete(self, admin: &Client) {
        let dp = DeleteParams::default();
        Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
            .delete(&self.name, &dp)
            .await
            .unwrap();
        Api::<ValidatingAdmissionPolicy>::all(admin.clone())
            .delete(&self.name, &dp)
            .await
            .unwrap();
    }
}

/// `wheelhouse controller` as a child process whose environment holds nothing but the
/// ServiceAccount's kubeconfig, a HOME of its own (as the pod's emptyDir) and helm.
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn start(kubeconfig: &Path, watch: &str, lease_namespace: &str, home: &Path) -> Self {
        let log = home.join("controller.log");
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
            // The Deployment's controller watches every namespace (the grant allows it,
            // checked above); this one watches the test's namespace only, so it never
            // acts on another test's releases. Identity, grant and binary are the same.
            .args(["controller", "--namespace", watch])
            .args(["--lease-namespace", lease_namespace])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--chart-cache")
            .arg(home.join(".cache/wheelhouse/charts"))
            .env_clear()
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", home)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("TMPDIR", &tmp)
            .env("WHEELHOUSE_HELM", testbin().join("helm"))
            .env("WHEELHOUSE_RENDER_HELPER", support::render_helper())
            .env("WHEELHOUSE_LOG", "info,kube=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start wheelhouse controller");
        Self { child, log }
    }

    /// The controller's log (stderr), for failure messages.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails the test, with the controller's log, if it has exited.
    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "wheelhouse controller exited early ({status}); its stderr:\n{}",
                self.log()
            );
        }
    }

    async fn wait_until<F, Fut>(&mut self, what: &str, done: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            self.assert_running();
            if done().await {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "gave up waiting for {what}; controller stderr:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until `pred` holds for the HelmRelease; fails with its last status and the
    /// controller's log otherwise.
    async fn wait_for(
        &mut self,
        api: &Api<HelmRelease>,
        name: &str,
        what: &str,
        pred: impl Fn(&HelmRelease) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            self.assert_running();
            let hr = api.get_opt(name).await.unwrap();
            if hr.as_ref().is_some_and(&pred) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name}: gave up waiting until {what}; last status: {:#?}\ncontroller stderr:\n{}",
                hr.and_then(|h| h.status),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn stop(mut self) {
        self.assert_running();
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it holds (within PATIENCE).
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn revision(hr: &HelmRelease) -> Option<i32> {
    hr.status.as_ref()?.history.first().map(|r| r.version)
}

fn ready(hr: &HelmRelease, reason: &str) -> bool {
    condition(hr, "Ready") == Some(("True".into(), reason.into()))
}

fn forbidden<T>(result: kube::Result<T>) -> bool {
    matches!(result, Err(kube::Error::Api(ref e)) if e.code == 403)
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
