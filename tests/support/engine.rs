//! Running a real engine in a test: scoped to the test's namespace, with its lease there
//! too, so tests in parallel never share an engine.

use std::path::PathBuf;
use std::time::Duration;

use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use wheelhouse::api::HelmRelease;
use wheelhouse::cluster::client::Scope;
use wheelhouse::engine::{self, EngineConfig, EngineHandle, Role};

use super::{PATIENCE, kubeconfig_path, testbin};

pub struct TestEngine {
    pub handle: EngineHandle,
    _cache: tempfile::TempDir,
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

pub fn config(ns: &str, identity: &str) -> (EngineConfig, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let mut config = EngineConfig::new(Scope::Namespace(ns.into()));
    config.lease_namespace = ns.into();
    config.identity = identity.into();
    config.chart_cache = cache.path().join("charts");
    config.chart_poll = Duration::from_secs(1);
    config.renderer = super::renderer(None);
    (config, cache)
}

/// Starts an engine for `ns` and waits until it holds the lease.
pub async fn start(client: &Client, ns: &str) -> TestEngine {
    start_with_metrics(client, ns, &format!("test-engine-{ns}"))
        .await
        .0
}

/// After an engine stopped during revision 2's wait (see `waiting_on`), the desired state
/// unchanged: the engine now leading resumes that wait (its WaitResumed Event is the
/// sign) in the window it began with (`began`), and once the pods recover, revision 2 is
/// deployed with no revision failed or added.
pub async fn assert_wait_resumed_then_deployed(
    client: &Client,
    api: &Api<HelmRelease>,
    ns: &str,
    began: &wheelhouse::api::WaitStatus,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let events = events_of(client, ns, "web").await;
        if events
            .iter()
            .any(|e| e.starts_with("WaitResumed") && e.contains("revision 2"))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never resumed: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let hr = waiting_on(api, "web", 2).await;
    let wait = hr.status.unwrap().wait.unwrap();
    assert_eq!(
        (wait.started_at, wait.deadline),
        (began.started_at.clone(), began.deadline.clone()),
        "the resumed wait keeps the window it began with"
    );
    assert_eq!(helm_history(ns, "web")[1].1, "pending-upgrade");

    // The pods become ready late: the resumed wait sees it, revision 2 is deployed.
    let _recovering = recover_pods(client, ns);
    wait_for(api, "web", "revision 2 deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    let shown: Vec<_> = helm_history(ns, "web")
        .iter()
        .map(|(r, s, d)| format!("{r} {s} {d}"))
        .collect();
    assert_eq!(
        shown,
        [
            "1 superseded Install complete",
            "2 deployed Upgrade complete"
        ],
        "no failed revision, none added"
    );
}

/// `wheelhouse_cause_retries_total{cause}`: retries started because `cause` cleared.
pub fn cause_retries(metrics: &wheelhouse::telemetry::Metrics, cause: &str) -> u64 {
    counted(
        metrics,
        &format!("wheelhouse_cause_retries_total{{cause=\"{cause}\"}}"),
    )
}

/// `wheelhouse_drift_checks_total` with `result` (compared, unchanged).
pub fn drift_checks(metrics: &wheelhouse::telemetry::Metrics, result: &str) -> u64 {
    counted(
        metrics,
        &format!("wheelhouse_drift_checks_total{{result=\"{result}\"}}"),
    )
}

/// `wheelhouse_unchanged_checks_total`: interval checks that read no history.
pub fn unchanged_checks(metrics: &wheelhouse::telemetry::Metrics) -> u64 {
    counted(metrics, "wheelhouse_unchanged_checks_total")
}

/// HelmRelease status writes the engine sent.
pub fn status_writes(metrics: &wheelhouse::telemetry::Metrics) -> u64 {
    counted(metrics, "wheelhouse_status_writes_total")
}

/// A counter's value by its series (name and labels as exposed), 0 when not yet counted.
fn counted(metrics: &wheelhouse::telemetry::Metrics, series: &str) -> u64 {
    let prefix = format!("{series} ");
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()).map(str::to_owned))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Starts an engine for `ns` under `identity` and waits until it leads; its metrics are
/// kept to read what it counted.
pub async fn start_with_metrics(
    client: &Client,
    ns: &str,
    identity: &str,
) -> (TestEngine, wheelhouse::telemetry::Metrics) {
    let (config, cache) = config(ns, identity);
    let metrics = config.metrics.clone();
    (start_leading(client, config, cache).await, metrics)
}

/// Starts a leading engine over `ns` only, for the HelmReleases labelled into the shard
/// named `ns`, so the cluster-wide engines other tests may run at the same time
/// (dashboards among them) leave them alone, and Flux's objects beside them are never
/// its concern.
pub async fn start_shard(client: &Client, ns: &str) -> TestEngine {
    let (mut config, cache) = self::config(ns, &format!("test-engine-{ns}"));
    config.coverage =
        wheelhouse::engine::Coverage::new(Scope::Namespace(ns.into()), Some(ns.into()));
    start_leading(client, config, cache).await
}

/// Starts an engine with `config` (its chart cache in `cache`) and waits until it leads.
pub async fn start_leading(
    client: &Client,
    config: EngineConfig,
    cache: tempfile::TempDir,
) -> TestEngine {
    let handle = engine::start(client.clone(), config).expect("engine starts");
    let mut role = handle.role();
    tokio::time::timeout(PATIENCE, role.wait_for(|r| *r == Role::Leader))
        .await
        .expect("engine took the lease")
        .unwrap();
    TestEngine {
        handle,
        _cache: cache,
    }
}

pub fn chart(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/charts")
        .join(name)
        .display()
        .to_string()
}

/// A HelmRelease of the webapp test chart with extra spec fields merged in.
pub fn webapp(name: &str, spec: serde_json::Value) -> HelmRelease {
    release(name, "webapp", spec)
}

/// A HelmRelease of the test chart `chart_name` (30 s timeout) with `spec` merged in.
pub fn release(name: &str, chart_name: &str, spec: serde_json::Value) -> HelmRelease {
    let mut value = serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "metadata": {"name": name},
        "spec": {"chart": {"path": chart(chart_name)}, "timeout": "30s"},
    });
    merge(&mut value["spec"], spec);
    serde_json::from_value(value).unwrap()
}

