//! Chart resolution against a real Helm repository served over HTTP on 127.0.0.1 (see
//! support::source), path charts on disk, and repository credentials from a Secret on the
//! local control plane.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use support::source::{Entry, RepoServer, TEST_CA_PEM, chart_tgz, index_yaml, sha256_hex};
use wheelhouse::api::ChartSpec;
use wheelhouse::helm::source::{ChartSource, Error, RepoAuth, ResolvedChart};

fn repo_chart(repository: &str, name: &str, version: Option<&str>) -> ChartSpec {
    ChartSpec {
        repository: Some(repository.to_owned()),
        name: Some(name.to_owned()),
        version: version.map(str::to_owned),
        ..Default::default()
    }
}

fn path_chart(path: impl AsRef<Path>) -> ChartSpec {
    ChartSpec {
        path: Some(path.as_ref().display().to_string()),
        ..Default::default()
    }
}

/// Publishes `versions` of chart `name` under `/charts` (relative URLs, with digests) and
/// returns the repository URL.
fn publish(server: &RepoServer, name: &str, versions: &[&str]) -> String {
    let mut entries = Vec::new();
    for version in versions {
        let tgz = chart_tgz(name, version, &format!("app-{version}"));
        let file = format!("{name}-{version}.tgz");
        entries.push(Entry {
            name,
            version,
            app_version: "ignored-index-value",
            url: file.clone(),
            digest: Some(sha256_hex(&tgz)),
        });
        server.put(&format!("/charts/{file}"), tgz);
    }
    server.put("/charts/index.yaml", index_yaml(&entries));
    server.url("/charts")
}

struct Fixture {
    server: RepoServer,
    source: ChartSource,
    _cache: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let cache = tempfile::tempdir().unwrap();
    let source = ChartSource::new(cache.path().join("charts"))
        .unwrap()
        .with_request_timeout(Duration::from_secs(10));
    Fixture {
        server: RepoServer::start().await,
        source,
        _cache: cache,
    }
}

fn assert_archive(resolved: &ResolvedChart, name: &str, version: &str) {
    assert_eq!(resolved.name, name);
    assert_eq!(resolved.version, version);
    // From the archive's Chart.yaml, not from the index.
    assert_eq!(
        resolved.app_version.as_deref(),
        Some(&*format!("app-{version}"))
    );
    let bytes = std::fs::read(&resolved.path).expect("resolved path is readable");
    assert_eq!(bytes, chart_tgz(name, version, &format!("app-{version}")));
    assert_eq!(resolved.digest, format!("sha256:{}", sha256_hex(&bytes)));
}

#[tokio::test]
async fn resolves_latest_stable_a_range_and_an_exact_version() {
    let f = fixture().await;
    let repo = publish(
        &f.server,
        "hello",
        &["1.0.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "0.9.0"],
    );
    let none = RepoAuth::default();

    let latest = f
        .source
        .resolve(&repo_chart(&repo, "hello", None), &none)
        .await
        .unwrap();
    assert_archive(&latest, "hello", "1.10.0");
    assert!(latest.path.starts_with(f.source.cache_dir()));

    let range = repo_chart(&repo, "hello", Some(">=1.0.0 <1.5.0"));
    assert_archive(
        &f.source.resolve(&range, &none).await.unwrap(),
        "hello",
        "1.2.0",
    );
    let tilde = repo_chart(&repo, "hello", Some("~1.0"));
    assert_archive(
        &f.source.resolve(&tilde, &none).await.unwrap(),
        "hello",
        "1.0.0",
    );
    let exact = repo_chart(&repo, "hello", Some("0.9.0"));
    assert_archive(
        &f.source.resolve(&exact, &none).await.unwrap(),
        "hello",
        "0.9.0",
    );
    let pre = repo_chart(&repo, "hello", Some(">=2.0.0-0"));
    assert_archive(
        &f.source.resolve(&pre, &none).await.unwrap(),
        "hello",
        "2.0.0-rc.1",
    );

    let err = f
        .source
        .resolve(&repo_chart(&repo, "hello", Some("^3")), &none)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoMatchingVersion { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "no version of hello matches ^3 (available: 2.0.0-rc.1, 1.10.0, 1.2.0, 1.0.0, 0.9.0)"
    );

    let err = f
        .source
        .resolve(&repo_chart(&repo, "nope", None), &none)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("chart nope not found in repository {repo}")
    );

    let err = f
        .source
        .resolve(&repo_chart(&repo, "hello", Some(">=1.0 <<2")), &none)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConstraint(_)), "{err:?}");
}

