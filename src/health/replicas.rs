//! Ready and desired replicas of every Helm release's workloads, as k9s' and kubectl's
//! READY column counts them, for the dashboard's table and detail view.
//!
//! One watch per workload kind (Deployments, StatefulSets, DaemonSets) over the
//! dashboard's namespaces. Each object is deserialized into [`Slim`]: its name,
//! namespace, resourceVersion, the two Helm annotations, `spec.replicas` and the ready and
//! desired status counts; serde skips everything else (pod templates, managedFields,
//! last-applied annotations), so 5,000 releases cost a few MB. Objects without Helm's
//! `meta.helm.sh/release-name` annotation are dropped at once. The counts are grouped by
//! Helm release (release namespace, release name), kept up to date one release at a time,
//! and published as a [`tokio::sync::watch`] of an [`Arc`] persistent map, at most every
//! [`PUBLISH_EVERY`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, ObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::{Deserialize, Deserializer};
use tokio::sync::watch;

use crate::cluster::client::Scope;
use crate::health::readiness::{self, Readiness};
use crate::helm::apply::manifest::{RELEASE_NAME_ANNOTATION, RELEASE_NAMESPACE_ANNOTATION};

/// How often at most a changed map is published (a rollout of many releases changes
/// counts many times a second; the table redraws four times a second).
pub const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// A Helm release: its namespace (`meta.helm.sh/release-namespace`, a HelmRelease's
/// target namespace) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReleaseId {
    pub namespace: String,
    pub name: String,
}

impl ReleaseId {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet];

    fn api_resource(self) -> ApiResource {
        let (kind, plural) = match self {
            Self::Deployment => ("Deployment", "deployments"),
            Self::StatefulSet => ("StatefulSet", "statefulsets"),
            Self::DaemonSet => ("DaemonSet", "daemonsets"),
        };
        ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            api_version: "apps/v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One workload's ready and desired replicas (DaemonSets: numberReady and
/// desiredNumberScheduled), and its readiness by the engine's own rules (Helm 4's
/// `--wait` verdict), for releases no engine of ours waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadReplicas {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub ready: i32,
    pub desired: i32,
    pub readiness: Readiness,
}

impl WorkloadReplicas {
    /// A workload known by its counts alone (demos and tests): ready once all are.
    pub fn counted(kind: Kind, namespace: &str, name: &str, ready: i32, desired: i32) -> Self {
        let readiness = if ready >= desired {
            Readiness::Ready
        } else {
            Readiness::InProgress(format!("{ready} of {desired} replicas ready"))
        };
        Self {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ready,
            desired,
            readiness,
        }
    }
}

/// The workloads of one Helm release, ordered by kind, namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseReplicas {
    pub workloads: Vec<WorkloadReplicas>,
}

impl ReleaseReplicas {
    /// Ready and desired replicas summed over the release's workloads.
    pub fn total(&self) -> (i32, i32) {
        self.workloads
            .iter()
            .fold((0, 0), |(r, d), w| (r + w.ready, d + w.desired))
    }

    /// The release's workloads together: failed if one will not become ready, else in
    /// progress if one is not ready yet (naming the first), else ready.
    pub fn readiness(&self) -> Readiness {
        let named = |w: &WorkloadReplicas, why: &str| format!("{}/{}: {why}", w.kind, w.name);
        if let Some((w, why)) = self.workloads.iter().find_map(|w| match &w.readiness {
            Readiness::Failed(why) => Some((w, why)),
            _ => None,
        }) {
            return Readiness::Failed(named(w, why));
        }
        match self.workloads.iter().find_map(|w| match &w.readiness {
            Readiness::InProgress(why) => Some((w, why)),
            _ => None,
        }) {
            Some((w, why)) => Readiness::InProgress(named(w, why)),
            None => Readiness::Ready,
        }
    }
}

