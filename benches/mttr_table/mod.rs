//! The MTTR table (issue #32): a fix carried by the spec, by a valuesFrom ConfigMap, by a
//! new OCI chart version or by a new Git commit, for a release waiting on a stuck rollout
//! and for one whose upgrade failed (stalled), idle or while 1,000 releases upgrade at
//! once. Timed from the trigger (the patch accepted by the API server; `helm push` or
//! `git push` returned) to the fix's Deployment written (seen by a watch) and to Ready.
//! Pushes reach the engine as senders make them: the registry's own notifications, a
//! GitHub-format push webhook signed with the receiver's token. Flux runs beside it for
//! the spec and OCI rows, on the same cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::sync::oneshot;
use wheelhouse::api::HelmRelease;
use wheelhouse::api::flux::FluxHelmRelease;

use crate::support::engine::{self as eng, is, webapp};
use crate::support::figures::fmt;
use crate::support::git::{GitServer, Repo};
use crate::support::oci::{NotifyingRegistry, Pusher, registries};
use crate::support::{TestNamespace, flux, hooks};

const BEHAVIOR_LABEL: &str = "wheelhouse.dev/test-behavior";
/// Routine upgrades still in line below which a new burst starts.
const BURST_FLOOR: usize = 300;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Carrier {
    Spec,
    ValuesFrom,
    Oci,
    Git,
}

impl Carrier {
    pub const ALL: [Carrier; 4] = [Self::Spec, Self::ValuesFrom, Self::Oci, Self::Git];

    fn label(self) -> &'static str {
        match self {
            Self::Spec => "spec",
            Self::ValuesFrom => "valuesFrom ConfigMap",
            Self::Oci => "new OCI chart version",
            Self::Git => "new Git commit",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Spec => "spec",
            Self::ValuesFrom => "vals",
            Self::Oci => "oci",
            Self::Git => "git",
        }
    }

    /// Targets (p50, p99) to the fix's object: a registry or Git round trip is allowed 1 s.
    fn targets(self) -> (Duration, Duration) {
        match self {
            Self::Oci | Self::Git => (Duration::from_secs(1), Duration::from_secs(1)),
            _ => (Duration::from_millis(100), Duration::from_millis(250)),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Broken {
    /// Waiting on pods that never become ready (timeout 5m).
    Waiting,
    /// Its upgrade failed (crash-looping pods) and, with default remediation, stalled.
    Failed,
}

impl Broken {
    pub const ALL: [Broken; 2] = [Self::Waiting, Self::Failed];

    fn behavior(self) -> &'static str {
        match self {
            Self::Waiting => "never-ready",
            Self::Failed => "crash-loop",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Waiting => "w",
            Self::Failed => "f",
        }
    }
}

/// One row's samples.
pub struct Row {
    pub carrier: Carrier,
    pub broken: Broken,
    pub load: String,
    pub engine: &'static str,
    /// wheelhouse's: from the fix's event reaching the engine (spec, valuesFrom) or the
    /// push (OCI, Git) to its first object written, as the engine timed it.
    pub to_first: Vec<Option<Duration>>,
    /// The same to the fix's apply started (revision stored): what comes before the
    /// apply's own writes.
    pub to_apply: Vec<Option<Duration>>,
    /// The engine's steps, each from the one before: prepared, rendered, apply started,
    /// first object written (wheelhouse only; none when the engine recorded no fix).
    pub stages: Vec<Option<[Duration; 4]>>,
    /// None: not within [`BOUND`] of the trigger.
    pub to_object: Vec<Option<Duration>>,
    pub to_ready: Vec<Option<Duration>>,
}

/// How long a sample is waited for before it counts as never.
const BOUND: Duration = Duration::from_secs(120);

/// Nearest-rank percentile; a sample that never came ranks above every other.
fn percentile(samples: &[Option<Duration>], p: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by_key(|d| d.unwrap_or(Duration::MAX));
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1]
}

fn show(d: Option<Duration>) -> String {
    d.map_or_else(|| format!("never (> {})", fmt(BOUND)), fmt)
}