#[tokio::test]
async fn a_cached_chart_is_not_downloaded_again_and_the_index_is_revalidated() {
    let f = fixture().await;
    let repo = publish(&f.server, "hello", &["1.0.0"]);
    let spec = repo_chart(&repo, "hello", None);
    let first = f.source.resolve(&spec, &RepoAuth::default()).await.unwrap();
    let second = f.source.resolve(&spec, &RepoAuth::default()).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(f.server.statuses("/charts/hello-1.0.0.tgz"), [200]);
    // The index is asked for every time, but conditionally: unchanged costs a 304.
    assert_eq!(f.server.statuses("/charts/index.yaml"), [200, 304]);

    // A new process (new ChartSource, same cache directory) reuses the file too.
    let again = ChartSource::new(f.source.cache_dir().to_owned()).unwrap();
    let third = again.resolve(&spec, &RepoAuth::default()).await.unwrap();
    assert_eq!(third, first);
    assert_eq!(f.server.statuses("/charts/hello-1.0.0.tgz"), [200]);

    // A corrupted cache file is detected by its digest and downloaded again.
    std::fs::write(&first.path, b"garbage").unwrap();
    let repaired = again.resolve(&spec, &RepoAuth::default()).await.unwrap();
    assert_archive(&repaired, "hello", "1.0.0");
    assert_eq!(f.server.statuses("/charts/hello-1.0.0.tgz"), [200, 200]);
}

#[tokio::test]
async fn a_version_published_later_is_picked_up() {
    let f = fixture().await;
    let repo = publish(&f.server, "hello", &["1.0.0"]);
    let spec = repo_chart(&repo, "hello", Some("1.x"));
    let before = f.source.resolve(&spec, &RepoAuth::default()).await.unwrap();
    assert_archive(&before, "hello", "1.0.0");

    publish(&f.server, "hello", &["1.0.0", "1.1.0", "2.0.0"]);
    let after = f.source.resolve(&spec, &RepoAuth::default()).await.unwrap();
    assert_archive(&after, "hello", "1.1.0");
    assert_ne!(before.digest, after.digest);
    assert_eq!(f.server.statuses("/charts/index.yaml"), [200, 200]);
}

#[tokio::test]
async fn a_digest_mismatch_is_rejected_and_nothing_is_cached() {
    let f = fixture().await;
    let good = chart_tgz("hello", "1.0.0", "app-1.0.0");
    let tampered = chart_tgz("hello", "1.0.0", "tampered");
    f.server.put("/charts/hello-1.0.0.tgz", tampered.clone());
    f.server.put(
        "/charts/index.yaml",
        index_yaml(&[Entry {
            name: "hello",
            version: "1.0.0",
            app_version: "app-1.0.0",
            url: "hello-1.0.0.tgz".into(),
            digest: Some(sha256_hex(&good)),
        }]),
    );
    let spec = repo_chart(&f.server.url("/charts"), "hello", None);
    let err = f
        .source
        .resolve(&spec, &RepoAuth::default())
        .await
        .unwrap_err();
    let Error::DigestMismatch {
        expected, actual, ..
    } = &err
    else {
        panic!("expected a digest mismatch, got {err:?}");
    };
    assert_eq!(expected, &sha256_hex(&good));
    assert_eq!(actual, &sha256_hex(&tampered));
    assert!(err.to_string().contains("/charts/hello-1.0.0.tgz"), "{err}");
    let cached = cached_files(f.source.cache_dir());
    assert!(cached.is_empty(), "nothing may be cached: {cached:?}");

    // Once the repository serves the right file, the same spec resolves.
    f.server.put("/charts/hello-1.0.0.tgz", good);
    assert_archive(
        &f.source.resolve(&spec, &RepoAuth::default()).await.unwrap(),
        "hello",
        "1.0.0",
    );
}