/// Persistent (`imbl`), like the engine's views: a published snapshot is O(1) and the
/// dashboard's `diff` against the previous one visits only the releases that changed.
pub type ReplicaMap = imbl::OrdMap<ReleaseId, ReleaseReplicas>;

/// A workload as this module reads it; everything else in the object is skipped by
/// serde while parsing.
#[derive(Debug, Clone, Deserialize)]
pub struct Slim {
    #[serde(deserialize_with = "slim_metadata")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: SlimSpec,
    #[serde(default)]
    pub status: SlimStatus,
}

/// The spec fields the readiness rules read (the pod template is skipped).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<serde_json::Value>,
}

/// The status counts of the three kinds, and whatever else their status holds (a few
/// counters, revisions and two conditions), for the readiness rules.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimStatus {
    /// Deployments and StatefulSets.
    pub ready_replicas: Option<i32>,
    /// DaemonSets.
    pub number_ready: Option<i32>,
    pub desired_number_scheduled: Option<i32>,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

impl Slim {
    /// The object as the readiness rules read it: kind, generation, deletion, the spec
    /// fields above and the whole status.
    fn readiness(&self, kind: Kind) -> Readiness {
        let mut status = self.status.rest.clone();
        let counts = [
            ("readyReplicas", self.status.ready_replicas),
            ("numberReady", self.status.number_ready),
            (
                "desiredNumberScheduled",
                self.status.desired_number_scheduled,
            ),
        ];
        for (field, value) in counts {
            if let Some(v) = value {
                status.insert(field.into(), v.into());
            }
        }
        let object = serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": kind.to_string(),
            "metadata": {
                "generation": self.metadata.generation,
                "deletionTimestamp": self.metadata.deletion_timestamp,
            },
            "spec": self.spec,
            "status": status,
        });
        readiness::of(&object)
    }
}

/// Only name, namespace, resourceVersion (the watch resumes from it) and the two Helm
/// annotations are kept.
fn slim_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
        generation: Option<i64>,
        deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
        #[serde(default)]
        annotations: Option<HelmAnnotations>,
    }
    #[derive(Deserialize)]
    struct HelmAnnotations {
        #[serde(rename = "meta.helm.sh/release-name")]
        name: Option<String>,
        #[serde(rename = "meta.helm.sh/release-namespace")]
        namespace: Option<String>,
    }
    let m = Meta::deserialize(d)?;
    let annotations = m.annotations.map(|a| {
        [
            (RELEASE_NAME_ANNOTATION, a.name),
            (RELEASE_NAMESPACE_ANNOTATION, a.namespace),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), v?)))
        .collect()
    });
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        resource_version: m.resource_version,
        generation: m.generation,
        deletion_timestamp: m.deletion_timestamp,
        annotations,
        ..ObjectMeta::default()
    })
}

impl kube::Resource for Slim {
    type DynamicType = ApiResource;
    type Scope = kube::core::DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// (kind, namespace, name) of a workload.
type ObjectKey = (Kind, String, String);

/// A workload of a Helm release, reduced from its object; `None` when no Helm release
/// owns it (no `meta.helm.sh/release-name`).
pub fn reduce(kind: Kind, o: &Slim) -> Option<(ReleaseId, WorkloadReplicas)> {
    let annotations = o.metadata.annotations.as_ref()?;
    let release = annotations.get(RELEASE_NAME_ANNOTATION)?;
    let namespace = o.metadata.namespace.clone().unwrap_or_default();
    let release_ns = annotations
        .get(RELEASE_NAMESPACE_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| namespace.clone());
    let (ready, desired) = match kind {
        Kind::DaemonSet => (
            o.status.number_ready.unwrap_or(0),
            o.status.desired_number_scheduled.unwrap_or(0),
        ),
        // The API server defaults spec.replicas to 1.
        Kind::Deployment | Kind::StatefulSet => (
            o.status.ready_replicas.unwrap_or(0),
            o.spec.replicas.unwrap_or(1),
        ),
    };
    Some((
        ReleaseId::new(release_ns, release.clone()),
        WorkloadReplicas {
            kind,
            namespace,
            name: o.metadata.name.clone().unwrap_or_default(),
            ready,
            desired,
            readiness: o.readiness(kind),
        },
    ))
}

/// The workloads known per object, grouped by release, from scratch: what the
/// incrementally kept map must equal.
#[cfg(test)]
fn group<'a>(workloads: impl IntoIterator<Item = &'a (ReleaseId, WorkloadReplicas)>) -> ReplicaMap {
    let mut map: std::collections::BTreeMap<ReleaseId, ReleaseReplicas> = Default::default();
    for (release, w) in workloads {
        map.entry(release.clone())
            .or_default()
            .workloads
            .push(w.clone());
    }
    map.into_iter()
        .map(|(release, mut r)| {
            r.workloads.sort_by(|a, b| {
                (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name))
            });
            (release, r)
        })
        .collect()
}

