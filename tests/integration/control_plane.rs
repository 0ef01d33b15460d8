//! The local control plane does what the rest of the suite relies on: workloads roll out
//! through controller-manager, scheduler and kwok; the test-behaviour labels make pods
//! that never become ready or that crash-loop; the CRD installs and the API server
//! enforces its validation; the cached helm binary runs; pods' logs are served through
//! the API server.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use support::{PATIENCE, TestNamespace, client, from_yaml, install_crd, testbin};
use wheelhouse::api::HelmRelease;

fn deployment(name: &str, behavior: Option<&str>) -> Deployment {
    let mut labels = serde_json::json!({ "app": name });
    if let Some(b) = behavior {
        labels["wheelhouse.dev/test-behavior"] = b.into();
    }
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": labels },
                "spec": { "containers": [{ "name": "app", "image": "registry.invalid/app:1" }] }
            }
        }
    }))
    .unwrap()
}

/// Polls the pods of `app` until `done` holds for all of them (and there are `count`).
async fn wait_for_pods(
    client: &Client,
    ns: &str,
    app: &str,
    count: usize,
    done: impl Fn(&Pod) -> bool,
) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params = ListParams::default().labels(&format!("app={app}"));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let pods = api.list(&params).await.expect("list pods").items;
        if pods.len() == count && pods.iter().all(&done) {
            return pods;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pods of {app} never reached the expected state: {:#?}",
            pods.iter().map(|p| &p.status).collect::<Vec<_>>()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn waiting_reason(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .as_deref()
}

#[tokio::test]
async fn deployment_becomes_available() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "cp-available").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    api.create(&PostParams::default(), &deployment("web", None))
        .await
        .unwrap();

    tokio::time::timeout(
        PATIENCE,
        await_condition(api.clone(), "web", conditions::is_deployment_completed()),
    )
    .await
    .expect("Deployment completed its rollout in time")
    .unwrap();
    let status = api.get("web").await.unwrap().status.unwrap();
    assert_eq!(status.available_replicas, Some(2));
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True")
    );
    ns.delete().await;
}

#[tokio::test]
async fn never_ready_pod_stays_unready() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "cp-never-ready").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &deployment("stuck", Some("never-ready")),
    )
    .await
    .unwrap();

    // kwok has acted on the pods once they run; none may be ready then or later. A
    // healthy Deployment created after them becoming ready is the positive sign that kwok's
    // ready stage has run past them.
    wait_for_pods(&client, &ns.name, "stuck", 2, |p| phase(p) == "Running").await;
    api.create(&PostParams::default(), &deployment("control", None))
        .await
        .unwrap();
    wait_for_pods(&client, &ns.name, "control", 2, ready).await;
    let pods = wait_for_pods(&client, &ns.name, "stuck", 2, |p| phase(p) == "Running").await;
    assert!(
        pods.iter().all(|p| !ready(p)),
        "a never-ready pod became ready"
    );
    let dep = api.get("stuck").await.unwrap();
    assert_eq!(dep.status.unwrap().available_replicas.unwrap_or(0), 0);
    ns.delete().await;
}