pub fn merge_into(base: &mut serde_json::Value, overlay: serde_json::Value) {
    merge(base, overlay);
}

fn merge(base: &mut serde_json::Value, overlay: serde_json::Value) {
    match (base, overlay) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (b, o) => *b = o,
    }
}

/// Waits until the release's running wait says `ready` of `total` objects are ready
/// (`status.wait`): the sign that it has judged each of them.
pub async fn waiting_with_ready(
    api: &Api<HelmRelease>,
    name: &str,
    ready: i32,
    total: i32,
) -> HelmRelease {
    wait_for(
        api,
        name,
        &format!("waiting with {ready} of {total} ready"),
        |h| {
            h.status
                .as_ref()
                .and_then(|s| s.wait.as_ref())
                .is_some_and(|w| w.ready == ready && w.total == total)
        },
    )
    .await
}

/// Waits until `pred` holds for the HelmRelease; the message says what we waited for
/// and shows the last status seen.
pub async fn wait_for(
    api: &Api<HelmRelease>,
    name: &str,
    what: &str,
    pred: impl Fn(&HelmRelease) -> bool,
) -> HelmRelease {
    let cond = |o: Option<&HelmRelease>| o.is_some_and(&pred);
    match tokio::time::timeout(PATIENCE, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(hr))) => hr,
        _ => {
            let last = api.get_opt(name).await.ok().flatten();
            let events = namespace_events(api).await;
            panic!(
                "{name}: gave up waiting for {what}; last status: {:#?}\nevents in the namespace:\n{events}",
                last.and_then(|h| h.status)
            );
        }
    }
}

/// Every Event of the HelmRelease's namespace, one per line and oldest first, so a
/// failure that depends on what else happened there (a pod deleted by the control
/// plane, an eviction) says so.
async fn namespace_events(api: &Api<HelmRelease>) -> String {
    let Some(ns) = api.namespace() else {
        return String::new();
    };
    let client = super::client().await;
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client, ns)
        .list(&kube::api::ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut lines: Vec<(String, String)> = events
        .into_iter()
        .map(|e| {
            let when = e
                .event_time
                .map(|t| t.0.to_string())
                .or(e.last_timestamp.map(|t| t.0.to_string()))
                .unwrap_or_default();
            let what = format!(
                "{when} {}/{} {} {} (by {}): {}",
                e.involved_object.kind.unwrap_or_default(),
                e.involved_object.name.unwrap_or_default(),
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.reporting_component
                    .or(e.source.and_then(|s| s.component))
                    .unwrap_or_default(),
                e.message.unwrap_or_default(),
            );
            (when, what)
        })
        .collect();
    lines.sort();
    lines.into_iter().map(|(_, l)| l + "\n").collect()
}

