//! Charts from Git repositories, against the Git server the test scripts start on
//! 127.0.0.1 (tests/cluster/up.sh, tests/cluster/gitserver): Git's own `git http-backend`
//! over plain HTTP (anonymous) and over TLS of the local CA with basic or bearer auth, and
//! `git upload-pack` behind an SSH server with a known host key. Repositories are made
//! here with the real git CLI.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, PostParams};
use support::engine::{self as eng, helm_history, is, wait_for, waiting_on};
use support::git::{Repo, git, server};
use wheelhouse::api::{ChartSpec, GitRef, GitSource, HelmRelease};
use wheelhouse::helm::source::{ChartSource, Error, RepoAuth};

fn git_chart(url: String, reference: Option<GitRef>, path: Option<&str>) -> ChartSpec {
    ChartSpec {
        git: Some(GitSource {
            url,
            reference,
            path: path.map(str::to_owned),
        }),
        ..Default::default()
    }
}

fn branch(b: &str) -> Option<GitRef> {
    Some(GitRef {
        branch: Some(b.into()),
        ..Default::default()
    })
}

fn source() -> (ChartSource, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let source = ChartSource::new(cache.path().join("charts"))
        .unwrap()
        .with_request_timeout(Duration::from_secs(10));
    (source, cache)
}

