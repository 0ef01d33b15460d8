//! The health-check wait after an action: watches every object of the release until all
//! are ready, one fails, the deadline passes, or the wait is cancelled. Only waits are
//! cancellable (docs/design.md, "Cancellation: a wait, never an apply"); the token is checked here and nowhere in apply or hooks.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll, select_all};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::custom::CustomHealth;
use super::failfast;
use super::hub::{Change, Store, View, WatchHub};
use super::legacy;
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
    /// The engine's shared watches (none: this wait starts its own).
    pub hub: Option<WatchHub>,
    /// CEL expressions that judge some kinds in place of the built-in rules (Flux's
    /// `healthCheckExprs`).
    pub custom: Option<CustomHealth>,
    /// Helm 3's readiness rules ([`super::legacy`], Flux's `waitStrategy: legacy`) in
    /// place of kstatus'.
    pub legacy: bool,
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self {
            fail_fast: true,
            unschedulable_grace: Duration::from_secs(30),
            started_at: Timestamp::now(),
            strictness: readiness::Strictness::default(),
            hub: None,
            custom: None,
            legacy: false,
        }
    }
}

/// Whether fail-fast judges the pods of `kind`: a workload's, except a Job's when Jobs
/// are not waited for (a Job then counts once started, whatever its pods do).
fn pods_judged(kind: &str, options: &WaitOptions) -> bool {
    WORKLOADS.contains(&kind) && !(kind == "Job" && options.strictness.job_started_is_enough)
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
    /// The object's generation as the API server had it when the wait began: a shared
    /// watch that has not caught up with the apply still holds the previous generation,
    /// fully rolled out, which must not pass for the new one.
    pub generation: Option<i64>,
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
/// changes, so front ends can show it live. Watches come from `options.hub` (shared with
/// every other wait of the engine), or from a hub of this wait's own.
///
/// Over 120 lines by design: its loop reads every watch the wait holds in one `select!`,
/// each arm only routing a change to `observe`, so what ends a wait is read in one place.
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
    let hub = options
        .hub
        .clone()
        .unwrap_or_else(|| WatchHub::new(client.clone()));
    let Watches {
        stores,
        group,
        mut events,
        pod_stores,
        mut pod_events,
        rs_stores,
        mut rs_events,
    } = Watches::subscribe(&hub, targets, options);
    let has_pod_watches = !pod_stores.is_empty();
    let has_rs_watches = !rs_stores.is_empty();
    let mut seen = Seen::default();
    let mut pods: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // What the shared stores hold already (another wait may have listed them).
    for i in 0..targets.len() {
        let _ = observe(
            targets,
            i,
            stores[group[i]].get(&targets[i].name),
            options,
            (&rs_stores, &pod_stores),
            &mut seen,
            (cancel, deadline),
        )
        .await;
    }
    for store in pod_stores.values() {
        for pod in store.all() {
            keep_pod(targets, &seen.selectors, &pod, options, &mut pods);
        }
    }
    let mut last = None;

    loop {
        if let Some((pod, reason)) = failing_pod(targets, &seen, &pods, options) {
            return Outcome::Failed {
                object: pod,
                reason,
            };
        }
        let progress = progress_of(targets, &seen.states);
        if last.as_ref() != Some(&progress) {
            on_progress(&progress);
            last = Some(progress.clone());
        }
        if let Some((i, Readiness::Failed(reason))) = seen
            .states
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
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Outcome::Canceled,
            () = tokio::time::sleep_until(deadline) => return Outcome::TimedOut(progress),
            event = events.next() => match event {
                Some((g, change)) => {
                    // The targets this change concerns: by name, or all of the group.
                    let name = match &change {
                        Change::Applied(obj) => obj.metadata.name.clone(),
                        Change::Deleted(name) => Some(name.clone()),
                        Change::Resync => None,
                    };
                    let mut selected = false;
                    for i in (0..targets.len()).filter(|&i| group[i] == g) {
                        if name.as_ref().is_none_or(|n| *n == targets[i].name) {
                            selected |= observe(targets, i, stores[g].get(&targets[i].name), options, (&rs_stores, &pod_stores), &mut seen, (cancel, deadline)).await;
                        }
                    }
                    // Pods that arrived before their workload's selector was known.
                    if selected {
                        for pod in pod_stores.values().flat_map(Store::all) {
                            keep_pod(targets, &seen.selectors, &pod, options, &mut pods);
                        }
                    }
                }
                None => return Outcome::TimedOut(progress),
            },
            event = pod_events.next(), if has_pod_watches => {
                let namespace = event.as_ref().map(|(ns, _)| ns.clone());
                match event {
                    Some((_, Change::Applied(pod))) => keep_pod(targets, &seen.selectors, &pod, options, &mut pods),
                    Some((ns, Change::Deleted(name))) => {
                        pods.remove(&(ns, name));
                    }
                    Some((ns, Change::Resync)) => {
                        pods.retain(|(n, _), _| *n != ns);
                        for pod in pod_stores[&ns].all() {
                            keep_pod(targets, &seen.selectors, &pod, options, &mut pods);
                        }
                    }
                    None => {}
                }
                // Helm 3's rules judge a ReplicaSet by its pods: look at it again.
                if options.legacy && let Some(ns) = namespace {
                    for i in (0..targets.len()).filter(|&i| {
                        judged_by_pods(&targets[i].resource.kind) && targets[i].namespace.as_deref() == Some(ns.as_str())
                    }) {
                        let obj = stores[group[i]].get(&targets[i].name);
                        observe(targets, i, obj, options, (&rs_stores, &pod_stores), &mut seen, (cancel, deadline)).await;
                    }
                }
            }
            // A Deployment's ReplicaSets changed: which one is current may have too.
            Some((ns, owners)) = rs_events.next(), if has_rs_watches => {
                for i in (0..targets.len()).filter(|&i| {
                    targets[i].resource.kind == "Deployment" && targets[i].namespace.as_deref() == Some(ns.as_str())
                }) {
                    let obj = stores[group[i]].get(&targets[i].name);
                    let concerned = match (&owners, obj.as_ref().and_then(|o| o.metadata.uid.as_ref())) {
                        (Some(owners), Some(uid)) => owners.contains(uid),
                        (Some(_), None) => false,
                        (None, _) => true,
                    };
                    if concerned {
                        observe(targets, i, obj, options, (&rs_stores, &pod_stores), &mut seen, (cancel, deadline)).await;
                    }
                }
            }
            // Unschedulable pods fail only after a grace period: look again now and then.
            _ = tick.tick(), if has_pod_watches => {}
        }
    }
}