/// (status, reason) of a condition.
pub fn condition(hr: &HelmRelease, type_: &str) -> Option<(String, String)> {
    hr.condition(type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Ready after an upgrade to revision `revision` (the newest in the status's history).
#[allow(dead_code)]
pub fn upgraded_to(hr: &HelmRelease, revision: i32) -> bool {
    is(hr, "Ready", "True", "UpgradeSucceeded")
        && hr
            .status
            .as_ref()
            .and_then(|s| s.history.first())
            .is_some_and(|s| s.version == revision)
}

pub fn is(hr: &HelmRelease, type_: &str, status: &str, reason: &str) -> bool {
    condition(hr, type_) == Some((status.into(), reason.into()))
}

fn run_helm(ns: &str, args: &[&str]) -> std::process::Output {
    run_helm_on(&kubeconfig_path(), ns, args)
}

fn run_helm_on(kubeconfig: &std::path::Path, ns: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(testbin().join("helm"))
        .args(args)
        .args(["--namespace", ns, "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .expect("run helm")
}

/// `helm history -o json` as (revision, status, description), on the cluster of
/// `kubeconfig` (the remote one of the spec.kubeConfig tests).
#[allow(dead_code)]
pub fn helm_history_on(
    kubeconfig: &std::path::Path,
    ns: &str,
    release: &str,
) -> Vec<(i64, String, String)> {
    let out = run_helm_on(kubeconfig, ns, &["history", release, "-o", "json"]);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("release: not found"),
            "helm history failed: {stderr}"
        );
        return Vec::new();
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    history_lines(json.as_array().unwrap())
}

/// `helm history -o json`'s entries as (revision, status, description).
fn history_lines(entries: &[serde_json::Value]) -> Vec<(i64, String, String)> {
    history_with(entries, "description")
}

/// `helm history -o json`'s entries as (revision, status, `field`).
fn history_with(entries: &[serde_json::Value], field: &str) -> Vec<(i64, String, String)> {
    entries
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap(),
                r["status"].as_str().unwrap().to_owned(),
                r[field].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// `helm history` of `release` as (revision, status, chart), as the helm CLI lists it.
pub fn helm_history_charts(ns: &str, release: &str) -> Vec<(i64, String, String)> {
    history_with(&helm_history_json(ns, release), "chart")
}

/// Runs the real helm CLI against the test cluster and returns stdout.
pub fn helm(ns: &str, args: &[&str]) -> String {
    let out = run_helm(ns, args);
    assert!(
        out.status.success(),
        "helm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs the real helm CLI, which may fail: (success, stdout and stderr).
pub fn helm_try(ns: &str, args: &[&str]) -> (bool, String) {
    let out = run_helm(ns, args);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `helm history -o json`, one JSON object per revision.
pub fn helm_history_json(ns: &str, release: &str) -> Vec<serde_json::Value> {
    let json: serde_json::Value =
        serde_json::from_str(&helm(ns, &["history", release, "-o", "json"])).unwrap();
    json.as_array().unwrap().clone()
}

/// `helm history -o json` as (revision, status, description).
pub fn helm_history(ns: &str, release: &str) -> Vec<(i64, String, String)> {
    history_lines(&helm_history_json(ns, release))
}

/// The `wheelhouse.dev/config-hash` of a Deployment's pod template.
pub async fn config_hash(
    deployments: &Api<k8s_openapi::api::apps::v1::Deployment>,
    name: &str,
) -> Option<String> {
    deployments
        .get(name)
        .await
        .unwrap()
        .spec?
        .template
        .metadata?
        .annotations?
        .remove("wheelhouse.dev/config-hash")
}

/// Deletes the HelmRelease, waits until its finalizer let it go, and checks that Helm's
/// storage holds nothing of the release any more.
pub async fn delete_and_await_uninstall(client: &Client, ns: &str, name: &str) {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{DeleteParams, ListParams};
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), ns);
    api.delete(name, &DeleteParams::default()).await.unwrap();
    let gone = |o: Option<&HelmRelease>| o.is_none();
    tokio::time::timeout(PATIENCE, await_condition(api, name, gone))
        .await
        .unwrap_or_else(|_| panic!("{name}: HelmRelease not deleted after uninstall"))
        .unwrap();
    let left = Api::<Secret>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "{name}: Helm storage left behind");
}

/// Merge-patches the HelmRelease's `spec.values`.
pub async fn set_values(api: &Api<HelmRelease>, name: &str, values: serde_json::Value) {
    use kube::api::{Patch, PatchParams};
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"values": values}})),
    )
    .await
    .unwrap();
}