pub fn print(rows: &[Row]) {
    println!(
        "| fix carried by | release | load | engine | n | event or push -> first object p50 | p99 | of which before the apply p50 | trigger -> fixed Deployment seen p50 | p99 | trigger -> Ready p50 | p99 | target (first object p50/p99) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let (p50, p99) = (percentile(&r.to_first, 50.0), percentile(&r.to_first, 99.0));
        let (t50, t99) = r.carrier.targets();
        let within = |d: Option<Duration>, t: Duration| d.is_some_and(|d| d < t);
        let verdict = if r.to_first.is_empty() {
            "-".to_owned()
        } else if within(p50, t50) && within(p99, t99) {
            format!("PASS (< {} / < {})", fmt(t50), fmt(t99))
        } else {
            format!("MISS (< {} / < {})", fmt(t50), fmt(t99))
        };
        let first = |d: Option<Duration>| {
            if r.to_first.is_empty() {
                "-".to_owned()
            } else {
                show(d)
            }
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.carrier.label(),
            match r.broken {
                Broken::Waiting => "waiting",
                Broken::Failed => "failed",
            },
            r.load,
            r.engine,
            r.to_object.len(),
            first(p50),
            first(p99),
            if r.to_apply.is_empty() {
                "-".to_owned()
            } else {
                show(percentile(&r.to_apply, 50.0))
            },
            show(percentile(&r.to_object, 50.0)),
            show(percentile(&r.to_object, 99.0)),
            show(percentile(&r.to_ready, 50.0)),
            show(percentile(&r.to_ready, 99.0)),
            verdict
        );
    }
}

/// Where each row's time goes before its first object, p50 of each step of the engine's
/// own timeline (from the one before it).
pub fn print_stages(rows: &[Row]) {
    println!();
    println!(
        "| fix carried by | release | load | prepared (chart, values) p50 | rendered p50 | apply started (wait ended, revision stored) p50 | first object written p50 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows.iter().filter(|r| r.engine == "wheelhouse") {
        let step = |i: usize| {
            let samples: Vec<_> = r.stages.iter().map(|s| s.map(|s| s[i])).collect();
            show(percentile(&samples, 50.0))
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.carrier.label(),
            match r.broken {
                Broken::Waiting => "waiting",
                Broken::Failed => "failed",
            },
            r.load,
            step(0),
            step(1),
            step(2),
            step(3)
        );
    }
}

/// Prints, per carrier and broken state present for both engines, Flux's p50 over ours.
pub fn print_ratios(rows: &[Row]) {
    for flux_row in rows.iter().filter(|r| r.engine != "wheelhouse") {
        let Some(ours) = rows.iter().find(|r| {
            r.engine == "wheelhouse"
                && r.carrier == flux_row.carrier
                && r.broken == flux_row.broken
                && r.load == flux_row.load
        }) else {
            continue;
        };
        let ratio = |f: &[Option<Duration>], o: &[Option<Duration>]| match (
            percentile(f, 50.0),
            percentile(o, 50.0),
        ) {
            (Some(f), Some(o)) => format!("{:.0}x", f.as_secs_f64() / o.as_secs_f64()),
            (None, Some(_)) => "beyond measure (Flux never, within the bound)".to_owned(),
            _ => "-".to_owned(),
        };
        println!(
            "  {} / {:?}: Flux over wheelhouse (p50): to the fixed Deployment {}, to Ready {}",
            flux_row.carrier.label(),
            flux_row.broken,
            ratio(&flux_row.to_object, &ours.to_object),
            ratio(&flux_row.to_ready, &ours.to_ready)
        );
    }
}

// --- watches ------------------------------------------------------------------------------

type Awaited = Arc<Mutex<HashMap<String, oneshot::Sender<Instant>>>>;

/// Watches one kind in one namespace and tells whoever awaits an object's name the moment
/// an event shows it as `done` says. Started before anything is measured; returns once its
/// initial list is in.
struct Watch {
    awaited: Awaited,
}

impl Watch {
    async fn start<K>(api: Api<K>, done: fn(&K) -> bool) -> Self
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    {
        let awaited: Awaited = Arc::default();
        let (ready_tx, ready_rx) = oneshot::channel();
        let task_awaited = awaited.clone();
        tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let now = Instant::now();
                let object = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                if done(&object) {
                    let waiter = task_awaited.lock().unwrap().remove(&object.name_any());
                    if let Some(tx) = waiter {
                        let _ = tx.send(now);
                    }
                }
            }
        });
        ready_rx.await.expect("the watch lists");
        Self { awaited }
    }

    /// From now on, the first event showing `name` done.
    fn next_done(&self, name: &str) -> oneshot::Receiver<Instant> {
        let (tx, rx) = oneshot::channel();
        self.awaited.lock().unwrap().insert(name.to_owned(), tx);
        rx
    }
}