/// The shared watches one wait reads: the targets' own, by (kind, namespace), and for
/// fail-fast and Helm 3's rules the pods and ReplicaSets of the namespaces holding
/// workloads.
struct Watches {
    stores: Vec<Store>,
    /// `group[i]`: the index in `stores` of target i's watch.
    group: Vec<usize>,
    events: SelectAll<BoxStream<'static, (usize, Change)>>,
    pod_stores: BTreeMap<String, Store>,
    pod_events: SelectAll<BoxStream<'static, (String, Change)>>,
    rs_stores: BTreeMap<String, Store>,
    /// (namespace, the changed set's owners; None: look at every Deployment there).
    rs_events: SelectAll<BoxStream<'static, (String, Option<Vec<String>>)>>,
}

impl Watches {
    fn subscribe(hub: &WatchHub, targets: &[Target], options: &WaitOptions) -> Self {
        // One shared watch per (kind, namespace) of the targets; `group[i]` is target i's.
        let mut stores: Vec<Store> = Vec::new();
        let mut streams = Vec::new();
        let mut keys: Vec<(ApiResource, Option<String>)> = Vec::new();
        let group: Vec<usize> = targets
            .iter()
            .map(|t| {
                let key = (t.resource.clone(), t.namespace.clone());
                if let Some(g) = keys.iter().position(|k| *k == key) {
                    return g;
                }
                // A user's health expression may read any field: the whole object for it.
                let view = match &options.custom {
                    Some(c) if c.judges(&t.resource.api_version, &t.resource.kind) => View::Whole,
                    _ => View::Readiness,
                };
                let (store, changes) = hub.subscribe(&t.resource, t.namespace.as_deref(), view);
                let g = stores.len();
                stores.push(store);
                streams.push(changes.map(move |c| (g, c)).boxed());
                keys.push(key);
                g
            })
            .collect();
        let events = select_all(streams);
        // For fail-fast: the shared pod watch of each namespace holding a workload; this wait
        // keeps only its own workloads' pods.
        let pod_resource = ApiResource::erase::<Pod>(&());
        let mut pod_stores: BTreeMap<String, Store> = BTreeMap::new();
        let mut pod_events: SelectAll<BoxStream<'static, (String, Change)>> = SelectAll::new();
        if options.fail_fast || options.legacy {
            for ns in targets
                .iter()
                .filter(|t| {
                    (options.fail_fast && pods_judged(&t.resource.kind, options))
                        || (options.legacy && judged_by_pods(&t.resource.kind))
                })
                .filter_map(|t| t.namespace.clone())
            {
                if let std::collections::btree_map::Entry::Vacant(slot) = pod_stores.entry(ns) {
                    let (store, changes) =
                        hub.subscribe(&pod_resource, Some(slot.key()), View::Readiness);
                    let name = slot.key().clone();
                    pod_events.push(changes.map(move |c| (name.clone(), c)).boxed());
                    slot.insert(store);
                }
            }
        }
        // And the ReplicaSets of each namespace holding a Deployment: which of them is the
        // current template's says which pods may fail the wait.
        let rs_resource = ApiResource::erase::<ReplicaSet>(&());
        let mut rs_stores: BTreeMap<String, Store> = BTreeMap::new();
        // (namespace, the changed set's owners; None: look at every Deployment there).
        let mut rs_events: SelectAll<BoxStream<'static, (String, Option<Vec<String>>)>> =
            SelectAll::new();
        if options.fail_fast || options.legacy {
            for ns in targets
                .iter()
                .filter(|t| t.resource.kind == "Deployment")
                .filter_map(|t| t.namespace.clone())
            {
                if let std::collections::btree_map::Entry::Vacant(slot) = rs_stores.entry(ns) {
                    let (store, changes) =
                        hub.subscribe(&rs_resource, Some(slot.key()), View::Readiness);
                    let name = slot.key().clone();
                    rs_events.push(
                        changes
                            .map(move |c| {
                                let owners = match c {
                                    Change::Applied(rs) => Some(owner_uids(&rs).cloned().collect()),
                                    Change::Deleted(_) | Change::Resync => None,
                                };
                                (name.clone(), owners)
                            })
                            .boxed(),
                    );
                    slot.insert(store);
                }
            }
        }
        Self {
            stores,
            group,
            events,
            pod_stores,
            pod_events,
            rs_stores,
            rs_events,
        }
    }
}

