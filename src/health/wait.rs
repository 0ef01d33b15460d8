//! The health-check wait after an action: watches every object of the release until all
//! are ready, one fails, the deadline passes, or the wait is cancelled. Only waits are
//! cancellable (DESIGN §4.6); the token is checked here and nowhere in apply or hooks.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll, select_all};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject};
use kube::core::Selector;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::failfast;
use super::readiness::{self, Readiness};

/// How a wait judges what it sees.
#[derive(Debug, Clone)]
pub struct WaitOptions {
    /// End at once when a pod of the release can no longer become ready.
    pub fail_fast: bool,
    /// How long an unschedulable pod may wait for capacity before that counts.
    pub unschedulable_grace: Duration,
    /// Pods created before this belong to earlier revisions and are not judged: during a
    /// recovery the broken old pods keep crash-looping until the fix is available.
    pub started_at: Timestamp,
    /// Checks stricter than Helm 4's `--wait`, opted into per release.
    pub strictness: readiness::Strictness,
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self {
            fail_fast: true,
            unschedulable_grace: Duration::from_secs(30),
            started_at: Timestamp::now(),
            strictness: readiness::Strictness::default(),
        }
    }
}

/// Workload kinds whose pods fail-fast looks at.
const WORKLOADS: [&str; 5] = [
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
];

/// One object the wait watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.resource.kind, ns, self.name),
            None => write!(f, "{}/{}", self.resource.kind, self.name),
        }
    }
}

/// Where the wait stands: how many objects are ready, and what each other one waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub ready: usize,
    pub total: usize,
    /// (object, what it waits for), for the objects not ready yet.
    pub pending: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ready,
    /// The deadline passed; the progress at that moment says what was missing.
    TimedOut(Progress),
    /// An object reached a state it cannot recover from by waiting.
    Failed {
        object: String,
        reason: String,
    },
    /// The token was cancelled (by a newer revision or an operator).
    Canceled,
}

/// Waits for every target to be ready. `on_progress` is called whenever the picture
/// changes, so front ends can show it live.
pub async fn wait(
    client: &Client,
    targets: &[Target],
    deadline: Instant,
    cancel: &CancellationToken,
    options: &WaitOptions,
    mut on_progress: impl FnMut(&Progress),
) -> Outcome {
    if targets.is_empty() {
        return Outcome::Ready;
    }
    // One watch per object, selected by name, so a change reaches us at once.
    let streams = targets.iter().enumerate().map(|(i, t)| {
        let api: Api<DynamicObject> = match &t.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
            None => Api::all_with(client.clone(), &t.resource),
        };
        let config = watcher::Config::default().fields(&format!("metadata.name={}", t.name));
        watcher(api, config).map(move |event| (i, event)).boxed()
    });
    let mut events = select_all(streams);
    // And, for fail-fast, one pod watch per workload, selected by the workload's own pod
    // selector once its first event shows it: a wait holds its own pods only, never a
    // whole namespace's (a thousand waits in one namespace would each hold them all).
    let mut pod_events: SelectAll<BoxStream<'static, watcher::Result<watcher::Event<Pod>>>> =
        SelectAll::new();
    let mut watching_pods: BTreeSet<usize> = BTreeSet::new();
    let mut selectors: BTreeMap<usize, serde_json::Value> = BTreeMap::new();
    let mut pods: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut states: BTreeMap<usize, Readiness> = (0..targets.len())
        .map(|i| {
            (
                i,
                Readiness::InProgress("waiting for the object to exist".into()),
            )
        })
        .collect();
    let mut last = None;

    loop {
        if let Some((pod, reason)) = failing_pod(targets, &selectors, &pods, options) {
            return Outcome::Failed {
                object: pod,
                reason,
            };
        }
        let progress = progress_of(targets, &states);
        if last.as_ref() != Some(&progress) {
            on_progress(&progress);
            last = Some(progress.clone());
        }
        if let Some((i, Readiness::Failed(reason))) = states
            .iter()
            .find(|(_, r)| matches!(r, Readiness::Failed(_)))
        {
            return Outcome::Failed {
                object: targets[*i].to_string(),
                reason: reason.clone(),
            };
        }
        if progress.ready == progress.total {
            return Outcome::Ready;
        }
        let has_pod_watches = !pod_events.is_empty();
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Outcome::Canceled,
            () = tokio::time::sleep_until(deadline) => return Outcome::TimedOut(progress),
            event = events.next() => match event {
                Some((i, Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)))) => {
                    states.insert(i, readiness_of(&targets[i], &obj, options.strictness));
                    if WORKLOADS.contains(&targets[i].resource.kind.as_str()) {
                        let selector = obj.data["spec"]["selector"].clone();
                        if options.fail_fast
                            && let Some(ns) = &targets[i].namespace
                            && watching_pods.insert(i)
                        {
                            pod_events.push(pod_watch(client, ns, &selector));
                        }
                        selectors.insert(i, selector);
                    }
                }
                Some((i, Ok(watcher::Event::Delete(_)))) => {
                    states.insert(i, Readiness::InProgress("the object was deleted".into()));
                }
                Some((_, Ok(watcher::Event::Init | watcher::Event::InitDone))) => {}
                // The watcher retries by itself; a transient API error only delays us.
                Some((i, Err(e))) => {
                    tracing::debug!(object = %targets[i], error = %e, "watch error during wait");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                None => return Outcome::TimedOut(progress),
            },
            event = pod_events.next(), if has_pod_watches => match event {
                Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => {
                    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
                    // A little slack for clock skew between us and the API server.
                    let slack = std::time::Duration::from_secs(2);
                    let labels = serde_json::to_value(&pod.metadata.labels).unwrap_or_default();
                    let ns = pod.metadata.namespace.as_deref();
                    // A namespace-wide fallback watch also sees other releases' pods.
                    let owned = selectors.iter().any(|(i, selector)| {
                        targets[*i].namespace.as_deref() == ns && failfast::selects(selector, &labels)
                    });
                    if owned && created.is_some_and(|c| c + slack >= options.started_at) {
                        let key = (pod.metadata.namespace.clone().unwrap_or_default(), pod.metadata.name.clone().unwrap_or_default());
                        pods.insert(key, serde_json::to_value(&pod).unwrap_or_default());
                    }
                }
                Some(Ok(watcher::Event::Delete(pod))) => {
                    pods.remove(&(pod.metadata.namespace.unwrap_or_default(), pod.metadata.name.unwrap_or_default()));
                }
                _ => {}
            },
            // Unschedulable pods fail only after a grace period: look again now and then.
            _ = tick.tick(), if has_pod_watches => {}
        }
    }
}