#[tokio::test]
async fn basic_auth_is_required_and_accepted() {
    let f = fixture().await;
    let repo = publish(&f.server, "hello", &["1.0.0"]);
    f.server.require_basic_auth("reader", "s3cret-Pa55");
    let spec = repo_chart(&repo, "hello", None);

    let err = f
        .source
        .resolve(&spec, &RepoAuth::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Auth {
                status: 401,
                sent_credentials: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("chart.secretRef"), "{err}");

    let wrong = RepoAuth {
        username: Some("reader".into()),
        password: Some("wrong-Pa55".into()),
        ..Default::default()
    };
    let err = f.source.resolve(&spec, &wrong).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Auth {
                status: 401,
                sent_credentials: true,
                ..
            }
        ),
        "{err:?}"
    );
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("wrong-Pa55"), "{shown}");

    let right = RepoAuth {
        password: Some("s3cret-Pa55".into()),
        ..wrong
    };
    let resolved = f.source.resolve(&spec, &right).await.unwrap();
    assert_archive(&resolved, "hello", "1.0.0");
    // The chart download was authenticated too.
    assert_eq!(f.server.statuses("/charts/hello-1.0.0.tgz"), [200]);
}

#[tokio::test]
async fn credentials_from_a_secret_open_a_private_repository() {
    let client = support::client().await;
    let ns = support::TestNamespace::new(&client, "source-auth").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let secret: Secret = support::from_yaml(
        "metadata: {name: repo-creds}\nstringData: {username: reader, password: s3cret-Pa55, ca.crt: \"-----BEGIN CERTIFICATE-----\\n\"}\n",
    );
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let legacy: Secret =
        support::from_yaml("metadata: {name: legacy-ca}\nstringData: {caFile: PEM-BYTES}\n");
    secrets
        .create(&PostParams::default(), &legacy)
        .await
        .unwrap();

    let auth = RepoAuth::from_secret(&client, &ns.name, "repo-creds")
        .await
        .unwrap();
    assert_eq!(auth.username.as_deref(), Some("reader"));
    assert_eq!(auth.password.as_deref(), Some("s3cret-Pa55"));
    assert_eq!(
        auth.ca_pem.as_deref(),
        Some(&b"-----BEGIN CERTIFICATE-----\n"[..])
    );
    assert!(!format!("{auth:?}").contains("s3cret"));

    let legacy = RepoAuth::from_secret(&client, &ns.name, "legacy-ca")
        .await
        .unwrap();
    assert_eq!(legacy.ca_pem.as_deref(), Some(&b"PEM-BYTES"[..]));
    assert_eq!(legacy.username, None);

    let err = RepoAuth::from_secret(&client, &ns.name, "absent")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("chart.secretRef: Secret {}/absent not found", ns.name)
    );

    // Used end to end: username and password from the Secret open the repository.
    let f = fixture().await;
    let repo = publish(&f.server, "hello", &["1.0.0"]);
    f.server.require_basic_auth("reader", "s3cret-Pa55");
    let basic_only = RepoAuth {
        ca_pem: None,
        ..auth
    };
    let resolved = f
        .source
        .resolve(&repo_chart(&repo, "hello", None), &basic_only)
        .await
        .unwrap();
    assert_archive(&resolved, "hello", "1.0.0");
    ns.delete().await;
}