/// What the wait knows of each target `i`.
#[derive(Default)]
struct Seen {
    states: BTreeMap<usize, Readiness>,
    /// Workloads' pod selectors.
    selectors: BTreeMap<usize, serde_json::Value>,
    /// Which pods of each workload are its current template's (see failfast::Revision).
    revisions: BTreeMap<usize, failfast::Revision>,
}

/// Judges target `i` as the shared store shows it now (`None`: it does not exist).
/// True when it made a workload's pod selector known (or changed it): the pods already
/// seen must then be looked at again.
/// `until` ends an evaluation of CEL expressions that has not answered (the wait was
/// cancelled, or its deadline passed), so a slow evaluator never holds up either.
async fn observe(
    targets: &[Target],
    i: usize,
    obj: Option<std::sync::Arc<DynamicObject>>,
    options: &WaitOptions,
    (replica_sets, pod_stores): (&BTreeMap<String, Store>, &BTreeMap<String, Store>),
    seen: &mut Seen,
    until: (&CancellationToken, Instant),
) -> bool {
    let Seen {
        states,
        selectors,
        revisions,
    } = seen;
    let Some(obj) = obj else {
        states.insert(
            i,
            Readiness::InProgress("waiting for the object to exist".into()),
        );
        return false;
    };
    if let (Some(applied), Some(seen)) = (targets[i].generation, obj.metadata.generation)
        && seen < applied
    {
        states.insert(
            i,
            Readiness::InProgress(format!(
                "waiting for the watch to see generation {applied} (it has {seen})"
            )),
        );
        // Nor are its pods judged yet: all there are of an earlier template.
        if WORKLOADS.contains(&targets[i].resource.kind.as_str()) {
            revisions.insert(i, failfast::Revision::NotObserved);
        }
        return false;
    }
    // Serialised once for the readiness rules and the workload's current revision.
    let value = typed_value(&targets[i], &obj);
    let resource = &targets[i].resource;
    let readiness = match &options.custom {
        Some(custom) if custom.judges(&resource.api_version, &resource.kind) => {
            custom.judge(&value, until.0, until.1).await
        }
        _ if options.legacy => {
            let replica_sets = owned_replica_sets(&targets[i], &obj, replica_sets, true);
            let pods = if judged_by_pods(&resource.kind) {
                selected_pods(&targets[i], &value, pod_stores)
            } else {
                Vec::new()
            };
            let related = legacy::Related {
                replica_sets: &replica_sets,
                pods: &pods,
            };
            legacy::of(&value, &related, !options.strictness.job_started_is_enough)
        }
        _ => readiness::of_with(&value, options.strictness),
    };
    states.insert(i, readiness);
    if pods_judged(&targets[i].resource.kind, options) {
        let owned = owned_replica_sets(&targets[i], &obj, replica_sets, false);
        revisions.insert(
            i,
            failfast::Revision::of(&targets[i].resource.kind, &value, &owned),
        );
        let selector = obj.data["spec"]["selector"].clone();
        if selectors.get(&i) != Some(&selector) {
            selectors.insert(i, selector);
            return true;
        }
    }
    false
}