#[tokio::test]
async fn crash_looping_pod_shows_crash_loop_back_off() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "cp-crashloop").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &deployment("crashy", Some("crash-loop")),
    )
    .await
    .unwrap();

    let pods = wait_for_pods(&client, &ns.name, "crashy", 2, |p| {
        waiting_reason(p) == Some("CrashLoopBackOff")
    })
    .await;
    let status = pods[0].status.as_ref().unwrap();
    assert!(!ready(&pods[0]));
    assert!(status.container_statuses.as_ref().unwrap()[0].restart_count > 0);

    // Its logs come through the API server's real log path (the API server asks kwok
    // on the fake node, over TLS checked against the cluster CA): the last 200 of 300
    // lines, the previous container's, and a followed stream.
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let name = pods[0].metadata.name.clone().unwrap();
    let tail = pods_api
        .logs(
            &name,
            &LogParams {
                tail_lines: Some(200),
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    let lines: Vec<&str> = tail.lines().collect();
    assert_eq!(lines.len(), 200);
    assert_eq!(
        (lines[0], lines[199]),
        ("current line 101", "current line 300")
    );
    let previous = pods_api
        .logs(
            &name,
            &LogParams {
                previous: true,
                tail_lines: Some(1),
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(previous.trim_end(), "previous line 050");
    let mut follow = pods_api
        .log_stream(
            &name,
            &LogParams {
                follow: true,
                tail_lines: Some(1),
                ..LogParams::default()
            },
        )
        .await
        .unwrap()
        .lines();
    use futures::AsyncBufReadExt;
    use futures::TryStreamExt;
    let first = tokio::time::timeout(PATIENCE, follow.try_next())
        .await
        .expect("a followed line")
        .unwrap();
    assert_eq!(first.as_deref(), Some("current line 300"));
    ns.delete().await;
}

#[tokio::test]
async fn crd_installs_and_api_server_rejects_invalid_helmrelease() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "cp-crd").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);

    let rejected = |yaml: &str| {
        let api = api.clone();
        let hr: HelmRelease = from_yaml(yaml);
        async move {
            match api.create(&PostParams::default(), &hr).await {
                Err(kube::Error::Api(status)) => {
                    assert_eq!(status.code, 422, "{status:?}");
                    status.message
                }
                other => panic!("the API server accepted an invalid HelmRelease: {other:?}"),
            }
        }
    };

    let both_sources = rejected(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: both}\n\
         spec: {chart: {path: ./chart, repository: 'https://charts.example.com', name: app}}",
    )
    .await;
    assert!(
        both_sources.contains("chart.path cannot be combined with repository"),
        "{both_sources}"
    );

    let no_source = rejected(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: none}\n\
         spec: {chart: {version: '1.0.0'}}",
    )
    .await;
    assert!(
        no_source.contains("chart needs either path, repository and name, or git"),
        "{no_source}"
    );

    let ftp = rejected(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: ftp}\n\
         spec: {chart: {repository: 'ftp://charts.example.com', name: app}}",
    )
    .await;
    assert!(ftp.contains("or oci://host/path"), "{ftp}");
    // An OCI registry is a repository like the others.
    let oci: HelmRelease = from_yaml(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: oci}\n\
         spec: {suspend: true, chart: {repository: 'oci://ghcr.io/org/charts', name: app}}",
    );
    api.create(&PostParams::default(), &oci).await.unwrap();
    // A Git chart: a URL of a network transport, one ref, and nothing of the other sources.
    let git: HelmRelease = from_yaml(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: git}\n\
         spec: {suspend: true, chart: {git: {url: 'https://git.example.com/charts.git', ref: {tag: v1.0.0}, path: charts/app}}}",
    );
    api.create(&PostParams::default(), &git).await.unwrap();
    for (name, chart, says) in [
        (
            "git-file",
            "{git: {url: 'file:///srv/charts'}}",
            "chart.git.url must be an https://, http:// or ssh:// URL",
        ),
        (
            "git-two-refs",
            "{git: {url: 'https://h/c.git', ref: {branch: main, tag: v1}}}",
            "chart.git.ref takes one of branch, tag, semver or commit",
        ),
        (
            "git-short-commit",
            "{git: {url: 'https://h/c.git', ref: {commit: abc123}}}",
            "full 40-character commit SHA",
        ),
        (
            "git-and-repo",
            "{git: {url: 'https://h/c.git'}, repository: 'https://h', name: app}",
            "chart.git cannot be combined with repository",
        ),
    ] {
        let message = rejected(&format!(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: {name}}}\n\
             spec: {{chart: {chart}}}"
        ))
        .await;
        assert!(message.contains(says), "{name}: {message}");
    }

    // Bad durations and enums are caught by the schema. Sent as raw JSON because the
    // Rust types cannot even represent them.
    let raw = serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
        "metadata": {"name": "garbage"},
        "spec": {"chart": {"path": "./chart"}, "timeout": "5 minutes",
                 "install": {"crds": "Sometimes"}, "upgrade": {"remediation": {"strategy": "pray"}}}
    });
    let dynamic: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &kube::api::ApiResource::erase::<HelmRelease>(&()),
    );
    let err = dynamic
        .create(
            &PostParams::default(),
            &serde_json::from_value(raw).unwrap(),
        )
        .await
        .expect_err("garbage accepted");
    let msg = err.to_string();
    for needle in [
        "spec.timeout",
        "spec.install.crds",
        "spec.upgrade.remediation.strategy",
    ] {
        assert!(msg.contains(needle), "{needle} not named in {msg}");
    }

    // A valid minimal release is accepted and defaulted by the server.
    let ok: HelmRelease = from_yaml(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: podinfo}\n\
         spec: {chart: {repository: 'https://charts.example.com', name: podinfo, version: '>=6.0.0'}}",
    );
    let created = api.create(&PostParams::default(), &ok).await.unwrap();
    assert_eq!(created.spec.interval.to_string(), "10m");
    assert_eq!(created.spec.timeout.to_string(), "5m");
    assert_eq!(created.spec.max_history, 5);
    ns.delete().await;
}

#[tokio::test]
async fn cached_helm_binary_runs_against_the_cluster() {
    let helm = testbin().join("helm");
    let out = std::process::Command::new(&helm)
        .arg("version")
        .arg("--short")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", helm.display()));
    assert!(out.status.success(), "{out:?}");
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with("v4."),
        "unexpected helm version {version}"
    );

    let list = std::process::Command::new(&helm)
        .args(["list", "--all-namespaces", "--kubeconfig"])
        .arg(support::kubeconfig_path())
        .output()
        .unwrap();
    assert!(
        list.status.success(),
        "helm list failed against the local control plane: {}",
        String::from_utf8_lossy(&list.stderr)
    );
}
