//! The controller as a cluster runs it: `wheelhouse install`'s output, a kubeconfig with
//! nothing but a token of a ServiceAccount (as its pod gets), `wheelhouse controller` as a
//! child process with that kubeconfig alone, and an admission policy that lets only one
//! user write a namespace (so no other credentials can have done the work).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, Context, Kubeconfig, NamedAuthInfo, NamedContext};
use kube::{Api, Client};
use wheelhouse::api::HelmRelease;

use super::{PATIENCE, kubeconfig_path, testbin};

const MANAGER: &str = "wheelhouse-tests";

/// Runs `wheelhouse install ARGS` and reads its output as kubectl reads YAML.
pub fn wheelhouse_install(args: &[&str]) -> Vec<serde_json::Value> {
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
    wheelhouse::text::yaml::parse_documents(&String::from_utf8(out.stdout).unwrap())
        .expect("install prints YAML")
}

/// `docs` with the engine's cluster-wide grant (its ClusterRole and ClusterRoleBindings)
/// named for `system`, the install's namespace: every install names them alike, as a
/// cluster has one, and tests that install at once into namespaces of their own would
/// otherwise bind the one grant to each other's ServiceAccounts in turn.
pub fn apart(mut docs: Vec<serde_json::Value>, system: &str) -> Vec<serde_json::Value> {
    const OWN: [&str; 2] = ["wheelhouse-engine", "wheelhouse-release-admin"];
    for d in &mut docs {
        let kind = d["kind"].as_str().unwrap_or_default().to_owned();
        let name = d["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if matches!(kind.as_str(), "ClusterRole" | "ClusterRoleBinding")
            && OWN.contains(&name.as_str())
        {
            d["metadata"]["name"] = format!("{name}-{system}").into();
        }
        if kind == "ClusterRoleBinding"
            && d["roleRef"]["kind"] == "ClusterRole"
            && d["roleRef"]["name"] == "wheelhouse-engine"
        {
            d["roleRef"]["name"] = format!("wheelhouse-engine-{system}").into();
        }
    }
    docs
}

/// Writes a kubeconfig holding only a fresh token of the installed ServiceAccount (a
/// TokenRequest, as the kubelet asks for a pod) and the test cluster's server and CA.
pub async fn service_account_kubeconfig(
    admin: &Client,
    system: &str,
    account: &str,
    dir: &Path,
) -> PathBuf {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), system)
        .create_token_request(account, &PostParams::default(), &request)
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
            name: account.into(),
            context: Some(Context {
                cluster: cluster.name.clone(),
                user: Some(account.into()),
                namespace: Some(system.into()),
                ..Context::default()
            }),
            other: Default::default(),
        }],
        clusters: vec![cluster],
        auth_infos: vec![NamedAuthInfo {
            name: account.into(),
            auth_info: Some(AuthInfo {
                token: Some(token.into()),
                ..AuthInfo::default()
            }),
            ..NamedAuthInfo::default()
        }],
        current_context: Some(account.into()),
        ..Kubeconfig::default()
    };
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        wheelhouse::text::yaml::to_documents(&[serde_json::to_value(&kubeconfig).unwrap()]),
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
pub struct OnlyWriter {
    name: String,
}

impl OnlyWriter {
    pub async fn create(admin: &Client, namespace: &str, username: &str) -> Self {
        let name = format!("wheelhouse-test-only-writer-{namespace}");
        let policy: ValidatingAdmissionPolicy = super::from_yaml(&format!(
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
        let binding: ValidatingAdmissionPolicyBinding = super::from_yaml(&format!(
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
        let probe: ConfigMap = super::from_yaml("metadata: {name: admission-probe}");
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
    pub async fn delete(self, admin: &Client) {
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
pub struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    pub fn start(kubeconfig: &Path, watch: &str, lease_namespace: &str, home: &Path) -> Self {
        // The Deployment's controller watches every namespace (the grant allows it,
        // checked above); this one watches the test's namespace only, so it never
        // acts on another test's releases. Identity, grant and binary are the same.
        Self::start_with(
            kubeconfig,
            lease_namespace,
            home,
            &["--namespace".to_owned(), watch.to_owned()],
        )
    }

    /// `wheelhouse controller` with `args` besides the cluster, lease and cache ones (as
    /// the installed Deployment passes them).
    pub fn start_with(
        kubeconfig: &Path,
        lease_namespace: &str,
        home: &Path,
        args: &[String],
    ) -> Self {
        let log = home.join("controller.log");
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
            .arg("controller")
            .args(args)
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
            .env("WHEELHOUSE_RENDER_HELPER", super::render_helper())
            .env("WHEELHOUSE_LOG", "info,kube=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start wheelhouse controller");
        Self { child, log }
    }

    /// The controller's log (stderr), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails the test, with the controller's log, if it has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "wheelhouse controller exited early ({status}); its stderr:\n{}",
                self.log()
            );
        }
    }

    pub async fn wait_until<F, Fut>(&mut self, what: &str, done: F)
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
    pub async fn wait_for(
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

    pub fn stop(mut self) {
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
pub async fn eventually<F, Fut>(what: &str, check: F)
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

/// Whether the API server refused the call (403).
pub fn forbidden<T>(result: kube::Result<T>) -> bool {
    matches!(result, Err(kube::Error::Api(ref e)) if e.code == 403)
}