/// A Deployment's own ReplicaSets as the namespace's shared watch holds them (only
/// those are read: a namespace may hold thousands).
fn owned_replica_sets(
    target: &Target,
    workload: &DynamicObject,
    replica_sets: &BTreeMap<String, Store>,
    whole: bool,
) -> Vec<serde_json::Value> {
    let (Some(uid), Some(ns)) = (&workload.metadata.uid, &target.namespace) else {
        return Vec::new();
    };
    if target.resource.kind != "Deployment" {
        return Vec::new();
    }
    let Some(store) = replica_sets.get(ns) else {
        return Vec::new();
    };
    store
        .filtered(|rs| owner_uids(rs).any(|o| o == uid))
        .into_iter()
        // Only what `Revision::of` reads: the whole object (managedFields included) would
        // be serialised on every change of the Deployment. Helm 3's rules read its status.
        .map(|rs| {
            if whole {
                return serde_json::json!({
                    "metadata": {
                        "generation": rs.metadata.generation,
                        "creationTimestamp": rs.metadata.creation_timestamp,
                    },
                    "spec": {"template": rs.data["spec"]["template"]},
                    "status": rs.data["status"],
                });
            }
            serde_json::json!({
                "metadata": {
                    "labels": rs.metadata.labels,
                    "ownerReferences": rs.metadata.owner_references,
                },
                "spec": {"template": rs.data["spec"]["template"]},
            })
        })
        .collect()
}

/// Kinds Helm 3's rules judge by every pod their selector selects.
fn judged_by_pods(kind: &str) -> bool {
    matches!(kind, "ReplicaSet" | "ReplicationController")
}

/// The pods of the shared namespace watch that `workload`'s selector selects (a
/// ReplicationController's selector is a plain label map).
fn selected_pods(
    target: &Target,
    workload: &serde_json::Value,
    pod_stores: &BTreeMap<String, Store>,
) -> Vec<serde_json::Value> {
    let Some(store) = target.namespace.as_ref().and_then(|ns| pod_stores.get(ns)) else {
        return Vec::new();
    };
    let selector = &workload["spec"]["selector"];
    let selector =
        if selector.get("matchLabels").is_some() || selector.get("matchExpressions").is_some() {
            selector.clone()
        } else {
            serde_json::json!({"matchLabels": selector})
        };
    store
        .filtered(|pod| {
            let labels = serde_json::to_value(&pod.metadata.labels).unwrap_or_default();
            failfast::selects(&selector, &labels)
        })
        .into_iter()
        .map(|pod| {
            serde_json::json!({
                "metadata": {"name": pod.metadata.name},
                "status": {"conditions": pod.data["status"]["conditions"]},
            })
        })
        .collect()
}