/// The pods of one workload: selected by its pod selector (or, for a selector the API
/// cannot express as a label selector, the whole namespace, filtered on arrival).
fn pod_watch(
    client: &Client,
    namespace: &str,
    selector: &serde_json::Value,
) -> BoxStream<'static, watcher::Result<watcher::Event<Pod>>> {
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let config = serde_json::from_value::<LabelSelector>(selector.clone())
        .ok()
        .and_then(|s| Selector::try_from(s).ok())
        .filter(|s| !s.selects_all())
        .map_or_else(watcher::Config::default, |s| {
            watcher::Config::default().labels_from(&s)
        });
    watcher(api, config).boxed()
}

/// The first pod of a workload in `targets` that cannot become ready, with the reason.
fn failing_pod(
    targets: &[Target],
    selectors: &BTreeMap<usize, serde_json::Value>,
    pods: &BTreeMap<(String, String), serde_json::Value>,
    options: &WaitOptions,
) -> Option<(String, String)> {
    if !options.fail_fast {
        return None;
    }
    let now = Timestamp::now();
    for ((ns, name), pod) in pods {
        let labels = &pod["metadata"]["labels"];
        let owned = selectors.iter().any(|(i, selector)| {
            targets[*i].namespace.as_deref() == Some(ns.as_str())
                && failfast::selects(selector, labels)
        });
        if owned && let Some(reason) = failfast::pod_failure(pod, now, options.unschedulable_grace)
        {
            return Some((format!("Pod/{ns}/{name}"), reason));
        }
    }
    None
}

fn readiness_of(target: &Target, obj: &DynamicObject, strict: readiness::Strictness) -> Readiness {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    // Dynamic objects may come back without type meta; the rules dispatch on it.
    value["apiVersion"] = target.resource.api_version.clone().into();
    value["kind"] = target.resource.kind.clone().into();
    readiness::of_with(&value, strict)
}

fn progress_of(targets: &[Target], states: &BTreeMap<usize, Readiness>) -> Progress {
    let mut p = Progress {
        total: targets.len(),
        ..Progress::default()
    };
    for (i, state) in states {
        match state {
            Readiness::Ready => p.ready += 1,
            Readiness::InProgress(why) | Readiness::Failed(why) => {
                p.pending.push((targets[*i].to_string(), why.clone()));
            }
        }
    }
    p
}
