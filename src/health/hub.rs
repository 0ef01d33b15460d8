//! Watches shared by every running wait: one watch per (kind, namespace), started when a
//! wait first needs it and stopped when the last wait using it ends. A thousand releases
//! waiting in one namespace then cost one Deployment watch and one Pod watch, not a
//! thousand of each (each its own connection and its own copy of the namespace's pods).
//!
//! ConfigMaps and Secrets are watched by metadata only: a wait needs to know that they
//! exist, never their data. The other kinds are kept as readiness reads them
//! ([`View::Readiness`]): a pod without most of its spec, a workload with its pod
//! template as a digest. During a fleet's first install every namespace with a wait holds
//! all of its Deployments, ReplicaSets and pods here, and the templates were most of them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock, Weak};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{broadcast, watch};

/// A change to one watched object, by name.
#[derive(Debug, Clone)]
pub enum Change {
    Applied(Arc<DynamicObject>),
    Deleted(String),
    /// The watch missed changes (a subscriber fell behind): look at the store again.
    Resync,
}

/// How much of each object a subscriber reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// What the built-in readiness, fail-fast and Helm 3 rules read (see [`slim`]; no
    /// annotations).
    Readiness,
    /// Everything but managed fields: a user's health expression may read any field.
    Whole,
}

type Key = (String, String, String, Option<String>, View);

/// Cloning shares the hub.
#[derive(Clone)]
pub struct WatchHub {
    client: Client,
    shared: Arc<Mutex<HashMap<Key, Weak<Shared>>>>,
}

struct Shared {
    objects: Arc<RwLock<BTreeMap<String, Arc<DynamicObject>>>>,
    changes: broadcast::Sender<Change>,
    listed: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A wait's view of one shared watch: the current objects. The watch runs while a
/// `Store` or its change stream lives.
#[derive(Clone)]
pub struct Store(Arc<Shared>);

impl Store {
    /// Waits for the watch's first list.
    pub async fn listed(&self) {
        let mut listed = self.0.listed.clone();
        let _ = listed.wait_for(|l| *l).await;
    }

    pub fn get(&self, name: &str) -> Option<Arc<DynamicObject>> {
        self.read().get(name).cloned()
    }

    pub fn all(&self) -> Vec<Arc<DynamicObject>> {
        self.read().values().cloned().collect()
    }

    /// The objects `keep` accepts (without cloning the rest: a store may hold thousands).
    pub fn filtered(&self, keep: impl Fn(&DynamicObject) -> bool) -> Vec<Arc<DynamicObject>> {
        self.read().values().filter(|o| keep(o)).cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<DynamicObject>>> {
        self.0.objects.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for WatchHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running = self
            .shared
            .lock()
            .map_or(0, |m| m.values().filter(|w| w.strong_count() > 0).count());
        write!(f, "WatchHub({running} watches)")
    }
}

impl WatchHub {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            shared: Arc::default(),
        }
    }

    /// Subscribes to the objects of `resource` in `namespace` (all namespaces: `None`):
    /// their store, and every change from now on (a subscriber that falls behind gets
    /// `Resync` and reads the store again).
    pub fn subscribe(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        view: View,
    ) -> (Store, BoxStream<'static, Change>) {
        let key = (
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
            namespace.map(str::to_owned),
            view,
        );
        let shared = {
            let mut map = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, w| w.strong_count() > 0);
            match map.get(&key).and_then(Weak::upgrade) {
                Some(shared) => shared,
                None => {
                    let shared = Arc::new(start(self.client.clone(), resource, namespace, view));
                    map.insert(key, Arc::downgrade(&shared));
                    shared
                }
            }
        };
        let rx = shared.changes.subscribe();
        let changes = futures::stream::unfold((rx, shared.clone()), |(mut rx, keep)| async move {
            let change = match rx.recv().await {
                Ok(change) => change,
                Err(broadcast::error::RecvError::Lagged(_)) => Change::Resync,
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((change, (rx, keep)))
        })
        .boxed();
        (Store(shared), changes)
    }
}

/// Kinds whose readiness is their existence and whose data can be large.
fn metadata_only(resource: &ApiResource) -> bool {
    resource.group.is_empty() && matches!(resource.kind.as_str(), "ConfigMap" | "Secret")
}

