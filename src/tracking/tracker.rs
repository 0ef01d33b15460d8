//! The long-running tracker: watches tracked workloads and the ConfigMaps and Secrets they
//! consume, and after a debounced burst of changes patches the pod-template hash (and
//! lifts the config-pending gate) with a JSON merge patch that touches only those fields.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{DeleteParams, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::consumption::{ConfigKind, ConsumedObject};
use super::debounce::Debouncer;
use super::hash::Resolved;
use super::prepare::read_data;
use super::workload::{
    Decision, WorkloadKind, WorkloadRef, consumed_objects, decide, hash_patch, is_gated,
    is_tracked, template_hash,
};
use super::{CONFIG_PENDING_GATE, FIELD_MANAGER};
use crate::cluster::client::Scope;
use crate::helm::apply::manifest::{RELEASE_NAME_ANNOTATION, RELEASE_NAMESPACE_ANNOTATION};

/// Workloads per page of the initial list (the API server's default is 500).
const WORKLOAD_PAGE: u32 = 50;

#[derive(Debug, Clone)]
pub struct TrackerConfig {
    /// Quiet time after the last change before a workload is rolled.
    pub debounce: Duration,
    /// A workload whose config keeps changing is rolled at the latest this long after the
    /// first change of a burst.
    pub max_delay: Duration,
    /// Which workloads this tracker may roll.
    pub owned: Ownership,
    /// Told of each rollout of a release's workload (the engine records it on the
    /// release's HelmRelease, for the timeline).
    pub rolled: Option<tokio::sync::mpsc::UnboundedSender<Rolled>>,
    /// What hashes are keyed with (none: unkeyed, as before keys).
    pub keys: Option<super::HashKeys>,
}

/// A release's workload rolled because the config it consumes changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rolled {
    /// The release owning the workload: (its namespace, its name), as Helm annotates it.
    pub release: ReleaseId,
    pub workload: WorkloadRef,
    /// `ConfigMap web-config`, `Secret web-env`: the objects whose change it was (every
    /// one it consumes when the change came with the workload itself).
    pub changed: Vec<String>,
    /// The first 12 hex digits of the new config hash.
    pub hash: String,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            debounce: Duration::from_secs(2),
            max_delay: Duration::from_secs(20),
            owned: Ownership::default(),
            rolled: None,
            keys: None,
        }
    }
}

/// Which workloads a tracker looks after, so that with several engines (shards, or a
/// namespace engine beside a cluster-wide one) each workload has one writer: a release's
/// workloads belong to the engine that reconciles the release; other workloads (of helm
/// CLI releases, or opted in by annotation) to the unsharded engine covering their
/// namespace. Until the engine says otherwise, the tracker owns everything in its scope.
#[derive(Clone, Default)]
pub struct Ownership(Arc<std::sync::RwLock<Option<Owned>>>);

/// A release as workloads name it: (namespace, release name).
pub type ReleaseId = (String, String);

struct Owned {
    ours: HashSet<ReleaseId>,
    theirs: HashSet<ReleaseId>,
    /// For an unsharded engine: the namespaces whose release-less workloads are ours.
    namespaces: Option<NamespaceFilter>,
}

pub type NamespaceFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl std::fmt::Debug for Ownership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let owned = read(&self.0);
        match &*owned {
            None => f.write_str("Ownership(everything)"),
            Some(o) => write!(f, "Ownership({} releases)", o.ours.len()),
        }
    }
}

impl Ownership {
    pub fn set(
        &self,
        ours: HashSet<ReleaseId>,
        theirs: HashSet<ReleaseId>,
        namespaces: Option<NamespaceFilter>,
    ) {
        *write(&self.0) = Some(Owned {
            ours,
            theirs,
            namespaces,
        });
    }

