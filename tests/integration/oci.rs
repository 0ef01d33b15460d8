//! Charts from OCI registries, against the CNCF distribution registry the test scripts
//! start on 127.0.0.1 (tests/cluster/up.sh): one plain HTTP and anonymous, one over TLS
//! (the local CA, which no system trusts) with basic auth. Charts get there with the real
//! `helm package` and `helm push`.

use crate::support;

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use support::engine::{self as eng, helm_history, is, wait_for, waiting_on};
use support::oci::{Pusher, helm, registries};
use wheelhouse::api::{ChartSpec, HelmRelease};
use wheelhouse::helm::source::{ChartSource, Error, RepoAuth};

fn oci_chart(repository: String, version: Option<&str>) -> ChartSpec {
    ChartSpec {
        repository: Some(repository),
        name: Some("webapp".into()),
        version: version.map(str::to_owned),
        ..Default::default()
    }
}

fn source() -> (ChartSource, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let source = ChartSource::new(cache.path().join("charts"))
        .unwrap()
        .with_request_timeout(Duration::from_secs(10));
    (source, cache)
}

/// A path of its own in the registry for each test.
fn unique(prefix: &str) -> String {
    format!("{prefix}-{:08x}", support::rand_u32())
}

#[tokio::test]
async fn an_exact_tag_a_range_the_newest_stable_and_a_digest_pin_resolve() {
    let r = registries();
    let pusher = Pusher::new();
    let path = unique("charts");
    let d100 = pusher.push(&r.plain, &path, "1.0.0", "", None);
    pusher.push(&r.plain, &path, "1.1.0", "", None);
    pusher.push(&r.plain, &path, "2.0.0-rc.1", "", None);
    pusher.push(&r.plain, &path, "1.2.0+build.7", "", None);
    let (source, _cache) = source();
    let repo = format!("oci://{}/{path}", r.plain);
    let resolve = |v: Option<&str>| {
        let spec = oci_chart(repo.clone(), v);
        let source = &source;
        async move { source.resolve(&spec, &RepoAuth::default()).await }
    };
    assert_eq!(resolve(Some("1.0.0")).await.unwrap().version, "1.0.0");
    assert_eq!(resolve(Some("~1.1")).await.unwrap().version, "1.1.0");
    // Newest stable: a tag `1.2.0_build.7` is version 1.2.0+build.7, as helm pushed it.
    assert_eq!(resolve(None).await.unwrap().version, "1.2.0+build.7");
    assert_eq!(
        resolve(Some("1.2.0+build.7")).await.unwrap().version,
        "1.2.0+build.7"
    );
    assert_eq!(
        resolve(Some(">=2.0.0-0")).await.unwrap().version,
        "2.0.0-rc.1"
    );
    // Pinned by digest: the tag's manifest is that digest.
    let pinned = resolve(Some(&format!("1.0.0@{d100}"))).await.unwrap();
    assert_eq!(pinned.version, "1.0.0");
    assert!(
        pinned.path.starts_with(_cache.path()),
        "cached: {}",
        pinned.path.display()
    );
    assert_eq!(
        resolve(Some(&format!("@{d100}"))).await.unwrap().version,
        "1.0.0"
    );
    // What the engine renders is what helm pulls.
    let pulled = tempfile::tempdir().unwrap();
    helm(
        &[
            "pull",
            &format!("{repo}/webapp"),
            "--version",
            "1.1.0",
            "--plain-http",
            "-d",
            &pulled.path().display().to_string(),
        ],
        &pusher.config(),
    );
    let ours = resolve(Some("1.1.0")).await.unwrap();
    assert_eq!(
        std::fs::read(pulled.path().join("webapp-1.1.0.tgz")).unwrap(),
        std::fs::read(&ours.path).unwrap()
    );
}