/// `data` as [`View::Readiness`] keeps it: pods as [`slim_pod`] leaves them, a workload's
/// pod template as its digest (see [`template_digest`]: the only use of a template is
/// telling a Deployment's from its ReplicaSets').
fn slim(resource: &ApiResource, data: &mut serde_json::Value) {
    let templated = match resource.group.as_str() {
        "" => {
            if resource.kind == "Pod" {
                slim_pod(data);
            }
            resource.kind == "ReplicationController"
        }
        "apps" => matches!(
            resource.kind.as_str(),
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        ),
        "batch" => resource.kind == "Job",
        _ => false,
    };
    if templated && let Some(template) = data.pointer_mut("/spec/template") {
        *template = serde_json::Value::String(template_digest(template));
    }
}

/// The label the deployment controller adds to a ReplicaSet's copy of the template.
pub(super) const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// A pod template's digest, the same for a Deployment's template and its ReplicaSet's
/// copy (which differs by the `pod-template-hash` label alone, as the deployment
/// controller compares them); a template already cut to its digest is its digest.
pub fn template_digest(template: &serde_json::Value) -> String {
    use sha2::{Digest, Sha256};
    if let Some(digest) = template.as_str() {
        return digest.to_owned();
    }
    let hashed = template
        .pointer("/metadata/labels")
        .and_then(|l| l.get(POD_TEMPLATE_HASH));
    let json = match hashed {
        None => serde_json::to_vec(template),
        Some(_) => {
            let mut unhashed = template.clone();
            if let Some(labels) = unhashed
                .pointer_mut("/metadata/labels")
                .and_then(|l| l.as_object_mut())
            {
                labels.remove(POD_TEMPLATE_HASH);
            }
            serde_json::to_vec(&unhashed)
        }
    }
    .expect("JSON serialises");
    // Maps serialise with sorted keys: equal templates give equal bytes.
    format!("sha256:{}", hex::encode(Sha256::digest(json)))
}

/// A pod as waits read it: its metadata and status, and of its spec only what says
/// where and what it runs. A namespace of a thousand releases holds a thousand pods in
/// this store, each mostly spec (volumes, env, tolerations) that no readiness or
/// fail-fast rule reads.
fn slim_pod(data: &mut serde_json::Value) {
    let Some(spec) = data.get_mut("spec").and_then(|s| s.as_object_mut()) else {
        return;
    };
    spec.retain(|k, _| {
        matches!(
            k.as_str(),
            "nodeName" | "restartPolicy" | "schedulerName" | "containers" | "initContainers"
        )
    });
    for key in ["containers", "initContainers"] {
        for container in spec
            .get_mut(key)
            .and_then(|c| c.as_array_mut())
            .into_iter()
            .flatten()
        {
            if let Some(c) = container.as_object_mut() {
                c.retain(|k, _| k == "name" || k == "image");
            }
        }
    }
}