#[tokio::test]
async fn https_needs_the_repository_ca_unless_the_system_trusts_it() {
    let cache = tempfile::tempdir().unwrap();
    let source = ChartSource::new(cache.path().to_owned())
        .unwrap()
        .with_request_timeout(Duration::from_secs(10));
    let server = RepoServer::start_tls().await;
    let repo = publish(&server, "hello", &["1.0.0"]);
    assert!(repo.starts_with("https://127.0.0.1:"), "{repo}");
    let spec = repo_chart(&repo, "hello", None);

    // The test CA is in no system store: verification stays on and refuses it.
    let err = source
        .resolve(&spec, &RepoAuth::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownCa { .. }), "{err:?}");
    assert!(
        err.to_string().contains("not signed by a trusted CA")
            && err.to_string().contains("ca.crt"),
        "{err}"
    );

    let with_ca = RepoAuth {
        ca_pem: Some(TEST_CA_PEM.as_bytes().to_vec()),
        ..Default::default()
    };
    let resolved = source.resolve(&spec, &with_ca).await.unwrap();
    assert_archive(&resolved, "hello", "1.0.0");

    let garbage = RepoAuth {
        ca_pem: Some(b"not a certificate".to_vec()),
        ..Default::default()
    };
    let err = source.resolve(&spec, &garbage).await.unwrap_err();
    assert!(matches!(err, Error::InvalidCa(_)), "{err:?}");
}

#[tokio::test]
async fn an_unreachable_repository_names_the_url_and_the_cause() {
    let f = fixture().await;
    // A port that was just free and is closed now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let repo = format!("http://127.0.0.1:{port}/charts");
    let err = f
        .source
        .resolve(&repo_chart(&repo, "hello", None), &RepoAuth::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "repository http://127.0.0.1:{port}/charts/index.yaml is unreachable: "
        )),
        "{message}"
    );
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let cache = tempfile::tempdir().unwrap();
    let source = ChartSource::new(cache.path().to_owned())
        .unwrap()
        .with_request_timeout(Duration::from_millis(300));
    // Accepts connections and never answers (for at most the test's lifetime).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let repo = format!("http://{addr}/charts");
    let started = std::time::Instant::now();
    let err = source
        .resolve(&repo_chart(&repo, "hello", None), &RepoAuth::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err.to_string(),
        format!("http://{addr}/charts/index.yaml: no response within 0.3s")
    );
    silent.abort();
}

#[tokio::test]
async fn redirects_absolute_urls_and_http_errors() {
    let f = fixture().await;
    let tgz = chart_tgz("hello", "1.0.0", "app-1.0.0");
    f.server.put("/blobs/hello-1.0.0.tgz", tgz.clone());
    f.server.put(
        "/new/index.yaml",
        index_yaml(&[Entry {
            name: "hello",
            version: "1.0.0",
            app_version: "x",
            url: f.server.url("/blobs/hello-1.0.0.tgz"),
            digest: Some(sha256_hex(&tgz)),
        }]),
    );
    f.server.redirect("/old/index.yaml", "/new/index.yaml");
    let resolved = f
        .source
        .resolve(
            &repo_chart(&f.server.url("/old"), "hello", None),
            &RepoAuth::default(),
        )
        .await
        .unwrap();
    assert_archive(&resolved, "hello", "1.0.0");
    assert_eq!(f.server.statuses("/old/index.yaml"), [302]);

    // A redirect loop ends.
    f.server.redirect("/loop/index.yaml", "/loop/index.yaml");
    let err = f
        .source
        .resolve(
            &repo_chart(&f.server.url("/loop"), "hello", None),
            &RepoAuth::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TooManyRedirects { .. }), "{err:?}");

    let err = f
        .source
        .resolve(
            &repo_chart(&f.server.url("/missing"), "hello", None),
            &RepoAuth::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: HTTP 404 Not Found",
            f.server.url("/missing/index.yaml")
        )
    );

    f.server.put("/broken/index.yaml", "entries: [unclosed\n");
    let err = f
        .source
        .resolve(
            &repo_chart(&f.server.url("/broken"), "hello", None),
            &RepoAuth::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::IndexParse { .. }), "{err:?}");
    // What the server answered is not repeated: a URL may point where only the engine
    // can reach (docs/operations/multi-tenancy.md, "Outbound requests").
    assert_eq!(
        err.to_string(),
        format!(
            "the index of repository {} (19 bytes) does not read as a Helm repository index (its content is not shown)",
            f.server.url("/broken")
        )
    );
}