    /// Whether a workload in `namespace`, of the release `owner` (if any), is ours.
    pub fn owns(&self, namespace: &str, owner: Option<(&str, &str)>) -> bool {
        let owned = read(&self.0);
        let Some(o) = &*owned else { return true };
        if let Some((ns, name)) = owner {
            let id = (ns.to_owned(), name.to_owned());
            if o.ours.contains(&id) {
                return true;
            }
            if o.theirs.contains(&id) {
                return false;
            }
        }
        o.namespaces.as_ref().is_some_and(|f| f(namespace))
    }
}

/// One consumed object of a tracked workload and whether it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedObject {
    pub object: ConsumedObject,
    pub exists: bool,
}

/// What the dashboard shows per workload: what it consumes and whether its pods are held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedWorkload {
    pub workload: WorkloadRef,
    /// The Helm release owning it (`meta.helm.sh/release-name`), if any.
    pub release: Option<String>,
    pub objects: Vec<TrackedObject>,
    /// The pod template carries the `wheelhouse.dev/config-pending` gate.
    pub gated: bool,
    /// The pod template's current config hash.
    pub hash: Option<String>,
}

/// What the tracker keeps of what it watches: each workload as the JSON of its slimmed
/// form (decoded again only when the tracker decides on it: decoded, a slimmed Deployment
/// took 6.5 KB, every small JSON map a B-tree node; its JSON is a tenth of that), and
/// ConfigMaps and Secrets by name alone (whether one exists is all anything asks of them).
/// `heaptrack` over 2,000 releases: kube's reflector stores of the objects held 27 MB at
/// the peak, these hold under 5.
#[derive(Default)]
struct Stores {
    workloads: RwLock<HashMap<WorkloadRef, Box<str>>>,
    configs: RwLock<HashSet<ObjectKey>>,
}

impl Stores {
    fn workload(&self, key: &WorkloadRef) -> Option<DynamicObject> {
        let json = read(&self.workloads).get(key)?.clone();
        serde_json::from_str(&json).ok()
    }

    fn exists(&self, kind: ConfigKind, namespace: &str, name: &str) -> bool {
        read(&self.configs).contains(&(kind, namespace.to_owned(), name.to_owned()))
    }
}

/// A lock's guard even if a panicking holder poisoned it: what it guards is replaced
/// whole or read, never left half-written.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The current data of the objects a workload consumes, read now.
async fn resolve(
    client: &Client,
    namespace: &str,
    objects: Vec<ConsumedObject>,
) -> Result<Vec<Resolved>, super::Error> {
    let mut out = Vec::with_capacity(objects.len());
    for object in objects {
        out.push(Resolved {
            data: read_data(client, object.kind, namespace, &object.name).await?,
            object,
        });
    }
    Ok(out)
}

/// A running tracker. Cloning shares it; the task stops when the `stop` token given to
/// [`start`] is cancelled.
#[derive(Clone)]
pub struct TrackerHandle {
    stores: Arc<Stores>,
    ready: watch::Receiver<bool>,
    handled: Arc<Mutex<Handled>>,
}

/// What the tracker has handled, for [`TrackerHandle::caught_up`].
#[derive(Default)]
struct Handled {
    /// The resourceVersion of the newest event handled per workload.
    seen: HashMap<WorkloadRef, String>,
    /// Workloads with a decision still to come (debounced or being decided).
    pending: HashSet<WorkloadRef>,
}

impl TrackerHandle {
    /// Whether the tracker has handled `workload` at `resource_version` and has nothing
    /// left to decide about it: the positive sign that no further rollout of it is coming
    /// from what it has seen so far.
    pub fn caught_up(&self, workload: &WorkloadRef, resource_version: &str) -> bool {
        let handled = self.handled.lock().unwrap();
        handled.seen.get(workload).map(String::as_str) == Some(resource_version)
            && !handled.pending.contains(workload)
    }

