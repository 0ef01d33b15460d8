//! The dispatcher: one watch on HelmReleases feeds the views and, while this process
//! holds the engine lease, one worker per release. Each event source of its loop has a
//! method of its own.

mod views;
mod wakeups;
mod workers;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::{HelmRelease, RawHelmRelease, Undecodable};
use crate::cluster::client::Scope;
use crate::engine::coverage::{self, Coverage};
use crate::engine::healing::watch_healing;
use crate::engine::lease::Role;
use crate::engine::liveness::{LIVENESS_EVERY, PROBE_EVERY, liveness_probe};
use crate::engine::namespaces::HeldNamespaces;
use crate::engine::release_drift;
use crate::engine::run::{Context, Memory, Msg};
use crate::engine::status;
use crate::engine::undecodable::report_undecodable;
use crate::engine::vocabulary::{
    Command, Connection, LiveMap, ReleaseKey, ReleaseMap, ReleaseView, Views, changed_keys,
};
use crate::engine::worker;
use crate::tracking;

/// The most often the views are rebuilt (a change reaches the screen within this).
const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A running worker: its mailbox and its own stop token (a release that leaves this
/// engine's coverage stops like a lost lease: the current step ends, nothing is undone).
pub(super) struct Worker {
    inbox: crate::engine::mailbox::Sender<Msg>,
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
    /// The config tracker's rollouts of release workloads, for their releases' records.
    pub(super) rolled_tx: mpsc::UnboundedSender<crate::tracking::Rolled>,
    pub(super) rolled: mpsc::UnboundedReceiver<crate::tracking::Rolled>,
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
    /// See `EngineConfig::start_after`; taken when the loop starts.
    pub(super) start_after: Option<watch::Receiver<bool>>,
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
    /// The HelmReleases of each Helm release name: the release a workload, a record or a
    /// rollout belongs to is found without a scan of every release (at 20,000 releases,
    /// a scan per workload event of a list held the dispatcher for seconds).
    named: HashMap<String, Vec<ReleaseKey>>,
}

impl Store {
    /// Keeps `hr` as the release `key` (in place of what it was).
    fn insert(&mut self, key: ReleaseKey, hr: Arc<HelmRelease>) {
        let name = hr.release_name();
        if let Some(old) = self.releases.insert(key.clone(), hr) {
            let was = old.release_name();
            if was == name {
                return;
            }
            self.unname(&key, &was);
        }
        self.named.entry(name).or_default().push(key);
    }

    fn remove(&mut self, key: &ReleaseKey) -> Option<Arc<HelmRelease>> {
        let old = self.releases.remove(key)?;
        self.unname(key, &old.release_name());
        Some(old)
    }

    fn unname(&mut self, key: &ReleaseKey, name: &str) {
        if let Some(keys) = self.named.get_mut(name) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.named.remove(name);
            }
        }
    }

    /// The HelmReleases whose Helm release is named `name`, with each one.
    pub(super) fn named<'a>(
        &'a self,
        name: &str,
    ) -> impl Iterator<Item = (&'a ReleaseKey, &'a Arc<HelmRelease>)> + 'a {
        self.named
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|key| Some((key, self.releases.get(key)?)))
    }
}

