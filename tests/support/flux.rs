//! Flux objects for the tests that run against the real helm-controller and
//! source-controller (started by tests/cluster/up.sh): a Helm repository on 127.0.0.1
//! serving a chart of ours packaged by the real `helm package`, a HelmRepository pointing
//! at it, Flux HelmReleases, and waits on what the controllers write.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use wheelhouse::api::flux::{FluxHelmRelease, FluxHelmRepository};

use super::PATIENCE;
use super::source::{Entry, RepoServer, index_yaml, sha256_hex};

/// Fails with a clear message when the cluster runs without Flux's CRDs.
pub async fn require_flux(client: &Client) {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    for name in [
        "helmreleases.helm.toolkit.fluxcd.io",
        "helmrepositories.source.toolkit.fluxcd.io",
    ] {
        assert!(
            crds.get_opt(name).await.unwrap().is_some(),
            "the CRD {name} is missing: the local control plane runs Flux's controllers \
             since tests/cluster/up.sh starts them; restart it with tests/cluster/up.sh"
        );
    }
}

/// `helm package` of a chart directory at `version`, as bytes.
pub fn package(chart: &Path, version: &str) -> Vec<u8> {
    let out = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(super::testbin().join("helm"))
        .arg("package")
        .arg(chart)
        .args(["--version", version, "--destination"])
        .arg(out.path())
        .output()
        .expect("helm runs");
    assert!(
        status.status.success(),
        "helm package: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let file = std::fs::read_dir(out.path())
        .unwrap()
        .next()
        .expect("a packaged chart")
        .unwrap()
        .path();
    std::fs::read(file).unwrap()
}

/// A Helm repository on 127.0.0.1 serving `chart` packaged at each of `versions`
/// (chart name `name`, app version as in its Chart.yaml); returns the server and the
/// repository URL.
pub async fn serve(chart: &Path, name: &str, versions: &[&str]) -> (RepoServer, String) {
    let server = RepoServer::start().await;
    let mut entries = Vec::new();
    for version in versions {
        let tgz = package(chart, version);
        let path = format!("/charts/{name}-{version}.tgz");
        server.put(&path, tgz.clone());
        entries.push(Entry {
            name,
            version,
            app_version: "1.0",
            url: server.url(&path),
            digest: Some(sha256_hex(&tgz)),
        });
    }
    server.put("/charts/index.yaml", index_yaml(&entries));
    let url = server.url("/charts");
    (server, url)
}

/// Creates a HelmRepository `name` for `url` in `ns`.
pub async fn helm_repository(client: &Client, ns: &str, name: &str, url: &str) {
    let repo: FluxHelmRepository = super::from_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\n\
         metadata: {{name: {name}, namespace: {ns}}}\nspec: {{url: \"{url}\", interval: 1m}}\n"
    ));
    Api::<FluxHelmRepository>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &repo)
        .await
        .unwrap();
}

/// Creates a Flux HelmRelease from its spec (YAML, indented by two spaces).
pub async fn helm_release(client: &Client, ns: &str, name: &str, spec: &str) {
    let hr: serde_json::Value = super::from_yaml(&format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n\
         metadata: {{name: {name}, namespace: {ns}}}\nspec:\n{spec}"
    ));
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &kube::api::ApiResource::erase::<FluxHelmRelease>(&()),
    );
    api.create(&PostParams::default(), &serde_json::from_value(hr).unwrap())
        .await
        .unwrap();
}

/// Polls the Flux HelmRelease until `pred` holds; fails with its status after PATIENCE.
pub async fn until(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&FluxHelmRelease) -> bool,
) -> FluxHelmRelease {
    let api: Api<FluxHelmRelease> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    loop {
        let hr = api.get(name).await.unwrap();
        if pred(&hr) {
            return hr;
        }
        assert!(
            start.elapsed() < PATIENCE * 2,
            "Flux HelmRelease {ns}/{name} never showed {what}: {:#?}",
            hr.status
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub fn ready(hr: &FluxHelmRelease) -> bool {
    hr.condition("Ready").is_some_and(|c| c.status == "True")
}

/// The newest Helm revision Flux recorded.
pub fn revision(hr: &FluxHelmRelease) -> i32 {
    hr.status
        .as_ref()
        .and_then(|s| s.history.first())
        .map_or(0, |s| s.version)
}

/// An annotation of the object.
pub fn annotation(hr: &FluxHelmRelease, name: &str) -> Option<String> {
    hr.annotations().get(name).cloned()
}

/// helm-controller's log (the control plane's DIR/logs, beside its kubeconfig).
pub fn helm_controller_log() -> String {
    let dir = super::kubeconfig_path()
        .parent()
        .expect("the kubeconfig's directory")
        .join("logs/helm-controller.log");
    std::fs::read_to_string(&dir).unwrap_or_default()
}

/// A manifest of Flux's release `flux` as wheelhouse's release `wh` would read: the
/// release name, and without the two origin labels helm-controller adds to every object it
/// deploys.
pub fn as_wheelhouse(manifest: &str, ns: &str, flux: &str, wh: &str) -> String {
    let origin = [
        format!("helm.toolkit.fluxcd.io/name: {flux}"),
        format!("helm.toolkit.fluxcd.io/namespace: {ns}"),
    ];
    let mut out = String::new();
    for line in manifest.split_inclusive('\n') {
        if origin.iter().any(|o| line.trim() == o) {
            continue;
        }
        out.push_str(line);
    }
    out.replace(flux, wh)
}

/// Merge-patches Flux's HelmRelease `name` in `ns`.
pub async fn patch(
    client: &Client,
    ns: &str,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    Api::<FluxHelmRelease>::namespaced(client.clone(), ns)
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .map(drop)
}

/// Flux's helm-controller installs the `hello` test chart as `name` in `ns` (revision 1)
/// and upgrades it with new values (revision 2), both waited for: a release of Flux's own
/// in a timeline or a table. The chart's server lives as long as the returned guard.
pub async fn install_and_upgrade(client: &Client, ns: &str, name: &str) -> RepoServer {
    require_flux(client).await;
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/hello");
    let (repo, url) = serve(&hello, "hello", &["0.1.0"]).await;
    helm_repository(client, ns, "charts", &url).await;
    helm_release(
        client,
        ns,
        name,
        "  interval: 1m\n  chart: {spec: {chart: hello, version: 0.1.0, sourceRef: {kind: HelmRepository, name: charts}}}\n",
    )
    .await;
    until(client, ns, name, "installed", |hr| {
        ready(hr) && revision(hr) == 1
    })
    .await;
    patch(
        client,
        ns,
        name,
        &serde_json::json!({"spec": {"values": {"greeting": "by-flux"}}}),
    )
    .await
    .unwrap();
    until(client, ns, name, "upgraded", |hr| {
        ready(hr) && revision(hr) == 2
    })
    .await;
    repo
}
