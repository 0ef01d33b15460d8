//! The OCI registries of the chart-source tests (tests/cluster/up.sh starts them), and
//! pushing the webapp test chart there with the real `helm package` and `helm push`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What tests need to reach the registries (DIR/registry.env of the cluster).
pub struct Registries {
    pub plain: String,
    pub tls: String,
    pub ca: PathBuf,
    pub user: String,
    pub password: String,
}

pub fn registries() -> Registries {
    let get = super::cluster_env("registry.env", "OCI registries");
    Registries {
        plain: get("REGISTRY"),
        tls: get("REGISTRY_TLS"),
        ca: PathBuf::from(get("REGISTRY_CA")),
        user: get("REGISTRY_USER"),
        password: get("REGISTRY_PASSWORD"),
    }
}

pub fn helm(args: &[&str], registry_config: &Path) -> String {
    let out = Command::new(super::testbin().join("helm"))
        .args(args)
        .env("HELM_REGISTRY_CONFIG", registry_config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A chart pusher with its own registry login (helm's registry config in a temp dir).
pub struct Pusher {
    dir: tempfile::TempDir,
}

impl Pusher {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("registry.json")
    }

    pub fn login(&self, r: &Registries) {
        helm(
            &[
                "registry",
                "login",
                &r.tls,
                "--username",
                &r.user,
                "--password",
                &r.password,
                "--ca-file",
                &r.ca.display().to_string(),
            ],
            &self.config(),
        );
    }

    /// The chart archive `push` packaged as `version`: its chart layer, byte for byte.
    pub fn packaged(&self, version: &str) -> Vec<u8> {
        std::fs::read(
            self.dir
                .path()
                .join("out")
                .join(format!("webapp-{version}.tgz")),
        )
        .unwrap()
    }

    /// Packages the webapp test chart as `version` (its pods' `behavior` as given) and
    /// pushes it to `oci://{registry}/{path}`; returns the manifest digest helm printed.
    pub fn push(
        &self,
        registry: &str,
        path: &str,
        version: &str,
        behavior: &str,
        tls: Option<&Path>,
    ) -> String {
        let src = PathBuf::from(super::engine::chart("webapp"));
        let chart = self.dir.path().join(format!("webapp-{version}-src/webapp"));
        std::fs::create_dir_all(chart.join("templates")).unwrap();
        for entry in std::fs::read_dir(src.join("templates")).unwrap() {
            let entry = entry.unwrap();
            if entry.path().is_file() {
                std::fs::copy(
                    entry.path(),
                    chart.join("templates").join(entry.file_name()),
                )
                .unwrap();
            }
        }
        let yaml = std::fs::read_to_string(src.join("Chart.yaml"))
            .unwrap()
            .replace("version: 1.0.0", &format!("version: {version}"));
        std::fs::write(chart.join("Chart.yaml"), yaml).unwrap();
        let values = std::fs::read_to_string(src.join("values.yaml"))
            .unwrap()
            .replace("behavior: \"\"", &format!("behavior: \"{behavior}\""));
        std::fs::write(chart.join("values.yaml"), values).unwrap();
        let out = self.dir.path().join("out");
        helm(
            &[
                "package",
                &chart.display().to_string(),
                "-d",
                &out.display().to_string(),
            ],
            &self.config(),
        );
        let tgz = out.join(format!("webapp-{version}.tgz"));
        let target = format!("oci://{registry}/{path}");
        let mut args = vec!["push".to_owned(), tgz.display().to_string(), target];
        match tls {
            Some(ca) => args.extend(["--ca-file".to_owned(), ca.display().to_string()]),
            None => args.push("--plain-http".to_owned()),
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let said = helm(&args, &self.config());
        said.lines()
            .find_map(|l| l.strip_prefix("Digest: "))
            .unwrap_or_else(|| panic!("no digest in helm push's output: {said}"))
            .trim()
            .to_owned()
    }
}

/// A registry of a test's own (the CNCF distribution registry the local control plane
/// builds), on a free port, configured to send its push notifications to `url` with
/// `Authorization: Bearer <token>`, as an operator configures one for a webhook receiver.
pub struct NotifyingRegistry {
    child: std::process::Child,
    /// `127.0.0.1:<port>`.
    pub address: String,
    _dir: tempfile::TempDir,
}

impl NotifyingRegistry {
    pub fn start(url: &str, token: &str) -> Self {
        let out =
            Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/registry.sh"))
                .stderr(std::process::Stdio::inherit())
                .output()
                .unwrap();
        assert!(out.status.success(), "tests/cluster/registry.sh failed");
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("registry");
        let port = super::free_port();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: warn, accesslog: {{disabled: true}}}}\n\
                 storage: {{filesystem: {{rootdirectory: {root}}}}}\n\
                 http: {{addr: 127.0.0.1:{port}}}\n\
                 notifications:\n  endpoints:\n  - name: wheelhouse\n    url: {url}\n    \
                 headers: {{Authorization: [\"Bearer {token}\"]}}\n    timeout: 2s\n    threshold: 10\n    backoff: 1s\n    \
                 ignore: {{actions: [pull]}}\n",
                root = dir.path().join("data").display(),
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .args(["serve", &config.display().to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let address = format!("127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + super::PATIENCE;
        while std::net::TcpStream::connect(&address).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the registry never listened"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Self {
            child,
            address,
            _dir: dir,
        }
    }
}

impl Drop for NotifyingRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A registry of a hostile tenant's: plain HTTP on 127.0.0.1, anonymous, serving one
/// manifest of Helm's media types under `repository:tag` that names `layer`'s digest (a
/// chart another tenant pushed elsewhere), and no blob at all. Counts what was asked for
/// blobs.
pub struct ManifestOnly {
    /// `127.0.0.1:<port>`.
    pub address: String,
    blobs: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ManifestOnly {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ManifestOnly {
    pub async fn start(repository: &str, tag: &str, layer: &[u8]) -> Self {
        use sha2::{Digest, Sha256};
        use std::sync::atomic::{AtomicUsize, Ordering};
        let config = b"{}";
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.cncf.helm.config.v1+json",
                       "digest": format!("sha256:{}", hex::encode(Sha256::digest(config))),
                       "size": config.len()},
            "layers": [{"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                        "digest": format!("sha256:{}", hex::encode(Sha256::digest(layer))),
                        "size": layer.len()}],
        }))
        .unwrap();
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&manifest)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let blobs = std::sync::Arc::new(AtomicUsize::new(0));
        let (counted, repository, tag) = (blobs.clone(), repository.to_owned(), tag.to_owned());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (manifest, digest, counted, repository, tag) = (
                    manifest.clone(),
                    digest.clone(),
                    counted.clone(),
                    repository.clone(),
                    tag.clone(),
                );
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let path = req.uri().path().to_owned();
                            let mut response = hyper::Response::new(http_body_util::Full::new(
                                hyper::body::Bytes::new(),
                            ));
                            if path == "/v2/" {
                            } else if path == format!("/v2/{repository}/tags/list") {
                                *response.body_mut() = http_body_util::Full::new(
                                    serde_json::to_vec(
                                        &serde_json::json!({"name": repository, "tags": [tag]}),
                                    )
                                    .unwrap()
                                    .into(),
                                );
                            } else if path == format!("/v2/{repository}/manifests/{tag}")
                                || path == format!("/v2/{repository}/manifests/{digest}")
                            {
                                let headers = response.headers_mut();
                                headers.insert(
                                    "content-type",
                                    "application/vnd.oci.image.manifest.v1+json"
                                        .parse()
                                        .unwrap(),
                                );
                                headers.insert("docker-content-digest", digest.parse().unwrap());
                                *response.body_mut() =
                                    http_body_util::Full::new(manifest.clone().into());
                            } else {
                                if path.contains("/blobs/") {
                                    counted.fetch_add(1, Ordering::Relaxed);
                                }
                                *response.status_mut() = hyper::StatusCode::NOT_FOUND;
                                *response.body_mut() = http_body_util::Full::new(
                                br#"{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown to registry"}]}"#
                                    .to_vec()
                                    .into(),
                            );
                            }
                            async move { Ok::<_, std::convert::Infallible>(response) }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            address,
            blobs,
            task,
        }
    }

    /// How many blob requests it answered (404).
    pub fn blob_requests(&self) -> usize {
        self.blobs.load(std::sync::atomic::Ordering::Relaxed)
    }
}