/// What the config tracker knows of a release: its (namespace, name) as Helm's and
/// whether this engine works on it.
fn ownership_of(st: &Loop, key: &ReleaseKey) -> Option<(String, String, bool)> {
    let hr = st.store.releases.get(key)?;
    Some((
        hr.target_namespace(),
        hr.release_name(),
        st.workers.contains_key(key),
    ))
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
        match &self.coverage.scope {
            crate::cluster::client::Scope::All => self.ctx.known.records.watching(true),
            crate::cluster::client::Scope::Namespace(ns) => {
                self.ctx.known.records.watching_only(ns)
            }
        }
        let mut workloads = self.workload_events();
        // Records and workloads are listed once the HelmReleases are and the front end
        // lets them (see `EngineConfig::start_after`).
        let mut opened = self.start_after.take();
        let mut open = opened.as_ref().is_none_or(|o| *o.borrow());
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
                // Listed once the HelmReleases are: at 20,000 releases, these lists
                // beside the HelmReleases' held the releases' own list (the dashboard's
                // table) back by seconds.
                Some(event) = records.next(), if self.listed && open => self.on_record(&st, event),
                Some(event) = workloads.next(), if self.listed && open => self.on_workload(&mut st, event),
                Some(Ok(())) = async { Some(opened.as_mut()?.wait_for(|o| *o).await.map(|_| ())) }, if !open => {
                    open = true;
                    opened = None;
                }
                Some((command, token)) = self.direct.recv() => self.on_command(&st, command, token),
                Some(rolled) = self.rolled.recv() => self.on_rolled(&st, rolled),
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
                let before = ownership_of(st, &ReleaseKey::of_meta(&raw.metadata));
                let key = self.on_release_applied(st, raw);
                // Most events are status writes, which change nothing the tracker knows:
                // at 10,000 releases, telling it anyway took most of the engine's CPU.
                st.ownership_stale |= ownership_of(st, &key) != before;
                touched = Some(key);
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
                        st.ownership_stale = true;
                    }
                }
                let first = !self.listed;
                self.listed = true;
                if first {
                    tracing::info!(releases = st.store.releases.len(), "HelmReleases listed");
                    // The first list is whole: its releases' workers start now, together
                    // (see `on_release_applied`), and the config tracker.
                    self.start_eligible(&st.store, &mut st.workers, st.term.as_ref(), false);
                    if let Some((t, _)) = &st.term {
                        self.start_tracker(t);
                    }
                }
            }
            Ok(watcher::Event::Delete(raw)) => {
                let key = ReleaseKey::of_meta(&raw.metadata);
                // A shard's watch reports a release relabelled away as deleted. One that
                // left only stops, as on a lost lease: its current step finishes and it
                // writes nothing more.
                let left = coverage::left_watch(&raw.metadata);
                if left && let Some(w) = st.workers.remove(&key) {
                    tracing::info!(release = %key, "relabelled to another shard: its worker stops after its current step");
                    w.hand_over(&self.ctx, &key);
                }
                forget(&mut st.store, &mut st.workers, &key);
                st.ownership_stale = true;
                touched = Some(key);
            }
            Err(e) => tracing::warn!(error = %e, "HelmRelease watch error"),
        }
        if let Some(key) = touched {
            self.refresh_view(&st.store, &key);
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
        // Moved, not cloned: a deep copy of every object the watch delivers is CPU
        // (every status write of every release) for nothing.
        let (hr, undecodable) = match raw.decode() {
            Ok(hr) => (Arc::new(hr), None),
            Err(u) => (Arc::new(u.placeholder.clone()), Some(u)),
        };
        let key = ReleaseKey::of(&hr);
        if let Some(seen) = st.relisted.as_mut() {
            seen.insert(key.clone());
        }
        st.store.insert(key.clone(), hr.clone());
        match undecodable {
            None => {
                st.store.bad.remove(&key);
                // Releases of the first list start once it is whole: thousands of workers
                // starting while its pages arrive took the CPU and the API server from
                // the list itself (a dashboard over 20,000 releases showed them all 8 s
                // after the API's list time). One that appears later may come from
                // another shard.
                if self.listed {
                    self.dispatch(&mut st.workers, st.term.as_ref(), &key, &hr, true, None);
                }
            }
            Some(u) => {
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
        // Before the first list is whole the store holds its first pages only: their
        // workers start with the rest once it is (see `on_release_applied`).
        if self.listed {
            self.start_eligible(&st.store, &mut st.workers, Some(&t), false);
        }
        self.share_ownership(&st.store, &st.workers);
        if self.listed {
            self.start_tracker(&t.0);
        }
        st.term = Some(t);
        self.refresh_all(&st.store);
        st.ownership_stale = true;
        st.dirty = true;
    }

    /// One writer rolls workloads on config changes: the lease holder, for the releases
    /// it reconciles. Started once the HelmReleases are listed (its own lists are large).
    fn start_tracker(&self, term: &CancellationToken) {
        self.tracker.send_replace(Some(crate::tracking::start(
            self.ctx.client.clone(),
            self.coverage.scope.clone(),
            crate::tracking::TrackerConfig {
                owned: self.owned.clone(),
                rolled: Some(self.rolled_tx.clone()),
                keys: Some(self.ctx.hash_keys.clone()),
                ..Default::default()
            },
            term.child_token(),
        )));
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
        if let Ok(event) = &event {
            self.ctx.known.records.observe(event);
        }
        if let (Ok(watcher::Event::Apply(record)), Some(_)) = (event, &st.term) {
            Self::wake_for_record(&st.store, &st.workers, &record.metadata);
        }
    }

    /// A watched object changed, went, or its watch re-listed: drift checks learn it;
    /// and when someone changed a release's workload (`kubectl scale`, `kubectl edit`),
    /// its HelmRelease checks for drift now, not at its interval.
    fn on_workload(&self, st: &mut Loop, event: wakeups::WorkloadEvent) {
        use crate::engine::object_changes::Seen;
        use wakeups::WorkloadEvent;
        let name_of = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            )
        };
        match event {
            WorkloadEvent::Applied {
                kind,
                meta,
                initial,
            } => {
                let (namespace, name) = name_of(&meta);
                self.ctx.known.objects.observe(Seen::Changed {
                    kind,
                    namespace: &namespace,
                    name: &name,
                    fingerprint: crate::engine::object_changes::fingerprint(&meta),
                });
                if st.term.is_some() {
                    Self::wake_for_workload(
                        &st.store,
                        &st.workers,
                        &mut st.generations,
                        &meta,
                        initial,
                    );
                }
            }
            WorkloadEvent::Deleted { kind, meta } => {
                let (namespace, name) = name_of(&meta);
                self.ctx.known.objects.observe(Seen::Gone {
                    kind,
                    namespace: &namespace,
                    name: &name,
                });
            }
            WorkloadEvent::Relisting(kind) => self.ctx.known.objects.observe(Seen::Relisting(kind)),
            WorkloadEvent::Relisted(kind) => self.ctx.known.objects.observe(Seen::Relisted(kind)),
        }
    }

    /// An operator's command from this process's front end: to the release's worker.
    fn on_command(&self, st: &Loop, command: Command, token: String) {
        let key = command.key().clone();
        if let (Some(w), Some(_)) = (st.workers.get(&key), &st.term) {
            let _ = w.inbox.send(Msg::Command(Box::new((command, token))));
        }
    }

    /// A release workload rolled for its config: the worker of the HelmRelease whose
    /// release it is records it (a release of no HelmRelease of ours has no record).
    fn on_rolled(&self, st: &Loop, rolled: crate::tracking::Rolled) {
        let (namespace, release) = &rolled.release;
        let Some(worker) = st.store.named(release).find_map(|(key, hr)| {
            let w = st.workers.get(key)?;
            (hr.target_namespace() == *namespace).then_some(w)
        }) else {
            return;
        };
        let _ = worker.inbox.send(Msg::ConfigRolled(Box::new(
            crate::engine::change_log::config_rollout(&rolled, k8s_openapi::jiff::Timestamp::now()),
        )));
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
}

