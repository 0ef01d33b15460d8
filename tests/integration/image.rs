//! The controller's image, run as a pod would run it: assembled by `tests/image.sh` (what
//! `tests/dist.sh` runs on the release binaries; here on the test build, so the suite
//! needs no release build), pushed to the local OCI registry and pulled back by digest
//! (each blob checked against its digest), its layer unpacked, and its entrypoint run
//! with the args and env of `wheelhouse install`'s Deployment, as uid 65532 in a chroot of
//! that filesystem (nothing there is writable by that user but `/tmp` and the HOME a pod
//! mounts an emptyDir at), with what the kubelet gives a pod: the ServiceAccount's token,
//! the cluster CA and the namespace at the in-cluster path, `KUBERNETES_SERVICE_HOST` and
//! `_PORT`. With the RBAC of `wheelhouse install`, it takes its Lease and reconciles a
//! release to Ready.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support;
use support::engine::is;
use support::installed::wheelhouse_install;
use wheelhouse::api::HelmRelease;
use wheelhouse::engine::SHARD_LABEL;
use wheelhouse::frontend::install::SERVICE_ACCOUNT;

const UID: u32 = 65532;

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// The layout's blob of `digest`.
fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    std::fs::read(
        layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:")),
    )
    .unwrap()
}

/// Pushes the layout's one image to `registry/repository:test`; returns its digest.
async fn push(client: &Client, registry: &str, repository: &str, layout: &Path) -> String {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let digest = index["manifests"][0]["digest"].as_str().unwrap().to_owned();
    let manifest_bytes = blob(layout, &digest);
    let manifest: OciImageManifest = serde_json::from_slice(&manifest_bytes).unwrap();
    let reference = Reference::with_tag(registry.into(), repository.into(), "test".into());
    client
        .auth(
            &reference,
            &RegistryAuth::Anonymous,
            RegistryOperation::Push,
        )
        .await
        .unwrap();
    for d in manifest
        .layers
        .iter()
        .map(|l| &l.digest)
        .chain([&manifest.config.digest])
    {
        client
            .push_blob(&reference, blob(layout, d), d)
            .await
            .unwrap();
    }
    client
        .push_manifest_raw(
            &reference,
            manifest_bytes,
            OCI_IMAGE_MEDIA_TYPE.parse().unwrap(),
        )
        .await
        .unwrap();
    digest
}

/// Pulls the image back by `digest` and unpacks its layers into `rootfs`; returns its
/// config.
async fn pull(
    client: &Client,
    registry: &str,
    repository: &str,
    digest: &str,
    rootfs: &Path,
) -> Value {
    let reference = Reference::with_digest(registry.into(), repository.into(), digest.into());
    let (bytes, got) = client
        .pull_manifest_raw(
            &reference,
            &RegistryAuth::Anonymous,
            &[OCI_IMAGE_MEDIA_TYPE],
        )
        .await
        .unwrap();
    assert_eq!((sha256(&bytes), got.as_str()), (digest.to_owned(), digest));
    let manifest: OciImageManifest = serde_json::from_slice(&bytes).unwrap();
    let mut config = Vec::new();
    client
        .pull_blob(&reference, &manifest.config, &mut config)
        .await
        .unwrap();
    assert_eq!(sha256(&config), manifest.config.digest);
    for layer in &manifest.layers {
        let mut data = Vec::new();
        client
            .pull_blob(&reference, layer, &mut data)
            .await
            .unwrap();
        assert_eq!(sha256(&data), layer.digest);
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(data.as_slice()));
        tar.set_preserve_permissions(true);
        tar.set_preserve_ownerships(true);
        tar.unpack(rootfs).unwrap();
    }
    serde_json::from_slice(&config).unwrap()
}

/// The test cluster's API server (host, port) and CA, from its kubeconfig.
fn api_server() -> (String, String, Vec<u8>) {
    let kubeconfig = Kubeconfig::read_from(support::kubeconfig_path()).unwrap();
    let cluster = kubeconfig.clusters[0].cluster.clone().unwrap();
    let server = cluster.server.unwrap();
    let authority = server.trim_start_matches("https://").trim_end_matches('/');
    let (host, port) = authority.rsplit_once(':').unwrap();
    let ca = match (
        cluster.certificate_authority_data,
        cluster.certificate_authority,
    ) {
        (Some(data), _) => base64_decode(&data),
        (None, Some(path)) => std::fs::read(path).unwrap(),
        _ => panic!("the test kubeconfig names no CA"),
    };
    (host.to_owned(), port.to_owned(), ca)
}

fn base64_decode(data: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .unwrap()
}