/// A Deployment whose pods carry no broken behavior: the fix written.
fn fixed(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.as_ref())
        .is_none_or(|l| !l.contains_key(BEHAVIOR_LABEL))
}

fn ready_condition(o: &DynamicObject) -> bool {
    o.data["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The two watches one namespace's samples are timed by.
struct Watches {
    deployments: Watch,
    releases: Watch,
}

impl Watches {
    async fn start(client: &Client, ns: &str, kind: &ApiResource) -> Self {
        Self {
            deployments: Watch::start(Api::<Deployment>::namespaced(client.clone(), ns), fixed)
                .await,
            releases: Watch::start(
                Api::<DynamicObject>::namespaced_with(client.clone(), ns, kind),
                ready_condition,
            )
            .await,
        }
    }

    /// Times `trigger` (which returns the moment it took effect) to `name`'s fixed
    /// Deployment, and hands back the wait for its release Ready (a task: under load the
    /// next fix need not wait for this one's pods).
    async fn time<F: std::future::Future<Output = Instant>>(
        &self,
        name: &str,
        trigger: F,
    ) -> (
        Instant,
        Option<Duration>,
        tokio::task::JoinHandle<Option<Duration>>,
    ) {
        let object = self.deployments.next_done(name);
        let ready = self.releases.next_done(name);
        let at = trigger.await;
        let until = tokio::time::Instant::from_std(at + BOUND);
        let object = tokio::time::timeout_at(until, object)
            .await
            .ok()
            .map(Result::unwrap);
        if object.is_none() {
            println!(
                "  {name}: no fixed Deployment within {} of its fix",
                fmt(BOUND)
            );
        }
        let name = name.to_owned();
        let ready = tokio::spawn(async move {
            let ready = tokio::time::timeout_at(until, ready)
                .await
                .ok()
                .map(Result::unwrap);
            if ready.is_none() {
                println!("  {name}: not Ready within {} of its fix", fmt(BOUND));
            }
            ready.map(|t| t.saturating_duration_since(at))
        });
        (at, object.map(|t| t.saturating_duration_since(at)), ready)
    }
}

// --- wheelhouse -----------------------------------------------------------------------------

/// What wheelhouse's cases share: the engine's namespace, its receivers, a registry that
/// notifies them, the Git server.
struct Ours {
    api: Api<HelmRelease>,
    configmaps: Api<ConfigMap>,
    registry: NotifyingRegistry,
    pusher: Pusher,
    git: GitServer,
    receiver_port: u16,
    github_path: String,
    github_token: String,
}

struct Case {
    carrier: Carrier,
    broken: Broken,
    name: String,
    repo: Option<Repo>,
}

impl Ours {
    fn oci_path(name: &str) -> String {
        format!("table/{name}")
    }

    async fn create(&self, case: &mut Case) {
        let mut spec = serde_json::json!({"timeout": "5m", "values": {"replicaCount": 1}});
        let hr = match case.carrier {
            Carrier::Spec => webapp(&case.name, spec),
            Carrier::ValuesFrom => {
                self.set_values_source(&case.name, "note: none").await;
                spec["valuesFrom"] = serde_json::json!([{"kind": "ConfigMap", "name": format!("{}-values", case.name)}]);
                webapp(&case.name, spec)
            }
            Carrier::Oci => {
                let path = Self::oci_path(&case.name);
                self.pusher
                    .push(&self.registry.address, &path, "1.0.0", "", None);
                spec["chart"] = serde_json::json!({
                    "repository": format!("oci://{}/{path}", self.registry.address),
                    "name": "webapp", "version": "1.x"});
                release(&case.name, spec)
            }
            Carrier::Git => {
                let repo = Repo::new(&self.git, &case.name);
                repo.commit_chart("main", "deploy/web", "1.0.0", "", "one");
                spec["chart"] = serde_json::json!({"git": {
                    "url": format!("{}/{}", self.git.http, repo.name),
                    "ref": {"branch": "main"}, "path": "deploy/web"}});
                case.repo = Some(repo);
                release(&case.name, spec)
            }
        };
        self.api.create(&PostParams::default(), &hr).await.unwrap();
    }

    async fn set_values_source(&self, name: &str, values: &str) {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{name}-values")},
            "data": {"values.yaml": values},
        }))
        .unwrap();
        self.configmaps
            .patch(
                &format!("{name}-values"),
                &PatchParams::apply("wheelhouse-bench").force(),
                &Patch::Apply(&cm),
            )
            .await
            .unwrap();
    }

    /// Carries `behavior` ("" fixes) to the release the way its carrier does; returns the
    /// moment the change took effect (API accepted, push returned).
    async fn carry(&self, case: &Case, behavior: &str, version: &str) -> Instant {
        match case.carrier {
            Carrier::Spec => {
                let value = if behavior.is_empty() {
                    serde_json::Value::Null
                } else {
                    behavior.into()
                };
                eng::set_values(
                    &self.api,
                    &case.name,
                    serde_json::json!({"behavior": value}),
                )
                .await;
                Instant::now()
            }
            Carrier::ValuesFrom => {
                self.set_values_source(&case.name, &format!("behavior: \"{behavior}\""))
                    .await;
                Instant::now()
            }
            Carrier::Oci => {
                let path = Self::oci_path(&case.name);
                self.pusher
                    .push(&self.registry.address, &path, version, behavior, None);
                Instant::now()
            }
            Carrier::Git => {
                let repo = case.repo.as_ref().unwrap();
                let commit = repo.commit_chart("main", "deploy/web", "1.0.0", behavior, version);
                let at = Instant::now();
                // As GitHub would: a signed push event right after the push.
                let body = format!(
                    r#"{{"ref": "refs/heads/main", "after": "{commit}", "repository": {{"clone_url": "{}/{}"}}}}"#,
                    self.git.http, repo.name
                );
                let sig = hooks::github_signature(&self.github_token, body.as_bytes());
                let status = hooks::post_async(
                    self.receiver_port,
                    &self.github_path,
                    &[("X-GitHub-Event", "push"), ("X-Hub-Signature-256", &sig)],
                    body.as_bytes(),
                )
                .await;
                assert_eq!(status, 200, "the receiver took the push");
                at
            }
        }
    }

    async fn wait_broken(&self, case: &Case) {
        let what = format!("{} {:?}", case.name, case.broken);
        eng::poll_hr(
            &self.api,
            &case.name,
            &what,
            Duration::from_secs(180),
            |h| match case.broken {
                Broken::Waiting => h
                    .status
                    .as_ref()
                    .and_then(|s| s.wait.as_ref())
                    .is_some_and(|w| w.revision >= 2),
                Broken::Failed => h.condition("Stalled").is_some_and(|c| c.status == "True"),
            },
        )
        .await;
    }
}