    /// Waits until every watch has delivered its initial list (the tracker acts only
    /// after that, so it never hashes a half-known state).
    pub async fn ready(&self) {
        let mut ready = self.ready.clone();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// The tracked workloads, optionally only those of one namespace and/or release,
    /// sorted by kind, namespace and name.
    pub fn tracked(&self, namespace: Option<&str>, release: Option<&str>) -> Vec<TrackedWorkload> {
        let mut out = Vec::new();
        let workloads: Vec<(WorkloadRef, Box<str>)> = read(&self.stores.workloads)
            .iter()
            .filter(|(key, _)| namespace.is_none_or(|n| n == key.namespace))
            .map(|(key, json)| (key.clone(), json.clone()))
            .collect();
        for (key, json) in workloads {
            let Ok(value) = serde_json::from_str::<Value>(&json) else {
                continue;
            };
            let owner = value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(RELEASE_NAME_ANNOTATION))
                .and_then(Value::as_str);
            if release.is_some() && owner != release {
                continue;
            }
            out.extend(tracked_workload(key.kind, &value, |object| {
                self.stores
                    .exists(object.kind, &key.namespace, &object.name)
            }));
        }
        out.sort_by(|a, b| a.workload.cmp(&b.workload));
        out
    }
}

/// What the tracker looks after in one live workload: the objects it consumes (with
/// `exists` telling whether each is there), its gate and hash; `None` when the workload is
/// not tracked. Shared by the tracker and the dashboard, which answers `exists` from its
/// own reads.
pub fn tracked_workload(
    kind: WorkloadKind,
    obj: &Value,
    exists: impl Fn(&ConsumedObject) -> bool,
) -> Option<TrackedWorkload> {
    if !is_tracked(kind, obj) {
        return None;
    }
    let meta = |field: &str| {
        obj.pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let release = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(RELEASE_NAME_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some(TrackedWorkload {
        workload: WorkloadRef {
            kind,
            namespace: meta("namespace"),
            name: meta("name"),
        },
        release,
        objects: consumed_objects(kind, obj)
            .unwrap_or_default()
            .into_iter()
            .map(|object| TrackedObject {
                exists: exists(&object),
                object,
            })
            .collect(),
        gated: is_gated(kind, obj),
        hash: template_hash(kind, obj),
    })
}

/// What a watch stream reports to the loop.
enum Signal {
    Workload(WorkloadKind, Box<watcher::Event<DynamicObject>>),
    /// A ConfigMap's or Secret's event, by (namespace, name).
    Config(ConfigKind, watcher::Event<(String, String)>),
    Failed(&'static str, String),
}

fn config_signal<K: Resource + ResourceExt>(kind: ConfigKind, event: watcher::Event<K>) -> Signal {
    let key = |o: K| (o.namespace().unwrap_or_default(), o.name_any());
    Signal::Config(
        kind,
        match event {
            watcher::Event::Apply(o) => watcher::Event::Apply(key(o)),
            watcher::Event::InitApply(o) => watcher::Event::InitApply(key(o)),
            watcher::Event::Delete(o) => watcher::Event::Delete(key(o)),
            watcher::Event::InitDone => watcher::Event::InitDone,
            watcher::Event::Init => watcher::Event::Init,
        },
    )
}

/// Starts the tracker over `scope`. Needs list/watch on the workload kinds, ConfigMaps and
/// Secrets, patch on the workloads, create on Events (and list/delete on Pods, to replace
/// gated StatefulSet pods).
pub fn start(
    client: Client,
    scope: Scope,
    config: TrackerConfig,
    stop: CancellationToken,
) -> TrackerHandle {
    let mut streams: SelectAll<BoxStream<'static, Signal>> = SelectAll::new();
    for kind in WorkloadKind::ROLLABLE {
        let ar = kind.api_resource();
        let api: Api<DynamicObject> = match &scope {
            Scope::All => Api::all_with(client.clone(), &ar),
            Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        };
        // Small pages: each page of full workloads is decoded whole before it is cut
        // down, and the allocator keeps what a burst took.
        let stream = watcher(api, watcher::Config::default().page_size(WORKLOAD_PAGE))
            .default_backoff()
            .modify(move |o| {
                o.managed_fields_mut().clear();
                o.annotations_mut()
                    .remove("kubectl.kubernetes.io/last-applied-configuration");
                super::workload::slim(kind, &mut o.data);
            })
            .map(move |event| match event {
                Ok(event) => Signal::Workload(kind, Box::new(event)),
                Err(e) => Signal::Failed("workloads", e.to_string()),
            });
        streams.push(stream.boxed());
    }
    streams.push(
        watcher(
            scope.api::<PartialObjectMeta<ConfigMap>>(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .map(|event| match event {
            Ok(event) => config_signal(ConfigKind::ConfigMap, event),
            Err(e) => Signal::Failed("ConfigMaps", e.to_string()),
        })
        .boxed(),
    );
    // Helm's release storage Secrets (`owner=helm`) are never consumed by a workload.
    streams.push(
        watcher(
            scope.api::<PartialObjectMeta<Secret>>(client.clone()),
            watcher::Config::default().labels("owner!=helm"),
        )
        .default_backoff()
        .map(|event| match event {
            Ok(event) => config_signal(ConfigKind::Secret, event),
            Err(e) => Signal::Failed("Secrets", e.to_string()),
        })
        .boxed(),
    );

    let stores = Arc::new(Stores::default());
    let (ready_tx, ready) = watch::channel(false);
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: FIELD_MANAGER.into(),
            instance: None,
        },
    );
    let mut tracker = Tracker {
        owned: config.owned.clone(),
        client,
        stores: stores.clone(),
        debouncer: Debouncer::new(config.debounce, config.max_delay),
        uses: HashMap::new(),
        consumers: HashMap::new(),
        announced: HashMap::new(),
        recorder,
        listed: HashSet::new(),
        ready: ready_tx,
        handled: Arc::default(),
        rolled: config.rolled.clone(),
        keys: config.keys.clone(),
        touched_by: HashMap::new(),
        relisting: HashMap::new(),
        relisting_configs: HashMap::new(),
    };
    let handled = tracker.handled.clone();
    tokio::spawn(async move { tracker.run(streams, stop).await });
    TrackerHandle {
        stores,
        ready,
        handled,
    }
}

type ObjectKey = (ConfigKind, String, String);

struct Tracker {
    owned: Ownership,
    client: Client,
    stores: Arc<Stores>,
    debouncer: Debouncer<WorkloadRef>,
    /// What each tracked workload consumes, and the reverse index.
    uses: HashMap<WorkloadRef, Vec<ObjectKey>>,
    consumers: HashMap<ObjectKey, HashSet<WorkloadRef>>,
    /// The last waiting message published per workload, so each is published once.
    announced: HashMap<WorkloadRef, String>,
    recorder: Recorder,
    /// Streams that delivered their initial list (by name).
    listed: HashSet<String>,
    ready: watch::Sender<bool>,
    handled: Arc<Mutex<Handled>>,
    rolled: Option<tokio::sync::mpsc::UnboundedSender<Rolled>>,
    /// What hashes are keyed with.
    keys: Option<super::HashKeys>,
    /// The consumed objects whose change touched each workload since its last decision.
    touched_by: HashMap<WorkloadRef, BTreeSet<String>>,
    /// The workloads of each kind in the list being received: they replace the stored
    /// ones of the kind when it ends (as kube's reflector replaces its store).
    relisting: HashMap<WorkloadKind, HashMap<WorkloadRef, Box<str>>>,
    /// The same for ConfigMaps and Secrets.
    relisting_configs: HashMap<ConfigKind, HashSet<ObjectKey>>,
}

const STREAMS: usize = WorkloadKind::ROLLABLE.len() + 2;

impl Tracker {
    async fn run(
        &mut self,
        mut streams: SelectAll<BoxStream<'static, Signal>>,
        stop: CancellationToken,
    ) {
        loop {
            let deadline = self
                .debouncer
                .next_deadline()
                .filter(|_| *self.ready.borrow());
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                signal = streams.next() => match signal {
                    Some(signal) => self.on_signal(signal),
                    None => return,
                },
                () = sleep => {
                    for key in self.debouncer.take_due(Instant::now()) {
                        self.reconcile(key).await;
                    }
                }
            }
            // Published between steps only: a key taken for a decision stays pending
            // until the decision is made.
            self.handled.lock().unwrap().pending = self.debouncer.keys().cloned().collect();
        }
    }

    fn on_signal(&mut self, signal: Signal) {
        let now = Instant::now();
        match signal {
            Signal::Failed(what, message) => {
                warn!(%message, "config tracking: watching {what} failed; retrying")
            }
            Signal::Workload(kind, event) => match *event {
                watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
                    let key = workload_ref(kind, &obj);
                    if let Some(version) = &obj.metadata.resource_version {
                        let mut handled = self.handled.lock().unwrap();
                        handled.seen.insert(key.clone(), version.clone());
                    }
                    let json = serde_json::to_string(&obj)
                        .unwrap_or_default()
                        .into_boxed_str();
                    match self.relisting.get_mut(&kind) {
                        Some(listed) => {
                            listed.insert(key.clone(), json);
                        }
                        None => {
                            write(&self.stores.workloads).insert(key.clone(), json);
                        }
                    }
                    let value = serde_json::to_value(&obj).unwrap_or(Value::Null);
                    self.unindex(&key);
                    if is_tracked(kind, &value) {
                        match consumed_objects(kind, &value) {
                            Ok(objects) => self.index(&key, &objects),
                            Err(message) => {
                                warn!(workload = %key, %message, "config tracking: cannot read the pod template")
                            }
                        }
                        self.debouncer.touch(key, now);
                    } else {
                        self.debouncer.remove(&key);
                    }
                }
                watcher::Event::Delete(obj) => {
                    let key = workload_ref(kind, &obj);
                    write(&self.stores.workloads).remove(&key);
                    self.forget(&key);
                }
                watcher::Event::Init => {
                    self.relisting.insert(kind, HashMap::new());
                }
                watcher::Event::InitDone => {
                    let listed = self.relisting.remove(&kind).unwrap_or_default();
                    let gone: Vec<WorkloadRef> = {
                        let mut stored = write(&self.stores.workloads);
                        let gone = stored
                            .keys()
                            .filter(|k| k.kind == kind && !listed.contains_key(k))
                            .cloned()
                            .collect::<Vec<_>>();
                        for key in &gone {
                            stored.remove(key);
                        }
                        stored.extend(listed);
                        gone
                    };
                    // Deleted while the watch was down.
                    for key in gone {
                        self.forget(&key);
                    }
                    self.listed(kind.to_string());
                }
            },
            Signal::Config(kind, event) => self.on_config(kind, event, now),
        }
    }

    /// A workload that is gone.
    fn forget(&mut self, key: &WorkloadRef) {
        self.handled.lock().unwrap().seen.remove(key);
        self.unindex(key);
        self.debouncer.remove(key);
        self.announced.remove(key);
        self.touched_by.remove(key);
    }

    fn on_config(
        &mut self,
        kind: ConfigKind,
        event: watcher::Event<(String, String)>,
        now: Instant,
    ) {
        let (ns, name) = match event {
            watcher::Event::Init => {
                self.relisting_configs.insert(kind, HashSet::new());
                return;
            }
            watcher::Event::InitDone => {
                let listed = self.relisting_configs.remove(&kind).unwrap_or_default();
                let mut stored = write(&self.stores.configs);
                stored.retain(|k| k.0 != kind);
                stored.extend(listed);
                drop(stored);
                self.listed(kind.to_string());
                return;
            }
            watcher::Event::InitApply((ns, name)) => {
                let key = (kind, ns.clone(), name.clone());
                match self.relisting_configs.get_mut(&kind) {
                    Some(listed) => listed.insert(key),
                    None => write(&self.stores.configs).insert(key),
                };
                (ns, name)
            }
            watcher::Event::Apply((ns, name)) => {
                write(&self.stores.configs).insert((kind, ns.clone(), name.clone()));
                (ns, name)
            }
            watcher::Event::Delete((ns, name)) => {
                write(&self.stores.configs).remove(&(kind, ns.clone(), name.clone()));
                (ns, name)
            }
        };
        let consumers = self
            .consumers
            .get(&(kind, ns, name.clone()))
            .cloned()
            .unwrap_or_default();
        for key in consumers {
            self.touched_by
                .entry(key.clone())
                .or_default()
                .insert(format!("{kind} {name}"));
            self.debouncer.touch(key, now);
        }
    }

    fn listed(&mut self, stream: String) {
        self.listed.insert(stream);
        if self.listed.len() == STREAMS {
            self.ready.send_replace(true);
        }
    }

    fn index(&mut self, key: &WorkloadRef, objects: &[ConsumedObject]) {
        let keys: Vec<ObjectKey> = objects
            .iter()
            .map(|o| (o.kind, key.namespace.clone(), o.name.clone()))
            .collect();
        for k in &keys {
            self.consumers
                .entry(k.clone())
                .or_default()
                .insert(key.clone());
        }
        self.uses.insert(key.clone(), keys);
    }

    fn unindex(&mut self, key: &WorkloadRef) {
        for k in self.uses.remove(key).unwrap_or_default() {
            if let Some(set) = self.consumers.get_mut(&k) {
                set.remove(key);
                if set.is_empty() {
                    self.consumers.remove(&k);
                }
            }
        }
    }

    async fn reconcile(&mut self, key: WorkloadRef) {
        let Some(obj) = self.stores.workload(&key) else {
            return;
        };
        let annotations = obj.annotations();
        let owner = annotations.get(RELEASE_NAME_ANNOTATION).map(|name| {
            let ns = annotations
                .get(RELEASE_NAMESPACE_ANNOTATION)
                .unwrap_or(&key.namespace);
            (ns.as_str(), name.as_str())
        });
        if !self.owned.owns(&key.namespace, owner) {
            return;
        }
        let value = serde_json::to_value(&obj).unwrap_or(Value::Null);
        if !is_tracked(key.kind, &value) {
            return;
        }
        let Ok(objects) = consumed_objects(key.kind, &value) else {
            return;
        };
        let resolved = match resolve(&self.client, &key.namespace, objects).await {
            Ok(resolved) => resolved,
            Err(e) => {
                warn!(workload = %key, error = %e, "config tracking: cannot read consumed config; retrying");
                self.debouncer.touch(key, Instant::now());
                return;
            }
        };
        let gated = is_gated(key.kind, &value);
        let current = template_hash(key.kind, &value);
        let hash_key = match &self.keys {
            Some(keys) => keys.get().await,
            None => super::HashKey::Unkeyed,
        };
        match decide(current.as_deref(), gated, &resolved, &hash_key) {
            Decision::Nothing => {
                self.announced.remove(&key);
                self.touched_by.remove(&key);
            }
            Decision::Wait { missing } => {
                let list = missing
                    .iter()
                    .map(|o| format!("{} {}/{}", o.kind, key.namespace, o.name))
                    .collect::<Vec<_>>()
                    .join(", ");
                let (reason, note) = if gated {
                    ("ConfigPending", format!("waiting for {list}"))
                } else {
                    (
                        "ConfigMissing",
                        format!(
                            "{list} does not exist; the running pods are left alone until it does"
                        ),
                    )
                };
                if self.announced.get(&key) != Some(&note) {
                    info!(workload = %key, "{note}");
                    self.publish(&obj, &key, EventType::Warning, reason, note.clone())
                        .await;
                    self.announced.insert(key, note);
                }
            }
            Decision::Patch { hash } => {
                let patch = hash_patch(key.kind, &value, &hash);
                let ar = key.kind.api_resource();
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), &key.namespace, &ar);
                // A release's workload is written under the release's manager, so a
                // `helm rollback` by hand folds the change in (csaupgrade) instead of
                // stopping at a conflict.
                let manager = if crate::helm::apply::manifest::owner_of(&obj).is_some() {
                    crate::helm::apply::RELEASE_FIELD_MANAGER
                } else {
                    FIELD_MANAGER
                };
                let params = PatchParams {
                    field_manager: Some(manager.into()),
                    ..Default::default()
                };
                match api.patch(&key.name, &params, &Patch::Merge(&patch)).await {
                    Ok(_) => {
                        let note = if gated {
                            format!(
                                "config is present; pods released with config hash {}",
                                &hash[..12]
                            )
                        } else {
                            format!(
                                "consumed config changed; rolling with config hash {}",
                                &hash[..12]
                            )
                        };
                        info!(workload = %key, "{note}");
                        self.announced.remove(&key);
                        let touched = self.touched_by.remove(&key).unwrap_or_default();
                        // Recorded on the release only for a workload in the release's own
                        // namespace: the annotations naming the release are the workload's
                        // to write, and one namespace must not put records on another's
                        // HelmRelease.
                        if let (Some(rolled), Some((ns, release)), false) =
                            (&self.rolled, owner, gated)
                            && ns == key.namespace
                        {
                            let changed = if touched.is_empty() {
                                resolved
                                    .iter()
                                    .map(|r| format!("{} {}", r.object.kind, r.object.name))
                                    .collect()
                            } else {
                                touched.into_iter().collect()
                            };
                            let _ = rolled.send(Rolled {
                                release: (ns.to_owned(), release.to_owned()),
                                workload: key.clone(),
                                changed,
                                hash: hash[..12].to_owned(),
                            });
                        }
                        self.publish(&obj, &key, EventType::Normal, "ConfigChanged", note)
                            .await;
                        if gated && key.kind == WorkloadKind::StatefulSet {
                            self.replace_gated_pods(&key, &obj).await;
                        }
                    }
                    Err(e) => {
                        warn!(workload = %key, error = %crate::helm::apply::api_message(&e), "config tracking: patch failed; retrying");
                        self.debouncer.touch(key, Instant::now());
                    }
                }
            }
        }
    }

    /// A StatefulSet's rolling update waits for its current pods to become Ready, which
    /// gated pods never do; they never started, so deleting them loses nothing and lets
    /// the controller create them from the new template.
    async fn replace_gated_pods(&self, key: &WorkloadRef, obj: &DynamicObject) {
        let Some(uid) = obj.uid() else { return };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let list = match pods.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(e) => {
                warn!(workload = %key, error = %crate::helm::apply::api_message(&e), "config tracking: cannot list pods");
                return;
            }
        };
        for pod in list {
            let owned = pod.owner_references().iter().any(|o| o.uid == uid);
            let gated = pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| g.iter().any(|g| g.name == CONFIG_PENDING_GATE));
            if owned
                && gated
                && let Err(e) = pods.delete(&pod.name_any(), &DeleteParams::default()).await
            {
                debug!(pod = %pod.name_any(), error = %crate::helm::apply::api_message(&e), "config tracking: cannot delete a gated pod");
            }
        }
    }

    async fn publish(
        &self,
        obj: &DynamicObject,
        key: &WorkloadRef,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let reference = obj.object_ref(&key.kind.api_resource());
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "TrackConfig".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            debug!(workload = %key, error = %e, "config tracking: cannot publish an Event");
        }
    }
}

fn workload_ref(kind: WorkloadKind, obj: &DynamicObject) -> WorkloadRef {
    WorkloadRef {
        kind,
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
    }
}