/// Creates the webapp HelmRelease `name` with `spec` merged in and waits until it is
/// installed and Ready.
pub async fn install_webapp(api: &Api<HelmRelease>, name: &str, spec: serde_json::Value) {
    api.create(&kube::api::PostParams::default(), &webapp(name, spec))
        .await
        .unwrap();
    wait_for(api, name, "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
}

/// Waits until the engine's health-check wait runs on `revision`.
pub async fn waiting_on(api: &Api<HelmRelease>, name: &str, revision: i32) -> HelmRelease {
    wait_for(api, name, &format!("waiting on revision {revision}"), |h| {
        h.status
            .as_ref()
            .and_then(|s| s.wait.as_ref())
            .is_some_and(|w| w.revision == revision)
    })
    .await
}

/// From now on, pods in `ns` that a test behaviour holds back (never-ready, crash-loop)
/// recover, by losing their behaviour label (tests/cluster/kwok-stages.yaml): pods that
/// become ready late, with the release's desired state unchanged. Pods a rollout creates
/// later recover too, until the returned guard is dropped.
pub fn recover_pods(client: &Client, ns: &str) -> Recovering {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ListParams, Patch, PatchParams};
    const BEHAVIOR: &str = "wheelhouse.dev/test-behavior";
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let unlabel = serde_json::json!({"metadata": {"labels": {BEHAVIOR: null}}});
    Recovering(tokio::spawn(async move {
        loop {
            if let Ok(held) = pods.list(&ListParams::default().labels(BEHAVIOR)).await {
                for pod in held {
                    let name = pod.metadata.name.unwrap_or_default();
                    let _ = pods
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&unlabel))
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }))
}

/// Stops pods recovering when dropped (see [`recover_pods`]).
pub struct Recovering(tokio::task::JoinHandle<()>);

impl Drop for Recovering {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Events recorded about the HelmRelease `name`, as "Reason: note".
pub async fn events_of(client: &Client, ns: &str, name: &str) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events: Vec<String> = events_about(client, ns, name)
            .await
            .into_iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default()
                )
            })
            .collect();
        // The recorder publishes asynchronously; give it a moment to land.
        if !events.is_empty() || tokio::time::Instant::now() >= deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Events about the HelmRelease `name` once one of them satisfies `pred` (the recorder
/// publishes after the status write a test waits for); all of them after 10 s if none does.
pub async fn event_matching(
    client: &Client,
    ns: &str,
    name: &str,
    pred: impl Fn(&str) -> bool,
) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events = events_of(client, ns, name).await;
        if events.iter().any(|e| pred(e)) || tokio::time::Instant::now() >= deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The Events (events.k8s.io) about the object `name` in `ns`, as they are now.
pub async fn events_about(
    client: &Client,
    ns: &str,
    name: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), ns)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// A client, the CRD, a fresh namespace and the HelmReleases API in it.
pub async fn setup(prefix: &str) -> (Client, super::TestNamespace, Api<HelmRelease>) {
    let client = super::client().await;
    super::install_crd(&client).await;
    let ns = super::TestNamespace::new(&client, prefix).await;
    let api = Api::namespaced(client.clone(), &ns.name);
    (client, ns, api)
}

/// Sets one annotation on the HelmRelease (a `requestedAt`/`resetAt` token, say).
pub async fn annotate(api: &Api<HelmRelease>, name: &str, key: &str, value: &str) {
    use kube::api::{Patch, PatchParams};
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {key: value}}})),
    )
    .await
    .unwrap();
}

/// Polls the HelmRelease every 10 ms until `pred` holds (benchmarks: a watch would add its
/// own delay to the figure), failing after `limit`.
pub async fn poll_hr(
    api: &Api<HelmRelease>,
    name: &str,
    what: &str,
    limit: Duration,
    pred: impl Fn(&HelmRelease) -> bool,
) {
    let limit = std::time::Instant::now() + limit;
    loop {
        if let Some(hr) = api.get_opt(name).await.unwrap()
            && pred(&hr)
        {
            return;
        }
        assert!(
            std::time::Instant::now() < limit,
            "{name}: timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the engine's config tracker has handled Deployment `ns/name` as the API
/// server has it now and has no decision about it left: the positive sign that no rollout
/// is coming from what happened so far, before a test asserts that none came.
pub async fn tracker_caught_up(engine: &TestEngine, client: &Client, ns: &str, name: &str) {
    use wheelhouse::tracking::{WorkloadKind, WorkloadRef};
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), ns);
    let key = WorkloadRef {
        kind: WorkloadKind::Deployment,
        namespace: ns.to_owned(),
        name: name.to_owned(),
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let version = deployments
            .get(name)
            .await
            .unwrap()
            .metadata
            .resource_version;
        let tracker = engine.handle.tracker();
        if let (Some(tracker), Some(version)) = (tracker, version)
            && tracker.caught_up(&key, &version)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the engine's tracker to catch up with {key}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