/// What the watches have seen: the live objects of each kind, the list being (re)built
/// while a watch (re)starts, and the map by release, updated for the releases an event
/// touches.
#[derive(Default)]
struct State {
    objects: HashMap<ObjectKey, (ReleaseId, WorkloadReplicas)>,
    /// The objects of each release, in the map's order (kind, namespace, name): a sorted
    /// `Vec`, as most releases have one or two (a `BTreeSet` node per release took 12 MB
    /// at 20,000 releases).
    by_release: HashMap<ReleaseId, Vec<ObjectKey>>,
    relisting: HashMap<Kind, HashMap<ObjectKey, (ReleaseId, WorkloadReplicas)>>,
    map: ReplicaMap,
    dirty: bool,
}

impl State {
    fn key(kind: Kind, o: &Slim) -> ObjectKey {
        (
            kind,
            o.metadata.namespace.clone().unwrap_or_default(),
            o.metadata.name.clone().unwrap_or_default(),
        )
    }

    fn insert(&mut self, key: ObjectKey, entry: (ReleaseId, WorkloadReplicas)) {
        if self.objects.get(&key) == Some(&entry) {
            return;
        }
        let release = entry.0.clone();
        if let Some((old, _)) = self.objects.insert(key.clone(), entry)
            && old != release
        {
            self.unlink(&old, &key);
        }
        let keys = self
            .by_release
            .entry(release.clone())
            .or_insert_with(|| Vec::with_capacity(1));
        if let Err(i) = keys.binary_search(&key) {
            keys.insert(i, key);
        }
        self.recount(&release);
    }

    fn remove(&mut self, key: &ObjectKey) {
        if let Some((release, _)) = self.objects.remove(key) {
            self.unlink(&release, key);
        }
    }

    fn unlink(&mut self, release: &ReleaseId, key: &ObjectKey) {
        if let Some(keys) = self.by_release.get_mut(release) {
            if let Ok(i) = keys.binary_search(key) {
                keys.remove(i);
            }
            if keys.is_empty() {
                self.by_release.remove(release);
            }
        }
        self.recount(release);
    }

    /// One release's entry in the map again, from its objects.
    fn recount(&mut self, release: &ReleaseId) {
        let workloads: Vec<WorkloadReplicas> = self
            .by_release
            .get(release)
            .into_iter()
            .flatten()
            .filter_map(|k| self.objects.get(k).map(|(_, w)| w.clone()))
            .collect();
        if workloads.is_empty() {
            self.map.remove(release);
        } else {
            self.map
                .insert(release.clone(), ReleaseReplicas { workloads });
        }
        self.dirty = true;
    }