/// The cache's files, less its identity key (made with the cache, before anything is
/// downloaded).
fn cached_files(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != ".identity-key")
        .collect()
}

#[tokio::test]
async fn a_download_that_is_not_a_chart_is_refused() {
    let f = fixture().await;
    let junk = b"<html>login page</html>".to_vec();
    f.server.put("/charts/hello-1.0.0.tgz", junk);
    f.server.put(
        "/charts/index.yaml",
        index_yaml(&[Entry {
            name: "hello",
            version: "1.0.0",
            app_version: "x",
            url: "hello-1.0.0.tgz".into(),
            digest: None,
        }]),
    );
    let err = f
        .source
        .resolve(
            &repo_chart(&f.server.url("/charts"), "hello", None),
            &RepoAuth::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArchive { .. }), "{err:?}");
    assert!(cached_files(f.source.cache_dir()).is_empty());
}

fn fixture_chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/hello")
}

#[tokio::test]
async fn path_charts_directory_and_archive() {
    let cache = tempfile::tempdir().unwrap();
    let source = ChartSource::new(cache.path().to_owned()).unwrap();
    let none = RepoAuth::default();

    let dir = source
        .resolve(&path_chart(fixture_chart()), &none)
        .await
        .unwrap();
    assert_eq!(dir.name, "hello");
    assert_eq!(dir.version, "0.3.1");
    assert_eq!(dir.app_version.as_deref(), Some("1.10"));
    assert_eq!(dir.path, fixture_chart());
    assert!(dir.digest.starts_with("sha256:"));

    // A copy with one changed file has another digest.
    let copy = tempfile::tempdir().unwrap();
    support::copy_dir(&fixture_chart(), copy.path());
    let same = source
        .resolve(&path_chart(copy.path()), &none)
        .await
        .unwrap();
    assert_eq!(same.digest, dir.digest, "same files, same digest");
    std::fs::write(copy.path().join("values.yaml"), "greeting: hi\n").unwrap();
    let edited = source
        .resolve(&path_chart(copy.path()), &none)
        .await
        .unwrap();
    assert_ne!(edited.digest, dir.digest);

    let tgz = chart_tgz("packaged", "2.0.0", "app-2.0.0");
    let tgz_path = copy.path().join("packaged-2.0.0.tgz");
    std::fs::write(&tgz_path, &tgz).unwrap();
    let archive = source.resolve(&path_chart(&tgz_path), &none).await.unwrap();
    assert_eq!(archive.name, "packaged");
    assert_eq!(archive.version, "2.0.0");
    assert_eq!(archive.app_version.as_deref(), Some("app-2.0.0"));
    assert_eq!(archive.digest, format!("sha256:{}", sha256_hex(&tgz)));
    assert_eq!(archive.path, tgz_path);
}