#[tokio::test]
async fn a_branch_a_tag_a_semver_range_a_commit_and_the_default_branch_resolve() {
    let s = server();
    let repo = Repo::new(&s, "refs");
    let c1 = repo.commit_chart("main", "charts/webapp", "1.0.0", "", "one");
    repo.tag("v1.0.0", false);
    let c2 = repo.commit_chart("main", "charts/webapp", "1.1.0", "", "two");
    repo.tag("v1.1.0", true);
    let c3 = repo.commit_chart("release-2", "charts/webapp", "2.0.0", "", "three");
    let url = format!("{}/{}", s.http, repo.name);
    let (source, cache) = source();
    let resolve = |reference: Option<GitRef>| {
        let spec = git_chart(url.clone(), reference, Some("charts/webapp"));
        let source = &source;
        async move { source.resolve(&spec, &RepoAuth::default()).await }
    };

    let main = resolve(branch("main")).await.unwrap();
    assert_eq!(main.version, "1.1.0");
    assert_eq!(main.revision, Some(format!("main@sha1:{c2}")));
    assert_eq!(main.commit(), Some(c2.as_str()));
    assert!(
        main.path.starts_with(cache.path()),
        "{}",
        main.path.display()
    );
    // What is checked out is the commit's tree, file for file.
    assert_eq!(
        std::fs::read_to_string(main.path.join("values.yaml")).unwrap(),
        git(
            repo.work.path(),
            &["show", &format!("{c2}:charts/webapp/values.yaml")]
        ) + "\n"
    );
    assert!(main.path.join("templates/tests").is_dir());

    let default = resolve(None).await.unwrap();
    assert_eq!(default.revision, Some(format!("main@sha1:{c2}")));
    let other = resolve(branch("release-2")).await.unwrap();
    assert_eq!(
        (other.version.as_str(), other.commit()),
        ("2.0.0", Some(c3.as_str()))
    );
    // A lightweight tag, and an annotated one (peeled to its commit).
    let tag = |t: &str| {
        Some(GitRef {
            tag: Some(t.into()),
            ..Default::default()
        })
    };
    let v1 = resolve(tag("v1.0.0")).await.unwrap();
    assert_eq!(
        (v1.version.as_str(), v1.commit()),
        ("1.0.0", Some(c1.as_str()))
    );
    assert_eq!(v1.revision, Some(format!("v1.0.0@sha1:{c1}")));
    let v11 = resolve(tag("v1.1.0")).await.unwrap();
    assert_eq!(v11.commit(), Some(c2.as_str()));
    let semver = |r: &str| {
        Some(GitRef {
            semver: Some(r.into()),
            ..Default::default()
        })
    };
    assert_eq!(
        resolve(semver("~1.0")).await.unwrap().commit(),
        Some(c1.as_str())
    );
    assert_eq!(
        resolve(semver(">=1.0.0")).await.unwrap().commit(),
        Some(c2.as_str())
    );
    let pinned = resolve(Some(GitRef {
        commit: Some(c1.clone()),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(pinned.version, "1.0.0");
    assert_eq!(pinned.revision, Some(format!("sha1:{c1}")));
    // A commit already checked out is served from the cache: the same directory.
    assert_eq!(resolve(tag("v1.0.0")).await.unwrap().path, v1.path);
}

#[tokio::test]
async fn each_failure_says_what_is_wrong() {
    let s = server();
    let repo = Repo::new(&s, "errors");
    let c1 = repo.commit_chart("main", "charts/webapp", "1.0.0", "", "one");
    repo.commit_file("docs");
    repo.tag("v1.0.0", false);
    let url = format!("{}/{}", s.http, repo.name);
    let (source, _cache) = source();
    let err = |spec: ChartSpec, auth: RepoAuth| {
        let source = &source;
        async move { source.resolve(&spec, &auth).await.unwrap_err() }
    };
    let none = RepoAuth::default;
    let at = |reference: Option<GitRef>, path: &str| git_chart(url.clone(), reference, Some(path));

    // An unknown branch lists the ones there are; an unknown tag, a range nothing matches.
    let e = err(at(branch("nope"), "charts/webapp"), none()).await;
    assert!(matches!(e, Error::GitRefNotFound { .. }), "{e}");
    assert!(
        e.to_string().contains("branch nope") && e.to_string().contains("main"),
        "{e}"
    );
    let e = err(
        at(
            Some(GitRef {
                tag: Some("v9".into()),
                ..Default::default()
            }),
            "charts/webapp",
        ),
        none(),
    )
    .await;
    assert!(matches!(e, Error::GitRefNotFound { .. }), "{e}");
    let e = err(
        at(
            Some(GitRef {
                semver: Some(">=5".into()),
                ..Default::default()
            }),
            "charts/webapp",
        ),
        none(),
    )
    .await;
    assert!(
        e.to_string()
            .contains("no tag matching >=5 (found: v1.0.0)"),
        "lists the tags: {e}"
    );
    // A commit the server does not have.
    let e = err(
        at(
            Some(GitRef {
                commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                ..Default::default()
            }),
            "charts/webapp",
        ),
        none(),
    )
    .await;
    assert!(matches!(e, Error::GitRefNotFound { .. }), "{e}");
    assert!(
        e.to_string()
            .ends_with("no commit 0123456789abcdef0123456789abcdef01234567"),
        "{e}"
    );
    // A path that is not a chart, and one that is not there.
    let e = err(at(branch("main"), "docs"), none()).await;
    assert!(matches!(e, Error::GitPathNotChart { .. }), "{e}");
    assert!(e.to_string().contains("no Chart.yaml"), "{e}");
    let e = err(at(branch("main"), "charts/nothing"), none()).await;
    assert!(matches!(e, Error::GitPathNotChart { .. }), "{e}");
    // A chart with a symbolic link (here to /etc/passwd) is refused, not followed.
    repo.commit_symlinked_chart("charts/linked");
    let e = err(at(branch("main"), "charts/linked"), none()).await;
    assert!(matches!(e, Error::GitPathNotChart { .. }), "{e}");
    assert!(
        e.to_string().contains("passwd.yaml is a symbolic link"),
        "{e}"
    );
    // ...while the chart's own path at that commit still resolves.
    assert!(
        source
            .resolve(&at(branch("main"), "charts/webapp"), &none())
            .await
            .is_ok()
    );
    let _ = c1;
    // A repository that does not exist, and a server that is down.
    let e = err(
        git_chart(format!("{}/missing.git", s.http), branch("main"), None),
        none(),
    )
    .await;
    assert!(matches!(e, Error::GitRepositoryNotFound { .. }), "{e}");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let e = err(
        git_chart(
            format!("http://{closed}/{}", repo.name),
            branch("main"),
            None,
        ),
        none(),
    )
    .await;
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains(&closed.to_string()), "{e}");
}

#[tokio::test]
async fn https_needs_the_ca_and_credentials_which_go_as_basic_or_bearer() {
    let s = server();
    let repo = Repo::new(&s, "private");
    let commit = repo.commit_chart("main", "chart", "1.0.0", "", "one");
    let url = format!("{}/{}", s.https, repo.name);
    let spec = git_chart(url, branch("main"), Some("chart"));
    let (source, _cache) = source();
    let ca = std::fs::read(&s.ca).unwrap();

    let e = source
        .resolve(&spec, &RepoAuth::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::UnknownCa { .. }), "{e}");
    let only_ca = RepoAuth {
        ca_pem: Some(ca.clone()),
        ..Default::default()
    };
    let e = source.resolve(&spec, &only_ca).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Auth {
                status: 401,
                sent_credentials: false,
                ..
            }
        ),
        "{e}"
    );
    let wrong = RepoAuth {
        username: Some(s.user.clone()),
        password: Some("wrong".into()),
        ..only_ca.clone()
    };
    let e = source.resolve(&spec, &wrong).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Auth {
                status: 401,
                sent_credentials: true,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        !e.to_string().contains("wrong"),
        "no password in errors: {e}"
    );
    // A repository the user may not read: 403.
    let forbidden = Repo::new(&s, "forbidden/secret");
    forbidden.commit_chart("main", "chart", "1.0.0", "", "one");
    let basic = RepoAuth {
        username: Some(s.user.clone()),
        password: Some(s.password.clone()),
        ..only_ca.clone()
    };
    let e = source
        .resolve(
            &git_chart(
                format!("{}/{}", s.https, forbidden.name),
                branch("main"),
                Some("chart"),
            ),
            &basic,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Auth { status: 403, .. }), "{e}");

    // Basic auth from a Secret on the cluster, read as the engine reads it; and a token.
    let client = support::client().await;
    let ns = support::TestNamespace::new(&client, "git-auth").await;
    let data = [
        ("username", s.user.as_bytes()),
        ("password", s.password.as_bytes()),
        ("ca.crt", &ca[..]),
    ];
    create_secret(&client, &ns.name, "git", &data).await;
    let auth = RepoAuth::from_secret(&client, &ns.name, "git")
        .await
        .unwrap();
    assert_eq!(
        source.resolve(&spec, &auth).await.unwrap().commit(),
        Some(commit.as_str())
    );
    let token = RepoAuth {
        bearer_token: Some(s.token.clone()),
        ..only_ca
    };
    assert_eq!(
        source.resolve(&spec, &token).await.unwrap().version,
        "1.0.0"
    );
    ns.delete().await;
}