fn owner_uids(obj: &DynamicObject) -> impl Iterator<Item = &String> {
    obj.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| &o.uid)
}

/// Keeps a pod of the shared namespace watch when one of this wait's workloads selects
/// it and it was created for this revision.
fn keep_pod(
    targets: &[Target],
    selectors: &BTreeMap<usize, serde_json::Value>,
    pod: &DynamicObject,
    options: &WaitOptions,
    pods: &mut BTreeMap<(String, String), serde_json::Value>,
) {
    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    // A little slack for clock skew between us and the API server.
    let slack = std::time::Duration::from_secs(2);
    if created.is_none_or(|c| c + slack < options.started_at) {
        return;
    }
    let labels = serde_json::to_value(&pod.metadata.labels).unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref();
    let owned = selectors.iter().any(|(i, selector)| {
        targets[*i].namespace.as_deref() == ns && failfast::selects(selector, &labels)
    });
    if owned {
        let key = (
            ns.unwrap_or_default().to_owned(),
            pod.metadata.name.clone().unwrap_or_default(),
        );
        let mut value = serde_json::to_value(pod).unwrap_or_default();
        value["apiVersion"] = "v1".into();
        value["kind"] = "Pod".into();
        pods.insert(key, value);
    }
}

/// The first pod of a workload in `targets` that cannot become ready, with the reason:
/// only pods of the workload's current template count (an earlier rollout's failing pods,
/// still there while the fix rolls out, never fail it).
fn failing_pod(
    targets: &[Target],
    seen: &Seen,
    pods: &BTreeMap<(String, String), serde_json::Value>,
    options: &WaitOptions,
) -> Option<(String, String)> {
    if !options.fail_fast {
        return None;
    }
    let now = Timestamp::now();
    for ((ns, name), pod) in pods {
        let labels = &pod["metadata"]["labels"];
        let owned = seen.selectors.iter().any(|(i, selector)| {
            targets[*i].namespace.as_deref() == Some(ns.as_str())
                && failfast::selects(selector, labels)
                && seen.revisions.get(i).is_none_or(|r| r.admits(labels))
        });
        if owned && let Some(reason) = failfast::pod_failure(pod, now, options.unschedulable_grace)
        {
            return Some((format!("Pod/{ns}/{name}"), reason));
        }
    }
    None
}

/// The object as JSON with its type meta (dynamic objects may come back without it; the
/// readiness rules dispatch on it).
fn typed_value(target: &Target, obj: &DynamicObject) -> serde_json::Value {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    value["apiVersion"] = target.resource.api_version.clone().into();
    value["kind"] = target.resource.kind.clone().into();
    value
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

#[cfg(test)]
mod lagging_watch_tests {
    use super::*;

    /// A shared watch still holding the previous generation, fully rolled out, while the
    /// API server has the applied one: not ready until the watch sees the applied one.
    #[tokio::test]
    async fn a_watch_behind_the_apply_is_not_taken_for_the_applied_object() {
        let target = Target {
            resource: ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
            namespace: Some("ns".into()),
            name: "web".into(),
            generation: Some(2),
        };
        let object = |generation: i64| {
            let obj: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "ns", "generation": generation},
                "spec": {"replicas": 1},
                "status": {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
                           "readyReplicas": 1, "availableReplicas": 1},
            }))
            .unwrap();
            Some(std::sync::Arc::new(obj))
        };
        let options = WaitOptions::default();
        let mut seen = Seen::default();
        let targets = [target];
        observe(
            &targets,
            0,
            object(1),
            &options,
            (&BTreeMap::new(), &BTreeMap::new()),
            &mut seen,
            (
                &CancellationToken::new(),
                Instant::now() + Duration::from_secs(60),
            ),
        )
        .await;
        assert!(
            matches!(seen.states[&0], Readiness::InProgress(_)),
            "{:?}",
            seen.states[&0]
        );
        observe(
            &targets,
            0,
            object(2),
            &options,
            (&BTreeMap::new(), &BTreeMap::new()),
            &mut seen,
            (
                &CancellationToken::new(),
                Instant::now() + Duration::from_secs(60),
            ),
        )
        .await;
        assert_eq!(seen.states[&0], Readiness::Ready);
    }
}