#[tokio::test]
async fn path_chart_errors_are_clear() {
    let cache = tempfile::tempdir().unwrap();
    let source = ChartSource::new(cache.path().to_owned()).unwrap();
    let none = RepoAuth::default();
    let work = tempfile::tempdir().unwrap();

    let missing = work.path().join("nowhere");
    let err = source
        .resolve(&path_chart(&missing), &none)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("chart path {} does not exist", missing.display())
    );

    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = source
        .resolve(&path_chart(&empty), &none)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{} is not a chart: it has no Chart.yaml", empty.display())
    );

    let broken = work.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("Chart.yaml"), "name: [oops\n").unwrap();
    let err = source
        .resolve(&path_chart(&broken), &none)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidChartYaml { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot parse {}: ",
            broken.join("Chart.yaml").display()
        )),
        "{err}"
    );

    std::fs::write(broken.join("Chart.yaml"), "name: x\n").unwrap();
    let err = source
        .resolve(&path_chart(&broken), &none)
        .await
        .unwrap_err();
    assert!(err.to_string().ends_with("version is missing"), "{err}");

    let not_tgz = work.path().join("chart.tgz");
    std::fs::write(&not_tgz, "plain text").unwrap();
    let err = source
        .resolve(&path_chart(&not_tgz), &none)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArchive { .. }), "{err:?}");
}

/// The real helm binary packages and indexes a chart; wheelhouse resolves it from the
/// repository and helm renders what wheelhouse resolved.
#[tokio::test]
async fn charts_packaged_and_indexed_by_helm_resolve_and_render() {
    let helm = support::testbin().join("helm");
    let f = fixture().await;
    let out = tempfile::tempdir().unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let output = std::process::Command::new(&helm)
            .args(args)
            .env("HELM_CACHE_HOME", out.path().join("helm-cache"))
            .env("HELM_CONFIG_HOME", out.path().join("helm-config"))
            .env("HELM_DATA_HOME", out.path().join("helm-data"))
            .output()
            .expect("run helm");
        assert!(
            output.status.success(),
            "helm {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let packages = out.path().join("packages");
    std::fs::create_dir(&packages).unwrap();
    run(&[
        "package".as_ref(),
        fixture_chart().as_os_str(),
        "--destination".as_ref(),
        packages.as_os_str(),
    ]);
    let repo = f.server.url("/helm");
    run(&[
        "repo".as_ref(),
        "index".as_ref(),
        packages.as_os_str(),
        "--url".as_ref(),
        repo.as_ref(),
    ]);
    for entry in std::fs::read_dir(&packages).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        f.server.put(
            &format!("/helm/{name}"),
            std::fs::read(entry.path()).unwrap(),
        );
    }

    let resolved = f
        .source
        .resolve(
            &repo_chart(&repo, "hello", Some("~0.3")),
            &RepoAuth::default(),
        )
        .await
        .unwrap();
    assert_eq!(resolved.name, "hello");
    assert_eq!(resolved.version, "0.3.1");
    assert_eq!(resolved.app_version.as_deref(), Some("1.10"));
    let packaged = std::fs::read(packages.join("hello-0.3.1.tgz")).unwrap();
    assert_eq!(resolved.digest, format!("sha256:{}", sha256_hex(&packaged)));

    let rendered = run(&[
        "template".as_ref(),
        "demo".as_ref(),
        resolved.path.as_os_str(),
        "--set".as_ref(),
        "greeting=hi".as_ref(),
    ]);
    assert!(rendered.contains("name: demo-hello"), "{rendered}");
    assert!(rendered.contains("greeting: \"hi\""), "{rendered}");
}

#[tokio::test]
async fn relative_chart_paths_resolve_against_the_chart_root_never_the_working_directory() {
    let cache = tempfile::tempdir().unwrap();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    // From the repository root (cargo's working directory for tests) the path exists, yet
    // without a chart root it is refused rather than resolved against the cwd.
    let relative = path_chart("tests/fixtures/charts/webapp");
    let no_root = ChartSource::new(cache.path().join("charts")).unwrap();
    let err = no_root
        .resolve(&relative, &RepoAuth::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RelativePath { .. }), "{err}");
    assert!(err.to_string().contains("--chart-root"), "{err}");

    let rooted = ChartSource::new(cache.path().join("charts"))
        .unwrap()
        .with_chart_root(Some(fixtures));
    let chart = rooted
        .resolve(&path_chart("charts/webapp"), &RepoAuth::default())
        .await
        .unwrap();
    assert_eq!(chart.name, "webapp");
}

