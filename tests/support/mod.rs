//! Shared helpers for tests that run against the local control plane that
//! tests/test.sh starts (tests/cluster/up.sh). They never skip: without a cluster they
//! fail and say how to get one.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

pub mod apiserver;
pub mod controller;
pub mod discovery;
pub mod engine;
pub mod figures;
pub mod fleet;
pub mod flux;
pub mod git;
pub mod hooks;
pub mod installed;
pub mod oci;
pub mod process;
pub mod receiver;
pub mod records;
pub mod source;
pub mod tmux;

/// Generous bound on things the cluster does in well under a second; it only turns a
/// hang into a readable failure.
pub const PATIENCE: Duration = Duration::from_secs(60);

const HOW: &str = "run the suite with tests/test.sh (the README's test command), which starts \
                   the local control plane and sets WHEELHOUSE_TEST_KUBECONFIG; or start one with \
                   tests/cluster/up.sh DIR and export WHEELHOUSE_TEST_KUBECONFIG=DIR/kubeconfig \
                   WHEELHOUSE_TESTBIN=$(tests/cluster/testbin.sh)";

pub fn kubeconfig_path() -> PathBuf {
    let path = std::env::var_os("WHEELHOUSE_TEST_KUBECONFIG").unwrap_or_else(|| {
        panic!("WHEELHOUSE_TEST_KUBECONFIG is not set: no local control plane. To fix: {HOW}")
    });
    PathBuf::from(path)
}

/// The second, bare control plane releases with `spec.kubeConfig` deploy to
/// (tests/test.sh starts it with `tests/cluster/up.sh --bare DIR/remote`).
#[allow(dead_code)]
pub fn remote_kubeconfig_path() -> PathBuf {
    let path = std::env::var_os("WHEELHOUSE_TEST_REMOTE_KUBECONFIG").unwrap_or_else(|| {
        panic!(
            "WHEELHOUSE_TEST_REMOTE_KUBECONFIG is not set: no second control plane for the spec.kubeConfig tests. To fix: run the suite with tests/test.sh, or start one with tests/cluster/up.sh --bare DIR/remote (DIR: the main cluster's) and export WHEELHOUSE_TEST_REMOTE_KUBECONFIG=DIR/remote/kubeconfig"
        )
    });
    PathBuf::from(path)
}

/// A client of the remote control plane (see [`remote_kubeconfig_path`]).
#[allow(dead_code)]
pub async fn remote_client() -> Client {
    client_of(&remote_kubeconfig_path()).await
}

/// The remote cluster's kubeconfig with its user's inline credentials, as a Secret of
/// `ns` under `key` (up.sh writes only -data fields, which a kubeConfig Secret may hold).
#[allow(dead_code)]
pub async fn kubeconfig_secret(client: &Client, ns: &str, name: &str, key: &str, text: &str) {
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "stringData": {key: text},
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// The namespace of the same name on the remote cluster (where the release's objects and
/// records go), deleted on drop.
#[allow(dead_code)]
pub struct RemoteNamespace {
    client: Client,
    pub name: String,
}

impl RemoteNamespace {
    pub async fn new(client: Client, name: &str) -> Self {
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        Self {
            client,
            name: name.to_owned(),
        }
    }
}

impl Drop for RemoteNamespace {
    fn drop(&mut self) {
        let (client, name) = (self.client.clone(), self.name.clone());
        tokio::spawn(async move {
            let _ = Api::<Namespace>::all(client)
                .delete(&name, &DeleteParams::default())
                .await;
        });
    }
}

/// The directory a build script of the project prints (it caches what it builds).
fn built_by(script: &str) -> PathBuf {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let out = std::process::Command::new(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}); see its output above",
        script.display(),
        out.status
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// wheelhouse's render helper: `$WHEELHOUSE_RENDER_HELPER` (tests/test.sh sets it), else
/// built (once; cached) by `src/helm/render/helper/build.sh`.
pub fn render_helper() -> PathBuf {
    static HELPER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HELPER
        .get_or_init(|| match std::env::var_os("WHEELHOUSE_RENDER_HELPER") {
            Some(path) => PathBuf::from(path),
            None => built_by("src/helm/render/helper/build.sh").join("wheelhouse-render"),
        })
        .clone()
}

/// The previous build of wheelhouse (`wheelhouse` and its render helper side by side), for
/// the upgrade tests: `$WHEELHOUSE_PREVIOUS_BUILD` (set by tests/test.sh), else built here
/// by tests/previous_build.sh (cached after the first time).
pub fn previous_build() -> PathBuf {
    static BUILD: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILD
        .get_or_init(|| match std::env::var_os("WHEELHOUSE_PREVIOUS_BUILD") {
            Some(path) => PathBuf::from(path),
            None => built_by("tests/previous_build.sh"),
        })
        .clone()
}

/// The renderer engines in tests use: the render helper, or the helm CLI when
/// `WHEELHOUSE_RENDERER=helm` (the whole suite runs with either).
pub fn renderer(
    identity: Option<(&str, &[String])>,
) -> std::sync::Arc<dyn wheelhouse::helm::render::Renderer> {
    use wheelhouse::helm::render::{HelmRenderer, HelperRenderer, Kind};
    let timeout = Duration::from_secs(60);
    let kubeconfig = kubeconfig_path();
    match wheelhouse::helm::render::Choice::from_env().kind {
        Kind::Helm => {
            let mut r = HelmRenderer::new(testbin().join("helm"), timeout)
                .with_cluster(Some(&kubeconfig), None);
            if let Some((user, groups)) = identity {
                r = r.impersonate(user, groups);
            }
            std::sync::Arc::new(r)
        }
        Kind::Helper => {
            let mut r =
                HelperRenderer::new(render_helper(), timeout).with_cluster(Some(&kubeconfig), None);
            if let Some((user, groups)) = identity {
                r = r.impersonate(user, groups);
            }
            std::sync::Arc::new(r)
        }
    }
}

/// Directory of the control plane's binaries (helm, kubectl, ...).
pub fn testbin() -> PathBuf {
    let path = std::env::var_os("WHEELHOUSE_TESTBIN")
        .unwrap_or_else(|| panic!("WHEELHOUSE_TESTBIN is not set. To fix: {HOW}"));
    PathBuf::from(path)
}

/// Logs as the binary does when `WHEELHOUSE_LOG` is set (tracing's filter syntax), for a
/// benchmark or test whose engine runs in this process; quiet otherwise.
#[allow(dead_code)]
pub fn log_from_env() {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("WHEELHOUSE_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
    }
}

pub async fn client() -> Client {
    client_of(&kubeconfig_path()).await
}

async fn client_of(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}. To fix: {HOW}", path.display()));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig of the local control plane is usable");
    let client = Client::try_from(config).expect("client for the local control plane");
    if let Err(e) = client.apiserver_version().await {
        panic!(
            "the local control plane at {} does not answer: {e}. To fix: {HOW}",
            path.display()
        );
    }
    client
}