fn release(name: &str, spec: serde_json::Value) -> HelmRelease {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// Creates `n` routine releases, waits for them Ready; returns their names.
async fn fleet(api: &Api<HelmRelease>, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("bulk-{i:04}")).collect();
    futures::stream::iter(names.iter().map(|name| {
        let hr = webapp(
            name,
            serde_json::json!({"timeout": "5m", "values": {"replicaCount": 1}}),
        );
        async move { api.create(&PostParams::default(), &hr).await.map(drop) }
    }))
    .buffer_unordered(32)
    .try_collect::<Vec<()>>()
    .await
    .expect("create the fleet");
    let started = Instant::now();
    loop {
        let ready = in_line(api).await;
        if ready.1 == n {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1200),
            "only {} of {n} routine releases Ready after 20 minutes",
            ready.1
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    println!("{n} routine releases Ready in {}", fmt(started.elapsed()));
    names
}

/// Of the routine releases: how many are not yet done with their newest spec, and how
/// many are.
async fn in_line(api: &Api<HelmRelease>) -> (usize, usize) {
    let list = api.list(&kube::api::ListParams::default()).await.unwrap();
    let bulk = list
        .items
        .iter()
        .filter(|h| h.name_any().starts_with("bulk-"));
    let done = |h: &HelmRelease| {
        h.condition("Ready")
            .is_some_and(|c| c.status == "True" && c.observed_generation == h.metadata.generation)
    };
    let (mut pending, mut ready) = (0, 0);
    for h in bulk {
        if done(h) {
            ready += 1;
        } else {
            pending += 1;
        }
    }
    (pending, ready)
}

/// A mass upgrade: every routine release gets new values at once (32 requests in flight).
async fn burst(api: &Api<HelmRelease>, names: &[String], round: usize) {
    futures::stream::iter(names.iter().map(|name| async move {
        eng::set_values(
            api,
            name,
            serde_json::json!({"message": format!("burst-{round}")}),
        )
        .await;
    }))
    .buffer_unordered(32)
    .collect::<Vec<()>>()
    .await;
}

/// wheelhouse's rows: every carrier for a waiting and a failed release, `runs` each;
/// with `busy`, while 1,000 routine releases upgrade at once.
pub async fn ours(client: &Client, runs: usize, busy: Option<usize>) -> Vec<Row> {
    let ns = TestNamespace::new(
        client,
        if busy.is_some() {
            "mttr-busy"
        } else {
            "mttr-table"
        },
    )
    .await;
    let github_token = format!("gh-{:08x}", crate::support::rand_u32());
    let registry_token = format!("reg-{:08x}", crate::support::rand_u32());
    let github_path = hooks::receiver(client, &ns.name, "github", "github", &github_token).await;
    let registry_path =
        hooks::receiver(client, &ns.name, "registry", "registry", &registry_token).await;
    let receiver_port = crate::support::free_port();
    let registry = NotifyingRegistry::start(
        &format!("http://127.0.0.1:{receiver_port}{registry_path}"),
        &registry_token,
    );
    let (mut config, _cache) = eng::config(&ns.name, "mttr-table");
    // The engine's own default: a waiting or failed release looks at its source every 15 s,
    // so what is measured here is the push.
    config.chart_poll = Duration::from_secs(15);
    let metrics = config.metrics.clone();
    let handle = wheelhouse::engine::start(client.clone(), config).unwrap();
    handle
        .role()
        .wait_for(|r| *r == wheelhouse::engine::Role::Leader)
        .await
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    wheelhouse::webhooks::receive::serve(
        ([127, 0, 0, 1], receiver_port).into(),
        client.clone(),
        ns.name.clone(),
        std::sync::Arc::new(handle.pusher()),
        metrics,
        stop.clone(),
    )
    .await
    .unwrap();
    let ours = Ours {
        api: Api::namespaced(client.clone(), &ns.name),
        configmaps: Api::namespaced(client.clone(), &ns.name),
        registry,
        pusher: Pusher::new(),
        git: crate::support::git::server(),
        receiver_port,
        github_path,
        github_token,
    };
    // The receivers answer (a signed ping) before anything is pushed.
    let started = Instant::now();
    loop {
        let sig = hooks::github_signature(&ours.github_token, b"{}");
        let status = hooks::post_async(
            receiver_port,
            &ours.github_path,
            &[("X-GitHub-Event", "ping"), ("X-Hub-Signature-256", &sig)],
            b"{}",
        )
        .await;
        if status == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "receivers never answered: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let fleet_names = match busy {
        Some(n) => fleet(&ours.api, n).await,
        None => Vec::new(),
    };
    let mut cases = Vec::new();
    for carrier in Carrier::ALL {
        for broken in Broken::ALL {
            for i in 0..runs {
                cases.push(Case {
                    carrier,
                    broken,
                    name: format!("{}-{}-{i}", carrier.short(), broken.short()),
                    repo: None,
                });
            }
        }
    }
    for case in &mut cases {
        ours.create(case).await;
    }
    for case in &cases {
        eng::poll_hr(
            &ours.api,
            &case.name,
            "installed",
            Duration::from_secs(300),
            |h| is(h, "Ready", "True", "InstallSucceeded"),
        )
        .await;
    }
    for case in &cases {
        ours.carry(case, case.broken.behavior(), "1.1.0").await;
        if case.carrier == Carrier::ValuesFrom {
            // An idle release reads its valuesFrom data at its interval; ask now.
            eng::annotate(
                &ours.api,
                &case.name,
                "reconcile.wheelhouse.dev/requestedAt",
                "break",
            )
            .await;
        }
    }
    for case in &cases {
        ours.wait_broken(case).await;
    }
    let kind = ApiResource::erase::<HelmRelease>(&());
    let watches = Watches::start(client, &ns.name, &kind).await;
    let load = match busy {
        Some(n) => format!("{n} upgrading"),
        None => "idle".to_owned(),
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut later = Vec::new();
    let mut round = 0;
    let mut line = Vec::new();
    for case in &cases {
        if busy.is_some() {
            let (pending, _) = in_line(&ours.api).await;
            if pending < BURST_FLOOR {
                round += 1;
                burst(&ours.api, &fleet_names, round).await;
            }
            line.push(in_line(&ours.api).await.0);
        }
        let sent = Instant::now();
        let (at, to_object, ready) = watches
            .time(&case.name, ours.carry(case, "", "1.1.1"))
            .await;
        // Idle, one fix at a time; busy, the next fix goes while this one's pods come up
        // (the burst's pods crowd the node), its Ready collected at the end.
        let ready = if busy.is_some() {
            Err(ready)
        } else {
            Ok(ready.await.unwrap())
        };
        let key = wheelhouse::engine::ReleaseKey {
            namespace: ns.name.clone(),
            name: case.name.clone(),
        };
        // The engine records the fix's first object once its whole apply returns, which
        // under load can be after the fixed Deployment is seen here: wait for the record.
        let recorded = |m: &wheelhouse::engine::LiveMap| {
            m.get(&key)
                .and_then(|s| s.fix)
                .filter(|f| f.triggered >= sent && f.first_written.is_some())
        };
        let mut live = handle.live();
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            live.wait_for(|m| recorded(m).is_some()),
        )
        .await;
        let fix = live
            .borrow()
            .get(&key)
            .and_then(|s| s.fix)
            .filter(|f| f.triggered >= sent);
        let from = |f: &wheelhouse::engine::FixTimeline| match case.carrier {
            Carrier::Spec | Carrier::ValuesFrom => f.triggered,
            Carrier::Oci | Carrier::Git => at,
        };
        let to_first = fix.and_then(|f| Some(f.first_written?.saturating_duration_since(from(&f))));
        let to_apply = fix.and_then(|f| Some(f.apply_started?.saturating_duration_since(from(&f))));
        let stages = fix.and_then(|f| {
            let applied = f.apply_started?;
            Some([
                f.prepared.saturating_duration_since(f.triggered),
                f.rendered.saturating_duration_since(f.prepared),
                applied.saturating_duration_since(f.rendered),
                f.first_written?.saturating_duration_since(applied),
            ])
        });
        match rows
            .iter_mut()
            .find(|r| r.carrier == case.carrier && r.broken == case.broken)
        {
            Some(row) => {
                row.to_first.push(to_first);
                row.to_apply.push(to_apply);
                row.stages.push(stages);
                row.to_object.push(to_object);
            }
            None => rows.push(Row {
                carrier: case.carrier,
                broken: case.broken,
                load: load.clone(),
                engine: "wheelhouse",
                to_first: vec![to_first],
                to_apply: vec![to_apply],
                stages: vec![stages],
                to_object: vec![to_object],
                to_ready: Vec::new(),
            }),
        }
        let row = rows
            .iter()
            .position(|r| r.carrier == case.carrier && r.broken == case.broken)
            .unwrap();
        match ready {
            Ok(d) => rows[row].to_ready.push(d),
            Err(handle) => later.push((row, handle)),
        }
    }
    for (row, handle) in later {
        rows[row].to_ready.push(handle.await.unwrap());
    }
    if !line.is_empty() {
        line.sort();
        println!(
            "routine upgrades still in line as each fix was pushed: median {}, min {}, max {} ({} bursts)",
            line[line.len() / 2],
            line[0],
            line[line.len() - 1],
            round
        );
    }
    stop.cancel();
    handle.shutdown();
    ns.delete().await;
    rows
}

// --- Flux -----------------------------------------------------------------------------------

/// Flux's rows (spec and OCI, waiting and failed), `runs` each, idle: helm-controller with
/// its CancelHealthCheckOnNewRevision gate, source-controller polling the chart every minute
/// (`flux create helmrelease`'s default interval).
pub async fn flux(client: &Client, runs: usize) -> Vec<Row> {
    flux::require_flux(client).await;
    let ns = TestNamespace::new(client, "mttr-flux").await;
    let chart = std::path::PathBuf::from(eng::chart("webapp"));
    let (_server, url) = flux::serve(&chart, "webapp", &["1.0.0"]).await;
    flux::helm_repository(client, &ns.name, "charts", &url).await;
    let registry = registries().plain;
    let pusher = Pusher::new();
    let kind = ApiResource::erase::<FluxHelmRelease>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &kind);
    let mut cases = Vec::new();
    for carrier in [Carrier::Spec, Carrier::Oci] {
        for broken in Broken::ALL {
            for i in 0..runs {
                let name = format!("{}-{}-{i}", carrier.short(), broken.short());
                // No fail-fast in Flux: its failure is the timeout's end.
                let timeout = match broken {
                    Broken::Waiting => "5m",
                    Broken::Failed => "15s",
                };
                let source = if carrier == Carrier::Oci {
                    let path = format!("flux-table/{}-{name}", ns.name);
                    pusher.push(&registry, &path, "1.0.0", "", None);
                    let repo: serde_json::Value = crate::support::from_yaml(&format!(
                        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\n\
                         metadata: {{name: {name}, namespace: {ns}}}\n\
                         spec: {{type: oci, insecure: true, url: \"oci://{registry}/{path}\", interval: 1m}}\n",
                        ns = ns.name
                    ));
                    let repos: Api<DynamicObject> = Api::namespaced_with(
                        client.clone(),
                        &ns.name,
                        &ApiResource::erase::<wheelhouse::api::flux::FluxHelmRepository>(&()),
                    );
                    repos
                        .create(
                            &PostParams::default(),
                            &serde_json::from_value(repo).unwrap(),
                        )
                        .await
                        .unwrap();
                    (name.clone(), path)
                } else {
                    ("charts".to_owned(), String::new())
                };
                flux::helm_release(
                    client,
                    &ns.name,
                    &name,
                    &format!(
                        "  interval: 1m\n  timeout: {timeout}\n  values: {{replicaCount: 1}}\n  \
                         chart: {{spec: {{chart: webapp, version: \"1.x\", sourceRef: {{kind: HelmRepository, name: {}}}}}}}\n",
                        source.0
                    ),
                )
                .await;
                cases.push((carrier, broken, name, source.1));
            }
        }
    }
    for (_, _, name, _) in &cases {
        flux::until(client, &ns.name, name, "installed", flux::ready).await;
    }
    let carry = |carrier: Carrier,
                 name: String,
                 path: String,
                 behavior: &'static str,
                 version: &'static str| {
        let api = api.clone();
        let (pusher, registry) = (&pusher, registry.clone());
        async move {
            if carrier == Carrier::Oci {
                pusher.push(&registry, &path, version, behavior, None);
            } else {
                let value = if behavior.is_empty() {
                    serde_json::Value::Null
                } else {
                    behavior.into()
                };
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"spec": {"values": {"behavior": value}}})),
                )
                .await
                .unwrap();
            }
            Instant::now()
        }
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let watches = Watches::start(client, &ns.name, &kind).await;
    let mut rows: Vec<Row> = Vec::new();
    // One case at a time: helm-controller runs 4 reconciles at once, and a release
    // waiting out a 5-minute timeout holds one of them.
    for (carrier, broken, name, path) in &cases {
        carry(
            *carrier,
            name.clone(),
            path.clone(),
            broken.behavior(),
            "1.1.0",
        )
        .await;
        // Broken: its Deployment carries the behavior, and Flux says it is waiting or
        // failed (stalled, with no retries left).
        let started = Instant::now();
        loop {
            let d = deployments.get_opt(name).await.unwrap();
            let hr = Api::<FluxHelmRelease>::namespaced(client.clone(), &ns.name)
                .get(name)
                .await
                .unwrap();
            let there = d.is_some_and(|d| !fixed(&d))
                && match broken {
                    Broken::Waiting => !flux::ready(&hr),
                    Broken::Failed => hr.condition("Stalled").is_some_and(|c| c.status == "True"),
                };
            if there {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "Flux HelmRelease {name} never {broken:?}: {:#?}",
                hr.status
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let (_, to_object, ready) = watches
            .time(
                name,
                carry(*carrier, name.clone(), path.clone(), "", "1.1.1"),
            )
            .await;
        let to_ready = ready.await.unwrap();
        match rows
            .iter_mut()
            .find(|r| r.carrier == *carrier && r.broken == *broken)
        {
            Some(row) => {
                row.to_object.push(to_object);
                row.to_ready.push(to_ready);
            }
            None => rows.push(Row {
                carrier: *carrier,
                broken: *broken,
                load: "idle".to_owned(),
                engine: "Flux",
                to_first: Vec::new(),
                to_apply: Vec::new(),
                stages: Vec::new(),
                to_object: vec![to_object],
                to_ready: vec![to_ready],
            }),
        }
    }
    ns.delete().await;
    rows
}