async fn create_secret(client: &kube::Client, ns: &str, name: &str, data: &[(&str, &[u8])]) {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn ssh_needs_the_identity_and_the_servers_key_in_known_hosts() {
    let s = server();
    let repo = Repo::new(&s, "ssh");
    let commit = repo.commit_chart("main", "chart", "1.0.0", "", "one");
    let spec = git_chart(
        format!("{}/{}", s.ssh, repo.name),
        branch("main"),
        Some("chart"),
    );
    let (source, _cache) = source();
    let identity = std::fs::read_to_string(&s.identity).unwrap();
    let auth = |known_hosts: Option<&Path>| RepoAuth {
        ssh_identity: Some(identity.clone()),
        known_hosts: known_hosts.map(|p| std::fs::read_to_string(p).unwrap()),
        ..Default::default()
    };

    let resolved = source
        .resolve(&spec, &auth(Some(&s.known_hosts)))
        .await
        .unwrap();
    assert_eq!(resolved.commit(), Some(commit.as_str()));
    assert_eq!(resolved.version, "1.0.0");

    // Another key for the host: refused, and no trust on first use without known_hosts.
    let e = source
        .resolve(&spec, &auth(Some(&s.wrong_known_hosts)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::GitSsh { .. }), "{e}");
    assert!(e.to_string().contains("not in known_hosts"), "{e}");
    let e = source.resolve(&spec, &auth(None)).await.unwrap_err();
    assert!(e.to_string().contains("known_hosts"), "{e}");
    // A key the server does not know.
    let stranger = RepoAuth {
        ssh_identity: Some(stranger_key()),
        ..auth(Some(&s.known_hosts))
    };
    let e = source.resolve(&spec, &stranger).await.unwrap_err();
    assert!(matches!(e, Error::GitSsh { .. }), "{e}");
    assert!(e.to_string().contains("refused the identity"), "{e}");
}

/// An ed25519 private key no server knows, made with ssh-keygen.
fn stranger_key() -> String {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("stranger");
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(key).unwrap()
}

/// Installed from a branch; a new commit (same chart version) upgrades; a wait on a
/// broken commit is superseded by the fix's commit; the commit is in status and in Helm's
/// storage. A HelmRelease whose branch does not exist applies nothing.
#[tokio::test]
async fn a_new_commit_upgrades_and_supersedes_a_running_wait() {
    let s = server();
    let repo = Repo::new(&s, "engine");
    let c1 = repo.commit_chart("main", "deploy/web", "1.0.0", "", "one");
    let (client, ns, api) = eng::setup("git-engine").await;
    let _engine = eng::start(&client, &ns.name).await;
    let hr = |name: &str, git_ref: &str| -> HelmRelease {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
            "spec": {"chart": {"git": {"url": format!("{}/{}", s.http, repo.name),
                                        "ref": {"branch": git_ref}, "path": "deploy/web"}},
                     "timeout": "5m"}
        }))
        .unwrap()
    };
    api.create(&PostParams::default(), &hr("web", "main"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &hr("nobranch", "nope"))
        .await
        .unwrap();
    let web = wait_for(&api, "web", "installed from Git", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let status = web.status.unwrap();
    assert_eq!(
        status.last_attempted_source_revision,
        Some(format!("main@sha1:{c1}"))
    );
    assert_eq!(status.history[0].commit.as_deref(), Some(c1.as_str()));
    assert!(web.spec.chart.git.is_some());

    // A branch that is not there: ArtifactFailed, nothing in Helm's storage.
    let failed = wait_for(&api, "nobranch", "the missing branch reported", |h| {
        is(h, "Ready", "False", "ArtifactFailed")
    })
    .await;
    let message = failed
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message;
    assert!(message.contains("no branch nope"), "{message}");
    assert!(helm_history_or_none(&ns.name, "nobranch").is_empty());

    // A new commit with the same chart version and other values: a new desired state.
    let c2 = repo.commit_chart("main", "deploy/web", "1.0.0", "", "two");
    eng::annotate(&api, "web", "reconcile.wheelhouse.dev/requestedAt", "c2").await;
    let web = wait_for(&api, "web", "the second commit deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].commit.as_deref() == Some(c2.as_str())
    })
    .await;
    assert_eq!(web.status.unwrap().history[0].version, 2);
    let cm = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        cm.items.iter().any(|c| c
            .data
            .as_ref()
            .is_some_and(|d| d.values().any(|v| v.contains("two")))),
        "the second commit's values are applied"
    );

    // A broken commit, then its fix while the broken one's wait runs.
    repo.commit_chart("main", "deploy/web", "1.0.0", "never-ready", "three");
    eng::annotate(&api, "web", "reconcile.wheelhouse.dev/requestedAt", "c3").await;
    waiting_on(&api, "web", 3).await;
    let c4 = repo.commit_chart("main", "deploy/web", "1.0.0", "", "four");
    let web = wait_for(&api, "web", "the fix's commit deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].commit.as_deref() == Some(c4.as_str())
    })
    .await;
    assert_eq!(web.status.unwrap().history[0].version, 4);
    let history = helm_history(&ns.name, "web");
    assert_eq!(
        history.iter().map(|h| h.1.as_str()).collect::<Vec<_>>(),
        ["superseded", "superseded", "superseded", "deployed"],
        "{history:?}"
    );
    // Helm's storage carries the commit on the revision's Secret.
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns.name)
        .list(&ListParams::default().labels("owner=helm,name=web,version=4"))
        .await
        .unwrap();
    assert_eq!(
        secrets.items[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get("wheelhouse.dev/source-commit"),
        Some(&c4)
    );
    ns.delete().await;
}

/// `helm history` of a release that may not exist: empty then.
fn helm_history_or_none(ns: &str, release: &str) -> Vec<String> {
    let out = Command::new(support::testbin().join("helm"))
        .args(["history", release, "-n", ns, "-o", "json"])
        .env("KUBECONFIG", support::kubeconfig_path())
        .output()
        .unwrap();
    if !out.status.success() {
        return Vec::new();
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    json.as_array()
        .map(|a| a.iter().map(|r| r["revision"].to_string()).collect())
        .unwrap_or_default()
}