/// A fresh namespace per test, so tests run in parallel without seeing each other.
pub struct TestNamespace {
    pub name: String,
    client: Client,
}

impl TestNamespace {
    pub async fn new(client: &Client, prefix: &str) -> Self {
        let suffix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("{prefix}-{suffix:x}");
        let api: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"wheelhouse.dev/test": "true"}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &ns)
            .await
            .expect("create test namespace");
        wait_for_default_service_account(client, &name).await;
        Self {
            name,
            client: client.clone(),
        }
    }

    pub async fn delete(self) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let _ = api.delete(&self.name, &DeleteParams::default()).await;
    }
}

/// Pods are refused until the controller-manager has created the namespace's
/// `default` ServiceAccount.
async fn wait_for_default_service_account(client: &Client, namespace: &str) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while api.get_opt("default").await.ok().flatten().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no default ServiceAccount in {namespace}: is kube-controller-manager running?"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deserializes a YAML literal into a typed object.
pub fn from_yaml<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    wheelhouse::text::yaml::from_str(yaml).expect("test fixture is valid YAML for its type")
}

/// Installs (server-side applies) the HelmRelease CRD generated from the Rust types and
/// waits until the API server serves it. Idempotent, so every test may call it.
pub async fn install_crd(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions};

    let crd = wheelhouse::api::crd();
    let name = crd.metadata.name.clone().unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &name,
        &PatchParams::apply("wheelhouse-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply the HelmRelease CRD");
    tokio::time::timeout(
        PATIENCE,
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .expect("CRD became Established in time")
    .expect("watch the CRD");
}

/// The pod spec of a Deployment's template.
pub async fn pod_spec(
    client: &Client,
    ns: &str,
    name: &str,
) -> k8s_openapi::api::core::v1::PodSpec {
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
}

/// The nodeSelector of a Deployment's pod template.
pub async fn node_selector(
    client: &Client,
    ns: &str,
    name: &str,
) -> Option<std::collections::BTreeMap<String, String>> {
    pod_spec(client, ns, name).await.node_selector
}

/// The object `doc` (any kind the API server serves, found by discovery): an Api for it,
/// its name and its kind.
pub async fn api_of(
    client: &Client,
    doc: &serde_json::Value,
) -> (
    Api<kube::api::DynamicObject>,
    kube::api::DynamicObject,
    String,
) {
    use kube::api::{DynamicObject, GroupVersionKind};
    use kube::discovery::{self, Scope};
    let obj: DynamicObject = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("not a Kubernetes object ({e}): {doc}"));
    let types = obj.types.clone().expect("apiVersion and kind");
    let gvk = GroupVersionKind::try_from(&types).unwrap();
    let (resource, caps) = discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("the API server does not serve {gvk:?}: {e}"));
    let name = obj.metadata.name.clone().expect("a name");
    let api: Api<DynamicObject> = match (caps.scope, &obj.metadata.namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (Scope::Namespaced, None) => panic!("{} {name} has no namespace", types.kind),
        (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
    };
    (api, obj, types.kind)
}

/// Server-side applies each object (any kind the API server serves, found by discovery)
/// as `manager`, forcing conflicts, in the order given, as `kubectl apply --server-side`.
pub async fn apply_documents(client: &Client, documents: &[serde_json::Value], manager: &str) {
    use kube::api::{Patch, PatchParams};
    for doc in documents {
        let (api, obj, kind) = api_of(client, doc).await;
        let name = obj.metadata.name.clone().expect("a name");
        api.patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
    }
}

/// A random number for names of their own per test (registry paths, repositories).
pub fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish() as u32
}

/// A `KEY=value` file `up.sh` writes beside the test cluster's kubeconfig (`git.env`,
/// `registry.env`), as a lookup that panics on a missing key; `what` names the server the
/// file is about, for the message when the cluster predates it.
pub fn cluster_env(file: &str, what: &str) -> impl Fn(&str) -> String {
    let dir = kubeconfig_path()
        .parent()
        .expect("the kubeconfig is in the cluster's directory")
        .to_owned();
    let env = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| {
        panic!(
            "no {}/{file} ({e}): the cluster was started before tests/cluster/up.sh \
             started {what}; run tests/cluster/down.sh and up.sh on it again",
            dir.display()
        )
    });
    let file = file.to_owned();
    move |key: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} missing from {file}"))
            .to_owned()
    }
}

/// Copies the directory `from` to `to`, recursively.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A TCP port on 127.0.0.1 that is free now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