    fn apply(&mut self, kind: Kind, event: Event<Slim>) {
        match event {
            Event::Init => {
                self.relisting.insert(kind, HashMap::new());
            }
            Event::InitApply(o) => {
                if let Some(w) = reduce(kind, &o) {
                    let key = Self::key(kind, &o);
                    self.relisting.entry(kind).or_default().insert(key, w);
                }
            }
            Event::InitDone => {
                // The fresh list replaces what the kind had (objects deleted while the
                // watch was down go).
                let fresh = self.relisting.remove(&kind).unwrap_or_default();
                let gone: Vec<ObjectKey> = self
                    .objects
                    .keys()
                    .filter(|k| k.0 == kind && !fresh.contains_key(k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.remove(&key);
                }
                for (key, entry) in fresh {
                    self.insert(key, entry);
                }
            }
            Event::Apply(o) => {
                let key = Self::key(kind, &o);
                match reduce(kind, &o) {
                    Some(w) => self.insert(key, w),
                    // No longer Helm's: forget it.
                    None => self.remove(&key),
                }
            }
            Event::Delete(o) => self.remove(&Self::key(kind, &o)),
        }
    }
}

/// The running watches; dropping it stops them.
pub struct Replicas {
    rx: watch::Receiver<Arc<ReplicaMap>>,
    task: tokio::task::JoinHandle<()>,
}

impl Replicas {
    /// Starts one watch per workload kind over `scope` (every namespace, or one).
    pub fn start(client: Client, scope: &Scope) -> Self {
        Self::start_after(client, scope, None)
    }

    /// As [`Replicas::start`], once `after` is true: the dashboard lists its releases
    /// first (the workloads' list is as large as all of theirs together, and on two
    /// cores it held the table back by a second).
    pub fn start_after(
        client: Client,
        scope: &Scope,
        after: Option<watch::Receiver<bool>>,
    ) -> Self {
        let (tx, rx) = watch::channel(Arc::new(ReplicaMap::new()));
        let apis: Vec<(Kind, Api<Slim>)> = Kind::ALL
            .into_iter()
            .map(|kind| {
                let ar = kind.api_resource();
                let api = match scope {
                    Scope::All => Api::all_with(client.clone(), &ar),
                    Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, &ar),
                };
                (kind, api)
            })
            .collect();
        let task = tokio::spawn(async move {
            if let Some(mut after) = after {
                let _ = after.wait_for(|open| *open).await;
            }
            run(apis, tx).await;
        });
        Self { rx, task }
    }