/// A release is gone from the watch: its worker learns it was deleted.
fn forget(store: &mut Store, workers: &mut HashMap<ReleaseKey, Worker>, key: &ReleaseKey) {
    store.remove(key);
    store.bad.remove(key);
    if let Some(w) = workers.remove(key) {
        let _ = w.inbox.send(Msg::Deleted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hr(release_name: Option<&str>, ready_message: &str) -> Arc<HelmRelease> {
        let name = release_name.map_or(String::new(), |n| format!(", releaseName: {n}"));
        Arc::new(
            crate::text::yaml::from_str(&format!(
                "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: web, namespace: apps}}\nspec: {{chart: {{path: ./c}}{name}}}\nstatus: {{conditions: [{{type: Ready, status: 'True', reason: UpgradeSucceeded, message: '{ready_message}', lastTransitionTime: '2026-11-27T10:00:00Z'}}]}}"
            ))
            .unwrap(),
        )
    }

    /// The tracker is told which releases are ours only when that can have changed: a
    /// status write (nearly every event at 10,000 releases) changes nothing it knows.
    #[test]
    fn only_a_new_helm_name_or_worker_changes_what_the_tracker_knows() {
        let mut st = Loop::default();
        let key = ReleaseKey::of(&hr(None, "one"));
        assert_eq!(ownership_of(&st, &key), None);
        st.store.insert(key.clone(), hr(None, "one"));
        let before = ownership_of(&st, &key);
        assert_eq!(before, Some(("apps".into(), "web".into(), false)));
        st.store.insert(key.clone(), hr(None, "two"));
        assert_eq!(ownership_of(&st, &key), before);
        st.store
            .releases
            .insert(key.clone(), hr(Some("web-2"), "two"));
        assert_ne!(ownership_of(&st, &key), before);
        let (inbox, _rx) = crate::engine::mailbox::mailbox();
        st.workers.insert(
            key.clone(),
            Worker {
                inbox,
                stop: CancellationToken::new(),
                finished: CancellationToken::new(),
            },
        );
        assert_eq!(
            ownership_of(&st, &key),
            Some(("apps".into(), "web-2".into(), true))
        );
    }
}