#[tokio::test]
async fn each_failure_says_what_is_wrong() {
    let r = registries();
    let pusher = Pusher::new();
    let path = unique("errors");
    pusher.push(&r.plain, &path, "1.0.0", "", None);
    let (source, _cache) = source();
    let repo = format!("oci://{}/{path}", r.plain);
    let err = |spec: ChartSpec, auth: RepoAuth| {
        let source = &source;
        async move { source.resolve(&spec, &auth).await.unwrap_err() }
    };
    // An unknown tag, and a range nothing matches.
    let e = err(oci_chart(repo.clone(), Some("9.9.9")), RepoAuth::default()).await;
    assert!(matches!(e, Error::OciNotFound { .. }), "{e}");
    assert!(e.to_string().contains("webapp"), "{e}");
    let e = err(oci_chart(repo.clone(), Some(">=5")), RepoAuth::default()).await;
    assert!(matches!(e, Error::NoMatchingVersion { .. }), "{e}");
    assert!(e.to_string().contains("1.0.0"), "lists what there is: {e}");
    // A digest that is not the tag's.
    let wrong = format!("1.0.0@sha256:{}", "0".repeat(64));
    let e = err(oci_chart(repo.clone(), Some(&wrong)), RepoAuth::default()).await;
    assert!(
        matches!(e, Error::DigestMismatch { .. } | Error::OciNotFound { .. }),
        "{e}"
    );
    // A registry that is down.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let e = err(
        oci_chart(format!("oci://{closed}/charts"), Some("1.0.0")),
        RepoAuth::default(),
    )
    .await;
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains(&closed.to_string()), "{e}");
    // An artifact that is not a Helm chart (an image config), pushed with the OCI client.
    let image = unique("not-a-chart");
    push_image(&r.plain, &format!("{image}/webapp"), "1.0.0").await;
    let e = err(
        oci_chart(format!("oci://{}/{image}", r.plain), Some("1.0.0")),
        RepoAuth::default(),
    )
    .await;
    assert!(matches!(e, Error::NotAChart { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("application/vnd.oci.image.config.v1+json"),
        "{e}"
    );
}

/// Pushes a small container-image-like artifact (not a chart) as `repository:tag`.
async fn push_image(registry: &str, repository: &str, tag: &str) {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    use oci_client::{Client, Reference, secrets::RegistryAuth};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..Default::default()
    });
    let reference = Reference::with_tag(registry.into(), repository.into(), tag.into());
    let layer = ImageLayer::new(
        b"not a chart".to_vec(),
        "application/vnd.oci.image.layer.v1.tar".into(),
        None,
    );
    let config = Config::new(
        b"{}".to_vec(),
        "application/vnd.oci.image.config.v1+json".into(),
        None,
    );
    client
        .push(&reference, &[layer], config, &RegistryAuth::Anonymous, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn tls_with_basic_auth_needs_the_ca_and_the_credentials_of_a_dockerconfigjson_secret() {
    let r = registries();
    let pusher = Pusher::new();
    pusher.login(&r);
    let path = unique("private");
    pusher.push(&r.tls, &path, "1.0.0", "", Some(&r.ca));
    let (source, _cache) = source();
    let spec = oci_chart(format!("oci://{}/{path}", r.tls), Some("1.0.0"));
    // No CA: the registry's certificate is not trusted (and no plain HTTP is tried into
    // success on a TLS server).
    let e = source
        .resolve(&spec, &RepoAuth::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::UnknownCa { .. }), "{e}");
    // The CA but no credentials.
    let ca = std::fs::read(&r.ca).unwrap();
    let only_ca = RepoAuth {
        ca_pem: Some(ca.clone()),
        ..Default::default()
    };
    let e = source.resolve(&spec, &only_ca).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Auth {
                sent_credentials: false,
                ..
            }
        ),
        "{e}"
    );
    // Wrong credentials.
    let wrong = RepoAuth {
        ca_pem: Some(ca.clone()),
        registries: vec![(r.tls.clone(), r.user.clone(), "wrong".into())],
        ..Default::default()
    };
    let e = source.resolve(&spec, &wrong).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Auth {
                sent_credentials: true,
                ..
            }
        ),
        "{e}"
    );
    // A kubernetes.io/dockerconfigjson Secret with ca.crt, on the cluster.
    let client = support::client().await;
    let ns = support::TestNamespace::new(&client, "oci-auth").await;
    let config = serde_json::json!({"auths": {r.tls.clone(): {
        "auth": base64_of(&format!("{}:{}", r.user, r.password))}}});
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("registry".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(
            [
                (
                    ".dockerconfigjson".to_owned(),
                    ByteString(config.to_string().into_bytes()),
                ),
                ("ca.crt".to_owned(), ByteString(ca)),
            ]
            .into(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let auth = RepoAuth::from_secret(&client, &ns.name, "registry")
        .await
        .unwrap();
    let resolved = source.resolve(&spec, &auth).await.unwrap();
    assert_eq!(resolved.version, "1.0.0");
    ns.delete().await;
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Installed from a registry, upgraded when a newer tag in range is pushed, and a wait on
/// a broken version superseded by the fix's tag, as an HTTP repository's new version is.
#[tokio::test]
async fn a_new_tag_upgrades_and_supersedes_a_running_wait() {
    let r = registries();
    let pusher = Pusher::new();
    let path = unique("engine");
    pusher.push(&r.plain, &path, "1.0.0", "", None);
    let (client, ns, api) = eng::setup("oci-engine").await;
    let _engine = eng::start(&client, &ns.name).await;
    let hr: HelmRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "web"},
        "spec": {"chart": {"repository": format!("oci://{}/{path}", r.plain), "name": "webapp", "version": "1.x"},
                 "timeout": "5m"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &hr).await.unwrap();
    wait_for(&api, "web", "installed from the registry", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    // 1.1.0 is broken (its pods never become ready); a reconcile request picks it up.
    pusher.push(&r.plain, &path, "1.1.0", "never-ready", None);
    eng::annotate(
        &api,
        "web",
        "reconcile.wheelhouse.dev/requestedAt",
        "take-1.1.0",
    )
    .await;
    waiting_on(&api, "web", 2).await;
    // 1.1.1 fixes it: the wait's poll of the registry finds the tag and supersedes it.
    pusher.push(&r.plain, &path, "1.1.1", "", None);
    let hr = wait_for(&api, "web", "1.1.1 deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].chart_version == "1.1.1"
    })
    .await;
    assert_eq!(hr.status.unwrap().history[0].version, 3);
    let history = helm_history(&ns.name, "web");
    assert_eq!(
        history.iter().map(|h| h.1.as_str()).collect::<Vec<_>>(),
        ["superseded", "superseded", "deployed"],
        "{history:?}"
    );
    ns.delete().await;
}