    /// The map, updated live.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ReplicaMap>> {
        self.rx.clone()
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(apis: Vec<(Kind, Api<Slim>)>, tx: watch::Sender<Arc<ReplicaMap>>) {
    let streams = apis.into_iter().map(|(kind, api)| {
        // Pages of 100: a page's response is held whole while it is read.
        watcher::watcher(api, watcher::Config::default().page_size(100))
            .default_backoff()
            .map(move |event| (kind, event))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    let mut state = State::default();
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            next = events.next() => match next {
                Some((kind, Ok(event))) => state.apply(kind, event),
                // Forbidden, or the API server is away: the backoff retries; releases
                // show "-" for what was never seen.
                Some((kind, Err(e))) => {
                    tracing::debug!(%kind, error = %e, "workload replicas watch");
                }
                None => return,
            },
            _ = tick.tick() => {
                if state.dirty {
                    state.dirty = false;
                    tx.send_replace(Arc::new(state.map.clone()));
                }
            }
            () = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slim(json: serde_json::Value) -> Slim {
        serde_json::from_value(json).unwrap()
    }

    fn helm(ns: &str, name: &str, release: &str) -> serde_json::Value {
        serde_json::json!({"name": name, "namespace": ns, "resourceVersion": "7",
            "labels": {"app": name},
            "managedFields": [{"manager": "helm", "operation": "Apply"}],
            "annotations": {"meta.helm.sh/release-name": release,
                "meta.helm.sh/release-namespace": ns,
                "kubectl.kubernetes.io/last-applied-configuration": "{\"huge\": true}"}})
    }

    #[test]
    fn only_the_few_fields_are_kept() {
        let o = slim(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": helm("apps", "web", "web"),
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "app", "image": "x"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "conditions": []}}));
        assert_eq!(o.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(o.metadata.annotations.as_ref().unwrap().len(), 2);
        assert!(o.metadata.labels.is_none() && o.metadata.managed_fields.is_none());
        assert_eq!(
            (o.spec.replicas, o.status.ready_replicas),
            (Some(3), Some(2))
        );
    }

    #[test]
    fn ready_and_desired_are_summed_per_release() {
        let objects = [
            (
                Kind::Deployment,
                serde_json::json!({"metadata": helm("apps", "web", "shop"),
                    "spec": {"replicas": 3}, "status": {"readyReplicas": 2}}),
            ),
            (
                // spec.replicas left out: the API server's default of 1.
                Kind::StatefulSet,
                serde_json::json!({"metadata": helm("apps", "db", "shop"), "status": {}}),
            ),
            (
                Kind::DaemonSet,
                serde_json::json!({"metadata": helm("apps", "agent", "shop"),
                    "status": {"numberReady": 4, "desiredNumberScheduled": 5}}),
            ),
            (
                Kind::Deployment,
                serde_json::json!({"metadata": helm("apps", "api", "other"),
                    "spec": {"replicas": 0}}),
            ),
            (
                // Not Helm's: not counted.
                Kind::Deployment,
                serde_json::json!({"metadata": {"name": "x", "namespace": "apps"},
                    "spec": {"replicas": 9}, "status": {"readyReplicas": 9}}),
            ),
        ];
        let reduced: Vec<_> = objects
            .into_iter()
            .filter_map(|(kind, json)| reduce(kind, &slim(json)))
            .collect();
        let map = group(&reduced);
        assert_eq!(map.len(), 2);
        let shop = &map[&ReleaseId::new("apps", "shop")];
        assert_eq!(shop.total(), (6, 9));
        let order: Vec<_> = shop
            .workloads
            .iter()
            .map(|w| (w.kind, w.name.as_str(), w.ready, w.desired))
            .collect();
        assert_eq!(
            order,
            [
                (Kind::Deployment, "web", 2, 3),
                (Kind::StatefulSet, "db", 0, 1),
                (Kind::DaemonSet, "agent", 4, 5),
            ]
        );
        assert_eq!(map[&ReleaseId::new("apps", "other")].total(), (0, 0));
    }

    #[test]
    fn a_relist_replaces_what_a_kind_had() {
        let web = |ready: i32| {
            slim(serde_json::json!({"metadata": helm("apps", "web", "shop"),
                "spec": {"replicas": 2}, "status": {"readyReplicas": ready}}))
        };
        let gone = slim(serde_json::json!({"metadata": helm("apps", "old", "shop")}));
        let mut s = State::default();
        s.apply(Kind::Deployment, Event::Init);
        s.apply(Kind::Deployment, Event::InitApply(web(0)));
        s.apply(Kind::Deployment, Event::InitApply(gone));
        s.apply(Kind::Deployment, Event::InitDone);
        assert_eq!(
            group(s.objects.values()).values().next().unwrap().total(),
            (0, 3)
        );
        s.apply(Kind::Deployment, Event::Apply(web(2)));
        assert_eq!(s.map, group(s.objects.values()));
        assert_eq!(s.map.values().next().unwrap().total(), (2, 3));
        // The watch restarts: "old" was deleted meanwhile.
        s.apply(Kind::Deployment, Event::Init);
        s.apply(Kind::Deployment, Event::InitApply(web(2)));
        s.apply(Kind::Deployment, Event::InitDone);
        assert_eq!(
            group(s.objects.values()).values().next().unwrap().total(),
            (2, 2)
        );
        assert_eq!(s.map, group(s.objects.values()));
        s.apply(Kind::Deployment, Event::Delete(web(2)));
        assert!(s.objects.is_empty());
        assert!(s.map.is_empty() && s.by_release.is_empty());
    }
}