fn start(client: Client, resource: &ApiResource, namespace: Option<&str>, view: View) -> Shared {
    let (changes, _) = broadcast::channel(1024);
    let (listed_tx, listed) = watch::channel(false);
    let objects: Arc<RwLock<BTreeMap<String, Arc<DynamicObject>>>> = Arc::default();
    let events: BoxStream<'static, watcher::Result<watcher::Event<DynamicObject>>> =
        if metadata_only(resource) {
            let api: Api<PartialObjectMeta<DynamicObject>> = match namespace {
                Some(ns) => Api::namespaced_with(client, ns, resource),
                None => Api::all_with(client, resource),
            };
            let types = kube::api::TypeMeta {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
            };
            let dynamic = move |m: PartialObjectMeta<DynamicObject>| DynamicObject {
                types: Some(types.clone()),
                metadata: m.metadata,
                data: serde_json::Value::Null,
            };
            watcher(api, watcher::Config::default())
                .default_backoff()
                .map(move |e| {
                    e.map(|e| match e {
                        watcher::Event::Apply(m) => watcher::Event::Apply(dynamic(m)),
                        watcher::Event::InitApply(m) => watcher::Event::InitApply(dynamic(m)),
                        watcher::Event::Delete(m) => watcher::Event::Delete(dynamic(m)),
                        watcher::Event::Init => watcher::Event::Init,
                        watcher::Event::InitDone => watcher::Event::InitDone,
                    })
                })
                .boxed()
        } else {
            let api: Api<DynamicObject> = match namespace {
                Some(ns) => Api::namespaced_with(client, ns, resource),
                None => Api::all_with(client, resource),
            };
            watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed()
        };
    let slimmed = (view == View::Readiness).then(|| resource.clone());
    let task = {
        let (objects, changes) = (objects.clone(), changes.clone());
        tokio::spawn(async move {
            let mut events = events;
            // Names seen in the list being received (a relist replaces the store).
            let mut relisting: Option<Vec<String>> = None;
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                let mut store = objects.write().unwrap_or_else(|e| e.into_inner());
                match event {
                    watcher::Event::Init => relisting = Some(Vec::new()),
                    watcher::Event::InitApply(mut obj) | watcher::Event::Apply(mut obj) => {
                        // Readiness never reads them, and they are often half an object.
                        obj.metadata.managed_fields = None;
                        if let Some(resource) = &slimmed {
                            // No readiness or fail-fast rule reads one (a user's health
                            // expression gets the whole object).
                            obj.metadata.annotations = None;
                            slim(resource, &mut obj.data);
                        }
                        let name = obj.metadata.name.clone().unwrap_or_default();
                        if let Some(seen) = relisting.as_mut() {
                            seen.push(name.clone());
                        }
                        let obj = Arc::new(obj);
                        store.insert(name, obj.clone());
                        let _ = changes.send(Change::Applied(obj));
                    }
                    watcher::Event::Delete(obj) => {
                        let name = obj.metadata.name.clone().unwrap_or_default();
                        store.remove(&name);
                        let _ = changes.send(Change::Deleted(name));
                    }
                    watcher::Event::InitDone => {
                        if let Some(seen) = relisting.take() {
                            let seen: std::collections::HashSet<String> =
                                seen.into_iter().collect();
                            let gone: Vec<String> = store
                                .keys()
                                .filter(|k| !seen.contains(*k))
                                .cloned()
                                .collect();
                            for name in gone {
                                store.remove(&name);
                                let _ = changes.send(Change::Deleted(name));
                            }
                        }
                        listed_tx.send_replace(true);
                    }
                }
            }
        })
    };
    Shared {
        objects,
        changes,
        listed,
        task,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_slimmed_pod_keeps_what_waits_read() {
        let mut pod = serde_json::json!({
            "metadata": {"name": "web-1", "labels": {"app": "web"}},
            "spec": {
                "nodeName": "n1", "restartPolicy": "Always",
                "containers": [{"name": "app", "image": "web:1", "env": [{"name": "A", "value": "b"}]}],
                "volumes": [{"name": "token", "projected": {}}],
                "tolerations": [{"key": "k"}],
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]},
        });
        let status = pod["status"].clone();
        let metadata = pod["metadata"].clone();
        super::slim_pod(&mut pod);
        assert_eq!(pod["status"], status);
        assert_eq!(pod["metadata"], metadata);
        assert_eq!(
            pod["spec"],
            serde_json::json!({"nodeName": "n1", "restartPolicy": "Always",
                               "containers": [{"name": "app", "image": "web:1"}]})
        );
    }

    #[test]
    fn a_slimmed_workload_keeps_its_template_as_a_digest_equal_to_its_replica_sets() {
        use kube::api::ApiResource;
        let template = |image: &str, hash: Option<&str>| {
            let mut t = serde_json::json!({
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": image, "env": [{"name": "A", "value": "b"}]}]},
            });
            if let Some(h) = hash {
                t["metadata"]["labels"]["pod-template-hash"] = h.into();
            }
            t
        };
        let deployment_ar = ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
        let rs_ar = ApiResource::erase::<k8s_openapi::api::apps::v1::ReplicaSet>(&());
        let mut deployment = serde_json::json!({
            "spec": {"replicas": 2, "strategy": {"type": "RollingUpdate"}, "template": template("web:2", None)},
            "status": {"observedGeneration": 3, "readyReplicas": 1},
        });
        let whole = deployment.clone();
        super::slim(&deployment_ar, &mut deployment);
        // What readiness reads is left as it was; the template is a digest.
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(deployment["spec"]["strategy"], whole["spec"]["strategy"]);
        assert_eq!(deployment["status"], whole["status"]);
        assert!(
            deployment["spec"]["template"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );

        let mut current = serde_json::json!({"spec": {"template": template("web:2", Some("abc"))}});
        let mut old = serde_json::json!({"spec": {"template": template("web:1", Some("def"))}});
        super::slim(&rs_ar, &mut current);
        super::slim(&rs_ar, &mut old);
        let same = crate::health::failfast::same_template;
        assert!(same(
            &deployment["spec"]["template"],
            &current["spec"]["template"]
        ));
        assert!(!same(
            &deployment["spec"]["template"],
            &old["spec"]["template"]
        ));
        // A whole template and a digest of the same compare equal.
        assert!(same(
            &whole["spec"]["template"],
            &current["spec"]["template"]
        ));
        // Kinds without a pod template are left whole.
        let mut service =
            serde_json::json!({"spec": {"template": {"x": 1}, "ports": [{"port": 80}]}});
        let before = service.clone();
        super::slim(
            &ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
            &mut service,
        );
        assert_eq!(service, before);
    }
}
