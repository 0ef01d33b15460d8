//! The dispatcher: one watch on HelmReleases feeds the views and, while this process
//! holds the engine lease, one worker per release. Each event source of its loop has a
//! method of its own.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::coverage::{self, Coverage};
use super::healing::watch_healing;
use super::lease::Role;
use super::liveness::{LIVENESS_EVERY, PROBE_EVERY, liveness_probe};
use super::namespaces::HeldNamespaces;
use super::release_drift;
use super::run::{Context, Inbox, Msg};
use super::status;
use super::undecodable::report_undecodable;
use super::vocabulary::{
    Command, Connection, LiveMap, ReleaseKey, ReleaseMap, ReleaseView, Views, changed_keys,
};
use super::worker;
use crate::api::{HelmRelease, RawHelmRelease, Undecodable};
use crate::client::Scope;
use crate::tracking;

/// The most often the views are rebuilt (a change reaches the screen within this).
const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A running worker: its mailbox and its own stop token (a release that leaves this
/// engine's coverage stops like a lost lease: the current step ends, nothing is undone).
pub(super) struct Worker {
    inbox: mpsc::UnboundedSender<Msg>,
    stop: CancellationToken,
    /// Cancelled when the worker's task has ended.
    finished: CancellationToken,
}

impl Worker {
    /// Stops a worker whose release left this engine (relabelled to another shard, its
    /// namespace taken by a namespace engine): its current step finishes, then the
    /// release's status records that this engine let go, the sign its successor waits for.
    fn hand_over(self, ctx: &Arc<Context>, key: &ReleaseKey) {
        self.stop.cancel();
        let (ctx, key) = (ctx.clone(), key.clone());
        tokio::spawn(async move {
            self.finished.cancelled().await;
            let api: Api<crate::api::HelmRelease> =
                Api::namespaced(ctx.client.clone(), &key.namespace);
            match status::write_let_go(&api, &key.name, &ctx.engine).await {
                Ok(()) => tracing::info!(release = %key, "let go of the release"),
                Err(e) => {
                    tracing::warn!(release = %key, error = %e, "cannot record letting go of the release")
                }
            }
        });
    }
}

/// The term of a leader: its stop token and its workers.
pub(super) type Term = (CancellationToken, TaskTracker);

/// What the dispatcher's loop keeps from one event to the next.
#[derive(Default)]
pub(super) struct Loop {
    pub(super) store: Store,
    /// The releases seen since the watch began a (re)list.
    relisted: Option<HashSet<ReleaseKey>>,
    pub(super) workers: HashMap<ReleaseKey, Worker>,
    /// While leading: the term's stop token and its workers.
    term: Option<Term>,
    /// The workers of the last term, still finishing their step.
    draining: Option<TaskTracker>,
    /// Each workload's generation as last seen: a newer one is a change of its spec.
    generations: HashMap<String, i64>,
    watch_failing: bool,
    probe_failing: bool,
    /// Views changed since they were last published.
    dirty: bool,
    /// Which releases are ours changes with releases, Leases and terms, not with the
    /// workers' progress: the tracker learns it only then.
    ownership_stale: bool,
}

pub(super) struct Dispatcher {
    pub(super) ctx: Arc<Context>,
    /// Raw, so that one object that does not decode never fails the whole watch.
    pub(super) api: Api<RawHelmRelease>,
    pub(super) role: watch::Receiver<Role>,
    pub(super) live: watch::Receiver<LiveMap>,
    pub(super) views: watch::Sender<Arc<Views>>,
    pub(super) connection: watch::Sender<Connection>,
    pub(super) direct: mpsc::UnboundedReceiver<(Command, String)>,
    pub(super) stop: CancellationToken,
    pub(super) coverage: Coverage,
    pub(super) identity: String,
    /// Every worker task, so a shutdown can wait for them.
    pub(super) workers: TaskTracker,
    /// Tells the lease task that no worker of any term is running any more.
    pub(super) idle: Arc<watch::Sender<bool>>,
    /// For a cluster-wide engine: the namespaces whose namespace engine holds its Lease.
    pub(super) held: HeldNamespaces,
    /// Namespaces this term has started workers in. A namespace engine that takes its
    /// Lease later defers to us there, so we go on.
    pub(super) acting: HashSet<String>,
    /// The releases this engine reconciles, for the config tracker.
    pub(super) owned: tracking::Ownership,
    /// The config tracker of the current term (the lease holder's), if any.
    pub(super) tracker: watch::Sender<Option<tracking::TrackerHandle>>,
    /// The views as published next: kept up to date one release at a time.
    pub(super) shown: ReleaseMap,
    /// The workers' live states the views were last brought up to date with.
    pub(super) seen_live: LiveMap,
    /// Whether the watch's initial list has completed.
    pub(super) listed: bool,
    /// Releases held by a guard whose cause is another HelmRelease (a dependency not
    /// Ready, a dependsOn cycle, a release conflict): looked at again when any HelmRelease
    /// changes, at most once a second, instead of at their interval.
    pub(super) blocked: HashSet<ReleaseKey>,
    pub(super) poke_due: bool,
    pub(super) last_poke: Option<tokio::time::Instant>,
    /// Per release, cancelled when this engine's last worker of it has ended: a new
    /// worker starts after the old one's step.
    pub(super) finished: HashMap<ReleaseKey, CancellationToken>,
}

/// Ready reasons of the guards whose cause is another HelmRelease.
const BLOCKED_BY_OTHERS: [&str; 3] = [
    status::reason::DEPENDENCY_NOT_READY,
    status::reason::DEPENDENCY_CYCLE,
    status::reason::RELEASE_CONFLICT,
];

/// How often releases held by another HelmRelease are looked at again, at most.
const POKE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The store of watched releases: decoded (or a stand-in) and, for those that do not
/// decode, why and the generation last reported.
#[derive(Default)]
pub(super) struct Store {
    releases: BTreeMap<ReleaseKey, Arc<HelmRelease>>,
    bad: BTreeMap<ReleaseKey, (String, Option<i64>)>,
}

impl Dispatcher {
    pub(super) async fn run(mut self) {
        let mut config = watcher::Config::default();
        if self.coverage.shard.is_some() {
            // A shard engine lists only its own releases. The unsharded engine lists all,
            // to tell which workloads belong to another shard's releases.
            config = config.labels(&self.coverage.label_selector());
        }
        let mut events = watcher(self.api.clone(), config).default_backoff().boxed();
        let mut leases = self.namespace_lease_events();
        let mut records = self.record_events();
        let mut workloads = self.workload_events();
        let mut st = Loop::default();
        // A hung API server breaks no watch; an active probe notices it too. It runs on
        // its own task, so a slow answer never holds up events and views.
        let mut probe = liveness_probe(self.ctx.client.clone(), self.stop.clone());
        tokio::spawn(watch_healing(self.ctx.clone(), self.stop.clone()));
        let mut leases_expire = tokio::time::interval(LIVENESS_EVERY);
        leases_expire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut publish = tokio::time::interval(PUBLISH_EVERY);
        publish.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                _ = publish.tick(), if st.dirty => self.on_publish_tick(&mut st),
                event = events.next() => {
                    let Some(event) = event else { break };
                    self.on_release_event(&mut st, event);
                }
                Some(event) = leases.next() => self.on_namespace_lease(&mut st, event),
                Ok(()) = self.role.changed() => self.on_role_changed(&mut st).await,
                Some(event) = records.next() => self.on_record(&st, event),
                Some((workload, initial)) = workloads.next() => self.on_workload(&mut st, &workload, initial),
                Some((command, token)) = self.direct.recv() => self.on_command(&st, command, token),
                Some(error) = probe.recv() => self.on_probe(&mut st, error),
                _ = leases_expire.tick() => self.on_leases_expire_tick(&mut st),
                Ok(()) = self.live.changed() => self.on_live_changed(&mut st),
            }
        }
        if let Some((t, _)) = st.term {
            t.cancel();
        }
    }

    /// Publishes the views (coalesced: at most once per PUBLISH_EVERY, however many
    /// events arrived), and tells the tracker which releases are ours if that changed.
    fn on_publish_tick(&mut self, st: &mut Loop) {
        // Coalesced like the views: the tracker learns which releases are ours at most
        // once per tick, not once per event.
        if st.ownership_stale {
            self.share_ownership(&st.store, &st.workers);
            st.ownership_stale = false;
        }
        self.publish();
        st.dirty = self.poke_blocked(&st.workers, st.term.is_some());
    }

    /// A HelmRelease added, changed or deleted (or the watch failing): the store, the
    /// release's worker and its view follow.
    fn on_release_event(
        &mut self,
        st: &mut Loop,
        event: Result<watcher::Event<RawHelmRelease>, watcher::Error>,
    ) {
        // The watch failing (and recovering) is what the front ends show as
        // disconnected: the rows are then the last known state.
        st.watch_failing = event.is_err();
        let error = event.as_ref().err().map(ToString::to_string);
        self.report_connection(st.watch_failing || st.probe_failing, error);
        let mut touched: Option<ReleaseKey> = None;
        match event {
            Ok(watcher::Event::Init) => st.relisted = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(raw) | watcher::Event::Apply(raw)) => {
                touched = Some(self.on_release_applied(st, raw));
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(seen) = st.relisted.take() {
                    let gone: Vec<_> = st
                        .store
                        .releases
                        .keys()
                        .filter(|k| !seen.contains(k))
                        .cloned()
                        .collect();
                    for key in gone {
                        forget(&mut st.store, &mut st.workers, &key);
                        self.refresh_view(&st.store, &key);
                    }
                }
                self.listed = true;
            }
            Ok(watcher::Event::Delete(raw)) => {
                let key = ReleaseKey {
                    namespace: raw.metadata.namespace.clone().unwrap_or_default(),
                    name: raw.metadata.name.clone().unwrap_or_default(),
                };
                // A shard's watch reports a release relabelled away as deleted. One that
                // left only stops, as on a lost lease: its current step finishes and it
                // writes nothing more.
                let left = coverage::left_watch(&raw.metadata);
                if left && let Some(w) = st.workers.remove(&key) {
                    tracing::info!(release = %key, "relabelled to another shard: its worker stops after its current step");
                    w.hand_over(&self.ctx, &key);
                }
                forget(&mut st.store, &mut st.workers, &key);
                touched = Some(key);
            }
            Err(e) => tracing::warn!(error = %e, "HelmRelease watch error"),
        }
        if let Some(key) = touched {
            self.refresh_view(&st.store, &key);
            st.ownership_stale = true;
            // What held a blocked release may have changed with this one.
            let held = st
                .store
                .releases
                .get(&key)
                .and_then(|hr| hr.condition(status::condition::READY))
                .is_some_and(|c| {
                    c.status == "False" && BLOCKED_BY_OTHERS.contains(&c.reason.as_str())
                });
            if held {
                self.blocked.insert(key.clone());
            } else {
                self.blocked.remove(&key);
            }
            self.poke_due |= self.blocked.iter().any(|k| *k != key);
        }
        st.dirty = true;
    }

    /// A HelmRelease as the watch has it now: decoded, it goes to its worker; one that
    /// does not decode stops its worker and is told why (once per generation).
    fn on_release_applied(&mut self, st: &mut Loop, raw: RawHelmRelease) -> ReleaseKey {
        let decoded = raw.decode();
        let hr = Arc::new(match &decoded {
            Ok(hr) => hr.clone(),
            Err(u) => u.placeholder.clone(),
        });
        let key = ReleaseKey::of(&hr);
        if let Some(seen) = st.relisted.as_mut() {
            seen.insert(key.clone());
        }
        st.store.releases.insert(key.clone(), hr.clone());
        match decoded {
            Ok(_) => {
                st.store.bad.remove(&key);
                // Releases of the first list start with the term; one that appears later
                // may come from another shard.
                let handover = self.listed;
                self.dispatch(&mut st.workers, st.term.as_ref(), &key, &hr, handover);
            }
            Err(u) => {
                // Its worker (if it had one) stops; the rest go on.
                st.workers.remove(&key);
                let generation = hr.metadata.generation;
                let reported = st
                    .store
                    .bad
                    .get(&key)
                    .is_some_and(|(_, g)| *g == generation);
                st.store
                    .bad
                    .insert(key.clone(), (u.reason.clone(), generation));
                if st.term.is_some()
                    && self.eligible(&key, &hr)
                    && (!reported || hr.metadata.deletion_timestamp.is_some())
                {
                    tokio::spawn(report_undecodable(self.ctx.clone(), key.clone(), u));
                }
            }
        }
        key
    }

    /// A namespace engine's Lease changed: the namespaces left to it may have too.
    fn on_namespace_lease(&mut self, st: &mut Loop, event: watcher::Event<Lease>) {
        self.held.observe(event, &self.identity);
        self.start_eligible(&st.store, &mut st.workers, st.term.as_ref(), true);
        self.refresh_all(&st.store);
        st.ownership_stale = true;
        st.dirty = true;
    }

    /// This engine took or lost its Lease: a term begins or ends.
    async fn on_role_changed(&mut self, st: &mut Loop) {
        let leader = *self.role.borrow_and_update() == Role::Leader;
        match (&st.term, leader) {
            (None, true) => self.begin_term(st).await,
            (Some(_), false) => self.end_term(st),
            _ => {}
        }
    }

    /// Leading: starts a worker for every release this engine reconciles, and the config
    /// tracker. Workers of a term that lost the lease finish their current step first, so
    /// a regained lease never runs a second writer beside an apply still running.
    async fn begin_term(&mut self, st: &mut Loop) {
        if let Some(old) = st.draining.take() {
            tracing::info!("waiting for the previous term's workers to finish their step");
            old.wait().await;
        }
        // Our Lease is written; now read the namespace engines' (fresh, not from the
        // watch), so that one of us defers to the other. Until they can be read, nothing
        // is started.
        while let Err(e) = self.read_namespace_leases().await {
            tracing::warn!(error = %e, "cannot read the namespace engines' Leases; retrying before acting");
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep(PROBE_EVERY) => {}
            }
        }
        if self.stop.is_cancelled() || *self.role.borrow() != Role::Leader {
            return;
        }
        tracing::info!(coverage = %self.coverage, "holding the engine lease: reconciling");
        // The views say which namespaces we leave to namespace engines before any worker
        // may start.
        self.acting.clear();
        self.refresh_all(&st.store);
        self.publish();
        self.idle.send_replace(false);
        let t: Term = (self.stop.child_token(), TaskTracker::new());
        for (key, hr) in &st.store.releases {
            if let Some((reason, _)) = st.store.bad.get(key)
                && self.eligible(key, hr)
            {
                let u = Undecodable {
                    placeholder: (**hr).clone(),
                    reason: reason.clone(),
                };
                tokio::spawn(report_undecodable(
                    self.ctx.clone(),
                    key.clone(),
                    Box::new(u),
                ));
            }
        }
        self.start_eligible(&st.store, &mut st.workers, Some(&t), false);
        self.share_ownership(&st.store, &st.workers);
        // One writer rolls workloads on config changes: the lease holder, for the
        // releases it reconciles.
        self.tracker.send_replace(Some(crate::tracking::start(
            self.ctx.client.clone(),
            self.coverage.scope.clone(),
            crate::tracking::TrackerConfig {
                owned: self.owned.clone(),
                ..Default::default()
            },
            t.0.child_token(),
        )));
        st.term = Some(t);
        self.refresh_all(&st.store);
        st.ownership_stale = true;
        st.dirty = true;
    }

    /// No longer leading: the term's workers finish their current step and stop.
    fn end_term(&mut self, st: &mut Loop) {
        let Some((t, tracker)) = st.term.take() else {
            return;
        };
        tracing::info!(role = ?*self.role.borrow(), "not holding the engine lease: observing only");
        t.cancel();
        self.tracker.send_replace(None);
        tracker.close();
        st.draining = Some(tracker.clone());
        let idle = self.idle.clone();
        tokio::spawn(async move {
            tracker.wait().await;
            idle.send_replace(true);
        });
        st.workers.clear();
        self.refresh_all(&st.store);
        st.ownership_stale = true;
        st.dirty = true;
    }

    /// Another tool wrote a release record (`helm rollback` by hand): the HelmRelease
    /// managing that release looks at it now, not at its interval.
    fn on_record(
        &self,
        st: &Loop,
        event: Result<
            watcher::Event<kube::api::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>>,
            watcher::Error,
        >,
    ) {
        if let (Ok(watcher::Event::Apply(record)), Some(_)) = (event, &st.term) {
            Self::wake_for_record(&st.store, &st.workers, &record.metadata);
        }
    }

    /// Someone changed a release's workload (`kubectl scale`, `kubectl edit`): its
    /// HelmRelease checks for drift now, not at its interval.
    fn on_workload(
        &self,
        st: &mut Loop,
        workload: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        initial: bool,
    ) {
        if st.term.is_some() {
            Self::wake_for_workload(
                &st.store,
                &st.workers,
                &mut st.generations,
                workload,
                initial,
            );
        }
    }

    /// An operator's command from this process's front end: to the release's worker.
    fn on_command(&self, st: &Loop, command: Command, token: String) {
        let key = command.key().clone();
        if let (Some(w), Some(_)) = (st.workers.get(&key), &st.term) {
            let _ = w.inbox.send(Msg::Command(Box::new((command, token))));
        }
    }

    fn on_probe(&self, st: &mut Loop, error: Option<String>) {
        st.probe_failing = error.is_some();
        self.report_connection(st.watch_failing || st.probe_failing, error);
    }

    /// Namespace Leases also expire without any event.
    fn on_leases_expire_tick(&mut self, st: &mut Loop) {
        if self.held.refresh(&self.identity) {
            self.start_eligible(&st.store, &mut st.workers, st.term.as_ref(), true);
            self.refresh_all(&st.store);
            st.ownership_stale = true;
            st.dirty = true;
        }
    }

    /// Workers moved: their views follow.
    fn on_live_changed(&mut self, st: &mut Loop) {
        let live = self.live.borrow_and_update().clone();
        // Only the releases whose worker moved: the persistent maps share everything
        // else, and `diff` skips what they share.
        let moved = changed_keys(&self.seen_live, &live);
        self.seen_live = live;
        for key in moved {
            self.refresh_view(&st.store, &key);
        }
        st.dirty = true;
    }

    /// Helm's storage Secrets in our scope, metadata only (labels and managedFields say
    /// all a wake-up needs; the records themselves can be large).
    fn record_events(
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
    /// scope, metadata only (generation, managedFields and Helm annotations: never a
    /// Secret's data), with whether each came from a (re)list rather than a change.
    fn workload_events(
        &self,
    ) -> futures::stream::BoxStream<
        'static,
        (
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            bool,
        ),
    > {
        use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
        use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
        use kube::api::PartialObjectMeta;
        fn metas<K>(
            api: Api<PartialObjectMeta<K>>,
        ) -> futures::stream::BoxStream<
            'static,
            (
                k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                bool,
            ),
        >
        where
            K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
            K::DynamicType: Default,
        {
            watcher(api, watcher::Config::default())
                .default_backoff()
                .filter_map(|event| async move {
                    match event.ok()? {
                        watcher::Event::Apply(o) => Some((o.metadata, false)),
                        watcher::Event::InitApply(o) => Some((o.metadata, true)),
                        _ => None,
                    }
                })
                .boxed()
        }
        let client = self.ctx.client.clone();
        let scope = &self.coverage.scope;
        futures::stream::select_all([
            metas(scope.api::<PartialObjectMeta<Deployment>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<StatefulSet>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<DaemonSet>>(client.clone())),
            // Kinds without a generation: any write by someone else counts.
            metas(scope.api::<PartialObjectMeta<ConfigMap>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<Secret>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<Service>>(client)),
        ])
        .boxed()
    }

    /// Wakes the worker of the HelmRelease whose release `workload` belongs to (by Helm's
    /// annotations), when its spec changed (a newer generation) and the last writer of
    /// its spec was neither wheelhouse's apply (`helm`) nor its config tracking.
    fn wake_for_workload(
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
            annotation(crate::apply::manifest::RELEASE_NAME_ANNOTATION),
            annotation(crate::apply::manifest::RELEASE_NAMESPACE_ANNOTATION),
        ) else {
            return;
        };
        for (key, hr) in &store.releases {
            if &hr.release_name() == release
                && &hr.target_namespace() == namespace
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
    fn wake_for_record(
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
        if last_writer.is_none_or(|m| m == crate::release::FIELD_MANAGER) {
            return;
        }
        let (Some(namespace), Some(name)) = (
            record.namespace.as_deref(),
            record.labels.as_ref().and_then(|l| l.get("name")),
        ) else {
            return;
        };
        for (key, hr) in &store.releases {
            if hr.storage_namespace() == namespace
                && &hr.release_name() == name
                && let Some(w) = workers.get(key)
            {
                tracing::info!(release = %key, writer = last_writer.unwrap_or_default(), "another tool wrote a release record: looking now");
                let look = Command::Reconcile(key.clone());
                let _ = w.inbox.send(Msg::Command(Box::new((look, String::new()))));
            }
        }
    }

    /// Whether this engine may act on the release now: it is in our coverage and, for a
    /// cluster-wide engine, no namespace engine holds its namespace (unless we were
    /// there first: then that engine defers).
    fn eligible(&self, key: &ReleaseKey, hr: &HelmRelease) -> bool {
        self.coverage
            .covers(&key.namespace, hr.metadata.labels.as_ref())
            && (self.acting.contains(&key.namespace) || !self.held.is_held(&key.namespace))
    }

    /// Who reconciles a release this engine leaves alone.
    fn elsewhere(&self, key: &ReleaseKey, hr: &HelmRelease) -> Option<String> {
        if !self
            .coverage
            .covers(&key.namespace, hr.metadata.labels.as_ref())
        {
            return Some(match coverage::shard_of(hr.metadata.labels.as_ref()) {
                Some(shard) => format!("shard {shard}"),
                None => "the unsharded engine".into(),
            });
        }
        if self.acting.contains(&key.namespace) {
            return None;
        }
        self.held
            .holder(&key.namespace)
            .map(|h| format!("namespace engine {h}"))
    }

    /// Asks the workers of blocked releases to look again, when a change is due and the
    /// last ask was a while ago; true while a change is still due (the tick comes back).
    fn poke_blocked(&mut self, workers: &HashMap<ReleaseKey, Worker>, acting: bool) -> bool {
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

    /// Passes a changed release to its worker (starting one if needed), or stops the
    /// worker of a release that left our coverage. A worker started with `handover` (the
    /// term was already running) leaves a pending revision alone for a while.
    fn dispatch(
        &mut self,
        workers: &mut HashMap<ReleaseKey, Worker>,
        term: Option<&Term>,
        key: &ReleaseKey,
        hr: &Arc<HelmRelease>,
        handover: bool,
    ) {
        let Some(term) = term else { return };
        if !self.eligible(key, hr) {
            if let Some(w) = workers.remove(key) {
                tracing::info!(release = %key, "left this engine's coverage: its worker stops after its current step");
                w.hand_over(&self.ctx, key);
            }
            return;
        }
        if let Some(w) = workers.get(key)
            && !w.inbox.is_closed()
        {
            let _ = w.inbox.send(Msg::Updated(hr.clone()));
            return;
        }
        self.acting.insert(key.namespace.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inbox = Inbox::new(rx, hr.clone());
        // Started while the term runs: another engine (the shard it was relabelled from)
        // or an earlier worker may still be in its step on this release. Workers of a new
        // term need no such wait: the Lease already made the last holder stop first.
        inbox.handover = handover;
        // An earlier worker of ours on this release may still be in its step.
        inbox.predecessor = self
            .finished
            .get(key)
            .filter(|f| !f.is_cancelled())
            .cloned();
        let stop = term.0.child_token();
        let finished = CancellationToken::new();
        self.finished.insert(key.clone(), finished.clone());
        let run = worker::run(self.ctx.clone(), key.clone(), inbox, stop.clone());
        let ends = finished.clone().drop_guard();
        self.workers.spawn(term.1.track_future(async move {
            let _ends = ends;
            run.await;
        }));
        workers.insert(
            key.clone(),
            Worker {
                inbox: tx,
                stop,
                finished,
            },
        );
    }

    /// Starts workers for every eligible release that has none (a term began, or a
    /// namespace engine let go).
    fn start_eligible(
        &mut self,
        store: &Store,
        workers: &mut HashMap<ReleaseKey, Worker>,
        term: Option<&Term>,
        handover: bool,
    ) {
        if term.is_none() {
            return;
        }
        for (key, hr) in &store.releases {
            if !workers.contains_key(key) && !store.bad.contains_key(key) && self.eligible(key, hr)
            {
                self.dispatch(workers, term, key, hr, handover);
            }
        }
    }

    /// Tells the config tracker which releases are ours and which are other engines'.
    fn share_ownership(&self, store: &Store, workers: &HashMap<ReleaseKey, Worker>) {
        let release = |hr: &HelmRelease| (hr.target_namespace(), hr.release_name());
        let ours = workers
            .keys()
            .filter_map(|k| store.releases.get(k))
            .map(|hr| release(hr))
            .collect();
        let theirs = store
            .releases
            .iter()
            .filter(|(k, _)| !workers.contains_key(k))
            .map(|(_, hr)| release(hr))
            .collect();
        let namespaces = (self.coverage.shard.is_none()).then(|| {
            let held = self.held.held();
            let acting = self.acting.clone();
            let scope = self.coverage.scope.clone();
            Arc::new(move |ns: &str| {
                let in_scope = match &scope {
                    Scope::All => true,
                    Scope::Namespace(n) => n == ns,
                };
                in_scope && (acting.contains(ns) || !held.contains(ns))
            }) as Arc<dyn Fn(&str) -> bool + Send + Sync>
        });
        self.owned.set(ours, theirs, namespaces);
    }

    /// For a cluster-wide engine: the namespace engines' Lease events.
    fn namespace_lease_events(&self) -> futures::stream::BoxStream<'static, watcher::Event<Lease>> {
        match self.coverage.subordinate_lease_name() {
            Some(name) => watcher(
                Api::<Lease>::all(self.ctx.client.clone()),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
            )
            .default_backoff()
            .filter_map(|e| async move {
                e.map_err(|e| tracing::warn!(error = %e, "namespace Lease watch error"))
                    .ok()
            })
            .boxed(),
            None => futures::stream::pending().boxed(),
        }
    }

    async fn read_namespace_leases(&mut self) -> kube::Result<()> {
        let Some(name) = self.coverage.subordinate_lease_name() else {
            return Ok(());
        };
        let api = Api::<Lease>::all(self.ctx.client.clone());
        let params = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
        let list = tokio::time::timeout(PROBE_EVERY * 2, api.list(&params))
            .await
            .map_err(|_| kube::Error::Service("listing namespace Leases timed out".into()))??;
        for lease in list {
            self.held
                .observe(watcher::Event::Apply(lease), &self.identity);
        }
        Ok(())
    }

    /// Tells front ends whether the API server answers (disconnected since the first
    /// failure, connected again once the watch and the probe both succeed).
    fn report_connection(&self, failing: bool, error: Option<String>) {
        if !failing && matches!(*self.connection.borrow(), Connection::Disconnected { .. }) {
            // Back: releases the outage held up try again now.
            self.ctx
                .healed
                .send_replace(crate::telemetry::RetryCause::ClusterHealed);
        }
        self.connection.send_if_modified(|c| match (failing, &*c) {
            (true, Connection::Connected) => {
                *c = Connection::Disconnected {
                    since: k8s_openapi::jiff::Timestamp::now(),
                    error: error.unwrap_or_default(),
                };
                true
            }
            (false, Connection::Disconnected { .. }) => {
                *c = Connection::Connected;
                true
            }
            _ => false,
        });
    }

    /// The view of one release as front ends should see it now.
    fn view_of(&self, store: &Store, key: &ReleaseKey) -> Option<ReleaseView> {
        let hr = store.releases.get(key)?;
        Some(ReleaseView {
            key: key.clone(),
            release: hr.clone(),
            live: self.seen_live.get(key).cloned().unwrap_or_default(),
            problem: store.bad.get(key).map(|(reason, _)| reason.clone()),
            elsewhere: self.elsewhere(key, hr),
        })
    }

    /// Brings one release's view up to date: O(log n), and nothing when it shows the same.
    fn refresh_view(&mut self, store: &Store, key: &ReleaseKey) {
        match self.view_of(store, key) {
            Some(view) => {
                if self.shown.get(key) != Some(&view) {
                    self.shown.insert(key.clone(), view);
                }
            }
            None => {
                self.shown.remove(key);
            }
        }
    }

    /// Every view again: for what touches all releases at once (the term starts or
    /// ends, a namespace engine's Lease), which is rare.
    fn refresh_all(&mut self, store: &Store) {
        for key in store.releases.keys() {
            self.refresh_view(store, key);
        }
    }

    /// Publishes the current views: a snapshot of the persistent map, O(1).
    fn publish(&self) {
        self.views
            .send_replace(Arc::new(Views::new(self.shown.clone(), self.listed)));
    }
}

/// A release is gone from the watch: its worker learns it was deleted.
fn forget(store: &mut Store, workers: &mut HashMap<ReleaseKey, Worker>, key: &ReleaseKey) {
    store.releases.remove(key);
    store.bad.remove(key);
    if let Some(w) = workers.remove(key) {
        let _ = w.inbox.send(Msg::Deleted);
    }
}