/// Which version `helm show chart --repo <url> pick --version <constraint>` (helm v4.3.1,
/// Masterminds semver) picks from the repository, or None when helm finds none.
fn helm_picks(repo: &str, constraint: &str) -> Option<String> {
    let out = std::process::Command::new(support::testbin().join("helm"))
        .args([
            "show",
            "chart",
            "pick",
            "--repo",
            repo,
            "--version",
            constraint,
        ])
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("wheelhouse-test-helm-cache"),
        )
        .output()
        .expect("helm runs");
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("version: ").map(str::to_owned))
}

/// Version constraints resolve as helm resolves them: for each constraint the expectation
/// is what the real helm (Masterminds semver) picks from the same repository index.
#[tokio::test]
async fn version_constraints_pick_what_helm_picks() {
    let server = RepoServer::start().await;
    let versions = [
        "0.0.3",
        "0.0.4",
        "0.1.0",
        "0.2.2",
        "0.2.3",
        "0.2.9",
        "0.3.0",
        "0.9.0-rc.1",
        "0.9.9",
        "1.0.0-alpha",
        "1.0.0-rc.1",
        "1.0.0-rc.2",
        "1.0.0",
        "1.0.1",
        "1.1.0-rc.1",
        "1.1.0",
        "1.1.9",
        "1.2.0",
        "1.2.3",
        "1.2.4",
        "1.2.7",
        "1.3.0",
        "1.3.7",
        "1.4.0",
        "1.4.2-beta",
        "1.4.2",
        "1.4.5",
        "1.4.6",
        "1.4.9",
        "1.5.0-beta",
        "1.5.0",
        "1.9.9",
        "1.10.0",
        "1.99.99",
        "2.0.0-rc.1",
        "2.0.0",
        "2.0.1",
        "2.9.9",
        "3.0.0",
        "3.1.0",
    ];
    let repo = publish(&server, "pick", &versions);
    let constraints = [
        "1.2.3",
        "=1.2.3",
        "v1.2.3",
        "1.2",
        "1",
        "1.x",
        "1.2.*",
        "*",
        "x",
        ">=1.0.0 <2.0.0",
        ">=1.0.0, <2.0.0",
        ">= 1.0.0, < 2.0.0",
        ">=1.0.0,<2.0.0",
        "=>1.0.0 =<1.99.99",
        ">1.0.0",
        ">1.2",
        ">1",
        "<=1.2",
        "<1.2",
        ">=1.2.x",
        "~1.4",
        "~1.4.2",
        "~1",
        "~>1.4",
        "^2",
        "^1.2.3",
        "^0.2.3",
        "^0.0.3",
        "^0.0",
        "^0",
        "1.2.x || >=3.0.0",
        "1.2 - 1.4.5",
        "1.2 - 1.4",
        ">=1.0.0 !=1.3.0",
        "!=1.3",
        ">=1.0.0-0",
        "1.0.0-rc.1",
        "~1.4.0-0",
        ">=4.0.0",
        "1.4.2-beta",
    ];
    let mut differences = Vec::new();
    for constraint in constraints {
        // helm runs on a blocking thread: the repository server answers on this runtime.
        let theirs = {
            let repo = repo.clone();
            tokio::task::spawn_blocking(move || helm_picks(&repo, constraint))
                .await
                .unwrap()
        };
        let ours = wheelhouse::helm::source::version::select(&versions, Some(constraint))
            .ok()
            .map(|i| versions[i].to_string());
        if theirs != ours {
            differences.push(format!(
                "{constraint:?}: helm {theirs:?}, wheelhouse {ours:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

/// Hostile `chart.path`s against a real controller (`--chart-root`): a device, the
/// engine's own pipe to its render helper, a symlink out of the root, `..`, and a chart
/// in the engine's cache. Each is refused with its rule, quickly, while five ordinary
/// releases install beside them; the engine's memory stays small throughout.
#[tokio::test]
async fn hostile_chart_paths_are_refused_and_nothing_else_slows() {
    use support::engine::{release, wait_for};
    let (_client, ns, api) = support::engine::setup("hostile-path").await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let outside = tempfile::tempdir().unwrap();
    let webapp = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/webapp");
    support::copy_dir(&webapp, &root.join("webapp"));
    support::copy_dir(&webapp, &outside.path().join("webapp"));
    std::os::unix::fs::symlink(outside.path().join("webapp"), root.join("escape")).unwrap();
    // The controller's chart cache is `root/charts`: a chart there (as another release's
    // private chart would be) is inside the root, yet never readable.
    support::copy_dir(&webapp, &root.join("charts/private"));
    let controller = support::controller::Controller::start_in(
        dir,
        &[
            "-n",
            &ns.name,
            "--lease-namespace",
            &ns.name,
            "--chart-root",
            &root.display().to_string(),
        ],
        &[],
    );
    let pid = controller.pid();
    let path_release = |name: &str, path: &str| {
        let mut hr = release(
            name,
            "webapp",
            serde_json::json!({"values": {"replicaCount": 1}}),
        );
        hr.spec.chart.path = Some(path.to_owned());
        hr
    };
    // An ordinary release first, so the render helper runs and its pipes exist.
    api.create(&PostParams::default(), &path_release("ok-0", "webapp"))
        .await
        .unwrap();
    wait_for(&api, "ok-0", "installed", |h| {
        h.condition("Ready").is_some_and(|c| c.status == "True")
    })
    .await;
    let pipe = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("pipe:"))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .expect("the engine holds a pipe to its render helper");
    let own_pipe = format!("/proc/self/fd/{pipe}");
    let cached = root.join("charts/private").display().to_string();
    let hostile = [
        ("zero", "/dev/zero", "outside the chart root"),
        ("pipe", own_pipe.as_str(), "cannot be resolved to a file"),
        ("escape", "escape", "outside the chart root"),
        ("dotdot", "../outside/webapp", "contains '..'"),
        ("cache", cached.as_str(), "inside the engine's chart cache"),
    ];
    let started = std::time::Instant::now();
    for (name, path, _) in &hostile {
        api.create(&PostParams::default(), &path_release(name, path))
            .await
            .unwrap();
    }
    for i in 1..=5 {
        api.create(
            &PostParams::default(),
            &path_release(&format!("ok-{i}"), "webapp"),
        )
        .await
        .unwrap();
    }
    for (name, path, rule) in &hostile {
        let refused = wait_for(&api, name, "refused, naming the rule", |h| {
            h.condition("Ready")
                .is_some_and(|c| c.reason == "ArtifactFailed" && c.message.contains(rule))
        })
        .await;
        let message = refused.condition("Ready").unwrap().message.clone();
        assert!(message.contains(&format!("{path:?}")), "{message}");
    }
    for i in 1..=5 {
        wait_for(&api, &format!("ok-{i}"), "installed beside them", |h| {
            h.condition("Ready").is_some_and(|c| c.status == "True")
        })
        .await;
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "refusals and installs took {took:?}: something waited on a hostile chart"
    );
    // The helper kept answering: no render timed out.
    assert!(
        !controller.log().contains("timed out"),
        "{}",
        controller.log()
    );
    // VmHWM: the engine's peak resident memory (kB) since it started.
    let (_, peak_kb) = support::process::read_rss(pid).unwrap();
    assert!(
        peak_kb < 300 * 1024,
        "the engine's RSS peaked at {peak_kb} kB"
    );
    ns.delete().await;
}