#[tokio::test]
async fn the_image_runs_as_a_pod_would_run_it_and_reconciles_a_release() {
    let admin = support::client().await;
    support::install_crd(&admin).await;
    let apps = support::TestNamespace::new(&admin, "image-apps").await;
    let system = apps.name.replace("image-apps", "image-sys");
    let shard = apps.name.clone();
    let work = tempfile::tempdir().unwrap();

    // The image, as tests/dist.sh assembles it.
    let layout = work.path().join("layout");
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/image.sh"))
        .arg(env!("CARGO_BIN_EXE_wheelhouse"))
        .arg(support::render_helper())
        .arg("0.0.0-test")
        .arg(&layout)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/image.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built = String::from_utf8(out.stdout).unwrap().trim().to_owned();

    // Through the registry and back, by digest.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = support::oci::registries();
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..Default::default()
    });
    let repository = format!("wheelhouse-{:08x}", support::rand_u32());
    let pushed = push(&client, &registry.plain, &repository, &layout).await;
    assert_eq!(pushed, built);
    let rootfs = work.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    let config = pull(&client, &registry.plain, &repository, &pushed, &rootfs).await;
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        json!(["/usr/local/bin/wheelhouse"])
    );

    // What `wheelhouse install` asks for: its RBAC applied, its Deployment's args and env.
    let docs = wheelhouse_install(&["--namespace", &system, "--shard", &shard]);
    support::apply_documents(&admin, &docs, "wheelhouse-tests").await;
    // A cluster has one of each of install's ClusterRoleBindings, naming one install's
    // ServiceAccount, and other tests install too: the same grants are bound to this
    // ServiceAccount under names of its own, so another install cannot take them away.
    let own: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding")
        .map(|d| {
            let mut binding = d.clone();
            binding["metadata"]["name"] =
                format!("{}-{shard}", d["metadata"]["name"].as_str().unwrap()).into();
            binding
        })
        .collect();
    assert!(!own.is_empty());
    support::apply_documents(&admin, &own, "wheelhouse-tests").await;
    let deployment = docs
        .iter()
        .find(|d| {
            d["kind"] == "Deployment" && d["metadata"]["name"].as_str().unwrap().ends_with(&shard)
        })
        .unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut args: Vec<String> = serde_json::from_value(container["args"].clone()).unwrap();
    // The pod's ports are the host's here: free ones.
    for flag in ["--metrics-addr", "--health-addr", "--receiver-addr"] {
        let at = args.iter().position(|a| a == flag).unwrap();
        args[at + 1] = format!("127.0.0.1:{}", support::free_port());
    }
    let env: Vec<(String, String)> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect();

    // What the kubelet gives the pod: a token of its ServiceAccount, the CA, the
    // namespace, at the in-cluster path; its emptyDir HOME, writable by its user.
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), &system)
        .create_token_request(
            SERVICE_ACCOUNT,
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let (host, port, ca) = api_server();
    let secrets = rootfs.join("var/run/secrets/kubernetes.io/serviceaccount");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("token"), token).unwrap();
    std::fs::write(secrets.join("ca.crt"), ca).unwrap();
    std::fs::write(secrets.join("namespace"), &system).unwrap();
    let home = rootfs.join("home/wheelhouse");
    std::os::unix::fs::chown(&home, Some(UID), Some(UID)).unwrap();

    // A release of the shard, from a chart in the registry.
    let path = format!("image-{:08x}", support::rand_u32());
    support::oci::Pusher::new().push(&registry.plain, &path, "1.0.0", "", None);
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &apps.name);
    let hr: HelmRelease = serde_json::from_value(json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": apps.name, "labels": {SHARD_LABEL: shard}},
        "spec": {
            "chart": {"repository": format!("oci://{}/{path}", registry.plain), "name": "webapp",
                      "version": "1.0.0", "insecure": true},
            "timeout": "2m",
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &hr).await.unwrap();

    // The entrypoint, as uid 65532, in the image's filesystem.
    let log = work.path().join("controller.log");
    // Found before the environment is cleared (it is in sbin, which a pod's PATH lacks).
    let chroot = ["/usr/sbin/chroot", "/sbin/chroot", "/usr/bin/chroot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chroot(8) (coreutils)");
    let mut child = Command::new(chroot)
        .arg(format!("--userspec={UID}:{UID}"))
        .arg(&rootfs)
        .arg(config["config"]["Entrypoint"][0].as_str().unwrap())
        .args(&args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("KUBERNETES_SERVICE_HOST", &host)
        .env("KUBERNETES_SERVICE_PORT", &port)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(
            std::fs::File::options().append(true).open(&log).unwrap(),
        ))
        .spawn()
        .expect("chroot runs (the test suite runs as root, as CI does)");
    struct Stop<'a>(&'a mut std::process::Child);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stop = Stop(&mut child);
    let start = std::time::Instant::now();
    let ready = loop {
        let hr = api.get("web").await.unwrap();
        if is(&hr, "Ready", "True", "InstallSucceeded") {
            break true;
        }
        if start.elapsed() > support::PATIENCE * 2 {
            break false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    let mut said = String::new();
    std::fs::File::open(&log)
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(ready, "never Ready; the image's controller said:\n{said}");
    assert!(said.contains("engine lease acquired"), "{said}");
    drop(stop);
    apps.delete().await;
}
