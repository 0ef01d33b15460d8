//! What wakes a release's worker besides its own HelmRelease: another tool writing its
//! Helm record, someone changing its workloads, and the HelmRelease that held it.

use super::*;

/// One event of the watches of [`crate::engine::object_changes::WATCHED`] (`kind` indexes it).
pub(super) enum WorkloadEvent {
    /// Written (or listed, `initial`: the watch's list says nothing of what changed).
    Applied {
        kind: usize,
        meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        initial: bool,
    },
    Deleted {
        kind: usize,
        meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    },
    Relisting(usize),
    Relisted(usize),
}

impl Dispatcher {
    /// Helm's storage Secrets in our scope, metadata only (labels and managedFields say
    /// all a wake-up needs; the records themselves can be large).
    pub(super) fn record_events(
        &self,
    ) -> futures::stream::BoxStream<
        'static,
        Result<
            watcher::Event<kube::api::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>>,
            watcher::Error,
        >,
    > {
        let api = self.coverage.scope.api::<kube::api::PartialObjectMeta<
            k8s_openapi::api::core::v1::Secret,
        >>(self.ctx.client.clone());
        watcher(api, watcher::Config::default().labels("owner=helm"))
            .default_backoff()
            .boxed()
    }
    /// Deployments, StatefulSets, DaemonSets, ConfigMaps, Secrets and Services in our
    /// scope ([`crate::engine::object_changes::WATCHED`], in that order), metadata only (generation,
    /// managedFields and Helm annotations: never a Secret's data).
    pub(super) fn workload_events(&self) -> futures::stream::BoxStream<'static, WorkloadEvent> {
        use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
        use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
        use kube::api::PartialObjectMeta;
        fn metas<K>(
            kind: usize,
            api: Api<PartialObjectMeta<K>>,
        ) -> futures::stream::BoxStream<'static, WorkloadEvent>
        where
            K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
            K::DynamicType: Default,
        {
            watcher(api, watcher::Config::default())
                .default_backoff()
                .filter_map(move |event| async move {
                    Some(match event.ok()? {
                        watcher::Event::Apply(o) => WorkloadEvent::Applied {
                            kind,
                            meta: o.metadata,
                            initial: false,
                        },
                        watcher::Event::InitApply(o) => WorkloadEvent::Applied {
                            kind,
                            meta: o.metadata,
                            initial: true,
                        },
                        watcher::Event::Delete(o) => WorkloadEvent::Deleted {
                            kind,
                            meta: o.metadata,
                        },
                        watcher::Event::Init => WorkloadEvent::Relisting(kind),
                        watcher::Event::InitDone => WorkloadEvent::Relisted(kind),
                    })
                })
                .boxed()
        }
        let client = self.ctx.client.clone();
        let scope = &self.coverage.scope;
        futures::stream::select_all([
            metas(
                0,
                scope.api::<PartialObjectMeta<Deployment>>(client.clone()),
            ),
            metas(
                1,
                scope.api::<PartialObjectMeta<StatefulSet>>(client.clone()),
            ),
            metas(2, scope.api::<PartialObjectMeta<DaemonSet>>(client.clone())),
            // Kinds without a generation: any write by someone else counts.
            metas(3, scope.api::<PartialObjectMeta<ConfigMap>>(client.clone())),
            metas(4, scope.api::<PartialObjectMeta<Secret>>(client.clone())),
            metas(5, scope.api::<PartialObjectMeta<Service>>(client)),
        ])
        .boxed()
    }
    /// Wakes the worker of the HelmRelease whose release `workload` belongs to (by Helm's
    /// annotations), when its spec changed (a newer generation) and the last writer of
    /// its spec was neither wheelhouse's apply (`helm`) nor its config tracking.
    pub(super) fn wake_for_workload(
        store: &Store,
        workers: &HashMap<ReleaseKey, Worker>,
        generations: &mut HashMap<String, i64>,
        workload: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        initial: bool,
    ) {
        let Some(uid) = workload.uid.as_ref() else {
            return;
        };
        // A workload's spec changes with its generation (its status does not); a kind
        // without one counts each write. A (re)list says nothing about what changed: it
        // is judged by its last writer alone, since the watch may have started (or
        // restarted) after someone's edit.
        if let Some(generation) = workload.generation {
            let before = generations.insert(uid.clone(), generation);
            if !initial && before.is_none_or(|b| b >= generation) {
                return;
            }
        }
        let Some(writer) = release_drift::writer_not_ours(workload) else {
            return;
        };
        let annotation = |key: &str| workload.annotations.as_ref().and_then(|a| a.get(key));
        let (Some(release), Some(namespace)) = (
            annotation(crate::helm::apply::manifest::RELEASE_NAME_ANNOTATION),
            annotation(crate::helm::apply::manifest::RELEASE_NAMESPACE_ANNOTATION),
        ) else {
            return;
        };
        for (key, hr) in store.named(release) {
            if &hr.target_namespace() == namespace
                && let Some(w) = workers.get(key)
            {
                tracing::info!(release = %key, writer, "a workload of the release changed: checking for drift now");
                let look = Command::Reconcile(key.clone());
                let _ = w.inbox.send(Msg::Command(Box::new((look, String::new()))));
            }
        }
    }
    /// Wakes the worker of each HelmRelease managing the release `record` belongs to, when
    /// the record's last writer was not wheelhouse.
    pub(super) fn wake_for_record(
        store: &Store,
        workers: &HashMap<ReleaseKey, Worker>,
        record: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) {
        let last_writer = record
            .managed_fields
            .iter()
            .flatten()
            .max_by(|a, b| a.time.cmp(&b.time))
            .and_then(|m| m.manager.as_deref());
        if last_writer.is_none_or(|m| m == crate::helm::release::FIELD_MANAGER) {
            return;
        }
        let (Some(namespace), Some(name)) = (
            record.namespace.as_deref(),
            record.labels.as_ref().and_then(|l| l.get("name")),
        ) else {
            return;
        };
        for (key, hr) in store.named(name) {
            if hr.storage_namespace() == namespace
                && let Some(w) = workers.get(key)
            {
                tracing::info!(release = %key, writer = last_writer.unwrap_or_default(), "another tool wrote a release record: looking now");
                let look = Command::Reconcile(key.clone());
                let _ = w.inbox.send(Msg::Command(Box::new((look, String::new()))));
            }
        }
    }
    /// Asks the workers of blocked releases to look again, when a change is due and the
    /// last ask was a while ago; true while a change is still due (the tick comes back).
    pub(super) fn poke_blocked(
        &mut self,
        workers: &HashMap<ReleaseKey, Worker>,
        acting: bool,
    ) -> bool {
        if !self.poke_due || !acting {
            self.poke_due = false;
            return false;
        }
        let now = tokio::time::Instant::now();
        if self
            .last_poke
            .is_some_and(|at| now.duration_since(at) < POKE_EVERY)
        {
            return true;
        }
        for key in &self.blocked {
            if let Some(w) = workers.get(key) {
                let look = Command::Reconcile(key.clone());
                let _ = w.inbox.send(Msg::Command(Box::new((look, String::new()))));
            }
        }
        self.last_poke = Some(now);
        self.poke_due = false;
        false
    }
}
